"""Python loops traced into copies of their body are rolled back into one scan
(``passes/roll.py``): results equal the unrolled function's and NumPy's, on every backend,
and the loop is (or, where it must not be, is not) in ``optimized_ir``."""

import logging
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.backends import get_backend
from tracejit.ir.loop_ops import Scan
from tracejit.passes import roll, run_pipeline
from tracejit.passes.roll_find import MIN_COPIES

_WANTED = (os.environ.get("TRACEJIT_TEST_BACKENDS") or "reference,cpu").split(",")


@pytest.fixture(params=[b for b in ("reference", "cpu") if b in _WANTED])
def backend(request) -> str:
    """The backends that run a scan themselves (others keep loops unrolled: see
    test_a_backend_running_no_scan_keeps_loops_unrolled)."""
    return request.param


def _scans(graph) -> list[Scan]:
    """Every scan in ``graph``, nested ones included, outermost first."""
    found = []
    for n in graph.nodes:
        if n.op == "scan":
            found.append(n.attrs["loop"])
            found += _scans(n.attrs["loop"].body)
    return found


def _ops(graph) -> list[str]:
    return [n.op for n in graph.nodes] + [op for s in _scans(graph) for op in
                                          (n.op for n in s.body.nodes)]


def _both(fn, backend, *args, copy=True, plain_scans=0):
    """``fn``'s results jitted with rolling on and off, and its optimized graph (rolled);
    unrolled, the graph holds ``plain_scans`` scans (the function's own)."""
    fresh = (lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]) \
        if copy else (lambda: list(args))
    f = tj.jit(fn, backend=backend)
    rolled = f(*fresh())
    graph = f.lower(*fresh()).optimized_graph
    tj.config.roll_loops = False
    try:
        g = tj.jit(fn, backend=backend)
        plain = g(*fresh())
        assert len(_scans(g.lower(*fresh()).optimized_graph)) == plain_scans
    finally:
        tj.config.roll_loops = True
    return rolled, plain, graph


def jacobi(a, steps):
    for _ in range(steps):
        p = np.pad(a, 1)
        a = 0.2 * (p[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
    return a


@pytest.mark.parametrize("steps", [1, MIN_COPIES - 1, MIN_COPIES, 30])
def test_jacobi_2d(backend, steps):
    a = np.random.default_rng(0).random((12, 12))
    rolled, plain, graph = _both(lambda a: jacobi(a, steps), backend, a)
    want = jacobi(a, steps)
    np.testing.assert_allclose(rolled, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(plain, want, rtol=1e-13, atol=1e-15)
    scans = _scans(graph)
    if steps >= MIN_COPIES:
        assert [s.length for s in scans] == [steps]  # the loop is one op, every step in it
        assert [n.op for n in graph.nodes].count("pad") == 0
    else:
        assert not scans  # too few copies: left as traced


def jacobi_in_place(a, b, steps):
    """PolyBench's jacobi-2d: two arrays updated in place, each from the other."""
    for _ in range(steps):
        b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2]
                               + a[1:-1, 2:])
        a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2]
                               + b[1:-1, 2:])


def test_jacobi_2d_writing_its_arguments(backend):
    rng = np.random.default_rng(12)
    a, b = rng.random((10, 11)), rng.random((10, 11))
    want_a, want_b = a.copy(), b.copy()
    jacobi_in_place(want_a, want_b, 20)
    for on in (True, False):
        tj.config.roll_loops = on
        try:
            f = tj.jit(lambda a, b: jacobi_in_place(a, b, 20), backend=backend)
            got_a, got_b = a.copy(), b.copy()
            assert f(got_a, got_b) is None
            graph = f.lower(a.copy(), b.copy()).optimized_graph
        finally:
            tj.config.roll_loops = True
        np.testing.assert_allclose(got_a, want_a, rtol=1e-13)
        np.testing.assert_allclose(got_b, want_b, rtol=1e-13)
        assert [s.length for s in _scans(graph)] == ([20] if on else [])


def heat(u, r, steps):
    for _ in range(steps):
        p = np.pad(u, 1)
        u = u + r * (p[2:] - 2.0 * p[1:-1] + p[:-2])
    return u


