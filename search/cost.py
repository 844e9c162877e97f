"""search/cost.py: what the search knows before it builds a kernel. A cheap estimate of a candidate's time
(estimate), from its shape, its buffers' strides and the device's measured limits and calibration, scaled by its
parent's measured time, ranks each round's candidates so that the search builds and times only the best few
(Triton's perf_model + top_k, Pruner's draft-then-verify); and SearchLog, a JSONL file of every candidate a search
weighed and every time it measured, which tools/replay_search.py replays offline (the cut is tuned there, and shown
not to lose the measured best)."""

import gzip
import hashlib
import json
import math
import statistics
import sys
import time
import uuid
import zlib
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import pyopencl as cl

import demo
import runtime
from corpus import kernel_from_json, kernel_to_json
from kernel import BinaryOps, Kernel, MemBuffer, TernaryOps, UnaryOps, prod


# -- the device's limits, measured ----------------------------------------------------------------------------
# Peak: every work-item keeps FMA_CHAINS independent vectors and applies a multiply-add to each in turn, FMA_ITERS
# times. One chain waits for its last result (about 4 cycles), so a core needs about 8 in flight on its two FMA
# units; the vectors fill its SIMD lanes (the compiler also vectorizes across work-items), its work-items are many
# times the cores, and it touches memory once per work-item: nothing but the FMA units limits it. It is tried at
# float4, float8 and float16 and as fma() and as a*x+b (contracted to an FMA by the compiler: pip's PoCL 3.0 calls
# a library routine for fma()), and the fastest counts. Bandwidth: at a given footprint (the bytes a kernel touches),
# the best of STREAMS moving that many bytes, each timed as a workload's kernel is, with its data left where the last
# launch put it: a footprint that fits a cache streams from the cache (a cache-aware roofline).
FMA_CHAINS, FMA_ITERS, FMA_ITEMS_PER_CORE = 8, 512, 2048
FMA_WIDTHS, FMA_FORMS = (4, 8, 16), {"fma()": "fma({0}, a, b)", "a*x+b": "{0} * a + b"}


class Stream(NamedTuple):
    """A streaming kernel: the arrays of floats it reads and writes (one that writes none writes a sum a work-item),
    how many runs of `group` floats in a row a work-group moves of each array a step (a work-item: a float of each),
    the work-items of a group, and what it does at index I (s#: run r's sum)."""

    reads: int
    writes: int
    runs: int
    group: int
    statement: str


# The triad is the model's (measured_device: the bandwidth it was fitted with), a float a work-item a step in groups
# of 64. The others move memory as the fastest kernels the search finds do, or they would be no bound on them (sum
# axis 0's reads 2 KiB in a row a step into 32 sums a work-item): a CPU runtime runs 16 work-items of local dim 0 as
# one vector thread, so a group of 16 moves long runs in a row, each into a sum (a load) of its own, many in flight.
STREAMS = {
    "triad": Stream(2, 1, 1, 64, "a[I] = b[I] + 3.0f * c[I]"),
    "read": Stream(1, 0, 32, 16, "s# += b[I]"),
    "copy": Stream(1, 1, 8, 16, "a[I] = b[I]"),
    "add": Stream(2, 1, 8, 16, "a[I] = b[I] + c[I]"),
}
# launches timed (a median after a warm-up); work-items a group (the FMA kernel's); a stream's group moves GROUP * READS
# floats of each array (256 KiB: a footprint of a few MiB still fills every core)
LIMIT_RUNS, GROUP, READS = 5, 64, 1024
_measured: dict = {}  # (device, what) -> what was measured: once per process


def median_launch(kern, global_size: int, local_size: int | None, *args, runs: int = LIMIT_RUNS) -> float:
    """Median seconds of `runs` launches after one warm-up, from OpenCL profiling events (as time_kernel)."""
    queue, times = runtime.get_device().queue, []
    for i in range(runs + 1):
        (event := kern(queue, (global_size,), (local_size,) if local_size else None, *args)).wait()
        if i:
            times.append((event.profile.end - event.profile.start) * 1e-9)
    return statistics.median(times)


