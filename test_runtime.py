"""Tests of runtime.py: every kernel the optimizer can produce renders to OpenCL C that computes what its AST means.

The golden corpus (testdata/kernels.json, kernels tinygrad 0.9.1 really produced) is run on the device after the
heuristics and after every accepted step of its random opt sequences, then compared with the numpy reference.
Kernels whose iteration space is larger than 2**22 elements need RUNTIME_LARGE=1 (they take minutes on 2 cores);
the default run still covers every OptOp, every target, images, masks and GROUP (a test below checks that).
The fuzzer of random ASTs and opts is test_fuzz.py.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyopencl as cl
import pytest

import runtime as R
from test_golden import KERNEL_CASES, build_kernel
from kernel import (
    TARGETS,
    BinaryOps,
    Kernel,
    KernelOptError,
    Opt,
    OptOps,
    ReduceOps,
    ShapeTracker,
    TernaryOps,
    UnaryOps,
    alu,
    const,
    conv2d_ast,
    dtypes,
    elementwise_ast,
    image_matvec_ast,
    load,
    matmul_ast,
    matvec_ast,
    reduce,
    store,
    sum_ast,
)

CASES = KERNEL_CASES
LARGE = 1 << 22  # iteration spaces above this many elements are verified only with RUNTIME_LARGE=1


pytestmark = pytest.mark.usefixtures("device")  # conftest.py: skipped, saying why, without an OpenCL device


# -- the golden corpus --------------------------------------------------------------------------------------------
_kernel = build_kernel  # the corpus loader of test_golden.py


def _size(case) -> int:
    return int(np.prod(case["init"]["full_shape"]))


def _accepted_prefixes(case):
    """(kernel, opts so far) after every accepted step of every sequence of the case."""
    for seq in case["sequences"]:
        k = _kernel(case)
        for step in seq:
            try:
                k.apply_opt(Opt(getattr(OptOps, step["opt"][0]), step["opt"][1], step["opt"][2]))
            except KernelOptError:
                assert not step["ok"], f"kernel.py rejected {step['opt']}, tinygrad accepted it"
                continue
            yield k


def _golden_params():
    for c in CASES:
        marks = (
            []
            if _size(c) <= LARGE or os.environ.get("RUNTIME_LARGE")
            else [pytest.mark.skip(reason=f"{_size(c)} elements: set RUNTIME_LARGE=1 to verify large kernels")]
        )
        yield pytest.param(c, id=f"{c['name']}[{c['target']}]", marks=marks)


@pytest.mark.parametrize("case", list(_golden_params()))
def test_golden_kernel_verifies_after_heuristics_and_every_accepted_opt(case):
    k = _kernel(case)
    inputs = R.random_inputs(k)
    expected = R.reference(k, *inputs)  # once: every kernel below computes the same AST
    if "tensor_cores" in case:
        assert k.apply_tensor_cores(1) == case["tensor_cores"]["used"]
    else:
        k.hand_coded_optimizations()
    R.verify(k, *inputs, expected=expected)
    for k in _accepted_prefixes(case):
        R.verify(k, *inputs, expected=expected)


def test_default_golden_run_covers_every_optop_target_image_mask_and_group():
    small = [c for c in CASES if _size(c) <= LARGE]
    ops = {s["opt"][0] for c in small for seq in c["sequences"] for s in seq if s["ok"]}
    ops |= {o[0] for c in small for o in c.get("tensor_cores", {}).get("applied_opts", [])}
    assert ops == {o.name for o in OptOps}
    assert {c["target"] for c in small} == set(TARGETS)
    assert any("image" in json.dumps(c["ast"]) for c in small)
    assert any('"mask": [[' in json.dumps(c["ast"]) for c in small)
    assert any("green" in c["hand_coded"]["colors"] for c in small)


# -- what each colour becomes -------------------------------------------------------------------------------------
def _opt(k: Kernel, *opts: str) -> Kernel:
    for o in opts:
        k.apply_opt(Opt.parse(o))
    return k


def test_name_is_tinygrads():
    k = Kernel(*matmul_ast(512, 512, 512))
    k.hand_coded_optimizations()
    assert R.render(k).name == "r_16_8_8_16_128_4_4_4"
    assert R.render(Kernel(*elementwise_ast(64))).name == "E_64"


def test_global_local_reduce_and_upcast_become_ids_loops_and_float4():
    k = _opt(Kernel(*matmul_ast(64, 64, 64)), "UPCAST:1:4", "UPCAST:0:4", "UNROLL:0:4", "LOCAL:0:8", "LOCAL:1:16")
    prg = R.render(k)
    assert "get_group_id(0)" in prg.src and "get_local_id(1)" in prg.src  # blue, cyan
    assert "for (int ridx" in prg.src  # red
    assert "float4 val" in prg.src and "*((__global float4*)(data0+" in prg.src  # yellow/magenta: float4 in and out
    assert prg.src.count("acc") > 16  # 4x4 accumulators
    assert prg.local_size == [8, 16, 1] and prg.global_size == [2, 1, 1]
    R.verify(k, *R.random_inputs(k))


def test_group_reduces_through_local_memory_and_a_barrier():
    k = _opt(Kernel(*sum_ast((64, 256), (1,))), "GROUPTOP:0:16")
    src = R.render(k).src
    assert "__local float temp[" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src and "if (lidx1==0)" in src
    R.verify(k, *R.random_inputs(k))


def test_nolocals_and_targets_without_locals_leave_the_local_size_to_the_device():
    k = _opt(Kernel(*elementwise_ast(1024)), "NOLOCALS")
    assert R.render(k).local_size is None and "get_global_id" in R.render(k).src
    k = Kernel(*elementwise_ast(1024), opts=TARGETS["clang"])
    k.hand_coded_optimizations()
    assert R.render(k).local_size is None
    R.verify(k, *R.random_inputs(k))


def test_more_than_three_global_dims_are_merged():
    ast = (store(alu(UnaryOps.NEG, load(1, ShapeTracker.from_shape((3, 5, 7, 2)).permute((3, 2, 1, 0))))),)
    k = Kernel(*ast)
    assert k.global_dims == 4
    assert R.render(k).global_size == [3 * 5, 7, 2]  # reversed: the last two dims share launch dim 0
    R.verify(k, *R.random_inputs(k))


def test_fit_dims_merges_surplus_dims_and_splits_large_ones():
    assert R.fit_dims([2, 3, 4, 5], [100, 100, 100], reverse=False) == [[(0, 2), (1, 3)], [(2, 4)], [(3, 5)]]
    assert R.fit_dims([2, 3], [8, 8, 8], reverse=True) == [[(1, 3)], [(0, 2)]]
    assert R.fit_dims([64], [16, 16, 16], reverse=False) == [[(0, 16)], [(0, 4)]]
    with pytest.raises(ValueError, match="doesn't fit"):
        R.fit_dims([17], [16, 16, 16], reverse=False)


def test_local_dims_beyond_the_device_run_as_loops():
    k = _opt(Kernel(*sum_ast((2048, 64), (1,))), "GROUPTOP:0:16", "LOCAL:0:16", "LOCAL:0:8")
    prg = R.render(k, limits=(256, [256, 256, 256]))
    assert prg.local_size == [8, 16, 1] and "for (int lidx" in prg.src
    R.verify(k, *R.random_inputs(k))


def test_masked_loads_never_read_outside_the_buffer():
    st = ShapeTracker.from_shape((30,)).pad(((2, 4),))  # 2 + 30 + 4: padding on both sides reads as 0
    k = Kernel(store(alu(BinaryOps.ADD, load(1, st), const(1.0, (36,)))))
    src = R.render(k).src
    assert "?data1[" in src and ":0.0f)" in src
    (out,) = R.run(k, np.arange(30, dtype=np.float32))
    np.testing.assert_array_equal(out, np.concatenate([[1, 1], np.arange(30) + 1, [1] * 4]).astype(np.float32))


def test_several_outputs():
    st = ShapeTracker.from_shape((256,))
    a, b = load(2, st), load(3, st)
    k = Kernel(store(alu(BinaryOps.ADD, a, b), 0), store(alu(BinaryOps.MUL, a, b), 1))
    k.hand_coded_optimizations()
    x, y = R.random_inputs(k)
    s, p = R.run(k, x, y)
    np.testing.assert_allclose(s, x + y)
    np.testing.assert_allclose(p, x * y)


def test_a_buffer_read_and_written_is_updated_in_place():
    st = ShapeTracker.from_shape((16,))
    k = Kernel(store(alu(BinaryOps.MUL, load(0, st), const(2.0, (16,)))))  # x *= 2, like tinygrad's assign
    x = np.arange(16, dtype=np.float32)
    (out,) = R.run(k, x)
    np.testing.assert_array_equal(out, 2 * x)
    assert x[1] == 1  # the caller's array is not touched
    R.verify(k, x)


def test_image_buffers_go_through_image2d_t():
    k = Kernel(*image_matvec_ast(256, 64))
    k.hand_coded_optimizations()
    src = R.render(k).src
    assert "write_only image2d_t data0" in src and "write_imagef(data0, (int2)(" in src
    R.verify(k, *R.random_inputs(k))
    k = Kernel(*image_matvec_ast(256, 64))  # without opts no float4 store: this output is written as a plain buffer
    assert "image2d_t" not in R.render(k).src
    R.verify(k, *R.random_inputs(k))
    half_image = load(1, ShapeTracker.from_shape((256,)), dtypes.imageh((4, 16, 4)))  # a half image, read as float
    k = Kernel(store(alu(BinaryOps.MUL, half_image, const(2.0, (256,)))))
    (x,) = R.random_inputs(k)
    assert x.shape == (4, 16, 4) and x.dtype == np.float16 and "read_imagef(data1, smp" in R.render(k).src
    R.verify(k, x)


def test_half_is_stored_as_half_and_computed_as_float():
    k = Kernel(*matmul_ast(32, 32, 32, dtypes.half))
    k.hand_coded_optimizations()
    src = R.render(k).src
    assert "vload_half" in src and "vstore_half" in src and "cl_khr_fp16" not in src
    R.verify(k, *R.random_inputs(k))


def _int_kernel(op, *srcs_dtype):
    st = ShapeTracker.from_shape((8,))
    loads = [load(i + 1, st, dt) for i, dt in enumerate(srcs_dtype)]
    return Kernel(store(alu(op, *loads)))


def test_ops_have_tinygrads_meaning():
    a = np.array([7, -7, 7, -7, 0, 5, -1, 100], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5, 3, 7], np.int32)
    (q,) = R.run(_int_kernel(BinaryOps.IDIV, dtypes.int, dtypes.int), a, b)
    np.testing.assert_array_equal(q, [3, -3, -3, 3, 0, 1, 0, 14])  # truncates toward zero, like C
    (m,) = R.run(_int_kernel(BinaryOps.MOD, dtypes.int, dtypes.int), a, b)
    np.testing.assert_array_equal(m, [1, -1, 1, -1, 0, 0, -1, 2])  # takes the dividend's sign, like C
    (lt,) = R.run(_int_kernel(BinaryOps.CMPLT, dtypes.int, dtypes.int), a, b)
    assert lt.dtype == np.bool_ and list(lt) == list(a < b)
    for k, inputs in [
        (_int_kernel(BinaryOps.IDIV, dtypes.int, dtypes.int), (a, b)),
        (_int_kernel(BinaryOps.MOD, dtypes.int, dtypes.int), (a, b)),
        (_int_kernel(TernaryOps.WHERE, dtypes.bool, dtypes.int, dtypes.int), (a > 0, a, b)),
    ]:
        R.verify(k, *inputs)
        np.testing.assert_array_equal(R.run(k, *inputs)[0], R.reference(k, *inputs)[0])


@pytest.mark.parametrize(
    "op", [UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SQRT, UnaryOps.RECIP, UnaryOps.SIN, UnaryOps.NEG]
)
def test_unary_float_ops(op):
    k = _int_kernel(op, dtypes.float)
    x = np.linspace(0.1, 4, 8, dtype=np.float32)
    R.verify(k, x)
    np.testing.assert_allclose(
        R.reference(k, x)[0],
        {
            UnaryOps.EXP2: np.exp2,
            UnaryOps.LOG2: np.log2,
            UnaryOps.SQRT: np.sqrt,
            UnaryOps.RECIP: np.reciprocal,
            UnaryOps.SIN: np.sin,
            UnaryOps.NEG: np.negative,
        }[op](x),
        rtol=1e-6,
    )


def test_max_reduce_starts_at_minus_infinity():
    k = Kernel(store(reduce(ReduceOps.MAX, load(1, ShapeTracker.from_shape((16, 16))), (1,))))
    k.hand_coded_optimizations()
    x = -np.random.default_rng(0).random((16, 16), dtype=np.float32) - 1  # all negative: a 0 start would win
    R.verify(k, x)
    np.testing.assert_allclose(R.run(k, x)[0], x.max(1))


def test_max_with_a_nan_gives_nan_as_numpy_does():
    """OpenCL leaves max() of a NaN undefined (devices return the other operand): the kernel takes numpy's maximum,
    where a NaN wins, and so does the reference (test_numerics.py tests every path)."""
    st = ShapeTracker.from_shape((8, 16))
    relu_sqrt = alu(BinaryOps.MAX, alu(UnaryOps.SQRT, load(1, st)), const(0.0, (8, 16)))
    k = Kernel(store(reduce(ReduceOps.MAX, relu_sqrt, (1,))))
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)  # negatives: sqrt gives NaN
    (ref,) = R.reference(k, x)
    with np.errstate(invalid="ignore"):
        want = np.maximum(np.sqrt(x), 0).max(1)
    assert np.isnan(want).all()  # every row has a negative
    np.testing.assert_allclose(ref, want, rtol=1e-6)
    R.verify(k, x)


def test_casts_and_bitcasts():
    st = ShapeTracker.from_shape((16,))
    x = np.linspace(-3.7, 3.7, 16, dtype=np.float32)
    k = Kernel(store(alu(UnaryOps.CAST, load(1, st), arg=dtypes.int)))
    np.testing.assert_array_equal(R.run(k, x)[0], x.astype(np.int32))
    k = Kernel(store(alu(UnaryOps.BITCAST, load(1, st), arg=dtypes.int)))
    np.testing.assert_array_equal(R.run(k, x)[0], x.view(np.int32))
    R.verify(k, x)


def test_tensor_core_kernels_render_as_plain_multiply_adds():
    k = Kernel(*matmul_ast(64, 64, 64), opts=TARGETS["metal"])
    assert k.apply_tensor_cores(1) and k.tensor_core is not None
    assert "WMMA" not in R.render(k).src and "__builtin" not in R.render(k).src
    R.verify(k, *R.random_inputs(k))


# -- the reference ------------------------------------------------------------------------------------------------
def test_reference_agrees_with_numpy_on_classic_kernels():
    rng = np.random.default_rng(0)
    a, b = rng.random((48, 32), dtype=np.float32), rng.random((32, 40), dtype=np.float32)
    np.testing.assert_allclose(R.reference(matmul_ast(48, 40, 32), a, b)[0].reshape(48, 40), a @ b, rtol=1e-5)
    x = rng.random(32, dtype=np.float32)
    np.testing.assert_allclose(R.reference(matvec_ast(48, 32), a, x)[0], a @ x, rtol=1e-5)
    img, wt = rng.random((2, 3, 9, 9), dtype=np.float32), rng.random((4, 3, 3, 3), dtype=np.float32)
    out = R.reference(conv2d_ast(2, 3, 9, 9, 4, 3, 1, 1), img, wt)[0].reshape(2, 4, 9, 9)
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.einsum("bcyxij,ocij->boyx", np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3)), wt)
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_reference_chunks_never_cut_a_reduce_and_give_the_same_answer():
    boxes = R._chunks((64, 32, 16), {1}, limit=1000)
    assert len(boxes) > 1 and all(box[1] == (0, 32) for box in boxes)
    assert sum(np.prod([hi - lo for lo, hi in box]) for box in boxes) == 64 * 32 * 16
    ast = matmul_ast(64, 16, 32)
    inputs = R.random_inputs(ast)
    data = {1: np.append(inputs[0].reshape(-1), 0), 2: np.append(inputs[1].reshape(-1), 0)}
    small, whole = np.full(64 * 16, np.nan, np.float32), np.full(64 * 16, np.nan, np.float32)
    R._Reference(ast, data).run({0: small}, limit=100)
    R._Reference(ast, data).run({0: whole})
    np.testing.assert_allclose(small, whole, rtol=1e-6)


def test_verify_reports_kernel_opts_error_and_where(monkeypatch):
    k = _opt(Kernel(*elementwise_ast(64)), "UPCAST:0:4")
    x, y = R.random_inputs(k)
    bad_src = R.render(k).src.replace("+", "-", 1)  # a wrong program: the first add becomes a subtract ...
    real = R.render
    monkeypatch.setattr(R, "render", lambda k, limits=None: R.Program(**{**vars(real(k, limits)), "src": bad_src}))
    with pytest.raises(R.VerificationError, match=r"E_16_4 with opts \['UPCAST:0:4'\].*max error .* at index"):
        R.verify(k, x, y)


def test_unwritten_outputs_stay_poisoned_and_fail():
    k = Kernel(*elementwise_ast(16))
    (out,) = R.reference(k, *R.random_inputs(k))
    assert not np.isnan(out).any()
    poisoned = R._poisoned(R.buffers(k.ast)[0])
    assert np.isnan(poisoned).all()
    assert R._poisoned(R.BufferInfo(0, dtypes.bool, 4, True, False)).view(np.uint8).tolist() == [0xAB] * 4


# -- bad inputs, build failures, no device ------------------------------------------------------------------------
def test_bad_inputs_name_the_buffer():
    k = Kernel(*elementwise_ast(64))
    x = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match=r"expected 2 input arrays \(data1, data2\), got 1"):
        R.run(k, x)
    with pytest.raises(ValueError, match="input data2 has 10 elements, the kernel reads 64"):
        R.run(k, x, x[:10])
    with pytest.raises(ValueError, match="input data1 has dtype float64, expected float32"):
        R.reference(k, x.astype(np.float64), x)
    with pytest.raises(ValueError, match="input data2 must be a numpy array"):
        R.verify(k, x, list(x))
    k = Kernel(*image_matvec_ast(256, 64))
    with pytest.raises(ValueError, match=r"expected 2 input arrays"):
        R.run(k)


def test_build_failure_shows_numbered_source_and_log():
    with pytest.raises(R.BuildError) as e:
        R.build("__kernel void broken(__global float* data0) {\n  data0[0] = undefined_thing;\n}\n", "broken")
    assert "   2    data0[0] = undefined_thing;" in str(e.value) and "undefined_thing" in str(e.value).split("log")[-1]


def test_programs_are_cached_by_source():
    prg = R.render(Kernel(*elementwise_ast(32)))
    assert R.build(prg.src, prg.name) is R.build(prg.src, prg.name)


@pytest.mark.parametrize("fake", ["no platforms", "platform error"])
def test_no_opencl_platform_says_how_to_install_pocl(monkeypatch, fake):
    def get_platforms():
        if fake == "no platforms":
            return []
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(R, "_device", None)
    monkeypatch.setattr(cl, "get_platforms", get_platforms)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    with pytest.raises(R.NoDeviceError, match=r'pip install "pyopencl\[pocl\]"'):
        R.run(Kernel(*elementwise_ast(8)), np.zeros(8, np.float32), np.zeros(8, np.float32))


def test_time_kernel_is_positive_and_small():
    k = Kernel(*elementwise_ast(4096))
    k.hand_coded_optimizations()
    assert 0 < R.time_kernel(k, *R.random_inputs(k), runs=3) < 1


# -- command line -------------------------------------------------------------------------------------------------
def test_cli_show_and_verify(capsys):
    assert R.main(["show", "sum_axis1", "--opt", "GROUPTOP:0:16", "--opt", "UPCAST:9:4"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"UPCAST:9:4 +rejected", out) and "__kernel void r_" in out
    assert "work-groups of [16, 1, 1] threads" in out
    assert R.main(["verify", "broadcast", "--seed", "1"]) == 0
    assert "1 kernel verified, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["show", "verify", "bench"])
def test_cli_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        R.main([command, "--help"])
    assert e.value.code == 0 and "usage: python runtime.py" in capsys.readouterr().out