def test_heat_1d_with_consts_from_before_the_loop(backend):
    u = np.sin(np.linspace(0, 3, 40))
    r = np.linspace(0.1, 0.3, 40)  # an argument every step reads: a const of the loop

    def fn(u, r):
        w = r * 0.5  # computed before the loop, read in it
        return heat(u, w, 25)

    rolled, plain, graph = _both(fn, backend, u, r)
    want = heat(u, r * 0.5, 25)
    np.testing.assert_allclose(rolled, want, rtol=1e-12)
    np.testing.assert_allclose(plain, want, rtol=1e-12)
    (scan,) = _scans(graph)
    assert scan.length == 25 and scan.n_consts == 1 and scan.n_carry == 1


def trace_of_tanh(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += np.tanh(a[i, i])
    return s


def test_scalar_loop_with_the_index_as_a_loop_variable(backend):
    a = np.random.default_rng(1).standard_normal((10, 10))
    rolled, plain, graph = _both(trace_of_tanh, backend, a)
    want = trace_of_tanh(a)
    np.testing.assert_allclose(rolled, want, rtol=1e-13)
    np.testing.assert_allclose(plain, want, rtol=1e-13)
    (scan,) = _scans(graph)
    # the first copy adds to the Python float 0.0 (another type): it stays unrolled
    assert scan.length == 9
    assert "gather" in [n.op for n in scan.body.nodes]


def test_affine_int_constant_and_strided_index(backend):
    def fn(x):
        acc = np.zeros(3)
        for i in range(8):
            acc = acc * 0.5 + x[2 * i + 1, ::2] * i  # start 2i+1, and i as a weak int
        return acc

    x = np.random.default_rng(2).random((20, 6))
    rolled, plain, graph = _both(fn, backend, x)
    np.testing.assert_allclose(rolled, fn(x), rtol=1e-13)
    np.testing.assert_allclose(plain, fn(x), rtol=1e-13)
    (scan,) = _scans(graph)
    assert scan.length >= 7


def test_time_as_a_float_loop_variable(backend):
    """``t * dt`` is a float constant in each copy: it rolls as the step index times dt,
    computed as Python computed it (bit for bit on the reference backend)."""
    dt = 0.1

    def euler(u, w):
        for t in range(1, 40):
            u = u + dt * (-u + np.sin(w) * (t * dt))
        return u

    def scalars(u):
        for t in range(30):
            u = u + np.float64(t * 0.37) * u * 1e-3
        return u

    def not_linear(u):
        for t in range(1, 12):
            u = u * (1.0 / t)  # no float times the index: stays unrolled
        return u

    u, w = np.random.default_rng(17).random((2, 4))
    for fn, args, length in ((euler, (u, w), 39), (scalars, (u,), 30), (not_linear, (u,), 0)):
        rolled, plain, graph = _both(fn, backend, *args)
        want = fn(*args)
        if backend == "reference":
            np.testing.assert_array_equal(rolled, want)
        np.testing.assert_allclose(rolled, want, rtol=1e-14)
        np.testing.assert_allclose(plain, want, rtol=1e-14)
        assert [s.length for s in _scans(graph)] == ([length] if length else [])


def prefix(a, x):
    for i in range(1, a.shape[0]):
        a[i] = a[i - 1] + x[i]
    return a


def test_in_place_write_at_the_index(backend):
    rng = np.random.default_rng(3)
    a, x = rng.random(12), rng.random(12)
    got_a, plain_a = a.copy(), a.copy()
    f = tj.jit(prefix, backend=backend)
    rolled = f(got_a, x)
    graph = f.lower(a.copy(), x).optimized_graph
    tj.config.roll_loops = False
    try:
        plain = tj.jit(prefix, backend=backend)(plain_a, x)
    finally:
        tj.config.roll_loops = True
    want_a = a.copy()
    want = prefix(want_a, x)
    np.testing.assert_allclose(rolled, want, rtol=1e-13)
    np.testing.assert_allclose(plain, want, rtol=1e-13)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-13)  # written back to the argument
    (scan,) = _scans(graph)
    assert scan.length == 11 and "scatter" in [n.op for n in scan.body.nodes]


def test_copies_that_differ_non_affinely_stay_unrolled(backend):
    order = [0, 3, 1, 4, 2, 5, 0, 2, 6, 1]

    def fn(a):
        for i in order:
            a = a + a[i]
        return a

    def floats(a):
        for c in (0.5, 0.25, 2.0, 3.0, 1.5, 0.75):  # float constants: not an index
            a = np.sin(a) * c
        return a

    a = np.random.default_rng(4).random(7)
    rolled, plain, graph = _both(fn, backend, a)
    np.testing.assert_allclose(rolled, fn(a), rtol=1e-13)
    assert not _scans(graph)
    rolled, plain, graph = _both(floats, backend, a)
    np.testing.assert_allclose(rolled, floats(a), rtol=1e-13)
    assert not _scans(graph)


