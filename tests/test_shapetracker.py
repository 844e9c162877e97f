"""The spec of kernel.py's shapes: the symbolic index algebra, View, and ShapeTracker.

A ShapeTracker describes how a shape maps onto a flat buffer without copying it. Each test below pins down one
rule, with the numbers worked out by hand (they follow tinygrad 0.9.1). The property tests at the end check the
meaning of a ShapeTracker independently of tinygrad: numpy applies the same movement ops to a real array, and
gathering through `ShapeTracker.indices()` must give the same elements.
"""

from __future__ import annotations

import random
import re
import time

import numpy as np
import pytest

from kernel import NumNode, ShapeTracker, Variable, View, create_ge_node, create_lt_node

V = View.create


def view(shape, strides, offset=0, mask=None) -> tuple:
    """The four fields a View is compared by, for readable expectations."""
    return (tuple(shape), tuple(strides), offset, None if mask is None else tuple(tuple(m) for m in mask))


def fields(v: View) -> tuple:
    return (v.shape, v.strides, v.offset, v.mask)


def gather(st: ShapeTracker, buffer: np.ndarray) -> np.ndarray:
    """Read `buffer` through `st`: what a kernel loading through this ShapeTracker sees (padding reads 0)."""
    idx, valid = (np.asarray(x) for x in st.indices())
    assert idx.shape == valid.shape == st.shape
    assert ((idx[valid] >= 0) & (idx[valid] < buffer.size)).all(), "a valid element reads outside the buffer"
    return np.where(valid, buffer[np.where(valid, idx, 0)], 0)


# ============================================================================================================
# symbolic index algebra
# ============================================================================================================


