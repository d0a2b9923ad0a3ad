"""Emulated device arrays (``cupy.ndarray``) and the CuPy array functions of the subset.

A device array is a NumPy array over a "device allocation": a host buffer aligned to 256
bytes (as ``cudaMalloc``'s are) with guard bytes on both sides, which kernel launches check
afterwards. Views share the allocation, as CuPy's do. Every operation that CuPy runs as a
kernel (copies, reductions, ``matmul``, fancy indexing) requires its arrays on the current
device and raises CuPy's ValueError otherwise; views (basic slicing, ``reshape`` without a
copy, ``transpose``, ``broadcast_to``) do not. NumPy inputs are refused with TypeError
where real CuPy would take them only through an implicit host-to-device copy (or not at
all): the runner must ``cupy.asarray`` host data explicitly, and that is counted.
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from . import _state
from ._state import stats

ALIGN = 256  # cudaMalloc's alignment
GUARD = 256  # guard bytes before and after every allocation
_GUARD_BYTE = 0xCB
_POISON = 0xFF  # cupy.empty: NaN for floats, -1 for ints (uninitialised memory is not zero)
SUPPORTED_DTYPES = "?bhilqBHILQefdFD"  # CuPy's array dtypes (NumPy type chars)
_scalar_types = (int, float, complex, bool, np.generic)


class _Allocation:
    """One device allocation: ``view`` is its ``nbytes`` usable bytes."""

    __slots__ = ("raw", "start", "nbytes", "view")

    def __init__(self, nbytes: int):
        self.raw = np.empty(nbytes + ALIGN + 2 * GUARD, np.uint8)
        self.start = GUARD + (-(self.raw.ctypes.data + GUARD)) % ALIGN
        self.nbytes = nbytes
        self.raw[:self.start] = _GUARD_BYTE
        self.raw[self.start + nbytes:] = _GUARD_BYTE
        self.view = self.raw[self.start:self.start + nbytes]

    def intact(self) -> bool:
        return bool((self.raw[:self.start] == _GUARD_BYTE).all() and
                    (self.raw[self.start + self.nbytes:] == _GUARD_BYTE).all())


def _device_error(dev: int, cur: int) -> ValueError:
    return ValueError("Array device must be same as the current device: "
                      f"array device = {dev} while current = {cur}")


def _alloc(shape, dtype, order: str = "C", fill: int | None = None) -> ndarray:
    """A new array on the current device (C or F order), its bytes ``fill`` (or poison)."""
    dtype = _dtype(dtype)
    shape = _shape(shape)
    size = 1
    for n in shape:
        size *= n
    mem = _Allocation(size * dtype.itemsize)
    mem.view[...] = _POISON if fill is None else fill
    host = np.ndarray(shape, dtype, buffer=mem.view, order=order)
    return ndarray._wrap(host, _state.current(), mem)


def _new(result, order: str = "C") -> ndarray:
    """A device array on the current device holding ``result`` (computed "on the device")."""
    result = np.asarray(result)
    out = _alloc(result.shape, result.dtype, order)
    np.copyto(out._a, result)
    return out


def _dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.char not in SUPPORTED_DTYPES:
        raise ValueError(f"Unsupported dtype {dt}")
    return dt


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(operator.index(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError("negative dimensions are not allowed")
    return shape


def _operand(x, what: str) -> np.ndarray:
    """The host array of device array ``x``, which must be on the current device."""
    if not isinstance(x, ndarray):
        raise TypeError(f"cudasim: {what} takes device arrays (cupy.ndarray), got "
                        f"{type(x).__module__}.{type(x).__qualname__}")
    cur = _state.current()
    if x._dev != cur:
        raise _device_error(x._dev, cur)
    return x._a


class _Flags:
    __slots__ = ("c_contiguous",)

    def __init__(self, c: bool):
        self.c_contiguous = c

    def __repr__(self) -> str:
        return f"  C_CONTIGUOUS : {self.c_contiguous}"


class _MemoryPointer:
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


class ndarray:
    """``cupy.ndarray``: a host NumPy array standing for device memory, and its device.
    ``ndarray(shape, dtype=float)`` allocates (uninitialised) on the current device."""

    __slots__ = ("_a", "_dev", "_mem")
    __hash__ = None  # as CuPy's (it defines ==)

    def __init__(self, shape, dtype=float):
        new = _alloc(shape, dtype)
        self._a, self._dev, self._mem = new._a, new._dev, new._mem

    @classmethod
    def _wrap(cls, host: np.ndarray, dev: int, mem: _Allocation) -> ndarray:
        x = object.__new__(cls)
        x._a, x._dev, x._mem = host, dev, mem
        return x

    def _view(self, host: np.ndarray) -> ndarray:
        return ndarray._wrap(host, self._dev, self._mem)

    # ------------------------------------------------------------ attributes

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(bool(self._a.flags.c_contiguous)))
    data = property(lambda self: _MemoryPointer(self._a.__array_interface__["data"][0]))
    T = property(lambda self: self.transpose())

    @property
    def device(self):
        from ._cuda import Device

        return Device(self._dev)

    # ------------------------------------------------------------ copies

    def get(self) -> np.ndarray:
        """A NumPy copy of the array (a device-to-host transfer; works from any device)."""
        a = self._a
        out = a.copy(order="F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C")
        stats._count("d2h", out.nbytes)
        return out

    def copy(self, order: str = "C") -> ndarray:
        """A copy on the current device (a device-to-device transfer if this array lives
        on another one, as CuPy does)."""
        if order not in ("C", "F"):
            raise NotImplementedError("cudasim: copy(order) supports 'C' and 'F'")
        cur = _state.current()
        if self._dev != cur:
            stats._count("d2d", self.nbytes)
        return _new(self._a, order)

    def astype(self, dtype, copy: bool = True) -> ndarray:
        dtype = _dtype(dtype)
        if not copy and dtype == self.dtype:
            return self
        a = _operand(self, "astype")
        keep_f = a.flags.f_contiguous and not a.flags.c_contiguous
        return _new(a.astype(dtype), "F" if keep_f else "C")

    # ------------------------------------------------------------ views

    def reshape(self, *shape) -> ndarray:
        """A view when NumPy can make one, else a copy (on the current device)."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        r = self._a.reshape(shape)
        if r.size == 0 or np.may_share_memory(r, self._a):
            return self._view(r)
        return _new(_operand(self, "reshape (a copy)").reshape(shape))

    def transpose(self, *axes) -> ndarray:
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
            axes = axes[0]
        return self._view(self._a.transpose(axes or None))

    @property
    def real(self) -> ndarray:
        """A view of the real parts (of a real array: the array's own memory), as CuPy's."""
        return self._view(self._a.real)

    @property
    def imag(self) -> ndarray:
        """A view of the imaginary parts; of a real array, new zeros, read-only in NumPy
        and writeable in CuPy (CuPy returns a new array)."""
        if self._a.dtype.kind == "c":
            return self._view(self._a.imag)
        return _new(np.zeros_like(self._a))

    def __getitem__(self, key) -> ndarray:
        key, fancy = _index(self, key)
        if not fancy:
            return self._view(self._a[key])
        a = _operand(self, "integer-array indexing")
        return _new(a[key])

    def __setitem__(self, key, value) -> None:
        """``x[key] = value`` with a device array on the current device or a scalar (CuPy
        would copy a NumPy array implicitly: refused, as everywhere here)."""
        key, _ = _index(self, key)
        if isinstance(value, np.ndarray):
            raise TypeError("cudasim: item assignment takes device arrays (cupy.asarray a "
                            "NumPy array first) or scalars")
        if isinstance(value, ndarray):
            value = _operand(value, "item assignment")
        _operand(self, "item assignment")[key] = value

    # ------------------------------------------------------------ Python protocols

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return repr(self._a)

    def __str__(self) -> str:
        return str(self._a)

    def __bool__(self) -> bool:
        raise TypeError("cudasim: the truth value of a device array needs a device-to-host "
                        "copy; call .get() explicitly")

    def __eq__(self, other):
        raise TypeError("cudasim: device arrays have no operators; compare x.get()")

    __ne__ = __eq__

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """Refused (NotImplemented), so that a runner relying on NumPy's ufuncs fails here;
        with Dask's extras installed, computed as CuPy's ufuncs are, for the array
        arithmetic Dask's own ops (tree sums, matmul's partial products) do on chunks."""
        if not DASK_EXTRAS or kwargs.get("out") is not None:
            return NotImplemented
        return _on_device(getattr(ufunc, method)(*(_host(x, ufunc.__name__) for x in inputs),
                                                 **kwargs))

    def __add__(self, other):
        return np.add(self, other)

    def __radd__(self, other):
        return np.add(other, self)

    def __mul__(self, other):
        return np.multiply(self, other)

    def __rmul__(self, other):
        return np.multiply(other, self)

    def __getattr__(self, name: str):
        """With Dask's extras installed, NumPy's array methods Dask calls on chunks
        (``squeeze``, ``sum``...), computed on the host array and returned on the device."""
        if name.startswith("_") or not DASK_EXTRAS or not hasattr(np.ndarray, name):
            raise AttributeError(f"cudasim: ndarray has no attribute {name!r}")
        method = getattr(self._a, name)
        return lambda *args, **kwargs: _on_device(method(*(_host(a, name) for a in args),
                                                          **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions refuse device arrays, so that a runner relying on them fails
        here; with Dask's extras installed (``installed(dask=True)``) they are CuPy's of the
        same name where there is one, else NumPy's computed on the host arrays, as with
        CuPy's own ``__array_function__``, which covers most of NumPy (Dask calls ``np.sum``,
        ``np.zeros_like``... on CuPy chunks)."""
        if not DASK_EXTRAS:
            return NotImplemented
        ours = DASK_EXTRAS.get(func.__name__) or FUNCTIONS.get(func.__name__)
        if ours is not None:
            return ours(*args, **kwargs)
        named = dict(zip(kwargs, _on_host(kwargs.values()), strict=True))
        result = func(*_on_host(args), **named)
        if isinstance(result, np.ndarray) and result.dtype.char not in SUPPORTED_DTYPES:
            return NotImplemented  # (a structured array, say: CuPy has none either)
        return _on_device(result)


ndarray.__module__ = "cupy"


def _index(x: ndarray, key):
    """The NumPy index for ``x[key]`` and whether it is advanced (integer or boolean
    arrays). Index arrays must be device arrays on the current device; integer ones wrap
    around modulo the axis length, as CuPy's indexing does (NumPy raises IndexError)."""
    key = key if isinstance(key, tuple) else (key,)
    if builtins.sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")

    def used(k) -> int:
        if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_)):
            return 0
        if isinstance(k, ndarray) and k.dtype == np.bool_:
            return k.ndim
        return 1

    total = builtins.sum(used(k) for k in key)
    if total > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                         f"but {total} were indexed")
    out, dim, fancy = [], 0, False
    for k in key:
        if isinstance(k, (list, np.ndarray)) and DASK_EXTRAS:  # (Dask's own indexing)
            k = _new(np.asarray(k))
        if isinstance(k, (list, np.ndarray)):
            raise TypeError("cudasim: index arrays must be device arrays (cupy.asarray them "
                            "first); CuPy would copy this host index to the device implicitly")
        if k is Ellipsis:
            dim += x.ndim - total
        elif isinstance(k, ndarray):
            h = _operand(k, "indexing with an array")
            fancy = True
            if h.dtype == np.bool_:
                dim += h.ndim
            elif h.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            else:
                n = x.shape[dim]
                if n == 0 and h.size:
                    raise IndexError("cannot do a non-empty take from an empty axes.")
                k = np.mod(h, n) if n else h  # CuPy wraps out-of-range indices around
                dim += 1
        elif k is not None:
            dim += used(k)
        out.append(k)
    if not fancy and Ellipsis not in out:
        out.append(Ellipsis)  # integers give a 0-d view, as in CuPy, not a NumPy scalar
    return tuple(out), fancy


