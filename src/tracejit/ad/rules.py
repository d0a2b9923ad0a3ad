"""Vector-Jacobian product rules: one per differentiable registry op.

A rule is ``rule(g, ans, *xs, **attrs) -> tuple`` with one cotangent (or None) per input:
``g`` is the cotangent of the node's output ``ans``, ``xs`` its inputs, all Tracers of the
trace being recorded. Rules are written with ``bind``, so the backward graph is made of IR
ops and is itself differentiable (higher order). A rule may return a cotangent with the
output's shape and dtype: the walker in ``backward.py`` sums it back to the input's shape
(broadcasting) and casts it to the input's dtype, so rules need not.

Choices (as in autograd and JAX): ``max``/``min`` reductions and ``maximum``/``minimum``/
``fmax``/``fmin`` share the gradient equally among tied elements; ``clip`` is
``minimum(maximum(x, lo), hi)``, so a value equal to a bound splits its gradient with it;
``abs`` has derivative 0 at 0; ``x ** y`` gives ``dx = 0`` where ``y == 0`` and ``dy = 0``
where ``x == 0``. Elsewhere domain edges give what NumPy computes (``sqrt`` at 0 gives inf,
``log`` at 0 gives -inf, ``arcsin`` at 1 gives inf), never an exception.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.signal_ops import padding
from ..trace.core import bind
from .complex_rules import COMPLEX_VJP
from .linalg_rules import LINALG_VJP

# Ops with no cotangent at all: boolean, integer or index results.
NON_DIFFERENTIABLE = frozenset(
    "equal not_equal less less_equal greater greater_equal logical_and logical_or "
    "logical_xor logical_not bitwise_and bitwise_or bitwise_xor invert left_shift right_shift "
    "isnan isinf isfinite argmax argmin any all argsort argpartition searchsorted signbit gcd "
    "lcm bitwise_count".split()
)
# Float results that are piecewise constant: the gradient is zero (it stops there).
# A random draw is a constant to the gradient: it flows only through how the draw is used.
ZERO_GRADIENT = frozenset("floor ceil trunc rint sign floor_divide stop_gradient spacing "
                          "random".split())


# ---------------------------------------------------------------- helpers


def _where(cond, a, b):
    return bind("where", cond, a, b)


def _mul(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = bind("multiply", out, x)
    return out


def _div(a, b):
    return bind("true_divide", a, b)


def _neg(x):
    return bind("negative", x)


def _sq(x):
    return bind("multiply", x, x)


def _keepdims(g, x_shape, axis, keepdims):
    """``g`` of a reduction over ``axis``, reshaped so it broadcasts against the input."""
    if keepdims:
        return g
    shape = tuple(1 if i in axis else d for i, d in enumerate(x_shape))
    return bind("reshape", g, shape=shape)


def _expand(g, x_shape, axis, keepdims):
    g = _keepdims(g, x_shape, axis, keepdims)
    return g if g.shape == tuple(x_shape) else bind("broadcast_to", g, shape=tuple(x_shape))


def _as_float(mask, like):
    return bind("convert", mask, dtype=like.dtype)


# ---------------------------------------------------------------- elementwise


def _unary(derivative):
    """A rule ``g * derivative(x, ans)``."""
    return lambda g, ans, x: (_mul(g, derivative(x, ans)),)


def _absolute_rule(g, ans, x):
    """g * sign(x); for a complex x, g / |x| * x* (``complex_rules``' convention), 0 at 0,
    written without np.sign so that it differentiates again, and with the division on the
    real values (one kernel) rather than on the complex ones."""
    if x.dtype.kind != "c":
        return (_mul(g, bind("sign", x)),)
    return (_mul(_div(g, _where(bind("equal", ans, 0), 1.0, ans)), bind("conjugate", x)),)


def _sqrt_rule(g, ans, x):
    return (_div(g, _mul(ans, 2.0)),)


def _cbrt_rule(g, ans, x):
    return (_div(g, _mul(_sq(ans), 3.0)),)


def _reciprocal_rule(g, ans, x):
    return (_neg(_mul(g, _sq(ans))),)


def _inv_sqrt(d):
    """``1 / sqrt(d)`` as a rule factor (arcsin and relatives)."""
    return _div(1.0, bind("sqrt", d))


def _true_divide_rule(g, ans, x, y):
    gx = _div(g, y)
    return gx, _neg(_mul(gx, ans))


def _power_rule(g, ans, x, y):
    # dx = y * x**(y-1), with y == 0 giving 0 rather than 0 * x**-1 (nan at x == 0);
    # dy = ans * log(x), with x == 0 giving 0 (the limit for y > 0) rather than 0 * -inf.
    exponent = _where(bind("not_equal", y, 0), bind("subtract", y, 1), 1.0)
    gx = _mul(g, y, bind("power", x, exponent))
    safe_x = _where(bind("equal", x, 0), 1.0, x)
    gy = _mul(g, ans, bind("log", safe_x))
    return gx, gy


def _remainder_rule(g, ans, x, y):
    return g, _neg(_mul(g, bind("floor_divide", x, y)))


def _arctan2_rule(g, ans, y, x):
    d = bind("add", _sq(x), _sq(y))
    return _div(_mul(g, x), d), _neg(_div(_mul(g, y), d))


def _hypot_rule(g, ans, x, y):
    return _div(_mul(g, x), ans), _div(_mul(g, y), ans)


def _logaddexp_rule(g, ans, x, y):
    return (_mul(g, bind("exp", bind("subtract", x, ans))),
            _mul(g, bind("exp", bind("subtract", y, ans))))


def _logaddexp2_rule(g, ans, x, y):
    return (_mul(g, bind("exp2", bind("subtract", x, ans))),
            _mul(g, bind("exp2", bind("subtract", y, ans))))


def _share(g, picked, tie):
    """``g`` where ``picked`` holds, half of it on a ``tie``, else 0."""
    return _where(tie, _mul(g, 0.5), _where(picked, g, 0.0))


def _extremum_rule(greater: str, nan_wins: bool):
    """maximum/minimum (``nan_wins``: a NaN operand is the result) and fmax/fmin (a NaN
    operand is ignored). Ties split the gradient equally."""

    def rule(g, ans, x, y):
        tie = bind("equal", x, y)
        nx, ny = bind("isnan", x), bind("isnan", y)
        if nan_wins:
            px = bind("logical_or", bind(greater, x, y), nx)
            py = bind("logical_or", bind(greater, y, x), bind("logical_and", ny,
                                                              bind("logical_not", nx)))
        else:
            px = bind("logical_or", bind(greater, x, y), bind("logical_and", ny,
                                                              bind("logical_not", nx)))
            py = bind("logical_or", bind(greater, y, x), bind("logical_and", nx,
                                                              bind("logical_not", ny)))
        return _share(g, px, tie), _share(g, py, tie)

    return rule


_maximum_rule = _extremum_rule("greater", nan_wins=True)
_minimum_rule = _extremum_rule("less", nan_wins=True)


def _clip_rule(g, ans, x, lo, hi):
    low = bind("maximum", x, lo)
    g_low, g_hi = _minimum_rule(g, ans, low, hi)
    g_x, g_lo = _maximum_rule(g_low, low, x, lo)
    return g_x, g_lo, g_hi


def _where_rule(g, ans, cond, a, b):
    return None, _where(cond, g, 0.0), _where(cond, 0.0, g)


def _convert_rule(g, ans, x, *, dtype):
    return (g,)  # the walker casts it back to x's dtype


# ---------------------------------------------------------------- reductions


def _sum_rule(g, ans, x, *, axis, keepdims, dtype):
    return (_expand(g, x.shape, axis, keepdims),)


def _prod_rule(g, ans, x, *, axis, keepdims, dtype):
    """Correct with zeros: with none in a slice ``ans / x``; with one, the product of the
    others at the zero and 0 elsewhere; with two or more, 0."""
    zero = bind("equal", x, 0)
    count = bind("sum", zero, axis=axis, keepdims=True, dtype=None)
    nonzero_prod = bind("prod", _where(zero, 1.0, x), axis=axis, keepdims=True,
                        dtype=ans.dtype)
    safe_x = _where(zero, 1.0, x)
    none = _div(nonzero_prod, safe_x)
    one = _where(bind("logical_and", bind("equal", count, 1), zero), nonzero_prod, 0.0)
    factor = _where(bind("equal", count, 0), none, one)
    return (_mul(_keepdims(g, x.shape, axis, keepdims), factor),)


def _extremum_reduce_rule(g, ans, x, *, axis, keepdims):
    """The gradient is shared equally among the elements equal to the result (NaN ones
    when the result is NaN)."""
    hit = bind("logical_or", bind("equal", x, _keepdims(ans, x.shape, axis, keepdims)),
               bind("isnan", x))
    hit = _as_float(hit, g)
    count = bind("sum", hit, axis=axis, keepdims=True, dtype=None)
    return (_mul(_keepdims(g, x.shape, axis, keepdims), _div(hit, count)),)


# ---------------------------------------------------------------- scans


def _reverse(x, axis: int):
    """``x`` reversed along ``axis`` (a slice with step -1)."""
    n = x.shape[axis]
    if n <= 1:
        return x
    starts = tuple(n - 1 if d == axis else 0 for d in range(x.ndim))
    stops = tuple(-1 if d == axis else x.shape[d] for d in range(x.ndim))
    steps = tuple(-1 if d == axis else 1 for d in range(x.ndim))
    return bind("slice", x, starts=starts, stops=stops, steps=steps)


def _cumsum_rule(g, ans, x, *, axis, dtype):
    """Each input adds into every later output: the reversed cumulative sum of ``g``."""
    return (_reverse(bind("cumsum", _reverse(g, axis), axis=axis, dtype=None), axis),)


def _cumprod_rule(g, ans, x, *, axis, dtype):
    """d out[j] / d x[i] is the product of x[k], k <= j, k != i (for j >= i): with the
    axis moved last, row i of an (n, n) block holds x with x[i] replaced by 1, whose
    cumulative product gives every such product. Exact with zeros (no division), at
    O(n^2) time and memory per slice of the axis."""
    n, last = x.shape[axis], x.ndim - 1
    perm = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
    back = tuple(int(i) for i in np.argsort(perm))
    xt = bind("transpose", x, perm=perm)
    gt = bind("transpose", g, perm=perm)
    rows = bind("reshape", xt, shape=xt.shape[:-1] + (1, n))
    held = _where(np.eye(n, dtype=bool), np.ones((), x.dtype), rows)
    products = bind("cumprod", held, axis=last + 1, dtype=ans.dtype)
    later = np.triu(np.ones((n, n), dtype=bool))  # [i, j]: output j depends on input i
    terms = _where(later, _mul(bind("reshape", gt, shape=gt.shape[:-1] + (1, n)), products),
                   0.0)
    grad = bind("sum", terms, axis=(last + 1,), keepdims=False, dtype=None)
    return (bind("transpose", grad, perm=back),)


# ---------------------------------------------------------------- contraction


def _swap_last(x):
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return bind("transpose", x, perm=perm)


def _matmul_rule(g, ans, a, b):
    return bind("matmul", g, _swap_last(b)), bind("matmul", _swap_last(a), g)


def _correlate_rule(g, ans, a, v, *, mode):
    """out[k] = sum_j ap[k + j] v[j], ap = a padded for ``mode``: the cotangent of ``v`` is
    the valid correlation of ``ap`` with ``g``, that of ``ap`` the full convolution of ``g``
    with ``v`` (of which ``a``'s is the unpadded part). Where ``len(a) < len(v)`` NumPy
    correlates ``v`` with ``a`` and reverses the result: so does the rule."""
    if a.shape[0] < v.shape[0]:
        gv, ga = _correlate_vjp(_reverse(g, 0), v, a, mode)
        return ga, gv
    return _correlate_vjp(g, a, v, mode)


def _correlate_vjp(g, a, v, mode):
    """The rule for ``len(a) >= len(v)``."""
    n = a.shape[0]
    left, right = padding(mode, v.shape[0])
    ap = bind("pad", a, widths=((left, right),), value=0) if left or right else a
    gv = bind("correlate", ap, g, mode="valid")
    if left == right == v.shape[0] - 1:  # full: the middle of the full convolution
        return bind("correlate", g, _reverse(v, 0), mode="valid"), gv
    gap = bind("correlate", g, _reverse(v, 0), mode="full")
    if left == right == 0:
        return gap, gv
    return bind("slice", gap, starts=(left,), stops=(left + n,), steps=(1,)), gv


# ---------------------------------------------------------------- structural


def _reshape_rule(g, ans, x, *, shape):
    return (bind("reshape", g, shape=x.shape),)


def _transpose_rule(g, ans, x, *, perm):
    return (bind("transpose", g, perm=tuple(int(i) for i in np.argsort(perm))),)


def _broadcast_to_rule(g, ans, x, *, shape):
    return (g,)  # the walker sums it back to x's shape


def _slice_rule(g, ans, x, *, starts, stops, steps):
    """Scatter ``g`` back into zeros: one ``pad`` for the unit-step dimensions, and for each
    strided one a gather from ``g`` padded with one zero (the positions not sliced read
    it)."""
    widths = []
    for d, (a, s) in enumerate(zip(starts, steps, strict=True)):
        n = g.shape[d]
        if s == 1:
            widths.append((a, x.shape[d] - a - n))
            continue
        widths.append((0, 0))
        index = np.full(x.shape[d], n, dtype=np.int64)
        index[a + s * np.arange(n)] = np.arange(n)
        w = [(0, 0)] * g.ndim
        w[d] = (0, 1)
        g = bind("gather", bind("pad", g, widths=tuple(w), value=0), index, axis=d)
    if any(w != (0, 0) for w in widths):
        g = bind("pad", g, widths=tuple(widths), value=0)
    return (g,)


def _concatenate_rule(g, ans, *xs, axis):
    out, start = [], 0
    for x in xs:
        n = x.shape[axis]
        starts = tuple(start if d == axis else 0 for d in range(g.ndim))
        stops = tuple(start + n if d == axis else g.shape[d] for d in range(g.ndim))
        out.append(bind("slice", g, starts=starts, stops=stops, steps=(1,) * g.ndim)
                   if n else bind("full", shape=x.shape, dtype=g.dtype, value=0))
        start += n
    return tuple(out)


def _pad_rule(g, ans, x, *, widths, value):
    starts = tuple(a for a, _ in widths)
    stops = tuple(a + d for (a, _), d in zip(widths, x.shape, strict=True))
    return (bind("slice", g, starts=starts, stops=stops, steps=(1,) * g.ndim),)


# ---------------------------------------------------------------- indexing


def _gather_rule(g, ans, x, *idx, axis):
    zeros = bind("full", shape=x.shape, dtype=g.dtype, value=0)
    return (bind("scatter_add", zeros, g, *idx, axis=axis),) + (None,) * len(idx)


def _sort_rule(g, ans, x, *, axis, kind):
    """As ``take_along_axis(x, argsort(x))``'s: each output's cotangent goes to the element
    it came from, found by an argsort of the same kind (between equal values, where the
    two sorts may pick differently, sort has no derivative)."""
    return (_scatter_along(g, bind("argsort", x, axis=axis, kind=kind), x.shape, axis),)


def _along(index, shape: tuple[int, ...], axis: int) -> list:
    """The index arrays of ``take_along_axis(., index, axis)`` as one gather/scatter."""
    return [index if d == axis else np.arange(n).reshape([n if e == d else 1
                                                          for e in range(len(shape))])
            for d, n in enumerate(shape)]


def _scatter_along(g, index, shape: tuple[int, ...], axis: int):
    """Each of ``g``'s elements added to the input element ``index`` names along ``axis``."""
    zeros = bind("full", shape=shape, dtype=g.dtype, value=0)
    return bind("scatter_add", zeros, g, *_along(index, shape, axis), axis=0)


def _partition_rule(g, ans, x, *, axis, kth, kind):
    """Each output's cotangent goes to an input element of its value. An argpartition
    need not move the elements between the kth as partition did (NumPy's vectorised
    selections differ), so the element is found by rank: the output's rank among ``ans``
    (a stable argsort's inverse), then the input holding that rank (a stable argsort of
    ``x``). Equal values share their cotangents one to one."""
    stable = {"axis": axis, "kind": "stable"}
    rank = bind("argsort", bind("argsort", ans, **stable), **stable)
    source = bind("gather", bind("argsort", x, **stable), *_along(rank, x.shape, axis), axis=0)
    return (_scatter_along(g, source, x.shape, axis),)


def _running_extremum_rule(g, ans, x, *, axis):
    """cummax/cummin: each output's cotangent goes to the element its value came from, the
    last at or before it where the running extremum was set (equal to the output there,
    or NaN: a NaN carries on from where it came in). Of equal elements the latest takes
    it, as of equal sort keys one takes each."""
    n = x.shape[axis]
    position = np.arange(n).reshape([n if d == axis else 1 for d in range(len(x.shape))])
    set_here = bind("logical_or", bind("equal", x, ans), bind("isnan", x))
    marks = bind("where", set_here, position, np.int64(-1))
    source = bind("cummax", marks, axis=axis)
    return (_scatter_along(g, source, x.shape, axis),)


def _scatter_add_rule(g, ans, x, updates, *idx, axis):
    return (g, bind("gather", g, *idx, axis=axis)) + (None,) * len(idx)


def _update_slice_rule(g, ans, x, updates, *, starts, stops, steps):
    """JAX's ``.at[region].set``: the written region's cotangent goes to the updates, the
    rest to x."""
    attrs = {"starts": starts, "stops": stops, "steps": steps}
    zeros = bind("full", shape=updates.shape, dtype=g.dtype, value=0)
    return (bind("update_slice", g, zeros, **attrs), bind("slice", g, **attrs))


def _scatter_rule(g, ans, x, updates, *idx, axis):
    """JAX's ``.at[idx].set`` with NumPy's repeated indices: of the updates written to one
    position only the last stays (the forward scatter keeps it on every backend), so only
    it takes that position's cotangent, and x none at any written position."""
    zeros = bind("full", shape=updates.shape, dtype=g.dtype, value=0)
    kept = _where(_last_written(idx, x.shape, axis), bind("gather", g, *idx, axis=axis), 0)
    return (bind("scatter", g, zeros, *idx, axis=axis), kept) + (None,) * len(idx)


def _last_written(idx, shape: tuple[int, ...], axis: int):
    """Whether each update of ``scatter(x, updates, *idx, axis)`` is the last written to
    its position, shaped to broadcast against the updates. Made in the graph (scatter
    each update's number, read back which number stayed) because traced indices are
    known only at run time; it is made of ops with rules, so second order composes."""
    batch = tuple(np.broadcast_shapes(*(i.shape for i in idx)))
    number = np.arange(math.prod(batch), dtype=np.int64).reshape(batch)
    blank = bind("full", shape=shape[axis:axis + len(idx)], dtype=np.int64, value=-1)
    stayed = bind("gather", bind("scatter", blank, number, *idx, axis=0), *idx, axis=0)
    last = bind("equal", stayed, number)
    return bind("reshape", last, shape=(1,) * axis + batch + (1,) * (len(shape) - axis
                                                                       - len(idx)))


# ---------------------------------------------------------------- the table

LN2, LN10 = math.log(2.0), math.log(10.0)

VJP = {
    "add": lambda g, ans, x, y: (g, g),
    "subtract": lambda g, ans, x, y: (g, _neg(g)),
    "multiply": lambda g, ans, x, y: (_mul(g, y), _mul(g, x)),
    "true_divide": _true_divide_rule,
    "negative": lambda g, ans, x: (_neg(g),),
    "positive": lambda g, ans, x: (g,),
    "absolute": _absolute_rule,
    "square": _unary(lambda x, ans: _mul(x, 2.0)),
    "sqrt": _sqrt_rule,
    "cbrt": _cbrt_rule,
    "reciprocal": _reciprocal_rule,
    "exp": _unary(lambda x, ans: ans),
    "exp2": _unary(lambda x, ans: _mul(ans, LN2)),
    "expm1": _unary(lambda x, ans: bind("add", ans, 1.0)),
    "log": lambda g, ans, x: (_div(g, x),),
    "log2": lambda g, ans, x: (_div(g, _mul(x, LN2)),),
    "log10": lambda g, ans, x: (_div(g, _mul(x, LN10)),),
    "log1p": lambda g, ans, x: (_div(g, bind("add", x, 1.0)),),
    "sin": _unary(lambda x, ans: bind("cos", x)),
    "cos": _unary(lambda x, ans: _neg(bind("sin", x))),
    "tan": _unary(lambda x, ans: bind("add", _sq(ans), 1.0)),
    "arcsin": _unary(lambda x, ans: _inv_sqrt(bind("subtract", 1.0, _sq(x)))),
    "arccos": _unary(lambda x, ans: _neg(_inv_sqrt(bind("subtract", 1.0, _sq(x))))),
    "arctan": lambda g, ans, x: (_div(g, bind("add", _sq(x), 1.0)),),
    "sinh": _unary(lambda x, ans: bind("cosh", x)),
    "cosh": _unary(lambda x, ans: bind("sinh", x)),
    "tanh": _unary(lambda x, ans: bind("subtract", 1.0, _sq(ans))),
    "arcsinh": _unary(lambda x, ans: _inv_sqrt(bind("add", _sq(x), 1.0))),
    "arccosh": _unary(lambda x, ans: _inv_sqrt(bind("subtract", _sq(x), 1.0))),
    "arctanh": lambda g, ans, x: (_div(g, bind("subtract", 1.0, _sq(x))),),
    "power": _power_rule,
    "remainder": _remainder_rule,
    "arctan2": _arctan2_rule,
    "hypot": _hypot_rule,
    "logaddexp": _logaddexp_rule,
    "logaddexp2": _logaddexp2_rule,
    "maximum": _maximum_rule,
    "minimum": _minimum_rule,
    "fmax": _extremum_rule("greater", nan_wins=False),
    "fmin": _extremum_rule("less", nan_wins=False),
    "clip": _clip_rule,
    "where": _where_rule,
    "convert": _convert_rule,
    "sum": _sum_rule,
    "prod": _prod_rule,
    "max": _extremum_reduce_rule,
    "min": _extremum_reduce_rule,
    "cumsum": _cumsum_rule,
    "cumprod": _cumprod_rule,
    "cummax": _running_extremum_rule,
    "cummin": _running_extremum_rule,
    "matmul": _matmul_rule,
    "correlate": _correlate_rule,
    "reshape": _reshape_rule,
    "transpose": _transpose_rule,
    "broadcast_to": _broadcast_to_rule,
    "slice": _slice_rule,
    "concatenate": _concatenate_rule,
    "pad": _pad_rule,
    "gather": _gather_rule,
    "sort": _sort_rule,
    "partition": _partition_rule,
    "scatter_add": _scatter_add_rule,
    "update_slice": _update_slice_rule,
    "scatter": _scatter_rule,
    "constant": lambda g, ans, **attrs: (),  # no inputs: nothing to propagate
    "full": lambda g, ans, **attrs: (),
    **LINALG_VJP,
    **COMPLEX_VJP,
}


# ---------------------------------------------------------------- more ufuncs
# heaviside is flat in x (its step at 0 has no derivative: 0, as for sign) and takes its
# value at 0 from h0; copysign(x, y) is +-x, flat in y; nextafter(x, y) moves x by one
# ulp, flat in y; ldexp(x, i) = x * 2**i is linear in x and has no cotangent for i.


def _heaviside_rule(g, ans, x, h0):
    return None, _where(bind("equal", x, 0), g, 0.0)


def _copysign_rule(g, ans, x, y):
    flipped = bind("not_equal", bind("signbit", x), bind("signbit", ans))
    return _where(flipped, _neg(g), g), None


def _float_power_rule(g, ans, x, y):
    """As power's, in the float64 (or complex) dtype float_power computes in."""
    x, y = (bind("convert", v, dtype=ans.dtype) for v in (x, y))
    return _power_rule(g, ans, x, y)


def _fmod_rule(g, ans, x, y):
    """d fmod(x, y) / dy is minus the truncated quotient n = (x - fmod(x, y)) / y, an
    integer that the division may leave an ulp short of it (-2.9999999999999996 for
    fmod(-1.476, 0.467)): rounded to the nearest, not truncated."""
    return g, _neg(_mul(g, bind("rint", _div(bind("subtract", x, ans), y))))


DEG = 180.0 / math.pi
VJP.update({
    "fabs": _unary(lambda x, ans: bind("sign", x)),
    "degrees": _unary(lambda x, ans: DEG),
    "rad2deg": _unary(lambda x, ans: DEG),
    "radians": _unary(lambda x, ans: 1.0 / DEG),
    "deg2rad": _unary(lambda x, ans: 1.0 / DEG),
    "conjugate": lambda g, ans, x: (bind("conjugate", g),),
    "heaviside": _heaviside_rule,
    "copysign": _copysign_rule,
    "float_power": _float_power_rule,
    "fmod": _fmod_rule,
    "ldexp": lambda g, ans, x, i: (bind("ldexp", g, i), None),
    "nextafter": lambda g, ans, x, y: (g, None),
})
