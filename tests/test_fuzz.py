"""The fuzzer: random kernels of every dtype, on random shapes (0 and 1 included), with random opts, run on the
device and compared with the numpy reference.

A kernel is built from random views (permuted, broadcast, flipped, padded, shrunk, strided, reshaped) of its input
buffers, combined by random ops of the dtype at hand (bool, int8 ... uint64, half, float, double), maybe reduced
(SUM or MAX, sometimes as a matmul-like contraction), with one or two outputs. Each is verified with the heuristics'
opts and without, and then after each of a few random opts that the kernel accepts; every rejected opt must leave the
kernel exactly as it was.

A second run, with `special` set, feeds the edges of every dtype: inputs sprinkled with NaN, +-inf, -0.0 and
denormals (ints with 0, -1 and their extremes), and ops on whatever they get: shifts by counts outside the width,
integer division, remainder and reciprocal by anything (0 and -1 included), reciprocals of zeros, square roots and
logs of negatives, float-to-int casts of NaN, infinities and values beyond the int's range.

Both compare the device with runtime.reference, which could share a bug with the renderer. The third, differential
fuzzer (Differential) compares the device with numpy itself, in every bit: random elementwise expressions of every
dtype, each computed by numpy's own ops (half as np.float16, bfloat16 from its bit definition in tests/common.py).

The default run is small (12 plain ASTs, 36 special ones, 60 differential expressions). FUZZ=N runs N of each
instead (FUZZ_SEED=S starts from another seed); a failure names its case as fuzz_case(seed, n),
fuzz_case(seed, n, special=True) or differential_case(seed, n), which replays it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pytest

import runtime as R
from kernel import TARGETS, BinaryOps, BufferOps, DType, Kernel, KernelOptError, LazyOp, Opt, OptOps, ReduceOps
from kernel import ShapeTracker, TernaryOps, UnaryOps, dtypes, optimize, prod
from demo import alu, const, load, reduce, store
from tests.common import DTYPES, INTS, bf16_of, float_to_int

SIZES = [0, 1, 1, 2, 3, 4, 5, 8, 16, 32]  # an axis of 0 makes an empty kernel (or a reduce of nothing)
AMOUNTS = (0, 2, 3, 4, 5, 7, 8, 16, 32)


pytestmark = pytest.mark.usefixtures("device")  # conftest.py: skipped, saying why, without an OpenCL device


# ============================================================================================================
# random views and random expressions
# ============================================================================================================
def random_st(rng: np.random.Generator, shape: tuple[int, ...]) -> ShapeTracker:
    """A random view of some buffer with the given shape: permuted, broadcast, flipped, padded, shrunk, strided
    or reshaped, a few of these at once."""
    n = len(shape)
    perm = [int(x) for x in rng.permutation(n)] if rng.random() < 0.3 else list(range(n))
    base = [0] * n
    for i, p in enumerate(perm):
        base[p] = shape[i]
    bcast = [rng.random() < 0.2 for _ in range(n)]
    st = ShapeTracker.from_shape(tuple(1 if b else s for s, b in zip(base, bcast)))
    st = st.expand(tuple(base)).permute(tuple(perm))
    for _ in range(int(rng.integers(3))):
        axis, kind = int(rng.integers(n)), rng.choice(["flip", "pad", "stride", "reshape"])
        size = shape[axis]
        if kind == "flip":
            st = st.stride(tuple(-1 if i == axis else 1 for i in range(n)))
        elif kind == "pad":  # pad, then shrink back to the shape at a random offset: some elements are padding
            lo, hi = int(rng.integers(3)), int(rng.integers(3))
            start = int(rng.integers(lo + hi + 1))
            st = st.pad(tuple((lo, hi) if i == axis else (0, 0) for i in range(n)))
            st = st.shrink(tuple((start, start + size) if i == axis else (0, s) for i, s in enumerate(st.shape)))
        elif kind == "stride":  # every other element of twice the axis
            st = st.pad(tuple((0, size) if i == axis else (0, 0) for i in range(n)))
            st = st.stride(tuple(2 if i == axis else 1 for i in range(n)))
        else:  # through a flat view and back: a second view when the first isn't contiguous
            st = st.reshape((prod(shape),)).reshape(shape)
    return st


def _small_const(rng: np.random.Generator, dt: DType):
    if dt == dtypes.bool:
        return bool(rng.integers(2))
    if dtypes.is_int(dt):
        return int(rng.integers(0 if dtypes.is_unsigned(dt) else -4, 5))
    return float(rng.integers(-4, 5)) / 2


class AstBuilder:
    """Random expression trees of one dtype over loads of random views (one new input buffer per load).

    Plain: integer division and remainder by a positive constant, shifts by 0..3, float-to-int casts of values in
    [-8, 8), square roots and reciprocals of x*x + 1. `special` adds, a quarter of the time, the ops at their edges
    (see the module's docstring); those choices come from a second generator, so that a plain case replays as it
    always did."""

    def __init__(self, rng: np.random.Generator, special: np.random.Generator | None = None):
        self.rng, self.next_idx, self.special = rng, 1, special

    def edgy(self) -> bool:
        """Whether to build an op at its edges here (special cases only)."""
        return self.special is not None and self.special.random() < 0.25

    def edge_op(self, shape, dt: DType, sub) -> LazyOp | None:
        """An op of dt on operands that C leaves undefined or that numpy defines its own way, or None (bool)."""
        pick = self.special.integers
        if dtypes.is_int(dt):
            op = [BinaryOps.IDIV, BinaryOps.MOD, BinaryOps.SHL, BinaryOps.SHR, UnaryOps.RECIP][pick(5)]
            if op is UnaryOps.RECIP:
                return alu(op, sub())
            if op in (BinaryOps.SHL, BinaryOps.SHR) and pick(2):  # a count just outside the width
                bits = 8 * dt.itemsize
                count = int(pick(-2 if not dtypes.is_unsigned(dt) else 0, bits + 3))
                return alu(op, sub(), const(count, shape, dt))
            return alu(op, sub(), sub())  # any divisor or count: 0, -1 and INT_MIN come in from the inputs
        if dtypes.is_float(dt):
            kind = int(pick(4))
            if kind == 0:  # a reciprocal of the zeros (and NaNs, infs, ...) among x; the rest becomes 2
                x = sub()
                return alu(
                    UnaryOps.RECIP,
                    alu(TernaryOps.WHERE, alu(BinaryOps.CMPNE, x, const(0.0, shape, dt)), const(2.0, shape, dt), x),
                )
            if kind == 1:  # square root and log of an input, negatives (NaN) and zeros (-inf) included
                return alu([UnaryOps.SQRT, UnaryOps.LOG2][pick(2)], self.leaf(shape, dt))
            return alu(BinaryOps.MAX, sub(), sub())
        return None

    def pick(self, choices: Sequence):
        return choices[int(self.rng.integers(len(choices)))]

    def leaf(self, shape, dt) -> LazyOp:
        if self.rng.random() < 0.2:
            return const(_small_const(self.rng, dt), shape, dt)
        self.next_idx += 1
        return load(self.next_idx - 1, random_st(self.rng, shape), dt)

    def expr(self, shape, dt: DType, depth: int) -> LazyOp:
        if depth == 0 or self.rng.random() < 0.25:
            return self.leaf(shape, dt)

        def sub(d: DType = dt) -> LazyOp:
            return self.expr(shape, d, depth - 1)

        if self.edgy() and (x := self.edge_op(shape, dt, sub)) is not None:
            return x
        r = self.rng.random()
        if r < 0.12:
            return alu(TernaryOps.WHERE, sub(dtypes.bool), sub(), sub())
        if r < 0.24:
            return self.cast(shape, dt, depth)
        if dt == dtypes.bool:
            other = self.pick(DTYPES)
            return self.pick(
                [
                    lambda: alu(BinaryOps.CMPLT, sub(other), sub(other)),
                    lambda: alu(BinaryOps.CMPNE, sub(other), sub(other)),
                    lambda: alu(UnaryOps.NEG, sub()),
                    lambda: alu(self.pick([BinaryOps.ADD, BinaryOps.MUL, BinaryOps.MAX]), sub(), sub()),
                ]
            )()
        if dtypes.is_int(dt):
            op = self.pick(
                [
                    BinaryOps.ADD,
                    BinaryOps.MUL,
                    BinaryOps.MAX,
                    BinaryOps.XOR,
                    BinaryOps.IDIV,
                    BinaryOps.MOD,
                    BinaryOps.SHL,
                    BinaryOps.SHR,
                    UnaryOps.NEG,
                ]
            )
            if op in (BinaryOps.IDIV, BinaryOps.MOD):
                return alu(op, sub(), const(int(self.rng.integers(1, 5)), shape, dt))
            if op in (BinaryOps.SHL, BinaryOps.SHR):
                return alu(op, sub(), const(int(self.rng.integers(0, 4)), shape, dt))
            return alu(op, sub()) if op is UnaryOps.NEG else alu(op, sub(), sub())
        op = self.pick(
            [
                BinaryOps.ADD,
                BinaryOps.MUL,
                BinaryOps.MAX,
                UnaryOps.NEG,
                UnaryOps.SIN,
                UnaryOps.EXP2,
                UnaryOps.SQRT,
                UnaryOps.RECIP,
                BinaryOps.MOD,
            ]
        )
        if op in (UnaryOps.SQRT, UnaryOps.RECIP):  # of x*x + 1 >= 1: no NaN, no division by zero
            x = sub()
            return alu(op, alu(BinaryOps.ADD, alu(BinaryOps.MUL, x, x), const(1.0, shape, dt)))
        if op is BinaryOps.MOD:
            return alu(op, sub(), const(float(self.rng.integers(1, 4)), shape, dt))
        return alu(op, sub()) if op in UnaryOps else alu(op, sub(), sub())

    def cast(self, shape, dt: DType, depth: int) -> LazyOp:
        """dt from another dtype; a float becomes an int only from [-8, 8), where every int type holds it
        (through int32 first: a negative float to an unsigned type is undefined in C)."""
        src_dt = self.pick(DTYPES)
        if dtypes.is_int(dt) and dtypes.is_float(src_dt) and self.edgy():  # NaN, infs and values beyond dt's range
            big = float(self.special.choice([1.0, 300.0, 7e4, 3e9, 1e19, 1e30]))
            return alu(UnaryOps.CAST, alu(BinaryOps.MUL, self.leaf(shape, src_dt), const(big, shape, src_dt)), arg=dt)
        if dtypes.is_int(dt) and dtypes.is_float(src_dt):
            x = alu(UnaryOps.SIN, self.expr(shape, src_dt, depth - 1))
            as_int = alu(UnaryOps.CAST, alu(BinaryOps.MUL, x, const(8.0, shape, src_dt)), arg=dtypes.int32)
            return as_int if dt == dtypes.int32 else alu(UnaryOps.CAST, as_int, arg=dt)
        return alu(UnaryOps.CAST, self.expr(shape, src_dt, depth - 1), arg=dt)


def random_ast(rng: np.random.Generator, special: np.random.Generator | None = None) -> tuple[LazyOp, ...]:
    """A random kernel AST: an elementwise tree of a random dtype, maybe a SUM/MAX over random axes (sometimes a
    matmul-like contraction of two broadcast operands), maybe more elementwise work after it, one or two outputs.
    With `special`, its ops include the edge cases (AstBuilder)."""
    b = AstBuilder(rng, special)
    shape = tuple(
        int(rng.choice(SIZES)) if rng.random() < 0.08 else int(rng.choice(SIZES[1:]))
        for _ in range(int(rng.integers(1, 5)))
    )
    while prod(shape) > 1 << 14:
        shape = shape[1:]
    dt = b.pick(DTYPES)
    if shape and rng.random() < 0.6:  # a reduce
        dt = dtypes.float if dt == dtypes.bool else dt
        big = [i for i, s in enumerate(shape) if s != 1] or [len(shape) - 1]
        axes = tuple(i for i in big if rng.random() < 0.5) or (big[-1],)
        if rng.random() < 0.3 and len(shape) > 1:  # a contraction: a broadcast along its first axis, b its last
            a_st, b_st = (
                ShapeTracker.from_shape(tuple(1 if i == j else s for i, s in enumerate(shape))).expand(shape)
                for j in (0, len(shape) - 1)
            )
            src, b.next_idx = alu(BinaryOps.MUL, load(1, a_st, dt), load(2, b_st, dt)), 3
        else:
            src = b.expr(shape, dt, 3)
        red = reduce(ReduceOps.SUM if rng.random() < 0.7 else ReduceOps.MAX, src, axes)
        out_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
        value = red if rng.random() < 0.5 else alu(BinaryOps.ADD, red, b.expr(out_shape, dt, 1))
    else:
        out_shape, value = shape, b.expr(shape, dt, 4)
    outputs = [value]
    if value.op not in ReduceOps and rng.random() < 0.2:
        outputs.append(b.expr(out_shape, b.pick(DTYPES), 2))

    def renumber(x: LazyOp) -> LazyOp:  # outputs are buffers 0, 1, ...; the loads come after them
        if x.op is BufferOps.LOAD:
            return load(x.arg.idx + len(outputs) - 1, x.arg.st, x.arg.dtype)
        return LazyOp(x.op, tuple(renumber(s) for s in x.src), x.arg)

    return tuple(store(renumber(v), i) for i, v in enumerate(outputs))


# ============================================================================================================
# random opts
# ============================================================================================================
def random_opt(k: Kernel, rng: np.random.Generator) -> Opt:
    """A random opt for k; many are invalid, which is the point (a rejected opt must change nothing)."""
    op = list(OptOps)[rng.integers(len(OptOps))]
    if op is OptOps.NOLOCALS:
        return Opt(op)
    if op is OptOps.TC:
        return Opt(op, int(rng.integers(2)), int(rng.integers(3)))
    return Opt(op, int(rng.integers(max(1, k.shape_len))), int(rng.choice(AMOUNTS)))


def _state(k: Kernel) -> tuple:
    return (list(k.applied_opts), k.full_shape, [st.views for st in k.sts], k.colors())


def verify_random_opts(
    k: Kernel,
    inputs: Sequence[np.ndarray],
    rng: np.random.Generator,
    tries: int = 6,
    expected: Sequence[np.ndarray] | None = None,
    var_vals: dict | None = None,
) -> int:
    """Try `tries` random opts on k one after another; verify the kernel after each accepted one (against `expected`,
    the reference of its AST, computed here if not given), and check that a rejected one changed nothing.
    Returns how many kernels were verified."""
    if expected is None:
        expected = R.reference(k, *inputs, var_vals=var_vals)
    verified = 0
    for _ in range(tries):
        before, opt = _state(k), random_opt(k, rng)
        try:
            k.apply_opt(opt)
        except KernelOptError:
            assert _state(k) == before, f"rejected {opt} changed the kernel"
            continue
        R.verify(k, *inputs, expected=expected, var_vals=var_vals)
        verified += 1
    return verified


# ============================================================================================================
# the fuzzer
# ============================================================================================================
# values at the edges of each kind of dtype, sprinkled into a special case's inputs
FLOAT_EDGES = {
    np.float16: [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-6, -1e-6],  # 1e-6: a half denormal
    np.float32: [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-40],
    np.float64: [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-310, -1e-310],
}


def with_edges(inputs: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """The inputs with about a quarter of their elements replaced by edge values of their dtype."""
    out = []
    for x in inputs:
        x = x.copy()
        if x.dtype.kind == "f":
            edges = np.array(FLOAT_EDGES[x.dtype.type], x.dtype)
        elif x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            edges = np.array([0, info.min, info.max, info.min + 1] + ([-1] if info.min < 0 else []), x.dtype)
        else:
            out.append(x)
            continue
        where = rng.random(x.shape) < 0.25
        x[where] = rng.choice(edges, int(where.sum()))
        out.append(x)
    return out


def fuzz_case(seed: int, n: int, special: bool = False) -> int:
    """Case n of seed: a random AST on a random target, verified with the heuristics and then random opts, and
    without opts and then random opts. Raises on a wrong kernel, naming the case; returns the kernels verified.
    `special`: the edge values and ops (see the module's docstring)."""
    rng = np.random.default_rng([seed, n])  # each case on its own: fuzz_case(seed, n) replays it
    edges = np.random.default_rng([seed, n, 1]) if special else None
    ast = random_ast(rng, edges)
    target = list(TARGETS)[rng.integers(len(TARGETS))]
    k, verified = None, 0
    try:
        inputs = R.random_inputs(ast, seed=n)
        if edges is not None:
            inputs = with_edges(inputs, edges)
        expected = R.reference(ast, *inputs)
        for heuristics in (True, False):
            k = Kernel(*ast, opts=TARGETS[target])
            if heuristics:
                optimize(k)
            R.verify(k, *inputs, expected=expected)
            verified += 1 + verify_random_opts(k, inputs, rng, expected=expected)
    except Exception as e:
        opts = [str(o) for o in k.applied_opts] if k is not None else "none"
        case = f"fuzz_case({seed}, {n}{', special=True' if special else ''})"
        raise AssertionError(f"{case} on {target}, opts {opts}: {type(e).__name__}: {e}\nAST: {ast}") from e
    return verified


def fuzz(count: int, seed: int, special: bool = False) -> int:
    """Run cases 0 .. count-1 of seed; returns how many kernels were verified."""
    return sum(fuzz_case(seed, n, special) for n in range(count))


def test_fuzzer_random_kernels_of_every_dtype_verify():
    count, seed = int(os.environ.get("FUZZ", 12)), int(os.environ.get("FUZZ_SEED", 0))
    verified = fuzz(count, seed)
    print(f"fuzz: {count} random ASTs, {verified} kernels verified (FUZZ_SEED={seed})")
    assert verified >= 2 * count  # each AST verifies at least with the heuristics and without opts


def test_fuzzer_edge_values_and_ops_verify():
    # 36 by default: cases 30 and 33 of seed 0 found wrong results before the numerics were defined
    count, seed = int(os.environ.get("FUZZ", 36)), int(os.environ.get("FUZZ_SEED", 0))
    verified = fuzz(count, seed, special=True)
    print(f"fuzz: {count} random ASTs with edge values and ops, {verified} kernels verified (FUZZ_SEED={seed})")
    assert verified >= 2 * count


# cases that found a defect (fixed since, each also pinned by a rule in test_numerics.py): a CAST to half, a negated
# unsigned constant, a division by the padding's 0 that let the compiler drop a store's guard (heap corruption)
FOUND = [(2, 208), (2, 1413), (4, 229)]


@pytest.mark.parametrize("seed, n", FOUND, ids=[f"fuzz_case({s}, {n})" for s, n in FOUND])
def test_cases_the_fuzzer_found_verify(seed, n):
    assert fuzz_case(seed, n) >= 2


def test_random_asts_cover_every_dtype_op_and_view():
    rng = np.random.default_rng(1)
    asts = [random_ast(rng) for _ in range(200)]
    ops = {x.op for ast in asts for root in ast for x in root.lazyops}
    assert {*BinaryOps, *TernaryOps} - {TernaryOps.MULACC} <= ops and set(ReduceOps) <= ops
    assert {UnaryOps.NEG, UnaryOps.CAST, UnaryOps.SIN, UnaryOps.EXP2, UnaryOps.SQRT, UnaryOps.RECIP} <= ops
    assert {x.dtype for ast in asts for root in ast for x in root.lazyops} >= set(DTYPES)
    text = repr(asts)
    assert "mask=((" in text and "strides=(-" in text and "CONST" in text
    shapes = [root.arg.st.shape for ast in asts for root in ast]
    assert any(0 in s for s in shapes) and any(1 in s for s in shapes)


def test_special_asts_cover_the_edge_ops():
    rng, edges = np.random.default_rng(1), np.random.default_rng(2)
    asts = [random_ast(rng, edges) for _ in range(200)]
    nodes = [x for ast in asts for root in ast for x in root.lazyops]
    ops = {(x.op, dtypes.is_int(x.dtype)) for x in nodes}
    assert {(op, True) for op in (BinaryOps.IDIV, BinaryOps.MOD, UnaryOps.RECIP)} <= ops
    assert (UnaryOps.LOG2, False) in ops and (BinaryOps.MAX, False) in ops
    counts = [
        (x.src[1].arg.val, 8 * x.dtype.itemsize)
        for x in nodes
        if x.op in (BinaryOps.SHL, BinaryOps.SHR) and x.src[1].op is BufferOps.CONST
    ]
    assert any(c < 0 for c, _ in counts) and any(c >= bits for c, bits in counts)
    assert any(x.op is UnaryOps.RECIP and x.src[0].op is TernaryOps.WHERE for x in nodes)  # of zeros
    casts = [x for x in nodes if x.op is UnaryOps.CAST and dtypes.is_int(x.arg) and dtypes.is_float(x.src[0].dtype)]
    assert any(x.src[0].op is BinaryOps.MUL and x.src[0].src[1].arg.val >= 3e9 for x in casts)


# ============================================================================================================
# the differential fuzzer: the device against numpy itself, never runtime.reference (which could share a bug)
# ============================================================================================================
N = 40  # elements of each kernel
FLOAT_DTS = [dtypes.half, dtypes.bfloat16, dtypes.float, dtypes.double]
ANY_DTS = [dtypes.bool, *INTS, *FLOAT_DTS]
WORDS = [dtypes.float, dtypes.int32, dtypes.uint32]  # the dtypes BITCAST goes between (4 bytes)


def numpy_cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    if dst == dtypes.bool:
        return x != 0
    if dst == dtypes.bfloat16:
        return bf16_of(x)
    if dtypes.is_int(dst) and dtypes.is_float(src):
        return float_to_int(x, R.np_dtype(dst))
    return x.astype(R.np_dtype(dst))  # numpy rounds once (a double straight to float16), an int wraps


def numpy_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.maximum, with +0.0 above -0.0 (runtime.py's rule: the order of a reduce can't change a zero's sign)."""
    if a.dtype.kind != "f":
        return np.maximum(a, b)
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a) & np.signbit(b), a, np.abs(a)), np.maximum(a, b))


