"""runtime.py: render a kernel.py `Kernel` to OpenCL C, run it with pyopencl, and prove it right with numpy.

Each colour of a kernel's shape becomes code as kernel.py's COLOR_LEGEND says (`python kernel.py demo` prints it);
in the rendered C every id and loop names its colour and axis, e.g. `int gidx0 = get_group_id(1);  /* blue, axis 0:
0 <= gidx0 < 16 */`. The grouped reduce (green) is _Renderer.group_reduce.

A kernel with several reduce ops renders each in turn, with its own accumulators, loops and (grouped) __local
buffer and barrier; the stores come after the last one and read every result.

Numerics: where C leaves an answer open, the device and the numpy reference follow one rule, numpy's
(docs/numerics.md lists them). Each multiply and add rounds on its own, as numpy computes a*b + c (`#pragma OPENCL
FP_CONTRACT OFF`); only a SUM of products may be fused, in a block of its own under `FP_CONTRACT ON`, since its
order makes a sum inexact anyway: unfused, matmul and conv2d ran up to 1.6x slower on Intel's runtime, and an
explicit fma() up to 12x slower on pip's PoCL (BENCHMARKS.md).

Usage: python runtime.py show NAME | verify [NAME]   (each with --help; the beam search is search.py's)
"""

from __future__ import annotations

import argparse
import copy
import functools
import io
import itertools
import math
import os
import pathlib
import re
import statistics
import sys
import threading
import warnings
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl as cl

from kernel import TARGETS, AndNode, BinaryOps, BufferOps, ConstBuffer, DivNode, Kernel, LazyOp, LtNode
from demo import DEMOS
from kernel import MemBuffer, ModNode, MulNode, Node, NumNode, OptOps, ReduceOps, ShapeTracker, SumNode, TernaryOps
from kernel import UnaryOps, Variable, dedup, dtypes, prod, render_lt_as_ge
from demo import demo_kernel, int_at_least, parse_opt_arg
from kernel import SHORT_FLOATS, VECTOR_WIDTHS, check_arg, is_int, is_vector_start, sym_infer
from demo import run_command_line
from kernel import _map_view, sym_render, verify_lazyop, walk_ast

# ============================================================================================================
# dtypes: how each kernel.py dtype looks in numpy, in device memory, and in registers
# ============================================================================================================
# name -> (numpy dtype, C type in memory, C type in registers). half is kept in memory and computed as float
# (vload_half/vstore_half are core OpenCL, cl_khr_fp16 is not); bool lives in memory as one byte. bfloat16 is the
# top half of a float32: kept in memory as 16 bits (a ushort), computed as float; on the host its arrays are
# float32 ones, rounded to bfloat16 on the way to the device (see _bf16_bits).
_TYPES = {
    "bool": (np.bool_, "uchar", "bool"),
    "char": (np.int8, "char", "char"),
    "unsigned char": (np.uint8, "uchar", "uchar"),
    "short": (np.int16, "short", "short"),
    "unsigned short": (np.uint16, "ushort", "ushort"),
    "int": (np.int32, "int", "int"),
    "unsigned int": (np.uint32, "uint", "uint"),
    "long": (np.int64, "long", "long"),
    "unsigned long": (np.uint64, "ulong", "ulong"),
    "half": (np.float16, "half", "float"),
    "__bf16": (np.float32, "ushort", "float"),
    "float": (np.float32, "float", "float"),
    "double": (np.float64, "double", "double"),
}
_C_NUMPY = {ctype: np_t for np_t, _, ctype in _TYPES.values()}  # register C type -> numpy type
_INT_SUFFIX = {"uint": "u", "long": "l", "ulong": "ul"}  # char and short literals are ints, cast back after each op


def _is_image(dt) -> bool:
    return getattr(dt, "base", None) is not None  # an ImageDType knows the dtype it is computed as


def _scalar(dt):
    """The element dtype: an image holds floats (imagef) or halfs (imageh)."""
    return dt if not _is_image(dt) else dtypes.half if dt.name == "imageh" else dt.base


def _type(dt) -> tuple[Any, str, str]:
    if (t := _TYPES.get(_scalar(dt).name)) is None:
        raise NotImplementedError(f"dtype {dt} is not supported by the OpenCL runtime")
    return t


def np_dtype(dt) -> np.dtype:
    """The numpy dtype of a kernel.py dtype (for images: of one element)."""
    return np.dtype(_type(dt)[0])


def _compute_np(dt) -> np.dtype:
    """numpy dtype the reference computes in: like the device, half is computed as float32 (rounded, _round_short)."""
    return np.dtype(np.float32) if np_dtype(dt) == np.float16 else np_dtype(dt)


def _short(dt):
    """half or bfloat16 where dt computes as one (each result rounded to it), else None; an imageh computes as float."""
    return dt.scalar() if dt.scalar() in SHORT_FLOATS else None


