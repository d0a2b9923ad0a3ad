"""Loops on Dask arrays (issue 40): ``lax.scan`` stacking its outputs, ``fori_loop``,
``while_loop`` and a Python ``for`` loop give NumPy's answer.

A loop node's results are a tuple of arrays of different shapes; the Dask backend runs
the loop as one task over whole arrays and makes each result a Dask array of its own
(it used to stack the tuple with ``np.asarray``: "setting an array element with a
sequence"). Each program is compared with a plain NumPy loop and with the same jitted
function on NumPy arrays, on Dask's default threaded scheduler and on the
``LocalCluster`` of worker processes of ``test_dask.py`` (its fixture).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit import lax
from tracejit.errors import RechunkWarning

da = pytest.importorskip("dask.array", reason="Dask is in the test extra")
dask = pytest.importorskip("dask")
pytest.importorskip("distributed")

from test_dask import client, done  # noqa: E402, F401  (the cluster fixture)

X = np.random.default_rng(4).random((12, 6))


def stacked_scan(x):
    def step(c, xi):
        c = c * 0.5 + xi
        return c, c * 2
    c, ys = lax.scan(step, np.zeros(x.shape[1]), x)
    return c, ys + 1


def stacked_scan_numpy(x):
    c, ys = np.zeros(x.shape[1]), []
    for xi in x:
        c = c * 0.5 + xi
        ys.append(c * 2)
    return c, np.stack(ys) + 1


def reversed_scan_of_sums(x):
    """A reverse scan whose carry starts from a chunked reduction; a scalar per step."""
    c, ys = lax.scan(lambda c, xi: (c + xi, (c * xi).sum()), x.sum(axis=0), x, reverse=True)
    return c, ys


def reversed_scan_of_sums_numpy(x):
    c, ys = x.sum(axis=0), np.empty(len(x))
    for t in range(len(x) - 1, -1, -1):
        ys[t] = (c * x[t]).sum()
        c = c + x[t]
    return c, ys


def fori(x):
    return lax.fori_loop(0, 5, lambda i, c: c * 0.5 + i, x) - x


def fori_numpy(x):
    c = x
    for i in range(5):
        c = c * 0.5 + i
    return c - x


def while_doubling(x):
    n, t = lax.while_loop(lambda c: c[1] < 1e3, lambda c: (c[0] + 1, c[1] * 2 + 1), (0, x.sum()))
    return n, x * t


def while_doubling_numpy(x):
    n, t = 0, x.sum()
    while t < 1e3:
        n, t = n + 1, t * 2 + 1
    return n, x * t


LOOPS = [(stacked_scan, stacked_scan_numpy), (reversed_scan_of_sums, reversed_scan_of_sums_numpy),
         (fori, fori_numpy), (while_doubling, while_doubling_numpy)]


def compare(fn, plain, compute):
    """``fn`` jitted on Dask chunks of ``X``, computed by ``compute``, against the same
    jitted function on NumPy arrays and the plain NumPy loop."""
    f = tj.jit(fn)
    with warnings.catch_warnings():  # (the loop gathers the chunks: one task)
        warnings.simplefilter("ignore", RechunkWarning)
        lazy = f(da.from_array(X, chunks=(4, 3)))
    lazy = lazy if isinstance(lazy, tuple) else (lazy,)
    assert all(isinstance(o, da.Array) for o in lazy)
    got = compute(*lazy)
    for results in (f(X), plain(X)):
        results = results if isinstance(results, tuple) else (results,)
        for g, want in zip(got, results, strict=True):
            assert np.shape(g) == np.shape(want)
            assert np.asarray(g).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(g, want, rtol=1e-12)


@pytest.mark.parametrize("fn, plain", LOOPS, ids=[f.__name__ for f, _ in LOOPS])
def test_loops_on_the_threaded_scheduler(fn, plain):
    compare(fn, plain, lambda *xs: dask.compute(*xs, scheduler="threads"))


@pytest.mark.parametrize("fn, plain", LOOPS[::2], ids=[f.__name__ for f, _ in LOOPS[::2]])
def test_loops_on_a_cluster_of_worker_processes(client, fn, plain):  # noqa: F811
    compare(fn, plain, lambda *xs: done(client, *xs))


def python_loop(x):
    for i in range(20):
        x = x * 0.5 + i
    return x


def test_a_python_loop_runs_chunk_by_chunk_unrolled():
    """On NumPy arrays the loop is rolled into a scan; on Dask ones the backend declines
    the roll (``DaskBackend.supports``), so its steps fuse into one blockwise stage."""
    f = tj.jit(python_loop)
    assert [n.op for n in f.lower(X).optimized_graph.nodes].count("scan") == 1
    dx = da.from_array(X, chunks=(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)  # nothing gathered
        plan = f.lower(dx).plan
        out = f(dx)
    assert plan.count("blockwise") == 1 and "scan" not in plan
    (got,) = dask.compute(out, scheduler="threads")
    want = X
    for i in range(20):
        want = want * 0.5 + i
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, f(X), rtol=1e-12)


def test_a_scan_on_cupy_chunks_gives_cupy_arrays(monkeypatch):
    """On CuPy chunks (the emulated GPU here) the loop's task runs on the host and each
    result goes back to the chunks' GPU, where the stage after it runs."""
    import gpu
    from test_dask import _skip_without_the_emulators_compiler

    _skip_without_the_emulators_compiler()
    x = X.astype(np.float32)
    want = stacked_scan(x)
    with gpu.cupy(monkeypatch, dask=True) as cp:
        dx = da.from_array(cp.asarray(x), chunks=(4, 6), asarray=False)
        with pytest.warns(RechunkWarning, match="scan"):
            lazy = tj.jit(stacked_scan)(dx)
        got = dask.compute(*lazy, scheduler="threads")
        for g, w in zip(got, want, strict=True):
            assert type(g).__module__.startswith("cupy"), type(g)
            assert g.dtype == w.dtype
            np.testing.assert_allclose(tj.to_host(g), w, rtol=1e-6)
