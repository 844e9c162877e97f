"""Tests of runtime.py: every kernel the optimizer can produce renders to OpenCL C that computes what its AST means.

The golden corpus (testdata/kernels.json, kernels tinygrad 0.9.1 really produced) is run on the device after the
heuristics (or tensor cores) and after every accepted step of its random opt sequences, then compared with the numpy
reference; each distinct program is launched once. Kernels whose iteration space is larger than 2**22 elements run
by default cut down to a corner of the same AST (smaller_kernel), and at full size with RUNTIME_LARGE=1 (minutes on
2 cores); the default run covers every OptOp, every target, images, masks, GROUP, every tensor-core kernel and the
half matmuls (tests below check that). On the second and later devices of a run over every device (conftest.py)
both replays verify a sample that holds each kind of kernel (target, tensor cores, image, mask, GROUP): about a
third, every OptOp still (RUNTIME_ALL_DEVICES=1: all of them). verify itself is tested too: every output, its
tolerance, what a store skips. The fuzzer of random ASTs and opts is test_fuzz.py; the command line is test_cli.py's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
import time
from collections import OrderedDict

import numpy as np
import pyopencl as cl
import pytest

import kernel
import render
import runtime as R
from corpus import build_kernel, case_id, lazyop_from_json, load_corpus
from tests.common import copy_ast
from tests.golden import accepted_kernels
from kernel import TARGETS, BinaryOps, BufferOps, Kernel, LazyOp, Opt, OptOps, ReduceOps, ShapeTracker, TernaryOps
from kernel import UnaryOps, dtypes
from demo import alu, const, load
from demo import conv2d_ast, elementwise_ast, image_matvec_ast, matmul_ast
from kernel import prod
from demo import reduce, store
from demo import matvec_ast, sum_ast

CASES = load_corpus("kernels.json")["cases"]
LARGE = 1 << 22  # iteration spaces above this many elements are verified only with RUNTIME_LARGE=1


pytestmark = pytest.mark.usefixtures("device")  # conftest.py: skipped, saying why, without an OpenCL device


# -- the golden corpus --------------------------------------------------------------------------------------------


def _size(case) -> int:
    return int(np.prod(case["init"]["full_shape"]))


def _verify_each_program(kernels, inputs, expected) -> int:
    """Verify each kernel whose program (source and launch sizes) wasn't verified already: kernels of one AST that
    render to the same program compute the same thing, and a launch of it tells nothing new. Returns how many ran."""
    seen = set()
    for k in kernels:
        prg = R.render(k, R.device_limits())
        if (key := (prg.src, tuple(prg.global_size), tuple(prg.local_size or ()))) not in seen:
            seen.add(key)
            R.verify(k, *inputs, expected=expected)
    return len(seen)


def _golden_params():
    for c in CASES:
        marks = (
            []
            if _size(c) <= LARGE or os.environ.get("RUNTIME_LARGE")
            else [pytest.mark.skip(reason=f"{_size(c)} elements: set RUNTIME_LARGE=1 to verify large kernels")]
        )
        yield pytest.param(c, id=case_id(c), marks=marks)


def _kind(case) -> tuple:
    """What kind of kernel a case is: its target, whether its tensor cores are used, whether it reads an image or
    through a mask, whether its heuristics group a reduce."""
    text = json.dumps(case["ast"])
    tc = bool(case.get("tensor_cores", {}).get("used"))
    return case["target"], tc, "image" in text, '"mask": [[' in text, "green" in case["hand_coded"]["colors"]


def later_device_sample(cases: list, every: int = 4) -> set[str]:
    """The ids of the cases a later device verifies: of each kind, the first case and every `every`-th after it."""
    seen: dict[tuple, int] = {}
    sample = set()
    for c in cases:
        n = seen[_kind(c)] = seen.get(_kind(c), -1) + 1
        if n % every == 0:
            sample.add(case_id(c))
    return sample


def _skip_unless_sampled(case, later_device: bool, sample: set[str]) -> None:
    if later_device and case_id(case) not in sample:
        pytest.skip("verified on the first device; a later device verifies a sample of each kind of kernel")


def _optimized(case, k: Kernel) -> Kernel:
    """k after what the corpus recorded for the case: apply_tensor_cores(1) where it has that, else the heuristics."""
    if "tensor_cores" in case:
        assert k.apply_tensor_cores(1) == case["tensor_cores"]["used"]
    else:
        k.hand_coded_optimizations()
    return k


@pytest.mark.corpus
@pytest.mark.parametrize("case", list(_golden_params()))
def test_golden_kernel_verifies_after_heuristics_and_every_accepted_opt(case, later_device):
    _skip_unless_sampled(case, later_device, LATER_DEVICE_SAMPLE)
    k = build_kernel(case)
    inputs = R.random_inputs(k)
    expected = R.reference(k, *inputs)  # once: every kernel below computes the same AST
    _verify_each_program([_optimized(case, k.copy()), *accepted_kernels(case, as_recorded=True)], inputs, expected)


# -- the large kernels, cut down to a smaller size of the same AST -------------------------------------------------
SMALL = 1 << 18  # elements a large case's iteration space is cut down to by default


def _shrunk(x: LazyOp, box: tuple[int, ...]) -> LazyOp:
    """x with every buffer's view shrunk to the box (axes of size 1, reduced or broadcast, stay whole)."""
    arg = x.arg
    if x.op in (BufferOps.LOAD, BufferOps.STORE, BufferOps.CONST):
        arg = dataclasses.replace(
            arg, st=arg.st.shrink(tuple((0, 1) if s == 1 else (0, n) for s, n in zip(arg.st.shape, box)))
        )
    return LazyOp(x.op, tuple(_shrunk(s, box) for s in x.src), arg)


