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
from .layout import ordered, strides_of

_CONTROL_FLOW_HINT = (
    "inside a jitted function arrays are abstract (only shape and dtype are known). Use "
    "np.where(cond, a, b) instead of Python control flow on values, or pass the argument "
    "through static_argnums/static_argnames so its value is known while tracing"
)


class Tracer:
    """A mutable reference to an array, as an ndarray is: writes (``x[i] = v``, ``x += y``,
    ``out=``) give it a new version, a new IR value made by a functional update
    (:mod:`.updates`), so the graph stays SSA while the Python object behaves like NumPy's.

    A view (basic indexing, with constant or traced integers, ``.T``, a reshape that NumPy
    does without copying, ``broadcast_to``) remembers its root ``_base`` and the ``_path``
    of view ops that derive it from the root. A write through a view updates the root,
    and every view re-derives its value from the root's current version when it is next
    read (``_value``), so ``b = a[1:]; a[2] = 5`` shows in ``b`` as in NumPy.

    ``_scalar`` marks where NumPy would hold a NumPy scalar rather than a 0-d array (the
    0-d result of a ufunc, reduction or integer index): scalars rebind on ``+=`` without
    NumPy's same-kind cast, have no ``@`` and take no item assignment. ``_readonly`` marks
    a view NumPy makes read-only (of ``broadcast_to``).

    ``_strides`` is a root's layout, in elements, where it is not C order (an argument's;
    an array made in the function in another order, as NumPy's ``order="K"``
    makes it): which reshapes are views follows from it (:mod:`.layout`).

    ``_const`` is a :class:`Known` when the array's value is known while tracing (made in
    the function from constants only: ``np.zeros(3)``, ``np.ones(2)[0]``), else None.
    The concretizing methods (``bool``, ``float``, ``int``, ``__index__``, ``__array__``,
    ``item``, ``tolist``) answer with it as NumPy would; everything else traces as usual.
    A write forgets it (:meth:`_forget_const`), for the array and the views sharing its
    memory."""

    __slots__ = ("_val", "_trace", "_scalar", "_base", "_path", "_seen", "_readonly",
                 "_const", "_strides")
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
        self._const: Known | None = None
        self._strides: tuple | None = None  # a root's memory layout; None: C order

    @property
    def _value(self) -> Value:
        """The current IR value: a view whose root was written since it was derived is
        derived again from the root's current version."""
        base = self._base
        if base is not None and self._seen != base._seen and self._trace.active:
            self._val = derive(self._trace, base._val, self._path)
            self._seen = base._seen
        return self._val

    def _layout(self) -> tuple[tuple[int, ...], list]:
        """(shape, strides in elements) of this array's memory: its root's layout taken
        through its view path."""
        root = self if self._base is None else self._base
        return strides_of(root.shape, root._strides, self._path)

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
            raise _concretization_error(self, "len() of unsized object (a 0-d traced value)",
                                        _CONTROL_FLOW_HINT)
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise _concretization_error(self, "iteration over a 0-d traced value",
                                        _CONTROL_FLOW_HINT)
        return (self[i] for i in range(self.shape[0]))

    # ------------------------------------------------------------ concretization
    def _known(self) -> np.ndarray | None:
        const = self._const
        return None if const is None else const.value()

    def _forget_const(self) -> None:
        """Called before an in-place write to this array (``x[i] = v``, ``x += v``): its
        known value, and that of every view of the same memory, no longer holds."""
        if self._const is not None:
            self._const.memory.written = True
            self._const = None

    def _concrete(self, what: str):
        raise _concretization_error(
            self, f"{what} needs the concrete value of a traced array {self.aval}",
            _CONTROL_FLOW_HINT)

    def __bool__(self):
        known = self._known()
        if known is None:
            self._concrete("bool() (an `if`, `while`, `and`/`or` or `assert` on an array)")
        return bool(known)

    def __float__(self):
        known = self._known()
        return self._concrete("float()") if known is None else float(known)

    def __int__(self):
        known = self._known()
        return self._concrete("int()") if known is None else int(known)

    def __complex__(self):
        known = self._known()
        return self._concrete("complex()") if known is None else complex(known)

    def __index__(self):
        known = self._known()
        if known is None:
            self._concrete("using an array as a Python integer (index, range bound, shape)")
        return known.__index__()

    def __array__(self, dtype=None, copy=None):
        known = self._known()
        if known is not None:  # a copy: the caller may write to it, the known value stays
            return np.array(known, dtype=dtype, copy=True)
        raise _concretization_error(
            self, f"np.asarray/np.array of a traced array {self.aval} needs its concrete "
            "value", "keep using NumPy functions on the value; build arrays from traced "
            "values with np.stack/np.concatenate; index a NumPy constant with a traced index "
            "as np.take(const, i, axis=0); or make the argument static (static_argnums)")

    def item(self, *args):
        known = self._known()
        return self._concrete(".item()") if known is None else known.item(*args)

    def tolist(self):
        known = self._known()
        return self._concrete(".tolist()") if known is None else known.tolist()

    # ------------------------------------------------------------ methods
    # (the ones that compute are attached by array_methods.install)
    def copy(self, order="C"):
        """The same value in a new array of its own: writes to it leave ``self`` alone.
        It is laid out in ``order`` (C by default, as ``ndarray.copy``; ``"K"`` as
        ``np.copy``), which decides later reshapes' views as NumPy's."""
        out = Tracer(self._value, self._trace, self._scalar)
        if order not in ("C", "c") and self.ndim > 1:
            out._strides = ordered(order, self.shape, self._layout())
        if self._const is not None and not self._const.memory.written:  # new memory:
            out._const = Known(self._const.computed, Memory())
        return out

    def __getattr__(self, name):
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"traced arrays have no attribute {name!r}")
        raise UnsupportedOperation(f"ndarray.{name} is not supported on traced arrays")


