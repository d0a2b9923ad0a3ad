"""NumPy's cumulative and order functions: cumsum, cumprod, sort, argsort, partition,
searchsorted, digitize, interp (quantiles and medians are in ``quantiles.py``).

They are built on the registry's ``cumsum``, ``cumprod``, ``sort``, ``argsort``,
``partition``, ``argpartition`` and ``searchsorted`` ops, as NumPy's own definitions are:
``sort`` and ``partition`` are NumPy's (their gradients go to the element each output came
from), ``digitize`` is NumPy's ``searchsorted`` of the bins, and ``interp`` follows NumPy's
compiled loop case by case, so its values are bit-identical.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConcretizationError, DTypeError, ShapeError, UnsupportedOperation
from ..ir.ops import normalize_axis
from ..ir.ordering_ops import SORT_KINDS
from . import creation, intercept
from .core import bind
from .numpy_api import (
    _reject_out,
    _scalar_result,
    _strong,
    astype,
    aval,
    basic_index,
    concatenate,
    implements,
    operator_index,
    ravel,
    take_along_axis,
)
from .tracer import Tracer

# NumPy's spellings of the sort kinds (np.sort(kind="quick") is quicksort).
_KIND_NAMES = {"quick": "quicksort", "merge": "mergesort", "heap": "heapsort"}


def as_array(x):
    """A traced value as it is; a list holding traced values as ``np.array`` builds it;
    anything else as NumPy's ``asarray`` makes it (a constant)."""
    if isinstance(x, Tracer):
        return _strong(x)
    return creation.traced_array(x) if creation.has_tracer(x) else np.asarray(x)


def _along(a, axis):
    """``(a, axis)`` with ``axis=None`` meaning the flattened array, as NumPy reads it."""
    a = as_array(a)
    if axis is None:
        return ravel(a), 0
    return a, normalize_axis(operator_index(axis, "sort"), aval(a).ndim)


# ---------------------------------------------------------------- cumulative


def _scan(op: str, a, axis, dtype, out):
    _reject_out(op, out)
    a = as_array(a)
    if axis is None or aval(a).ndim == 0:  # NumPy accumulates a 0-d array as a 1-d one
        a = ravel(a)
    axis = 0 if axis is None else normalize_axis(operator_index(axis, op), aval(a).ndim)
    return bind(op, a, axis=axis, dtype=None if dtype is None else np.dtype(dtype))


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    return _scan("cumsum", a, axis, dtype, out)


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    return _scan("cumprod", a, axis, dtype, out)


def _nan_to(a, value):
    a = as_array(a)
    if aval(a).dtype.kind not in "fc":
        return a
    return bind("where", bind("isnan", a), np.zeros((), aval(a).dtype) + value, a)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    return cumsum(_nan_to(a, 0), axis, dtype, out)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    return cumprod(_nan_to(a, 1), axis, dtype, out)


@implements(np.cumulative_sum)
def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative("cumulative_sum", "cumsum", 0, x, axis, dtype, out, include_initial)


@implements(np.cumulative_prod)
def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative("cumulative_prod", "cumprod", 1, x, axis, dtype, out, include_initial)


def _cumulative(name: str, op: str, identity: int, x, axis, dtype, out, include_initial):
    """NumPy's array-API scans: ``axis`` required beyond one dimension, a 0-d array read as
    a 1-d one, and the identity first if ``include_initial``."""
    _reject_out(name, out)
    x = as_array(x)
    if aval(x).ndim == 0:
        x = ravel(x)
    ndim = aval(x).ndim
    if axis is None and ndim >= 2:
        raise ShapeError("For arrays which have more than one dimension ``axis`` argument "
                         "is required.", hint=f"pass axis= to np.{name}")
    axis = 0 if axis is None else normalize_axis(operator_index(axis, name), ndim)
    res = bind(op, x, axis=axis, dtype=None if dtype is None else np.dtype(dtype))
    if not include_initial:
        return res
    shape = tuple(1 if d == axis else n for d, n in enumerate(aval(res).shape))
    first = bind("full", shape=shape, dtype=aval(res).dtype, value=identity)
    return concatenate((first, res), axis)


# ---------------------------------------------------------------- sorting


