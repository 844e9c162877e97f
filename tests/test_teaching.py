"""The teaching views of the demo (--explain, --loops, --map), what the heuristics weighed (D.weighed), and the
Kernel methods that only tinygrad's linearizer uses.

weighed() runs the heuristics on a copy whose `decisions` is a list, and each branch records what it weighed through
Kernel._take; the tests here check that the copy gets the opts a plain run gets and that each decision's taken
candidates are exactly the opts applied after it, as its rule predicts.

Every kind of sentence the views print is computed from one fact (a stride, a loop's size, a vector width the
renderer uses, a condition of a heuristic). The last part of this file checks the heuristics' sentences against
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
    Candidate,
    Decision,
    Kernel,
    LocalBuffer,
    Opt,
    OptOps,
    ShapeTracker,
    View,
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


def decision(decisions: list[Decision], heuristic: str, step: int) -> Decision:
    return next(d for d in decisions if d.heuristic == heuristic and d.step == step)


def state_seen(ast, target: str, tuned: Kernel, d: Decision) -> Kernel:
    """The kernel as the heuristic saw it: the AST's kernel with the opts applied before the decision."""
    k = Kernel(*ast, opts=TARGETS[target])
    for opt in tuned.applied_opts[: d.step]:
        k.apply_opt(opt)
    return k


HAND_CODED = Kernel.hand_coded_optimizations


# ============================================================================================================
# decisions: what each heuristic weighed, recorded by Kernel._take (the corpus-wide checks are at the end)
# ============================================================================================================


def corpus_kernels():
    """The golden corpus's kernels, with the symbolic and several-reduce ones where they are recorded."""
    cases = [c for name in ("kernels.json", "symbolic.json", "multireduce.json") for c in load_corpus(name)["cases"]]
    return [(c["name"], tuple(lazyop_from_json(a) for a in c["ast"]), c["target"]) for c in cases]


def test_weighed_leaves_the_kernel_it_is_given_as_it_was():
    k = Kernel(*matmul_ast(64, 64, 64))
    tuned, decisions = D.weighed(k)
    assert k.applied_opts == [] and k.decisions is None and tuned.applied_opts and decisions


def test_a_copy_records_on_its_own_list():
    k = Kernel(*matmul_ast(64, 64, 64))
    k.decisions = []
    copy = k.copy()
    copy.hand_coded_optimizations()
    assert copy.decisions and k.decisions == [] and k.copy().decisions == []


def test_matmul_upcast_axis_tie_is_broken_by_the_sum_of_strides():
    """Both axes have 2 moving buffers; axis 1's strides sum to 1 + 1, axis 0's to 512 + 512."""
    d = decision(weighed(matmul_ast(512, 512, 512))[1], "_upcast_broadcast_axes", 0)
    assert [c.key for c in d.candidates] == [(2, 2, 1, 4), (2, 1024, 0, 4)]
    assert d.taken == d.candidates[:1] and [o for o, _ in d.applied] == [Opt(OptOps.UPCAST, 1, 4)]
    assert "data1 has stride 0" in d.candidates[0].note  # a (buffer 1) is broadcast along axis 1


def test_matmul_384_upcasts_by_3_because_the_amount_is_in_the_sort_key():
    d = decision(weighed(matmul_ast(384, 384, 384))[1], "_upcast_broadcast_axes", 0)
    assert [c.key for c in d.candidates[:2]] == [(2, 2, 1, 3), (2, 2, 1, 4)]
    assert [o for o, _ in d.applied] == [Opt(OptOps.UPCAST, 1, 3)]


def test_matvec_decision_names_its_rule_and_candidates():
    d = decision(weighed(matvec_ast(1024, 768))[1], "_matvec", 0)
    assert [o for o, _ in d.applied] == [Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 0, 4)]
    assert [(c.key, str(c), c.note) for c in d.candidates] == [
        ((0,), "GROUP:0:8 LOCAL:0:4 UPCAST:0:4", "reduce 768 % 8 = 0, axis 0 (1024) % 16 = 0")
    ]
    assert d.taken == d.candidates
    assert d.rule.startswith("SUM(MUL(LOAD, LOAD)), the first with stride 1 on the reduce, not both with")


