"""Tests of bench.py's mechanism, not of speed (speed is what bench.py prints): the roofline arithmetic, the loop over
devices, tinygrad's files (in the form tools/tinygrad_times.py writes them), the side-by-side timing and the tables.

The suite's workloads are replaced by tiny ones (TINY) wherever a benchmark runs, and the device's limits are given
where they aren't the point: no full-size benchmark runs here."""

from __future__ import annotations

import ast as pyast
import io
import json
import os
import re
import subprocess
import sys

import pytest

import bench
import search.__main__ as search_cli
import search.beam as S
from search import cost
from kernel import BinaryOps, Kernel, Opt, OptOps, ShapeTracker
from runtime import random_inputs, time_kernel
from demo import alu, elementwise_ast, load, store, sum_ast
from tests.common import ROOT

# what launches kernels of bench.py's own (the device's limits, then the suite's path end to end) runs on each working
# device (conftest.py); the rest, bench.py's tables, files and device loop, on the first
ON_EVERY_DEVICE = {
    "test_the_device_limits_are_measured_on_the_device",
    "test_bench_runs_from_the_command_line_on_a_device",
}
LIMITS = bench.Limits(1e11, 1e10, "given")  # 100 GFLOP/s, 10 GB/s
# name: (ASTs, flops, bytes, numpy), as BENCHMARKS; named as two of the suite's, so that tinygrad's files may name them
TINY = {
    "sum axis 1 4096x4096": (lambda: [sum_ast((64, 64), (1,))], 64 * 64, 4 * (64 * 64 + 64), lambda a: a.sum()),
    "add 16M": (lambda: [elementwise_ast(4096)], 4096, 3 * 4 * 4096, lambda a, b: a + b),
}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(bench, "BENCHMARKS", TINY)


@pytest.fixture
def few_actions(monkeypatch):
    """A few of tinygrad's actions: a search of a few candidates per round (each costs a compile)."""
    monkeypatch.setattr(S, "ACTIONS", [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.GROUP, 0, 16)])


def lazyop_json(op) -> dict:
    """A LazyOp in the golden corpus's JSON form, as tools/tinygrad_times.py writes tinygrad's (testdata/README.md)."""
    d: dict = {"op": f"{type(op.op).__name__}.{op.op.name}"}
    if op.op.name in ("LOAD", "STORE", "CONST"):
        views = [
            {"shape": list(v.shape), "strides": list(v.strides), "offset": v.offset, "mask": v.mask}
            for v in op.arg.st.views
        ]
        first = {"val": op.arg.val} if op.op.name == "CONST" else {"idx": op.arg.idx}
        d["arg"] = {**first, "dtype": op.arg.dtype.name, "st": views}
    elif op.arg is not None:
        d["arg"] = list(op.arg)
    if op.src:
        d["src"] = [lazyop_json(s) for s in op.src]
    return d


def tinygrad_file(path, device: str, mode: str, workloads: dict[str, list[tuple]], **extra) -> str:
    """A file in tools/tinygrad_times.py's form: workloads {name: [(AST, opts, seconds), ...]} (one per kernel)."""
    out = {}
    for name, kernels in workloads.items():
        entries = [
            {"ast": [lazyop_json(a) for a in ast], "opts": opts, "tinygrad_s": s, "name": f"k{i}"}
            | ({"search_s": 1.5} if mode == "beam" else {})
            for i, (ast, opts, s) in enumerate(kernels)
        ]
        out[name] = {"kernels": entries, "tinygrad_s": sum(e["tinygrad_s"] for e in entries)}
        if mode == "beam":
            out[name]["search_s"] = sum(e["search_s"] for e in entries)
    data = {"source": "tinygrad 0.9.1, tools/tinygrad_times.py", "device": device, "backend": "GPU", "mode": mode}
    path.write_text(json.dumps(data | ({"beam": 2} if mode == "beam" else {}) | {"runs": 10, "workloads": out} | extra))
    return str(path)


def test_the_roofline_fraction_is_the_bound_over_the_time():
    """bound = max(flops / peak, bytes / stream); fraction = bound / time; the larger term is the limit that binds."""
    # 2 GFLOP at 100 GFLOP/s: 20 ms; 1 MB at 10 GB/s: 0.1 ms. In 40 ms: half the bound, compute-bound
    assert bench.roofline(2e9, 1e6, 0.040, LIMITS) == pytest.approx((0.5, "compute"))
    # 16 MFLOP: 0.16 ms; 200 MB: 20 ms. In 25 ms: 0.8 of it, memory-bound
    fraction, binds = bench.roofline(16e6, 200e6, 0.025, LIMITS)
    assert fraction == pytest.approx(0.8) and binds == "memory"


