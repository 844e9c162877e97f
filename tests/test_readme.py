"""What the README, the other documents and the docstrings show is what the code does now.

Every block of README.md and the other documents (DOCUMENTS) that shows a command's output (its first line
`$ python ...`) is run and compared with what the command prints (colour off, off a terminal: 100 columns). A line
`...` marks lines left out: the pieces between them must appear in order, each as consecutive lines, and a block
that doesn't start (end) with `...` starts (ends) where the output does; a ` // ` comment at the end of a line is
ours (an annotation), not the command's, and the paragraph before such a block says it is annotated. A block marked
`<!-- recorded run: why -->` (a search, which times the device) is not compared. A Python block that needs no device
is run, and a last line `print(...)  # text` prints that text. The README's picture is the demo's coloured output
drawn now. The docstrings' examples of an opt on a shape (`UPCAST:1:4 on (64 64 64) -> (64 16 64 4), blue blue red
yellow`) are applied to the kernel they name and checked.
"""

from __future__ import annotations

import itertools
import os
import re
import runpy
import shlex
import subprocess
import sys

import pytest

import kernel
import demo
from kernel import Kernel, Opt
from demo import matmul_ast, sum_ast
from tests.common import ROOT

README = os.path.join(ROOT, "README.md")
DOCUMENTS = ["README.md", "DIFFERENCES.md", "BENCHMARKS.md", "docs/search.md", "docs/numerics.md", "testdata/README.md"]


