"""Exercise 7 (kernel.py:Kernel._opt_upcast): seeded wrong answers, each a mistake a student makes."""

from kernel import check


def no_limit_of_8(self, axis, amt):
    """No `amt <= 8`: an UPCAST of 16 (or of a whole 1,000-long axis, amount 0) accepted."""
    check(axis < self.first_reduce, f"upcast is for non-reduce: axis {axis}")
    tc = self.tensor_core
    check(not (tc and self.global_dims <= axis < self.global_dims + len(tc.threads)), "can't upcast TC locals")
    self.shift_to(axis, amt, insert_before=None)
    self.upcast()


def reduce_axis_accepted(self, axis, amt):
    """A reduce axis upcast: the `axis < first_reduce` check left out (UNROLL's job taken)."""
    tc = self.tensor_core
    check(not (tc and self.global_dims <= axis < self.global_dims + len(tc.threads)), "can't upcast TC locals")
    check(amt <= 8, f"don't upcast more than 8 (asked {amt})")
    self.shift_to(axis, amt, insert_before=None)
    self.upcast()


def eight_refused(self, axis, amt):
    """`amt < 8` for `amt <= 8`: an UPCAST of exactly 8 refused."""
    check(axis < self.first_reduce, f"upcast is for non-reduce: axis {axis}")
    tc = self.tensor_core
    check(not (tc and self.global_dims <= axis < self.global_dims + len(tc.threads)), "can't upcast TC locals")
    check(amt < 8, f"don't upcast 8 or more (asked {amt})")
    self.shift_to(axis, amt, insert_before=None)
    self.upcast()


def tensor_core_axes_upcast(self, axis, amt):
    """A tensor core's thread axes upcast: the check that they stay threads left out."""
    check(axis < self.first_reduce, f"upcast is for non-reduce: axis {axis}")
    check(amt <= 8, f"don't upcast more than 8 (asked {amt})")
    self.shift_to(axis, amt, insert_before=None)
    self.upcast()
