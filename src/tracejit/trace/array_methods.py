"""ndarray's computing methods, Python's operators and NumPy's protocol hooks on Tracer.

They delegate to :mod:`.numpy_api` and :mod:`.indexing`, which are themselves built on
Tracer. So, as JAX's ``_src/numpy/array_methods.py`` does, the NumPy layer attaches them
to the class (:func:`install`, called once by the package ``__init__``) and ``tracer.py``
never imports the layers above it: the modules of ``trace/`` form a DAG.
"""

from __future__ import annotations

import dis
import sys
from types import FunctionType

import numpy as np

from ..errors import DTypeError, UnsupportedOperation
from . import (  # noqa: F401
    histograms,
    numpy_api,
    numpy_more,
    ordering,
    polynomials,
    quantiles,
    traced_quantiles,
    updates,
)
from .core import bind
from .indexing import getitem
from .tracer import Tracer

# Python operators: each maps to the ufunc NumPy's ndarray uses, so semantics are NumPy's.
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "matmul": np.matmul, "and": np.bitwise_and, "or": np.bitwise_or,
    "xor": np.bitwise_xor, "lshift": np.left_shift, "rshift": np.right_shift,
}
_COMPARISONS = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
_UNARY = {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}


class _ArrayMethods:
    """The methods, written as methods so they read as ndarray's; never instantiated:
    :func:`install` copies every function and property defined here onto Tracer."""

    @property
    def T(self) -> Tracer:
        return numpy_api.transpose(self)

    @property
    def mT(self) -> Tracer:
        return numpy_api.swapaxes(self, -1, -2)

    @property
    def real(self) -> Tracer:
        return numpy_more.real(self)

    @real.setter
    def real(self, value) -> None:
        _set_part(self, "real", value)

    @property
    def imag(self) -> Tracer:
        return numpy_more.imag(self)

    @imag.setter
    def imag(self, value) -> None:
        _set_part(self, "imag", value)

    @Tracer.shape.setter
    def shape(self, value) -> None:
        dims = ", ".join(map(str, value if isinstance(value, (tuple, list)) else (value,)))
        _refuse_set("shape", f"use x = x.reshape({dims}): a view of the same memory "
                    "wherever NumPy's shape assignment would succeed")

    @Tracer.dtype.setter
    def dtype(self, value) -> None:
        _refuse_set("dtype", "reinterpreting memory is not traced; x = x.astype(dtype) "
                    "converts the values instead")

    def conj(self):
        return np.conjugate(self)

    def conjugate(self):
        return np.conjugate(self)

    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
        return numpy_more.trace(self, offset, axis1, axis2, dtype, out)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return numpy_more.diagonal(self, offset, axis1, axis2)

    # ------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "at":
            return updates.ufunc_at(ufunc, *inputs, **kwargs)
        return numpy_api.apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return numpy_api.apply_function(func, args, kwargs)

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key):
        mask = updates.traced_mask(key)
        if mask is not None and _augmented_subscript(sys._getframe(1)):
            return updates.MaskedSelection(self, mask)  # x[mask] op= v: see there
        return getitem(self, key)

    def __setitem__(self, key, value):
        updates.setitem(self, key, value)

    def fill(self, value):
        updates.setitem(self, Ellipsis, value)

    # ------------------------------------------------------------ methods
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        out = numpy_api.astype(self, dtype, casting=casting, copy=False)
        return out.copy(order) if copy and out is self else out

    def reshape(self, *shape, order="C", copy=None):
        return numpy_api.reshape(self, shape[0] if len(shape) == 1 else shape, order=order,
                                 copy=copy)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return numpy_api.transpose(self, axes or None)

    def swapaxes(self, axis1, axis2):
        return numpy_api.swapaxes(self, axis1, axis2)

    def squeeze(self, axis=None):
        return numpy_api.squeeze(self, axis)

    def ravel(self, order="C"):
        return numpy_api.ravel(self, order)

    def flatten(self, order="C"):
        return numpy_api.ravel(self, order).copy()  # always a copy, unlike ravel

    def dot(self, b, out=None):
        return numpy_api.dot(self, b, out=out)

    def clip(self, min=None, max=None, out=None, **kwargs):
        return numpy_api.clip(self, min, max, out=out, **kwargs)

    def take(self, indices, axis=None, out=None, mode="raise"):
        return numpy_api.take(self, indices, axis=axis, out=out, mode=mode)

    def repeat(self, repeats, axis=None):
        return numpy_api.repeat(self, repeats, axis)

    def round(self, decimals=0, out=None):
        return numpy_api.around(self, decimals, out=out)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.sum, (self, axis, dtype, out, keepdims), kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.prod, (self, axis, dtype, out, keepdims), kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.mean, (self, axis, dtype, out, keepdims), kw)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return numpy_api.apply_function(np.var, (self, axis, dtype, out, ddof, keepdims), kw)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return numpy_api.apply_function(np.std, (self, axis, dtype, out, ddof, keepdims), kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.max, (self, axis, out, keepdims), kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.min, (self, axis, out, keepdims), kw)

    def argmax(self, axis=None, out=None, *, keepdims=False):
        return numpy_api.argmax(self, axis, out, keepdims=keepdims)

    def argmin(self, axis=None, out=None, *, keepdims=False):
        return numpy_api.argmin(self, axis, out, keepdims=keepdims)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.any, (self, axis, out, keepdims), kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return numpy_api.apply_function(np.all, (self, axis, out, keepdims), kw)

    def cumsum(self, axis=None, dtype=None, out=None):
        return ordering.cumsum(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return ordering.cumprod(self, axis, dtype, out)

    def argsort(self, axis=-1, kind=None, order=None, *, stable=None):
        return ordering.argsort(self, axis, kind, order, stable=stable)

    def argpartition(self, kth, axis=-1, kind="introselect", order=None):
        return ordering.argpartition(self, kth, axis, kind, order)

    def searchsorted(self, v, side="left", sorter=None):
        return ordering.searchsorted(self, v, side, sorter)

    def sort(self, axis=-1, kind=None, order=None, *, stable=None):
        """In place, as ndarray.sort: a write of the sorted array into this one."""
        self[...] = ordering.sort(self, axis, kind, order, stable=stable)

    def partition(self, kth, axis=-1, kind="introselect", order=None):
        self[...] = ordering.partition(self, kth, axis, kind, order)

    def __divmod__(self, other):
        return (numpy_api.operator(np.floor_divide, self, other),
                numpy_api.operator(np.remainder, self, other))

    def __rdivmod__(self, other):
        return (numpy_api.operator(np.floor_divide, other, self),
                numpy_api.operator(np.remainder, other, self))


def _set_part(z: Tracer, part: str, value) -> None:
    """``z.real = v`` / ``z.imag = v`` (and so ``z.real *= 2``, which Python runs as
    ``z.real = z.real * 2``): NumPy writes ``v`` into that part of z's memory, cast and
    broadcast as item assignment does. Written here as the whole of z, the other part
    kept; a real z's real part is z itself, and it has no imaginary part to set."""
    if z._scalar or z.aval.weak:
        raise UnsupportedOperation(f"attribute {part!r} of a scalar is not writable (NumPy's "
                                   "and Python's scalars cannot change)",
                                   hint=f"make a new value: z = z + (v - z.{part})")
    if z.dtype.kind != "c":
        if part == "imag":
            raise DTypeError("array does not have imaginary part to set",
                             hint="make the array complex first: z = x.astype(complex)")
        if value is not z:  # (x.real *= 2 has written x already)
            updates.setitem(z, Ellipsis, value)
        return
    new = numpy_more.real(z) if part == "real" else numpy_more.imag(z)  # new memory,
    updates.setitem(new, Ellipsis, value)  # where v is cast and broadcast as NumPy does
    other = numpy_more.imag(z) if part == "real" else numpy_more.real(z)
    updates.setitem(z, Ellipsis, bind("complex", *((new, other) if part == "real" else
                                                   (other, new))))


def _refuse_set(name: str, hint: str) -> None:
    """Assigning ``x.shape``/``x.dtype`` changes the array object in place; a traced array
    cannot (its views and its version in the graph would disagree)."""
    raise UnsupportedOperation(f"setting ndarray.{name} of a traced array is not supported",
                               hint=hint)


def _augmented_subscript(frame) -> bool:
    """Whether ``frame`` is reading ``x[key]`` for an augmented assignment ``x[key] op= v``:
    CPython compiles it as ``COPY 2; COPY 2`` (``DUP_TOP_TWO`` before 3.11) just before
    the subscript, which a plain read never has."""
    seen = []  # (f_lasti may point into the subscript's inline cache once specialised)
    for ins in dis.get_instructions(frame.f_code):
        if ins.offset > frame.f_lasti:
            break
        seen.append((ins.opname, ins.arg))
    before = seen[-3:-1]
    return before == [("COPY", 2), ("COPY", 2)] or before[-1:] == [("DUP_TOP_TWO", None)]


def _binary(ufunc):
    """``x + y``, ``y + x`` and ``x += y`` for one ufunc."""
    def op(self, other):
        return numpy_api.operator(ufunc, self, other)

    def rop(self, other):
        return numpy_api.operator(ufunc, other, self)

    def iop(self, other):
        result = numpy_api.inplace(ufunc, self, other)  # first NumPy's own errors
        if self._scalar or self.aval.weak:  # scalars rebind
            return result
        updates.write(self, result)  # an array changes in place: its views see it
        return self

    return op, rop, iop


def _unary(ufunc):
    def op(self):
        return numpy_api.operator(ufunc, self)

    return op


def install() -> None:
    """Attach the methods, operators and protocol hooks to Tracer (idempotent)."""
    for name, attr in vars(_ArrayMethods).items():
        if isinstance(attr, (FunctionType, property)):
            setattr(Tracer, name, attr)
    for name, ufunc in _BINARY.items():
        op, rop, iop = _binary(ufunc)
        setattr(Tracer, f"__{name}__", op)
        setattr(Tracer, f"__r{name}__", rop)
        setattr(Tracer, f"__i{name}__", iop)
        setattr(updates.MaskedSelection, f"__i{name}__", updates.MaskedSelection.operator(ufunc))
    for name, ufunc in _COMPARISONS.items():
        setattr(Tracer, f"__{name}__", _binary(ufunc)[0])
    for name, ufunc in _UNARY.items():
        setattr(Tracer, f"__{name}__", _unary(ufunc))
