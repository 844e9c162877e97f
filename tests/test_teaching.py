"""The teaching views of the demo (--explain, --loops, --map) and the heuristics' record (D.weighed) in words.

weighed() runs the heuristics on a copy whose `decisions` is a list: each branch records what it computed, under
tinygrad's names (Kernel._weigh), and the opts it applies follow it (D.record_steps pairs them). The tests here check
that the copy gets the opts a plain run gets, that each record holds what tinygrad's rule computes from the state the
branch saw, that the opts after it are what the branch applies with those values, and that the demo's words (its
rules, the step table's reasons) are true of the kernel they are about.

Every kind of sentence the views print is computed from one fact (a stride, a loop's size, a vector width the
renderer uses, a value a heuristic computed). The last part of this file checks the heuristics' sentences against
the state the heuristic looked at; tests/test_sentences.py checks the views' sentences (strides, axis notes, --loops'
C, --map) against ShapeTracker.indices() and the OpenCL C that runtime.render writes, over the space of states. A step
table reason with no such check fails test_every_step_table_reason_is_true_of_the_kernel_it_was_given_for.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

import kernel
import demo as D
from kernel import (
    TARGETS,
    Decision,
    Kernel,
    Opt,
    OptOps,
    optimize,
)
from corpus import lazyop_from_json, load_corpus
from demo import DEMOS, elementwise_ast, matmul_ast, matvec_ast
from render import render_condition
from tests import test_sentences
from tests.common import ROOT

R = pytest.importorskip("runtime")


@pytest.fixture(autouse=True)
def _plain(monkeypatch):
    """Plain text (conftest.py resets the heuristics' knobs)."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


def demo(name: str, view: str, *opts: Opt, every_step: bool = False, width: int = 1000, target=None) -> str:
    """What the demo prints (wide: one sentence per line, unless `width` says otherwise)."""
    out = io.StringIO()
    D.demo_kernel(name, target, list(opts) if opts else None, out, view, every_step, width)
    return out.getvalue()


def weighed(ast, target: str = "opencl", heuristics=optimize) -> tuple[Kernel, list[Decision]]:
    """The kernel `heuristics` tuned, and what they recorded (demo.weighed: Kernel.decisions)."""
    return D.weighed(Kernel(*ast, opts=TARGETS[target]), heuristics)


def recorded(ast, target: str = "opencl", heuristics=optimize) -> list[tuple[Decision, list[Opt]]]:
    """Each decision the heuristics recorded, with the opts its branch applied (D.record_steps)."""
    tuned, decisions = weighed(ast, target, heuristics)
    return D.record_steps(decisions, tuned.applied_opts)


HAND_CODED = Kernel.hand_coded_optimizations


# ============================================================================================================
# decisions: what each branch computed, recorded by Kernel._weigh (the corpus-wide checks are at the end)
# ============================================================================================================


def corpus_kernels():
    """The golden corpus's kernels, with the symbolic and several-reduce ones where they are recorded."""
    cases = [c for name in ("kernels.json", "symbolic.json", "multireduce.json") for c in load_corpus(name)["cases"]]
    return [(c["name"], tuple(lazyop_from_json(a) for a in c["ast"]), c["target"]) for c in cases]


def test_weighed_leaves_the_kernel_it_is_given_as_it_was():
    k = Kernel(*matmul_ast(64, 64, 64))
    tuned, decisions = D.weighed(k)
    assert k.applied_opts == [] and k.decisions is None and tuned.applied_opts and decisions


def test_the_matvec_record_says_why_each_opt():
    """The record of a matvec: one _matvec decision (global_idx 0) and its three opts, each with the step table's
    reason (moved from test_kernel.py: the record is the demo's)."""
    k, decisions = D.weighed(Kernel(*matvec_ast(1024, 768)), HAND_CODED)
    record = D.record_steps(decisions, k.applied_opts)
    assert [d.heuristic for d, _ in record] == ["_matvec"] and record[0][1] == k.applied_opts
    assert decisions[0].weighed["global_idx"] == 0
    before = Kernel(*matvec_ast(1024, 768))
    reasons = []
    for opt in k.applied_opts:
        reasons.append(D.reason(decisions[0], opt, before, D.buffer_names(before)))
        before.apply_opt(opt)
    assert reasons == [
        "matvec: 8 threads share each output's reduce (GROUP)",
        "matvec: 4 threads per work-group along axis 0",
        "matvec: each thread computes 4 outputs along axis 0",
    ]


def test_a_copy_records_on_its_own_list():
    k = Kernel(*matmul_ast(64, 64, 64))
    k.decisions = []
    copy = k.copy()
    copy.hand_coded_optimizations()
    assert copy.decisions and k.decisions == [] and k.copy().decisions == []


def test_matmul_upcast_axis_tie_is_broken_by_the_sum_of_strides():
    """tinygrad's xb_choices: both axes have 2 moving buffers; axis 1's strides sum to 1 + 1, axis 0's to 512 + 512."""
    (d, opts), *_ = [x for x in recorded(matmul_ast(512, 512, 512)) if x[0].heuristic == "_upcast_broadcast_axes"]
    assert d.weighed == {"xb_choices": [(2, 2, 1, 4), (2, 1024, 0, 4)]} and opts == [Opt(OptOps.UPCAST, 1, 4)]
    assert "a has stride 0 on axis 1: upcast 4 to reuse its loads" in demo("matmul", "steps")  # a: buffer 1


def test_matmul_384_upcasts_by_3_because_the_amount_is_in_the_sort_key():
    (d, opts), *_ = [x for x in recorded(matmul_ast(384, 384, 384)) if x[0].heuristic == "_upcast_broadcast_axes"]
    assert d.weighed["xb_choices"][:2] == [(2, 2, 1, 3), (2, 2, 1, 4)] and opts == [Opt(OptOps.UPCAST, 1, 3)]


def test_matvec_records_the_axis_it_chose_and_its_opts_follow():
    (d, opts), *rest = recorded(matvec_ast(1024, 768))
    assert d.heuristic == "_matvec" and d.weighed == {"global_idx": 0} and not rest  # the heuristics end there
    assert opts == [Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 0, 4)]
    out = demo("matvec", "explain").splitlines()
    at = next(i for i, x in enumerate(out) if x.startswith("    _matvec: SUM(MUL(LOAD, LOAD)), the first load with"))
    assert out[at + 1 : at + 3] == ["      global_idx = 0", "      -> GROUP:0:8 LOCAL:0:4 UPCAST:0:4"]


def test_a_branch_whose_conditions_fail_records_nothing_as_tinygrad_prints_nothing():
    """A matmul is no matvec (both operands have a stride-0 axis) and has 262144 outputs, too many to group."""
    assert {d.heuristic for d, _ in recorded(matmul_ast(512, 512, 512))} == {
        "_upcast_broadcast_axes", "_unroll_reduce", "_locals"}  # fmt: skip
    assert "_matvec:" not in demo("matmul", "explain") and "_grouping:" not in demo("matmul", "explain")


def test_on_clang_the_branches_that_need_local_threads_record_nothing():
    """clang has no local threads: no _matvec, _grouping or _locals; a 4096 sum is unrolled by 4, nothing else."""
    assert [(d.heuristic, d.weighed, opts) for d, opts in recorded(D.sum_ast((4096,)), "clang")] == [
        ("_unroll_reduce", {"s": 4096}, [Opt(OptOps.UNROLL, 0, 4)])
    ]


