"""kernel.py: tinygrad 0.9.1's kernel optimizer in one readable file.

The pipeline, top to bottom, in the order data flows through it:

    helpers -> dtypes -> ops / AST -> symbolic indices -> View -> ShapeTracker
    -> Kernel (shape bookkeeping) -> OptOps (apply_opt) -> tensor cores -> heuristics -> targets -> demo

A kernel is an AST of LazyOps whose leaves LOAD buffers through ShapeTrackers. The Kernel puts every buffer's
ShapeTracker on one common iteration shape, and each optimization reshapes and permutes that shape: an axis is split
in two and one part moved to where it means "global", "local", "grouped", "loop" or "unrolled". The colours of
`Kernel.colored_shape()` show which part is which (see the legend above `Kernel.colors`).

Run `python kernel.py demo` to watch it happen. Only the standard library is imported at module level.
"""
from __future__ import annotations

import functools
import itertools
import math
import operator
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

T = TypeVar("T")

# ============================================================================================================
# helpers
# ============================================================================================================


def prod(xs: Iterable[int]) -> int:
    """Product of a sequence (1 for an empty one)."""
    return functools.reduce(operator.mul, xs, 1)


def dedup(xs: Iterable[T]) -> List[T]:
    """The items of xs without repeats, first occurrence kept, order kept."""
    return list(dict.fromkeys(xs))


def flatten(xss: Iterable[Iterable[T]]) -> List[T]:
    return [x for xs in xss for x in xs]


def all_same(xs: Sequence[Any]) -> bool:
    return all(x == xs[0] for x in xs)


def argsort(xs: Sequence[Any]) -> Tuple[int, ...]:
    return tuple(sorted(range(len(xs)), key=xs.__getitem__))


def round_up(num: int, amt: int) -> int:
    return (num + amt - 1) // amt * amt


def partition(xs: Iterable[T], pred: Callable[[T], bool]) -> Tuple[List[T], List[T]]:
    yes: List[T] = []
    no: List[T] = []
    for x in xs:
        (yes if pred(x) else no).append(x)
    return yes, no


def getenv(key: str, default: int = 0) -> int:
    """An integer knob from the environment, as tinygrad reads MV, NOLOCALS, TC, ..."""
    return int(os.environ.get(key, default))


ANSI_COLORS = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]


def colored(text: Any, color: Optional[str]) -> str:
    """Wrap text in tinygrad's ANSI colour code; an UPPERCASE colour name is the bright variant.

    Plain text when the NO_COLOR environment variable is set (https://no-color.org)."""
    if color is None or os.environ.get("NO_COLOR"):
        return str(text)
    code = 30 + ANSI_COLORS.index(color.lower()) + (60 if color.isupper() else 0)
    return f"\x1b[{code}m{text}\x1b[0m"


def ansistrip(s: str) -> str:
    return re.sub(r"\x1b\[(K|.*?m)", "", s)


def ansilen(s: str) -> int:
    return len(ansistrip(s))


def get_contraction(old_shape: Tuple[int, ...], new_shape: Tuple[int, ...]) -> Optional[List[List[int]]]:
    """Which axes of old_shape multiply into each axis of new_shape, or None if new_shape isn't a merge of old."""
    acc_old = list(itertools.accumulate(old_shape, operator.mul))
    acc_new = list(itertools.accumulate(new_shape, operator.mul))
    try:
        split = [acc_old.index(acc) + 1 if acc != 1 else 0 for acc in acc_new]
    except ValueError:
        return None
    return [list(range(st, ed)) for st, ed in zip([0] + split[:-1], split[:-1] + [len(old_shape)])]


# ============================================================================================================
# dtypes
# ============================================================================================================


@dataclass(frozen=True, order=True)
class DType:
    """A scalar (or vector, count > 1) element type. `name` is the C name; `priority` orders type promotion."""
    priority: int
    itemsize: int
    name: str
    fmt: Optional[str]
    count: int

    def __repr__(self) -> str:
        return f"dtypes.{INVERSE_DTYPES_DICT.get(self.name, self.name)}"

    def vec(self, sz: int) -> DType:
        if sz <= 1 or self.count != 1:
            raise ValueError(f"can't vectorize {self} with size {sz}")
        return DType(self.priority, self.itemsize * sz, f"{INVERSE_DTYPES_DICT[self.name]}{sz}", None, sz)

    def scalar(self) -> DType:
        return DTYPES_DICT[self.name[:-len(str(self.count))]] if self.count > 1 else self


@dataclass(frozen=True, repr=False)
class ImageDType(DType):
    """A 2D RGBA texture: `shape` is (height, width, 4); elements are computed as `base`."""
    shape: Tuple[int, ...] = ()
    base: DType = None  # type: ignore[assignment]

    def scalar(self) -> DType:
        return self.base

    def vec(self, sz: int) -> DType:
        return self.base.vec(sz)

    def __repr__(self) -> str:
        return f"dtypes.{self.name}({self.shape})"


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

    default_float = float32
    default_int = int32

    @staticmethod
    def imageh(shape: Tuple[int, ...]) -> ImageDType:
        return ImageDType(100, 2, "imageh", "e", 1, shape=tuple(shape), base=dtypes.float32)

    @staticmethod
    def imagef(shape: Tuple[int, ...]) -> ImageDType:
        return ImageDType(100, 4, "imagef", "f", 1, shape=tuple(shape), base=dtypes.float32)

    @staticmethod
    def is_float(x: DType) -> bool:
        return x.scalar() in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)

    @staticmethod
    def is_unsigned(x: DType) -> bool:
        return x.scalar() in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)

    @staticmethod
    def is_int(x: DType) -> bool:
        return x.scalar() in (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64) or dtypes.is_unsigned(x)

    @staticmethod
    def fields() -> Dict[str, DType]:
        return DTYPES_DICT


