"""The graders: the cases each exercise is graded on, and the answer its function must give on each.

An exercise is graded by parts (PARTS, named in its EXERCISES entry), each a list of cases in one of two forms, the
corpus's own (testdata/README.md): ShapeTracker chains (`chains`, `numpy`) and kernel cases (`kernels`, `vectors`,
`device`). Every field a case holds is compared exactly with what the project, with the student's function spliced
in, gives; the oracle is tinygrad 0.9.1's record where it has one, else numpy, else kernel.py's own answer (each
failure says which). Hidden cases (`hidden=SEED`) are drawn at grading time in the same forms: random movement-op
chains whose index maps are numpy's, random kernels and opt sequences whose states are kernel.py's.

`grade` runs one exercise in this process: it loads the source, splices its function in, grades case after case
(stopping at the first failure unless all_failures) and returns a Verdict; nothing of the project stays changed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import kernel as K
from corpus import build_kernel, case_id, load_corpus, opt_of, state_of, views_of
from demo import DEMOS, ROLES
from exercises import ROOT, Exercise
from exercises.splice import Source, SourceError, Splice, changes, project_state, restore, where

TINYGRAD, NUMPY, OURS = "tinygrad 0.9.1", "numpy", "kernel.py's own answer"
QUICK_CHAINS, QUICK_KERNELS = ("shapetracker.json",), ("kernels.json", "multireduce.json")
ALL_CHAINS = QUICK_CHAINS + ("difftest_shapetracker.json.gz",)
ALL_KERNELS = QUICK_KERNELS + ("difftest_kernels.json.gz", "multireduce_recorded.json.gz")
DEVICE_LIMIT = 1 << 20  # the device part runs the corpus's kernels of at most this many elements


class NotDone(Exception):
    """The stub ran: the exercise is not done yet."""


@dataclass
class Failure:
    case: str  # "kernels.json #15 sum_all_4096[opencl]"
    step: str  # "sequence 0, step 2 UPCAST:0:0"
    field: str  # "full_shape", or "raised"
    yours: Any = None
    theirs: Any = None
    oracle: str = TINYGRAD
    picture: list[str] = field(default_factory=list)  # the shape before and after, as the demo prints it

    def line(self, qualname: str) -> str:
        at = f"{self.case}, {self.step}" if self.step else self.case
        if self.field == "raised":
            return f"{at}: your {qualname} raised {self.yours}"
        if self.field == "device":
            return f"{at}: {self.yours}"
        return f"{at}: {self.field}: yours {short(self.yours)}, {self.oracle} has {short(self.theirs)}"


def short(x: Any, width: int = 240) -> str:
    text = x if isinstance(x, str) else repr(x)
    return text if len(text) <= width else text[: width - 5] + " ..."


@dataclass
class Verdict:
    number: int
    qualname: str
    status: str = "pass"  # pass, fail, not done, error, timed out, crashed
    passed: int = 0
    total: int = 0  # the recorded cases graded
    hidden_passed: int = 0
    hidden_total: int = 0
    failures: list[Failure] = field(default_factory=list)
    message: str = ""  # what went wrong: an error, a crash
    notes: list[str] = field(default_factory=list)  # e.g. the device part not run, and why
    printed: str = ""  # what the student's code printed

    @property
    def name(self) -> str:
        return f"exercise {self.number} ({self.qualname})"

    def line(self) -> str:
        """The one verdict line."""
        if self.status == "pass":
            hidden = f", {self.hidden_passed:,} of {self.hidden_total:,} hidden" if self.hidden_total else ""
            return f"{self.name}: pass, {self.passed:,} of {self.total:,} cases{hidden}"
        if self.status == "fail":
            return f"{self.name}: fail on {self.failures[0].line(self.qualname)}"
        if self.status == "not done":
            return f"{self.name}: not done yet"
        sep = " " if self.status in ("timed out", "crashed") else ": "
        return f"{self.name}: {self.status}{sep if self.message else ''}{self.message}"

    def detail(self) -> list[str]:
        """What follows the line: the first failure's picture, the other failures (all_failures), the notes."""
        out = []
        if self.failures and self.status != "not done":
            out += ["  " + x for x in self.failures[0].picture]
            out += [f"  also: {f.line(self.qualname)}" for f in self.failures[1:]]
            out.append(f"  {self.passed:,} of {self.total + self.hidden_total:,} cases passed")
        return out + [f"  ({note})" for note in self.notes]

    def cell(self) -> str:
        """The report's cell."""
        return {"not done": "not done", "timed out": "timeout"}.get(self.status, self.status)

    def to_json(self) -> dict:
        return {**asdict(self), "line": self.line()}

    @staticmethod
    def from_json(d: dict) -> Verdict:
        d = {k: v for k, v in d.items() if k != "line"}
        return Verdict(**{**d, "failures": [Failure(**f) for f in d["failures"]]})


