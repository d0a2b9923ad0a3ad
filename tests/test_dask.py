"""Jitted functions on Dask arrays: Dask arrays in, Dask arrays out, on a real cluster.

Most tests run on a ``dask.distributed.LocalCluster`` of 2 worker processes (started once
for the module, closed at its end); the drawn programs run on Dask's synchronous
scheduler with the chunks on the reference backend, which tests the plan (what is a
stage, what a partial reduction, what Dask's own op) rather than the kernels. Results are
compared with NumPy; sums over chunked axes add in Dask's order, so within a tolerance.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numpy_compare import assert_same
from test_differential import SETTINGS, programs

import tracejit as tj
from tracejit.errors import InvalidArgument, PlacementWarning, RechunkWarning

da = pytest.importorskip("dask.array", reason="Dask is in the test extra")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
TIMEOUT = 120  # seconds for a cluster computation: a cold worker compiles kernels


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def rng(seed=0):
    return np.random.default_rng(seed)


def done(client, *xs) -> list:
    return client.gather(client.compute(list(xs)), errors="raise")


def chain(x, y):
    return np.tanh(x * y + .5) * np.exp(-x * x) + np.sqrt(np.abs(y))


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------- on the cluster


def test_an_elementwise_chain_gives_dask_arrays_chunk_by_chunk(client):
    x, y = rng().random((400, 64), np.float32), rng(1).random((400, 64), np.float32)
    f = tj.jit(chain)
    dx, dy = da.from_array(x, chunks=(100, 64)), da.from_array(y, chunks=(100, 32))
    out = f(dx, dy)
    assert isinstance(out, da.Array) and out.numblocks == (4, 2)  # lazy: a Dask graph
    (got,) = done(client, out)
    np.testing.assert_allclose(got, chain(x, y), rtol=2e-6)
    assert f.lower(dx, dy).plan.count("blockwise") == 1  # one fused stage


@pytest.mark.parametrize("axis", [0, 1, None, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("op", ["sum", "max", "min", "mean", "prod"])
def test_reductions_along_chunked_and_whole_axes(client, op, axis, keepdims):
    x = rng().random((60, 60)) + 0.5  # square: an axis mix-up cannot hide behind the shape
    dx = da.from_array(x, chunks=(15, 60))
    f = tj.jit(lambda x: getattr(np, op)(x * 2 - 1, axis=axis, keepdims=keepdims))
    (got,) = done(client, f(dx))
    want = getattr(np, op)(x * 2 - 1, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert np.shape(got) == np.shape(want)


def test_a_row_softmax_whole_rows_and_split_rows(client):
    x = rng().standard_normal((256, 48))
    f = tj.jit(softmax)
    rows = da.from_array(x, chunks=(64, 48))  # each row in one chunk: one stage
    cols = da.from_array(x, chunks=(64, 16))  # rows split: partial max and sum per chunk
    got_rows, got_cols = done(client, f(rows), f(cols))
    np.testing.assert_allclose(got_rows, softmax(x), rtol=1e-12)
    np.testing.assert_allclose(got_cols, softmax(x), rtol=1e-12)
    assert "partial" not in f.lower(rows).plan
    assert "tree reduction" in f.lower(cols).plan


def test_matmul_with_an_epilogue_and_a_numpy_operand(client):
    x, w, b = rng().standard_normal((300, 5)), rng(1).standard_normal((5, 7)), np.ones(7)
    f = tj.jit(lambda x, w, b: np.tanh(x @ w + b))
    g = tj.jit(lambda x: x.T @ x)  # contracted over the chunked axis: Dask's tree sum
    dx = da.from_array(x, chunks=(75, 5))
    got, gram = done(client, f(dx, w, b), g(dx))
    np.testing.assert_allclose(got, np.tanh(x @ w + b), rtol=1e-12)
    np.testing.assert_allclose(gram, x.T @ x, rtol=1e-12)
    assert "matmul, add, tanh" in f.lower(dx, w, b).plan


def test_the_tutorial_network_over_four_row_chunks(client):
    sys.path.insert(0, EXAMPLES)
    import two_moons as tm

    from tracejit.datasets import make_moons

    X, y = make_moons(2000, 0.2, rng())
    Y = np.eye(2, dtype=np.float32)[y]
    p = tm.init_params()
    dX, dY = da.from_array(X, chunks=(500, 2)), da.from_array(Y, chunks=(500, 2))
    value, grads = tj.value_and_grad(tm.loss)(p, dX, dY)
    stepped = tm.train_step(p, dX, dY)
    got_value, got_grads, got_step = done(client, value, grads, stepped)
    want_value, want_grads = tj.value_and_grad(tm.loss)(p, X, Y)
    np.testing.assert_allclose(got_value, want_value, rtol=1e-5)
    for k in p:
        np.testing.assert_allclose(got_grads[k], want_grads[k], rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(got_step[k], tm.numpy_train_step(p, X, Y)[k], rtol=1e-4,
                                   atol=1e-6)


def test_workers_load_the_kernels_the_client_compiled(client):
    """The plan compiles each stage once per block signature in the client; workers on
    this machine load it from the shared disk cache instead of compiling per task."""
    x = rng().random((800, 32))
    f = tj.jit(lambda x: np.sin(x) * np.cos(x) + 3.25)
    stats = lambda: dict(vars(__import__("tracejit.backends.cpu", fromlist=["cpu"]).stats()))
    before = client.run(stats)
    (got,) = done(client, f(da.from_array(x, chunks=(100, 32))))
    np.testing.assert_allclose(got, np.sin(x) * np.cos(x) + 3.25, rtol=1e-14)
    after = client.run(stats)
    compiled = sum(after[w]["compiled"] - before[w]["compiled"] for w in after)
    loaded = sum(after[w]["loaded"] - before[w]["loaded"] for w in after)
    assert compiled == 0 and loaded >= 1, (before, after)


def test_a_worker_killed_mid_computation_does_not_change_the_result(client):
    """The fixture's cluster loses a worker process while it computes: Dask's nanny
    restarts it and the scheduler reruns its tasks; the result is NumPy's and the call
    finishes (it is waited for with a timeout, so a hang fails the test)."""
    dx = da.random.default_rng(0).random((4000, 500), chunks=(50, 500))
    x = dx.compute()
    f = tj.jit(lambda x: (np.exp(-x * x) * np.tanh(x)).sum(axis=0))
    out = f(dx)  # 80 tasks of a few ms each, and the sum
    future = client.compute(out)
    victim, pid = next(iter(client.run(os.getpid).items()))
    killed = threading.Event()

    def kill() -> None:  # as soon as the victim runs one of the tasks
        while not future.done():
            if client.processing().get(victim):
                os.kill(pid, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.005)

    threading.Thread(target=kill, daemon=True).start()
    got = future.result(timeout=TIMEOUT)
    np.testing.assert_allclose(got, (np.exp(-x * x) * np.tanh(x)).sum(axis=0), rtol=1e-10)
    assert killed.is_set(), "the worker was not killed while the computation ran"
    client.wait_for_workers(2, timeout=TIMEOUT)


# --------------------------------------------------------------------------- bad input


def test_unknown_chunk_sizes_are_refused_naming_the_argument():
    x = da.from_array(rng().random(100), chunks=25)
    masked = x[x > 0.5]  # sizes known only after computing
    with pytest.raises(InvalidArgument, match="argument y .*unknown chunk sizes"):
        tj.jit(lambda x, y: x)(x, masked)


def test_mismatched_chunks_are_unified_as_dask_does():
    x, y = rng().random((90, 4)), rng(1).random((90, 4))
    f = tj.jit(lambda x, y: x * y + x)
    got = f(da.from_array(x, chunks=(30, 4)), da.from_array(y, chunks=(45, 2)))
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(got.compute(), x * y + x, rtol=1e-15)


def test_an_op_needing_a_whole_axis_warns_at_the_users_line():
    x = rng().random((40, 6))
    f = tj.jit(lambda x: np.sort(x, axis=0) * 2)
    with pytest.warns(RechunkWarning, match="test_dask.py") as record:
        out = f(da.from_array(x, chunks=(10, 6)))
    assert "sort" in str(record[0].message) or "argsort" in str(record[0].message)
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(out.compute(), np.sort(x, axis=0) * 2)


def test_sorts_along_an_axis_whole_in_every_chunk_run_chunk_by_chunk():
    """A sort, argsort, partition or argpartition along an axis no chunk splits runs on
    each chunk (no gathering, no RechunkWarning), with NumPy's bits; along a split axis it
    gathers, with the warning."""
    x = rng().standard_normal((40, 6))
    x[::3, 2] = -0.0  # (ties of -0.0 and 0.0: NumPy's own order of them)
    x[1::3, 2] = 0.0

    def orders(x):
        return (np.sort(x, axis=1), np.argsort(x, axis=1, kind="stable"),
                np.partition(x, 2, axis=-1), np.argpartition(x, [1, 4], axis=1))

    _chunk_by_chunk(orders, da.from_array(x, chunks=(10, 6)), x,
                    "chunk by chunk (axis 1 whole in every chunk)")
    with pytest.warns(RechunkWarning):
        tj.jit(orders)(da.from_array(x, chunks=(10, 3)))


def _chunk_by_chunk(fn, dx, x, how: str, ops: int | None = None) -> None:
    """``fn`` of Dask array ``dx`` (``x``'s chunks) gives no RechunkWarning, its plan says
    ``how`` ``ops`` times (default: once for each of its results), and they are NumPy's
    bits."""
    f = tj.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)
        out = f(dx)
    want = fn(x)
    plan = f.lower(dx).plan
    assert plan.count(how) == (ops or len(want)) and "whole arrays" not in plan, plan
    with dask.config.set(scheduler="synchronous"):
        got = dask.compute(out)[0]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


def test_gathers_along_axes_whole_in_every_chunk_run_chunk_by_chunk():
    """Fancy indexing along axes that no chunk splits (columns picked from row chunks, a
    2-d index, two indices, np.take along the last axis) runs on each chunk, the index
    arrays whole in every task: NumPy's bits, no RechunkWarning; along a split axis it
    gathers, with the warning; an index out of range raises NumPy's IndexError."""
    x = rng().standard_normal((40, 6, 5))
    i = np.array([[0, 5], [2, 2], [-1, 3]])

    def picks(x):
        return (x[:, [0, 5, 2]], x[:, i] * 2, x[:, [0, 5, 2], [1, 1, 4]],
                np.take(x, [4, 0], axis=2))

    dx = da.from_array(x, chunks=(10, 6, 5))
    _chunk_by_chunk(picks, dx, x, "chunk by chunk (the indexed axes whole")
    with dask.config.set(scheduler="synchronous"):
        with pytest.warns(RechunkWarning):
            split = tj.jit(picks)(da.from_array(x, chunks=(10, 3, 5)))
        np.testing.assert_array_equal(split[0].compute(), x[:, [0, 5, 2]])
        with pytest.raises(IndexError):
            tj.jit(lambda x: x[:, [0, 6]])(dx).compute()


def power_spectrum(x):
    return np.abs(np.fft.rfft(x * np.hanning(x.shape[1]), axis=1)) ** 2


def test_a_batch_power_spectrum_runs_chunk_by_chunk(client):
    """A batch of signals in row chunks: the rfft runs on each chunk (no gathering, no
    RechunkWarning), its result chunks 33 long for 64 points, with NumPy's bits (the CPU
    backend's FFT is NumPy's pocketfft); with the signals split across chunks it gathers
    them, with the warning, and gives the same bits."""
    x = rng().standard_normal((400, 64))
    f = tj.jit(power_spectrum)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)
        out = f(da.from_array(x, chunks=(100, 64)))
    plan = f.lower(da.from_array(x, chunks=(100, 64))).plan
    assert "fft at test_dask.py" in plan and "whole arrays" not in plan, plan
    assert out.chunks == ((100,) * 4, (33,))
    with pytest.warns(RechunkWarning, match="fft at test_dask.py"):
        split = f(da.from_array(x, chunks=(100, 16)))
    got, got_split = done(client, out, split)
    want = power_spectrum(x)
    for g in (got, got_split):
        assert g.dtype == want.dtype and g.tobytes() == want.tobytes()


