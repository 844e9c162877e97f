"""python -m exercises: list, make, check, demo, report (the README's "Exercises" and HANDOUT.md say what each does).

Each exercise of a student's copy is graded in a child process with a time limit (a student's file runs its own
code when it loads, and may loop, crash or print): `check` and `report` print one verdict line an exercise."""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import unittest.mock

from exercises import BY_NUMBER, EXERCISES, Exercise
from exercises.graders import Verdict, describe_exit, grade, run_child, wrong_answers
from exercises.make import make
from exercises.splice import Source, SourceError, Splice, where

PROG = "python -m exercises"


class UsageError(Exception):
    """A command line that can't run: one line on stderr, exit status 2."""


def exercise_number(text: str) -> Exercise:
    if text.isdigit() and int(text) in BY_NUMBER:
        return BY_NUMBER[int(text)]
    raise argparse.ArgumentTypeError(f"no exercise {text!r}: there are {', '.join(map(str, BY_NUMBER))}")


def student_source(folder: str, ex: Exercise) -> Source:
    path = os.path.join(folder, ex.file)
    if not os.path.isfile(path):
        raise UsageError(f"no {ex.file} in {folder}: `{PROG} make DIR` writes a copy to work in")
    return Source(os.path.abspath(path), ex.qualname)


def grade_in_child(ex: Exercise, source: Source, timeout: float, flags: list[str]) -> Verdict:
    """grade() in a child process: a verdict however the student's code ends (loops, crashes, exits)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "verdict.json")
        try:
            done = run_child(["grade", str(ex.number), source.path, source.name, result, *flags], timeout)
        except subprocess.TimeoutExpired:
            return Verdict(ex.number, ex.qualname, "timed out", message=f"after {timeout:g} s")
        if os.path.exists(result):
            with open(result) as f:
                return Verdict.from_json(json.load(f))
    status = "crashed" if done.returncode < 0 else "error"
    why = describe_exit(done.returncode, done.stderr)
    return Verdict(ex.number, ex.qualname, status, message=f"({why})" if status == "crashed" else why)


def list_command(coverage: bool) -> int:
    width = max(len(ex.target) for ex in EXERCISES) + 2
    print(f"{'N':>3}  {'function':<{width}}{'title':<38}{'stars':<7}minutes")
    for ex in EXERCISES:
        title = ex.title + (" (optional)" if ex.optional else "")
        print(f"{ex.number:>3}  {ex.target:<{width}}{title:<38}{'*' * ex.stars:<7}{ex.minutes:>7}")
    minutes = sum(ex.minutes for ex in EXERCISES)
    print(f"     {len(EXERCISES)} exercises, about {minutes // 60} h {minutes % 60:02d} min in all")
    if not coverage:
        return 0
    print("\ncoverage, on check --quick's cases (the founders' corpus files; 14: the search logs and kernels.json):")
    print("each grader's cases and how many its stub fails on (tests/test_exercises.py holds that above the floor);")
    print("the case each wrong answer fails on first")
    with tempfile.TemporaryDirectory() as tmp:
        make(tmp)
        for ex in EXERCISES:
            stubbed = grade(ex, Source(os.path.join(tmp, ex.file), ex.qualname), quick=True, all_failures=True)
            fails = len(stubbed.failures)
            print(f"{ex.number:>3}  {ex.target:<{width}}{stubbed.total:>4} cases, the stub fails on {fails} "
                  f"(floor {ex.floor})")
            for w in wrong_answers(ex):
                v = grade(ex, w, quick=True)
                print(f"       {w.name:<28} " + (f"fails on case {v.passed + 1}" if v.status == "fail" else v.status))
    return 0


def check_command(args) -> int:
    chosen = args.numbers or EXERCISES
    sources = [(ex, student_source(args.student, ex)) for ex in chosen]
    flags = (
        ["--all"] * args.all
        + ["--quick"] * args.quick
        + (["--hidden", str(args.hidden)] if args.hidden is not None else [])
    )
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        verdicts = list(pool.map(lambda x: grade_in_child(*x, args.timeout, flags), sources))
        for v in verdicts:
            print(v.line())
            for line in v.detail():
                print(line)
            if v.printed.strip():
                lines = v.printed.rstrip().splitlines()
                print(f"  your code printed {len(lines)} line{'s' * (len(lines) != 1)}:")
                print("\n".join("  | " + x for x in lines[:20]) + ("\n  | ..." if len(lines) > 20 else ""))
    return 0 if all(v.status == "pass" for v in verdicts) else 1


def demo_command(args, demo_flags: list[str]) -> int:
    """The demo with the student's function spliced in (in this process: the demo is the student's to watch)."""
    import demo

    ex = args.number
    try:
        func, module = student_source(args.student, ex).load()
    except SourceError as e:
        print(f"{ex.name}: error: {e}", file=sys.stderr)
        return 1
    with Splice(ex.file, ex.qualname, func, module), recorded_branch(ex):
        try:
            return demo.main(["demo", args.name, *demo_flags])
        except NotImplementedError as e:
            if not str(e).startswith(f"exercise {ex.number} "):
                raise
            print(f"{ex.name}: not done yet: the demo runs your {ex.qualname}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 (the student's function raised: one line, where)
            at = where(e, func.__code__.co_filename)
            print(f"{ex.name}: your {ex.qualname} raised {type(e).__name__}: {e} ({at})", file=sys.stderr)
    return 1


@contextlib.contextmanager
def recorded_branch(ex: Exercise):
    """A heuristics branch (10, 11) that applied opts without recording a Decision (`self._weigh`) gets an empty one:
    the demo's steps are drawn from the records, and would leave its opts out or give them to the branch before."""
    import kernel

    if ex.parts != ("heuristics",):
        yield
        return
    name, spliced = ex.qualname.split(".")[-1], getattr(kernel.Kernel, ex.qualname.split(".")[-1])

    def branch(self, *args, **kwargs):
        start, records = len(self.applied_opts), len(self.decisions or [])
        try:
            return spliced(self, *args, **kwargs)
        finally:
            if self.decisions is not None and len(self.decisions) == records and len(self.applied_opts) > start:
                self.decisions.append(kernel.Decision(name, {}, start))

    with unittest.mock.patch.object(kernel.Kernel, name, branch):
        yield


