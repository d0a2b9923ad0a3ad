"""More of NumPy's surface, composed from the functions of ``numpy_api`` at trace level.

Each function follows NumPy's own definition (its order of operations, its dtype rules,
its errors), so values and dtypes agree with NumPy and gradients come from the parts.
What NumPy decides from the data cannot be decided while tracing; where NumPy raises or
branches on values, these functions say what they do instead:

- ``allclose``, ``array_equal`` and ``array_equiv`` return a 0-d traced bool (NumPy a
  Python bool, which would need the value);
- ``nanargmax``/``nanargmin`` give the position of the first element of an all-NaN slice
  (NumPy raises ValueError); ``average`` with weights summing to zero gives NaN or inf
  (NumPy raises ZeroDivisionError); ``cov`` with traced frequency or analytic weights does
  not check their values (non-negative integers), and a slice with no degrees of freedom
  gives NaN or inf as NumPy does, without its warning;
- ``geomspace`` with a traced start or stop of zero gives NaN (NumPy raises ValueError);
- ``gradient`` with traced coordinate arrays always uses the non-uniform formulas (NumPy
  reduces evenly spaced coordinates to a scalar step: the same values up to rounding).

Real and complex: ``real``/``imag`` of a complex tracer are the ``real``/``imag`` ops (views,
as NumPy's), ``angle`` is NumPy's ``arctan2`` of the parts; ``real_if_close`` takes real
inputs only (its result's dtype would depend on the data).
"""

from __future__ import annotations

import builtins
import operator
import string

import numpy as np

from ..errors import (
    AxisError,
    ConcretizationError,
    DTypeError,
    IndexOutOfBounds,
    InvalidArgument,
    ShapeError,
    UnsupportedOperation,
    WeightsShapeError,
)
from ..ir.ops import normalize_axes, normalize_axis
from ..ir.signal_ops import MODES
from . import creation, loops, updates
from .core import bind
from .numpy_api import (
    COMPOSED_UFUNCS,
    FUNCTIONS,
    _as_strong_operand,
    _divide_keep_dtype,
    _reject_out,
    _scalar_result,
    _strong,
    _take_slice,
    _unsupported,
    all,
    any,
    astype,
    atleast_1d,
    aval,
    basic_index,
    broadcast_arrays,
    broadcast_to,
    concatenate,
    diagonal_view,
    einsum,
    expand_dims,
    flip,
    fresh,
    implements,
    matmul,
    max,
    mean,
    min,
    moveaxis,
    normalize_axes_ordered,
    numpy_errors_typed,
    ravel,
    read_only,
    reshape,
    split,
    sum,
    take,
    transpose,
    var,
)
from .numpy_api import where as _where
from .tracer import Tracer

_NO = np._NoValue


def _real_only(name: str, x) -> None:
    if aval(x).dtype.kind == "c":
        raise UnsupportedOperation(f"numpy.{name} of a complex array is not supported inside "
                                   "a jitted function", hint="trace real-valued computations")


def _const(value, dtype):
    """A strong 0-d constant of ``dtype`` (NumPy's ``copyto``/``full`` values)."""
    return np.asarray(value, dtype=dtype)


def _u(name: str, *xs):
    return bind(name, *xs)


# ---------------------------------------------------------------- elementwise compositions


def _modf(x):
    """np.modf: (fractional part, integral part), both with x's sign, as C's modf."""
    dt = np.modf.resolve_dtypes((aval(x).dtype, None, None))[0]
    x = astype(x, dt)
    whole = _u("trunc", x)
    frac = _where(_u("isinf", x), _const(0, dt), _u("subtract", x, whole))
    return _scalar_result(_u("copysign", frac, x)), _scalar_result(whole)


COMPOSED_UFUNCS[np.modf] = _modf


@implements(np.sinc)
def sinc(x):
    y = _u("multiply", np.pi, _where(_u("equal", x, 0), 1.0e-20, x))
    return _strong(_u("true_divide", _u("sin", y), y))


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """A new array; with ``copy=False`` NumPy replaces in ``x`` itself (through views
    too) and returns ``x``: a write into it here as well (a NumPy scalar, which cannot
    change, gives a new one)."""
    x = _as_strong_operand(x)
    dt = aval(x).dtype
    if dt.kind == "c":  # each part, as NumPy's
        result = bind("complex", *(_finite(bind(part, x), nan, posinf, neginf)
                                   for part in ("real", "imag")))
    else:
        result = _finite(x, nan, posinf, neginf) if dt.kind == "f" else x
    if copy or not isinstance(x, Tracer) or x._scalar or x.aval.weak:
        return fresh(result, x)
    if result is not x:
        updates.setitem(x, Ellipsis, result)
    return x


def _finite(x, nan, posinf, neginf):
    """Real ``x`` with NaN and the infinities replaced (NumPy's defaults: 0 and the
    dtype's extremes)."""
    dt = aval(x).dtype
    info = np.finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    x = _where(_u("isnan", x), _const(nan, dt), x)
    x = _where(_u("logical_and", _u("isinf", x), _u("greater", x, 0)), _const(posinf, dt), x)
    return _where(_u("logical_and", _u("isinf", x), _u("less", x, 0)), _const(neginf, dt), x)


@implements(np.real)
def real(val):
    if aval(val).dtype.kind == "c":
        return bind("real", val)
    return val


@implements(np.imag)
def imag(val):
    t = aval(val)
    if t.dtype.kind == "c":
        return bind("imag", val)
    return read_only(bind("full", shape=t.shape, dtype=t.dtype, value=0))  # as NumPy's


@implements(np.angle)
def angle(z, deg=False):
    """NumPy's: ``arctan2`` of the imaginary and real parts."""
    if aval(z).dtype.kind == "c":
        a = _u("arctan2", imag(z), real(z))
    else:
        a = _u("arctan2", 0, z)
    return _u("multiply", a, 180 / np.pi) if deg else a


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    _real_only("real_if_close", a)
    return a


@implements(np.iscomplexobj)
def iscomplexobj(x):
    return aval(x).dtype.kind == "c"


@implements(np.isrealobj)
def isrealobj(x):
    return aval(x).dtype.kind != "c"


@implements(np.iscomplex)
def iscomplex(x):
    if aval(x).dtype.kind == "c":
        return _u("not_equal", imag(x), 0)
    return np.zeros(aval(x).shape, bool)[()]


@implements(np.isreal)
def isreal(x):
    if aval(x).dtype.kind == "c":
        return _u("equal", imag(x), 0)
    return np.ones(aval(x).shape, bool)[()]


