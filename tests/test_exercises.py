"""The graded exercises hold their graders to account: each passes on kernel.py's own function
spliced in through the same machinery, fails on the stub ("not done", on at least its floor of cases) and on every
seeded wrong answer; `make`'s copy differs from main only in the targets' bodies, and every target exists; a
student's file that misbehaves gets one verdict line and leaves the project as it was. kernel.py's own function is
graded on the first 40 cases of each part of the founders' corpus files here (EXERCISES_ALL=1: every recorded case),
the stub until it has failed its floor of cases, each wrong answer until it fails."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys

import pytest

from exercises import EXERCISES, ROOT, STUDENT_FILES
from exercises.graders import grade, wrong_answers
from exercises.make import find_def, make, stub
from exercises.splice import Source, Splice, changes, load_module, project_state

pytestmark = pytest.mark.exercise
ALL = bool(os.environ.get("EXERCISES_ALL"))  # every recorded case, not the founders' files' first 40 of each part
QUICK = not ALL
IDS = [f"ex{ex.number:02d}" for ex in EXERCISES]


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> str:
    """A student's copy with every exercise stubbed."""
    folder = str(tmp_path_factory.mktemp("student"))
    make(folder)
    return folder


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_grader_passes_kernel_py_s_own_function(ex):
    before = project_state()
    v = grade(ex, Source(os.path.join(ROOT, ex.file), ex.qualname), quick=QUICK, limit=None if ALL else 40)
    assert (v.status, v.passed) == ("pass", v.total), v.line() + "\n" + "\n".join(v.detail())
    assert changes(before) == []


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_grader_says_not_done_on_the_stub_on_at_least_its_floor_of_cases(ex, copy):
    """(The count stops at the floor: EXERCISES_ALL=1 counts them all, as `list --coverage` prints.)"""
    v = grade(ex, Source(os.path.join(copy, ex.file), ex.qualname), True, True, max_failures=None if ALL else ex.floor)
    assert v.line() == f"exercise {ex.number} ({ex.qualname}): not done yet"
    assert {f.field for f in v.failures} == {"not done"}
    assert len(v.failures) >= ex.floor, f"the stub fails on {len(v.failures)} cases only (floor {ex.floor})"


WRONG = [(ex, w) for ex in EXERCISES for w in wrong_answers(ex)]


@pytest.mark.parametrize("ex, wrong", WRONG, ids=[f"ex{ex.number:02d}-{w.name}" for ex, w in WRONG])
def test_the_grader_fails_each_seeded_wrong_answer(ex, wrong):
    v = grade(ex, wrong, quick=True)
    assert v.status == "fail", v.line()
    assert v.line().startswith(f"exercise {ex.number} ({ex.qualname}): fail on ")


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_each_exercise_has_two_wrong_answers_with_the_target_s_parameters_and_a_docstring(ex):
    wrong = wrong_answers(ex)
    assert len(wrong) >= 2
    want = list(inspect.signature(Splice(ex.file, ex.qualname, wrong[0].load()[0]).original).parameters)
    for w in wrong:
        func, _ = w.load()
        assert list(inspect.signature(func).parameters) == want and func.__doc__, w.name


def test_make_s_copy_imports_and_differs_from_main_in_the_targets_bodies_only(copy):
    """Every target exists in main (a rename fails here), its body in the copy is exactly the stub after the
    docstring, and every other line of the student's files is main's."""
    for name in STUDENT_FILES:
        targets = [ex for ex in EXERCISES if ex.file == name]
        main_tree = ast.parse(open(os.path.join(ROOT, name), encoding="utf-8").read())
        copy_tree = ast.parse(open(os.path.join(copy, name), encoding="utf-8").read())
        for ex in targets:
            ref, got = find_def(main_tree, ex.qualname), find_def(copy_tree, ex.qualname)
            assert ref is not None, f"{ex.target} is not in main: rename it in exercises/__init__.py and HANDOUT.md"
            doc = ref.body[:1] if ast.get_docstring(ref) is not None else []
            assert ast.dump(ast.Module(got.body, [])) == ast.dump(ast.Module(doc + ast.parse(stub(ex)).body, []))
            ref.body = got.body  # then nothing else may differ
        assert ast.dump(main_tree) == ast.dump(copy_tree), name
        load_module(os.path.join(copy, name))


