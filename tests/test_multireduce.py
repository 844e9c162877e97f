"""Several reduce ops in one kernel, as tinygrad 0.9.1's Kernel has them (`reduceops`, `earlybufs`).

testdata/multireduce.json holds 16 kernels with two reduce ops (merged back to back, as tinygrad's own tests build
them) on the opencl and clang targets, and what tinygrad 0.9.1 did with each: the state after construction, after
the hand-coded heuristics, and after every step of random opt sequences. testdata/multireduce_recorded.json.gz holds
56 more, recorded by us from tinygrad 0.9.1 the same way, on all four targets and with apply_tensor_cores(1): those
16 ASTs and a few of ours (mean and variance, two matvecs, two matmuls in float and half, a matmul beside a MAX).
The replay below checks all of it; the runtime tests run every case on the OpenCL device after the heuristics (and
tensor cores) and, with RUNTIME_MULTIREDUCE=1, after every accepted step; by default after the accepted steps of a
few sequences, chosen to cover every accepted OptOp (of each target, in the recorded cases), see below.

Two deliberate differences: tinygrad 0.9.1 checks only the first reduce op before padding a reduce axis (PADTO), so
it pads a second reduce whose source doesn't keep zeros at zero, and computes a wrong result. kernel.py refuses those
steps; the test that shows the wrong result is below. And tinygrad counts only the first reduce op's __local buffer
against shared_max, while each reduce has its own: kernel.py counts them all, and refuses the steps whose buffers
together don't fit (test_group_checks_shared_memory_with_every_reduce_dtype).
"""

from __future__ import annotations

from collections import Counter

import os
import re

import numpy as np
import pytest

import kernel as K
import demo
from kernel import TARGETS, BinaryOps, Kernel, KernelOptError, Opt, OptOps, ReduceOps, ShapeTracker, UnaryOps
from demo import alu
from demo import const, load, reduce, store
from demo import matmul_ast
from corpus import build_kernel, case_id, load_corpus
from tests.golden import accepted_kernels, check_construction, check_heuristics, check_sequences, check_tensor_cores
from tests.golden import replay, state_of, with_tensor_cores
from tests.test_fuzz import verify_random_opts

MR_CASES = load_corpus("multireduce.json")["cases"]
MR_IDS = [case_id(c) for c in MR_CASES]
RECORDED_CASES = load_corpus("multireduce_recorded.json.gz")["cases"]
ALL_CASES = MR_CASES + RECORDED_CASES
ALL_IDS = [f"golden-{i}" for i in MR_IDS] + [f"recorded-{case_id(c)}" for c in RECORDED_CASES]
REFUSED_PADTO = "cannot pad: the padding would change"  # the start of kernel.py's reasons for its two differences
REFUSED_SHARED = "exceeds maximum shared memory size"


# ---------------------------------------------------------------------------------------------------------------
# the golden corpus
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.corpus
def test_multireduce_corpus_is_complete():
    assert len(MR_CASES) == 16 and all(len(c["sequences"]) == 10 for c in MR_CASES)
    assert {c["target"] for c in MR_CASES} == {"opencl", "clang"}
    assert len(RECORDED_CASES) == 56 and {c["target"] for c in RECORDED_CASES} == set(TARGETS)
    assert sum(c.get("tensor_cores", {}).get("used", False) for c in RECORDED_CASES) == 5
    assert all(len(build_kernel(c).reduceops) == 2 for c in ALL_CASES)


@pytest.mark.corpus
@pytest.mark.parametrize("case", ALL_CASES, ids=ALL_IDS)
def test_multireduce_construction_matches_tinygrad(case):
    check_construction(case)


@pytest.mark.corpus
@pytest.mark.parametrize("case", ALL_CASES, ids=ALL_IDS)
def test_multireduce_heuristics_match_tinygrad(case):
    check_heuristics(case)


@pytest.mark.corpus
@pytest.mark.parametrize("case", with_tensor_cores(ALL_CASES, ALL_IDS))
def test_multireduce_tensor_cores_match_tinygrad(case):
    check_tensor_cores(case)


def _deliberate(step, reason: str) -> bool:
    """The two refusals of the module's docstring: a PADTO that would change a later reduce, and grouped reduces
    whose __local buffers together pass shared_max."""
    return (step["opt"][0] == "PADTO" and reason.startswith(REFUSED_PADTO)) or reason.startswith(REFUSED_SHARED)


