"""The CUDA backend's library steps: ops that are not loop kernels, as CuPy calls.

One entry per op: ``TABLE[op](cupy, *arrays, **attrs)``. Contractions go to cuBLAS
(``cupy.matmul``); structural ops are CuPy views or copies; argmax/argmin make NaN win
as NumPy does; gathers check their indices first, because CuPy's integer indexing wraps
an out-of-range index around where NumPy raises IndexError (the check costs one
synchronisation); cumsum/cumprod are CuPy's scans (tree-ordered sums: within rounding of
NumPy's sequential ones); cummax/cummin are log-step scans by NumPy's own
maximum/minimum rule (NumPy's bits); argsort is CuPy's stable sort (so an argsort of
NumPy's unstable kinds, whose ties NumPy orders its own way, runs on the host); sort is
CuPy's stable sort for every kind, NumPy's values (of equal values only -0.0 and 0.0
differ in bits, and their order is any kind's own; an unstable kind's may differ);
partition and argpartition are the same stable sorts, a partition at every kth (NumPy's
values at the kth; NumPy leaves the other elements in no promised order); correlate
gathers its windows into a matrix for one cuBLAS product (floats only, as matmul). An op
absent here, or with dtypes ``supported`` refuses, runs on the CPU (see the placement
pass).

``fft`` is ``cupy.fft``'s transform of the same name, with the same ``n``, ``axis`` and
``norm`` (cuFFT): its results are NumPy's within rounding, not its bits, since cuFFT
factors and sums in its own order. Its dtypes are CuPy's, which are NumPy 2's for every
input but float16 to ``irfft`` (NumPy keeps float16, CuPy returns float32): that one runs
on the host. ``real`` and ``imag`` are CuPy's views of a complex array's parts. These three
are the only steps on complex values: the kernel language has no complex type, so every
other op on them runs on the host.

The ``numpy.linalg`` ops are ``cupy.linalg`` (cuSOLVER) calls, their several results
packed into one array as the registry defines them (``ir/linalg_ops.py``). ``inv``,
``solve`` and ``cholesky`` run under ``cupyx.errstate(linalg="raise")``, which checks
cuSOLVER's info (one synchronisation each) so that a singular or not positive definite
matrix raises NumPy's LinAlgError, where CuPy would return garbage; ``svd`` of a matrix
holding a NaN raises it as NumPy's LAPACK does (cuSOLVER returns NaNs). Their values are
cuSOLVER's: NumPy's within rounding, each eigenvector, singular vector and column of Q
free in sign (as LAPACK leaves it; ``tests/numpy_compare.assert_factorisation``).
"""

from __future__ import annotations

import contextlib
import importlib

import numpy as np

from ...ir.ops import slice_key
from ...ir.ordering_ops import STABLE_KINDS, scan_dtype
from ...ir.signal_ops import padding
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
    key = _indices(cupy, x, idx, axis)
    out[key] = _last_wins(cupy, x.shape, updates, idx, axis)
    return out


def _last_wins(cupy, shape, updates, idx, axis):
    """``updates`` with every update to a repeated position replaced by the last one to
    it. CuPy's assignment writes in parallel, so which of several updates to one position
    stays is undefined (CuPy's documentation); once they agree, any order leaves NumPy's
    answer, the last. The last is found by a stable argsort of each update's position (a
    number per position of the indexed axes, read through the same indices): the last of
    each run of equal positions, one before where ``searchsorted(side="right")`` puts it."""
    batch = tuple(np.broadcast_shapes(*(getattr(i, "shape", ()) for i in idx)))
    k = int(np.prod(batch))
    if k < 2:
        return updates
    dims = shape[axis:axis + len(idx)]
    numbers = cupy.cumsum(cupy.full((int(np.prod(dims)),), 1, np.int64), dtype=np.int64)
    position = cupy.broadcast_to(numbers.reshape(dims)[tuple(idx)], batch).reshape((k,))
    order = cupy.argsort(position)  # stable (thrust), so equal positions keep their order
    after = cupy.searchsorted(position[order], position, side="right")  # in 1..k
    last = cupy.concatenate([order[:1], order])[after]  # order[after - 1]
    rest = updates.shape[axis + len(batch):]
    flat = updates.reshape(updates.shape[:axis] + (k,) + rest)
    return flat[(slice(None),) * axis + (last,)].reshape(updates.shape)


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


