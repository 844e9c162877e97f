"""Exercise 4 (kernel.py:View.__add__): seeded wrong answers, each a mistake a student makes."""

import math

from kernel import Node, NumNode, View, _idx_vars, all_int, un1d


def never_merges(self, vm1):
    """Two views never merged into one: every stacked view stays, where tinygrad merged them."""
    return None


def _merged(vm2, vm1, ceil):
    """The reference's steps, with the rounding of the mask's projection given."""
    if vm2.contiguous or 0 in vm1.shape or (vm1.mask and any(not (b < e) for b, e in vm1.mask)):
        return vm1
    if vm1.contiguous and vm1.size() == vm2.size() and (ret := vm2.reshape(vm1.shape)) is not None:
        return ret
    if vm1.mask:
        merged = _merged(vm2, vm1.shrink(vm1.mask), ceil)
        return merged and merged.pad(tuple((b, s - e) for (b, e), s in zip(vm1.mask, vm1.shape)))
    origin = un1d(vm2.shape, vm1.offset)
    terms = [[] for _ in origin]
    strides = [0] * len(vm1.shape)
    for d1, st in enumerate(vm1.strides):
        if st == 0:
            continue
        for d2, (o, s1) in enumerate(zip(origin, un1d(vm2.shape, vm1.offset + st))):
            if (s1 := s1 - o) == 0:
                continue
            terms[d2].append((d1, s1))
            strides[d1] += s1 * vm2.strides[d2]
    idxs = _idx_vars(vm1.shape)
    merged_size, merged_term = 1, NumNode(0)
    extents = []
    for term, s, o in zip(reversed(terms), reversed(vm2.shape), reversed(origin)):
        merged_term += Node.sum([idxs[d1] * (s1 * merged_size) for d1, s1 in term]) + o * merged_size
        merged_size *= s
        if not (merged_term >= merged_size) and not (merged_term < 0):
            extents.append((merged_size, merged_term))
            merged_size, merged_term = 1, NumNode(0)
    if merged_term:
        return None
    if (vm2_shape := tuple(s for s, _ in reversed(extents))) != vm2.shape:
        return (reshaped := vm2.reshape(vm2_shape)) and _merged(reshaped, vm1, ceil)
    if vm2.mask:
        newb, newe, bad = [0] * len(vm1.shape), list(vm1.shape), False
        for d2, ((b, e), o, (_, t)) in enumerate(zip(vm2.mask, origin, reversed(extents))):
            if not (t.min < b or t.max >= e):
                continue
            term = terms[d2]
            if not term and newe and all_int((o, b, e)):
                newe[0] = 0
            elif len(term) != 1 or not all_int((o, b, e, term[0][1], newe[term[0][0]])):
                bad = True
            else:
                d1, s1 = term[0]
                newb[d1] = max(newb[d1], ceil((b - o if s1 > 0 else e - o - 1) / s1))
                newe[d1] = min(newe[d1], (b - o if s1 < 0 else e - o - 1) // s1 + 1)
        if any(b != 0 or e != s for b, e, s in zip(newb, newe, vm1.shape)):
            return _merged(vm2, View.create(vm1.shape, vm1.strides, vm1.offset, tuple(zip(newb, newe))), ceil)
        if bad:
            return None
    return View.create(vm1.shape, tuple(strides), sum(o * s for o, s in zip(origin, vm2.strides)) + vm2.offset)


def floor_for_ceil(self, vm1):
    """The mask's start projected through a stride rounded down (// for ceil): under a stride of 2 a padded element
    counts as valid. This one once passed every golden chain; numpy's chains catch it."""
    return _merged(self, vm1, math.floor)
