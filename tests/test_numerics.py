"""Numerics that C leaves undefined or that numpy defines its own way: NaN, infinities and signed zeros through MAX
and every float op, integer shifts, divisions and reciprocals at their edges, float-to-int casts of values an int
can't hold, half and bfloat16 constants, and the one-dtype rule of ALU ops.

Each expected value is computed here in plain Python (or, for the float ops, with numpy's own functions), not with
runtime.reference: the device and the reference are both checked against it.
"""

from __future__ import annotations

import math
import re
import struct

import numpy as np
import pytest

import runtime as R
from kernel import BinaryOps, Kernel, KernelOptError, Opt, OptOps, ReduceOps, ShapeTracker, TernaryOps, UnaryOps
from kernel import LazyOp, Variable, dtypes, round_to_float
from demo import alu, const, load, reduce, store
from demo import matmul_ast
from tests.common import INTS, copy_ast, bf16_of, exact_bf16, float_to_int
from corpus import lazyop_from_json

SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.0, 1e-40]  # 1e-40: a float32 denormal


def same(got, want) -> bool:
    """Equal as floats are: NaN equals NaN, and a zero's sign counts."""
    got, want = float(got), float(want)
    if math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1, got) == math.copysign(1, want)


def numpy_max(a: float, b: float) -> float:
    """np.maximum's answer, with +0.0 above -0.0 (np.maximum itself returns the first of two equal zeros)."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        return 0.0 if math.copysign(1, a) > 0 or math.copysign(1, b) > 0 else -0.0
    return max(a, b)


def check(k: Kernel, inputs: list[np.ndarray], want: list[float]) -> None:
    """k on the device and the reference both give want (compared with `same`)."""
    for who, (got,) in (("device", R.run(k, *inputs)), ("reference", R.reference(k, *inputs))):
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got.reshape(-1).tolist(), want)) if not same(g, w)]
        assert not bad, f"{who} with opts {k.applied_opts}: (index, got, want) {bad[:6]}"


NARROW_INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16]


def binary_ast(op, dt, n: int = 4, out_dt=None) -> tuple[LazyOp, ...]:
    """out = CAST(a op b, out_dt), both contiguous of n elements"""
    st = ShapeTracker.from_shape((n,))
    value = alu(op, load(1, st, dt), load(2, st, dt))
    return (store(alu(UnaryOps.CAST, value, arg=out_dt) if out_dt else value),)


# ------------------------------------------------------------------------------------------------------------
# MAX: NaN wins, as in numpy, on every path of a reduce
# ------------------------------------------------------------------------------------------------------------
MAX_ROWS = [
    [5, math.nan, 0, 0, 1, 1, 1, 1],
    [2, 2, 2, math.nan, 2, 2, 2, 2],
    [-0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0],
    [-0.0] * 8,
    [-math.inf] * 7 + [math.nan],
    [math.inf, -math.inf, 3, 4, 5, 6, 7, 8],
    [-1, -2, -3, -4, -5, -6, -7, -0.5],
    [0.0, -0.0, 1e-40, -1e-40, 0.0, 0.0, 0.0, 0.0],
]
REDUCE_OPTS = {
    "none": [],
    "unroll 4": [Opt(OptOps.UNROLL, 0, 4)],
    "unroll all": [Opt(OptOps.UNROLL, 0, 0)],
    "upcast + unroll": [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 0, 2)],
    "group": [Opt(OptOps.GROUP, 0, 4)],
    "grouptop + unroll": [Opt(OptOps.GROUPTOP, 0, 4), Opt(OptOps.UNROLL, 0, 2)],
    "local + group": [Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.GROUP, 0, 2)],
    "upcast + group + unroll": [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.GROUP, 0, 2), Opt(OptOps.UNROLL, 0, 2)],
}


@pytest.mark.parametrize("dt", [dtypes.float, dtypes.double, dtypes.half], ids=lambda d: d.name)
@pytest.mark.parametrize("opts", REDUCE_OPTS.values(), ids=REDUCE_OPTS.keys())
def test_max_reduce_propagates_nan_on_every_path(opts, dt, device):
    x = np.array(MAX_ROWS, R.np_dtype(dt))
    k = Kernel(store(reduce(ReduceOps.MAX, load(1, ShapeTracker.from_shape(x.shape), dt), (1,))))
    for o in opts:
        k.apply_opt(o)
    want = [float(x[i, 0]) for i in range(len(x))]
    for i, row in enumerate(x.tolist()):
        for v in row[1:]:
            want[i] = numpy_max(want[i], v)
    assert math.isnan(want[0]) and same(want[2], 0.0) and same(want[3], -0.0)
    check(k, [x], want)


def test_two_max_reduces_in_one_kernel_both_propagate_nan(device):
    x = np.array(MAX_ROWS, np.float32)
    src = load(1, ShapeTracker.from_shape(x.shape))
    neg = alu(UnaryOps.NEG, src)
    k = Kernel(store(alu(BinaryOps.ADD, reduce(ReduceOps.MAX, src, (1,)), reduce(ReduceOps.MAX, neg, (1,)))))
    k.apply_opt(Opt(OptOps.GROUP, 0, 2))
    k.apply_opt(Opt(OptOps.UNROLL, 0, 2))
    want = []
    for row in x.tolist():
        hi, lo = -math.inf, -math.inf
        for v in row:
            hi, lo = numpy_max(hi, v), numpy_max(lo, -v)
        want.append(hi + lo)
    check(k, [x], want)


def test_padto_sees_that_a_nan_wins_max_in_the_padding():
    """PADTO of a SUM's axis needs its source to be 0 where every buffer reads 0. There, fmod(0, 0) is NaN, and
    MAX(0, NaN) is NaN as numpy (and the kernel) computes it: the padding would add NaN to every sum."""
    st = ShapeTracker.from_shape((4, 6))
    a, b = load(1, st), load(2, st)
    src = alu(BinaryOps.MAX, const(0.0, (4, 6)), alu(BinaryOps.MOD, a, b))
    k = Kernel(store(reduce(ReduceOps.SUM, src, (1,))))
    with pytest.raises(KernelOptError, match="cannot pad: MOD maps the padding's 0 to nan"):
        k.apply_opt(Opt(OptOps.PADTO, 1, 4))
    assert k.applied_opts == []


def test_sum_of_nan_and_infinities_and_negative_zeros(device):
    x = np.array([[math.nan, 1, 2, 3], [math.inf, -math.inf, 0, 0], [math.inf, 1, 1, 1], [-0.0] * 4], np.float32)
    for opts in ([], [Opt(OptOps.UNROLL, 0, 4)], [Opt(OptOps.GROUP, 0, 2)]):
        k = Kernel(store(reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape(x.shape)), (1,))))
        for o in opts:
            k.apply_opt(o)
        check(k, [x], [math.nan, math.nan, math.inf, 0.0])  # a sum starts at +0.0: -0.0s sum to +0.0


# ------------------------------------------------------------------------------------------------------------
# every float ALU op on NaN, infinities, signed zeros and denormals
# ------------------------------------------------------------------------------------------------------------
PAIRS = [(a, b) for a in SPECIALS for b in SPECIALS]
FLOAT_OPS = {
    BinaryOps.ADD: np.add,
    BinaryOps.MUL: np.multiply,
    BinaryOps.IDIV: np.divide,  # IDIV of floats is a true division
    BinaryOps.MOD: np.fmod,
    BinaryOps.MAX: lambda a, b: np.array([numpy_max(x, y) for x, y in zip(a, b)], a.dtype),
    BinaryOps.CMPLT: np.less,
    BinaryOps.CMPNE: np.not_equal,
    UnaryOps.NEG: np.negative,
    UnaryOps.RECIP: np.reciprocal,
    UnaryOps.SQRT: np.sqrt,
    UnaryOps.EXP2: np.exp2,
    UnaryOps.LOG2: np.log2,
    UnaryOps.SIN: np.sin,
}


@pytest.mark.parametrize("dt", [dtypes.float, dtypes.double], ids=lambda d: d.name)
def test_neg_of_a_negative_zero_constant_compiles_and_is_plus_zero(dt, device):
    """A constant -0.0 is written (-0.0f): NEG of it is -(-0.0f), where an unbracketed --0.0f is no C at all."""
    k = Kernel(store(alu(UnaryOps.NEG, const(-0.0, (4,), dt)), dtype=dt))
    (got,) = R.run(k)
    assert got.tolist() == [0.0] * 4 and not np.signbit(got).any()


@pytest.mark.parametrize("dt", [dtypes.float, dtypes.double], ids=lambda d: d.name)
@pytest.mark.parametrize("op", FLOAT_OPS, ids=lambda o: o.name)
def test_float_ops_on_nan_inf_and_signed_zeros_match_numpy(op, dt, device):
    a = np.array([p[0] for p in PAIRS], R.np_dtype(dt))
    b = np.array([p[1] for p in PAIRS], R.np_dtype(dt))
    st = ShapeTracker.from_shape(a.shape)
    srcs = [load(1, st, dt), load(2, st, dt)][: 1 if op in UnaryOps else 2]
    k = Kernel(store(alu(op, *srcs)))
    with np.errstate(all="ignore"):
        want = FLOAT_OPS[op](*([a, b][: len(srcs)]))
    inputs = [a, b][: len(srcs)]
    exact = op not in (UnaryOps.SIN, UnaryOps.EXP2, UnaryOps.LOG2)  # the others are exact in IEEE arithmetic
    for who, (got,) in (("device", R.run(k, *inputs)), ("reference", R.reference(k, *inputs))):
        for i, (g, w) in enumerate(zip(got.tolist(), want.tolist())):
            ok = same(g, w) if exact or not math.isfinite(w) or w == 0 else math.isclose(g, w, rel_tol=1e-6)
            assert ok, f"{who}: {op.name}{PAIRS[i][: len(srcs)]} gave {g}, numpy gives {w}"


@pytest.mark.parametrize("val", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
def test_a_double_constant_infinity_or_nan_is_a_double(val, device):
    """C's INFINITY and NAN are floats: fmod(a double, INFINITY) didn't build (two candidates, fmod of floats or of
    doubles); the constant is cast to double."""
    x = np.array([5.5, -2.0, math.inf, -0.0], np.float64)
    k = Kernel(
        store(
            alu(BinaryOps.MOD, load(1, ShapeTracker.from_shape((4,)), dtypes.double), const(val, (4,), dtypes.double)),
            dtype=dtypes.double,
        )
    )
    with np.errstate(invalid="ignore"):
        check(k, [x], np.fmod(x, val).tolist())


def test_where_and_mulacc_pass_nan_and_signed_zeros_through(device):
    st = ShapeTracker.from_shape((len(PAIRS),))
    a = np.array([p[0] for p in PAIRS], np.float32)
    b = np.array([p[1] for p in PAIRS], np.float32)
    x, y = load(1, st), load(2, st)
    k = Kernel(store(alu(TernaryOps.WHERE, alu(BinaryOps.CMPLT, x, y), x, y)))
    check(k, [a, b], [x if x < y else y for x, y in zip(a.tolist(), b.tolist())])


# ------------------------------------------------------------------------------------------------------------
# integer ops C leaves undefined: defined as numpy defines them
# ------------------------------------------------------------------------------------------------------------
def bits_of(dt) -> int:
    return 8 * dt.itemsize


def wrap(v: int, dt) -> int:
    """v in dt's range, as two's complement wraps it."""
    n = bits_of(dt)
    v &= (1 << n) - 1
    return v - (1 << n) if not dtypes.is_unsigned(dt) and v >= 1 << (n - 1) else v


def int_kernel(op, dt, n: int) -> Kernel:
    st = ShapeTracker.from_shape((n,))
    srcs = [load(1, st, dt), load(2, st, dt)][: 1 if op in UnaryOps else 2]
    return Kernel(store(alu(op, *srcs)))


def check_ints(k: Kernel, inputs: list[np.ndarray], want: list[int]) -> None:
    for who, (got,) in (("device", R.run(k, *inputs)), ("reference", R.reference(k, *inputs))):
        assert got.tolist() == want, f"{who}: {list(zip(*(x.tolist() for x in inputs), got.tolist(), want))}"


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_shifts_by_counts_outside_the_width_shift_everything_out(dt, device):
    n, signed = bits_of(dt), not dtypes.is_unsigned(dt)
    counts = [0, 1, n - 1, n, n + 1, 2 * n, min(100, 2 ** (n - 1) - 1)] + ([-1, -n, -100 if n > 8 else -128] * signed)
    values = [1, 3, 2 ** (n - 1) - 1] + ([-1, -5] if signed else [2**n - 1])
    pairs = [(v, c) for v in values for c in counts]
    a = np.array([p[0] for p in pairs], R.np_dtype(dt))
    b = np.array([p[1] for p in pairs], R.np_dtype(dt))
    inside = [0 <= c < n for _, c in pairs]
    check_ints(
        int_kernel(BinaryOps.SHL, dt, len(pairs)),
        [a, b],
        [wrap(v << c, dt) if i else 0 for (v, c), i in zip(pairs, inside)],
    )
    check_ints(
        int_kernel(BinaryOps.SHR, dt, len(pairs)),
        [a, b],
        [v >> c if i else (-1 if v < 0 else 0) for (v, c), i in zip(pairs, inside)],
    )


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_the_smallest_int_divided_by_minus_one_wraps_as_numpy_does(dt, device):
    lo = -(2 ** (bits_of(dt) - 1))
    pairs = [(lo, -1), (lo, 1), (lo, 2), (lo + 1, -1), (7, -1), (-7, 2), (7, 0), (lo, 0), (-1, -1)]
    a = np.array([p[0] for p in pairs], R.np_dtype(dt))
    b = np.array([p[1] for p in pairs], R.np_dtype(dt))

    def trunc_div(x: int, y: int) -> int:
        return 0 if y == 0 else wrap(abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1), dt)

    check_ints(int_kernel(BinaryOps.IDIV, dt, len(pairs)), [a, b], [trunc_div(x, y) for x, y in pairs])
    check_ints(
        int_kernel(BinaryOps.MOD, dt, len(pairs)),
        [a, b],
        [0 if y == 0 else wrap(x - y * trunc_div(x, y), dt) for x, y in pairs],
    )


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_the_compiler_cant_fold_the_smallest_int_over_minus_one_away(dt, device):
    """Undefined in C, the compiler simplified INT_MIN / -1 of constants to INT_MAX, and (x / -1 < 0) to false."""
    lo, st = -(2 ** (bits_of(dt) - 1)), ShapeTracker.from_shape((4,))
    for op, want in ((BinaryOps.IDIV, lo), (BinaryOps.MOD, 0)):
        check_ints(Kernel(store(alu(op, const(lo, (4,), dt), const(-1, (4,), dt)))), [], [want] * 4)
    negative = alu(BinaryOps.CMPLT, alu(BinaryOps.IDIV, load(1, st, dt), const(-1, (4,), dt)), const(0, (4,), dt))
    check_ints(Kernel(store(negative)), [np.full(4, lo, R.np_dtype(dt))], [True] * 4)


@pytest.mark.parametrize("dt", [dtypes.bool, *INTS], ids=lambda d: d.name)
def test_integer_reciprocal_of_zero_is_zero(dt, device):
    values = [False, True] if dt == dtypes.bool else [0, 1, 2, 7] + ([-1, -2] if not dtypes.is_unsigned(dt) else [])
    a = np.array(values, R.np_dtype(dt))
    want = values if dt == dtypes.bool else [0 if v == 0 else int(1 / v) for v in values]
    check_ints(int_kernel(UnaryOps.RECIP, dt, len(values)), [a], want)


@pytest.mark.parametrize("op", [BinaryOps.IDIV, BinaryOps.MOD], ids=lambda o: o.name)
def test_bool_division_and_remainder_are_numpys_on_0_and_1(op, device):
    a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
    want = [int(x) // int(y) if y else 0 for x, y in zip(a, b)] if op is BinaryOps.IDIV else [0] * 4
    check_ints(int_kernel(op, dtypes.bool, 4), [a, b], [bool(w) for w in want])


CAST_VALUES = [math.nan, math.inf, -math.inf, 3e9, -3e9, 1e20, -1e20, 300.0, -200.0, 65536.5, -1.5, 2.7, -0.0]


@pytest.mark.parametrize("src", [dtypes.float, dtypes.double, dtypes.half], ids=lambda d: d.name)
@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_float_to_int_casts_saturate_and_nan_gives_zero(dt, src, device):
    with np.errstate(over="ignore"):
        x = np.array(CAST_VALUES, R.np_dtype(src))
    want = float_to_int(x, R.np_dtype(dt)).tolist()
    k = Kernel(store(alu(UnaryOps.CAST, load(1, ShapeTracker.from_shape(x.shape), src), arg=dt)))
    check_ints(k, [x], want)


def test_a_store_into_a_buffer_of_another_dtype_converts_as_a_cast(device):
    """STORE(x, dtype=...) converts as CAST does, on the device and in the reference: an int to bool is `!= 0` (256
    is True; the bytes are 0 and 1), a float to bool too (0.5 and NaN are True), a float to an int truncates and
    clamps, NaN giving 0 (C's conversion gave 256 -> False, NaN -> INT_MIN, 300.0 -> 44 as a uint8)."""
    ints = np.array([0, 1, 2, 256, -1, 512, 3, 0], np.int32)
    floats = np.array([0.5, math.nan, 1e10, -2.9, 300.0, -0.0, 2.9, -1e10], np.float32)
    for x, dt, want in (
        (ints, dtypes.bool, [False, True, True, True, True, True, True, False]),
        (floats, dtypes.bool, [True, True, True, True, True, False, True, True]),
        (floats, dtypes.int32, [0, 0, 2**31 - 1, -2, 300, 0, 2, -(2**31)]),
        (floats, dtypes.uint8, [0, 0, 255, 0, 255, 0, 2, 0]),
    ):
        src = dtypes.int32 if x is ints else dtypes.float
        k = Kernel(store(load(1, ShapeTracker.from_shape(x.shape), src), dtype=dt))
        for who, (got,) in (("device", R.run(k, x)), ("reference", R.reference(k, x))):
            assert got.view(np.uint8).tolist() == want if dt == dtypes.bool else got.tolist() == want, (who, dt, got)
        R.verify(k, x)


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int8, dtypes.int64], ids=lambda d: d.name)
def test_a_float_cast_to_an_int_and_back_is_plus_zero_near_zero(dt, device):
    """int(-0.5) is 0, and 0 as a float is +0.0 (numpy's): Intel's CPU compiler folded float(int(x)) into trunc(x),
    which is -0.0 there, and 1 / it -inf."""
    x = np.array([-0.54, -0.0, -0.99, 0.3, -1.5], np.float32)
    back = alu(UnaryOps.CAST, alu(UnaryOps.CAST, load(1, ShapeTracker.from_shape(x.shape)), arg=dt), arg=dtypes.float)
    check(Kernel(store(back)), [x], [0.0, 0.0, 0.0, 0.0, -1.0])
    check(Kernel(store(alu(UnaryOps.RECIP, back))), [x], [math.inf] * 4 + [-1.0])


