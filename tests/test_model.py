"""Tests of model.py: the estimate that ranks a round's candidates, the cut it makes in search.py, the log of a search
and its offline replay (the mechanism, not how fast anything is: bench.py and tools/replay_search.py measure that)."""

from __future__ import annotations

import json
import math
import os

import pytest

import model
import runtime as R
import search as S
from demo import elementwise_ast, matmul_ast, matvec_ast
from kernel import Kernel, Opt, OptOps, Variable
from tests.common import ROOT
from tools.replay_search import replay

DEV = model.Device(cores=2, lanes=16, hz=3e9, bandwidth=50e9)


def with_opts(ast, *opts: str) -> Kernel:
    k = Kernel(*ast)
    for o in opts:
        k.apply_opt(Opt.parse(o))
    return k


def test_work_items_in_whole_vectors_along_local_dim_0_are_what_the_model_vectorizes():
    """A matmul with 16 work-items along its contiguous output axis (local dim 0) fills the device's 16 lanes: the
    model counts one instruction for 16 of them. 8 there (or 16 along the rows, whose loads of a are a gather: one
    load per lane) it counts slower, as Intel's runtime runs them."""
    mm = matmul_ast(512, 512, 512)
    lanes16, lanes8, rows16 = (with_opts(mm, o) for o in ("LOCAL:1:16", "LOCAL:1:8", "LOCAL:0:16"))
    t16, t8, trows = (model.static_seconds(k, DEV) for k in (lanes16, lanes8, rows16))
    assert t16 * 4 < t8 and t16 < trows


def test_a_register_tile_reuses_loads_until_it_spills():
    """UPCAST:0:8 on a vectorized matmul shares each load of b among 8 outputs (fewer loads a multiply-add); a tile
    of 8x8 outputs holds more values than REGISTERS, and spills."""
    base = with_opts(matmul_ast(512, 512, 512), "LOCAL:1:16")
    tile = with_opts(matmul_ast(512, 512, 512), "LOCAL:1:16", "UPCAST:0:8")
    spilled = with_opts(matmul_ast(512, 512, 512), "LOCAL:1:16", "UPCAST:0:8", "UPCAST:2:8")
    assert model.static_seconds(tile, DEV) < model.static_seconds(base, DEV)
    assert model.static_seconds(spilled, DEV) > model.static_seconds(tile, DEV)


def test_a_memory_bound_kernel_is_bound_by_its_bytes_over_the_bandwidth():
    k = Kernel(*elementwise_ast(1 << 24))  # 192 MiB moved, a few flops a byte
    assert model.footprint(k) == 3 * 4 << 24
    t = model.static_seconds(k, model.Device(bandwidth=1e9, hz=1e12))
    assert t == pytest.approx(model.footprint(k) / 1e9 * math.sqrt(1024 / 4), rel=0.3)  # 1 float a run: sqrt(256)


def test_an_estimate_scales_the_parents_measured_time_by_the_models_ratio():
    parent = Kernel(*matvec_ast(256, 256))
    child = parent.copy()
    child.apply_opt(Opt(OptOps.UPCAST, 0, 8))
    ratio = model.static_seconds(child, DEV) / model.static_seconds(parent, DEV)
    assert model.estimate(child, parent, 2.0, DEV) == pytest.approx(2.0 * ratio)


LOGS = os.path.join(ROOT, "testdata", "search_logs.jsonl.gz")


def logged_searches() -> list[dict]:
    return list(model.read_log(LOGS).values())


def test_the_cut_never_loses_the_measured_best_on_the_logged_searches():
    """Each search of testdata/search_logs.jsonl.gz (bench.py's workloads, two sittings, every candidate built and
    timed) replayed through search.py's own rounds with its cut at TOP_K: it builds at most 40% of the candidates in
    all, and every search reaches a kernel within 2% of the best its log holds (the timing's noise)."""
    built = everything = 0
    for entry in logged_searches():
        cut = replay(entry, S.TOP_K)
        assert cut["best_s"] <= 1.02 * cut["logged_best_s"], (entry["start"]["kernel"].full_shape, cut)
        built += cut["built"]
        everything += sum(c["built"] for r in entry["rounds"] for c in r)  # as a replay without the cut (below)
    assert everything > 1000 and built <= 0.4 * everything, (built, everything)


def test_a_replay_without_the_cut_builds_what_the_search_built():
    """The log's own counts: replayed with every candidate built, a search builds and times what its log says."""
    entry = logged_searches()[0]
    logged_built = sum(c["built"] for r in entry["rounds"] for c in r)
    full = replay(entry, None)
    assert full["built"] == logged_built > 100 and full["unknown"] == 0 and full["best_s"] == full["logged_best_s"]


# the mechanisms below run searches on the device
@pytest.mark.usefixtures("device", "cache_dir")
def test_a_round_builds_each_parents_best_candidates_by_the_estimate(monkeypatch):
    """With top_k=2 and one parent, round 1 builds the two candidates the (here: fixed) estimate ranks first, and
    counts the rest as cut; top_k=None builds every one."""
    order = ["LOCAL:0:16", "UPCAST:0:4", "LOCAL:0:4", "UPCAST:0:2"]  # the estimate's ranking, best first
    monkeypatch.setattr(S, "ACTIONS", [Opt.parse(o) for o in order[::-1]])
    monkeypatch.setattr(S, "estimate", lambda k, parent, t, dev: order.index(str(k.applied_opts[-1])))
    timed, real = [], S._time_candidate
    monkeypatch.setattr(S, "_time_candidate", lambda k, *a, **kw: timed.append(model.opts_text(k)) or real(k, *a, **kw))
    k = Kernel(*elementwise_ast(1 << 16))
    for top_k, built in ((2, order[:2]), (None, order)):
        timed.clear()
        r = S.search(k, *R.random_inputs(k), amt=1, workers=0, cache=False, from_heuristics=False, top_k=top_k)
        assert sorted({t for t in timed if t.count(":") == 2}) == sorted(built)  # round 1: one opt each
        assert (r.rounds[1].compiled, r.rounds[1].unbuilt) == (len(built), 4 - len(built))


