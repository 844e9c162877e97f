"""The kernel rules and argument checks: no store or in-place read that races, local memory
within the target's after every opt, views of any store, and every argument and file
checked for its kind.

Each test states the rule for a class of input; a refusal names what is wrong, and what is accepted computes what
numpy computes (runtime.verify).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import json
import math
import os
import re
import warnings

import numpy as np
import pytest

import kernel
import demo as D
import runtime as R
from kernel import BinaryOps, BufferOps, Kernel, KernelOptError, LazyOp, MemBuffer, Opt, OptOps, ReduceOps
from kernel import ShapeTracker, TernaryOps, UnaryOps, Variable, View, dtypes
from demo import alu, const, load, reduce
from demo import matmul_ast
from demo import store
from demo import elementwise_ast, sum_ast
from tests.common import ROOT
from corpus import build_kernel, kernel_from_json, kernel_to_json, load_corpus, opt_of
from tests.golden import state_of

N = Variable("i", 1, 8)


def _store_through(st: ShapeTracker, value: LazyOp | None = None, idx: int = 0) -> LazyOp:
    """STORE into buffer idx through st, of value (default: a contiguous input of st's shape)."""
    value = value if value is not None else load(1, ShapeTracker.from_shape(st.shape))
    return LazyOp(BufferOps.STORE, (value,), MemBuffer(idx, dtypes.float32, st))


# ============================================================================================================
# a STORE writes each element from one loop point only
# ============================================================================================================
_RACING_STORES = {  # the store's view, what the refusal says
    "stride 0: out[i] = x[i, j] for every j": (ShapeTracker.from_shape((4, 1)).expand((4, 8)), r"writes .*axes \(1,\)"),
    "overlapping strides": (ShapeTracker((View.create((3, 3), (1, 1)),)), r"writes .*axes \(0, 1\)"),
    "a symbolic number of rows, stride 0": (
        ShapeTracker.from_shape((N, 1)).expand((N, 4)),
        r"writes .*axes \(1,\)",
    ),
    "symbolic rows that overlap": (
        ShapeTracker((View.create((N, 4), (2, 1)),)),
        r"may write .*axes \(1, 0\)",
    ),
    "stride 0 below a reshape": (
        ShapeTracker.from_shape((4, 1)).expand((4, 3)).reshape((12,)),
        r"may write .*axes \(1,\)",
    ),
}


@pytest.mark.parametrize("name", list(_RACING_STORES))
def test_a_store_that_writes_one_element_from_several_loop_points_is_refused(name):
    st, says = _RACING_STORES[name]
    with pytest.raises(ValueError, match="STORE into buffer 0 " + says):
        Kernel(_store_through(st))


def test_a_reduce_stored_along_a_kept_axis_with_stride_0_is_refused():
    """sum over k of x[i, j, k], stored at out[i] for every j: the j threads race on out[i]."""
    x = load(1, ShapeTracker.from_shape((4, 8, 16)))
    st = ShapeTracker.from_shape((4, 1, 1)).expand((4, 8, 1))
    with pytest.raises(ValueError, match=r"STORE into buffer 0 writes .*axes \(1,\)"):
        Kernel(_store_through(st, reduce(ReduceOps.SUM, x, (2,))))


_INJECTIVE_STORES = {
    "flipped": ShapeTracker.from_shape((16,)).stride((-1,)),
    "every second": ShapeTracker.from_shape((16,)).stride((2,)),
    "a part: out[4:12]": ShapeTracker.from_shape((16,)).shrink(((4, 12),)),
    "padded: writes inside its mask only": ShapeTracker.from_shape((8,)).pad(((2, 2),)),
    "transposed": ShapeTracker.from_shape((8, 4)).permute((1, 0)),
    "interleaved strides that never meet (3, 2)": ShapeTracker((View.create((2, 3), (3, 2)),)),
}


@pytest.mark.parametrize("name", list(_INJECTIVE_STORES))
def test_a_store_that_writes_each_element_once_runs_and_verifies(name, device):
    k = kernel.optimize(Kernel(_store_through(_INJECTIVE_STORES[name])))
    R.verify(k, *R.random_inputs(k))


# ============================================================================================================
# an output is read only where each loop point reads the element it writes
# ============================================================================================================
def _where_fold_ast() -> tuple[LazyOp, ...]:
    """tinygrad 0.9.1's test_linearizer test_where_fold: a = ones(4, 4); a.assign(b.where(2, a)) with
    b = a.shrink(((1, 2), None)).pad(((1, 2), None)), as tinygrad's scheduler gives it (row 1 of b reads row 1 of a:
    the element its own thread stores; the other rows are padding)."""
    a = ShapeTracker.from_shape((4, 4))
    b = ShapeTracker((View.create((4, 4), (0, 1), 4, ((1, 2), (0, 4))),))
    cond = alu(UnaryOps.CAST, load(0, b), arg=dtypes.bool)
    return (_store_through(a, alu(TernaryOps.WHERE, cond, const(2.0, (4, 4)), load(0, a))),)


def test_tinygrads_where_fold_kernel_runs_and_verifies(device):
    a = np.ones((4, 4), np.float32)
    want = [1.0] * 4 + [2.0] * 4 + [1.0] * 8  # what tinygrad's test expects
    for opts in ([], None):  # no opts, then the heuristics'
        k = Kernel(*_where_fold_ast())
        if opts is None:
            k.hand_coded_optimizations()
        np.testing.assert_array_equal(R.run(k, a)[0].reshape(-1), want)
        R.verify(k, a)


def _own_row_in_a_reduce() -> tuple[LazyOp, ...]:
    """out[i] = sum_j out[i] * x[i, j]: the reduce reads its own output element all along j."""
    out = ShapeTracker.from_shape((4, 1))
    x = load(1, ShapeTracker.from_shape((4, 16)))
    return (_store_through(out, reduce(ReduceOps.SUM, alu(BinaryOps.MUL, load(0, out.expand((4, 16))), x), (1,))),)


def test_an_output_read_at_its_own_element_in_a_reduce_is_accepted(device):
    o, x = np.arange(4, dtype=np.float32).reshape(4, 1), np.ones((4, 16), np.float32)
    for opts in ([], [Opt(OptOps.GROUP, 0, 4)], [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 0, 4)]):
        k = Kernel(*_own_row_in_a_reduce())
        for opt in opts:
            k.apply_opt(opt)
        R.verify(k, o, x)
        np.testing.assert_array_equal(R.run(k, o, x)[0].reshape(-1), np.arange(4) * 16)