def test_explain_answers_why_16_and_why_group():
    """sum_axis0 has 256 outputs, more than 32, so only 16 is tried (256 with <= 32 outputs, as the 1-output sum
    gets); matvec's GROUP is hard-coded, and its rule says why."""
    axis0, one = ([d.weighed for d, _ in recorded(DEMOS[n].build()) if d.heuristic == "_grouping"] for n in
                  ("sum_axis0", "sum"))  # fmt: skip
    assert axis0 == [{"sz": 16}] and one == [{"sz": 256}]
    assert "256 outputs; with <= 2048" in demo("sum_axis0", "explain") and "1 output; with" in demo("sum", "explain")
    assert "GROUP's neighbouring threads read neighbouring elements" in demo("matvec", "explain")


def test_locals_records_tinygrads_ranking_and_sizes():
    (d, opts), *_ = [x for x in recorded(matmul_ast(512, 512, 512)) if x[0].heuristic == "_locals"]
    assert d.weighed == {"local_axis_ranking": [(True, 0), (True, 1)], "to_local": [(1, 16), (0, 8)]}
    assert opts == [Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.LOCAL, 1, 16)]  # applied in axis order


def test_tensor_core_decisions_record_the_core_its_axes_and_the_follow_ups():
    (tc, tc_opts), (follow, follow_opts) = recorded(matmul_ast(256, 256, 256), "metal")
    assert tc.heuristic == "_apply_tc_opt" and tc_opts == [Opt(OptOps.TC, 0, 0)]
    assert str(tc.weighed["tc"]) == "WMMA_8_8_8_float_float" and tc.weighed["axes"] == (1, 0, 2)
    assert tc.weighed["axis_pads"] == () and follow.heuristic == "apply_tensor_cores"
    assert follow_opts == [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.LOCAL, 1, 4)]
    said = "tensor core: unroll K by 8, upcast N by 2, local N 2 M 4 N 2 M 2 (a warp of 32 threads)"
    k = Kernel(*matmul_ast(256, 256, 256), opts=TARGETS["metal"])
    assert D.reason(tc, tc_opts[0], k, D.buffer_names(k)) == said
    assert re.search(r"^  TC:0:0 .*  " + re.escape(said) + "$", demo("tc_matmul", "steps"), re.M)


def test_a_size_apply_opt_refuses_is_recorded_with_no_opt_after_it_and_the_next_size_taken():
    """_grouping tries GROUPTOP by 256, then 16, as tinygrad's try/except does: 256 threads' float accumulators
    (1024 bytes) are too much shared memory for a target of 1000; --explain says apply_opt's reason."""
    small = dataclasses.replace(TARGETS["opencl"], shared_max=1000)
    k = Kernel(*D.sum_ast((16, 4096), (1,)), opts=small)
    tuned, decisions = D.weighed(k, HAND_CODED)
    (big, none), (sixteen, opts), *_ = D.record_steps(decisions, tuned.applied_opts)
    assert (big.heuristic, big.weighed, none) == ("_grouping", {"sz": 256}, [])
    assert (sixteen.weighed, opts) == ({"sz": 16}, [Opt(OptOps.GROUPTOP, 0, 16)])
    assert D.decision_lines(big, none, k, D.buffer_names(k))[-1] == (
        "      -> GROUPTOP:0:256 refused: exceeds maximum shared memory size: needs 1024, max 1000"
    )


# ============================================================================================================
# --explain
# ============================================================================================================


def test_explain_matmul_shows_strides_choices_and_what_was_applied():
    out = demo("matmul", "explain")
    lines = out.splitlines()
    start = lines.index(next(x for x in lines if x.lstrip().startswith("start")))
    assert re.split(r"\s+", lines[start + 2].strip()) == ["strides", "a", "512", "0", "1"]
    assert re.split(r"\s+", lines[start + 3].strip()) == ["strides", "b", "0", "1", "512"]
    rule = lines.index(next(x for x in lines if x.startswith("    _upcast_broadcast_axes: 262144 threads (outputs")))
    assert lines[rule + 1 : rule + 3] == ["      xb_choices = [(2, 2, 1, 4), (2, 1024, 0, 4)]", "      -> UPCAST:1:4"]
    assert "a has stride 0 on axis 1: upcast 4 to reuse its loads" in out  # the step's why, with names


def test_explain_matvec_shows_x_is_loaded_once_for_4_rows():
    out = demo("matvec", "explain")
    assert "yellow axis 4: x has stride 0 here: one load serves all 4 (registers)" in out
    assert "_matvec: SUM(MUL(LOAD, LOAD)), the first load with stride 1 on the reduce" in out


def test_explain_tells_group_from_grouptop():
    """GROUP puts the threads on the stride-1 piece (they interleave); GROUPTOP on the outer piece (contiguous runs)."""
    group = demo("sum", "explain", Opt(OptOps.GROUP, 0, 16))
    top = demo("sum", "explain", Opt(OptOps.GROUPTOP, 0, 16))
    assert "a: neighbouring threads read 1 apart, thread t takes steps t, t+16, ... of the 1048576 (GROUP)" in group
    assert "(GROUP); loop ridx1: 65536 steps 16 apart" in group
    assert "a: neighbouring threads read 65536 apart, thread t takes its own run of 65536 consecutive steps" in top
    assert "from 65536*t (GROUPTOP); loop ridx1: 65536 steps 1 apart" in top


# ============================================================================================================
# --loops
# ============================================================================================================


def test_loops_prints_the_c_the_kernel_runs_as():
    """--loops is the kernel's OpenCL C, render.py's (one description of the loop nest), after naming its buffers."""
    k = optimize(Kernel(*matvec_ast(1024, 768)))
    out = demo("matvec", "loops")
    assert R.render(k).src.rstrip() in "\n".join(x[2:] for x in out.splitlines())
    assert "(data0 is out, data1 is a, data2 is x)" in out and "for (int ridx3 = 0; ridx3 < 96; ridx3++)" in out


def test_loops_steps_prints_the_c_after_every_opt():
    out = demo("matmul", "loops", every_step=True)
    assert out.count("__kernel void") == 6  # the start and 5 opts


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


def test_the_map_of_a_huge_output_takes_apart_only_the_cells_it_draws():
    """--map of broadcast 16x200000000 (3.2 billion outputs): each cell drawn is taken apart from the store's view on
    its own, not found by walking every output before it (over an hour): the axes' indices given reach that cell."""
    out = io.StringIO()
    k, _ = D.demo_kernel("broadcast", view="map", sizes=(16, 200_000_000), out=out)
    assert "rows 0..15, columns 0..3" in kernel.ansistrip(out.getvalue())
    v, colors = k.sts[0].views[-1], k.colors()
    want = {r * 200_000_000 + c for r in range(16) for c in range(4)} | {16 * 200_000_000 - 1}
    cells = D._output_cells(k, want)
    assert set(cells) == want
    for flat, labels in cells.items():
        left = {c: list(ids) for c, ids in labels.items()}  # each colour's indices, in axis order
        index = [left[colors[a]].pop(0) if v.shape[a] != 1 else 0 for a in range(k.shape_len)]
        assert v.offset + sum(i * s for i, s in zip(index, v.strides)) == flat


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
        cells = D._output_cells(k, {flat})[flat]
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
    cmd = [sys.executable, "-I", "-S", os.path.join(ROOT, "kernel.py"), *args]
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


