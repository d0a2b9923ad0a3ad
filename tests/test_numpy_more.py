"""NumPy functions composed at trace level (``trace/numpy_more.py``) against NumPy.

As in test_surface.py: each case runs eagerly with NumPy and through ``tj.jit``; results
must agree (values, dtype, shape, NumPy scalars for 0-d results), and where NumPy raises,
tracejit raises the same builtin class. Every case runs on the reference backend (bit for
bit unless ``approx``); the cases named in ``COMPILED`` also run compiled on the CPU.
Gradients of the differentiable compositions are checked against central differences.
"""

from __future__ import annotations

import copy
import warnings

import gpu
import numpy as np
import pytest
from numpy_compare import assert_same, builtin_error

import tracejit as tj

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning",
                                        "ignore::DeprecationWarning")

nan, inf = np.nan, np.inf
DTYPES = ["bool", "int32", "int64", "float32", "float64"]
_F = [[1.5, -0.0, nan, 3.0], [-inf, 2.25, 0.0, -7.5], [inf, -1.0, 0.5, 4.0]]
X = {
    "bool": np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 0]], bool),
    "int32": np.array([[3, -7, 0, 5], [-1, 2, 2**31 - 1, -4], [6, 0, -3, 1]], np.int32),
    "int64": np.array([[3, -7, 0, 5], [-1, 2, -(2**62), -4], [6, 0, -3, 1]], np.int64),
    "float32": np.array(_F, np.float32),
    "float64": np.array(_F, np.float64),
}
# Small exact values (any summation order gives the same), square for axis-mixing functions.
S = {k: ((np.arange(9).reshape(3, 3) * 7) % 5 - 2).astype(k) for k in DTYPES}
S["float32"] = S["float32"] / 2
S["float64"] = S["float64"] / 2
X64, X32, I32, B = X["float64"], X["float32"], X["int32"], X["bool"]
S64, S32 = S["float64"], S["float32"]
R = np.random.default_rng(0)
G = R.standard_normal((4, 4))  # generic floats, for contractions (approx)
V = R.standard_normal(5)
CUBE = np.arange(24.0).reshape(2, 3, 4) % 7 - 3

CASES: list = []
ERRORS: list = []


def _put_along(a, indices, values, axis):
    np.put_along_axis(a, indices, values, axis)
    return a


def case(name: str, fn, *args, approx: bool = False) -> None:
    CASES.append(pytest.param(fn, args, approx, id=name))


def error(name: str, fn, *args) -> None:
    ERRORS.append(pytest.param(fn, args, id=name))


# elementwise compositions, over every dtype
for dt in DTYPES:
    case(f"sinc-{dt}", np.sinc, X[dt])
    case(f"nan_to_num-{dt}", np.nan_to_num, X[dt])
    case(f"real-{dt}", np.real, X[dt])
    case(f"imag-{dt}", np.imag, X[dt])
    case(f"angle-{dt}", np.angle, X[dt])
    case(f"modf-{dt}", np.modf, X[dt])
    case(f"isclose-{dt}", lambda a, b: np.isclose(a, b), X[dt], X[dt][::-1])
    case(f"diff-{dt}", np.diff, X[dt])
    case(f"ptp-{dt}-axis0", lambda a: np.ptp(a, axis=0), S[dt])
    case(f"count_nonzero-{dt}", lambda a: np.count_nonzero(a, axis=1), X[dt])
    case(f"trace-{dt}", np.trace, S[dt])
    case(f"diag-{dt}", np.diag, S[dt])
    case(f"nansum-{dt}", lambda a: np.nansum(a, axis=0), X[dt])
    case(f"nanmax-{dt}", lambda a: np.nanmax(a, axis=1), X[dt])
    case(f"nanmean-{dt}", lambda a: np.nanmean(a, axis=0), X[dt], approx=True)
    case(f"cross-{dt}", np.cross, S[dt], S[dt][::-1])
    case(f"kron-{dt}", np.kron, S[dt][:2], S[dt][:, :2])
    case(f"average-{dt}", lambda a: np.average(a, axis=0), S[dt], approx=True)
case("angle-deg", lambda x: np.angle(x, deg=True), X64)
case("modf-0d", np.modf, np.float32(-2.5))
case("sinc-0d", np.sinc, np.float64(0.0))
case("nan_to_num-args", lambda x: np.nan_to_num(x, nan=-1.0, posinf=7.0, neginf=-8.0), X32)
case("nan_to_num-posinf-only", lambda x: np.nan_to_num(x, posinf=2.0), X64)
case("real_if_close", np.real_if_close, X64)
case("iscomplexobj", lambda x: x + np.iscomplexobj(x), I32)
case("isrealobj-iscomplex-isreal", lambda x: (np.isrealobj(x), np.iscomplex(x), np.isreal(x)),
     X32)
case("isclose-scalar-b", lambda x: np.isclose(x, 2.25), X64)
case("isclose-tolerances", lambda x, y: np.isclose(x, y, rtol=0.1, atol=0.5), S64, S64 + 0.3)
case("isclose-equal_nan", lambda x: np.isclose(x, x, equal_nan=True), X32)
case("isclose-int", lambda x, y: np.isclose(x, y), I32, I32 + 1)
case("allclose", lambda x, y: np.allclose(x, y), S64, S64 + 1e-9)
case("allclose-false", lambda x: np.allclose(x, x), X64)
case("allclose-equal_nan", lambda x: np.allclose(x, x, equal_nan=True), X64)
case("array_equal", lambda x, y: np.array_equal(x, y), I32, I32)
case("array_equal-shape", lambda x: np.array_equal(x, x.T), I32)
case("array_equal-nan", lambda x: np.array_equal(x, x, equal_nan=True), X64)
case("array_equiv", lambda x: np.array_equiv(x, x[0]), I32)
case("select", lambda x: np.select([x < 0, x > 2], [x * 2, x - 1], default=-5), X64)
case("select-int-float", lambda x: np.select([x < 0], [x], 0.5), I32)
case("select-scalar-choices", lambda x: np.select([x < 0, x > 2], [1, 2]), I32)
case("select-float32-int", lambda x: np.select([x > 0], [x], 3), X32)

