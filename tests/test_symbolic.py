"""Symbolic shapes: sizes that are only known when the kernel runs, as tinygrad 0.9.1 has them.

A size may be a `Variable("i", 1, 64)` or an expression of one. testdata/symbolic.json holds 52 kernel cases
tinygrad 0.9.1 built with such sizes (elementwise, matmuls with a symbolic M or K, reductions, cat, softmax and
attention pieces, a shrunk KV cache, two variables) and its state after construction, after the heuristics and after
every step of random opt sequences; they are replayed here, then run on the OpenCL device at the values tinygrad
bound and at each variable's smallest and largest value. The rest pins the symbolic API by its behaviour.

By default the device runs every case after the heuristics and after the accepted steps of its first opt sequence;
RUNTIME_SYMBOLIC_ALL=1 runs the accepted steps of every sequence.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import kernel as K
import demo
from kernel import (
    Kernel,
    KernelOptError,
    NumNode,
    Opt,
    OptOps,
    ShapeTracker,
    Variable,
    View,
    create_lt_node,
    sym_infer,
    sym_render,
)
from demo import attention_ast
from corpus import build_kernel, case_id, load_corpus
from tests.golden import accepted_kernels, check_construction, check_heuristics, check_sequences, enc

SYMBOLIC_CASES = load_corpus("symbolic.json")["cases"]
SYMBOLIC_IDS = [case_id(c) for c in SYMBOLIC_CASES]


# ---------------------------------------------------------------------------------------------------------------
# the golden symbolic corpus
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.corpus
def test_symbolic_corpus_is_complete():
    assert len(SYMBOLIC_CASES) == 52
    assert all(c["vars"] and c["var_vals"] for c in SYMBOLIC_CASES)
    # tinygrad 0.9.1 was not asked for tensor cores on these kernels: there is no tensor-core state to replay (a
    # corpus that adds one needs golden.py's check_tensor_cores here)
    assert not any("tensor_cores" in c for c in SYMBOLIC_CASES)


@pytest.mark.corpus
def test_symbolic_corpus_holds_no_multi_reduce_kernel():
    """Each case has at most one reduce op (kernels with several are multireduce.json's)."""
    for case in SYMBOLIC_CASES:
        k = build_kernel(case)
        assert len(k.reduceops) <= 1, case["name"]


@pytest.mark.corpus
@pytest.mark.parametrize("case", SYMBOLIC_CASES, ids=SYMBOLIC_IDS)
def test_symbolic_kernel_construction_matches_tinygrad(case):
    k = check_construction(case)
    assert [enc(v) for v in k.vars] == case["vars"]


@pytest.mark.corpus
@pytest.mark.parametrize("case", SYMBOLIC_CASES, ids=SYMBOLIC_IDS)
def test_symbolic_hand_coded_optimizations_match_tinygrad(case):
    check_heuristics(case)


@pytest.mark.corpus
@pytest.mark.parametrize("case", SYMBOLIC_CASES, ids=SYMBOLIC_IDS)
def test_symbolic_opt_sequences_match_tinygrad(case):
    """Each opt is accepted or refused as tinygrad did; a refused one leaves the kernel exactly as it was."""
    check_sequences(case)


# ---------------------------------------------------------------------------------------------------------------
# the symbolic API: Variable, Node, sym_infer, render
# ---------------------------------------------------------------------------------------------------------------


class TestVariable:
    def test_bind_carries_a_value_and_unbind_splits_it_off(self):
        i = Variable("i", 1, 64)
        bound = i.bind(37)
        assert bound.val == 37 and bound.expr == "i" and (bound.min, bound.max) == (1, 64)
        var, val = bound.unbind()
        assert var == i and val == 37
        assert var._val is None

    def test_bind_leaves_the_variable_itself_unbound(self):
        i = Variable("i", 1, 64)
        i.bind(5)
        with pytest.raises(ValueError, match="isn't bound"):
            i.val

    def test_bind_outside_the_range_is_refused(self):
        with pytest.raises(ValueError, match=r"range is \[1, 64\]"):
            Variable("i", 1, 64).bind(65)
        with pytest.raises(ValueError, match="already bound"):
            Variable("i", 1, 64).bind(3).bind(4)

    def test_a_bound_variable_is_a_different_key(self):
        """tinygrad's identity of a node is its DEBUG text, which shows a bound value."""
        i = Variable("i", 1, 64)
        assert i.key == "i[1-64]" and i.bind(3).key == "i[1-64=3]"
        assert i.bind(3) != i

    def test_repr_rebuilds_a_variable_and_str_gives_its_range(self):
        i = Variable("i", 1, 64)
        assert repr(i) == "Variable('i', 1, 64)" and repr(i.bind(2)) == "Variable('i', 1, 64).bind(2)"
        assert str(i) == "<i[1-64]>" and str(i * 3) == "<(i[1-64]*3)>"
        assert repr(NumNode(4)) == "NumNode(4)"

    def test_vars_are_the_variables_an_expression_holds(self):
        i, j = Variable("i", 1, 64), Variable("j", 1, 32)
        assert (i * 4 + j // 2).vars() == {i, j}
        assert (i < j).vars() == {i, j}
        assert NumNode(3).vars() == set()


class TestSubstituteAndInfer:
    def test_substitute_replaces_variables_and_simplifies(self):
        i, j = Variable("i", 1, 64), Variable("j", 1, 32)
        e = i * 4 + j + 2
        assert e.substitute({i: NumNode(3)}) == j + 14
        assert e.substitute({i: NumNode(3), j: NumNode(5)}) == 19
        k = Variable("k", 1, 64)
        assert (i * 2).substitute({i: k}) == k * 2

    def test_sym_infer_evaluates_at_values(self):
        i, j = Variable("i", 1, 64), Variable("j", 1, 32)
        assert sym_infer(i * 3 + j, {i: 37, j: 9}) == 120
        assert sym_infer((i * 4 + 3) // 2, {i: 5}) == 11
        assert sym_infer(7, {i: 5}) == 7

    def test_sym_infer_without_every_value_is_an_error(self):
        i, j = Variable("i", 1, 64), Variable("j", 1, 32)
        with pytest.raises(ValueError, match="no value"):
            sym_infer(i + j, {i: 1})

    def test_unbind_drops_bound_values(self):
        i = Variable("i", 1, 64)
        assert (i.bind(3) * 2).unbind()[0] == i * 2


class TestComparisons:
    def test_comparisons_are_lt_nodes_decided_by_bounds(self):
        i = Variable("i", 1, 64)
        assert (i < 65) == 1 and (i < 1) == 0  # decided: NumNodes
        assert isinstance(i < 32, K.LtNode) and (i < 32).render() == "(i<32)"
        assert (i >= 1) == 1 and (i > 64) == 0 and (i <= 64) == 1

    def test_truth_value_is_possibly_true(self):
        """tinygrad asks `if size > 1` of symbolic sizes: a comparison that may hold is truthy, one that can't isn't."""
        i = Variable("i", 1, 64)
        assert bool(i > 1) and bool(i < 32)
        assert not bool(i > 64) and not bool(i < 1)

    def test_comparisons_spell_as_tinygrad(self):
        i, j = Variable("i", 1, 64), Variable("j", 1, 32)
        assert (i <= 10).render() == "(i<11)"
        assert (i > 10).render() == "((i*-1)<-10)"
        assert (i >= 10).render() == "((i*-1)<-9)"
        assert (i < j).render() == "(i<j)"

    def test_comparing_nodes_by_their_ranges(self):
        small, big = Variable("a", 0, 3), Variable("b", 4, 9)
        assert (small < big) == 1 and (big < small) == 0


class TestNodeArithmetic:
    def test_a_node_times_a_node_is_a_mulnode_in_name_order(self):
        i, j = Variable("i", 1, 64), Variable("j", 1, 32)
        e = i * j
        assert isinstance(e, K.MulNode) and (e.min, e.max) == (1, 64 * 32)
        assert e.render() == "(i*j)" and (j * i).render() == "(i*j)"  # written in name order, as tinygrad
        assert i * NumNode(3) == i * 3

    def test_node_div_and_mod_by_a_node_simplify_where_the_bounds_decide_and_stay_otherwise(self):
        i, small = Variable("i", 8, 64), Variable("s", 0, 7)
        assert i // i == 1 and i % i == 0
        assert small // i == 0 and small % i == small
        j = Variable("j", 1, 32)
        assert (j * i) // i == j and (j * i + i) // i == j + 1
        a, b = Variable("a", 1, 10), Variable("b", 1, 10)
        assert (a // b).render() == "(a//b)" and (a % b).render() == "(a%b)"  # undecided: kept, not folded
        assert ((a // b).min, (a // b).max) == (0, 10) and ((a % b).min, (a % b).max) == (0, b - 1)
        assert ((a - 2) // b).render() == "(((-2+a+b)//b)+-1)"  # C's / of a numerator >= 0 floors, as //

    def test_an_int_divided_or_modded_by_a_node_simplifies_by_its_bounds(self):
        i = Variable("i", 8, 64)
        assert 5 // i == 0 and 5 % i == 5
        assert isinstance(12 - i, K.Node)

    def test_bounds_of_a_symbolic_range_are_nodes(self):
        i = Variable("i", 1, 64)
        idx = Variable("idx0", 0, i - 1)  # a loop index over a symbolic size: its max is a node
        assert idx.max == i - 1
        assert (idx * 4).max == (i - 1) * 4


class TestRender:
    def test_render_is_tinygrads_python_text(self):
        a, i, k = Variable("a", 0, 7), Variable("i", 0, 255), Variable("k", 0, 255)
        assert (a + 1).render() == "(1+a)"
        assert (a // 2).render() == "(a//2)"
        assert (a % 3).render() == "(a%3)"
        assert K.Node.ands([create_lt_node(i, 128), create_lt_node(k, 128)]).render() == "((i<128) and (k<128))"

    def test_sym_render_takes_ints_and_nodes(self):
        assert sym_render(5) == "5" and sym_render(Variable("i", 1, 64) * 2) == "(i*2)"

    def test_render_takes_another_spelling(self):
        """render.py spells the same nodes as C: / for //, && for and."""
        import render

        a, b = Variable("a", 0, 7), Variable("b", 0, 7)
        assert render.cexpr(a // 2 + 3) == "((a/2)+3)"
        assert render.cexpr(K.Node.ands([create_lt_node(a, 5), create_lt_node(b, 5)])) == "((a<5)&&(b<5))"


# ---------------------------------------------------------------------------------------------------------------
# View and ShapeTracker with symbolic sizes
# ---------------------------------------------------------------------------------------------------------------

i = Variable("i", 1, 64)


class TestSymbolicShapeTracker:
    def test_from_shape_has_symbolic_strides(self):
        st = ShapeTracker.from_shape((3, i))
        assert st.shape == (3, i) and st.views[0].strides == (i, 1) and st.contiguous
        assert st.size == 3 * 64 and st.real_size() == 3 * 64  # counted at the largest value

    def test_reshape_to_and_from_a_symbolic_shape(self):
        st = ShapeTracker.from_shape((3, i)).reshape((3 * i,))
        assert st.shape == (i * 3,) and len(st.views) == 1
        assert st.reshape((3, i)).views == ShapeTracker.from_shape((3, i)).views

    def test_symbolic_reshape_of_another_size_is_refused(self):
        with pytest.raises(ValueError, match="sizes differ"):
            ShapeTracker.from_shape((3, i)).reshape((4, i))

    def test_shrink_to_a_symbolic_length(self):
        st = ShapeTracker.from_shape((64, 8)).shrink(((0, i), (0, 8)))
        assert st.shape == (i, 8) and st.views[0].strides == (8, 1)
        idx, valid = st.indices({i: 5})
        assert idx.shape == (5, 8) and idx[4, 7] == 39 and valid.all()

    def test_pad_a_symbolic_axis_masks_it(self):
        st = ShapeTracker.from_shape((i,)).pad(((1, 1),))
        assert st.shape == (i + 2,) and st.views[-1].mask == ((1, i + 1),)
        idx, valid = st.indices({i: 3})
        assert valid.tolist() == [False, True, True, True, False] and idx.tolist() == [0, 0, 1, 2, 0]

    def test_expand_and_permute_with_symbolic_sizes(self):
        st = ShapeTracker.from_shape((1, 4)).expand((i, 4)).permute((1, 0))
        assert st.shape == (4, i) and st.views[-1].strides == (1, 0)
        assert st.real_strides() == (1, 0)

    def test_expr_idxs_of_a_symbolic_shape_multiplies_by_the_variable(self):
        idx, valid = ShapeTracker.from_shape((3, i)).expr_idxs()
        assert idx.render() == "((i*idx0)+idx1)" and valid == 1

    def test_var_vals_are_the_bound_values_and_unbind_splits_them_off(self):
        bound = i.bind(37)
        st = ShapeTracker.from_shape((3, bound))
        assert st.var_vals == {i: 37}
        unbound, values = st.unbind()
        assert unbound == ShapeTracker.from_shape((3, i)) and values == {i: 37}
        assert ShapeTracker.from_shape((3, i)).vars() == {i}

    def test_reshape_of_a_non_contiguous_view_to_a_bound_symbolic_shape(self):
        """A permuted int view takes a symbolic shape axis for axis, where each size is the bound value."""
        st = ShapeTracker.from_shape((4, 3)).permute((1, 0)).reshape((3, i.bind(4)))
        assert st.shape == (3, i.bind(4)) and st.views[-1].strides == (1, 3)

    def test_at_values_needs_every_variable(self):
        with pytest.raises(ValueError, match="no value for the variable"):
            ShapeTracker.from_shape((3, i)).at_values({})

    def test_movement_op_arguments_may_be_numpy_ints_and_nodes_but_not_floats(self):
        st = ShapeTracker.from_shape((8, 8))
        assert st.reshape((np.int64(64),)).shape == (64,)
        assert st.shrink(((0, Variable("n", 1, 8).bind(3)), (0, 8))).shape[0].expr == "n"
        with pytest.raises(ValueError, match="at every value of the variables"):
            st.shrink(((0, i.bind(3)), (0, 8)))  # i may be up to 64, past the 8 elements
        with pytest.raises(ValueError):
            st.reshape((64.0,))
        with pytest.raises(ValueError):
            st.reshape((True, 64))


class TestShapeTrackerAlgebra:
    def test_add_applies_the_second_on_top_of_the_first(self):
        a = ShapeTracker.from_shape((4, 6)).permute((1, 0))
        b = ShapeTracker.from_shape((6, 4)).reshape((24,))
        both = a + b
        idx, _ = both.indices()
        want = np.arange(24).reshape(4, 6).T.reshape(-1)
        assert idx.tolist() == want.tolist()

    def test_a_views_vars_are_bound_and_unbind_splits_them_off(self):
        v = View.create((3, i.bind(5)))
        assert v.vars() == {i.bind(5)}
        assert v.unbind() == (View.create((3, i)), {i: 5})


# ---------------------------------------------------------------------------------------------------------------
# Kernel with symbolic sizes
# ---------------------------------------------------------------------------------------------------------------


def plus_one(n=None) -> Kernel:
    n = i if n is None else n
    st = ShapeTracker.from_shape((3, n))
    return Kernel(demo.store(demo.alu(K.BinaryOps.ADD, demo.load(1, st), demo.const(1.0, (3, n)))))


class TestSymbolicKernel:
    def test_a_symbolic_kernel_has_its_vars_and_a_symbolic_colored_shape(self, monkeypatch):
        k = plus_one()
        assert k.vars == [i]
        assert k.full_shape == (i * 3,)
        monkeypatch.setenv("NO_COLOR", "1")
        assert k.colored_shape() == "<(i[1-64]*3)>"

    def test_padto_is_refused_on_a_symbolic_kernel(self):
        k = plus_one()
        with pytest.raises(KernelOptError, match="does not work with symbolic shape"):
            k.apply_opt(Opt(OptOps.PADTO, 0, 32))

    def test_a_whole_symbolic_axis_is_not_an_amount(self):
        k = Kernel(*attention_ast(64, 256))
        before = (k.full_shape, k.colors(), list(k.sts))
        with pytest.raises(KernelOptError, match="Node is meaningless"):
            k.apply_opt(Opt(OptOps.LOCAL, 0, 0))
        with pytest.raises(KernelOptError, match="no longer valid shift"):
            k.apply_opt(Opt(OptOps.UPCAST, 0, 4))  # i % 4 isn't known to be 0
        assert (k.full_shape, k.colors(), list(k.sts)) == before

    def test_an_exact_split_of_a_symbolic_size_is_accepted(self):
        k = plus_one()
        k.apply_opt(Opt(OptOps.UPCAST, 0, 3))  # (i*3) splits exactly into (i, 3)
        assert k.full_shape == (i, 3) and k.colors() == ["blue", "yellow"]

    def test_upcasted_axis_refuses_a_symbolic_amount(self):
        k = plus_one()
        k.upcasted = 1  # a symbolic last axis marked upcast: no opt makes this, but the check guards it
        with pytest.raises(KernelOptError, match="cannot upcast a symbolic amount"):
            k.upcasted_axis(0)

    def test_heuristics_skip_symbolic_axes(self):
        k = Kernel(*attention_ast(64, 256))
        k.hand_coded_optimizations()
        assert [str(o) for o in k.applied_opts] == ["UNROLL:0:4"]  # no grouping, locals or upcast of i

    def test_ordered_lazyops_puts_sources_first(self):
        (root,) = attention_ast(8, 16)
        order = K.ordered_lazyops(root)
        assert order[-1] == root  # ordered_lazyops is cached: an equal AST built earlier may answer
        assert all(order.index(s) < order.index(x) for x in order for s in x.src)

    def test_the_tensor_cores_follow_up_upcasts_m_then_n_by_the_largest_of_5_4_3_2_that_divides(self):
        k = Kernel(*demo.matmul_ast(64, 64, 64), opts=K.TARGETS["metal"])
        assert k.apply_tensor_cores(1)
        tco = k.tensor_core_opts
        assert k.applied_opts[1:3] == [Opt(OptOps.UPCAST, tco.axes[1], 4), Opt(OptOps.UPCAST, tco.axes[0], 4)]


# ---------------------------------------------------------------------------------------------------------------
# on the device
# ---------------------------------------------------------------------------------------------------------------

RUN_ALL = bool(os.environ.get("RUNTIME_SYMBOLIC_ALL"))


def value_sets(case) -> list[dict[str, int]]:
    """The values tinygrad bound, then each variable at its smallest and largest (the others as bound)."""
    sets = [dict(case["var_vals"])]
    for v in case["vars"]:
        for val in (v["min"], v["max"]):
            sets.append({**case["var_vals"], v["var"]: val})
    return sets


def optimized_kernels(case):
    """The kernel after the heuristics, then after each accepted step of its sequences (the first by default)."""
    k = build_kernel(case)
    k.hand_coded_optimizations()
    yield k
    yield from accepted_kernels(case, None if RUN_ALL else {0})


@pytest.fixture(scope="module")
def runtime():
    R = pytest.importorskip("runtime")
    try:
        R.get_device()
    except R.NoDeviceError as e:
        pytest.skip(f"no OpenCL device to run kernels on: {e}")
    return R


@pytest.mark.corpus
@pytest.mark.parametrize("case", SYMBOLIC_CASES, ids=SYMBOLIC_IDS)
def test_symbolic_kernel_verifies_at_every_length(case, runtime):
    R = runtime
    inputs = {}
    expected = {}
    for values in value_sets(case):
        key = tuple(sorted(values.items()))
        inputs[key] = R.random_inputs(build_kernel(case), var_vals=values)
        expected[key] = R.reference(build_kernel(case), *inputs[key], var_vals=values)
    for k in optimized_kernels(case):
        for key in inputs:
            R.verify(k, *inputs[key], expected=expected[key], var_vals=dict(key))


def test_one_program_serves_every_length(runtime):
    R = runtime
    k = Kernel(*attention_ast(64, 1024))
    k.hand_coded_optimizations()
    prg = R.render(k)
    assert "const int var0_i" in prg.src and prg.vars == [Variable("i", 1, 1024)]
    compiled = len(R.get_device().programs)
    for n in (1, 7, 300, 1024):
        inputs = R.random_inputs(k, var_vals={"i": n})
        (out,) = R.run(k, *inputs, var_vals={"i": n})
        q, keys = inputs
        assert out.shape == (n,)
        np.testing.assert_allclose(out, keys.reshape(n, 64) @ q / 8, rtol=1e-4, atol=1e-5)
        assert R.render(k).src == prg.src
    assert len(R.get_device().programs) - compiled <= 1  # built once (or not at all, if an earlier test built it)


def test_launch_size_follows_the_value(runtime):
    R = runtime
    k = plus_one()
    launch = R.Launch(k, R.random_inputs(k, var_vals={"i": 10}), {"i": 10})
    assert np.prod(launch.global_size) == 30
    assert launch.infos[0].size == 30 and launch.infos[1].size == 30


def test_var_vals_keys_may_be_names_or_variables(runtime):
    R = runtime
    k = plus_one()
    inputs = R.random_inputs(k, var_vals={i: 5})
    (a,) = R.run(k, *inputs, var_vals={"i": 5})
    (b,) = R.reference(k, *inputs, var_vals={i: 5})
    np.testing.assert_allclose(a, b)
    R.verify(k, *inputs, var_vals={i: 5})
    assert R.time_kernel(k, *inputs, runs=1, warmup=0, var_vals={"i": 5}) > 0


@pytest.mark.parametrize(
    "var_vals, message",
    [
        (None, r"no value for the variable i \(range \[1, 64\]\)"),
        ({"i": 0}, r"i=0 is outside its range \[1, 64\]"),
        ({"i": 65}, r"i=65 is outside its range \[1, 64\]"),
        ({"i": 3.0}, r"outside its range"),
        ({"i": 3, "j": 2}, r"no variable j \(its variables: i in \[1, 64\]\)"),
    ],
)
def test_a_missing_or_out_of_range_value_is_refused_before_launch(runtime, var_vals, message, monkeypatch):
    R = runtime
    k = plus_one()
    inputs = R.random_inputs(k, var_vals={"i": 64})
    monkeypatch.setattr(R, "build", lambda *a: pytest.fail("built a program for a bad value"))
    for fn in (R.run, R.reference, R.verify, R.time_kernel, R.random_inputs):
        args = (k,) if fn is R.random_inputs else (k, *inputs)
        with pytest.raises(ValueError, match=message):
            fn(*args, var_vals=var_vals)


def test_attention_demo_verifies_at_several_lengths(runtime):
    R = runtime
    k = Kernel(*attention_ast(64, 1024))
    k.hand_coded_optimizations()
    for values in R.sample_var_vals(k):
        R.verify(k, *R.random_inputs(k, var_vals=values), var_vals=values)
    assert [v["i"] for v in R.sample_var_vals(k)] == [1, 513, 1024]


def test_a_kernel_of_bound_variables_runs_at_their_values(runtime):
    """Bound in the AST (as tinygrad's scheduler leaves them), a variable needs no var_vals: its value is used."""
    R = runtime
    k = plus_one(i.bind(5))
    assert R.var_values(k) == {"i": 5}
    inputs = R.random_inputs(k)
    assert inputs[0].size == 15
    R.verify(k, *inputs)
    R.verify(k, *R.random_inputs(k, var_vals={"i": 9}), var_vals={"i": 9})  # another value still wins


def test_substitute_reaches_a_symbolic_divisor_and_comparison():
    """x // i, x % i and x < i take the values of both sides: evaluated, substituted and unbound through the divisor
    too (each kind of OpNode is rebuilt from its substituted operands)."""
    x, i = Variable("x", 0, 10), Variable("i", 1, 8)
    assert [sym_infer(e, {x: 7, i: 3}) for e in (x // i, x % i, x < i, x * i)] == [2, 1, 0, 21]
    assert [e.substitute({i: NumNode(3)}).render() for e in (x // i, x % i, x < i)] == ["(x//3)", "(x%3)", "(x<3)"]
    node, _ = (x // i.bind(3)).unbind()
    assert all(v._val is None for v in node.vars()) and {v.expr for v in node.vars()} == {"x", "i"}


def test_a_view_with_a_variable_bound_to_two_values_refuses_to_unbind():
    """View.unbind agrees with ShapeTracker.var_vals: one variable bound to 3 and to 5 is an error, not one value."""
    i = Variable("i", 1, 8)
    v = View.create((i.bind(3), i.bind(5)))
    for unbind in (v.unbind, ShapeTracker((v,)).unbind, lambda: ShapeTracker((v,)).var_vals):
        with pytest.raises(ValueError, match="i is bound to both 3 and 5"):
            unbind()
    assert View.create((i.bind(3), 4)).unbind()[1] == {i: 3}
