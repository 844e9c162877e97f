"""The teaching views of the demo (--explain, --loops, --map), the decisions the heuristics record for them, and the
Kernel methods that only tinygrad's linearizer uses.

Recording a decision must never change one: test_golden.py replays the corpus with the recording in place, and
the tests here check that the recorded choices are exactly the opts applied.

Every kind of sentence the views print is computed from one fact (a stride, a loop's size, a vector width the
renderer uses, a condition of a heuristic). The last part of this file checks the heuristics' sentences against
the state the heuristic looked at; tests/test_sentences.py checks the views' sentences (strides, axis notes, --loops,
--map) against ShapeTracker.indices() and the OpenCL C that runtime.render writes, over the space of states. A step
table reason with no such check fails test_every_step_table_reason_is_true_of_the_kernel_it_was_given_for.
"""

from __future__ import annotations

import io
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
    matmul_ast,
    matvec_ast,
    optimize,
    render_condition,
)
from tests import test_sentences
from tests.common import ROOT
from tests.corpus import lazyop_from_json, load_corpus


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
    cases = [c for name in ("kernels.json", "symbolic.json", "multireduce.json") for c in load_corpus(name)["cases"]]
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
    assert "a: neighbouring threads read 1 apart, thread t takes steps t, t+16, ... of the 1048576 (GROUP)" in group
    assert "(GROUP); loop ridx1: 65536 steps 16 apart" in group
    assert "a: neighbouring threads read 65536 apart, thread t takes its own run of 65536 consecutive steps" in top
    assert "from 65536*t (GROUPTOP); loop ridx1: 65536 steps 1 apart" in top


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
    """Issue 24: --steps alone is --loops --steps; with another view it says what it goes with."""
    alone = run_bare("demo", "matvec", "--steps", color=False)
    assert (
        alone.returncode == 0 and alone.stdout == run_bare("demo", "matvec", "--loops", "--steps", color=False).stdout
    )
    assert alone.stdout.count("parallel for gidx0") == 4  # the start and three opts
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


# ============================================================================================================
# every sentence from a fact, every fact checked against the kernel: the heuristic's code path (the views' sentences
# are checked in tests/test_sentences.py)
# ============================================================================================================


def _replayed(k: Kernel, step: int) -> Kernel:
    """A fresh kernel of k's AST with k's first `step` opts: the state a decision at `step` looked at."""
    fresh = Kernel(*k.ast, opts=k.opts)
    for opt in k.applied_opts[:step]:
        fresh.apply_opt(opt)
    return fresh


def test_broadcast_keys_and_exclusions_are_recomputed_from_the_state_the_heuristic_saw():
    """_upcast_broadcast_axes: each key is (buffers moving, sum of strides, axis, amount) from the last views'
    strides its note prints; the first is taken and is the opt applied; every axis ruled out names a condition
    that holds in that state (the strides of upcast axes read with real_strides, not the heuristic's helper)."""
    seen = set()
    for name, ast, target in corpus_kernels() + [(n, d.build(), d.target) for n, d in DEMOS.items()]:
        k = Kernel(*ast, opts=TARGETS[target])
        k.hand_coded_optimizations()
        decided = [d for d in k.decisions if d.heuristic == "_upcast_broadcast_axes"]
        for d in decided:
            state = _replayed(k, d.step)
            up = state.shape_len - state.upcasted
            ranked = [c for c in d.candidates if c.key is not None]
            for c in ranked:
                axis, amt = c.key[2], c.key[3]
                strides = [st.views[-1].strides[axis] for st in state.sts]
                assert c.key == (sum(s > 0 for s in strides), sum(strides), axis, amt), name
                printed = [x.split(" ")[-1] for x in c.note.split("strides: ")[1].split(", ")]
                assert printed == [kernel._txt(s) for s in strides], name
                assert c.opt == f"UPCAST:{axis}:{amt}"
            assert [c.taken for c in d.candidates] == [c is d.candidates[0] and bool(ranked) for c in d.candidates]
            assert [str(o) for o in d.chosen] == [c.opt for c in ranked[:1]], name
            for c in d.candidates:
                if c.key is not None:
                    continue
                axis = int(c.opt.split()[1])
                zero = [i for i, st in enumerate(state.sts) if st.views[-1].strides[axis] == 0]
                size = state.full_shape[axis]
                why = c.note
                seen.add(why.split()[2] if "already on an upcast axis" not in why else "buffers")
                if "upcast already" in why:
                    assert any(
                        c.opt == f"UPCAST:{axis}:{a}" for e in decided for c in e.candidates if c.taken for a in (3, 4)
                    )
                elif "symbolic" in why:
                    assert not isinstance(size, int)
                elif "divides by neither" in why:
                    assert size % 3 and size % 4
                elif "no buffer has stride 0" in why:
                    assert not zero
                else:
                    assert zero and all(any(s == 0 for s in state.sts[i].real_strides()[up:]) for i in zero), why
    assert seen >= {"upcast", "symbolic", "buffers"}  # "ruled out: upcast already ...", "ruled out: symbolic size"


