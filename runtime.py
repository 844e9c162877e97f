"""runtime.py: run a kernel.py `Kernel` on an OpenCL device with pyopencl, and prove it right with numpy.

render.py writes the kernel's OpenCL C (runtime.render is its render); this module finds the device, builds and
launches the program on buffers made from numpy arrays (`run`, `time_kernel`), evaluates the kernel's AST in plain
numpy (`reference`), and compares the two (`verify`). Where C leaves an answer open, the device and the reference
follow one rule, numpy's (docs/numerics.md lists them).

Usage: python runtime.py show NAME | verify [NAME]   (each with --help; the beam search is search/'s)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import math
import os
import pathlib
import pickle
import re
import signal
import statistics
import subprocess
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyopencl as cl

from demo import DEMOS, build_demo, demo_kernel, int_at_least, parse_opt_arg, run_command_line, write_file
from kernel import TARGETS, BinaryOps, BufferOps, ConstBuffer, Kernel, LazyOp, MemBuffer, Node, NumNode, OptOps
from kernel import ReduceOps, ShapeTracker, TernaryOps, UnaryOps, Variable, check_arg, dedup, dtypes, is_int, prod
from kernel import SHORT_FLOATS, verify_lazyop, walk_ast
from render import INT32_MAX, INT32_MIN, Program, c_types, element_dtype, is_float, is_image
from render import kernel_name, kernel_vars, reduce_identity, render, require_kernel, short_float


# ============================================================================================================
# dtypes: how each kernel.py dtype looks in numpy (render.py: in C)
# ============================================================================================================
def np_dtype(dt) -> np.dtype:
    """The numpy dtype of a kernel.py dtype (for images: of one element). bfloat16 arrays are float32 ones, rounded
    to bfloat16 on the way to the device (see _bf16_bits); NotImplementedError for a dtype the C has none for."""
    c_types(dt)
    e = element_dtype(dt)
    kind = "b" if e == dtypes.bool else "f" if dtypes.is_float(e) else "u" if dtypes.is_unsigned(e) else "i"
    return np.dtype(np.float32) if e == dtypes.bfloat16 else np.dtype(f"{kind}{e.itemsize}")


def _compute_np(dt) -> np.dtype:
    """numpy dtype the reference computes in: like the device, half is computed as float32 (rounded, _round_short)."""
    return np.dtype(np.float32) if np_dtype(dt) == np.float16 else np_dtype(dt)


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values as bfloat16 bits: the top 16 bits, rounded to nearest even as the stores round; NaN stays NaN."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def _bf16_floats(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _as_stored(x: np.ndarray, dt) -> np.ndarray:
    """x as a buffer of dtype dt holds it: for bfloat16, rounded to the nearest bfloat16 (kept as float32)."""
    return _bf16_floats(_bf16_bits(x)).reshape(np.shape(x)) if dt == dtypes.bfloat16 else x


def _round_short(x: np.ndarray, dt) -> np.ndarray:
    """x (floats or ints) rounded once to the nearest value of the short float dt (half, bfloat16), ties to even, as
    float32s: as kernel.py's round_to_float rounds a constant, and numpy a double to float16 (np.float16(x))."""
    bits, min_exp, largest = SHORT_FLOATS[dt]
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu" and x.dtype.itemsize == 8:  # to 53 bits rounding to odd (toward 0, the last bit set
            u = np.where(x < 0, np.uint64(0) - x.astype(np.uint64), x.astype(np.uint64))  # if inexact): one rounding
            shift = np.maximum(np.frexp(u.astype(np.float64))[1] - 53, 0).astype(np.uint64)
            shift += (u >> shift) >> np.uint64(53)  # the double rounded up to the next power of 2
            top = u >> shift
            odd = (top | ((top << shift) != u)).astype(np.float64)
            x = np.where(x < 0, -1.0, 1.0) * np.ldexp(odd, shift.astype(np.int64))
        x = np.asarray(x, np.float64)
        exp = np.maximum(np.frexp(x)[1] - 1, min_exp)  # x = 1.xxx * 2**exp; below 2**min_exp the spacing stays
        x = np.ldexp(np.round(np.ldexp(x, bits - 1 - exp)), exp - bits + 1)  # exact scalings; np.round: to even
        return np.where(np.abs(x) > largest, np.copysign(np.inf, x), x).astype(np.float32)


# ============================================================================================================
# buffers, inputs and outputs, at the values of the symbolic sizes' variables
# ============================================================================================================
@dataclass
class BufferInfo:
    """One buffer of a kernel: `size` elements (for an image: height * width * 4). A buffer that is `read` is an
    input; one that is written is an `output` (both: updated in place, starting from its input)."""

    idx: int
    dtype: Any
    size: int
    output: bool
    read: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.dtype.shape) if is_image(self.dtype) else (self.size,)


def buffers(ast: Sequence[LazyOp]) -> list[BufferInfo]:
    """The kernel's buffers in idx order, each as large as its furthest access."""
    outputs = {root.arg.idx for root in ast}
    found: dict[int, BufferInfo] = {}
    for x in (op for root in ast for op in root.lazyops if op.op in (BufferOps.LOAD, BufferOps.STORE)):
        size = _needed_size(x.arg.st)
        if is_image(x.arg.dtype) and size > prod(x.arg.dtype.shape):
            raise ValueError(f"a view of data{x.arg.idx} reaches element {size - 1}, beyond its image {x.arg.dtype}")
        size = prod(x.arg.dtype.shape) if is_image(x.arg.dtype) else size
        old = found.get(x.arg.idx)
        size, read = max(size, old.size if old else 0), x.op is BufferOps.LOAD or bool(old and old.read)
        found[x.arg.idx] = BufferInfo(x.arg.idx, x.arg.dtype, size, x.arg.idx in outputs, read)
    return [found[i] for i in sorted(found)]


def _needed_size(st: ShapeTracker) -> int:
    """How many elements the buffer behind st needs: one past the largest index read where valid. Like
    st.real_size(), but a masked first view (the one that addresses memory) only counts inside its mask."""
    first = st.views[0]
    box = first.mask or tuple((0, s) for s in first.shape)
    if any(lo >= hi for lo, hi in box):
        return 0
    top = first.offset + sum(stride * (hi - 1 if stride > 0 else lo) for stride, (lo, hi) in zip(first.strides, box))
    return min(st.real_size(), top + 1)


def _ast(k_or_ast) -> tuple[LazyOp, ...]:
    """The STOREs of a Kernel or of an AST, checked by the rules a Kernel checks (ValueError naming the one broken)."""
    if isinstance(k_or_ast, LazyOp):
        k_or_ast = (k_or_ast,)
    ast = tuple(k_or_ast.ast if hasattr(k_or_ast, "ast") else k_or_ast)
    verify_lazyop(*ast)
    return ast


def var_values(k_or_ast, var_vals: dict | None = None) -> dict[str, int]:
    """{name: value} for every variable of the kernel, from var_vals (keys are names or Variables), else the
    value a variable is bound to in the AST. A missing value, one outside the variable's range, or a name the
    kernel doesn't have is a ValueError that names the variable and its range."""
    variables = kernel_vars(_ast(k_or_ast))
    if var_vals is not None and not isinstance(var_vals, dict):
        raise ValueError(f"var_vals must be a dict {{name or Variable: value}}, got {type(var_vals).__name__}")
    if bad := [key for key in var_vals or {} if not isinstance(key, (str, Variable))]:
        raise ValueError(f"var_vals keys are variable names or Variables, got {bad[0]!r}")
    given = {key if isinstance(key, str) else key.expr: val for key, val in (var_vals or {}).items()}
    if unknown := sorted(set(given) - {v.expr for v in variables}):
        have = ", ".join(f"{v.expr} in [{v.min}, {v.max}]" for v in variables) or "none"
        raise ValueError(f"the kernel has no variable {', '.join(unknown)} (its variables: {have})")
    bound = {v.expr: v._val for root in _ast(k_or_ast) for v in root.vars() if v._val is not None}
    ret = {}
    for v in variables:
        val, rng = given.get(v.expr, bound.get(v.expr)), f"[{v.min}, {v.max}]"
        if val is None:
            raise ValueError(f"no value for the variable {v.expr} (range {rng}): pass var_vals={{'{v.expr}': value}}")
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or not v.min <= val <= v.max:
            raise ValueError(f"{v.expr}={val!r} is outside its range {rng}")
        if not INT32_MIN <= val <= INT32_MAX:  # the kernel takes each variable as an `int` argument
            raise ValueError(f"{v.expr}={val!r} doesn't fit the kernel's int argument (32 bits, at most {INT32_MAX})")
        ret[v.expr] = int(val)
    return ret


def infer(x, values: dict[str, int]) -> int:
    """The value of a size (an int, or a node of the variables) at values {name: int}."""
    return x if isinstance(x, int) else x.substitute({v: NumNode(values[v.expr]) for v in x.vars()}).b


def at_values(st: ShapeTracker, values: dict[str, int]) -> ShapeTracker:
    """st with every variable replaced by its value (values: {name: int}, every variable's): a plain integer one."""
    return st.at_values({v: values[v.expr] for v in st.unbind()[0].vars()})


def concrete_ast(k_or_ast, values: dict[str, int]) -> tuple[LazyOp, ...]:
    """The AST with every variable replaced by its value: plain integer ShapeTrackers and constants."""
    ast = _ast(k_or_ast)
    if not values:
        return ast

    def sub(x: LazyOp, srcs: list[LazyOp]) -> LazyOp:
        arg = x.arg
        if isinstance(arg, MemBuffer):
            arg = MemBuffer(arg.idx, arg.dtype, at_values(arg.st, values))
        elif isinstance(arg, ConstBuffer):
            val = infer(arg.val, values) if isinstance(arg.val, Node) else arg.val
            arg = ConstBuffer(val, arg.dtype, at_values(arg.st, values))
        return LazyOp(x.op, tuple(srcs), arg)

    memo: dict = {}  # an op shared by several others stays one op
    return tuple(walk_ast(root, sub, memo) for root in ast)