def _sort_kind(kind, stable) -> str:
    if stable is not None:
        if kind is not None:
            raise ShapeError("`kind` and keyword parameters can't be provided at the same "
                             "time. Use only one of them.")
        return "stable" if stable else "quicksort"
    if kind is None:
        return "quicksort"
    kind = _KIND_NAMES.get(kind, kind)
    if kind not in SORT_KINDS:
        raise ShapeError(f"sort kind must be one of 'quick', 'heap', or 'stable' (got {kind!r})")
    return kind


def _no_order(name: str, order) -> None:
    if order is not None:
        raise UnsupportedOperation(f"numpy.{name}(..., order=...) sorts structured arrays, "
                                   "which tracejit does not have",
                                   hint="sort each field's array, or call it outside jit")


def sorted_along(a, axis: int):
    """``a`` sorted along ``axis`` (NaN last) by NumPy's fastest sort (its default kind,
    13x faster than a stable sort on 4M float64), for the order statistics whose indexes
    are traced (nanmedian, nanquantile, quantile at traced levels): their values are any
    sort's, and NumPy's own pick between -0.0 and 0.0 comes from a partition of the slice
    without its NaNs, which no static shape can reproduce."""
    return bind("sort", a, axis=axis, kind="quicksort")


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's sort of NumPy's ``kind``: its bits, the order of -0.0 and 0.0 included."""
    _no_order("sort", order)
    kind = _sort_kind(kind, stable)
    a, axis = _along(a, axis)
    return bind("sort", a, axis=axis, kind=kind)


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's own ``kind``: the reference and CPU backends return NumPy's indices exactly,
    ties included (the default quicksort orders ties as NumPy's does on this machine)."""
    _no_order("argsort", order)
    kind = _sort_kind(kind, stable)
    a = as_array(a)
    if aval(a).ndim == 0 and axis is not None:  # NumPy sorts a 0-d array as a 1-d one
        a = ravel(a)
    a, axis = _along(a, axis)
    return bind("argsort", a, axis=axis, kind=kind)


def _kth(kth) -> tuple[int, ...]:
    """NumPy's kth as a static tuple of ints (the partition op's rule checks its range)."""
    if isinstance(kth, Tracer):
        raise ConcretizationError("np.partition with a traced kth", hint="pass kth as a "
                                  "static int or a list of them")
    kths = np.asarray(kth)
    if kths.dtype.kind == "b":
        raise ShapeError("Booleans unacceptable as partition index")
    if kths.dtype.kind not in "iu":
        raise DTypeError("Partition index must be integer")
    return tuple(int(k) for k in kths.ravel())


def partitioned(a, kth, axis: int):
    """``a`` partitioned along ``axis`` at the static ``kth`` list by NumPy's introselect:
    the order statistics NumPy's median and quantile read, in NumPy's bits."""
    return bind("partition", a, axis=axis, kth=tuple(kth), kind="introselect")


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """NumPy's partition: every kth element in its sorted place and the others in the
    order NumPy's introselect leaves them (on the GPU, sorted: also a partition)."""
    _no_order("partition", order)
    a, axis = _along(a, axis)
    kth = _kth(kth)
    return bind("partition", a, axis=axis, kth=kth, kind=kind)


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """NumPy's argpartition: its indices on the CPU; on the GPU a stable argsort's, a valid
    partition for every kth at once."""
    _no_order("argpartition", order)
    a = as_array(a)
    if aval(a).ndim == 0 and axis is not None:
        a = ravel(a)
    a, axis = _along(a, axis)
    kth = _kth(kth)
    return bind("argpartition", a, axis=axis, kth=kth, kind=kind)


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):
    raise _data_dependent_shape()


@implements(np.unique_values, np.unique_counts, np.unique_inverse, np.unique_all)
def unique_values(x):
    raise _data_dependent_shape()


def _data_dependent_shape() -> ConcretizationError:
    return ConcretizationError(
        "np.unique's result has as many elements as the data has distinct values: a shape "
        "that depends on the values, which a traced function cannot have",
        hint="call np.unique outside the jitted function, or keep a fixed size: "
        "np.sort(x) and a mask of first occurrences (s[1:] != s[:-1])")


# ---------------------------------------------------------------- searching


