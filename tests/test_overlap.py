"""Written arguments that are views of one array: refused where they share an element,
run where they do not (issue 40).

Whether two arguments overlap is NumPy's exact answer (``np.shares_memory``), not the
bounds test (``np.may_share_memory``): ``x[::2]`` and ``x[1::2]`` span the same bytes but
share no element, so a function writing both gives NumPy's answer. Each case runs on
NumPy and jitted, on copies of one base array, twice (the first call and the cached
one); the results, the base afterwards and which results share memory with the base
must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import api, dispatch
from tracejit.errors import InPlaceArgumentError


def write_both(a, b):
    a += 1
    b *= 2
    return a + b


def write_one_read_other(a, b):
    a[...] = b * 3
    return b.sum()


def write_both_return_views(a, b):
    a -= b
    b[...] = 7
    return a[::-1], b


# (base, views of it): interleaved views sharing no element, in 1-d and 2-d layouts
DISJOINT = {
    "even-odd": (lambda: np.arange(10.0), lambda x: (x[::2], x[1::2])),
    "columns": (lambda: np.arange(24.0).reshape(4, 6), lambda x: (x[:, ::2], x[:, 1::2])),
    "rows-reversed": (lambda: np.arange(24.0).reshape(6, 4),
                      lambda x: (x[::-2], x[-2::-2])),
    "fortran-strided": (lambda: np.asfortranarray(np.arange(36.0).reshape(6, 6)),
                        lambda x: (x[::2, 1::3], x[1::2, ::3])),
}


def run_twice(fn, make, views, jitted):
    base = make()
    outs = []
    for _ in range(2):
        got = jitted(*views(base))
        outs.append(got if isinstance(got, tuple) else (got,))
    return base, outs


@pytest.mark.parametrize("fn", [write_both, write_one_read_other, write_both_return_views])
@pytest.mark.parametrize("case", sorted(DISJOINT))
def test_interleaved_views_written_give_numpys_answer(backend, fn, case):
    make, views = DISJOINT[case]
    a, b = views(make())
    assert not np.shares_memory(a, b) and np.may_share_memory(a, b)
    want_base, want = run_twice(fn, make, views, fn)
    got_base, got = run_twice(fn, make, views, tj.jit(fn, backend=backend))
    np.testing.assert_array_equal(got_base, want_base)
    for w_outs, g_outs in zip(want, got, strict=True):
        for w, g in zip(w_outs, g_outs, strict=True):
            np.testing.assert_array_equal(g, w)
            assert np.asarray(g).dtype == np.asarray(w).dtype
    # the last call's results view the base exactly where NumPy's do
    assert [np.shares_memory(g, got_base) for g in got[-1]] == \
        [np.shares_memory(w, want_base) for w in want[-1]]


@pytest.mark.parametrize("views", [
    lambda x: (x[1:], x[:-1]),
    lambda x: (x[:8:2], x[::3]),  # interleaved, meeting at 0 and 6
    lambda x: (x, x),
    lambda x: (x[:5], x[4::-1]),
])
def test_views_that_share_an_element_are_refused(backend, views):
    f = tj.jit(write_both, backend=backend)
    x = np.arange(10.0)
    a, b = views(x)
    assert np.shares_memory(a, b)
    with pytest.raises(InPlaceArgumentError, match="shares memory"):
        f(a, b)
    np.testing.assert_array_equal(x, np.arange(10.0))  # refused before writing
    f(np.zeros(5), np.zeros(5))  # the signature still works on separate arrays
    with pytest.raises(InPlaceArgumentError, match="shares memory"):
        f(a, b)  # and the cached call refuses too


def test_an_overlap_numpy_cannot_decide_is_refused_not_guessed(monkeypatch):
    """Past ``MAX_WORK`` NumPy's search gives up: a clear refusal, not a guess."""
    monkeypatch.setattr(api._Writes, "MAX_WORK", 1)
    x = np.zeros((6, 8))
    a, b = x[:, ::3], x[:, 1::2]
    with pytest.raises(np.exceptions.TooHardError):
        np.shares_memory(a, b, max_work=1)
    f = tj.jit(lambda a, b: write_both(a[:, :3], b[:, :3]))
    with pytest.raises(InPlaceArgumentError, match="could not tell"):
        f(a, b)
    assert not x.any()


def test_the_cached_call_of_owned_arrays_asks_numpy_nothing(backend, monkeypatch):
    """Arrays owning their memory cannot overlap: the cached call (C's ``WriteBack``
    where ``_dispatch`` was built) tells without NumPy's overlap tests."""
    f = tj.jit(write_both, backend=backend)
    f(np.zeros(4), np.zeros(4))
    if dispatch.WriteBack is not None:
        assert any(isinstance(e.run, dispatch.WriteBack) for e in f._cache.values())

    class Asked:  # NumPy as api.py sees it, its overlap tests refused (the emulated GPU's
        def __getattr__(self, name):  # own checks of its kernels' arguments still run)
            return getattr(np, name)

        def may_share_memory(self, *args, **kwargs):
            raise AssertionError("the cached call asked NumPy about overlap")

        shares_memory = may_share_memory

    monkeypatch.setattr(api, "np", Asked())
    a, b = np.ones(4), np.ones(4)
    np.testing.assert_array_equal(f(a, b), np.full(4, 4.0))
    np.testing.assert_array_equal(a, np.full(4, 2.0))
