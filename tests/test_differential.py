"""Differential tests: random NumPy programs must give the same results eagerly and under jit.

A program is data (its inputs, a list of steps, the values it returns) with a readable repr, so
hypothesis shrinks a failure to a short program one can paste. The strategy builds a program a
step at a time, running each step with NumPy to learn the shapes and dtypes the next step can
use. A step NumPy rejects is usually dropped but sometimes kept as the last step; NumPy then
raises for the whole program and tracejit must raise the same builtin exception class.

Array arguments come in various memory layouts holding the same values (``Layout``: byte
order, strides, Fortran order, read-only, unaligned); NumPy's results depend on the values
only, so the expected ones come from the plain arrays.

Results whose rounding may differ from NumPy's are inexact: later steps may not use them (a
rounding difference would be amplified: by ``floor``, a comparison, a cast to int) and they
are compared within a tolerance. Everywhere that is matmul and the moments; on a compiled
backend also float math (within the math routines' ULP bound) and float sums and products.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any

import numpy as np
import pytest
from draws import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy_compare import TRANSCENDENTAL, ULP, assert_same, builtin_error, exact

import tracejit as tj
from tracejit.backends.cpu.loops_straight import rounds_differently

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's empty-slice notes
SETTINGS = settings(
    max_examples=examples(75),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# A compiled backend compiles kernels for every new program (~0.2-0.5 s each): fewer examples.
COMPILED_EXAMPLES = 50

DTYPES = [np.dtype(name) for name in ("bool", "int32", "int64", "float32", "float64")]

# Operands for binary ops besides program values. 2**31 does not fit int32 (OverflowError,
# except in comparisons); the rest are small so that powers and shifts stay readable.
PY_SCALARS = st.sampled_from([0, 1, 2, -3, 7, 2**31, True, False, 0.5, -1.5, 2.0, -0.0, math.nan])
NP_SCALARS = st.sampled_from(
    [np.True_, np.int32(-2), np.int64(3), np.float32(2.5), np.float64(-0.5), np.float32(np.nan)]
)
# Integers to negative integer powers raise in NumPy depending on the data: avoid them. No 0.5:
# NumPy computes ``x ** 0.5`` as sqrt for arrays but as pow for NumPy scalars (-0.0, -inf).
EXPONENTS = st.sampled_from([0, 1, 2, 3, 1.5, -1.5])
# Python scalar arguments, by type: a random program's dtypes (and so which steps are valid)
# depend on the type, so calls of one jitted program change the value only.
PY_ARGUMENTS = {
    bool: st.booleans(),
    int: st.integers(-5, 5),
    float: st.floats(-10, 10) | st.sampled_from([math.nan, -math.inf]),
}

UNARY = (
    "negative positive absolute sign exp exp2 expm1 log log2 log10 log1p sqrt cbrt square "
    "reciprocal sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh floor "
    "ceil trunc rint logical_not invert isnan isinf isfinite fabs degrees radians deg2rad "
    "rad2deg signbit spacing conjugate"
).split()
UNARY_OPERATORS = {
    "negative": ("-{0}", operator.neg),
    "positive": ("+{0}", operator.pos),
    "absolute": ("abs({0})", abs),
    "invert": ("~{0}", operator.invert),
}
# (ufunc, Python operator, ``operator`` function; "i" + its name is the in-place form)
OPERATORS = [
    ("add", "+", "add"),
    ("subtract", "-", "sub"),
    ("multiply", "*", "mul"),
    ("true_divide", "/", "truediv"),
    ("floor_divide", "//", "floordiv"),
    ("remainder", "%", "mod"),
    ("power", "**", "pow"),
    ("bitwise_and", "&", "and_"),
    ("bitwise_or", "|", "or_"),
    ("bitwise_xor", "^", "xor"),
    ("left_shift", "<<", "lshift"),
    ("right_shift", ">>", "rshift"),
    ("equal", "==", "eq"),
    ("not_equal", "!=", "ne"),
    ("less", "<", "lt"),
    ("less_equal", "<=", "le"),
    ("greater", ">", "gt"),
    ("greater_equal", ">=", "ge"),
]
BINARY_OPERATORS = {ufunc: symbol for ufunc, symbol, _ in OPERATORS}
UFUNCS = {symbol: ufunc for ufunc, symbol, _ in OPERATORS}
OPERATOR_FNS = {symbol: getattr(operator, name) for _, symbol, name in OPERATORS}
INPLACE_FNS = {
    symbol: getattr(operator, "i" + name.rstrip("_"))
    for _, symbol, name in OPERATORS
    if hasattr(operator, "i" + name.rstrip("_"))
}
BINARY = [
    *BINARY_OPERATORS,
    *"arctan2 maximum minimum fmax fmin hypot logaddexp logical_and logical_or logical_xor "
     "logaddexp2 heaviside copysign float_power fmod gcd lcm nextafter ldexp".split(),
]
REDUCTIONS = "sum prod mean var std max min amax amin argmax argmin any all".split()
REDUCE_METHODS = set(REDUCTIONS) - {"amax", "amin"}
UFUNC_REDUCTIONS = "add multiply maximum minimum logical_and logical_or".split()


def max_abs(*arrays) -> float:
    """The largest finite magnitude in the arrays (0.0 if none): the scale of rounding errors."""
    return max(
        float(np.abs(a[np.isfinite(a)]).max(initial=0.0))
        for a in (np.asarray(x, dtype=np.float64) for x in arrays)
    )


# Rounding-error scales of the ops whose decomposition may round differently from NumPy.
INEXACT_SCALES = {
    "mean": max_abs,
    "std": max_abs,
    "var": lambda x: max_abs(x) ** 2,
    "matmul": lambda a, b: np.shape(a)[-1] * max_abs(a) * max_abs(b),
}
# ... and on a compiled backend, which accumulates in another order than NumPy.
ORDER_SCALES = {
    "sum": lambda x: np.size(x) * max_abs(x),
    "add.reduce": lambda x: np.size(x) * max_abs(x),
    "prod": lambda x: 0.0,  # relative error only
    "multiply.reduce": lambda x: 0.0,
    "cumsum": lambda x: np.size(x) * max_abs(x),  # CuPy's scans add in a tree order
    "cumprod": lambda x: 0.0,
    "median": max_abs,  # a mean of two, fused into a kernel
    "quantile": max_abs,  # NumPy's lerp, fused
    "percentile": max_abs,
}
SORT_KINDS = [None, "stable", "quicksort", "heapsort"]
QUANTILE_METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf", "hazen",
                    "median_unbiased"]


# --------------------------------------------------------------------------- programs as data


@dataclass(frozen=True)
class Ref:
    """An operand that is an earlier value of the program."""

    index: int

    def __repr__(self) -> str:
        return f"v{self.index}"


def show(value: Any) -> str:
    if isinstance(value, type):
        return f"np.{value.__name__}"
    if isinstance(value, slice):
        text = ":".join("" if v is None else str(v) for v in (value.start, value.stop, value.step))
        return text.removesuffix(":")
    if value is Ellipsis:
        return "..."
    return repr(value)


def literal(x: Any) -> str:
    """A one-line expression for an input."""
    if not isinstance(x, np.ndarray):
        return repr(x)
    text = f"np.array({x.tolist()}, np.{x.dtype.name})"
    return f"{text}.reshape({x.shape})" if x.size == 0 else text


@dataclass(frozen=True)
class Step:
    """One line of a program: ``text`` has ``{0}, {1}, ...`` for ``args`` and ``{out}``."""

    text: str
    fn: Callable[..., Any]
    args: tuple  # operands: a Ref to an earlier value or a literal scalar
    # how a float result may differ: None (exact), ULP or a function of the operands giving the
    # rounding-error scale
    inexact: Callable[..., float] | object | None = None
    op: str = ""  # the ufunc, reduction or function it calls, if any

    def operands(self, values: list) -> list:
        return [values[a.index] if isinstance(a, Ref) else a for a in self.args]

    def run(self, values: list) -> Any:
        return self.fn(*self.operands(values))

    def render(self, out: str) -> str:
        return f"{out} = " + self.text.format(*map(show, self.args), out=out)


def parameters(n_operands: int, static: tuple, kwargs: dict) -> str:
    return ", ".join(
        [f"{{{i}}}" for i in range(n_operands)]
        + [show(p) for p in static]
        + [f"{k}={show(v)}" for k, v in kwargs.items()]
    )


def call(path: str, operands: tuple, *static, inexact=None, **kwargs) -> Step:
    """``np.<path>(*operands, *static, **kwargs)``."""
    fn = reduce(getattr, path.split("."), np)
    text = f"np.{path}({parameters(len(operands), static, kwargs)})"
    return Step(text, lambda *xs: fn(*xs, *static, **kwargs), operands, inexact, path)


def method(name: str, x: Ref, *static, inexact=None, **kwargs) -> Step:
    """``x.<name>(*static, **kwargs)``."""
    text = f"{{0}}.{name}({parameters(0, static, kwargs)})"
    return Step(text, lambda v: getattr(v, name)(*static, **kwargs), (x,), inexact, name)


# Memory layouts of an array ``{0}`` holding its values, each an expression that is both
# shown and run. A compiled backend's kernels read C-contiguous, aligned, native-order
# memory: its runner must convert every other layout as NumPy reads it.
FORMS = {
    "contiguous": "{0}",
    "strided": "np.repeat({0}, 2, axis=-1)[..., ::2]",  # (every other element)
    "reversed": "{0}[::-1].copy()[::-1]",  # (negative strides)
    "fortran": "np.asfortranarray({0})",
    "read-only": "np.broadcast_to({0}, {0}.shape)",
    "unaligned": "np.frombuffer(bytes(1) + {0}.tobytes(), {0}.dtype, {0}.size, 1)"
                 ".reshape({0}.shape)",  # (read-only too)
}
SWAPPED = "{0}.astype({0}.dtype.newbyteorder())"


def forms(x: np.ndarray) -> list[str]:
    """The forms of ``FORMS`` that fit ``x``: strides need an axis and Fortran order two to
    differ from C order; an array of 1-byte items is always aligned."""
    unfit = set()
    if x.ndim == 0:
        unfit |= {"strided", "reversed"}
    if x.ndim < 2:
        unfit.add("fortran")
    if x.dtype.itemsize == 1:
        unfit.add("unaligned")
    return [form for form in FORMS if form not in unfit]


@dataclass(frozen=True)
class Layout:
    """How an array argument lies in memory: its byte order and a form of ``FORMS``."""

    swapped: bool = False
    form: str = "contiguous"

    def expressions(self) -> list[str]:
        """What makes an array ``{0}`` laid out so, one assignment to ``{0}`` after another."""
        return [SWAPPED] * self.swapped + [FORMS[self.form]] * (self.form != "contiguous")

    def apply(self, x: Any) -> Any:
        """``x`` laid out so (an array; any other input as it is)."""
        if isinstance(x, np.ndarray):
            for expression in self.expressions():
                x = eval(expression.format("x"), {"np": np, "x": x})
        return x


PLAIN = Layout()


def lay_out(inputs: list, layouts: tuple[Layout, ...]) -> list:
    return [layout.apply(x) for x, layout in zip(inputs, layouts, strict=True)]


class Program:
    """Inputs (arrays, NumPy scalars and, last, maybe a Python scalar), steps, the indices of
    the returned values, how the inputs are passed: "positional", "tuple" or "dict", and
    each input's layout (its values are those of ``inputs``, where NumPy reads them).
    Not a dataclass, so that hypothesis prints it with ``__repr__``."""

    def __init__(self, inputs: list, steps: list[Step], outputs: tuple[int, ...], packing: str,
                 layouts: tuple[Layout, ...] | None = None):
        self.inputs, self.steps, self.outputs, self.packing = inputs, steps, outputs, packing
        self.layouts = layouts or (PLAIN,) * len(inputs)

    def pack(self, inputs: list) -> tuple:
        if self.packing == "tuple":
            return (tuple(inputs),)
        if self.packing == "dict":
            return ({f"v{i}": x for i, x in enumerate(inputs)},)
        return tuple(inputs)

    def unpack(self, args: tuple) -> list:
        if self.packing == "tuple":
            return list(args[0])
        if self.packing == "dict":
            return [args[0][f"v{i}"] for i in range(len(self.inputs))]
        return list(args)

    def evaluate(self, inputs: list) -> list:
        """All values of the program: the inputs, then one per step."""
        values = list(inputs)
        for step in self.steps:
            values.append(step.run(values))
        return values

    def function(self) -> Callable[..., tuple]:
        def program(*args):
            values = self.evaluate(self.unpack(args))
            return tuple(values[i] for i in self.outputs)

        return program

    def tolerance(self, values: list, index: int) -> object | float | None:
        """How value ``index`` may differ from NumPy's: None (exactly), ULP or a rounding-error
        scale."""
        k = index - len(self.inputs)
        if k < 0 or self.steps[k].inexact is None or np.result_type(values[index]).kind != "f":
            return None
        if self.steps[k].inexact is ULP:
            return ULP
        return self.steps[k].inexact(*self.steps[k].operands(values))

    def __repr__(self) -> str:
        names = [f"v{i}" for i in range(len(self.inputs))]
        lines = {
            "positional": [f"def program({', '.join(names)}):"],
            "tuple": ["def program(args):", f"    ({', '.join(names)},) = args"],
            "dict": [
                "def program(d):",
                f"    {', '.join(names)} = " + ", ".join(f"d[{n!r}]" for n in names),
            ],
        }[self.packing]
        lines += [f"    {s.render(f'v{len(names) + k}')}" for k, s in enumerate(self.steps)]
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        for name, x, layout in zip(names, self.inputs, self.layouts, strict=True):
            lines.append(f"# {name} = {literal(x)}")
            lines += [f"# {name} = {e.format(name)}" for e in layout.expressions()]
        return "\n" + "\n".join(lines)


# --------------------------------------------------------------------------- strategies


def elements(dtype: np.dtype) -> st.SearchStrategy:
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return st.integers(-8, 8) | st.sampled_from([int(info.min), int(info.max)])
    return st.floats(-1e6, 1e6, width=8 * dtype.itemsize) | st.sampled_from(
        [math.nan, math.inf, -math.inf, -0.0]
    )


def arrays(dtype: np.dtype, shape: tuple[int, ...]) -> st.SearchStrategy:
    return hnp.arrays(dtype, shape, elements=elements(dtype))


@st.composite
def values_like(draw, x: Any) -> Any:
    """A new input like ``x``: same dtype and shape (and kind: array, NumPy or Python scalar)."""
    if type(x) in PY_ARGUMENTS:
        return draw(PY_ARGUMENTS[type(x)])
    array = draw(arrays(x.dtype, np.shape(x)))
    return array[()] if isinstance(x, np.generic) else array


def layouts(inputs: list) -> st.SearchStrategy[tuple[Layout, ...]]:
    """A layout for each input: the plain one for NumPy and Python scalars."""

    def layout(x: Any) -> st.SearchStrategy[Layout]:
        if not isinstance(x, np.ndarray):
            return st.just(PLAIN)
        swapped = st.booleans() if x.dtype.itemsize > 1 else st.just(False)
        return st.builds(Layout, swapped, st.sampled_from(forms(x)))

    return st.tuples(*map(layout, inputs))


def operand(pool: list[int], scalar_args: list[int]) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(pool + scalar_args).map(Ref), PY_SCALARS, NP_SCALARS)


def axes(ndim: int, allow_tuple: bool = True) -> st.SearchStrategy:
    """None, an int or a tuple of ints, sometimes out of range or repeated."""
    ints = st.integers(-ndim - 1, ndim)
    options = [st.none(), ints]
    if allow_tuple:
        options.append(st.lists(ints, max_size=ndim).map(tuple))
    return st.one_of(options)


def exponent(draw, values, pool) -> Ref | float | int:
    """A float value or a small literal: NumPy rejects integers to negative integer powers
    depending on the data, which a trace cannot see."""
    floats = [i for i in pool if np.result_type(values[i]).kind == "f"]
    if floats and draw(st.booleans()):
        return Ref(draw(st.sampled_from(floats)))
    return draw(EXPONENTS)


def unary(draw, values, pool, scalar_args) -> Step:
    x = Ref(draw(st.sampled_from(pool)))
    name = draw(st.sampled_from(UNARY))
    if name in UNARY_OPERATORS and draw(st.booleans()):
        text, fn = UNARY_OPERATORS[name]
        return Step(text, fn, (x,), op=name)
    return call(name, (x,))


def binary(draw, values, pool, scalar_args) -> Step:
    name = draw(st.sampled_from(BINARY))
    x = Ref(draw(st.sampled_from(pool)))
    if name == "power":
        y = exponent(draw, values, pool)
        args = (draw(operand(pool, scalar_args)) if isinstance(y, Ref) else x, y)
    else:
        y = draw(operand(pool, scalar_args))
        args = (x, y) if draw(st.booleans()) else (y, x)
    symbol = BINARY_OPERATORS.get(name)
    if symbol and draw(st.booleans()):
        return Step(f"{{0}} {symbol} {{1}}", OPERATOR_FNS[symbol], args, op=name)
    return call(name, args)


def inplace(draw, values, pool, scalar_args) -> Step:
    """``out = x.astype(x.dtype); out op= y``: the copy keeps NumPy from mutating ``x``."""
    targets = [i for i in pool if np.ndim(values[i]) >= 1]
    if not targets:  # NumPy scalars rebind instead of casting with same_kind: no in-place
        return binary(draw, values, pool, scalar_args)
    x = Ref(draw(st.sampled_from(targets)))
    symbol = draw(st.sampled_from(sorted(INPLACE_FNS)))
    y = exponent(draw, values, pool) if symbol == "**" else draw(operand(pool, scalar_args))
    fn = INPLACE_FNS[symbol]
    return Step(
        f"{{0}}.astype({{0}}.dtype); {{out}} {symbol}= {{1}}",
        lambda a, b: fn(a.astype(a.dtype), b),
        (x, y),
        op=UFUNCS[symbol],
    )


def reduction(draw, values, pool, scalar_args) -> Step:
    i = draw(st.sampled_from(pool))
    x, ndim = Ref(i), np.ndim(values[i])
    name = draw(st.sampled_from(REDUCTIONS + [f"{u}.reduce" for u in UFUNC_REDUCTIONS]))
    kwargs = {"axis": draw(axes(ndim, allow_tuple=not name.startswith("arg")))}
    if draw(st.booleans()):
        kwargs["keepdims"] = True
    if name in ("var", "std") and draw(st.booleans()):
        kwargs["ddof"] = 1
    inexact = INEXACT_SCALES.get(name)
    if name in REDUCE_METHODS and draw(st.booleans()):
        return method(name, x, inexact=inexact, **kwargs)
    return call(name, (x,), inexact=inexact, **kwargs)


def prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


def reshape_target(draw, size: int) -> tuple[int, ...]:
    """A shape with ``size`` elements, maybe with a -1 (which NumPy rejects beside a 0)."""
    ndim = draw(st.integers(0 if size == 1 else 1, 3))
    if size == 0:
        dims = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
        dims[draw(st.integers(0, ndim - 1))] = 0
    else:
        dims = [1] * ndim
        for p in prime_factors(size):
            dims[draw(st.integers(0, ndim - 1))] *= p
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, ndim - 1))] = -1
    return tuple(dims)


STRUCTURAL = "reshape transpose T swapaxes moveaxis expand_dims squeeze flip ravel broadcast_to"


def structural(draw, values, pool, scalar_args) -> Step:
    i = draw(st.sampled_from(pool))
    x, shape = Ref(i), np.shape(values[i])
    ndim = len(shape)
    axis = st.integers(-ndim - 1, ndim)
    kind = draw(st.sampled_from(STRUCTURAL.split()))
    as_method = draw(st.booleans())
    if kind == "reshape":
        target = reshape_target(draw, math.prod(shape))
        return method("reshape", x, target) if as_method else call("reshape", (x,), target)
    if kind == "transpose":
        perm = tuple(draw(st.permutations(range(ndim))))
        return method("transpose", x, *perm) if as_method else call("transpose", (x,), perm)
    if kind == "T":
        return Step("{0}.T", lambda v: v.T, (x,))
    if kind in ("swapaxes", "moveaxis"):
        return call(kind, (x,), draw(axis), draw(axis))
    if kind == "expand_dims":
        return call(kind, (x,), draw(st.integers(-ndim - 2, ndim + 1)))
    if kind == "squeeze":
        ones = [d for d, n in enumerate(shape) if n == 1]
        return call(kind, (x,), axis=draw(st.sampled_from([None, *ones])))
    if kind == "flip":
        return call(kind, (x,), axis=draw(axes(ndim)))
    if kind == "ravel":
        return method("ravel", x) if as_method else call("ravel", (x,))
    lead = draw(st.lists(st.integers(0, 3), max_size=2))
    target = tuple(lead) + tuple(draw(st.integers(1, 3)) if n == 1 else n for n in shape)
    return call("broadcast_to", (x,), target)


def basic_index(draw, values, pool, scalar_args) -> Step:
    i = draw(st.sampled_from(pool))
    shape = np.shape(values[i])
    key = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    key = key if isinstance(key, tuple) else (key,)
    if shape and draw(st.integers(0, 4)) == 0:  # an integer, maybe out of range: IndexError
        key = (draw(st.integers(-shape[0] - 2, shape[0] + 1)),)
    text = ", ".join(map(show, key)) if key else "()"
    return Step(f"{{0}}[{text}]", lambda v: v[key], (Ref(i),))


def combine(draw, values, pool, scalar_args) -> Step:
    """``np.concatenate`` or ``np.stack`` of two values, mostly of one shape."""
    i = draw(st.sampled_from(pool))
    same = [j for j in pool if np.shape(values[j]) == np.shape(values[i])]
    j = draw(st.sampled_from(same) | st.sampled_from(pool))
    name = draw(st.sampled_from(["concatenate", "stack"]))
    ndim = np.ndim(values[i])
    axis = draw(st.integers(-ndim - 1, ndim + 1))
    fn = getattr(np, name)
    return Step(
        f"np.{name}([{{0}}, {{1}}], axis={axis})",
        lambda a, b: fn([a, b], axis=axis),
        (Ref(i), Ref(j)),
    )


def take(draw, values, pool, scalar_args) -> Step:
    """Integer-array indexing with a constant index: ``np.take``, ``x[idx]``, ``x[:, idx]``."""
    i = draw(st.sampled_from(pool))
    shape = np.shape(values[i])
    form = draw(st.sampled_from(["take", "[idx]", "[:, idx]"]))
    if form == "take":
        axis = draw(st.sampled_from([None, 0, -1]))
    else:
        axis = 0 if form == "[idx]" else 1
    if axis is None:
        n = math.prod(shape)
    else:
        n = shape[axis] if -len(shape) <= axis < len(shape) else 0
    # Maybe out of range: IndexError (NumPy checks once per position before the axis).
    idx = np.array(draw(st.lists(st.integers(-n - 1, n), max_size=4)), np.int64)
    if form == "take":
        return call("take", (Ref(i),), idx, axis=axis)
    key = idx if form == "[idx]" else (slice(None), idx)
    return Step(f"{{0}}{form.replace('idx', repr(idx))}", lambda v: v[key], (Ref(i),))


def where(draw, values, pool, scalar_args) -> Step:
    cond = Ref(draw(st.sampled_from(pool)))
    return call("where", (cond, draw(operand(pool, scalar_args)), draw(operand(pool, scalar_args))))


def clip(draw, values, pool, scalar_args) -> Step:
    x = Ref(draw(st.sampled_from(pool)))
    lo, hi = (draw(st.none() | operand(pool, scalar_args)) for _ in "lh")
    if draw(st.booleans()):
        return Step("{0}.clip({1}, {2})", lambda v, a, b: v.clip(a, b), (x, lo, hi))
    return call("clip", (x, lo, hi))


def astype(draw, values, pool, scalar_args) -> Step:
    return method("astype", Ref(draw(st.sampled_from(pool))), draw(st.sampled_from(DTYPES)).type)


def can_matmul(a, b) -> bool:
    try:
        np.matmul(np.empty(np.shape(a)), np.empty(np.shape(b)))
    except ValueError:
        return False
    return True


def matmul(draw, values, pool, scalar_args) -> Step:
    """A product of two values that fit, else of a value with (its transpose or) itself."""
    arrays = [i for i in pool if np.ndim(values[i]) >= 1]
    if not arrays:  # NumPy scalars have no ``@`` (TypeError) where 0-d arrays have ValueError
        return binary(draw, values, pool, scalar_args)
    i = draw(st.sampled_from(arrays))
    partners = [j for j in arrays if can_matmul(values[i], values[j])]
    inexact = INEXACT_SCALES["matmul"]
    if partners and draw(st.booleans()):
        args = (Ref(i), Ref(draw(st.sampled_from(partners))))
        if draw(st.booleans()):
            return Step("{0} @ {1}", operator.matmul, args, inexact)
        return call("matmul", args, inexact=inexact)
    if np.ndim(values[i]) < 2:
        return Step("{0} @ {1}", operator.matmul, (Ref(i), Ref(i)), inexact)
    return Step(
        "{0} @ {1}.swapaxes(-1, -2)", lambda a, b: a @ b.swapaxes(-1, -2), (Ref(i), Ref(i)), inexact
    )


ACCUMULATING = [f"{u}.accumulate" for u in ("maximum", "minimum", "fmax", "fmin", "add",
                                             "multiply", "logical_or", "logical_and")]


def ordering(draw, values, pool, scalar_args) -> Step:
    """Sorts, partitions, order statistics and scans (cumsum, ufunc.accumulate) along a
    drawn axis: their values, and which of equal elements (-0.0 and 0.0, NaN) lands where,
    are NumPy's."""
    i = draw(st.sampled_from(pool))
    x, ndim = Ref(i), np.ndim(values[i])
    name = draw(st.sampled_from(["sort", "argsort", "partition", "argpartition", "median",
                                 "quantile", "percentile", "cumsum", "cumprod",
                                 *ACCUMULATING, "cumulative_sum", "isin", "lexsort",
                                 "histogram", "insert", "delete"]))
    axis = draw(axes(ndim, allow_tuple=name in ("median", "quantile", "percentile")))
    if name in ("cumulative_sum", "isin", "lexsort", "histogram", "insert", "delete"):
        return _more_ordering(draw, values, pool, x, name, axis)
    if name in ("sort", "argsort"):
        return call(name, (x,), axis=axis, kind=draw(st.sampled_from(SORT_KINDS)))
    if name in ("partition", "argpartition"):  # kth maybe out of range: ValueError
        kth = draw(st.integers(-5, 4) | st.lists(st.integers(-5, 4), min_size=1, max_size=3))
        return call(name, (x,), kth, axis=axis)
    if name in ("cumsum", "cumprod", *ACCUMULATING):
        return call(name, (x,), axis=axis)
    kwargs = {"axis": axis, "keepdims": draw(st.booleans())}
    if name == "median":
        return call(name, (x,), **kwargs)
    q = draw(st.sampled_from([0.5, 0.0, 1.0, 0.37, [0.1, 0.5, 0.9]]))
    q = np.multiply(q, 100).tolist() if name == "percentile" else q
    return call(name, (x,), q, method=draw(st.sampled_from(QUANTILE_METHODS)), **kwargs)