# differences and reductions
case("diff-n2-axis0", lambda x: np.diff(x, n=2, axis=0), X64)
case("diff-n0", lambda x: np.diff(x, n=0), I32)
case("diff-prepend-append", lambda x: np.diff(x, prepend=0, append=x[:, :1]), I32)
case("diff-prepend-array-axis0", lambda x: np.diff(x, axis=0, prepend=x[:1] * 2), X32)
case("diff-too-many", lambda x: np.diff(x, n=5), X64)
case("ptp-all", np.ptp, S64)
case("ptp-keepdims", lambda x: np.ptp(x, axis=1, keepdims=True), I32)
case("count_nonzero-all", np.count_nonzero, X64)
case("count_nonzero-keepdims", lambda x: np.count_nonzero(x, axis=(0, 1), keepdims=True), B)
case("average-all", np.average, S32, approx=True)
case("average-weights", lambda x, w: np.average(x, axis=1, weights=w), S64, np.arange(1.0, 4.0),
     approx=True)
case("average-weights-full", lambda x, w: np.average(x, weights=w, returned=True), S64,
     S64 + 3.0, approx=True)
case("average-weights-int", lambda x: np.average(x, axis=0, weights=[1, 2, 3]), S["int32"],
     approx=True)
case("average-returned", lambda x: np.average(x, axis=0, returned=True), S32, approx=True)
case("average-keepdims", lambda x: np.average(x, axis=1, keepdims=True), S64, approx=True)
case("average-weights-2axes", lambda x, w: np.average(x, axis=(2, 0), weights=w), CUBE,
     np.arange(8.0).reshape(4, 2) + 1, approx=True)
for name in ("nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd",
             "nanargmax", "nanargmin"):
    fn = getattr(np, name)
    ax = {"approx": name in ("nanmean", "nanvar", "nanstd", "nanprod")}
    case(f"{name}-all", fn, X64 if "arg" not in name else np.nan_to_num(X64, nan=-1), **ax)
    case(f"{name}-axis0", lambda x, fn=fn: fn(x, axis=0), X32, **ax)
    case(f"{name}-int", lambda x, fn=fn: fn(x, axis=1), I32, **ax)
    if "arg" not in name:
        case(f"{name}-keepdims", lambda x, fn=fn: fn(x, axis=-1, keepdims=True), X64, **ax)
        case(f"{name}-all-nan-slice", lambda x, fn=fn: fn(x, axis=0),
             np.array([[nan, 1.0], [nan, 2.0]]), **ax)
case("nanvar-ddof", lambda x: np.nanvar(x, axis=1, ddof=1), X64, approx=True)
case("nanvar-ddof-too-big", lambda x: np.nanvar(x, axis=0, ddof=2), X64, approx=True)
case("nanstd-dtype", lambda x: np.nanstd(x, dtype=np.float64), X32, approx=True)
case("nansum-dtype", lambda x: np.nansum(x, dtype=np.float64), X32)

# diagonals
for k in (-2, -1, 0, 1, 3):
    case(f"diagonal-k{k}", lambda x, k=k: np.diagonal(x, k), X64)
    case(f"diag-1d-k{k}", lambda v, k=k: np.diag(v, k), X["int32"][0])
    case(f"trace-k{k}", lambda x, k=k: np.trace(x, k), S64)
case("diagonal-method-axes", lambda x: np.diagonal(x, 1, 2, 0), CUBE)
case("diagonal-axes-swapped", lambda x: np.diagonal(x, 0, -1, -2), CUBE)
case("diag-2d-k", lambda x: np.diag(x, -1), X64)
case("trace-3d-dtype", lambda x: np.trace(x, axis1=1, axis2=2, dtype=np.float32), CUBE)
case("trace-bool", np.trace, B[:, :3])
case("triu_indices_from", lambda x: x[np.triu_indices_from(x)], S64)
case("tril_indices_from-k", lambda x: x[np.tril_indices_from(x, -1)], X64)

# splitting, stacking, rotating
case("hsplit", lambda x: np.hsplit(x, 2), X64)
case("hsplit-1d", lambda x: np.hsplit(x, [1]), X64[0])
case("vsplit", lambda x: np.vsplit(x, [1, 2]), I32)
case("dsplit", lambda x: np.dsplit(x, 2), CUBE)
case("column_stack", lambda a, b: np.column_stack([a, b, a]), X64[:, 0], I32)
case("column_stack-1d", lambda a, b: np.column_stack((a, b)), X64[0], X32[1])
case("dstack", lambda a, b: np.dstack([a, b]), X64, I32)
case("append-flat", lambda a, b: np.append(a, b), X64, I32[0])
case("append-axis0", lambda a, b: np.append(a, b, axis=0), X64, I32)
case("append-scalar", lambda a: np.append(a, 7), I32)
# NumPy 2.1's array-API scans, membership, lexicographic order
case("cumulative_sum", lambda a: (np.cumulative_sum(a, axis=1),
                                  np.cumulative_sum(a[0], include_initial=True)), X64)
case("cumulative_prod-int", lambda a: (np.cumulative_prod(a, axis=0, include_initial=True),
                                       np.cumulative_prod(a[1], dtype=np.float32)), I32)
case("cumulative_sum-0d-bool", lambda a, b: (np.cumulative_sum(a[0, 0]),
                                             np.cumulative_sum(b, axis=-1)), X32, B)
case("isin", lambda a, b: (np.isin(a, [0.0, nan, 3.0, -inf]), np.isin(a, b[1], invert=True),
                           np.isin(b, [2, -4]), np.isin(a[0, 0], b)), X64, I32)
case("isin-empty-and-bool", lambda a, b: (np.isin(a, []), np.isin(b, [True], kind="table")),
     X32, B)
case("lexsort", lambda a, b: (np.lexsort(a), np.lexsort((a[0], b[1])),
                              np.lexsort([a, b], axis=0)), S64, S["int32"])
