"""The ``numpy.linalg`` decompositions and solvers as IR ops (kind ``LINALG``).

Each op's NumPy implementation is the ``numpy.linalg`` function itself (LAPACK), so the
reference and CPU backends give NumPy's bits; CUDA calls ``cupy.linalg`` (cuSOLVER).
Inputs are float32 or float64 stacks of matrices ``(..., m, n)``: the tracer converts
integer and bool operands to float64 first, as ``numpy.linalg`` does. The dtype of the
result is the input's (NumPy computes float32 in float64 and rounds the result back).

The IR has one output per node, so an op with several results (``slogdet``, ``qr``,
``eigh``, ``svd``) returns them *packed*: each part raveled over the matrix dimensions and
concatenated along one last axis, ``(..., size_1 + size_2 + ...)``. ``parts`` gives the
part shapes and the tracer splits them back with a slice and a reshape per part. One
decomposition then runs once (one node per part would repeat it); the price is one copy
of the results, O(n^2) beside the O(n^3) factorisation.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, LinAlgError, ShapeError
from .registry import Exactness, Kind, register
from .types import TensorType

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def check_matrices(x: TensorType, square: bool = True) -> None:
    """NumPy's checks of a stack of (square) matrices, as ``numpy.linalg`` words them."""
    if x.ndim < 2:
        raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least "
                          "two-dimensional")
    if square and x.shape[-1] != x.shape[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")


def _float(*types: TensorType) -> np.dtype:
    for t in types:
        if t.dtype not in _FLOATS:
            raise DTypeError(f"linalg ops take float32 or float64 operands, got {t.dtype}",
                             hint="convert with .astype(np.float64)")
    return np.result_type(*(t.dtype for t in types))


def parts(op: str, shape: tuple[int, ...], **attrs) -> list[tuple[int, ...]]:
    """The matrix shapes of the results packed in ``op``'s output, for an input stack of
    shape ``shape`` (``(..., m, n)``), in order."""
    m, n = shape[-2:]
    k = min(m, n)
    if op == "slogdet":
        return [(), ()]  # sign, logabsdet
    if op == "qr":
        mode = attrs["mode"]
        if mode == "r":
            return [(k, n)]
        q = m if mode == "complete" else k
        return [(m, q), (q, n)]
    if op == "eigh":
        return [(n,), (n, n)] if attrs["vectors"] else [(n,)]
    if op == "svd":
        if not attrs["compute_uv"]:
            return [(k,)]
        u, v = (m, n) if attrs["full_matrices"] else (k, k)
        return [(m, u), (k,), (v, n)]
    raise KeyError(op)


def _packed_rule(op: str):
    def rule(x: TensorType, **attrs) -> TensorType:
        check_matrices(x, square=op in ("slogdet", "eigh"))
        dtype = _float(x)
        size = sum(math.prod(p) for p in parts(op, x.shape, **attrs))
        return TensorType(x.shape[:-2] + (size,), dtype)

    return rule


def _pack(batch: tuple[int, ...], *results) -> np.ndarray:
    flat = [np.reshape(r, batch + (-1,)) for r in results]
    return np.concatenate(flat, axis=-1)


def _slogdet(x):
    sign, logdet = np.linalg.slogdet(x)
    return _pack(x.shape[:-2], sign, logdet)


def _qr(x, *, mode):
    out = np.linalg.qr(x, mode=mode)
    return _pack(x.shape[:-2], *((out,) if mode == "r" else out))


def _eigh(x, *, UPLO, vectors):
    if not vectors:
        return _pack(x.shape[:-2], np.linalg.eigvalsh(x, UPLO=UPLO))
    return _pack(x.shape[:-2], *np.linalg.eigh(x, UPLO=UPLO))


def _svd(x, *, full_matrices, compute_uv):
    out = np.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    return _pack(x.shape[:-2], *(out if compute_uv else (out,)))


def _square_rule(x: TensorType, **attrs) -> TensorType:
    check_matrices(x)
    return TensorType(x.shape, _float(x))


def _det_rule(x: TensorType) -> TensorType:
    check_matrices(x)
    return TensorType(x.shape[:-2], _float(x))


def _solve_rule(a: TensorType, b: TensorType) -> TensorType:
    check_matrices(a)
    if b.ndim < 2:
        raise ShapeError("solve op takes b as a stack of matrices (..., m, k)")
    dtype = _float(a, b)
    if a.dtype != b.dtype:
        raise DTypeError(f"solve: operands of dtypes {a.dtype} and {b.dtype} (the tracer "
                         "converts them to one)")
    if b.shape[-2] != a.shape[-1]:
        raise ShapeError(
            "solve: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (m,m),(m,n)->(m,n) (size {b.shape[-2]} is different from "
            f"{a.shape[-1]})")
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ShapeError(f"solve: the stacks of shapes {a.shape} and {b.shape} do not "
                         "broadcast") from None
    return TensorType(batch + b.shape[-2:], dtype)


_LAPACK = Exactness.ORDER  # CuPy's cuSOLVER factorises in another order than LAPACK

register("det", Kind.LINALG, _det_rule, np.linalg.det, "numpy.linalg.det (LU)",
         exactness=_LAPACK)
register("slogdet", Kind.LINALG, _packed_rule("slogdet"), _slogdet,
         "numpy.linalg.slogdet, packed (..., [sign, logabsdet])", exactness=_LAPACK)
register("inv", Kind.LINALG, _square_rule, np.linalg.inv,
         "numpy.linalg.inv (LinAlgError for a singular matrix)", exactness=_LAPACK)
register("solve", Kind.LINALG, _solve_rule, np.linalg.solve,
         "numpy.linalg.solve with b a stack of matrices (..., m, k), batch dims broadcast",
         exactness=_LAPACK)
register("cholesky", Kind.LINALG, _square_rule,
         lambda x, *, upper: np.linalg.cholesky(x, upper=upper),
         "numpy.linalg.cholesky(x, upper=) (LinAlgError if not positive definite)",
         exactness=_LAPACK)
register("qr", Kind.LINALG, _packed_rule("qr"), _qr,
         "numpy.linalg.qr(x, mode=) for mode reduced/complete (packed Q, R) or r",
         exactness=_LAPACK)
register("eigh", Kind.LINALG, _packed_rule("eigh"), _eigh,
         "numpy.linalg.eigh(x, UPLO=) packed (w, v), or eigvalsh when not vectors",
         exactness=_LAPACK)
register("svd", Kind.LINALG, _packed_rule("svd"), _svd,
         "numpy.linalg.svd(x, full_matrices=, compute_uv=), packed (u, s, vh) or s",
         exactness=_LAPACK)
