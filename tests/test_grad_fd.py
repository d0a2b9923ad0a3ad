"""Finite-difference checks of every VJP rule, first and second order, in float64.

Each case is a small NumPy function of float64 inputs whose values hypothesis draws (shapes,
broadcasting, axes, slices) inside the function's smooth domain. The gradient of
``sum(fn(*xs) * w)`` (``w`` random, so every output element has its own cotangent) is
compared with central differences of the same NumPy function run eagerly; the
Hessian-vector product ``grad(<grad(F), v>)`` with central differences of the gradient
along ``v``. A test checks that the cases together exercise every op with a VJP rule.
Everything runs on the reference backend (no compiling); test_autodiff.py runs compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy_compare import numeric_grad

import tracejit as tj
from tracejit.ad.rules import VJP

SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RTOL, ATOL = 1e-5, 1e-7  # numeric_grad takes steps of 1e-6
HVP_EPS, HVP_RTOL, HVP_ATOL = 1e-5, 1e-4, 1e-6


@dataclass
class Case:
    """``fn(*xs)`` with ``xs[i]`` drawn uniformly from ``domains[i]`` (an interval, or a
    union of intervals away from a singularity). ``shapes``: "one" (any shape), "bcast"
    (mutually broadcastable), or a tuple of fixed shapes. ``smooth(*xs)`` rejects inputs
    within reach of a kink. ``ops``: the IR ops the case is there to cover."""

    fn: object
    domains: list
    shapes: object = "bcast"
    smooth: object = None
    ops: tuple = field(default_factory=tuple)


def _far(a, b, gap=1e-3):
    return np.all(np.abs(np.subtract(a, b)) > gap)


def _frac_ok(x, y):
    q = np.divide(x, y)
    return np.all(np.abs(q - np.rint(q)) > 1e-3)


def _distinct(x, gap=1e-3):
    """No two elements within ``gap`` (sorting is smooth only away from ties)."""
    s = np.sort(np.ravel(x))
    return bool(np.all(np.diff(s) > gap))


POS, UNIT, ANY = (0.5, 2.0), (-0.8, 0.8), (-2.0, 2.0)
NONZERO = [(-2.0, -0.3), (0.3, 2.0)]

UNARY = {
    "negative": (np.negative, ANY), "positive": (np.positive, ANY),
    "absolute": (np.abs, NONZERO), "square": (np.square, ANY), "sqrt": (np.sqrt, POS),
    "cbrt": (np.cbrt, NONZERO), "reciprocal": (np.reciprocal, NONZERO),
    "exp": (np.exp, ANY), "exp2": (np.exp2, ANY), "expm1": (np.expm1, ANY),
    "log": (np.log, POS), "log2": (np.log2, POS), "log10": (np.log10, POS),
    "log1p": (np.log1p, (-0.5, 2.0)), "sin": (np.sin, ANY), "cos": (np.cos, ANY),
    "tan": (np.tan, (-1.2, 1.2)), "arcsin": (np.arcsin, UNIT), "arccos": (np.arccos, UNIT),
    "arctan": (np.arctan, ANY), "sinh": (np.sinh, ANY), "cosh": (np.cosh, ANY),
    "tanh": (np.tanh, ANY), "arcsinh": (np.arcsinh, ANY), "arccosh": (np.arccosh, (1.2, 3.0)),
    "arctanh": (np.arctanh, UNIT),
    "fabs": (np.fabs, NONZERO), "degrees": (np.degrees, ANY), "radians": (np.radians, ANY),
    "deg2rad": (np.deg2rad, ANY), "rad2deg": (np.rad2deg, ANY),
    "conjugate": (np.conjugate, ANY),
}
BINARY = {
    "add": (np.add, ANY, ANY), "subtract": (np.subtract, ANY, ANY),
    "multiply": (np.multiply, ANY, ANY), "true_divide": (np.divide, ANY, NONZERO),
    "power": (np.power, POS, ANY), "arctan2": (np.arctan2, NONZERO, NONZERO),
    "hypot": (np.hypot, NONZERO, NONZERO), "logaddexp": (np.logaddexp, ANY, ANY),
    "logaddexp2": (np.logaddexp2, ANY, ANY),
    "float_power": (np.float_power, POS, ANY), "copysign": (np.copysign, ANY, NONZERO),
    "nextafter": (np.nextafter, ANY, ANY),
}
KINKED = {  # piecewise: away from ties and jumps
    "maximum": (np.maximum, _far), "minimum": (np.minimum, _far),
    "fmax": (np.fmax, _far), "fmin": (np.fmin, _far), "remainder": (np.remainder, _frac_ok),
    "fmod": (np.fmod, _frac_ok),
}

CASES: dict[str, Case] = {}
for _n, (_f, _d) in UNARY.items():
    CASES[_n] = Case(_f, [_d], "one", ops=(_n,))
for _n, (_f, _a, _b) in BINARY.items():
    CASES[_n] = Case(_f, [_a, _b], ops=(_n,))
for _n, (_f, _ok) in KINKED.items():
    CASES[_n] = Case(_f, [ANY, (0.3, 2.0) if _n in ("remainder", "fmod") else ANY], smooth=_ok,
                     ops=(_n,))
CASES.update({
    "power_int_exponent": Case(lambda x: x ** 3 + np.power(x, -2), [NONZERO], "one",
                               ops=("power",)),
    "clip": Case(lambda x, lo, hi: np.clip(x, lo, hi), [ANY, (-2.0, -0.5), (0.5, 2.0)],
                 smooth=lambda x, lo, hi: _far(x, lo) and _far(x, hi), ops=("clip",)),
    "where": Case(lambda x, y: np.where(x > y, x * y, np.sin(y)), [ANY, ANY],
                  smooth=_far, ops=("where",)),
    "sum": Case(lambda x: np.sum(x ** 3, axis=1, keepdims=True) + x.sum(), [ANY], ((3, 4),),
                ops=("sum",)),
    "mean_var_std": Case(lambda x: x.mean(axis=0) * x.var(axis=0) + x.std(ddof=1), [ANY],
                         ((4, 3),), ops=("sum",)),
    "prod": Case(lambda x: np.prod(x, axis=(0, 2)), [NONZERO], ((2, 3, 2),), ops=("prod",)),
    "max": Case(lambda x: np.max(x, axis=1) + x.max(), [ANY], ((3, 4),), ops=("max",)),
    "min": Case(lambda x: np.min(x, axis=0, keepdims=True) * x, [ANY], ((3, 4),),
                ops=("min",)),
    "matmul": Case(lambda a, b: a @ b, [ANY, ANY], ((2, 1, 3, 4), (5, 4, 2)),
                   ops=("matmul",)),
    "matmul_1d": Case(lambda a, b, v: np.concatenate([(v @ a) @ b, a @ b @ v[:2]])
                      + v[:2] @ b @ v[1:], [ANY, ANY, ANY], ((3, 2), (2, 2), (3,)),
                      ops=("matmul", "slice")),
    "dot_tensordot_einsum": Case(
        lambda a, b: np.dot(a, b[:, :, 0]).sum() + np.tensordot(a, b, axes=([1], [0]))
        + np.einsum("ij,jkl->ikl", a, b) * np.einsum("ij->i", a)[:, None, None],
        [ANY, ANY], ((2, 3), (3, 2, 2)), ops=("matmul",)),
    "inner_outer": Case(lambda a, b: np.inner(a, b) * np.outer(a, b), [ANY, ANY],
                        ((3,), (3,)), ops=("matmul",)),
    "reshape_transpose": Case(lambda x: x.reshape(3, 4).T @ np.moveaxis(x, 0, 2)[:3, 0, :],
                              [ANY], ((2, 6, 1),), ops=("reshape", "transpose")),
    "broadcast_to": Case(lambda x: np.broadcast_to(x, (2, 3, 4)) * np.arange(4.0),
                         [ANY], ((3, 1),), ops=("broadcast_to",)),
    "slice_steps": Case(lambda x: x[::-2, 1:3] * x[1::2, ::-3][:, :2].sum(),
                        [ANY], ((5, 4),), ops=("slice",)),
    "concatenate_stack": Case(
        lambda x, y: np.concatenate([x, y, x * y], axis=1) + np.stack([x, y], -1).sum(-1)
        .repeat(3, axis=1), [ANY, ANY], ((2, 3), (2, 3)), ops=("concatenate",)),
    "pad": Case(lambda x: np.pad(x, ((1, 2), (0, 3)), constant_values=1.5) ** 2, [ANY],
                ((2, 3),), ops=("pad",)),
    "gather": Case(lambda x: x[:, np.array([0, 2, 2, -1])] * x[np.array([1, 1, 0])][:, :4],
                   [ANY], ((3, 5),), ops=("gather",)),
    "take_along_axis": Case(
        lambda x: np.take_along_axis(x, np.array([[0, 0], [2, 1]]), axis=1)
        + np.take(x, [1, 1], axis=1), [ANY], ((2, 3),), ops=("gather",)),
    "flip_roll_tile_tri": Case(
        lambda x: np.flip(x, 0) * np.roll(x, 1, axis=1) + np.tril(x) - np.triu(x, 1)
        + np.tile(x[:, :1], (1, 3)), [ANY], ((3, 3),), ops=("slice", "concatenate")),
    "zeros_like_full": Case(lambda x: np.ones_like(x) * x + np.full_like(x, 2.0) * x ** 2,
                            [ANY], "one", ops=("full",)),
    # linalg: inputs kept well-conditioned (diagonally dominant, positive definite,
    # distinct eigenvalues and singular values) for every draw of UNIT entries
    "det_slogdet_inv": Case(
        lambda x: np.linalg.det(x + 3 * np.eye(3)) * np.linalg.inv(x + 3 * np.eye(3))
        + np.linalg.slogdet(x.T - 3 * np.eye(3))[1], [UNIT], ((3, 3),),
        ops=("det", "slogdet", "inv")),
    "solve": Case(lambda a, b: np.linalg.solve(a + 3 * np.eye(3), b), [UNIT, ANY],
                  ((2, 3, 3), (3, 2)), ops=("solve",)),
    "cholesky": Case(lambda x: np.linalg.cholesky(x @ x.T + 3 * np.eye(3)), [UNIT], ((3, 3),),
                     ops=("cholesky",)),
    "qr": Case(lambda x: np.concatenate(np.linalg.qr(x + np.eye(4, 3) * 3), axis=0), [UNIT],
               ((4, 3),), ops=("qr",)),
    "eigh": Case(lambda x: np.linalg.eigh(np.diag([0.0, 3.0, 6.0]) + 0.1 * (x + x.T))[0]
                 + np.linalg.eigh(np.diag([0.0, 3.0, 6.0]) + 0.1 * (x + x.T))[1] ** 3, [UNIT],
                 ((3, 3),), ops=("eigh",)),
    "svd": Case(lambda x: np.linalg.svd(np.eye(4, 3) * [3.0, 2.0, 1.0] + 0.1 * x,
                                        full_matrices=False)[0] ** 3
                + np.linalg.svdvals(np.eye(4, 3) * [3.0, 2.0, 1.0] + 0.1 * x), [UNIT],
                ((4, 3),), ops=("svd",)),
    "correlate": Case(lambda a, v: np.correlate(a, v, "same") * np.convolve(v, a, "full")[:7],
                      [ANY, ANY], ((7,), (4,)), ops=("correlate",)),
    "correlate-shorter-first": Case(lambda a, v: np.correlate(a, v, "full"), [ANY, ANY],
                                    ((3,), (5,)), ops=("correlate",)),
    "cumsum": Case(lambda x: np.cumsum(x, axis=1) * np.cumsum(x[::-1]).reshape(3, 4), [ANY],
                   ((3, 4),), ops=("cumsum",)),
    "cumprod": Case(lambda x: np.cumprod(x, axis=0) + x.cumprod()[-3:].sum(), [ANY], ((4, 3),),
                    ops=("cumprod",)),
    "cummax_cummin": Case(lambda x: np.maximum.accumulate(x, axis=1) * np.arange(1.0, 6.0)
                          + np.minimum.accumulate(x) ** 2 + np.fmax.accumulate(x[:, ::-1], 1),
                          [ANY], ((5, 5),), smooth=_distinct, ops=("cummax", "cummin")),
    "sort": Case(lambda x: np.sort(x, axis=-1) * np.arange(3.0) + np.sort(x, axis=1)[:, ::-1]
                 * np.sort(x.ravel())[:9].reshape(3, 3) + np.sort(x, axis=0, kind="stable")[0],
                 [ANY], ((3, 3, 3),), smooth=_distinct, ops=("sort",)),
    # 20 elements a row: introselect leaves the elements between the kth unsorted, so
    # partition's VJP is not a sort's
    "partition": Case(lambda x: np.partition(x, [3, 10], axis=1) * np.linspace(-1.0, 2.0, 20)
                      + np.partition(x, 1, axis=0)[0] ** 2 + np.median(x, axis=-1)[:, None],
                      [ANY], ((2, 20),), smooth=_distinct, ops=("partition",)),
    "sort_median_quantile": Case(
        lambda x: np.sort(x, axis=0) * np.median(x, axis=1)
        + np.quantile(x, [0.3, 0.8, 0.5])[:, None] + np.percentile(x, 55, axis=(0, 1))
        - np.quantile(x, 0.4, axis=0, method="hazen"), [ANY], ((3, 3),), smooth=_distinct,
        ops=("gather",)),
    "nanmedian_nanquantile": Case(
        lambda x: np.nanmedian(x, axis=0) * np.nanquantile(x, 0.35, axis=1, method="hazen")
        + np.nanpercentile(x, [20, 70]).sum(), [ANY], ((4, 4),), smooth=_distinct,
        ops=("gather",)),
    "quantile_traced_levels": Case(
        lambda x, q: np.quantile(x, q, axis=0)
        + np.percentile(x, q * 100, method="weibull")[:, None],
        [ANY, (0.05, 0.95)], ((4, 3), (2,)),
        smooth=lambda x, q: _distinct(x) and _frac_ok(3 * q, 1) and _frac_ok(13 * q - 1, 1),
        ops=("gather",)),
    "interp": Case(lambda x, fp: np.interp(x, np.array([-1.5, -0.2, 0.4, 1.7]), fp)
                   * np.interp(x, np.array([-1.0, 0.5]), fp[:2], left=0.25), [ANY, ANY],
                   ((5,), (4,)), smooth=lambda x, fp: _far(x[:, None], [-1.5, -0.2, 0.4, 1.7,
                                                                         -1.0, 0.5]),
                   ops=("searchsorted", "gather")),
    "ldexp": Case(lambda x: np.ldexp(x, 3) + np.ldexp(x, np.array(-2)), [ANY], "one",
                  ops=("ldexp",)),
    "heaviside": Case(lambda x, h: np.heaviside(np.floor(x), h) * x, [ANY, ANY],
                      smooth=lambda x, h: _frac_ok(x, 1.0), ops=("heaviside",)),
    "softmax_logsumexp": Case(
        lambda x: np.exp(x - x.max(1, keepdims=True))
        / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True),
        [ANY], ((3, 4),), ops=("max", "exp", "sum")),
})


CASES.update({  # complex values between real inputs and outputs (ad/complex_rules.py)
    "fft": Case(lambda x: np.abs(np.fft.fft(x, axis=0) + 0.5)
                + np.imag(np.fft.ifft(x, n=5, norm="ortho"))[:, 1:4]
                + np.real(np.fft.fft2(x * 1j, s=(4, 2)))[:, :1], [ANY], ((4, 3),),
                ops=("fft", "real", "imag")),
    "rfft": Case(lambda x: np.abs(np.fft.rfft(x, n=7, norm="forward")) ** 2
                 + np.real(np.fft.rfft(x, n=5, axis=0)), [ANY], ((3, 4),),
                 ops=("fft",)),
    "irfft": Case(lambda x: (np.fft.irfft(x * (1 + 0.5j), n=6)[:, :5]
                   + np.fft.irfft(np.exp(1j * x), n=5, norm="ortho"))[:, 1:4]
                  + np.fft.irfft(np.fft.rfft(x, axis=0) * 1j, n=4, axis=0, norm="forward"),
                  [ANY], ((4, 3),), ops=("fft",)),
    "complex-parts": Case(lambda x, y: np.real((x + 1j * y) ** 2)
                          * np.imag(np.conj(x + 2j * y) * (y - 1j))
                          + np.abs(np.sqrt(x + 1j * y + 3.0) / (y - 4j)), [ANY, ANY],
                          ops=("real", "imag", "absolute", "conjugate")),
    "complex-corrcoef": Case(lambda x, y: np.abs(np.corrcoef(x + 1j * y)[0, 1:])
                             + np.var(y + 1j * x), [ANY, ANY], ((3, 5), (3, 5)),
                             ops=("complex",)),
})


def _write_region(x, y):
    """Writes into a buffer of its own (NumPy's in-place semantics, traced as update_slice)."""
    out = x * 1.0
    out[1:, ::2] = np.sin(y)
    out[0] *= y[0, 1]
    out[:, -1] += x[:, 0] ** 2
    return out


def _write_indices(x, y):
    """Integer-array writes (scatter): the repeated index 0 keeps its last value."""
    out = np.cos(x)
    out[[0, 2, 0]] = y * 2.0
    out[1, [3, 1]] += x[0, :2]
    return out


CASES.update({
    "update_slice": Case(_write_region, [ANY, ANY], ((3, 4), (2, 2)),
                         ops=("update_slice",)),
    "scatter": Case(_write_indices, [ANY, ANY], ((3, 4), (3, 4)), ops=("scatter",)),
})


def _draw_inputs(data, case: Case):
    if case.shapes == "one":
        shapes = [data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))]
    elif case.shapes == "bcast":
        shapes = list(data.draw(hnp.mutually_broadcastable_shapes(
            num_shapes=len(case.domains), min_dims=0, max_dims=3, max_side=3)).input_shapes)
    else:
        shapes = list(case.shapes)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    xs = []
    for shape, dom in zip(shapes, case.domains, strict=True):
        intervals = dom if isinstance(dom, list) else [dom]
        pick = rng.integers(0, len(intervals), shape)
        lo = np.array([a for a, _ in intervals])[pick]
        hi = np.array([b for _, b in intervals])[pick]
        xs.append(rng.uniform(lo, hi, shape).astype(np.float64))
    if case.smooth is not None:
        assume(case.smooth(*xs))
    out = np.asarray(case.fn(*xs))
    w = rng.standard_normal(out.shape)
    return xs, w, rng


