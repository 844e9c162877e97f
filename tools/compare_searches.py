"""Does the same search return the same kernels from run to run? The answers of logged searches, timed in turn.

    python tools/compare_searches.py LOG LOG [LOG ...]

Each LOG is a search log of one run of the suite (`python bench.py --search --no-cache --log LOG`). For each workload
of bench.py, the kernels each run chose (its logged answers; sum 16M has two) are timed side by side, each run's
kernels on the same device buffers, in turn, the best of medians as bench.py times its variants. The table gives
each run's time and the slowest over the fastest: the goal is within 10%.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench  # noqa: E402
import model  # noqa: E402
import runtime  # noqa: E402
from kernel import Kernel, Opt  # noqa: E402


def answers(path: str) -> dict[str, list[Kernel]]:
    """{workload: the kernels a run's log chose, in the order of its ASTs}."""
    found: dict[str, Kernel] = {}
    for entry in model.read_log(path).values():
        if entry["answer"] is not None:
            k = entry["start"]["kernel"].copy()
            for o in entry["answer"]["answer"].split():
                k.apply_opt(Opt.parse(o))
            found[repr(k.ast)] = k  # (a LazyOp unpickled keeps the hash of the process that made it)
    out = {}
    for name, (build, *_) in bench.BENCHMARKS.items():
        asts = build()
        if all(repr(ast) in found for ast in asts):
            out[name] = [found[repr(ast)] for ast in asts]
    return out


def main(paths: list[str]) -> None:
    runs = [answers(p) for p in paths]
    print(f"{'workload':26s} " + " ".join(f"{os.path.basename(p)[:12]:>12s}" for p in paths) + "  slowest/fastest")
    worst = 1.0
    for name in bench.BENCHMARKS:
        if not all(name in r for r in runs):
            continue
        variants = {str(i): [(k, runtime.random_inputs(k, seed=1)) for k in r[name]] for i, r in enumerate(runs)}
        times = bench.time_side_by_side(variants, 10)
        ratio = max(times.values()) / min(times.values())
        worst = max(worst, ratio)
        print(f"{name:26s} " + " ".join(f"{t * 1e3:9.3f} ms" for t in times.values()) + f"  {ratio:6.3f}", flush=True)
    print(f"worst slowest/fastest: {worst:.3f} (goal: at most 1.10)")


if __name__ == "__main__":
    main(sys.argv[1:])
