"""Tests of search/'s beam search (the mechanism, not its speed: speed is bench.py's business).

Small kernels and amt=1 keep them fast; most compile in this process (workers=0), a few in compiler processes."""

from __future__ import annotations

import io
import itertools
import math
import os
import random
import re
import subprocess
import sys
import threading
import time
import warnings
import weakref
from collections import OrderedDict

import numpy as np
import pytest

import kernel
from search import cost
import runtime as R
import search.__main__ as CLI
import search.beam as S
import search.compilers as C
from kernel import TARGETS, BinaryOps, Kernel, Opt, OptOps, ShapeTracker, prod, ReduceOps, UnaryOps
from demo import load, reduce, store, alu
from demo import attention_ast, conv2d_ast, elementwise_ast, matmul_ast, matvec_ast, sum_ast
from tests.common import ROOT, run_script


# conftest.py: skipped, saying why, without an OpenCL device; every test searches with its own empty cache
pytestmark = pytest.mark.usefixtures("device", "cache_dir")
# what a device's driver does (building, loading binaries in threads and processes, running and verifying what was
# built) is tested on each working device; the search's own logic (cache, timeouts, ranking, its command line) on the
# first (conftest.py)
ON_EVERY_DEVICE = {
    "test_search_returns_a_verified_kernel_whose_opts_replay_on_a_fresh_kernel",
    "test_each_compile_thread_builds_in_a_process_of_its_own",
    "test_a_compiler_process_answers_on_stdout_alone_serves_many_sources_and_ends_with_its_input",
    "test_searches_in_threads_each_get_the_binaries_of_their_own_sources",
    "test_a_compiler_called_from_several_threads_answers_each_with_its_own_binary",
    "test_a_candidate_that_fails_to_build_is_dropped_and_counted",
    "test_a_candidate_that_computes_a_wrong_answer_is_never_returned",
    "test_a_symbolic_kernel_is_searched_at_the_values_given",
    "test_tensor_core_kernels_are_searched",
    "test_a_kernel_that_stores_part_of_its_buffer_is_searched",
    "test_the_actions_beyond_tinygrads_apply_and_their_kernels_verify",
    "test_the_actions_of_several_steps_pad_an_axis_then_take_its_work_items_and_their_kernels_verify",
    "test_a_ctrl_c_never_reaches_a_compiler_process_and_it_prints_nothing",
    "test_ctrl_c_during_a_search_ends_in_one_line",
}


@pytest.fixture
def few_actions(monkeypatch):
    """A handful of tinygrad's actions: the same search, a few candidates per round (each costs a compile)."""
    monkeypatch.setattr(
        S,
        "ACTIONS",
        [
            Opt(OptOps.UPCAST, 0, 2),
            Opt(OptOps.UPCAST, 0, 4),
            Opt(OptOps.UPCAST, 1, 4),
            Opt(OptOps.UNROLL, 0, 4),
            Opt(OptOps.LOCAL, 0, 4),
            Opt(OptOps.LOCAL, 0, 16),
            Opt(OptOps.GROUPTOP, 0, 16),
        ],
    )


def _state(k: Kernel) -> tuple:
    return (list(k.applied_opts), [st.views for st in k.sts], k.full_shape, k.colors(), len(k.bufs))


def test_search_returns_a_verified_kernel_whose_opts_replay_on_a_fresh_kernel(few_actions):
    k = Kernel(*sum_ast((64, 128), (1,)))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0)
    R.verify(result.kernel, *inputs)
    assert result.kernel is not k and result.kernel.applied_opts and np.isfinite(result.time_s)
    assert len(result.rounds) >= 2 and sum(r.timed for r in result.rounds) > 2
    replay = Kernel(*k.ast)
    for opt in result.kernel.applied_opts:
        replay.apply_opt(opt)
    assert _state(replay) == _state(result.kernel)
    assert R.render(replay).src == R.render(result.kernel).src


def test_each_program_is_set_up_to_launch_once_a_search_however_often_it_is_timed(few_actions, monkeypatch):
    """A program timed in several passes (its round's, a line's gain, the runoff) reuses its Launch: the kernel
    built and its arguments set once a set of buffers (the runoff's leaders run on a second set too), not at every
    timing."""
    setups, timings, real_init, real_time = [], [], R.Launch.__init__, S._time_candidate

    def init(self, *args, **kwargs):
        if kwargs.get("prg") is not None:  # verify sets up its own Launch, of no given program
            setups.append((id(kwargs["prg"]), id(kwargs["device_args"])))
        real_init(self, *args, **kwargs)

    def timing(k, prg, inputs, device_args, *args, **kwargs):
        timings.append((id(prg), id(device_args)))  # a program, on one of the search's two sets of buffers
        return real_time(k, prg, inputs, device_args, *args, **kwargs)

    monkeypatch.setattr(R.Launch, "__init__", init)
    monkeypatch.setattr(S, "_time_candidate", timing)
    k = Kernel(*sum_ast((64, 128), (1,)))
    S.search(k, *R.random_inputs(k), amt=1, workers=0, cache=False)
    assert len(timings) > len(set(timings)) and sorted(setups) == sorted(set(timings))


def test_the_runoffs_leaders_are_timed_again_on_device_buffers_of_their_own(few_actions, monkeypatch):
    """After the runoff, its leaders launch PAGE_RUNS times each on a second set of device buffers (after a warm-up
    launch): other buffer objects than the rounds' (other pages), holding the same inputs (the answer verifies)."""
    sets, real_time = [], S._time_candidate

    def timing(k, prg, inputs, device_args, *args, **kwargs):
        sets.append(device_args)
        return real_time(k, prg, inputs, device_args, *args, **kwargs)

    monkeypatch.setattr(S, "_time_candidate", timing)
    k = Kernel(*sum_ast((64, 128), (1,)))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0, cache=False)
    checked = min(S.PAGE_CHECKED, result.finalists) * S.PAGE_RUNS + 1  # and a warm-up launch
    rounds, pages = sets[0], sets[-1]
    assert all(x is rounds for x in sets[:-checked]) and all(x is pages for x in sets[-checked:])
    assert {id(b) for b in rounds.values()}.isdisjoint(id(b) for b in pages.values()) and len(pages) == len(rounds)
    R.verify(result.kernel, *inputs)


def test_the_timings_buffers_are_freed_before_the_answers_reference_is_computed(few_actions, monkeypatch):
    """The rounds' and the page check's device buffers and Launches are gone when the reference is computed (memory a
    VM's process touches the first time is slow: the reference and verify reuse their pages)."""

    class Mark:  # put in each dict of device buffers and of Launches the timing uses: alive while the dict is
        pass

    marks, alive, real_time, real_reference = {}, [], S._time_candidate, S.reference

    def timing(k, prg, inputs, device_args, stop_above, var_vals, launches):
        for d in (device_args, launches):
            marks.setdefault(id(d), weakref.ref(d.setdefault("mark", Mark())))
        return real_time(k, prg, inputs, device_args, stop_above, var_vals, launches)

    def ref(*args, **kwargs):
        alive.append(sum(m() is not None for m in marks.values()))
        return real_reference(*args, **kwargs)

    monkeypatch.setattr(S, "_time_candidate", timing)
    monkeypatch.setattr(S, "reference", ref)
    k = Kernel(*sum_ast((64, 128), (1,)))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0, cache=False)
    assert len(marks) == 4 and alive == [0]  # the rounds' set and the page check's, each with its Launches
    R.verify(result.kernel, *inputs)


def test_search_never_changes_the_input_kernel(few_actions):
    k = Kernel(*matmul_ast(16, 16, 16))
    k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
    before = _state(k)
    inputs = R.random_inputs(k)
    found = S.beam_search(k, *inputs, amt=1, workers=0)
    assert _state(k) == before
    assert found.applied_opts[:1] == [Opt(OptOps.UPCAST, 0, 2)]  # it starts from k as given


def test_second_search_hits_the_disk_cache_and_cache_false_bypasses_it(few_actions, cache_dir, monkeypatch):
    k = Kernel(*elementwise_ast(2048))
    inputs = R.random_inputs(k)
    first = S.search(k, *inputs, amt=1)  # compile threads: the default
    assert not first.cached and list(cache_dir.glob("beam/*.json"))
    with monkeypatch.context() as m:  # a hit runs nothing: no compile, no launch
        m.setattr(S, "compile_all", None)
        m.setattr(S, "_time_candidate", None)
        second = S.search(k, *inputs, amt=1)
    assert second.cached and second.rounds == []
    assert second.kernel.applied_opts == first.kernel.applied_opts and _state(k)[0] == []
    again = S.search(k, *inputs, amt=1, cache=False, workers=0)
    assert not again.cached and again.rounds
    other_amt = S.search(k, *inputs, amt=2, workers=0)  # amt is part of the key
    assert not other_amt.cached