def _more_ordering(draw, values, pool, x: Ref, name: str, axis) -> Step:
    """cumulative_sum, isin, lexsort, histogram (counts or edges, a static range: NumPy
    raises for a range read from data that is not finite), insert and delete."""
    y = Ref(draw(st.sampled_from(pool)))
    if name == "cumulative_sum":
        return call(name, (x,), axis=axis, include_initial=draw(st.booleans()))
    if name == "isin":
        test = draw(st.sampled_from([y, [0.0, 1.0, -2.0], [np.nan, 3.0]]))
        return call(name, (x, test) if isinstance(test, Ref) else (x,),
                    *(() if isinstance(test, Ref) else (test,)), invert=draw(st.booleans()))
    if name == "lexsort":
        keys = (x, y) if np.shape(values[y.index]) == np.shape(values[x.index]) else (x, x)
        return Step(f"np.lexsort(({{0}}, {{1}}), axis={axis!r})",
                    lambda a, b: np.lexsort((a, b), axis=axis), keys, None, "lexsort")
    if name == "histogram":
        bins = draw(st.sampled_from([3, 1, [-1.0, 0.0, 0.5, 2.0]]))
        part = draw(st.sampled_from([0, 1]))
        return Step(f"np.histogram({{0}}, {bins!r}, range=(-2.0, 2.0))[{part}]",
                    lambda a: np.histogram(a, bins, range=(-2.0, 2.0))[part], (x,), None,
                    "histogram")
    obj = draw(st.integers(-3, 3) | st.lists(st.integers(-3, 3), max_size=3))
    if name == "delete":
        return call(name, (x,), obj, axis=axis)
    if draw(st.booleans()):
        return call(name, (x,), obj, 1.5, axis=axis)
    return Step(f"np.insert({{0}}, {obj!r}, {{1}}, axis={axis!r})",
                lambda a, v: np.insert(a, obj, v, axis=axis), (x, y), None, "insert")