def _common(a, v):
    """``a`` and ``v`` in their common dtype, as NumPy's searchsorted compares them."""
    dtype = np.result_type(aval(a).dtype, aval(v).dtype)
    return astype(a, dtype), astype(v, dtype)


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    a, v = as_array(a), as_array(v)
    if side not in ("left", "right"):
        raise ShapeError(f"search side must be 'left' or 'right' (got {side!r})")
    if sorter is not None:
        sorter = as_array(sorter)
        if aval(sorter).size != aval(a).size:
            raise ShapeError("sorter.size must equal a.size")
        a = take_along_axis(a, sorter, 0) if aval(a).ndim == 1 else a
    a, v = _common(a, v)
    return _scalar_result(bind("searchsorted", a, v, side=side))


@implements(np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """Equal as ``==`` says (NaN is never found, -0.0 finds 0.0), found NumPy's way: a few
    test elements (fewer than 10 n**0.145 for n elements) one comparison each, which fuse
    into one loop; more, each element looked up in the sorted test elements."""
    if kind not in (None, "sort", "table"):
        raise ShapeError(f"Invalid kind: {kind!r}. Please use None, 'sort' or 'table'.")
    element, test = as_array(element), ravel(as_array(test_elements))
    m = aval(test).size
    if m == 0:
        found = bind("full", shape=aval(element).shape, dtype=np.dtype(bool), value=False)
    elif m < 10 * aval(element).size ** 0.145:
        found = bind("equal", element, test[0])
        for i in range(1, m):
            found = bind("logical_or", found, bind("equal", element, test[i]))
    else:
        ordered = bind("sort", test, axis=0, kind="quicksort")
        at = bind("minimum", searchsorted(ordered, element), m - 1)
        found = bind("equal", bind("gather", ordered, at, axis=0), element)
    return bind("logical_not", found) if invert else found


@intercept.replaces(np, "lexsort")
def _lexsort_of_a_list(original, keys, axis=-1):
    """np.lexsort dispatches on a tuple of keys or an array, not on a list: a list holding
    a traced key would ask it for its value."""
    if isinstance(keys, list) and any(isinstance(k, Tracer) for k in keys):
        return lexsort(keys, axis)
    return original(keys, axis)


@implements(np.lexsort)
def lexsort(keys, axis=-1):
    """Stable argsorts from the first key to the last, the last key the primary one."""
    if not isinstance(keys, (list, tuple)):  # an array's keys are its rows
        keys = as_array(keys)
        keys = [keys[i] for i in range(aval(keys).shape[0])] if aval(keys).ndim else []
    keys = [as_array(k) for k in keys]
    if not keys:
        raise DTypeError("need sequence of keys with len > 0 in lexsort")
    shape = aval(keys[0]).shape
    if any(aval(k).shape != shape for k in keys):
        raise ShapeError("all keys need to be the same shape")
    axis = operator_index(axis, "lexsort")
    if not shape:
        return _scalar_result(bind("full", shape=(), dtype=np.dtype(np.int64), value=0))
    axis = normalize_axis(axis, len(shape))
    order = bind("argsort", keys[0], axis=axis, kind="stable")
    for k in keys[1:]:
        by = bind("argsort", take_along_axis(k, order, axis), axis=axis, kind="stable")
        order = take_along_axis(order, by, axis)
    return order


def _reversed(a):
    return basic_index(a, aval(a).shape, [slice(None, None, -1)])


@implements(np.digitize)
def digitize(x, bins, right=False):
    """NumPy's definition; with traced bins their direction is read from the data (the
    first bin above the last: decreasing), and bins that are not monotonic cannot be
    refused."""
    x, bins = as_array(x), as_array(bins)
    if aval(x).dtype.kind == "c":
        raise DTypeError("x may not be complex")
    if aval(bins).ndim != 1:
        raise ShapeError("object too deep for desired array")
    side = "left" if right else "right"
    n = aval(bins).shape[0]
    if not isinstance(bins, Tracer):
        steps = np.diff(bins)
        if not ((steps >= 0).all() or (steps <= 0).all()):
            raise ShapeError("bins must be monotonically increasing or decreasing")
        if (steps >= 0).all():
            return searchsorted(bins, x, side=side)
        return _scalar_result(bind("subtract", n, searchsorted(bins[::-1], x, side=side)))
    up = searchsorted(bins, x, side=side)
    if n < 2:
        return up
    down = bind("subtract", n, searchsorted(_reversed(bins), x, side=side))
    last = basic_index(bins, (n,), [n - 1])
    first = basic_index(bins, (n,), [0])
    return _scalar_result(bind("where", bind("less", last, first), down, up))


# ---------------------------------------------------------------- interp


def _take(a, index):
    return bind("gather", a, index, axis=0)


def _f64(x):
    return astype(as_array(x), np.float64)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's compiled loop, case by case (NaN x, left of, right of, at the last point, at
    a point, else ``slope * (x - xp[j]) + fp[j]`` with its NaN fallbacks): bit-identical.
    Differentiable in x (the slope), xp and fp."""
    if aval(as_array(fp)).dtype.kind == "c":
        raise UnsupportedOperation("numpy.interp with complex fp is not supported",
                                   hint="interpolate fp.real and fp.imag separately")
    x, xp, fp = _f64(x), _f64(xp), _f64(fp)
    if aval(xp).ndim != 1 or aval(fp).ndim != 1:
        raise ShapeError("Data points must be 1-D sequences" if period is not None else
                         "object too deep for desired array")
    if period is not None:
        x, xp, fp = _periodic(x, xp, fp, period)
        left = right = None
    n = aval(xp).shape[0]
    if n == 0:
        raise ShapeError("array of sample points is empty")
    if aval(fp).shape[0] != n:
        raise ShapeError("fp and xp are not of the same length.")
    first, last = _take(fp, np.int64(0)), _take(fp, np.int64(n - 1))
    lval = first if left is None else _f64(left)
    rval = last if right is None else _f64(right)
    scalar = aval(x).ndim == 0
    if n == 1:
        x0 = _take(xp, np.int64(0))
        out = bind("where", bind("less", x, x0), lval,
                   bind("where", bind("greater", x, x0), rval, first))
        return _scalar_result(out) if scalar else out
    j = bind("subtract", bind("searchsorted", xp, x, side="right"), 1)
    jc = bind("clip", j, 0, n - 2)
    xj, fj = _take(xp, jc), _take(fp, jc)
    xj1, fj1 = _take(xp, bind("add", jc, 1)), _take(fp, bind("add", jc, 1))
    slope = bind("true_divide", bind("subtract", fj1, fj), bind("subtract", xj1, xj))
    r1 = bind("add", bind("multiply", slope, bind("subtract", x, xj)), fj)
    r2 = bind("add", bind("multiply", slope, bind("subtract", x, xj1)), fj1)
    flat = bind("logical_and", bind("isnan", r2), bind("equal", fj, fj1))
    out = bind("where", bind("isnan", r1), bind("where", flat, fj, r2), r1)
    out = bind("where", bind("equal", xj, x), fj, out)
    out = bind("where", bind("equal", j, n - 1), last, out)
    out = bind("where", bind("greater", x, _take(xp, np.int64(n - 1))), rval, out)
    out = bind("where", bind("less", j, 0), lval, out)
    out = bind("where", bind("isnan", x), x, out)
    return _scalar_result(out) if scalar else _strong(out)


def _periodic(x, xp, fp, period):
    """NumPy's normalisation of periodic sample points: everything modulo the period,
    the points sorted, and one copied past each end."""
    if isinstance(period, Tracer):
        raise ConcretizationError("np.interp with a traced period", hint="pass it as a number")
    if period == 0:
        raise ShapeError("period must be a non-zero value")
    period = abs(float(period))
    if aval(xp).shape[0] != aval(fp).shape[0]:
        raise ShapeError("fp and xp are not of the same length")
    x, xp = bind("remainder", x, period), bind("remainder", xp, period)
    order = bind("argsort", xp, axis=0, kind="quicksort")
    xp, fp = _take(xp, order), _take(fp, order)
    n = aval(xp).shape[0]
    if n == 0:
        return x, xp, fp
    head, tail = [slice(0, 1)], [slice(n - 1, n)]
    xp = concatenate([bind("subtract", basic_index(xp, (n,), tail), period), xp,
                      bind("add", basic_index(xp, (n,), head), period)])
    fp = concatenate([basic_index(fp, (n,), tail), fp, basic_index(fp, (n,), head)])
    return x, xp, fp
