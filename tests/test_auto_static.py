"""Arguments that are static without ``static_argnums`` (``autostatic.py``): hashable
non-arrays always, Python ints once the function shows it needs them concretely."""

from __future__ import annotations

import enum
import logging
import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.autostatic import MANY_VALUES
from tracejit.errors import ConcretizationError, RetraceWarning

X = np.arange(6.0)


class Mode(enum.Enum):
    SUM = "sum"
    MAX = "max"


def _reduce(x, how, axis_slice, mode, missing, dots):
    y = x[axis_slice][dots]
    if missing is None and how == "sum" and mode is Mode.SUM:
        return y.sum()
    return y.max()


def test_hashable_non_arrays_are_static_by_value(backend):
    f = tj.jit(_reduce, backend=backend)
    assert f(X, "sum", slice(1, 4), Mode.SUM, None, ...) == X[1:4].sum()
    assert f(X, "max", slice(1, 4), Mode.SUM, None, ...) == X[1:4].max()
    assert f(X, "sum", slice(None, None, 2), Mode.MAX, None, ...) == X[::2].max()
    assert f(X, "sum", slice(1, 4), Mode.SUM, None, ...) == X[1:4].sum()  # cached
    assert f.cache_info().misses == 3 and f.cache_info().hits == 1
    # keywords, a tuple of strings and a frozenset, a dtype and a type
    g = tj.jit(lambda x, *, names, tags, dtype: x.astype(dtype) * len(names) * len(tags),
               backend=backend)
    got = g(X, names=("a", "b"), tags=frozenset({"t"}), dtype=np.float32)
    assert got.dtype == np.float32 and got.tolist() == (X * 2).tolist()
    got = g(X, names=("a", "b"), tags=frozenset({"t"}), dtype=np.dtype(np.int32))
    assert got.dtype == np.int32
    assert g.cache_info().misses == 2


def test_static_values_of_equal_hash_but_different_type_are_different_keys():
    seen = []
    g = tj.jit(lambda x, n: seen.append(type(n)) or x[:n].sum())
    assert g(X, 1) == 0.0
    assert g(X, True) == X[:True].sum()  # 1 == True, but a bool is its own key
    assert g.cache_info().signatures == 2 and seen[-1] is bool


def test_unhashable_non_array_is_refused_naming_it():
    f = tj.jit(lambda x, opts: x)
    with pytest.raises(tj.errors.InvalidArgument, match="opts"):
        f(X, {"a", "b"})
    # dicts and lists of arrays stay pytrees of traced arrays
    h = tj.jit(lambda p: p["w"] * p["b"][0])
    np.testing.assert_array_equal(h({"w": X, "b": [np.float64(2.0)]}), 2 * X)


def _loop(x, n):
    for _ in range(n):
        x = x * 2
    return x


USES = {
    "range": (_loop, lambda x, n: x * 2**n),
    "shape": (lambda x, n: np.zeros(n) + x.sum(), lambda x, n: np.zeros(n) + x.sum()),
    "reshape": (lambda x, n: x.reshape(n, -1), lambda x, n: x.reshape(n, -1)),
    "slice": (lambda x, n: x[:n], lambda x, n: x[:n]),
    "derived": (lambda x, n: x[: n + 1].sum(), lambda x, n: x[: n + 1].sum()),
    "arange": (lambda x, n: np.arange(n) * x[0], lambda x, n: np.arange(n) * x[0]),
    "eye": (lambda x, n: np.eye(n) * x[0], lambda x, n: np.eye(n) * x[0]),
    "r_-slice": (lambda x, n: np.r_[0:n] + x[0], lambda x, n: np.r_[0:n] + x[0]),
    "if": (lambda x, n: x + 1 if n > 2 else x - 1, lambda x, n: x + 1 if n > 2 else x - 1),
}


@pytest.mark.parametrize("use", USES)
def test_int_needed_concretely_becomes_static(backend, use):
    fn, want = USES[use]
    f = tj.jit(fn, backend=backend)
    np.testing.assert_array_equal(f(X, 2), want(X, 2))
    np.testing.assert_array_equal(f(X, 3), want(X, 3))
    np.testing.assert_array_equal(f(X, 2), want(X, 2))  # cached: no trace
    info = f.cache_info()
    # one failed trace for the first call, then one compile per value
    assert (info.misses, info.signatures, info.hits) == (3, 2, 1)