# ---------------------------------------------------------------- creation


def asarray(a, dtype=None) -> ndarray:
    """``a`` on the current device: a device array there (of ``dtype``) is returned as is;
    one on another device is copied here (device to device); anything else is converted
    with NumPy and copied from the host (host to device)."""
    if isinstance(a, ndarray):
        if a._dev == _state.current():
            return a if dtype is None else a.astype(dtype, copy=False)
        stats._count("d2d", a.nbytes)
        moved = _new(a._a, "F" if a._a.flags.f_contiguous and not a._a.flags.c_contiguous
                     else "C")
        return moved if dtype is None else moved.astype(dtype, copy=False)
    if isinstance(a, (list, tuple)) and any(isinstance(e, ndarray) for e in _flatten(a)):
        raise TypeError("cudasim: asarray of a sequence holding device arrays is not "
                        "emulated; use cupy.concatenate or build it on the host")
    order = "F" if isinstance(a, np.ndarray) and a.flags.f_contiguous and \
        not a.flags.c_contiguous else "C"
    host = np.asarray(a, dtype=dtype, order=order)
    out = _new(host.astype(_dtype(host.dtype), copy=False), order)
    stats._count("h2d", out.nbytes)
    return out


def _flatten(seq):
    for e in seq:
        if isinstance(e, (list, tuple)):
            yield from _flatten(e)
        else:
            yield e


