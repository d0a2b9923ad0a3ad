"""NumPy's polynomial helpers: polyval, vander, polyfit.

Each follows NumPy's own definition step for step (Horner's rule in polyval, a running
product along each row in vander, a scaled least-squares solve in polyfit), so values and
dtypes are NumPy's and gradients come from the steps. ``polyfit`` cannot warn that a fit
is poorly conditioned (NumPy's ``RankWarning`` reads the rank, a traced value), and its
``full=`` and ``cov=`` forms are not supported.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedOperation
from .core import bind
from .linalg import lstsq
from .numpy_api import (
    _as_strong_operand,
    astype,
    aval,
    broadcast_to,
    concatenate,
    flip,
    implements,
    reshape,
    sum,
)
from .ordering import as_array
from .tracer import Tracer


@implements(np.polyval)
def polyval(p, x):
    """Horner's rule from ``y = zeros_like(x)``, the leading coefficient first."""
    p, x = as_array(p), as_array(x)
    y = bind("full", shape=aval(x).shape, dtype=aval(x).dtype, value=0)
    for i in range(aval(p).shape[0] if aval(p).ndim else 0):
        y = y * x + p[i]
    return y


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """Columns x**0, x**1, ... (the last first unless ``increasing``) as NumPy makes them:
    a running product of x along each row, in x's dtype promoted with int."""
    x = as_array(x)
    t = aval(x)
    if t.ndim != 1:
        raise ShapeError("x must be a one-dimensional array or sequence.")
    n = t.shape[0]
    N = n if N is None else int(N)
    dtype = np.promote_types(t.dtype, np.int64)
    parts = []
    if N > 0:
        parts.append(bind("full", shape=(n, 1), dtype=dtype, value=1))
    if N > 1:
        powers = broadcast_to(reshape(astype(x, dtype), (n, 1)), (n, N - 1))
        parts.append(bind("cumprod", powers, axis=1, dtype=dtype))
    v = concatenate(parts, 1) if parts else bind("full", shape=(n, 0), dtype=dtype, value=0)
    return v if increasing else flip(v, 1)


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares fit of NumPy's polyfit: the Vandermonde matrix's columns scaled to
    unit norm, solved by lstsq, the coefficients scaled back."""
    if full or cov:
        raise UnsupportedOperation("np.polyfit(..., full=True) and (..., cov=...) return the "
                                   "fit's rank and residuals, which tracejit does not give",
                                   hint="call it with full=False, cov=False")
    if isinstance(deg, Tracer):
        raise DTypeError("np.polyfit: deg must be a number, not a traced value")
    order = int(deg) + 1
    x, y = _as_strong_operand(x) + 0.0, _as_strong_operand(y) + 0.0
    tx, ty = aval(x), aval(y)
    if deg < 0:
        raise ShapeError("expected deg >= 0")
    if tx.ndim != 1:
        raise DTypeError("expected 1D vector for x")
    if tx.size == 0:
        raise DTypeError("expected non-empty vector for x")
    if ty.ndim < 1 or ty.ndim > 2:
        raise DTypeError("expected 1D or 2D array for y")
    if tx.shape[0] != ty.shape[0]:
        raise DTypeError("expected x and y to have same length")
    if rcond is None:
        rcond = tx.shape[0] * np.finfo(tx.dtype).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = _as_strong_operand(w) + 0.0
        if aval(w).ndim != 1:
            raise DTypeError("expected a 1-d array for weights")
        if aval(w).shape[0] != ty.shape[0]:
            raise DTypeError("expected w and y to have the same length")
        lhs = lhs * reshape(w, (-1, 1))
        rhs = rhs * (reshape(w, (-1, 1)) if ty.ndim == 2 else w)
    scale = np.sqrt(sum(lhs * lhs, axis=0))
    c = lstsq(lhs / scale, rhs, rcond)[0]
    return c / (reshape(scale, (-1, 1)) if ty.ndim == 2 else scale)
