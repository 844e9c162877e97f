"""Rules found by trying to break kernel.py: no wrong results, no unclear errors.

Each test states a rule that holds for a whole class of input (every dtype, every op, every malformed argument),
not only for the case that found it: a refusal names what was wrong, and a kernel that is accepted computes exactly
what its AST means. The random search for more such cases lives in test_fuzz.py.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import kernel
import runtime as R
from kernel import BinaryOps, BufferOps, Kernel, KernelOptError, LazyOp, MemBuffer, Opt, OptOps, ReduceOps, ShapeTracker
from kernel import TernaryOps, UnaryOps, View, alu, const, dtypes, elementwise_ast, load, matmul_ast, reduce, store
from kernel import sum_ast
from tests.common import INTS, ROOT

NARROW_INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16]


def copy_ast(shape: tuple[int, ...], dt=dtypes.float) -> tuple[LazyOp, ...]:
    """out = a"""
    return (store(load(1, ShapeTracker.from_shape(shape), dt)),)


def binary_ast(op, dt, n: int = 4, out_dt=None) -> tuple[LazyOp, ...]:
    """out = CAST(a op b, out_dt), both contiguous of n elements"""
    st = ShapeTracker.from_shape((n,))
    value = alu(op, load(1, st, dt), load(2, st, dt))
    return (store(alu(UnaryOps.CAST, value, arg=out_dt) if out_dt else value),)


# ============================================================================================================
# 1. PADTO of a reduce axis only where the padding's zeros leave the SUM unchanged
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
# 2. integer arithmetic wraps in its own width, as numpy's does
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
# 3, 4. indices and loop bounds are C ints: past int32 the renderer refuses instead of computing garbage
# ============================================================================================================
def test_an_index_past_int32_is_refused_not_miscomputed(device):
    st = ShapeTracker.from_shape((4,)).reshape((4, 1)).expand((4, 1 << 30)).reshape((1 << 32,)).stride(((1 << 30) + 1,))
    k = Kernel(store(load(1, st)))
    with pytest.raises(ValueError, match=r"data1: index .* does not fit in a 32-bit int"):
        R.render(k)
    with pytest.raises(ValueError, match="32-bit"):
        R.run(k, np.array([10, 20, 30, 40], np.float32))


def test_a_loop_past_int32_is_refused_not_endless():
    k = Kernel(*sum_ast(((1 << 31) + 6,)))
    with pytest.raises(ValueError, match=r"axis 0 of size 2147483654 .* does not fit in a 32-bit int"):
        R.render(k)


def test_indices_up_to_int32_still_render():
    st = ShapeTracker.from_shape((2, 1 << 30)).shrink(((1, 2), (0, 4)))  # reads from index 2**30 on
    assert "1073741824" in R.render(Kernel(store(load(1, st)))).src


# ============================================================================================================
# 5. the reference computes in the dtype's own arithmetic
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
# 6. verify compares every element, every output, and sees unwritten elements whatever their value
# ============================================================================================================
@pytest.mark.parametrize("dt, big, wrong", [(dtypes.float, 1e6, 1000.0), (dtypes.half, 60000.0, 1001.0)])
def test_verify_compares_each_element_on_its_own_scale(dt, big, wrong, device):
    k = Kernel(*copy_ast((2,), dt))
    x = np.array([wrong, big], R.np_dtype(dt))
    with pytest.raises(R.VerificationError, match="differs in 1 of 2 elements"):
        R.verify(k, x, expected=[np.array([1.0, big], R.np_dtype(dt))])


def test_verify_checks_the_number_and_shapes_of_expected_outputs(device):
    k = Kernel(*copy_ast((4,)))
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(ValueError, match="expected 1 output array .*got 0"):
        R.verify(k, x, expected=[])
    with pytest.raises(ValueError, match=r"expected output data0 has shape \(3,\), the kernel writes \(4,\)"):
        R.verify(k, x, expected=[x[:3]])
    st = ShapeTracker.from_shape((4,))
    two = Kernel(store(load(2, st)), store(alu(UnaryOps.NEG, load(2, st)), 1))
    ref = R.reference(two, x)
    with pytest.raises(ValueError, match="expected 2 output arrays .*got 1"):
        R.verify(two, x, expected=ref[:1])


@pytest.mark.parametrize(
    "dt, true_value",
    [
        (dtypes.float, np.nan),
        (dtypes.int32, 2**31 - 1),
        (dtypes.uint8, 255),
        (dtypes.half, np.nan),
        (dtypes.int64, -(2**63)),
    ],
)
def test_verify_detects_an_unwritten_element_whatever_its_true_value(dt, true_value, device, monkeypatch):
    k = Kernel(*copy_ast((4,), dt))
    x = np.array([1, true_value, 2, 3]).astype(R.np_dtype(dt))
    R.verify(k, x)  # the real kernel writes every element
    real = R.render

    def skip_element_1(k, limits=None):  # a wrong program: element 1 is never written
        prg = real(k, limits)
        src = re.sub(r"\n( *)(data0\[gidx0\]|vstore_half\(val0, 0, data0\+gidx0\))", r"\n\1if (gidx0!=1) \2", prg.src)
        assert src != prg.src
        return R.Program(**{**vars(prg), "src": src})

    monkeypatch.setattr(R, "render", skip_element_1)
    with pytest.raises(R.VerificationError, match="differs in 1 of 4 elements"):
        R.verify(k, x)


# ============================================================================================================
# 7. every valid kernel compiles: MAX of every int type
# ============================================================================================================
@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_int_max_compiles_for_every_int_type(dt, device):
    st = ShapeTracker.from_shape((4, 4))
    a = load(1, st, dt)
    ast = (store(reduce(ReduceOps.MAX, alu(BinaryOps.MAX, alu(BinaryOps.ADD, a, a), const(3, (4, 4), dt)), (1,))),)
    R.verify(Kernel(*ast), *R.random_inputs(ast))
    const_max = (store(reduce(ReduceOps.MAX, const(5, (4, 4), dt), (1,))),)
    R.verify(Kernel(*const_max))


# ============================================================================================================
# 8, 9. a malformed AST is refused where it is built, naming the op and what is wrong
# ============================================================================================================
@pytest.mark.parametrize(
    "dt, val",
    [
        (dtypes.int8, 300),
        (dtypes.uint8, -1),
        (dtypes.int32, 2**31),
        (dtypes.uint64, 2**64),
        (dtypes.int32, 2.5),
        (dtypes.bool, 2),
        (dtypes.int16, math.nan),
        (dtypes.float, "1"),
    ],
)
def test_a_constant_must_fit_its_dtype(dt, val):
    with pytest.raises(ValueError, match=rf"CONST .*{re.escape(repr(val))}.* {re.escape(dt.name)}"):
        const(val, (4,), dt)


@pytest.mark.parametrize(
    "dt, val",
    [
        (dtypes.int8, -128),
        (dtypes.uint64, 2**64 - 1),
        (dtypes.float, math.inf),
        (dtypes.half, math.nan),
        (dtypes.bool, True),
        (dtypes.int32, 3.0),
    ],
)
def test_constants_in_range_are_accepted(dt, val):
    assert const(val, (4,), dt).arg.val == val or math.isnan(val)


_ST = ShapeTracker.from_shape((4,))
_X = load(1, _ST)

MALFORMED = {
    "unknown op": (lambda: LazyOp("ADD", (_X, _X)), r"'ADD' is not an op"),
    "src not a tuple of LazyOps": (lambda: LazyOp(BinaryOps.ADD, (_X, 1)), r"ADD: source 1 is not a LazyOp"),
    "ADD with one source": (lambda: alu(BinaryOps.ADD, _X), r"ADD takes 2 sources, got 1"),
    "ADD with three": (lambda: alu(BinaryOps.ADD, _X, _X, _X), r"ADD takes 2 sources, got 3"),
    "NEG with two": (lambda: alu(UnaryOps.NEG, _X, _X), r"NEG takes 1 source, got 2"),
    "WHERE with two": (lambda: alu(TernaryOps.WHERE, _X, _X), r"WHERE takes 3 sources, got 2"),
    "reduce with two sources": (lambda: LazyOp(ReduceOps.SUM, (_X, _X), (0,)), r"SUM takes 1 source, got 2"),
    "reduce arg a list": (lambda: LazyOp(ReduceOps.SUM, (_X,), [0]), r"SUM needs a tuple of axes as its arg"),
    "reduce arg of floats": (lambda: LazyOp(ReduceOps.SUM, (_X,), (0.5,)), r"SUM needs a tuple of axes as its arg"),
    "LOAD of an int": (lambda: LazyOp(BufferOps.LOAD, (), 3), r"LOAD needs a MemBuffer arg, got 3"),
    "LOAD with a source": (lambda: LazyOp(BufferOps.LOAD, (_X,), _X.arg), r"LOAD takes 0 sources, got 1"),
    "CONST of a MemBuffer": (lambda: LazyOp(BufferOps.CONST, (), _X.arg), r"CONST needs a ConstBuffer arg"),
    "CAST to a string": (lambda: alu(UnaryOps.CAST, _X, arg="float"), r"CAST needs a DType arg, got 'float'"),
    "BITCAST to nothing": (lambda: alu(UnaryOps.BITCAST, _X), r"BITCAST needs a DType arg, got None"),
    "negative buffer index": (lambda: load(-1, _ST), r"MemBuffer: idx must be an int >= 0, got -1"),
    "buffer index a float": (lambda: load(1.0, _ST), r"MemBuffer: idx must be an int >= 0, got 1.0"),
    "dtype a string": (lambda: load(1, _ST, "float"), r"MemBuffer: dtype must be a DType, got 'float'"),
    "st not a ShapeTracker": (lambda: MemBuffer(1, dtypes.float, (4,)), r"MemBuffer: st must be a ShapeTracker"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_ast_node_is_refused_when_built(name):
    build, message = MALFORMED[name]
    with pytest.raises(ValueError, match=message):
        build()


def test_one_buffer_is_loaded_as_one_dtype():
    ast = (store(alu(BinaryOps.ADD, load(1, _ST), alu(UnaryOps.CAST, load(1, _ST, dtypes.int32), arg=dtypes.float))),)
    with pytest.raises(ValueError, match=r"buffer 1 is loaded as float and as int"):
        Kernel(*ast)
    with pytest.raises(ValueError, match=r"buffer 1 is loaded as float and as int"):
        R.reference(ast, np.zeros(4, np.float32))


@pytest.mark.parametrize("shapes", [((8,), (2, 4)), ((2, 4), (4, 2))])
def test_all_outputs_have_one_shape(shapes):
    outs = [store(load(5, ShapeTracker.from_shape(s)), i) for i, s in enumerate(shapes)]
    with pytest.raises(
        ValueError, match=re.escape(f"outputs must have one shape: data0 {shapes[0]}, data1 {shapes[1]}")
    ):
        Kernel(*outs)


# ============================================================================================================
# 10. zero-size kernels: no opt applies, and they compute empty outputs (a reduce of nothing is its identity)
# ============================================================================================================
@pytest.mark.parametrize(
    "opt",
    [
        Opt(OptOps.UPCAST, 0, 4),
        Opt(OptOps.UPCAST, 0, 0),
        Opt(OptOps.LOCAL, 0, 2),
        Opt(OptOps.PADTO, 0, 4),
        Opt(OptOps.NOLOCALS),
    ],
)
def test_no_opt_applies_to_an_empty_kernel(opt):
    k = Kernel(*elementwise_ast(0))
    with pytest.raises(KernelOptError, match=r"the kernel has no elements \(shape \(0,\)\)"):
        k.apply_opt(opt)
    assert k.applied_opts == [] and k.full_shape == (0,)


@pytest.mark.parametrize("ast", [elementwise_ast(0), sum_ast((4, 0), (1,)), matmul_ast(4, 4, 0), matmul_ast(0, 4, 4)])
def test_heuristics_apply_nothing_to_an_empty_kernel(ast):
    k = Kernel(*ast)
    k.hand_coded_optimizations()
    assert k.applied_opts == []
    k2 = Kernel(*ast, opts=kernel.TARGETS["metal"])
    assert not k2.apply_tensor_cores(1) and k2.applied_opts == []


def test_an_empty_kernel_runs_to_empty_outputs(device):
    k = Kernel(*elementwise_ast(0))
    empty = [np.zeros(0, np.float32)] * 2
    assert [x.shape for x in R.reference(k, *empty)] == [(0,)]
    assert [x.shape for x in R.run(k, *empty)] == [(0,)]
    R.verify(k, *empty)


@pytest.mark.parametrize("op, identity", [(ReduceOps.SUM, 0.0), (ReduceOps.MAX, -math.inf)])
@pytest.mark.parametrize("dt", [dtypes.float, dtypes.int32, dtypes.bool], ids=lambda d: d.name)
def test_a_reduce_over_an_empty_axis_gives_its_identity(op, identity, dt, device):
    ast = (store(reduce(op, load(1, ShapeTracker.from_shape((3, 0)), dt), (1,))),)
    want = (
        np.full((3,), identity).astype(R.np_dtype(dt))
        if dt != dtypes.int32 or op is ReduceOps.SUM
        else np.full((3,), np.iinfo(np.int32).min, np.int32)
    )
    if dt == dtypes.bool:
        want = np.zeros(3, np.bool_)
    np.testing.assert_array_equal(R.reference(ast, np.zeros(0, R.np_dtype(dt)))[0], want)
    np.testing.assert_array_equal(R.run(Kernel(*ast), np.zeros(0, R.np_dtype(dt)))[0], want)


# ============================================================================================================
# 11. movement-op arguments and View fields are integers: Python ints, numpy integers, or symbolic Nodes
# ============================================================================================================
_BASE = ShapeTracker.from_shape((4, 6))

BAD_MOVEMENT = {
    "reshape to a float": (lambda: _BASE.reshape((4.5, 6)), r"reshape: .*4\.5"),
    "reshape to an integral float": (lambda: _BASE.reshape((4.0, 6)), r"reshape: .*4\.0"),
    "reshape to strings": (lambda: _BASE.reshape(("4", "6")), r"reshape: .*'4'"),
    "reshape to bools": (lambda: ShapeTracker.from_shape((1, 1)).reshape((True, True)), r"reshape: .*True"),
    "pad by a float": (lambda: _BASE.pad(((1.9, 0), (0, 0))), r"pad: .*1\.9"),
    "shrink by a float": (lambda: _BASE.shrink(((0, 2.5), (0, 6))), r"shrink: .*2\.5"),
    "stride by a float": (lambda: _BASE.stride((1.5, 1)), r"stride: .*1\.5"),
    "stride by a bool": (lambda: _BASE.stride((True, 1)), r"stride: .*True"),
    "expand to a float": (lambda: ShapeTracker.from_shape((1, 6)).expand((4.0, 6)), r"expand: .*4\.0"),
    "permute by floats": (lambda: _BASE.permute((1.0, 0)), r"permute: .*1\.0"),
    "from_shape of a float": (lambda: ShapeTracker.from_shape((2.0, 3)), r"2\.0"),
    "View offset a float": (lambda: View.create((4,), (1,), 1.5), r"View.create: offset .*1\.5"),
    "View strides floats": (lambda: View.create((4,), (1.5,)), r"View.create: strides .*1\.5"),
    "View mask floats": (lambda: View.create((4,), (1,), 0, ((0.5, 3),)), r"View.create: mask .*0\.5"),
    "View mask past the shape": (lambda: View.create((4,), (1,), 0, ((0, 5),)), r"View.create: mask .*\(0, 5\)"),
    "View mask before 0": (lambda: View.create((4,), (1,), 0, ((-1, 3),)), r"View.create: mask .*\(-1, 3\)"),
}


@pytest.mark.parametrize("name", list(BAD_MOVEMENT))
def test_movement_op_arguments_must_be_integers(name):
    build, message = BAD_MOVEMENT[name]
    with pytest.raises(ValueError, match=message):
        build()


def test_numpy_integers_are_integers():
    n = np.int64
    assert _BASE.reshape((n(4), n(6))) == _BASE.reshape((4, 6))
    assert _BASE.pad(((n(1), 0), (0, n(2)))) == _BASE.pad(((1, 0), (0, 2)))
    assert _BASE.stride((n(2), np.int32(-1))) == _BASE.stride((2, -1))
    assert ShapeTracker.from_shape((np.uint8(4), 6)) == _BASE
    assert View.create((n(4),), (n(1),), n(0), ((n(1), n(3)),)) == View.create((4,), (1,), 0, ((1, 3),))
    assert all(type(s) is int for s in _BASE.reshape((n(4), n(6))).shape)


# ============================================================================================================
# 12. opt arguments: ints (numpy ints count), and only where the op takes them
# ============================================================================================================
def test_numpy_int_opt_arguments_are_ints():
    k = Kernel(*elementwise_ast(64))
    k.apply_opt(Opt(OptOps.UPCAST, np.int64(0), np.int32(4)))
    assert [str(o) for o in k.applied_opts] == ["UPCAST:0:4"] and k.full_shape == (16, 4)


BAD_OPTS = [
    (Opt(OptOps.UPCAST, True, 4), r"UPCAST needs an int axis >= 0, got True"),
    (Opt(OptOps.UPCAST, 0, False), r"UPCAST needs an int amount >= 0, got False"),
    (Opt(OptOps.UPCAST, 0.0, 4), r"UPCAST needs an int axis >= 0, got 0.0"),
    (Opt(OptOps.UPCAST, "0", 4), r"UPCAST needs an int axis >= 0, got '0'"),
    (Opt(OptOps.LOCAL, 0, 4.0), r"LOCAL needs an int amount >= 0, got 4.0"),
    (Opt(OptOps.NOLOCALS, 3, 4), r"NOLOCALS takes no axis and no amount, got 3 and 4"),
    (Opt(OptOps.TC, -1, 0), r"TC needs an int axis >= 0, got -1"),
    (Opt(OptOps.TC, 0, -5), r"TC needs an amount \(tc_opt\) of 0, 1 or 2, got -5"),
    (Opt(OptOps.TC, 0, 3), r"TC needs an amount \(tc_opt\) of 0, 1 or 2, got 3"),
    (Opt(OptOps.TC, True, 0), r"TC needs an int axis >= 0, got True"),
]


@pytest.mark.parametrize("opt, message", BAD_OPTS, ids=[str(o) for o, _ in BAD_OPTS])
def test_opt_arguments_must_be_what_the_op_takes(opt, message):
    k = Kernel(*matmul_ast(64, 64, 64), opts=kernel.TARGETS["metal"])
    with pytest.raises(KernelOptError, match=message):
        k.apply_opt(opt)
    assert k.applied_opts == [] and k.full_shape == (64, 64, 64)


# ============================================================================================================
# 13. hand_coded_optimizations is all or nothing
# ============================================================================================================
@pytest.mark.parametrize("first", [[Opt(OptOps.NOLOCALS)], [Opt(OptOps.LOCAL, 0, 4)], "heuristics"])
@pytest.mark.parametrize("ast", [elementwise_ast(4096), matmul_ast(64, 64, 64), sum_ast((64, 64), (1,))])
def test_failed_heuristics_leave_the_kernel_as_it_was(first, ast):
    k = Kernel(*ast)
    if first == "heuristics":
        k.hand_coded_optimizations()
    else:
        for o in first:
            k.apply_opt(o)
    before = (list(k.applied_opts), k.full_shape, [st.views for st in k.sts], k.colors())
    try:
        k.hand_coded_optimizations()
    except KernelOptError:
        assert (k.applied_opts, k.full_shape, [st.views for st in k.sts], k.colors()) == before
    else:
        assert k.applied_opts[: len(before[0])] == before[0]


def test_differences_md_says_what_running_the_heuristics_on_an_optimized_kernel_does():
    """A second run, or one after NOLOCALS, adds what still applies (as tinygrad's does); it raises, changing
    nothing, only where one of its opts fails. DIFFERENCES.md's examples are what happens."""
    runs = {}
    for name, first in (("sum", "again"), ("sum", "nolocals"), ("matmul", "nolocals")):
        k = Kernel(*kernel.DEMOS[name].build())
        k.hand_coded_optimizations() if first == "again" else k.apply_opt(Opt(OptOps.NOLOCALS))
        before = list(k.applied_opts)
        try:
            k.hand_coded_optimizations()
            runs[name, first] = [str(o) for o in k.applied_opts[len(before) :]]
        except KernelOptError as e:
            assert k.applied_opts == before
            runs[name, first] = str(e)
    assert runs["sum", "again"] == ["GROUPTOP:0:16"] and runs["sum", "nolocals"] == ["UNROLL:0:4"]
    assert runs["matmul", "nolocals"].startswith("not using locals") and "LOCAL" in runs["matmul", "nolocals"]
    differences = " ".join(open(os.path.join(ROOT, "DIFFERENCES.md")).read().split())
    assert "(after NOLOCALS, or a second time, it raises and changes nothing)" not in differences
    assert (
        "run twice, `sum` gets a second GROUPTOP:0:16; after NOLOCALS, `matmul` raises (its LOCAL is refused) "
        "and `sum` gets UNROLL:0:4" in differences
    )


# ============================================================================================================
# 14. command lines: one line naming the option or variable; colour only where it is seen; quiet broken pipes
# ============================================================================================================
def _cli(*args: str, env: dict | None = None, script: str = "kernel.py") -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TC", "MV_THREADS_PER_ROW")}
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, script), *args],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=120,
    )