@implements(np.isclose)
def isclose(a, b, rtol=1.0e-5, atol=1.0e-8, equal_nan=False):
    x, y, atol, rtol = (v if type(v) in (int, float, complex) else _as_strong_operand(v)
                        for v in (a, b, atol, rtol))
    if type(y) is int:
        y = float(y)
    elif type(y) is not float:
        y = astype(y, np.result_type(aval(y).dtype, 1.0))
    close = _u("less_equal", _u("absolute", _u("subtract", x, y)),
               _u("add", atol, _u("multiply", rtol, _u("absolute", y))))
    result = _u("logical_or", _u("logical_and", close, _u("isfinite", y)), _u("equal", x, y))
    if equal_nan:
        result = _u("logical_or", result, _u("logical_and", _u("isnan", x), _u("isnan", y)))
    return _scalar_result(result)


@implements(np.allclose)
def allclose(a, b, rtol=1.0e-5, atol=1.0e-8, equal_nan=False):
    return all(isclose(a, b, rtol, atol, equal_nan))


@implements(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    t1, t2 = aval(a1), aval(a2)
    if t1.shape != t2.shape:
        return np.False_
    same = _u("equal", a1, a2)
    if equal_nan and t1.dtype.kind in "fc" and t2.dtype.kind in "fc":
        same = _u("logical_or", same, _u("logical_and", _u("isnan", a1), _u("isnan", a2)))
    return all(same)


@implements(np.array_equiv)
def array_equiv(a1, a2):
    try:
        np.broadcast_shapes(aval(a1).shape, aval(a2).shape)
    except ValueError:
        return np.False_
    return all(_u("equal", a1, a2))


@implements(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ShapeError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ShapeError("select with an empty condition list is not possible")
    choices = [c if type(c) in (int, float, complex) else _as_strong_operand(c)
               for c in [*choicelist, default]]
    dtype = FUNCTIONS[np.result_type][0](*choices)
    conds = broadcast_arrays(*[_as_strong_operand(c) for c in condlist])
    for i, cond in enumerate(conds):
        if aval(cond).dtype != np.bool_:
            raise DTypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    first = aval(choices[0]).shape
    shape = aval(conds[0]).shape if not first else np.broadcast_shapes(aval(conds[0]).shape,
                                                                        first)
    result = broadcast_to(astype(_as_strong_operand(choices[-1]), dtype), shape)
    for choice, cond in zip(choices[-2::-1], conds[::-1], strict=True):
        result = bind("where", broadcast_to(cond, shape), astype(choice, dtype), result)
    return result


# ---------------------------------------------------------------- differences and reductions


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=_NO, append=_NO):
    if n == 0:
        return a
    if n < 0:
        raise ShapeError(f"order must be non-negative but got {n!r}")
    a = _as_strong_operand(a)
    t = aval(a)
    if t.ndim == 0:
        raise ShapeError("diff requires input that is at least one dimensional")
    axis = normalize_axis(int(axis), t.ndim)
    edge = tuple(1 if d == axis else s for d, s in enumerate(t.shape))
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            parts.append(a)
        elif extra is not _NO:
            extra = _as_strong_operand(extra)
            parts.append(broadcast_to(extra, edge) if aval(extra).ndim == 0 else extra)
    if len(parts) > 1:
        a = concatenate(parts, axis)
    op = "not_equal" if aval(a).dtype == np.bool_ else "subtract"
    for _ in range(int(n)):
        length = aval(a).shape[axis]
        a = _u(op, _take_slice(a, axis, 1, None), _take_slice(a, axis, 0, builtins.max(
            length - 1, 0)))
    return a


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    _reject_out("ptp", out)
    return _scalar_result(_u("subtract", max(a, axis, None, keepdims),
                             min(a, axis, None, keepdims)))


@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    return sum(astype(a, np.bool_), axis, np.intp, None, keepdims)


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = _as_strong_operand(a)
    t = aval(a)
    axes = None if axis is None else normalize_axes(axis, t.ndim)
    if weights is None:
        avg = mean(a, axes, None, None, keepdims)
        scl = _const(t.size / builtins.max(aval(avg).size, 1), aval(avg).dtype)
    else:
        wgt = _as_strong_operand(weights)
        tw = aval(wgt)
        extra = "f8" if t.dtype.kind in "biu" else tw.dtype
        result_dtype = np.result_type(t.dtype, tw.dtype, extra)
        if t.shape != tw.shape:
            if axes is None:
                raise DTypeError("Axis must be specified when shapes of a and weights differ.")
            given = normalize_axes_ordered(axis, t.ndim)
            if tw.shape != tuple(t.shape[ax] for ax in given):
                raise ShapeError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            wgt = transpose(wgt, [int(i) for i in np.argsort(given)])
            wgt = reshape(wgt, tuple(s if ax in axes else 1 for ax, s in enumerate(t.shape)))
        scl = sum(wgt, axes, result_dtype, None, keepdims)
        prod = _u("multiply", astype(a, result_dtype), astype(wgt, result_dtype))
        avg = _scalar_result(_u("true_divide", sum(prod, axes, None, None, keepdims), scl))
    if not returned:
        return avg
    if aval(scl).shape != aval(avg).shape:
        scl = broadcast_to(scl, aval(avg).shape)
    return avg, _scalar_result(scl) if isinstance(scl, Tracer) else scl[()]


# ---------------------------------------------------------------- NaN-ignoring reductions


def _replace_nan(a, value):
    """NumPy's ``_replace_nan``: (a with NaNs replaced, the NaN mask or None)."""
    a = _as_strong_operand(a)
    dt = aval(a).dtype
    if dt.kind not in "fc":
        return a, None
    mask = _u("isnan", a)
    return _where(mask, _const(value, dt), a), mask


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _no_initial_where("nansum", initial, where)
    return sum(_replace_nan(a, 0)[0], axis, dtype, out, keepdims)


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _no_initial_where("nanprod", initial, where)
    return FUNCTIONS[np.prod][0](_replace_nan(a, 1)[0], axis, dtype, out, keepdims)


def _no_initial_where(name, initial, where):
    if initial is not _NO or where is not _NO:
        raise _unsupported(name, "(..., initial=/where=...)")


def _nan_extremum(name, reduce, fill):
    def impl(a, axis=None, out=None, keepdims=False, initial=_NO, where=_NO):
        _reject_out(name, out)
        _no_initial_where(name, initial, where)
        arr, mask = _replace_nan(a, fill)
        if mask is None:
            return reduce(arr, axis, None, keepdims)
        everywhere = all(mask, axis, None, keepdims)
        return _scalar_result(_where(everywhere, _const(np.nan, aval(arr).dtype),
                                                 reduce(arr, axis, None, keepdims)))

    return impl


nanmax = implements(np.nanmax)(_nan_extremum("nanmax", max, -np.inf))
nanmin = implements(np.nanmin)(_nan_extremum("nanmin", min, np.inf))


@implements(np.nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    return FUNCTIONS[np.argmax][0](_replace_nan(a, -np.inf)[0], axis, out, keepdims=keepdims)


@implements(np.nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    return FUNCTIONS[np.argmin][0](_replace_nan(a, np.inf)[0], axis, out, keepdims=keepdims)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NO):
    _no_initial_where("nanmean", _NO, where)
    arr, mask = _replace_nan(a, 0)
    if mask is None:
        return mean(arr, axis, dtype, out, keepdims)
    cnt = sum(_u("logical_not", mask), axis, np.intp, None, keepdims)
    tot = sum(arr, axis, dtype, out, keepdims)
    return _scalar_result(_divide_keep_dtype(tot, cnt))


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NO,
           mean=_NO, correction=_NO):
    _no_initial_where("nanvar", _NO, where)
    if mean is not _NO or correction is not _NO:
        raise _unsupported("nanvar", "(..., mean=/correction=...)")
    arr, mask = _replace_nan(a, 0)
    if mask is None:
        return var(arr, axis, dtype, out, ddof, keepdims)
    dtype = None if dtype is None else np.dtype(dtype)
    cnt = sum(_u("logical_not", mask), axis, np.intp, None, True)
    avg = _divide_keep_dtype(sum(arr, axis, dtype, None, True), cnt)
    dev = astype(_u("subtract", arr, avg), aval(arr).dtype)
    dev = _where(mask, _const(0, aval(dev).dtype), dev)
    if aval(dev).dtype.kind == "c":  # NumPy's: (dev * conj(dev)).real
        sqr = real(_u("multiply", dev, _u("conjugate", dev)))
    else:
        sqr = _u("multiply", dev, dev)
    total = sum(sqr, axis, dtype, None, keepdims)
    if aval(total).ndim < aval(cnt).ndim:
        cnt = reshape(cnt, aval(total).shape)
    dof = _u("subtract", cnt, ddof)
    result = _divide_keep_dtype(total, dof)
    return _scalar_result(_where(_u("less_equal", dof, 0), _const(np.nan, aval(result).dtype),
                                result))


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NO,
           mean=_NO, correction=_NO):
    v = nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
               correction=correction)
    return _scalar_result(astype(_u("sqrt", v), aval(v).dtype))