def test_a_spectral_loss_gradient_on_row_chunks():
    """The gradient through an rfft (its transpose an irfft) runs chunk by chunk too, with
    the bits of the same gradient on the whole NumPy array."""
    x = rng().standard_normal((40, 32))

    def loss(x):
        return np.log1p(power_spectrum(x)).sum()

    want = tj.grad(loss)(x)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)  # (no whole-array task)
        got = tj.grad(loss)(da.from_array(x, chunks=(10, 32))).compute()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def spectrum_parts(x):
    """A spectrum's parts, and complex arithmetic on it before taking one."""
    s = np.fft.rfft(x)
    return np.real(s), np.imag(s) * 2, np.real(s * (1 - 2j))


# FFTs along axes whole in every chunk: (function, argument, its chunks, fft ops in it).
FFTS = {
    "fft, ifft along columns": (
        lambda x: (np.fft.fft(x, axis=0), np.fft.ifft(x, axis=0, norm="ortho")),
        rng().standard_normal((30, 12)) + 1j * rng(1).standard_normal((30, 12)), (30, 5), 2),
    "irfft with n": (
        lambda s: (np.fft.irfft(s, n=50, axis=1), np.fft.irfft(s, 16, norm="forward")),
        rng().standard_normal((30, 21)) + 1j * rng(1).standard_normal((30, 21)), (8, 21), 2),
    "fft2 of float32": (lambda x: (np.fft.fft2(x),), rng().standard_normal(
        (12, 8, 6)).astype(np.float32), (5, 8, 6), 2),
    "real and imag": (spectrum_parts, rng().standard_normal((30, 16)), (8, 16), 1),
}


