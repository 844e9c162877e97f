"""Reading testdata/: the golden corpora as they were exported from tinygrad 0.9.1 (testdata/README.md gives
their JSON form).

A case holds a kernel's AST (`"ast"`, one entry per output), its target, and what tinygrad did with it; a LazyOp is
{"op": "BinaryOps.ADD", "src": [...], "arg": ...}, a buffer's arg {"idx" or "val", "dtype", "st": [views]}, and a
size an int or a symbolic expression ({"var": ...}, {"mul": [a, b]}, ...). The readers of these forms are kernel.py's
(lazyop_from_json, in its section "ASTs as JSON"), which bench.py uses too; this module reads the files.
"""

from __future__ import annotations

import gzip
import json
import pathlib

import kernel as K
from kernel import check_json, lazyop_from_json
from tests.common import ROOT

TESTDATA = pathlib.Path(ROOT) / "testdata"


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


def build_kernel(case) -> K.Kernel:
    """The case's kernel on its target, as tinygrad 0.9.1 constructed it."""
    check_json(isinstance(case, dict) and case.get("target") in K.TARGETS, "case", case, "a case with a known target")
    check_json(isinstance(case.get("ast"), list), "case.ast", case.get("ast"), "a list of STOREs")
    return K.Kernel(
        *[lazyop_from_json(a, f"ast[{i}]") for i, a in enumerate(case["ast"])], opts=K.TARGETS[case["target"]]
    )


def case_id(case) -> str:
    return f"{case['name']}[{case['target']}]"


def opt_of(o) -> K.Opt:
    """An opt as the corpus writes it, ["UPCAST", 0, 4] (the axis and amount may be null: NOLOCALS)."""
    ok = isinstance(o, list) and len(o) == 3 and o[0] in K.OptOps.__members__
    check_json(ok and all(x is None or type(x) is int for x in o[1:]), "opt", o, '["NAME", axis, amount]')
    return K.Opt(K.OptOps[o[0]], o[1], o[2])
