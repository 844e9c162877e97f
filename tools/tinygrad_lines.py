"""How much of tinygrad 0.9.1's heuristics kernel.py writes as tinygrad does: (a) tinygrad's logical lines of
required_optimizations and hand_coded_optimizations (and of the tensor-core code) that appear in kernel.py token for
token (comments and whitespace aside; each kernel.py line matches one tinygrad line at most), and (b) the characters of
string literals (docstrings aside) in kernel.py's heuristic branches, required_optimizations ... _locals.

It reads tinygrad's file as text and imports nothing, so any Python runs it:

    python tools/tinygrad_lines.py PATH/TO/tinygrad/codegen/kernel.py [kernel.py] [--missing]

--missing lists tinygrad's lines kernel.py does not have.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import Counter

HAND_CODED = ("required_optimizations", "hand_coded_optimizations")
TENSOR_CORES = ("_apply_tc_opt", "apply_tensor_cores")
BRANCHES = ("required_optimizations", "hand_coded_optimizations", "_matvec", "_grouping", "_image_float4",
            "_upcast_masked_axes", "_upcast_broadcast_axes", "_unroll_reduce", "_default_upcast", "_locals",
            "_upcast_pixel")  # (the last: a helper of older kernel.py's branches)
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}


def methods(source: str, names: tuple[str, ...]) -> list[tuple[int, int, ast.FunctionDef]]:
    """(first line, last line, node) of each method of a class in `source` named in `names`, in the file's order."""
    found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name in names]
    return sorted((n.lineno, n.end_lineno, n) for n in found)


def logical_lines(source: str, spans: list[tuple[int, int, ast.FunctionDef]]) -> list[tuple[str, ...]]:
    """The logical lines (one per NEWLINE token, a compound statement's header and its one-line body apart from its
    next line) inside `spans`, each the tuple of its tokens, comments and layout dropped; a docstring is left out."""
    docstrings = {n.body[0].lineno for _, _, n in spans if ast.get_docstring(n) is not None}
    lines, line = [], []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in SKIP:
            continue
        if tok.type == tokenize.NEWLINE:
            if line and line[0][0] not in docstrings and any(a <= line[0][0] <= b for a, b, _ in spans):
                lines.append(tuple(s for _, s in line))
            line = []
        else:
            line.append((tok.start[0], tok.string))
    return lines


def strings(source: str, spans: list[tuple[int, int, ast.FunctionDef]]) -> int:
    """Characters of the string tokens inside `spans` (quotes and prefixes included, an f-string whole), docstrings
    aside."""
    docstrings = {n.body[0].lineno for _, _, n in spans if ast.get_docstring(n) is not None}
    return sum(len(tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
               if tok.type == tokenize.STRING and tok.start[0] not in docstrings
               and any(a <= tok.start[0] <= b for a, b, _ in spans))  # fmt: skip


def present(tinygrad: list[tuple[str, ...]], ours: list[tuple[str, ...]]) -> tuple[int, list[tuple[str, ...]]]:
    """How many of tinygrad's lines are among ours, each of ours used once; and the ones that are not."""
    pool, missing = Counter(ours), []
    for line in tinygrad:
        if pool[line] > 0:
            pool[line] -= 1
        else:
            missing.append(line)
    return len(tinygrad) - len(missing), missing


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tinygrad", help="tinygrad 0.9.1's tinygrad/codegen/kernel.py")
    p.add_argument("kernel", nargs="?", default="kernel.py", help="the project's kernel.py (default: ./kernel.py)")
    p.add_argument("--missing", action="store_true", help="list tinygrad's lines that kernel.py does not have")
    args = p.parse_args()
    theirs, ours = open(args.tinygrad).read(), open(args.kernel).read()
    for what, names, our_names in (("hand_coded_optimizations", HAND_CODED, BRANCHES),
                                   ("tensor cores", TENSOR_CORES, TENSOR_CORES)):  # fmt: skip
        want = logical_lines(theirs, methods(theirs, names))
        n, missing = present(want, logical_lines(ours, methods(ours, our_names)))
        print(f"tinygrad's logical lines of {what} in kernel.py, token for token: {n} of {len(want)}")
        for line in missing if args.missing else []:
            print("    " + " ".join(line))
    print(f"string literals in kernel.py's heuristic branches (docstrings aside): "
          f"{strings(ours, methods(ours, BRANCHES))} characters; in tinygrad's: "
          f"{strings(theirs, methods(theirs, HAND_CODED))}")  # fmt: skip


if __name__ == "__main__":
    main()
