"""The trace being recorded: turns op applications on Tracers into IR nodes."""

from __future__ import annotations

import threading

import numpy as np

from ..errors import DTypeError, ScalarOverflow, TracingError
from ..ir import Graph, Node, TensorType, Value
from ..ir.registry import COMPARISONS, REGISTRY
from ..ir.types import type_of_constant
from ..source import user_location

_state = threading.local()


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


class Trace:
    """Collects the nodes of one graph. Active only while the user's function runs."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.active = True

    def new_input(self, type: TensorType, name: str):
        from .tracer import Tracer

        v = Value(type, name)
        self.inputs.append(v)
        return Tracer(v, self)

    def lift(self, x) -> Value:
        """The IR value of an operand: a Tracer of this trace, or a literal made a constant."""
        from .tracer import Tracer

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
        if type(x) in (int, float, complex):
            value = x
        elif isinstance(x, (bool, np.bool_)):
            value = np.bool_(x)
        elif isinstance(x, (np.generic, np.ndarray, list, tuple)):
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
        from .tracer import Tracer

        inputs = tuple(self.lift(x) for x in operands)
        opdef = REGISTRY[op]
        out_type = opdef.rule(*(v.type for v in inputs), **attrs)
        if opdef.ufunc is not None and op not in COMPARISONS:
            _check_int_literals(opdef.ufunc, operands, inputs)
        return Tracer(self._emit(op, inputs, attrs, out_type), self)

    def _emit(self, op, inputs, attrs, out_type) -> Value:
        node = Node(op, inputs, attrs, Value(out_type), user_location())
        self.nodes.append(node)
        return node.out

    def finish(self, outputs) -> Graph:
        outs = [self.lift(x) for x in outputs]
        self.active = False
        return Graph(self.inputs, self.nodes, outs, self.name)


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
        return self.trace

    def __exit__(self, *exc) -> None:
        _state.stack.pop()
        self.trace.active = False


def bind(op: str, *operands, **attrs):
    """Record ``op(*operands, **attrs)`` in the current trace; returns a Tracer."""
    return current().bind(op, operands, attrs)
