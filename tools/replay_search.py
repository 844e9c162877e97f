"""Replay logged searches offline, with the cut at another top_k: does the cut lose the measured best?

A search run with `log=FILE` (`python search.py NAME --log FILE`, `python bench.py --search --log FILE`) writes
every candidate it weighed and every time it measured (model.SearchLog). Replay runs search.py's own rounds again
(its beam, lines, dedup and cut) with the model's estimates, but every compile is a render and every timing a
look-up in the log: no device is needed. A search logged with every candidate built (top_k=None) can be replayed
at any top_k; a kernel the replay reaches that the log never timed is counted as unknown (dropped).

    python tools/replay_search.py LOG [LOG ...] [--top-k N ...]

For each logged search and top_k it prints the candidates built and the best time reached, against the best the
log holds; `replay(entry, top_k)` returns the same figures (tests/test_search.py replays a vendored log).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import model  # noqa: E402
import search  # noqa: E402
from kernel import Opt, optimize  # noqa: E402
from render import render  # noqa: E402


class Replay(search._Search):
    """A _Search whose compiles render and whose timings read the log (its rounds, dedup and cut are search.py's)."""

    def __init__(self, entry: dict, top_k: int | None):
        start = entry["start"]
        self.k, self.top_k, self.log, self.estimates = start["kernel"], top_k, None, {}
        self.device, self.limits = model.Device(**start["device"]), start["limits"]
        self.begin, self.deadline, self.progress = 0.0, math.inf, lambda *_: None
        self.why_dropped, self.seen, self.timed, self.built, self.unknown = [], set(), [], 0, 0
        self.times = {c["program"]: c["time_s"] for r in entry["rounds"] for c in r if c["time_s"] is not None}
        self.logged_gains = entry.get("gains", {})

    def compile(self, kernels):
        programs = []
        for kern in kernels:
            prg = render(kern, self.limits)
            if (key := (prg.src, tuple(prg.global_size), tuple(prg.local_size or ()))) not in self.seen:
                self.seen.add(key)
                programs.append((kern, prg))
        self.built += len(kernels)
        return programs, len(kernels)

    def time(self, kern, prg, stop_above=math.inf):
        return self.times.get(model.program_key(prg), math.inf)

    def gains(self, child, parent, min_progress):
        """As the search decided, where its log says (else from the times of the rounds)."""
        key = tuple(model.program_key(x[3]) for x in (child, parent))
        child_s, parent_s = self.logged_gains.get(key, (child[0], self.time(*parent[2:])))
        return child_s < parent_s * (1 - search.LINE_GAIN) - min_progress

    def time_all(self, programs, cutoff):
        timed = []
        for kern, prg in programs:
            if (t := self.times.get(model.program_key(prg))) is None:
                self.unknown += 1
            else:
                timed.append((t, len(self.timed) + len(timed), kern, prg))
        self.timed += timed
        return timed


def replay(entry: dict, top_k: int | None) -> dict:
    """Replay one logged search at `top_k`, with the actions it had: {"built", "best_s" (the best time it reached),
    "logged_best_s" (the best the log holds), "unknown" (kernels reached that the log never timed), "rounds"}."""
    s, start, actions = Replay(entry, top_k), entry["start"], (search.ACTIONS, search.MACROS)
    k = start["kernel"]
    starts = [optimize(k.copy())] if start["from_heuristics"] and not k.applied_opts else []
    logged = [tuple(Opt.parse(o) for o in a.split("+")) for a in start.get("actions", [])]
    try:
        if logged:  # the actions of the search logged (else today's): a kernel the log can't know is none of them
            search.ACTIONS, search.MACROS = [a[0] for a in logged if len(a) == 1], [a for a in logged if len(a) > 1]
        rounds, _ = s.rounds(starts + [k.copy()], start["amt"], start["min_progress"], lambda r: None)
    finally:
        search.ACTIONS, search.MACROS = actions
    best = min((t for t, *_ in s.timed), default=math.inf)
    return {"built": s.built, "best_s": best, "logged_best_s": min(s.times.values()), "unknown": s.unknown,
            "rounds": len(rounds)}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", metavar="LOG")
    p.add_argument("--top-k", type=int, nargs="+", default=[8, 12, 16], help="cuts to replay (default 8 12 16)")
    args = p.parse_args()
    print(f"{'search':34s} {'top_k':>5s} {'built':>6s} {'of':>5s} {'best ms':>9s} {'logged':>9s} {'ratio':>6s} unknown")
    totals: dict = {}
    for path in args.logs:
        for entry in model.read_log(path).values():
            name = f"{entry['start']['kernel'].full_shape} ({os.path.basename(path)})"
            full = replay(entry, None)
            for top_k in args.top_k:
                r = replay(entry, top_k)
                ratio = r["best_s"] / r["logged_best_s"]
                built, all_built, worst = totals.get(top_k, (0, 0, 1.0))
                totals[top_k] = (built + r["built"], all_built + full["built"], max(worst, ratio))
                print(f"{name[:34]:34s} {top_k:5d} {r['built']:6d} {full['built']:5d} {r['best_s'] * 1e3:9.3f} "
                      f"{r['logged_best_s'] * 1e3:9.3f} {ratio:6.3f} {r['unknown']:4d}")  # fmt: skip
    for top_k, (built, all_built, worst) in totals.items():
        print(f"top_k {top_k}: built {built} of {all_built} ({built / all_built:.0%}), worst ratio {worst:.3f}")


if __name__ == "__main__":
    main()
