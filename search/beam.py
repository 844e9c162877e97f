"""search/beam.py: the beam search (tinygrad 0.9.1's engine/search.py; docs/search.md says where ours differs, and
why). In the order a search runs: the actions (ACTIONS, kernel_actions); the model's cut (cost.py) and the compiles
(compilers.py: helper processes, where a stuck build is killed); timing (_time_candidate); the search itself (search:
the disk cache, _cache_get and _cache_put; _Search: a round's cut, compiles and timing, the lines, the runoff,
verification)."""

import contextlib
import hashlib
import json
import math
import numbers
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyopencl as cl

from demo import write_file
from kernel import Kernel, KernelOptError, Opt, OptOps, getenv, optimize, prod
from search.compilers import compile_all
from search.cost import KNOBS, SearchLog, check_log, estimate, footprint, measured_device, program_key
from runtime import Program, VerificationError, check_inputs, infer, Launch
from runtime import buffers, cache_dir, concrete_ast, device_buffers, device_limits, get_device
from runtime import reference, runtime_local_size, var_values, verify

# -- the actions ----------------------------------------------------------------------------------------------
# The opts one round may add to a kernel: tinygrad 0.9.1's action list (an amt of 0 means the whole axis) but its
# 9 TC actions at TC_OPT, which search_actions() adds as a search starts (tinygrad's 141 = these 132 + 9) ...
ACTIONS = [Opt(OptOps.UPCAST, axis, amt) for amt in (0, 2, 3, 4, 5, 7) for axis in range(6)]
ACTIONS += [Opt(OptOps.UNROLL, axis, amt) for amt in (0, 4, 7) for axis in range(5)]
ACTIONS += [Opt(OptOps.LOCAL, axis, amt) for amt in (2, 3, 4, 8, 13, 16, 29) for axis in range(5)]
ACTIONS += [Opt(OptOps.GROUPTOP, axis, amt) for amt in (13, 16, 28, 29, 32, 49, 64, 256) for axis in range(3)]
ACTIONS += [Opt(OptOps.GROUP, axis, amt) for amt in (0, 4, 8, 16) for axis in range(3)]
ACTIONS += [Opt(OptOps.PADTO, axis, 32) for axis in range(7)]
ACTIONS += [Opt(OptOps.LOCAL, 0, 32), Opt(OptOps.UPCASTMID, 1, 4), Opt(OptOps.TC, 0, 0)]
# ... and ours: 8 outputs a thread on any axis, work-groups 32 wide on any (tinygrad: on axis 0; elsewhere only in two
# steps, 4 then 8 or 16 then 2, each of which must win its round first)
ACTIONS += [Opt(OptOps.UPCAST, axis, 8) for axis in range(6)] + [Opt(OptOps.LOCAL, axis, 32) for axis in range(1, 5)]
# ... and actions of two or three steps, each one step: pad an axis to a multiple of 32, then take 16 or 32 of it as
# work-items (a CPU's vector lanes: Intel's runtime vectorizes only a work-group of whole vectors), or 16 and 2 outputs
# each. A step alone is slower than the beam's kernels (conv2d's rows, 62: padded 177 ms, 184 without; 16 items then 2
# outputs lost round 2 to 16 then 4, or 32 then 2, whose searches ended up to 1.7x slower), so the beam never got there
MACROS = [(Opt(OptOps.PADTO, axis, 32), Opt(OptOps.LOCAL, axis, n)) for n in (16, 32) for axis in range(6)]
MACROS += [(Opt(OptOps.PADTO, axis, 32), Opt(OptOps.LOCAL, axis, 16), Opt(OptOps.UPCAST, axis, 2)) for axis in range(6)]

PROBE_GLOBAL_SIZE = 4096  # more work-groups: first timed on a part (tuned: at 65536, matmul 1024 timed 1.5x longer)
LINE_GAIN = 0.03  # a line goes on while its best gains more than this much of itself (less is timing noise; tuned)
WAIT_ABOVE = 2  # a search stalled above this many times its bytes' time (the device's bandwidth) goes one more round
TIMING_PASSES = 3  # launches of a contender in its round, one per pass
CONTENDERS = 8  # the fastest after one launch that are timed again (tuned: matmul 1024's timing 15 s -> 10 s, alike)
TOP_K = 16  # candidates built a round: each beam kernel's share, its best by the model (tuned on replays; None: all)
FINALISTS, FINAL_PASSES, FINAL_RUNS = 6, (3, 6), 3  # the runoff: kernels, passes (at least, at most), launches a pass
PAGE_CHECKED, PAGE_RUNS = 2, 8  # the runoff's leaders timed again on other pages, and their launches there, in turn
CODE = ("kernel", "render", "runtime", "search.cost", "search.compilers", "search.beam")  # an answer's code (cache key)
_cache_warned = False  # an unwritable cache is said once per process, not once per search


