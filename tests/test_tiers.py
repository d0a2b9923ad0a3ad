"""Tiered execution: ``compile="background"`` answers on the reference interpreter while
the kernels compile in worker processes, then switches to them.

Each test waits for the switch with ``wait_compiled`` (never a sleep or a timing).
"""

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends.cpu import diskcache, native, workers
from tracejit.config import cores
from tracejit.errors import InvalidArgument

WAIT = 120  # seconds: a cold worker imports Numba and compiles; CI machines are slow


def step(x, w):
    h = np.tanh(x @ w + 0.5)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), (h * h).sum(axis=0)


def args(rows=300):
    rng = np.random.default_rng(0)
    return rng.standard_normal((rows, 3)), rng.standard_normal((3, 40))


def kinds(f) -> set[str]:
    """What the signatures of ``f`` run now: "interpreter" or "kernels"."""
    return {"interpreter" if e.interpreting else "kernels" for e in f._cache.values()}


@pytest.fixture(autouse=True)
def nothing_compiled_yet(tmp_path, monkeypatch):
    """Every test starts with no kernel in memory or on disk: each has something to compile
    in the background (kernels are shared across signatures and functions otherwise)."""
    from tracejit.backends.cpu import kernels

    monkeypatch.setattr(kernels, "_compiled", {})
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))


def by_workers() -> int:
    from tracejit.backends import cpu

    return cpu.stats().in_workers


@pytest.fixture
def compile_log(caplog):
    caplog.set_level(logging.INFO, logger="tracejit")
    return caplog


def test_first_calls_run_the_interpreter_then_the_kernels(compile_log):
    workers_made = by_workers()
    f = tj.jit(step, compile="background")
    x, w = args()
    want = step(x, w)
    first = f(x, w)
    for got, ref in zip(first, want, strict=True):  # the interpreter is NumPy: bit for bit
        np.testing.assert_array_equal(got, ref)
    assert f.wait_compiled(WAIT)
    assert kinds(f) == {"kernels"}
    for got, ref in zip(f(x, w), want, strict=True):  # kernels: within their ULP bounds
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    messages = [r.getMessage() for r in compile_log.records]
    assert any("runs compiled kernels now" in m for m in messages), messages
    assert f.cache_info().misses == 1
    assert by_workers() > workers_made  # not compiled in this process


def test_the_switch_comes_before_the_search_for_a_faster_runner(compile_log, monkeypatch):
    """The caller switches to the kernels as soon as they are bound; only then is a
    faster runner (its small exact kernels compiled) looked for, which the signature
    switches to in turn, or, where there is none, the search ends with nothing to wait for."""
    from tracejit.backends import cpu

    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)
    order = []
    looked_for = cpu._later

    def later(graph, faster):
        order.append(("faster" if faster else "first", kinds(f)))
        return looked_for(graph, faster)

    monkeypatch.setattr(cpu, "_later", later)
    x = np.linspace(-1, 1, 5000).reshape(50, 100)
    # a kernel worth compiling at once (exp), and a small exact one (x * 2 + 1 on 50 values)
    f = tj.jit(lambda x: (np.exp(x * x - 0.5) + 1, x[0] * 2 + 1), compile="background")
    f(x)
    assert f.wait_compiled(WAIT)
    assert order == [("first", set()), ("faster", {"kernels"})]
    (entry,) = f._cache.values()
    switches = [r for r in compile_log.records if "runs compiled kernels now" in r.getMessage()]
    assert len(switches) == 2  # the first kernels, then the small one compiled
    assert [s.ops for s in entry.runner.steps if s.name.startswith("kernel")] \
        == ["multiply, subtract, exp, add", "multiply, add"]
    g = tj.jit(lambda x: np.exp(x * x + 0.5) - 1, compile="background")  # a new kernel
    g(x)
    assert kinds(g) == {"interpreter"}
    assert g.wait_compiled(WAIT) and kinds(g) == {"kernels"}
    (entry,) = g._cache.values()
    assert entry.runner.faster.result() is None  # looked for after the switch: none


