"""The demo's pages (page.py: `python kernel.py demo NAME --html FILE`, `--html DIR`), as a reader sees them.

Structure, without a browser (spec): every demo kernel's page parses; it has one section per step; each panel's text,
tags stripped, is what the command line prints for that view and step (run here as a user runs it, through
demo.main and runtime.main); the boxes are each step's shape and colours, the split the opt made is outlined; each map
cell's work-group, thread and register are the kernel's (demo._output_cells); the C is render(k).src; every colour
class is one of the eight; nothing is fetched; each page is under 1 MB. The command line's bad input: one line, status
2, no file. The README's screenshot shows the page as it is now.

In a real browser (marker `browser`: Debian's chromium, headless; skipped, saying why, without it): the page loads
from file:// as written, a screenshot shows the colour of each axis colour the kernel has on many pixels (and no box
of another), and no panel overflows a window 1400 px wide; the arrow keys step through matmul's. matmul, matvec and
conv2d by default; BROWSER_ALL_PAGES=1: every demo kernel.
"""

from __future__ import annotations

import functools
import hashlib
import html.parser
import io
import json
import os
import re
import runpy
import struct
import zlib

import numpy as np
import pytest

import demo
import page
from demo import DEMOS, PALETTE, ROLES
from kernel import TARGETS, Kernel, KernelOptError, Opt, OptOps, ansistrip, colored
from render import render
from tests.common import ROOT, one_line_error, run_script

BROWSER = runpy.run_path(os.path.join(ROOT, "tools", "browser.py"))
pytestmark = pytest.mark.usefixtures("no_colour_settings")


# ============================================================================================================
# reading a page: a small DOM from html.parser
# ============================================================================================================


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]):
        self.tag, self.attrs, self.children = tag, attrs, []

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        """Every element under this one (depth first) with the tag and the class given."""
        found = []
        for c in self.children:
            if isinstance(c, Element):
                if (tag is None or c.tag == tag) and (cls is None or cls in c.classes):
                    found.append(c)
                found += c.all(tag, cls)
        return found

    def one(self, tag: str | None = None, cls: str | None = None) -> Element:
        (found,) = self.all(tag, cls)
        return found


