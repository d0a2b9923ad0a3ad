"""NumPy's histogram and histogram_bin_edges, step for step.

Equal bins (``bins`` a number) go NumPy's fast way: each value's bin from its offset
times the bins per unit, corrected by one where rounding put it beside its edge (the
edges computed in place, as ``linspace`` computes them, so the steps fuse), then
counted (weights summed) in NumPy's blocks of 65536 values, in NumPy's order, so float
weights add up bit for bit. Given edges go the other way: the sorted values searched for
each edge. Values outside the range, and NaN, count nowhere.

What NumPy decides from the data cannot be decided while tracing, so where it raises on
values these do not: a range read from data holding NaN or inf (NumPy: ValueError) gives
NaN edges and no counts; traced edges, or a traced ``range``, are not checked for order.
A bin-count estimator (``bins="auto"``) needs the data, so it raises ConcretizationError.
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from ..errors import ConcretizationError, DTypeError, ShapeError
from .core import bind
from .numpy_api import (
    _take_slice,
    astype,
    aval,
    concatenate,
    implements,
    ravel,
    sum,
)
from .numpy_api import max as amax
from .numpy_api import min as amin
from .numpy_api import where as _where
from .numpy_more import diff, linspace, linspace_at
from .ordering import as_array, searchsorted
from .tracer import Tracer

BLOCK = 65536  # NumPy's block of values (its float sums go block by block)


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    a, weights = _ravel_and_check(a, weights)
    edges, uniform = _bin_edges(a, bins, range, weights)
    ntype = np.dtype(np.intp) if weights is None else aval(weights).dtype
    if uniform is not None and (weights is None or np.can_cast(ntype, np.float64)):
        n = _equal_bins(a, weights, edges, *uniform, ntype)
    else:
        n = _given_edges(a, weights, edges, ntype)
    if density:
        width = astype(diff(edges), np.dtype(float))
        return n / width / sum(n), edges
    return n, edges


@implements(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    a, weights = _ravel_and_check(a, weights)
    return _bin_edges(a, bins, range, weights)[0]


def _ravel_and_check(a, weights):
    a = as_array(a)
    if aval(a).dtype == bool:  # (NumPy warns that it converts)
        a = astype(a, np.dtype(np.uint8))
    if weights is not None:
        weights = as_array(weights)
        if aval(weights).shape != aval(a).shape:
            raise ShapeError("weights should have the same shape as a.")
        weights = ravel(weights)
    return ravel(a), weights


def _bin_edges(a, bins, range, weights):
    """The edges, and (first edge, last edge, number of bins) where the bins are equal."""
    if isinstance(bins, str):
        raise ConcretizationError(f"np.histogram(bins={bins!r}) picks the number of bins from "
                                  "the data: a traced function's shapes cannot depend on it",
                                  hint="pass the number of bins, or the edges")
    if isinstance(bins, Tracer) and bins.ndim == 0:
        raise ConcretizationError("np.histogram with a traced number of bins",
                                  hint="pass the number of bins as a Python int")
    if np.ndim(bins) == 1 or isinstance(bins, Tracer) and bins.ndim == 1:
        edges = as_array(bins)
        if not isinstance(edges, Tracer) and np.any(edges[:-1] > edges[1:]):
            raise ShapeError("`bins` must increase monotonically, when an array")
        return edges, None
    if np.ndim(bins) != 0:
        raise ShapeError("`bins` must be 1d, when an array")
    try:
        n = operator.index(bins)
    except TypeError:
        raise DTypeError("`bins` must be an integer, a string, or an array") from None
    if n < 1:
        raise ShapeError("`bins` must be positive, when an integer")
    first, last = _outer_edges(a, range)
    bin_type = np.result_type(*(aval(e).dtype if isinstance(e, Tracer) else e
                                for e in (first, last)), aval(a).dtype)
    if np.issubdtype(bin_type, np.integer):
        bin_type = np.result_type(bin_type, float)
    if not any(isinstance(e, Tracer) for e in (first, last)):
        known = np.linspace(first, last, n + 1, dtype=bin_type)
        if np.any(known[:-1] >= known[1:]):
            raise ShapeError(f"Too many bins for data range. Cannot create {n} finite-sized "
                             "bins.")
    return linspace(first, last, n + 1, endpoint=True, dtype=bin_type), (first, last, n)


def _outer_edges(a, range):
    if range is not None:
        first, last = range
        if not any(isinstance(e, Tracer) for e in (first, last)):
            if first > last:
                raise ShapeError("max must be larger than min in range parameter.")
            if not (np.isfinite(first) and np.isfinite(last)):
                raise ShapeError(f"supplied range of [{first}, {last}] is not finite")
    elif aval(a).size == 0:
        first, last = 0, 1
    else:
        first, last = amin(a), amax(a)
    if not any(isinstance(e, Tracer) for e in (first, last)):
        return (first - 0.5, last + 0.5) if first == last else (first, last)
    same = first == last  # (an empty range widened by half a unit each way)
    return _where(same, first - 0.5, first), _where(same, last + 0.5, last)


def _equal_bins(a, weights, edges, first, last, n: int, ntype: np.dtype):
    """NumPy's fast path: the bin from the value's offset, then the counts (or the sums
    of float64 weights, cast to the weights' dtype) block by block."""
    dtype = aval(edges).dtype
    keep = (a >= first) & (a <= last)
    x = astype(a, dtype)
    start = astype(as_array(first), dtype)
    f = (_where(keep, x, start) - start) / astype(as_array(last - first), dtype) * n
    # The bin number as a whole float64 (f >= 0, so floor is NumPy's cast to int): the
    # corrections then vectorise, and one cast at the end makes the index.
    pos = astype(bind("floor", f), np.dtype(np.float64))
    pos = _clamp(_where(pos == n, pos - 1, pos), n)
    pos = pos - astype(x < linspace_at(pos, first, last, n + 1, dtype), pos.dtype)
    pos = pos + astype((x >= linspace_at(pos + 1, first, last, n + 1, dtype)) & (pos != n - 1),
                       pos.dtype)
    if weights is None:  # values not kept count in an extra bin, dropped: NumPy's
        # ``bincount(index[keep])`` as ``np.add.at(counts, index, 1)``, with no array of ones
        index = astype(_where(keep, _clamp(pos, n), np.float64(n)), np.dtype(np.intp))
        ones = bind("broadcast_to", ntype.type(1), shape=aval(index).shape)
        return _take_slice(_scatter_add(n + 1, ntype, index, ones), 0, 0, n)
    index = astype(_clamp(pos, n), np.dtype(np.intp))  # (values not kept: any bin)
    w = _where(keep, astype(weights, np.dtype(np.float64)), np.float64(0))
    total = bind("full", shape=(n,), dtype=ntype, value=0)
    for lo in builtins.range(0, aval(a).size, BLOCK):
        hi = builtins.min(lo + BLOCK, aval(a).size)
        total = total + astype(_scatter_add(n, np.dtype(np.float64), _take_slice(
            index, 0, lo, hi), _take_slice(w, 0, lo, hi)), ntype)
    return total


def _given_edges(a, weights, edges, ntype: np.dtype):
    """NumPy's other path: cumulative counts (weight sums) at each edge of the sorted
    values, the last edge inclusive, then their differences. Counts are exact in any
    blocks; weight sums go in NumPy's."""
    size = aval(a).size
    total = bind("full", shape=aval(edges).shape, dtype=ntype, value=0)
    for lo in builtins.range(0, size, BLOCK if weights is not None else builtins.max(size, 1)):
        hi = size if weights is None else builtins.min(lo + BLOCK, size)
        block = _take_slice(a, 0, lo, hi)
        if weights is None:
            part = _inclusive(bind("sort", block, axis=0, kind="quicksort"), edges)
        else:
            order = bind("argsort", block, axis=0, kind="quicksort")
            sw = bind("gather", _take_slice(weights, 0, lo, hi), order, axis=0)
            cw = concatenate((bind("full", shape=(1,), dtype=ntype, value=0),
                              bind("cumsum", sw, axis=0, dtype=None)))
            part = bind("gather", cw, _inclusive(bind("gather", block, order, axis=0), edges),
                        axis=0)
        total = astype(total + part, ntype)
    return diff(total)


def _inclusive(sorted_values, edges):
    """searchsorted of every edge, the last on its right (the last bin holds its edge)."""
    m = aval(edges).shape[0]
    return concatenate((searchsorted(sorted_values, _take_slice(edges, 0, 0, m - 1), "left"),
                        searchsorted(sorted_values, _take_slice(edges, 0, m - 1, m), "right")))


def _clamp(pos, n: int):
    return bind("minimum", bind("maximum", pos, np.float64(0)), np.float64(n - 1))


def _scatter_add(n: int, dtype: np.dtype, index, values):
    zeros = bind("full", shape=(n,), dtype=dtype, value=0)
    return bind("scatter_add", zeros, values, index, axis=0)

