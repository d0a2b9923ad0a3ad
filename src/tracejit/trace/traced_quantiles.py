"""np.quantile and np.percentile (entry points), np.nanquantile, np.nanpercentile and
np.nanmedian: quantiles whose interpolation indexes are traced values.

Two things make the indexes data: traced quantile levels ``q``, and NaN-skipping, where
NumPy removes each slice's NaNs and takes the quantile of what is left (the count of
values depends on the data). Here the sort puts NaN last, and NumPy's index arithmetic
(``numpy.lib._function_base_impl``: virtual index, neighbours, gamma, ``_lerp``) runs as
traced operations on the levels and each slice's count, in the dtypes NumPy's Python-int
arithmetic gives (an int count meets a float32 ``q`` in float32). Slices with no values
give NaN. Integer inputs have no NaN: their nan-functions are ``np.quantile`` /
``np.median``. Static levels go to ``quantiles.py``, which computes the indexes on the
host. Traced levels cannot be checked against [0, 1]: out of range they clamp to the
first or last value instead of raising NumPy's ValueError.

NumPy's nanmedian takes one of two formulas by shape: the mean of the middle values
(1-d slices, or an axis of 600 or more) or ``(low + high) / 2`` of a masked array (the
odd case doubling the middle value, which overflows past half the dtype's maximum); both
are followed.
"""

from __future__ import annotations

import numpy as np
from numpy.lib import _function_base_impl as _npq

from ..errors import ShapeError
from .core import bind
from .numpy_api import (
    _scalar_result,
    astype,
    aval,
    broadcast_to,
    implements,
    mean,
    moveaxis,
    reshape,
    stack,
    take_along_axis,
)
from .ordering import as_array, sorted_along
from .quantiles import (
    _axes,
    _check,
    _keepdims,
    _lerp,
    _merged,
    _method,
    _no_out,
    _quantile_of,
    median,
    prepared,
)
from .tracer import Tracer

_MA_MEDIAN_LIMIT = 600  # NumPy's nanmedian uses the masked-array median below this length


def _counted(arr, axis: int):
    """``arr`` sorted along ``axis`` moved first (NaN last), and each slice's number of
    non-NaN values (int64, the slice shape)."""
    if axis != 0:
        arr = moveaxis(arr, axis, 0)
    ordered = sorted_along(arr, 0)
    valid = bind("logical_not", bind("isnan", arr))
    return ordered, bind("sum", valid, axis=(0,), keepdims=False, dtype=None)


def _take(ordered, index, lead: tuple[int, ...]):
    """``ordered[index[q..., r...], r...]``: one gather along axis 0 for every leading
    (quantile) position of ``index``, whose negative entries count from each slice's end
    of non-NaN values (already resolved by the caller)."""
    rest = aval(ordered).shape[1:]
    flat = reshape(broadcast_to(index, lead + rest), (int(np.prod(lead, dtype=np.int64)),) + rest)
    return reshape(take_along_axis(ordered, flat, 0), lead + rest)


def _nan_where_empty(result, count):
    empty = bind("equal", count, 0)
    return bind("where", empty, np.array(np.nan, aval(result).dtype), result)


# ---------------------------------------------------------------- virtual indexes


def _virtual(method: str, n, q):
    """NumPy's ``get_virtual_index(n, q)`` with a traced count ``n`` or traced levels
    ``q``: NumPy's ``n`` is a Python int, which meets a float ``q`` in q's dtype."""
    nq = astype(n, q.dtype) if q.dtype.kind == "f" else n
    lin = bind("multiply", bind("subtract", nq, 1), q)
    if method == "linear":
        return lin
    if method in ("lower", "higher", "nearest"):
        op = {"lower": "floor", "higher": "ceil", "nearest": "rint"}[method]
        return astype(bind(op, lin), np.intp)
    if method == "midpoint":
        return bind("multiply", 0.5, bind("add", bind("floor", lin), bind("ceil", lin)))
    if method in ("inverted_cdf", "closest_observation"):
        index = bind("subtract", bind("multiply", nq, q), 1)
        if method == "closest_observation":
            index = bind("subtract", index, 0.5)
        return _to_boundaries(index, method)
    if method == "averaged_inverted_cdf":
        return bind("subtract", bind("multiply", nq, q), 1)
    alpha, beta = {"interpolated_inverted_cdf": (0, 1), "hazen": (0.5, 0.5),
                   "weibull": (0, 0), "median_unbiased": (1 / 3.0, 1 / 3.0),
                   "normal_unbiased": (3 / 8.0, 3 / 8.0)}[method]
    return bind("subtract", bind("add", bind("multiply", nq, q),
                                 alpha + q * (1 - alpha - beta)), 1)


