"""render.py: a kernel.py `Kernel` as OpenCL C. Standard library only: `python kernel.py demo` shows the C on a
bare Python; runtime.py compiles and runs it, and proves it right against numpy.

Each colour of a kernel's shape becomes code as demo.py's COLOR_LEGEND says (`python kernel.py demo` prints it);
in the rendered C every id and loop names its colour and axis, e.g. `int gidx0 = get_group_id(1);  /* blue, axis 0:
0 <= gidx0 < 16 */`. The grouped reduce (green) is _Renderer.group_reduce. A kernel with several reduce ops renders
each in turn, with its own accumulators, loops and (grouped) __local buffer and barrier; the stores come after the
last one and read every result.

Numerics: where C leaves an answer open, the C follows one rule, numpy's (docs/numerics.md lists them), as
runtime.py's reference does. Each multiply and add rounds on its own, as numpy computes a*b + c (`#pragma OPENCL
FP_CONTRACT OFF`); only a SUM of products may be fused, in a block of its own under `FP_CONTRACT ON`, since its
order makes a sum inexact anyway: unfused, matmul and conv2d ran up to 1.25x slower on Intel's runtime
(BENCHMARKS.md), and pip's PoCL 3.0 calls a library routine for an explicit fma().
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import re
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernel import AndNode, BinaryOps, BufferOps, ConstBuffer, DivNode, ImageDType, Kernel, LazyOp, LtNode, ModNode
from kernel import MulNode, Node, NumNode, OptOps, ReduceOps, ShapeTracker, SumNode, TernaryOps, UnaryOps, Variable
from kernel import SHORT_FLOATS, dtypes, prod, render_python, sint, sym_render, walk_ast


# ============================================================================================================
# dtypes in C: in device memory and in registers
# ============================================================================================================
# name -> (C type in memory, C type in registers). half is kept in memory and computed as float (vload_half and
# vstore_half are core OpenCL, cl_khr_fp16 is not); bool lives in memory as one byte. bfloat16 is the top half of a
# float32: kept in memory as 16 bits (a ushort), computed as float.
C_TYPES = {
    "bool": ("uchar", "bool"),
    "char": ("char", "char"),
    "unsigned char": ("uchar", "uchar"),
    "short": ("short", "short"),
    "unsigned short": ("ushort", "ushort"),
    "int": ("int", "int"),
    "unsigned int": ("uint", "uint"),
    "long": ("long", "long"),
    "unsigned long": ("ulong", "ulong"),
    "half": ("half", "float"),
    "__bf16": ("ushort", "float"),
    "float": ("float", "float"),
    "double": ("double", "double"),
}
_INT_BITS = {"char": 8, "short": 16, "int": 32, "long": 64}  # and their unsigned types, u...
_INT_SUFFIX = {"uint": "u", "long": "l", "ulong": "ul"}  # char and short literals are ints, cast back after each op


def is_image(dt) -> bool:
    return isinstance(dt, ImageDType)


def element_dtype(dt):
    """The dtype of one element: an image holds floats (imagef) or halfs (imageh)."""
    return dt if not is_image(dt) else dtypes.half if dt.name == "imageh" else dt.base


def c_types(dt) -> tuple[str, str]:
    """(C type in memory, C type in registers) of dt; NotImplementedError for a dtype the C has none for."""
    if (t := C_TYPES.get(element_dtype(dt).name)) is None:
        raise NotImplementedError(f"dtype {dt} is not supported by the OpenCL runtime")
    return t


def short_float(dt):
    """half or bfloat16 where dt computes as one (each result rounded to it), else None; an imageh computes as float."""
    return dt.scalar() if dt.scalar() in SHORT_FLOATS else None


def is_float(dt) -> bool:
    return dtypes.is_float(element_dtype(dt))


def _c_bytes(ctype: str) -> int:
    """The size of a register C type."""
    return {"bool": 1, "float": 4, "double": 8}.get(ctype) or _INT_BITS[ctype.removeprefix("u")] // 8


def _int_range(ctype: str) -> tuple[int, int]:
    """The smallest and the largest value of an integer C type."""
    bits = _INT_BITS[ctype.removeprefix("u")]
    return (0, 2**bits - 1) if ctype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _f32(x: float) -> float:
    """x rounded to the nearest float32 (beyond its range: an infinity)."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _c_const(val, dt) -> str:
    """A constant as a C literal of the register type of dt."""
    ctype = c_types(dt)[1]
    if ctype == "bool":
        return "1" if val else "0"
    num = _f32(val) if ctype == "float" else val
    if not math.isfinite(num):  # C's macros are floats: a double's is cast (fmod(x, INFINITY) of a double is ambiguous)
        text = "NAN" if math.isnan(num) else "INFINITY" if num > 0 else "(-INFINITY)"
        return text if ctype == "float" else f"((double){text})"
    if ctype == "double":
        text = repr(float(val))
    elif ctype == "float":  # in the fewest digits that C reads back as that same float
        text = next(t for digits in range(1, 10) if _f32(float(t := f"{num:.{digits}g}")) == num)
        text = (text if any(c in text for c in ".e") else f"{text}.0") + "f"
    else:  # a literal of the type itself: -3u is uint arithmetic, -3 would be int's
        low = val == _int_range(ctype)[0] and val < 0  # the literal 2**63 doesn't exist in C: -(2**63-1)-1
        text = f"{int(val) + 1}{_INT_SUFFIX.get(ctype, '')}-1" if low else f"{int(val)}{_INT_SUFFIX.get(ctype, '')}"
    return f"({text})" if text.startswith("-") else text  # (-1.0f), (-0.0f): NEG of it is -(-1.0f), not --1.0f


def reduce_identity(op, dt):
    """The identity of a reduction: 0 for SUM; for MAX the smallest value of the dtype."""
    if op is ReduceOps.SUM:
        return 0
    if is_float(dt):
        return -math.inf
    ctype = c_types(dt)[1]
    return False if ctype == "bool" else _int_range(ctype)[0]


# ============================================================================================================
# index expressions in C, and the conditions a person reads
# ============================================================================================================
def _c_sum(x: SumNode, ops: dict, ctx: Any) -> str:
    """A sum with its constant last (`(a+b-1)`): neighbouring indices then share their common part."""
    terms = "+".join(sorted(y.render(ops, ctx) for y in x.nodes if not isinstance(y, NumNode)))
    return f"({terms}{''.join(f'{y.b:+d}' for y in x.nodes if isinstance(y, NumNode))})"


def render_lt_as_ge(x: LtNode, ops: dict | None, ctx: str | None) -> str:
    """An LtNode as a person writes it: a comparison whose terms all have negative factors, such as
    `((gidx1*-16)+(lidx2*-1))<0`, is the `>=` it means, `((gidx1*16)+lidx2)>=1`; any other is `(a<b)`."""
    terms = x.a.nodes if isinstance(x.a, SumNode) else [x.a]
    variables = [y for y in terms if not isinstance(y, NumNode)]
    negative = all(isinstance(y, MulNode) and isinstance(y.b, int) and y.b < 0 for y in variables)
    if isinstance(x.b, int) and variables and negative:
        const = sum(y.b for y in terms if isinstance(y, NumNode))
        # sum(-c*y) + const < b  <=>  sum(c*y) > const - b  <=>  sum(c*y) >= const - b + 1
        return f"({Node.sum([y * -1 for y in variables]).render(ops, ctx)}>={const - x.b + 1})"
    return f"({x.a.render(ops, ctx)}<{sym_render(x.b, ops, ctx)})"


