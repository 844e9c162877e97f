"""The spec of kernel.py's Kernel: construction, every OptOp, every check that rejects one, tensor cores, the
hand-coded heuristics, their tuned thresholds at the boundary, tinygrad's linearizer members (membufs, shape_offsets,
acc_offsets, get_float4_upcast_dim, alias_buffer) and colours. An opt is written with the OptOps' own
names: Opt(UPCAST, 0, 4) is UPCAST:0:4 (the command lines are test_cli.py's).

Each expectation was worked out from tinygrad 0.9.1's rules (and checked against tinygrad 0.9.1 itself). A kernel
is written as `full_shape` with one colour per axis; the colours are demo.py's COLOR_LEGEND.

The golden-corpus replays live in test_golden.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re

import pytest

import kernel
import demo
from kernel import TARGETS, BinaryOps, BufferOps, Kernel, KernelOptError, LazyOp, MemBuffer, Opt, OptOps, ReduceOps
from kernel import ShapeTracker, UnaryOps, dtypes
from demo import alu, const, load, reduce, store
from demo import (
    attention_ast,
    broadcast_ast,
    conv2d_ast,
    elementwise_ast,
    image_matvec_ast,
    matmul_ast,
    matvec_ast,
    sum_ast,
)

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def _colours(monkeypatch):
    """Colour on (conftest.py resets the heuristics' knobs)."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # pytest's output isn't a terminal, and these tests read the colours


# ============================================================================================================
# small kernels beyond demo.py's builders
# ============================================================================================================


def ew_ast(shape: tuple[int, ...]) -> tuple[LazyOp, ...]:
    """out = a + b, both contiguous with this shape"""
    st = ShapeTracker.from_shape(shape)
    return (store(alu(BinaryOps.ADD, load(1, st), load(2, st))),)


def transposed_add_ast(s: int = 6) -> tuple[LazyOp, ...]:
    """out = a + b.permute(3, 2, 1, 0) on (s, s, s, s): no two axes can merge, no axis is broadcast"""
    shape = (s, s, s, s)
    b = ShapeTracker.from_shape(shape).permute((3, 2, 1, 0))
    return (store(alu(BinaryOps.ADD, load(1, ShapeTracker.from_shape(shape)), load(2, b))),)


def stack_ast(n: int = 256, k: int = 2) -> tuple[LazyOp, ...]:
    """out = stack([x0, ..., x(k-1)]) of k vectors of n: each input is padded (masked) along the new axis"""
    loads = [load(i + 1, ShapeTracker.from_shape((1, n)).pad(((i, k - 1 - i), (0, 0)))) for i in range(k)]
    value = loads[0]
    for x in loads[1:]:
        value = alu(BinaryOps.ADD, value, x)
    return (store(value),)


def unary_sum_ast(op, shape=(17, 17), dtype=dtypes.float32) -> tuple[LazyOp, ...]:
    """out[i] = sum_j op(a[i, j]) (or op(a[i, j], b[i, j]) for a binary op)"""
    a = load(1, ShapeTracker.from_shape(shape), dtype)
    value = alu(op, a) if op in UnaryOps else alu(op, a, load(2, ShapeTracker.from_shape(shape), dtype))
    return (store(reduce(ReduceOps.SUM, value, (1,))),)


def max_ast(shape=(17, 17)) -> tuple[LazyOp, ...]:
    """out[i] = max_j a[i, j]"""
    return (store(reduce(ReduceOps.MAX, load(1, ShapeTracker.from_shape(shape)), (1,))),)


def image_out_ast(h: int = 4, w: int = 8) -> tuple[LazyOp, ...]:
    """out = a + b written into an RGBA image of h x w pixels"""
    st = ShapeTracker.from_shape((h, w, 4))
    return (store(alu(BinaryOps.ADD, load(1, st), load(2, st)), dtype=dtypes.imagef((h, w, 4))),)


def image_in_ast(h: int = 4, w: int = 8) -> tuple[LazyOp, ...]:
    """out = img * 2 read from an RGBA image of h x w pixels into a float buffer"""
    img = load(1, ShapeTracker.from_shape((h, w, 4)), dtypes.imagef((h, w, 4)))
    return (store(alu(BinaryOps.MUL, img, const(2.0, (h, w, 4)))),)


def image_in_sum_ast(n: int = 32) -> tuple[LazyOp, ...]:
    """out[i] = sum of the 4 channels of pixel i of an image (n pixels)"""
    img = load(1, ShapeTracker.from_shape((n, 4)), dtypes.imagef((n // 4, 4, 4)))
    return (store(reduce(ReduceOps.SUM, img, (1,)), dtype=dtypes.float),)


def image_sum_ast(n: int = 64, k: int = 256) -> tuple[LazyOp, ...]:
    """out[i] = sum_j a[i, j] written into an RGBA image of n/4 pixels"""
    (out,) = sum_ast((n, k), (1,))
    return (LazyOp(BufferOps.STORE, out.src, MemBuffer(0, dtypes.imagef((4, n // 16, 4)), out.arg.st)),)


def cast_matmul_ast(n: int = 64) -> tuple[LazyOp, ...]:
    """out = float(a) @ float(b) with half a, b: the inputs are CAST before the MUL"""
    (out,) = matmul_ast(n, n, n, dtypes.half)
    mul = out.src[0].src[0]
    casted = alu(BinaryOps.MUL, *(alu(UnaryOps.CAST, s, arg=dtypes.float) for s in mul.src))
    return (store(reduce(ReduceOps.SUM, casted, (2,))),)


# ============================================================================================================
# helpers
# ============================================================================================================


def new_kernel(ast, target: str = "opencl", *opts: Opt) -> Kernel:
    """A kernel built for a target, with opts applied in order."""
    k = Kernel(*ast, opts=TARGETS[target])
    for o in opts:
        k.apply_opt(o)
    return k


def shape_colors(k: Kernel) -> tuple[tuple[int, ...], list[str]]:
    return k.full_shape, k.colors()


def state(k: Kernel) -> dict:
    """Everything an opt may change."""
    return {
        "full_shape": k.full_shape,
        "sts": list(k.sts),
        "bufs": list(k.bufs),
        "applied_opts": list(k.applied_opts),
        "upcasted": k.upcasted,
        "local_dims": k.local_dims,
        "group_for_reduces": k.group_for_reduces,
        "dont_use_locals": k.dont_use_locals,
        "tensor_core": k.tensor_core,
        "tensor_core_opts": dataclasses.astuple(k.tensor_core_opts) if k.tensor_core_opts else None,
        "first_reduce": k.first_reduce,
        "colors": k.colors(),
    }


def hand_coded(ast, target: str = "opencl", opts=None) -> Kernel:
    k = Kernel(*ast, opts=opts if opts is not None else TARGETS[target])
    k.hand_coded_optimizations()
    return k


# the OptOps by their own names, so an opt reads as it prints: Opt(UPCAST, 0, 4) is UPCAST:0:4
UPCAST, UPCASTMID, UNROLL, LOCAL, GROUP, GROUPTOP, NOLOCALS, PADTO, TC = (
    OptOps.UPCAST,
    OptOps.UPCASTMID,
    OptOps.UNROLL,
    OptOps.LOCAL,
    OptOps.GROUP,
    OptOps.GROUPTOP,
    OptOps.NOLOCALS,
    OptOps.PADTO,
    OptOps.TC,
)


# ============================================================================================================
# targets
# ============================================================================================================


class TestTargets:
    def test_targets_match_tinygrad_renderers(self):
        ocl, clang, metal, cuda = (TARGETS[t] for t in ("opencl", "clang", "metal", "cuda"))
        assert (ocl.device, ocl.supports_float4, ocl.has_local, ocl.has_shared, ocl.shared_max) == (
            "GPU",
            True,
            True,
            True,
            32768,
        )
        assert (clang.device, clang.supports_float4, clang.has_local, clang.global_max) == ("CLANG", False, False, None)
        assert cuda.global_max == (2147483647, 65535, 65535) and cuda.local_max == (1024, 1024, 64)
        assert cuda.shared_max == 49152
        assert ocl.tensor_cores == [] and clang.tensor_cores == []

    def test_metal_and_cuda_have_tinygrads_tensor_cores_in_its_order(self):
        assert [str(tc) for tc in TARGETS["metal"].tensor_cores] == [
            "WMMA_8_8_8_float_float",
            "WMMA_8_8_8_half_float",
            "WMMA_8_8_8_half_half",
        ]
        assert [str(tc) for tc in TARGETS["cuda"].tensor_cores] == [
            "WMMA_8_16_16_half_float",
            "WMMA_8_16_16___bf16_float",
        ]
        metal = TARGETS["metal"].tensor_cores[0]
        assert metal.threads == [(0, 2), (1, 4), (0, 2), (1, 2)]  # 32 threads: a SIMD group
        assert (TARGETS["metal"].tc, TARGETS["metal"].tc_opt) == (1, 0)


# ============================================================================================================
# Kernel construction
# ============================================================================================================


class TestConstruction:
    def test_buffers_are_outputs_then_inputs(self):
        k = new_kernel(matmul_ast(8, 8, 8))
        assert [b.idx for b in k.bufs] == [0, 1, 2]
        assert len(k.sts) == 3 and k.reduceop.op is ReduceOps.SUM

    def test_reduce_axes_move_to_the_end(self):
        """sum over the middle axis of (16, 32, 8): the reduce axis 32 goes last."""
        k = new_kernel(sum_ast((16, 32, 8), (1,)))
        assert k.full_shape == (16, 8, 32)
        assert k.output_shape == (16, 8, 1)
        assert k.first_reduce == 2
        assert k.colors() == ["blue", "blue", "red"]

    def test_simplify_ones_drops_size_one_axes(self):
        assert new_kernel(sum_ast((16, 1, 32), (2,))).full_shape == (16, 32)
        assert new_kernel(ew_ast((1, 64, 1))).full_shape == (64,)

    def test_simplify_merge_adjacent_merges_contiguous_axes(self):
        assert new_kernel(ew_ast((4, 8, 16))).full_shape == (512,)
        assert new_kernel(sum_ast((8, 16))).full_shape == (128,)  # a full reduce merges too

    def test_merge_never_crosses_the_first_reduce_axis(self):
        """(64, 32) is contiguous, but axis 0 is an output and axis 1 is reduced."""
        assert new_kernel(sum_ast((64, 32), (1,))).full_shape == (64, 32)

    def test_merge_needs_every_buffer_to_agree(self):
        """b is transposed: no two axes walk memory together in both buffers."""
        assert new_kernel(transposed_add_ast()).full_shape == (6, 6, 6, 6)

    def test_broadcast_axes_merge_with_broadcast_axes(self):
        """b = x[j] expanded over i: stride 0 on axis 0 never merges with stride 1 on axis 1."""
        assert new_kernel(broadcast_ast(16, 16)).full_shape == (16, 16)

    def test_image_output_axes_do_not_merge(self):
        """An image output keeps its (height, width, 4) axes apart; a float output of the same shape merges."""
        assert new_kernel(image_out_ast(4, 8)).full_shape == (4, 8, 4)
        assert new_kernel(ew_ast((4, 8, 4))).full_shape == (128,)

    # matvec 1024x768 after GROUP:0:8, LOCAL:0:4, UPCAST:0:4 is (64 4 8 96 4), blue cyan green red yellow: each
    # counter below counts one colour, and the shapes follow from where the colours sit
    def _matvec_grouped(self) -> Kernel:
        k = new_kernel(matvec_ast(1024, 768), "opencl", Opt(GROUP, 0, 8), Opt(LOCAL, 0, 4), Opt(UPCAST, 0, 4))
        assert shape_colors(k) == ((64, 4, 8, 96, 4), ["blue", "cyan", "green", "red", "yellow"])
        return k

    def test_global_and_local_dims_count_the_blue_and_cyan_axes(self):
        k = self._matvec_grouped()
        assert (k.global_dims, k.local_dims) == (1, 1)

    def test_first_reduce_is_the_first_green_or_red_axis(self):
        assert self._matvec_grouped().first_reduce == 2

    def test_group_for_reduces_and_upcasted_count_the_green_and_yellow_axes(self):
        k = self._matvec_grouped()
        assert (k.group_for_reduces, k.upcasted) == (1, 1)

    def test_shape_len_counts_every_axis_and_full_unupcasted_shape_drops_the_upcasts(self):
        k = self._matvec_grouped()
        assert k.shape_len == 5 and k.full_unupcasted_shape == (64, 4, 8, 96)

    def test_output_shape_has_1_on_the_reduce_axes(self):
        """The output's own view: the green and red axes are reduced away, every other axis is as in full_shape."""
        assert self._matvec_grouped().output_shape == (64, 4, 1, 1, 4)

    def test_applied_opts_records_accepted_opts_in_order(self):
        k = new_kernel(matmul_ast(64, 64, 64))
        k.apply_opt(Opt(UPCAST, 0, 4))
        with pytest.raises(KernelOptError):
            k.apply_opt(Opt(UPCAST, 9, 4))
        k.apply_opt(Opt(LOCAL, 1, 8))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(LOCAL, 1, 8)]

    def test_a_copy_changes_independently_of_its_original(self):
        k = new_kernel(matmul_ast(64, 64, 64))
        before = state(k)
        c = k.copy()
        c.apply_opt(Opt(UPCAST, 0, 4))
        c.apply_opt(Opt(LOCAL, 1, 8))
        assert state(k) == before
        assert c.applied_opts == [Opt(UPCAST, 0, 4), Opt(LOCAL, 1, 8)] and k.applied_opts == []
        assert c.ast is k.ast

    def test_copy_of_tensor_core_kernel_keeps_its_own_tc_options(self):
        k = new_kernel(matmul_ast(64, 64, 64), "metal", Opt(TC, 0, 0))
        c = k.copy()
        c.apply_opt(Opt(UPCAST, 0, 2))
        assert c.tensor_core_opts is not k.tensor_core_opts
        assert k.tensor_core_opts.axes == (1, 0, 2)

    def test_shift_to_splits_an_axis_and_moves_the_piece(self):
        k = new_kernel(elementwise_ast(4096))
        k.shift_to(0, 4)
        assert k.full_shape == (1024, 4)
        assert k.sts[1].real_strides() == (4, 1)

    def test_shift_to_top_takes_the_outer_piece(self):
        k = new_kernel(elementwise_ast(4096))
        k.shift_to(0, 4, top=True)
        assert k.full_shape == (1024, 4)
        assert k.sts[1].real_strides() == (1, 1024)  # the moved piece is the slow-moving one

    def test_shift_to_can_insert_the_piece_before_another_axis(self):
        k = new_kernel(matmul_ast(64, 64, 64))
        k.shift_to(1, 8, insert_before=0)
        assert k.full_shape == (8, 64, 8, 64)

    def test_upcast_marks_the_last_axis(self):
        k = new_kernel(elementwise_ast(4096))
        k.shift_to(0, 4)
        k.upcast()
        assert k.upcasted == 1 and k.colors() == ["blue", "yellow"]

    def test_reshape_and_permute_applies_to_every_buffer(self):
        k = new_kernel(elementwise_ast(4096))
        k.reshape_and_permute(lambda s: (64, 64), (1, 0))
        assert [st.shape for st in k.sts] == [(64, 64)] * 3
        assert k.sts[0].real_strides() == (1, 64)

    def test_opt_real_axis_counts_unroll_from_the_first_reduce(self):
        k = new_kernel(sum_ast((64, 16), (1,)))
        assert Opt(UNROLL, 0, 4).real_axis(k) == 1
        assert Opt(UPCAST, 0, 4).real_axis(k) == 0
        assert Opt(NOLOCALS).real_axis(k) == -1

    def test_opt_real_axis_counts_group_from_the_first_ungrouped_reduce(self):
        k = new_kernel(sum_ast((4096,)), "opencl", Opt(GROUP, 0, 16))
        assert k.group_for_reduces == 1
        assert Opt(GROUPTOP, 0, 4).real_axis(k) == 1  # axis 0 is the green group axis now
        assert Opt(UNROLL, 0, 4).real_axis(k) == 0  # UNROLL still counts from the first reduce, green included

    def test_unroll_and_group_axes_after_a_group(self):
        k = new_kernel(sum_ast((4096,)), "opencl", Opt(GROUP, 0, 16))
        k.apply_opt(Opt(UNROLL, 0, 4))  # unrolls part of the green axis
        assert shape_colors(k) == ((4, 256, 4), ["green", "red", "magenta"])
        k.apply_opt(Opt(GROUPTOP, 0, 4))  # groups the red axis, the first one not grouped
        assert shape_colors(k) == ((4, 4, 64, 4), ["green", "green", "red", "magenta"])

    def test_amount_zero_means_the_whole_axis(self):
        k = new_kernel(sum_ast((64, 16), (1,)), "opencl", Opt(UNROLL, 0, 0))
        assert shape_colors(k) == ((64, 16), ["blue", "magenta"])
        k = new_kernel(elementwise_ast(8), "opencl", Opt(UPCAST, 0, 0))
        assert shape_colors(k) == ((8,), ["yellow"])

    def test_an_opt_parses_from_and_prints_as_op_axis_amt(self):
        assert Opt.parse("UPCAST:0:4") == Opt(UPCAST, 0, 4)
        assert Opt.parse("nolocals") == Opt(NOLOCALS)
        assert str(Opt(LOCAL, 1, 16)) == "LOCAL:1:16"
        with pytest.raises(ValueError, match="UPCAST"):
            Opt.parse("FOO:1:2")


class TestMalformedAST:
    def test_root_must_be_a_store(self):
        (out,) = elementwise_ast(16)
        with pytest.raises(ValueError, match="STORE"):
            Kernel(out.src[0])

    def test_a_kernel_without_an_ast_is_refused(self):
        with pytest.raises(ValueError, match="STORE"):
            Kernel()

    def test_output_idx_must_match_its_position(self):
        (out,) = elementwise_ast(16)
        wrong = LazyOp(BufferOps.STORE, out.src, MemBuffer(1, dtypes.float, out.arg.st))
        with pytest.raises(ValueError, match="idx 0"):
            Kernel(wrong)

    def test_sources_of_an_op_must_have_one_shape(self):
        """Movement ops live in ShapeTrackers: an ADD of a (4,) and an (8,) buffer is an implicit movement op."""
        bad = alu(BinaryOps.ADD, load(1, ShapeTracker.from_shape((4,))), load(2, ShapeTracker.from_shape((8,))))
        with pytest.raises(ValueError, match=r"implicit movement op.*\(4,\).*\(8,\)"):
            Kernel(store(bad, st=ShapeTracker.from_shape((4,))))

    def test_store_shape_must_match_the_value(self):
        value = load(1, ShapeTracker.from_shape((4, 4)))
        with pytest.raises(ValueError, match=r"\(4, 4\).*\(16,\)|\(16,\).*\(4, 4\)"):
            Kernel(store(value, st=ShapeTracker.from_shape((16,))))

    def test_reduce_ops_of_one_kernel_reduce_one_shape(self):
        """Several reduces share one loop nest (test_multireduce.py): a second one over other axes is refused."""
        a = reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, 8))), (1,))
        b = reduce(ReduceOps.MAX, load(2, ShapeTracker.from_shape((8, 4)).permute((1, 0))), (1,))
        Kernel(store(alu(BinaryOps.ADD, a, b)))  # same shape to same shape: fine
        c = reduce(ReduceOps.MAX, load(2, ShapeTracker.from_shape((4, 1))), (1,))
        with pytest.raises(ValueError, match=r"same shape.*\(4, 8\).*\(4, 1\)"):
            Kernel(store(alu(BinaryOps.ADD, a, c)))

    def test_outputs_must_have_the_same_size(self):
        out0 = store(load(2, ShapeTracker.from_shape((4,))), 0)
        out1 = store(load(3, ShapeTracker.from_shape((8,))), 1)
        with pytest.raises(ValueError, match="same size"):
            Kernel(out0, out1)

    def test_reduce_axes_must_exist(self):
        bad = reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, 8))), (2,))
        with pytest.raises(ValueError, match=r"axes"):
            Kernel(LazyOp(BufferOps.STORE, (bad,), MemBuffer(0, dtypes.float, ShapeTracker.from_shape((4, 8)))))

    def test_every_node_must_be_a_lazyop(self):
        st = ShapeTracker.from_shape((2, 3))
        with pytest.raises(ValueError, match="not a LazyOp"):
            bad = LazyOp(BinaryOps.ADD, (load(1, st), 3))
            Kernel(LazyOp(BufferOps.STORE, (bad,), MemBuffer(0, dtypes.float, st)))

    def test_load_needs_a_buffer(self):
        st = ShapeTracker.from_shape((2, 3))
        with pytest.raises(ValueError, match="LOAD needs a MemBuffer"):
            Kernel(LazyOp(BufferOps.STORE, (LazyOp(BufferOps.LOAD, (), None),), MemBuffer(0, dtypes.float, st)))

    def test_reduce_arg_must_be_a_tuple_of_axes(self):
        x = load(1, ShapeTracker.from_shape((2, 3)))
        out = MemBuffer(0, dtypes.float, ShapeTracker.from_shape((2, 1)))
        with pytest.raises(ValueError, match="tuple of axes"):
            Kernel(LazyOp(BufferOps.STORE, (LazyOp(ReduceOps.SUM, (x,), 1),), out))

    def test_alu_op_needs_sources(self):
        out = MemBuffer(0, dtypes.float, ShapeTracker.from_shape((2, 3)))
        with pytest.raises(ValueError, match="ADD takes 2 sources, got 0"):
            Kernel(LazyOp(BufferOps.STORE, (LazyOp(BinaryOps.ADD, ()),), out))

    def test_store_only_at_the_root(self):
        """A STORE inside the AST is not a value: only the roots of a kernel store."""
        st = ShapeTracker.from_shape((2, 3))
        inner = LazyOp(BufferOps.STORE, (load(1, st),), MemBuffer(0, dtypes.float, st))
        with pytest.raises(ValueError, match="STORE"):
            Kernel(LazyOp(BufferOps.STORE, (inner,), MemBuffer(0, dtypes.float, st)))

    def test_two_outputs_of_one_size_are_fine(self):
        st = ShapeTracker.from_shape((4, 8))
        k = Kernel(store(load(2, st), 0), store(load(3, st), 1))
        assert [b.idx for b in k.bufs] == [0, 1, 2, 3]


