"""The beam search's deduplication (runtime.search): a candidate that is the same kernel as one already sent to
compile is neither compiled nor timed again, and the round counts it in `duplicates` (the number
`python search.py` prints); two candidates that differ only in which axes are upcast or local are different
kernels, and both are timed.

Each test searches with two actions and amt=1, from a kernel without opts (and without the heuristics' kernel), so
round 1 holds exactly the two candidates the test is about.
"""

from __future__ import annotations

import io
import re

import pytest

import runtime as R
import search as S
from kernel import Kernel, Opt, OptOps, elementwise_ast, sum_ast

# conftest.py: skipped, saying why, without an OpenCL device; every test searches with its own empty cache
pytestmark = pytest.mark.usefixtures("device", "cache_dir")


def search_round_1(monkeypatch, k: Kernel, actions: list[Opt]) -> tuple[S.SearchRound, set, str]:
    """Search k with only these actions; returns round 1, the opts of every kernel timed, and round 1's line as the
    command line prints it."""
    monkeypatch.setattr(S, "ACTIONS", actions)
    timed, real_time = set(), S._time_candidate

    def recording(kern, *args, **kwargs):
        timed.add(tuple(str(o) for o in kern.applied_opts))
        return real_time(kern, *args, **kwargs)

    monkeypatch.setattr(S, "_time_candidate", recording)
    out = io.StringIO()
    display = S._SearchDisplay(out)
    result = S.search(
        k, *R.random_inputs(k), amt=1, workers=0, cache=False, from_heuristics=False, on_round=display.on_round
    )
    return result.rounds[1], timed, next(x for x in out.getvalue().splitlines() if x.startswith("  round 1:"))


def layout(k: Kernel) -> tuple:
    """What two kernels share when they differ only in their colours: the shape and every buffer's views."""
    return k.full_shape, [st.views for st in k.sts]


def test_upcast_and_local_of_the_same_split_are_both_timed(monkeypatch):
    """UPCAST:0:4 and LOCAL:0:4 on 4096 elements both make (1024, 4) with the same views: one has a yellow axis
    (4 outputs per thread), the other a cyan one (4 threads per work-group). Different programs: both timed."""
    k = Kernel(*elementwise_ast(4096))
    upcast, local = k.copy(), k.copy()
    upcast.apply_opt(Opt(OptOps.UPCAST, 0, 4))
    local.apply_opt(Opt(OptOps.LOCAL, 0, 4))
    assert layout(upcast) == layout(local) and upcast.colors() != local.colors()
    r, timed, line = search_round_1(monkeypatch, k, [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 4)])
    assert (r.candidates, r.compiled, r.duplicates, r.timed) == (2, 2, 0, 2)
    assert {("UPCAST:0:4",), ("LOCAL:0:4",)} <= timed
    assert re.search(r"round 1: +2 candidates +2 compiled +2 timed +0 dropped +0 duplicates", line), line


def test_two_routes_to_one_kernel_compile_and_time_it_once(monkeypatch):
    """GROUP and GROUPTOP of a whole reduce axis (16) make the same kernel: the split puts all 16 on the green
    axis either way. The second is a duplicate: not compiled, not timed, counted."""
    k = Kernel(*sum_ast((64, 16), (1,)))
    group, grouptop = k.copy(), k.copy()
    group.apply_opt(Opt(OptOps.GROUP, 0, 0))
    grouptop.apply_opt(Opt(OptOps.GROUPTOP, 0, 16))
    assert layout(group) == layout(grouptop) and group.colors() == grouptop.colors() == ["blue", "green"]
    r, timed, line = search_round_1(monkeypatch, k, [Opt(OptOps.GROUP, 0, 0), Opt(OptOps.GROUPTOP, 0, 16)])
    assert (r.candidates, r.compiled, r.duplicates, r.timed) == (2, 1, 1, 1)
    assert ("GROUP:0:0",) in timed and ("GROUPTOP:0:16",) not in timed
    assert re.search(r"round 1: +2 candidates +1 compiled +1 timed +0 dropped +1 duplicates", line), line