@pytest.mark.parametrize(
    "args, env, script, names",
    [
        (["--runs", "0"], {}, "bench.py", "--runs"),
        (["verify", "--seed", "-5"], {}, "runtime.py", "--seed"),
        (["demo"], {"TC": "abc"}, "kernel.py", "TC"),
        (["show", "matmul"], {"TC": "abc"}, "runtime.py", "TC"),
        (["demo", "matvec"], {"MV_THREADS_PER_ROW": "0"}, "kernel.py", "MV_THREADS_PER_ROW"),
        (["show", "matvec", "--opt", "UPCAST:0"], {}, "runtime.py", "OP:AXIS:AMT"),
        (["demo", "--opt", "NOLOCALS:1:2"], {}, "kernel.py", "OP:AXIS:AMT"),
    ],
    ids=[
        "bench --runs 0",
        "verify --seed -5",
        "demo TC=abc",
        "show TC=abc",
        "MV_THREADS_PER_ROW=0",
        "UPCAST:0",
        "NOLOCALS:1:2",
    ],
)
def test_a_bad_command_line_gets_one_line_naming_what_to_fix(args, env, script, names):
    p = _cli(*args, env=env, script=script)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]  # (argparse prints its usage first)
    assert "Traceback" not in p.stderr and re.match(r"(usage: )?python \w+\.py.*: error: ", last), p.stderr
    assert names in last