class TestSymbolic:
    def test_variable_knows_its_bounds(self):
        a = Variable("a", 0, 7)
        assert (a.min, a.max) == (0, 7)
        assert a.render() == "a"

    def test_variable_with_one_value_is_a_number(self):
        assert isinstance(Variable("z", 3, 3), NumNode)
        assert Variable("z", 3, 3) == 3

    def test_bounds_follow_the_arithmetic(self):
        a, b = Variable("a", 0, 7), Variable("b", 0, 3)
        e = a * 4 + b
        assert (e.min, e.max) == (0, 31)
        assert ((-a).min, (-a).max) == (-7, 0)
        assert ((a - 8).min, (a - 8).max) == (-8, -1)
        assert ((a // 2).min, (a // 2).max) == (0, 3)

    def test_constants_fold(self):
        a = Variable("a", 0, 7)
        assert NumNode(3) + 4 == 7
        assert NumNode(12) // 5 == 2
        assert NumNode(13) % 5 == 3
        assert (a + 2) + 3 == a + 5
        assert (a + 2 + 3).render() == "(5+a)"  # tinygrad's text: terms sorted as strings
        assert a * 0 == 0
        assert a * 1 is a

    def test_like_terms_merge(self):
        a, b = Variable("a", 0, 7), Variable("b", 0, 3)
        assert a * 2 + a * 3 == a * 5
        assert (a * 2 + b) - a * 2 == b
        assert (a * 2) * 3 == a * 6

    def test_div_and_mod_of_a_sum_factor_through_it(self):
        """(a*4 + b) with 0 <= b < 4 is a number in base 4: div takes the high digit, mod the low one."""
        a, b = Variable("a", 0, 7), Variable("b", 0, 3)
        assert (a * 4 + b) // 4 == a
        assert (a * 4 + b) % 4 == b
        assert (a * 8 + b) // 4 == a * 2  # b // 4 is always 0
        assert ((a * 4 + b) // 2).render() == "((a*2)+(b//2))"

    def test_mod_or_div_whose_range_makes_it_a_no_op_is_dropped(self):
        a = Variable("a", 0, 7)
        assert a % 8 is a
        assert a // 8 == 0
        assert (a + 8) % 8 == a  # a constant shift that never wraps

    def test_mod_of_a_mod_by_a_multiple_takes_the_inner_mod_off(self):
        """(a % 8) % 4 == a % 4, because 4 divides 8. With a in [0, 31] the inner % 8 really wraps (in [0, 7] it
        would vanish first and the rule would never run). Checked at every value of a by evaluating the rendered
        text in Python, which shares no code with the algebra."""
        a = Variable("a", 0, 31)
        assert (a % 8) % 4 == a % 4 and ((a % 8) % 4).render() == "(a%4)"
        assert (a % 8) // 4 == (a // 4) % 2
        for expr, want in [
            ((a % 8) % 4, lambda v: (v % 8) % 4),
            ((a % 8) // 4, lambda v: (v % 8) // 4),
            ((a % 6) % 4, lambda v: (v % 6) % 4),  # 4 doesn't divide 6: no shortcut (a % 4 is wrong at a = 6)
            ((a % 12) % 8, lambda v: (v % 12) % 8),  # nor does 8 divide 12
        ]:
            text = expr.render()
            assert [eval(text, {"a": v}) for v in range(32)] == [want(v) for v in range(32)], text
        assert "%6" in ((a % 6) % 4).render()

    def test_nested_div_and_mod_combine(self):
        x = Variable("x", 0, 15)
        assert (x // 2) // 4 == x // 8
        assert (x % 8) // 4 == (x // 4) % 2

    def test_negative_numerator_keeps_floor_division(self):
        a = Variable("a", 0, 7)
        e = (a - 8) // 4  # -8 .. -1 -> -2 .. -1
        assert (e.min, e.max) == (-2, -1)

    def test_render_is_tinygrads_python_text(self):
        a, b = Variable("a", 0, 7), Variable("b", 0, 3)
        assert (a * 4 + b).render() == "((a*4)+b)"
        assert ((a * 4 + b) * 2).render() == "((a*8)+(b*2))"
        x = Variable("x", 0, 11)
        assert ((x % 3) * 4 + x // 3).render() == "(((x%3)*4)+(x//3))"  # Python's // (render.py writes C's /)

    def test_comparisons_simplify(self):
        a, b = Variable("a", 0, 7), Variable("b", 0, 3)
        assert create_lt_node(a * 4 + b, 8).render() == "(a<2)"  # b < 4 can't change the answer
        assert create_lt_node(a, 8) == 1  # always true
        assert create_lt_node(a, 0) == 0  # never true
        assert create_ge_node(a, 2).render() == "((a*-1)<-1)"


# ============================================================================================================
# View.create: canonical form
# ============================================================================================================


class TestViewCreate:
    def test_default_strides_are_row_major(self):
        assert fields(V((2, 3, 4))) == view((2, 3, 4), (12, 4, 1))
        assert V((2, 3, 4)).contiguous

    def test_size_one_axes_get_stride_zero(self):
        v = V((1, 4, 1), (4, 1, 1))
        assert v.strides == (0, 1, 0)
        assert v.contiguous  # the same view as V((1, 4, 1))
        assert v == V((1, 4, 1))

    def test_all_covering_mask_is_dropped(self):
        v = V((2, 3), mask=((0, 2), (0, 3)))
        assert v.mask is None
        assert v == V((2, 3))

    def test_mask_leaving_one_index_folds_into_offset(self):
        """Axis 0 can only be 1 here, so it doesn't move the index: stride 0, and 1*3 goes into the offset."""
        v = V((4, 3), (3, 1), 0, ((1, 2), (0, 3)))
        assert fields(v) == view((4, 3), (0, 1), 3, ((1, 2), (0, 3)))

    def test_empty_mask_zeroes_strides_and_offset(self):
        v = V((4, 3), (3, 1), 5, ((0, 0), (0, 3)))
        assert fields(v) == view((4, 3), (0, 0), 0, ((0, 0), (0, 0)))

    def test_zero_sized_shape_has_zero_strides(self):
        v = V((0, 4))
        assert fields(v) == view((0, 4), (0, 0))

    def test_offset_or_mask_makes_a_view_non_contiguous(self):
        assert not V((4,), (1,), 1).contiguous
        assert not V((4,), mask=((1, 4),)).contiguous
        assert not V((2, 2), (1, 2)).contiguous

    def test_equal_views_compare_equal(self):
        assert V((2, 3), (3, 1)) == V((2, 3))
        assert hash(V((2, 3), (3, 1))) == hash(V((2, 3)))


# ============================================================================================================
# View movement ops
# ============================================================================================================


class TestViewReshape:
    def test_reshape_of_contiguous_is_contiguous(self):
        assert V((4, 6)).reshape((2, 12)) == V((2, 12))
        assert V((4, 6)).reshape((24,)).contiguous

    def test_reshape_to_same_shape_is_identity(self):
        v = V((4, 3), (1, 4))
        assert v.reshape((4, 3)) is v

    def test_reshape_merges_axes_that_walk_memory_as_one(self):
        """A (2,3,4) window at offset 5 of a (.., 3, 4) buffer: axes 0 and 1 step 12 and 4, so they merge."""
        v = V((2, 3, 4), (12, 4, 1), 5)
        assert fields(v.reshape((6, 4))) == view((6, 4), (4, 1), 5)

    def test_reshape_splits_a_strided_axis(self):
        assert fields(V((12,), (2,)).reshape((3, 4))) == view((3, 4), (8, 2))

    def test_reshape_splits_a_broadcast_axis_into_broadcast_axes(self):
        assert fields(V((4, 3), (0, 1)).reshape((2, 2, 3))) == view((2, 2, 3), (0, 0, 1))

    def test_reshape_of_padded_view_keeps_mask(self):
        padded = V((2, 4)).pad(((0, 0), (1, 1)))
        assert fields(padded) == view((2, 6), (4, 1), -1, ((0, 2), (1, 5)))
        assert fields(padded.reshape((2, 1, 6))) == view((2, 1, 6), (4, 0, 1), -1, ((0, 2), (0, 1), (1, 5)))

    def test_reshape_that_cuts_a_mask_returns_none(self):
        """Flattening a (2, 6) view padded on its last axis: the valid elements are not one range of the result."""
        assert V((2, 4)).pad(((0, 0), (1, 1))).reshape((12,)) is None

    def test_reshape_of_transposed_view_returns_none(self):
        """Memory order 0,4,8,1,5,9,... is not a single stride: one View can't flatten a transpose."""
        assert V((3, 4)).permute((1, 0)).reshape((12,)) is None

    def test_shapetracker_stacks_a_view_when_one_cant_express_the_reshape(self):
        st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,))
        assert [fields(v) for v in st.views] == [view((4, 3), (1, 4)), view((12,), (1,))]
        assert st.shape == (12,)
        assert list(gather(st, np.arange(12))) == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]

    def test_shapetracker_reshape_that_one_view_can_express_keeps_one_view(self):
        st = ShapeTracker.from_shape((12,)).stride((2,)).reshape((2, 3))
        assert [fields(v) for v in st.views] == [view((2, 3), (6, 2))]


class TestViewPadShrink:
    def test_pad_moves_offset_back_and_masks_the_border(self):
        v = V((2, 3)).pad(((1, 0), (0, 2)))
        assert fields(v) == view((3, 5), (3, 1), -3, ((1, 3), (0, 3)))

    def test_pad_with_zeros_is_identity(self):
        v = V((2, 3))
        assert v.pad(((0, 0), (0, 0))) is v

    def test_shrink_moves_offset_forward(self):
        assert fields(V((4, 5)).shrink(((1, 3), (2, 5)))) == view((2, 3), (5, 1), 7)

    def test_shrink_undoes_pad(self):
        assert V((2, 3)).pad(((1, 1), (1, 1))).shrink(((1, 3), (1, 4))) == V((2, 3))

    def test_shrink_into_padding_narrows_the_mask(self):
        v = V((4,)).pad(((2, 2),)).shrink(((1, 5),))  # keeps one pad element, then elements 0..2
        assert fields(v) == view((4,), (1,), -1, ((1, 4),))


class TestViewExpandPermuteStride:
    def test_expand_only_size_one_axes(self):
        assert fields(V((1, 4)).expand((3, 4))) == view((3, 4), (0, 1))
        with pytest.raises(ValueError, match="expand"):
            V((2, 4)).expand((3, 4))

    def test_expand_of_masked_size_one_axis_stretches_the_mask(self):
        v = V((1, 3)).pad(((0, 0), (1, 0))).expand((5, 4))
        assert fields(v) == view((5, 4), (0, 1), -1, ((0, 5), (1, 4)))

    def test_permute_reorders_shape_strides_and_mask(self):
        assert fields(V((2, 3, 4)).permute((2, 0, 1))) == view((4, 2, 3), (1, 12, 4))
        v = V((2, 3)).pad(((1, 0), (0, 0))).permute((1, 0))
        assert fields(v) == view((3, 3), (1, 3), -3, ((0, 3), (1, 3)))

    def test_stride_takes_every_nth_element(self):
        assert fields(V((6,)).stride((2,))) == view((3,), (2,))
        assert fields(V((7,)).stride((3,))) == view((3,), (3,))  # 0, 3, 6

    def test_negative_stride_flips_the_axis_through_the_offset(self):
        assert fields(V((6,)).stride((-1,))) == view((6,), (-1,), 5)
        assert fields(V((5,)).stride((-2,))) == view((3,), (-2,), 4)  # elements 4, 2, 0

    def test_negative_stride_flips_the_mask(self):
        v = V((4,)).pad(((2, 1),)).stride((-1,))  # [x x 0 1 2 3 x] flipped is [x 3 2 1 0 x x]
        assert fields(v) == view((7,), (-1,), 4, ((1, 5),))

    def test_minify_merges_all_it_can(self):
        assert V((2, 3, 4)).minify() == V((24,))
        assert fields(V((2, 3, 4), (0, 4, 1)).minify()) == view((2, 12), (0, 1))
        v = V((4, 3), (1, 4))
        assert v.minify() == v  # a transpose has nothing to merge


class TestViewAdd:
    """`older + newer` merges two stacked views into one equivalent View, or gives None."""

    def test_contiguous_older_view_gives_the_newer_one(self):
        assert V((4, 3)) + V((2, 3), (6, 1)) == V((2, 3), (6, 1))

    def test_strided_view_on_a_transpose_merges(self):
        """Rows 0 and 2 of a transposed (3, 4) buffer: element (i, j) is at 2*i + 4*j."""
        merged = V((4, 3), (1, 4)) + V((2, 3), (6, 1))
        assert fields(merged) == view((2, 3), (2, 4))

    def test_flattened_transpose_does_not_merge(self):
        assert V((4, 3), (1, 4)) + V((12,)) is None

    def test_simplify_merges_the_stacked_views_when_it_can(self):
        st = ShapeTracker((V((4, 3), (1, 4)), V((2, 3), (6, 1))))
        assert [fields(v) for v in st.simplify().views] == [view((2, 3), (2, 4))]

    def test_simplify_keeps_views_that_cant_merge(self):
        st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,))
        assert st.simplify() == st

    def test_simplify_keeps_the_meaning(self):
        st = ShapeTracker((V((4, 3), (1, 4)), V((2, 3), (6, 1))))
        buf = np.arange(12)
        assert (gather(st, buf) == gather(st.simplify(), buf)).all()


# ============================================================================================================
# ShapeTracker
# ============================================================================================================


class TestShapeTracker:
    def test_from_shape_is_one_contiguous_view(self):
        st = ShapeTracker.from_shape((2, 3))
        assert st.views == (V((2, 3)),)
        assert (st.shape, st.size, st.contiguous) == ((2, 3), 6, True)

    def test_movement_ops_make_it_non_contiguous(self):
        st = ShapeTracker.from_shape((2, 3))
        assert not st.permute((1, 0)).contiguous
        assert not st.pad(((0, 1), (0, 0))).contiguous
        assert not st.shrink(((0, 2), (0, 2))).contiguous
        assert st.shrink(((0, 1), (0, 3))).contiguous  # the first row is still the start of memory, in order
        assert st.reshape((3, 2)).contiguous

    def test_two_views_are_never_contiguous(self):
        st = ShapeTracker((V((4, 3), (1, 4)), V((12,))))
        assert not st.contiguous

    def test_real_size_is_one_past_the_largest_index_read(self):
        assert ShapeTracker.from_shape((2, 3)).real_size() == 6
        assert ShapeTracker.from_shape((10,)).shrink(((2, 7),)).real_size() == 7
        assert ShapeTracker.from_shape((1, 4)).expand((3, 4)).real_size() == 4
        assert ShapeTracker.from_shape((0, 4)).real_size() == 0

    def test_expr_idxs_renders_the_flat_index(self):
        idx, valid = ShapeTracker.from_shape((4, 8)).expr_idxs()
        assert (idx.render(), valid.render()) == ("((idx0*8)+idx1)", "1")

    def test_expr_idxs_of_padding_has_a_validity_condition(self):
        idx, valid = ShapeTracker.from_shape((4,)).pad(((1, 1),)).expr_idxs()
        assert idx.render() == "(-1+idx0)"
        assert valid.render() == "(((idx0*-1)<0) and (idx0<5))"  # 1 <= idx0 < 5

    def test_expr_idxs_through_two_views_uses_div_and_mod(self):
        idx, valid = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,)).expr_idxs()
        assert idx.render() == "(((idx0%3)*4)+(idx0//3))"
        assert valid == 1

    def test_expr_idxs_of_broadcast_ignores_the_broadcast_axis(self):
        idx, _ = ShapeTracker.from_shape((1, 4)).expand((3, 4)).expr_idxs()
        assert idx.render() == "idx1"

    def test_expr_idxs_takes_given_index_expressions(self):
        st = ShapeTracker.from_shape((4, 8))
        idx, _ = st.expr_idxs([NumNode(2), Variable("x", 0, 7)])
        assert idx.render() == "(16+x)"

    def test_real_strides_of_one_view_are_its_strides(self):
        assert ShapeTracker.from_shape((3, 4)).permute((1, 0)).real_strides() == (1, 4)

    def test_real_strides_are_zero_for_broadcast_axes(self):
        assert ShapeTracker.from_shape((4,)).reshape((1, 4)).expand((3, 4)).real_strides() == (0, 1)

    def test_real_strides_are_none_for_masked_axes_unless_ignore_valid(self):
        st = ShapeTracker.from_shape((3, 4)).pad(((1, 1), (0, 0)))
        assert st.real_strides() == (None, 1)
        assert st.real_strides(ignore_valid=True) == (4, 1)

    def test_real_strides_are_none_under_div_or_mod(self):
        st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,))
        assert st.real_strides() == (None,)
        assert st.real_strides(ignore_valid=True) == (None,)

    def test_real_strides_through_two_views_when_affine(self):
        """Splitting the flattened transpose back into (4, 3) makes the index affine again."""
        st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,)).reshape((4, 3))
        assert st.real_strides() == (1, 4)

    def test_unit_stride_axes_are_the_stride_1_axes_unless_masked(self):
        assert ShapeTracker.from_shape((3, 4)).unit_stride_axes() == [1]
        assert ShapeTracker.from_shape((3, 4)).permute((1, 0)).unit_stride_axes() == [0]
        padded = ShapeTracker.from_shape((3, 4)).pad(((0, 0), (1, 0)))
        assert padded.unit_stride_axes() == []
        assert padded.unit_stride_axes(ignore_valid=True) == [1]

    def test_axis_is_masked_where_padding_masks_it(self):
        st = ShapeTracker.from_shape((3, 4)).pad(((1, 1), (0, 0)))
        assert [st.axis_is_masked(i) for i in range(2)] == [True, False]
        assert not ShapeTracker.from_shape((3, 4)).axis_is_masked(0)

    def test_masked_axis_hidden_by_a_second_view_is_still_masked(self):
        st = ShapeTracker.from_shape((3, 4)).pad(((1, 1), (0, 0))).reshape((20,))
        assert st.axis_is_masked(0)
        assert st.real_strides() == (None,)
        assert st.real_strides(ignore_valid=True) == (1,)