def _correlate(cupy, a, v, *, mode):
    """np.correlate as a gather of the windows of the longer operand (padded for ``mode``)
    and one matrix-vector product (cuBLAS): CuPy's own correlate takes an FFT for large
    float operands, whose rounding is not that of a sum of products. Where ``len(a) <
    len(v)`` NumPy correlates ``v`` with ``a`` and reverses the result: so does this."""
    swapped = a.shape[0] < v.shape[0]
    if swapped:
        a, v = v, a
    n, k = a.shape[0], v.shape[0]
    left, right = padding(mode, k)
    windows = np.arange(n + left + right - k + 1)[:, None] + np.arange(k)
    out = cupy.matmul(cupy.pad(a, ((left, right),))[cupy.asarray(windows)], v)
    return out[::-1] if swapped else out


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


@contextlib.contextmanager
def _raising(cupy, numpy_message: str):
    """``cupyx.errstate(linalg="raise")``: cuSOLVER's failures raise LinAlgError, with
    NumPy's message (CuPy's names cuSOLVER's routine and devInfo instead)."""
    try:
        with importlib.import_module("cupyx").errstate(linalg="raise"):
            yield
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(numpy_message) from None


def _fft(cupy, x, *, transform, n, axis, norm):
    return getattr(cupy.fft, transform)(x, n=n, axis=axis, norm=norm)


_COMPLEX = {np.dtype(np.complex64), np.dtype(np.complex128)}
_CUPY_DTYPES = {np.dtype(c) for c in "?bhilqBHILQefdFD"}  # the dtypes of CuPy's arrays


def _spectral(node) -> bool:
    """Whether CuPy computes ``fft``, ``real`` or ``imag`` of ``node``'s input in the IR's
    dtypes. ``cupy.fft``'s are NumPy 2's (the IR's) for every dtype CuPy arrays hold but
    float16 to ``irfft``, which CuPy returns as float32 (``cupy/fft/_fft.py``)."""
    x = node.inputs[0].type.dtype
    if node.op != "fft":
        return x in _COMPLEX  # (the IR's real and imag take complex values only)
    return x in _CUPY_DTYPES and not (node.attrs["transform"] == "irfft" and x == np.float16)


def _pack(cupy, batch: tuple[int, ...], *results):
    return cupy.concatenate([r.reshape(batch + (-1,)) for r in results], axis=-1)


def _solve(cupy, a, b):
    """cupy.linalg.solve of b (..., m, k), the batch dims broadcast first (CuPy does not)."""
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = cupy.ascontiguousarray(cupy.broadcast_to(a, batch + a.shape[-2:]))
    b = cupy.ascontiguousarray(cupy.broadcast_to(b, batch + b.shape[-2:]))
    with _raising(cupy, "Singular matrix"):
        return cupy.linalg.solve(a, b)


def _inv(cupy, x):
    with _raising(cupy, "Singular matrix"):
        return cupy.linalg.inv(x)


def _cholesky(cupy, x, *, upper):
    with _raising(cupy, "Matrix is not positive definite"):
        lower = cupy.linalg.cholesky(x)
    return lower.transpose(tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)) if upper \
        else lower


def _qr(cupy, x, *, mode):
    out = cupy.linalg.qr(x, mode=mode)
    return _pack(cupy, x.shape[:-2], *((out,) if mode == "r" else out))


def _eigh(cupy, x, *, UPLO, vectors):
    if not vectors:
        return _pack(cupy, x.shape[:-2], cupy.linalg.eigvalsh(x, UPLO=UPLO))
    return _pack(cupy, x.shape[:-2], *cupy.linalg.eigh(x, UPLO=UPLO))


def _svd(cupy, x, *, full_matrices, compute_uv):
    if cupy.any(cupy.isnan(x)).get():  # LAPACK's gesdd does not converge on a NaN (cuSOLVER's
        raise np.linalg.LinAlgError("SVD did not converge")  # returns NaNs): NumPy raises
    out = cupy.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    return _pack(cupy, x.shape[:-2], *(out if compute_uv else (out,)))