class Differential:
    """Random elementwise expressions, each built twice: as a kernel.py AST, and as numpy computes what it means:
    numpy's own ops in the dtype (half as np.float16, which rounds each result), bfloat16 as float32 values rounded
    by bf16_of after each op. Only ops every OpenCL device must compute exactly (IEEE add and multiply, fmod,
    max, casts and bit casts): the two must agree in every bit, but for a NaN's payload."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.inputs = rng, []

    def pick(self, xs):
        return xs[int(self.rng.integers(len(xs)))]

    def values(self, dt: DType) -> np.ndarray:
        rng, npdt = self.rng, R.np_dtype(dt)
        if dt == dtypes.bool:
            return rng.random(N) < 0.5
        if dtypes.is_int(dt):
            info = np.iinfo(npdt)
            edges = [0, 1, -1, 2, info.min, info.max, info.min + 1, info.max - 1, 3, 7]
            edges = np.array([v % (1 << info.bits) for v in edges], np.uint64).astype(npdt)  # -1 wraps if unsigned
            small = rng.integers(-8, 9, N).astype(npdt)
            x = np.where(rng.random(N) < 0.5, small, rng.integers(info.min, info.max, N, npdt, endpoint=True))
            return np.where(rng.random(N) < 0.2, rng.choice(edges, N), x).astype(npdt)
        edges = [
            math.nan,
            math.inf,
            -math.inf,
            0.0,
            -0.0,
            1e-40,
            -1e-7,
            6e-8,
            2049.0,
            70000.0,
            65504.0,
            65519.0,
            65520.0,
            1 + 2**-12,
            -(1 + 2**-11),
            1 + 2**-8,
            1 + 3 * 2**-8,
            3.4e38,
            1e-45,
            0.1,
            1 / 3,
        ]
        with np.errstate(over="ignore"):
            x = np.where(
                rng.random(N) < 0.5,
                rng.integers(-16, 17, N) / 4,
                rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N),
            )
            x = np.where(rng.random(N) < 0.3, rng.choice(edges, N), x).astype(npdt)
        return x

    def leaf(self, dt: DType) -> tuple[LazyOp, np.ndarray]:
        if self.rng.random() < 0.15:
            val = self.values(dt)[0].item()
            node = const(val, (N,), dt)  # a half or bfloat16 constant is rounded to its dtype where it is built
            return node, np.full(N, node.arg.val, R.np_dtype(dt) if dt != dtypes.bfloat16 else np.float32)
        x = self.values(dt)
        self.inputs.append(x)
        node = load(len(self.inputs), ShapeTracker.from_shape((N,)), dt)
        return node, bf16_of(x) if dt == dtypes.bfloat16 else x

    def expr(self, dt: DType, depth: int) -> tuple[LazyOp, np.ndarray]:
        if depth == 0 or self.rng.random() < 0.2:
            return self.leaf(dt)

        def sub(d: DType = dt) -> tuple[LazyOp, np.ndarray]:
            return self.expr(d, depth - 1)

        r = self.rng.random()
        if r < 0.1:
            (c, cv), (a, av), (b, bv) = sub(dtypes.bool), sub(), sub()
            return alu(TernaryOps.WHERE, c, a, b), np.where(cv, av, bv)
        if r < 0.3:  # a cast from any dtype; between the 4-byte ones, a bit cast
            shorts = [dtypes.half, dtypes.bfloat16]  # half and bfloat16 above all, to or from every dtype
            src = self.pick(shorts if dt not in shorts and self.rng.random() < 0.4 else ANY_DTS)
            (x, xv) = sub(src)
            if dt in WORDS and src in WORDS and src != dt and self.rng.random() < 0.5:
                if src == dtypes.float:  # every NaN has the bits 0x7fc00000 (runtime.py's rule)
                    xv = np.where(np.isnan(xv), np.uint32(0x7FC00000).view(np.float32), xv)
                return alu(UnaryOps.BITCAST, x, arg=dt), xv.view(R.np_dtype(dt))
            return alu(UnaryOps.CAST, x, arg=dt), numpy_cast(xv, src, dt)
        if dt == dtypes.bool:
            kind = self.pick(["cmplt", "cmpne", "not", "or", "and", "xor"])
            if kind in ("cmplt", "cmpne"):  # of computed values, floats above all
                other = self.pick(FLOAT_DTS + [self.pick(ANY_DTS)])
                (a, av), (b, bv) = sub(other), sub(other)
                op = BinaryOps.CMPLT if kind == "cmplt" else BinaryOps.CMPNE
                return alu(op, a, b), (av < bv if kind == "cmplt" else av != bv)
            if kind == "not":
                a, av = sub()
                return alu(UnaryOps.NEG, a), ~av
            (a, av), (b, bv) = sub(), sub()
            op = {"or": BinaryOps.ADD, "and": BinaryOps.MUL, "xor": BinaryOps.XOR}[kind]
            return alu(op, a, b), {"or": av | bv, "and": av & bv, "xor": av ^ bv}[kind]
        rounded = bf16_of if dt == dtypes.bfloat16 else (lambda v: v.astype(R.np_dtype(dt)))
        kind = self.pick(
            ["add", "mul", "neg", "max", "add(mul)", "mulacc"]
            + (["mod"] if dtypes.is_float(dt) else ["xor", "shl", "shr"])
        )
        if kind == "neg":
            a, av = sub()
            return alu(UnaryOps.NEG, a), -av
        if kind in ("shl", "shr"):
            a, av = sub()
            n = int(self.rng.integers(8 * dt.itemsize))
            op = BinaryOps.SHL if kind == "shl" else BinaryOps.SHR
            return alu(op, a, const(n, (N,), dt)), (av << av.dtype.type(n) if kind == "shl" else av >> av.dtype.type(n))
        if kind in ("add(mul)", "mulacc"):  # a*b + c: the product rounds before the sum, as numpy computes it
            (a, av), (b, bv), (c, cv) = sub(), sub(), sub()
            node = (
                alu(BinaryOps.ADD, alu(BinaryOps.MUL, a, b), c)
                if kind == "add(mul)"
                else alu(TernaryOps.MULACC, a, b, c)
            )
            return node, rounded(rounded(av * bv) + cv)
        (a, av), (b, bv) = sub(), sub()
        op = {
            "add": BinaryOps.ADD,
            "mul": BinaryOps.MUL,
            "max": BinaryOps.MAX,
            "mod": BinaryOps.MOD,
            "xor": BinaryOps.XOR,
        }[kind]
        want = {"add": np.add, "mul": np.multiply, "max": numpy_max, "mod": np.fmod, "xor": np.bitwise_xor}[kind](
            av, bv
        )
        return alu(op, a, b), rounded(want)


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where got is want: floats as values (a zero's sign counts; any NaN is NaN), ints and bools exactly."""
    if want.dtype.kind != "f":
        return got == want
    return np.where(np.isnan(want), np.isnan(got), (got == want) & (np.signbit(got) == np.signbit(want)))


