"""The oracle: random float programs, inexact steps included, against a wider evaluation.

test_differential compares tracejit with NumPy in the program's own dtype, so it must keep
values whose rounding may differ (float sums, transcendental results) away from later steps,
and a bug in how a reduction's result is consumed goes unseen. Here every value may flow on:
each program runs under ``jit`` and, as the oracle, in NumPy on its inputs widened to
float64 (float32 programs) or np.longdouble (float64 programs), and each float result must
lie within an error bound that follows the program.

The bound is an absolute error per element, propagated step by step from the values NumPy
computes in the program's dtype: an op adds its operands' errors times its derivative and
its own rounding (2 eps of its result for arithmetic, 5 for transcendental math, a sum over
n elements n eps of the sum of magnitudes). That is first order, so the generator refuses
the steps where first order is not enough: dividing by (or taking the log or sqrt of) a
value within a wide margin of its error from the singularity, comparisons closer than their
operands' errors (the branch could flip), results that are not finite or huge. The check
allows ``SLACK`` times the bound; NumPy's own result must meet it too, which tests the bound.

Shapes are drawn with equal dimensions (n, n×n, n×n×n, size 1, sometimes 0) and broadcasting
between them, because a reduction indexed along the wrong axis is invisible otherwise.

One generator serves two drivers: hypothesis (a ``draw``: examples shrink to a short
program whose repr is paste-able Python) and ``random.Random`` (bench/explore.py's long runs).
"""

from __future__ import annotations

import itertools
import math
import operator
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from draws import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy_compare import TRANSCENDENTAL, exact

import tracejit as tj

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's empty-slice notes
SLACK = 4  # the check allows this many times the first-order bound
MARGIN = 100 * SLACK  # a singularity or a comparison's other side stays this many errors away
MAX_MAGNITUDE = 1e4  # larger results are refused: exp of them would overflow float32
LITERALS = (0.25, 0.5, 1.0, 2.0, 3.0, -1.5)  # exact in every float dtype: no error of their own
WIDE = {np.dtype("float32"): np.dtype("float64"), np.dtype("float64"): np.dtype("longdouble")}
SETTINGS = settings(
    max_examples=examples(200),  # no compiling on the reference backend: cheap
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much],
)
COMPILED_EXAMPLES = 40  # each program compiles its kernels (~0.3-0.5 s) on a compiled backend


# --------------------------------------------------------------------------- choosers