def _to_boundaries(index, method: str):
    """NumPy's ``_discrete_interpolation_to_boundaries``."""
    previous = bind("floor", index)
    gamma = bind("subtract", index, previous)
    at = bind("equal", gamma, 0)
    if method == "closest_observation":
        at = bind("logical_and", at, bind("equal", bind("remainder", previous, 2), 1))
    res = astype(bind("where", at, previous, bind("add", previous, 1)), np.intp)
    return bind("where", bind("less", res, 0), 0, res)


def _gamma(method: str, virtual, previous):
    """NumPy's ``_get_gamma``: ``virtual - previous`` fixed by the method, in the virtual
    index's dtype."""
    gamma = bind("subtract", virtual, previous)
    if method == "averaged_inverted_cdf":
        gamma = bind("where", bind("equal", gamma, 0), 0.5, 1.0)
    elif method == "midpoint":
        gamma = bind("where", bind("equal", bind("remainder", virtual, 1), 0), 0.0, 0.5)
    return astype(gamma, aval(virtual).dtype)


# ---------------------------------------------------------------- quantiles


def _from_end(index, count):
    """Negative indexes (NumPy's -1: the last value) count from the end of the values."""
    return bind("where", bind("less", index, 0), bind("add", index, count), index)


def _weak_lerp(a, b, gamma):
    """``_lerp`` with NumPy's Python-float ``t`` (a scalar ``q``): ``t`` and ``1 - t`` are
    doubles rounded to the values' dtype where they meet them, compared as doubles."""
    dtype = aval(a).dtype
    diff = bind("subtract", b, a)
    low = bind("add", a, bind("multiply", diff, astype(gamma, dtype)))
    high = bind("subtract", b, bind("multiply", diff, astype(bind("subtract", 1, gamma),
                                                             dtype)))
    return bind("where", bind("greater_equal", gamma, 0.5), high, low)


def _indexed_quantile(ordered, n, q, method: str, weak_q: bool):
    """NumPy's ``_quantile`` of ``ordered`` (sorted along axis 0) whose slices hold ``n``
    values each (a traced count, or the static length), at levels ``q`` (a host array
    or a traced one)."""
    rest = aval(ordered).shape[1:]
    virtual = _virtual(method, n, reshape(q, q.shape + (1,) * len(rest)))
    if aval(virtual).dtype.kind in "iu":  # the discrete methods: no interpolation
        return _take(ordered, _from_end(virtual, n), q.shape)
    previous = bind("floor", virtual)
    following = bind("add", previous, 1)
    above = bind("greater_equal", virtual, astype(bind("subtract", n, 1), aval(virtual).dtype))
    below = bind("less", virtual, 0)
    previous, following = (astype(bind("where", below, 0, bind("where", above, -1, i)), np.intp)
                           for i in (previous, following))
    gamma = _gamma(method, virtual, previous)
    lo = _take(ordered, _from_end(previous, n), q.shape)
    hi = _take(ordered, _from_end(following, n), q.shape)
    return _weak_lerp(lo, hi, gamma) if weak_q else _lerp(lo, hi, gamma)


def _nanquantile(arr, q, axis: int, method: str, weak_q: bool):
    ordered, count = _counted(arr, axis)
    n = reshape(count, (1,) * q.ndim + aval(ordered).shape[1:])
    return _nan_where_empty(_indexed_quantile(ordered, n, q, method, weak_q), n)


def _traced_levels(a, q, axis, method: str, keepdims: bool, weights):
    """np.quantile at traced levels ``q``: NumPy's ``_quantile`` with the length of the
    axis as the count, and its NaN rule (a slice holding NaN gives NaN)."""
    t, axes, arr, ax = prepared(a, q, axis, method, weights)
    if ax != 0:
        arr = moveaxis(arr, ax, 0)
    ordered = sorted_along(arr, 0)
    n = aval(ordered).shape[0]
    result = _indexed_quantile(ordered, np.array(n), q, method, False)
    if t.dtype.kind == "f" and n:
        last = bind("gather", ordered, np.int64(-1), axis=0)
        result = bind("where", bind("isnan", last),
                      astype(last, aval(result).dtype), result)
    if keepdims:
        result = _keepdims(result, q.shape, t.shape, axes)
    return _scalar_result(result)


def _empty(t, axes, keepdims: bool, lead=()):
    """NumPy's answer for an empty input: ``np.nanmean``, NaN in the reduced shape."""
    shape = tuple(1 if axes is None or d in axes else n for d, n in enumerate(t.shape))
    if not keepdims:
        shape = tuple(n for d, n in enumerate(t.shape) if axes is not None and d not in axes)
    return _scalar_result(bind("full", shape=lead + shape, dtype=t.dtype, value=np.nan))


