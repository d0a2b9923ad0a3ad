"""Comparing tracejit's results with NumPy's, shared by the surface and differential tests.

The reference backend interprets the IR with NumPy, so its results are NumPy's bit for bit.
A compiled backend is not: its float math (``TRANSCENDENTAL``) comes from its own vectorised
routines, accurate to ``ULP_BOUND`` units in the last place, and its sums and products
accumulate in another order than NumPy's pairwise summation. ``assert_same`` takes the
tolerance a result is allowed: exact (``None``), ``ULP`` or a rounding-error scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracejit import check
from tracejit.ir.registry import REGISTRY, ULP_BOUND, Exactness

# Float ops a compiled backend computes with its own, not correctly rounded, routines (sqrt is
# correctly rounded everywhere: exact), within ULP_BOUND: their definitions say so.
TRANSCENDENTAL = frozenset(n for n, d in REGISTRY.items() if d.exactness is Exactness.ULP)
RTOL = {np.dtype(f"float{8 * size}"): rtol for size, rtol in check.RTOL.items()}


class _Ulp:
    def __repr__(self) -> str:
        return "ULP"


ULP = _Ulp()  # the tolerance of a TRANSCENDENTAL result on a compiled backend


class _Zeros:
    def __repr__(self) -> str:
        return "ZEROS"


# NumPy's values, a tie of -0.0 and 0.0 either zero: a sort or partition by another
# algorithm than NumPy's (the GPU's stable sort, docs/differences.md)
ZEROS = _Zeros()


def exact(backend: str) -> bool:
    """Whether ``backend`` computes float math and sums bit for bit as NumPy does."""
    return backend == "reference"


def builtin_error(exc: Exception) -> type | tuple[type, ...]:
    """The builtin exception class(es) tracejit must raise where NumPy raised ``exc``."""
    if isinstance(exc, np.exceptions.AxisError):
        return (ValueError, IndexError)
    return next(cls for cls in type(exc).__mro__ if cls.__module__ == "builtins")


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Units in the last place between finite floats of one dtype (zeros' signs ignored)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[want.dtype.itemsize]
    lowest = np.iinfo(bits).min

    def ordered(x: np.ndarray) -> np.ndarray:  # monotonic in x; -0.0 and 0.0 both map to 0
        b = np.ascontiguousarray(x, want.dtype).view(bits).astype(object)
        return np.where(b < 0, lowest - b, b)

    return np.abs(ordered(got) - ordered(want))


def assert_within_ulp(got: np.ndarray, want: np.ndarray, bound: int = ULP_BOUND) -> None:
    """Same NaNs and infinities; finite values within ``bound`` ULP of each other."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), "NaN pattern")
    special = np.isinf(got) | np.isinf(want)
    np.testing.assert_array_equal(got[special], want[special], "infinities")
    finite = np.isfinite(got) & np.isfinite(want)
    if not finite.any():
        return
    err = ulp_distance(got[finite], want[finite])
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (
        f"{err[worst]} ULP (bound {bound}): got {got[finite][worst]!r}, "
        f"NumPy {want[finite][worst]!r}"
    )