def check_inputs(infos: list[BufferInfo], inputs: Sequence[Any]) -> dict[int, np.ndarray]:
    """Inputs as flat contiguous arrays by buffer idx; a wrong count, dtype or size is a ValueError."""
    wanted = [b for b in infos if b.read]
    if len(inputs) != len(wanted):
        names = ", ".join(f"data{b.idx}" for b in wanted) or "none"
        raise ValueError(f"expected {len(wanted)} input arrays ({names}), got {len(inputs)}")
    arrays = {}
    for b, x in zip(wanted, inputs):
        if not isinstance(x, np.ndarray):
            raise ValueError(f"input data{b.idx} must be a numpy array, got {type(x).__name__}")
        if x.dtype != np_dtype(b.dtype):
            raise ValueError(f"input data{b.idx} has dtype {x.dtype}, expected {np_dtype(b.dtype)}")
        if is_image(b.dtype) and x.shape != b.shape:
            raise ValueError(f"input data{b.idx} is an image of shape {b.shape}, got an array of shape {x.shape}")
        if x.size < b.size or (b.output and x.size != b.size):  # updated in place, it is the output (of b.size) too
            how = "updates exactly" if b.output else "reads"
            raise ValueError(f"input data{b.idx} has {x.size} elements, the kernel {how} {b.size}")
        arrays[b.idx] = np.ascontiguousarray(x).reshape(-1)
    return arrays


def _poisoned(b: BufferInfo, second: bool = False) -> np.ndarray:
    """An output array filled with a value no kernel computes by accident (NaN for floats, the largest int): what a
    kernel forgets to write stays poisoned and fails verification. Where the true value is that poison, verify
    launches again with the `second` poison (a finite float, the smallest int), which differs from it."""
    dt = np_dtype(b.dtype)
    if dt == np.bool_:
        return np.full(b.size, 0xAB, np.uint8).view(np.bool_)  # neither True (1) nor False (0)
    if dt.kind == "f":
        return np.full(b.size, -1232.0 if second else np.nan, dt)  # -1232.0: a bfloat16 too
    return np.full(b.size, np.iinfo(dt).min if second else np.iinfo(dt).max, dt)


def _bytes(x: np.ndarray) -> np.ndarray:
    """A bool array as the bytes it is in device memory (a poisoned bool is neither 0 nor 1); any other as it is."""
    return x.view(np.uint8) if x.dtype == np.bool_ else x


def random_inputs(k_or_ast, seed: int = 0, var_vals: dict | None = None) -> list[np.ndarray]:
    """Inputs with real data for every input buffer: floats in [-1, 1), ints in [-8, 8] but never 0 (a divisor
    of 0 would crash the device), random bools. A symbolic kernel's buffers are sized for var_vals."""
    check_arg("random_inputs", "seed", seed, is_int(seed) and seed >= 0, "an int >= 0")
    rng = np.random.default_rng(seed)
    arrays = []
    for b in [b for b in buffers(concrete_ast(k_or_ast, var_values(k_or_ast, var_vals))) if b.read]:
        dt = np_dtype(b.dtype)
        if dt.kind == "f":
            x = rng.random(b.size, dtype=np.float32) * 2 - 1
        else:
            x = rng.random(b.size) < 0.5 if dt == np.bool_ else rng.integers(1, 9, b.size) * rng.choice([-1, 1], b.size)
        arrays.append(x.astype(dt).reshape(b.shape))
    return arrays


# ============================================================================================================
# the device: finding it, building programs, running kernels
# ============================================================================================================
class NoDeviceError(RuntimeError):
    """No OpenCL platform or device is reachable."""


class BuildError(RuntimeError):
    """A program didn't build: the compiler refused it, ended or hung building it (in a helper process), or built it
    without the kernel asked for. The message's first line says which, then the numbered source and the build log."""


class VerificationError(AssertionError):
    """A kernel's output differs from the numpy reference."""


@dataclass
class Device:
    """An OpenCL device, its context and queue, and the programs built for it (source -> its kernels by name)."""

    ctx: cl.Context
    queue: cl.CommandQueue
    name: str
    programs: OrderedDict[str, dict] = field(default_factory=OrderedDict)  # the PROGRAM_CACHE_SIZE most recently used


_device: Device | None = None
_device_init_lock = threading.Lock()  # the first use from several threads makes one device, whole before it is used
PROGRAM_CACHE_SIZE = 256  # built programs kept (about 73 KB each on PoCL): the most recently used ones
_programs_lock = threading.Lock()
_build_lock = threading.Lock()  # one build at a time: in Intel's CPU runtime, one of two at once sometimes never ended
# and blocked every later build of the process (the search builds side by side in processes of their own)
device_lock = threading.Lock()  # one thread at a time sets a kernel's arguments and launches it (the search's too)
_NO_DEVICE = 'no OpenCL device found. Install a CPU device with: pip install -e ".[cpu]" (PoCL and Intel\'s runtime)'
# Intel's CPU runtime reports "Compilation started/done" on every build; pyopencl would warn about each
warnings.filterwarnings("ignore", category=cl.CompilerWarning)


def cache_dir() -> str:
    """The project's cache folder (OpenCL driver lists, the search's answers): $KERNELPY_CACHE, else
    $XDG_CACHE_HOME/kernelpy, else ~/.cache/kernelpy."""
    caches = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("KERNELPY_CACHE") or os.path.join(caches, "kernelpy")


def _register_pip_opencl_drivers() -> None:
    """Let the OpenCL ICD loader find Intel's CPU runtime when pip installed it (the `cpu` extra). The wheel puts
    libintelocl.so in <venv>/lib, but its .icd file names the path of the machine it was built on, so the loader never
    finds it. Point OCL_ICD_VENDORS at a folder whose .icd names the installed library, beside copies of the system's
    own .icd files so that a GPU driver stays visible. A user's OCL_ICD_VENDORS wins."""
    lib = os.path.join(sys.prefix, "lib", "libintelocl.so")
    if os.environ.get("OCL_ICD_VENDORS") or not os.path.exists(lib):
        return
    folder, system = pathlib.Path(cache_dir(), "opencl-vendors"), pathlib.Path("/etc/OpenCL/vendors")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        icds = {"intel-cpu-pip.icd": lib + "\n"}
        icds |= {f.name: f.read_text() for f in (system.iterdir() if system.is_dir() else ())}
        for name, text in icds.items():  # written anew only where it changed, and whole: another process may read it
            if not (path := folder / name).is_file() or path.read_text() != text:
                write_file(str(path), text)
    except OSError:
        return  # an unwritable cache: the loader sees only the system's drivers
    os.environ["OCL_ICD_VENDORS"] = str(folder)


PROBE = "__kernel void probe(__global float* x) { x[0] = 1.0f; }"


def _probe(device) -> str:
    """'' where `device` compiles a one-line kernel, else why not. It builds in a helper process (own(): a
    compiler that crashes or hangs is a device that doesn't work, never this process's end). PoCL's LLVM rejects CPUs
    newer than itself ('unknown target CPU generic', seen on AMD Zen 5): such a device is passed over for the next."""
    compiler = own(ctx_name(device))
    try:
        if compiler is None:  # no Python to start: built here
            cl.Program(cl.Context([device]), PROBE).build()
        else:
            compiler(PROBE, "probe")
        return ""
    except (cl.Error, BuildError, ChildProcessError) as e:
        if compiler is not None:
            compiler.end(for_good=False)  # no process kept for a device that doesn't work
        return str(e).splitlines()[0] if str(e) else type(e).__name__


def working_devices():
    """Every OpenCL device of this machine whose compiler builds a test kernel, GPUs first, then CPUs: a generator (a
    device is tried when it is reached). KERNELPY_DEVICE's index counts in this order."""
    _register_pip_opencl_drivers()
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    ranked = [d for kind in (cl.device_type.GPU, cl.device_type.CPU) for d in devices if d.type & kind]
    return (d for d in ranked + [d for d in devices if d not in ranked] if not _probe(d))


def get_device() -> Device:
    """The device everything runs on: the one KERNELPY_DEVICE chooses among working_devices() (by its index, or by a
    part of its or its platform's name: see pick_device), else the one PYOPENCL_CTX names, else the first that works."""
    global _device
    with _device_init_lock:  # one device a process: never two made at once, nor a half-made one used
        if _device is None:
            _device = _open_device()
    return _device


def _open_device() -> Device:
    try:
        if (choice := os.environ.get("PYOPENCL_CTX")) and not os.environ.get("KERNELPY_DEVICE"):
            _register_pip_opencl_drivers()
            try:
                ctx = cl.create_some_context(interactive=False)
            except (cl.Error, RuntimeError, ValueError) as e:  # the devices may be fine: only the choice is wrong
                raise NoDeviceError(
                    f"PYOPENCL_CTX={choice!r} names no OpenCL device of this machine ({e}); unset it to take the "
                    "first device that works"
                ) from None
        else:  # an index tries the devices up to it (the default, 0: the first that works), a name every device
            choice = os.environ.get("KERNELPY_DEVICE") or "0"
            index = choice.isascii() and choice.isdigit()  # (str.isdigit alone takes '²', which int() refuses)
            working = list(itertools.islice(working_devices(), int(choice) + 1 if index else None))
            if not working:  # each device probed again, to say why
                found = [f"{d.name.strip()} ({_probe(d)})" for p in cl.get_platforms() for d in p.get_devices()]
                found = ", ".join(found) or "none"
                raise NoDeviceError(f"{_NO_DEVICE} (found: {found}; none of them compiles a kernel)")
            names = [f"{d.name.strip()} ({d.platform.name.strip()})" for d in working]
            ctx = cl.Context([working[pick_device(choice, names)]])
    except cl.Error as e:
        raise NoDeviceError(f"{_NO_DEVICE} ({e})") from None
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return Device(ctx, queue, ctx.devices[0].name.strip())


