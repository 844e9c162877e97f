"""The teaching views of the demo (--explain, --loops, --map), the decisions the heuristics record for them, and the
Kernel methods that only tinygrad's linearizer uses.

Recording a decision must never change one: test_golden.py replays the corpus with the recording in place, and
the tests here check that the recorded choices are exactly the opts applied.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest

import kernel
from kernel import (
    DEMOS,
    TARGETS,
    Kernel,
    LocalBuffer,
    Opt,
    OptOps,
    ShapeTracker,
    View,
    elementwise_ast,
    lazyop_from_json,
    matmul_ast,
    matvec_ast,
    optimize,
    render_condition,
)

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def _plain(monkeypatch):
    """Plain text (conftest.py resets the heuristics' knobs)."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


def demo(name: str, view: str, *opts: Opt, every_step: bool = False, width: int = 1000) -> str:
    """What the demo prints (wide: one sentence per line, unless `width` says otherwise)."""
    out = io.StringIO()
    kernel.demo_kernel(name, opts=list(opts) if opts else None, out=out, view=view, every_step=every_step, width=width)
    return out.getvalue()


def decision(k: Kernel, heuristic: str, step: int) -> kernel.Decision:
    return next(d for d in k.decisions if d.heuristic == heuristic and d.step == step)


# ============================================================================================================
# decisions: what each heuristic weighed
# ============================================================================================================


def corpus_kernels():
    """The golden corpus's kernels, with the symbolic and several-reduce ones where they are recorded."""
    cases = []
    for name in ("kernels.json", "symbolic.json", "multireduce.json"):
        if os.path.exists(path := os.path.join(HERE, "testdata", name)):
            with open(path) as f:
                cases += json.load(f)["cases"]
    return [(c["name"], tuple(lazyop_from_json(a) for a in c["ast"]), c["target"]) for c in cases]


def test_decisions_account_for_every_heuristic_opt_in_order():
    """Over the corpus, the opts the decisions chose, in order, are exactly the opts the heuristics applied."""
    for name, ast, target in corpus_kernels():
        k = Kernel(*ast, opts=TARGETS[target])
        k.hand_coded_optimizations()
        chosen = [o for d in k.decisions for o in d.chosen]
        assert chosen == k.applied_opts, name
        assert all(d.step <= len(k.applied_opts) for d in k.decisions), name


def test_a_copy_records_its_own_decisions():
    k = optimize(Kernel(*matmul_ast(64, 64, 64)))
    c = k.copy()
    c.decisions.append(kernel.Decision("x", "y", [], [], 0))
    assert len(c.decisions) == len(k.decisions) + 1  # the copy has its own list


def test_matmul_upcast_axis_tie_is_broken_by_the_sum_of_strides():
    """Both axes have 2 moving buffers; axis 1's strides sum to 1 + 1, axis 0's to 512 + 512."""
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    d = decision(k, "_upcast_broadcast_axes", 0)
    assert [c.key for c in d.candidates] == [(2, 2, 1, 4), (2, 1024, 0, 4)]
    assert [c.taken for c in d.candidates] == [True, False]
    assert d.chosen == [Opt(OptOps.UPCAST, 1, 4)]
    assert "data1 has stride 0" in d.candidates[0].note  # a (buffer 1) is broadcast along axis 1


def test_matmul_384_upcasts_by_3_because_the_amount_is_in_the_sort_key():
    k = optimize(Kernel(*matmul_ast(384, 384, 384)))
    d = decision(k, "_upcast_broadcast_axes", 0)
    assert [c.key for c in d.candidates[:2]] == [(2, 2, 1, 3), (2, 2, 1, 4)]
    assert d.chosen == [Opt(OptOps.UPCAST, 1, 3)]


def test_matvec_decision_names_its_rule_and_candidates():
    k = optimize(Kernel(*matvec_ast(1024, 768)))
    d = decision(k, "_matvec", 0)
    assert d.chosen == [Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 0, 4)]
    assert d.candidates == [
        kernel.Candidate((0,), "GROUP:0:8 LOCAL:0:4 UPCAST:0:4", "reduce 768 % 8 = 0, axis 0 (1024) % 16 = 0", True)
    ]


def test_heuristics_that_decline_say_why():
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    why = {d.heuristic: d.rule for d in k.decisions if not d.chosen}
    assert "matrix-matrix product" in why["_matvec"]
    assert "262144 outputs > 2048" in why["_grouping"]


