"""Time a bench.py workload's first kernel under given opt lists, side by side (each verified first).

    python tools/time_opts.py WORKLOAD "OPTS" ["OPTS" ...]

WORKLOAD is a name of bench.BENCHMARKS ("conv2d 8x32x64x64 k3x64", ...); OPTS a space-separated list such as
"PADTO:3:32 LOCAL:3:16 UPCAST:1:4". Each line: the best of 3 medians of 5 launches, the GFLOP/s and the shape.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench  # noqa: E402
import runtime  # noqa: E402
from demo import run_command_line  # noqa: E402
from kernel import Kernel, KernelOptError, Opt  # noqa: E402


def opt_list(text: str) -> list[Opt]:
    """An argparse type: OPTS, opts apart by spaces ("" for none), each as Opt.parse reads it."""
    try:
        return [Opt.parse(o) for o in text.split()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/time_opts.py", description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=list(bench.BENCHMARKS), metavar="WORKLOAD", help="a name of bench.BENCHMARKS")
    p.add_argument("variants", nargs="+", type=opt_list, metavar="OPTS", help='opts apart by spaces, in quotes')
    args = p.parse_args(argv)
    build, flops, _, _ = bench.BENCHMARKS[args.workload]
    ast, inputs = build()[0], None
    for opts in args.variants:
        k, text = Kernel(*ast), " ".join(map(str, opts))
        try:
            for o in opts:
                k.apply_opt(o)
        except KernelOptError as e:
            print(f"{text:64s} refused: {e}")
            continue
        inputs = inputs or runtime.random_inputs(k, seed=1)
        runtime.verify(k, *inputs)
        t = min(runtime.time_kernel(k, *inputs, runs=5) for _ in range(3))
        print(f"{text or 'no opts':64s} {t * 1e3:8.3f} ms {flops / t * 1e-9:7.1f} GFLOP/s  {k.full_shape}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python tools/time_opts.py", one_line=(runtime.NoDeviceError,)))