FAMILIES = [  # binary twice: the largest family
    unary,
    binary,
    binary,
    inplace,
    reduction,
    structural,
    basic_index,
    where,
    clip,
    astype,
    matmul,
    combine,
    take,
    ordering,
]


def rounding(step: Step, exact_math: bool) -> Step:
    """``step`` with ``inexact`` set where a compiled backend (``exact_math`` False) may round
    its result differently from NumPy."""
    if step.inexact is not None or exact_math:
        return step
    if step.op in TRANSCENDENTAL:
        return replace(step, inexact=ULP)
    if step.op in ORDER_SCALES:
        return replace(step, inexact=ORDER_SCALES[step.op])
    return step


@st.composite
def programs(draw, scalar_arg: bool = False, exact_math: bool = True,
             families: tuple = tuple(FAMILIES)) -> Program:
    """A random program of steps of ``families``; ``exact_math``: the backend computes float
    math and sums as NumPy."""
    shapes = draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=draw(st.integers(1, 3)), min_dims=0, max_dims=3, min_side=0, max_side=4
        )
    ).input_shapes
    inputs = []
    for shape in shapes:
        array = draw(arrays(draw(st.sampled_from(DTYPES)), shape))
        inputs.append(array[()] if array.ndim == 0 and draw(st.booleans()) else array)
    scalar_args = [len(inputs)] if scalar_arg else []
    if scalar_arg:
        inputs.append(draw(st.one_of(*PY_ARGUMENTS.values())))
    arguments = draw(layouts(inputs))

    values, steps, inexact = list(inputs), [], set()
    target, attempts = draw(st.integers(1, 8) | st.integers(4, 8)), 0
    while len(steps) < target and attempts < 3 * target:
        attempts += 1
        pool = [i for i in range(len(values)) if i not in inexact and i not in scalar_args]
        step = draw(st.sampled_from(families))(draw, values, pool, scalar_args)
        step = rounding(step, exact_math)
        try:
            result = step.run(values)
        except Exception:
            if draw(st.integers(0, 7)) == 0:  # keep the rejected step: the program must raise
                steps.append(step)
                break
            continue
        if step.inexact is not None and np.result_type(result).kind == "f":
            inexact.add(len(values))  # its rounding may differ: no later step may use it
        steps.append(step)
        values.append(result)

    returnable = [i for i in range(len(values)) if i not in scalar_args]
    extra = draw(st.lists(st.sampled_from(returnable), max_size=2))
    packing = draw(st.sampled_from(["positional", "tuple", "dict"]))
    return Program(inputs, steps, (returnable[-1], *extra), packing, arguments)


