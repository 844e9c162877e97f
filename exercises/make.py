"""A student's copy: kernel.py and render.py with each exercise's function body, after its docstring,
replaced by a stub that raises NotImplementedError (found with `ast`: the project's files hold no markers)."""

from __future__ import annotations

import ast
import os
import shutil
from collections.abc import Sequence

from exercises import EXERCISES, ROOT, STUDENT_FILES, Exercise

HANDOUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "HANDOUT.md")


def stub(ex: Exercise) -> str:
    """The statement a stubbed body holds (graders.py reads "exercise N " as not done)."""
    return f'raise NotImplementedError("exercise {ex.number} ({ex.qualname}): not done yet, see HANDOUT.md")'


def find_def(tree: ast.Module, qualname: str) -> ast.FunctionDef | None:
    """The def of a qualified name (`View.reshape`) at the top of a module or in its classes."""
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next((x for x in getattr(node, "body", []) if getattr(x, "name", None) == part), None)
        if node is None:
            return None
    return node if isinstance(node, ast.FunctionDef) else None


def body_span(source: bytes, tree: ast.Module, qualname: str) -> tuple[int, int]:
    """The byte offsets of a function's body after its docstring (ast counts columns in UTF-8 bytes)."""
    node = find_def(tree, qualname)
    if node is None:
        raise ValueError(f"no function {qualname}")
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    if not body:
        raise ValueError(f"{qualname} has nothing but a docstring")
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts[body[0].lineno - 1] + body[0].col_offset, starts[body[-1].end_lineno - 1] + body[-1].end_col_offset


def stubbed(source: str, exercises: Sequence[Exercise]) -> str:
    """source (one file) with the bodies of the exercises' functions replaced by their stubs."""
    data, tree = source.encode(), ast.parse(source)
    spans = sorted(((*body_span(data, tree, ex.qualname), ex) for ex in exercises), key=lambda x: -x[0])
    for start, end, ex in spans:
        data = data[:start] + stub(ex).encode() + data[end:]
    return data.decode()


def make(dest: str, numbers: Sequence[int] | None = None, force: bool = False) -> list[str]:
    """Write the student's copy into dest (the exercises numbered, else all) and the handout; returns the paths.
    FileExistsError where a file of the copy is there already, unless force (a student's work is never lost)."""
    chosen = [ex for ex in EXERCISES if numbers is None or ex.number in numbers]
    names = [*STUDENT_FILES, "HANDOUT.md"]
    if not force and (there := [n for n in names if os.path.exists(os.path.join(dest, n))]):
        raise FileExistsError(f"{os.path.join(dest, there[0])} exists: make won't overwrite it (--force replaces it)")
    os.makedirs(dest, exist_ok=True)
    for name in STUDENT_FILES:
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            text = stubbed(f.read(), [ex for ex in chosen if ex.file == name])
        with open(os.path.join(dest, name), "w", encoding="utf-8") as f:
            f.write(text)
    shutil.copyfile(HANDOUT, os.path.join(dest, "HANDOUT.md"))
    return [os.path.join(dest, n) for n in names]