# ==== what a student's kernel looks like beside tinygrad's ==================================================


def shape_row(sizes: list, colors: list[str]) -> str:
    """A shape as the demo's step table prints it (demo.shape_row): coloured on a terminal, else each size followed
    by its colour's letter."""
    if K.use_color():
        return " ".join(K.colored(f"{s:4d}" if isinstance(s, int) else str(s), c) for s, c in zip(sizes, colors))
    return "".join(f"{s!s:>4}{ROLES.get(c, ('?',))[0]}" for s, c in zip(sizes, colors))


def picture(before: dict | None, theirs: dict | None, yours: dict | None, oracle: str) -> list[str]:
    """The shape before a step, the oracle's after it and the student's (each a state, or None: refused)."""
    rows = [("before", before), ("tinygrad" if oracle == TINYGRAD else "kernel.py", theirs), ("yours", yours)]
    out = []
    for label, st in rows:
        if label == "before" and st is None:
            continue
        text = "(refused: the kernel stays as it was)" if st is None else shape_row(st["full_shape"], st["colors"])
        opts = " ".join(":".join(map(str, o)) for o in st.get("applied_opts", [])) if st else ""
        out.append(f"{label:<10}{text}   {opts}".rstrip())
    return out


# ==== ShapeTracker chains ===================================================================================


def evaluate(node: Any, env: dict[str, np.ndarray]) -> Any:
    """A symbolic index expression (Node) evaluated at every element at once: env holds each idx variable's range."""
    if isinstance(node, (int, bool, np.integer)):
        return int(node)
    if isinstance(node, K.NumNode):
        return node.b
    if isinstance(node, K.Variable):
        return env[node.expr]
    if isinstance(node, K.SumNode):
        return sum((evaluate(x, env) for x in node.nodes), 0)
    if isinstance(node, K.AndNode):
        return functools.reduce(np.logical_and, [np.asarray(evaluate(x, env)) != 0 for x in node.nodes])
    ops = {K.MulNode: np.multiply, K.DivNode: np.floor_divide, K.ModNode: np.mod, K.LtNode: np.less}
    if type(node) in ops:
        return ops[type(node)](evaluate(node.a, env), evaluate(node.b, env))
    raise TypeError(f"expected an index expression (a Node or an int), got {type(node).__name__}: {node!r}")


def index_map(st: K.ShapeTracker) -> list[int]:
    """The flat index of every element, row-major, -1 where invalid (as the corpus writes it): from the
    ShapeTracker's index expressions."""
    shape = tuple(st.shape)
    env = {
        f"idx{i}": np.arange(s).reshape([-1 if j == i else 1 for j in range(len(shape))]) for i, s in enumerate(shape)
    }
    idx, valid = st.expr_idxs()
    idx, valid = (np.broadcast_to(np.asarray(evaluate(x, env)), shape) for x in (idx, valid))
    out = np.where(valid != 0, idx, -1).astype(object)
    out[(valid != 0) & (idx < 0)] = "valid but negative"  # else it would read as padding's -1
    return out.reshape(-1).tolist()


# each field a step of a chain may hold, and how to read it off the ShapeTracker (the order they are compared in)
CHAIN_FIELDS: dict[str, Callable[[K.ShapeTracker], Any]] = {
    "views": views_of,
    "shape": lambda st: list(st.shape),
    "size": lambda st: st.size,
    "index_map": index_map,
    "real_strides": lambda st: list(st.real_strides()),
    "real_strides_ignore_valid": lambda st: list(st.real_strides(ignore_valid=True)),
    "unit_stride_axes": lambda st: st.unit_stride_axes(),
    "axis_is_masked": lambda st: [st.axis_is_masked(i) for i in range(len(st.shape))],
    "simplified": lambda st: views_of(st.simplify()),
    "simplified_index_map": lambda st: index_map(st.simplify()),
}


def apply_step(st: K.ShapeTracker, step: dict) -> K.ShapeTracker:
    arg = step["args"][0]
    arg = tuple(tuple(a) for a in arg) if step["op"] in ("pad", "shrink") else tuple(arg)
    return getattr(st, step["op"])(arg)


def step_text(step: dict) -> str:
    return f"{step['op']}{tuple(tuple(a) if isinstance(a, list) else a for a in step['args'][0])}"