case("lexsort-one-key-nan", lambda a: (np.lexsort([a[0]]), np.lexsort(a, axis=0)), X64)
# polynomials
case("polyval", lambda p, x: (np.polyval([1.5, -2.0, 0.5], x), np.polyval(p, x),
                              np.polyval(p, 2.0)), V[:3], S64)
case("polyval-int", lambda p, x: np.polyval(p, x), np.array([2, -1, 3]), I32)
case("lists-holding-traced-values", lambda x: (np.polyval([x[0, 0], 2.0, x[1, 1]], x),
                                               np.isin(x, [x[0, 1], 7.0]),
                                               np.searchsorted([x[2, 0], x[0, 0]], x)), S64)
case("vander", lambda x: (np.vander(x), np.vander(x, 3, increasing=True), np.vander(x, 0),
                          np.vander(x, 1)), V)
case("vander-f32-int-bool", lambda x, i, b: (np.vander(x, 4), np.vander(i, 3),
                                             np.vander(b, 2)), X32[1], I32[0], B[0])
case("polyfit", lambda x, y: (np.polyfit(x, y, 2), np.polyfit(x, np.stack([y, x * y], 1), 1),
                              np.polyfit(x, y, 1, w=x * x + 1)),
     np.linspace(-1.0, 2.0, 7), np.cos(np.linspace(-1.0, 2.0, 7)), approx=True)
# histograms (equal bins the fast way, given edges the sorted way)
HX = R.standard_normal(600)
HX[7] = nan
case("histogram", lambda x, w: (np.histogram(x, bins=7, range=(-2, 2.5)),
                                np.histogram(x[8:200] * 0 + 3.0, 3),
                                np.histogram(x, [-3, -1, 0, 0.5, 2], weights=w),
                                np.histogram(x, 5, (-1, 1), weights=w, density=True)),
     HX, R.random(600).astype(np.float32))
case("histogram-auto-range", lambda x, i: (np.histogram(x), np.histogram(x, 3, density=True),
                                           np.histogram(i, 4), np.histogram_bin_edges(x, 4),
                                           np.histogram(x[:0], 2)),
     R.standard_normal((30, 20)).astype(np.float32), R.integers(-5, 20, 300))
case("histogram-blocks", lambda x, w: (np.histogram(x, 13, (-3, 3), weights=w),
                                       np.histogram(x, np.linspace(-3, 3, 9), weights=w)),
     R.standard_normal(70000), R.random(70000))
# resize, block, unwrap, put_along_axis
case("resize", lambda a: (np.resize(a, (5, 3)), np.resize(a[0], 7), np.resize(a[:0], (2, 2)),
                          np.resize(a, 0)), X64)
case("block", lambda a, b: (np.block([[a, b[:, :1]], [a[:1], b[:1, :1]]]),
                            np.block([a[0], b[1], 7.0]), np.block(a), np.block([[[a]]]),
                            np.block([[1, 2], [a[0, 0], 4]])), X64, I32)
PHASE = np.array([0.0, 3.0, 6.5, 0.2, -3.5, 2.9, 9.0, 12.5])
case("unwrap", lambda p: (np.unwrap(p), np.unwrap(np.stack([p, p[::-1]]), axis=0),
                          np.unwrap(np.stack([p, -p]), discont=4.0),
                          np.unwrap(p.astype(np.float32)), np.unwrap(p[:0])), PHASE)
case("unwrap-int-period", lambda p: (np.unwrap((p * 10).astype(np.int64), period=40),
                                     np.unwrap(np.array([0, 3, 6, 9]) + p[:4].astype(int),
                                               period=6)), PHASE)
case("put_along_axis", lambda a: _put_along(a.copy(), np.array([[1], [0], [3]]), -5.0, 1),
     X64)
case("put_along_axis-values-none", lambda a: (
    _put_along(a * 2, np.argmax(np.nan_to_num(a), axis=0, keepdims=True), a[0], 0),
    _put_along(a.copy(), np.array([1, 2]), 9.0, None)), X64)
# ufunc.reduce of ufuncs without a registry reduction: NumPy's sequential fold
case("reduce-fold", lambda a: (np.logaddexp.reduce(a), np.logaddexp.reduce(a, axis=-1),
                               np.logaddexp2.reduce(a, axis=None),
                               np.subtract.reduce(a, axis=2, keepdims=True),
                               np.hypot.reduce(a, (0, 2)), np.logaddexp.reduce(a[:0], 0),
                               np.subtract.reduce(a[0], 0, initial=5.0),
                               np.subtract.reduce(a[0], 1, initial=None),
                               np.logaddexp.reduce(a, 1, dtype=np.float32),
                               np.fmax.reduce(a, 1), np.logaddexp.reduce(a[0, 0, 0])),
     CUBE * 1.5)
case("reduce-fold-int-bool", lambda i, b: (np.subtract.reduce(i, 1), np.bitwise_xor.reduce(i),
                                           np.gcd.reduce(np.abs(i), 1),
                                           np.logaddexp.reduce(i, 0), np.equal.reduce(b, 1),
                                           np.logical_xor.reduce(b)), I32, B)
# apply_along_axis: one traced map over the slices, its results' dimensions at the axis
case("apply_along_axis", lambda a: (np.apply_along_axis(np.sum, 0, a),
                                    np.apply_along_axis(lambda r: r[::-1] * 2, 1, a),
                                    np.apply_along_axis(lambda r: np.outer(r, r), 2, a),
                                    np.apply_along_axis(lambda r, k: r.max() * k, 1, a, 3.0),
                                    np.apply_along_axis(np.cumsum, 1, a[:, :0]),
                                    np.apply_along_axis(lambda r: (r.min(), r[0] * 2), 1, a),
                                    np.apply_along_axis(lambda r: 1.5, 0, a)), CUBE)
case("apply_along_axis-1d-int", lambda a: (np.apply_along_axis(np.diff, 0, a[0]),
                                           np.apply_along_axis(np.median, 1, a)), I32)
