"""In-place writes with NumPy's semantics: ``x[key] = v``, ``x op= y``, ``out=``,
``np.copyto``, ``ndarray.fill``, ``np.fill_diagonal``, ``np.put``/``np.place``/
``np.putmask`` and ``ufunc.at``.

Each write computes the written array's next version with a functional update
(``update_slice`` for a region of basic indices, ``scatter`` for integer arrays, ``where``
for a traced boolean mask) and makes it the Tracer's current value (:func:`assign`). A
write through a view updates the view's root by undoing the view ops one by one (a slice
becomes ``update_slice`` of its parent, a reshape or transpose is reversed), so every other
view of that root sees it when next read, as NumPy's views share memory.

Values are cast as NumPy's item assignment casts them (unsafely: ``int_array[0] = 2.7``
stores 2); augmented assignment and ``out=`` cast with ``same_kind`` as ufuncs do.
"""

from __future__ import annotations

import numpy as np

from ..errors import (
    DTypeError,
    IndexOutOfBounds,
    InPlaceArgumentError,
    ReadOnlyDestination,
    ScalarOverflow,
    ShapeError,
    UnsupportedOperation,
)
from ..ir import TensorType, Value
from ..ir.registry import REGISTRY
from .core import bind, current
from .creation import has_tracer, traced_array
from .indexing import expand_key
from .loops import refuse_outer_write
from .numpy_api import aval, implements, inplace, is_int, ravel, slice_attrs
from .tracer import Tracer, derive

_MASK_HINT = ("use a scalar (or an array of the shape of x's dimensions after the mask's), "
              "which fills every selected element; or np.where(mask, values, x) with values "
              "of x's shape")


def _emit(op: str, *inputs: Value, **attrs) -> Value:
    """``op`` on IR values (no Tracer, so no view is made)."""
    rule = REGISTRY[op].rule(*(v.type for v in inputs), **attrs)
    return current()._emit(op, tuple(inputs), attrs, rule)


def _fresh(value: Value) -> Tracer:
    return Tracer(value, current())


def destination(x, what: str) -> Tracer:
    """``x`` as the destination of a write: a writeable Tracer."""
    if not isinstance(x, Tracer):
        raise InPlaceArgumentError(
            f"{what} writes into a NumPy array that is not an argument of the jitted "
            "function: the write would happen once, while tracing, not on every call")
    refuse_outer_write(x)
    if x._readonly:
        raise ReadOnlyDestination("assignment destination is read-only", hint=(
            "NumPy returns read-only views from np.broadcast_to, np.diagonal and imag of a "
            "real array; write into a copy (x.copy()) or into the array they view"))
    return x


def assign(target: Tracer, new: Value) -> None:
    """Make ``new`` (of target's type) target's value: the next version of its root."""
    target._forget_const()  # its known value, and its root's and views', no longer holds
    root = target._base
    if root is not None:
        root._forget_const()
    if root is None:
        target._val, target._seen = new, target._seen + 1
        return
    trace, path = target._trace, target._path
    parents = [root._val]
    for step in path[:-1]:
        parents.append(derive(trace, parents[-1], (step,)))
    value = new
    for (op, attrs), parent in zip(reversed(path), reversed(parents), strict=True):
        if op == "slice":
            value = _emit("update_slice", parent, value, **attrs)
        elif op == "gather":  # x[i] with a traced i
            value = _emit("scatter", parent, value, attrs["index"], axis=attrs["axis"])
        elif op == "real":  # z.real[...] = v: the imaginary part stays
            value = _emit("complex", value, _emit("imag", parent))
        elif op == "imag":
            value = _emit("complex", _emit("real", parent), value)
        elif op == "reshape":
            value = _emit("reshape", value, shape=parent.type.shape)
        else:  # transpose (broadcast views are read-only)
            value = _emit("transpose", value, perm=tuple(int(p) for p in np.argsort(
                attrs["perm"])))
    root._val, root._seen = value, root._seen + 1
    target._val, target._seen = new, root._seen


def write(target: Tracer, result) -> None:
    """``target[...] = result`` for a result of target's shape and dtype (``x op= y``)."""
    assign(destination(target, "an in-place operation"), current().lift(result))


# Regions stored into the caller's array one by one at most: more become one whole copy.
MAX_STORES = 4