def test_a_heuristic_whose_conditions_dont_hold_records_its_rule_and_no_candidates():
    """A matmul is no matvec (both operands have a stride-0 axis) and has 262144 outputs, too many to group."""
    decisions = weighed(matmul_ast(512, 512, 512))[1]
    matvec, grouping = decision(decisions, "_matvec", 0), decision(decisions, "_grouping", 0)
    assert matvec.candidates == grouping.candidates == [] and not matvec.applied and not grouping.applied
    assert grouping.rule.startswith("262144 outputs; with <= 2048")
    assert "(none: this kernel doesn't meet the rule)" in demo("matmul", "explain")


def test_every_branch_that_runs_records_a_decision_naming_the_target_it_lacks():
    """On clang every branch of hand_coded_optimizations runs and records; _grouping and _locals say why not."""
    rules = {d.heuristic: d.rule for d in weighed(D.sum_ast((4096,)), "clang")[1]}
    assert set(rules) == {"_matvec", "_grouping", "_upcast_masked_axes", "_unroll_reduce", "_default_upcast", "_locals"}
    assert rules["_grouping"].startswith("only on a target with local threads and memory")
    assert rules["_locals"] == "only on a target with local threads (not CLANG)"


def test_explain_answers_why_16_and_why_group():
    """sum_axis0 has 256 outputs, more than 32, so only 16 is weighed (256 with <= 32 outputs, as the 1-output sum
    gets); matvec's GROUP is hard-coded, and its docstring says why."""
    axis0, one = (decision(weighed(DEMOS[n].build())[1], "_grouping", 0) for n in ("sum_axis0", "sum"))
    assert [str(c) for c in axis0.candidates] == ["GROUPTOP:0:16"] and axis0.rule.startswith("256 outputs")
    assert [str(c) for c in one.candidates] == ["GROUPTOP:0:256", "GROUPTOP:0:16"] and one.rule.startswith("1 output;")
    assert "GROUP's neighbouring threads read neighbouring elements" in " ".join(Kernel._matvec.__doc__.split())


def test_locals_decision_ranks_broadcast_axes_first_from_the_right():
    d = next(d for d in weighed(matmul_ast(512, 512, 512))[1] if d.heuristic == "_locals")
    assert [(c.key, str(c)) for c in d.candidates] == [((-1, -1), "LOCAL:1:16"), ((-1, 0), "LOCAL:0:8")]
    assert d.taken == d.candidates
    assert [o for o, _ in d.applied] == [Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.LOCAL, 1, 16)]  # applied in axis order


def test_tensor_core_decision_lists_the_cores_and_axes_weighed():
    d = weighed(matmul_ast(256, 256, 256), "metal")[1][0]
    assert d.heuristic == "_apply_tc_opt" and [o for o, _ in d.applied] == [Opt(OptOps.TC, 0, 0)]
    assert str(d.candidates[0]) == "WMMA_8_8_8_float_float" and d.taken == d.candidates[:1]
    assert d.candidates[0].note.startswith("N = axis 1 (256), M = axis 0 (256), K = axis 2 (256): unroll K by 8")


def test_an_opt_apply_opt_refuses_is_ruled_out_with_its_refusal_and_the_next_taken():
    """_grouping tries GROUPTOP by 256, then 16, as tinygrad's try/except does: 256 threads' float accumulators
    (1024 bytes) are too much shared memory for a target of 1000, and the record says apply_opt's reason."""
    small = dataclasses.replace(TARGETS["opencl"], shared_max=1000)
    k = Kernel(*D.sum_ast((16, 4096), (1,)), opts=small)
    tuned, decisions = D.weighed(k, HAND_CODED)
    d = decision(decisions, "_grouping", 0)
    assert [c.key for c in d.candidates] == [None, (-16,)] and d.taken == d.candidates[1:]
    assert d.candidates[0].note.startswith("apply_opt refuses: exceeds maximum shared memory size")
    assert tuned.applied_opts[0] == Opt(OptOps.GROUPTOP, 0, 16)


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
    assert "_matvec: SUM(MUL(LOAD, LOAD)), the first with stride 1 on the reduce" in out


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


