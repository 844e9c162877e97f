"""What several test files share that is neither a corpus nor a replay: where the repository is, and the dtypes."""

from __future__ import annotations

import os

from kernel import dtypes

# the repository: kernel.py, runtime.py, search.py, bench.py, README.md, testdata/ (scripts run from here, as a user's)
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