@pytest.mark.parametrize("name", sorted(FFTS))
def test_ffts_along_axes_whole_in_every_chunk_run_chunk_by_chunk(name):
    """Each transform runs on each chunk, its results NumPy's bits and dtypes (complex64
    from float32); the complex spectrum's parts, and complex arithmetic on it, are a
    stage after it."""
    fn, x, chunks, ops = FFTS[name]
    _chunk_by_chunk(fn, da.from_array(x, chunks=chunks), x, "whole in every chunk)", ops)


def test_the_angle_of_a_spectrum_is_a_stage_after_it():
    """np.angle of an rfft's chunks is arctan2 of its parts in one stage, within the CPU
    backend's 4 ULP of NumPy (its compiled arctan2 is its own, not NumPy's bits)."""
    x = rng().standard_normal((30, 16))
    f = tj.jit(lambda x: np.angle(np.fft.rfft(x)))
    dx = da.from_array(x, chunks=(8, 16))
    plan = f.lower(dx).plan
    assert "chunk by chunk" in plan and "imag, real, arctan2" in plan, plan
    with dask.config.set(scheduler="synchronous"):
        got = f(dx).compute()
    np.testing.assert_array_max_ulp(got, np.angle(np.fft.rfft(x)), maxulp=4)


def test_a_whole_axis_op_on_one_chunk_does_not_warn():
    x = rng().random((40, 6))
    f = tj.jit(lambda x: np.sort(x, axis=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)
        out = f(da.from_array(x, chunks=-1))
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(out.compute(), np.sort(x, axis=0))


def test_running_extrema_scan_chunk_by_chunk():
    """maximum/minimum/fmax/logical_or.accumulate along split axes are Dask's own scans
    (no gathering, so no RechunkWarning), NumPy's values and dtypes with a NaN carried on."""
    x = rng().standard_normal((40, 7))
    x[5, 2] = x[17, 6] = np.nan
    i = rng(1).integers(-9, 9, (40, 7)).astype(np.int16)

    def f(x, i):
        return (np.maximum.accumulate(x), np.minimum.accumulate(x, 1), np.fmax.accumulate(x),
                np.maximum.accumulate(i), np.minimum.accumulate(i, 1),
                np.logical_or.accumulate(i > 3), np.logical_and.accumulate(i > -5, 1))

    with warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)
        out = tj.jit(f)(da.from_array(x, chunks=(10, 3)), da.from_array(i, chunks=(7, 2)))
    with dask.config.set(scheduler="synchronous"):
        got = dask.compute(out)[0]
    for g, want in zip(got, f(x, i), strict=True):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)


