"""Exercise 10 (kernel.py:Kernel._upcast_broadcast_axes): seeded wrong answers, each a mistake a student makes."""

import itertools

from kernel import Opt, OptOps, prod


def _upcast(self, more_than=False, key=None, last=False):
    upcasted_axis = set()
    while (threads := prod(self.sts[0].shape[: self.first_reduce])) > 1024 or (threads == 1024 and not more_than):
        choices = []
        for axis, amount in itertools.product(range(self.first_reduce), [3, 4]):
            if axis not in upcasted_axis and isinstance(self.full_shape[axis], int) and \
                    self.full_shape[axis] % amount == 0 and \
                    any(st.views[-1].strides[axis] == 0 and not any(x[1] == 0 for x in self.upcasted_axis(b))
                        for b, st in enumerate(self.sts)):  # fmt: skip
                moving = sum(st.views[-1].strides[axis] > 0 for st in self.sts)
                strides = sum(st.views[-1].strides[axis] for st in self.sts)
                choices.append((key or (lambda *x: x))(moving, strides, axis, amount))
        if not choices:
            break
        axis, amount = sorted(choices)[-1 if last else 0][-2:]
        self.apply_opt(Opt(OptOps.UPCAST, axis, amount))
        upcasted_axis.add(axis)


def more_than_1024(self):
    """`>` for `>=` on the threshold: where exactly 1,024 threads are left (matmul 64 after its first upcast), no
    more upcasts."""
    _upcast(self, more_than=True)


def axis_before_strides(self):
    """The key's fields in the wrong order, (buffers moving, axis, strides, amount): the first axis wins where the
    sum of strides should have decided."""
    _upcast(self, key=lambda moving, strides, axis, amount: (moving, axis, strides, axis, amount))


def largest_first(self):
    """The wrong end of the sort: the largest key taken, an axis most buffers move along."""
    _upcast(self, last=True)

