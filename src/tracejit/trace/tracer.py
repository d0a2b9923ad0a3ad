"""Tracer: stands in for an array while a function is traced.

It takes part in NumPy's protocols (``__array_ufunc__``, ``__array_function__``), Python's
operators and the common ndarray methods, so code written against ``numpy`` traces
unchanged. Anything that needs a concrete value raises ConcretizationError.

This module holds what a Tracer is (its value, trace, static properties and refusals).
What it computes is NumPy's surface (``numpy_api``, ``indexing``), which is built on
Tracer; so, as JAX's ``array_methods`` does, :mod:`.array_methods` attaches the protocol
hooks, operators and computing methods to the class when the package is imported, and
this module never imports the layers above it.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConcretizationError, UnsupportedOperation
from ..ir import TensorType, Value
from ..ir.registry import REGISTRY

_CONTROL_FLOW_HINT = (
    "inside a jitted function arrays are abstract (only shape and dtype are known). Use "
    "np.where(cond, a, b) instead of Python control flow on values, or pass the argument "
    "through static_argnums/static_argnames so its value is known while tracing"
)


class Tracer:
    """A mutable reference to an array, as an ndarray is: writes (``x[i] = v``, ``x += y``,
    ``out=``) give it a new version, a new IR value made by a functional update
    (:mod:`.updates`), so the graph stays SSA while the Python object behaves like NumPy's.

    A view (basic indexing, ``.T``, a reshape that NumPy does without copying,
    ``broadcast_to``) remembers its root ``_base`` and the ``_path`` of view ops that
    derive it from the root. A write through a view updates the root, and every view
    re-derives its value from the root's current version when it is next read
    (``_value``), so ``b = a[1:]; a[2] = 5`` shows in ``b`` as in NumPy.

    ``_scalar`` marks where NumPy would hold a NumPy scalar rather than a 0-d array (the
    0-d result of a ufunc, reduction or integer index): scalars rebind on ``+=`` without
    NumPy's same-kind cast, have no ``@`` and take no item assignment. ``_readonly`` marks
    a view NumPy makes read-only (of ``broadcast_to``)."""

    __slots__ = ("_val", "_trace", "_scalar", "_base", "_path", "_seen", "_readonly")
    __array_priority__ = 1000
    __hash__ = None  # like ndarray

    def __init__(self, value: Value, trace, scalar: bool = False):
        self._val = value
        self._trace = trace
        self._scalar = scalar
        self._base: Tracer | None = None  # the root this is a view of
        self._path: tuple = ()  # ((op, attrs), ...) from the root to this view
        self._seen = 0  # a root: its number of writes; a view: the root's, when derived
        self._readonly = False

    @property
    def _value(self) -> Value:
        """The current IR value: a view whose root was written since it was derived is
        derived again from the root's current version."""
        base = self._base
        if base is not None and self._seen != base._seen and self._trace.active:
            self._val = derive(self._trace, base._val, self._path)
            self._seen = base._seen
        return self._val

    def _view_of(self, parent: Tracer, op: str, attrs: dict) -> None:
        """Make this (the result of ``op`` on ``parent``) a view of parent's root."""
        root = parent if parent._base is None else parent._base
        self._base, self._path = root, parent._path + ((op, attrs),)
        self._seen = root._seen
        self._readonly = parent._readonly or op == "broadcast_to"

    # ------------------------------------------------------------ static properties
    # (types never change with a write: read them without deriving a stale view again)
    @property
    def aval(self) -> TensorType:
        return self._val.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self._val.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self._val.type.dtype

    @property
    def ndim(self) -> int:
        return len(self._val.type.shape)

    @property
    def size(self) -> int:
        return self._val.type.size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"Tracer<{self.aval}>"

    def __len__(self) -> int:
        if self.ndim == 0:
            raise ConcretizationError("len() of unsized object (a 0-d traced value)",
                                      hint=_CONTROL_FLOW_HINT)
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise ConcretizationError("iteration over a 0-d traced value", hint=_CONTROL_FLOW_HINT)
        return (self[i] for i in range(self.shape[0]))

    # ------------------------------------------------------------ concretization
    def _concrete(self, what: str):
        raise ConcretizationError(
            f"{what} needs the concrete value of a traced array {self.aval}",
            hint=_CONTROL_FLOW_HINT,
        )

    def __bool__(self):
        self._concrete("bool() (an `if`, `while`, `and`/`or` or `assert` on an array)")

    def __float__(self):
        self._concrete("float()")

    def __int__(self):
        self._concrete("int()")

    def __complex__(self):
        self._concrete("complex()")

    def __index__(self):
        self._concrete("using an array as a Python integer (index, range bound, shape)")

    def __array__(self, dtype=None, copy=None):
        raise ConcretizationError(
            f"np.asarray/np.array of a traced array {self.aval} needs its concrete value",
            hint="keep using NumPy functions on the value; build arrays from traced values "
            "with np.stack/np.concatenate; index a NumPy constant with a traced index as "
            "np.take(const, i, axis=0); or make the argument static (static_argnums)",
        )

    def item(self, *args):
        self._concrete(".item()")

    def tolist(self):
        self._concrete(".tolist()")

    # ------------------------------------------------------------ methods
    # (the ones that compute are attached by array_methods.install)
    def copy(self, order="C"):
        """The same value in a new array of its own: writes to it leave ``self`` alone."""
        return Tracer(self._value, self._trace, self._scalar)

    def __getattr__(self, name):
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"traced arrays have no attribute {name!r}")
        raise UnsupportedOperation(f"ndarray.{name} is not supported on traced arrays")


def derive(trace, value: Value, path) -> Value:
    """``value`` (a root's) taken through the view ops of ``path``, as new nodes."""
    for op, attrs in path:
        value = trace._emit(op, (value,), attrs, REGISTRY[op].rule(value.type, **attrs))
    return value