# ============================================================================================================
# one test per OptOp: the shape and colours before and after
# ============================================================================================================


class TestOptOps:
    def test_upcast_splits_an_output_axis_into_registers(self):
        k = new_kernel(elementwise_ast(4096))
        assert shape_colors(k) == ((4096,), ["blue"])
        k.apply_opt(Opt(UPCAST, 0, 4))
        assert shape_colors(k) == ((1024, 4), ["blue", "yellow"])
        assert k.upcasted == 1

    def test_upcast_of_matmul_output_axis(self):
        k = new_kernel(matmul_ast(64, 64, 64), "opencl", Opt(UPCAST, 0, 4))
        assert shape_colors(k) == ((16, 64, 64, 4), ["blue", "blue", "red", "yellow"])

    def test_unroll_splits_a_reduce_axis_into_registers(self):
        k = new_kernel(sum_ast((64, 16), (1,)))
        assert shape_colors(k) == ((64, 16), ["blue", "red"])
        k.apply_opt(Opt(UNROLL, 0, 4))
        assert shape_colors(k) == ((64, 4, 4), ["blue", "red", "magenta"])

    def test_local_makes_threads_of_a_work_group(self):
        k = new_kernel(elementwise_ast(4096))
        k.apply_opt(Opt(LOCAL, 0, 32))
        assert shape_colors(k) == ((128, 32), ["blue", "cyan"])
        assert (k.global_dims, k.local_dims) == (1, 1)

    def test_group_shares_a_reduce_across_threads(self):
        """GROUP takes the inner piece of the reduce: thread t sums elements t, t+16, t+32, ..."""
        k = new_kernel(sum_ast((4096,)))
        assert shape_colors(k) == ((4096,), ["red"])
        k.apply_opt(Opt(GROUP, 0, 16))
        assert shape_colors(k) == ((16, 256), ["green", "red"])
        assert k.sts[1].real_strides() == (1, 16)

    def test_grouptop_takes_the_outer_piece_of_the_reduce(self):
        """GROUPTOP: thread t sums the contiguous run t*256 .. t*256+255."""
        k = new_kernel(sum_ast((4096,)), "opencl", Opt(GROUPTOP, 0, 16))
        assert shape_colors(k) == ((16, 256), ["green", "red"])
        assert k.sts[1].real_strides() == (256, 1)

    def test_group_after_locals(self):
        k = new_kernel(sum_ast((512, 256), (1,)), "opencl", Opt(LOCAL, 0, 4))
        k.apply_opt(Opt(GROUPTOP, 0, 16))
        assert shape_colors(k) == ((128, 4, 16, 16), ["blue", "cyan", "green", "red"])

    def test_upcastmid_upcasts_an_image_output_in_the_middle_of_a_grouped_reduce(self):
        k = new_kernel(image_matvec_ast(256, 64), "opencl", Opt(GROUP, 0, 16))
        assert shape_colors(k) == ((256, 16, 4), ["blue", "green", "red"])
        k.apply_opt(Opt(UPCASTMID, 0, 4))
        assert shape_colors(k) == ((64, 16, 4, 4), ["blue", "green", "white", "red"])
        assert k.group_for_reduces == 2

    def test_nolocals_turns_globals_bright_blue(self):
        k = new_kernel(elementwise_ast(4096))
        k.apply_opt(Opt(NOLOCALS))
        assert shape_colors(k) == ((4096,), ["BLUE"])
        assert k.dont_use_locals

    def test_padto_pads_an_output_axis_to_a_multiple(self):
        k = new_kernel(matmul_ast(17, 17, 17))
        assert shape_colors(k) == ((17, 17, 17), ["blue", "blue", "red"])
        k.apply_opt(Opt(PADTO, 0, 32))
        assert shape_colors(k) == ((32, 17, 17), ["blue", "blue", "red"])
        assert k.sts[1].axis_is_masked(0)  # rows 17..31 read as 0
        assert k.sts[1].views[-1].mask == ((0, 17), (0, 17), (0, 17))

    def test_padto_pads_a_sum_reduce_axis(self):
        k = new_kernel(matmul_ast(17, 17, 17), "opencl", Opt(PADTO, 2, 32))
        assert shape_colors(k) == ((17, 17, 32), ["blue", "blue", "red"])

    def test_padto_then_upcast_the_padded_axis(self):
        k = new_kernel(matmul_ast(17, 17, 17), "opencl", Opt(PADTO, 0, 32), Opt(UPCAST, 0, 8))
        assert shape_colors(k) == ((4, 17, 17, 8), ["blue", "blue", "red", "yellow"])

    def test_tc_shapes_a_matmul_for_the_tensor_core(self):
        """Metal's 8x8x8 core: K unrolled by 8 (magenta), a SIMD group of 32 threads (cyan), N upcast by 2."""
        k = new_kernel(matmul_ast(64, 64, 64), "metal")
        assert shape_colors(k) == ((64, 64, 64), ["blue", "blue", "red"])
        k.apply_opt(Opt(TC, 0, 0))
        assert shape_colors(k) == (
            (8, 8, 2, 4, 2, 2, 8, 8, 2),
            ["blue", "blue", "cyan", "cyan", "cyan", "cyan", "red", "magenta", "yellow"],
        )
        assert str(k.tensor_core) == "WMMA_8_8_8_float_float"
        assert k.applied_opts == [Opt(TC, 0, 0)]


