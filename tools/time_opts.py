"""Time a bench.py workload's first kernel under given opt lists, side by side (each verified first).

    python tools/time_opts.py WORKLOAD "OPTS" ["OPTS" ...]

WORKLOAD is a name of bench.BENCHMARKS ("conv2d 8x32x64x64 k3x64", ...); OPTS a space-separated list such as
"PADTO:3:32 LOCAL:3:16 UPCAST:1:4". The variants are timed in turn on one set of device buffers, as bench.py times
its rows (bench.time_side_by_side: a slow moment of the machine, or pages, fall on every variant alike). Each line:
the best of those medians of 5 launches, the GFLOP/s and the shape.
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
    ast = build()[0]
    inputs, variants = runtime.random_inputs(ast, seed=1), {}
    for opts in args.variants:
        k, text = Kernel(*ast), " ".join(map(str, opts)) or "no opts"
        try:
            for o in opts:
                k.apply_opt(o)
        except KernelOptError as e:
            print(f"{text:64s} refused: {e}")
            continue
        runtime.verify(k, *inputs)
        variants[text] = [(k, inputs)]
    for text, t in bench.time_side_by_side(variants, runs=5).items() if variants else ():
        print(f"{text:64s} {t * 1e3:8.3f} ms {flops / t * 1e-9:7.1f} GFLOP/s  {variants[text][0][0].full_shape}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python tools/time_opts.py", one_line=(runtime.NoDeviceError,)))