def _is_float(dt) -> bool:
    return np_dtype(dt).kind == "f"


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


def _c_const(val, dt) -> str:
    """A constant as a C literal of the register type of dt."""
    ctype = _type(dt)[2]
    if ctype == "bool":
        return "1" if val else "0"
    with np.errstate(over="ignore"):  # the float32 numpy makes of val (a finite double beyond its range: an infinity)
        num = np.float32(val) if ctype == "float" else val
    if not math.isfinite(num):  # C's macros are floats: a double's is cast (fmod(x, INFINITY) of a double is ambiguous)
        text = "NAN" if math.isnan(num) else "INFINITY" if num > 0 else "(-INFINITY)"
        return text if ctype == "float" else f"((double){text})"
    if ctype == "double":
        text = repr(float(val))
    elif ctype == "float":  # in digits that C reads back as that same float
        text = (str(num) if any(c in str(num) for c in ".e") else f"{num}.0") + "f"
    else:  # a literal of the type itself: -3u is uint arithmetic, -3 would be int's
        low = val == np.iinfo(np_dtype(dt)).min and val < 0  # the literal 2**63 doesn't exist in C: -(2**63-1)-1
        text = f"{int(val) + 1}{_INT_SUFFIX.get(ctype, '')}-1" if low else f"{int(val)}{_INT_SUFFIX.get(ctype, '')}"
    return f"({text})" if text.startswith("-") else text  # (-1.0f), (-0.0f): NEG of it is -(-1.0f), not --1.0f


def _reduce_init(op, dt):
    """The identity of a reduction: 0 for SUM; for MAX the smallest value of the dtype."""
    if op is ReduceOps.SUM:
        return 0
    if _is_float(dt):
        return -math.inf
    return False if np_dtype(dt) == np.bool_ else int(np.iinfo(np_dtype(dt)).min)


# ============================================================================================================
# rendering: Kernel -> OpenCL C
# ============================================================================================================
def _c_sum(x: SumNode, ops: dict, ctx: Any) -> str:
    """A sum with its constant last (`(a+b-1)`): neighbouring indices then share their common part."""
    terms = "+".join(sorted(y.render(ops, ctx) for y in x.nodes if not isinstance(y, NumNode)))
    return f"({terms}{''.join(f'{y.b:+d}' for y in x.nodes if isinstance(y, NumNode))})"


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


# each op in OpenCL C ({0}, {1}, {2}: the C expressions of the sources) and in numpy (the reference's meaning)
_OPS = {
    UnaryOps.EXP2: ("exp2({0})", np.exp2),
    UnaryOps.LOG2: ("log2({0})", np.log2),
    UnaryOps.SIN: ("sin({0})", np.sin),
    UnaryOps.SQRT: ("sqrt({0})", np.sqrt),
    UnaryOps.NEG: ("(-{0})", np.negative),
    UnaryOps.RECIP: ("(1/{0})", _np_recip),
    BinaryOps.ADD: ("({0}+{1})", np.add),
    BinaryOps.MUL: ("({0}*{1})", np.multiply),
    BinaryOps.IDIV: ("({0}/{1})", _np_idiv),
    BinaryOps.MOD: ("({0}%{1})", np.fmod),  # C's: the remainder takes the dividend's sign
    BinaryOps.MAX: ("max({0},{1})", _np_max),
    BinaryOps.CMPLT: ("({0}<{1})", np.less),
    BinaryOps.CMPNE: ("({0}!={1})", np.not_equal),
    BinaryOps.XOR: ("({0}^{1})", np.bitwise_xor),
    BinaryOps.SHL: ("({0}<<{1})", np.left_shift),
    BinaryOps.SHR: ("({0}>>{1})", np.right_shift),
    TernaryOps.WHERE: ("({0}?{1}:{2})", np.where),
    TernaryOps.MULACC: ("(({0}*{1})+{2})", lambda a, b, c: a * b + c),
}
# ... and on bools, where C's integer meaning would be wrong: as 0 and 1, with x/0 = 0 (numpy's): 1/true is true,
# 1/false false; a/b is a and b; a%b is always 0
_OPS_BOOL = {
    UnaryOps.NEG: ("(!{0})", np.logical_not),
    BinaryOps.ADD: ("({0}||{1})", np.logical_or),
    BinaryOps.MUL: ("({0}&&{1})", np.logical_and),
    BinaryOps.MAX: ("({0}||{1})", np.logical_or),
    UnaryOps.RECIP: ("{0}", lambda a: a),
    BinaryOps.IDIV: ("({0}&&{1})", np.logical_and),
    BinaryOps.MOD: ("0", lambda a, b: np.zeros(np.broadcast(a, b).shape, np.bool_)),
}
_C_OPS_BOOL = {op: c for op, (c, _) in _OPS_BOOL.items()}
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
    table = _C_OPS_BOOL if np_dtype(src_dtype) == np.bool_ else _C_OPS_FLOAT if _is_float(src_dtype) else {}
    ctype = _type(src_dtype)[2]
    # C leaves these undefined for some operands (and OpenCL's max() of a NaN): helpers defined as numpy does
    if (op in _INT_HELPERS and not table) or (op is BinaryOps.MAX and _is_float(src_dtype)):
        return f"{_helper(op.name.lower(), ctype)}({','.join(srcs)})"
    if op is BinaryOps.MAX and op not in table and ctype != "int":  # max() of a long and an int literal (or of
        return f"max(({ctype}){srcs[0]},({ctype}){srcs[1]})"  # two types) is ambiguous in OpenCL: name the type
    if op in _WRAPPING_OPS and ctype in ("int", "long"):
        return f"(({ctype}){_OPS[op][0].format(*(f'(u{ctype}){s}' for s in srcs))})"
    return table.get(op, _OPS[op][0]).format(*srcs)