# ============================================================================================================
# errors: impossible movement ops raise ValueError naming the op, the shape and the argument
# ============================================================================================================


def assert_names(excinfo, op: str, shape: tuple, arg) -> None:
    msg = str(excinfo.value)
    assert op in msg, f"{msg!r} doesn't name the op {op!r}"
    assert str(tuple(shape)) in msg, f"{msg!r} doesn't name the shape {shape}"
    assert str(arg) in msg, f"{msg!r} doesn't name the argument {arg}"


ST = ShapeTracker.from_shape((2, 3))


@pytest.mark.parametrize(
    "op, arg",
    [
        ("reshape", (4, 2)),  # 8 elements, not 6
        ("reshape", (-1, 6)),
        ("expand", (4, 3)),  # axis 0 has size 2, not 1
        ("expand", (2, 3, 1)),  # a different number of axes
        ("permute", (0, 0)),
        ("permute", (1, 2)),
        ("permute", (0,)),
        ("pad", ((0, 0), (-1, 0))),
        ("pad", ((1, 1),)),  # one pair for two axes
        ("shrink", ((0, 3), (0, 3))),  # past the end of axis 0
        ("shrink", ((1, 0), (0, 3))),  # begin after end
        ("shrink", ((0, 2),)),
        ("stride", (0, 1)),
        ("stride", (1,)),
    ],
)
def test_impossible_movement_op_raises_value_error_naming_it(op, arg):
    with pytest.raises(ValueError) as excinfo:
        getattr(ST, op)(arg)
    assert_names(excinfo, op, ST.shape, arg)


