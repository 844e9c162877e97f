"""What fusing a sum of products costs or saves, on the OpenCL device runtime.py picks (KERNELPY_DEVICE chooses).

render.py renders a SUM of products in a block under `#pragma OPENCL FP_CONTRACT ON` (docs/numerics.md): the
compiler may fuse each multiply-add. This script times that C beside two rewrites of it, in turn, on the same
buffers and launch sizes: "unfused" (the block's pragma taken out: every multiply and add rounds on its own) and
"fma()" (each statement written as a chain of explicit fma() calls, as the renderer did before). It prints each
kernel's best median and the ratios.

Usage: python tools/fusion_cost.py [--rounds N]
"""

import argparse
import dataclasses
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import runtime  # noqa: E402
from bench import BENCHMARKS  # noqa: E402
from kernel import Kernel, optimize
from demo import int_at_least, parse_opt_arg, run_command_line  # noqa: E402

# (workload, opts): None is the heuristics' opts; the others are what the search chose on Intel's runtime
CASES = [
    ("matmul 512", None),
    ("matmul 512", "LOCAL:1:16 UPCAST:0:8 UPCAST:1:2 LOCAL:0:32 LOCAL:1:2"),
    ("conv2d 8x32x64x64 k3x64", None),
    ("conv2d 8x32x64x64 k3x64", "LOCAL:1:16 UPCAST:0:0 UPCAST:1:2 LOCAL:2:2 LOCAL:0:2"),
    ("matvec 4096x4096", None),
]
_PRAGMA = "#pragma OPENCL FP_CONTRACT ON\n"
_STATEMENT = re.compile(r"^(\s*)([\w.]+) = ((?:\([\w.]+\*[\w.]+\)\+)+)([\w.]+);$", re.M)


def as_fma_calls(src: str) -> str:
    """(a0*b0)+(a1*b1)+acc -> fma(a1,b1,(a0*b0))+acc (the products summed first, as render.py sums them), and
    (a0*b0)+acc -> fma(a0,b0,acc)."""

    def chain(m: re.Match) -> str:
        (a, b), *rest = re.findall(r"\(([\w.]+)\*([\w.]+)\)", m[3])
        if not rest:
            return f"{m[1]}{m[2]} = fma({a},{b},{m[4]});"
        expr = f"({a}*{b})"
        for a, b in rest:
            expr = f"fma({a},{b},{expr})"
        return f"{m[1]}{m[2]} = {expr}+{m[4]};"

    return _STATEMENT.sub(chain, src)


def seconds(launch: runtime.Launch) -> float:
    """One launch's seconds, from its OpenCL profiling event."""
    event = launch.launch()
    event.wait()
    return (event.profile.end - event.profile.start) * 1e-9


def variants(src: str) -> dict[str, str]:
    pragma = re.search(r"^\s*" + re.escape(_PRAGMA), src, re.M)
    assert pragma, "no sum of products in this kernel"
    unfused = src[: pragma.start()] + "\n" + src[pragma.end() :]
    return {"contract": src, "unfused": unfused, "fma()": as_fma_calls(unfused)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/fusion_cost.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int_at_least(1), default=7, help="medians per variant, taken in turn (7)")
    args = p.parse_args(argv)
    print(f"device: {runtime.get_device().name}; best of {args.rounds} medians of 3 launches, variants in turn")
    columns = f"{'contract':>11s} {'unfused':>11s} {'fma()':>11s} {'unfused/c':>10s} {'fma/c':>7s}"
    print(f"{'kernel':26s} {'opts':10s} {columns}")
    for name, opts in CASES:
        k = Kernel(*BENCHMARKS[name][0]()[0])
        if opts is None:
            optimize(k)
        for opt in (opts or "").split():
            k.apply_opt(parse_opt_arg(opt))
        inputs = runtime.random_inputs(k, seed=1)
        prg = runtime.render(k, runtime.device_limits())
        sources = variants(prg.src)
        launches = {v: runtime.Launch(k, inputs, prg=dataclasses.replace(prg, src=src)) for v, src in sources.items()}
        best = {v: [] for v in launches}
        for _ in range(args.rounds):
            for v, launch in launches.items():
                best[v].append(statistics.median(seconds(launch) for _ in range(3)))
        t = {v: min(s) for v, s in best.items()}
        print(
            f"{name:26s} {'hand-coded' if opts is None else 'searched':10s} "
            + " ".join(f"{t[v] * 1e3:8.2f} ms" for v in ("contract", "unfused", "fma()"))
            + f" {t['unfused'] / t['contract']:10.2f} {t['fma()'] / t['contract']:7.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_command_line(main, "python tools/fusion_cost.py", one_line=(runtime.NoDeviceError,)))
