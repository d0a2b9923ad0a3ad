"""``numpy.linalg`` under tracing: NumPy's signatures, dtypes, shapes and errors.

The factorisations and solvers are registry ops (``ir/linalg_ops.py``: LAPACK through
NumPy, or cuSOLVER through CuPy); the rest is composed from them as NumPy composes it
(``norm``, ``pinv``, ``matrix_rank`` and ``lstsq`` from ``svd``; ``multi_dot`` is a chain
of matmuls in the cheapest order for the static shapes). Integer and bool operands become
float64, float32 stays float32, as in ``numpy.linalg``. Results NumPy computes from the
data's rank (``lstsq``'s rank, ``matrix_rank``) are traced integers; ``lstsq``'s residuals
have the shape NumPy gives a full-rank input (a rank-deficient tall one gets them too,
where NumPy returns an empty array).
"""

from __future__ import annotations

import builtins
import math

import numpy as np
from numpy.linalg._linalg import EighResult, QRResult, SlogdetResult, SVDResult

from ..errors import DTypeError, LinAlgError, ShapeError, UnsupportedOperation
from ..ir.linalg_ops import check_matrices, parts
from ..ir.ops import normalize_axis
from . import numpy_api as npa
from .core import bind
from .numpy_api import _as_strong_operand, _scalar_result, _strong, aval, implements

linalg = np.linalg
_NO = object()


def _common_dtype(*xs) -> np.dtype:
    """``numpy.linalg``'s result dtype: float32 only when every operand is float32."""
    result = np.dtype(np.float32)
    for x in xs:
        dt = aval(x).dtype
        if dt.kind == "c":
            raise UnsupportedOperation("numpy.linalg on complex arrays is not supported by "
                                       "tracejit", hint="split real and imaginary parts")
        if dt.kind == "f" and dt.itemsize < 4:
            raise DTypeError(f"array type {dt.name} is unsupported in linalg")
        if dt != np.float32:
            result = np.dtype(np.float64)
    return result


def _floats(*xs, dtype=None) -> list:
    """The operands as strong arrays of one float dtype (the common one by default)."""
    xs = [_as_strong_operand(x) for x in xs]
    dtype = _common_dtype(*xs) if dtype is None else dtype
    return [x if aval(x).dtype == dtype else bind("convert", x, dtype=dtype) for x in xs]


def split(packed, op: str, shape: tuple[int, ...], **attrs) -> list:
    """The results packed in the output of ``op`` (see ``ir/linalg_ops.py``) on an input
    stack of shape ``shape``, each of shape ``batch + part``."""
    batch = shape[:-2]
    out, start = [], 0
    for part in parts(op, shape, **attrs):
        size = math.prod(part)
        t = aval(packed)
        starts = (0,) * (t.ndim - 1) + (start,)
        stops = t.shape[:-1] + (start + size,)
        piece = packed if size == t.shape[-1] else bind(
            "slice", packed, starts=starts, stops=stops, steps=(1,) * t.ndim)
        out.append(bind("reshape", piece, shape=batch + part))
        start += size
    return out


def _swap(x):
    return npa.swapaxes(x, -1, -2)


# ---------------------------------------------------------------- factorisations


@implements(linalg.det)
def det(a):
    (a,) = _floats(a)
    return _scalar_result(bind("det", a))


@implements(linalg.slogdet)
def slogdet(a):
    (a,) = _floats(a)
    sign, logdet = split(bind("slogdet", a), "slogdet", aval(a).shape)
    return SlogdetResult(_scalar_result(sign), _scalar_result(logdet))


@implements(linalg.inv)
def inv(a):
    (a,) = _floats(a)
    return bind("inv", a)


