"""tinygrad 0.9.1's side of bench.py: its hand-coded kernels' times and its BEAM search's choices for the 8 workloads
of the suite, measured by tinygrad itself, as JSON files that `python bench.py --tinygrad FILE` and
`--tinygrad-beam FILE` read.

Run it under your own tinygrad 0.9.1 install (`pip install tinygrad==0.9.1 numpy` in an environment of its own; the
project never imports tinygrad, and nothing of the project imports this script):

    GPU=1 python tools/tinygrad_times.py --hand-coded tg_times.json --beam tg_beam.json [NAME ...]

NAME: a workload of bench.py ('add 16M', 'matmul 512', ...; default all 8). --hand-coded FILE: each kernel's time
as tinygrad's heuristics optimize it (median of --runs launches, tinygrad's own timing: OpenCL profiling events) and
the ASTs it ran. --beam FILE: each kernel's BEAM=N choice (`--beam-amt`, default 2: tinygrad's get_linearizer with
BEAM set, which also compares the winner with the hand-coded kernel, as `BEAM=2 python ...` would), its opts, ASTs
and the search's seconds. One mode or both. Each file names the OpenCL device it was measured on; bench.py gives
it to that device alone. tinygrad's searches start cold: its BEAM cache and compiled-program cache are not used
(IGNORE_BEAM_CACHE=1 and DISABLE_COMPILER_CACHE=1 unless you set them).

Which device: tinygrad's GPU backend takes the first device of the OpenCL ICD loader's first platform. To measure
on one device, point the loader at a folder holding that device's .icd file alone, e.g. for Intel's CPU runtime
installed by pip (the project's `cpu` extra):

    mkdir -p ~/icd-intel && echo <venv>/lib/libintelocl.so > ~/icd-intel/intel.icd
    OCL_ICD_VENDORS=~/icd-intel GPU=1 python tools/tinygrad_times.py --beam tg_beam_intel.json

and for PoCL, a folder whose .icd names libpocl's full path (pyopencl's wheel ships one in
<venv>/.../site-packages/pyopencl/.libs/). runtime.py writes such a folder, ~/.cache/kernelpy/opencl-vendors
(Intel's runtime and the system's own .icd files): it serves where Intel's is the only one in it. tinygrad loads
`libOpenCL.so` by name: where the system has none, give it the one pip installed with pyopencl's environment
(`LD_LIBRARY_PATH=<venv>/lib`). The script prints the device it ran on, and writes it into each file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("IGNORE_BEAM_CACHE", "1")  # read by tinygrad when it searches: set before it is imported
os.environ.setdefault("DISABLE_COMPILER_CACHE", "1")
os.environ.setdefault("GPU", "1")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the command line's helpers
import numpy as np  # noqa: E402
from demo import int_at_least, output_file, write_file  # noqa: E402  (the project's: standard library only)
from tinygrad import Device, Tensor  # noqa: E402
from tinygrad.dtype import ImageDType  # noqa: E402
from tinygrad.engine.realize import CompiledRunner, get_linearizer  # noqa: E402
from tinygrad.helpers import Context  # noqa: E402
from tinygrad.ops import BufferOps, MemBuffer  # noqa: E402

E = Tensor.empty
# bench.BENCHMARKS's workloads, by its names, as tinygrad programs (tinygrad schedules `sum 16M` as two kernels)
WORKLOADS = {
    "matmul 512": lambda: E(512, 512) @ E(512, 512),
    "matmul 1024": lambda: E(1024, 1024) @ E(1024, 1024),
    "matvec 4096x4096": lambda: E(4096, 4096) @ E(4096),
    "sum 16M": lambda: E(4096 * 4096).sum(),
    "sum axis 0 4096x4096": lambda: E(4096, 4096).sum(axis=0),
    "sum axis 1 4096x4096": lambda: E(4096, 4096).sum(axis=1),
    "add 16M": lambda: E(4096, 4096) + E(4096, 4096),
    "conv2d 8x32x64x64 k3x64": lambda: E(8, 32, 64, 64).conv2d(E(64, 32, 3, 3)),
}


def _dtype_json(d) -> str | dict:
    return {"image": "float", "shape": list(d.shape)} if isinstance(d, ImageDType) else d.name


def _st_json(st) -> list[dict]:
    return [
        {
            "shape": list(v.shape),
            "strides": list(v.strides),
            "offset": v.offset,
            "mask": [list(m) for m in v.mask] if v.mask is not None else None,
        }
        for v in st.views
    ]


def lazyop_json(x) -> dict:
    """A LazyOp in the golden corpus's JSON form (testdata/README.md), which bench.py reads back."""
    d: dict = {"op": f"{type(x.op).__name__}.{x.op.name}"}
    if x.op in BufferOps:
        a = x.arg
        first = {"idx": a.idx} if isinstance(a, MemBuffer) else {"val": a.val}
        d["arg"] = {**first, "dtype": _dtype_json(a.dtype), "st": _st_json(a.st)}
    elif x.arg is not None:  # a reduce's axes or a cast's dtype (the suite has no symbolic sizes)
        d["arg"] = _dtype_json(x.arg) if hasattr(x.arg, "itemsize") else list(x.arg)
    if x.src:
        d["src"] = [lazyop_json(s) for s in x.src]
    return d


