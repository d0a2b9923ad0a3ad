"""Runner steps written as NumPy code writes them (backends/cpu/lib_steps.py,
scalar_arrays.py, codegen.py), each checked against NumPy on both runners (the first, and
the later one after ``wait_compiled``), under the default kernel-size policy and with
every kernel compiled, and through both runners' source:

- weakly typed 0-d arithmetic (``-lr`` of a Python float) as Python's operators, its
  result a Python scalar that NumPy 2 promotes weakly (``x32 * -lr`` is float32);
- a weak ufunc result read only by conversions (``np.cos(theta)``) as the NumPy scalar;
- an array of 0-d values (``np.array([[c, -s], [s, c]])``) as one ``np.array`` call;
- ``np.linalg.solve`` of a 1-d ``b`` and the product with the solution, on the vector;
- no ``operand`` around a matmul a kernel reads, no dtype where an argument's is known,
  ``.T`` for a transpose reversing the axes.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tests.programs.linalg import sgd_update
from tracejit.backends.cpu import _loop_step, _straight
from tracejit.backends.cpu.codegen import generate
from tracejit.config import config


@pytest.fixture(autouse=True, params=[4096, 0], ids=["default", "every-kernel"])
def policy(request, monkeypatch):
    monkeypatch.setattr(config, "min_kernel_size", request.param)


def _same(got, want, rtol: float = 0.0) -> None:
    """``got`` is NumPy's ``want``: bit for bit (within ``rtol``, relative and absolute),
    dtype included, a 0-d result a NumPy scalar of that dtype (where NumPy gives a Python
    scalar, jit gives its NumPy scalar). jit's results are in native byte order, where
    NumPy's ``np.empty_like`` of a byte-swapped argument keeps its order."""
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype.newbyteorder("="), (g, w)
        assert np.asarray(g).shape == np.asarray(w).shape
        if np.ndim(w) == 0:
            assert type(g) is np.asarray(w)[()].__class__, (type(g), type(w))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)


def _both_runners(fn, *args, rtol: float = 0.0) -> tuple[str, str]:
    """Check fn under jit against NumPy on its first runner and its later one; return
    both runners' source."""
    want = fn(*args)
    f = tj.jit(fn, backend="cpu")
    _same(f(*args), want, rtol)
    f.wait_compiled()
    _same(f(*args), want, rtol)
    graph = f.lower(*args).optimized_graph
    first = generate(graph, loop_step=_loop_step).runner
    later = generate(_straight(graph), later=True, loop_step=_loop_step).runner
    return first, later


def _products(dtype=np.float64) -> float:
    """The tolerance of a small matmul: with every kernel compiled it is a kernel's sums
    (as it was before these rewrites), else NumPy's own call, bit for bit."""
    return 0.0 if config.min_kernel_size else 16 * float(np.finfo(dtype).eps)


def _runners(fn, *args) -> str:
    return "\n".join(_both_runners(fn, *args))


# --------------------------------------------------------------- weak scalars

def weak_arithmetic(x, lr):
    return x * -lr, x * (lr * 2.0 - 1.0), x * abs(lr), x * (lr * lr), x + lr / 3


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.complex64])
@pytest.mark.parametrize("lr", [0.5, -0.0, 0.0, np.inf, -np.inf, np.nan, 1e308, 3.0])
def test_weak_scalar_arithmetic_promotes_weakly(dtype, lr):
    x = (np.arange(1, 6) % 4).astype(dtype)
    with np.errstate(all="ignore"):
        source = _runners(weak_arithmetic, x, lr)
    assert "lib0(a1)" not in source and "= -a1" in source and "abs(a1)" in source
    assert "a1 * a1" in source and ".item()" in source  # (the division: NumPy's ufunc)


@pytest.mark.parametrize("n", [1, 5])
def test_a_weak_scalar_returned_and_read_by_a_kernel(n):
    def scaled(x, lr):
        neg = -lr
        return neg, np.abs(x) * neg + x, neg * 2.0

    x = np.linspace(0, 1, n, dtype=np.float32)
    source = _runners(scaled, x, 0.25)
    assert "float(t" in source or "float(a" in source or "kernel" not in source


def big(x, lr):
    return x * (lr * lr), x * -(lr + lr)


def test_weak_scalar_overflow_is_pythons():
    with np.errstate(all="raise"):  # (Python's float arithmetic neither warns nor raises)
        _runners(big, np.ones(3), 1e200)


def test_weak_scalar_cast_overflows_as_numpy():
    """NumPy casts the Python float to the array's float32, where it overflows to inf."""
    with np.errstate(over="ignore"):
        _runners(big, np.ones(3, np.float32), 1e200)


