"""Correlations run by the fused driver (backends/cpu/fused_steps.py, ``correlate``).

A run of small steps holding ``np.correlate`` or ``np.convolve`` calls (a multi-channel
1-d convolution layer, a filter bank) is one fused driver call in the later runner, the
correlations computed by the driver's own direct loop. These check that loop against
NumPy in every mode, with the operands swapped (NumPy correlates the longer with the
shorter and reverses), for float and integer operands, in both tiers, and that the run
is wrapped at all. A lone correlation small enough that NumPy's call costs more than its
loop is a compiled kernel of its own in the later runner (``codegen._correlate_kernel``).
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import cpu
from tracejit.backends.cpu import fused_steps
from tracejit.backends.cpu.loops_straight import wrap_runs


def bank(x, w, mode, convolve=False, swap=False):
    """Each row of ``w`` correlated with each row of ``x``, summed per output row."""
    op = np.convolve if convolve else np.correlate
    rows = []
    for o in range(w.shape[0]):
        acc = None
        for c in range(x.shape[0]):
            r = op(w[o, c], x[c], mode) if swap else op(x[c], w[o, c], mode)
            acc = r if acc is None else acc + r
        rows.append(acc * 2)
    return np.stack(rows)


def _args(dtype, n=13, m=4):
    rng = np.random.default_rng(n * 31 + m)
    if np.dtype(dtype).kind == "b":
        return rng.random((2, n)) > 0.5, rng.random((2, 2, m)) > 0.5
    if np.dtype(dtype).kind in "iu":
        return (rng.integers(-9, 9, (2, n)).astype(dtype),
                rng.integers(-9, 9, (2, 2, m)).astype(dtype))
    return rng.standard_normal((2, n)).astype(dtype), rng.standard_normal((2, 2, m)).astype(dtype)


@pytest.fixture
def default_threshold(monkeypatch):
    """The default kernel-size threshold (the tests compile every kernel otherwise)."""
    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)


def _scans(graph) -> list:
    return [n for n in graph.nodes if n.op == "scan" and n.attrs["loop"].body.name == "straight"]


def _tiers(fn, *args, wrapped: bool = True):
    graph = tj.jit(fn, backend="cpu").lower(*args).optimized_graph
    if wrapped:
        assert _scans(wrap_runs(graph)), "the run of correlations was not wrapped"
    first = cpu._runner(graph, False, None)
    later = cpu._runner(graph, False, None, later=True)
    return first, later


def _check(got, want, dtype):
    """NumPy's bits: the loops add each output's terms in NumPy's order."""
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["valid", "same", "full"])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("convolve", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_both_tiers_compute_numpys_correlations(mode, swap, convolve, dtype):
    """Bit for bit: the driver runs the float ones NumPy sums itself (``valid``) and
    integer ones in every mode; the others stay NumPy's calls."""
    def fn(x, w):
        return bank(x, w, mode, convolve, swap)

    x, w = _args(dtype)
    want = fn(x, w)
    graph = tj.jit(fn, backend="cpu").lower(x, w).optimized_graph
    driver = [fused_steps.supported(n) for n in graph.nodes if n.op == "correlate"]
    assert all(driver) == (mode == "valid" or dtype == np.int64) and any(driver) == all(driver)
    for runner in _tiers(fn, x, w, wrapped=all(driver)):
        for _ in range(2):  # the second call reuses the driver's scratch arrays
            (got,) = runner.fn(x, w)
            _check(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64, np.uint16])
@pytest.mark.parametrize("mode", ["valid", "full"])
def test_other_dtypes(dtype, mode):
    def fn(x, w):
        return bank(x, w, mode)

    x, w = _args(dtype)
    want = fn(x, w)
    for runner in _tiers(fn, x, w, wrapped=mode == "valid" or dtype != np.float32):
        (got,) = runner.fn(x, w)
        _check(got, want, dtype)


def test_integer_sums_wrap_as_numpys():
    x = np.full((2, 9), 100, np.int8)
    w = np.full((2, 2, 3), 90, np.int8)

    def fn(x, w):
        return bank(x, w, "full")

    (got,) = _tiers(fn, x, w)[1].fn(x, w)
    np.testing.assert_array_equal(got, fn(x, w))


@pytest.mark.parametrize("m", [1, 11, 12, 40])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_kernel_lengths(m, dtype):
    """One tap, NumPy's longest small kernel and longer ones (where NumPy's float sums
    are BLAS's dot products: those stay NumPy's)."""
    def fn(x, w):
        return bank(x, w, "valid")

    x, w = _args(dtype, n=max(m, 13), m=m)
    graph = tj.jit(fn, backend="cpu").lower(x, w).optimized_graph
    node = next(n for n in graph.nodes if n.op == "correlate")
    assert fused_steps.supported(node) == (m <= 11 or dtype == np.int32)
    (got,) = cpu._runner(graph, False, None, later=True).fn(x, w)
    _check(got, fn(x, w), dtype)