def differential_case(seed: int, n: int) -> str:
    """Case n of seed: a random expression of a random dtype, run on the device (without opts, or with the
    heuristics') and compared with numpy in every element. Raises naming the case (differential_case(seed, n)
    replays it); returns the AST's text."""
    rng = np.random.default_rng([seed, n, 7])
    d = Differential(rng)
    dt = d.pick(ANY_DTS)
    with np.errstate(all="ignore"):
        node, want = d.expr(dt, int(rng.integers(2, 5)))
    k = Kernel(store(node, dtype=dt))
    if n % 2:
        optimize(k)
    case = f"differential_case({seed}, {n}) with opts {[str(o) for o in k.applied_opts]}"
    try:
        (got,) = R.run(k, *d.inputs)
    except Exception as e:
        raise AssertionError(f"{case}: {type(e).__name__}: {e}\nAST: {node}") from e
    ok = same_bits(got, np.broadcast_to(want, got.shape))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        inputs = [x[i].item() for x in d.inputs]
        raise AssertionError(
            f"{case}: element {i} is "
            f"{got[i]!r} on the device, numpy computes {want[i]!r}; inputs there {inputs}\nAST: {node}"
        )
    return repr(node)


def test_the_device_computes_what_numpy_computes():
    count, seed = int(os.environ.get("FUZZ", 60)), int(os.environ.get("FUZZ_SEED", 0))
    for n in range(count):
        differential_case(seed, n)
    print(f"differential fuzz: {count} expressions agree with numpy in every bit (FUZZ_SEED={seed})")