def _helper_body(kind: str, ctype: str) -> str:
    """The body of helper `kind` for operands of ctype (a, b; a register ctype of kernel.py's dtypes)."""
    if kind == "max":  # numpy's maximum: a NaN wins (x != x only for NaN); of two equal values, the AND of their bits
        # is either, except that +0.0 (no bits set) beats -0.0, so that no order of a reduce changes the sign of a 0.
        # (Spelled with isnan() or as a chain of five selects, Intel's CPU compiler hangs on 16 nested calls.)
        bits = "uint" if ctype == "float" else "ulong"
        return f"return a > b || a != a ? a : b > a || b != b ? b : as_{ctype}(as_{bits}(a) & as_{bits}(b));"
    signed, bits = not ctype.startswith("u"), 8 * np.dtype(_C_NUMPY[ctype]).itemsize
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
        info = np.iinfo(_C_NUMPY[dst])
        f = "f" if src == "float" else ""
        top = f"0x1p{info.bits - (info.min < 0)}{f}"  # dst's largest value + 1: a power of 2, exact in any float
        low = f"({info.min + 1}l-1)" if info.min == -(2**63) else str(info.min)  # C has no literal 2**63
        clamp = f"a >= {top} ? ({dst}){info.max}{_INT_SUFFIX.get(dst, '')} : a < ({src})({low}) ? ({dst})({low})"
        # convert_<dst>_rtz, not a cast: Intel's CPU compiler folds (float)(int)a into trunc(a), -0.0 for a in (-1, 0)
        _HELPERS[name] = f"{dst} {name}({src} a) {{ return isnan(a) ? 0 : {clamp} : convert_{dst}_rtz(a); }}\n"
    return name


def _cast(expr: str, src, dst) -> str:
    """C for CAST(expr, dst) of a value of dtype src, as docs/numerics.md says: a float to an int truncated toward
    zero and clamped (NaN: 0), to half or bfloat16 rounded once, anything to bool `!= 0` (C's own conversion).
    A STORE into a buffer of another dtype converts the same way."""
    ctype, src_ctype = _type(dst)[2], _type(src)[2]
    if _is_float(src) and not _is_float(dst) and np_dtype(dst) != np.bool_:
        return f"{_float_to_int(src_ctype, ctype)}({expr})"
    return _rounded(dst, expr, src_ctype) if _short(dst) else f"(({ctype})({expr}))"