@pytest.mark.corpus
@pytest.mark.parametrize("case", ALL_CASES, ids=ALL_IDS)
def test_multireduce_opt_sequences_match_tinygrad(case):
    """Every opt accepted or rejected as tinygrad did, with its state, but for the two deliberate refusals; a
    rejected one changes nothing (replay)."""
    check_sequences(case, _deliberate)


@pytest.mark.corpus
def test_only_the_padding_that_changes_a_result_is_refused_where_tinygrad_pads():
    """The golden file's 3 such steps all pad mr_mul_merge's SUM(exp2(x)); elsewhere PADTO is accepted as before."""
    refused = [
        (c["name"], step["opt"][0])
        for c in MR_CASES
        for _, step, ok, why in replay(c)
        if ok != step["ok"] and not why.startswith(REFUSED_SHARED)
    ]
    assert refused == [("mr_mul_merge_16x200", "PADTO")] * 3
    accepted_padto = [c for c in ALL_CASES for _, step, ok, _ in replay(c) if ok and step["opt"][0] == "PADTO"]
    assert len(accepted_padto) > 50  # reduce axes of safe SUMs, and output axes, are still padded


@pytest.mark.corpus
def test_every_difference_from_tinygrad_is_one_of_the_two_named_refusals():
    """Over all 72 cases, the steps tinygrad accepted and kernel.py refuses, counted by reason: 12 PADTOs whose
    padding would change a second reduce (3 in the golden file) and 2 recorded steps (mr_mean_var_64x1024 on cuda,
    mr_two_matvecs_256x512 on opencl) whose reduces' __local buffers together pass shared_max (tinygrad counts the
    first reduce's only)."""
    differences = Counter()
    for c in ALL_CASES:
        for _, step, ok, why in replay(c):
            if ok != step["ok"]:
                assert step["ok"], f"{c['name']}: {step['opt']} refused by tinygrad, accepted here"
                differences[(step["opt"][0], REFUSED_PADTO if why.startswith(REFUSED_PADTO) else why)] += 1
    shared = {k: n for k, n in differences.items() if k[1].startswith(REFUSED_SHARED)}
    assert differences[("PADTO", REFUSED_PADTO)] == 12 and sum(shared.values()) == 2
    assert sum(differences.values()) == 14, differences


@pytest.mark.corpus
def test_differences_md_counts_the_differences_and_names_the_shared_memory_limits():
    """DIFFERENCES.md's opening counts the recorded cases' differences too (11), and the shared-memory refusals
    name each step's own limit (49,152 on cuda, 32,768 on opencl) against the 65,536 bytes they need."""
    text = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "DIFFERENCES.md")).read().split())
    counts = [sum(ok != s["ok"] for c in cases for _, s, ok, _ in replay(c)) for cases in (MR_CASES, RECORDED_CASES)]
    assert counts == [3, 11]
    assert f"16 kernels with two reduce ops (but for {counts[0]} opt steps" in text
    assert f"{len(RECORDED_CASES)} more with two reduce ops (but for {counts[1]} opt steps that tinygrad" in text
    for c in RECORDED_CASES:
        for _, step, ok, why in replay(c):
            if ok != step["ok"] and why.startswith(REFUSED_SHARED):
                need, limit = (int(x) for x in re.findall(r"\d+", why))
                opt = ":".join(map(str, step["opt"]))
                assert f"{opt} of `{c['name']}` on {c['target']}, against {limit:,}" in text
                assert f"accepts buffers of {need:,} bytes in all" in text


# ---------------------------------------------------------------------------------------------------------------
# the bookkeeping
# ---------------------------------------------------------------------------------------------------------------

ST = ShapeTracker.from_shape((4, 8))


def _sum_and_max():
    """c + SUM(a) + MAX(b): buffer c (4, 1) is read after the reduces, a and b (4, 8) inside them."""
    c = load(3, ShapeTracker.from_shape((4, 1)))
    r0, r1 = reduce(ReduceOps.SUM, load(1, ST), (1,)), reduce(ReduceOps.MAX, load(2, ST), (1,))
    return (store(alu(BinaryOps.ADD, alu(BinaryOps.ADD, c, r0), r1)),), r0, r1