def test_the_device_limits_are_measured_on_the_device(device, monkeypatch):
    """The FMA kernel's every variant builds and runs, the fastest counts; the triad over a small array here; each
    stream a row is bounded by builds and runs at a row's bytes. Every launch fills whole work-groups (PoCL refuses one
    that doesn't: INVALID_WORK_GROUP_SIZE), even where the last-level cache is no round number of floats."""
    launches, median_launch = [], cost.median_launch
    monkeypatch.setattr(cost, "median_launch", lambda *a, **kw: launches.append(a[1:3]) or median_launch(*a, **kw))
    monkeypatch.setattr(cost, "FMA_ITERS", 8)
    monkeypatch.setattr(cost, "_measured", {})
    monkeypatch.setattr(bench, "STREAM_FLOATS", 1 << 16)
    monkeypatch.setattr(bench, "last_level_cache", lambda: 4 * ((1 << 16) + 20))  # 5 float4s past 2**16 floats
    limits = bench.device_limits_measured(runs=1)
    assert limits.peak > 0 and limits.stream > 0 and limits.kinds == tuple(cost.STREAMS)
    assert re.match(r"float(4|8|16) (fma\(\)|a\*x\+b), 8 chains; triad over 3 arrays of 0\.5 MiB", limits.how)
    assert len(launches) == 6 * bench.BEST_OF + 1  # each FMA form BEST_OF times; the triad over memory once
    streams = cost.stream_launches(3 << 20)
    assert [kind for kind, _, _ in streams] == list(cost.STREAMS)
    assert all(0 <= moved - (3 << 20) <= 4 * 3 * 64 for _, moved, _ in streams)  # and the read's sums, a float an item
    assert all(cost.median_launch(*launch, runs=1) > 0 for _, _, launch in streams)
    assert all(local is None or size % local == 0 for size, local in launches), launches


def test_a_row_is_bounded_by_the_streams_that_write_the_share_of_bytes_it_writes():
    """A sum writes almost nothing: the read bounds it; an add writes a third of its bytes: the add and the triad; a
    kernel writing two thirds of its bytes (conv2d's output is twice its input) the copy, nearest."""
    kinds = tuple(cost.STREAMS)
    assert bench.streaming_kinds([sum_ast((4096, 4096), (0,))], kinds) == ["read"]
    assert bench.streaming_kinds(bench.BENCHMARKS["sum 16M"][0](), kinds) == ["read"]
    assert bench.streaming_kinds([elementwise_ast(4096)], kinds) == ["triad", "add"]
    assert bench.streaming_kinds(bench.BENCHMARKS["conv2d 8x32x64x64 k3x64"][0](), kinds) == ["copy"]
    assert bench.streaming_kinds([elementwise_ast(4096)], ("read", "copy")) == ["copy"]  # the nearest of those given


def test_each_stream_moves_runs_of_a_work_group_in_a_row_into_sums_of_their_own():
    """The read stream: 32 loads a step, each 16 floats past the last, each into a sum of its own; the triad: a float
    a work-item a step (the model's, as it was fitted)."""
    read, triad = cost.stream_source("read"), cost.stream_source("triad")
    assert all(f"s{r} += b[i + {16 * r}];" in read for r in range(32)) and "s32" not in read
    assert "out[get_global_id(0)] = s0 + s1 + " in read and "i += 512)" in read
    assert "a[i + 0] = b[i + 0] + 3.0f * c[i + 0];" in triad and "i += 64)" in triad and "out" not in triad


