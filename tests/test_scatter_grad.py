"""Gradients of integer-array writes with repeated indices, by NumPy's semantics (issue 40,
item 6): ``y[idx] = v`` keeps the last update to each position and ``y[idx] op= v`` is
buffered (one update per position, the last occurrence's), so only that update has a
gradient; ``np.add.at`` is unbuffered and every occurrence counts. The indices are
traced (an argument) or constant (a closure), which trace differently (the tracer drops
repeated constant positions itself). First and second order are checked against central
differences of the same NumPy function, in float64.
"""

from __future__ import annotations

import gpu
import numpy as np
import pytest
from numpy_compare import NumpyLax, numeric_grad

import tracejit as tj
from tracejit.backends.cuda import library

RNG = np.random.default_rng(40)
I1 = np.array([1, 3, 1, 4, 3, 1])  # position 1 three times, 3 twice
I2 = np.array([[0, 2], [2, 2]])  # a 2-d index batch, 2 three times
IA = np.array([0, 2, 0, 1, 2])  # with JB: the pair (0, 1) twice, (2, 0) twice
JB = np.array([1, 0, 1, 1, 0])
HVP_EPS, RTOL, ATOL = 1e-4, 1e-5, 1e-7


def _assign(x, v, i):
    y = x * 1.0
    y[i] = v
    return y


def _assign_product(x, v, w, i):
    y = x * 1.0
    y[i] = v * w
    return y


def _iadd(x, v, i):
    y = x * 1.0
    y[i] += v
    return y


def _isub(x, v, i):
    y = x * 1.0
    y[i] -= v
    return y


def _imul(x, v, i):
    y = x * 1.0
    y[i] *= v
    return y


def _assign_rows(x, v, i):
    y = x * 1.0
    y[i] = v
    return y


def _assign_columns(x, v, i):
    y = x * 1.0
    y[:, i] = v
    return y


def _iadd_columns(x, v, i):
    y = x * 1.0
    y[:, i] += v
    return y


def _assign_pairs(x, v, i, j):
    y = x * 1.0
    y[i, j] = v
    return y


def _imul_pairs_inner(x, v, i, j):
    y = x * 1.0
    y[:, i, j] *= v
    return y


def _add_at(x, v, i):
    y = x * 1.0
    np.add.at(y, i, v)
    return y


def _subtract_at_pairs(x, v, i, j):
    y = x * 1.0
    np.subtract.at(y, (i, j), v)
    return y


# name: (function, float argument shapes, index arrays)
CASES = {
    "assign": (_assign, [(5,), (6,)], [I1]),
    "assign_scalar": (_assign, [(5,), ()], [I1]),
    "assign_2d_batch": (_assign, [(4,), (2, 2)], [I2]),
    "assign_product": (_assign_product, [(5,), (6,), (6,)], [I1]),
    "iadd": (_iadd, [(5,), (6,)], [I1]),
    "isub": (_isub, [(5,), (6,)], [I1]),
    "imul": (_imul, [(5,), (6,)], [I1]),
    "assign_axis0": (_assign_rows, [(5, 3), (6, 3)], [I1]),
    "assign_axis1": (_assign_columns, [(2, 5), (2, 6)], [I1]),
    "iadd_axis1": (_iadd_columns, [(3, 5), (3, 6)], [I1]),
    "assign_two_indices": (_assign_pairs, [(3, 2), (5,)], [IA, JB]),
    "imul_two_indices_axis1": (_imul_pairs_inner, [(2, 3, 2), (2, 5)], [IA, JB]),
    "add_at": (_add_at, [(5,), (6,)], [I1]),
    "subtract_at_two_indices": (_subtract_at_pairs, [(3, 2), (5,)], [IA, JB]),
}


def _loss(fn, shape):
    """A smooth, nonlinear scalar of ``fn``'s result (every element its own weight), so
    that second derivatives are not zero."""
    c = np.random.default_rng(1).standard_normal(shape)
    return lambda *xs: np.sum(np.tanh(fn(*xs)) * c)


def _setup(name, traced):
    """The loss as a function of the float arguments (and of the index arrays after
    them, where traced), its NumPy version of the float arguments alone, and the floats."""
    fn, shapes, idx = CASES[name]
    xs = [np.asarray(RNG.standard_normal(s) * 0.7) for s in shapes]
    loss = _loss(fn, fn(*xs, *idx).shape)
    n = len(xs)
    traceable = loss if traced else (lambda *fs: loss(*fs, *idx))
    return traceable, (lambda *fs: loss(*fs, *idx)), xs, (idx if traced else []), n


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "constant"])
@pytest.mark.parametrize("name", CASES)
def test_first_order_matches_finite_differences(backend, name, traced):
    f, oracle, xs, idx, n = _setup(name, traced)
    got = tj.grad(f, argnums=tuple(range(n)), backend=backend)(*xs, *idx)
    want = numeric_grad(oracle, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "constant"])
