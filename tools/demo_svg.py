"""Draw the README's picture: `FORCE_COLOR=1 python kernel.py demo matmul`, coloured, as docs/demo_matmul.svg.

Usage: python tools/demo_svg.py [FILE]   (default: docs/demo_matmul.svg; tests/test_readme.py checks it is current)
"""

import html
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from demo import PALETTE  # noqa: E402
from kernel import ansilen  # noqa: E402
from page import ansi_runs  # noqa: E402

PICTURE = os.path.join(ROOT, "docs", "demo_matmul.svg")


def ansi_to_svg(text: str, size: int = 14) -> str:
    """`text` as a terminal shows it, as an SVG: colored()'s ANSI codes become PALETTE's colours, one <text> a line."""
    w, h, rows = 0.6 * size, 1.4 * size, []
    lines = text.rstrip("\n").split("\n")
    for y, line in enumerate(lines):
        runs = ansi_runs(line)
        pieces = [f'<tspan fill="{PALETTE[c]}">{html.escape(t)}</tspan>' if c else html.escape(t) for c, t in runs]
        at = f'x="{w:g}" y="{(y + 1.4) * h:.1f}" textLength="{ansilen(line) * w:.1f}"'  # every cell w wide
        rows += [f'<text xml:space="preserve" {at}>{"".join(pieces)}</text>'] if pieces else []
    width, height = (max(map(ansilen, lines)) + 2) * w, (len(lines) + 1.3) * h
    font = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
    head = f'width="{width:.0f}" height="{height:.0f}" font-size="{size}" font-family="{font}" fill="#c9d1d9"'
    rect = '<rect x="0.5" y="0.5" width="99.8%" height="99.6%" rx="6" fill="#161b22" stroke="#30363d"/>'
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" {head}>', rect, *rows, "</svg>\n"])


def demo_svg() -> str:
    """The SVG of what `python kernel.py demo matmul` prints in colour (off a terminal: 100 columns)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")} | {"FORCE_COLOR": "1"}
    argv = [sys.executable, os.path.join(ROOT, "kernel.py"), "demo", "matmul"]
    return ansi_to_svg(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else PICTURE, "w", encoding="utf-8") as f:
        f.write(demo_svg())