@pytest.mark.usefixtures("device", "cache_dir")
def test_a_search_logs_every_candidate_and_time_and_replays_to_its_own_best(tmp_path):
    """search(..., log=FILE): a first line with the starting kernel and settings, a line per candidate and round
    (its opts, estimate, program and time: none where it wasn't built), one per line and round with the times of its
    fastest kernel and their parent timed again, a last line with the answer; replayed offline with every candidate
    built, the log gives back the best time the search measured."""
    path = str(tmp_path / "search.jsonl")
    k = Kernel(*matvec_ast(256, 256))
    result = S.search(k, *R.random_inputs(k), workers=0, cache=False, top_k=None, log=path)
    lines = [json.loads(x) for x in open(path)]
    assert "kernel" in lines[0] and lines[0]["top_k"] is None and lines[-1]["answer"] == " ".join(
        map(str, result.kernel.applied_opts)
    )
    candidates, gains = [x for x in lines[1:-1] if "opts" in x], [x for x in lines[1:-1] if "gain" in x]
    assert len(candidates) == sum(r.candidates for r in result.rounds) == len(lines) - 2 - len(gains)
    assert gains and all(len(x["gain"]) == len(x["times"]) == 2 for x in gains)  # a round's best and its parent
    timed = [c for c in candidates if c["time_s"] is not None]
    assert len(timed) == sum(r.timed for r in result.rounds) and all(c["built"] and c["program"] for c in timed)
    assert all(c["estimate_s"] > 0 for c in candidates if c["round"] > 0)
    (entry,) = model.read_log(path).values()
    assert entry["answer"]["time_s"] == result.time_s and entry["start"]["kernel"].full_shape == k.full_shape
    again = replay(entry, None)
    assert again["best_s"] == min(c["time_s"] for c in timed) and again["unknown"] == 0


@pytest.mark.usefixtures("device")
def test_the_device_limits_are_measured_once_a_process():
    """fma_peak() and bandwidth(nbytes): positive, named by what reached them, and measured once per process."""
    peak, form = model.fma_peak(runs=1, repeats=1)
    (bw, kind), again = model.bandwidth(1 << 20, runs=1), model.bandwidth(1 << 20, runs=1)
    assert peak > 0 and form.startswith("float") and bw > 0 and kind in model.STREAMS and again == (bw, kind)
    assert model.fma_peak(runs=1, repeats=1) == (peak, form)


N = Variable("n", 1, 2**31 - 1)  # a + b over any length an int argument holds


def test_the_footprint_of_a_symbolic_kernel_is_its_bytes_at_the_values_given():
    """Not at every Variable's maximum (3 buffers of 8 GiB for a + b): at the values searched, and none without."""
    k = Kernel(*elementwise_ast(N))
    assert model.footprint(k, {"n": 4096}) == 3 * 4 * 4096 and model.footprint(k, {N: 1}) == 3 * 4
    with pytest.raises(ValueError, match="no value for the variable n"):
        model.footprint(k)


@pytest.mark.usefixtures("device", "cache_dir")
def test_a_search_measures_the_model_at_the_footprint_of_the_values_searched(monkeypatch):
    asked = []
    monkeypatch.setattr(S, "measured_device", lambda nbytes: asked.append(nbytes) or DEV)
    k = Kernel(*elementwise_ast(N))
    inputs = R.random_inputs(k, var_vals={"n": 4096})
    result = S.search(k, *inputs, amt=1, workers=0, var_vals={"n": 4096})
    assert asked == [3 * 4 * 4096]
    R.verify(result.kernel, *inputs, var_vals={"n": 4096})


@pytest.mark.usefixtures("device")
def test_the_bandwidth_is_measured_within_the_devices_limits(monkeypatch):
    """Asked for 24 GiB (a + b at its largest), the streams allocate within CL_DEVICE_MAX_MEM_ALLOC_SIZE and a
    quarter of CL_DEVICE_GLOBAL_MEM_SIZE (here made 1 MiB and 8 MiB); the model asks for 1 GiB at most
    (MEASURED_MOST)."""
    caps = {**R.device_caps(), "CL_DEVICE_MAX_MEM_ALLOC_SIZE": 1 << 20, "CL_DEVICE_GLOBAL_MEM_SIZE": 8 << 20}
    monkeypatch.setattr(R, "device_caps", lambda: caps)
    monkeypatch.setattr(model, "_measured", {})
    sizes, real = [], model.cl.Buffer
    monkeypatch.setattr(model.cl, "Buffer", lambda ctx, flags, size: sizes.append(size) or real(ctx, flags, size))
    bw, kind = model.bandwidth(3 * 4 * (2**31 - 1), runs=1)
    assert bw > 0 and kind in model.STREAMS and sizes
    assert max(sizes) <= 1 << 20 and sum(sizes) <= (8 << 20) // 4  # every stream's buffers, allocated at once
    monkeypatch.setattr(model, "fma_peak", lambda: (1e11, "given"))
    monkeypatch.setattr(model, "bandwidth", lambda nbytes, kinds: sizes.append(nbytes) or (1e10, "triad"))
    model.measured_device(3 * 4 * (2**31 - 1))
    assert sizes[-1] == model.MEASURED_MOST == 1 << 30
