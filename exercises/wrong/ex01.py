"""Exercise 1 (kernel.py:_expr_view): seeded wrong answers, each a mistake a student makes."""

from kernel import Node, NumNode, create_ge_node, create_lt_node


def mask_end_inclusive(view, idxs, valid=None):
    """The mask's end taken as inclusive (idx <= e): one padding element too many reads as valid."""
    offset = NumNode(view.offset) if isinstance(view.offset, int) else view.offset
    iexpr = [offset] + [idx * st for idx, sh, st in zip(idxs, view.shape, view.strides) if sh != 1 and st != 0]
    vexpr = [valid] if valid is not None else []
    for idx, (b, e) in zip(idxs, view.mask or ()):
        vexpr += [create_ge_node(idx, b), create_lt_node(idx, e + 1)]
    return Node.sum(iexpr), Node.ands(vexpr)


def offset_dropped(view, idxs, valid=None):
    """The view's offset left out of the index: a shrink or a flip reads from the buffer's start."""
    iexpr = [idx * st for idx, sh, st in zip(idxs, view.shape, view.strides) if sh != 1 and st != 0]
    vexpr = [valid] if valid is not None else []
    for idx, (b, e) in zip(idxs, view.mask or ()):
        vexpr += [create_ge_node(idx, b), create_lt_node(idx, e)]
    return Node.sum(iexpr or [NumNode(0)]), Node.ands(vexpr)


def older_validity_dropped(view, idxs, valid=None):
    """The validity passed in from the view above ignored: only this view's own mask counts."""
    offset = NumNode(view.offset) if isinstance(view.offset, int) else view.offset
    iexpr = [offset] + [idx * st for idx, sh, st in zip(idxs, view.shape, view.strides) if sh != 1 and st != 0]
    vexpr = []
    for idx, (b, e) in zip(idxs, view.mask or ()):
        vexpr += [create_ge_node(idx, b), create_lt_node(idx, e)]
    return Node.sum(iexpr), Node.ands(vexpr)
