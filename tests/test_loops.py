"""``tracejit.lax`` loops (``scan``, ``fori_loop``, ``while_loop``, ``map``) against NumPy.

Each case is a function of a loop namespace ``L`` and arrays: run with
``numpy_compare.NumpyLax`` (plain Python loops over NumPy values) it is the oracle; run
under ``jit`` with ``tracejit.lax`` it records loop nodes, on every backend of the
``backend`` fixture. The reference backend must agree bit for bit (its loops interpret the
body with NumPy); compiled backends within rounding. Gradients are checked against
central finite differences of the NumPy loop in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy_compare import ULP, NumpyLax, assert_same, exact

import tracejit as tj
from tracejit import lax
from tracejit.errors import LoopError, UnsupportedOperation

NP = NumpyLax
RNG = np.random.default_rng(0)


def data(*shape, dtype=np.float64, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def same(fn, *args, backend, scale=10.0):
    """``fn(lax, *args)`` jitted on ``backend`` is ``fn(NumpyLax, *args)``."""
    want = fn(NP, *args)
    got = tj.jit(lambda *a: fn(lax, *a), backend=backend)(*args)
    assert_same(got, want, None if exact(backend) else scale)
    return got


def fd_grad(f, args, argnums, eps=1e-6):
    """Central differences of the scalar ``f(*args)`` with respect to ``args[argnums]``."""
    out = []
    for k in argnums:
        x = np.array(args[k], dtype=np.float64)
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            hi, lo = x.copy(), x.copy()
            hi[i] += eps
            lo[i] -= eps
            at = [list(args), list(args)]
            at[0][k], at[1][k] = (hi if x.ndim else float(hi)), (lo if x.ndim else float(lo))
            g[i] = (f(*at[0]) - f(*at[1])) / (2 * eps)
        out.append(g)
    return out


def check_grad(fn, *args, argnums=(0,), backend, rtol=1e-6, atol=1e-8, inside_jit=False):
    """``grad(fn(lax, ...))`` against finite differences of ``fn(NumpyLax, ...)``."""
    g = tj.grad(lambda *a: fn(lax, *a), argnums=tuple(argnums), backend=backend)
    got = tj.jit(g, backend=backend)(*args) if inside_jit else g(*args)
    want = fd_grad(lambda *a: fn(NP, *a), args, argnums)
    for gi, wi in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(gi), wi, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- values


def rnn(L, h0, xs, W):
    def step(h, x):
        h = np.tanh(h @ W + x)
        return h, h.sum()

    return L.scan(step, h0, xs)


def test_scan_closing_over_an_argument(backend):
    same(rnn, data(4), data(5, 4), data(4, 4), backend=backend)


def test_scan_float32(backend):
    h, ys = same(rnn, data(3, dtype=np.float32), data(6, 3, dtype=np.float32),
                 data(3, 3, dtype=np.float32), backend=backend)
    assert h.dtype == np.float32 and ys.dtype == np.float32


def test_scan_closing_over_a_numpy_array(backend):
    W = data(3, 3)
    same(lambda L, xs: L.scan(lambda h, x: (np.sin(h @ W) + x, h * 2), np.ones(3), xs),
         data(4, 3), backend=backend)


def test_pytree_carry_and_ys(backend):
    def fn(L, xs, w):
        def step(c, x):
            a, (b, d) = c["a"], c["bd"]
            a = a * x["u"] + w
            return {"a": a, "bd": (b + a.sum(), d * 2)}, (a, {"v": x["v"].max() + b})

        init = {"a": np.zeros(3), "bd": (np.float64(1.0), np.int64(1))}
        return L.scan(step, init, xs)

    same(fn, {"u": data(4, 3), "v": data(4, 2, 2)}, data(3), backend=backend)


def test_ys_none_and_length_without_xs(backend):
    same(lambda L, c: L.scan(lambda c, _: (c * 2 + 1, None), c, None, length=5), data(2),
         backend=backend)
    same(lambda L, c: L.scan(lambda c, _: (c + 1, c), c, length=4), np.int32(3),
         backend=backend)


@pytest.mark.parametrize("reverse", [False, True])
def test_reverse(reverse, backend):
    same(lambda L, xs: L.scan(lambda c, x: (c * 0.5 + x, c - x), np.zeros(2), xs,
                              reverse=reverse), data(5, 2), backend=backend)


def test_zero_length_scan(backend):
    """No steps: the carry is the initial one, the ys empty stacks of the body's types."""
    f = tj.jit(lambda xs: lax.scan(lambda c, x: (c + x, (c * x, x.sum())), np.ones(2), xs),
               backend=backend)
    carry, (y1, y2) = f(np.zeros((0, 2), np.float32))
    assert_same(carry, np.ones(2))
    assert_same(y1, np.zeros((0, 2)))
    assert_same(y2, np.zeros((0,), np.float32))
    assert_same(tj.jit(lambda: lax.fori_loop(3, 3, lambda i, v: v + i, np.int32(7)),
                       backend=backend)(), np.int32(7))