def test_differential_expressions_cover_what_they_must():
    """Casts to and from half and bfloat16, bit casts both ways, a*b + c and MULACC, comparisons and int casts of
    computed floats (the places where the device once computed otherwise than numpy)."""
    nodes = []
    for n in range(1000):
        rng = np.random.default_rng([0, n, 7])
        d = Differential(rng)
        with np.errstate(all="ignore"):
            nodes += d.expr(d.pick(ANY_DTS), int(rng.integers(2, 5)))[0].lazyops
    computed = {BinaryOps.ADD, BinaryOps.MUL, TernaryOps.MULACC, BinaryOps.MAX, BinaryOps.MOD, UnaryOps.NEG}

    def of_computed_floats(x: LazyOp) -> bool:
        return any(dtypes.is_float(s.dtype) and s.op in computed for s in x.src)

    casts = {(x.src[0].dtype, x.arg) for x in nodes if x.op is UnaryOps.CAST}
    for short in (dtypes.half, dtypes.bfloat16):
        assert {dt for dt, to in casts if to == short} >= set(ANY_DTS) - {short}
        assert {to for dt, to in casts if dt == short} >= set(ANY_DTS) - {short}
    bitcasts = {(x.src[0].dtype, x.arg) for x in nodes if x.op is UnaryOps.BITCAST}
    assert bitcasts == {(a, b) for a in WORDS for b in WORDS if a != b}
    assert any(x.op is BinaryOps.ADD and x.src[0].op is BinaryOps.MUL and dtypes.is_float(x.dtype) for x in nodes)
    assert {x.dtype for x in nodes if x.op is TernaryOps.MULACC} >= set(FLOAT_DTS)
    assert {x.src[0].dtype for x in nodes if x.op is BinaryOps.CMPLT and of_computed_floats(x)} >= set(FLOAT_DTS)
    assert any(x.op is UnaryOps.CAST and dtypes.is_int(x.arg) and of_computed_floats(x) for x in nodes)