def test_jit_after_the_later_runner_matches_numpy():
    def fn(x, w):
        return bank(x, w, "valid", convolve=True)

    x, w = _args(np.float64, n=64, m=5)
    f = tj.jit(fn, backend="cpu")
    _check(f(x, w), fn(x, w), np.float64)
    assert f.wait_compiled(timeout=300)
    _check(f(x, w), fn(x, w), np.float64)
    _check(f(x[:, ::-1], w), fn(x[:, ::-1], w), np.float64)  # a strided argument


def test_bool_correlations_stay_numpy_calls():
    """A bool correlation is a logical or of ands: not the driver's loop."""
    f = tj.jit(lambda a, v: np.correlate(a, v, "full"), backend="cpu")
    node = next(n for n in f.lower(np.ones(5, bool), np.ones(3, bool))
                .optimized_graph.nodes if n.op == "correlate")
    assert not fused_steps.supported(node)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16])
@pytest.mark.parametrize("lengths", [(30, 7), (7, 30), (11, 11), (1, 5), (5, 1), (40, 17)])
@pytest.mark.parametrize("mode", ["valid", "same", "full"])
def test_a_lone_correlation_is_a_kernel_of_the_later_runner(mode, lengths, dtype,
                                                            default_threshold):
    """One correlation (NumPy's call costs more than its loop) is a compiled kernel in
    the later runner where the loop gives NumPy's bits; the first runner calls NumPy.
    Both give NumPy's answer."""
    rng = np.random.default_rng(sum(lengths))
    a, v = (rng.integers(-50, 50, n).astype(dtype) for n in lengths)

    def fn(a, v):
        return np.correlate(a, v, mode)

    graph = tj.jit(fn, backend="cpu").lower(a, v).optimized_graph
    later = cpu._runner(graph, False, None, later=True)
    node = next(n for n in graph.nodes if n.op == "correlate")
    assert ("kernel0" in later.namespace) == fused_steps.supported(node)
    first = cpu._runner(graph, False, None)
    assert "kernel0" not in first.namespace
    for runner in (first, later):
        (got,) = runner.fn(a, v)
        _check(got, fn(a, v), dtype)
        (got,) = runner.fn(a[::-1], v)  # not C-contiguous: the runner copies it
        _check(got, fn(a[::-1], v), dtype)


def test_a_large_correlation_stays_numpys(default_threshold):
    a, v = np.ones(1 << 17), np.ones(3)
    graph = tj.jit(lambda a, v: np.correlate(a, v, "same"), backend="cpu").lower(a, v)
    later = cpu._runner(graph.optimized_graph, False, None, later=True)
    assert "kernel0" not in later.namespace


def _pool(x):
    h, w = x.shape
    return x.reshape(h // 2, 2, w // 2, 2).max(axis=(1, 3)), x.reshape(h // 2, 2, w // 2, 2).min(
        axis=(3, 1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
@pytest.mark.parametrize("n", [2, 6, 24])
def test_a_pooling_is_a_kernel_of_the_later_runner(dtype, n, default_threshold):
    """A max or min over axes that are not one run (NumPy's iterator walks pairs) is a
    compiled kernel of the later runner, exact: NaN and signed zeros as NumPy's."""
    x = np.random.default_rng(n).standard_normal((n, n)).astype(dtype) * 4
    if x.dtype.kind == "f":
        x[0, 0], x[1, -1], x[-1, -1] = np.nan, -0.0, 0.0
    graph = tj.jit(_pool, backend="cpu").lower(x).optimized_graph
    later = cpu._runner(graph, False, None, later=True)
    first = cpu._runner(graph, False, None)
    assert any(name.startswith("kernel") for name in later.namespace)
    assert not any(name.startswith("kernel") for name in first.namespace)
    for runner in (first, later):
        for got, want in zip(runner.fn(x), _pool(x), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert (np.signbit(got) == np.signbit(want)).all()


@pytest.mark.parametrize("axis", [-1, (0, 1), None, 0])
def test_a_reduction_over_one_run_of_axes_stays_numpys(axis, default_threshold):
    x = np.ones((8, 8))
    graph = tj.jit(lambda x: x.max(axis=axis), backend="cpu").lower(x).optimized_graph
    later = cpu._runner(graph, False, None, later=True)
    assert not any(name.startswith("kernel") for name in later.namespace)
