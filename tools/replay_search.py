"""Replay logged searches offline, with the cut at another top_k: does the cut lose the measured best?

A search run with `log=FILE` (`python -m search NAME --log FILE`, `python bench.py --search --log FILE`) writes
every candidate it weighed and every time it measured (cost.SearchLog). Replay runs the search's own rounds again
(its beam, lines, dedup and cut) with the model's estimates, but every compile is a render and every timing a
look-up in the log: no device is needed. It runs as the search ran: from the starting kernels, with the actions, the
settings and the environment knobs (BEAM_UPCAST_MAX, TC, ...) its log holds, whatever this process's own are. A
search logged with every candidate built (top_k=None) can be replayed at any top_k; a kernel the replay reaches that
the log never timed is counted as unknown (dropped), and where the replay then ends slower than the log's best, what
the cut lost is not measured: the ratio says "?".

    python tools/replay_search.py LOG [LOG ...] [--top-k N ...]

For each logged search and top_k it prints the candidates built and the best time reached, against the best the
log holds; `replay(entry, top_k)` returns the same figures (tests/test_cost.py replays the vendored logs). Each
search replays on its own: a bad line of a log (its search is left out), a log that can't be read, or a search that
can't be replayed, is one line on stderr (exit status 1), and the rest go on.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import search.beam as beam  # noqa: E402
from search import cost  # noqa: E402
from demo import int_at_least  # noqa: E402
from kernel import Kernel, KernelOptError, Opt  # noqa: E402
from render import render  # noqa: E402


class Replay(beam._Search):
    """A _Search whose compiles render and whose timings read the log (its rounds, dedup and cut: search/beam.py's)."""

    def __init__(self, entry: dict, top_k: int | None):
        start = entry["start"]
        self.k, self.top_k, self.log, self.estimates = start["kernel"], top_k, None, {}
        self.device, self.limits = cost.DeviceModel(**start["device"]), start["limits"]
        self.wait_above = start.get("wait_above_s", math.inf)  # (a log made before searches waited: they never did)
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
        return self.times.get(cost.program_key(prg), math.inf)

    def gains(self, child, parent, min_progress):
        """As the search decided, where its log says (else from the times of the rounds)."""
        key = tuple(cost.program_key(x[3]) for x in (child, parent))
        child_s, parent_s = self.logged_gains.get(key, (child[0], self.time(*parent[2:])))
        return child_s < parent_s * (1 - beam.LINE_GAIN) - min_progress

    def time_all(self, programs, cutoff, again=True):
        timed = []
        for kern, prg in programs:
            if (t := self.times.get(cost.program_key(prg))) is None:
                self.unknown += 1
            else:
                timed.append((t, len(self.timed) + len(timed), kern, prg))
        self.timed += timed
        return timed


def _set_environ(values: dict) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def replay(entry: dict, top_k: int | None) -> dict:
    """Replay one logged search at `top_k`, as it ran (its starting kernels, actions and knobs): {"built", "best_s"
    (the best time it reached), "logged_best_s" (the best the log holds; inf: it timed none), "unknown" (kernels
    reached that the log never timed), "ratio" (best_s over logged_best_s; None where it isn't measured: unknown
    kernels, and a slower end), "rounds"}."""
    s, start, actions = Replay(entry, top_k), entry["start"], (beam.ACTIONS, beam.MACROS)
    k, knobs = start["kernel"], start["knobs"]
    logged = [tuple(Opt.parse(o) for o in a.split("+")) for a in start["actions"]]
    saved = {name: os.environ.get(name) for name in knobs}
    try:
        _set_environ(knobs)  # kernel_actions reads BEAM_UPCAST_MAX and BEAM_LOCAL_MAX, apply_opt TC
        beam.ACTIONS, beam.MACROS = [a[0] for a in logged if len(a) == 1], [a for a in logged if len(a) > 1]
        starts = []  # round 0's kernels, as the search started (the heuristics' opts of that day, and k)
        for line in entry["rounds"][0] if entry["rounds"] else []:
            starts.append(Kernel(*k.ast, opts=k.opts))
            for o in line["opts"].split():
                starts[-1].apply_opt(Opt.parse(o))
        rounds, _ = s.rounds(starts, start["amt"], start["min_progress"], lambda r: None) if starts else ([], False)
    finally:
        beam.ACTIONS, beam.MACROS = actions
        _set_environ(saved)
    best, logged_best = min((t for t, *_ in s.timed), default=math.inf), min(s.times.values(), default=math.inf)
    measured = math.isfinite(logged_best) and (s.unknown == 0 or best <= logged_best)
    return {"built": s.built, "best_s": best, "logged_best_s": logged_best, "unknown": s.unknown,
            "ratio": best / logged_best if measured else None, "rounds": len(rounds)}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/replay_search.py", description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", metavar="LOG")
    p.add_argument("--top-k", type=int_at_least(1), nargs="+", default=[8, 12, 16], help="cuts (default 8 12 16)")
    args = p.parse_args(argv)
    print(f"{'search':34s} {'top_k':>5s} {'built':>6s} {'of':>5s} {'best ms':>9s} {'logged':>9s} {'ratio':>6s} unknown")
    totals, failed, unmeasured = {}, 0, False
    for path in args.logs:
        entries = cost.read_log(path, errors := [])  # the searches of bad lines left out, the others replayed
        for e in errors:
            print(f"python tools/replay_search.py: error: {e}", file=sys.stderr, flush=True)
        failed += len(errors)
        for entry in entries.values():
            name = f"{entry['start']['kernel'].full_shape} ({os.path.basename(path)})"
            try:
                full, cuts = replay(entry, None), [replay(entry, top_k) for top_k in args.top_k]
            except (ValueError, KernelOptError) as e:  # (the log's opts or actions don't apply to its kernel)
                print(f"python tools/replay_search.py: error: {path}: search {entry['start']['search']}: {e}",
                      file=sys.stderr, flush=True)  # fmt: skip
                failed += 1
                continue
            if not math.isfinite(full["logged_best_s"]):
                print(f"{name[:34]:34s} the search timed no kernel: nothing to replay")
                continue
            for top_k, r in zip(args.top_k, cuts):
                built, all_built, worst = totals.get(top_k, (0, 0, 1.0))
                totals[top_k] = (built + r["built"], all_built + full["built"], max(worst, r["ratio"] or 1.0))
                ratio = f"{r['ratio']:6.3f}" if r["ratio"] is not None else f"{'?':>6s}"
                unmeasured |= r["ratio"] is None
                print(f"{name[:34]:34s} {top_k:5d} {r['built']:6d} {full['built']:5d} {r['best_s'] * 1e3:9.3f} "
                      f"{r['logged_best_s'] * 1e3:9.3f} {ratio} {r['unknown']:4d}")  # fmt: skip
    for top_k, (built, all_built, worst) in totals.items():
        print(f"top_k {top_k}: built {built} of {all_built} ({built / max(all_built, 1):.0%}), worst measured ratio "
              f"{worst:.3f}")  # fmt: skip
    if unmeasured:
        print("ratio ?: the replay reached kernels the log never timed and ended slower: what the cut lost is unknown")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
