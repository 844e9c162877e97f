"""Exercise 12 (render.py:vector_axis): seeded wrong answers, each a mistake a student makes."""

from kernel import ConstBuffer, dtypes
from render import VECTOR_WIDTHS, is_image


def width_8_allowed(k, i):
    """A float8 accepted: an upcast axis of 8 read as one vector, which OpenCL C has but tinygrad never renders."""
    buf = k.bufs[i]
    if isinstance(buf, ConstBuffer) or not k.opts.supports_float4:
        return None, "no vectors"
    if not (buf.dtype in (dtypes.float, dtypes.half) or is_image(buf.dtype)):
        return None, "not float or half"
    if len(axes := k.get_float4_upcast_dim(i)) != 1:
        return None, "not one stride-1 upcast axis"
    widths = (4,) if is_image(buf.dtype) else (*VECTOR_WIDTHS, 8)
    return (axes[0], "") if k.sts[i].shape[axes[0]] in widths else (None, "not a vector width")


def image_width_2(k, i):
    """An image read two floats at a time: an image's vector is one pixel, 4 wide, never float2."""
    buf = k.bufs[i]
    if isinstance(buf, ConstBuffer) or not k.opts.supports_float4:
        return None, "no vectors"
    if not (buf.dtype in (dtypes.float, dtypes.half) or is_image(buf.dtype)):
        return None, "not float or half"
    if len(axes := k.get_float4_upcast_dim(i)) != 1:
        return None, "not one stride-1 upcast axis"
    return (axes[0], "") if k.sts[i].shape[axes[0]] in VECTOR_WIDTHS else (None, "not a vector width")


def two_unit_axes_accepted(k, i):
    """The first of two stride-1 upcast axes taken: tinygrad vectorizes only where exactly one has stride 1 (a conv's
    input is read with stride 1 along the output's x and the window's)."""
    buf = k.bufs[i]
    if isinstance(buf, ConstBuffer) or not k.opts.supports_float4:
        return None, "no vectors"
    if not (buf.dtype in (dtypes.float, dtypes.half) or is_image(buf.dtype)):
        return None, "not float or half"
    if not (axes := k.get_float4_upcast_dim(i)):
        return None, "no upcast axis has stride 1"
    widths = (4,) if is_image(buf.dtype) else VECTOR_WIDTHS
    return (axes[0], "") if k.sts[i].shape[axes[0]] in widths else (None, "not a vector width")