# insert/delete at static positions: NumPy's own reading of obj and broadcasting of values
case("insert-flat", lambda a: np.insert(a, 5, 9.5), X64)
case("insert-column-scalar", lambda a: np.insert(a, 1, -2.0, axis=1), X64)
case("insert-column-of-values", lambda a, b: np.insert(a, 2, b[:, 0], axis=1), X64, I32)
case("insert-list-index-column", lambda a, b: np.insert(a, [2], b[:, :1], axis=1), X64, X32)
case("insert-list-index-broadcast-row", lambda a: np.insert(a, [1], [1, 2, 3], axis=1), X64)
case("insert-several", lambda a, b: np.insert(a, [0, 3, 3, -1], b[0], axis=1), I32, X64[:1])
case("insert-slice-rows", lambda a: np.insert(a, slice(0, 3, 2), a[1], axis=0), S64)
case("insert-end-and-cast", lambda a: np.insert(a, 4, 2.75, axis=-1), I32)
case("insert-numpy-positions", lambda a, b: np.insert(a[0], np.array([3, 0]), b[1, :2]),
     X32, X64)
case("insert-none", lambda a: np.insert(a, [], 1.0), X64)
case("insert-bool-cube", lambda a: np.insert(a, 1, [True, False, True], axis=1), CUBE > 0)
case("delete-flat", lambda a: np.delete(a, [0, 5, -1]), X64)
case("delete-column", lambda a: np.delete(a, 1, axis=1), I32)
case("delete-rows", lambda a: np.delete(a, [0, 2], 0), S["int64"])
case("delete-slice", lambda a: np.delete(a, slice(None, None, 2), axis=-1), CUBE)
case("delete-mask", lambda a: np.delete(a, np.array([True, False, True, False]), 1), X32)
case("delete-nothing", lambda a: np.delete(a, [], 0), B)
case("atleast_3d", lambda a, b, c: np.atleast_3d(a, b, c), np.float32(2), X64[0], I32)
case("atleast_3d-one", np.atleast_3d, CUBE)
for k in (-1, 0, 1, 2, 3, 5):
    case(f"rot90-k{k}", lambda x, k=k: np.rot90(x, k), X64)
case("rot90-axes", lambda x: np.rot90(x, 1, axes=(2, 0)), CUBE)
case("rot90-square", np.rot90, S["int64"])
case("rollaxis", lambda x: np.rollaxis(x, 2), CUBE)
case("rollaxis-start", lambda x: np.rollaxis(x, 0, 2), CUBE)
case("rollaxis-start-end", lambda x: np.rollaxis(x, 1, 3), CUBE)
case("rollaxis-negative", lambda x: np.rollaxis(x, -1, -2), CUBE)

# products
case("kron-1d-2d", np.kron, V[:2], G[:2], approx=True)
case("kron-2d-1d", np.kron, G[:2], V[:3], approx=True)
case("kron-scalar", lambda x: np.kron(x, 2.0), S64)
case("kron-3d", np.kron, CUBE[:, :2, :2], S64[:2])
case("vdot", np.vdot, G, G, approx=True)
case("vdot-int", np.vdot, I32, I32 % 5)
case("cross-3d-rows", np.cross, G[:, :3], G[::-1, 1:], approx=True)
case("cross-2d-vectors", np.cross, S64[:, :2], S64[:, 1:])
case("cross-2-and-3", np.cross, S64[:, :2], S64)
case("cross-3-and-2", np.cross, S64, S64[:, :2])
case("cross-axisa", lambda a, b: np.cross(a, b, axisa=0, axisb=0), S64, S64[::-1])
case("cross-axisc", lambda a, b: np.cross(a, b, axisc=0), S64, S64[::-1])
case("cross-axis", lambda a, b: np.cross(a, b, axis=0), S["int32"], S["int64"])
case("cross-broadcast", np.cross, S64, S64[0])
for n in (0, 1, 2, 3, 5, 8):
    case(f"matrix_power-{n}", lambda a, n=n: np.linalg.matrix_power(a, n), S64)
case("matrix_power-int", lambda a: np.linalg.matrix_power(a, 4), S["int32"])
case("matrix_power-stacked", lambda a: np.linalg.matrix_power(a, 6), np.stack([S64, S64.T]))
case("einsum-sublists", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), G, G, approx=True)
case("einsum-sublists-implicit", lambda a, b: np.einsum(a, [1, 0], b, [0, 2]), G, G, approx=True)
case("einsum-sublist-ellipsis", lambda a: np.einsum(a, [Ellipsis, 0], [0, Ellipsis]), CUBE)
case("einsum-sublist-trace-like", lambda a, v: np.einsum(a, [0, 1], v, [1]), G, V[:4],
     approx=True)

# gradient
case("gradient-1d", np.gradient, X64[0])
case("gradient-2d", np.gradient, S64)
case("gradient-int", np.gradient, I32)
case("gradient-float32", np.gradient, X32)
case("gradient-scalar-spacing", lambda f: np.gradient(f, 0.5), S64)
case("gradient-per-axis-spacing", lambda f: np.gradient(f, 2.0, 0.25), S32)
case("gradient-axis", lambda f: np.gradient(f, axis=1), CUBE)
case("gradient-axis-tuple", lambda f: np.gradient(f, 3.0, 2.0, axis=(2, 0)), CUBE)
case("gradient-coords", lambda f: np.gradient(f, np.array([0.0, 0.5, 2.0, 2.25])), G[0])
case("gradient-uniform-coords", lambda f: np.gradient(f, np.arange(4) * 2), G[1])
case("gradient-edge2", lambda f: np.gradient(f, edge_order=2), G)
case("gradient-edge2-coords",
     lambda f: np.gradient(f, np.array([0.0, 1.0, 1.5, 3.5]), edge_order=2), G[2])
case("gradient-edge2-spacing", lambda f: np.gradient(f, 0.3, edge_order=2, axis=0), G)
case("gradient-two-points", np.gradient, np.array([1.0, 4.0]))