# ------------------------------------------------------------------------------------------------------------
# half and bfloat16 constants hold values of their dtype
# ------------------------------------------------------------------------------------------------------------
def test_round_to_half_is_numpys_float16():
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000),
            np.arange(2040, 2060) + 0.5,  # ties between neighbouring halfs: to even
            [65504, 65519.99, 65520, 1e5, -1e5, 6e-8, 3e-8, 2.9e-8, 1e-10, 2**-24, 2**-25, 1.5 * 2**-24, 0.1],
        ]
    )
    with np.errstate(over="ignore"):
        want = values.astype(np.float16).astype(np.float64)
    got = [round_to_float(float(v), 11, -14, 65504.0) for v in values]
    bad = [(v, g, w) for v, g, w in zip(values.tolist(), got, want.tolist()) if not same(g, w)]
    assert not bad, bad[:5]


def test_round_to_bfloat16_rounds_the_float32_bits_to_even():
    """bfloat16 is the top 16 bits of a float32, rounded to nearest even (checked on float32 inputs: from a
    double, rounding to float32 first could round twice)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(3000) * 10.0 ** rng.integers(-40, 38, 3000)).astype(np.float32)
    x = np.concatenate([x, np.array([1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, 1e-45, -1e-39], np.float32)])
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    want = [math.inf if v > 3.4e38 else v for v in rounded.view(np.float32).astype(np.float64).tolist()]
    want = [math.copysign(w, v) if math.isinf(w) else w for w, v in zip(want, x.tolist())]
    got = [round_to_float(float(v), 8, -126, 3.3895313892515355e38) for v in x]
    bad = [(v, g, w) for v, g, w in zip(x.tolist(), got, want) if not same(g, w)]
    assert not bad, bad[:5]


def test_a_symbolic_half_constant_beyond_halfs_exact_integers_is_refused():
    assert const(Variable("i", 1, 2048), (1,), dtypes.half).arg.val.max == 2048  # each value is a half
    with pytest.raises(ValueError, match=r"CONST i of half: a value in 1..4096 can be beyond the integers half holds"):
        const(Variable("i", 1, 4096), (1,), dtypes.half)


def test_half_constants_are_rounded_to_half(device):
    assert const(2049, (1,), dtypes.half).arg.val == 2048.0
    assert const(1e5, (1,), dtypes.half).arg.val == math.inf  # as np.float16(1e5)
    assert const(-1e5, (1,), dtypes.half).arg.val == -math.inf
    assert struct.unpack("e", struct.pack("e", const(0.1, (1,), dtypes.half).arg.val))[0] == np.float16(0.1)
    st = ShapeTracker.from_shape((2,))
    for val, want in ((2049, 2048.0), (1e5, math.inf), (0.1, float(np.float16(0.1)))):
        value = alu(BinaryOps.ADD, load(1, st, dtypes.half), const(val, (2,), dtypes.half))
        k = Kernel(store(alu(UnaryOps.CAST, value, arg=dtypes.float)))
        check(k, [np.zeros(2, np.float16)], [want, want])
    # a product that only overflows where the constant is inf: 1e5 as half times 0 is nan, not 0
    value = alu(BinaryOps.MUL, load(1, st, dtypes.half), const(1e5, (2,), dtypes.half))
    check(Kernel(store(alu(UnaryOps.CAST, value, arg=dtypes.float))), [np.zeros(2, np.float16)], [math.nan] * 2)


# ------------------------------------------------------------------------------------------------------------
# a CAST to half or bfloat16, and each half or bfloat16 op, rounds its result once, as numpy rounds
# ------------------------------------------------------------------------------------------------------------
def cast_chain(x: np.ndarray, src, *dts) -> Kernel:
    node = load(1, ShapeTracker.from_shape(x.shape), src)
    for dt in dts:
        node = alu(UnaryOps.CAST, node, arg=dt)
    return Kernel(store(node, dtype=dts[-1]))


HALF_CASTS = {
    dtypes.float: [2049, 70000, 65519.99, 65520, 65504, 4097.5, -2051, 1e-6, 3e-8, 2.9e-8, math.nan, -0.0, 0.1],
    dtypes.double: [2049, 70000, 65519.99999999, 65520, 65504, 4097.5, -2051, 1e-6, 2**-25 * (1 + 2**-40), 0.1],
    dtypes.int32: [2049, 70000, -2051, 65519, 65520, 4097, 2**31 - 1, -(2**31)],
    dtypes.int64: [2049, -70000, 4097, 2**63 - 1, -(2**63)],
}


@pytest.mark.parametrize("src", HALF_CASTS, ids=lambda d: d.name)
def test_a_cast_to_half_rounds_once_as_numpy(src, device):
    """float -> half -> float of 2049 is 2048 and of 70000 inf (numpy's); a double rounds once, straight to half:
    65519.99999999 is 65504 (through a float32 it would be 65520, a tie, and round to inf)."""
    x = np.array(HALF_CASTS[src], R.np_dtype(src))
    with np.errstate(over="ignore"):
        halfs = x.astype(np.float16)
    check(cast_chain(x, src, dtypes.half, dtypes.float), [x], halfs.astype(np.float32).tolist())
    ints = float_to_int(halfs, np.int32).tolist()
    check_ints(cast_chain(x, src, dtypes.half, dtypes.int32), [x], ints)
    if src == dtypes.float:
        assert halfs[:2].tolist() == [2048, math.inf] and ints[0] == 2048
    if src == dtypes.double:
        assert halfs[2] == 65504


BF16_CASTS = {  # each with a value that two roundings (through float32, or a double) would get wrong
    dtypes.float: [1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, 3.3e38, 1e-39, -1e-45, math.nan, -math.inf, 0.1, 255.5],
    dtypes.double: [1 + 2**-8 + 2**-30, 1 + 2**-8, 3.3961e38, 1e-39, -0.0, 0.1],
    dtypes.int32: [2**30 + 2**22 + 1, 2**30 + 2**22, 2**30 + 3 * 2**22, 257, -(2**31), 2**31 - 1],
    dtypes.int64: [2**62 + 2**54 + 1, -(2**62 + 2**54 + 1), 2**62 + 2**54, 2**63 - 1, -(2**63), 12345678901234567],
    dtypes.uint64: [2**63 + 2**55 + 1, 2**63 + 2**55, 2**64 - 1, 5],
}


@pytest.mark.parametrize("src", BF16_CASTS, ids=lambda d: d.name)
def test_a_cast_to_bfloat16_rounds_once_from_any_dtype(src, device):
    """A float32's top 16 bits rounded to nearest even; a double or an int rounded once (exactly, as a constant is):
    1 + 2**-8 + 2**-30 is above the tie between 1 and 1 + 2**-7, though as a float32 it would be the tie itself."""
    with np.errstate(over="ignore"):
        x = np.array(BF16_CASTS[src], R.np_dtype(src))
    want = bf16_of(x)
    assert exact_bf16(1 + 2**-8 + 2**-30) == 1 + 2**-7 and exact_bf16(2**62 + 2**54 + 1) == 2**62 + 2**55
    check(cast_chain(x, src, dtypes.bfloat16, dtypes.float), [x], want.tolist())


def test_half_and_bfloat16_ops_round_each_result(device):
    """numpy's float16 computes each op in float32 and rounds the result to half: 2048 + 1 is 2048, 255 * 257 inf.
    bfloat16 the same way, to 8 bits: 256 + 1 is 256; a MULACC rounds its product too, as a MUL and an ADD."""
    a = np.array([2048, 255, 1, 0.1, 65504, 3], np.float16)
    b = np.array([1, 257, 2**-11, 3, 1, 0.1], np.float16)
    c = np.array([1, -1, 1, 0.5, -65504, 2**-12], np.float16)
    st = ShapeTracker.from_shape(a.shape)
    x, y, z = (load(i, st, dtypes.half) for i in (1, 2, 3))
    with np.errstate(all="ignore"):
        ops = [(alu(BinaryOps.ADD, x, y), a + b), (alu(BinaryOps.MUL, x, y), a * b), (alu(BinaryOps.IDIV, x, y), a / b)]
        ops.append((alu(TernaryOps.MULACC, x, y, z), a * b + c))
    for node, want in ops:
        inputs = [a, b, c][: 3 if node.op is TernaryOps.MULACC else 2]
        check(Kernel(store(alu(UnaryOps.CAST, node, arg=dtypes.float))), inputs, want.astype(np.float32).tolist())
    assert ops[0][1][0] == 2048 and math.isinf(ops[1][1][1])
    f = np.array([256, 1 + 2**-7, 3.3e38], np.float32)
    g = np.array([1, 2**-8, 3.3e38], np.float32)
    st = ShapeTracker.from_shape(f.shape)
    p, q = load(1, st, dtypes.bfloat16), load(2, st, dtypes.bfloat16)
    check(
        Kernel(store(alu(UnaryOps.CAST, alu(BinaryOps.ADD, p, q), arg=dtypes.float))),
        [f, g],
        [256, 1 + 2**-6, math.inf],  # 1 + 3 * 2**-8 is a tie: to the even 1 + 2**-6
    )
    mulacc = alu(UnaryOps.CAST, alu(TernaryOps.MULACC, p, q, p), arg=dtypes.float)
    want = [exact_bf16(exact_bf16(u * v) + u) for u, v in zip(bf16_of(f).tolist(), bf16_of(g).tolist())]
    check(Kernel(store(mulacc)), [f, g], want)


# ------------------------------------------------------------------------------------------------------------
# a*b + c rounds twice, as numpy computes it (the OpenCL compiler would fuse it into one fma)
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [dtypes.float, dtypes.double], ids=lambda d: d.name)
def test_a_multiply_then_an_add_round_twice_as_numpy(dt, device):
    """a = 1 + 2**-12 (2**-27 for doubles), c = -(1 + 2**-11): a*a rounds to 1 + 2**-11, so a*a + c is 0 in numpy;
    an fma would keep the product's last bits and give 2**-24, and `0 < a*a + c` would be True."""
    e = 12 if dt == dtypes.float else 27
    a = np.full(4, 1 + 2.0**-e, R.np_dtype(dt))
    c = np.full(4, -(1 + 2.0 ** (1 - e)), R.np_dtype(dt))
    want = a * a + c
    assert want.tolist() == [0.0] * 4
    st = ShapeTracker.from_shape((4,))
    x, z = load(1, st, dt), load(2, st, dt)
    for value in (alu(BinaryOps.ADD, alu(BinaryOps.MUL, x, x), z), alu(TernaryOps.MULACC, x, x, z)):
        check(Kernel(store(value, dtype=dt)), [a, c], want.tolist())
        positive = Kernel(store(alu(BinaryOps.CMPLT, const(0.0, (4,), dt), value)))
        check_ints(positive, [a, c], [False] * 4)
        R.verify(positive, a, c)


def test_only_a_sum_of_products_may_be_fused_and_only_its_multiply_adds(device):
    """The one place a multiply-add may be fused: a SUM of a MUL (a matmul's inner loop), where the order of the sum
    already makes the result inexact (the reference sums in float64; verify's tolerance, and casts and comparisons
    of the sum may take either side). Its statements stand in a block of their own under `FP_CONTRACT ON`, and their
    operands are names: an operand's own arithmetic, computed before the block, rounds each op as numpy does."""
    k = Kernel(*matmul_ast(8, 8, 8))
    k.apply_opt(Opt(OptOps.UNROLL, 0, 4))
    src = R.render(k).src
    assert src.startswith("#pragma OPENCL FP_CONTRACT OFF") and src.count("FP_CONTRACT ON") == 1
    block = src.split("#pragma OPENCL FP_CONTRACT ON\n")[1].split("}")[0]
    assert [line.split(" = ")[0].strip() for line in block.strip().splitlines()] == ["acc0"]
    assert re.fullmatch(r"\s*acc0 = (\([\w.]+\*[\w.]+\)\+){4}acc0;\s*", block), block
    R.verify(k, *R.random_inputs(k))
    st = ShapeTracker.from_shape((4, 8))
    x, y = load(1, st), load(2, st)
    scaled = alu(BinaryOps.ADD, alu(BinaryOps.MUL, x, x), y)  # x*x + y: rounds twice, even as a product's operand
    k = Kernel(store(reduce(ReduceOps.SUM, alu(BinaryOps.MUL, scaled, y), (1,))))
    src = R.render(k).src
    before, block = src.split("#pragma OPENCL FP_CONTRACT ON\n")
    operand = re.search(r"float (alu\d+) = \(\(val\d\*val\d\)\+val\d\);", before)  # rounds twice, out of it
    assert operand and re.match(rf"\s*acc0 = \({operand[1]}\*val\d\)\+acc0;", block), src
    R.verify(k, *R.random_inputs(k))
    k = Kernel(store(reduce(ReduceOps.SUM, scaled, (1,))))  # a sum of sums: nothing may be fused
    assert "FP_CONTRACT ON" not in R.render(k).src


# ------------------------------------------------------------------------------------------------------------
# a NaN's bits: one quiet NaN wherever a BITCAST shows them
# ------------------------------------------------------------------------------------------------------------
def test_a_bitcast_of_any_nan_gives_the_one_quiet_nan(device):
    """numpy's NaN from an invalid op is 0xffc00000 on x86 and 0x7fc00000 on ARM, and PoCL's log2 gives 0x7fc00000:
    a NaN's sign and payload are the machine's. A BITCAST of a float NaN gives 0x7fc00000 (np.float32(np.nan)) on
    the device and in the reference, whatever made it (log2(-1), sin(inf), fmod(inf, 1), a loaded NaN)."""
    payload = np.array([0xFFC00001, 0x7F800001], np.uint32).view(np.float32)  # NaNs with a sign, a payload
    cases = {
        UnaryOps.LOG2: [-1.0, -math.inf, 1.0, 2.0, 0.25],
        UnaryOps.SIN: [math.inf, -math.inf, 0.0, -0.0, math.nan],
        BinaryOps.MOD: [math.inf, -math.inf, 5.5, -0.0, math.nan],
        None: [payload[0], payload[1], 1.0, -0.0, math.nan],
    }
    for op, vals in cases.items():
        x = np.array(vals, np.float32)
        src = load(1, ShapeTracker.from_shape(x.shape))
        if op is BinaryOps.MOD:
            src = alu(op, src, const(1.0, x.shape))
        elif op is not None:
            src = alu(op, src)
        with np.errstate(all="ignore"):
            computed = {UnaryOps.LOG2: np.log2, UnaryOps.SIN: np.sin, BinaryOps.MOD: lambda v: np.fmod(v, 1)}
            values = computed[op](x) if op is not None else x
        want = [0x7FC00000 if math.isnan(v) else int(b) for v, b in zip(values.tolist(), values.view(np.uint32))]
        for dt in (dtypes.uint32, dtypes.int32):
            k = Kernel(store(alu(UnaryOps.BITCAST, src, arg=dt)))
            check_ints(k, [x], np.array(want, np.uint32).view(R.np_dtype(dt)).tolist())
            R.verify(k, x)


# ------------------------------------------------------------------------------------------------------------
# verify: an int or bool computed from inexact floats may take either side of its boundary, and no more
# ------------------------------------------------------------------------------------------------------------
def quantised_row_sum() -> tuple[Kernel, np.ndarray, int, int]:
    """A row of 256 floats whose float32 sum in order (the kernel's, without opts) and float64 sum (the reference's)
    fall on the two sides of 130 once scaled: CAST(sum * scale) to uint8 is 129 or 130, and CMPLT(sum, mid) True
    or False. Returns the kernel (two outputs), the row, and the in-order and the float64 answers of the cast."""
    rng = np.random.default_rng(3)
    while True:
        x = rng.random((1, 256), dtype=np.float32)
        in_order, exact = np.cumsum(x, dtype=np.float32)[-1], np.float32(x.astype(np.float64).sum())
        if in_order != exact:
            break
    mid = np.float32((float(in_order) + float(exact)) / 2)
    scale = np.float32(130 / mid)
    answers = [int(np.trunc(s * scale)) for s in (in_order, exact)]
    assert sorted(answers) == [129, 130], answers
    total = reduce(ReduceOps.SUM, load(2, ShapeTracker.from_shape(x.shape)), (1,))
    q = alu(UnaryOps.CAST, alu(BinaryOps.MUL, total, const(float(scale), (1, 1))), arg=dtypes.uint8)
    below = alu(BinaryOps.CMPLT, total, const(float(mid), (1, 1)))
    return Kernel(store(q, 0, dtype=dtypes.uint8), store(below, 1, dtype=dtypes.bool)), x, *answers


def test_verify_accepts_an_int_or_bool_from_a_float_sum_on_either_side_of_its_boundary(device):
    """A uint8 quantisation of a row sum is 129 from the float32 sum in order and 130 from the float64 one: both are
    what a correct float32 kernel gives, so verify accepts either, with any opts (and the search keeps such kernels);
    test_verify_still_rejects_... shows it with each answer, whatever the device's order."""
    k, x, in_order, exact = quantised_row_sum()
    q, below = R.run(k, x)
    assert int(q[0]) in (in_order, exact)  # PoCL sums in order; Intel's runtime in another order, nearer float64's
    rq, rbelow = R.reference(k, x)
    assert (int(rq[0]), bool(rbelow[0])) == (exact, exact < in_order)  # the reference in float64
    for opts in ([], [Opt(OptOps.UNROLL, 0, 4)], [Opt(OptOps.GROUP, 0, 16)], [Opt(OptOps.GROUPTOP, 0, 8)]):
        k2 = Kernel(*k.ast)
        for o in opts:
            k2.apply_opt(o)
        R.verify(k2, x)


def test_verify_still_rejects_an_int_or_bool_beyond_the_boundary(device, monkeypatch):
    """Only the two sides of the boundary are accepted: a kernel that gave 128 or 131, or a bool far from its
    boundary flipped, is wrong."""
    k, x, in_order, exact = quantised_row_sum()
    q, below = R.run(k, x)
    for bad_q, bad_below in ((128, below), (131, below), (in_order, below), (exact, below)):
        fake = [np.full_like(q, bad_q), below.copy()]
        monkeypatch.setattr(R, "run", lambda *args, fake=fake, **kw: [a.copy() for a in fake])
        if bad_q in (in_order, exact):
            R.verify(k, x)
        else:
            with pytest.raises(R.VerificationError, match="output data0 differs in 1 of 1"):
                R.verify(k, x)
    monkeypatch.undo()
    with pytest.raises(R.VerificationError, match="output data0 differs in 1 of 1"):  # an `expected` beyond them
        R.verify(k, x, expected=[np.full_like(q, 140), below])
    rows = np.full((1, 256), 0.25, np.float32)  # a sum of 64: far from mid (about 128), 130 / scale too
    q, below = R.reference(k, rows)
    monkeypatch.setattr(R, "run", lambda *args, **kw: [q.copy(), ~below])
    with pytest.raises(R.VerificationError, match="output data1 differs"):
        R.verify(k, rows)


def test_verify_accepts_the_bits_and_the_remainder_of_a_sum_or_a_sine_and_rejects_far_ones(device, monkeypatch):
    """BITCAST(SUM(x)) of 64 rows of 1000 floats differs from the reference in the last bits of most rows, MOD(SUM,
    1.0) by about 1 where a sum is near a whole number, BITCAST(SIN(x)) by an ulp on Intel's runtime: verify
    accepts them, with opts too, and still rejects the bits of a sum 1% off, and an element left unwritten where
    any answer goes (CAST(MOD(SUM, 1.0) * 4) of a row that sums to 3: 0 or 3, or anything between)."""
    rows = load(1, ShapeTracker.from_shape((64, 1000)))
    total = reduce(ReduceOps.SUM, rows, (1,))
    x = np.random.default_rng(0).random((64, 1000), dtype=np.float32) * 2 - 1
    bits = Kernel(store(alu(UnaryOps.BITCAST, total, arg=dtypes.uint32)))
    mod = Kernel(store(alu(BinaryOps.MOD, total, const(1.0, (64, 1)))))
    sums = x.astype(np.float64).sum(axis=1)
    x[:, 0] -= (sums - np.round(sums)).astype(np.float32)  # each row sums to about a whole number: MOD jumps there
    for k in (bits, mod):
        for opts in ([], [Opt(OptOps.GROUPTOP, 0, 8)], [Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UPCAST, 0, 4)]):
            k2 = Kernel(*k.ast)
            for o in opts:
                k2.apply_opt(o)
            R.verify(k2, x)
    sine = np.linspace(-3, 3, 4096, dtype=np.float32)
    R.verify(
        Kernel(
            store(alu(UnaryOps.BITCAST, alu(UnaryOps.SIN, load(1, ShapeTracker.from_shape((4096,)))), arg=dtypes.int32))
        ),
        sine,
    )
    (off,) = R.reference(Kernel(store(alu(BinaryOps.MUL, total, const(1.01, (64, 1))))), x)
    monkeypatch.setattr(R, "run", lambda *args, **kw: [off.view(np.uint32)])
    with pytest.raises(R.VerificationError, match="output data0 differs"):
        R.verify(bits, x)
    monkeypatch.undo()
    three = np.full((64, 1000), 3 / 1000, np.float32)
    three[0] = 0.0
    three[0, :3] = 1.0  # row 0 sums to exactly 3.0: near a whole number
    q = Kernel(
        store(
            alu(
                UnaryOps.CAST,
                alu(BinaryOps.MUL, alu(BinaryOps.MOD, total, const(1.0, (64, 1))), const(4.0, (64, 1))),
                arg=dtypes.int8,
            )
        )
    )
    (right,) = R.run(q, three)
    for row0, ok in ((2, True), (127, False)):  # 127: the poison, written in neither launch (the second: -128)
        monkeypatch.setattr(
            R,
            "run",
            lambda *a, row0=row0, second_poison=False, **kw: [
                np.concatenate([[np.int8(row0 if not second_poison or row0 != 127 else -128)], right[1:]])
            ],
        )
        if ok:
            R.verify(q, three)
        else:
            with pytest.raises(R.VerificationError, match="differs in 1 of 64 elements.* at index 0"):
                R.verify(q, three)