def ascontiguousarray(a, dtype=None) -> ndarray:
    """``a`` itself if C-contiguous (and of ``dtype``), else a C-contiguous copy on the
    current device. A 0-d array comes back with shape (1,), as in CuPy and NumPy."""
    if not isinstance(a, ndarray):
        raise TypeError(f"Argument 'a' has incorrect type (expected cupy.ndarray, got "
                        f"{type(a).__name__})")
    dtype = a.dtype if dtype is None else _dtype(dtype)
    if dtype == a.dtype and a.flags.c_contiguous:
        return a._view(a._a.reshape(1)) if a.ndim == 0 else a
    host = _operand(a, "ascontiguousarray (a copy)")
    return _new((host.reshape(1) if a.ndim == 0 else host).astype(dtype, copy=False))


def empty(shape, dtype=float) -> ndarray:
    """Uninitialised memory on the current device (floats read NaN, ints -1)."""
    return _alloc(shape, dtype)


def zeros(shape, dtype=float) -> ndarray:
    return _alloc(shape, dtype, fill=0)


def full(shape, fill_value, dtype=None) -> ndarray:
    if isinstance(fill_value, ndarray):
        value = _operand(fill_value, "full")
        dtype = fill_value.dtype if dtype is None else dtype
    else:
        _check_host_scalar(fill_value, "full's fill_value")
        value = fill_value
        dtype = np.array(fill_value).dtype if dtype is None else dtype
    out = _alloc(shape, dtype)
    out._a[...] = value
    return out


