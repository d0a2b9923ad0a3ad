"""``numpy.linalg`` under ``jit`` and ``grad``: values, dtypes, result types and errors as
NumPy's, gradients against finite differences.

The factorisations are NumPy's own LAPACK calls on the reference and CPU backends, so
their results are NumPy's bits; the compositions (norms, pinv, lstsq, multi_dot...) are
within rounding. Gradients: float64, well-conditioned inputs (symmetric positive definite
for cholesky, symmetric with distinct eigenvalues for eigh, distinct singular values for
svd), compared with central differences; Hessian-vector products for a few.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from numpy_compare import assert_factorisation, assert_same, builtin_error, lapack_differs

import tracejit as tj
from tracejit import targets
from tracejit.ir import REGISTRY, Kind
from tracejit.trace import pytree

RNG = np.random.default_rng(7)
EYE3 = np.eye(3)


def _spd(shape):
    x = RNG.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


SQ = RNG.standard_normal((2, 3, 3)) + 3 * EYE3  # a stack of well-conditioned matrices
CUBE = RNG.standard_normal((3, 3, 3)) + 3 * EYE3  # batch size equal to the matrix size
M = SQ[0]
NEG = np.array([[0.0, 2.0], [1.0, 0.5]])  # negative determinant
TALL = RNG.standard_normal((5, 3))
WIDE = TALL.T.copy()
F32 = SQ.astype(np.float32)
INT = np.array([[4, 1, 0], [1, 3, 1], [0, 1, 2]])  # symmetric positive definite
SPD = _spd((2, 3, 3))
B = RNG.standard_normal((2, 3, 2))
VEC = np.array([3.0, -4.0, 0.0, 1.5, -0.5])
RANK2 = np.outer([1.0, 2.0, 3.0], [1.0, 0.0, 1.0]) + np.outer([0.0, 1.0, 1.0], [2.0, 1.0, 0.0])
la = np.linalg

# (function, args): the factorisations, NumPy's bits on reference and CPU
EXACT = {
    "det": (la.det, (SQ,)), "det-2d": (la.det, (M,)), "det-cube": (la.det, (CUBE,)),
    "det-f32": (la.det, (F32,)), "det-int": (la.det, (INT,)), "det-bool": (la.det, (INT > 1,)),
    "slogdet": (la.slogdet, (SQ,)), "slogdet-neg": (la.slogdet, (NEG,)),
    "slogdet-f32": (la.slogdet, (F32,)),
    "inv": (la.inv, (SQ,)), "inv-cube": (la.inv, (CUBE,)), "inv-f32": (la.inv, (F32,)),
    "inv-int": (la.inv, (INT,)),
    "solve": (la.solve, (SQ, B)), "solve-vector": (la.solve, (SQ, B[0, :, 0])),
    "solve-2d-vector": (la.solve, (M, B[0, :, 0])), "solve-broadcast": (la.solve, (SQ, B[0])),
    "solve-stack-a": (la.solve, (M, B)), "solve-f32": (la.solve, (F32, B.astype(np.float32))),
    "solve-mixed": (la.solve, (F32, B)), "solve-int": (la.solve, (INT, np.array([1, 2, 3]))),
    "cholesky": (la.cholesky, (SPD,)), "cholesky-int": (la.cholesky, (INT,)),
    "cholesky-upper": (lambda a: la.cholesky(a, upper=True), (SPD,)),
    "cholesky-f32": (la.cholesky, (SPD.astype(np.float32),)),
    "qr": (la.qr, (TALL,)), "qr-wide": (la.qr, (WIDE,)), "qr-stack": (la.qr, (SQ,)),
    "qr-complete": (lambda a: la.qr(a, mode="complete"), (TALL,)),
    "qr-complete-wide": (lambda a: la.qr(a, mode="complete"), (WIDE,)),
    "qr-r": (lambda a: la.qr(a, mode="r"), (TALL,)), "qr-f32": (la.qr, (F32,)),
    "eigh": (la.eigh, (SPD,)), "eigh-upper": (lambda a: la.eigh(a, UPLO="U"), (SQ,)),
    "eigh-f32": (la.eigh, (F32,)), "eigvalsh": (la.eigvalsh, (SPD,)),
    "eigvalsh-u": (lambda a: la.eigvalsh(a, "u"), (SQ,)),
    "svd": (la.svd, (TALL,)), "svd-wide": (la.svd, (WIDE,)), "svd-stack": (la.svd, (SQ,)),
    "svd-reduced": (lambda a: la.svd(a, full_matrices=False), (WIDE,)),
    "svd-values": (lambda a: la.svd(a, compute_uv=False), (TALL,)),
    "svd-f32": (la.svd, (F32,)), "svdvals": (la.svdvals, (CUBE,)),
    "matrix_rank": (la.matrix_rank, (SQ,)), "matrix_rank-deficient": (la.matrix_rank, (RANK2,)),
    "matrix_rank-1d": (la.matrix_rank, (VEC,)), "matrix_rank-tol": (
        lambda a: la.matrix_rank(a, tol=2.5), (M,)),
    "matrix_rank-hermitian": (lambda a: la.matrix_rank(a, hermitian=True), (SPD,)),
    "matrix_transpose": (la.matrix_transpose, (SQ,)),
}

VECTOR_ORDS = [None, np.inf, -np.inf, 0, 1, -1, 2, -2, 3, 0.5]
MATRIX_ORDS = [None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2]
# (function, args): compositions, within rounding
CLOSE = {
    **{f"norm-vector-{o}": (lambda x, o=o: la.norm(x, o), (VEC[VEC != 0],))
       for o in VECTOR_ORDS},
    **{f"norm-axis-{o}": (lambda x, o=o: la.norm(x, o, axis=1, keepdims=True), (CUBE,))
       for o in VECTOR_ORDS},
    **{f"norm-matrix-{o}": (lambda x, o=o: la.norm(x, o), (TALL,)) for o in MATRIX_ORDS},
    **{f"norm-axes-{o}": (lambda x, o=o: la.norm(x, o, axis=(2, 0)), (CUBE,))
       for o in MATRIX_ORDS},
    "norm-keepdims": (lambda x: la.norm(x, "nuc", axis=(-1, 0), keepdims=True), (CUBE,)),
    "norm-default-keepdims": (lambda x: la.norm(x, keepdims=True), (CUBE,)),
    "norm-zero-count": (lambda x: la.norm(x, 0), (VEC,)),
    "norm-int": (la.norm, (INT,)), "norm-f32": (lambda x: la.norm(x, 2, axis=-1), (F32,)),
    "norm-1d-fro": (lambda x: la.norm(x, 2), (VEC,)),
    "matrix_norm": (lambda x: la.matrix_norm(x, ord=1), (CUBE,)),
    "vector_norm": (lambda x: la.vector_norm(x, axis=(0, 2), keepdims=True), (CUBE,)),
    "vector_norm-all": (lambda x: la.vector_norm(x, ord=3), (CUBE,)),
    "pinv": (la.pinv, (TALL,)), "pinv-wide": (la.pinv, (WIDE,)), "pinv-stack": (la.pinv, (SQ,)),
    "pinv-rcond": (lambda a: la.pinv(a, rcond=0.5), (TALL,)),
    "pinv-rtol": (lambda a: la.pinv(a, rtol=None), (RANK2,)),
    "pinv-hermitian": (lambda a: la.pinv(a, hermitian=True), (SPD,)),
    "pinv-f32": (la.pinv, (F32,)),
    "lstsq": (la.lstsq, (TALL, VEC)), "lstsq-matrix": (la.lstsq, (TALL, TALL[:, :2] * 2)),
    "lstsq-square": (la.lstsq, (M, B[0])), "lstsq-wide": (la.lstsq, (WIDE, VEC[:3])),
    "lstsq-rcond": (lambda a, b: la.lstsq(a, b, rcond=1e-3), (TALL, VEC)),
    "lstsq-negative-rcond": (lambda a, b: la.lstsq(a, b, rcond=-1), (TALL, VEC)),
    "lstsq-f32": (la.lstsq, (TALL.astype(np.float32), VEC.astype(np.float32))),
    "multi_dot": (lambda a, b, c: la.multi_dot([a, b, c]), (TALL, WIDE, TALL)),
    "multi_dot-4": (lambda a, b, c: la.multi_dot([c[:, 0], a, b, a, c[0]]), (TALL, WIDE, TALL)),
    "multi_dot-2": (lambda a, b: la.multi_dot([a, b]), (TALL, WIDE)),
    "outer": (la.outer, (VEC, VEC[:3])), "matmul": (la.matmul, (SQ, B)),
    "tensordot": (lambda a, b: la.tensordot(a, b, axes=([2], [1])), (SQ, B)),
    "vecdot": (la.vecdot, (SQ, M)), "vecdot-axis": (lambda a, b: la.vecdot(a, b, axis=0),
                                                     (CUBE, M)),
    "vecdot-int": (la.vecdot, (INT, INT)),
}


def _run(fn, args, backend):
    return tj.jit(fn, backend=backend)(*args)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_factorisations_are_numpys(name, backend):
    fn, args = EXACT[name]
    if lapack_differs(backend):  # cuSOLVER: within rounding, vectors free in sign
        assert_factorisation(_run(fn, args, backend), fn(*args), r_only=name == "qr-r")
    else:
        assert_same(_run(fn, args, backend), fn(*args))


@pytest.mark.parametrize("name", sorted(CLOSE))
def test_compositions_match_numpy(name, backend):
    fn, args = CLOSE[name]
    assert_same(_run(fn, args, backend), fn(*args), 100)


def test_lstsq_rank_deficient(backend):
    """The rank is the data's, a traced int32 as NumPy's; NumPy's residuals then are an
    empty array, a shape no trace can know: tracejit gives the least-norm solution's."""
    a = np.column_stack([TALL[:, 0], TALL[:, 0], TALL[:, 1]])
    x, res, rank, s = _run(la.lstsq, (a, VEC), backend)
    want_x, want_res, want_rank, want_s = la.lstsq(a, VEC)
    assert rank == want_rank == 2 and rank.dtype == want_rank.dtype == np.int32
    np.testing.assert_allclose(x, want_x, rtol=1e-10)
    np.testing.assert_allclose(s, want_s, rtol=1e-12, atol=1e-14 * want_s[0])  # s[2]: noise
    assert want_res.shape == (0,) and res.shape == (1,)
    np.testing.assert_allclose(res, [np.sum((a @ want_x - VEC) ** 2)], rtol=1e-10)


