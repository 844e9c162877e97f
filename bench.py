"""bench.py: the benchmark suite. Times our kernels on the OpenCL device (unoptimized, hand-coded, beam-searched)
beside numpy, and beside tinygrad 0.9.1 measured on the same device by scripts run under tinygrad 0.9.1 outside
this repository: tinygrad_perf.sh (its hand-coded kernels) and tinygrad_beam.sh (its BEAM=2 choices, which we
apply to our own Kernel and time with our runtime, so both are timed the same way in one sitting).

Usage: python bench.py [NAME ...] [--search] [--beam N] [--runs N] [--tinygrad FILE] [--tinygrad-beam FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np

from kernel import TARGETS, Kernel, KernelOptError, LazyOp, Opt, OptOps, ReduceOps, ShapeTracker, conv2d_ast
from kernel import elementwise_ast, int_at_least, load, matmul_ast, matvec_ast, optimize, reduce, run_command_line
from kernel import store, sum_ast
from runtime import NoDeviceError, get_device, random_inputs, time_kernel
from tests.corpus import lazyop_from_json  # the golden corpus's JSON form is read by the tests' loader
from search import search


def _sum_in_two(n: int = 4096 * 4096, parts: int = 256) -> list[tuple[LazyOp, ...]]:
    """A big sum as tinygrad 0.9.1 schedules it: `parts` partial sums of strided slices, then their sum."""
    first = ShapeTracker.from_shape((parts, n // parts)).permute((1, 0))
    return [(store(reduce(ReduceOps.SUM, load(1, first), (0,))),), sum_ast((1, parts), (1,))]


def _np_conv2d(img: np.ndarray, wt: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(img, wt.shape[2:], axis=(2, 3))  # (b, ci, oh, ow, kh, kw)
    return np.einsum("bcyxij,ocij->boyx", windows, wt, optimize=True)


_N = 4096
# name: (the kernels' ASTs, flops, bytes moved, the same computation in numpy on the kernels' inputs)
BENCHMARKS = {
    "matmul 512": (
        lambda: [matmul_ast(512, 512, 512)],
        2 * 512**3,
        3 * 4 * 512**2,
        lambda a, b: a.reshape(512, 512) @ b.reshape(512, 512),
    ),
    "matmul 1024": (
        lambda: [matmul_ast(1024, 1024, 1024)],
        2 * 1024**3,
        3 * 4 * 1024**2,
        lambda a, b: a.reshape(1024, 1024) @ b.reshape(1024, 1024),
    ),
    "matvec 4096x4096": (
        lambda: [matvec_ast(_N, _N)],
        2 * _N**2,
        4 * (_N**2 + 2 * _N),
        lambda a, x: a.reshape(_N, _N) @ x,
    ),
    "sum 16M": (_sum_in_two, _N**2, 4 * _N**2, lambda a: a.sum()),
    "sum axis 0 4096x4096": (
        lambda: [sum_ast((_N, _N), (0,))],
        _N**2,
        4 * (_N**2 + _N),
        lambda a: a.reshape(_N, _N).sum(0),
    ),
    "sum axis 1 4096x4096": (
        lambda: [sum_ast((_N, _N), (1,))],
        _N**2,
        4 * (_N**2 + _N),
        lambda a: a.reshape(_N, _N).sum(1),
    ),
    "add 16M": (lambda: [elementwise_ast(_N * _N)], _N**2, 3 * 4 * _N**2, lambda a, b: a + b),
    "conv2d 8x32x64x64 k3x64": (
        lambda: [conv2d_ast(8, 32, 64, 64, 64, 3, 0, 1)],
        2 * 8 * 64 * 62 * 62 * 32 * 9,
        4 * (8 * 32 * 64 * 64 + 64 * 32 * 9 + 8 * 64 * 62 * 62),
        lambda img, wt: _np_conv2d(img.reshape(8, 32, 64, 64), wt.reshape(64, 32, 3, 3)),
    ),
}
# the names of the same workloads in the files written by tinygrad_perf.sh and tinygrad_beam.sh
TINYGRAD_KEYS = {
    "matmul 512": "matmul_512",
    "matmul 1024": "matmul_1024",
    "matvec 4096x4096": "matvec_4096",
    "sum 16M": "sum_all_16M",
    "sum axis 0 4096x4096": "sum_axis0_4096",
    "sum axis 1 4096x4096": "sum_axis1_4096",
    "add 16M": "add_16M",
    "conv2d 8x32x64x64 k3x64": "conv2d_8x32x64x64_k3x64",
}


def _load_json(path: str | None) -> dict:
    """The JSON object in path ({} where there is no such file); ValueError naming the file where it can't be read."""
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as e:
        raise ValueError(f"{path} can't be read as JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def _tinygrad_measured(path: str | None) -> dict[str, tuple[float, list[tuple[LazyOp, ...]]]]:
    """Per benchmark, tinygrad 0.9.1's kernel time and the ASTs it ran, from a JSON file of tinygrad_perf.sh."""
    measured = _load_json(path)
    with _what_file(path, "tinygrad_perf.sh"):
        return _read_measured(measured)


def _read_measured(measured: dict) -> dict[str, tuple[float, list[tuple[LazyOp, ...]]]]:
    return {
        name: (
            measured[key]["tinygrad_s"],
            [tuple(lazyop_from_json(a) for a in k["ast"]) for k in measured[key].get("kernels", [])],
        )
        for name, key in TINYGRAD_KEYS.items()
        if key in measured
    }


def _tinygrad_beam(path: str | None) -> dict[str, tuple[list[Kernel], float]]:
    """Per benchmark, tinygrad 0.9.1's BEAM choices applied to our own Kernels of its ASTs, and its search
    seconds, from a JSON file of tinygrad_beam.sh."""
    measured = _load_json(path)
    with _what_file(path, "tinygrad_beam.sh"):
        return _read_beam(measured)


def _read_beam(measured: dict) -> dict[str, tuple[list[Kernel], float]]:
    out = {}
    for name, key in TINYGRAD_KEYS.items():
        if key not in measured:
            continue
        kernels = []
        for entry in measured[key]["kernels"]:
            k = Kernel(*(lazyop_from_json(a) for a in entry["ast"]))
            for op, axis, amt in entry["beam_opts"]:
                k.apply_opt(Opt(OptOps[op], axis, amt))
            kernels.append(k)
        out[name] = (kernels, measured[key]["search_s"])
    return out


@contextlib.contextmanager
def _what_file(path: str | None, writer: str):
    """A file that is JSON but not what `writer` writes (a missing key, a malformed AST): ValueError naming it."""
    try:
        yield
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, KernelOptError) as e:
        raise ValueError(f"{path} is not a file of {writer} ({type(e).__name__}: {e})") from None