def pick_device(choice: str, names: Sequence[str], source: str = "KERNELPY_DEVICE") -> int:
    """The index of the device `choice` names among `names` (working_devices(), as "device (platform)"): its index,
    or a part of its name found in no other (case ignored). NoDeviceError, one line listing the devices, where it
    names none of them or several (`source`: what the choice was given as, for the message)."""
    if choice.isascii() and choice.isdigit():  # an index in ASCII digits ('²' is a digit to str.isdigit)
        hits = [int(choice)] if int(choice) < len(names) else []
    else:
        hits = [i for i, name in enumerate(names) if choice.lower() in name.lower()]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(f"{i}: {names[i]}" for i in hits or range(len(names))) or "none"
    if hits:
        raise NoDeviceError(
            f"{source}={choice!r} names {len(hits)} devices ({listed}): give its index, or more of its name"
        )
    raise NoDeviceError(f"{source}={choice!r} names none of the devices that work here ({listed})")


def device_limits() -> tuple[int, list[int]]:
    """(threads per work-group, per-dim maximum) of the device: what render(k, limits) needs."""
    device = get_device().ctx.devices[0]
    return device.max_work_group_size, list(device.max_work_item_sizes)


_CAPS = """LOCAL_MEM_SIZE MAX_WORK_GROUP_SIZE MAX_WORK_ITEM_SIZES MAX_PARAMETER_SIZE ADDRESS_BITS MAX_MEM_ALLOC_SIZE
GLOBAL_MEM_SIZE IMAGE2D_MAX_WIDTH IMAGE2D_MAX_HEIGHT MAX_READ_IMAGE_ARGS MAX_WRITE_IMAGE_ARGS""".split()


def device_caps(kern=None) -> dict[str, int]:
    """The device's limits by their OpenCL names (CL_DEVICE_LOCAL_MEM_SIZE, ..., CL_DEVICE_MAX_WORK_ITEM_SIZES[d] for
    each dim d), and with a built kernel the work-group size it allows (CL_KERNEL_WORK_GROUP_SIZE)."""
    device = get_device().ctx.devices[0]
    caps = {f"CL_DEVICE_{name}": getattr(device, name.lower()) for name in _CAPS}
    caps |= {f"CL_DEVICE_MAX_WORK_ITEM_SIZES[{d}]": n for d, n in enumerate(caps["CL_DEVICE_MAX_WORK_ITEM_SIZES"])}
    if kern is not None:
        caps["CL_KERNEL_WORK_GROUP_SIZE"] = kern.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
    return caps


def check_limits(prg: Program, infos: dict[int, BufferInfo] | None = None, kern=None) -> None:
    """A ValueError naming the first of the device's limits that a launch of prg would pass (`infos`: its buffers at
    the launch's values; `kern`: prg built). OpenCL refuses such a launch, or crashes the process (PoCL and Intel's
    runtime do, given more __local memory than they have)."""
    caps, local = device_caps(kern), prg.local_size or [1]
    nbytes = lambda b: b.size * (2 if b.dtype == dtypes.bfloat16 else np_dtype(b.dtype).itemsize)  # noqa: E731
    args = caps["CL_DEVICE_ADDRESS_BITS"] // 8 * len(prg.args) + 4 * len(prg.vars)  # pointers (images too), ints
    bufs = [infos[i] for i, _ in prg.args] if infos is not None else []
    images = [b for b, (_, kind) in zip(bufs, prg.args) if kind == "image"]
    writes = sum(b.output for b in images)
    needs = [("DEVICE_LOCAL_MEM_SIZE", prg.local_bytes, "bytes of __local memory")]
    needs += [(f"{w}_WORK_GROUP_SIZE", prod(local), "work-items in a work-group") for w in ("DEVICE_MAX", "KERNEL")]
    needs += [(f"DEVICE_MAX_WORK_ITEM_SIZES[{d}]", n, f"work-items in dim {d}") for d, n in enumerate(local)]
    needs += [("DEVICE_MAX_PARAMETER_SIZE", args, "bytes of kernel arguments")]
    needs += [("DEVICE_MAX_MEM_ALLOC_SIZE", nbytes(b), f"bytes of buffer data{b.idx}") for b in bufs]
    needs += [("DEVICE_GLOBAL_MEM_SIZE", sum(nbytes(b) for b in bufs), "bytes of buffers in all")]
    needs += [("DEVICE_IMAGE2D_MAX_WIDTH", b.shape[1], f"pixels in a row of image data{b.idx}") for b in images]
    needs += [("DEVICE_IMAGE2D_MAX_HEIGHT", b.shape[0], f"rows of image data{b.idx}") for b in images]
    needs += [("DEVICE_MAX_READ_IMAGE_ARGS", len(images) - writes, "images read")]
    needs += [("DEVICE_MAX_WRITE_IMAGE_ARGS", writes, "images written")]
    for name, got, what in needs:
        if got > (most := caps.get(f"CL_{name}", got)):
            raise ValueError(f"{prg.name} needs {got} {what}, more than CL_{name} = {most} of {get_device().name}")


def build(src: str, name: str, compiler=None):
    """Kernel `name` of an OpenCL program (a source of several kernels is built once for all of them), compiled once
    per source while among the PROGRAM_CACHE_SIZE most recent; `compiler(src, name)`, where given, builds in another
    process and returns the device's binary (a Compiler: where the project builds its own kernels first). BuildError
    where it doesn't build, or builds without kernel `name`."""
    with _programs_lock:  # the beam search builds in several threads at once
        if (kernels := get_device().programs.get(src)) is not None:
            get_device().programs.move_to_end(src)
            if name in kernels:
                return kernels[name]
            raise BuildError(f"the program built holds no kernel {name}")
    _keep(src, kernels := _program(src, name, compiler))
    return kernels[name]


def build_all(parts: Sequence[tuple[str, str]], compiler=None) -> list:
    """Kernel `name` of each (source, name) of `parts`, sources with one prelude (all before the kernel: pragmas,
    helpers), built as one program: the compiler's cost of a program is paid once (the search's candidates of a round
    build 1.3 to 2.8 times as fast). Each is kept under its own source, as build keeps it. BuildError where the whole
    doesn't build: build them alone to find which."""
    head = parts[0][0][: parts[0][0].index("__kernel void")]
    if any(not src.startswith(head + "__kernel void") for src, _ in parts):
        raise ValueError("build_all builds sources of one prelude")
    bodies = [src[len(head) :].replace(f"void {name}(", f"void {name}_{i}(", 1) for i, (src, name) in enumerate(parts)]
    kernels = _program(head + "".join(bodies), f"{parts[0][1]}_0", compiler)
    if missing := [f"{name}_{i}" for i, (_, name) in enumerate(parts) if f"{name}_{i}" not in kernels]:
        raise BuildError(f"the program built holds no kernel {missing[0]}")
    for i, (src, name) in enumerate(parts):
        _keep(src, {name: kernels[f"{name}_{i}"]})
    return [kernels[f"{name}_{i}"] for i, (_, name) in enumerate(parts)]


def _program(src: str, name: str, compiler=None) -> dict:
    """{name: kernel} of the program of src, built (by `compiler` first, where given); BuildError as build says."""
    ctx = get_device().ctx
    try:
        binary = compiler(src, name) if compiler else None
        with _build_lock:  # not under _programs_lock: another thread may find a built kernel meanwhile
            program = (cl.Program(ctx, ctx.devices, [binary]) if binary else cl.Program(ctx, src)).build()
        if name not in (kernels := {kern.function_name: kern for kern in program.all_kernels()}):
            raise BuildError(f"the program built holds no kernel {name}")  # (getattr: an AttributeError)
    except (cl.Error, BuildError, ChildProcessError) as e:
        log = f"the compiler refused it\n{e}" if isinstance(e, cl.Error) else str(e)
        numbered = "\n".join(f"{n:4d}  {line}" for n, line in enumerate(src.splitlines(), 1))
        why = log.partition("\n")[0]
        raise BuildError(f"OpenCL build of {name} failed: {why}\n{numbered}\nbuild log:\n{log}") from None
    return kernels


def _keep(src: str, kernels: dict) -> None:
    with _programs_lock:
        (programs := get_device().programs)[src] = kernels
        while len(programs) > PROGRAM_CACHE_SIZE:
            programs.popitem(last=False)


# ============================================================================================================
# helper processes: where the project builds its own kernels first, so a device's compiler can't take it down
# ============================================================================================================
COMPILE_TIMEOUT = 120  # seconds a helper process may take to start, or to build one source: then it is killed
_COMPILER_CODE = "import sys; sys.path.insert(0, {here!r}); import runtime; runtime._compile_worker()"