def grade_chain(chain: dict, name: str) -> Failure | None:
    st = K.ShapeTracker.from_shape(tuple(chain["shape"]))
    oracles = chain.get("oracles", {})
    for n, step in enumerate(chain["steps"]):
        at = f"step {n} {step_text(step)}"
        st = apply_step(st, step)
        for key, read in CHAIN_FIELDS.items():
            if step.get(key) is None or (yours := read(st)) == step[key]:
                continue
            oracle = oracles.get(key, oracles.get("*", TINYGRAD))
            done = ", ".join(step_text(s) for s in chain["steps"][: n + 1])
            pic = [f"the chain: from {tuple(chain['shape'])}: {done}"]
            if key.endswith("index_map") and isinstance(yours, list) and len(yours) == len(step[key]):
                first = next(i for i, (a, b) in enumerate(zip(yours, step[key])) if a != b)
                at_elem = np.unravel_index(first, st.shape)
                pic.append(f"first difference at element {tuple(map(int, at_elem))}: yours {yours[first]}, {oracle} "
                           f"has {step[key][first]} (-1: padding, not a valid element)")  # fmt: skip
            return Failure(name, at, key, yours, step[key], oracle, pic)
    return None


@dataclass
class Part:
    """A list of cases graded one after another: each a name and a function that returns a Failure or None."""

    cases: list[tuple[str, Callable[[], Failure | None]]]
    hidden: bool = False
    device: Callable[[bool], Iterator[tuple[str, Failure | None]]] | None = None  # run in a child process
    note: str = ""


def recorded_chains(files: tuple[str, ...]) -> list[tuple[str, dict]]:
    return [(f"{f} chain {i}", c) for f in files for i, c in enumerate(load_corpus(f)["chains"])]


def chains_part(ctx: Context) -> list[Part]:
    parts = [Part([(n, _bind(grade_chain, c, n)) for n, c in recorded_chains(ctx.chain_files)])]
    if ctx.hidden is not None:
        chains = [random_chain(random.Random(f"{ctx.hidden} chain {i}"), with_reference=True) for i in range(40)]
        parts.append(Part([(f"hidden chain {i}", _bind(grade_chain, c, f"hidden chain {i}")) for i, c in
                           enumerate(chains)], hidden=True))  # fmt: skip
    return parts


def _bind(fn: Callable, *args) -> Callable[[], Any]:
    return lambda: fn(*args)


# the chains that decide View.__add__ by numpy alone: padding seen through a stride-2 view (its mask rounds up), ...
FIXED_NUMPY_CHAINS = [
    ((10,), [("pad", ((3, 1),)), ("reshape", (7, 2)), ("shrink", ((0, 7), (0, 1)))]),
    ((12,), [("pad", ((5, 0),)), ("reshape", (17, 1)), ("stride", (3, 1)), ("reshape", (6,))]),
    (
        (4, 6),
        [("permute", (1, 0)), ("pad", ((1, 2), (0, 0))), ("reshape", (9, 2, 2)), ("shrink", ((1, 8), (0, 1), (0, 2)))],
    ),
]


def numpy_chain(shape: tuple[int, ...], ops: list[tuple[str, tuple]]) -> dict:
    """A chain whose index maps (of each step's ShapeTracker and of it simplified) are numpy's: the movement ops
    applied to the flat indices 0, 1, ... with -1 for padding."""
    arr = np.arange(int(np.prod(shape))).reshape(shape)
    steps = []
    for op, arg in ops:
        arr = numpy_op(arr, op, arg)
        flat = arr.reshape(-1).tolist()
        steps.append({"op": op, "args": [list(arg)], "index_map": flat, "simplified_index_map": flat})
    return {"shape": list(shape), "steps": steps, "oracles": {"*": NUMPY}}


def numpy_op(arr: np.ndarray, op: str, arg: tuple) -> np.ndarray:
    if op == "reshape":
        return arr.reshape(arg)
    if op == "permute":
        return arr.transpose(arg)
    if op == "expand":
        return np.broadcast_to(arr, arg)
    if op == "pad":
        return np.pad(arr, arg, constant_values=-1)
    if op == "shrink":
        return arr[tuple(slice(b, e) for b, e in arg)]
    return arr[tuple(slice(None, None, m) for m in arg)]  # stride


def random_ops(rng: random.Random, shape: tuple[int, ...], count: int) -> list[tuple[str, tuple]]:
    """`count` random movement ops from `shape`: reshapes to a regrouping of the size's prime factors (a 1 mixed in
    now and then), permutes, pads, shrinks, (negative) strides, and expands of a size-1 axis (a reshape makes one
    first where there is none); past 2,000 elements only those that don't grow it."""
    ops: list[tuple[str, tuple]] = []
    arr = np.zeros(shape)
    for _ in range(count):
        kinds = ["reshape", "permute", "pad", "shrink", "stride", "expand"][: 6 if arr.size <= 2000 else 5]
        op, shape = rng.choice([k for k in kinds if k != "pad" or arr.size <= 2000]), arr.shape
        if op in ("reshape", "expand") and (op == "reshape" or 1 not in shape):
            arg: tuple = _regrouped(arr.size, rng, one=op == "expand" or rng.random() < 0.3)
            op = "reshape"
        elif op == "permute":
            arg = tuple(rng.sample(range(len(shape)), len(shape)))
        elif op == "pad":
            arg = tuple((rng.randint(0, 2), rng.randint(0, 2)) for _ in shape)
        elif op == "shrink":
            arg = tuple((b := rng.randint(0, max(s - 1, 0)), rng.randint(min(b + 1, s), s)) for s in shape)
        elif op == "stride":
            arg = tuple(rng.choice([1, 1, -1, 2, -2, 3]) for _ in shape)
        else:
            arg = tuple(rng.randint(2, 4) if s == 1 else s for s in shape)
        ops.append((op, arg))
        arr = numpy_op(arr, op, arg)
    return ops


