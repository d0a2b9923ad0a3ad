"""Tracer: stands in for an array while a function is traced.

It takes part in NumPy's protocols (``__array_ufunc__``, ``__array_function__``), Python's
operators and the common ndarray methods, so code written against ``numpy`` traces
unchanged. Anything that needs a concrete value raises ConcretizationError.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConcretizationError, InPlaceArgumentError, UnsupportedOperation
from ..ir import TensorType, Value

_CONTROL_FLOW_HINT = (
    "inside a jitted function arrays are abstract (only shape and dtype are known). Use "
    "np.where(cond, a, b) instead of Python control flow on values, or pass the argument "
    "through static_argnums/static_argnames so its value is known while tracing"
)


class Tracer:
    """``_scalar`` marks where NumPy would hold a NumPy scalar rather than a 0-d array (the
    0-d result of a ufunc, reduction or integer index): scalars rebind on ``+=`` without
    NumPy's same-kind cast and have no ``@``.

    ``_arg`` names the argument of the traced function that this object is, or is a view
    of (``"argument 'x'"``), else None. NumPy would show an in-place write to it to the
    caller, which a jitted function cannot do yet, so such writes raise; on a value the
    function computed itself ``x += y`` rebinds, which no one can tell apart. The mark is
    on the Python object, not the IR value: an inner function gets its own marked objects
    (:func:`as_arguments`) while its caller's stay free to rebind."""

    __slots__ = ("_value", "_trace", "_scalar", "_arg")
    __array_priority__ = 1000
    __hash__ = None  # like ndarray

    def __init__(self, value: Value, trace, scalar: bool = False, arg: str | None = None):
        self._value = value
        self._trace = trace
        self._scalar = scalar
        self._arg = arg

    # ------------------------------------------------------------ static properties
    @property
    def aval(self) -> TensorType:
        return self._value.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.type.dtype

    @property
    def ndim(self) -> int:
        return len(self._value.type.shape)

    @property
    def size(self) -> int:
        return self._value.type.size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def T(self) -> Tracer:
        return api.transpose(self)

    @property
    def mT(self) -> Tracer:
        return api.swapaxes(self, -1, -2)

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

    def __setitem__(self, key, value):
        if self._arg:
            raise _inplace_error(self, "item assignment (x[...] = v)", hint=(
                "compute the new array and return it, e.g. x = np.where(mask, value, x), "
                "or build it with np.concatenate / np.pad; assign it in the caller"))
        raise UnsupportedOperation(
            "item assignment: arrays are immutable inside a jitted function",
            hint="compute the new array instead, e.g. x = np.where(mask, value, x), or build "
            "it with np.concatenate / np.pad",
        )

    # ------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return api.apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return api.apply_function(func, args, kwargs)

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key):
        from .indexing import getitem

        return getitem(self, key)

    # ------------------------------------------------------------ methods
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        out = api.astype(self, dtype, casting=casting)
        return out.copy() if out is self and copy else out

    def reshape(self, *shape, order="C", copy=None):
        return api.reshape(self, shape[0] if len(shape) == 1 else shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return api.transpose(self, axes or None)

    def swapaxes(self, axis1, axis2):
        return api.swapaxes(self, axis1, axis2)

    def squeeze(self, axis=None):
        return api.squeeze(self, axis)

    def ravel(self, order="C"):
        return api.ravel(self, order)

    def flatten(self, order="C"):
        return api.ravel(self, order)

    def copy(self, order="C"):
        """The same value in a new object that is no argument: ``x = x.copy(); x += 1``
        is fine, as in NumPy."""
        return Tracer(self._value, self._trace, self._scalar)

    def dot(self, b, out=None):
        return api.dot(self, b, out=out)

    def clip(self, min=None, max=None, out=None, **kwargs):
        return api.clip(self, min, max, out=out, **kwargs)

    def take(self, indices, axis=None, out=None, mode="raise"):
        return api.take(self, indices, axis=axis, out=out, mode=mode)

    def repeat(self, repeats, axis=None):
        return api.repeat(self, repeats, axis)

    def round(self, decimals=0, out=None):
        return api.around(self, decimals, out=out)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return api.sum(self, axis, dtype, out, keepdims, **kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return api.prod(self, axis, dtype, out, keepdims, **kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return api.mean(self, axis, dtype, out, keepdims, **kw)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return api.var(self, axis, dtype, out, ddof, keepdims, **kw)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return api.std(self, axis, dtype, out, ddof, keepdims, **kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return api.max(self, axis, out, keepdims, **kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        return api.min(self, axis, out, keepdims, **kw)

    def argmax(self, axis=None, out=None, *, keepdims=False):
        return api.argmax(self, axis, out, keepdims=keepdims)

    def argmin(self, axis=None, out=None, *, keepdims=False):
        return api.argmin(self, axis, out, keepdims=keepdims)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        return api.any(self, axis, out, keepdims, **kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return api.all(self, axis, out, keepdims, **kw)

    def __getattr__(self, name):
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"traced arrays have no attribute {name!r}")
        raise UnsupportedOperation(f"ndarray.{name} is not supported on traced arrays")


# Python operators: each maps to the ufunc NumPy's ndarray uses, so semantics are NumPy's.
def _binary(ufunc):
    def op(self, other):
        return api.operator(ufunc, self, other)

    def rop(self, other):
        return api.operator(ufunc, other, self)

    def iop(self, other):
        result = api.inplace(ufunc, self, other)  # first NumPy's own errors (casts, shapes)
        if self._arg and not (self._scalar or self.aval.weak):  # scalars rebind
            raise _inplace_error(self, f"{_SYMBOLS[ufunc]}=")
        return result

    return op, rop, iop


for _name, _uf in [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
    ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
    ("matmul", np.matmul), ("and", np.bitwise_and), ("or", np.bitwise_or),
    ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift),
]:
    _op, _rop, _iop = _binary(_uf)
    setattr(Tracer, f"__{_name}__", _op)
    setattr(Tracer, f"__r{_name}__", _rop)
    setattr(Tracer, f"__i{_name}__", _iop)

for _name, _uf in [
    ("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
    ("gt", np.greater), ("ge", np.greater_equal),
]:
    setattr(Tracer, f"__{_name}__", _binary(_uf)[0])

for _name, _uf in [("neg", np.negative), ("pos", np.positive), ("abs", np.absolute),
                   ("invert", np.invert)]:
    setattr(Tracer, f"__{_name}__", lambda self, _uf=_uf: api.operator(_uf, self))


def _divmod(self, other):
    return api.operator(np.floor_divide, self, other), api.operator(np.remainder, self, other)


def _rdivmod(self, other):
    return api.operator(np.floor_divide, other, self), api.operator(np.remainder, other, self)


Tracer.__divmod__ = _divmod

_SYMBOLS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
            np.floor_divide: "//", np.remainder: "%", np.power: "**", np.matmul: "@",
            np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^",
            np.left_shift: "<<", np.right_shift: ">>"}


def _inplace_error(target: Tracer, what: str, hint: str | None = None) -> InPlaceArgumentError:
    return InPlaceArgumentError(
        f"in-place {what} on {target._arg} (or a view of it): NumPy would change the "
        "caller's array, but a jitted function cannot write to its arguments yet", hint=hint)


def as_arguments(tree):
    """``tree`` with each Tracer replaced by a new object for the same value, marked as an
    argument: a function called inside a trace (an inner ``jit``, ``grad``) receives its
    caller's arrays, which NumPy would let it change in place."""
    from . import pytree

    leaves, treedef = pytree.flatten(tree)
    if not any(isinstance(leaf, Tracer) for leaf in leaves):
        return tree
    return pytree.unflatten(treedef, [
        Tracer(x._value, x._trace, x._scalar, x._arg or _describe(x._value))
        if isinstance(x, Tracer) else x for x in leaves])


def _describe(value: Value) -> str:
    return f"argument {value.name!r}" if value.name else "an argument"
Tracer.__rdivmod__ = _rdivmod

from . import numpy_api as api  # noqa: E402  (the functions the methods delegate to)
