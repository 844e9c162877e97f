"""The golden corpus: what tinygrad 0.9.1 itself did, replayed step by step against kernel.py.

testdata/shapetracker.json holds 300 chains of movement ops and, after every step, tinygrad's views, real strides,
unit-stride axes, masked axes, simplified views and index map. testdata/kernels.json holds 168 real kernels on four
targets and tinygrad's state after construction, after the hand-coded heuristics, after apply_tensor_cores(1),
and after every step of random opt sequences (accepted or rejected). Measured facts: every one must match.

testdata/difftest_*.json.gz are more of the same, recorded by us from tinygrad 0.9.1 in the same format: 1,097
kernel cases (random and hand-written tensor programs, nn layers, images, winograd, hand-built ASTs with masked
and multi-view loads) and 1,033 ShapeTracker chains (see testdata/README.md). testdata/linearizer.json holds 12
matmuls with an image output on the targets with tensor cores, and what tinygrad's get_linearizer made of each
(kernel.optimize must do the same: the image's pixel first, so no tensor core).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernel as K
from corpus import case_id, load_corpus
from tests.golden import check_construction, check_heuristics, check_optimized, check_sequences, check_tensor_cores
from tests.golden import views_of, with_tensor_cores

ST_CHAINS = load_corpus("shapetracker.json")["chains"]
KERNEL_CASES = load_corpus("kernels.json")["cases"]
DIFFTEST_CHAINS = load_corpus("difftest_shapetracker.json.gz")["chains"]
DIFFTEST_CASES = load_corpus("difftest_kernels.json.gz")["cases"]
LINEARIZER_CASES = load_corpus("linearizer.json")["cases"]
pytestmark = pytest.mark.corpus  # every test here replays what tinygrad 0.9.1 computed

for _case in DIFFTEST_CASES:  # our recorder didn't always capture the tensor core's name: compare the state only
    _case.get("tensor_cores", {}).pop("tensor_core", None)


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


CASES = KERNEL_CASES + DIFFTEST_CASES + LINEARIZER_CASES
CASE_IDS = [f"golden-{case_id(c)}" for c in KERNEL_CASES] + [f"difftest-{case_id(c)}" for c in DIFFTEST_CASES]
CASE_IDS += [f"linearizer-{case_id(c)}" for c in LINEARIZER_CASES]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_kernel_construction_matches_tinygrad(case):
    check_construction(case)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_hand_coded_optimizations_match_tinygrad(case):
    check_heuristics(case)


@pytest.mark.parametrize("case", with_tensor_cores(CASES, CASE_IDS))
def test_tensor_cores_match_tinygrad(case):
    check_tensor_cores(case)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_opt_sequences_match_tinygrad(case):
    """Each opt is accepted or rejected exactly as tinygrad did; a rejected one leaves the kernel as it was."""
    check_sequences(case)


def test_kernel_corpus_is_complete():
    assert len(KERNEL_CASES) == 168 and sum("tensor_cores" in c for c in KERNEL_CASES) == 42
    assert {c["target"] for c in KERNEL_CASES} == {"opencl", "clang", "metal", "cuda"}


@pytest.mark.parametrize("case", LINEARIZER_CASES, ids=[case_id(c) for c in LINEARIZER_CASES])
def test_optimize_does_what_get_linearizer_did(case):
    """An image output's pixel is upcast first (required_optimizations), so the TC opt, which must come first, is
    refused and the hand-coded opts follow, as in tinygrad 0.9.1's get_linearizer; apply_tensor_cores on a fresh
    kernel still takes the core (the case's tensor_cores state)."""
    check_optimized(case)
    assert not case["optimized"]["used"] and case["tensor_cores"]["used"]


def test_linearizer_corpus_is_complete():
    assert len(LINEARIZER_CASES) == 12 and {c["target"] for c in LINEARIZER_CASES} == {"metal", "cuda"}
    assert all(c["ast"][0]["arg"]["dtype"]["image"] in ("float", "half") for c in LINEARIZER_CASES)