def assert_same(got: Any, want: Any, tol: Any = None) -> None:
    """``got`` is NumPy's ``want`` (a pytree): same containers; leaves with 0-d results as
    NumPy scalars, same shape, dtype and values (NaN equal to NaN). Float values: exact with
    the signs of zeros if ``tol`` is None, exact but for them if it is ``ZEROS``, within
    ``ULP_BOUND`` if it is ``ULP``, else within rounding of the scale ``tol`` (``RTOL``
    relative to both it and the value)."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), f"{got!r} is not like {want!r}"
        for g, w in zip(got, want, strict=True):
            assert_same(g, w, tol)
        return
    if want is None:  # an empty pytree (a loop's ys of None)
        assert got is None, f"{got!r} is not None"
        return
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{got!r} is not like {want!r}"
        for key in want:
            assert_same(got[key], want[key], tol)
        return
    want = np.asarray(want)
    kind = np.generic if want.ndim == 0 else np.ndarray
    assert isinstance(got, kind), f"expected {kind.__name__}, got {type(got).__name__}"
    assert (got.shape, got.dtype) == (want.shape, want.dtype), "shape and dtype"
    if tol is not None and want.dtype.kind == "f":
        if tol is ZEROS:
            np.testing.assert_array_equal(got, want)
            return
        if tol is ULP:
            assert_within_ulp(np.asarray(got), want)
            return
        rtol = RTOL[want.dtype]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * tol, equal_nan=True)
        return
    if tol is not None and tol is not ZEROS and want.dtype.kind == "c":  # each part
        assert_same(got.real, want.real, tol)
        assert_same(got.imag, want.imag, tol)
        return
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        negative = np.signbit(got) & ~np.isnan(got)
        np.testing.assert_array_equal(negative, np.signbit(want) & ~np.isnan(want), "signbit")


def hardware_nans(backend: str) -> bool:
    """Whether ``backend`` gives its hardware's NaN for an invalid operation (``inf -
    inf``): a real GPU's canonical NaN is 0x7fffffff, x86's (NumPy's here, and the emulated
    GPU's) 0xffc00000. Its NaNs then match NumPy's as NaNs, not bit for bit."""
    import gpu

    return backend == "cuda" and gpu.REAL


def lapack_differs(backend: str) -> bool:
    """Whether ``backend``'s ``numpy.linalg`` factorisations are another LAPACK's (cuSOLVER
    on a real GPU; the emulated one calls NumPy's), so that they match NumPy's only as
    :func:`assert_factorisation` checks."""
    import gpu

    return backend == "cuda" and gpu.REAL


def assert_factorisation(got: Any, want: Any, tol: float = 100.0, r_only: bool = False) -> None:
    """``got`` is NumPy's ``numpy.linalg`` result ``want`` as another LAPACK computes it:
    within rounding of the scale ``tol``, where each column of the eigenvectors, of U and
    of Q is free in sign, as LAPACK leaves it (U's sign goes with Vh's row, Q's with R's;
    ``r_only``: ``qr(mode="r")``'s R alone, rows free in sign), and the columns of a
    complete Q or a full U (rows of a full Vh) past min(m, n) are any basis of one space
    (their projector is compared)."""
    if r_only:
        assert_same(got * np.swapaxes(_signs(np.swapaxes(got, -1, -2),
                                             np.swapaxes(want, -1, -2)), -1, -2), want, tol)
        return
    fields = getattr(want, "_fields", ())
    left = next((f for f in ("eigenvectors", "Q", "U") if f in fields), None)
    if left is None:  # determinants, inverses, solutions, Cholesky factors: unique
        assert_same(got, want, tol)
        return
    assert type(got) is type(want), f"{type(got).__name__} is not {type(want).__name__}"
    got, want = got._asdict(), want._asdict()
    right = {"Q": "R", "U": "Vh"}.get(left)
    k = min(want[left].shape[-2], want[right].shape[-1]) if right else want[left].shape[-1]
    sign = _signs(got[left][..., :k], want[left][..., :k])  # (..., 1, k)
    assert_same(got[left][..., :k] * sign, want[left][..., :k], tol)
    _same_span(got[left][..., k:], want[left][..., k:], tol)
    if right:
        rows = (got[right][..., k:, :], want[right][..., k:, :])
        assert_same(got[right][..., :k, :] * np.swapaxes(sign, -1, -2),
                    want[right][..., :k, :], tol)
        if right == "R":  # its rows past k are zeros
            assert_same(*rows, tol)
        else:
            _same_span(*(np.swapaxes(r, -1, -2) for r in rows), tol=tol)
    for name in want.keys() - {left, right}:
        assert_same(got[name], want[name], tol)


def _same_span(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    """Orthonormal columns spanning the space ``want``'s span: equal projectors."""
    if want.shape[-1]:
        assert_same(got @ np.swapaxes(got, -1, -2), want @ np.swapaxes(want, -1, -2), tol)


def _signs(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per column of ``got`` (shape (..., 1, k)), the sign that points it along ``want``'s."""
    sign = np.sign(np.sum(got * want, axis=-2, keepdims=True))
    return np.where(sign == 0, 1, sign).astype(got.dtype)


# ---------------------------------------------------------------- loops as NumPy runs them


class NumpyLax:
    """``jax.lax``'s loops as plain Python loops over NumPy values: the oracle of
    ``tracejit.lax`` (a test function takes the namespace and runs under either)."""

    @staticmethod
    def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
        from tracejit.trace import pytree

        x_leaves, x_tree = pytree.flatten(xs)
        n = length if length is not None else len(x_leaves[0])
        carry, ys = init, []
        for t in range(n - 1, -1, -1) if reverse else range(n):
            carry, y = f(carry, pytree.unflatten(x_tree, [x[t] for x in x_leaves]))
            ys.append(y)
        if not ys:
            raise ValueError("NumpyLax.scan: no steps, so no ys to stack")
        ys = ys[::-1] if reverse else ys
        per_step = [pytree.flatten(y)[0] for y in ys]
        y_tree = pytree.flatten(ys[-1])[1]
        # each y stacked in the dtype of the last step's (a Python scalar carry of the
        # first steps has the dtype the loop settles on)
        stacked = [np.stack([np.asarray(s[k], np.asarray(per_step[-1][k]).dtype)
                             for s in per_step]) for k in range(len(per_step[-1]))]
        return carry, pytree.unflatten(y_tree, stacked)

    @staticmethod
    def fori_loop(lower, upper, body, init):
        val = init
        for i in range(int(lower), int(upper)):
            val = body(i, val)
        return val

    @staticmethod
    def while_loop(cond, body, init):
        val = init
        while cond(val):
            val = body(val)
        return val

    @staticmethod
    def map(f, xs):
        return NumpyLax.scan(lambda c, x: (c, f(x)), (), xs)[1]


def lax_of(x):
    """The loops to run a function with: NumPy's Python loops when ``x`` is a NumPy array
    (the oracle's call), ``tracejit.lax`` when it is traced."""
    import tracejit

    return NumpyLax if isinstance(x, (np.ndarray, np.generic)) else tracejit.lax


def numeric_grad(f, xs: list, eps: float = 1e-6) -> list:
    """Central finite differences of the scalar ``f(*xs)`` with respect to each of
    ``xs`` (float64 arrays), one element at a time: the oracle of gradient tests."""
    grads = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            plus, minus = x.copy(), x.copy()
            plus[idx] += eps
            minus[idx] -= eps
            g[idx] = (f(*xs[:i], plus, *xs[i + 1:]) - f(*xs[:i], minus, *xs[i + 1:])) / (2 * eps)
        grads.append(g)
    return grads