def test_reduceops_in_the_order_the_outputs_meet_them():
    ast, r0, r1 = _sum_and_max()
    k = Kernel(*ast)
    assert k.reduceops == [r0, r1] and k.reduceop == r0
    k = Kernel(store(alu(BinaryOps.ADD, r1, r0)))
    assert k.reduceops == [r1, r0] and k.reduceop == r1
    r3 = reduce(ReduceOps.SUM, load(3, ST), (1,))  # (not buffer 1: an output is read only where it is written)
    k = Kernel(store(r1, 0), store(alu(BinaryOps.ADD, r3, r1), 1))  # across outputs, first output first
    assert k.reduceops == [r1, r3]


def test_reduceops_are_deduplicated_and_empty_without_a_reduce():
    r = reduce(ReduceOps.SUM, load(1, ST), (1,))
    k = Kernel(store(alu(BinaryOps.MUL, r, r)))
    assert k.reduceops == [r] and k.reduceop == r
    k = Kernel(store(load(1, ST)))
    assert k.reduceops == [] and k.reduceop is None and k.earlybufs == [] and k.full_buf_index == 0


def test_earlybufs_are_the_buffers_of_every_reduce_and_full_shape_comes_from_the_first():
    ast, r0, r1 = _sum_and_max()
    k = Kernel(*ast)
    assert [b.idx for b in k.earlybufs] == [1, 2]  # not buffer 3, read after the reduces
    assert k.bufs[k.full_buf_index].idx == 1 and k.full_shape == (4, 8) and k.output_shape == (4, 1)
    k = Kernel(store(alu(BinaryOps.ADD, r1, r0)))
    assert [b.idx for b in k.earlybufs] == [2, 1] and k.bufs[k.full_buf_index].idx == 2


def test_earlybufs_keep_a_buffer_each_reduce_reads():
    """tinygrad lists the buffers per reduce op, so a buffer both reduces read appears twice."""
    a = load(1, ST)
    k = Kernel(store(alu(BinaryOps.ADD, reduce(ReduceOps.SUM, a, (1,)), reduce(ReduceOps.MAX, a, (1,)))))
    assert [b.idx for b in k.earlybufs] == [1, 1] and len(k.bufs) == 2


def test_a_copy_shares_the_reduceops():
    ast, r0, r1 = _sum_and_max()
    k = Kernel(*ast)
    k2 = k.copy()
    k2.apply_opt(Opt(OptOps.UNROLL, 0, 4))
    assert k2.reduceops == k.reduceops == [r0, r1] and k.applied_opts == []


# ---------------------------------------------------------------------------------------------------------------
# what a kernel with several reduces may not be
# ---------------------------------------------------------------------------------------------------------------


def test_a_reduce_result_used_at_another_shape_is_an_implicit_movement_op():
    """x - max(x) needs max(x) broadcast back along the reduced axis: a movement op after the reduce."""
    x = load(1, ST)
    shifted = alu(BinaryOps.ADD, x, alu(UnaryOps.NEG, reduce(ReduceOps.MAX, x, (1,))))
    with pytest.raises(
        ValueError,
        match=r"implicit movement op.*result of ReduceOps.MAX \(shape \(4, 1\)\) is used "
        r"at shape \(4, 8\)",
    ):
        Kernel(store(reduce(ReduceOps.SUM, alu(UnaryOps.EXP2, shifted), (1,))))


def test_a_reduce_stored_at_another_shape_is_refused():
    r = reduce(ReduceOps.SUM, load(1, ST), (1,))
    with pytest.raises(ValueError, match=r"result of ReduceOps.SUM \(shape \(4, 1\)\) is used at shape \(4, 8\)"):
        Kernel(K.LazyOp(K.BufferOps.STORE, (r,), K.MemBuffer(0, K.dtypes.float, ST)))


def test_reduces_over_different_shapes_are_refused():
    """tinygrad 0.9.1 accepts these and loops both over all reduce axes: SUM(b) would add each b 8 times."""
    a = reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, 8, 8))), (1, 2))
    b = reduce(ReduceOps.SUM, load(2, ShapeTracker.from_shape((4, 8, 1))), (1,))
    with pytest.raises(
        ValueError,
        match=r"same shape to the same shape.*\(4, 8, 8\) to \(4, 1, 1\).*"
        r"\(4, 8, 1\) to \(4, 1, 1\)",
    ):
        Kernel(store(alu(BinaryOps.ADD, a, b)))