class Parser(html.parser.HTMLParser):
    """The page as a tree; an end tag that doesn't close the open element, or one left open, is malformed."""

    VOID = {"meta", "br", "img", "link", "input"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(text: str) -> Element:
    p = Parser()
    p.feed(text)
    p.close()
    assert p.stack == [p.root], f"left open: {[e.tag for e in p.stack[1:]]}"
    return p.root


def lines(element: Element) -> list[str]:
    return element.text().split("\n")


# ============================================================================================================
# what the command line prints, run as a user runs it (colour forced, 100 columns off a terminal)
# ============================================================================================================


def cli(capsys, monkeypatch, *args: str, script=demo) -> list[str]:
    monkeypatch.setenv("FORCE_COLOR", "1")
    capsys.readouterr()
    assert script.main([*args]) == 0
    return [ansistrip(x) for x in capsys.readouterr().out.rstrip("\n").split("\n")]


def flags_of(opts: list[Opt]) -> list[str]:
    return [x for o in opts for x in ("--opt", str(o))]


@functools.cache
def built(name: str) -> tuple[str, Element, list[Kernel], list[Opt]]:
    """A demo kernel's page, parsed, the kernel after each step (start first), and the opts applied."""
    text = page.page(name)
    d = DEMOS[name]
    k = Kernel(*d.build(*d.sizes), opts=TARGETS[d.target])
    kernels, applied = [k.copy()], demo.demo_kernel(name, out=io.StringIO())[0].applied_opts
    for opt in applied:
        k.apply_opt(opt)
        kernels.append(k.copy())
    return text, parse(text), kernels, applied


def sections(name: str) -> list[Element]:
    return built(name)[1].all("section", "step")


# ============================================================================================================
# structure
# ============================================================================================================


@pytest.mark.parametrize("name", DEMOS)
def test_a_page_parses_into_one_section_per_step(name):
    _, doc, kernels, applied = built(name)
    steps = sections(name)
    assert [s.attrs["id"] for s in steps] == [f"step-{i}" for i in range(len(kernels))]
    assert [s.one("h2").text() for s in steps] == ["start"] + [str(o) for o in applied]
    assert [a.attrs["href"] for a in doc.one("nav").all("a")] == [f"#step-{i}" for i in range(len(kernels))]
    assert len(applied) >= 1


@pytest.mark.parametrize("name", DEMOS)
def test_the_step_table_and_explain_panels_are_what_the_command_line_prints(name, capsys, monkeypatch):
    """The page's header and step table are `python kernel.py demo NAME`; its header, the --explain panels of all its
    steps in order and the table's closing notes are `... --explain`: line for line, nothing added or left out."""
    doc = built(name)[1]
    header, table = lines(doc.one("h1")), lines(doc.one("pre", "steps"))
    assert cli(capsys, monkeypatch, "demo", name) == header + table
    explained = [x for s in sections(name) for x in lines(s.one("pre", "explain"))]
    notes = table[sum(len(lines(a)) for a in doc.one("pre", "steps").all("a")) :]  # after the rows
    assert cli(capsys, monkeypatch, "demo", name, "--explain") == header + explained + notes
    for s, row in zip(sections(name), doc.one("pre", "steps").all("a")):  # each row of the table links its step
        assert row.attrs["href"] == "#" + s.attrs["id"] and row.text().split()[0] == s.one("h2").text()


@pytest.mark.parametrize("name", DEMOS)
def test_the_c_panels_are_each_steps_c_and_launch(name, capsys, monkeypatch):
    """Each step's C is render(k).src under the line naming the buffers, as `--loops --steps` prints it on a terminal
    wide enough not to wrap it (the browser wraps it); its launch line is `python runtime.py show`'s for that step."""
    R = pytest.importorskip("runtime")
    _, _, kernels, applied = built(name)
    wide = io.StringIO()
    with page.forced_colour():
        demo.demo_kernel(name, out=wide, view="loops", every_step=True, width=10**6)
    printed = "\n".join(ansistrip(x) for x in wide.getvalue().split("\n"))
    for i, (s, k) in enumerate(zip(sections(name), kernels)):
        c = lines(s.one("pre", "c"))
        assert c[0].startswith("  (data0 is ") and "\n".join(x[2:] for x in c[1:]) == render(k).src.rstrip()
        assert "\n" + "\n".join(c) + "\n" in printed
        launch = lines(s.one("pre", "launch"))
        if i:  # the start has no command line of its own: --opt takes one opt at least
            show = cli(capsys, monkeypatch, "show", name, *flags_of(applied[:i]), script=R)
            assert show[show.index(launch[0]) : show.index(launch[0]) + len(launch)] == launch
        assert launch[0].startswith("  launch          [")


def map_cells(row: str) -> list[str]:
    """The cells of a --map grid row, each `g.. t.. r..` or `-`: its words, a new cell at each g or -."""
    cells: list[list[str]] = []
    for word in row.split()[1:]:
        if word[0] in "g-":
            cells.append([])
        cells[-1].append(word)
    return [" ".join(c) for c in cells]


@pytest.mark.parametrize("name", DEMOS)
def test_the_maps_are_what_the_command_line_prints_and_say_who_computes_each_output(name, capsys, monkeypatch):
    """Each step's map is the tail of `python kernel.py demo NAME --opt ... --map` for its opts: the title, the grid's
    cells (as a table) and the notes; each cell's label and tooltip are the work-group, thread and register that
    compute that element, as demo._output_cells finds them from the kernel's shape."""
    _, _, kernels, applied = built(name)
    for i, (s, k) in enumerate(zip(sections(name), kernels)):
        panel = s.one(cls="map")
        if i:
            printed = cli(capsys, monkeypatch, "demo", name, *flags_of(applied[:i]), "--map")
            printed = printed[len(printed) - printed[::-1].index("") :]  # after the last blank line: the map
        else:
            printed = [ansistrip(y) for x in demo.output_map(k, DEMOS[name].buffers) for y in demo.fit(x, 100)]
        if not panel.all("table"):  # a map without a grid (a symbolic kernel)
            assert lines(panel) == printed and "grid" not in "\n".join(printed)
            continue
        title, notes = [lines(p) for p in panel.all("pre")]
        rows = panel.one("table").all("tr")
        assert title == printed[:1] and notes == printed[2 + len(rows) - 1 :]
        assert [th.text() for th in rows[0].all("th")][1:] == printed[1].split()
        shape = re.search(r"of shape \(([\d, ]+)\)", title[0])
        columns = int(shape.group(1).split(",")[-1]) if shape else None
        for tr, line in zip(rows[1:], printed[2:]):
            tds, row = tr.all("td"), int(tr.one("th").text())
            assert [td.text() for td in tds] == map_cells(line) and int(line.split()[0]) == row
            for col, td in zip(map(int, printed[1].split()), tds):
                flat = row * columns + col if columns else row + col
                cell = demo._output_cells(k, {flat}).get(flat)
                if cell is None:
                    assert td.text() == "-" and "title" not in td.attrs
                    continue
                want = {p: ",".join(str(v) for c in cs for v in cell.get(c, [])) or "0" for p, cs in
                        (("g", ("blue", "BLUE")), ("t", ("cyan",)), ("r", ("yellow", "white")))}  # fmt: skip
                got = {w[0]: w[1:] for w in td.text().split()}
                assert got == {p: v for p, v in want.items() if p in got} and "g" in got
                out, where = re.match(r"  (\w+)\[(.*?)\]", title[0]).groups()
                where = str(flat) if "+" in where else where.replace("row", str(row)).replace("column", str(col))
                said, pairs = td.attrs["title"].split(": ", 1)
                words = [re.search(rf"\b{p} = ([\w-]+)", notes[0]).group(1) for p in got]  # each cell: g = work-group
                assert said == f"{out}[{where}]" and re.findall(r"([a-z-]+) (\d+(?:,\d+)*)", pairs) == list(
                    zip(words, got.values())
                )


@pytest.mark.parametrize("name", DEMOS)
def test_the_boxes_are_each_steps_shape_and_outline_the_split(name):
    """Each step's boxes: the sizes and colours of its shape (the step before, faded, beside it), with the role the
    legend gives each colour. The axis the opt split is outlined before; after it, the piece it made (the opt's own
    colour, its amount) and what was left of the axis (their product the axis's size)."""
    _, doc, kernels, applied = built(name)

    def shape(row: Element) -> list[tuple[str, str, str]]:
        colours = [next(c[2:] for c in b.classes if c.startswith("c-")) for b in row.all("span", "box")]
        return [(b.one("b").text(), c, b.one("i").text()) for b, c in zip(row.all("span", "box"), colours)]

    for i, s in enumerate(sections(name)):
        rows = s.one(cls="shapes").all("span", "boxes")
        assert len(rows) == 1 + (i > 0)
        for row, k in zip(rows, kernels[max(i - 1, 0) : i + 1] if i else kernels[:1]):
            assert shape(row) == [(str(x), c, ROLES[c][1]) for x, c in zip(k.full_shape, k.colors())]
        if not i:
            continue
        before, after, opt = kernels[i - 1], kernels[i], applied[i - 1]
        split = [[n for n, b in enumerate(row.all("span", "box")) if "split" in b.classes] for row in rows]
        if opt.op in (OptOps.NOLOCALS, OptOps.TC):
            assert split == [[], []]
            continue
        assert split[0] == [opt.real_axis(before)]
        size = before.full_shape[opt.real_axis(before)]
        if opt.op is OptOps.PADTO:
            assert split[1] == split[0] and after.full_shape[split[1][0]] % opt.amt == 0
            continue
        amt = opt.amt or size
        colour = "green" if opt.op is OptOps.GROUPTOP else next(c for c, (_, r) in ROLES.items() if r == opt.op.name)
        made = [a for a in split[1] if after.colors()[a] == colour]
        assert len(made) == 1 and after.full_shape[made[0]] == amt
        left = [a for a in split[1] if a != made[0]]
        assert [after.full_shape[a] * amt for a in left] == ([size] if amt != size else [])
    nav = [a.one("span", "mini") for a in doc.one("nav").all("a")]
    assert [[next(c[2:] for c in b.classes if c.startswith("c-")) for b in n.all("span", "box")] for n in nav] == [
        k.colors() for k in kernels
    ]


@pytest.mark.parametrize("name", DEMOS)
def test_a_page_uses_the_eight_colours_fetches_nothing_and_is_small(name):
    text, doc, *_ = built(name)
    classes = {c for e in doc.all() for c in e.classes if c.startswith("c-")}
    assert classes and classes <= {f"c-{c}" for c in PALETTE}
    assert not [e.tag for e in doc.all() if e.tag in ("link", "img", "iframe", "object", "embed")]
    assert not [e.attrs for e in doc.all() if "src" in e.attrs or e.attrs.get("href", "#").split("#")[0]]
    assert not re.search(r"https?://|@import|url\(", text, re.I)  # nothing the page would fetch
    assert len(text.encode()) < 1_000_000


def test_what_the_readme_says_of_the_pages_is_true():
    """The tooltip it quotes is matvec's out[5]; the largest page is the one it names, of the size it says."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    tip = re.search(r'hover one of matvec\'s: "(out\[5\]: [^"]*)"', readme.replace("\n", " "))
    assert tip and tip.group(1) in [td.attrs.get("title") for td in sections("matvec")[-1].all("td")]
    sizes = {n: len(page.page(n, file=f"{n}.html").encode()) for n in DEMOS}  # as --html DIR writes them
    said = re.search(r"the largest, (\w+)'s, is (\d+) KB", readme)
    assert said and said.groups() == (max(sizes, key=sizes.get), str(round(max(sizes.values()) / 1000))), sizes


def test_a_page_is_the_same_every_time_and_its_css_has_each_colour_and_styles_only_the_page():
    """Every CSS rule is under .kp (the page's own div): shown in a notebook's cell, the page styles nothing else."""
    assert page.page("matvec") == page.page("matvec")
    css = parse(page.page("matvec")).one("style").text()
    for colour, value in PALETTE.items():
        assert f".kp .c-{colour}{{color:{value}}}" in css and f".kp .box.c-{colour}{{background:{value};" in css
    selectors = re.findall(r"([^{}]+)\{[^{}]*\}", re.sub(r"@media[^{]*\{", "", css))
    assert len(selectors) > 30 and all(x.strip().startswith(".kp") for s in selectors for x in s.split(",")), selectors


def test_a_page_takes_the_demos_flags_and_names_the_command_that_writes_it(capsys, monkeypatch):
    """--target, --size and --opt make the page of that kernel; the command lines on the page carry them."""
    opts = [Opt.parse("UPCAST:0:4"), Opt.parse("LOCAL:0:8")]
    doc = parse(page.page("matvec", "clang", opts[:1], (256, 128), "mv.html"))
    assert lines(doc.one("h1")) == cli(capsys, monkeypatch, "demo", "matvec", "--target", "clang", "--size", "256x128",
                                       "--opt", "UPCAST:0:4")[:1]  # fmt: skip
    assert [s.one("h2").text() for s in doc.all("section", "step")] == ["start", "UPCAST:0:4"]
    commands = [p.text() for p in doc.all("p", "cmd")]
    flags = "--target clang --size 256x128 --opt UPCAST:0:4"
    assert commands[0] == f"$ python kernel.py demo matvec {flags}"
    assert commands[-1] == f"$ python kernel.py demo matvec {flags} --html mv.html"
    with pytest.raises(KernelOptError, match="LOCAL:0:8"):  # clang has no local threads: refused
        page.page("matvec", "clang", opts)


def test_the_index_lists_every_kernel_with_its_header_line(capsys, monkeypatch):
    doc = parse(page.index())
    links = doc.one("ul").all("a")
    assert [a.attrs["href"] for a in links] == [f"{n}.html" for n in DEMOS]
    for a, name in zip(links, DEMOS):
        header = cli(capsys, monkeypatch, "demo", name)
        assert a.text().split("\n") == header[: len(a.text().split("\n"))] and a.text().startswith(f"{name} [")
    printed = cli(capsys, monkeypatch, "demo")
    assert lines(doc.one("pre", "legend")) == printed[1 : printed.index("")]  # under the first line, the legend


def test_a_map_the_page_cannot_read_as_a_grid_is_shown_as_its_text():
    """(--map's layout may change: a map whose grid isn't the one map_table knows is shown as the CLI printed it)"""
    for printed in ([], ["  x"], ["  out[row + column] for", "          0", "  each cell"], ["  out[0]", "  1  g0"]):
        assert page.map_table(printed) == page.pre(printed, "map")


def test_ansi_runs_undoes_colored(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    text = "a " + "".join(colored(f"<{c}>", c) for c in PALETTE) + " z"
    assert page.ansi_runs(text) == [(None, "a ")] + [(c, f"<{c}>") for c in PALETTE] + [(None, " z")]
    assert page.to_html([colored("<&>", "cyan")]) == '<span class="c-cyan">&lt;&amp;&gt;</span>'
    for bad in ("\x1b[30mblack\x1b[0m", "\x1b[1mbold\x1b[0m", "\x1b[41mred back\x1b[0m"):
        with pytest.raises(ValueError, match="ansi_runs: colour code"):
            page.ansi_runs(bad)


# ============================================================================================================
# the command line: the files it writes, and bad input
# ============================================================================================================


@pytest.mark.cli
def test_html_writes_a_kernels_page_and_every_kernels_with_an_index(tmp_path):
    p = run_script("kernel.py", "demo", "matvec", "--size", "256x128", "--html", str(tmp_path / "mv.html"))
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stderr
    assert (tmp_path / "mv.html").read_text() == page.page("matvec", sizes=(256, 128), file=str(tmp_path / "mv.html"))
    assert oct((tmp_path / "mv.html").stat().st_mode & 0o777) == "0o644"
    p = run_script("kernel.py", "demo", "--html", str(tmp_path / "site"))
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert sorted(os.listdir(tmp_path / "site")) == sorted([f"{n}.html" for n in DEMOS] + ["index.html"])
    for name in DEMOS:
        assert (tmp_path / "site" / f"{name}.html").read_text() == page.page(name, file=f"{name}.html")


@pytest.mark.cli
@pytest.mark.parametrize(
    "args, names",
    [
        (["demo", "nonesuch", "--html", "{tmp}/x.html"], ["nonesuch"]),
        (["demo", "matmul", "--opt", "UPCAST:9:4", "--html", "{tmp}/x.html"], ["UPCAST:9:4", "matmul"]),
        (["demo", "--opt", "UPCAST:0:4", "--html", "{tmp}/site"], ["UPCAST:0:4"]),
        (["demo", "matmul", "--html", "{tmp}/missing/x.html"], ["missing/x.html", "No such file or directory"]),
        (["demo", "matmul", "--html", "{tmp}/a-file/x.html"], ["a-file/x.html", "Not a directory"]),
        (["demo", "matmul", "--html", "{tmp}/a-folder"], ["a-folder", "Is a directory"]),
        (["demo", "--html", "{tmp}/a-file"], ["a-file", "File exists"]),
        (["demo", "matmul", "--map", "--html", "{tmp}/x.html"], ["--html", "--map"]),
    ],
    ids=["unknown kernel", "refused opt", "refused opt, every kernel", "no folder", "a file as folder",
         "a folder as FILE", "a file as DIR", "with --map"],  # fmt: skip
)
def test_bad_html_input_is_one_line_status_2_and_no_file(args, names, tmp_path):
    (tmp_path / "a-file").write_text("kept")
    (tmp_path / "a-folder").mkdir()
    p = run_script("kernel.py", *[x.format(tmp=tmp_path) for x in args])
    if any(x in args for x in ("nonesuch", "--map")):  # argparse's, as every bad command line: its usage, then one line
        error = p.stderr.strip().splitlines()[-1]
        assert p.returncode == 2 and error.startswith("python kernel.py demo: error: "), p.stderr
        assert all(n in error for n in names) and "Traceback" not in p.stderr, p.stderr
    else:
        one_line_error(p, 2, *names)
    assert sorted(os.listdir(tmp_path)) == ["a-file", "a-folder"] and os.listdir(tmp_path / "a-folder") == []
    assert (tmp_path / "a-file").read_text() == "kept"


def test_html_without_page_py_is_an_error_that_says_which_command_writes_pages(capsys, tmp_path):
    """demo.main alone has no page writer (page.py imports demo: the entry points hand it in)."""
    with pytest.raises(SystemExit) as e:
        demo.main(["demo", "matmul", "--html", str(tmp_path / "x.html")])
    assert e.value.code == 2 and "--html writes its pages through page.py" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_a_page_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A failure while writing (here: the rename) leaves neither the file nor the temporary one."""
    target = tmp_path / "p.html"
    target.write_text("old")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        demo.write_file(str(target), "new")
    assert os.listdir(tmp_path) == ["p.html"] and target.read_text() == "old"


# ============================================================================================================
# the README's screenshot, and reading a PNG
# ============================================================================================================


def test_the_readme_screenshot_shows_the_page_as_it_is_now():
    """docs/demo_matmul.png carries the SHA-256 of the page it shows: matmul's as page.py writes it now (after a
    change to a page, run `python tools/browser.py`, which needs chromium)."""
    with open(BROWSER["SHOT"], "rb") as f:
        png = f.read()
    assert BROWSER["text_of"](png, "page-sha256") == hashlib.sha256(BROWSER["readme_page"]().encode()).hexdigest(), (
        "docs/demo_matmul.png is stale: run python tools/browser.py"
    )
    assert BROWSER["pixels"](png).shape[:2] == BROWSER["SHOT_SIZE"][::-1]
    assert "](docs/demo_matmul.png)" in open(os.path.join(ROOT, "README.md")).read()


def encode(image: np.ndarray, filters: list[int]) -> bytes:
    """A PNG of `image` (height, width, 3), row y filtered with filters[y] (0-4, the PNG spec's)."""
    h, w, n = image.shape
    data, prev = b"", np.zeros((w * n,), np.int32)
    for y in range(h):
        x = image[y].reshape(-1).astype(np.int32)
        left = np.concatenate([np.zeros(n, np.int32), x[:-n]])
        corner = np.concatenate([np.zeros(n, np.int32), prev[:-n]])
        p = left + prev - corner
        pa, pb, pc = abs(p - left), abs(p - prev), abs(p - corner)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, corner))
        predictor = [0, left, prev, (left + prev) // 2, paeth][filters[y]]
        data += bytes([filters[y]]) + ((x - predictor) % 256).astype(np.uint8).tobytes()
        prev = x

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    head = chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + head + chunk(b"IDAT", zlib.compress(data)) + chunk(b"IEND", b"")


def test_the_png_reader_undoes_every_filter_and_keeps_a_text_chunk():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (40, 13, 3), dtype=np.uint8)
    png = encode(image, [y % 5 for y in range(40)])
    assert (BROWSER["pixels"](png) == image).all()
    marked = BROWSER["with_text"](png, "page-sha256", "abc")
    assert BROWSER["text_of"](marked, "page-sha256") == "abc" and (BROWSER["pixels"](marked) == image).all()
    assert BROWSER["text_of"](BROWSER["with_text"](marked, "page-sha256", "def"), "page-sha256") == "def"


