"""Draw the README's picture: `FORCE_COLOR=1 python kernel.py demo matmul`, coloured, as docs/demo_matmul.svg.

Usage: python tools/demo_svg.py [FILE]   (default: docs/demo_matmul.svg; tests/test_readme.py checks it is current)
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernel import ansi_to_svg  # noqa: E402

PICTURE = os.path.join(ROOT, "docs", "demo_matmul.svg")


def demo_svg() -> str:
    """The SVG of what `python kernel.py demo matmul` prints in colour (off a terminal: 100 columns)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")} | {"FORCE_COLOR": "1"}
    argv = [sys.executable, os.path.join(ROOT, "kernel.py"), "demo", "matmul"]
    return ansi_to_svg(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else PICTURE, "w", encoding="utf-8") as f:
        f.write(demo_svg())