def search_actions() -> list[Opt]:
    """ACTIONS, with the tensor-core actions at TC_OPT (default 2) and NOLOCALS where set, as tinygrad adds them. The
    knobs are read as a search starts: a bad one is an error of that search, not of each import (`--help` included)."""
    tc = [Opt(OptOps.TC, axis, getenv("TC_OPT", 2)) for axis in range(9)]
    return ACTIONS + tc + ([Opt(OptOps.NOLOCALS)] if getenv("NOLOCALS") else [])


def search_limits() -> tuple[int, int]:
    """(BEAM_UPCAST_MAX, BEAM_LOCAL_MAX): elements in registers, threads in a work-group (default 256 and 1024)."""
    return getenv("BEAM_UPCAST_MAX", 256, minimum=1), getenv("BEAM_LOCAL_MAX", 1024, minimum=1)


def action_text(action: Opt | tuple[Opt, ...]) -> str:
    """An action as the cache key and a log hold it: 'UPCAST:0:4', a two-step one 'PADTO:3:32+LOCAL:3:16'."""
    return "+".join(map(str, action if isinstance(action, tuple) else (action,)))


def kernel_actions(k: Kernel) -> list[Kernel]:
    """Every kernel one action from k (tinygrad's get_linearizer_actions, and MACROS): the actions that apply,
    skipping an amount equal to the whole axis when amount 0 says the same, and kernels over the search_limits()."""
    out, actions, (upcast_max, local_max) = [], search_actions(), search_limits()
    for action in actions + MACROS:
        opt, *more = action if isinstance(action, tuple) else (action,)
        if opt.axis is not None and opt.op is not OptOps.TC:
            axis = opt.real_axis(k)
            if axis >= k.shape_len or (k.full_shape[axis] == opt.amt and Opt(opt.op, axis, 0) in actions):
                continue
        k2 = k.copy()
        try:
            for step in (opt, *more):
                k2.apply_opt(step)
        except KernelOptError:
            continue
        tc_up = prod(k2.tensor_core.dims) // prod(n for _, n in k2.tensor_core.threads) if k2.tensor_core else 1
        colors = list(zip(k2.full_shape, k2.colors()))
        in_registers = prod(s for s, c in colors if c in ("magenta", "yellow")) // tc_up
        in_work_group = prod(s for s, c in colors if c in ("cyan", "green", "white"))
        if in_registers <= upcast_max and in_work_group <= local_max:
            out.append(k2)
    return out


# -- timing candidates: here, one at a time ----------------------------------------------------------------------
def _test_global_size(global_size: list[int], max_global_size: int) -> tuple[list[int], int]:
    """tinygrad's _get_test_global_size: halve the last dim above 16 to at most max_global_size work-groups."""
    size, factor = list(global_size), 1
    while prod(size) > max_global_size and (halvable := [d for d in range(len(size)) if size[d] > 16]):
        size[halvable[-1]] //= 2
        factor *= 2
    return size, factor


def runoff_noise(passes: list[list[float]]) -> float:
    """The timing's noise, measured: for each kernel timed in several passes, how far its second-lowest is above its
    lowest (other work only adds time: the lowest is the kernel's own, and the next says how well it is pinned), the
    median over the kernels; 0 where no kernel has two."""
    excess = [sorted(m)[1] / min(m) - 1 for m in passes if len(m) > 1 and min(m) > 0]
    return statistics.median(excess) if excess else 0.0


def lower_mode(passes: list[float]) -> float:
    """A kernel's time in the runoff: the second-lowest of its passes (each its lowest launch), a time it reached
    twice: a bimodal timer's lower mode, not one lucky launch; the lowest where it was timed once."""
    return sorted(passes)[min(1, len(passes) - 1)]


