"""Numerics that C leaves undefined or that numpy defines its own way: NaN, infinities and signed zeros through MAX
and every float op, integer shifts, divisions and reciprocals at their edges, float-to-int casts of values an int
can't hold, half and bfloat16 constants, and the one-dtype rule of ALU ops.

Each expected value is computed here in plain Python (or, for the float ops, with numpy's own functions), not with
runtime.reference: the device and the reference are both checked against it.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import runtime as R
from kernel import BinaryOps, Kernel, KernelOptError, Opt, OptOps, ReduceOps, ShapeTracker, TernaryOps, UnaryOps
from kernel import Variable, alu, const, dtypes, load, reduce, round_to_float, store
from tests.common import INTS
from tests.corpus import lazyop_from_json

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
    info = np.iinfo(R.np_dtype(dt))
    want = [
        0
        if math.isnan(v)
        else min(max(math.trunc(v), info.min), info.max)
        if math.isfinite(v)
        else (info.max if v > 0 else info.min)
        for v in x.astype(np.float64).tolist()
    ]
    k = Kernel(store(alu(UnaryOps.CAST, load(1, ShapeTracker.from_shape(x.shape), src), arg=dt)))
    check_ints(k, [x], want)


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
    """tinygrad's test_linearizer bfloat16 kernel (in the golden corpus): a*b of bfloat16s cast to float, summed."""
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
        np.testing.assert_allclose(R.run(k2, a, b)[0].reshape(n, n), a16 @ b16, rtol=1e-5, atol=1e-5)
        R.verify(k2, a, b)