def test_make_only_stubs_the_exercises_it_is_given(tmp_path):
    make(str(tmp_path), [5, 12])
    stubs = {ex.number for ex in EXERCISES if stub(ex) in (tmp_path / ex.file).read_text(encoding="utf-8")}
    assert stubs == {5, 12}


def test_make_won_t_overwrite_a_student_s_work(copy):
    with pytest.raises(FileExistsError, match="make won't overwrite"):
        make(copy)


# ==== a student's code that misbehaves ========================================================================


def student_copy(folder, bodies: dict[int, str], header: str = "") -> str:
    """A copy whose exercise N's body is bodies[N] (the others stubs), with `header` after kernel.py's imports."""
    make(str(folder))
    for ex in EXERCISES:
        path = os.path.join(folder, ex.file)
        text = open(path, encoding="utf-8").read()
        if ex.number in bodies:
            line = next(x for x in text.splitlines() if x.strip() == stub(ex))
            indent = line[: len(line) - len(line.lstrip())]
            text = text.replace(line, "\n".join(indent + x for x in bodies[ex.number].splitlines()))
        if header and ex.file == "kernel.py":
            text = text.replace("\nimport sys\n", "\nimport sys\n" + header + "\n", 1)
        open(path, "w", encoding="utf-8").write(text)
    return str(folder)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exercises", *args], capture_output=True, text=True, timeout=300)


def test_misbehaving_student_code_gets_one_verdict_line_each_and_the_report_completes(tmp_path):
    broken = student_copy(tmp_path / "broken", {}, header="def oops(:")
    wild = student_copy(
        tmp_path / "wild",
        {
            5: "while True:\n    pass",
            6: 'print("hello from shift_to")\nraise ValueError("no split")',
            7: 'raise ZeroDivisionError("boom")',
            8: "import ctypes\nctypes.string_at(0)",
            9: 'globals()["round_up"] = lambda num, amt: num\nraise KernelOptError("no")',
        },
    )
    path = os.path.join(wild, "kernel.py")
    renamed = open(path, encoding="utf-8").read().replace("def _expr_view(", "def expr_view(")  # a name missing
    open(path, "w", encoding="utf-8").write(renamed)
    grades = tmp_path / "grades.json"
    # 20 s a grading, its Python's start included: at 5 s one timed out in CI, the suite's other worker beside it
    done = run("report", broken, wild, "--quick", "--timeout", "20", "--jobs", "2", "--json", str(grades))
    assert done.returncode == 0, done.stderr
    out = json.loads(grades.read_text())
    line = next(i + 1 for i, x in enumerate(open(os.path.join(broken, "kernel.py"))) if x.startswith("def oops("))
    for ex in EXERCISES:
        got = out["broken"][str(ex.number)]
        if ex.file == "kernel.py":
            assert got["line"] == f"{ex.name}: error: SyntaxError at kernel.py:{line}: invalid syntax"
        else:
            assert got["status"] == "not done"
    wild_lines = {n: out["wild"][str(n)]["line"] for n in (1, 5, 6, 7, 8, 9, 12)}
    assert wild_lines[1] == "exercise 1 (_expr_view): error: kernel.py has no function _expr_view"
    assert wild_lines[5] == "exercise 5 (Kernel.colors): timed out after 20 s"
    assert (
        wild_lines[6].startswith("exercise 6 (Kernel.shift_to): fail on ")
        and "raised ValueError: no split" in (wild_lines[6])
    )
    assert out["wild"]["6"]["printed"].startswith("hello from shift_to")
    assert "raised ZeroDivisionError: boom (kernel.py:" in wild_lines[7]
    assert wild_lines[8] == "exercise 8 (Kernel._opt_group): crashed (killed by SIGSEGV)"
    assert wild_lines[9] == "exercise 9 (Kernel._opt_padto): error: your code changed the project's kernel.round_up"
    assert wild_lines[12] == "exercise 12 (vector_axis): not done yet"
    table = done.stdout.splitlines()
    assert table[1].split()[:2] == ["broken", "error"] and table[2].split()[:1] == ["wild"]