def test_locals_decision_ranks_broadcast_axes_first_from_the_right():
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    d = next(d for d in k.decisions if d.heuristic == "_locals")
    assert [(c.key, c.opt, c.taken) for c in d.candidates] == [
        ((-1, -1), "LOCAL:1:16", True),
        ((-1, 0), "LOCAL:0:8", True),
    ]
    assert d.chosen == [Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.LOCAL, 1, 16)]  # applied in axis order


def test_tensor_core_decision_lists_the_cores_and_axes_weighed():
    k = optimize(Kernel(*matmul_ast(256, 256, 256), opts=TARGETS["metal"]))
    d = k.decisions[0]
    assert d.heuristic == "apply_tensor_cores" and d.chosen == [Opt(OptOps.TC, 0, 0)]
    assert d.candidates[0].opt == "WMMA_8_8_8_float_float" and d.candidates[0].taken
    assert "<-N=axis 1 M=axis 0 K=axis 2" in d.candidates[0].note


# ============================================================================================================
# --explain
# ============================================================================================================


def test_explain_matmul_shows_strides_candidates_and_winner():
    out = demo("matmul", "explain")
    lines = out.splitlines()
    start = lines.index(next(x for x in lines if x.lstrip().startswith("start")))
    assert re.split(r"\s+", lines[start + 2].strip()) == ["strides", "a", "512", "0", "1"]
    assert re.split(r"\s+", lines[start + 3].strip()) == ["strides", "b", "0", "1", "512"]
    assert "_upcast_broadcast_axes: 262144 threads (outputs outside the upcast axes) >= 1024" in out
    winner = next(x for x in lines if "->" in x and "(2, 2, 1, 4)" in x)
    assert "UPCAST:1:4" in winner and "a has stride 0" in winner
    loser = next(x for x in lines if "(2, 1024, 0, 4)" in x)
    assert "->" not in loser and "b has stride 0" in loser
    assert "a has stride 0 on axis 1: upcast 4 to reuse its loads" in out  # the step's why, with names


def test_explain_matvec_shows_x_is_loaded_once_for_4_rows():
    out = demo("matvec", "explain")
    assert "yellow axis 4: x has stride 0 here: one load serves all 4 (registers)" in out
    assert "_matvec: first global axis" in out


def test_explain_tells_group_from_grouptop():
    """GROUP puts the threads on the stride-1 piece (they interleave); GROUPTOP on the outer piece (contiguous runs)."""
    group = demo("sum", "explain", Opt(OptOps.GROUP, 0, 16))
    top = demo("sum", "explain", Opt(OptOps.GROUPTOP, 0, 16))
    assert "a: neighbouring threads read 1 apart, thread t takes reduce steps t, t+16, ... (GROUP)" in group
    assert "a thread's loop steps are 16 apart" in group
    assert "a: neighbouring threads read 65536 apart, thread t takes its own run of consecutive reduce steps" in top
    assert "(GROUPTOP); a thread's loop steps are 1 apart" in top


# ============================================================================================================
# --loops
# ============================================================================================================


def loop_lines(out: str) -> list[str]:
    return [x.split("#")[0].strip() for x in out.splitlines() if re.search(r"\bfor \w+ in range\(", x)]


def test_loops_matvec_nest_matches_the_kernel_shape():
    k = optimize(Kernel(*matvec_ast(1024, 768)))
    out = demo("matvec", "loops")
    loops = loop_lines(out)
    parallel = k.first_reduce + k.group_for_reduces
    expected = [
        ("parallel for " if a < parallel else "for ") + f"{var}{a} in range({k.full_shape[a]}):"
        for a, var in enumerate(["gidx", "lidx", "lidx", "ridx"])
    ]
    assert k.shape_len - k.upcasted == 4 and loops[:4] == expected
    assert loops[:4] == [
        "parallel for gidx0 in range(64):",
        "parallel for lidx1 in range(4):",
        "parallel for lidx2 in range(8):",
        "for ridx3 in range(96):",
    ]
    assert "acc[4] = 0" in out
    assert "acc[up4] += (a[((gidx0*12288)+(lidx1*768)+(ridx3*8)+(up4*3072)+lidx2)] * x[((ridx3*8)+lidx2)])" in out
    assert "temp[lidx1][lidx2][:] = acc[:]" in out and "barrier" in out and "if lidx2 == 0:" in out
    assert "out[((gidx0*16)+(up4*4)+lidx1)] = acc[up4]" in out