# the C text of each index node type (Node.render(render_c)); a Variable is its name (a loop index or an int argument)
render_c: dict[type, Any] = {
    Variable: lambda x, ops, ctx: x.expr,
    NumNode: lambda x, ops, ctx: str(x.b),
    MulNode: lambda x, ops, ctx: f"({x.a.render(ops, ctx)}*{sym_render(x.b, ops, ctx)})",
    # C's / and %: the numerator is >= 0 and the divisor a number or a symbolic size (kernel.DivNode)
    DivNode: lambda x, ops, ctx: f"({x.a.render(ops, ctx)}/{sym_render(x.b, ops, ctx)})",
    ModNode: lambda x, ops, ctx: f"({x.a.render(ops, ctx)}%{sym_render(x.b, ops, ctx)})",
    LtNode: render_lt_as_ge,  # a comparison of negative terms is written as the >= it means
    SumNode: _c_sum,
    AndNode: lambda x, ops, ctx: f"({'&&'.join(sorted(y.render(ops, ctx) for y in x.nodes))})",
}


def cexpr(x) -> str:
    """C text of an int or an index node."""
    return sym_render(x, render_c)


def render_condition(node: sint) -> str:
    """A validity condition as a person writes it: tinygrad's Python syntax, comparisons as what they mean."""
    return sym_render(node, {**render_python, LtNode: render_lt_as_ge})


# ============================================================================================================
# the vector rule: which accesses are one float2 or float4 (the renderer renders it, the demo explains it)
# ============================================================================================================
VECTOR_WIDTHS = (2, 4)  # the widths loaded and stored as one vector (float2, float4), as tinygrad's linearizer does


def is_vector_start(idx: Node, amt: int) -> bool:
    """Can a vector of `amt` elements start at index idx: is idx a multiple of amt at every value of its variables?"""
    return idx.min >= 0 and idx // amt * amt == idx


def vector_axis(k: Kernel, i: int) -> tuple[int | None, str]:
    """As tinygrad's global_load and global_store: buffer i is read and written as float2/float4 vectors along its
    only Kernel.get_float4_upcast_dim axis when that axis is VECTOR_WIDTHS long (an image: 4, one pixel), each vector
    where its first index is aligned (is_vector_start). Returns (that axis, "") or (None, why there is none)."""
    buf = k.bufs[i]
    if isinstance(buf, ConstBuffer):
        return None, "a constant is no memory"
    if not k.opts.supports_float4:
        return None, f"the {k.opts.device} target has no float4"
    if not (buf.dtype in (dtypes.float, dtypes.half) or is_image(buf.dtype)):
        return None, f"{buf.dtype.name} is not float or half"
    if len(axes := k.get_float4_upcast_dim(i)) != 1:
        return None, "no upcast axis has stride 1" if not axes else "two upcast axes have stride 1"
    widths = (4,) if is_image(buf.dtype) else VECTOR_WIDTHS
    if (amt := k.sts[i].shape[axes[0]]) not in widths:
        return None, f"render.py's vectors are {' or '.join(map(str, widths))} wide, not {sym_render(amt)}"
    return axes[0], ""


# ============================================================================================================
# rendering: Kernel -> OpenCL C
# ============================================================================================================
@dataclass
class Program:
    """A rendered kernel. `global_size` counts work-groups per launch dim (tinygrad's convention: the launch is
    global_size * local_size work-items); `local_size` is None when the kernel has no local dims to impose (NOLOCALS,
    or a target without locals) and `global_size` then counts work-items. `args` lists the buffer arguments: (buffer
    idx, "buffer" or "image"); `vars` the symbolic variables passed after them as `int` arguments (named by
    c_var_names). With variables, `global_size` may hold nodes of them: the launch computes them from the values; one
    program serves every value. `local_bytes`: the __local memory a work-group needs."""

    name: str
    src: str
    global_size: list[Any]
    local_size: list[int] | None
    args: list[tuple[int, str]]
    vars: list[Variable] = field(default_factory=list)
    local_bytes: int = 0

    def launch(self) -> str:
        """The launch sizes as `python runtime.py show` prints them (and the page of page.py), with the variables'
        arguments on a second line."""
        text = f"[{', '.join(sym_render(g) for g in self.global_size)}]"
        if self.local_size:
            text += f" work-groups of {self.local_size} threads"
        else:
            text += " threads; the kernel sets no work-group size, runtime.py launches groups of the largest divisor"
            text += " <= 32 of dim 0"
        text += " (launch dims: the blue axes last first, the cyan ones in order)"
        if self.vars:
            names = zip(c_var_names(self.vars), self.vars)
            named = ", ".join(f"{c} = {v.expr} in [{v.min}, {v.max}]" for c, v in names)
            text += f"\n  vars            {named}: int arguments; this one program runs every value, the launch "
            text += "size follows them"
        return text


# each op in OpenCL C ({0}, {1}, {2}: the C expressions of the sources); runtime.py's reference computes the same
_C_OPS = {
    UnaryOps.EXP2: "exp2({0})",
    UnaryOps.LOG2: "log2({0})",
    UnaryOps.SIN: "sin({0})",
    UnaryOps.SQRT: "sqrt({0})",
    UnaryOps.NEG: "(-{0})",
    UnaryOps.RECIP: "(1/{0})",
    BinaryOps.ADD: "({0}+{1})",
    BinaryOps.MUL: "({0}*{1})",
    BinaryOps.IDIV: "({0}/{1})",
    BinaryOps.MOD: "({0}%{1})",  # C's: the remainder takes the dividend's sign
    BinaryOps.MAX: "max({0},{1})",
    BinaryOps.CMPLT: "({0}<{1})",
    BinaryOps.CMPNE: "({0}!={1})",
    BinaryOps.XOR: "({0}^{1})",
    BinaryOps.SHL: "({0}<<{1})",
    BinaryOps.SHR: "({0}>>{1})",
    TernaryOps.WHERE: "({0}?{1}:{2})",
    TernaryOps.MULACC: "(({0}*{1})+{2})",
}
# ... and on bools, where C's integer meaning would be wrong: as 0 and 1, with x/0 = 0 (numpy's): 1/true is true,
# 1/false false; a/b is a and b; a%b is always 0
_C_OPS_BOOL = {
    UnaryOps.NEG: "(!{0})",
    BinaryOps.ADD: "({0}||{1})",
    BinaryOps.MUL: "({0}&&{1})",
    BinaryOps.MAX: "({0}||{1})",
    UnaryOps.RECIP: "{0}",
    BinaryOps.IDIV: "({0}&&{1})",
    BinaryOps.MOD: "0",
}
_C_OPS_FLOAT = {UnaryOps.RECIP: "(1.0f/{0})", BinaryOps.MOD: "fmod({0},{1})"}  # C's % is for ints only
_REDUCE_AS_BINARY = {ReduceOps.SUM: BinaryOps.ADD, ReduceOps.MAX: BinaryOps.MAX}
_VEC = "0123456789abcdef"  # OpenCL vector components .s0 ... .sf
# signed int and long overflow is undefined in C (the compiler may assume it never happens), and numpy wraps: these
# ops are computed in the unsigned type, which wraps, and converted back
_WRAPPING_OPS = {UnaryOps.NEG, BinaryOps.ADD, BinaryOps.MUL, TernaryOps.MULACC}
# C functions for the integer ops whose C operator is undefined for some operands, each defined as numpy defines it
# (or, where numpy's answer depends on the machine, by one rule): the kernel calls them as idiv_int(a,b), ...
_INT_HELPERS = {BinaryOps.IDIV, BinaryOps.MOD, BinaryOps.SHL, BinaryOps.SHR, UnaryOps.RECIP}
_HELPERS: dict[str, str] = {  # every helper rendered so far: its name -> its C definition
    # bfloat16 in memory: a float's top 16 bits, rounded to nearest even (the rounding carries into the exponent)
    "bf16_load": "float bf16_load(ushort x) { return as_float((uint)x << 16); }\n",
    "bf16_store": "ushort bf16_store(float a) { uint b = as_uint(a); "
    "return isnan(a) ? (ushort)0x7fc0 : (ushort)((b + 0x7fff + ((b >> 16) & 1)) >> 16); }\n",
    # a float's bits, every NaN as the one quiet NaN 0x7fc00000 (numpy's np.float32(np.nan))
    "float_bits": "uint float_bits(float a) { return a != a ? 0x7fc00000u : as_uint(a); }\n",
}