def test_a_reduce_of_a_reduce_is_refused():
    inner = reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, 8, 8))), (1,))
    with pytest.raises(ValueError, match="one reduces the result of the other"):
        Kernel(store(reduce(ReduceOps.MAX, inner, (2,))))


# ---------------------------------------------------------------------------------------------------------------
# opts on kernels with several reduces
# ---------------------------------------------------------------------------------------------------------------


def _two_sums(second_src=lambda x: x, shape=(16, 200)):
    st = ShapeTracker.from_shape(shape)
    return (
        store(
            alu(
                BinaryOps.MUL,
                reduce(ReduceOps.SUM, load(1, st), (1,)),
                reduce(ReduceOps.SUM, second_src(load(2, st)), (1,)),
            )
        ),
    )


def _exp(x):
    return alu(UnaryOps.EXP2, x)


@pytest.mark.parametrize("second", [_exp, lambda x: alu(UnaryOps.RECIP, x)], ids=["EXP2", "RECIP"])
def test_padding_a_reduce_axis_checks_every_reduce(second):
    k = Kernel(*_two_sums(second))
    before = state_of(k)
    with pytest.raises(KernelOptError, match=r"cannot pad: the padding would change ReduceOps.SUM \(reduce op 1\)"):
        k.apply_opt(Opt(OptOps.PADTO, 1, 32))
    assert state_of(k) == before
    k.apply_opt(Opt(OptOps.PADTO, 0, 32))  # the output axis: the padding is never stored
    assert k.full_shape == (32, 200)


def test_padding_a_reduce_axis_is_refused_when_a_later_reduce_is_a_max():
    st = ShapeTracker.from_shape((16, 200))
    k = Kernel(
        store(alu(BinaryOps.ADD, reduce(ReduceOps.SUM, load(1, st), (1,)), reduce(ReduceOps.MAX, load(2, st), (1,))))
    )
    with pytest.raises(KernelOptError, match=r"cannot pad: the padding would change ReduceOps.MAX"):
        k.apply_opt(Opt(OptOps.PADTO, 1, 32))


def test_padding_the_reduce_axis_of_safe_sums_is_accepted():
    k = Kernel(*_two_sums())
    k.apply_opt(Opt(OptOps.PADTO, 1, 32))
    assert k.full_shape == (16, 224) and all(st.shape == (16, 224) for st in k.sts[1:])


def _renumbered(x: K.LazyOp, by: int) -> K.LazyOp:
    """x with every LOAD reading buffer idx + by."""
    if x.op is K.BufferOps.LOAD:
        return load(x.arg.idx + by, x.arg.st, x.arg.dtype)
    return K.LazyOp(x.op, tuple(_renumbered(s, by) for s in x.src), x.arg)


@pytest.mark.parametrize("target, dtype", [("metal", K.dtypes.float), ("cuda", K.dtypes.half)])
def test_tensor_cores_shape_two_matmuls_like_one(target, dtype):
    (mm,) = matmul_ast(64, 64, 64, dtype, K.dtypes.float)
    one = Kernel(mm, opts=TARGETS[target])
    two = Kernel(store(alu(BinaryOps.ADD, mm.src[0], _renumbered(mm.src[0], 2))), opts=TARGETS[target])
    assert one.apply_tensor_cores(1) and two.apply_tensor_cores(1)
    assert two.applied_opts == one.applied_opts and two.full_shape == one.full_shape
    assert two.colors() == one.colors() and two.tensor_core == one.tensor_core
    assert list(two.bufs_for_tensor_core.values()) == [(1, 2), (3, 4)]  # each reduce's own two buffers


def test_tensor_cores_refuse_reduces_that_fit_them_differently():
    """tinygrad 0.9.1 asserts the reduces' tensor core options are all the same; here it's a KernelOptError."""
    (mm,) = matmul_ast(64, 64, 64)
    other = reduce(ReduceOps.SUM, load(3, mm.src[0].src[0].src[0].arg.st), (2,))
    k = Kernel(store(alu(BinaryOps.ADD, mm.src[0], other)), opts=TARGETS["metal"])
    before = state_of(k)
    with pytest.raises(KernelOptError, match="same tensor core options"):
        k.apply_opt(Opt(OptOps.TC, 0, 0))
    assert state_of(k) == before
    assert not k.apply_tensor_cores(1) and state_of(k) == before