def test_a_closed_pipe_ends_the_demo_quietly():
    p = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "kernel.py"), "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "FORCE_COLOR": "1"},
    )
    p.stdout.close()  # the reader is gone before the first line (as `| head -0`)
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert err == ""


@pytest.mark.parametrize(
    "env, coloured",
    [
        ({}, False),
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ],
)
def test_colour_only_for_a_terminal_or_when_forced(env, coloured):
    p = _cli("demo", "matvec", env=env)
    assert p.returncode == 0 and ("\x1b[" in p.stdout) == coloured


def test_rejected_opts_are_shown_after_the_header_with_room_for_long_labels(capsys, device):
    assert R.main(["show", "sum_axis1", "--opt", "UPCAST:7:4"]) == 0
    out = capsys.readouterr().out
    assert out.index("sum_axis1 [") < re.search(r"UPCAST:7:4 +rejected", out).start()
    kernel.demo_kernel("matvec", opts=[Opt(OptOps.GROUPTOP, 100, 1000)])
    assert re.search(r"GROUPTOP:100:1000 +rejected", capsys.readouterr().out)


@pytest.mark.parametrize("view", ["steps", "explain"])
def test_demo_kernel_returns_its_rejected_opts_and_verify_logs_them(view, capsys, device):
    opts = [Opt(OptOps.GROUPTOP, 0, 16), Opt(OptOps.UPCAST, 7, 4)]
    k, rejected = kernel.demo_kernel("sum", opts=opts, view=view)
    assert k.applied_opts == opts[:1] and [o for o, _ in rejected] == opts[1:] and "axis" in rejected[0][1]
    capsys.readouterr()
    assert R.main(["verify", "sum", "--opt", "GROUPTOP:0:16", "--opt", "UPCAST:7:4"]) == 0
    assert re.search(r"^  UPCAST:7:4 +rejected: .*axis.*\nok +sum ", capsys.readouterr().out, re.M)