def test_the_broadcast_stop_line_names_what_stopped_it():
    """Issue 14 item 2: matmul, broadcast, conv2d and attention stop with stride-0 axes left; the stop says why."""
    for name in ("matmul", "broadcast", "conv2d", "attention"):
        out = demo(name, "explain")
        assert "no axis left that a buffer has stride 0 on" not in out
        assert "_upcast_broadcast_axes: stop:" in out and "ruled out:" in out, name
    conv = demo("conv2d", "explain")
    # the first round's UPCAST:1:4 is ruled out in the second, and the reason is printed
    assert "axis 1      ruled out: wt has stride 0 here, but already on an upcast axis too (wt on axis 6)" in conv
    assert "axis 0  ruled out: symbolic size i" in demo("attention", "explain")


def test_conv2d_sort_keys_can_be_recomputed_from_what_explain_prints():
    """Issue 14 item 4: the key (2, 66, 1, 4) is 2 moving buffers and 32 + 34, the last views' strides printed with
    it; and the ? of real_strides is explained where it is printed."""
    out = demo("conv2d", "explain")
    line = next(x for x in out.splitlines() if "(2, 66, 1, 4)" in x)
    assert line.endswith("last views' strides: out 32, img 34, wt 0")
    assert "? = no single stride" in out and "? = no single stride" not in demo("matmul", "explain")


def test_the_broadcast_rule_counts_threads_not_outputs():
    """Issue 14 item 5: after UPCAST:1:4 a 512x512 matmul still has 262144 outputs; 65536 is the threads."""
    k = optimize(Kernel(*matmul_ast(512, 512, 512)))
    d = decision(k, "_upcast_broadcast_axes", 1)
    state = _replayed(k, 1)
    outputs = kernel.prod(state.sts[0].shape)
    per_thread = kernel.prod(state.sts[0].shape[state.shape_len - state.upcasted :])
    assert d.rule.startswith(f"{outputs // per_thread} threads (outputs outside the upcast axes) >= 1024")
    assert outputs == 262144 and "65536 threads" in d.rule and "outputs >= 1024" not in d.rule


def test_grouping_says_it_tests_the_outputs_not_the_reduce_length():
    """Issue 14 item 6: a 16-element sum gets GROUPTOP:0:16 (one element per thread): no 'long reduce'."""
    k = optimize(Kernel(*kernel.sum_ast((16,))))
    assert k.applied_opts == [Opt(OptOps.GROUPTOP, 0, 16)]
    d = decision(k, "_grouping", 0)
    assert "the reduce's length is not tested" in d.rule
    assert all("long" not in why for _, why in k.heuristic_log)


def test_green_notes_come_from_the_op_and_the_loop_stride_in_the_c():
    """Issue 14 item 1: sum_axis0's GROUPTOP threads read 8192 apart and each thread's loop steps 256 apart (not a
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


def test_every_decision_marks_its_taken_candidates_as_data():
    """A decision that applied nothing took no candidate; one that applied opts took at least one, and the taken
    ones' opts are among those it applied (no matching of text against the chosen opts)."""
    for name, ast, target in corpus_kernels():
        k = Kernel(*ast, opts=TARGETS[target])
        k.hand_coded_optimizations()
        for d in k.decisions:
            taken = [c for c in d.candidates if c.taken]
            assert all(isinstance(c, kernel.Candidate) for c in d.candidates)
            if not d.chosen:
                assert not taken, (name, d.heuristic)
            elif d.candidates and d.heuristic not in ("_locals", "apply_tensor_cores"):
                assert taken and {o for c in taken for o in c.opt.split()} <= {str(o) for o in d.chosen}, name
        assert k.heuristic_log == [(o, why) for d in k.decisions for o, why in zip(d.chosen, d.reasons)]
        assert [o for o, _ in k.heuristic_log] == k.applied_opts, name