def test_writes_into_a_dask_argument_update_it_lazily():
    x = rng().random((20, 3))

    def clamp(a):
        a[a < 0.5] = 0.5
        return a.sum()

    dx = da.from_array(x.copy(), chunks=(5, 3))
    total = tj.jit(clamp)(dx)
    want = x.copy()
    want_total = clamp(want)
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(dx.compute(), want)
        np.testing.assert_allclose(total.compute(), want_total)


def test_random_draws_are_refused_with_dask_arguments():
    f = tj.jit(lambda x, g: x + g.random(x.shape))
    with pytest.raises(tj.errors.UnsupportedOperation, match="dask.array.random"):
        f(da.ones((4, 4), chunks=2), np.random.default_rng(0))


def test_import_tracejit_does_not_import_dask():
    code = "import sys, tracejit; assert 'dask' not in sys.modules, 'dask imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --------------------------------------------------------------------------- drawn programs


@st.composite
def chunked(draw, x: np.ndarray):
    """``x`` as a Dask array split at drawn places on each axis."""
    chunks = []
    for n in x.shape:
        cuts = draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=3, unique=True)) \
            if n > 1 else []
        edges = [0, *sorted(c for c in cuts if 0 < c < n), n]
        chunks.append(tuple(b - a for a, b in zip(edges, edges[1:], strict=False)) or (n,))
    return da.from_array(x, chunks=tuple(chunks))