def test_group_checks_shared_memory_with_every_reduce_dtype():
    """Each reduce op has its own __local buffer: the size check counts an accumulator of each reduce's dtype per
    thread (tinygrad counts the first one's only, and accepts 65,536 bytes against 32,768)."""
    st = ShapeTracker.from_shape((4, 4096))
    half = reduce(ReduceOps.SUM, load(1, st, K.dtypes.half), (1,))
    flt = reduce(ReduceOps.SUM, load(2, st), (1,))
    for both in (
        alu(BinaryOps.ADD, alu(UnaryOps.CAST, half, arg=K.dtypes.float), flt),
        alu(BinaryOps.ADD, flt, alu(UnaryOps.CAST, half, arg=K.dtypes.float)),
    ):
        k = Kernel(store(both), opts=TARGETS["opencl"])
        k.apply_opt(Opt(OptOps.UPCAST, 0, 4))
        with pytest.raises(KernelOptError, match="needs 49152, max 32768"):  # 2048 * (2 + 4) bytes * 4 upcasts
            k.apply_opt(Opt(OptOps.GROUP, 0, 2048))
        k.apply_opt(Opt(OptOps.GROUP, 0, 1024))  # 1024 * 6 * 4 = 24576: fits


def test_the_demo_has_a_kernel_with_two_reduces():
    k = Kernel(*demo.DEMOS["variance"].build())
    assert [r.op for r in k.reduceops] == [ReduceOps.SUM, ReduceOps.SUM] and len(k.ast) == 2


# ---------------------------------------------------------------------------------------------------------------
# on the device: every case after the heuristics and every accepted step
# ---------------------------------------------------------------------------------------------------------------
# All of it takes ~40 s here (170 kernels compiled); by default the heuristics of every case plus a few sequences,
# chosen to cover every OptOp the corpus accepts; RUNTIME_MULTIREDUCE=1 runs every sequence (and 20 random kernels).

ALL_SEQUENCES = bool(os.environ.get("RUNTIME_MULTIREDUCE"))


def _features(seq) -> set:
    """What running this sequence would show: each accepted OptOp, grouping with upcasts, and the case."""
    ops = {s["opt"][0] for s in seq if s["ok"]}
    grouped_upcast = {"grouped+upcast"} if ops & {"GROUP", "GROUPTOP"} and ops & {"UPCAST", "UNROLL"} else set()
    return ops | grouped_upcast


def _default_sequences(cases=MR_CASES, features=lambda case, seq: _features(seq)) -> set[tuple[int, int]]:
    """(case, sequence) pairs verified by default: greedily, the sequence adding most of what isn't covered yet."""
    options = {(c, s): features(case, seq) for c, case in enumerate(cases) for s, seq in enumerate(case["sequences"])}
    chosen: set[tuple[int, int]] = set()
    covered: set = set()
    while True:
        best = max(options, key=lambda cs: (len(options[cs] - covered), -cs[0], -cs[1]))
        if not options[best] - covered:
            return chosen
        chosen.add(best)
        covered |= options[best]


DEFAULT_SEQUENCES = _default_sequences()


@pytest.mark.corpus
@pytest.mark.parametrize("c", range(len(MR_CASES)), ids=MR_IDS)
def test_multireduce_kernel_verifies_after_heuristics_and_accepted_opts(device, c):
    import runtime as R

    case = MR_CASES[c]
    k = build_kernel(case)
    inputs = R.random_inputs(k)
    expected = R.reference(k, *inputs)
    k.hand_coded_optimizations()
    R.verify(k, *inputs, expected=expected)
    only = None if ALL_SEQUENCES else {s for cc, s in DEFAULT_SEQUENCES if cc == c}
    for k in accepted_kernels(case, only):
        R.verify(k, *inputs, expected=expected)


# of the recorded cases, the fewest sequences that cover each target's accepted OptOps (and grouped upcasts) and
# every AST at least once
DEFAULT_RECORDED = _default_sequences(
    RECORDED_CASES, lambda case, seq: {(case["target"], f) for f in _features(seq)} | {case["name"]}
)