def _regrouped(n: int, rng: random.Random, one: bool) -> tuple[int, ...]:
    """A random shape of n elements: its prime factors shuffled and grouped, with a 1 inserted if `one`."""
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    rng.shuffle(factors)
    shape: list[int] = []
    for f in factors:
        shape[-1:] = [shape[-1] * f] if shape and rng.random() < 0.5 else shape[-1:] + [f]
    if one:
        shape.insert(rng.randint(0, len(shape)), 1)
    return (0,) if n == 0 else tuple(shape) or (1,)


def random_chain(rng: random.Random, with_reference: bool = False) -> dict:
    """A random chain whose index maps are numpy's; with_reference, the other fields are kernel.py's own (computed
    now: before the student's function is spliced in)."""
    shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 4)))
    chain = numpy_chain(shape, random_ops(rng, shape, rng.randint(2, 7)))
    if with_reference:
        st = K.ShapeTracker.from_shape(shape)
        for step in chain["steps"]:
            st = apply_step(st, step)
            step.update({k: read(st) for k, read in CHAIN_FIELDS.items() if not k.endswith("index_map")})
        chain["oracles"] = {"index_map": NUMPY, "simplified_index_map": NUMPY, "*": OURS}
    return chain


def numpy_part(ctx: Context) -> list[Part]:
    """View.__add__ against numpy: the fixed chains above and 200 random ones (seed 0), each step simplified."""
    chains = [numpy_chain(shape, ops) for shape, ops in FIXED_NUMPY_CHAINS]
    chains += [random_chain(random.Random(f"numpy chain {i}")) for i in range(200)]
    return [Part([(f"numpy chain {i}", _bind(grade_chain, c, f"numpy chain {i}")) for i, c in enumerate(chains)])]


# ==== kernel cases ==========================================================================================


def case_kernel(case: dict) -> K.Kernel:
    """A case's kernel: a recorded AST, or a hidden case's demo kernel at its sizes on its target."""
    if "demo" in case:
        return K.Kernel(*DEMOS[case["demo"]].build(*case["sizes"]), opts=K.TARGETS[case["target"]])
    return build_kernel(case)


def replay(case: dict, start: K.Kernel) -> Iterator[tuple[int, int, dict, dict | None, dict]]:
    """(sequence, step, the step, the state after it or None if refused, the state before) for each step of each
    sequence, each from a copy of `start`; a sequence ends after a step judged unlike the record."""
    for s, seq in enumerate(case["sequences"]):
        k, before = start.copy(), state_of(start)
        for n, step in enumerate(seq):
            try:
                k.apply_opt(opt_of(step["opt"]))
                after = state_of(k)
            except K.KernelOptError:
                after = None
            yield s, n, step, after, before
            if (after is not None) != step["ok"]:
                break
            before = after if after is not None else before


def reference_steps(case: dict) -> dict[tuple[int, int], dict | None]:
    """kernel.py's own state after each step of the case's sequences (None: refused)."""
    return {(s, n): after for s, n, _, after, _ in replay(case, case_kernel(case))}


def compare_state(name: str, at: str, yours: dict, want: dict, oracle: str, before: dict | None) -> Failure | None:
    for key, value in want.items():
        if key in yours and yours[key] != value:
            return Failure(name, at, key, yours[key], value, oracle, picture(before, want, yours, oracle))
    return None