def fenced_blocks(document: str = "README.md") -> list[tuple[int, str, list[str], str]]:
    """(line number, language, lines, the paragraph before it) of each fenced block of a document."""
    lines = open(os.path.join(ROOT, document), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            before = []
            for x in reversed(lines[:i]):
                if not x.strip() and before:
                    break
                before.insert(0, x)
            blocks.append((i + 1, lines[i][3:].strip(), lines[i + 1 : end], "\n".join(before)))
            i = end
        i += 1
    return blocks


ANNOTATION = re.compile(r"\s+// .*$")


def output_blocks() -> list[tuple[str, str, list[str], bool]]:
    """(document:line, command, expected lines, recorded) of each block that shows a command's output; a line's
    annotation (` // ...` at its end) is not part of what is expected, and a block with one must say it is annotated."""
    blocks = []
    for doc in DOCUMENTS:
        for n, _, body, before in fenced_blocks(doc):
            if body and body[0].startswith("$ python "):
                annotated = any(ANNOTATION.search(x) for x in body[1:])
                assert not annotated or "annotated" in before, f"{doc}:{n}: say the block is annotated"
                expected = [ANNOTATION.sub("", x) for x in body[1:]]
                blocks.append((f"{doc}:{n}", body[0][2:], expected, "<!-- recorded run:" in before))
    return blocks


def run(command: str) -> list[str]:
    """What `python ...` prints here, with colour off and off a terminal."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS")}
    env["NO_COLOR"] = "1"
    argv = [sys.executable] + shlex.split(command)[1:]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout.rstrip("\n").split("\n")


def matches(expected: list[str], actual: list[str]) -> str | None:
    """None if `expected` (with `...` elisions) is what `actual` shows, else the first piece that isn't there."""
    pieces: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            pieces.append([])
        else:
            pieces[-1].append(line.rstrip())
    actual = [x.rstrip() for x in actual]
    at = 0
    for n, piece in enumerate(pieces):
        if not piece:
            continue
        first, last = n == 0, n == len(pieces) - 1
        starts = [at] if first else range(at, len(actual) - len(piece) + 1)
        found = next((s for s in starts if actual[s : s + len(piece)] == piece), None)
        if found is None or (last and found + len(piece) != len(actual)):
            return "\n".join(piece)
        at = found + len(piece)
    return None


OUTPUT_BLOCKS = output_blocks()


def test_the_readme_shows_command_outputs():
    """The test below has something to check: the guided walk's views and the step tables."""
    commands = {command for where, command, _, _ in OUTPUT_BLOCKS if where.startswith("README.md:")}
    for want in ("kernel.py demo matvec", "kernel.py demo matvec --explain", "kernel.py demo matvec --map"):
        assert f"python {want}" in commands


def test_the_readme_opens_with_the_picture_and_a_demo_output():
    """The picture on the first screen (a dozen lines), the first demo output within the first 40 lines."""
    lines = open(README, encoding="utf-8").read().split("\n")
    assert any("](docs/demo_matmul.svg)" in x for x in lines[:12])
    assert min(int(where.split(":")[1]) for where, *_ in OUTPUT_BLOCKS if where.startswith("README.md:")) <= 40


@pytest.mark.parametrize("where,command,expected,recorded", OUTPUT_BLOCKS, ids=[b[0] for b in OUTPUT_BLOCKS])
def test_readme_output_is_what_the_command_prints(where, command, expected, recorded):
    if recorded:
        assert "-m search" in command, f"{where}: only a search's output may be a recorded run"
        return
    missing = matches(expected, run(command))
    assert missing is None, f"{where}, `{command}` no longer prints:\n{missing}"


def test_matches_reads_elisions():
    assert matches(["a", "...", "c"], ["a", "b", "c"]) is None
    assert matches(["...", "b"], ["a", "b"]) is None
    assert matches(["a", "..."], ["a", "b"]) is None
    assert matches(["b"], ["a", "b"]) == "b"  # no leading ...: the block starts where the output does
    assert matches(["a"], ["a", "b"]) == "a"  # no trailing ...: it ends where the output does
    assert matches(["c", "...", "a"], ["a", "b", "c"]) is not None  # in order


def test_annotations_are_taken_off_and_the_rest_compared():
    """The README's --loops block is annotated: its comments go, and its C lines are what the command prints."""
    where = next(w for w, command, *_ in OUTPUT_BLOCKS if command == "python kernel.py demo matvec --loops")
    n = int(where.split(":")[1])
    body = next(body for line, _, body, _ in fenced_blocks() if line == n)
    assert any(ANNOTATION.search(x) for x in body) and "__local float temp[128];" in "\n".join(body)
    assert ANNOTATION.sub("", "    float4 acc0 = (float4)(0.0f);   // yellow: 4") == "    float4 acc0 = (float4)(0.0f);"
    assert ANNOTATION.sub("", "  ((b//8)+a)") == "  ((b//8)+a)"  # Python's floor division isn't a comment


def python_blocks() -> list[tuple[str, str]]:
    """(document:line, code) of each Python block but those marked `<!-- not run: why -->` (a benchmark)."""
    return [
        (f"{doc}:{n}", "\n".join(body))
        for doc in DOCUMENTS
        for n, lang, body, before in fenced_blocks(doc)
        if lang == "python" and "<!-- not run:" not in before
    ]


PYTHON_BLOCKS = python_blocks()


@pytest.mark.parametrize("where,code", PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_python_block_runs_and_prints_what_it_says(where, code, request):
    """A block that imports runtime needs the device (skipped, saying why, without one)."""
    if "import runtime" in code:
        request.getfixturevalue("device")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{where}: {done.stderr}"
    last = code.rstrip().split("\n")[-1]
    if last.startswith("print(") and "  # " in last:
        assert done.stdout.rstrip("\n").split("\n")[-1] == last.split("  # ", 1)[1], where


def test_the_readme_runs_a_python_block_of_each_kind():
    assert any("import runtime" in code for _, code in PYTHON_BLOCKS)
    assert any(code.startswith("from kernel import") and "print(" in code for _, code in PYTHON_BLOCKS)


# ============================================================================================================
# the README's picture
# ============================================================================================================


def test_the_picture_is_the_demo_drawn_now():
    """docs/demo_matmul.svg is what tools/demo_svg.py draws from `FORCE_COLOR=1 python kernel.py demo matmul` now
    (after a change to the demo, run `python tools/demo_svg.py`)."""
    tool = runpy.run_path(os.path.join(ROOT, "tools", "demo_svg.py"))
    with open(tool["PICTURE"], encoding="utf-8") as f:
        assert f.read() == tool["demo_svg"](), "docs/demo_matmul.svg is stale: run python tools/demo_svg.py"


def test_the_picture_draws_each_colour_in_its_own_fill(monkeypatch):
    """Each of tinygrad's eight colours (colored()'s ANSI codes) gets its own fill; text is escaped; the picture has
    its own dark background; a colour without a fill is refused."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    tool = runpy.run_path(os.path.join(ROOT, "tools", "demo_svg.py"))
    text = " ".join(kernel.colored(f"<{c}&>", c) for c in demo.COLOR_LEGEND) + "\nplain"
    black = kernel.colored("x", "black")
    svg = tool["ansi_to_svg"](text)
    fills = re.findall(r'<tspan fill="(#[0-9a-f]{6})">&lt;(\w+)&amp;&gt;</tspan>', svg)
    assert [c for _, c in fills] == list(demo.COLOR_LEGEND) and len({f for f, _ in fills}) == len(fills) == 8
    assert dict((c, f) for f, c in fills) == demo.PALETTE  # the pages' (page.py) too
    assert "<text" in svg.split("\n")[-3] and ">plain</text>" in svg and 'fill="#161b22"' in svg
    with pytest.raises(ValueError, match="colour code 30 is none of PALETTE's colours"):
        tool["ansi_to_svg"](black)


# ============================================================================================================
# the docstrings' examples
# ============================================================================================================

BASES = {
    "(64 64 64)": lambda: matmul_ast(64, 64, 64),
    "(64 64)": lambda: sum_ast((64, 64), (1,)),
    "(60 60 60)": lambda: matmul_ast(60, 60, 60),
}
COLOURS = r"(?:(?:blue|BLUE|cyan|green|white|red|magenta|yellow)\b ?)+"
EXAMPLE = re.compile(
    r"(\b[A-Z]+(?::\d+:\d+)?) on (?:a [\dx]+ matmul )?(\([\d ]+\)) ->\s+\(([\d ]+)\)(?: too)?"
    rf"(?:, ({COLOURS}))?"
)


def docstring_examples() -> list[tuple[str, str, str, str, str]]:
    """(method, opt, start shape, shape after, colours after) of every example in the Kernel's docstrings."""
    found = []
    for name in dir(Kernel):
        doc = getattr(getattr(Kernel, name), "__doc__", None) or ""
        for m in EXAMPLE.finditer(" ".join(doc.split())):
            found.append((name, m.group(1), m.group(2), m.group(3), (m.group(4) or "").strip()))
    return found


def test_docstrings_have_examples_of_every_opt_that_reshapes():
    ops = {Opt.parse(opt).op for _, opt, *_ in docstring_examples()}
    assert {o.name for o in ops} >= {"LOCAL", "GROUP", "GROUPTOP", "UNROLL", "UPCAST", "NOLOCALS", "PADTO"}


@pytest.mark.parametrize("method,opt,start,after,colors", docstring_examples())
def test_docstring_example_is_what_the_opt_does(method, opt, start, after, colors):
    k = Kernel(*BASES[start]())
    assert "(" + " ".join(str(s) for s in k.full_shape) + ")" == start, method
    k.apply_opt(Opt.parse(opt))
    assert " ".join(str(s) for s in k.full_shape) == after, method
    if colors:
        assert colors.split() == k.colors(), method


def test_group_and_grouptop_docstrings_give_the_threads_strides():
    """GROUP's threads are 1 apart in the reduce (interleaved), GROUPTOP's 4 apart (runs 4t..4t+3)."""
    for opt, stride in (("GROUP:0:16", 1), ("GROUPTOP:0:16", 4)):
        k = Kernel(*sum_ast((64, 64), (1,)))
        k.apply_opt(Opt.parse(opt))
        assert k.sts[1].real_strides()[1] == stride
    assert "its threads' stride is 4" in kernel.Kernel._opt_group.__doc__


# ============================================================================================================
# the README's statements of fact, each against what it states (docs/search.md's too)
# ============================================================================================================

TEXT = " ".join(open(README, encoding="utf-8").read().split())
SEARCH_TEXT = " ".join(open(os.path.join(ROOT, "docs", "search.md"), encoding="utf-8").read().split())


def test_the_colour_table_is_the_legend():
    """The README's colour table is COLOR_LEGEND, row for row (its `code` marks aside)."""
    rows = re.findall(r"^\| (\w+)(?: \(bright\))? \| (.+?) \| (.+?) \|$", open(README).read(), re.M)
    table = {c: f"{axes}: {becomes}".replace("`", "") for c, axes, becomes in rows if c in demo.COLOR_LEGEND}
    assert table == demo.COLOR_LEGEND


def test_the_action_counts_are_those_of_the_search():
    """tinygrad's 141 actions by kind are the search's actions but ours; search.ACTIONS leaves out the 9 TC ones."""
    search = pytest.importorskip("search.beam")
    ours = [Opt.parse(f"UPCAST:{a}:8") for a in range(6)] + [Opt.parse(f"LOCAL:{a}:32") for a in range(1, 5)]
    tinygrads = [o for o in search.search_actions() if o not in ours]
    counts = {op.name: sum(o.op is op for o in tinygrads) for op in kernel.OptOps}
    others = [
        str(o) for o in tinygrads if o in (Opt.parse("LOCAL:0:32"), Opt.parse("UPCASTMID:1:4"), Opt.parse("TC:0:0"))
    ]
    said = f"{len(tinygrads)} in all: {counts['UPCAST']} UPCAST"
    said2 = f"{counts['UNROLL']} UNROLL, {counts['LOCAL'] - 1} LOCAL, {counts['GROUPTOP']} GROUPTOP,"
    said2 += f" {counts['GROUP']} GROUP,"
    said3 = f"{counts['PADTO']} PADTO, {len(others)} others ({', '.join(others)}) and {counts['TC'] - 1} TC"
    assert said in SEARCH_TEXT and said2 in SEARCH_TEXT and said3 in SEARCH_TEXT
    assert len(tinygrads) == 141 and len(search.ACTIONS) - len(ours) == len(tinygrads) - 9 and counts["TC"] == 1 + 9
    assert "ten of ours" in TEXT and "ten of ours" in SEARCH_TEXT and len(ours) == 10 and "about 200" not in TEXT
    steps = sorted(len(a) for a in search.MACROS)  # "18 of several steps": 12 of two, 6 of three (docs/search.md)
    assert "18 of several steps" in TEXT and "eighteen actions of several steps" in SEARCH_TEXT
    assert len(steps) == 18 and steps.count(2) == 12 and steps.count(3) == 6


def test_upcast_by_8_is_said_to_be_8_scalar_loads_as_the_c_has_them():
    R = pytest.importorskip("runtime")
    k = Kernel(*demo.elementwise_ast(4096))
    k.apply_opt(Opt.parse("UPCAST:0:8"))
    src = R.render(k).src
    assert len(re.findall(r"data1\[", src)) == 8 and "float4" not in src and "float2" not in src
    assert "UPCAST by 8 on any axis (8 outputs a thread: 8 scalar loads along a contiguous axis" in SEARCH_TEXT


def test_variance_is_one_kernel_with_a_loop_over_x_per_reduce():
    R = pytest.importorskip("runtime")
    src = R.render(Kernel(*demo.DEMOS["variance"].build())).src
    assert src.count("for (int ridx") == 2 and src.count("__kernel") == 1
    assert "in one kernel: `SUM(x)` and `SUM(x*x)`, each its own loop over the row (two passes over x)" in TEXT
    assert "in one pass" not in TEXT


def test_the_shared_memory_check_counts_every_reduce_as_the_readme_says():
    """_check_shared_memory counts both reduces of variance (tinygrad: the first only)."""
    one, two = Kernel(*sum_ast((64, 1024), (1,))), Kernel(*demo.DEMOS["variance"].build())
    needs = []
    for k in (one, two):
        k.opts = kernel.Target("TEST", shared_max=0)
        with pytest.raises(kernel.KernelOptError, match="needs") as e:
            k.apply_opt(Opt.parse("GROUP:0:16"))
        needs.append(int(re.search(r"needs (\d+)", str(e.value)).group(1)))
    assert needs[1] == 2 * needs[0]
    assert "(the matvec pattern); the shared-memory check counts every reduce's local buffer" in TEXT


def _appendix_called_from_part_1() -> tuple[set[str], str]:
    """The appendix's functions that Part 1 calls, and the appendix's banner comment."""
    import ast as pyast

    src = open(os.path.join(ROOT, "kernel.py")).read()
    lines = src.split("\n")
    banner = next(i for i, x in enumerate(lines) if x.startswith("# Appendix")) + 1
    comment = " ".join(x.lstrip("# ") for x in itertools.takewhile(lambda x: x.startswith("#"), lines[banner - 1 :]))
    tree = pyast.parse(src)
    appendix = {n.name for n in tree.body if n.lineno > banner and isinstance(n, (pyast.FunctionDef, pyast.ClassDef))}
    called = {
        n.func.id
        for n in pyast.walk(tree)
        if isinstance(n, pyast.Call) and n.lineno < banner and isinstance(n.func, pyast.Name) and n.func.id in appendix
    }
    return called, comment


def test_part_1_calls_the_appendix_only_at_the_gates_its_banner_names():
    """The appendix holds the checks at the gates; Part 1 calls nothing else of it, and the banner names each."""
    called, comment = _appendix_called_from_part_1()
    assert called and all(name.startswith(("check_", "verify_")) or name in comment for name in called), called
    for gate in ("Kernel()", "View.create", "apply_opt", "apply_tensor_cores", "LazyOp", "MemBuffer", "ConstBuffer"):
        assert gate in comment, gate


def test_the_symbolic_banners_example_holds():
    """(a*8 + b) // 8 becomes a + b//8 for any b >= 0, just a when b < 8."""
    a = kernel.Variable("a", 0, 10)
    assert ((a * 8 + kernel.Variable("b", 0, 7)) // 8).render() == "a"
    assert ((a * 8 + kernel.Variable("b", 0, 20)) // 8).render() == "((b//8)+a)"
    banner = " ".join(open(os.path.join(ROOT, "kernel.py")).read().split())
    assert "`(a*8 + b) // 8` becomes `a + b//8` (just `a` when b < 8)" in banner


def test_the_count_of_demo_kernels_is_the_demos():
    words = {12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen"}
    assert f"reshapes {words[len(demo.DEMOS)]} classic kernels" in TEXT


def test_nothing_in_the_repository_points_where_a_clone_cant_follow():
    """No file names a place outside the repository (a sibling folder, /tmp), a design file or tool it doesn't hold,
    or a tracker's issue numbers: a reader of a clone has none of them."""
    pointers = re.compile(
        "|".join([r"\.\./shared", "/tmp" + "/", "SPEC" + r"\.md", "check_" + "golden", r"[Ii]ssue \d", r"\bitem \d"])
    )
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "build"}
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        for name in files:
            if name.endswith((".gz", ".svg", ".pyc")):
                continue
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if pointers.search(line):
                        found.append(f"{os.path.relpath(os.path.join(folder, name), ROOT)}:{n}: {line.strip()[:80]}")
    assert found == []


def test_no_file_names_an_old_home_of_what_moved():
    """The C is render.py's (it was runtime.py's), COLOR_LEGEND and the AST builders are demo.py's (they were
    kernel.py's), the corpus reader is corpus.py (it was tests/corpus.py), the search is the package search/ (it was
    search.py, model.py and search_cli.py; `python -m search`): no module, tool, test or document says otherwise."""
    old = re.compile(r"runtime\.py(?:'s (?:OpenCL )?C\b| renders| writes (?:an image|C))|kernel\.py's (?:COLOR_LEGEND|"
                     r"builders)|tests/corpus\.py|(?<![\w/])(?:search|model|search_cli)\.py|"
                     r"\bimport (?:model|search_cli)\b")
    files = [f for f in os.listdir(ROOT) if f.endswith((".py", ".md"))] + [
        os.path.join(d, f) for d in ("tools", "tests", "docs", "testdata", "search")
        for f in os.listdir(os.path.join(ROOT, d)) if f.endswith((".py", ".md"))]  # fmt: skip
    found = []
    for name in [f for f in files if f != os.path.join("tests", "test_readme.py")]:  # (this test names them)
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            found += [f"{name}:{n}: {line.strip()[:80]}" for n, line in enumerate(f, 1) if old.search(line)]
    assert found == []


def test_the_sizes_the_readme_states_are_the_files():
    """"Part 1 ... is about 2,200 lines": each size the README states is within 10% of the file's (Part 1: to the
    appendix banner)."""
    lines = {f: open(os.path.join(ROOT, f)).read().split("\n") for f in ("kernel.py", "runtime.py", "render.py")}
    part_1 = next(i for i, x in enumerate(lines["kernel.py"]) if x.startswith("# Appendix"))
    stated = {
        r"Its Part 1, the optimizer, is about ([\d,]+) lines": part_1,
        r"make it about ([\d,]+) in all": len(lines["kernel.py"]),
        r"`runtime.py` \(about ([\d,]+) lines": len(lines["runtime.py"]),
        r"with `render.py`'s ([\d,]+) of OpenCL C": len(lines["render.py"]),
    }
    for pattern, actual in stated.items():
        said = int(re.search(pattern, TEXT).group(1).replace(",", ""))
        assert abs(said - actual) <= actual / 10, (pattern, said, actual)


def test_the_appendix_sections_come_in_the_order_the_readme_gives():
    """Reading kernel.py gives the appendix's sections in order, each by a function it defines."""
    paragraph = TEXT[TEXT.index("The **appendix** holds") :].split("Part 1 calls")[0]
    src = open(os.path.join(ROOT, "kernel.py")).read().split("\n")
    banner = next(i for i, x in enumerate(src) if x.startswith("# Appendix"))
    defined = {m.group(1): i for i, x in enumerate(src) if i > banner and (m := re.match(r"def (\w+)", x))}
    named = [name for name in re.findall(r"`(\w+)`", paragraph) if name in defined]
    assert len(named) >= 4 and [defined[n] for n in named] == sorted(defined[n] for n in named), named


def test_every_speed_figure_outside_benchmarks_md_is_one_it_holds():
    """A figure quoted as "1.25x slower", "18% faster" or "484 GFLOP/s" in a module's docstrings or comments or in a
    document is one BENCHMARKS.md holds, or the recorded output the document shows (a docstring once quoted times of a
    device no benchmark had measured); a factor in words ("thirteen times faster") none can hold."""
    words = "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|twenty"
    figure = re.compile(rf"(\d+(?:\.\d+)?|{words})(x|%| times) (?:slower|faster)"
                        r"|(\d+(?:\.\d+)?)(?: to [\d.]+)?( )(?:GFLOP/s|GB/s)")
    with open(os.path.join(ROOT, "BENCHMARKS.md"), encoding="utf-8") as f:
        held = f.read()
    files = [f for f in os.listdir(ROOT) if f.endswith(".py")] + [os.path.join("tools", f) for f in
             os.listdir(os.path.join(ROOT, "tools")) if f.endswith(".py")] + DOCUMENTS  # fmt: skip
    found = []
    for name in files:
        if name == "BENCHMARKS.md":
            continue
        shown = "\n".join("\n".join(body) for *_, body, _ in fenced_blocks(name)) if name.endswith(".md") else ""
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in figure.finditer(line):
                    if (m.group(1) or m.group(3)) in words.split("|"):
                        found.append(f"{name}:{n}: {m.group(0)}")
                        raise AssertionError(f"{found[-1]}: a figure in words BENCHMARKS.md can't hold")
                    number = (m.group(1) or m.group(3)) + ("%" if m.group(2) == "%" else "")
                    found.append(f"{name}:{n}: {m.group(0)}")
                    source = rf"(?<![\d.]){re.escape(number)}(?!\d)"
                    assert re.search(source, held) or re.search(source, shown), found[-1]
    assert found  # there is something to check


def _readme_text() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return " ".join(f.read().split())


def test_the_gate_call_the_readme_quotes_is_the_one_kernel_makes():
    """Part 1 calls `check_kernel(ast, opts)` (it once said `check_kernel(self)`)."""
    import inspect

    assert "self.opts = check_kernel(ast, opts)" in inspect.getsource(Kernel.__init__)
    assert "(`check_kernel(ast, opts)`)" in _readme_text() and "check_kernel(self)" not in _readme_text()


def test_numpys_rule_is_not_said_to_cover_fused_multiply_adds():
    """numpy never fuses; only a sum of products is left to the compiler to contract, as the README now says."""
    runtime = pytest.importorskip("runtime")
    readme = _readme_text()
    assert "fused multiply-adds), the device and the reference follow one rule" not in readme
    assert "but in a sum of products (a matmul's inner loop), which the compiler may contract" in readme
    assert "FP_CONTRACT ON" in runtime.render(kernel.optimize(Kernel(*matmul_ast(16, 16, 16)))).src
    assert "FP_CONTRACT ON" not in runtime.render(Kernel(*demo.elementwise_ast(16))).src


def test_the_readme_says_how_the_cut_shares_the_candidates_out():
    """The cut builds top_k children, each beam kernel's equal share of its own (it once said "the 16 most
    promising", as if of the whole round)."""
    search = pytest.importorskip("search.beam")
    readme = _readme_text()
    assert search.TOP_K == 16 and "pick the 16 most promising" not in readme
    assert "pick 16 of the children, each beam kernel's equal share of its own most promising" in readme


def test_the_models_bandwidth_is_a_triad_at_a_power_of_two(monkeypatch):
    """docs/search.md: the model's bandwidth is a triad's, moving the smallest power of two of bytes (64 KiB at least)
    that holds the kernel's footprint (it once said a read, a copy and a triad at the footprint itself)."""
    cost = pytest.importorskip("search.cost")
    asked = []
    monkeypatch.setattr(cost, "bandwidth", lambda nbytes, kinds: asked.append((nbytes, kinds)) or (1e9, kinds[0]))
    monkeypatch.setattr(cost, "fma_peak", lambda: (1e12, "float4 fma"))
    monkeypatch.setattr(cost, "calibration", lambda hz: {})
    device = type("D", (), {"max_compute_units": 2, "native_vector_width_float": 4})()
    monkeypatch.setattr(cost.runtime, "get_device", lambda: type("Dev", (), {"ctx": type("C", (), {
        "devices": [device]})()})())  # fmt: skip
    for nbytes in (100_000, 10, 1 << 20):
        cost.measured_device(nbytes)
    assert asked == [(131072, ("triad",)), (65536, ("triad",)), (1 << 20, ("triad",))]
    with open(os.path.join(ROOT, "docs", "search.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    said = "a triad moving the smallest power of two of bytes (64 KiB at least) that holds the kernel's footprint"
    assert said in text
    assert "a read, a copy and a triad at the kernel's own footprint" not in text