def test_steps_prints_the_loop_nest_after_every_opt_on_its_own_too():
    """--steps alone is --loops --steps; with another view it says what it goes with."""
    alone = run_bare("demo", "matvec", "--steps", color=False)
    assert (
        alone.returncode == 0 and alone.stdout == run_bare("demo", "matvec", "--loops", "--steps", color=False).stdout
    )
    assert alone.stdout.count("__kernel void") == 4  # the start and three opts
    r = run_bare("demo", "matvec", "--steps", "--map", color=False)
    assert r.returncode == 2 and "it goes with --loops, not --map" in r.stderr


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
# runtime.py: the OpenCL C says which colour and axis each id is, and what a condition means
# ============================================================================================================


def test_rendered_ids_name_their_colour_and_axis():
    runtime = pytest.importorskip("runtime")
    src = runtime.render(optimize(Kernel(*matmul_ast(512, 512, 512)))).src
    assert "int gidx0 = get_group_id(1);  /* blue, axis 0: 0 <= gidx0 < 16 */" in src
    assert "int lidx3 = get_local_id(1);  /* cyan, axis 3: 0 <= lidx3 < 16 */" in src
    assert "for (int ridx4 = 0; ridx4 < 128; ridx4++) {  /* red, axis 4 */" in src


def test_rendered_padding_conditions_read_as_ge():
    runtime = pytest.importorskip("runtime")
    k = optimize(Kernel(*D.conv2d_ast(1, 16, 32, 32, 32, 3, 1, 1)))
    src = runtime.render(k).src
    assert ">=1)" in src and "*-1)" not in src and "*-16)" not in src


def test_tensor_core_kernel_header_says_it_is_plain_multiply_adds():
    runtime = pytest.importorskip("runtime")
    src = runtime.render(optimize(Kernel(*matmul_ast(64, 64, 64), opts=TARGETS["metal"]))).src
    assert src.startswith("/* Shaped for METAL's tensor cores (the TC opt), rendered as plain multiply-adds")
    assert "TC=2" in src


def test_the_tensor_core_header_names_the_vector_types_its_c_uses():
    """`show tc_matmul` said "in scalar code" above float2 registers and loads. The header names
    the vector types of the C below it, and says scalar code only where there are none, for every core."""
    runtime = pytest.importorskip("runtime")
    seen = set()
    for target in ("metal", "cuda"):
        for tc in TARGETS[target].tensor_cores:
            acc = tc.dtype_out if tc.dtype_out != tc.dtype_in else None
            for extra in ([], None):  # the TC opt alone, and with its follow-up opts
                k = Kernel(*matmul_ast(64, 64, 64, tc.dtype_in, acc), opts=TARGETS[target])
                assert k.apply_tensor_cores(1, extra_opts=extra)
                header, body = runtime.render(k).src.split("*/\n", 1)
                vectors = sorted(set(re.findall(r"\b(?:float|half)[248]\b", body)))
                assert ("in scalar code" in header) == (not vectors), (tc, header)
                assert all(v in header for v in vectors), (tc, header)
                seen.add(bool(vectors))
    assert True in seen
    tc_matmul = Kernel(*DEMOS["tc_matmul"].build(), opts=TARGETS[DEMOS["tc_matmul"].target])
    assert "with float2 vectors" in runtime.render(optimize(tc_matmul)).src.split("*/")[0]


