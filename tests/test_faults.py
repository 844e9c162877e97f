"""A device's compiler never takes the program down: tests of the helper processes (runtime.Compiler) that build every
kernel the project builds on its own account, driven by a broken compiler simulated on any machine.

KERNELPY_COMPILER_FAULT=KIND:REGEX (runtime.Compiler's docstring) makes the helper processes started under it fail the
builds of the sources REGEX matches, as pip's PoCL 3.0 did on a Zen 4 with AVX-512: its build of the float16 fma()
form aborted the process (in a process that also held Intel's runtime: "LLVM ERROR: Cannot select ... fma"), or
succeeded without the kernel in the program (then its LLVM aborted the process at exit). Each test names the failure
it simulates and drives the real path that meets it: the FMA forms, the streams, the device probe, the search's
compiles, bench.py's measuring, a user's kernel."""

from __future__ import annotations

import dataclasses
import io
import re
import signal
from collections import OrderedDict

import pytest

import bench
import search.compilers as C
from search import cost
import runtime as R
import search.__main__ as search_cli
import search.beam as S
from demo import elementwise_ast, sum_ast
from kernel import Kernel, Opt, OptOps
from tests.common import run_script

FLOAT16_FMA = r"float16.*fma\("  # the form pip's PoCL 3.0 broke on a Zen 4: float16 fma(), not a*x+b
ABORTED = f"the compiler's process ended (exit status -{signal.SIGABRT}: {signal.strsignal(signal.SIGABRT)})"


@pytest.fixture
def fault(device, monkeypatch):
    """fault(KIND, REGEX) sets KERNELPY_COMPILER_FAULT for the helper processes the test starts: fresh ones (ended
    after it), with nothing built or measured before it in this process (the runtime's program cache and cost.py's
    measurements empty), so every build of the test goes through them."""
    own, pool = {}, []
    monkeypatch.setattr(R, "_own", own)
    monkeypatch.setattr(C, "_compilers", pool)
    monkeypatch.setattr(device, "programs", OrderedDict())
    monkeypatch.setattr(cost, "_measured", {})
    monkeypatch.setattr(cost, "FMA_ITERS", 8)  # a short FMA kernel: the forms' builds are the point
    yield lambda kind, regex: monkeypatch.setenv("KERNELPY_COMPILER_FAULT", f"{kind}:{regex}")
    for compiler in [*own.values(), *pool]:
        compiler.end()


def fma_forms_measured(monkeypatch) -> list:
    """cost.fma_peak() measured once, and the kernels it launched (one median a form)."""
    launches, real = [], cost.median_launch
    monkeypatch.setattr(cost, "median_launch", lambda kern, *a, **kw: launches.append(kern) or real(kern, *a, **kw))
    peak, form = cost.fma_peak(runs=1, repeats=1)
    assert peak > 0 and form in {f"float{w} {f}" for w in cost.FMA_WIDTHS for f in cost.FMA_FORMS} - {"float16 fma()"}
    return launches


def test_a_build_that_aborts_its_process_is_a_failed_build_and_the_fma_peak_goes_on_without_that_form(
    fault, monkeypatch
):
    fault("abort", FLOAT16_FMA)
    assert len(fma_forms_measured(monkeypatch)) == 5  # the other five forms
    assert cost.skipped() == {"float16 fma()": f"OpenCL build of fma_peak failed: {ABORTED}"}


def test_a_program_built_without_its_kernel_is_a_failed_build_and_the_fma_peak_goes_on_without_that_form(
    fault, monkeypatch
):
    fault("no-kernel", FLOAT16_FMA)
    assert len(fma_forms_measured(monkeypatch)) == 5
    why = "OpenCL build of fma_peak failed: the program built holds no kernel fma_peak"
    assert cost.skipped() == {"float16 fma()": why}