# ============================================================================================================
# 15. the compiled-program cache is bounded
# ============================================================================================================
def test_the_program_cache_keeps_the_most_recently_used(device, monkeypatch):
    monkeypatch.setattr(R, "PROGRAM_CACHE_SIZE", 3)
    monkeypatch.setattr(device, "programs", type(device.programs)())
    srcs = [f"__kernel void k{i}(__global int* data0) {{ data0[0] = {i}; }}\n" for i in range(5)]
    first = R.build(srcs[0], "k0")
    for i, src in enumerate(srcs[1:3], 1):
        R.build(src, f"k{i}")
    assert R.build(srcs[0], "k0") is first  # used again: now the most recent
    for i, src in enumerate(srcs[3:], 3):
        R.build(src, f"k{i}")
    programs = device.programs
    assert len(programs) == 3 and srcs[0] in programs and srcs[1] not in programs
    assert R.PROGRAM_CACHE_SIZE == 3 and isinstance(R.PROGRAM_CACHE_SIZE, int)


# ============================================================================================================
# one value per variable, no output read where another thread writes, every __local buffer counted,
# partial stores verified, arguments and command lines that say what is wrong
# ============================================================================================================
def _shifted(i_a, i_b) -> tuple[LazyOp, ...]:
    """x[i:i+4] + x[i:i+4], the variable i bound to i_a in the first slice and to i_b in the second."""
    i = kernel.Variable("i", 0, 8)
    a, b = (ShapeTracker.from_shape((16,)).shrink(((i.bind(v), i.bind(v) + 4),)) for v in (i_a, i_b))
    return (store(alu(BinaryOps.ADD, load(1, a), load(1, b))),)