def _masked_read(rows: tuple[int, int], pad: tuple[int, int]) -> tuple[LazyOp, ...]:
    """out = where(a.shrink(rows).pad(pad), 2, out) on a (4, 4) output."""
    a = ShapeTracker.from_shape((4, 4))
    b = a.shrink((rows, (0, 4))).pad((pad, (0, 0)))
    return (
        _store_through(
            a, alu(TernaryOps.WHERE, alu(UnaryOps.CAST, load(0, b), arg=dtypes.bool), const(2.0, (4, 4)), load(0, a))
        ),
    )


def _another_stores_output() -> tuple[LazyOp, ...]:
    st = ShapeTracker.from_shape((8,))
    first = _store_through(st, alu(BinaryOps.ADD, load(2, st), const(1.0, (8,))))
    return first, _store_through(st, alu(BinaryOps.MUL, load(0, st), const(2.0, (8,))), idx=1)


_RACING_READS = {
    "row 1 reads row 0, which row 0's threads write": (_masked_read((0, 1), (1, 2)), "stored through"),
    "out[i] = out[i-1] + 1": (
        (
            _store_through(
                ShapeTracker.from_shape((17,)).shrink(((1, 17),)),
                alu(BinaryOps.ADD, load(0, ShapeTracker.from_shape((17,)).shrink(((0, 16),))), const(1.0, (16,))),
            ),
        ),
        "stored through",
    ),
    "a reduce over every output element": (
        (
            _store_through(
                ShapeTracker.from_shape((4, 1)),
                reduce(ReduceOps.SUM, load(0, ShapeTracker.from_shape((1, 4)).expand((4, 4))), (1,)),
            ),
        ),
        "stored through",
    ),
    "symbolic: out[i] = out[i+1]": (
        (
            _store_through(
                ShapeTracker.from_shape((N + 1,)).shrink(((0, N),)),
                load(0, ShapeTracker.from_shape((N + 1,)).shrink(((1, N + 1),))),
            ),
        ),
        "stored through",
    ),
    "another STORE's output": (_another_stores_output(), "only its own STORE may read it"),
}


@pytest.mark.parametrize("name", list(_RACING_READS))
def test_an_output_read_where_another_thread_writes_is_refused(name):
    ast, says = _RACING_READS[name]
    with pytest.raises(ValueError, match=f"buffer 0 .*{says}"):
        Kernel(*ast)


def test_an_output_read_through_its_own_view_where_valid_is_accepted_at_every_size(device):
    """The masked read of test_where_fold at another row, and a symbolic in-place update: accepted, and verified."""
    k = Kernel(*_masked_read((2, 3), (2, 1)))
    R.verify(k, np.ones((4, 4), np.float32))
    st = ShapeTracker.from_shape((N, 4))
    k = Kernel(_store_through(st, alu(BinaryOps.ADD, load(0, st), const(1.0, (N, 4)))))
    for i in (1, 5):
        x = np.arange(4 * i, dtype=np.float32)
        np.testing.assert_array_equal(R.run(k, x, var_vals={"i": i})[0].reshape(-1), x + 1)


# ============================================================================================================
# every opt keeps the __local buffers within shared_max: checked after the opt, on what it made
# ============================================================================================================
_C_BYTES = {"float": 4, "half": 2, "int": 4, "double": 8, "char": 1, "short": 2, "long": 8, "bool": 1}


def _local_bytes(k: Kernel) -> int:
    """The bytes of the __local arrays the kernel's OpenCL program declares, read from its text."""
    return sum(_C_BYTES[t] * int(n) for t, n in re.findall(r"__local (\w+) \w+\[(\d+)\];", R.render(k).src))


def _sum_576(dt=dtypes.float32, rows: int = 64) -> tuple[LazyOp, ...]:
    return (store(reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape((rows, 576)), dt), (1,)), dtype=dt),)


def test_padto_after_group_cant_grow_local_memory_past_shared_max():
    """The stock target (32,768 bytes): 18,432 bytes of __local floats, whose green axis PADTO pads from 9 to 32.
    tinygrad 0.9.1 doesn't check the memory after a PADTO and renders `__local float temp[16384]` (65,536 bytes)."""
    k = Kernel(*_sum_576(rows=512))
    for opt in [Opt(OptOps.GROUP, 0, 9), Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.LOCAL, 0, 8)]:
        k.apply_opt(opt)
    assert _local_bytes(k) == 18432
    before = state_of(k)
    with pytest.raises(KernelOptError, match="exceeds maximum shared memory size: needs 65536, max 32768"):
        k.apply_opt(Opt(OptOps.PADTO, 2, 32))
    assert state_of(k) == before


# each opt kind that can grow the __local buffers, after the opts that make a grouped kernel (GROUP:0:9 of a
# 64x576 sum: 9 floats); (kernel, opts before, the opt). The test sets shared_max to just under what the opt needs.
G9 = Opt(OptOps.GROUP, 0, 9)
_GROWING = {
    "PADTO of the green axis": (_sum_576(), [G9], Opt(OptOps.PADTO, 1, 16)),
    "PADTO of a cyan axis": (_sum_576(rows=48), [Opt(OptOps.LOCAL, 0, 3), G9], Opt(OptOps.PADTO, 1, 4)),
    "UPCAST": (_sum_576(), [G9], Opt(OptOps.UPCAST, 0, 4)),
    "LOCAL": (_sum_576(), [G9], Opt(OptOps.LOCAL, 0, 4)),
    "GROUP": (_sum_576(), [G9], Opt(OptOps.GROUP, 0, 4)),
    "GROUPTOP of half (kept in float)": (_sum_576(dtypes.half), [], Opt(OptOps.GROUPTOP, 0, 16)),
    "UPCASTMID of an image": (
        D.image_matvec_ast(256, 576),
        [Opt(OptOps.GROUP, 0, 16)],
        Opt(OptOps.UPCASTMID, 0, 4),
    ),
    "LOCAL after a tensor core's shape (TC=2)": (
        matmul_ast(64, 64, 64),
        [Opt(OptOps.TC, 0, 0), Opt(OptOps.GROUP, 0, 4)],
        Opt(OptOps.LOCAL, 0, 2),
    ),
}


