"""The command lines: `python kernel.py demo` (the Kernel's colours and opts, on a bare Python) and `python
runtime.py show / verify` (the OpenCL C and the check against numpy). The search's command line is in
test_search.py, colour on a terminal in test_color.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import kernel
import runtime as R
from tests.common import ROOT

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


@pytest.fixture(autouse=True)
def _no_colour_settings(monkeypatch):
    """Each test says which colour settings it runs under."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


# ============================================================================================================
# python kernel.py demo
# ============================================================================================================


def test_demo_shows_every_kernel_in_colour(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert kernel.main(["demo"]) == 0
    out = capsys.readouterr().out
    for name in kernel.DEMOS:
        assert f"{name} [" in out
    for code in ANSI_CODES:
        assert f"\x1b[{code}m" in out  # the legend shows every colour
    assert "GROUPTOP:0:256" in out and "TC:0:0" in out
    assert "matvec:" in out  # each heuristic opt says why it was chosen


def test_demo_without_colour(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    kernel.main(["demo"])
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "matmul [opencl]" in out


def test_demo_one_kernel_with_the_readers_opts(capsys):
    kernel.main(["demo", "elementwise", "--opt", "UPCAST:0:4", "--opt", "LOCAL:0:32"])
    out = capsys.readouterr().out
    assert "matmul" not in out
    assert "UPCAST:0:4" in out and "LOCAL:0:32" in out


def test_demo_target_option(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    kernel.main(["demo", "matmul", "--target", "metal"])
    out = capsys.readouterr().out
    assert "matmul [metal]" in out and "TC:0:0" in out


def run_demo(*args: str, colour: bool = True) -> subprocess.CompletedProcess:
    """`python kernel.py ARGS` in a fresh process, its output a pipe: coloured only with FORCE_COLOR=1 (colour=True),
    plain with NO_COLOR=1."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["FORCE_COLOR" if colour else "NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "kernel.py"), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_demo_command_line_reports_a_rejected_opt_and_carries_on():
    r = run_demo("demo", "matmul", "--opt", "UPCAST:0:4", "--opt", "UPCAST:9:4", "--opt", "LOCAL:0:4")
    assert r.returncode == 0, r.stderr
    assert "rejected: invalid axis" in r.stdout
    lines = r.stdout.splitlines()
    assert any(line.lstrip().startswith("LOCAL:0:4") and "rejected" not in line for line in lines)
    assert "\x1b[33m" in r.stdout  # the UPCAST made a yellow axis


def test_demo_command_line_without_colour():
    r = run_demo("demo", "matmul", "--opt", "UPCAST:0:4", colour=False)
    assert r.returncode == 0 and "\x1b" not in r.stdout
    assert "128b 512b 512r   4y" in r.stdout  # each size with its colour's letter
    assert "(b blue: global, r red: loop, y yellow: UPCAST)" in r.stdout


def test_demo_help_explains_the_options():
    r = run_demo("--help")
    assert r.returncode == 0
    r = run_demo("demo", "--help")
    assert r.returncode == 0
    for word in ("--opt", "--target", "OP:AXIS:AMT"):
        assert word in r.stdout


def test_the_help_says_how_each_opt_counts_its_axis_as_the_kernel_does():
    """AXIS counts in the shape the opt applies to; UNROLL's from the first reduce axis (green ones too),
    GROUP's from the first one not yet grouped (red): after GROUP:0:8 on matvec, UNROLL:0 is the green axis."""
    text = " ".join(run_demo("--help", colour=False).stdout.split())
    assert "AXIS counts in the shape the opt applies to" in text and "UNROLL and GROUP count axes from" not in text
    assert "UNROLL from the first reduce axis (the first green, white or red one)" in text
    assert "GROUP, GROUPTOP from the first reduce axis not yet grouped (the first red one)" in text
    k = kernel.Kernel(*kernel.matvec_ast(1024, 768))
    k.apply_opt(kernel.Opt.parse("GROUP:0:8"))
    assert [k.colors()[kernel.Opt.parse(o).real_axis(k)] for o in ("UNROLL:0:4", "GROUP:0:4")] == ["green", "red"]


def test_size_sets_a_demo_kernels_sizes_and_says_what_it_takes():
    """`--size 4096x4096` gives the README's 4096x4096 sum; a wrong count or a size the kernel can't take
    is an error that says what it takes, and --size needs one kernel."""
    r = run_demo("demo", "sum_axis0", "--size", "4096x4096", colour=False)
    assert r.returncode == 0 and "sum_i a[i, j], 4096x4096" in r.stdout
    assert [x.split()[0] for x in r.stdout.splitlines()[2:4]] == ["UNROLL:0:4", "LOCAL:0:32"]  # the README's words
    for args, want in [
        (("sum_axis0", "--size", "4096"), "sum_axis0 takes 2 sizes >= 1 (512x256 by default), not 4096"),
        (("sum_axis0", "--size", "40x0"), "want sizes >= 1 joined by x"),
        (("image", "--size", "100x64"), "a multiple of 16 floats, not 100"),
        (("--size", "8"), "--size goes with one kernel's name"),
    ]:
        r = run_demo("demo", *args, colour=False)
        assert r.returncode == 2 and want in r.stderr and not r.stdout, (args, r.stderr)


def test_demo_bad_opt_says_what_an_opt_looks_like():
    r = run_demo("demo", "matmul", "--opt", "FOO:1:2")
    assert r.returncode == 2
    assert "can't parse opt" in r.stderr  # the reason, not just argparse's "invalid parse value"


# ============================================================================================================
# python runtime.py show / verify
# ============================================================================================================


def test_cli_show_and_verify(capsys, device):
    assert R.main(["show", "sum_axis1", "--opt", "GROUPTOP:0:16", "--opt", "UPCAST:9:4"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"UPCAST:9:4 +rejected", out) and "__kernel void r_" in out
    assert "work-groups of [16, 1, 1] threads" in out
    assert R.main(["verify", "broadcast", "--seed", "1"]) == 0
    assert "1 kernel verified, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["show", "verify"])
def test_cli_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        R.main([command, "--help"])
    assert e.value.code == 0 and "usage: python runtime.py" in capsys.readouterr().out