def _c_alu(op, srcs: Sequence[str], src_dtype) -> str:
    ctype = c_types(src_dtype)[1]
    table = _C_OPS_BOOL if ctype == "bool" else _C_OPS_FLOAT if is_float(src_dtype) else {}
    # C leaves these undefined for some operands (and OpenCL's max() of a NaN): helpers defined as numpy does
    if (op in _INT_HELPERS and not table) or (op is BinaryOps.MAX and is_float(src_dtype)):
        return f"{_helper(op.name.lower(), ctype)}({','.join(srcs)})"
    if op is BinaryOps.MAX and op not in table and ctype != "int":  # max() of a long and an int literal (or of
        return f"max(({ctype}){srcs[0]},({ctype}){srcs[1]})"  # two types) is ambiguous in OpenCL: name the type
    if op in _WRAPPING_OPS and ctype in ("int", "long"):
        return f"(({ctype}){_C_OPS[op].format(*(f'(u{ctype}){s}' for s in srcs))})"
    return table.get(op, _C_OPS[op]).format(*srcs)


def _helper_body(kind: str, ctype: str) -> str:
    """The body of helper `kind` for operands of ctype (a, b; a register ctype of kernel.py's dtypes)."""
    if kind == "max":  # numpy's maximum: a NaN wins (x != x only for NaN); of two equal values, the AND of their bits
        # is either, except that +0.0 (no bits set) beats -0.0, so that no order of a reduce changes the sign of a 0.
        # (Spelled with isnan() or as a chain of five selects, Intel's CPU compiler hangs on 16 nested calls.)
        bits = "uint" if ctype == "float" else "ulong"
        return f"return a > b || a != a ? a : b > a || b != b ? b : as_{ctype}(as_{bits}(a) & as_{bits}(b));"
    signed, bits = not ctype.startswith("u"), _INT_BITS[ctype.removeprefix("u")]
    unsigned = ctype if not signed else "u" + ctype
    if kind == "idiv":  # x/0 is 0 (numpy's value); INT_MIN/-1 wraps to INT_MIN (numpy's), and x/-1 is -x for all x
        neg = f"b == -1 ? ({ctype})(0 - ({unsigned})a) : " if signed else ""
        return f"return b == 0 ? 0 : {neg}a / b;"
    if kind == "mod":  # x%0 is 0 (numpy's); x%-1 is 0, INT_MIN%-1 included
        return f"return b == 0{' || b == -1' if signed else ''} ? 0 : a % b;"
    if kind == "shl":  # numpy: a count outside 0..bits-1 shifts every bit out; computed unsigned, which wraps
        return f"return {'b < 0 || ' if signed else ''}b >= {bits} ? 0 : ({ctype})(({unsigned})a << b);"
    if kind == "shr":  # numpy: a count outside 0..bits-1 leaves the sign: -1 for a negative a, else 0
        return f"return {'b < 0 || ' if signed else ''}b >= {bits} ? {'(a < 0 ? -1 : 0)' if signed else 0} : a >> b;"
    assert kind == "recip", kind  # the truncated 1/a; numpy's 1/0 depends on the machine: here it is 0, as x/0 is
    return "return a == 0 ? 0 : 1 / a;"


def _helper(kind: str, ctype: str) -> str:
    """The name of helper `kind` for ctype (max_float, shl_uchar, ...); render() defines the ones a kernel calls."""
    name = f"{kind}_{ctype}"
    if name not in _HELPERS:
        params = f"{ctype} a" if kind == "recip" else f"{ctype} a, {ctype} b"
        _HELPERS[name] = f"{ctype} {name}({params}) {{ {_helper_body(kind, ctype)} }}\n"
    return name


def _float_to_int(src: str, dst: str) -> str:
    """The helper converting a float of C type src to the integer type dst. C leaves NaN, inf and out-of-range values
    undefined, and numpy's answer depends on the machine, so here is one rule: truncate toward zero, clamp to dst's
    range, NaN gives 0 (as OpenCL's convert_<type>_sat, but Intel's CPU runtime turns a NaN into UINT_MAX)."""
    name = f"{dst}_from_{src}"
    if name not in _HELPERS:
        smallest, largest = _int_range(dst)
        f = "f" if src == "float" else ""
        top = f"0x1p{largest.bit_length()}{f}"  # dst's largest value + 1: a power of 2, exact in any float
        low = f"({smallest + 1}l-1)" if smallest == -(2**63) else str(smallest)  # C has no literal 2**63
        clamp = f"a >= {top} ? ({dst}){largest}{_INT_SUFFIX.get(dst, '')} : a < ({src})({low}) ? ({dst})({low})"
        # convert_<dst>_rtz, not a cast: Intel's CPU compiler folds (float)(int)a into trunc(a), -0.0 for a in (-1, 0)
        _HELPERS[name] = f"{dst} {name}({src} a) {{ return isnan(a) ? 0 : {clamp} : convert_{dst}_rtz(a); }}\n"
    return name


def _cast(expr: str, src, dst) -> str:
    """C for CAST(expr, dst) of a value of dtype src, as docs/numerics.md says: a float to an int truncated toward
    zero and clamped (NaN: 0), to half or bfloat16 rounded once, anything to bool `!= 0` (C's own conversion).
    A STORE into a buffer of another dtype converts the same way."""
    ctype, src_ctype = c_types(dst)[1], c_types(src)[1]
    if is_float(src) and not is_float(dst) and ctype != "bool":
        return f"{_float_to_int(src_ctype, ctype)}({expr})"
    return _rounded(dst, expr, src_ctype) if short_float(dst) else f"(({ctype})({expr}))"