@pytest.mark.parametrize("dt", [dtypes.uint32, dtypes.int32])
def test_verify_rejects_bits_no_float_near_a_sum_of_about_0_gives(dt, device, monkeypatch):
    """BITCAST(SUM(x)) of 64 rows of 1000 floats with the mean taken out: each sum is within the tolerance of 0, so
    the floats near it lie on both sides of 0, and their bits in two ranges (from +0.0's and from -0.0's): the bits
    of 1e30, +inf and NaN (and -1e30: as int32), between those ranges as ints, fail verify; the device's answer, and
    the bits of floats within the tolerance on either side of 0, pass."""
    bits = Kernel(store(alu(UnaryOps.BITCAST, reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((64, 1000))), (1,)),
                            arg=dt)))  # fmt: skip
    x = np.random.default_rng(1).random((64, 1000), dtype=np.float32)
    x -= x.mean(axis=1, keepdims=True)
    R.verify(bits, x)
    (right,) = R.reference(bits, x)
    for value, ok in [(1e-3, True), (-1e-3, True), (-0.0, True)] + [(v, False) for v in (1e30, np.inf, np.nan, -1e30)]:
        wrong = right.copy()
        wrong[5] = np.float32(value).view(right.dtype)
        monkeypatch.setattr(R, "run", lambda *args, wrong=wrong, **kw: [wrong.copy()])
        if ok:
            R.verify(bits, x)
        else:
            with pytest.raises(R.VerificationError, match="output data0 differs in 1 of 64 elements.* at index 5"):
                R.verify(bits, x)