def test_zero_d_and_integer_carries(backend):
    same(lambda L, xs: L.scan(lambda c, x: ((c[0] + x, c[1] * 3 % 7, c[2] | (x > 2)), c[1]),
                              (np.int64(0), np.int32(2), np.bool_(False)), xs),
         np.arange(6), backend=backend)


def test_body_returning_an_input_unchanged(backend):
    same(lambda L, xs, c: L.scan(lambda c, x: (c, x), c, xs), data(3, 2), data(4),
         backend=backend)


def test_unused_carry_and_index(backend):
    same(lambda L, x: (L.fori_loop(0, 4, lambda i, v: v * 2, x),
                       L.scan(lambda c, r: (c, r * 2), np.float64(1), x)[1]),
         data(3), backend=backend)


# Python scalars as initial values are weakly typed, as in a NumPy loop (NEP 50): the
# carry takes the dtype the body's first step gives it.
WEAK = [
    (0.0, np.float32, np.float32),  # Python float + float32 data: float32
    (0, np.float32, np.float32),
    (0.0, np.int32, np.float64),  # Python float + int32 data: float64
    (0, np.int8, np.int8),
    (0, np.int64, np.int64),
]


@pytest.mark.parametrize("init, dtype, result", WEAK, ids=str)
def test_weak_initial_value(init, dtype, result, backend):
    xs = np.arange(1, 6).astype(dtype)
    carry, ys = same(lambda L, xs: L.scan(lambda c, x: (c + x, c * 2), init, xs), xs,
                     backend=backend)
    assert carry.dtype == result == np.result_type(init, xs) and ys.dtype == result
    assert same(lambda L, xs: L.fori_loop(0, 5, lambda i, v: v + xs[i], init), xs,
                backend=backend).dtype == result


def test_weak_carries_settling_one_after_another(backend):
    """``c[1]`` turns float32 only once ``c[0]`` has: the body is traced until the carry's
    types settle, as a NumPy loop's values do over its first steps."""
    carry, ys = same(lambda L, xs: L.scan(lambda c, x: ((c[0] + x, c[1] + c[0]), c[1]),
                                          (0, 0.0), xs), np.arange(1, 5, dtype=np.float32),
                     backend=backend)
    assert carry[1].dtype == ys.dtype == np.float32


def test_weak_carry_that_stays_weak(backend):
    """A Python-float carry the body keeps a Python float (``c * 2.0``) keeps float32 data
    float32, as in a NumPy loop."""
    carry, ys = same(lambda L, xs: L.scan(lambda c, x: (c * 2.0, c * x), 1.0, xs),
                     data(4, 2, dtype=np.float32), backend=backend)
    assert ys.dtype == np.float32


def test_fori_index_is_a_python_int(backend):
    """``i`` is a Python int as range's: ``v + i`` keeps a float32 carry float32."""
    v = same(lambda L, x: L.fori_loop(0, 4, lambda i, v: v * i + 1, x),
             data(3, dtype=np.float32), backend=backend)
    assert v.dtype == np.float32
    f = tj.jit(lambda n, x: lax.fori_loop(0, n, lambda i, v: v * i + 1, x), backend=backend)
    assert f(4, data(3, dtype=np.float32)).dtype == np.float32


def test_loop_results_are_not_known_while_tracing():
    """A loop of constants is not run while tracing (its trip count could be long): a
    Python ``if`` on its result is an error, as in JAX."""
    from tracejit.errors import ConcretizationError

    def f(x):
        return x * 2 if lax.fori_loop(0, 3, lambda i, v: v * 2.0, 1.0) > 5 else x

    raises_here(ConcretizationError, tj.jit(f), X)


def test_nested_scan_in_scan(backend):
    def fn(L, xs, W):
        def outer(h, row):
            inner, ys = L.scan(lambda a, r: (a * W + r - h.mean(), a.sum()), h, row)
            return inner * 0.5, ys

        return L.scan(outer, np.zeros(3), xs)

    same(fn, data(4, 2, 3), data(3), backend=backend)


