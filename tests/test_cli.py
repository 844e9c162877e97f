"""The command lines: `python kernel.py demo` (the Kernel's opts, on a bare Python), `python runtime.py show /
verify` (the OpenCL C and the check against numpy), and a bad command line of any script: one line naming what to
fix. The search's own command line is in test_search.py; colour, in a pipe or on a terminal, in test_color.py.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest

import kernel
import demo
import runtime as R
from kernel import Opt, OptOps
from tests.common import ROOT, one_line_error, run_script

# each test says which colour settings it runs under
pytestmark = pytest.mark.usefixtures("no_colour_settings")


# ============================================================================================================
# python kernel.py demo
# ============================================================================================================


def test_demo_one_kernel_with_the_readers_opts(capsys):
    demo.main(["demo", "elementwise", "--opt", "UPCAST:0:4", "--opt", "LOCAL:0:32"])
    out = capsys.readouterr().out
    assert "matmul" not in out
    assert "UPCAST:0:4" in out and "LOCAL:0:32" in out


def test_demo_target_chooses_the_target_and_its_opts(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    demo.main(["demo", "matmul", "--target", "metal"])
    out = capsys.readouterr().out
    assert "matmul [metal]" in out and "TC:0:0" in out


def run_demo(*args: str, colour: bool = True) -> subprocess.CompletedProcess:
    """`python kernel.py ARGS` in a fresh process, its output a pipe: coloured only with FORCE_COLOR=1 (colour=True),
    plain with NO_COLOR=1."""
    return run_script("kernel.py", *args, env={"FORCE_COLOR" if colour else "NO_COLOR": "1"}, timeout=60)


@pytest.mark.cli
def test_demo_command_line_reports_a_rejected_opt_and_carries_on():
    r = run_demo("demo", "matmul", "--opt", "UPCAST:0:4", "--opt", "UPCAST:9:4", "--opt", "LOCAL:0:4")
    assert r.returncode == 0, r.stderr
    assert "rejected: invalid axis" in r.stdout
    lines = r.stdout.splitlines()
    assert any(line.lstrip().startswith("LOCAL:0:4") and "rejected" not in line for line in lines)
    assert "\x1b[33m" in r.stdout  # the UPCAST made a yellow axis


@pytest.mark.cli
def test_demo_help_explains_the_options():
    r = run_demo("--help")
    assert r.returncode == 0
    r = run_demo("demo", "--help")
    assert r.returncode == 0
    for word in ("--opt", "--target", "OP:AXIS:AMT"):
        assert word in r.stdout


@pytest.mark.cli
def test_the_help_says_how_each_opt_counts_its_axis_as_the_kernel_does():
    """AXIS counts in the shape the opt applies to; UNROLL's from the first reduce axis (green ones too),
    GROUP's from the first one not yet grouped (red): after GROUP:0:8 on matvec, UNROLL:0 is the green axis."""
    text = " ".join(run_demo("--help", colour=False).stdout.split())
    assert "AXIS counts in the shape the opt applies to" in text and "UNROLL and GROUP count axes from" not in text
    assert "UNROLL from the first reduce axis (the first green, white or red one)" in text
    assert "GROUP, GROUPTOP from the first reduce axis not yet grouped (the first red one)" in text
    k = kernel.Kernel(*demo.matvec_ast(1024, 768))
    k.apply_opt(kernel.Opt.parse("GROUP:0:8"))
    assert [k.colors()[kernel.Opt.parse(o).real_axis(k)] for o in ("UNROLL:0:4", "GROUP:0:4")] == ["green", "red"]


@pytest.mark.cli
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


@pytest.mark.cli
def test_demo_bad_opt_says_what_an_opt_looks_like():
    r = run_demo("demo", "matmul", "--opt", "FOO:1:2")
    assert r.returncode == 2
    assert "can't parse opt" in r.stderr  # the reason, not just argparse's "invalid parse value"


# ============================================================================================================
# python runtime.py show / verify
# ============================================================================================================