@pytest.mark.parametrize("writes_argument", [False, True])
def test_nested_loops_become_nested_scans(backend, writes_argument):
    def fn(a):
        if not writes_argument:
            a = a.copy()
        for _ in range(6):
            for i in range(1, 7):
                a[i] = a[i] + 0.5 * a[i - 1]
            a = a * 0.9
        return a

    a = np.random.default_rng(5).random(8)
    rolled, plain, graph = _both(fn, backend, a)
    np.testing.assert_allclose(rolled, fn(a.copy()), rtol=1e-13)
    np.testing.assert_allclose(plain, fn(a.copy()), rtol=1e-13)
    top = [n.attrs["loop"] for n in graph.nodes if n.op == "scan"]
    # the argument's new value is what its first outer step wrote: that step is not rolled
    assert [s.length for s in top] == ([6, 5] if writes_argument else [6])
    outer = top[-1]
    assert [s.length for s in _scans(outer.body)] == [6]


def test_a_value_from_inside_the_loop_read_after_it(backend):
    def fn(a):
        kept = []
        for _ in range(10):
            a = np.sin(a) + 1.0
            kept.append(a)
        return a, kept[3] * 2.0, kept[8]

    a = np.random.default_rng(6).random(5)
    rolled, plain, graph = _both(fn, backend, a)
    for got, other, want in zip(rolled, plain, fn(a), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13)
        np.testing.assert_allclose(other, want, rtol=1e-13)
    # steps 0-3 end with kept[3]; 4-8 with kept[8], read later; the last step is a's
    assert sorted(s.length for s in _scans(graph)) == [4, 5]


