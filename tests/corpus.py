"""Reading testdata/: the golden corpora as they were exported from tinygrad 0.9.1 (testdata/README.md gives
their JSON form).

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
    """testdata/NAME as JSON (gzipped where it ends in .gz): an object holding a list of "cases" or of "chains"."""
    path = TESTDATA / name
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        data = json.load(f)
    _need(
        isinstance(data, dict) and any(isinstance(data.get(k), list) for k in ("cases", "chains")),
        name,
        data,
        'an object with a list of "cases" or "chains"',
    )
    return data


def _need(ok: bool, where: str, x: Any, what: str) -> None:
    """A value of a corpus file that isn't what the format says: a ValueError naming where it is and what it is."""
    if not ok:
        raise ValueError(f"{where}: expected {what}, got {str(x)[:200]}")


def _is_int(x: Any) -> bool:
    return type(x) is int


SIZE_KINDS = {"mul": 2, "div": 2, "mod": 2, "lt": 2, "sum": None, "and": None}  # how many arguments each takes


def sint_from_json(x: Any, where: str = "size") -> K.sint:
    """A size of the symbolic corpus: an int, {"var": name, "min", "max"}, or {"mul"|"div"|"mod"|"lt": [a, b]},
    {"sum"|"and": [...]} (tinygrad's MulNode, DivNode, ModNode, LtNode, SumNode, AndNode)."""
    if _is_int(x):
        return x
    _need(isinstance(x, dict), where, x, "an int or a symbolic size (an object)")
    if "var" in x:
        ok = set(x) == {"var", "min", "max"} and isinstance(x["var"], str) and _is_int(x["min"]) and _is_int(x["max"])
        _need(ok, where, x, '{"var": name, "min": int, "max": int}')
        return K.Variable(x["var"], x["min"], x["max"])
    kind, args = next(iter(x.items()), (None, None))
    n = SIZE_KINDS.get(kind, 0)
    ok = len(x) == 1 and kind in SIZE_KINDS and isinstance(args, list) and (n is None or len(args) == n)
    _need(ok, where, x, "one of " + ", ".join(f'{{"{k}": [...]}}' for k in SIZE_KINDS) + " with its arguments")
    a = [sint_from_json(y, f"{where}.{kind}[{i}]") for i, y in enumerate(args)]
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


def _dtype_from_json(d: Any, where: str) -> K.DType:
    if isinstance(d, dict):
        ok = set(d) == {"image", "shape"} and d["image"] in ("float", "half") and isinstance(d["shape"], list)
        _need(ok and all(map(_is_int, d["shape"])), where, d, '{"image": "float" or "half", "shape": [ints]}')
        return (K.dtypes.imagef if d["image"] == "float" else K.dtypes.imageh)(tuple(d["shape"]))
    _need(isinstance(d, str) and isinstance(getattr(K.dtypes, d, None), K.DType), where, d, "a dtype's name")
    return getattr(K.dtypes, d)


def _shapetracker_from_json(views: Any, where: str) -> K.ShapeTracker:
    _need(isinstance(views, list) and len(views) > 0, where, views, "a list of views")
    out = []
    for n, v in enumerate(views):
        at = f"{where}[{n}]"
        ok = isinstance(v, dict) and set(v) == {"shape", "strides", "offset", "mask"}
        _need(
            ok and isinstance(v["shape"], list) and isinstance(v["strides"], list),
            at,
            v,
            '{"shape": [sizes], "strides": [sizes], "offset": size, "mask": null or [[begin, end], ...]}',
        )
        _need(
            v["mask"] is None or (isinstance(v["mask"], list) and all(isinstance(m, list) for m in v["mask"])),
            f"{at}.mask",
            v["mask"],
            "null or a list of [begin, end] pairs",
        )

        def sizes(xs: list, what: str) -> tuple[K.sint, ...]:
            return tuple(sint_from_json(y, f"{at}.{what}[{i}]") for i, y in enumerate(xs))

        mask = tuple(sizes(m, f"mask[{i}]") for i, m in enumerate(v["mask"])) if v["mask"] is not None else None
        out.append(
            K.View.create(
                sizes(v["shape"], "shape"),
                sizes(v["strides"], "strides"),
                sint_from_json(v["offset"], f"{at}.offset"),
                mask,
            )
        )
    return K.ShapeTracker(tuple(out))