def test_loops_matmul_has_parallel_loops_a_reduce_loop_and_register_arrays():
    out = demo("matmul", "loops")
    loops = loop_lines(out)
    assert loops == [
        "parallel for gidx0 in range(16):",
        "parallel for gidx1 in range(8):",
        "parallel for lidx2 in range(8):",
        "parallel for lidx3 in range(16):",
        "for ridx4 in range(128):",
        "for up5 in range(4), up6 in range(4), un7 in range(4) (unrolled):",
        "for up5 in range(4), up6 in range(4) (unrolled):",
    ]
    assert "acc[4][4] = 0" in out
    assert "acc[up5][up6] += (a[" in out and "barrier" not in out


def test_loops_steps_prints_a_nest_after_every_opt():
    out = demo("matmul", "loops", every_step=True)
    assert out.count("acc") > 0
    assert len(re.findall(r"^\s+parallel for gidx0 ", out, re.M)) == 6  # start + 5 opts


def test_loops_masked_loads_show_their_condition_as_ge():
    out = demo("conv2d", "loops")
    assert ">=1)" in out and "*-" not in out


# ============================================================================================================
# --map
# ============================================================================================================


def cell(out: str, row_head: int, column: int) -> str:
    """The label in the printed grid at the row whose head is row_head, column `column`."""
    line = next(x for x in out.splitlines() if re.match(rf"\s+{row_head}  [gt]", x))
    return re.split(r"\s{2,}", line.strip())[column + 1]


def test_map_matvec_labels_out5_with_its_group_thread_and_register():
    """out[i] = out[gidx0*16 + up4*4 + lidx1]: upcast rows are 4 apart, local rows are adjacent."""
    out = demo("matvec", "map", width=100)
    assert cell(out, 0, 5) == "g0 t1 r1"
    assert cell(out, 0, 1) == "g0 t1 r0" and cell(out, 0, 4) == "g0 t0 r1"
    assert cell(out, 16, 0) == "g1 t0 r0"
    assert "the 8 green threads" in out


def test_map_labels_agree_with_the_output_shapetracker():
    """Every label of the matmul map, checked against ShapeTracker.indices() of the output buffer."""
    np = pytest.importorskip("numpy")
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    idx, _ = k.sts[0].indices()
    idx = np.asarray(idx)
    colors = k.colors()
    for flat in (0, 5, 512 * 5 + 6, 512 * 15 + 7):
        cells = kernel._output_cells(k, {flat})[flat]
        where = [int(x[0]) for x in np.nonzero(idx == flat)]
        assert cells["blue"] == [where[a] for a in range(k.shape_len) if colors[a] == "blue"]
        assert cells["cyan"] == [where[a] for a in range(k.shape_len) if colors[a] == "cyan"]
        assert cells["yellow"] == [where[a] for a in range(k.shape_len) if colors[a] == "yellow"]
    out = demo("matmul", "map", width=150)
    assert cell(out, 5, 6) == "g0,0 t1,1 r2,1"  # row 5 = lidx2 1, up6 1; column 6 = lidx3 1, up5 2


# ============================================================================================================
# every view, every demo kernel, on a bare Python, plain and in colour
# ============================================================================================================