def _concretization_error(tracer: Tracer, message: str, hint: str) -> ConcretizationError:
    """The error for needing ``tracer``'s value; ``error.tracer`` is it, so that ``jit``
    can tell which arguments the value came from (and make Python ints among them static)."""
    error = ConcretizationError(message, hint=hint)
    error.tracer = tracer
    return error


class Memory:
    """The memory an array and its views share, as far as known values go: ``written``
    once any of them was written in place (:meth:`Tracer._forget_const`)."""

    __slots__ = ("written",)

    def __init__(self):
        self.written = False


class Known:
    """The concrete value of a traced array, computed when first asked for (``make()``, a
    NumPy array): most known arrays are never concretized. ``memory`` is shared with the
    views of the same array; once it is written, the value no longer holds."""

    __slots__ = ("_make", "_value", "memory")

    def __init__(self, make, memory: Memory):
        self._make = make
        self._value = None
        self.memory = memory

    def value(self) -> np.ndarray | None:
        """The value, or None if it no longer holds or cannot be computed."""
        return None if self.memory.written else self.computed()

    def computed(self) -> np.ndarray | None:
        """The value the array had when it was made (what arrays computed from it before
        a write saw), or None if it cannot be computed."""
        if self._value is None and self._make is not None:
            make, self._make = self._make, None
            try:
                self._value = make()
            except Exception:
                self._value = None
        return self._value


def known_result(op: str, impl, operands, attrs: dict, out, view: bool) -> Known | None:
    """The Known value of ``op(*operands)`` if every operand is a literal or a Tracer with
    a known value that still holds, else None. ``view``: the result shares the first
    operand's memory (a reshape or slice of it), so a write to either forgets both."""
    consts = []
    for x in operands:
        if isinstance(x, Tracer):
            if x._const is None or x._const.memory.written:
                return None
            consts.append(x._const)
        else:
            consts.append(x)
    memory = consts[0].memory if view and isinstance(consts[0], Known) else Memory()

    def make():
        args = [c.computed() if isinstance(c, Known) else c for c in consts]
        if any(a is None for a in args):
            return None
        value = np.asarray(impl(*args, **attrs))
        if value.shape != out.shape or value.dtype != out.dtype:
            value = np.asarray(value, out.dtype).reshape(out.shape)
        return value

    return Known(make, memory)


def derive(trace, value: Value, path) -> Value:
    """``value`` (a root's) taken through the view ops of ``path``, as new nodes."""
    for op, attrs in path:
        if op == "gather":  # an integer index known at run time: see core.dynamic_view
            index, axis = attrs["index"], attrs["axis"]
            value = trace._emit(op, (value, index), {"axis": axis},
                                REGISTRY[op].rule(value.type, index.type, axis=axis))
        else:
            value = trace._emit(op, (value,), attrs, REGISTRY[op].rule(value.type, **attrs))
    return value