def test_an_indexed_loop_starting_after_a_step_read_later(backend):
    def fn(a, x):
        for i in range(12):
            a = np.sin(a + x[i] * i)
            if i == 1:
                early = a  # steps 0-1 stay unrolled; the loop from step 2 reads x[2] first
        return a, early

    rng = np.random.default_rng(16)
    a, x = rng.random(3), rng.random((12, 3))
    rolled, plain, graph = _both(fn, backend, a, x)
    for got, other, want in zip(rolled, plain, fn(a, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13)
        np.testing.assert_allclose(other, want, rtol=1e-13)
    assert [s.length for s in _scans(graph)] == [10]


def test_every_step_read_after_the_loop_is_not_rolled(backend):
    def fn(a):
        sums = []
        for _ in range(8):
            a = a * 1.5 - 0.25
            sums.append(a.sum())
        return np.stack(sums)

    a = np.random.default_rng(7).random(6)
    rolled, plain, graph = _both(fn, backend, a)
    np.testing.assert_allclose(rolled, fn(a), rtol=1e-13)
    assert not _scans(graph)


def test_two_loops_in_sequence_and_two_carries(backend):
    def fn(a, b):
        for _ in range(6):
            a, b = a + 0.1 * b, b - 0.1 * a  # both carried: each copy reads both
        for _ in range(7):
            a = np.cos(a)
        return a, b

    rng = np.random.default_rng(8)
    a, b = rng.random(4), rng.random(4)
    rolled, plain, graph = _both(fn, backend, a, b)
    for got, want in zip(rolled, fn(a, b), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    first, second = _scans(graph)
    assert (first.length, first.n_carry, second.length) == (6, 2, 7)


def test_a_step_reading_two_steps_back_stays_unrolled(backend):
    def fib(a, b):
        for _ in range(10):
            a, b = b, a + b  # no node makes `a`: each step reads two steps back
        return b

    x, y = np.ones(3), np.full(3, 2.0)
    rolled, plain, graph = _both(fib, backend, x, y)
    np.testing.assert_array_equal(rolled, fib(x, y))
    assert not _scans(graph)


def test_a_python_loop_around_lax_scan(backend):
    from tracejit import lax

    def fn(h, xs):
        for _ in range(5):
            h, _ = lax.scan(lambda c, x: (np.tanh(c + x), c), h, xs)
        return h

    def want(h, xs):
        for _ in range(5):
            for x in xs:
                h = np.tanh(h + x)
        return h

    rng = np.random.default_rng(13)
    h, xs = rng.random(3), rng.random((4, 3))
    rolled, plain, graph = _both(fn, backend, h, xs, plain_scans=5)
    np.testing.assert_allclose(rolled, want(h, xs), rtol=1e-13)
    np.testing.assert_allclose(plain, want(h, xs), rtol=1e-13)
    assert [s.length for s in _scans(graph)] == [5, 4]  # equal bodies, traced five times


def test_random_draws_are_never_rolled(backend):
    def fn(a):
        for _ in range(6):
            a = a + np.random.rand(3)
        return a

    np.random.seed(0)
    got = tj.jit(fn, backend=backend)(np.zeros(3))
    np.random.seed(0)
    np.testing.assert_array_equal(got, fn(np.zeros(3)))
    graph = tj.jit(fn, backend=backend).lower(np.zeros(3)).optimized_graph
    assert not _scans(graph)
    assert [n.op for n in graph.nodes].count("random") == 6


def loss(a, w):
    for _ in range(8):
        a = np.tanh(a * w + np.roll(a, 1))
    return (a ** 2).sum()


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_gradient_through_a_rolled_loop(backend):
    rng = np.random.default_rng(9)
    a, w = rng.standard_normal(6), rng.standard_normal(6)
    g = tj.grad(loss, argnums=(0, 1), backend=backend)
    ga, gw = g(a, w)
    np.testing.assert_allclose(ga, _fd(lambda x: loss(x, w), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, _fd(lambda x: loss(a, x), w), rtol=1e-6, atol=1e-8)
    graph = g.lower(a, w).optimized_graph
    scans = [n.attrs["loop"] for n in graph.nodes if n.op == "scan"]
    # one forward loop (the rolled primal and autodiff's copy run as one), one backward
    assert sorted((s.reverse, s.length) for s in scans) == [(False, 8), (True, 8)]


def test_gradient_with_the_index_as_a_loop_variable(backend):
    def fn(a, w):
        a = a.copy()
        for i in range(1, a.shape[0]):
            a[i] = np.sin(a[i - 1]) * a[i] + w[i, i]
        return (a * a).sum()

    rng = np.random.default_rng(10)
    a, w = rng.standard_normal(9), rng.standard_normal((9, 9))
    g = tj.grad(fn, argnums=(0, 1), backend=backend)
    ga, gw = g(a, w)
    np.testing.assert_allclose(ga, _fd(lambda x: fn(x, w), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, _fd(lambda x: fn(a, x), w), rtol=1e-6, atol=1e-8)
    graph = g.lower(a, w).optimized_graph
    assert any(n.attrs["loop"].reverse for n in graph.nodes if n.op == "scan")


def test_gradient_through_nested_loops(backend):
    def fn(a, w):
        a = a.copy()
        for _ in range(5):
            for i in range(1, 7):
                a[i] = np.tanh(a[i] + w[i] * a[i - 1])
            a = a * 0.9
        return (a * a).sum()

    rng = np.random.default_rng(11)
    a, w = rng.standard_normal(8), rng.standard_normal(8)
    g = tj.grad(fn, argnums=(0, 1), backend=backend)
    ga, gw = g(a, w)
    np.testing.assert_allclose(ga, _fd(lambda x: fn(x, w), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, _fd(lambda x: fn(a, x), w), rtol=1e-6, atol=1e-8)
    backward = [n.attrs["loop"] for n in g.lower(a, w).optimized_graph.nodes
                if n.op == "scan" and n.attrs["loop"].reverse]
    assert [s.length for s in backward] == [5]
    assert any(s.reverse and s.length == 6 for s in _scans(backward[0].body))


def test_jacobian_and_second_derivatives_through_a_rolled_loop():
    def f(a):
        for _ in range(6):
            a = np.tanh(a * 1.1 + np.roll(a, 1))
        return a

    def total(a):
        return (f(a) ** 2).sum()

    a = np.random.default_rng(14).standard_normal(5)
    eps = 1e-6
    want = np.stack([(f(a + eps * e) - f(a - eps * e)) / (2 * eps) for e in np.eye(5)], 1)
    np.testing.assert_allclose(tj.jacobian(f, backend="reference")(a), want, rtol=1e-6,
                               atol=1e-8)
    g = tj.grad(total, backend="reference")
    hess = np.stack([(g(a + eps * e) - g(a - eps * e)) / (2 * eps) for e in np.eye(5)], 1)
    np.testing.assert_allclose(tj.jacobian(g, backend="reference")(a), hess, rtol=1e-5,
                               atol=1e-7)
    gg = tj.grad(lambda a: g(a).sum(), backend="reference")(a)
    np.testing.assert_allclose(gg, hess.sum(axis=0), rtol=1e-5, atol=1e-7)


def test_compile_log_says_what_was_rolled(caplog):
    a = np.ones((6, 6))
    with caplog.at_level(logging.INFO, logger="tracejit"):
        tj.jit(lambda a: jacobi(a, 40), backend="reference")(a)
    lines = [r.getMessage() for r in caplog.records if "rolled" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith("rolled 40 copies of a 12-node loop body at test_roll.py:")
    assert lines[0].endswith("into a scan")


def test_the_setting(monkeypatch):
    with pytest.raises(ValueError):
        tj.config.roll_loops = "maybe"
    tj.config.roll_loops = "0"
    assert tj.config.roll_loops is False
    tj.config.roll_loops = True
    from tracejit.config import Settings

    monkeypatch.setenv("TRACEJIT_ROLL_LOOPS", "off")
    assert Settings().roll_loops is False


def test_a_long_trace_rolls():
    a = np.ones((4, 4))
    f = tj.jit(lambda a: jacobi(a, 2000), backend="reference")
    np.testing.assert_allclose(f(a), jacobi(a, 2000), rtol=1e-12, atol=1e-300)
    assert [s.length for s in _scans(f.lower(a).optimized_graph)] == [2000]


# Loop bodies the property test draws from: each updates the carries a, b (length 16) at
# step i, reading the index affinely (x[i], a[i] = ...), not at all, or not affinely (i % 3).
_STEPS = {
    "scale": lambda a, b, x, i: (a * 0.5 + b, b),
    "row": lambda a, b, x, i: (np.tanh(a) + x[i, 1:], b),
    "int": lambda a, b, x, i: (a + i, b * 0.25),
    "mod": lambda a, b, x, i: (a, b + a[i % 3]),
    "roll": lambda a, b, x, i: (a, np.roll(b, 1) * np.cos(a)),
    "pad": lambda a, b, x, i: (a, np.pad(b, 1)[:-2] + 0.1),
    "write": lambda a, b, x, i: (_write(a, i, a[i - 1] * 0.9 + b[i]), b),
    "diag": lambda a, b, x, i: (a, b + x[i, i] * x[i + 1, :16]),
    "time": lambda a, b, x, i: (a + b * (i * 0.1), b),
}


def _write(a, i, v):
    a = a.copy()
    a[i] = v
    return a


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(_STEPS)), min_size=1, max_size=3),
       st.integers(1, 2), st.integers(0, 12))
def test_drawn_loop_bodies_against_numpy(body, start, steps):
    def fn(a, b, x):
        for i in range(start, start + steps):
            for name in body:
                a, b = _STEPS[name](a, b, x, i)
        return a, b

    rng = np.random.default_rng(steps)
    args = rng.standard_normal(16), rng.standard_normal(16), rng.standard_normal((16, 17))
    want = fn(*args)
    for on in (True, False):
        tj.config.roll_loops = on
        try:
            got = tj.jit(fn, backend="reference")(*args)
        finally:
            tj.config.roll_loops = True
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


class _NoLoops:
    """A backend that runs every op but loops."""

    @staticmethod
    def supports(node) -> bool:
        return node.op not in ("scan", "while_loop", "loop_output")


def test_a_backend_running_no_scan_keeps_loops_unrolled():
    a = np.ones((5, 5))
    graph = tj.jit(lambda a: jacobi(a, 10), backend="reference").lower(a).graph
    token = roll.for_backend(_NoLoops())
    try:
        assert not _scans(run_pipeline(graph))
    finally:
        roll.restore(token)
    assert [s.length for s in _scans(run_pipeline(graph))] == [10]


@pytest.mark.skipif("cuda" not in tj.available_backends(), reason="no CUDA device or emulator")
def test_loops_roll_on_cuda_and_run_there():
    """The CUDA backend runs a scan itself (its body's kernels launched per step), so a
    Python loop rolls there too, and nothing falls back to the CPU."""
    a = np.random.default_rng(15).random((6, 6))
    f = tj.jit(lambda a: jacobi(a, 10), backend="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PlacementWarning: nothing falls back to the CPU
        graph = f.lower(a).optimized_graph
        got = tj.to_host(f(a))
    assert [s.length for s in _scans(graph)] == [10]
    assert get_backend("cuda").supports(roll._PROBE) is True
    np.testing.assert_allclose(got, jacobi(a, 10), rtol=1e-12, atol=1e-12)