def _rounded(dt, expr: str, ctype: str = "float") -> str:
    """expr (of C type ctype) as dt computes it: for half and bfloat16, rounded once to nearest even (as
    _round_short), by a helper (half_of_float, bf16_of_double, ...)."""
    if (short := _short(dt)) is None:
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
        self.float4_axis = [k.vector_axis(i)[0] for i in range(len(k.bufs))]  # kernel.py's rule
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
            axis = axes[i]
            if (size := self.k.full_shape[axis]) > 1:  # the launch dims count axes in reverse: see fit_dims
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
        _, mem, ctype = _type(buf.dtype)
        zero = _c_const(0, buf.dtype)
        if isinstance(buf, ConstBuffer):
            _, valid = self.exprs(i, idxs)
            var = self.c_vars[buf.val.expr].expr if isinstance(buf.val, Node) else None  # a Variable's value
            val = f"(({ctype}){var})" if var else _c_const(buf.val, buf.dtype)
            return self._gate(valid, val, zero)
        if image := _is_image(buf.dtype) and buf.idx not in self.flat_images:
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
                return self.reg(_type(op.dtype)[2], expr, "alu"), 0
            return expr, depth

        return walk_ast(x, one, {}, stop=lambda op: op.op in ReduceOps)[0]  # a reduce is its accumulator

    def operand(self, x: LazyOp, idxs: list[Any]) -> str:
        """x's value as a name or a literal: an expression goes to a register first, so that a multiply-add inside it
        rounds on its own even where the statement that uses it may be fused."""
        expr = self.value(x, idxs, None)
        return expr if re.fullmatch(r"[\w.]+", expr) else self.reg(_type(x.dtype)[2], expr, "alu")

    def op_value(self, x: LazyOp, srcs: list[str], idxs: list[Any], accs: dict[LazyOp, str] | None) -> str:
        """C expression of op x from its sources' expressions."""
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            return self.load(self.buf_index[x.arg], idxs)
        if x.op in ReduceOps:
            assert accs is not None and x in accs, "a reduce is only read after its loop"
            return _rounded(x.dtype, accs[x])
        ctype = _type(x.dtype)[2]  # a CAST's dtype is its arg
        if x.op is UnaryOps.BITCAST:
            if _scalar(x.arg).itemsize != 4 or _scalar(x.src[0].dtype).itemsize != 4:
                raise NotImplementedError("BITCAST is supported between 4-byte types only")
            if _is_float(x.src[0].dtype) and not _is_float(x.arg):  # a NaN's bits are the machine's: one NaN here
                return f"as_{ctype}(float_bits({srcs[0]}))"
            return f"as_{ctype}({srcs[0]})"
        if x.op is UnaryOps.CAST:
            return _cast(srcs[0], x.src[0].dtype, x.arg)
        src_dt, op = x.src[0].dtype if x.op is not TernaryOps.WHERE else x.src[1].dtype, x.op
        if op is TernaryOps.MULACC and _short(x.dtype):  # a MUL, then an ADD, each rounded (numpy's float16)
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
            if _scalar(root.src[0].dtype) != _scalar(root.arg.dtype):  # into a buffer of another dtype: as a CAST
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
        ctype, init = _type(r.dtype)[2], _c_const(_reduce_init(r.op, r.dtype), r.dtype)
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
        fused = r.op is ReduceOps.SUM and src.op is BinaryOps.MUL and _type(dt)[1] in ("float", "double")
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
                if fused:  # (a2*b2)+(a1*b1)+(a0*b0)+acc: tinygrad's order, the last term first (the first term
                    # first ran matmul 512 1.25x to 1.33x slower on pip's PoCL, in four sittings)
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
        self.lines.insert(n, f"  __local {_type(dt)[2]} {temp}[{prod(temp_shape)}];")  # __local lives at kernel scope
        self.local_bytes += prod(temp_shape) * np.dtype(_C_NUMPY[_type(dt)[2]]).itemsize

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
        _, mem, ctype = _type(buf.dtype)
        name, image = f"data{buf.idx}", _is_image(buf.dtype) and buf.idx not in self.flat_images
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
                params.append(f"{'' if buf.idx in outputs else 'const '}__global {_type(buf.dtype)[1]}* data{buf.idx}")
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
    ret.sts = [ShapeTracker(tuple(_map_view(v, rename) for v in st.unbind()[0].views)) for st in k.sts]
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
    _check_kernel(k, "render")
    images_read = {x.arg.idx for x in k.lazyops if x.op is BufferOps.LOAD and _is_image(x.arg.dtype)}
    for i in sorted(images_read & {x.arg.idx for x in k.ast}):  # updated in place
        raise ValueError(f"{kernel_name(k)} reads and writes image data{i}: an OpenCL image is read_only or write_only")
    for axis, size in enumerate(k.full_shape):
        if _largest(size) > INT32_MAX:
            what = f"{kernel_name(k)}: axis {axis} of size {size} (its loop counter or id)"
            raise ValueError(f"{what} does not fit in a 32-bit int; split it with a reshape")
    flat = frozenset(b.idx for b in k.bufs if _is_image(b.dtype) and prod(b.dtype.shape) == 0)  # no pixels: no image
    while True:
        try:
            return _Renderer(k, flat, limits).render()
        except _NeedsFlatImage as e:  # write that image output as a plain buffer of h*w*4 elements instead
            flat = flat | {e.args[0]}


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
        return tuple(self.dtype.shape) if _is_image(self.dtype) else (self.size,)


def buffers(ast: Sequence[LazyOp]) -> list[BufferInfo]:
    """The kernel's buffers in idx order, each as large as its furthest access."""
    outputs = {root.arg.idx for root in ast}
    found: dict[int, BufferInfo] = {}
    for x in (op for root in ast for op in root.lazyops if op.op in (BufferOps.LOAD, BufferOps.STORE)):
        size = _needed_size(x.arg.st)
        if _is_image(x.arg.dtype) and size > prod(x.arg.dtype.shape):
            raise ValueError(f"a view of data{x.arg.idx} reaches element {size - 1}, beyond its image {x.arg.dtype}")
        size = prod(x.arg.dtype.shape) if _is_image(x.arg.dtype) else size
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


