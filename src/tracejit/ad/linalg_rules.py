"""VJP rules of the ``numpy.linalg`` ops (``ir/linalg_ops.py``), as JAX and autograd
define them, written with traced ops (the factorisations' own among them) so that second
order falls out.

For a packed op (slogdet, qr, eigh, svd) the cotangent ``g`` and the result ``ans`` are
packed too: the rules split both into their parts. Conventions, as JAX's: the gradients
of ``cholesky`` and ``eigh`` are symmetric (the input is taken to be symmetric; NumPy
reads one triangle of it); ``eigh``'s and ``svd``'s assume distinct eigen/singular values
(a repeated one contributes 0 where the formula would divide by 0); ``qr``'s need
``m >= n`` (and a square input for ``mode="complete"``), ``svd``'s with ``compute_uv`` a
square input or ``full_matrices=False``.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOperation
from ..trace import numpy_api as npa
from ..trace.core import bind
from ..trace.linalg import split


def _mT(x):
    return npa.swapaxes(x, -1, -2)


def _mm(a, b):
    return bind("matmul", a, b)


def _mul(a, b):
    return bind("multiply", a, b)


def _add(a, b):
    return bind("add", a, b)


def _sub(a, b):
    return bind("subtract", a, b)


def _cols(v):
    """A stack of vectors (..., k) as (..., 1, k): scales a matrix's columns."""
    return npa.reshape(v, v.shape[:-1] + (1, v.shape[-1]))


def _rows(v):
    """A stack of vectors (..., k) as (..., k, 1): scales a matrix's rows."""
    return npa.reshape(v, v.shape + (1,))


def _scalars(v):
    return npa.reshape(v, v.shape + (1, 1))


def _diag(v):
    """(..., k) -> (..., k, k) with ``v`` on the diagonal."""
    return _mul(_rows(v), np.eye(v.shape[-1], dtype=v.dtype))


def _sym(x):
    return _mul(_add(x, _mT(x)), 0.5)


def _inv_t(x):
    return _mT(bind("inv", x))


def _det_rule(g, ans, x):
    return (_mul(_scalars(_mul(g, ans)), _inv_t(x)),)


def _slogdet_rule(g, ans, x):
    _, g_log = split(g, "slogdet", x.shape)  # the sign is piecewise constant
    return (_mul(_scalars(g_log), _inv_t(x)),)


def _inv_rule(g, ans, x):
    return (bind("negative", _mm(_mm(_mT(ans), g), _mT(ans))),)


def _solve_rule(g, ans, a, b):
    gb = bind("solve", _mT(a), g)
    return bind("negative", _mm(gb, _mT(ans))), gb


def _cholesky_rule(g, ans, x, *, upper):
    """Murray's rule (arXiv:1602.07527), as autograd and JAX: with ``P = phi(L^T g)``
    (the lower triangle, its diagonal halved), ``sym(L^-T P L^-1)``."""
    L = _mT(ans) if upper else ans
    gL = npa.tril(_mT(g) if upper else g)  # the zero triangle does not depend on x
    n = x.shape[-1]
    P = _mul(npa.tril(_mm(_mT(L), gL)), 1 - 0.5 * np.eye(n, dtype=x.dtype))
    left = bind("solve", _mT(L), P)  # L^-T P
    return (_sym(_mT(bind("solve", _mT(L), _mT(left)))),)


def _qr_rule(g, ans, x, *, mode):
    """``(gQ + Q copyutl(M)) R^-T`` with ``M = gR R^T - Q^T gQ`` (the transpose of JAX's
    qr_jvp_rule, as PyTorch writes it), for m >= n."""
    m, n = x.shape[-2:]
    if m < n or (mode == "complete" and m != n):
        raise UnsupportedOperation(
            f"the gradient of numpy.linalg.qr(mode={mode!r}) of {m}x{n} matrices: only "
            "m >= n (and square matrices for mode='complete') have one here, as in JAX",
            hint="differentiate qr of the transpose, or use mode='reduced'")
    if mode == "r":
        q, r = split(bind("qr", x, mode="reduced"), "qr", x.shape, mode="reduced")
        (gr,) = split(g, "qr", x.shape, mode="r")
        M = _mm(gr, _mT(r))
    else:
        q, r = split(ans, "qr", x.shape, mode=mode)
        gq, gr = split(g, "qr", x.shape, mode=mode)
        M = _sub(_mm(gr, _mT(r)), _mm(_mT(q), gq))
    N = _add(npa.triu(M), _mT(npa.triu(M, 1)))
    Y = _mm(q, N) if mode == "r" else _add(gq, _mm(q, N))
    return (_mT(bind("solve", r, _mT(Y))),)


