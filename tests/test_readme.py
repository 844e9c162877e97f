"""What the README and the docstrings show is what the code does now.

Every README block that shows a command's output (its first line `$ python ...`) is run and compared with what the
command prints (colour off, off a terminal: 100 columns). A line `...` marks lines left out: the pieces between
them must appear in order, each as consecutive lines, and a block that doesn't start (end) with `...` starts (ends)
where the output does. A block marked `<!-- recorded run: why -->` (a search, which times the device) is not
compared. Every OpenCL C listing must say it is annotated: its `//` comments are ours, not runtime.py's.
The docstrings' examples of an opt on a shape (`UPCAST:1:4 on (64 64 64) -> (64 16 64 4), blue blue red yellow`)
are applied to the kernel they name and checked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

import kernel
from kernel import Kernel, Opt, matmul_ast, sum_ast
from tests.common import ROOT

README = os.path.join(ROOT, "README.md")


def fenced_blocks() -> list[tuple[int, str, list[str], str]]:
    """(line number, language, lines, the paragraph before it) of each fenced block of the README."""
    lines = open(README, encoding="utf-8").read().split("\n")
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


def output_blocks() -> list[tuple[int, str, list[str], bool]]:
    """(line number, command, expected lines, recorded) of each block that shows a command's output."""
    return [
        (n, body[0][2:], body[1:], "<!-- recorded run:" in before)
        for n, _, body, before in fenced_blocks()
        if body and body[0].startswith("$ python ")
    ]


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
    commands = {command for _, command, _, _ in OUTPUT_BLOCKS}
    for want in ("kernel.py demo matvec", "kernel.py demo matvec --explain", "kernel.py demo matvec --map"):
        assert f"python {want}" in commands


@pytest.mark.parametrize("line,command,expected,recorded", OUTPUT_BLOCKS, ids=[f"L{b[0]}" for b in OUTPUT_BLOCKS])
def test_readme_output_is_what_the_command_prints(line, command, expected, recorded):
    if recorded:
        assert "search.py" in command, f"README line {line}: only a search's output may be a recorded run"
        return
    missing = matches(expected, run(command))
    assert missing is None, f"README line {line}, `{command}` no longer prints:\n{missing}"


def test_matches_reads_elisions():
    assert matches(["a", "...", "c"], ["a", "b", "c"]) is None
    assert matches(["...", "b"], ["a", "b"]) is None
    assert matches(["a", "..."], ["a", "b"]) is None
    assert matches(["b"], ["a", "b"]) == "b"  # no leading ...: the block starts where the output does
    assert matches(["a"], ["a", "b"]) == "a"  # no trailing ...: it ends where the output does
    assert matches(["c", "...", "a"], ["a", "b", "c"]) is not None  # in order


def test_c_listings_say_they_are_annotated():
    for line, lang, _, before in fenced_blocks():
        if lang == "c":
            assert "annotated" in before, f"README line {line}: say the C listing is an annotated excerpt"


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
    assert "stride" in kernel.Kernel._opt_grouptop.__doc__