def _check_kernel(k: Any, fn: str) -> None:
    """`fn` takes a Kernel: an AST (a tuple of STOREs) is not one yet."""
    if not isinstance(k, Kernel):
        hint = ": build one with Kernel(*ast)" if isinstance(k, (tuple, list, LazyOp)) else ""
        raise ValueError(f"{fn} takes a Kernel as its first argument, got {type(k).__name__}{hint}")


def _ast(k_or_ast) -> tuple[LazyOp, ...]:
    """The STOREs of a Kernel or of an AST, checked by the rules a Kernel checks (ValueError naming the one broken)."""
    if isinstance(k_or_ast, LazyOp):
        k_or_ast = (k_or_ast,)
    ast = tuple(k_or_ast.ast if hasattr(k_or_ast, "ast") else k_or_ast)
    verify_lazyop(*ast)
    return ast


def kernel_vars(k_or_ast) -> list[Variable]:
    """The symbolic variables of a kernel (unbound), one per name, sorted by name: its `int` arguments."""
    found: dict[str, Variable] = {}
    for root in _ast(k_or_ast):
        for v in root.vars():
            found.setdefault(v.expr, v.unbind()[0] if v._val is not None else v)
    return [found[name] for name in sorted(found)]


def var_values(k_or_ast, var_vals: dict | None = None) -> dict[str, int]:
    """{name: value} for every variable of the kernel, from var_vals (keys are names or Variables), else the
    value a variable is bound to in the AST. A missing value, one outside the variable's range, or a name the
    kernel doesn't have is a ValueError that names the variable and its range."""
    variables = kernel_vars(k_or_ast)
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
    return x if isinstance(x, int) else sym_infer(x.substitute({v: NumNode(values[v.expr]) for v in x.vars()}), None)


def concrete_ast(k_or_ast, values: dict[str, int]) -> tuple[LazyOp, ...]:
    """The AST with every variable replaced by its value: plain integer ShapeTrackers and constants."""
    ast = _ast(k_or_ast)
    if not values:
        return ast
    by_var = {v: values[v.expr] for v in kernel_vars(ast)}

    def sub(x: LazyOp, srcs: list[LazyOp]) -> LazyOp:
        arg = x.arg
        if isinstance(arg, MemBuffer):
            arg = MemBuffer(arg.idx, arg.dtype, arg.st.at_values(by_var))
        elif isinstance(arg, ConstBuffer):
            val = infer(arg.val, values) if isinstance(arg.val, Node) else arg.val
            arg = ConstBuffer(val, arg.dtype, arg.st.at_values(by_var))
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
        if _is_image(b.dtype) and x.shape != b.shape:
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
    """The OpenCL compiler rejected a program; the message holds the numbered source and the build log."""


class VerificationError(AssertionError):
    """A kernel's output differs from the numpy reference."""


@dataclass
class Device:
    """An OpenCL device, its context and queue, and the programs built for it (source -> kernel)."""

    ctx: cl.Context
    queue: cl.CommandQueue
    name: str
    programs: OrderedDict[str, Any] = field(default_factory=OrderedDict)  # the PROGRAM_CACHE_SIZE most recently used


_device: Device | None = None
_device_init_lock = threading.Lock()  # the first use from several threads makes one device, whole before it is used
PROGRAM_CACHE_SIZE = 256  # built programs kept (about 73 KB each on PoCL): the most recently used ones
_programs_lock = threading.Lock()
_build_lock = threading.Lock()  # one build at a time: in Intel's CPU runtime, one of two at once sometimes never ended
# and blocked every later build of the process (search.py builds side by side in processes of their own)
device_lock = threading.Lock()  # one thread at a time sets a kernel's arguments and launches it (search.py's too)
_NO_DEVICE = 'no OpenCL device found. Install a CPU device with: pip install -e ".[cpu]" (PoCL and Intel\'s runtime)'
# Intel's CPU runtime reports "Compilation started/done" on every build; pyopencl would warn about each
warnings.filterwarnings("ignore", category=cl.CompilerWarning)


def cache_dir() -> str:
    """The project's cache folder (OpenCL driver lists, search.py's searches): $KERNELPY_CACHE, else
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
                (tmp := folder / f".{name}.{os.getpid()}.{threading.get_ident()}").write_text(text)
                os.replace(tmp, path)
    except OSError:
        return  # an unwritable cache: the loader sees only the system's drivers
    os.environ["OCL_ICD_VENDORS"] = str(folder)


def _builds(device) -> bool:
    """Whether `device` compiles a one-line kernel: PoCL's LLVM rejects CPUs newer than itself ('unknown target CPU
    generic', seen on AMD Zen 5), and such a device is passed over for the next one."""
    try:
        cl.Program(cl.Context([device]), "__kernel void probe(__global float* x) { x[0] = 1.0f; }").build()
        return True
    except cl.Error:
        return False


