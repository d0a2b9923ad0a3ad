"""Linear algebra: factorisations written with loops and slices, and np.linalg users."""

import numpy as np

from .case import Case


def gram_schmidt(A):
    """Modified Gram-Schmidt QR; like PolyBench's gramschmidt it overwrites A."""
    m, n = A.shape
    Q = np.zeros_like(A)
    R = np.zeros((n, n), dtype=A.dtype)
    for k in range(n):
        R[k, k] = np.sqrt(np.dot(A[:, k], A[:, k]))
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = np.dot(Q[:, k], A[:, j])
            A[:, j] = A[:, j] - Q[:, k] * R[k, j]
    return Q, R


def lu_inplace(A):
    """Right-looking LU without pivoting: L below the diagonal, U on and above it, in A."""
    n = A.shape[0]
    for k in range(n - 1):
        A[k + 1:, k] /= A[k, k]
        A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])


def cholesky(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L[j, j] = np.sqrt(A[j, j] - np.dot(L[j, :j], L[j, :j]))
        L[j + 1:, j] = (A[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


def trisolv(L, x, b):
    """PolyBench trisolv: forward substitution into the caller's x."""
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def solve_with_residual(A, b):
    x = np.linalg.solve(A, b)
    return x, np.linalg.norm(A @ x - b)


def least_squares(X, y):
    beta = np.linalg.solve(X.T @ X, X.T @ y)
    resid = y - X @ beta
    r2 = 1 - resid @ resid / np.sum((y - y.mean()) ** 2)
    return beta, r2


def det_and_logdet(A):
    sign, logdet = np.linalg.slogdet(A)
    return np.linalg.det(A), sign * logdet


def power_iteration(A, iters):
    v = np.ones(A.shape[0]) / np.sqrt(A.shape[0])
    for _ in range(iters):
        w = A @ v
        v = w / np.linalg.norm(w)
    return v @ A @ v, v


def rotate_points(points, theta):
    c, s = np.cos(theta), np.sin(theta)
    R = np.array([[c, -s], [s, c]])
    return points @ R.T


def triangle_normals(a, b, c):
    n = np.cross(b - a, c - a)
    area = 0.5 * np.linalg.norm(n, axis=1)
    return n / (2 * area)[:, np.newaxis], area


def kron_identities(A, B):
    K = np.kron(A, B)
    return np.trace(K), np.diag(K), np.trace(A) * np.trace(B)


def trace_of_product(A, B, C):
    """tr(ABC) and a bilinear form, with einsum's interleaved (operand, sublist) form."""
    t = np.einsum(A, [0, 1], B, [1, 2], C, [2, 0], [])
    x = np.diag(A)
    return t, np.einsum(x, [0], B, [0, 1], x, [1])


def gemm(alpha, beta, C, A, B):
    """PolyBench gemm: C = alpha A B + beta C, in place."""
    C *= beta
    C += alpha * A @ B


def mvt(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += y_2 @ A


def sgd_update(x, g, lr, out=None):
    """x - lr g, into ``out`` when one is given (NumPy's ufunc out= style)."""
    if out is None:
        out = np.empty_like(x)
    np.multiply(g, -lr, out=out)
    np.add(out, x, out=out)
    return out


def mahalanobis(X, mu, cov):
    d = X - mu
    inv = np.linalg.inv(cov)
    return np.sqrt(np.einsum("ij,jk,ik->i", d, inv, d))


def tridiagonal_eigenvalues(n, spacing):
    """Lowest levels of a particle in a box, from the finite-difference Hamiltonian."""
    main = np.full(n, 2.0) / spacing**2
    off = np.full(n - 1, -1.0) / spacing**2
    H = 0.5 * (np.diag(main) + np.diag(off, 1) + np.diag(off, -1))
    return np.linalg.eigvalsh(H)[:5]


def _rng(seed):
    return np.random.default_rng(seed)


def _spd(n, seed):
    M = _rng(seed).random((n, n))
    return M @ M.T + n * np.eye(n)


def _triangle_args():
    rng = _rng(47)
    return rng.random((100, 3)), rng.random((100, 3)), rng.random((100, 3))


def _trisolv_args():
    L = np.tril(_rng(44).random((24, 24))) + 24 * np.eye(24)
    return L, np.zeros(24), _rng(45).random(24)


def _gemm_args():
    rng = _rng(49)
    return 1.5, 1.2, rng.random((24, 24)), rng.random((24, 24)), rng.random((24, 24))


def _mvt_args():
    rng = _rng(50)
    return tuple(rng.random(24) for _ in range(4)) + (rng.random((24, 24)),)


def _sgd_args():
    rng = _rng(51)
    return rng.random(300), rng.random(300), 0.1, np.zeros(300)


def _mahalanobis_args():
    rng = _rng(52)
    return rng.normal(size=(50, 6)), rng.normal(size=6), _spd(6, 53)


PROGRAMS = [
    Case("gram_schmidt", gram_schmidt, lambda: (_rng(40).random((16, 16)),), rtol=1e-7),
    Case("lu_inplace", lu_inplace, lambda: (_spd(20, 41),), rtol=1e-7),
    Case("cholesky", cholesky, lambda: (_spd(16, 42),), grad=0),
    Case("trisolv", trisolv, _trisolv_args),
    Case("solve_with_residual", solve_with_residual, lambda: (_spd(16, 43), _rng(1).random(16)),
         rtol=1e-6, atol=1e-12),
    Case("least_squares", least_squares, lambda: (_rng(46).random((60, 4)),
                                                  _rng(2).random(60)), grad=1),
    Case("det_and_logdet", det_and_logdet, lambda: (_spd(8, 48) / 8,), grad=0),
    Case("power_iteration", power_iteration, lambda: (_spd(16, 54), 20), grad=0),
    Case("rotate_points", rotate_points, lambda: (_rng(55).random((200, 2)), 0.7), grad=1),
    Case("triangle_normals", triangle_normals, _triangle_args, grad=0),
    Case("kron_identities", kron_identities, lambda: (_rng(56).random((5, 5)),
                                                      _rng(57).random((5, 5))), grad=0),
    Case("trace_of_product", trace_of_product, lambda: tuple(_rng(58 + i).random((12, 12))
                                                             for i in range(3)), grad=1),
    Case("gemm", gemm, _gemm_args),
    Case("mvt", mvt, _mvt_args),
    Case("sgd_update", sgd_update, _sgd_args),
    Case("mahalanobis", mahalanobis, _mahalanobis_args, grad=1),
    Case("tridiagonal_eigenvalues", tridiagonal_eigenvalues, lambda: (40, 0.1), rtol=1e-8),
]