def stores(nodes, original: Value, final: Value) -> list[tuple[dict | None, Value]]:
    """How to bring an argument from its ``original`` value to its ``final`` version, the
    caller's array being the original: where the writes were regions of the original
    (``update_slice`` down to it, as a stencil's ``a[1:-1] = ...``), store each update into
    its region, in order, ``[(slice attributes, update), ...]``, so that the call copies
    only what it wrote; else ``[(None, final)]``, the whole array."""
    producers = {n.out: n for n in nodes}
    parts, v = [], final
    while v is not original:
        n = producers.get(v)
        if n is None or n.op != "update_slice" or len(parts) == MAX_STORES:
            return [(None, final)]
        parts.append((n.attrs, n.inputs[1]))
        v = n.inputs[0]
    return parts[::-1]


# ---------------------------------------------------------------- x[key] = v


def known(x):
    """``x``, or its value if it is a Tracer whose value is known while tracing (an index
    or mask made in the function from constants, ``np.arange(n) % 4 == 1``): a constant
    index writes where NumPy would, with NumPy's rules for constant indices."""
    if isinstance(x, Tracer) and x._const is not None:
        value = x._known()
        return x if value is None else value
    return x


def _known_key(key):
    return tuple(known(k) for k in key) if isinstance(key, tuple) else known(key)


def setitem(target: Tracer, key, value) -> None:
    key = _known_key(key)
    if isinstance(value, (list, tuple)) and has_tracer(value):  # traj[i] = x, y, z
        value = traced_array(value)
    if target._scalar:
        name = type(np.zeros((), target.dtype)[()]).__name__
        raise DTypeError(f"'numpy.{name}' object does not support item assignment",
                         hint="NumPy scalars are immutable: assign into the array it came "
                         "from (x[i, j] = v)")
    destination(target, "item assignment")
    mask = traced_mask(key)
    if mask is not None:
        if isinstance(value, MaskedSelection) and value.target is target and \
                value.mask is mask and value.ufunc is not None:
            assign(target, _apply_selection(target, value))
        else:
            assign(target, _masked_write(target, mask, value))
        return
    if isinstance(value, Tracer) and value._base is not None and value._seen == \
            value._base._seen and not _advanced(key):  # x[k] op= v wrote through x[k] itself
        view = target[key]
        if view._base is value._base and view._path == value._path:
            return
    new = _write(target._value, expand_key(key, target.shape), value)
    assign(target, new)