def test_view_ops_raise_the_same_errors():
    with pytest.raises(ValueError, match=r"reshape.*\(2, 3\).*\(5,\)"):
        V((2, 3)).reshape((5,))
    with pytest.raises(ValueError, match="expand"):
        V((2, 3)).expand((2, 6))


def test_reshape_error_on_a_stacked_view_names_the_visible_shape():
    st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,))
    with pytest.raises(ValueError) as excinfo:
        st.reshape((5,))
    assert_names(excinfo, "reshape", (12,), (5,))


def test_pad_with_flat_tuple_names_pad():
    """A common slip: ((1, 1),) written as (1, 1)."""
    st = ShapeTracker.from_shape((4,))
    with pytest.raises(ValueError) as excinfo:
        st.pad((1, 1))
    assert_names(excinfo, "pad", (4,), (1, 1))


def test_negative_sizes_are_rejected():
    with pytest.raises(ValueError) as excinfo:
        ShapeTracker.from_shape((1, 3)).expand((-1, 3))
    assert_names(excinfo, "expand", (1, 3), (-1, 3))
    with pytest.raises(ValueError, match=r"\(-2, 3\)"):
        ShapeTracker.from_shape((-2, 3))


@pytest.mark.parametrize("op, arg", [("reshape", 6), ("permute", 1), ("expand", 6), ("stride", 2), ("shrink", (0, 1))])
def test_argument_that_is_not_a_tuple_names_the_op(op, arg):
    """reshape(6) instead of reshape((6,)): still an error that says which op and what it got."""
    with pytest.raises((ValueError, TypeError)) as excinfo:
        getattr(ST, op)(arg)
    assert op in str(excinfo.value) and str(arg) in str(excinfo.value)


