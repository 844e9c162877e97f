"""demo.py: the demo of kernel.py (`python kernel.py demo`), standard library only: classic kernels built by hand,
the optimizer's steps on them as coloured shapes, and the views of one optimization (--explain, --loops, --map).
Also the command-line plumbing that runtime.py, search/ and bench.py share."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


from kernel import (
    BinaryOps,
    BufferOps,
    ConstBuffer,
    Decision,
    DType,
    ImageDType,
    Kernel,
    KernelOptError,
    LazyOp,
    MemBuffer,
    Node,
    NumNode,
    Opt,
    OptOps,
    ReduceOps,
    ShapeTracker,
    TARGETS,
    TernaryOps,
    UnaryOps,
    Variable,
    View,
    ansilen,
    ansistrip,
    dedup,
    check_arg,
    colored,
    dtypes,
    getenv,
    is_int,
    optimize,
    prod,
    use_color,
)
from kernel import KnobError
from render import is_vector_start, render, vector_axis


# the environment knobs the heuristics and apply_opt read (cost.KNOBS: the search's too)
KNOBS = ("TC", "TC_OPT", "NOLOCALS", "MV", "MV_BLOCKSIZE", "MV_THREADS_PER_ROW", "MV_ROWS_PER_THREAD")


def run_command_line(main: Callable[[], int], prog: str, one_line: tuple[type[Exception], ...] = ()) -> int:
    """Run a command line's main (it reads sys.argv): a bad knob, or an opt the heuristics ask for that doesn't apply
    (a knob's doing: MV_ROWS_PER_THREAD=64), ends with one line on stderr (exit status 2, as argparse's errors), as
    does any error of the kinds in `one_line` (status 1: no device, say); Ctrl-C ends with one
    line and status 130 (the shell's 128 + SIGINT); a reader that goes away (`| head`) ends it quietly, and a closed
    stdout (`>&-`) is a stdout that discards what it gets."""
    if sys.stdout is None:  # started with fd 1 closed: Python has no stdout at all
        sys.stdout = open(os.devnull, "w")  # what is printed goes nowhere, as the user asked
    try:
        status = main()
        sys.stdout.flush()  # inside the try: a closed pipe shows up here, not in the interpreter's exit
        return status
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's own flush can't fail
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except KernelOptError as e:  # the heuristics', where a knob asks for an opt that doesn't apply: say which are set
        knobs = ", ".join(f"{n}={os.environ[n]}" for n in KNOBS if os.environ.get(n)) or "none"
        print(f"{prog}: error: an opt doesn't apply: {e} (environment knobs set: {knobs})", file=sys.stderr)
        return 2
    except (KnobError, *one_line) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, KnobError) else 1


# ==== building kernels by hand ==============================================================================
# A kernel's AST is small: LOADs through ShapeTrackers, elementwise ops, reduces, STOREs. The movement ops (reshape,
# permute, expand, pad, shrink, stride) live in the ShapeTrackers: matmul_ast views both operands on the common shape
# (M, N, K) and sums over axis 2.


def load(idx: int, st: ShapeTracker, dtype: DType = dtypes.float32) -> LazyOp:
    return LazyOp(BufferOps.LOAD, (), MemBuffer(idx, dtype, st))


def const(val: float | int | bool, shape: tuple[int, ...], dtype: DType = dtypes.float32) -> LazyOp:
    st = ShapeTracker.from_shape((1,) * len(shape)).expand(tuple(shape))  # one value, broadcast
    return LazyOp(BufferOps.CONST, (), ConstBuffer(val, dtype, st))


def alu(op: UnaryOps | BinaryOps | TernaryOps, *srcs: LazyOp, arg: Any = None) -> LazyOp:
    return LazyOp(op, tuple(srcs), arg)


def reduce(op: ReduceOps, src: LazyOp, axes: tuple[int, ...]) -> LazyOp:  # the axes stay, of size 1
    return LazyOp(op, (src,), tuple(axes))


def ast_shape(op: LazyOp) -> tuple[int, ...]:
    """The shape op computes: its first leaf's, with the axes of the reduces on the way down at 1."""
    axes: set[int] = set()
    while op.op not in BufferOps:
        axes, op = axes | set(op.arg if op.op in ReduceOps else ()), op.src[0]
    return tuple(1 if i in axes else s for i, s in enumerate(op.arg.st.shape))


def store(value: LazyOp, idx: int = 0, dtype: DType | None = None, st: ShapeTracker | None = None) -> LazyOp:
    st = st if st is not None else ShapeTracker.from_shape(ast_shape(value))  # contiguous unless st says otherwise
    return LazyOp(BufferOps.STORE, (value,), MemBuffer(idx, dtype or value.dtype, st))


def elementwise_ast(n: int = 4096) -> tuple[LazyOp, ...]:
    """out[i] = a[i] + b[i]"""
    st = ShapeTracker.from_shape((n,))
    return (store(alu(BinaryOps.ADD, load(1, st), load(2, st))),)


def broadcast_ast(m: int = 256, n: int = 256) -> tuple[LazyOp, ...]:
    """out[i, j] = a[i, j] * b[j] (b is expanded along i)"""
    b = ShapeTracker.from_shape((n,)).reshape((1, n)).expand((m, n))
    return (store(alu(BinaryOps.MUL, load(1, ShapeTracker.from_shape((m, n))), load(2, b))),)


def sum_ast(shape: tuple[int, ...] = (4096 * 256,), axis: tuple[int, ...] | None = None) -> tuple[LazyOp, ...]:
    """out = a.sum(axis) (every axis by default), keeping the reduced axes as size 1"""
    axis = tuple(range(len(shape))) if axis is None else axis
    return (store(reduce(ReduceOps.SUM, load(1, ShapeTracker.from_shape(shape)), axis)),)


def matmul_ast(
    m: int = 512, n: int = 512, k: int = 512, dtype: DType = dtypes.float32, acc_dtype: DType | None = None
) -> tuple[LazyOp, ...]:
    """out[i, j] = sum_k a[i, k] * b[k, j]; with acc_dtype, the products are cast to it before the sum"""
    a = ShapeTracker.from_shape((m, k)).reshape((m, 1, k)).expand((m, n, k))  # strides (k, 0, 1)
    b = ShapeTracker.from_shape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))  # strides (0, 1, n)
    product = alu(BinaryOps.MUL, load(1, a, dtype), load(2, b, dtype))
    if acc_dtype is not None and acc_dtype != dtype:
        product = alu(UnaryOps.CAST, product, arg=acc_dtype)
    return (store(reduce(ReduceOps.SUM, product, (2,))),)


def matvec_ast(n: int = 4096, k: int = 4096) -> tuple[LazyOp, ...]:
    """out[i] = sum_k a[i, k] * x[k]"""
    a = ShapeTracker.from_shape((n, k))
    x = ShapeTracker.from_shape((k,)).reshape((1, k)).expand((n, k))
    return (store(reduce(ReduceOps.SUM, alu(BinaryOps.MUL, load(1, a), load(2, x)), (1,))),)


