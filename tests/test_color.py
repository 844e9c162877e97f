"""Colour where someone sees it: on a terminal, or when FORCE_COLOR asks for it; never when NO_COLOR is set to
something (https://no-color.org: an empty NO_COLOR is not set), nor into a file or a pipe.

A terminal here is a real pseudo-terminal (`pty`): the command runs in a fresh process whose output is the pty,
so its own `isatty()` decides, as it does for a reader at a terminal. The search's live progress line (rewritten in
place with '\\r') is for a terminal only too. Last, in this process: NO_COLOR's plain text, where each size
carries its colour's letter, and FORCE_COLOR's colours.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

import demo
from kernel import Kernel, Opt, OptOps
from demo import elementwise_ast
from tests.common import ROOT

# each test says which colour settings it runs under (the ones in a fresh process have _env's)
pytestmark = pytest.mark.usefixtures("no_colour_settings")

ANSI_CODES = (
    34,
    94,
    36,
    32,
    37,
    31,
    35,
    33,
)  # tinygrad's colours: blue, BLUE, cyan, green, white, red, magenta, yellow
COLOUR = "\x1b[3"  # the start of tinygrad's ANSI colours (blue is \x1b[34m, BLUE \x1b[94m: matvec has no BLUE)


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return {**env, **settings}


def run_on_a_terminal(args: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Run `python ARGS` with its stdin, stdout and stderr on a new pseudo-terminal; returns (exit code, output)."""
    main, terminal = pty.openpty()
    p = subprocess.Popen([sys.executable, *args], stdin=terminal, stdout=terminal, stderr=terminal, env=env, cwd=ROOT)
    os.close(terminal)  # the child holds it now: reading ends (EIO) once the child exits
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    return p.wait(timeout=timeout), b"".join(chunks).decode()


def run_in_a_pipe(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    return p.returncode, p.stdout


@pytest.mark.cli
@pytest.mark.parametrize(
    "settings, coloured",
    [
        ({}, True),
        ({"NO_COLOR": "1"}, False),
        ({"NO_COLOR": ""}, True),  # empty: not set
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins
    ],
    ids=["terminal", "NO_COLOR=1", "NO_COLOR=empty", "both"],
)
def test_the_demo_on_a_terminal_is_coloured_unless_no_color_is_set(settings, coloured):
    rc, out = run_on_a_terminal(["kernel.py", "demo", "matvec"], _env(**settings))
    assert rc == 0 and "matvec [opencl]" in out
    assert (COLOUR in out) == coloured


@pytest.mark.cli
@pytest.mark.parametrize(
    "settings, coloured",
    [
        ({}, False),
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": ""}, True),  # an empty NO_COLOR doesn't turn forced colour off
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ],
    ids=["pipe", "FORCE_COLOR", "FORCE_COLOR+NO_COLOR=empty", "FORCE_COLOR+NO_COLOR=1"],
)
def test_the_demo_into_a_pipe_is_coloured_only_when_forced(settings, coloured):
    rc, out = run_in_a_pipe(["kernel.py", "demo", "matvec"], _env(**settings))
    assert rc == 0 and "matvec [opencl]" in out
    assert (COLOUR in out) == coloured


@pytest.mark.parametrize("settings, coloured", [({}, True), ({"NO_COLOR": "1"}, False)], ids=["colour", "NO_COLOR"])
def test_runtime_show_on_a_terminal_is_coloured_unless_no_color_is_set(settings, coloured, device):
    rc, out = run_on_a_terminal(["runtime.py", "show", "matvec"], _env(**settings))
    assert rc == 0 and "__kernel void" in out
    assert (COLOUR in out) == coloured


def test_search_shows_its_progress_live_on_a_terminal(device, tmp_path):
    """On a terminal each round shows a progress line rewritten in place ('\r', then erase to the end of the line
    with '\x1b[K') and the best kernel's shape in colour. (Into a pipe only the finished lines go, plain:
    test_search.py's test_cli_search_prints_rounds_and_the_comparison.)"""
    # the search ends by itself within seconds; the timeout only caps it (a shorter one can end it, from a cold
    # compiler cache, before a single kernel compiled)
    args = ["-m", "search", "elementwise", "--beam", "1", "--no-cache", "--timeout", "60"]
    rc, out = run_on_a_terminal(args, _env(KERNELPY_CACHE=str(tmp_path)))
    assert rc == 0, out
    assert "\r  round 0: compiling 1/" in out and "\x1b[K" in out and "\r  round 0: timing 1/" in out
    assert "\x1b[34m" in out  # the best kernel's blue axis


# ============================================================================================================
# in this process: the Kernel's colours and `python kernel.py demo` as kernel.main prints it
# ============================================================================================================
def test_no_color_gives_a_plain_shape_and_legend(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    k = Kernel(*elementwise_ast(4096))
    k.apply_opt(Opt(OptOps.UPCAST, 0, 4))
    k.apply_opt(Opt(OptOps.LOCAL, 0, 32))
    assert k.colored_shape() == "  32   32    4"
    assert "\x1b" not in demo.legend()


def test_force_color_shows_every_demo_kernel_and_every_colour(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert demo.main(["demo"]) == 0
    out = capsys.readouterr().out
    for name in demo.DEMOS:
        assert f"{name} [" in out
    for code in ANSI_CODES:
        assert f"\x1b[{code}m" in out  # the legend shows every colour
    assert "GROUPTOP:0:256" in out and "TC:0:0" in out
    assert "matvec:" in out  # each heuristic opt says why it was chosen


def test_the_demo_under_no_color_prints_no_escape_code(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    demo.main(["demo"])
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "matmul [opencl]" in out


@pytest.mark.cli
def test_without_colour_each_size_carries_its_colours_letter():
    rc, out = run_in_a_pipe(["kernel.py", "demo", "matmul", "--opt", "UPCAST:0:4"], _env(NO_COLOR="1"))
    assert rc == 0 and "\x1b" not in out
    assert "128b 512b 512r   4y" in out  # each size with its colour's letter
    assert "(b blue: global, r red: loop, y yellow: UPCAST)" in out