def optimizer_cost(
    path: str = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "kernels.json"),
) -> tuple[int, float]:
    """(kernels, seconds per kernel) to build every kernel of the golden corpus and run the heuristics, once each."""
    with open(path) as f:
        cases = [(tuple(lazyop_from_json(a) for a in c["ast"]), TARGETS[c["target"]]) for c in json.load(f)["cases"]]
    start = time.perf_counter()
    for ast, target in cases:
        Kernel(*ast, opts=target).hand_coded_optimizations()
    return len(cases), (time.perf_counter() - start) / len(cases)


def _same_kernels(ours: list[Kernel], asts: list[tuple[LazyOp, ...]]) -> bool:
    """Do tinygrad's ASTs, optimized by our heuristics, give exactly our kernels (shape, opts and views)?"""
    theirs = [optimize(Kernel(*ast)) for ast in asts]
    return len(ours) == len(theirs) and all(
        a.applied_opts == b.applied_opts and [s.views for s in a.sts] == [s.views for s in b.sts]
        for a, b in zip(ours, theirs)
    )


def _median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# medians per variant, in turn: at least 5, and more (up to 50) while their launches add up to under 2 s. This VM's
# memory speed changes from moment to moment (sum 16M: 0.5, 0.9 or 1.3 ms for one kernel), so a cheap kernel needs
# medians spread over more time to meet the fast moments; with 5 in all, one variant met one that the other missed
SIDE_BY_SIDE_ROUNDS, SIDE_BY_SIDE_SECONDS, SIDE_BY_SIDE_MOST = 5, 2.0, 50