class Compiler:
    """A process that builds OpenCL sources for one device (PYOPENCL_CTX's "platform:device"), one at a time, and
    answers with their binaries: a compiler that refuses a source, crashes, aborts, hangs or builds a program without
    the kernel asked for fails that build alone (docs/search.md). It starts at its first source (again after a crash,
    never after end()), and ends when its input closes.

    KERNELPY_COMPILER_FAULT=KIND:REGEX, the tests' broken compiler on any machine (tests/test_faults.py), makes each
    process started under it fail every build of a source that REGEX matches (re.search, re.S): `abort` aborts the
    process (as pip's PoCL 3.0 did on a Zen 4), `no-kernel` builds the source with its kernels made plain functions (a
    program that builds without its kernel, as that PoCL built a float16 fma()), `hang` never answers."""

    def __init__(self, device: str | None = None):
        self.device, self.proc, self.lock, self.ended = device or ctx_name(), None, threading.Lock(), False

    def __call__(self, src: str, name: str) -> bytes:
        """The device's binary of `src`, a program that holds kernel `name`; BuildError where it isn't built,
        ChildProcessError where the process ends or gives no answer in COMPILE_TIMEOUT seconds (then it is killed)."""
        with self.lock:  # a second thread's source waits: two sent at once, two answers could be read crosswise
            if not self.ended and (self.proc is None or self.proc.poll() is not None):
                code = _COMPILER_CODE.format(here=os.path.dirname(os.path.abspath(__file__)))
                env = {k: v for k, v in os.environ.items() if k != "KERNELPY_DEVICE"} | {"PYOPENCL_CTX": self.device}
                # a session of its own: Ctrl-C is this process's alone; silent: a build's log comes in its answer
                pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
                self.proc = subprocess.Popen([sys.executable, "-c", code], **pipes, env=env, start_new_session=True)
                self._answer()  # its device open: the time a build may take starts now
            if self.ended:  # before, or while this thread started a process: no answer would come
                self.end()
                raise ChildProcessError("the search ended its compiles")
            source, built, answer = self._answer((src, name))
        if source != src:
            self.end(for_good=False)
            raise ChildProcessError("the compiler's process answered for another source")
        if not built:
            raise BuildError(answer)
        return answer

    def _answer(self, question=None):
        """The process's next answer (to `question`, where given), within COMPILE_TIMEOUT seconds."""
        timed_out = threading.Event()
        timer = threading.Timer(COMPILE_TIMEOUT, lambda: timed_out.set() or self.proc.kill())
        timer.start()
        try:
            if question is not None:
                pickle.dump(question, self.proc.stdin)
                self.proc.stdin.flush()
            return pickle.load(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):  # it ended: a crash, end() or the timer
            self.end(for_good=False)
            if timed_out.is_set():
                raise ChildProcessError(f"no answer from the compiler in {COMPILE_TIMEOUT} s") from None
            status = self.proc.returncode
            status = f"{status}: {signal.strsignal(-status)}" if status < 0 else status  # killed by a signal
            raise ChildProcessError(f"the compiler's process ended (exit status {status})") from None
        finally:
            timer.cancel()

    def end(self, for_good: bool = True) -> None:
        """Kill the process: for good when its user gives up on its builds, else until the next source."""
        self.ended = self.ended or for_good
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def ctx_name(device=None) -> str:
    """PYOPENCL_CTX's name ("platform:device") of a device (default: this process's): what a Compiler builds for."""
    device = device or get_device().ctx.devices[0]
    return f"{cl.get_platforms().index(device.platform)}:{device.platform.get_devices().index(device)}"