# ============================================================================================================
# movement-op arguments and View fields are integers: Python ints, numpy integers, or symbolic Nodes
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


def test_errors_are_not_asserts():
    for op, arg in [("reshape", (7,)), ("expand", (5, 5)), ("permute", (1, 1)), ("shrink", ((0, 9), (0, 3)))]:
        with pytest.raises(ValueError):
            getattr(ST, op)(arg)


# ============================================================================================================
# indices(): what a ShapeTracker means, checked against numpy
# ============================================================================================================


def _factorizations(n: int, rng: random.Random) -> tuple[int, ...]:
    """A random shape of size n (a random grouping of its prime factors, sometimes with 1s mixed in)."""
    factors, p, m = [], 2, n
    while m > 1:
        while m % p == 0:
            factors.append(p)
            m //= p
        p += 1
    rng.shuffle(factors)
    shape: list[int] = []
    for f in factors:
        if shape and rng.random() < 0.5:
            shape[-1] *= f
        else:
            shape.append(f)
    for _ in range(rng.randint(0, 2)):
        shape.insert(rng.randint(0, len(shape)), 1)
    return tuple(shape) or (1,)


def _random_step(st: ShapeTracker, arr: np.ndarray, rng: random.Random) -> tuple[ShapeTracker, np.ndarray, str]:
    """Apply one random movement op to both the ShapeTracker and the numpy array."""
    shape = arr.shape
    ops = ["reshape", "permute", "pad", "shrink", "stride", "expand"]
    if arr.size > 2000:
        ops = ["reshape", "permute", "shrink", "stride"]
    op = rng.choice(ops)
    if op == "reshape":
        new = _factorizations(arr.size, rng) if arr.size else (0,)
        return st.reshape(new), arr.reshape(new), f"reshape{new}"
    if op == "permute":
        perm = list(range(len(shape)))
        rng.shuffle(perm)
        return st.permute(tuple(perm)), arr.transpose(perm), f"permute{tuple(perm)}"
    if op == "pad":
        arg = tuple((rng.randint(0, 2), rng.randint(0, 2)) for _ in shape)
        return st.pad(arg), np.pad(arr, arg), f"pad{arg}"
    if op == "shrink":
        arg = []
        for s in shape:
            b = rng.randint(0, s - 1)
            arg.append((b, rng.randint(b + 1, s)))
        arg = tuple(arg)
        return st.shrink(arg), arr[tuple(slice(b, e) for b, e in arg)], f"shrink{arg}"
    if op == "stride":
        arg = tuple(rng.choice([1, 1, -1, 2, -2, 3]) for _ in shape)
        return st.stride(arg), arr[tuple(slice(None, None, m) for m in arg)], f"stride{arg}"
    # expand: make a size-1 axis (reshape one in if there is none), then broadcast it
    if 1 not in shape:
        pos = rng.randint(0, len(shape))
        shape = shape[:pos] + (1,) + shape[pos:]
        st, arr = st.reshape(shape), arr.reshape(shape)
    new = tuple(rng.randint(2, 4) if s == 1 and rng.random() < 0.7 else s for s in shape)
    return st.expand(new), np.broadcast_to(arr, new), f"expand{new}"