def test_both_command_lines_name_the_target_the_same_way(capsys):
    runtime = pytest.importorskip("runtime")
    assert runtime.main(["show", "matmul"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("matmul [opencl]: ") and demo("matmul", "steps").splitlines()[0] in shown


# ============================================================================================================
# every sentence from a fact, every fact checked against the kernel: the heuristic's code path (the views' sentences
# are checked in tests/test_sentences.py)
# ============================================================================================================


def test_the_broadcast_loop_stops_with_stride_0_axes_left_where_none_is_eligible():
    """matmul, broadcast and conv2d stop the broadcast loop with stride-0 axes left: after its last round fewer than
    1024 threads remain or no axis is eligible (upcast in the loop already, neither 3 nor 4 divides it, or each buffer
    with stride 0 on it has a stride-0 upcast axis already)."""
    for name in ("matmul", "broadcast", "conv2d"):
        start = Kernel(*DEMOS[name].build())
        tuned, decisions = D.weighed(start)
        rounds = [d for d in decisions if d.heuristic == "_upcast_broadcast_axes"]
        after = decisions[decisions.index(rounds[-1]) + 1]  # the next branch sees the loop's end
        k, taken = _seen(start, tuned, after), {d.weighed["xb_choices"][0][2] for d in rounds}
        left = [a for a in range(k.first_reduce) if any(st.views[-1].strides[a] == 0 for st in k.sts)]
        fresh = [a for a in left if any(st.views[-1].strides[a] == 0 and all(x[1] != 0 for x in k.upcasted_axis(i))
                                        for i, st in enumerate(k.sts))]  # fmt: skip
        assert left, name
        threads = kernel.prod(k.sts[0].shape[: k.first_reduce])
        assert threads < 1024 or all(a in taken or k.full_shape[a] % 3 and k.full_shape[a] % 4 for a in fresh), name


def test_conv2d_sort_keys_can_be_recomputed_from_what_explain_prints():
    """The key (2, 66, 1, 4) is 2 moving buffers and 32 + 34, the last views' strides printed above it on axis 1 (a
    `last view` row where it differs); and the ? of real_strides is explained where it is printed."""
    out = demo("conv2d", "explain").splitlines()
    at = next(i for i, x in enumerate(out) if x.startswith("      xb_choices = [") and "(2, 66, 1, 4)" in x)
    rows = {}
    for x in out[:at]:
        if m := re.match(r"    (strides|last view) (\w+) +(.*)", x):
            if m[1] == "last view" or m[2] not in rows or rows[m[2]][0] == "strides":
                rows[m[2]] = (m[1], m[3].split())
    axis1 = [int(r[1]) for _, r in rows.values()]
    assert sorted(rows) == ["img", "out", "wt"] and sum(axis1) == 66 and sum(x > 0 for x in axis1) == 2
    assert "? = no single stride" in "\n".join(out) and "? = no single stride" not in demo("matmul", "explain")


def test_the_broadcast_rule_counts_threads_not_outputs():
    """After UPCAST:1:4 a 512x512 matmul still has 262144 outputs; 65536 is the threads."""
    start = Kernel(*matmul_ast(512, 512, 512))
    tuned, decisions = D.weighed(start)
    d = [d for d in decisions if d.heuristic == "_upcast_broadcast_axes"][1]
    state = _seen(start, tuned, d)
    outputs = kernel.prod(state.sts[0].shape)
    per_thread = kernel.prod(state.sts[0].shape[state.shape_len - state.upcasted :])
    said = D.rule(d, state, D.buffer_names(state))
    assert said.startswith(f"{outputs // per_thread} threads (outputs outside the upcast axes) >= 1024")
    assert outputs == 262144 and "65536 threads" in said and "outputs >= 1024" not in said


def test_grouping_tests_the_outputs_not_the_reduce_length():
    """A 16-element sum of one output gets GROUPTOP:0:16 (one element per thread), for its one output."""
    k, decisions = weighed(D.sum_ast((16,)))
    assert k.applied_opts == [Opt(OptOps.GROUPTOP, 0, 16)] and [d.weighed for d in decisions] == [{"sz": 16}]
    start = Kernel(*D.sum_ast((16,)))
    assert D.reason(decisions[0], k.applied_opts[0], start, D.buffer_names(start)) == (
        "1 output <= 2048: 16 threads share each output's reduce"
    )


def test_green_notes_come_from_the_op_and_the_loop_stride_in_the_c():
    """sum_axis0's GROUPTOP threads read 8192 apart and each thread's loop steps 256 apart (not a
    contiguous run); GROUP is named GROUP. The numbers are the multipliers of lidx1 and ridx2 in the C."""
    R = pytest.importorskip("runtime")
    for opt, threads, loop in ((Opt(OptOps.GROUPTOP, 0, 16), 8192, 256), (Opt(OptOps.GROUP, 0, 16), 256, 4096)):
        out = demo("sum_axis0", "explain", opt)
        note = next(x for x in out.splitlines() if "green axis 1: a:" in x)
        assert f"neighbouring threads read {threads} apart" in note and f"loop ridx2: 32 steps {loop} apart" in note
        assert f"({opt.op.name})" in note and "contiguous" not in note
        k = Kernel(*DEMOS["sum_axis0"].build())
        k.apply_opt(opt)
        terms = " ".join(test_sentences.c_index_terms(R.render(k).src, 1))
        assert f"lidx1*{threads}" in terms and f"ridx2*{loop}" in terms


def test_matvec_step_reasons_are_true_of_the_final_kernel():
    """No reason claims what a later opt changes ('4 rows per work-group' was true only until the
    UPCAST): a work-group of the final matvec writes 16 outputs, 4 per thread, as the README and --map say."""
    for name in ("matvec", "image"):
        steps = D.demo_steps(name)[2][1:]
        why = {str(s.opt): D.reason(s.decision, s.opt, s.before, D.buffer_names(s.before)) for s in steps}
        assert why["LOCAL:0:4"] == "matvec: 4 threads per work-group along axis 0"
        assert why["UPCAST:0:4"] == "matvec: each thread computes 4 outputs along axis 0"
    k = optimize(Kernel(*matvec_ast(1024, 768)))
    cells = D._output_cells(k, set(range(64)))
    assert sorted(f for f, c in cells.items() if c["blue"] == [0]) == list(range(16))
    assert {c["yellow"][0]: f for f, c in cells.items() if c["blue"] == [0] and c["cyan"] == [1]} == {
        0: 1,
        1: 5,
        2: 9,
        3: 13,
    }


def test_constants_are_not_reported_as_buffers():
    """A constant is no memory: no stride note; where a heuristic counts it (stride 0 on every axis), the reason names
    it 'the constant' and claims no load to reuse."""
    out = demo("attention", "explain")
    assert "const 0.125 has stride 0" not in out and "axis 1: the constant" not in out
    start = Kernel(*D.mean_var_ast(4096, 64))  # the mean's 1/n is a constant, the only buffer broadcast on axis 0
    tuned, decisions = D.weighed(start)
    d = next(d for d in decisions if d.heuristic == "_upcast_broadcast_axes")
    assert D.reason(d, tuned.applied_opts[d.step], start, D.buffer_names(start)) == (
        "the constant 0.015625 has stride 0 on axis 0: upcast 4 (the rule counts a constant too: no load to reuse)"
    )


def test_nolocals_says_what_the_runtime_launches():
    """NOLOCALS is described one way: no work-group size from the kernel, runtime.py picks the
    largest divisor <= 32 of launch dim 0."""
    R = pytest.importorskip("runtime")
    doc = " ".join(kernel.Kernel._opt_nolocals.__doc__.split())
    assert "largest divisor <= 32 of launch dim 0" in D.COLOR_LEGEND["BLUE"] and "largest divisor <= 32" in doc
    # tinygrad 0.9.1 pads the local size with 1s (get_grouped_dims): one thread a work-group
    assert "in work-groups of 1 thread in tinygrad" in D.COLOR_LEGEND["BLUE"] and "local size [1, 1, 1]" in doc
    assert "leaves the work-group size to the device" not in doc
    nolocals = Kernel(*elementwise_ast(4096))
    for opt in (Opt(OptOps.NOLOCALS), Opt(OptOps.UPCAST, 0, 4)):
        nolocals.apply_opt(opt)
    assert R.render(nolocals).local_size is None and R.render(nolocals).global_size == [1024, 1, 1]
    for dim0, group in [(96, 32), (100, 25), (7, 7), (64, 32), (33, 11)]:  # the largest divisor <= 32
        assert R.runtime_local_size([dim0, 3, 1]) == [group, 1, 1]
    k = Kernel(*elementwise_ast(96))
    k.apply_opt(Opt(OptOps.NOLOCALS))
    launch = R.Launch(k, R.random_inputs(k), {})
    assert launch.local_size == [32, 1, 1]  # what the launch really uses
    out = io.StringIO()
    sys.stdout, saved = out, sys.stdout
    try:
        R.main(["show", "elementwise", "--opt", "NOLOCALS"])
    finally:
        sys.stdout = saved
    assert "runtime.py launches groups of the largest divisor <= 32 of dim 0" in out.getvalue()


def test_every_line_fits_100_columns_off_a_terminal():
    for view in ("", "--explain", "--loops", "--map"):
        r = run_bare("demo", *([view] if view else []), color=False)
        wide = [x for x in r.stdout.splitlines() if len(x) > 100]
        assert r.returncode == 0 and not wide, (view, wide[:3])


def test_the_legend_is_printed_once_and_only_for_all_kernels():
    all_kernels = run_bare("demo", color=False).stdout
    assert all_kernels.count("Each axis of a kernel's shape is coloured by its role") == 1
    assert all_kernels.count(D.COLOR_LEGEND["magenta"]) == 1
    assert "coloured by its role" not in run_bare("demo", "matvec", color=False).stdout


def test_yellow_and_magenta_sit_in_the_order_their_opts_were_applied():
    """The README's colour order holds left to right but for the register axes."""
    k = Kernel(*matmul_ast(64, 64, 64))
    for opt in (Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UPCAST, 0, 4)):
        k.apply_opt(opt)
    assert k.colors()[-2:] == ["magenta", "yellow"]
    readme = " ".join(open(os.path.join(ROOT, "README.md")).read().split())
    assert "in this order from left to right" not in readme and "in the order their opts were applied" in readme


def test_a_symbolic_axis_gets_no_local_size():
    """attention's axis 0 is i tokens long: no local size divides a symbolic size (i % 2 is no number), so _locals
    finds nothing to_local and records nothing, as tinygrad's applies nothing."""
    k, decisions = weighed(D.attention_ast(64, 1024), heuristics=HAND_CODED)
    assert k.first_reduce == 1 and not isinstance(k.full_shape[0], int)
    assert "_locals" not in {d.heuristic for d in decisions} and k.local_dims == 0


def test_map_says_the_launch_numbers_blue_axes_the_other_way_round():
    assert "get_group_id(0) is the last blue axis" in demo("matmul", "map")
    assert "get_group_id(0) is the last blue axis" not in demo("matvec", "map")  # one blue axis: nothing to say


def test_verify_counts_kernels_and_runs_apart(device, capsys):
    """Attention runs at 3 lengths; that is 1 kernel verified in 3 runs, not '3 kernels'."""
    import runtime

    assert runtime.main(["verify", "attention"]) == 0
    out = capsys.readouterr().out
    assert "1 kernel verified (3 runs: a symbolic kernel runs at several lengths), 0 failed" in out


# ============================================================================================================
# each heuristic's rule predicts its decision: on kernels the heuristics reach (the demo kernels at several sizes
# on every target, the golden corpus, each after a random prefix of opts), every decision's candidates, keys and
# notes are facts of the state the heuristic saw, recomputed here from its ShapeTrackers and sizes, and what it
# took is what its rule says it takes: the smallest key of those not ruled out (_locals: the first 3; masked
# axes: all). HEURISTICS_FUZZ=N tries N random kernels (default 40).
# ============================================================================================================

SIZES = [
    (elementwise_ast, [(4096,), (30,), (1 << 20,)]),
    (D.broadcast_ast, [(256, 256), (7, 96), (1024, 3)]),
    (D.sum_ast, [((16,),), ((1 << 20,),), ((64, 64), (1,)), ((512, 256), (0,)), ((3, 5, 7), (2,))]),
    (matvec_ast, [(1024, 768), (256, 64), (64, 40), (4096, 4096)]),
    (matmul_ast, [(16, 16, 16), (64, 48, 32), (384, 384, 384), (20, 20, 2), (512, 512, 512)]),
    (D.conv2d_ast, [(), (1, 4, 6, 6, 3), (2, 3, 5, 5, 8, 3, 1, 2)]),
    (D.mean_var_ast, [(512, 256), (64, 1024), (8, 8)]),
    (D.image_matvec_ast, [(256, 64), (64, 256)]),
    (D.attention_ast, [(64, 1024), (8, 16)]),
    (D.cat_ast, [(), (4, 3, 5), (64, 1, 2)]),
]
PREFIXES = [Opt(op, axis, amt) for op in (OptOps.UPCAST, OptOps.LOCAL) for axis in (0, 1) for amt in (0, 2, 4)]
PREFIXES += [Opt(op, 0, amt) for op in (OptOps.UNROLL, OptOps.GROUP, OptOps.GROUPTOP) for amt in (0, 2, 4, 16)]
PREFIXES += [Opt(OptOps.NOLOCALS), Opt(OptOps.PADTO, 0, 32), Opt(OptOps.PADTO, 1, 8), Opt(OptOps.UPCASTMID, 0, 4)]


def _linearizer(tc_opt: int):
    """optimize with this tc_opt: the required opts, then tensor cores, else the hand-coded heuristics."""
    return lambda k: (k.required_optimizations() or k.apply_tensor_cores(1, tc_opt=tc_opt)
                      or k.hand_coded_optimizations())


def _weighed_kernels(count: int, seed: int = 24):
    """(label, start, tuned, decisions): every corpus kernel; then `count` random ones, a demo builder at one of its
    sizes on a random target, after 0 to 2 random opts that apply (none: as optimize, tc_opt 0-2)."""
    import random

    rng = random.Random(seed)
    for name, ast, target in corpus_kernels():
        yield (name, Kernel(*ast, opts=TARGETS[target]), HAND_CODED)
    for n in range(count):
        build, sizes = rng.choice(SIZES)
        args, target = rng.choice(sizes), rng.choice(list(TARGETS))
        k = Kernel(*build(*args), opts=TARGETS[target])
        prefix = []
        for opt in rng.sample(PREFIXES, rng.choice((0, 0, 1, 2))):
            try:
                k.apply_opt(opt)
                prefix.append(opt)
            except kernel.KernelOptError:
                pass
        yield (f"{build.__name__}{args} {target} {' '.join(map(str, prefix))}", k, HAND_CODED if prefix else
               _linearizer(rng.choice((0, 1, 2))))  # fmt: skip


def _weighed(count: int, seed: int) -> list[tuple[str, Kernel, Kernel, list[tuple[Decision, list[Opt]]], Callable]]:
    """(label, start, tuned, record, heuristics): each kernel, tuned, and its record (D.record_steps)."""
    found = []
    for label, start, heuristics in _weighed_kernels(count, seed):
        try:
            tuned, decisions = D.weighed(start, heuristics)
            found.append((label, start, tuned, D.record_steps(decisions, tuned.applied_opts), heuristics))
        except kernel.KernelOptError:
            continue  # hand_coded_optimizations refused the prefix (a LOCAL after NOLOCALS): it changed nothing
    return found


WEIGHED = _weighed(int(os.environ.get("HEURISTICS_FUZZ", 40)), int(os.environ.get("HEURISTICS_FUZZ_SEED", 24)))


def _seen(start: Kernel, tuned: Kernel, d: Decision) -> Kernel:
    """The kernel decision d looked at: the start with the opts applied before d."""
    k = start.copy()
    for opt in tuned.applied_opts[len(start.applied_opts) : d.step]:
        k.apply_opt(opt)
    return k


def _applied(k: Kernel, opts: list[Opt]) -> list[Opt]:
    """opts applied to a copy of k, in order, up to the first apply_opt refuses: the ones it took."""
    k, taken = k.copy(), []
    for opt in opts:
        try:
            k.apply_opt(opt)
        except kernel.KernelOptError:
            break
        taken.append(opt)
    return taken


def _unit_stride_4(k: Kernel, i: int) -> list[int]:
    st = k.sts[i]
    return [a for a in st.unit_stride_axes(ignore_valid=True) if st.shape[a] % 4 == 0]


def _pixel(k: Kernel, a: int) -> Opt:
    return Opt(OptOps.UPCAST, a, 4) if a < k.first_reduce else Opt(OptOps.UNROLL, a - k.first_reduce, 4)


def _expected(d: Decision, k: Kernel, taken_axes: set[int]) -> tuple[dict, list[Opt] | None]:
    """What tinygrad's branch d.heuristic computes looking at k (its values, under tinygrad's names) and the opts it
    applies next (None: a branch that applies opts one at a time on a changing kernel, checked by the caller);
    recomputed here from k's ShapeTrackers and sizes. taken_axes: the axes the broadcast loop upcast already."""
    h, w, fr = d.heuristic, d.weighed, k.first_reduce
    last = [st.views[-1].strides for st in k.sts]
    if h == "_upcast_broadcast_axes":
        assert kernel.prod(k.sts[0].shape[:fr]) >= 1024
        xb = sorted((sum(s[a] > 0 for s in last), sum(s[a] for s in last), a, amt) for a in range(fr)
                    for amt in (3, 4) if a not in taken_axes and isinstance(k.full_shape[a], int)
                    and k.full_shape[a] % amt == 0 and any(s[a] == 0 and all(x[1] != 0 for x in k.upcasted_axis(i))
                                                           for i, s in enumerate(last)))  # fmt: skip
        return {"xb_choices": xb}, [Opt(OptOps.UPCAST, xb[0][2], xb[0][3])]
    if h == "_locals" and "NOLOCALS" in w:
        return {"NOLOCALS": 1}, [Opt(OptOps.NOLOCALS)]
    if h == "_locals":
        ranking = [(any(s[a] == 0 for s in last), a) for a in range(fr)]
        to_local, threads = [], 1
        for _, a in sorted(ranking, key=lambda x: (-x[0], -x[1])):
            sizes = [x for x in [32] * (a == 0) + [16, 8, 4, 3, 2] if k.full_shape[a] % x == 0 and threads * x <= 128]
            if sizes:
                to_local.append((a, sizes[0]))
                threads *= sizes[0]
        opts, gone = [], 0
        for a, sz in sorted(to_local[:3]):  # a LOCAL of a whole axis removes it: the next counts one lower
            opts.append(Opt(OptOps.LOCAL, a - gone, sz))
            gone += k.full_shape[a] == sz
        return {"local_axis_ranking": ranking, "to_local": to_local}, opts
    if h == "_grouping" and "sz" in w:
        sizes = [256, 16] if kernel.prod(k.sts[0].shape[:fr]) <= 32 else [16]
        assert w["sz"] in sizes and all(st.shape[fr] % w["sz"] == 0 or st.shape[fr] == 1 for st in k.sts)
        return w, _applied(k, [Opt(OptOps.GROUPTOP, 0, w["sz"])])
    if h == "_grouping":
        axes = k.sts[0].unit_stride_axes()
        return {"axes": axes}, [Opt(OptOps.UPCASTMID, axes[0], 4)]
    if h == "_matvec":
        g = next(g for g in range(k.global_dims) if k.full_shape[fr] % 8 == 0 and k.full_shape[g] % 16 == 0)
        return {"global_idx": g}, [Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, g, 4), Opt(OptOps.UPCAST, g, 4)]
    if h == "_unroll_reduce":
        s, last_axis = k.full_unupcasted_shape[-1], len(k.full_unupcasted_shape) - 1 - fr
        if not (isinstance(s, int) and s <= 32):
            return {"s": s}, [Opt(OptOps.UNROLL, last_axis, 4)] if s % 4 == 0 else []
        after = k.copy()
        after.apply_opt(whole := Opt(OptOps.UNROLL, last_axis, 0))
        s2 = after.full_unupcasted_shape[-1]
        more = s <= 3 and after.first_reduce < after.shape_len - after.upcasted and isinstance(s2, int) and s2 <= 3
        return {"s": s}, [whole] + [Opt(OptOps.UNROLL, len(after.full_unupcasted_shape) - 1 - fr, 0)] * more
    if h == "_default_upcast":
        assert k.upcasted == 0 and k.full_unupcasted_shape[-1] % 4 == 0
        return {"splits": 4}, [Opt(OptOps.UPCAST, len(k.full_unupcasted_shape) - 1, 4)]
    if h == "_upcast_masked_axes":
        to_upcast = []
        for a in range(fr):
            n = kernel.prod(k.full_shape[k.shape_len - k.upcasted :]) * kernel.prod(k.full_shape[j] for j in to_upcast)
            if isinstance(k.full_shape[a], int) and k.full_shape[a] <= 7 and n * k.full_shape[a] <= 49 and \
                    any(st.axis_is_masked(a) for st in k.sts):  # fmt: skip
                to_upcast.append(a)  # an axis that doesn't fit is skipped, the next tried
        return {"to_upcast": to_upcast}, [Opt(OptOps.UPCAST, a, 0) for a in to_upcast[::-1]]
    if h in ("required_optimizations", "_image_float4"):
        i = w.get("buf_index", 0)
        axes = _unit_stride_4(k, i)
        assert isinstance(k.bufs[i].dtype, kernel.ImageDType) and all(a < k.shape_len - k.upcasted for a in axes)
        weighed = ({"buf_index": i} if h == "_image_float4" else {}) | {"unit_stride_axes_mul_4": axes}
        return weighed, [_pixel(k, axes[0])]
    if h == "_apply_tc_opt":
        mul = k.reduceop.src[0].src[0] if k.reduceop.src[0].op is kernel.UnaryOps.CAST else k.reduceop.src[0]
        a, b = (k.sts[k.bufs.index(x.arg if x.op is kernel.BufferOps.LOAD else x.src[0].arg)].real_strides()
                for x in mul.src)  # fmt: skip
        (n, m, kk), tc = w["axes"], w["tc"]
        assert a[n] == 0 and b[m] == 0 and kk >= fr and tc in k.opts.tensor_cores
        pads = tuple((x, tc.dims[i]) for i, x in enumerate(w["axes"]) if k.full_shape[x] % tc.dims[i])
        return {"tc": tc, "axes": w["axes"], "axis_pads": pads}, None  # its opt: the TC opt (the caller checks)
    assert h == "apply_tensor_cores", h
    tco, c, opts = k.tensor_core_opts, k.copy(), []
    for dim in (1, 0):  # upcast M, then N, by the largest of 5, 4, 3, 2 that divides it
        if tco.axes_exist[dim] and (amt := next((x for x in (5, 4, 3, 2) if c.full_shape[tco.axes[dim]] % x == 0), 0)):
            c.apply_opt(opt := Opt(OptOps.UPCAST, tco.axes[dim], amt))
            opts.append(opt)
    if c.tensor_core and tco.axes_exist[0] and (amt := next((x for x in (4, 2) if c.full_shape[tco.axes[0]] % x == 0),
                                                            0)):  # fmt: skip
        opts.append(Opt(OptOps.LOCAL, tco.axes[0], amt))
    return {"axes": tco.axes, "axes_exist": tco.axes_exist}, opts


