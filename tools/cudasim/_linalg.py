"""Emulated ``cupy.linalg`` (cuSOLVER) and ``cupyx.errstate``: NumPy's LAPACK on the
host data, results as device arrays on the current device.

CuPy's semantics kept: a singular (``inv``, ``solve``) or not positive definite
(``cholesky``) matrix raises ``numpy.linalg.LinAlgError`` only inside
``cupyx.errstate(linalg="raise")`` (checking cuSOLVER's info synchronises); by default
CuPy returns whatever the factorisation left, here NaNs. ``cholesky`` has no ``upper``;
``solve`` takes ``b`` of ``a``'s batch shape (no broadcasting).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from ._array import _new, _operand

_local = threading.local()


@contextlib.contextmanager
def errstate(*, linalg: str | None = None):
    """``cupyx.errstate(linalg="raise" | "ignore")``, per thread (CuPy's default:
    "ignore")."""
    old = getattr(_local, "linalg", "ignore")
    if linalg is not None:
        if linalg not in ("raise", "ignore"):
            raise ValueError(f"invalid linalg error mode {linalg!r}")
        _local.linalg = linalg
    try:
        yield
    finally:
        _local.linalg = old


def _checked(fn, name: str, like):
    """``fn()``; on a LinAlgError, raise it under errstate(linalg="raise"), else NaNs of
    the result's shape (``like``)."""
    try:
        return _new(fn())
    except np.linalg.LinAlgError:
        if getattr(_local, "linalg", "ignore") == "raise":
            raise np.linalg.LinAlgError(f"Error reported by {name} in cuSOLVER. devInfo = 1. "
                                        "Please refer to the cuSOLVER documentation.") from None
        return _new(np.full(like.shape, np.nan, like.dtype))


def _host(a, what: str) -> np.ndarray:
    host = _operand(a, f"linalg.{what}")
    if host.dtype not in (np.float32, np.float64):
        raise TypeError(f"cudasim: linalg.{what} takes float32 or float64, got {host.dtype}")
    return host


def det(a):
    return _new(np.linalg.det(_host(a, "det")))


def slogdet(a):
    sign, logdet = np.linalg.slogdet(_host(a, "slogdet"))
    return _new(sign), _new(logdet)


def inv(a):
    host = _host(a, "inv")
    return _checked(lambda: np.linalg.inv(host), "getrf", host)


def solve(a, b):
    ha, hb = _host(a, "solve"), _host(b, "solve")
    if hb.ndim not in (ha.ndim, ha.ndim - 1) or ha.shape[:-2] != hb.shape[:ha.ndim - 2]:
        raise ValueError(f"cudasim: solve takes b of a's batch shape, got {ha.shape} and "
                         f"{hb.shape}")
    like = np.broadcast_to(hb, hb.shape)
    return _checked(lambda: np.linalg.solve(ha, hb), "getrf", like)


def cholesky(a):
    host = _host(a, "cholesky")
    return _checked(lambda: np.linalg.cholesky(host), "potrf", host)


def qr(a, mode="reduced"):
    out = np.linalg.qr(_host(a, "qr"), mode=mode)
    return _new(out) if mode == "r" else tuple(_new(x) for x in out)


def eigh(a, UPLO="L"):
    w, v = np.linalg.eigh(_host(a, "eigh"), UPLO=UPLO)
    return _new(w), _new(v)


def eigvalsh(a, UPLO="L"):
    return _new(np.linalg.eigvalsh(_host(a, "eigvalsh"), UPLO=UPLO))


def svd(a, full_matrices=True, compute_uv=True):
    out = np.linalg.svd(_host(a, "svd"), full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(_new(x) for x in out) if compute_uv else _new(out)


FUNCTIONS = {"det": det, "slogdet": slogdet, "inv": inv, "solve": solve,
             "cholesky": cholesky, "qr": qr, "eigh": eigh, "eigvalsh": eigvalsh, "svd": svd}