def _advanced(key) -> bool:
    """Whether ``key`` has an advanced index (a traced integer alone is a basic one)."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (list, np.ndarray)) or isinstance(k, Tracer) and not (
        k.ndim == 0 and k.dtype.kind in "iu") for k in keys)


def _write(x: Value, key: list, value) -> Value:
    """``x`` with ``x[key] = value``; ``key`` has one entry per axis (and None for new
    axes), as ``expand_key`` gives."""
    shape = x.type.shape
    if any(k is None for k in key):  # new axes of size 1: write into x with those axes
        it = iter(shape)
        expanded = tuple(1 if k is None else next(it) for k in key)
        key = [slice(None) if k is None else k for k in key]
        return _emit("reshape", _write(_emit("reshape", x, shape=expanded), key, value),
                     shape=shape)
    if not any(isinstance(k, (np.ndarray, Tracer)) for k in key):
        attrs = slice_attrs(shape, key)
        region = REGISTRY["slice"].rule(x.type, **attrs).shape
        view = tuple(n for n, k in zip(region, key, strict=True) if not is_int(k))
        v = fit(value, view, x.type.dtype)
        v = v if view == region else _emit("reshape", v, shape=region)
        whole = region == shape and all(s == 1 for s in attrs["steps"])  # (not reversed)
        return v if whole else _emit("update_slice", x, v, **attrs)
    key = [np.asarray(k, np.int64) if is_int(k) else k for k in key]
    basic = [k if isinstance(k, slice) else slice(None) for k in key]
    attrs = slice_attrs(shape, basic)
    full = REGISTRY["slice"].rule(x.type, **attrs).shape == shape and all(
        s == 1 for s in attrs["steps"])
    region = x if full else _emit("slice", x, **attrs)
    positions = [i for i, k in enumerate(key) if not isinstance(k, slice)]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    axis = positions[0] if adjacent else 0
    rest = [i for i in range(len(key)) if i not in positions]
    perm = tuple(rest[:axis] + positions + rest[axis:])
    moved = region if perm == tuple(range(len(key))) else _emit("transpose", region, perm=perm)
    moved = _scatter(moved, [key[i] for i in positions], axis, value)
    if perm != tuple(range(len(key))):
        moved = _emit("transpose", moved, perm=tuple(int(p) for p in np.argsort(perm)))
    return moved if full else _emit("update_slice", x, moved, **attrs)


def _scatter(x: Value, indices: list, axis: int, value) -> Value:
    """``x[:, ..., *indices] = value`` from ``axis`` on. With constant indices repeated
    positions keep the last value, as in NumPy, and the others are dropped now."""
    t = x.type
    for j, idx in enumerate(indices):
        if isinstance(idx, Tracer):
            if idx.dtype.kind not in "iu":
                raise DTypeError("arrays used as indices must be of integer (or boolean) type")
            continue
        if idx.dtype.kind not in "iu":
            raise IndexOutOfBounds("arrays used as indices must be of integer (or boolean) "
                                   "type")
        n = t.shape[axis + j]
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexOutOfBounds(f"index {idx[bad].flat[0]} is out of bounds for axis "
                                   f"{axis + j} with size {n}")
    trace = current()
    lifted = [trace.lift(i) for i in indices]
    region = REGISTRY["gather"].rule(t, *(v.type for v in lifted), axis=axis).shape
    v = fit(value, region, t.dtype, advanced=True)
    if all(isinstance(i, np.ndarray) for i in indices):
        dims = t.shape[axis:axis + len(indices)]
        wide = [np.where(i < 0, i + d, i) for i, d in
                zip(np.broadcast_arrays(*indices), dims, strict=True)]
        flat = np.ravel_multi_index(wide, dims).ravel() if wide[0].size else np.zeros(0, int)
        keep = np.sort(flat.size - 1 - np.unique(flat[::-1], return_index=True)[1])
        if keep.size < flat.size:
            batch = wide[0].ndim
            v = _emit("reshape", v, shape=region[:axis] + (flat.size,) + region[axis + batch:])
            v = _emit("gather", v, trace.lift(keep), axis=axis)
            lifted = [trace.lift(w.ravel()[keep]) for w in wide]
    return _emit("scatter", x, v, *lifted, axis=axis)


def fit(value, shape: tuple[int, ...], dtype: np.dtype, advanced: bool = False) -> Value:
    """``value`` cast (unsafely, as item assignment does) and broadcast to ``shape``."""
    t = aval(value)
    if type(value) is int and dtype.kind in "iu" and not (
            np.iinfo(dtype).min <= value <= np.iinfo(dtype).max):
        raise ScalarOverflow(f"Python integer {value} out of bounds for {dtype}")
    vshape = t.shape
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        ok = np.broadcast_shapes(vshape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(
            f"shape mismatch: value array of shape {t.shape} could not be broadcast to "
            f"indexing result of shape {shape}" if advanced else
            f"could not broadcast input array from shape {t.shape} into shape {shape}")
    v = current().lift(value)
    if t.dtype != dtype or t.weak:
        v = _emit("convert", v, dtype=dtype)
    if vshape != t.shape:
        v = _emit("reshape", v, shape=vshape)
    return v if vshape == tuple(shape) else _emit("broadcast_to", v, shape=tuple(shape))


class MaskedSelection:
    """``x[mask]`` for a traced boolean mask. How many elements it has depends on the data,
    so it is no array; it exists for ``x[mask] op= v``, which Python runs as ``t = x[mask];
    t op= v; x[mask] = t``: the in-place operators (attached by ``array_methods``) record
    the operation, and the assignment applies it where the mask is True."""

    __slots__ = ("target", "mask", "ufunc", "other")

    def __init__(self, target: Tracer, mask: Tracer, ufunc=None, other=None):
        self.target, self.mask, self.ufunc, self.other = target, mask, ufunc, other

    def _refuse(self, *args, **kwargs):
        raise ShapeError("indexing with a traced boolean mask", hint=(
            "boolean-mask indexing x[mask] has a shape that depends on the data; use "
            "np.where(mask, x, fill) to keep the shape, or reduce with "
            "np.sum(np.where(mask, x, 0)); x[mask] = v and x[mask] op= v are fine"))

    __array__ = __len__ = __iter__ = __bool__ = __getattr__ = _refuse

    @staticmethod
    def operator(ufunc):
        """``t op= other`` on a selection: the operation, to apply on assignment."""
        def iop(self, other):
            if self.ufunc is not None:
                self._refuse()
            return MaskedSelection(self.target, self.mask, ufunc, other)

        return iop


def _apply_selection(target: Tracer, sel: MaskedSelection) -> Value:
    """``x[mask] = x[mask] op v`` (NumPy's same-kind cast of the in-place operation)."""
    m = sel.mask.aval
    vshape = aval(sel.other).shape
    while len(vshape) > target.ndim - m.ndim and vshape[0] == 1:
        vshape = vshape[1:]
    if len(vshape) > target.ndim - m.ndim:
        raise ShapeError(
            f"x[mask] op= v with a traced boolean mask and a value of shape "
            f"{aval(sel.other).shape}: the number of values it needs (the number of True "
            "elements) depends on the data", hint=_MASK_HINT)
    result = inplace(sel.ufunc, _fresh(target._value), sel.other)
    cond = _emit("reshape", sel.mask._value, shape=m.shape + (1,) * (target.ndim - m.ndim))
    return _emit("where", cond, current().lift(result), target._value)


def traced_mask(key) -> Tracer | None:
    keys = key if isinstance(key, tuple) else (key,)
    masks = [k for k in keys if isinstance(k, Tracer) and k.dtype == np.bool_]
    if not masks:
        return None
    if not (len(keys) == 1 or (len(keys) == 2 and keys[1] is Ellipsis)):
        raise UnsupportedOperation("x[mask, ...] = v with a traced boolean mask combined with "
                                   "other indices", hint=_MASK_HINT)
    return masks[0]


def _masked_write(target: Tracer, mask: Tracer, value) -> Value:
    """``x[mask] = v`` for a traced mask: ``np.where(mask, v, x)`` when v does not depend
    on how many elements the mask selects."""
    t, m = target.aval, mask.aval
    for d, (want, got) in enumerate(zip(t.shape, m.shape, strict=False)):
        if want != got or m.ndim > t.ndim:
            raise IndexOutOfBounds(
                f"boolean index did not match indexed array along axis {d}; size of axis is "
                f"{want} but size of corresponding boolean axis is {got}")
    rest = t.shape[m.ndim:]
    vshape = aval(value).shape
    while len(vshape) > len(rest) and vshape[0] == 1:
        vshape = vshape[1:]
    if len(vshape) > len(rest):
        raise ShapeError(
            f"x[mask] = v with a traced boolean mask and a value of shape "
            f"{aval(value).shape}: the number of values it needs (the number of True "
            "elements) depends on the data", hint=_MASK_HINT)
    v = fit(value, rest, t.dtype, advanced=True)
    cond = _emit("reshape", mask._value, shape=m.shape + (1,) * len(rest))
    return _emit("where", cond, v, target._value)


# ---------------------------------------------------------------- flat writes


def _cycled(values, n: int, dtype: np.dtype) -> Value:
    """``np.resize(values, n)`` cast to ``dtype``: values repeated to fill n positions."""
    flat = ravel(bind("convert", values, dtype=dtype))
    if flat.size == 0:
        raise ShapeError("cannot write from an empty array of values")
    if flat.size == n:
        return flat._value
    return _emit("gather", flat._value, current().lift(np.arange(n) % flat.size), axis=0)


def _flat_write(target: Tracer, positions: np.ndarray, values) -> None:
    """``target.flat[positions] = values`` (values cycled, as np.put and np.place do)."""
    if positions.size == 0:
        return
    x = _emit("reshape", target._value, shape=(target.size,))
    v = _cycled(values, positions.size, target.dtype)
    new = _scatter(x, [positions], 0, _fresh(v))
    assign(target, _emit("reshape", new, shape=target.shape))


@implements(np.put)
def put(a, ind, v, mode="raise"):
    a = destination(a, "np.put")
    ind = known(ind)
    if isinstance(ind, Tracer):
        raise UnsupportedOperation("np.put with traced indices",
                                   hint="use a[np.unravel_index(ind, a.shape)] = v")
    ind = np.asarray(ind, np.int64).ravel()
    if mode == "wrap":
        ind = ind % a.size
    elif mode == "clip":
        ind = np.clip(ind, 0, a.size - 1)
    elif ((ind < -a.size) | (ind >= a.size)).any():
        bad = ind[(ind < -a.size) | (ind >= a.size)][0]
        raise IndexOutOfBounds(f"index {bad} is out of bounds for axis 0 with size {a.size}")
    _flat_write(a, ind % max(a.size, 1), v)


@implements(np.place)
def place(arr, mask, vals):
    arr = destination(arr, "np.place")
    mask = known(mask)
    if isinstance(mask, Tracer):
        if aval(vals).size != 1:
            raise ShapeError("np.place with a traced mask and several values: which value "
                             "goes where depends on the data", hint=_MASK_HINT)
        putmask(arr, mask, vals)
        return
    _flat_write(arr, np.flatnonzero(np.asarray(mask)), vals)


@implements(np.putmask)
def putmask(a, mask, values):
    a = destination(a, "np.putmask")
    if aval(mask).shape != a.shape:
        raise ShapeError("putmask: mask and data must be the same size")
    v = _emit("reshape", _cycled(values, a.size, a.dtype), shape=a.shape)
    cond = bind("convert", mask, dtype=np.bool_)._value
    assign(a, _emit("where", cond, v, a._value))


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    a = destination(a, "np.fill_diagonal")
    if a.ndim < 2:
        raise ShapeError("array must be at least 2-d")
    end = None
    if a.ndim == 2:
        step = a.shape[1] + 1
        if not wrap:
            end = a.shape[1] * a.shape[1]
    else:
        if len(set(a.shape)) != 1:
            raise ShapeError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
    _flat_write(a, np.arange(a.size)[:end:step], val)


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    dst = destination(dst, "np.copyto")
    t = aval(src)
    if not np.can_cast(t.dtype, dst.dtype, casting):
        raise DTypeError(f"Cannot cast array data from {t.dtype!r} to {dst.dtype!r} "
                         f"according to the rule {casting!r}")
    if where is True:
        setitem(dst, Ellipsis, src)
        return
    v = fit(src, dst.shape, dst.dtype)
    cond = fit(where, dst.shape, np.dtype(np.bool_))
    assign(dst, _emit("where", cond, v, dst._value))


# ---------------------------------------------------------------- ufunc.at


def ufunc_at(ufunc, a, indices, b=None):
    """``ufunc.at(a, indices[, b])``: unbuffered, so repeated indices apply again, in
    order. Constant indices go round by round (each round one occurrence of each
    position); ``add`` and ``subtract`` with traced indices are one ``scatter_add``."""
    a = destination(a, f"numpy.{ufunc.__name__}.at")
    if ufunc.nin - 1 != (b is not None):
        raise UnsupportedOperation(f"numpy.{ufunc.__name__}.at takes "
                                   f"{'a' if ufunc.nin == 2 else 'no'} value argument")
    indices = _known_key(indices)
    keys = indices if isinstance(indices, tuple) else (indices,)
    if any(isinstance(k, Tracer) for k in keys):
        _traced_at(ufunc, a, keys, b)
        return
    try:
        positions = np.arange(a.size).reshape(a.shape)[indices]
    except IndexError as e:
        raise IndexOutOfBounds(str(e)) from None
    flat = np.asarray(positions).ravel()
    x = _emit("reshape", a._value, shape=(a.size,))
    if b is not None and not aval(b).weak:  # (a Python scalar keeps its weak promotion)
        b = _emit("reshape", fit(b, np.shape(positions), aval(b).dtype), shape=(flat.size,))
    rounds = _occurrence(flat)
    for r in range(int(rounds.max()) + 1 if flat.size else 0):
        sel = np.flatnonzero(rounds == r)
        pos = current().lift(flat[sel])
        cur = _fresh(_emit("gather", x, pos, axis=0))
        if b is None:
            new = bind(_ufunc_op(ufunc), cur)
        elif isinstance(b, Value):
            new = bind(_ufunc_op(ufunc), cur, _fresh(_emit("gather", b, current().lift(sel),
                                                          axis=0)))
        else:
            new = bind(_ufunc_op(ufunc), cur, b)
        new = _emit("convert", new._value, dtype=a.dtype)  # unsafe, as ufunc.at casts
        x = _emit("scatter", x, new, pos, axis=0)
    assign(a, _emit("reshape", x, shape=a.shape))


def _occurrence(flat: np.ndarray) -> np.ndarray:
    """For each position, how many times it occurred before (0 for the first time)."""
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ranked)) + 1] if flat.size else np.zeros(0, int)
    counts = np.diff(np.r_[starts, flat.size])
    out = np.empty(flat.size, np.int64)
    out[order] = np.arange(flat.size) - np.repeat(starts, counts)
    return out


