"""Exercise 11 (kernel.py:Kernel._locals): seeded wrong answers, each a mistake a student makes."""

from kernel import Opt, OptOps, getenv, prod


def _locals(self, all_32=False, shift=True, rank=lambda x: (-x[0], -x[1]), most=128):
    if not self.opts.has_local:
        return
    if getenv("NOLOCALS") and self.local_dims == 0 and not self.group_for_reduces:
        self.apply_opt(Opt(OptOps.NOLOCALS))
        return
    ranking = [(any(st.views[-1].strides[axis] == 0 for st in self.sts), axis) for axis in range(self.first_reduce)]
    to_local: list[tuple[int, int]] = []
    for _, axis in sorted(ranking, key=rank):
        size = prod(sz for _, sz in to_local)
        sizes = [32] * (axis == 0 or all_32) + [16, 8, 4, 3, 2]
        sz = next((x for x in sizes if self.full_shape[axis] % x == 0 and size * x <= most), None)
        if sz is not None:
            to_local.append((axis, sz))
    deleted = 0
    for axis, sz in sorted(to_local[:3]):
        axis -= deleted
        whole = sz == self.full_shape[axis]
        self.apply_opt(Opt(OptOps.LOCAL, axis, sz))
        deleted += whole and shift


def thirty_two_on_every_axis(self):
    """32 threads allowed on every axis: tinygrad offers 32 on axis 0 only."""
    _locals(self, all_32=True)


def axis_numbers_not_shifted(self):
    """A later axis's number not shifted down when a whole axis became local (the LOCAL then lands on the wrong
    axis, or is refused)."""
    _locals(self, shift=False)


def left_to_right(self):
    """The ranking's wrong end for the axes: broadcast axes first, but then from the left, not from the right."""
    _locals(self, rank=lambda x: (-x[0], x[1]))


def fewer_than_128(self):
    """`<` for `<=` on the work-group's size: a work-group of exactly 128 threads refused."""
    _locals(self, most=127)