LINALG = {
    "det": lambda cupy, x: cupy.linalg.det(x),
    "slogdet": lambda cupy, x: _pack(cupy, x.shape[:-2], *cupy.linalg.slogdet(x)),
    "inv": _inv,
    "solve": _solve,
    "cholesky": _cholesky,
    "qr": _qr,
    "eigh": _eigh,
    "svd": _svd,
}

def _scan(name: str):
    """cumsum/cumprod in the IR's output dtype (NumPy's: small ints accumulate in int64)."""
    def run(cupy, x, *, axis, dtype):
        return getattr(cupy, name)(x, axis=axis, dtype=scan_dtype(x.dtype, dtype))
    return run


def _running(name: str):
    """cummax/cummin as ceil(log2(n)) rounds combining every element with the one 2**k
    before it along the axis (a Hillis-Steele scan), by NumPy's own rule with the earlier
    value first: ``(a > b or isnan(a)) ? a : b`` (``<`` for the minimum). That rule picks
    the first NaN, else the last of the equal extremes, in any grouping, so the scan
    gives NumPy's bits, -0.0 against 0.0 and NaN payloads included; CuPy's
    maximum/minimum promise neither."""
    def run(cupy, x, *, axis):
        beats = cupy.greater if name == "maximum" else cupy.less
        floats = x.dtype.kind == "f"
        y, n, k = x.copy(), x.shape[axis], 1
        while k < n:
            later = (slice(None),) * axis + (slice(k, None),)
            earlier = (slice(None),) * axis + (slice(None, n - k),)
            a, b = y[earlier], y[later]
            first = beats(a, b)
            if floats:
                first = cupy.logical_or(first, cupy.isnan(a))
            y[later] = cupy.where(first, a, b)
            k *= 2
        return y
    return run


TABLE = {
    **LINALG,
    "cumsum": _scan("cumsum"),
    "cumprod": _scan("cumprod"),
    "cummax": _running("maximum"),
    "cummin": _running("minimum"),
    "sort": lambda cupy, x, *, axis, kind: cupy.sort(x, axis=axis),
    "argsort": lambda cupy, x, *, axis, kind: cupy.argsort(x, axis=axis),
    # A sort is a partition at every kth: the order statistics are NumPy's values
    "partition": lambda cupy, x, *, axis, kth, kind: cupy.sort(x, axis=axis),
    "argpartition": lambda cupy, x, *, axis, kth, kind: cupy.argsort(x, axis=axis),
    "searchsorted": lambda cupy, a, v, *, side: cupy.searchsorted(a, v, side=side),
    "argmax": _arg("argmax"),
    "argmin": _arg("argmin"),
    "matmul": _matmul,
    "correlate": _correlate,
    "fft": _fft,
    "real": lambda cupy, x: cupy.real(x),
    "imag": lambda cupy, x: cupy.imag(x),
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
    "loop_output": lambda cupy, results, *, index, type: results[index],
}

_FLOATS = {np.dtype(np.float32), np.dtype(np.float64)}
# scatter_add accumulates with atomicAdd, which CUDA has for these
_ATOMIC = _FLOATS | {np.dtype(np.int32)}


def supported(node) -> bool:
    """Whether ``node`` runs on the GPU as a library step."""
    if node.op not in TABLE:
        return False
    if node.op == "loop_output":  # a loop's result, where the loop ran
        return True
    if node.op in ("fft", "real", "imag"):  # complex values, which only these steps take
        return _spectral(node)
    data = [v.type.dtype for v in (node.inputs[:1] if node.op in ("gather", "scatter_add",
                                                                  "scatter")
                                   else node.inputs)]
    if not all(CUDA.supports(d) for d in (*data, node.out.type.dtype)):
        return False
    if node.op in ("matmul", "correlate") or node.op in LINALG:  # cuBLAS, cuSOLVER: floats
        return node.out.type.dtype in _FLOATS
    if node.op == "scatter_add":
        return node.out.type.dtype in _ATOMIC
    if node.op == "argsort":  # CuPy sorts stably: NumPy's ties only for the stable kinds
        return node.attrs["kind"] in STABLE_KINDS
    return True