class HypothesisChooser:
    """Choices drawn by hypothesis, so that it can shrink them."""

    def __init__(self, draw):
        self.draw = draw

    def choice(self, options):
        return self.draw(st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def array(self, dtype: np.dtype, shape: tuple, lo: float, hi: float) -> np.ndarray:
        # Distinct elements: hypothesis' simplest arrays are constant, and on a constant
        # array a value read along the wrong axis is still right.
        width = 8 * dtype.itemsize
        elements = st.floats(lo, hi, width=width)
        return self.draw(hnp.arrays(dtype, shape, elements=elements, unique=True))


class RandomChooser:
    """Choices from a seeded ``random.Random``: fast, and reproducible from the seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def choice(self, options):
        return self.rng.choice(list(options))

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def array(self, dtype: np.dtype, shape: tuple, lo: float, hi: float) -> np.ndarray:
        flat = [self.rng.uniform(lo, hi) for _ in range(math.prod(shape))]
        return np.array(flat, dtype).reshape(shape)


# --------------------------------------------------------------------------- programs as data


@dataclass(frozen=True)
class Ref:
    """An operand that is an earlier value of the program."""

    index: int

    def __repr__(self) -> str:
        return f"v{self.index}"


# An error rule: (eps, operand values, operand errors, result) -> the result's error bound as
# float64 (broadcastable to the result), or None where the step is too ill-conditioned.
Rule = Callable[[float, list, list, np.ndarray], object]


@dataclass(frozen=True)
class Step:
    """One line: ``text`` has ``{0}, {1}, ...`` for ``args`` (Refs or literal scalars)."""

    text: str
    fn: Callable
    args: tuple
    rule: Rule

    def operands(self, values: list) -> list:
        return [values[a.index] if isinstance(a, Ref) else a for a in self.args]

    def render(self, out: str) -> str:
        return f"{out} = " + self.text.format(*map(repr, self.args))


class Program:
    """Inputs (arrays of one float dtype), steps, the returned values' indices, and what
    generating it learned: each value in the program's dtype and its error bound.
    Not a dataclass, so that hypothesis prints it with ``__repr__``: the source."""

    def __init__(self, inputs: list, steps: list[Step], outputs: tuple[int, ...],
                 values: list, errors: list):
        self.inputs, self.steps, self.outputs = inputs, steps, outputs
        self.values, self.errors = values, errors

    def evaluate(self, inputs: list) -> list:
        values = list(inputs)
        for step in self.steps:
            values.append(step.fn(*step.operands(values)))
        return values

    def function(self) -> Callable[..., tuple]:
        def program(*args):
            values = self.evaluate(list(args))
            return tuple(values[i] for i in self.outputs)

        return program

    def oracle(self) -> list:
        """The outputs computed in NumPy from the inputs widened (float32 to float64,
        float64 to longdouble)."""
        values = self.evaluate([x.astype(WIDE[x.dtype]) for x in self.inputs])
        return [values[i] for i in self.outputs]

    def __repr__(self) -> str:
        names = [f"v{i}" for i in range(len(self.inputs))]
        lines = [f"def program({', '.join(names)}):"]
        lines += [f"    {s.render(f'v{len(names) + k}')}" for k, s in enumerate(self.steps)]
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        lines += [
            f"# {n} = np.array({x.tolist()!r}, np.{x.dtype.name}).reshape({x.shape})"
            for n, x in zip(names, self.inputs, strict=True)
        ]
        return "\n" + "\n".join(lines)


# --------------------------------------------------------------------------- error rules


def mag(x) -> np.ndarray:
    return np.abs(np.asarray(x, np.float64))


def clear_of(x, err, point: float, margin: float = MARGIN) -> bool:
    """Whether every element of ``x`` is more than ``margin`` errors away from ``point``,
    and not on it."""
    distance = mag(np.asarray(x, np.float64) - point)
    return bool(np.all((distance > margin * err) & (distance > 0)))


def rounded(ulps: float, rule: Rule) -> Rule:
    """``rule`` plus the step's own rounding: ``ulps`` eps of the result's magnitude."""

    def with_rounding(eps, xs, es, r):
        err = rule(eps, xs, es, r)
        return None if err is None else err + ulps * eps * mag(r)

    return with_rounding


def same(fn: Callable) -> Rule:
    """Errors move with the values: structural steps, and clip (1-Lipschitz)."""
    return lambda eps, xs, es, r: fn(es[0])


# name: (function, bound of |derivative| from (x, result), singular point or None)
UNARY = {
    "negative": (np.negative, lambda x, r: 1.0, None),
    "absolute": (np.absolute, lambda x, r: 1.0, None),
    "square": (np.square, lambda x, r: 2 * mag(x), None),
    "exp": (np.exp, lambda x, r: mag(r), None),
    "exp2": (np.exp2, lambda x, r: math.log(2) * mag(r), None),
    "expm1": (np.expm1, lambda x, r: mag(r) + 1, None),
    "log": (np.log, lambda x, r: 1 / mag(x), 0.0),
    "log2": (np.log2, lambda x, r: 1 / (math.log(2) * mag(x)), 0.0),
    "log1p": (np.log1p, lambda x, r: 1 / mag(np.asarray(x, np.float64) + 1), -1.0),
    "sqrt": (np.sqrt, lambda x, r: 0.5 / mag(r), 0.0),
    "tanh": (np.tanh, lambda x, r: 1.0, None),
    "sin": (np.sin, lambda x, r: 1.0, None),
    "cos": (np.cos, lambda x, r: 1.0, None),
    "arctan": (np.arctan, lambda x, r: 1.0, None),
    "reciprocal": (np.reciprocal, lambda x, r: mag(r) ** 2, 0.0),
}
ONE_SIDED = {"log", "log2", "log1p", "sqrt"}  # undefined left of the singular point


def unary_rule(name: str) -> Rule:
    _, derivative, singular = UNARY[name]

    def rule(eps, xs, es, r):
        (x,), (e,) = xs, es
        if singular is not None:
            if not clear_of(x, e, singular):
                return None
            if name in ONE_SIDED and np.any(np.asarray(x, np.float64) < singular):
                return None
        with np.errstate(all="ignore"):
            return np.where(e == 0, 0.0, derivative(x, r) * e)

    ulps = 5 if name in TRANSCENDENTAL else 2
    return rounded(0 if name in ("negative", "absolute") else ulps, rule)


def add_rule(eps, xs, es, r):
    return es[0] + es[1]


def multiply_rule(eps, xs, es, r):
    (a, b), (ea, eb) = xs, es
    return mag(a) * eb + mag(b) * ea + ea * eb


def divide_rule(eps, xs, es, r):
    (_, b), (ea, eb) = xs, es
    if not clear_of(b, eb, 0.0):
        return None
    return (ea + mag(r) * eb) / (mag(b) - eb)


def max_rule(eps, xs, es, r):
    return np.maximum(es[0], es[1])


BINARY = {  # name: (operator symbol or None, function, error rule)
    "add": ("+", operator.add, rounded(2, add_rule)),
    "subtract": ("-", operator.sub, rounded(2, add_rule)),
    "multiply": ("*", operator.mul, rounded(2, multiply_rule)),
    "true_divide": ("/", operator.truediv, rounded(2, divide_rule)),
    "maximum": (None, np.maximum, max_rule),
    "minimum": (None, np.minimum, max_rule),
}
COMPARISONS = {"less": "<", "greater": ">", "less_equal": "<=", "greater_equal": ">="}


def comparison_rule(eps, xs, es, r):
    """Exact, if no element is so close to the other side that rounding could flip it."""
    (a, b), (ea, eb) = xs, es
    gap = mag(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    scale = np.maximum(mag(a), mag(b))
    if not np.all(gap > 2 * SLACK * (ea + eb) + 8 * eps * scale):
        return None
    return 0.0


def where_rule(eps, xs, es, r):
    return np.where(xs[0], es[1], es[2])


def reduction_rule(name: str, kwargs: dict) -> Rule:
    def total(a):
        return np.sum(a, **kwargs)

    def rule(eps, xs, es, r):
        (x,), (e,) = xs, es
        n = x.size // max(np.size(r), 1)
        if name in ("max", "min"):
            return np.max(e, **kwargs)
        if name == "prod":
            if not clear_of(x, e, 0.0):
                return None
            return mag(r) * (total(e / mag(x)) + (n + 1) * eps)
        err = total(e) + n * eps * total(mag(x))  # any summation order
        return err / n if name == "mean" else err

    return rounded(0 if name in ("max", "min") else 2, rule)


def matmul_rule(eps, xs, es, r):
    (a, b), (ea, eb) = xs, es
    k = np.shape(a)[-1]
    return mag(a) @ eb + ea @ mag(b) + ea @ eb + k * eps * (mag(a) @ mag(b))


# --------------------------------------------------------------------------- steps


def call(name: str, operands: tuple, rule: Rule, *static, **kwargs) -> Step:
    """``np.<name>(*operands, *static, **kwargs)``."""
    fn = getattr(np, name)
    params = [f"{{{i}}}" for i in range(len(operands))] + [repr(s) for s in static]
    params += [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"np.{name}({', '.join(params)})"
    return Step(text, lambda *xs: fn(*xs, *static, **kwargs), operands, rule)


def floats_in(values: list) -> list[int]:
    return [i for i, v in enumerate(values) if np.result_type(v).kind == "f"]


def partners(values: list, i: int) -> list[int]:
    """Float values that broadcast with value ``i``."""
    out = []
    for j in floats_in(values):
        try:
            np.broadcast_shapes(np.shape(values[i]), np.shape(values[j]))
        except ValueError:
            continue
        out.append(j)
    return out


def other_operand(c, values: list, i: int):
    """A value broadcasting with value ``i``, or a literal."""
    options = partners(values, i)
    if options and c.integer(0, 3):
        return Ref(c.choice(options))
    return c.choice(LITERALS)


def unary(c, values, x: Ref) -> list[Step]:
    name = c.choice(UNARY)
    fn = UNARY[name][0]
    if name in ("negative", "absolute") and c.integer(0, 1):
        text = "-{0}" if name == "negative" else "abs({0})"
        return [Step(text, fn, (x,), unary_rule(name))]
    return [call(name, (x,), unary_rule(name))]


def binary(c, values, x: Ref) -> list[Step]:
    name = c.choice(BINARY)
    symbol, fn, rule = BINARY[name]
    y = other_operand(c, values, x.index)
    args = (x, y) if c.integer(0, 1) else (y, x)
    if symbol and c.integer(0, 2):
        return [Step(f"{{0}} {symbol} {{1}}", fn, args, rule)]
    return [call(name, args, rule)]


def reduce_kwargs(c, ndim: int) -> dict:
    """``axis``: None, any int (negative too) or a tuple; ``keepdims`` sometimes."""
    kind = c.choice(["int", "none", "int", "tuple"] if ndim else ["none", "int"])
    if kind == "none":
        axis = None
    elif kind == "int":  # -1 first: hypothesis shrinks toward the issue's case
        axis = c.choice([-1, *range(ndim), *range(-ndim, -1)] if ndim else [0, -1])
    else:
        picked = [d for d in range(ndim) if c.integer(0, 1)]
        axis = tuple(d - ndim if c.integer(0, 1) else d for d in picked)
    kwargs = {"axis": axis}
    if c.integer(0, 1):
        kwargs["keepdims"] = True
    return kwargs


def reduce_step(c, x: Ref, name: str, kwargs: dict) -> Step:
    rule = reduction_rule(name, kwargs)
    if c.integer(0, 1):
        text = f"{{0}}.{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        return Step(text, lambda v: getattr(v, name)(**kwargs), (x,), rule)
    return call(name, (x,), rule, **kwargs)


def reduction(c, values, x: Ref) -> list[Step]:
    name = c.choice(["sum", "sum", "mean", "max", "min", "prod"])
    return [reduce_step(c, x, name, reduce_kwargs(c, np.ndim(values[x.index])))]


def row_pattern(c, values, x: Ref) -> list[Step]:
    """``x - x.max(axis=k, keepdims=...)``, ``x / x.sum(...)`` and the like: a reduction's
    result consumed by its own operand, broadcast (or not) along the axes it keeps; or a
    whole softmax."""
    ndim = np.ndim(values[x.index])
    n = len(values)
    kwargs = reduce_kwargs(c, ndim)
    if c.integer(0, 3) == 0:  # softmax: e = exp(x - max(x)); e / sum(e)
        sub = BINARY["subtract"]
        return [
            reduce_step(c, x, "max", kwargs),
            Step("{0} - {1}", sub[1], (x, Ref(n)), sub[2]),
            call("exp", (Ref(n + 1),), unary_rule("exp")),
            reduce_step(c, Ref(n + 2), "sum", kwargs),
            Step("{0} / {1}", operator.truediv, (Ref(n + 2), Ref(n + 3)),
                 BINARY["true_divide"][2]),
        ]
    name = c.choice(["max", "min", "sum", "mean"])
    symbol, fn, rule = BINARY[c.choice(["subtract", "true_divide", "add", "multiply"])]
    args = (x, Ref(n)) if c.integer(0, 2) else (Ref(n), x)
    return [reduce_step(c, x, name, kwargs), Step(f"{{0}} {symbol} {{1}}", fn, args, rule)]


def reshape_target(c, shape: tuple) -> tuple:
    """A shape of as many elements: the prime factors spread over up to 3 dimensions."""
    size = math.prod(shape)
    ndim = c.integer(0 if size == 1 else 1, 3)
    dims = [1] * ndim
    if size == 0:
        dims[c.integer(0, ndim - 1)] = 0
    else:
        p, rest = 2, size
        while rest > 1:
            while rest % p == 0:
                dims[c.integer(0, ndim - 1)] *= p
                rest //= p
            p += 1
    if dims and c.integer(0, 1) and size:  # NumPy rejects a -1 beside a 0
        dims[c.integer(0, ndim - 1)] = -1
    return tuple(dims)


def structural(c, values, x: Ref) -> list[Step]:
    shape = np.shape(values[x.index])
    ndim = len(shape)
    kind = c.choice(["reshape", "transpose", "T", "swapaxes", "expand_dims", "squeeze",
                     "slice", "broadcast_to"])
    if kind == "reshape":
        target = reshape_target(c, shape)
        return [Step(f"{{0}}.reshape({target!r})", lambda v: v.reshape(target), (x,),
                     same(lambda e: e.reshape(target)))]
    if kind == "transpose" and ndim:
        perm = c.choice(itertools.permutations(range(ndim)))
        return [call("transpose", (x,), same(lambda e: e.transpose(perm)), perm)]
    if kind == "swapaxes" and ndim:
        a, b = c.integer(-ndim, ndim - 1), c.integer(-ndim, ndim - 1)
        return [call("swapaxes", (x,), same(lambda e: e.swapaxes(a, b)), a, b)]
    if kind == "expand_dims":
        axis = c.integer(-ndim - 1, ndim)
        return [call("expand_dims", (x,), same(lambda e: np.expand_dims(e, axis)), axis)]
    if kind == "squeeze" and 1 in shape:
        return [call("squeeze", (x,), same(np.squeeze))]
    if kind == "slice" and ndim:
        key = tuple(c.choice([slice(None), slice(None, None, -1), slice(1, None), slice(0, 1),
                              0, -1, None]) for _ in range(c.integer(1, ndim)))
        text = ", ".join(_show_index(k) for k in key)
        return [Step(f"{{0}}[{text}]", lambda v: v[key], (x,), same(lambda e: e[key]))]
    if kind == "broadcast_to":
        target = (c.integer(1, 3),) * c.integer(0, 1) + tuple(
            c.choice([1, 2, 3]) if n == 1 else n for n in shape)
        return [call("broadcast_to", (x,), same(lambda e: np.broadcast_to(e, target)), target)]
    return [Step("{0}.T", lambda v: v.T, (x,), same(lambda e: e.T))]


def _show_index(k) -> str:
    if k is None:
        return "None"
    if isinstance(k, slice):
        text = ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step))
        return text.removesuffix(":")
    return str(k)


def matmul(c, values, x: Ref) -> list[Step]:
    a = values[x.index]
    if np.ndim(a) == 0:
        return binary(c, values, x)
    fits = []
    for j in floats_in(values):
        if np.ndim(values[j]) == 0:
            continue
        try:
            np.matmul(np.empty(np.shape(a)), np.empty(np.shape(values[j])))
        except ValueError:
            continue
        fits.append(j)
    if fits and c.integer(0, 2):
        return [Step("{0} @ {1}", operator.matmul, (x, Ref(c.choice(fits))),
                     rounded(2, matmul_rule))]
    if np.ndim(a) < 2:
        return [Step("{0} @ {1}", operator.matmul, (x, x), rounded(2, matmul_rule))]
    return [Step("{0} @ {1}.swapaxes(-1, -2)", lambda p, q: p @ q.swapaxes(-1, -2), (x, x),
                 rounded(2, lambda eps, xs, es, r: matmul_rule(
                     eps, [xs[0], xs[1].swapaxes(-1, -2)], [es[0], es[1].swapaxes(-1, -2)], r)))]


def select(c, values, x: Ref) -> list[Step]:
    """``np.where(x < y, a, b)``: a comparison of float values feeding a where."""
    symbol = COMPARISONS[c.choice(COMPARISONS)]
    y = other_operand(c, values, x.index)
    n = len(values)
    compare = Step(f"{{0}} {symbol} {{1}}", getattr(operator, _OPS[symbol]), (x, y),
                   comparison_rule)
    first = Ref(c.choice(floats_in(values)))
    second = other_operand(c, values, first.index) if c.integer(0, 3) else x
    return [compare, call("where", (Ref(n), first, second), where_rule)]


_OPS = {"<": "lt", ">": "gt", "<=": "le", ">=": "ge"}


def clip(c, values, x: Ref) -> list[Step]:
    lo = c.choice([-10, -1.0, 0.5])
    hi = c.choice([1.0, 2.0, 10])
    return [call("clip", (x,), same(lambda e: e), lo, hi)]


def axis_of(c, ndim: int):
    """An axis to sort or select along: any int (negative too) or None (flattened)."""
    return c.choice([-1, *range(ndim), *range(-ndim, -1), None] if ndim else [None, 0])


def along(axis, fn: Callable, keepdims: bool = False) -> Callable:
    """``fn`` (max, say) of a value along ``axis``, 0 for an empty axis."""
    return lambda e: fn(np.asarray(e, np.float64), axis=axis, keepdims=keepdims, initial=0.0)


def order_rule(axis, keepdims: bool, ulps: float) -> Rule:
    """An order statistic (a sorted element, a median, an interpolated quantile) moves by
    at most its axis's largest error; interpolating rounds by ``ulps`` eps of the axis's
    largest magnitude."""
    def rule(eps, xs, es, r):
        big = along(axis, np.max, keepdims)
        return big(es[0]) + ulps * eps * big(mag(xs[0]))

    return rule


def ranks_rule(axis) -> Rule:
    """Ranks (argsort, argmax) are exact when every two elements of an axis are further
    apart than their errors could move them, as comparisons are."""
    def rule(eps, xs, es, r):
        x, e = np.asarray(xs[0], np.float64), np.broadcast_to(es[0], np.shape(xs[0]))
        if axis is None:
            x, e = x.ravel(), e.ravel()
        else:  # (the axis last)
            x, e = np.moveaxis(x, axis, -1), np.moveaxis(e, axis, -1)
        order = np.argsort(x, axis=-1, kind="stable")
        x, e = np.take_along_axis(x, order, -1), np.take_along_axis(e, order, -1)
        gap = x[..., 1:] - x[..., :-1]
        scale = np.maximum(mag(x[..., 1:]), mag(x[..., :-1]))
        if not np.all(gap > 2 * SLACK * (e[..., 1:] + e[..., :-1]) + 8 * eps * scale):
            return None
        return 0.0

    return rule


def cumulative_rule(axis) -> Rule:
    """Running sums: the sum rule at every prefix, in any summation order."""
    def rule(eps, xs, es, r):
        (x,), (e,) = xs, es
        e = np.broadcast_to(e, np.shape(x))
        n = np.size(x) if axis is None else np.shape(x)[axis]
        return np.cumsum(e, axis=axis) + n * eps * np.cumsum(mag(x), axis=axis)

    return rounded(2, rule)


def ordering(c, values, x: Ref) -> list[Step]:
    """Order statistics of inexact values: sort, a partition's kth element, median,
    quantile, percentile, argsort, argmax; running sums, maxima and minima."""
    ndim = np.ndim(values[x.index])
    axis = axis_of(c, ndim)
    kind = c.choice(["sort", "partition", "median", "quantile", "percentile", "argsort",
                     "argmax", "cumsum", "maximum", "minimum"])
    if kind == "sort":
        return [call("sort", (x,), order_rule(axis, axis is not None, 0), axis=axis)]
    if kind == "partition" and isinstance(axis, int) and ndim:
        n = np.shape(values[x.index])[axis]
        k = c.integer(0, max(n - 1, 0))
        key = [":"] * (axis % ndim) + [str(k)]
        pick = (slice(None),) * (axis % ndim) + (k,)
        return [Step(f"np.partition({{0}}, {k}, axis={axis})[{', '.join(key)}]",
                     lambda v: np.partition(v, k, axis=axis)[pick], (x,),
                     order_rule(axis, False, 0))]
    if kind in ("median", "quantile", "percentile"):
        keepdims = bool(c.integer(0, 1))
        if kind == "median":
            return [call("median", (x,), order_rule(axis, keepdims, 2), axis=axis,
                         keepdims=keepdims)]
        q = c.choice([0.25, 0.5, 0.0, 1.0, (0.25, 0.75), 0.875])
        if kind == "percentile":
            q = tuple(100 * v for v in q) if isinstance(q, tuple) else 100 * q
        return [call(kind, (x,), order_rule(axis, keepdims, 4), q, axis=axis,
                     keepdims=keepdims)]
    if kind in ("maximum", "minimum") and isinstance(axis, int) and ndim:
        fn = getattr(np, kind).accumulate
        return [Step(f"np.{kind}.accumulate({{0}}, axis={axis})",
                     lambda v: fn(v, axis=axis), (x,), order_rule(axis, True, 0))]
    if kind in ("argsort", "argmax"):
        return [call(kind, (x,), ranks_rule(axis), axis=axis)]
    return [call("cumsum", (x,), cumulative_rule(axis), axis=axis)]


# Hypothesis shrinks a choice toward the first option: the interesting ones come first.
FAMILIES = [row_pattern, binary, unary, structural, row_pattern, reduction, unary, binary,
            structural, matmul, select, clip, ordering]

# Input shapes in terms of n (and m, which is usually n): equal dimensions are where a value
# indexed along the wrong axis still fits.
PATTERNS = ["nn", "n", "nn", "nnn", "n1", "1n", "1nn", "n1n", "nn1", "", "11", "nm", "mn",
            "nnm"]


def input_shapes(c) -> list[tuple]:
    n = c.choice([3, 2, 4, 1, 3, 2, 0])
    m = n if c.integer(0, 2) else c.integer(1, 4)
    sizes = {"n": n, "m": m, "1": 1}
    return [tuple(sizes[d] for d in c.choice(PATTERNS)) for _ in range(c.integer(1, 3))]


def run_step(step: Step, values: list, errors: list, eps: float):
    """The step's result and error bound, or None if NumPy rejects it or the bound would not
    hold (ill-conditioned, not finite, too large)."""
    xs = step.operands(values)
    es = [errors[a.index] if isinstance(a, Ref) else 0.0 for a in step.args]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # means of empty slices
            r = step.fn(*xs)
            if np.result_type(r).kind == "f" and not (
                np.all(np.isfinite(r)) and np.all(np.abs(r) <= MAX_MAGNITUDE)):
                return None
            err = step.rule(eps, xs, es, r)
            if err is None:
                return None
            err = np.broadcast_to(np.asarray(err, np.float64), np.shape(r))
    except (ValueError, IndexError, TypeError, np.exceptions.AxisError):
        return None
    if not np.all(np.isfinite(err)):
        return None
    return r, err


def build(c) -> Program:
    """A random program drawn with the chooser ``c``."""
    dtype = np.dtype(c.choice(["float32", "float64"]))
    eps = float(np.finfo(dtype).eps)
    inputs = []
    for shape in input_shapes(c):
        lo, hi = c.choice([(-2.0, 2.0), (0.5, 2.0)])
        inputs.append(c.array(dtype, shape, lo, hi))
    values, errors = list(inputs), [np.zeros(x.shape) for x in inputs]
    steps: list[Step] = []
    target = c.integer(3, 8)
    for _ in range(4 * target):
        if len(steps) >= target:
            break
        floats = floats_in(values)
        x = Ref(floats[-1] if c.integer(0, 1) else c.choice(floats))  # mostly chains
        family = c.choice(FAMILIES)(c, values, x)
        done = []
        for step in family:
            result = run_step(step, values, errors, eps)
            if result is None:
                break
            done.append(step)
            values.append(result[0])
            errors.append(result[1])
        if len(done) < len(family):  # a pattern is all or nothing
            del values[len(values) - len(done):], errors[len(errors) - len(done):]
            continue
        steps += done
    last = len(values) - 1
    extra = c.choice([None, None, c.integer(0, last)])
    outputs = (last,) if extra in (None, last) else (last, extra)
    return Program(inputs, steps, outputs, values, errors)


@st.composite
def programs(draw) -> Program:
    return build(HypothesisChooser(draw))


# --------------------------------------------------------------------------- checking


def mismatches(prog: Program, got: tuple, who: str = "tracejit") -> list[str]:
    """How ``got`` (the program's outputs, computed somewhere) differs from the oracle: an
    empty list if every output has NumPy's shape and dtype, and every float element lies
    within ``SLACK`` times its error bound of the oracle's."""
    if not isinstance(got, tuple) or len(got) != len(prog.outputs):
        return [f"{who} returned {got!r}"]
    problems = []
    for g, want, i in zip(got, prog.oracle(), prog.outputs, strict=True):
        like = prog.values[i]
        if (np.shape(g), np.result_type(g)) != (np.shape(like), np.result_type(like)):
            problems.append(f"v{i}: {who} gave {np.result_type(g)} {np.shape(g)}, "
                            f"NumPy {np.result_type(like)} {np.shape(like)}")
            continue
        if np.result_type(like).kind != "f":
            if not np.array_equal(g, want):
                problems.append(f"v{i}: {who} {g!r}, oracle {want!r}")
            continue
        wide = np.asarray(want)
        diff = np.abs(np.asarray(g, wide.dtype) - wide)
        allowed = SLACK * prog.errors[i] + np.finfo(np.result_type(like)).smallest_normal
        bad = ~(diff <= allowed)  # NaN is bad
        if bad.any():
            k = np.unravel_index(np.argmax(np.where(bad, diff / allowed, 0)), bad.shape)
            k = tuple(int(j) for j in k) if np.ndim(g) else ()
            problems.append(
                f"v{i}: {who} {np.asarray(g)[k]!r} at {k}, oracle {float(wide[k])!r}, error "
                f"{float(diff[k]):.3g} > allowed {float(allowed[k]):.3g}; "
                f"{int(bad.sum())} of {bad.size} elements off"
            )
    return problems


def check(prog: Program, got: tuple) -> None:
    """NumPy's own result must meet the bound (else the bound is wrong), then ``got``."""
    assert mismatches(prog, tuple(prog.values[i] for i in prog.outputs), "NumPy") == []
    problems = mismatches(prog, got)
    assert not problems, "\n".join(problems)


def test_random_program_matches_oracle(backend):
    examples = SETTINGS.max_examples if exact(backend) else COMPILED_EXAMPLES

    @settings(SETTINGS, max_examples=examples)
    @given(prog=programs())
    def test(prog):
        check(prog, tj.jit(prog.function(), backend=backend)(*prog.inputs))

    test()


def test_random_programs_draw_what_they_should():
    """The generator reaches what the oracle is for: reductions and order statistics
    consumed later, broadcasting between equal dimensions, size 0, both dtypes (checked
    over a seeded sample)."""
    texts, dtypes, empty = [], set(), 0
    for seed in range(200):
        prog = build(RandomChooser(random.Random(seed)))
        texts.append(repr(prog))
        dtypes.add(prog.inputs[0].dtype.name)
        empty += any(x.size == 0 for x in prog.inputs)
    source = "\n".join(texts)
    for needle in ("keepdims=True", "axis=-1", "axis=None", "axis=(", "np.where", " @ ",
                   ".max(", "np.exp(", " / ", ".T", "reshape", "np.sort(", "np.partition(",
                   "np.median(", "np.quantile(", "np.percentile(", "np.argsort(", "np.argmax(",
                   "np.cumsum(", ".accumulate("):
        assert needle in source, needle
    assert dtypes == {"float32", "float64"} and empty > 0


# --------------------------------------------------------------------------- issue 11's cases


def _row_minus_sum(x):
    return x - x.sum(axis=-1)


def _over_max(x):
    return x / x.max(axis=1)


def _sum_of_size1_reductions(x0):
    t2 = np.sum(np.exp2(np.clip(x0, -10, 10)), axis=None, keepdims=True)
    t3 = t2 / (np.abs(t2) + 1)
    t4 = t3.T  # noqa: F841 (unused, as in the issue's program)
    return np.sum(t2, axis=-2, keepdims=True)


@pytest.mark.parametrize(
    ("fn", "x"),
    [
        (_row_minus_sum, np.arange(9.0).reshape(3, 3)),
        (_row_minus_sum, np.arange(27.0).reshape(3, 3, 3)),
        (_over_max, np.arange(9.0).reshape(3, 3) + 1),
        (_over_max, np.arange(27.0).reshape(3, 3, 3) + 1),
        (_sum_of_size1_reductions, np.array([[0.5]], np.float32)),
    ],
    ids=["x-x.sum(axis=-1) 3x3", "x-x.sum(axis=-1) 3x3x3", "x/x.max(axis=1) 3x3",
         "x/x.max(axis=1) 3x3x3", "size-1 reductions (1,1)"],
)
def test_issue_11_snippets(backend, fn, x):
    got = tj.jit(fn, backend=backend)(x)
    want = fn(x)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps)
