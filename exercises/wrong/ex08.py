"""Exercise 8 (kernel.py:Kernel._opt_group, GROUP and GROUPTOP): seeded wrong answers, each a mistake a student
makes."""

from kernel import check


def top_ignored(self, axis, amt, top=False):
    """`top` ignored: GROUPTOP splits like GROUP. The same shape and colours as tinygrad's; only the views differ."""
    check(self.opts.has_local and self.opts.has_shared, "target does not support local or shared mem")
    ungrouped = list(range(self.first_reduce + self.group_for_reduces, self.shape_len - self.upcasted))
    check(axis in ungrouped, f"must be reduce axis to group: axis {axis}")
    check(not self.tensor_core, "can't group with tensor cores")
    self.shift_to(axis, amt, insert_before=self.first_reduce + self.group_for_reduces)
    self.group_for_reduces += 1


def inserted_at_first_reduce(self, axis, amt, top=False):
    """The new group axis inserted at first_reduce, before the axes an earlier GROUP made, not after them."""
    check(self.opts.has_local and self.opts.has_shared, "target does not support local or shared mem")
    ungrouped = list(range(self.first_reduce + self.group_for_reduces, self.shape_len - self.upcasted))
    check(axis in ungrouped, f"must be reduce axis to group: axis {axis}")
    check(not self.tensor_core, "can't group with tensor cores")
    self.shift_to(axis, amt, top=top, insert_before=self.first_reduce)
    self.group_for_reduces += 1


def tensor_cores_grouped(self, axis, amt, top=False):
    """A tensor-core kernel's reduce axis grouped: the tensor-core check left out."""
    check(self.opts.has_local and self.opts.has_shared, "target does not support local or shared mem")
    ungrouped = list(range(self.first_reduce + self.group_for_reduces, self.shape_len - self.upcasted))
    check(axis in ungrouped, f"must be reduce axis to group: axis {axis}")
    self.shift_to(axis, amt, top=top, insert_before=self.first_reduce + self.group_for_reduces)
    self.group_for_reduces += 1