# ---------------------------------------------------------------- diagonals


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """A view, read-only as NumPy's (see ``diagonal_view``)."""
    a = _as_strong_operand(a)
    t = aval(a)
    if t.ndim < 2:
        raise ShapeError("diag requires an array of at least two dimensions")
    ax1, ax2 = normalize_axis(int(axis1), t.ndim), normalize_axis(int(axis2), t.ndim)
    if ax1 == ax2:
        raise ShapeError("axis1 and axis2 cannot be the same")
    return read_only(diagonal_view(a, offset, ax1, ax2))


@implements(np.diag)
def diag(v, k=0):
    v = _as_strong_operand(v)
    t = aval(v)
    if t.ndim == 2:
        return diagonal(v, k)
    if t.ndim != 1:
        raise ShapeError("Input must be 1- or 2-d.")
    k = int(k)
    size = t.shape[0] + abs(k)
    column = bind("pad", v, widths=((0, k) if k >= 0 else (-k, 0),), value=0)
    mask = np.eye(size, k=k, dtype=bool)
    return bind("where", mask, reshape(column, (size, 1)), _const(0, t.dtype))


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _reject_out("trace", out)
    return sum(diagonal(a, offset, axis1, axis2), -1, dtype)


def _indices_from(triangle_indices):
    """``np.triu_indices_from`` / ``np.tril_indices_from``: static, from the shape only."""
    def indices_from(arr, k=0):
        t = aval(arr)
        if t.ndim != 2:
            raise ShapeError("input array must be 2-d")
        return triangle_indices(t.shape[-2], k=k, m=t.shape[-1])

    return indices_from


implements(np.triu_indices_from)(_indices_from(np.triu_indices))
implements(np.tril_indices_from)(_indices_from(np.tril_indices))


# ---------------------------------------------------------------- splitting and stacking


def _split_along(name: str, least: int, axis_of):
    def impl(ary, indices_or_sections):
        t = aval(ary)
        if t.ndim < least:
            raise ShapeError(f"{name} only works on arrays of {least} or more dimensions")
        return split(ary, indices_or_sections, axis_of(t.ndim))

    return impl


hsplit = implements(np.hsplit)(_split_along("hsplit", 1, lambda nd: 1 if nd > 1 else 0))
vsplit = implements(np.vsplit)(_split_along("vsplit", 2, lambda nd: 0))
dsplit = implements(np.dsplit)(_split_along("dsplit", 3, lambda nd: 2))


@implements(np.atleast_3d)
def atleast_3d(*arys):
    res = []
    for a in arys:
        s = aval(a).shape
        shape = {0: (1, 1, 1), 1: (1, *s, 1), 2: (*s, 1)}.get(len(s), s)
        res.append(reshape(a, shape) if len(s) < 3 else a)
    return res[0] if len(res) == 1 else tuple(res)


@implements(np.column_stack)
def column_stack(tup):
    arrays = []
    for a in tup:
        a = _as_strong_operand(a)
        s = aval(a).shape
        arrays.append(reshape(a, (s[0] if s else 1, 1)) if len(s) < 2 else a)
    return concatenate(arrays, 1)


@implements(np.dstack)
def dstack(tup):
    arrs = atleast_3d(*[_as_strong_operand(a) for a in tup])
    return concatenate([arrs] if not isinstance(arrs, tuple) else list(arrs), 2)


if hasattr(np, "row_stack"):
    implements(np.row_stack)(FUNCTIONS[np.vstack][0])


@implements(np.append)
def append(arr, values, axis=None):
    arr, values = _as_strong_operand(arr), _as_strong_operand(values)
    if axis is None:
        if aval(arr).ndim != 1:
            arr = ravel(arr)
        values = ravel(values)
        axis = aval(arr).ndim - 1
    return concatenate((arr, values), axis)


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    """NumPy's own np.insert, run on the elements' positions, says where each output
    element comes from (its reading of ``obj``, its broadcasting of ``values``, its
    errors); the result gathers them from ``arr`` and ``values`` cast to ``arr``'s dtype."""
    arr = _as_strong_operand(arr)
    values = astype(_as_strong_operand(values), aval(arr).dtype)
    t, v = aval(arr), aval(values)
    source = _positions("insert", obj, lambda: np.insert(
        _numbered(t.shape), obj, _numbered(v.shape, t.size), axis=axis))
    return take(concatenate((ravel(arr), ravel(values))), source)


