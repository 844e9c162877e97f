"""What several test files share that is neither a corpus nor a replay: where the repository is, the dtypes,
bfloat16 rounding written from its definition (numpy has no bfloat16), the smallest kernel, and running a script
as a user does."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

from kernel import LazyOp, ShapeTracker, dtypes
from demo import load, store

# the repository: kernel.py, runtime.py, search/, bench.py, README.md, testdata/ (scripts run from here, as a user's)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INTS = [
    dtypes.int8,
    dtypes.uint8,
    dtypes.int16,
    dtypes.uint16,
    dtypes.int32,
    dtypes.uint32,
    dtypes.int64,
    dtypes.uint64,
]
FLOATS = [dtypes.half, dtypes.float, dtypes.double]
DTYPES = [dtypes.bool, *INTS, *FLOATS]  # every dtype a buffer may have (images aside)


BF16_MAX = float.fromhex("0x1.fep127")


def bf16_of(x: np.ndarray) -> np.ndarray:
    """x rounded once to bfloat16, to nearest with ties to even, as float32s. A float32 by the bit definition (its top
    16 bits, plus one where the 16 bits cut off are over half, or half with the last kept bit odd); a double or an int
    exactly, as a Fraction, so that it rounds once and not through a float32."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        bits = x.view(np.uint32).astype(np.uint64)
        low, top = bits & 0xFFFF, bits >> 16
        top = np.where((low > 0x8000) | ((low == 0x8000) & (top & 1 == 1)), top + 1, top)
        out = (top << 16).astype(np.uint32).view(np.float32)
        return np.where(np.isnan(x), x, out)
    return np.array([exact_bf16(v) for v in x.reshape(-1).tolist()], np.float32).reshape(x.shape)


def exact_bf16(v) -> float:
    """One value (a Python int or float) rounded to bfloat16 in exact arithmetic: 8 significant bits, the spacing of
    2**-133 below 2**-126 (subnormals), infinity past the largest bfloat16."""
    if not math.isfinite(v) or v == 0:
        return float(v)
    q = abs(Fraction(v))
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2**e <= q < 2**(e+2)
    e = max(e - (Fraction(2) ** e > q) + (Fraction(2) ** (e + 1) <= q), -126)
    spacing = Fraction(2) ** (e - 7)
    r = round(q / spacing) * spacing  # Fraction rounds a tie to even
    return math.copysign(math.inf if r > BF16_MAX else float(r), v)


def float_to_int(x: np.ndarray, to) -> np.ndarray:
    """runtime.py's rule for a float to an int (C leaves it undefined): toward zero, clamped to the range, NaN 0."""
    info = np.iinfo(to)
    vals = [
        0
        if math.isnan(v)
        else min(max(math.trunc(v), info.min), info.max)
        if math.isfinite(v)
        else (info.max if v > 0 else info.min)
        for v in np.asarray(x, np.float64).reshape(-1).tolist()
    ]
    return np.array(vals, to).reshape(np.shape(x))


def copy_ast(shape: tuple[int, ...], dt=dtypes.float) -> tuple[LazyOp, ...]:
    """out = a"""
    return (store(load(1, ShapeTracker.from_shape(shape), dt)),)


def run_script(script: str, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python SCRIPT ARGS` (or, for a SCRIPT "-m MODULE", `python -m MODULE ARGS`) in a fresh process, its output a
    pipe, without the shell's colour settings (conftest.py has cleared the heuristics' knobs) and with env's."""
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run(
        [sys.executable, *(script.split() if script.startswith("-m ") else [os.path.join(ROOT, script)]), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=timeout,
    )


def one_line_error(p: subprocess.CompletedProcess, status: int, *names: str) -> str:
    """p ended with status and one line on stderr, no traceback, naming each of names; returns stderr."""
    assert p.returncode == status, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    for name in names:
        assert name in p.stderr, p.stderr
    return p.stderr
