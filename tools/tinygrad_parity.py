"""Our hand-coded kernels' C against tinygrad 0.9.1's C for the very same kernels, timed in one process on one device.

bench.py compares our kernel times with tinygrad's own, measured by tinygrad in another sitting; on a shared machine
two sittings differ by more than the code does. Here the sources run in turn on one device, over the same device
buffers and with the same global and local sizes, so that only the C differs.

tinygrad's side is the source tinygrad rendered, read from the file `tools/tinygrad_times.py --hand-coded FILE`
writes under tinygrad 0.9.1 (each kernel's "tinygrad_src", beside its AST): the project never imports tinygrad.
Our side is runtime.render of our Kernel of tinygrad's own AST with the hand-coded opts; a kernel whose name
differs from tinygrad's (other opts) is refused. `--variant FILE` adds a side: a hand-edited C of one kernel (found
by its kernel's name), to try a change of the renderer before making it. Every side's output is checked against
ours first.

Each round times every side in turn (the first of a round changes from round to round), each the median of `runs`
launches by OpenCL profiling events after one warm-up launch. The table gives each side's best median and median of
medians, and the ratio of each side to tinygrad's (below 1: faster than tinygrad's) with its spread: the lowest,
middle and highest of the ratios of the rounds' pairs.

Usage: KERNELPY_DEVICE=pthread python tools/tinygrad_parity.py FILE [NAME ...] [--rounds N] [--runs N]
       [--variant FILE ...] [--show]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench import BENCHMARKS, read_tinygrad_file  # noqa: E402
from kernel import Kernel, optimize  # noqa: E402
from demo import int_at_least, run_command_line  # noqa: E402
from runtime import BuildError, Launch, NoDeviceError, Program, device_limits, get_device, random_inputs  # noqa: E402
from runtime import render, run  # noqa: E402


def kernel_of(src: str) -> str:
    """The name of the (first) __kernel of an OpenCL source."""
    if not (m := re.search(r"__kernel\s+void\s+(\w+)\s*\(", src)):
        raise ValueError("no __kernel in the source")
    return m.group(1)


def tinygrad_kernels(path: str, names) -> dict[str, list[tuple[Kernel, str]]]:
    """Per workload (bench.py's names; none: every one in the file): its kernels, each (our hand-coded Kernel of
    tinygrad's AST, tinygrad's C)."""
    _, read = read_tinygrad_file(path, "hand-coded")  # a ValueError naming the file where its form is wrong
    with open(path) as f:
        workloads = json.load(f)["workloads"]
    if absent := [n for n in names if n not in read]:
        raise ValueError(f"{path} holds no workload {absent[0]!r} (it holds {', '.join(map(repr, read)) or 'none'})")
    names = names or list(read)
    if missing := [n for n in names if any("tinygrad_src" not in k for k in workloads[n]["kernels"])]:
        raise ValueError(f"{path} holds no tinygrad sources for {missing[0]!r}: write it with tinygrad_times.py anew")
    return {
        name: [
            (optimize(Kernel(*ast)), k["tinygrad_src"])
            for ast, k in zip(read[name]["asts"], workloads[name]["kernels"])
        ]
        for name in names
    }


def launches(k: Kernel, sources: dict[str, str]) -> dict[str, Launch]:
    """Per side ("ours" and each of `sources`): k launched from that C, all over one set of device buffers."""
    ours = render(k, device_limits())
    programs = {"ours": ours}
    for side, src in sources.items():
        if re.fullmatch(rf"{ours.name}(n\d+)?", name := kernel_of(src)) is None:  # tinygrad adds n1 to a name seen
            raise ValueError(f"{side}'s kernel is {name}, ours {ours.name}: not the same opts, nothing to compare")
        programs[side] = Program(name, src, ours.global_size, ours.local_size, ours.args, ours.vars)
    inputs = random_inputs(k, seed=1)  # real data: untouched pages flatter memory-bound kernels
    want = run(k, *inputs)
    for side, prg in programs.items():  # each on buffers of its own, poisoned: a side that skips a store shows
        (check := Launch(k, inputs, prg=prg)).launch()
        for got, expected in zip(check.read(), want):
            if not np.allclose(got, expected, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(expected).max()))):
                raise ValueError(f"{side}'s {ours.name} computes another result than ours")
    shared: dict = {}
    return {side: Launch(k, inputs, prg=prg, device_args=shared) for side, prg in programs.items()}


def median_of_runs(launch: Launch, runs: int) -> float:
    """Median seconds of `runs` launches, after one: the side before may have left the caches to itself."""
    launch.launch().wait()
    times = []
    for _ in range(runs):
        (event := launch.launch()).wait()
        times.append((event.profile.end - event.profile.start) * 1e-9)
    return statistics.median(times)


def in_turn(kernels: list[dict[str, Launch]], rounds: int, runs: int) -> dict[str, list[float]]:
    """Per side, one time a round (the sum over the workload's kernels), the sides taken in turn."""
    sides = list(kernels[0])
    times: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
            times[side].append(sum(median_of_runs(k[side], runs) for k in kernels))
    return times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/tinygrad_parity.py", description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="the file of tools/tinygrad_times.py --hand-coded (tinygrad's sources and ASTs)")
    p.add_argument("names", nargs="*", help="workloads, bench.py's names (default: every one in the file)")
    p.add_argument("--rounds", type=int_at_least(1), default=20, help="rounds, each timing every side once (20)")
    p.add_argument("--runs", type=int_at_least(1), default=10, help="launches per median (default 10)")
    p.add_argument("--variant", action="append", default=[], help="a hand-edited C of one kernel, as one more side")
    p.add_argument("--show", action="store_true", help="print each kernel's sources first")
    args = p.parse_args(argv)
    if unknown := [n for n in args.names if n not in BENCHMARKS]:
        p.error(f"unknown workload {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    variants = {}
    for path in args.variant:
        with open(path) as f:
            variants[os.path.basename(path)] = f.read()
    workloads = tinygrad_kernels(args.file, args.names)
    print(f"device: {get_device().name}; {args.rounds} rounds, each side the median of {args.runs} launches\n")
    print(
        f"{'workload':24s} {'side':12s} {'best ms':>9s} {'median ms':>10s} {'ratio: best':>12s} {'median':>7s}", end=""
    )
    print(f"  {'rounds: min':>12s} {'median':>7s} {'max':>6s}")
    for name, kernels in workloads.items():
        sides = []
        for k, src in kernels:
            mine = {f: s for f, s in variants.items() if re.fullmatch(rf"{render(k).name}(n\d+)?", kernel_of(s))}
            sides.append(launches(k, {"tinygrad": src} | mine))
            if args.show:
                for side, launch in sides[-1].items():
                    print(f"----- {name}, {side}:\n{launch.prg.src}")
        names = set.intersection(*(set(s) for s in sides))  # a variant of one kernel of two: both kernels need one
        times = in_turn([{side: s[side] for side in s if side in names} for s in sides], args.rounds, args.runs)
        tg = times["tinygrad"]
        for side, ts in times.items():
            paired = sorted(t / t_tg for t, t_tg in zip(ts, tg))
            ratios = f"{min(ts) / min(tg):12.3f} {statistics.median(ts) / statistics.median(tg):7.3f}"
            ratios += f"  {paired[0]:12.3f} {statistics.median(paired):7.3f} {paired[-1]:6.3f}"
            row = f"{name[:24]:24s} {side[:12]:12s} {min(ts) * 1e3:9.3f} {statistics.median(ts) * 1e3:10.3f}"
            print(row + ("" if side == "tinygrad" else ratios), flush=True)
    return 0


if __name__ == "__main__":
    errors = (NoDeviceError, BuildError, ValueError, OSError)  # one line each
    sys.exit(run_command_line(main, "python tools/tinygrad_parity.py", errors))