def test_the_check_reaches_every_heuristic_and_its_declines():
    seen = {(d.heuristic, bool(opts)) for *_, ds, _ in WEIGHED for d, opts in ds}
    for h in ("_matvec", "_grouping", "_upcast_masked_axes", "_upcast_broadcast_axes", "_locals", "_default_upcast",
              "_apply_tc_opt", "apply_tensor_cores", "required_optimizations", "_image_float4"):  # fmt: skip
        assert (h, True) in seen, h
    assert ("_unroll_reduce", False) in seen and ("_unroll_reduce", True) in seen  # a long reduce 4 doesn't divide
    assert len(WEIGHED) >= 236 + 30


def test_every_heuristic_opt_follows_a_record_and_recording_changes_nothing():
    """Every opt the heuristics added comes after a decision (record_steps gives it to the last one before it); a run
    that records nothing adds the same opts; the steps never go back."""
    for label, start, tuned, record, heuristics in WEIGHED:
        added = tuned.applied_opts[len(start.applied_opts) :]
        assert [o for _, opts in record for o in opts] == added, label
        assert not record or record[0][0].step == len(start.applied_opts), label
        assert [d.step for d, _ in record] == sorted(d.step for d, _ in record), label
        plain = start.copy()
        heuristics(plain)
        assert plain.applied_opts == tuned.applied_opts and plain.decisions is None, label