def _check_host_scalar(v, what: str) -> None:
    if not isinstance(v, _scalar_types):
        raise TypeError(f"cudasim: {what} must be a scalar or a device array, got "
                        f"{type(v).__name__} (CuPy would copy it from the host)")


# ---------------------------------------------------------------- library calls


def matmul(a, b) -> ndarray:
    return _new(np.matmul(_operand(a, "matmul"), _operand(b, "matmul")))


def broadcast_to(x, shape) -> ndarray:
    """A view (zero strides; not C-contiguous unless nothing is broadcast)."""
    if not isinstance(x, ndarray):
        raise TypeError(f"cudasim: broadcast_to takes a device array, got {type(x).__name__}")
    return x._view(np.broadcast_to(x._a, _shape(shape)))


def concatenate(arrays, axis=0) -> ndarray:
    hosts = [_operand(a, "concatenate") for a in arrays]
    return _new(np.concatenate(hosts, axis=axis))


def pad(array, pad_width, mode="constant", constant_values=0) -> ndarray:
    if mode != "constant":
        raise NotImplementedError("cudasim: pad emulates mode='constant' only")
    _check_host_scalar(constant_values, "pad's constant_values")
    return _new(np.pad(_operand(array, "pad"), pad_width, mode="constant",
                       constant_values=constant_values))


