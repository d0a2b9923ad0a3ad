"""``x[key]`` with NumPy's rules: basic slicing becomes ``slice`` + ``reshape``; integer
arrays (and integers mixed with them) become one ``gather``, with NumPy's placement of the
indexed dimensions; constant boolean masks become integer indices."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfBounds, ShapeError
from .core import dynamic_view
from .numpy_api import (
    aval,
    basic_index,
    expand_dims,
    gather,
    is_int,
    slice_attrs,
    transpose,
)
from .tracer import Tracer

# gather and slice_attrs are indexing steps flip, split and take use too, so they live in
# numpy_api (below this module); re-exported where they were.
__all__ = ["expand_key", "gather", "getitem", "slice_attrs"]

_MASK_HINT = (
    "boolean-mask indexing x[mask] has a shape that depends on the data; use "
    "np.where(mask, x, fill) to keep the shape, or reduce with np.sum(np.where(mask, x, 0))"
)


def expand_key(key, shape):
    """Normalise ``key`` to a tuple with Ellipsis expanded and boolean masks converted."""
    ndim = len(shape)
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for k in key:
        if isinstance(k, Tracer) and k._const is not None and k._known() is not None:
            k = k._known()  # made from constants in the function: np.arange(n) % 2 == 0
        if isinstance(k, Tracer) and k.dtype == np.bool_:
            raise ShapeError("indexing with a traced boolean mask", hint=_MASK_HINT)
        if isinstance(k, (bool, np.bool_)):
            raise ShapeError("indexing with a Python bool", hint=_MASK_HINT)
        if isinstance(k, (list, np.ndarray)):
            k = np.asarray(k)
            if k.dtype == np.bool_:
                out.append(_Mask(k))
                continue
            if k.dtype.kind not in "iu" and k.size:
                raise IndexOutOfBounds("arrays used as indices must be of integer (or boolean) "
                                       "type")
            k = k.astype(np.int64)
        elif not (k is None or k is Ellipsis or isinstance(k, (slice, Tracer)) or is_int(k)):
            raise IndexOutOfBounds(
                "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
                f"integer or boolean arrays are valid indices (got {type(k).__name__})"
            )
        out.append(k)
    if sum(k is Ellipsis for k in out) > 1:
        raise IndexOutOfBounds("an index can only have a single ellipsis ('...')")
    consumed = sum(k.mask.ndim if isinstance(k, _Mask) else 1 for k in out
                   if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexOutOfBounds(f"too many indices for array: array is {ndim}-dimensional, "
                               f"but {consumed} were indexed")
    fill = [slice(None)] * (ndim - consumed)
    ell = [i for i, k in enumerate(out) if k is Ellipsis]
    out = out[: ell[0]] + fill + out[ell[0] + 1:] if ell else out + fill
    return _masks_to_indices(out, shape)


class _Mask:
    """A constant boolean mask: its shape is static, so it becomes static integer indices."""

    def __init__(self, mask: np.ndarray):
        self.mask = mask


def _masks_to_indices(key, shape):
    out, dim = [], 0
    for k in key:
        if isinstance(k, _Mask):
            span = shape[dim:dim + k.mask.ndim]
            for j, (want, got) in enumerate(zip(span, k.mask.shape, strict=True)):
                if want != got:
                    raise IndexOutOfBounds(
                        f"boolean index did not match indexed array along axis {dim + j}; size "
                        f"of axis is {want} but size of corresponding boolean axis is {got}")
            out.extend(np.nonzero(k.mask))
            dim += k.mask.ndim
        else:
            out.append(k)
            dim += k is not None
    return out


def getitem(x, key):
    t = aval(x)
    ellipsis = any(k is Ellipsis for k in (key if isinstance(key, tuple) else (key,)))
    if isinstance(x, Tracer) and x._scalar and ellipsis and t.ndim == 0:
        x = x.copy()  # a NumPy scalar's [...] is a new 0-d array, writeable
        x._scalar = False
    key = expand_key(key, t.shape)
    # None inserts a size-1 axis: do it first, then index that axis with a full slice.
    new_axes = [i for i, k in enumerate(key) if k is None]
    if new_axes:
        x = expand_dims(x, new_axes)
        key = [slice(None) if k is None else k for k in key]
    shape = aval(x).shape
    advanced = any(isinstance(k, np.ndarray) or isinstance(k, Tracer) and not _traced_int(k)
                   for k in key)
    if not advanced:
        out = _dynamic_index(basic_index(x, shape, [slice(None) if _traced_int(k) else k
                                                    for k in key]), key)
        if any(is_int(k) or _traced_int(k) for k in key) and aval(out).ndim == 0 and \
                isinstance(out, Tracer) and not ellipsis:
            # x[i, j] of an array is a NumPy scalar: a copy, which later writes leave alone
            # (x[..., j] is a 0-d view)
            out = out.copy()  # (keeping a known value: int(np.ones(2)[0]))
            out._scalar = True
        return out
    # With an array index, integers are advanced indices too (NumPy's rule).
    key = [np.asarray(k, np.int64) if is_int(k) else k for k in key]
    basic = [k if isinstance(k, slice) else slice(None) for k in key]
    x = basic_index(x, shape, basic)
    positions = [i for i, k in enumerate(key) if not isinstance(k, slice)]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    target = positions[0] if adjacent else 0
    rest = [i for i in range(len(key)) if i not in positions]
    perm = rest[:target] + positions + rest[target:]
    return gather(transpose(x, perm), [key[i] for i in positions], target)


def _traced_int(k) -> bool:
    """A traced integer scalar (an int or NumPy integer argument, a loop index, ``n // 2``
    of one): a basic index, as NumPy takes a Python or NumPy integer, so ``x[i]`` is a
    view whose writes reach ``x`` (alone in a key of slices and integers; beside an
    integer array it is an advanced index, as NumPy's integers are)."""
    return isinstance(k, Tracer) and k.ndim == 0 and k.dtype.kind in "iu"


def _dynamic_index(x, key):
    """``x`` (the key's slices and constant integers applied) indexed at each traced
    integer of ``key``: from the last, so that the axes before it keep their numbers."""
    for pos in reversed(range(len(key))):
        if _traced_int(key[pos]):
            axis = sum(not is_int(k) for k in key[:pos])  # (traced ones: not yet taken)
            x = dynamic_view(x, key[pos], axis)
    return x