@settings(SETTINGS, max_examples=60)
@given(prog=programs(exact_math=False), data=st.data())
def test_drawn_programs_on_chunked_arguments_match_numpy(prog, data):
    """A drawn NumPy program called on Dask arrays of drawn chunks (its array inputs)
    gives NumPy's values; a program NumPy rejects raises the same builtin class."""
    inputs = [data.draw(chunked(x)) if isinstance(x, np.ndarray) and x.ndim else x
              for x in prog.inputs]
    assume(any(isinstance(x, da.Array) for x in inputs))
    f = tj.jit(prog.function(), backend="reference")
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            values = prog.evaluate([np.copy(x) if isinstance(x, np.ndarray) else x
                                    for x in prog.inputs])
        except Exception as exc:
            from numpy_compare import builtin_error

            with pytest.raises(builtin_error(exc)):
                dask.compute(f(*prog.pack(inputs)))
            return
        got = dask.compute(f(*prog.pack(inputs)))[0]
    for out, index in zip(got, prog.outputs, strict=True):
        want = values[index]  # (Dask computes 0-d arrays where NumPy gives scalars)
        if isinstance(out, np.ndarray) and out.ndim == 0:
            out = out[()]
        assert_same(out, want, prog.tolerance(values, index) or 1e-12)


# --------------------------------------------------------------------------- GPU chunks


def _skip_without_the_emulators_compiler() -> None:
    import shutil

    import gpu

    if not gpu.REAL:
        import cudasim

        if shutil.which(cudasim._cuda.CXX) is None:
            pytest.skip(f"no {cudasim._cuda.CXX}: the emulated GPU compiles kernels with it")