# ============================================================================================================
# conversions: STOREs into a buffer of another dtype and CASTs, between every pair of dtypes, against numpy
# ============================================================================================================
def conversion_values(dt: DType, rng: np.random.Generator) -> np.ndarray:
    """Values of dt at the edges of every conversion (each int type's range, half's, the rounding of half, bfloat16
    and float, NaN and the infinities), and random ones."""
    if dt == dtypes.bool:
        return np.arange(N) % 3 == 1
    npdt = np.dtype(R.np_dtype(dt))
    if dtypes.is_int(dt):
        info = np.iinfo(npdt)
        edges = [0, 1, -1, 2, 127, 128, -129, 255, 256, 512, 32768, 65535, 65520, 2**24 + 1, 2**31, 2**53 + 1, 2**63]
        edges = np.array([v % (1 << info.bits) for v in edges + [info.min, info.max]], np.uint64).astype(npdt)
        return np.concatenate([edges, rng.integers(info.min, info.max, N - len(edges), npdt, endpoint=True)])
    edges = [math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 2.9, -2.9, 300.0, 255.5, -128.5, -129.0, 1e10]
    edges += [-1e10, 65504.0, 65519.99, 65520.0, 2049.0, 2.0**24 + 1, 2.0**31 - 0.5, 2.0**31, -(2.0**31) - 1, 1e19]
    edges += [2.0**63, 2.0**64, -(2.0**63), 3.4e38, 1e-40, 6e-8, 0.1, 1 / 3, 1 + 2**-8, 1 + 3 * 2**-8]
    with np.errstate(over="ignore"):
        x = np.array(edges + list(rng.standard_normal(N - len(edges)) * 10.0 ** rng.integers(-3, 12, N - len(edges))))
        return bf16_of(x.astype(np.float32)) if dt == dtypes.bfloat16 else x.astype(npdt)


