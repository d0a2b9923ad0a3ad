"""Kernels are compiled once: for every batch size (a kernel reads its outer extent at run
time), across functions and signatures (a kernel's source names no graph, so kernels equal
up to their names are one), and across processes (one disk-cache entry per kernel).

Compiles are counted by the CPU backend's own tally (``cpu.stats()``), never timed.
"""

import textwrap
import time

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import cpu
from tracejit.backends.cpu import diskcache
from tracejit.backends.cpu.codegen import generate
from tracejit.backends.cpu.emitter import PARALLEL_MIN_SIZE
from tracejit.passes.contract import SMALL_K

RNG = np.random.default_rng(0)
HIDDEN = 64  # 5000 rows of it are above PARALLEL_MIN_SIZE, 7 rows below
W = RNG.standard_normal((2, HIDDEN)).astype(np.float32)
B = RNG.standard_normal(HIDDEN).astype(np.float32)


def net(x, w, b):
    """A layer, a row softmax, reductions over the batch axis and over everything, and a
    constant that depends on the batch size."""
    h = np.tanh(x @ w + b)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    return p, p.sum(axis=0) / x.shape[0], (h * h).mean()


def loss(w, b, x, y):
    h = np.tanh(x @ w + b)
    return ((h - y) ** 2).mean()


step = tj.value_and_grad(loss, argnums=(0, 1))


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """No kernel compiled in this process yet, and an empty disk cache of our own; no
    earlier test's background compile still running (it would count in ``cpu.stats``)."""
    _background_idle()
    monkeypatch.setattr(cpu.kernels, "_compiled", {})
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRACEJIT_DISK_CACHE", raising=False)
    return tmp_path / "cache"


def _background_idle(timeout: float = 600.0) -> None:
    """Wait until the compile workers run no background task (an earlier test's later
    runner: a long straight-line run can take many seconds), and its results are stored."""
    from tracejit.backends.cpu import workers

    pool, deadline = workers._pool, time.monotonic() + timeout
    while pool is not None and time.monotonic() < deadline and (
            pool.waiting or pool.slots < max(1, workers.cores() - 1)):
        time.sleep(0.05)
    time.sleep(0.1)  # (the last task's callbacks store what it made)


def new_kernels(call) -> int:
    """How many kernels ``call()`` compiled or loaded from disk (not reused in process)."""
    before = cpu.stats()
    call()
    after = cpu.stats()
    return after.compiled - before.compiled + after.loaded - before.loaded


def check(got, want, rtol=2e-5):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


def rows(n: int) -> np.ndarray:
    return RNG.standard_normal((n, 2)).astype(np.float32)


def test_new_batch_sizes_compile_nothing(fresh):
    """Sizes of one regime reuse the first one's kernels: parallel kernels (above
    PARALLEL_MIN_SIZE), then serial ones. Batches of at most SMALL_K rows differ in
    structure (the gradient's ``x.T @ dh`` becomes a loop kernel), and one row is a
    literal extent: those may compile, and must compute right."""
    f = tj.jit(net, backend="cpu")
    g = tj.jit(step, backend="cpu")
    assert 5000 * HIDDEN >= PARALLEL_MIN_SIZE > 100 * HIDDEN * 4 and SMALL_K < 17
    for sizes in ([5000, 4000, 4321], [100, 17, 33], [7, 2, 1]):
        for i, n in enumerate(sizes):
            x = rows(n)
            y = RNG.standard_normal((n, HIDDEN)).astype(np.float32)
            count = new_kernels(lambda x=x, y=y: (check(f(x, W, B), net(x, W, B)),
                                                  g(W, B, x, y)))
            assert count == 0 or n <= SMALL_K or i == 0, (n, count)
            value, grads = g(W, B, x, y)
            np.testing.assert_allclose(value, loss(W, B, x, y), rtol=1e-4)
            check(grads, tj.jit(step, backend="reference")(W, B, x, y)[1], rtol=1e-4)


def test_a_scan_kernel_serves_every_length(fresh):
    """A kernel scanning its only axis reads that extent at run time too."""
    def drawdowns(x):
        walk = np.cumsum(x)
        return np.maximum.accumulate(walk) - walk

    f = tj.jit(drawdowns, backend="cpu")
    assert new_kernels(lambda: f(RNG.standard_normal(5000))) == 1
    x = RNG.standard_normal(7001)
    assert new_kernels(lambda: np.testing.assert_array_equal(f(x), drawdowns(x))) == 0

def test_equal_kernels_are_one_source():
    """Kernels equal up to their names (the same update of two parameters, the same chain
    on two steps' values) have byte-identical sources, naming no graph or line."""
    a = RNG.standard_normal((50, 8)).astype(np.float32)

    def twice(a, i):
        h = np.exp(np.sin(a) * 2.0)[i]  # a gather (a library step) between two kernels
        return np.exp(np.sin(h) * 2.0)

    code = generate(tj.jit(twice).lower(a, np.arange(50)[::-1].copy()).optimized_graph)
    assert code.kernel_names == ["kernel0", "kernel2"]
    assert code.kernels[0] == code.kernels[1]
    assert "twice" not in code.kernels[0] and "test_kernel_reuse" not in code.kernels[0]
    assert "twice" in code.source and code.source.count("def kernel(args)") == 2


def test_a_kernel_shared_by_two_functions_compiles_once(fresh):
    a = RNG.standard_normal((30, 8)).astype(np.float32)

    def chain(x, y):
        return np.tanh(x * y + 0.5) * np.exp(-x * x)

    def chain_then_gather(p, q, i):  # other names, a library step after: the same kernel
        return (np.tanh(p * q + 0.5) * np.exp(-p * p))[i]

    i = np.array([3, 1])
    assert new_kernels(lambda: tj.jit(chain, backend="cpu")(a, a)) == 1
    assert new_kernels(lambda: check([tj.jit(chain_then_gather, backend="cpu")(a, a, i)],
                                     [chain(a, a)[i]])) == 0
    assert new_kernels(lambda: tj.jit(chain, backend="cpu")(a[:7], a[:7])) == 0
    (entry,) = diskcache.entries(fresh)
    assert entry.kernels == 1 and "tanh" in entry.function


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tracejit as tj
    from tracejit.backends import cpu

    @tj.jit(backend="cpu")
    def f(x):
        return np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=0) / x.shape[0]

    outs = [f(np.linspace(-1, 1, 16 * n, dtype=np.float32).reshape(n, 16)).tolist()
            for n in (9, 5)]
    print(json.dumps({"outs": outs, "numba": "numba" in sys.modules,
                      **vars(cpu.stats())}, default=str))
""")


def test_a_new_process_loads_every_batch_size_from_disk(fresh_processes):
    (first, _), (second, _) = fresh_processes(SCRIPT, TRACEJIT_MIN_KERNEL_SIZE="0")
    assert first["compiled"] >= 1 and first["reused"] == first["compiled"]  # 5 rows reused
    assert second["compiled"] == 0 and second["loaded"] == first["compiled"]
    assert not second["numba"]  # (the first may have compiled in worker processes)
    assert second["outs"] == first["outs"]
