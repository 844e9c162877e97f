"""bench.py: the benchmark suite. Times our kernels on each CPU OpenCL device (unoptimized, hand-coded,
beam-searched) beside numpy, against the device's own limits (an FMA-bound kernel, and streaming kernels at each
row's own bytes timed in turn with its kernels: each row's fraction of its roofline bound), and beside tinygrad 0.9.1
measured on the same device by tools/tinygrad_times.py, run under tinygrad 0.9.1 (its hand-coded kernels' times, and
its BEAM=2 choices, which we apply to our own Kernel and time with our runtime, so both are timed the same way in one
sitting).

Usage: python bench.py [NAME ...] [--search] [--beam N] [--runs N] [--device N|NAME]
                       [--tinygrad FILE ...] [--tinygrad-beam FILE ...]
Each working device runs in a child process of its own (KERNELPY_DEVICE=i), one after another; with
KERNELPY_DEVICE or PYOPENCL_CTX set, or in such a child, the suite runs in this process on the device they choose.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pyopencl as cl

from corpus import lazyop_from_json
from demo import conv2d_ast, elementwise_ast, int_at_least, matmul_ast, matvec_ast, run_command_line, sum_ast
from kernel import TARGETS, Kernel, KernelOptError, LazyOp, Opt, OptOps, ReduceOps, ShapeTracker
from kernel import optimize
from demo import load, reduce, store
from runtime import BuildError, NoDeviceError, buffers, get_device, pick_device, random_inputs, time_kernel
from runtime import working_devices
from search.compilers import build_first
from search import cost
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
# ==== tinygrad 0.9.1's files: written by tools/tinygrad_times.py under tinygrad, one per device and mode ==========
# {"device": OpenCL device name, "mode": "hand-coded" or "beam", "workloads": {NAME: {"kernels": [...], ...}}}, NAME
# a key of BENCHMARKS; each kernel gives its "ast" (the golden corpus's JSON form) and "opts" ([op, axis, amount]),
# "tinygrad_s" (tinygrad's own time of it) and, in a BEAM file, "search_s".
MODES = {"hand-coded": "--tinygrad", "beam": "--tinygrad-beam"}  # each mode's option of bench.py


def _load_json(path: str) -> dict:
    """The JSON object in path; ValueError naming the file where it is missing or can't be read."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as e:
        raise ValueError(f"{path} can't be read as JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def _seconds(w: dict, key: str, name: str) -> float:
    """w[key], a time: ValueError naming the workload and the value where it is no number of seconds > 0 that a float
    holds (a huge JSON integer is none)."""
    if isinstance(t := w[key], bool) or not isinstance(t, (int, float)) or not 0 < t <= sys.float_info.max:
        raise ValueError(f"workload {name!r} has {key!r}: {t!r}, not a number of seconds > 0")
    return float(t)


def read_tinygrad_file(path: str, mode: str) -> tuple[str, dict[str, dict]]:
    """(device name, {benchmark: {"tinygrad_s", "asts", and in a BEAM file "kernels" (tinygrad's choices applied to
    our own Kernels of its ASTs) and "search_s"}}) of a file of tools/tinygrad_times.py in `mode` ("hand-coded" or
    "beam"); ValueError naming the file where it is anything else."""
    data = _load_json(path)
    try:  # JSON, but is it what tools/tinygrad_times.py writes? (a missing key, a malformed AST, opt or time)
        if data.get("mode") != mode:
            other = MODES.get(data.get("mode"), "no option of bench.py")
            raise ValueError(f"it holds mode {data.get('mode')!r}, not {mode!r}: give it to {other}")
        if not isinstance(device := data["device"], str) or not isinstance(data["workloads"], dict):
            raise TypeError('"device" must be a string and "workloads" an object')
        out = {}
        for name, w in data["workloads"].items():
            if name not in BENCHMARKS:
                raise KeyError(f"workload {name!r} is none of bench.py's")
            if not (asts := [tuple(lazyop_from_json(a) for a in k["ast"]) for k in w["kernels"]]):
                raise ValueError(f"workload {name!r} has no kernels")
            out[name] = {"tinygrad_s": _seconds(w, "tinygrad_s", name), "asts": asts}
            if mode == "beam":
                kernels = [Kernel(*ast) for ast in asts]
                for k, entry in zip(kernels, w["kernels"]):
                    for op, axis, amt in entry["opts"]:
                        k.apply_opt(Opt(OptOps[op], axis, amt))
                out[name] |= {"kernels": kernels, "search_s": _seconds(w, "search_s", name)}
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, KernelOptError) as e:
        raise ValueError(f"{path} is not a file of tools/tinygrad_times.py ({type(e).__name__}: {e})") from None
    return device, out