def test_the_broadcast_loop_stops_with_a_decision_with_no_candidates():
    """matmul, broadcast, conv2d and attention stop with stride-0 axes left: a last decision weighed none."""
    for name in ("matmul", "broadcast", "conv2d", "attention"):
        rounds = [d for d in weighed(DEMOS[name].build())[1] if d.heuristic == "_upcast_broadcast_axes"]
        assert rounds and not rounds[-1].candidates and all(d.taken for d in rounds[:-1]), name


def test_conv2d_sort_keys_can_be_recomputed_from_what_explain_prints():
    """The key (2, 66, 1, 4) is 2 moving buffers and 32 + 34, the last views' strides printed with
    it; and the ? of real_strides is explained where it is printed."""
    out = demo("conv2d", "explain")
    line = next(x for x in out.splitlines() if "(2, 66, 1, 4)" in x)
    assert line.endswith("last views' strides: out 32, img 34, wt 0")
    assert "? = no single stride" in out and "? = no single stride" not in demo("matmul", "explain")


def test_the_broadcast_rule_counts_threads_not_outputs():
    """After UPCAST:1:4 a 512x512 matmul still has 262144 outputs; 65536 is the threads."""
    ast = matmul_ast(512, 512, 512)
    tuned, decisions = weighed(ast)
    d = decision(decisions, "_upcast_broadcast_axes", 1)
    state = state_seen(ast, "opencl", tuned, d)
    outputs = kernel.prod(state.sts[0].shape)
    per_thread = kernel.prod(state.sts[0].shape[state.shape_len - state.upcasted :])
    assert d.rule.startswith(f"{outputs // per_thread} threads (outputs outside the upcast axes) >= 1024")
    assert outputs == 262144 and "65536 threads" in d.rule and "outputs >= 1024" not in d.rule


def test_grouping_tests_the_outputs_not_the_reduce_length():
    """A 16-element sum of one output gets GROUPTOP:0:16 (one element per thread)."""
    k, decisions = weighed(D.sum_ast((16,)))
    assert k.applied_opts == [Opt(OptOps.GROUPTOP, 0, 16)]
    assert all("long" not in why for d in decisions for _, why in d.applied)


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
        why = {str(o): w for d in weighed(DEMOS[name].build())[1] for o, w in d.applied}
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
    """A constant is no memory: no stride note, and the heuristics name it 'the constant'."""
    out = demo("attention", "explain")
    assert "const 0.125 has stride 0" not in out and "axis 1: the constant" not in out
    assert "the constant 0.125" in out  # where a heuristic counts it (stride 0 on every axis)


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
    """attention's axis 0 is i tokens long: no local size divides a symbolic size (i % 2 is no number)."""
    d = next(d for d in weighed(D.attention_ast(64, 1024), heuristics=HAND_CODED)[1] if d.heuristic == "_locals")
    assert [(str(c), c.key) for c in d.candidates] == [("axis 0", None)] and d.candidates[0].note.endswith(
        "no size fits"
    )


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


def _tc_first(tc_opt: int):
    """optimize with this tc_opt: tensor cores first, else the hand-coded heuristics."""
    return lambda k: k.apply_tensor_cores(1, tc_opt=tc_opt) or k.hand_coded_optimizations()


def _weighed_kernels(count: int, seed: int = 24):
    """(label, start, tuned, decisions): every corpus kernel; then `count` random ones, a demo builder at one of its
    sizes on a random target, after 0 to 2 random opts that apply (none: with tensor cores first, tc_opt 0-2)."""
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
               _tc_first(rng.choice((0, 1, 2))))  # fmt: skip


def _weighed(count: int, seed: int) -> list[tuple[str, Kernel, Kernel, list[Decision], Callable]]:
    found = []
    for label, start, heuristics in _weighed_kernels(count, seed):
        try:
            found.append((label, start, *D.weighed(start, heuristics), heuristics))
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