def test_fori_inside_while(backend):
    def fn(L, x):
        def body(c):
            k, v = c
            return k + 1, L.fori_loop(0, 3, lambda i, w: w * 0.5 + x, v)

        return L.while_loop(lambda c: c[0] < 4, body, (0, x))

    same(fn, data(3), backend=backend)


def test_map(backend):
    same(lambda L, xs: L.map(lambda r: (r @ r.T, r.max(axis=0)), xs), data(3, 2, 2),
         backend=backend)


def test_loops_called_directly_compile_on_first_use():
    xs = data(4, 3)
    for fn in (rnn, ):  # on the default backend, which may compile tanh (within ULP)
        assert_same(fn(lax, np.zeros(3), xs, data(3, 3) * 0),
                    fn(NP, np.zeros(3), xs, data(3, 3) * 0), ULP)
    assert_same(lax.fori_loop(0, 5, lambda i, v: v * 2.0, np.float32(1)), np.float32(32))
    assert_same(lax.fori_loop(np.int32(0), np.int32(3), lambda i, v: v + i, 1.0),
                np.float64(4.0))
    for upper in (np.array(3), np.array([3])[0], 3):  # an array bound is an argument
        assert_same(lax.fori_loop(0, upper, lambda i, v: v + i, np.float32(1)),
                    np.float32(4.0))
    assert_same(lax.while_loop(lambda c: c < 100, lambda c: c * 3, np.int64(1)),
                np.int64(243))
    assert_same(lax.map(np.sum, xs), xs.sum(axis=1))


def test_checking_modes_run_loops(backend):
    """``check=True`` compares each loop result with the reference interpreter; with
    ``check='nan'`` a NaN made inside a body is reported at the loop's line."""
    from tracejit.errors import NonFiniteValue

    fn = lambda L, W, xs: (rnn(L, np.zeros(3), xs, W),  # noqa: E731
                           L.while_loop(lambda c: c[0] < 3,
                                        lambda c: (c[0] + 1, np.sin(c[1] @ W)), (0, xs)))
    args = (data(3, 3), data(4, 3))
    for mode in (True, "nan"):
        got = tj.jit(lambda *a: fn(lax, *a), backend=backend, check=mode)(*args)
        assert_same(got, fn(NP, *args), None if exact(backend) else 10.0)
    log = tj.jit(lambda xs: lax.scan(lambda h, x: (np.log(h + x), h), np.zeros(3), xs),
                 backend=backend, check="nan")
    raises_here(NonFiniteValue, log, -np.ones((4, 3)))


# ---------------------------------------------------------------- Theano's tutorial


def newton_sqrt(L, a):
    def body(c):
        x, _ = c
        return (x + a / x) / 2, x

    return L.while_loop(lambda c: np.abs(c[0] - c[1]) > 1e-12, body, (a, a + 1.0))[0]


def test_newton_sqrt_with_while_loop(backend):
    a = np.array([2.0, 9.0, 0.25, 1e4])
    got = same(newton_sqrt, a.max(), backend=backend)
    np.testing.assert_allclose(got, np.sqrt(a.max()), rtol=1e-15)


def test_fori_loop_with_a_traced_bound(backend):
    """``A ** k`` by repeated multiplication with ``k`` an argument: new ``k`` compile
    nothing."""
    f = tj.jit(lambda A, k: lax.fori_loop(0, k, lambda i, r: r * A, np.ones_like(A)),
               backend=backend)
    A = data(5)
    for k in (0, 1, 3, 7):
        assert_same(f(A, k), NP.fori_loop(0, k, lambda i, r: r * A, np.ones_like(A)))
    assert f.cache_info().misses == 1


def test_fori_body_indexing_with_i(backend):
    """``xs[i]``, ``xs[-i]``, ``xs[i, i % 3]`` with the loop index, static and traced
    bounds; an index out of range raises NumPy's IndexError when the loop runs."""
    xs = data(4, 3)
    for pick, bad in ((lambda xs, i: xs[i], 5), (lambda xs, i: xs[-i], 6),  # xs[-5]
                      (lambda xs, i: xs[i, i % 3], 5)):
        def fn(L, xs, n, p=pick):
            return L.fori_loop(0, n, lambda i, v: v * 0.5 + p(xs, i), np.zeros(3))

        want = fn(NP, xs, 4)
        got = tj.jit(lambda xs, n: fn(lax, xs, n), backend=backend)
        assert_same(got(xs, 4), want)
        assert_same(tj.jit(lambda xs: fn(lax, xs, 4), backend=backend)(xs), want)
        with pytest.raises(IndexError):
            fn(NP, xs, bad)
        with pytest.raises(IndexError):
            got(xs, bad)
    check_grad(lambda L, xs: L.fori_loop(0, 4, lambda i, v: np.sin(v) + xs[i] * i, xs[0]).sum(),
               xs, backend=backend)