def test_cupy_chunks_run_their_stages_on_the_cuda_backend(monkeypatch):
    """Dask arrays of CuPy chunks (the emulated GPU here): each stage is placed on the
    GPU and compiled by the CUDA backend; the partial sums are combined on the device."""
    import gpu

    from tracejit.backends.dask import blocks

    _skip_without_the_emulators_compiler()
    x = rng().random((64, 8)).astype(np.float32)
    with gpu.cupy(monkeypatch, dask=True) as cp:
        dx = da.from_array(cp.asarray(x), chunks=(16, 8), asarray=False)
        f = tj.jit(lambda x: np.tanh(x * 2 + 1).sum(axis=0))
        with dask.config.set(scheduler="synchronous"):
            out = f(dx).compute()
        assert type(out).__module__.startswith("cupy")
        np.testing.assert_allclose(tj.to_host(out), np.tanh(x * 2 + 1).sum(axis=0), rtol=1e-5)
    assert any(key[1] == "cuda" for key in blocks._RUNNERS)


# Programs on CuPy chunks: (function, argument shapes, chunks of each). Reductions along a
# chunked axis and along a whole one, an input chunked two ways, a row softmax, a matmul
# with an epilogue and one contracted over the chunked axis, Dask's own arg-reductions and
# cumulative sums, ops that need whole arrays (sorts), int32 data, rfft and irfft of rows.
GPU_CHUNKS = {
    "chain": (chain, [(200, 48), (200, 48)], [(50, 48), (50, 16)]),
    "reductions": (lambda x: (x.sum(axis=0), x.mean(axis=1), x.max(), np.abs(x).min(axis=0)),
                   [(200, 48)], [(60, 24)]),
    "moments": (lambda x: (x - x.mean(axis=0, keepdims=True), x.var(axis=0), x.std(),
                           np.where(x > 0, x, 0.1 * x).sum()), [(200, 48)], [(50, 24)]),
    "softmax": (softmax, [(200, 48)], [(50, 48)]),
    "matmul": (lambda x, w: (np.tanh(x @ w + 1.0), x.T @ x), [(200, 48), (48, 8)],
               [(50, 48), (48, 8)]),
    "argmax": (lambda x: (np.argmax(x, axis=0), np.argmin(x * 2, axis=1)), [(200, 48)],
               [(60, 24)]),
    "cumsum": (lambda x: (np.cumsum(x, axis=1), np.cumsum(x * x, axis=0)), [(200, 48)],
               [(50, 48)]),
    "sort": (lambda x: (np.sort(x, axis=1) + 1, np.sort(x, axis=0)), [(200, 48)], [(50, 48)]),
    "ints": (lambda i: ((i * 3 + 1).sum(axis=0), np.abs(i).max()), [(200, 48)], [(50, 24)]),
    "concatenate": (lambda x: np.concatenate([x, np.exp(x)], axis=1).T @ x, [(200, 48)],
                    [(50, 24)]),
    "gather": (lambda x: x[::2][:, [0, 5, 2]] * 2 + x[1:, :3].sum(axis=0), [(200, 48)],
               [(50, 24)]),
    "fft": (lambda x: (*spectrum_parts(x), power_spectrum(x), np.fft.irfft(
        np.fft.rfft(x) * 2, 48)), [(200, 48)], [(50, 48)]),
}


