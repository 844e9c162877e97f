"""Fixtures every test file shares."""

from __future__ import annotations

import pytest

# the environment knobs tinygrad's heuristics read (kernel.getenv): every test starts from their defaults, so a knob
# left set in the shell can't change which opts the golden corpus expects
HEURISTIC_KNOBS = ("MV", "MV_BLOCKSIZE", "MV_THREADS_PER_ROW", "MV_ROWS_PER_THREAD", "NOLOCALS", "TC", "TC_OPT")


@pytest.fixture(autouse=True)
def _heuristic_defaults(monkeypatch):
    for knob in HEURISTIC_KNOBS:
        monkeypatch.delenv(knob, raising=False)


@pytest.fixture(scope="session")
def device():
    """The OpenCL device runtime.py runs on; tests that need one skip, saying why, where there is none."""
    R = pytest.importorskip("runtime")
    try:
        return R.get_device()
    except R.NoDeviceError as e:
        pytest.skip(f"no OpenCL device to run kernels on: {e}")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The project's cache folder (search.py's searches), empty and the test's own: never the user's."""
    monkeypatch.setenv("KERNELPY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