def test_multi_dot_takes_the_cheapest_order():
    """(5x3)(3x5)(5x1): right to left is 30 multiplications against 90."""
    a, b, c = TALL, WIDE, TALL[:, :1]
    graph = tj.jit(lambda a, b, c: la.multi_dot([a, b, c])).lower(a, b, c).graph
    shapes = [(n.inputs[0].type.shape, n.inputs[1].type.shape) for n in graph.nodes
              if n.op == "matmul"]
    assert shapes == [((3, 5), (5, 1)), ((5, 3), (3, 1))]


def test_one_decomposition_per_call():
    """The results of a factorisation come from one node (packed), not one per result."""
    graph = tj.jit(lambda a: la.svd(a)).lower(TALL).graph
    assert [n.op for n in graph.nodes].count("svd") == 1


# ---------------------------------------------------------------- errors

ERRORS = {
    "inv-not-square": (la.inv, (TALL,)), "det-1d": (la.det, (VEC,)),
    "det-0d": (la.det, (np.float64(2.0),)), "cholesky-1d": (la.cholesky, (VEC,)),
    "qr-1d": (la.qr, (VEC,)), "svd-1d": (la.svd, (VEC,)), "eigh-not-square": (la.eigh, (TALL,)),
    "inv-f16": (la.inv, (M.astype(np.float16),)),
    "solve-mismatch": (la.solve, (SQ, TALL)), "solve-vector-mismatch": (la.solve, (SQ, VEC)),
    "solve-stack-as-vectors": (la.solve, (CUBE, M[:2])),
    "qr-mode": (lambda a: la.qr(a, mode="thin"), (TALL,)),
    "eigh-uplo": (lambda a: la.eigh(a, UPLO="X"), (SPD,)),
    "lstsq-incompatible": (la.lstsq, (TALL, WIDE)), "lstsq-3d": (la.lstsq, (SQ, B)),
    "norm-vector-fro": (lambda x: la.norm(x, "fro"), (VEC,)),
    "norm-matrix-3": (lambda x: la.norm(x, 3), (M,)),
    "norm-duplicate-axes": (lambda x: la.norm(x, axis=(1, -2)), (SQ,)),
    "norm-three-axes": (lambda x: la.norm(x, 2, axis=(0, 1, 2)), (SQ,)),
    "norm-axis-type": (lambda x: la.norm(x, axis=[1]), (SQ,)),
    "multi_dot-one": (lambda a: la.multi_dot([a]), (M,)),
    "multi_dot-3d": (lambda a, b: la.multi_dot([a, b, a]), (SQ, SQ)),
    "outer-2d": (la.outer, (M, VEC)),
    "pinv-rcond-and-rtol": (lambda a: la.pinv(a, rcond=0.1, rtol=0.1), (M,)),
    "matrix_transpose-1d": (la.matrix_transpose, (VEC,)),
    # found while running, as NumPy finds them
    "inv-singular": (la.inv, (np.ones((2, 2)),)),
    "inv-singular-stack": (lambda a: la.inv(a * 2.0) + 1.0, (np.stack([M, np.zeros((3, 3))]),)),
    "solve-singular": (la.solve, (np.zeros((3, 3)), VEC[:3])),
    "cholesky-not-pd": (la.cholesky, (-SPD,)),
}