def smaller_kernel(case, limit: int = SMALL) -> Kernel:
    """The case's AST on the corner of its iteration space: at most 64 along each axis, then the largest axis halved
    until the box holds `limit` elements. Every view keeps its strides, masks and stacked views (it reads a window
    of the same buffers and stores through a window of the output), so it is the same AST at a smaller size."""
    ast = [lazyop_from_json(a) for a in case["ast"]]
    shape = max((x.arg.st.shape for root in ast for x in root.lazyops if x.op in BufferOps), key=prod)
    box = [min(s, 64) for s in shape]
    while prod(box) > limit:
        box[box.index(max(box))] //= 2
    return Kernel(*(_shrunk(root, tuple(box)) for root in ast), opts=TARGETS[case["target"]])


LARGE_CASES = [c for c in CASES if _size(c) > LARGE]
LATER_DEVICE_SAMPLE = later_device_sample([c for c in CASES if _size(c) <= LARGE]) | later_device_sample(LARGE_CASES)


@pytest.mark.corpus
@pytest.mark.parametrize("case", LARGE_CASES, ids=[case_id(c) for c in LARGE_CASES])
def test_large_golden_kernel_verifies_at_a_smaller_size(case, later_device):
    """Each large kernel (the 9 whose tensor cores are used among them, the half matmuls, the convs) on a corner of
    its iteration space: after the tensor cores (each still takes them, or not, as recorded) or the heuristics; a
    tensor-core kernel also after the steps of its first opt sequence that still apply at this size. RUNTIME_LARGE=1
    verifies them all at full size, after every accepted step."""
    _skip_unless_sampled(case, later_device, LATER_DEVICE_SAMPLE)
    k = smaller_kernel(case)
    assert prod(k.full_shape) <= SMALL < _size(case)
    inputs = R.random_inputs(k)
    expected = R.reference(k, *inputs)
    first = {**case, "sequences": case["sequences"][:1] if case.get("tensor_cores", {}).get("used") else []}
    _verify_each_program([_optimized(case, k.copy()), *accepted_kernels(first, start=k)], inputs, expected)


@pytest.mark.corpus
def test_smaller_kernel_is_the_same_computation_on_a_corner():
    """The cut-down A.T @ B of 256s is the top-left 16x16 block of a 16-long product, read out of buffers laid out
    as the full-size ones are (rows 256 apart)."""
    case = next(c for c in LARGE_CASES if c["name"] == "matmul_AT_B_256" and c["target"] == "opencl")
    k = smaller_kernel(case, limit=16**3)
    assert k.full_shape == (16, 16, 16)

    def rows(x):  # a buffer of rows 256 apart, as a (16, 256) array
        return np.append(x, np.zeros(16 * 256 - x.size, x.dtype)).reshape(16, 256)

    a_t, b = R.random_inputs(k)  # A stored transposed: A.T[kk, i]; B[kk, j]
    (out,) = R.reference(k, a_t, b)
    np.testing.assert_allclose(rows(out)[:, :16], rows(a_t)[:, :16].T @ rows(b)[:, :16], rtol=1e-5)
    R.verify(k, a_t, b)


@pytest.mark.corpus
@pytest.mark.parametrize("run", ["first device", "later devices"])
def test_default_golden_run_covers_every_optop_target_image_mask_and_group(run):
    small = [c for c in CASES if _size(c) <= LARGE and (run == "first device" or case_id(c) in LATER_DEVICE_SAMPLE)]
    ops = {s["opt"][0] for c in small for seq in c["sequences"] for s in seq if s["ok"]}
    ops |= {o[0] for c in small for o in c.get("tensor_cores", {}).get("applied_opts", [])}
    assert ops == {o.name for o in OptOps}
    assert {c["target"] for c in small} == set(TARGETS)
    assert any("image" in json.dumps(c["ast"]) for c in small)
    assert any('"mask": [[' in json.dumps(c["ast"]) for c in small)
    assert any("green" in c["hand_coded"]["colors"] for c in small)


@pytest.mark.corpus
def test_every_tensor_core_kernel_of_the_corpus_runs_by_default():
    """The 13 golden kernels whose tensor cores are used: 4 at full size, the 9 large ones cut down (above)."""
    used = [c for c in CASES if c.get("tensor_cores", {}).get("used")]
    assert len(used) == 13 and sum(_size(c) > LARGE for c in used) == 9
    assert all(c in LARGE_CASES for c in used if _size(c) > LARGE)
    assert any("half" in json.dumps(c["ast"]) for c in used if _size(c) > LARGE)
    sampled = [c for c in used if case_id(c) in LATER_DEVICE_SAMPLE]  # a later device's: full size, cut down, half
    assert any(_size(c) <= LARGE for c in sampled) and any("half" in json.dumps(c["ast"]) for c in sampled)


# -- what each colour becomes -------------------------------------------------------------------------------------
def _opt(k: Kernel, *opts: str) -> Kernel:
    for o in opts:
        k.apply_opt(Opt.parse(o))
    return k


def test_the_kernel_name_is_tinygrads():
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


def test_a_vector_that_would_start_off_its_alignment_stays_scalar():
    """out[i] = a[i + 1] with UPCAST:0:4: each thread's four elements of `a` start at 4*gidx0 + 1, not a multiple of
    4, so they are four scalar loads (a float4 load there is misaligned: the process segfaulted); the output's start,
    4*gidx0, is one float4 store. Only a start that is a multiple of the width at every value is one."""
    a = load(1, ShapeTracker.from_shape((65,)).shrink(((1, 65),)))
    k = _opt(Kernel(store(a)), "UPCAST:0:4")
    src = R.render(k).src  # (checked before anything runs)
    assert "float4*)(data1" not in src and src.count("data1[") == 4, src
    assert "*((__global float4*)(data0+(gidx0*4))) = (float4)(" in src, src
    R.verify(k, np.arange(65, dtype=np.float32))
    g = kernel.Variable("g", 0, 15)
    assert [render.is_vector_start(x, 4) for x in (g * 4, g * 4 + 1, g * 4 + 4, g * 2)] == [True, False, True, False]


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


