"""Library steps called as NumPy would call them (backends/cpu/lib_steps.py, codegen.py).

Packed linear-algebra results are unpacked into their readers (no slices, reshapes or
``np.concatenate`` in the runner), ``det`` reuses an unpacked ``slogdet`` of the same
matrix by NumPy's own formula, eigvalsh and singular values are called directly, ``pad``
is a fill and a store. Each is checked bit for bit against NumPy, in both tiers (the first
runner, and the later one after ``wait_compiled``), and through the runner's source.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.config import config


@pytest.fixture(autouse=True)
def default_policy(monkeypatch):
    """The default kernel-size threshold (the suite compiles every kernel): the steps
    tested here are the library steps small arrays run as."""
    monkeypatch.setattr(config, "min_kernel_size", 4096)


def _both_tiers(fn, *args, later_rtol=0.0):
    """fn's results under jit on its first call and once the later runner is in, each
    checked equal (bit for bit, dtype included) to NumPy's (the later runner within
    ``later_rtol``: where it compiles a straight-line run of small matmuls, their sums
    are the kernel's, not BLAS's)."""
    want = fn(*args)
    f = tj.jit(fn, backend="cpu")
    for got, rtol in ((f(*args), 0.0), ((f.wait_compiled(), f(*args))[1], later_rtol)):
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
    return f


def det_and_logdet(a):
    sign, logdet = np.linalg.slogdet(a)
    return np.linalg.det(a), sign * logdet


def _spd(n, seed):
    m = np.random.default_rng(seed).standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


@pytest.mark.parametrize("a", [
    _spd(8, 0) / 8, _spd(1, 1), np.random.default_rng(2).standard_normal((5, 5)),
    np.ones((3, 3)),                         # singular: det 0, logdet -inf
    np.eye(4) * 1e200,                       # det overflows to inf (NumPy warns)
    np.eye(4) * 1e-200,                      # det underflows to 0
    np.full((2, 2), np.nan),                 # NaN
    np.diag([-1.0, 2.0, 3.0]),               # negative sign
], ids=["spd", "1x1", "general", "singular", "overflow", "underflow", "nan", "negative"])
def test_det_from_the_slogdet_as_numpy(a):
    with np.errstate(all="ignore"):
        f = _both_tiers(det_and_logdet, a)
    source = f.lower(a).source
    assert "det_from_slogdet(" in source and "np.linalg.det" not in source
    assert "slice" not in source and "reshape" not in source


def test_det_from_the_slogdet_over_many_matrices():
    rng = np.random.default_rng(3)
    f = tj.jit(det_and_logdet, backend="cpu")
    for n in (2, 3, 6, 10):
        for scale in (1e-3, 1.0, 1e3):
            for _ in range(20):
                a = rng.standard_normal((n, n)) * scale
                assert f(a)[0] == np.linalg.det(a)


def test_det_before_the_slogdet_and_float32_factorise_twice():
    def det_first(a):
        d = np.linalg.det(a)
        return d, np.linalg.slogdet(a)[1]

    a = _spd(4, 5)
    source = _both_tiers(det_first, a).lower(a).source
    assert "np.linalg.det" in source or "lib" in source.split("# det")[0]
    a32 = a.astype(np.float32)
    source = _both_tiers(det_and_logdet, a32).lower(a32).source
    assert "det_from_slogdet" not in source


def test_slogdet_parts_returned_and_read_twice():
    def parts(a):
        sign, logdet = np.linalg.slogdet(a)
        return sign, logdet, sign * 2, np.linalg.slogdet(a)[0]

    a = _spd(3, 6)
    _both_tiers(parts, a)


def test_eigh_vectors_unpacked():
    def eig(a):
        w, v = np.linalg.eigh(a)
        return w[::-1], v[:, -1] * 2, (v * w).sum()

    a = _spd(6, 7)
    f = _both_tiers(eig, a)
    assert "np.linalg.eigh(" in f.lower(a).source
    assert "concatenate" not in f.lower(a).source


def test_eigvalsh_and_singular_values_called_directly():
    def values(a):
        return np.linalg.eigvalsh(a)[:2], np.linalg.svd(a, compute_uv=False)

    a = _spd(5, 8)
    source = _both_tiers(values, a).lower(a).source
    assert "np.linalg.eigvalsh(" in source and "compute_uv=False)" in source


@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_and_svd_unpacked(mode):
    def factors(a):
        q, r = np.linalg.qr(a, mode=mode)
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return q, r, u * s, vh

    a = np.random.default_rng(9).standard_normal((5, 3))
    _both_tiers(factors, a)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int8, np.bool_])
@pytest.mark.parametrize("value", [0, 1, 3])
def test_pad_as_numpy(dtype, value):
    def padded(x):
        return np.pad(x, ((1, 2), (0, 3)), constant_values=value) + 0, np.pad(x[0], (2, 0))

    x = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    source = _both_tiers(padded, x).lower(x).source
    assert "np.pad" not in source


def test_pad_of_a_square_and_size_one():
    def f(x):
        return np.pad(x, 1, constant_values=-2.5)

    for x in (np.ones((3, 3)), np.ones((1, 1)), np.ones((1, 4))):
        _both_tiers(f, x)


def test_scatter_add_of_a_broadcast_constant_makes_no_broadcast():
    def histogram_counts(x, bins):
        idx = np.clip((x * bins).astype(np.int64), 0, bins - 1)
        counts = np.zeros(bins, dtype=np.int64)
        np.add.at(counts, idx, 1)
        return counts

    x = np.random.default_rng(10).random(1000)
    f = tj.jit(histogram_counts, backend="cpu")
    for _ in range(2):
        np.testing.assert_array_equal(f(x, 16), histogram_counts(x, 16))
        f.wait_compiled()
    assert "broadcast_to" not in f.lower(x, 16).source


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_add_of_a_broadcast_row_and_a_python_float(dtype):
    def f(x, idx, row):
        out = np.zeros((5, 3), dtype)
        np.add.at(out, idx, row)
        np.add.at(out, idx[:2], 0.1)
        return out

    idx = np.array([0, 2, 2, 4, 0])
    row = np.arange(3, dtype=dtype) / 3
    _both_tiers(f, np.zeros(3, dtype), idx, row)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_and_argmax_with_one_axis_as_numpy(axis):
    def f(x):
        return (x.sum(axis=axis), x.max(axis=axis, keepdims=True), np.argmax(x, axis=axis),
                np.argmin(x, axis=axis), x.sum(axis=axis, dtype=np.float32),
                np.ones_like(x).sum(axis=axis))

    x = np.random.default_rng(11).standard_normal((4, 4))
    _both_tiers(f, x)
    _both_tiers(f, x[:1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 4, 60])
def test_inner_product_of_vectors_is_their_dot(dtype, n):
    def residual(a, b, x):
        r = a @ x - b
        return np.linalg.norm(r), r @ b, (x[::2] @ x[::2]) * 2, x @ x

    rng = np.random.default_rng(12)
    a, b, x = rng.random((n, n)).astype(dtype), rng.random(n).astype(dtype), \
        rng.random(n).astype(dtype)
    source = _both_tiers(residual, a, b, x, later_rtol=1e-5).lower(a, b, x).source
    inner = [line for line in source.splitlines() if "a row by a column" in line]
    assert len(inner) == 4 and all("= np.dot(" in line for line in inner)
    assert n == 1 or f"reshape((1, {n}))" not in source  # (rows made for no one)


PRODUCTS = {"A @ B": lambda A, B, x: A @ B, "A @ x": lambda A, B, x: A @ x,
            "x @ A": lambda A, B, x: x @ A, "A @ A.T": lambda A, B, x: A @ A.T,
            "A.T @ A": lambda A, B, x: A.T @ A}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [0, 1, 3, 24])
@pytest.mark.parametrize("product", PRODUCTS)
def test_small_products_are_dot_where_its_bits_are_matmuls(product, dtype, n):
    """Products of float matrices and vectors run as ``np.dot`` where both operands are
    C-contiguous and aligned (the same BLAS call as ``np.matmul``, a quarter of a
    microsecond sooner) and as ``np.matmul`` otherwise (its own loop on strided operands,
    other bits than ``np.dot``'s copy): one signature sees every layout, so each call
    decides, and every layout gives matmul's bits."""
    fn = PRODUCTS[product]
    rng = np.random.default_rng(13)
    A, B = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
    x = rng.standard_normal(n).astype(dtype)
    f = _both_tiers(fn, A, B, x)
    runner = f.lower(A, B, x).source.split("# runner")[-1]
    assert runner.count("np.dot(") == 1 and ".flags.carray" in runner
    wide = rng.standard_normal((n, 2 * n)).astype(dtype)
    frozen = np.array(A)
    frozen.flags.writeable = False
    for a in (np.asfortranarray(A), wide[:, ::2], wide[:, :n], frozen, A.T):
        for v in (x, rng.standard_normal(2 * n).astype(dtype)[::2]):
            got, want = f(a, B, v), fn(a, B, v)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_a_row_by_a_column_returned_or_reused_keeps_its_steps():
    def f(u, v):
        row = u.reshape(1, -1)
        return row @ v.reshape(-1, 1), row * 2

    u, v = np.arange(4.0), np.arange(4.0) + 1
    _both_tiers(f, u, v)


def test_one_element_taken_out_is_an_index():
    def normalised(x, m):
        r = np.correlate(x, x, mode="full")[len(x) - 1:]
        return r / r[0], m[1, 2] * m, m[-1, -1], x[::-1][0] + 1

    rng = np.random.default_rng(13)
    x, m = rng.standard_normal(64), rng.standard_normal((3, 3))
    source = _both_tiers(normalised, x, m).lower(x, m).source
    assert "[63]" in source and "[1, 2]" in source and "[2, 2]" in source


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scalar_arithmetic_on_numpy_scalars_as_numpy(dtype):
    def r2(x, y):
        resid = y - x * 2
        with np.errstate(divide="ignore", invalid="ignore"):
            return (1 - resid @ resid / np.sum((y - y.mean()) ** 2), np.argmax(x) / 0,
                    x.sum() * 0.1 + 3, np.max(x) - x[0], 2.5 / x.min())

    rng = np.random.default_rng(14)
    x, y = rng.random(50).astype(dtype), rng.random(50).astype(dtype)
    source = _both_tiers(r2, x, y, later_rtol=1e-5).lower(x, y).source
    assert "NumPy scalars" in source
    _both_tiers(r2, np.zeros(50, dtype), np.zeros(50, dtype), later_rtol=1e-5)
