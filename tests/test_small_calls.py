"""Cached calls of a few microseconds: what the CPU backend's call path leaves out.

Kernels are called through a builtin-function trampoline rather than ctypes; the later
runner compiles the exactly rounded ops beside an inexact one; ``slogdet`` is one NumPy
call; writes into arguments take a path written out for the signature. Each is checked
through the runner's steps or objects and against NumPy's results, never by timing.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import cpu
from tracejit.backends.cpu import native
from tracejit.config import config
from tracejit.errors import InPlaceArgumentError, ReadOnlyDestination


@pytest.fixture
def default_policy(monkeypatch):
    monkeypatch.setattr(config, "min_kernel_size", 4096)


def _entry(f):
    (entry,) = f._cache.values()
    return entry


def _steps(f) -> list[tuple[str, str]]:
    return [(s.name.rstrip("0123456789"), s.ops) for s in _entry(f).runner.steps]


def test_kernels_are_builtins_through_the_trampoline():
    """A serial kernel is a builtin function (no ctypes call); a parallel one is found
    back as its ctypes function for libgomp."""
    f = tj.jit(lambda x: x * 2 + 1)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    kernel = _entry(f).runner.namespace["kernel0"]
    if native._launch_method() is None:
        pytest.skip("no C compiler: kernels are called through ctypes")
    assert type(kernel).__name__ == "builtin_function_or_method"
    assert native._by_launcher[kernel].launches is not None
    with pytest.raises(TypeError):
        kernel("not an address")  # refused before the kernel runs


def test_a_large_kernel_runs_in_parallel_through_the_trampoline():
    f = tj.jit(lambda x: np.sqrt(x) * 2 + 1)
    x = np.linspace(0, 4, 300_000)
    for _ in range(3):
        np.testing.assert_array_equal(f(x), np.sqrt(x) * 2 + 1)


def test_exact_ops_beside_an_inexact_one_compile_later(default_policy):
    """``sin`` stays NumPy's (its bits would differ); the ``multiply, add`` before it run
    as one kernel once compiled, with NumPy's bits, on every call."""
    def chirp(t, f0):
        return np.sin(t * f0 + t)

    t = np.linspace(0, 1, 500)
    f = tj.jit(chirp)
    first = f(t, 3.0)
    # the first runner's steps (read from its plan: the switch may already have happened,
    # the kernel being in the disk cache from an earlier test)
    _, planned = cpu.planned_steps(f.lower(t, 3.0).optimized_graph)
    assert [(s.name.rstrip("0123456789"), ", ".join(n.op for n in s.nodes))
            for s in planned] == [("lib", "multiply"), ("lib", "add"), ("lib", "sin")]
    f.wait_compiled()
    assert _steps(f) == [("kernel", "multiply, add"), ("lib", "sin")]
    np.testing.assert_array_equal(f(t, 3.0), first)
    np.testing.assert_array_equal(first, chirp(t, 3.0))


def test_reductions_stay_numpy_and_the_elementwise_ops_between_them_compile(default_policy):
    def weighted_var(x, w):
        w = w / w.sum()
        m = (w * x).sum()
        return (w * (x - m) ** 2).sum()

    rng = np.random.default_rng(0)
    x, w = rng.random(300), rng.random(300)
    f = tj.jit(weighted_var)
    first = f(x, w)
    f.wait_compiled()
    kinds = _steps(f)
    assert [ops for kind, ops in kinds if kind == "lib"] == ["sum"] * 3
    assert len(kinds) == 5
    assert f(x, w) == first == weighted_var(x, w)


def _planned(f, *args) -> list[tuple[str, str]]:
    _, planned = cpu.planned_steps(f.lower(*args).optimized_graph)
    return [(s.name.rstrip("0123456789"), ", ".join(n.op for n in s.nodes)) for s in planned]


def test_a_scalar_computed_between_elementwise_ops_does_not_split_their_kernel(default_policy):
    """``1.4826 * mad`` (0-d: a NumPy call) is computed before the loop, so the division by
    it joins the clip and the subtraction: one pass over ``x``. It read a constant taken
    after the subtraction, came after the loop kernel, and the division, alone in a kernel
    after it, was a second NumPy pass."""
    def scaled(x, lo, hi, med, mad):
        return (np.clip(x, lo, hi) - med) / (1.4826 * mad)

    x = np.linspace(-1.0, 2.0, 10_000)
    args = (x, np.float64(0.1), np.float64(0.9), np.float64(0.5), np.float64(0.25))
    f = tj.jit(scaled)
    assert _planned(f, *args) == [("lib", "multiply"), ("kernel", "clip, subtract, true_divide")]
    np.testing.assert_array_equal(f(*args), scaled(*args))