# ============================================================================================================
# one test per check that rejects an opt
# ============================================================================================================

matmul_64 = matmul_ast(64, 64, 64)  # the kernel most rejections below start from
image_mv = image_matvec_ast(256, 64)  # and the one UPCASTMID needs (an image, its reduce grouped)
REJECTIONS = [
    # (kernel, target, opts that apply, the rejected opt, a fragment of the reason)
    ("not_using_locals", elementwise_ast(4096), "opencl", [Opt(NOLOCALS)], Opt(LOCAL, 0, 4), "not using locals"),
    ("not_using_locals_group", sum_ast((4096,)), "opencl", [Opt(NOLOCALS)], Opt(GROUP, 0, 4), "not using locals"),
    ("invalid_axis", matmul_64, "opencl", [], Opt(UPCAST, 9, 4), "invalid axis"),
    ("invalid_unroll_axis", matmul_64, "opencl", [], Opt(UNROLL, 1, 4), "invalid axis"),
    ("amt_1", matmul_64, "opencl", [], Opt(UPCAST, 0, 1), "shift/padto of amt 1"),
    ("padto_amt_1", matmul_64, "opencl", [], Opt(PADTO, 0, 1), "shift/padto of amt 1"),
    ("no_longer_valid_shift", matmul_64, "opencl", [], Opt(UPCAST, 0, 3), "no longer valid shift"),
    ("shared_memory", sum_ast((1 << 20,)), "opencl", [], Opt(GROUP, 0, 16384), "exceeds maximum shared memory size"),
    (
        "shared_memory_with_locals_and_upcasts",
        matvec_ast(1024, 1024),
        "opencl",
        [Opt(LOCAL, 0, 32), Opt(UPCAST, 0, 8), Opt(GROUP, 0, 32)],
        Opt(GROUP, 0, 8),
        "exceeds maximum shared memory size",
    ),
    ("local_is_for_globals", sum_ast((64, 16), (1,)), "opencl", [], Opt(LOCAL, 1, 4), "local is for globals"),
    ("local_on_clang", elementwise_ast(4096), "clang", [], Opt(LOCAL, 0, 4), "does not support local"),
    ("group_on_clang", sum_ast((4096,)), "clang", [], Opt(GROUP, 0, 4), "does not support local or shared mem"),
    (
        "group_an_unrolled_axis",
        sum_ast((64, 16), (1,)),
        "opencl",
        [Opt(UNROLL, 0, 0)],
        Opt(GROUP, 0, 4),
        "must be reduce axis to group",
    ),
    ("group_with_tensor_cores", matmul_64, "metal", [Opt(TC, 0, 0)], Opt(GROUP, 0, 2), "can't group with tensor cores"),
    ("unroll_upcasted", matmul_64, "opencl", [Opt(UPCAST, 0, 4)], Opt(UNROLL, 1, 4), "can't upcasted already upcasted"),
    ("unroll_more_than_32", sum_ast((64, 128), (1,)), "opencl", [], Opt(UNROLL, 0, 64), "don't unroll more than 32"),
    ("upcast_a_reduce_axis", matmul_64, "opencl", [], Opt(UPCAST, 2, 4), "upcast is for non-reduce"),
    ("upcast_tc_locals", matmul_64, "metal", [Opt(TC, 0, 0)], Opt(UPCAST, 2, 2), "can't upcast TC locals"),
    ("upcast_more_than_8", matmul_64, "opencl", [], Opt(UPCAST, 0, 16), "don't upcast more than 8"),
    ("upcastmid_not_image", matmul_64, "opencl", [], Opt(UPCASTMID, 0, 4), "invalid upcast mid reduce"),
    ("upcastmid_not_grouped", image_mv, "opencl", [], Opt(UPCASTMID, 0, 4), "invalid upcast mid reduce"),
    ("upcastmid_wrong_axis", image_mv, "opencl", [Opt(GROUP, 0, 16)], Opt(UPCASTMID, 1, 4), "wrong axis"),
    (
        "upcastmid_not_4",
        image_mv,
        "opencl",
        [Opt(GROUP, 0, 16)],
        Opt(UPCASTMID, 0, 2),
        "don't upcast mid anything but 4",
    ),
    ("nolocals_on_clang", elementwise_ast(4096), "clang", [], Opt(NOLOCALS), "NOLOCALS is meaningless"),
    ("nolocals_twice", elementwise_ast(4096), "opencl", [Opt(NOLOCALS)], Opt(NOLOCALS), "NOLOCALS is meaningless"),
    (
        "nolocals_with_locals",
        elementwise_ast(4096),
        "opencl",
        [Opt(LOCAL, 0, 4)],
        Opt(NOLOCALS),
        "can't have no locals",
    ),
    ("nolocals_with_group", sum_ast((4096,)), "opencl", [Opt(GROUP, 0, 4)], Opt(NOLOCALS), "can't have no locals"),
    ("pad_upcasted", matmul_ast(16, 17, 17), "opencl", [Opt(UPCAST, 0, 4)], Opt(PADTO, 3, 8), "cannot pad upcasted"),
    ("pad_under_recip", unary_sum_ast(UnaryOps.RECIP), "opencl", [], Opt(PADTO, 1, 32), "cannot pad"),
    ("pad_under_exp2", unary_sum_ast(UnaryOps.EXP2), "opencl", [], Opt(PADTO, 1, 32), "cannot pad"),
    ("pad_under_log2", unary_sum_ast(UnaryOps.LOG2), "opencl", [], Opt(PADTO, 1, 32), "cannot pad"),
    (
        "pad_under_idiv",
        unary_sum_ast(BinaryOps.IDIV, dtype=dtypes.int32),
        "opencl",
        [],
        Opt(PADTO, 1, 32),
        "cannot pad",
    ),
    ("pad_max_reduce", max_ast(), "opencl", [], Opt(PADTO, 1, 32), "cannot pad"),
    ("pad_more_than_quadruple", matmul_ast(15, 15, 15), "opencl", [], Opt(PADTO, 0, 64), "at least quadruple"),
    ("pad_exactly_quadruple", matmul_ast(512, 512, 512), "opencl", [], Opt(PADTO, 0, 2048), "at least quadruple"),
    ("unroll_a_whole_symbolic_axis", attention_ast(), "opencl", [], Opt(UPCAST, 0, 0), "symbolic size"),
    ("local_after_upcasts", matmul_64, "opencl", [Opt(LOCAL, 0, 4)], Opt(LOCAL, 2, 4), "is not one of the 2 globals"),
    ("pad_nothing", matmul_ast(32, 32, 32), "opencl", [], Opt(PADTO, 0, 16), "nothing was padded"),
    ("tc_not_first", matmul_64, "metal", [Opt(UPCAST, 0, 4)], Opt(TC, 0, 0), "tensor core opts must be first"),
    ("tc_on_a_sum", sum_ast((64, 64), (1,)), "metal", [], Opt(TC, 0, 0), "no tensor core available"),
    ("tc_float_on_cuda", matmul_64, "cuda", [], Opt(TC, 0, 0), "no tensor core available"),
    ("tc_without_tensor_cores", matmul_64, "opencl", [], Opt(TC, 0, 0), "must have tensor cores"),
    ("tc_choice_out_of_range", matmul_64, "metal", [], Opt(TC, 5, 0), "no tensor core available"),
]