def test_a_build_that_hangs_is_killed_and_the_fma_peak_goes_on_without_that_form(fault, monkeypatch):
    monkeypatch.setattr(R, "COMPILE_TIMEOUT", 3)  # far more than the forms take to build
    fault("hang", FLOAT16_FMA)
    assert len(fma_forms_measured(monkeypatch)) == 5
    why = "OpenCL build of fma_peak failed: no answer from the compiler in 3 s"
    assert cost.skipped() == {"float16 fma()": why}


def test_the_fma_forms_and_the_calibrations_kernels_build_as_one_program_each_and_a_failure_as_each_alone(
    fault, monkeypatch
):
    """Without a fault the six FMA forms are one build, and the calibration's seven kernels another (each build of a
    program costs the compiler about as much as its kernels); with the float16 fma() form aborting, the forms' build
    fails and each form is built alone: five measured, that one named."""
    built, real = [], R.Compiler.__call__
    monkeypatch.setattr(R.Compiler, "__call__", lambda self, src, name: built.append(name) or real(self, src, name))
    assert len(fma_forms_measured(monkeypatch)) == 6 and len(built) == 1
    assert set(cost.calibration(2e9, runs=1)) == {"group_cycles", "registers"} and len(built) == 2
    for compiler in R._own.values():  # then as the fault fixture starts: a fresh helper, nothing built or measured
        compiler.end()
    R._own.clear(), R.get_device().programs.clear(), cost._measured.clear()
    fault("abort", FLOAT16_FMA)
    assert len(fma_forms_measured(monkeypatch)) == 5 and len(built) == 2 + 1 + 6  # the whole, then each alone
    assert set(cost.skipped()) == {"float16 fma()"}


def test_a_stream_built_without_its_kernel_is_left_out_of_the_bandwidth_and_none_at_all_is_a_build_error(
    fault, monkeypatch
):
    """The copy stream builds without its kernel: the bandwidth is the other streams', and the copy stream alone is a
    BuildError naming why; a form that failed is never built again (a compiler that aborts costs a process each)."""
    fault("no-kernel", r"void copy\(")
    built, real = [], R.Compiler.__call__
    monkeypatch.setattr(R.Compiler, "__call__", lambda self, src, name: built.append(name) or real(self, src, name))
    _, kind = cost.bandwidth(1 << 20, runs=1)
    assert kind in ("triad", "read", "add")
    assert cost.skipped() == {"the copy stream": "OpenCL build of copy failed: the program built holds no kernel copy"}
    with pytest.raises(R.BuildError, match=r"^no stream builds on .* \(the copy stream: OpenCL build of copy failed"):
        cost.bandwidth(1 << 20, ("copy",), runs=1)
    assert built.count("copy") == 1


def test_a_calibration_kernel_that_doesnt_build_leaves_its_constant_at_the_default(fault):
    """The work-group kernel builds without its kernel: the calibration measures the registers alone, and the
    DeviceModel keeps the default work-group start; skipped() says why."""
    fault("no-kernel", r"out\[get_global_id\(0\)\] = 1\.0f")  # the work-group kernel's store
    assert set(found := cost.calibration(2e9, runs=1)) == {"registers"} and found["registers"] in cost.TILE_CHAINS
    why = "OpenCL build of groups failed: the program built holds no kernel groups"
    assert cost.skipped() == {"the work-group kernel": why}
    assert cost.DeviceModel(**found).group_cycles == cost.GROUP_CYCLES


def test_a_probe_that_aborts_its_process_passes_the_device_over_and_says_why(fault, monkeypatch):
    """Every device's probe aborts its helper process: this process lives on, no device works, and the error names
    each device with the failure."""
    fault("abort", r"void probe\(")
    monkeypatch.setattr(R, "_device", None)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.delenv("KERNELPY_DEVICE", raising=False)
    assert list(R.working_devices()) == []
    with pytest.raises(R.NoDeviceError, match="none of them compiles a kernel") as e:
        R.get_device()
    for d in (d for p in R.cl.get_platforms() for d in p.get_devices()):
        assert f"{d.name.strip()} ({ABORTED})" in str(e.value)


