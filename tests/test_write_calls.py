"""Small calls that write into their arguments or multiply a matrix by a vector.

A matrix-vector product runs as one NumPy call on the 1-D operand (the trace spells it
``reshape, matmul, reshape``). Checked against NumPy on both runners (the first one, and
the later one once its small kernels are compiled), with the arguments aliasing as NumPy
lets them, never by timing.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import api
from tracejit.config import config
from tracejit.passes.contract import SMALL_K


@pytest.fixture(params=["default", "compile_all"])
def policy(request, monkeypatch):
    """The default kernel-size threshold (small kernels compiled later) or every kernel
    compiled at once."""
    monkeypatch.setattr(config, "min_kernel_size", 4096 if request.param == "default" else 0)
    return request.param


def _both_tiers(f, make_args):
    """``f``'s results on fresh arguments on its first call and once its later runner
    runs, each with the arguments as the call left them."""
    first_args = make_args()
    first = f(*first_args)
    f.wait_compiled()
    later_args = make_args()
    return (first, first_args), (f(*later_args), later_args)


def mvt(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += y_2 @ A


@pytest.mark.parametrize("m, n", [(24, 24), (1, 1), (3, 5), (5, 3)])
def test_matrix_vector_products_write_into_the_arguments(policy, m, n):
    rng = np.random.default_rng(m * 10 + n)
    x1, x2, y1, y2, a = rng.random(m), rng.random(n), rng.random(n), rng.random(m), \
        rng.random((m, n))

    def make():
        return x1.copy(), x2.copy(), y1, y2, a

    want = make()
    mvt(*want)
    f = tj.jit(mvt)
    for got, args in _both_tiers(f, make):
        assert got is None
        # (a product over a few terms compiled into a kernel sums in its own order)
        np.testing.assert_allclose(args[0], want[0], rtol=1e-14)
        np.testing.assert_allclose(args[1], want[1], rtol=1e-14)
        if n > SMALL_K and m > SMALL_K:  # NumPy's own call: its bits
            np.testing.assert_array_equal(args[0], want[0])
            np.testing.assert_array_equal(args[1], want[1])
    if n > SMALL_K:  # (a product over a few terms is a loop kernel when compiled)
        assert "matmul of a vector" in f.lower(*make()).source


def test_the_products_are_single_numpy_calls_without_reshapes():
    f = tj.jit(lambda a, y: (a @ y, y @ a))
    a, y = np.ones((24, 24)), np.arange(24.0)
    f(a, y)
    runner = f.lower(a, y).source.split("# runner")[-1]
    assert runner.count("matmul of a vector") == 2
    assert "reshape" not in runner


def test_a_product_updating_its_own_vector_reads_it_first(policy):
    """``x += A @ x``: NumPy computes the product into a new array before adding."""
    def update(x, a):
        x += a @ x
        return x

    rng = np.random.default_rng(3)
    x0, a = rng.random(6), rng.random((6, 6))
    want = update(x0.copy(), a)
    f = tj.jit(update)
    for got, args in _both_tiers(f, lambda: (x0.copy(), a)):
        assert got is args[0]
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_a_vector_also_used_as_a_column_keeps_its_reshape(policy):
    def f(a, y):
        return a @ y, y.reshape(-1, 1) * 2, (y @ a).sum()

    rng = np.random.default_rng(4)
    a, y = rng.random((5, 5)), rng.random(5)
    want = f(a, y)
    for got, _ in _both_tiers(tj.jit(f), lambda: (a, y)):
        for g, w in zip(got, want, strict=True):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-14)


@pytest.mark.parametrize("adtype, ydtype", [(np.float32, np.float64), (np.int64, np.float32),
                                            (np.float32, np.float32)])
def test_a_product_of_mixed_dtypes_as_numpy(policy, adtype, ydtype):
    def f(a, y, z):
        return a @ y + z, y @ a * z

    rng = np.random.default_rng(5)
    a, y = (rng.random((7, 7)) * 8).astype(adtype), (rng.random(7) * 8).astype(ydtype)
    z = rng.random(7).astype(np.float32)
    want = f(a, y, z)
    for got, _ in _both_tiers(tj.jit(f), lambda: (a, y, z)):
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_vector_dot_and_a_matrix_product_are_left_alone(policy):
    def f(a, y):
        return y @ y, a @ a

    rng = np.random.default_rng(6)
    a, y = rng.random((4, 4)), rng.random(4)
    want = f(a, y)
    for got, _ in _both_tiers(tj.jit(f), lambda: (a, y)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-14)


# ---------------------------------------------------------------- computed in the argument

def _destinations(f) -> dict:
    (entry,) = f._cache.values()
    return entry.runner.namespace.get("destinations", {})


def sgd_update(x, g, lr, out):
    np.multiply(g, -lr, out=out)
    np.add(out, x, out=out)
    return out


def test_an_out_argument_is_computed_in_and_returned_as_itself(policy):
    rng = np.random.default_rng(7)
    x, g = rng.random(300), rng.random(300)
    want = sgd_update(x, g, 0.1, np.zeros(300))
    f = tj.jit(sgd_update)
    for got, args in _both_tiers(f, lambda: (x, g, 0.1, np.zeros(300))):
        assert got is args[3]
        np.testing.assert_array_equal(got, want)
    assert any(3 in args for args in _destinations(f).values())


@pytest.mark.parametrize("make_out", [lambda: np.zeros((4, 6), order="F"),
                                      lambda: np.zeros((6, 4)).T,
                                      lambda: np.zeros((4, 12))[:, ::2],
                                      lambda: np.zeros((4, 6), np.dtype(">f8"))],
                         ids=["fortran", "transposed", "strided", "big-endian"])
def test_an_out_argument_not_c_contiguous_or_not_native_as_numpy(policy, make_out):
    rng = np.random.default_rng(8)
    x, g = rng.random((4, 6)), rng.random((4, 6))
    want = sgd_update(x, g, 0.5, make_out())
    f = tj.jit(sgd_update)
    for got, args in _both_tiers(f, lambda: (x, g, 0.5, make_out())):
        assert got is args[3]
        np.testing.assert_array_equal(got, want)


def test_an_out_argument_that_is_an_input_too_is_refused_as_before():
    from tracejit.errors import InPlaceArgumentError

    x, g = np.ones(8), np.ones(8)
    f = tj.jit(sgd_update)
    f(x, g, 0.1, np.zeros(8))
    with pytest.raises(InPlaceArgumentError):
        f(x, g, 0.1, x)
    np.testing.assert_array_equal(x, np.ones(8))  # (raised before anything ran)


def reversed_into_itself(x):
    x[...] = x[::-1] + 1


def transposed_into_itself(a):
    a[...] = a.T * 2


def shifted_into_itself(x):
    x[1:] += x[:-1]


@pytest.mark.parametrize("fn, make", [
    (reversed_into_itself, lambda: np.arange(9.0)),
    (transposed_into_itself, lambda: np.arange(16.0).reshape(4, 4)),
    (shifted_into_itself, lambda: np.arange(7.0))])
def test_a_write_reading_a_view_of_its_argument_reads_the_old_values(policy, fn, make):
    """NumPy computes the right-hand side before assigning: a kernel computing it in the
    argument's memory would read elements it has already overwritten."""
    want = make()
    fn(want)
    for got, args in _both_tiers(tj.jit(fn), lambda: (make(),)):
        assert got is None
        np.testing.assert_array_equal(args[0], want)


