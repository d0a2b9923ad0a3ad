"""Complex arrays through the ops NumPy has for them: values, dtypes and the signs of zeros,
against NumPy itself.

No kernel language has a complex type, so on the CPU these steps are NumPy calls: results
are NumPy's bits on the reference and CPU backends (on CUDA, host steps and cuFFT). The
functions NumPy writes with a complex branch of its own are the ones to watch: ``var``,
``std``, ``nanvar`` and ``nanstd`` return real values (re*re + im*im), ``cov`` conjugates,
``corrcoef`` and ``round`` work part by part. Each of those gave a complex or otherwise
wrong answer before it was written out here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy_compare import assert_same, builtin_error

import tracejit as tj
from tracejit.errors import DTypeError, UnsupportedOperation

UNARY = ("negative positive absolute exp log sqrt square reciprocal sin cos tan sinh cosh "
         "tanh conjugate sign exp2 expm1 log2 log10 log1p arcsin arccos arctan arcsinh "
         "arccosh arctanh isnan isinf isfinite rint logical_not").split()
BINARY = ("add subtract multiply true_divide power float_power equal not_equal less greater "
          "maximum minimum fmax fmin logical_and").split()
FUNCTIONS = {
    "var": lambda z: np.var(z),
    "std": lambda z: np.std(z, axis=0, ddof=1),
    "nanvar": lambda z: np.nanvar(z, axis=1),
    "nanstd": lambda z: np.nanstd(z),
    "cov": lambda z: np.cov(z),
    "cov-columns": lambda z: np.cov(z, rowvar=False, bias=True),
    "corrcoef": lambda z: np.corrcoef(z),
    "round": lambda z: np.round(z * 10, 1),
    "round-negative": lambda z: np.round(z * 100, -1),
    "mean": lambda z: np.mean(z, axis=1, keepdims=True),
    "mean-of-3": lambda z: np.mean(z[:3]) + np.mean(z[:, :3], axis=1),  # (1/3 rounds)
    "sum": lambda z: z.sum(axis=0),
    "prod": lambda z: np.prod(z, axis=1),
    "cumsum": lambda z: np.cumsum(z, axis=1),
    "cumprod": lambda z: np.cumprod(z),
    "matmul": lambda z: z @ z.T,
    "dot": lambda z: np.dot(z, z[0]),
    "sort": lambda z: np.sort(z, axis=1),
    "argsort": lambda z: np.argsort(z, axis=0, kind="stable"),
    "max": lambda z: np.max(z, axis=1),
    "argmin": lambda z: np.argmin(z),
    "median": lambda z: np.median(z, axis=0),
    "where": lambda z: np.where(np.abs(z) > 1, z, 2j),
    "clip": lambda z: np.clip(z, 0, 1 + 1j),
    "structural": lambda z: np.concatenate([z[::-1, 1:].T, np.roll(z, 1)[:3]]),
    "writes": lambda z: _written(z),
    "to-real": lambda z: z.astype(np.float64) + z.real,
    "mixed": lambda z: z * np.float32(2) + 1.5 + np.arange(4) - 3j,
    "count": lambda z: np.count_nonzero(z, axis=0),
}


def _written(z):
    c = z.copy()
    c[0] = 5j
    c[1:, 2] += 1.5
    return c


def _values(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    z = (rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))).astype(dtype)
    z[0, 0], z[1, 1], z[3, 2] = 0, 1j, complex(-0.0, -0.0)
    return z


def _same(fn, z, backend, sums: bool = False):
    """NumPy's bits, but within rounding where a compiled backend adds real values in its
    own order (``sums``: a float sum the CPU may fuse into a kernel, Exactness.ORDER)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log(0), arctanh(1) and the like
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want = fn(z)
        got = tj.jit(fn, backend=backend)(z)
    exact = backend == "reference" or (backend == "cpu" and not sums)
    assert_same(got, want, None if exact else 10.0)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_ufuncs(name, dtype, backend):
    _same(lambda z: getattr(np, name)(z * 1.5 - 0.25j), _values(dtype), backend)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_ufuncs(name, dtype, backend):
    _same(lambda z: getattr(np, name)(z, z.T * (0.5 - 1j)), _values(dtype), backend)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions(name, dtype, backend):
    _same(FUNCTIONS[name], _values(dtype), backend, sums=True)


def test_nan_functions_of_complex_values(backend):
    z = _values("complex128")
    z[2, 1] = complex(np.nan, 1.0)
    _same(lambda z: (np.nanvar(z, axis=0), np.nanstd(z, ddof=1), np.nansum(z, axis=1),
                     np.nanmean(z)), z, backend, sums=True)


def test_refusals_are_typed():
    """What complex values cannot do yet raises, never answers as if they were real."""
    z = _values("complex128")
    for fn, error in ((lambda z: np.linalg.norm(z), UnsupportedOperation),
                      (lambda z: np.vdot(z, z), UnsupportedOperation),
                      (lambda z: np.searchsorted(z[0], z[1]), DTypeError)):
        with pytest.raises(error):
            tj.jit(fn, backend="reference")(z)


STATISTICS = {
    "var": lambda z, axis: np.var(z, axis=axis),
    "std": lambda z, axis: np.std(z, axis=axis, ddof=1),
    "nanvar": lambda z, axis: np.nanvar(z, axis=axis),
    "mean": lambda z, axis: np.mean(z, axis=axis),
    "cov": lambda z, axis: np.cov(z, rowvar=axis != 0),
    "corrcoef": lambda z, axis: np.corrcoef(z, rowvar=axis != 0),
    "round": lambda z, axis: np.round(z * 7, 1),
}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_drawn_statistics(data, backend):
    """NumPy's complex branches on drawn shapes (square, size 1, size 0 among them, where
    an axis mix-up or a missing conjugate shows), axes and dtypes, with the inexact result
    flowing into one more step; NumPy's error class where NumPy raises."""
    side = data.draw(st.sampled_from([1, 2, 3, 5]))
    shape = tuple(data.draw(st.sampled_from([side, side, 0, 1, 4]))
                  for _ in range(data.draw(st.integers(1, 2))))
    axis = data.draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))))
    name = data.draw(st.sampled_from(sorted(STATISTICS)))
    dtype = data.draw(st.sampled_from(["complex64", "complex128"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    z = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)

    def fn(z):
        return STATISTICS[name](z, axis) * 1.5 + 0.25

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # empty slices, ddof >= size
        try:
            want = fn(z)
        except Exception as e:
            with pytest.raises(builtin_error(e)):
                tj.jit(fn, backend=backend)(z)
            return
        got = tj.jit(fn, backend=backend)(z)
    assert_same(got, want, None if backend == "reference" else 10.0)