@pytest.mark.parametrize("seed", range(6))
def test_indices_reproduce_numpy_movement_ops(seed):
    """Random chains of reshape, transpose, broadcast, zero padding, slicing and (negative) strides, applied to a
    numpy array and to a ShapeTracker: gathering the buffer through indices() gives numpy's array exactly."""
    rng = random.Random(seed)
    for _ in range(50):
        start = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 4)))
        buf = np.arange(1, int(np.prod(start)) + 1)  # 0 is reserved for padding
        st, arr = ShapeTracker.from_shape(start), buf.reshape(start)
        steps: list[str] = []
        for _ in range(rng.randint(1, 8)):
            st, arr, step = _random_step(st, arr, rng)
            steps.append(step)
            assert st.shape == arr.shape, f"{start} {steps}"
            got = gather(st, buf)
            assert (got == arr).all(), f"start {start}, steps {steps}:\n{got}\n!=\n{arr}"
        assert (gather(st.simplify(), buf) == arr).all(), f"simplify changed {start} {steps}"


@pytest.mark.parametrize("seed", range(3))
def test_real_strides_agree_with_indices(seed):
    """Where real_strides() gives a number, stepping along that axis moves the flat index by exactly it (between
    valid elements); a 0 stride means the axis never moves it."""
    rng = random.Random(100 + seed)
    for _ in range(40):
        start = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 3)))
        st, arr = ShapeTracker.from_shape(start), np.zeros(start)
        for _ in range(rng.randint(1, 5)):
            st, arr, _ = _random_step(st, arr, rng)
        if 0 in st.shape:
            continue
        idx, valid = (np.asarray(x) for x in st.indices())
        for axis, stride in enumerate(st.real_strides(ignore_valid=True)):
            if stride is None or st.shape[axis] < 2:
                continue
            lo = [slice(None)] * len(st.shape)
            hi = list(lo)
            lo[axis], hi[axis] = slice(0, -1), slice(1, None)
            both = valid[tuple(lo)] & valid[tuple(hi)]
            diff = idx[tuple(hi)] - idx[tuple(lo)]
            assert (diff[both] == stride).all(), f"{st} axis {axis} stride {stride}"