# statistics
case("cov", np.cov, G, approx=True)
case("cov-rowvar", lambda m: np.cov(m, rowvar=False), G[:, :3], approx=True)
case("cov-1d", np.cov, V, approx=True)
case("cov-y", lambda m, y: np.cov(m, y), G[:2], G[2:], approx=True)
case("cov-y-rowvar", lambda m, y: np.cov(m, y, rowvar=False), G[:, :2], V[:4], approx=True)
case("cov-bias", lambda m: np.cov(m, bias=True), G, approx=True)
case("cov-ddof", lambda m: np.cov(m, ddof=3), G, approx=True)
case("cov-int", np.cov, S["int32"], approx=True)
case("cov-float32", np.cov, G.astype(np.float32), approx=True)
case("cov-dtype", lambda m: np.cov(m, dtype=np.float32), G, approx=True)
case("cov-fweights", lambda m: np.cov(m, fweights=[1, 2, 1, 3]), G, approx=True)
case("cov-aweights", lambda m, w: np.cov(m, aweights=w), G, np.array([0.5, 1.0, 2.0, 1.5]),
     approx=True)
case("cov-both-weights", lambda m: np.cov(m, fweights=[1, 2, 1, 3], aweights=[1, 1, 2, 0.5]),
     G, approx=True)
case("cov-both-weights-ddof0", lambda m: np.cov(m, ddof=0, aweights=[1, 1, 2, 0.5]), G,
     approx=True)
case("corrcoef", np.corrcoef, G, approx=True)
case("corrcoef-y", lambda x, y: np.corrcoef(x, y), V[:4], G[0], approx=True)
case("corrcoef-1d", np.corrcoef, V, approx=True)
case("corrcoef-rowvar", lambda x: np.corrcoef(x, rowvar=False), G[:, :3], approx=True)

# signals
for mode in ("full", "same", "valid"):
    case(f"convolve-{mode}", lambda a, v, m=mode: np.convolve(a, v, m), V, G[0, :3], approx=True)
    case(f"convolve-{mode}-short-first", lambda a, v, m=mode: np.convolve(a, v, m), G[0, :2], V,
         approx=True)
    case(f"correlate-{mode}", lambda a, v, m=mode: np.correlate(a, v, m), V, G[1], approx=True)
    case(f"correlate-{mode}-short-first", lambda a, v, m=mode: np.correlate(a, v, m), G[1, :2],
         V, approx=True)
    case(f"convolve-{mode}-int", lambda a, v, m=mode: np.convolve(a, v, m), I32[0], I32[1, :3])
case("convolve-even-kernel-same", lambda a, v: np.convolve(a, v, "same"), V, G[0], approx=True)
case("convolve-scalar", lambda a: np.convolve(a, 2.0), V, approx=True)
case("correlate-default", np.correlate, V, G[0, :2], approx=True)

# grids and ranges
case("meshgrid-xy", lambda x, y: np.meshgrid(x, y), V[:3], G[0])
case("meshgrid-ij", lambda x, y, z: np.meshgrid(x, y, z, indexing="ij"), V[:3], G[0], V[:2])
case("meshgrid-sparse", lambda x, y: np.meshgrid(x, y, sparse=True), V[:3], I32[0])
case("meshgrid-xy-3", lambda x, y, z: np.meshgrid(x, y, z), V[:3], G[0], V[:2])
case("meshgrid-one", lambda x: np.meshgrid(x), V)
for num, endpoint in ((5, True), (5, False), (1, True), (0, True), (2, False)):
    case(f"linspace-{num}-{endpoint}", lambda a, b, n=num, e=endpoint:
         np.linspace(a, b, n, endpoint=e), np.float64(-1.5), np.float64(2.0))
case("linspace-arrays", lambda a, b: np.linspace(a, b, 4), G[0], G[1])
case("linspace-arrays-axis", lambda a, b: np.linspace(a, b, 3, axis=-1), G[:2], G[2:])
case("linspace-retstep", lambda a, b: np.linspace(a, b, 7, retstep=True), np.float64(0.0),
     np.float64(1.0))
case("linspace-float32", lambda a, b: np.linspace(a, b, 6), np.float32(1.0), np.float32(3.0))
case("linspace-int", lambda a: np.linspace(a, 10, 4), np.int64(2))
case("linspace-dtype-int", lambda a: np.linspace(a, 10.0, 7, dtype=np.int32), np.float64(-3.0))
case("linspace-python-stop", lambda a: np.linspace(a, 2.5, 3), np.float32(0.5))
case("linspace-zero-step", lambda a: np.linspace(a, a, 3), np.float64(5e-324))
case("logspace", lambda a, b: np.logspace(a, b, 5), np.float64(0.0), np.float64(2.0))
case("logspace-base", lambda a, b: np.logspace(a, b, 4, base=2.0, endpoint=False),
     np.float32(-1.0), np.float32(3.0))
case("logspace-array-base", lambda a, b: np.logspace(a, b, 3, base=np.array([2.0, 10.0])),
     np.float64(0.0), np.float64(1.0))
case("geomspace", lambda a, b: np.geomspace(a, b, 5), np.float64(1.0), np.float64(1000.0))
case("geomspace-negative", lambda a, b: np.geomspace(a, b, 4, endpoint=False),
     np.float64(-2.0), np.float64(-32.0))
case("geomspace-float32-axis", lambda a, b: np.geomspace(a, b, 3, axis=1),
     np.array([1.0, 2.0], np.float32), np.array([4.0, 50.0], np.float32))

# ndarray methods and attributes
case("methods-real-imag-conj", lambda x: (x.real, x.imag, x.conj(), x.conjugate()), X32)
case("methods-trace-diagonal", lambda x: (x.trace(1), x.diagonal(-1), x.T.trace()), X64)

# small ones
for dt in DTYPES:
    case(f"fix-{dt}", np.fix, X[dt])
    case(f"isposinf-{dt}", np.isposinf, X[dt])
    case(f"isneginf-{dt}", np.isneginf, X[dt])
    case(f"ediff1d-{dt}", np.ediff1d, X[dt])
    case(f"vecdot-{dt}", np.vecdot, S[dt], S[dt][::-1])