def test_polynomial_evaluation(backend):
    def fn(L, coefficients, x):
        terms = L.map(lambda cp: cp[0] * x ** cp[1],
                      (coefficients, np.arange(len(coefficients), dtype=np.float64)))
        horner, _ = L.scan(lambda acc, c: (acc * x + c, None), 0.0, coefficients[::-1])
        return terms.sum(), horner

    got, horner = same(fn, np.array([1.0, 0.0, 2.0]), np.float64(3.0), backend=backend)
    assert got == 19.0 and horner == 19.0


# ---------------------------------------------------------------- gradients


def loss_scan(L, W, h0, xs, b):
    h, ys = rnn(L, h0, xs, W)
    return (h ** 2).sum() + (ys * b).sum()


@pytest.mark.parametrize("inside_jit", [False, True])
def test_grad_scan_consts_init_xs_ys(inside_jit, backend):
    check_grad(loss_scan, data(3, 3), data(3), data(4, 3), data(4), argnums=(0, 1, 2, 3),
               backend=backend, inside_jit=inside_jit)


def test_grad_reverse_scan_and_pytree_carry(backend):
    def fn(L, a, xs):
        def step(c, x):
            u, (v, k) = c
            return (u * np.cos(x) + v, (v * a, k + 1)), u * x * k

        (u, (v, _)), ys = L.scan(step, (a * a, (a, 1)), xs, reverse=True)
        return u.sum() + v.sum() + ys.sum()

    check_grad(fn, data(2), data(3, 2), argnums=(0, 1), backend=backend)


def test_grad_fori_loop_static_bounds(backend):
    check_grad(lambda L, w, v: L.fori_loop(1, 4, lambda i, v: np.sin(v * w) * i, v).sum(),
               data(2), data(2), argnums=(0, 1), backend=backend)


def test_grad_map(backend):
    check_grad(lambda L, xs, W: L.map(lambda r: np.tanh(W @ r), xs).sum(), data(4, 3),
               data(3, 3), argnums=(0, 1), backend=backend)


def test_grad_of_grad_scan(backend):
    """``grad(grad(...))`` through a scan against differences of the first gradient."""
    def f(L, w):
        return L.scan(lambda c, x: (np.sin(c * w + x), c), 0.5, np.arange(3.0))[0]

    g1 = tj.grad(lambda w: f(lax, w), backend=backend)
    g2 = tj.grad(g1, backend=backend)
    for w in (0.3, 1.7):
        np.testing.assert_allclose(g1(w), fd_grad(lambda w: f(NP, w), [w], [0])[0],
                                   rtol=1e-6)
        np.testing.assert_allclose(g2(w), fd_grad(g1, [w], [0], eps=1e-5)[0], rtol=1e-5)


def test_grad_with_integer_carries_and_unused_index(backend):
    def fn(L, w):
        (n, v), ks = L.scan(lambda c, _: ((c[0] + 1, c[1] * w + c[0]), c[0] * 2), (0, 1.0),
                            None, length=4)
        return v * n + ks.sum()

    check_grad(fn, 1.3, backend=backend)
    check_grad(lambda L, w: L.fori_loop(0, 3, lambda i, v: v * w, 1.0), 1.5, backend=backend)


def test_grad_of_bodies_passing_values_through(backend):
    """Body outputs that are its inputs: the carry unchanged, the slice as the next carry,
    a closed-over argument as a y."""
    def fn(L, c, xs, W):
        k, ys = L.scan(lambda k, x: (k, (x, W, k * x)), c, xs)
        d, zs = L.scan(lambda d, x: (x, d), c, xs)
        return (k * 3).sum() + (ys[0] ** 2).sum() + (ys[1] * ys[2].sum()).sum() \
            + (d * zs.sum()).sum()

    check_grad(fn, data(2), data(3, 2), data(2), argnums=(0, 1, 2), backend=backend)