@pytest.mark.parametrize(
    "ast, target, before, opt, reason", [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS]
)
def test_rejected_opt_says_why(ast, target, before, opt, reason):
    k = new_kernel(ast, target, *before)
    with pytest.raises(KernelOptError) as excinfo:
        k.apply_opt(opt)
    assert reason in str(excinfo.value)


def _rejection_holds(msg: str, k: Kernel, opt: Opt) -> bool:
    """Is what a KernelOptError says true of k, the kernel the opt was refused on: the condition it names is the one
    that failed, with k's own numbers?"""
    ax = opt.real_axis(k) if opt.axis is not None else None
    amt = (
        (opt.amt or (k.full_shape[ax] if ax is not None and ax < k.shape_len else None))
        if opt.amt is not None
        else None
    )
    sts, fr, up, device = k.sts, k.first_reduce, k.shape_len - k.upcasted, k.opts.device
    mid = {"the output is not an image": lambda: not k.bufs[0].dtype.name.startswith("image")}
    mid |= {"the reduce is not grouped": lambda: k.group_for_reduces == 0}
    no = {
        "local threads": lambda: not k.opts.has_local,
        "local memory": lambda: k.opts.has_local and not k.opts.has_shared,
    }
    patterns = {
        r"not using locals: after NOLOCALS, no (\w+)": lambda op: k.dont_use_locals and op == opt.op.name,
        r"invalid axis: (\d+)(?: \((\w+) counts (\d+) from axis (\d+)\))?"
        r" is not one of the (\d+) axes": lambda a, op, n, b, s: (
            int(a) == ax >= int(s) == k.shape_len
            and (op is None or (op == opt.op.name and int(n) == opt.axis and int(b) == ax - opt.axis))
        ),
        r"shift/padto of amt 1 or Node is meaningless: amount 1": lambda: amt == 1,
        r"shift/padto of amt 1 or Node is meaningless: the whole axis, of symbolic size (.+)": lambda s: (
            opt.amt == 0 and not isinstance(k.full_shape[ax], int) and kernel.sym_render(k.full_shape[ax]) == s
        ),
        r"no longer valid shift: (\d+) does not divide axis (\d+) \((\d+)\)": lambda a, x, s: (
            int(a) == amt and int(x) == ax and k.full_shape[ax] == int(s) and int(s) % int(a) != 0
        ),
        r"exceeds maximum shared memory size: needs (\d+), max (\d+)": lambda n, m: (
            int(m) == k.opts.shared_max < int(n)
        ),
        r"local is for globals: axis (\d+) is not one of the (\d+) globals": lambda a, g: (
            int(a) == ax >= int(g) == k.global_dims
        ),
        r"target does not support local: the (\w+) target has no local threads": lambda d: (
            d == device and not k.opts.has_local
        ),
        r"target does not support local or shared mem: the (\w+) target"
        r" has no (local threads|local memory)": lambda d, w: d == device and no[w](),
        r"must be reduce axis to group: axis (\d+) is not in the ungrouped ones, \[(.*)\]": lambda a, xs: (
            int(a) == ax
            and xs == ", ".join(map(str, range(fr + k.group_for_reduces, up)))
            and ax not in range(fr + k.group_for_reduces, up)
        ),
        r"can't group with tensor cores": lambda: k.tensor_core is not None,
        r"can't upcasted already upcasted: axis (\d+) is upcasted": lambda a: int(a) == ax >= up,
        r"don't unroll more than 32 \(asked (\d+)\)": lambda n: int(n) == amt > 32,
        r"upcast is for non-reduce: axis (\d+) is not before the first reduce axis (\d+)": lambda a, f: (
            int(a) == ax >= int(f) == fr
        ),
        r"can't upcast TC locals": lambda: k.tensor_core is not None and k.global_dims <= ax,
        r"don't upcast more than 8 \(asked (\d+)\)": lambda n: int(n) == amt > 8,
        r"invalid upcast mid reduce: (.+)": lambda why: mid[why](),
        r"wrong axis: the output's unit-stride axis is (\d+), not (\d+)": lambda u, a: (
            sts[0].unit_stride_axes() == [int(u)] != [int(a)] == [ax]
        ),
        r"don't upcast mid anything but 4": lambda: amt != 4,
        r"NOLOCALS is meaningless: the (\w+) target has no local threads": lambda d: (
            d == device and not k.opts.has_local
        ),
        r"NOLOCALS is meaningless: it is applied": lambda: k.dont_use_locals,
        r"can't have no locals with locals: (\d+) local and (\d+) grouped axes": lambda n, g: (
            (int(n), int(g)) == (k.local_dims, k.group_for_reduces) != (0, 0)
        ),
        r"cannot pad upcasted: axis (\d+) is upcast": lambda a: int(a) == ax >= up,
        r"cannot pad: .+": lambda: ax >= fr,  # the reduce's source doesn't map 0 to 0 (test_numerics.py checks which)
        r"pad would at least quadruple the work: data(\d+)'s axis (\d+) of (\d+) becomes (\d+)"
        r" \((\d+) <= (\d+)//4\)": lambda b, a, n, m, n2, p: (
            int(a) == ax
            and int(p) == amt
            and n == n2
            and int(m) >= 4 * int(n)
            and int(m) == -(-int(n) // amt) * amt
            and sts[[getattr(x, "idx", None) for x in k.bufs].index(int(b))].shape[ax] == int(n)
        ),
        r"nothing was padded: axis (\d+) is a multiple of (\d+) wherever it isn't reduced": lambda a, m: (
            int(a) == ax and int(m) == amt and all(st.shape[ax] % amt == 0 or st.shape[ax] == 1 for st in sts)
        ),
        r"tensor core opts must be first: (\d+) applied already": lambda n: int(n) == len(k.applied_opts) > 0,
        r"must have tensor cores or TC=2: the (\w+) target has none, and TC is (\d)": lambda d, tc: (
            d == device and not k.opts.tensor_cores and int(tc) == k.opts.tc != 2
        ),
        r"no tensor core available: the kernel has no SUM reduce": lambda: (
            k.reduceop is None or k.reduceop.op is not ReduceOps.SUM
        ),
        r"no tensor core available: TC is 0": lambda: k.opts.tc == 0,
        r"no tensor core available: the (\w+) target has no (local threads|tensor cores)": lambda d, w: (
            d == device and k.opts.tc != 0 and (not k.opts.has_local if w == "local threads" else k.opts.has_local)
            and (w == "local threads" or not k.opts.tensor_cores)
        ),
        r"no tensor core available: none of (.+) fits \(its dtypes, a MUL of loads, axes, sizes\)": lambda names: (
            names == ", ".join(map(str, k.opts.tensor_cores)) and k.opts.has_local and k.reduceop.op is ReduceOps.SUM
        ),
    }
    for pattern, holds in patterns.items():
        if m := re.fullmatch(pattern, msg):
            return bool(holds(*m.groups()))
    raise AssertionError(f"a rejection no test checks: {msg!r}")


@pytest.mark.parametrize(
    "ast, target, before, opt, reason", [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS]
)
def test_every_rejection_states_the_condition_that_failed(ast, target, before, opt, reason):
    """`PADTO:0:2048` on a 512 axis said "st.shape[axis]=512 > amt//4=512", the check that failed
    printed as if it held. Each message states the violated condition with the kernel's own numbers."""
    k = new_kernel(ast, target, *before)
    with pytest.raises(KernelOptError) as excinfo:
        k.apply_opt(opt)
    assert _rejection_holds(str(excinfo.value), k, opt), str(excinfo.value)


@pytest.mark.parametrize(
    "ast, target, before, opt, reason", [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS]
)
def test_rejected_opt_changes_nothing(ast, target, before, opt, reason):
    """tinygrad may leave a kernel half-changed by a failed opt; kernel.py puts everything back."""
    k = new_kernel(ast, target, *before)
    expected = state(k)
    with pytest.raises(KernelOptError):
        k.apply_opt(opt)
    assert state(k) == expected
    # and the kernel still works: the next opt applies as it would have
    fresh = new_kernel(ast, target, *before)
    for o in (Opt(UPCAST, 0, 2), Opt(LOCAL, 0, 2), Opt(UNROLL, 0, 2)):
        try:
            fresh.apply_opt(o)
        except KernelOptError:
            continue
        k.apply_opt(o)
        break
    assert state(k) == state(fresh)


@pytest.mark.parametrize("op", [UPCAST, LOCAL, UNROLL, GROUP, GROUPTOP, PADTO])
def test_opt_without_an_amount_is_rejected(op):
    """Every split needs an amount: a missing one is a KernelOptError, not a crash inside reshape or pad."""
    k = new_kernel(matmul_ast(16, 16, 16) if op is not PADTO else matmul_ast(17, 17, 17))
    expected = state(k)
    with pytest.raises(KernelOptError, match="amount|amt"):
        k.apply_opt(Opt(op, 0))
    assert state(k) == expected


# malformed opts: a KernelOptError that names what is wrong, and the kernel unchanged
def test_an_opt_must_be_an_opt_not_its_text():
    k = new_kernel(elementwise_ast(16))
    with pytest.raises(KernelOptError, match="not an Opt: 'UPCAST:0:4'"):
        k.apply_opt("UPCAST:0:4")
    assert k.applied_opts == [] and k.full_shape == (16,)


def test_a_negative_axis_is_rejected():
    k = new_kernel(elementwise_ast(16))
    with pytest.raises(KernelOptError, match="UPCAST needs an int axis >= 0, got -1"):
        k.apply_opt(Opt(UPCAST, -1, 4))
    assert k.applied_opts == [] and k.full_shape == (16,)


def test_a_negative_amount_is_rejected():
    k = new_kernel(elementwise_ast(16))
    with pytest.raises(KernelOptError, match="UPCAST needs an int amount >= 0, got -4"):
        k.apply_opt(Opt(UPCAST, 0, -4))
    assert k.applied_opts == [] and k.full_shape == (16,)


def test_tc_needs_an_axis():
    """TC's axis picks which pair of axes the tensor core takes; TC without one is malformed, not TC:0."""
    k = new_kernel(matmul_ast(64, 64, 64), "metal")
    with pytest.raises(KernelOptError, match="TC needs an int axis >= 0, got None"):
        k.apply_opt(Opt(TC))
    assert k.applied_opts == [] and k.tensor_core is None


def test_safe_ops_can_be_padded_under_a_sum():
    """SQRT(0) == 0: padding its input with zeros doesn't change the sum."""
    k = new_kernel(unary_sum_ast(UnaryOps.SQRT), "opencl", Opt(PADTO, 1, 32))
    assert k.full_shape == (17, 32)


def test_unsafe_ops_only_block_padding_the_reduce_axis():
    k = new_kernel(unary_sum_ast(UnaryOps.RECIP), "opencl", Opt(PADTO, 0, 32))
    assert k.full_shape == (32, 17)
    k = new_kernel(max_ast(), "opencl", Opt(PADTO, 0, 32))
    assert k.full_shape == (32, 17)


def test_tc_after_a_rejected_opt_is_still_first():
    """A rejected opt is not in applied_opts, so TC may still come first."""
    k = new_kernel(matmul_ast(64, 64, 64), "metal")
    with pytest.raises(KernelOptError):
        k.apply_opt(Opt(UPCAST, 0, 3))
    k.apply_opt(Opt(TC, 0, 0))
    assert k.tensor_core is not None


def test_rejected_tc_padding_changes_nothing():
    """tc_opt=2 pads N, M and K with PADTO. Here K (2) can't be padded to 8 (more than quadruple), after N and M
    already were: tinygrad would leave N and M padded; kernel.py undoes them."""
    k = new_kernel(matmul_ast(20, 20, 2), "metal")
    expected = state(k)
    with pytest.raises(KernelOptError, match="no tensor core available"):
        k.apply_opt(Opt(TC, 0, 2))
    assert state(k) == expected and k.bufs_for_tensor_core == {}
    assert all(st.views[-1].mask is None for st in k.sts)


def test_opt_that_would_overrun_the_shape_is_rejected():
    """tinygrad 0.9.1 accepts a second UPCASTMID after a whole-axis GROUP, leaving more grouped axes than the shape
    has (its colors() then fails); kernel.py refuses it and keeps the kernel as it was."""
    k = Kernel(*image_matvec_ast(256, 256))
    k.apply_opt(Opt(OptOps.GROUP, 0, 256))
    k.apply_opt(Opt(OptOps.UPCASTMID, 0, 4))
    before = (k.full_shape, k.colors(), k.group_for_reduces)
    with pytest.raises(KernelOptError, match="more local, grouped and upcasted axes than the shape has"):
        k.apply_opt(Opt(OptOps.UPCASTMID, 2, 4))
    assert (k.full_shape, k.colors(), k.group_for_reduces) == before == ((64, 256, 4), ["blue", "green", "white"], 2)


# ============================================================================================================
# tensor cores
# ============================================================================================================


class TestTensorCores:
    @pytest.mark.parametrize("target, why", [("opencl", "the GPU target has no tensor cores"),
                                             ("clang", "the CLANG target has no local threads")])  # fmt: skip
    def test_tc_with_tc_2_is_refused_with_the_targets_reason(self, monkeypatch, target, why):
        """TC=2 lets the TC opt past the target's empty tensor core list; the refusal then names the first condition
        of _apply_tc_opt that fails, not the kernel's reduce (a matmul has a SUM)."""
        monkeypatch.setenv("TC", "2")
        k = new_kernel(matmul_ast(64, 64, 64), target)
        with pytest.raises(KernelOptError, match=f"^no tensor core available: {why}$"):
            k.apply_opt(Opt(TC, 0, 0))
        assert k.applied_opts == []
        with pytest.raises(KernelOptError, match="no tensor core available: the kernel has no SUM reduce"):
            new_kernel(elementwise_ast(64), "metal").apply_opt(Opt(TC, 0, 0))

    def test_metal_float_matmul_takes_the_tensor_core_and_the_follow_ups(self):
        """After TC: upcast M and N by 4 (the largest of 5, 4, 3, 2 that divides), then N by 2 as local."""
        k = new_kernel(matmul_ast(256, 256, 256), "metal")
        assert k.apply_tensor_cores(1)
        assert k.applied_opts == [Opt(TC, 0, 0), Opt(UPCAST, 0, 4), Opt(UPCAST, 1, 4), Opt(LOCAL, 1, 4)]
        assert shape_colors(k) == (
            (8, 2, 2, 4, 2, 2, 4, 32, 8, 2, 4, 4),
            ["blue", "blue"] + ["cyan"] * 5 + ["red", "magenta", "yellow", "yellow", "yellow"],
        )
        assert str(k.tensor_core) == "WMMA_8_8_8_float_float"
        assert k.bufs_for_tensor_core == {k.reduceop: (1, 2)}  # the two buffers of the MUL, for the linearizer

    def test_metal_follow_up_local_is_2_when_4_doesnt_divide(self):
        k = new_kernel(matmul_ast(64, 64, 64), "metal")
        assert k.apply_tensor_cores(1)
        assert k.applied_opts == [Opt(TC, 0, 0), Opt(UPCAST, 0, 4), Opt(UPCAST, 1, 4), Opt(LOCAL, 1, 2)]
        assert k.tensor_core_opts.axes_exist == (False, True)  # N was used up entirely

    def test_metal_half_matmul_uses_the_half_core(self):
        k = new_kernel(matmul_ast(64, 64, 64, dtypes.half), "metal")
        assert k.apply_tensor_cores(1)
        assert str(k.tensor_core) == "WMMA_8_8_8_half_half"

    def test_cuda_half_matmul_with_float_accumulate(self):
        k = new_kernel(matmul_ast(64, 64, 64, dtypes.half, dtypes.float), "cuda")
        assert k.apply_tensor_cores(1)
        assert str(k.tensor_core) == "WMMA_8_16_16_half_float"
        assert k.applied_opts == [Opt(TC, 0, 0), Opt(UPCAST, 0, 4), Opt(UPCAST, 0, 4), Opt(LOCAL, 0, 2)]
        assert shape_colors(k) == (
            (2, 2, 2, 2, 2, 2, 4, 16, 4, 4, 4),
            ["cyan"] * 6 + ["red", "magenta", "yellow", "yellow", "yellow"],
        )

    def test_cuda_float_matmul_does_not_take_tensor_cores(self):
        """CUDA's cores take half or bfloat16 inputs only."""
        k = new_kernel(matmul_ast(64, 64, 64), "cuda")
        before = state(k)
        assert not k.apply_tensor_cores(1)
        assert state(k) == before and k.bufs_for_tensor_core == {}

    def test_cuda_half_to_half_matmul_does_not_take_tensor_cores(self):
        assert not new_kernel(matmul_ast(64, 64, 64, dtypes.half), "cuda").apply_tensor_cores(1)

    def test_no_tensor_cores_on_opencl(self):
        assert not new_kernel(matmul_ast(64, 64, 64)).apply_tensor_cores(1)

    def test_extra_opts_replace_the_follow_ups(self):
        k = new_kernel(matmul_ast(64, 64, 64), "metal")
        assert k.apply_tensor_cores(1, extra_opts=[Opt(UPCAST, 0, 2)])
        assert k.applied_opts == [Opt(TC, 0, 0), Opt(UPCAST, 0, 2)]

    def test_tc_opt_0_needs_sizes_that_are_multiples_of_the_core(self):
        assert not new_kernel(matmul_ast(20, 20, 20), "metal").apply_tensor_cores(1, tc_opt=0)

    def test_tc_opt_2_pads_odd_sizes(self):
        k = new_kernel(matmul_ast(20, 20, 20), "metal")
        assert k.apply_tensor_cores(1, tc_opt=2)
        assert k.applied_opts[0] == Opt(TC, 0, 2)
        assert k.tensor_core_opts.axis_pads == ((1, 8), (0, 8), (2, 8))
        assert shape_colors(k) == (
            (2, 4, 2, 2, 3, 8, 2, 3, 3),
            ["cyan"] * 4 + ["red", "magenta", "yellow", "yellow", "yellow"],
        )

    def test_tc_opt_1_accepts_inputs_cast_before_the_multiply(self):
        assert not new_kernel(cast_matmul_ast(), "metal").apply_tensor_cores(1, tc_opt=0)
        k = new_kernel(cast_matmul_ast(), "metal")
        assert k.apply_tensor_cores(1, tc_opt=1)
        assert str(k.tensor_core) == "WMMA_8_8_8_float_float"

    def test_tc_2_shapes_the_kernel_without_a_tensor_core(self, monkeypatch):
        """TC=2 (the target's tc): the tensor core's shape, rendered as plain multiply-adds. tensor_core stays None,
        and the follow-up LOCAL (which is for real tensor cores) is skipped."""
        monkeypatch.setenv("TC", "2")
        k = Kernel(*matmul_ast(64, 64, 64), opts=TARGETS["metal"])
        assert k.apply_tensor_cores(1)
        assert k.tensor_core is None
        assert k.applied_opts == [Opt(TC, 0, 0), Opt(UPCAST, 0, 4), Opt(UPCAST, 1, 4)]
        assert k.full_shape == (2, 2, 2, 4, 2, 2, 8, 8, 2, 4, 4)

    def test_tc_0_turns_tensor_cores_off(self, monkeypatch):
        monkeypatch.setenv("TC", "0")
        k = Kernel(*matmul_ast(64, 64, 64), opts=TARGETS["metal"])
        before = state(k)
        assert not k.apply_tensor_cores(1)
        assert state(k) == before and k.bufs_for_tensor_core == {}
        with pytest.raises(KernelOptError, match="no tensor core available"):
            k.apply_opt(Opt(TC, 0, 0))


# ============================================================================================================
# the hand-coded heuristics, branch by branch
# ============================================================================================================


class TestHeuristics:
    # -- required: image outputs are written a pixel at a time --
    def test_image_output_requires_an_upcast_of_its_pixel_axis(self):
        k = new_kernel(image_out_ast(4, 8))
        k.required_optimizations()
        assert k.applied_opts == [Opt(UPCAST, 2, 4)]
        assert shape_colors(k) == ((4, 8, 4), ["blue", "blue", "yellow"])

    def test_float_output_requires_nothing(self):
        k = new_kernel(ew_ast((4, 8, 4)))
        k.required_optimizations()
        assert k.applied_opts == []

    # -- matvec --
    def test_matvec_groups_the_row_reduce(self):
        k = hand_coded(matvec_ast(1024, 768))
        assert k.applied_opts == [Opt(GROUP, 0, 8), Opt(LOCAL, 0, 4), Opt(UPCAST, 0, 4)]
        assert shape_colors(k) == ((64, 4, 8, 96, 4), ["blue", "cyan", "green", "red", "yellow"])

    def test_matvec_off_with_mv_0(self, monkeypatch):
        monkeypatch.setenv("MV", "0")
        assert hand_coded(matvec_ast(1024, 768)).applied_opts == [Opt(GROUPTOP, 0, 16)]

    def test_the_mv_knobs_set_matvecs_threads_blocksize_and_rows(self, monkeypatch):
        monkeypatch.setenv("MV_THREADS_PER_ROW", "16")
        assert hand_coded(matvec_ast(1024, 768)).applied_opts == [
            Opt(GROUP, 0, 16),
            Opt(LOCAL, 0, 4),
            Opt(UPCAST, 0, 4),
        ]
        monkeypatch.setenv("MV_THREADS_PER_ROW", "8")
        monkeypatch.setenv("MV_BLOCKSIZE", "2")
        monkeypatch.setenv("MV_ROWS_PER_THREAD", "2")
        assert hand_coded(matvec_ast(1024, 768)).applied_opts == [Opt(GROUP, 0, 8), Opt(LOCAL, 0, 2), Opt(UPCAST, 0, 2)]

    def test_matvec_knobs_all_1_turn_it_off(self, monkeypatch):
        for knob in ("MV_BLOCKSIZE", "MV_THREADS_PER_ROW", "MV_ROWS_PER_THREAD"):
            monkeypatch.setenv(knob, "1")
        assert hand_coded(matvec_ast(1024, 768)).applied_opts == [Opt(GROUPTOP, 0, 16)]

    def test_matvec_needs_the_reduce_to_divide_by_the_threads(self):
        """A reduce of 12 doesn't split over 8 threads: the kernel falls through to upcast, unroll and locals."""
        k = hand_coded(matvec_ast(1024, 12))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(UNROLL, 0, 0), Opt(LOCAL, 0, 32)]

    def test_matmul_is_not_a_matvec(self):
        """Both inputs broadcast along an axis: a matmul, not a matvec."""
        assert GROUP not in {o.op for o in hand_coded(matmul_ast(512, 512, 512)).applied_opts}

    # -- grouping: few outputs, long reduce --
    def test_full_reduce_groups_256_threads(self):
        k = hand_coded(sum_ast((1 << 20,)))
        assert k.applied_opts == [Opt(GROUPTOP, 0, 256)]
        assert shape_colors(k) == ((256, 4096), ["green", "red"])

    def test_group_16_when_256_doesnt_divide(self):
        k = hand_coded(sum_ast((4112,)))  # 16 * 257
        assert k.applied_opts == [Opt(GROUPTOP, 0, 16)]

    def test_group_16_when_more_than_32_outputs(self):
        k = hand_coded(sum_ast((512, 256), (1,)))
        assert k.applied_opts == [Opt(GROUPTOP, 0, 16)]
        assert shape_colors(k) == ((512, 16, 16), ["blue", "green", "red"])
        assert hand_coded(sum_ast((512, 256), (0,))).applied_opts == [Opt(GROUPTOP, 0, 16)]

    def test_group_falls_back_to_16_when_256_exceeds_shared_memory(self):
        small = dataclasses.replace(TARGETS["opencl"], shared_max=512)  # 256 floats need 1024 bytes
        assert hand_coded(sum_ast((1 << 16,)), opts=small).applied_opts == [Opt(GROUPTOP, 0, 16)]

    def test_no_group_for_many_outputs(self):
        k = hand_coded(sum_ast((4096, 64), (1,)))
        assert {o.op for o in k.applied_opts}.isdisjoint({GROUP, GROUPTOP})

    def test_small_matmul_groups_its_reduce(self):
        """256 outputs of a 16-long reduce: grouping wins over upcasting, and nothing follows a group."""
        k = hand_coded(matmul_ast(16, 16, 16))
        assert k.applied_opts == [Opt(GROUPTOP, 0, 16)]
        assert shape_colors(k) == ((16, 16, 16), ["blue", "blue", "green"])

    def test_upcastmid_for_an_image_output_of_a_grouped_reduce(self, monkeypatch):
        """After grouping, an image output is upcast by 4 mid-reduce (white). The required float4 upcast of an
        image output normally comes first and makes this branch unreachable, so it is switched off here."""
        monkeypatch.setattr(Kernel, "required_optimizations", lambda self: None)
        k = hand_coded(image_sum_ast(64, 256))
        assert k.applied_opts == [Opt(GROUPTOP, 0, 16), Opt(UPCASTMID, 0, 4)]
        assert shape_colors(k) == ((16, 16, 4, 16), ["blue", "green", "white", "red"])

    # -- images are read and written 4 floats at a time --
    def test_image_matvec_upcasts_the_pixel_then_takes_matvec(self):
        k = hand_coded(image_matvec_ast(256, 64))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(GROUP, 0, 8), Opt(LOCAL, 0, 4), Opt(UPCAST, 0, 4)]
        assert shape_colors(k) == ((4, 4, 8, 8, 4, 4), ["blue", "cyan", "green", "red", "yellow", "yellow"])

    def test_image_input_is_upcast_by_4_on_its_pixel_axis(self):
        k = hand_coded(image_in_ast(4, 8))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(LOCAL, 0, 32)]
        assert shape_colors(k) == ((32, 4), ["cyan", "yellow"])

    def test_image_input_pixel_axis_in_the_reduce_is_unrolled(self):
        k = hand_coded(image_in_sum_ast(32))
        assert k.applied_opts == [Opt(UNROLL, 0, 4), Opt(LOCAL, 0, 32)]
        assert shape_colors(k) == ((32, 4), ["cyan", "magenta"])

    # -- small masked axes are upcast whole --
    def test_small_masked_axis_is_upcast_whole(self):
        """stack of 2 vectors: the stacking axis (2) is masked in both inputs; upcasting it makes the masks
        compile-time constants."""
        k = hand_coded(stack_ast(256, 2))
        assert k.applied_opts == [Opt(UPCAST, 0, 0), Opt(LOCAL, 0, 32)]
        assert shape_colors(k) == ((8, 32, 2), ["blue", "cyan", "yellow"])

    def test_masked_axis_larger_than_7_is_not_upcast_whole(self):
        k = hand_coded(stack_ast(256, 8))
        assert Opt(UPCAST, 0, 0) not in k.applied_opts
        assert k.applied_opts[0] == Opt(UPCAST, 0, 4)

    # -- upcast broadcast axes while there are >= 1024 outputs --
    def test_broadcast_axes_are_upcast_for_reuse(self):
        """matmul: A has stride 0 on axis 1 and B on axis 0. Both axes have two moving buffers; the tie is broken by
        the sum of strides (1 + 1 on axis 1 against 512 + 512 on axis 0), so axis 1 is upcast first, each by 4."""
        k = hand_coded(matmul_ast(512, 512, 512))
        assert k.applied_opts[:2] == [Opt(UPCAST, 1, 4), Opt(UPCAST, 0, 4)]

    def test_broadcast_kernel_upcasts_its_broadcast_axis(self):
        k = hand_coded(broadcast_ast(256, 256))
        assert k.applied_opts[0] == Opt(UPCAST, 0, 4)

    def test_conv_upcasts_its_broadcast_axes(self):
        k = hand_coded(conv2d_ast())
        assert k.applied_opts[:2] == [Opt(UPCAST, 2, 4), Opt(UPCAST, 0, 4)]

    def test_no_broadcast_upcast_under_1024_outputs(self):
        """On clang (no grouping to stop the heuristics first): 16x16 outputs are too few to upcast a broadcast axis,
        32x32 = 1024 are enough. (On opencl the 16x16 matmul groups instead, and no later branch runs.)"""
        assert UPCAST not in {o.op for o in hand_coded(matmul_ast(16, 16, 16), "clang").applied_opts}
        assert hand_coded(matmul_ast(32, 32, 32), "clang").applied_opts[0] == Opt(UPCAST, 1, 4)

    # -- reduce unrolling --
    def test_short_reduce_is_unrolled_whole(self):
        k = hand_coded(sum_ast((4096, 16), (1,)))
        assert k.applied_opts == [Opt(UNROLL, 0, 0), Opt(LOCAL, 0, 32)]
        assert shape_colors(k) == ((128, 32, 16), ["blue", "cyan", "magenta"])

    def test_tiny_second_reduce_axis_is_unrolled_too(self):
        """conv 3x3: both 3-long filter axes are unrolled whole."""
        k = hand_coded(conv2d_ast())
        assert k.applied_opts[2:4] == [Opt(UNROLL, 2, 0), Opt(UNROLL, 1, 0)]
        assert k.colors()[-2:] == ["magenta", "magenta"]

    def test_long_reduce_is_unrolled_by_4(self):
        k = hand_coded(sum_ast((4096, 64), (1,)))
        assert k.applied_opts == [Opt(UNROLL, 0, 4), Opt(LOCAL, 0, 32)]
        assert shape_colors(k) == ((128, 32, 16, 4), ["blue", "cyan", "red", "magenta"])

    def test_long_reduce_not_divisible_by_4_is_not_unrolled(self):
        assert hand_coded(sum_ast((4096, 66), (1,))).applied_opts == [Opt(LOCAL, 0, 32)]

    # -- default upcast --
    def test_default_upcast_of_the_last_axis_by_4(self):
        k = hand_coded(elementwise_ast(4096))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(LOCAL, 0, 32)]
        assert shape_colors(k) == ((32, 32, 4), ["blue", "cyan", "yellow"])

    def test_no_default_upcast_when_4_doesnt_divide(self):
        assert hand_coded(elementwise_ast(4095)).applied_opts == [Opt(LOCAL, 0, 3)]

    # -- locals --
    def test_locals_rank_broadcast_axes_first_and_take_32_on_axis_0(self):
        """broadcast: axis 0 is broadcast in b, so it gets 32 threads first; axis 1 gets what's left of 128."""
        k = hand_coded(broadcast_ast(256, 256))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(LOCAL, 0, 32), Opt(LOCAL, 1, 4)]
        assert shape_colors(k) == ((2, 64, 32, 4, 4), ["blue", "blue", "cyan", "cyan", "yellow"])

    def test_locals_at_most_128_threads(self):
        k = hand_coded(matmul_ast(512, 512, 512))
        assert k.applied_opts[3:] == [Opt(LOCAL, 0, 8), Opt(LOCAL, 1, 16)]  # 8 * 16 = 128
        assert shape_colors(k) == (
            (16, 8, 8, 16, 128, 4, 4, 4),
            ["blue", "blue", "cyan", "cyan", "red", "yellow", "yellow", "magenta"],
        )

    def test_locals_on_at_most_3_axes(self):
        """Four unmergeable axes of 6: every one could take 3 threads, but only the last three do."""
        k = hand_coded(transposed_add_ast(6))
        assert k.applied_opts == [Opt(LOCAL, 1, 3), Opt(LOCAL, 2, 3), Opt(LOCAL, 3, 3)]
        assert shape_colors(k) == ((6, 2, 2, 2, 3, 3, 3), ["blue"] * 4 + ["cyan"] * 3)

    def test_local_that_takes_a_whole_axis_shifts_the_next(self):
        """image_out: LOCAL 0:4 uses up the height axis, so the width axis becomes axis 0."""
        k = hand_coded(image_out_ast(4, 8))
        assert k.applied_opts == [Opt(UPCAST, 2, 4), Opt(LOCAL, 0, 4), Opt(LOCAL, 0, 8)]
        assert shape_colors(k) == ((4, 8, 4), ["cyan", "cyan", "yellow"])

    def test_nolocals_env_replaces_the_locals(self, monkeypatch):
        monkeypatch.setenv("NOLOCALS", "1")
        k = hand_coded(elementwise_ast(4096))
        assert k.applied_opts == [Opt(UPCAST, 0, 4), Opt(NOLOCALS)]
        assert shape_colors(k) == ((1024, 4), ["BLUE", "yellow"])

    def test_nolocals_env_doesnt_touch_grouped_kernels(self, monkeypatch):
        monkeypatch.setenv("NOLOCALS", "1")
        assert hand_coded(matvec_ast(1024, 768)).applied_opts == [Opt(GROUP, 0, 8), Opt(LOCAL, 0, 4), Opt(UPCAST, 0, 4)]

    # -- targets --
    def test_clang_gets_no_locals_or_groups(self):
        k = hand_coded(matmul_ast(512, 512, 512), "clang")
        assert k.applied_opts == [Opt(UPCAST, 1, 4), Opt(UPCAST, 0, 4), Opt(UNROLL, 0, 4)]
        assert shape_colors(k) == ((128, 128, 128, 4, 4, 4), ["blue", "blue", "red", "yellow", "yellow", "magenta"])
        assert hand_coded(sum_ast((1 << 20,)), "clang").applied_opts == [Opt(UNROLL, 0, 4)]
        assert hand_coded(matvec_ast(1024, 768), "clang").applied_opts[0].op is not GROUP

    def test_cuda_float_matmul_gets_the_plain_heuristics(self):
        k = new_kernel(matmul_ast(64, 64, 64), "cuda")
        assert not k.apply_tensor_cores(1)
        k.hand_coded_optimizations()
        assert k.applied_opts == [
            Opt(UPCAST, 1, 4),
            Opt(UPCAST, 0, 4),
            Opt(UNROLL, 0, 4),
            Opt(LOCAL, 0, 8),
            Opt(LOCAL, 1, 16),
        ]

    def test_optimize_takes_tensor_cores_where_they_apply(self):
        """As tinygrad's get_linearizer (an image output's pixel is upcast first, and then TC is refused: the
        linearizer cases of test_golden.py)."""
        k = kernel.optimize(new_kernel(matmul_ast(64, 64, 64), "metal"))
        assert k.applied_opts[0] == Opt(TC, 0, 0)
        k = kernel.optimize(new_kernel(matmul_ast(64, 64, 64), "opencl"))
        assert k.applied_opts[0] == Opt(UPCAST, 1, 4)


