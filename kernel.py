"""kernel.py: tinygrad 0.9.1's kernel optimizer in one readable file.

Part 1 is the optimizer, in the order data flows through it:

    helpers -> dtypes -> ops / AST -> symbolic indices -> View -> ShapeTracker
    -> Kernel (shape bookkeeping) -> OptOps (apply_opt) -> tensor cores -> heuristics -> targets

The appendix, after its banner, checks what comes in at the gates (the AST's nodes and Kernel(), View.create and the
movement ops, apply_opt): the rules where kernel.py is stricter than tinygrad (DIFFERENCES.md lists them).

A kernel is an AST of LazyOps whose leaves LOAD buffers through ShapeTrackers. The Kernel puts every buffer's
ShapeTracker on one common iteration shape, and each optimization but NOLOCALS and PADTO reshapes and permutes that
shape: an axis is split in two and one part moved to where it means "global", "local", "grouped", "loop" or
"unrolled" (the colours of `Kernel.colored_shape()`). An axis is *upcast* when one thread computes all of its values
itself, in registers, its loop unrolled: a loop transformation, not a type widening. `python kernel.py demo` shows it.

Only the standard library is imported.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import numbers
import operator
import os
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

# ==== helpers ===============================================================================================


def prod(xs: Iterable[int]) -> int: return functools.reduce(operator.mul, xs, 1)


def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))  # first occurrences, in order


def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]


def round_up(num: int, amt: int) -> int: return (num + amt - 1) // amt * amt


def partition(xs: Sequence[T], pred: Callable[[T], bool]) -> tuple[list[T], list[T]]:
    return [x for x in xs if pred(x)], [x for x in xs if not pred(x)]


def is_int(x: Any) -> bool:  # a size, axis or amount: a Python or numpy integer, never a bool
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def all_int(xs: Iterable[Any]) -> bool: return all(isinstance(x, int) for x in xs)


def all_same(items: Sequence[Any]) -> bool: return all(x == items[0] for x in items)


class KnobError(ValueError):
    """An environment knob (MV, TC, NOLOCALS, ...) set to something it can't take."""


KNOB_RANGES = {"TC": (0, 2), "TC_OPT": (0, 2)}  # the values they have (tinygrad reads any: DIFFERENCES.md)


def getenv(key: str, default: int = 0, minimum: int | None = None) -> int:
    """An integer knob from the environment (ASCII digits, a sign first), as tinygrad reads MV, NOLOCALS, TC, ... (unset
    or empty: default), at least `minimum` and in its KNOB_RANGES."""
    text, (low, high) = os.environ.get(key, "").strip(), KNOB_RANGES.get(key, (minimum, None))
    value = int(text) if re.fullmatch(r"[-+]?[0-9]+", text) else None if text else default
    if value is None or (low is not None and value < low) or (high is not None and value > high):
        want = "an integer" + f" >= {low}" * (low is not None) + f" and <= {high}" * (high is not None)
        raise KnobError(f"environment variable {key} must be {want}, got {key}={os.environ.get(key)!r}")
    return value


def get_contraction(old_shape: tuple[int, ...], new_shape: tuple[int, ...]) -> list[list[int]] | None:
    """Which axes of old_shape multiply into each axis of new_shape, or None if new_shape isn't a merge of old."""
    acc_old = list(itertools.accumulate(old_shape, operator.mul))
    acc_new = itertools.accumulate(new_shape, operator.mul)
    try:
        split = [acc_old.index(acc) + 1 if acc != 1 else 0 for acc in acc_new]
    except ValueError:
        return None
    return [list(range(st, ed)) for st, ed in zip([0] + split[:-1], split[:-1] + [len(old_shape)])]


def use_color(out=None) -> bool:
    """Colour only on a terminal (`out`, default stdout); NO_COLOR wins (no-color.org), FORCE_COLOR forces it."""
    return not os.environ.get("NO_COLOR") and (bool(os.environ.get("FORCE_COLOR")) or (out or sys.stdout).isatty())


def colored(text: Any, color: str | None) -> str:
    """Text in tinygrad's ANSI colour code (an UPPERCASE name: the bright variant), or plain unless use_color()."""
    if color is None or not use_color():
        return str(text)
    code = 30 + "black red green yellow blue magenta cyan white".split().index(color.lower()) + 60 * color.isupper()
    return f"\x1b[{code}m{text}\x1b[0m"


def ansistrip(s: str) -> str: return re.sub(r"\x1b\[(K|.*?m)", "", s)


def ansilen(s: str) -> int: return len(ansistrip(s))


# ==== dtypes ================================================================================================


@dataclass(frozen=True, order=True)
class DType:
    """A scalar element type (count is 1: no vector dtypes). `name` is the C name; `priority` orders promotion."""

    priority: int
    itemsize: int
    name: str
    fmt: str | None
    count: int

    def __repr__(self) -> str: return f"dtypes.{INVERSE_DTYPES_DICT.get(self.name, self.name)}"
    def scalar(self) -> DType: return self


@dataclass(frozen=True, repr=False)
class ImageDType(DType):
    """A 2D RGBA texture: `shape` is (height, width, 4); elements are computed as `base`."""

    shape: tuple[int, ...] = ()
    base: DType = None  # type: ignore[assignment]

    def scalar(self) -> DType: return self.base
    def __repr__(self) -> str: return f"dtypes.{self.name}({self.shape})"


class dtypes:
    """Every dtype of tinygrad 0.9.1, with its aliases."""

    bool = DType(0, 1, "bool", "?", 1)
    int8 = DType(1, 1, "char", "b", 1)
    uint8 = DType(2, 1, "unsigned char", "B", 1)
    int16 = DType(3, 2, "short", "h", 1)
    uint16 = DType(4, 2, "unsigned short", "H", 1)
    int32 = DType(5, 4, "int", "i", 1)
    uint32 = DType(6, 4, "unsigned int", "I", 1)
    int64 = DType(7, 8, "long", "l", 1)
    uint64 = DType(8, 8, "unsigned long", "L", 1)
    float16 = DType(9, 2, "half", "e", 1)
    bfloat16 = DType(10, 2, "__bf16", None, 1)
    float32 = DType(11, 4, "float", "f", 1)
    float64 = DType(12, 8, "double", "d", 1)

    half, float, double = float16, float32, float64
    uchar, ushort, uint, ulong = uint8, uint16, uint32, uint64
    char, short, int, long = int8, int16, int32, int64

    @staticmethod
    def imageh(shape: tuple[int, ...]) -> ImageDType:
        return ImageDType(100, 2, "imageh", "e", 1, shape=tuple(shape), base=dtypes.float32)

    @staticmethod
    def imagef(shape: tuple[int, ...]) -> ImageDType:
        return ImageDType(100, 4, "imagef", "f", 1, shape=tuple(shape), base=dtypes.float32)

    @staticmethod
    def is_float(x: DType) -> bool:
        return x.scalar() in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)

    @staticmethod
    def is_unsigned(x: DType) -> bool: return x.scalar() in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)

    @staticmethod
    def is_int(x: DType) -> bool:
        return x.scalar() in (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64) or dtypes.is_unsigned(x)


DTYPES_DICT: dict[str, DType] = {k: v for k, v in vars(dtypes).items() if isinstance(v, DType)}
INVERSE_DTYPES_DICT: dict[str, str] = {v.name: k for k, v in DTYPES_DICT.items()}
for _dt in DTYPES_DICT.values():  # a dtype can also be looked up by its C name: getattr(dtypes, "unsigned char")
    setattr(dtypes, _dt.name, _dt)
# the floats narrower than float32, computed in float registers: (significant bits, smallest normal exponent, largest)
SHORT_FLOATS: dict[DType, tuple[int, int, float]] = {dtypes.float16: (11, -14, 65504.0),
                                                     dtypes.bfloat16: (8, -126, 3.3895313892515355e38)}

# ==== ops: the kernel's AST =================================================================================


# tinygrad 0.9.1's members in its order, numbered from 1 as its `auto()` numbers them
UnaryOps = Enum("UnaryOps", "EXP2 LOG2 CAST BITCAST SIN SQRT NEG RECIP")  # A -> A, elementwise
BinaryOps = Enum("BinaryOps", "ADD MUL IDIV MAX MOD CMPLT CMPNE XOR SHR SHL")  # IDIV truncates; CMPs give bool
TernaryOps = Enum("TernaryOps", "WHERE MULACC")  # A, A, A -> A, elementwise
ReduceOps = Enum("ReduceOps", "SUM MAX")  # A -> B: the reduced axes (the arg) become 1
BufferOps = Enum("BufferOps", "LOAD CONST STORE")  # the leaves and the root: read a buffer or a constant, write
Op = UnaryOps | BinaryOps | TernaryOps | ReduceOps | BufferOps
# what doesn't keep f(0) == 0: PADTO of a reduce axis refuses them (and reduce_padding_changes finds MOD, NEG, ...)
UNSAFE_PAD_OPS = {UnaryOps.RECIP, UnaryOps.LOG2, UnaryOps.EXP2, BinaryOps.IDIV}


@dataclass(frozen=True)
class MemBuffer:
    """Buffer number `idx` of the kernel (0 is the output), read or written through the ShapeTracker `st`."""

    idx: int
    dtype: DType
    st: ShapeTracker

    def __post_init__(self) -> None: check_buffer(self)


@dataclass(frozen=True)
class ConstBuffer:
    """A constant broadcast to the shape of `st` (its mask can still zero out padding); a half or bfloat16 value is
    rounded as numpy's np.float16(x) rounds."""

    val: int | float | bool | Variable
    dtype: DType
    st: ShapeTracker

    def __post_init__(self) -> None: check_buffer(self)


@dataclass(frozen=True)
class LazyOp:
    """One node of the AST. Hashable, and compares by value (op, src and arg)."""

    op: Op
    src: tuple[LazyOp, ...] = ()
    arg: Any = None

    def __post_init__(self) -> None:
        check_lazyop(self)
        _ = self._hash, self.dtype  # now, from the sources' (known already): no recursion down a deep AST later

    @functools.cached_property
    def _hash(self) -> int: return hash((self.op, self.src, self.arg))
    def __hash__(self) -> int: return self._hash
    def __reduce__(self): return LazyOp, (self.op, self.src, self.arg)  # rebuilt: its hash is per process

    def __eq__(self, other: object) -> bool:
        pairs, seen = [(self, other)], set()  # a walk, not a recursion: each pair of shared nodes compared once
        while pairs:
            a, b = pairs.pop()
            if a is not b and (id(a), id(b)) not in seen:
                if not isinstance(b, LazyOp) or a._hash != b._hash or (a.op, a.arg) != (b.op, b.arg):
                    return False
                seen.add((id(a), id(b)))
                pairs += zip(a.src, b.src)  # (as many sources: the same op)
        return True

    def __repr__(self) -> str:  # each op written out once, then as `lazyops[n]` (its place in self.lazyops)
        place, written, out, todo = {x: n for n, x in enumerate(self.lazyops)}, set(), [], [self]
        while todo:  # depth first, as self.lazyops lists them
            if isinstance(x := todo.pop(), str) or x in written:
                out.append(x if isinstance(x, str) else f"lazyops[{place[x]}]")
                continue
            written.add(x)
            out.append(f"LazyOp({x.op}, src=(")
            parts = [part for src in x.src for part in (", ", src)][1:] + ["," if len(x.src) == 1 else ""]
            todo += reversed([*parts, f"), arg={x.arg})"])
        return "".join(out)

    @functools.cached_property
    def dtype(self) -> DType:
        if self.op in BufferOps:
            return self.arg.dtype
        if self.op in (UnaryOps.CAST, UnaryOps.BITCAST):
            return self.arg
        return dtypes.bool if self.op in (BinaryOps.CMPLT, BinaryOps.CMPNE) else self.src[-1].dtype

    @functools.cached_property
    def lazyops(self) -> list[LazyOp]:
        """This op and every op below it, each once, parents before children (depth first, sources in order)."""
        found, todo = {}, [self]
        while todo:
            if (x := todo.pop()) not in found:
                found[x] = None
                todo.extend(reversed(x.src))
        return list(found)

    def vars(self) -> list[Variable]:  # the symbolic variables of its shapes and constants, by name
        found = [x.arg.st.vars() for x in self.lazyops if x.op in BufferOps]
        consts = {x.arg.val for x in self.lazyops if x.op is BufferOps.CONST and isinstance(x.arg.val, Variable)}
        return sorted(set().union(*found, consts), key=lambda v: v.expr)


def walk_ast(x: LazyOp, fn: Callable[[LazyOp, list], Any], memo: dict, stop: Callable | None = None) -> Any:
    """fn(op, [its sources' values]) of x, sources first, each op once (memo keeps them in that order); under an op
    that `stop` accepts (fn(op, [])), nothing. A walk in a recursion's order, of any depth."""
    todo = [x]
    while todo:
        if (op := todo.pop()) in memo:
            continue
        srcs = () if stop and stop(op) else op.src
        if missing := [s for s in srcs if s not in memo]:
            todo += [op, *reversed(missing)]  # back to op once its sources are done
        else:
            memo[op] = fn(op, [memo[s] for s in srcs])
    return memo[x]


@functools.cache
def ordered_lazyops(op: LazyOp) -> list[LazyOp]:
    """op and every op below it, each once, sources before the ops that use them (the order they run in)."""
    walk_ast(op, lambda x, srcs: None, found := {})
    return list(found)


# ==== symbolic: index expressions with known bounds =========================================================
# An index is an integer expression of the loop variables idx0, idx1, ... Each node knows its smallest and largest
# value, and the constructors simplify with them (tinygrad 0.9.1's rules): a `% 8` of something in [0, 8) goes,
# `(a*8 + b) // 8` becomes `a + b//8` (just `a` when b < 8), like terms merge; real_strides() reads each stride off the
# result. A size may be a node (Variable("i", 1, 64), tinygrad's `sint`): a comparison of nodes is a node whose truth
# is "possibly", which only steers choices; what folds an index or a mask asks always_lt: at EVERY value?