case("ediff1d-ends", lambda x: np.ediff1d(x, to_end=[7, 8], to_begin=-1), I32)
case("ediff1d-float-ends", lambda x: np.ediff1d(x, to_begin=np.float32(0.5)), X64)
case("trapezoid", np.trapezoid, G, approx=True)
case("trapezoid-dx-axis", lambda y: np.trapezoid(y, dx=0.5, axis=0), S["int32"], approx=True)
case("trapezoid-x", lambda y, x: np.trapezoid(y, x), G, np.array([0.0, 0.5, 2.0, 2.5]),
     approx=True)
case("trapezoid-x-2d", lambda y, x: np.trapezoid(y, x, axis=0), G, G ** 2, approx=True)
case("vecdot-broadcast", np.vecdot, G, V[:4], approx=True)
case("matvec", np.matvec, G, V[:4], approx=True)
case("matvec-stacked", np.matvec, np.stack([S64, S64.T]), S64[:2], approx=True)
case("vecmat", np.vecmat, V[:4], G, approx=True)
case("vecmat-int", np.vecmat, S["int32"][0], S["int64"])

# errors NumPy raises (tracejit raises its typed error of the same builtin class)
error("insert-out-of-bounds", lambda x: np.insert(x, 5, 1.0, axis=1), X64)
error("insert-bad-axis", lambda x: np.insert(x, 1, 1.0, axis=2), X64)
error("insert-values-do-not-broadcast", lambda x: np.insert(x, [1, 2], [1.0, 2.0, 3.0],
                                                            axis=1), X64)
error("insert-float-position", lambda x: np.insert(x, 1.5, 1.0), X64)
error("delete-out-of-bounds", lambda x: np.delete(x, 7, 1), X64)
error("delete-bad-axis", lambda x: np.delete(x, 0, axis=-3), X64)
error("delete-mask-length", lambda x: np.delete(x, np.array([True, False]), 1), X64)
error("cumulative_sum-2d-no-axis", np.cumulative_sum, X64)
error("isin-bad-kind", lambda x: np.isin(x, [1.0], kind="hash"), X64)
error("lexsort-0d-keys", lambda x: np.lexsort(x[0, 0]), X64)
error("lexsort-shapes", lambda x: np.lexsort([x[0], x[0, :2]]), X64)
error("vander-2d", np.vander, X64)
error("polyfit-negative-degree", lambda x: np.polyfit(x[0], x[1], -1), X64)
error("polyfit-2d-x", lambda x: np.polyfit(x, x, 1), X64)
error("polyfit-lengths", lambda x: np.polyfit(x[0], x[1, :2], 1), X64)
error("histogram-bins-zero", lambda x: np.histogram(x, 0), X64)
error("histogram-range-reversed", lambda x: np.histogram(x, range=(1, 0)), X64)
error("histogram-range-infinite", lambda x: np.histogram(x, range=(0, inf)), X64)
error("histogram-bins-2d", lambda x: np.histogram(x, [[0, 1]]), X64)
error("histogram-bins-decreasing", lambda x: np.histogram(x, [0, 2, 1]), X64)
error("histogram-weights-shape", lambda x: np.histogram(x, weights=x[0]), X64)
error("histogram-bins-float", lambda x: np.histogram(x, 2.5), X64)
error("histogram-too-many-bins", lambda x: np.histogram(x, 100, range=(1.0, 1.0 + 1e-15)), X64)
error("resize-negative", lambda x: np.resize(x, (2, -1)), X64)
error("block-empty", lambda x: np.block([[x], []]), X64)
error("block-depths", lambda x: np.block([[x], x]), X64)
error("block-tuple", lambda x: np.block([x, (x, x)]), X64)
error("unwrap-0d", lambda x: np.unwrap(x[0, 0]), X64)
error("put_along_axis-float-indices", lambda x: np.put_along_axis(x, x[:, :1], 1.0, 1), X64)
error("put_along_axis-ndim", lambda x: np.put_along_axis(x, np.array([0]), 1.0, 1), X64)
error("put_along_axis-none-2d", lambda x: np.put_along_axis(x, np.zeros((1, 1), int), 1.0,
                                                            None), X64)
error("reduce-fold-several-axes", lambda x: np.subtract.reduce(x, axis=None), X64)
error("reduce-fold-empty", lambda x: np.subtract.reduce(x[:0], 0), X64)
error("reduce-fold-bad-axis", lambda x: np.logaddexp.reduce(x, 2), X64)
error("apply_along_axis-empty-iteration", lambda x: np.apply_along_axis(np.sum, 1, x[:0]), X64)
error("apply_along_axis-bad-axis", lambda x: np.apply_along_axis(np.sum, 2, x), X64)
error("ediff1d-to_begin-float", lambda x: np.ediff1d(x, to_begin=0.5), I32)
error("vecdot-mismatch", np.vecdot, G, V)
error("matvec-1d", np.matvec, V, V)
error("diff-negative-n", lambda x: np.diff(x, n=-1), X64)
error("diff-0d", np.diff, np.float64(1.0))
error("diagonal-1d", np.diagonal, V)
error("diagonal-same-axes", lambda x: np.diagonal(x, 0, 1, 1), S64)
error("diagonal-axis-out-of-range", lambda x: np.diagonal(x, 0, 0, 2), S64)
error("diag-3d", np.diag, CUBE)
error("trace-1d", np.trace, V)
error("hsplit-0d", lambda x: np.hsplit(x, 1), np.float64(1.0))
error("vsplit-1d", lambda x: np.vsplit(x, 1), V)
error("dsplit-2d", lambda x: np.dsplit(x, 1), S64)
error("hsplit-unequal", lambda x: np.hsplit(x, 3), X64)
error("rot90-same-axes", lambda x: np.rot90(x, axes=(0, 0)), S64)
error("rot90-axes-len", lambda x: np.rot90(x, axes=(0, 1, 2)), CUBE)
error("rot90-axes-out-of-range", lambda x: np.rot90(x, axes=(0, 3)), CUBE)
error("rollaxis-start", lambda x: np.rollaxis(x, 0, 5), CUBE)
error("rollaxis-axis", lambda x: np.rollaxis(x, 3), CUBE)
error("cross-dims", np.cross, X64, X64)
error("cross-bool", np.cross, S["bool"], S["bool"])
error("vdot-lengths", np.vdot, V, G)
error("matrix_power-1d", lambda a: np.linalg.matrix_power(a, 2), V)
error("matrix_power-not-square", lambda a: np.linalg.matrix_power(a, 2), X64)
error("matrix_power-float-exponent", lambda a: np.linalg.matrix_power(a, 2.0), S64)
error("select-lengths", lambda x: np.select([x > 0], [x, x]), X64)
error("select-non-bool", lambda x: np.select([x], [x]), X64)
error("average-shape", lambda x: np.average(x, weights=[1.0, 2.0]), S64)
error("average-weights-axis", lambda x: np.average(x, axis=0, weights=[1.0, 2.0]), S64)
error("cov-3d", np.cov, CUBE)
error("cov-fweights-float", lambda m: np.cov(m, fweights=[1.5, 2.0, 1.0, 3.0]), G)
error("cov-fweights-length", lambda m: np.cov(m, fweights=[1, 2]), G)
error("cov-aweights-negative", lambda m: np.cov(m, aweights=[1.0, -2.0, 1.0, 3.0]), G)
error("convolve-empty", np.convolve, V, np.zeros(0))
error("convolve-mode", lambda a, v: np.convolve(a, v, "middle"), V, V)
error("correlate-2d", np.correlate, G, G)
error("gradient-too-small", np.gradient, np.array([1.0]))
error("gradient-edge-order", lambda f: np.gradient(f, edge_order=3), G)
error("gradient-spacing-count", lambda f: np.gradient(f, 1.0, 2.0, 3.0), G)
error("gradient-coords-length", lambda f: np.gradient(f, np.arange(3.0)), G[0])
error("meshgrid-indexing", lambda x: np.meshgrid(x, x, indexing="yx"), V)
error("linspace-negative", lambda a: np.linspace(a, 1.0, -1), np.float64(0.0))