def test_a_variable_bound_to_two_values_is_refused(device):
    with pytest.raises(ValueError, match="i is bound to both 3 and 5"):
        Kernel(*_shifted(3, 5))
    k = Kernel(*_shifted(5, 5))  # one value: fine, and it is the value the kernel runs with
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(R.run(k, x)[0], x[5:9] * 2)


def test_an_output_read_through_another_view_is_refused(device):
    """out[i] = out[i-1] + 1: a thread would read what another thread writes, in no defined order."""
    write = ShapeTracker.from_shape((17,)).shrink(((1, 17),))
    read = ShapeTracker.from_shape((17,)).shrink(((0, 16),))
    one = const(1.0, (16,))
    with pytest.raises(ValueError, match="buffer 0 is stored through .* and loaded through"):
        Kernel(LazyOp(BufferOps.STORE, (alu(BinaryOps.ADD, load(0, read), one),), MemBuffer(0, dtypes.float32, write)))
    # through the very view it is stored through, each thread reads its own element: an update in place
    k = Kernel(LazyOp(BufferOps.STORE, (alu(BinaryOps.ADD, load(0, write), one),), MemBuffer(0, dtypes.float32, write)))
    x = np.arange(17, dtype=np.float32)
    np.testing.assert_array_equal(R.run(k, x)[0], np.concatenate([x[:1], x[1:] + 1]))