def written_then_read(x, z):
    y = x * 2
    w = x + z
    x[...] = y
    return w


def read_then_written(x, z):
    w = x + z
    x[...] = x * 2
    return w


@pytest.mark.parametrize("fn", [written_then_read, read_then_written])
def test_an_argument_read_beside_the_kernel_computing_its_new_value(policy, fn):
    """A kernel stores each output at once: a node reading the argument after the stored
    one must read its old value."""
    rng = np.random.default_rng(9)
    x0, z = rng.random(50), rng.random(50)
    want_x = x0.copy()
    want = fn(want_x, z)
    for got, args in _both_tiers(tj.jit(fn), lambda: (x0.copy(), z)):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(args[0], want_x)


def returns_its_new_value(x):
    y = x * 2 + 1
    x[...] = y
    return y


def test_a_returned_result_is_not_the_argument_it_was_written_to(policy):
    """NumPy returns ``y``, an array of its own: not the caller's ``x``."""
    x0 = np.arange(5.0)
    f = tj.jit(returns_its_new_value)
    for got, args in _both_tiers(f, lambda: (x0.copy(),)):
        assert got is not args[0] and not np.shares_memory(got, args[0])
        np.testing.assert_array_equal(got, x0 * 2 + 1)
        np.testing.assert_array_equal(args[0], x0 * 2 + 1)


def returns_a_view_then_overwrites(x):
    y = (x * 1)[1:]  # a new array in NumPy; the runner's view of ``x`` once x * 1 folds
    x[...] = 7
    return y