def working_devices():
    """Every OpenCL device of this machine whose compiler builds a test kernel, GPUs first, then CPUs: a generator (a
    device is tried when it is reached). KERNELPY_DEVICE's index counts in this order."""
    _register_pip_opencl_drivers()
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    ranked = [d for kind in (cl.device_type.GPU, cl.device_type.CPU) for d in devices if d.type & kind]
    return (d for d in ranked + [d for d in devices if d not in ranked] if _builds(d))


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
            working = list(itertools.islice(working_devices(), int(choice) + 1 if choice.isdigit() else None))
            if not working:
                found = ", ".join(d.name.strip() for p in cl.get_platforms() for d in p.get_devices())
                raise NoDeviceError(f"{_NO_DEVICE} (found: {found or 'none'}; none of them compiles a kernel)")
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
    if choice.isdigit():
        hits = [int(choice)] if int(choice) < len(names) else []
    else:
        hits = [i for i, name in enumerate(names) if choice.lower() in name.lower()]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(f"{i}: {names[i]}" for i in hits or range(len(names)))
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
    """Kernel `name` of an OpenCL program, compiled once per source while among the PROGRAM_CACHE_SIZE most recent;
    `compiler(src)`, where given, compiles in another process and returns the device's binary (search.py's)."""
    programs, ctx = (dev := get_device()).programs, dev.ctx  # one device throughout
    with _programs_lock:  # the beam search builds in several threads at once
        if (kern := programs.get(src)) is not None:
            programs.move_to_end(src)
            return kern
    try:
        binary = compiler(src) if compiler else None
        with _build_lock:  # not under _programs_lock: another thread may find a built kernel meanwhile
            program = (cl.Program(ctx, ctx.devices, [binary]) if binary else cl.Program(ctx, src)).build()
    except (cl.Error, BuildError) as e:
        numbered = "\n".join(f"{n:4d}  {line}" for n, line in enumerate(src.splitlines(), 1))
        raise BuildError(f"OpenCL build of {name} failed.\n{numbered}\nbuild log:\n{e}") from None
    with _programs_lock:
        kern = programs[src] = getattr(program, name)
        while len(programs) > PROGRAM_CACHE_SIZE:
            programs.popitem(last=False)
    return kern


def runtime_local_size(global_size: Sequence[int]) -> list[int]:
    """The work-group of a kernel that leaves it to the device (local size None): the largest divisor <= 32 of dim 0."""
    return [max(d for d in range(1, 33) if global_size[0] % d == 0)] + [1] * (len(global_size) - 1)


class Launch:
    """A kernel built and its buffers on the device, ready to run any number of times."""

    def __init__(self, k: Kernel, inputs: Sequence, var_vals=None, prg=None, device_args=None, second_poison=False):
        """`prg`: k's Program, rendered with the device's limits. `device_args`: a dict that keeps the device buffers
        between launches of kernels of one AST (the beam search times many), filled on first use. See run too."""
        values = var_values(k, var_vals)  # checked before anything is built or launched
        self.infos = {b.idx: b for b in buffers(concrete_ast(k, values))}
        host = check_inputs(list(self.infos.values()), inputs)
        dev = get_device()
        self.prg = prg or render(k, device_limits())
        check_limits(self.prg, self.infos)  # before anything is built or allocated
        self.kern = build(self.prg.src, self.prg.name)
        check_limits(self.prg, self.infos, self.kern)
        mf = cl.mem_flags
        self.outputs, self.args = {}, []
        for idx, kind in self.prg.args:
            b = self.infos[idx]
            if device_args is not None and (idx, kind) in device_args:
                self.args.append(device_args[idx, kind])
                continue
            data = (host[idx].copy() if b.output else host[idx]) if b.read else _poisoned(b, second_poison)
            if b.dtype == dtypes.bfloat16:
                data = _bf16_bits(data)  # read() turns them back into floats
            if b.output:
                self.outputs[idx] = data
            data = _bytes(data)
            if data.size == 0:  # a buffer of no elements, or only ever read in its padding: OpenCL has no empty
                data = np.zeros(4 if kind == "image" else 1, data.dtype)  # buffers or images: one element (pixel)
            access = mf.READ_WRITE if b.read and b.output else mf.WRITE_ONLY if b.output else mf.READ_ONLY
            flags = access | mf.COPY_HOST_PTR
            if kind == "image":
                h, w, _ = b.shape if b.size else (1, 1, 4)
                channel = cl.channel_type.HALF_FLOAT if data.dtype == np.float16 else cl.channel_type.FLOAT
                fmt = cl.ImageFormat(cl.channel_order.RGBA, channel)
                self.args.append(cl.create_image(dev.ctx, flags, fmt, shape=(w, h), hostbuf=data.reshape(h, w, 4)))
            else:
                self.args.append(cl.Buffer(dev.ctx, flags, hostbuf=data))
            if device_args is not None:
                device_args[idx, kind] = self.args[-1]
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
    _check_kernel(k, "run")
    check_arg("run", "second_poison", second_poison, isinstance(second_poison, bool), "True or False")
    launch = Launch(k, inputs, var_vals, second_poison=second_poison)
    launch.launch()
    return launch.read()