def _objective(case: Case, w):
    return lambda *xs: np.sum(case.fn(*xs) * w)


def _grad_all(f, n):
    return tj.grad(f, argnums=tuple(range(n)), backend="reference")


@pytest.mark.parametrize("name", sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_first_order(name, data):
    case = CASES[name]
    xs, w, _ = _draw_inputs(data, case)
    f = _objective(case, w)
    got = _grad_all(f, len(xs))(*xs)
    want = numeric_grad(f, xs)
    for g, x, nw in zip(got, xs, want, strict=True):
        g = np.asarray(g)
        assert g.shape == x.shape and g.dtype == x.dtype
        np.testing.assert_allclose(g, nw, rtol=RTOL, atol=ATOL * max(1, np.abs(nw).max()))


@pytest.mark.parametrize("name", sorted(CASES))
@settings(SETTINGS, max_examples=4)
@given(data=st.data())
def test_hessian_vector_product(name, data):
    case = CASES[name]
    xs, w, rng = _draw_inputs(data, case)
    n = len(xs)
    vs = [rng.standard_normal(x.shape) for x in xs]
    g = _grad_all(_objective(case, w), n)

    def directional(*ys):
        return sum(np.sum(gi * v) for gi, v in zip(g(*ys), vs, strict=True))

    got = _grad_all(directional, n)(*xs)
    if case.smooth is not None:  # the difference of gradients must not cross a kink
        assume(case.smooth(*[x + HVP_EPS * v for x, v in zip(xs, vs, strict=True)]))
        assume(case.smooth(*[x - HVP_EPS * v for x, v in zip(xs, vs, strict=True)]))
    plus = g(*[x + HVP_EPS * v for x, v in zip(xs, vs, strict=True)])
    minus = g(*[x - HVP_EPS * v for x, v in zip(xs, vs, strict=True)])
    for hv, p, m in zip(got, plus, minus, strict=True):
        want = (np.asarray(p) - np.asarray(m)) / (2 * HVP_EPS)
        np.testing.assert_allclose(hv, want, rtol=HVP_RTOL,
                                   atol=HVP_ATOL * max(1, np.abs(want).max()))


def test_cases_cover_every_rule():
    """Every op with a VJP rule (bar the input-free creation ops) is differentiated in some
    case above: the traced gradient graph contains the op's forward node."""
    seen = set()
    for case in CASES.values():
        shapes = [()] * len(case.domains) if case.shapes in ("one", "bcast") else case.shapes
        xs = [np.full(s, 0.7) for s in shapes]
        f = _objective(case, np.ones(np.shape(case.fn(*xs))))
        seen |= {n.op for n in _grad_all(f, len(xs)).lower(*xs).graph.nodes}
    # convert is checked against its exact gradient in test_autodiff.py (a float32 round trip
    # is too coarse for finite differences); constant has no inputs
    missing = set(VJP) - seen - {"constant", "scatter_add", "convert"}
    assert not missing, f"ops with a VJP rule but no finite-difference case: {missing}"
    assert "scatter_add" in seen  # the gradient of gather


def test_scatter_add_is_differentiated():
    """scatter_add only appears in backward graphs; its own rule is used by second order."""
    idx = np.array([0, 2, 2])

    def f(x):
        return np.sum(np.sin(x[idx]) * np.arange(1.0, 4.0))

    x = np.array([0.3, -0.2, 0.9])
    hvp = tj.grad(lambda x: np.sum(tj.grad(f)(x) * np.array([1.0, 2.0, 3.0])),
                  backend="reference")(x)
    # grad f = (cos(x0), 0, cos(x2) * (2 + 3)); its product with (1, 2, 3) differentiated:
    want = np.array([-np.sin(0.3), 0.0, -np.sin(0.9) * (2.0 + 3.0) * 3.0])
    np.testing.assert_allclose(hvp, want, rtol=1e-12)
    graph = tj.grad(lambda x: np.sum(tj.grad(f)(x) ** 2), backend="reference").lower(x).graph
    assert "scatter_add" in {n.op for n in graph.nodes}


PROGRAMS = {
    "tanh_layer": (lambda W, x: np.sum(np.tanh(x @ W + 0.5) ** 2), [(3, 4), (5, 3)]),
    "logsumexp": (lambda x, y: np.log(np.sum(np.exp(x * y), axis=1)).mean(), [(4, 3), (3,)]),
    "rational": (lambda x, y: np.sum((x * x + 1) / (np.abs(y) + 1) - np.sqrt(x * x + 2)),
                 [(6,), (6,)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_float32_gradient_matches_float64(name):
    fn, shapes = PROGRAMS[name]
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-1, 1, s) for s in shapes]
    g = tj.grad(fn, argnums=tuple(range(len(xs))), backend="reference")
    want = g(*xs)
    got = g(*[x.astype(np.float32) for x in xs])
    for a, b in zip(got, want, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