# ------------------------------------------------------------------------------------------------------------
# one dtype per ALU op
# ------------------------------------------------------------------------------------------------------------
def test_alu_ops_of_two_dtypes_are_refused_naming_them():
    st = ShapeTracker.from_shape((4,))
    i, f, b = load(1, st, dtypes.int32), const(0.5, (4,)), load(2, st, dtypes.bool)
    with pytest.raises(ValueError, match=r"ADD of different dtypes \(int, float\)"):
        alu(BinaryOps.ADD, i, f)
    with pytest.raises(ValueError, match=r"CMPLT of different dtypes \(float, int\)"):
        alu(BinaryOps.CMPLT, f, i)
    with pytest.raises(ValueError, match=r"WHERE of different dtypes \(int, float\)"):
        alu(TernaryOps.WHERE, b, i, f)
    with pytest.raises(ValueError, match=r"WHERE needs a bool condition, got int"):
        alu(TernaryOps.WHERE, i, i, i)
    with pytest.raises(ValueError, match=r"MULACC of different dtypes \(float, float, int\)"):
        alu(TernaryOps.MULACC, f, f, i)
    with pytest.raises(ValueError, match=r"SHL of different dtypes \(unsigned char, int\)"):
        alu(BinaryOps.SHL, load(3, st, dtypes.uint8), i)