def _predicted(d: Decision) -> list[Candidate]:
    """The candidates the rule takes: the smallest key of those not ruled out; _locals the first 3 (in key order);
    masked axes: all, applied right to left."""
    keyed = sorted((c for c in d.candidates if c.key is not None), key=lambda c: c.key)
    return keyed[::-1] if d.heuristic == "_upcast_masked_axes" else keyed[:3] if d.heuristic == "_locals" else keyed[:1]


def _in_the_state_seen(d: Decision, k: Kernel) -> list[str]:
    """The opts applied, each LOCAL's axis counted in the shape the heuristic saw (k): applied one by one to a copy of
    it, a LOCAL that takes a whole global axis removes that axis, so the next ones count one lower."""
    k, origin, opts = k.copy(), list(range(k.shape_len)), []
    for o, _ in d.applied:
        opts.append(str(Opt(o.op, origin[o.axis], o.amt) if o.op is OptOps.LOCAL else o))
        if o.op is OptOps.LOCAL and k.full_shape[o.axis] == o.amt:
            origin.pop(o.axis)
        k.apply_opt(o)
    return sorted(opts)


def test_the_check_reaches_every_heuristic_and_its_declines():
    seen = {(d.heuristic, bool(d.applied)) for *_, ds, _ in WEIGHED for d in ds}
    for h in ("_matvec", "_grouping", "_upcast_masked_axes", "_upcast_broadcast_axes", "_unroll_reduce", "_locals"):
        assert {(h, True), (h, False)} <= seen, h
    assert {("_default_upcast", True), ("_apply_tc_opt", True), ("apply_tensor_cores", True)} <= seen
    assert {("required_optimizations", True), ("_image_float4", True)} <= seen
    assert len(WEIGHED) >= 236 + 30


def test_every_heuristic_opt_goes_through_the_record_and_recording_changes_nothing():
    """The opts the decisions applied, in order, are exactly the opts the heuristics added; a run that records
    nothing adds the same; each decision's step is the number of opts the kernel had when it looked."""
    for label, start, tuned, decisions, heuristics in WEIGHED:
        added = tuned.applied_opts[len(start.applied_opts) :]
        assert [o for d in decisions for o, _ in d.applied] == added, label
        plain = start.copy()
        heuristics(plain)
        assert plain.applied_opts == tuned.applied_opts and plain.decisions is None, label
        steps = [
            len(start.applied_opts) + len([o for e in decisions[:j] for o in e.applied]) for j in range(len(decisions))
        ]
        assert [d.step for d in decisions] == steps, label


def test_each_heuristic_takes_what_its_rule_predicts():
    """Keyed candidates are listed in key order; the taken ones are those the rule predicts, and their opts are
    exactly the opts applied (in the shape the heuristic saw); a decision with no candidates applies nothing; every
    opt applied has a reason."""
    for label, start, tuned, decisions, _ in WEIGHED:
        for d in decisions:
            keys = [c.key for c in d.candidates if c.key is not None]
            assert keys == sorted(keys), (label, d.heuristic)
            assert d.taken == _predicted(d), (label, d.heuristic, d.candidates, d.applied)
            taken = sorted(str(o) for c in d.taken for o in c.opts)
            assert taken == _in_the_state_seen(d, _seen(start, tuned, d)), (label, d.heuristic, d.applied)
            assert d.candidates or not d.applied, (label, d.heuristic)
            assert all(why for _, why in d.applied), (label, d.heuristic)


