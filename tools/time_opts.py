"""Time a bench.py workload's first kernel under given opt lists, side by side (each verified first).

    python tools/time_opts.py WORKLOAD "OPTS" ["OPTS" ...]

WORKLOAD is a name of bench.BENCHMARKS ("conv2d 8x32x64x64 k3x64", ...); OPTS a space-separated list such as
"PADTO:3:32 LOCAL:3:16 UPCAST:1:4". Each line: the best of 3 medians of 5 launches, the GFLOP/s and the shape.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench  # noqa: E402
import runtime  # noqa: E402
from kernel import Kernel, KernelOptError, Opt  # noqa: E402


def main(name: str, *variants: str) -> None:
    build, flops, _, _ = bench.BENCHMARKS[name]
    ast, inputs = build()[0], None
    for opts in variants:
        k = Kernel(*ast)
        try:
            for o in opts.split():
                k.apply_opt(Opt.parse(o))
        except KernelOptError as e:
            print(f"{opts:64s} refused: {e}")
            continue
        inputs = inputs or runtime.random_inputs(k, seed=1)
        runtime.verify(k, *inputs)
        t = min(runtime.time_kernel(k, *inputs, runs=5) for _ in range(3))
        print(f"{opts or 'no opts':64s} {t * 1e3:8.3f} ms {flops / t * 1e-9:7.1f} GFLOP/s  {k.full_shape}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
