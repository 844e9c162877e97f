"""Exercise 3 (kernel.py:View.reshape): seeded wrong answers, each a mistake a student makes."""

from kernel import View, _merge_dims, _reshape_mask, all_int, canonicalize_strides, check_movement_arg


def always_none(self, new_shape):
    """Never reshaped in place: every reshape stacks a second View, where tinygrad kept one."""
    return None


def _reshaped(self, new_shape, keep_mask: bool, move_start: bool = True):
    """The reference's steps, with the mistakes below switchable."""
    if self.shape == new_shape:
        return self
    check_movement_arg("reshape", self, new_shape)
    if 0 in self.shape or self.contiguous:
        return View.create(new_shape)
    if new_shape == () and self.mask and any(b == e for b, e in self.mask):
        return None
    if all_int(self.shape) and not all(type(x) is int for x in new_shape):
        return View(new_shape, self.strides, self.offset, self.mask, self.contiguous)
    strides = []
    r_new_shape = reversed(new_shape)
    for merged_dim, new_stride, real_dim in reversed(_merge_dims(self.shape, self.strides, self.mask)):
        acc = 1
        while acc <= merged_dim and acc != merged_dim and (new_dim := next(r_new_shape, None)):
            strides.append(new_stride)
            if new_dim != 1:
                acc *= new_dim
                new_stride *= new_dim if acc < real_dim else 0
        if acc != merged_dim:
            return None
    strides += [0] * (len(new_shape) - len(strides))
    new_mask, cut = _reshape_mask(self, new_shape) if keep_mask else (None, False)
    if cut:
        return None
    sizes = tuple(e - b for b, e in new_mask) if new_mask else new_shape
    new_strides = canonicalize_strides(sizes, tuple(reversed(strides)))
    old_start = sum(b * st for (b, _), st in zip(self.mask, self.strides)) if self.mask and keep_mask else 0
    new_start = sum(b * st for (b, _), st in zip(new_mask, new_strides)) if new_mask else 0
    return View.create(new_shape, new_strides, self.offset + (old_start - new_start) * move_start, new_mask)


def mask_dropped(self, new_shape):
    """The mask not carried to the new shape: padding reads as data after a reshape."""
    return _reshaped(self, new_shape, keep_mask=False)


def mask_start_not_moved(self, new_shape):
    """The offset not moved with the mask's start: where a mask's first valid element moves (an axis masked to one
    index gets stride 0), the view reads from the wrong place."""
    return _reshaped(self, new_shape, keep_mask=True, move_start=False)
