"""Tests of runtime.py's beam search (the mechanism, not its speed: speed is bench.py's business) and of bench.py.

Small kernels and amt=1 keep them fast; most compile in this process (workers=0), one runs the worker processes."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import bench
import runtime as R
from kernel import TARGETS, Kernel, Opt, OptOps, attention_ast, elementwise_ast, matmul_ast, prod, sum_ast


pytestmark = pytest.mark.usefixtures("device")  # conftest.py: skipped, saying why, without an OpenCL device


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test searches with its own empty cache, never the user's."""
    monkeypatch.setenv("KERNELPY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def few_actions(monkeypatch):
    """A handful of tinygrad's actions: the same search, a few candidates per round (each costs a compile)."""
    monkeypatch.setattr(
        R,
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
    result = R.search(k, *inputs, amt=1, workers=0)
    R.verify(result.kernel, *inputs)
    assert result.kernel is not k and result.kernel.applied_opts and np.isfinite(result.time_s)
    assert len(result.rounds) >= 2 and sum(r.timed for r in result.rounds) > 2
    replay = Kernel(*k.ast)
    for opt in result.kernel.applied_opts:
        replay.apply_opt(opt)
    assert _state(replay) == _state(result.kernel)
    assert R.render(replay).src == R.render(result.kernel).src


def test_search_never_changes_the_input_kernel(few_actions):
    k = Kernel(*matmul_ast(16, 16, 16))
    k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
    before = _state(k)
    inputs = R.random_inputs(k)
    found = R.beam_search(k, *inputs, amt=1, workers=0, timeout=20)
    assert _state(k) == before
    assert found.applied_opts[:1] == [Opt(OptOps.UPCAST, 0, 2)]  # it starts from k as given


def test_second_search_hits_the_disk_cache_and_cache_false_bypasses_it(few_actions, cache_dir):
    k = Kernel(*elementwise_ast(2048))
    inputs = R.random_inputs(k)
    first = R.search(k, *inputs, amt=1)  # worker processes compile: the default
    assert not first.cached and list(cache_dir.glob("beam/*.json"))
    start = time.perf_counter()
    second = R.search(k, *inputs, amt=1)
    assert second.cached and second.rounds == [] and time.perf_counter() - start < 1
    assert second.kernel.applied_opts == first.kernel.applied_opts and _state(k)[0] == []
    again = R.search(k, *inputs, amt=1, cache=False, workers=0)
    assert not again.cached and again.rounds
    other_amt = R.search(k, *inputs, amt=2, workers=0)  # amt is part of the key
    assert not other_amt.cached


def test_time_budget_returns_the_best_so_far(cache_dir):
    k = Kernel(*matmul_ast(128, 128, 128))
    inputs = R.random_inputs(k)
    rounds = []

    def slow_round(r):  # the budget runs out during round 0, however fast the machine compiles and times
        rounds.append(r)
        time.sleep(0.6)

    start = time.perf_counter()
    result = R.search(k, *inputs, amt=1, workers=0, timeout=0.5, on_round=slow_round)
    # the budget is checked between candidates; one compile and the final verification may follow it
    assert time.perf_counter() - start < 0.5 + 0.6 * len(rounds) + 4
    assert len(rounds) <= 2, "the search went on past its budget"
    R.verify(result.kernel, *inputs)
    assert not list(cache_dir.glob("beam/*.json")), "a search cut short is not remembered"


def test_a_candidate_that_fails_to_build_is_dropped_and_counted(few_actions, monkeypatch):
    real_build = R.build

    def build_without_float4(src, name):
        if "float4" in src:
            raise R.BuildError(f"OpenCL build of {name} failed (the test refuses float4)")
        return real_build(src, name)

    monkeypatch.setattr(R, "build", build_without_float4)
    k = Kernel(*elementwise_ast(4096))
    inputs = R.random_inputs(k)
    result = R.search(k, *inputs, amt=1, workers=0, cache=False)
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

    real_time = R._time_candidate

    def given_kernel_slowest(kern, *args, **kwargs):  # so that every other kernel is tried first
        t = real_time(kern, *args, **kwargs)
        return t if kern.applied_opts else 1.0

    monkeypatch.setattr(R, "run", run_wrong_with_any_opt)
    monkeypatch.setattr(R, "_time_candidate", given_kernel_slowest)
    result = R.search(k, *inputs, amt=1, workers=0, cache=False)
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
        ({"max_global_size": 0}, "max_global_size"),
    ],
)
def test_bad_arguments_raise_before_anything_compiles(kwargs, message, monkeypatch):
    monkeypatch.setattr(R, "build", lambda *a: pytest.fail("compiled despite bad arguments"))
    k = Kernel(*elementwise_ast(256))
    with pytest.raises(R.SearchError, match=message):
        R.search(k, *R.random_inputs(k), **kwargs)


def test_inputs_that_dont_match_the_kernel_raise_before_anything_compiles(monkeypatch):
    monkeypatch.setattr(R, "build", lambda *a: pytest.fail("compiled despite bad inputs"))
    k = Kernel(*elementwise_ast(256))
    a, b = R.random_inputs(k)
    with pytest.raises(R.SearchError, match="expected 2 input arrays"):
        R.beam_search(k, a)
    with pytest.raises(R.SearchError, match="dtype"):
        R.beam_search(k, a, b.astype(np.float64))
    with pytest.raises(R.SearchError, match="elements"):
        R.beam_search(k, a, b[:10])
    with pytest.raises(R.SearchError, match="Kernel"):
        R.beam_search(k.ast, a, b)
    with pytest.raises(ValueError, match="no demo kernel 'nope'"):
        R.search_demo("nope")