# ============================================================================================================
# each tuned threshold at its boundary, from both sides: the last size that passes and the first that doesn't
# (worked out from tinygrad 0.9.1's rules; unlike the tests above, not yet checked against tinygrad itself)
# ============================================================================================================


def permuted_sum_ast(a: int, b: int) -> tuple[LazyOp, ...]:
    """out[i] = sum_{j, l} x[i, l, j] over (4096, a, b): the two reduce axes can't merge (x is read transposed)."""
    st = ShapeTracker.from_shape((4096, b, a)).permute((0, 2, 1))
    return (store(reduce(ReduceOps.SUM, load(1, st), (1, 2))),)


def padded_add_ast(shape: tuple[int, ...], padding: tuple[tuple[int, int], ...]) -> tuple[LazyOp, ...]:
    """out = pad(a) + b: the padded axes are masked in a's view."""
    a = ShapeTracker.from_shape(shape).pad(padding)
    return (store(alu(BinaryOps.ADD, load(1, a), load(2, ShapeTracker.from_shape(a.shape)))),)


def hand_coded_after(ast, target: str, *opts: Opt) -> list[Opt]:
    """The opts the heuristics add to a kernel that already has `opts`."""
    k = new_kernel(ast, target, *opts)
    k.hand_coded_optimizations()
    return k.applied_opts[len(opts) :]