UNDEFINED = [
    (UnaryOps.SQRT, dtypes.int32, "int"),
    (UnaryOps.EXP2, dtypes.uint8, "int"),
    (UnaryOps.LOG2, dtypes.bool, "bool"),
    (UnaryOps.SIN, dtypes.int64, "int"),
    (UnaryOps.SQRT, dtypes.bool, "bool"),
    (BinaryOps.XOR, dtypes.float, "float"),
    (BinaryOps.XOR, dtypes.half, "float"),
    (BinaryOps.SHL, dtypes.float, "float"),
    (BinaryOps.SHR, dtypes.double, "float"),
    (BinaryOps.SHL, dtypes.bool, "bool"),
    (BinaryOps.SHR, dtypes.bool, "bool"),
    (TernaryOps.MULACC, dtypes.bool, "bool"),
]


@pytest.mark.parametrize("op, dt, kind", UNDEFINED, ids=[f"{op.name}-{dt.name}" for op, dt, _ in UNDEFINED])
def test_alu_ops_on_dtypes_they_dont_exist_for_are_refused(op, dt, kind):
    """tinygrad 0.9.1's Tensor casts an int to float for sqrt, exp2, log2 and sin, has xor for ints and bools and
    shifts for ints; a bool MULACC (1*1+1) or SHL would store the byte 2 into a bool buffer."""
    st = ShapeTracker.from_shape((4,))
    srcs = [load(1, st, dt)] * (1 if op in UnaryOps else 2 if op in BinaryOps else 3)
    with pytest.raises(ValueError, match=rf"^{op.name} of {dt.name}: {op.name} is defined on .* dtypes, not {kind}s$"):
        alu(op, *srcs)
    with pytest.raises(ValueError, match=f"{op.name} of {dt.name}"):
        LazyOp(op, tuple(srcs))


