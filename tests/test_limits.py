"""Issue 23's renderer robustness, device limits and input checks.

An AST is walked once per distinct op, not once per path (shared ops), and without recursion (chains of thousands of
ops); any Variable name renders (the renderer names every C identifier itself); a launch past a limit the device
reports is a ValueError naming it, before anything is built or launched, and the search drops such a candidate.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import kernel
import runtime as R
from kernel import BinaryOps, Kernel, Opt, OptOps, ReduceOps, ShapeTracker, UnaryOps, Variable, alu, const, dtypes
from kernel import load, reduce, store

pytestmark = pytest.mark.usefixtures("device")  # conftest.py: skipped, saying why, without an OpenCL device


def _nesting(src: str) -> int:
    """The deepest nesting of brackets in C source."""
    depth, most = 0, 0
    for c in src:
        depth += (c == "(") - (c == ")")
        most = max(most, depth)
    return most


# ============================================================================================================
# every walk over an AST visits each distinct op once
# ============================================================================================================
def _doubled(depth: int, shape=(16,)):
    """x = x + x, `depth` times: 2**depth paths down to one LOAD."""
    x = load(1, ShapeTracker.from_shape(shape))
    for _ in range(depth):
        x = alu(BinaryOps.ADD, x, x)
    return x


def test_a_shared_op_is_rendered_once(monkeypatch):
    """Each op becomes C once per upcast combination (a shared one a register), not once per path that reaches it."""
    loads, real = [], R._Renderer.load
    monkeypatch.setattr(R._Renderer, "load", lambda self, i, idxs: loads.append(i) or real(self, i, idxs))
    src = R.render(Kernel(store(_doubled(16)))).src
    assert len(loads) == 1 and src.count("float alu") == 15  # one load; each op read twice is a register


def test_every_walk_over_a_deeply_shared_ast_is_linear():
    """Depth 40 (tinygrad 0.9.1 renders it in 1.3 s): 2**40 paths. The Kernel, its validation, C, reference, repr,
    equality, --loops and the PADTO check each visit an op once."""

    def build():
        x = alu(BinaryOps.MUL, _doubled(40, (4, 16)), const(2.0**-40, (4, 16)))  # the sum of the 2**40 paths
        return (store(reduce(ReduceOps.SUM, x, (1,))),)

    ast = build()
    k = Kernel(*ast)
    assert len(ast[0].lazyops) == 45 and ast == build()  # two ASTs built apart compare equal
    assert hash(ast[0]) == hash(Kernel(*ast).ast[0]) and len(repr(ast[0])) < 10_000
    assert repr(ast[0]).count("lazyops[") == 40  # each op read twice: written out once, then named by its place
    lines = kernel.loop_nest(k, width=10_000)
    assert len("\n".join(lines)) < 10_000 and sum(line.strip().startswith("t") for line in lines) == 39
    a = np.random.default_rng(0).random(64, dtype=np.float32)
    (out,) = R.run(k, a)
    np.testing.assert_allclose(out, a.reshape(4, 16).sum(axis=1), rtol=1e-6)
    R.verify(k, a)
    k.apply_opt(Opt(OptOps.PADTO, 1, 32))  # the padding's zeros stay zeros through every op
    R.verify(k, a)


# ============================================================================================================
# chains of thousands of ops: no recursion, and C that names intermediate values instead of nesting brackets
# ============================================================================================================
def _chain(length: int, shape=(8, 16)):
    """x = -(x * 0.5 + 0.25), ..., `length` ops; and the same in numpy."""
    x, steps = load(1, ShapeTracker.from_shape(shape)), []
    half, quarter = const(0.5, shape), const(0.25, shape)
    for i in range(length):
        op = (BinaryOps.MUL, BinaryOps.ADD, UnaryOps.NEG)[i % 3]
        x = alu(op, x) if op is UnaryOps.NEG else alu(op, x, half if op is BinaryOps.MUL else quarter)
        steps.append(op)

    def numpy(a: np.ndarray) -> np.ndarray:
        for op in steps:
            a = -a if op is UnaryOps.NEG else a * np.float32(0.5) if op is BinaryOps.MUL else a + np.float32(0.25)
        return a

    return x, numpy


def test_a_chain_of_2000_ops_builds_renders_runs_and_verifies():
    x, numpy = _chain(2000)
    ast = (store(reduce(ReduceOps.SUM, x, (1,))),)
    a = np.random.default_rng(1).random(128, dtype=np.float32)
    for opts in ([], None):  # as built, and after the heuristics
        k = Kernel(*ast)
        if opts is None:
            k.hand_coded_optimizations()
        prg = R.render(k)
        assert _nesting(prg.src) < 64  # clang refuses more than 256
        (out,) = R.run(k, a)
        np.testing.assert_allclose(out, numpy(a.reshape(8, 16)).sum(axis=1), rtol=1e-5)
        R.verify(k, a)
    assert Kernel(*ast).ast == ast and len(repr(ast[0])) > 2000 and len(kernel.loop_nest(k)) > 2
    padded = Kernel(*ast)
    padded.apply_opt(Opt(OptOps.PADTO, 1, 32))  # (the padding's consts read 0 too: every op keeps its zeros)
    R.verify(padded, a)


def test_a_chain_of_2000_unary_ops_has_a_dtype():
    x = load(1, ShapeTracker.from_shape((4,)))
    for _ in range(2000):
        x = alu(UnaryOps.NEG, x)
    assert x.dtype == dtypes.float
    a = np.arange(4, dtype=np.float32)
    k = Kernel(store(x))
    np.testing.assert_array_equal(R.run(k, a)[0], a)
    R.verify(k, a)


# ============================================================================================================
# a Variable's name never reaches the C
# ============================================================================================================
NAMES = ["ridx1", "idx0", "int", "x y", "gidx0", "data0", "acc0", "val0", "alu0", "temp", "smp", "lidx1", "var0_i"]
NAMES += ["max_float", "INFINITY", "get_group_id", "*/", "é", ""]


@pytest.mark.parametrize("name", NAMES)
def test_a_variable_of_any_name_renders_and_computes(name):
    """out[i] = sum_j a[i, j] + n for a row length n named `name`: it names a loop, a register, a buffer, a helper, a
    C keyword, nothing C can spell... The program's int argument is the renderer's own name for it."""
    n = Variable(name, 1, 16)
    rows = reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, n))), (1,))
    k = Kernel(store(alu(BinaryOps.ADD, rows, alu(UnaryOps.CAST, const(n, (4, 1), dtypes.int32), arg=dtypes.float))))
    a = np.arange(4 * 16, dtype=np.float32)
    for value in (5, 16):
        (out,) = R.run(k, a, var_vals={name: value})
        np.testing.assert_array_equal(out, a[: 4 * value].reshape(4, value).sum(axis=1) + value)
        R.verify(k, a, var_vals={n: value})
    prg = R.render(k)
    assert re.findall(r"const int (\w+)", prg.src) == R.c_var_names([n]) and prg.vars == [n]
    assert R.c_var_names([n])[0] == "var0_" + re.sub("[^A-Za-z0-9_]", "_", name)


def test_two_variables_whose_names_read_alike_are_two_arguments():
    rows, cols = Variable("x y", 1, 8), Variable("x_y", 1, 8)
    k = Kernel(store(reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((rows, cols))), (1,))))
    names = re.findall(r"const int (\w+)", R.render(k).src)
    assert names == ["var0_x_y", "var1_x_y"]
    a = np.arange(64, dtype=np.float32)
    (out,) = R.run(k, a, var_vals={"x y": 3, "x_y": 5})
    np.testing.assert_array_equal(out, a[:15].reshape(3, 5).sum(axis=1))
