"""Differential tests: random NumPy programs must give the same results eagerly and under jit.

A program is data (its inputs, a list of steps, the values it returns) with a readable repr, so
hypothesis shrinks a failure to a short program one can paste. The strategy builds a program a
step at a time, running each step with NumPy to learn the shapes and dtypes the next step can
use. A step NumPy rejects is usually dropped but sometimes kept as the last step; NumPy then
raises for the whole program and tracejit must raise the same builtin exception class.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tracejit as tj

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

DTYPES = [np.dtype(name) for name in ("bool", "int32", "int64", "float32", "float64")]
RTOL = {np.dtype("float16"): 1e-2, np.dtype("float32"): 1e-5, np.dtype("float64"): 1e-12}

# Operands for binary ops besides program values. 2**31 does not fit int32 (OverflowError,
# except in comparisons); the rest are small so that powers and shifts stay readable.
PY_SCALARS = st.sampled_from([0, 1, 2, -3, 7, 2**31, True, False, 0.5, -1.5, 2.0, -0.0, math.nan])
NP_SCALARS = st.sampled_from(
    [np.True_, np.int32(-2), np.int64(3), np.float32(2.5), np.float64(-0.5), np.float32(np.nan)]
)
# Integers to negative integer powers raise in NumPy depending on the data: avoid them.
INT_EXPONENTS = st.sampled_from([0, 1, 2, 3, 0.5, -1.5])
PY_ARGUMENTS = st.one_of(
    st.integers(-5, 5), st.booleans(), st.floats(-10, 10), st.sampled_from([math.nan, -math.inf])
)

UNARY = (
    "negative positive absolute sign exp exp2 expm1 log log2 log10 log1p sqrt cbrt square "
    "reciprocal sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh floor "
    "ceil trunc rint logical_not invert isnan isinf isfinite"
).split()
UNARY_OPERATORS = {
    "negative": ("-{0}", operator.neg),
    "positive": ("+{0}", operator.pos),
    "absolute": ("abs({0})", abs),
    "invert": ("~{0}", operator.invert),
}
BINARY_OPERATORS = {
    "add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "floor_divide": "//",
    "remainder": "%", "power": "**", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
    "left_shift": "<<", "right_shift": ">>", "equal": "==", "not_equal": "!=", "less": "<",
    "less_equal": "<=", "greater": ">", "greater_equal": ">=",
}  # fmt: skip
BINARY = [
    *BINARY_OPERATORS,
    *"arctan2 maximum minimum fmax fmin hypot logaddexp logical_and logical_or logical_xor".split(),
]
OPERATOR_FNS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
INPLACE_FNS = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "&": operator.iand,
    "|": operator.ior, "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift,
}  # fmt: skip
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


@dataclass(frozen=True)
class Step:
    """One line of a program: ``text`` has ``{0}, {1}, ...`` for ``args`` and ``{out}``."""

    text: str
    fn: Callable[..., Any]
    args: tuple  # operands: a Ref to an earlier value or a literal scalar
    inexact: Callable[..., float] | None = None  # rounding-error scale of a float result

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
    return Step(text, lambda *xs: fn(*xs, *static, **kwargs), operands, inexact)


def method(name: str, x: Ref, *static, inexact=None, **kwargs) -> Step:
    """``x.<name>(*static, **kwargs)``."""
    text = f"{{0}}.{name}({parameters(0, static, kwargs)})"
    return Step(text, lambda v: getattr(v, name)(*static, **kwargs), (x,), inexact)


@dataclass
class Program:
    inputs: list  # arrays, NumPy scalars and (as the last input, maybe) a Python scalar
    steps: list[Step]
    outputs: tuple[int, ...]
    packing: str  # how the inputs are passed: "positional", "tuple" or "dict"

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

    def scale(self, values: list, index: int) -> float | None:
        """The rounding-error scale of value ``index``, or None if it must match exactly."""
        k = index - len(self.inputs)
        if k < 0 or self.steps[k].inexact is None or np.result_type(values[index]).kind != "f":
            return None
        return self.steps[k].inexact(*self.steps[k].operands(values))

    def __repr__(self) -> str:
        names = [f"v{i}" for i in range(len(self.inputs))]
        lines = {
            "positional": [f"def program({', '.join(names)}):"],
            "tuple": ["def program(args):", f"    ({', '.join(names)},) = args"],
            "dict": ["def program(d):", f"    {', '.join(names)} = "
                     + ", ".join(f"d[{n!r}]" for n in names)],
        }[self.packing]  # fmt: skip
        lines += [f"    {s.render(f'v{len(names) + k}')}" for k, s in enumerate(self.steps)]
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        lines += [f"# {name} = {x!r}" for name, x in zip(names, self.inputs, strict=True)]
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
    """A new input of the same dtype and shape as ``x`` (and a NumPy scalar if ``x`` is one)."""
    array = draw(arrays(x.dtype, np.shape(x)))
    return array[()] if isinstance(x, np.generic) else array


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
    return draw(INT_EXPONENTS)


def unary(draw, values, pool, scalar_args) -> Step:
    x = Ref(draw(st.sampled_from(pool)))
    name = draw(st.sampled_from(UNARY))
    if name in UNARY_OPERATORS and draw(st.booleans()):
        text, fn = UNARY_OPERATORS[name]
        return Step(text, fn, (x,))
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
        return Step(f"{{0}} {symbol} {{1}}", OPERATOR_FNS[symbol], args)
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
    arrays = [i for i in pool if np.ndim(values[i]) >= 1] or pool
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


FAMILIES = [unary, binary, binary, inplace, reduction, structural, basic_index, where, clip, astype,
            matmul]  # fmt: skip


@st.composite
def programs(draw, scalar_arg: bool = False) -> Program:
    shapes = draw(hnp.mutually_broadcastable_shapes(
        num_shapes=draw(st.integers(1, 3)), min_dims=0, max_dims=3, min_side=0, max_side=4
    )).input_shapes  # fmt: skip
    inputs = []
    for shape in shapes:
        array = draw(arrays(draw(st.sampled_from(DTYPES)), shape))
        inputs.append(array[()] if array.ndim == 0 and draw(st.booleans()) else array)
    scalar_args = [len(inputs)] if scalar_arg else []
    if scalar_arg:
        inputs.append(draw(PY_ARGUMENTS))

    values, steps, inexact = list(inputs), [], set()
    target, attempts = draw(st.integers(1, 8)), 0
    while len(steps) < target and attempts < 3 * target:
        attempts += 1
        pool = [i for i in range(len(values)) if i not in inexact and i not in scalar_args]
        step = draw(st.sampled_from(FAMILIES))(draw, values, pool, scalar_args)
        try:
            result = step.run(values)
        except Exception:
            if draw(st.integers(0, 4)) == 0:  # keep the rejected step: the program must raise
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
    return Program(inputs, steps, (returnable[-1], *extra), packing)


# --------------------------------------------------------------------------- checking


def builtin_error(exc: Exception) -> type | tuple[type, ...]:
    """The builtin exception class(es) tracejit must raise where NumPy raised ``exc``."""
    if isinstance(exc, np.exceptions.AxisError):
        return (ValueError, IndexError)
    return next(cls for cls in type(exc).__mro__ if cls.__module__ == "builtins")


def assert_same(got: Any, want: Any, scale: float | None = None) -> None:
    """``got`` is NumPy's ``want``: 0-d results as NumPy scalars, same shape, dtype and values
    (NaN equal to NaN, zeros' signs compared); within rounding of ``scale`` if one is given."""
    want = np.asarray(want)
    kind = np.generic if want.ndim == 0 else np.ndarray
    assert isinstance(got, kind), f"expected {kind.__name__}, got {type(got).__name__}"
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    if scale is not None:
        rtol = RTOL[want.dtype]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True)
        return
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        negative = np.signbit(got) & ~np.isnan(got)
        np.testing.assert_array_equal(negative, np.signbit(want) & ~np.isnan(want), "signbit")