def test_alu_ops_on_their_dtypes_are_accepted():
    st = ShapeTracker.from_shape((4,))
    for dt in (dtypes.half, dtypes.bfloat16, dtypes.float, dtypes.double, dtypes.imagef((1, 1, 4))):
        assert alu(UnaryOps.SQRT, load(1, st, dt)).dtype == dt
    for dt in (dtypes.bool, dtypes.uint8, dtypes.int64):
        assert alu(BinaryOps.XOR, load(1, st, dt), load(2, st, dt)).dtype == dt
    for dt in (dtypes.int8, dtypes.uint32, dtypes.half, dtypes.double):
        assert alu(TernaryOps.MULACC, *[load(1, st, dt)] * 3).dtype == dt
    assert alu(BinaryOps.SHL, load(1, st, dtypes.uint16), const(3, (4,), dtypes.uint16)).dtype == dtypes.uint16


def test_the_mixes_tinygrad_defines_are_accepted():
    st = ShapeTracker.from_shape((4,))
    f, b = load(1, st), load(2, st, dtypes.bool)
    assert alu(TernaryOps.WHERE, b, f, f).dtype == dtypes.float
    assert alu(BinaryOps.CMPLT, f, f).dtype == dtypes.bool and alu(BinaryOps.CMPNE, b, b).dtype == dtypes.bool
    image = load(3, ShapeTracker.from_shape((4,)), dtypes.imagef((1, 1, 4)))  # an image computes as its base
    assert alu(BinaryOps.ADD, image, f).dtype == dtypes.float
    assert alu(UnaryOps.CAST, f, arg=dtypes.int8).dtype == dtypes.int8


def test_a_mixed_dtype_ast_from_json_is_refused():
    st = [{"shape": [4], "strides": [1], "offset": 0, "mask": None}]
    ast = {
        "op": "BinaryOps.ADD",
        "src": [
            {"op": "BufferOps.LOAD", "arg": {"idx": 1, "dtype": "int", "st": st}},
            {"op": "BufferOps.CONST", "arg": {"val": 0.5, "dtype": "float", "st": st}},
        ],
    }
    with pytest.raises(ValueError, match="ADD of different dtypes"):
        lazyop_from_json(ast)


# ------------------------------------------------------------------------------------------------------------
# bfloat16: 16 bits in memory, computed as float
# ------------------------------------------------------------------------------------------------------------
def bf16(x: float) -> float:
    """x (a float32) rounded to bfloat16, from its bits: the top 16, rounded to nearest even; NaN stays NaN."""
    if math.isnan(x):
        return math.nan
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    top = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return struct.unpack("<f", struct.pack("<I", top << 16))[0]