def _eigh_rule(g, ans, x, *, UPLO, vectors):
    """``sym(V (diag(gw) + F * (V^T gV)) V^T)``, ``F_ij = 1 / (w_j - w_i)`` off the
    diagonal (JAX's eigh_jvp_rule transposed)."""
    if not vectors:
        w, v = split(bind("eigh", x, UPLO=UPLO, vectors=True), "eigh", x.shape, UPLO=UPLO,
                     vectors=True)
        (gw,) = split(g, "eigh", x.shape, UPLO=UPLO, vectors=False)
        return (_mm(_mul(v, _cols(gw)), _mT(v)),)
    w, v = split(ans, "eigh", x.shape, UPLO=UPLO, vectors=True)
    gw, gv = split(g, "eigh", x.shape, UPLO=UPLO, vectors=True)
    eye = np.eye(x.shape[-1], dtype=bool)
    diff = _sub(_cols(w), _rows(w))
    F = bind("where", eye, 0.0, bind("true_divide", 1.0, bind("where", eye, 1.0, diff)))
    inner = _add(_diag(gw), _mul(F, _mm(_mT(v), gv)))
    return (_sym(_mm(_mm(v, inner), _mT(v))),)


def _svd_rule(g, ans, x, *, full_matrices, compute_uv):
    """JAX's svd_jvp_rule transposed: ``U Z V^T`` with ``Z = (J + J^T) S + S (K + K^T) +
    diag(gs)``, ``J = F * (U^T gU)``, ``K = F * (V^T gV)``, ``F_ij = 1 / (s_j^2 - s_i^2)``,
    plus the terms of the complement of U (m > n) or of V (n > m)."""
    m, n = x.shape[-2:]
    reduced = {"full_matrices": False, "compute_uv": True}
    if not compute_uv:
        u, s, vt = split(bind("svd", x, **reduced), "svd", x.shape, **reduced)
        (gs,) = split(g, "svd", x.shape, full_matrices=full_matrices, compute_uv=False)
        return (_mm(_mul(u, _cols(gs)), vt),)
    if full_matrices and m != n:
        raise UnsupportedOperation(
            f"the gradient of numpy.linalg.svd(full_matrices=True) of {m}x{n} matrices "
            "(the extra singular vectors are not unique), as in JAX",
            hint="pass full_matrices=False")
    u, s, vt = split(ans, "svd", x.shape, **reduced)
    gu, gs, gvt = split(g, "svd", x.shape, **reduced)
    s_row, s_col = _cols(s), _rows(s)
    d = _mul(_add(s_row, s_col), _sub(s_row, s_col))
    z = npa.astype(bind("equal", d, 0), x.dtype)
    F = _sub(bind("true_divide", 1.0, _add(d, z)), z)
    J = _mul(F, _mm(_mT(u), gu))
    K = _mul(F, _mm(vt, _mT(gvt)))
    Z = _add(_add(_mul(_add(J, _mT(J)), s_row), _mul(s_col, _add(K, _mT(K)))), _diag(gs))
    ga = _mm(_mm(u, Z), vt)
    if m > n:
        rest = _sub(gu, _mm(u, _mm(_mT(u), gu)))
        ga = _add(ga, _mm(bind("true_divide", rest, s_row), vt))
    if n > m:
        rest = _sub(gvt, _mm(_mm(gvt, _mT(vt)), vt))
        ga = _add(ga, _mm(u, bind("true_divide", rest, s_col)))
    return (ga,)


LINALG_VJP = {
    "det": _det_rule,
    "slogdet": _slogdet_rule,
    "inv": _inv_rule,
    "solve": _solve_rule,
    "cholesky": _cholesky_rule,
    "qr": _qr_rule,
    "eigh": _eigh_rule,
    "svd": _svd_rule,
}