def _facts(d: Decision, k: Kernel) -> None:
    """Each candidate's key, opt and note of decision d, recomputed from k, the kernel it saw."""
    h, cands = d.heuristic, d.candidates
    fr, up, last = k.first_reduce, k.shape_len - k.upcasted, [st.views[-1].strides for st in k.sts]
    names = [f"data{b.idx}" if hasattr(b, "idx") else f"the constant {b.val}" for b in k.bufs]
    outputs = kernel.prod(k.sts[0].shape[:fr])
    if h == "_upcast_broadcast_axes":
        assert d.rule.startswith(f"{kernel.sym_render(outputs)} threads (outputs outside") and outputs >= 1024
        for c in cands:
            axis, amt = c.key[2:]
            strides = [s[axis] for s in last]
            zero = [i for i, s in enumerate(last) if s[axis] == 0 and all(s != 0 for _, s, _ in k.upcasted_axis(i))]
            assert c.key == (sum(s > 0 for s in strides), sum(strides), axis, amt) and k.full_shape[axis] % amt == 0
            stride0 = f"{' and '.join(names[i] for i in zero)} {'has' if len(zero) == 1 else 'have'} stride 0"
            assert c.note == f"{stride0}; last views' strides: " + ", ".join(
                f"{n} {D._txt(s)}" for n, s in zip(names, strides)
            )
            assert str(c) == f"UPCAST:{axis}:{amt}"
    elif h == "_locals" and cands and d.rule != "NOLOCALS=1 (environment)":
        axes = [-c.key[1] if c.key else int(str(c).split()[1]) for c in cands]
        broadcast = {a: any(s[a] == 0 for s in last) for a in range(fr)}
        assert axes == sorted(range(fr), key=lambda a: (-broadcast[a], -a))
        threads = 1
        for axis, c in zip(axes, cands):
            size, sizes = k.full_shape[axis], ([32] if axis == 0 else []) + [16, 8, 4, 3, 2]
            fits = [x for x in sizes if size % x == 0 and threads * x <= 128]  # symbolic: 3*i % 3 == 0
            assert (str(c), c.key) == (
                (f"LOCAL:{axis}:{fits[0]}", (-int(broadcast[axis]), -axis)) if fits else (f"axis {axis}", None)
            )
            assert c.note.endswith(f"{fits[0]} fits ({threads}*{fits[0]} <= 128 threads)" if fits else "no size fits")
            threads *= fits[0] if fits else 1
    elif h == "_grouping" and cands and cands[0].opts[0].op is OptOps.GROUPTOP:
        sizes = [256, 16] if outputs <= 32 else [16]
        assert [str(c) for c in cands] == [f"GROUPTOP:0:{sz}" for sz in sizes] and d.rule.startswith(
            f"{outputs} output"
        )
        for sz, c in zip(sizes, cands):
            divides = all(st.shape[fr] % sz == 0 or st.shape[fr] == 1 for st in k.sts)
            try:
                k.copy().apply_opt(Opt(OptOps.GROUPTOP, 0, sz))
                refused = ""
            except kernel.KernelOptError as e:
                refused = str(e)
            assert (c.key == (-sz,)) == (divides and not refused) and (not divides or c.note.endswith(refused))
    elif h == "_matvec" and cands:
        for g, c in enumerate(cands):
            assert str(c) == f"GROUP:0:8 LOCAL:{g}:4 UPCAST:{g}:4"
            assert (c.key == (g,)) == (k.full_shape[fr] % 8 == 0 and k.full_shape[g] % 16 == 0)
    elif h == "_unroll_reduce" and cands:
        s = k.full_unupcasted_shape[-1]
        if d.rule.startswith("tiny"):
            assert k.full_shape[-1] <= 3 and (cands[0].key is not None) == (isinstance(s, int) and s <= 3)
        else:
            assert cands[0].note.startswith(f"whole: size {D._txt(s)} ")
            assert (cands[0].key is not None) == (isinstance(s, int) and s <= 32)
            assert isinstance(s, int) <= ((cands[1].key is not None) == (s % 4 == 0))
    elif h == "_upcast_masked_axes":
        small = [a for a in range(fr) if isinstance(k.full_shape[a], int) and k.full_shape[a] <= 7]
        assert [c.opts[0].axis for c in cands] == [a for a in small if any(st.axis_is_masked(a) for st in k.sts)]
        elements = kernel.prod(k.full_shape[up:])
        for c in cands:
            n = elements * k.full_shape[c.opts[0].axis]
            assert f"masked: {n} elements" in c.note and (c.key is not None) == (n <= 49)
            elements = n if c.key is not None else elements
    elif h == "_default_upcast" and cands:
        s = k.full_unupcasted_shape[-1]
        assert k.upcasted == 0 and str(cands[0]) == f"UPCAST:{len(k.full_unupcasted_shape) - 1}:4"
        assert (cands[0].key is not None) == (s % 4 == 0)
    elif h == "apply_tensor_cores":
        for c in cands:
            axis, amt = c.opts[0].axis, c.opts[0].amt
            assert axis in k.tensor_core_opts.axes and (c.key is not None) == (k.full_shape[axis] % amt == 0)
    elif h == "_apply_tc_opt" and d.taken:
        mul = k.reduceop.src[0].src[0] if k.reduceop.src[0].op is kernel.UnaryOps.CAST else k.reduceop.src[0]
        a, b = (
            k.sts[k.bufs.index(x.arg if x.op is kernel.BufferOps.LOAD else x.src[0].arg)].real_strides()
            for x in mul.src
        )
        n, m, kk = (int(x) for x in re.findall(r"[NMK] = axis (\d+)", d.taken[0].note))
        assert a[n] == 0 and b[m] == 0 and kk >= fr and str(d.taken[0]) == str(k.opts.tensor_cores[d.taken[0].key[0]])
    elif h in ("required_optimizations", "_image_float4") and cands:
        i = next(j for j, n in enumerate(names) if re.search(rf"image {n}\b", d.rule))
        st = k.sts[i]
        axes4 = [a for a in st.unit_stride_axes(ignore_valid=True) if st.shape[a] % 4 == 0]
        assert [c.key for c in cands] == [(a,) for a in axes4]
        assert [str(c) for c in cands] == [f"UPCAST:{a}:4" if a < fr else f"UNROLL:{a - fr}:4" for a in axes4]


