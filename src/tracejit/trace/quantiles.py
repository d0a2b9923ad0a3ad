"""np.median, and np.quantile / np.percentile with static levels: NumPy's partition along
the axis, gathers at the order statistics and NumPy's interpolation, step by step.

With static quantile levels ``q`` (known while tracing, like a shape) the virtual
indexes, neighbouring indexes and interpolation weights are computed by NumPy's own
helpers (``numpy.lib._function_base_impl``) from ``q`` and the axis length, so every
method NumPy has gives NumPy's indexes, and ``_lerp`` is NumPy's arithmetic in NumPy's
order. The partition is NumPy's introselect with the kth list NumPy's ``_median`` and
``_quantile`` pass it, so where -0.0 and 0.0 (or two NaN payloads) tie, the one picked is
NumPy's too: results are bit-identical on the reference backend. The gradient flows through
the gathers to the elements picked (between tied elements, to one of them).
The public np.quantile and np.percentile are in ``traced_quantiles.py``, which also takes
traced levels.
"""

from __future__ import annotations

import numpy as np
from numpy.lib import _function_base_impl as _npq

from ..errors import DTypeError, ShapeError, UnsupportedOperation
from ..ir.ops import normalize_axis
from .core import bind
from .numpy_api import _scalar_result, aval, basic_index, implements, mean, moveaxis, reshape
from .ordering import as_array, partitioned


def _axes(axis, ndim: int) -> tuple[int, ...] | None:
    """NumPy's ``normalize_axis_tuple`` (repeats are an error, order is kept)."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(normalize_axis(int(a), ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError("repeated axis")
    return out


def _merged(a, axes):
    """NumPy's ``_ureduce``: ``(array, axis)`` with the reduced axes as one axis (the
    flattened array for ``axis=None``, the kept axes first for several)."""
    t = aval(a)
    if axes is None:
        return reshape(a, (t.size,)), 0
    if len(axes) == 1:
        return a, axes[0]
    keep = [d for d in range(t.ndim) if d not in axes]
    a = moveaxis(a, keep, list(range(len(keep))))
    return reshape(a, tuple(t.shape[d] for d in keep) + (-1,)), len(keep)


def _keepdims(result, lead: tuple[int, ...], shape: tuple[int, ...], axes):
    """``result`` (``lead`` + the kept dims) with each reduced axis back as a 1."""
    kept = tuple(1 if axes is None or d in axes else n for d, n in enumerate(shape))
    return reshape(result, lead + kept)


def _check(a, method: str, weights) -> None:
    if aval(a).dtype.kind == "c":
        raise DTypeError("a must be an array of real numbers")
    if weights is not None:
        raise UnsupportedOperation("numpy.quantile(..., weights=...) is not supported")
    if method not in _npq._QuantileMethods:
        raise ShapeError(f"{method!r} is not a valid method. Use one of: "
                         f"{_npq._QuantileMethods.keys()}")


def _lerp(a, b, t):
    """NumPy's ``_lerp``: ``a + (b - a) * t``, or ``b - (b - a) * (1 - t)`` where
    ``t >= 0.5``; ``t`` is a host value (a Python float when q was one)."""
    diff = bind("subtract", b, a)
    low = bind("add", a, bind("multiply", diff, t))
    high = bind("subtract", b, bind("multiply", diff, 1 - t))
    if isinstance(t, float):
        return high if t >= 0.5 else low
    return bind("where", t >= 0.5, high, low)


def _quantile(arr, q: np.ndarray, axis: int, method: str, weak_q: bool):
    """NumPy's ``_quantile`` (unweighted) of ``arr`` along ``axis``."""
    n = aval(arr).shape[axis]
    if axis != 0:
        arr = moveaxis(arr, axis, 0)
    props = _npq._QuantileMethods[method]
    virtual = np.asanyarray(props["get_virtual_index"](n, q))
    inexact = aval(arr).dtype.kind == "f"  # complex is refused; NaN would sort last
    if props["fix_gamma"] is None or (method == "linear" and virtual.dtype.kind in "iu"):
        kth = [*virtual.ravel(), -1] if inexact else virtual.ravel()
        ordered = partitioned(arr, kth, 0)
        result = bind("gather", ordered, virtual, axis=0)
    else:
        prev, nxt = _npq._get_indexes(np.empty(0, aval(arr).dtype), virtual, n)
        ordered = partitioned(arr, np.unique(np.concatenate(([0, -1], prev.ravel(),
                                                             nxt.ravel()))), 0)
        gamma = _npq._get_gamma(virtual, prev, props)
        gamma = float(gamma) if weak_q else gamma.reshape(
            virtual.shape + (1,) * (aval(arr).ndim - 1))
        result = _lerp(bind("gather", ordered, prev, axis=0),
                       bind("gather", ordered, nxt, axis=0), gamma)
    if inexact and n:  # NaN is partitioned last: a slice with one gives NaN
        last = bind("gather", ordered, np.int64(-1), axis=0)
        result = bind("where", bind("isnan", last),
                      bind("convert", last, dtype=aval(result).dtype), result)
    return result


def prepared(a, q, axis, method, weights):
    """What every quantile starts with, as NumPy checks it: (the array's type, the axes,
    the array with those axes merged into one, that axis)."""
    a = as_array(a)
    _check(a, method, weights)
    if q.ndim > 2:
        raise ShapeError("q must be a scalar or 1d")
    t = aval(a)
    axes = _axes(axis, t.ndim)
    return (t, axes, *_merged(a, axes))


def _quantile_of(a, q, axis, method, keepdims, weights, weak_q: bool):
    t, axes, arr, ax = prepared(a, q, axis, method, weights)
    result = _quantile(arr, q, ax, method, weak_q)
    if keepdims:
        result = _keepdims(result, q.shape, t.shape, axes)
    return _scalar_result(result)


def _method(method: str, interpolation) -> str:
    if interpolation is not None:  # NumPy's deprecated spelling
        return _npq._check_interpolation_as_method(method, interpolation, "quantile")
    return method


def _no_out(name: str, out) -> None:
    if out is not None:
        raise UnsupportedOperation(f"numpy.{name}(..., out=...) is not supported inside a "
                                   "jitted function", hint="use the returned value")


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's ``_median``: the mean of the one or two middle order statistics (so its
    dtype rules: float64 for integers, float16 stays float16), NaN where a slice has one."""
    _no_out("median", out)
    a = as_array(a)
    t = aval(a)
    axes = _axes(axis, t.ndim)
    arr, ax = _merged(a, axes)
    n = aval(arr).shape[ax]
    kth = [n // 2 - 1, n // 2] if n % 2 == 0 else [(n - 1) // 2]
    if t.dtype.kind in "fc":  # NaN is partitioned last: NumPy looks at the last element
        kth.append(-1)
    ordered = partitioned(arr, kth, ax)
    mid = n // 2
    key = [slice(None)] * aval(arr).ndim
    key[ax] = slice(mid, mid + 1) if n % 2 else slice(mid - 1, mid + 1)
    result = mean(basic_index(ordered, aval(arr).shape, key), axis=ax)
    if t.dtype.kind in "fc" and n:
        last = bind("gather", ordered, np.int64(-1), axis=ax)
        result = bind("where", bind("isnan", last), last, result)
    if keepdims:
        result = _keepdims(result, (), t.shape, axes)
    return _scalar_result(result)