def _ufunc_op(ufunc) -> str:
    for name, d in REGISTRY.items():
        if d.ufunc is ufunc:
            return name
    raise UnsupportedOperation(f"numpy.{ufunc.__name__}.at is not supported by tracejit")


def _traced_at(ufunc, a: Tracer, keys, b) -> None:
    """``np.add.at(a, i, b)`` / ``np.subtract.at`` with traced integer indices into the
    leading axes: one scatter_add (repeated indices accumulate)."""
    if ufunc not in (np.add, np.subtract) or not all(
            isinstance(k, (Tracer, np.ndarray, list)) for k in keys):
        raise UnsupportedOperation(
            f"numpy.{ufunc.__name__}.at with traced indices",
            hint="np.add.at and np.subtract.at take traced integer index arrays; others "
            "need constant indices")
    trace = current()
    idx = [trace.lift(k if isinstance(k, Tracer) else np.asarray(k, np.int64)) for k in keys]
    region = REGISTRY["gather"].rule(a.aval, *(i.type for i in idx), axis=0).shape
    tb = aval(b)  # the loop's dtype (the operands' shapes need not broadcast: b is per index)
    dtype = REGISTRY[_ufunc_op(ufunc)].rule(TensorType((), a.dtype),
                                           TensorType((), tb.dtype, tb.weak)).dtype
    if dtype != a.dtype:  # NumPy computes in dtype, then casts each result unsafely
        raise UnsupportedOperation(
            f"numpy.{ufunc.__name__}.at with traced indices and values of another dtype "
            f"({aval(b).dtype} into {a.dtype})", hint="convert the values to the array's "
            "dtype first, or use constant indices")
    v = fit(b if ufunc is np.add else bind("negative", b), region, a.dtype, advanced=True)
    assign(a, _emit("scatter_add", a._value, v, *idx, axis=0))


