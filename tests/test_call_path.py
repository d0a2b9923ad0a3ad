"""The cached call's path (api.py's fast paths, argument writes, the runner's library
steps): every shortcut keeps NumPy's answers and tracejit's refusals.

Each test calls a jitted function more than once, so that the cached path (not only the
compiling call) runs, and with new data, so that a stale result would show.
"""

from __future__ import annotations

import numpy as np
import pytest
from programs.linalg import sgd_update as _sgd

import tracejit as tj
from tracejit.errors import InPlaceArgumentError, ReadOnlyDestination


def _jit(fn):
    return tj.jit(fn, backend="cpu")


def _rectify(a):
    a[a < 0] = 0



def test_whole_argument_write_repeated_with_new_data():
    f = _jit(_rectify)
    rng = np.random.default_rng(0)
    for _ in range(4):
        a = rng.standard_normal(300)
        want = a.copy()
        _rectify(want)
        assert f(a) is None
        np.testing.assert_array_equal(a, want)
    assert f.cache_info().hits >= 3


def test_partial_region_writes():
    def f(a, b):
        a[1:3] = b[:2] * 2
        a[-1] = 7.0
        b[::2] += 1.0
        return a.sum() + b.sum()

    g = _jit(f)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        a, b = rng.standard_normal(6), rng.standard_normal(5)
        a2, b2 = a.copy(), b.copy()
        got = g(a, b)
        want = f(a2, b2)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_array_equal(a, a2)
        np.testing.assert_array_equal(b, b2)


def test_write_into_a_view_reaches_the_base():
    f = _jit(_rectify)
    for _ in range(2):
        base = np.array([-1.0, 2.0, -3.0, 4.0, -5.0, 6.0])
        f(base[::2])  # a strided view, not owning its memory
        np.testing.assert_array_equal(base, [0.0, 2.0, 0.0, 4.0, 0.0, 6.0])


def test_one_written_argument_reads_another_before_it_changes():
    def f(a, b):
        b[...] = a
        a[...] = 0.0

    g = _jit(f)
    for k in range(3):
        a, b = np.arange(4.0) + k, np.zeros(4)
        a2, b2 = a.copy(), b.copy()
        g(a, b)
        f(a2, b2)
        np.testing.assert_array_equal(a, a2)
        np.testing.assert_array_equal(b, b2)


@pytest.mark.parametrize("second", ["same", "view", "overlapping_view"])
def test_aliasing_arguments_are_refused(second):
    def f(x, y):
        x[0] = 5.0
        return y * 2

    g = _jit(f)
    g(np.arange(4.0), np.arange(4.0))  # compiled, cached from now on
    a = np.arange(8.0)
    y = {"same": a, "view": a[::2], "overlapping_view": a[3:7]}[second]
    x = a if second != "overlapping_view" else a[:4]
    with pytest.raises(InPlaceArgumentError, match="shares memory with argument 'y'"):
        g(x, y)
    np.testing.assert_array_equal(a, np.arange(8.0))  # nothing written


def test_disjoint_views_of_one_array_are_accepted():
    def f(x, y):
        x[...] = y * 2

    g = _jit(f)
    for _ in range(2):
        a = np.arange(8.0)
        g(a[:4], a[4:])
        np.testing.assert_array_equal(a, [8.0, 10.0, 12.0, 14.0, 4.0, 5.0, 6.0, 7.0])


def test_read_only_argument_is_refused_on_the_cached_path():
    g = _jit(_rectify)
    g(np.array([-1.0, 1.0]))
    x = np.array([-1.0, 1.0])
    x.flags.writeable = False
    with pytest.raises(ReadOnlyDestination):
        g(x)
    np.testing.assert_array_equal(x, [-1.0, 1.0])


def test_returned_views_are_views_of_the_callers_array_as_numpys():
    """``x[1:]`` and ``x.reshape(2, 2)`` come back as views of the caller's ``x`` (a write
    through them reaches it, as in NumPy); ``x * 1.0`` is a new array. Cached calls too."""
    fn = lambda x: (x[1:], x.reshape(2, 2), x * 1.0)  # noqa: E731
    g = _jit(fn)
    for _ in range(2):
        x, want_x = np.arange(4.0), np.arange(4.0)
        for o, w in zip(g(x), fn(want_x), strict=True):
            o[0] = w[0] = -1.0
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(g(x)[0], [-1.0, 2.0, 3.0])