def _kernels(name: str) -> list:
    """The workload's schedule items that are kernels, their buffers filled with random floats (untouched pages
    would flatter memory-bound kernels)."""
    items = [si for si in WORKLOADS[name]().schedule() if si.ast[0].op is BufferOps.STORE]
    for si in items:
        for b in si.bufs:
            b.ensure_allocated()
            data = np.random.default_rng(0).random(b.nbytes // 4, dtype=np.float32)
            b.copyin(memoryview(data.view(np.uint8)))
    return items


def _seconds(runner: CompiledRunner, si, runs: int) -> float:
    """Median seconds of `runs` launches after two warm-ups, as tinygrad times a kernel (wait=True)."""
    bufs = [si.bufs[i] for i, _ in runner.p.globals]
    return statistics.median([runner(bufs, {}, wait=True) for _ in range(runs + 2)][2:])


def measure(names: list[str], runs: int, beam_amt: int | None) -> dict:
    """{name: {"kernels": [...], "tinygrad_s": total}}: hand-coded kernels, or with beam_amt each kernel's BEAM
    choice ("opts", each [op, axis, amount]) and its search's seconds ("search_s")."""
    renderer, out = Device[Device.DEFAULT].renderer, {}
    for name in names:
        kernels = []
        for si in _kernels(name):
            start = time.perf_counter()
            with Context(BEAM=beam_amt or 0):
                k = get_linearizer(renderer, si.ast)
            search_s = time.perf_counter() - start
            opts = [[o.op.name, o.axis, o.amt] for o in k.applied_opts]
            entry = {"ast": [lazyop_json(a) for a in si.ast], "opts": opts}
            runner = CompiledRunner(k.to_program())
            entry |= {"tinygrad_s": _seconds(runner, si, runs), "name": runner.p.name, "tinygrad_src": runner.p.src}
            kernels.append(entry | ({"search_s": search_s} if beam_amt else {}))
        out[name] = {"kernels": kernels, "tinygrad_s": sum(k["tinygrad_s"] for k in kernels)}
        if beam_amt:
            out[name]["search_s"] = sum(k["search_s"] for k in kernels)
        print(
            f"{name:26s} {f'BEAM={beam_amt}' if beam_amt else 'hand-coded':10s} "
            f"{out[name]['tinygrad_s'] * 1e3:9.3f} ms"
            + (f"  search {out[name]['search_s']:6.1f} s" if beam_amt else "")
            + "  "
            + " | ".join(" ".join(f"{op}:{axis}:{amt}" for op, axis, amt in k["opts"]) or "no opts" for k in kernels),
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python tools/tinygrad_times.py",
        description="Under tinygrad 0.9.1: its kernel times and BEAM choices for bench.py's workloads, as JSON.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="workloads (default all): " + ", ".join(WORKLOADS))
    p.add_argument("--hand-coded", type=output_file, metavar="FILE", help="write tinygrad's hand-coded kernels' "
                   "times (bench --tinygrad)")  # fmt: skip
    p.add_argument("--beam", type=output_file, metavar="FILE", help="write tinygrad's BEAM choices (bench "
                   "--tinygrad-beam)")  # fmt: skip
    p.add_argument("--beam-amt", type=int_at_least(1), default=2, metavar="N", help="BEAM=N for --beam (2)")
    p.add_argument("--runs", type=int_at_least(1), default=10, help="timed launches a kernel, after two warm-ups (10)")
    args = p.parse_args(argv)  # (each FILE checked there: before minutes of measuring, not after)
    if unknown := [n for n in args.names if n not in WORKLOADS]:
        p.error(f"unknown workload {unknown[0]!r}; choose from {', '.join(WORKLOADS)}")
    if not (args.hand_coded or args.beam):
        p.error("give --hand-coded FILE, --beam FILE or both")
    if args.hand_coded and args.beam and os.path.realpath(args.hand_coded) == os.path.realpath(args.beam):
        p.error(f"--hand-coded and --beam name one file ({args.beam}): the second would overwrite the first")
    dev = Device[Device.DEFAULT]
    device = getattr(dev, "device_name", Device.DEFAULT).strip()
    print(f"tinygrad 0.9.1 on {Device.DEFAULT}: {device}", flush=True)
    head = {"source": "tinygrad 0.9.1, tools/tinygrad_times.py", "device": device, "backend": Device.DEFAULT}
    for path, mode, amt in [(args.hand_coded, "hand-coded", None), (args.beam, "beam", args.beam_amt)]:
        if path:
            result = {**head, "mode": mode, **({"beam": amt} if amt else {}), "runs": args.runs}
            result["workloads"] = measure(args.names or list(WORKLOADS), args.runs, amt)
            write_file(path, json.dumps(result))  # whole or not at all
            print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