def test_every_candidate_key_and_note_is_a_fact_of_the_state_the_heuristic_saw():
    for label, start, tuned, decisions, _ in WEIGHED:
        for d in decisions:
            try:
                _facts(d, _seen(start, tuned, d))
            except AssertionError as e:
                raise AssertionError(f"{label}: {d.heuristic}: {d.rule}") from e


def test_explain_prints_each_decision_as_the_heuristics_returned_it():
    """--explain's lines under a state are the decisions taken looking at it: `heuristic: rule`, then a line per
    candidate with its key (- if ruled out), opts and note, `->` on the taken ones, as weighed() recorded them."""
    for name, demo_kernel in [(n, d) for n, d in DEMOS.items() if not d.opts]:  # the heuristics choose
        out = demo(name, "explain").splitlines()
        rename = D._renamer(Kernel(*demo_kernel.build()), demo_kernel.buffers)
        at = 0
        for d in weighed(demo_kernel.build(), demo_kernel.target)[1]:
            at = out.index(f"    {d.heuristic}: {rename(d.rule)}", at) + 1
            for c, line in zip(d.candidates, out[at:]):
                key, label, note = (re.escape(x) for x in ("-" if c.key is None else str(c.key), str(c), c.note))
                mark = "->" if c in d.taken else "  "
                assert re.fullmatch(rf"      {mark} {key} +{rename(label)} +{rename(note)}", line), (name, line)
            assert d.candidates or out[at] == "         (none: this kernel doesn't meet the rule)"


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
        r"(.+) ha(?:s|ve) stride 0 on axis (\d+): upcast (\d+) to reuse its loads": lambda names, a, n: (
            opt == Opt(OptOps.UPCAST, int(a), int(n))
            and all(k.sts[i].views[-1].strides[int(a)] == 0 for i, b in enumerate(k.bufs) if k._names([i]) in names)
        ),
        r"short reduce axis \((\d+)\): unroll it whole": lambda s: (
            opt.op is OptOps.UNROLL and opt.amt == 0 and size == int(s) <= 32
        ),
        r"tiny reduce: unroll the next reduce axis whole too": lambda: opt.op is OptOps.UNROLL and size <= 3,
        r"long reduce axis: unroll the loop by 4": lambda: opt.op is OptOps.UNROLL and opt.amt == 4 and size > 32,
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
    for label, start, tuned, decisions, _ in WEIGHED:
        state = start.copy()
        for opt, why in [step for d in decisions for step in d.applied]:
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
            d = decisions[0]
            (c,) = d.taken
            said = c.note.split(": ", 1)[1]
            assert str(c) == str(tuned.tensor_core) == str(tc) and [w for _, w in d.applied] == [f"tensor core: {said}"]
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