_C_BYTES = {"float": 4, "half": 2, "int": 4, "double": 8, "char": 1, "short": 2, "long": 8, "bool": 1}


def _local_bytes(src: str) -> int:
    """The bytes of the __local arrays an OpenCL program declares, read from its text."""
    return sum(_C_BYTES[t] * int(n) for t, n in re.findall(r"__local (\w+) \w+\[(\d+)\];", src))


def test_the_local_buffers_of_every_reduce_fit_in_shared_memory():
    """A kernel with two reduces has two __local buffers: the opt checks count both against shared_max."""
    import dataclasses

    small = dataclasses.replace(kernel.TARGETS["opencl"], shared_max=256)
    x = load(1, ShapeTracker.from_shape((4, 256)))
    both = alu(BinaryOps.ADD, reduce(ReduceOps.SUM, x, (1,)), reduce(ReduceOps.MAX, alu(BinaryOps.MUL, x, x), (1,)))
    accepted = []
    for amt in (16, 32, 64):  # 2 buffers of amt floats: 128, 256, 512 bytes
        k = Kernel(store(both), opts=small)
        try:
            k.apply_opt(Opt(OptOps.GROUPTOP, 0, amt))
        except KernelOptError as e:
            assert "shared memory" in str(e)
            continue
        assert _local_bytes(R.render(k).src) <= 256
        accepted.append(amt)
    assert accepted == [16, 32]