def test_a_users_kernel_whose_build_aborts_is_a_build_error_and_the_program_goes_on(fault):
    """run, verify and time_kernel build a kernel first in the device's helper process: a compiler that aborts on it
    is a BuildError saying so (this process lives on, as it didn't when such a build ran here), and the next kernel
    builds and verifies."""
    fault("abort", r"void E_")  # the elementwise kernels
    k = Kernel(*elementwise_ast(64))
    inputs = R.random_inputs(k)
    for fn in (R.run, R.verify, R.time_kernel):
        with pytest.raises(R.BuildError, match=rf"^OpenCL build of E_\w+ failed: {re.escape(ABORTED)}"):
            fn(k, *inputs)
    other = Kernel(*sum_ast((8, 8), (1,)))
    R.verify(other, *R.random_inputs(other))


def few_actions(monkeypatch) -> None:
    monkeypatch.setattr(S, "ACTIONS", [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.UPCAST, 0, 2)])


@pytest.mark.parametrize("kind, why", [("abort", ABORTED), ("no-kernel", "the program built holds no kernel")])
def test_a_candidate_whose_build_aborts_or_lacks_its_kernel_is_dropped_and_the_search_goes_on(
    kind, why, fault, monkeypatch
):
    """The search's compiles (in two helper processes) meet a compiler that fails on every float4 kernel: those
    candidates are dropped saying why, the others are timed, and the answer verifies."""
    few_actions(monkeypatch)
    fault(kind, "float4")
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    result = S.search(k, *inputs, amt=1, workers=2, cache=False, top_k=None)
    assert any("BuildError: OpenCL build of E_" in d and why in d for d in result.why_dropped), result.why_dropped
    assert sum(r.timed for r in result.rounds) >= 2 and "float4" not in R.render(result.kernel).src
    R.verify(result.kernel, *inputs)


def test_bench_goes_on_past_builds_that_abort_and_names_what_it_skipped(fault, monkeypatch):
    """bench.py's measuring: the float16 fma() form and the elementwise workload's kernels abort their compiler; the
    limits are measured without the form, the workload's row is skipped saying why, the next workload runs, and the
    end names the form."""
    fault("abort", rf"{FLOAT16_FMA}|void E_")
    monkeypatch.setattr(bench, "STREAM_FLOATS", 1 << 16)
    monkeypatch.setattr(bench, "last_level_cache", lambda: 1 << 18)
    monkeypatch.setattr(bench, "BENCHMARKS", {
        "add 16M": (lambda: [elementwise_ast(4096)], 4096, 3 * 4 * 4096, lambda a, b: a + b),
        "sum axis 1 4096x4096": (lambda: [sum_ast((64, 64), (1,))], 64 * 64, 4 * (64 * 64 + 64), lambda a: a.sum()),
    })  # fmt: skip
    out = io.StringIO()
    results = bench.bench(runs=1, out=out)
    said = out.getvalue()
    assert list(results) == ["sum axis 1 4096x4096"] and "float16 fma()" not in said.split("optimizer:")[0]
    assert re.search(rf"^add 16M +skipped: OpenCL build of E_\w+ failed: {re.escape(ABORTED)}$", said, re.M), said
    assert re.search(r"^sum axis 1 4096x4096 +hand-coded +[0-9.]+ ms", said, re.M), said
    skipped = f"not built, so not measured: float16 fma() (OpenCL build of fma_peak failed: {ABORTED})"
    assert said.rstrip().endswith(skipped), said