def test_a_cache_hit_ignores_neither_log_nor_top_k_nor_the_knobs(few_actions, cache_dir, monkeypatch, tmp_path):
    """docs/search.md's way to make a replayable log (search(..., log=FILE)) searches and logs when the answer is in
    the cache; another top_k, or another knob (BEAM_UPCAST_MAX) is another search, not a hit."""
    k = Kernel(*elementwise_ast(2048))
    inputs = R.random_inputs(k)
    assert not S.search(k, *inputs, amt=1, workers=0).cached
    path = str(tmp_path / "run.jsonl")
    logged = S.search(k, *inputs, amt=1, workers=0, log=path)
    (entry,) = cost.read_log(path).values()
    assert not logged.cached and entry["rounds"] and entry["answer"]["answer"] == cost.opts_text(logged.kernel)
    assert not S.search(k, *inputs, amt=1, workers=0, top_k=None).cached
    monkeypatch.setenv("BEAM_UPCAST_MAX", "4")
    assert not S.search(k, *inputs, amt=1, workers=0).cached
    assert S.search(k, *inputs, amt=1, workers=0).cached

@pytest.fixture
def own_compilers(monkeypatch):
    """The test's compiler processes, none built before it (no program in the runtime's cache), all ended after it."""
    compilers: list = []
    monkeypatch.setattr(C, "_compilers", compilers)
    monkeypatch.setattr(R.get_device(), "programs", OrderedDict())
    yield compilers
    for compiler in compilers:
        compiler.end()


def test_each_compile_thread_builds_in_a_process_of_its_own(few_actions, own_compilers, monkeypatch):
    sources, real = [], R.Compiler.__call__

    def counted(compiler, src, name):
        if compiler not in R._own.values():  # the search's compilers (the others build the model's limits)
            sources.append((compiler.proc.pid if compiler.proc else None, src))
        return real(compiler, src, name)

    monkeypatch.setattr(R.Compiler, "__call__", counted)
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=2, cache=False)
    pids = {c.proc.pid for c in own_compilers}
    assert len(own_compilers) == 2 and os.getpid() not in pids and all(c.proc.poll() is None for c in own_compilers)
    # every kernel built came from a compiler, a round's in batches: fewer programs than kernels
    compiled = sum(r.compiled for r in result.rounds)
    assert sum(src.count("__kernel void") for _, src in sources) == compiled > len(sources) >= len(result.rounds)
    assert {pid for pid, _ in sources} - {None} <= pids  # None: a process's first source starts it
    R.verify(result.kernel, *inputs)


def test_a_compiler_process_answers_on_stdout_alone_serves_many_sources_and_ends_with_its_input(
    own_compilers, monkeypatch
):
    """What the OpenCL driver prints in the process (here a print as the device is found) goes to stderr, never among
    the answers; one process builds source after source; closing its input ends it."""
    chatty = "real = runtime.get_device; runtime.get_device = lambda: print('driver chatter', flush=True) or real()"
    code = R._COMPILER_CODE.replace("runtime._compile_worker()", chatty + "; runtime._compile_worker()")
    monkeypatch.setattr(R, "_COMPILER_CODE", code)
    compiler = R.Compiler()
    own_compilers.append(compiler)
    binaries, pids = [], set()
    for n in range(3):
        binaries.append(compiler(f"__kernel void k(__global float* d) {{ d[0] = {n}.0f; }}", "k"))
        pids.add(compiler.proc.pid)
    assert len(pids) == 1 and all(isinstance(b, bytes) and b for b in binaries)
    compiler.proc.stdin.close()
    assert compiler.proc.wait(timeout=30) == 0


def test_a_stuck_compiler_is_ended_and_its_candidates_dropped(few_actions, own_compilers, monkeypatch):
    monkeypatch.setattr(R, "_COMPILER_CODE", "import time; time.sleep(600)  # {here}")  # reads nothing, answers never
    monkeypatch.setattr(R, "COMPILE_TIMEOUT", 1)
    k = Kernel(*elementwise_ast(4096))
    start = time.perf_counter()
    with pytest.raises(S.SearchError, match=r"every candidate was dropped .*no answer from the compiler in 1 s"):
        S.search(k, *R.random_inputs(k), amt=1, workers=2, cache=False)
    assert time.perf_counter() - start < 20
    assert own_compilers and all(c.proc.poll() is not None for c in own_compilers)  # ended, not left behind


def test_a_compiler_that_dies_drops_its_candidates_and_the_next_source_starts_another(
    few_actions, own_compilers, monkeypatch
):
    code = R._COMPILER_CODE
    monkeypatch.setattr(R, "_COMPILER_CODE", "import os; os._exit(3)  # {here}")
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    with pytest.raises(S.SearchError, match=r"the compiler's process ended \(exit status 3\)"):
        S.search(k, *inputs, amt=1, workers=2, cache=False)
    monkeypatch.setattr(R, "_COMPILER_CODE", code)
    result = S.search(k, *inputs, amt=1, workers=2, cache=False)
    assert sum(r.timed for r in result.rounds) > 2 and result.dropped == 0
    R.verify(result.kernel, *inputs)


@pytest.mark.parametrize("embedded", [False, True])
def test_workers_0_or_no_python_to_start_builds_here(embedded, few_actions, own_compilers, monkeypatch):
    """workers=0 builds here; so does the default in an embedded Python, which has no sys.executable to start."""
    if embedded:
        monkeypatch.setattr(S.sys, "executable", "")
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, cache=False, **({} if embedded else {"workers": 0}))
    assert own_compilers == [] and sum(r.timed for r in result.rounds) > 2 and result.dropped == 0
    R.verify(result.kernel, *inputs)


# -- searches from several threads and processes; timeouts; a kernel the heuristics refuse ---------------
def _sum_of_squares_and_max_of_negation() -> list[Kernel]:
    """Two kernels of one shape: every candidate of one has the name (r_...) of the other's, never its source."""
    x = load(1, ShapeTracker.from_shape((256, 64)))
    squares = reduce(ReduceOps.SUM, alu(BinaryOps.MUL, x, x), (1,))
    return [Kernel(store(squares)), Kernel(store(reduce(ReduceOps.MAX, alu(UnaryOps.NEG, x), (1,))))]