# --------------------------------------------------------------------------- checking


def native(x: Any) -> Any:
    """``x`` in native byte order: jit, as NumPy, may return a view of a byte-swapped
    argument (``v0.T``) byte-swapped, where the expected results (from the plain inputs)
    are native; the byte order is not a value."""
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        return x.astype(x.dtype.newbyteorder("="))
    return x


def check_call(f: Callable, prog: Program, inputs: list, layouts: tuple[Layout, ...]) -> None:
    """Call the jitted ``f`` on ``inputs`` laid out as ``layouts`` and compare with running
    ``prog`` in NumPy on the plain ``inputs``."""
    arguments = lay_out(inputs, layouts)
    try:
        values = prog.evaluate(inputs)
    except Exception as exc:
        with pytest.raises(builtin_error(exc)) as info:
            f(*prog.pack(arguments))
        assert isinstance(info.value, tj.errors.TracejitError)
        return
    before = [np.copy(x) for x in arguments]
    got = f(*prog.pack(arguments))
    assert isinstance(got, tuple) and len(got) == len(prog.outputs)
    for out, index in zip(got, prog.outputs, strict=True):
        assert_same(native(out), values[index], prog.tolerance(values, index))
    for x, original in zip(arguments, before, strict=True):
        np.testing.assert_array_equal(x, original, "jit mutated an input")