def _recorded_params():
    for c, i in enumerate(ALL_IDS[len(MR_CASES) :]):
        chosen = any(cc == c for cc, _ in DEFAULT_RECORDED) or RECORDED_CASES[c].get("tensor_cores", {}).get("used")
        marks = (
            []
            if chosen or ALL_SEQUENCES
            else [pytest.mark.skip(reason="set RUNTIME_MULTIREDUCE=1 to verify every recorded multi-reduce case")]
        )
        yield pytest.param(c, id=i, marks=marks)


@pytest.mark.corpus
@pytest.mark.parametrize("c", list(_recorded_params()))
def test_recorded_multireduce_kernel_verifies_after_tensor_cores_heuristics_and_accepted_opts(device, c):
    """A case after its tensor cores (rendered as plain multiply-adds), its heuristics and the accepted steps of the
    sequences of DEFAULT_RECORDED: by default the cases those sequences or tensor cores pick, with
    RUNTIME_MULTIREDUCE=1 every case after every sequence."""
    import runtime as R

    case = RECORDED_CASES[c]
    k = build_kernel(case)
    inputs = R.random_inputs(k)
    expected = R.reference(k, *inputs)
    if "tensor_cores" in case:
        tc = k.copy()
        assert tc.apply_tensor_cores(1) == case["tensor_cores"]["used"]
        R.verify(tc, *inputs, expected=expected)
    k.hand_coded_optimizations()
    R.verify(k, *inputs, expected=expected)
    only = None if ALL_SEQUENCES else {s for cc, s in DEFAULT_RECORDED if cc == c}
    for k in accepted_kernels(case, only):
        R.verify(k, *inputs, expected=expected)


@pytest.mark.corpus
def test_default_device_run_covers_every_accepted_optop_and_grouped_upcasts():
    accepted = {s["opt"][0] for c in MR_CASES for seq in c["sequences"] for s in seq if s["ok"]}
    covered = set().union(*(_features(MR_CASES[c]["sequences"][s]) for c, s in DEFAULT_SEQUENCES))
    assert accepted <= covered and "grouped+upcast" in covered
    assert accepted >= {"GROUP", "GROUPTOP", "UPCAST", "UNROLL", "LOCAL", "PADTO", "NOLOCALS"}


@pytest.mark.corpus
def test_default_device_run_covers_each_targets_accepted_optops_in_the_recorded_cases():
    accepted = {(c["target"], s["opt"][0]) for c in RECORDED_CASES for seq in c["sequences"] for s in seq if s["ok"]}
    chosen = [(RECORDED_CASES[c], RECORDED_CASES[c]["sequences"][s]) for c, s in DEFAULT_RECORDED]
    covered = {(case["target"], s["opt"][0]) for case, seq in chosen for s in seq if s["ok"]}
    assert covered == accepted and {t for t, _ in covered} == set(TARGETS)
    assert {case["name"] for case, _ in chosen} == {c["name"] for c in RECORDED_CASES}  # every AST
    assert sum(s["ok"] for _, seq in chosen for s in seq) > 0


def _force_padto(k: Kernel, axis: int, amt: int) -> Kernel:
    """What tinygrad 0.9.1's PADTO does without kernel.py's extra check: pad every buffer that isn't reduced."""
    k = k.copy()
    for i, st in enumerate(k.sts):
        if st.shape[axis] != 1 and (extra := K.round_up(st.shape[axis], amt) - st.shape[axis]):
            k.sts[i] = st.pad(tuple((0, extra if a == axis else 0) for a in range(len(st.shape))))
    return k


@pytest.mark.corpus
def test_the_padding_kernel_py_refuses_would_change_the_result(device):
    """tinygrad 0.9.1 accepts PADTO:1:32 on mr_mul_merge_16x200, whose second reduce sums exp2(x*c): each padded
    element reads 0 and adds exp2(0) = 1. Rendered the way tinygrad pads, the kernel gives a wrong answer."""
    import runtime as R

    case = next(c for c in MR_CASES if c["name"] == "mr_mul_merge_16x200" and c["target"] == "opencl")
    k = build_kernel(case)
    with pytest.raises(KernelOptError, match=REFUSED_PADTO):
        k.apply_opt(Opt(OptOps.PADTO, 1, 32))
    inputs = R.random_inputs(k)
    with pytest.raises(R.VerificationError):
        R.verify(_force_padto(k, 1, 32), *inputs)
    R.verify(_force_padto(k, 0, 32), *inputs)  # padding the output axis is harmless, and accepted


