"""Making arrays in a traced function: ``np.array`` of traced values, the buffers
``np.zeros``/``np.ones``/``np.empty``/``np.full``/``np.eye``/``np.identity``/``np.arange``,
and ``np.r_``/``np.c_``.

None of these calls a Tracer's protocols (NumPy builds the array itself), so they are
replaced through :mod:`.intercept` while a trace runs, for calls from the user's code.

* ``np.array(obj)`` (``asarray``, ``asanyarray``, ``ascontiguousarray``) of an ``obj``
  holding Tracers is built with ``stack`` and ``astype`` at trace level; its dtype and
  shape are NumPy's own, found by calling NumPy on stand-ins of the leaves (so Python
  scalars count as in array coercion: ``np.array([float32_x, 2.0])`` is float64). An
  ``obj`` without Tracers goes to NumPy unchanged. Of a traced array, the result is that
  array itself exactly where NumPy's is (``asarray``; ``copy=False``; ``order="C"``
  of a C-contiguous one), else new memory.
* The buffers are Tracers (``full`` or ``constant`` nodes) whose value is known
  (``Tracer._const``): filling them with traced values traces, concrete uses
  (``.tolist()``, ``int(b[0])``, ``if b.any():``) answer as NumPy would. ``np.empty``
  is zero-filled (NumPy leaves its content undefined).
"""

from __future__ import annotations

import operator

import numpy as np

from ..errors import ShapeError, UnsupportedOperation
from . import intercept
from . import numpy_api as npa
from .core import bind, current
from .layout import c_contiguous, fortran_contiguous, ordered
from .tracer import Known, Memory, Tracer, _concretization_error

_FAST = frozenset({float, int, bool, complex, str, np.ndarray})


def has_tracer(obj) -> bool:
    """Whether ``obj`` (an array-like) holds a Tracer; lists and tuples are searched."""
    t = type(obj)
    if t is Tracer:
        return True
    if t is list or t is tuple:
        for item in obj:
            if type(item) not in _FAST and has_tracer(item):
                return True
    return False


# ---------------------------------------------------------------- np.array


def _shape(obj) -> tuple[int, ...] | None:
    """The shape of the nested array-like ``obj``, None if it is ragged."""
    if isinstance(obj, Tracer):
        return obj.shape
    if type(obj) is list or type(obj) is tuple:
        shapes = {_shape(item) for item in obj}
        if len(shapes) > 1 or None in shapes:
            return None
        return (len(obj),) + (shapes.pop() if shapes else ())
    return np.shape(obj)


def _stand_in(obj):
    """``obj`` with each Tracer replaced by a concrete value of its shape and dtype (a
    Python scalar if it is weakly typed, as the Python scalar it stands for would be)."""
    if isinstance(obj, Tracer):
        t = obj.aval
        if t.weak:
            return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}[t.dtype.kind]
        return np.broadcast_to(np.zeros((), t.dtype), t.shape)
    if type(obj) is list or type(obj) is tuple:
        return [_stand_in(item) for item in obj]
    return obj


def _scalar_stand_ins(obj, out: list) -> list:
    """The leaves of ``obj`` as 0-d stand-ins of their dtypes (Python scalars as they
    are): NumPy finds the same dtype for them as for ``obj``, without ``obj``'s size."""
    if type(obj) is list or type(obj) is tuple:
        for item in obj:
            _scalar_stand_ins(item, out)
    elif isinstance(obj, (Tracer, np.ndarray)) and obj.ndim:  # (weak ones are 0-d)
        out.append(np.zeros((), obj.dtype))
    else:
        out.append(_stand_in(obj))
    return out


def _build(obj, dtype: np.dtype):
    """``obj`` as an array of ``dtype``: Tracers stacked where lists hold them."""
    if isinstance(obj, Tracer):
        return npa.astype(obj, dtype)
    if (type(obj) is list or type(obj) is tuple) and has_tracer(obj):
        return npa.stack([_build(item, dtype) for item in obj])
    return np.array(obj, dtype=dtype)


