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

The default run is small (12 plain ASTs, 36 special ones). FUZZ=N runs N random ASTs of each instead (FUZZ_SEED=S
starts from another seed); a failure names its case as fuzz_case(seed, n) or fuzz_case(seed, n, special=True),
which replays it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pytest

import runtime as R
from kernel import TARGETS, BinaryOps, BufferOps, DType, Kernel, KernelOptError, LazyOp, Opt, OptOps, ReduceOps
from kernel import ShapeTracker, TernaryOps, UnaryOps, alu, const, dtypes, load, optimize, prod, reduce, store
from tests.common import DTYPES

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


# cases that found a defect (fixed since, each also pinned by a rule in test_defects.py): a CAST to half, a negated
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