def test_grad_of_nested_loops(backend):
    def nested(L, xs, W):
        def outer(h, row):
            inner, ys = L.scan(lambda a, r: (np.sin(a * W + r), a.sum()), h, row)
            return inner * 0.5, ys

        h, ys = L.scan(outer, np.ones(3), xs)
        return (h ** 2).sum() + (ys ** 2).sum()

    def fori_in_scan(L, w, xs):
        return L.scan(lambda c, x: (L.fori_loop(0, 2, lambda i, v: np.cos(v * w) + x, c), c),
                      0.3, xs)[1].sum()

    check_grad(nested, data(4, 2, 3), data(3), argnums=(0, 1), backend=backend)
    check_grad(fori_in_scan, 0.7, data(3), argnums=(0, 1), backend=backend)


def test_grad_inside_a_body_and_through_it(backend):
    """Gradient descent in a fori_loop (``grad`` in the body), and the gradient of its final
    loss with respect to the learning rate (through the body's gradient)."""
    def descend(L, lr, w0, target):
        step = (lambda w: 2 * (w - target)) if L is NP else \
            tj.grad(lambda w: ((w - target) ** 2).sum())
        w = L.fori_loop(0, 4, lambda i, w: w - lr * step(w), w0)
        return (np.sin(w) ** 2).sum()

    args = (0.1, np.zeros(2), np.array([3.0, -1.0]))
    same(descend, *args, backend=backend)
    check_grad(descend, *args, argnums=(0, 1, 2), backend=backend)


def test_jacobian_and_vjp_of_a_scan():
    def f(L, w):
        return L.scan(lambda c, x: (c * w + x, c), np.ones(2), np.ones((3, 2)))[1].ravel()

    w = np.array([0.5, 2.0])
    want = np.stack([fd_grad(lambda w, k=k: f(NP, w)[k], [w], [0])[0] for k in range(6)])
    np.testing.assert_allclose(tj.jacobian(lambda w: f(lax, w))(w), want, atol=1e-7)
    out, pull = tj.vjp(lambda w: f(lax, w), w)
    assert_same(out, f(NP, w))
    np.testing.assert_allclose(pull(np.arange(6.0))[0], np.arange(6.0) @ want, atol=1e-7)


def test_grad_of_grad_of_nested_loops_on_python_scalar_carries(backend):
    """Python-float carries (weakly typed) read by inner loops: the backward pass re-runs
    the bodies on per-step arrays (strong), inner loops retyped to match."""
    xs, xs2 = np.arange(3.0), np.arange(2.0)

    def inner_scan(L, w):
        return L.scan(lambda c, x: (c * w, L.scan(lambda a, y: (a + c * y, None), 0.0,
                                                  xs2)[0]), 1.0, xs)[1].sum()

    def inner_fori(L, w):
        return L.scan(lambda c, x: (c * w, L.fori_loop(0, 2, lambda i, a: a + c * i, 0.0)
                                    * w), 1.0, xs)[1].sum()

    for fn in (inner_scan, inner_fori):
        g1 = tj.grad(lambda w, f=fn: f(lax, w), backend=backend)
        np.testing.assert_allclose(g1(1.5), fd_grad(lambda w, f=fn: f(NP, w), [1.5], [0])[0],
                                   rtol=1e-6)
        np.testing.assert_allclose(tj.grad(g1, backend=backend)(1.5),
                                   fd_grad(g1, [1.5], [0], eps=1e-5)[0], rtol=1e-5)


def test_grad_loop_without_float_inputs(backend):
    """A loop of integers only inside grad: no gradient flows through it."""
    check_grad(lambda L, w: w * L.scan(lambda c, _: (c + 1, c), 0, None, length=3)[0]
               + L.while_loop(lambda c: c < 5, lambda c: c + 2, 0), 1.5, backend=backend)


def test_grad_through_a_complex_carry(backend):
    """Complex carries differentiate as complex values do outside loops (JAX's cotangent
    convention, ad/complex_rules.py); a complex max in the body is refused, as outside."""
    check_grad(lambda L, w: L.scan(
        lambda c, x: ((c[0] * (w + 1j), c[1] + np.abs(c[0])), None), (1 + 0j, 0.0), None,
        length=3)[0][1], 0.5, backend=backend)
    check_grad(lambda L, w: np.abs(L.scan(
        lambda c, x: (c * np.exp(1j * w * x) + x, np.real(c)), 1 + 0j, np.arange(4.0))[1]).sum(),
        0.5, backend=backend)
    raises_here(UnsupportedOperation, tj.grad(lambda w: lax.scan(
        lambda c, x: (np.maximum(c * (w + 1j), 1j), None), 1 + 0j, None, length=3)[0].real),
        0.5, match="maximum of complex")
    # a complex carry that does not depend on w is no obstacle
    check_grad(lambda L, w: L.scan(lambda c, x: ((c[0] * w, c[1] * 1j), None),
                                   (1.0, 1 + 0j), None, length=3)[0][0], 0.5,
               backend="reference")