def test_a_setting_changed_while_the_faster_runner_compiles_leaves_it_whole(monkeypatch):
    """The faster runner binds the kernels compiled from the code generated when it was
    asked for: generated again once they were ready, after ``min_kernel_size`` changed
    (as one test after another may change it), the code had other kernels than those
    compiled, and the switch failed (``zip() argument 2 is shorter``)."""
    from concurrent.futures import Future

    from tracejit.backends import cpu

    def stats(x):  # (the example of docs/guide/unchanged.md whose switch failed so)
        return np.median(x, axis=0), np.cumsum(x, axis=1)[:, -1], np.linalg.norm(x, 2)

    x = np.arange(12.0).reshape(4, 3)
    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)
    graph = tj.jit(stats, backend="cpu").lower(x).optimized_graph
    asked: list = []
    compiled: Future = Future()
    monkeypatch.setattr(cpu.kernels, "get_later", lambda sources: asked.append(sources) or
                        compiled)
    faster = cpu._later(graph, True)
    monkeypatch.setattr(tj.config, "min_kernel_size", 0)  # every kernel compiled, now
    compiled.set_result(cpu.kernels.get(asked[0]))
    runner = faster.result(WAIT)
    for got, want in zip(runner.fn(x), stats(x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-15)


def test_sync_mode_and_check_never_run_the_interpreter(monkeypatch):
    monkeypatch.setattr(tj.config, "compile", "background")
    x, w = args()
    for f in (tj.jit(step, compile="sync"), tj.jit(step, check=True)):
        f(x, w)
        assert kinds(f) == {"kernels"}
        assert f.wait_compiled(0)  # nothing pending


def test_the_default_comes_from_config(monkeypatch):
    monkeypatch.setattr(tj.config, "compile", "background")
    f = tj.jit(step)
    f(*args())
    assert kinds(f) == {"interpreter"}
    assert f.wait_compiled(WAIT)
    assert kinds(f) == {"kernels"}


def test_an_unknown_mode_is_refused():
    with pytest.raises(InvalidArgument, match="compile must be one of"):
        tj.jit(step, compile="eager")


def _gather(x, idx):
    return np.exp(x[idx]) * 2


@pytest.mark.parametrize("bad", [[0, 7], [-6, 0]])
def test_errors_are_raised_the_same_way_in_both_tiers(bad):
    f = tj.jit(_gather, compile="background")
    x, good = np.linspace(0, 1, 5), np.array([4, -5])
    errors = []
    f(x, good)
    assert kinds(f) == {"interpreter"}
    for _ in range(2):  # on the interpreter, then on the kernels
        np.testing.assert_allclose(f(x, good), _gather(x, good), rtol=1e-15)
        with pytest.raises(tj.errors.IndexOutOfBounds) as info:
            f(x, np.array(bad))
        errors.append((type(info.value), info.value.location))
        assert f.wait_compiled(WAIT)
    assert kinds(f) == {"kernels"}
    assert errors[0] == errors[1]
    assert errors[0][1].lineno == _gather.__code__.co_firstlineno + 1


def test_calls_from_many_threads_across_the_switch():
    f = tj.jit(step, compile="background")
    x, w = args(500)
    want = step(x, w)
    f(x, w)
    assert kinds(f) == {"interpreter"}  # the threads start before the switch
    failures = []
    stop = threading.Event()

    def caller():
        try:
            while not stop.is_set():
                for got, ref in zip(f(x, w), want, strict=True):
                    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
        except Exception as e:  # pragma: no cover - reported below
            failures.append(e)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    compiled = f.wait_compiled(WAIT)
    for _ in range(20):  # keep calling on the kernels for a while
        f(x, w)
    stop.set()
    for t in threads:
        t.join()
    assert compiled and not failures, failures
    assert kinds(f) == {"kernels"}
    assert f.cache_info().misses == 1  # every thread shared the one entry


def test_a_failed_background_compile_keeps_the_interpreter(monkeypatch, compile_log):
    from concurrent.futures import Future

    from tracejit.backends import cpu

    def broken(graph):
        future = Future()
        future.set_exception(workers.WorkerFailed("simulated: Numba crashed"))
        return future

    monkeypatch.setattr(cpu, "compile_later", broken)
    f = tj.jit(step, compile="background")
    x, w = args()
    for _ in range(2):
        for got, ref in zip(f(x, w), step(x, w), strict=True):
            np.testing.assert_array_equal(got, ref)
    assert not f.wait_compiled(1)
    assert kinds(f) == {"interpreter"}
    assert any("keeps running on the interpreter" in r.getMessage() and "simulated" in
               r.getMessage() for r in compile_log.records)


def test_a_worker_error_and_a_killed_worker_fail_only_their_task():
    p = workers.Pool(1)
    try:
        bad = p.submit("this is not python(", diskcache.cache_dir())
        with pytest.raises(workers.WorkerFailed, match="SyntaxError"):
            bad.result(WAIT)
        slow = p.submit("import time\ntime.sleep(600)", diskcache.cache_dir())  # never ends
        while not slow.running():
            threading.Event().wait(0.01)
        (process,) = p.processes
        process.kill()
        with pytest.raises(workers.WorkerFailed, match="exited|Broken pipe"):
            slow.result(WAIT)
        again = p.submit("also not python(", diskcache.cache_dir())  # a new worker takes it
        with pytest.raises(workers.WorkerFailed, match="SyntaxError"):
            again.result(WAIT)
        assert len(p.processes) == 2
    finally:
        p.close()


def test_a_worker_has_its_next_task_before_the_caller_handles_the_last(tmp_path):
    """The caller's handling of a finished kernel (loading it, waiting for the GIL) must
    not leave the worker idle: the next task is sent first. A task sent ahead and then
    cancelled still has its reply read, so that each later task gets its own."""
    p = workers.Pool(1)
    started = tmp_path / "b-started"
    task = "import pathlib, time\n{}raise RuntimeError('task {}')"
    try:
        a = p.submit(task.format("time.sleep(0.5)\n", "a"), diskcache.cache_dir())
        b = p.submit(task.format(f"pathlib.Path({str(started)!r}).touch()\n", "b"),
                     diskcache.cache_dir())
        c = p.submit(task.format("", "c"), diskcache.cache_dir())
        seen = []

        def on_a(_):  # runs in the driver thread, as the kernels' callbacks do
            for _ in range(6000):  # (60 s at most)
                if started.exists():
                    break
                threading.Event().wait(0.01)
            seen.append(started.exists())
            b.cancel()  # b is on the worker, but not yet running as far as its future knows

        a.add_done_callback(on_a)
        with pytest.raises(workers.WorkerFailed, match="task a"):
            a.result(WAIT)
        with pytest.raises(workers.WorkerFailed, match="task c"):
            c.result(WAIT)
        assert seen == [True] and b.cancelled()
        assert len(p.processes) == 1  # b's reply was read: no worker was replaced
    finally:
        p.close()


def test_a_worker_imports_the_compile_modules_only():
    """A worker's start is on the background compile's critical path: it runs the compile
    modules of the CPU package, not the backend and the IR that its package modules would
    import. (A task's module runs in the worker before Numba compiles it.)"""
    p = workers.Pool(1)
    try:
        report = p.submit("import sys\nraise RuntimeError(' '.join(sorted(sys.modules)))",
                          diskcache.cache_dir())
        with pytest.raises(workers.WorkerFailed) as failed:
            report.result(WAIT)
    finally:
        p.close()
    loaded = set(str(failed.value).split("RuntimeError: ")[-1].split())
    assert {"tracejit.backends.cpu.compiler", "tracejit.backends.cpu.diskcache"} <= loaded
    assert not loaded & {"tracejit.ir", "tracejit.backends.base", "tracejit.profiler",
                         "tracejit.backends.cpu.kernels", "scipy.linalg"}


_EXITS_WHILE_COMPILING = textwrap.dedent("""
    import numpy as np, tracejit as tj
    {step}
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((300, 3)), rng.standard_normal((3, 40))
    f = tj.jit(step, compile="background")
    f(x, w)  # kernels start compiling in the workers
    print("exiting")  # and the process leaves without waiting for them
""")


def test_a_process_that_exits_while_compiling_leaves_no_broken_entry(tmp_path):
    env = {**os.environ, "TRACEJIT_CACHE_DIR": str(tmp_path)}
    code = _EXITS_WHILE_COMPILING.format(step=textwrap.dedent(_source(step)))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=WAIT)
    assert done.returncode == 0 and "exiting" in done.stdout, done.stderr
    for entry in diskcache.entries(tmp_path):  # saved completely, or not at all
        index = entry.directory / "index.json"
        if index.exists():
            saved = json.loads(index.read_text())
            library = entry.directory / saved["library"]
            assert native.digest(library) == saved["sha256"]
    # and a later process compiles what is missing and runs
    check = _EXITS_WHILE_COMPILING.replace('compile="background"', 'compile="sync"')
    again = subprocess.run([sys.executable, "-c", check.format(step=textwrap.dedent(
        _source(step)))], env=env, capture_output=True, text=True, timeout=WAIT)
    assert again.returncode == 0, again.stderr