@implements(linalg.solve)
def solve(a, b):
    a, b = _floats(a, b)
    ta, tb = aval(a), aval(b)
    check_matrices(ta)
    if tb.ndim == 1:  # NumPy 2: only a 1-d b is a vector
        if tb.shape[0] != ta.shape[-1]:
            raise ShapeError(
                "solve1: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                f"signature (m,m),(m)->(m) (size {tb.shape[0]} is different from "
                f"{ta.shape[-1]})")
        x = bind("solve", a, npa.reshape(b, (tb.shape[0], 1)))
        return npa.reshape(x, aval(x).shape[:-1])
    return bind("solve", a, b)


@implements(linalg.cholesky)
def cholesky(a, /, *, upper=False):
    (a,) = _floats(a)
    return bind("cholesky", a, upper=bool(upper))


@implements(linalg.qr)
def qr(a, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        if mode in ("raw", "full", "f", "economic", "e"):
            raise npa._unsupported("linalg.qr", f"(mode={mode!r})")
        raise ValueError(f"Unrecognized mode '{mode}'")
    (a,) = _floats(a)
    results = split(bind("qr", a, mode=mode), "qr", aval(a).shape, mode=mode)
    return results[0] if mode == "r" else QRResult(*results)


def _uplo(UPLO) -> str:
    uplo = str(UPLO).upper()
    if uplo not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return uplo


@implements(linalg.eigh)
def eigh(a, UPLO="L"):
    (a,) = _floats(a)
    attrs = {"UPLO": _uplo(UPLO), "vectors": True}
    return EighResult(*split(bind("eigh", a, **attrs), "eigh", aval(a).shape, **attrs))


@implements(linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    (a,) = _floats(a)
    attrs = {"UPLO": _uplo(UPLO), "vectors": False}
    return split(bind("eigh", a, **attrs), "eigh", aval(a).shape, **attrs)[0]


@implements(linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        raise npa._unsupported("linalg.svd", "(hermitian=True)")
    (a,) = _floats(a)
    attrs = {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)}
    results = split(bind("svd", a, **attrs), "svd", aval(a).shape, **attrs)
    return SVDResult(*results) if compute_uv else results[0]


@implements(linalg.svdvals)
def svdvals(x, /):
    return svd(x, compute_uv=False)


# ---------------------------------------------------------------- compositions


def _last_axis_column(x):
    """``asarray(x)[..., newaxis]`` for a static or traced tolerance."""
    x = _as_strong_operand(x)
    return npa.reshape(x, aval(x).shape + (1,))


def _reciprocal_where(large, s):
    """``1 / s`` where ``large``, else 0 (without dividing by the small ones)."""
    return bind("where", large, bind("true_divide", 1, bind("where", large, s, 1)), 0)


@implements(linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=_NO):
    (a,) = _floats(a)
    t = aval(a)
    check_matrices(t, square=False)
    m, n = t.shape[-2:]
    if rcond is None:
        rcond = 1e-15 if rtol is _NO else (
            builtins.max(m, n) * np.finfo(t.dtype).eps if rtol is None else rtol)
    elif rtol is not _NO:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if m == 0 or n == 0:
        return bind("full", shape=t.shape[:-2] + (n, m), dtype=t.dtype, value=0)
    if hermitian:
        w, v = eigh(a)
        sizes = bind("absolute", w)
        cutoff = bind("multiply", _last_axis_column(rcond), npa.max(sizes, -1, keepdims=True))
        inv_w = _reciprocal_where(bind("greater", sizes, cutoff), w)
        return npa.matmul(v, bind("multiply", npa.reshape(inv_w, aval(inv_w).shape + (1,)),
                                  _swap(v)))
    u, s, vt = svd(a, full_matrices=False)
    cutoff = bind("multiply", _last_axis_column(rcond), npa.max(s, -1, keepdims=True))
    inv_s = _reciprocal_where(bind("greater", s, cutoff), s)
    return npa.matmul(_swap(vt), bind("multiply", npa.reshape(inv_s, aval(inv_s).shape + (1,)),
                                      _swap(u)))


@implements(linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    A = _as_strong_operand(A)
    t = aval(A)
    if t.ndim < 2:
        return _scalar_result(npa.astype(npa.any(bind("not_equal", A, 0)), np.int64))
    S = bind("absolute", eigvalsh(A)) if hermitian else svd(A, compute_uv=False)
    ts = aval(S)
    if ts.shape[-1] == 0:
        return _scalar_result(bind("full", shape=ts.shape[:-1], dtype=np.int64, value=0))
    if tol is None:
        if rtol is None:
            rtol = builtins.max(t.shape[-2:]) * np.finfo(ts.dtype).eps
        else:
            rtol = _last_axis_column(rtol)
        tol = bind("multiply", npa.max(S, -1, keepdims=True), rtol)
    else:
        tol = _last_axis_column(tol)
    return _scalar_result(npa.sum(bind("greater", S, tol), -1, np.int64))


@implements(linalg.lstsq)
def lstsq(a, b, rcond=None):
    """Through the SVD, as LAPACK's gelsd (NumPy's) computes it, in float64."""
    result = _common_dtype(a, b)
    a, b = _floats(a, b, dtype=np.dtype(np.float64))
    ta, tb = aval(a), aval(b)
    is_1d = tb.ndim == 1
    if is_1d:
        b = npa.reshape(b, (tb.shape[0], 1))
    for t in (ta, aval(b)):
        if t.ndim != 2:
            raise LinAlgError(f"{t.ndim}-dimensional array given. Array must be "
                              "two-dimensional")
    (m, n), (m2, _) = ta.shape, aval(b).shape
    if m != m2:
        raise LinAlgError("Incompatible dimensions")
    if m == 0 or n == 0:
        raise npa._unsupported("linalg.lstsq", " of an empty matrix")
    if rcond is None:
        rcond = np.finfo(np.float64).eps * builtins.max(n, m)
    elif isinstance(rcond, (int, float, np.number)) and rcond < 0:
        rcond = np.finfo(np.float64).eps  # gelsd: machine precision
    u, s, vt = svd(a, full_matrices=False)
    large = bind("greater", s, bind("multiply", rcond, npa.max(s)))
    inv_s = npa.reshape(_reciprocal_where(large, s), (-1, 1))
    x = npa.matmul(_swap(vt), bind("multiply", inv_s, npa.matmul(_swap(u), b)))
    if m > n:
        r = bind("subtract", b, npa.matmul(a, x))
        resids = npa.sum(bind("multiply", r, r), 0)
    else:
        resids = bind("full", shape=(0,), dtype=np.float64, value=0)
    rank = _scalar_result(npa.sum(large, None, np.int32))
    if is_1d:
        x = npa.reshape(x, (n,))
    return (npa.astype(x, result), npa.astype(resids, result), rank, npa.astype(s, result))


# ---------------------------------------------------------------- norms


def _abs(x):
    return bind("absolute", x)


def _max0(x, axis, keepdims=False):
    """``x.max(axis, initial=0)``: 0 over no elements."""
    t = aval(x)
    if any(t.shape[a] == 0 for a in (axis if isinstance(axis, tuple) else (axis,))):
        return npa.zeros_like(npa.sum(x, axis, keepdims=keepdims))
    return npa.max(x, axis, keepdims=keepdims)


def _vector_norm(x, ord, axis, keepdims):
    if ord == np.inf:
        return _max0(_abs(x), axis, keepdims)
    if ord == -np.inf:
        return npa.min(_abs(x), axis, keepdims=keepdims)
    if ord == 0:
        nonzero = npa.astype(bind("not_equal", x, 0), aval(x).dtype)
        return npa.sum(nonzero, axis, keepdims=keepdims)
    if ord == 1:
        return npa.sum(_abs(x), axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return _strong(bind("sqrt", npa.sum(bind("multiply", x, x), axis, keepdims=keepdims)))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    absx = npa.astype(bind("power", _abs(x), ord), aval(x).dtype)
    ret = npa.sum(absx, axis, keepdims=keepdims)
    return npa.astype(bind("power", ret, np.reciprocal(ord, dtype=aval(ret).dtype)),
                      aval(ret).dtype)


def _svd_norm(x, row, col, reduce):
    s = svd(npa.moveaxis(x, (row, col), (-2, -1)), compute_uv=False)
    return reduce(s, -1)


def _matrix_norm(x, ord, row, col):
    """NumPy's matrix norms over axes (row, col), without keepdims."""
    sums = lambda axis: npa.sum(_abs(x), axis)  # noqa: E731
    if ord == 2:
        return _svd_norm(x, row, col, _max0)
    if ord == -2:
        return _svd_norm(x, row, col, lambda s, ax: npa.min(s, ax))
    if ord == "nuc":
        return _svd_norm(x, row, col, lambda s, ax: npa.sum(s, ax))
    if ord in (1, -1):
        reduce = _max0 if ord == 1 else (lambda y, ax: npa.min(y, ax))
        return reduce(sums(row), col - 1 if col > row else col)
    if ord in (np.inf, -np.inf):
        reduce = _max0 if ord == np.inf else (lambda y, ax: npa.min(y, ax))
        return reduce(sums(col), row - 1 if row > col else row)
    if ord in (None, "fro", "f"):
        return _strong(bind("sqrt", npa.sum(bind("multiply", x, x), (row, col))))
    raise ValueError("Invalid norm order for matrices.")


@implements(linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    x = _as_strong_operand(x)
    if aval(x).dtype.kind not in "fc":
        x = npa.astype(x, np.float64)
    if aval(x).dtype.kind == "c":
        _common_dtype(x)  # refuses complex arrays
    nd = aval(x).ndim
    if axis is None and (ord is None or (ord in ("f", "fro") and nd == 2)
                         or (ord == 2 and nd == 1)):
        flat = npa.ravel(x)
        ret = _scalar_result(_strong(bind("sqrt", npa.dot(flat, flat))))
        return npa.reshape(ret, (1,) * nd) if keepdims else ret
    if axis is None:
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (int(axis),)
        except Exception:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from None
    if len(axis) == 1:
        return _scalar_result(_vector_norm(x, ord, axis, keepdims))
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    row, col = (normalize_axis(int(a), nd) for a in axis)
    if row == col:
        raise ValueError("Duplicate axes given.")
    ret = _matrix_norm(x, ord, row, col)
    if keepdims:
        shape = list(aval(x).shape)
        shape[row] = shape[col] = 1
        ret = npa.reshape(ret, tuple(shape))
    return _scalar_result(ret)


@implements(linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return norm(x, axis=(-2, -1), keepdims=keepdims, ord=ord)


@implements(linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = _as_strong_operand(x)
    shape = list(aval(x).shape)
    if axis is None:
        y, ax = npa.ravel(x), 0
    elif isinstance(axis, tuple):
        axes = tuple(normalize_axis(int(a), len(shape)) for a in axis)
        rest = tuple(i for i in range(len(shape)) if i not in axes)
        y = npa.reshape(npa.transpose(x, axes + rest),
                        (math.prod(shape[i] for i in axes), *(shape[i] for i in rest)))
        ax = 0
    else:
        y, ax = x, axis
    res = norm(y, axis=ax, ord=ord)
    if keepdims:
        for i in (range(len(shape)) if axis is None else
                  (axis if isinstance(axis, tuple) else (axis,))):
            shape[normalize_axis(int(i), len(shape))] = 1
        res = npa.reshape(res, tuple(shape))
    return res


# ---------------------------------------------------------------- products


def _chain_order(dims: list[int]) -> np.ndarray:
    """NumPy's matrix-chain order: ``split[i, j]`` is where the cheapest product of
    matrices i..j splits (dims: the chain's p_0, ..., p_n)."""
    n = len(dims) - 1
    cost = np.zeros((n, n))
    split_at = np.zeros((n, n), dtype=np.intp)
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j] = np.inf
            for k in range(i, j):
                q = cost[i, k] + cost[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1]
                if q < cost[i, j]:
                    cost[i, j], split_at[i, j] = q, k
    return split_at


def _chain(arrays, order, i, j):
    if i == j:
        return arrays[i]
    k = int(order[i, j])
    return npa.dot(_chain(arrays, order, i, k), _chain(arrays, order, k + 1, j))


@implements(linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    npa._reject_out("linalg.multi_dot", out)
    arrays = [_as_strong_operand(a) for a in arrays]
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return npa.dot(arrays[0], arrays[1])
    first, last = aval(arrays[0]).ndim, aval(arrays[-1]).ndim
    if first == 1:
        arrays[0] = npa.reshape(arrays[0], (1, -1))
    if last == 1:
        arrays[-1] = npa.reshape(arrays[-1], (-1, 1))
    for a in arrays:
        if aval(a).ndim != 2:
            raise LinAlgError(f"{aval(a).ndim}-dimensional array given. Array must be "
                              "two-dimensional")
    if n == 3:
        (a0, a1b0), (b1c0, c1) = aval(arrays[0]).shape, aval(arrays[2]).shape
        left_first = a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0)
        order = np.array([[0, 0, int(left_first)], [0, 0, 1], [0, 0, 0]])
    else:
        order = _chain_order([aval(a).shape[0] for a in arrays] + [aval(arrays[-1]).shape[1]])
    result = _chain(arrays, order, 0, n - 1)
    if first == 1 and last == 1:
        return _scalar_result(npa.reshape(result, ()))
    return npa.ravel(result) if first == 1 or last == 1 else result


@implements(linalg.outer)
def outer(x1, x2, /):
    x1, x2 = _as_strong_operand(x1), _as_strong_operand(x2)
    if aval(x1).ndim != 1 or aval(x2).ndim != 1:
        raise ValueError("Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={aval(x1).ndim} and x2.ndim={aval(x2).ndim}.")
    return npa.outer(x1, x2)


@implements(linalg.matmul)
def matmul(x1, x2, /):
    return npa.matmul(_as_strong_operand(x1), _as_strong_operand(x2))


@implements(linalg.tensordot)
def tensordot(x1, x2, /, *, axes=2):
    return npa.tensordot(x1, x2, axes)


@implements(linalg.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    """``sum(x1 * x2, axis)`` in the dtype of the product, as NumPy's vecdot gufunc (a
    matmul of a row by a column per pair, with the operands' batch dims broadcast)."""
    x1, x2 = _as_strong_operand(x1), _as_strong_operand(x2)
    t1, t2 = aval(x1), aval(x2)
    if t1.ndim == 0 or t2.ndim == 0:
        raise ValueError("vecdot: Input operand 0 does not have enough dimensions")
    x1 = npa.moveaxis(x1, normalize_axis(axis, t1.ndim), -1)
    x2 = npa.moveaxis(x2, normalize_axis(axis, t2.ndim), -1)
    rows = npa.expand_dims(x1, -2)
    cols = npa.expand_dims(x2, -1)
    prod = npa.matmul(rows, cols)
    return _scalar_result(npa.reshape(prod, aval(prod).shape[:-2]))


@implements(linalg.matrix_transpose)
def matrix_transpose(x, /):
    x = _as_strong_operand(x)
    if aval(x).ndim < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return _swap(x)