def run_examples(backend: str, test: Callable, **strategies) -> None:
    """Run the hypothesis test ``test(**strategies)``: fewer examples on a compiled backend."""
    examples = SETTINGS.max_examples if exact(backend) else COMPILED_EXAMPLES
    settings(SETTINGS, max_examples=examples)(given(**strategies)(test))()


def test_random_program_matches_numpy(backend):
    def test(prog):
        check_call(tj.jit(prog.function(), backend=backend), prog, prog.inputs, prog.layouts)

    run_examples(backend, test, prog=programs(exact_math=exact(backend)))


def run_twice(backend: str) -> None:
    """Random programs jitted on ``backend``, each called twice: on its inputs, then on
    new values in drawn layouts."""
    def test(prog, data):
        f = tj.jit(prog.function(), backend=backend)
        check_call(f, prog, prog.inputs, prog.layouts)
        inputs = [data.draw(values_like(x)) for x in prog.inputs]
        check_call(f, prog, inputs, data.draw(layouts(inputs)))

    run_examples(backend, test, prog=programs(exact_math=exact(backend)), data=st.data())


def test_second_call_with_new_values_is_correct(backend):
    run_twice(backend)


def test_random_programs_with_every_intermediate_released(backend, monkeypatch):
    """The runners' releases (``backends/release.py``) apply to arrays of 1 MiB or more,
    which these programs never reach: with the threshold at 0 every intermediate is
    released after its last use, and two calls (new values the second time) must still
    give NumPy's answers."""
    from tracejit.backends import release

    monkeypatch.setattr(release, "RELEASE_MIN_BYTES", 0)
    run_twice(backend)