def test_show_prints_the_c_and_rejected_opts_and_verify_counts_the_kernels(capsys, device):
    assert R.main(["show", "sum_axis1", "--opt", "GROUPTOP:0:16", "--opt", "UPCAST:9:4"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"UPCAST:9:4 +rejected", out) and "__kernel void r_" in out
    assert "work-groups of [16, 1, 1] threads" in out
    assert R.main(["verify", "broadcast", "--seed", "1"]) == 0
    assert "1 kernel verified, 0 failed" in capsys.readouterr().out


@pytest.mark.cli
def test_the_c_renders_on_a_bare_python():
    """render.py needs nothing but the standard library (and kernel.py): the demo can show a kernel's C on a bare
    Python, without numpy or pyopencl; it is the C runtime.render writes."""
    code = f"import sys; sys.path.insert(0, {ROOT!r}); import kernel, demo, render"
    code += "; k = kernel.optimize(kernel.Kernel(*demo.matmul_ast(64, 64, 64)))"
    code += "; print(render.render(k).src); assert not {'numpy', 'pyopencl'} & set(sys.modules)"
    bare = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == R.render(kernel.optimize(kernel.Kernel(*demo.matmul_ast(64, 64, 64)))).src + "\n"


@pytest.mark.parametrize("command", ["show", "verify"])
def test_show_and_verify_help_is_runtimes_usage(command, capsys):
    with pytest.raises(SystemExit) as e:
        R.main([command, "--help"])
    assert e.value.code == 0 and "usage: python runtime.py" in capsys.readouterr().out


# ============================================================================================================
# a bad command line: one line naming the option or variable to fix; quiet broken pipes
# ============================================================================================================
@pytest.mark.cli
@pytest.mark.parametrize(
    "args, env, script, names",
    [
        (["--runs", "0"], {}, "bench.py", "--runs"),
        (["verify", "--seed", "-5"], {}, "runtime.py", "--seed"),
        (["demo"], {"TC": "abc"}, "kernel.py", "TC"),
        (["show", "matmul"], {"TC": "abc"}, "runtime.py", "TC"),
        (["demo", "matvec"], {"MV_THREADS_PER_ROW": "0"}, "kernel.py", "MV_THREADS_PER_ROW"),
        (["show", "matvec", "--opt", "UPCAST:0"], {}, "runtime.py", "OP:AXIS:AMT"),
        (["demo", "--opt", "NOLOCALS:1:2"], {}, "kernel.py", "OP:AXIS:AMT"),
        (["demo", "matmul"], {"TC": "3"}, "kernel.py", "TC must be an integer >= 0 and <= 2, got TC='3'"),
        (["show", "matmul"], {"TC": "-1"}, "runtime.py", "TC must be an integer >= 0 and <= 2, got TC='-1'"),
        (["demo", "matmul"], {"TC_OPT": "3"}, "kernel.py", "TC_OPT must be an integer >= 0 and <= 2"),
        (["show", "matvec"], {"MV_ROWS_PER_THREAD": "64"}, "runtime.py", "upcast more than 8 (asked 64) (environment "
         "knobs set: MV_ROWS_PER_THREAD=64)"),  # fmt: skip
        (["demo", "matvec", "--size", "4096x4096"], {"MV_THREADS_PER_ROW": "4096"}, "kernel.py", "an opt doesn't "
         "apply: exceeds maximum shared memory size"),  # fmt: skip
        (["demo"], {"MV": "\u00b2"}, "kernel.py", "MV must be an integer, got MV='\u00b2'"),
    ],
    ids=[
        "bench --runs 0",
        "verify --seed -5",
        "demo TC=abc",
        "show TC=abc",
        "MV_THREADS_PER_ROW=0",
        "UPCAST:0",
        "NOLOCALS:1:2",
        "TC=3 a traceback",
        "TC=-1 a traceback",
        "TC_OPT=3 a traceback",
        "MV_ROWS_PER_THREAD=64 a traceback",
        "MV_THREADS_PER_ROW=4096 a traceback",
        "a Unicode digit knob",
    ],
)
def test_a_bad_command_line_gets_one_line_naming_what_to_fix(args, env, script, names):
    p = run_script(script, *args, env=env)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]  # (argparse prints its usage first)
    assert "Traceback" not in p.stderr and re.match(r"(usage: )?python \w+\.py.*: error: ", last), p.stderr
    assert names in last