def test_output_that_is_a_written_argument_passed_through_keeps_its_value():
    def f(a, b):
        b[...] = 0.0
        return a, b.sum()

    g = _jit(f)
    for k in range(2):
        a, b = np.arange(3.0) + k, np.ones(3)
        got_a, total = g(a, b)
        np.testing.assert_array_equal(got_a, np.arange(3.0) + k)
        assert total == 0.0
        np.testing.assert_array_equal(b, 0.0)


@pytest.mark.parametrize("how", ["positional", "keyword", "none"])
def test_out_keyword_and_none_default(how):
    g = _jit(_sgd)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x, grad = rng.standard_normal(300), rng.standard_normal(300)
        out, want = np.empty(300), x - 0.1 * grad
        if how == "positional":
            got = g(x, grad, 0.1, out)
        elif how == "keyword":
            got = g(x, grad, 0.1, out=out)
        else:
            got = g(x, grad, 0.1)
        np.testing.assert_allclose(got, want, rtol=1e-15)
        if how != "none":
            np.testing.assert_allclose(out, want, rtol=1e-15)
    assert g.cache_info().hits >= 2


def test_python_float_and_0d_array_are_different_signatures():
    g = _jit(lambda x, s: x * s)
    x = np.ones(3, np.float32)
    for s in (np.array(2.0), 2.0, np.array(2.0), 2.0):
        got, want = g(x, s), x * s
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_ints_strs_and_keywords_on_the_fast_path():
    def f(x, w, mode="mean", scale=1.0):
        c = np.cumsum(x, dtype=float)
        c[w:] = c[w:] - c[:-w]
        r = c[w - 1:] / w
        return (r.mean() if mode == "mean" else r.max()) * scale

    g = _jit(f)
    rng = np.random.default_rng(2)
    calls = [(3, "mean", {}), (5, "mean", {}), (3, "max", {}), (3, "mean", {"scale": 2.0}),
             (5, "max", {"scale": 0.5})]
    for w, mode, kw in calls * 2:  # the second time round, each call is a cached one
        x = rng.standard_normal(50)
        np.testing.assert_allclose(g(x, w, mode, **kw), f(x, w, mode, **kw), rtol=1e-12)
        np.testing.assert_allclose(g(x, w, mode=mode, **kw), f(x, w, mode=mode, **kw),
                                   rtol=1e-12)
    assert g.cache_info().hits == 2 * len(calls)


def test_weak_int_and_bool_arguments():
    g = _jit(lambda x, n, flag: x * n + flag)
    x = np.arange(3, dtype=np.int8)
    for n, flag in [(2, True), (3, False), (2, False)]:
        got, want = g(x, n, flag), x * n + flag
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_library_steps_match_numpy():
    def f(x, y):
        s = x[1:-1].reshape(2, 4).transpose(1, 0)
        c = np.cumsum(y, axis=0, dtype=np.float64)
        c[2:] = c[2:] - c[:-2]
        return (s.sum(axis=0), s.max(axis=1), np.prod(s, axis=0, keepdims=True),
                c, y.sum(), np.minimum.reduce(x))

    g = _jit(f)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal(10)
        y = rng.integers(-5, 5, 6).astype(np.int8)
        for got, want in zip(g(x, y), f(x, y), strict=True):
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_integer_sum_of_a_mask_in_one_kernel_later():
    def peaks(x, t):
        mid = x[1:-1]
        is_peak = (mid > x[:-2]) & (mid > x[2:]) & (mid > t)
        return is_peak, np.count_nonzero(is_peak)

    g = _jit(peaks)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(300)
    g(x, 0.5)
    g.wait_compiled()
    for _ in range(3):
        x = rng.standard_normal(300)
        (m, n), (m2, n2) = g(x, 0.5), peaks(x, 0.5)
        np.testing.assert_array_equal(m, m2)
        assert n == n2 and np.asarray(n).dtype == np.asarray(n2).dtype