def _numpy_error(fn, args) -> Exception:
    try:
        fn(*args)
    except Exception as e:
        return e
    raise AssertionError("NumPy raised nothing")


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_are_numpys(name, backend):
    fn, args = ERRORS[name]
    want = _numpy_error(fn, args)
    cls = la.LinAlgError if isinstance(want, la.LinAlgError) else builtin_error(want)
    with pytest.raises(cls) as got:
        _run(fn, args, backend)
    if isinstance(want, la.LinAlgError):
        assert str(want) in str(got.value)


def test_refusals():
    with pytest.raises(NotImplementedError, match="complex"):
        tj.jit(la.inv)(M + 1j * M)
    with pytest.raises(NotImplementedError, match="mode='raw'"):
        tj.jit(lambda a: la.qr(a, mode="raw"))(M)
    with pytest.raises(NotImplementedError, match="hermitian"):
        tj.jit(lambda a: la.svd(a, hermitian=True))(SPD)
    with pytest.raises(NotImplementedError, match="linalg.eig"):
        tj.jit(la.eig)(M)


# ---------------------------------------------------------------- gradients


def _sym(x):
    return x + np.swapaxes(x, -1, -2)


def _spd_of(x):
    return x @ np.swapaxes(x, -1, -2) + 3 * np.eye(x.shape[-1])