def test_actions_are_one_opt_more_and_stay_within_the_limits():
    k = Kernel(*matmul_ast(64, 64, 64))
    kernels = R.kernel_actions(k)
    assert kernels and all(len(x.applied_opts) == 1 and x.applied_opts[0] in R.ACTIONS for x in kernels)
    for x in kernels:
        shape = list(zip(x.full_shape, x.colors()))
        assert np.prod([s for s, c in shape if c in ("magenta", "yellow")]) <= R.search_limits()[0]
    assert k.applied_opts == []


def test_test_global_size_halves_dims_above_16_and_scales_time():
    assert R._test_global_size([256, 32, 8], 65536) == ([256, 32, 8], 1)
    size, factor = R._test_global_size([4096, 64, 8], 65536)
    assert np.prod(size) <= 65536 and size[2] == 8 and factor * np.prod(size) == 4096 * 64 * 8


def test_cli_search_prints_rounds_and_the_comparison(few_actions, capsys):
    assert R.main(["search", "sum_axis1", "--beam", "1", "--no-cache", "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"round 0: +2 candidates +2 compiled", out) and re.search(r"round 1: +\d+ candidates", out)
    assert re.search(r"hand-coded +[0-9.]+ ms", out) and re.search(r"searched +[0-9.]+ ms", out)
    assert re.search(r"runoff: +\d+ fastest timed again", out) and re.search(r"speedup [0-9.]+x; search [0-9.]+ s", out)
    assert "\r" not in out and "\x1b" not in out  # no progress display, no colours into a pipe


@pytest.mark.parametrize(
    "argv, message",
    [(["search", "sum", "--beam", "0"], "--beam must be at least 1"), (["search", "nope"], "invalid choice")],
)
def test_cli_search_rejects_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        R.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_bench_prints_a_row_per_variant(capsys, tmp_path):
    """With a tinygrad_perf.sh file, the hand-coded row also shows tinygrad's time and the ratio."""
    measured = tmp_path / "tinygrad_perf.json"
    measured.write_text('{"sum_axis1_4096": {"tinygrad_s": 0.002}}')
    bench.bench(["sum axis 1 4096x4096"], runs=1, tinygrad=str(measured))
    out = capsys.readouterr().out
    for variant in ("unoptimized", "hand-coded", "numpy"):
        assert re.search(rf"sum axis 1 4096x4096 +{variant} +[0-9.]+ ms +[0-9.]+ +[0-9.]+", out)
    assert re.search(r"hand-coded .* 2\.00 ms +[0-9.]+$", out, re.M)
    assert re.search(r"optimizer: .* [0-9.]+ ms per kernel \(168 corpus kernels", out)


def test_runtime_bench_is_bench_py(capsys):
    with pytest.raises(SystemExit) as e:
        R.main(["bench", "--help"])
    assert e.value.code == 0 and "usage: python runtime.py bench" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["no such benchmark"])
    assert "unknown benchmark 'no such benchmark'" in capsys.readouterr().err


def test_timing_stops_early_once_a_kernel_is_clearly_slower(monkeypatch):
    k = Kernel(*elementwise_ast(1 << 20))  # no opts: 2**20 work-groups, more than a probe launches
    inputs, limits = R.random_inputs(k), R.device_limits()
    prg = R.render(k, limits)
    sizes = []
    real_launch = R._Launch.launch

    def counting_launch(self):
        sizes.append(prod(self.global_size))
        return real_launch(self)

    monkeypatch.setattr(R._Launch, "launch", counting_launch)
    assert R._time_candidate(k, prg, inputs, {}, stop_above=0.0) > 0
    assert sizes == [R.PROBE_GLOBAL_SIZE]  # one partial launch said enough
    sizes.clear()
    R._time_candidate(k, prg, inputs, {}, stop_above=1e9)
    assert sizes == [R.PROBE_GLOBAL_SIZE] + [1 << 20] * 3  # the probe, then the best of three full launches
    sizes.clear()
    R._time_candidate(k, prg, inputs, {}, stop_above=1e9, max_global_size=1 << 16)
    assert sizes == [1 << 16] * 3  # tinygrad's test size: every launch partial, scaled up


def test_a_symbolic_kernel_is_searched_at_the_values_given(few_actions):
    k = Kernel(*attention_ast(16, 64))
    inputs = R.random_inputs(k, var_vals={"i": 40})
    with pytest.raises(R.SearchError, match="no value for the variable i"):
        R.search(k, *inputs, amt=1, workers=0)
    result = R.search(k, *inputs, amt=1, workers=0, var_vals={"i": 40})
    for n in (1, 40, 64):  # one program serves every length: the searched one too
        R.verify(result.kernel, *R.random_inputs(k, var_vals={"i": n}), var_vals={"i": n})


def test_tensor_core_kernels_are_searched(few_actions, monkeypatch):
    monkeypatch.setattr(R, "ACTIONS", R.ACTIONS + [Opt(OptOps.TC, 0, 0)])
    k = Kernel(*matmul_ast(16, 16, 16), opts=TARGETS["metal"])  # rendered with plain multiply-adds on this device
    inputs = R.random_inputs(k)
    result = R.search(k, *inputs, amt=1, workers=0, cache=False)
    assert any(kern.tensor_core for kern in R.kernel_actions(k)) and result.rounds
    R.verify(result.kernel, *inputs)