def _partial_store(st: ShapeTracker, dt=dtypes.float32) -> Kernel:
    return Kernel(store(load(1, ShapeTracker.from_shape(st.shape), dt), dtype=dt, st=st))


PARTIAL_STORES = {
    "out[4:12] = x": ShapeTracker.from_shape((16,)).shrink(((4, 12),)),
    "out[::2] = x": ShapeTracker.from_shape((16,)).stride((2,)),
}


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.bool])
@pytest.mark.parametrize("name", list(PARTIAL_STORES))
def test_verify_accepts_a_store_to_part_of_its_buffer(name, dt, device):
    k = _partial_store(PARTIAL_STORES[name], dt)
    (x,) = R.random_inputs(k)
    R.verify(k, x)
    out = R.run(k, x)[0]
    want = np.zeros(16, R.np_dtype(dt))[: out.size]
    written = np.zeros(out.size, bool)
    if name == "out[4:12] = x":
        want[4:12], written[4:12] = x, True
    else:
        want[::2], written[::2] = x, True
    np.testing.assert_array_equal(out[written], want[written])


def test_verify_still_catches_a_wrong_element_of_a_partial_store(device, monkeypatch):
    k = _partial_store(PARTIAL_STORES["out[::2] = x"])
    (x,) = R.random_inputs(k)
    real_run = R.run
    for where, message in [(2, "differs in 1 of"), (3, "not written by the STORE")]:  # written, then not written

        def run_one_wrong(kern, *xs, **kwargs):
            outs = real_run(kern, *xs, **kwargs)
            outs[0][where] = 7.0
            return outs

        monkeypatch.setattr(R, "run", run_one_wrong)
        with pytest.raises(R.VerificationError, match=message):
            R.verify(k, x)


def test_a_variable_value_must_fit_the_int_argument(device):
    n = kernel.Variable("n", 1, 2**32)
    k = Kernel(store(load(1, ShapeTracker.from_shape((n,)))))
    with pytest.raises(ValueError, match=r"n=2147483648 doesn't fit"):
        R.run(k, np.zeros(4, np.float32), var_vals={"n": 2**31})


def _bad_api_calls():
    ast = elementwise_ast(16)
    k = Kernel(*ast)
    x = [np.zeros(16, np.float32)] * 2
    return {
        "var_vals list": (lambda: R.run(k, *x, var_vals=[("n", 3)]), "var_vals"),
        "expected plain list": (lambda: R.verify(k, *x, expected=[[0.0] * 16]), "expected output data0"),
        "run an AST": (lambda: R.run(ast, *x), "run takes a Kernel"),
        "verify an AST": (lambda: R.verify(ast, *x), "verify takes a Kernel"),
        "time an AST": (lambda: R.time_kernel(ast, *x), "time_kernel takes a Kernel"),
        "render an AST": (lambda: R.render(ast), "render takes a Kernel"),
        "Target local_max 5": (lambda: kernel.Target("GPU", local_max=5), "local_max"),
        "Target shared_max None": (lambda: kernel.Target("GPU", shared_max=None), "shared_max"),
    }


@pytest.mark.parametrize("name", list(_bad_api_calls()))
def test_a_bad_api_argument_is_a_value_error_naming_it(name, device):
    call, names = _bad_api_calls()[name]
    with pytest.raises(ValueError, match=re.escape(names)):
        call()


def test_a_target_without_a_local_limit_renders_and_runs(device):
    import dataclasses

    unlimited = dataclasses.replace(kernel.TARGETS["opencl"], local_max=None)  # None: no limit, as global_max
    k = Kernel(*matmul_ast(32, 32, 32), opts=unlimited)
    k.apply_opt(Opt(OptOps.LOCAL, 0, 8))
    a, b = R.random_inputs(k)
    R.verify(k, a, b)
    assert "get_local_id" in R.render(k).src


def _one_line_error(p: subprocess.CompletedProcess, status: int, *names: str) -> str:
    assert p.returncode == status, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    for name in names:
        assert name in p.stderr, p.stderr
    return p.stderr


def test_a_bad_pyopencl_ctx_is_one_line_that_names_it():
    env = {"PYOPENCL_CTX": "97", "KERNELPY_DEVICE": ""}  # KERNELPY_DEVICE, where set, wins
    err = _one_line_error(_cli("verify", "sum", env=env, script="runtime.py"), 1, "PYOPENCL_CTX")
    assert "pip install" not in err  # the devices may be fine: installing one is not the fix