def _nan_quantile_of(a, q, axis, method, keepdims, weights, weak_q: bool):
    a = as_array(a)
    _check(a, method, weights)
    if q.ndim > 2:
        raise ShapeError("q must be a scalar or 1d")
    t = aval(a)
    if t.dtype.kind != "f":  # no NaN to leave out
        return _quantile_at(a, q, axis, method, keepdims, weights, weak_q)
    axes = _axes(axis, t.ndim)
    if t.size == 0:
        return _empty(t, axes, keepdims)
    arr, ax = _merged(a, axes)
    result = _nanquantile(arr, q, ax, method, weak_q)
    if keepdims:
        result = _keepdims(result, q.shape, t.shape, axes)
    return _scalar_result(result)


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """Static ``q`` as NumPy computes it (``quantiles.py``), traced ``q`` here. One
    difference: where NumPy's result is 0-d and its slice holds a NaN, NumPy returns that
    NaN in the input's dtype (a float32 input with a float64 ``q`` array gives a float32
    NaN, else float64); jit's dtype cannot depend on the data: it is the NaN-free one."""
    _no_out("quantile", out)
    weak_q = type(q) in (int, float)
    q = _levels(q, 1, "Quantiles must be in the range [0, 1]")
    return _quantile_at(a, q, axis, _method(method, interpolation), keepdims, weights, weak_q)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    """``quantile(a, q / 100)``, the division done as NumPy does it."""
    _no_out("percentile", out)
    weak_q = type(q) in (int, float)
    q = _levels(q, 100, "Percentiles must be in the range [0, 100]")
    return _quantile_at(a, q, axis, _method(method, interpolation), keepdims, weights, weak_q)


def _quantile_at(a, q, axis, method: str, keepdims: bool, weights, weak_q: bool):
    if isinstance(q, Tracer):
        return _traced_levels(a, q, axis, method, keepdims, weights)
    return _quantile_of(a, q, axis, method, keepdims, weights, weak_q)


def _levels(q, scale: int, message: str):
    """``q / scale`` as NumPy computes it, checked if static (a traced one cannot be)."""
    if isinstance(q, Tracer):
        return q if scale == 1 else bind("true_divide", q, scale)
    q = np.asanyarray(q) if scale == 1 else np.true_divide(q, scale, out=...)
    if not _npq._quantile_is_valid(q):
        raise ShapeError(message)
    return q


@implements(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """Static ``q`` only; NaN for a slice of NaNs (NumPy's dtype for it may follow the
    first slice's, which a traced function cannot see: here it is the result's)."""
    _no_out("nanquantile", out)
    weak_q = type(q) in (int, float)
    q = _levels(q, 1, "Quantiles must be in the range [0, 1]")
    return _nan_quantile_of(a, q, axis, _method(method, interpolation), keepdims, weights,
                            weak_q)


@implements(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    _no_out("nanpercentile", out)
    weak_q = type(q) in (int, float)
    q = _levels(q, 100, "Percentiles must be in the range [0, 100]")
    return _nan_quantile_of(a, q, axis, _method(method, interpolation), keepdims, weights,
                            weak_q)


# ---------------------------------------------------------------- median


def _pick(ordered, index):
    """``ordered[index[r...], r...]`` for an index of the slice shape."""
    rest = aval(ordered).shape[1:]
    return reshape(take_along_axis(ordered, reshape(index, (1,) + rest), 0), rest)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_out("nanmedian", out)
    a = as_array(a)
    t = aval(a)
    if t.dtype.kind != "f":
        return median(a, axis, None, False, keepdims)
    axes = _axes(axis, t.ndim)
    if t.size == 0:
        return _empty(t, axes, keepdims)
    arr, ax = _merged(a, axes)
    ordered, count = _counted(arr, ax)
    high = bind("floor_divide", count, 2)
    odd = bind("equal", bind("remainder", count, 2), 1)
    low = bind("where", odd, high, bind("subtract", high, 1))
    lo, hi = _pick(ordered, _from_end(low, count)), _pick(ordered, high)
    if aval(arr).ndim == 1 or aval(arr).shape[ax] >= _MA_MEDIAN_LIMIT:
        both = mean(stack([lo, hi]), axis=0)  # np.median of the values: their mean
        result = bind("where", odd, lo, both)
    else:  # the masked-array median: (low + high) / 2, the middle value doubled if odd
        result = bind("true_divide", bind("add", lo, hi), np.array(2.0, t.dtype))
    result = _nan_where_empty(result, count)
    if keepdims:
        result = _keepdims(result, (), t.shape, axes)
    return _scalar_result(result)