@pytest.mark.cli
def test_a_closed_pipe_ends_the_demo_quietly():
    p = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "kernel.py"), "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "FORCE_COLOR": "1"},
    )
    p.stdout.close()  # the reader is gone before the first line (as `| head -0`)
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert err == ""


@pytest.mark.cli
def test_a_bad_pyopencl_ctx_is_one_line_that_names_it():
    env = {"PYOPENCL_CTX": "97", "KERNELPY_DEVICE": ""}  # KERNELPY_DEVICE, where set, wins
    err = one_line_error(run_script("runtime.py", "verify", "sum", env=env), 1, "PYOPENCL_CTX")
    assert "pip install" not in err  # the devices may be fine: installing one is not the fix


@pytest.mark.cli
def test_no_opencl_platform_is_one_line():
    """A machine without OpenCL, simulated the same on every machine: runtime's discovery sees no platform (an empty
    OCL_ICD_VENDORS folder hid no driver where pyopencl's wheel brings PoCL's own)."""
    no_platform = "import pyopencl, runpy, sys; pyopencl.get_platforms = lambda: []; sys.argv[0] = {script!r}; "
    no_platform += "runpy.run_path(sys.argv[0], run_name='__main__')"
    env = {k: v for k, v in os.environ.items() if k not in ("PYOPENCL_CTX", "KERNELPY_DEVICE")}
    code = no_platform.format(script=os.path.join(ROOT, "runtime.py"))
    p = subprocess.run(
        [sys.executable, "-c", code, "verify", "sum"], capture_output=True, text=True, env=env, timeout=120
    )
    one_line_error(p, 1, "no OpenCL device", "none of them compiles a kernel")


@pytest.mark.cli
@pytest.mark.parametrize("knob", ["BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX"])
def test_a_bad_search_knob_is_one_line_and_help_still_works(knob, tmp_path):
    assert run_script("-m search", "--help", env={knob: "lots"}).returncode == 0
    p = run_script("-m search", "sum", env={knob: "lots", "KERNELPY_CACHE": str(tmp_path)})
    one_line_error(p, 2, knob)


@pytest.mark.cli
@pytest.mark.parametrize("what", ["not JSON", "a directory"])
def test_a_bad_tinygrad_file_is_one_line(what, tmp_path):
    path = tmp_path / "perf.json"
    if what == "a directory":
        path.mkdir()
    else:
        path.write_text("tinygrad: 1 ms\n")
    p = run_script("bench.py", "--runs", "1", "--tinygrad", str(path), "add 16M")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert re.match(r"python bench\.py: error: --tinygrad: .*perf\.json", p.stderr.strip().splitlines()[-1])