def check_call(f: Callable, prog: Program, inputs: list) -> None:
    """Call the jitted ``f`` on ``inputs`` and compare with running ``prog`` in NumPy."""
    try:
        values = prog.evaluate(inputs)
    except Exception as exc:
        with pytest.raises(builtin_error(exc)) as info:
            f(*prog.pack(inputs))
        assert isinstance(info.value, tj.errors.TracejitError)
        return
    before = [np.copy(x) for x in inputs]
    got = f(*prog.pack(inputs))
    assert isinstance(got, tuple) and len(got) == len(prog.outputs)
    for out, index in zip(got, prog.outputs, strict=True):
        assert_same(out, values[index], prog.scale(values, index))
    for x, original in zip(inputs, before, strict=True):
        np.testing.assert_array_equal(x, original, "jit mutated an input")


@SETTINGS
@given(prog=programs())
def test_random_program_matches_numpy(backend, prog):
    check_call(tj.jit(prog.function(), backend=backend), prog, prog.inputs)


@SETTINGS
@given(prog=programs(), data=st.data())
def test_second_call_with_new_values_is_correct(backend, prog, data):
    f = tj.jit(prog.function(), backend=backend)
    check_call(f, prog, prog.inputs)
    check_call(f, prog, [data.draw(values_like(x)) for x in prog.inputs])


@SETTINGS
@given(prog=programs(scalar_arg=True), scalars=st.lists(PY_ARGUMENTS, min_size=1, max_size=3))
def test_python_scalar_argument_can_change_between_calls(backend, prog, scalars):
    f = tj.jit(prog.function(), backend=backend)
    for s in [prog.inputs[-1], *scalars]:
        check_call(f, prog, [*prog.inputs[:-1], s])
