"""Replaying a golden case against kernel.py: shared by test_golden.py, test_symbolic.py and test_multireduce.py.

A case records tinygrad 0.9.1's state after construction ("init"), after the hand-coded heuristics ("hand_coded"),
after apply_tensor_cores(1) ("tensor_cores", where recorded), after get_linearizer's steps ("optimized", where
recorded: kernel.optimize), and for every step of random opt sequences whether
tinygrad accepted it and, if so, its full shape and colours. Sizes may be symbolic: a state is compared in the
corpus's JSON form (`enc`), where an int stays an int.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import kernel as K
from corpus import build_kernel, opt_of, state_of, views_of  # noqa: F401 (the tests import them from here)
from corpus import sint_to_json as enc


def assert_state(k: K.Kernel, want: dict) -> None:
    """Every part of the state the corpus recorded is kernel.py's."""
    got = state_of(k)
    for key, value in want.items():
        if key in got:
            assert got[key] == value, f"{key}: got {got[key]}, tinygrad 0.9.1 had {value}"


def check_construction(case) -> K.Kernel:
    k = build_kernel(case)
    assert_state(k, case["init"])
    return k


def check_heuristics(case) -> None:
    k = build_kernel(case)
    k.hand_coded_optimizations()
    assert_state(k, case["hand_coded"])


def with_tensor_cores(cases: list, ids: list[str]) -> list:
    """The cases that recorded apply_tensor_cores(1), as pytest params under their ids."""
    return [pytest.param(case, id=i) for i, case in zip(ids, cases) if "tensor_cores" in case]


def check_tensor_cores(case) -> None:
    """apply_tensor_cores(1) is used or not as in tinygrad, with its state (and the tensor core, where recorded)."""
    k = build_kernel(case)
    want = case["tensor_cores"]
    assert k.apply_tensor_cores(1) == want["used"]
    assert_state(k, want)
    if "tensor_core" in want:
        assert (str(k.tensor_core) if k.tensor_core else None) == want["tensor_core"]


def check_optimized(case) -> None:
    """kernel.optimize does what tinygrad 0.9.1's get_linearizer did: the same opts in its order, the same state."""
    k = K.optimize(build_kernel(case))
    assert_state(k, case["optimized"])
    assert (k.tensor_core is not None) == case["optimized"]["used"]


def replay(case) -> Iterator[tuple[K.Kernel, dict, bool, str]]:
    """(kernel after the step, step, accepted, the refusal's reason) for every step of every opt sequence, each
    sequence from a fresh kernel. A refused step must leave the kernel exactly as it was (asserted here). A sequence
    stops after the first step kernel.py judges differently from tinygrad: the states differ from there on."""
    for seq in case["sequences"]:
        k = build_kernel(case)
        for n, step in enumerate(seq):
            before = state_of(k)
            try:
                k.apply_opt(opt_of(step["opt"]))
                accepted, reason = True, ""
            except K.KernelOptError as e:
                accepted, reason = False, str(e)
                assert state_of(k) == before, f"refused step {n} {step['opt']} changed the kernel"
            yield k, step, accepted, reason
            if accepted != step["ok"]:
                break


def check_sequences(case, deliberate: Callable[[dict, str], bool] | None = None) -> None:
    """Each opt accepted or refused as tinygrad did, an accepted one with tinygrad's full shape and colours.
    deliberate(step, reason) says whether a step tinygrad accepted is one kernel.py refuses on purpose."""
    for k, step, accepted, reason in replay(case):
        if accepted == step["ok"]:
            if accepted:
                assert [enc(s) for s in k.full_shape] == step["full_shape"], step["opt"]
                assert k.colors() == step["colors"], step["opt"]
            continue
        assert step["ok"] and deliberate is not None and deliberate(step, reason), (
            f"{step['opt']}: accepted={accepted}, tinygrad: {step['ok']} ({reason})"
        )


def accepted_kernels(
    case, sequences: set[int] | None = None, start: K.Kernel | None = None, as_recorded: bool = False
) -> Iterator[K.Kernel]:
    """The kernel after each accepted step of the case's opt sequences (those numbered in `sequences`, else all),
    each sequence from a copy of `start` (else from the case's kernel). as_recorded: every step kernel.py refuses,
    tinygrad refused too."""
    for s, seq in enumerate(case["sequences"]):
        if sequences is not None and s not in sequences:
            continue
        k = start.copy() if start is not None else build_kernel(case)
        for step in seq:
            try:
                k.apply_opt(opt_of(step["opt"]))
            except K.KernelOptError:
                assert not as_recorded or not step["ok"], f"kernel.py refused {step['opt']}, tinygrad accepted it"
                continue
            yield k