def _time_side_by_side(variants: dict[str, list[tuple[Kernel, list]]], runs: int) -> dict[str, float]:
    """Seconds per variant (the sum over its kernels): the best of its medians of `runs` launches, taken in turn so
    that a busy moment of a shared machine hits every variant alike (SIDE_BY_SIDE_ROUNDS and _SECONDS say how many).
    (Another job only ever adds time, and on a CPU device it can double a launch by taking a core: the lowest median
    is the one it didn't touch.)"""
    samples: dict[str, list[float]] = {v: [] for v in variants}
    spent, taken = 0.0, 0
    while taken < SIDE_BY_SIDE_ROUNDS or (spent < SIDE_BY_SIDE_SECONDS and taken < SIDE_BY_SIDE_MOST):
        for variant, kernels in variants.items():
            samples[variant].append(sum(time_kernel(k, *x, runs=runs) for k, x in kernels))
            spent += samples[variant][-1] * runs
        taken += 1
    return {v: min(s) for v, s in samples.items()}


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def bench(
    names: Sequence[str] | None = None,
    runs: int = 10,
    out=None,
    tinygrad: str | None = None,
    search_amt: int | None = None,
    tinygrad_beam: str | None = None,
    cache: bool = True,
) -> dict[str, dict]:
    """Time each benchmark unoptimized, with the hand-coded opts, and in numpy; print a table as it goes.
    With `tinygrad`, a JSON file of tinygrad_perf.sh, the hand-coded rows also show tinygrad 0.9.1's time for the
    same workload and the ratio (ours / tinygrad's). With `search_amt`, also beam-search each kernel (that many
    kept per round) and time the searched kernels; with `tinygrad_beam`, a JSON file of tinygrad_beam.sh, also
    time tinygrad's BEAM choices on our runtime. Returns {name: {variant: seconds, "search_s": ...}}."""
    out = out or sys.stdout
    results: dict[str, dict] = {}
    measured = _tinygrad_measured(tinygrad)
    tinygrad_s = {name: s for name, (s, _) in measured.items()}
    beam = _tinygrad_beam(tinygrad_beam) if search_amt else {}
    compared, different = [], []
    print(
        f"device: {get_device().name}, {os.cpu_count()} cores, "
        + (
            f"best of {SIDE_BY_SIDE_ROUNDS}-{SIDE_BY_SIDE_MOST} medians of {runs} runs, variants in turn"
            if search_amt
            else f"median of {runs} runs"
        )
        + (f"; tinygrad 0.9.1's times from {tinygrad}" if tinygrad_s else "")
        + (f"; tinygrad's BEAM choices from {tinygrad_beam}" if beam else "")
        + "\n",
        file=out,
    )
    n, cost = optimizer_cost()  # first, while the caches are cold
    print(
        f"optimizer: Kernel() + hand_coded_optimizations() takes {cost * 1e3:.3f} ms per kernel "
        f"({n} corpus kernels, once each)\n",
        file=out,
    )
    header = f"{'kernel':26s} {'variant':13s} {'time':>11s} {'GFLOP/s':>9s} {'GB/s':>8s}"
    print(header + ("   tinygrad 0.9.1  ours/tinygrad" if tinygrad_s else ""), file=out)
    for name in names or BENCHMARKS:
        build_asts, flops, nbytes, numpy_fn = BENCHMARKS[name]
        asts = build_asts()
        inputs = [random_inputs(ast, seed=1) for ast in asts]  # real data: untouched pages flatter memory-bound kernels
        times: dict[str, float] = {}
        unoptimized = [Kernel(*ast) for ast in asts]
        first = time_kernel(unoptimized[0], *inputs[0], runs=1, warmup=1)
        n = runs if first < 0.5 else 3 if first < 3 else 1  # a slow unoptimized kernel needs fewer runs
        times["unoptimized"] = sum(time_kernel(k, *x, runs=n, warmup=0) for k, x in zip(unoptimized, inputs))
        hand = [optimize(Kernel(*ast)) for ast in asts]
        if name in measured and measured[name][1]:
            compared.append(name)
            if not _same_kernels(hand, measured[name][1]):
                different.append(name)
        variants = {"hand-coded": list(zip(hand, inputs))}
        extra: dict[str, float] = {}
        if search_amt:
            found = [search(k, *x, amt=search_amt, cache=cache) for k, x in zip(unoptimized, inputs)]
            variants["searched"] = [(r.kernel, x) for r, x in zip(found, inputs)]
            extra["search_s"] = sum(r.seconds for r in found)
            extra["cached"] = all(r.cached for r in found)
            if name in beam:
                variants["tinygrad BEAM"] = [(k, random_inputs(k, seed=1)) for k in beam[name][0]]
                extra["tinygrad_search_s"] = beam[name][1]
        times.update(
            _time_side_by_side(variants, runs)
            if len(variants) > 1
            else {"hand-coded": sum(time_kernel(k, *x, runs=runs) for k, x in variants["hand-coded"])}
        )
        data = [x.reshape(-1) for x in inputs[0]]
        numpy_fn(*data)  # warm-up
        times["numpy"] = _median_seconds(lambda: numpy_fn(*data), 3 if times["hand-coded"] > 0.05 else runs)
        for variant, t in times.items():
            note = ""
            if variant == "hand-coded" and name in tinygrad_s:
                note = f"{tinygrad_s[name] * 1e3:11.2f} ms  {t / tinygrad_s[name]:13.2f}"
            elif variant == "searched":
                note = f"search {extra['search_s']:.1f} s" + (" (cached)" if extra["cached"] else "")
                note += "  " + " | ".join(" ".join(map(str, k.applied_opts)) or "no opts" for k, _ in variants[variant])
            elif variant == "tinygrad BEAM":
                note = f"search {extra['tinygrad_search_s']:.1f} s (tinygrad's, in its own sitting)"
            print(
                f"{name:26s} {variant:13s} {t * 1e3:8.2f} ms {flops / t * 1e-9:9.2f} {nbytes / t * 1e-9:8.2f}   "
                f"{note}".rstrip(),
                file=out,
                flush=True,
            )
        results[name] = {**times, **extra}
    if compared:
        print(
            "\n"
            + (
                f"not the same kernels as tinygrad's: {', '.join(different)}"
                if different
                else "each hand-coded kernel is the one tinygrad ran (same AST, opts and views)"
            ),
            file=out,
        )
    if search_amt:
        _summary(results, out)
    return results


