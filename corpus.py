"""corpus.py: ASTs and opts in the JSON form of the golden corpus (testdata/README.md gives it), as tinygrad 0.9.1
exported them: the tests and the exercises read testdata/ with these, bench.py and tools/ the files of
tools/tinygrad_times.py; and a kernel's state in that form (state_of), to compare with what tinygrad recorded."""

from __future__ import annotations

import functools
import gzip
import json
import operator
import pathlib
from collections.abc import Callable
from typing import Any

from kernel import TARGETS, BinaryOps, BufferOps, ConstBuffer, DType, Kernel, LazyOp, MemBuffer, Node, Opt, OptOps
from kernel import DivNode, LtNode, ModNode, MulNode, NumNode, SumNode
from kernel import ReduceOps, ShapeTracker, TernaryOps, UnaryOps, Variable, View, dtypes, sint

TESTDATA = pathlib.Path(__file__).resolve().parent / "testdata"


def check_json(ok: bool, where: str, x: Any, what: str) -> None:
    """A value of a JSON file that isn't what the format says: a ValueError naming where it is and what it is."""
    if not ok:
        raise ValueError(f"{where}: expected {what}, got {str(x)[:200]}")


def _json_int(x: Any) -> bool:
    return type(x) is int


_JSON_SIZES = {"mul": 2, "div": 2, "mod": 2, "lt": 2, "sum": None, "and": None}  # how many arguments each takes


def sint_from_json(x: Any, where: str = "size") -> sint:
    """A size of the symbolic corpus: an int, {"var": name, "min", "max"}, or {"mul"|"div"|"mod"|"lt": [a, b]},
    {"sum"|"and": [...]} (tinygrad's MulNode, DivNode, ModNode, LtNode, SumNode, AndNode)."""
    if _json_int(x):
        return x
    check_json(isinstance(x, dict), where, x, "an int or a symbolic size (an object)")
    if "var" in x:
        ok = set(x) == {"var", "min", "max"} and isinstance(x["var"], str)
        ok = ok and _json_int(x["min"]) and _json_int(x["max"])
        check_json(ok, where, x, '{"var": name, "min": int, "max": int}')
        return Variable(x["var"], x["min"], x["max"])
    kind, args = next(iter(x.items()), (None, None))
    n = _JSON_SIZES.get(kind, 0)
    ok = len(x) == 1 and kind in _JSON_SIZES and isinstance(args, list) and (n is None or len(args) == n)
    check_json(ok, where, x, "one of " + ", ".join(f'{{"{k}": [...]}}' for k in _JSON_SIZES) + " with its arguments")
    a = [sint_from_json(y, f"{where}.{kind}[{i}]") for i, y in enumerate(args)]
    if kind == "sum":  # nodes first, then numbers, added left to right
        return functools.reduce(operator.add, sorted(a, key=lambda y: isinstance(y, int)))
    if kind == "and":
        return Node.ands(a)
    ops: dict[str, Callable[[Any, Any], Any]] = {
        "mul": operator.mul,
        "div": operator.floordiv,
        "mod": operator.mod,
        "lt": operator.lt,
    }
    return ops[kind](a[0], a[1])


def dtype_from_json(d: Any, where: str) -> DType:
    if isinstance(d, dict):
        ok = set(d) == {"image", "shape"} and d["image"] in ("float", "half") and isinstance(d["shape"], list)
        check_json(ok and all(map(_json_int, d["shape"])), where, d, '{"image": "float" or "half", "shape": [ints]}')
        return (dtypes.imagef if d["image"] == "float" else dtypes.imageh)(tuple(d["shape"]))
    check_json(isinstance(d, str) and isinstance(getattr(dtypes, d, None), DType), where, d, "a dtype's name")
    return getattr(dtypes, d)


def shapetracker_from_json(views: Any, where: str) -> ShapeTracker:
    check_json(isinstance(views, list) and len(views) > 0, where, views, "a list of views")
    out = []
    for n, v in enumerate(views):
        at = f"{where}[{n}]"
        ok = isinstance(v, dict) and set(v) == {"shape", "strides", "offset", "mask"}
        check_json(
            ok and isinstance(v["shape"], list) and isinstance(v["strides"], list),
            at,
            v,
            '{"shape": [sizes], "strides": [sizes], "offset": size, "mask": null or [[begin, end], ...]}',
        )
        check_json(
            v["mask"] is None or (isinstance(v["mask"], list) and all(isinstance(m, list) for m in v["mask"])),
            f"{at}.mask",
            v["mask"],
            "null or a list of [begin, end] pairs",
        )

        def sizes(xs: list, what: str) -> tuple[sint, ...]:
            return tuple(sint_from_json(y, f"{at}.{what}[{i}]") for i, y in enumerate(xs))

        mask = tuple(sizes(m, f"mask[{i}]") for i, m in enumerate(v["mask"])) if v["mask"] is not None else None
        out.append(
            View.create(
                sizes(v["shape"], "shape"),
                sizes(v["strides"], "strides"),
                sint_from_json(v["offset"], f"{at}.offset"),
                mask,
            )
        )
    return ShapeTracker(tuple(out))


_JSON_OPS = {"UnaryOps": UnaryOps, "BinaryOps": BinaryOps, "TernaryOps": TernaryOps, "ReduceOps": ReduceOps}
_JSON_OPS["BufferOps"] = BufferOps


