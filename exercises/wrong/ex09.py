"""Exercise 9 (kernel.py:Kernel._opt_padto): seeded wrong answers, each a mistake a student makes."""

from kernel import KernelOptError, check, reduce_padding_changes, round_up


def _padto(self, axis, amt, strict_quadruple, skip_reduced, check_reduce, check_upcast=True):
    check(not self.vars, "does not work with symbolic shape")
    check(axis < self.shape_len - self.upcasted or not check_upcast, f"cannot pad upcasted: axis {axis} is upcast")
    if check_reduce and self.first_reduce <= axis and (why := reduce_padding_changes(self)) is not None:
        raise KernelOptError(f"cannot pad: {why}")
    padded = False
    for i, st in enumerate(self.sts):
        if st.shape[axis] == 1 and skip_reduced:
            continue
        size, ru = st.shape[axis], round_up(st.shape[axis], amt) - st.shape[axis]
        check(size > amt // 4 if strict_quadruple else size >= amt // 4, "pad would at least quadruple the work")
        if ru:
            self.sts[i] = st.pad(((0, 0),) * axis + ((0, ru),) + ((0, 0),) * (len(st.shape) - axis - 1))
            padded = True
    check(padded, f"nothing was padded: axis {axis}")


def ge_for_gt(self, axis, amt):
    """`>=` for `>` in the quadruple rule: an axis of exactly amt//4 padded, where tinygrad refuses."""
    _padto(self, axis, amt, strict_quadruple=False, skip_reduced=True, check_reduce=True)


def reduced_buffer_padded(self, axis, amt):
    """A buffer whose axis is reduced (size 1 there) checked and padded too: its 1 fails the quadruple rule."""
    _padto(self, axis, amt, strict_quadruple=True, skip_reduced=False, check_reduce=True)


def reduce_op_unchecked(self, axis, amt):
    """A reduce axis padded whatever the reduce op: a MAX or a SUM of exp() then reads the padding's zeros."""
    _padto(self, axis, amt, strict_quadruple=True, skip_reduced=True, check_reduce=False)


def upcast_axis_padded(self, axis, amt):
    """An upcast axis padded: the check that the axis is not upcast left out (its registers would read padding)."""
    _padto(self, axis, amt, strict_quadruple=True, skip_reduced=True, check_reduce=True, check_upcast=False)