def _summary(results: dict[str, dict], out) -> None:
    """The searched column against tinygrad's BEAM, as a markdown table, and the geometric means."""
    print(
        "\n| workload | hand-coded | searched | tinygrad BEAM | x tinygrad | numpy | searched GFLOP/s | "
        "searched GB/s | search s | tinygrad search s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        file=out,
    )
    for name, r in results.items():
        _, flops, nbytes, _ = BENCHMARKS[name]
        tg, tg_s, ours = r.get("tinygrad BEAM"), r.get("tinygrad_search_s"), r["searched"]
        print(
            f"| {name} | {r['hand-coded'] * 1e3:.2f} ms | {ours * 1e3:.2f} ms | "
            f"{f'{tg * 1e3:.2f} ms' if tg else '-'} | {f'{tg / ours:.2f}' if tg else '-'} | "
            f"{r['numpy'] * 1e3:.2f} ms | {flops / ours * 1e-9:.1f} | {nbytes / ours * 1e-9:.1f} | "
            f"{r['search_s']:.1f} | {f'{tg_s:.1f}' if tg_s else '-'} |",
            file=out,
        )
    both = [r for r in results.values() if "tinygrad BEAM" in r]
    print(
        f"\ngeomean speedup of searched over hand-coded: "
        f"{geomean([r['hand-coded'] / r['searched'] for r in results.values()]):.2f}x",
        file=out,
    )
    if both:
        ours, theirs = sum(r["search_s"] for r in both), sum(r["tinygrad_search_s"] for r in both)
        ratios = [r["tinygrad BEAM"] / r["searched"] for r in both]  # x tinygrad
        print(
            f"tinygrad BEAM's kernel time / our searched kernel's (x tinygrad): geomean "
            f"{geomean(ratios):.2f}, lowest {min(ratios):.2f} (>= 1: ours at least as fast)\n"
            f"search seconds, tinygrad's / ours: {theirs:.1f} s / {ours:.1f} s = {theirs / ours:.2f}x in all, geomean "
            f"{geomean([r['tinygrad_search_s'] / r['search_s'] for r in both]):.2f}x (>= 1: ours at least as fast)",
            file=out,
        )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python bench.py",
        description="Time the benchmark suite on the OpenCL device: "
        "unoptimized, hand-coded and (with --search) beam-searched kernels, numpy, and "
        "tinygrad 0.9.1's own times when its measurement files exist.",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="benchmarks to run (default: all): " + ", ".join(f"'{n}'" for n in BENCHMARKS),
    )
    p.add_argument("--runs", type=int_at_least(1), default=10, help="timed runs per kernel, after warm-up (10)")
    p.add_argument(
        "--tinygrad",
        metavar="FILE",
        help="tinygrad 0.9.1's times written by tinygrad_perf.sh, shown beside ours",
    )
    p.add_argument("--search", action="store_true", help="also beam-search each kernel and time the result")
    p.add_argument("--beam", type=int, default=2, metavar="N", help="kernels kept per round of --search (2)")
    p.add_argument("--no-cache", action="store_true", help="search again even if the disk cache knows the answer")
    p.add_argument(
        "--tinygrad-beam",
        metavar="FILE",
        help="tinygrad 0.9.1's BEAM choices written by tinygrad_beam.sh: with --search, time them on "
        "our runtime beside ours",
    )
    args = p.parse_args(argv)
    if unknown := [n for n in args.names if n not in BENCHMARKS]:
        p.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    if args.beam < 1:
        p.error(f"--beam must be at least 1, got {args.beam}")
    for option, path, read in [
        ("--tinygrad", args.tinygrad, _tinygrad_measured),
        ("--tinygrad-beam", args.tinygrad_beam, _tinygrad_beam if args.search else None),
    ]:
        try:  # read before the first benchmark runs: a bad file costs no wait
            if read is not None:
                read(path)
        except ValueError as e:
            p.error(f"{option}: {e}")
    bench(
        args.names,
        args.runs,
        tinygrad=args.tinygrad,
        search_amt=args.beam if args.search else None,
        tinygrad_beam=args.tinygrad_beam,
        cache=not args.no_cache,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python bench.py", one_line=(NoDeviceError,)))