def test_matvec_step_reasons_are_true_of_the_final_kernel():
    """Issue 14 item 10: no reason claims what a later opt changes ('4 rows per work-group' was true only until the
    UPCAST): a work-group of the final matvec writes 16 outputs, 4 per thread, as the README and --map say."""
    for name in ("matvec", "image"):
        k = optimize(Kernel(*DEMOS[name].build()))
        why = dict((str(o), w) for o, w in k.heuristic_log)
        assert why["LOCAL:0:4"] == "matvec: 4 threads per work-group along axis 0"
        assert why["UPCAST:0:4"] == "matvec: each thread computes 4 outputs along axis 0"
    k = optimize(Kernel(*matvec_ast(1024, 768)))
    cells = kernel._output_cells(k, set(range(64)))
    assert sorted(f for f, c in cells.items() if c["blue"] == [0]) == list(range(16))
    assert {c["yellow"][0]: f for f, c in cells.items() if c["blue"] == [0] and c["cyan"] == [1]} == {
        0: 1,
        1: 5,
        2: 9,
        3: 13,
    }


def test_constants_are_not_reported_as_buffers():
    """Issue 14 item 10: a constant is no memory: no stride note, and the heuristics name it 'the constant'."""
    out = demo("attention", "explain")
    assert "const 0.125 has stride 0" not in out and "axis 1: the constant" not in out
    assert "the constant 0.125" in out  # where a heuristic counts it (stride 0 on every axis)


def test_nolocals_says_what_the_runtime_launches():
    """Issue 14 item 10: NOLOCALS is described one way: no work-group size from the kernel, runtime.py picks the
    largest divisor <= 32 of launch dim 0."""
    R = pytest.importorskip("runtime")
    doc = " ".join(kernel.Kernel._opt_nolocals.__doc__.split())
    assert "largest divisor <= 32 of launch dim 0" in kernel.COLOR_LEGEND["BLUE"] and "largest divisor <= 32" in doc
    # issue 24 item 1: tinygrad 0.9.1 pads the local size with 1s (get_grouped_dims): one thread a work-group
    assert "in work-groups of 1 thread in tinygrad" in kernel.COLOR_LEGEND["BLUE"] and "local size [1, 1, 1]" in doc
    assert "leaves the work-group size to the device" not in doc
    nolocals = Kernel(*elementwise_ast(4096))
    for opt in (Opt(OptOps.NOLOCALS), Opt(OptOps.UPCAST, 0, 4)):
        nolocals.apply_opt(opt)
    assert R.render(nolocals).local_size is None and R.render(nolocals).global_size == [1024, 1, 1]
    for dim0, group in [(96, 32), (100, 25), (7, 7), (64, 32), (33, 11)]:  # the largest divisor <= 32
        assert R.runtime_local_size([dim0, 3, 1]) == [group, 1, 1]
    k = Kernel(*elementwise_ast(96))
    k.apply_opt(Opt(OptOps.NOLOCALS))
    launch = R._Launch(k, R.random_inputs(k), {})
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
    assert all_kernels.count(kernel.COLOR_LEGEND["magenta"]) == 1
    assert "coloured by its role" not in run_bare("demo", "matvec", color=False).stdout


def test_yellow_and_magenta_sit_in_the_order_their_opts_were_applied():
    """Issue 14 item 8: the README's colour order holds left to right but for the register axes."""
    k = Kernel(*matmul_ast(64, 64, 64))
    for opt in (Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UPCAST, 0, 4)):
        k.apply_opt(opt)
    assert k.colors()[-2:] == ["magenta", "yellow"]
    assert "in this order from left to right" not in open(os.path.join(ROOT, "README.md")).read()
    assert "in the order their opts were applied" in open(os.path.join(ROOT, "README.md")).read()


def test_a_heuristic_skipped_for_a_symbolic_size_says_so():
    out = demo("attention", "explain")
    assert "symbolic size i: no size divides it" in out and "no size fits" not in out
    k = Kernel(*kernel.attention_ast(64, 1024))
    k.hand_coded_optimizations()
    assert "symbolic size" in " ".join(c.note for d in k.decisions for c in d.candidates if d.heuristic == "_locals")