def test_a_small_kernel_leaves_before_its_large_neighbours_are_judged(default_policy):
    """The (3,)-element sum between ``x * 2`` and the division splits them into two lone
    kernels, each not worth compiling alone; once the small kernel is NumPy calls, taken
    first, the two join: one kernel, where all five steps were NumPy calls."""
    def f(x, v):
        return (x * 2.0) / (v * 3.0 + 1.0).sum()

    x, v = np.linspace(0.0, 1.0, 10_000), np.arange(3.0)
    jitted = tj.jit(f)
    assert _planned(jitted, x, v) == [("lib", "multiply"), ("lib", "add"), ("lib", "sum"),
                                      ("kernel", "multiply, true_divide")]
    np.testing.assert_array_equal(jitted(x, v), f(x, v))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_slogdet_is_one_numpy_call(dtype, n):
    def f(a):
        sign, logdet = np.linalg.slogdet(a)
        return np.linalg.det(a), sign * logdet, sign, logdet

    rng = np.random.default_rng(n)
    a = (rng.random((n, n)) * 4 - 2).astype(dtype)
    g = tj.jit(f)
    got, want = g(a), f(a)
    for x, y in zip(got, want, strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_allclose(x, y, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert "np.linalg.slogdet(" in g.lower(a).source  # one call (unpacked: lib_steps.py)


def test_a_singular_matrix_slogdet_as_numpy():
    a = np.ones((3, 3))
    sign, logdet = tj.jit(lambda a: np.linalg.slogdet(a))(a)
    assert (sign, logdet) == tuple(np.linalg.slogdet(a))


def sgd_update(x, g, lr, out):
    np.multiply(g, -lr, out=out)
    np.add(out, x, out=out)
    return out


def test_out_argument_returned_as_itself_on_every_call():
    f = tj.jit(sgd_update)
    rng = np.random.default_rng(1)
    x, g = rng.random(300), rng.random(300)
    for _ in range(3):
        out = np.zeros(300)
        got = f(x, g, 0.1, out)
        assert got is out
        np.testing.assert_array_equal(out, sgd_update(x, g, 0.1, np.zeros(300)))


def test_out_argument_that_is_a_view_takes_the_general_path():
    f = tj.jit(sgd_update)
    x, g = np.ones(4), np.full(4, 2.0)
    for _ in range(2):
        base = np.zeros(8)
        got = f(x, g, 0.5, base[::2])
        assert got.base is base
        np.testing.assert_array_equal(base, [0.0, 0, 0, 0, 0, 0, 0, 0])
        assert np.shares_memory(got, base)


def test_out_argument_errors_as_before_on_the_written_out_path():
    f = tj.jit(sgd_update)
    x, g = np.ones(4), np.ones(4)
    f(x, g, 0.1, np.zeros(4))  # compiled
    out = np.zeros(4)
    out.flags.writeable = False
    with pytest.raises(ReadOnlyDestination):
        f(x, g, 0.1, out)
    with pytest.raises(InPlaceArgumentError):
        f(x, g, 0.1, x)  # the same array written and read
    view = np.zeros(8)
    with pytest.raises(InPlaceArgumentError):
        f(view[:4], g, 0.1, view[2:6])  # overlapping views


def test_written_arguments_passed_through_are_copied_before_the_stores():
    def swap_into(a, b):
        b[...] = a
        a[...] = 0.0

    g = tj.jit(swap_into)
    for k in range(3):
        a, b = np.arange(4.0) + k, np.zeros(4)
        g(a, b)
        np.testing.assert_array_equal(a, 0.0)
        np.testing.assert_array_equal(b, np.arange(4.0) + k)


def test_in_place_update_of_two_arguments_as_numpy():
    def mvt(x1, x2, y_1, y_2, A):
        x1 += A @ y_1
        x2 += y_2 @ A

    rng = np.random.default_rng(2)
    A, y1, y2 = rng.random((24, 24)), rng.random(24), rng.random(24)
    f = tj.jit(mvt)
    for _ in range(3):
        x1, x2 = rng.random(24), rng.random(24)
        w1, w2 = x1.copy(), x2.copy()
        assert f(x1, x2, y1, y2, A) is None
        mvt(w1, w2, y1, y2, A)
        np.testing.assert_allclose(x1, w1, rtol=1e-13)
        np.testing.assert_allclose(x2, w2, rtol=1e-13)