def test_each_record_is_what_tinygrads_rule_computes_and_the_opts_after_it_are_what_it_applies():
    """Each decision's values are recomputed from the state its branch saw, and the opts that follow it are the ones
    the branch applies with those values; GROUPTOP's sizes are tried in order until apply_opt takes one."""
    for label, start, tuned, record, _ in WEIGHED:
        taken_axes: set[int] = set()  # the broadcast loop's upcasted_axis
        for j, (d, opts) in enumerate(record):
            k = _seen(start, tuned, d)
            try:
                weighed, want = _expected(d, k, taken_axes)
            except (AssertionError, StopIteration, IndexError) as e:
                raise AssertionError(f"{label}: {d.heuristic} {d.weighed}") from e
            assert d.weighed == weighed, (label, d.heuristic, d.weighed, weighed)
            if d.heuristic == "_apply_tc_opt":
                assert [o.op for o in opts] == [OptOps.TC] and d.weighed["tc"] is tuned.tensor_core, label
            else:
                assert opts == want, (label, d.heuristic, d.weighed, opts, want)
            if d.heuristic == "_grouping" and d.weighed.get("sz") == 256 and not opts:  # refused: 16 is tried next
                fr = k.first_reduce
                assert all(st.shape[fr] % 16 == 0 or st.shape[fr] == 1 for st in k.sts) <= (
                    record[j + 1][0].weighed == {"sz": 16}), label
            taken_axes |= {o.axis for o in opts if d.heuristic == "_upcast_broadcast_axes"}


