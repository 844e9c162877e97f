"""The golden corpus: what tinygrad 0.9.1 itself did, replayed step by step against kernel.py.

testdata/shapetracker.json holds 300 chains of movement ops and, after every step, tinygrad's views, real strides,
unit-stride axes, masked axes, simplified views and index map. testdata/kernels.json holds 168 real kernels on four
targets and tinygrad's state after construction, after the hand-coded heuristics, after apply_tensor_cores(1),
and after every step of random opt sequences (accepted or rejected). Measured facts: every one must match.

testdata/difftest_*.json.gz are more of the same, recorded by us from tinygrad 0.9.1 in the same format: 1,097
kernel cases (random and hand-written tensor programs, nn layers, images, winograd, hand-built ASTs with masked
and multi-view loads) and 1,033 ShapeTracker chains (see testdata/README.md).
"""

from __future__ import annotations

import gzip
import json
import pathlib

import numpy as np
import pytest

import kernel as K

TESTDATA = pathlib.Path(__file__).parent.parent / "testdata"


def load_corpus(name: str) -> dict:
    path = TESTDATA / name
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        return json.load(f)


ST_CHAINS = load_corpus("shapetracker.json")["chains"]
KERNEL_CASES = load_corpus("kernels.json")["cases"]
DIFFTEST_CHAINS = load_corpus("difftest_shapetracker.json.gz")["chains"]
DIFFTEST_CASES = load_corpus("difftest_kernels.json.gz")["cases"]
for _case in DIFFTEST_CASES:  # our recorder didn't always capture the tensor core's name: compare the state only
    _case.get("tensor_cores", {}).pop("tensor_core", None)


# ---------------------------------------------------------------------------------------------------------------
# reading the corpus
# ---------------------------------------------------------------------------------------------------------------


def build_kernel(case) -> K.Kernel:
    return K.Kernel(*[K.lazyop_from_json(a) for a in case["ast"]], opts=K.TARGETS[case["target"]])


def views_of(st: K.ShapeTracker):
    return [
        {
            "shape": list(v.shape),
            "strides": list(v.strides),
            "offset": v.offset,
            "mask": [list(m) for m in v.mask] if v.mask is not None else None,
        }
        for v in st.views
    ]


def opt_of(o) -> K.Opt:
    return K.Opt(getattr(K.OptOps, o[0]), o[1], o[2])


def case_id(case) -> str:
    return f"{case['name']}[{case['target']}]"


def state_of(k: K.Kernel) -> dict:
    """The kernel's state in the corpus's terms."""
    return {
        "full_shape": list(k.full_shape),
        "output_shape": list(k.output_shape),
        "colors": k.colors(),
        "first_reduce": k.first_reduce,
        "upcasted": k.upcasted,
        "local_dims": k.local_dims,
        "group_for_reduces": k.group_for_reduces,
        "applied_opts": [[o.op.name, o.axis, o.amt] for o in k.applied_opts],
        "sts": [views_of(st) for st in k.sts],
    }


def assert_state(k: K.Kernel, want: dict) -> None:
    got = state_of(k)
    for key in got:
        if key in want:
            assert got[key] == want[key], f"{key}: got {got[key]}, tinygrad 0.9.1 had {want[key]}"


# ---------------------------------------------------------------------------------------------------------------
# ShapeTracker chains
# ---------------------------------------------------------------------------------------------------------------


def apply_step(st: K.ShapeTracker, step) -> K.ShapeTracker:
    arg = step["args"][0]
    arg = tuple(tuple(a) for a in arg) if step["op"] in ("pad", "shrink") else tuple(arg)
    return getattr(st, step["op"])(arg)


CHAINS = ST_CHAINS + DIFFTEST_CHAINS
CHAIN_IDS = [f"golden-chain{i}" for i in range(len(ST_CHAINS))] + [
    f"difftest-chain{i}" for i in range(len(DIFFTEST_CHAINS))
]


@pytest.mark.parametrize("chain", CHAINS, ids=CHAIN_IDS)
def test_shapetracker_chain_matches_tinygrad(chain):
    st = K.ShapeTracker.from_shape(tuple(chain["shape"]))
    for n, step in enumerate(chain["steps"]):
        st = apply_step(st, step)
        where = f"step {n}: {step['op']}{tuple(step['args'][0])}"
        assert views_of(st) == step["views"], where
        assert list(st.shape) == step["shape"] and st.size == step["size"], where
        assert list(st.real_strides()) == step["real_strides"], where
        assert list(st.real_strides(ignore_valid=True)) == step["real_strides_ignore_valid"], where
        assert st.unit_stride_axes() == step["unit_stride_axes"], where
        assert [st.axis_is_masked(i) for i in range(len(st.shape))] == step["axis_is_masked"], where
        assert views_of(st.simplify()) == step["simplified"], where
        if step["index_map"] is not None:
            idx, valid = st.indices()
            assert np.where(valid, idx, -1).reshape(-1).tolist() == step["index_map"], where


def test_shapetracker_corpus_is_complete():
    """The vendored corpus is the one the checks were written for (1,403 steps in 300 chains)."""
    assert len(ST_CHAINS) == 300 and sum(len(c["steps"]) for c in ST_CHAINS) == 1403


# ---------------------------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------------------------


CASES = KERNEL_CASES + DIFFTEST_CASES
CASE_IDS = [f"golden-{case_id(c)}" for c in KERNEL_CASES] + [f"difftest-{case_id(c)}" for c in DIFFTEST_CASES]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_kernel_construction_matches_tinygrad(case):
    assert_state(build_kernel(case), case["init"])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_hand_coded_optimizations_match_tinygrad(case):
    k = build_kernel(case)
    k.hand_coded_optimizations()
    assert_state(k, case["hand_coded"])


TC_CASES = [(i, c) for i, c in zip(CASE_IDS, CASES) if "tensor_cores" in c]


@pytest.mark.parametrize("case", [c for _, c in TC_CASES], ids=[i for i, _ in TC_CASES])
def test_tensor_cores_match_tinygrad(case):
    k = build_kernel(case)
    want = case["tensor_cores"]
    assert k.apply_tensor_cores(1) == want["used"]
    assert_state(k, want)
    if "tensor_core" in want:
        assert (str(k.tensor_core) if k.tensor_core else None) == want["tensor_core"]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_opt_sequences_match_tinygrad(case):
    """Each opt is accepted or rejected exactly as tinygrad did; a rejected one leaves the kernel as it was."""
    for seq in case["sequences"]:
        k = build_kernel(case)
        for n, step in enumerate(seq):
            before = state_of(k)
            try:
                k.apply_opt(opt_of(step["opt"]))
                accepted = True
            except K.KernelOptError:
                accepted = False
            assert accepted == step["ok"], f"step {n} {step['opt']}: accepted={accepted}, tinygrad: {step['ok']}"
            if accepted:
                assert list(k.full_shape) == step["full_shape"] and k.colors() == step["colors"], (
                    f"step {n} {step['opt']}"
                )
            else:
                assert state_of(k) == before, f"rejected step {n} {step['opt']} changed the kernel"


def test_kernel_corpus_is_complete():
    assert len(KERNEL_CASES) == 168 and sum("tensor_cores" in c for c in KERNEL_CASES) == 42
    assert {c["target"] for c in KERNEL_CASES} == {"opencl", "clang", "metal", "cuda"}