class TestThresholds:
    # -- the heuristics --
    def test_reduce_is_unrolled_while_fewer_than_64_elements_are_upcast(self):
        """clang (no locals, so no grouping): a matmul already upcast 8x7 = 56 gets its 32-long reduce unrolled, one
        upcast 8x8 = 64 doesn't."""
        assert hand_coded_after(matmul_ast(64, 56, 32), "clang", Opt(UPCAST, 0, 8), Opt(UPCAST, 1, 7)) == [
            Opt(UNROLL, 0, 0)
        ]
        assert hand_coded_after(matmul_ast(64, 64, 32), "clang", Opt(UPCAST, 0, 8), Opt(UPCAST, 1, 8)) == []

    def test_reduce_of_32_is_unrolled_whole_and_of_36_by_4(self):
        assert hand_coded(sum_ast((4096, 32), (1,))).applied_opts == [Opt(UNROLL, 0, 0), Opt(LOCAL, 0, 32)]
        assert hand_coded(sum_ast((4096, 36), (1,))).applied_opts == [Opt(UNROLL, 0, 4), Opt(LOCAL, 0, 32)]

    @pytest.mark.parametrize("a, b, both", [(3, 3, True), (3, 4, False), (4, 3, False)])
    def test_second_reduce_axis_is_unrolled_too_when_both_are_at_most_3(self, a, b, both):
        """(4096, a, b) reducing a and b: the last (b) is unrolled whole; the other too only if a <= 3 and b <= 3."""
        unrolls = [o for o in hand_coded(permuted_sum_ast(a, b)).applied_opts if o.op is UNROLL]
        assert unrolls == ([Opt(UNROLL, 1, 0), Opt(UNROLL, 0, 0)] if both else [Opt(UNROLL, 1, 0)])

    def test_masked_axis_of_7_is_upcast_whole(self):
        """the largest size upcast whole (8 isn't: test_masked_axis_larger_than_7_is_not_upcast_whole)"""
        assert hand_coded(stack_ast(256, 7)).applied_opts[0] == Opt(UPCAST, 0, 0)

    def test_masked_axes_are_upcast_where_the_elements_stay_at_most_49(self):
        """7 x 7 masked axes: 49 elements, both upcast. 2 x 5 x 5: 2, then 10, then 50 > 49, so the third isn't. An
        axis that doesn't fit is skipped and the next tried: 5, 3, 7, 2 take axes 0, 1 and 3 (5 * 3 * 2 = 30)."""
        opts = hand_coded(padded_add_ast((5, 5, 64), ((1, 1), (1, 1), (0, 0)))).applied_opts
        assert opts[:2] == [Opt(UPCAST, 1, 0), Opt(UPCAST, 0, 0)]
        opts = hand_coded(padded_add_ast((1, 3, 3, 64), ((0, 1), (1, 1), (1, 1), (0, 0)))).applied_opts
        assert [o for o in opts if o.op is UPCAST] == [Opt(UPCAST, 1, 0), Opt(UPCAST, 0, 0)]
        k = hand_coded(padded_add_ast((4, 2, 6, 1), ((0, 1),) * 4))
        assert k.applied_opts == [Opt(UPCAST, 3, 0), Opt(UPCAST, 1, 0), Opt(UPCAST, 0, 0)]
        assert k.full_shape == (7, 2, 3, 5)  # the 7 stays an output axis; 2, 3, 5 are upcast (last applied, first)

    def test_broadcast_axis_is_upcast_from_1024_outputs(self):
        """b broadcast along axis 0 (of 4): 4 x 256 = 1024 outputs upcast it, 4 x 255 = 1020 don't (nothing is upcast
        yet, so the rule's threads, the outputs outside the upcast axes, are all the outputs)."""
        assert hand_coded(broadcast_ast(4, 256)).applied_opts[0] == Opt(UPCAST, 0, 4)
        assert UPCAST not in {o.op for o in hand_coded(broadcast_ast(4, 255)).applied_opts}

    def test_reduce_is_grouped_up_to_2048_outputs(self):
        assert hand_coded(sum_ast((2048, 256), (1,))).applied_opts == [Opt(GROUPTOP, 0, 16)]
        assert {o.op for o in hand_coded(sum_ast((2049, 256), (1,))).applied_opts}.isdisjoint({GROUP, GROUPTOP})

    def test_256_threads_share_a_reduce_up_to_32_outputs(self):
        assert hand_coded(sum_ast((32, 256), (1,))).applied_opts == [Opt(GROUPTOP, 0, 256)]
        assert hand_coded(sum_ast((33, 256), (1,))).applied_opts == [Opt(GROUPTOP, 0, 16)]

    # -- the checks of apply_opt --
    def test_unroll_takes_at_most_32(self):
        k = new_kernel(sum_ast((4, 64), (1,)), "opencl", Opt(UNROLL, 0, 32))
        assert shape_colors(k) == ((4, 2, 32), ["blue", "red", "magenta"])
        with pytest.raises(KernelOptError, match="don't unroll more than 32"):
            new_kernel(sum_ast((4, 66), (1,))).apply_opt(Opt(UNROLL, 0, 33))
        with pytest.raises(KernelOptError, match="don't unroll more than 32"):
            new_kernel(sum_ast((4, 33), (1,))).apply_opt(Opt(UNROLL, 0, 0))  # the whole axis counts too
        assert new_kernel(sum_ast((4, 32), (1,)), "opencl", Opt(UNROLL, 0, 0)).colors() == ["blue", "magenta"]

    def test_upcast_takes_at_most_8(self):
        assert new_kernel(elementwise_ast(72), "opencl", Opt(UPCAST, 0, 8)).full_shape == (9, 8)
        with pytest.raises(KernelOptError, match="don't upcast more than 8"):
            new_kernel(elementwise_ast(72)).apply_opt(Opt(UPCAST, 0, 9))

    def test_padto_pads_at_most_to_4_times_the_axis(self):
        """PADTO:0:32 pads an axis of 9 (under 4x the work), not one of 8 (8 is not > 32 // 4)."""
        assert new_kernel(matmul_ast(9, 9, 9), "opencl", Opt(PADTO, 0, 32)).full_shape == (32, 9, 9)
        with pytest.raises(KernelOptError, match=r"at least quadruple the work: data0's axis 0 of 8 becomes 32 \(8 <="):
            new_kernel(matmul_ast(8, 9, 9)).apply_opt(Opt(PADTO, 0, 32))

    def test_group_fills_shared_memory_exactly(self):
        """8192 float accumulators are 32768 bytes, OpenCL's shared_max: accepted; 16384 are refused (REJECTIONS)."""
        assert new_kernel(sum_ast((1 << 20,)), "opencl", Opt(GROUP, 0, 8192)).full_shape == (8192, 128)
        assert TARGETS["opencl"].shared_max == 8192 * 4