@implements(np.delete)
def delete(arr, obj, axis=None):
    """NumPy's own np.delete of the elements' positions says which are kept."""
    arr = _as_strong_operand(arr)
    t = aval(arr)
    kept = _positions("delete", obj, lambda: np.delete(_numbered(t.shape), obj, axis=axis))
    return take(ravel(arr), kept)


def _numbered(shape: tuple[int, ...], start: int = 0) -> np.ndarray:
    """Positions ``start, start + 1, ...`` in an array of ``shape``."""
    return np.arange(start, start + int(np.prod(shape)), dtype=np.intp).reshape(shape)


def _positions(name: str, obj, run) -> np.ndarray:
    """``run()``: NumPy's function on numbered positions, its errors as tracejit's."""
    if isinstance(obj, Tracer) or (isinstance(obj, (list, tuple))
                                   and builtins.any(isinstance(o, Tracer) for o in obj)):
        raise ConcretizationError(f"np.{name} at traced positions (the result's shape "
                                  "would depend on their values)",
                                  hint="pass the positions as numbers or a NumPy array")
    with numpy_errors_typed():
        return run()


@implements(np.resize)
def resize(a, new_shape):
    """``a``'s elements repeated in order to fill ``new_shape`` (zeros if it has none)."""
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    a = ravel(_as_strong_operand(a))
    if builtins.any(n < 0 for n in shape):
        raise ShapeError("all elements of `new_shape` must be non-negative")
    t, size = aval(a), int(np.prod(shape))
    if t.size == 0 or size == 0:
        return bind("full", shape=shape, dtype=t.dtype, value=0)
    repeats = -(-size // t.size)
    return reshape(_take_slice(concatenate((a,) * repeats), 0, 0, size), shape)


@implements(np.block)
def block(arrays):
    """Nested lists of arrays joined innermost first, along the last axes, each block
    raised to the result's dimensions first (NumPy's rules, and its errors)."""
    depth, ndim, _ = _block_depth(arrays, "arrays", 0)
    return fresh(_block(arrays, depth, builtins.max(depth, ndim), 0), arrays)  # (of an array)


def _block_depth(arrays, where: str, depth: int) -> tuple[int, int, str]:
    """(list depth, largest block ndim, the first block's place) of ``arrays``."""
    if isinstance(arrays, tuple):
        raise DTypeError(f"{where} is a tuple. Only lists can be used to arrange blocks, and "
                         "np.block does not allow implicit conversion from tuple to ndarray.")
    if not isinstance(arrays, list):
        return depth, aval(_as_strong_operand(arrays)).ndim, where
    if not arrays:
        raise ShapeError(f"List at {where} cannot be empty")
    found = [_block_depth(a, f"{where}[{i}]", depth + 1) for i, a in enumerate(arrays)]
    for d, _, place in found[1:]:
        if d != found[0][0]:
            raise ShapeError(f"List depths are mismatched. First element was at depth "
                             f"{found[0][0]}, but there is an element at depth {d} ({place})")
    return found[0][0], builtins.max(n for _, n, _ in found), found[0][2]


def _block(arrays, list_ndim: int, ndim: int, depth: int):
    if depth < list_ndim:
        parts = [_block(a, list_ndim, ndim, depth + 1) for a in arrays]
        return concatenate(parts, -(list_ndim - depth))
    a = _as_strong_operand(arrays)
    shape = aval(a).shape
    return reshape(a, (1,) * (ndim - len(shape)) + shape)


@implements(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """NumPy's steps: each jump's excess over half a period, as multiples of the period,
    taken off every later element by a running sum."""
    p = _as_strong_operand(p)
    dd = diff(p, axis=axis)
    axis = normalize_axis(int(axis), aval(p).ndim)
    discont = period / 2 if discont is None else discont
    dtype = np.result_type(np.empty(0, aval(dd).dtype), period)
    if np.issubdtype(dtype, np.integer):
        high, rem = divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = np.mod(dd - low, period) + low
    if ambiguous:  # a jump of exactly half a period keeps its sign
        ddmod = _where((ddmod == low) & (dd > 0), astype(np.asarray(high), aval(ddmod).dtype),
                       ddmod)
    delta = ddmod - dd
    correction = _where(np.abs(dd) < discont, np.zeros((), aval(delta).dtype), delta)
    n = aval(p).shape[axis]
    head = astype(_take_slice(p, axis, 0, builtins.min(n, 1)), dtype)
    rest = _take_slice(p, axis, 1, n) + np.cumsum(correction, axis)
    return concatenate((head, astype(rest, dtype)), axis)


@implements(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    """``arr[the index of take_along_axis] = values``, in place as NumPy writes it. With
    ``axis=None`` NumPy writes through ``arr``'s flat view, and raises where it has none
    (not C-contiguous); a traced array's layout is unknown, so this always writes."""
    t, ti = aval(arr), aval(_as_strong_operand(indices))
    if axis is None and ti.ndim != 1:
        raise ShapeError("when axis=None, `indices` must have a single dimension.")
    if ti.dtype.kind not in "iu":
        raise IndexOutOfBounds("`indices` must be an integer array")
    if axis is None:
        arr, axis = arr.reshape(-1), 0
        t = aval(arr)
    axis = normalize_axis(operator.index(axis), t.ndim)
    if ti.ndim != t.ndim:
        raise ShapeError("`indices` and `arr` must have the same number of dimensions")
    key = tuple(indices if d == axis else np.arange(n).reshape(
        [n if e == d else 1 for e in range(t.ndim)]) for d, n in enumerate(t.shape))
    arr[key] = values
    return None


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` of every 1-d slice along ``axis``, traced once as a map (a scan without a
    carry, which the loop passes turn into whole-array ops where they can), its results'
    dimensions in place of ``axis`` as NumPy stacks them."""
    arr = _as_strong_operand(arr)
    t = aval(arr)
    axis = normalize_axis(operator.index(axis), t.ndim)
    view = moveaxis(arr, axis, -1)
    lead = aval(view).shape[:-1]
    if 0 in lead:
        raise ShapeError("Cannot apply_along_axis when any iteration dimensions are 0")

    def step(carry, row):  # (the result as NumPy's asanyarray makes it: lists stack)
        res = func1d(row, *args, **kwargs)
        return carry, creation.traced_array(res) if isinstance(res, (list, tuple)) else \
            _as_strong_operand(res)

    out = loops.scan(step, (), reshape(view, (int(np.prod(lead)), t.shape[axis])),
                     what="np.apply_along_axis")[1]
    res_shape = aval(out).shape[1:]
    out = reshape(out, lead + res_shape)
    return transpose(out, [*range(axis), *range(len(lead), len(lead) + len(res_shape)),
                           *range(axis, len(lead))])


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    axes = tuple(axes)
    if len(axes) != 2:
        raise ShapeError("len(axes) must be 2.")
    m = _as_strong_operand(m)
    nd = aval(m).ndim
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == nd:
        raise ShapeError("Axes must be different.")
    if not (-nd <= axes[0] < nd and -nd <= axes[1] < nd):
        raise ShapeError(f"Axes={axes} out of range for array of ndim={nd}.")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, axes[0]), axes[1])
    perm = list(range(nd))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    return transpose(flip(m, axes[1]), perm) if k == 1 else flip(transpose(m, perm), axes[1])


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    n = aval(a).ndim
    axis = normalize_axis(int(axis), n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise AxisError(f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = [i for i in range(n) if i != axis]
    axes.insert(start, axis)
    return transpose(a, axes)


# ---------------------------------------------------------------- products


@implements(np.kron)
def kron(a, b):
    b = _as_strong_operand(b)
    a = _as_strong_operand(a)
    ta, tb = aval(a), aval(b)
    if ta.ndim < tb.ndim:
        a = reshape(a, (1,) * (tb.ndim - ta.ndim) + ta.shape)
    ta = aval(a)
    if ta.ndim == 0 or tb.ndim == 0:
        return _strong(_u("multiply", a, b))
    as_ = (1,) * builtins.max(0, tb.ndim - ta.ndim) + ta.shape
    bs = (1,) * builtins.max(0, ta.ndim - tb.ndim) + tb.shape
    a = reshape(a, tuple(x for s in as_ for x in (s, 1)))
    b = reshape(b, tuple(x for s in bs for x in (1, s)))
    return reshape(_u("multiply", a, b), tuple(x * y for x, y in zip(as_, bs, strict=True)))


@implements(np.vdot)
def vdot(a, b, /):
    a, b = ravel(_as_strong_operand(a)), ravel(_as_strong_operand(b))
    _real_only("vdot", a)
    if aval(a).shape != aval(b).shape:
        raise ShapeError("vectors have different lengths")
    return _scalar_result(matmul(a, b))


def _component(x, i):
    return basic_index(x, aval(x).shape, [slice(None)] * (aval(x).ndim - 1) + [i])


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _as_strong_operand(a), _as_strong_operand(b)
    a = moveaxis(a, normalize_axis(int(axisa), aval(a).ndim), -1)
    b = moveaxis(b, normalize_axis(int(axisb), aval(b).ndim), -1)
    na, nb = aval(a).shape[-1], aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    dtype = np.promote_types(aval(a).dtype, aval(b).dtype)
    a0, a1, b0, b1 = _component(a, 0), _component(a, 1), _component(b, 0), _component(b, 1)

    def mul(x, y):
        return astype(_u("multiply", x, y), dtype)

    def sub(x, y):
        return astype(_u("subtract", x, y), dtype)

    cp2 = sub(mul(a0, b1), mul(a1, b0))
    if na == 2 and nb == 2:
        return cp2
    if na == 3 and nb == 3:
        a2, b2 = _component(a, 2), _component(b, 2)
        cp0, cp1 = sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2))
    elif na == 2:
        b2 = _component(b, 2)
        cp0, cp1 = mul(a1, b2), astype(_u("negative", mul(a0, b2)), dtype)
    else:
        a2 = _component(a, 2)
        cp0, cp1 = astype(_u("negative", mul(a2, b1)), dtype), mul(a2, b0)
    cp = FUNCTIONS[np.stack][0](broadcast_arrays(cp0, cp1, cp2), -1)
    return moveaxis(cp, -1, normalize_axis(int(axisc), aval(cp).ndim))


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    a = _as_strong_operand(a)
    t = aval(a)
    if t.ndim < 2:
        raise ShapeError(f"{t.ndim}-dimensional array given. Array must be at least "
                         "two-dimensional")
    if t.shape[-1] != t.shape[-2]:
        raise ShapeError("Last 2 dimensions of the array must be square")
    if not isinstance(n, (int, np.integer)) or isinstance(n, (bool, np.bool_)):
        raise DTypeError("exponent must be an integer")
    n = int(n)
    if n == 0:
        return broadcast_to(np.eye(t.shape[-1], dtype=t.dtype), t.shape)
    if n < 0:
        inv = FUNCTIONS.get(np.linalg.inv)
        if inv is None:
            raise _unsupported("linalg.matrix_power", " with a negative exponent (it needs "
                               "numpy.linalg.inv)")
        a, n = inv[0](a), -n
    z = result = None
    if n <= 3:
        result = a
        for _ in range(n - 1):
            result = matmul(result, a)
        return result
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _sublist_labels(sub) -> str:
    letters = string.ascii_uppercase + string.ascii_lowercase  # NumPy's order
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, (int, np.integer)) and 0 <= int(s) < len(letters):
            out.append(letters[int(s)])
        else:
            raise ShapeError("subscript is not within the valid range [0, 52)")
    return "".join(out)


@implements(np.einsum)
def einsum_any_form(*operands, out=None, optimize=False, dtype=None, order="K",
                    casting="safe"):
    """``einsum`` in both forms: ``(subscripts, *operands)`` and NumPy's interleaved
    ``(op0, sublist0, op1, sublist1, ..., [sublistout])``, turned into subscripts."""
    if operands and not isinstance(operands[0], str):
        ops, subs = list(operands[0::2]), list(operands[1::2])
        out_sub = None
        if len(operands) % 2:
            out_sub = ops.pop()
        text = ",".join(_sublist_labels(s) for s in subs)
        if out_sub is not None:
            text += "->" + _sublist_labels(out_sub)
        operands = (text, *ops)
    return einsum(*operands, out=out, optimize=optimize, dtype=dtype, order=order,
                  casting=casting)


# ---------------------------------------------------------------- gradient


def _spacings(f_shape, axes, varargs):
    """Per axis: a scalar step (Python number, NumPy scalar or 0-d tracer) or the 1-D
    differences of the coordinates, as NumPy's gradient reduces its ``varargs``."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0 and not _is_1d_tracer(varargs[0]):
        return list(varargs) * len(axes)
    if len(varargs) != len(axes):
        raise DTypeError("invalid number of arguments")
    out = []
    for ax, dist in zip(axes, varargs, strict=True):
        t = aval(dist)
        if t.ndim == 0:
            out.append(dist)
            continue
        if t.ndim != 1:
            raise ShapeError("distances must be either scalars or 1d")
        if t.shape[0] != f_shape[ax]:
            raise ShapeError("when 1d, distances must match the length of the corresponding "
                             "dimension")
        if t.dtype.kind in "iu":
            dist = astype(dist, np.float64)
        if isinstance(dist, Tracer):
            out.append(diff(dist))
            continue
        d = np.diff(np.asarray(dist))
        out.append(d[0] if (d == d[0]).all() else d)
    return out


def _is_1d_tracer(x) -> bool:
    return isinstance(x, Tracer) and x.ndim == 1


def _shaped(c, nd: int, axis: int):
    shape = [1] * nd
    shape[axis] = -1
    return reshape(_as_strong_operand(c), tuple(shape))


def _weighted(terms, otype):
    """``a * f0 + b * f1 + c * f2`` in NumPy's order, assigned into an ``otype`` array."""
    (a, f0), (b, f1), (c, f2) = terms
    total = _u("add", _u("add", _u("multiply", a, f0), _u("multiply", b, f1)),
               _u("multiply", c, f2))
    return astype(total, otype)


def _interior(f, axis, dx, otype, nd):
    def at(lo, hi):
        return _take_slice(f, axis, lo, hi)

    n = aval(f).shape[axis]
    if np.ndim(dx) == 0 and not _is_1d_tracer(dx):
        return astype(_u("true_divide", _u("subtract", at(2, None), at(0, n - 2)),
                         _u("multiply", 2.0, dx)), otype)
    dx1, dx2 = _take_slice(dx, 0, 0, -1), _take_slice(dx, 0, 1, None)
    s = _u("add", dx1, dx2)
    a = _u("true_divide", _u("negative", dx2), _u("multiply", dx1, s))
    b = _u("true_divide", _u("subtract", dx2, dx1), _u("multiply", dx1, dx2))
    c = _u("true_divide", dx1, _u("multiply", dx2, s))
    return _weighted([(_shaped(a, nd, axis), at(0, n - 2)), (_shaped(b, nd, axis), at(1, n - 1)),
                      (_shaped(c, nd, axis), at(2, None))], otype)


def _edges(f, axis, dx, otype, edge_order):
    n = aval(f).shape[axis]

    def at(i):
        return _take_slice(f, axis, i % n, i % n + 1)

    uniform = np.ndim(dx) == 0 and not _is_1d_tracer(dx)

    def d(i):
        return dx if uniform else _component(dx, i)

    if edge_order == 1:
        first = _u("true_divide", _u("subtract", at(1), at(0)), d(0))
        last = _u("true_divide", _u("subtract", at(-1), at(-2)), d(-1))
        return astype(first, otype), astype(last, otype)
    if uniform:
        c0 = [_u("true_divide", v, dx) for v in (-1.5, 2.0, -0.5)]
        c1 = [_u("true_divide", v, dx) for v in (0.5, -2.0, 1.5)]
    else:
        c0 = _second_order_coefficients(d(0), d(1), first=True)
        c1 = _second_order_coefficients(d(-2), d(-1), first=False)
    first = _weighted(list(zip(c0, (at(0), at(1), at(2)), strict=True)), otype)
    last = _weighted(list(zip(c1, (at(-3), at(-2), at(-1)), strict=True)), otype)
    return first, last


def _second_order_coefficients(dx1, dx2, first: bool):
    s = _u("add", dx1, dx2)
    if first:
        return [_u("true_divide", _u("negative", _u("add", _u("multiply", 2.0, dx1), dx2)),
                   _u("multiply", dx1, s)),
                _u("true_divide", s, _u("multiply", dx1, dx2)),
                _u("true_divide", _u("negative", dx1), _u("multiply", dx2, s))]
    return [_u("true_divide", dx2, _u("multiply", dx1, s)),
            _u("true_divide", _u("negative", _u("add", dx2, dx1)), _u("multiply", dx1, dx2)),
            _u("true_divide", _u("add", _u("multiply", 2.0, dx2), dx1), _u("multiply", dx2, s))]


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    f = _as_strong_operand(f)
    t = aval(f)
    axes = tuple(range(t.ndim)) if axis is None else tuple(
        normalize_axes_ordered(axis, t.ndim))
    dxs = _spacings(t.shape, axes, varargs)
    if edge_order > 2:
        raise ShapeError("'edge_order' greater than 2 not supported")
    otype = t.dtype
    if otype.kind not in "fc":
        if otype.kind in "iu":
            f = astype(f, np.float64)
        otype = np.dtype(np.float64)
    outs = []
    for ax, dx in zip(axes, dxs, strict=True):
        if t.shape[ax] < edge_order + 1:
            raise ShapeError("Shape of array too small to calculate a numerical gradient, at "
                             "least (edge_order + 1) elements are required.")
        first, last = _edges(f, ax, dx, otype, edge_order)
        outs.append(concatenate([first, _interior(f, ax, dx, otype, t.ndim), last], ax))
    return outs[0] if len(axes) == 1 else tuple(outs)


# ---------------------------------------------------------------- statistics


def _rows(x, dtype, rowvar: bool):
    x = astype(_as_strong_operand(x), dtype)
    t = aval(x)
    if t.ndim < 2:
        x = reshape(x, (1,) * (2 - t.ndim) + t.shape)
    if not rowvar and aval(x).shape[0] != 1:
        x = transpose(x)
    return x


def _cov_weights(fweights, aweights, n: int):
    w = None
    for name, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        weights = _as_strong_operand(weights)
        tw = aval(weights)
        concrete = None if isinstance(weights, Tracer) else np.asarray(weights)
        if name == "fweights" and concrete is not None and not np.all(
                concrete == np.around(concrete)):
            raise DTypeError("fweights must be integer")
        if tw.ndim > 1:
            raise WeightsShapeError(f"cannot handle multidimensional {name}")
        if tw.shape[0] != n:
            raise WeightsShapeError(f"incompatible numbers of samples and {name}")
        if concrete is not None and (concrete < 0).any():
            raise ShapeError(f"{name} cannot be negative")
        weights = astype(weights, np.float64)
        w = weights if w is None else _u("multiply", w, weights)
    return w


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    if ddof is not None and ddof != int(ddof):
        raise ShapeError("ddof must be integer")
    m = _as_strong_operand(m)
    if aval(m).ndim > 2:
        raise ShapeError("m has more than 2 dimensions")
    if y is not None:
        y = _as_strong_operand(y)
        if aval(y).ndim > 2:
            raise ShapeError("y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(aval(m).dtype, *([aval(y).dtype] if y is not None else []),
                               np.float64)
    X = astype(m, dtype)
    if aval(X).ndim < 2:
        X = reshape(X, (1,) * (2 - aval(X).ndim) + aval(X).shape)
    if not rowvar and aval(m).ndim != 1:
        X = transpose(X)
    if aval(X).shape[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        X = concatenate((X, _rows(y, dtype, rowvar)), 0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    n = aval(X).shape[1]
    w = _cov_weights(fweights, aweights, n)
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = _component(w_sum, 0)
    if w is None:
        fact = n - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = _u("subtract", w_sum, ddof)
    else:
        spread = _u("true_divide", sum(_u("multiply", w, astype(
            _as_strong_operand(aweights), np.float64))), w_sum)
        fact = _u("subtract", w_sum, _u("multiply", ddof, spread))
    if isinstance(fact, Tracer):
        fact = _where(_u("less_equal", fact, 0), 0.0, fact)
    elif fact <= 0:
        fact = 0.0
    X = _u("subtract", X, reshape(avg, (-1, 1)))
    X_T = transpose(X if w is None else _u("multiply", X, w))
    if isinstance(fact, Tracer):
        scale = _u("true_divide", 1, fact)
    else:
        with np.errstate(divide="ignore"):
            scale = np.true_divide(1, fact)  # a float64 scalar, as NumPy multiplies by
    if aval(X_T).dtype.kind == "c":  # NumPy's: X times X_T's conjugate
        X_T = _u("conjugate", X_T)
    c = _u("multiply", FUNCTIONS[np.dot][0](X, X_T), scale)
    return FUNCTIONS[np.squeeze][0](astype(c, aval(X).dtype))


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if aval(c).ndim != 2:
        return _u("true_divide", c, c)
    stddev = _u("sqrt", real(diag(c)))
    c = _u("true_divide", c, reshape(stddev, (-1, 1)))
    c = _u("true_divide", c, reshape(stddev, (1, -1)))
    if aval(c).dtype.kind == "c":  # NumPy clips each part
        return bind("complex", *(FUNCTIONS[np.clip][0](part(c), -1, 1) for part in (real, imag)))
    return FUNCTIONS[np.clip][0](c, -1, 1)


# ---------------------------------------------------------------- signals


def _correlate(a, v, mode: str):
    """One ``correlate`` op (``ir/signal_ops.py``) of 1-D ``a`` and ``v`` promoted to their
    common dtype: NumPy's own direct loop runs it."""
    if aval(a).ndim != 1 or aval(v).ndim != 1:
        deep = builtins.max(aval(a).ndim, aval(v).ndim) > 1
        raise ShapeError("object too deep for desired array" if deep else
                         "object of too small depth for desired array")
    dtype = np.result_type(aval(a).dtype, aval(v).dtype)
    return bind("correlate", astype(a, dtype), astype(v, dtype), mode=_mode(mode))


def _mode(mode) -> str:
    """NumPy's mode argument: a name, or 0, 1, 2 for valid, same, full."""
    if isinstance(mode, str):
        if mode not in MODES:
            raise ShapeError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
        return mode
    try:
        index = operator.index(mode)
    except TypeError:
        raise InvalidArgument("convolve/correlate mode not understood") from None
    if not 0 <= index < len(MODES):
        raise ShapeError("integer convolve/correlate mode must be 0, 1, or 2")
    return MODES[index]


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    a, v = _as_strong_operand(a), _as_strong_operand(v)
    _real_only("correlate", a)
    _real_only("correlate", v)
    for which, x in (("first", a), ("second", v)):
        if aval(x).ndim == 1 and aval(x).shape[0] == 0:
            raise ShapeError(f"{which} array argument cannot be empty")
    return _correlate(a, v, mode)


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """NumPy's: the longer operand correlated with the shorter one reversed."""
    a, v = atleast_1d(_as_strong_operand(a)), atleast_1d(_as_strong_operand(v))
    _real_only("convolve", a)
    _real_only("convolve", v)
    if aval(v).shape[0] > aval(a).shape[0]:
        a, v = v, a
    if aval(a).shape[0] == 0:
        raise ShapeError("a cannot be empty")
    if aval(v).shape[0] == 0:
        raise ShapeError("v cannot be empty")
    if aval(a).ndim != 1 or aval(v).ndim != 1:
        raise ShapeError("object too deep for desired array")
    return _correlate(a, flip(v, 0), mode)


# ---------------------------------------------------------------- grids and ranges


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ShapeError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    ones = (1,) * nd
    out = [reshape(_as_strong_operand(x), ones[:i] + (-1,) + ones[i + 1:])
           for i, x in enumerate(xi)]
    if indexing == "xy" and nd > 1:
        out[0] = reshape(out[0], (1, -1) + ones[2:])
        out[1] = reshape(out[1], (-1, 1) + ones[2:])
    if not sparse:
        out = broadcast_arrays(*out)
    # views of xi with copy=False (read-only broadcasts where not sparse), else new arrays
    return tuple(o.copy() if copy and isinstance(o, Tracer) else o for o in out)


def _inexact(*xs) -> np.dtype:
    dt = FUNCTIONS[np.result_type][0](*xs)
    return dt if dt.kind in "fc" else np.result_type(dt, np.float64)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    num = operator.index(num)
    if num < 0:
        raise ShapeError(f"Number of samples, {num}, must be non-negative.")
    nd = len(np.broadcast_shapes(aval(_as_strong_operand(start)).shape,
                                 aval(_as_strong_operand(stop)).shape))
    k = np.arange(0, num, dtype=_inexact(start, stop)).reshape((-1,) + (1,) * nd)
    y, step = _spaced(k, start, stop, num, endpoint, dtype)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    return (y, _scalar_result(step) if isinstance(step, Tracer) else step) if retstep else y


def linspace_at(k, start, stop, num: int, dtype):
    """Elements ``k`` (an array of positions) of ``linspace(start, stop, num,
    dtype=dtype)``, computed as ``linspace`` computes every element, so with its bits,
    without making the array: a histogram's edges at each value's bin fuse into one loop
    where a gather from the edges would not."""
    return _spaced(k, start, stop, num, True, dtype)[0]


def _spaced(k, start, stop, num: int, endpoint: bool, dtype):
    """NumPy's linspace at positions ``k`` (of ``start``'s and ``stop``'s inexact dtype
    or integers), and its step: ``k * step + start``, or ``k / div * delta + start`` where
    any step is zero; the last position is ``stop`` itself."""
    div = num - 1 if endpoint else num
    dt = _inexact(start, stop)
    start, stop = (_as_strong_operand(s) for s in (start, stop))
    delta = _u("subtract", astype(stop, dt), astype(start, dt))
    y = astype(k, dt)
    if div > 0:
        step = _u("true_divide", delta, div)
        y = _where(any(_u("equal", step, 0)), _u("multiply", _u("true_divide", y, div), delta),
                   _u("multiply", y, step))
    else:
        step = _const(np.nan, dt)
        y = _u("multiply", y, delta)
    y = astype(_u("add", y, start), dt)
    if endpoint and num > 1:
        y = _where(_u("equal", k, num - 1), astype(stop, dt), y)
    if dtype is not None:
        if np.issubdtype(dtype, np.integer):
            y = _u("floor", y)
        y = astype(y, dtype)
    return y, step


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    if not isinstance(base, (float, int)) and np.ndim(base):
        ndmax = len(np.broadcast_shapes(*(aval(a).shape for a in (start, stop, base))))
        start, stop, base = (reshape(_as_strong_operand(a), (1,) * (ndmax - aval(a).ndim)
                                     + aval(a).shape) for a in (start, stop, base))
        base = expand_dims(base, axis)
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    out = _strong(_u("power", base, y))
    return out if dtype is None else astype(out, dtype)


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    start, stop = np.asarray(start) if not isinstance(start, Tracer) else start, \
        np.asarray(stop) if not isinstance(stop, Tracer) else stop
    for s in (start, stop):
        if not isinstance(s, Tracer) and (s == 0).any():
            raise ShapeError("Geometric sequence cannot include zero")
    dt = np.result_type(aval(start).dtype, aval(stop).dtype, float(num), np.zeros((), dtype))
    out_dtype = dt if dtype is None else np.dtype(dtype)
    start, stop = astype(start, dt), astype(stop, dt)
    sign = _u("sign", start)
    start = astype(_u("true_divide", start, sign), dt)
    stop = _u("true_divide", stop, sign)
    result = logspace(_u("log10", start), _u("log10", stop), num=num, endpoint=endpoint,
                      base=10.0, dtype=dt)
    if num > 0:
        rest = aval(result).shape[1:]
        pieces = [broadcast_to(reshape(start, (1,) + aval(start).shape), (1,) + rest)]
        middle_end = num - 1 if num > 1 and endpoint else num
        pieces.append(_take_slice(result, 0, 1, middle_end))
        if num > 1 and endpoint:
            pieces.append(broadcast_to(reshape(stop, (1,) + aval(stop).shape), (1,) + rest))
        result = concatenate([astype(p, dt) for p in pieces], 0)
    result = astype(_u("multiply", result, sign), dt)
    if axis != 0:
        result = moveaxis(result, 0, axis)
    return astype(result, out_dtype)


# ---------------------------------------------------------------- small ones


@implements(np.fix)
def fix(x, out=None):
    _reject_out("fix", out)
    return _scalar_result(_strong(_u("trunc", x)))


def _inf_of_sign(name: str, negative: bool):
    def impl(x, out=None):
        _reject_out(name, out)
        _real_only(name, x)
        sign = _u("signbit", x)
        return _scalar_result(_u("logical_and", _u("isinf", x),
                                 sign if negative else _u("logical_not", sign)))

    return impl


isposinf = implements(np.isposinf)(_inf_of_sign("isposinf", False))
isneginf = implements(np.isneginf)(_inf_of_sign("isneginf", True))


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    ary = ravel(_as_strong_operand(ary))
    dt = aval(ary).dtype
    n = aval(ary).shape[0]
    d = _u("subtract", _take_slice(ary, 0, 1, None), _take_slice(ary, 0, 0, builtins.max(
        n - 1, 0)))
    parts = []
    for extra, where_ in ((to_begin, "to_begin"), (None, None), (to_end, "to_end")):
        if where_ is None:
            parts.append(d)
        elif extra is not None:
            extra = _as_strong_operand(extra)
            if not np.can_cast(aval(extra).dtype, dt, casting="same_kind"):
                raise DTypeError(f"dtype of `{where_}` must be compatible with input `ary` "
                                 "under the `same_kind` rule.")
            parts.append(astype(ravel(extra), dt))
    return concatenate(parts) if len(parts) > 1 else d


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = _as_strong_operand(y)
    nd = aval(y).ndim
    if x is None:
        d = dx
    else:
        x = _as_strong_operand(x)
        if aval(x).ndim == 1:
            d = diff(x)
            shape = [1] * nd
            shape[axis] = aval(d).shape[0]
            d = reshape(d, tuple(shape))
        else:
            d = diff(x, axis=axis)
    ax = normalize_axis(int(axis), nd)
    n = aval(y).shape[ax]
    pairs = _u("add", _take_slice(y, ax, 1, None), _take_slice(y, ax, 0, builtins.max(n - 1, 0)))
    return sum(_u("true_divide", _u("multiply", d, pairs), 2.0), ax)


def _vecdot(x1, x2):
    _real_only("vecdot", x1)
    _real_only("vecdot", x2)
    dtype = np.result_type(aval(x1).dtype, aval(x2).dtype)
    if aval(x1).ndim == 0 or aval(x2).ndim == 0:
        raise ShapeError("vecdot: Input operand does not have enough dimensions (has 0, gufunc "
                         "core with signature (n),(n)->() requires 1)")
    if aval(x1).shape[-1] != aval(x2).shape[-1]:
        raise ShapeError("vecdot: Input operand 1 has a mismatch in its core dimension 0")
    prod = _u("multiply", astype(x1, dtype), astype(x2, dtype))
    return sum(prod, -1, dtype)


def _matvec(a, v):
    v = _as_strong_operand(v)
    if aval(v).ndim == 0 or aval(a).ndim < 2:
        raise ShapeError("matvec: Input operand does not have enough dimensions")
    out = matmul(a, expand_dims(v, -1))
    return reshape(out, aval(out).shape[:-1])


def _vecmat(v, a):
    v = _as_strong_operand(v)
    if aval(v).ndim == 0 or aval(a).ndim < 2:
        raise ShapeError("vecmat: Input operand does not have enough dimensions")
    out = matmul(expand_dims(v, -2), a)
    return reshape(out, aval(out).shape[:-2] + aval(out).shape[-1:])


for _ufunc, _impl in (("vecdot", _vecdot), ("matvec", _matvec), ("vecmat", _vecmat)):
    if hasattr(np, _ufunc):  # NumPy >= 2.0 (vecdot), 2.2 (matvec, vecmat)
        COMPOSED_UFUNCS[getattr(np, _ufunc)] = _impl