def _rounded(dt, expr: str, ctype: str = "float") -> str:
    """expr (of C type ctype) as dt computes it: for half and bfloat16, rounded once to nearest even (as
    runtime.py's reference rounds), by a helper (half_of_float, bf16_of_double, ...)."""
    if (short := short_float(dt)) is None:
        return expr
    name = f"{'half' if short == dtypes.half else 'bf16'}_of_{ctype}"
    if short == dtypes.half:  # vstore_half rounds, a double directly (an int beyond 2**24 is beyond half's range)
        val = "a" if ctype in ("float", "double") else "(float)a"
        body = f"ushort h; vstore_half({val}, 0, (half*)&h); return vload_half(0, (half*)&h);"
    else:  # a float's top 16 bits, rounded; a double or a 32- or 64-bit int is first cut to a float rounding to odd
        # (toward zero, the last bit set where inexact), so that it rounds once
        exact, to_odd = ctype in ("float", "bool", *_NARROW_INTS), f" | (({ctype})f != a)"
        cut = "(float)a; uint b = as_uint(f)" if exact else f"convert_float_rtz(a); uint b = as_uint(f){to_odd}"
        body = f"float f = {cut}; return f != f ? f : as_float((b + 0x7fff + ((b >> 16) & 1)) >> 16 << 16);"
    _HELPERS[name] = f"float {name}({ctype} a) {{ {body} }}\n"
    return f"{name}({expr})"


# C computes char and short arithmetic in int: the result is cast back, so that it wraps as the dtype does
_NARROW_INTS = ("char", "uchar", "short", "ushort")
_NEST_MAX = 16  # an expression nested this many ops deep goes to a register: C compilers limit nesting (clang: 256 ())
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # indices, loop counters, ids and variables are C ints
# each multiply and add rounds on its own, as numpy computes a*b + c: the compiler may not fuse them into an fma
_NO_FMA = "#pragma OPENCL FP_CONTRACT OFF\n"
_TC_NOTE = """/* Shaped for {device}'s tensor cores (the TC opt), rendered as plain multiply-adds: OpenCL C has no
   portable matrix instruction, so this is tinygrad's TC=2 meaning: the tensor core's loop nest in plain C,
   {how}. */
"""


def _check_int32(node, what: str, whole=None):
    """node, if it and every node inside it (the sub-expressions C evaluates) fit in a C int; else a ValueError (a
    wrong index would be a wrong answer). A part with symbolic bounds is checked at the extremes of its variables."""
    lo, hi = _smallest(node.min), _largest(node.max)
    if not INT32_MIN <= lo <= hi <= INT32_MAX:
        raise ValueError(
            f"{what}: index {(whole or node).render()} does not fit in a 32-bit int (its part {node.render()} "
            f"reaches {hi if hi > INT32_MAX else lo}); indices are C ints"
        )
    for part in [getattr(node, "a", None), getattr(node, "b", None), *getattr(node, "nodes", ())]:
        if isinstance(part, Node):
            _check_int32(part, what, whole or node)
    return node


def _largest(x) -> int:
    """The largest value of a size (a symbolic one at the top of its range)."""
    return _largest(x.max) if isinstance(x, Node) else x


def _smallest(x) -> int:
    """The smallest value of a bound (a symbolic one at the bottom of its range)."""
    return _smallest(x.min) if isinstance(x, Node) else x