def test_loop_inside_grad_not_differentiated(backend):
    """A while_loop computing a value that does not depend on the differentiated argument
    is fine inside grad."""
    check_grad(lambda L, w, a: w * newton_sqrt(L, a), 1.5, 2.0, backend=backend)


# ---------------------------------------------------------------- drawn bodies

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Building blocks of a body over the carry h (n,), the slice x (n,) and W (n, n).
TERMS = [
    lambda h, x, W: h * x,
    lambda h, x, W: h + x,
    lambda h, x, W: h @ W,
    lambda h, x, W: W @ x,
    lambda h, x, W: np.sin(h) - x.max(),
    lambda h, x, W: h - h.sum() / h.size,
    lambda h, x, W: np.maximum(h, x) * 0.5,
    lambda h, x, W: (h[:, None] * W).sum(axis=0),
    lambda h, x, W: np.exp(-h * h) * x.mean(),
]


def drawn_body(terms):
    def step(h, x, W):
        new = h
        for k in terms:
            new = new + TERMS[k](new, x, W)
        return np.tanh(new), new.sum() * x

    return step


@SETTINGS
@given(terms=st.lists(st.integers(0, len(TERMS) - 1), min_size=1, max_size=4),
       n=st.sampled_from([1, 2, 3, 3]), steps=st.integers(1, 5), reverse=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2 ** 16))
def test_drawn_bodies(terms, n, steps, reverse, dtype, seed):
    """Elementwise, reductions and matmuls over the carry and x slices: tracejit.lax on
    every backend against a float64 NumPy loop of the same body."""
    rng = np.random.default_rng(seed)
    h0, xs, W = (rng.uniform(-1, 1, s).astype(dtype) for s in ((n,), (steps, n), (n, n)))
    step = drawn_body(terms)

    def fn(L, h0, xs, W):
        return L.scan(lambda h, x: step(h, x, W), h0, xs, reverse=reverse)

    want = fn(NP, *(a.astype(np.float64) for a in (h0, xs, W)))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for backend in tj.available_backends():
        if backend not in ("reference", "cpu"):
            continue
        got = tj.jit(lambda *a: fn(lax, *a), backend=backend)(h0, xs, W)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@settings(SETTINGS, max_examples=6)
@given(terms=st.lists(st.integers(0, len(TERMS) - 1), min_size=1, max_size=3),
       n=st.sampled_from([1, 2, 3]), steps=st.integers(1, 4), seed=st.integers(0, 2 ** 16))
def test_drawn_body_gradients(terms, n, steps, seed):
    rng = np.random.default_rng(seed)
    h0, xs, W = (rng.uniform(-1, 1, s) for s in ((n,), (steps, n), (n, n)))
    step = drawn_body(terms)

    def loss(L, h0, xs, W):
        h, ys = L.scan(lambda h, x: step(h, x, W), h0, xs)
        return (h * h).sum() + np.sin(ys).sum()

    # np.maximum's kink: a tie between h and x has no derivative
    check_grad(loss, h0, xs, W, argnums=(0, 1, 2), backend="reference", rtol=1e-5,
               atol=1e-7)


@SETTINGS
@given(terms=st.lists(st.integers(0, len(TERMS) - 1), min_size=1, max_size=3),
       n=st.sampled_from([1, 2, 3]), steps=st.integers(0, 4), seed=st.integers(0, 2 ** 16))
def test_drawn_while_and_fori_bodies(terms, n, steps, seed):
    """The same bodies in a fori_loop with a traced bound indexing xs[i], and in a
    while_loop counting its steps in the carry."""
    rng = np.random.default_rng(seed)
    h0, xs, W = (rng.uniform(-1, 1, s) for s in ((n,), (4, n), (n, n)))
    step = drawn_body(terms)

    def fori(L, h0, xs, W, k):
        return L.fori_loop(0, k, lambda i, h: step(h, xs[i], W)[0], h0)

    def while_(L, h0, xs, W, k):
        def body(c):
            i, h = c
            return i + 1, step(h, xs[i], W)[0]

        return L.while_loop(lambda c: c[0] < k, body, (0, h0))

    for fn in (fori, while_):
        want = fn(NP, h0, xs, W, steps)
        for backend in ("reference", "cpu"):
            got = tj.jit(lambda *a, f=fn: f(lax, *a), backend=backend)(h0, xs, W, steps)
            assert_same(got, want, None if exact(backend) else 10.0)


