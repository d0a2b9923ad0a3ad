"""The trace being recorded: turns op applications on Tracers into IR nodes."""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from ..errors import DTypeError, InvalidArgument, ScalarOverflow, TracingError
from ..ir import Graph, Node, TensorType, Value
from ..ir.registry import COMPARISONS, REGISTRY, Kind
from ..ir.types import type_of_constant
from ..locations import user_location
from . import intercept
from .layout import kept_order, reshape_strides
from .tracer import Tracer, known_result

_state = threading.local()

# Ops whose result NumPy makes a view of their first operand (squeeze, expand_dims, ravel,
# basic indexing, .T and a complex array's .real/.imag trace to these): writing into it
# writes the operand.
VIEW_OPS = frozenset({"reshape", "transpose", "broadcast_to", "slice", "real", "imag"})


# ndarray subclasses that are plain memory with nothing to honour beyond the data.
_PLAIN_SUBCLASSES = (np.memmap,)
# Class attributes every subclass has or may define without changing what arrays mean.
_HARMLESS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                       "__new__", "__init__", "__slots__", "__annotations__",
                       "__firstlineno__", "__static_attributes__", "__orig_bases__",
                       "__parameters__", "__init_subclass__", "__class_getitem__"})
_KNOWN = {
    np.matrix: "an np.matrix (its * and ** are matrix products, its results stay 2-D)",
    np.ma.MaskedArray: "a masked array (jit would drop its mask)",
    np.recarray: "a record array (np.recarray)",
}


def array_problem(x: np.ndarray) -> tuple[str, str] | None:
    """(what ``x`` is, the hint) when jit cannot honour what NumPy would do with it: an
    ndarray subclass that changes operators or results (np.matrix, masked arrays), or a
    dtype jit does not compute with (structured, object, strings). None for a plain
    array, np.memmap and subclasses that override nothing of ndarray's: those are plain
    memory, read as ndarrays (results come back as plain ndarrays)."""
    problem = _subclass_problem(type(x)) if type(x) is not np.ndarray else None
    if problem is not None:
        return problem, ("pass np.asarray(x) if the plain-array meaning is what you want "
                         "(results come back as plain ndarrays)")
    if x.dtype.kind not in "biufc":
        what = ("a structured dtype" if x.dtype.names else
                "an object array" if x.dtype.kind == "O" else f"dtype {x.dtype}")
        return what, ("use bool, integer, float or complex arrays: pass fields separately "
                      "(x['name']) or convert with x.astype(np.float64)")
    return None


@functools.cache
def _subclass_problem(cls: type) -> str | None:
    """What keeps jit from treating instances of ``cls`` as plain ndarrays, or None.
    Cached per class: this runs on every call that is not all plain arrays."""
    for base in cls.__mro__:
        if base in _KNOWN:
            return _KNOWN[base]
    for base in cls.__mro__:
        if base is np.ndarray or base in _PLAIN_SUBCLASSES:
            break
        overrides = sorted(n for n in vars(base) if n not in _HARMLESS
                           and hasattr(np.ndarray, n))
        if overrides:
            return (f"a {cls.__qualname__}, whose class overrides ndarray's "
                    f"{', '.join(overrides[:4])}{', ...' if len(overrides) > 4 else ''}")
    return None


def _check_int_literals(ufunc, operands, inputs) -> None:
    """NumPy 2 raises OverflowError for a Python int that does not fit the loop's integer
    dtype (``int8_array + 1000``, but not in comparisons). Literals are known while tracing,
    so raise now, even if the result is unused."""
    if not any(type(x) is int for x in operands):
        return
    loop = ufunc.resolve_dtypes(tuple(v.type.promotion_operand() for v in inputs) +
                                (None,) * ufunc.nout)
    for x, dtype in zip(operands, loop, strict=False):
        if type(x) is int and dtype.kind in "iu" and not (
            np.iinfo(dtype).min <= x <= np.iinfo(dtype).max
        ):
            raise ScalarOverflow(f"Python integer {x} out of bounds for {dtype}")