DTYPES_DICT: Dict[str, DType] = {k: v for k, v in vars(dtypes).items() if isinstance(v, DType) and not k.startswith("default")}
INVERSE_DTYPES_DICT: Dict[str, str] = {v.name: k for k, v in DTYPES_DICT.items()}

# ============================================================================================================
# ops: the kernel's AST
# ============================================================================================================


class UnaryOps(Enum):
    """A -> A, elementwise."""
    EXP2 = auto(); LOG2 = auto(); CAST = auto(); BITCAST = auto(); SIN = auto(); SQRT = auto(); NEG = auto(); RECIP = auto()  # noqa: E702, E501


class BinaryOps(Enum):
    """A, A -> A, elementwise. IDIV truncates toward zero; CMPLT and CMPNE give bool."""
    ADD = auto(); MUL = auto(); IDIV = auto(); MAX = auto(); MOD = auto(); CMPLT = auto(); CMPNE = auto(); XOR = auto()  # noqa: E702, E501
    SHR = auto(); SHL = auto()  # noqa: E702


class TernaryOps(Enum):
    """A, A, A -> A, elementwise."""
    WHERE = auto(); MULACC = auto()  # noqa: E702


class ReduceOps(Enum):
    """A -> B: the reduced axes (the arg) become 1."""
    SUM = auto(); MAX = auto()  # noqa: E702


class BufferOps(Enum):
    """The leaves and the root of a kernel: read a buffer, read a constant, write a buffer."""
    LOAD = auto(); CONST = auto(); STORE = auto()  # noqa: E702


Op = Union[UnaryOps, BinaryOps, TernaryOps, ReduceOps, BufferOps]

# ops that don't keep f(0) == 0: padding their input with zeros would change a SUM, so PADTO refuses them
UNSAFE_PAD_OPS = {UnaryOps.RECIP, UnaryOps.LOG2, UnaryOps.EXP2, BinaryOps.IDIV}


@dataclass(frozen=True)
class MemBuffer:
    """Buffer number `idx` of the kernel (0 is the output), read or written through the ShapeTracker `st`."""
    idx: int
    dtype: DType
    st: ShapeTracker


@dataclass(frozen=True)
class ConstBuffer:
    """A constant broadcast to the shape of `st` (its mask can still zero out padding)."""
    val: Union[int, float, bool]
    dtype: DType
    st: ShapeTracker


@dataclass(frozen=True)
class LazyOp:
    """One node of the AST. Hashable, and compares by value (op, src and arg)."""
    op: Op
    src: Tuple[LazyOp, ...] = ()
    arg: Any = None

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.op, self.src, self.arg))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, LazyOp) or self._hash != other._hash:
            return False
        return self.op == other.op and self.arg == other.arg and self.src == other.src

    def __repr__(self) -> str:
        return f"LazyOp({self.op}, src={self.src}, arg={self.arg})"

    @functools.cached_property
    def dtype(self) -> DType:
        if self.op in BufferOps:
            return self.arg.dtype
        if self.op in (UnaryOps.CAST, UnaryOps.BITCAST):
            return self.arg
        return dtypes.bool if self.op in (BinaryOps.CMPLT, BinaryOps.CMPNE) else self.src[-1].dtype

    @functools.cached_property
    def lazyops(self) -> List[LazyOp]:
        """This op and every op below it, each once, parents before children."""
        return dedup([self] + [x for s in self.src for x in s.lazyops])


def verify_lazyop(*ast: LazyOp) -> None:
    """Check the rules of a kernel AST and raise ValueError naming the first one broken.

    The roots are STOREs into buffers 0, 1, ... of one size; inside, only a reduce op changes the shape (its axes
    become 1), and every other op's sources already have its shape (movement ops live in the ShapeTrackers)."""
    if not ast:
        raise ValueError("a kernel needs at least one STORE")
    shapes: Dict[LazyOp, Tuple[int, ...]] = {}

    def shape_of(op: LazyOp) -> Tuple[int, ...]:
        if op in shapes:
            return shapes[op]
        if not isinstance(op, LazyOp):
            raise ValueError(f"AST node {op!r} is not a LazyOp")
        srcs = [shape_of(s) for s in op.src]
        if op.op in BufferOps:
            if not isinstance(op.arg, (MemBuffer, ConstBuffer)):
                raise ValueError(f"{op.op} needs a MemBuffer or ConstBuffer arg, got {op.arg!r}")
            shape = op.arg.st.shape
        elif not srcs:
            raise ValueError(f"{op.op} has no sources")
        else:
            shape = srcs[0]
        if op.op in ReduceOps:
            if not isinstance(op.arg, tuple) or any(not 0 <= a < len(shape) for a in op.arg):
                raise ValueError(f"{op.op} arg must be a tuple of axes of {shape}, got {op.arg!r}")
            shape = tuple(1 if i in op.arg else s for i, s in enumerate(shape))
        for s in srcs:
            if s != srcs[0] or (op.op in BufferOps and s != shape):
                raise ValueError(f"implicit movement op: {op.op} sources have shapes {srcs}, expected {shape}")
        shapes[op] = shape
        return shape

    for i, out in enumerate(ast):
        if not isinstance(out, LazyOp) or out.op is not BufferOps.STORE:
            raise ValueError(f"kernel outputs must be STOREs, got {getattr(out, 'op', out)!r}")
        if not isinstance(out.arg, MemBuffer) or out.arg.idx != i:
            raise ValueError(f"output {i} must store into MemBuffer idx {i}, got {out.arg!r}")
        if len(out.src) != 1:
            raise ValueError(f"STORE into buffer {i} needs exactly one source, got {len(out.src)}")
        if out.arg.st.size != ast[-1].arg.st.size:
            raise ValueError(f"outputs must have the same size, got {out.arg.st.size} and {ast[-1].arg.st.size}")
        if shape_of(out.src[0]) != out.arg.st.shape:
            raise ValueError(f"STORE into buffer {i}: value shape {shape_of(out.src[0])} != store shape {out.arg.st.shape}")
    reduceops = dedup(x for out in ast for x in out.lazyops if x.op in ReduceOps)
    if len(reduceops) > 1:
        raise ValueError(f"a kernel may hold at most one reduce op, got {len(reduceops)}")


