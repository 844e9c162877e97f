"""Does a kernel's time follow its buffers, or the moment? (a timing that is bimodal)

Makes SETS sets of fresh device buffers for one kernel (each a runtime.Launch, as time_kernel makes one per call),
then times every set in turn, PASSES times, each a median of 10 launches. A time that follows the buffers shows as a
row (a set) slower than the others in every pass; one that follows the moment, as a column (a pass) or a scatter.
`--spin` keeps one core busy with another process meanwhile, as another job on a shared machine does.

    python tools/timing_modes.py [KERNEL] [--sets N] [--passes N] [--spin]

KERNEL: bma (out = a * b + c, 1024x1024, b broadcast along rows, LOCAL:1:32 LOCAL:1:32: one seen bimodal on PoCL),
matmul (512, the opts search.py found), add (4M elements, UPCAST:0:4 LOCAL:0:32) or sum (over axis 0 of 4096x4096,
64 MiB: more than the last-level cache).
"""

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import runtime  # noqa: E402
from demo import elementwise_ast, matmul_ast, sum_ast  # noqa: E402
from kernel import BinaryOps, Kernel, Opt, ShapeTracker  # noqa: E402
from demo import alu, int_at_least, load, run_command_line, store  # noqa: E402


def bma_ast(n: int = 1024) -> tuple:
    a, b = ShapeTracker.from_shape((n, n)), ShapeTracker.from_shape((n,)).reshape((1, n)).expand((n, n))
    return (store(alu(BinaryOps.ADD, alu(BinaryOps.MUL, load(1, a), load(2, b)), load(3, a))),)


KERNELS = {
    "bma": (bma_ast, "LOCAL:1:32 LOCAL:1:32"),
    "matmul": (lambda: matmul_ast(512, 512, 512), "LOCAL:1:16 UPCAST:0:8 UPCAST:1:2 LOCAL:0:32"),
    "add": (lambda: elementwise_ast(1 << 22), "UPCAST:0:4 LOCAL:0:32"),
    "sum": (lambda: sum_ast((4096, 4096), (0,)), "LOCAL:0:16 UPCAST:0:8 UPCAST:0:4"),
}


def median_ms(launch: runtime.Launch, runs: int = 10) -> float:
    times = []
    for _ in range(runs):
        (event := launch.launch()).wait()
        times.append((event.profile.end - event.profile.start) * 1e-6)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/timing_modes.py", description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", nargs="?", default="bma", choices=list(KERNELS))
    p.add_argument("--sets", type=int_at_least(1), default=8, help="sets of buffers (8)")
    p.add_argument("--passes", type=int_at_least(1), default=6, help="passes over the sets (6)")
    p.add_argument("--spin", action="store_true", help="keep one core busy with another process meanwhile")
    args = p.parse_args(argv)
    ast, opts = KERNELS[args.kernel]
    k = Kernel(*ast())
    for o in opts.split():
        k.apply_opt(Opt.parse(o))
    inputs = runtime.random_inputs(k)
    runtime.verify(k, *inputs)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.spin else None
    try:
        launches = [runtime.Launch(k, inputs) for _ in range(args.sets)]
        for launch in launches:
            median_ms(launch, 2)  # warm-up
        table = [[median_ms(launch) for launch in launches] for _ in range(args.passes)]
    finally:
        if spinner:
            spinner.kill()
    print(f"{args.kernel} ({opts}) on {runtime.get_device().name}{', one core busy' if args.spin else ''}: ms")
    print("        " + " ".join(f"pass {p + 1:<2d}" for p in range(args.passes)) + "   lowest")
    for i in range(args.sets):
        row = [table[p][i] for p in range(args.passes)]
        print(f"set {i:2d}  " + " ".join(f"{t:7.3f}" for t in row) + f"   {min(row):6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python tools/timing_modes.py", one_line=(runtime.NoDeviceError,)))
