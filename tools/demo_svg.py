"""Draw the README's picture: `FORCE_COLOR=1 python kernel.py demo matmul`, coloured, as docs/demo_matmul.svg.

Usage: python tools/demo_svg.py [FILE]   (default: docs/demo_matmul.svg; tests/test_readme.py checks it is current)
"""

import argparse
import html
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from demo import PALETTE, output_file, write_file  # noqa: E402
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/demo_svg.py", description=__doc__.split("\n\n")[0])
    p.add_argument("file", nargs="?", type=output_file, default=PICTURE, help="where (default docs/demo_matmul.svg)")
    args = p.parse_args(argv)
    try:  # the picture is drawn first, then written whole: a demo that fails leaves the file as it was
        write_file(args.file, demo_svg())
    except subprocess.CalledProcessError as e:
        last = (e.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"python tools/demo_svg.py: error: the demo failed (exit status {e.returncode}: {last}); "
              f"{args.file} is left as it was", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