@pytest.mark.parametrize("name", sorted(GPU_CHUNKS))
def test_programs_on_cupy_chunks_match_numpy(name, monkeypatch):
    """Each program on Dask arrays of CuPy chunks, on Dask's threaded scheduler: CuPy
    results, NumPy's values (float32 within rounding of a float64 NumPy)."""
    import gpu

    _skip_without_the_emulators_compiler()
    fn, shapes, chunks = GPU_CHUNKS[name]
    xs = [rng(i).integers(-9, 9, shape).astype(np.int32) if name == "ints" else
          rng(i).standard_normal(shape).astype(np.float32) for i, shape in enumerate(shapes)]
    want = fn(*(x.astype(np.float64) if x.dtype == np.float32 else x for x in xs))
    dtypes = [np.asarray(w).dtype for w in _tuple(fn(*xs))]
    with gpu.cupy(monkeypatch, dask=True) as cp:
        args = [da.from_array(cp.asarray(x), chunks=c, asarray=False)
                for x, c in zip(xs, chunks, strict=True)]
        # (sorts and gathers along a chunked axis need whole arrays: their chunks are
        # gathered, with a warning; complex arithmetic has no GPU kernel: it runs on the
        # host, with a warning)
        gathers = (pytest.warns(RechunkWarning) if name in ("sort", "gather") else
                   pytest.warns(PlacementWarning, match="complex") if name == "fft" else
                   contextlib.nullcontext())
        with dask.config.set(scheduler="threads"), gathers:
            got = dask.compute(tj.jit(fn)(*args))[0]
        for g, w, dtype in zip(_tuple(got), _tuple(want), dtypes, strict=True):
            assert type(g).__module__.startswith("cupy"), type(g)
            assert g.dtype == dtype
            np.testing.assert_allclose(tj.to_host(g), w, rtol=2e-5, atol=2e-5)


def _tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def test_writes_and_gradients_on_cupy_chunks(monkeypatch):
    """A function writing into a Dask argument of CuPy chunks updates it lazily, as on
    NumPy chunks; a gradient over CuPy chunks is CuPy's array with NumPy's values."""
    import gpu

    _skip_without_the_emulators_compiler()
    x = rng().random((20, 3))
    w = rng(1).random((3, 2))

    def clamp(a):
        a[a < 0.5] = 0.5
        return a.sum()

    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    want, want_grad = x.copy(), tj.grad(loss)(w, x)
    want_total = clamp(want)
    with gpu.cupy(monkeypatch, dask=True) as cp, dask.config.set(scheduler="synchronous"):
        dx = da.from_array(cp.asarray(x.copy()), chunks=(5, 3), asarray=False)
        total = tj.jit(clamp)(dx)
        np.testing.assert_array_equal(tj.to_host(dx.compute()), want)
        np.testing.assert_allclose(tj.to_host(total.compute()), want_total, rtol=1e-12)
        got = tj.grad(loss)(w, da.from_array(cp.asarray(x), chunks=(5, 3), asarray=False))
        got = got.compute() if hasattr(got, "compute") else got
        assert type(got).__module__.startswith("cupy")
        np.testing.assert_allclose(tj.to_host(got), want_grad, rtol=1e-12)


def test_a_reproducer_does_not_compute_dask_arguments():
    """An internal error's reproducer keeps a Dask argument empty (its shape and dtype are
    in the IR beside it) rather than computing its graph, which may be large or fail:
    reporting one error must not raise another."""
    from tracejit.check import write_reproducer

    def fails():
        raise RuntimeError("computed")

    broken = da.from_delayed(dask.delayed(fails)(), shape=(4, 3), dtype=np.float32)
    directory = write_reproducer("f", {"arguments": {"x": broken, "y": np.arange(3.0)}},
                                 {"ir.txt": "f(x: f32[4,3], y: f64[3])"})
    with np.load(os.path.join(directory, "arguments.npz")) as saved:
        assert saved["x"].shape == (0,) and saved["x"].dtype == np.float32
        np.testing.assert_array_equal(saved["y"], np.arange(3.0))