# ---------------------------------------------------------------- errors


def raises_here(exc, fn, *args, match=None):
    """``fn(*args)`` raises ``exc`` whose message names this file's line."""
    with pytest.raises(exc, match=match) as info:
        fn(*args)
    assert "test_loops.py:" in str(info.value), str(info.value)
    return str(info.value)


X = data(3, 2)


def test_error_carry_shape_changes():
    msg = raises_here(LoopError, tj.jit(lambda x: lax.scan(
        lambda c, r: (np.concatenate([c, r]), None), x[0], x)), X)
    assert "carry is f64[2] before a step and f64[4] after it" in msg


def test_error_carry_dtype_changes_names_the_leaf():
    msg = raises_here(LoopError, tj.jit(lambda x: lax.scan(
        lambda c, r: ({"a": c["a"], "b": c["b"] + r}, None),
        {"a": x[0], "b": x[0].astype(np.int32)}, x)), X)
    assert "carry['b'] is i32[2] before a step and f64[2] after it" in msg
    msg = raises_here(LoopError, tj.jit(lambda x: lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.5), (0, np.int64(4)))), X)
    assert "carry[1] is i64[] before a step and f64[] after it" in msg


def test_python_scalar_returned_as_the_carry():
    """A Python scalar the body returns takes the carry's dtype where NumPy's promotion
    keeps it (0 or 1.5 for a float32 carry); a float for an integer carry, or a NumPy
    float64, changes the carry's type."""
    f = tj.jit(lambda x: lax.scan(lambda c, r: (1.5, c), x[0], x))
    assert_same(f(np.arange(2.0, 5.0, dtype=np.float32)),
                (np.float32(1.5), np.array([2.0, 1.5, 1.5], np.float32)))
    assert tj.jit(lambda: lax.fori_loop(0, 2, lambda i, v: 0, np.int8(5)))().dtype == np.int8
    same(lambda L, x: L.scan(lambda c, r: (np.zeros(2, np.float32), c), x[:2], x),
         np.ones(3, np.float32), backend="reference")  # a NumPy array as the next carry
    for body, before, after in ((lambda c, r: (1.5, c), "i32[]", "f64[]~"),
                                (lambda c, r: (np.float64(0), c), "i32[]", "f64[]")):
        msg = raises_here(LoopError, tj.jit(lambda x, b=body: lax.scan(b, np.int32(1), x)), X)
        assert f"carry is {before} before a step and {after} after it" in msg


def test_error_carry_structure():
    raises_here(LoopError, tj.jit(lambda x: lax.scan(lambda c, r: ((c, c), None), x[0], x)),
                X, match="another structure")
    raises_here(LoopError, tj.jit(lambda x: lax.scan(lambda c, r: c, x[0], x)), X,
                match="pair")
    raises_here(LoopError, tj.jit(lambda x: lax.fori_loop(0, 2, lambda i, v: [v], x)),
                X, match="another structure")


def test_error_scanned_lengths():
    raises_here(LoopError, tj.jit(lambda x: lax.scan(lambda c, r: (c, None), 0.0, (x, x[:2]))),
                X, match=r"different lengths \[2, 3\]")
    raises_here(LoopError, tj.jit(lambda x: lax.scan(lambda c, r: (c, None), 0.0, x,
                                                     length=5)), X, match="different lengths")
    raises_here(LoopError, tj.jit(lambda x: lax.scan(lambda c, r: (c, None), 0.0, x[0, 0])),
                X, match="scalar")
    raises_here(LoopError, tj.jit(lambda x: lax.scan(lambda c, r: (c, None), 0.0, None)),
                X, match="nothing to scan over")
    for length in (-1, 2.5):
        raises_here(LoopError, tj.jit(lambda x, n=length: lax.scan(
            lambda c, r: (c, None), 0.0, None, length=n)), X, match="Python int >= 0")