def test_searches_in_threads_each_get_the_binaries_of_their_own_sources(few_actions, own_compilers):
    """Two searches at once in one process: each builds in compiler processes of its own, each answer is its own
    source's binary, and the programs they leave behind compute what their sources say (once, sums of squares came
    back for MAX(-x), and candidates were dropped as "'r_...' was not found as a program")."""
    kernels = _sum_of_squares_and_max_of_negation()
    inputs = [R.random_inputs(k) for k in kernels]
    results, errors = {}, []

    def searching(n: int) -> None:
        try:
            results[n] = S.search(kernels[n], *inputs[n], amt=1, workers=2, cache=False)
        except Exception as e:  # noqa: BLE001 (the test says which)
            errors.append(e)

    threads = [threading.Thread(target=searching, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and all(results[n].why_dropped == [] for n in (0, 1)), (errors, results)
    assert len(own_compilers) == 4  # two each, none shared
    for k, x in zip(kernels, inputs):  # every candidate's program, found in the cache by its source
        for kern in [k, *S.kernel_actions(k)]:
            R.verify(kern, *x)


def test_a_compiler_called_from_several_threads_answers_each_with_its_own_binary(own_compilers):
    compiler = R.Compiler()
    own_compilers.append(compiler)
    srcs = {f"k{n}": f"__kernel void k{n}(__global float* d) {{ d[0] = {n}.0f; }}" for n in range(12)}
    binaries = {}
    threads = [threading.Thread(target=lambda n=n, s=s: binaries.update({s: compiler(s, n)})) for n, s in srcs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx = R.get_device().ctx
    for n, src in enumerate(srcs.values()):  # the program each binary makes holds that source's kernel alone
        program = R.cl.Program(ctx, ctx.devices, [binaries[src]]).build()
        assert program.get_info(R.cl.program_info.KERNEL_NAMES) == f"k{n}"


ANSWERS_ANOTHER = """import pickle, sys  # {here}
pickle.dump(None, sys.stdout.buffer)  # ready
sys.stdout.flush()
while True:
    pickle.load(sys.stdin.buffer)
    pickle.dump(("__kernel void other(__global float* d) {{ }}", True, b"a binary"), sys.stdout.buffer)
    sys.stdout.flush()
"""


def test_an_answer_for_another_source_is_refused(few_actions, own_compilers, monkeypatch):
    """Each answer names the source it was built from; one that names another ends the process, never loaded."""
    monkeypatch.setattr(R, "_COMPILER_CODE", ANSWERS_ANOTHER)
    k = Kernel(*elementwise_ast(4096))
    with pytest.raises(S.SearchError, match="answered for another source"):
        S.search(k, *R.random_inputs(k), amt=1, workers=2, cache=False)
    assert own_compilers and all(c.proc.poll() is not None for c in own_compilers)


def test_a_timeout_holds_while_a_compile_is_still_running(few_actions, own_compilers, monkeypatch):
    """The time runs out while every compiler is busy (here: stuck): the search ends its compiles and returns, rather
    than wait for them (once, three searches with timeout=15 still ran after 120 s)."""
    monkeypatch.setattr(R, "_COMPILER_CODE", "import time; time.sleep(600)  # {here}")  # reads nothing, answers never
    monkeypatch.setattr(R, "COMPILE_TIMEOUT", 60)  # far beyond the timeout: the deadline ends the compiles, not this
    k = Kernel(*elementwise_ast(4096))
    start = time.perf_counter()
    with pytest.raises(S.SearchError, match="its timeout of 2 s ran out first"):
        S.search(k, *R.random_inputs(k), amt=1, workers=2, cache=False, timeout=2)
    assert time.perf_counter() - start < 30  # 2 s and the search's own start, with room for a busy machine
    assert own_compilers and all(c.proc.poll() is not None for c in own_compilers)


def test_a_kernel_the_heuristics_refuse_is_searched_from_the_bare_kernel(few_actions, monkeypatch):
    monkeypatch.setenv("MV_ROWS_PER_THREAD", "64")  # the matvec branch then asks for an upcast of 64: refused
    k = Kernel(*matvec_ast(256, 8))
    with pytest.raises(kernel.KernelOptError) as refused:
        kernel.optimize(k.copy())
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0, cache=False)
    R.verify(result.kernel, *inputs)
    said = f"the heuristics refuse this kernel (KernelOptError: {refused.value}): searched from it alone"
    assert result.why_dropped[0] == said and result.rounds[0].candidates == 1


CACHE_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import runtime
import search.beam as search
from kernel import Kernel, Opt, OptOps
from demo import elementwise_ast, matmul_ast
search.ACTIONS = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.UPCAST, 1, 2)]
kernels = [Kernel(*elementwise_ast(4096)), Kernel(*matmul_ast(32, 32, 32))]
for k in kernels if sys.argv[1] == "forward" else kernels[::-1]:
    search.search(k, *runtime.random_inputs(k), amt=1, workers=0)
"""


def test_two_processes_searching_with_one_cache_leave_each_kernel_its_own_answer(tmp_path, cache_dir, monkeypatch):
    """Two processes search the same two kernels at once, in opposite orders, into one cache: every entry is whole,
    and each kernel's comes back verified with opts of its own."""
    script = tmp_path / "search_two.py"
    script.write_text(CACHE_SCRIPT.format(here=ROOT))
    env = {**os.environ, "KERNELPY_CACHE": str(cache_dir)}
    procs = [subprocess.Popen([sys.executable, str(script), order], env=env, stderr=subprocess.PIPE, text=True)
             for order in ("forward", "backward")]  # fmt: skip
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    assert len(list(cache_dir.glob("beam/*.json"))) == 2 and not list(cache_dir.glob("beam/*.tmp"))
    monkeypatch.setattr(S, "ACTIONS", [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.UPCAST, 1, 2)])
    for k in (Kernel(*elementwise_ast(4096)), Kernel(*matmul_ast(32, 32, 32))):
        inputs = R.random_inputs(k)
        found = S.search(k, *inputs, amt=1, workers=0)
        assert found.cached
        R.verify(found.kernel, *inputs)


def test_time_budget_returns_the_best_so_far(cache_dir, monkeypatch):
    k = Kernel(*matmul_ast(128, 128, 128))
    inputs = R.random_inputs(k)
    rounds, real, late = [], time.perf_counter, [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real() + late[0])

    def slow_round(r):  # round 0 ends past the budget: on the clock the search reads, however busy the machine
        rounds.append(r)
        late[0] = 3600.0

    result = S.search(k, *inputs, amt=1, workers=0, timeout=600, on_round=slow_round)
    assert len(rounds) == 1 and rounds[0].timed >= 1, "the search went on past its budget"
    R.verify(result.kernel, *inputs)
    assert not list(cache_dir.glob("beam/*.json")), "a search cut short is not remembered"


@pytest.mark.parametrize("phase", ["gains", "runoff", "page_check"])
def test_no_launch_starts_past_the_deadline_in_a_lines_gain_or_the_runoff(phase, few_actions, cache_dir, monkeypatch):
    """The runoff once ignored the search's timeout (it returned 16 to 34 s past a 30 s one). A stand-in timer: in the
    phase, each launch takes an hour on the clock the search reads, however fast the device. No launch starts past
    the deadline: the search returns within one launch of it, verified, and is not kept in the cache; a runoff with
    no whole pass leaves the rounds' ranking (no finalists said)."""
    real_clock, late, launches, deadline = time.perf_counter, [0.0], [], []
    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + late[0])

    def launch(kern, prg, *args):  # (time, whether in the phase) of each launch's start
        launches.append((time.perf_counter(), bool(deadline)))
        late[0] += 3600.0 if deadline else 0.0
        return 1e-3

    real_phase = getattr(S._Search, phase)

    def in_phase(self, *args):
        deadline.append(self.deadline)
        try:
            return real_phase(self, *args)
        finally:
            deadline.clear()

    monkeypatch.setattr(S, "_time_candidate", launch)
    monkeypatch.setattr(S._Search, phase, in_phase)
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0, timeout=600, top_k=None)
    in_the_phase = [t for t, costly in launches if costly]
    assert in_the_phase, f"the search never reached its {phase}"
    assert len(in_the_phase) == 1 and result.seconds < 600 + 2 * 3600, f"{len(in_the_phase)} launches in the {phase}"
    R.verify(result.kernel, *inputs)
    assert not list(cache_dir.glob("beam/*.json")), "a search cut short is not remembered"
    if phase == "runoff":
        assert result.finalists == 0 and result.passes == 0


def test_a_candidate_that_fails_to_build_is_dropped_and_counted(few_actions, monkeypatch):
    real_build = R.build

    def build_without_float4(src, name, compiler=None):
        if "float4" in src:
            raise R.BuildError(f"OpenCL build of {name} failed (the test refuses float4)")
        return real_build(src, name, compiler)

    def build_all_without_float4(parts, compiler=None):  # a batch with one such candidate: built again one by one
        if any("float4" in src for src, _ in parts):
            raise R.BuildError("OpenCL build of the batch failed (the test refuses float4)")
        return R.build_all(parts, compiler)

    monkeypatch.setattr(C, "build", build_without_float4)
    monkeypatch.setattr(C, "build_all", build_all_without_float4)
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0, cache=False)
    assert result.dropped > 0 and any("BuildError" in why for why in result.why_dropped)
    assert result.dropped == sum(r.dropped for r in result.rounds)
    assert "float4" not in R.render(result.kernel).src
    R.verify(result.kernel, *inputs)