@pytest.mark.parametrize("src", ANY_DTS, ids=lambda d: d.name)
def test_stores_and_casts_between_every_pair_of_dtypes_convert_as_numpy(src):
    """STORE(x, dtype=dst) and STORE(CAST(x, dst)) of every dtype into every dtype give numpy's astype, with the
    documented rules where numpy's answer is the machine's or isn't astype (docs/numerics.md: a float to an int
    truncates and clamps, NaN giving 0; to bfloat16 the nearest, rounded once): on the device, with and without
    opts, and in the reference. One kernel per source dtype, with an output for each conversion."""
    x = conversion_values(src, np.random.default_rng(5))
    assert len(x) == N
    value = load(2 * len(ANY_DTS), ShapeTracker.from_shape((N,)), src)
    stores = [store(value, i, dtype=dst) for i, dst in enumerate(ANY_DTS)]
    stores += [store(alu(UnaryOps.CAST, value, arg=dst), len(ANY_DTS) + i) for i, dst in enumerate(ANY_DTS)]
    with np.errstate(all="ignore"):
        wants = [numpy_cast(x, src, dst) for dst in ANY_DTS] * 2
    k = Kernel(*stores)
    for who, outs in (("device", R.run(k, x)), ("reference", R.reference(k, x)), ("opts", R.run(optimize(k), x))):
        for n, (got, want) in enumerate(zip(outs, wants)):
            how = f"{who}: {src.name} {'stored' if n < len(ANY_DTS) else 'cast'} into {ANY_DTS[n % len(ANY_DTS)].name}"
            assert got.dtype == want.dtype, how
            ok = same_bits(got if got.dtype != np.bool_ else got.view(np.uint8), want)
            assert ok.all(), f"{how}: {x[~ok][:4]} gave {got[~ok][:4]}, numpy {want[~ok][:4]} (opts {k.applied_opts})"