def _compile_worker() -> None:
    """A Compiler's process: says it is ready, then answers each (source, kernel name) on stdin with (source, True,
    binary) or (source, False, why: its first line says it, the build log follows)."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the driver prints goes to stderr, never among the answers
    ctx = get_device().ctx
    pickle.dump(None, answers)
    answers.flush()
    with contextlib.suppress(EOFError):
        while True:
            src, name = pickle.load(sys.stdin.buffer)
            try:
                program = cl.Program(ctx, _with_fault(src)).build()
                if name in [kern.function_name for kern in program.all_kernels()]:
                    answer = (src, True, program.get_info(cl.program_info.BINARIES)[0])
                else:  # CL_BUILD_SUCCESS, and no such kernel (pip's PoCL 3.0 built a float16 fma() so)
                    log = program.get_build_info(ctx.devices[0], cl.program_build_info.LOG)
                    answer = (src, False, f"the program built holds no kernel {name}\n{log}")
            except cl.Error as e:
                answer = (src, False, f"the compiler refused it\n{e}")
            except ValueError as e:  # a fault of no such kind
                answer = (src, False, str(e))
            pickle.dump(answer, answers)
            answers.flush()


def _with_fault(src: str) -> str:
    """The source a Compiler's process builds, after KERNELPY_COMPILER_FAULT's fault where it applies (Compiler)."""
    fault = os.environ.get("KERNELPY_COMPILER_FAULT", "")
    kind, _, pattern = fault.partition(":")
    if not fault or not re.search(pattern, src, re.S):
        return src
    if kind == "abort":
        os.abort()
    if kind == "hang":
        threading.Event().wait()
    if kind == "no-kernel":
        return src.replace("__kernel ", "")
    raise ValueError(f"KERNELPY_COMPILER_FAULT={fault!r}: no fault {kind!r} (abort, no-kernel or hang)")


_own: dict[str, Compiler] = {}  # each device's helper process for the project's own kernels (own())
_own_lock = threading.Lock()


def own(device: str | None = None) -> Compiler | None:
    """The helper process that builds every kernel but the search's candidates (device probes, search/cost.py's FMA
    forms and streams, bench.py's, a Launch's) for a device (PYOPENCL_CTX's name; default: this process's) first: pass
    it to build. None where Python has no executable to start (an embedded interpreter): they build here."""
    if not sys.executable:
        return None
    device = device or ctx_name()
    with _own_lock:
        if device not in _own:
            _own[device] = Compiler(device)
        return _own[device]


def runtime_local_size(global_size: Sequence[int]) -> list[int]:
    """The work-group of a kernel that leaves it to the device (local size None): the largest divisor <= 32 of dim 0."""
    return [max(d for d in range(1, 33) if global_size[0] % d == 0)] + [1] * (len(global_size) - 1)


def _on_device(b: BufferInfo, kind: str, host: dict[int, np.ndarray], second_poison: bool = False) -> tuple:
    """(the host array buffer b starts as, b made on the device from it as a "buffer" or an "image"): its input data
    (an output that is read too: a copy, read() writes into it), else poison."""
    data = (host[b.idx].copy() if b.output else host[b.idx]) if b.read else _poisoned(b, second_poison)
    if b.dtype == dtypes.bfloat16:
        data = _bf16_bits(data)  # read() turns them back into floats
    raw = _bytes(data)
    if raw.size == 0:  # a buffer of no elements, or only ever read in its padding: OpenCL has no empty
        raw = np.zeros(4 if kind == "image" else 1, raw.dtype)  # buffers or images: one element (pixel)
    mf, ctx = cl.mem_flags, get_device().ctx
    flags = (mf.READ_WRITE if b.read and b.output else mf.WRITE_ONLY if b.output else mf.READ_ONLY) | mf.COPY_HOST_PTR
    if kind != "image":
        return data, cl.Buffer(ctx, flags, hostbuf=raw)
    h, w, _ = b.shape if b.size else (1, 1, 4)
    channel = cl.channel_type.HALF_FLOAT if raw.dtype == np.float16 else cl.channel_type.FLOAT
    fmt = cl.ImageFormat(cl.channel_order.RGBA, channel)
    return data, cl.create_image(ctx, flags, fmt, shape=(w, h), hostbuf=raw.reshape(h, w, 4))


def device_buffers(k: Kernel, inputs: Sequence, var_vals: dict | None = None) -> dict[tuple[int, str], Any]:
    """{(idx, "buffer"): device buffer} of each of k's buffers at var_vals, made as a Launch makes them (the inputs'
    data, outputs poisoned): a Launch's `device_args`, made before any kernel of k's AST is built."""
    infos = buffers(concrete_ast(k, var_values(k, var_vals)))
    host = check_inputs(infos, inputs)
    return {(b.idx, "buffer"): _on_device(b, "buffer", host)[1] for b in infos}


class Launch:
    """A kernel built and its buffers on the device, ready to run any number of times."""

    def __init__(self, k: Kernel, inputs: Sequence, var_vals=None, prg=None, device_args=None, second_poison=False):
        """`prg`: k's Program, rendered with the device's limits. `device_args`: a dict that keeps the device buffers
        between launches of kernels of one AST (the beam search times many), filled on first use. See run too."""
        values = var_values(k, var_vals)  # checked before anything is built or launched
        self.infos = {b.idx: b for b in buffers(concrete_ast(k, values))}
        host = check_inputs(list(self.infos.values()), inputs)
        self.prg = prg or render(k, device_limits())
        check_limits(self.prg, self.infos)  # before anything is built or allocated
        self.kern = build(self.prg.src, self.prg.name, own())  # first in a helper: a crash there is a BuildError
        check_limits(self.prg, self.infos, self.kern)
        self.outputs, self.args = {}, []
        for idx, kind in self.prg.args:
            if device_args is not None and (idx, kind) in device_args:
                self.args.append(device_args[idx, kind])
                continue
            data, made = _on_device(self.infos[idx], kind, host, second_poison)
            if self.infos[idx].output:
                self.outputs[idx] = data
            self.args.append(made)
            if device_args is not None:
                device_args[idx, kind] = made
        self.args += [np.int32(values[v.expr]) for v in self.prg.vars]
        global_size = [infer(g, values) for g in self.prg.global_size]  # symbolic launch sizes at these values
        if (local := self.prg.local_size) is not None:
            self.global_size, self.local_size = [g * n for g, n in zip(global_size, local)], local
        else:  # the kernel lets the device choose; we choose for it: PoCL's own choice can take a minute to compile
            self.global_size, self.local_size = global_size, runtime_local_size(global_size)

    def launch(self):
        if 0 in self.global_size:
            return None  # an empty kernel: nothing to run (OpenCL refuses a launch of no work-items)
        with device_lock:  # sets the kernel object's arguments: one thread at a time
            return self.kern(get_device().queue, self.global_size, self.local_size, *self.args)

    def read(self) -> list[np.ndarray]:
        queue = get_device().queue
        for (idx, kind), arg in zip(self.prg.args, self.args):
            if idx in self.outputs and self.outputs[idx].size:
                out = _bytes(self.outputs[idx])
                if kind == "image":
                    h, w, _ = self.infos[idx].shape
                    cl.enqueue_copy(queue, out.reshape(h, w, 4), arg, origin=(0, 0), region=(w, h))
                else:
                    cl.enqueue_copy(queue, out, arg)
        queue.finish()
        outs = {i: _bf16_floats(x) if self.infos[i].dtype == dtypes.bfloat16 else x for i, x in self.outputs.items()}
        return [outs[i].reshape(self.infos[i].shape) for i in sorted(outs)]


def run(k: Kernel, *inputs: np.ndarray, var_vals: dict | None = None, second_poison: bool = False) -> list[np.ndarray]:
    """Run the kernel on the device; returns its output arrays in idx order (images as (height, width, 4)).
    A symbolic kernel runs at var_vals ({"i": 37}; names or Variables as keys). Outputs start poisoned (see
    _poisoned; `second_poison` picks the other poison)."""
    require_kernel(k, "run")
    check_arg("run", "second_poison", second_poison, isinstance(second_poison, bool), "True or False")
    launch = Launch(k, inputs, var_vals, second_poison=second_poison)
    launch.launch()
    return launch.read()


def time_kernel(
    k: Kernel, *inputs: np.ndarray, runs: int = 10, warmup: int = 2, var_vals: dict | None = None, device_args=None
) -> float:
    """Median seconds of the kernel alone, from OpenCL profiling events, after `warmup` runs. `device_args`: a dict
    (as Launch's) that keeps the device buffers between calls, so that kernels of one AST compared in turn run on the
    same memory (fresh buffers are other pages, which a cache may hold differently)."""
    require_kernel(k, "time_kernel")
    for name, value, low in (("runs", runs, 1), ("warmup", warmup, 0)):
        check_arg("time_kernel", name, value, is_int(value) and value >= low, f"an int >= {low}")
    launch = Launch(k, inputs, var_vals, device_args=device_args)
    times = []
    for i in range(warmup + runs):
        if (event := launch.launch()) is None:
            return 0.0  # an empty kernel takes no time
        event.wait()
        if i >= warmup:
            times.append((event.profile.end - event.profile.start) * 1e-9)
    return statistics.median(times)


# ============================================================================================================
# the reference: a plain numpy evaluation of the AST
# ============================================================================================================
def _np_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's maximum (a NaN wins), with +0.0 above -0.0: np.maximum returns its first operand of two equal ones,
    so the sign of a zero would depend on the order of a reduce."""
    if np.asarray(a).dtype.kind != "f":
        return np.maximum(a, b)
    zeros = (a == 0) & (b == 0)  # of two zeros, +0.0 if either is: a, unless a is -0.0
    return np.where(zeros, np.where(np.signbit(a), b, a), np.maximum(a, b))


def _np_recip(a: np.ndarray) -> np.ndarray:
    """1/a; for integers truncated toward zero, and 0 for a = 0 as x/0 (numpy's own 1/0 depends on the machine)."""
    if a.dtype.kind == "f":
        return np.reciprocal(a)
    return np.where(a == 0, np.zeros((), a.dtype), np.reciprocal(np.where(a == 0, np.ones((), a.dtype), a)))


def _np_idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a/b; for integers C's quotient, truncated toward zero."""
    if a.dtype.kind == "f":
        return np.true_divide(a, b)
    q = a // b  # floor division; truncation differs where the remainder is non-zero and the signs differ
    return np.where((a % b != 0) & ((a < 0) != (b < 0)), q + np.ones((), q.dtype), q)


# each op in numpy: the reference's meaning (render.py's _C_OPS: the C); on bools as 0 and 1 (render's _C_OPS_BOOL)
_NP_OPS = {
    UnaryOps.EXP2: np.exp2,
    UnaryOps.LOG2: np.log2,
    UnaryOps.SIN: np.sin,
    UnaryOps.SQRT: np.sqrt,
    UnaryOps.NEG: np.negative,
    UnaryOps.RECIP: _np_recip,
    BinaryOps.ADD: np.add,
    BinaryOps.MUL: np.multiply,
    BinaryOps.IDIV: _np_idiv,
    BinaryOps.MOD: np.fmod,  # C's: the remainder takes the dividend's sign
    BinaryOps.MAX: _np_max,
    BinaryOps.CMPLT: np.less,
    BinaryOps.CMPNE: np.not_equal,
    BinaryOps.XOR: np.bitwise_xor,
    BinaryOps.SHL: np.left_shift,
    BinaryOps.SHR: np.right_shift,
    TernaryOps.WHERE: np.where,
    TernaryOps.MULACC: lambda a, b, c: a * b + c,
}
_NP_OPS_BOOL = {
    UnaryOps.NEG: np.logical_not,
    BinaryOps.ADD: np.logical_or,
    BinaryOps.MUL: np.logical_and,
    BinaryOps.MAX: np.logical_or,
    UnaryOps.RECIP: lambda a: a,
    BinaryOps.IDIV: np.logical_and,
    BinaryOps.MOD: lambda a, b: np.zeros(np.broadcast(a, b).shape, np.bool_),
}


def _np_cast_float_to_int(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """A float to an integer dtype the way the device converts it (_float_to_int): truncated toward zero, NaN to 0,
    and values beyond the dtype's range clamped to its smallest or largest value."""
    info, t = np.iinfo(to), np.trunc(x.astype(np.float64))
    over, under, nan = t >= float(info.max) + 1, t < float(info.min), np.isnan(t)  # both limits are exact doubles
    inside = np.where(over | under | nan, 0, t).astype(to)
    return np.where(over, info.max, np.where(under, info.min, np.where(nan, 0, inside))).astype(to)


def _np_cast(x: np.ndarray, dt) -> np.ndarray:
    """x (in the dtype its values are computed in) CAST to dt, as the device's _cast: a float to an int truncated and
    clamped (NaN: 0), to half or bfloat16 rounded once, anything to bool `!= 0` (numpy's astype(bool): NaN is True)."""
    if x.dtype.kind == "f" and np_dtype(dt).kind in "iu":
        return _np_cast_float_to_int(x, np_dtype(dt))
    return _round_short(x, short) if (short := short_float(dt)) else x.astype(_compute_np(dt), copy=False)


def _np_bitcast(x: np.ndarray, to) -> np.ndarray:
    """The bits of x (4-byte values) as dtype `to`; every float NaN is the one quiet NaN 0x7fc00000, as on the device
    (float_bits)."""
    if x.dtype.kind == "f":
        x = np.where(np.isnan(x), np.uint32(0x7FC00000).view(np.float32), x).astype(np.float32)
    return np.ascontiguousarray(x).view(np_dtype(to))


def _chunks(shape: tuple[int, ...], reduced: set, limit: int) -> list[tuple[tuple[int, int], ...]]:
    """Split the iteration space into boxes of about `limit` elements, cutting only axes that aren't reduced
    (so that every reduction is complete inside one box), outer axes first."""
    block = list(shape)
    for axis in range(len(shape)):
        if prod(block) <= limit:
            break
        if axis not in reduced:
            block[axis] = max(1, shape[axis] * limit // prod(block))
    return list(itertools.product(*[[(lo, min(lo + b, s)) for lo in range(0, s, b)] for s, b in zip(shape, block)]))


# float ops whose result may differ from the device's in the last bits: OpenCL allows sin, exp2, log2, sqrt and a
# division a few ulps, and a sum adds in another order
_INEXACT = {UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SIN, UnaryOps.SQRT, UnaryOps.RECIP, BinaryOps.IDIV, ReduceOps.SUM}
# ops whose answer jumps where such a float moves by an ulp: a cast to an int or a bool, a comparison, the bits of a
# float, a float remainder (at each multiple of the divisor)
_JUMPS = {UnaryOps.CAST, UnaryOps.BITCAST, BinaryOps.CMPLT, BinaryOps.CMPNE, BinaryOps.MOD}
# ops that keep the order of each source, the others fixed, where an int doesn't wrap around (a cast to bool
# doesn't): a jump's lowest and highest answers give theirs
_ORDERED = {BinaryOps.MAX, BinaryOps.CMPLT, TernaryOps.WHERE, ReduceOps.MAX, UnaryOps.CAST, UnaryOps.NEG}
_ORDERED |= {BinaryOps.ADD, BinaryOps.MUL, TernaryOps.MULACC, ReduceOps.SUM}


def _strided(flat: np.ndarray, st: ShapeTracker, writes: bool = False) -> np.ndarray | None:
    """The elements st reads of a flat array as a numpy view of it, no copy (a gather of 16M elements took 0.2 s),
    where st is one view without a mask: its index offset + sum(i * stride) is numpy's own; else None (gather with
    ShapeTracker.indices). `writes`: none where two elements are one (a broadcast axis), as a write must not."""
    if len(st.views) > 1 or (v := st.views[0]).mask is not None or writes and any(
            s == 0 and n > 1 for s, n in zip(v.strides, v.shape)):  # fmt: skip
        return None
    low = v.offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s < 0)
    high = v.offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s > 0)
    if 0 in v.shape or low < 0 or high >= flat.size:
        return None
    strides = [s * flat.itemsize for s in v.strides]
    return np.lib.stride_tricks.as_strided(flat[v.offset :], v.shape, strides, writeable=writes)


class _Reference:
    """Evaluates an AST over one box of the iteration space at a time. Every load gathers through
    ShapeTracker.indices(); axes a buffer doesn't move along (stride 0) are read once and broadcast. A STORE into
    another dtype is a CAST to it. With a `nudge` (-1 or 1) and a tolerance (verify's), each jump (_JUMPS) of inexact
    floats takes its lowest (or its highest) answer for floats anywhere within the tolerance, and `uncertain` says
    of each output element where a correct kernel's answer may lie (see uncertainty)."""

    def __init__(self, ast: tuple[LazyOp, ...], data: dict[int, np.ndarray], nudge: int = 0, tol=(0.0, 0.0)):
        casts = [LazyOp(UnaryOps.CAST, r.src, r.arg.dtype) for r in ast]  # a STORE into another dtype converts so
        self.ast = tuple(r if r.src[0].dtype == r.arg.dtype else LazyOp(r.op, (c,), r.arg) for r, c in zip(ast, casts))
        self.data, self.nudge, self.tol, self.inexacts, self.ks = data, nudge, tol, {}, {}
        # reduce ops of one kernel all read the same shape (verify_lazyop): it is the iteration space
        self.reduceops = dedup(x for root in ast for x in root.lazyops if x.op in ReduceOps)
        leaf = next(x for x in (self.reduceops[0] if self.reduceops else ast[0]).lazyops if x.op in BufferOps)
        self.full = leaf.arg.st.shape
        self.strides: dict[int, tuple] = {}
        self.loaded: dict[LazyOp, tuple] = {}  # each load's last part read, and its values
        self.wide: dict[LazyOp, tuple] = {}  # each factor of a contraction's last values, and them in float64

    def _view(self, st, box):
        """st restricted to the box: axes where st has size 1 (reduced, or broadcast) stay whole."""
        if id(st) not in self.strides:
            self.strides[id(st)] = st.real_strides()
        axes = zip(st.shape, self.strides[id(st)], box)
        return st.shrink(tuple((0, 1) if s == 1 or stride == 0 else rng for s, stride, rng in axes))

    def inexact(self, x: LazyOp) -> bool:
        """Whether float x may differ from the device's value (an _INEXACT op computed it, or its float sources)."""
        return walk_ast(x, lambda op, srcs: is_float(op.dtype) and (op.op in _INEXACT or any(srcs)), self.inexacts)

    def ends(self, x: LazyOp, srcs: list[np.ndarray], ret: np.ndarray, dt: np.dtype) -> tuple[np.ndarray, ...]:
        """A jump of floats each within the tolerance of its value: the lowest and the highest answers that floats
        in those ranges give, and where they differ (ret: the answer)."""
        rtol, atol = self.tol
        vals = [s.astype(np.float64) for s in srcs]
        tols = [np.where(np.isfinite(v), rtol * np.abs(v) + atol, 0) * self.inexact(s) for v, s in zip(vals, x.src)]
        dist, tol = vals[0] - vals[1] if len(vals) > 1 else vals[0], sum(tols)
        if x.op is BinaryOps.MOD:  # fmod(a, b) = a - trunc(a/b)*b jumps where a/b passes a whole number but 0; the
            (a, b), q = vals, vals[0] / vals[1]  # answers take a's sign, below |b|
            t = tols[0] + np.abs(q) * tols[1]
            near = np.isfinite(q) & (np.trunc((a - t) / b) != np.trunc((a + t) / b))
            low, high = np.where(a < t, -np.abs(b), 0), np.where(a > -t, np.abs(b), 0)
            return np.where(near, low, ret), np.where(near, high, ret), near
        if x.op is UnaryOps.BITCAST:  # a float's bits order its values on one side of 0 only: a range across 0 is
            across = (dist < tol) & (dist > -tol)  # two ranges of bits, +0.0 to its top (nudge +-1), -0.0 to its
            top = abs(self.nudge) == 1  # bottom (+-2): between their ends lie the bits of every positive float
            ends = (np.where(across & top, 0.0, dist - tol), np.where(across & ~top, -0.0, dist + tol))
            low, high = np.minimum(*(bits := [_np_bitcast(e, x.arg) for e in ends])), np.maximum(*bits)
        elif x.op is BinaryOps.CMPLT:
            low, high = dist < -tol, dist < tol
        elif x.op is BinaryOps.CMPNE or dt == np.bool_:  # a != b, or a float as a bool (a != 0)
            low, high = ~(np.abs(dist) <= tol), (dist != 0) | (np.abs(dist) <= tol)
        else:
            low, high = _np_cast_float_to_int(dist - tol, dt), _np_cast_float_to_int(dist + tol, dt)
        return low, high, low != high

    def uncertainty(self, x: LazyOp, srcs: list[np.ndarray], ret: np.ndarray, near, box) -> np.ndarray | int:
        """Of each element of x: 0 where any floats within the tolerance give its answer (but for a float's
        rounding); 1 where it follows one jump whose floats lie that near its boundary (`near`) through ops that
        keep its order (_ORDERED), so that its answers lie between the nudges'; 2 where they may lie anywhere."""
        k = sum(self.ks.get(s, 0) for s in x.src)  # the sources' (those of a reduce of nothing aren't computed)
        if near is not None:
            return np.where(np.asarray(k) > 0, 2, near).astype(np.int8)
        if not np.any(k):
            return 0
        shape = tuple(hi - lo for lo, hi in box)
        if x.op in ReduceOps:
            k = np.sum(np.broadcast_to(k, shape), axis=x.arg, keepdims=True, dtype=np.int32)
        if x.op not in _ORDERED or x.dtype == dtypes.bool and x.op is UnaryOps.CAST:
            return 2 * (k > 0)
        exact = ret  # an int that wraps around breaks the order: the answer, unwrapped
        if ret.dtype.kind in "iu" and x.op is UnaryOps.CAST and srcs[0].dtype.kind in "iu":
            exact = srcs[0].astype(np.float64)
        elif ret.dtype.kind in "iu" and x.op is ReduceOps.SUM:
            exact = np.sum(np.broadcast_to(srcs[0], shape).astype(np.float64), axis=x.arg, keepdims=True)
        elif ret.dtype.kind in "iu" and x.op in (UnaryOps.NEG, BinaryOps.ADD, BinaryOps.MUL, TernaryOps.MULACC):
            exact = _NP_OPS[x.op](*(s.astype(np.float64) for s in srcs))
        return np.where((k > 0) & (exact != ret), 2, np.minimum(k, 2)).astype(np.int8)

    def value(self, x: LazyOp, box, memo: dict) -> np.ndarray:
        """x's values over the box; memo holds every op's computed there (each op once, its sources first)."""
        nothing = lambda op: op.op in ReduceOps and any(self.full[a] == 0 for a in op.arg)  # noqa: E731
        stop = lambda op: nothing(op) or self.contracts(op)  # noqa: E731
        return walk_ast(x, lambda op, srcs: self.op_value(op, srcs, box, memo), memo, stop=stop)

    def contracts(self, x: LazyOp) -> bool:
        """Whether x is a sum of float32 products (a matmul's, a conv's), not of nothing, that contraction() computes
        (not for verify's nudges: their jumps need each product)."""
        mul = x.src[0] if x.op is ReduceOps.SUM and all(self.full[a] for a in x.arg) else None
        return not self.nudge and mul is not None and mul.op is BinaryOps.MUL and mul.dtype == dtypes.float32

    def contraction(self, x: LazyOp, box, memo: dict) -> np.ndarray | None:
        """Sum x of products a * b over the box, its axes that neither a nor b moves along left out: numpy's einsum
        in float64, where each product of two float32s is exact (conv2d's reference took 4.5 to 6.2 s, making its
        products); None where a product may overflow a float32, or a factor isn't finite (the device's is then inf)."""
        a, b = (self.value(s, box, memo) for s in x.src[0].src)
        for s, v in zip(x.src[0].src, (a, b)):  # in float64, and its largest magnitude (inf or NaN where one isn't
            if self.wide.get(s, (None,))[0] is not v:  # finite), once: a part the last box loaded too is kept
                wide = v.astype(np.float64)
                self.wide[s] = (v, wide, max(wide.max(initial=0), -wide.min(initial=0)))
        (_, wa, ma), (_, wb, mb) = self.wide[x.src[0].src[0]], self.wide[x.src[0].src[1]]
        if not ma * mb < np.finfo(np.float32).max:
            return None
        moves = [i for i, (lo, hi) in enumerate(box) if hi - lo > 1]
        labels = [[i for i in moves if v.shape[i] > 1] for v in (a, b)]
        out = [i for i in moves if i not in x.arg and (i in labels[0] or i in labels[1])]
        times = prod(box[i][1] - box[i][0] for i in x.arg if i not in labels[0] + labels[1])  # a term repeated
        # (the box's axes of 1 are a's and b's too: squeezed, each keeps the axes it has labels for)
        ret = np.einsum(wa.squeeze(), labels[0], wb.squeeze(), labels[1], out, optimize=True) * times + 0.0
        shape = [hi - lo if i in out else 1 for i, (lo, hi) in enumerate(box)]
        return np.broadcast_to(ret.reshape(shape), [1 if i in x.arg else hi - lo for i, (lo, hi) in enumerate(box)])

    def op_value(self, x: LazyOp, srcs: list[np.ndarray], box, memo: dict) -> np.ndarray:
        dt, short = _compute_np(x.dtype), short_float(x.dtype)
        if self.contracts(x):  # value() left its products out: their sum by einsum, else the products made here
            if (ret := self.contraction(x, box, memo)) is not None:
                return ret.astype(dt)
            srcs = [self.value(x.src[0], box, memo)]  # each rounded to a float32, as on the device
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            st = self._view(x.arg.st, box)
            if (last := self.loaded.get(x)) is not None and last[0] == st:  # the same part as the last box's: kept
                ret = last[1]
            elif x.op is BufferOps.CONST and all(v.mask is None for v in st.views):
                ret = np.full((1,) * len(st.shape), x.arg.val, dt)
            elif x.op is BufferOps.LOAD and (view := _strided(self.data[x.arg.idx], st)) is not None:
                ret = view.astype(dt, copy=False)  # (read-only: no op writes into a buffer's data)
            else:
                idx, valid = st.indices()
                vals = self.data[x.arg.idx][idx] if x.op is BufferOps.LOAD else np.full(idx.shape, x.arg.val)
                ret = np.where(valid, vals, 0).astype(dt)
            self.loaded[x] = (st, ret)
        elif x.op in ReduceOps and any(self.full[a] == 0 for a in x.arg):  # a reduce of nothing: its identity
            shape = tuple(1 if a in x.arg else hi - lo for a, (lo, hi) in enumerate(box))
            ret = np.full(shape, reduce_identity(x.op, x.dtype), dt)
        elif x.op in ReduceOps:
            src = np.broadcast_to(srcs[0], tuple(hi - lo for lo, hi in box))
            axes = tuple(x.arg)
            if x.op is ReduceOps.MAX:  # as repeated _np_max: a NaN wins, and a +0.0 anywhere beats every -0.0
                ret = np.max(src, axis=axes, keepdims=True, initial=reduce_identity(x.op, x.dtype))
                if dt.kind == "f":
                    has_plus_zero = np.any((src == 0) & ~np.signbit(src), axis=axes, keepdims=True)
                    ret = np.where((ret == 0) & has_plus_zero, np.zeros((), dt), ret)
            elif dt == np.bool_:
                ret = np.any(src, axis=axes, keepdims=True)
            elif dt.kind == "f":  # in float64: the reference should be closer to the truth than the kernel; from
                # +0.0, as the kernel's accumulator starts (a sum of -0.0s is +0.0; np.sum would keep -0.0)
                ret = np.sum(src, axis=axes, keepdims=True, dtype=np.float64) + 0.0
            else:
                ret = np.sum(src, axis=axes, keepdims=True, dtype=dt)
        elif x.op is UnaryOps.CAST:
            ret = _np_cast(srcs[0], x.arg)
        elif x.op is UnaryOps.BITCAST:
            ret = _np_bitcast(srcs[0], x.arg)
        else:  # in the dtype of the sources: integers wrap, as on the device
            src_dt = x.src[1].dtype if x.op is TernaryOps.WHERE else x.src[0].dtype
            fn = (_NP_OPS_BOOL if np_dtype(src_dt) == np.bool_ and x.op in _NP_OPS_BOOL else _NP_OPS)[x.op]
            if x.op is TernaryOps.MULACC and short:  # a MUL, then an ADD, each rounded (numpy's float16)
                srcs, fn = [_round_short(srcs[0] * srcs[1], short), srcs[2]], np.add
            ret = np.asarray(fn(*srcs))
        near = None
        if self.nudge and x.op in _JUMPS and not (x.op is UnaryOps.CAST and is_float(x.arg)):
            if any(map(self.inexact, x.src)):
                low, high, near = self.ends(x, srcs, ret, dt)
                ret = high if self.nudge > 0 else low
        if x.op not in BufferOps:  # in the dtype computed in; half and bfloat16 rounded once, from the value
            ret = _round_short(ret, short) if short else ret.astype(dt, copy=False)
        if self.nudge:
            self.ks[x] = self.uncertainty(x, srcs, ret, near, box)
        return ret

    def run(self, outputs: dict[int, np.ndarray], limit: int = 1 << 22) -> None:
        self.uncertain = {i: np.zeros(out.size, np.int8) for i, out in outputs.items()}
        if 0 in (out_shape := self.ast[0].arg.st.shape):
            return  # no outputs to compute
        # a reduce over an empty axis: compute it on a box of the output's shape, where its source is empty
        full = tuple(o if s == 0 else s for s, o in zip(self.full, out_shape))
        for box in _chunks(full, {axis for r in self.reduceops for axis in r.arg}, limit):
            memo, self.ks = {}, {}
            for root in self.ast:
                st = root.arg.st.shrink(tuple((0, 1) if s == 1 else rng for s, rng in zip(root.arg.st.shape, box)))
                val, ks = self.value(root.src[0], box, memo), self.ks.get(root.src[0], 0)
                if (out := _strided(_bytes(outputs[root.arg.idx]), st, writes=True)) is not None:
                    out[...], _strided(self.uncertain[root.arg.idx], st, writes=True)[...] = val, ks
                    continue
                idx, valid = st.indices()
                _bytes(outputs[root.arg.idx])[idx[valid]] = np.broadcast_to(val, st.shape)[valid]
                self.uncertain[root.arg.idx][idx[valid]] = np.broadcast_to(ks, st.shape)[valid]


def reference(k_or_ast, *inputs: np.ndarray, var_vals: dict | None = None) -> list[np.ndarray]:
    """The outputs of the kernel's (original, unoptimized) AST, computed with numpy: what `run` must return."""
    return _evaluate(k_or_ast, inputs, var_vals)[0]


def _evaluate(k_or_ast, inputs: Sequence[np.ndarray], var_vals, nudge: int = 0) -> tuple[list, list]:
    """reference's outputs; with a nudge, verify's lowest or highest answers, and each output's uncertainty (flat;
    see _Reference)."""
    ast = concrete_ast(k_or_ast, var_values(k_or_ast, var_vals))
    infos = buffers(ast)
    host = check_inputs(infos, inputs)
    # as uploaded, in the register dtype; one element where a buffer only ever read in its padding is empty (a
    # padded element reads index 0)
    padded = {b.idx: host[b.idx] if host[b.idx].size else np.zeros(1, host[b.idx].dtype) for b in infos if b.read}
    data = {b.idx: _as_stored(padded[b.idx].astype(_compute_np(b.dtype), copy=False), b.dtype) for b in infos if b.read}
    outputs = {b.idx: _as_stored(host[b.idx].copy() if b.read else _poisoned(b), b.dtype) for b in infos if b.output}
    with np.errstate(all="ignore"):
        (ref := _Reference(ast, data, nudge, _tolerance(ast))).run(outputs)
    outs = [b for b in infos if b.output]
    return [outputs[b.idx].reshape(b.shape) for b in outs], [ref.uncertain[b.idx] for b in outs]


def _tolerance(ast: tuple[LazyOp, ...]) -> tuple[float, float]:
    """(relative, absolute) tolerance of each float element: float32 math differs from the float64 reference in the
    last bits, half in many more; a sum of n terms also differs by about sqrt(n) roundings of its terms (which are
    about 1 for random_inputs), however small the sum itself."""
    rtol = 2e-2 if {element_dtype(x.dtype).name for root in ast for x in root.lazyops} & {"half", "__bf16"} else 1e-3
    terms = 1  # the most terms a reduce combines into one of its results
    for r in (x for root in ast for x in root.lazyops if x.op in ReduceOps):
        shape = next(x for x in r.lazyops if x.op in BufferOps).arg.st.shape
        terms = max(terms, prod(shape[a] for a in r.arg))
    return rtol, rtol * max(1.0, math.sqrt(terms))


def _check_expected(k: Kernel, outs: list[BufferInfo], expected: Any) -> list[np.ndarray]:
    """`expected` as verify takes it: a list with a numpy array of each output's shape."""
    each, n = f"one per output of {kernel_name(k)}", len(outs)
    if not isinstance(expected, (list, tuple)):
        raise ValueError(f"expected must be a list of numpy arrays, {each}, got {type(expected).__name__}")
    if len(expected) != len(outs):
        raise ValueError(f"expected {n} output array{'s' if n != 1 else ''} ({each}), got {len(expected)}")
    for b, want in zip(outs, expected):
        if not isinstance(want, np.ndarray):
            raise ValueError(f"expected output data{b.idx} must be a numpy array, got {type(want).__name__}")
        if np.shape(want) != b.shape:
            raise ValueError(f"expected output data{b.idx} has shape {np.shape(want)}, the kernel writes {b.shape}")
    return list(expected)


def _written(ast: tuple[LazyOp, ...], b: BufferInfo) -> np.ndarray | None:
    """Which elements of output b the STOREs of the (concrete) AST write, as a flat mask; None: all of them."""
    sts = [root.arg.st for root in ast if root.arg.idx == b.idx]
    if any(st.contiguous and st.size == b.size for st in sts):
        return None
    mask = np.zeros(b.size, np.bool_)
    for st in sts:
        idx, valid = st.indices()
        mask[idx[valid]] = True
    return None if mask.all() else mask


def _keeps_unwritten(want: np.ndarray, b: BufferInfo, written: np.ndarray | None, second: bool) -> np.ndarray:
    """What the launch must leave in output b: `want` where the kernel writes, and where it doesn't, what the
    buffer started with (its input when it is also read, else the launch's poison)."""
    if written is None or b.read:  # an output that is also read starts as its input, as in the reference
        return want
    ret = np.asarray(want, dtype=np_dtype(b.dtype)).reshape(-1).copy()
    _bytes(ret)[~written] = _bytes(_poisoned(b, second))[~written]
    return ret.reshape(b.shape)


def _is_poison(x: np.ndarray, b: BufferInfo, second: bool) -> np.ndarray:
    """Where output x of buffer b holds its launch's poison, bit for bit (an output also read has none)."""
    bits = lambda a: a.reshape(-1).view(f"u{a.itemsize}")  # noqa: E731
    return np.zeros(x.size, np.bool_) if b.read else bits(x) == bits(_poisoned(b, second))


def _differences(got: np.ndarray, want: np.ndarray, tol: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(bad, err): which elements differ beyond the tolerance, each on its own scale, and by how much."""
    got, want = got.reshape(-1), want.reshape(-1)
    if got.dtype == np.bool_:
        got, want = got.view(np.uint8), want.view(np.uint8)
    bad, err = got != want, np.zeros(got.size)  # an equal element is close at any tolerance: only the rest are weighed
    at = np.flatnonzero(bad)
    g, w = got[at].astype(np.float64), want[at].astype(np.float64)
    if got.dtype.kind == "f":
        bad[at] = ~np.isclose(g, w, rtol=tol[0], atol=tol[1], equal_nan=True)
    with np.errstate(invalid="ignore"):  # inf - inf: a mismatch all the same
        err[at] = np.where(bad[at], np.nan_to_num(np.abs(g - w), nan=np.inf), 0)
    return bad, err


def _between(got: np.ndarray, low: np.ndarray, high: np.ndarray, tol: tuple[float, float]) -> np.ndarray:
    """Where got is low, high or between them, or close to either of them (floats)."""
    g, lo, hi = (_bytes(np.asarray(x, got.dtype).reshape(-1)) for x in (got, low, high))
    inside = (np.minimum(lo, hi) <= g) & (g <= np.maximum(lo, hi))
    return inside | ~_differences(got, low, tol)[0] | ~_differences(got, high, tol)[0]


def verify(k: Kernel, *inputs: np.ndarray, expected: Sequence | None = None, var_vals: dict | None = None) -> None:
    """Run the kernel and compare each element of each output with the reference (or `expected`, the reference
    computed earlier for the same AST and inputs); raises VerificationError with a readable report. An element the
    kernel never writes keeps its poison and fails; where the true value is the poison itself, a second launch with the
    second poison catches it. An output the STORE writes in part (`out[4:12] = x`) must keep its poison elsewhere.
    Where an output depends on inexact floats (_INEXACT) through an op whose answer jumps there (_JUMPS), it may
    be any answer the reference gives for floats within the tolerance (_Reference.uncertainty; docs/numerics.md)."""
    require_kernel(k, "verify")
    values = var_values(k, var_vals)
    ast = concrete_ast(k, values)
    outs = [b for b in buffers(ast) if b.output]
    want_all = reference(k, *inputs, var_vals=values) if expected is None else _check_expected(k, outs, expected)
    written = {b.idx: _written(ast, b) for b in outs}

    def true_value_is_poison(b: BufferInfo, want: np.ndarray) -> bool:
        poison, want = _poisoned(replace(b, size=1)), np.asarray(want).reshape(-1)  # (one element: a 16M add's
        # output poisoned whole took 0.07 s of each verify)
        if poison.dtype == np.bool_:
            return False  # the byte 0xAB is no bool
        same = np.isnan(want) if poison.dtype.kind == "f" else poison == want  # NaN, or the int's largest
        return not b.read and bool((same if written[b.idx] is None else same & written[b.idx]).any())

    def launch(second: bool) -> list[np.ndarray]:  # the second poison's launch, where it is needed
        if second not in launches:
            launches[second] = run(k, *inputs, var_vals=values, second_poison=second)
        return launches[second]

    launches: dict[bool, list[np.ndarray]] = {}
    if any(true_value_is_poison(b, want) for b, want in zip(outs, want_all)):
        launch(True)
    bounds: list[tuple[list, list]] = []
    at_values = f" at {', '.join(f'{n}={v}' for n, v in values.items())}" if values else ""
    for second in (False, True):
        if second and second not in launches:
            continue
        for n, (b, got, want) in enumerate(zip(outs, launch(second), want_all)):
            want = _keeps_unwritten(want, b, written[b.idx], second)
            bad, err = _differences(got, want, tol := _tolerance(ast))
            if bad.any():  # near a jump of inexact floats: between the lowest and highest answers of floats within
                if not bounds:  # the tolerance, where `want` is too; or any answer the kernel wrote (_Reference);
                    bitcast = any(x.op is UnaryOps.BITCAST for root in ast for x in root.lazyops)  # (both sides of 0)
                    bounds += [_evaluate(k, inputs, values, nudge) for nudge in (-1, 1, -2, 2)[: 4 if bitcast else 2]]
                ends = [_keeps_unwritten(end[n], b, written[b.idx], second) for end, _ in bounds]
                uncertain = np.maximum.reduce([u[n] for _, u in bounds])  # (an int may wrap at one end only)
                pairs = [ends[i : i + 2] for i in range(0, len(ends), 2)]
                inside = lambda x: np.logical_or.reduce([_between(x, lo, hi, tol) for lo, hi in pairs])  # noqa: E731
                bad &= ~((uncertain == 1) & inside(got) & inside(want))
                if (free := bad & (uncertain == 2)).any():  # unwritten: both launches' poisons
                    bad &= ~free | (_is_poison(got, b, second) & _is_poison(launch(not second)[n], b, not second))
                err[~bad] = 0
            if bad.any():
                at = int(np.argmax(err))
                where = f"index {at}" + (f" = {np.unravel_index(at, b.shape)}" if len(b.shape) > 1 else "")
                if written[b.idx] is not None and not written[b.idx][at]:
                    where += " (not written by the STORE: it must keep what it held)"
                raise VerificationError(
                    f"{render(k).name}{at_values} with opts {[str(o) for o in k.applied_opts]} on {k.opts.device}: "
                    f"output data{b.idx} differs in {int(bad.sum())} of {bad.size} elements; max error "
                    f"{err[at]:.4g} at {where}: got {got.reshape(-1)[at]}, expected {want.reshape(-1)[at]}"
                )


# ============================================================================================================
# command line
# ============================================================================================================
def sample_var_vals(k_or_ast) -> list[dict[str, int]]:
    """Values to run a symbolic kernel at: each variable at its smallest, in between and at its largest ([{}]: none)."""
    variables = kernel_vars(k_or_ast)
    picks = (lambda v: v.min, lambda v: (v.min + v.max) // 2 + 1, lambda v: v.max)
    return [{v.expr: pick(v) for v in variables} for pick in picks] if variables else [{}]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python runtime.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Render kernel.py's kernels to OpenCL C, run them on a GPU or the PoCL CPU device, verify "
        "them against numpy. (The beam search is search/'s: python -m search NAME.)",
        epilog=f"demo kernels: {', '.join(DEMOS)}\n\nexamples:\n  python runtime.py show matmul\n"
        "  python runtime.py show matmul --opt UPCAST:0:4 --opt LOCAL:1:16 --target opencl\n"
        "  python runtime.py verify\n  python runtime.py verify sum --opt GROUPTOP:0:16\n\nAn opt is OP:AXIS:AMT, "
        f"OP one of {', '.join(o.name for o in OptOps)}. KERNELPY_DEVICE (or PYOPENCL_CTX) chooses the OpenCL device.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print the OpenCL C of a demo kernel and its launch sizes")
    show.add_argument("name", choices=list(DEMOS))
    ver = sub.add_parser("verify", help="run demo kernels (heuristics or --opt) and check them against numpy")
    ver.add_argument("name", nargs="?", choices=list(DEMOS), help="one demo kernel (default: all)")
    ver.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the random inputs (0)")
    for sp in (show, ver):
        opt_help = "apply these opts in order instead of the heuristics (repeatable)"
        sp.add_argument("--opt", action="append", type=parse_opt_arg, metavar="OP:AXIS:AMT", help=opt_help)
        sp.add_argument("--target", choices=list(TARGETS), help="optimize for this target (default: the demo's)")
    args = p.parse_args(argv)
    if args.command == "show":
        prg = render(demo_kernel(args.name, args.target, args.opt)[0])  # printing its step table
        print(f"  launch          {prg.launch()}\n\n{prg.src}")
        return 0
    log = functools.partial(print, flush=True)
    failed, count, kernels = 0, 0, 0
    width = max([16] + [len(str(o)) + 2 for o in args.opt or ()])  # as wide as demo_kernel's column of opts
    for name in [args.name] if args.name else list(DEMOS):
        k, rejected = build_demo(name, args.target, args.opt)
        for opt, why in rejected:
            log(f"  {str(opt):<{width}}rejected: {why}")
        samples, kernels = sample_var_vals(k), kernels + 1
        inputs = random_inputs(k, seed=args.seed, var_vals=samples[-1])  # sized for the largest values
        try:
            compiled = len(get_device().programs)
            for values in samples:
                verify(k, *inputs, var_vals=values)
                count += 1
                at = " at " + ", ".join(f"{n}={v}" for n, v in values.items()) if values else ""
                log(f"ok   {name:12s} {render(k).name:40s} {', '.join(str(o) for o in k.applied_opts)}{at}")
            if len(samples) > 1:
                log(f"     {len(samples)} lengths, {len(get_device().programs) - compiled} program compiled")
        except (AssertionError, RuntimeError, ValueError) as e:
            failed += 1
            log(f"FAIL {name}: {e}")
    runs = f" ({count} runs: a symbolic kernel runs at several lengths)" if count != kernels - failed else ""
    ok = kernels - failed
    log(f"{ok} kernel{'' if ok == 1 else 's'} verified{runs}, {failed} failed on {get_device().name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python runtime.py", one_line=(NoDeviceError,)))