def test_bfloat16_kernels_run_with_16_bit_buffers_and_round_to_nearest_even(device):
    x = np.array([1.0, 1 / 3, 1 + 2**-8, 1 + 3 * 2**-8, math.nan, -math.inf, 3.4e38, -0.0, 1e-39], np.float32)
    st = ShapeTracker.from_shape(x.shape)
    k = Kernel(store(alu(BinaryOps.MUL, load(1, st, dtypes.bfloat16), const(3.0, x.shape, dtypes.bfloat16))))
    assert "ushort* data0" in R.render(k).src and "ushort* data1" in R.render(k).src  # 16 bits in memory
    want = [bf16(bf16(v) * 3.0) for v in x.astype(np.float32).tolist()]
    assert math.isinf(want[6]) and want[2] == bf16(1 + 2**-8) * 3  # a tie rounds to even; 3.4e38 * 3 is inf
    check(k, [x], want)
    R.verify(k, x)


def test_a_bfloat16_matmul_from_tinygrad_runs(device):
    """tinygrad's test_linearizer bfloat16 kernel (in the golden corpus): a*b of bfloat16s cast to float, summed.
    The product is a bfloat16 (rounded, as every bfloat16 op's result is) before the cast."""
    n = 16
    a_st = ShapeTracker.from_shape((n, 1, n)).expand((n, n, n))
    b_st = ShapeTracker.from_shape((1, n, n)).permute((0, 2, 1)).expand((n, n, n))
    prod = alu(BinaryOps.MUL, load(1, a_st, dtypes.bfloat16), load(2, b_st, dtypes.bfloat16))
    k = Kernel(store(reduce(ReduceOps.SUM, alu(UnaryOps.CAST, prod, arg=dtypes.float), (2,))))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    a16, b16 = (np.array([bf16(v) for v in m.reshape(-1).tolist()], np.float32).reshape(n, n) for m in (a, b))
    for opts in ([], [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 0, 4)], [Opt(OptOps.GROUPTOP, 0, 4)]):
        k2 = Kernel(*k.ast)
        for o in opts:
            k2.apply_opt(o)
        products = np.array([bf16(v) for v in (a16[:, None, :] * b16.T[None]).reshape(-1).tolist()], np.float32)
        np.testing.assert_allclose(R.run(k2, a, b)[0].reshape(n, n), products.reshape(n, n, n).sum(2), rtol=1e-5)
        R.verify(k2, a, b)


# ============================================================================================================
# PADTO of a reduce axis only where the padding's zeros leave the SUM unchanged
# ============================================================================================================
def _padded_sum_ast(build, dt=dtypes.float) -> tuple[LazyOp, ...]:
    """SUM over axis 1 of CAST(build(a, b), float) on (4, 6): padding axis 1 to 8 adds two columns of zeros."""
    st = ShapeTracker.from_shape((4, 6))
    value = build(load(1, st, dt), load(2, st, dt))
    if value.dtype != dtypes.float:
        value = alu(UnaryOps.CAST, value, arg=dtypes.float)
    return (store(reduce(ReduceOps.SUM, value, (1,))),)


# name: (the SUM's source from a and b, their dtype, whether padding is safe). Safe, worked out by hand: the padding
# reads a = b = 0, and the source must give exactly 0 there, by an operation C defines at 0, and hold no op tinygrad
# 0.9.1 refuses to pad through (its UNSAFE_PAD_OPS: RECIP, LOG2, EXP2, IDIV)
_PAD_CASES = {
    "ADD": (lambda a, b: alu(BinaryOps.ADD, a, b), dtypes.float, True),  # 0 + 0 = 0
    "MUL": (lambda a, b: alu(BinaryOps.MUL, a, b), dtypes.float, True),  # 0 * 0 = 0
    "MAX": (lambda a, b: alu(BinaryOps.MAX, a, b), dtypes.float, True),  # max(0, 0) = 0
    "NEG": (lambda a, b: alu(UnaryOps.NEG, a), dtypes.float, True),  # -0 = 0
    "SQRT": (lambda a, b: alu(UnaryOps.SQRT, alu(BinaryOps.MUL, a, a)), dtypes.float, True),  # sqrt(0) = 0
    "SIN": (lambda a, b: alu(UnaryOps.SIN, a), dtypes.float, True),  # sin(0) = 0
    "CMPLT": (lambda a, b: alu(BinaryOps.CMPLT, a, b), dtypes.float, True),  # 0 < 0 is False, cast to 0.0
    "CMPNE": (lambda a, b: alu(BinaryOps.CMPNE, a, b), dtypes.float, True),  # 0 != 0 is False, cast to 0.0
    "WHERE": (lambda a, b: alu(TernaryOps.WHERE, alu(BinaryOps.CMPLT, a, b), a, b), dtypes.float, True),  # b = 0
    "MOD": (lambda a, b: alu(BinaryOps.MOD, a, b), dtypes.float, False),  # 0 % 0 is nan
    "int MOD": (lambda a, b: alu(BinaryOps.MOD, a, b), dtypes.int32, False),  # 0 % 0: undefined in C
    "int XOR": (lambda a, b: alu(BinaryOps.XOR, a, b), dtypes.int32, True),  # 0 ^ 0 = 0
    "bool NEG": (lambda a, b: alu(UnaryOps.NEG, alu(BinaryOps.CMPNE, a, b)), dtypes.float, False),  # not False = 1
    "EXP2": (lambda a, b: alu(UnaryOps.EXP2, a), dtypes.float, False),  # 2 ** 0 = 1
    "LOG2": (lambda a, b: alu(UnaryOps.LOG2, alu(BinaryOps.MUL, a, a)), dtypes.float, False),  # log2(0) = -inf
    "RECIP": (lambda a, b: alu(UnaryOps.RECIP, a), dtypes.float, False),  # 1 / 0 = inf
    "IDIV": (lambda a, b: alu(BinaryOps.IDIV, a, b), dtypes.int32, False),  # 0 // 0: undefined in C
    "WHERE of bool NEG": (  # not (0 < 0) is True: a = 0
        lambda a, b: alu(TernaryOps.WHERE, alu(UnaryOps.NEG, alu(BinaryOps.CMPLT, a, b)), a, b),
        dtypes.float,
        True,
    ),
}


@pytest.mark.parametrize("name", list(_PAD_CASES))
def test_padto_of_a_reduce_axis_is_accepted_exactly_where_zeros_in_give_zero_out(name, device):
    """The padding reads 0 from every buffer: PADTO of a SUM's axis is accepted exactly where the table above says
    it is safe; an accepted PADTO computes the same sum, a refused one says which op maps 0 to something else."""
    build, dt, safe = _PAD_CASES[name]
    ast = _padded_sum_ast(build, dt)
    k = Kernel(*ast)
    if safe:
        k.apply_opt(Opt(OptOps.PADTO, 1, 4))
        assert k.full_shape == (4, 8)
        R.verify(k, *R.random_inputs(k))
    else:
        with pytest.raises(KernelOptError, match=r"cannot pad: (\w+)") as e:
            k.apply_opt(Opt(OptOps.PADTO, 1, 4))
        assert re.search(r"cannot pad: (\w+)", str(e.value))[1] in {x.op.name for x in ast[0].lazyops}  # names an op
        assert k.applied_opts == [] and k.full_shape == (4, 6)


def test_padto_names_the_op_that_breaks_the_sum():
    with pytest.raises(KernelOptError, match=r"cannot pad: MOD maps the padding's 0 to nan"):
        Kernel(*_padded_sum_ast(lambda a, b: alu(BinaryOps.MOD, a, const(4.0, (4, 6))))).apply_opt(
            Opt(OptOps.PADTO, 1, 4)
        )
    bool_neg = _padded_sum_ast(lambda a, b: alu(UnaryOps.NEG, alu(BinaryOps.CMPNE, a, b)))
    with pytest.raises(KernelOptError, match=r"cannot pad: NEG maps the padding's 0 to True"):
        Kernel(*bool_neg).apply_opt(Opt(OptOps.PADTO, 1, 4))


def test_padto_of_an_output_axis_is_safe_through_any_op(device):
    """Padding an output axis only adds outputs that are never stored."""
    k = Kernel(*_padded_sum_ast(lambda a, b: alu(BinaryOps.MOD, a, const(4.0, (4, 6)))))
    k.apply_opt(Opt(OptOps.PADTO, 0, 8))
    R.verify(k, *R.random_inputs(k))