# ============================================================================================================
# tinygrad's linearizer members: Kernel methods only tinygrad's linearizer uses, kept as part of the Kernel
# ============================================================================================================
def _scaled_matmul() -> tuple[LazyOp, ...]:
    """out = sum_k a[i, k] * b[k, j] * 2 over 16x16x16: three global buffers and a CONST."""
    mul = matmul_ast(16, 16, 16)[0].src[0].src[0]
    return (store(reduce(ReduceOps.SUM, alu(BinaryOps.MUL, mul, const(2.0, (16, 16, 16))), (2,))),)


def test_membufs_are_the_global_buffers_in_order():
    k = Kernel(*_scaled_matmul())
    assert len(k.bufs) == 4 and [b.idx for b in k.membufs] == [0, 1, 2]  # the CONST is a buffer, not a membuf
    assert k.membufs == [b for b in k.bufs if isinstance(b, MemBuffer)] and k.membufs[0] is k.bufs[0]
    k.alias_buffer(k.reduceop, 1, [1, 0, 2])  # a local buffer isn't one either
    assert [b.idx for b in k.membufs] == [0, 1, 2] and len(k.bufs) == 5


def test_shape_offsets_count_the_upcasted_indices_last_axis_first():
    """What tinygrad 0.9.1 returns for these opts (run there): the last upcasted axis's index varies slowest."""
    k = Kernel(*_scaled_matmul())
    assert list(k.shape_offsets(0)) == [()]
    k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
    k.apply_opt(Opt(OptOps.UNROLL, 0, 4))
    assert k.full_shape == (8, 16, 4, 2, 4) and list(k.shape_offsets(0)) == [(0, 0), (0, 1)]  # the output: 1 x 2
    assert list(k.shape_offsets(1)) == list(itertools.product(range(4), range(2)))
    k.apply_opt(Opt(OptOps.UPCAST, 1, 4))
    assert list(k.shape_offsets(0)) == [(a, 0, c) for a in range(4) for c in range(2)]