def test_explain_prints_each_decision_as_the_heuristics_recorded_it():
    """--explain's lines under a state are the decisions taken looking at it: `heuristic: rule`, a line `name = value`
    per value it computed, then `-> ` and the opts its branch applied (or why none)."""
    for name, demo_kernel in [(n, d) for n, d in DEMOS.items() if not d.opts]:  # the heuristics choose
        out = demo(name, "explain").splitlines()
        start = Kernel(*demo_kernel.build(), opts=TARGETS[demo_kernel.target])
        tuned, decisions = D.weighed(start)
        at = 0
        for d, opts in D.record_steps(decisions, tuned.applied_opts):
            k = _seen(start, tuned, d)
            at = out.index(f"    {d.heuristic}: {D.rule(d, k, D.buffer_names(k, demo_kernel.buffers))}", at) + 1
            values = [f"      {n} = {D._value(v)}" for n, v in d.weighed.items()]
            assert out[at : at + len(values)] == values, name
            applied = "      -> " + " ".join(map(str, opts)) if opts else "      -> no opt"
            assert out[at + len(values)] == applied, name


def _reason_holds(why: str, opt: Opt, k: Kernel) -> bool:
    """Is the step table's reason for `opt` true of k, the kernel just before it (the opt, its axis and amount, and
    the sizes and strides the reason names)?"""
    axis = opt.real_axis(k) if opt.axis is not None else None
    size = k.full_shape[axis] if axis is not None else None
    patterns = {
        r"work-group: (\d+) threads along axis (\d+)": lambda n, a: opt == Opt(OptOps.LOCAL, int(a), int(n)),
        r"matvec: (\d+) threads share each output's reduce \(GROUP\)": lambda n: opt == Opt(OptOps.GROUP, 0, int(n)),
        r"matvec: (\d+) threads per work-group along axis (\d+)": lambda n, a: opt == Opt(OptOps.LOCAL, int(a), int(n)),
        r"matvec: each thread computes (\d+) outputs along axis (\d+)": lambda n, a: (
            opt == Opt(OptOps.UPCAST, int(a), int(n))
        ),
        r"(.+) ha(?:s|ve) stride 0 on axis (\d+): upcast (\d+) (?:to reuse its loads|\(the rule counts a constant too: "
        r"no load to reuse\))": lambda names, a, n: (
            opt == Opt(OptOps.UPCAST, int(a), int(n))
            and why.endswith("loads") == any(not x.startswith("the constant ") for x in names.split(" and "))
            and {n for n in names.split(" and ")} == {n for i, n in enumerate(D.buffer_names(k))
                                                      if k.sts[i].views[-1].strides[int(a)] == 0}
        ),
        r"short reduce axis \((\d+)\): unroll it whole": lambda s: (
            opt.op is OptOps.UNROLL and opt.amt == 0 and size == int(s) <= 32
        ),
        r"tiny reduce: unroll the next reduce axis whole too": lambda: opt.op is OptOps.UNROLL and size <= 3,
        r"long reduce axis: unroll the loop by 4": lambda: opt.op is OptOps.UNROLL and opt.amt == 4 and size > 32,
        r"symbolic reduce axis: unroll the loop by 4": lambda: (
            opt.op is OptOps.UNROLL and opt.amt == 4 and not isinstance(size, int)
        ),
        r"(\d+) outputs? <= 2048: (\d+) threads share each output's reduce": lambda n, t: (
            opt == Opt(OptOps.GROUPTOP, 0, int(t)) and kernel.prod(k.sts[0].shape[: k.first_reduce]) == int(n) <= 2048
        ),
        r"nothing upcast yet: upcast the last axis by 4": lambda: (
            k.upcasted == 0 and opt == Opt(OptOps.UPCAST, len(k.full_unupcasted_shape) - 1, 4)
        ),
        r"small masked axis (\d+): upcast it whole": lambda a: opt == Opt(OptOps.UPCAST, int(a), 0) and size <= 7,
        r"image data(\d+): (upcast|unroll) its unit-stride axis by 4 \(one pixel\)": lambda b, op: (
            opt.amt == 4
            and opt.op.name.lower() == op
            and k.sts[[getattr(x, "idx", None) for x in k.bufs].index(int(b))].shape[axis] % 4 == 0
        ),
        r"image output: upcast mid-reduce by 4": lambda: opt.op is OptOps.UPCASTMID and opt.amt == 4,
        r"tensor core: upcast (N|M) for reuse": lambda d: (
            opt.op is OptOps.UPCAST and opt.axis == k.tensor_core_opts.axes["NM".index(d)]
        ),
        r"tensor core: more of N as local threads": lambda: (
            opt.op is OptOps.LOCAL and opt.axis == k.tensor_core_opts.axes[0]
        ),
        r"tensor core: .*": lambda: (
            opt.op is OptOps.TC
        ),  # its words: test_the_tensor_core_step_names_the_opts_it_applied
        r"NOLOCALS=1: no work-groups of the kernel's own": lambda: opt.op is OptOps.NOLOCALS,
    }
    for pattern, holds in patterns.items():
        if m := re.fullmatch(pattern, why):
            return bool(holds(*m.groups()))
    raise AssertionError(f"a reason no test checks: {why!r}")


def test_every_step_table_reason_is_true_of_the_kernel_it_was_given_for():
    for label, start, tuned, record, _ in WEIGHED:
        state = start.copy()
        for d, opt in [(d, opt) for d, opts in record for opt in opts]:
            why = D.reason(d, opt, state, D.buffer_names(state))
            assert _reason_holds(why, opt, state), (label, opt, why)
            state.apply_opt(opt)