# ============================================================================================================
# integer arithmetic wraps in its own width, as numpy's does
# ============================================================================================================
@pytest.mark.parametrize("dt", NARROW_INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", [BinaryOps.ADD, BinaryOps.MUL, BinaryOps.SHL, UnaryOps.NEG])
def test_narrow_int_arithmetic_wraps_before_it_is_used(dt, op, device):
    info = np.iinfo(R.np_dtype(dt))
    a = np.array([info.max, info.min, 16, info.max // 2 + 1], R.np_dtype(dt))
    b = (
        np.array([1, -1 if info.min else 1, 16, 2], R.np_dtype(dt))
        if op is not BinaryOps.SHL
        else np.array([1, 1, 4, 1], R.np_dtype(dt))
    )
    st = ShapeTracker.from_shape((4,))
    value = alu(op, load(1, st, dt)) if op is UnaryOps.NEG else alu(op, load(1, st, dt), load(2, st, dt))
    ast = (store(alu(UnaryOps.CAST, value, arg=dtypes.int64)),)
    with np.errstate(all="ignore"):
        want = {BinaryOps.ADD: a + b, BinaryOps.MUL: a * b, BinaryOps.SHL: a << b, UnaryOps.NEG: -a}[op]
    inputs = (a,) if op is UnaryOps.NEG else (a, b)
    np.testing.assert_array_equal(R.run(Kernel(*ast), *inputs)[0], want.astype(np.int64))
    np.testing.assert_array_equal(R.reference(ast, *inputs)[0], want.astype(np.int64))


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_signed_overflow_wraps_as_numpy_does(dt, device):
    """Signed overflow is undefined in C, and a compiler that knows a value (here the identity of a MAX over an
    empty axis) may fold it away: the renderer computes in the unsigned type."""
    info = np.iinfo(R.np_dtype(dt))
    smallest = reduce(ReduceOps.MAX, load(1, ShapeTracker.from_shape((4, 0)), dt), (1,))
    ast = (store(alu(BinaryOps.ADD, smallest, load(2, ShapeTracker.from_shape((4, 1)), dt))),)
    x = np.array([-4, -1, 0, 3], R.np_dtype(dt))
    with np.errstate(all="ignore"):
        want = np.full(4, info.min, R.np_dtype(dt)) + x
    np.testing.assert_array_equal(R.reference(ast, np.zeros(0, R.np_dtype(dt)), x)[0], want)
    np.testing.assert_array_equal(R.run(Kernel(*ast), np.zeros(0, R.np_dtype(dt)), x)[0], want)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_constants_compute_in_their_own_type(dt, device):
    """-3 of a uint is 2**32 - 3, and halving it is unsigned division: a constant is a literal of its dtype."""
    ast = (store(alu(BinaryOps.IDIV, alu(UnaryOps.NEG, const(3, (4,), dt)), const(2, (4,), dt))),)
    bits = 8 * dt.itemsize
    neg = (-3) % 2**bits if dtypes.is_unsigned(dt) else -3
    want = [neg // 2 if neg > 0 else -1] * 4  # C's quotient truncates toward zero
    assert R.reference(ast)[0].tolist() == want
    assert R.run(Kernel(*ast))[0].tolist() == want


@pytest.mark.parametrize("op", [BinaryOps.IDIV, BinaryOps.MOD])
@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_integer_division_by_zero_gives_zero_as_numpy_does(dt, op, device):
    """C leaves x / 0 undefined, and a compiler may then assume the divisor is never 0 (and drop the guards of a
    padded lane that reads 0): the renderer gives 0 there, as numpy does."""
    st = ShapeTracker.from_shape((4,))
    ast = (store(alu(op, load(1, st, dt), load(2, st, dt))),)
    a, b = np.array([7, 5, 9, 3], R.np_dtype(dt)), np.array([0, 1, 2, 0], R.np_dtype(dt))
    want = [0, 5, 4, 0] if op is BinaryOps.IDIV else [0, 0, 1, 0]
    assert R.reference(ast, a, b)[0].tolist() == want
    assert R.run(Kernel(*ast), a, b)[0].tolist() == want


def test_narrow_int_comparison_sees_the_wrapped_value(device):
    st = ShapeTracker.from_shape((1,))
    sq = alu(BinaryOps.MUL, load(1, st, dtypes.int8), load(1, st, dtypes.int8))
    ast = (store(alu(BinaryOps.CMPLT, sq, const(5, (1,), dtypes.int8))),)
    assert R.run(Kernel(*ast), np.array([16], np.int8))[0].tolist() == [True]  # 16*16 wraps to 0 in int8


# ============================================================================================================
# the reference computes in the dtype's own arithmetic
# ============================================================================================================
def test_reference_uint64_is_exact(device):
    ast = binary_ast(BinaryOps.ADD, dtypes.uint64)
    a = np.array([2**64 - 2, 2**63, 1, 2**53 + 1], np.uint64)
    b = np.array([1, 2**63 - 1, 2**64 - 1, 2], np.uint64)
    np.testing.assert_array_equal(R.reference(ast, a, b)[0], a + b)
    np.testing.assert_array_equal(R.run(Kernel(*ast), a, b)[0], a + b)


def test_reference_keeps_narrow_inputs_narrow():
    """A uint8 input is gathered as uint8 (a 3 GiB input must not become 24 GiB of int64)."""
    seen = []
    real = R._Reference.__init__

    def spy(self, ast, data, *args):
        seen.extend(x.dtype for x in data.values())
        real(self, ast, data, *args)

    ast = copy_ast((8,), dtypes.uint8)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(R._Reference, "__init__", spy)
        R.reference(ast, np.arange(8, dtype=np.uint8))
    assert seen == [np.uint8]


def test_a_cast_to_half_rounds_before_the_next_op(device):
    """The device keeps half in memory and computes it as float, but a CAST to half rounds as numpy's does: a uint
    past half's range is inf (and its sin NaN), and sin's result is a half too. (This test once asserted the
    opposite, that the cast rounded nothing until the store: the reference shared the renderer's bug.)"""
    st = ShapeTracker.from_shape((3,))
    as_half = alu(UnaryOps.CAST, load(1, st, dtypes.uint32), arg=dtypes.half)
    ast = (store(alu(UnaryOps.CAST, alu(UnaryOps.SIN, as_half), arg=dtypes.float)),)
    x = np.array([4_000_000_000, 70_000, 3], np.uint32)
    with np.errstate(all="ignore"):
        want = np.sin(x.astype(np.float16)).astype(np.float32)
    assert np.isnan(want[:2]).all()
    np.testing.assert_allclose(R.reference(ast, x)[0], want, rtol=1e-6)
    np.testing.assert_allclose(R.run(Kernel(*ast), x)[0], want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_idiv_truncates_toward_zero_even_at_the_smallest_int(dt, device):
    info = np.iinfo(R.np_dtype(dt))
    a = np.array([info.min, info.min, -7, 7, -7, info.max], R.np_dtype(dt))
    b = np.array([2, info.max, 2, -2, -2, info.min], R.np_dtype(dt))
    # C's quotient truncates toward zero: the magnitude is |a| // |b|, the sign is negative when the signs differ
    want = [-(abs(int(x)) // abs(int(y))) if (x < 0) != (y < 0) else abs(int(x)) // abs(int(y)) for x, y in zip(a, b)]
    ast = binary_ast(BinaryOps.IDIV, dt, 6)
    assert R.reference(ast, a, b)[0].tolist() == want
    assert R.run(Kernel(*ast), a, b)[0].tolist() == want


# ============================================================================================================
# every valid kernel compiles: MAX of every int type
# ============================================================================================================
@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_int_max_compiles_for_every_int_type(dt, device):
    st = ShapeTracker.from_shape((4, 4))
    a = load(1, st, dt)
    ast = (store(reduce(ReduceOps.MAX, alu(BinaryOps.MAX, alu(BinaryOps.ADD, a, a), const(3, (4, 4), dt)), (1,))),)
    R.verify(Kernel(*ast), *R.random_inputs(ast))
    const_max = (store(reduce(ReduceOps.MAX, const(5, (4, 4), dt), (1,))),)
    R.verify(Kernel(*const_max))