def run_bare(*args: str, color: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["FORCE_COLOR" if color else "NO_COLOR"] = "1"
    cmd = [sys.executable, "-I", "-S", os.path.join(HERE, "kernel.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("view", ["--explain", "--loops", "--map"])
def test_every_view_runs_for_every_demo_kernel_on_bare_python(view):
    plain = run_bare("demo", view, color=False)
    assert plain.returncode == 0, plain.stderr
    assert "\x1b" not in plain.stdout
    for name in DEMOS:
        assert f"\n{name} [" in plain.stdout
    colored = run_bare("demo", "matvec", view, color=True)
    assert colored.returncode == 0, colored.stderr
    assert "\x1b[36m" in colored.stdout  # the cyan local axis


def test_steps_goes_with_loops():
    r = run_bare("demo", "matvec", "--steps", color=False)
    assert r.returncode == 2 and "--steps goes with --loops" in r.stderr


# ============================================================================================================
# readable conditions
# ============================================================================================================


def test_condition_with_negative_terms_is_written_as_ge():
    i, j = kernel.Variable("i", 0, 7), kernel.Variable("j", 0, 15)
    ge = kernel.create_ge_node(i * 16 + j, 1)  # stored as ((i*-16)+(j*-1)) < 0
    assert "*-" in ge.render()
    assert render_condition(ge) == "((i*16)+j)>=1".join("()")
    lt = kernel.create_lt_node(i * 16 + j, 33)
    assert render_condition(lt) == lt.render()


# ============================================================================================================
# Kernel methods only tinygrad's linearizer uses (kept as part of the Kernel)
# ============================================================================================================


def test_acc_offsets_share_one_register_across_unrolled_axes():
    """matmul: 4 x 4 upcast outputs and an unroll of 4: 64 elements, 16 accumulators, each used 4 times."""
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    offsets = k.acc_offsets(k.full_buf_index)
    assert len(offsets) == 64 and sorted(set(offsets)) == list(range(16))
    assert all(offsets.count(x) == 4 for x in range(16))
    assert Kernel(*elementwise_ast(64)).acc_offsets(0) == [0]


def test_get_float4_upcast_dim_finds_unit_stride_upcast_axes():
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    # a walks the unrolled axis 7 with stride 1, b and the output the upcast axis 5
    assert [k.get_float4_upcast_dim(i) for i in range(3)] == [[5], [7], [5]]
    clang = Kernel(*matmul_ast(512, 512, 512), opts=TARGETS["clang"])
    clang.apply_opt(Opt(OptOps.UPCAST, 1, 4))
    assert clang.get_float4_upcast_dim(0) == []  # no float4 on this target


def test_limit_dims_to_max_moves_a_too_large_global_dim_last():
    k = Kernel(*kernel.broadcast_ast(256, 256))
    assert k.full_shape == (256, 256) and k.sts[1].real_strides() == (256, 1)
    k.limit_dims_to_max([64, 1024, 1024], [])
    assert k.sts[1].real_strides() == (1, 256)  # axis 0 (256 > 64) swapped with the last global axis


def test_limit_dims_to_max_folds_an_oversized_dim_into_the_next():
    k = Kernel(*elementwise_ast(4096))
    k.apply_opt(Opt(OptOps.UPCAST, 0, 4))
    k.limit_dims_to_max([256, 256, 256], [256, 256, 256])
    assert k.full_shape == (256, 16)


def test_alias_buffer_adds_a_local_copy_laid_out_by_the_pattern():
    k = Kernel(*matmul_ast(16, 16, 16))
    k.alias_buffer(k.reduceop, 1, [1, 0, 2])  # a: axis 0 innermost, axis 1 not stored, axis 2 outer
    local = k.bufs[-1]
    assert isinstance(local, LocalBuffer) and local.name == "ldata1" and local.size == 256
    assert k.sts[-1] == ShapeTracker((View.create((16, 1, 16), (1, 0, 16)),))
    assert k.local_alias[k.reduceop][1] is local
    assert not any(isinstance(b, LocalBuffer) for b in k.copy().bufs)  # local buffers belong to one rendering
    with pytest.raises(ValueError, match="pattern entry per axis"):
        k.alias_buffer(k.reduceop, 1, [1, 2])


# ============================================================================================================
# runtime.py: the OpenCL C says which colour and axis each id is, and what a condition means
# ============================================================================================================


def test_rendered_ids_name_their_colour_and_axis():
    runtime = pytest.importorskip("runtime")
    src = runtime.render(optimize(Kernel(*matmul_ast(512, 512, 512)))).src
    assert "int gidx0 = get_group_id(1);  /* blue, axis 0: 0..15 */" in src
    assert "int lidx3 = get_local_id(1);  /* cyan, axis 3: 0..15 */" in src
    assert "for (int ridx4 = 0; ridx4 < 128; ridx4++) {  /* red, axis 4 */" in src


def test_rendered_padding_conditions_read_as_ge():
    runtime = pytest.importorskip("runtime")
    k = optimize(Kernel(*kernel.conv2d_ast(1, 16, 32, 32, 32, 3, 1, 1)))
    src = runtime.render(k).src
    assert ">=1)" in src and "*-1)" not in src and "*-16)" not in src


def test_tensor_core_kernel_header_says_it_is_plain_multiply_adds():
    runtime = pytest.importorskip("runtime")
    src = runtime.render(optimize(Kernel(*matmul_ast(64, 64, 64), opts=TARGETS["metal"]))).src
    assert src.startswith("/* Shaped for METAL's tensor cores (the TC opt), rendered as plain multiply-adds")
    assert "TC=2" in src


def test_both_command_lines_name_the_target_the_same_way(capsys):
    runtime = pytest.importorskip("runtime")
    assert runtime.main(["show", "matmul"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("matmul [opencl]: ") and demo("matmul", "steps").splitlines()[0] in shown
