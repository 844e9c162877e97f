"""Reading testdata/: the golden corpora as they were exported from tinygrad 0.9.1 (the JSON form is SPEC.md's).

A case holds a kernel's AST (`"ast"`, one entry per output), its target, and what tinygrad did with it; a LazyOp is
{"op": "BinaryOps.ADD", "src": [...], "arg": ...}, a buffer's arg {"idx" or "val", "dtype", "st": [views]}, and a
size an int or a symbolic expression ({"var": ...}, {"mul": [a, b]}, ...). bench.py reads the corpus with these too.
"""

from __future__ import annotations

import functools
import gzip
import json
import operator
import pathlib
from collections.abc import Callable
from typing import Any

import kernel as K
from tests.common import ROOT

TESTDATA = pathlib.Path(ROOT) / "testdata"


def load_corpus(name: str) -> dict:
    """testdata/NAME as JSON (gzipped where it ends in .gz)."""
    path = TESTDATA / name
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        return json.load(f)


def sint_from_json(x: Any) -> K.sint:
    """A size of the symbolic corpus: an int, {"var": name, "min", "max"}, or {"mul"|"div"|"mod"|"lt": [a, b]},
    {"sum"|"and": [...]} (tinygrad's MulNode, DivNode, ModNode, LtNode, SumNode, AndNode)."""
    if not isinstance(x, dict):
        return x
    if "var" in x:
        return K.Variable(x["var"], x["min"], x["max"])
    ((kind, args),) = x.items()
    a = [sint_from_json(y) for y in args]
    if kind == "sum":  # nodes first, then numbers, added left to right
        return functools.reduce(operator.add, sorted(a, key=lambda y: isinstance(y, int)))
    if kind == "and":
        return K.Node.ands(a)
    ops: dict[str, Callable[[Any, Any], Any]] = {
        "mul": operator.mul,
        "div": operator.floordiv,
        "mod": operator.mod,
        "lt": operator.lt,
    }
    return ops[kind](a[0], a[1])


def lazyop_from_json(x: dict[str, Any]) -> K.LazyOp:
    """A LazyOp from the JSON form of the golden corpus (testdata/kernels.json), as exported from tinygrad 0.9.1:
    {"op": "BinaryOps.ADD", "src": [...], "arg": ...}; buffer args are {"idx" or "val", "dtype", "st": [views]}."""

    def dtype(d: Any) -> K.DType:
        if isinstance(d, dict):
            return (K.dtypes.imagef if d["image"] == "float" else K.dtypes.imageh)(tuple(d["shape"]))
        return getattr(K.dtypes, d)

    def shapetracker(views: list[dict[str, Any]]) -> K.ShapeTracker:
        def sizes(xs: list[Any]) -> tuple[K.sint, ...]:
            return tuple(sint_from_json(y) for y in xs)

        return K.ShapeTracker(
            tuple(
                K.View.create(
                    sizes(v["shape"]),
                    sizes(v["strides"]),
                    sint_from_json(v["offset"]),
                    tuple(sizes(m) for m in v["mask"]) if v["mask"] is not None else None,
                )
                for v in views
            )
        )

    kind, name = x["op"].split(".")
    op = {
        "UnaryOps": K.UnaryOps,
        "BinaryOps": K.BinaryOps,
        "TernaryOps": K.TernaryOps,
        "ReduceOps": K.ReduceOps,
        "BufferOps": K.BufferOps,
    }[kind][name]
    arg = x.get("arg")
    if kind == "BufferOps":
        buf = K.MemBuffer if "idx" in arg else K.ConstBuffer
        arg = buf(sint_from_json(arg["idx" if "idx" in arg else "val"]), dtype(arg["dtype"]), shapetracker(arg["st"]))
    elif kind == "ReduceOps":
        arg = tuple(arg)
    elif op in (K.UnaryOps.CAST, K.UnaryOps.BITCAST):
        arg = dtype(arg)
    return K.LazyOp(op, tuple(lazyop_from_json(s) for s in x.get("src", [])), arg)


def build_kernel(case) -> K.Kernel:
    """The case's kernel on its target, as tinygrad 0.9.1 constructed it."""
    return K.Kernel(*[lazyop_from_json(a) for a in case["ast"]], opts=K.TARGETS[case["target"]])


def case_id(case) -> str:
    return f"{case['name']}[{case['target']}]"


def opt_of(o) -> K.Opt:
    """An opt as the corpus writes it, ["UPCAST", 0, 4]."""
    return K.Opt(getattr(K.OptOps, o[0]), o[1], o[2])
