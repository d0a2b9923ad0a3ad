"""grad, value_and_grad, vjp and jacobian: composition, pytrees, edges, errors, registry.

Values are checked against hand-derived gradients (finite differences of every rule are in
test_grad_fd.py). Tests taking the ``backend`` fixture run compiled on the CPU backend too;
they are few, since each compiles Numba kernels.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import tracejit as tj
from tracejit.ad.backward import LOOPS, WALK_RULES
from tracejit.ad.rules import NON_DIFFERENTIABLE, VJP, ZERO_GRADIENT
from tracejit.errors import DTypeError, InvalidArgument, ShapeError, UnsupportedOperation
from tracejit.ir import REGISTRY, Kind

R = "reference"


def test_every_registry_op_has_a_rule_or_a_mark():
    marked = NON_DIFFERENTIABLE | ZERO_GRADIENT
    placed = {n for n, d in REGISTRY.items() if d.kind is Kind.TRANSFER}  # after autodiff
    walked = LOOPS | WALK_RULES  # the reverse walk differentiates loops (or refuses to)
    missing = set(REGISTRY) - set(VJP) - marked - placed - walked
    assert not missing, f"ops with neither a VJP rule nor a non-differentiable mark: {missing}"
    assert not set(VJP) & marked, "an op is both differentiable and marked"
    assert not NON_DIFFERENTIABLE & ZERO_GRADIENT
    assert set(VJP) | marked <= set(REGISTRY), "rules for ops the registry does not have"


# ---------------------------------------------------------------- the tutorial network


def _loss(p, X, Y, lam=0.01):
    a1 = np.tanh(X @ p["W1"] + p["b1"])
    z = a1 @ p["W2"] + p["b2"]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    reg = lam / 2 * (np.sum(p["W1"] ** 2) + np.sum(p["W2"] ** 2))
    return -np.sum(Y * logp) / X.shape[0] + reg


def _backprop(p, X, Y, lam=0.01):
    a1 = np.tanh(X @ p["W1"] + p["b1"])
    z = a1 @ p["W2"] + p["b2"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    d2 = (e / e.sum(axis=1, keepdims=True) - Y) / X.shape[0]
    d1 = d2 @ p["W2"].T * (1 - a1 ** 2)
    return {"W1": X.T @ d1 + lam * p["W1"], "b1": d1.sum(0),
            "W2": a1.T @ d2 + lam * p["W2"], "b2": d2.sum(0)}


def _network(dtype=np.float64, n=40, hidden=8):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2)).astype(dtype)
    Y = np.eye(2, dtype=dtype)[rng.integers(0, 2, n)]
    p = {"W1": (rng.standard_normal((2, hidden)) / np.sqrt(2)).astype(dtype),
         "b1": np.zeros(hidden, dtype),
         "W2": (rng.standard_normal((hidden, 2)) / np.sqrt(hidden)).astype(dtype),
         "b2": np.zeros(2, dtype)}
    return p, X, Y


def test_network_gradient_and_jitted_step(backend):
    p, X, Y = _network()
    g = tj.grad(_loss, backend=backend)
    got, want = g(p, X, Y), _backprop(p, X, Y)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-15)
        assert got[k].dtype == np.float64 and got[k].shape == p[k].shape
    g(p, X, Y)
    assert g.cache_info() == (1, 1, 1)

    @tj.jit(backend=backend)
    def step(p, X, Y):
        loss, grads = tj.value_and_grad(_loss)(p, X, Y)
        return loss, {k: p[k] - 0.01 * grads[k] for k in p}

    q = p
    for _ in range(3):
        loss, q_next = step(q, X, Y)
        assert np.isclose(loss, _loss(q, X, Y), rtol=1e-12)
        manual = _backprop(q, X, Y)
        for k in q:
            np.testing.assert_allclose(q_next[k], q[k] - 0.01 * manual[k], rtol=1e-12,
                                       atol=1e-15)
        q = q_next
    assert step.cache_info().misses == 1


def test_backward_graph_is_fused_and_compiled():
    p, X, Y = _network(np.float32)
    low = tj.grad(_loss, backend="cpu").lower(p, X, Y)
    assert "@cfunc" in low.source  # loop kernels, not one NumPy call per node
    text = low.optimized_ir
    assert text.count("matmul(") == 5  # two forward, three backward (dW1, dW2, d a1)


# ---------------------------------------------------------------- composition


def test_grad_of_jit_and_jit_of_grad():
    @tj.jit(backend=R)
    def f(x):
        return np.sum(np.sin(x) * x)

    x = np.linspace(-1, 1, 5)
    want = np.cos(x) * x + np.sin(x)
    np.testing.assert_allclose(tj.grad(f, backend=R)(x), want, rtol=1e-14)
    np.testing.assert_allclose(tj.jit(tj.grad(f), backend=R)(x), want, rtol=1e-14)
    np.testing.assert_allclose(tj.jit(tj.grad(lambda x: f(x)), backend=R)(x), want, rtol=1e-14)


def test_higher_order():
    d = tj.grad
    x = 0.7
    assert np.isclose(d(d(lambda x: x ** 3), backend=R)(x), 6 * x)
    assert np.isclose(d(d(d(lambda x: x ** 3)), backend=R)(x), 6.0)
    assert np.isclose(d(d(np.sin), backend=R)(x), -np.sin(x))
    assert np.isclose(d(d(d(d(np.exp))), backend=R)(x), np.exp(x))
    # a Hessian of a non-quadratic function, row by row through jacobian of grad
    A = np.array([[2.0, 1.0], [0.5, 3.0]])
    v = np.array([0.3, -0.4])
    h = tj.jacobian(tj.grad(lambda v: np.sum(np.exp(A @ v))), backend=R)(v)
    np.testing.assert_allclose(h, A.T @ np.diag(np.exp(A @ v)) @ A, rtol=1e-13)


def test_closures():
    W = np.array([[1.0, 2.0], [3.0, 4.0]])  # a NumPy array: a constant of the trace
    x = np.array([0.5, -0.5])
    g = tj.grad(lambda x: np.sum(np.tanh(W @ x)), backend=R)
    np.testing.assert_allclose(g(x), W.T @ (1 - np.tanh(W @ x) ** 2), rtol=1e-14)

    @tj.jit(backend=R)
    def inner_grad(W, x):  # the gradient closes over a value of the enclosing trace
        return tj.grad(lambda x: np.sum(np.tanh(W @ x)))(x)

    np.testing.assert_allclose(inner_grad(W, x), g(x), rtol=1e-14)

    # the mixed partial d/dW <grad_x f(W, x), u>: W flows through the inner backward pass
    u = np.array([1.0, 2.0])
    mixed = tj.grad(lambda W: np.sum(tj.grad(lambda x: np.sum(W @ x * (W @ x)))(x) * u),
                    backend=R)(W)
    # f = |Wx|^2, grad_x = 2 W^T W x, <., u> = 2 u^T W^T W x, d/dW = 2 (W u x^T + W x u^T)
    np.testing.assert_allclose(mixed, 2 * (np.outer(W @ u, x) + np.outer(W @ x, u)),
                               rtol=1e-14)


def test_no_perturbation_confusion():
    # d/dx [d/dy (x * y)] at y = x is d/dx x = 1, not 2
    assert tj.grad(lambda x: tj.grad(lambda y: x * y)(x), backend=R)(3.0) == 1.0
    # the same array passed twice is two arguments
    g = tj.grad(lambda a, b: np.sum(a * b), argnums=0, backend=R)
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(g(x, x), x)


# ---------------------------------------------------------------- arguments and outputs


def test_pytrees_and_argnums():
    P = namedtuple("P", "w b")

    def f(p, xs, scale):
        return np.sum(p.w * xs[0] + p.b * xs[1]["k"]) * scale

    p = P(np.array([1.0, 2.0]), 2.0)
    xs = [np.array([3.0, 4.0]), {"k": np.array([5.0, 6.0])}]
    gp = tj.grad(f, backend=R)(p, xs, 2.0)
    assert isinstance(gp, P)
    np.testing.assert_array_equal(gp.w, [6.0, 8.0])
    assert gp.b == 22.0 and isinstance(gp.b, np.float64)  # a Python float gets a float64
    gp, gxs, gs = tj.grad(f, argnums=(0, 1, -1), backend=R)(p, xs, 2.0)
    assert isinstance(gxs, list) and set(gxs[1]) == {"k"}
    np.testing.assert_array_equal(gxs[0], [2.0, 4.0])
    np.testing.assert_array_equal(gxs[1]["k"], [4.0, 4.0])
    assert gs == 11.0 + 22.0
    # keyword arguments are passed through, not differentiated
    assert tj.grad(lambda x, *, k: x * k, backend=R)(2.0, k=3.0) == 3.0


def test_has_aux_and_value_and_grad():
    def f(x):
        return np.sum(x ** 2), {"mean": x.mean(), "n": x.shape[0]}

    x = np.array([1.0, 2.0, 3.0])
    g, aux = tj.grad(f, has_aux=True, backend=R)(x)
    np.testing.assert_array_equal(g, 2 * x)
    assert aux["mean"] == 2.0 and aux["n"] == 3
    (value, aux), g = tj.value_and_grad(f, has_aux=True, backend=R)(x)
    assert value == 14.0 and aux["mean"] == 2.0
    value, (ga, gb) = tj.value_and_grad(lambda a, b: np.sum(a * b), argnums=(0, 1),
                                        backend=R)(x, 2 * x)
    assert value == 28.0
    np.testing.assert_array_equal(ga, 2 * x)
    np.testing.assert_array_equal(gb, x)


def test_dtypes_follow_the_inputs():
    x32 = np.array([1.0, -2.0], np.float32)
    g = tj.grad(lambda x: np.sum(x.astype(np.float64) ** 3), backend=R)(x32)
    assert g.dtype == np.float32  # a cast's gradient is cast back
    np.testing.assert_array_equal(g, 3 * x32 ** 2)
    ga, gb = tj.grad(lambda a, b: np.sum(a * b), argnums=(0, 1), backend=R)(
        x32, np.array([3.0, 4.0]))
    assert ga.dtype == np.float32 and gb.dtype == np.float64
    # an integer intermediate carries no gradient; an integer operand is a constant
    g = tj.grad(lambda x, i: np.sum(x * i + x.astype(np.int64)), backend=R)(
        np.array([1.5, 2.5]), np.array([2, 3]))
    np.testing.assert_array_equal(g, [2.0, 3.0])
    assert tj.grad(lambda x: 1.0, backend=R)(np.ones(2)).tolist() == [0.0, 0.0]


def test_piecewise_constant_ops_have_zero_gradient():
    x = np.array([0.3, 1.7, -2.2])

    def f(x):
        return np.sum(np.floor(x) + np.ceil(x) + np.trunc(x) + np.rint(x) + np.sign(x)
                      + x // 0.5 + np.where(x > 0, 1.0, 0.0) + np.argmax(x))

    np.testing.assert_array_equal(tj.grad(f, backend=R)(x), np.zeros(3))


# ---------------------------------------------------------------- ties and domain edges


def test_documented_ties_and_edges():
    g = lambda f: tj.grad(f, backend=R)  # noqa: E731
    np.testing.assert_array_equal(g(lambda x: x.max())(np.array([1.0, 3.0, 3.0])),
                                  [0.0, 0.5, 0.5])
    np.testing.assert_array_equal(g(lambda x: np.min(x, axis=0).sum())(
        np.array([[1.0, 2.0], [1.0, 0.0]])), [[0.5, 0.0], [0.5, 1.0]])
    assert tj.grad(np.maximum, argnums=(0, 1), backend=R)(1.0, 1.0) == (0.5, 0.5)
    assert tj.grad(np.fmin, argnums=(0, 1), backend=R)(np.nan, 1.0) == (0.0, 1.0)
    assert tj.grad(np.maximum, argnums=(0, 1), backend=R)(np.nan, 1.0) == (1.0, 0.0)
    # clip is maximum then minimum: at a bound the gradient is split with the bound
    assert tj.grad(lambda x, lo: np.clip(x, lo, 2.0), argnums=(0, 1), backend=R)(
        1.0, 1.0) == (0.5, 0.5)
    assert g(lambda x: np.clip(x, -1.0, 1.0))(3.0) == 0.0
    assert g(np.abs)(0.0) == 0.0
    np.testing.assert_array_equal(g(np.prod)(np.array([0.0, 2.0, 3.0])), [6.0, 0.0, 0.0])
    np.testing.assert_array_equal(g(np.prod)(np.array([0.0, 2.0, 0.0])), [0.0, 0.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        assert g(np.sqrt)(0.0) == np.inf
        assert g(np.log)(0.0) == np.inf
        assert g(np.arcsin)(1.0) == np.inf
        assert g(np.arccosh)(1.0) == np.inf
        # where's untaken branch gets a zero cotangent, and 0 * inf is NaN, as in JAX
        assert np.isnan(g(lambda x: np.where(x > 0, np.sqrt(x), 0.0))(-1.0))
        assert g(lambda x: np.where(x > 0, np.sqrt(np.where(x > 0, x, 1.0)), 0.0))(-1.0) == 0
        assert g(lambda x: x ** 0.5)(0.0) == np.inf
    assert g(lambda x: np.power(x, 0.0))(0.0) == 0.0  # not 0 * 0**-1
    assert g(lambda y: np.power(0.0, y))(2.0) == 0.0  # not 0 * log(0)
    assert g(lambda x: x ** 3)(-2.0) == 12.0


def test_fmod_gradient_counts_whole_quotients(backend):
    """d fmod(x, y) / dy = -trunc(x / y). An explore run of test_grad_fd found the rule
    truncating (x - fmod(x, y)) / y, which the division left at -2.9999999999999996 here:
    the gradient was 2, not 3."""
    x, y = -1.4761451102948775, np.array([1.9197981809019713, 0.3286737961526606,
                                          0.4668173481756889])
    g = tj.grad(lambda y: np.sum(np.fmod(x, y)), backend=backend)(y)
    np.testing.assert_array_equal(g, -np.trunc(x / y))
    np.testing.assert_array_equal(g, [0.0, 4.0, 3.0])


def test_gather_gradient_accumulates_repeated_indices(backend):
    idx = np.array([[0, 2], [2, 2]])

    def f(x, i):
        return np.sum(x[i] * np.array([1.0, 2.0])) + np.sum(x[:, None][i[0], 0])

    x = np.array([0.5, 1.5, 2.5])
    got = tj.grad(f, backend=backend)(x, idx)
    np.testing.assert_array_equal(got, [1.0 + 1.0, 0.0, 2.0 + 1.0 + 2.0 + 1.0])


# ---------------------------------------------------------------- vjp and jacobian


def test_vjp():
    x = np.array([1.0, 2.0, 3.0])
    out, vjp_fn = tj.vjp(lambda x, y: (x * y, np.sum(x).astype(np.int64)), x, 2.0,
                         backend=R)
    np.testing.assert_array_equal(out[0], 2 * x)
    gx, gy = vjp_fn((np.array([1.0, 0.0, 1.0]), np.int64(0)))
    np.testing.assert_array_equal(gx, [2.0, 0.0, 2.0])
    assert gy == 4.0
    gx, _ = vjp_fn((np.ones(3), np.int64(0)))  # called again: same compiled code
    np.testing.assert_array_equal(gx, [2.0, 2.0, 2.0])

    @tj.jit(backend=R)
    def inside(x, ct):
        out, f = tj.vjp(np.sin, x)
        return out, f(ct)[0], f(2 * ct)[0]

    out, a, b = inside(x, np.ones(3))
    np.testing.assert_allclose(a, np.cos(x), rtol=1e-15)
    np.testing.assert_allclose(b, 2 * np.cos(x), rtol=1e-15)
    out, f, aux = tj.vjp(lambda x: (x * 3, x.sum()), x, has_aux=True, backend=R)
    assert aux == 6.0 and f(np.ones(3))[0].tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ShapeError, match=r"shape \(2,\)"):
        tj.vjp(np.sin, x, backend=R)[1](np.ones(2))
    with pytest.raises(InvalidArgument, match="structure"):
        tj.vjp(np.sin, x, backend=R)[1]((np.ones(3),))


def test_jacobian():
    A = np.arange(6.0).reshape(2, 3)
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_array_equal(tj.jacobian(lambda x: A @ x, backend=R)(x), A)
    J = tj.jacobian(lambda x, y: {"s": np.sin(x) * y, "t": np.sum(x)}, argnums=(0, 1),
                    backend=R)(x, 2.0)
    np.testing.assert_allclose(J["s"][0], np.diag(2 * np.cos(x)), rtol=1e-15)
    np.testing.assert_allclose(J["s"][1], np.sin(x), rtol=1e-15)
    assert J["t"][0].tolist() == [1.0, 1.0, 1.0] and J["t"][1] == 0.0
    M = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert tj.jacobian(lambda m: m.T, backend=R)(M).shape == (2, 2, 2, 2)
    with pytest.raises(UnsupportedOperation, match="2000 output elements"):
        tj.jacobian(lambda x: x * 2, backend=R)(np.ones(2000))
    with pytest.raises(DTypeError, match="int64"):
        tj.jacobian(lambda x: x.astype(np.int64), backend=R)(x)


# ---------------------------------------------------------------- errors


def _raises(exc, fn, *args, match):
    with pytest.raises(exc, match=match) as info:
        fn(*args)
    assert info.value.location is not None and info.value.location.filename == __file__
    return info.value


def test_errors_name_the_problem_and_the_line():
    x = np.ones(3)
    e = _raises(ShapeError, tj.grad(lambda x: x * 2, backend=R), x, match=r"shape \(3,\)")
    assert "f64[3]" in str(e) and "test_autodiff.py" in str(e)
    _raises(DTypeError, tj.grad(lambda x: (x > 0).sum(), backend=R), x, match="int64")
    _raises(DTypeError, tj.grad(lambda x: np.sum(x * 1.0), backend=R), np.ones(3, np.int32),
            match="'x': it has dtype int32")
    _raises(DTypeError, tj.grad(lambda b: np.sum(b * 1.0), backend=R), np.ones(2, bool),
            match="dtype bool")
    _raises(DTypeError, tj.grad(lambda p: p["a"].sum(), backend=R), {"a": np.ones(2, int)},
            match=r"'p\.a'")
    _raises(DTypeError, tj.grad(lambda z: np.abs(z), backend=R), 1j, match="complex")
    _raises(InvalidArgument, tj.grad(lambda x: x.sum(), argnums=1, backend=R), x,
            match="out of range")
    _raises(InvalidArgument, tj.grad(lambda x: x.sum(), has_aux=True, backend=R), x,
            match="pair")
    _raises(UnsupportedOperation, tj.grad(lambda x: np.abs(np.max(x.astype(np.complex128))),
                                          backend=R), x, match="max of complex")
    # inside an outer jit the error points at the same user line
    outer = tj.jit(lambda x: tj.grad(lambda x: x * 2)(x), backend=R)
    _raises(ShapeError, outer, x, match="scalar output")


def test_gradients_of_the_stable_forms(backend):
    """Autodiff differentiates what the stability rewrites make of the trace: the gradient of
    the cross-entropy of a softmax is (softmax - onehot) / n even for saturated logits, and
    the stable sigmoid has slope 1/4 at 0 (exp(-|x|) written with where, not abs)."""
    z = np.array([[1000.0, -1000.0], [0.5, 0.1], [-3.0, 40.0]])
    Y = np.eye(2)[[0, 1, 0]]

    def loss(z):
        return tj.nn.categorical_crossentropy(tj.nn.softmax(z), Y).mean()

    e = np.exp(z - z.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True) - Y) / 3
    value, g = tj.value_and_grad(loss, backend=backend)(z)
    assert np.isfinite(value)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-300)
    x = np.array([0.0, -0.0, 2.0, -30.0])
    s = 1 / (1 + np.exp(-x))
    for f in (lambda x: tj.nn.sigmoid(x).sum(), lambda x: (1 / (1 + np.exp(-x))).sum()):
        np.testing.assert_allclose(tj.grad(f, backend=backend)(x), s * (1 - s), rtol=1e-12)


def test_stop_gradient(backend):
    x = np.array([1.0, -2.0, 3.0])
    g = tj.grad(lambda x: np.sum(x * tj.stop_gradient(x)), backend=backend)(x)
    np.testing.assert_array_equal(g, x)  # d/dx of x * c, with c = x held constant
    out = tj.stop_gradient({"a": x, "b": (2.0,)})  # outside a trace: the values themselves
    assert out["a"] is x and out["b"] == (2.0,)
    f = tj.jit(lambda x: tj.grad(lambda y: np.sum(tj.stop_gradient(y) ** 2))(x),
               backend=backend)
    np.testing.assert_array_equal(f(x), np.zeros(3))
    assert "stop_gradient" not in tj.jit(lambda x: tj.stop_gradient(x) + 1,
                                         backend=backend).lower(x).optimized_ir
