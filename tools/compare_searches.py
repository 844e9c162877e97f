"""Does the same search return the same kernels from run to run? The answers of logged searches, timed in turn.

    python tools/compare_searches.py LOG LOG [LOG ...]

Each LOG is a search log of one run of the suite (`python bench.py --search --no-cache --log LOG`). For each workload
of bench.py, the kernels each run chose (its logged answers; sum 16M has two) are timed side by side, each run's
kernels on the same device buffers, in turn, the best of medians as bench.py times its variants. The table gives
each run's time and the slowest over the fastest: the goal is within 10%.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench  # noqa: E402
import model  # noqa: E402
import runtime  # noqa: E402
from demo import run_command_line  # noqa: E402
from kernel import Kernel, KernelOptError, Opt  # noqa: E402


def answers(path: str) -> dict[str, list[Kernel]]:
    """{workload: the kernels a run's log chose, in the order of its ASTs}."""
    found: dict[tuple, Kernel] = {}
    for entry in model.read_log(path).values():
        if entry["answer"] is not None:
            k = Kernel(*entry["start"]["kernel"].ast, opts=entry["start"]["kernel"].opts)  # (the answer: all its opts)
            try:
                for o in entry["answer"]["answer"].split():
                    k.apply_opt(Opt.parse(o))
            except (ValueError, KernelOptError) as e:
                raise ValueError(f"{path}: search {entry['start']['search']}: its answer doesn't apply: {e}") from None
            found[k.ast] = k
    out = {}
    for name, (build, *_) in bench.BENCHMARKS.items():
        asts = build()
        if all(ast in found for ast in asts):
            out[name] = [found[ast] for ast in asts]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/compare_searches.py", description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", metavar="LOG", help="a log of one run of the suite (two or more)")
    args = p.parse_args(argv)
    if len(args.logs) < 2:
        p.error("give two or more logs to compare")
    try:  # every log read before anything is timed
        runs, paths = [answers(path) for path in args.logs], args.logs
    except ValueError as e:
        p.error(str(e))
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
    return 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python tools/compare_searches.py", one_line=(runtime.NoDeviceError,)))