class Node:
    """Base class of index expressions. `min`/`max` bound its value; `render()` prints tinygrad's Python text."""

    def render(self, ops: dict | None = None, ctx: str | None = None) -> str:
        """tinygrad's Python text (`(1+a)`, `(a//2)`), or the spelling `ops` gives each node type (render.py's C);
        ctx "DEBUG" adds the variables' ranges, "REPR" is repr()."""
        return (ops if ops is not None else render_python)[type(self)](self, ops, ctx)

    def vars(self) -> set[Variable]: return set()

    def substitute(self, var_vals: dict[Variable, Node]) -> Node:  # each Variable of var_vals by its node
        return self  # a constant; every other kind of node substitutes into its parts

    def unbind(self) -> tuple[Node, int | None]:  # over unbound variables (a bound Variable's value dropped)
        return self.substitute({v: v.unbind()[0] for v in self.vars() if v._val is not None}), None

    # -- identity: two nodes are equal when they print the same (with variable ranges) --
    @functools.cached_property
    def key(self) -> str: return self.render(ctx="DEBUG")
    def __repr__(self) -> str: return self.render(ctx="REPR")
    def __str__(self) -> str: return f"<{self.key}>"
    def __hash__(self) -> int: return hash(self.key)
    def __bool__(self) -> bool: return not (self.max == self.min == 0)
    def __eq__(self, other: object) -> bool: return self.key == other.key if isinstance(other, Node) else NotImplemented

    # -- comparisons build LtNodes; their truth value is bool(node): False only when surely false --
    def __lt__(self, b: Node | int) -> Node: return create_node(LtNode(self, b))
    def __le__(self, b: Node | int) -> Node: return self < (b + 1)
    def __gt__(self, b: Node | int) -> Node: return (-self) < (-b)
    def __ge__(self, b: Node | int) -> Node: return (-self) < (-b + 1)

    # -- arithmetic --
    def __neg__(self) -> Node: return self * -1
    def __add__(self, b: Node | int) -> Node: return Node.sum([self, NumNode(b) if isinstance(b, int) else b])
    __radd__ = __add__
    def __sub__(self, b: Node | int) -> Node: return self + -b
    def __rsub__(self, b: int) -> Node: return -self + b

    def __mul__(self, b: Node | int) -> Node:
        if b == 0:
            return NumNode(0)
        if b == 1:
            return self
        return create_node(MulNode(self, b.b if isinstance(b, NumNode) else b))

    def __rmul__(self, b: int) -> Node: return self * b
    def __rfloordiv__(self, b: int) -> Node: return NumNode(b) // self
    def __rmod__(self, b: int) -> Node: return NumNode(b) % self

    def __floordiv__(self, b: Node | int, factoring_allowed: bool = True) -> Node:
        if isinstance(b, NumNode):
            return self.__floordiv__(b.b, factoring_allowed)
        if isinstance(b, Node):  # by a symbolic size
            return _divide_by_node(self, b, DivNode)
        if b == 0:
            raise ZeroDivisionError(f"{self} // 0")
        if b < 0:
            return (self * -1).__floordiv__(-b, factoring_allowed)
        if b == 1:
            return self
        if (low := self.min if isinstance(self.min, int) else lower_bound(self)) < 0:
            # keep the numerator non-negative: a//b == (a - k*b)//b + k, with k*b <= a.min
            offset = low // b
            return (self + -offset * b).__floordiv__(b, factoring_allowed=False) + offset
        return create_node(DivNode(self, b))

    def __mod__(self, b: Node | int) -> Node:
        if isinstance(b, NumNode):
            return self % b.b
        if isinstance(b, Node):  # by a symbolic size
            return _divide_by_node(self, b, ModNode)
        if b <= 0:
            raise ValueError(f"modulo by {b} is not supported")
        if b == 1:
            return NumNode(0)
        if isinstance(self.max, int):
            if self.min >= 0 and self.max < b:
                return self  # already in range
            if self.min // b == self.max // b:
                return self - b * (self.min // b)  # never wraps: a constant shift
        if (low := self.min if isinstance(self.min, int) else lower_bound(self)) < 0:
            # C's % of a negative number isn't Python's: shift it to >= 0 first; the shifted terms then reduce modulo b,
            # unless a term's factor is symbolic (its sign stays): then the shift stays too
            shifted = self - (low // b) * b
            before = self.nodes if isinstance(self, SumNode) else [self]
            if isinstance(self.max, int) and not any(isinstance(t, MulNode) and isinstance(t.b, Node) for t in before):
                terms = shifted.nodes if isinstance(shifted, SumNode) else [shifted]
                if lower_bound(Node.sum([_mod_term(x, b) for x in terms])) >= 0:  # (else it would shift again)
                    return shifted % b
            return shifted if upper_bound(shifted) < b else create_node(ModNode(shifted, b))
        return create_node(ModNode(self, b))

    @staticmethod
    def sum(nodes: list[Node]) -> Node:
        """Add nodes, flattening nested sums, merging like terms (x*2 + x*3 -> x*5) and folding constants."""
        nodes = [x for x in nodes if x.max or x.min]
        if len(nodes) == 1:
            return nodes[0]
        coeffs: dict[Node, Node | int] = {}
        const = 0
        for node in SumNode(nodes).flat_components:
            if type(node) is NumNode:
                const += node.b
            elif type(node) is MulNode:
                coeffs[node.a] = coeffs.get(node.a, 0) + node.b
            else:
                coeffs[node] = coeffs.get(node, 0) + 1
        terms: list[Node] = [MulNode(a, c) if c != 1 else a for a, c in coeffs.items() if c != 0]
        if const:
            terms.append(NumNode(const))
        return create_node(SumNode(terms)) if len(terms) > 1 else terms[0] if terms else NumNode(0)

    @staticmethod
    def ands(nodes: list[Node]) -> Node:
        """Logical and of 0/1 conditions; always-true ones are dropped, an always-false one wins."""
        if len(nodes) == 1:
            return nodes[0]
        if any(not x for x in nodes):
            return NumNode(0)
        nodes = [x for x in nodes if x.min != x.max]
        return create_node(AndNode(nodes)) if len(nodes) > 1 else nodes[0] if nodes else NumNode(1)


class Variable(Node):
    """A value in [min, max]: a loop index, or a size known at run time (bound with `bind(val)`); [n, n] is n."""

    def __new__(cls, expr: str, nmin: int, nmax: sint):
        if not (isinstance(nmin, int) and 0 <= nmin <= nmax):
            raise ValueError(f"invalid Variable {expr} with range [{nmin}, {nmax}]")
        return NumNode(nmin) if nmin == nmax else super().__new__(cls)

    def __init__(self, expr: str, nmin: int, nmax: sint):
        self.expr, self.min, self.max = expr, nmin, nmax
        self._val: int | None = None

    def __getnewargs__(self) -> tuple[str, int, sint]: return (self.expr, self.min, self.max)

    @property
    def val(self) -> int:
        if self._val is None:
            raise ValueError(f"Variable {self.expr} isn't bound: bind(val) it first")
        return self._val

    def bind(self, val: int) -> Variable:
        """A new variable bound to val, in its range (tinygrad binds in place: here one in a shape never changes)."""
        if self._val is not None:
            raise ValueError(f"cannot bind {val} to {self}: already bound to {self._val}")
        if not (isinstance(val, int) and not isinstance(val, bool) and self.min <= val <= self.max):
            raise ValueError(f"cannot bind {val!r} to {self.expr}: its range is [{self.min}, {self.max}]")
        ret = Variable(self.expr, self.min, self.max)
        ret._val = val
        return ret

    def unbind(self) -> tuple[Variable, int]: return Variable(self.expr, self.min, self.max), self.val
    def vars(self) -> set[Variable]: return {self}
    def substitute(self, var_vals: dict[Variable, Node]) -> Node: return var_vals.get(self, self)


class NumNode(Node):
    """An integer constant. Compares equal to the int it holds."""

    def __init__(self, num: int):
        if not isinstance(num, int):
            raise ValueError(f"NumNode needs an int, got {num!r}")
        self.b: int = num
        self.min = self.max = num

    def bind(self, val: int) -> NumNode:
        if self.b != val:
            raise ValueError(f"cannot bind {val} to {self}")
        return self

    def __mul__(self, b: Node | int) -> Node: return NumNode(self.b * b) if isinstance(b, int) else b * self.b
    def __eq__(self, other: object) -> bool: return self.b == other
    def __hash__(self) -> int: return hash(self.b)


def create_node(node: Node) -> Node:
    """A node whose bounds pin it to one value is that value."""
    if not node.min <= node.max:
        raise ValueError(f"min {node.min} > max {node.max} in {type(node).__name__}")
    return NumNode(node.min) if node.min == node.max else node


class OpNode(Node):
    """A node `a OP b`, b an int or a node. Each kind's get_bounds() gives its (min, max)."""

    def __init__(self, a: Node, b: Node | int):
        self.a, self.b = a, b
        self.min, self.max = (x.b if isinstance(x, NumNode) else x for x in self.get_bounds())

    def vars(self) -> set[Variable]: return self.a.vars() | (self.b.vars() if isinstance(self.b, Node) else set())

    def substitute(self, var_vals: dict[Variable, Node]) -> Node:
        b = self.b if isinstance(self.b, int) else self.b.substitute(var_vals)
        return self.build(self.a.substitute(var_vals), b)  # built again: it simplifies with the values


class LtNode(OpNode):
    """1 if a < b else 0."""

    build = staticmethod(lambda a, b: create_lt_node(a, b))

    def get_bounds(self) -> tuple[int, int]:
        a, b = self.a, self.b
        if a == b:
            return (0, 0)
        if isinstance(b, int) and isinstance(a.max, int) and isinstance(a.min, int):  # numbers: the common case
            return (1, 1) if a.max < b else (0, 0) if a.min >= b else (0, 1)
        # decided only if it holds at every value of the variables (a node's bound may itself be a node)
        return (1, 1) if always_lt(a, b) else (0, 0) if always_lt(b, a + 1) else (0, 1)


class MulNode(OpNode):
    build = staticmethod(operator.mul)

    def __mul__(self, b: Node | int) -> Node: return self.a * (self.b * b)  # two multiplies are one

    def __floordiv__(self, b: Node | int, factoring_allowed: bool = False) -> Node:
        if self.b % b == 0:
            return self.a * (self.b // b)
        if b % self.b == 0 and lower_bound(self.b) > 0:
            return self.a // (b // self.b)
        return Node.__floordiv__(self, b, factoring_allowed)

    def __mod__(self, b: Node | int) -> Node:
        factor = self.b % b
        if (isinstance(b, Node) or isinstance(self.b, Node)) and not isinstance(factor, NumNode):
            return Node.__mod__(self, b)  # with a symbolic size, (a*c) % b is only simpler when c % b is a number
        return Node.__mod__(self.a * factor, b)

    def get_bounds(self) -> tuple[int, sint]:
        if isinstance(self.b, int):
            lo, hi = self.a.min * self.b, self.a.max * self.b
            return (lo, hi) if self.b >= 0 else (hi, lo)
        if lower_bound(self.a) >= 0:  # a >= 0 (an index, a size): times a node b of one sign
            if lower_bound(self.b) >= 0:
                return self.a.min * self.b.min, self.a.max * self.b.max
            if upper_bound(self.b) <= 0:
                return self.a.max * self.b.min, self.a.min * self.b.max
        # signs that may change: the extremes of the four corners, as numbers
        a_lo, a_hi, b_lo, b_hi = lower_bound(self.a), upper_bound(self.a), lower_bound(self.b), upper_bound(self.b)
        corners = (a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi)
        return min(corners), max(corners)


class DivNode(OpNode):
    """a // b for a >= 0 and an int b or a symbolic size b (C's `/` then computes the same)."""

    build = staticmethod(operator.floordiv)

    def __floordiv__(self, b: Node | int, factoring_allowed: bool = False) -> Node:
        return self.a // (self.b * b)  # two divides are one

    def get_bounds(self) -> tuple[int, sint]:
        if isinstance(self.b, int):
            return self.a.min // self.b, self.a.max // self.b
        return lower_bound(self.a) // max(upper_bound(self.b), 1), upper_bound(self.a) // max(lower_bound(self.b), 1)


class ModNode(OpNode):
    """a % b for a >= 0 and an int b or a symbolic size b (C's `%` then computes the same)."""

    build = staticmethod(operator.mod)

    def __mod__(self, b: Node | int) -> Node:
        if isinstance(b, int) and isinstance(self.b, int) and self.b % b == 0:
            return self.a % b  # (a % 8) % 4 == a % 4
        return Node.__mod__(self, b)

    def __floordiv__(self, b: Node | int, factoring_allowed: bool = True) -> Node:
        if self.b % b == 0:
            return (self.a // b) % (self.b // b)  # (a % 8) // 4 == (a // 4) % 2
        return Node.__floordiv__(self, b, factoring_allowed)

    def get_bounds(self) -> tuple[int, sint]:
        lo, hi = self.a.min, self.a.max
        if isinstance(self.b, Node) or hi - lo >= self.b or (lo != hi and lo % self.b >= hi % self.b):
            return (0, self.b - 1)  # by a symbolic size, or it wraps around
        return lo % self.b, hi % self.b


class RedNode(Node):
    """A node over a list of nodes; each kind's get_bounds() gives its (min, max)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.min, self.max = (x.b if isinstance(x, NumNode) else x for x in self.get_bounds())

    def vars(self) -> set[Variable]: return set().union(*[x.vars() for x in self.nodes])


class SumNode(RedNode):
    def get_bounds(self) -> tuple[int, sint]: return sum(x.min for x in self.nodes), sum(x.max for x in self.nodes)

    @property
    def flat_components(self) -> list[Node]:
        return [y for x in self.nodes for y in (x.flat_components if isinstance(x, SumNode) else [x])]

    @functools.cache  # noqa: B019 (nodes are immutable values; the index algebra asks the same things often)
    def __mul__(self, b: Node | int) -> Node: return Node.sum([x * b for x in self.nodes])  # distribute

    @functools.cache  # noqa: B019
    def __floordiv__(self, b: Node | int, factoring_allowed: bool = True) -> Node:
        if self == b:
            return NumNode(1)
        if isinstance(b, Node):  # by a node: split off the terms it divides exactly
            exact, rest = partition(self.flat_components, lambda x: x % b == 0)
            if (whole := create_node(SumNode([x // b for x in exact]))) != 0:
                return whole + create_node(SumNode(rest)) // b
            return Node.__floordiv__(self, b, False)
        if b == 1:
            return self
        if not factoring_allowed:
            return Node.__floordiv__(self, b, factoring_allowed)
        # split off the terms b divides exactly; then divide the rest by a common factor first if there is one
        divided, rest = [], []
        gcd, divisor = b, 1
        for x in self.flat_components:
            if type(x) in (NumNode, MulNode) and x.b % b == 0:
                divided.append(x // b)
                continue
            if type(x) is NumNode and (whole := x.b // b):
                divided.append(NumNode(whole))
                x = NumNode(x.b - b * whole)
            rest.append(x)
            if type(x) in (NumNode, MulNode) and isinstance(x.b, int):
                gcd = math.gcd(gcd, x.b)
                if type(x) is MulNode and divisor == 1 and b % x.b == 0:
                    divisor = x.b
            else:
                gcd = 1  # a term with no number to share
        if (factor := gcd if gcd > 1 else divisor) > 1:
            return Node.sum(divided) + Node.sum(rest).__floordiv__(factor) // (b // factor)
        return Node.sum(divided) + Node.__floordiv__(Node.sum(rest), b)

    @functools.cache  # noqa: B019
    def __mod__(self, b: Node | int) -> Node:
        if self == b:
            return NumNode(0)
        if isinstance(b, Node) and lower_bound(self) >= 0 and always_lt(self, b):
            return self  # already below b
        return Node.__mod__(Node.sum([_mod_term(x, b) for x in self.nodes]), b)

    def substitute(self, var_vals: dict[Variable, Node]) -> Node:
        return Node.sum([x.substitute(var_vals) for x in self.nodes])


def _mod_term(x: Node, b: Node | int) -> Node:
    """A term of a sum reduced modulo b ((a*8 + 3) % 4 is (a*0 + 3) % 4); by a symbolic b only where that's a number."""
    reduced = x % b if type(x) in (NumNode, MulNode) else x
    return x if isinstance(b, Node) and not isinstance(reduced, NumNode) else reduced


class AndNode(RedNode):
    """a and b and ... of 0/1 conditions."""

    def get_bounds(self) -> tuple[int, sint]: return min(x.min for x in self.nodes), max(x.max for x in self.nodes)

    def substitute(self, var_vals: dict[Variable, Node]) -> Node:
        return Node.ands([x.substitute(var_vals) for x in self.nodes])  # (two or more: an always-false one wins)


def create_lt_node(lhs: Node, b: Node | int) -> Node:
    """lhs < b, simplified: constants move to the right, and `a*8 + c < 16` with 0 <= c < 8 becomes `a < 2`."""
    if isinstance(lhs, SumNode):
        if isinstance(b, int):
            b -= sum(x.b for x in lhs.nodes if isinstance(x, NumNode))
            lhs = Node.sum([x for x in lhs.nodes if not isinstance(x, NumNode)])
            nodes = lhs.nodes if isinstance(lhs, SumNode) else [lhs]
            # (a product of two variables has no number to share: it stays in the rest)
            muls, other = partition(nodes, lambda x: type(x) is MulNode and type(x.b) is int and x.b > 0 and x.max >= b)
            if muls:
                gcd = math.gcd(b, *(x.b for x in muls))
                rest = Node.sum(other)
                if lower_bound(rest) >= 0 and upper_bound(rest) < gcd:  # at every value, not only possibly
                    lhs, b = Node.sum([m // gcd for m in muls]), b // gcd
        return create_node(LtNode(lhs, b)) if isinstance(lhs, SumNode) else create_lt_node(lhs, b)
    if isinstance(lhs, MulNode) and not isinstance(b, Node) and not isinstance(lhs.b, Node) and lhs.b != -1:
        sign = 1 if lhs.b > 0 else -1
        return create_node(LtNode(lhs.a * sign, (b + abs(lhs.b) - 1) // abs(lhs.b)))
    return create_node(LtNode(lhs, b))


def create_ge_node(lhs: Node, b: Node | int) -> Node: return create_lt_node(-lhs, -b + 1)


# a symbolic int: what a size, stride or offset may be
sint = int | Node


def is_sint(x: Any) -> bool:
    """Is x a size/argument a shape may hold: a Python or numpy integer (not a bool), or a symbolic Node?"""
    return type(x) is int or isinstance(x, Node) or is_int(x)  # the common cases first: an ABC check is slow


def sym_render(a: sint, ops: dict | None = None, ctx: str | None = None) -> str:
    return str(a) if isinstance(a, int) else a.render(ops, ctx)


def sym_infer(a: sint | float, var_vals: dict[Variable, int] | None) -> int | float:
    """The value of a (an int, or a node of the variables in var_vals)."""
    ret = a.substitute({k: NumNode(v) for k, v in (var_vals or {}).items()}) if isinstance(a, Node) else a
    if isinstance(ret, Node) and not isinstance(ret, NumNode):
        raise ValueError(f"sym_infer: {a} has no value with {var_vals}")
    return ret.b if isinstance(ret, NumNode) else ret


def _render_variable(x: Variable, ops: dict | None, ctx: str | None) -> str:
    bound = x._val is not None
    if ctx == "DEBUG":
        return f"{x.expr}[{x.min}-{x.max}{'=' + str(x._val) if bound else ''}]"
    if ctx == "REPR":
        return f"Variable('{x.expr}', {x.min}, {x.max})" + (f".bind({x._val})" if bound else "")
    return x.expr


def render_mulnode(x: MulNode, ops: dict | None, ctx: str | None) -> str:
    # a product of two variables is written in name order, as tinygrad does
    if isinstance(x.a, Variable) and isinstance(x.b, Variable) and x.a.expr and x.b.expr and x.b.expr < x.a.expr:
        return f"({sym_render(x.b, ops, ctx)}*{x.a.render(ops, ctx)})"
    return f"({x.a.render(ops, ctx)}*{sym_render(x.b, ops, ctx)})"


# tinygrad's text of each node type (Python syntax)
render_python: dict[type, Callable[..., str]] = {
    Variable: _render_variable,
    NumNode: lambda x, ops, ctx: f"NumNode({x.b})" if ctx == "REPR" else str(x.b),
    MulNode: render_mulnode,
    DivNode: lambda x, ops, ctx: f"({x.a.render(ops, ctx)}//{sym_render(x.b, ops, ctx)})",
    ModNode: lambda x, ops, ctx: f"({x.a.render(ops, ctx)}%{sym_render(x.b, ops, ctx)})",
    LtNode: lambda x, ops, ctx: f"({x.a.render(ops, ctx)}<{sym_render(x.b, ops, ctx)})",
    SumNode: lambda x, ops, ctx: f"({'+'.join(sorted(y.render(ops, ctx) for y in x.nodes))})",
    AndNode: lambda x, ops, ctx: f"({' and '.join(sorted(y.render(ops, ctx) for y in x.nodes))})",
}


# ==== View: one strided, offset, masked window onto a flat buffer ===========================================
# A View maps an index (i0, i1, ...) of `shape` to offset + sum(i_k * strides[k]); with a mask, element i is valid only
# where mask[k][0] <= i_k < mask[k][1] on every axis, and invalid ones read as 0 (padding without a copy).
Ranges = tuple[tuple[sint, sint], ...]  # a (begin, end) pair per axis: a mask, or a window on each axis


def canonicalize_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """A size-1 axis is never moved along: its stride is 0 (a constant node is its int, as tinygrad's cache has it)."""
    return tuple(0 if s == 1 else st.b if isinstance(st, NumNode) else st for s, st in zip(shape, strides))


@functools.cache
def strides_for_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major (C order) strides of a contiguous shape."""
    strides = tuple(itertools.accumulate(reversed(shape[1:]), operator.mul, initial=1))[::-1]
    return canonicalize_strides(shape, strides)


@functools.cache
def _merge_dims(shape: tuple[int, ...], strides: tuple[int, ...], mask: Ranges | None) -> tuple[tuple[int, ...], ...]:
    """Merge runs of axes that walk memory as one axis: (merged size, stride, size counted without expands)."""
    if not shape:
        return ()
    ret = [(shape[0], strides[0], shape[0] if strides[0] else 0)]
    merging = (mask[0][1] - mask[0][0] == 1) if mask is not None else shape[0] == 1
    for i, (s, st) in enumerate(zip(shape[1:], strides[1:]), start=1):
        last_s, last_st, last_real = ret[-1]
        if s == 1:
            continue
        if merging or last_st == s * st:
            ret[-1] = (last_s * s, st, (s if merging else last_real * s) if st else 0)
        else:
            ret.append((s, st, s if st else 0))
        merging = (mask[i][1] - mask[i][0] == 1) if mask is not None else s == 1
    return tuple(ret)


@functools.cache
def _reshape_mask(view: View, new_shape: tuple[int, ...]) -> tuple[Ranges | None, bool]:
    """The mask of `view` on new_shape, and True if a mask can't be expressed there (a mask cut by the reshape)."""
    if view.mask is None:
        return None, False
    if not all_int(flatten(view.mask)):
        return view.mask, True  # a symbolic mask can't be split
    empty = ((0, 0),) * len(new_shape)
    if any(e - b < 1 for b, e in view.mask):
        return empty, False  # (View.create makes every axis of such a view (0, 0))
    new_mask: list[tuple[int, int]] = []
    r_masks, r_shape, r_new_shape = reversed(view.mask), reversed(view.shape), reversed(new_shape)
    curr_stride, old_dim, new_dim, mask = 1, next(r_shape, 1), next(r_new_shape, 1), next(r_masks, (0, 1))
    while len(new_mask) < len(new_shape):
        (lo, hi), next_stride = mask, new_dim * curr_stride
        if old_dim >= next_stride:  # the old axis splits into this new axis and more
            if old_dim == next_stride:  # exact: the mask carries over
                new_mask.append((lo // curr_stride, (hi - 1) // curr_stride + 1))
                curr_stride, old_dim, new_dim, mask = 1, next(r_shape, 1), next(r_new_shape, 1), next(r_masks, (0, 1))
            else:  # only if the split doesn't cut through the masked range
                cuts = (lo % next_stride or hi % next_stride) and lo // next_stride != (hi - 1) // next_stride
                if cuts or old_dim % next_stride != 0:
                    return view.mask, True
                new_mask.append((lo % next_stride // curr_stride, (hi - 1) % next_stride // curr_stride + 1))
                curr_stride, new_dim = next_stride, next(r_new_shape, 1)
        else:  # several old axes merge into this new one: only if the mask stays one contiguous range
            next_mask = next(r_masks, (0, 1))
            if mask != (0, old_dim) and next_mask[1] - next_mask[0] != 1:
                return view.mask, True
            mask, old_dim = (next_mask[0] * old_dim + lo, (next_mask[1] - 1) * old_dim + hi), old_dim * next(r_shape, 1)
    for mask in r_masks:  # leading axes of size 1 in the old shape must be unmasked
        if mask != (0, 1):
            return empty, False
    return tuple(reversed(new_mask)), False


def un1d(shape: tuple[int, ...], offs: int) -> list[int]:
    """The multi-index of flat position offs in a contiguous `shape`."""
    result = []
    for stride in strides_for_shape(shape):
        here = offs // stride if stride else 0
        result.append(here)
        offs -= here * stride
    return result


def _sint(x: Any) -> sint:
    """A size as an int (a numpy integer or a constant node becomes one) or the Node it is."""
    if isinstance(x, NumNode):
        return x.b
    return x if isinstance(x, Node) or not is_sint(x) else int(x)


@dataclass(frozen=True)
class View:
    """A strided, offset, optionally masked view of a flat buffer (built by `View.create`); its methods cache."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    mask: Ranges | None
    contiguous: bool

    def __post_init__(self) -> None: check_view(self)

    @functools.cache
    def size(self) -> int: return prod(x.max if isinstance(x, Node) else x for x in self.shape)  # symbolic: its max

    @staticmethod
    def create(
        shape: Sequence[int], strides: Sequence[int] | None = None, offset: int = 0, mask: Sequence | None = None
    ) -> View:
        """A View in canonical form (equal views compare equal): size-1 axes and a mask's one-index axes get stride 0
        (the index in the offset), a mask of everything is dropped, an empty one zeroes everything."""
        shape, mask = check_create_args(tuple(shape), strides, offset, mask)
        strides = tuple(map(_sint, strides)) if strides is not None else None
        mask = tuple((_sint(b), _sint(e)) for b, e in mask) if mask is not None else None
        return View._create(shape, strides, _sint(offset), mask)

    @staticmethod
    @functools.cache
    def _create(shape: tuple[int, ...], strides: tuple[int, ...] | None, offset: int, mask: Ranges | None) -> View:
        strides = canonicalize_strides(shape, strides) if strides else strides_for_shape(shape)
        if 0 in shape:
            return View(shape, (0,) * len(shape), 0, None, True)
        if mask is not None and all(m == (0, s) for m, s in zip(mask, shape)):
            mask = None
        if mask and any(single := [not (b + 1 < e) for b, e in mask]):
            if any(not (b < e) for b, e in mask):
                strides, offset, mask = (0,) * len(shape), 0, ((0, 0),) * len(shape)
            offset += sum(strides[i] * mask[i][0] for i, one in enumerate(single) if one)
            strides = tuple(0 if one else st for st, one in zip(strides, single))
        contiguous = offset == 0 and mask is None and strides == strides_for_shape(shape)
        return View(shape, strides, offset, mask, contiguous)

    # -- the movement ops; each returns a new View --
    def _resize(self, arg: Ranges, mask: Ranges | None = None, op: str = "shrink") -> View:
        """Window [b, e) on each axis (b < 0 or e past the end: padding); a symbolic mask is clipped by sym_min/sym_max,
        which must be decided at every value (a View can't hold a min() of two nodes)."""
        offset = sum(st * b for st, (b, _) in zip(self.strides, arg))
        if self.mask:
            what = f"{op} of {self.shape} by {arg}: its mask"

            def clip(x: sint, size: sint) -> sint: return sym_max(0, sym_min(x, size, what), what)  # x within [0, size]

            moved = tuple((clip(mb - b, e - b), clip(me - b, e - b)) for (mb, me), (b, e) in zip(self.mask, arg))
            if mask:  # a pad's mask too: where both hold
                moved = tuple((sym_max(b1, b2, what), sym_min(e1, e2, what)) for (b1, e1), (b2, e2) in zip(moved, mask))
            mask = moved
        return View.create(tuple(_sint(e - b) for b, e in arg), self.strides, self.offset + offset, mask)

    @functools.cache
    def pad(self, arg: tuple[tuple[int, int], ...]) -> View:
        """Add arg[k] = (before, after) invalid elements around axis k."""
        check_movement_arg("pad", self, arg)
        if not any(b or e for b, e in arg):
            return self
        window = tuple((-b, s + e) for s, (b, e) in zip(self.shape, arg))
        mask = tuple((b, s + b) for s, (b, _) in zip(self.shape, arg))
        return self._resize(window, mask, "pad")

    @functools.cache
    def shrink(self, arg: tuple[tuple[int, int], ...]) -> View:
        """Keep [begin, end) of each axis."""
        check_movement_arg("shrink", self, arg)
        return self._resize(arg)

    @functools.cache
    def expand(self, new_shape: tuple[int, ...]) -> View:
        """Broadcast axes of size 1 to new sizes (stride 0: every index reads the same element)."""
        check_movement_arg("expand", self, new_shape)
        if 0 in self.shape:
            return View.create(new_shape)
        mask = None
        if self.mask:

            def expanded(m: tuple[sint, sint], ns: sint) -> tuple[sint, sint]:
                # the one element of a size-1 axis is valid or not: all of the new axis is, or none of it
                if m == (0, 1) or (not all_int(m) and always_lt(m[0], 1) and always_lt(0, m[1])):
                    return (0, ns)
                if all_int(m) or always_lt(m[1], 1) or always_lt(0, m[0]) or always_lt(m[1], m[0] + 1):
                    return (0, 0)
                raise ValueError(f"expand: the mask {m} of a size-1 axis may or may not hold (shape {self.shape})")

            mask = tuple(expanded(m, ns) if s != ns else m for m, s, ns in zip(self.mask, self.shape, new_shape))
        return View.create(new_shape, self.strides, self.offset, mask)

    @functools.cache
    def permute(self, axis: tuple[int, ...]) -> View:
        """Reorder the axes: new axis k is old axis axis[k]."""
        check_movement_arg("permute", self, axis)
        mask = tuple(self.mask[a] for a in axis) if self.mask is not None else None
        return View.create(tuple(self.shape[a] for a in axis), tuple(self.strides[a] for a in axis), self.offset, mask)

    @functools.cache
    def stride(self, mul: tuple[int, ...]) -> View:
        """Take every mul[k]-th element of axis k; a negative mul walks the axis backwards (a flip)."""
        check_movement_arg("stride", self, mul)
        strides = tuple(z * m for z, m in zip(self.strides, mul))
        new_shape = tuple((s + abs(m) - 1) // abs(m) for s, m in zip(self.shape, mul))
        offset = sum((s - 1) * z for s, z, m in zip(self.shape, self.strides, mul) if m < 0)
        mask = None
        if self.mask is not None:  # a flipped axis's mask is flipped too; then each bound is divided, rounding up
            flipped = [(mb, me) if m > 0 else (s - me, s - mb) for (mb, me), s, m in zip(self.mask, self.shape, mul)]
            mask = tuple(((b + abs(m) - 1) // abs(m), (e + abs(m) - 1) // abs(m)) for (b, e), m in zip(flipped, mul))
        return View.create(new_shape, strides, self.offset + offset, mask)

    @functools.cache
    def reshape(self, new_shape: tuple[int, ...]) -> View | None:
        """The same elements in a new shape, or None when one View can't express it (the caller stacks a View)."""
        if self.shape == new_shape:
            return self
        check_movement_arg("reshape", self, new_shape)
        if 0 in self.shape or self.contiguous:
            return View.create(new_shape)
        if new_shape == () and self.mask and any(b == e for b, e in self.mask):
            return None
        if all_int(self.shape) and not all(type(x) is int for x in new_shape):
            # a symbolic shape of the same sizes, axis for axis (checked): the strides stay
            return View(new_shape, self.strides, self.offset, self.mask, self.contiguous)
        # walk the merged axes from the right, handing each a run of new axes whose sizes multiply to it
        strides: list[sint] = []
        r_new_shape = reversed(new_shape)
        for merged_dim, new_stride, real_dim in reversed(_merge_dims(self.shape, self.strides, self.mask)):
            acc = 1
            # (<= and != rather than <: for symbolic sizes, "acc < dim" may be undecided when acc is dim)
            while acc <= merged_dim and acc != merged_dim and (new_dim := next(r_new_shape, None)):
                strides.append(new_stride)
                if new_dim != 1:
                    acc *= new_dim
                    new_stride *= new_dim if acc < real_dim else 0
            if acc != merged_dim:
                return None
        strides += [0] * (len(new_shape) - len(strides))
        new_mask, cut = _reshape_mask(self, new_shape)
        if cut:
            return None
        sizes = tuple(e - b for b, e in new_mask) if new_mask else new_shape  # an axis masked to one index: stride 0
        new_strides = canonicalize_strides(sizes, tuple(reversed(strides)))
        old_start = sum(b * st for (b, _), st in zip(self.mask, self.strides)) if self.mask else 0
        new_start = sum(b * st for (b, _), st in zip(new_mask, new_strides)) if new_mask else 0
        return View.create(new_shape, new_strides, self.offset + (old_start - new_start), new_mask)

    @functools.cache
    def vars(self) -> set[Variable]:
        parts = (*self.shape, *self.strides, self.offset, *flatten(self.mask or ()))
        return set().union(*[x.vars() for x in parts if isinstance(x, Node)])

    @functools.cache
    def minify(self) -> View:
        """The same view with as few axes as possible."""
        try:
            return self.reshape(tuple(x[0] for x in _merge_dims(self.shape, self.strides, self.mask))) or self
        except ValueError:  # symbolic sizes whose product is written another way ((1+j)*i*j, (1+j)*(i*j)): as it is
            return self

    @functools.cache
    def unbind(self) -> tuple[View, dict[Variable, int]]:
        """The view over unbound variables, and the value each bound one had."""
        bound = {v: v.unbind() for v in self.vars() if v._val is not None}  # {bound variable: (unbound, value)}
        unbound = {v: uv for v, (uv, _) in bound.items()}
        return self.map_sizes(lambda x: x if isinstance(x, int) else x.substitute(unbound)), _bindings(bound.values())

    def map_sizes(self, f: Callable[[sint], sint]) -> View:
        """This view with f applied to every number of its shape, strides, offset and mask."""
        mask = tuple((f(b), f(e)) for b, e in self.mask) if self.mask is not None else None
        return View.create(tuple(map(f, self.shape)), tuple(map(f, self.strides)), f(self.offset), mask)

    @functools.cache
    def __add__(self, vm1: View) -> View | None:
        """Merge `self` (the older view, vm2) with `vm1` (applied on top of it) into one View, or None."""
        vm2 = self
        if vm2.contiguous or 0 in vm1.shape or (vm1.mask and any(not (b < e) for b, e in vm1.mask)):
            return vm1  # vm2 changes nothing; or vm1 reads nothing (empty, or all masked off: View.create zeroed it)
        if vm1.contiguous and vm1.size() == vm2.size() and (ret := vm2.reshape(vm1.shape)) is not None:
            return ret  # (vm2 itself where the shapes are the same)
        if vm1.mask:
            merged = vm2 + vm1.shrink(vm1.mask)
            return merged and merged.pad(tuple((b, s - e) for (b, e), s in zip(vm1.mask, vm1.shape)))
        # where does each step along vm1's axes land in vm2's index space?
        origin = un1d(vm2.shape, vm1.offset)
        terms: list[list[tuple[int, int]]] = [[] for _ in origin]
        strides = [0] * len(vm1.shape)
        for d1, st in enumerate(vm1.strides):
            if st == 0:
                continue
            for d2, (o, s1) in enumerate(zip(origin, un1d(vm2.shape, vm1.offset + st))):
                if (s1 := s1 - o) == 0:
                    continue
                terms[d2].append((d1, s1))
                strides[d1] += s1 * vm2.strides[d2]

        # group vm2's axes (from the right) until each group's index stays inside it, merging only when needed
        idxs = _idx_vars(vm1.shape)
        merged_size, merged_term = 1, NumNode(0)
        extents: list[tuple[int, Node]] = []
        for term, s, o in zip(reversed(terms), reversed(vm2.shape), reversed(origin)):
            merged_term += Node.sum([idxs[d1] * (s1 * merged_size) for d1, s1 in term]) + o * merged_size
            merged_size *= s
            if not (merged_term >= merged_size) and not (merged_term < 0):
                extents.append((merged_size, merged_term))
                merged_size, merged_term = 1, NumNode(0)
        if merged_term:
            return None
        if (vm2_shape := tuple(s for s, _ in reversed(extents))) != vm2.shape:
            return (reshaped := vm2.reshape(vm2_shape)) and reshaped + vm1

        if vm2.mask:
            # project vm2's mask back onto vm1's axes
            newb, newe, bad = [0] * len(vm1.shape), list(vm1.shape), False
            for d2, ((b, e), o, (_, t)) in enumerate(zip(vm2.mask, origin, reversed(extents))):
                if not (t.min < b or t.max >= e):
                    continue  # this index stays inside vm2's mask
                term = terms[d2]
                if not term and newe and all_int((o, b, e)):
                    newe[0] = 0  # vm1 never moves this index, which is outside vm2's mask: nothing is valid
                elif len(term) != 1 or not all_int((o, b, e, term[0][1], newe[term[0][0]])):
                    bad = True  # the mask can't be said on one axis of vm1
                else:
                    d1, s1 = term[0]
                    newb[d1] = max(newb[d1], math.ceil((b - o if s1 > 0 else e - o - 1) / s1))
                    newe[d1] = min(newe[d1], (b - o if s1 < 0 else e - o - 1) // s1 + 1)
            if any(b != 0 or e != s for b, e, s in zip(newb, newe, vm1.shape)):
                # part of vm1 is masked off: merge again with that mask on vm1
                return vm2 + View.create(vm1.shape, vm1.strides, vm1.offset, tuple(zip(newb, newe)))
            if bad:
                return None
        return View.create(vm1.shape, tuple(strides), sum(o * s for o, s in zip(origin, vm2.strides)) + vm2.offset)


def _bindings(pairs: Iterable[tuple[Variable, int]]) -> dict[Variable, int]:
    """{variable: value} from (variable, value) pairs, in name and value order; a ValueError where one has two."""
    ret: dict[Variable, int] = {}
    for var, val in sorted(pairs, key=lambda pair: (pair[0].expr, pair[1])):
        if ret.setdefault(var, val) != val:
            raise ValueError(f"{var.expr} is bound to both {ret[var]} and {val}")
    return ret


# ==== ShapeTracker: a stack of Views ========================================================================
# Movement ops change the last View; a reshape it can't express (merging two axes of a transposed buffer) stacks a new
# one: an index goes through the top view, then is unravelled through each older one in turn.


def _expr_view(view: View, idxs: Sequence[Node], valid: Node | None = None) -> tuple[Node, Node]:
    """The flat index and the validity condition of `view` at the multi-index idxs."""
    offset = NumNode(view.offset) if isinstance(view.offset, int) else view.offset
    iexpr = [offset] + [idx * st for idx, sh, st in zip(idxs, view.shape, view.strides) if sh != 1 and st != 0]
    vexpr = [valid] if valid is not None else []
    for idx, (b, e) in zip(idxs, view.mask or ()):
        vexpr += [create_ge_node(idx, b), create_lt_node(idx, e)]
    return Node.sum(iexpr), Node.ands(vexpr)


def _idx_vars(shape: tuple[int, ...]) -> list[Node]:
    """The loop variables idx0, idx1, ... (a size of 0 or 1 has only the index 0; a symbolic size ends at a node)."""
    return [Variable(f"idx{i}", 0, s - 1 if isinstance(s, Node) else max(s - 1, 0)) for i, s in enumerate(shape)]


@dataclass(frozen=True)
class ShapeTracker:
    """Movement ops on a buffer without copying it: `views[-1]` is the shape you see, `views[0]` the memory."""

    views: tuple[View, ...]

    @staticmethod
    def from_shape(shape: tuple[sint, ...]) -> ShapeTracker: return ShapeTracker((View.create(tuple(shape)),))

    def __add__(self, st: ShapeTracker) -> ShapeTracker:
        """`st` applied on top of this one: its views stacked onto ours, merging one view at a time."""
        ret = self
        for v in st.views:
            ret = ShapeTracker(ret.views + (v,)).simplify()
        return ret

    @property
    def contiguous(self) -> bool: return len(self.views) == 1 and self.views[0].contiguous
    def vars(self) -> set[Variable]: return set().union(*[v.vars() for v in self.views])
    @property
    def shape(self) -> tuple[int, ...]: return self.views[-1].shape
    @property
    def size(self) -> int: return self.views[-1].size()

    def expr_idxs(self, idxs: Sequence[Node] | None = None) -> tuple[Node, Node]:
        """(flat index, valid) as symbolic expressions of the loop variables idxs (default idx0, idx1, ...)."""
        return self._default_exprs() if idxs is None else self._exprs(list(idxs))

    @functools.cache  # a ShapeTracker is an immutable value: the heuristics ask the same questions many times
    def _default_exprs(self) -> tuple[Node, Node]: return self._exprs(_idx_vars(self.shape))

    def _exprs(self, idxs: list[Node]) -> tuple[Node, Node]:
        idx, valid = _expr_view(self.views[-1], idxs)
        for view in reversed(self.views[:-1]):
            if valid.max == 0:
                return NumNode(-1), valid
            view = view.minify()
            acc, unravelled = 1, []
            for d in reversed(view.shape):
                unravelled.append((idx // acc) % d)
                acc *= d
            idx, valid = _expr_view(view, unravelled[::-1], valid)
        return idx, valid

    @functools.cache
    def real_strides(self, ignore_valid: bool = False) -> tuple[int | None, ...]:
        """Each axis's stride in the flat index: 0 if it doesn't move it, None under a div or mod, or masked."""
        if len(self.views) == 1 and self.views[-1].mask is None:
            return self.views[-1].strides
        idxs = _idx_vars(self.shape)
        idx, valid = self.expr_idxs()
        ret: list[int | None] = [None] * len(self.shape)
        bad_vars: set = set()
        for term in idx.nodes if isinstance(idx, SumNode) else [idx]:
            var, stride = (term.a, term.b) if isinstance(term, MulNode) else (term, 1)
            if var in idxs:
                ret[idxs.index(var)] = stride
            else:
                bad_vars |= var.vars()
        idx_vars, valid_vars = idx.vars(), valid.vars()
        for i, v in enumerate(idxs):
            if v in bad_vars or (v in valid_vars and not ignore_valid):
                ret[i] = None
            elif v not in idx_vars:
                ret[i] = 0
        return tuple(ret)

    def unit_stride_axes(self, ignore_valid: bool = False) -> list[int]:
        return [i for i, st in enumerate(self.real_strides(ignore_valid)) if st == 1]

    def axis_is_masked(self, axis: int) -> bool:
        """Does the validity condition depend on this axis?"""
        return f"idx{axis}" in [v.expr for v in self.expr_idxs()[1].vars()]

    def simplify(self) -> ShapeTracker:
        """Merge the top two views while they can be expressed as one."""
        if len(self.views) >= 2 and (merged := self.views[-2] + self.views[-1]) is not None:
            return ShapeTracker(self.views[:-2] + (merged,)).simplify()
        return self

    def real_size(self) -> int:
        """How many elements of the underlying buffer must exist: one past the largest index ever read."""
        idx, valid = self.expr_idxs()
        return upper_bound(idx) + 1 if valid and 0 not in self.shape else 0  # a symbolic largest index at its largest

    @property
    def var_vals(self) -> dict[Variable, int]:
        """{unbound variable: value} of every bound variable in the views."""
        return _bindings(v.unbind() for v in self.vars())

    def unbind(self) -> tuple[ShapeTracker, dict[Variable, int]]:
        """The ShapeTracker over unbound variables, and the value each bound one had."""
        views, var_vals = zip(*[v.unbind() for v in self.views])
        return ShapeTracker(tuple(views)), _bindings(pair for d in var_vals for pair in d.items())

    def at_values(self, var_vals: dict[Variable, int] | None = None) -> ShapeTracker:
        """This ShapeTracker at the variables' values (var_vals, else as bound): ValueError names one with none."""
        st, vals = self.unbind()
        vals.update(var_vals or {})
        if missing := sorted({v.expr for v in st.vars()} - {v.expr for v in vals}):
            raise ValueError(f"no value for the variable(s) {', '.join(missing)} of {self}")
        return ShapeTracker(tuple(v.map_sizes(lambda x: sym_infer(x, vals)) for v in st.views))

    def indices(self, var_vals: dict[Variable, int] | None = None):
        """(idx, valid): numpy arrays of `self.shape`, the flat index each element reads and whether it is valid
        (padding isn't; its idx is 0). What a ShapeTracker means, in numpy: each view maps to a flat index, unravelled
        into the view below, down to memory; a symbolic one at var_vals."""
        import numpy as np  # (only here: kernel.py itself needs nothing but the standard library)
        if self.vars():
            return self.at_values(var_vals).indices()

        def accumulate(acc, x, op):  # acc op x, in place once acc has the full broadcast shape
            if isinstance(acc, np.ndarray) and acc.shape == np.broadcast_shapes(acc.shape, np.shape(x)):
                return op(acc, x, out=acc)
            return op(acc, x)

        bound = max(abs(v.offset) + sum(abs(x) * s for x, s in zip(v.strides, v.shape)) + v.size() for v in self.views)
        dtype = np.int32 if bound < 2**31 else np.int64  # int32 where every index fits: half the memory traffic
        idxs = np.ix_(*[np.arange(s, dtype=dtype) for s in self.shape])  # each axis's index, along its own axis
        valid = None  # None: every element so far is valid
        views = [self.views[-1]] + [v.minify() for v in self.views[-2::-1]]  # top first
        for view, below in zip(views, views[1:] + [None]):
            idx = np.asarray(view.offset, dtype=dtype)  # the numpy version of _expr_view
            for i, st, m in zip(idxs, view.strides, view.mask or [None] * len(view.shape)):
                if st != 0:
                    idx = accumulate(idx, i if st == 1 else i * dtype(st), np.add)
                if m is not None:
                    mask = (i >= m[0]) & (i < m[1])
                    valid = mask if valid is None else accumulate(valid, mask, np.logical_and)
            if valid is not None:  # an invalid element reads index 0: in range of any view below
                idx = np.multiply(idx, valid, out=idx if idx.shape == valid.shape else None)
            if below is not None:  # the flat index, unravelled into the view below's shape (as np.unravel_index)
                weights = [prod(below.shape[d + 1 :]) for d in range(len(below.shape))]
                idxs = [idx // w % s if d else idx // w for d, (w, s) in enumerate(zip(weights, below.shape))]
        return np.broadcast_to(idx, self.shape), np.broadcast_to(np.True_ if valid is None else valid, self.shape)

    # -- the movement ops act on the top view (movement_arg: the argument as a tuple, checked for its kind) --
    def pad(self, arg: tuple[tuple[sint, sint], ...]) -> ShapeTracker:  # one (before, after) pair per axis
        return ShapeTracker(self.views[:-1] + (self.views[-1].pad(movement_arg("pad", self.shape, arg, True)),))

    def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> ShapeTracker:  # one (begin, end) pair per axis
        return ShapeTracker(self.views[:-1] + (self.views[-1].shrink(movement_arg("shrink", self.shape, arg, True)),))

    def expand(self, new_shape: tuple[sint, ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].expand(movement_arg("expand", self.shape, new_shape)),))

    def permute(self, axis: tuple[int, ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].permute(movement_arg("permute", self.shape, axis)),))

    def stride(self, mul: tuple[int, ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].stride(movement_arg("stride", self.shape, mul)),))

    def reshape(self, new_shape: tuple[sint, ...]) -> ShapeTracker:  # a reshape the top view can't express: a new View
        new_shape = movement_arg("reshape", self.shape, new_shape)
        if (new_view := self.views[-1].reshape(new_shape)) is not None:
            return ShapeTracker(self.views[:-1] + (new_view,))
        return ShapeTracker(self.views + (View.create(new_shape),))


# ==== Kernel: every buffer's ShapeTracker on one common shape ===============================================
# One ShapeTracker per buffer (k.sts[i] for k.bufs[i]), all of one rank. `full_shape` is the iteration space (an
# input of the reduce's shape); the output's is the same with the reduced axes 1. Every optimization is a reshape +
# permute of all of them at once, so the bookkeeping is a few counters that say which axes are which (and colour them;
# BLUE, bright, after NOLOCALS; demo.py's COLOR_LEGEND says what each becomes in OpenCL C):
#
#   | global dims | local dims | group (reduce-local) dims | reduce loops | upcasted dims    |
#   0             global_dims  first_reduce                               shape_len - upcasted
#     blue         cyan         green (white: kept)          red          yellow (magenta: reduced)


class OptOps(Enum):
    """The optimizations (apply_opt): each splits an axis (amount 0: the whole axis) and moves a piece of it, but for
    NOLOCALS (the global axes launch as threads) and PADTO (an axis padded to a multiple)."""

    TC, UPCAST, UPCASTMID, UNROLL, LOCAL, GROUP, GROUPTOP, NOLOCALS, PADTO = range(1, 10)  # auto()'s values

    def __lt__(self, x: OptOps) -> bool: return self.value < x.value


class KernelOptError(Exception):
    """An Opt that doesn't apply to this kernel. The kernel is left exactly as it was."""


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise KernelOptError(msg)


@dataclass(frozen=True, order=True)
class Opt:
    """One optimization: `op` on `axis` by `amt` (0: the whole axis). UNROLL counts its axis from the first reduce
    axis, GROUP/GROUPTOP from the first one not yet grouped, the others from 0 (real_axis translates)."""

    op: OptOps
    axis: int | None = None
    amt: int | None = None

    def __post_init__(self) -> None:
        for name in ("axis", "amt"):  # a numpy integer is an int: stored as one, the opt prints and compares as one
            if is_int(value := getattr(self, name)) and type(value) is not int:
                object.__setattr__(self, name, int(value))

    def __repr__(self) -> str: return f"Opt(op={self.op}, axis={self.axis}, amt={self.amt})"
    def __str__(self) -> str: return f"{self.op.name}:{self.axis}:{self.amt}" if self.axis is not None else self.op.name

    @staticmethod
    def parse(text: str) -> Opt:
        """'UPCAST:0:4' -> Opt(UPCAST, 0, 4); 'NOLOCALS' -> Opt(NOLOCALS)."""
        op, *rest = text.upper().split(":")
        if op in OptOps.__members__ and len(rest) == 2 * (op != "NOLOCALS"):  # NOLOCALS alone, other ops with 2 ints
            if all(re.fullmatch(r"-?\d+", x) for x in rest):
                return Opt(OptOps[op], *map(int, rest))
        ops = ", ".join(o.name for o in OptOps)
        raise ValueError(f"can't parse opt {text!r}: want OP:AXIS:AMT with OP one of {ops} and AXIS, AMT integers "
                         "(NOLOCALS alone)")

    def real_axis(self, k: Kernel) -> int:
        if self.axis is None:
            return -1
        if self.op is OptOps.UNROLL:
            return k.first_reduce + self.axis
        if self.op in (OptOps.GROUP, OptOps.GROUPTOP):
            return k.first_reduce + k.group_for_reduces + self.axis
        return self.axis


@dataclass(frozen=True)
class TensorCore:
    """A matrix unit, D = A * B + C with A (M x K), B (K x N) on a warp of threads: dims is (N, M, K); threads the
    (dim, amount) splits of N (0) or M (1) that become local axes (thread_local_*: where each keeps its elements)."""

    dims: tuple[int, int, int]
    dtype_in: DType
    dtype_out: DType
    threads: list[tuple[int, int]]
    thread_local_aliases: list[list[list[int]]]
    thread_local_sizes: list[list[int]]

    def __str__(self) -> str:
        return "_".join(["WMMA"] + [str(d) for d in self.dims] + [self.dtype_in.name, self.dtype_out.name])

    def steps(self) -> list[tuple[OptOps, int, int]]:
        """The opts that shape a kernel for this core, (op, N 0 / M 1 / K 2, amount): unroll K, upcast what the warp's
        threads don't cover of N and M, a LOCAL for each of `threads`."""
        threads = [prod(amt for d, amt in self.threads if d == i) for i in range(2)]
        upcasts = [(OptOps.UPCAST, i, self.dims[i] // threads[i]) for i in range(2) if self.dims[i] > threads[i]]
        return [(OptOps.UNROLL, 2, self.dims[2])] + upcasts + [(OptOps.LOCAL, d, amt) for d, amt in self.threads]


@dataclass
class TensorCoreOptions:
    """Where the tensor core's N, M, K axes are in the kernel's shape (and whether N and M still exist)."""

    axes: tuple[int, ...]
    axes_exist: tuple[bool, ...]
    axis_pads: tuple[tuple[int, int], ...]

    def fix_axes(self, removed_axis: int) -> None:
        """An axis of size 1 was removed: shift the N and M axes after it, and forget one that was removed."""
        axes, exist = list(self.axes), list(self.axes_exist)
        for d in (i for i in range(2) if exist[i]):
            if removed_axis < axes[d]:
                axes[d] -= 1
            elif removed_axis == axes[d]:
                exist[d] = False
        self.axes, self.axes_exist = tuple(axes), tuple(exist)


@dataclass
class Target:
    """What a device offers the optimizer (the fields of tinygrad 0.9.1's Renderer)."""

    device: str
    supports_float4: bool = True
    has_local: bool = True
    has_shared: bool = True
    global_max: tuple[int, ...] | None = (0x8FFFFFFF,) * 3
    local_max: tuple[int, ...] | None = (0x8FFFFFFF,) * 3
    shared_max: int = 32768
    tensor_cores: list[TensorCore] = field(default_factory=list)

    @property
    def tc(self) -> int: return getenv("TC", 1)  # read where it is used, as tinygrad's: importing reads no environment
    @property
    def tc_opt(self) -> int: return getenv("TC_OPT", 0)


@dataclass
class Decision:
    """What a branch of the heuristics computed (tinygrad's names and values) and `step`, how many opts the kernel
    had then: the opts applied from that step to the next decision's are what the branch did (Kernel._weigh)."""

    heuristic: str
    weighed: dict[str, Any]
    step: int


@dataclass(frozen=True)
class LocalBuffer:
    """A buffer in local (shared) memory, as alias_buffer adds (runtime.py declares a grouped reduce's `temp`)."""

    name: str
    size: int
    dtype: DType = dtypes.float32


class Kernel:
    """The optimizer's view of one kernel, built from its STOREs: `Kernel(*ast, opts=TARGETS["opencl"])`. Make
    `k.decisions` a list before running the heuristics to have them record what they weighed (demo.py's --explain)."""

    def __init__(self, *ast: LazyOp, opts: Target | None = None):
        self.opts = check_kernel(ast, opts)
        self.ast = ast
        self.lazyops = flatten(op.lazyops for op in ast)
        # every reduce op once, children before parents (verify_lazyop allows sibling reduces only)
        self.reduceops = dedup(x for out in ast for x in ordered_lazyops(out) if x.op in ReduceOps)
        self.vars: list[Variable] = flatten(x.vars() for x in ast)  # the symbolic variables of the shapes
        self.outbufs = [x.arg for x in ast]  # the outputs first (idx 0, 1, ...), then every LOAD and CONST once
        loads = dedup(x.arg for x in self.lazyops if x.op in (BufferOps.LOAD, BufferOps.CONST))
        self.bufs: list[MemBuffer | ConstBuffer | LocalBuffer] = self.outbufs + loads
        # the full shape comes from the first buffer the first reduce op reads (it has the reduce axes at full size)
        self.earlybufs = [x.arg for r in self.reduceops for x in r.lazyops if x.op in BufferOps]
        self.full_buf_index = self.bufs.index(self.earlybufs[0]) if self.earlybufs else 0
        self.sts: list[ShapeTracker] = [x.st for x in self.bufs]  # type: ignore[union-attr]
        axes = list(enumerate(zip(self.full_shape, self.output_shape)))  # the reduce axes move to the end
        self.reshape_and_permute(None, [i for i, (s, n) in axes if s == n] + [i for i, (s, n) in axes if s != n])
        self.applied_opts: list[Opt] = []
        self.group_for_reduces = self.upcasted = self.local_dims = 0  # the counters of the diagram above
        self.dont_use_locals = False
        self.tensor_core: TensorCore | None = None
        self.tensor_core_opts: TensorCoreOptions | None = None
        self.bufs_for_tensor_core: dict[LazyOp, tuple[int, int]] = {}  # each reduce's two multiplied buffers, for TC
        self.local_alias: dict[LazyOp, dict[int, LocalBuffer]] = defaultdict(dict)  # alias_buffer's
        self.decisions: list[Decision] | None = None  # None: the heuristics record nothing
        self.simplify_ones()
        self.simplify_merge_adjacent()

    def copy(self) -> Kernel:
        """An independent copy: optimizing it doesn't touch this kernel (local buffers belong to a rendering)."""
        ret = copy.copy(self)
        ret._restore(self._state())  # its own copies of everything an opt changes
        ret.bufs = [x for x in self.bufs if not isinstance(x, LocalBuffer)]
        ret.sts, ret.local_alias = self.sts[: len(ret.bufs)], defaultdict(dict)
        ret.decisions = None if self.decisions is None else list(self.decisions)
        return ret

    # -- the state an opt changes, so a rejected opt can put it back --
    OPT_STATE = ("sts", "bufs", "applied_opts", "group_for_reduces", "upcasted", "local_dims", "dont_use_locals")
    OPT_STATE += ("tensor_core", "tensor_core_opts", "bufs_for_tensor_core")

    def _state(self) -> dict[str, Any]: return {name: copy.copy(getattr(self, name)) for name in self.OPT_STATE}
    def _restore(self, state: dict[str, Any]) -> None: self.__dict__.update(state)

    # -- shape bookkeeping --
    @property
    def reduceop(self) -> LazyOp | None: return self.reduceops[0] if self.reduceops else None
    @property
    def output_shape(self) -> tuple[int, ...]: return self.sts[0].shape
    @property
    def full_shape(self) -> tuple[int, ...]: return self.sts[self.full_buf_index].shape
    @property
    def shape_len(self) -> int: return len(self.sts[0].shape)
    @property
    def full_unupcasted_shape(self) -> tuple[int, ...]: return self.full_shape[: self.shape_len - self.upcasted]

    @property
    def first_reduce(self) -> int:
        """The first axis (before the upcasted ones) where the output has size 1 but the full shape doesn't."""
        n = self.shape_len - self.upcasted
        return next((i for i, (x, y) in enumerate(zip(self.sts[0].shape[:n], self.full_shape[:n])) if x != y), n)

    @property
    def global_dims(self) -> int: return self.first_reduce - self.local_dims

    @property
    def upcast_in_mid_reduce_axes(self) -> list[int]:
        fr = self.first_reduce
        return [j for j in range(fr, fr + self.group_for_reduces) if self.full_shape[j] == self.sts[0].shape[j]]

    def colors(self) -> list[str]:
        """The colour of each axis of full_shape (the diagram above)."""
        fr, up, mid = self.first_reduce, self.shape_len - self.upcasted, self.upcast_in_mid_reduce_axes
        colors = ["BLUE" if self.dont_use_locals else "blue"] * self.global_dims + ["cyan"] * self.local_dims
        colors += ["white" if i in mid else "green" for i in range(fr, fr + self.group_for_reduces)]
        colors += ["red"] * (up - (fr + self.group_for_reduces))
        colors += ["magenta" if s != o else "yellow" for s, o in zip(self.full_shape[up:], self.sts[0].shape[up:])]
        return colors

    def colored_shape(self, pad: int | None = None, dense: bool = False) -> str:
        """full_shape with each axis in its colour (plain text under NO_COLOR)."""
        sizes = [f"{s:4d}" if isinstance(s, int) and not dense else s for s in self.full_shape]  # a Node: <i[1-64]>
        ret = " ".join(colored(s, c) for s, c in zip(sizes, self.colors()))
        return ret + " " * (pad - ansilen(ret)) if pad else ret

    def float4_axis(self, i: int) -> list[int]:
        """Upcasted axes (counted from the first upcasted one) where buffer i is contiguous in chunks of 4."""
        up = self.shape_len - self.upcasted
        return [x - up for x in self.sts[i].unit_stride_axes() if x >= up and self.sts[i].shape[x] % 4 == 0]

    def upcasted_axis(self, i: int) -> list[tuple[int, int | None, bool]]:
        """(size, stride in buffer i, is it a reduce axis) of each upcasted axis."""
        up = self.shape_len - self.upcasted
        check(all_int(self.sts[i].shape[up:]), f"cannot upcast a symbolic amount {self.sts[i].shape[up:]}")
        reduced = [x != y for x, y in zip(self.sts[0].shape[up:], self.full_shape[up:])]
        return list(zip(self.sts[i].shape[up:], self.sts[i].real_strides()[up:], reduced))

    # -- the members tinygrad 0.9.1's linearizer and search use (render.py renders without them) --
    @property
    def membufs(self) -> list[MemBuffer]: return [x for x in self.bufs if isinstance(x, MemBuffer)]  # global memory

    def shape_offsets(self, i: int) -> Iterable[tuple[int, ...]]:  # the upcasted axes' indices, the last's first
        upcasted = self.sts[i].shape[self.shape_len - self.upcasted :][::-1]
        return itertools.product(*[range(s) for s in upcasted]) if self.upcasted > 0 else [()]

    def acc_offsets(self, i: int) -> list[int]:
        """Each upcasted element's accumulator: row-major over the upcast axes, a reduce axis counted as size 1 (its
        elements share a register)."""
        ax = self.upcasted_axis(i)[::-1]
        strides = strides_for_shape(tuple(1 if r else s for s, _, r in ax))
        return [sum(t) for t in itertools.product(*[[y * st for y in range(s)] for (s, _, _), st in zip(ax, strides)])]

    def get_float4_upcast_dim(self, i: int) -> list[int]:
        """The upcasted axes buffer i walks with stride 1, where the target can load float4 (half, float, images)."""
        dtype, up = self.bufs[i].dtype, self.shape_len - self.upcasted
        if not self.opts.supports_float4 or not (dtype in (dtypes.float, dtypes.half) or isinstance(dtype, ImageDType)):
            return []
        return [x for x in self.sts[i].unit_stride_axes() if x >= up and self.sts[i].shape[x] > 1]

    def alias_buffer(self, op: LazyOp, i: int, pattern: list[int]) -> None:
        """A local-memory copy of buffer i (tensor-core operands): pattern-0 axes not stored, the others in order."""
        if len(pattern) != len(self.sts[i].shape):
            raise ValueError(f"alias_buffer needs a pattern entry per axis of {self.sts[i].shape}, got {pattern}")
        bst, real_strides = 1, self.sts[i].real_strides()
        shp, stride = [(s if p != 0 else 1) for s, p in zip(self.sts[i].shape, pattern)], [0] * len(pattern)
        for j in sorted((j for j, p in enumerate(pattern) if p > 0 and real_strides[j] != 0), key=pattern.__getitem__):
            stride[j] = bst
            bst *= shp[j]
        self.sts.append(ShapeTracker((View.create(tuple(shp), tuple(stride)),)))
        self.bufs.append(LocalBuffer(name=f"ldata{i}", size=self.sts[-1].size))
        self.local_alias[op][i] = self.bufs[-1]  # type: ignore[assignment]

    # -- the moves every optimization is made of --
    def reshape_and_permute(self, new_shape_fxn: Callable | None, axis: Sequence[int] | None) -> None:
        """Reshape (by a function of each buffer's shape) and then permute every buffer's ShapeTracker."""
        if new_shape_fxn is not None:
            self.sts = [st.reshape(tuple(new_shape_fxn(st.shape))) for st in self.sts]
        if axis is not None:
            self.sts = [st.permute(tuple(axis)) for st in self.sts]

    def upcast(self) -> None:
        check(self.full_shape[-1] != 1, "can't upcast a dimension with size 1")
        self.upcasted += 1

    def shift_to(self, axis: int, amount: int, top: bool = False, insert_before: int | None = None) -> None:
        """Split `axis` into (size/amount, amount), or (amount, size/amount) with top, and move the `amount` part just
        before axis `insert_before` (default: to the end)."""
        insert_before = self.shape_len if insert_before is None else insert_before
        move_axis = axis if top else axis + 1
        if move_axis < insert_before:
            insert_before += 1

        def split(x: tuple[int, ...]) -> list[int]:
            parts = ([amount, x[axis] // amount] if top else [x[axis] // amount, amount]) if x[axis] > 1 else [1, 1]
            return list(x[:axis]) + parts + list(x[axis + 1 :])

        order = [i for i in range(insert_before) if i != move_axis] + [move_axis]
        order += [i for i in range(insert_before, self.shape_len + 1) if i != move_axis]
        self.reshape_and_permute(split, order)

    def simplify_ones(self) -> bool:
        """Drop axes that have size 1 in every buffer. True if any was dropped."""
        if self.shape_len == 0:
            return False
        ones = [s == 1 for s in self.full_shape]
        self.local_dims -= sum(ones[self.first_reduce - self.local_dims : self.first_reduce])
        self.upcasted -= sum(ones[self.shape_len - self.upcasted :])
        self.reshape_and_permute(lambda shape: [x for i, x in enumerate(shape) if not ones[i]], None)
        return any(ones)

    def simplify_merge_adjacent(self) -> None:
        """Merge neighbouring axes every buffer walks as one, never across the first reduce axis (nor an image output's
        own axes)."""
        if self.shape_len == 0:
            return
        shapes, strides = [x.shape for x in self.sts], [x.real_strides() for x in self.sts]
        if isinstance(self.bufs[0].dtype, ImageDType):
            # a fake buffer whose strides only merge within each image axis (height, width, 4)
            if groups := get_contraction(self.output_shape, self.bufs[0].dtype.shape):
                fake = [strides_for_shape(tuple(self.output_shape[x] for x in g)) for g in groups]
                shapes.append(self.output_shape)
                strides.append(tuple(flatten(fake)))
        merged = [[(s[0], st[0])] for s, st in zip(shapes, strides)]
        for i in range(1, len(shapes[0])):
            mergeable = i != self.first_reduce and all(
                st[i] is not None and ((st[i] != 0 and ret[-1][1] == s[i] * st[i]) or (st[i] == 0 and ret[-1][1] == 0))
                for s, st, ret in zip(shapes, strides, merged)
            )
            for ret, s, st in zip(merged, shapes, strides):
                if mergeable:
                    ret[-1] = (ret[-1][0] * s[i], st[i])
                else:
                    ret.append((s[i], st[i]))
        self.sts = [st.reshape(tuple(size for size, _ in m)) for st, m in zip(self.sts, merged)]  # not the fake one

    # ==== OptOps: apply_opt =================================================================================

    def apply_opt(self, opt: Opt, append_opt: bool = True) -> None:
        """Apply one optimization, or raise KernelOptError saying why it doesn't apply (changing nothing)."""
        check_opt(opt, append_opt)
        state = self._state()
        try:
            self._apply_opt(opt, append_opt)
        except KernelOptError:
            self._restore(state)
            raise

    def _apply_opt(self, opt: Opt, append_opt: bool) -> None:
        check(0 not in self.full_shape, f"the kernel has no elements (shape {self.full_shape}): no opt applies")
        uses_locals = opt.op in (OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.UPCASTMID)
        check(not (self.dont_use_locals and uses_locals), f"not using locals: after NOLOCALS, no {opt.op.name}")
        if opt.op is OptOps.TC:
            check(not self.applied_opts, f"tensor core opts must be first: {len(self.applied_opts)} applied already")
            why = f"the {self.opts.device} target has none, and TC is {self.opts.tc}"
            check((use_tensor_cores := self.opts.tc) == 2 or len(self.opts.tensor_cores) > 0,
                  f"must have tensor cores or TC=2: {why}")
            why = self._no_tensor_core(use_tensor_cores)
            check(self._apply_tc_opt(use_tensor_cores, opt.axis, opt.amt), f"no tensor core available: {why}")
            self.applied_opts.append(opt)
            return
        axis, amt = self._opt_axis_amount(opt)
        grouping = opt.op in (OptOps.GROUP, OptOps.GROUPTOP)
        if self.reduceop and (grouping or (self.group_for_reduces and opt.op not in (OptOps.NOLOCALS, OptOps.PADTO))):
            self._check_shared_memory(amt)
        {OptOps.LOCAL: self._opt_local, OptOps.GROUP: self._opt_group,
         OptOps.GROUPTOP: functools.partial(self._opt_group, top=True), OptOps.UNROLL: self._opt_unroll,
         OptOps.UPCAST: self._opt_upcast, OptOps.UPCASTMID: self._opt_upcastmid, OptOps.NOLOCALS: self._opt_nolocals,
         OptOps.PADTO: self._opt_padto}[opt.op](axis, amt)
        if append_opt:
            self.applied_opts.append(opt)
        if self.simplify_ones() and self.tensor_core_opts:
            self.tensor_core_opts.fix_axes(axis)
        # tinygrad accepts sequences (UPCASTMID after a whole-axis GROUP) whose counters overrun the shape: refused
        fr = self.first_reduce
        fits = 0 <= self.local_dims <= fr and fr + self.group_for_reduces <= self.shape_len - self.upcasted
        check(fits, "the opt would leave more local, grouped and upcasted axes than the shape has")
        if self.group_for_reduces:  # stricter than tinygrad: what the opt made of the __local buffers (PADTO too)
            self._check_shared_memory(as_computed=True)

    def _opt_axis_amount(self, opt: Opt) -> tuple[int, int]:
        """The real axis an opt acts on and its amount (0: the whole axis), checked; NOLOCALS takes neither: -1, -1."""
        if opt.op is OptOps.NOLOCALS:
            return -1, -1
        axis = opt.real_axis(self)
        counted = "" if axis == opt.axis else f" ({opt.op.name} counts {opt.axis} from axis {axis - opt.axis})"
        check(axis < len(self.full_shape), f"invalid axis: {axis}{counted} is not one of the {self.shape_len} axes")
        amt = opt.amt if opt.amt != 0 else self.full_shape[axis]
        what = f"amount {amt}" if isinstance(amt, int) else f"the whole axis, of symbolic size {sym_render(amt)}"
        check(isinstance(amt, int) and amt != 1, f"shift/padto of amt 1 or Node is meaningless: {what}")
        if opt.op is not OptOps.PADTO:  # PADTO makes the axis a multiple of amt; every other op splits it by amt
            size = self.full_shape[axis]
            check(size % amt == 0, f"no longer valid shift: {amt} does not divide axis {axis} ({size})")
        return axis, amt

    # -- one method per OptOp, given the real axis and the checked amount; examples: a 64x64x64 matmul or 64x64 sum --

    def _opt_local(self, axis: int, amt: int) -> None:
        """LOCAL (cyan): split a global axis; the new piece becomes threads of one work-group.
        LOCAL:0:8 on (64 64 64) -> (8 64 8 64), blue blue cyan red: 8 threads share a work-group along axis 0."""
        check(self.opts.has_local, f"target does not support local: the {self.opts.device} target has no local threads")
        check(
            axis < self.global_dims, f"local is for globals: axis {axis} is not one of the {self.global_dims} globals"
        )
        self.shift_to(axis, amt, insert_before=self.first_reduce)
        self.local_dims += 1

    def _opt_group(self, axis: int, amt: int, top: bool = False) -> None:
        """GROUP (green): split a reduce axis across the threads of a work-group; each thread reduces its share
        and the partial results meet in local memory. GROUP:0:16 on (64 64) -> (64 16 4), blue green red:
        the 16 threads are the fast part of the split, so thread t reduces elements t, t+16, t+32, t+48
        (interleaved: neighbouring threads read neighbouring elements, stride 1).
        GROUPTOP (`top`) takes the threads from the slow part of the split: GROUPTOP:0:16 on (64 64) -> (64 16 4)
        too, the same shape line, but thread t now reduces the contiguous run 4t..4t+3 (its threads' stride is 4)."""
        no = f"the {self.opts.device} target has no {'local memory' if self.opts.has_local else 'local threads'}"
        check(self.opts.has_local and self.opts.has_shared, f"target does not support local or shared mem: {no}")
        ungrouped = list(range(self.first_reduce + self.group_for_reduces, self.shape_len - self.upcasted))
        check(axis in ungrouped, f"must be reduce axis to group: axis {axis} is not in the ungrouped ones, {ungrouped}")
        check(not self.tensor_core, "can't group with tensor cores")
        self.shift_to(axis, amt, top=top, insert_before=self.first_reduce + self.group_for_reduces)
        self.group_for_reduces += 1

    def _opt_unroll(self, axis: int, amt: int) -> None:
        """UNROLL (magenta): split a reduce axis; the new piece is unrolled in registers at the end of the shape.
        UNROLL:0:4 on (64 64 64) -> (64 64 16 4), blue blue red magenta: the loop runs 16 times, 4 steps each."""
        check(axis < self.shape_len - self.upcasted, f"can't upcasted already upcasted: axis {axis} is upcasted")
        check(amt <= 32, f"don't unroll more than 32 (asked {amt})")
        if self.full_shape[axis] == amt and axis == self.first_reduce:
            self.local_dims += 1  # first_reduce moves right by one; simplify_ones takes this back off
        if self.full_shape[axis] == amt and axis < self.first_reduce + self.group_for_reduces:
            self.group_for_reduces -= 1  # unrolling a whole GROUP axis
        self.shift_to(axis, amt, insert_before=None)
        self.upcast()

    def _opt_upcast(self, axis: int, amt: int) -> None:
        """UPCAST (yellow): split an output axis; each thread computes the new piece's outputs in registers.
        UPCAST:1:4 on (64 64 64) -> (64 16 64 4), blue blue red yellow: each thread owns 4 outputs along axis 1."""
        fr, tc = self.first_reduce, self.tensor_core
        check(axis < fr, f"upcast is for non-reduce: axis {axis} is not before the first reduce axis {fr}")
        check(not (tc and self.global_dims <= axis < self.global_dims + len(tc.threads)), "can't upcast TC locals")
        check(amt <= 8, f"don't upcast more than 8 (asked {amt})")
        self.shift_to(axis, amt, insert_before=None)
        self.upcast()

    def _opt_upcastmid(self, axis: int, amt: int) -> None:
        """UPCASTMID (white): for an image output only, upcast by 4 in the middle of a grouped reduce, so that
        each thread's partials fill one RGBA pixel. The 4 is inserted after the green axes and counted as one."""
        for ok, why in ((self.bufs[0].dtype.name.startswith("image"), "the output is not an image"),
                        (not self.float4_axis(0), "the output is written 4 at a time already"),
                        (self.group_for_reduces != 0, "the reduce is not grouped"),
                        (self.first_reduce <= 2, "more than 2 output axes"),
                        (prod(self.sts[0].shape) > 1, "there is one output")):
            check(ok, f"invalid upcast mid reduce: {why}")
        axes = self.sts[0].unit_stride_axes()
        check(len(axes) == 1, f"wrong number of stride 1 axis : {axes}")
        check(axes[0] == axis, f"wrong axis: the output's unit-stride axis is {axes[0]}, not {axis}")
        check(amt == 4, "don't upcast mid anything but 4")
        self.shift_to(axis, amt, insert_before=self.first_reduce + self.group_for_reduces)
        self.group_for_reduces += 1

    def _opt_nolocals(self, axis: int, amt: int) -> None:
        """NOLOCALS (BLUE): no local threads; the shape stays, every global axis is a thread's get_global_id. tinygrad
        0.9.1 launches work-groups of 1 thread (local size [1, 1, 1]); runtime.py's of the largest divisor <= 32 of
        launch dim 0 (the threads share nothing, so any grouping computes the same). NOLOCALS on (64 64) -> (64 64)."""
        why = f"the {self.opts.device} target has no local threads" if not self.opts.has_local else "it is applied"
        check(self.opts.has_local and not self.dont_use_locals, f"NOLOCALS is meaningless: {why}")
        why = f"{self.local_dims} local and {self.group_for_reduces} grouped axes"
        check(self.local_dims == 0 and self.group_for_reduces == 0, f"can't have no locals with locals: {why}")
        self.dont_use_locals = True

    def _opt_padto(self, axis: int, amt: int) -> None:
        """PADTO (no new colour): pad an axis up to a multiple of amt; the padding reads as 0, so later splits by
        amt divide it. PADTO:0:32 on a 60x60x60 matmul (60 60 60) -> (64 60 60)."""
        check(not self.vars, "does not work with symbolic shape")
        check(axis < self.shape_len - self.upcasted, f"cannot pad upcasted: axis {axis} is upcast")
        if self.first_reduce <= axis and (why := reduce_padding_changes(self)) is not None:
            raise KernelOptError(f"cannot pad: {why}")  # padding a reduce axis adds zeros to every SUM
        padded = False
        for i, st in enumerate(self.sts):
            if st.shape[axis] == 1:
                continue  # reduced in this buffer
            size, ru = st.shape[axis], round_up(st.shape[axis], amt) - st.shape[axis]
            name = f"data{b.idx}" if isinstance(b := self.bufs[i], MemBuffer) else f"the constant {b.val}"
            why = f"{name}'s axis {axis} of {size} becomes {size + ru} ({size} <= {amt}//4)"
            check(size > amt // 4, f"pad would at least quadruple the work: {why}")
            if ru:
                self.sts[i] = st.pad(((0, 0),) * axis + ((0, ru),) + ((0, 0),) * (len(st.shape) - axis - 1))
                padded = True
        check(padded, f"nothing was padded: axis {axis} is a multiple of {amt} wherever it isn't reduced")

    def _check_shared_memory(self, amt: int = 1, as_computed: bool = False) -> None:
        """A grouped reduce keeps an accumulator per local thread and upcast output in shared memory, for each reduce
        op (a __local buffer each, of its dtype). amt: what an opt is about to multiply that by (tinygrad's check);
        as_computed: the buffers as they are, half and bfloat16 computed as float (ours, after every opt)."""
        dts = [r.dtype.base if isinstance(r.dtype, ImageDType) else r.dtype for r in self.reduceops]
        acc_sz = sum(dtypes.float.itemsize if as_computed and dt in SHORT_FLOATS else dt.itemsize for dt in dts)
        fr, up = self.first_reduce, self.shape_len - self.upcasted
        upcast_sz = prod(a for a, b in zip(self.full_shape[up:], self.sts[0].shape[up:]) if a == b)
        local_sz = prod(self.full_shape[fr - self.local_dims : fr + self.group_for_reduces])
        smem_sz, max_sz = amt * acc_sz * upcast_sz * local_sz, self.opts.shared_max
        check(smem_sz <= max_sz, f"exceeds maximum shared memory size: needs {smem_sz}, max {max_sz}")

    # ==== tensor cores ======================================================================================

    def _create_tc_opts(self, reduceop: LazyOp, tc: TensorCore, axis: int, opt_level: int) -> TensorCoreOptions | None:
        """Does this reduce look like SUM(MUL(A, B)) that `tc` computes? If so, which axes are N, M and K: `axis` picks
        one of the (N, M, K) choices, counting from the last."""
        has_cast = tc.dtype_in != tc.dtype_out
        if has_cast and not (reduceop.src[0].op is UnaryOps.CAST and reduceop.src[0].arg == tc.dtype_out):
            return None
        mul_op = reduceop.src[0].src[0] if has_cast else reduceop.src[0]
        if mul_op.op is not BinaryOps.MUL:
            return None

        def buf_index(src: LazyOp) -> int | None:
            if src.op is BufferOps.LOAD and src.arg.dtype == tc.dtype_in:
                return self.bufs.index(src.arg)
            if opt_level >= 1 and src.op is UnaryOps.CAST and src.arg == tc.dtype_in and src.src[0].op in BufferOps:
                return self.bufs.index(src.src[0].arg) if src.src[0].arg in self.bufs else None
            return None

        if (buf0 := buf_index(mul_op.src[0])) is None or (buf1 := buf_index(mul_op.src[1])) is None:
            return None
        # N is an axis that A broadcasts along (stride 0), M one that B broadcasts along, K a reduce axis
        strides0, strides1, fr = self.sts[buf0].real_strides(), self.sts[buf1].real_strides(), self.first_reduce
        axis_buf0 = [(i, self.full_shape[i], strides1[i]) for i, s in enumerate(strides0[:fr]) if s == 0]
        axis_buf1 = [(i, self.full_shape[i], strides0[i]) for i, s in enumerate(strides1[:fr]) if s == 0]
        if not (axis_buf0 and axis_buf1 and ((self.shape_len - self.first_reduce) == 1 or opt_level >= 1)):
            return None
        choices = list(itertools.product(axis_buf0, axis_buf1, range(self.first_reduce, self.shape_len)))
        if not axis < len(choices):
            return None
        s0, s1, s2 = choices[-(axis + 1)][0][0], choices[-(axis + 1)][1][0], choices[-(axis + 1)][2]
        axis_pads = tuple((x, tc.dims[i]) for i, x in enumerate([s0, s1, s2]) if self.full_shape[x] % tc.dims[i] != 0)
        if axis_pads and opt_level < 2:
            return None
        self.bufs_for_tensor_core[reduceop] = (buf0, buf1)
        return TensorCoreOptions((s0, s1, s2), (True, True), axis_pads)

    def _apply_tc_opt(self, use_tensor_cores: int, axis: int, opt_level: int) -> bool:
        """The TC opt: the first of the target's tensor cores that fits every reduce alike, its axes padded where
        needed, then shaped for it (TC=2, use_tensor_cores 2, leaves tensor_core unset: the same shape, rendered as
        plain multiply-adds). False if none fits."""
        if use_tensor_cores and self.opts.has_local and self.reduceop is not None and self.reduceop.op is ReduceOps.SUM:
            for tc in self.opts.tensor_cores:
                tensor_core_opts = [self._create_tc_opts(reduceop, tc, axis, opt_level) for reduceop in self.reduceops]
                # can only fuse reduces with the same tc options
                check(all_same(tensor_core_opts), "can only fuse reduces with the same tensor core options")
                if tensor_core_opts[0] is None: continue
                # tensor core -- unroll the reduce dim, upcast input, then create the correct thread pattern
                self.tensor_core_opts = tc_opts = tensor_core_opts[0]

                # attempt to pad the tensor axes that require it
                state = self._state()
                try:
                    for pad_axis, dim in tc_opts.axis_pads:
                        self.apply_opt(Opt(OptOps.PADTO, pad_axis, dim), append_opt=False)  # PADTO might fail
                except KernelOptError:
                    self._restore(state)  # (the next core starts from the kernel as it was)
                    continue
                self._weigh("_apply_tc_opt", tc=tc, axes=tc_opts.axes, axis_pads=tc_opts.axis_pads)
                self.apply_opt(Opt(OptOps.UNROLL, tc_opts.axes[2]-self.first_reduce, tc.dims[2]), append_opt=False)
                for i, sz in enumerate([prod(x) for x in [[x[1] for x in tc.threads if x[0]==dim]
                                                          for dim in range(2)]]):  # upcast non-local'd N, M
                    if tc.dims[i] > sz: self.apply_opt(Opt(OptOps.UPCAST, tc_opts.axes[i], tc.dims[i]//sz),
                                                       append_opt=False)
                for (tc_dim, tc_amt) in tc.threads:
                    self.apply_opt(Opt(OptOps.LOCAL, tc_opts.axes[tc_dim], tc_amt), append_opt=False)

                # assert tensor core
                if use_tensor_cores == 1: self.tensor_core = tc  # TC=2 will do the shape ops without the WMMA
                return True
        return False

    def _no_tensor_core(self, use_tensor_cores: int) -> str:
        """Why _apply_tc_opt found no tensor core: the first of its conditions that fails."""
        if not use_tensor_cores:
            return "TC is 0"
        if not self.opts.has_local:
            return f"the {self.opts.device} target has no local threads"
        if self.reduceop is None or self.reduceop.op is not ReduceOps.SUM:
            return "the kernel has no SUM reduce"
        if not self.opts.tensor_cores:
            return f"the {self.opts.device} target has no tensor cores"
        return f"none of {', '.join(map(str, self.opts.tensor_cores))} fits (its dtypes, a MUL of loads, axes, sizes)"

    def apply_tensor_cores(
        self, use_tensor_cores: int = 1, extra_opts: list[Opt] | None = None, axis: int = 0, tc_opt: int | None = None
    ) -> bool:
        """The TC opt, then extra_opts or tinygrad's hand-coded follow-ups; True if TC applied (an opt failing after it
        ends this with False, keeping the opts so far, as tinygrad's). use_tensor_cores: 0 never, 1, 2 the shape only
        (the TC opt reads the target's tc, as tinygrad's). tc_opt: 0 SUM(MUL(LOAD, LOAD)) of one reduce axis; 1 also
        several reduce axes and CAST inputs; 2 also sizes PADTO pads to the core's."""
        check_tc_args(use_tensor_cores, extra_opts, axis, tc_opt)
        if tc_opt is None: tc_opt = self.opts.tc_opt
        if not self.opts.tensor_cores and use_tensor_cores != 2: return False
        try:  # check TC first and apply hand-coded opts if successful
            self.apply_opt(Opt(OptOps.TC, axis, tc_opt))

            if (tc_opts:=self.tensor_core_opts) is not None:
                if extra_opts is not None:
                    for opt in extra_opts: self.apply_opt(opt)
                else:
                    self._weigh("apply_tensor_cores", axes=tc_opts.axes, axes_exist=tc_opts.axes_exist)
                    # hand-coded TC opts
                    def late_upcast_tc(tc_dim: int):
                        if tc_opts.axes_exist[tc_dim]:
                            ax_div = [upc for upc in [5,4,3,2,1] if self.full_shape[tc_opts.axes[tc_dim]]%upc == 0][0]
                            if ax_div != 1: self.apply_opt(Opt(OptOps.UPCAST, tc_opts.axes[tc_dim], ax_div))
                    late_upcast_tc(1)  # attempt to upcast M
                    late_upcast_tc(0)  # attempt to upcast N

                    if self.tensor_core and tc_opts.axes_exist[0]:  # attempt to local N
                        for upc in [4,2]:
                            if self.full_shape[tc_opts.axes[0]] % upc == 0:
                                self.apply_opt(Opt(OptOps.LOCAL, tc_opts.axes[0], upc))
                                break

            return True
        except KernelOptError:
            return False

    # ==== heuristics: tinygrad 0.9.1's hand-coded optimizations =============================================
    # One method per branch of tinygrad's hand_coded_optimizations, in its order and in its lines. Where a branch
    # decides, one _weigh line records what it computed; the opts it applies next follow it. tinygrad 0.9.1 prints
    # some of it: "MATVEC: ..." (the shape, strides and MV_ sizes) and, for a core that fits, "TENSOR CORES ..." at
    # DEBUG >= 3; each masked axis it upcasts and xb_choices at DEBUG >= 4; nothing of the other branches.
    # demo.py's --explain says each record in words.

    def _weigh(self, heuristic: str, **weighed: Any) -> None:
        """Where self.decisions is a list, record what a branch computed, under tinygrad's names."""
        if self.decisions is not None:
            self.decisions.append(Decision(heuristic, weighed, len(self.applied_opts)))

    def required_optimizations(self) -> None:
        """An image output is written a pixel (4 floats) at a time: its unit-stride axis is upcast by 4."""
        if self.bufs[0].dtype.__class__ is ImageDType:
            unit_stride_axes_mul_4 = [i for i in self.sts[0].unit_stride_axes(ignore_valid=True)
                                      if self.sts[0].shape[i]%4 == 0]
            check(len(unit_stride_axes_mul_4) >= 1, f"needs a unit stride axis in {self.bufs[0]}")
            if len(unit_stride_axes_mul_4) and all(x < (self.shape_len-self.upcasted) for x in unit_stride_axes_mul_4) \
                    and unit_stride_axes_mul_4[0] not in self.upcast_in_mid_reduce_axes:
                self._weigh("required_optimizations", unit_stride_axes_mul_4=unit_stride_axes_mul_4)
                self.apply_opt(Opt(OptOps.UPCAST, unit_stride_axes_mul_4[0], 4))

    def hand_coded_optimizations(self) -> None:
        """tinygrad 0.9.1's hand-written choice of opts, branch by branch; all or nothing: where an opt fails (a LOCAL
        after NOLOCALS) it raises KernelOptError, changing nothing. Run again, it adds what still applies."""
        state = self._state()
        try:
            if 0 not in self.full_shape:  # (an empty kernel: nothing to optimize)
                self.required_optimizations()
                if not self._matvec():
                    self._grouping()
                    self._image_float4()
                    if not self.group_for_reduces:  # no more opt if we are grouping
                        # **** below this line need to be optional and benchmarked ****
                        self._upcast_masked_axes()
                        self._upcast_broadcast_axes()
                        self._unroll_reduce()
                        self._default_upcast()
                        self._locals()
        except KernelOptError:
            self._restore(state)
            raise

    def _matvec(self) -> bool:
        """A matrix-vector product: the reduce over MV_THREADS_PER_ROW threads (GROUP), MV_BLOCKSIZE rows a work-group,
        MV_ROWS_PER_THREAD a thread. True if it applied: the heuristics end there."""
        # should use matvec - TODO: adjust/tune based on the wide vs tall/large vs small mat
        MV_BLOCKSIZE, MV_THREADS_PER_ROW, MV_ROWS_PER_THREAD = getenv("MV_BLOCKSIZE", 4, minimum=1), \
            getenv("MV_THREADS_PER_ROW", 8, minimum=1), getenv("MV_ROWS_PER_THREAD", 4, minimum=1)
        if self.opts.has_local and getenv("MV",1) != 0 and \
                (MV_BLOCKSIZE > 1 or MV_THREADS_PER_ROW > 1 or MV_ROWS_PER_THREAD > 1) and \
                self.reduceop is not None and self.reduceop.op is ReduceOps.SUM and len(self.full_shape) >= 2 and \
                self.opts.has_shared and (mulop:=self.reduceop.src[0]).op is BinaryOps.MUL and \
                mulop.src[0].op is BufferOps.LOAD and mulop.src[1].op is BufferOps.LOAD:
            st0, st1 = self.sts[self.bufs.index(mulop.src[0].arg)], self.sts[self.bufs.index(mulop.src[1].arg)]
            strides0, strides1 = st0.real_strides(), st1.real_strides()
            def has_expanded_axis(shape, strides): return any(s > 1 and st == 0 for s,st in zip(shape,strides))
            if self.first_reduce == self.shape_len: return False  # (no reduce axis left: tinygrad reads past strides0)
            if strides0[self.first_reduce] == 1 and \
                    not (has_expanded_axis(st0.shape, strides0) and has_expanded_axis(st1.shape, strides1)):
                for global_idx in range(self.global_dims):
                    if self.full_shape[self.first_reduce]%MV_THREADS_PER_ROW == 0 and \
                            self.full_shape[global_idx]%(MV_BLOCKSIZE*MV_ROWS_PER_THREAD) == 0:
                        self._weigh("_matvec", global_idx=global_idx)  # tinygrad: DEBUG >= 3 prints MATVEC: ...
                        if MV_THREADS_PER_ROW > 1: self.apply_opt(Opt(OptOps.GROUP, 0, MV_THREADS_PER_ROW))
                        if MV_BLOCKSIZE > 1: self.apply_opt(Opt(OptOps.LOCAL, global_idx, MV_BLOCKSIZE))
                        if MV_ROWS_PER_THREAD > 1: self.apply_opt(Opt(OptOps.UPCAST, global_idx, MV_ROWS_PER_THREAD))
                        return True
        return False

    def _grouping(self) -> None:
        """Few outputs: each reduce shared by threads through local memory (GROUPTOP); for an image output, then its
        unit-stride axis upcast mid-reduce."""
        if self.opts.has_local and self.opts.has_shared and all_int(self.sts[0].shape[:self.first_reduce]):
            # are we grouping? (requires local shape support)
            if not self.float4_axis(0) and self.first_reduce <= 2 and self.first_reduce + 1 <= self.shape_len and \
                    prod(self.sts[0].shape[:self.first_reduce]) <= 2048:
                # TODO: use 1024 if it's allowed in a smarter way
                for sz in (([256, 16]) if prod(self.sts[0].shape[:self.first_reduce]) <= 32 else [16]):
                    if all(st.shape[self.first_reduce] % sz == 0 or st.shape[self.first_reduce] == 1
                           for st in self.sts):
                        self._weigh("_grouping", sz=sz)
                        try:  # may fail due to excessive smem usage
                            self.apply_opt(Opt(OptOps.GROUPTOP, 0, sz))
                            break
                        except KernelOptError: pass

            # are we upcasting in mid reduce? (only for images)
            if self.bufs[0].dtype.name.startswith('image') and not self.float4_axis(0) and self.group_for_reduces and \
                    self.first_reduce <= 2 and prod(self.sts[0].shape) > 1:
                axes = self.sts[0].unit_stride_axes()
                check(len(axes) == 1, f"wrong number of stride 1 axis : {axes}")
                if self.sts[0].shape[axes[0]]%4 == 0:
                    self._weigh("_grouping", axes=axes)
                    self.apply_opt(Opt(OptOps.UPCASTMID, axes[0], 4))

    def _image_float4(self) -> None:
        """upcast float4 images: each image buffer is read and written a pixel (4 floats) at a time."""
        for buf_index,buf in enumerate(self.bufs):
            unit_stride_axes_mul_4 = [i for i in self.sts[buf_index].unit_stride_axes(ignore_valid=True)
                                      if self.sts[buf_index].shape[i]%4 == 0]
            if buf.dtype.__class__ is ImageDType:
                if len(unit_stride_axes_mul_4) and \
                        all(x < (self.shape_len-self.upcasted) for x in unit_stride_axes_mul_4) and \
                        unit_stride_axes_mul_4[0] not in self.upcast_in_mid_reduce_axes:
                    self._weigh("_image_float4", buf_index=buf_index, unit_stride_axes_mul_4=unit_stride_axes_mul_4)
                    if unit_stride_axes_mul_4[0] < self.first_reduce:
                        self.apply_opt(Opt(OptOps.UPCAST, unit_stride_axes_mul_4[0], 4))
                    else:
                        self.apply_opt(Opt(OptOps.UNROLL, unit_stride_axes_mul_4[0]-self.first_reduce, 4))

    def _upcast_masked_axes(self) -> None:
        """if there are small dims with lots of valid masks, upcast them (they might be from Tensor.stack)"""
        # this can be made much smarter
        to_upcast: list[int] = []
        # upcast leading axes first (hack-ish for winograd; we actually want to upcast masked axes with low stride
        # first)
        for axis in range(self.first_reduce):
            # we might want to be able to split axes that are masked, or refuse to merge them in simplify_merge_adjacent
            # for now skip upcasting here if there is a symbolic axis
            if isinstance(self.full_shape[axis], int) and self.full_shape[axis] <= 7 and \
                    any(st.axis_is_masked(axis) for st in self.sts) and \
                    prod(self.full_shape[self.shape_len - self.upcasted:]) * \
                    prod(self.full_shape[j] for j in to_upcast) * self.full_shape[axis] <= 7 * 7:
                to_upcast.append(axis)
        if to_upcast: self._weigh("_upcast_masked_axes", to_upcast=to_upcast)  # tinygrad: DEBUG >= 4 prints each
        for axis in to_upcast[::-1]: self.apply_opt(Opt(OptOps.UPCAST, axis, 0))

    def _upcast_broadcast_axes(self) -> None:
        """potentially do more upcasts of non reduce axes based on a heuristic"""
        upcasted_axis = set()
        while prod(self.sts[0].shape[:self.first_reduce]) >= 1024:
            xb_choices = []
            # consider all the non reduce axes, and a 3 or 4 reduce
            for axis, upcast_amount in itertools.product(range(self.first_reduce), [3,4]):
                # if we haven't upcasted it, it's not symbolic, it mods, and buffer has stride 0 on axis while having no
                # stride 0 in the upcasted axis already
                if axis not in upcasted_axis and isinstance(self.full_shape[axis], int) and \
                        self.full_shape[axis]%upcast_amount == 0 and \
                        any(st.views[-1].strides[axis] == 0 and
                            not any(x[1] == 0 for x in self.upcasted_axis(buf_index))
                            for buf_index, st in enumerate(self.sts)):
                    xb_choices.append((sum(st.views[-1].strides[axis]>0 for st in self.sts),
                                       sum(st.views[-1].strides[axis] for st in self.sts), axis, upcast_amount))
            if xb_choices:
                xb_choices = sorted(xb_choices)
                self._weigh("_upcast_broadcast_axes", xb_choices=xb_choices)  # tinygrad: DEBUG >= 4 prints it
                self.apply_opt(Opt(OptOps.UPCAST, xb_choices[0][2], xb_choices[0][3]))
                upcasted_axis.add(xb_choices[0][2])
            else: break

    def _unroll_reduce(self) -> None:
        """if last dim is small(ish) and it's a reduce dim, upcast the reduce (loop unrolling). no simplify needed since
        it's just an upcast."""
        if self.first_reduce < (self.shape_len-self.upcasted) and \
                (len(list(self.shape_offsets(self.full_buf_index))) <= 4 or
                 not any(r for _,_,r in self.upcasted_axis(self.full_buf_index))) and \
                (self.upcasted == 0 or prod(self.full_shape[-self.upcasted:]) < 64):
            self._weigh("_unroll_reduce", s=self.full_unupcasted_shape[-1])
            # NOTE: cannot loop unroll symbolic axis
            if (s:=self.full_unupcasted_shape[-1]) <= 32 and isinstance(s, int):
                self.apply_opt(Opt(OptOps.UNROLL, len(self.full_unupcasted_shape)-1-self.first_reduce, 0))
                # if it's small, upcast a second reduce dimension too
                if self.first_reduce < (self.shape_len-self.upcasted) and s <= 3 and \
                        (s2:=self.full_unupcasted_shape[-1]) <= 3 and isinstance(s2, int):
                    self.apply_opt(Opt(OptOps.UNROLL, len(self.full_unupcasted_shape)-1-self.first_reduce, 0))
            else:
                for splits in [4]:
                    if self.full_unupcasted_shape[-1]%splits == 0:
                        self.apply_opt(Opt(OptOps.UNROLL, len(self.full_unupcasted_shape)-1-self.first_reduce, splits))
                        break

    def _default_upcast(self) -> None:
        """if nothing at all is upcasted and it's easy to, do an upcast"""
        # TODO: this is breaking the tests
        for splits in [4]:
            if self.upcasted == 0 and self.full_unupcasted_shape and self.full_unupcasted_shape[-1] % splits == 0:
                self._weigh("_default_upcast", splits=splits)
                self.apply_opt(Opt(OptOps.UPCAST, len(self.full_unupcasted_shape)-1, splits))

    def _locals(self) -> None:
        """local groups: work-groups of up to 128 threads on up to 3 axes, expand axes first (none with NOLOCALS=1)."""
        if self.opts.has_local:
            if getenv("NOLOCALS") and self.local_dims == 0 and not self.group_for_reduces:
                self._weigh("_locals", NOLOCALS=1)
                self.apply_opt(Opt(OptOps.NOLOCALS))
            else:
                # prioritize making expand axes local
                local_axis_ranking = [(any(self.sts[buf_index].views[-1].strides[axis] == 0
                                           for buf_index in range(len(self.sts))), axis)
                                      for axis in range(len(self.full_shape[:self.first_reduce]))]
                to_local: list[tuple[int, int]] = []
                for _, axis in sorted(local_axis_ranking, key=lambda x: (-x[0], -x[1])):
                    local_size = prod(sz for _, sz in to_local)
                    local_sz: int | None = next((x for x in ([32] * (axis == 0) + [16, 8, 4, 3, 2])
                                                if self.full_shape[axis] % x == 0 and local_size * x <= 128), None)
                    if local_sz is not None: to_local.append((axis, local_sz))
                if to_local: self._weigh("_locals", local_axis_ranking=local_axis_ranking, to_local=to_local)
                deleted_shape = 0
                for axis, local_sz in sorted(to_local[:3]):
                    axis = axis - deleted_shape
                    will_delete_shape = local_sz == self.full_shape[axis]
                    self.apply_opt(Opt(OptOps.LOCAL, axis, local_sz))
                    if will_delete_shape: deleted_shape += 1


# ==== targets ===============================================================================================


# tinygrad 0.9.1's tensor cores, each's threads, thread_local_aliases and thread_local_sizes: Metal's and CUDA's
_METAL = [(0, 2), (1, 4), (0, 2), (1, 2)], [[[0], [2], [0], [4], [-1, 1, 3], [0]], [[1], [0], [3], [0], [2, 4], [-1]],
                                            [[1], [2], [3], [4], [0], [-1]]], [[2], [2], [2]]
_CUDA = [(0, 2), (0, 2), (1, 2), (1, 2), (0, 2)], [[[0], [0], [5], [-2], [0], [-1, 1, 2, -3], [3, 4]], [[3], [4], [0],
         [0], [5], [-1, 1, 2, -2], [0]], [[-1], [1], [5], [-2], [2], [0], [3, 4]]], [[2, 2, 2], [2, 2], [2, 2]]
_HALF, _FLOAT = dtypes.half, dtypes.float
# tinygrad 0.9.1's OpenCLRenderer(), ClangRenderer(), MetalRenderer() with tensor cores on, CUDARenderer("sm_80")
TARGETS: dict[str, Target] = {
    "opencl": Target("GPU"),
    "clang": Target("CLANG", supports_float4=False, has_local=False, global_max=None),
    "metal": Target("METAL", tensor_cores=[TensorCore((8, 8, 8), i, o, *_METAL) for i, o in [(_FLOAT, _FLOAT),
                    (_HALF, _FLOAT), (_HALF, _HALF)]]),
    "cuda": Target("CUDA", global_max=(2147483647, 65535, 65535), local_max=(1024, 1024, 64), shared_max=49152,
                   tensor_cores=[TensorCore((8, 16, 16), i, _FLOAT, *_CUDA) for i in (_HALF, dtypes.bfloat16)]),
}


def optimize(k: Kernel) -> Kernel:
    """What tinygrad 0.9.1's get_linearizer does before rendering a kernel: the required opts (an image output's
    pixel), then tensor cores if they apply (the TC opt must come first, so never after a required opt), else the
    hand-coded opts."""
    k.required_optimizations()
    if not k.apply_tensor_cores(getenv("TC", 1)):
        k.hand_coded_optimizations()
    return k


# Appendix: the checks at the gates, where kernel.py is stricter than tinygrad (DIFFERENCES.md lists each)
# ============================================================================================================
# tinygrad 0.9.1 asserts, or takes what it is given and fails later (or computes a wrong answer). Here what comes in
# is checked where it comes in, and refused with a ValueError (KernelOptError for an opt) that names what is wrong:
# the AST's nodes (LazyOp, MemBuffer, ConstBuffer) and the whole AST (Kernel(), verify_lazyop), a View and its
# movement ops (View.create, the View's, ShapeTracker's through movement_arg), apply_opt's and apply_tensor_cores's
# arguments, and PADTO of a reduce axis (reduce_padding_changes); a Target's fields at Kernel(). (corpus.py's reader
# checks the corpus's JSON the same way.) And the symbolic algebra's bounds at every value of the variables
# (upper_bound, lower_bound, always_lt, sym_min, sym_max, _divide_by_node), which decide what tinygrad's decides on
# "possibly": a comparison, a min or max of two sizes, a // or % by a symbolic size.


# -- symbolic: what holds at every value of the variables (tinygrad decides on what possibly holds) --
# A loop index over a symbolic size ends at a node (idx0 in [0, i-1]). To bound `idx0 - i`, the index is replaced
# by the end of its range first, (i-1) - i = -1, so that it cancels against the size; taking every bound at its
# extreme at once (idx0 <= 15, i >= 1) would only give 14. What is left, an expression of the sizes alone, counts
# each size at its extreme: a bound that holds at every value, so a comparison it decides is decided for all.


def _of_sizes(x: Node) -> bool:
    """Is every variable of x a size (a range that ends at a number), not a loop index over a symbolic size?"""
    return all(isinstance(v.max, int) for v in x.vars())


def upper_bound(x: sint) -> int:
    """A number that x never exceeds, at any value of its variables."""
    for _ in range(16):  # each round replaces the loop indices of the outermost symbolic level by their bounds
        if not isinstance(x, Node) or isinstance(x, NumNode) or _of_sizes(x):
            break
        terms = x.nodes if isinstance(x, SumNode) else [x]
        x = Node.sum([t if _of_sizes(t) else t.max if isinstance(t.max, Node) else NumNode(t.max) for t in terms])
    while isinstance(x, Node):
        x = x.max
    return x


def lower_bound(x: sint) -> int:
    """A number that x is never below, at any value of its variables."""
    return x if isinstance(x, int) else -upper_bound(-x)


def always_lt(a: sint, b: sint) -> bool:
    """Does a < b hold at every value of the variables? (False where it may not: then nothing may be folded.)"""
    return upper_bound(a - b) < 0


def sym_min(a: sint, b: sint, what: str = "min") -> sint:
    """The smaller of two sizes, where one is the smaller at every value of the variables; else a ValueError
    naming them (Python's min() of nodes answers on "possibly": min(i+1, i+4) would be i+4)."""
    return a if always_lt(a, b + 1) else b if always_lt(b, a + 1) else _undecided(what, a, b, "smaller")


def sym_max(a: sint, b: sint, what: str = "max") -> sint:
    """The larger of two sizes, where one is the larger at every value of the variables; else a ValueError."""
    return a if always_lt(b, a + 1) else b if always_lt(a, b + 1) else _undecided(what, a, b, "larger")


def _undecided(what: str, a: sint, b: sint, which: str) -> NoReturn:
    raise ValueError(
        f"{what}: neither {sym_render(a)} nor {sym_render(b)} is the {which} at every value of the variables"
    )


def _divide_by_node(a: Node, b: Node, op: type[DivNode] | type[ModNode]) -> Node:
    """a // b or a % b by a symbolic size b: 1 or 0 where a is b, 0 or a where 0 <= a < b at every value of the
    variables, else kept as a node. C's `/` and `%` truncate where Python's floor, so a numerator that may be
    negative is first shifted up by a multiple of b: (a + k*b)//b - k, (a + k*b) % b.
    A size that may be 0 divides as max(b, 1), written b + (b < 1): where it is 0 its view has no elements and the
    index is never used, but C computes it all the same (for a padding around it), and must not divide by 0."""
    if a == b:
        return NumNode(1 if op is DivNode else 0)
    if lower_bound(a) >= 0 and always_lt(a, b):
        return NumNode(0) if op is DivNode else a  # a is already below b
    if lower_bound(b) < 0:
        raise ValueError(f"not supported: {a} {'//' if op is DivNode else '%'} {b} (the divisor may be negative)")
    if lower_bound(b) < 1:
        b = b + create_lt_node(b, 1)
    if (low := lower_bound(a)) < 0:
        k = -(low // max(lower_bound(b), 1))  # k*b >= -a.min, as b >= 1
        shifted = create_node(op(a + b * k, b))
        return shifted - k if op is DivNode else shifted
    return create_node(op(a, b))


def check_arg(where: str, name: str, value: Any, ok: bool, want: str) -> None:
    """An argument or field of the wrong kind or range: a ValueError naming where, which one and what it must be."""
    if not ok:
        raise ValueError(f"{where}: {name} must be {want}, got {value!r}")


def _check_field(obj: Any, name: str, ok: bool, want: str) -> None:
    check_arg(type(obj).__name__, name, getattr(obj, name), ok, want)


def check_kernel(ast: tuple, opts: Any) -> Target:
    """Kernel()'s arguments: the AST's rules (verify_lazyop) and the target (a Target, or a name in TARGETS), each of
    whose fields of the wrong kind fails here, naming it, not deep inside the optimizer or the renderer."""
    if isinstance(opts, str) and opts in TARGETS:
        opts = TARGETS[opts]
    if opts is not None and not isinstance(opts, Target):
        raise ValueError(f"opts must be a Target or one of {list(TARGETS)}, got {opts!r}")
    target = opts if opts is not None else TARGETS["opencl"]
    for name in ("supports_float4", "has_local", "has_shared"):
        _check_field(target, name, isinstance(getattr(target, name), bool), "True or False")
    for name in ("global_max", "local_max"):  # None: no limit
        sizes = getattr(target, name)
        ok = sizes is None or (isinstance(sizes, (tuple, list)) and all(is_int(n) and n >= 1 for n in sizes))
        _check_field(target, name, ok, "None (no limit) or a tuple of ints >= 1")
    _check_field(target, "shared_max", is_int(target.shared_max) and target.shared_max >= 0, "an int >= 0")
    cores = isinstance(target.tensor_cores, list) and all(isinstance(tc, TensorCore) for tc in target.tensor_cores)
    _check_field(target, "tensor_cores", cores, "a list of TensorCores")
    verify_lazyop(*ast)
    return target


def check_view(v: View) -> None:
    """A View built directly (View.create checks more of what it is given): a stride and a mask range per axis."""
    if len(v.strides) != len(v.shape) or (v.mask is not None and len(v.mask) != len(v.shape)):
        raise ValueError(f"View: shape {v.shape} needs one stride and one mask range per axis, got strides "
                         f"{v.strides} and mask {v.mask} (View.create makes a View from a shape alone)")


def check_buffer(buf: MemBuffer | ConstBuffer) -> None:
    """A field of the wrong kind fails here, naming it; a ConstBuffer's value must also fit its dtype."""
    if isinstance(buf, MemBuffer):
        _check_field(buf, "idx", is_int(buf.idx) and buf.idx >= 0, "an int >= 0")
        object.__setattr__(buf, "idx", int(buf.idx))  # a numpy integer idx: the same buffer
    image = not isinstance(dt := buf.dtype, ImageDType) or len(dt.shape) == 3 and dt.shape[2] == 4 and all(
        is_int(n) and n >= 0 for n in dt.shape)
    _check_field(buf, "dtype", isinstance(dt, DType) and image, "a DType (an image's shape: (height, width, 4))")
    _check_field(buf, "st", isinstance(buf.st, ShapeTracker), "a ShapeTracker")
    if isinstance(buf, MemBuffer):
        return
    if (why := const_out_of_range(buf.val, buf.dtype)) is not None:
        raise ValueError(f"CONST value {buf.val!r} {why} {buf.dtype.name} ({buf.dtype!r})")
    # half and bfloat16 are computed in float registers, which would keep the extra digits: the constant is
    # rounded to its dtype here, once, as numpy does (np.float16(2049.0) is 2048.0, np.float16(1e5) is inf)
    fmt = SHORT_FLOATS.get(buf.dtype.scalar())
    if fmt and not isinstance(buf.val, Node):
        object.__setattr__(buf, "val", round_to_float(float(buf.val), *fmt))
    elif fmt and max(-buf.val.min, buf.val.max) > 2 ** fmt[0]:  # a variable's value is only known at run time
        raise ValueError(
            f"CONST {buf.val.render()} of {buf.dtype.name}: a value in {buf.val.min}..{buf.val.max} can be "
            f"beyond the integers {buf.dtype.name} holds exactly (up to {2 ** fmt[0]}); CAST it from an int"
        )


def round_to_float(x: float, bits: int, min_exp: int, largest: float) -> float:
    """x rounded to the nearest float with `bits` significant bits (ties to even, as IEEE and numpy round), whose
    normal numbers start at 2**min_exp (below it, the spacing stays 2**(min_exp-bits+1): subnormals). A value that
    rounds past `largest` is an infinity of its sign; nan stays nan."""
    if not math.isfinite(x) or x == 0:
        return x
    exp = max(math.frexp(x)[1] - 1, min_exp)  # x = 1.xxx * 2**exp
    spacing = math.ldexp(1.0, exp - bits + 1)  # the distance between neighbouring floats around x
    rounded = round(x / spacing) * spacing  # exact: x / spacing only shifts the exponent; round() ties to even
    return math.copysign(rounded if abs(rounded) <= largest else math.inf, x)  # a tiny negative: -0.0


# -- the AST: each node as it is built (check_lazyop, check_buffer), and a whole kernel's (verify_lazyop) --


# how many sources each op takes, and the kind of arg an op takes where that is one object (a reduce op's is axes)
ARITY: dict[Op, int] = {**dict.fromkeys([*UnaryOps, *ReduceOps, BufferOps.STORE], 1), **dict.fromkeys(BinaryOps, 2)}
ARITY |= {**dict.fromkeys(TernaryOps, 3), BufferOps.LOAD: 0, BufferOps.CONST: 0}
ARG_KIND: dict[Op, type] = {BufferOps.LOAD: MemBuffer, BufferOps.STORE: MemBuffer, BufferOps.CONST: ConstBuffer}
ARG_KIND |= {UnaryOps.CAST: DType, UnaryOps.BITCAST: DType}

# ALU ops defined on some kinds of dtype only (tinygrad 0.9.1's Tensor casts an int to float for sqrt, exp2, log2 and
# sin, and has xor for ints and bools, shifts for ints); a bool has no multiply-add (1*1+1 is 2, no bool)
ALU_KINDS = dict.fromkeys([UnaryOps.SQRT, UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SIN], ("float",))
ALU_KINDS |= dict.fromkeys([BinaryOps.SHL, BinaryOps.SHR], ("int",))
ALU_KINDS |= {BinaryOps.XOR: ("int", "bool"), TernaryOps.MULACC: ("int", "float")}


def check_lazyop(self: LazyOp) -> None:
    """A node's op, the number and kind of its sources, the kind of its arg, the dtypes its op is defined on."""
    if not isinstance(self.op, (UnaryOps, BinaryOps, TernaryOps, ReduceOps, BufferOps)):
        raise ValueError(
            f"LazyOp: {self.op!r} is not an op (a member of UnaryOps, BinaryOps, TernaryOps, ReduceOps or BufferOps)"
        )
    name = self.op.name
    if not isinstance(self.src, tuple):
        raise ValueError(f"{name}: src must be a tuple of LazyOps, got {self.src!r}")
    if bad := [i for i, s in enumerate(self.src) if not isinstance(s, LazyOp)]:
        raise ValueError(f"{name}: source {bad[0]} is not a LazyOp: {self.src[bad[0]]!r}")
    if len(self.src) != (n := ARITY[self.op]):
        raise ValueError(f"{name} takes {n} source{'s' if n != 1 else ''}, got {len(self.src)}")
    if (want := ARG_KIND.get(self.op)) is not None and not isinstance(self.arg, want):
        raise ValueError(f"{name} needs a {want.__name__} arg, got {self.arg!r}")
    if self.op in ReduceOps and not (isinstance(self.arg, tuple) and all(is_int(a) for a in self.arg)):
        raise ValueError(f"{name} needs a tuple of axes as its arg, got {self.arg!r}")
    if self.op in ALU_KINDS:  # the kind of its dtype: bool, int or float
        kind = "bool" if (dt := self.src[0].dtype).scalar() == dtypes.bool else "int" if dtypes.is_int(dt) else "float"
        if kind not in (kinds := ALU_KINDS[self.op]):
            raise ValueError(f"{name} of {dt.name}: {name} is defined on {' and '.join(kinds)} dtypes, not {kind}s")
    if self.op not in BinaryOps and self.op not in TernaryOps:
        return  # a unary op has one source; CAST and BITCAST change the dtype on purpose
    # tinygrad computes every ALU op in one dtype (its Tensor inserts the CASTs); the mixes its ops define are WHERE's
    # bool condition and the bool result of CMPLT and CMPNE. An image is computed as its base dtype (dtype.scalar()).
    if self.op is TernaryOps.WHERE and self.src[0].dtype != dtypes.bool:
        raise ValueError(f"WHERE needs a bool condition, got {self.src[0].dtype.name} (compare it with CMPNE first)")
    srcs = self.src[1:] if self.op is TernaryOps.WHERE else self.src
    if len({s.dtype.scalar() for s in srcs}) > 1:
        names = ", ".join(s.dtype.name for s in srcs)
        raise ValueError(f"{name} of different dtypes ({names}): CAST its sources to one dtype first")


def const_out_of_range(val: Any, dtype: DType) -> str | None:
    """Why val can't be a constant of dtype (the device and numpy would disagree on it), or None if it can."""
    if isinstance(val, Node):
        return None  # a symbolic value: bound at run time
    if not isinstance(val, numbers.Real):
        return "is not a number for"
    if dtype.scalar() == dtypes.bool:
        return None if val in (0, 1) else "is not a truth value (True, False, 0 or 1) for"
    if not dtypes.is_int(dtype):
        return None  # floats: inf and nan are values too
    if isinstance(val, float) and not (math.isfinite(val) and val == int(val)):
        return "is not an integer, as it must be for"
    bits = 8 * dtype.scalar().itemsize
    lo, hi = (0, 2**bits - 1) if dtypes.is_unsigned(dtype) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return None if lo <= val <= hi else f"is out of the range {lo}..{hi} of"


def verify_lazyop(*ast: LazyOp) -> None:
    """Check the rules of a kernel AST and raise ValueError naming the first one broken. The roots are STOREs into
    buffers 0, 1, ... of one size; inside, only a reduce op changes the shape (its axes become 1), and every other
    op's sources already have its shape (movement ops live in the ShapeTrackers)."""
    if not ast:
        raise ValueError("a kernel needs at least one STORE")
    shapes: dict[LazyOp, tuple[int, ...]] = {}

    # each node has passed check_lazyop_fields: as many LazyOp sources as its op takes, an arg of the right kind
    def shape_of(op: LazyOp, srcs: list[tuple[int, ...]]) -> tuple[int, ...]:  # from its sources' shapes
        if op.op is BufferOps.STORE:
            raise ValueError("a STORE is only allowed at the root of a kernel, not as a value inside it")
        shape = op.arg.st.shape if op.op in BufferOps else srcs[0]
        if op.op in ReduceOps:
            if any(not 0 <= a < len(shape) for a in op.arg):
                raise ValueError(f"{op.op} arg must be a tuple of axes of {shape}, got {op.arg!r}")
            shape = tuple(1 if i in op.arg else s for i, s in enumerate(shape))
        if any(s != srcs[0] for s in srcs):
            raise ValueError(
                f"implicit movement op: {op.op} sources have shapes {srcs}, expected {shape}"
                + _reduce_used_elsewhere(op.src, shape, shapes)
            )
        return shape

    for i, out in enumerate(ast):
        if not isinstance(out, LazyOp) or out.op is not BufferOps.STORE:
            raise ValueError(f"kernel outputs must be STOREs, got {getattr(out, 'op', out)!r}")
        if out.arg.idx != i:
            raise ValueError(f"output {i} must store into MemBuffer idx {i}, got {out.arg!r}")
        if out.arg.st.shape != ast[0].arg.st.shape:  # one loop nest writes them all
            outs = ", ".join(f"data{o.arg.idx} {o.arg.st.shape}" for o in ast)
            raise ValueError(f"outputs must have one shape: {outs} (one loop nest writes them, at the same size)")
        if (shape := walk_ast(out.src[0], shape_of, shapes)) != out.arg.st.shape:
            raise ValueError(
                f"STORE into buffer {i}: value shape {shape} != store shape {out.arg.st.shape}"
                + _reduce_used_elsewhere(out.src, out.arg.st.shape, shapes)
            )
        if where := _overlap(out.arg.st):  # several threads would write one element, in no order
            how = "may write" if where[2] or len(out.arg.st.views) > 1 else "writes"  # unlisted, or a lower view
            raise ValueError(
                f"STORE into buffer {i} {how} one element from several loop points (axes {where[1]} of {where[0]}): "
                "threads would race on it"
            )
    dtype_of: dict[int, tuple[str, DType]] = {}  # a buffer is one array: one dtype wherever it is read or written
    for x in (x for out in ast for x in out.lazyops if x.op in (BufferOps.LOAD, BufferOps.STORE)):
        how = "loaded" if x.op is BufferOps.LOAD else "stored"
        seen_how, seen = dtype_of.setdefault(x.arg.idx, (how, x.arg.dtype))
        if seen != x.arg.dtype:
            also = "" if how == seen_how else how + " "
            raise ValueError(f"buffer {x.arg.idx} is {seen_how} as {seen.name} and {also}as {x.arg.dtype.name}")
    # Several reduce ops share one kernel only as siblings over one loop nest: each reads the same shape and reduces
    # it to the same shape. tinygrad 0.9.1 loops every reduce over all of the kernel's reduce axes, so a reduce of
    # other axes (or of another reduce's result) would be computed wrong there; it is refused here.
    reduceops = dedup(x for out in ast for x in out.lazyops if x.op in ReduceOps)
    for r in reduceops[1:]:
        first = reduceops[0]
        if (shapes[r.src[0]], shapes[r]) != (shapes[first.src[0]], shapes[first]):
            nested = first in r.src[0].lazyops or r in first.src[0].lazyops
            raise ValueError(
                f"the reduce ops of one kernel must reduce the same shape to the same shape, but {first.op} reduces "
                f"{shapes[first.src[0]]} to {shapes[first]} and {r.op} reduces {shapes[r.src[0]]} to {shapes[r]}"
                + (" (one reduces the result of the other)" if nested else "")
                + ": they would share one set of reduce loops (split them into separate kernels)"
            )
    # A name is one variable in a kernel: the program gets one int argument per name, so `i` bound to two values in
    # two places (`x[i:i+4] + x[i:i+4]` at i=3 and at i=5), or of two ranges, would run with either of them.
    named: dict[str, Variable] = {}
    for v in sorted({v for out in ast for v in out.vars()}, key=lambda v: v.key):
        if (u := named.setdefault(v.expr, v)) != v:
            rebound = (u.min, u.max) == (v.min, v.max) and None not in (u._val, v._val)
            two = f"is two variables in this AST, {u.key} and {v.key}: a name is one variable"
            raise ValueError(f"{v.expr} " + (f"is bound to both {u._val} and {v._val}" if rebound else two))
    # An output may also be an input only where each thread reads the very element it writes: elsewhere
    # (`out[i] = out[i-1] + 1`) a thread would read an element another thread writes, in no defined order. And only
    # its own STORE reads it: another would read it before or after it is written, as the stores happen to be ordered.
    stores = {out.arg.idx: out.arg.st for out in ast}
    for out, x in ((out, x) for out in ast for x in out.lazyops if x.op is BufferOps.LOAD and x.arg.idx in stores):
        if x.arg.idx != out.arg.idx:
            why = f"loaded in the value of the STORE into buffer {out.arg.idx}: only its own STORE may read it"
            raise ValueError(f"buffer {x.arg.idx} is an output of this kernel, {why} (the other may run after it)")
        if not _reads_own_elements(x.arg.st, stores[x.arg.idx]):
            raise ValueError(
                f"buffer {x.arg.idx} is stored through {stores[x.arg.idx]} and loaded through {x.arg.st}: each loop "
                "point may read its output only where it writes it (threads would race on the other elements)"
            )


def _overlap(st: ShapeTracker) -> tuple[View, tuple[int, ...], bool] | None:
    """Where st may reach one element from two valid points: (the view, its axes that collide, whether only "may":
    too many points to list, or symbolic), else None. Each view, cut to its mask, is offset + sum(stride * index):
    taken from the smallest stride up, an axis that steps past all that the smaller ones reach adds new elements only;
    for one that doesn't (a stride-0 axis never does), the elements of those axes are listed and counted."""
    for view in st.views:
        if 0 in (v := view.shrink(view.mask) if view.mask else view).shape:
            return None  # it reaches nothing
        steps = [(s if lower_bound(s) >= 0 else -s, a) for a, s in enumerate(v.strides) if v.shape[a] != 1]
        reach, axes = 0, ()
        for step, a in sorted(steps, key=lambda x: upper_bound(x[0])):
            axes += (a,)
            if always_lt(reach, step):
                reach = reach + step * (v.shape[a] - 1)
                continue
            sizes = [v.shape[x] for x in axes]
            if not all_int(sizes + [v.strides[x] for x in axes]) or prod(sizes) > 1 << 16:
                return view, axes, True
            reached = {sum(v.strides[x] * i for x, i in zip(axes, p)) for p in itertools.product(*map(range, sizes))}
            if len(reached) < prod(sizes):
                return view, axes, False
            reach = max(reached) - min(reached)
    return None


def _reads_own_elements(load: ShapeTracker, store: ShapeTracker) -> bool:
    """Does the load, wherever it is valid, read the element the store writes at the same loop point? The store's
    reduced axes (1 in its shape) stand still along the load's: a reduce reads one output element all along them.
    Both are cut to the load's mask and compared; where that doesn't show it (say of two stacks of views): False."""
    store = store.expand(load.shape)
    if (mask := load.views[-1].mask) is not None:
        load, store = load.shrink(mask), store.shrink(mask)
    if load == store:
        return True
    (idx, valid), (store_idx, store_valid) = load.expr_idxs(), store.expr_idxs()
    return idx == store_idx and (store_valid.min == 1 or store_valid == valid)


def _reduce_used_elsewhere(srcs: Sequence[LazyOp], want: tuple[int, ...], shapes: dict[LazyOp, tuple[int, ...]]) -> str:
    """The reason to add when a source of the wrong shape computes on a reduce's result (of that shape)."""
    for src in (src for src in srcs if shapes[src] != want):
        for r in src.lazyops:
            if r.op in ReduceOps and shapes.get(r) == shapes[src]:
                return (
                    f": the result of {r.op} (shape {shapes[r]}) is used at shape {want}, which needs a movement "
                    "op after the reduce; tinygrad 0.9.1's Kernel has none (split it into two kernels)"
                )
    return ""


# Each op on Python numbers, to evaluate an AST where every buffer reads 0 (the padding of PADTO). The bool spellings
# are the renderer's (NEG is "not", ADD "or", ...); an undefined result (a division by zero) is nan.
_ON_NUMBERS: dict[Op, Callable[..., Any]] = {
    UnaryOps.EXP2: lambda a: 2.0**a, UnaryOps.LOG2: math.log2, UnaryOps.SIN: math.sin, UnaryOps.SQRT: math.sqrt,
    UnaryOps.NEG: operator.neg, UnaryOps.RECIP: lambda a: 1 / a, BinaryOps.ADD: operator.add,
    BinaryOps.MUL: operator.mul, BinaryOps.IDIV: lambda a, b: math.trunc(a / b), BinaryOps.MOD: math.fmod,
    BinaryOps.MAX: lambda a, b: a if a != a or a > b else b,  # numpy's maximum: a nan wins
    BinaryOps.CMPLT: operator.lt, BinaryOps.CMPNE: operator.ne, BinaryOps.XOR: operator.xor,
    BinaryOps.SHR: operator.rshift, BinaryOps.SHL: operator.lshift,
    TernaryOps.WHERE: lambda c, a, b: a if c else b, TernaryOps.MULACC: lambda a, b, c: a * b + c,
}
_ON_BOOLS: dict[Op, Callable[..., Any]] = {UnaryOps.NEG: operator.not_, BinaryOps.MUL: operator.and_}
_ON_BOOLS |= dict.fromkeys((BinaryOps.ADD, BinaryOps.MAX), operator.or_)  # the largest of two bools is their or


def value_on_zeros(x: LazyOp, srcs: list[Any]) -> Any:
    """What x computes from its sources' values (walk_ast's fn) where every LOAD and CONST reads 0, as a Python number
    (nan where C leaves it undefined)."""
    if x.op in BufferOps:
        return False if x.dtype == dtypes.bool else 0
    if x.op is UnaryOps.BITCAST and srcs[0] != 0:
        return math.nan  # the bits of anything but 0 mean something else in the new type
    if x.op is UnaryOps.CAST or x.op is UnaryOps.BITCAST:
        fn: Callable[..., Any] = bool if x.arg == dtypes.bool else int if dtypes.is_int(x.arg) else float
    else:
        src_dtype = x.src[1].dtype if x.op is TernaryOps.WHERE else x.src[0].dtype
        fn = (_ON_BOOLS.get(x.op) if src_dtype == dtypes.bool else None) or _ON_NUMBERS[x.op]
    try:
        return fn(*srcs)
    except (ArithmeticError, ValueError, TypeError):  # int(inf), 1 // 0, log2(-1), ...
        return math.nan


def reduce_padding_changes(k: Kernel) -> str | None:
    """Why padding a reduce axis of k (every buffer reads 0 there) would change one of its reduce ops, or None.
    tinygrad 0.9.1 checks only the first reduce op; every one of them sums the padding here."""
    for i, r in enumerate(k.reduceops):
        memo: dict[LazyOp, Any] = {}
        if r.op is not ReduceOps.SUM:
            why = f"a {r.op.name} reduce (only a SUM ignores added zeros)"
        elif unsafe := [op.op.name for op in r.src[0].lazyops if op.op in UNSAFE_PAD_OPS]:
            why = f"{', '.join(unsafe)} (tinygrad's UNSAFE_PAD_OPS)"
        elif (
            walk_ast(x := r.src[0], value_on_zeros, memo) != 0
        ):  # stricter than tinygrad: the SUM's source must be 0 there too
            while off := [s for s in x.src if memo[s] != 0]:  # down to the op that first makes something else of zeros
                x = off[0]
            why = f"{x.op.name} maps the padding's 0 to {memo[x]!r}, which the SUM would add"
        else:
            continue
        unchecked = f"the padding would change {r.op} (reduce op {i}), which tinygrad 0.9.1 doesn't check: "
        return why if i == 0 else unchecked + why
    return None


# -- the arguments of an opt, of apply_tensor_cores and of the movement ops (made tuples of sizes here) --


def check_opt(opt: Any, append_opt: Any) -> None:
    """apply_opt's arguments: an Opt whose axis and amount are of the kinds its op takes (KernelOptError)."""
    check_arg("apply_opt", "append_opt", append_opt, isinstance(append_opt, bool), "True or False")
    check(isinstance(opt, Opt) and isinstance(opt.op, OptOps), f"not an Opt: {opt!r}")
    if opt.op is OptOps.NOLOCALS:
        got = f"got {opt.axis} and {opt.amt}"
        check(opt.axis is None and opt.amt is None, f"NOLOCALS takes no axis and no amount, {got}")
        return
    check(is_int(opt.axis) and opt.axis >= 0, f"{opt.op.name} needs an int axis >= 0, got {opt.axis!r}")
    if opt.op is OptOps.TC:
        check(opt.amt in (0, 1, 2) and is_int(opt.amt), f"TC needs an amount (tc_opt) of 0, 1 or 2, got {opt.amt!r}")
    else:
        check(is_int(opt.amt) and opt.amt >= 0, f"{opt.op.name} needs an int amount >= 0, got {opt.amt!r}")


def check_tc_args(use_tensor_cores: Any, extra: Any, axis: Any, tc_opt: Any) -> None:
    """apply_tensor_cores's arguments: a wrong kind or range is a ValueError naming it, not a quiet False."""
    opts_ok = extra is None or (isinstance(extra, (list, tuple)) and all(isinstance(o, Opt) for o in extra))
    for name, x, ok, want in [
        ("use_tensor_cores", use_tensor_cores, is_int(use_tensor_cores) and use_tensor_cores in (0, 1, 2), "0, 1 or 2"),
        ("axis", axis, is_int(axis) and axis >= 0, "an int >= 0"),
        ("tc_opt", tc_opt, tc_opt is None or (is_int(tc_opt) and tc_opt in (0, 1, 2)), "None, 0, 1 or 2"),
        ("extra_opts", extra, opts_ok, "None or a list of Opts"),
    ]:
        check_arg("apply_tensor_cores", name, x, ok, want)


def check_create_args(shape: tuple, strides: Sequence | None, offset: Any, mask: Sequence | None) -> tuple:
    """View.create's checks of its arguments; returns the shape (numpy integers as ints) and the mask as tuples."""
    shape = shape if all(type(s) is int for s in shape) else tuple(_sint(s) for s in shape)
    if not all(is_sint(s) and lower_bound(s) >= 0 for s in shape):
        raise ValueError(f"View.create: sizes must be ints >= 0 or symbolic sizes >= 0 at every value, got {shape}")
    if strides is not None and (len(strides) != len(shape) or not all(map(is_sint, strides))):
        raise ValueError(f"View.create: strides {strides} must be one int per axis of {shape}")
    if not is_sint(offset):
        raise ValueError(f"View.create: offset must be an int, got {offset!r}")
    if mask is not None:
        mask = tuple(tuple(m) for m in mask)
        if len(mask) != len(shape) or any(len(m) != 2 or not all(map(is_sint, m)) for m in mask):
            raise ValueError(f"View.create: mask {mask} must be one (begin, end) pair of ints per axis of {shape}")
        # an empty range (begin >= end) masks the whole view off, whatever its numbers
        for (b, e), s in zip(mask, shape):
            if not any(isinstance(x, Node) for x in (b, e, s)) and b < e and not (0 <= b and e <= s):
                raise ValueError(f"View.create: mask {mask} has {(b, e)} outside an axis of size {s}")
    return shape, mask


def _bound_sizes(v: View, new_shape: tuple[sint, ...]) -> tuple[sint, ...] | None:
    """The sizes a reshape of a non-empty int shape to a symbolic one compares: each Variable at the value it is bound
    to. None for any other reshape (symbolic to symbolic: the products must be the same expression)."""
    if 0 not in v.shape and all_int(v.shape) and not all(type(x) is int for x in new_shape):
        return tuple(x.unbind()[1] if isinstance(x, Variable) else x for x in new_shape)
    return None


# Each movement op's rules on its argument, checked in order (what it needs: holds(view, arg)). A View's movement op
# calls check_movement_arg first, so that a bad argument fails naming its rule before anything is built.
MOVEMENT_RULES: dict[str, dict[str, Callable[[View, Any], bool]]] = {
    "pad": {
        "needs one (before, after) pair per axis": lambda v, a: len(a) == len(v.shape),
        "padding must be >= 0": lambda v, a: all(lower_bound(b) >= 0 and lower_bound(e) >= 0 for b, e in a),
    },
    "shrink": {
        "needs one (begin, end) pair per axis": lambda v, a: len(a) == len(v.shape),
        "each range must satisfy 0 <= begin <= end <= size at every value of the variables": lambda v, a: all(
            lower_bound(b) >= 0 and lower_bound(e - b) >= 0 and lower_bound(s - e) >= 0 for s, (b, e) in zip(v.shape, a)
        ),
    },
    "expand": {
        "must keep the number of axes": lambda v, a: len(a) == len(v.shape),
        "sizes must be >= 0": lambda v, a: all(lower_bound(x) >= 0 for x in a),
        "can't expand": lambda v, a: (
            0 not in v.shape or all((s == x == 0) or (s > 0 and x % s == 0) for s, x in zip(v.shape, a))
        ),
        "only axes of size 1 can be expanded": lambda v, a: (
            0 in v.shape or all(s == x or (s == 1 and st == 0) for s, x, st in zip(v.shape, a, v.strides))
        ),
    },
    "permute": {"must be a permutation of the axes": lambda v, a: sorted(a) == list(range(len(v.shape)))},
    "stride": {
        "needs one step per axis": lambda v, a: len(a) == len(v.shape),
        "steps must be non-zero ints": lambda v, a: all(isinstance(m, int) and m != 0 for m in a),
    },
    "reshape": {
        "sizes must be non-negative ints or symbolic": lambda v, a: all(is_sint(s) and lower_bound(s) >= 0 for s in a),
        "can't reshape an empty view to a non-empty one": lambda v, a: 0 not in v.shape or 0 in a,
        "a symbolic size must be a bound Variable": lambda v, a: all_int(_bound_sizes(v, a) or ()),
        "sizes differ": lambda v, a: 0 in v.shape or prod(v.shape) == prod(_bound_sizes(v, a) or a),
        "a non-contiguous view can only be given a symbolic shape of the same sizes": lambda v, a: (
            v.contiguous or v.shape == (_bound_sizes(v, a) or v.shape)
        ),
    },
}


def check_movement_arg(op: str, v: View, arg: Any) -> None:
    for why, holds in MOVEMENT_RULES[op].items():
        if not holds(v, arg):
            raise ValueError(f"{op}: {why} (shape {v.shape}, arg {arg})")


def movement_arg(op: str, shape: tuple[sint, ...], arg: Any, pairs: bool = False) -> tuple:
    """A movement op's argument as a (hashable) tuple of sizes, or of (begin, end) pairs of sizes. A size is a
    Python int, a numpy integer (not a bool) or a symbolic Node; the view op checks the values."""
    if type(arg) is tuple and not pairs and all(type(x) is int for x in arg):
        return arg  # the common case (the Kernel's own calls), already in shape

    def size(x: Any) -> sint:
        if not is_sint(x):
            raise TypeError
        return _sint(x)

    try:
        return tuple((size(b), size(e)) for b, e in arg) if pairs else tuple(size(x) for x in arg)
    except (TypeError, ValueError):
        want = "a tuple of (begin, end) pairs of ints" if pairs else "a tuple of ints"
        raise ValueError(f"{op}: expected {want} or symbolic sizes (shape {shape}, arg {arg!r})") from None


if __name__ == "__main__":  # python kernel.py demo ...: the demo is demo.py, its pages (--html) page.py, beside it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import demo
    import page  # page imports demo, so here (not in demo) its writer is handed to the demo's command line
    sys.exit(demo.run_command_line(lambda: demo.main(pages=page.write), "python kernel.py"))