def tinygrad_files(paths: Sequence[str], mode: str) -> dict[str, tuple[str, dict[str, dict]]]:
    """{device name: (path, what read_tinygrad_file read)} of the files of one mode; ValueError naming the file
    where two are of one device (bench.py could not tell which to use) or one can't be read."""
    out: dict[str, tuple[str, dict[str, dict]]] = {}
    for path in paths:
        device, data = read_tinygrad_file(path, mode)
        if device in out:
            raise ValueError(f"{out[device][0]} and {path} are both of device {device!r}: give one")
        out[device] = (path, data)
    return out


# ==== the device's limits: an FMA-bound kernel and streaming kernels, each timed as the suite's kernels are =====
# A kernel takes at least max(flops / peak, bytes / bandwidth) seconds (the roofline): each row shows that bound over
# its time, and which of the two it is. The header's peak is cost.fma_peak's; a row that the header's limits call
# compute-bound is bounded by the form that reached it, timed in turn with the row's kernels at the row's flops (the
# FMA probe read 231 GFLOP/s at one sitting's start and 440 at the next, in a slow stretch of this VM). A row's
# bandwidth is the fastest of the streams (cost.STREAMS, shaped as the fastest searched kernels) that write the share
# of their bytes nearest the row's (streaming_kinds), moving the row's own bytes, timed in turn with its kernels
# (time_side_by_side): this VM's memory is at some moments more than twice as fast as at others, so a bound timed
# apart from its kernels is none. At the row's own bytes alone: a kernel that touches its data once gets from memory all
# that the caches don't keep, as a stream does in steady state at the same footprint (each launch finds what the last
# left in the caches); the stream at a smaller footprint (a half of it fitting a cache) is one no such kernel reaches.
# The header's stream is memory's bandwidth: a triad over 3 arrays each of STREAM_FLOATS floats or more and at least
# the last-level cache, each byte moved once.
STREAM_FLOATS, LIMIT_RUNS, BEST_OF = 64 << 20, 5, 5  # BEST_OF: medians of each FMA form, in turn


class Limits(NamedTuple):
    """The device's measured limits: its FMA peak (flop/s), memory's stream bandwidth (byte/s), how they were
    measured, the kinds of cost.STREAMS each row's memory bound is timed with, in turn with its kernels (none: the
    stream bounds every row), and the FMA form (cost.fma_launches) a compute-bound row's peak is timed with, in turn
    with its kernels (none: the peak bounds every row)."""

    peak: float
    stream: float
    how: str
    kinds: tuple[str, ...] = ()
    form: str = ""


def roofline(flops: float, nbytes: float, seconds: float, limits: Limits) -> tuple[float, str]:
    """(bound / seconds, "compute" or "memory"): the fraction of the roofline bound max(flops / peak, bytes /
    stream) that a kernel of `seconds` reaches, and which limit binds (the larger term)."""
    compute, memory = flops / limits.peak, nbytes / limits.stream
    return max(compute, memory) / seconds, "compute" if compute >= memory else "memory"


def streaming_kinds(asts: Sequence[tuple[LazyOp, ...]], kinds: Sequence[str]) -> list[str]:
    """The `kinds` of cost.STREAMS whose share of bytes written is nearest that of the kernels of `asts` (their
    outputs' bytes over all their buffers'): a sum is bounded by the read, an add by the add and the triad. A byte
    written costs more than one read (its cache line is read first), so a stream that writes less than a kernel is a
    bound it can't reach, and one that writes more is one it may pass."""
    infos = [b for ast in asts for b in buffers(ast)]
    share = sum(b.size * b.dtype.itemsize for b in infos if b.output) / sum(b.size * b.dtype.itemsize for b in infos)
    apart = {k: abs(cost.STREAMS[k].writes / (cost.STREAMS[k].reads + cost.STREAMS[k].writes) - share) for k in kinds}
    return [k for k in kinds if apart[k] == min(apart.values(), default=0)]


