"""Look at the demo's pages (page.py) in a real browser: Debian's headless chromium, from file://, offline.

Usage: python tools/browser.py [FILE]   (default: docs/demo_matmul.png, the README's screenshot of matmul's page)

tests/test_page.py's browser tests use the same functions: the DOM chromium loads (--dump-dom), a screenshot read
back as pixels (a PNG decoded with zlib and numpy), and a measurement through the DOM. The screenshot carries the
SHA-256 of the page it shows (a PNG text chunk), so a test without a browser can tell it is current.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import page  # noqa: E402

SHOT = os.path.join(ROOT, "docs", "demo_matmul.png")
SHOT_SIZE = (1400, 1000)  # the README's screenshot: the top of matmul's page in a window this wide and high
# headless, as root in a container, on a machine with no network: no sandbox, no GPU, nothing fetched at start
FLAGS = "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
FLAGS += " --disable-component-update --disable-sync --hide-scrollbars --mute-audio"


def chromium() -> str | None:
    """Debian's chromium (apt-get install chromium), or None where there is none."""
    return shutil.which("chromium")


def run(url: str, *args: str, size: tuple[int, int] = (1400, 1000), timeout: float = 60) -> str:
    """chromium's stdout for `url` in a window of `size`, with a fresh profile of its own."""
    with tempfile.TemporaryDirectory(prefix="kernelpy-chromium-") as profile:
        window = f"--window-size={size[0]},{size[1]}"
        argv = [chromium() or "chromium", *FLAGS.split(), f"--user-data-dir={profile}", window]
        done = subprocess.run([*argv, *args, url], capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


def dump_dom(path: str, size: tuple[int, int] = (1400, 1000)) -> str:
    """The DOM of the page at `path` as chromium has it once loaded (its scripts run), serialized."""
    return run(f"file://{os.path.abspath(path)}", "--dump-dom", size=size)


def screenshot(path: str, size: tuple[int, int] = SHOT_SIZE) -> bytes:
    """A PNG of the page at `path` in a window of `size` (its top: the window's height of it)."""
    with tempfile.TemporaryDirectory(prefix="kernelpy-shot-") as folder:
        png = os.path.join(folder, "shot.png")
        run(f"file://{os.path.abspath(path)}", f"--screenshot={png}", size=size)
        with open(png, "rb") as f:
            return f.read()


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """The (type, data) chunks of a PNG file."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    out, at = [], 8
    while at < len(png):
        (n,) = struct.unpack(">I", png[at : at + 4])
        out.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + n]))
        at += 12 + n
    return out


def pixels(png: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA PNG (not interlaced, as chromium writes them) as a (height, width, channels) array."""
    parts = chunks(png)
    width, height, depth, kind, _, _, interlace = struct.unpack(">IIBBBBB", parts[0][1])
    if depth != 8 or kind not in (2, 6) or interlace:
        raise ValueError(f"pixels: want 8-bit RGB or RGBA, not interlaced: depth {depth}, colour type {kind}")
    n = 3 if kind == 2 else 4
    rows = np.frombuffer(zlib.decompress(b"".join(d for t, d in parts if t == b"IDAT")), np.uint8)
    rows = rows.reshape(height, 1 + width * n)
    out, up = np.zeros((height, width * n), np.uint8), np.zeros(width * n, np.uint8)
    for y in range(height):  # undo each row's filter (the PNG spec, 9.2): None, Sub, Up, Average, Paeth
        kind, line = rows[y, 0], rows[y, 1:]
        if kind in (0, 2):
            out[y] = line + up * (kind == 2)  # uint8: modulo 256
        elif kind == 1:
            out[y] = line.reshape(width, n).cumsum(0, dtype=np.uint8).reshape(-1)
        else:  # Average and Paeth take the pixel to the left once it is decoded: one byte at a time
            new, above = bytearray(line.tobytes()), up.tolist()
            for x in range(width * n):
                a, b, c = (new[x - n], above[x], above[x - n]) if x >= n else (0, above[x], 0)
                if kind == 3:
                    new[x] = (new[x] + (a + b) // 2) & 255
                else:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    new[x] = (new[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            out[y] = np.frombuffer(bytes(new), np.uint8)
        up = out[y]
    return out.reshape(height, width, n)


def with_text(png: bytes, key: str, value: str) -> bytes:
    """`png` with a tEXt chunk `key`=`value` after its header (and any old one of that key dropped)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    kept = [(t, d) for t, d in chunks(png) if not (t == b"tEXt" and d.split(b"\0")[0] == key.encode())]
    text = (b"tEXt", key.encode() + b"\0" + value.encode())
    return png[:8] + b"".join(chunk(t, d) for t, d in [kept[0], text, *kept[1:]])


def text_of(png: bytes, key: str) -> str | None:
    """The value of `png`'s tEXt chunk `key`, or None where it has none."""
    texts = [d.split(b"\0", 1) for t, d in chunks(png) if t == b"tEXt"]
    return next((value.decode() for k, value in texts if k == key.encode()), None)


def readme_page() -> str:
    """The page the README's screenshot shows: matmul's, as `python kernel.py demo matmul --html matmul.html` writes
    it."""
    return page.page("matmul", file="matmul.html")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def readme_shot() -> bytes:
    """The README's screenshot of readme_page(), marked with the page's SHA-256."""
    with tempfile.TemporaryDirectory(prefix="kernelpy-page-") as folder:
        path = os.path.join(folder, "matmul.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(html := readme_page())
        return with_text(screenshot(path), "page-sha256", digest(html))


if __name__ == "__main__":
    if chromium() is None:
        sys.exit("tools/browser.py: no chromium here (Debian: apt-get install chromium)")
    with open(sys.argv[1] if len(sys.argv) > 1 else SHOT, "wb") as f:
        f.write(readme_shot())
