"""compilers.py: search.py's builds, in helper processes: each thread of a search's pool (a concurrent.futures
ThreadPoolExecutor) renders a candidate and feeds its OpenCL C to a process of its own (_Compiler), which builds it
and answers with the device's binary; a build that never ends is killed (docs/search.md says why builds run in
processes). compile_all compiles a round's candidates until a deadline."""

import contextlib
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import pyopencl as cl

import runtime
from kernel import Kernel
from runtime import BuildError, build, device_lock, get_device, render

COMPILE_TIMEOUT = 120  # seconds without any compile finishing before the rest are given up on


# -- compiling candidates: in helper processes, each fed by a thread of this one ---------------------------------
_COMPILER_CODE = "import sys; sys.path.insert(0, {here!r}); import compilers; compilers._compile_worker()"


class _Compiler:
    """A process that builds OpenCL sources for one device (PYOPENCL_CTX's "platform:device"), one at a time, and
    answers with their binaries; in processes, builds run side by side and a stuck one can be killed (docs/search.md).
    It starts at its first source (again after a crash, never after end()), and ends when its input closes."""

    def __init__(self, device: str | None = None):
        self.device, self.proc, self.lock, self.ended = device or _device_choice(), None, threading.Lock(), False

    def __call__(self, src: str) -> bytes:
        with self.lock:  # a second thread's source waits: two sent at once, two answers could be read crosswise
            if not self.ended and (self.proc is None or self.proc.poll() is not None):
                code = _COMPILER_CODE.format(here=os.path.dirname(os.path.abspath(__file__)))
                env = {k: v for k, v in os.environ.items() if k != "KERNELPY_DEVICE"} | {"PYOPENCL_CTX": self.device}
                # a session of its own: Ctrl-C is the search's alone; silent: a build's log comes in its answer
                pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
                self.proc = subprocess.Popen([sys.executable, "-c", code], **pipes, env=env, start_new_session=True)
            if self.ended:  # before, or while this thread started a process: no answer would come
                self.end()
                raise ChildProcessError("the search ended its compiles")
            try:
                pickle.dump(src, self.proc.stdin)
                self.proc.stdin.flush()
                source, built, answer = pickle.load(self.proc.stdout)
            except (OSError, EOFError, pickle.UnpicklingError, ValueError):  # it ended: a crash, or end()
                self.end(for_good=False)
                raise ChildProcessError(f"the compiler's process ended (exit status {self.proc.returncode})") from None
        if source != src:
            self.end(for_good=False)
            raise ChildProcessError("the compiler's process answered for another source")
        if not built:
            raise BuildError(answer)
        return answer

    def end(self, for_good: bool = True) -> None:
        """Kill the process: for good when the search gives up on its compiles, else until the next source."""
        self.ended = self.ended or for_good
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def _device_choice() -> str:
    """PYOPENCL_CTX's name ("platform:device") for this process's device: what its compiler processes build for."""
    d = get_device().ctx.devices[0]
    return next(f"{n}:{p.get_devices().index(d)}" for n, p in enumerate(cl.get_platforms()) if p == d.platform)


def _compile_worker() -> None:
    """A _Compiler's process: answers each source on stdin with (source, True, binary) or (source, False, log)."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the driver prints goes to stderr, never among the answers
    ctx = get_device().ctx
    with contextlib.suppress(EOFError):
        while True:
            src = pickle.load(sys.stdin.buffer)
            try:
                answer = (src, True, cl.Program(ctx, src).build().get_info(cl.program_info.BINARIES)[0])
            except cl.Error as e:
                answer = (src, False, str(e))
            pickle.dump(answer, answers)
            answers.flush()


_compilers: list[_Compiler] = []  # the compilers no search is using, kept for the next (a start costs about 0.3 s)
_compilers_lock = threading.Lock()


def _compile_candidate(i: int, k: Kernel, limits: tuple[int, list[int]], ones, compiler=None) -> tuple:
    """Render and build candidate i, then launch a work-group of it on `ones` (PoCL compiles the work-group function for
    a local size at its first launch: the timing sees the kernel alone); returns (i, program or None, why)."""
    try:
        prg = render(k, limits)
        kern = build(prg.src, prg.name, compiler)
        runtime.check_limits(prg, kern=kern)  # a launch past a limit of the device crashes it: not even the warm-up's
    except Exception as e:  # a candidate that doesn't render or build, or that the device can't run, is dropped
        return i, None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if prg.local_size is not None and not prg.vars and all(kind == "buffer" for _, kind in prg.args):
        with contextlib.suppress(Exception):  # only a warm-up: the main thread times (and may drop) the kernel
            with device_lock:  # a kernel object is shared by every thread that built the same source
                event = kern(get_device().queue, prg.local_size, prg.local_size, *[ones[idx] for idx, _ in prg.args])
            event.wait()
    return i, prg, ""


def compile_all(kernels: list[Kernel], limits, ones, workers: int, deadline: float, progress) -> list[tuple]:
    """Compile the kernels in `workers` processes (0: here) until the deadline: [(number, program or None, why)]."""
    device, n = _device_choice(), min(workers, len(kernels))
    with _compilers_lock:  # compilers for this device, the search's own until it gives them back: never shared
        compilers = [c for c in _compilers if c.device == device and not c.ended][:n]
        _compilers[:] = [c for c in _compilers if c not in compilers and not c.ended]
    compilers += [_Compiler(device) for _ in range(n - len(compilers))]
    idle = queue.SimpleQueue()  # a thread takes a compiler no other thread is using (None: it builds here)
    for compiler in compilers or [None]:
        idle.put(compiler)

    def compile_one(i: int, k: Kernel) -> tuple:
        compiler = idle.get()
        try:
            return _compile_candidate(i, k, limits, ones, compiler)
        finally:
            idle.put(compiler)

    pool, results, pending = ThreadPoolExecutor(max(n, 1)), [], set()
    try:
        pending = {pool.submit(compile_one, i, k) for i, k in enumerate(kernels)}
        while pending and time.perf_counter() < deadline:
            done, pending = wait(pending, min(deadline - time.perf_counter(), COMPILE_TIMEOUT), FIRST_COMPLETED)
            for f in done:  # each answer said, not only each wait's
                results.append(f.result())
                progress("compiling", len(results), len(kernels))
            if not done and time.perf_counter() < deadline:  # stuck: ended below
                answered, why = {r[0] for r in results}, f"no answer from the compiler in {COMPILE_TIMEOUT} s"
                return results + [(i, None, why) for i in range(len(kernels)) if i not in answered]
        return results
    finally:  # stuck, out of time, or Ctrl-C: the compiles still running are ended (their threads end), not waited for
        if len(results) < len(kernels):
            for compiler in compilers:
                compiler.end()
        pool.shutdown(cancel_futures=True)  # but a build in this process: it can't be ended, and is waited for
        with _compilers_lock:
            _compilers.extend(compilers)