def last_level_cache() -> int:
    """Bytes of the largest cache: the device's own figure or the CPU's (Linux's sysfs), whichever is larger."""
    sizes = [get_device().ctx.devices[0].global_mem_cache_size]
    with contextlib.suppress(OSError, ValueError):
        for index in os.scandir("/sys/devices/system/cpu/cpu0/cache"):
            if index.name.startswith("index"):
                with open(os.path.join(index.path, "size")) as f:
                    text = f.read().strip()  # "491520K"
                sizes.append(
                    int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG" else int(text)
                )
    return max(sizes)


def stream_floats(cache: int, max_alloc: int, memory: int) -> int:
    """Floats per array of the triad: STREAM_FLOATS or more and at least the last-level cache (`cache` bytes), each
    array within the device's largest buffer (`max_alloc` bytes) and all 3 under 1/5 of its `memory`. A power of two,
    so that its float4s fill whole work-groups of 64 (PoCL refuses a launch that doesn't), and the same size from one
    sitting to the next while the memory a device reports moves (PoCL's: what is free now)."""
    most = min(max_alloc // 4, memory // 64)
    return 1 << min((max(STREAM_FLOATS, cache // 4) - 1).bit_length(), most.bit_length() - 1)


def device_limits_measured(runs: int = LIMIT_RUNS) -> Limits:
    """The device's FMA peak and stream bandwidth, measured now (see STREAM_FLOATS), and every stream's kind."""
    device = get_device().ctx.devices[0]
    peak, best = cost.fma_peak(runs, repeats=BEST_OF)
    n = stream_floats(last_level_cache(), device.max_mem_alloc_size, device.global_mem_size)
    stream, _ = cost.bandwidth(12 * n, ("triad",), runs)
    how = f"{best}, {cost.FMA_CHAINS} chains; triad over 3 arrays of {4 * n / 2**20:.4g} MiB"
    how += f"; medians of {runs} launches"
    return Limits(peak, stream, how, tuple(cost.STREAMS), best)


def machine() -> str:
    """The CPU's model and cores (Linux's /proc/cpuinfo, else the platform module)."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            model = next((x.split(":", 1)[1].strip() for x in f if x.startswith("model name")), model)
    return f"{model}, {os.cpu_count()} cores"


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


def time_side_by_side(variants: dict[str, list[tuple[Kernel, list]] | Callable[[int], float]], runs: int) -> dict:
    """Seconds per variant (the sum over its kernels, or what its function returns, given `runs`: a stream's): the
    best of its medians of `runs` launches, on the same device buffers, taken in turn so that a busy moment of a
    shared machine hits every variant alike (SIDE_BY_SIDE_ROUNDS and _SECONDS say how many). (Another job only ever
    adds time, and on a CPU device it can double a launch by taking a core: the lowest median is the one it didn't
    touch.)"""
    samples: dict[str, list[float]] = {v: [] for v in variants}
    # shared: one set of device buffers for the kernels of the same buffers and the same input arrays, whatever their
    # ASTs (tinygrad's add 16M is a 4096x4096 add, ours a 16M one: the same memory), the same for every variant
    spent, taken, shared = 0.0, 0, {}
    while taken < SIDE_BY_SIDE_ROUNDS or (spent < SIDE_BY_SIDE_SECONDS and taken < SIDE_BY_SIDE_MOST):
        for variant, ks in variants.items():
            if callable(ks):
                t = ks(runs)
            else:
                t = sum(time_kernel(k, *x, runs=runs, device_args=shared.setdefault(_same_memory(k, x), {}))
                        for k, x in ks)  # fmt: skip
            samples[variant].append(t)
            spent += t * runs
        taken += 1
    return {v: min(s) for v, s in samples.items()}


def _same_memory(k: Kernel, inputs: Sequence) -> tuple:
    """What kernels that may share device buffers have alike: their buffers (idx, dtype, size, read, written) and the
    very input arrays (so the same data)."""
    return tuple((b.idx, b.dtype, b.size, b.read, b.output) for b in buffers(k.ast)), tuple(id(x) for x in inputs)


def _at_pace(launch: tuple, scale: float) -> Callable[[int], float]:
    """A stream's median of `runs` launches (cost.median_launch's arguments), times `scale`: the seconds it would
    take to move a row's bytes at its pace."""
    return lambda runs: cost.median_launch(*launch, runs=runs) * scale


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _this_devices(paths: Sequence[str] | str | None, mode: str) -> tuple[str | None, dict[str, dict]]:
    """(path, data) of the file of `mode` measured on this process's device, among `paths` (None, {}: none is)."""
    files = tinygrad_files([paths] if isinstance(paths, str) else paths or [], mode)
    return files.get(get_device().name, (None, {}))


def bench(
    names: Sequence[str] | None = None,
    runs: int = 10,
    out=None,
    tinygrad: Sequence[str] | str | None = None,
    search_amt: int | None = None,
    tinygrad_beam: Sequence[str] | str | None = None,
    cache: bool = True,
    limits: Limits | None = None,
    log: str | None = None,
) -> dict[str, dict]:
    """Time each benchmark on this process's device unoptimized, with the hand-coded opts, and in numpy; print a
    table as it goes, each row with its fraction of the roofline bound (`limits`: measured first where not given; its
    memory bound: the streams of limits.kinds that write as the row does, at its bytes, timed in turn with its
    kernels; a compute-bound row's peak: limits.form at its flops, in turn too).
    With `tinygrad`, files of tools/tinygrad_times.py --hand-coded (the one of this device counts), the
    hand-coded rows also show tinygrad 0.9.1's time for the same workload and the ratio (ours / tinygrad's). With
    `search_amt`, also beam-search each kernel (that many kept per round) and time the searched kernels; with
    `tinygrad_beam`, files of tools/tinygrad_times.py --beam, also time tinygrad's BEAM choices on our runtime.
    Returns {name: {variant: seconds, "search_s": ..., "bound_s": the roofline bound, "binds": its limit, "bandwidth":
    the memory bound's bytes a second, "peak": the compute bound's flops a second}}."""
    out = out or sys.stdout
    results: dict[str, dict] = {}
    measured_from, measured = _this_devices(tinygrad, "hand-coded")
    beam_from, beam = _this_devices(tinygrad_beam, "beam") if search_amt else (None, {})
    compared, different = [], []
    dev = get_device()
    device = dev.ctx.devices[0]
    print(f"machine: {machine()}", file=out, flush=True)
    limits = limits or device_limits_measured()
    print(
        f"device: {dev.name} ({device.platform.name.strip()}), {device.max_compute_units} compute units; "
        + (
            f"best of {SIDE_BY_SIDE_ROUNDS}-{SIDE_BY_SIDE_MOST} medians of {runs} runs, variants in turn"
            if search_amt or limits.kinds
            else f"median of {runs} runs"
        )
        + (f"; tinygrad 0.9.1's times from {measured_from}" if measured else "")
        + (f"; tinygrad's BEAM choices from {beam_from}" if beam else ""),
        file=out,
        flush=True,
    )
    print(
        f"FMA peak {limits.peak * 1e-9:.1f} GFLOP/s, stream {limits.stream * 1e-9:.1f} GB/s ({limits.how})"
        + ("; each row's memory bound: the streams that write as it does, at its bytes, in turn" * bool(limits.kinds))
        + (f"; a compute-bound row's peak: {limits.form}, at its flops, in turn" * bool(limits.form))
        + "\n",
        file=out,
    )
    n, per_kernel = optimizer_cost()  # first, while the caches are cold
    print(
        f"optimizer: Kernel() + hand_coded_optimizations() takes {per_kernel * 1e3:.3f} ms per kernel "
        f"({n} corpus kernels, once each)\n",
        file=out,
    )
    header = f"{'kernel':26s} {'variant':13s} {'time':>11s} {'GFLOP/s':>9s} {'GB/s':>8s} {'roofline':>14s}"
    print(header + ("   tinygrad 0.9.1  ours/tinygrad" if measured else ""), file=out)
    for name in names or BENCHMARKS:
        build_asts, flops, nbytes, numpy_fn = BENCHMARKS[name]
        asts = build_asts()
        inputs = [random_inputs(ast, seed=1) for ast in asts]  # real data: untouched pages flatter memory-bound kernels
        times: dict[str, float] = {}
        unoptimized, hand = [Kernel(*ast) for ast in asts], [optimize(Kernel(*ast)) for ast in asts]
        if _unbuilt(name, unoptimized + hand + (beam[name]["kernels"] if name in beam else []), out):
            continue
        first = time_kernel(unoptimized[0], *inputs[0], runs=1, warmup=1)
        n = runs if first < 0.5 else 3 if first < 3 else 1  # a slow unoptimized kernel needs fewer runs
        times["unoptimized"] = sum(time_kernel(k, *x, runs=n, warmup=0) for k, x in zip(unoptimized, inputs))
        if name in measured:
            compared.append(name)
            if not _same_kernels(hand, measured[name]["asts"]):
                different.append(name)
        variants = {"hand-coded": list(zip(hand, inputs))}
        extra: dict[str, float] = {}
        if search_amt:
            found = [search(k, *x, amt=search_amt, cache=cache, log=log) for k, x in zip(unoptimized, inputs)]
            if _unbuilt(name, [r.kernel for r in found], out):  # a cached answer: not built in this process yet
                continue
            variants["searched"] = [(r.kernel, x) for r, x in zip(found, inputs)]
            extra["search_s"] = sum(r.seconds for r in found)
            extra["cached"] = all(r.cached for r in found)
            extra["built"] = sum(r.compiled for f in found for r in f.rounds)
            if name in beam:
                theirs = beam[name]["kernels"]  # on the row's own inputs where their buffers are ours (add 16M's are)
                same = [_same_memory(k, ()) for k in theirs] == [_same_memory(k, ()) for k in unoptimized]
                variants["tinygrad BEAM"] = list(zip(theirs, inputs)) if same else [
                    (k, random_inputs(k, seed=1)) for k in theirs]  # fmt: skip
                extra["tinygrad_search_s"] = beam[name]["search_s"]
        kinds = streaming_kinds(asts, limits.kinds)
        bounds = {f"the {kind} stream": _at_pace(launch, nbytes / moved) for kind, moved, launch in
                  cost.stream_launches(nbytes, kinds)}  # fmt: skip
        if limits.form and flops / limits.peak >= nbytes / limits.stream:  # compute-bound: the peak's form too
            per_launch, launch = cost.fma_launches()[limits.form]
            bounds["the FMA peak"] = _at_pace(launch, flops / per_launch)
        times.update(
            time_side_by_side(variants | bounds, runs)
            if len(variants | bounds) > 1
            else {"hand-coded": sum(time_kernel(k, *x, runs=runs) for k, x in variants["hand-coded"])}
        )
        paced = {v: times.pop(v) for v in bounds}  # the row's flops at the FMA's pace, its bytes at each stream's
        peak = flops / paced.pop("the FMA peak") if "the FMA peak" in paced else limits.peak
        limits_here = Limits(peak, nbytes / min(paced.values()) if paced else limits.stream, limits.how)  # (fastest)
        data = [x.reshape(-1) for x in inputs[0]]
        numpy_fn(*data)  # warm-up
        times["numpy"] = _median_seconds(lambda: numpy_fn(*data), 3 if times["hand-coded"] > 0.05 else runs)
        bound_s = roofline(flops, nbytes, 1.0, limits_here)[0]  # the bound, in seconds
        for variant, t in times.items():
            note = ""
            if variant == "hand-coded" and name in measured:
                theirs = measured[name]["tinygrad_s"]
                note = f"{theirs * 1e3:11.2f} ms  {t / theirs:13.2f}"
            elif variant == "searched":
                note = f"search {extra['search_s']:.1f} s" + (" (cached)" if extra["cached"] else "")
                note += "  " + " | ".join(" ".join(map(str, k.applied_opts)) or "no opts" for k, _ in variants[variant])
            elif variant == "tinygrad BEAM":
                note = f"search {extra['tinygrad_search_s']:.1f} s (tinygrad's, in its own sitting)"
            fraction, binds = roofline(flops, nbytes, t, limits_here)
            print(
                f"{name:26s} {variant:13s} {t * 1e3:8.2f} ms {flops / t * 1e-9:9.2f} {nbytes / t * 1e-9:8.2f} "
                f"{fraction:5.2f} {binds:>8s}   {note}".rstrip(),
                file=out,
                flush=True,
            )
        results[name] = {**times, **extra, "bound_s": bound_s, "binds": binds, "bandwidth": limits_here.stream,
                         "peak": limits_here.peak}  # fmt: skip
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
    if skipped := cost.skipped():  # the device's limits, measured without them
        print("\nnot built, so not measured: " + "; ".join(f"{w} ({why})" for w, why in skipped.items()), file=out)
    if search_amt and results:
        _summary(results, out)
    return results


def _unbuilt(name: str, kernels: list[Kernel], out) -> bool:
    """Whether a kernel of row `name` doesn't build: each is built first where the device's compiler can't end this
    process (compilers.build_first), and a row with one that fails is skipped, saying why."""
    try:
        for k in kernels:
            build_first(k)
        return False
    except BuildError as e:
        print(f"{name:26s} skipped: {str(e).splitlines()[0]}", file=out, flush=True)
        return True


def _summary(results: dict[str, dict], out) -> None:
    """The searched column against tinygrad's BEAM, as a markdown table, and the geometric means."""
    print(
        "\n| workload | hand-coded | searched | tinygrad BEAM | x tinygrad | numpy | searched GFLOP/s | searched GB/s "
        "| bound GB/s | peak GFLOP/s | searched of roofline | numpy of roofline | built | search s "
        "| tinygrad search s |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        file=out,
    )
    for name, r in results.items():
        _, flops, nbytes, _ = BENCHMARKS[name]
        tg, tg_s, ours = r.get("tinygrad BEAM"), r.get("tinygrad_search_s"), r["searched"]
        print(
            f"| {name} | {r['hand-coded'] * 1e3:.2f} ms | {ours * 1e3:.2f} ms | "
            f"{f'{tg * 1e3:.2f} ms' if tg else '-'} | {f'{tg / ours:.2f}' if tg else '-'} | "
            f"{r['numpy'] * 1e3:.2f} ms | {flops / ours * 1e-9:.1f} | {nbytes / ours * 1e-9:.1f} | "
            f"{r['bandwidth'] * 1e-9:.1f} | {r['peak'] * 1e-9:.1f} | {r['bound_s'] / ours:.2f} ({r['binds']}) | "
            f"{r['bound_s'] / r['numpy']:.2f} | {r.get('built', '-')} | {r['search_s']:.1f} | "
            f"{f'{tg_s:.1f}' if tg_s else '-'} |",
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


def _devices() -> list[str]:
    """The working devices' names, as KERNELPY_DEVICE counts them: "NAME (PLATFORM)" ([] where OpenCL has none)."""
    try:
        return [f"{d.name.strip()} ({d.platform.name.strip()})" for d in working_devices()]
    except cl.Error:  # no platform at all: the suite, run here, says so in one line
        return []


def choose_devices(choice: str | None, names: Sequence[str]) -> list[int]:
    """The indices of the devices to run on: all, or the one `choice` names (runtime.pick_device's rule, as
    KERNELPY_DEVICE takes it); NoDeviceError where it names none of them, or two or more."""
    return list(range(len(names))) if choice is None else [pick_device(choice, names, "--device")]


def _child_argv(args: argparse.Namespace) -> list[str]:
    """The command line of one device's child: this one's, but --device."""
    argv = [*args.names, "--runs", str(args.runs), "--beam", str(args.beam)]
    argv += ["--search"] * args.search + ["--no-cache"] * args.no_cache + ["--log", args.log] * bool(args.log)
    for option, paths in (("--tinygrad", args.tinygrad), ("--tinygrad-beam", args.tinygrad_beam)):
        for path in paths:
            argv += [option, path]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python bench.py",
        description="Time the benchmark suite on each CPU OpenCL device that works here, one after another, each in "
        "a child process of its own (KERNELPY_DEVICE=i): first the device's limits (FMA peak, stream bandwidth), "
        "then unoptimized, hand-coded and (with --search) beam-searched kernels, each as a fraction of its "
        "roofline bound, numpy, and tinygrad 0.9.1's own figures where files of tools/tinygrad_times.py are given. "
        "With KERNELPY_DEVICE or PYOPENCL_CTX set, it runs on the device they choose, in this process.",
        epilog="tinygrad's files: run tools/tinygrad_times.py under tinygrad 0.9.1 once per device (its docstring "
        "says how to point tinygrad at one); each file names the device it was measured on, and each device uses "
        "the file of its own name, so give every device's file at once: --tinygrad A.json --tinygrad B.json.",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="benchmarks to run (default: all): " + ", ".join(f"'{n}'" for n in BENCHMARKS),
    )
    p.add_argument("--runs", type=int_at_least(1), default=10, help="timed runs per kernel, after warm-up (10)")
    p.add_argument(
        "--device",
        metavar="N|NAME",
        help="run on this device alone: its index among the working devices, or a part of its or its platform's name "
        "that no other has ('pthread': PoCL, 'Intel(R) OpenCL': Intel's CPU runtime)",
    )
    p.add_argument(
        "--tinygrad",
        metavar="FILE",
        action="append",
        default=[],
        help="tinygrad 0.9.1's hand-coded kernels' times (tools/tinygrad_times.py --hand-coded), shown beside "
        "ours on the device the file names; once per device",
    )
    p.add_argument("--search", action="store_true", help="also beam-search each kernel and time the result")
    p.add_argument("--beam", type=int, default=2, metavar="N", help="kernels kept per round of --search (2)")
    p.add_argument("--no-cache", action="store_true", help="search again even if the disk cache knows the answer")
    p.add_argument("--log", metavar="FILE", help="with --search, append every candidate and time to FILE")
    p.add_argument(
        "--tinygrad-beam",
        metavar="FILE",
        action="append",
        default=[],
        help="tinygrad 0.9.1's BEAM choices (tools/tinygrad_times.py --beam): with --search, timed on our runtime "
        "beside ours, on the device the file names; once per device",
    )
    args = p.parse_args(argv)
    if unknown := [n for n in args.names if n not in BENCHMARKS]:
        p.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    if args.beam < 1:
        p.error(f"--beam must be at least 1, got {args.beam}")
    if args.tinygrad_beam and not args.search:
        p.error("--tinygrad-beam needs --search (tinygrad's BEAM choices are timed beside our searched kernels)")
    if args.log and not args.search:
        p.error("--log needs --search (it logs the searches)")
    try:  # before the device's limits are measured: an unwritable log costs no wait
        if args.log:
            cost.check_log(args.log)
    except ValueError as e:
        p.error(f"--log: {e}")
    files = {}
    for option, paths, mode in [
        ("--tinygrad", args.tinygrad, "hand-coded"),
        ("--tinygrad-beam", args.tinygrad_beam, "beam"),
    ]:
        try:  # read before the first benchmark runs: a bad file costs no wait
            files[option] = tinygrad_files(paths, mode)
        except ValueError as e:
            p.error(f"{option}: {e}")
    chosen_here = args.device is None and (os.environ.get("KERNELPY_DEVICE") or os.environ.get("PYOPENCL_CTX"))
    if chosen_here or not (names := _devices()):  # this process's device (without any: get_device's error)
        bench(
            args.names,
            args.runs,
            tinygrad=args.tinygrad,
            search_amt=args.beam if args.search else None,
            tinygrad_beam=args.tinygrad_beam,
            cache=not args.no_cache,
            log=args.log,
        )
        return 0
    try:
        chosen = choose_devices(args.device, names)
    except NoDeviceError as e:
        p.error(str(e))
    devices = {n.rsplit(" (", 1)[0] for n in names}
    for option, found in files.items():
        for device, (path, _) in found.items():
            if device not in devices:
                print(f"note: {option} {path} is of device {device!r}, none of those here: not used", file=sys.stderr)
    failed = 0
    for i in chosen:
        print(f"==== device {i}: {names[i]} " + "=" * max(0, 100 - len(names[i]) - 17), flush=True)
        env = {**os.environ, "KERNELPY_DEVICE": str(i)}
        env.pop("PYOPENCL_CTX", None)
        rc = subprocess.run([sys.executable, os.path.abspath(__file__), *_child_argv(args)], env=env).returncode
        if rc:
            print(f"python bench.py on device {i} ({names[i]}) ended with exit status {rc}", file=sys.stderr)
            failed = failed or rc
        print(flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python bench.py", one_line=(NoDeviceError, BuildError)))