def test_python_scalar_argument_can_change_between_calls(backend):
    def test(prog, data):
        f = tj.jit(prog.function(), backend=backend)
        *arrays, scalar = prog.inputs
        for s in [scalar, *data.draw(st.lists(values_like(scalar), min_size=1, max_size=3))]:
            check_call(f, prog, [*arrays, s], prog.layouts)

    prog = programs(scalar_arg=True, exact_math=exact(backend))
    run_examples(backend, test, prog=prog, data=st.data())


def test_python_scalar_argument_can_change_type_between_calls(backend):
    def test(x, layout, scalars):
        prog = Program(
            [x, scalars[0]],
            [
                Step("{0} * {1}", operator.mul, (Ref(0), Ref(1))),
                call("maximum", (Ref(1), Ref(2))),
            ],
            (2, 3),
            "positional",
        )
        f = tj.jit(prog.function(), backend=backend)
        for s in scalars:
            check_call(f, prog, [x, s], (layout, PLAIN))

    run_examples(
        backend,
        test,
        x=st.sampled_from(DTYPES).flatmap(lambda dtype: arrays(dtype, (2, 3))),
        layout=st.builds(Layout, st.booleans(), st.sampled_from(list(FORMS))),
        scalars=st.lists(st.one_of(*PY_ARGUMENTS.values()), min_size=2, max_size=4),
    )


