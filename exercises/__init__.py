"""Graded exercises: each one whole function of kernel.py or render.py, stubbed in a student's copy (`python -m
exercises make DIR`) and graded, spliced into the project's own modules, against tinygrad 0.9.1's recorded answers
(`python -m exercises check N`). HANDOUT.md beside this file is the students' text; the README's "Exercises" says how
grading works.

An exercise is one entry of EXERCISES: its number (kept when exercises are added: a handout cites it), the function
by file and qualified name, and the graders' parts it is graded by (graders.PARTS). Its seeded wrong answers are the
functions of wrong/exNN.py. Adding one is an entry here, a section of HANDOUT.md and a file of wrong answers.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

# the project: kernel.py, render.py, testdata/ (an editable install runs them from here)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project_first() -> None:
    """`python -m exercises` in a student's copy puts the copy's folder first on sys.path, where `import kernel` would
    find the student's stubs: the project's own modules come first."""
    cwd = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != cwd or cwd == os.path.realpath(ROOT)]
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)


_project_first()

# the files of a student's copy (`make`): the files the targets live in
STUDENT_FILES = ("kernel.py", "render.py")


@dataclass(frozen=True)
class Exercise:
    number: int
    target: str  # "kernel.py:View.reshape": the function, by file and qualified name
    title: str
    stars: int  # difficulty, 1 to 4
    minutes: int  # the time a student is expected to take
    parts: tuple[str, ...]  # what grades it, in order (graders.PARTS)
    floor: int  # the least number of the founders' cases (--quick) its stub fails on: tests/test_exercises.py
    optional: bool = False

    @property
    def file(self) -> str:
        return self.target.split(":")[0]

    @property
    def qualname(self) -> str:
        return self.target.split(":")[1]

    @property
    def name(self) -> str:  # how a verdict names it
        return f"exercise {self.number} ({self.qualname})"


# 10, 11, 13 and 14 are kept: the heuristics' _upcast_broadcast_axes and _locals, render's ids, the search's actions
EXERCISES = [
    Exercise(1, "kernel.py:_expr_view", "a View's index and validity", 1, 20, ("chains", "kernels"), 300),
    Exercise(2, "kernel.py:ShapeTracker.real_strides", "strides read off the index", 2, 30, ("chains", "kernels"), 400),
    Exercise(3, "kernel.py:View.reshape", "reshape without a copy", 3, 60, ("chains", "kernels"), 350),
    Exercise(4, "kernel.py:View.__add__", "merging two views", 4, 90, ("chains", "numpy"), 100, optional=True),
    Exercise(5, "kernel.py:Kernel.colors", "the colours of a shape", 1, 15, ("kernels",), 150),
    Exercise(6, "kernel.py:Kernel.shift_to", "split an axis and move a part", 2, 30, ("kernels",), 150),
    Exercise(7, "kernel.py:Kernel._opt_upcast", "UPCAST", 1, 20, ("kernels",), 150),
    Exercise(8, "kernel.py:Kernel._opt_group", "GROUP and GROUPTOP", 2, 30, ("kernels",), 100),
    Exercise(9, "kernel.py:Kernel._opt_padto", "PADTO", 3, 45, ("kernels",), 75),
    Exercise(12, "render.py:vector_axis", "the vector rule: float2 and float4", 2, 30, ("vectors", "device"), 150),
]
BY_NUMBER = {e.number: e for e in EXERCISES}