def test_no_opencl_platform_is_one_line():
    """A machine without OpenCL, simulated the same on every machine: runtime's discovery sees no platform (an empty
    OCL_ICD_VENDORS folder hid no driver where pyopencl's wheel brings PoCL's own)."""
    no_platform = "import pyopencl, runpy, sys; pyopencl.get_platforms = lambda: []; sys.argv[0] = {script!r}; "
    no_platform += "runpy.run_path(sys.argv[0], run_name='__main__')"
    env = {k: v for k, v in os.environ.items() if k not in ("PYOPENCL_CTX", "KERNELPY_DEVICE")}
    code = no_platform.format(script=os.path.join(ROOT, "runtime.py"))
    p = subprocess.run(
        [sys.executable, "-c", code, "verify", "sum"], capture_output=True, text=True, env=env, timeout=120
    )
    _one_line_error(p, 1, "no OpenCL device", "none of them compiles a kernel")


@pytest.mark.parametrize("knob", ["BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX"])
def test_a_bad_search_knob_is_one_line_and_help_still_works(knob, tmp_path):
    assert _cli("--help", env={knob: "lots"}, script="search.py").returncode == 0
    p = _cli("sum", env={knob: "lots", "KERNELPY_CACHE": str(tmp_path)}, script="search.py")
    _one_line_error(p, 2, knob)


@pytest.mark.parametrize("what", ["not JSON", "a directory"])
def test_a_bad_tinygrad_file_is_one_line(what, tmp_path):
    path = tmp_path / "perf.json"
    if what == "a directory":
        path.mkdir()
    else:
        path.write_text("tinygrad: 1 ms\n")
    p = _cli("--runs", "1", "--tinygrad", str(path), "add 16M", script="bench.py")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert re.match(r"python bench\.py: error: --tinygrad: .*perf\.json", p.stderr.strip().splitlines()[-1])


def test_a_closed_stdout_is_no_traceback():
    p = subprocess.run(
        f'"{sys.executable}" "{os.path.join(ROOT, "runtime.py")}" verify sum >&-',
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr


CTRL_C_SCRIPT = """
import os, signal, sys, threading
sys.path.insert(0, {root!r})
import search
signal.signal(signal.SIGINT, lambda *_: print("Ctrl-C", flush=True))  # this process lives on: its compiler is tested
compiler = search._Compiler()
answered = threading.Event()


def ctrl_c():  # to this process's group, as a terminal's Ctrl-C, again and again: from the compiler's start on
    while not answered.wait(0.02):
        os.killpg(0, signal.SIGINT)


threading.Thread(target=ctrl_c, daemon=True).start()
binary = compiler("__kernel void k(__global float* d) {{ d[0] = 1.0f; }}")
answered.set()
try:
    compiler("__kernel void k(__global float* d) {{ d[0] = undefined; }}")
except search.BuildError as e:
    print("refused", "undefined" in str(e))
print("built", len(binary) > 0, compiler.proc.poll() is None, flush=True)
"""


def test_a_ctrl_c_never_reaches_a_compiler_process_and_it_prints_nothing(tmp_path):
    """A terminal's Ctrl-C goes to its whole foreground process group: the search's compiler processes are not in it
    (they printed a KeyboardInterrupt traceback each while they imported, and PoCL failed the build they were in), and
    what the driver says of a build ("1 error generated.") comes back in the build's error, not on the terminal."""
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C_SCRIPT.format(root=ROOT))
    env = {**os.environ, "KERNELPY_CACHE": str(tmp_path)}
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120,
                       start_new_session=True)  # fmt: skip
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "Ctrl-C" in p.stdout and "refused True" in p.stdout and "built True True" in p.stdout, p.stdout


def test_ctrl_c_during_a_search_ends_in_one_line(tmp_path):
    """A terminal's Ctrl-C reaches the search's compiler processes too: they say nothing, the search one line."""
    import signal
    import time

    p = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "search.py"), "matmul", "--no-cache"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KERNELPY_CACHE": str(tmp_path)},
        start_new_session=True,  # a process group of its own, as a terminal gives a command
    )
    p.stdout.readline()  # the header: the search has begun
    time.sleep(1)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err.strip() == "python search.py: interrupted", err


def test_a_search_out_of_time_before_timing_anything_says_so_and_exits_cleanly(tmp_path):
    """Not the given kernel back as the search's answer; and the compile threads finish before the program ends
    (one ending under a compile crashed the OpenCL runtime)."""
    p = _cli("sum", "--timeout", "0.001", env={"KERNELPY_CACHE": str(tmp_path)}, script="search.py")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "python search.py: error: the search timed no kernel: its timeout of 0.001 s ran out first"
    )
    assert len(p.stderr.strip().splitlines()) == 2, p.stderr  # argparse's usage line, then the error
