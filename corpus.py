"""corpus.py: ASTs and opts in the JSON form of the golden corpus (testdata/README.md gives it), as tinygrad 0.9.1
exported them: the tests and the exercises read testdata/ with these, bench.py and tools/ the files of
tools/tinygrad_times.py. And the other way: a kernel's state in that form (state_of), to compare with what tinygrad
recorded; a Kernel as JSON (kernel_to_json): a search log holds its kernel so (cost.SearchLog), read back by
kernel_from_json."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import operator
import pathlib
from collections.abc import Callable
from typing import Any

from kernel import TARGETS, AndNode, BinaryOps, BufferOps, ConstBuffer, DivNode, DType, ImageDType, Kernel
from kernel import KernelOptError, LazyOp, LtNode, MemBuffer, ModNode, MulNode, Node, NumNode, Opt, OptOps, ReduceOps
from kernel import ShapeTracker, SumNode, Target, TensorCore, TernaryOps, UnaryOps, Variable, View, dtypes, sint

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
        ok = ok and _json_int(x["min"]) and _json_int(x["max"]) and 0 <= x["min"] <= x["max"]
        check_json(ok, where, x, '{"var": name, "min": int, "max": int}, 0 <= min <= max')
        return Variable(x["var"], x["min"], x["max"])
    kind, args = next(iter(x.items()), (None, None))
    n = _JSON_SIZES.get(kind, 0)
    ok = len(x) == 1 and kind in _JSON_SIZES and isinstance(args, list) and len(args) == (n or max(1, len(args)))
    kinds = ", ".join(f'{{"{k}": [...]}}' for k in _JSON_SIZES)
    check_json(ok, where, x, f"one of {kinds} with its arguments (two; one or more to sum and and)")
    a = [sint_from_json(y, f"{where}.{kind}[{i}]") for i, y in enumerate(args)]
    check_json(kind not in ("div", "mod") or a[1] != 0, where, x, "a divisor other than 0")
    check_json(kind != "and" or all(isinstance(y, Node) for y in a), where, x, "symbolic conditions to and")
    try:
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
    except ValueError as e:  # kernel.py's symbolic algebra refuses it (a Variable's range, say)
        raise ValueError(f"{where}: {e}") from None


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


# -- the other way: a Kernel as JSON, read back by kernel_from_json (a search log's kernel: data, never code) --
_JSON_NODES = {MulNode: "mul", DivNode: "div", ModNode: "mod", LtNode: "lt", SumNode: "sum", AndNode: "and"}


def sint_to_json(x: sint) -> Any:
    """A size as sint_from_json reads it."""
    if isinstance(x, (int, NumNode)):
        return int(x.b if isinstance(x, NumNode) else x)
    if isinstance(x, Variable):
        return {"var": x.expr, "min": x.min, "max": x.max}
    args = x.nodes if isinstance(x, (SumNode, AndNode)) else [x.a, x.b]
    return {_JSON_NODES[type(x)]: [sint_to_json(y) for y in args]}


def dtype_to_json(d: DType) -> str | dict:
    if isinstance(d, ImageDType):
        return {"image": "float" if d.name == "imagef" else "half", "shape": list(d.shape)}
    return d.name


def lazyop_to_json(x: LazyOp) -> dict:
    """A LazyOp in the golden corpus's JSON form (testdata/README.md), as lazyop_from_json reads it."""
    out: dict = {"op": f"{type(x.op).__name__}.{x.op.name}"}
    if isinstance(x.arg, (MemBuffer, ConstBuffer)):
        first = {"idx": x.arg.idx} if isinstance(x.arg, MemBuffer) else {"val": x.arg.val}
        if isinstance(first.get("val"), Node):
            first["val"] = sint_to_json(first["val"])
        views = [{"shape": [sint_to_json(n) for n in v.shape], "strides": [sint_to_json(n) for n in v.strides],
                  "offset": sint_to_json(v.offset), "mask": None if v.mask is None else
                  [[sint_to_json(n) for n in m] for m in v.mask]} for v in x.arg.st.views]  # fmt: skip
        out["arg"] = {**first, "dtype": dtype_to_json(x.arg.dtype), "st": views}
    elif x.op in ReduceOps:
        out["arg"] = list(x.arg)
    elif x.arg is not None:  # a CAST's or BITCAST's dtype
        out["arg"] = dtype_to_json(x.arg)
    return out | ({"src": [lazyop_to_json(s) for s in x.src]} if x.src else {})


def target_to_json(t: Target) -> str | dict:
    """A target: its name in TARGETS, or its fields (a TensorCore's too)."""
    if names := [name for name, known in TARGETS.items() if known == t]:
        return names[0]
    fields = {f.name: getattr(t, f.name) for f in dataclasses.fields(t)}
    cores = [{f.name: getattr(tc, f.name) for f in dataclasses.fields(tc)} for tc in t.tensor_cores]
    cores = [c | {"dtype_in": c["dtype_in"].name, "dtype_out": c["dtype_out"].name} for c in cores]
    return fields | {"tensor_cores": cores}