def _reduction(fn, name, with_dtype: bool):
    if with_dtype:
        def reduce(a, axis=None, dtype=None, *, keepdims=False) -> ndarray:
            return _new(fn(_operand(a, name), axis=axis, dtype=dtype, keepdims=keepdims))
    else:
        def reduce(a, axis=None, *, keepdims=False) -> ndarray:
            return _new(fn(_operand(a, name), axis=axis, keepdims=keepdims))
    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = f"``cupy.{name}``: a device array (0-d for a full reduction)."
    return reduce


def _arg_reduction(fn, name, nan_as):
    def reduce(a, axis=None, *, keepdims=False) -> ndarray:
        x = _operand(a, name)
        if x.dtype.kind == "f":  # CuPy does not promise NumPy's "a NaN wins": assume not
            x = np.where(np.isnan(x), nan_as, x)
        return _new(fn(x, axis=axis, keepdims=keepdims))
    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = (f"``cupy.{name}``: first occurrence; NaNs are ignored (NumPy picks the "
                      "first NaN), the pessimistic reading of CuPy's documentation.")
    return reduce


def _scan(fn, name):
    def scan(a, axis=None, dtype=None) -> ndarray:
        return _new(fn(_operand(a, name), axis=axis, dtype=dtype))
    scan.__name__ = scan.__qualname__ = name
    scan.__doc__ = f"``cupy.{name}`` (sequential here; CuPy's scan adds in a tree order)."
    return scan


def argsort(a, axis=-1, kind=None) -> ndarray:
    """``cupy.argsort``: stable whatever ``kind`` says (CuPy sorts with a stable radix
    sort), NaN last."""
    return _new(np.argsort(_operand(a, "argsort"), axis=axis, kind="stable"))


def sort(a, axis=-1, kind=None) -> ndarray:
    """``cupy.sort``: stable whatever ``kind`` says (as its argsort), NaN last."""
    return _new(np.sort(_operand(a, "sort"), axis=axis, kind="stable"))


def searchsorted(a, v, side="left", sorter=None) -> ndarray:
    """``cupy.searchsorted`` of a 1-d device array and a device array of values."""
    if sorter is not None:
        raise NotImplementedError("cudasim: searchsorted emulates sorter=None only")
    return _new(np.asarray(np.searchsorted(_operand(a, "searchsorted"),
                                           _operand(v, "searchsorted"), side=side)))


def isnan(x) -> ndarray:
    """``cupy.isnan`` (a ufunc the runner calls)."""
    return _new(np.isnan(_operand(x, "isnan")))


def _binary_ufunc(fn, name):
    def ufunc(x, y) -> ndarray:
        return _new(np.asarray(fn(_operand(x, name), _operand(y, name))))
    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = f"``cupy.{name}`` of two device arrays (NumPy's results)."
    return ufunc


def where(condition, x, y) -> ndarray:
    """``cupy.where(condition, x, y)`` of three device arrays."""
    return _new(np.where(_operand(condition, "where"), _operand(x, "where"),
                         _operand(y, "where")))


def real(val) -> ndarray:
    """``cupy.real``: a view of a complex array's real parts (sharing its memory, every
    other element, so not C-contiguous); a real array itself."""
    if not isinstance(val, ndarray):
        raise TypeError(f"cudasim: real takes a device array, got {type(val).__name__}")
    return val._view(val._a.real) if val.dtype.kind == "c" else val


def imag(val) -> ndarray:
    """``cupy.imag``: a view of a complex array's imaginary parts; zeros of a real array's
    dtype (a new array on the current device) for a real one."""
    if not isinstance(val, ndarray):
        raise TypeError(f"cudasim: imag takes a device array, got {type(val).__name__}")
    if val.dtype.kind == "c":
        return val._view(val._a.imag)
    _operand(val, "imag (zeros)")
    return zeros(val.shape, val.dtype)


def take(a, indices, axis=None) -> ndarray:
    return _new(np.take(_operand(a, "take"), _operand(indices, "take"), axis=axis))


def tensordot(a, b, axes=2) -> ndarray:
    return _new(np.tensordot(_operand(a, "tensordot"), _operand(b, "tensordot"), axes))


