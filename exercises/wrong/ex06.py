"""Exercise 6 (kernel.py:Kernel.shift_to): seeded wrong answers, each a mistake a student makes."""


def _shifted(self, axis, amount, top, insert_before, honour_top, shift_past):
    insert_before = self.shape_len if insert_before is None else insert_before
    move_axis = axis if top else axis + 1
    if move_axis < insert_before and shift_past:
        insert_before += 1

    def split(x):
        first = top and honour_top
        parts = ([amount, x[axis] // amount] if first else [x[axis] // amount, amount]) if x[axis] > 1 else [1, 1]
        return list(x[:axis]) + parts + list(x[axis + 1 :])

    order = [i for i in range(insert_before) if i != move_axis] + [move_axis]
    order += [i for i in range(insert_before, self.shape_len + 1) if i != move_axis]
    self.reshape_and_permute(split, order)


def top_from_wrong_end(self, axis, amount, top=False, insert_before=None):
    """With `top`, the amount still split off as the fast (last) part, and the slow part moved: GROUPTOP:0:16 on 256
    gives (256/16 ...) where tinygrad has 16 threads over contiguous runs."""
    _shifted(self, axis, amount, top, insert_before, honour_top=False, shift_past=True)


def insert_before_not_shifted(self, axis, amount, top=False, insert_before=None):
    """insert_before not moved one on when the split part lies before it: the part lands one axis too early."""
    _shifted(self, axis, amount, top, insert_before, honour_top=True, shift_past=False)
