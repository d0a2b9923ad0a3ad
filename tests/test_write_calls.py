"""Small calls that write into their arguments or multiply a matrix by a vector.

A matrix-vector product runs as one NumPy call on the 1-D operand (the trace spells it
``reshape, matmul, reshape``). Checked against NumPy on both runners (the first one, and
the later one once its small kernels are compiled), with the arguments aliasing as NumPy
lets them, never by timing.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.config import config
from tracejit.passes.contract import SMALL_K


@pytest.fixture(params=["default", "compile_all"])
def policy(request, monkeypatch):
    """The default kernel-size threshold (small kernels compiled later) or every kernel
    compiled at once."""
    monkeypatch.setattr(config, "min_kernel_size", 4096 if request.param == "default" else 0)
    return request.param


def _both_tiers(f, make_args):
    """``f``'s results on fresh arguments on its first call and once its later runner
    runs, each with the arguments as the call left them."""
    first_args = make_args()
    first = f(*first_args)
    f.wait_compiled()
    later_args = make_args()
    return (first, first_args), (f(*later_args), later_args)


def mvt(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += y_2 @ A


@pytest.mark.parametrize("m, n", [(24, 24), (1, 1), (3, 5), (5, 3)])
def test_matrix_vector_products_write_into_the_arguments(policy, m, n):
    rng = np.random.default_rng(m * 10 + n)
    x1, x2, y1, y2, a = rng.random(m), rng.random(n), rng.random(n), rng.random(m), \
        rng.random((m, n))

    def make():
        return x1.copy(), x2.copy(), y1, y2, a

    want = make()
    mvt(*want)
    f = tj.jit(mvt)
    for got, args in _both_tiers(f, make):
        assert got is None
        # (a product over a few terms compiled into a kernel sums in its own order)
        np.testing.assert_allclose(args[0], want[0], rtol=1e-14)
        np.testing.assert_allclose(args[1], want[1], rtol=1e-14)
        if n > SMALL_K and m > SMALL_K:  # NumPy's own call: its bits
            np.testing.assert_array_equal(args[0], want[0])
            np.testing.assert_array_equal(args[1], want[1])
    if n > SMALL_K:  # (a product over a few terms is a loop kernel when compiled)
        assert "matmul of a vector" in f.lower(*make()).source


def test_the_products_are_single_numpy_calls_without_reshapes():
    f = tj.jit(lambda a, y: (a @ y, y @ a))
    a, y = np.ones((24, 24)), np.arange(24.0)
    f(a, y)
    runner = f.lower(a, y).source.split("# runner")[-1]
    assert runner.count("matmul of a vector") == 2
    assert "reshape" not in runner


def test_a_product_updating_its_own_vector_reads_it_first(policy):
    """``x += A @ x``: NumPy computes the product into a new array before adding."""
    def update(x, a):
        x += a @ x
        return x

    rng = np.random.default_rng(3)
    x0, a = rng.random(6), rng.random((6, 6))
    want = update(x0.copy(), a)
    f = tj.jit(update)
    for got, args in _both_tiers(f, lambda: (x0.copy(), a)):
        assert got is args[0]
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_a_vector_also_used_as_a_column_keeps_its_reshape(policy):
    def f(a, y):
        return a @ y, y.reshape(-1, 1) * 2, (y @ a).sum()

    rng = np.random.default_rng(4)
    a, y = rng.random((5, 5)), rng.random(5)
    want = f(a, y)
    for got, _ in _both_tiers(tj.jit(f), lambda: (a, y)):
        for g, w in zip(got, want, strict=True):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-14)


@pytest.mark.parametrize("adtype, ydtype", [(np.float32, np.float64), (np.int64, np.float32),
                                            (np.float32, np.float32)])
def test_a_product_of_mixed_dtypes_as_numpy(policy, adtype, ydtype):
    def f(a, y, z):
        return a @ y + z, y @ a * z

    rng = np.random.default_rng(5)
    a, y = (rng.random((7, 7)) * 8).astype(adtype), (rng.random(7) * 8).astype(ydtype)
    z = rng.random(7).astype(np.float32)
    want = f(a, y, z)
    for got, _ in _both_tiers(tj.jit(f), lambda: (a, y, z)):
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_vector_dot_and_a_matrix_product_are_left_alone(policy):
    def f(a, y):
        return y @ y, a @ a

    rng = np.random.default_rng(6)
    a, y = rng.random((4, 4)), rng.random(4)
    want = f(a, y)
    for got, _ in _both_tiers(tj.jit(f), lambda: (a, y)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-14)
