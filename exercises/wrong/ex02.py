"""Exercise 2 (kernel.py:ShapeTracker.real_strides): seeded wrong answers, each a mistake a student makes."""

from kernel import MulNode, SumNode, _idx_vars


def ignore_valid_ignored(self, ignore_valid=False):
    """`ignore_valid` ignored: an axis the mask reads is None even when the caller asked to ignore the mask."""
    if len(self.views) == 1 and self.views[-1].mask is None:
        return self.views[-1].strides
    idxs = _idx_vars(self.shape)
    idx, valid = self.expr_idxs()
    ret = [None] * len(self.shape)
    bad_vars = set()
    for term in idx.nodes if isinstance(idx, SumNode) else [idx]:
        var, stride = (term.a, term.b) if isinstance(term, MulNode) else (term, 1)
        if var in idxs:
            ret[idxs.index(var)] = stride
        else:
            bad_vars |= var.vars()
    idx_vars, valid_vars = idx.vars(), valid.vars()
    for i, v in enumerate(idxs):
        if v in bad_vars or v in valid_vars:
            ret[i] = None
        elif v not in idx_vars:
            ret[i] = 0
    return tuple(ret)


def multiplier_under_div(self, ignore_valid=False):
    """A variable under // or % given its term's multiplier as its stride ((idx0//4)*2: stride 2), not None."""
    if len(self.views) == 1 and self.views[-1].mask is None:
        return self.views[-1].strides
    idxs = _idx_vars(self.shape)
    idx, valid = self.expr_idxs()
    ret = [None] * len(self.shape)
    for term in idx.nodes if isinstance(idx, SumNode) else [idx]:
        var, stride = (term.a, term.b) if isinstance(term, MulNode) else (term, 1)
        for v in var.vars():
            if v in idxs:
                ret[idxs.index(v)] = stride
    idx_vars, valid_vars = idx.vars(), valid.vars()
    for i, v in enumerate(idxs):
        if v in valid_vars and not ignore_valid:
            ret[i] = None
        elif v not in idx_vars:
            ret[i] = 0
    return tuple(ret)


def unmoved_axis_none(self, ignore_valid=False):
    """An axis the index doesn't depend on (a broadcast) left as None, where its stride is 0."""
    if len(self.views) == 1 and self.views[-1].mask is None:
        return self.views[-1].strides
    idxs = _idx_vars(self.shape)
    idx, valid = self.expr_idxs()
    ret = [None] * len(self.shape)
    bad_vars = set()
    for term in idx.nodes if isinstance(idx, SumNode) else [idx]:
        var, stride = (term.a, term.b) if isinstance(term, MulNode) else (term, 1)
        if var in idxs:
            ret[idxs.index(var)] = stride
        else:
            bad_vars |= var.vars()
    for i, v in enumerate(idxs):
        if v in bad_vars or (v in valid.vars() and not ignore_valid):
            ret[i] = None
    return tuple(ret)
