"""``np.random`` inside a traced function: draws made on every call, from NumPy's generators.

A call such as ``np.random.normal(mu, 1.0, size=3)`` or ``rng.integers(10)`` becomes one
``random`` node (``ir/random_ops.py``) that calls the same method of the same generator
when the compiled function runs, in the order the function made the calls. So a seeded
program gets bit for bit the numbers NumPy gives it, call after call, and parameters may
be traced values (they are the draw's inputs). What reaches the user's code:

* the module functions ``np.random.rand``, ``normal``, ``choice``, ``seed``... (NumPy's
  global RandomState, shared by every thread as in NumPy) are replaced while a trace runs
  (``intercept.py``);
* a ``Generator`` or ``RandomState`` passed as an argument reaches the function as a
  :class:`TracedGenerator` recording its draws; the real one comes with each call;
* ``np.random.default_rng()`` without a seed gives a TracedGenerator of a generator the
  compiled function owns: fresh numbers on every call, as NumPy's fresh generator gives.
  ``default_rng(seed)`` gives one too, put back to the seed's state by the call's first
  draw (a ``Restart``): the numbers of a new generator with that seed on every call, as
  in NumPy, with draws that may take traced parameters.

A generator the function reaches any other way (a global, a closure, ``self.rng``, a name
bound before the trace such as ``from numpy.random import rand``) would be drawn from once,
while tracing, and its numbers frozen: :func:`unfrozen` notices its state moved and raises
FrozenRandomState instead, putting the state back.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import (
    AxisError,
    FrozenRandomState,
    IndexOutOfBounds,
    InPlaceArgumentError,
    ShapeError,
    UnsupportedOperation,
)
from ..ir.random_ops import Owned, Restart, Slot
from ..ir.types import TensorType
from ..locations import SourceLocation
from . import intercept, pytree
from .core import current
from .numpy_api import stack
from .tracer import Tracer

GENERATORS = (np.random.Generator, np.random.RandomState)
_F64, _I64 = np.dtype(np.float64), np.dtype(np.int64)

# Distributions whose parameters broadcast elementwise: the dtype of their values.
_INTEGER_DISTRIBUTIONS = frozenset(
    "binomial geometric hypergeometric logseries negative_binomial poisson zipf".split())
_FLOAT_DISTRIBUTIONS = frozenset(
    "beta chisquare exponential f gamma gumbel laplace logistic lognormal noncentral_chisquare "
    "noncentral_f normal pareto power rayleigh standard_cauchy standard_exponential "
    "standard_gamma standard_normal standard_t triangular uniform vonmises wald weibull "
    "random random_sample".split())
_INTEGERS = frozenset({"randint", "integers", "random_integers"})
_VECTORS = frozenset({"multivariate_normal", "dirichlet", "multinomial",
                      "multivariate_hypergeometric"})
_OTHERS = frozenset({"rand", "randn", "choice", "permutation", "permuted", "seed",
                     "set_state"})
METHODS = _INTEGER_DISTRIBUTIONS | _FLOAT_DISTRIBUTIONS | _INTEGERS | _VECTORS | _OTHERS
# Arguments that are options, not the distribution's parameters: kept as literals.
_OPTIONS = frozenset({"size", "dtype", "out", "replace", "axis", "shuffle", "endpoint",
                      "check_valid", "tol", "method", "state"})
_WHY_NOT = {
    "shuffle": "shuffles its argument in place, which a jitted function cannot do yet; use "
               "x = rng.permutation(x) (the same numbers for a 1-d x)",
    "bytes": "returns Python bytes, not an array",
    "get_state": "would return the state at tracing time, not at each call",
    "set_bit_generator": "would replace the global generator once, while tracing",
    "get_bit_generator": "would hand out the global generator's state at tracing time",
    "spawn": "would spawn generators once, while tracing",
    "tomaxint": "is not supported",
}


# ---------------------------------------------------------------- recording a draw


def draw(source, generator: Tracer | None, cls: type, method: str, args: tuple,
         kwargs: dict):
    """Record ``generator.method(*args, **kwargs)`` (``cls`` is the generator's class) in
    the current trace; the traced result, or None for a method that returns nothing."""
    if method not in METHODS:
        why = _WHY_NOT.get(method, "is not supported")
        raise UnsupportedOperation(f"{cls.__name__}.{method} inside a jitted function: it {why}")
    bound = _signature(cls, method).bind(*args, **kwargs).arguments
    if bound.get("out") is not None:
        raise InPlaceArgumentError(f"{cls.__name__}.{method}(out=...) inside a jitted "
                                   "function: the draw would be written in place",
                                   hint="drop out= and use the returned array")
    if "size" in bound:
        bound["size"] = _size(bound["size"])
    legacy = cls is np.random.RandomState
    if method in ("seed", "set_state"):
        out, scalar = TensorType((), np.dtype(bool)), False
    else:
        out, scalar = _result_type(method, bound, legacy)
    operands = [] if generator is None else [generator]
    call_args: tuple = ()
    call_kwargs = []
    for name, value in bound.items():
        if name == "args":  # rand(d0, d1, ...)
            call_args = tuple(operator.index(d) for d in value)
        elif name in _OPTIONS or _literal(value):
            call_kwargs.append((name, value))
        else:
            call_kwargs.append((name, Slot(len(operands) - (generator is not None))))
            operands.append(_array_operand(value))
    result = current().bind("random", operands, dict(
        source=source, method=method, args=call_args, kwargs=tuple(call_kwargs),
        shape=out.shape, dtype=out.dtype, weak=out.weak))
    if method in ("seed", "set_state"):
        return None
    result._scalar = scalar
    return result


@functools.cache
def _signature(cls: type, method: str) -> inspect.Signature:
    """The signature of ``cls.method`` without ``self``."""
    sig = inspect.signature(getattr(cls, method))
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _literal(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, complex, str, np.generic))


def _array_operand(value):
    """A parameter as a draw input: a Tracer, or an array constant (a list of Tracers is
    stacked, as np.array would build it)."""
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tracer) for v in value):
        return stack(value)
    return value


def _size(size) -> tuple[int, ...] | None:
    if size is None:
        return None
    if isinstance(size, (tuple, list)):
        return tuple(operator.index(d) for d in size)
    return (operator.index(size),)


def _type(value) -> TensorType:
    if isinstance(value, Tracer):
        return value.aval
    arr = np.asarray(value)
    return TensorType(arr.shape, arr.dtype)


def _broadcast(shapes: list[tuple[int, ...]], size) -> tuple[int, ...]:
    try:
        shape = np.broadcast_shapes(*shapes) if shapes else ()
        if size is not None and np.broadcast_shapes(size, shape) != size:
            raise ValueError
    except ValueError:
        raise ShapeError(f"Output size {size} is not compatible with broadcast dimensions "
                         f"of inputs {shapes}" if size is not None else
                         "shape mismatch: objects cannot be broadcast to a single shape"
                         ) from None
    return shape if size is None else size


# ---------------------------------------------------------------- result types


def _result_type(method: str, bound: dict, legacy: bool) -> tuple[TensorType, bool]:
    """The type of the draw's result as NumPy returns it, and whether it is a scalar (a
    Python scalar is weak, as NEP 50 treats one)."""
    size = bound.get("size")
    if method in ("rand", "randn"):
        dims = tuple(operator.index(d) for d in bound.get("args", ()))
        return (TensorType(dims, _F64) if dims else TensorType((), _F64, True)), not dims
    if method in _INTEGERS:
        return _integers(method, bound, size)
    if method == "choice":
        return _choice(bound, size, legacy)
    if method in ("permutation", "permuted"):
        return _permutation(bound, legacy), False
    if method in _VECTORS:
        return _vector(method, bound, size, legacy), False
    params = [_type(v).shape for k, v in bound.items() if k not in _OPTIONS]
    shape = _broadcast(params, size)
    dtype = _I64 if method in _INTEGER_DISTRIBUTIONS else _F64
    if size is None and not shape:  # a Python float or int
        return TensorType((), dtype, True), True
    if method in ("random", "standard_normal", "standard_exponential", "standard_gamma"):
        dtype = np.dtype(bound.get("dtype", np.float64))
    return TensorType(shape, dtype), False


def _integers(method: str, bound: dict, size) -> tuple[TensorType, bool]:
    dtype = bound.get("dtype", int if method == "randint" else np.int64)
    params = [_type(bound[k]).shape for k in ("low", "high") if bound.get(k) is not None]
    shape = _broadcast(params, size)
    if size is not None or shape or method == "random_integers":
        return TensorType(shape, _I64 if method == "random_integers" else np.dtype(dtype)), \
            size is None and not shape
    if dtype is int:  # a Python int
        return TensorType((), _I64, True), True
    return TensorType((), np.dtype(dtype)), True  # a Python bool, or a NumPy scalar


def _choice(bound: dict, size, legacy: bool) -> tuple[TensorType, bool]:
    a = bound["a"]
    if isinstance(a, (int, np.integer)) or (_type(a).ndim == 0 and _type(a).dtype.kind in "iu"):
        items, item_shape, axis = _I64, (), 0  # samples of np.arange(a): a Python int alone
        if size is None:
            return TensorType((), _I64, True), True
    else:
        t = _type(a)
        if legacy and t.ndim != 1:
            raise ShapeError("a must be 1-dimensional")
        if t.ndim == 0:
            raise ShapeError("a must be a sequence or an integer, not a 0-d array")
        axis = bound.get("axis", 0)
        if not -t.ndim <= axis < t.ndim:
            raise AxisError(f"axis {axis} is out of bounds for array of dimension {t.ndim}")
        axis %= t.ndim
        items, item_shape = t.dtype, t.shape
    if size is None:
        shape = item_shape[:axis] + item_shape[axis + 1:]
        return TensorType(shape, items), not shape
    return TensorType(item_shape[:axis] + size + item_shape[axis + 1:], items), False


def _permutation(bound: dict, legacy: bool) -> TensorType:
    x = bound["x"]
    t = _type(x)
    if isinstance(x, (int, np.integer)) or (isinstance(x, Tracer) and t.weak):
        return TensorType((operator.index(x),), _I64)  # np.arange(x), x must be known
    if t.ndim == 0:
        if legacy:
            raise IndexOutOfBounds("x must be an integer or at least 1-dimensional")
        raise AxisError("axis 0 is out of bounds for array of dimension 0")
    axis = bound.get("axis", 0)
    if axis is not None and not -t.ndim <= axis < t.ndim:
        raise AxisError(f"axis {axis} is out of bounds for array of dimension {t.ndim}")
    return TensorType(t.shape, t.dtype)


def _vector(method: str, bound: dict, size, legacy: bool) -> TensorType:
    """Draws of vectors: ``size`` (or the parameters' batch shape) then the vector."""
    first = {"multivariate_normal": "mean", "dirichlet": "alpha", "multinomial": "pvals",
             "multivariate_hypergeometric": "colors"}[method]
    t = _type(bound[first])
    if t.ndim != 1 and not (method == "multinomial" and t.ndim > 1 and not legacy):
        raise ShapeError(f"{first} must be 1 dimensional")
    dtype = _F64 if method in ("multivariate_normal", "dirichlet") else _I64
    if size is not None:
        return TensorType(size + t.shape[-1:], dtype)
    batch = ()
    if method == "multinomial":
        batch = _broadcast([_type(bound["n"]).shape, t.shape[:-1]], None)
    return TensorType(batch + t.shape[-1:], dtype)


# ---------------------------------------------------------------- generators


class TracedGenerator:
    """What a traced function sees of a random generator: each method records a draw from
    the real one (``source``, see ``ir/random_ops.py``) made when the function runs."""

    __slots__ = ("_source", "_value", "_cls", "_first")

    def __init__(self, source, cls: type, value: Tracer | None = None, first=None):
        self._source = source  # "input" (then value is the generator argument), or Owned
        self._value = value
        self._cls = cls
        self._first = first  # the source of the first draw, if it differs (a Restart)

    def __getattr__(self, name: str):
        if name.startswith("_") or not hasattr(self._cls, name):
            raise AttributeError(f"{self._cls.__name__!r} object has no attribute {name!r}")
        if name not in METHODS:
            why = _WHY_NOT.get(name, "is not supported")
            raise UnsupportedOperation(f"{self._cls.__name__}.{name} inside a jitted "
                                       f"function: it {why}")
        return functools.partial(_method, self, name)

    def __repr__(self) -> str:
        return f"TracedGenerator<{self._cls.__name__}>"


def _method(gen: TracedGenerator, name: str, *args, **kwargs):
    source, gen._first = gen._first or gen._source, None
    return draw(source, gen._value, gen._cls, name, args, kwargs)


def traced_generator(value: Tracer, cls: type) -> TracedGenerator:
    """The stand-in for a generator argument of class ``cls`` (graph input ``value``)."""
    return TracedGenerator("input", cls, value)


def traced_static(value):
    """A static argument as the traced function sees it: a generator (static by identity:
    the cache key holds it, and so does the compiled function) draws on every call."""
    if isinstance(value, GENERATORS):
        return TracedGenerator(Owned(value), type(value))
    return value


# ---------------------------------------------------------------- np.random's names


def _legacy(name: str, method: str):
    def impl(original, *args, **kwargs):
        return draw("global", None, np.random.RandomState, method, args, kwargs)

    intercept.replaces(np.random, name)(impl)


for _name in sorted((METHODS - {"integers", "random", "permuted"}) | set(_WHY_NOT)
                    | {"shuffle", "random", "ranf", "sample"}):
    if hasattr(np.random, _name):
        _legacy(_name, "random_sample" if _name in ("ranf", "sample") else _name)


@intercept.replaces(np.random, "default_rng")
def _default_rng(original, seed=None):
    if isinstance(seed, TracedGenerator):  # default_rng(rng) returns rng itself
        return seed
    if seed is None:  # fresh entropy on every call: a generator the function owns
        return TracedGenerator(Owned(original()), np.random.Generator)
    if isinstance(seed, Tracer):  # its value, or a ConcretizationError naming it (which
        seed = np.asarray(seed)   # makes a Python int argument static: jit's autostatic)
    # A new generator with this seed on every call: one the function owns, restarted
    # from the seed's state by the call's first draw (draws may take traced parameters).
    owned = Owned(original(seed))
    return TracedGenerator(owned, np.random.Generator, first=Restart(owned))


# ---------------------------------------------------------------- frozen generators


@contextmanager
def unfrozen(fn, args, kwargs) -> Iterator[None]:
    """Raise FrozenRandomState if the code run inside advances a generator reachable from
    ``fn`` (its globals, closure, defaults, one level into objects) or its arguments, or
    NumPy's global RandomState: a draw tracing did not record, whose numbers would be
    frozen. The states are put back first."""
    watched = _reachable(fn, args, kwargs)
    before = [_state(g) for g, _ in watched]
    try:
        yield
    finally:
        moved = [(g, where, s) for (g, where), s in zip(watched, before, strict=True)
                 if not _same(_state(g), s)]
        for g, _, s in moved:
            _bit_generator(g).state = s
    if moved:
        where = moved[0][1]
        raise FrozenRandomState(
            f"the traced function drew random numbers from {where} while it was traced: "
            "they would be frozen into the compiled function, the same on every call",
            location=_defined_at(fn))


def _defined_at(fn) -> SourceLocation | None:
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)