# ============================================================================================================
# verify of outputs that jump where an inexact float moves by an ulp: a correct kernel passes, a wrong one fails
# ============================================================================================================
def jump_case(seed: int, n: int) -> tuple[Kernel, list[np.ndarray]]:
    """Case n of seed: a kernel whose output jumps where a float the device computes to a few ulps (a sum, in
    another order; sin, exp2, log2, sqrt, a reciprocal, a division) moves by an ulp: its BITCAST, MOD, comparison,
    cast to an int or a bool, a WHERE on a comparison, a STORE into an int, a count of comparisons; maybe followed
    by an op; with opts. Returns the kernel and its inputs."""
    rng = np.random.default_rng([seed, n, 11])

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    source = pick(["sum", "sum", "sin", "exp2", "log2", "sqrt", "recip", "div", "count"])
    if source in ("sum", "count"):
        shape, out = (64, 256), (64, 1)
    else:
        shape = out = (4096,)
    x, y = (load(i, ShapeTracker.from_shape(shape)) for i in (1, 2))
    at = (lambda v: const(v, out)) if source != "count" else (lambda v: const(v, shape))
    if source == "sum":
        g = reduce(ReduceOps.SUM, x, (1,))
    elif source == "div":
        g = alu(BinaryOps.IDIV, x, y)
    else:
        unary = {"sin": UnaryOps.SIN, "exp2": UnaryOps.EXP2, "log2": UnaryOps.LOG2, "sqrt": UnaryOps.SQRT}
        g = alu(unary.get(source, UnaryOps.RECIP), alu(BinaryOps.MUL, x, const(4.0, shape)))
    scaled = alu(BinaryOps.MUL, g, at(float(pick([1.0, 3.0, 10.0]))))
    kind = pick(["bitcast", "mod", "cmplt", "cmpne", "cast", "where", "store"]) if source != "count" else "count"
    value = scaled  # (a STORE into an int converts it)
    if kind == "bitcast":
        value = alu(UnaryOps.BITCAST, g, arg=pick([dtypes.int32, dtypes.uint32]))
    elif kind == "mod":
        value = alu(BinaryOps.MOD, g, at(pick([1.0, 0.25, 0.1])))
    elif kind in ("cmplt", "cmpne"):
        value = alu(BinaryOps.CMPLT if kind == "cmplt" else BinaryOps.CMPNE, g, at(pick([0.0, 0.5, -0.5, 1.0])))
    elif kind == "cast":
        value = alu(UnaryOps.CAST, scaled, arg=pick([dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.bool]))
    elif kind == "where":
        value = alu(TernaryOps.WHERE, alu(BinaryOps.CMPLT, g, at(pick([0.0, 0.5]))), at(1.0), scaled)
    elif kind == "count":  # how many sin(4x) of each row are below t
        below = alu(BinaryOps.CMPLT, alu(UnaryOps.SIN, alu(BinaryOps.MUL, x, at(4.0))), at(pick([0.0, 0.5])))
        value = reduce(ReduceOps.SUM, alu(UnaryOps.CAST, below, arg=dtypes.float), (1,))
    then = pick([None, None, UnaryOps.NEG, BinaryOps.ADD, BinaryOps.MUL])  # (an unsigned NEG wraps everywhere but 0)
    if kind == "store" or value.dtype == dtypes.bool or then is UnaryOps.NEG and dtypes.is_unsigned(value.dtype):
        then = None
    if then is not None:
        one = const(1, out, value.dtype)
        value = alu(then, value) if then is UnaryOps.NEG else alu(then, value, one)
    k = Kernel(store(value, dtype=pick([dtypes.int32, dtypes.uint8])) if kind == "store" else store(value))
    if n % 3 == 1:
        optimize(k)
    elif n % 3 == 2 and source in ("sum", "count"):
        for opt in (Opt(OptOps.GROUPTOP, 0, 16), Opt(OptOps.UNROLL, 0, 4)):
            k.apply_opt(opt)
    inputs = R.random_inputs(k, seed=n)
    if source != "count":  # far more elements near a jump: a quarter of them rounded to 1/8 (a sum: of them 0.5)
        inputs[0] = np.where(np.arange(inputs[0].size) % 4 == 0, np.round(inputs[0] * 8) / 8, inputs[0])
        inputs[0] = inputs[0].astype(np.float32).reshape(shape)
    return k, inputs