def test_acc_offsets_share_one_register_across_unrolled_axes():
    """matmul: 4 x 4 upcast outputs and an unroll of 4: 64 elements, 16 accumulators, each used 4 times."""
    k = kernel.optimize(Kernel(*matmul_ast(512, 512, 512)))
    offsets = k.acc_offsets(k.full_buf_index)
    assert len(offsets) == 64 and sorted(set(offsets)) == list(range(16))
    assert all(offsets.count(x) == 4 for x in range(16))
    assert Kernel(*elementwise_ast(64)).acc_offsets(0) == [0]


def test_get_float4_upcast_dim_finds_unit_stride_upcast_axes():
    k = kernel.optimize(Kernel(*matmul_ast(512, 512, 512)))
    # a walks the unrolled axis 7 with stride 1, b and the output the upcast axis 5
    assert [k.get_float4_upcast_dim(i) for i in range(3)] == [[5], [7], [5]]
    clang = Kernel(*matmul_ast(512, 512, 512), opts=TARGETS["clang"])
    clang.apply_opt(Opt(UPCAST, 1, 4))
    assert clang.get_float4_upcast_dim(0) == []  # no float4 on this target


def test_alias_buffer_adds_a_local_copy_laid_out_by_the_pattern():
    k = Kernel(*matmul_ast(16, 16, 16))
    k.alias_buffer(k.reduceop, 1, [1, 0, 2])  # a: axis 0 innermost, axis 1 not stored, axis 2 outer
    local = k.bufs[-1]
    assert isinstance(local, kernel.LocalBuffer) and local.name == "ldata1" and local.size == 256
    assert k.sts[-1] == ShapeTracker((kernel.View.create((16, 1, 16), (1, 0, 16)),))
    assert k.local_alias[k.reduceop][1] is local
    assert not any(isinstance(b, kernel.LocalBuffer) for b in k.copy().bufs)  # local buffers belong to one rendering
    with pytest.raises(ValueError, match="pattern entry per axis"):
        k.alias_buffer(k.reduceop, 1, [1, 2])


# ============================================================================================================
# colours (the command lines, `python kernel.py demo` among them, are test_cli.py's)
# ============================================================================================================

ANSI = {"blue": 34, "BLUE": 94, "cyan": 36, "green": 32, "white": 37, "red": 31, "magenta": 35, "yellow": 33}


def test_colored_uses_tinygrads_ansi_codes():
    for name, code in ANSI.items():
        assert kernel.colored("x", name) == f"\x1b[{code}mx\x1b[0m"


def test_colored_shape_is_full_shape_in_colours():
    k = new_kernel(elementwise_ast(4096), "opencl", Opt(UPCAST, 0, 4), Opt(LOCAL, 0, 32))
    assert k.colored_shape() == "\x1b[34m  32\x1b[0m \x1b[36m  32\x1b[0m \x1b[33m   4\x1b[0m"
    assert k.colored_shape(dense=True) == "\x1b[34m32\x1b[0m \x1b[36m32\x1b[0m \x1b[33m4\x1b[0m"


@pytest.mark.parametrize(
    "ast, target, opts, colour",
    [
        (elementwise_ast(4096), "opencl", [], "blue"),
        (elementwise_ast(4096), "opencl", [Opt(NOLOCALS)], "BLUE"),
        (elementwise_ast(4096), "opencl", [Opt(LOCAL, 0, 4)], "cyan"),
        (sum_ast((4096,)), "opencl", [Opt(GROUP, 0, 4)], "green"),
        (image_matvec_ast(256, 64), "opencl", [Opt(GROUP, 0, 16), Opt(UPCASTMID, 0, 4)], "white"),
        (sum_ast((4096,)), "opencl", [], "red"),
        (sum_ast((64, 16), (1,)), "opencl", [Opt(UNROLL, 0, 4)], "magenta"),
        (elementwise_ast(4096), "opencl", [Opt(UPCAST, 0, 4)], "yellow"),
    ],
)
def test_each_colour_in_colored_shape(ast, target, opts, colour):
    k = new_kernel(ast, target, *opts)
    assert colour in k.colors()
    assert f"\x1b[{ANSI[colour]}m" in k.colored_shape()


def test_legend_names_all_eight_colours():
    assert list(demo.COLOR_LEGEND) == ["blue", "BLUE", "cyan", "green", "white", "red", "magenta", "yellow"]