@pytest.mark.parametrize("min_size", [4096, 4])
def test_small_kernels_compiled_later_give_the_same_bits(monkeypatch, min_size):
    """With the default policy a first call runs kernels over a few elements as NumPy calls
    and compiles those of exactly rounded ops afterwards (``Runner.faster``): the calls
    after the switch must return the first call's bits, NaNs and signed zeros included.
    With a threshold of 4 elements the programs' lone exact reductions (a ``max``, an
    integer ``sum``) are above it: NumPy calls first, kernels of the later runner after.
    A later runner whose straight-line call computes an inexact op (``rounds_differently``:
    an ``arccos`` the first runner left to NumPy, found by an explore run) is held to
    NumPy's answers within tolerance only, as documented."""
    monkeypatch.setattr(tj.config, "min_kernel_size", min_size)
    swapped, rounding = [], []

    def test(prog):
        f = tj.jit(prog.function(), backend="cpu")
        try:
            first = f(*prog.pack(lay_out(prog.inputs, prog.layouts)))
        except tj.errors.TracejitError:
            return  # raising programs: check_call's business, in the tests above
        (entry,) = f._cache.values()
        assert f.wait_compiled(120)
        swapped.append(entry.pending is not None)
        check_call(f, prog, prog.inputs, prog.layouts)
        rounding.append(rounds_differently(entry.lowered.optimized_graph))
        if rounding[-1]:
            return
        for a, b in zip(f(*prog.pack(lay_out(prog.inputs, prog.layouts))), first, strict=True):
            np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
            np.testing.assert_array_equal(a, b)

    # ordering steps are library calls, never a kernel to compile later: left out, they
    # would only make fewer programs swap
    kernels = tuple(f for f in FAMILIES if f is not ordering)
    settings(SETTINGS, max_examples=60)(given(
        prog=programs(exact_math=False, families=kernels))(test))()
    assert sum(swapped) >= 3, f"only {sum(swapped)} of {len(swapped)} programs were swapped"
    assert sum(rounding) <= len(rounding) // 4, f"{sum(rounding)} of {len(rounding)} unchecked"


