"""Compile kernels in worker processes: several at once, and without stopping the caller.

Numba compiles under the GIL and its own global lock, so threads cannot compile two
kernels at once, nor compile while the caller's Python runs. Worker processes can. A
worker compiles a kernel source and saves it to the disk cache (whose entries are written
atomically, so a worker killed mid-compile leaves nothing half-written); the caller then
loads the shared library from there, without importing Numba itself.

Workers are started on first use (a ``python`` running :func:`serve`, at a lower
scheduling priority so that a caller running meanwhile keeps its core), stay up for later
signatures, and are killed when the process exits. A task travels as one JSON line each
way over the worker's stdin and stdout; one driver thread per worker feeds it tasks from
a shared queue and settles their futures.
"""

from __future__ import annotations

import atexit
import collections
import gc
import json
import os
import queue
import subprocess
import sys
import threading
import traceback
from concurrent.futures import Future
from pathlib import Path

from ...config import cores

NICE = 10  # workers' priority below the caller's: a background compile must not starve it


# A worker's program. It needs this package's compile modules (compiler, diskcache, native,
# abi, math), not the backend its __init__ defines nor the IR that imports (~50 ms of a
# worker's start, a third of it): the two package modules are made without running them.
_BOOT = """
import importlib.machinery, importlib.util, sys
import tracejit
parent = tracejit
for name in ("tracejit.backends", "tracejit.backends.cpu"):
    spec = importlib.machinery.PathFinder.find_spec(name, parent.__path__)
    parent = sys.modules[name] = importlib.util.module_from_spec(spec)
from tracejit.backends.cpu.workers import serve
serve()
"""


class WorkerFailed(RuntimeError):
    """A worker could not compile a kernel (its traceback is the message), or died."""