def _source(fn) -> str:
    import inspect

    return inspect.getsource(fn)


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    if not counts:
        pytest.skip("no BLAS that threadpoolctl knows is loaded: nothing to hold back")
    return max(counts)


def test_blas_leaves_a_core_to_the_workers_while_they_compile():
    from tracejit.backends.cpu import blas

    before = _blas_threads()
    blas.hold_back()
    blas.hold_back()  # two signatures compiling at once
    held = _blas_threads()
    blas.release()
    assert _blas_threads() == held  # one is still compiling
    blas.release()
    assert held == max(1, min(before, cores() - 1))
    assert _blas_threads() == before


def test_blas_threads_come_back_after_a_background_compile():
    from tracejit.backends.cpu import blas

    before = _blas_threads()
    f = tj.jit(step, compile="background")
    f(*args(333))
    assert kinds(f) == {"interpreter"}
    assert f.wait_compiled(WAIT)
    assert _blas_threads() == before and blas._holders == 0


@pytest.mark.parametrize("setting", ["TRACEJIT_DISK_CACHE=0", "compile_workers=0"])
def test_without_workers_background_mode_compiles_in_the_caller(setting, monkeypatch):
    """The workers hand kernels back through the disk cache: with it off, or with no
    workers, a background compile is a synchronous one (never an interpreter forever)."""
    name, value = setting.split("=")
    if name == "compile_workers":
        monkeypatch.setattr(tj.config, name, int(value))
    else:
        monkeypatch.setenv(name, value)
    f = tj.jit(step, compile="background")
    x, w = args()
    for got, ref in zip(f(x, w), step(x, w), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    assert kinds(f) == {"kernels"} and f.wait_compiled(0)


def test_background_compiles_leave_a_worker_to_the_caller(monkeypatch):
    """On 2 cores one background task runs at a time; a synchronous compile still finds a
    free worker instead of queueing behind the background ones."""
    monkeypatch.setattr(workers, "cores", lambda: 2)
    p = workers.Pool(2)
    cache = diskcache.cache_dir()
    try:
        slow = [p.submit("import time\ntime.sleep(600)", cache, background=True)
                for _ in range(2)]
        while not slow[0].running():
            threading.Event().wait(0.01)
        urgent = p.submit("not python(", cache)
        with pytest.raises(workers.WorkerFailed, match="SyntaxError"):
            urgent.result(WAIT)
        assert not slow[1].running() and not slow[1].done()
    finally:
        p.close()


def rnn(h, w, xs):
    def body(h, x):
        h = np.tanh(h @ w + x)
        return h, h.sum()

    return tj.lax.scan(body, h, xs)


def rnn_args():
    rng = np.random.default_rng(1)
    return (rng.standard_normal((4, 6)), 0.3 * rng.standard_normal((6, 6)),
            rng.standard_normal((9, 4, 6)))


def test_a_loop_compiles_in_the_background_too(compile_log):
    """A graph whose work is all in a loop body has kernels to wait for: the loop's driver.
    The first call runs on the interpreter, and the call after the switch compiles nothing
    (the driver came from the workers with the rest)."""
    from tracejit.backends import cpu

    f = tj.jit(rnn, compile="background")
    h, w, xs = rnn_args()
    want = rnn(h, w, xs)  # lax.scan outside jit: the reference answer, compiled on use
    first = f(h, w, xs)
    assert kinds(f) == {"interpreter"}
    assert f.wait_compiled(WAIT)
    compiled_before = cpu.stats().compiled - cpu.stats().in_workers
    later = f(h, w, xs)
    assert cpu.stats().compiled - cpu.stats().in_workers == compiled_before
    for a, b, c in zip(first, later, want, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b, c, rtol=1e-12, atol=1e-12)
    messages = [r.getMessage() for r in compile_log.records]
    assert any("runs compiled kernels now" in m for m in messages), messages


def test_a_sync_compile_counts_its_loops_kernels(compile_log):
    """With compile="sync" a loop's kernels compile with the graph's (in the workers where
    there are several) and the compile log counts them, not the first call's time."""
    f = tj.jit(rnn, compile="sync")
    f(*rnn_args())
    (message,) = [r.getMessage() for r in compile_log.records if "compiled rnn" in r.getMessage()]
    assert "no kernels" not in message and "kernel" in message, message