@pytest.mark.parametrize("dtype", ["int32", "float64"])
@pytest.mark.parametrize("step", [
    call("max", (Ref(0),)),
    call("min", (Ref(0),), axis=0),
    Step("{0}.T", lambda v: v.T, (Ref(0),)),
    call("sort", (Ref(0),)),
    Step("{0} @ {0}.T", lambda a: a @ a.T, (Ref(0),)),
    Step("{0}[:, [2, 0]]", lambda v: v[:, [2, 0]], (Ref(0),)),
], ids=lambda step: step.render("out"))
def test_byte_swapped_argument_reductions_and_views(step, dtype, backend):
    """A byte-swapped argument is typed native in the IR ('>i4' holds int32 values):
    NumPy's max of it is native, its views and some results (``.T``, sort, matmul,
    ``x[idx]``) keep its order. (The layouts above found the reference backend raising
    InternalCompilerError on ``np.max`` of a '>i4' argument the IR typed '>i4'.)"""
    prog = Program([np.arange(6, dtype=dtype).reshape(2, 3)], [step], (1,), "positional",
                   (Layout(swapped=True),))
    f = tj.jit(prog.function(), backend=backend)
    check_call(f, prog, prog.inputs, prog.layouts)
    f.wait_compiled()
    check_call(f, prog, prog.inputs, prog.layouts)