def grade_kernel(ctx: Context, case: dict, name: str) -> Failure | None:
    """Construction, the heuristics, tensor cores and every opt sequence, as tinygrad recorded them; each accepted
    step's whole state (every buffer's views) as kernel.py's own, where tinygrad recorded only the shape and colours
    (computed with the reference in place, then graded with the student's function)."""
    theirs, ours = case.get("oracle", TINYGRAD), case.get("ours")
    if ours is None:
        with ctx.splice_undone():
            ours = reference_steps(case)
    k = case_kernel(case)
    init = state_of(k)
    if failure := compare_state(name, "after construction", init, case["init"], theirs, None):
        return failure
    for key, run in (("hand_coded", lambda x: x.hand_coded_optimizations()), ("tensor_cores", None)):
        if key not in case:
            continue
        k2 = k.copy()
        if key == "tensor_cores":
            used = k2.apply_tensor_cores(1)
            if used != case[key]["used"]:
                return Failure(name, "after apply_tensor_cores(1)", "used", used, case[key]["used"], theirs)
        else:
            run(k2)
        at = "after hand_coded_optimizations()" if key == "hand_coded" else "after apply_tensor_cores(1)"
        want = {k: v for k, v in case[key].items() if k not in ("used", "tensor_core")}
        if failure := compare_state(name, at, state_of(k2), want, theirs, init):
            return failure
    for s, n, step, after, before in replay(case, k):
        at = f"sequence {s}, step {n} {':'.join(map(str, step['opt']))}"
        mine = ours.get((s, n), _UNSEEN)
        want_ok, oracle = step["ok"], theirs
        if mine is not _UNSEEN and (mine is not None) != step["ok"]:
            want_ok, oracle = mine is not None, f"{OURS} (deliberately stricter than tinygrad: DIFFERENCES.md)"
        if (after is not None) != want_ok:
            pic = picture(before, mine if want_ok else None, after, oracle)
            return Failure(name, at, "accepted", after is not None, want_ok, oracle, pic)
        if after is None:
            continue
        recorded = {k: step[k] for k in ("full_shape", "colors") if k in step}
        if failure := compare_state(name, at, after, recorded, oracle, before):
            return failure
        if mine not in (None, _UNSEEN) and (failure := compare_state(name, at, after, mine, OURS, before)):
            return failure
    return None


_UNSEEN = object()


def recorded_cases(files: tuple[str, ...]) -> list[tuple[str, dict]]:
    return [(f"{f} #{i} {case_id(c)}", c) for f in files for i, c in enumerate(load_corpus(f)["cases"])]


# opt sequences tinygrad never tried on the founders' files, each ending where a rule must say no (kernel.py's answers
# are the oracle): UPCAST and GROUP of a tensor-core kernel's axes (kernels.json #38 is matmul_64[metal]), PADTO of an
# upcast axis (#0, add_1d_1000), and a conv's input read with stride 1 along two upcast axes, the output's x and the
# window's, the first a vector's width (#122, conv1d_2x4x100_k5x8: no float4 then)
EXTRA_SEQUENCES = [
    ("kernels.json", 38, [["TC", 0, 0], ["UPCAST", 2, 2]]),
    ("kernels.json", 38, [["TC", 0, 0], ["GROUP", 0, 2]]),
    ("kernels.json", 0, [["UPCAST", 0, 4], ["PADTO", 1, 8]]),
    ("kernels.json", 122, [["UPCAST", 2, 4], ["UNROLL", 1, 0]]),
    ("kernels.json", 122, [["UPCAST", 2, 2], ["UNROLL", 1, 0]]),
]


def extra_cases() -> list[tuple[str, dict]]:
    """EXTRA_SEQUENCES as cases: a recorded case's kernel, with the sequence and kernel.py's answer to each step in
    place of its own (made before the splice)."""
    out = []
    for file, i, opts in EXTRA_SEQUENCES:
        recorded = load_corpus(file)["cases"][i]
        k, seq = build_kernel(recorded), []
        case = {"ast": recorded["ast"], "target": recorded["target"], "init": state_of(k), "oracle": OURS}
        for o in opts:
            try:
                k.apply_opt(opt_of(o))
                seq.append({"opt": o, "ok": True})
            except K.KernelOptError:
                seq.append({"opt": o, "ok": False})
        case["sequences"] = [seq]
        case["ours"] = reference_steps(case)
        out.append((f"{file} #{i} {case_id(recorded)} with {' '.join(':'.join(map(str, o)) for o in opts)}", case))
    return out


def kernels_part(ctx: Context) -> list[Part]:
    cases = extra_cases() + recorded_cases(ctx.kernel_files)
    parts = [Part([(n, _bind(grade_kernel, ctx, c, n)) for n, c in cases])]
    if ctx.hidden is not None:
        parts.append(Part([(n, _bind(grade_kernel, ctx, c, n)) for n, c in ctx.hidden_kernels()], hidden=True))
    return parts


