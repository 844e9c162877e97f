"""page.py: one static HTML page per demo kernel (`python kernel.py demo NAME --html FILE`; `--html DIR`: every
kernel's page and an index.html). For each step, "start" then each opt: the shape as coloured boxes, the axis the opt
split and the two it became, --explain's reasons and strides, the --map grid as a table and the C with its launch.

One description: every text on a page is what the terminal views print for that step (demo.py's functions, run under
forced colour, their ANSI colours turned into classes), so a page can't say what the command line doesn't. Standard
library only: no server, no network, nothing to build; it opens from file:// and in a notebook cell (its CSS is scoped
to `.kp`), and is complete without its script (which steps with the arrow keys)."""

from __future__ import annotations

import contextlib
import html
import io
import itertools
import math
import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence

import demo
from demo import DEMOS, PALETTE, ROLES
from kernel import Kernel, KernelOptError, Opt, OptOps, ansistrip
from render import render

WIDTH = 100  # the columns of the views' text: what the command line prints off a terminal
NAMES = "black red green yellow blue magenta cyan white".split()  # colored()'s codes: 30 + index, bright 90 + index


@contextlib.contextmanager
def forced_colour() -> Iterator[None]:
    """FORCE_COLOR=1 (and no NO_COLOR) while the views print: their colours are the page's."""
    saved = {k: os.environ.pop(k, None) for k in ("NO_COLOR", "FORCE_COLOR")}
    os.environ["FORCE_COLOR"] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.update({k: v})


def ansi_runs(line: str) -> list[tuple[str | None, str]]:
    """colored()'s ANSI codes undone: (colour, text) runs of `line`, colour None for plain text, an UPPERCASE name for
    a bright code; a code that is none of PALETTE's colours is a ValueError."""
    runs, colour = [], None
    for i, part in enumerate(re.split(r"\x1b\[(\d+)m", line)):
        if i % 2 == 0:
            runs += [(colour, part)] if part else []
            continue
        code = int(part)
        colour = None if code == 0 else NAMES[code % 10].upper() if code >= 90 else NAMES[code % 10]
        if code not in (0, *range(30, 38), *range(90, 98)) or (colour is not None and colour not in PALETTE):
            raise ValueError(f"ansi_runs: colour code {code} is none of PALETTE's colours")
    return runs


def span(colour: str | None, text: str) -> str:
    return f'<span class="c-{colour}">{html.escape(text)}</span>' if colour else html.escape(text)


def to_html(lines: Sequence[str]) -> str:
    return "\n".join("".join(span(c, t) for c, t in ansi_runs(line)) for line in lines)


def pre(lines: Sequence[str], cls: str = "") -> str:
    return f'<pre class="panel {cls}">{to_html(lines)}</pre>'


def wrapping(lines: Sequence[str], cls: str) -> str:
    """A panel whose lines the browser wraps to its width, each line's rest under its own indent 4 columns in (as the
    command line's fit() hangs a line): one block a line, its newline inside it."""
    rows = []
    for i, line in enumerate(lines):
        hang = len(ansistrip(line)) - len(ansistrip(line).lstrip()) + 4
        end = "\n" * (i < len(lines) - 1)
        rows.append(f'<span class="line" style="--hang:{hang}ch">{to_html([line])}{end}</span>')
    return f'<pre class="panel {cls}">{"".join(rows)}</pre>'