def time_kernel(k: Kernel, *inputs: np.ndarray, runs: int = 10, warmup: int = 2, var_vals: dict | None = None) -> float:
    """Median seconds of the kernel alone, from OpenCL profiling events, after `warmup` runs."""
    _check_kernel(k, "time_kernel")
    for name, value, low in (("runs", runs, 1), ("warmup", warmup, 0)):
        check_arg("time_kernel", name, value, is_int(value) and value >= low, f"an int >= {low}")
    launch = Launch(k, inputs, var_vals)
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
    return _round_short(x, short) if (short := _short(dt)) else x.astype(_compute_np(dt), copy=False)


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


def _np_bitcast(x: np.ndarray, to) -> np.ndarray:
    """The bits of x (4-byte values) as dtype `to`; every float NaN is the one quiet NaN 0x7fc00000, as on the device
    (float_bits)."""
    if x.dtype.kind == "f":
        x = np.where(np.isnan(x), np.uint32(0x7FC00000).view(np.float32), x).astype(np.float32)
    return np.ascontiguousarray(x).view(np_dtype(to))


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


class _Reference:
    """Evaluates an AST over one box of the iteration space at a time. Every load gathers through
    ShapeTracker.indices(); axes a buffer doesn't move along (stride 0) are read once and broadcast. A STORE into
    another dtype is a CAST to it. With a `nudge` (-1 or 1) and a tolerance (verify's), each jump (_JUMPS) of inexact
    floats takes its lowest (or its highest) answer for floats anywhere within the tolerance, and `uncertain` says
    of each output element how far that answers for a correct kernel's (see uncertainty)."""

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

    def _view(self, st, box):
        """st restricted to the box: axes where st has size 1 (reduced, or broadcast) stay whole."""
        if id(st) not in self.strides:
            self.strides[id(st)] = st.real_strides()
        axes = zip(st.shape, self.strides[id(st)], box)
        return st.shrink(tuple((0, 1) if s == 1 or stride == 0 else rng for s, stride, rng in axes))

    def inexact(self, x: LazyOp) -> bool:
        """Whether float x may differ from the device's value (an _INEXACT op computed it, or its float sources)."""
        return walk_ast(x, lambda op, srcs: _is_float(op.dtype) and (op.op in _INEXACT or any(srcs)), self.inexacts)

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
        if x.op is UnaryOps.BITCAST:  # the bits of the floats in the range: between its ends' (and +-0.0's, where it
            across = (dist < tol) & (dist > -tol)  # holds 0: a float's bits order its values on either side of 0)
            ends = (dist - tol, dist + tol, np.where(across, 0.0, dist), np.where(across, -0.0, dist))
            low, high = np.minimum.reduce(bits := [_np_bitcast(e, x.arg) for e in ends]), np.maximum.reduce(bits)
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
            exact = _OPS[x.op][1](*(s.astype(np.float64) for s in srcs))
        return np.where((k > 0) & (exact != ret), 2, np.minimum(k, 2)).astype(np.int8)

    def value(self, x: LazyOp, box, memo: dict) -> np.ndarray:
        """x's values over the box; memo holds every op's computed there (each op once, its sources first)."""
        nothing = lambda op: op.op in ReduceOps and any(self.full[a] == 0 for a in op.arg)  # noqa: E731
        return walk_ast(x, lambda op, srcs: self.op_value(op, srcs, box), memo, stop=nothing)

    def op_value(self, x: LazyOp, srcs: list[np.ndarray], box) -> np.ndarray:
        dt, short = _compute_np(x.dtype), _short(x.dtype)
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            st = self._view(x.arg.st, box)
            if (last := self.loaded.get(x)) is not None and last[0] == st:  # the same part as the last box's: kept
                ret = last[1]
            elif x.op is BufferOps.CONST and all(v.mask is None for v in st.views):
                ret = np.full((1,) * len(st.shape), x.arg.val, dt)
            else:
                idx, valid = st.indices()
                vals = self.data[x.arg.idx][idx] if x.op is BufferOps.LOAD else np.full(idx.shape, x.arg.val)
                ret = np.where(valid, vals, 0).astype(dt)
            self.loaded[x] = (st, ret)
        elif x.op in ReduceOps and any(self.full[a] == 0 for a in x.arg):  # a reduce of nothing: its identity
            shape = tuple(1 if a in x.arg else hi - lo for a, (lo, hi) in enumerate(box))
            ret = np.full(shape, _reduce_init(x.op, x.dtype), dt)
        elif x.op in ReduceOps:
            src = np.broadcast_to(srcs[0], tuple(hi - lo for lo, hi in box))
            axes = tuple(x.arg)
            if x.op is ReduceOps.MAX:  # as repeated _np_max: a NaN wins, and a +0.0 anywhere beats every -0.0
                ret = np.max(src, axis=axes, keepdims=True, initial=_reduce_init(x.op, x.dtype))
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
            fn = (_OPS_BOOL if np_dtype(src_dt) == np.bool_ and x.op in _OPS_BOOL else _OPS)[x.op][1]
            if x.op is TernaryOps.MULACC and short:  # a MUL, then an ADD, each rounded (numpy's float16)
                srcs, fn = [_round_short(srcs[0] * srcs[1], short), srcs[2]], np.add
            ret = np.asarray(fn(*srcs))
        near = None
        if self.nudge and x.op in _JUMPS and not (x.op is UnaryOps.CAST and _is_float(x.arg)):
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
                (idx, valid), val = st.indices(), self.value(root.src[0], box, memo)
                _bytes(outputs[root.arg.idx])[idx[valid]] = np.broadcast_to(val, st.shape)[valid]
                self.uncertain[root.arg.idx][idx[valid]] = np.broadcast_to(self.ks.get(root.src[0], 0), st.shape)[valid]