def _time_candidate(k: Kernel, prg: Program, inputs, device_args, stop_above: float, var_vals=None, launches=None):
    """One launch's seconds, or a probe's where a large kernel's part is already slower than `stop_above`.
    `launches`: a dict that keeps each program's Launch for its next timing (setting one up costs 2 ms), by the
    program's id (the Launch holds its program: the id is never another's while the dict lives)."""
    launches = {} if launches is None else launches
    if id(prg) not in launches:
        launch = Launch(k, inputs, var_vals, prg=prg, device_args=device_args)
        local = prg.local_size if prg.local_size is not None else [1] * len(launch.global_size)  # none: 1 item a group
        # its work-groups at these variable values, kept: a probe leaves the Launch at the part's size
        launches[id(prg)] = launch, local, [g // n for g, n in zip(launch.global_size, local)]
    launch, local, groups = launches[id(prg)]

    def once(size: list[int], factor: int = 1) -> float:  # a launch of `size` work-groups, its time times factor
        launch.global_size = [g * n for g, n in zip(size, local)]
        if prg.local_size is None:  # the runtime groups the items, as Launch does
            launch.local_size = runtime_local_size(launch.global_size)
        event = launch.launch()
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9 * factor

    if prod(groups) > PROBE_GLOBAL_SIZE and math.isfinite(stop_above):
        # a part (a 16th at least: a launch's fixed cost stays small), its time scaled up, errs fast (its data fit the
        # cache better): when even it is too slow, the kernel can't be kept, and its full launch is skipped
        if (probe := once(*_test_global_size(groups, max(PROBE_GLOBAL_SIZE, prod(groups) // 16)))) > stop_above:
            return probe
    return once(groups)


# -- what a search returns, and its disk cache -------------------------------------------------------------------
class SearchError(ValueError):
    """A search that can't run (bad arguments, no such demo) or that timed no kernel."""


@dataclass
class SearchRound:
    """A round's counts (`duplicates`: the same code as a kernel timed before; `unbuilt`: left by the cut) and the best
    kernel and time so far."""

    number: int
    candidates: int
    compiled: int
    duplicates: int
    timed: int
    dropped: int
    unbuilt: int  # left by the cut: the model ranked them below the top_k
    best_s: float
    best: Kernel
    seconds: float


@dataclass
class SearchResult:
    """The kernel found (verified), its time, the rounds, the candidates dropped (and why), whether from the cache,
    and the runoff's figures: how sure the choice is."""

    kernel: Kernel
    time_s: float
    rounds: list[SearchRound]
    dropped: int
    cached: bool
    seconds: float
    why_dropped: list[str]
    finalists: int = 0  # the runoff: kernels timed again, passes, the noise it measured, the runner-up's margin
    passes: int = 0
    noise: float = math.nan
    margin: float = math.nan

    @property
    def sure(self) -> bool:
        """Whether the runoff's winner led the runner-up by more than the noise (else a tie: either will do)."""
        return self.margin > self.noise


def _cache_get(k: Kernel, amt: int, settings: tuple) -> tuple[str, tuple[Kernel, float] | None]:
    """This search's file, named by a hash of all its answer depends on (the code too), and the kernel and time it
    remembers, or None: no entry, or a damaged one (a warning says so; the search runs and writes it anew)."""
    code = hashlib.sha256(b"".join(Path(sys.modules[m].__file__).read_bytes() for m in CODE))
    actions, device = [action_text(a) for a in search_actions() + MACROS], get_device().name
    knobs = [os.environ.get(name) for name in KNOBS]
    key = repr((k.ast, k.applied_opts, k.opts, device, amt, settings, actions, knobs, code.hexdigest()[:16]))
    path = os.path.join(cache_dir(), "beam", hashlib.sha256(key.encode()).hexdigest() + ".json")
    try:
        entry = json.loads(Path(path).read_text())
        opts, t = entry["opts"], entry["time_s"]  # (a TypeError or KeyError where the entry isn't an object of them)
        if entry.get("check") != _check_of(path, opts, t) or type(t) not in (int, float) or not 0 <= t < math.inf:
            raise ValueError(f"its check {entry.get('check')!r} is not that of its opts and time ({t!r} s)")
        found = k.copy()
        for op, axis, amount in opts:  # [name, axis, amount]: OptOps[name], and Opt checks the kinds of the two
            found.apply_opt(Opt(OptOps[op], axis, amount))
        return path, (found, float(t))
    except (OSError, ValueError, KeyError, TypeError, KernelOptError, RecursionError) as e:  # (JSON nested too deep)
        if os.path.isfile(path):  # (no entry there, or no folder: nothing to say)
            warnings.warn(f"the search cache file {path} is damaged ({type(e).__name__}: {e})", stacklevel=3)
        return path, None


def _check_of(path: str, opts, t) -> str:
    """A digest of an entry's opts, time and file name: an entry changed, or moved from another file, fails it."""
    return hashlib.sha256(json.dumps([os.path.basename(path), opts, t]).encode()).hexdigest()[:16]


def _cache_put(path: str, opts: list[Opt], t: float) -> None:
    """Remember a verified search; where the cache can't be written, warn once: the answer matters more."""
    global _cache_warned
    triples = [[o.op.name, o.axis, o.amt] for o in opts]
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)  # written whole: a concurrent search never reads half a file
        write_file(path, json.dumps({"opts": triples, "time_s": t, "check": _check_of(path, triples, t)}))
    except OSError as e:
        if not _cache_warned:
            _cache_warned = True
            warnings.warn(f"the search cache can't be written, searches are not remembered: {e}", stacklevel=3)


# -- the search ---------------------------------------------------------------------------------------------------
def _check_search_args(k, inputs, amt, var_vals, timeout, workers, min_progress, top_k, log) -> dict[str, int]:
    """Every argument (and search knob) checked before anything compiles; returns the variables' values."""
    search_actions(), search_limits()  # a bad TC_OPT, NOLOCALS, BEAM_UPCAST_MAX or BEAM_LOCAL_MAX: a KnobError
    if not isinstance(k, Kernel):
        raise SearchError(f"beam_search searches a Kernel, got {type(k).__name__}")
    if isinstance(amt, bool) or not isinstance(amt, int) or amt < 1:
        raise SearchError(f"amt (kernels kept per round) must be an integer >= 1, got {amt!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0):
        raise SearchError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    if isinstance(min_progress, bool) or not isinstance(min_progress, numbers.Real) or not 0 <= min_progress < math.inf:
        raise SearchError(f"min_progress must be a number of seconds >= 0, got {min_progress!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise SearchError(f"top_k (candidates built a round) must be an integer >= 1 or None (all), got {top_k!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise SearchError(f"workers must be an integer >= 0 (0: compile in this process), got {workers!r}")
    try:
        if log is not None:  # before the device's limits are measured (seconds): not after the search
            check_log(log)
        values = var_values(k, var_vals)
        check_inputs(buffers(concrete_ast(k, values)), inputs)
    except ValueError as e:
        raise SearchError(str(e)) from None
    return values


class _Search:
    """One search's state (what was compiled and timed so far) and its steps, from compiling a round to verifying."""

    def __init__(self, k: Kernel, inputs, var_vals: dict, begin, timeout, workers, progress, top_k=None, log=None):
        self.k, self.inputs, self.var_vals, self.timeout, self.workers = k, inputs, var_vals, timeout, workers
        self.top_k, self.log, self.estimates = top_k, log, {}  # each candidate's estimated seconds (cost.py)
        nbytes = footprint(k, var_vals)
        self.device = measured_device(nbytes) if top_k or log else None  # the device's limits, measured
        self.wait_above = WAIT_ABOVE * nbytes / self.device.bandwidth if self.device else math.inf  # (WAIT_ABOVE)
        self.progress, self.begin, self.deadline = progress, begin, begin + timeout if timeout is not None else math.inf
        self.limits, self.why_dropped = device_limits(), []
        # two sets of device buffers (other pages), each with its Launches: the compiles' warm-up launches, the rounds
        # and the runoff run on the first, made now; the runoff's leaders on the second too (page_check)
        self.layouts = [({}, {}), ({}, {})]
        with contextlib.suppress(cl.Error, MemoryError):  # where it can't be made, each timing fails and says why
            self.layouts[0][0].update(device_buffers(k, inputs, var_vals))
        self.seen: set = set()  # the kernel states sent to compile, and the programs compiled (source, launch sizes)
        self.timed: list[tuple] = []  # (time, number, kernel, program) of every kernel timed; the number breaks ties

    def time(self, kern: Kernel, prg: Program, stop_above: float = math.inf, layout: int = 0) -> float:
        device_args, launches = self.layouts[layout]
        return _time_candidate(kern, prg, self.inputs, device_args, stop_above, self.var_vals, launches)

    def late(self) -> bool:
        """Whether the deadline has passed: then no launch starts (each phase asks before each)."""
        return time.perf_counter() > self.deadline

    def drop(self, kern: Kernel, why: str) -> None:
        self.why_dropped.append(f"{[str(o) for o in kern.applied_opts]}: {why}")

    def fresh(self, kernels: list[Kernel]) -> list[Kernel]:
        """The kernels whose state (all that rendering reads but the AST) wasn't sent to compile before."""
        fresh = []
        for kern in kernels:
            key = (tuple(st.views for st in kern.sts), kern.full_shape, kern.upcasted, kern.local_dims,
                   kern.group_for_reduces, kern.dont_use_locals, repr(kern.tensor_core))  # fmt: skip
            if key not in self.seen:
                self.seen.add(key)
                fresh.append(kern)
        return fresh

    def compile(self, kernels: list[Kernel]) -> tuple[list[tuple[Kernel, Program]], int]:
        """Compile the kernels; returns the programs of code not timed before, and how many compiled."""
        results = compile_all(kernels, self.limits, self.layouts[0][0], self.workers, self.deadline, self.progress)
        programs = []
        for i, prg, why in sorted(results, key=lambda r: r[0]):
            if prg is None:
                self.drop(kernels[i], why)
            elif (key := (prg.src, tuple(prg.global_size), tuple(prg.local_size or ()))) not in self.seen:
                self.seen.add(key)
                programs.append((kernels[i], prg))
        return programs, sum(prg is not None for _, prg, _ in results)

    def cut(self, kernels: list[Kernel]) -> list[Kernel]:
        """The kernels to build: with top_k, each parent's best top_k / parents by the model (a parent whose children
        the model ranks low still has its line followed), else all."""
        if not self.top_k or not self.estimates or not kernels:
            return kernels
        families: dict[int, list[Kernel]] = {}
        for kern in kernels:
            families.setdefault(self.parents[id(kern)], []).append(kern)
        each = math.ceil(self.top_k / len(families))
        return [kern for f in families.values() for kern in sorted(f, key=lambda x: self.estimates[id(x)])[:each]]

    def time_all(self, programs: list[tuple[Kernel, Program]], cutoff: float, again: bool = True) -> list[tuple]:
        """Time the programs, each once, then (`again`) the CONTENDERS within 2x of the best again, pass after pass;
        returns them as (time, number, kernel, program)."""
        best: dict[int, float] = {}
        for n, (kern, prg) in enumerate(programs):
            if self.late():
                break
            try:  # a first launch twice as slow as the best so far keeps that one time: it can't be the best
                best[n] = self.time(kern, prg, stop_above=2 * min([cutoff, *best.values()]))
            except (cl.Error, RuntimeError, ValueError) as e:
                self.drop(kern, f"{type(e).__name__}: {e}")
            self.progress("timing", n + 1, len(programs))
        contenders = sorted(best, key=best.get)[:CONTENDERS] if again else []
        for _ in range(TIMING_PASSES - 1):
            for n in [n for n in contenders if best[n] <= 2 * min(best.values())]:
                if self.late():
                    break
                best[n] = min(best[n], self.time(*programs[n]))
        timed = [(t, len(self.timed) + i, *programs[n]) for i, (n, t) in enumerate(best.items())]
        self.timed += timed
        return timed

    def rounds(self, starts: list[Kernel], amt: int, min_progress: float, on_round) -> tuple[list[SearchRound], bool]:
        """Round 0 times the starting kernels, each next one the kernels an action from the beam (the `amt` fastest and
        each line's fastest where it gains on its parent: `gains`) until no line does, after a round's wait where the
        best is far from its memory bound (`wait_above`): (the rounds, whether out of time)."""
        line = {id(kern): n for n, kern in enumerate(starts)}  # each kernel's starting point
        best, rounds, candidates, beam = (math.inf, 0, self.k, None), [], starts, []
        waited = None  # the best time the search stalled at and waited a round from (False: waited, and went on)
        while True:
            dropped, fresh = len(self.why_dropped), self.fresh(candidates)
            built = self.cut(fresh)
            programs, compiled = self.compile(built)
            # round 0's kernels each start a line, and all go on: launched once (again only orders them: add 16M 0.2 s)
            ranked = sorted(self.time_all(programs, best[0], again=bool(rounds)), key=lambda x: x[:2])
            if self.log:
                self.log.round(len(rounds), candidates, self.estimates, built, ranked)
            counts = {"candidates": len(candidates), "compiled": compiled, "unbuilt": len(fresh) - len(built)}
            counts |= {"duplicates": len(candidates) - len(fresh) + compiled - len(programs), "timed": len(ranked)}
            counts |= {"dropped": len(self.why_dropped) - dropped}
            best = ranked[0] if ranked and ranked[0][:2] < best[:2] else best
            fastest = {line[id(x[2])]: x for x in reversed(ranked)}  # each line's fastest kernel of this round
            parents = {line[id(x[2])]: x for x in reversed(beam)}  # and its fastest parent (none in round 0)
            alive = {n for n, x in fastest.items() if n not in parents or self.gains(x, parents[n], min_progress)}
            if waited:  # the round after a wait: a line goes on only past the best the search waited at
                alive, waited = {n for n in alive if fastest[n][0] < waited * (1 - LINE_GAIN)}, False
            elif not alive and waited is None and len(rounds) > 1 and best[0] > self.wait_above:
                # a step that gains nothing can come before one that gains much (conv2d): one more round, from this
                # round's fastest, where the kernel is far from its memory bound (near it there is little to gain)
                alive, waited = set(fastest), best[0]
            beam = [x for x in ranked if line[id(x[2])] in alive][:amt]
            beam += [fastest[n] for n in sorted(alive) if fastest[n] not in beam]
            seconds = time.perf_counter() - self.begin
            rounds.append(SearchRound(len(rounds), **counts, best_s=best[0], best=best[2], seconds=seconds))
            on_round(rounds[-1])
            if (out_of_time := self.late()) or not alive:
                return rounds, out_of_time
            children = [(kern, parent, t) for t, _, parent, _ in beam for kern in kernel_actions(parent)]
            line |= {id(kern): line[id(parent)] for kern, parent, _ in children}
            self.parents = {id(kern): id(parent) for kern, parent, _ in children}
            if self.device:
                self.estimates = {id(kern): estimate(kern, parent, t, self.device) for kern, parent, t in children}
            candidates = [kern for kern, _, _ in children]

    def gains(self, child: tuple, parent: tuple, min_progress: float) -> bool:
        """Whether a round's fastest kernel of a line gains over LINE_GAIN on its parent, the two timed again in turn
        (TIMING_PASSES launches each, the lowest counting): a busy moment slows both alike, and the child's time is
        no longer the least of a round's many (which errs low by the noise); a child faster by over twice that after
        a pass gains (a bimodal timer's slow mode reads twice the fast one: no moment makes that up), and the slow
        parent isn't timed again, nor whole where a probe of it is that slow (matmul 1024's bare kernel: 2.2 s a
        launch). Past the deadline: no (the search ends)."""
        times: tuple[list[float], list[float]] = ([], [])
        gain = lambda scale: min(times[0]) * scale < min(times[1]) * (1 - LINE_GAIN) - min_progress  # noqa: E731
        for _ in range(TIMING_PASSES):
            for t, (_, _, kern, prg) in zip(times, (child, parent)):
                if self.late():
                    return False
                t.append(self.time(kern, prg, 2 * min(times[0]) if t is times[1] else math.inf))
            if gain(2):
                break
        if self.log:  # a replay decides as this search did
            self.log.write({"gain": [program_key(x[3]) for x in (child, parent)], "times": [min(t) for t in times]})
        return gain(1)

    def runoff(self, ranked: list[tuple], also: list[Kernel]) -> tuple[list[tuple], dict]:
        """Time the FINALISTS fastest and `also` within 2x of the fastest again, in passes, in turn, and rank them by
        lower_mode of their passes (each its lowest of FINAL_RUNS launches), the rest behind. Passes go on
        (FINAL_PASSES: at least, at most) until the answer holds: the last pass's leader is this one's, or within the
        noise (LINE_GAIN at least) of it, and each other still in the race (its lowest launch beat the leader's time)
        is within LINE_GAIN of the leader (a tie: no line would count it a gain); none starts a launch past the
        deadline, and a pass it cuts short doesn't count (none whole: the rounds' ranking stands). Returns the ranking
        and what SearchResult says of the runoff (finalists, passes, noise, margin)."""
        if not ranked:
            return ranked, {}
        near = [x for x in ranked if x[0] <= 2 * ranked[0][0]]
        finalists = near[:FINALISTS] + [x for x in near[FINALISTS:] if any(x[2] is a for a in also)]
        lows: dict[int, list[float]] = {n: [] for _, n, _, _ in finalists}  # each kernel's launches
        leaders, passes, racing = [], 0, finalists
        while passes < FINAL_PASSES[1]:
            runs: dict[int, list[float]] = {n: [] for _, n, _, _ in racing}
            for _ in range(FINAL_RUNS):  # in turn, launch by launch: a slow stretch of the device's falls on several
                for _, n, k, prg in racing:
                    runs[n] += [] if self.late() else [self.time(k, prg)]
            if any(len(times) < FINAL_RUNS for times in runs.values()):  # cut short by the deadline
                break
            passes += 1
            for n, times in runs.items():
                lows[n] += times
            best = {n: lower_mode(m) for n, m in lows.items()}
            leaders.append(min(best, key=lambda n: (best[n], n)))
            noise = runoff_noise(list(lows.values()))
            if passes >= FINAL_PASSES[0]:  # out of the race, not timed again: a kernel whose lowest launch is no
                # faster than the leader's time (its time only rises above that lowest)
                racing = [x for x in racing if x[1] == leaders[-1] or min(lows[x[1]]) < best[leaders[-1]]]
                lead, held = best[leaders[-1]], max(noise, LINE_GAIN)  # a gain under LINE_GAIN is no line's gain
                if best[leaders[-2]] <= lead * (1 + held) and all(best[x[1]] <= lead * (1 + LINE_GAIN) for x in racing):
                    break
        if not passes:
            return ranked, {}
        again = self.page_check(sorted(((best[n], n, kern, prg) for _, n, kern, prg in finalists), key=lambda x: x[:2]))
        margin = again[1][0] / again[0][0] - 1 if len(again) > 1 else math.inf
        stats = {"finalists": len(finalists), "passes": passes, "noise": noise, "margin": margin}
        return again + [x for x in ranked if x[1] not in lows], stats

    def page_check(self, again: list[tuple]) -> list[tuple]:
        """The runoff's ranking, its PAGE_CHECKED fastest timed again on a second set of device buffers (other pages),
        PAGE_RUNS launches each in turn: a kernel's time is its lowest there where that is slower (a kernel can be fast
        on some pages only: matmul 1024's LOCAL:1:8 read 6.7 to 9.7 ms on five sets of buffers in one process, another
        kernel 7.4 to 7.8 ms; a user's buffers land on any pages). Where those buffers can't be made (the device's
        memory is short), or the deadline cuts the launches short, the ranking stands."""
        if self.late():
            return again
        top = again[:PAGE_CHECKED]
        on_pages: dict[int, list[float]] = {n: [] for _, n, _, _ in top}
        try:  # a warm-up launch, not counted, makes the second set and touches its pages
            self.time(top[0][2], top[0][3], layout=1)
        except (cl.Error, MemoryError, RuntimeError, ValueError):
            return again
        for _ in range(PAGE_RUNS):
            for _, n, kern, prg in top:
                on_pages[n] += [] if self.late() else [self.time(kern, prg, layout=1)]
        if any(len(m) < PAGE_RUNS for m in on_pages.values()):  # cut short by the deadline
            return again
        checked = [(max(t, min(on_pages[n])), n, kern, prg) for t, n, kern, prg in top]
        return sorted(checked, key=lambda x: x[:2]) + again[PAGE_CHECKED:]

    def fastest_verified(self, ranked: list[tuple], out_of_time: bool) -> tuple[float, Kernel]:
        """(time, kernel) of the fastest kernel that computes what the reference does; none: an error, never k."""
        self.layouts.clear()  # the timing's buffers freed first: the reference and verify reuse the pages (search.md)
        expected = reference(self.k, *self.inputs, var_vals=self.var_vals)
        for t, _, kern, _ in ranked:
            try:
                verify(kern, *self.inputs, expected=expected, var_vals=self.var_vals)
                return t, kern
            except (VerificationError, cl.Error, RuntimeError, ValueError) as e:
                self.drop(kern, f"{type(e).__name__}: {str(e)[:200]}")
        if not ranked:
            why = f"its timeout of {self.timeout} s ran out first" if out_of_time else "every candidate was dropped"
            last = f" (last: {self.why_dropped[-1]})" if self.why_dropped else ""
            raise SearchError(f"the search timed no kernel: {why}{last}")
        raise VerificationError(f"no kernel the search timed verified, the last: {self.why_dropped[-1]}")


def search(k: Kernel, *inputs: np.ndarray, amt: int = 2, var_vals: dict | None = None, timeout: float | None = None,
           cache: bool = True, workers: int | None = None, min_progress: float = 1e-8, from_heuristics: bool = True,
           top_k: int | None = TOP_K, log: str | None = None, on_round=None, on_progress=None) -> SearchResult:
    """tinygrad 0.9.1's beam search, made faster (docs/search.md says how, and why it is safe); returns a SearchResult.

    Keeps `amt` kernels per round; compiles in `workers` processes (default one per core, 0: this one); stops when no
    line gains over LINE_GAIN and `min_progress` seconds (far from the memory bound, a round later), or after
    `timeout` seconds (the best so far). A bare k starts beside the heuristics' kernel (`from_heuristics`);
    `cache=False`: no disk cache; `log=FILE` appends the search to a log for tools/replay_search.py (a search given a
    log always searches); `on_round(SearchRound)` and `on_progress(phase, done, total)` report. The answer is
    verified, k never changed; a search that timed no kernel raises SearchError; a kernel without elements comes back
    as it is."""
    var_vals = _check_search_args(k, inputs, amt, var_vals, timeout, workers, min_progress, top_k, log)
    begin = time.perf_counter()
    if prod(infer(s, var_vals) for s in k.full_shape) == 0:  # no elements: nothing to time, no opt applies
        verify(k, *inputs, var_vals=var_vals)
        return SearchResult(k.copy(), 0.0, [], 0, False, time.perf_counter() - begin, [])
    settings = (min_progress, from_heuristics, top_k, sorted(var_vals.items()))
    path, hit = _cache_get(k, amt, settings) if cache else (None, None)
    # a hit was verified when written, by this same code (the key holds its hash) on this AST and device; a search
    # asked for a log runs all the same (a hit would log nothing), and writes its answer anew
    if hit is not None and not log:
        return SearchResult(hit[0], hit[1], [], 0, True, time.perf_counter() - begin, [])
    if workers is None:  # a compiler per core this process may run on; none where Python has no executable to start
        workers = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) or 1
        workers = workers if sys.executable else 0
    s = _Search(k, inputs, var_vals, begin, timeout, workers, on_progress or (lambda *_: None), top_k, log)
    if log:  # all a replay needs (tools/replay_search.py): the settings, the model's device and the launch limits
        settings = {"amt": amt, "top_k": top_k, "from_heuristics": from_heuristics, "min_progress": min_progress}
        settings |= {"wait_above_s": s.wait_above, "device": vars(s.device), "limits": s.limits, "actions": [
            action_text(a) for a in search_actions() + MACROS], "knobs": {name: os.environ.get(name) for name in KNOBS}}
        s.log = log = SearchLog(log, k, **settings)
    heuristics = []  # the heuristics' kernel first: a bare kernel is often slow, and stops early behind it
    if from_heuristics and not k.applied_opts:
        try:
            heuristics = [optimize(k.copy())]
        except KernelOptError as e:  # then the search starts from k alone, and says so
            s.why_dropped.append(f"the heuristics refuse this kernel (KernelOptError: {e}): searched from it alone")
    rounds, out_of_time = s.rounds(heuristics + [k.copy()], amt, min_progress, on_round or (lambda r: None))
    ranked = sorted(s.timed, key=lambda x: x[:2])
    ranked, runoff = (ranked, {}) if out_of_time else s.runoff(ranked, heuristics)
    t, kern = s.fastest_verified(ranked, out_of_time)
    if path and not s.late():  # a search cut short by its budget is not kept
        _cache_put(path, kern.applied_opts[len(k.applied_opts) :], t)
    seconds = time.perf_counter() - begin
    if log:
        log.answer(kern, t, seconds)
    return SearchResult(kern, t, rounds, len(s.why_dropped), False, seconds, s.why_dropped, **runoff)


def beam_search(k: Kernel, *inputs: np.ndarray, amt: int = 2, var_vals: dict | None = None, **options) -> Kernel:
    """A new Kernel with the opts a beam search found fastest on the device, verified against the reference
    (tinygrad 0.9.1's beam_search, made faster); k is never changed. The options are search()'s (timeout, ...)."""
    return search(k, *inputs, amt=amt, var_vals=var_vals, **options).kernel