def random_kernel(rng: random.Random) -> dict:
    """A hidden kernel case, recorded from kernel.py itself: a demo kernel at random sizes on a random target, its
    states after construction and the heuristics, and three sequences of six random opts, each step's whole state."""
    while True:
        name = rng.choice([n for n in DEMOS if n not in ("attention", "image", "upcastmid")])
        sizes = [rng.choice([1, 2, 3, 4, 6, 8, 16, 30, 32, 60, 64, 100, 128, 256]) for _ in DEMOS[name].sizes]
        if int(np.prod(sizes)) <= 1 << 22:
            break
    case: dict = {"demo": name, "sizes": sizes, "target": rng.choice(list(K.TARGETS)), "oracle": OURS}
    k = case_kernel(case)
    case["init"], k2 = state_of(k), k.copy()
    k2.hand_coded_optimizations()
    case["hand_coded"] = state_of(k2)
    amounts = (0, 2, 3, 4, 5, 7, 8, 16, 32)
    case["sequences"] = []
    for _ in range(3):
        seq, k2 = [], k.copy()
        for _ in range(6):
            op = rng.choice([o for o in K.OptOps if o is not K.OptOps.TC])
            opt = (
                [op.name, None, None]
                if op is K.OptOps.NOLOCALS
                else [op.name, rng.randrange(max(1, k2.shape_len)), rng.choice(amounts)]
            )
            try:
                k2.apply_opt(opt_of(opt))
                seq.append({"opt": opt, "ok": True})
            except K.KernelOptError:
                seq.append({"opt": opt, "ok": False})
        case["sequences"].append(seq)
    case["ours"] = reference_steps(case)
    return case


# ==== the vector rule (render.vector_axis) ==================================================================


def case_states(case: dict) -> Iterator[tuple[str, K.Kernel]]:
    """Each state of a case's kernel: after construction, the heuristics, tensor cores, each accepted step."""
    k = case_kernel(case)
    yield "after construction", k
    k2 = k.copy()
    k2.hand_coded_optimizations()
    yield "after hand_coded_optimizations()", k2
    if "tensor_cores" in case:
        k2 = k.copy()
        k2.apply_tensor_cores(1)
        yield "after apply_tensor_cores(1)", k2
    for s, seq in enumerate(case["sequences"]):
        k2 = k.copy()
        for n, step in enumerate(seq):
            with contextlib.suppress(K.KernelOptError):
                k2.apply_opt(opt_of(step["opt"]))
                yield f"sequence {s}, step {n} {':'.join(map(str, step['opt']))}", k2


def grade_vectors(ctx: Context, case: dict, name: str) -> Failure | None:
    """Every buffer of every state: the axis read as one float2/float4, as render.py's own rule has it (tinygrad
    recorded no rendering: the oracle is kernel.py's)."""
    import render

    for at, k in case_states(case):
        for i in range(len(k.bufs)):
            yours, want = render.vector_axis(k, i), ctx.splice.original(k, i)
            ok = isinstance(yours, tuple) and len(yours) == 2 and isinstance(yours[1], str)
            if not ok or yours[0] != want[0]:
                st = state_of(k)
                strides = list(k.sts[i].real_strides())
                pic = [f"{'kernel':<10}{shape_row(st['full_shape'], st['colors'])}",
                       f"buffer {i}: strides {strides}, {k.bufs[i].dtype}, {k.opts.device}"]  # fmt: skip
                field_ = f"vector_axis(k, {i})[0]" if ok else f"vector_axis(k, {i}) (a pair: axis or None, why)"
                return Failure(name, at, field_, yours[0] if ok else repr(yours), want[0], OURS, pic)
    return None


def vectors_part(ctx: Context) -> list[Part]:
    cases = extra_cases() + recorded_cases(ctx.kernel_files)
    parts = [Part([(n, _bind(grade_vectors, ctx, c, n)) for n, c in cases])]
    if ctx.hidden is not None:
        parts.append(Part([(n, _bind(grade_vectors, ctx, c, n)) for n, c in ctx.hidden_kernels()], hidden=True))
    return parts


# ==== on the device, in a child process: the rendered kernels against numpy =================================


def device_cases(quick: bool, hidden: int | None) -> list[dict]:
    """The kernels run on the device, hand-coded: kernels.json's on the opencl target (the one of the four with float4
    whose kernels render.py runs as they are) of at most DEVICE_LIMIT elements (quick: two, a matmul and an image
    kernel), and hidden ones (random demo kernels): each a JSON-able description."""
    quick_names = ("matmul_64[opencl]", "img_out_matvec_256x64[opencl]")
    cases = [
        {"file": "kernels.json", "index": i, "name": f"kernels.json #{i} {case_id(c)}"}
        for i, c in enumerate(load_corpus("kernels.json")["cases"])
        if c["target"] == "opencl"
        and int(np.prod(c["init"]["full_shape"])) <= DEVICE_LIMIT
        and (not quick or case_id(c) in quick_names)
    ]
    if hidden is not None:
        rng = random.Random(f"{hidden} device")
        for i in range(5):
            case = {"demo": rng.choice(["matmul", "matvec", "conv2d", "sum_axis0", "broadcast"]), "target": "opencl"}
            case["sizes"] = [rng.choice([3, 4, 8, 16, 32, 60, 64]) for _ in DEMOS[case["demo"]].sizes]
            cases.append({**case, "name": f"hidden device {i} ({case['demo']} {'x'.join(map(str, case['sizes']))})"})
    return cases