def test_indices_of_padding_are_invalid():
    idx, valid = ShapeTracker.from_shape((2,)).pad(((1, 2),)).indices()
    assert list(np.asarray(valid)) == [False, True, True, False, False]
    assert list(np.asarray(idx)[np.asarray(valid)]) == [0, 1]


def test_indices_of_one_element_read_through_a_masked_view():
    """The top view picks a single element (all strides 0) of a flattened, twice-padded buffer."""
    st = ShapeTracker.from_shape((2, 2)).pad(((1, 1), (1, 1))).reshape((16,))
    assert len(st.views) == 2
    # the padded (4, 4) grid is 0 0 0 0 / 0 1 2 0 / 0 3 4 0 / 0 0 0 0
    assert list(gather(st.shrink(((5, 6),)), np.arange(1, 5))) == [1]
    assert list(gather(st.shrink(((0, 1),)), np.arange(1, 5))) == [0]
    assert gather(st.shrink(((5, 7),)).reshape((1, 2)), np.arange(1, 5)).tolist() == [[1, 2]]


def test_an_empty_shrink_of_stacked_views_reads_nothing():
    """A zero-size shrink of a two-view ShapeTracker reads nothing; simplify() and indices() still work."""
    st = ShapeTracker.from_shape((2, 2)).pad(((1, 1), (1, 1))).reshape((16,)).shrink(((5, 5),))
    assert st.shape == (0,) and st.real_size() == 0
    idx, valid = st.indices()
    assert np.asarray(idx).shape == np.asarray(valid).shape == (0,)
    assert st.simplify().shape == (0,)