OP_KINDS = {"UnaryOps": K.UnaryOps, "BinaryOps": K.BinaryOps, "TernaryOps": K.TernaryOps, "ReduceOps": K.ReduceOps}
OP_KINDS["BufferOps"] = K.BufferOps


def lazyop_from_json(x: Any, where: str = "ast") -> K.LazyOp:
    """A LazyOp from the JSON form of the golden corpus (testdata/kernels.json), as exported from tinygrad 0.9.1:
    {"op": "BinaryOps.ADD", "src": [...], "arg": ...}; buffer args are {"idx" or "val", "dtype", "st": [views]}.
    Every value is checked for its kind: a ValueError names where one isn't what the format says."""
    _need(
        isinstance(x, dict) and set(x) <= {"op", "src", "arg"} and isinstance(x.get("op"), str),
        where,
        x,
        '{"op": "Kind.NAME", "src": [...], "arg": ...}',
    )
    kind, _, name = x["op"].partition(".")
    _need(
        kind in OP_KINDS and name in OP_KINDS[kind].__members__, f"{where}.op", x["op"], "an op such as BinaryOps.ADD"
    )
    op, arg, src = OP_KINDS[kind][name], x.get("arg"), x.get("src", [])
    _need(isinstance(src, list), f"{where}.src", src, "a list of ops")
    if kind == "BufferOps":
        value = "val" if op is K.BufferOps.CONST else "idx"
        _need(
            isinstance(arg, dict) and set(arg) == {value, "dtype", "st"},
            f"{where}.arg",
            arg,
            f'{{"{value}": ..., "dtype": ..., "st": [views]}}',
        )
        if value == "val":
            _need(isinstance(arg["val"], (int, float, dict)), f"{where}.arg.val", arg["val"], "a number or a size")
            val = arg["val"] if isinstance(arg["val"], (int, float)) else sint_from_json(arg["val"], f"{where}.arg.val")
        else:
            _need(_is_int(arg["idx"]), f"{where}.arg.idx", arg["idx"], "an int")
            val = arg["idx"]
        buf = K.ConstBuffer if value == "val" else K.MemBuffer
        arg = buf(
            val,
            _dtype_from_json(arg["dtype"], f"{where}.arg.dtype"),
            _shapetracker_from_json(arg["st"], f"{where}.arg.st"),
        )
    elif kind == "ReduceOps":
        _need(isinstance(arg, list) and all(map(_is_int, arg)), f"{where}.arg", arg, "a list of axes")
        arg = tuple(arg)
    elif op in (K.UnaryOps.CAST, K.UnaryOps.BITCAST):
        arg = _dtype_from_json(arg, f"{where}.arg")
    else:
        _need(arg is None, f"{where}.arg", arg, f"no arg for {x['op']}")
    return K.LazyOp(op, tuple(lazyop_from_json(s, f"{where}.src[{i}]") for i, s in enumerate(src)), arg)


def build_kernel(case) -> K.Kernel:
    """The case's kernel on its target, as tinygrad 0.9.1 constructed it."""
    _need(isinstance(case, dict) and case.get("target") in K.TARGETS, "case", case, "a case with a known target")
    _need(isinstance(case.get("ast"), list), "case.ast", case.get("ast"), "a list of STOREs")
    return K.Kernel(
        *[lazyop_from_json(a, f"ast[{i}]") for i, a in enumerate(case["ast"])], opts=K.TARGETS[case["target"]]
    )


def case_id(case) -> str:
    return f"{case['name']}[{case['target']}]"


def opt_of(o) -> K.Opt:
    """An opt as the corpus writes it, ["UPCAST", 0, 4] (the axis and amount may be null: NOLOCALS)."""
    ok = isinstance(o, list) and len(o) == 3 and o[0] in K.OptOps.__members__
    _need(ok and all(x is None or _is_int(x) for x in o[1:]), "opt", o, '["NAME", axis, amount]')
    return K.Opt(K.OptOps[o[0]], o[1], o[2])