# Compiled on the CPU too: a representative subset (compiling costs ~0.2 s a kernel).
COMPILED = {
    "sinc-float32", "nan_to_num-float64", "modf-float64", "angle-float32", "isclose-float64",
    "diff-n2-axis0", "nanmean-float64", "nanvar-ddof", "nanmax-all-nan-slice", "cross-float64",
    "diagonal-k1", "diag-1d-k-1", "trace-3d-dtype", "rot90-k1", "kron-3d", "gradient-2d",
    "gradient-edge2-coords", "cov", "corrcoef", "convolve-same", "meshgrid-xy",
    "linspace-arrays", "geomspace-negative", "select", "average-weights", "count_nonzero-all",
    "insert-several", "insert-column-of-values", "delete-mask", "cumulative_sum", "isin",
    "lexsort", "polyval", "vander", "polyfit", "histogram", "histogram-auto-range",
    "histogram-blocks", "block", "unwrap", "put_along_axis-values-none", "apply_along_axis",
    "reduce-fold", "reduce-fold-int-bool",
}


def _run(fn, args, backend):
    return tj.jit(fn, backend=backend)(*copy.deepcopy(args))


def _compare(fn, args, approx, backend):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = fn(*copy.deepcopy(args))
    except Exception as exc:
        with pytest.raises(builtin_error(exc)) as info:
            _run(fn, args, backend)
        assert isinstance(info.value, tj.errors.TracejitError)
        return
    assert_same(_run(fn, args, backend), want, 1.0 if approx else None)


@pytest.mark.parametrize(("fn", "args", "approx"), CASES)
def test_matches_numpy(fn, args, approx):
    _compare(fn, args, approx, "reference")


@pytest.mark.parametrize(("fn", "args", "approx"),
                         [c for c in CASES if c.id in COMPILED])
def test_matches_numpy_compiled(fn, args, approx):
    _compare(fn, args, True, "cpu")


def test_compiled_subset_exists():
    assert COMPILED <= {c.id for c in CASES}


@pytest.mark.parametrize(("fn", "args"), ERRORS)
def test_raises_like_numpy(fn, args):
    with pytest.raises(Exception) as numpy_error:
        fn(*copy.deepcopy(args))
    with pytest.raises(builtin_error(numpy_error.value)) as info:
        _run(fn, args, "reference")
    assert isinstance(info.value, tj.errors.TracejitError)


# ---------------------------------------------------------------- gradients

def _nan_in(x):
    return np.where(np.arange(x.size).reshape(x.shape) == 1, np.nan, x)