def test_a_rows_memory_bound_is_the_fastest_stream_timed_in_turn_with_its_kernels(device, tiny, monkeypatch):
    """Each round times the row's kernels and its streams in turn; its memory bound is the fastest stream's best
    median, at the row's bytes (a stream moving half of them in 1 ms: 2 ms); a kernel faster than the bound reads
    over 1.00, never clamped."""
    order, name = [], "add 16M"
    nbytes = TINY[name][2]
    stream_s = {"triad": iter([4e-3, 3e-3, 5e-3, 6e-3, 7e-3]), "add": iter([2e-3, 1.5e-3, 1e-3, 1.8e-3, 2e-3])}
    monkeypatch.setattr(cost, "stream_launches", lambda n, kinds: [(k, nbytes // 2, (k,)) for k in kinds])
    monkeypatch.setattr(cost, "median_launch", lambda kind, runs: order.append(kind) or next(stream_s[kind]))
    monkeypatch.setattr(bench, "time_kernel", lambda k, *x, runs, **kw: order.append(kw.get("device_args")) or 1.6e-3)
    monkeypatch.setattr(bench, "SIDE_BY_SIDE_SECONDS", 0.0)  # SIDE_BY_SIDE_ROUNDS rounds
    out = io.StringIO()
    limits = bench.Limits(1e11, 1e10, "given", ("read", "triad", "add"))
    results = bench.bench([name], runs=1, out=out, limits=limits)[name]
    assert order[:2] == [None, None] and order[2] == {}  # the unoptimized kernel (twice), then side by side:
    assert order[3:] == ["triad", "add", {}] * 4 + ["triad", "add"]  # the hand-coded kernel and each stream in turn
    assert results["bandwidth"] == pytest.approx(nbytes / 2e-3) and results["bound_s"] == pytest.approx(2e-3)
    assert results["hand-coded"] == 1.6e-3 and not [v for v in results if "stream" in v]
    row = r"^add 16M +hand-coded +1\.60 ms +[0-9.]+ +[0-9.]+ +1\.25 +memory$"
    assert re.search(row, out.getvalue(), re.M), out.getvalue()


def test_a_compute_bound_rows_peak_is_the_peaks_form_timed_in_turn_with_its_kernels(device, tiny, monkeypatch):
    """A row the header's limits call compute-bound times the FMA form that reached the peak in turn with its kernels,
    at the row's flops; its peak is that form's pace at its best median (the probe at a sitting's start read 231
    GFLOP/s, half the 440 of the next sitting: a row's fraction read 1.95). A memory-bound row keeps the header's
    peak and times no FMA kernel."""
    order, name = [], "sum axis 1 4096x4096"
    flops = TINY[name][1]
    fma_s = iter([4e-3, 2e-3, 3e-3, 5e-3, 6e-3])  # a launch of 1e9 flops: the fastest median, 2 ms, is 500 GFLOP/s
    monkeypatch.setattr(cost, "fma_launches", lambda: {"float8 fma()": (1e9, ("fma",))})
    monkeypatch.setattr(cost, "stream_launches", lambda n, kinds: [])
    monkeypatch.setattr(cost, "median_launch", lambda kind, runs: order.append(kind) or next(fma_s))
    monkeypatch.setattr(bench, "time_kernel", lambda k, *x, runs, **kw: order.append(kw.get("device_args")) or 1e-8)
    monkeypatch.setattr(bench, "SIDE_BY_SIDE_SECONDS", 0.0)  # SIDE_BY_SIDE_ROUNDS rounds
    out = io.StringIO()
    compute_bound = bench.Limits(1e3, 1e15, "given", (), "float8 fma()")  # the header's: compute binds every row
    results = bench.bench([name], runs=1, out=out, limits=compute_bound)[name]
    assert order[2:] == [{}, "fma"] * 5  # after the unoptimized kernel, the hand-coded one and the FMA form in turn
    assert results["peak"] == pytest.approx(500e9) and results["binds"] == "compute"
    assert results["bound_s"] == pytest.approx(flops / 500e9)
    assert "a compute-bound row's peak: float8 fma(), at its flops, in turn" in out.getvalue()
    order.clear()
    results = bench.bench([name], runs=1, out=io.StringIO(), limits=compute_bound._replace(peak=1e20))[name]
    assert "fma" not in order and results["peak"] == 1e20 and results["binds"] == "memory"


def test_bench_times_a_variant_given_as_a_function_in_turn_with_the_kernels(monkeypatch):
    """time_side_by_side calls a callable variant (a stream) with the runs a median, in turn; the best counts."""
    order, ks = [], _named_kernels()
    monkeypatch.setattr(bench, "time_kernel", lambda k, *x, runs, device_args: order.append("a") or 1.0)
    medians = iter([3.0, 0.5, 2.0, 1.0, 4.0])
    stream = lambda runs: order.append(("s", runs)) or next(medians)  # noqa: E731
    times = bench.time_side_by_side({"a": [(ks["a"], [])], "s": stream}, 7)
    assert times == {"a": 1.0, "s": 0.5} and order == ["a", ("s", 7)] * 5


def test_the_stream_arrays_are_a_power_of_two_of_floats():
    """Whole work-groups of float4s, and one size whatever memory PoCL reports free in a sitting (5.0 GB, 5.7 GB)."""
    for memory in (5_000_001_234, 5_700_000_000):  # 1/64 of it: 78 or 89 Mi floats; 2 GiB buffers at most
        assert bench.stream_floats(480 << 20, 2 << 30, memory) == 64 << 20  # not the 480 MiB cache: under 1/5
    assert bench.stream_floats(480 << 20, 12 << 30, 25 << 30) == 128 << 20  # the cache's 120 Mi floats, rounded up
    assert bench.stream_floats(1 << 20, 12 << 30, 25 << 30) == bench.STREAM_FLOATS == 64 << 20


def test_the_fma_kernel_keeps_independent_chains():
    src = cost.fma_source(8, cost.FMA_FORMS["fma()"])
    assert all(f"x{i} = fma(x{i}, a, b);" in src for i in range(cost.FMA_CHAINS)) and "float8 y = x0 + x1" in src


def test_bench_prints_a_row_per_variant_with_its_roofline_fraction(device, tiny, capsys, tmp_path):
    """With tinygrad's file of this device, the hand-coded row also shows tinygrad's time and the ratio."""
    ast = TINY["sum axis 1 4096x4096"][0]()[0]
    path = tinygrad_file(tmp_path / "tg.json", device.name, "hand-coded", {"sum axis 1 4096x4096": [(ast, [], 0.002)]})
    results = bench.bench(["sum axis 1 4096x4096"], runs=1, tinygrad=[path], limits=LIMITS)
    out = capsys.readouterr().out
    assert re.search(
        rf"^device: {re.escape(device.name)} \(.*\), \d+ compute units; .*times from .*tg\.json$", out, re.M
    )
    assert "FMA peak 100.0 GFLOP/s, stream 10.0 GB/s (given)" in out
    assert re.search(r"optimizer: .* [0-9.]+ ms per kernel \(168 corpus kernels", out)
    for variant in ("unoptimized", "hand-coded", "numpy"):
        t = results["sum axis 1 4096x4096"][variant]
        fraction = 4 * (64 * 64 + 64) / 1e10 / t  # memory-bound: bytes / stream over the time
        row = rf"sum axis 1 4096x4096 +{variant} +[0-9.]+ ms +[0-9.]+ +[0-9.]+ +{fraction:5.2f} +memory"
        assert re.search(row, out), (row, out)
    assert re.search(r"hand-coded .* 2\.00 ms +[0-9.]+$", out, re.M)
    assert "each hand-coded kernel is the one tinygrad ran" in out


def test_another_devices_file_is_not_used(device, tiny, capsys, tmp_path):
    ast = TINY["add 16M"][0]()[0]
    path = tinygrad_file(tmp_path / "tg.json", "some other device", "hand-coded", {"add 16M": [(ast, [], 0.002)]})
    bench.bench(["add 16M"], runs=1, tinygrad=[path], limits=LIMITS)
    out = capsys.readouterr().out
    assert "tinygrad" not in out.split("optimizer:")[0] and "ours/tinygrad" not in out


def test_the_script_and_bench_name_the_same_workloads():
    """tools/tinygrad_times.py (not importable here: it imports tinygrad) builds bench.py's workloads by its names."""
    tree = pyast.parse(open(os.path.join(ROOT, "tools", "tinygrad_times.py")).read())
    found = next(n.value for n in tree.body if isinstance(n, pyast.Assign) and n.targets[0].id == "WORKLOADS")
    assert [pyast.literal_eval(k) for k in found.keys] == list(bench.BENCHMARKS)


def test_a_beam_file_gives_tinygrads_opts_on_our_kernels(tmp_path):
    """Each kernel of a BEAM file is our Kernel of its AST with its opts applied; its search seconds add up."""
    asts = bench._sum_in_two(4096, 16)
    opts = [[["UPCAST", 0, 4]], [["GROUP", 0, 16]]]
    path = tinygrad_file(tmp_path / "b.json", "dev A", "beam", {"sum 16M": [(a, o, 0.001) for a, o in zip(asts, opts)]})
    device, read = bench.read_tinygrad_file(path, "beam")
    kernels = read["sum 16M"]["kernels"]
    assert device == "dev A" and read["sum 16M"]["search_s"] == 3.0 and read["sum 16M"]["asts"] == asts
    assert [k.applied_opts for k in kernels] == [[Opt(OptOps.UPCAST, 0, 4)], [Opt(OptOps.GROUP, 0, 16)]]


@pytest.mark.parametrize(
    "what, message",
    [
        ("not JSON", r"b\.json can't be read as JSON"),
        ("a list", r"b\.json holds a JSON list, not an object"),
        (
            "the other mode",
            r"b\.json is not a file of tools/tinygrad_times\.py .*mode 'beam'.*give it to --tinygrad-beam",
        ),
        ("no device", r"b\.json is not a file of tools/tinygrad_times\.py \(KeyError: 'device'\)"),
        ("an unknown workload", r"b\.json is not a file .*workload 'nope' is none of bench\.py's"),
        ("a bad AST", r"b\.json is not a file .*ast\.op: expected an op such as BinaryOps\.ADD"),
        ("two of one device", r"a\.json and .*b\.json are both of device 'dev A'"),
        ("no kernels", r"b\.json is not a file .*workload 'add 16M' has no kernels\)$"),
    ],
)
def test_a_bad_tinygrad_file_is_one_line_naming_it(what, message, two_devices, tmp_path, capsys):
    path = tmp_path / "b.json"
    ast = elementwise_ast(16)
    files = [tinygrad_file(tmp_path / "a.json", "dev A", "hand-coded", {"add 16M": [(ast, [], 0.1)]})]
    if what == "not JSON":
        path.write_text("tinygrad: 1 ms\n")
    elif what == "a list":
        path.write_text("[]")
    else:
        mode = "beam" if what == "the other mode" else "hand-coded"
        tinygrad_file(path, "dev A", mode, {"nope" if what == "an unknown workload" else "add 16M": [(ast, [], 0.1)]})
        data = json.loads(path.read_text())
        if what == "no device":
            del data["device"]
        if what == "a bad AST":
            data["workloads"]["add 16M"]["kernels"][0]["ast"][0]["op"] = "BinaryOps.NOPE"
        if what == "no kernels":
            data["workloads"]["add 16M"]["kernels"] = []
        path.write_text(json.dumps(data))
    files = files + [str(path)] if what == "two of one device" else [str(path)]
    with pytest.raises(SystemExit) as e:
        bench.main(["add 16M", *[x for f in files for x in ("--tinygrad", f)]])
    err = capsys.readouterr().err.strip().splitlines()[-1]  # (argparse prints its usage first)
    assert e.value.code == 2 and two_devices == []
    assert re.match(r"python bench\.py: error: --tinygrad: \S*" + message, err), err


@pytest.mark.parametrize(
    "key, value",
    [("tinygrad_s", 0), ("tinygrad_s", -1.0), ("tinygrad_s", float("nan")), ("tinygrad_s", float("inf"))]
    + [("tinygrad_s", "0.002"), ("tinygrad_s", None), ("tinygrad_s", True), ("search_s", 0), ("search_s", -1)]
    + [("tinygrad_s", 10**400), ("search_s", 10**309)],  # a huge JSON integer: an OverflowError as a float
)
def test_a_time_that_is_no_number_of_seconds_is_one_line_naming_its_file_and_workload(
    key, value, two_devices, tmp_path, capsys
):
    """Not a ZeroDivisionError, a row of "-1000.00 ms" or of "nan" later (json reads NaN and Infinity)."""
    mode, option = ("beam", "--tinygrad-beam") if key == "search_s" else ("hand-coded", "--tinygrad")
    path = tinygrad_file(tmp_path / "b.json", "dev A", mode, {"add 16M": [(elementwise_ast(16), [], 0.1)]})
    data = json.loads(open(path).read())
    data["workloads"]["add 16M"][key] = value
    open(path, "w").write(json.dumps(data))
    with pytest.raises(SystemExit) as e:
        bench.main(["add 16M", "--search", option, path])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and two_devices == []
    assert err == (
        f"python bench.py: error: {option}: {path} is not a file of tools/tinygrad_times.py (ValueError: workload "
        f"'add 16M' has {key!r}: {value!r}, not a number of seconds > 0)"
    )


@pytest.mark.cli
@pytest.mark.parametrize("what", ["no kernels", "a workload it doesn't hold"])
def test_tinygrad_parity_names_the_file_and_the_workload_it_cant_compare(what, tmp_path):
    """tools/tinygrad_parity.py: one line and exit status 1, not an IndexError or an empty table and status 0."""
    path = tinygrad_file(tmp_path / "tg.json", "dev A", "hand-coded", {"add 16M": [(elementwise_ast(16), [], 0.1)]})
    if what == "no kernels":
        data = json.loads(open(path).read())
        data["workloads"]["add 16M"]["kernels"] = []
        open(path, "w").write(json.dumps(data))
    name = "add 16M" if what == "no kernels" else "matmul 512"
    script = [sys.executable, os.path.join("tools", "tinygrad_parity.py"), path, name]
    p = subprocess.run(script, capture_output=True, text=True, cwd=ROOT, timeout=120)
    why = {
        "no kernels": "is not a file of tools/tinygrad_times.py (ValueError: workload 'add 16M' has no kernels)",
        "a workload it doesn't hold": "holds no workload 'matmul 512' (it holds 'add 16M')",
    }[what]
    assert (p.returncode, p.stdout, p.stderr) == (1, "", f"python tools/tinygrad_parity.py: error: {path} {why}\n")


@pytest.fixture
def two_devices(monkeypatch):
    """Two devices that work, and each child's command line and KERNELPY_DEVICE recorded instead of run."""
    children = []
    monkeypatch.delenv("KERNELPY_DEVICE", raising=False)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.setattr(bench, "_devices", lambda: ["dev A (plat X)", "pthread-dev B (plat Y)"])

    def run(argv, env):
        children.append((argv[2:], env["KERNELPY_DEVICE"]))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(bench.subprocess, "run", run)
    return children


def test_each_device_runs_in_a_child_of_its_own(two_devices, capsys, tmp_path):
    ast = elementwise_ast(16)
    path = tinygrad_file(tmp_path / "a.json", "dev A", "hand-coded", {"add 16M": [(ast, [], 0.1)]})
    assert bench.main(["add 16M", "--runs", "3", "--tinygrad", path]) == 0
    argv = ["add 16M", "--runs", "3", "--beam", "2", "--tinygrad", path]
    assert two_devices == [(argv, "0"), (argv, "1")]
    out = capsys.readouterr().out
    assert "==== device 0: dev A (plat X) ====" in out and "==== device 1: pthread-dev B (plat Y) ====" in out


@pytest.mark.parametrize("choice, index", [("1", "1"), ("0", "0"), ("pthread", "1"), ("PLAT X", "0")])
def test_device_chooses_one_by_its_index_or_name(choice, index, two_devices):
    assert bench.main(["--device", choice, "--search", "--no-cache"]) == 0
    assert two_devices == [(["--runs", "10", "--beam", "2", "--search", "--no-cache"], index)]


@pytest.mark.parametrize(
    "choice, says",
    [
        ("2", "names none of the devices that work here (0: dev A (plat X), 1: pthread-dev B (plat Y))"),
        ("nvidia", "names none of the devices that work here (0: dev A (plat X), 1: pthread-dev B (plat Y))"),
        # not the first of them without a word: on an Intel machine 'intel' names both PoCL's device and Intel's
        ("dev", "names 2 devices (0: dev A (plat X), 1: pthread-dev B (plat Y)): give its index, or more of its name"),
        ("PLAT", "names 2 devices (0: dev A (plat X), 1: pthread-dev B (plat Y)): give its index, or more of its name"),
    ],
)
def test_a_device_named_wrong_or_ambiguously_is_one_line_naming_them(choice, says, two_devices, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--device", choice])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and two_devices == []
    assert err == f"python bench.py: error: --device={choice!r} {says}"


def test_the_help_names_each_device_unambiguously(capsys):
    """Each example name of --device's help names one device of a machine with both CPU runtimes, Intel or AMD."""
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse's wrapping undone
    examples = re.findall(r"'([^']+)'[:,)]", text.split("--device N|NAME", 2)[2].split("--tinygrad")[0])
    assert len(examples) == 2, text
    for cpu in ("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "AMD EPYC 9B45"):
        devices = [f"{cpu} (Intel(R) OpenCL)", f"pthread-{cpu} (Portable Computing Language)"]
        assert [len([d for d in devices if name.lower() in d.lower()]) for name in examples] == [1, 1], (cpu, examples)


def test_a_failing_child_is_named_and_the_next_device_still_runs(two_devices, monkeypatch, capsys):
    ran = []

    def run(argv, env):  # the first device's child fails, the second's doesn't
        ran.append(env["KERNELPY_DEVICE"])
        return subprocess.CompletedProcess(argv, 3 if len(ran) == 1 else 0)

    monkeypatch.setattr(bench.subprocess, "run", run)
    assert bench.main([]) == 3 and ran == ["0", "1"]
    assert "python bench.py on device 0 (dev A (plat X)) ended with exit status 3" in capsys.readouterr().err


def test_a_chosen_device_runs_here(two_devices, monkeypatch):
    """KERNELPY_DEVICE set (a child, or the user's choice): the suite runs in this process, no child."""
    ran = []
    monkeypatch.setenv("KERNELPY_DEVICE", "1")
    monkeypatch.setattr(bench, "bench", lambda names, runs, **kw: ran.append((names, runs, kw["tinygrad"])))
    assert bench.main(["add 16M"]) == 0 and ran == [(["add 16M"], 10, [])] and two_devices == []


def test_tinygrad_beam_needs_search(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--tinygrad-beam", "x.json"])
    assert e.value.code == 2 and "--tinygrad-beam needs --search" in capsys.readouterr().err


@pytest.mark.parametrize("script,prog", [("bench", "python bench.py"), ("search", "python -m search")])
def test_bench_and_search_have_their_own_command_lines(script, prog, capsys):
    with pytest.raises(SystemExit) as e:
        {"bench": bench, "search": search_cli}[script].main(["--help"])
    assert e.value.code == 0 and f"usage: {prog} " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["no such benchmark"])
    assert "unknown benchmark 'no such benchmark'" in capsys.readouterr().err


def _named_kernels() -> dict:
    """Two kernels of one AST, "a" and "b": a test's stand-ins for two variants."""
    a = Kernel(*elementwise_ast(64))
    return {"a": a, "b": a.copy()}


def test_bench_takes_the_best_of_medians_taken_in_turn(monkeypatch):
    """bench.py's side-by-side timing: each variant's medians come in turn, and its time is the lowest of them."""
    order, ks = [], _named_kernels()
    medians = {"a": iter([3.0, 1.5, 2.0, 1.0, 4.0]), "b": iter([2.0, 2.5, 4.0, 3.0, 1.5])}
    name = {id(k): n for n, k in ks.items()}
    monkeypatch.setattr(
        bench, "time_kernel", lambda k, *x, runs, device_args: order.append(name[id(k)]) or next(medians[name[id(k)]])
    )
    assert bench.time_side_by_side({n: [(k, [])] for n, k in ks.items()}, runs=5) == {"a": 1.0, "b": 1.5}
    assert order == ["a", "b"] * bench.SIDE_BY_SIDE_ROUNDS == ["a", "b"] * 5  # 5 rounds: far over 2 s of launches


def test_bench_takes_more_medians_of_cheap_kernels(monkeypatch):
    """Kernels of 5 ms (one median 4 ms): medians of 10 launches go on in turn until their launches add up to 2 s,
    past SIDE_BY_SIDE_ROUNDS: 20 rounds of two hold 1.99 s, the 21st passes 2 s."""
    order, ks = [], _named_kernels()
    name = {id(k): n for n, k in ks.items()}
    monkeypatch.setattr(
        bench,
        "time_kernel",
        lambda k, *x, runs, device_args: order.append(name[id(k)]) or 0.005 - 0.001 * (len(order) == 7),
    )
    times = bench.time_side_by_side({n: [(k, [])] for n, k in ks.items()}, runs=10)
    assert order == ["a", "b"] * 21 and times == {"a": 0.004, "b": 0.005}


def test_bench_times_the_variants_of_one_ast_on_the_same_device_buffers(monkeypatch):
    """Kernels of one AST, in every variant and round, get one dict of device buffers; an AST of other buffers its
    own."""
    seen = []
    monkeypatch.setattr(bench, "time_kernel", lambda k, *x, runs, device_args: seen.append(device_args) or 1.0)
    add, total = Kernel(*elementwise_ast(64)), Kernel(*sum_ast((64,)))
    upcast = add.copy()
    upcast.apply_opt(Opt(OptOps.UPCAST, 0, 4))
    bench.time_side_by_side({"a": [(add, []), (total, [])], "b": [(upcast, []), (total, [])]}, runs=1)
    assert len({id(d) for d in seen[0::2]}) == len({id(d) for d in seen[1::2]}) == 1 and seen[0] is not seen[1]


def test_time_opts_times_its_variants_in_turn_on_one_set_of_buffers(device, tiny, monkeypatch, capsys):
    """tools/time_opts.py times its opt lists as bench.py times its rows (bench.time_side_by_side: in turn, on one set
    of device buffers), each verified first; an opt list that doesn't apply is a line saying why, and isn't timed."""
    from tools import time_opts

    given, side_by_side = [], bench.time_side_by_side
    monkeypatch.setattr(bench, "time_side_by_side", lambda variants, runs: given.append(variants) or side_by_side(
        variants, runs))  # fmt: skip
    assert time_opts.main(["add 16M", "UPCAST:0:4", "", "UPCAST:9:4", "UPCAST:0:4 LOCAL:0:16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("UPCAST:9:4") and "refused: invalid axis" in lines[0]
    assert [x.split("  ")[0] for x in lines[1:]] == ["UPCAST:0:4", "no opts", "UPCAST:0:4 LOCAL:0:16"]
    assert all(re.search(r" \d+\.\d{3} ms +\d+\.\d GFLOP/s", x) for x in lines[1:])
    assert len(given) == 1 and list(given[0]) == ["UPCAST:0:4", "no opts", "UPCAST:0:4 LOCAL:0:16"]
    inputs = {id(x) for variant in given[0].values() for _, x in variant}
    assert len(inputs) == 1  # one set of input arrays: one set of device buffers (time_side_by_side's)


def test_kernels_of_other_asts_on_the_same_buffers_and_inputs_share_device_buffers(monkeypatch):
    """tinygrad's add 16M is a 4096x4096 add and ours a flat one: their buffers (idx, dtype, size, read, written) are
    alike, and given the very same input arrays they are timed on one set of device buffers (the same memory); given
    other arrays, even of the same data, each gets its own (their data could differ)."""
    seen = []
    monkeypatch.setattr(bench, "time_kernel", lambda k, *x, runs, device_args: seen.append(device_args) or 1.0)
    st = ShapeTracker.from_shape((8, 8))
    flat, square = Kernel(*elementwise_ast(64)), Kernel(store(alu(BinaryOps.ADD, load(1, st), load(2, st))))
    assert repr(flat.ast) != repr(square.ast)
    x = random_inputs(flat, seed=1)
    bench.time_side_by_side({"ours": [(flat, x)], "theirs": [(square, x)]}, runs=1)
    assert len({id(d) for d in seen}) == 1
    seen.clear()
    bench.time_side_by_side({"ours": [(flat, x)], "theirs": [(square, random_inputs(square, seed=1))]}, runs=1)
    assert len({id(d) for d in seen}) == 2


def test_time_kernel_keeps_its_device_buffers_in_the_dict_it_is_given(device):
    """runtime.time_kernel(..., device_args=d): the first call makes the buffers and leaves them in d, a kernel of the
    same AST runs on those very buffers (the same memory: compared fairly), and its result is still right."""
    k = Kernel(*elementwise_ast(64))
    inputs, shared = random_inputs(k), {}
    time_kernel(k, *inputs, runs=1, device_args=shared)
    first = dict(shared)
    k.apply_opt(Opt(OptOps.UPCAST, 0, 4))
    time_kernel(k, *inputs, runs=1, device_args=shared)
    assert len(first) == 3 and all(shared[key] is buf for key, buf in first.items())


def test_bench_names_the_opts_of_each_searched_kernel(device, tiny, few_actions, monkeypatch, tmp_path):
    """With --search and tinygrad's BEAM file of this device, the searched and tinygrad BEAM rows, and the summary;
    tinygrad's kernels, of buffers alike ours, run on the row's very inputs (so on its device buffers)."""
    found, timed, side_by_side = [], [], bench.time_side_by_side
    monkeypatch.setattr(bench, "search", lambda *a, **kw: found.append(S.search(*a, **kw, workers=0)) or found[-1])
    monkeypatch.setattr(bench, "time_side_by_side", lambda v, runs: timed.append(v) or side_by_side(v, runs))
    ast = TINY["sum axis 1 4096x4096"][0]()[0]
    beam = {"sum axis 1 4096x4096": [(ast, [["UPCAST", 0, 4]], 0.001)]}
    path = tinygrad_file(tmp_path / "b.json", device.name, "beam", beam)
    out = io.StringIO()
    bench.bench(["sum axis 1 4096x4096"], runs=1, out=out, search_amt=1, cache=False, tinygrad_beam=path, limits=LIMITS)
    lines = out.getvalue().splitlines()
    line = next(x for x in lines if re.match(r"sum axis 1 4096x4096 +searched ", x))
    assert len(found) == 1 and line.endswith("s  " + (" ".join(map(str, found[0].kernel.applied_opts)) or "no opts"))
    assert any(re.match(r"sum axis 1 4096x4096 +tinygrad BEAM .* search 1\.5 s \(tinygrad's", x) for x in lines)
    summary = r"\| sum axis 1 4096x4096 \|.*\| [0-9.]+ \(memory\) \| [0-9.]+ \| \d+ \| [0-9.]+ \| 1\.5 \|$"
    assert any(re.match(summary, x) for x in lines)
    assert len(timed) == 1 and timed[0]["tinygrad BEAM"][0][1] is timed[0]["searched"][0][1]


def test_bench_summary_compares_each_workload_with_tinygrads_beam(capsys):
    """The summary's "x tinygrad" column is tinygrad BEAM's kernel time over ours; the search-time line sums both;
    "searched of roofline" is the bound over the searched kernel's time, "numpy of roofline" over numpy's (beside
    it: how near a library comes), "bound GB/s" the fastest stream's at its bytes and "peak GFLOP/s" the row's peak
    (each timed in turn), "built" the candidates built."""
    row = {"hand-coded": 0.009, "numpy": 0.001, "searched": 0.002, "tinygrad BEAM": 0.003, "search_s": 5.0}
    row |= {"bound_s": 0.0015, "binds": "compute", "bandwidth": 42e9, "peak": 430e9, "built": 77}
    results = {"matmul 512": {**row, "tinygrad_search_s": 20.0}, "add 16M": {**row, "tinygrad_search_s": 5.0}}
    bench._summary(results, None)
    out = capsys.readouterr().out
    assert re.search(r"^\| matmul 512 \| 9\.00 ms \| 2\.00 ms \| 3\.00 ms \| 1\.50 \| 1\.00 ms \|", out, re.M)
    figures = r"\| 1\.6 \| 42\.0 \| 430\.0 \| 0\.75 \(compute\) \| 1\.50 \| 77 \| 5\.0 \| 20\.0 \|$"
    assert re.search(r"^\| matmul 512 \|.*" + figures, out, re.M)
    assert "geomean 1.50, lowest 1.50" in out and "25.0 s / 10.0 s = 2.50x in all, geomean 2.00x" in out


def test_bench_imports_nothing_of_the_tests():
    """bench.py is a user's command: it reads tinygrad's files with kernel.py's reader, not the tests' loader."""
    tree = pyast.parse(open(os.path.join(ROOT, "bench.py")).read())
    modules = [n.module for n in pyast.walk(tree) if isinstance(n, pyast.ImportFrom)]
    modules += [a.name for n in pyast.walk(tree) if isinstance(n, pyast.Import) for a in n.names]
    assert not [m for m in modules if m and m.split(".")[0] == "tests"]
    attributes = {n.attr for n in pyast.walk(tree) if isinstance(n, pyast.Attribute)}
    assert not {a for a in attributes if a.startswith("_") and not a.startswith("__")}, "a private name of a module"


def test_bench_runs_from_the_command_line_on_a_device(device):
    """The whole path once, in a child of this test, at a tiny size: the device's limits (a last-level cache of no
    round size: PoCL refused the triad's launch of such a size), then a row per variant."""
    script = (
        "import sys, bench\n"
        "bench.BENCHMARKS = {'add 16M': (lambda: [bench.elementwise_ast(4096)], 4096, 12 * 4096, lambda a, b: a + b)}\n"
        "bench.cost.FMA_ITERS, bench.STREAM_FLOATS = 8, 1 << 16\n"
        "bench.last_level_cache = lambda: 4 * ((1 << 16) + 20)\n"
        "sys.exit(bench.main(['--runs', '1']))\n"
    )
    env = dict(os.environ)  # the fixture's device; where nothing chose it, the first (the suite runs in the child)
    if not (env.get("KERNELPY_DEVICE") or env.get("PYOPENCL_CTX")):
        env["KERNELPY_DEVICE"] = "0"
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.search(rf"^device: {re.escape(device.name)} ", p.stdout, re.M), p.stdout
    assert re.search(r"^FMA peak [0-9.]+ GFLOP/s, stream [0-9.]+ GB/s \(float.* 0\.5 MiB", p.stdout, re.M), p.stdout
    for variant in ("unoptimized", "hand-coded", "numpy"):
        assert re.search(rf"^add 16M +{variant} +[0-9.]+ ms .* memory$", p.stdout, re.M), p.stdout


def test_every_test_named_to_run_on_every_device_exists():
    """A name in ON_EVERY_DEVICE that no test has (a renamed test) would quietly run that test on one device only."""
    assert ON_EVERY_DEVICE <= {name for name in globals() if name.startswith("test_")}