def test_error_leaked_tracer_of_another_trace():
    leaked = []
    tj.jit(lambda x: leaked.append(x) or x)(X)
    body = lambda c, r: (c + leaked[0][0], None)  # noqa: E731
    raises_here(LoopError, tj.jit(lambda x: lax.scan(body, x[0], x)), X,
                match="traced value of another trace")
    raises_here(LoopError, lax.scan, body, X[0], X, match="traced value of another trace")


def test_error_random_draw_in_body():
    raises_here(UnsupportedOperation, tj.jit(lambda x: lax.scan(
        lambda c, r: (c + np.random.normal(size=2), None), x[0], x)), X, match="random draw")


def test_error_condition_not_a_bool_scalar():
    raises_here(LoopError, tj.jit(lambda x: lax.while_loop(
        lambda c: c.sum(), lambda c: c - 1, x[0])), X, match="not a boolean scalar")
    raises_here(LoopError, tj.jit(lambda x: lax.while_loop(
        lambda c: c > 0, lambda c: c - 1, x[0])), X, match="one boolean scalar")


def test_error_grad_of_while_and_traced_fori():
    msg = raises_here(UnsupportedOperation, tj.grad(lambda w: lax.while_loop(
        lambda c: c < 10, lambda c: c * w, 1.0)), 1.5)
    assert "reverse-mode gradient of a while_loop" in msg
    raises_here(UnsupportedOperation, tj.grad(lambda w, n: lax.fori_loop(
        0, n, lambda i, v: v * w, 1.0)), 1.5, 3, match="fori_loop with traced bounds")


def test_error_body_writes_into_an_outer_array():
    def through(write):
        def fn(W, x):
            def body(c, r):
                write(W, r)
                return c + W.sum(), None

            return lax.scan(body, 0.0, x)

        return tj.jit(fn)

    for write in (lambda W, r: W.__setitem__(0, r), lambda W, r: W[0].__iadd__(r),
                  lambda W, r: np.add(W, 1, out=W), lambda W, r: W[1:].fill(2.0)):
        raises_here(LoopError, through(write), X.copy(), X,
                    match="writes in place into an array from outside the loop")


def test_body_reads_arrays_written_before_and_after_the_loop(backend):
    """A body reads the versions current when the loop runs, views included."""
    def fn(L, W, xs):
        W = W.copy()
        V = W[1:]
        W[1] = 5.0
        c, ys = L.scan(lambda c, x: (c + V.sum() * x, W[0] + c), 0.0, xs)
        W[0] = 7.0
        return c, ys, W, V

    same(fn, np.arange(3.0), np.arange(4.0), backend=backend)


def test_a_body_may_write_into_its_own_arrays(backend):
    def fn(L, x):
        def body(c, r):
            c = c.copy()
            c[0] = r[1]
            tmp = np.zeros(3)
            tmp[1:] = r
            return c, tmp

        return L.scan(body, x[0], x)

    same(fn, X, backend=backend)



def test_verifier_checks_loop_outputs_and_conditions():
    from tracejit.errors import IRError
    from tracejit.ir import Graph, Node, TensorType, Value, verify

    graph = tj.jit(lambda x: lax.scan(lambda c, r: (c + r, c.sum()), x[0], x)).lower(X).graph
    out = next(n for n in graph.nodes if n.op == "loop_output" and n.attrs["index"] == 1)
    wrong = TensorType((3,), np.dtype(np.float32))
    bad = Node("loop_output", out.inputs, {**out.attrs, "type": wrong}, Value(wrong), out.loc)
    nodes = [bad if n is out else n for n in graph.nodes]
    with pytest.raises(IRError, match="says result 1 is f32"):
        verify(Graph(graph.inputs, nodes, [bad.out], "g"))
    graph = tj.jit(lambda x: lax.while_loop(lambda c: c.sum() < 9, lambda c: c + 1, x)).lower(
        X).graph
    node = next(n for n in graph.nodes if n.op == "while_loop")
    loop = node.attrs["loop"]
    # a condition giving its carry back (a float array) instead of a bool scalar
    cond = Graph(loop.cond.inputs, [], [loop.cond.inputs[-1]], "cond")
    swapped = Node("while_loop", node.inputs, {"loop": type(loop)(cond, loop.body,
                                                                  loop.n_consts)},
                   Value(node.out.type), node.loc)
    before = graph.nodes[:graph.nodes.index(node)]
    with pytest.raises(IRError, match="not one bool scalar"):
        verify(Graph(graph.inputs, [*before, swapped], [], "g"))