# ============================================================================================================
# in a real browser
# ============================================================================================================

IN_BROWSER = list(DEMOS) if os.environ.get("BROWSER_ALL_PAGES") else ["matmul", "matvec", "conv2d"]


@pytest.fixture
def browser():
    if BROWSER["chromium"]() is None:
        pytest.skip("no chromium to load the pages in (Debian: apt-get install chromium; .ci/run installs it)")
    return BROWSER


@pytest.fixture
def written(tmp_path):
    def write(name: str, text: str | None = None) -> str:
        path = tmp_path / f"{name}.html"
        path.write_text(text if text is not None else built(name)[0], encoding="utf-8")
        return str(path)

    return write


@pytest.mark.browser
@pytest.mark.parametrize("name", IN_BROWSER)
def test_the_page_loads_from_a_file_url_as_written(name, browser, written):
    """chromium's DOM of the page, once loaded and its script run, has the file's text: it loaded whole and nothing
    rewrote it."""
    dom = browser["dump_dom"](written(name))
    assert parse_loose(dom).one(cls="kp").text() == built(name)[1].one(cls="kp").text()


@pytest.mark.browser
def test_the_index_loads_and_links_each_page(browser, written):
    dom = parse_loose(browser["dump_dom"](written("index", page.index())))
    assert [a.attrs["href"] for a in dom.one("ul").all("a")] == [f"{n}.html" for n in DEMOS]
    assert dom.one(cls="kp").text() == parse(page.index()).one(cls="kp").text()