def test_empty_view_merges_with_a_masked_view_below():
    """An empty top view reads nothing: it merges with any view below it (tinygrad 0.9.1 asserts here)."""
    st = ShapeTracker.from_shape((4,)).pad(((1, 1),)).reshape((2, 3)).shrink(((0, 2), (1, 1)))
    assert len(st.views) == 2
    assert st.simplify().views == (View.create((2, 0)),)


def test_padding_merged_under_a_stride_2_view_rounds_its_mask_up():
    """A pad of 3 seen through a stride-2 view: the first valid row is ceil(3/2) = 2, not 1 (row 1 would read flat
    index -1). simplify() merges the two views; both read the same elements as numpy."""
    st = ShapeTracker.from_shape((10,)).pad(((3, 1),)).reshape((7, 2)).shrink(((0, 7), (0, 1)))
    merged = st.simplify()
    assert len(st.views) == 2 and len(merged.views) == 1 and merged.views[0].mask == ((2, 7), (0, 1))
    want = np.pad(np.arange(1, 11), (3, 1)).reshape(7, 2)[:, :1]
    assert (gather(st, np.arange(1, 11)) == want).all() and (gather(merged, np.arange(1, 11)) == want).all()


def test_the_view_constructor_refuses_fields_that_dont_fit_the_shape():
    """tinygrad's own test builds View(shape=(1,), strides=(0, 0), ...) with the constructor; Kernel then ended in an
    IndexError. The constructor checks its fields as View.create does."""
    with pytest.raises(ValueError, match=r"shape \(1,\) needs one stride and one mask range per axis"):
        View(shape=(1,), strides=(0, 0), offset=0, mask=None, contiguous=False)
    with pytest.raises(ValueError, match="mask"):
        View(shape=(4,), strides=(1,), offset=0, mask=((0, 2), (0, 1)), contiguous=False)
    assert View(shape=(4,), strides=(1,), offset=0, mask=None, contiguous=True) == View.create((4,))


def test_indices_of_a_4096x4096_view_are_fast():
    """indices() is vectorised: a 16M-element view (masked, flipped and permuted) takes well under a second."""
    st = ShapeTracker.from_shape((4096, 4096)).pad(((1, 1), (0, 0))).stride((-1, 1)).shrink(((1, 4097), (0, 4096)))
    st = st.permute((1, 0))
    best = min(_timed(st.indices) for _ in range(3))
    assert best < 1.0, f"indices() of {st.shape} took {best:.2f}s"  # ~0.05 s here; a Python loop would take minutes


def test_indices_through_two_4096x4096_views_are_fast():
    st = ShapeTracker.from_shape((4096, 4096)).permute((1, 0)).reshape((4096 * 4096,)).reshape((2048, 8192))
    assert len(st.views) == 2
    best = min(_timed(st.indices) for _ in range(3))
    assert best < 2.0, f"indices() through {len(st.views)} views took {best:.2f}s"  # ~0.1 s here


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def test_views_are_hashable_and_cached():
    """Views are immutable values: used as dict keys, and movement ops on equal views give equal results."""
    assert {V((2, 3)): 1}[V((2, 3), (3, 1))] == 1
    assert V((2, 3)).permute((1, 0)) == V((2, 3)).permute((1, 0))
    assert re.search(r"View\(shape=\(2, 3\)", repr(V((2, 3))))