class Pool:
    """``workers`` compile processes fed from one queue of tasks. Background tasks (a
    caller that is running meanwhile) occupy at most one worker fewer than there are cores:
    the caller keeps a core, and its compile is not split four ways on the one left (on 2
    cores the two-moons kernels arrived after 2.3 s with one worker, 3.0 s with two)."""

    def __init__(self, workers: int):
        self.pid = os.getpid()  # a forked child must not share its parent's pipes
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()  # what a free worker may take
        self.processes: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.closed = False  # set by close: no worker is started afterwards
        self.slots = max(1, cores() - 1)  # background tasks that may run now
        self.waiting: collections.deque = collections.deque()  # background tasks beyond
        for _ in range(workers):
            threading.Thread(target=self._drive, name="tracejit-compile", daemon=True).start()

    def submit(self, source: str, cache: Path, background: bool = False) -> Future:
        """A future of the directory, in the disk cache at ``cache``, holding ``source``'s
        compiled kernel; ``background``: for a caller that is not waiting."""
        future: Future = Future()
        item = ({"source": source, "cache": str(cache)}, future, background)
        with self.lock:
            if background and not self.slots:
                self.waiting.append(item)  # queued when a background task finishes
                return future
            self.slots -= background
        self.tasks.put(item)
        return future

    def _drive(self) -> None:
        """Feed one worker process tasks, one at a time, starting it (again) as needed.
        A finished task's future is settled after the worker has its next task, if one is
        waiting: what the caller does with a kernel (loading it, building the trampoline
        its first load needs, waiting for the GIL) does not keep the worker idle."""
        process, item = None, self.tasks.get()
        while True:
            task, future, background = item
            reply = None
            try:
                process, reply = self._run(process, task, future)
            finally:
                if background:  # its slot passes to the next background task, if any
                    with self.lock:
                        if self.waiting:
                            self.tasks.put(self.waiting.popleft())
                        else:
                            self.slots += 1
            try:
                item = self.tasks.get_nowait()
            except queue.Empty:
                item = None
            if item is not None and process is not None:
                process = self._send(process, item)
            self._settle(future, reply)
            if item is None:
                item = self.tasks.get()

    def _run(self, process: subprocess.Popen | None, task: dict,
             future: Future) -> tuple[subprocess.Popen | None, dict | Exception | None]:
        """Run ``task`` on ``process`` (started if needed; or sent to it already, ``task``
        marked so by ``_send``): the process to use next (None: start another) and the
        reply to settle ``future`` with (None: the future was cancelled; a task sent ahead
        still has its reply read, so that the next one reads its own)."""
        sent = task.pop("sent", False)
        running = future.set_running_or_notify_cancel()
        if not (running or sent):
            return process, None
        if self.closed:  # the process is exiting (or a test closed the pool)
            return None, WorkerFailed("the compile workers are closed")
        try:
            if not sent:
                if process is None or process.poll() is not None:
                    process = self._start()
                process.stdin.write(json.dumps(task) + "\n")
                process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                raise WorkerFailed(f"the compile worker exited ({process.wait()})")
            return process, json.loads(line) if running else None  # (cancelled: dropped)
        except (OSError, ValueError, WorkerFailed) as e:
            return None, e if isinstance(e, WorkerFailed) else WorkerFailed(str(e))

    def _send(self, process: subprocess.Popen, item: tuple) -> subprocess.Popen | None:
        """Hand ``item``'s task to ``process`` ahead of its turn (``_run`` then only reads
        the reply); the process, or None where it could not take it (``_run`` then starts
        another and sends the task again)."""
        task = item[0]
        if self.closed or process.poll() is not None:
            return None
        try:
            process.stdin.write(json.dumps(task) + "\n")
            process.stdin.flush()
        except OSError:
            return None
        task["sent"] = True
        return process

    @staticmethod
    def _settle(future: Future, reply: dict | Exception | None) -> None:
        if reply is None:
            return
        if isinstance(reply, Exception):
            future.set_exception(reply)
        elif "error" in reply:
            future.set_exception(WorkerFailed(reply["error"]))
        else:
            future.set_result(Path(reply["directory"]))

    def _start(self) -> subprocess.Popen:
        """A new worker process (WorkerFailed once the pool is closed)."""
        src = str(Path(__file__).resolve().parents[3])  # the directory holding tracejit/
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": src if not path else src + os.pathsep + path}
        process = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        with self.lock:
            self.processes.append(process)
            if self.closed:  # closed while this one started: it must not outlive the pool
                process.kill()
                raise WorkerFailed("the compile workers are closed")
        return process

    def close(self) -> None:
        """Kill the workers (a kernel they were compiling is simply not saved); tasks still
        queued fail."""
        with self.lock:
            self.closed = True
            for p in self.processes:
                if p.poll() is None:
                    p.kill()
            self.processes.clear()


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool(workers: int) -> Pool:
    """The process's pool of ``workers`` compile workers (made on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = Pool(max(workers, 1))
            atexit.register(_pool.close)
        return _pool


def serve() -> None:
    """A worker's loop: compile each source read from stdin into the disk cache named with
    it, reply with the entry's directory (or the traceback) on stdout."""
    try:
        os.nice(NICE)
    except OSError:
        pass
    replies = os.fdopen(os.dup(1), "w")  # the protocol's channel; anything else that
    os.dup2(2, 1)  # writes to stdout (a library's print) goes to stderr instead
    sys.stdout = sys.stderr
    # Numba imports SciPy when it starts and SciPy's LAPACK bindings on its first compile,
    # ~0.2 s of a worker's start-up; kernels never call SciPy, and Numba does without it.
    sys.modules.setdefault("scipy", None)
    from .compiler import build_into_cache, warm_up

    warm_up()
    # What is alive now (Numba's heap) lives as long as the worker: frozen, the collector
    # skips it. Each task's garbage is collected after its reply, where a collection of
    # the whole heap would take 40-90 ms, ~5 ms frozen.
    gc.freeze()
    for line in sys.stdin:
        try:
            task = json.loads(line)
            os.environ["TRACEJIT_CACHE_DIR"] = task["cache"]  # the caller's, now
            reply = {"directory": str(build_into_cache(task["source"]))}
        except Exception:
            reply = {"error": traceback.format_exc()}
        try:
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
        except BrokenPipeError:  # the caller is gone: so is the reason to compile
            return
        gc.collect()
        gc.freeze()