def parse_loose(text: str) -> Element:
    """chromium's --dump-dom (which leaves out the doctype and may close tags its own way), as a tree."""
    p = Parser()
    p.handle_endtag = lambda tag: p.stack.pop() if len(p.stack) > 1 and p.stack[-1].tag == tag else None
    p.feed(text)
    return p.root


@pytest.mark.browser
@pytest.mark.parametrize("name", IN_BROWSER)
def test_a_screenshot_shows_the_colour_of_each_axis_colour_the_kernel_has(name, browser, written):
    """The top of the page (1400 x 1000) is not blank; each colour the kernel's axes take in its steps (its boxes in
    the navigation, at least) is on it in PALETTE's exact value, over an area of many pixels (the CSS applied); a
    colour it never takes is on no box: a few pixels at most, of text (--map writes the g of a cell in blue, say)."""
    image = browser["pixels"](browser["screenshot"](written(name)))[..., :3]
    assert image.shape == (1000, 1400, 3) and len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    has = {c for k in built(name)[2] for c in k.colors()}
    counts = {c: int((image == [int(v[i : i + 2], 16) for i in (1, 3, 5)]).all(-1).sum()) for c, v in PALETTE.items()}
    assert {c for c, n in counts.items() if n >= 40} == has, counts


PROBE = """<script>
var out = [].map.call(document.querySelectorAll(".kp .panel"), function (p) { return p.scrollWidth <= p.clientWidth; });
out.push(document.documentElement.scrollWidth <= window.innerWidth);
document.title = "fits:" + JSON.stringify(out);
</script></body>"""


