"""The CUDA backend end to end: placement, transfers, the runner, library steps, errors,
synchronisation, profiling and gradients on a GPU.

Where no GPU is present these tests run on ``cudasim`` (tools/cudasim), an emulated CuPy
that compiles the generated CUDA C with g++ and runs each block's threads as OS threads;
on a machine whose CuPy sees a GPU (TRACEJIT_TEST_REAL_GPU=1) they run on the real one.
"""

import os
import re
import sys
from pathlib import Path

import gpu
import numpy as np
import pytest
import test_inplace
from conftest import SRC

import tracejit as tj
from tracejit.errors import IndexOutOfBounds, KernelError, PlacementError, PlacementWarning

REAL = gpu.REAL
if not REAL:
    import cudasim


@pytest.fixture
def cp(monkeypatch):
    """CuPy (or its emulation, with two GPUs), and a fresh device state afterwards."""
    with gpu.cupy(monkeypatch, 2) as module:
        yield module


def transfers(stats):
    return stats.h2d, stats.d2h


RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 33)).astype(np.float32)


def host(x):
    return tj.to_host(x)


def test_resident_data_stays_on_the_gpu(cp):
    f = tj.jit(lambda x: np.exp(x) * 2.0 + 1.0)
    x = tj.to_device(X, "cuda")
    assert isinstance(x, cp.ndarray)
    with tj.device("cuda"):
        if not REAL:
            cudasim.stats.reset()
        y = f(x)
        y2 = f(x)
    assert isinstance(y, cp.ndarray) and y.device.id == 0
    if not REAL:  # nothing copied either way: the kernels read and write device memory
        assert transfers(cudasim.stats) == (0, 0) and cudasim.stats.launches == 2
    tj.synchronize()
    np.testing.assert_allclose(host(y), np.exp(X) * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(host(y2), host(y))
    assert f.cache_info().misses == 1


def test_host_inputs_are_transferred_by_visible_nodes(cp):
    f = tj.jit(lambda x, W, b: np.tanh(x @ W + b))
    W = RNG.standard_normal((33, 5)).astype(np.float32)
    b = np.zeros(5, np.float32)
    with tj.device("cuda"):
        y = f(X, W, b)
        low = f.lower(X, W, b)
    assert isinstance(y, cp.ndarray)
    np.testing.assert_allclose(host(y), np.tanh(X @ W + b), rtol=1e-5, atol=1e-6)
    text = low.optimized_ir
    assert text.count("transfer(") == 3 and "source='cpu', device='cuda:0'" in text
    assert "x: f32[64,33]@cpu" in text and "# cuda:0," in text
    assert low.backend == "cuda"
    src = low.source
    assert 'extern "C" __global__' in src and "def run(" in src and "lib" in src


@pytest.mark.parametrize("shape", [(5, 7), (300, 1000), (3, 1500), (1, 40)])
def test_row_softmax_and_logsumexp_are_one_kernel_each(cp, shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 4

    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def lse(x):
        m = x.max(axis=1, keepdims=True)
        return (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]

    with tj.device("cuda"):
        got = [host(tj.jit(fn)(tj.to_device(x, "cuda"))) for fn in (softmax, lse)]
    np.testing.assert_allclose(got[0], softmax(x), rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(got[1], lse(x), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 1000, 300_001])
def test_full_reductions_in_one_or_two_stages(cp, n):
    x = RNG.standard_normal(n)
    f = tj.jit(lambda x: ((x * x).sum(), np.abs(x).min() if n else x.sum(), (x > 0).any()))
    with tj.device("cuda"):
        s, m, a = f(tj.to_device(x, "cuda"))
    assert s.shape == () and isinstance(s, cp.ndarray)  # a 0-d array, as CuPy returns
    np.testing.assert_allclose(host(s), (x * x).sum(), rtol=1e-12)
    assert host(m) == (np.abs(x).min() if n else 0.0) and host(a) == (x > 0).any()


def test_column_reductions_ints_and_bools(cp):
    a = RNG.integers(-50, 50, (40, 30)).astype(np.int32)
    f = tj.jit(lambda a: (a.sum(axis=0), (a > 3).all(axis=0), np.abs(a).max(axis=0),
                          (a // 7) % 5))
    with tj.device("cuda"):
        got = [host(o) for o in f(a)]
    want = [a.sum(axis=0), (a > 3).all(axis=0), np.abs(a).max(axis=0), (a // 7) % 5]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_scalars_pass_by_value(cp):
    f = tj.jit(lambda x, s, t: x * s + t)
    with tj.device("cuda"):
        y = f(tj.to_device(X, "cuda"), 3.0, np.float32(0.5))
    np.testing.assert_array_equal(host(y), X * 3 + np.float32(0.5))  # no fused multiply-add


def test_gather_raises_like_numpy_for_an_index_out_of_range(cp):
    f = tj.jit(lambda x, i: x[i] * 2)
    x = tj.to_device(X, "cuda")
    with tj.device("cuda"):
        ok = f(x, tj.to_device(np.array([0, -1, 5]), "cuda"))
        np.testing.assert_array_equal(host(ok), X[[0, -1, 5]] * 2)
        with pytest.raises(IndexOutOfBounds, match="index 64 is out of bounds for axis 0 "
                           "with size 64") as info:
            f(x, tj.to_device(np.array([1, 64]), "cuda"))
    assert info.value.location.filename == __file__


def test_gradient_of_a_gather_scatters_on_the_gpu(cp):
    idx = np.array([1, 3, 1, 0])
    g = tj.jit(tj.grad(lambda x, i: (x[i] ** 2).sum()))
    x = RNG.standard_normal(5)
    with tj.device("cuda"):
        got = host(g(tj.to_device(x, "cuda"), tj.to_device(idx, "cuda")))
    want = np.zeros(5)
    np.add.at(want, idx, 2 * x[idx])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_an_op_the_gpu_cannot_run_falls_back_with_one_warning(cp):
    def f(x, b):
        return np.exp(x).sum(axis=1) + (b * b).astype(np.float32)

    b = np.arange(64, dtype=np.uint8)
    with tj.device("cuda"), pytest.warns(PlacementWarning, match=r"f: ops multiply \(elementwise, "
                                         r"uint8\) \(at test_cuda.py:\d+\), convert .* cannot "
                                         "run on cuda:0 and will run on the CPU"):
        y = tj.jit(f)(tj.to_device(X, "cuda"), b)
    assert isinstance(y, cp.ndarray)
    np.testing.assert_allclose(host(y), f(X, b), rtol=1e-5)
    with tj.device("cuda", strict=True), pytest.raises(PlacementError, match="strict placement"):
        tj.jit(f)(tj.to_device(X, "cuda"), b)
    with pytest.raises(PlacementError):
        tj.jit(f, device="cuda", strict=True)(X, b)


def test_gpu_inputs_to_a_cpu_function_come_back_explicitly(cp):
    f = tj.jit(lambda x: np.sqrt(np.abs(x)))
    y = f(tj.to_device(X, "cuda"))
    assert type(y) is np.ndarray
    np.testing.assert_allclose(y, np.sqrt(np.abs(X)), rtol=1e-6)
    assert "transfer(x, source='cuda:0', device='cpu')" in f.lower(tj.to_device(X, "cuda")) \
        .optimized_ir


def test_second_gpu_and_per_device_cache_entries(cp):
    if REAL and cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("this machine has one GPU (the emulated run has two)")
    f = tj.jit(lambda x: x + 1)
    with tj.device("cuda:1"):
        y = f(tj.to_device(X, "cuda:1"))
    assert y.device.id == 1
    with tj.device("cuda:0"):
        z = f(tj.to_device(X, "cuda:1"))  # lives on GPU 1, computed on GPU 0: a copy
    assert z.device.id == 0 and f.cache_info().signatures == 2
    np.testing.assert_array_equal(host(y), host(z))
    pinned = tj.jit(lambda x: x * 2, device="cuda:1")
    assert pinned(X).device.id == 1


def test_returned_inputs_are_the_callers_arrays_on_the_device(cp):
    """A returned argument is the caller's array (a view of it for ``x.T``), as NumPy and
    CuPy return it, wherever it lives: a CuPy array on its GPU, a NumPy array on the host
    (nothing to copy: a call on the GPU copies an argument's writes back anyway)."""
    f = tj.jit(lambda x: (x, x.T))
    x = tj.to_device(X, "cuda")
    host_x = X.copy()
    with tj.device("cuda"):
        a, t = f(x)
        a_host, t_host = f(host_x)
    assert a is x and isinstance(t, cp.ndarray)
    np.testing.assert_array_equal(host(t), X.T)
    assert a_host is host_x and t_host.base is host_x
    np.testing.assert_array_equal(t_host, X.T)


def test_profile_counts_transfers(cp):
    f = tj.jit(lambda x: np.exp(x).sum())
    with tj.device("cuda"):
        f(X)
        with tj.profile() as p:
            for _ in range(3):
                f(X)
    moved = p.transfers
    assert moved.count == 3 and moved.nbytes == 3 * X.nbytes
    assert "transfers between devices: 3, 0.025 MB" in str(p)


def test_debug_switch_names_the_failing_kernel(cp, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CUDA_SYNC", "1")
    f = tj.jit(lambda x: np.log(x) + 1)
    x = tj.to_device(np.ones(8, np.float32), "cuda")
    with tj.device("cuda"):
        assert "check(0)" in f.lower(x).source
        f(x)
        if REAL:  # CuPy's Device is an extension type: no failure can be stood in there
            return

        def broken(self):
            raise cp.cuda.runtime.CUDARuntimeError(700)  # cudaErrorIllegalAddress

        monkeypatch.setattr(type(cp.cuda.Device(0)), "synchronize", broken)
        g = tj.jit(lambda x: np.log(x) * 3)
        with pytest.raises(KernelError, match=r"kernel0 \(log, multiply\) failed on "
                           "cuda:0: .*illegal") as info:
            g(x)
    assert info.value.location.filename == __file__


def test_the_tutorial_network_trains_on_the_gpu(cp):
    """examples/two_moons.py: parameters and data resident on the GPU, 20 steps, the same
    parameters as on the CPU."""
    from pathlib import Path

    from tracejit.datasets import make_moons

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import two_moons as tm

    X_, y = make_moons(500, 0.20, np.random.default_rng(0))
    Y = np.eye(2)[y]
    step = tj.jit(tm.train_step.__wrapped__)
    cpu = tm.init_params(np.float64)
    gpu = {k: tj.to_device(v, "cuda") for k, v in cpu.items()}
    X_dev, Y_dev = tj.to_device(X_, "cuda"), tj.to_device(Y, "cuda")
    with tj.device("cuda"):
        gpu = step(gpu, X_dev, Y_dev)  # compiles, and copies its constants to the GPU once
        if not REAL:
            cudasim.stats.reset()
        for _ in range(19):
            gpu = step(gpu, X_dev, Y_dev)
    if not REAL:
        assert transfers(cudasim.stats) == (0, 0)
    for _ in range(20):
        cpu = step(cpu, X_, Y)
    for k in cpu:
        assert isinstance(gpu[k], cp.ndarray)
        np.testing.assert_allclose(host(gpu[k]), cpu[k], rtol=1e-9, atol=1e-12, err_msg=k)


def test_argmax_and_argmin_pick_the_first_nan_as_numpy_does(cp):
    x = RNG.standard_normal((6, 9))
    x[1, 4] = x[1, 7] = np.nan
    x[3, 0] = np.nan
    x[5] = x[5, 2]  # ties: the first occurrence
    f = tj.jit(lambda x: (x.argmax(axis=1), x.argmin(axis=0), np.argmax(x), x.argmin(1)))
    with tj.device("cuda", strict=True):
        got = [host(o) for o in f(tj.to_device(x, "cuda"))]
    want = [x.argmax(axis=1), x.argmin(axis=0), np.argmax(x), x.argmin(1)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_kernels_round_each_operation_as_numpy(cp):
    """No fused multiply-add (x * 3 + 0.5 rounds twice, as NumPy's two ufuncs do) and
    float32 subnormals kept (CuPy's RawModule compiles with -ftz=true, which flushed
    np.nextafter(0, 1) to 1.2e-38 on an H100): the kernels are NVRTC's with nvrtc.OPTIONS."""
    x = np.array([0.0, -0.0, 1e-45, 3e-39, 1.0, -2.5, 1e30, 0.1], np.float32)
    if not REAL:
        cudasim.stats.reset()
    f = tj.jit(lambda x: (np.nextafter(x, np.float32(1)), np.spacing(x), x * np.float32(1e-30),
                          x * 3 + np.float32(0.5), x / np.float32(3), np.sqrt(np.abs(x))))
    with tj.device("cuda"):
        got = [host(o) for o in f(tj.to_device(x, "cuda"))]
    for g, w in zip(got, f.__wrapped__(x), strict=True):
        np.testing.assert_array_equal(g.view(np.int32), w.view(np.int32))
    if not REAL:
        assert cudasim.stats.nvrtc_options and all(
            {"-ftz=false", "-fmad=false"} <= set(o) for o in cudasim.stats.nvrtc_options)


def test_compiled_modules_are_kept_on_disk(fresh_processes):
    """A new process loads the module an earlier one compiled (NVRTC once per machine)."""
    script = ("import json, numpy as np, tracejit as tj\n"
              + ("" if REAL else "import cudasim; cudasim.install()\n")
              + "from tracejit.backends.cuda import nvrtc\n"
              "from tracejit.backends.cpu import diskcache\n"
              "f = tj.jit(lambda x: np.tanh(x) * 2 + 1, device='cuda')\n"
              "y = tj.to_host(f(np.linspace(-1, 1, 50, dtype=np.float32)))\n"
              "print(json.dumps({'compiled': nvrtc.counts.compiled, "
              "'loaded': nvrtc.counts.loaded, 'y': y.tolist(), "
              "'listed': [(e.function, e.kernels) for e in diskcache.entries()]}))\n")
    tools = str(Path(__file__).resolve().parents[1] / "tools")
    (first, _), (second, _) = fresh_processes(script, PYTHONPATH=os.pathsep.join(
        [str(SRC), tools]))
    assert (first["compiled"], first["loaded"]) == (1, 0)
    assert (second["compiled"], second["loaded"]) == (0, 1)
    assert first["y"] == second["y"]
    assert second["listed"] == [["<lambda>", 1]]  # python -m tracejit cache lists it


@pytest.mark.parametrize("shape,axis", [
    ((5000, 3), 0),  # tall: 32 shares, combined by a second kernel
    ((300, 70), 0),  # several tiles of 32 results
    ((7, 7), 0), ((1, 9), 0), ((9, 1), 0),  # square; size-1 dimensions
    ((6, 6, 6), 1), ((6, 6, 6), (0, 2)), ((4, 300, 5), (0, 1)),  # middle axes; cubic
    ((0, 4), 0), ((4, 0, 3), 1),  # nothing to reduce, or no results
])
def test_column_reductions_match_numpy(cp, shape, axis):
    """Reductions over leading and middle axes (the columns form: tiles by shares of the
    reduced elements) give NumPy's values: exactly for integers, bools and max/min,
    within rounding for float sums; with the elementwise output of the same loop."""
    x = RNG.standard_normal(shape)
    i = RNG.integers(-9, 9, shape).astype(np.int32)
    def f(x, i):  # (max and min of nothing raise)
        extremes = () if 0 in shape else (x.max(axis=axis), np.abs(i).min(axis=axis))
        return (x.sum(axis=axis), (i * 3).sum(axis=axis), (i > 0).any(axis=axis),
                (i < 5).all(axis=axis), x * 2, *extremes)

    f = tj.jit(f)
    with tj.device("cuda"):
        got = [host(o) for o in f(x, i)]
    want = f.__wrapped__(x, i)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12 * shape[0])
    for g, w in zip(got[1:], want[1:], strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_skinny_products_join_the_gpu_loops(cp):
    """The tutorial network's step on the GPU: ``X @ W1`` (K = 2) unrolled into the hidden
    layer's loop, ``a1 @ W2`` and the weight gradients split into sums that join the loops
    over ``a1`` (passes/contract.py): no cuBLAS call reads the hidden layer."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import two_moons as tm

    rng = np.random.default_rng(3)
    params = {"W1": rng.standard_normal((2, 40)).astype(np.float32),
              "b1": rng.standard_normal(40).astype(np.float32),
              "W2": rng.standard_normal((40, 2)).astype(np.float32),
              "b2": rng.standard_normal(2).astype(np.float32)}
    X = rng.standard_normal((300, 2)).astype(np.float32)
    Y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 300)]
    step = tj.jit(tm.train_step.__wrapped__, device="cuda")
    got = {k: host(v) for k, v in step(params, X, Y).items()}
    want = tj.jit(tm.train_step.__wrapped__, backend="reference")(params, X, Y)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
    source = step.lower(params, X, Y).source
    assert "# matmul" not in source  # no library matmul step at all
    assert re.search(r"rows kernel over \[300, 40\] \(matmul, add, tanh", source)
    assert re.search(r"columns kernel over \[300, 40\]", source)


def test_cached_gpu_calls_take_a_short_path_per_signature(cp):
    """A call on the GPU finds its compiled code by a key of the device and each argument's
    shape, dtype and GPU (``api._device_key``): a new value compiles nothing, a host array
    or an array on another GPU is another signature."""
    two = cp.cuda.runtime.getDeviceCount() > 1
    f = tj.jit(lambda x, s: x * s + 1.0)
    x0 = tj.to_device(X, "cuda:0")
    with tj.device("cuda"):
        for s in (2.0, 3.0, 2.0):
            np.testing.assert_array_equal(host(f(x0, s)), X * np.float32(s) + 1)
        f(X, 2.0)
        if two:  # lives on GPU 1, computed on GPU 0: a transfer in the signature
            f(tj.to_device(X, "cuda:1"), 2.0)
    assert f.cache_info() == (2, 2 + two, 2 + two)  # (hits, misses, signatures)
    keys = [k for k in f._fast if isinstance(k[0], tj.targets.Device)]
    assert len(keys) == 2 + two
    assert {k[2][-1] for k in keys if len(k[2]) == 3} == ({0, 1} if two else {0})


@pytest.mark.parametrize("shape", [(4, 0), (7, 7), (300, 70)])
def test_full_reduction_kernel_reads_a_per_row_value_that_needs_no_reduction(cp, shape):
    """Explore run 2026-11-27, seed 27, program 737 (an internal error, present before this
    session): a full reduction's kernel held `minimum(c, c)` of a [1, 1] `c` as a per-row
    value, which its elements read before any was computed. It is now computed before the
    loop (one block at (7, 7), partial results and a combining kernel at (300, 70))."""
    x = RNG.standard_normal(shape)
    c = np.array([[0.25]])

    def program(c, x):  # (the sum first: the kernel over x then takes in the minimum)
        s = (x / 2).sum(axis=(0, 1), keepdims=True)
        m = np.minimum(c, c)
        return np.where(x > m, m, x), s, m * 3

    with tj.device("cuda"):
        got = [host(o) for o in tj.jit(program)(c, x)]
    want = program(c, x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[2], want[2])


def test_the_runner_lets_go_of_large_intermediates(cp):
    """Its large intermediates are released after their last launch or call (a ``del``
    in the runner: CuPy's pool reuses the block on the same stream), the answers NumPy's."""
    x = RNG.standard_normal(1 << 17)  # 1 MiB of float64

    def chain(x):
        return np.cumsum(np.sort(np.cumsum(np.sort(x))))[-3:]

    f = tj.jit(chain)
    with tj.device("cuda"):
        source = f.lower(x).source
        got = f(x)
    assert re.search(r"^ +del t\d+", source, re.M), source
    np.testing.assert_allclose(host(got), chain(x), rtol=1e-12)


def test_writes_to_host_arguments_come_back_from_the_gpu(cp):
    """A function run on the GPU that writes into its host arguments: each written region
    is copied back to the caller's NumPy array, on the first call and on the cached ones.
    (The cached call's C write-back stored the CuPy result into the NumPy array itself,
    which a real CuPy refuses: "Implicit conversion to a NumPy array is not allowed".)"""
    def sgd(x, g, lr, out):
        x[1:] -= lr * g[1:]
        np.multiply(x, 2.0, out=out)
        return out

    f = tj.jit(sgd)
    for _ in range(3):
        x, g, out = X[0].astype(np.float64), X[1].astype(np.float64), np.empty(33)
        want_x, want_out = x.copy(), np.empty(33)
        want = sgd(want_x, g, 0.5, want_out)
        with tj.device("cuda"):
            got = f(x, g, 0.5, out)
        assert got is out and want is want_out
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(out, want_out)


def test_running_extremes_give_numpys_bits(cp):
    """np.maximum.accumulate and np.minimum.accumulate on the GPU (log-step scans by
    NumPy's rule, earlier value first): where -0.0 and 0.0 tie, NumPy's zero (the later
    one); where NaNs of two payloads come, the first; along either axis, over lengths that
    are and are not powers of two."""
    payloads = np.array([0x7FF8000000000001, 0xFFF8000000000002], np.uint64).view(np.float64)
    rng = np.random.default_rng(5)

    def extremes(x):
        return (np.maximum.accumulate(x, axis=-1), np.minimum.accumulate(x, axis=-1),
                np.maximum.accumulate(x, axis=0), np.minimum.accumulate(x, axis=0))

    f = tj.jit(extremes)
    for n in (1, 2, 5, 8, 33):
        x = rng.choice([-0.0, 0.0, 1.0, -1.0], (3, n))
        nans = np.where(rng.random((3, n)) < 0.15, rng.choice(payloads, (3, n)), x)
        for data in (x, x.astype(np.float32), nans):
            with tj.device("cuda"):
                got = gpu.on_host(f(data))
            for g, w in zip(got, extremes(data), strict=True):
                assert g.tobytes() == w.tobytes(), (n, data, g, w)


def _to_host(tree):
    if isinstance(tree, (tuple, list)):
        return type(tree)(_to_host(t) for t in tree)
    return tree if tree is None or isinstance(tree, (bool, int, float)) else host(tree)


@pytest.mark.parametrize("name", sorted(test_inplace.PROGRAMS))
def test_write_programs_on_the_gpu(name, cp):
    """test_inplace's programs that write into their arguments, run on the GPU with host
    arguments: each written region comes back to the caller's array, on the first call and
    on the cached ones. (CI runs this file on the emulated GPU; the whole backend-
    parametrised suite runs there with TRACEJIT_TEST_BACKENDS=cuda.)"""
    fn, args = test_inplace.PROGRAMS[name]
    f = tj.jit(fn, backend="cuda")
    for _ in range(3):
        want_args, got_args = test_inplace._copies(args), test_inplace._copies(args)
        want = fn(*want_args)
        test_inplace._assert_same(_to_host(f(*got_args)), want)
        for g, w in zip(got_args, want_args, strict=True):
            test_inplace._assert_same(g, w)


SPECTRAL = ("fft", "real", "imag")


def _assert_spectral_steps_on_the_gpu(f, *args) -> None:
    """Every fft, real and imag node of ``f``'s compiled graph runs on the GPU."""
    graph = f.lower(*args).optimized_graph
    nodes = [n for n in graph.nodes if n.op in SPECTRAL]
    assert nodes and all(graph.placement.on_target(n.out) for n in nodes), graph


def _assert_spectrum(got, want) -> None:
    """NumPy's dtype and shape, and its values within rounding: cuFFT factors and sums in
    another order than pocketfft, so the error is a few ulps of the largest magnitude."""
    got = host(got)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=0, atol=100 * np.finfo(want.dtype).eps * scale)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("real,cplx", [(np.float32, np.complex128), (np.float64, np.complex64)])
def test_fft_runs_on_the_gpu_as_cufft(cp, norm, real, cplx):
    """np.fft's four 1-d transforms are cupy.fft calls (cuFFT) on the GPU: along the last
    axis and axis 0, the input cut or zero-padded to ``n``, in each normalisation, in
    NumPy 2's dtypes (single precision stays single) and within rounding of its values."""
    x = RNG.standard_normal((12, 16)).astype(real)
    z = (RNG.standard_normal((12, 16)) + 1j * RNG.standard_normal((12, 16))).astype(cplx)

    def transforms(x, z):
        return (np.fft.fft(x, norm=norm), np.fft.fft(z, n=10, axis=0, norm=norm),
                np.fft.ifft(z, n=21, norm=norm), np.fft.ifft(x, axis=0, norm=norm),
                np.fft.rfft(x, n=11, norm=norm), np.fft.rfft(x, n=20, axis=0, norm=norm),
                np.fft.irfft(z, norm=norm), np.fft.irfft(z, n=7, axis=0, norm=norm),
                np.fft.irfft(x, n=40, norm=norm))

    f = tj.jit(transforms, device="cuda", strict=True)
    for g, w in zip(f(x, z), transforms(x, z), strict=True):
        _assert_spectrum(g, w)
    _assert_spectral_steps_on_the_gpu(f, x, z)


def test_fft_compositions_and_complex_parts_on_the_gpu(cp):
    """fft2, rfftn and irfftn (one cuFFT call per axis), transforms of int32 and bool
    input (complex128, as NumPy's), of an empty batch, and np.real / np.imag of a spectrum
    (CuPy's views) run on the GPU. np.abs of a complex spectrum runs on the host (the
    kernel language has no complex type), with the placement warning: so does the
    power spectrum's, whose window and square run on the GPU."""
    x = RNG.standard_normal((6, 8, 10)).astype(np.float32)
    i = RNG.integers(-9, 9, 16).astype(np.int32)
    b = RNG.random(16) > 0.5

    def spectra(x, i, b):
        s = np.fft.fft2(x)
        r = np.fft.rfftn(x, s=(5, 12), axes=(0, 2))
        return (s, r, np.fft.irfftn(r, s=(5, 12), axes=(0, 2)), np.real(s), np.imag(r),
                np.fft.fft(i), np.fft.rfft(b, norm="ortho"), np.fft.irfft(i),
                np.fft.rfft(x[:0], axis=1))

    def magnitude(x):
        return np.abs(np.fft.fft2(x)) + np.real(np.fft.fft(x, axis=0)).sum()

    def power(x):
        return np.abs(np.fft.rfft(x * np.hanning(x.shape[-1]))) ** 2

    f = tj.jit(spectra, device="cuda", strict=True)
    for g, w in zip(f(x, i, b), spectra(x, i, b), strict=True):
        _assert_spectrum(g, w)
    _assert_spectral_steps_on_the_gpu(f, x, i, b)
    for fn in (magnitude, power):
        g = tj.jit(fn, device="cuda")
        with pytest.warns(PlacementWarning, match=r"absolute \(elementwise, complex"):
            _assert_spectrum(g(x), fn(x))
        _assert_spectral_steps_on_the_gpu(g, x)


def test_irfft_of_float16_runs_on_the_host(cp):
    """NumPy's irfft keeps float16 where CuPy's returns float32: that transform runs on the
    host (with the placement warning), in NumPy's dtype; rfft of float16 (complex64 on
    both) runs on the GPU."""
    h = RNG.standard_normal(16).astype(np.float16)

    def halves(h):
        return np.fft.irfft(h), np.fft.rfft(h)

    f = tj.jit(halves, device="cuda")
    with pytest.warns(PlacementWarning, match=r"op fft \(spectral, float16\)"):
        got = f(h)
    for g, w in zip(got, halves(h), strict=True):
        _assert_spectrum(g, w)
    graph = f.lower(h).optimized_graph
    assert [graph.placement.where(n.out) for n in graph.nodes if n.op == "fft"] == \
        ["cpu", "cuda:0"]