def steps_of(text: str, labels: Sequence[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """A view's output cut into (the kernel's header, one block of lines per step, the notes after the last step): a
    step's block starts at its row, a line indented by two spaces that starts with the step's label."""
    lines = text.rstrip("\n").split("\n")
    heads = [i for i, x in enumerate(lines) if re.match(r"  [^ (]", ansistrip(x))]
    if len(heads) != len(labels) or any(not ansistrip(lines[i])[2:].startswith(f"{x} ") for i, x in zip(heads, labels)):
        raise ValueError(f"page: the view's rows are not the steps {', '.join(labels)}")
    end = next((i for i in range(heads[-1], len(lines)) if ansistrip(lines[i]).startswith("  (")), len(lines))
    return lines[: heads[0]], [lines[a:b] for a, b in zip(heads, heads[1:] + [end])], lines[end:]


def boxes(k: Kernel, marked: set[int] = frozenset(), cls: str = "") -> str:
    """k's shape as boxes: each axis's size and role on its colour, as wide as log2 of its size; `marked` outlined.
    cls "mini": small boxes, no text (the navigation's)."""
    out = []
    for a, (size, colour) in enumerate(zip(k.full_shape, k.colors())):
        n = math.log2(max(size if isinstance(size, int) else size.max, 1))  # a Variable: its largest value
        text = f"<b>{html.escape(str(size))}</b><i>{ROLES[colour][1]}</i>" * (cls != "mini")
        style = f"width:{0.25 + 0.12 * n:.2f}em" if cls == "mini" else f"width:{2.2 + 0.65 * n:.1f}em"
        out.append(f'<span class="box c-{colour}{" split" * (a in marked)}" style="{style}">{text}</span>')
    return f'<span class="boxes {cls}">{"".join(out)}</span>'


def split_axes(before: Kernel, after: Kernel, opt: Opt) -> tuple[set[int], set[int]]:
    """The axis of `before` that `opt` split, and the two of `after` it became: the piece shift_to moved (last of the
    registers, locals or groups) and what was left in place (none when the opt took the whole axis). PADTO pads one
    axis in place; NOLOCALS only recolours and TC splits several: none marked."""
    if opt.op in (OptOps.NOLOCALS, OptOps.TC):
        return set(), set()
    axis = opt.real_axis(before)
    if opt.op is OptOps.PADTO:
        return {axis}, {axis}
    moved = {OptOps.UPCAST: after.shape_len, OptOps.UNROLL: after.shape_len, OptOps.LOCAL: after.first_reduce}
    moved = moved.get(opt.op, after.first_reduce + after.group_for_reduces) - 1
    size = before.full_shape[axis]
    whole = isinstance(size, int) and opt.amt in (0, size)
    return {axis}, {moved} | (set() if whole else {axis if axis < moved else axis + 1})


def map_table(lines: Sequence[str]) -> str:
    """--map's lines with its grid as a table: each cell the CLI's label (g, t, r in their colours), its background's
    hue by work-group and its shade by thread, its tooltip `out[5]: work-group 0, thread 1, register 1`; the title and
    the notes as text. A map without a grid (a symbolic kernel's) is its text."""
    plain = [ansistrip(x) for x in lines] + ["", "", ""]  # (a short map is no grid)
    rows = [i for i, x in enumerate(plain) if i > 1 and re.match(r" +\d+  \S", x)]
    title = re.match(r"  (\S+?)\[(.*?)\]", plain[0])  # out[row + column] or out[0, row, column]
    grid = rows and rows == list(range(2, 2 + len(rows))) and re.fullmatch(r" {10}\d+( +\d+)*", plain[1])
    if not (title and grid):
        return pre(lines, "map")  # no grid, or one this reader doesn't know: the text as the CLI prints it
    starts = [m.start() - 10 for m in re.finditer(r"\d+", plain[1])] + [10**9]  # each column, from the row's body
    columns = [int(x) for x in plain[1].split()]
    out, index = title.groups()
    words = dict(re.findall(r"\b(\w) = ([\w-]+)", plain[rows[-1] + 1]))  # each cell: g = work-group (blue axes), ...
    hues: dict[str, int] = {}
    shades: dict[str, int] = {}
    body = []
    for i in rows:
        row = int(plain[i].split()[0])
        at = re.match(r" +\d+  ", plain[i]).end()
        chars, key = [(c, ch) for c, text in ansi_runs(lines[i]) for ch in text], lambda x: x[0]
        cells = []
        for col, a, b in zip(columns, starts, starts[1:]):
            runs = [(c, "".join(ch for _, ch in group)) for c, group in itertools.groupby(chars[at + a : at + b], key)]
            label = "".join(t for _, t in runs).strip()
            parts = dict((x[0], x[1:]) for x in label.split())
            where = index.replace("row", str(row)).replace("column", str(col))
            where = str(row + col) if index == "row + column" else where
            if not parts.get("g"):  # "-": an element the kernel doesn't write
                cells.append(f'<td class="none">{html.escape(label)}</td>')
                continue
            hue = hues.setdefault(parts["g"], len(hues)) * 97 % 360
            shade = 12 + 5 * (shades.setdefault(parts.get("t", ""), len(shades)) % 4)
            title = f"{out}[{where}]: " + ", ".join(f"{words.get(g, g)} {v}" for g, v in parts.items())
            style = f"background:hsl({hue} 40% {shade}%)"
            text = "".join(span(c, t) for c, t in runs).rstrip()
            cells.append(f'<td style="{style}" title="{html.escape(title)}">{text}</td>')
        body.append(f"<tr><th>{row}</th>{''.join(cells)}</tr>")
    head = "<tr><th></th>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    table = f'<table class="grid">{head}{"".join(body)}</table>'
    return f'<div class="panel map">{pre(lines[:1], "bare")}{table}{pre(lines[rows[-1] + 1 :], "bare")}</div>'


def command(name: str | None, target: str | None, opts, sizes, *rest: str) -> str:
    """The command line that prints a view or writes a page: the page's own flags (name None: every kernel), `rest`."""
    args = ["python", "kernel.py", "demo"] + [name] * bool(name) + ["--target", target] * bool(target)
    args += ["--size", "x".join(map(str, sizes))] if sizes else []
    args += [x for o in opts or () for x in ("--opt", str(o))]
    return shlex.join(args + list(rest))


def caption(text: str) -> str:
    return f'<p class="cmd">$ {html.escape(text)}</p>'


def page(name: str, target: str | None = None, opts: Sequence[Opt] | None = None, sizes=None, file="PAGE.html") -> str:
    """The page of demo kernel `name` (with the demo's flags: --target, --opt, --size) as one HTML document; `file`
    names it in the command that writes it. An opt the kernel refuses is a KernelOptError (the page shows steps)."""
    views = {}
    with forced_colour():
        for view in ("steps", "explain"):
            text = io.StringIO()
            refused = demo.demo_kernel(name, target, opts, out=text, view=view, width=WIDTH, sizes=sizes)[1]
            views[view] = text.getvalue()
        if refused:
            raise KernelOptError(f"{name} refuses {refused[0][0]}: {refused[0][1]}")
        d, steps = DEMOS[name], demo.demo_steps(name, target, opts, sizes)[2]  # the kernel after each step
        kernels, applied = [s.kernel for s in steps], [s.opt for s in steps[1:]]
        labels = ["start"] + [str(o) for o in applied]
        header, rows, notes = steps_of(views["steps"], labels)
        explain = steps_of(views["explain"], labels)[1]
        sections = []
        for i, (k, label) in enumerate(zip(kernels, labels)):  # one section a step
            marks = split_axes(kernels[i - 1], k, applied[i - 1]) if i else (set(), set())
            shapes = boxes(kernels[i - 1], marks[0], "before") + '<span class="arrow">&rarr;</span>' * bool(i)
            mapped = [x for line in demo.output_map(k, d.buffers, width=WIDTH) for x in demo.fit(line, WIDTH)]
            launch = f"  launch          {render(k).launch()}".split("\n")
            sections.append(
                f'<section class="step" id="step-{i}"><h2>{html.escape(label)}</h2>'
                f'<div class="shapes">{shapes * bool(i)}{boxes(k, marks[1])}</div><div class="cols"><div>'
                f"{caption(command(name, target, opts, sizes, '--explain'))}{pre(explain[i], 'explain')}"
                f"{caption(command(name, target, applied[:i], sizes, '--map')) if i else ''}{map_table(mapped)}"
                f"</div><div>{caption(command(name, target, opts, sizes, '--loops', '--steps'))}"
                f"{wrapping(launch, 'launch')}{wrapping(demo.c_listing(k, d.buffers), 'c')}</div></div></section>"
            )
        legend = [x for line in demo.legend().split("\n") for x in demo.fit(line, WIDTH, hang=14)]
    table = "\n".join(f'<a href="#step-{i}">{to_html(row)}</a>' for i, row in enumerate(rows))
    nav = "".join(
        f'<a href="#step-{i}">{html.escape(x)}{boxes(k, cls="mini")}</a>'
        for i, (x, k) in enumerate(zip(labels, kernels))
    )
    title = " ".join(ansistrip(x).strip() for x in header)
    return document(
        title,
        f"<header><h1>{to_html(header)}</h1><nav>{nav}</nav></header>{caption(command(name, target, opts, sizes))}"
        f'<pre class="panel steps">{table}{chr(10) * bool(notes)}{to_html(notes)}</pre>{"".join(sections)}'
        f"<footer>{pre(legend, 'legend')}{caption(command(name, target, opts, sizes, '--html', file))}</footer>",
    )


def index(target: str | None = None, opts: Sequence[Opt] | None = None) -> str:
    """index.html: each demo kernel's header line (what it computes), linked to its page, over its optimized shape."""
    items = []
    with forced_colour():
        for name in DEMOS:
            text = io.StringIO()
            k, _ = demo.demo_kernel(name, target, opts, out=text, width=WIDTH)
            head = steps_of(text.getvalue(), ["start"] + [str(o) for o in k.applied_opts])[0]
            items.append(f'<li><a href="{name}.html">{to_html(head)}</a>{boxes(k)}</li>')
        legend = [x for line in demo.legend().split("\n") for x in demo.fit(line, WIDTH, hang=14)]
    flags = caption(command(None, target, opts, None, "--html", "DIR"))
    body = f"<h1>$ {html.escape(command(None, target, opts, None))}</h1>{pre(legend, 'legend')}"
    return document("python kernel.py demo", f"{body}<ul>{''.join(items)}</ul><footer>{flags}</footer>")


def document(title: str, body: str) -> str:
    colours = "".join(
        f".kp .c-{c}{{color:{v}}}.kp .box.c-{c}{{background:{v};color:#0d1117}}" for c, v in PALETTE.items()
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width"><title>{html.escape(title)}</title><style>{CSS}{colours}</style></head>\n'
        f'<body style="margin:0;background:#0d1117"><div class="kp">{body}</div>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


# a dark page of its own, as the README's SVG: tinygrad's eight colours (PALETTE) read alike on any site's theme. Each
# rule is under .kp, so that the page shown in a notebook's cell leaves the notebook's own look alone (the body's style
# is an attribute: a notebook drops the <body> tag, and it with it).
CSS = """
.kp{background:#0d1117;color:#c9d1d9;font:14px/1.45 system-ui,sans-serif;padding:0 20px 40px}
.kp pre,.kp .grid,.kp .box,.kp nav,.kp .cmd,.kp h1,.kp h2{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,
'DejaVu Sans Mono',monospace;font-size:12px}
.kp h1{font-size:15px;font-weight:600;margin:0;padding:14px 0 8px;white-space:pre-wrap}
.kp h2{font-size:15px;margin:0 0 8px;color:#f0f6fc}
.kp header{position:sticky;top:0;background:#0d1117;z-index:1;border-bottom:1px solid #30363d;margin:0 -20px;
padding:0 20px 8px}
.kp nav a{display:inline-block;margin:0 6px 4px 0;padding:1px 8px;border:1px solid #30363d;border-radius:10px;
color:#c9d1d9;text-decoration:none}
.kp nav a:hover,.kp .steps a:hover{background:#1f2937}
.kp .panel{background:#161b22;border:1px solid #30363d;border-radius:6px;padding:8px 12px;margin:0 0 12px;
overflow:auto;line-height:1.35}
.kp pre.bare{background:none;border:0;padding:0;margin:4px 0;overflow:visible}
.kp .steps a{color:inherit;text-decoration:none;display:inline-block;min-width:100%}
.kp .c,.kp .launch{white-space:pre-wrap;overflow-wrap:anywhere}
.kp .line{display:block;padding-left:var(--hang);text-indent:calc(-1 * var(--hang))}
.kp .cmd{color:#8b949e;margin:6px 0 4px}
.kp .step{border-top:1px solid #30363d;padding-top:14px;margin-top:20px;scroll-margin-top:90px}
.kp .shapes{display:flex;flex-wrap:wrap;align-items:center;gap:6px 14px;margin-bottom:10px}
.kp .boxes{display:flex;flex-wrap:wrap;gap:4px}
.kp .mini{display:inline-flex;gap:2px;margin-left:6px;vertical-align:middle}
.kp .mini .box{min-height:10px;height:10px;border-radius:2px;padding:0}
.kp .before{opacity:.45}
.kp .arrow{color:#8b949e;font-size:18px}
.kp .box{display:inline-flex;flex-direction:column;align-items:center;justify-content:center;min-height:38px;
border-radius:5px;padding:0 4px;box-sizing:border-box;min-width:max-content}
.kp .box b{font-size:13px}.kp .box i{font-style:normal;font-size:10px;opacity:.8}
.kp .box.split{outline:2px solid #f0f6fc;outline-offset:2px}
.kp .cols{display:grid;grid-template-columns:max-content minmax(30ch,1fr);gap:0 16px;
align-items:start}
.kp .cols>div{min-width:0}
.kp .grid{border-collapse:separate;border-spacing:2px;margin:2px 0}
.kp .grid td{padding:1px 6px;border-radius:3px;white-space:pre}
.kp .grid th{color:#8b949e;font-weight:normal;padding:0 6px;text-align:right}
.kp .grid td.none{color:#8b949e}
.kp ul{list-style:none;padding:0}.kp li{margin:0 0 14px}
.kp li a{color:inherit;text-decoration:underline 1px #484f58;text-underline-offset:3px}.kp li a:hover{color:#f0f6fc}
.kp li pre{margin:0 0 4px;font-size:13px}
@media (max-width:1100px){.kp .cols{grid-template-columns:minmax(0,1fr)}}
"""

# optional: the arrow keys step to the next or the previous step (never while typing, as in a notebook's cell)
SCRIPT = """
document.addEventListener("keydown", function (e) {
  var go = {ArrowRight: 1, ArrowLeft: -1}[e.key], t = e.target;
  if (!go || e.altKey || e.ctrlKey || e.metaKey || t.isContentEditable || /INPUT|TEXTAREA|SELECT/.test(t.tagName)) {
    return;
  }
  var steps = Array.prototype.slice.call(document.querySelectorAll(".kp .step")), at = -1;
  steps.forEach(function (s, i) { if (s.getBoundingClientRect().top < 100) at = i; });
  var next = steps[Math.max(0, Math.min(steps.length - 1, at + go))];
  if (next) { e.preventDefault(); next.scrollIntoView(); }
});
"""


def write(path: str, name: str | None = None, target=None, opts=None, sizes=None) -> int:
    """--html: the page of kernel `name` into the file `path`, or (no name) every kernel's page and index.html into
    the folder `path` (made if missing). Bad input (a refused opt, a size, a path that can't be written): one line on
    stderr, status 2, and no file written; every page is made before any is written."""
    file = path
    try:
        if name:
            pages = {path: page(name, target, opts, sizes, path)}
        else:
            pages = {os.path.join(path, f"{n}.html"): page(n, target, opts, None, f"{n}.html") for n in DEMOS}
            pages[os.path.join(path, "index.html")] = index(target, opts)
            os.makedirs(path, exist_ok=True)
        for file, text in pages.items():
            demo.write_file(file, text)
    except OSError as e:
        print(f"python kernel.py: error: can't write {file}: {e.strerror}", file=sys.stderr)
        return 2
    except (KernelOptError, ValueError) as e:
        print(f"python kernel.py: error: {e}", file=sys.stderr)
        return 2
    return 0