def fit_dims(dims: Sequence[Any], max_sizes: Sequence[int], reverse: bool) -> list[list[tuple[int, int]]]:
    """Place kernel dims onto the launch dims (at most len(max_sizes) of them), like tinygrad's get_grouped_dims.

    Returns, per launch dim, the (dim number, size) parts it counts, the fastest-varying part first. With
    `reverse` the last kernel dim goes to launch dim 0 (globals: the innermost axis is usually contiguous in
    memory). A dim too large for its launch dim is split in two factors; surplus dims are merged left to right."""
    slots = [[(i, s)] for i, s in enumerate(dims)][:: -1 if reverse else 1]
    for d in range(min(len(max_sizes), len(slots))):
        i, s = slots[d][0]
        if _largest(s) <= max_sizes[d]:
            continue
        splits = () if isinstance(s, Node) else range(2, math.isqrt(s) + 1)  # a symbolic size can't be split
        if (factor := next((f for f in splits if s % f == 0 and s // f <= max_sizes[d]), None)) is None:
            size = f"symbolic size {cexpr(s)} (up to {_largest(s)})" if isinstance(s, Node) else f"size {s}"
            raise ValueError(f"dim {i} of {size} doesn't fit in a launch dim of at most {max_sizes[d]}")
        slots[d : d + 1] = [[(i, s // factor)], [(i, factor)]]  # the low part first, the high part next
    d = 0
    while len(slots) > len(max_sizes):
        if _largest(prod(s for _, s in slots[d] + slots[d + 1])) <= max_sizes[d]:
            slots[d : d + 2] = [slots[d] + slots[d + 1]]
        elif d < len(max_sizes) - 1:
            d += 1
        else:
            raise ValueError(f"dims {tuple(dims)} don't fit in launch dims of at most {tuple(max_sizes)}")
    return slots


class _NeedsFlatImage(Exception):
    """An image output written one element at a time (write_imagef writes 4): render it as a plain buffer."""


class _Renderer:
    """Writes the body of one kernel. Per upcast combination (a tuple of constants for the upcasted axes) it
    evaluates the AST to a C expression; loads and shared values go to registers, deduplicated per scope."""

    def __init__(self, k: Kernel, flat_images: frozenset, limits):
        self.name, self.variables = kernel_name(k), kernel_vars(k.ast)
        self.c_vars = {v.expr: Variable(c, v.min, v.max) for v, c in zip(self.variables, c_var_names(self.variables))}
        self.k = _with_c_vars(k, self.c_vars) if self.variables else k  # the user's names never reach the C
        self.flat_images, self.limits = flat_images, limits
        self.up = k.shape_len - k.upcasted  # axes >= up are upcasted
        self.lines: list[str] = []
        self.scopes: list[dict[str, str]] = [{}]  # per open scope: C expression -> register holding it
        self.counts: Counter = Counter()  # registers are numbered per prefix: acc0, acc1, ..., val0, ...
        self.uses = Counter(s for root in k.ast for op in root.lazyops for s in op.src)  # shared ops get a register
        self.buf_index = {buf: i for i, buf in enumerate(k.bufs)}
        self.float4_axis = [vector_axis(k, i)[0] for i in range(len(k.bufs))]
        self.images: set = set()
        self.local_bytes = 0
        self.group_axes = range(k.first_reduce, k.first_reduce + k.group_for_reduces)
        # grouped axes that the output keeps (UPCASTMID): the thread that finishes the reduce unrolls them
        self.white_axes = [a for a in self.group_axes if k.output_shape[a] == k.full_shape[a]]

    # -- emitting code --
    def line(self, text: str) -> None:
        self.lines.append("  " * len(self.scopes) + text)

    def open(self, header: str, comment: str = "") -> None:
        self.line((header + " {").lstrip() + (f"  /* {comment} */" if comment else ""))
        self.scopes.append(dict(self.scopes[-1]))  # registers of outer scopes stay usable inside

    def open_loop(self, var: str, size, comment: str = "") -> None:
        self.open(f"for (int {var} = 0; {var} < {cexpr(size)}; {var}++)", comment)

    def open_group_firsts(self) -> None:
        """Only the first thread of each group (group ids 0) runs what follows: it holds the finished results."""
        firsts = [f"lidx{a}==0" for a in self.group_axes if self.k.full_shape[a] > 1]
        self.open(f"if ({' && '.join(firsts)})" if firsts else "")

    def close(self) -> None:
        self.scopes.pop()
        self.line("}")

    def declare(self, ctype: str, expr: str, prefix: str) -> str:
        """A new register (an accumulator) starting at expr."""
        name = f"{prefix}{self.counts[prefix]}"
        self.counts[prefix] += 1
        self.line(f"{ctype} {name} = {expr};")
        return name

    def reg(self, ctype: str, expr: str, prefix: str) -> str:
        """A register holding expr; the same expression in the same scope reuses it."""
        if expr not in self.scopes[-1]:
            self.scopes[-1][expr] = self.declare(ctype, expr, prefix)
        return self.scopes[-1][expr]

    # -- the launch: global and local dims become work-group and work-item ids --
    def launch(self) -> tuple[list[int], list[int] | None, list[Any], list[int]]:
        """Define the ids of the global and local dims; returns the launch sizes, the index of every axis, and the
        local axes that run as loops inside each thread because the device has fewer threads per work-group."""
        k, full = self.k, self.k.full_shape
        idxs: list[Any] = [NumNode(0)] * k.shape_len
        use_locals = k.opts.has_local and not k.dont_use_locals
        groups = fit_dims(full[: k.global_dims], (k.opts.global_max or (2**31 - 1,) * 3)[:3], reverse=True)
        self._define_ids(groups, "get_group_id" if use_locals else "get_global_id", range(k.global_dims), "gidx", idxs)
        global_size = [prod(s for _, s in slot) for slot in groups] + [1] * (3 - len(groups))
        if not use_locals:
            assert k.first_reduce + k.group_for_reduces == k.global_dims, "a kernel without locals has no local dims"
            return global_size, None, idxs, []
        local_axes = list(range(k.global_dims, k.first_reduce + k.group_for_reduces))  # cyan, green and white
        target_lmax = k.opts.local_max[:3] if k.opts.local_max else (2**31 - 1,) * 3  # None: no limit
        max_threads, lmax = self.limits if self.limits else (None, target_lmax)
        lmax = [min(a, b) for a, b in zip(lmax, target_lmax)]
        looped: list[int] = []
        while True:
            axes = [a for a in local_axes if a not in looped]
            try:
                if max_threads is not None and prod(full[a] for a in axes) > max_threads:
                    raise ValueError(f"{prod(full[a] for a in axes)} threads > {max_threads}")
                threads = fit_dims([full[a] for a in axes], lmax, reverse=False)
                break
            except ValueError as e:
                if not (cyan := [a for a in axes if a < k.first_reduce]):
                    need = f"the grouped reduce of {self.name} needs more threads than the device has"
                    raise ValueError(f"{need} in a work-group ({e})") from None
                looped.append(max(cyan, key=lambda a: full[a]))  # the largest local axis becomes a loop
        self._define_ids(threads, "get_local_id", axes, "lidx", idxs)
        return global_size, [prod(s for _, s in slot) for slot in threads] + [1] * (3 - len(threads)), idxs, looped

    def _define_ids(self, slots, fn: str, axes: Sequence[int], prefix: str, idxs: list[Any]) -> None:
        """Each axis's index from the launch ids fn(d) (fit_dims' slots): an `int` line, and a Variable in idxs."""
        parts: dict[int, list[str]] = {}  # axis -> its C terms (an axis split over two launch dims has two)
        weight: dict[int, int] = {}
        for d, slot in enumerate(slots):
            div = 1
            for n, (i, s) in enumerate(slot):
                term = f"{fn}({d})" if div == 1 else f"({fn}({d})/{cexpr(div)})"
                if n < len(slot) - 1:
                    term = f"({term}%{cexpr(s)})"
                w = weight.get(i, 1)
                parts.setdefault(i, []).append(term if w == 1 else f"({term}*{cexpr(w)})")
                weight[i], div = w * s, div * s
        for i, terms in sorted(parts.items()):
            if (size := self.k.full_shape[axis := axes[i]]) > 1:  # the launch dims count axes in reverse: see fit_dims
                name = f"{prefix}{axis}"
                comment = f"{self.k.colors()[axis]}, axis {axis}: 0 <= {name} < {cexpr(size)}"
                self.line(f"int {name} = {'+'.join(terms)};  /* {comment} */")
                idxs[axis] = Variable(name, 0, size - 1)

    # -- loads --
    def exprs(self, i: int, idxs: list[Any]):
        """(index, valid) of buffer i at idxs, each part checked to fit in a C int. With symbolic sizes, the constant
        indices (upcast elements) go in as variables and are substituted after, as tinygrad does: `(u*(i+2)) % (i+2)`
        simplifies where the same with u = 1 already folded in, `(gidx0+i+2) % (i+2)`, can't."""
        st = self.k.sts[i]
        if not self.k.vars:
            idx, valid = st.expr_idxs(idxs)
        else:  # (an axis of 0 or 1 elements has no range to stand in for: its index stays the number)
            consts = {a: x for a, x in enumerate(idxs) if isinstance(x, NumNode) and st.shape[a] not in (0, 1)}
            stand_ins = {a: Variable(f"_uidx{a}", 0, st.shape[a] - 1) for a in consts}
            idx, valid = st.expr_idxs([stand_ins.get(a, x) for a, x in enumerate(idxs)])
            values = {v: consts[a] for a, v in stand_ins.items() if isinstance(v, Variable)}
            idx, valid = idx.substitute(values), valid.substitute(values)
        what = f"data{self.k.bufs[i].idx}" if not isinstance(self.k.bufs[i], ConstBuffer) else "a constant's mask"
        return _check_int32(idx, what), _check_int32(valid, what)

    def _vector_base(self, i: int, idxs: list[Any]):
        """(index, valid, component) of the aligned float2/float4 that holds element idxs of buffer i, or None."""
        if (axis := self.float4_axis[i]) is None:
            return None
        amt, comp = self.k.sts[i].shape[axis], idxs[axis].min
        idx, valid = self.exprs(i, idxs[:axis] + [NumNode(0)] + idxs[axis + 1 :])
        return (idx, valid, comp, amt) if is_vector_start(idx, amt) else None  # not provably aligned: stay scalar

    def load(self, i: int, idxs: list[Any]) -> str:
        buf = self.k.bufs[i]
        mem, ctype = c_types(buf.dtype)
        zero = _c_const(0, buf.dtype)
        if isinstance(buf, ConstBuffer):
            _, valid = self.exprs(i, idxs)
            var = self.c_vars[buf.val.expr].expr if isinstance(buf.val, Node) else None  # a Variable's value
            val = f"(({ctype}){var})" if var else _c_const(buf.val, buf.dtype)
            return self._gate(valid, val, zero)
        if image := is_image(buf.dtype) and buf.idx not in self.flat_images:
            self.images.add(buf.idx)
        vec = self._vector_base(i, idxs)
        idx, valid = vec[:2] if vec is not None else self.exprs(i, idxs)
        if valid.max == 0:
            return zero  # entirely in the padding: never read memory
        if image:  # read a pixel (float4) at a time: element i of the flat buffer is component i%4 of
            # pixel i//4, which sits at column (i//4) % width and row (i//4) // width
            pixel = f"read_imagef(data{buf.idx}, smp, {self._image_coord(buf.dtype, idx)})"
            pixel = self.reg("float4", self._gate(valid, pixel, "(float4)(0.0f)"), "val")
            comp = vec[2] if vec is not None else idx % 4
            if _smallest(comp) == _largest(comp):
                return f"{pixel}.s{_VEC[_smallest(comp)]}"
            c = cexpr(comp)  # a component only known at run time: pick it with a chain of selects
            return f"({c}==0?{pixel}.s0:{c}==1?{pixel}.s1:{c}==2?{pixel}.s2:{pixel}.s3)"
        name, at = f"data{buf.idx}", self.index(idx)
        if vec is not None:  # aligned: one vector load
            amt = vec[3]
            load = f"vload_half{amt}(0, {name}+{at})" if mem == "half" else f"*((__global float{amt}*)({name}+{at}))"
            vector = self.reg(f"float{amt}", self._gate(valid, load, f"(float{amt})({zero})"), "val")
            return f"{vector}.s{_VEC[vec[2]]}"
        load = f"vload_half(0, {name}+{at})" if mem == "half" else f"{name}[{at}]"
        if buf.dtype == dtypes.bfloat16:
            load = f"bf16_load({load})"
        elif mem != ctype:
            load = f"(({ctype}){load})"
        return self.reg(ctype, self._gate(valid, load, zero), "val")

    def index(self, idx) -> str:
        """C for an index expression. A sum with a constant becomes register + constant: loads that differ only by a
        constant (neighbouring upcast elements) share one register for the rest, computed once."""
        if not isinstance(idx, SumNode):
            return cexpr(idx)
        const = sum(x.b for x in idx.nodes if isinstance(x, NumNode))
        rest = "+".join(sorted(cexpr(x) for x in idx.nodes if not isinstance(x, NumNode)))
        return self.reg("int", rest, "idx") + (f"{const:+d}" if const else "")

    @staticmethod
    def _image_coord(dt, idx) -> str:
        width = dt.shape[1]
        return f"(int2)({cexpr((idx // 4) % width)},{cexpr(idx // (4 * width))})"

    @staticmethod
    def _gate(valid, expr: str, zero: str) -> str:
        return expr if valid.min == 1 else f"({cexpr(valid)}?{expr}:{zero})"

    # -- evaluating the AST --
    def value(self, x: LazyOp, idxs: list[Any], accs: dict[LazyOp, str] | None) -> str:
        """C expression of x at one upcast combination (idxs); `accs` holds each reduce op's finished result. Each op
        is rendered once; one that several ops read, or that nests _NEST_MAX ops deep, is computed into a register."""

        def one(op: LazyOp, srcs: list[tuple[str, int]]) -> tuple[str, int]:  # (C expression, ops nested in it)
            expr, depth = self.op_value(op, [c for c, _ in srcs], idxs, accs), 1 + max((d for _, d in srcs), default=-1)
            if srcs and (self.uses[op] > 1 or depth >= _NEST_MAX):  # (a load, or a reduce's result, has no srcs)
                return self.reg(c_types(op.dtype)[1], expr, "alu"), 0
            return expr, depth

        return walk_ast(x, one, {}, stop=lambda op: op.op in ReduceOps)[0]  # a reduce is its accumulator

    def operand(self, x: LazyOp, idxs: list[Any]) -> str:
        """x's value as a name or a literal: an expression goes to a register first, so that a multiply-add inside it
        rounds on its own even where the statement that uses it may be fused."""
        expr = self.value(x, idxs, None)
        return expr if re.fullmatch(r"[\w.]+", expr) else self.reg(c_types(x.dtype)[1], expr, "alu")

    def op_value(self, x: LazyOp, srcs: list[str], idxs: list[Any], accs: dict[LazyOp, str] | None) -> str:
        """C expression of op x from its sources' expressions."""
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            return self.load(self.buf_index[x.arg], idxs)
        if x.op in ReduceOps:
            assert accs is not None and x in accs, "a reduce is only read after its loop"
            return _rounded(x.dtype, accs[x])
        ctype = c_types(x.dtype)[1]  # a CAST's dtype is its arg
        if x.op is UnaryOps.BITCAST:
            if element_dtype(x.arg).itemsize != 4 or element_dtype(x.src[0].dtype).itemsize != 4:
                raise NotImplementedError("BITCAST is supported between 4-byte types only")
            if is_float(x.src[0].dtype) and not is_float(x.arg):  # a NaN's bits are the machine's: one NaN here
                return f"as_{ctype}(float_bits({srcs[0]}))"
            return f"as_{ctype}({srcs[0]})"
        if x.op is UnaryOps.CAST:
            return _cast(srcs[0], x.src[0].dtype, x.arg)
        src_dt, op = x.src[0].dtype if x.op is not TernaryOps.WHERE else x.src[1].dtype, x.op
        if op is TernaryOps.MULACC and short_float(x.dtype):  # a MUL, then an ADD, each rounded (numpy's float16)
            srcs, op = [_rounded(x.dtype, _c_alu(BinaryOps.MUL, srcs[:2], src_dt)), srcs[2]], BinaryOps.ADD
        expr = _rounded(x.dtype, _c_alu(op, srcs, src_dt))
        return f"(({ctype}){expr})" if ctype in _NARROW_INTS else expr

    def combos(self, shape: Sequence[int]) -> list[tuple[int, ...]]:
        """Every combination of the upcasted axes' indices in `shape` (one per register)."""
        return list(itertools.product(*[range(s) for s in shape[self.up :]]))

    # -- the kernel --
    def render(self) -> Program:
        k = self.k
        global_size, local_size, idxs, looped = self.launch()
        for axis in looped:
            self.open_loop(f"lidx{axis}", k.full_shape[axis])
            idxs[axis] = Variable(f"lidx{axis}", 0, k.full_shape[axis] - 1)
        for axis in range(k.first_reduce + k.group_for_reduces, self.up):  # loop indices (red), set by the loops
            size = k.full_shape[axis]
            idxs[axis] = NumNode(0) if size == 0 else Variable(f"ridx{axis}", 0, size - 1)  # a loop of 0 never runs
        # each reduce op in turn, with its own accumulators, loops (grouped: temp and barrier); then the stores
        results = [self.reduce(n, r, idxs) for n, r in enumerate(k.reduceops)]
        if k.group_for_reduces:
            self.open_group_firsts()
        # each output element with the finished results it stores, per value of the white axes and upcast combination
        late_idxs = [idx if a < k.first_reduce else NumNode(0) for a, idx in enumerate(idxs[: self.up])]
        white, items = self.white_axes, []
        for w in itertools.product(*[range(k.full_shape[a]) for a in white]):  # () without grouped axes
            out_idxs = list(late_idxs)
            for a, v in zip(white, w):
                out_idxs[a] = NumNode(v)
            for combo in self.combos(k.output_shape):
                finished = {r: res[w, combo] for r, res in zip(k.reduceops, results)}
                items.append((out_idxs + [NumNode(c) for c in combo], finished))
        for root in sorted(k.ast, key=lambda x: x.arg.idx):  # every STORE, evaluated at each of its elements
            vals = [(idxs, self.value(root.src[0], idxs, accs)) for idxs, accs in items]
            if element_dtype(root.src[0].dtype) != element_dtype(
                root.arg.dtype
            ):  # into a buffer of another dtype: as a CAST
                vals = [(idxs, _cast(val, root.src[0].dtype, root.arg.dtype)) for idxs, val in vals]
            self.store(self.buf_index[root.arg], vals)
        if k.group_for_reduces:
            self.close()
        for _ in looped:
            self.close()
        return self.program(global_size, local_size)

    def accumulators(self, r: LazyOp, combos: list[tuple], vec_axis: int | None) -> dict[tuple[int, ...], str]:
        """A register per combination, starting at the reduce's identity. When the results are stored as float4
        (or float2) along vec_axis, the registers are the components of vectors: acc0.s0, acc0.s1, ...; the
        OpenCL compiler (PoCL at least) makes faster code of one float4 than of four floats."""
        ctype, init = c_types(r.dtype)[1], _c_const(reduce_identity(r.op, r.dtype), r.dtype)
        amt = self.k.full_shape[vec_axis] if vec_axis is not None else 1
        if amt not in VECTOR_WIDTHS or ctype != "float" or not self.k.opts.supports_float4:
            return {c: self.declare(ctype, init, "acc") for c in combos}
        pos, vectors, accs = vec_axis - self.up, {}, {}
        for c in combos:
            base = c[:pos] + (0,) + c[pos + 1 :]
            if base not in vectors:
                vectors[base] = self.declare(f"float{amt}", f"(float{amt})({init})", "acc")
            accs[c] = f"{vectors[base]}.s{c[pos]}"
        return accs

    def reduce(self, n: int, r: LazyOp, idxs: list[Any]) -> dict[tuple, str]:
        """Loop over the reduce axes, accumulating r; returns its results by (white axes' values, upcast combo)."""
        k, dt, op = self.k, r.dtype, _REDUCE_AS_BINARY[r.op]
        # grouped, the partial results go to temp, whose last axis of more than 1 is contiguous; else to the output
        temp_axis = max((a for a in range(self.up, k.shape_len) if k.output_shape[a] > 1), default=None)
        vec_axis = temp_axis if k.group_for_reduces else self.float4_axis[self.buf_index[k.ast[0].arg]]
        accs = self.accumulators(r, self.combos(k.output_shape), vec_axis)  # magenta axes (1 in the output) share one
        for axis in range(k.first_reduce + k.group_for_reduces, self.up):
            self.open_loop(f"ridx{axis}", k.full_shape[axis], f"red, axis {axis}")
        parts: dict[str, list[str]] = {acc: [] for acc in accs.values()}
        src = r.src[0]  # a sum of float products: the compiler may fuse its multiply-adds (a sum is inexact anyway)
        fused = r.op is ReduceOps.SUM and src.op is BinaryOps.MUL and c_types(dt)[0] in ("float", "double")
        for combo in self.combos(k.full_shape):
            at = idxs[: self.up] + [NumNode(c) for c in combo]
            val = [self.operand(s, at) for s in src.src] if fused else self.value(src, at, None)
            # a magenta (reduce) axis is 1 in the output, so its index there is 0: its values add into one register
            parts[accs[tuple(c if s > 1 else 0 for c, s in zip(combo, k.output_shape[self.up :]))]].append(val)
        if fused:  # in a block of its own: the pragma holds to its end, over these statements alone
            self.open("", "a sum of products: the compiler may fuse each multiply-add")
            self.line("#pragma OPENCL FP_CONTRACT ON")
        for acc, vals in parts.items():  # combine this iteration's values first: one dependency on acc, not many
            for i in range(0, len(vals), 16):  # (at most 16 per statement: C compilers limit nesting)
                terms = vals[i : i + 16]
                if fused:  # (a2*b2)+(a1*b1)+(a0*b0)+acc: tinygrad's order, the last term first
                    expr = "+".join(f"({a}*{b})" for a, b in reversed(terms)) + f"+{acc}"
                else:
                    expr = functools.reduce(lambda a, b: _c_alu(op, (a, b), dt), terms + [acc])
                self.line(f"{acc} = {expr};")
        if fused:
            self.close()
        for axis in range(k.first_reduce + k.group_for_reduces, self.up):
            self.close()
        return self.group_reduce(n, r, accs) if k.group_for_reduces else {((), c): acc for c, acc in accs.items()}

    def group_reduce(self, n: int, r: LazyOp, accs: dict[tuple[int, ...], str]) -> dict[tuple, str]:
        """GROUP/GROUPTOP: the threads of a work-group split the reduce. Each parks its partial result in
        `temp[local ids..., group ids..., upcast element]`; after a barrier the threads whose group ids are 0
        finish the reduce over the group axes. White axes (UPCASTMID) are not reduced: that thread unrolls them
        instead, one result per value. With several reduce ops, each has its own temp (temp0, temp1, ...)."""
        k, dt, white = self.k, r.dtype, self.white_axes
        first, last = k.global_dims, k.first_reduce + k.group_for_reduces  # the local + group axes
        temp_shape = list(k.full_shape[first:last]) + list(k.output_shape[self.up :])
        temp_strides = [prod(temp_shape[d + 1 :]) for d in range(len(temp_shape))]  # row-major
        temp = f"temp{n}" if len(k.reduceops) > 1 else "temp"
        self.lines.insert(n, f"  __local {c_types(dt)[1]} {temp}[{prod(temp_shape)}];")  # __local lives at kernel scope
        self.local_bytes += prod(temp_shape) * _c_bytes(c_types(dt)[1])

        def temp_index(thread: Sequence[Any], combo: Sequence[int]) -> str:
            """The index into temp; parts are C variable names or constants."""
            parts = [(p, stride) for p, stride, size in zip([*thread, *combo], temp_strides, temp_shape) if size > 1]
            terms = [f"{p}*{stride}" if stride > 1 else p for p, stride in parts if isinstance(p, str)]
            const = sum(p * stride for p, stride in parts if isinstance(p, int))
            return "+".join(terms + ([str(const)] if const else [])) or "0"

        lids = [f"lidx{a}" if k.full_shape[a] > 1 else 0 for a in range(first, last)]
        for combo, acc in accs.items():
            self.line(f"{temp}[{temp_index(lids, combo)}] = {acc};")
        self.line("barrier(CLK_LOCAL_MEM_FENCE);")
        vec_axis = self.float4_axis[self.buf_index[k.ast[0].arg]]
        whites = list(itertools.product(*[range(k.full_shape[a]) for a in white]))
        # declared before the `if`: the stores after the last reduce read them
        late = {(w, combo): acc for w in whites for combo, acc in self.accumulators(r, list(accs), vec_axis).items()}
        self.open_group_firsts()
        green = [a for a in self.group_axes if a not in white]
        for a in green:
            self.open_loop(f"tidx{a}", k.full_shape[a], f"green, axis {a}: the parts")
        for (w, combo), acc in late.items():
            ws = dict(zip(white, w))
            thread = [lids[a - first] if a < k.first_reduce else ws.get(a, f"tidx{a}") for a in range(first, last)]
            part = f"{temp}[{temp_index(thread, combo)}]"
            self.line(f"{acc} = {_c_alu(_REDUCE_AS_BINARY[r.op], (acc, part), dt)};")
        for _ in range(len(green) + 1):  # the green loops, then the `if`
            self.close()
        return late

    def store(self, i: int, values: list[tuple[list[Any], str]]) -> None:
        buf = self.k.bufs[i]
        mem, ctype = c_types(buf.dtype)
        name, image = f"data{buf.idx}", is_image(buf.dtype) and buf.idx not in self.flat_images
        groups: dict[str, list[tuple[list[Any], str]]] = {}
        for idxs, val in values:  # group elements that share one aligned float2/float4
            vec = self._vector_base(i, idxs)
            key = "vec " + cexpr(vec[0]) if vec is not None else "one " + cexpr(self.exprs(i, idxs)[0])
            groups.setdefault(key, []).append((idxs, val))
        for group in groups.values():
            vec = self._vector_base(i, group[0][0])
            if vec is not None and len(group) == vec[3]:  # a whole float2/float4: one vector store
                by_comp = {self._vector_base(i, idxs)[2]: val for idxs, val in group}
                writes = [(vec[0], vec[1], f"(float{vec[3]})({','.join(by_comp[c] for c in range(vec[3]))})", vec[3])]
            elif image:
                raise _NeedsFlatImage(buf.idx)
            else:
                writes = [(*self.exprs(i, idxs), val, 1) for idxs, val in group]
            for idx, valid, val, amt in writes:
                if image:
                    self.images.add(buf.idx)
                    code = f"write_imagef({name}, {self._image_coord(buf.dtype, idx)}, {val});"
                elif mem == "half":
                    code = f"vstore_half{amt if amt > 1 else ''}({val}, 0, {name}+{self.index(idx)});"
                elif amt > 1:
                    code = f"*((__global float{amt}*)({name}+{self.index(idx)})) = {val};"
                elif buf.dtype == dtypes.bfloat16:
                    code = f"{name}[{self.index(idx)}] = bf16_store({val});"
                else:
                    code = f"{name}[{self.index(idx)}] = {val if mem == ctype else f'({mem})({val})'};"
                if valid.max != 0:  # else entirely in the padding: never written
                    self.line(code if valid.min == 1 else f"if ({cexpr(valid)}) {code}")

    def program(self, global_size: list[int], local_size: list[int] | None) -> Program:
        k = self.k
        outputs = {x.arg.idx for x in k.ast}
        params, args = [], []
        for buf in sorted({b.idx: b for b in k.bufs if not isinstance(b, ConstBuffer)}.values(), key=lambda b: b.idx):
            if buf.idx in self.images:
                params.append(f"{'write_only' if buf.idx in outputs else 'read_only'} image2d_t data{buf.idx}")
            else:
                const = "" if buf.idx in outputs else "const "
                params.append(f"{const}__global {c_types(buf.dtype)[0]}* data{buf.idx}")
            args.append((buf.idx, "image" if buf.idx in self.images else "buffer"))
        params += [f"const int {v.expr}" for v in self.c_vars.values()]  # symbolic sizes: one program for every value
        name, body = self.name, "\n".join(self.lines)
        vectors = sorted(set(re.findall(r"\b(?:float|half)[248]\b", body)))  # the C's own vector types, if any
        how = f"with {' and '.join(vectors)} vectors" if vectors else "in scalar code"
        note = _TC_NOTE.format(device=k.opts.device, how=how) if any(o.op is OptOps.TC for o in k.applied_opts) else ""
        sampler = "const sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;\n"
        called = set(re.findall(r"\b(\w+)\(", body))  # the helpers it calls are defined before the kernel
        prelude = (sampler if self.images else "") + "".join(_HELPERS[n] for n in sorted(called & _HELPERS.keys()))
        src = f"{note}{_NO_FMA}{prelude}__kernel void {name}({', '.join(params)}) {{\n{body}\n}}\n"
        user_vars = {c: v for v, c in zip(self.variables, self.c_vars.values())}  # the launch sizes: the user's vars
        global_size = [g.substitute(user_vars) if isinstance(g, Node) else g for g in global_size]
        return Program(name, src, global_size, local_size, args, self.variables, self.local_bytes)


def c_var_names(variables: Sequence[Variable]) -> list[str]:
    """The C name of each variable of a kernel (kernel_vars' order): var0_i, var1_x_y, ... The renderer names every C
    identifier itself, so that no name a user gives can be a C keyword, invalid C, or another identifier's name."""
    return [f"var{n}_{re.sub('[^A-Za-z0-9_]', '_', v.expr)[:24]}" for n, v in enumerate(variables)]


def _with_c_vars(k: Kernel, c_vars: dict[str, Variable]) -> Kernel:
    """k with its ShapeTrackers over the renderer's variables (c_vars: user's name -> the renderer's variable)."""
    rename = lambda x: x.substitute({v: c_vars[v.expr] for v in x.vars()}) if isinstance(x, Node) else x  # noqa: E731
    ret = copy.copy(k)  # only its sts differ: the rest is read, never changed
    ret.sts = [ShapeTracker(tuple(v.map_sizes(rename) for v in st.unbind()[0].views)) for st in k.sts]
    return ret


def kernel_name(k: Kernel) -> str:
    """tinygrad's name: r (reduce), C (copy) or E (elementwise), the number of outputs when more than one, and
    the full shape, e.g. r_16_8_8_16_128_4_4_4; a symbolic size as its letters and digits: (i*3) is i_3, (1+i) 1_i."""
    kind = "r" if k.reduceop is not None else "C" if all(x.op in BufferOps for x in k.ast[0].lazyops) else "E"
    sizes = [str(s) if isinstance(s, int) else "_".join(re.findall(r"[A-Za-z0-9]+", s.render())) for s in k.full_shape]
    return kind + (f"{len(k.ast)}_" if len(k.ast) > 1 else "_") + "_".join(sizes)


def render(k: Kernel, limits: tuple[int, Sequence[int]] | None = None) -> Program:
    """Render the kernel, with its current opts, as an OpenCL program.

    `limits` = (threads per work-group, per-dim maximum) of the device that will run it; local dims beyond them
    run as loops inside each thread. Without it the program is exactly the kernel's."""
    require_kernel(k, "render")
    images_read = {x.arg.idx for x in k.lazyops if x.op is BufferOps.LOAD and is_image(x.arg.dtype)}
    for i in sorted(images_read & {x.arg.idx for x in k.ast}):  # updated in place
        raise ValueError(f"{kernel_name(k)} reads and writes image data{i}: an OpenCL image is read_only or write_only")
    for axis, size in enumerate(k.full_shape):
        if _largest(size) > INT32_MAX:
            what = f"{kernel_name(k)}: axis {axis} of size {size} (its loop counter or id)"
            raise ValueError(f"{what} does not fit in a 32-bit int; split it with a reshape")
    flat = frozenset(b.idx for b in k.bufs if is_image(b.dtype) and prod(b.dtype.shape) == 0)  # no pixels: no image
    while True:
        try:
            return _Renderer(k, flat, limits).render()
        except _NeedsFlatImage as e:  # write that image output as a plain buffer of h*w*4 elements instead
            flat = flat | {e.args[0]}


def require_kernel(k: Any, fn: str) -> None:
    """`fn` takes a Kernel: an AST (a tuple of STOREs) is not one yet."""
    if not isinstance(k, Kernel):
        hint = ": build one with Kernel(*ast)" if isinstance(k, (tuple, list, LazyOp)) else ""
        raise ValueError(f"{fn} takes a Kernel as its first argument, got {type(k).__name__}{hint}")


def kernel_vars(k_or_ast) -> list[Variable]:
    """The symbolic variables of a kernel or an AST (unbound), one per name, sorted by name: its `int` arguments."""
    roots = k_or_ast.ast if isinstance(k_or_ast, Kernel) else [k_or_ast] if isinstance(k_or_ast, LazyOp) else k_or_ast
    found: dict[str, Variable] = {}
    for root in roots:
        for v in root.vars():
            found.setdefault(v.expr, v.unbind()[0] if v._val is not None else v)
    return [found[name] for name in sorted(found)]