def test_verify_accepts_correct_kernels_whose_outputs_jump_at_inexact_floats_and_rejects_wrong_ones(monkeypatch):
    """Each jump_case verifies on the device; the same kernel on its rows or elements in reverse order (an index
    bug), or leaving one element unwritten, fails verify."""
    count, seed = int(os.environ.get("FUZZ", 40)), int(os.environ.get("FUZZ_SEED", 0))
    real_run, checked = R.run, 0
    for n in range(count):
        k, inputs = jump_case(seed, n)
        case = f"jump_case({seed}, {n}) with opts {[str(o) for o in k.applied_opts]}: {k.ast[0]}"
        try:
            R.verify(k, *inputs)
        except R.VerificationError as e:
            raise AssertionError(f"{case}: a correct kernel failed: {e}") from e
        (right,) = real_run(k, *inputs)
        at, out = int(np.random.default_rng([seed, n]).integers(right.size)), R.buffers(k.ast)[0]

        def unwritten(second: bool) -> np.ndarray:  # element `at` keeps the launch's poison
            ret = right.copy()
            R._bytes(ret.reshape(-1))[at] = R._bytes(R._poisoned(out, second))[at]  # (a bool's: the byte 0xAB)
            return ret

        wrongs = [unwritten]
        if len(np.unique(R.reference(k, *inputs)[0])) > 2:  # (reversed, few values may fall in their own places)
            wrongs.append(lambda second: real_run(k, *[x[::-1].copy() for x in inputs])[0])
        for wrong in wrongs:
            monkeypatch.setattr(R, "run", lambda *args, second_poison=False, wrong=wrong, **kw: [wrong(second_poison)])
            with pytest.raises(R.VerificationError):
                R.verify(k, *inputs)
                print(f"{case}: the {'reversed' if wrong is not unwritten else 'unwritten'} kernel passed verify")
            checked += 1
        monkeypatch.setattr(R, "run", real_run)
    assert checked > count * 1.5