def run_device_case(case: dict) -> None:
    """Render the case's hand-coded kernel (with the student's function in place) and verify it against numpy."""
    import runtime

    k = case_kernel(case) if "demo" in case else build_kernel(load_corpus(case["file"])["cases"][case["index"]])
    k.hand_coded_optimizations()
    runtime.verify(k, *runtime.random_inputs(k))


def device_part(ctx: Context) -> list[Part]:
    cases = device_cases(ctx.quick, ctx.hidden)
    recorded = [c for c in cases if "demo" not in c]
    parts = [Part([(c["name"], None) for c in recorded], device=_device_runner(ctx, recorded))]
    if hidden := [c for c in cases if "demo" in c]:
        parts.append(Part([(c["name"], None) for c in hidden], hidden=True, device=_device_runner(ctx, hidden)))
    return parts


def _device_runner(ctx: Context, cases: list[dict]) -> Callable[[bool], Iterator[tuple[str, Failure | None]]]:
    """Runs the cases in child processes (python -m exercises.worker device): a case that kills its process (a
    kernel that crashes the device) is a failed case, and the next starts a new process."""

    def run(all_failures: bool) -> Iterator[tuple[str, Failure | None]]:
        start = 0
        while start < len(cases):
            with tempfile.TemporaryDirectory() as tmp:
                spec, progress = os.path.join(tmp, "cases.json"), os.path.join(tmp, "progress")
                with open(spec, "w") as f:
                    json.dump({"source": asdict(ctx.source), "exercise": ctx.exercise.number,
                               "cases": cases[start:], "all": all_failures}, f)  # fmt: skip
                done = run_child(["device", spec, progress], timeout=None, own_group=False)
                lines = open(progress).read().splitlines() if os.path.exists(progress) else []
            for line in lines:
                kind, _, rest = line.partition(" ")
                if kind == "nodevice":
                    ctx.notes.append(f"the device part not run: no OpenCL device ({rest})")
                    return
                if kind == "result":
                    result = json.loads(rest)
                    start += 1
                    yield result["name"], Failure(**result["failure"]) if result["failure"] else None
            if start < len(cases) and done.returncode != 0:  # the process died in a case: that case failed
                why = describe_exit(done.returncode, done.stderr)
                yield cases[start]["name"], Failure(cases[start]["name"], "the hand-coded kernel", "device",
                                                    f"crashed the device ({why})", oracle=NUMPY)  # fmt: skip
                start += 1
                if not all_failures:
                    return
            elif start < len(cases):
                return  # the child stopped at a failure

    return run


def device_worker(spec_path: str, progress_path: str) -> None:
    """The child's side of _device_runner: splice the source in, run each case, write one line per case."""
    spec = json.load(open(spec_path))
    with open(progress_path, "w", buffering=1) as out:
        try:
            import runtime

            runtime.get_device()
        except Exception as e:  # noqa: BLE001 (no pyopencl, no platform, no device: the part is skipped, saying why)
            out.write(f"nodevice {str(e).splitlines()[0] if str(e) else type(e).__name__}\n")
            return
        from exercises import BY_NUMBER

        ex, source = BY_NUMBER[spec["exercise"]], Source(**spec["source"])
        ctx = Context(ex, source)
        func, module = source.load()
        with Splice(ex.file, ex.qualname, func, module):
            for case in spec["cases"]:
                failure = None
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        run_device_case(case)
                except Exception as e:  # noqa: BLE001 (a wrong kernel, or a student's function that raised)
                    failure = _case(ctx, case["name"], _raise(e)) or Failure(case["name"], "")
                    if isinstance(e, runtime.VerificationError):
                        failure = Failure(case["name"], "the hand-coded kernel", "device", str(e)[:400], None, NUMPY)
                out.write("result " + json.dumps({"name": case["name"], "failure": failure and asdict(failure)}) + "\n")
                if failure and not spec["all"]:
                    return


# ==== the child processes ===================================================================================