@pytest.mark.parametrize("name", CASES)
def test_second_order_matches_finite_differences(backend, name, traced):
    """The Hessian-vector product ``grad(<grad(F), u>)`` against central differences,
    along ``u``, of NumPy's finite-difference gradient."""
    f, oracle, xs, idx, n = _setup(name, traced)
    us = [RNG.standard_normal(np.shape(x)) for x in xs]
    first = tj.grad(f, argnums=tuple(range(n)))

    def along(*args):
        return sum(np.sum(g * u) for g, u in zip(first(*args), us, strict=True))

    got = tj.grad(along, argnums=tuple(range(n)), backend=backend)(*xs, *idx)
    plus = numeric_grad(oracle, [np.asarray(x + HVP_EPS * u) for x, u in zip(xs, us, strict=True)])
    minus = numeric_grad(oracle, [np.asarray(x - HVP_EPS * u) for x, u in zip(xs, us, strict=True)])
    for g, p, m in zip(got, plus, minus, strict=True):
        np.testing.assert_allclose(g, (p - m) / (2 * HVP_EPS), rtol=1e-4, atol=1e-5)


def test_the_issue_snippets(backend):
    """The two answers the issue reports: [1, 1, 10] (NumPy: [0, 1, 10]) and a doubled
    gradient for ``y[idx] += 1`` with ``idx = [2, 2]``."""
    def assign(v, idx):
        y = np.zeros(2)
        y[idx] = v
        return np.sum(y * np.array([1.0, 10.0]))

    def increment(y, idx):
        y = y * 1.0
        y[idx] += 1
        return np.sum(y * np.arange(4.0))

    got = tj.grad(assign, backend=backend)(np.array([1.0, 2.0, 3.0]), np.array([0, 0, 1]))
    np.testing.assert_array_equal(got, [0.0, 1.0, 10.0])
    got = tj.grad(increment, backend=backend)(np.ones(4), np.array([2, 2]))
    np.testing.assert_array_equal(got, [0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize("name", ["assign_two_indices", "imul_two_indices_axis1",
                                  "assign_axis1", "add_at"])
def test_forward_keeps_numpys_values(backend, name):
    """The gradient's mask relies on the forward scatter keeping the last update."""
    fn, shapes, idx = CASES[name]
    xs = [RNG.standard_normal(s) for s in shapes]
    got = tj.jit(fn, backend=backend)(*xs, *idx)
    np.testing.assert_array_equal(got, fn(*xs, *idx))


def test_add_at_counts_every_occurrence(backend):
    """np.add.at is unbuffered: each repeated index adds its value, so each has gradient."""
    def f(v, idx):
        y = np.zeros(3)
        np.add.at(y, idx, v)
        return np.sum(y * np.array([1.0, 10.0, 100.0]))

    got = tj.grad(f, backend=backend)(np.ones(4), np.array([2, 2, 0, 2]))
    np.testing.assert_array_equal(got, [100.0, 100.0, 1.0, 100.0])


def _mapped(lax, c):
    """Writes with repeated indices in a loop body: a closed-over index array (the
    batching pass can make the map one scatter) and one index array per step."""
    def f(vs, idx, per_step):
        def body(a):
            v, j = a
            y = np.zeros(3)
            y[idx] = v
            y[j] += v[:2]
            return np.tanh(y) * c
        return np.sum(lax.map(body, (vs, per_step)))
    return f


def test_in_a_mapped_loop(backend):
    c = np.array([1.0, 10.0, 100.0])
    vs = RNG.standard_normal((4, 3))
    idx, per_step = np.array([0, 2, 0]), np.array([[1, 1], [2, 2], [0, 1], [0, 0]])
    got = tj.grad(_mapped(tj.lax, c), backend=backend)(vs, idx, per_step)
    want = numeric_grad(lambda vs: _mapped(NumpyLax, c)(vs, idx, per_step), [vs])[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("axis", [0, 1])
def test_gpu_scatter_makes_repeated_updates_agree(monkeypatch, axis):
    """CuPy writes repeated positions in no particular order: the CUDA library step gives
    every update to one position the last one's values first, so any order keeps it."""
    with gpu.cupy(monkeypatch) as cupy:
        shape = (3, 5, 4)[:axis] + (5, 4) + (2,)
        i = np.array([[4, 0, 4], [1, 4, -1]])
        j = np.array([2, 3, 2])
        updates = RNG.standard_normal(shape[:axis] + (2, 3) + shape[axis + 2:])
        got = library._last_wins(cupy, shape, cupy.asarray(updates),
                                 (cupy.asarray(i), cupy.asarray(j)), axis).get()
        flat = np.ravel_multi_index((i % 5, np.broadcast_to(j, i.shape)), (5, 4)).ravel()
        last = np.array([np.flatnonzero(flat == p).max() for p in flat])
        moved = np.moveaxis(updates.reshape(shape[:axis] + (6,) + shape[axis + 2:]), axis, 0)
        want = np.moveaxis(moved[last], 0, axis).reshape(updates.shape)
        np.testing.assert_array_equal(got, want)
        x = cupy.asarray(np.zeros(shape))
        out = library._scatter(cupy, x, cupy.asarray(updates), cupy.asarray(i),
                               cupy.asarray(j), axis=axis).get()
        ref = np.zeros(shape)
        ref[(slice(None),) * axis + (i, j)] = updates
        np.testing.assert_array_equal(out, ref)
