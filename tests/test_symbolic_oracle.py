"""Symbolic ShapeTrackers against their concrete rebuilds: a differential fuzzer, and the defects it guards.

A ShapeTracker built with Variable sizes must mean, at every value of its variables, what the same movement ops mean
when they are applied to plain integer sizes. The oracle here is that concrete rebuild: the op chain replayed from
`ShapeTracker.from_shape` with every size evaluated first, so it shares none of the symbolic code (no Node bounds,
no symbolic View merging). Each symbolic chain is compared with it at several values of its variables (each one's
smallest and largest, and one in between):

- the views evaluated at the values (`indices(var_vals)`) give the same valid elements and indices;
- `expr_idxs()`, the index and validity expressions the renderer prints, evaluated here with numpy (not with
  `sym_infer`), give the same; every node's value lies within its bounds; and every `//` and `%` has a numerator
  >= 0 and a divisor >= 1, where C's `/` and `%` compute what Python's do;
- on the OpenCL device, a few kernels that load through symbolic chains (plain, after the heuristics, with
  GROUP/LOCAL/UPCAST opts) give the same output as the concrete rebuild of the same kernel.

By default a small run (40 chains, a few seconds). SYMBOLIC_FUZZ=N fuzzes N chains instead (and SYMBOLIC_FUZZ_SEED
picks another seed); SYMBOLIC_FUZZ_DEVICE=N runs N fuzzed chains on the device (default 6).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable

import numpy as np
import pytest

import kernel as K
from kernel import BinaryOps, Kernel, KernelOptError, Node, NumNode, Opt, OptOps, ReduceOps, ShapeTracker, Variable
from demo import alu
from demo import load, reduce, store

FUZZ_CHAINS = int(os.environ.get("SYMBOLIC_FUZZ", "40"))
FUZZ_SEED = int(os.environ.get("SYMBOLIC_FUZZ_SEED", "13"))
FUZZ_DEVICE = int(os.environ.get("SYMBOLIC_FUZZ_DEVICE", "6"))

# ---------------------------------------------------------------------------------------------------------------
# the oracle: a chain of movement ops, replayed on concrete sizes
# ---------------------------------------------------------------------------------------------------------------

Chain = list  # [(op name, argument)], the argument holding ints and Nodes


def at(x, values: dict[str, int]):
    """A size, or a nested tuple of them, at values {name: int}: evaluated by walking the node here, not by kernel.py's
    substitute (a NumNode is its int)."""
    if isinstance(x, tuple):
        return tuple(at(y, values) for y in x)
    if isinstance(x, int):
        return x
    return int(evaluate(x, values))


def build_chain(shape: tuple, chain: Chain, values: dict[str, int] | None = None) -> ShapeTracker:
    """The ShapeTracker of `chain` applied to `shape`: symbolic, or with every size at `values` (the oracle)."""
    st = ShapeTracker.from_shape(at(shape, values) if values is not None else shape)
    for op, arg in chain:
        st = getattr(st, op)(at(arg, values) if values is not None else arg)
    return st


def evaluate(x, env: dict[str, object], check: bool = False):
    """The value of a node (numpy arrays or ints for the variables in env), computed by its definition. With `check`,
    also asserts that every sub-node lies within its bounds and that every // and % is C-safe."""
    if isinstance(x, int):
        return x
    if isinstance(x, NumNode):
        return x.b
    if isinstance(x, Variable):
        val = env[x.expr]
    elif isinstance(x, K.MulNode):
        val = evaluate(x.a, env, check) * evaluate(x.b, env, check)
    elif isinstance(x, (K.DivNode, K.ModNode)):
        a, b = evaluate(x.a, env, check), evaluate(x.b, env, check)
        if check:
            assert np.all(np.asarray(a) >= 0), f"{x.render()}: a negative numerator (C's / and % truncate)"
            assert np.all(np.asarray(b) >= 1), f"{x.render()}: a divisor below 1"
        val = a // b if isinstance(x, K.DivNode) else a % b
    elif isinstance(x, K.LtNode):
        val = (np.asarray(evaluate(x.a, env, check)) < np.asarray(evaluate(x.b, env, check))).astype(np.int64)
    elif isinstance(x, K.SumNode):
        val = sum(evaluate(y, env, check) for y in x.nodes)
    elif isinstance(x, K.AndNode):
        val = 1
        for y in x.nodes:
            val = np.logical_and(val, np.asarray(evaluate(y, env, check)) != 0)
        val = np.asarray(val).astype(np.int64)
    else:
        raise TypeError(f"unknown node {type(x).__name__}")
    if check:
        lo, hi = evaluate(x.min, env), evaluate(x.max, env)
        assert np.all(lo <= val) and np.all(val <= hi), f"{x.render()} leaves its bounds [{x.min}, {x.max}]"
    return val


