"""The CUDA backend's library steps: ops that are not loop kernels, as CuPy calls.

One entry per op: ``TABLE[op](cupy, *arrays, **attrs)``. Contractions go to cuBLAS
(``cupy.matmul``); structural ops are CuPy views or copies; argmax/argmin make NaN win
as NumPy does; gathers check their indices first, because CuPy's integer indexing wraps an
out-of-range index around where NumPy raises IndexError (the check costs one
synchronisation). An op absent here, or with dtypes ``supported`` refuses, runs on the CPU
(see the placement pass).
"""

from __future__ import annotations

import importlib

import numpy as np

from ...ir.ops import slice_key
from .ops import CUDA


def _check_index(cupy, i, size: int, axis: int) -> None:
    """Raise NumPy's IndexError if an index array (or a host scalar) leaves -size..size-1."""
    if isinstance(i, cupy.ndarray):
        if i.size == 0:
            return
        lo, hi = int(cupy.min(i).get()), int(cupy.max(i).get())
        if -size <= lo and hi < size:
            return
        host = i.get().ravel()
        bad = host[(host < -size) | (host >= size)][0]
    elif -size <= int(i) < size:
        return
    else:
        bad = i
    raise IndexError(f"index {int(bad)} is out of bounds for axis {axis} with size {size}")


def _indices(cupy, x, idx, axis):
    for d, i in enumerate(idx):
        _check_index(cupy, i, x.shape[axis + d], axis + d)
    return (slice(None),) * axis + tuple(idx)


def _gather(cupy, x, *idx, axis):
    return x[_indices(cupy, x, idx, axis)]


def _scatter_add(cupy, x, updates, *idx, axis):
    out = x.copy()
    importlib.import_module("cupyx").scatter_add(out, _indices(cupy, x, idx, axis), updates)
    return out


def _scatter(cupy, x, updates, *idx, axis):
    out = x.copy()
    out[_indices(cupy, x, idx, axis)] = updates
    return out


def _update_slice(cupy, x, updates, *, starts, stops, steps):
    out = x.copy()
    out[slice_key(starts, stops, steps)] = updates
    return out


def _concatenate(cupy, *xs, axis):
    dtype = np.result_type(*(x.dtype for x in xs))  # the IR promoted them already
    return cupy.concatenate([x.astype(dtype, copy=False) for x in xs], axis=axis)


def _matmul(cupy, a, b):
    dtype = np.result_type(a.dtype, b.dtype)  # the IR's promotion: cuBLAS takes one dtype
    return cupy.matmul(a.astype(dtype, copy=False), b.astype(dtype, copy=False))


def _arg(name: str):
    """argmax/argmin with NumPy's answer for NaN (the first NaN wins), whatever CuPy's
    reduction does with NaN: where a row has one, the index of its first NaN."""
    def run(cupy, x, *, axis, keepdims):
        picked = getattr(cupy, name)(x, axis=axis, keepdims=keepdims)
        if x.dtype.kind != "f":
            return picked
        nan = cupy.isnan(x)
        return cupy.where(cupy.any(nan, axis=axis, keepdims=keepdims),
                          cupy.argmax(nan, axis=axis, keepdims=keepdims), picked)
    return run


TABLE = {
    "argmax": _arg("argmax"),
    "argmin": _arg("argmin"),
    "matmul": _matmul,
    "reshape": lambda cupy, x, *, shape: x.reshape(shape),
    "transpose": lambda cupy, x, *, perm: x.transpose(perm),
    "broadcast_to": lambda cupy, x, *, shape: cupy.broadcast_to(x, shape),
    "slice": lambda cupy, x, *, starts, stops, steps: x[slice_key(starts, stops, steps)],
    "concatenate": _concatenate,
    "pad": lambda cupy, x, *, widths, value: cupy.pad(x, widths, mode="constant",
                                                      constant_values=value),
    "gather": _gather,
    "scatter_add": _scatter_add,
    "scatter": _scatter,
    "update_slice": _update_slice,
    "full": lambda cupy, *, shape, dtype, value: cupy.full(shape, value, dtype),
}

_FLOATS = {np.dtype(np.float32), np.dtype(np.float64)}
# scatter_add accumulates with atomicAdd, which CUDA has for these
_ATOMIC = _FLOATS | {np.dtype(np.int32)}


def supported(node) -> bool:
    """Whether ``node`` runs on the GPU as a library step."""
    if node.op not in TABLE:
        return False
    data = [v.type.dtype for v in (node.inputs[:1] if node.op in ("gather", "scatter_add",
                                                                  "scatter")
                                   else node.inputs)]
    if not all(CUDA.supports(d) for d in (*data, node.out.type.dtype)):
        return False
    if node.op == "matmul":  # cuBLAS: float32 or float64 (an int operand is converted)
        return node.out.type.dtype in _FLOATS
    if node.op == "scatter_add":
        return node.out.type.dtype in _ATOMIC
    return True