@pytest.mark.parametrize("in_c", [True, False], ids=["c", "python"])
def test_a_returned_view_of_a_written_argument_keeps_its_old_values(policy, in_c, monkeypatch):
    """The runner returns ``x[1:]`` (a view, with a base) and then stores 7s into ``x``:
    the cached call (its write-back in C, or in Python without the C module) must copy the
    view first (an output with a base goes through ``store``), or the caller sees the 7s
    where NumPy returns the old values."""
    if not in_c:
        monkeypatch.setattr(api, "_WriteBack", None)
    x0 = np.arange(5.0)
    f = tj.jit(returns_a_view_then_overwrites)
    for _ in range(3):  # the first call, then cached calls (the C or Python write-back)
        for got, args in _both_tiers(f, lambda: (x0.copy(),)):
            np.testing.assert_array_equal(got, x0[1:])
            assert not np.shares_memory(got, args[0])
            np.testing.assert_array_equal(args[0], np.full(5, 7.0))


def test_two_arguments_written_and_one_also_read_after(policy):
    def f(a, b):
        a += 1
        b *= a
        return a.sum() + b.sum()

    rng = np.random.default_rng(10)
    a0, b0 = rng.random(40), rng.random(40)
    wa, wb = a0.copy(), b0.copy()
    want = f(wa, wb)
    for got, args in _both_tiers(tj.jit(f), lambda: (a0.copy(), b0.copy())):
        np.testing.assert_allclose(got, want, rtol=1e-14)
        np.testing.assert_array_equal(args[0], wa)
        np.testing.assert_array_equal(args[1], wb)


def test_half_wave_rectify_and_gemm_in_place(policy):
    def rectify(a):
        a[a < 0] = 0

    def gemm(alpha, beta, c, a, b):
        c *= beta
        c += alpha * a @ b

    rng = np.random.default_rng(11)
    s0 = rng.random(400) - 0.5
    want = s0.copy()
    rectify(want)
    for _, args in _both_tiers(tj.jit(rectify), lambda: (s0.copy(),)):
        np.testing.assert_array_equal(args[0], want)
    c0, a, b = rng.random((24, 24)), rng.random((24, 24)), rng.random((24, 24))
    want = c0.copy()
    gemm(1.5, 1.2, want, a, b)
    for _, args in _both_tiers(tj.jit(gemm), lambda: (1.5, 1.2, c0.copy(), a, b)):
        np.testing.assert_array_equal(args[2], want)


def written_then_raising(x, a, i):
    y = x * 2
    z = a[i + (y[:1] > 1e300)]  # (a step after y's: it reads y)
    x[...] = y
    return z


def test_a_step_raising_after_the_new_value_leaves_the_argument_as_numpy(policy):
    """NumPy raises before the assignment: the caller's array keeps its values."""
    x0, a = np.arange(6.0), np.arange(4.0)
    f = tj.jit(written_then_raising)
    x = x0.copy()
    assert f(x, a, np.array([1, 2])).tolist() == [1.0, 2.0]
    np.testing.assert_array_equal(x, x0 * 2)
    f.wait_compiled()
    for _ in range(2):
        x = x0.copy()
        with pytest.raises(IndexError):
            f(x, a, np.array([1, 9]))
        np.testing.assert_array_equal(x, x0)


def _into_matvec(x, a, y):
    x[...] = a @ y


def _into_0d_sums(x, a, b):
    x[...] = a.sum() + b.sum()


def _into_0d_det(x, a):
    x[...] = np.linalg.det(a) * 2


def _into_0d_element_product(x, a, b):
    x[...] = a[0] * b[1]


def _into_0d_dot(x, u, v):
    x[...] = u @ v


def _into_correlation(x, a, k):
    x[...] = np.correlate(a, k)


def _out_of_matmul(x, a, y):
    np.matmul(a, y, out=x)


@pytest.mark.parametrize("fn, shapes", [
    (_into_matvec, [(4,), (4, 4), (4,)]),
    (_into_0d_sums, [(), (4,), (4,)]),
    (_into_0d_det, [(), (3, 3)]),
    (_into_0d_element_product, [(), (4,), (4,)]),
    (_into_0d_dot, [(), (4,), (4,)]),
    (_into_correlation, [(6,), (8,), (3,)]),
    (_out_of_matmul, [(4,), (4, 4), (4,)]),
])
def test_a_write_whose_value_another_rewrite_computes_reaches_the_argument(policy, fn,
                                                                          shapes):
    """The steps that the library-step rewrites emit (a vector product, NumPy-scalar
    arithmetic, a det from a slogdet, a correlation loop) never drop a destination the
    write-back path relies on: the argument gets NumPy's value on both runners."""
    rng = np.random.default_rng(len(shapes))
    values = [rng.random(s) for s in shapes]

    def make():
        return [np.zeros(shapes[0]), *values[1:]]

    want = make()
    fn(*want)
    for _, args in _both_tiers(tj.jit(fn), make):
        np.testing.assert_allclose(args[0], want[0], rtol=1e-13)
        assert np.any(args[0] != 0)