@pytest.mark.parametrize("n", [1, 2, 300])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_update_negates_the_python_float(n, dtype):
    rng = np.random.default_rng(n)
    x, g = rng.random(n).astype(dtype), rng.random(n).astype(dtype)
    _, later = _both_runners(sgd_update, x, g, 0.1)
    assert "= -a2" in later and "lib0(a2)" not in later
    big = rng.random(2 * n).astype(dtype)
    _same(tj.jit(sgd_update, backend="cpu")(big[::2], g, 0.1), sgd_update(big[::2], g, 0.1))


def test_sgd_update_arguments_strided_or_byte_swapped():
    """The runner makes kernel arguments C-contiguous in the signature's native dtype: a
    strided view, and a byte-swapped ``'>i4'``/``'>f8'`` array (whose signature dtype is
    the native one), read as NumPy reads them. (A guard without the dtype once let a
    kernel read big-endian int32 bytes as little-endian: 3 came back as 33554433.)"""
    rng = np.random.default_rng(1)
    x, g = rng.random(300), rng.random(300)
    _, later = _both_runners(sgd_update, x, g, 0.1)
    if config.min_kernel_size == 0:
        assert "np.ascontiguousarray(a0, np.float64)" in later and "float(t" in later
    f = tj.jit(sgd_update, backend="cpu")
    f(x, g, 0.1)
    f.wait_compiled()
    for xs, gs in ((rng.random(600)[::2], g), (x, np.asfortranarray(rng.random((300, 1)))[:, 0]),
                   (rng.random((300, 2))[:, 1], rng.random((2, 300))[1]),
                   (x.astype(">f8"), g)):
        _same(f(xs, gs, 0.1), sgd_update(xs, gs, 0.1))


@pytest.mark.parametrize("dtype", [">i4", ">i8", ">u2", ">f4", ">f8"])
def test_byte_swapped_arguments_reach_kernels_as_numbers(dtype):
    x = np.arange(1, 6).astype(dtype)
    for fn in (lambda x: x * 2 + 1, lambda x, y: (x + y) * y):
        args = (x,) if fn.__code__.co_argcount == 1 else (x, x[::-1].copy())
        f = tj.jit(fn, backend="cpu")
        first = f(*args)
        f.wait_compiled()
        for got in (first, f(*args)):
            _same(got, fn(*args))


@pytest.mark.parametrize("theta", [0.7, 0.0, -0.0, np.pi, np.nan, np.inf])
def test_a_ufunc_of_a_python_float_is_a_strong_numpy_scalar(theta):
    def mixed(x, theta):
        return x * np.cos(theta), x * -np.sin(theta), np.sin(theta)

    with np.errstate(all="ignore"):
        source = _runners(mixed, np.ones(4, np.float32), theta)
    assert "astype" not in source


# --------------------------------------------------------------- arrays of 0-d values

def rotate_points(points, theta):
    c, s = np.cos(theta), np.sin(theta)
    R = np.array([[c, -s], [s, c]])
    return points @ R.T


@pytest.mark.parametrize("theta", [0.7, 0.0, np.nan, -np.inf])
@pytest.mark.parametrize("n", [1, 2, 200])
def test_rotation_matrix_is_one_array_call(theta, n):
    pts = np.random.default_rng(n).random((n, 2))
    with np.errstate(all="ignore"):
        # (a product over K=2 is split into products and sums, as it was before:
        # passes/contract.py; the later runner is a straight-line run's driver)
        first, _ = _both_runners(rotate_points, pts, theta, rtol=16 * np.finfo(float).eps)
    assert "= np.array([[t" in first and "np.concatenate" not in first
    assert "astype" not in first
    assert ".T  # transpose" in first or not config.min_kernel_size  # (else a kernel's)


@pytest.mark.parametrize("t", [0.3, np.nan])
def test_arrays_of_numpy_scalars_shared_returned_and_read_by_kernels(t):
    def built(x, t):
        a, b = np.cos(t), np.sin(t)
        c = a * b
        v = np.array([a, b, c])
        m = np.array([[[a, b]], [[c, a]]])
        one = np.array([b])
        return v, m * 2.0, one, v * v + x[:3], m.sum(axis=0), np.array([[c], [a]])

    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(5).random(7).astype(dtype)
        source = _runners(built, x, t)
        assert "np.array([[[t" in source and "np.array([t" in source  # (np.array([b]):
        assert "np.concatenate((t" in source  # one element, left a copy of its reshape)


# --------------------------------------------------------------- solves of vectors

def solve_with_residual(A, b):
    x = np.linalg.solve(A, b)
    return x, np.linalg.norm(A @ x - b)


