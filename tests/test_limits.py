"""The renderer's robustness, device limits and input checks.

An AST is walked once per distinct op, not once per path (shared ops), and without recursion (chains of thousands of
ops); any Variable name renders (the renderer names every C identifier itself); a launch past a limit the device
reports is a ValueError naming it, before anything is built or launched, and the search drops such a candidate.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import demo
import render
import runtime as R
import search
from kernel import TARGETS, BinaryOps, Kernel, Opt, OptOps, ReduceOps, ShapeTracker, UnaryOps
from kernel import Variable, dtypes
from demo import alu, const, load, reduce, store
from demo import image_matvec_ast, sum_ast

pytestmark = pytest.mark.usefixtures("device")  # conftest.py: skipped, saying why, without an OpenCL device


def _nesting(src: str) -> int:
    """The deepest nesting of brackets in C source."""
    depth, most = 0, 0
    for c in src:
        depth += (c == "(") - (c == ")")
        most = max(most, depth)
    return most


# ============================================================================================================
# every walk over an AST visits each distinct op once
# ============================================================================================================
def _doubled(depth: int, shape=(16,)):
    """x = x + x, `depth` times: 2**depth paths down to one LOAD."""
    x = load(1, ShapeTracker.from_shape(shape))
    for _ in range(depth):
        x = alu(BinaryOps.ADD, x, x)
    return x


def test_a_shared_op_is_rendered_once(monkeypatch):
    """Each op becomes C once per upcast combination (a shared one a register), not once per path that reaches it."""
    loads, real = [], render._Renderer.load
    monkeypatch.setattr(render._Renderer, "load", lambda self, i, idxs: loads.append(i) or real(self, i, idxs))
    src = R.render(Kernel(store(_doubled(16)))).src
    assert len(loads) == 1 and src.count("float alu") == 15  # one load; each op read twice is a register


def test_every_walk_over_a_deeply_shared_ast_is_linear():
    """Depth 40 (tinygrad 0.9.1 renders it in 1.3 s): 2**40 paths. The Kernel, its validation, C, reference, repr,
    equality, --loops and the PADTO check each visit an op once."""

    def build():
        x = alu(BinaryOps.MUL, _doubled(40, (4, 16)), const(2.0**-40, (4, 16)))  # the sum of the 2**40 paths
        return (store(reduce(ReduceOps.SUM, x, (1,))),)

    ast = build()
    k = Kernel(*ast)
    assert len(ast[0].lazyops) == 45 and ast == build()  # two ASTs built apart compare equal
    assert hash(ast[0]) == hash(Kernel(*ast).ast[0]) and len(repr(ast[0])) < 10_000
    assert repr(ast[0]).count("lazyops[") == 40  # each op read twice: written out once, then named by its place
    listing = "\n".join(demo.c_listing(k))  # --loops: each of the 40 adds and the multiply once, as a register
    assert len(listing) < 10_000 and listing.count("float alu") == 41
    a = np.random.default_rng(0).random(64, dtype=np.float32)
    (out,) = R.run(k, a)
    np.testing.assert_allclose(out, a.reshape(4, 16).sum(axis=1), rtol=1e-6)
    R.verify(k, a)
    k.apply_opt(Opt(OptOps.PADTO, 1, 32))  # the padding's zeros stay zeros through every op
    R.verify(k, a)


# ============================================================================================================
# chains of thousands of ops: no recursion, and C that names intermediate values instead of nesting brackets
# ============================================================================================================
def _chain(length: int, shape=(8, 16)):
    """x = -(x * 0.5 + 0.25), ..., `length` ops; and the same in numpy."""
    x, steps = load(1, ShapeTracker.from_shape(shape)), []
    half, quarter = const(0.5, shape), const(0.25, shape)
    for i in range(length):
        op = (BinaryOps.MUL, BinaryOps.ADD, UnaryOps.NEG)[i % 3]
        x = alu(op, x) if op is UnaryOps.NEG else alu(op, x, half if op is BinaryOps.MUL else quarter)
        steps.append(op)

    def numpy(a: np.ndarray) -> np.ndarray:
        for op in steps:
            a = -a if op is UnaryOps.NEG else a * np.float32(0.5) if op is BinaryOps.MUL else a + np.float32(0.25)
        return a

    return x, numpy


def test_a_chain_of_2000_ops_builds_renders_runs_and_verifies():
    x, numpy = _chain(2000)
    ast = (store(reduce(ReduceOps.SUM, x, (1,))),)
    a = np.random.default_rng(1).random(128, dtype=np.float32)
    for opts in ([], None):  # as built, and after the heuristics
        k = Kernel(*ast)
        if opts is None:
            k.hand_coded_optimizations()
        prg = R.render(k)
        assert _nesting(prg.src) < 64  # clang refuses more than 256
        (out,) = R.run(k, a)
        np.testing.assert_allclose(out, numpy(a.reshape(8, 16)).sum(axis=1), rtol=1e-5)
        R.verify(k, a)
    assert Kernel(*ast).ast == ast and len(repr(ast[0])) > 2000 and len(demo.c_listing(k)) > 2
    padded = Kernel(*ast)
    padded.apply_opt(Opt(OptOps.PADTO, 1, 32))  # (the padding's consts read 0 too: every op keeps its zeros)
    R.verify(padded, a)


def test_a_chain_of_2000_unary_ops_has_a_dtype():
    x = load(1, ShapeTracker.from_shape((4,)))
    for _ in range(2000):
        x = alu(UnaryOps.NEG, x)
    assert x.dtype == dtypes.float
    a = np.arange(4, dtype=np.float32)
    k = Kernel(store(x))
    np.testing.assert_array_equal(R.run(k, a)[0], a)
    R.verify(k, a)


# ============================================================================================================
# a Variable's name never reaches the C
# ============================================================================================================
NAMES = ["ridx1", "idx0", "int", "x y", "gidx0", "data0", "acc0", "val0", "alu0", "temp", "smp", "lidx1", "var0_i"]
NAMES += ["max_float", "INFINITY", "get_group_id", "*/", "é", ""]


@pytest.mark.parametrize("name", NAMES)
def test_a_variable_of_any_name_renders_and_computes(name):
    """out[i] = sum_j a[i, j] + n for a row length n named `name`: it names a loop, a register, a buffer, a helper, a
    C keyword, nothing C can spell... The program's int argument is the renderer's own name for it."""
    n = Variable(name, 1, 16)
    rows = reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, n))), (1,))
    k = Kernel(store(alu(BinaryOps.ADD, rows, alu(UnaryOps.CAST, const(n, (4, 1), dtypes.int32), arg=dtypes.float))))
    a = np.arange(4 * 16, dtype=np.float32)
    for value in (5, 16):
        (out,) = R.run(k, a, var_vals={name: value})
        np.testing.assert_array_equal(out, a[: 4 * value].reshape(4, value).sum(axis=1) + value)
        R.verify(k, a, var_vals={n: value})
    prg = R.render(k)
    assert re.findall(r"const int (\w+)", prg.src) == render.c_var_names([n]) and prg.vars == [n]
    assert render.c_var_names([n])[0] == "var0_" + re.sub("[^A-Za-z0-9_]", "_", name)


def test_two_variables_whose_names_read_alike_are_two_arguments():
    rows, cols = Variable("x y", 1, 8), Variable("x_y", 1, 8)
    k = Kernel(store(reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((rows, cols))), (1,))))
    names = re.findall(r"const int (\w+)", R.render(k).src)
    assert names == ["var0_x_y", "var1_x_y"]
    a = np.arange(64, dtype=np.float32)
    (out,) = R.run(k, a, var_vals={"x y": 3, "x_y": 5})
    np.testing.assert_array_equal(out, a[:15].reshape(3, 5).sum(axis=1))


# ============================================================================================================
# the device's limits: each checked before a launch, at its boundary
# ============================================================================================================
def _grouped_sum(groups: int, threads: int, target=None) -> Kernel:
    """A SUM of (2 * threads, groups) over axis 1 with GROUPTOP:0:groups and LOCAL:0:threads: a __local buffer of
    groups * threads floats (threads beyond the device's run as loops inside each one)."""
    k = Kernel(*sum_ast((2 * threads, groups), (1,)), opts=target)
    k.apply_opt(Opt(OptOps.GROUPTOP, 0, groups))
    if threads > 1:
        k.apply_opt(Opt(OptOps.LOCAL, 0, threads))
    return k


def test_local_memory_at_the_devices_limit_runs_and_one_element_more_is_refused():
    """More __local memory than CL_DEVICE_LOCAL_MEM_SIZE crashed the process (PoCL, Intel's runtime)."""
    most = R.get_device().ctx.devices[0].local_mem_size
    target = dataclasses.replace(TARGETS["opencl"], shared_max=1 << 40)
    at = _grouped_sum(256, most // 4 // 256, target)
    assert R.render(at).local_bytes == most
    R.verify(at, *R.random_inputs(at))
    floats = next(n for n in range(most // 4 + 1, most) if any(n % g == 0 for g in range(2, 257)))  # just over
    groups = next(g for g in range(2, 257) if floats % g == 0)
    over = _grouped_sum(groups, floats // groups, target)
    assert R.render(over).local_bytes == 4 * floats <= most + 16
    with pytest.raises(ValueError, match=rf"needs {4 * floats} bytes of __local memory, more than CL_DEVICE_LOCAL_MEM"):
        R.run(over, *R.random_inputs(over))


def test_a_work_group_at_the_devices_limit_runs_and_one_more_thread_is_refused():
    most = R.get_device().ctx.devices[0].max_work_group_size
    target = dataclasses.replace(TARGETS["opencl"], shared_max=1 << 40)  # (Intel's 8192 floats: more than 32 KB)
    at = _grouped_sum(most, 1, target)
    R.verify(at, *R.random_inputs(at))
    over = _grouped_sum(most + 1, 1, target)
    prg = R.render(over)  # as the kernel says, not fitted to the device
    assert prg.local_size == [most + 1, 1, 1]
    with pytest.raises(ValueError, match=rf"needs {most + 1} work-items in a work-group, more than CL_DEVICE_MAX_WORK"):
        R.Launch(over, R.random_inputs(over), prg=prg)
    with pytest.raises(ValueError, match="needs more threads than the device has"):  # fitted: the renderer says so
        R.run(over, *R.random_inputs(over))


@pytest.mark.parametrize("axis", [0, 1])
def test_an_image_at_the_devices_limit_runs_and_one_pixel_more_is_refused(monkeypatch, axis):
    """pyopencl said only `clCreateImage failed` of an image past CL_DEVICE_IMAGE2D_MAX_WIDTH (or _HEIGHT)."""
    name = ("CL_DEVICE_IMAGE2D_MAX_HEIGHT", "CL_DEVICE_IMAGE2D_MAX_WIDTH")[axis]
    most = getattr(R.get_device().ctx.devices[0], name[10:].lower())
    builds, real = [], R.build
    monkeypatch.setattr(R, "build", lambda *args, **kw: builds.append(args) or real(*args, **kw))
    for pixels in (most, most + 1):
        shape = (pixels, 1, 4) if axis == 0 else (1, pixels, 4)
        st = ShapeTracker.from_shape((4 * pixels,))
        k = Kernel(store(alu(BinaryOps.ADD, load(1, st, dtypes.imagef(shape)), const(1.0, (4 * pixels,)))))
        inputs = R.random_inputs(k)
        if pixels == most:
            R.verify(k, *inputs)
            continue
        builds.clear()
        with pytest.raises(ValueError, match=f"needs {pixels} (rows|pixels in a row) of image data1, more than {name}"):
            R.run(k, *inputs)
        assert builds == []  # refused before anything was built


def _image_out() -> Kernel:
    k = Kernel(*image_matvec_ast(64, 16))
    k.hand_coded_optimizations()  # float4 stores: the output is written as an image
    return k


def _image_in() -> Kernel:
    st = ShapeTracker.from_shape((32,))
    return Kernel(store(alu(BinaryOps.ADD, load(1, st, dtypes.imagef((2, 4, 4))), const(1.0, (32,)))))


# limit: (the kernel, what it needs of that limit, worked out from its opts and buffers)
BOUNDARIES = {
    "CL_DEVICE_LOCAL_MEM_SIZE": (lambda: _grouped_sum(16, 1), 16 * 4),  # 16 floats of __local memory
    "CL_DEVICE_MAX_WORK_GROUP_SIZE": (lambda: _grouped_sum(16, 1), 16),  # the 16 threads of GROUPTOP:0:16
    "CL_KERNEL_WORK_GROUP_SIZE": (lambda: _grouped_sum(16, 1), 16),
    "CL_DEVICE_MAX_WORK_ITEM_SIZES[0]": (lambda: _grouped_sum(16, 1), 16),
    "CL_DEVICE_MAX_WORK_ITEM_SIZES[1]": (lambda: _grouped_sum(16, 4), 16),  # launch dim 0: LOCAL:0:4, 1: GROUPTOP
    "CL_DEVICE_MAX_PARAMETER_SIZE": (lambda: _grouped_sum(16, 1), 2 * 8),  # two 64-bit pointers
    "CL_DEVICE_MAX_MEM_ALLOC_SIZE": (lambda: _grouped_sum(16, 1), 2 * 16 * 4),  # the input's 32 floats
    "CL_DEVICE_GLOBAL_MEM_SIZE": (lambda: _grouped_sum(16, 1), 2 * 16 * 4 + 2 * 4),  # and the output's 2
    "CL_DEVICE_IMAGE2D_MAX_WIDTH": (_image_in, 4),
    "CL_DEVICE_IMAGE2D_MAX_HEIGHT": (_image_in, 2),
    "CL_DEVICE_MAX_READ_IMAGE_ARGS": (_image_in, 1),
    "CL_DEVICE_MAX_WRITE_IMAGE_ARGS": (_image_out, 1),
}


@pytest.mark.parametrize("name", list(BOUNDARIES))
def test_each_limit_of_the_device_is_checked_at_its_boundary(monkeypatch, name):
    """A device whose limit is exactly what the kernel needs runs it; one with 1 less refuses it, naming the limit."""
    make, need = BOUNDARIES[name]
    k, real = make(), R.device_caps
    assert R.device_caps()["CL_DEVICE_ADDRESS_BITS"] == 64 or name != "CL_DEVICE_MAX_PARAMETER_SIZE"
    inputs = R.random_inputs(k)
    monkeypatch.setattr(R, "device_caps", lambda kern=None: {**real(kern), name: need})
    R.verify(k, *inputs)
    monkeypatch.setattr(R, "device_caps", lambda kern=None: {**real(kern), name: need - 1})
    with pytest.raises(ValueError, match=rf"needs {need} .*, more than {re.escape(name)} = {need - 1} of "):
        R.run(k, *inputs)


def test_the_search_drops_a_candidate_the_device_cant_run_and_says_why(monkeypatch):
    real = R.device_caps
    monkeypatch.setattr(R, "device_caps", lambda kern=None: {**real(kern), "CL_DEVICE_LOCAL_MEM_SIZE": 0})
    k = Kernel(*sum_ast((4, 64), (1,)))  # the heuristics' GROUPTOP:0:16 and every grouped child need __local memory
    result = search.search(k, *R.random_inputs(k), cache=False, workers=0, timeout=60)
    assert R.render(result.kernel).local_bytes == 0
    assert any("CL_DEVICE_LOCAL_MEM_SIZE = 0" in why for why in result.why_dropped), result.why_dropped


# ============================================================================================================
# images and in-place buffers: refused or run as a plain buffer is
# ============================================================================================================
def test_an_image_updated_in_place_is_refused_before_anything_is_built(monkeypatch):
    img, st = dtypes.imagef((2, 4, 4)), ShapeTracker.from_shape((32,))
    k = Kernel(store(alu(BinaryOps.ADD, load(0, st, img), const(1.0, (32,))), dtype=img))
    builds, real = [], R.build
    monkeypatch.setattr(R, "build", lambda *args, **kw: builds.append(args) or real(*args, **kw))
    with pytest.raises(ValueError, match="reads and writes image data0: an OpenCL image is read_only or write_only"):
        R.run(k, *R.random_inputs(k))
    assert builds == []


@pytest.mark.parametrize("where", ["input", "output"])
def test_an_image_of_no_pixels_works_as_an_empty_buffer_does(where):
    img, st = dtypes.imagef((0, 4, 4)), ShapeTracker.from_shape((0,))
    src, dst = (img, dtypes.float) if where == "input" else (dtypes.float, img)
    k = Kernel(store(load(1, st, src), dtype=dst))
    (out,) = R.run(k, *R.random_inputs(k))
    assert out.size == 0
    R.verify(k, *R.random_inputs(k))


def test_a_buffer_updated_in_place_takes_an_array_of_its_size_only(monkeypatch):
    """Any other size was launched, then failed to reshape the output; now refused before anything is built."""
    k = Kernel(store(alu(BinaryOps.ADD, load(0, ShapeTracker.from_shape((8,))), const(1.0, (8,)))))
    builds, real = [], R.build
    monkeypatch.setattr(R, "build", lambda *args, **kw: builds.append(args) or real(*args, **kw))
    for f in (R.run, R.reference, R.verify):
        with pytest.raises(ValueError, match="input data0 has 10 elements, the kernel updates exactly 8"):
            f(k, np.zeros(10, np.float32))
    assert builds == []


# ============================================================================================================
# indices and loop bounds are C ints: past int32 the renderer refuses instead of computing garbage
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