def conv2d_ast(
    bs: int = 1, cin: int = 16, h: int = 32, w: int = 32, cout: int = 32, ksize: int = 3, pad: int = 1, stride: int = 1
) -> tuple[LazyOp, ...]:
    """out[b, co, y, x] = sum_{ci, ky, kx} img[b, ci, y*stride + ky - pad, x*stride + kx - pad] * wt[co, ci, ky, kx]

    The image is padded (a masked view), then a second view slides the window over it: each output position
    (b, co, y, x) and filter tap (ci, ky, kx) picks one element of the padded image."""
    hp, wp = h + 2 * pad, w + 2 * pad
    oh, ow = (hp - ksize) // stride + 1, (wp - ksize) // stride + 1
    full = (bs, cout, oh, ow, cin, ksize, ksize)
    padded = ShapeTracker.from_shape((bs, cin, h, w)).pad(((0, 0), (0, 0), (pad, pad), (pad, pad)))
    window = View.create(full, (cin * hp * wp, 0, stride * wp, stride, hp * wp, wp, 1))
    img = ShapeTracker(padded.views + (window,)).simplify()
    wt = ShapeTracker.from_shape((cout, cin, ksize, ksize)).reshape((1, cout, 1, 1, cin, ksize, ksize)).expand(full)
    return (store(reduce(ReduceOps.SUM, alu(BinaryOps.MUL, load(1, img), load(2, wt)), (4, 5, 6))),)


def mean_var_ast(m: int = 64, n: int = 1024) -> tuple[LazyOp, ...]:
    """mean[i] = sum_j a[i, j] / n and var[i] = sum_j a[i, j]^2 / n - mean[i]^2: two reduces in one kernel

    The two SUMs reduce the same shape to the same shape, so they share the kernel's shape and opts; each keeps its
    own accumulators and loops over a (two passes). Buffers: 0 the means, 1 the variances, 2 the input."""
    x = load(2, ShapeTracker.from_shape((m, n)))
    inv_n = const(1 / n, (m, 1))
    mean = alu(BinaryOps.MUL, reduce(ReduceOps.SUM, x, (1,)), inv_n)
    mean_of_squares = alu(BinaryOps.MUL, reduce(ReduceOps.SUM, alu(BinaryOps.MUL, x, x), (1,)), inv_n)
    var = alu(BinaryOps.ADD, mean_of_squares, alu(UnaryOps.NEG, alu(BinaryOps.MUL, mean, mean)))
    return store(mean, 0), store(var, 1)