def test_a_target_without_a_local_limit_renders_and_runs(device):
    import dataclasses

    unlimited = dataclasses.replace(kernel.TARGETS["opencl"], local_max=None)  # None: no limit, as global_max
    k = Kernel(*matmul_ast(32, 32, 32), opts=unlimited)
    k.apply_opt(Opt(OptOps.LOCAL, 0, 8))
    a, b = R.random_inputs(k)
    R.verify(k, a, b)
    assert "get_local_id" in R.render(k).src


def test_more_than_three_global_dims_are_merged():
    ast = (store(alu(UnaryOps.NEG, load(1, ShapeTracker.from_shape((3, 5, 7, 2)).permute((3, 2, 1, 0))))),)
    k = Kernel(*ast)
    assert k.global_dims == 4
    assert R.render(k).global_size == [3 * 5, 7, 2]  # reversed: the last two dims share launch dim 0
    R.verify(k, *R.random_inputs(k))


def test_fit_dims_merges_surplus_dims_and_splits_large_ones():
    assert render.fit_dims([2, 3, 4, 5], [100, 100, 100], reverse=False) == [[(0, 2), (1, 3)], [(2, 4)], [(3, 5)]]
    assert render.fit_dims([2, 3], [8, 8, 8], reverse=True) == [[(1, 3)], [(0, 2)]]
    assert render.fit_dims([64], [16, 16, 16], reverse=False) == [[(0, 16)], [(0, 4)]]
    with pytest.raises(ValueError, match="doesn't fit"):
        render.fit_dims([17], [16, 16, 16], reverse=False)


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