def _host(x, what: str):
    """An operand of Dask's own array arithmetic: a device array's host array, else ``x``."""
    return _operand(x, what) if isinstance(x, ndarray) else x


def _on_host(xs) -> list:
    """Arguments of a NumPy function Dask calls: device arrays, also in lists and tuples,
    as their host arrays."""
    return [_operand(x, "a NumPy function") if isinstance(x, ndarray) else
            type(x)(_on_host(x)) if isinstance(x, (list, tuple)) else x for x in xs]


def _on_device(result):
    """A result of Dask's own array arithmetic: NumPy arrays back on the device."""
    if isinstance(result, tuple):
        return tuple(_on_device(r) for r in result)
    return _new(result) if isinstance(result, np.ndarray) else result


def full_like(a, fill_value, dtype=None, shape=None) -> ndarray:
    return _new(np.full_like(_operand(a, "full_like"), fill_value, dtype=dtype, shape=shape))


def transpose(a, axes=None) -> ndarray:
    return _new(np.transpose(_operand(a, "transpose"), axes))


def asnumpy(a) -> np.ndarray:
    """``cupy.asnumpy``: a device array's copy on the host (Dask's to_numpy)."""
    return a.get() if isinstance(a, ndarray) else np.asarray(a)


# What Dask's CuPy support needs beyond tracejit's subset: installed, with NumPy's
# functions dispatching to the emulator's, only by ``installed(dask=True)``.
DASK = {"take": take, "tensordot": tensordot, "transpose": transpose, "full_like": full_like,
        "asnumpy": asnumpy}
DASK_EXTRAS: dict = {}  # DASK while installed with dask=True, else empty

FUNCTIONS = {
    "isnan": isnan, "where": where, "real": real, "imag": imag,
    "maximum": _binary_ufunc(np.maximum, "maximum"),
    "minimum": _binary_ufunc(np.minimum, "minimum"),
    "greater": _binary_ufunc(np.greater, "greater"), "less": _binary_ufunc(np.less, "less"),
    "logical_or": _binary_ufunc(np.logical_or, "logical_or"),
    "asarray": asarray, "ascontiguousarray": ascontiguousarray, "empty": empty,
    "zeros": zeros, "full": full, "matmul": matmul, "broadcast_to": broadcast_to,
    "concatenate": concatenate, "pad": pad,
    "sum": _reduction(np.sum, "sum", True), "prod": _reduction(np.prod, "prod", True),
    "max": _reduction(np.max, "max", False), "min": _reduction(np.min, "min", False),
    "any": _reduction(np.any, "any", False), "all": _reduction(np.all, "all", False),
    "argmax": _arg_reduction(np.argmax, "argmax", -np.inf),
    "argmin": _arg_reduction(np.argmin, "argmin", np.inf),
    "cumsum": _scan(np.cumsum, "cumsum"), "cumprod": _scan(np.cumprod, "cumprod"),
    "sort": sort, "argsort": argsort, "searchsorted": searchsorted,
}

_SCATTER_ADD_DTYPES = {np.dtype(t) for t in (np.int32, np.float16, np.float32, np.float64,
                                             np.uint32, np.uint64)}


def scatter_add(a, slices, value) -> None:
    """``cupyx.scatter_add``: ``np.add.at(a, slices, value)`` in place; integer index
    arrays wrap around; with one, ``a``'s dtype must have a CUDA atomicAdd (CuPy's list)."""
    host = _operand(a, "scatter_add")
    key, fancy = _index(a, slices)
    has_int_array = any(isinstance(k, np.ndarray) and k.dtype != np.bool_ for k in key)
    if has_int_array and a.dtype not in _SCATTER_ADD_DTYPES:
        raise TypeError("scatter_add only supports int32, float16, float32, float64, "
                        "uint32, uint64, as data type")
    if isinstance(value, ndarray):
        v = _operand(value, "scatter_add")
    else:
        _check_host_scalar(value, "scatter_add's value")
        v = value
    v = np.asarray(v).astype(a.dtype, copy=False)
    if not fancy:
        key = key[:-1] if key and key[-1] is Ellipsis else key
    np.add.at(host, key, v)