GRADS = {  # name: (function of float64 arrays, input shapes); inputs are drawn in [0.5, 1.5]
    "sinc": (lambda x: np.sinc(x - 1.0), [(5,)]),
    "nan_to_num": (lambda x: np.nan_to_num(np.log(x - 0.9)) * x, [(5,)]),
    "modf": (lambda x: np.modf(x * 3.0)[0] + np.modf(x)[1] * x, [(5,)]),
    "diff": (lambda x: np.diff(x ** 2, n=2, axis=0, prepend=x[:1]), [(4, 3)]),
    "ptp": (lambda x: np.ptp(x, axis=1), [(3, 4)]),
    "average": (lambda x, w: np.average(x, axis=0, weights=w), [(3, 2), (3,)]),
    "nanreductions": (lambda x: np.nansum(_nan_in(x) ** 2, axis=0) + np.nanmean(_nan_in(x))
                      + np.nanvar(_nan_in(x), axis=1) .sum() + np.nanstd(_nan_in(x), ddof=1)
                      + np.nanmax(_nan_in(x), axis=1).sum() + np.nanprod(_nan_in(x)), [(3, 3)]),
    "diagonal_trace_diag": (lambda x: np.diag(np.diagonal(x, 1)) @ x[:2, :2] + np.trace(x ** 2)
                            + np.diag(x, -1).sum(), [(3, 3)]),
    "rot90_kron": (lambda x, y: np.rot90(np.kron(x, y), 3), [(2, 2), (2, 3)]),
    "cross_vdot": (lambda a, b: np.cross(a, b) * np.vdot(a, b), [(2, 3), (2, 3)]),
    "matrix_power": (lambda a: np.linalg.matrix_power(a, 5), [(3, 3)]),
    "einsum_sublists": (lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [2, 0]), [(2, 3), (3, 2)]),
    "gradient": (lambda f: np.gradient(f ** 2, 0.5, np.array([0.0, 1.0, 1.5]), edge_order=2)[1],
                 [(3, 3)]),
    "gradient_traced_coords": (lambda f, x: np.gradient(f, np.arange(4.0) + 0.3 * x), [(4,), (4,)]),
    "cov_corrcoef": (lambda m: np.cov(m) + np.corrcoef(m), [(3, 4)]),
    "cov_weights": (lambda m, w: np.cov(m, aweights=w), [(2, 4), (4,)]),
    "convolve_correlate": (lambda a, v: np.concatenate([np.convolve(a, v, "same"),
                                                        np.correlate(a, v, "full")]),
                           [(5,), (3,)]),
    "linspace_geomspace": (lambda a, b: np.linspace(a, b, 4) + np.geomspace(a, b, 4)
                           + np.logspace(a, b, 4, base=2.0), [(2,), (2,)]),
    "trapezoid_vecdot_matvec": (lambda y, x: np.trapezoid(y, x) * np.vecdot(y, y)
                                + np.matvec(y[:, :2], x[:2]) + np.vecmat(x[:2], y[:2])[:2]
                                + np.ediff1d(x)[:2], [(2, 3), (3,)]),
    "insert_delete": (lambda x, v: np.insert(x, [0, 2, 2], v * x[:, 1:2], axis=1)
                      + np.delete(np.insert(x, 1, v, axis=1), [0], axis=1)[:, :1],
                      [(3, 3), (3,)]),
    "polyval_vander_polyfit": (lambda p, x: np.polyval(p, x) + np.vander(x, 3)[:, 1]
                               + np.polyfit(x, np.sin(p[0] * x), 2)[0], [(3,), (5,)]),
    "histogram_weights": (lambda x, w: np.histogram(x, 3, (0.0, 2.0), weights=w ** 2)[0]
                          + np.histogram(x, [0.6, 1.0, 1.6], weights=w, density=True)[0]
                          .sum(), [(6,), (6,)]),
    "block_resize_unwrap": (lambda x, y: np.block([[x, y], [y, x]]).sum(axis=0)
                            + np.resize(x, 4) * np.unwrap(np.resize(y, 4) * 4.0),
                            [(2,), (2,)]),
    "put_along_axis_cumulative": (lambda x: np.cumulative_prod(_put_along(
        x * 1.0, np.array([[0], [2]]), x[:, 1:2] ** 2, 1), axis=1, include_initial=True),
        [(2, 3)]),
    "reduce_fold": (lambda x: np.logaddexp.reduce(x * 3.0, axis=1)
                    + np.subtract.reduce(x, axis=0) * np.hypot.reduce(x, axis=None), [(3, 3)]),
    "apply_along_axis": (lambda x: np.apply_along_axis(lambda r: np.exp(r) / r.sum(), 1, x)
                         + np.apply_along_axis(np.prod, 0, x), [(3, 3)]),
    "select_meshgrid": (lambda x, y: np.select([x > 1.0], [x * y], default=y)
                        * np.meshgrid(x, y)[0][:1], [(3,), (3,)]),
}


def _fd(f, xs, eps=1e-6):
    out = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            hi, lo = [v.copy() for v in xs], [v.copy() for v in xs]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
        out.append(g)
    return out


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient_matches_finite_differences(name):
    fn, shapes = GRADS[name]
    rng = np.random.default_rng(7)
    xs = [rng.uniform(0.5, 1.5, s) for s in shapes]
    w = rng.standard_normal(np.shape(fn(*xs)))

    def objective(*ys):
        return np.sum(fn(*ys) * w)

    got = tj.grad(objective, argnums=tuple(range(len(xs))), backend="reference")(*xs)
    for g, want in zip(got, _fd(objective, xs), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6 * max(1, np.abs(want).max()))


@pytest.mark.parametrize(("start", "stop", "num", "dtype"), [
    (-3, 3, 51, np.float64), (0.1, 0.7, 8, np.float32), (np.float32(-1.5), np.float32(2.25),
                                                         14, np.float32),
    (-2.0, 2.5, 8, np.float64), (2.0, 2.0, 5, np.float64), (-7, 20, 6, np.int64),
    (np.float64(1e-300), np.float64(3e-300), 4, np.float64), (5.0, 1.0, 2, np.float64)])
def test_linspace_at_gives_linspaces_bits(start, stop, num, dtype):
    """The histogram's edges computed in place are linspace's, element for element."""
    from tracejit.trace.numpy_more import linspace_at

    k = np.arange(num)
    got = tj.jit(lambda k: linspace_at(k, start, stop, num, np.dtype(dtype)),
                 backend="reference")(k)
    want = np.linspace(start, stop, num, dtype=dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.fixture
def cuda(monkeypatch):
    """The emulated CuPy (tools/cudasim), one GPU."""
    with gpu.cupy(monkeypatch):
        yield


@pytest.mark.filterwarnings("ignore::tracejit.errors.PlacementWarning")  # (int64 counts)
@pytest.mark.parametrize("name", ["histogram", "histogram-auto-range", "isin", "insert-several",
                                  "delete-mask", "block", "unwrap", "apply_along_axis",
                                  "vander", "lexsort", "cumulative_sum"])
def test_on_the_emulated_gpu(name, cuda):
    """The compositions run on the GPU as well (weighted histograms add with atomics there:
    within rounding)."""
    (fn, args, _), = [c.values for c in CASES if c.id == name]
    with tj.device("cuda"):
        got = tj.jit(fn)(*copy.deepcopy(args))
    got = gpu.on_host(got)
    assert_same(got, fn(*copy.deepcopy(args)), 1.0)


def test_reductions_numpy_does_not_fold_are_refused():
    """NumPy's arctan2.reduce and power.reduce are no fold (their vectorised loops drop
    the running result): refused rather than copied."""
    for fn in (lambda x: np.arctan2.reduce(x), lambda x: np.power.reduce(x, 1)):
        with pytest.raises(tj.errors.UnsupportedOperation):
            tj.jit(fn, backend="reference")(X64)