def traced_array(obj, dtype=None, copy=True, ndmin: int = 0, order=None):
    """``np.array(obj, dtype, copy=copy, order=order, ndmin=ndmin)`` for an ``obj``
    holding Tracers. A traced array ``obj`` comes back itself where NumPy's does: no
    ``copy`` asked for (False or None), and neither ``dtype`` nor ``order`` ("C" or "F")
    asks for a change; ``copy=False`` where one does raises NumPy's error."""
    order = "K" if order is None else order.upper()
    same_dtype = dtype is None or (isinstance(obj, Tracer) and np.dtype(dtype) == obj.dtype)
    if copy is False and isinstance(obj, Tracer) and not (obj._scalar or obj.aval.weak) and \
            not (same_dtype and contiguous(obj, order)):
        raise ShapeError("Unable to avoid copy while creating an array as requested.",
                         hint="use np.asarray(obj) to allow a copy when needed")
    if isinstance(obj, Tracer) and same_dtype:
        keep = copy is False or (copy is None and not obj._scalar and contiguous(obj, order))
        out = obj if keep else obj.copy(order)
        if out.aval.weak or out._scalar:  # NumPy makes a 0-d array of a scalar
            out = npa._strong(out.copy() if out is obj else out)
            out._scalar = False
    else:
        if _shape(obj) is None:
            try:
                np.array(_stand_in(obj), dtype=dtype)
            except ValueError as e:
                raise ShapeError(str(e), hint="every row of a nested list must have the "
                                 "same length (and every array in it the same shape)") from None
        if dtype is None:  # NumPy's dtype for these leaves: ask NumPy
            dtype = np.array(_scalar_stand_ins(obj, [])).dtype
        out = _build(obj, np.dtype(dtype))
    if out.ndim < ndmin:
        out = npa.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


@intercept.replaces(np, "array")
def array(original, obj, *args, **kwargs):
    if not has_tracer(obj) or kwargs.get("like") is not None:
        return original(obj, *args, **kwargs)  # what the user passed, as passed
    return _traced_np_array(obj, *args, **kwargs)


def _traced_np_array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0,
                     like=None):
    return traced_array(obj, dtype, copy, ndmin, order)


def _as_array(name: str):
    def impl(original, a, dtype=None, order=None, *, device=None, copy=None, like=None):
        if not has_tracer(a) or like is not None:
            return original(a, dtype, order, device=device, copy=copy, like=like)
        return traced_array(a, dtype, copy, 0, order)

    impl.__name__ = name
    return intercept.replaces(np, name)(impl)


asarray = _as_array("asarray")
asanyarray = _as_array("asanyarray")


@intercept.replaces(np, "ascontiguousarray")
def ascontiguousarray(original, a, dtype=None, *, like=None):
    """NumPy's ``array(a, dtype, copy=None, order="C", ndmin=1)``: a copy of an array that
    is not C-contiguous (``x.T``, ``x[:, ::2]``)."""
    if not has_tracer(a) or like is not None:
        return original(a, dtype, like=like)
    return traced_array(a, dtype, None, 1, "C")


def contiguous(x: Tracer, order: str) -> bool:
    """Whether ``x``'s memory is laid out as ``order`` asks, as NumPy's flags tell: "C"
    or "F" contiguous ("A" and "K" ask for nothing), from its root's layout and its path
    of view ops."""
    if order not in ("C", "F") or x._scalar or x.aval.weak:
        return True
    shape, strides = x._layout()
    return c_contiguous(shape, strides) if order == "C" else \
        fortran_contiguous(shape, strides)


# ---------------------------------------------------------------- buffers


def _constant(value: np.ndarray) -> Tracer:
    """A Tracer for the constant ``value`` (made by NumPy for static arguments), known."""
    trace = current()
    out = Tracer(trace.constant(value), trace)
    out._const = Known(lambda: value, Memory())
    return out


def _dims(shape):
    """``shape`` with traced dimensions asked for their value (ConcretizationError, or the
    value if it is known): NumPy itself reports any Tracer as not an integer."""
    if isinstance(shape, Tracer):
        return operator.index(shape)
    if type(shape) is list or type(shape) is tuple:
        return tuple(operator.index(d) if isinstance(d, Tracer) else d for d in shape)
    return shape


def _filled(shape, dtype, order, value):
    proto = np.empty(_dims(shape), dtype=dtype, order=order)  # NumPy's checks; no memory
    if proto.dtype.kind not in "biufc":  # strings, objects: jit does not trace them
        return np.full(proto.shape, value, dtype=proto.dtype)
    out = bind("full", shape=proto.shape, dtype=proto.dtype, value=value)
    out._strides = ordered(order, proto.shape)
    return out


def _untraced(kwargs) -> bool:
    return kwargs.get("like") is not None


@intercept.replaces(np, "zeros")
def zeros(original, shape, dtype=float, order="C", **kwargs):
    return original(shape, dtype, order, **kwargs) if _untraced(kwargs) else _filled(
        shape, dtype, order, 0)


@intercept.replaces(np, "ones")
def ones(original, shape, dtype=None, order="C", **kwargs):
    return original(shape, dtype, order, **kwargs) if _untraced(kwargs) else _filled(
        shape, dtype, order, 1)


@intercept.replaces(np, "empty")
def empty(original, shape, dtype=float, order="C", **kwargs):
    """Zero-filled: NumPy leaves the content undefined, so zeros are one valid answer."""
    return original(shape, dtype, order, **kwargs) if _untraced(kwargs) else _filled(
        shape, dtype, order, 0)