def fma_source(width: int, form: str, chains: int = FMA_CHAINS) -> str:
    t = f"float{width}" if width > 1 else "float"  # width 1: the compiler's vectors across work-items alone
    lines = ["__kernel void fma_peak(__global float *out, float a, float b) {", "  float g = get_global_id(0);"]
    lines += [f"  {t} x{i} = ({t})(g * 1e-9f + {i});" for i in range(chains)]
    lines += [f"  for (int i = 0; i < {FMA_ITERS}; i++) {{"]
    lines += [f"    x{i} = {form.format(f'x{i}')};" for i in range(chains)] + ["  }"]
    lines += [f"  {t} y = {' + '.join(f'x{i}' for i in range(chains))};"]  # every chain is used: none is dead
    lanes = [f"y.s{c:x}" for c in range(width)] if width > 1 else ["y"]
    lines += [f"  out[get_global_id(0)] = {' + '.join(lanes)};", "}"]
    return "\n".join(lines)


def fma_launches() -> dict[str, tuple[float, tuple]]:
    """{form: (flops a launch, median_launch's arguments)} of each FMA form that builds (see FMA_CHAINS; skipped()
    says why one doesn't), built once per process: fma_peak times them, and bench.py times the peak's form in turn
    with a row's kernels."""
    dev = runtime.get_device()
    if (key := (dev.name, "fma launches")) not in _measured:
        items = FMA_ITEMS_PER_CORE * dev.ctx.devices[0].max_compute_units
        out = cl.Buffer(dev.ctx, cl.mem_flags.WRITE_ONLY, 4 * items)
        forms = {(w, f"float{w} {form}"): (fma_source(w, expr), "fma_peak", f"float{w} {form}")
                 for w in FMA_WIDTHS for form, expr in FMA_FORMS.items()}  # fmt: skip
        launches = {}
        for (width, label), kern in _built_all(forms).items():
            args = (kern, items, GROUP, out, np.float32(0.999), np.float32(0.001))
            launches[label] = (2 * FMA_CHAINS * FMA_ITERS * width * items, args)
        _measured[key] = launches
    return _measured[key]


def fma_peak(runs: int = LIMIT_RUNS, repeats: int = 3) -> tuple[float, str]:
    """(flop/s, the form that reached it): the device's FMA peak, the best of `repeats` medians of each form, the forms
    in turn (the same form reads differently at different moments, BENCHMARKS.md: a slow stretch then falls on several
    forms' medians, not on one form's every one), measured once per process."""
    dev = runtime.get_device()
    if (key := (dev.name, "peak", runs, repeats)) not in _measured:
        launches, best = fma_launches(), {}
        for _ in range(repeats):
            for label, (flops, args) in launches.items():
                best[label] = max(best.get(label, 0.0), flops / median_launch(*args, runs=runs))
        _measured[key] = max(((peak, label) for label, peak in best.items()), default=None) or _none_built("FMA form")
    return _measured[key]


def stream_source(kind: str) -> str:
    """The OpenCL kernel of STREAMS[kind], named `kind`: a work-group moves GROUP * READS floats in a row of each
    array, `runs` runs of `group` floats a step (a work-item: one float of each run)."""
    reads, writes, runs, group, statement = STREAMS[kind]
    args = [f"__global float *{x}" for x in "a"[:writes]] + [f"__global const float *{x}" for x in "bc"[:reads]]
    sums = [f"s{r}" for r in range(runs)] * (not writes)
    lines = [f"__kernel void {kind}({', '.join(args + ['__global float *out'] * bool(sums))}) {{"]
    lines += [f"  size_t i = get_group_id(0) * {GROUP * READS} + get_local_id(0);"]
    lines += [f"  float {' = 0.0f, '.join(sums)} = 0.0f;"] * bool(sums)
    lines += [f"  for (int j = 0; j < {GROUP * READS // group}; j += {runs}, i += {runs * group}) {{"]
    lines += [f"    {statement.replace('I', f'i + {r * group}').replace('#', str(r))};" for r in range(runs)]
    lines += ["  }"] + [f"  out[get_global_id(0)] = {' + '.join(sums)};"] * bool(sums)
    return "\n".join(lines + ["}"])