@pytest.mark.parametrize("n", [1, 2, 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_solve_of_a_vector_and_its_product_take_the_vector(n, dtype):
    rng = np.random.default_rng(n)
    A = (rng.random((n, n)) + n * np.eye(n)).astype(dtype)
    b = rng.random(n).astype(dtype)
    for source in _both_runners(solve_with_residual, A, b, rtol=_products(dtype)):
        assert "solve, of a vector" in source  # (a kernel's product reads the column)
        assert "reshape" not in source or not config.min_kernel_size


def test_solved_column_read_elsewhere_is_the_vector_reshaped():
    def uses(A, b):
        x = np.linalg.solve(A, b)
        return x @ A, A @ x, x[:, None] * 2.0, x

    rng = np.random.default_rng(9)
    A, b = rng.random((4, 4)) + 4 * np.eye(4), rng.random(4)
    _both_runners(uses, A, b, rtol=_products())


def test_solve_of_a_singular_matrix_raises_as_numpy():
    f = tj.jit(solve_with_residual, backend="cpu")
    for _ in range(2):
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix") as info:
            f(np.ones((3, 3)), np.ones(3))
        assert "solve_with_residual" in str(info.value) or info.value.location is not None
        f.wait_compiled()


# --------------------------------------------------------------- matmuls and transposes

@pytest.mark.parametrize("order", ["C", "F"])
def test_a_matmul_read_by_a_kernel_needs_no_operand(order):
    def layer(x, w1, w2):
        h = x @ w1
        return np.where(h < 0, 0.0, h) @ w2

    rng = np.random.default_rng(2)
    x, w1, w2 = (np.asarray(rng.standard_normal((16, 16)), order=order) for _ in range(3))
    first, later = _both_runners(layer, x, w1, w2, rtol=_products())
    assert "operand(" not in first and "operand(" not in later
    if config.min_kernel_size:  # (the later runner's kernel reads the product)
        assert "np.dot(a0, a1) if " in later and "kernel1(" in later


# --------------------------------------------------------------- cumsum and draws

@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float32])
@pytest.mark.parametrize("cum_dtype", [None, float, np.int64])
def test_cumsum_and_cumprod_called_positionally(dtype, cum_dtype):
    def cum(x, m):
        c = np.cumsum(x, dtype=cum_dtype)
        c[2:] = c[2:] - c[:-2]
        # (along the first axis: a scan along the last may join a loop kernel)
        return c[1:] / 2, np.cumprod(m, axis=0, dtype=cum_dtype), np.cumsum(m, axis=0)

    x = (np.arange(1, 9) % 5).astype(dtype)
    m = (np.arange(1, 7).reshape(2, 3) % 4).astype(dtype)
    with np.errstate(all="ignore"):
        source = _runners(cum, x, m)
    assert "**attrs" not in source and ".cumsum(0, dtype" in source
    assert ".cumprod(0, dtype" in source


@pytest.mark.parametrize("n", [1, 200])
def test_float64_draws_read_by_kernels_need_no_operand(n):
    def noisy(signal, sigma):
        return (signal + sigma * np.random.randn(*signal.shape),
                signal * np.random.normal(0.0, 2.0, size=signal.shape),
                signal + np.random.randint(0, 5, size=signal.shape))

    def both(signal, sigma):
        np.random.seed(7)
        return noisy(signal, sigma)

    signal = np.sin(np.linspace(0, 6, n))
    want = both(signal, 0.1)
    f = tj.jit(noisy, backend="cpu")
    np.random.seed(7)
    _same(f(signal, 0.1), want)
    f.wait_compiled()
    np.random.seed(7)
    _same(f(signal, 0.1), want)
    graph = f.lower(signal, 0.1).optimized_graph
    later = generate(_straight(graph), later=True, loop_step=_loop_step).runner
    if config.min_kernel_size == 0:  # (randint's int64 draw keeps its check)
        assert "operand(draw" in later and "= draw0(*params0)  #" in later
        assert "= draw1(*params1, **attrs1)  #" in later


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int8])
@pytest.mark.parametrize("n,m", [(1, 1), (5, 5), (7, 3), (3, 7)])
def test_correlate_called_as_numpy(mode, dtype, n, m):
    def xcorr(a, v):
        c = np.correlate(a, v, mode=mode)
        return c, np.argmax(np.abs(c)) - (len(v) - 1)

    rng = np.random.default_rng(n * 10 + m)
    a, v = ((rng.random(k) * 8).astype(dtype) for k in (n, m))  # (int8: wrapping sums)
    first, _ = _both_runners(xcorr, a, v)
    if config.min_kernel_size:
        assert f"np.correlate(a0, a1, {mode!r})" in first