def test_a_student_s_change_to_the_project_is_undone_and_named(tmp_path):
    ex = next(e for e in EXERCISES if e.number == 9)
    folder = student_copy(tmp_path, {9: 'TARGETS.clear()\nraise KernelOptError("no")'})
    before = project_state()
    v = grade(ex, Source(os.path.join(folder, "kernel.py"), ex.qualname), quick=True)
    assert v.status == "error" and "kernel.TARGETS" in v.message and changes(before) == []


def test_check_prints_one_verdict_line_and_exits_1_on_a_failure(tmp_path):
    folder = student_copy(tmp_path, {7: 'raise ZeroDivisionError("boom")'})
    done = run("check", "7", "12", "--student", folder, "--quick", "--jobs", "1")
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and lines[0].startswith("exercise 7 (Kernel._opt_upcast): fail on kernels.json #")
    assert "raised ZeroDivisionError: boom (kernel.py:" in lines[0]
    assert "exercise 12 (vector_axis): not done yet" in lines
    assert run("check", "5", "--student", ROOT, "--quick").stdout.startswith("exercise 5 (Kernel.colors): pass, ")


def test_demo_runs_the_student_s_function_or_says_not_done(copy):
    done = run("demo", "7", "matmul", "--student", copy)
    assert done.returncode == 1 and "exercise 7 (Kernel._opt_upcast): not done yet" in done.stderr
    assert "Traceback" not in done.stderr
    done = run("demo", "7", "matmul", "--student", ROOT)
    assert done.returncode == 0 and "UPCAST" in done.stdout, done.stderr


def test_the_demo_shows_a_heuristics_branch_s_opts_when_it_records_no_decision(tmp_path):
    """A branch without `self._weigh(...)`: its UPCASTs are still steps of the demo, under its name."""
    src = open(os.path.join(ROOT, "kernel.py"), encoding="utf-8").read()
    ref = find_def(ast.parse(src), "Kernel._upcast_broadcast_axes")
    body = [x for x in src.splitlines()[ref.body[1].lineno - 1 : ref.end_lineno] if "self._weigh(" not in x]
    folder = student_copy(tmp_path, {10: inspect.cleandoc("\n" + "\n".join(body))})
    done = run("demo", "10", "matmul", "--explain", "--student", folder)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("_upcast_broadcast_axes:"))
    assert "-> UPCAST:1:4 UPCAST:0:4" in lines[at:at + 4][-1] and lines[at + 4].startswith("  UPCAST:1:4 ")


def test_the_device_part_calls_a_kernel_that_crashes_the_device_a_failed_case(tmp_path, device):
    """A vector rule that is right but kills the process that runs kernels (as a misaligned float4 once did)."""
    src = open(os.path.join(ROOT, "render.py"), encoding="utf-8").read()
    ref = find_def(ast.parse(src), "vector_axis")
    body = "\n".join(src.splitlines()[ref.body[1].lineno - 1 : ref.end_lineno])
    crash = 'if sys.argv[1:2] == ["device"]:\n    import ctypes\n    ctypes.string_at(0)\n'
    folder = student_copy(tmp_path, {12: "import sys\n" + crash + inspect.cleandoc("\n" + body)})
    ex = next(e for e in EXERCISES if e.number == 12)
    v = grade(ex, Source(os.path.join(folder, "render.py"), ex.qualname), quick=True)
    assert v.status == "fail" and v.failures[0].field == "device", v.line()
    assert "crashed the device (killed by SIGSEGV)" in v.line()


@pytest.mark.parametrize(
    "number, wrong",
    [(1, "offset_dropped"), (3, "mask_dropped"), (7, "no_limit_of_8"), (10, "largest_first"),
     (11, "thirty_two_on_every_axis"), (14, "whole_axis_kept")],
)
def test_hidden_cases_alone_catch_a_wrong_answer_and_pass_the_reference(number, wrong):
    """The hidden cases (drawn from the seed at grading time) decide on their own: no recorded case is graded here."""
    ex = next(e for e in EXERCISES if e.number == number)
    reference = grade(ex, Source(os.path.join(ROOT, ex.file), ex.qualname), quick=True, hidden=1, limit=0)
    assert reference.status == "pass" and reference.hidden_passed == reference.hidden_total > 0, reference.line()
    v = grade(ex, next(w for w in wrong_answers(ex) if w.name == wrong), quick=True, hidden=1, limit=0)
    assert v.status == "fail" and v.failures[0].case.startswith("hidden "), v.line()