def lazyop_from_json(x: Any, where: str = "ast") -> LazyOp:
    """A LazyOp from the JSON form of the golden corpus (testdata/kernels.json), as exported from tinygrad 0.9.1:
    {"op": "BinaryOps.ADD", "src": [...], "arg": ...}; buffer args are {"idx" or "val", "dtype", "st": [views]}.
    Every value is checked for its kind: a ValueError names where one isn't what the format says."""
    check_json(
        isinstance(x, dict) and set(x) <= {"op", "src", "arg"} and isinstance(x.get("op"), str),
        where,
        x,
        '{"op": "Kind.NAME", "src": [...], "arg": ...}',
    )
    kind, _, name = x["op"].partition(".")
    check_json(
        kind in _JSON_OPS and name in _JSON_OPS[kind].__members__, f"{where}.op", x["op"], "an op such as BinaryOps.ADD"
    )
    op, arg, src = _JSON_OPS[kind][name], x.get("arg"), x.get("src", [])
    check_json(isinstance(src, list), f"{where}.src", src, "a list of ops")
    if kind == "BufferOps":
        value = "val" if op is BufferOps.CONST else "idx"
        check_json(
            isinstance(arg, dict) and set(arg) == {value, "dtype", "st"},
            f"{where}.arg",
            arg,
            f'{{"{value}": ..., "dtype": ..., "st": [views]}}',
        )
        if value == "val":
            check_json(isinstance(arg["val"], (int, float, dict)), f"{where}.arg.val", arg["val"], "a number or a size")
            val = arg["val"] if isinstance(arg["val"], (int, float)) else sint_from_json(arg["val"], f"{where}.arg.val")
        else:
            check_json(_json_int(arg["idx"]), f"{where}.arg.idx", arg["idx"], "an int")
            val = arg["idx"]
        buf = ConstBuffer if value == "val" else MemBuffer
        arg = buf(
            val,
            dtype_from_json(arg["dtype"], f"{where}.arg.dtype"),
            shapetracker_from_json(arg["st"], f"{where}.arg.st"),
        )
    elif kind == "ReduceOps":
        check_json(isinstance(arg, list) and all(map(_json_int, arg)), f"{where}.arg", arg, "a list of axes")
        arg = tuple(arg)
    elif op in (UnaryOps.CAST, UnaryOps.BITCAST):
        arg = dtype_from_json(arg, f"{where}.arg")
    else:
        check_json(arg is None, f"{where}.arg", arg, f"no arg for {x['op']}")
    return LazyOp(op, tuple(lazyop_from_json(s, f"{where}.src[{i}]") for i, s in enumerate(src)), arg)


def load_corpus(name: str) -> dict:
    """testdata/NAME as JSON (gzipped where it ends in .gz): an object holding a list of "cases" or of "chains"."""
    path = TESTDATA / name
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        data = json.load(f)
    check_json(
        isinstance(data, dict) and any(isinstance(data.get(k), list) for k in ("cases", "chains")),
        name,
        data,
        'an object with a list of "cases" or "chains"',
    )
    return data


def build_kernel(case) -> Kernel:
    """The case's kernel on its target, as tinygrad 0.9.1 constructed it."""
    check_json(isinstance(case, dict) and case.get("target") in TARGETS, "case", case, "a case with a known target")
    check_json(isinstance(case.get("ast"), list), "case.ast", case.get("ast"), "a list of STOREs")
    return Kernel(*[lazyop_from_json(a, f"ast[{i}]") for i, a in enumerate(case["ast"])], opts=TARGETS[case["target"]])


def case_id(case) -> str:
    return f"{case['name']}[{case['target']}]"


def opt_of(o) -> Opt:
    """An opt as the corpus writes it, ["UPCAST", 0, 4] (the axis and amount may be null: NOLOCALS)."""
    ok = isinstance(o, list) and len(o) == 3 and o[0] in OptOps.__members__
    check_json(ok and all(x is None or type(x) is int for x in o[1:]), "opt", o, '["NAME", axis, amount]')
    return Opt(OptOps[o[0]], o[1], o[2])


# ==== the other way: kernel.py's state in the corpus's terms (the replays and the exercises compare in them) ====


def enc(x):
    """A size as the corpus writes it: an int, or {"var": ...}, {"mul": [a, b]}, ... (testdata/README.md)."""
    if isinstance(x, int):
        return x
    if isinstance(x, NumNode):
        return x.b
    if isinstance(x, Variable):
        return {"var": x.expr, "min": x.min, "max": x.max}
    for cls, key in ((MulNode, "mul"), (DivNode, "div"), (ModNode, "mod"), (LtNode, "lt")):
        if isinstance(x, cls):
            return {key: [enc(x.a), enc(x.b)]}
    return {"sum" if isinstance(x, SumNode) else "and": [enc(y) for y in x.nodes]}


def views_of(st: ShapeTracker) -> list[dict]:
    return [
        {
            "shape": [enc(s) for s in v.shape],
            "strides": [enc(s) for s in v.strides],
            "offset": enc(v.offset),
            "mask": [[enc(b), enc(e)] for b, e in v.mask] if v.mask is not None else None,
        }
        for v in st.views
    ]


def state_of(k: Kernel) -> dict:
    """The kernel's state in the corpus's terms."""
    return {
        "full_shape": [enc(s) for s in k.full_shape],
        "output_shape": [enc(s) for s in k.output_shape],
        "colors": k.colors(),
        "first_reduce": k.first_reduce,
        "upcasted": k.upcasted,
        "local_dims": k.local_dims,
        "group_for_reduces": k.group_for_reduces,
        "applied_opts": [[o.op.name, o.axis, o.amt] for o in k.applied_opts],
        "sts": [views_of(st) for st in k.sts],
    }