W32 = RNG.standard_normal((3, 2))
SVD_BASE = np.array([[3.0, 0, 0], [0, 2, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
EIG_BASE = np.diag([0.0, 3.0, 6.0])
UNIT = RNG.uniform(-0.8, 0.8, (2, 3, 3))

# name -> (scalar function of x, x): every differentiable function, float64
GRADS = {
    "det": (lambda x: np.sum(la.det(x + 3 * EYE3) * [1.0, -2.0]), UNIT),
    "slogdet": (lambda x: np.sum(la.slogdet(x + 3 * EYE3)[1] * [1.0, -2.0]), UNIT),
    "slogdet-neg": (lambda x: la.slogdet(NEG + 0.1 * x)[1], UNIT[0, :2, :2]),
    "inv": (lambda x: np.sum(la.inv(x + 3 * EYE3) * SQ), UNIT),
    "solve-a": (lambda x: np.sum(la.solve(x + 3 * EYE3, B) ** 2), UNIT),
    "solve-b": (lambda x: np.sum(la.solve(SQ, x[0]) * B[0, :, :1]), UNIT[:, :, :1]),
    "solve-vector": (lambda x: np.sum(la.solve(x[0] + 3 * EYE3, x[1, 0]) ** 3), UNIT),
    "cholesky": (lambda x: np.sum(la.cholesky(_spd_of(x)) * SQ), UNIT),
    "cholesky-upper": (lambda x: np.sum(la.cholesky(_spd_of(x), upper=True) ** 3), UNIT),
    "qr": (lambda x: np.sum(la.qr(TALL + 0.3 * x)[0] * TALL) + np.sum(la.qr(TALL + 0.3 * x)[1]
                                                                       ** 3), TALL[::-1]),
    "qr-complete": (lambda x: np.sum(la.qr(x + 3 * EYE3, "complete")[0] ** 3), UNIT),
    "qr-r": (lambda x: np.sum(la.qr(TALL + 0.3 * x, mode="r") ** 3), TALL[::-1]),
    "eigh": (lambda x: np.sum(la.eigh(EIG_BASE + 0.1 * _sym(x))[0] ** 3)
             + np.sum(la.eigh(EIG_BASE + 0.1 * _sym(x), "U")[1] * M), UNIT),
    "eigvalsh": (lambda x: np.sum(la.eigvalsh(EIG_BASE + 0.1 * _sym(x)) ** 3), UNIT),
    "svd-tall": (lambda x: _svd_loss(SVD_BASE + 0.1 * x, False), TALL),
    "svd-wide": (lambda x: _svd_loss((SVD_BASE + 0.1 * x).T, False), TALL),
    "svd-square": (lambda x: _svd_loss(EIG_BASE + EYE3 + 0.1 * x, True), UNIT),
    "svd-values": (lambda x: np.sum(la.svd(SVD_BASE + 0.1 * x, compute_uv=False) ** 3), TALL),
    "svdvals": (lambda x: np.sum(la.svdvals(SVD_BASE.T + 0.1 * x) ** 3), WIDE),
    "pinv": (lambda x: np.sum(la.pinv(SVD_BASE + 0.1 * x) * WIDE), TALL),
    "lstsq": (lambda x: np.sum(la.lstsq(SVD_BASE + 0.1 * x, VEC)[0] ** 2), TALL),
    "lstsq-residuals": (lambda x: np.sum(la.lstsq(SVD_BASE + 0.1 * x, TALL[:, :2])[1]), TALL),
    **{f"norm-vector-{o}": (lambda x, o=o: la.norm(x, o), VEC[VEC != 0])
       for o in (None, 1, 2, 3, 0.5, np.inf, -np.inf)},
    **{f"norm-matrix-{o}": (lambda x, o=o: la.norm(SVD_BASE + 0.1 * x, o), TALL)
       for o in MATRIX_ORDS},
    "multi_dot": (lambda x: np.sum(la.multi_dot([x, WIDE, x, W32])), TALL),
}


def _svd_loss(a, full):
    u, s, vt = la.svd(a, full_matrices=full)
    return np.sum(u[:, :3] ** 3 * np.arange(1.0, 4.0)) + np.sum(s ** 2) + np.sum(vt[:3] ** 3)


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        g[i] = (f(plus) - f(minus)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient_matches_finite_differences(name):
    f, x = GRADS[name]
    got = tj.grad(f, backend="reference")(x)
    want = _numeric_grad(f, x)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7 * max(1, np.abs(want).max()))


@pytest.mark.parametrize("name", ["det", "inv", "solve-a", "cholesky", "qr", "eigh",
                                  "svd-tall", "pinv"])
def test_compiled_gradient(name):
    f, x = GRADS[name]
    np.testing.assert_allclose(tj.grad(f, backend="cpu")(x),
                               tj.grad(f, backend="reference")(x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["det", "inv", "solve-a", "cholesky", "qr", "eigh",
                                  "svd-tall", "norm-matrix-nuc"])
def test_hessian_vector_product(name):
    f, x = GRADS[name]
    v = np.random.default_rng(3).standard_normal(x.shape)
    g = tj.grad(f, backend="reference")
    hvp = tj.grad(lambda y: np.sum(g(y) * v), backend="reference")(x)
    eps = 1e-5
    want = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, want, rtol=1e-4, atol=1e-6 * max(1, np.abs(want).max()))


def test_float32_gradient():
    x = (UNIT + 3 * EYE3).astype(np.float32)
    got = tj.grad(lambda a: np.sum(la.inv(a) ** 2))(x)
    assert got.dtype == np.float32
    want = tj.grad(lambda a: np.sum(la.inv(a) ** 2))(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_gradients_jax_refuses():
    with pytest.raises(NotImplementedError, match="full_matrices"):
        tj.grad(lambda a: np.sum(la.svd(a)[0]))(TALL)
    with pytest.raises(NotImplementedError, match="m >= n"):
        tj.grad(lambda a: np.sum(la.qr(a)[1]))(WIDE)


# ---------------------------------------------------------------- the GPU (emulated)

REAL = os.environ.get("TRACEJIT_TEST_REAL_GPU", "") not in ("", "0")


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr(targets, "gpu_requested", False)
    if REAL:
        yield
        return
    import cudasim

    with cudasim.installed(scheduler="fibers"):
        targets._cupy.cache_clear()
        targets._gpu_count.cache_clear()
        yield
    targets._cupy.cache_clear()
    targets._gpu_count.cache_clear()


def _host(x):
    x = tj.to_host(x)
    return x[()] if x.ndim == 0 else x


GPU_CASES = ["det", "slogdet", "inv-f32", "solve-broadcast", "solve-vector", "cholesky-upper",
             "eigvalsh", "svd-values", "qr-r"]


@pytest.mark.parametrize("name", GPU_CASES)
def test_on_the_gpu(gpu, name):
    fn, args = EXACT[name]
    f = tj.jit(fn, backend="cuda")
    leaves, tree = pytree.flatten(f(*args))
    assert_same(pytree.unflatten(tree, [_host(x) for x in leaves]), fn(*args), 100)
    graph = f.lower(*args).optimized_graph
    linalg = [n for n in graph.nodes if REGISTRY[n.op].kind is Kind.LINALG]
    assert linalg and all(graph.placement.on_target(n.out) for n in linalg)


def test_singular_on_the_gpu(gpu):
    with pytest.raises(la.LinAlgError):
        tj.to_host(tj.jit(la.inv, backend="cuda")(np.ones((2, 2))))
    grad = tj.grad(lambda a: np.sum(la.inv(a) ** 2), backend="cuda")
    np.testing.assert_allclose(tj.to_host(grad(SQ)),
                               tj.grad(lambda a: np.sum(la.inv(a) ** 2))(SQ), rtol=1e-9)


@pytest.mark.skipif(REAL, reason="checks the emulator")
def test_cudasim_linalg_raises_only_when_asked():
    """As CuPy: cuSOLVER's failure is an error only under cupyx.errstate(linalg="raise")
    (the runner's library steps ask for it), else the result is garbage (NaNs here)."""
    import cudasim

    with cudasim.installed() as cp:
        x = cp.asarray(np.ones((2, 2)))
        assert np.isnan(cp.linalg.inv(x).get()).all()
        with cudasim.cupyx.errstate(linalg="raise"), pytest.raises(la.LinAlgError):
            cp.linalg.inv(x)
        np.testing.assert_array_equal(cp.linalg.det(x).get(), 0.0)


def test_factorisation_comparison_sees_what_it_must():
    """numpy_compare.assert_factorisation (how a real GPU's cuSOLVER results are checked)
    accepts NumPy's factorisations with vectors flipped in sign (and a complement's basis
    flipped), and refuses a changed value, a sign flipped on one side only, and a wrong
    span: run here, since only a real GPU uses it in the suite."""
    def signs(n, k):  # alternate signs on the first k vectors, the rest flipped too
        return np.where(np.arange(n) % 2 & (np.arange(n) < k) | (np.arange(n) >= k), -1.0, 1.0)

    w, v = la.eigh(SPD[0])
    u, s, vh = la.svd(TALL)  # full: U 5x5, Vh 3x3
    ur, sr, vhr = la.svd(TALL, full_matrices=False)
    q, r = la.qr(TALL)
    qc, rc = la.qr(TALL, mode="complete")
    flipped = [
        (type(la.eigh(SPD[0]))(w, v * signs(3, 3)), la.eigh(SPD[0])),
        (type(la.svd(TALL))(u * signs(5, 3), s, vh * signs(3, 3)[:, None]), la.svd(TALL)),
        (type(la.svd(TALL))(ur * signs(3, 3), sr, vhr * signs(3, 3)[:, None]),
         la.svd(TALL, full_matrices=False)),
        (type(la.qr(TALL))(q * signs(3, 3), r * signs(3, 3)[:, None]), la.qr(TALL)),
        (type(la.qr(TALL))(qc * signs(5, 3), rc * signs(5, 3)[:, None]),
         la.qr(TALL, mode="complete")),
    ]
    for got, want in flipped:
        assert_factorisation(got, want)
        with pytest.raises(AssertionError):  # a value off by far more than rounding
            assert_factorisation(type(got)(*(x * (1 + 1e-6) for x in got)), want)
    assert_factorisation(-la.qr(TALL, mode="r"), la.qr(TALL, mode="r"), r_only=True)
    with pytest.raises(AssertionError):  # U's sign flipped, Vh's rows left alone
        assert_factorisation(type(la.svd(TALL))(-u, s, vh), la.svd(TALL))
    with pytest.raises(AssertionError):  # a complement column replaced by a range column
        assert_factorisation(type(la.qr(TALL))(qc[:, [0, 1, 2, 0, 4]], rc),
                             la.qr(TALL, mode="complete"))