def _bit_generator(g):
    return g.bit_generator if isinstance(g, np.random.Generator) else g._bit_generator


def _state(g):
    return _bit_generator(g).state


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _reachable(fn, args, kwargs) -> list[tuple[object, str]]:
    """(generator, where the function reaches it) for the generators a draw the trace
    cannot see could come from."""
    found: dict[int, tuple[object, str]] = {
        id(np.random.mtrand._rand): (np.random.mtrand._rand,
                                     "NumPy's global RandomState through a name bound "
                                     "before the trace (from numpy.random import ...)")}
    roots = [(x, "an argument") for x in pytree.flatten((args, kwargs))[0]
             if not isinstance(x, (Tracer, np.ndarray, TracedGenerator))]
    seen: set[int] = set()
    todo = [(fn, 0)]
    while todo:
        f, depth = todo.pop()
        if id(f) in seen or depth > 2:
            continue
        seen.add(id(f))
        owner = getattr(f, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            roots.append((owner, "the bound object"))
        f = getattr(f, "__wrapped__", getattr(f, "__func__", f))  # a jitted inner function
        if isinstance(f, types.FunctionType):
            found_here = _function_roots(f)
            roots += found_here
            todo += [(r, depth + 1) for r, _ in found_here if callable(r)]
    for obj, where in roots:
        _collect(obj, where, found)
    return list(found.values())


def _function_roots(f: types.FunctionType) -> list[tuple[object, str]]:
    """The objects function ``f`` reaches directly: closure cells, the globals its code
    names, its defaults."""
    code = f.__code__
    cells = zip(code.co_freevars, f.__closure__ or (), strict=False)
    roots = [(c.cell_contents, f"closure variable {n!r}") for n, c in cells if _filled(c)]
    roots += [(f.__globals__[n], f"global {n!r}") for n in _names(code) if n in f.__globals__]
    return roots + [(d, "a default argument") for d in (f.__defaults__ or ())]


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


def _collect(obj, where: str, found: dict) -> None:
    """Add ``obj`` if it is a generator (or a bound method of one), else the generators
    among its items or attributes (``rngs[0]``, ``self.rng``, ``module.rng``)."""
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, GENERATORS):
        obj = owner
    if isinstance(obj, GENERATORS):
        found.setdefault(id(obj), (obj, where))
        return
    if isinstance(obj, (list, tuple)):
        items = [(f"[{i}]", v) for i, v in enumerate(obj)]
    elif isinstance(obj, dict):
        items = [(f"[{k!r}]", v) for k, v in obj.items()]
    else:
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict) or isinstance(obj, type):
            return
        items = [(f".{k}", v) for k, v in attrs.items()]
    for name, value in items:
        if isinstance(value, GENERATORS):
            found.setdefault(id(value), (value, f"{where} (its {name})"))