_INT64 = np.iinfo(np.int64)


def _huge_ints_as_floats(ufunc, operands, comparison: bool) -> tuple:
    """``operands`` with each Python int beyond int64 as the float NumPy makes of it. NumPy 2
    converts such an int to the loop's dtype where that is inexact (``x * 2**81`` of a
    float32 array is float32; the int goes through a double, as ``float(2**81)`` does) and
    raises where it is an integer one, except in a ``comparison`` with integer arrays,
    which it makes exactly: an int beyond every value of the integer dtype compares as an
    infinity of its sign does. The IR's weak int constants are int64, which cannot hold
    such an int (a kernel reading one could not be compiled)."""
    if not any(type(x) is int and not _INT64.min <= x <= _INT64.max for x in operands):
        return operands
    kinds = tuple(x._value.type.promotion_operand() if isinstance(x, Tracer) else
                  type(x) if type(x) in (int, float, complex) else np.asarray(x).dtype
                  for x in operands)
    try:
        loop = ufunc.resolve_dtypes(kinds + (None,) * ufunc.nout)
    except (TypeError, ValueError):  # no loop for these: the op's rule says so, in its words
        return operands
    integers = comparison and all(np.dtype(k).kind in "iu" for k in kinds if k is not int)
    converted = []
    for x, dtype in zip(operands, loop, strict=False):
        if type(x) is int and not _INT64.min <= x <= _INT64.max:
            if integers:
                x = math.inf if x > 0 else -math.inf
            elif dtype.kind in "biu":
                raise ScalarOverflow(f"Python integer {x} out of bounds for {dtype}")
            try:
                x = float(x)
            except OverflowError:
                raise ScalarOverflow("int too large to convert to float") from None
        converted.append(x)
    return tuple(converted)


class Trace:
    """Collects the nodes of one graph. Active only while the user's function runs."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.active = True

    def new_input(self, type: TensorType, name: str):
        v = Value(type, name)
        self.inputs.append(v)
        return Tracer(v, self)

    def lift(self, x) -> Value:
        """The IR value of an operand: a Tracer of this trace, or a literal made a constant."""
        if isinstance(x, Tracer):
            if x._trace is not self or not self.active:
                raise TracingError(
                    "a traced value escaped from the function it was traced in (leaked tracer)",
                    hint="return values from the jitted function instead of storing them "
                    "in globals or closures",
                )
            return x._value
        return self.constant(x)

    def constant(self, x) -> Value:
        if type(x) is int and not _INT64.min <= x <= _INT64.max:
            # a weak int constant is an int64 (NumPy's 0-d rule): such an int, passed by
            # value or made by Python arithmetic on one, cannot be one (NumPy raises too)
            raise ScalarOverflow(f"Python integer {x} out of bounds for int64",
                                 hint="keep arithmetic on ints beyond int64 outside the "
                                 "jitted function, or make it a float first (float(n))")
        if type(x) in (int, float, complex):
            value = x
        elif isinstance(x, (bool, np.bool_)):
            value = np.bool_(x)
        elif isinstance(x, (np.generic, np.ndarray, list, tuple)):
            problem = _subclass_problem(type(x)) if isinstance(x, np.ndarray) else None
            if problem is not None:  # a closure or global np.matrix, masked array...
                raise InvalidArgument(f"cannot use {problem} as a constant in a jitted "
                                      "function", hint="use np.asarray(x) if the plain-array "
                                      "meaning is what you want")
            try:
                value = np.array(x)  # a private copy: later mutation must not change the trace
            except Exception as e:
                raise DTypeError(f"cannot use {type(x).__name__} as an array: {e}") from None
        else:
            raise DTypeError(f"unsupported operand of type {type(x).__name__}")
        if isinstance(value, np.ndarray) and value.dtype.kind not in "biufc":
            raise DTypeError(f"arrays of dtype {value.dtype} are not supported")
        return self._emit("constant", (), {"value": value}, type_of_constant(value))

    def bind(self, op: str, operands, attrs: dict):
        """Apply ``op`` to operands (Tracers or literals); checks it with the op's rule."""
        opdef = REGISTRY[op]
        if opdef.ufunc is not None:
            operands = _huge_ints_as_floats(opdef.ufunc, operands, op in COMPARISONS)
        elif op == "where" and len(operands) == 3:  # its values promote as an add's
            operands = (operands[0], *_huge_ints_as_floats(np.add, operands[1:], False))
        inputs = tuple(self.lift(x) for x in operands)
        out_type = opdef.rule(*(v.type for v in inputs), **attrs)
        if opdef.ufunc is not None and op not in COMPARISONS:
            _check_int_literals(opdef.ufunc, operands, inputs)
        out = Tracer(self._emit(op, inputs, attrs, out_type), self)
        if opdef.kind is Kind.ELEMENTWISE and out_type.ndim > 1:
            out._strides = _kept_order(operands, out_type.shape)
        base = operands[0] if op in VIEW_OPS and operands else None
        if isinstance(base, Tracer) and _is_view(base, op, attrs):
            out._view_of(base, op, attrs)
        # np.zeros(3) made in the function, and what is computed from such arrays alone,
        # keep their value for concrete uses (.tolist(), int(), if): see Tracer._const. A
        # random draw is never known: its value is the next call's, and computing it now
        # would advance the generator while tracing.
        if not opdef.effect:
            out._const = known_result(op, opdef.impl, operands, attrs, out_type,
                                      out._base is not None)
        return out

    def _emit(self, op, inputs, attrs, out_type) -> Value:
        node = Node(op, inputs, attrs, Value(out_type), user_location())
        self.nodes.append(node)
        return node.out

    def finish(self, outputs) -> Graph:
        outs = [self.lift(x) for x in outputs]
        self.active = False
        return Graph(self.inputs, self.nodes, outs, self.name)


