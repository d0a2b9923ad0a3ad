"""Loops on the CUDA backend: ``scan`` and ``while_loop`` nodes placed on the GPU run their
body's kernels once per step from the runner, the carry resident on the device.

Answers are compared with NumPy loops (float64 oracles, tolerances where float32 math
differs), gradients with finite differences. The emulated GPU (tools/cudasim, which
compiles the generated CUDA C with g++) counts transfers and launches, so "no transfer per
step" is checked by counting them for two trip counts, not by timing. With
TRACEJIT_TEST_REAL_GPU=1 the tests run on CuPy's GPU and skip the counts.
"""

import re
import shutil

import gpu
import numpy as np
import pytest

import tracejit as tj
from tracejit import lax
from tracejit.errors import PlacementError, PlacementWarning

REAL = gpu.REAL
# a loop that silently fell back to the CPU would still give the right answers
pytestmark = [pytest.mark.filterwarnings("error::tracejit.errors.PlacementWarning")]
if not REAL:
    import cudasim

    pytestmark.append(pytest.mark.skipif(shutil.which(cudasim._cuda.CXX) is None,
                                         reason=f"no {cudasim._cuda.CXX}: the emulated GPU "
                                         "compiles kernels with it"))

RNG = np.random.default_rng(15)


@pytest.fixture
def cp(monkeypatch):
    """CuPy (or its emulation, one GPU), and a fresh device state afterwards."""
    with gpu.cupy(monkeypatch, 1) as module:
        yield module


def host(x):
    return tj.to_host(x)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def rnn(W, xs, h):
    """A vanilla RNN over ``xs``: the final hidden state and each step's mean activation."""
    def step(h, x):
        h = np.tanh(h @ W + x)
        return h, h.mean(axis=1)
    return lax.scan(step, h, xs)


def rnn_numpy(W, xs, h):
    W, xs, h = (np.asarray(a, np.float64) for a in (W, xs, h))
    ys = []
    for x in xs:
        h = np.tanh(h @ W + x)
        ys.append(h.mean(axis=1))
    return h, np.stack(ys)


W, XS, H0 = f32(16, 16) * 0.3, f32(12, 4, 16), f32(4, 16)