# ============================================================================================================
# symbolic: index expressions with known bounds
# ============================================================================================================
# An index into a buffer is an integer expression of the loop variables idx0, idx1, ... Every node knows its
# smallest and largest value, and the constructors simplify as they build, using those bounds: a `% 8` of
# something already in [0, 8) disappears, `(a*8 + b) // 8` becomes `a + b//8` when b < 8, like terms merge.
# This is what lets real_strides() read the stride of each axis straight off the expression. The rules are
# tinygrad 0.9.1's, so the expressions (and so every heuristic that looks at them) come out the same.
# Divisors and moduli are positive Python ints; floor division and modulo follow Python, and are only ever
# applied to non-negative values so C's truncating `/` and `%` give the same result.


class Node:
    """Base class of index expressions. `min`/`max` bound its value; `render()` prints it as C."""
    min: int
    max: int

    # -- identity: two nodes are equal when they print the same (with variable ranges) --
    @functools.cached_property
    def key(self) -> str:
        return self.render(debug=True)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self.key == other.key

    def __bool__(self) -> bool:
        return not (self.min == self.max == 0)

    def __repr__(self) -> str:
        return f"<{self.key}>"

    def render(self, debug: bool = False) -> str:
        raise NotImplementedError

    def vars(self) -> set:
        return set()

    # -- arithmetic --
    def __neg__(self) -> Node:
        return self * -1

    def __add__(self, b: Union[Node, int]) -> Node:
        return Node.sum([self, b if isinstance(b, Node) else NumNode(b)])

    def __radd__(self, b: int) -> Node:
        return self + b

    def __sub__(self, b: Union[Node, int]) -> Node:
        return self + -b

    def __rsub__(self, b: int) -> Node:
        return -self + b

    def __mul__(self, b: int) -> Node:
        if b == 0:
            return NumNode(0)
        if b == 1:
            return self
        return create_node(MulNode(self, b))

    def __rmul__(self, b: int) -> Node:
        return self * b

    def __floordiv__(self, b: int, factoring_allowed: bool = True) -> Node:
        if b < 0:
            return (self * -1).__floordiv__(-b, factoring_allowed)
        if b == 0:
            raise ZeroDivisionError(f"{self} // 0")
        if b == 1:
            return self
        if self.min < 0:
            # keep the numerator non-negative: a//b == (a - k*b)//b + k, with k*b <= a.min
            offset = self.min // b
            return (self + -offset * b).__floordiv__(b, factoring_allowed=False) + offset
        return create_node(DivNode(self, b))

    def __mod__(self, b: int) -> Node:
        if b <= 0:
            raise ValueError(f"modulo by {b} is not supported")
        if b == 1:
            return NumNode(0)
        if self.min >= 0 and self.max < b:
            return self  # already in range
        if self.min // b == self.max // b:
            return self - b * (self.min // b)  # never wraps: a constant shift
        if self.min < 0:
            return (self - (self.min // b) * b) % b
        return create_node(ModNode(self, b))

    @staticmethod
    def sum(nodes: List[Node]) -> Node:
        """Add nodes, flattening nested sums, merging like terms (x*2 + x*3 -> x*5) and folding constants."""
        nodes = [x for x in nodes if x.max or x.min]
        if not nodes:
            return NumNode(0)
        if len(nodes) == 1:
            return nodes[0]
        coeffs: Dict[Node, int] = {}
        const = 0
        for node in SumNode(nodes).flat_components:
            if isinstance(node, NumNode):
                const += node.b
            elif isinstance(node, MulNode):
                coeffs[node.a] = coeffs.get(node.a, 0) + node.b
            else:
                coeffs[node] = coeffs.get(node, 0) + 1
        terms: List[Node] = [MulNode(a, c) if c != 1 else a for a, c in coeffs.items() if c != 0]
        if const:
            terms.append(NumNode(const))
        if len(terms) > 1:
            return create_node(SumNode(terms))
        return terms[0] if terms else NumNode(0)

    @staticmethod
    def ands(nodes: List[Node]) -> Node:
        """Logical and of 0/1 conditions; always-true ones are dropped, an always-false one wins."""
        if not nodes:
            return NumNode(1)
        if len(nodes) == 1:
            return nodes[0]
        if any(not x for x in nodes):
            return NumNode(0)
        nodes = [x for x in nodes if x.min != x.max]
        if len(nodes) > 1:
            return create_node(AndNode(nodes))
        return nodes[0] if nodes else NumNode(1)


class Variable(Node):
    """A loop index with the range [min, max]. A range of one value is just that number."""

    def __new__(cls, expr: str, nmin: int, nmax: int):
        if not 0 <= nmin <= nmax:
            raise ValueError(f"invalid Variable {expr} with range [{nmin}, {nmax}]")
        if nmin == nmax:
            return NumNode(nmin)
        return super().__new__(cls)

    def __init__(self, expr: str, nmin: int, nmax: int):
        self.expr, self.min, self.max = expr, nmin, nmax

    def __getnewargs__(self) -> Tuple[str, int, int]:
        return (self.expr, self.min, self.max)

    def vars(self) -> set:
        return {self}

    def render(self, debug: bool = False) -> str:
        return f"{self.expr}[{self.min}-{self.max}]" if debug else self.expr


class NumNode(Node):
    """An integer constant. Compares equal to the int it holds."""

    def __init__(self, num: int):
        if not isinstance(num, int):
            raise ValueError(f"NumNode needs an int, got {num!r}")
        self.b = num
        self.min = self.max = num

    def __mul__(self, b: int) -> Node:
        return NumNode(self.b * b)

    def __eq__(self, other: object) -> bool:
        return self.b == other

    def __hash__(self) -> int:
        return hash(self.b)

    def render(self, debug: bool = False) -> str:
        return str(self.b)


def create_node(node: Node) -> Node:
    """A node whose bounds pin it to one value is that value."""
    if node.min > node.max:
        raise ValueError(f"min {node.min} > max {node.max} in {type(node).__name__}")
    return NumNode(node.min) if node.min == node.max else node


class OpNode(Node):
    """A node `a OP b` with b a Python int."""

    def __init__(self, a: Node, b: int):
        self.a, self.b = a, b
        self.min, self.max = self.get_bounds()

    def vars(self) -> set:
        return self.a.vars()

    def get_bounds(self) -> Tuple[int, int]:
        raise NotImplementedError


class LtNode(OpNode):
    """1 if a < b else 0."""

    def get_bounds(self) -> Tuple[int, int]:
        if self.a == self.b:
            return (0, 0)
        return (1, 1) if self.a.max < self.b else (0, 0) if self.a.min >= self.b else (0, 1)

    def render(self, debug: bool = False) -> str:
        return f"({self.a.render(debug)}<{self.b})"


class MulNode(OpNode):
    """a * b."""

    def __mul__(self, b: int) -> Node:
        return self.a * (self.b * b)  # two constant multiplies are one

    def __floordiv__(self, b: int, factoring_allowed: bool = False) -> Node:
        if self.b % b == 0:
            return self.a * (self.b // b)
        if b % self.b == 0 and self.b > 0:
            return self.a // (b // self.b)
        return Node.__floordiv__(self, b, factoring_allowed)

    def __mod__(self, b: int) -> Node:
        return Node.__mod__(self.a * (self.b % b), b)

    def get_bounds(self) -> Tuple[int, int]:
        lo, hi = self.a.min * self.b, self.a.max * self.b
        return (lo, hi) if self.b >= 0 else (hi, lo)

    def render(self, debug: bool = False) -> str:
        return f"({self.a.render(debug)}*{self.b})"


class DivNode(OpNode):
    """a // b for a >= 0."""

    def __floordiv__(self, b: int, factoring_allowed: bool = False) -> Node:
        return self.a // (self.b * b)  # two divides are one

    def get_bounds(self) -> Tuple[int, int]:
        return self.a.min // self.b, self.a.max // self.b

    def render(self, debug: bool = False) -> str:
        return f"({self.a.render(debug)}{'//' if debug else '/'}{self.b})"


class ModNode(OpNode):
    """a % b for a >= 0."""

    def __mod__(self, b: int) -> Node:
        if self.b % b == 0:
            return self.a % b  # (a % 8) % 4 == a % 4
        return Node.__mod__(self, b)

    def __floordiv__(self, b: int, factoring_allowed: bool = True) -> Node:
        if self.b % b == 0:
            return (self.a // b) % (self.b // b)  # (a % 8) // 4 == (a // 4) % 2
        return Node.__floordiv__(self, b, factoring_allowed)

    def get_bounds(self) -> Tuple[int, int]:
        lo, hi = self.a.min, self.a.max
        if hi - lo >= self.b or (lo != hi and lo % self.b >= hi % self.b):
            return (0, self.b - 1)  # wraps around
        return lo % self.b, hi % self.b

    def render(self, debug: bool = False) -> str:
        return f"({self.a.render(debug)}%{self.b})"


class RedNode(Node):
    """A node over a list of nodes."""

    def __init__(self, nodes: List[Node]):
        self.nodes = nodes
        self.min, self.max = self.get_bounds()

    def vars(self) -> set:
        return set().union(*[x.vars() for x in self.nodes])

    def get_bounds(self) -> Tuple[int, int]:
        raise NotImplementedError


class SumNode(RedNode):
    """a + b + ..."""

    def get_bounds(self) -> Tuple[int, int]:
        return sum(x.min for x in self.nodes), sum(x.max for x in self.nodes)

    @property
    def flat_components(self) -> List[Node]:
        return [y for x in self.nodes for y in (x.flat_components if isinstance(x, SumNode) else [x])]

    def __mul__(self, b: int) -> Node:
        return Node.sum([x * b for x in self.nodes])  # distribute

    def __floordiv__(self, b: int, factoring_allowed: bool = True) -> Node:
        if b == 1:
            return self
        if not factoring_allowed:
            return Node.__floordiv__(self, b, factoring_allowed)
        # split off the terms b divides exactly; then divide the rest by a common factor first if there is one
        divided: List[Node] = []
        rest: List[Node] = []
        gcd, divisor = b, 1
        for x in self.flat_components:
            if isinstance(x, (NumNode, MulNode)):
                if x.b % b == 0:
                    divided.append(x // b)
                    continue
                if isinstance(x, NumNode) and (whole := x.b // b):
                    divided.append(NumNode(whole))
                    x = NumNode(x.b - b * whole)
                rest.append(x)
                gcd = math.gcd(gcd, x.b)
                if isinstance(x, MulNode) and divisor == 1 and b % x.b == 0:
                    divisor = x.b
            else:
                rest.append(x)
                gcd = 1
        if gcd > 1:
            return Node.sum(divided) + Node.sum(rest).__floordiv__(gcd) // (b // gcd)
        if divisor > 1:
            return Node.sum(divided) + Node.sum(rest).__floordiv__(divisor) // (b // divisor)
        return Node.sum(divided) + Node.__floordiv__(Node.sum(rest), b)

    def __mod__(self, b: int) -> Node:
        return Node.__mod__(Node.sum([x % b if isinstance(x, (NumNode, MulNode)) else x for x in self.nodes]), b)

    def render(self, debug: bool = False) -> str:
        return f"({'+'.join(sorted(x.render(debug) for x in self.nodes))})"


class AndNode(RedNode):
    """a && b && ... of 0/1 conditions."""

    def get_bounds(self) -> Tuple[int, int]:
        return min(x.min for x in self.nodes), max(x.max for x in self.nodes)

    def render(self, debug: bool = False) -> str:
        return f"({(' and ' if debug else '&&').join(sorted(x.render(debug) for x in self.nodes))})"


def create_lt_node(lhs: Node, b: int) -> Node:
    """lhs < b, simplified: constants move to the right, and `a*8 + c < 16` with 0 <= c < 8 becomes `a < 2`."""
    if isinstance(lhs, SumNode):
        terms = []
        for x in lhs.nodes:
            if isinstance(x, NumNode):
                b -= x.b
            else:
                terms.append(x)
        lhs = Node.sum(terms)
        nodes = lhs.nodes if isinstance(lhs, SumNode) else [lhs]
        muls, others = partition(nodes, lambda x: isinstance(x, MulNode) and x.b > 0 and x.max >= b)
        if muls:
            gcd = b
            for x in muls:
                gcd = math.gcd(gcd, x.b)
            rest = Node.sum(others)
            if rest.min >= 0 and rest.max < gcd:
                lhs, b = Node.sum([m // gcd for m in muls]), b // gcd
        return create_node(LtNode(lhs, b)) if isinstance(lhs, SumNode) else create_lt_node(lhs, b)
    if isinstance(lhs, MulNode):
        if lhs.b == -1:
            return create_node(LtNode(lhs, b))
        sign = 1 if lhs.b > 0 else -1
        return create_node(LtNode(lhs.a * sign, (b + abs(lhs.b) - 1) // abs(lhs.b)))
    return create_node(LtNode(lhs, b))


def create_ge_node(lhs: Node, b: int) -> Node:
    """lhs >= b, written as -lhs < -b + 1."""
    return create_lt_node(-lhs, -b + 1)


# ============================================================================================================
# View: one strided, offset, masked window onto a flat buffer
# ============================================================================================================
# A View maps an index (i0, i1, ...) of `shape` to the flat buffer position offset + sum(i_k * strides[k]).
# If there is a mask, element i is valid only when mask[k][0] <= i_k < mask[k][1] on every axis; invalid
# elements read as 0 (that is how padding is expressed without copying).


def canonicalize_strides(shape: Tuple[int, ...], strides: Tuple[int, ...]) -> Tuple[int, ...]:
    """An axis of size 1 is never moved along, so its stride is irrelevant: make it 0."""
    return tuple(0 if s == 1 else st for s, st in zip(shape, strides))


@functools.lru_cache(maxsize=None)
def strides_for_shape(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """Row-major (C order) strides of a contiguous shape."""
    if not shape:
        return ()
    strides = tuple(itertools.accumulate(reversed(shape[1:]), operator.mul, initial=1))[::-1]
    return canonicalize_strides(shape, strides)


@functools.lru_cache(maxsize=None)
def _merge_dims(shape: Tuple[int, ...], strides: Tuple[int, ...],
                mask: Optional[Tuple[Tuple[int, int], ...]] = None) -> Tuple[Tuple[int, int, int], ...]:
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


@functools.lru_cache(maxsize=None)
def _reshape_mask(view: View, new_shape: Tuple[int, ...]) -> Tuple[Optional[Tuple[Tuple[int, int], ...]], bool]:
    """The mask of `view` on new_shape, and True if a mask can't be expressed there (a mask cut by the reshape)."""
    if view.mask is None:
        return None, False
    empty = ((0, 0),) * len(new_shape)
    new_mask: List[Tuple[int, int]] = []
    r_masks, r_shape, r_new_shape = reversed(view.mask), reversed(view.shape), reversed(new_shape)
    curr_stride, old_dim, new_dim, mask = 1, next(r_shape, 1), next(r_new_shape, 1), next(r_masks, (0, 1))
    if mask[1] - mask[0] < 1:
        return empty, False
    while len(new_mask) < len(new_shape):
        (lo, hi), next_stride = mask, new_dim * curr_stride
        if old_dim >= next_stride:  # the old axis splits into this new axis and more
            if old_dim == next_stride:  # exact: the mask carries over
                new_mask.append((lo // curr_stride, (hi - 1) // curr_stride + 1))
                curr_stride, old_dim, new_dim, mask = 1, next(r_shape, 1), next(r_new_shape, 1), next(r_masks, (0, 1))
                if mask[1] - mask[0] < 1:
                    return empty, False
            else:  # only if the split doesn't cut through the masked range
                if (((lo % next_stride != 0 or hi % next_stride != 0) and lo // next_stride != (hi - 1) // next_stride)
                        or old_dim % next_stride != 0):
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


def un1d(shape: Tuple[int, ...], offs: int) -> List[int]:
    """The multi-index of flat position offs in a contiguous `shape`."""
    result = []
    for stride in strides_for_shape(shape):
        here = offs // stride if stride else 0
        result.append(here)
        offs -= here * stride
    return result


def _check_arg(op: str, shape: Tuple[int, ...], arg: Any, ok: bool, why: str) -> None:
    if not ok:
        raise ValueError(f"{op}: {why} (shape {shape}, arg {arg})")


@dataclass(frozen=True)
class View:
    """A strided, offset, optionally masked view of a flat buffer. Build with `View.create`."""
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    offset: int
    mask: Optional[Tuple[Tuple[int, int], ...]]
    contiguous: bool

    @functools.lru_cache(maxsize=None)  # noqa: B019 (views are immutable and shared)
    def size(self) -> int:
        return prod(self.shape)

    @staticmethod
    def create(shape: Sequence[int], strides: Optional[Sequence[int]] = None, offset: int = 0,
               mask: Optional[Sequence[Sequence[int]]] = None) -> View:
        """Make a View in canonical form, so that equal views compare equal.

        Size-1 axes get stride 0; a mask that covers everything is dropped; a masked axis that leaves a single
        index becomes stride 0 with that index folded into the offset; an empty mask zeroes everything."""
        shape = tuple(shape)
        if strides is not None and len(strides) != len(shape):
            raise ValueError(f"View.create: {len(strides)} strides for shape {shape}")
        if mask is not None and (len(mask) != len(shape) or any(len(m) != 2 for m in mask)):
            raise ValueError(f"View.create: mask {mask} must be one (begin, end) pair per axis of {shape}")
        return View._create(shape, tuple(strides) if strides is not None else None, offset,
                            tuple((int(b), int(e)) for b, e in mask) if mask is not None else None)

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def _create(shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], offset: int,
                mask: Optional[Tuple[Tuple[int, int], ...]]) -> View:
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

    def _resize(self, arg: Tuple[Tuple[int, int], ...], mask: Optional[Tuple[Tuple[int, int], ...]] = None) -> View:
        """Window [b, e) on each axis (b may be negative and e past the end when padding)."""
        offset = sum(st * b for st, (b, _) in zip(self.strides, arg))
        if self.mask:
            moved = tuple((max(0, min(mb - b, e - b)), max(0, min(me - b, e - b))) for (mb, me), (b, e) in zip(self.mask, arg))
            mask = tuple((max(b1, b2), min(e1, e2)) for (b1, e1), (b2, e2) in zip(moved, mask)) if mask else moved
        shape = tuple(e - b for b, e in arg)
        if mask is not None and all(m == (0, s) for m, s in zip(mask, shape)):
            mask = None
        return View.create(shape, self.strides, self.offset + offset, mask)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def pad(self, arg: Tuple[Tuple[int, int], ...]) -> View:
        """Add arg[k] = (before, after) invalid elements around axis k."""
        _check_arg("pad", self.shape, arg, len(arg) == len(self.shape), "needs one (before, after) pair per axis")
        _check_arg("pad", self.shape, arg, all(b >= 0 and e >= 0 for b, e in arg), "padding must be >= 0")
        if not any(b or e for b, e in arg):
            return self
        window = tuple((-b, s + e) for s, (b, e) in zip(self.shape, arg))
        mask = tuple((b, s + b) for s, (b, _) in zip(self.shape, arg))
        return self._resize(window, mask)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def shrink(self, arg: Tuple[Tuple[int, int], ...]) -> View:
        """Keep [begin, end) of each axis."""
        _check_arg("shrink", self.shape, arg, len(arg) == len(self.shape), "needs one (begin, end) pair per axis")
        _check_arg("shrink", self.shape, arg, all(0 <= b <= e <= s for s, (b, e) in zip(self.shape, arg)),
                   "each range must satisfy 0 <= begin <= end <= size")
        return self._resize(arg)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def expand(self, new_shape: Tuple[int, ...]) -> View:
        """Broadcast axes of size 1 to new sizes (stride 0: every index reads the same element)."""
        _check_arg("expand", self.shape, new_shape, len(new_shape) == len(self.shape), "must keep the number of axes")
        if 0 in self.shape:
            _check_arg("expand", self.shape, new_shape, all((s == x == 0) or (s > 0 and x % s == 0)
                                                            for s, x in zip(self.shape, new_shape)), "can't expand")
            return View.create(new_shape)
        _check_arg("expand", self.shape, new_shape, all(s == x or (s == 1 and st == 0)
                                                        for s, x, st in zip(self.shape, new_shape, self.strides)),
                   "only axes of size 1 can be expanded")
        mask = None
        if self.mask:
            mask = tuple((((0, 0) if m != (0, 1) else (0, ns)) if s != ns else m)
                         for m, s, ns in zip(self.mask, self.shape, new_shape))
        return View.create(new_shape, self.strides, self.offset, mask)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def permute(self, axis: Tuple[int, ...]) -> View:
        """Reorder the axes: new axis k is old axis axis[k]."""
        _check_arg("permute", self.shape, axis, sorted(axis) == list(range(len(self.shape))),
                   "must be a permutation of the axes")
        return View.create(tuple(self.shape[a] for a in axis), tuple(self.strides[a] for a in axis), self.offset,
                           tuple(self.mask[a] for a in axis) if self.mask is not None else None)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def stride(self, mul: Tuple[int, ...]) -> View:
        """Take every mul[k]-th element of axis k; a negative mul walks the axis backwards (a flip)."""
        _check_arg("stride", self.shape, mul, len(mul) == len(self.shape), "needs one step per axis")
        _check_arg("stride", self.shape, mul, all(isinstance(m, int) and m != 0 for m in mul), "steps must be non-zero ints")
        strides = tuple(z * m for z, m in zip(self.strides, mul))
        new_shape = tuple((s + abs(m) - 1) // abs(m) for s, m in zip(self.shape, mul))
        offset = sum((s - 1) * z for s, z, m in zip(self.shape, self.strides, mul) if m < 0)
        mask = None
        if self.mask is not None:
            mask = tuple((((mb if m > 0 else s - me) + abs(m) - 1) // abs(m), ((me if m > 0 else s - mb) + abs(m) - 1) // abs(m))
                         for (mb, me), s, m in zip(self.mask, self.shape, mul))
        return View.create(new_shape, strides, self.offset + offset, mask)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def reshape(self, new_shape: Tuple[int, ...]) -> Optional[View]:
        """The same elements in a new shape, or None when one View can't express it (the caller stacks a View)."""
        if self.shape == new_shape:
            return self
        _check_arg("reshape", self.shape, new_shape, all(isinstance(x, int) and x >= 0 for x in new_shape),
                   "sizes must be non-negative ints")
        if 0 in self.shape:
            _check_arg("reshape", self.shape, new_shape, 0 in new_shape, "can't reshape an empty view to a non-empty one")
            return View.create(new_shape)
        _check_arg("reshape", self.shape, new_shape, prod(self.shape) == prod(new_shape), "sizes differ")
        if new_shape == () and self.mask and any(b == e for b, e in self.mask):
            return None
        if self.contiguous:
            return View.create(new_shape)
        # walk the merged axes from the right, handing each a run of new axes whose sizes multiply to it
        strides: List[int] = []
        r_new_shape = reversed(new_shape)
        for merged_dim, new_stride, real_dim in reversed(_merge_dims(self.shape, self.strides, self.mask)):
            acc = 1
            while acc < merged_dim and (new_dim := next(r_new_shape, None)):
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
        new_strides = canonicalize_strides(tuple(e - b for b, e in new_mask) if new_mask else new_shape, tuple(reversed(strides)))
        extra_offset = (sum(m[0] * s for m, s in zip(self.mask, self.strides)) if self.mask else 0) - \
                       (sum(m[0] * s for m, s in zip(new_mask, new_strides)) if new_mask else 0)
        return View.create(new_shape, new_strides, self.offset + extra_offset, new_mask)

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def minify(self) -> View:
        """The same view with as few axes as possible."""
        return self.reshape(tuple(x[0] for x in _merge_dims(self.shape, self.strides, self.mask))) or self

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def __add__(self, vm1: View) -> Optional[View]:
        """Merge `self` (the older view, vm2) with `vm1` (applied on top of it) into one View, or None."""
        vm2 = self
        if vm2.contiguous:
            return vm1
        if vm1.contiguous and vm1.shape == vm2.shape:
            return vm2
        if vm1.contiguous and vm1.size() == vm2.size() and (ret := vm2.reshape(vm1.shape)) is not None:
            return ret
        if vm1.mask:
            if any(not (b < e) for b, e in vm1.mask):
                return View.create(vm1.shape, (0,) * len(vm1.shape), 0, ((0, 0),) * len(vm1.shape))
            merged = vm2 + vm1.shrink(vm1.mask)
            return merged and merged.pad(tuple((b, s - e) for (b, e), s in zip(vm1.mask, vm1.shape)))

        # where does each step along vm1's axes land in vm2's index space?
        origin = un1d(vm2.shape, vm1.offset)
        terms: List[List[Tuple[int, int]]] = [[] for _ in origin]
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
        idxs = [Variable(f"idx{i}", 0, s - 1) for i, s in enumerate(vm1.shape)]
        merged_size, merged_term = 1, NumNode(0)
        extents: List[Tuple[int, Node]] = []
        for term, s, o in zip(reversed(terms), reversed(vm2.shape), reversed(origin)):
            merged_term += Node.sum([idxs[d1] * (s1 * merged_size) for d1, s1 in term]) + o * merged_size
            merged_size *= s
            if merged_term.min >= 0 and merged_term.max < merged_size:
                extents.append((merged_size, merged_term))
                merged_size, merged_term = 1, NumNode(0)
        if merged_term:
            return None
        if (vm2_shape := tuple(s for s, _ in reversed(extents))) != vm2.shape:
            reshaped = vm2.reshape(vm2_shape)
            return reshaped and reshaped + vm1

        if vm2.mask:
            # project vm2's mask back onto vm1's axes
            newb, newe, bad = [0] * len(vm1.shape), list(vm1.shape), False
            for d2, ((b, e), o, (_, t)) in enumerate(zip(vm2.mask, origin, reversed(extents))):
                if not (t.min < b or t.max >= e):
                    continue
                term = terms[d2]
                if len(term) != 1:
                    if not term and newe:
                        newe[0] = 0
                    else:
                        bad = True
                    continue
                d1, s1 = term[0]
                newb[d1] = max(newb[d1], math.ceil((b - o if s1 > 0 else e - o - 1) / s1))
                newe[d1] = min(newe[d1], (b - o if s1 < 0 else e - o - 1) // s1 + 1)
            for b, e, s in zip(newb, newe, vm1.shape):
                if b != 0 or e != s:  # part of vm1 is masked off: merge again with that mask on vm1
                    return vm2 + View.create(vm1.shape, vm1.strides, vm1.offset, tuple(zip(newb, newe)))
            if bad:
                return None

        return View.create(vm1.shape, tuple(strides), sum(o * s for o, s in zip(origin, vm2.strides)) + vm2.offset)


# ============================================================================================================
# ShapeTracker: a stack of Views
# ============================================================================================================
# Most movement ops change only the last View. A reshape that one View can't express (for example merging two
# axes of a transposed buffer) pushes a new contiguous View on top: the index is computed through the top view,
# then unravelled through each older view in turn.


def _expr_view(view: View, idxs: Sequence[Node], valid: Optional[Node] = None) -> Tuple[Node, Node]:
    """The flat index and the validity condition of `view` at the multi-index idxs."""
    iexpr: List[Node] = [NumNode(view.offset)]
    vexpr: List[Node] = [valid] if valid is not None else []
    for idx, sh, st, m in zip(idxs, view.shape, view.strides, view.mask if view.mask is not None else [None] * len(view.shape)):
        if sh != 1 and st != 0:
            iexpr.append(idx * st)
        if m is not None:
            vexpr += [create_ge_node(idx, m[0]), create_lt_node(idx, m[1])]
    return Node.sum(iexpr), Node.ands(vexpr)


def _idx_vars(shape: Tuple[int, ...]) -> List[Node]:
    return [Variable(f"idx{i}", 0, s - 1) for i, s in enumerate(shape)]


@dataclass(frozen=True)
class ShapeTracker:
    """Movement ops on a buffer without copying it: `views[-1]` is the shape you see, `views[0]` the memory."""
    views: Tuple[View, ...]

    @staticmethod
    def from_shape(shape: Tuple[int, ...]) -> ShapeTracker:
        return ShapeTracker((View.create(tuple(shape)),))

    @property
    def contiguous(self) -> bool:
        return len(self.views) == 1 and self.views[0].contiguous

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.views[-1].shape

    @property
    def size(self) -> int:
        return self.views[-1].size()

    def real_size(self) -> int:
        """How many elements of the underlying buffer must exist: one past the largest index ever read."""
        if 0 in self.shape:
            return 0
        idx, valid = self.expr_idxs()
        return idx.max + 1 if valid else 0

    def expr_idxs(self, idxs: Optional[Sequence[Node]] = None) -> Tuple[Node, Node]:
        """(flat index, valid) as symbolic expressions of the loop variables idxs (default idx0, idx1, ...)."""
        idxs = _idx_vars(self.shape) if idxs is None else list(idxs)
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

    def real_strides(self, ignore_valid: bool = False) -> Tuple[Optional[int], ...]:
        """The stride of each axis in the flat index, 0 if the axis doesn't move it, and None when the index
        isn't an affine function of that axis (it sits under a div or mod) or the axis is masked."""
        if len(self.views) == 1 and self.views[-1].mask is None:
            return self.views[-1].strides
        idxs = _idx_vars(self.shape)
        idx, valid = self.expr_idxs(idxs)
        ret: List[Optional[int]] = [None] * len(self.shape)
        bad_vars: set = set()
        for term in (idx.nodes if isinstance(idx, SumNode) else [idx]):
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

    def unit_stride_axes(self, ignore_valid: bool = False) -> List[int]:
        return [i for i, st in enumerate(self.real_strides(ignore_valid)) if st == 1]

    def axis_is_masked(self, axis: int) -> bool:
        """Does the validity condition depend on this axis?"""
        _, valid = self.expr_idxs()
        return f"idx{axis}" in [v.expr for v in valid.vars()]

    def simplify(self) -> ShapeTracker:
        """Merge the top two views while they can be expressed as one."""
        if len(self.views) >= 2 and (merged := self.views[-2] + self.views[-1]) is not None:
            return ShapeTracker(self.views[:-2] + (merged,)).simplify()
        return self

    def indices(self):
        """(idx, valid): numpy arrays of shape `self.shape` with the flat buffer index each element reads and
        whether it is valid (padding is not). This is what the ShapeTracker means, computed without symbolic."""
        import numpy as np
        idx, valid = _view_indices(self.views[-1], [np.arange(s).reshape([-1 if i == k else 1 for i in range(len(self.shape))])
                                                    for k, s in enumerate(self.shape)])
        for view in reversed(self.views[:-1]):
            unravelled = np.unravel_index(np.where(valid, idx, 0), view.shape) if view.shape else []
            idx, v = _view_indices(view, list(unravelled))
            valid = valid & v
        shape = self.shape
        return np.broadcast_to(np.where(valid, idx, 0), shape), np.broadcast_to(valid, shape)

    # -- the movement ops: all but reshape act on the top view --

    def pad(self, arg: Tuple[Tuple[int, int], ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].pad(_tuple2(arg)),))

    def shrink(self, arg: Tuple[Tuple[int, int], ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].shrink(_tuple2(arg)),))

    def expand(self, new_shape: Tuple[int, ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].expand(tuple(new_shape)),))

    def permute(self, axis: Tuple[int, ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].permute(tuple(axis)),))

    def stride(self, mul: Tuple[int, ...]) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (self.views[-1].stride(tuple(mul)),))

    def reshape(self, new_shape: Tuple[int, ...]) -> ShapeTracker:
        if (new_view := self.views[-1].reshape(tuple(new_shape))) is not None:
            return ShapeTracker(self.views[:-1] + (new_view,))
        return ShapeTracker(self.views + (View.create(tuple(new_shape)),))


def _tuple2(arg: Sequence[Sequence[int]]) -> Tuple[Tuple[int, int], ...]:
    try:
        return tuple((int(b), int(e)) for b, e in arg)
    except (TypeError, ValueError):
        raise ValueError(f"expected a tuple of (begin, end) pairs, got {arg!r}") from None


def _view_indices(view: View, idxs: list):
    """numpy version of _expr_view: flat index and validity arrays for index arrays idxs (broadcastable)."""
    import numpy as np
    idx = np.int64(view.offset)
    valid = np.bool_(True)
    for i, st, m in zip(idxs, view.strides, view.mask or [None] * len(view.shape)):
        idx = idx + np.asarray(i, dtype=np.int64) * st
        if m is not None:
            valid = valid & (i >= m[0]) & (i < m[1])
    return idx, valid