def _kept_order(operands, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The layout NumPy gives an elementwise result (``order="K"``): C order unless an
    array operand is laid out otherwise (a transpose, a Fortran-ordered argument)."""
    arrays = [x for x in operands if isinstance(x, Tracer) and x.ndim]
    if not any(x._base is not None or x._strides is not None for x in arrays):
        return None
    return kept_order([x._layout() for x in arrays], shape)


def _is_view(base: Tracer, op: str, attrs: dict) -> bool:
    """Whether NumPy makes the result of ``op`` on ``base`` a view of it: never of a
    scalar (NumPy's are immutable), and a reshape only where no copy is needed."""
    if base._scalar or base.aval.weak:
        return False
    if op != "reshape":
        return True
    shape, strides = base._layout()
    return reshape_strides(shape, strides, attrs["shape"]) is not None


def dynamic_view(x, i: Tracer, axis: int):
    """``x[:, ..., i]`` at ``axis`` for a traced integer ``i``: a ``gather`` whose result
    is a view of ``x``, as NumPy's integer index gives. Its step in the view's path holds
    the index's value (``{"axis": axis, "index": value}``): reading the view again after a
    write to its root gathers there, a write through it scatters there."""
    out = bind("gather", x, i, axis=axis)
    if isinstance(x, Tracer) and not (x._scalar or x.aval.weak):
        out._view_of(x, "gather", {"axis": axis, "index": i._value})
        if out._const is not None and x._const is not None:
            out._const.memory = x._const.memory  # (a write to either forgets both)
    return out


def current() -> Trace:
    stack = getattr(_state, "stack", None)
    if not stack:
        raise TracingError("no trace is active")
    return stack[-1]


class tracing:
    """Context manager that makes ``trace`` the current one in this thread."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self) -> Trace:
        if not hasattr(_state, "stack"):
            _state.stack = []
        _state.stack.append(self.trace)
        intercept.begin()
        return self.trace

    def __exit__(self, *exc) -> None:
        _state.stack.pop()
        self.trace.active = False
        intercept.end()


def bind(op: str, *operands, **attrs):
    """Record ``op(*operands, **attrs)`` in the current trace; returns a Tracer."""
    return current().bind(op, operands, attrs)