def stream_launches(nbytes: int, kinds=tuple(STREAMS)) -> list[tuple[str, int, tuple]]:
    """(kind, bytes moved, median_launch's arguments) of each of the `kinds` of STREAMS that builds (skipped() says
    why one doesn't), moving about `nbytes` in all or what the device allows (all of them a quarter of its memory,
    each array within its largest buffer), in whole work-groups (one at least), every page of its buffers touched."""
    dev, caps, launches = runtime.get_device(), runtime.device_caps(), []
    share, alloc = caps["CL_DEVICE_GLOBAL_MEM_SIZE"] // 4 // max(1, len(kinds)), caps["CL_DEVICE_MAX_MEM_ALLOC_SIZE"]
    for kind in kinds:
        if (kern := _built(stream_source(kind), kind, f"the {kind} stream")) is None:
            continue
        reads, writes, _, group, _ = STREAMS[kind]
        arrays, floats, sums = reads + writes, GROUP * READS // group, not writes  # floats: an item's of an array
        most = min(share, arrays * alloc)
        items = max(1, min(nbytes // (arrays * 4 * floats), most // (4 * (arrays * floats + sums))) // group) * group
        sizes = [4 * items * floats] * arrays + [4 * items] * sums
        bufs = [cl.Buffer(dev.ctx, cl.mem_flags.READ_WRITE, size) for size in sizes]
        for b, size in zip(bufs, sizes):
            cl.enqueue_fill_buffer(dev.queue, b, np.float32(1), 0, size)
        launches.append((kind, sum(sizes), (kern, items, group, *bufs)))
    return launches


def bandwidth(nbytes: int, kinds=tuple(STREAMS), runs: int = LIMIT_RUNS, repeats: int = 1) -> tuple[float, str]:
    """(bytes/s, the stream that reached it): the best of the `kinds` of STREAMS moving about `nbytes` in all
    (stream_launches), each a median of `runs` launches, the kinds in turn `repeats` times (a VM's memory is faster
    at some moments than at others: the best is the memory's own), measured once per process and size. A stream that
    doesn't build is left out (skipped())."""
    if (key := (runtime.get_device().name, "bandwidth", nbytes, kinds, runs, repeats)) not in _measured:
        launches = stream_launches(nbytes, kinds)
        times = [(n / median_launch(*args, runs=runs), kind) for _ in range(repeats) for kind, n, args in launches]
        _measured[key] = max(times, default=None) or _none_built("stream")
    return _measured[key]


# -- a calibration: the model's constants that differ from CPU to CPU, measured with tiny kernels ----------------
# A work-group's start (GROUP_CYCLES): CALIBRATION_GROUPS work-groups of GROUP work-items that store a float each,
# in cycles a group on each core, less the stores. The registers (REGISTERS): a scalar FMA chain a work-item (the
# compiler's vectors across work-items: one vector register a chain), TILE_CHAINS of them; the most chains before
# those whose time an FMA runs past SPILL times the best's are what the registers hold (past them, values spill).
# What a grouped reduce costs (BARRIER_CYCLES), a gather (GATHER) and the overlap stay fitted: a tiny kernel's
# barrier costs far less than the model needs a grouped reduce to cost (BENCHMARKS.md).
CALIBRATION_GROUPS, TILE_CHAINS, SPILL = 1 << 16, (16, 24, 32, 40, 48, 64), 1.4
_GROUPS = "__kernel void groups(__global float *out) { out[get_global_id(0)] = 1.0f; }"


def registers_held(seconds: dict[int, float]) -> int:
    """From {chains: seconds an FMA}: the most chains before the first (past the fastest) from which on every count
    takes over SPILL times the fastest's seconds (one slow count among fast ones is the moment's, or the compiler's),
    the registers a work-item holds."""
    fastest, most = min(seconds, key=seconds.get), SPILL * min(seconds.values())
    slow = [c for c in sorted(seconds) if c > fastest and all(t > most for d, t in seconds.items() if d >= c)]
    return max(c for c in seconds if not slow or c < slow[0])


def calibration(hz: float, runs: int = LIMIT_RUNS) -> dict:
    """{DeviceModel field: value} of the constants measured here (group_cycles, registers), at `hz` cycles a second,
    once per process; a kernel that doesn't build leaves its constant at the default (skipped() says why)."""
    dev = runtime.get_device()
    if (key := (dev.name, "calibration", hz, runs)) not in _measured:
        d, found, per_fma = dev.ctx.devices[0], {}, {}
        cores, lanes = d.max_compute_units, max(1, d.native_vector_width_float)
        items = FMA_ITEMS_PER_CORE * cores
        out = cl.Buffer(dev.ctx, cl.mem_flags.WRITE_ONLY, 4 * max(items, CALIBRATION_GROUPS * GROUP))
        parts = {c: (fma_source(1, FMA_FORMS["a*x+b"], c), "fma_peak", f"{c} FMA chains")
                 for c in TILE_CHAINS} | {"groups": (_GROUPS, "groups", "the work-group kernel")}  # fmt: skip
        chains = _built_all(parts)
        if (kern := chains.pop("groups", None)) is not None:
            t = min(median_launch(kern, CALIBRATION_GROUPS * GROUP, GROUP, out, runs=runs) for _ in range(3))
            found["group_cycles"] = max(1.0, t * hz * cores / CALIBRATION_GROUPS - GROUP / lanes)
        for _ in range(3):  # the counts in turn, the best of three: a busy moment slows several, not one's every time
            for c, kern in chains.items():
                t = median_launch(kern, items, GROUP, out, np.float32(0.999), np.float32(0.001), runs=runs) / c
                per_fma[c] = min(per_fma.get(c, math.inf), t)
        found |= {"registers": registers_held(per_fma)} if per_fma else {}
        _measured[key] = found
    return _measured[key]


def _built(src: str, name: str, what: str):
    """Kernel `name` of src, built first in a helper process (runtime.own): None where it doesn't build (a compiler
    that refuses it, crashes, hangs or builds it without the kernel), and skipped() says why; never tried twice."""
    if what in skipped():
        return None
    try:
        return runtime.build(src, name, runtime.own())
    except runtime.BuildError as e:
        _measured.setdefault((runtime.get_device().name, "skipped"), {})[what] = str(e).partition("\n")[0]
        return None


def _built_all(parts: dict) -> dict:
    """{key: kernel} of parts {key: (source, kernel name, what)}, built as one program first (runtime.build_all: about
    half the compiler's time of building each alone); where that fails, each alone (_built), so that only what doesn't
    build is left out."""
    parts = {key: part for key, part in parts.items() if part[2] not in skipped()}
    try:
        return dict(zip(parts, runtime.build_all([(src, name) for src, name, _ in parts.values()], runtime.own())))
    except runtime.BuildError:
        return {key: kern for key, part in parts.items() if (kern := _built(*part)) is not None}


def _none_built(what: str):
    reasons = "; ".join(f"{form}: {why}" for form, why in skipped().items())
    raise runtime.BuildError(f"no {what} builds on {runtime.get_device().name} ({reasons})")


def skipped() -> dict[str, str]:
    """{what: why} of the FMA forms and streams this process's device didn't build: measured without them."""
    return _measured.get((runtime.get_device().name, "skipped"), {})


def footprint(k: Kernel, var_vals: dict | None = None) -> int:
    """The bytes a kernel's buffers span at its variables' values (var_vals: names or Variables -> ints)."""
    ast = runtime.concrete_ast(k, runtime.var_values(k, var_vals))
    return sum(b.size * b.dtype.itemsize for b in runtime.buffers(ast))


MEASURED_MOST = 1 << 26  # the largest footprint the model measures a bandwidth at: past the caches it changes little
# (on a Zen 5, a triad read 34.5 to 59.8 GB/s at 64 MiB in 0.06 to 0.09 s, 30.6 to 57.6 at 128 MiB in 0.16 to 0.20 s)


def measured_device(nbytes: int) -> "DeviceModel":
    """The model's DeviceModel for a kernel that touches `nbytes`: cores and lanes as OpenCL reports them, cycles a
    second from the FMA peak, a triad's bandwidth at that footprint (a power of two at least as large, MEASURED_MOST
    at most), and the calibration's constants."""
    d = runtime.get_device().ctx.devices[0]
    cores, lanes = d.max_compute_units, max(1, d.native_vector_width_float)
    hz = fma_peak()[0] / (2 * FMA_PORTS * lanes * cores)
    nbytes = min(1 << max(16, (nbytes - 1).bit_length()), MEASURED_MOST)
    return DeviceModel(cores, lanes, hz, bandwidth(nbytes, ("triad",))[0], **calibration(hz))


# -- the model ------------------------------------------------------------------------------------------------
# What one core does per cycle, and the cycles a work-group costs to start: a model of a CPU OpenCL device (Intel's
# runtime and PoCL both vectorize across the work-items of local dim 0).
FMA_PORTS, LOAD_PORTS, GATHER, REGISTERS, OVERLAP, RUN_BYTES = 2, 2, 4, 32, 0.25, 1024
CACHED_BYTES, ALIASED = 1 << 20, 1  # a buffer this small gathers from the cache; a tile 4 KiB apart thrashes it
GROUP_CYCLES, BARRIER_CYCLES = 300, 5000  # to start a work-group; to share a grouped reduce through local memory


@dataclass(frozen=True)
class DeviceModel:
    """What the model knows of a device: cores, float lanes of a vector, cycles a second, memory bytes a second (its
    limits), and the calibration's constants: a work-group's start in cycles, and the values a work-item's registers
    hold (a log without them replays with these defaults, fitted on a Zen 5 with Intel's runtime)."""

    cores: int = 2
    lanes: int = 16
    hz: float = 3e9
    bandwidth: float = 60e9
    group_cycles: float = GROUP_CYCLES
    registers: int = REGISTERS


def _size(x) -> int:
    return x if isinstance(x, int) else x.max  # a symbolic size at its largest


def static_seconds(k: Kernel, dev: DeviceModel) -> float:
    """A kernel's time by the model, without running it: the larger of its cores' cycles / hz and the bytes it must
    move / bandwidth, plus OVERLAP of the smaller. A vector instruction serves `lanes` elements: the work-items of
    local dim 0 (its first local axis) where their count is a multiple of the device's lanes (Intel's runtime runs
    other work-groups one work-item at a time), else the outputs of an upcast axis along which the output is
    contiguous (the compiler vectorizes those). Per reduce step a work-group's cycles are the larger of its ALU
    ops over FMA_PORTS (a multiply into a sum is one FMA) and its loads over LOAD_PORTS: a buffer along which the
    lanes have stride 0 or 1 is one load a vector, any other stride one a lane (a gather); a broadcast axis of the
    register tile loads once, and a tile past REGISTERS spills."""
    shape, colors = [_size(s) for s in k.full_shape], k.colors()
    axes = {c: [a for a, col in enumerate(colors) if col == c] for c in set(colors)}
    size = lambda cs: prod(shape[a] for c in cs for a in axes.get(c, []))  # noqa: E731
    local = sorted(a for c in ("cyan", "green", "white") for a in axes.get(c, []))
    tile_axes = [a for c in ("yellow", "magenta") for a in axes.get(c, [])]
    bufs = [(b, st.real_strides(ignore_valid=True)) for b, st in zip(k.bufs, k.sts) if isinstance(b, MemBuffer)]
    out_strides = bufs[0][1]
    if local and shape[local[0]] % dev.lanes == 0:
        lane_axis, lanes = local[0], dev.lanes
    else:  # the compiler's own vectors: along the output's contiguous upcast axis, if it has one
        unit = [a for a in axes.get("yellow", []) if out_strides[a] == 1]
        lane_axis, lanes = (unit[0], min(shape[unit[0]], dev.lanes)) if unit else (None, 1)
    threads, steps, tile = size(["cyan", "green", "white"]), size(["red"]), prod(shape[a] for a in tile_axes)
    loads, values, footprint = 0.0, 0, 0.0
    for buf, strides in bufs:
        run = 1  # elements a work-group reads (writes) in one contiguous piece per step: a short one wastes memory
        moving = [a for a in local + tile_axes + axes.get("red", []) if strides[a]]
        for a in sorted(moving, key=lambda a: strides[a] or 0):
            run *= shape[a] if strides[a] == run else 1
        run_bytes = run * buf.dtype.itemsize
        footprint += buf.st.real_size() * buf.dtype.itemsize * max(1.0, RUN_BYTES / run_bytes) ** 0.5
        distinct = prod(shape[a] for a in tile_axes if strides[a] != 0)  # a broadcast axis of the tile loads once
        gather = lane_axis is not None and strides[lane_axis] not in (0, 1)
        size_bytes = buf.st.real_size() * buf.dtype.itemsize
        cost = (GATHER if size_bytes > CACHED_BYTES else 1) * lanes if gather else 1  # a cached gather: a lane a load
        aliased = any(strides[a] and strides[a] * buf.dtype.itemsize % 4096 == 0 for a in tile_axes)
        loads += distinct * cost * (ALIASED if aliased else 1) / (steps if buf.idx == 0 else 1)  # output: once
        values += distinct if buf.idx else 0  # the output: stored from the accumulators
    ops = max(1, sum(x.op in (*BinaryOps, *UnaryOps, *TernaryOps) for x in k.ast[0].lazyops))
    registers = (tile + values) / (lanes if lane_axis in tile_axes else 1)
    step = max(tile * ops / FMA_PORTS, loads / LOAD_PORTS) * threads / lanes * max(1.0, registers / dev.registers)
    groups = size(["blue", "BLUE"])
    start = dev.group_cycles + (BARRIER_CYCLES if k.group_for_reduces else 0)
    cycles = math.ceil(groups / dev.cores) * (steps * (step + threads / lanes) + start)
    compute, memory = cycles / dev.hz, footprint / dev.bandwidth * dev.cores / min(groups, dev.cores)
    return max(compute, memory) + OVERLAP * min(compute, memory)


def estimate(k: Kernel, parent: Kernel, parent_s: float, dev: DeviceModel = DeviceModel()) -> float:
    """k's estimated seconds: its parent's measured time, scaled by what the model says k's opt changes."""
    return parent_s * static_seconds(k, dev) / max(static_seconds(parent, dev), 1e-12)


def program_key(prg) -> str:
    """A program's identity in a log: its source and launch sizes (the same code runs the same)."""
    text = repr((prg.src, [str(g) for g in prg.global_size], [str(n) for n in prg.local_size or ()]))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def opts_text(k: Kernel) -> str:
    return " ".join(str(o) for o in k.applied_opts)


# the environment knobs a search reads (its own, apply_opt's TC and the heuristics'): its cache key and log hold them
KNOBS = ("BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX", *demo.KNOBS)


def open_log(path: str, mode: str):
    """A log's file, as text: gzipped where its name ends in .gz (appended to: one gzip member a write)."""
    return gzip.open(path, mode + "t") if path.endswith(".gz") else open(path, mode)


def check_log(path: str) -> None:
    """A ValueError, before anything is measured, where a log can't be appended to (the file is made if need be)."""
    try:
        with open_log(path, "a"):
            pass
    except OSError as e:
        raise ValueError(f"the log {path} can't be written ({e.strerror or e})") from None


class SearchLog:
    """Appends one search to a JSONL file (gzipped where its name ends in .gz): a first line with the starting kernel
    (corpus.kernel_to_json: its AST, target and opts), the settings and the knobs, then a line per candidate and round
    (its opts, estimate, program and measured time; none where it wasn't built: a duplicate, dropped, or left by the
    cut), a line per gain weighed, and a last line with the answer."""

    def __init__(self, path: str, k: Kernel, **settings):
        self.path, self.id = path, uuid.uuid4().hex[:12]
        start = {"kernel": kernel_to_json(k), "opts": opts_text(k), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
        self.write(start | settings)

    def write(self, *entries: dict) -> None:
        with open_log(self.path, "a") as f:  # whole lines at a time: a search cut short leaves what it measured
            f.write("".join(json.dumps({"search": self.id, **e}) + "\n" for e in entries))

    def round(self, number: int, candidates: list[Kernel], estimates: dict, built: list, timed: list[tuple]) -> None:
        """Log a round: `built`, the kernels sent to compile; `timed`, (time, number, kernel, program) of each timed."""
        times, built = {id(x[2]): x for x in timed}, {id(kern) for kern in built}
        lines = []
        for kern in candidates:
            t, _, _, prg = times.get(id(kern), (None, None, None, None))
            program = program_key(prg) if prg is not None else None
            lines.append({"round": number, "opts": opts_text(kern), "estimate_s": estimates.get(id(kern)),
                          "built": id(kern) in built, "program": program, "time_s": t})  # fmt: skip
        self.write(*lines)

    def answer(self, k: Kernel, t: float, seconds: float) -> None:
        self.write({"answer": opts_text(k), "time_s": t, "seconds": seconds})


# -- reading a log back: every line checked, as SearchLog writes it --------------------------------------------
def _seconds(x, empty: bool = False) -> bool:
    """A time: a number >= 0 that a float holds (a huge JSON integer is none); with `empty`, null too."""
    return (empty and x is None) or (type(x) in (int, float) and 0 <= x <= sys.float_info.max)


def _strs(x, n: int | None = None) -> bool:
    return isinstance(x, list) and all(isinstance(y, str) for y in x) and (n is None or len(x) == n)


LIMITS = {"cores", "lanes", "hz", "bandwidth"}  # DeviceModel's fields every log holds
_FIELDS = {  # each field of a log's lines: what it must hold
    "search": (lambda x: isinstance(x, str), "a search id"),
    "kernel": (lambda x: isinstance(x, dict), "a kernel in corpus.py's JSON form (an old log's pickle is never read)"),
    "opts": (lambda x: isinstance(x, str), "opts as text"),
    "date": (lambda x: isinstance(x, str), "a date"),
    "amt": (lambda x: type(x) is int and x >= 1, "an integer >= 1"),
    "top_k": (lambda x: x is None or type(x) is int and x >= 1, "null or an integer >= 1"),
    "from_heuristics": (lambda x: isinstance(x, bool), "true or false"),
    "min_progress": (_seconds, "seconds"),
    "wait_above_s": (_seconds, "seconds"),
    "device": (lambda x: isinstance(x, dict) and LIMITS <= set(x) <= {f.name for f in fields(DeviceModel)} and all(
        _seconds(v) and v > 0 for v in x.values()), "the model's DeviceModel: cores, lanes, hz, bandwidth (and the "
        "calibration's group_cycles and registers, which an older log lacks)"),
    "limits": (lambda x: isinstance(x, list) and len(x) == 2 and type(x[0]) is int and isinstance(x[1], list) and all(
        type(n) is int for n in x[1]), "[threads a work-group, [the most along each dim]]"),
    "actions": (_strs, "a list of actions as text"),
    "knobs": (lambda x: isinstance(x, dict) and set(x) <= set(KNOBS) and all(isinstance(v, (str, type(None))) for v
              in x.values()), f"{{knob: its value, or null: unset}} of the knobs {', '.join(KNOBS)}"),  # fmt: skip
    "round": (lambda x: type(x) is int and x >= 0, "a round number"),
    "estimate_s": (lambda x: x is None or type(x) in (int, float) and not math.isnan(x), "null or seconds"),
    "built": (lambda x: isinstance(x, bool), "true or false"),
    "program": (lambda x: x is None or isinstance(x, str), "null or a program's key"),
    "time_s": (lambda x: _seconds(x, empty=True), "null or seconds"),
    "gain": (lambda x: _strs(x, 2), "two programs' keys"),
    "times": (lambda x: isinstance(x, list) and len(x) == 2 and all(map(_seconds, x)), "two times"),
    "answer": (lambda x: isinstance(x, str), "opts as text"),
    "seconds": (_seconds, "seconds"),
}
_LINES = {  # a line's kind: the field that says it, and the fields it holds
    "kernel": {"search", "kernel", "opts", "date", "amt", "top_k", "from_heuristics", "min_progress", "wait_above_s",
               "device", "limits", "actions", "knobs"},
    "gain": {"search", "gain", "times"},
    "answer": {"search", "answer", "time_s", "seconds"},
    "round": {"search", "round", "opts", "estimate_s", "built", "program", "time_s"},
}


def _check_line(entry, searches: dict, where: str) -> str:
    """The kind of a log's line (a key of _LINES); a ValueError naming `where` where it isn't what SearchLog writes."""
    if not isinstance(entry, dict) or (kind := next((k for k in _LINES if k in entry), None)) is None:
        raise ValueError(f"{where}: not a line of a search log: {str(entry)[:200]}")
    if not set(entry) <= _LINES[kind] or _LINES[kind] - set(entry) - {"wait_above_s"}:  # (older logs: no wait)
        raise ValueError(f"{where}: a {kind} line holds {', '.join(sorted(_LINES[kind]))}, got {sorted(entry)}")
    for name, value in entry.items():
        ok, what = _FIELDS[name]
        if not ok(value):
            raise ValueError(f"{where}: {name} must be {what}, got {str(value)[:200]}")
    if (kind == "kernel") == (entry["search"] in searches):  # a first line once, before the search's other lines
        raise ValueError(f"{where}: search {entry['search']} " + ("starts again" if kind == "kernel" else "has no "
                         "first line before it"))  # fmt: skip
    if kind == "round" and entry["round"] > len(searches[entry["search"]]["rounds"]):
        raise ValueError(f"{where}: round {entry['round']} comes before round {entry['round'] - 1}")
    return kind


def _read_line(line: str, searches: dict, bad: set, where: str) -> None:
    """One line of a log into `searches`, checked (passed over where its search is in `bad`): a ValueError naming
    `where` where it isn't what SearchLog writes, its search then added to `bad`."""
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError) as e:  # (a line cut short: a search killed as it wrote)
        raise ValueError(f"{where}: not a line of JSON ({type(e).__name__}: {e})") from None
    if isinstance(entry, dict) and isinstance(entry.get("search"), str) and entry["search"] in bad:
        return
    try:
        kind = _check_line(entry, searches, where)
        if kind == "kernel":
            entry["kernel"] = kernel_from_json(entry["kernel"], f"{where}: kernel")
    except ValueError:
        bad.add(entry.get("search") if isinstance(entry, dict) and isinstance(entry.get("search"), str) else None)
        raise
    search = searches.get(entry["search"])
    if kind == "kernel":
        searches[entry["search"]] = {"start": entry, "rounds": [], "answer": None, "gains": {}}
    elif kind == "gain":  # a round's fastest kernel and its parent, timed again
        search["gains"][tuple(entry["gain"])] = entry["times"]
    elif kind == "answer":
        search["answer"] = entry
    else:
        rounds = search["rounds"]
        rounds += [[]] * (entry["round"] == len(rounds))
        rounds[entry["round"]].append(entry)


def read_log(path: str, errors: list[str] | None = None) -> dict[str, dict]:
    """{search id: {"start": its first line, with "kernel" a Kernel, "rounds": [[candidate lines]], "gains":
    {(program, program): times}, "answer": its line or None}} of a log (gzipped where its name ends in .gz). Every line
    is checked, its kernel by corpus.py's reader (a log is data: nothing in it runs); a ValueError names the file and
    line where one isn't what SearchLog writes. Given a list of `errors`, each such error goes there instead, the
    search of a bad line is left out, and the others are read (a search killed as it wrote leaves a line cut short)."""
    searches: dict[str, dict] = {}
    bad: set = set()  # the searches of bad lines: their other lines are passed over
    n = 0
    try:
        with open_log(path, "r") as f:
            for n, line in enumerate(f, 1):
                try:
                    _read_line(line, searches, bad, f"{path}:{n}")
                except ValueError as e:
                    if errors is None:
                        raise
                    errors.append(str(e))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:  # (gzip's errors: not gzip, or cut short)
        where = f"{path}, after line {n}," if n else path
        message = f"{where} can't be read as a search log ({type(e).__name__}: {e})"
        if errors is None:
            raise ValueError(message) from None
        errors.append(message)
    return {k: v for k, v in searches.items() if k not in bad}

