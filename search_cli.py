"""search_cli.py: `python search.py NAME`, the beam search's command line: it searches a demo kernel round by round
(search.search reports each round to a _SearchDisplay), then times the hand-coded and the searched kernel side by
side. search.py runs main() as its entry point; the search itself knows nothing of this module."""

import argparse
import functools
import math
import statistics
import sys
from collections.abc import Sequence

import model
from compilers import build_first
from demo import DEMOS, fit, parse_opt_arg, terminal_width
from kernel import TARGETS, Kernel, KernelOptError, Opt, OptOps, ansilen, ansistrip, optimize, use_color
from runtime import BuildError, cache_dir, get_device, random_inputs, sample_var_vals, time_kernel
from search import SearchError, SearchResult, SearchRound, search


class _SearchDisplay:
    """`python search.py`'s lines, fit to the terminal; on a terminal also a progress line, rewritten in place."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.live, self.width, self.round = self.out.isatty(), terminal_width(self.out), 0
        self.say = functools.partial(print, file=self.out, flush=True)

    def progress(self, phase: str, done: int, total: int) -> None:
        if self.live:
            self.say(f"\r  round {self.round}: {phase} {done}/{total}\033[K", end="")

    def on_round(self, r: SearchRound) -> None:
        if self.live:
            self.out.write("\r\033[K")
        self.round = r.number + 1
        counts = f"round {r.number}: {r.candidates:4d} candidates {r.compiled:4d} compiled {r.timed:4d} timed "
        counts += f"{r.dropped:3d} dropped {r.duplicates:3d} duplicates {r.unbuilt:3d} cut"
        self.line(counts, f"best {_ms(r.best_s)}  {r.seconds:6.1f} s", k=r.best)

    def line(self, *fields: str, k: Kernel, width: int = 0) -> None:
        """Say the fields, k's shape (padded to `width`) and opts, two spaces apart: a field that doesn't fit on the
        line starts the next one."""
        shape = k.colored_shape() if use_color(self.out) else ansistrip(k.colored_shape())
        fields = (*fields, shape + " " * (width - ansilen(shape)), _opts_text(k))
        lines = fit("  " + fields[0], self.width, hang=6)
        for field in fields[1:]:
            if ansilen(lines[-1]) + 2 + ansilen(field) <= self.width:
                lines[-1] += "  " + field
            else:
                lines += fit(" " * 6 + field.lstrip(), self.width, hang=6)
        self.say("\n".join(line.rstrip() for line in lines))


def _ms(t: float) -> str:
    return f"{t * 1e3:9.3f} ms" if math.isfinite(t) else f"{'-':>9s} ms"


def _opts_text(k: Kernel) -> str:
    return ", ".join(str(o) for o in k.applied_opts) or "no opts"


def search_demo(name: str, amt=2, opts: Sequence[Opt] | None = None, target=None, out=None, **options) -> SearchResult:
    """`python search.py`: search a demo kernel round by round, then time the hand-coded and the searched kernel."""
    if name not in DEMOS:
        raise SearchError(f"no demo kernel {name!r}; there are {', '.join(DEMOS)}")
    demo, display = DEMOS[name], _SearchDisplay(out)
    start = Kernel(*demo.build(), opts=TARGETS[target or demo.target])
    for opt in opts or ():
        start.apply_opt(opt)
    samples = sample_var_vals(start)
    var_vals = samples[len(samples) // 2]  # a symbolic kernel is searched at its variables' middle, as tinygrad does
    inputs = random_inputs(start, var_vals=var_vals)
    display.say(f"{name} [{target or demo.target}]: {demo.what}")
    heuristics = " and the heuristics" if not start.applied_opts else ""
    searching = f"beam search, {amt} kept per round, on {get_device().name}, from {_opts_text(start)}{heuristics}"
    display.say("\n".join(fit(searching, display.width)))
    options |= {"on_round": display.on_round, "on_progress": display.progress}
    result = search(start, *inputs, amt=amt, var_vals=var_vals, **options)
    if skipped := model.skipped():  # the model's limits of the device, measured without them
        said = "  not built, so not measured: " + "; ".join(f"{w} ({why})" for w, why in skipped.items())
        display.say("\n".join(fit(said, display.width, hang=6)))
    if result.cached:
        display.say(f"  from the cache ({cache_dir()}): searched before, verified then")
    elif result.finalists:  # how sure: the runner-up's margin against the noise the runoff measured
        runoff = f"runoff:  {result.finalists} fastest, {result.passes} passes in turn: "
        runoff += f"best {result.time_s * 1e3:.3f} ms"
        if result.finalists > 1:
            runoff += f", next +{result.margin:.1%}, noise {result.noise:.1%}" + ("" if result.sure else " (a tie)")
        display.line(runoff, k=result.kernel)
    rows, times = [("hand-coded", optimize(Kernel(*start.ast, opts=start.opts))), ("searched", result.kernel)], {}
    width = max(ansilen(k.colored_shape()) for _, k in rows)
    display.say("")
    for label, k in rows:
        try:  # where the device's compiler can't end this process (a cached answer was never built here)
            build_first(k)
        except BuildError as e:
            display.line(f"{label:10s} not built: {str(e).splitlines()[0]}", k=k, width=width)
            continue
        times[label] = statistics.median(time_kernel(k, *inputs, var_vals=var_vals) for _ in range(3))
        display.line(f"{label:10s} {_ms(times[label])}", k=k, width=width)
    timed = sum(r.timed for r in result.rounds)
    totals = f"search {result.seconds:.1f} s, {timed} kernels timed, {result.dropped} dropped; verified"
    speedup = f"speedup {times['hand-coded'] / times['searched']:.2f}x; " if len(times) == 2 else ""
    display.say(f"  {speedup}{totals}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python search.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s NAME [--beam N] [--opt OP:AXIS:AMT ...] [--target T] [--timeout S] [--no-cache] [--log F]",
        description="Beam-search a demo kernel's opts on the OpenCL device, round by round; then time the hand-coded\n"
        "and the searched kernel side by side (the searched one verified against numpy).",
        epilog="examples:\n  python search.py matmul\n  python search.py matmul --beam 4 --timeout 60\n"
        "  python search.py sum --opt GROUPTOP:0:16\n\nAn opt is OP:AXIS:AMT, "
        f"OP one of {', '.join(o.name for o in OptOps)}. KERNELPY_DEVICE (or PYOPENCL_CTX) chooses the OpenCL device.",
    )
    p.add_argument("name", choices=list(DEMOS), metavar="NAME", help="a demo kernel: " + ", ".join(DEMOS))
    p.add_argument("--beam", type=int, default=2, metavar="N", help="kernels kept per round (2)")
    p.add_argument("--timeout", type=float, metavar="S", help="stop after S seconds with the best so far")
    p.add_argument("--no-cache", action="store_true", help="search again even if the disk cache knows the answer")
    p.add_argument("--log", metavar="FILE", help="append every candidate and time to FILE (tools/replay_search.py)")
    p.add_argument("--opt", action="append", type=parse_opt_arg, metavar="OP:AXIS:AMT", help="start from these opts")
    p.add_argument("--target", choices=list(TARGETS), help="optimize for this target (default: the demo's)")
    args = p.parse_args(argv)
    if args.beam < 1:
        p.error(f"--beam must be at least 1, got {args.beam}")
    try:  # before the device's limits are measured
        if args.log:
            model.check_log(args.log)
    except ValueError as e:
        p.error(f"--log: {e}")
    try:
        options = {"timeout": args.timeout, "cache": not args.no_cache, "log": args.log}
        search_demo(args.name, args.beam, args.opt, args.target, **options)
    except (SearchError, KernelOptError) as e:
        p.error(str(e))
    return 0