def test_the_tutorial_network_on_cupy_chunks(monkeypatch, request):
    """The tutorial network's loss, gradients and training step over four row chunks of
    CuPy arrays, the parameters NumPy arrays; on a real GPU also on the module's
    LocalCluster of worker processes (CuPy chunks travel between them), where the
    emulated GPU stays in this process (Dask's synchronous scheduler)."""
    import gpu

    sys.path.insert(0, EXAMPLES)
    import two_moons as tm

    from tracejit.datasets import make_moons

    _skip_without_the_emulators_compiler()
    X, y = make_moons(2000, 0.2, rng())
    Y = np.eye(2, dtype=np.float32)[y]
    p = tm.init_params()
    want_value, want_grads = tj.value_and_grad(tm.loss)(p, X, Y)
    want_step = tm.numpy_train_step(p, X, Y)
    with gpu.cupy(monkeypatch, dask=True) as cp:
        dX = da.from_array(cp.asarray(X), chunks=(500, 2), asarray=False)
        dY = da.from_array(cp.asarray(Y), chunks=(500, 2), asarray=False)
        value, grads = tj.value_and_grad(tm.loss)(p, dX, dY)
        stepped = tm.train_step(p, dX, dY)
        if gpu.REAL:
            results = [done(request.getfixturevalue("client"), value, grads, stepped)]
        else:
            results = []
        with dask.config.set(scheduler="synchronous"):
            results.append(dask.compute(value, grads, stepped))
        for got_value, got_grads, got_step in results:
            np.testing.assert_allclose(tj.to_host(got_value), want_value, rtol=1e-5)
            for k in p:
                np.testing.assert_allclose(tj.to_host(got_grads[k]), want_grads[k], rtol=1e-4,
                                           atol=1e-7)
                np.testing.assert_allclose(tj.to_host(got_step[k]), want_step[k], rtol=1e-4,
                                           atol=1e-6)


# Programs the drawn test (and its explore runs) found wrong, each a regression test:
# (function, argument, chunks).
FOUND = [
    (lambda v0, v1: (np.sign(v0) + (v1 + v0),), "stages of different ranks merged"),
    (lambda v0, v1: ((v1 + v0) % 3,), "a weak scalar constant typed strongly in a stage"),
    (lambda v0, v1: (np.where(v1[0, :2:2, None, 0], v1, v1),),
     "an empty chunk left by slicing, paired with a whole one"),
    (lambda v0, v1: (np.reshape(v1, (1, 3)) * 2,), "a reshape Dask cannot chunk"),
    (lambda v0, v1: (np.concatenate([v1[:0], v1[:0]], axis=0).sum(axis=0),),
     "reductions and concatenations of empty arrays"),
    (lambda v0, v1: (v0[None],), "a 0-d NumPy value reshaped"),
]


@pytest.mark.parametrize("fn,what", FOUND, ids=[w for _, w in FOUND])
def test_programs_the_drawn_test_found(fn, what):
    v0 = np.int32(3)
    v1 = np.array([[[1], [-2], [5]]], np.int32)
    x = da.from_array(v1, chunks=((1,), (1, 2), (1,)))
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RechunkWarning)
        (got,) = dask.compute(tj.jit(fn, backend="reference")(v0, x))[0]
    (want,) = fn(v0, v1)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


@pytest.mark.parametrize("fn", [
    lambda x, w, y: y * 2 + x.sum(axis=1, keepdims=True),  # x whole along axis 1, y split
    lambda x, w, y: np.tanh(x) @ w + y,  # a contraction over an axis y's chunks split
    lambda x, w, y: (y - x.max(axis=1, keepdims=True)) / (x @ w).sum(axis=1, keepdims=True),
], ids=["reduction", "matmul", "both"])
def test_an_input_split_finer_splits_the_whole_stage(fn):
    """Blockwise gives every input of a stage the finest chunks among them: a reduction
    or contraction over an axis one input has whole is split by another's chunks there
    (found reviewing the plan: the first gave a silent wrong answer). Square 6x6, so an
    axis mix-up cannot hide behind the shapes."""
    x, w, y = rng().random((6, 6)), rng(1).random((6, 6)), rng(2).random((6, 6))
    dx, dy = da.from_array(x, chunks=(3, 6)), da.from_array(y, chunks=(3, 2))
    with dask.config.set(scheduler="synchronous"):
        got = tj.jit(fn, backend="reference")(dx, w, dy).compute()
    np.testing.assert_allclose(got, fn(x, w, y), rtol=1e-12)