def test_a_candidate_that_computes_a_wrong_answer_is_never_returned(few_actions, monkeypatch):
    k = Kernel(*sum_ast((16, 32), (1,)))
    inputs = R.random_inputs(k)
    real_run = R.run

    def run_wrong_with_any_opt(kern, *xs, **kwargs):  # as if every optimized kernel were miscompiled
        outs = real_run(kern, *xs, **kwargs)
        return [o + 1 for o in outs] if kern.applied_opts else outs

    real_time = S._time_candidate

    def given_kernel_slowest(kern, *args, **kwargs):  # so that every other kernel is tried first
        t = real_time(kern, *args, **kwargs)
        return t if kern.applied_opts else 1.0

    monkeypatch.setattr(R, "run", run_wrong_with_any_opt)
    monkeypatch.setattr(S, "_time_candidate", given_kernel_slowest)
    result = S.search(k, *inputs, amt=1, workers=0, cache=False)
    assert result.kernel.applied_opts == []
    wrong = [why for why in result.why_dropped if "VerificationError" in why]
    assert len(wrong) == sum(r.timed for r in result.rounds) - 1  # every timed kernel but the given one
    assert result.dropped >= len(wrong)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"amt": 0}, "amt"),
        ({"amt": 1.5}, "amt"),
        ({"amt": True}, "amt"),
        ({"timeout": 0}, "timeout"),
        ({"workers": -1}, "workers"),
        ({"timeout": "5"}, "timeout"),
        ({"min_progress": None}, "min_progress"),
        ({"min_progress": -1.0}, "min_progress"),
        ({"var_vals": [("i", 3)]}, "var_vals"),
    ],
)
def test_bad_arguments_raise_before_anything_compiles(kwargs, message, monkeypatch):
    for module in (R, C):  # search/compilers.py compiles candidates, runtime.py the kernels it runs
        monkeypatch.setattr(module, "build", lambda *a: pytest.fail("compiled despite bad arguments"))
    k = Kernel(*elementwise_ast(256))
    with pytest.raises(S.SearchError, match=message):
        S.search(k, *R.random_inputs(k), **kwargs)


def test_inputs_that_dont_match_the_kernel_raise_before_anything_compiles(monkeypatch):
    for module in (R, C):
        monkeypatch.setattr(module, "build", lambda *a: pytest.fail("compiled despite bad inputs"))
    k = Kernel(*elementwise_ast(256))
    a, b = R.random_inputs(k)
    with pytest.raises(S.SearchError, match="expected 2 input arrays"):
        S.beam_search(k, a)
    with pytest.raises(S.SearchError, match="dtype"):
        S.beam_search(k, a, b.astype(np.float64))
    with pytest.raises(S.SearchError, match="elements"):
        S.beam_search(k, a, b[:10])
    with pytest.raises(S.SearchError, match="Kernel"):
        S.beam_search(k.ast, a, b)
    with pytest.raises(ValueError, match="no demo kernel 'nope'"):
        CLI.search_demo("nope")


def test_actions_are_one_opt_more_and_stay_within_the_limits():
    k = Kernel(*matmul_ast(64, 64, 64))
    kernels = S.kernel_actions(k)
    assert kernels and all(len(x.applied_opts) == 1 and x.applied_opts[0] in S.ACTIONS for x in kernels)
    for x in kernels:
        shape = list(zip(x.full_shape, x.colors()))
        assert np.prod([s for s, c in shape if c in ("magenta", "yellow")]) <= S.search_limits()[0]
    assert k.applied_opts == []


def test_test_global_size_halves_dims_above_16_and_scales_time():
    assert S._test_global_size([256, 32, 8], 65536) == ([256, 32, 8], 1)
    size, factor = S._test_global_size([4096, 64, 8], 65536)
    assert np.prod(size) <= 65536 and size[2] == 8 and factor * np.prod(size) == 4096 * 64 * 8


