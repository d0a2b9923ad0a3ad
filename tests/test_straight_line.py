"""Long runs of small steps as one compiled call (backends/cpu/loops_straight.py).

A Python loop whose shapes change every step unrolls into hundreds of small steps; the
CPU backend's later runner runs each long run of them as one fused driver call (a scan
of one step). These check that the later runner computes what NumPy does (outputs and
the arguments it updates), that the wrapping happens where it should and not where it
should not, and that an index out of bounds in the run is raised at the user's line.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import cpu
from tracejit.backends.cpu import fused
from tracejit.backends.cpu.loops_straight import MIN_STEPS, rounds_differently, wrap_runs
from tracejit.errors import IndexOutOfBounds


def trisolv(L, x, b):
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def cholesky(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = A[i, j] - L[i, :j] @ L[j, :j]
            L[i, j] = np.sqrt(s) if i == j else s / L[j, j]
    return L


def pascal(row):
    for _ in range(9):
        row = np.concatenate(([1], row[1:] + row[:-1], [1]))
    return row


def prefix_then_sort(x):
    """Two runs of small steps with a step the driver does not run (a sort) between."""
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = x[:i + 1].sum() * 0.5
    s = np.sort(out)
    for i in range(1, x.shape[0]):
        s[i] = s[:i].max() * 0.25 + s[i]
    return s, out


def scaled_in_place(x):
    """Updates its argument and returns it (the caller's array comes back)."""
    for i in range(1, x.shape[0]):
        x[i] = x[:i].max() + x[i]
    return x


def gathered(x, idx):
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = x[:i + 1].sum() * x[idx[i]]
    return out


def _spd(n: int) -> np.ndarray:
    a = np.random.default_rng(n).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _tril(n: int) -> np.ndarray:
    return np.tril(np.random.default_rng(n).standard_normal((n, n))) + n * np.eye(n)


CASES = {
    "trisolv": (trisolv, lambda: (_tril(7), np.zeros(7), np.arange(7.0))),
    "cholesky": (cholesky, lambda: (_spd(5),)),
    "pascal": (pascal, lambda: (np.ones(1, dtype=np.int64),)),
    "prefix_then_sort": (prefix_then_sort,
                         lambda: (np.random.default_rng(0).standard_normal(9),)),
    "scaled_in_place": (scaled_in_place, lambda: (np.arange(8.0)[::-1].copy(),)),
    "float32": (scaled_in_place, lambda: (np.linspace(1, 2, 8, dtype=np.float32),)),
    "int": (scaled_in_place, lambda: (np.arange(8)[::-1].copy(),)),
}


def _straight_scans(graph) -> list:
    return [n for n in graph.nodes if n.op == "scan" and n.attrs["loop"].body.name == "straight"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_later_runner_computes_what_the_first_does(name):
    """The later runner (the runs wrapped) returns what the first (every step its own)
    does, call after call (the second call reuses the driver's scratch arrays)."""
    fn, make = CASES[name]
    graph = tj.jit(fn, backend="cpu").lower(*make()).optimized_graph
    assert _straight_scans(wrap_runs(graph)), "the run of small steps was not wrapped"
    first = cpu._runner(graph, False, None)
    later = cpu._runner(graph, False, None, later=True)
    arrays = [i for i, a in enumerate(make()) if isinstance(a, np.ndarray)]
    for _ in range(2):
        want = first.fn(*[a for i, a in enumerate(make()) if i in arrays])
        got = later.fn(*[a for i, a in enumerate(make()) if i in arrays])
        for w, g in zip(want, got, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6 if w.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("name", ["trisolv", "scaled_in_place", "prefix_then_sort"])
def test_jit_after_the_later_runner_matches_numpy(name):
    fn, make = CASES[name]
    f = tj.jit(fn, backend="cpu")
    f(*make())
    assert f.wait_compiled(timeout=300)
    want_args, got_args = make(), make()
    want, got = fn(*want_args), f(*got_args)
    for w, g in zip(want_args, got_args, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)  # the arguments it updates
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    if name == "scaled_in_place":
        assert got[0] is got_args[0]  # NumPy returns the argument: so does the function
    for w, g in zip(want, got, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12)


def test_two_runs_around_a_step_the_driver_does_not_run():
    x = np.random.default_rng(0).standard_normal(9)
    graph = tj.jit(prefix_then_sort, backend="cpu").lower(x).optimized_graph
    wrapped = wrap_runs(graph)
    assert len(_straight_scans(wrapped)) == 2
    assert any(n.op == "sort" for n in wrapped.nodes)


def explore_found(v0, v2):
    """Found by an explore run of the later runner's same-bits test: a straight-line run
    with an ``arccos``, NumPy's -nan for ``arccos(inf)`` on the first calls, the kernel's
    +nan after the switch."""
    v4 = np.std(v2, axis=-2, keepdims=True, ddof=1)
    v5 = v0[None]
    v7 = np.matmul(v5, v5)
    v8 = np.arccos(v2[None, 0, ..., 2, -1:])
    return v8, v7, v4


def test_runs_of_inexact_ops_are_said_to_round_differently(monkeypatch):
    """``rounds_differently`` tells which later runners may change bits at the switch: a
    run holding a matmul (trisolv, cholesky), a float sum or an ``arccos`` may; runs of
    exactly rounded ops (integer adds, ``max`` and ``add``) may not."""
    for name in ("trisolv", "cholesky", "prefix_then_sort"):
        fn, make = CASES[name]
        assert rounds_differently(tj.jit(fn, backend="cpu").lower(*make()).optimized_graph)
    for name in ("pascal", "int", "scaled_in_place", "float32"):
        fn, make = CASES[name]
        graph = tj.jit(fn, backend="cpu").lower(*make()).optimized_graph
        assert _straight_scans(wrap_runs(graph)) and not rounds_differently(graph)
    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)  # the default: NumPy calls first
    v2 = np.array([[[np.nan], [np.nan], [np.inf], [395609.28125]]], np.float32)
    f = tj.jit(explore_found, backend="cpu")
    graph = f.lower(np.int32(7), v2).optimized_graph
    assert _straight_scans(wrap_runs(graph)) and rounds_differently(graph)
    first = f(np.int32(7), v2)
    assert f.wait_compiled(300)
    for w, a, b in zip(explore_found(np.int32(7), v2), first, f(np.int32(7), v2), strict=True):
        np.testing.assert_array_equal(np.signbit(a), np.signbit(w))  # NumPy's bits first
        np.testing.assert_array_equal(a, w)
        np.testing.assert_allclose(b, w, rtol=1e-6)  # then within the kernels' bounds


def test_short_runs_are_left_alone():
    """A few steps, or views around a few matmuls (the runner's views cost less than the
    driver's call), stay as they are."""
    f = tj.jit(lambda x: np.sin(x) * 2 + x.sum(), backend="cpu")
    graph = f.lower(np.ones(4)).optimized_graph
    assert wrap_runs(graph) is graph

    def residual(a, b):
        x = np.linalg.solve(a, b)
        return x, np.linalg.norm(a @ x - b)

    a = np.eye(6) * 2
    graph = tj.jit(residual, backend="cpu").lower(a, np.ones(6)).optimized_graph
    assert len(graph.nodes) >= MIN_STEPS
    assert wrap_runs(graph) is graph


def test_updates_of_the_run_own_values_copy_nothing():
    """Each ``x[i] = ...`` updates the driver's copy of ``x`` in place: the argument is
    copied once into it and the result once out, not the whole array at every step."""
    L, x, b = CASES["trisolv"][1]()
    graph = tj.jit(trisolv, backend="cpu").lower(L, x, b).optimized_graph
    (scan,) = _straight_scans(wrap_runs(graph))
    assert len(re.findall(r"for q\w* in range\(7\):", fused.source(scan.attrs["loop"]))) <= 2


def test_an_index_out_of_bounds_is_raised_at_the_users_line():
    x, idx = np.arange(12.0), np.arange(12)
    f = tj.jit(gathered, backend="cpu")
    np.testing.assert_allclose(f(x, idx), gathered(x, idx))
    assert f.wait_compiled(timeout=300)
    np.testing.assert_allclose(f(x, idx), gathered(x, idx))
    bad = idx.copy()
    bad[7] = 40
    with pytest.raises(IndexOutOfBounds) as info:
        f(x, bad)
    assert "index 40 is out of bounds for axis 0 with size 12" in str(info.value)
    assert info.value.location.lineno == gathered.__code__.co_firstlineno + 3
    assert str(info.value).count(" at ") == 1  # one location, the failing step's
    np.testing.assert_allclose(f(x, idx), gathered(x, idx))  # and it runs on after


def gathered_then_inverse(x, idx, a):
    out = gathered(x, idx)
    return out, np.linalg.inv(a)


def test_a_library_call_is_not_moved_above_a_step_that_may_raise():
    """NumPy raises the first error in program order: with an index out of bounds in the
    run and a singular matrix after it, the later runner raises the index's error, not
    ``inv``'s, though ``inv`` reads nothing of the run and would otherwise move up."""
    x, idx, a = np.arange(12.0), np.arange(12), np.eye(3)
    graph = tj.jit(gathered_then_inverse, backend="cpu").lower(x, idx, a).optimized_graph
    wrapped = wrap_runs(graph)
    inv = next(i for i, n in enumerate(wrapped.nodes) if n.op == "inv")
    assert any(n.op == "gather" for n in wrapped.nodes[:inv]) or any(
        n.op == "scan" for n in wrapped.nodes[:inv])
    f = tj.jit(gathered_then_inverse, backend="cpu")
    f(x, idx, a)
    assert f.wait_compiled(timeout=300)
    bad = idx.copy()
    bad[7] = 40
    with pytest.raises(IndexError):
        gathered_then_inverse(x, bad, np.zeros((3, 3)))
    with pytest.raises(IndexOutOfBounds):
        f(x, bad, np.zeros((3, 3)))


def all_then_count(v0):
    """Found by an explore run of the later runner's same-bits test: the driver pre-filled
    an ``all``'s bool output with ``True`` through a bool pointer, which Numba stores as an
    i1 where the byte lies ("cannot store i1 to i8*"): the later runner failed to compile."""
    v2 = np.logical_and.reduce(v0, axis=None)
    v4 = np.sum(v2, axis=None)
    v7 = np.var(v0, axis=0, ddof=1)
    return v7, v4


@pytest.mark.filterwarnings("ignore:Degrees of freedom")  # (NumPy's, for the one-row var)
@pytest.mark.parametrize("x", [np.array([[0]], np.int32), np.array([[3]], np.int32),
                               np.array([[1, 2], [3, 0]], np.int32)])
def test_a_bool_reduction_in_a_run_is_filled_as_a_byte(monkeypatch, caplog, x):
    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)
    f = tj.jit(all_then_count, backend="cpu")
    assert _straight_scans(wrap_runs(f.lower(x).optimized_graph))
    first = f(x)
    assert f.wait_compiled(300) and "failed" not in caplog.text
    for w, a, b in zip(all_then_count(x), first, f(x), strict=True):
        np.testing.assert_array_equal(a, w)
        assert b.tobytes() == a.tobytes() and b.dtype == a.dtype