def fits(browser, probe: str, width: int) -> list[bool]:
    """What the probe's script wrote into the title, in a window `width` px wide: each panel fits, the page fits."""
    title = parse_loose(browser["dump_dom"](probe, (width, 1000))).one("title").text()
    return json.loads(title.removeprefix("fits:"))


@pytest.mark.browser
@pytest.mark.parametrize("name", IN_BROWSER)
def test_no_panel_overflows_a_window_1400_px_wide(name, browser, written):
    """Measured through the DOM in a test-only copy of the page (a script writes, into the title, whether each panel's
    content fits its width and the page the window's)."""
    wide = fits(browser, written(name + "-probe", built(name)[0].replace("</body>", PROBE)), 1400)
    assert all(wide) and len(wide) > 3 * len(built(name)[2]), wide


@pytest.mark.browser
def test_the_overflow_probe_sees_panels_that_do_not_fit(browser, written):
    """At 600 px matmul's step table and C don't fit: the probe above can fail."""
    assert not all(fits(browser, written("matmul-probe", built("matmul")[0].replace("</body>", PROBE)), 600))


KEYS = """<script>
function press(key) { document.dispatchEvent(new KeyboardEvent("keydown", {key: key, cancelable: true})); }
function at() {
  var steps = [].slice.call(document.querySelectorAll(".kp .step")), top = -1;
  steps.forEach(function (s, i) { if (Math.abs(s.getBoundingClientRect().top - 90) < 2) top = i; });
  return top;
}
var seen = [at()];
["ArrowRight", "ArrowRight", "ArrowRight", "ArrowLeft", "ArrowUp"].forEach(function (k) { press(k); seen.push(at()); });
document.title = "steps:" + JSON.stringify(seen);
</script></body>"""


@pytest.mark.browser
def test_the_arrow_keys_step_through_the_page(browser, written):
    """The optional script: the right arrow brings the next step under the sticky header, the left one the previous;
    other keys do nothing (measured in a test-only copy whose script presses the keys)."""
    probe = written("matmul-keys", built("matmul")[0].replace("</body>", KEYS))
    title = parse_loose(browser["dump_dom"](probe)).one("title").text()
    assert json.loads(title.removeprefix("steps:")) == [-1, 0, 1, 2, 1, 1]