def test_cli_search_prints_rounds_and_the_comparison(few_actions, capsys):
    assert CLI.main(["sum_axis1", "--beam", "1", "--no-cache", "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"round 0: +2 candidates +2 compiled", out) and re.search(r"round 1: +\d+ candidates", out)
    assert re.search(r"hand-coded +[0-9.]+ ms", out) and re.search(r"searched +[0-9.]+ ms", out)
    assert re.search(r"runoff: +\d+ fastest, \d+ passes in turn: best [0-9.]+ ms", out)
    assert re.search(r"speedup [0-9.]+x; search [0-9.]+ s", out)
    assert "\r" not in out and "\x1b" not in out  # no progress display, no colours into a pipe
    assert max(len(line) for line in out.splitlines()) <= 100  # off a terminal: 100 columns


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [60, 100, 400])
def test_round_lines_fit_the_terminal_and_keep_every_field(monkeypatch, columns):
    """A round's line (counts, best time, shape, opts) fits the terminal's width: on a narrow one it wraps between
    its fields, and nothing is lost; where it all fits it stays one line."""
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("NO_COLOR", "1")
    k = kernel.optimize(Kernel(*matmul_ast(512, 512, 512)))
    out = _Terminal()
    CLI._SearchDisplay(out).on_round(S.SearchRound(1, 40, 40, 0, 40, 0, 0, 0.002371, k, 4.5))
    lines = out.getvalue().replace("\r\x1b[K", "").splitlines()
    assert max(len(line) for line in lines) <= columns, lines
    assert len(lines) == (1 if columns == 400 else 3 if columns == 100 else len(lines))
    words = " ".join(lines).split()
    opts = ", ".join(str(o) for o in k.applied_opts).split()
    shape = [str(s) for s in k.full_shape]
    assert words[:14] == "round 1: 40 candidates 40 compiled 40 timed 0 dropped 0 duplicates 0 cut".split()
    assert words[14:] == ["best", "2.371", "ms", "4.5", "s", *shape, *opts]


@pytest.mark.parametrize(
    "argv, message",
    [(["sum", "--beam", "0"], "--beam must be at least 1"), (["nope"], "invalid choice")],
)
def test_cli_search_rejects_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        CLI.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_timing_stops_early_once_a_kernel_is_clearly_slower(monkeypatch):
    k = Kernel(*elementwise_ast(1 << 20))  # no opts: 2**20 work-groups, more than a probe launches
    inputs, limits = R.random_inputs(k), R.device_limits()
    prg = R.render(k, limits)
    sizes = []
    real_launch = R.Launch.launch

    def counting_launch(self):
        sizes.append(prod(self.global_size))
        return real_launch(self)

    monkeypatch.setattr(R.Launch, "launch", counting_launch)
    assert S._time_candidate(k, prg, inputs, {}, stop_above=0.0) > 0
    assert sizes == [(1 << 20) // 16]  # one partial launch said enough: a 16th, more than PROBE_GLOBAL_SIZE
    sizes.clear()
    S._time_candidate(k, prg, inputs, {}, stop_above=1e9)
    assert sizes == [(1 << 20) // 16, 1 << 20]  # the probe, then the full launch
    sizes.clear()
    launches: dict = {}  # a search's: the Launch a probe sized is set up once, and launches in full next time
    S._time_candidate(k, prg, inputs, {}, 0.0, None, launches)
    S._time_candidate(k, prg, inputs, {}, math.inf, None, launches)
    assert sizes == [(1 << 20) // 16, 1 << 20] and len(launches) == 1
    sizes.clear()
    k = Kernel(*elementwise_ast(2 * S.PROBE_GLOBAL_SIZE))
    S._time_candidate(k, R.render(k, limits), R.random_inputs(k), {}, stop_above=0.0)
    assert sizes == [S.PROBE_GLOBAL_SIZE]  # a smaller kernel's probe: PROBE_GLOBAL_SIZE work-groups, half of it
    sizes.clear()
    k = Kernel(*elementwise_ast(S.PROBE_GLOBAL_SIZE))
    S._time_candidate(k, R.render(k, limits), R.random_inputs(k), {}, stop_above=0.0)
    assert sizes == [S.PROBE_GLOBAL_SIZE]  # no more work-groups than a probe: no probe


def test_a_symbolic_kernel_is_searched_at_the_values_given(few_actions):
    k = Kernel(*attention_ast(16, 64))
    inputs = R.random_inputs(k, var_vals={"i": 40})
    with pytest.raises(S.SearchError, match="no value for the variable i"):
        S.search(k, *inputs, amt=1, workers=0)
    result = S.search(k, *inputs, amt=1, workers=0, var_vals={"i": 40})
    for n in (1, 40, 64):  # one program serves every length: the searched one too
        R.verify(result.kernel, *R.random_inputs(k, var_vals={"i": n}), var_vals={"i": n})


def test_tensor_core_kernels_are_searched(few_actions, monkeypatch):
    monkeypatch.setattr(S, "ACTIONS", S.ACTIONS + [Opt(OptOps.TC, 0, 0)])
    k = Kernel(*matmul_ast(16, 16, 16), opts=TARGETS["metal"])  # rendered with plain multiply-adds on this device
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=0, cache=False)
    assert any(kern.tensor_core for kern in S.kernel_actions(k)) and result.rounds
    R.verify(result.kernel, *inputs)


# -- a search from a plain script, an unwritable or damaged cache, partial stores, empty kernels, no fallback
SCRIPT = """
import sys
sys.path.insert(0, {here!r})
print("the script runs", flush=True)
import runtime
import search.beam as search
from kernel import Kernel, Opt, OptOps
from demo import elementwise_ast
search.ACTIONS = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 16)]
k = Kernel(*elementwise_ast(4096))
found = search.search(k, *runtime.random_inputs(k), amt=1, timeout=60, workers=2)
print("timed", sum(r.timed for r in found.rounds), found.time_s < 1, flush=True)
"""


def test_a_search_from_a_script_without_a_main_guard_runs_the_script_once(tmp_path):
    """A plain script, no main guard (docs/search.md): compile workers must not import it again (each would run it)."""
    script = tmp_path / "search_me.py"
    script.write_text(SCRIPT.format(here=ROOT))
    env = {**os.environ, "KERNELPY_CACHE": str(tmp_path / "cache")}
    try:
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the search did not end: {e.stdout!r}")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("the script runs") == 1, p.stdout
    assert re.search(r"^timed [1-9]\d* True$", p.stdout, re.M), p.stdout


def test_an_unwritable_cache_warns_once_and_the_search_returns(tmp_path, monkeypatch, few_actions):
    k = Kernel(*elementwise_ast(256))
    inputs = R.random_inputs(k)
    monkeypatch.setattr(S, "_cache_warned", False)
    not_a_folder = tmp_path / "a_file"
    not_a_folder.write_text("")
    (tmp_path / "cache_with_a_file").mkdir()
    (tmp_path / "cache_with_a_file" / "beam").write_text("")  # where the entries go: a file, so nothing is written
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for where in (not_a_folder, tmp_path / "cache_with_a_file"):
            monkeypatch.setenv("KERNELPY_CACHE", str(where))
            result = S.search(k, *inputs, amt=1, workers=0)
            assert not result.cached and np.isfinite(result.time_s)
            R.verify(result.kernel, *inputs)
    said = [w for w in caught if "cache" in str(w.message)]
    assert len(said) == 1 and "can't be written" in str(said[0].message)


@pytest.mark.parametrize(
    "entry",
    ['{"opts": ' + "[" * 100000 + "]" * 100000 + ', "time_s": 0.001}', '{"opts": [], "time_s": "fast"}'],
    ids=["deeply nested", "time not a number"],
)
def test_a_damaged_cache_entry_is_searched_again(entry, cache_dir, few_actions):
    k = Kernel(*elementwise_ast(256))
    inputs = R.random_inputs(k)
    S.search(k, *inputs, amt=1, workers=0)
    (path,) = cache_dir.glob("beam/*.json")
    path.write_text(entry)
    with pytest.warns(UserWarning, match="is damaged"):  # said, then searched again
        again = S.search(k, *inputs, amt=1, workers=0)
    assert not again.cached and again.rounds and isinstance(again.time_s, float)
    assert S.search(k, *inputs, amt=1, workers=0).cached  # written anew


def test_a_kernel_that_stores_part_of_its_buffer_is_searched(few_actions):
    st = ShapeTracker.from_shape((64,)).shrink(((8, 40),))  # out[8:40] = x
    k = Kernel(store(load(1, ShapeTracker.from_shape((32,))), st=st))
    (x,) = R.random_inputs(k)
    found = S.beam_search(k, x, amt=1, workers=0, cache=False)
    np.testing.assert_array_equal(R.run(found, x)[0][8:40], x)


def test_a_kernel_without_elements_is_returned_as_it_is():
    k = Kernel(*elementwise_ast(0))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, workers=0)
    assert result.kernel.applied_opts == [] and result.time_s == 0 and result.kernel is not k
    assert S.beam_search(k, *inputs).applied_opts == []


def test_a_search_that_timed_nothing_raises_instead_of_returning_the_given_kernel(few_actions, monkeypatch):
    def build_nothing(src, name, compiler=None):
        raise R.BuildError(f"OpenCL build of {name} failed (the test builds nothing)")

    monkeypatch.setattr(C, "build", build_nothing)
    monkeypatch.setattr(C, "build_all", lambda parts, compiler=None: build_nothing(*parts[0], compiler))
    k = Kernel(*elementwise_ast(256))
    with pytest.raises(S.SearchError, match="timed no kernel: every candidate was dropped .*BuildError"):
        S.beam_search(k, *R.random_inputs(k), amt=1, workers=0, cache=False)


def test_the_actions_beyond_tinygrads_apply_and_their_kernels_verify():
    """Ours beyond tinygrad's list: UPCAST by 8 on any axis and LOCAL by 32 on axes past 0 are candidates, and the
    kernels they make compute what numpy does (removing either rule from ACTIONS fails this)."""
    k = Kernel(*matmul_ast(64, 64, 64))
    new = {Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.LOCAL, 1, 32)}
    made = {x.applied_opts[0]: x for x in S.kernel_actions(k) if x.applied_opts[0] in new}
    assert set(made) == new
    inputs = R.random_inputs(k)
    for x in made.values():
        R.verify(x, *inputs)



def test_the_actions_of_several_steps_pad_an_axis_then_take_its_work_items_and_their_kernels_verify():
    """A conv whose output rows (18) are no multiple of a vector: PADTO:3:32 then LOCAL:3:16 (or 32) is one action
    (search.MACROS), and so is PADTO:3:32, LOCAL:3:16 then UPCAST:3:2, as are each other axis's that pads; the padded
    rows compute nothing that is stored, and verify. An axis already a multiple of 32 has nothing to pad: PADTO
    refuses, and the plain LOCAL is the action there."""
    k = Kernel(*conv2d_ast(2, 3, 20, 20, 32, 3, 0, 1))  # out (2, 32, 18, 18), taps (3, 3, 3)
    made = {tuple(map(str, x.applied_opts)): x for x in S.kernel_actions(k) if len(x.applied_opts) > 1}
    steps = {("PADTO:3:32", "LOCAL:3:16"), ("PADTO:2:32", "LOCAL:2:32"), ("PADTO:3:32", "LOCAL:3:16", "UPCAST:3:2")}
    assert steps <= set(made)
    assert not any(opts[0] == "PADTO:1:32" for opts in made)  # 32 output channels: nothing to pad
    assert {S.action_text(a) for a in S.MACROS} >= {"PADTO:3:32+LOCAL:3:16", "PADTO:0:32+LOCAL:0:32",
                                                    "PADTO:2:32+LOCAL:2:16+UPCAST:2:2"}  # fmt: skip
    inputs = R.random_inputs(k)
    for opts in steps:
        R.verify(made[opts], *inputs)

# ============================================================================================================
# The beam search's deduplication (search.search): a candidate that is the same kernel as one already sent to
# compile is neither compiled nor timed again, and the round counts it in `duplicates` (the number
# `python -m search` prints); two candidates that differ only in which axes are upcast or local are different
# kernels, and both are timed.
#
# Each test searches with two actions and amt=1, from a kernel without opts (and without the heuristics' kernel), so
# round 1 holds exactly the two candidates the test is about.
# ============================================================================================================
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
    display = CLI._SearchDisplay(out)
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


def test_the_runoff_ranks_by_a_time_reached_twice_not_the_best_launch(monkeypatch):
    """A kernel with one lucky launch among slow ones loses the runoff to one that is steadily faster: a kernel's time
    is its second-lowest launch (ranking by the best launch would pick the lucky one), and the lucky one is timed to
    the runoff's last pass (it might yet reach its lucky time again)."""
    k = Kernel(*elementwise_ast(64))
    lucky, steady = k.copy(), k.copy()
    most = S.FINAL_PASSES[1] * S.FINAL_RUNS
    launches = {id(lucky): iter([0.5] + [2.0] * (most - 1)), id(steady): iter([1.0] * most)}

    def timing(self, kern, prg, layout=0):
        if layout:
            raise MemoryError("the device's memory is short")  # no second set of buffers: the runoff's ranking stands
        return next(launches[id(kern)])

    monkeypatch.setattr(S._Search, "time", timing)
    s = S._Search(k, R.random_inputs(k), {}, time.perf_counter(), None, 0, lambda *a: None)
    slow = k.copy()  # over twice the fastest launch in its round: it can't win, and is not timed again
    ranked, runoff = s.runoff([(0.5, 0, lucky, None), (1.0, 1, steady, None), (1.1, 2, slow, None)], [slow])
    assert runoff["finalists"] == 2 and ranked[0][2] is steady and ranked[0][0] == 1.0 and ranked[1][0] == 2.0
    assert ranked[2] == (1.1, 2, slow, None) and runoff["passes"] == S.FINAL_PASSES[1]


def _runoff_launches(monkeypatch, launches: dict, pages=None) -> tuple[list[tuple], dict, dict[str, Kernel]]:
    """The runoff of kernels whose launches take the times each iterator launches[name] gives, in turn; on the
    second set of device buffers, pages[name]'s (without pages, that set can't be made: the ranking stands)."""
    k = Kernel(*elementwise_ast(64))
    kernels = {name: k.copy() for name in launches}
    times = {id(kernels[n]): [iter(launches[n]), iter(pages[n] if pages else ())] for n in launches}

    def timing(self, kern, prg, layout=0, **kwargs):
        if layout and not pages:
            raise MemoryError("the device's memory is short")  # no second set of buffers
        return next(times[id(kern)][layout])

    monkeypatch.setattr(S._Search, "time", timing)
    s = S._Search(k, R.random_inputs(k), {}, time.perf_counter(), None, 0, lambda *a: None)
    ranked, runoff = s.runoff([(1.0, i, kernels[n], None) for i, n in enumerate(launches)], [])
    return ranked, runoff, kernels


def _runoff(monkeypatch, passes: dict[str, list[float]]) -> tuple[list[tuple], dict, dict[str, Kernel]]:
    """The runoff of kernels whose every launch in pass p takes passes[name][p]."""
    return _runoff_launches(monkeypatch, {n: (t for t in x for _ in range(S.FINAL_RUNS)) for n, x in passes.items()})


def test_the_noise_is_how_far_each_kernels_second_lowest_median_is_above_its_lowest():
    assert S.runoff_noise([[1.0, 1.1, 3.0], [2.0, 2.0], [4.0, 5.0, 4.2]]) == pytest.approx(0.05)  # of 0.1, 0, 0.05
    assert S.runoff_noise([[1.0], []]) == 0.0  # no kernel timed twice: nothing measured


def test_the_runoff_goes_on_until_its_leader_holds(monkeypatch):
    """Passes go on past the third while a pass's leader beats the last one's by more than the noise (a busy moment
    hid b's time until pass 3), and stop at the first pass whose leader is the last pass's."""
    steady = {name: [t] * 12 for name, t in (("a", 1.0), ("c", 1.2), ("d", 1.3))}
    ranked, runoff, kernels = _runoff(monkeypatch, steady | {"b": [2.0, 2.0, 0.8, 0.81, 0.8, 0.8]})
    assert runoff["passes"] == 4 and ranked[0][2] is kernels["b"] and ranked[0][0] == 0.8
    assert runoff["margin"] == pytest.approx(0.25) and runoff["margin"] > runoff["noise"]  # sure


def test_a_runoff_whose_leaders_are_within_the_noise_is_a_tie_and_stops(monkeypatch):
    """Two kernels whose times lie closer than the noise their own launches show (how far each one's second-lowest
    launch is above its lowest) are a tie: the runoff stops at its third pass and says so (SearchResult.sure is
    False)."""
    forever = itertools.repeat
    launches = {"a": itertools.chain([1.025], forever(1.03)), "b": itertools.chain([1.0], forever(1.02))}
    ranked, runoff, _ = _runoff_launches(monkeypatch, launches)
    assert runoff["passes"] == 3 and runoff["margin"] == pytest.approx(1.03 / 1.02 - 1)
    assert runoff["noise"] == pytest.approx((1.03 / 1.025 - 1 + 0.02) / 2)
    assert not S.SearchResult(ranked[0][2], ranked[0][0], [], 0, False, 1.0, [], **runoff).sure


@pytest.mark.parametrize("b_s, passes", [(1.01, S.FINAL_PASSES[0]), (1.04, S.FINAL_PASSES[1])])
def test_a_kernel_racing_within_line_gain_of_the_leader_is_a_tie_and_the_runoff_stops(b_s, passes, monkeypatch):
    """b's one lucky launch (0.97) keeps beating a's time (1.0), so b stays in the race pass after pass. Where b's
    time is within LINE_GAIN (3%) of a's, no line would count the difference a gain: a tie, and the runoff stops at
    its third pass, on a; 4% behind, b races to the last pass (it might yet be the faster)."""
    forever = itertools.repeat
    launches = {"a": itertools.chain([0.95], forever(1.0)), "b": itertools.chain([0.97], forever(b_s))}
    ranked, runoff, kernels = _runoff_launches(monkeypatch, launches)
    assert runoff["passes"] == passes and ranked[0][2] is kernels["a"] and ranked[0][0] == 1.0


def test_the_runoffs_leaders_are_as_fast_as_on_their_slower_set_of_buffers(monkeypatch):
    """paged is fast on the rounds' device buffers only (matmul 1024's LOCAL:1:8 read 6.7 to 9.7 ms on five sets of
    buffers in one process, where another kernel read 7.4 to 7.8 ms): the runoff's two leaders, timed again on a
    second set (other pages), PAGE_RUNS launches each, are each as fast as on their slower set, and steady wins."""
    forever = itertools.repeat
    launches, pages = {"paged": forever(0.8), "steady": forever(1.0)}, {"paged": forever(1.2), "steady": forever(1.0)}
    ranked, runoff, kernels = _runoff_launches(monkeypatch, launches, pages)
    assert ranked[0][2] is kernels["steady"] and [x[0] for x in ranked] == [1.0, 1.2]
    assert runoff["margin"] == pytest.approx(0.2)
    ranked, _, kernels = _runoff_launches(monkeypatch, launches)  # where the second set can't be made
    assert ranked[0][2] is kernels["paged"] and [x[0] for x in ranked] == [0.8, 1.0]


@pytest.mark.parametrize("pages", [False, True])
@pytest.mark.parametrize("flips", ["each launch", "now and then"])
def test_three_cold_runoffs_on_a_bimodal_timer_agree_within_10_percent(flips, pages, monkeypatch):
    """A stand-in for PoCL's CPU timer, which flips between two modes: each launch reads its kernel's time, or twice
    it (the slow mode), as a coin decides at each launch or, now and then, for the whole device for a stretch of
    launches (times also jitter by up to 3%). Six finalists 4% to 40% apart: every three runoffs in a row (three cold
    runs, 300 in all) end on kernels within 10% of each other (ranked by a median of three launches they ended up to
    1.4x apart), and almost always on the fastest, with the leaders timed again on a second set of buffers too."""
    times = [1.0, 1.04, 1.08, 1.12, 1.25, 1.4]

    def runoff(seed: int) -> float:
        rng, slow = random.Random(seed), [False]

        def launches(t: float):
            while True:
                if flips == "each launch":
                    slow[0] = rng.random() < 0.5
                elif rng.random() < 0.1:
                    slow[0] = not slow[0]
                yield t * (2.0 if slow[0] else 1.0) * rng.uniform(1.0, 1.03)

        timers = {t: launches(t) for t in times}  # one timer a kernel, whichever set of buffers it runs on
        ranked, _, kernels = _runoff_launches(monkeypatch, timers, timers if pages else None)
        return next(t for t, kern in kernels.items() if kern is ranked[0][2])

    answers = [runoff(seed) for seed in range(300)]
    assert all(max(answers[i : i + 3]) <= 1.1 * min(answers[i : i + 3]) for i in range(0, 300, 3)), answers
    assert answers.count(1.0) >= 285, answers


def test_a_runoff_that_never_settles_ends_at_its_most_passes(monkeypatch):
    """a and b take turns setting a new best, far beyond the noise of the steady kernels beside them: in its pass each
    reaches a new low on one launch, so that each one's lowest beats the other's time (a time reached twice) pass
    after pass, and neither drops out of the race."""
    most, runs = S.FINAL_PASSES[1], S.FINAL_RUNS
    turns = {name: [t for p in range(most) for t in [0.9**p if p % 2 == i else 1.5] + [1.5] * (runs - 1)]
             for i, name in enumerate("ab")}  # fmt: skip
    steady = {name: iter([1.5] * most * runs) for name in "cdef"}
    ranked, runoff, _ = _runoff_launches(monkeypatch, turns | steady)
    assert runoff["passes"] == most and runoff["noise"] == 0.0
    # the steady ones were out of the race after the third pass (no launch below a leader's time): not timed again
    assert all(len(list(launches)) == (most - S.FINAL_PASSES[0]) * runs for launches in steady.values())


def test_only_the_contenders_are_timed_again(monkeypatch):
    """After one launch each, the CONTENDERS fastest within 2x of the best get the other passes; the rest keep their
    one time (a kernel slower than CONTENDERS others is not the round's best, and slow kernels make a search slow)."""
    k = Kernel(*elementwise_ast(64))
    kernels = [k.copy() for _ in range(6)]
    firsts = dict(zip(map(id, kernels), [1.0, 1.5, 1.1, 1.9, 1.2, 2.5]))  # within 2x of 1.0 but the last
    launches: list[int] = []

    def launch(self, kern, prg, stop_above=None):
        launches.append(id(kern))
        return firsts[id(kern)] if launches.count(id(kern)) == 1 else firsts[id(kern)] - 0.05

    monkeypatch.setattr(S._Search, "time", launch)
    monkeypatch.setattr(S, "CONTENDERS", 3)
    s = S._Search(k, R.random_inputs(k), {}, time.perf_counter(), None, 0, lambda *a: None)
    timed = s.time_all([(kern, None) for kern in kernels], cutoff=math.inf)
    number = {id(kern): n for n, kern in enumerate(kernels)}
    again = {number[i] for i in launches[len(kernels) :]}
    assert again == {0, 2, 4} and len(launches) == len(kernels) + 3 * (S.TIMING_PASSES - 1)
    assert sorted(t for t, *_ in timed) == [0.95, 1.05, 1.15, 1.5, 1.9, 2.5]


def test_round_0s_kernels_are_launched_once_and_later_rounds_contenders_again(monkeypatch):
    """Round 0's kernels each start a line and all go on, whatever their order: each is launched once (add 16M's two
    starts, 38 and 70 ms, took 0.2 s more to time again). A later round's contenders are timed again, as before."""
    base = Kernel(*elementwise_ast(64))
    heuristics, bare, child = base.copy(), base.copy(), base.copy()
    times = {id(heuristics): 1.0, id(bare): 1.5, id(child): 0.5}
    monkeypatch.setattr(S, "kernel_actions", lambda k: [child] if k is heuristics else [])
    monkeypatch.setattr(S._Search, "fresh", lambda self, ks: ks)  # the kernels share one state
    monkeypatch.setattr(S._Search, "compile", lambda self, ks: ([(k, None) for k in ks], len(ks)))
    monkeypatch.setattr(S._Search, "gains", lambda self, child, parent, min_progress: False)
    launches: list[int] = []

    def launch(self, kern, prg, stop_above=None):
        launches.append(id(kern))
        return times[id(kern)]

    monkeypatch.setattr(S._Search, "time", launch)
    s = S._Search(base, R.random_inputs(base), {}, time.perf_counter(), None, 0, lambda *a: None)
    rounds, _ = s.rounds([heuristics, bare], 2, 0.0, lambda r: None)
    assert len(rounds) == 2 and rounds[1].best is child
    assert launches == [id(heuristics), id(bare)] + [id(child)] * S.TIMING_PASSES


def test_the_warm_up_launches_run_on_the_buffers_the_rounds_time_on(few_actions, monkeypatch):
    """Every candidate with a work-group size is launched once after its compile, on the search's first set of device
    buffers, made before the first compile: the set the rounds and the runoff time on. A search makes three sets in
    all: that one, the page check's and verification's (a set per candidate cost more than the compile, 0.18 s a
    candidate for add 16M; a set of ones for the warm-ups alone, 0.12 s a search)."""
    import pyopencl as cl

    made: list[int] = []

    class Counting(cl.Buffer):  # every device buffer made from host data, by any module
        def __init__(self, *args, **kwargs):
            made.extend([kwargs["hostbuf"].nbytes] if "hostbuf" in kwargs else [])
            super().__init__(*args, **kwargs)

    warmed, timed = [], []
    ready, time_candidate = C._ready, S._time_candidate
    monkeypatch.setattr(cl, "Buffer", Counting)
    monkeypatch.setattr(C, "_ready", lambda i, prg, kern, args: warmed.append(args) or ready(i, prg, kern, args))
    monkeypatch.setattr(S, "_time_candidate", lambda k, prg, ins, args, *a: timed.append(args) or time_candidate(
        k, prg, ins, args, *a))  # fmt: skip
    k = Kernel(*elementwise_ast(4096))
    result = S.search(k, *R.random_inputs(k), amt=1, workers=0, cache=False)
    assert sum(r.compiled for r in result.rounds) >= 4 and len(warmed) >= 4
    first = warmed[0]
    assert all(args is first for args in warmed) and sorted(first) == [(0, "buffer"), (1, "buffer"), (2, "buffer")]
    assert timed[0] is first and {id(args) for args in timed} == {id(first), id(timed[-1])} != {id(first)}
    assert made == [4 * 4096] * 9  # three sets of the 3 buffers (out, a, b): the rounds', the page check's, verify's


def _made_up_search(monkeypatch):
    """(kern, a _Search) where nothing compiles or runs: `kern(t, children)` makes a kernel whose every timing reads t
    (a parent timed again too) and whose actions give `children`."""
    base = Kernel(*elementwise_ast(64))
    fake: dict[int, tuple[float, list[Kernel]]] = {}  # each kernel's made-up time and neighbours

    def kern(t: float, children: tuple[Kernel, ...] = ()) -> Kernel:
        k = base.copy()
        fake[id(k)] = (t, list(children))
        return k

    def time_all(self, programs, cutoff, again=True):
        self.timed += [(fake[id(k)][0], len(self.timed) + i, k, None) for i, (k, _) in enumerate(programs)]
        return self.timed[len(self.timed) - len(programs) :]

    monkeypatch.setattr(S, "kernel_actions", lambda k: fake[id(k)][1])
    monkeypatch.setattr(S._Search, "fresh", lambda self, ks: ks)  # every made-up kernel has the same state
    monkeypatch.setattr(S._Search, "compile", lambda self, ks: ([(k, None) for k in ks], len(ks)))
    monkeypatch.setattr(S._Search, "time_all", time_all)
    monkeypatch.setattr(S._Search, "time", lambda self, k, prg, *_: fake[id(k)][0])
    return kern, S._Search(base, R.random_inputs(base), {}, time.perf_counter(), None, 0, lambda *a: None)


def test_each_starting_point_is_searched_until_its_own_line_stops_improving(monkeypatch):
    """The heuristics' kernel (10) has one faster neighbour, 9.9: a gain under LINE_GAIN (3%), timing noise, so its
    line stops there (and never sees the 1.0 behind it). The bare kernel (100) is slower, but its line leads to 5 in
    two steps. One beam of the two fastest (tinygrad's rule) would follow 9.9, not the bare kernel's line; here each
    line goes on while it gains more than the noise. (Times made up; nothing compiles or runs.)"""
    kern, s = _made_up_search(monkeypatch)
    b2 = kern(5.0)
    bare, heuristics = kern(100.0, (kern(50.0, (b2,)),)), kern(10.0, (kern(12.0), kern(9.9, (kern(1.0),))))
    rounds, out_of_time = s.rounds([heuristics, bare], 2, 0.0, lambda r: None)
    assert [r.best_s for r in rounds] == [10.0, 9.9, 5.0, 5.0] and rounds[-1].best is b2 and not out_of_time


@pytest.mark.parametrize("behind, waits, ends, rounds", [(20.0, False, 50.0, 3), (20.0, True, 10.0, 6),
                                                          (49.0, True, 49.0, 4)])  # fmt: skip
def test_a_stalled_search_far_from_its_memory_bound_waits_one_round(behind, waits, ends, rounds, monkeypatch):
    """100 -> 50 -> 60: round 2 gains nothing (a plateau), but 60 leads to `behind`, and that to 10. A search whose
    best (50) is above wait_above (compute-bound: far from its bytes' time) goes one more round from round 2's
    fastest; a line goes on from there only past 50 by LINE_GAIN: 20 does (then 10), 49 doesn't (the search ends
    after that round, 49 its best so far). Below wait_above (near the memory bound: little to gain) it stops at 50.
    (Made-up times: nothing compiles or runs.)"""
    kern, s = _made_up_search(monkeypatch)
    bare = kern(100.0, (kern(50.0, (kern(60.0, (kern(behind, (kern(10.0),)),)),)),))
    s.wait_above = 40.0 if waits else 60.0
    went = s.rounds([bare], 1, 0.0, lambda r: None)[0]
    assert went[-1].best_s == ends and len(went) == rounds


def test_a_line_is_judged_against_its_parent_timed_again_in_the_same_round(monkeypatch):
    """Round 1 finds 50 (from 100). Then another job takes a core: round 2's children read 60, slower than 50 as
    measured then, but their parent, timed again in turn with the fastest of them, reads 80: they gain on it, and
    the line goes on to the 30 behind them. (Judged against 50, the search stopped at round 2.) Times made up;
    nothing compiles or runs."""
    base, fake = Kernel(*elementwise_ast(64)), {}
    busy = {"now": False}

    def kern(t: float, children=(), busy_t: float | None = None) -> Kernel:
        k = base.copy()
        fake[id(k)] = (t, list(children), busy_t or t)
        return k

    best = kern(30.0)
    parent = kern(50.0, (kern(60.0, (best,)),), busy_t=80.0)
    bare = kern(100.0, (parent,))
    monkeypatch.setattr(S, "kernel_actions", lambda k: fake[id(k)][1])
    monkeypatch.setattr(S._Search, "fresh", lambda self, ks: ks)
    monkeypatch.setattr(S._Search, "compile", lambda self, ks: ([(k, None) for k in ks], len(ks)))

    def time_all(self, programs, cutoff, again=True):
        busy["now"] = any(fake[id(k)][0] == 60.0 for k, _ in programs)  # round 2 is the busy one
        self.timed += [(fake[id(k)][0], len(self.timed) + i, k, None) for i, (k, _) in enumerate(programs)]
        return self.timed[len(self.timed) - len(programs) :]

    monkeypatch.setattr(S._Search, "time_all", time_all)
    monkeypatch.setattr(S._Search, "time", lambda self, k, prg, *_: fake[id(k)][2 if busy["now"] else 0])
    s = S._Search(base, R.random_inputs(base), {}, time.perf_counter(), None, 0, lambda *a: None)
    rounds, _ = s.rounds([bare], 1, 0.0, lambda r: None)
    assert [r.best_s for r in rounds] == [100.0, 50.0, 50.0, 30.0, 30.0] and rounds[-1].best is best  # then none left


@pytest.mark.parametrize("child_s, passes", [(0.3, 1), (0.6, S.TIMING_PASSES)])
def test_a_child_over_twice_as_fast_as_its_parent_gains_after_one_pass(child_s, passes, monkeypatch):
    """A line's gain times child and parent in turn, TIMING_PASSES launches each; a child that is over twice as fast
    after a pass (more than a bimodal timer's slow mode makes up) gains then, and its slow parent isn't launched
    again; each launch of the parent stops at a probe (_time_candidate) where even that is over twice the child's
    lowest time so far. Made-up times: nothing compiles or runs."""
    base = Kernel(*elementwise_ast(64))
    child, parent = base.copy(), base.copy()
    launches = []

    def launch(self, k, prg, stop_above=math.inf):
        launches.append((k, stop_above))
        return child_s if k is child else 1.0

    monkeypatch.setattr(S._Search, "time", launch)
    s = S._Search(base, R.random_inputs(base), {}, time.perf_counter(), None, 0, lambda *a: None)
    assert s.gains((child_s, 1, child, None), (1.0, 0, parent, None), 0.0)
    assert launches == [(child, math.inf), (parent, 2 * child_s)] * passes


CTRL_C_SCRIPT = """
import os, signal, sys, threading
sys.path.insert(0, {root!r})
import runtime
signal.signal(signal.SIGINT, lambda *_: print("Ctrl-C", flush=True))  # this process lives on: its compiler is tested
compiler = runtime.Compiler()
answered = threading.Event()


def ctrl_c():  # to this process's group, as a terminal's Ctrl-C, again and again: from the compiler's start on
    while not answered.wait(0.02):
        os.killpg(0, signal.SIGINT)


threading.Thread(target=ctrl_c, daemon=True).start()
binary = compiler("__kernel void k(__global float* d) {{ d[0] = 1.0f; }}", "k")
answered.set()
try:
    compiler("__kernel void k(__global float* d) {{ d[0] = undefined; }}", "k")
except runtime.BuildError as e:
    print("refused", "undefined" in str(e))
print("built", len(binary) > 0, compiler.proc.poll() is None, flush=True)
"""


def test_a_ctrl_c_never_reaches_a_compiler_process_and_it_prints_nothing(tmp_path):
    """A terminal's Ctrl-C goes to its whole foreground process group: the search's compiler processes are not in it
    (they printed a KeyboardInterrupt traceback each while they imported, and PoCL failed the build they were in), and
    what the driver says of a build ("1 error generated.") comes back in the build's error, not on the terminal."""
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C_SCRIPT.format(root=ROOT))
    env = {**os.environ, "KERNELPY_CACHE": str(tmp_path)}
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120,
                       start_new_session=True)  # fmt: skip
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "Ctrl-C" in p.stdout and "refused True" in p.stdout and "built True True" in p.stdout, p.stdout


