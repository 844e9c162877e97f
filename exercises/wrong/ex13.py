"""Exercise 13 (render.py:_Renderer._define_ids): seeded wrong answers, each a mistake a student makes."""

from kernel import Variable
from render import cexpr


def _ids(self, slots, fn, axes, prefix, idxs, modulo=True, reverse_weights=False, launch_dim=lambda d, n: d):
    parts, weight = {}, {}
    for d, slot in enumerate(slots):
        div = 1
        for n, (i, s) in enumerate(slot[::-1] if reverse_weights else slot):
            term = f"{fn}({launch_dim(d, len(slots))})" if div == 1 else f"({fn}({launch_dim(d, len(slots))})/{div})"
            if n < len(slot) - 1 and modulo:
                term = f"({term}%{cexpr(s)})"
            w = weight.get(i, 1)
            parts.setdefault(i, []).append(term if w == 1 else f"({term}*{w})")
            weight[i], div = w * s, div * s
    for i, terms in sorted(parts.items()):
        if (size := self.k.full_shape[axis := axes[i]]) > 1:
            name = f"{prefix}{axis}"
            self.line(f"int {name} = {'+'.join(terms)};")
            idxs[axis] = Variable(name, 0, size - 1)


def modulo_dropped(self, slots, fn, axes, prefix, idxs):
    """The `%` dropped on a merged launch dim's parts: each part but the last runs past its axis's size."""
    _ids(self, slots, fn, axes, prefix, idxs, modulo=False)


def merged_parts_reversed(self, slots, fn, axes, prefix, idxs):
    """A merged launch dim's parts taken slowest first: the fastest-varying id goes to the wrong axis (the outputs
    permuted)."""
    _ids(self, slots, fn, axes, prefix, idxs, reverse_weights=True)


def launch_dims_reversed(self, slots, fn, axes, prefix, idxs):
    """Slot d read from launch dim (number of slots - 1 - d): fit_dims already put the last axis on launch dim 0."""
    _ids(self, slots, fn, axes, prefix, idxs, launch_dim=lambda d, n: n - 1 - d)