def chain_text(shape, chain: Chain) -> str:
    text = f"ShapeTracker.from_shape({shape})"
    return text + "".join(f".{op}({arg})" for op, arg in chain)


def assert_matches_concrete(st: ShapeTracker, shape: tuple, chain: Chain, values: dict[str, int]) -> None:
    """st (the symbolic chain) means at `values` what the chain means when built on concrete sizes."""
    where = f"{chain_text(shape, chain)} at {values}"
    oracle = build_chain(shape, chain, values)
    want_idx, want_valid = oracle.indices()
    var_vals = {v: values[v.expr] for v in st.vars()}
    assert at(st.shape, values) == oracle.shape, where
    # 1. the views at the values
    got_idx, got_valid = st.indices(var_vals)
    np.testing.assert_array_equal(got_valid, want_valid, err_msg=f"valid elements differ: {where}")
    np.testing.assert_array_equal(np.where(want_valid, got_idx, 0), np.where(want_valid, want_idx, 0), where)
    # 2. the index and validity expressions the renderer prints
    if 0 in oracle.shape:
        return
    idx, valid = st.expr_idxs()
    env: dict[str, object] = dict(values)
    for d, s in enumerate(oracle.shape):
        env[f"idx{d}"] = np.arange(s).reshape([-1 if a == d else 1 for a in range(len(oracle.shape))])
    got_valid = np.broadcast_to(evaluate(valid, env, check=True) != 0, oracle.shape)
    np.testing.assert_array_equal(got_valid, want_valid, err_msg=f"valid expression {valid.render()}: {where}")
    got_idx = np.broadcast_to(evaluate(idx, env, check=True), oracle.shape)
    np.testing.assert_array_equal(
        np.where(want_valid, got_idx, 0), np.where(want_valid, want_idx, 0), f"index {idx.render()}: {where}"
    )


def chain_vars(shape: tuple, chain: Chain) -> list[Variable]:
    """The variables of the start shape and of every op's argument, by name."""

    def nodes(x):
        if isinstance(x, tuple):
            return [n for y in x for n in nodes(y)]
        return [x] if isinstance(x, Node) else []

    found = {v.expr: v for x in nodes((shape, *[arg for _, arg in chain])) for v in x.vars()}
    return [found[name] for name in sorted(found)]


def value_sets(variables: list[Variable], rng: random.Random) -> list[dict[str, int]]:
    """Every variable at its smallest, at its largest, and each at a value in between."""
    sets = [{v.expr: v.min for v in variables}, {v.expr: v.max for v in variables}]
    sets.append({v.expr: rng.randint(v.min, v.max) for v in variables})
    if len(variables) > 1:  # the extremes mixed
        sets.append({v.expr: (v.min, v.max)[n % 2] for n, v in enumerate(variables)})
    return sets


def check_chain(shape: tuple, chain: Chain, rng: random.Random | None = None) -> ShapeTracker:
    st = build_chain(shape, chain)
    for values in value_sets(chain_vars(shape, chain), rng or random.Random(0)):
        assert_matches_concrete(st, shape, chain, values)
    return st