def test_map_says_the_launch_numbers_blue_axes_the_other_way_round():
    assert "get_group_id(0) is the last blue axis" in demo("matmul", "map")
    assert "get_group_id(0) is the last blue axis" not in demo("matvec", "map")  # one blue axis: nothing to say


def test_verify_counts_kernels_and_runs_apart(device, capsys):
    """Issue 14 item 10: attention runs at 3 lengths; that is 1 kernel verified in 3 runs, not '3 kernels'."""
    import runtime

    assert runtime.main(["verify", "attention"]) == 0
    out = capsys.readouterr().out
    assert "1 kernel verified (3 runs: a symbolic kernel runs at several lengths), 0 failed" in out


def _reason_holds(why: str, opt: Opt, k: Kernel) -> bool:
    """Is the step table's reason for `opt` true of k, the kernel just before it (the heuristic's code path:
    the opt, its axis and amount, and the sizes and strides the reason names)?"""
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
            and all(k.sts[i].views[-1].strides[int(a)] == 0 for i, b in enumerate(k.bufs) if k._buf_name(i) in names)
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
        r"image (data\d+): (upcast|unroll) its unit-stride axis by 4": lambda b, op: (
            opt.amt == 4 and opt.op.name.lower() == op
        ),
        r"image output: upcast .*by 4.*": lambda: opt.op in (OptOps.UPCAST, OptOps.UPCASTMID) and opt.amt == 4,
        r"tensor core: .*": lambda: opt.op in (OptOps.TC, OptOps.UPCAST, OptOps.LOCAL),
        r"NOLOCALS=1: no work-groups of the kernel's own": lambda: opt.op is OptOps.NOLOCALS,
    }
    for pattern, holds in patterns.items():
        if m := re.fullmatch(pattern, why):
            return bool(holds(*m.groups()))
    raise AssertionError(f"a reason no test checks: {why!r}")


def test_every_step_table_reason_is_true_of_the_kernel_it_was_given_for():
    for name, ast, target in corpus_kernels() + [(n, d.build(), d.target) for n, d in DEMOS.items()]:
        k = Kernel(*ast, opts=TARGETS[target])
        k.hand_coded_optimizations()
        state = Kernel(*ast, opts=TARGETS[target])
        for opt, why in k.heuristic_log:
            assert _reason_holds(why, opt, state), (name, opt, why)
            state.apply_opt(opt)


def test_every_sort_key_printed_is_recomputed_from_the_state_the_heuristic_saw():
    """The keys of _locals ((-broadcast, -axis): broadcast if some buffer's last view has stride 0 on the axis),
    _matvec ((axis,)) and _grouping ((-size,)), recomputed from the kernel at the decision's step; and the
    candidates are printed in key order."""
    for name, ast, target in corpus_kernels():
        k = Kernel(*ast, opts=TARGETS[target])
        k.hand_coded_optimizations()
        for d in k.decisions:
            state = _replayed(k, d.step)
            keys = [c.key for c in d.candidates if c.key is not None]
            if d.heuristic == "_locals" and keys:
                for c in d.candidates:
                    axis = -c.key[1]
                    broadcast = any(st.views[-1].strides[axis] == 0 for st in state.sts)
                    assert c.key == (-int(broadcast), -axis), name
                    assert c.opt == f"axis {axis}" or c.opt.startswith(f"LOCAL:{axis}:")
            elif d.heuristic == "_matvec" and keys:
                assert keys == [(g,) for g in range(state.global_dims)], name
            elif d.heuristic == "_grouping" and keys:
                assert [f"GROUPTOP:0:{-key[0]}" for key in keys] == [c.opt for c in d.candidates], name
            if d.heuristic in ("_locals", "_upcast_broadcast_axes", "_grouping", "_unroll_reduce"):
                assert keys == sorted(keys), (name, d.heuristic)


def test_unroll_notes_name_the_size_the_heuristic_tested():
    for name, ast, target in corpus_kernels():
        k = Kernel(*ast, opts=TARGETS[target])
        k.hand_coded_optimizations()
        for d in (d for d in k.decisions if d.heuristic == "_unroll_reduce" and d.candidates):
            size = _replayed(k, d.step).full_unupcasted_shape[-1]
            assert d.candidates[0].note.startswith(f"whole: size {size} "), name
            assert d.candidates[0].taken == (isinstance(size, int) and size <= 32), name