def test_int_tuple_argument_becomes_static_per_element(backend):
    f = tj.jit(lambda x, shape: x.reshape(shape), backend=backend)
    assert f(X, (2, 3)).shape == (2, 3)
    assert f(X, (3, 2)).shape == (3, 2)
    assert f._concrete.paths == {"shape.0", "shape.1"}


@pytest.mark.parametrize("fn", [lambda x, n: x * n, lambda x, n: x[n]], ids=["value", "index"])
def test_ints_used_as_values_stay_traced(backend, fn):
    f = tj.jit(fn, backend=backend)
    for n in range(4):
        np.testing.assert_array_equal(f(X, n), fn(X, n))
    assert f.cache_info().signatures == 1 and not f._concrete.paths


def test_bool_flag_and_keyword(backend):
    def fn(x, *, flag, n=1):
        return x[:n] * 2 if flag else x[:n]

    f = tj.jit(fn, backend=backend)
    np.testing.assert_array_equal(f(X, flag=True, n=3), X[:3] * 2)
    np.testing.assert_array_equal(f(X, flag=False, n=3), X[:3])
    np.testing.assert_array_equal(f(X, flag=True, n=3), X[:3] * 2)
    assert f._concrete.paths == {"flag", "n"}
    assert f.cache_info().hits == 1


def test_known_concrete_argument_skips_the_failed_trace(backend):
    f = tj.jit(_loop, backend=backend)
    f(X, 1)
    misses = f.cache_info().misses
    f(X, 4)  # keyed on its value at once: one trace, not a failed one first
    assert f.cache_info().misses == misses + 1


def test_positional_and_keyword_share_what_is_learned(backend):
    f = tj.jit(_loop, backend=backend)
    f(X, 2)
    np.testing.assert_array_equal(f(X, n=2), X * 4)
    assert f._concrete.paths == {"n"}


def test_floats_and_arrays_are_not_made_static(backend):
    with pytest.raises(ConcretizationError):
        tj.jit(lambda x, s: x[: int(s)], backend=backend)(X, 2.0)
    with pytest.raises(ConcretizationError):
        tj.jit(_loop, backend=backend)(X, np.int64(2))
    with pytest.raises(ConcretizationError):  # the bound also needs traced data
        tj.jit(lambda x, n: x[: n + int(x[0])], backend=backend)(X, 2)


def test_learning_is_logged_once(caplog):
    f = tj.jit(_loop)
    with caplog.at_level(logging.INFO, logger="tracejit"):
        for n in (1, 2, 3, 1):
            f(X, n)
    learned = [r for r in caplog.records if "concretely" in r.getMessage()]
    assert len(learned) == 1 and "'n'" in learned[0].getMessage()


def test_many_values_warn_once():
    f = tj.jit(_loop, backend="reference")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(MANY_VALUES + 4):
            f(X[:2], n)
    retraces = [w for w in caught if issubclass(w.category, RetraceWarning)]
    assert len(retraces) == 1
    message = str(retraces[0].message)
    assert "'n'" in message and "fori_loop" in message and "static_argnums" in message
    assert retraces[0].filename == __file__


def test_grad_and_value_and_grad_with_a_concrete_int(backend):
    def loss(w, n):
        total = 0.0
        for i in range(n):
            total = total + (w[i] ** 2)
        return total

    g = tj.grad(loss, backend=backend)
    np.testing.assert_allclose(g(X, 3), np.r_[2 * X[:3], 0, 0, 0])
    np.testing.assert_allclose(g(X, n=2), np.r_[2 * X[:2], 0, 0, 0, 0])
    value, grad = tj.value_and_grad(loss, backend=backend)(X, 2)
    assert value == X[1] ** 2 and grad[1] == 2 * X[1]


def test_lower_learns_too():
    lowered = tj.jit(_loop).lower(X, 3)
    assert lowered.signature == "x: f64[6]"


class _Model:
    def __init__(self, scale):
        self.scale = scale

    def __hash__(self):
        return hash(self.scale)

    def __eq__(self, other):
        return isinstance(other, _Model) and other.scale == self.scale

    @tj.jit
    def first(self, x, n):
        return x[:n] * self.scale


def test_methods_learn_their_int_arguments():
    m = _Model(2.0)
    np.testing.assert_array_equal(m.first(X, 2), X[:2] * 2)
    np.testing.assert_array_equal(m.first(X, n=3), X[:3] * 2)
    assert _Model.first._concrete.paths == {"n"}
