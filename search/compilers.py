"""search/compilers.py: the search's builds, in helper processes (runtime.Compiler, where a compiler that crashes,
aborts, hangs or builds a program without its kernel fails that build alone): each thread of a search's pool (a
concurrent.futures ThreadPoolExecutor) feeds a batch of rendered candidates, as one program, to a process of its
own, which builds it and answers with the device's binary (a batch that doesn't build is built again kernel by
kernel). compile_all compiles a round's candidates until a deadline (docs/search.md says why builds run in
processes); build_first builds any other kernel the project runs on its own account first."""

import contextlib
import math
import queue
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import runtime
from kernel import Kernel
from render import Program, render
from runtime import COMPILE_TIMEOUT, BuildError, Compiler, build, build_all, ctx_name, device_lock, get_device, own

_compilers: list[Compiler] = []  # the compilers no search is using, kept for the next (a start costs about 0.3 s)
_compilers_lock = threading.Lock()


def build_first(k: Kernel):
    """k's kernel as a Launch of k will run it, built first in its device's helper process (own()): a compiler that
    fails, crashes or hangs on it raises BuildError here, and a later Launch of k finds it built."""
    prg = render(k, runtime.device_limits())
    return build(prg.src, prg.name, own())


def _compile_batch(batch: list[tuple[int, Program]], device_args, compiler=None) -> list[tuple]:
    """Build a batch of rendered candidates of one prelude as one program (runtime.build_all: the compiler's cost of
    a program paid once), then _ready each; where the whole doesn't build, each alone (so that one that doesn't build
    is dropped alone, saying why)."""
    try:
        built = build_all([(prg.src, prg.name) for _, prg in batch], compiler)
    except BuildError:
        return [_compile_candidate(i, prg, device_args, compiler) for i, prg in batch]
    return [_ready(i, prg, kern, device_args) for (i, prg), kern in zip(batch, built)]


def _compile_candidate(i: int, prg: Program, device_args, compiler=None) -> tuple:
    """Build rendered candidate i alone, then _ready: (i, None, why) where it doesn't build."""
    try:
        kern = build(prg.src, prg.name, compiler)
    except Exception as e:  # a candidate that doesn't build is dropped
        return i, None, _why(e)
    return _ready(i, prg, kern, device_args)


def _ready(i: int, prg: Program, kern, device_args) -> tuple:
    """Candidate i's limits checked, and a work-group of it launched on the search's buffers (`device_args`: a Launch's;
    PoCL compiles the work-group function for a local size at its first launch: the timing sees the kernel alone);
    (i, prg, "") or (i, None, why)."""
    try:
        runtime.check_limits(prg, kern=kern)  # a launch past a limit of the device crashes it: not even the warm-up's
    except Exception as e:  # the device can't run it: dropped
        return i, None, _why(e)
    if prg.local_size is not None and not prg.vars and all(kind == "buffer" for _, kind in prg.args):
        with contextlib.suppress(Exception):  # only a warm-up: the main thread times (and may drop) the kernel
            with device_lock:  # a kernel object is shared by every thread that built the same source
                event = kern(get_device().queue, prg.local_size, prg.local_size, *[device_args[a] for a in prg.args])
            event.wait()
    return i, prg, ""


def _why(e: Exception) -> str:
    """Why a candidate was dropped: the exception's kind and its first line."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _batches(kernels: list[Kernel], limits, n: int) -> tuple[list[list[tuple[int, Program]]], list[tuple]]:
    """The kernels rendered, in batches of one prelude (the source before its kernel) that share the work among `n`
    compilers, and (i, None, why) of those that don't render."""
    groups: dict[str, list[tuple[int, Program]]] = {}
    failed = []
    for i, k in enumerate(kernels):
        try:
            prg = render(k, limits)
        except Exception as e:  # a candidate that doesn't render is dropped
            failed.append((i, None, _why(e)))
            continue
        groups.setdefault(prg.src[: prg.src.index("__kernel void")], []).append((i, prg))
    size = max(1, math.ceil(len(kernels) / max(n, 1)))
    return [g[j : j + size] for g in groups.values() for j in range(0, len(g), size)], failed


def compile_all(kernels: list[Kernel], limits, device_args, workers: int, deadline: float, progress) -> list[tuple]:
    """Compile the kernels in `workers` processes (0: here), in batches (_batches), until the deadline: [(number,
    program or None, why)]."""
    device, n = ctx_name(), min(workers, len(kernels))
    with _compilers_lock:  # compilers for this device, the search's own until it gives them back: never shared
        compilers = [c for c in _compilers if c.device == device and not c.ended][:n]
        _compilers[:] = [c for c in _compilers if c not in compilers and not c.ended]
    compilers += [Compiler(device) for _ in range(n - len(compilers))]
    idle = queue.SimpleQueue()  # a thread takes a compiler no other thread is using (None: it builds here)
    for compiler in compilers or [None]:
        idle.put(compiler)

    def compile_batch(batch: list[tuple[int, Program]]) -> list[tuple]:
        compiler = idle.get()
        try:
            return _compile_batch(batch, device_args, compiler)
        finally:
            idle.put(compiler)

    batches, results = _batches(kernels, limits, max(n, 1))
    pool, pending = ThreadPoolExecutor(max(n, 1)), set()
    try:
        pending = {pool.submit(compile_batch, batch) for batch in batches}
        while pending and time.perf_counter() < deadline:
            done, pending = wait(pending, min(deadline - time.perf_counter(), COMPILE_TIMEOUT), FIRST_COMPLETED)
            for f in done:  # each answer said, not only each wait's
                results += f.result()
                progress("compiling", len(results), len(kernels))
        return results
    finally:  # out of time, or Ctrl-C: the compiles still running are ended (their threads end), not waited for
        if len(results) < len(kernels):
            for compiler in compilers:
                compiler.end()
        pool.shutdown(cancel_futures=True)  # but a build in this process: it can't be ended, and is waited for
        with _compilers_lock:
            _compilers.extend(compilers)