def image_matvec_ast(n: int = 256, k: int = 64) -> tuple[LazyOp, ...]:
    """out[i] = sum_k a[i, k] * x[k], written into an RGBA image of n/4 pixels (height 4)"""
    if n % 16:
        raise ValueError(f"an image of height 4 holds a multiple of 16 floats, not {n}")
    return (store(matvec_ast(n, k)[0].src[0], dtype=dtypes.imagef((4, n // 16, 4))),)


def attention_ast(d: int = 64, max_len: int = 1024) -> tuple[LazyOp, ...]:
    """scores[j] = sum_k q[k] * keys[j, k] / sqrt(d) for j < i: one query against the first i keys of a KV cache
    of max_len. i is a Variable (the number of tokens so far): one program for every length."""
    i = Variable("i", 1, max_len)
    q = ShapeTracker.from_shape((d,)).reshape((1, d)).expand((i, d))
    keys = ShapeTracker.from_shape((max_len, d)).shrink(((0, i), (0, d)))  # only the cached part is read
    dot = reduce(ReduceOps.SUM, alu(BinaryOps.MUL, load(1, q), load(2, keys)), (1,))
    return (store(alu(BinaryOps.MUL, dot, const(1 / math.sqrt(d), (i, 1)))),)


def cat_ast(m: int = 256, a: int = 3, b: int = 3) -> tuple[LazyOp, ...]:
    """out = the columns of x (m, a) then those of y (m, b): each padded with zeros to (m, a + b), then added"""
    x, y = (ShapeTracker.from_shape((m, n)).pad(((0, 0), pad)) for n, pad in ((a, (0, b)), (b, (a, 0))))
    return (store(alu(BinaryOps.ADD, load(1, x), load(2, y))),)


@dataclass(frozen=True)
class Demo:
    """A classic kernel for the demo: what it computes (a `{}` for each size), how to build it (its sizes are the
    builder's arguments and their defaults, which --size replaces), the names `what` gives buffers 0, 1, ... (the
    others are called data<idx>, as in the OpenCL C), the target to show it on, and the opts it shows instead of
    the heuristics' (none: the heuristics')."""

    text: str
    build: Callable[..., tuple[LazyOp, ...]]
    buffers: tuple[str, ...]
    target: str = "opencl"
    opts: tuple[str, ...] = ()
    sizes = property(lambda self: tuple(x for x in self.build.__defaults__ or () if is_int(x)))  # not a dtype
    what = property(lambda self: self.text.format(*self.sizes))


_OAB, _OAX = ("out", "a", "b"), ("out", "a", "x")  # the demos' names of their buffers 0, 1, 2
DEMOS: dict[str, Demo] = {
    "elementwise": Demo("out[i] = a[i] + b[i], {} elements", lambda n=4096: elementwise_ast(n), _OAB),
    "broadcast": Demo("out[i, j] = a[i, j] * b[j], {}x{}", lambda m=256, n=256: broadcast_ast(m, n), _OAB),
    "sum": Demo("out = sum of {} floats", lambda n=1 << 20: sum_ast((n,)), ("out", "a")),
    "sum_axis0": Demo("out[j] = sum_i a[i, j], {}x{}", lambda m=512, n=256: sum_ast((m, n), (0,)), ("out", "a")),
    "sum_axis1": Demo("out[i] = sum_j a[i, j], {}x{}", lambda m=512, n=256: sum_ast((m, n), (1,)), ("out", "a")),
    "matvec": Demo("out[i] = sum_k a[i, k] * x[k], {}x{}", lambda n=1024, k=768: matvec_ast(n, k), _OAX),
    "matmul": Demo("out = a @ b, {0}x{2} @ {2}x{1}", matmul_ast, _OAB),
    "conv2d": Demo(
        "3x3 conv, padding 1: {} -> {} channels on {}x{}: out = conv(img, wt)",
        lambda cin=16, cout=32, h=32, w=32: conv2d_ast(1, cin, h, w, cout),
        ("out", "img", "wt"),
    ),
    "tc_matmul": Demo(
        "out = a @ b, {0}x{2} @ {2}x{1}, float32: tensor cores where the target has them for float32 (Metal's)",
        lambda m=256, n=256, k=256: matmul_ast(m, n, k),
        _OAB,
        "metal",
    ),
    "image": Demo("out[i] = sum_k a[i, k] * x[k], {}x{}, out an RGBA image 4 pixels high", image_matvec_ast, _OAX),
    "attention": Demo(
        "scores[j] = q . keys[j] / sqrt({0}) for the first i (a Variable, 1..{1}) keys of a KV cache, d = {0}",
        lambda d=64, max_len=1024: attention_ast(d, max_len),
        ("scores", "q", "keys"),
    ),
    "variance": Demo(
        "mean and variance of each row of {}x{}: two reduces in one kernel", mean_var_ast, ("mean", "var", "x")
    ),
    "cat": Demo("out = cat(x, y) of {0}x{1} and {0}x{2}: small masked axes", cat_ast, ("out", "x", "y")),
    # the opts the heuristics never choose, each in a kernel of its own
    "nolocals": Demo(
        "out[i] = a[i] + b[i], {} elements, NOLOCALS", elementwise_ast, _OAB, opts=("NOLOCALS", "UPCAST:0:4")
    ),
    "padto": Demo(
        "out = a @ b, {0}x{2} @ {2}x{1}, padded (PADTO)",
        lambda m=60, n=60, k=60: matmul_ast(m, n, k),
        _OAB,
        opts=("PADTO:0:32", "PADTO:1:32", "LOCAL:0:16", "LOCAL:1:16"),
    ),
    "upcastmid": Demo(
        "out[i] = sum_k a[i, k] * x[k], {}x{}, out an RGBA image",
        image_matvec_ast,
        _OAX,
        opts=("GROUP:0:8", "UPCASTMID:0:4"),
    ),
}


# ==== demo: python kernel.py demo [NAME] [--opt ...] [--target T] [--explain | --loops [--steps] | --map] ===
# Four views of one optimization (the step table, --explain, --loops and --map, each a function below): they read
# only the Kernel's public state and its `decisions`.


# COLOR_LEGEND, the project's one legend (README.md's colour table): the colours of Kernel.colored_shape(), tinygrad's
# eight chunks of a shape, and what each becomes in render.py's OpenCL C
COLOR_LEGEND = {
    "blue": "global dims: one work-group per index (get_group_id); without local threads (clang) one thread each",
    "BLUE": "global dims with NOLOCALS: one thread per index (get_global_id), in work-groups of 1 thread in tinygrad"
    ", of the largest divisor <= 32 of launch dim 0 in runtime.py",
    "cyan": "local dims (LOCAL): threads of a work-group (get_local_id)",
    "green": "grouped reduce dims (GROUP, GROUPTOP): threads that share one reduce through local memory",
    "white": "output dims upcast mid-reduce (UPCASTMID, images): threads, each reducing its own outputs, whose results "
    "the finishing thread stores one per index",
    "red": "reduce loops: a for loop",
    "magenta": "unrolled reduce dims (UNROLL): registers, the loop body repeated",
    "yellow": "upcasted dims (UPCAST): several outputs per thread in registers; one float2/float4 access where a "
    "buffer's only stride-1 upcast axis is 2 or 4 long (render.vector_axis)",
}
# each colour on a page of its own (dark, so that they read alike on a light and a dark site): the README's picture
# (tools/demo_svg.py) and the HTML pages (page.py)
PALETTE = dict(blue="#4a7dff", BLUE="#79c0ff", cyan="#39c5cf", green="#56d364", white="#ffffff", red="#ff7b72")
PALETTE.update(magenta="#e57cf0", yellow="#e3b341")
# each colour's letter, which follows an axis's size in plain text (no colour), and the opts that make it
ROLES = dict(blue=("b", "global"), BLUE=("B", "NOLOCALS"), cyan=("c", "LOCAL"), green=("g", "GROUP"))
ROLES |= dict(white=("w", "UPCASTMID"), red=("r", "loop"), magenta=("m", "UNROLL"), yellow=("y", "UPCAST"))


def legend() -> str:
    """The colour legend (COLOR_LEGEND), one line per colour, with its letter in plain text."""
    return "\n".join(f"  {colored(f'{c:8s}', c)}({ROLES[c][0]}) {what}" for c, what in COLOR_LEGEND.items())


def shape_row(k: Kernel) -> str:
    """k's shape as the step table prints it: coloured, or in plain text each size followed by its colour's letter
    (as wide as in colour: a size of 4 or more digits gets a space before it)."""
    plain = [" " * (len(x := str(s)) > 3 and i > 0) + f"{x:>4}" for i, s in enumerate(k.full_shape)]  # a Node: <i..>
    return k.colored_shape() if use_color() else "".join(x + ROLES[c][0] for x, c in zip(plain, k.colors()))


def terminal_width(out: Any = None) -> int:
    """The columns the demo's lines fit in: the terminal's width, or 100 off a terminal (a file, a pipe)."""
    try:
        tty = (out or sys.stdout).isatty()
    except (AttributeError, ValueError):
        tty = False
    return shutil.get_terminal_size((100, 24)).columns if tty else 100


def fit(line: str, width: int, hang: int | None = None) -> list[str]:
    """`line` wrapped at spaces to `width` columns (colour codes take none), continuation lines indented `hang`
    columns (default: 4 more than the line); a word longer than the width (an index expression) is broken after
    a `+`."""
    indent = hang if hang is not None else ansilen(line) - len(ansistrip(line).lstrip(" ")) + 4
    out = []
    while ansilen(line) > width:
        codes = {i for m in re.finditer(r"\x1b\[[0-9;]*m", line) for i in range(*m.span())}  # colour codes
        # (column, index) of each visible character that may end the line: past the hang, in the width
        seen = list(enumerate(i for i in range(len(line)) if i not in codes))[indent + 1 : width + 1]
        lead = len(line) - len(line.lstrip())  # never cut in the indentation
        spaces = [i for _, i in seen if i > lead and line[i] == " "]
        pluses = [i + 1 for column, i in seen if column < width and i > lead and line[i] == "+"]
        if not spaces + pluses:
            break
        cut = (spaces or pluses)[-1]
        out.append(line[:cut].rstrip())
        line = " " * indent + line[cut:].lstrip(" ")
    return out + [line]


def _txt(x: Any) -> str:
    """A size, stride or index as text (a symbolic one renders itself; None, a stride with no single value, is ?)."""
    return "?" if x is None else x.render() if isinstance(x, Node) else str(x)


def buffer_names(k: Kernel, names: Sequence[str] = ()) -> list[str]:
    """A name for each of k.bufs, the demo's one naming rule: the demo's name for buffer idx if it has one, else
    data<idx> as in the OpenCL C; a constant is no buffer: it is named by its value."""
    named = dict(enumerate(names))
    return [f"the constant {b.val}" if isinstance(b, ConstBuffer) else named.get(b.idx, f"data{b.idx}") for b in k.bufs]


# -- the heuristics' record in words: kernel.py records what each branch computed (Kernel._weigh), the demo says it --


def weighed(k: Kernel, heuristics: Callable[[Kernel], Any] = optimize) -> tuple[Kernel, list[Decision]]:
    """A copy of k that `heuristics` (default optimize: tinygrad's get_linearizer) tuned, and the decisions they
    recorded (Kernel.decisions, in the order they were taken)."""
    tuned = k.copy()
    tuned.decisions = []
    heuristics(tuned)
    return tuned, tuned.decisions


def record_steps(decisions: Sequence[Decision], applied_opts: Sequence[Opt]) -> list[tuple[Decision, list[Opt]]]:
    """Each decision with the opts its branch applied: those from its step to the next decision's."""
    ends = [d.step for d in decisions[1:]] + [len(applied_opts)]
    return [(d, list(applied_opts[d.step : end])) for d, end in zip(decisions, ends)]


def _who(idxs: Sequence[int], names: Sequence[str]) -> str:
    return f"{' and '.join(names[i] for i in idxs)} {'has' if len(idxs) == 1 else 'have'}"


def tc_said(tc: Any, axis_pads: Sequence[tuple[int, int]] = ()) -> str:
    """What the TC opt does to a kernel with tensor core tc: _apply_tc_opt's pads, UNROLL, UPCASTs and LOCALs."""
    warp = [prod(amt for dim, amt in tc.threads if dim == i) for i in range(2)]  # the threads along N and M
    steps = [f"unroll K by {tc.dims[2]}"] + [f"upcast {'NM'[i]} by {tc.dims[i] // warp[i]}" for i in range(2)
                                             if tc.dims[i] > warp[i]]  # fmt: skip
    steps.append("local " + " ".join(f"{'NM'[dim]} {amt}" for dim, amt in tc.threads))
    pads = [f"pad axis {axis} to a multiple of {dim}" for axis, dim in axis_pads]
    return "; ".join(pads + [", ".join(steps)]) + f" (a warp of {prod(amt for _, amt in tc.threads)} threads)"


def reason(d: Decision, opt: Opt, k: Kernel, names: Sequence[str]) -> str:
    """The step table's reason for `opt`, which decision d's branch applied to k (the kernel just before it)."""
    h, w, nth = d.heuristic, d.weighed, len(k.applied_opts) - d.step  # nth: the branch's opt number nth
    if h == "_matvec":
        what = {OptOps.GROUP: f"{opt.amt} threads share each output's reduce (GROUP)",
                OptOps.LOCAL: f"{opt.amt} threads per work-group along axis {opt.axis}",
                OptOps.UPCAST: f"each thread computes {opt.amt} outputs along axis {opt.axis}"}  # fmt: skip
        return f"matvec: {what[opt.op]}"
    if h == "_grouping" and opt.op is OptOps.UPCASTMID:
        return "image output: upcast mid-reduce by 4"
    if h == "_grouping":
        outputs = prod(k.sts[0].shape[: k.first_reduce])
        return f"{outputs} output{'s' * (outputs != 1)} <= 2048: {opt.amt} threads share each output's reduce"
    if h in ("required_optimizations", "_image_float4"):
        return f"image {names[w.get('buf_index', 0)]}: {opt.op.name.lower()} its unit-stride axis by 4 (one pixel)"
    if h == "_upcast_masked_axes":
        return f"small masked axis {opt.axis}: upcast it whole"
    if h == "_upcast_broadcast_axes":
        zero = [i for i, st in enumerate(k.sts) if st.views[-1].strides[opt.axis] == 0]
        why = "to reuse its loads" if any(isinstance(k.bufs[i], MemBuffer) for i in zero) else \
            "(the rule counts a constant too: no load to reuse)"  # fmt: skip
        return f"{_who(zero, names)} stride 0 on axis {opt.axis}: upcast {opt.amt} {why}"
    if h == "_unroll_reduce" and opt.amt == 4:
        return ("long" if is_int(w["s"]) else "symbolic") + " reduce axis: unroll the loop by 4"
    if h == "_unroll_reduce":
        return f"short reduce axis ({w['s']}): unroll it whole" if nth == 0 else \
            "tiny reduce: unroll the next reduce axis whole too"  # fmt: skip
    if h == "_default_upcast":
        return "nothing upcast yet: upcast the last axis by 4"
    if h == "_locals":
        return "NOLOCALS=1: no work-groups of the kernel's own" if opt.op is OptOps.NOLOCALS else \
            f"work-group: {opt.amt} threads along axis {opt.axis}"  # fmt: skip
    if h == "_apply_tc_opt":
        return f"tensor core: {tc_said(w['tc'], w['axis_pads'])}"
    if opt.op is OptOps.UPCAST:  # apply_tensor_cores' follow-ups
        return f"tensor core: upcast {'NM'[k.tensor_core_opts.axes.index(opt.axis)]} for reuse"
    return "tensor core: more of N as local threads"


def rule(d: Decision, k: Kernel, names: Sequence[str]) -> str:
    """The rule of the branch that made decision d, in words, with the numbers of k (the kernel it looked at)."""
    outputs, w = prod(k.sts[0].shape[: k.first_reduce]), d.weighed
    if d.heuristic == "_grouping" and "axes" in w:
        return "an image output of a grouped reduce: its only unit-stride axis (axes) upcast by 4 (a pixel), mid-reduce"
    if d.heuristic == "_locals" and "NOLOCALS" in w:
        return "NOLOCALS=1 (environment): no work-groups of the kernel's own"
    return {
        "required_optimizations": "an image output is written a pixel (4 floats) at a time: its first unit-stride axis "
        "that 4 divides (unit_stride_axes_mul_4), by 4",
        "_apply_tc_opt": "the first of the target's tensor cores that fits SUM(MUL(A, B)): N an axis A has stride 0 "
        "on, M one B has, K a reduce axis (axes: N, M, K), each padded to the core's size where axis_pads says",
        "apply_tensor_cores": "the hand-coded TC opts: upcast M, then N, where it still exists (axes_exist), by the "
        "largest of 5, 4, 3, 2 that divides it; then, on a real tensor core, N local by the first of 4, 2 that divides "
        "it",
        "_matvec": "SUM(MUL(LOAD, LOAD)), the first load with stride 1 on the reduce, not both with a stride-0 axis: "
        "the first global axis (global_idx) that MV_BLOCKSIZE*MV_ROWS_PER_THREAD divides while MV_THREADS_PER_ROW "
        "divides the reduce (4, 8, 4 unless set); GROUP, not GROUPTOP: the first load has stride 1 on the reduce, so "
        "GROUP's neighbouring threads read neighbouring elements",
        "_grouping": f"{_txt(outputs)} output{'s' * (outputs != 1)}; with <= 2048 in <= 2 output axes, not written 4 "
        "at a time: GROUPTOP by 256 (only with <= 32 outputs) or 16, the first size (sz) that divides the reduce and "
        "that apply_opt takes",
        "_image_float4": f"image {names[w.get('buf_index', 0)]}: its first unit-stride axis that 4 divides "
        "(unit_stride_axes_mul_4), by 4, unless an upcast one is: UPCAST on an output axis, UNROLL on a reduce axis",
        "_upcast_masked_axes": "output axes of size <= 7 that a buffer masks, from the left, each where the upcast "
        "elements (with the axes taken before it) stay <= 7 * 7, else skipped and the next tried: to_upcast, each "
        "upcast whole, from the right",
        "_upcast_broadcast_axes": f"{_txt(outputs)} threads (outputs outside the upcast axes) >= 1024: an output axis "
        "a buffer has stride 0 on (and on none of its upcast axes); xb_choices: (buffers moving along the axis, sum of "
        "their last views' strides, axis, amount), the smallest taken",
        "_unroll_reduce": "few upcast elements (<= 4, or none on a reduce axis, and < 64 in all): the last reduce axis "
        "(of size s) unrolled whole if s <= 32, and the next too if both are <= 3; else by 4 if 4 divides it",
        "_default_upcast": "nothing is upcast yet: the last axis by 4 (splits), if 4 divides it",
        "_locals": "work-groups of <= 128 threads: the axes by local_axis_ranking (a buffer has stride 0 on it, axis), "
        "largest first, each the first of [32 on axis 0], 16, 8, 4, 3, 2 that divides it within 128 threads "
        "(to_local); the first 3 apply, in axis order",
    }[d.heuristic]


def decision_lines(d: Decision, opts: Sequence[Opt], k: Kernel, names: Sequence[str]) -> list[str]:
    """--explain's lines for decision d, whose branch looked at k and applied opts: its rule, what it weighed (its
    values under tinygrad's names), and -> the opts, or why none."""
    lines = [f"    {d.heuristic}: {rule(d, k, names)}"]
    lines += [f"      {name} = {_value(value)}" for name, value in d.weighed.items()]
    if opts:
        return lines + ["      -> " + " ".join(map(str, opts))]
    if d.heuristic == "_grouping":  # a size that divides, but apply_opt refused it: the next was tried
        try:
            k.copy().apply_opt(refused := Opt(OptOps.GROUPTOP, 0, d.weighed["sz"]))
        except KernelOptError as e:
            return lines + [f"      -> {refused} refused: {e}"]
    return lines + ["      -> no opt"]


def _value(x: Any) -> str:
    """A recorded value as --explain prints it: sizes as the shapes print them, a tensor core by its name."""
    if isinstance(x, (list, tuple)):
        inner = ", ".join(map(_value, x)) + ("," if isinstance(x, tuple) and len(x) == 1 else "")
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    return _txt(x) if isinstance(x, (Node, int)) and not isinstance(x, bool) else str(x)


# -- --explain: strides, what each new axis means, and the heuristics' record --


def vector_access(k: Kernel, i: int) -> tuple[int | None, str]:
    """How render.py's OpenCL C accesses buffer i across its upcast (yellow and magenta) axes: (the axis along which
    it reads or writes float2/float4 vectors, or None; and why not). render.vector_axis is the rule; here it also
    holds at every register, where a vector starts (its own axis at 0). Anything else is one scalar access each."""
    axis, why = vector_axis(k, i)
    if axis is None:
        return None, why
    st, up, amt = k.sts[i], k.shape_len - k.upcasted, k.sts[i].shape[axis]
    loops = [Variable(f"i{a}", 0, (s if isinstance(s, int) else s.max) - 1) for a, s in enumerate(st.shape[:up])]
    for values in itertools.product(*(range(st.shape[a] if a != axis else 1) for a in range(up, k.shape_len))):
        if not is_vector_start(st.expr_idxs(loops + [NumNode(v) for v in values])[0], amt):
            return None, f"a vector's first index is not always a multiple of {amt}"
    return axis, ""


def _reduce_split(k: Kernel, before: Kernel, opt: Opt, i: int) -> str:
    """GROUP's or GROUPTOP's split of a reduce axis as the C runs it, for buffer i: which steps of the axis thread t
    takes, and the loop left over it (ridxN, its steps and their stride), or that none is left (the whole axis)."""
    split = opt.real_axis(before)
    size, threads = _txt(before.full_shape[split]), k.full_shape[k.first_reduce + k.group_for_reduces - 1]
    if (rest := before.full_shape[split] // threads) == 1:
        return f"the {threads} threads take one step each of the whole axis ({opt.op.name}: no loop is left over it)"
    steps, n = f"thread t takes steps t, t+{threads}, ... of the {size} ({opt.op.name})", _txt(rest)
    if opt.op is OptOps.GROUPTOP:
        steps = f"thread t takes its own run of {n} consecutive steps of the {size}, from {n}*t (GROUPTOP)"
    return f"{steps}; loop ridx{split + 1}: {n} steps {_txt(k.sts[i].real_strides()[split + 1])} apart"


def axis_notes(k: Kernel, axis: int, names: Sequence[str], opt: Opt | None = None, before=None) -> list[str]:
    """What each buffer's stride on `axis` means for the colour the axis has: one sentence per buffer (a constant is
    no memory and gets none). `opt` is the opt that made the axis, `before` the kernel it was applied to."""
    colors, size, outputs, notes = k.colors(), _txt(k.full_shape[axis]), len(k.ast), []
    color, registers = colors[axis], colors[axis] in ("yellow", "magenta")
    for i, st in enumerate(k.sts):
        stride, name, read = st.real_strides()[axis], names[i], i >= outputs
        if isinstance(k.bufs[i], ConstBuffer) or stride is None or (not read and color in ("green", "red", "magenta")):
            continue  # a constant; no single stride; or an output on a reduce axis (stride 0: it is reduced)
        verb, load = ("read", "load") if read else ("write", "store")
        if registers and stride == 0:
            notes.append(f"{name} has stride 0 here: one {load} serves all {size} (registers)")
        elif registers and stride == 1:
            vec, why = vector_access(k, i)
            if isinstance(k.bufs[i].dtype, ImageDType):  # an image is read and written a pixel at a time
                access = ("one RGBA pixel" if vec == axis else "each element's own RGBA pixel") + f" ({verb}_imagef)"
                if not read and vec != axis:  # render.py writes an image output with no aligned pixels as a buffer
                    access = f"{size} scalar stores: the image is written as a plain buffer ({why})"
            elif vec == axis:
                access = f"one float{size} {load}"
            else:
                access = f"{size} scalar {load}s ({why})"
            notes.append(f"{name} has stride 1 here: {size} neighbouring elements, {access}")
        elif registers:
            what = "register" if color == "yellow" else "unrolled step of the reduce"
            notes.append(f"{name}: {size} accesses {stride} apart, one per {what}")
        elif color in ("green", "cyan", "white") and stride == 0:  # a green axis: an input (outputs are skipped)
            notes.append(f"{name} has stride 0 here: all {size} threads {verb} the same element")
        elif color == "green" and opt is not None and before is not None:  # GROUP and GROUPTOP split it differently
            notes.append(f"{name}: neighbouring threads read {_txt(stride)} apart, {_reduce_split(k, before, opt, i)}")
        elif color == "white" and not read:  # the first thread of the group writes them all, after the reduce
            notes.append(f"{name} has stride {stride} here: the thread that finishes the reduce writes all {size}")
        elif color in ("cyan", "white"):
            apart = "neighbouring elements" if stride == 1 else f"{stride} apart"
            notes.append(f"{name} has stride {stride} here: neighbouring threads {verb} {apart}")
    return notes


def _explain(k: Kernel, opt: Opt | None, why: str, names: Sequence[str], record: Sequence = (), before=None
             ) -> list[str]:  # fmt: skip
    """--explain after `opt` (None: at the start): the shape line and under it every buffer's strides, in columns
    coloured by axis (a constant is no memory: it has no row); what the new axis means for each buffer; and the
    heuristics' decisions taken looking at that state (record: record_steps' pairs, decision and opts)."""
    bnames, colors = buffer_names(k, names), k.colors()
    rows: list[tuple[str, Sequence]] = []  # each buffer's strides; its last view's (the heuristics read) if others
    for i, st in [(i, st) for i, st in enumerate(k.sts) if isinstance(k.bufs[i], MemBuffer)]:
        real, last = st.real_strides(), st.views[-1].strides
        differs = list(map(_txt, real)) != list(map(_txt, last))
        rows += [(f"strides {bnames[i]}", real)] + [(f"last view {bnames[i]}", last)] * differs
    widths = [max([4, len(_txt(s))] + [len(_txt(x[a])) for _, x in rows]) for a, s in enumerate(k.full_shape)]
    letters = [""] * len(colors) if use_color() else [ROLES[c][0] for c in colors]  # plain text: the colours' letters

    def row(values: Sequence[Any], marks: Sequence[str]) -> str:
        return " ".join(colored(f"{_txt(v):>{w}}", c) + m for v, w, c, m in zip(values, widths, colors, marks))

    width = max([16] + [len(label) + 5 for label, _ in rows])  # the label column: "    strides NAME "
    label, blank = "start" if opt is None else str(opt), [" " * len(m) for m in letters]
    lines = [f"  {label:<{width}}{row(k.full_shape, letters)}   {why}".rstrip()]
    lines += [f"    {label:<{width - 2}}{row(x, blank)}".rstrip() for label, x in rows]
    unknown, differ = any(s is None for _, x in rows for s in x), any(r[0].startswith("last") for r in rows)
    if opt is None and (unknown or differ):
        legend = "? = no single stride (a padding condition or a division of the index uses the axis). " * unknown
        legend += "The heuristics read each buffer's last view's strides (st.views[-1].strides), which know "
        legend += (
            "neither its padding nor the views under it" + ": a `last view` row gives them where they differ" * differ
        )
        lines.append("    " + legend)
    # the axis the opt just made: shift_to put the piece it split off last among the registers, locals or groups
    ends = {OptOps.UPCAST: k.shape_len, OptOps.UNROLL: k.shape_len, OptOps.LOCAL: k.first_reduce}
    ends |= dict.fromkeys((OptOps.GROUP, OptOps.GROUPTOP, OptOps.UPCASTMID), k.first_reduce + k.group_for_reduces)
    if opt is not None and 0 <= (axis := ends.get(opt.op, 0) - 1) < k.shape_len:
        lines += [f"      {colors[axis]} axis {axis}: {note}" for note in axis_notes(k, axis, bnames, opt, before)]
    for d, opts in [(d, opts) for d, opts in record if d.step == len(k.applied_opts)]:  # taken looking at this state
        lines += decision_lines(d, opts, k, bnames)
    return lines


# -- --loops: the kernel as the C it runs as --


def c_listing(k: Kernel, names: Sequence[str] = ()) -> list[str]:
    """--loops: the kernel's OpenCL C as render.py writes it, the one description of its loop nest (each id and loop
    says its axis and colour, and is drawn in it); a line first says which buffer each data<idx> is."""
    named = [f"data{b.idx} is {n}" for b, n in zip(k.bufs, buffer_names(k, names))
             if isinstance(b, MemBuffer) and n != f"data{b.idx}"]  # fmt: skip
    lines = [f"  ({', '.join(dedup(named))})"] * bool(named) + ["  " + x for x in render(k).src.rstrip().split("\n")]
    return [colored(x, m.group(1)) if (m := re.search(r"/\* (\w+), axis \d+", x)) else x for x in lines]


# -- --map: who computes each output element --


def _output_cells(k: Kernel, want: set[int]) -> dict[int, dict[str, list[int]]]:
    """For each flat output index in `want`: the index on each output axis of the kernel that computes it, by colour.
    Each index is taken apart from the store's view, largest stride first (time in the cells asked for, not in the
    output's size); one no axis values reach is left out (the store doesn't write it)."""
    v, colors = k.sts[0].views[-1], k.colors()
    axes = sorted((a for a in range(k.shape_len) if v.shape[a] != 1), key=lambda a: -v.strides[a])
    bounds = {a: v.mask[a] if v.mask else (0, v.shape[a]) for a in axes}  # a padded store writes inside its mask only
    start = v.offset + sum(b * v.strides[a] for a, (b, _) in bounds.items())  # every axis at its first index
    cells: dict[int, dict[str, list[int]]] = {}
    for flat in want:
        rest, index = flat - start, {}
        for a in axes:  # (an axis of stride 0: its first index, as the first thread along it writes)
            index[a] = bounds[a][0] + (rest // v.strides[a] if v.strides[a] else 0)
            rest -= (index[a] - bounds[a][0]) * v.strides[a]
        if rest == 0 and all(b <= index[a] < e for a, (b, e) in bounds.items()):
            cells[flat] = {c: [index[a] for a in sorted(axes) if colors[a] == c] for c in set(colors)}
    return cells


def output_map(k: Kernel, names: Sequence[str] = (), width: int = 100) -> list[str]:
    """--map: the first rows and columns of the output, each cell labelled with the work-group (g, blue), thread
    (t, cyan) and register (r, yellow) that computes it."""
    st, colors, out = k.sts[0], k.colors(), names[0] if names else "out"
    if not all(isinstance(s, int) for s in k.full_shape):
        return ["  (the map needs numeric sizes: this kernel has a symbolic one)"]
    if 0 in st.shape:
        return ["  (the output has no elements: there is nothing to map)"]
    if len(st.views) > 1 or any(s < 0 for s in st.views[-1].strides):
        return ["  (the map needs an output written through one plain view)"]
    v = st.views[-1]  # where it isn't contiguous, the buffer as far as the store reaches: its last element, plus 1
    last = v.offset + sum(s * (e - 1) for s, (_, e) in zip(v.strides, v.mask or [(0, n) for n in v.shape]))
    logical = ([s for s in k.ast[0].arg.st.shape if s != 1] or [1]) if k.ast[0].arg.st.contiguous else [last + 1]
    groups = k.opts.has_local and not k.dont_use_locals  # the blue axes are work-groups (get_group_id)
    blue = "blue axes" if "blue" in colors else "no blue axes: one work-group"  # g is then 0 in every cell
    group = f"work-group ({blue})" if groups else "thread (BLUE axes: NOLOCALS)" if k.dont_use_locals else ""
    group = group or "thread (blue axes: the target has no local threads)"
    parts = [  # the letters of a cell's label: the colours of their axes, and what they number
        ("g", ("blue", "BLUE"), group),
        ("t", ("cyan",), "thread in it (cyan axes)"),
        ("r", ("yellow", "white"), "register (yellow axes" + (", then white ones)" if "white" in colors else ")")),
    ]
    parts = [(g, cs, what) for g, cs, what in parts if g == "g" or any(c in colors for c in cs)]

    def label(cell: dict[str, list[int]]) -> str:
        return " ".join(
            colored(g + (",".join(str(v) for c in cs for v in cell.get(c, [])) or "0"), cs[0]) for g, cs, _ in parts
        )

    rows_total, cols_total = (logical[-2], logical[-1]) if len(logical) >= 2 else (None, logical[-1])
    # every index at its largest: the widest label
    widest = {c: [s - 1 for a, s in enumerate(k.full_shape) if colors[a] == c and st.shape[a] != 1] for c in colors}
    cell_width = max(8, ansilen(label(widest)) + 1)
    cols = max(1, min(cols_total, (width - 10) // (cell_width + 1)))
    if rows_total is None:  # one output axis: wrap it into rows of `cols` (a power of two, for the patterns)
        cols = 1 << (cols.bit_length() - 1)
        rows = min(4, -(-cols_total // cols))
        flat = [[r * cols + c for c in range(cols) if r * cols + c < cols_total] for r in range(rows)]
        title = f"{out}[row + column] for the first {min(rows * cols, cols_total)} of {cols_total} elements"
    else:
        rows = min(rows_total, 16)
        flat = [[r * cols_total + c for c in range(cols)] for r in range(rows)]
        lead = "0, " * (len(logical) - 2)
        title = f"{out}[{lead}row, column] of shape {tuple(logical)}: rows 0..{rows - 1}, columns 0..{cols - 1}"
    cells = _output_cells(k, {f for row in flat for f in row})
    lines = [f"  {title}", ("  " + " " * 8 + "".join(f"{c:<{cell_width + 1}}" for c in range(cols))).rstrip()]
    for r, row in enumerate(flat):
        texts = [label(cells[f]) if f in cells else "-" for f in row]  # "-": an element the store leaves as it was
        body = "".join(text + " " * (cell_width + 1 - ansilen(text)) for text in texts)
        lines.append(f"  {row[0] if rows_total is None else r:>6}  {body.rstrip()}")
    lines.append("  each cell: " + ", ".join(f"{g} = {what}" for g, _, what in parts))
    if any(f not in cells for row in flat for f in row):
        lines.append("  - = an element this kernel doesn't write (its store covers part of the buffer)")
    if sum(c in ("blue", "BLUE") for c in colors) > 1:
        lines.append(
            "  g lists the blue axes' indices in axis order; the launch numbers them the other way round "
            f"({'get_group_id' if groups else 'get_global_id'}(0) is the last blue axis)"
        )
    if green := [a for a in range(k.first_reduce, k.first_reduce + k.group_for_reduces) if colors[a] == "green"]:
        threads = prod(k.full_shape[a] for a in green)
        lines.append(f"  and the {threads} green threads of each cell's thread share its reduce; the first writes it")
    return lines


# -- the command line --


@dataclass
class Step:
    """A step of build_demo: `opt` (None: the start) and the kernel after it (apply_opt refused it: the kernel as it
    was, and why), the kernel before it, and the decision whose branch chose it (None: an opt given, not chosen)."""

    opt: Opt | None
    kernel: Kernel
    before: Kernel | None = None
    decision: Decision | None = None
    refused: str = ""


def demo_steps(
    name: str, target: str | None = None, opts: Sequence[Opt] | None = None, sizes: Sequence[int] | None = None
) -> tuple[str, tuple[int, ...], list[Step], list[tuple[Decision, list[Opt]]]]:
    """One demo kernel (at `sizes`, default its own) optimized a step at a time on `target` (default its own): opts
    in order, else the demo's own opts, else what optimize chooses (tinygrad's get_linearizer: required opts, tensor
    cores, else the hand-coded ones); a refused opt is kept with why, and skipped. Returns the target, the sizes, the
    steps and the heuristics' record (record_steps; empty where they did not choose)."""
    if name not in DEMOS:
        raise ValueError(f"no demo kernel {name!r}; there are {', '.join(DEMOS)}")
    check_arg("demo_kernel", "target", target, target in (None, *TARGETS), "None or one of " + ", ".join(TARGETS))
    d, target = DEMOS[name], target or DEMOS[name].target
    sizes = tuple(d.sizes if sizes is None else sizes)
    if len(sizes) != len(d.sizes) or not all(is_int(x) and x >= 1 for x in sizes):
        want = f"{len(d.sizes)} sizes >= 1 ({'x'.join(map(str, d.sizes))} by default)"
        raise ValueError(f"{name} takes {want}, not {'x'.join(map(str, sizes))}")
    k = Kernel(*d.build(*sizes), opts=TARGETS[target])
    chosen: list[tuple[Opt, Decision | None]] = [(o, None) for o in (opts or [Opt.parse(o) for o in d.opts])]
    record: list[tuple[Decision, list[Opt]]] = []
    if opts is None and not d.opts:
        tuned, decisions = weighed(k)
        record = record_steps(decisions, tuned.applied_opts)
        chosen = [(o, decision) for decision, chosen_opts in record for o in chosen_opts]
    steps = [Step(None, k.copy())]
    for opt, decision in chosen:
        before = k.copy()
        try:
            k.apply_opt(opt)
            steps.append(Step(opt, k.copy(), before, decision))
        except KernelOptError as e:  # the kernel stays as it was
            steps.append(Step(opt, before, before, decision, str(e)))
    return target, sizes, steps, record


def build_demo(
    name: str, target: str | None = None, opts: Sequence[Opt] | None = None, sizes: Sequence[int] | None = None
) -> tuple[Kernel, list[tuple[Opt, str]]]:
    """One demo kernel optimized as demo_steps says, printing nothing: the kernel, and the opts refused with why."""
    steps = demo_steps(name, target, opts, sizes)[2]
    return steps[-1].kernel, [(s.opt, s.refused) for s in steps if s.refused]


def demo_kernel(
    name: str,
    target: str | None = None,
    opts: Sequence[Opt] | None = None,
    out=None,
    view: str = "steps",
    every_step: bool = False,
    width: int | None = None,
    sizes: Sequence[int] | None = None,
) -> tuple[Kernel, list[tuple[Opt, str]]]:
    """Print how the optimizer reshapes one demo kernel, a step at a time (demo_steps), and return what build_demo
    returns. `view` is "steps" (one line per opt, with the reason the heuristics chose it), "explain", "loops" (with
    every_step, after each opt too) or "map". Lines are wrapped to `width` columns (default: terminal_width(out))."""
    out = out or sys.stdout
    width = width or terminal_width(out)
    check_arg("demo_kernel", "view", view, view in ("steps", "explain", "loops", "map"), "steps, explain, loops or map")
    target, sizes, steps, record = demo_steps(name, target, opts, sizes)
    d, k, rows, counted, roles = DEMOS[name], steps[-1].kernel, [], [], set()
    # each step's row of the table, and the lines the view prints under it (--explain: instead of it)
    for s in steps:
        label = "start" if s.opt is None else str(s.opt)
        if s.refused:
            under = [f"  {label:<16}rejected: {s.refused}"] if view == "explain" else []
            rows.append((label, f"rejected: {s.refused}", "", under))
            continue
        why = "" if s.decision is None else reason(s.decision, s.opt, s.before, buffer_names(s.before, d.buffers))
        under = _explain(s.kernel, s.opt, why, d.buffers, record, s.before) if view == "explain" else []
        if every_step and view == "loops":
            under = c_listing(s.kernel, d.buffers) + [""]
        rows.append((label, shape_row(s.kernel), why, under))
        if s.opt is not None and s.opt.axis is not None and s.opt.real_axis(s.before) != s.opt.axis:
            counted.append(f"{s.opt} is axis {s.opt.real_axis(s.before)}")
        roles.update(s.kernel.colors())
    label_width = max(16, max(len(row[0]) for row in rows) + 2)  # a long label never runs into its shape
    shape_width = max(ansilen(row[1]) for row in rows) + 3
    lines = [f"{name} [{target}]: {d.text.format(*sizes)}"]
    for label, shape, why, under in rows:  # the reason after the shape, wrapped under its own column if there's room
        head = f"  {label:<{label_width}}{shape}{' ' * (shape_width - ansilen(shape))}"
        hang = ansilen(head) if why and ansilen(head) + 20 <= width else None
        lines += under if view == "explain" else fit((head + why).rstrip(), width, hang) + under
    if counted:  # the axis numbers of UNROLL, GROUP and GROUPTOP count from a reduce axis
        lines.append(
            f"  ({', '.join(counted)} of the line above: UNROLL counts axes from the first reduce axis, GROUP and "
            "GROUPTOP from the first red one, the others from 0)"
        )
    if not use_color():  # the colours' letters
        lines.append("  (" + ", ".join(f"{ROLES[c][0]} {c}: {ROLES[c][1]}" for c in COLOR_LEGEND if c in roles) + ")")
    if view == "loops" and not every_step:
        lines += [""] + c_listing(k, d.buffers)
    elif view == "map":
        lines += [""] + output_map(k, d.buffers, width=width)
    print("\n".join(x for line in "\n".join(lines).split("\n") for x in fit(line, width)), file=out)
    return k, [(s.opt, s.refused) for s in steps if s.refused]


def parse_opt_arg(text: str) -> Opt:
    """Opt.parse for argparse: a bad opt is reported with what an opt looks like."""
    try:
        return Opt.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def sizes_arg(text: str) -> tuple[int, ...]:
    """--size 4096x4096 -> (4096, 4096): sizes >= 1, or an error that says what a size looks like."""
    if not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", text):
        raise argparse.ArgumentTypeError(f"want sizes >= 1 joined by x, such as 4096x4096: got {text!r}")
    return tuple(int(x) for x in text.split("x"))


def output_file(path: str) -> str:
    """An argparse type for a file a command line writes: refused before any work where it can't be (its folder is
    missing or not writable, or it is a folder), not after minutes of measuring."""
    folder = os.path.dirname(os.path.abspath(path))
    why = "it is a folder" if os.path.isdir(path) else f"no folder {folder}" if not os.path.isdir(folder) else None
    if why or not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"can't write {path!r}: {why or f'the folder {folder} is not writable'}")
    return path


def write_file(path: str, text: str) -> None:
    """Write text to path whole or not at all: into a temporary file of its own beside it, renamed over it
    (os.replace), so that a failure on the way leaves what path held and no other process or thread reads half a
    file. The project's one way to write a file: the pages, the tools' outputs, the caches."""
    fd, tmp = tempfile.mkstemp(".tmp", f".{os.path.basename(path)}.", os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # as open() makes a file (mkstemp's are the owner's only): pages are published
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type for the command lines: an integer >= low, or an error that says so."""

    def parse(text: str) -> int:
        try:
            if int(text) >= low:
                return int(text)
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")

    return parse


def main(argv: Sequence[str] | None = None, pages: Callable[..., int] | None = None) -> int:
    """The demo's command line; `pages` writes --html's pages (page.write, handed in by the entry points: page.py
    imports demo, so demo can't import it)."""
    p = argparse.ArgumentParser(
        prog="python kernel.py",
        description="Watch tinygrad 0.9.1's kernel optimizer reshape classic kernels. Each axis of a kernel's shape "
        "is coloured by what it became; every line shows one optimization and the shape after it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="kernels: " + ", ".join(DEMOS) + "\n\nexamples:\n  python kernel.py demo\n"
        "  python kernel.py demo matmul\n"
        "  python kernel.py demo matmul --opt UPCAST:0:4 --opt LOCAL:1:16 --opt UNROLL:0:4\n"
        "  python kernel.py demo matmul --target metal\n"
        "  python kernel.py demo matmul --explain     # strides after each opt; what each heuristic weighed\n"
        "  python kernel.py demo matvec --loops       # its loop nest: the C it runs as (--steps: after every opt)\n"
        "  python kernel.py demo matvec --map         # which work-group, thread and register computes each output\n\n"
        "An opt is OP:AXIS:AMT with OP one of " + ", ".join(o.name for o in OptOps) + " (NOLOCALS takes no "
        "axis); AMT 0 means the whole axis. AXIS counts in the shape the opt applies to (the line above it in the "
        "step table): from axis 0, but UNROLL from the first reduce axis (the first green, white or red one) and "
        "GROUP, GROUPTOP from the first reduce axis not yet grouped (the first red one).\n"
        "Colour goes to a terminal only: FORCE_COLOR=1 forces it, NO_COLOR=1 turns it off (then each size is "
        "followed by its colour's letter).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="show how kernels are optimized")
    d.add_argument("name", nargs="?", choices=list(DEMOS), help="one kernel (default: all)")
    opt_help = "apply these opts in order instead of the heuristics (repeatable)"
    d.add_argument("--opt", action="append", type=parse_opt_arg, metavar="OP:AXIS:AMT", help=opt_help)
    d.add_argument("--target", choices=list(TARGETS), help="the device to optimize for (default: the kernel's own)")
    d.add_argument("--size", type=sizes_arg, metavar="AxB", help="the kernel's sizes (e.g. sum_axis0 --size 4096x4096)")
    views = d.add_mutually_exclusive_group()
    for view, what in [
        ("explain", "under each opt, every buffer's strides, and each heuristic's candidates and sort keys"),
        ("loops", "the optimized kernel's loop nest: its OpenCL C, each id and loop in its axis's colour"),
        ("map", "the output as a grid: the work-group, thread and register of each element"),
    ]:
        views.add_argument(f"--{view}", dest="view", action="store_const", const=view, default="steps", help=what)
    html_help = "write every view of every step as a static page: one kernel's into FILE, or all and an index into DIR"
    views.add_argument("--html", metavar="FILE|DIR", help=html_help)
    d.add_argument("--steps", action="store_true", help="the loop nest after every opt (--loops --steps)")
    args = p.parse_args(argv)
    if args.steps and (args.view not in ("steps", "loops") or args.html):
        other = "html" if args.html else args.view
        d.error(f"--steps prints the loop nest after every opt: it goes with --loops, not --{other}")
    if args.size and not args.name:
        d.error("--size goes with one kernel's name: each kernel has sizes of its own")
    args.view = "loops" if args.steps else args.view
    getenv("TC"), getenv("TC_OPT")  # read again where used; here so that a bad one fails before anything is printed
    if args.html and pages is None:
        d.error("--html writes its pages through page.py: run python kernel.py demo ... --html")
    if args.html:
        return pages(args.html, args.name, args.target, args.opt, args.size)
    if not args.name:  # the legend once, before all the kernels
        print("Each axis of a kernel's shape is coloured by its role (LOCAL, UPCAST, ...: the opts that give it):")
        print("\n".join(x for line in legend().split("\n") for x in fit(line, terminal_width(), hang=14)))
    for name in [args.name] if args.name else list(DEMOS):
        if not args.name:
            print()
        try:
            demo_kernel(name, args.target, args.opt, view=args.view, every_step=args.steps, sizes=args.size)
        except ValueError as e:  # sizes the kernel doesn't take
            if not args.size:
                raise
            d.error(str(e))
    return 0


if __name__ == "__main__":
    import page

    sys.exit(run_command_line(lambda: main(pages=page.write), "python kernel.py"))