def test_rnn_scan_runs_its_body_kernels_on_the_gpu(cp):
    f = tj.jit(rnn, device="cuda")
    h, ys = f(W, XS, H0)
    assert isinstance(h, cp.ndarray) and isinstance(ys, cp.ndarray)
    want_h, want_ys = rnn_numpy(W, XS, H0)
    np.testing.assert_allclose(host(h), want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(host(ys), want_ys, rtol=1e-5, atol=1e-6)
    lowered = f.lower(W, XS, H0)
    assert re.search(r"scan\(.*\)\s+# cuda:0", lowered.optimized_ir)
    src = lowered.source
    assert re.search(r"step = \d+; t\d+ = lib\d+\(.*\)  # scan", src)  # the driver's step
    assert "---- body of the scan of step" in src
    body = src.split("---- body of the scan", 1)[1]
    # the body's kernel: h @ W (K = 16, unrolled), add, tanh and the row sum fused
    assert re.search(r'extern "C" __global__ .* loop\d+_body_kernel\d+\(', body)
    assert "rows kernel over [4, 16] (matmul, add, tanh, sum)" in body and "tanhf(" in body


def test_fori_loop_static_and_traced_bounds(cp):
    x = RNG.standard_normal(33)  # float64: NumPy's float32 + int64 counter is float64

    def f(x, n):
        a = lax.fori_loop(0, 7, lambda i, c: c * 0.5 + i, x)
        b = lax.fori_loop(0, n, lambda i, c: c * 0.5 + i, x)  # a traced bound
        return a, b

    def numpy_loop(n):
        c = x.astype(np.float64)
        for i in range(n):
            c = c * 0.5 + i
        return c

    g = tj.jit(f, device="cuda")
    for n in (0, 3, 9):
        a, b = g(x, n)
        np.testing.assert_allclose(host(a), numpy_loop(7), rtol=1e-6)
        np.testing.assert_allclose(host(b), numpy_loop(n), rtol=1e-6)
    ir = g.lower(x, 3).optimized_ir
    assert re.search(r"scan\(.*# cuda:0", ir) and re.search(r"while_loop\(.*# cuda:0", ir)


def newton_sqrt(a):
    """Newton's iteration for sqrt(a), elementwise, until every residual is small."""
    def cond(c):
        x, k = c
        return (np.abs(x * x - a) > 1e-10 * a).any() & (k < 100)

    def body(c):
        x, k = c
        return 0.5 * (x + a / x), k + 1

    return lax.while_loop(cond, body, (a, 0))


def test_while_loop_newton_iteration(cp):
    a = RNG.uniform(0.5, 50.0, 40)
    x, k = tj.jit(newton_sqrt, device="cuda")(a)
    want, steps = a.copy(), 0
    while (np.abs(want * want - a) > 1e-10 * a).any() and steps < 100:
        want, steps = 0.5 * (want + a / want), steps + 1
    assert int(host(k)) == steps and steps > 3
    np.testing.assert_allclose(host(x), np.sqrt(a), rtol=1e-12)
    np.testing.assert_allclose(host(x), want, rtol=1e-14)


def test_map_and_reverse_scan(cp):
    xs = f32(9, 5)

    def f(xs):
        sums = lax.map(lambda r: np.exp(r).sum() - r.max(), xs)
        total, suffix = lax.scan(lambda c, x: (c + x, c + x), np.zeros(5, np.float32), xs,
                                 reverse=True)
        return sums, total, suffix

    sums, total, suffix = tj.jit(f, device="cuda")(xs)
    x64 = xs.astype(np.float64)
    np.testing.assert_allclose(host(sums), np.exp(x64).sum(axis=1) - x64.max(axis=1),
                               rtol=1e-5)
    np.testing.assert_allclose(host(suffix), np.cumsum(x64[::-1], axis=0)[::-1], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(host(total), x64.sum(axis=0), rtol=1e-5, atol=1e-6)


def test_nested_loops(cp):
    A = f32(6, 3, 3) * 0.5

    def f(A, v):
        def outer(v, M):  # v <- M^3 v, the inner loop over the powers
            w = lax.fori_loop(0, 3, lambda i, w: np.tanh(M @ w), v)
            return w, w.sum()
        return lax.scan(outer, v, A)

    v = f32(3)
    g = tj.jit(f, device="cuda")
    got_v, got_s = g(A, v)
    want, sums = v.astype(np.float64), []
    for M in A.astype(np.float64):
        for _ in range(3):
            want = np.tanh(M @ want)
        sums.append(want.sum())
    np.testing.assert_allclose(host(got_v), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(host(got_s), sums, rtol=1e-5, atol=1e-6)
    src = g.lower(A, v).source
    assert re.search(r"loop\d+_body_loop\d+_body_kernel\d+\(", src)  # the inner body's kernel


def test_gradient_of_a_scan_on_the_gpu(cp):
    W64, XS64, H64 = (a.astype(np.float64)[..., :6] for a in (W[:6], XS, H0))

    def loss(W, xs, h):
        h, ys = rnn(W, xs, h)
        return (h * h).mean() + ys.sum()

    def loss_numpy(W):
        h, ys = rnn_numpy(W, XS64, H64)
        return (h * h).mean() + ys.sum()

    g = tj.jit(tj.grad(loss), device="cuda")
    got = host(g(W64, XS64, H64))
    ir = g.lower(W64, XS64, H64).optimized_ir
    assert len(re.findall(r"= scan\(.*# cuda:0", ir)) == 2  # forward, and backward reversed
    eps, fd = 1e-6, np.empty_like(W64)
    for idx in np.ndindex(W64.shape):
        d = np.zeros_like(W64)
        d[idx] = eps
        fd[idx] = (loss_numpy(W64 + d) - loss_numpy(W64 - d)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


def test_a_body_op_the_gpu_lacks_runs_the_loop_on_the_cpu(cp):
    def f(x, counts):
        def body(c, n):  # uint8 multiply: no CUDA kernel, so the whole loop runs on the CPU
            return c * 0.5 + (n * n).astype(np.float32), c.sum()
        return lax.scan(body, x, counts)

    x = f32(8)
    counts = RNG.integers(0, 16, (5, 8)).astype(np.uint8)
    with pytest.warns(PlacementWarning, match=r"f: ops multiply \(elementwise, uint8\) \(at "
                      r"test_cuda_loops.py:\d+\), convert .* cannot run on cuda:0 and will run "
                      "on the CPU"):
        g = tj.jit(f, device="cuda")
        c, ys = g(x, counts)
    assert isinstance(c, cp.ndarray) and isinstance(ys, cp.ndarray)  # moved to the target
    want, sums = x.astype(np.float64), []
    for n in counts:
        sums.append(want.sum())
        want = want * 0.5 + (n * n).astype(np.float32)
    np.testing.assert_allclose(host(c), want, rtol=1e-6)
    np.testing.assert_allclose(host(ys), sums, rtol=1e-6)
    ir = g.lower(x, counts).optimized_ir
    assert re.search(r"= scan\(.*# cpu,", ir) and re.search(r"= loop_output\(.*# cpu,", ir)
    assert re.search(r"transfer\(%\d+, source='cpu', device='cuda:0'\)", ir)
    with pytest.raises(PlacementError, match=r"multiply \(elementwise, uint8\)"):
        tj.jit(f, device="cuda", strict=True)(x, counts)


@pytest.mark.skipif(REAL, reason="counts transfers through the emulator")
def test_no_transfer_per_step(cp):
    """The same scan for 3 and for 30 steps: the same transfers (inputs resident on the
    GPU: none; host inputs: one each, before the loop), launches growing per step."""
    def run(length, on_device):
        xs = XS[:1].repeat(length, axis=0)
        args = [tj.to_device(a, "cuda") if on_device else a for a in (W, xs, H0)]
        f = tj.jit(rnn, device="cuda")
        f(*args)  # compiles: the bodies' constants go to the GPU once, here
        cudasim.stats.reset()
        h, ys = f(*args)
        s = cudasim.stats
        return s.h2d, s.d2h, s.launches

    short, long = run(3, True), run(30, True)
    assert short[:2] == long[:2] == (0, 0)
    per_step = (long[2] - short[2]) // 27
    assert per_step >= 1 and long[2] - short[2] == 27 * per_step
    assert run(3, False)[:2] == run(30, False)[:2] == (3, 0)  # W, xs, h0 moved once


@pytest.mark.skipif(REAL, reason="counts transfers through the emulator")
def test_while_loop_reads_one_condition_per_step(cp):
    a = tj.to_device(RNG.uniform(0.5, 50.0, 40), "cuda")
    f = tj.jit(newton_sqrt, device="cuda")
    f(a)
    cudasim.stats.reset()
    x, k = f(a)
    moved = cudasim.stats.h2d, cudasim.stats.d2h, cudasim.stats.d2h_bytes
    steps = int(host(k))
    assert moved == (0, steps + 1, steps + 1)  # one bool per test of the condition


def test_zero_steps(cp):
    xs = np.zeros((0, 3), np.float32)
    c, ys = tj.jit(lambda c, xs: lax.scan(lambda c, x: (c + x, c * x), c, xs),
                   device="cuda")(np.ones(3, np.float32), xs)
    assert host(ys).shape == (0, 3)
    np.testing.assert_array_equal(host(c), np.ones(3))
    w = tj.jit(lambda x: lax.while_loop(lambda c: c.sum() < 0, lambda c: c - 1, x),
               device="cuda")(np.arange(3.0))
    np.testing.assert_array_equal(host(w), np.arange(3.0))


def test_an_error_in_a_body_names_the_body_line(cp):
    table = f32(5)

    def f(table, idx):
        return lax.scan(lambda c, i: (c + table[i], c), np.float32(0), idx)  # the line

    g = tj.jit(f, device="cuda")
    np.testing.assert_allclose(host(g(table, np.array([0, 4, 2]))[0]),
                               table[[0, 4, 2]].sum(), rtol=1e-6)
    with pytest.raises(IndexError, match="index 7 is out of bounds") as info:
        g(table, np.array([1, 7]))
    assert info.value.location.filename == __file__
    assert "# the line" in info.value.location.text()
