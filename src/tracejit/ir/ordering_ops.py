"""Registry ops for NumPy's cumulative and order functions: cumsum, cumprod, cummax,
cummin, sort, argsort, partition, argpartition, searchsorted.

The NumPy functions built on them (median, quantile, interp, digitize, nancumsum, ...) are
compositions at trace level (``trace/ordering.py``,
``trace/quantiles.py``). Each op takes its axis normalised (a non-negative int): the
tracer ravels for ``axis=None``.
"""

from __future__ import annotations

import numpy as np

from ..errors import AxisError, DTypeError, ShapeError
from .ops import _sum_dtype
from .registry import Exactness, Grad, Kind, register
from .types import TensorType

# NumPy's sort kinds; "stable" and "mergesort" are the stable ones (the same algorithm).
SORT_KINDS = ("quicksort", "mergesort", "heapsort", "stable")
STABLE_KINDS = ("mergesort", "stable")


def _check_axis(x: TensorType, axis: int) -> None:
    if not 0 <= axis < x.ndim:
        raise AxisError(f"axis {axis} is out of bounds for array of dimension {x.ndim}")


def scan_dtype(x: np.dtype, dtype) -> np.dtype:
    """The dtype np.cumsum / np.cumprod accumulate in: ``dtype`` if given, else np.sum's
    (small ints and bool accumulate in the platform's int64)."""
    return _sum_dtype(x) if dtype is None else np.dtype(dtype)


def _scan_rule(x: TensorType, *, axis: int, dtype) -> TensorType:
    _check_axis(x, axis)
    return TensorType(x.shape, scan_dtype(x.dtype, dtype))


def _running_rule(x: TensorType, *, axis: int) -> TensorType:
    _check_axis(x, axis)
    return x


def _argsort_rule(x: TensorType, *, axis: int, kind: str) -> TensorType:
    _check_axis(x, axis)
    if kind not in SORT_KINDS:
        raise ShapeError(f"sort kind must be one of {SORT_KINDS} (got {kind!r})")
    return TensorType(x.shape, np.dtype(np.int64))


def _sort_rule(x: TensorType, *, axis: int, kind: str) -> TensorType:
    _argsort_rule(x, axis=axis, kind=kind)
    return x


def _partition_rule(x: TensorType, *, axis: int, kth: tuple[int, ...], kind: str,
                    index: bool = False) -> TensorType:
    _check_axis(x, axis)
    if kind != "introselect":
        raise ShapeError(f"partition kind must be 'introselect' (got {kind!r})")
    n = x.shape[axis]
    for k in kth if x.size else ():  # NumPy checks no kth of an empty array
        if not -n <= k < n:
            raise ShapeError(f"kth(={k}) out of bounds ({n})")
    return TensorType(x.shape, np.dtype(np.int64)) if index else x


def _argpartition_rule(x: TensorType, *, axis: int, kth: tuple[int, ...],
                       kind: str) -> TensorType:
    return _partition_rule(x, axis=axis, kth=kth, kind=kind, index=True)


def _searchsorted_rule(a: TensorType, v: TensorType, *, side: str) -> TensorType:
    if a.ndim != 1:
        raise ShapeError("object too deep for desired array" if a.ndim > 1 else
                         "object of too small depth for desired array")
    if side not in ("left", "right"):
        raise ShapeError(f"side must be 'left' or 'right' (got {side!r})")
    if np.result_type(a.dtype, v.dtype).kind not in "biuf":
        raise DTypeError(f"searchsorted: no ordering for {a.dtype} and {v.dtype}")
    return TensorType(v.shape, np.dtype(np.int64))


# NumPy accumulates a cumulative sum or product sequentially along the axis (ufunc
# .accumulate); CuPy's scan adds in a tree order: within rounding, not bit for bit.
register("cumsum", Kind.SCAN, _scan_rule,
         lambda x, *, axis, dtype: np.cumsum(x, axis=axis, dtype=dtype),
         "numpy.cumsum along one axis (sequential, as np.add.accumulate)",
         exactness=Exactness.ORDER)
register("cumprod", Kind.SCAN, _scan_rule,
         lambda x, *, axis, dtype: np.cumprod(x, axis=axis, dtype=dtype),
         "numpy.cumprod along one axis (sequential, as np.multiply.accumulate)",
         exactness=Exactness.ORDER)
# np.maximum.accumulate and np.minimum.accumulate: NumPy's maximum picks the first NaN, else
# the last of equal extremes, in any grouping, so a GPU's log-step scan gives NumPy's bits.
register("cummax", Kind.SCAN, _running_rule,
         lambda x, *, axis: np.maximum.accumulate(x, axis=axis),
         "numpy.maximum.accumulate along one axis (a NaN carries on)")
register("cummin", Kind.SCAN, _running_rule,
         lambda x, *, axis: np.minimum.accumulate(x, axis=axis),
         "numpy.minimum.accumulate along one axis (a NaN carries on)")
register("argsort", Kind.SORTING, _argsort_rule,
         lambda x, *, axis, kind: np.argsort(x, axis=axis, kind=kind),
         "numpy.argsort along one axis with NumPy's `kind` (NaN last); ties keep their order "
         "for the stable kinds, any order NumPy's own kind gives otherwise", grad=Grad.NONE)
# np.sort itself, not a gather through an argsort: NumPy's own bits (which of two equal
# values, -0.0 and 0.0, comes first is its kind's), and its speed: NumPy's default sort of
# 4M float64 takes 32 ms, a stable argsort and a gather 560 ms.
register("sort", Kind.SORTING, _sort_rule,
         lambda x, *, axis, kind: np.sort(x, axis=axis, kind=kind),
         "numpy.sort along one axis with NumPy's `kind` (NaN last)")
# np.partition itself with the caller's kth list, as NumPy's median and quantile pass it:
# introselect puts the order statistics in place in a fraction of a sort's time (4M float64:
# 18 ms against a stable sort's 420 ms), and which of -0.0 and 0.0, or of two NaN payloads,
# lands at a kth is NumPy's: the same list on the same lane gives NumPy's bits.
register("partition", Kind.SORTING, _partition_rule,
         lambda x, *, axis, kth, kind: np.partition(x, list(kth), axis=axis, kind=kind),
         "numpy.partition along one axis with a static kth list (NaN last); the elements "
         "between the kth are in NumPy's order on the CPU, any order on the GPU")
register("argpartition", Kind.SORTING, _argpartition_rule,
         lambda x, *, axis, kth, kind: np.argpartition(x, list(kth), axis=axis, kind=kind),
         "numpy.argpartition along one axis with a static kth list (NaN last)",
         grad=Grad.NONE)
register("searchsorted", Kind.SORTING, _searchsorted_rule,
         lambda a, v, *, side: np.searchsorted(a, v, side=side),
         "numpy.searchsorted(a, v, side) of a sorted 1-d `a` (NaN sorts last)",
         grad=Grad.NONE)