# ---------------------------------------------------------------------------------------------------------------
# random chains
# ---------------------------------------------------------------------------------------------------------------

VI, VJ = Variable("i", 1, 5), Variable("j", 0, 4)  # the fuzzer's variables


def always_le(a, b) -> bool:
    """a <= b at every value of i and j: checked by trying them all (the generator must never build an invalid
    chain, and kernel.py's own bounds are what is under test)."""
    names = sorted({v.expr for x in (a, b) if isinstance(x, Node) for v in x.vars()})
    ranges = [range(v.min, v.max + 1) for v in (VI, VJ) if v.expr in names]
    return all(at(a, dict(zip(names, vals))) <= at(b, dict(zip(names, vals))) for vals in itertools.product(*ranges))


def random_size(rng: random.Random):
    return rng.choice([1, 2, 3, 4, VI, VI, VJ, VI + 1, VJ + 2, VI * 2])


def random_op(st: ShapeTracker, rng: random.Random):
    """A movement op (name, argument) that is valid on st's shape at every value of the variables."""
    shape, n = st.shape, len(st.shape)
    op = rng.choice(["pad", "shrink", "reshape", "reshape", "expand", "permute", "flip", "stride"])
    if op == "pad":
        amounts = [0, 0, 1, 2, VI, VJ]
        return "pad", tuple((rng.choice(amounts), rng.choice(amounts)) for _ in shape)
    if op == "shrink":
        arg = []
        for s in shape:
            points = [0, 1, 2, s, s - 1, s - 2, VI, VJ, VI - 1]
            pairs = [(b, e) for b in points for e in points if always_le(0, b) and always_le(b, e) and always_le(e, s)]
            arg.append(rng.choice(pairs))
        return "shrink", tuple(arg)
    if op == "expand":
        ones = [a for a, s in enumerate(shape) if s == 1]
        if not ones:
            return "reshape", shape[:1] + (1,) + shape[1:] if n else (1,)
        a = rng.choice(ones)
        return "expand", tuple(rng.choice([2, 3, VI, VJ + 1]) if d == a else s for d, s in enumerate(shape))
    if op == "permute":
        order = list(range(n))
        rng.shuffle(order)
        return "permute", tuple(order)
    if op == "flip":
        return ("stride", tuple(-1 if d == rng.randrange(n) else 1 for d in range(n))) if n else ("reshape", (1,))
    if op == "stride":
        return "stride", tuple(rng.choice([1, 1, 2, -2, 3]) for _ in shape)
    # reshape: merge two neighbours, split a size, add or drop a 1, or flatten
    kind = rng.choice(["merge", "split", "one", "flatten"])
    if kind == "merge" and n >= 2:
        a = rng.randrange(n - 1)
        return "reshape", shape[:a] + (shape[a] * shape[a + 1],) + shape[a + 2 :]
    if kind == "split":
        for a in rng.sample(range(n), n):
            s = shape[a]
            if isinstance(s, int) and s % 2 == 0 and s > 2:
                return "reshape", shape[:a] + (2, s // 2) + shape[a + 1 :]
            if isinstance(s, Node) and s == VI * 2:
                return "reshape", shape[:a] + (VI, 2) + shape[a + 1 :]
    if kind == "flatten" and n >= 2:
        return "reshape", (K.prod(shape),)
    if 1 in shape and rng.random() < 0.5:
        a = shape.index(1)
        return "reshape", shape[:a] + shape[a + 1 :]
    a = rng.randrange(n + 1)
    return "reshape", shape[:a] + (1,) + shape[a:]


def random_chain(rng: random.Random) -> tuple[tuple, Chain, ShapeTracker | None, str | None]:
    """(start shape, chain, its symbolic ShapeTracker or None, why it was refused). The symbolic build may refuse
    an op with a ValueError (a mask bound or a reshape it can't decide at every value): then the chain stops."""
    shape = tuple(random_size(rng) for _ in range(rng.randint(1, 3)))
    st, chain = ShapeTracker.from_shape(shape), []
    for _ in range(rng.randint(1, 5)):
        op, arg = random_op(st, rng)
        try:
            st = getattr(st, op)(arg)
        except ValueError as e:
            return shape, chain, st if chain else None, str(e)
        chain.append((op, arg))
        if K.prod(at(st.shape, {"i": 5, "j": 4})) > 400:  # keep the evaluation small
            break
    return shape, chain, st, None


def fuzz_chains(n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        yield random_chain(rng)


def test_fuzz_symbolic_chains_against_concrete_rebuilds():
    rng = random.Random(FUZZ_SEED)
    checked = refused = 0
    for shape, chain, st, why in fuzz_chains(FUZZ_CHAINS, FUZZ_SEED):
        refused += why is not None
        if st is None or not chain:
            continue
        for values in value_sets(chain_vars(shape, chain), rng):
            assert_matches_concrete(st, shape, chain, values)
        checked += 1
    assert checked >= FUZZ_CHAINS // 2, f"only {checked} of {FUZZ_CHAINS} chains built ({refused} refused)"


# ---------------------------------------------------------------------------------------------------------------
# on the device: a symbolic kernel against the same kernel built on the concrete rebuilds
# ---------------------------------------------------------------------------------------------------------------

Loads = list  # [(start shape, chain)]: one per input buffer


def copy_ast(*sts: ShapeTracker):
    """out = the sum of the loads (a copy for one), stored contiguously."""
    value = load(1, sts[0])
    for n, st in enumerate(sts[1:], start=2):
        value = alu(BinaryOps.ADD, value, load(n, st))
    return (store(value),)


def sum_ast(axis: int) -> Callable:
    def build(*sts: ShapeTracker):
        (out,) = copy_ast(*sts)
        return (store(reduce(ReduceOps.SUM, out.src[0], (axis,))),)

    return build


def run_against_concrete(R, build_ast: Callable, loads: Loads, values: dict[str, int], opts=()) -> None:
    """Run build_ast on the symbolic chains at `values`, with `opts` ("hand": the heuristics), and compare with the
    unoptimized kernel built on the concrete rebuilds: same inputs, each padded with 16 more elements that only a
    read past the buffer would see."""
    k = Kernel(*build_ast(*[build_chain(shape, chain) for shape, chain in loads]))
    if opts == "hand":
        k.hand_coded_optimizations()
    for opt in () if opts == "hand" else opts:
        k.apply_opt(opt)
    oracle = Kernel(*build_ast(*[build_chain(shape, chain, values) for shape, chain in loads]))
    var_vals = {v.expr: values[v.expr] for v in k.vars}
    sizes = {b.idx: b.size for b in R.buffers(R.concrete_ast(k, R.var_values(k, var_vals)))}
    rng = np.random.default_rng(0)
    inputs = []
    for b in R.buffers(oracle.ast):
        if b.read:
            inputs.append(rng.standard_normal(max(b.size, sizes[b.idx]) + 16).astype(np.float32))
    (got,) = R.run(k, *inputs, var_vals=var_vals)
    (want,) = R.run(oracle, *inputs)
    where = f"{[chain_text(s, c) for s, c in loads]} with {k.applied_opts} at {values}"
    np.testing.assert_allclose(got[: want.size], want, rtol=1e-5, atol=1e-5, err_msg=where)


def random_opts(k: Kernel, rng: random.Random) -> list[Opt]:
    """Up to three opts that apply to k (each is applied as it is drawn)."""
    applied = []
    for _ in range(3):
        op = rng.choice([OptOps.UPCAST, OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.UNROLL])
        opt = Opt(op, rng.randrange(3), rng.choice([0, 2, 3, 4]))
        try:
            k.apply_opt(opt)
        except KernelOptError:
            continue
        applied.append(opt)
    return applied


def test_fuzzed_chains_on_the_device(device):
    """Every other fuzzed chain is copied after the heuristics; the others are summed over a random axis with random
    opts. Each runs at two value sets against the concrete rebuild."""
    import runtime as R

    rng = random.Random(FUZZ_SEED)
    ran = 0
    for shape, chain, st, _ in fuzz_chains(4 * FUZZ_DEVICE, FUZZ_SEED + 1):
        if st is None or not st.vars() or ran >= FUZZ_DEVICE:
            continue
        if ran % 2:
            build, opts = sum_ast(rng.randrange(len(st.shape))), None
            opts = random_opts(Kernel(*build(st)), rng)
        else:
            build, opts = copy_ast, "hand"
        for values in value_sets(chain_vars(shape, chain), rng)[:2]:
            run_against_concrete(R, build, [(shape, chain)], values, opts=opts)
        ran += 1
    assert ran == FUZZ_DEVICE


def test_a_symbolic_kernel_with_an_empty_axis_runs(device):
    """A shrink to 0 elements in a symbolic kernel: the runtime gave its constant index a range [0, -1]."""
    import runtime as R

    j = Variable("j", 0, 4)
    loads = [((4, 4, j + 2), [("shrink", ((0, j), (1, 1), (0, j)))])]
    for values in ({"j": 0}, {"j": 3}):
        run_against_concrete(R, sum_ast(0), loads, values)


# ---------------------------------------------------------------------------------------------------------------
# symbolic defects found by trying to break it, each against its concrete rebuild (each failed before the fix)
# ---------------------------------------------------------------------------------------------------------------

I16 = Variable("i", 1, 16)
CAUSAL_SHIFT = ((I16,), [("pad", ((1, 0),)), ("shrink", ((0, I16),))])  # x[t-1], 0 at t = 0
PAD_TO_I = ((4,), [("pad", ((0, Variable("i", 4, 16) - 4),))])  # 4 elements padded to length i
J16 = Variable("j", 0, 16)
CAT_A = ((2,), [("pad", ((0, J16),))])  # cat([a (2 elements), b (j elements)])
CAT_B = ((J16,), [("pad", ((2, 0),))])
PAD_THEN_PAD = ((I16,), [("pad", ((0, 3),)), ("pad", ((1, 0),))])
TILE = ((I16,), [("reshape", (1, I16)), ("expand", (I16, I16)), ("reshape", (I16 * I16,))])


@pytest.mark.parametrize(
    "case",
    [CAUSAL_SHIFT, PAD_TO_I, CAT_A, CAT_B, PAD_THEN_PAD, TILE],
    ids=["causal_shift", "pad_to_i", "cat_a", "cat_b", "pad_then_pad", "tile_flatten"],
)
def test_symbolic_view_means_its_concrete_rebuild(case):
    shape, chain = case
    st = check_chain(shape, chain)
    for v in chain_vars(shape, chain):  # and at every value of its variable
        for val in range(v.min, v.max + 1):
            assert_matches_concrete(st, shape, chain, {v.expr: val})


def test_causal_shift_masks_only_its_first_element():
    _, valid = build_chain(*CAUSAL_SHIFT).expr_idxs()
    assert valid.render() != "0" and "idx0" in valid.render()  # not folded to "never valid"


def test_a_mask_bound_that_is_not_decided_is_refused():
    """(16 elements).pad((0, 16)).shrink((0, i)) with i up to 32 is valid where idx < min(16, i): neither is the
    smaller at every i, and a View can't hold the min of two nodes."""
    i = Variable("i", 1, 32)
    with pytest.raises(ValueError, match="shrink .*neither 16 nor i is the smaller at every value"):
        ShapeTracker.from_shape((16,)).pad(((0, 16),)).shrink(((0, i),))
    # where one bound is the smaller at every value, it is taken (not Python's min() of two nodes)
    assert K.sym_min(I16 + 1, I16 + 4) == I16 + 1 and K.sym_max(I16 + 1, I16 + 4) == I16 + 4


def test_lt_node_of_a_sum_with_a_product_of_two_variables():
    a, b, c = Variable("a", 1, 8), Variable("b", 1, 8), Variable("c", 0, 4)
    lt = K.create_lt_node(a * b + c * 4, 8)  # was: TypeError from math.gcd
    for x, y, z in itertools.product(range(1, 9), range(1, 9), range(0, 5)):
        assert evaluate(lt, {"a": x, "b": y, "c": z}) == int(x * y + z * 4 < 8)


def test_comparison_decided_only_when_it_holds_at_every_value():
    idx = Variable("idx0", 0, I16 - 1)  # a loop index over i elements
    assert K.create_lt_node(idx, I16) == 1  # idx <= i-1 < i at every i
    assert isinstance(K.create_lt_node(idx, 4), K.LtNode)  # true for idx < 4 only
    assert isinstance(K.create_ge_node(idx, 1), K.LtNode)  # false at idx = 0 only (was folded to 0)
    assert K.create_lt_node(idx, I16 + 1) == 1 and K.create_ge_node(idx, 0) == 1
    # the bound behind it: the index is replaced by the end of its range, which cancels against the size
    assert K.upper_bound(idx - I16) == -1 and K.lower_bound(I16 - idx) == 1
    assert K.always_lt(idx, I16) and not K.always_lt(idx, I16 - 1) and not K.always_lt(idx, 15)


def test_division_by_a_symbolic_size_is_kept_and_rendered():
    import render

    idx, _ = build_chain(*TILE).expr_idxs()
    assert "%" in idx.render()  # idx0 % i: was dropped, reading past i elements at i = 3
    assert render.cexpr(idx) == "(idx0%i)"


def test_causal_shift_pads_and_tiles_run_as_their_concrete_rebuilds(device):
    import runtime as R

    for values in ({"i": 1}, {"i": 3}, {"i": 16}):
        run_against_concrete(R, copy_ast, [CAUSAL_SHIFT], values)
        run_against_concrete(R, copy_ast, [PAD_THEN_PAD], values)
        run_against_concrete(R, copy_ast, [TILE], values)
        run_against_concrete(R, copy_ast, [TILE], values, opts="hand")
    for values in ({"i": 4}, {"i": 9}, {"i": 16}):
        run_against_concrete(R, copy_ast, [PAD_TO_I], values)
    for values in ({"j": 0}, {"j": 1}, {"j": 16}):
        run_against_concrete(R, copy_ast, [CAT_A, CAT_B], values)
        run_against_concrete(R, copy_ast, [CAT_A, CAT_B], values, opts="hand")


# a cat along the last axis of a (j, 4, 2) and a (j, 4, i) buffer: a (j, 4, 2+i) view
CAT3_A = ((J16, 4, 2), [("pad", ((0, 0), (0, 0), (0, I16)))])
CAT3_B = ((J16, 4, I16), [("pad", ((0, 0), (0, 0), (2, 0)))])


@pytest.mark.parametrize(
    "axis, opt",
    [(1, Opt(OptOps.GROUP, 0, 0)), (1, Opt(OptOps.GROUPTOP, 0, 2)), (1, Opt(OptOps.UNROLL, 0, 0)),
     (0, Opt(OptOps.LOCAL, 0, 2)), (2, Opt(OptOps.UPCAST, 0, 4))],
)  # fmt: skip
def test_sum_over_a_symbolic_cat_with_opts_on_the_device(device, axis, opt):
    import runtime as R

    for values in ({"i": 1, "j": 0}, {"i": 3, "j": 2}, {"i": 16, "j": 16}):
        run_against_concrete(R, sum_ast(axis), [CAT3_A, CAT3_B], values, opts=[opt])