def test_bench_skips_a_row_whose_cached_search_answer_aborts_its_build(fault, monkeypatch):
    """A search answered from its cache built nothing in this process: bench.py builds that kernel first too, and a
    build that aborts skips the row, saying why, instead of ending bench.py in its timing."""
    searched = Kernel(*sum_ast((64, 64), (1,)))
    searched.apply_opt(Opt(OptOps.UNROLL, 0, 8))  # r_64_8_8: neither the bare kernel nor the hand-coded one
    fault("abort", r"void r_64_8_8\(")
    monkeypatch.setattr(bench, "search", lambda k, *a, **kw: S.SearchResult(searched, 1e-3, [], 0, True, 0.0, []))
    monkeypatch.setattr(bench, "BENCHMARKS", {
        "sum axis 1 4096x4096": (lambda: [sum_ast((64, 64), (1,))], 64 * 64, 4 * (64 * 64 + 64), lambda a: a.sum()),
    })  # fmt: skip
    out = io.StringIO()
    assert bench.bench(runs=1, out=out, search_amt=1, limits=bench.Limits(1e11, 1e10, "given")) == {}
    said = out.getvalue()
    row = rf"^sum axis 1 4096x4096 +skipped: OpenCL build of r_64_8_8 failed: {re.escape(ABORTED)}$"
    assert re.search(row, said, re.M) and not re.search(r"^sum axis 1 4096x4096 +searched", said, re.M), said


@pytest.mark.usefixtures("device")
def test_python_search_py_goes_on_past_an_fma_form_whose_build_aborts_and_says_so(tmp_path):
    """The command line whole, in a process of its own: it ends well, and says what the model measured without."""
    env = {"KERNELPY_CACHE": str(tmp_path), "KERNELPY_COMPILER_FAULT": f"abort:{FLOAT16_FMA}"}
    p = run_script("-m search", "sum", "--no-cache", env=env)
    assert p.returncode == 0, p.stderr
    said = " ".join(p.stdout.split())  # as one line, however the lines were fit to a terminal
    assert f"not built, so not measured: float16 fma() (OpenCL build of fma_peak failed: {ABORTED})" in said
    assert "verified" in said


def test_python_search_py_says_a_compared_kernel_whose_build_aborts_wasnt_built_and_goes_on(fault, monkeypatch, capsys):
    """The hand-coded kernel (a grouped reduce: the only one with __local memory here) aborts its compiler: the search
    drops it as a candidate, and the comparison says it wasn't built instead of timing it, with no speedup."""
    few_actions(monkeypatch)
    fault("abort", r"__local float")
    assert search_cli.main(["sum_axis1", "--beam", "1", "--no-cache"]) == 0
    said = " ".join(capsys.readouterr().out.split())  # as one line, however the lines were fit to a terminal
    assert re.search(rf"hand-coded not built: OpenCL build of r_\w+ failed: {re.escape(ABORTED)}", said), said
    assert re.search(r"searched +[0-9.]+ ms", said) and "speedup" not in said and "; verified" in said


def test_a_users_kernel_whose_program_lacks_it_is_a_build_error_in_run_and_verify(device, monkeypatch):
    """A user's kernel builds in this process: where the compiler builds its program without the kernel (here: its
    source with the kernel made a plain function), run and verify raise BuildError saying so, never AttributeError."""
    monkeypatch.setattr(device, "programs", OrderedDict())
    real = R.render
    without_kernel = lambda *a: dataclasses.replace(prg := real(*a), src=prg.src.replace("__kernel ", ""))  # noqa: E731
    monkeypatch.setattr(R, "render", without_kernel)
    k = Kernel(*elementwise_ast(64))
    inputs = R.random_inputs(k)
    for check in (R.run, R.verify):
        with pytest.raises(R.BuildError, match=r"^OpenCL build of E_\w+ failed: the program built holds no kernel E_"):
            check(k, *inputs)


def test_a_fault_of_no_such_kind_fails_each_build_naming_the_knob(fault):
    fault("explode", "fma")
    with pytest.raises(R.BuildError, match=r"KERNELPY_COMPILER_FAULT='explode:fma': no fault 'explode'"):
        R.build("__kernel void fma_k(__global float* x) { x[0] = fma(1.0f, 2.0f, 3.0f); }", "fma_k", R.own())