def _launch_with_a_red_zone(k: Kernel, inputs, device, extra: int = 64) -> tuple[np.ndarray, int]:
    """Launch k's program with its output buffer (data0) followed by `extra` sentinel elements, and return that
    whole buffer: a store outside the output's elements lands in the red zone. (run() allocates exactly the
    output, so a stray store there goes unseen, or crashes.)"""
    launch = R.Launch(k, inputs)
    size = launch.infos[0].size
    host = np.full(size + extra, -7.0, np.float32)
    buf = cl.Buffer(device.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    launch.args[[idx for idx, _ in launch.prg.args].index(0)] = buf
    launch.launch()
    cl.enqueue_copy(device.queue, host, buf)
    device.queue.finish()
    return host, size


@pytest.mark.parametrize("opts", [["PADTO:0:32"], ["PADTO:0:32", "UPCAST:0:4"], ["PADTO:0:32", "LOCAL:0:8"]])
def test_padded_outputs_are_not_stored(device, opts):
    """17 outputs padded to 32: the threads (or registers) of outputs 17..31 compute padding, and the store's guard
    keeps them from writing it past the end of the output."""
    k = _opt(Kernel(*elementwise_ast(17)), *opts)
    assert k.sts[0].axis_is_masked(0)
    x, y = R.random_inputs(k)
    out, size = _launch_with_a_red_zone(k, [x, y], device)
    assert size == 17
    np.testing.assert_array_equal(out[17:], -7.0)  # nothing stored outside the 17 outputs
    np.testing.assert_allclose(out[:17], x + y, rtol=1e-6)


def test_mod_of_a_mod_reaches_the_rendered_kernel():
    """A buffer read through three views: a (4, 2) buffer transposed, flattened and repeated 4 times. The index of
    element i unravels (i % 8) into the (2, 4) view below, which takes (i % 8) % 4: the algebra writes i % 4."""
    st = ShapeTracker.from_shape((4, 2)).permute((1, 0)).reshape((1, 8)).expand((4, 8)).reshape((32,))
    assert len(st.views) == 3
    k = Kernel(store(alu(BinaryOps.ADD, load(1, st), load(2, ShapeTracker.from_shape((32,))))))
    src = R.render(k).src
    index = next(line for line in src.splitlines() if line.strip().startswith("int idx0"))
    assert "%4" in index and "%8" not in index, index
    x, y = R.random_inputs(k)
    (out,) = R.run(k, x, y)
    i = np.arange(32)
    np.testing.assert_allclose(out, x.reshape(4, 2).T.reshape(-1)[i % 8] + y, rtol=1e-6)  # numpy's own movement ops


@pytest.mark.parametrize("op", [BinaryOps.ADD, BinaryOps.CMPLT], ids=["float", "bool"])
def test_a_store_through_a_strided_view_verifies(op):
    """The output is the left half of a (4, 8) buffer: the right half is never written and keeps its poison, in the
    launch with the second poison too (verify's second launch once compared it with the first poison and failed)."""
    st = ShapeTracker.from_shape((4, 4))
    k = Kernel(store(alu(op, load(1, st), load(2, st)), st=ShapeTracker.from_shape((4, 8)).shrink(((0, 4), (0, 4)))))
    x, y = R.random_inputs(k)
    (out,) = R.run(k, x, y)
    np.testing.assert_array_equal(
        np.append(out, out[:4]).reshape(4, 8)[:, :4],
        {BinaryOps.ADD: np.add, BinaryOps.CMPLT: np.less}[op](x, y).reshape(4, 4),
    )
    R.verify(k, x, y)


def test_a_kernel_with_several_outputs_stores_each():
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


@pytest.mark.parametrize("shape", [(0, 4, 4), (4, 0, 4)], ids=str)
def test_an_image_without_pixels_runs_as_a_plain_buffer_does(shape, device):
    """An image input with no pixels: the kernel over its shape, a sum over its empty axis, a view of it that is
    all padding run as the same kernels on a plain buffer do (not IndexError, nor 'modulo by 0'); a view that reaches
    beyond an image's pixels is a ValueError naming it."""
    x = np.zeros(shape, np.float32)
    views = [(ShapeTracker.from_shape(shape), None), (ShapeTracker.from_shape(shape), (1,))]
    views.append((ShapeTracker.from_shape((0,)).pad(((0, 8),)), None))
    outs: dict = {}
    for dt, data in ((dtypes.imagef(shape), x), (dtypes.float, x.reshape(-1))):
        for st, axes in views:
            value = alu(BinaryOps.ADD, load(1, st, dt), const(1.0, st.shape))
            k = Kernel(store(value if axes is None else reduce(ReduceOps.SUM, value, axes), dtype=dtypes.float))
            k.hand_coded_optimizations()
            R.verify(k, data)
            outs.setdefault(dt, []).append(R.run(k, data)[0].tolist())
    assert outs[dtypes.imagef(shape)] == outs[dtypes.float]
    assert [len(out) for out in outs[dtypes.float]] == [0, 0 if shape[0] == 0 else 16, 8]
    beyond = Kernel(store(load(1, ShapeTracker.from_shape((64,)), dtypes.imagef((4, 2, 4))), dtype=dtypes.float))
    with pytest.raises(
        ValueError, match=re.escape("a view of data1 reaches element 63, beyond its image dtypes.imagef")
    ):
        R.reference(beyond, np.zeros((4, 2, 4), np.float32))


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
def test_unary_float_ops_compute_numpys_functions(op):
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


def test_a_cast_converts_the_value_and_a_bitcast_keeps_the_bits():
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


def test_a_sum_of_products_is_summed_by_einsum_in_float64_and_where_a_product_overflows_each_is_a_float32(monkeypatch):
    """The reference sums a SUM of float32 products with numpy's einsum, in float64 (where each such product is exact),
    its products never made one by one; an axis of the sum that neither factor moves along counts each term that many
    times. Where a factor isn't finite, or a product may pass the largest float32, it makes each product as a float32,
    as the device does: +inf and -inf products give NaN, never the 0 of exact arithmetic. Expected values: here."""
    contracted = []
    contraction = R._Reference.contraction
    monkeypatch.setattr(R._Reference, "contraction", lambda *a: contracted.append(r := contraction(*a)) or r)
    rng = np.random.default_rng(0)
    a, b = rng.integers(-50, 50, (6, 8)).astype(np.float32), rng.integers(-50, 50, (8, 5)).astype(np.float32)
    got = R.reference(matmul_ast(6, 5, 8), a, b)[0].reshape(6, 5)
    assert contracted and contracted[-1] is not None
    np.testing.assert_array_equal(got, a.astype(np.float64) @ b)  # small integers: exact either way
    st = ShapeTracker.from_shape((4, 1)).expand((4, 3))  # x[i] * y[i], summed over 3 copies of each
    k = Kernel(store(reduce(ReduceOps.SUM, alu(BinaryOps.MUL, load(1, st), load(2, st)), (1,))))
    x, y = np.array([1.5, -2, 0.25, 7], np.float32), np.array([2, 3, -4, 0.5], np.float32)
    np.testing.assert_array_equal(R.reference(k, x, y)[0].reshape(-1), 3 * x * y)
    rows = ShapeTracker.from_shape((4, 2))
    k = Kernel(store(reduce(ReduceOps.SUM, alu(BinaryOps.MUL, load(1, rows), load(2, rows)), (1,))))
    x = np.array([[np.inf, 1], [0, 1], [np.nan, 2], [1, 2]], np.float32)
    y = np.array([[1, 1], [np.inf, 1], [1, 1], [3, 4]], np.float32)
    np.testing.assert_array_equal(R.reference(k, x, y)[0].reshape(-1), [np.inf, np.nan, np.nan, 11])
    assert contracted[-1] is None  # not finite: each product made
    x, y = np.full((4, 2), 1e20, np.float32), np.array([[1e20, -1e20]] * 4, np.float32)
    assert np.isnan(R.reference(k, x, y)[0]).all() and contracted[-1] is None  # inf + -inf, as the device's products


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


def test_reference_reads_a_load_the_boxes_do_not_move_once(monkeypatch):
    """Boxes cut matmul's rows (axis 0): b's part, (1, 16, 32), is the same in each box and is read once; a's rows
    are read per box (4 boxes of 16 rows). The answer is the one-box answer."""
    ast = matmul_ast(64, 16, 32)
    inputs = R.random_inputs(ast)
    data = {1: np.append(inputs[0].reshape(-1), 0), 2: np.append(inputs[1].reshape(-1), 0)}
    read, real_strided = [], R._strided  # a load's part is read here, as a numpy view (one view, no mask)

    def strided(flat, st, writes=False):
        read.extend([] if writes else [st.shape])
        return real_strided(flat, st, writes)

    monkeypatch.setattr(R, "_strided", strided)
    boxes, whole = np.full(64 * 16, np.nan, np.float32), np.full(64 * 16, np.nan, np.float32)
    R._Reference(ast, data).run({0: boxes}, limit=64 * 16 * 32 // 4)
    assert read.count((1, 16, 32)) == 1 and read.count((16, 1, 32)) == 4
    R._Reference(ast, data).run({0: whole})
    np.testing.assert_array_equal(boxes, whole)


@pytest.mark.parametrize(
    "name, corpus",
    [("conv2d_pad1_2x16x28x28_k3x32", "kernels.json"), ("mr_mean_var_64x1024", "multireduce_recorded.json.gz")],
)
def test_reference_in_chunks_on_a_real_kernel(monkeypatch, name, corpus):
    """The reference cuts a large iteration space into boxes (beyond 2**22 elements; here beyond 256, fewer than
    one reduce of mean and variance, so no box may cut it): on a padded conv (two stacked views, masks) and on mean
    and variance (two outputs, two reduces) the boxes give the outputs one box gives, and the device agrees."""
    case = next(c for c in load_corpus(corpus)["cases"] if c["name"] == name and c["target"] == "opencl")
    k = smaller_kernel(case) if _size(case) > LARGE else build_kernel(case)
    inputs = R.random_inputs(k)
    whole = R.reference(k, *inputs)
    boxes, real_chunks, real_run = [], R._chunks, R._Reference.run
    monkeypatch.setattr(R, "_chunks", lambda *a, **kw: boxes.append(real_chunks(*a, **kw)) or boxes[-1])
    monkeypatch.setattr(R._Reference, "run", lambda self, outputs, limit=0: real_run(self, outputs, limit=256))
    chunked = R.reference(k, *inputs)
    assert len(boxes) == 1 and len(boxes[0]) > 8
    for got, want in zip(chunked, whole, strict=True):
        np.testing.assert_array_equal(got, want)
    k.hand_coded_optimizations()
    R.verify(k, *inputs, expected=chunked)


def test_verify_reports_kernel_opts_error_and_where(monkeypatch):
    k = _opt(Kernel(*elementwise_ast(64)), "UPCAST:0:4")
    x, y = R.random_inputs(k)
    bad_src = R.render(k).src.replace("+", "-", 1)  # a wrong program: the first add becomes a subtract ...
    real = R.render
    monkeypatch.setattr(R, "render", lambda k, limits=None: R.Program(**{**vars(real(k, limits)), "src": bad_src}))
    with pytest.raises(R.VerificationError, match=r"E_16_4 with opts \['UPCAST:0:4'\].*max error .* at index"):
        R.verify(k, x, y)


def _wrong_on_the_device(monkeypatch, output: int, at: int, error):
    """Make run() return output `output` with element `at` set to the reference plus error(reference value): a
    kernel that is wrong in exactly one place, to see whether verify notices."""
    real_run = R.run

    def run(k, *inputs, **kwargs):
        outs = [o.copy() for o in real_run(k, *inputs, **kwargs)]
        want = R.reference(k, *inputs, var_vals=kwargs.get("var_vals")).pop(output).reshape(-1)
        outs[output].reshape(-1)[at] = want[at] + error(float(want[at]))
        return outs

    monkeypatch.setattr(R, "run", run)


def test_verify_checks_every_output(monkeypatch):
    """Two outputs, a + b and a * b; only the second is wrong, in one element: verify fails and names data1."""
    st = ShapeTracker.from_shape((64,))
    a, b = load(2, st), load(3, st)
    k = Kernel(store(alu(BinaryOps.ADD, a, b), 0), store(alu(BinaryOps.MUL, a, b), 1))
    inputs = R.random_inputs(k)
    R.verify(k, *inputs)
    _wrong_on_the_device(monkeypatch, 1, 37, lambda want: 1.0)
    with pytest.raises(R.VerificationError, match=r"output data1 differs in 1 of 64 elements.* at index 37"):
        R.verify(k, *inputs)


# the tolerance verify promises, written out here rather than read from runtime.py: an element may differ from the
# reference by rtol * |reference| + atol, rtol 1e-3 for float32 math and 2e-2 where half is involved, and atol =
# rtol * sqrt(n) for a reduce of n terms (rtol without a reduce)
TOLERANCE_CASES = [
    ("float32 add", elementwise_ast(256), 1e-3, 1e-3),
    (
        "half add",
        (store(alu(BinaryOps.ADD, *(load(i, ShapeTracker.from_shape((256,)), dtypes.half) for i in (1, 2)))),),
        2e-2,
        2e-2,
    ),
    ("float32 sum of 1024", sum_ast((8, 1024), (1,)), 1e-3, 1e-3 * 32),
]


@pytest.mark.parametrize("ast, rtol, atol", [c[1:] for c in TOLERANCE_CASES], ids=[c[0] for c in TOLERANCE_CASES])
@pytest.mark.parametrize("times, fails", [(10, True), (0.5, False)], ids=["10x-fails", "half-passes"])
def test_verify_tolerance_is_the_dtypes(monkeypatch, ast, rtol, atol, times, fails):
    """An error of ten times the tolerance in one element fails, half of it passes: the tolerance is neither much
    looser nor tighter than promised."""
    k = Kernel(*ast)
    inputs = R.random_inputs(k)
    _wrong_on_the_device(monkeypatch, 0, 3, lambda want: times * (rtol * abs(want) + atol))
    if fails:
        with pytest.raises(R.VerificationError, match="differs in 1 of"):
            R.verify(k, *inputs)
    else:
        R.verify(k, *inputs)


def _skipping_element_5(monkeypatch, k: Kernel) -> None:
    """Make the rendered program of k (an E_16 without opts) forget to store element 5."""
    src = R.render(k).src
    assert "  data0[gidx0] = " in src
    bad = src.replace("  data0[gidx0] = ", "  if (gidx0 != 5) data0[gidx0] = ")
    real = R.render
    monkeypatch.setattr(R, "render", lambda k, limits=None: R.Program(**{**vars(real(k, limits)), "src": bad}))


@pytest.mark.parametrize("dtype", [dtypes.float, dtypes.int, dtypes.bool], ids=lambda d: d.name)
def test_an_element_the_kernel_never_writes_stays_poisoned_and_fails(monkeypatch, dtype):
    """Outputs start poisoned (NaN, the largest int, a byte that is neither True nor False): an element the program
    forgets to store keeps the poison, and verify fails there."""
    st = ShapeTracker.from_shape((16,))
    k = Kernel(store(load(1, st, dtype)))  # out = a copy of the input
    (x,) = R.random_inputs(k)
    _skipping_element_5(monkeypatch, k)
    (out,) = R.run(k, x)
    assert (out.view(np.uint8)[5] == 0xAB) if dtype == dtypes.bool else (out[5] != x[5])
    with pytest.raises(R.VerificationError, match="differs in 1 of 16 elements.* at index 5"):
        R.verify(k, x)


@pytest.mark.parametrize("dtype", [dtypes.int, dtypes.float], ids=lambda d: d.name)
def test_where_the_true_value_is_the_poison_a_second_poison_catches_the_gap(monkeypatch, dtype):
    """A copy whose element 5 is the first poison (the largest int; NaN): unwritten, it would look right. verify
    launches again with the second poison (the smallest int; -1232.0), and that launch shows the gap."""
    k = Kernel(store(load(1, ShapeTracker.from_shape((16,)), dtype)))
    x = np.arange(16, dtype=R.np_dtype(dtype))
    x[5] = np.iinfo(np.int32).max if dtype == dtypes.int else np.nan
    _skipping_element_5(monkeypatch, k)
    assert R.run(k, x)[0].view(np.uint32)[5] == x.view(np.uint32)[5]  # the first poison hides the gap, bit for bit
    second = "-2147483648, expected 2147483647" if dtype == dtypes.int else "-1232.0, expected nan"
    with pytest.raises(R.VerificationError, match=f"at index 5: got {second}"):
        R.verify(k, x)


# ============================================================================================================
# verify compares every element, every output, and sees unwritten elements whatever their value
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
    assert str(e.value).startswith("OpenCL build of broken failed: the compiler refused it\n")


def test_builds_run_one_at_a_time(monkeypatch):
    """Two threads building at once in Intel's CPU runtime sometimes never finished: build() builds alone."""
    running, most, real = [0], [0], R.cl.Program

    class OneAtATime:
        def __init__(self, ctx, src):
            self.program = real(ctx, src)

        def build(self):
            running[0] += 1
            most[0] = max(most[0], running[0])
            time.sleep(0.05)  # long enough for the other thread to start its build, were it allowed
            running[0] -= 1
            return self.program.build()

    monkeypatch.setattr(R.cl, "Program", OneAtATime)
    srcs = [f"__kernel void k{i}(__global float* data0) {{ data0[0] = {i}.0f; /* {id(running)} */ }}" for i in range(4)]
    threads = [threading.Thread(target=R.build, args=(src, f"k{i}")) for i, src in enumerate(srcs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and all(src in R.get_device().programs for src in srcs)


def test_build_loads_what_a_compiler_built_and_says_what_it_refused():
    """The search compiles in other processes: build(src, name, compiler) loads the binary compiler(src, name) returns,
    and a compiler's refusal is a BuildError saying so, with the numbered source, as the device's own is."""
    calls, ctx = [], R.get_device().ctx

    def compiler(src, name):
        calls.append((src, name))
        return R.cl.Program(ctx, src).build().get_info(R.cl.program_info.BINARIES)[0]

    src = f"__kernel void seven(__global float* data0) {{ data0[get_global_id(0)] = 7.0f; /* {time.time()} */ }}"
    kern = R.build(src, "seven", compiler)
    out = R.cl.Buffer(ctx, R.cl.mem_flags.READ_WRITE, 16)
    kern(R.get_device().queue, (4,), None, out).wait()
    got = np.empty(4, np.float32)
    R.cl.enqueue_copy(R.get_device().queue, got, out)
    assert calls == [(src, "seven")] and got.tolist() == [7.0] * 4

    def refusing(src, name):
        raise R.BuildError("the test's compiler refuses this")

    with pytest.raises(R.BuildError) as e:
        R.build(src.replace("seven", "eight"), "eight", refusing)
    assert str(e.value).startswith("OpenCL build of eight failed: the test's compiler refuses this\n")
    assert "   1  __kernel void eight" in str(e.value)
    assert str(e.value).endswith("the test's compiler refuses this")


def test_programs_are_cached_by_source():
    prg = R.render(Kernel(*elementwise_ast(32)))
    assert R.build(prg.src, prg.name) is R.build(prg.src, prg.name)


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


@pytest.mark.parametrize("fake", ["no platforms", "platform error"])
def test_no_opencl_platform_says_how_to_install_a_cpu_device(monkeypatch, fake):
    def get_platforms():
        if fake == "no platforms":
            return []
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(R, "_device", None)
    monkeypatch.setattr(cl, "get_platforms", get_platforms)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.delenv("KERNELPY_DEVICE", raising=False)
    with pytest.raises(R.NoDeviceError, match=r'pip install -e "\.\[cpu\]"'):
        R.run(Kernel(*elementwise_ast(8)), np.zeros(8, np.float32), np.zeros(8, np.float32))


def test_a_device_whose_compiler_fails_is_passed_over(monkeypatch):
    """PoCL's LLVM 14 can't compile for CPUs newer than itself (AMD Zen 5): get_device takes the next device whose
    compiler builds a test kernel, and says so when none does."""
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    monkeypatch.setattr(R, "_device", None)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.delenv("KERNELPY_DEVICE", raising=False)
    monkeypatch.setattr(R, "_probe", lambda d: "" if d.int_ptr == devices[-1].int_ptr else "the test's refusal")
    assert R.get_device().ctx.devices[0].int_ptr == devices[-1].int_ptr
    monkeypatch.setattr(R, "_device", None)
    monkeypatch.setattr(R, "_probe", lambda d: "the test's refusal")
    with pytest.raises(R.NoDeviceError, match=r"\(the test's refusal\).*; none of them compiles a kernel"):
        R.get_device()


def test_the_first_device_use_from_several_threads_makes_one_device_every_thread_runs_on(monkeypatch):
    """Four threads run kernels at once as the process's first device use: one device is made, whole, and every run
    computes numpy's answer (once, three of four failed with INVALID_CONTEXT and the process stayed broken)."""
    monkeypatch.setattr(R, "_device", None)
    kernels = [Kernel(*elementwise_ast(4096)), Kernel(*sum_ast((64, 32), (1,))), Kernel(*matmul_ast(16, 16, 16))]
    kernels.append(Kernel(*matmul_ast(16, 16, 16)))  # two threads run one program too
    inputs = [R.random_inputs(k) for k in kernels]
    start, devices, errors = threading.Barrier(len(kernels)), [], []

    def first_use(k: Kernel, x: list) -> None:
        start.wait()
        try:
            R.verify(k, *x)
            devices.append(R.get_device())
        except Exception as e:  # noqa: BLE001 (the test says which)
            errors.append(e)

    threads = [threading.Thread(target=first_use, args=(k, x)) for k, x in zip(kernels, inputs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(devices) == len(kernels) and all(d is devices[0] for d in devices)
    for k, x in zip(kernels, inputs):  # and afterwards, from this thread
        R.verify(k, *x)


def test_kernelpy_device_chooses_among_every_device_that_compiles_by_index_or_name(monkeypatch):
    everything = [d for p in cl.get_platforms() for d in p.get_devices()]
    working = list(R.working_devices())
    assert {d.int_ptr for d in working} == {d.int_ptr for d in everything if not R._probe(d)}  # each one, once
    monkeypatch.setenv("PYOPENCL_CTX", "97")  # KERNELPY_DEVICE wins
    for choice, want in [*((str(i), d) for i, d in enumerate(working)), (working[-1].platform.name[:5], None)]:
        monkeypatch.setenv("KERNELPY_DEVICE", choice)
        monkeypatch.setattr(R, "_device", None)
        got = R.get_device().ctx.devices[0]
        part = choice.lower()  # a name's part: the first device whose name or platform's holds it
        want = want or next(d for d in working if part in f"{d.name} ({d.platform.name})".lower())
        assert got.int_ptr == want.int_ptr
    monkeypatch.setenv("KERNELPY_DEVICE", str(len(working)))
    monkeypatch.setattr(R, "_device", None)
    listed = f"0: {working[0].name.strip()} ({working[0].platform.name.strip()})"
    with pytest.raises(R.NoDeviceError, match=rf"KERNELPY_DEVICE='{len(working)}' names none of .*{re.escape(listed)}"):
        R.get_device()


def test_kernelpy_device_naming_several_devices_is_an_error_listing_them(monkeypatch):
    """A part of a name that two working devices share (`intel` on an Intel machine: Intel's runtime and PoCL's CPU
    device) chooses neither: NoDeviceError, one line, lists the ones it names; a part only one has chooses it."""

    class Fake:  # a device of pyopencl's: its name and its platform's
        def __init__(self, name: str, platform: str):
            self.name, self.platform = name, type("Platform", (), {"name": platform})

    fakes = [
        Fake("Intel(R) Xeon(R) Gold", "Intel(R) OpenCL"),
        Fake("cpu-Intel(R) Xeon(R) Gold", "Portable Computing Language"),
    ]
    names = [f"{d.name} ({d.platform.name})" for d in fakes]
    assert R.pick_device("portable", names) == 1 and R.pick_device("1", names) == 1
    monkeypatch.setattr(R, "working_devices", lambda: iter(fakes))
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    for choice in ("intel", "XEON", "Gold"):
        monkeypatch.setenv("KERNELPY_DEVICE", choice)
        monkeypatch.setattr(R, "_device", None)
        with pytest.raises(R.NoDeviceError) as e:
            R.get_device()
        listed = f"0: {names[0]}, 1: {names[1]}"
        assert (
            str(e.value)
            == f"KERNELPY_DEVICE={choice!r} names 2 devices ({listed}): give its index, or more of its name"
        )
    with pytest.raises(R.NoDeviceError, match=r"^--device='xeon' names 2 devices \(0: Intel"):
        R.pick_device("xeon", names, "--device")


def test_a_unicode_digit_in_kernelpy_device_or_device_is_a_name_not_a_traceback(monkeypatch):
    """'²' is a digit to str.isdigit, but int() refuses it: KERNELPY_DEVICE=² (and bench.py's --device ²) is a part of
    a name, naming none of the devices: NoDeviceError, one line, not a ValueError from int()."""
    fake = type("Fake", (), {"name": "cpu", "platform": type("Platform", (), {"name": "Portable"})})
    monkeypatch.setattr(R, "working_devices", lambda: iter([fake]))
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.setenv("KERNELPY_DEVICE", "\u00b2")
    monkeypatch.setattr(R, "_device", None)
    with pytest.raises(R.NoDeviceError, match="^KERNELPY_DEVICE='\u00b2' names none of the devices that work here"):
        R.get_device()
    with pytest.raises(R.NoDeviceError, match="^--device='\u00b9\u00b2' names none of the devices"):
        R.pick_device("\u00b9\u00b2", ["cpu (Portable)"], "--device")


def test_the_driver_list_is_written_once_and_whole_for_every_process_that_reads_it(tmp_path, monkeypatch):
    """Every process that starts writes the OpenCL driver list it points the loader at: a file another process is
    reading is never rewritten in place (its loader would find a half-written driver, or none); one that changed is
    replaced whole."""
    if not os.path.exists(os.path.join(R.sys.prefix, "lib", "libintelocl.so")):
        pytest.skip("Intel's CPU runtime is not installed from pip here (the cpu extra): no driver list to write")
    monkeypatch.setenv("KERNELPY_CACHE", str(tmp_path))
    folder, files = tmp_path / "opencl-vendors", {}
    for n in range(2):
        monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
        R._register_pip_opencl_drivers()
        assert os.environ["OCL_ICD_VENDORS"] == str(folder) and sorted(folder.iterdir()) == sorted(
            files or folder.iterdir()
        )
        if n == 0:
            files = {f: (f.stat().st_ino, f.stat().st_mtime_ns, f.read_text()) for f in folder.iterdir()}
    assert {f: (f.stat().st_ino, f.stat().st_mtime_ns, f.read_text()) for f in folder.iterdir()} == files
    driver = folder / "intel-cpu-pip.icd"
    driver.write_text("a stale path\n")
    monkeypatch.delenv("OCL_ICD_VENDORS")
    R._register_pip_opencl_drivers()
    assert driver.read_text() == files[driver][2] and driver.stat().st_ino != files[driver][0]  # replaced, whole


def test_time_kernel_gives_a_positive_time_under_a_second():
    k = Kernel(*elementwise_ast(4096))
    k.hand_coded_optimizations()
    assert 0 < R.time_kernel(k, *R.random_inputs(k), runs=3) < 1


def test_a_view_without_a_mask_reads_as_a_numpy_view_the_same_elements_the_gather_does():
    """_strided's view (no copy: 16M elements' gather took 0.2 s) of each single unmasked view equals the elements
    ShapeTracker.indices gathers: a permute, a flip (negative strides), a broadcast, a shrink (an offset); a mask or
    a second view has none, nor a write to a broadcast axis (two elements would be one)."""
    flat = np.arange(4 * 6 * 5, dtype=np.float32)
    base = ShapeTracker.from_shape((4, 6, 5))
    views = [base, base.permute((2, 0, 1)), base.stride((-1, 1, -2)), base.shrink(((1, 3), (2, 6), (0, 5))),
             base.shrink(((1, 2), (0, 6), (0, 5))).expand((3, 6, 5)), base.permute((1, 0, 2)).stride((2, -1, 1))]
    for st in views:
        assert len(st.views) == 1 and st.views[0].mask is None, st
        np.testing.assert_array_equal(R._strided(flat, st), flat[st.indices()[0]])
    assert R._strided(flat, views[4], writes=True) is None and R._strided(flat, views[3], writes=True) is not None
    assert R._strided(flat, base.pad(((1, 0), (0, 0), (0, 0)))) is None  # a mask
    assert R._strided(flat, base.permute((1, 0, 2)).reshape((6 * 4 * 5,))) is None  # two views
    assert R._strided(flat[:-1], base) is None  # past the array's end: the gather's IndexError, not a stray read


def test_a_source_of_several_kernels_builds_once_and_gives_each_by_name(device, monkeypatch):
    """build(src, name) keeps every kernel of a source: asked for a second one, it builds nothing again (the device's
    measurements build their kernels as one program); a name the source lacks is a BuildError, built or not."""
    src = "\n".join(f"__kernel void k{i}(__global float *a) {{ a[get_global_id(0)] = {i}.0f; }}" for i in range(3))
    monkeypatch.setattr(device, "programs", OrderedDict())  # (a full cache would drop one as it adds one)
    kernels = [R.build(src, f"k{i}") for i in range(3)]
    assert [k.function_name for k in kernels] == ["k0", "k1", "k2"] and list(device.programs) == [src]
    with pytest.raises(R.BuildError, match="holds no kernel k3"):
        R.build(src, "k3")
    with pytest.raises(R.BuildError, match="holds no kernel k9"):
        R.build(src.replace("k2", "k2b"), "k9")


def test_sources_of_one_prelude_build_as_one_program_each_kept_under_its_own_source(device, monkeypatch):
    """build_all: three sources of one prelude, two with kernels of one name, built as one program (renamed apart
    there), and each found by build under its own source and name, computing what its source says; a source that
    doesn't compile fails the whole (BuildError: the search builds that batch again one by one), and sources of two
    preludes are refused."""
    monkeypatch.setattr(device, "programs", OrderedDict())
    head = "#pragma OPENCL FP_CONTRACT OFF\n"
    parts = [(head + f"__kernel void {n}(__global float *a) {{ a[get_global_id(0)] = {v}.0f; }}\n", n)
             for n, v in (("k", 1), ("k", 2), ("j", 3))]  # fmt: skip
    programs, real = [], R._program
    monkeypatch.setattr(R, "_program", lambda src, *a: programs.append(src) or real(src, *a))
    built = R.build_all(parts)
    assert len(programs) == 1 and list(device.programs) == [src for src, _ in parts]  # one build, each source kept
    for (src, name), kern, value in zip(parts, built, (1, 2, 3)):
        assert R.build(src, name) is kern
        out = np.zeros(4, np.float32)
        buf = cl.Buffer(device.ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
        kern(device.queue, (4,), None, buf).wait()
        cl.enqueue_copy(device.queue, out, buf)
        assert (out == value).all()
    bad = (parts[2][0].replace("a[", "undeclared[", 1), "j")
    with pytest.raises(R.BuildError, match="OpenCL build of k_0 failed: the compiler refused it"):
        R.build_all([parts[0], bad])
    with pytest.raises(ValueError, match="one prelude"):
        R.build_all([parts[0], ("// another prelude\n" + parts[2][0], "j")])