def run_child(args: list[str], timeout: float | None, own_group: bool = True) -> subprocess.CompletedProcess:
    """`python -m exercises.worker ARGS`, in a process group of its own (killed whole at the timeout: the device
    processes it starts too)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-m", "exercises.worker", *args], cwd=ROOT, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=own_group)  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def describe_exit(status: int, stderr: str) -> str:
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    last = next((x for x in reversed(stderr.strip().splitlines()) if x.strip()), "")
    return f"exit status {status}" + (f": {last[:200]}" if last else "")


# ==== grading one exercise ==================================================================================


@dataclass
class Context:
    exercise: Exercise
    source: Source
    splice: Splice | None = None
    quick: bool = False
    hidden: int | None = None
    notes: list[str] = field(default_factory=list)
    _hidden_kernels: list | None = None

    @property
    def chain_files(self) -> tuple[str, ...]:
        return QUICK_CHAINS if self.quick else ALL_CHAINS

    @property
    def kernel_files(self) -> tuple[str, ...]:
        return QUICK_KERNELS if self.quick else ALL_KERNELS

    def hidden_kernels(self) -> list[tuple[str, dict]]:
        if self._hidden_kernels is None:
            rngs = [random.Random(f"{self.hidden} kernel {i}") for i in range(30)]
            cases = [random_kernel(rng) for rng in rngs]
            self._hidden_kernels = [
                (f"hidden kernel {i} ({c['demo']} {'x'.join(map(str, c['sizes']))} [{c['target']}])", c)
                for i, c in enumerate(cases)
            ]
        return self._hidden_kernels

    @contextlib.contextmanager
    def splice_undone(self):
        """The project's own functions for a moment (kernel.py's answer to compare with)."""
        self.splice.undo()
        try:
            yield
        finally:
            self.splice.apply()


PARTS: dict[str, Callable[[Context], list[Part]]] = {
    "chains": chains_part,
    "numpy": numpy_part,
    "kernels": kernels_part,
    "vectors": vectors_part,
    "device": device_part,
}


def grade(
    ex: Exercise,
    source: Source,
    quick: bool = False,
    all_failures: bool = False,
    hidden: int | None = None,
    limit: int | None = None,
    max_failures: int | None = None,
) -> Verdict:
    """Grade `source`'s function as exercise `ex` in this process: every case of its parts (quick: the founders'
    corpus files only; limit: the first `limit` of each recorded part), stopping at the first failure unless
    all_failures (then at the max_failures-th, if given); hidden: a seed for hidden cases. The project's modules are
    as they were afterwards; a student's code that changed them gets an error."""
    verdict = Verdict(ex.number, ex.qualname)
    before = project_state()
    ctx = Context(ex, source, quick=quick, hidden=hidden)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            parts = [p for name in ex.parts for p in PARTS[name](ctx)]  # hidden cases drawn here, before the splice
            func, module = source.load()
            if changed := changes(before):
                raise SourceError(f"loading {os.path.basename(source.path)} changed {', '.join(changed[:3])}")
            ctx.splice = Splice(ex.file, ex.qualname, func, module)
            if limit is not None:
                parts = [p if p.hidden else Part(p.cases[:limit], p.hidden, p.device, p.note) for p in parts]
            with ctx.splice:
                _run_parts(ctx, parts, verdict, all_failures, max_failures)
    except SourceError as e:
        verdict.status, verdict.message = "error", str(e)
    finally:
        if changed := changes(before):
            restore(before)
            verdict.status, verdict.message = "error", f"your code changed the project's {', '.join(changed[:3])}"
        verdict.printed = printed.getvalue()[-4000:]
    verdict.notes += ctx.notes
    return verdict


def _run_parts(ctx: Context, parts: list[Part], verdict: Verdict, all_failures: bool, most: int | None) -> None:
    verdict.total = sum(len(p.cases) for p in parts if not p.hidden)
    verdict.hidden_total = sum(len(p.cases) for p in parts if p.hidden)
    for part in parts:
        results = part.device(all_failures) if part.device else ((n, _case(ctx, n, fn)) for n, fn in part.cases)
        for _, failure in results:
            if failure is None:
                if part.hidden:
                    verdict.hidden_passed += 1
                else:
                    verdict.passed += 1
                continue
            verdict.failures.append(failure)
            if failure.field == "not done":
                verdict.status = "not done" if verdict.status in ("pass", "not done") else verdict.status
            else:
                verdict.status = "fail"
            if not all_failures or len(verdict.failures) == most:
                return


def _case(ctx: Context, name: str, fn: Callable[[], Failure | None]) -> Failure | None:
    try:
        return fn()
    except NotImplementedError as e:
        if str(e).startswith(f"exercise {ctx.exercise.number} "):
            return Failure(name, "", "not done")
        return Failure(name, "", "raised", f"NotImplementedError: {e} ({where(e, ctx.source.path)})")
    except RecursionError as e:
        return Failure(name, "", "raised", f"RecursionError ({where(e, ctx.source.path)})")
    except Exception as e:  # noqa: BLE001 (a student's function may raise anything; a case it raises on fails)
        msg = str(e).splitlines()[0][:300] if str(e) else ""
        return Failure(name, "", "raised", f"{type(e).__name__}: {msg} ({where(e, ctx.source.path)})")


def _raise(e: BaseException) -> Callable[[], None]:
    def again() -> None:
        raise e

    return again


def wrong_answers(ex: Exercise) -> list[Source]:
    """The seeded wrong answers of an exercise: the functions of wrong/exNN.py (not its _helpers), each a Source."""
    import ast

    path = os.path.join(os.path.dirname(__file__), "wrong", f"ex{ex.number:02d}.py")
    tree = ast.parse(open(path).read())
    return [Source(path, n.name) for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