def report_command(args) -> int:
    jobs = [(d, ex) for d in args.dirs for ex in EXERCISES]
    flags = ["--quick"] * args.quick + (["--hidden", str(args.hidden)] if args.hidden is not None else [])

    def one(job: tuple[str, Exercise]) -> Verdict:
        folder, ex = job
        if not os.path.isfile(path := os.path.join(folder, ex.file)):
            return Verdict(ex.number, ex.qualname, "error", message=f"no {ex.file} in {folder}")
        return grade_in_child(ex, Source(os.path.abspath(path), ex.qualname), args.timeout, flags)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        verdicts = dict(zip(jobs, pool.map(one, jobs)))
    names = {d: os.path.basename(os.path.normpath(d)) or d for d in args.dirs}
    width = max(10, *(len(n) + 2 for n in names.values()))
    print(f"{'student':<{width}}" + "".join(f"{ex.number:<10}" for ex in EXERCISES) + "passed")
    for d in args.dirs:
        row = [verdicts[d, ex] for ex in EXERCISES]
        passed = sum(v.status == "pass" for v in row)
        print(f"{names[d]:<{width}}" + "".join(f"{v.cell():<10}" for v in row) + f"{passed} of {len(row)}")
    for (d, _), v in verdicts.items():
        if v.status not in ("pass", "not done"):
            print(f"{names[d]}: {v.line()}")
    if args.json:
        out = {names[d]: {str(ex.number): verdicts[d, ex].to_json() for ex in EXERCISES} for d in args.dirs}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=repr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Graded exercises: one function of the optimizer each, graded "
                                "against tinygrad 0.9.1's recorded answers.")  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    lst = sub.add_parser("list", help="one line per exercise")
    lst.add_argument("--coverage", action="store_true", help="the cases each grader is decided by (half a minute)")
    mk = sub.add_parser("make", help="write a student's copy: the exercises' bodies stubbed, and the handout")
    mk.add_argument("dir")
    mk.add_argument("--only", type=exercise_number, nargs="+", metavar="N", help="stub these exercises only")
    mk.add_argument("--force", action="store_true", help="replace the files of a copy already there")
    timeout = dict(type=float, default=300, metavar="S", help="the time limit of one exercise (default 300 s)")
    jobs = dict(type=int, default=os.cpu_count() or 1, metavar="J", help="exercises graded at once")
    hidden = dict(type=int, metavar="SEED", help="also grade on cases drawn from SEED at grading time")
    quick = dict(action="store_true", help="the founders' corpus files only (kernels.json, shapetracker.json, ...; the "
                 "search logs for 14)")
    ck = sub.add_parser("check", help="grade a student's copy: one verdict line an exercise; exit 0 if all pass")
    ck.add_argument("numbers", nargs="*", type=exercise_number, metavar="N", help="the exercises (default: all)")
    ck.add_argument("--student", default=".", metavar="DIR", help="the student's copy (default: this folder)")
    ck.add_argument("--all", action="store_true", help="every failing case, not only the first")
    dm = sub.add_parser("demo", help="python kernel.py demo NAME with the student's function in it")
    dm.add_argument("number", type=exercise_number, metavar="N")
    dm.add_argument("name", help="a demo kernel (python kernel.py demo lists them); other flags go to the demo")
    dm.add_argument("--student", default=".", metavar="DIR", help="the student's copy (default: this folder)")
    rp = sub.add_parser("report", help="a teacher's table: each student's copy graded, one row a student")
    rp.add_argument("dirs", nargs="+", metavar="DIR", help="the students' copies (a folder each)")
    rp.add_argument("--json", metavar="FILE", help="write every verdict to FILE")
    for grading in (ck, rp):  # check's and report's grading options
        for flag, kwargs in (("--hidden", hidden), ("--quick", quick), ("--timeout", timeout), ("--jobs", jobs)):
            grading.add_argument(flag, **kwargs)
    args, extra = p.parse_known_args(argv)
    if extra and args.command != "demo":
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    import kernel

    if kernel.use_color():
        os.environ["FORCE_COLOR"] = "1"  # the verdicts' pictures are drawn in the child processes
    try:
        if args.command == "list":
            return list_command(args.coverage)
        if args.command == "make":
            written = make(args.dir, [ex.number for ex in args.only] if args.only else None, args.force)
            print("wrote " + ", ".join(written))
            print(f"next: edit {written[0]}, then `{PROG} check N --student {args.dir}` (N from `{PROG} list`)")
            return 0
        if args.command == "check":
            return check_command(args)
        if args.command == "demo":
            return demo_command(args, extra)
        return report_command(args)
    except (UsageError, FileExistsError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    import demo

    sys.exit(demo.run_command_line(main, PROG))