def test_two_reduces_render_with_their_own_accumulators_loops_and_temps(device):
    import runtime as R

    case = next(c for c in MR_CASES if c["name"] == "mr_sum_max_64x128" and c["target"] == "opencl")
    k = build_kernel(case)
    for opt in ("GROUPTOP:0:16", "UPCAST:0:4", "UNROLL:0:2"):
        k.apply_opt(Opt.parse(opt))
    src = R.render(k).src
    assert src.count("for (int ridx") == 2 and src.count("barrier(CLK_LOCAL_MEM_FENCE)") == 2
    assert "__local float temp0[" in src and "__local float temp1[" in src and "-INFINITY" in src
    R.verify(k, *R.random_inputs(k))


@pytest.mark.parametrize("seed", range(20 if ALL_SEQUENCES else 1))
def test_random_pairs_of_reduces_and_opts_verify(device, seed):
    """Two random reduces (SUM/MAX of random elementwise ops of shared loads) and random opts."""
    import runtime as R

    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.choice([2, 3, 4, 8, 16, 24])) for _ in range(3))
    axes = tuple(sorted(rng.choice(3, size=int(rng.integers(1, 3)), replace=False).tolist()))
    loads = [load(i + 1, ShapeTracker.from_shape(shape)) for i in range(3)]
    unary = [lambda x: x, _exp, lambda x: alu(UnaryOps.SQRT, alu(BinaryOps.MUL, x, x))]

    def side():
        a, b = rng.choice(3, size=2).tolist()
        src = alu(BinaryOps.MUL, loads[a], unary[int(rng.integers(3))](loads[b]))
        return reduce([ReduceOps.SUM, ReduceOps.MAX][int(rng.integers(2))], src, axes)

    out = alu(
        BinaryOps.ADD,
        side(),
        alu(BinaryOps.MUL, side(), const(0.5, tuple(1 if i in axes else s for i, s in enumerate(shape)))),
    )
    for target in ("opencl", "clang"):
        k = Kernel(store(out), opts=TARGETS[target])
        inputs = R.random_inputs(k)
        verify_random_opts(k, inputs, rng, tries=6)
        k = Kernel(store(out), opts=TARGETS[target])
        k.hand_coded_optimizations()
        R.verify(k, *inputs)


def test_grouped_reduces_with_upcasts_unrolls_and_locals_verify(device):
    """Grouped reduces (each through its own temp) with upcasts and unrolls across both reduces."""
    import runtime as R

    for opts in [("GROUP:0:4", "UPCAST:0:2", "UNROLL:0:2"), ("GROUPTOP:0:8", "LOCAL:0:2", "UNROLL:0:4")]:
        k = Kernel(*_two_sums(_exp, (8, 64)))
        for o in opts:
            k.apply_opt(Opt.parse(o))
        R.verify(k, *R.random_inputs(k))


def test_two_reduces_upcast_mid_reduce_into_an_image(device):
    """White axes (UPCASTMID, image outputs): each reduce's finishing thread unrolls them."""
    import runtime as R

    (out,) = demo.image_matvec_ast(256, 64)
    k = Kernel(K.LazyOp(K.BufferOps.STORE, (alu(BinaryOps.ADD, out.src[0], _renumbered(out.src[0], 2)),), out.arg))
    for opt in ("GROUP:0:8", "UPCASTMID:0:4"):
        k.apply_opt(Opt.parse(opt))
    assert k.colors() == ["blue", "green", "white", "red"] and len(k.reduceops) == 2
    R.verify(k, *R.random_inputs(k))


def test_two_reduces_over_a_symbolic_axis_verify_at_each_length(device):
    """One program for every length (symbolic shapes) holds with several reduces too."""
    import runtime as R

    st = ShapeTracker.from_shape((8, K.Variable("i", 1, 64)))
    ast = store(alu(BinaryOps.ADD, reduce(ReduceOps.SUM, load(1, st), (1,)), reduce(ReduceOps.MAX, load(2, st), (1,))))
    k = Kernel(ast)
    k.hand_coded_optimizations()
    k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
    for i in (1, 37, 64):
        R.verify(k, *R.random_inputs(k, var_vals={"i": i}), var_vals={"i": i})