def reference(k_or_ast, *inputs: np.ndarray, var_vals: dict | None = None) -> list[np.ndarray]:
    """The outputs of the kernel's (original, unoptimized) AST, computed with numpy: what `run` must return."""
    return _evaluate(k_or_ast, inputs, var_vals)[0]


def _evaluate(k_or_ast, inputs: Sequence[np.ndarray], var_vals, nudge: int = 0) -> tuple[list, list]:
    """reference's outputs; with a nudge, verify's lowest or highest answers, and each output's uncertainty (flat;
    see _Reference)."""
    ast = concrete_ast(k_or_ast, var_values(k_or_ast, var_vals))
    infos = buffers(ast)
    host = check_inputs(infos, inputs)
    # as uploaded, in the register dtype, plus one element: a buffer only ever read in its padding may be empty
    padded = {b.idx: np.append(host[b.idx], np.zeros(1, host[b.idx].dtype)) for b in infos if b.read}
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
    rtol = 2e-2 if {_scalar(x.dtype).name for root in ast for x in root.lazyops} & {"half", "__bf16"} else 1e-3
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
    _check_kernel(k, "verify")
    values = var_values(k, var_vals)
    ast = concrete_ast(k, values)
    outs = [b for b in buffers(ast) if b.output]
    want_all = reference(k, *inputs, var_vals=values) if expected is None else _check_expected(k, outs, expected)
    written = {b.idx: _written(ast, b) for b in outs}

    def true_value_is_poison(b: BufferInfo, want: np.ndarray) -> bool:
        poison, want = _poisoned(b).reshape(-1), np.asarray(want).reshape(-1)
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
                if not bounds:  # the tolerance, where `want` is too; or any answer the kernel wrote (_Reference)
                    bounds += [_evaluate(k, inputs, values, nudge) for nudge in (-1, 1)]
                low, high = (_keeps_unwritten(end[n], b, written[b.idx], second) for end, _ in bounds)
                uncertain = np.maximum(bounds[0][1][n], bounds[1][1][n])  # (an int may wrap at one end only)
                bad &= ~((uncertain == 1) & _between(got, low, high, tol) & _between(want, low, high, tol))
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
        "them against numpy. (The beam search is search.py's: python search.py NAME.)",
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
        launch = f"[{', '.join(sym_render(g) for g in prg.global_size)}]"
        if prg.local_size:
            launch += f" work-groups of {prg.local_size} threads"
        else:
            launch += " threads; the kernel sets no work-group size, runtime.py launches groups of the largest divisor"
            launch += " <= 32 of dim 0"
        launch += " (launch dims: the blue axes last first, the cyan ones in order)"
        if prg.vars:
            named = ", ".join(f"{c} = {v.expr} in [{v.min}, {v.max}]" for c, v in zip(c_var_names(prg.vars), prg.vars))
            launch += f"\n  vars            {named}: int arguments; this one program runs every value, the launch "
            launch += "size follows them"
        print(f"  launch          {launch}\n\n{prg.src}")
        return 0
    log = functools.partial(print, flush=True)
    failed, count, kernels = 0, 0, 0
    width = max([16] + [len(str(o)) + 2 for o in args.opt or ()])  # as wide as demo_kernel's column of opts
    for name in [args.name] if args.name else list(DEMOS):
        k, rejected = demo_kernel(name, args.target, args.opt, out=io.StringIO())  # logging only what it rejected
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