def _ints(x: Any, depth: int) -> bool:
    """Whether x is ints nested `depth` lists deep (depth 0: an int)."""
    return _json_int(x) if depth == 0 else isinstance(x, list) and all(_ints(y, depth - 1) for y in x)


def target_from_json(x: Any, where: str = "target") -> Target:
    """A target as target_to_json writes it; Kernel() checks its fields' kinds, this the tensor cores' form."""
    if isinstance(x, str):
        check_json(x in TARGETS, where, x, f"one of {', '.join(TARGETS)}")
        return TARGETS[x]
    names = {f.name for f in dataclasses.fields(Target)}
    check_json(isinstance(x, dict) and set(x) == names and isinstance(x["tensor_cores"], list), where, x,
               f"a target's name or an object of its fields ({', '.join(sorted(names))})")  # fmt: skip
    cores, tc_names = [], {f.name for f in dataclasses.fields(TensorCore)}
    for i, c in enumerate(x["tensor_cores"]):
        ok = isinstance(c, dict) and set(c) == tc_names and _ints(c["dims"], 1) and len(c["dims"]) == 3
        ok = ok and _ints(c["threads"], 2) and all(len(t) == 2 for t in c["threads"])
        ok = ok and _ints(c["thread_local_aliases"], 3) and _ints(c["thread_local_sizes"], 2)
        check_json(ok, f"{where}.tensor_cores[{i}]", c, f"a tensor core's fields ({', '.join(sorted(tc_names))})")
        dts = [dtype_from_json(c[d], f"{where}.tensor_cores[{i}].{d}") for d in ("dtype_in", "dtype_out")]
        cores.append(TensorCore(tuple(c["dims"]), *dts, [tuple(t) for t in c["threads"]], c["thread_local_aliases"],
                                c["thread_local_sizes"]))  # fmt: skip
    sizes = {n: tuple(x[n]) if isinstance(x[n], list) else x[n] for n in ("global_max", "local_max")}
    return Target(**(x | sizes | {"tensor_cores": cores}))


def kernel_to_json(k: Kernel) -> dict:
    """{"ast": [...], "target": ..., "opts": [[op, axis, amount], ...]}: all that makes k again (kernel_from_json)."""
    opts = [[o.op.name, o.axis, o.amt] for o in k.applied_opts]
    return {"ast": [lazyop_to_json(x) for x in k.ast], "target": target_to_json(k.opts), "opts": opts}


def kernel_from_json(x: Any, where: str = "kernel") -> Kernel:
    """The Kernel kernel_to_json wrote, every value checked: a ValueError names where one is wrong (a file's
    kernel is data: nothing in it runs)."""
    check_json(isinstance(x, dict) and set(x) == {"ast", "target", "opts"} and isinstance(x["ast"], list) and
               isinstance(x["opts"], list), where, x, '{"ast": [STOREs], "target": ..., "opts": [opts]}')  # fmt: skip
    ast = [lazyop_from_json(a, f"{where}.ast[{i}]") for i, a in enumerate(x["ast"])]
    target = target_from_json(x["target"], f"{where}.target")
    try:
        k = Kernel(*ast, opts=target)
    except ValueError as e:  # the kernel's own checks: the AST's rules, a target's field
        raise ValueError(f"{where}: {e}") from None
    for i, o in enumerate(x["opts"]):
        try:
            k.apply_opt(opt_of(o))
        except (KernelOptError, ValueError) as e:
            raise ValueError(f"{where}.opts[{i}]: {e}") from None
    return k


# -- kernel.py's state in the corpus's terms (the replays and the exercises compare in them) --


def views_of(st: ShapeTracker) -> list[dict]:
    return [
        {
            "shape": [sint_to_json(s) for s in v.shape],
            "strides": [sint_to_json(s) for s in v.strides],
            "offset": sint_to_json(v.offset),
            "mask": [[sint_to_json(b), sint_to_json(e)] for b, e in v.mask] if v.mask is not None else None,
        }
        for v in st.views
    ]


def state_of(k: Kernel) -> dict:
    """The kernel's state in the corpus's terms."""
    return {
        "full_shape": [sint_to_json(s) for s in k.full_shape],
        "output_shape": [sint_to_json(s) for s in k.output_shape],
        "colors": k.colors(),
        "first_reduce": k.first_reduce,
        "upcasted": k.upcasted,
        "local_dims": k.local_dims,
        "group_for_reduces": k.group_for_reduces,
        "applied_opts": [[o.op.name, o.axis, o.amt] for o in k.applied_opts],
        "sts": [views_of(st) for st in k.sts],
    }