def test_a_closed_stdout_is_no_traceback(device):  # (`verify sum` runs the kernel)
    p = subprocess.run(
        f'"{sys.executable}" "{os.path.join(ROOT, "runtime.py")}" verify sum >&-',
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_rejected_opts_are_shown_after_the_header_with_room_for_long_labels(capsys, device):
    assert R.main(["show", "sum_axis1", "--opt", "UPCAST:7:4"]) == 0
    out = capsys.readouterr().out
    assert out.index("sum_axis1 [") < re.search(r"UPCAST:7:4 +rejected", out).start()
    demo.demo_kernel("matvec", opts=[Opt(OptOps.GROUPTOP, 100, 1000)])
    assert re.search(r"GROUPTOP:100:1000 +rejected", capsys.readouterr().out)


@pytest.mark.parametrize("view", ["steps", "explain"])
def test_demo_kernel_returns_its_rejected_opts_and_verify_logs_them(view, capsys, device):
    opts = [Opt(OptOps.GROUPTOP, 0, 16), Opt(OptOps.UPCAST, 7, 4)]
    k, rejected = demo.demo_kernel("sum", opts=opts, view=view)
    assert k.applied_opts == opts[:1] and [o for o, _ in rejected] == opts[1:] and "axis" in rejected[0][1]
    capsys.readouterr()
    assert R.main(["verify", "sum", "--opt", "GROUPTOP:0:16", "--opt", "UPCAST:7:4"]) == 0
    assert re.search(r"^  UPCAST:7:4 +rejected: .*axis.*\nok +sum ", capsys.readouterr().out, re.M)


@pytest.mark.cli
@pytest.mark.parametrize(
    "script, args, said",
    [
        ("tools/time_opts.py", [], "the following arguments are required: WORKLOAD, OPTS"),
        ("tools/time_opts.py", ["add 1M", ""], "argument WORKLOAD: invalid choice: 'add 1M'"),
        ("tools/time_opts.py", ["add 16M", "UPCAST:0"], "argument OPTS: can't parse opt 'UPCAST:0'"),
        ("tools/timing_modes.py", ["--sets", "0"], "argument --sets: must be an integer >= 1, got '0'"),
        ("tools/timing_modes.py", ["--passes", "-2"], "argument --passes: must be an integer >= 1, got '-2'"),
        ("tools/fusion_cost.py", ["--rounds", "0"], "argument --rounds: must be an integer >= 1, got '0'"),
        ("tools/tinygrad_parity.py", ["f.json", "--runs", "0"], "argument --runs: must be an integer >= 1, got '0'"),
        ("tools/replay_search.py", ["f.jsonl", "--top-k", "0"], "argument --top-k: must be an integer >= 1, got '0'"),
        ("tools/compare_searches.py", ["f.jsonl"], "give two or more logs to compare"),
    ],
    ids=["time_opts bare sys.argv: no arguments", "time_opts an unknown workload", "time_opts a bad opt",
         "timing_modes --sets 0", "timing_modes --passes -2", "fusion_cost --rounds 0", "tinygrad_parity --runs 0",
         "replay_search --top-k 0", "compare_searches one log"],  # fmt: skip
)
def test_a_tools_bad_argument_or_count_below_1_is_one_line_before_any_work(script, args, said):
    """tools/ command lines read sys.argv bare (a traceback) or took counts below 1 (an empty table, a division by
    zero): each is argparse's usage and one error line, exit status 2."""
    p = run_script(script, *args)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert re.match(rf"python {script}: error: .*{re.escape(said)}", p.stderr.strip().splitlines()[-1]), p.stderr


# ============================================================================================================
# tools that write files: every output checked before the work, and written whole (a temporary file, renamed)
# ============================================================================================================
_STUB_TINYGRAD = {  # enough of tinygrad for tools/tinygrad_times.py to start: measuring anything exits 3
    "__init__.py": "class Tensor:\n    empty = None\n\n\nclass _Device:\n    DEFAULT = 'GPU'\n\n"
    "    def __getitem__(self, name):\n        raise SystemExit(3)\n\n\nDevice = _Device()\n",
    "dtype.py": "ImageDType = None\n",
    "engine/__init__.py": "",
    "engine/realize.py": "CompiledRunner = get_linearizer = None\n",
    "helpers.py": "Context = None\n",
    "ops.py": "BufferOps = MemBuffer = None\n",
}


@pytest.mark.cli
@pytest.mark.parametrize(
    "args, said",
    [
        (["--hand-coded", "{d}/t.json", "--beam", "{d}/./t.json"],
         "({d}/./t.json): the second would overwrite the first"),
        (["--beam", "{d}/no such folder/t.json"], "--beam: can't write '{d}/no such folder/t.json': no folder"),
        (["--hand-coded", "{d}"], "argument --hand-coded: can't write '{d}': it is a folder"),
        (["--beam", "{d}/t.json", "--beam-amt", "0"], "argument --beam-amt: must be an integer >= 1, got '0'"),
        (["--hand-coded", "{d}/t.json", "--runs", "-1"], "argument --runs: must be an integer >= 1, got '-1'"),
    ],
    ids=["one file for both modes", "a file in a missing folder", "a folder", "--beam-amt 0", "--runs -1"],
)
def test_tinygrad_times_checks_its_outputs_before_measuring(args, said, tmp_path):
    """--hand-coded F --beam F kept one mode (both written to F); a FILE in a missing folder was found after minutes of
    measuring: each is one line (exit status 2) before anything is measured (a stub tinygrad's device: exit 3)."""
    for name, text in _STUB_TINYGRAD.items():
        (tmp_path / "tinygrad" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tinygrad" / name).write_text(text)
    args = [a.format(d=tmp_path) for a in args]
    p = run_script("tools/tinygrad_times.py", *args, env={"PYTHONPATH": str(tmp_path)})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert said.format(d=tmp_path) in p.stderr.strip().splitlines()[-1], p.stderr
    good = run_script("tools/tinygrad_times.py", "--beam", str(tmp_path / "t.json"), env={"PYTHONPATH": str(tmp_path)})
    assert good.returncode == 3, good.stderr  # (the stub's device: it goes on to measure)


@pytest.mark.cli
def test_demo_svg_leaves_the_picture_as_it_was_when_the_demo_fails(tmp_path):
    """tools/demo_svg.py opened the picture for writing before the demo ran: a demo that failed left it empty."""
    picture = tmp_path / "demo.svg"
    picture.write_text("the picture before")
    p = run_script("tools/demo_svg.py", str(picture), env={"TC": "abc"})  # the demo's own one-line error
    one_line_error(p, 1, "the demo failed (exit status 2: python kernel.py: error: environment variable TC", "as it")
    assert picture.read_text() == "the picture before" and os.listdir(tmp_path) == ["demo.svg"]
    p = run_script("tools/demo_svg.py", str(tmp_path / "none" / "x.svg"))  # (argparse's usage, then the error)
    assert p.returncode == 2 and "error: argument file: can't write" in p.stderr.splitlines()[-1], p.stderr
    assert run_script("tools/demo_svg.py", str(picture)).returncode == 0
    assert picture.read_text().startswith("<svg") and os.listdir(tmp_path) == ["demo.svg"]


def test_write_file_writes_whole_or_leaves_what_was_there(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("before")
    with pytest.raises(UnicodeEncodeError):
        demo.write_file(str(path), "half \ud800 written")  # (a lone surrogate: no UTF-8 for it, midway)
    assert path.read_text() == "before" and os.listdir(tmp_path) == ["out.json"]
    demo.write_file(str(path), "after")
    assert path.read_text() == "after" and os.listdir(tmp_path) == ["out.json"]


def test_build_demo_prints_nothing_and_verify_builds_with_it(capsys, monkeypatch, device):
    """build_demo is demo_kernel's kernel without the printing; `verify` gets its kernel there, not from the printer."""
    opts = [Opt(OptOps.GROUPTOP, 0, 16), Opt(OptOps.UPCAST, 7, 4)]
    k, rejected = demo.build_demo("sum", opts=opts)
    assert capsys.readouterr().out == "" and k.applied_opts == opts[:1] and [o for o, _ in rejected] == opts[1:]
    printed_k, printed_rejected = demo.demo_kernel("sum", opts=opts, out=io.StringIO())
    assert printed_k.applied_opts == k.applied_opts and printed_rejected == rejected
    monkeypatch.setattr(R, "demo_kernel", lambda *a, **kw: pytest.fail("verify called the printer"))
    assert R.main(["verify", "sum"]) == 0


@pytest.mark.cli
def test_pytest_on_test_kernel_py_lists_the_spec_in_one_process_in_the_files_order():
    """The README's `python -m pytest test_kernel.py -v`: tests named on the command line run in one process (not in
    pytest-xdist's workers, whose lines come as each finishes, each with its worker's name), in the file's order."""
    select = ["-k", "TestTargets or TestConstruction"]
    p = run_script("-m pytest", "test_kernel.py", "-v", "-p", "no:cacheprovider", *select)
    ran = [line for line in p.stdout.splitlines() if line.endswith("%]") and " PASSED " in line]
    source = open(os.path.join(ROOT, "test_kernel.py"), encoding="utf-8").read()
    order = re.findall(r"^    def (test_\w+)", source, re.M)
    names = [line.split(" PASSED ")[0].split("::")[-1] for line in ran]
    assert p.returncode == 0 and len(ran) > 4 and all(line.startswith("test_kernel.py::") for line in ran), p.stdout
    assert names == sorted(names, key=order.index)