@pytest.mark.parametrize("target", ["metal", "cuda"])
@pytest.mark.parametrize("tc_opt", [0, 1, 2])
def test_the_tensor_core_step_names_the_opts_it_applied(target, tc_opt):
    """The TC step's sentence is its core's steps: K unrolled by the magenta axis's size, the
    yellow axes N or M by their sizes, the cyan (warp) axes N or M in order, and the padding; N being an axis A has
    stride 0 on and M one B has, read off the kernel after the step. Every core of the target, sizes that fit and
    (tc_opt 2) sizes that must be padded."""
    checked = 0
    for tc in TARGETS[target].tensor_cores:
        acc = tc.dtype_out if tc.dtype_out != tc.dtype_in else None
        for size in (64, 60):
            k = Kernel(*matmul_ast(size, size, size, tc.dtype_in, acc), opts=TARGETS[target])
            try:
                tuned, decisions = D.weighed(k, lambda k: k.apply_opt(Opt(OptOps.TC, 0, tc_opt)))
            except kernel.KernelOptError:
                assert size % 8 and tc_opt < 2  # only tc_opt 2 pads
                continue
            ((d, opts),) = D.record_steps(decisions, tuned.applied_opts)
            said = D.reason(d, opts[0], k, D.buffer_names(k))
            assert str(d.weighed["tc"]) == str(tuned.tensor_core) == str(tc) and said.startswith("tensor core: ")
            said = said.removeprefix("tensor core: ")
            # before: N is the axis A has stride 0 on, M the one B has, K the reduce; each is padded if it must be
            mul = (
                tuned.reduceop.src[0].src[0]
                if tuned.reduceop.src[0].op is kernel.UnaryOps.CAST
                else tuned.reduceop.src[0]
            )
            ab = [k.bufs.index(x.arg if x.op is kernel.BufferOps.LOAD else x.src[0].arg) for x in mul.src]  # A and B
            a, b = (k.sts[i].real_strides() for i in ab)
            nmk = [a.index(0), b.index(0), k.first_reduce]
            pads = [f"pad axis {x} to a multiple of {n}" for x, n in zip(nmk, tc.dims) if k.full_shape[x] % n]
            # after: each register and cyan axis is N or M by which of A and B has stride 0 on it
            colors, shape = tuned.colors(), tuned.full_shape
            a, b = (tuned.sts[i].real_strides(ignore_valid=True) for i in ab)
            dim = ["N" if a[j] == 0 else "M" if b[j] == 0 else "K" for j in range(tuned.shape_len)]
            steps = [f"{'unroll' if c == 'magenta' else 'upcast'} {dim[j]} by {shape[j]}" for j, c in enumerate(colors)]
            steps = [x for x, c in zip(steps, colors) if c in ("magenta", "yellow")]
            warp = [j for j, c in enumerate(colors) if c == "cyan"]
            local = f"local {' '.join(f'{dim[j]} {shape[j]}' for j in warp)}"
            expected = "; ".join(pads + [", ".join(steps + [local])])
            expected += f" (a warp of {kernel.prod(shape[j] for j in warp)} threads)"
            assert said == expected, (tc, size)
            assert "upcast and local N, M" not in said
            checked += 1
    assert checked >= 2


# ============================================================================================================
# what a student reading along found false, each against the fact
# ============================================================================================================
def _upcastmid() -> Kernel:
    k = Kernel(*DEMOS["upcastmid"].build())
    for opt in ("GROUP:0:8", "UPCASTMID:0:4"):
        k.apply_opt(Opt.parse(opt))
    return k


def test_a_white_axis_is_a_piece_of_an_output_axis_as_the_legend_says():
    """White was called "reduce dims upcast mid-reduce": each white index is an output axis's, writing its own."""
    k = _upcastmid()
    white = [a for a, c in enumerate(k.colors()) if c == "white"]
    assert white and all(k.sts[0].shape[a] == k.full_shape[a] > 1 and k.sts[0].real_strides()[a] for a in white)
    assert D.COLOR_LEGEND["white"].startswith("output dims upcast mid-reduce")


def test_the_map_counts_only_the_green_threads_as_sharing_a_reduce():
    """`upcastmid --map` said 32 green and white threads share a reduce: the 8 green ones do (the C sums 8 parts)."""
    k = _upcastmid()
    text = "\n".join(kernel.ansistrip(x) for x in D.output_map(k))
    green = kernel.prod(s for s, c in zip(k.full_shape, k.colors()) if c == "green")
    said = re.search(r"the (\d+) green threads of each cell's thread share its reduce", text)
    assert said and int(said.group(1)) == green == 8 and "white threads" not in text
    runtime = pytest.importorskip("runtime")
    assert "tidx1 < 8; tidx1++" in runtime.render(k).src


def test_nolocals_loops_shows_the_c_not_the_clang_sentence():
    """--loops said "one thread each (the target has no local threads)" of NOLOCALS on opencl, which has them."""
    for text in (demo("nolocals", "loops"), demo("broadcast", "loops", Opt(OptOps.NOLOCALS))):
        assert "get_global_id" in text and "get_local_id" not in text and "no local threads" not in text


@pytest.mark.parametrize("target", list(TARGETS))
def test_tc_matmul_speaks_of_tensor_cores_only_where_the_tc_opt_applied(target):
    """`tc_matmul --target cuda` said "on Metal's 8x8x8 tensor cores" of a kernel that uses none (cuda's take half)."""
    out = io.StringIO()
    k, _ = D.demo_kernel("tc_matmul", target, out=out, width=1000)
    uses = any(o.op is OptOps.TC for o in k.applied_opts)
    assert uses == (target == "metal") and ("tensor core:" in out.getvalue()) == uses
    assert "on Metal's" not in out.getvalue()


def test_the_masked_axes_rule_says_an_axis_that_doesnt_fit_is_skipped():
    """Masked sizes 5, 3, 7, 2 take axes 0, 1 and 3: the 7 would make 105 elements, so it is skipped and the 2 taken
    (it once said "while the upcast elements stay <= 49", as if the first that didn't fit ended it)."""
    a = kernel.ShapeTracker.from_shape((4, 2, 6, 1)).pad(((0, 1),) * 4)
    ast = (D.store(D.alu(kernel.BinaryOps.ADD, D.load(1, a), D.load(2, kernel.ShapeTracker.from_shape(a.shape)))),)
    start = Kernel(*ast)
    (d, opts), *_ = recorded(ast, heuristics=HAND_CODED)
    assert d.weighed == {"to_upcast": [0, 1, 3]} and [o.axis for o in opts] == [3, 1, 0]
    said = D.rule(d, start, D.buffer_names(start))
    assert "else skipped and the next tried" in said and "while" not in said


def test_what_tinygrad_prints_at_each_debug_level_is_said_where_it_prints():
    """tinygrad 0.9.1 prints MATVEC (hand_coded_optimizations) and TENSOR CORES (_create_tc_opts) at DEBUG >= 3, each
    masked axis it upcasts and xb_choices at DEBUG >= 4, nothing else of the heuristics: kernel.py's banner says so
    and the recording lines of those branches say which (it once said all was printed at DEBUG >= 4); _matvec's
    sizes are tinygrad's TODO, not tuned."""
    import inspect

    source = inspect.getsource(kernel)
    banner = " ".join(source.split("# ==== heuristics:")[1].split("def _weigh")[0].replace("#", " ").split())
    assert '"MATVEC: ..." (the shape, strides and MV_ sizes) and, for a core that fits, "TENSOR CORES ..." at DEBUG' \
        " >= 3; each masked axis it upcasts and xb_choices at DEBUG >= 4; nothing of the other branches" in banner
    debug = {line.split("_weigh(")[1].split(",")[0]: line.split("# tinygrad: ")[1]
             for line in source.splitlines() if "_weigh(" in line and "# tinygrad: DEBUG" in line}  # fmt: skip
    assert debug == {'"_matvec"': "DEBUG >= 3 prints MATVEC: ...", '"_upcast_masked_axes"': "DEBUG >= 4 prints each",
                     '"_upcast_broadcast_axes"': "DEBUG >= 4 prints it"}  # fmt: skip
    matvec = inspect.getsource(Kernel._matvec)
    assert "TODO: adjust/tune based on the wide vs tall/large vs small mat" in matvec and "tuned" not in matvec