@intercept.replaces(np, "full")
def full(original, shape, fill_value, dtype=None, order="C", **kwargs):
    if _untraced(kwargs):
        return original(shape, fill_value, dtype, order, **kwargs)
    if has_tracer(fill_value):  # a traced fill: broadcast into new memory
        fill = traced_array(fill_value, copy=None)
        dtype = fill.dtype if dtype is None else np.dtype(dtype)
        shape = np.empty(_dims(shape), dtype=dtype).shape
        return npa.broadcast_to(npa.astype(fill, dtype), shape).copy()
    if np.ndim(fill_value):
        return _constant(original(shape, fill_value, dtype, order))
    if dtype is None:
        dtype = np.array(fill_value).dtype
    value = fill_value.item() if isinstance(fill_value, np.generic) else fill_value
    return _filled(shape, dtype, order, value)


def _static(name: str, args) -> None:
    """ConcretizationError for a traced (not known) value among ``args``: the result's
    size would depend on it."""
    for a in args:
        if isinstance(a, Tracer) and a._known() is None:
            raise _concretization_error(
                a, f"np.{name} of a traced value {a.aval}: the size of the result would "
                "depend on data", "pass the value as a Python int (made static "
                f"automatically) or through static_argnums: np.{name} needs it while tracing")


def _made_by_numpy(name: str):
    def impl(original, *args, **kwargs):
        _static(name, (*args, *kwargs.values()))
        value = original(*args, **kwargs)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biufc":
            return value
        return _constant(value)

    impl.__name__ = name
    return intercept.replaces(np, name)(impl)


eye = _made_by_numpy("eye")
identity = _made_by_numpy("identity")
arange = _made_by_numpy("arange")


# ---------------------------------------------------------------- np.r_ and np.c_


def _concatenator(name: str):
    def impl(original, key):
        items = key if isinstance(key, tuple) else (key,)
        if not any(has_tracer(item) for item in items):
            return original[key]
        return _axis_concatenate(original, items)

    impl.__name__ = name
    return intercept.replaces(np, name)(impl)


def _directive(item: str, axis: int, ndmin: int, trans1d: int) -> tuple[int, int, int]:
    if item in ("r", "c"):
        raise UnsupportedOperation(f"np.r_/np.c_ directive {item!r} makes an np.matrix, "
                                   "which jit does not trace")
    vec = item.split(",")
    try:
        if len(vec) == 1:
            return int(item), ndmin, trans1d
        axis, ndmin = (int(x) for x in vec[:2])
        return axis, ndmin, int(vec[2]) if len(vec) == 3 else trans1d
    except ValueError as e:
        raise ValueError(f"unknown special directive {item!r}") from e


def _axis_concatenate(original, items):
    """NumPy's ``AxisConcatenator.__getitem__`` (matrix directives excepted) on traced
    items: ``original`` holds the defaults (r_: axis 0, 1-d; c_: last axis, 2-d)."""
    axis, ndmin, trans1d = original.axis, original.ndmin, original.trans1d
    objs, kinds = [], []
    for k, item in enumerate(items):
        if isinstance(item, str):
            if k != 0:
                raise ValueError("special directives must be the first entry.")
            axis, ndmin, trans1d = _directive(item, axis, ndmin, trans1d)
            continue
        if isinstance(item, slice):  # NumPy's own range; 2-d as its rules say
            new = np.r_[item] if ndmin <= 1 else np.array(np.r_[item], ndmin=ndmin)
            if ndmin > 1 and trans1d != -1:
                new = new.swapaxes(-1, trans1d)
            kinds.append(new.dtype)
        elif type(item) in np.ScalarType:
            new = item
            kinds.append(item)
        else:
            item_ndim = len(_shape(item) or ())
            new = traced_array(item, copy=None, ndmin=ndmin) if has_tracer(item) else \
                np.array(item, ndmin=ndmin)
            if trans1d != -1 and item_ndim < ndmin:
                k1, k2 = trans1d, ndmin - item_ndim
                k1 += k2 + 1 if k1 < 0 else 0
                axes = list(range(ndmin))
                new = npa.transpose(new, axes[:k1] + axes[k2:] + axes[k1:k2])
            kinds.append(new.dtype)
        objs.append(new)
    dtype = np.result_type(*kinds)
    objs = [traced_array(o, dtype, None, ndmin) if has_tracer(o) else
            np.array(o, dtype=dtype, ndmin=ndmin) for o in objs]
    return npa.concatenate(objs, axis=axis)


r_ = _concatenator("r_")
c_ = _concatenator("c_")