@pytest.mark.parametrize("name", list(_GROWING))
def test_an_opt_is_refused_where_the_local_memory_it_makes_passes_shared_max(name, monkeypatch):
    """The opt is accepted at a shared_max of exactly what the rendered program then declares, and refused, with
    that size, changing nothing, at one byte less."""
    monkeypatch.setenv("TC", "2")  # tensor cores' shape without tensor cores: GROUP may follow (shapes only here)
    ast, before, opt = _GROWING[name]
    target = kernel.TARGETS["metal" if opt.op is OptOps.LOCAL and before[0].op is OptOps.TC else "opencl"]
    big = Kernel(*ast, opts=dataclasses.replace(target, shared_max=1 << 30))
    for o in [*before, opt]:
        big.apply_opt(o)
    need = _local_bytes(big)
    for shared_max, ok in ((need, True), (need - 1, False)):
        k = Kernel(*ast, opts=dataclasses.replace(target, shared_max=shared_max))
        for o in before:
            k.apply_opt(o)
        was = state_of(k)
        if ok:
            k.apply_opt(opt)
            assert _local_bytes(k) == need <= shared_max
            continue
        with pytest.raises(KernelOptError, match=f"exceeds maximum shared memory size: needs {need}, max {need - 1}"):
            k.apply_opt(opt)
        assert state_of(k) == was


def test_every_state_of_random_opts_keeps_its_local_memory_within_shared_max():
    """Random opts on grouped kernels and a small shared_max: after every accepted opt, the program's __local arrays
    fit; an UNROLL never grows them (the unrolled axis is a reduce axis: 1 in the output, which they are shaped by)."""
    import random

    target = dataclasses.replace(kernel.TARGETS["opencl"], shared_max=2048)
    kinds = (OptOps.UPCAST, OptOps.UNROLL, OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.PADTO, OptOps.UPCASTMID)
    pool = [Opt(op, axis, amt) for op in kinds for axis in range(3) for amt in (0, 2, 4, 9, 16, 32)]
    rng, accepted, refused = random.Random(0), set(), set()
    starts = [(_sum_576(), 9), (_sum_576(dtypes.half), 9), (D.image_matvec_ast(256, 576), 16)]
    for (ast, group), _ in itertools.product(starts, range(40)):
        k = Kernel(*ast, opts=target)
        for opt in [Opt(OptOps.GROUP, 0, group), *rng.choices(pool, k=6)]:
            before = _local_bytes(k)
            try:
                k.apply_opt(opt)
            except KernelOptError as e:
                refused |= {opt.op} if "shared memory" in str(e) else set()
                continue
            accepted.add(opt.op)
            assert _local_bytes(k) <= 2048, k.applied_opts
            assert opt.op is not OptOps.UNROLL or _local_bytes(k) <= before
    assert set(kinds) <= accepted and {OptOps.UPCAST, OptOps.LOCAL} <= refused


# ============================================================================================================
# --loops and --map of any store: 0-size axes anywhere, partial, strided and padded stores
# ============================================================================================================
@pytest.mark.parametrize("shape, axes", [((4, 0), (1,)), ((0, 4), (1,)), ((0, 0), (0, 1)), ((4, 0, 3), (1,))])
def test_loops_and_map_of_a_reduce_with_a_0_size_axis(shape, axes):
    k = Kernel(store(reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape(shape)), axes)))
    loops = "\n".join(kernel.ansistrip(line) for line in D.c_listing(k))
    for a, s in enumerate(k.full_shape):
        bound = rf"axis {a}: 0 <= \w+ < {s} " if a < k.first_reduce else rf"for \(int \w+{a} = 0; \w+{a} < {s};"
        assert re.search(bound, loops) or s == 1 or (s == 0 and a < k.first_reduce), (a, s, loops)  # 0 groups: no id
    outputs = kernel.prod(s for a, s in enumerate(shape) if a not in axes)
    assert ("the output has no elements" in "\n".join(D.output_map(k))) == (outputs == 0)