@implements(np.bincount)
def bincount(x, /, weights=None, minlength=0):
    """``np.bincount`` as ``np.add.at`` into ``minlength`` bins. Its length is data
    dependent (the largest value + 1), so traced values need ``minlength``, and a value
    outside ``[0, minlength)`` raises IndexError when the call runs (NumPy would grow the
    result, or raise ValueError for a negative value): never a silently short result."""
    t = aval(x)
    if t.ndim != 1:
        raise ShapeError("object too deep for desired array" if t.ndim > 1 else
                         "object of too small depth for desired array")
    if t.dtype.kind not in "biu":
        raise DTypeError(f"Cannot cast array data from dtype('{t.dtype}') to "
                         "dtype('int64') according to the rule 'safe'")
    bins = int(minlength)
    if not isinstance(x, Tracer):
        bins = max(bins, int(np.max(x, initial=-1)) + 1)
    elif bins <= 0:
        raise UnsupportedOperation(
            "np.bincount of traced values without minlength: the length of its result "
            "depends on the data", hint="pass minlength=n, the number of bins (a value "
            "outside [0, n) then raises IndexError when the call runs)")
    dtype = np.dtype(np.int64 if weights is None else np.float64)
    out = bind("full", shape=(bins,), dtype=dtype, value=0)
    index = np.where(np.asarray(x) < 0 if not isinstance(x, Tracer) else x < 0, bins, x)
    values = 1 if weights is None else bind("convert", weights, dtype=dtype)
    ufunc_at(np.add, out, index, np.broadcast_to(values, t.shape))
    return out