def test_ctrl_c_during_a_search_ends_in_one_line(tmp_path):
    """A terminal's Ctrl-C to a running search (to its process group, once it reports its first round: however slow
    the machine or cold its caches, matmul has rounds to go) ends it with one line and status 130, no traceback."""
    import signal

    p = subprocess.Popen(
        [sys.executable, "-m", "search", "matmul", "--no-cache"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KERNELPY_CACHE": str(tmp_path)},
        start_new_session=True,  # a process group of its own, as a terminal gives a command
    )
    said = ""
    for line in p.stdout:
        said += line
        if line.startswith("  round 0:"):  # the search runs: its compiler processes have answered
            break
    else:
        pytest.fail(f"the search ended before its first round: {said}{p.stderr.read()}")
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=300)  # only a cap: it ends within seconds
    assert p.returncode == 130 and err.strip() == "python -m search: interrupted", err


def test_a_ctrl_c_while_candidates_compile_ends_their_compilers_and_threads(few_actions, own_compilers, monkeypatch):
    """Ctrl-C as a batch of candidates is about to build: the search raises KeyboardInterrupt, its compiler processes
    ended, and a compile thread that goes on to build after that starts no process (one did: it started a new
    compiler and waited for its build), and ends."""
    import _thread

    real, lock, asked = C._compile_batch, threading.Lock(), []

    def ctrl_c_then_build(batch, ones, compiler):
        with lock:
            if not asked:
                asked.append(batch)
                _thread.interrupt_main()  # as a terminal's Ctrl-C does to the main thread
        for _ in range(6000):  # until the search ends its compilers (60 s at most: a cap, not a timing)
            if compiler.ended:
                break
            time.sleep(0.01)
        return real(batch, ones, compiler)

    monkeypatch.setattr(C, "_compile_batch", ctrl_c_then_build)
    k = Kernel(*elementwise_ast(4096))
    with pytest.raises(KeyboardInterrupt):
        S.search(k, *R.random_inputs(k), amt=1, workers=2, cache=False)
    assert asked and own_compilers and all(c.ended for c in own_compilers)
    assert all(c.proc is None or c.proc.poll() is not None for c in own_compilers)  # none started after end()
    for thread in [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]:
        thread.join(60)  # a cap: each ends at once, its compiler ended (one Ctrl-C cut off from the pool ends too)
        assert not thread.is_alive()


def test_a_search_out_of_time_before_timing_anything_says_so_and_exits_cleanly(tmp_path):
    """Not the given kernel back as the search's answer; and the compile threads finish before the program ends
    (one ending under a compile crashed the OpenCL runtime)."""
    p = run_script("-m search", "sum", "--timeout", "0.001", env={"KERNELPY_CACHE": str(tmp_path)})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "python -m search: error: the search timed no kernel: its timeout of 0.001 s ran out first"
    )
    assert len(p.stderr.strip().splitlines()) == 2, p.stderr  # argparse's usage line, then the error


def test_every_test_named_to_run_on_every_device_exists():
    """A name in ON_EVERY_DEVICE that no test has (a renamed test) would quietly run that test on one device only."""
    assert ON_EVERY_DEVICE <= {name for name in globals() if name.startswith("test_")}