# the store, and for each element of the buffer the work-group that writes it (None: none does)
_STORES = {
    "out[4:12] = x": (ShapeTracker.from_shape((16,)).shrink(((4, 12),)), [None] * 4 + list(range(8))),
    "out[::2] = x": (ShapeTracker.from_shape((16,)).stride((2,)), [g // 2 if g % 2 == 0 else None for g in range(15)]),
    "out = x padded by 2 each side": (ShapeTracker.from_shape((8,)).pad(((2, 2),)), list(range(2, 10))),
    "out[:, 2:6] = x": (
        ShapeTracker.from_shape((4, 8)).shrink(((0, 4), (2, 6))),
        [f"{r},{c - 2}" if 2 <= c < 6 else None for r in range(4) for c in range(8)][:30],
    ),
}


@pytest.mark.parametrize("name", list(_STORES))
def test_the_map_of_a_store_to_part_of_its_buffer_says_who_writes_each_element(name):
    st, writers = _STORES[name]
    k = Kernel(_store_through(st))
    lines = [kernel.ansistrip(line) for line in D.output_map(k, width=200)]
    rows = [line for line in lines[2:] if re.match(r"\s+\d+\s", line)]  # each: its first index, then its cells
    cells = [c for line in rows for c in line.split()[1:]]
    assert cells == ["-" if w is None else f"g{w}" for w in writers], lines
    assert any(line.strip().startswith("- = an element this kernel doesn't write") for line in lines) == (
        None in writers
    )
    assert "data0[" in "\n".join(D.c_listing(k))


# ============================================================================================================
# every public function's arguments checked by kind and range; one name is one Variable in an AST
# ============================================================================================================
def _bad_calls(k: Kernel) -> dict:
    ast = D.elementwise_ast(16)
    x = [np.zeros(16, np.float32)] * 2
    demo = functools.partial(D.demo_kernel, "matmul", out=io.StringIO())
    return {  # the call, what the ValueError names
        "apply_opt append_opt": (lambda: k.apply_opt(Opt(OptOps.UPCAST, 0, 4), append_opt="no"), "append_opt"),
        "TC use_tensor_cores True": (lambda: k.apply_tensor_cores(True), "use_tensor_cores must be 0, 1 or 2"),
        "TC use_tensor_cores 3": (lambda: k.apply_tensor_cores(3), "use_tensor_cores must be 0, 1 or 2"),
        "TC axis -1": (lambda: k.apply_tensor_cores(1, axis=-1), "axis must be an int >= 0"),
        "TC axis 0.0": (lambda: k.apply_tensor_cores(1, axis=0.0), "axis must be an int >= 0"),
        "TC tc_opt 3": (lambda: k.apply_tensor_cores(1, tc_opt=3), "tc_opt must be None"),
        "TC extra_opts an Opt": (lambda: k.apply_tensor_cores(1, extra_opts=Opt(OptOps.UPCAST, 0, 4)), "extra_opts"),
        "TC extra_opts strings": (lambda: k.apply_tensor_cores(1, extra_opts=["UPCAST:0:4"]), "extra_opts"),
        "demo target": (lambda: demo(target="gpu"), "target must be None"),
        "demo view": (lambda: demo(view="tree"), "view must be steps, explain, loops or map"),
        "random_inputs seed -1": (lambda: R.random_inputs(ast, seed=-1), "seed must be an int >= 0"),
        "random_inputs seed 1.5": (lambda: R.random_inputs(ast, seed=1.5), "seed must be an int >= 0"),
        "run second_poison": (lambda: R.run(Kernel(*ast), *x, second_poison="yes"), "second_poison"),
        "time_kernel runs 0": (lambda: R.time_kernel(Kernel(*ast), *x, runs=0), "runs must be an int >= 1"),
        "time_kernel warmup -1": (lambda: R.time_kernel(Kernel(*ast), *x, warmup=-1), "warmup must be an int >= 0"),
        "run var_vals a list": (lambda: R.run(Kernel(*ast), *x, var_vals=[("n", 3)]), "var_vals"),
        "verify expected a plain list": (lambda: R.verify(Kernel(*ast), *x, expected=[[0.0] * 16]), "expected output"),
        "run an AST": (lambda: R.run(ast, *x), "run takes a Kernel"),
        "verify an AST": (lambda: R.verify(ast, *x), "verify takes a Kernel"),
        "time an AST": (lambda: R.time_kernel(ast, *x), "time_kernel takes a Kernel"),
        "render an AST": (lambda: R.render(ast), "render takes a Kernel"),
        "Target local_max 5": (lambda: Kernel(*ast, opts=kernel.Target("GPU", local_max=5)), "local_max"),
        "Target shared_max None": (lambda: Kernel(*ast, opts=kernel.Target("GPU", shared_max=None)), "shared_max"),
        "Target tensor_cores not TensorCores": (
            lambda: Kernel(*ast, opts=kernel.Target("GPU", tensor_cores=[(8, 16, 8)])), "tensor_cores must be a list "
            "of TensorCores"),  # fmt: skip
        "Target tensor_cores a tuple": (lambda: Kernel(*ast, opts=kernel.Target("GPU", tensor_cores=())), "tensor_co"),
    }


@pytest.mark.parametrize("name", list(_bad_calls(Kernel(*matmul_ast(16, 16, 16)))))
def test_a_bad_argument_is_a_value_error_naming_it_and_changes_nothing(name):
    k = Kernel(*matmul_ast(16, 16, 16))
    call, says = _bad_calls(k)[name]
    before = state_of(k)
    with pytest.raises(ValueError, match=re.escape(says)):
        call()
    assert state_of(k) == before


def _two_slices(a: kernel.sint, b: kernel.sint) -> tuple[LazyOp, ...]:
    """x[a:a+4] + x[b:b+4] of a 64-element x."""
    sa, sb = (ShapeTracker.from_shape((64,)).shrink(((v, v + 4),)) for v in (a, b))
    return (store(alu(BinaryOps.ADD, load(1, sa), load(1, sb))),)


@pytest.mark.parametrize(
    "a, b, says",
    [
        (Variable("i", 1, 16), Variable("i", 1, 32), r"i is two variables in this AST, i\[1-16\] and i\[1-32\]"),
        (Variable("i", 1, 16).bind(3), Variable("i", 1, 16).bind(5), "i is bound to both 3 and 5"),
        (
            Variable("i", 1, 16),
            Variable("i", 1, 16).bind(4),
            r"i is two variables in this AST, i\[1-16=4\] and i\[1-16\]",
        ),
        (Variable("i", 1, 16).bind(3), Variable("i", 1, 32).bind(3), "i is two variables"),
    ],
)
def test_one_name_is_one_variable_in_an_ast(a, b, says):
    with pytest.raises(ValueError, match=says):
        Kernel(*_two_slices(a, b))
    Kernel(*_two_slices(a, a))  # the same variable twice: one


def test_one_name_is_one_variable_in_a_constant_too():
    i = Variable("i", 1, 16)
    value = alu(
        BinaryOps.ADD,
        load(1, ShapeTracker.from_shape((i,)), dtypes.int32),
        const(Variable("i", 1, 8), (i,), dtypes.int32),
    )
    with pytest.raises(ValueError, match="i is two variables"):
        Kernel(store(value, dtype=dtypes.int32))


# ============================================================================================================
# every file the project reads is checked down to the type of each value
# ============================================================================================================
def _damage_entry(entry: dict, other: dict) -> dict[str, str]:
    """Ways a search's cache file may be damaged, from its entry as written (and another search's)."""
    changed = [["UPCAST", 0, 2]] if entry["opts"] != [["UPCAST", 0, 2]] else [["UPCAST", 0, 4]]
    return {
        "opts changed (they still apply)": json.dumps({**entry, "opts": changed}),
        "time changed": json.dumps({**entry, "time_s": entry["time_s"] / 2}),
        "no check": json.dumps({"opts": entry["opts"], "time_s": entry["time_s"]}),
        "another search's file": json.dumps(other),
        "an axis that is a bool": json.dumps({**entry, "opts": [["UPCAST", True, 4]]}),
        "not an object": json.dumps([entry["opts"], entry["time_s"]]),
        "opts not a list": json.dumps({**entry, "opts": "UPCAST"}),
        "not JSON": "{opts: [",
    }


def test_a_damaged_search_cache_entry_is_said_and_searched_again(cache_dir, device, monkeypatch):
    import search as S

    monkeypatch.setattr(S, "ACTIONS", [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 4)])
    k, other = Kernel(*D.elementwise_ast(256)), Kernel(*D.elementwise_ast(512))
    inputs = R.random_inputs(k)
    first = S.search(k, *inputs, amt=1, workers=0)
    S.search(other, *R.random_inputs(other), amt=1, workers=0)
    paths = sorted(cache_dir.glob("beam/*.json"), key=lambda p: p.stat().st_mtime)
    path, written, other_entry = paths[0], paths[0].read_text(), json.loads(paths[1].read_text())
    for how, text in _damage_entry(json.loads(written), other_entry).items():
        path.write_text(text)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again = S.search(k, *inputs, amt=1, workers=0)
        said = [str(w.message) for w in caught if "is damaged" in str(w.message)]
        assert not again.cached and len(said) == 1 and str(path) in said[0], how
        R.verify(again.kernel, *inputs)
        assert S.search(k, *inputs, amt=1, workers=0).cached, how  # written anew
    path.write_text(written)
    assert S.search(k, *inputs, amt=1, workers=0).kernel.applied_opts == first.kernel.applied_opts


def _a_case() -> dict:
    return json.loads(json.dumps(load_corpus("kernels.json")["cases"][0]))  # a copy to damage


_DAMAGED_CASES = {  # a change to the first golden case, and where the error says it is
    "a size that is a string": (lambda c: c["ast"][0]["arg"]["st"][0]["shape"].__setitem__(0, "4"), "shape[0]"),
    "a size that is a float": (lambda c: c["ast"][0]["arg"]["st"][0]["strides"].__setitem__(0, 1.0), "strides[0]"),
    "an unknown op": (lambda c: c["ast"][0].__setitem__("op", "BinaryOps.POW"), "ast[0].op"),
    "a buffer idx that is a bool": (lambda c: c["ast"][0]["arg"].__setitem__("idx", True), "ast[0].arg.idx"),
    "a dtype that isn't one": (lambda c: c["ast"][0]["arg"].__setitem__("dtype", "is_float"), "ast[0].arg.dtype"),
    "a view with an extra field": (lambda c: c["ast"][0]["arg"]["st"][0].__setitem__("extra", 1), "ast[0].arg.st[0]"),
    "a mul of three": (lambda c: c["ast"][0]["arg"]["st"][0].__setitem__("offset", {"mul": [1, 2, 3]}), "offset"),
    "an unknown target": (lambda c: c.__setitem__("target", "tpu"), "case"),
    "a src that isn't a list": (lambda c: c["ast"][0].__setitem__("src", {}), "ast[0].src"),
    "a div by 0 (a ZeroDivisionError)": (
        lambda c: c["ast"][0]["arg"]["st"][0].__setitem__("offset", {"div": [8, 0]}), "offset: expected a divisor"),
    "a sum of nothing (a TypeError)": (
        lambda c: c["ast"][0]["arg"]["st"][0].__setitem__("offset", {"sum": []}), "offset: expected one of"),
    "a mod by a variable's 0": (lambda c: c["ast"][0]["arg"]["st"][0].__setitem__(
        "offset", {"mod": [8, {"var": "i", "min": 0, "max": 0}]}), "offset"),  # fmt: skip
}


@pytest.mark.parametrize("name", list(_DAMAGED_CASES))
def test_a_damaged_corpus_case_is_a_value_error_naming_where(name):
    damage, where = _DAMAGED_CASES[name]
    case = _a_case()
    build_kernel(case)  # as it is: fine
    damage(case)
    with pytest.raises(ValueError, match=re.escape(where)):
        build_kernel(case)


def test_a_kernel_written_as_json_reads_back_as_the_same_kernel():
    """A search log's kernel (corpus.kernel_to_json, read back by kernel_from_json): every golden and symbolic case
    after the heuristics' opts, on its own target and on one that is no target of TARGETS (its tensor cores too),
    comes back with the same AST (equal, same hash), target, opts and state."""
    cases = load_corpus("kernels.json")["cases"] + load_corpus("symbolic.json")["cases"]
    custom = dataclasses.replace(kernel.TARGETS["metal"], device="MINE", local_max=(64, 32, 16))
    for case in cases:
        for target in (None, custom):
            k = build_kernel(case)
            if target is None:
                for o in case["hand_coded"]["applied_opts"]:
                    k.apply_opt(opt_of(o))
            else:
                k = kernel.optimize(Kernel(*k.ast, opts=target))
            back = kernel_from_json(json.loads(json.dumps(kernel_to_json(k))))
            same = (back.ast, hash(back.ast), back.opts, back.applied_opts)
            assert same == (k.ast, hash(k.ast), k.opts, k.applied_opts), case["name"]
            assert state_of(back) == state_of(k), case["name"]


@pytest.mark.parametrize("opt", [["UPCAST", 0], ["UPCAST", 0.0, 4], ["POW", 0, 4], ["UPCAST", False, 4], "UPCAST:0:4"])
def test_a_damaged_corpus_opt_is_a_value_error(opt):
    with pytest.raises(ValueError, match="opt: expected"):
        opt_of(opt)
    assert opt_of(["UPCAST", 0, 4]) == Opt(OptOps.UPCAST, 0, 4)


# ============================================================================================================
# a malformed AST is refused where it is built, naming the op and what is wrong
# ============================================================================================================
@pytest.mark.parametrize(
    "dt, val",
    [
        (dtypes.int8, 300),
        (dtypes.uint8, -1),
        (dtypes.int32, 2**31),
        (dtypes.uint64, 2**64),
        (dtypes.int32, 2.5),
        (dtypes.bool, 2),
        (dtypes.int16, math.nan),
        (dtypes.float, "1"),
    ],
)
def test_a_constant_must_fit_its_dtype(dt, val):
    with pytest.raises(ValueError, match=rf"CONST .*{re.escape(repr(val))}.* {re.escape(dt.name)}"):
        const(val, (4,), dt)


@pytest.mark.parametrize(
    "dt, val",
    [
        (dtypes.int8, -128),
        (dtypes.uint64, 2**64 - 1),
        (dtypes.float, math.inf),
        (dtypes.half, math.nan),
        (dtypes.bool, True),
        (dtypes.int32, 3.0),
    ],
)
def test_constants_in_range_are_accepted(dt, val):
    assert const(val, (4,), dt).arg.val == val or math.isnan(val)


_ST = ShapeTracker.from_shape((4,))
_X = load(1, _ST)

MALFORMED = {
    "unknown op": (lambda: LazyOp("ADD", (_X, _X)), r"'ADD' is not an op"),
    "src not a tuple of LazyOps": (lambda: LazyOp(BinaryOps.ADD, (_X, 1)), r"ADD: source 1 is not a LazyOp"),
    "ADD with one source": (lambda: alu(BinaryOps.ADD, _X), r"ADD takes 2 sources, got 1"),
    "ADD with three": (lambda: alu(BinaryOps.ADD, _X, _X, _X), r"ADD takes 2 sources, got 3"),
    "NEG with two": (lambda: alu(UnaryOps.NEG, _X, _X), r"NEG takes 1 source, got 2"),
    "WHERE with two": (lambda: alu(TernaryOps.WHERE, _X, _X), r"WHERE takes 3 sources, got 2"),
    "reduce with two sources": (lambda: LazyOp(ReduceOps.SUM, (_X, _X), (0,)), r"SUM takes 1 source, got 2"),
    "reduce arg a list": (lambda: LazyOp(ReduceOps.SUM, (_X,), [0]), r"SUM needs a tuple of axes as its arg"),
    "reduce arg of floats": (lambda: LazyOp(ReduceOps.SUM, (_X,), (0.5,)), r"SUM needs a tuple of axes as its arg"),
    "LOAD of an int": (lambda: LazyOp(BufferOps.LOAD, (), 3), r"LOAD needs a MemBuffer arg, got 3"),
    "LOAD with a source": (lambda: LazyOp(BufferOps.LOAD, (_X,), _X.arg), r"LOAD takes 0 sources, got 1"),
    "CONST of a MemBuffer": (lambda: LazyOp(BufferOps.CONST, (), _X.arg), r"CONST needs a ConstBuffer arg"),
    "CAST to a string": (lambda: alu(UnaryOps.CAST, _X, arg="float"), r"CAST needs a DType arg, got 'float'"),
    "BITCAST to nothing": (lambda: alu(UnaryOps.BITCAST, _X), r"BITCAST needs a DType arg, got None"),
    "negative buffer index": (lambda: load(-1, _ST), r"MemBuffer: idx must be an int >= 0, got -1"),
    "buffer index a float": (lambda: load(1.0, _ST), r"MemBuffer: idx must be an int >= 0, got 1.0"),
    "dtype a string": (lambda: load(1, _ST, "float"), r"MemBuffer: dtype must be a DType \(.*\), got 'float'"),
    "image dtype shapes never checked: 3 channels": (
        lambda: load(1, _ST, dtypes.imagef((2, 2, 3))), r"MemBuffer: dtype must be a DType \(an image's shape: \(h"),
    "image dtype shapes never checked: a negative height": (
        lambda: load(1, _ST, dtypes.imageh((-1, 1, 4))), r"MemBuffer: dtype must be .*, got dtypes.imageh\(\(-1, 1"),
    "image dtype shapes never checked: two sizes": (
        lambda: load(1, _ST, dtypes.imagef((4, 4))), r"MemBuffer: dtype must be .*, got dtypes.imagef\(\(4, 4\)\)"),
    "st not a ShapeTracker": (lambda: MemBuffer(1, dtypes.float, (4,)), r"MemBuffer: st must be a ShapeTracker"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_ast_node_is_refused_when_built(name):
    build, message = MALFORMED[name]
    with pytest.raises(ValueError, match=message):
        build()


def test_one_buffer_is_loaded_as_one_dtype():
    ast = (store(alu(BinaryOps.ADD, load(1, _ST), alu(UnaryOps.CAST, load(1, _ST, dtypes.int32), arg=dtypes.float))),)
    with pytest.raises(ValueError, match=r"buffer 1 is loaded as float and as int"):
        Kernel(*ast)
    with pytest.raises(ValueError, match=r"buffer 1 is loaded as float and as int"):
        R.reference(ast, np.zeros(4, np.float32))


@pytest.mark.parametrize("shapes", [((8,), (2, 4)), ((2, 4), (4, 2))])
def test_all_outputs_have_one_shape(shapes):
    outs = [store(load(5, ShapeTracker.from_shape(s)), i) for i, s in enumerate(shapes)]
    with pytest.raises(
        ValueError, match=re.escape(f"outputs must have one shape: data0 {shapes[0]}, data1 {shapes[1]}")
    ):
        Kernel(*outs)


# ============================================================================================================
# zero-size kernels: no opt applies, and they compute empty outputs (a reduce of nothing is its identity)
# ============================================================================================================
@pytest.mark.parametrize(
    "opt",
    [
        Opt(OptOps.UPCAST, 0, 4),
        Opt(OptOps.UPCAST, 0, 0),
        Opt(OptOps.LOCAL, 0, 2),
        Opt(OptOps.PADTO, 0, 4),
        Opt(OptOps.NOLOCALS),
    ],
)
def test_no_opt_applies_to_an_empty_kernel(opt):
    k = Kernel(*elementwise_ast(0))
    with pytest.raises(KernelOptError, match=r"the kernel has no elements \(shape \(0,\)\)"):
        k.apply_opt(opt)
    assert k.applied_opts == [] and k.full_shape == (0,)


@pytest.mark.parametrize("ast", [elementwise_ast(0), sum_ast((4, 0), (1,)), matmul_ast(4, 4, 0), matmul_ast(0, 4, 4)])
def test_heuristics_apply_nothing_to_an_empty_kernel(ast):
    k = Kernel(*ast)
    k.hand_coded_optimizations()
    assert k.applied_opts == []
    k2 = Kernel(*ast, opts=kernel.TARGETS["metal"])
    assert not k2.apply_tensor_cores(1) and k2.applied_opts == []


def test_an_empty_kernel_runs_to_empty_outputs(device):
    k = Kernel(*elementwise_ast(0))
    empty = [np.zeros(0, np.float32)] * 2
    assert [x.shape for x in R.reference(k, *empty)] == [(0,)]
    assert [x.shape for x in R.run(k, *empty)] == [(0,)]
    R.verify(k, *empty)


@pytest.mark.parametrize("op, identity", [(ReduceOps.SUM, 0.0), (ReduceOps.MAX, -math.inf)])
@pytest.mark.parametrize("dt", [dtypes.float, dtypes.int32, dtypes.bool], ids=lambda d: d.name)
def test_a_reduce_over_an_empty_axis_gives_its_identity(op, identity, dt, device):
    ast = (store(reduce(op, load(1, ShapeTracker.from_shape((3, 0)), dt), (1,))),)
    want = (
        np.full((3,), identity).astype(R.np_dtype(dt))
        if dt != dtypes.int32 or op is ReduceOps.SUM
        else np.full((3,), np.iinfo(np.int32).min, np.int32)
    )
    if dt == dtypes.bool:
        want = np.zeros(3, np.bool_)
    np.testing.assert_array_equal(R.reference(ast, np.zeros(0, R.np_dtype(dt)))[0], want)
    np.testing.assert_array_equal(R.run(Kernel(*ast), np.zeros(0, R.np_dtype(dt)))[0], want)


# ============================================================================================================
# opt arguments: ints (numpy ints count), and only where the op takes them
# ============================================================================================================
def test_numpy_int_opt_arguments_are_ints():
    k = Kernel(*elementwise_ast(64))
    k.apply_opt(Opt(OptOps.UPCAST, np.int64(0), np.int32(4)))
    assert [str(o) for o in k.applied_opts] == ["UPCAST:0:4"] and k.full_shape == (16, 4)


BAD_OPTS = [
    (Opt(OptOps.UPCAST, True, 4), r"UPCAST needs an int axis >= 0, got True"),
    (Opt(OptOps.UPCAST, 0, False), r"UPCAST needs an int amount >= 0, got False"),
    (Opt(OptOps.UPCAST, 0.0, 4), r"UPCAST needs an int axis >= 0, got 0.0"),
    (Opt(OptOps.UPCAST, "0", 4), r"UPCAST needs an int axis >= 0, got '0'"),
    (Opt(OptOps.LOCAL, 0, 4.0), r"LOCAL needs an int amount >= 0, got 4.0"),
    (Opt(OptOps.NOLOCALS, 3, 4), r"NOLOCALS takes no axis and no amount, got 3 and 4"),
    (Opt(OptOps.TC, -1, 0), r"TC needs an int axis >= 0, got -1"),
    (Opt(OptOps.TC, 0, -5), r"TC needs an amount \(tc_opt\) of 0, 1 or 2, got -5"),
    (Opt(OptOps.TC, 0, 3), r"TC needs an amount \(tc_opt\) of 0, 1 or 2, got 3"),
    (Opt(OptOps.TC, True, 0), r"TC needs an int axis >= 0, got True"),
]


@pytest.mark.parametrize("opt, message", BAD_OPTS, ids=[str(o) for o, _ in BAD_OPTS])
def test_opt_arguments_must_be_what_the_op_takes(opt, message):
    k = Kernel(*matmul_ast(64, 64, 64), opts=kernel.TARGETS["metal"])
    with pytest.raises(KernelOptError, match=message):
        k.apply_opt(opt)
    assert k.applied_opts == [] and k.full_shape == (64, 64, 64)


# ============================================================================================================
# hand_coded_optimizations is all or nothing
# ============================================================================================================
@pytest.mark.parametrize("first", [[Opt(OptOps.NOLOCALS)], [Opt(OptOps.LOCAL, 0, 4)], "heuristics"])
@pytest.mark.parametrize("ast", [elementwise_ast(4096), matmul_ast(64, 64, 64), sum_ast((64, 64), (1,))])
def test_failed_heuristics_leave_the_kernel_as_it_was(first, ast):
    k = Kernel(*ast)
    if first == "heuristics":
        k.hand_coded_optimizations()
    else:
        for o in first:
            k.apply_opt(o)
    before = (list(k.applied_opts), k.full_shape, [st.views for st in k.sts], k.colors())
    try:
        k.hand_coded_optimizations()
    except KernelOptError:
        assert (k.applied_opts, k.full_shape, [st.views for st in k.sts], k.colors()) == before
    else:
        assert k.applied_opts[: len(before[0])] == before[0]


def test_differences_md_says_what_running_the_heuristics_on_an_optimized_kernel_does():
    """A second run, or one after NOLOCALS, adds what still applies (as tinygrad's does); it raises, changing
    nothing, only where one of its opts fails. DIFFERENCES.md's examples are what happens."""
    runs = {}
    for name, first in (("sum", "again"), ("sum", "nolocals"), ("matmul", "nolocals")):
        k = Kernel(*D.DEMOS[name].build())
        k.hand_coded_optimizations() if first == "again" else k.apply_opt(Opt(OptOps.NOLOCALS))
        before = list(k.applied_opts)
        try:
            k.hand_coded_optimizations()
            runs[name, first] = [str(o) for o in k.applied_opts[len(before) :]]
        except KernelOptError as e:
            assert k.applied_opts == before
            runs[name, first] = str(e)
    assert runs["sum", "again"] == ["GROUPTOP:0:16"] and runs["sum", "nolocals"] == ["UNROLL:0:4"]
    assert runs["matmul", "nolocals"].startswith("not using locals") and "LOCAL" in runs["matmul", "nolocals"]
    differences = " ".join(open(os.path.join(ROOT, "DIFFERENCES.md")).read().split())
    assert "(after NOLOCALS, or a second time, it raises and changes nothing)" not in differences
    assert (
        "run twice, `sum` gets a second GROUPTOP:0:16; after NOLOCALS, `matmul` raises (its LOCAL is refused) "
        "and `sum` gets UNROLL:0:4" in differences
    )


# ============================================================================================================
# one value per variable, no output read where another thread writes, every __local buffer counted,
# partial stores verified, arguments and command lines that say what is wrong
# ============================================================================================================
def test_a_variable_bound_to_one_value_twice_runs_at_that_value(device):
    i = Variable("i", 1, 16)
    k = Kernel(*_two_slices(i.bind(5), i.bind(5)))
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(R.run(k, x)[0], x[5:9] * 2)


def test_an_output_read_through_another_view_is_refused(device):
    """out[i] = out[i-1] + 1: a thread would read what another thread writes, in no defined order."""
    write = ShapeTracker.from_shape((17,)).shrink(((1, 17),))
    read = ShapeTracker.from_shape((17,)).shrink(((0, 16),))
    one = const(1.0, (16,))
    with pytest.raises(ValueError, match="buffer 0 is stored through .* and loaded through"):
        Kernel(LazyOp(BufferOps.STORE, (alu(BinaryOps.ADD, load(0, read), one),), MemBuffer(0, dtypes.float32, write)))
    # through the very view it is stored through, each thread reads its own element: an update in place
    k = Kernel(LazyOp(BufferOps.STORE, (alu(BinaryOps.ADD, load(0, write), one),), MemBuffer(0, dtypes.float32, write)))
    x = np.arange(17, dtype=np.float32)
    np.testing.assert_array_equal(R.run(k, x)[0], np.concatenate([x[:1], x[1:] + 1]))


def test_the_local_buffers_of_every_reduce_fit_in_shared_memory():
    """A kernel with two reduces has two __local buffers: the opt checks count both against shared_max."""
    import dataclasses

    small = dataclasses.replace(kernel.TARGETS["opencl"], shared_max=256)
    x = load(1, ShapeTracker.from_shape((4, 256)))
    both = alu(BinaryOps.ADD, reduce(ReduceOps.SUM, x, (1,)), reduce(ReduceOps.MAX, alu(BinaryOps.MUL, x, x), (1,)))
    accepted = []
    for amt in (16, 32, 64):  # 2 buffers of amt floats: 128, 256, 512 bytes
        k = Kernel(store(both), opts=small)
        try:
            k.apply_opt(Opt(OptOps.GROUPTOP, 0, amt))
        except KernelOptError as e:
            assert "shared memory" in str(e)
            continue
        assert _local_bytes(k) <= 256
        accepted.append(amt)
    assert accepted == [16, 32]


def _partial_store(st: ShapeTracker, dt=dtypes.float32) -> Kernel:
    return Kernel(store(load(1, ShapeTracker.from_shape(st.shape), dt), dtype=dt, st=st))


PARTIAL_STORES = {
    "out[4:12] = x": ShapeTracker.from_shape((16,)).shrink(((4, 12),)),
    "out[::2] = x": ShapeTracker.from_shape((16,)).stride((2,)),
}


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.bool])
@pytest.mark.parametrize("name", list(PARTIAL_STORES))
def test_verify_accepts_a_store_to_part_of_its_buffer(name, dt, device):
    k = _partial_store(PARTIAL_STORES[name], dt)
    (x,) = R.random_inputs(k)
    R.verify(k, x)
    out = R.run(k, x)[0]
    want = np.zeros(16, R.np_dtype(dt))[: out.size]
    written = np.zeros(out.size, bool)
    if name == "out[4:12] = x":
        want[4:12], written[4:12] = x, True
    else:
        want[::2], written[::2] = x, True
    np.testing.assert_array_equal(out[written], want[written])


def test_verify_still_catches_a_wrong_element_of_a_partial_store(device, monkeypatch):
    k = _partial_store(PARTIAL_STORES["out[::2] = x"])
    (x,) = R.random_inputs(k)
    real_run = R.run
    for where, message in [(2, "differs in 1 of"), (3, "not written by the STORE")]:  # written, then not written

        def run_one_wrong(kern, *xs, **kwargs):
            outs = real_run(kern, *xs, **kwargs)
            outs[0][where] = 7.0
            return outs

        monkeypatch.setattr(R, "run", run_one_wrong)
        with pytest.raises(R.VerificationError, match=message):
            R.verify(k, x)


def test_a_variable_value_must_fit_the_int_argument(device):
    n = kernel.Variable("n", 1, 2**32)
    k = Kernel(store(load(1, ShapeTracker.from_shape((n,)))))
    with pytest.raises(ValueError, match=r"n=2147483648 doesn't fit"):
        R.run(k, np.zeros(4, np.float32), var_vals={"n": 2**31})


def test_an_ast_pickled_in_one_process_equals_the_same_ast_built_in_another():
    """An op's hash is cached, and an enum's hash differs from process to process (its name's str hash): pickled with
    it, an AST compared unequal to the same AST built fresh where it was loaded (a search log replayed elsewhere)."""
    import subprocess
    import sys

    build = "import sys, pickle, demo; ast = demo.matmul_ast(8, 8, 8)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}

    def run(code: str, seed: str, data: bytes | None = None) -> bytes:
        argv, here = [sys.executable, "-c", f"{build}; {code}"], os.path.dirname(os.path.abspath(D.__file__))
        return subprocess.run(argv, input=data, capture_output=True, cwd=here, env=env | {"PYTHONHASHSEED": seed},
                              check=True).stdout  # fmt: skip

    data = run("sys.stdout.buffer.write(pickle.dumps(ast))", "1")
    said = run("got = pickle.loads(sys.stdin.buffer.read()); print(got == ast, hash(got) == hash(ast))", "2", data)
    assert said.split() == [b"True", b"True"]
