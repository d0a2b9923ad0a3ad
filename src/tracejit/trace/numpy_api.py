"""The NumPy surface: ufuncs, operators and ``__array_function__`` mapped onto IR ops.

Each function here has NumPy's signature and semantics and is built from registry ops
(``bind``). Functions that are compositions in NumPy (mean, var, tensordot, roll, ...) are
compositions here too, following NumPy's own definitions so dtypes and values agree.

Memory is NumPy's too: a result is a view of an operand (a write through either shows in
the other) exactly where NumPy's is, and a new array everywhere else, also where a
parameter makes the computation trivial (:func:`fresh` copies then). What NumPy returns:

==================  ======================================================================
the operand itself  ``asarray``, ``array``/``astype`` with ``copy=False`` and nothing to
                    change, ``real``/``real_if_close`` of a real array, ``diff(n=0)``,
                    ``linalg.matrix_power(a, 1)``, ``nan_to_num(copy=False)``
a view              ``reshape``/``ravel`` where no copy is needed, ``transpose``,
                    ``swapaxes``, ``moveaxis``, ``rollaxis``, ``squeeze``,
                    ``expand_dims``, ``atleast_*d``, ``broadcast_to``/``_arrays``,
                    basic indexing, ``split`` and its kin, ``flip`` and its kin,
                    ``rot90``, ``diagonal`` and ``diag`` of 2-d (both read-only),
                    ``real``/``imag`` of complex, ``einsum`` of one operand that sums
                    nothing (whatever its ``dtype=``), ``meshgrid(copy=False)``,
                    ``ascontiguousarray`` of a C-contiguous array
a new array         everything else, whatever the parameters: ``copy``, ``array``,
                    ``astype``, ``flatten``, ``roll``, ``tile``, ``repeat``, ``take``,
                    ``round`` (of integers too), ``concatenate``/``stack`` of one array,
                    ``pad``, ``resize``, ``clip``, ``sort``, ``block``, ``meshgrid``,
                    ``nan_to_num``, ``imag`` of a real array (read-only zeros)
==================  ======================================================================
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import math
import string
from collections.abc import Iterator

import numpy as np

from ..errors import (
    AxisError,
    ConcretizationError,
    DTypeError,
    IndexOutOfBounds,
    InPlaceArgumentError,
    ShapeError,
    TracejitError,
    UnsupportedOperation,
)
from ..ir.ops import normalize_axes, normalize_axis, promote, slice_length
from ..ir.registry import REGISTRY
from ..ir.types import TensorType, type_of_constant
from . import loops
from .core import bind
from .layout import c_contiguous, fortran_contiguous, in_elements, ordered
from .tracer import Tracer

FUNCTIONS: dict = {}  # numpy function -> implementation
COMPOSED_UFUNCS: dict = {}  # ufunc -> implementation, for ufuncs that are no registry op
_UFUNC_OPS = {d.ufunc: name for name, d in REGISTRY.items() if d.ufunc is not None}
_NO = object()


def implements(*funcs):
    def register(impl):
        sig = inspect.signature(impl)
        for f in funcs:
            FUNCTIONS[f] = (impl, sig)
        return impl

    return register


def supported_functions() -> list[str]:
    """Names of the NumPy functions (beyond ufuncs) a traced function may call, as the user
    spells them after ``np.`` (``linalg.det`` for a function only ``np.linalg`` has)."""
    return sorted({f.__name__ if getattr(np, f.__name__, None) is f else
                   f"{f.__module__.removeprefix('numpy.')}.{f.__name__}" for f in FUNCTIONS})


def supported_ufuncs() -> list[str]:
    return sorted({u.__name__ for u in _UFUNC_OPS if hasattr(np, u.__name__)} |
                  {"matmul", "divmod"} | {u.__name__ for u in COMPOSED_UFUNCS})


def accumulating_ufuncs() -> list[str]:
    """Names of the ufuncs whose ``.accumulate`` a traced function may call."""
    return sorted(u.__name__ for u in _ACCUMULATE)


# ---------------------------------------------------------------- helpers


def aval(x) -> TensorType:
    return x.aval if isinstance(x, Tracer) else type_of_constant(x)


def _strong(x):
    """NumPy functions never return weakly typed values; only Python operators keep them."""
    if isinstance(x, Tracer) and x.aval.weak:
        return bind("convert", x, dtype=x.dtype)
    return x


def same_memory(x, y) -> bool:
    """Whether traced arrays ``x`` and ``y`` are views of one array (or that array)."""
    return isinstance(x, Tracer) and isinstance(y, Tracer) and \
        (x if x._base is None else x._base) is (y if y._base is None else y._base)


def fresh(result, *operands):
    """``result`` as the new array NumPy's function returns: a copy where it is one of
    ``operands`` or a view of one's memory, as a trivial parameter (a shift of 0, one
    repetition, ``decimals=0`` of integers) makes it. Writes to it, in the function or by
    the caller, then leave the operands alone, as NumPy's. (In the result's own layout,
    as NumPy's ``np.array(a, copy=True)`` on those paths.)"""
    if builtins.any(same_memory(result, a) for a in operands):
        return result.copy("K")
    return result


def read_only(x):
    """``x``, an array NumPy makes read-only (a diagonal, ``imag`` of a real array):
    writes to it, or to views of it, raise ReadOnlyDestination (NumPy's ValueError)."""
    if isinstance(x, Tracer):
        x._readonly = True
    return x


def _scalar_result(x):
    """Mark a 0-d result of a ufunc or reduction: NumPy returns a scalar there."""
    if isinstance(x, Tracer) and x.ndim == 0:
        x._scalar = True
    return x


def _is_scalar(x) -> bool:
    return x._scalar if isinstance(x, Tracer) else isinstance(x, (np.generic, int, float, complex))


def _as_strong_operand(x):
    """Python scalars given to non-ufunc functions become strong arrays (np.asarray)."""
    return np.asarray(x) if type(x) in (int, float, complex) else _strong(x)


def _reject_out(name: str, out) -> None:
    """For a function that has no ``out`` here (NumPy's may)."""
    if out is None or (type(out) is tuple and builtins.all(o is None for o in out)):
        return
    raise UnsupportedOperation(
        f"numpy.{name}(..., out=...) is not supported inside a jitted function",
        hint="use the returned value instead of out=",
    )


def store_out(name: str, out, result, casting: str | None, ufunc=None):
    """``out[...] = result`` as NumPy's ``out=`` does, and ``out``: the result cast with
    ``casting`` (None: out must have the result's dtype exactly, as np.dot's), and for a
    ufunc broadcast into out's shape, else of exactly that shape. ``out`` may be a tuple,
    one entry per result (None for a result that is returned as is)."""
    outs = out if type(out) is tuple else (out,)
    results = result if type(result) is tuple else (result,)
    if len(outs) != len(results):
        raise ShapeError(f"The 'out' tuple must have exactly {len(results)} entries: one "
                         "per ufunc output")
    stored = []
    for o, r in zip(outs, results, strict=True):
        if o is None:
            stored.append(r)
            continue
        if not isinstance(o, Tracer):
            raise InPlaceArgumentError(
                f"numpy.{name}(..., out=...) into a NumPy array that is not an argument of "
                "the jitted function: the write would happen once, while tracing")
        t = aval(r)
        try:
            fits = np.broadcast_shapes(t.shape, o.shape) == o.shape if ufunc else \
                t.shape == o.shape
        except ValueError:
            fits = False
        if not fits:
            raise ShapeError(f"non-broadcastable output operand with shape {o.shape} doesn't "
                             f"match the broadcast shape {t.shape}" if ufunc else
                             f"output array of shape {o.shape} for a result of shape {t.shape}")
        if casting is None and t.dtype != o.dtype:
            raise ShapeError("output array is not acceptable (must have the right datatype, "
                             "number of dimensions, and be a C-Array)")
        if casting is not None and not np.can_cast(t.dtype, o.dtype, casting):
            if ufunc is not None:
                _check_output_cast(ufunc, t.dtype, o.dtype)
            raise DTypeError(f"Cannot cast {name} output from {t.dtype!r} to {o.dtype!r} "
                             f"with casting rule {casting!r}")
        o[...] = r
        stored.append(o)
    return tuple(stored) if type(result) is tuple else stored[0]


def _writes_out(casting: str | None):
    """A NumPy function taking ``out=``: the implementation computes the result, which is
    then written into ``out`` (see store_out) and ``out`` returned, as NumPy does."""
    def wrap(impl):
        sig = inspect.signature(impl)

        @functools.wraps(impl)
        def run(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            out = bound.arguments.get("out")
            if out is None:
                return impl(*args, **kwargs)
            bound.arguments["out"] = None
            return store_out(impl.__name__, out, impl(*bound.args, **bound.kwargs), casting)

        return run

    return wrap


def _unsupported(name: str, what: str = "") -> UnsupportedOperation:
    return UnsupportedOperation(
        f"numpy.{name}{what} is not supported by tracejit",
        hint="see the supported-op table in the README; rewrite with supported functions or "
        "call it outside the jitted function",
    )


def apply_function(func, args, kwargs):
    entry = FUNCTIONS.get(func)
    name = getattr(func, "__name__", repr(func))
    if entry is None:
        module = getattr(func, "__module__", "numpy") or "numpy"
        prefix = "" if module == "numpy" else module.removeprefix("numpy.") + "."
        raise _unsupported(prefix + name)
    impl, sig = entry
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        if "out" in kwargs:
            _reject_out(name, kwargs["out"])
        raise _unsupported(name, f" with these arguments ({e})") from None
    return impl(*args, **kwargs)


# ---------------------------------------------------------------- ufuncs and operators


def _elementwise(ufunc, operands):
    if ufunc is np.matmul:
        return matmul(*operands)
    op = _UFUNC_OPS.get(ufunc)
    if op is None:
        raise _unsupported(ufunc.__name__)
    return bind(op, *operands)


def operator(ufunc, *operands):
    """A Python operator: like the ufunc, but Python-scalar arithmetic stays weakly typed.
    ``array ** 2`` is ``np.square`` as in NumPy's operator (bool ** 2 is int8, not int64)."""
    base = operands[0]
    if (ufunc is np.power and type(operands[1]) is int and operands[1] == 2
            and isinstance(base, Tracer) and not base._scalar and not base.aval.weak):
        return bind("square", base)
    if ufunc is np.matmul and builtins.all(_is_scalar(x) for x in operands):
        names = " and ".join(f"'{type(np.zeros((), aval(x).dtype)[()]).__name__}'"
                             for x in operands)
        raise DTypeError(f"unsupported operand type(s) for @: {names} (NumPy scalars)",
                         hint="use * to multiply scalars")
    return _scalar_result(_elementwise(ufunc, operands))


def inplace(ufunc, target: Tracer, other):
    """``x op= y`` rebinds x (tracers are immutable) with NumPy's same_kind output cast."""
    if target.aval.weak or target._scalar:  # Python and NumPy scalars simply rebind
        return operator(ufunc, target, other)
    op = _UFUNC_OPS.get(ufunc)
    if op is not None:  # NumPy checks the output cast before broadcasting the operands
        try:
            dtype = REGISTRY[op].rule(*(TensorType((), t.dtype, t.weak)
                                        for t in (target.aval, aval(other)))).dtype
        except TracejitError:
            dtype = target.dtype  # the operation itself raises, below
        _check_output_cast(ufunc, dtype, target.dtype)
    result = operator(ufunc, target, other)
    if result.dtype != target.dtype:
        _check_output_cast(ufunc, result.dtype, target.dtype)
        result = bind("convert", result, dtype=target.dtype)
    if result.shape != target.shape:
        raise ShapeError(
            f"non-broadcastable output operand with shape {target.shape} doesn't match the "
            f"broadcast shape {result.shape}"
        )
    return result


def _check_output_cast(ufunc, dtype: np.dtype, target: np.dtype) -> None:
    if not np.can_cast(dtype, target, "same_kind"):
        raise DTypeError(
            f"Cannot cast ufunc '{ufunc.__name__}' output from {dtype!r} to {target!r} with "
            "casting rule 'same_kind'", hint="convert explicitly: x = (x op y).astype(x.dtype)")


# ufunc.reduce for the ufuncs that combine a registry reduction (np.add.reduce is sum):
# the name of the NumPy function tracing it.
_REDUCE_FUNCS = {getattr(np, op.monoid.combine): name
                 for name, op in REGISTRY.items() if op.monoid is not None}


def apply_ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.pop("out", None)
    result = _apply_ufunc(ufunc, method, inputs, kwargs)
    if out is None or (type(out) is tuple and builtins.all(o is None for o in out)):
        return result
    return store_out(f"{ufunc.__name__}{'' if method == '__call__' else '.' + method}", out,
                     result, "same_kind" if method == "__call__" else "unsafe",
                     ufunc if method == "__call__" else None)


def _apply_ufunc(ufunc, method, inputs, kwargs):
    name = ufunc.__name__
    if method == "__call__":
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise _unsupported(name, f"(..., {', '.join(kwargs)}=...)")
        if ufunc is np.divmod:
            return tuple(_strong(bind(op, *inputs)) for op in ("floor_divide", "remainder"))
        if ufunc in COMPOSED_UFUNCS and dtype is None:
            return COMPOSED_UFUNCS[ufunc](*inputs)
        if dtype is not None:
            inputs = [_cast_same_kind(x, np.dtype(dtype), name) for x in inputs]
        return _scalar_result(_strong(_elementwise(ufunc, inputs)))
    if method == "reduce" and ufunc in _REDUCE_FUNCS:
        (a,) = inputs
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise _unsupported(f"{name}.reduce", f"(..., {', '.join(kwargs)}=...)")
        fn = FUNCTIONS[getattr(np, _REDUCE_FUNCS[ufunc])][0]
        extra = {"dtype": dtype} if _REDUCE_FUNCS[ufunc] in ("sum", "prod") else {}
        return fn(a, axis=axis, keepdims=keepdims, **extra)
    if method == "reduce" and ufunc.nin == 2 and ufunc.nout == 1 and ufunc not in _NO_FOLD:
        (a,) = inputs
        return _fold(ufunc, a, **kwargs)
    if method == "accumulate" and ufunc in _ACCUMULATE:
        axis, dtype = kwargs.pop("axis", 0), kwargs.pop("dtype", None)
        if kwargs or len(inputs) != 1:
            raise _unsupported(f"{name}.accumulate", f"(..., {', '.join(kwargs)}=...)"
                               if kwargs else " of several arrays")
        return _accumulate(ufunc, inputs[0], axis, dtype)
    if method == "outer" and ufunc.nin == 2 and not kwargs:
        a, b = inputs
        ta, tb = aval(a), aval(b)
        a = reshape(a, ta.shape + (1,) * tb.ndim)
        return _strong(_elementwise(ufunc, (a, b)))
    raise _unsupported(f"{name}.{method}")


# NumPy's reduce of these is no sequential fold (their vectorised loops do not carry the
# running result: np.arctan2.reduce([a, b, c]) is arctan2(a, c)): not copied.
_NO_FOLD = {np.arctan2, np.power}


@contextlib.contextmanager
def numpy_errors_typed() -> Iterator[None]:
    """NumPy's errors, from NumPy computing something static while tracing (an index
    map, a result type), as tracejit's of the same builtin class, NumPy's message kept."""
    try:
        yield
    except np.exceptions.AxisError as e:
        raise AxisError(str(e)) from None
    except IndexError as e:
        raise IndexOutOfBounds(str(e)) from None
    except ValueError as e:
        raise ShapeError(str(e)) from None
    except TypeError as e:
        raise DTypeError(str(e)) from None


def _fold(ufunc, a, axis=0, dtype=None, out=None, keepdims=False, initial=np._NoValue,
          where=True):
    """``ufunc.reduce`` of a ufunc with no registry reduction (``logaddexp``, ``subtract``,
    ``hypot``, ...): NumPy's sequential fold, ``r = ufunc(r, x[i])`` along the axis, as one
    scan; over several axes (a ufunc NumPy may reorder) the elements in C order. NumPy's
    own reduce of a small zero array like ``a`` gives the result's dtype and NumPy's
    errors."""
    name = f"{ufunc.__name__}.reduce"
    if where is not True:
        raise _unsupported(name, "(..., where=...)")
    _reject_out(name, out)
    if initial is None:  # (NumPy's "no initial value" for numeric arrays)
        initial = np._NoValue
    a = _strong(a) if isinstance(a, Tracer) else np.asarray(a)
    t = aval(a)
    extra = {} if initial is np._NoValue else {"initial": initial}
    with numpy_errors_typed():  # (extents of 1 raise as the real ones: only 0 matters)
        probe = ufunc.reduce(np.zeros(tuple(builtins.min(n, 1) for n in t.shape), t.dtype),
                             axis=axis, dtype=dtype, keepdims=keepdims, **extra)
    dtype = np.result_type(probe)
    if t.ndim == 0:  # (NumPy's reduce of a 0-d array is its element)
        return _scalar_result(bind("convert", a, dtype=dtype))
    axes = sorted(normalize_axes(axis, t.ndim))
    kept = [d for d in range(t.ndim) if d not in axes]
    result = TensorType(tuple(1 if d in axes else n for d, n in enumerate(t.shape))
                        if keepdims else tuple(t.shape[d] for d in kept), dtype)
    rows = reshape(transpose(a, [*axes, *kept]), (-1, *(t.shape[d] for d in kept)))
    rows = bind("convert", rows, dtype=result.dtype)
    if initial is not np._NoValue:
        carry, xs = np.asarray(initial, result.dtype), rows
    elif aval(rows).shape[0] == 0:  # (an identity: NumPy raised above otherwise)
        carry, xs = np.asarray(ufunc.identity, result.dtype), rows
    else:
        rest = aval(rows).shape[1:]
        carry, xs = reshape(_take_slice(rows, 0, 0, 1), rest), _take_slice(rows, 0, 1, None)
    carry = bind("broadcast_to", _strong(carry) if isinstance(carry, Tracer) else carry,
                 shape=aval(rows).shape[1:])
    folded = loops.scan(lambda r, x: (_strong(ufunc(r, x)), None), carry, xs,
                        what=f"numpy.{name}")[0]
    return _scalar_result(reshape(bind("convert", folded, dtype=result.dtype), result.shape))


# ufunc.accumulate as the registry's scans: add's and multiply's are np.cumsum's and
# np.cumprod's (their dtypes too: NumPy accumulates small ints and bools in int64 for
# both); maximum's and minimum's are cummax and cummin, fmax's and fmin's those with NaN
# skipped, logical_or's and logical_and's those of the values as bools.
_ACCUMULATE = {np.add: "cumsum", np.multiply: "cumprod", np.maximum: "cummax",
               np.minimum: "cummin", np.fmax: "cummax", np.fmin: "cummin",
               np.logical_or: "cummax", np.logical_and: "cummin"}


def _accumulate(ufunc, a, axis, dtype):
    name = f"{ufunc.__name__}.accumulate"
    a = _strong(a) if isinstance(a, Tracer) else np.asarray(a)
    t = aval(a)
    if t.ndim == 0:
        raise DTypeError(f"numpy.{name}: cannot accumulate on a scalar",
                         hint="accumulate along an axis of an array of at least 1 dimension")
    if isinstance(axis, tuple) and len(axis) == 1:
        (axis,) = axis
    if axis is None and t.ndim == 1:
        axis = 0
    if axis is None or isinstance(axis, tuple):
        raise ShapeError(f"numpy.{name}: accumulate does not allow multiple axes",
                         hint="accumulate along one axis at a time")
    axis = normalize_axis(operator_index(axis, name), t.ndim)
    op = _ACCUMULATE[ufunc]
    if op in ("cumsum", "cumprod"):
        return bind(op, a, axis=axis, dtype=None if dtype is None else np.dtype(dtype))
    if ufunc in (np.logical_or, np.logical_and):
        if dtype is not None:
            raise _unsupported(name, "(..., dtype=...)")
        return bind(op, bind("convert", a, dtype=np.dtype(bool)), axis=axis)
    if dtype is not None:  # (NumPy casts the input to it, unsafely)
        a = bind("convert", a, dtype=np.dtype(dtype))
    if ufunc in (np.fmax, np.fmin) and aval(a).dtype.kind == "f":
        return _accumulate_skipping_nan(op, a, axis)
    return bind(op, a, axis=axis)


def _accumulate_skipping_nan(op: str, a, axis: int):
    """fmax/fmin.accumulate: cummax/cummin with each NaN as the identity (-inf/inf), NaN
    where every element so far is NaN."""
    dtype = aval(a).dtype
    nan = bind("isnan", a)
    identity = np.array(-np.inf if op == "cummax" else np.inf, dtype)
    running = bind(op, bind("where", nan, identity, a), axis=axis)
    return bind("where", bind("cummin", nan, axis=axis), np.array(np.nan, dtype), running)


def _cast_same_kind(x, dtype, name):
    t = aval(x)
    if not t.weak and not np.can_cast(t.dtype, dtype, "same_kind"):
        raise DTypeError(f"numpy.{name}: cannot cast {t.dtype} to {dtype} with casting 'same_kind'")
    return bind("convert", x, dtype=dtype)


# ---------------------------------------------------------------- dtype conversion


@implements(np.astype)
def astype(x, dtype, /, *, copy=True, device=None, casting="unsafe"):
    try:
        dtype = np.dtype(dtype)
    except TypeError as e:
        raise DTypeError(str(e)) from None
    if dtype.kind not in "biufc":
        raise DTypeError(f"astype: dtype {dtype} is not supported (numeric and bool only)")
    t = aval(x)
    if casting != "unsafe" and not np.can_cast(t.dtype, dtype, casting):
        raise DTypeError(f"Cannot cast array data from {t.dtype!r} to {dtype!r} "
                         f"according to the rule {casting!r}")
    if t.dtype == dtype and not t.weak:  # a new array unless copy=False says it need not
        return x.copy("K") if isinstance(x, Tracer) and copy else x
    return bind("convert", x, dtype=dtype)


# ---------------------------------------------------------------- reductions


def _legacy_0d_axis(t: TensorType, axis) -> bool:
    """NumPy's ufunc reductions (and squeeze) accept an int axis 0 or -1 on 0-d arrays."""
    return t.ndim == 0 and isinstance(axis, (int, np.integer)) and axis in (0, -1)


def _reduce(op, a, axis, keepdims, **attrs):
    t = aval(a)
    axes = () if _legacy_0d_axis(t, axis) else normalize_axes(axis, t.ndim)
    return _scalar_result(bind(op, a, axis=axes, keepdims=bool(keepdims), **attrs))


def _dtype_or_none(dtype):
    return None if dtype is None else np.dtype(dtype)


@implements(np.sum)
@_writes_out("unsafe")
def sum(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("sum", a, axis, keepdims, dtype=_dtype_or_none(dtype))


@implements(np.prod)
@_writes_out("unsafe")
def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("prod", a, axis, keepdims, dtype=_dtype_or_none(dtype))


@implements(np.max, np.amax)
@_writes_out("unsafe")
def max(a, axis=None, out=None, keepdims=False):
    return _reduce("max", a, axis, keepdims)


@implements(np.min, np.amin)
@_writes_out("unsafe")
def min(a, axis=None, out=None, keepdims=False):
    return _reduce("min", a, axis, keepdims)


@implements(np.any)
@_writes_out("unsafe")
def any(a, axis=None, out=None, keepdims=False):
    return _reduce("any", a, axis, keepdims)


@implements(np.all)
@_writes_out("unsafe")
def all(a, axis=None, out=None, keepdims=False):
    return _reduce("all", a, axis, keepdims)


def _arg_reduce(op, a, axis, out, keepdims):
    t = aval(a)
    if _legacy_0d_axis(t, axis):
        axis = None
    ax = None if axis is None else normalize_axis(operator_index(axis, op), t.ndim)
    return _scalar_result(bind(op, a, axis=ax, keepdims=bool(keepdims)))


@implements(np.argmax)
@_writes_out("unsafe")
def argmax(a, axis=None, out=None, *, keepdims=False):
    return _arg_reduce("argmax", a, axis, out, keepdims)


@implements(np.argmin)
@_writes_out("unsafe")
def argmin(a, axis=None, out=None, *, keepdims=False):
    return _arg_reduce("argmin", a, axis, out, keepdims)


def operator_index(value, name: str) -> int:
    if not isinstance(value, (int, np.integer)):
        raise DTypeError(f"numpy.{name}: axis must be an integer, not {type(value).__name__}")
    return int(value)


def _count(t: TensorType, axis) -> int:
    return math.prod(t.shape[i] for i in normalize_axes(axis, t.ndim))


def _divide_keep_dtype(total, count):
    """NumPy's ``true_divide(total, count, out=total, casting='unsafe')``. NumPy's count is
    an ``np.intp``, so a complex64 total divides in complex128 (a complex division is a
    product with a reciprocal, whose complex64 rounding differs; for floats a division in
    float64 rounds back to the same float32 or float16)."""
    if isinstance(count, int) and aval(total).dtype.kind == "c":
        count = np.intp(count)
    return astype(bind("true_divide", total, count), total.dtype)


@implements(np.mean)
@_writes_out("unsafe")
def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    t = aval(a)
    back_to_f16 = False
    if dtype is None:
        if t.dtype.kind in "biu":
            dtype = np.float64
        elif t.dtype == np.float16:
            dtype, back_to_f16 = np.float32, True
    total = sum(a, axis, dtype, None, keepdims)
    result = _divide_keep_dtype(total, _count(t, axis))
    return _scalar_result(astype(result, np.float16) if back_to_f16 else result)


@implements(np.var)
@_writes_out("unsafe")
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    t = aval(a)
    if dtype is None and t.dtype.kind in "biu":
        dtype = np.float64
    n = _count(t, axis)
    centre = _divide_keep_dtype(sum(a, axis, dtype, None, True), n)
    dev = bind("subtract", a, centre)
    if aval(dev).dtype.kind == "c":  # NumPy's: |dev|^2 as re*re + im*im, a real value
        re, im = bind("real", dev), bind("imag", dev)
        sq = bind("add", bind("multiply", re, re), bind("multiply", im, im))
    else:
        sq = bind("multiply", dev, dev)
    return _scalar_result(_divide_keep_dtype(sum(sq, axis, dtype, None, keepdims),
                                             builtins.max(n - ddof, 0)))


@implements(np.std)
@_writes_out("unsafe")
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    v = var(a, axis, dtype, out, ddof, keepdims)
    return _scalar_result(astype(bind("sqrt", v), v.dtype))


# ---------------------------------------------------------------- contractions


def matmul(a, b):
    ta, tb = aval(a), aval(b)
    for i, t in enumerate((ta, tb)):
        if t.ndim == 0:
            raise ShapeError(
                f"matmul: Input operand {i} does not have enough dimensions (has 0, gufunc "
                "core with signature (n?,k),(k,m?)->(n?,m?) requires 1)",
                hint="use * (np.multiply) to scale by a scalar",
            )
    if ta.ndim == 1:
        a = reshape(a, (1, ta.shape[0]))
    if tb.ndim == 1:
        b = reshape(b, (tb.shape[0], 1))
    r = _strong(bind("matmul", a, b))
    if ta.ndim == 1 or tb.ndim == 1:
        shape = r.shape[:-2] + r.shape[-2:-1] * (ta.ndim > 1) + r.shape[-1:] * (tb.ndim > 1)
        r = reshape(r, shape)
    return r


@implements(np.dot)
@_writes_out(None)
def dot(a, b, out=None):
    a, b = _as_strong_operand(a), _as_strong_operand(b)
    ta, tb = aval(a), aval(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return _strong(bind("multiply", a, b))
    if ta.ndim <= 2 and tb.ndim <= 2:
        if ta.shape[-1] != tb.shape[0 if tb.ndim == 1 else -2]:
            raise _not_aligned(ta, tb, ta.ndim - 1, 0 if tb.ndim == 1 else tb.ndim - 2)
        return matmul(a, b)
    b_axis = 0 if tb.ndim == 1 else tb.ndim - 2
    if ta.shape[-1] != tb.shape[b_axis]:
        raise _not_aligned(ta, tb, ta.ndim - 1, b_axis)
    return tensordot(a, b, ([ta.ndim - 1], [b_axis]))


def _not_aligned(ta, tb, da, db):
    return ShapeError(
        f"shapes {ta.shape} and {tb.shape} not aligned: {ta.shape[da]} (dim {da}) != "
        f"{tb.shape[db]} (dim {db})"
    )


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    a, b = _as_strong_operand(a), _as_strong_operand(b)
    ta, tb = aval(a), aval(b)
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = list(range(ta.ndim - int(axes), ta.ndim)), list(range(int(axes)))
    else:
        axes_a, axes_b = axes
        axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
        axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    if len(axes_a) != len(axes_b):
        raise ShapeError("shape-mismatch for sum")
    axes_a = [normalize_axis(int(x), ta.ndim) for x in axes_a]
    axes_b = [normalize_axis(int(x), tb.ndim) for x in axes_b]
    if builtins.any(ta.shape[i] != tb.shape[j] for i, j in zip(axes_a, axes_b, strict=True)):
        raise ShapeError("shape-mismatch for sum")
    free_a = [i for i in range(ta.ndim) if i not in axes_a]
    free_b = [i for i in range(tb.ndim) if i not in axes_b]
    k = math.prod(ta.shape[i] for i in axes_a)
    at = reshape(transpose(a, free_a + axes_a), (math.prod(ta.shape[i] for i in free_a), k))
    bt = reshape(transpose(b, axes_b + free_b), (k, math.prod(tb.shape[i] for i in free_b)))
    out_shape = tuple(ta.shape[i] for i in free_a) + tuple(tb.shape[i] for i in free_b)
    return reshape(matmul(at, bt), out_shape)


@implements(np.inner)
def inner(a, b):
    a, b = _as_strong_operand(a), _as_strong_operand(b)
    ta, tb = aval(a), aval(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return _strong(bind("multiply", a, b))
    if ta.shape[-1] != tb.shape[-1]:
        raise _not_aligned(ta, tb, ta.ndim - 1, tb.ndim - 1)
    return tensordot(a, b, ([ta.ndim - 1], [tb.ndim - 1]))


@implements(np.outer)
@_writes_out("same_kind")
def outer(a, b, out=None):
    a, b = ravel(_as_strong_operand(a)), ravel(_as_strong_operand(b))
    return _strong(bind("multiply", reshape(a, (-1, 1)), reshape(b, (1, -1))))


@implements(np.einsum)
@_writes_out("unsafe")
def einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    """A label repeated in one operand takes that operand's diagonal (a view, as NumPy's);
    then two-operand contractions become transposes + one batched matmul, applied left to
    right; labels used by no later operand and not in the output are summed first."""
    if not operands or not isinstance(operands[0], str):
        raise _unsupported("einsum", " in the interleaved (operand, sublist) form")
    subscripts, arrays = operands[0].replace(" ", ""), list(operands[1:])
    arrays = [_as_strong_operand(x) for x in arrays]
    ins, out_labels = _parse_einsum(subscripts, [aval(x) for x in arrays])
    for k, labels in enumerate(ins):
        arrays[k], ins[k] = _einsum_diagonals(arrays[k], labels, k)
    if len(arrays) == 1 and set(ins[0]) == set(out_labels):
        # NumPy returns a view of a lone operand where nothing is summed (its
        # get_single_op_view), in the operand's dtype whatever dtype= says
        return transpose(arrays[0], [ins[0].index(lab) for lab in out_labels])
    result_dtype = np.result_type(*[aval(x).dtype for x in arrays]) if dtype is None else dtype
    arrays = [astype(x, result_dtype, casting="unsafe") for x in arrays]
    sizes: dict[str, int] = {}
    for labels, x in zip(ins, arrays, strict=True):
        for lab, d in zip(labels, aval(x).shape, strict=True):
            if sizes.get(lab, 1) not in (1, d) and d != 1:
                raise ShapeError(f"einsum: size of label '{lab}' differs between operands "
                                 f"({sizes[lab]} vs {d})")
            if d != 1 or lab not in sizes:  # (1 broadcasts against any size, 0 too)
                sizes[lab] = d
    acc, acc_labels = arrays[0], ins[0]
    for i in range(1, len(arrays)):
        rest = set(out_labels).union(*ins[i + 1:])  # labels still needed after this step
        acc, acc_labels = _einsum_sum_out(acc, acc_labels, rest | set(ins[i]))
        nxt, nxt_labels = _einsum_sum_out(arrays[i], ins[i], rest | set(acc_labels))
        acc, acc_labels = _einsum_pair(acc, acc_labels, nxt, nxt_labels, sizes, rest)
    acc, acc_labels = _einsum_sum_out(acc, acc_labels, set(out_labels))
    perm = [acc_labels.index(lab) for lab in out_labels]
    return transpose(acc, perm)


def _parse_einsum(subscripts: str, types: list[TensorType]):
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs, out = subscripts, None
    terms = lhs.split(",")
    if len(terms) != len(types):
        raise ShapeError(f"einsum: {len(terms)} subscripts for {len(types)} operands")
    spare = iter(c for c in string.ascii_uppercase[::-1] if c not in subscripts)
    n_ell = builtins.max([t.ndim - len(term.replace("...", "")) for term, t in
                          zip(terms, types, strict=True) if "..." in term] or [0])
    ell = "".join(next(spare) for _ in range(n_ell))
    ins = []
    for term, t in zip(terms, types, strict=True):
        if "..." in term:
            k = t.ndim - len(term.replace("...", ""))
            term = term.replace("...", ell[n_ell - k:])
        if len(term) != t.ndim:
            raise ShapeError(f"einsum: subscript '{term}' has {len(term)} labels for an operand "
                             f"of {t.ndim} dimensions")
        ins.append(term)
    if out is None:
        counts = "".join(ins)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    if builtins.any(c not in "".join(ins) for c in out) or len(set(out)) != len(out):
        raise ShapeError(f"einsum: invalid output subscripts '{out}'")
    return ins, out


def _einsum_diagonals(x, labels: str, k: int):
    """Operand ``k``, ``x``, with each label repeated in its ``labels`` made one axis,
    the last, by taking the diagonal of the repeated axes, and its labels then."""
    while len(set(labels)) != len(labels):
        lab = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(lab)
        j = labels.index(lab, i + 1)
        shape = aval(x).shape
        if shape[i] != shape[j]:
            raise ShapeError(f"einsum: dimensions in operand {k} for collapsing index "
                             f"'{lab}' don't match ({shape[i]} != {shape[j]})")
        x = diagonal_view(x, 0, i, j)
        labels = "".join(c for n, c in enumerate(labels) if n not in (i, j)) + lab
    return x, labels


def _einsum_sum_out(x, labels: str, keep: set):
    drop = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not drop:
        return x, labels
    x = bind("sum", x, axis=drop, keepdims=False, dtype=aval(x).dtype)
    return x, "".join(c for c in labels if c in keep)


def _einsum_pair(a, la: str, b, lb: str, sizes, keep: set):
    batch = [c for c in la if c in lb and c in keep]
    contracted = [c for c in la if c in lb and c not in keep]
    only_a = [c for c in la if c not in lb]
    only_b = [c for c in lb if c not in la]

    def arrange(x, labels, order, trailing_full):
        x = transpose(x, [labels.index(c) for c in order])
        shape = tuple(sizes[c] if c in trailing_full else aval(x).shape[i]
                      for i, c in enumerate(order))
        return broadcast_to(x, shape) if shape != aval(x).shape else x

    a = arrange(a, la, batch + only_a + contracted, set(contracted))
    b = arrange(b, lb, batch + contracted + only_b, set(contracted))
    ta, tb = aval(a), aval(b)
    nb = len(batch)
    m = math.prod(ta.shape[nb:nb + len(only_a)])
    n = math.prod(tb.shape[nb + len(contracted):])
    k = math.prod(sizes[c] for c in contracted)
    a = reshape(a, ta.shape[:nb] + (m, k))
    b = reshape(b, tb.shape[:nb] + (k, n))
    r = bind("matmul", a, b)
    shape = aval(r).shape[:nb] + ta.shape[nb:nb + len(only_a)] + tb.shape[nb + len(contracted):]
    return reshape(r, shape), "".join(batch + only_a + only_b)


# ---------------------------------------------------------------- structural


@implements(np.reshape)
def reshape(a, /, shape=None, order="C", *, copy=None):
    if order != "C":
        raise _unsupported("reshape", f"(order={order!r}); only C order is supported")
    t = aval(a)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    shape = tuple(int(d) for d in shape)
    if shape.count(-1) > 1:
        raise ShapeError("can only specify one unknown dimension")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or t.size % known:
            raise ShapeError(f"cannot reshape array of size {t.size} into shape {shape}")
        shape = tuple(t.size // known if d == -1 else d for d in shape)
    out = a if shape == t.shape and isinstance(a, Tracer) else bind("reshape", a, shape=shape)
    if copy:
        return out.copy() if isinstance(out, Tracer) else out
    if copy is False and isinstance(a, Tracer) and not (a._scalar or t.weak) and \
            not same_memory(out, a):  # (a layout no reshape can view)
        raise ShapeError("Unable to avoid creating a copy while reshaping.",
                         hint="leave copy= out (or None) to copy where needed")
    return out


@implements(np.ravel)
def ravel(a, order="C"):
    """NumPy's ravel: a view where ``a``'s memory holds the elements contiguously in the
    order asked for (C; F; ``"A"``: F for a Fortran-contiguous array; ``"K"``: the order
    they lie in memory), else a copy, even where a reshape would be a view (of ``x[::2]``)."""
    if order not in ("C", "F", "A", "K"):
        raise _unsupported("ravel", f"(order={order!r})")
    if not isinstance(a, Tracer) or a._scalar or aval(a).weak or aval(a).ndim < 2:
        return _contiguous_or_copy(reshape(a, (-1,)), a)
    shape, strides = a._layout()
    if order == "K":
        perm = sorted(range(len(shape)), key=lambda d: -abs(strides[d]) if shape[d] > 1 else 0)
        if not builtins.all(strides[d] > 0 for d in perm if shape[d] > 1):
            perm = list(range(len(shape)))
    elif order == "F" or order == "A" and fortran_contiguous(shape, strides) and \
            not c_contiguous(shape, strides):
        perm = list(range(len(shape)))[::-1]
    else:
        perm = list(range(len(shape)))
    ordered_a = a if perm == list(range(len(shape))) else transpose(a, perm)
    return _contiguous_or_copy(reshape(ordered_a, (-1,)), ordered_a)


def _contiguous_or_copy(flat, a):
    """``flat`` (a reshape of ``a`` to one axis) where ``a`` is C-contiguous: ravel's view;
    else a copy (NumPy's ravel copies what is not contiguous, ``x[::2]`` too)."""
    if isinstance(a, Tracer) and isinstance(flat, Tracer) and (
            flat is a or flat._base is not None) and not c_contiguous(*a._layout()):
        return flat.copy()
    return flat


@implements(np.transpose)
def transpose(a, axes=None):
    t = aval(a)
    if axes is None:
        perm = tuple(range(t.ndim))[::-1]
    else:
        if len(axes) != t.ndim:
            raise ShapeError("axes don't match array")
        perm = tuple(normalize_axis(int(x), t.ndim) for x in axes)
        if len(set(perm)) != len(perm):
            raise ShapeError("repeated axis in transpose")
    if perm == tuple(range(t.ndim)) and isinstance(a, Tracer):
        return a
    return bind("transpose", a, perm=perm)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    t = aval(a)
    perm = list(range(t.ndim))
    i, j = normalize_axis(axis1, t.ndim), normalize_axis(axis2, t.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    t = aval(a)
    source = normalize_axes_ordered(source, t.ndim)
    destination = normalize_axes_ordered(destination, t.ndim)
    if len(source) != len(destination):
        raise ShapeError("`source` and `destination` arguments must have the same number "
                         "of elements")
    order = [n for n in range(t.ndim) if n not in source]
    for dest, src in sorted(zip(destination, source, strict=True)):
        order.insert(dest, src)
    return transpose(a, order)


def diagonal_view(a, offset: int, axis1: int, axis2: int):
    """The diagonal of ``a`` over two distinct normalised axes, as its last axis: a
    strided slice of the two flattened, so a view of ``a`` as NumPy's diagonals are
    (``np.diagonal``'s, read-only there, and einsum's ``'ii->i'``)."""
    x = moveaxis(a, (axis1, axis2), (-2, -1))
    *batch, rows, cols = aval(x).shape
    k = int(offset)
    n = builtins.max(0, builtins.min(rows, cols - k) if k >= 0 else builtins.min(rows + k, cols))
    flat = reshape(x, (*batch, rows * cols))
    start = k if k >= 0 else -k * cols
    key = slice(start, start + (cols + 1) * (n - 1) + 1, cols + 1) if n else slice(0, 0)
    return basic_index(flat, aval(flat).shape, [slice(None)] * len(batch) + [key])


def normalize_axes_ordered(axis, ndim) -> list[int]:
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = [normalize_axis(int(x), ndim) for x in axes]
    if len(set(out)) != len(out):
        raise ShapeError("repeated axis")
    return out


@implements(np.expand_dims)
def expand_dims(a, axis):
    t = aval(a)
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out_ndim = t.ndim + len(axes)
    axes = set(normalize_axes(axes, out_ndim))
    dims = iter(t.shape)
    return reshape(a, tuple(1 if i in axes else next(dims) for i in range(out_ndim)))


@implements(np.squeeze)
def squeeze(a, axis=None):
    t = aval(a)
    if axis is None:
        axes = {i for i, d in enumerate(t.shape) if d == 1}
    elif _legacy_0d_axis(t, axis):
        return a
    else:
        axes = set(normalize_axes(axis, t.ndim))
        if builtins.any(t.shape[i] != 1 for i in axes):
            raise ShapeError("cannot select an axis to squeeze out which has size not equal to one")
    return reshape(a, tuple(d for i, d in enumerate(t.shape) if i not in axes))


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    t = aval(array)
    if shape == t.shape and isinstance(array, Tracer) and not t.weak:
        view = Tracer(array._value, array._trace)  # still a read-only view, as NumPy's
        view._view_of(array, "reshape", {"shape": shape})
        view._readonly = True
        return view
    return bind("broadcast_to", _as_strong_operand(array), shape=shape)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    shape = tuple(np.broadcast_shapes(*(aval(a).shape for a in args)))
    return tuple(broadcast_to(a, shape) for a in args)


@implements(np.atleast_1d)
def atleast_1d(*arys):
    res = [reshape(a, (1,)) if aval(a).ndim == 0 else a for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


@implements(np.atleast_2d)
def atleast_2d(*arys):
    res = []
    for a in arys:
        s = aval(a).shape
        res.append(reshape(a, (1, 1) if not s else (1,) + s) if len(s) < 2 else a)
    return res[0] if len(res) == 1 else tuple(res)


@implements(np.concatenate)
@_writes_out("same_kind")
def concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [_as_strong_operand(a) for a in arrays]
    if not arrays:
        raise ShapeError("need at least one array to concatenate")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    first = aval(arrays[0])
    if first.ndim == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(int(axis), first.ndim)
    if dtype is not None:
        arrays = [astype(a, dtype, casting=casting) for a in arrays]
    return _strong(bind("concatenate", *arrays, axis=axis))


@implements(np.stack)
@_writes_out("same_kind")
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [_as_strong_operand(a) for a in arrays]
    if not arrays:
        raise ShapeError("need at least one array to stack")
    shapes = {aval(a).shape for a in arrays}
    if len(shapes) != 1:
        raise ShapeError("all input arrays must have the same shape")
    axis = normalize_axis(int(axis), aval(arrays[0]).ndim + 1)
    return concatenate([expand_dims(a, axis) for a in arrays], axis, dtype=dtype, casting=casting)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [atleast_1d(_as_strong_operand(a)) for a in tup]
    return concatenate(arrs, 0 if aval(arrs[0]).ndim == 1 else 1, dtype=dtype, casting=casting)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [atleast_2d(_as_strong_operand(a)) for a in tup]
    return concatenate(arrs, 0, dtype=dtype, casting=casting)


def _take_slice(a, axis: int, start, stop):
    t = aval(a)
    return basic_index(a, t.shape, [slice(start, stop) if d == axis else slice(None)
                                    for d in range(t.ndim)])


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    t = aval(ary)
    axis = normalize_axis(int(axis), t.ndim)
    n = t.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ShapeError("number sections must be larger than 0.")
        each, extra = divmod(n, sections)
        sizes = [0] + extra * [each + 1] + (sections - extra) * [each]
        points = list(np.cumsum(sizes))
    else:
        points = [0] + [int(i) for i in indices_or_sections] + [n]
    return [_take_slice(ary, axis, points[i], points[i + 1]) for i in range(len(points) - 1)]


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    if isinstance(indices_or_sections, (int, np.integer)):
        n = aval(ary).shape[normalize_axis(int(axis), aval(ary).ndim)]
        if int(indices_or_sections) <= 0 or n % int(indices_or_sections):
            raise ShapeError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


@implements(np.flip)
def flip(m, axis=None):
    t = aval(m)
    axes = set(normalize_axes(axis, t.ndim))
    return basic_index(m, t.shape, [slice(None, None, -1) if i in axes else slice(None)
                                    for i in range(t.ndim)])


@implements(np.fliplr)
def fliplr(m):
    if aval(m).ndim < 2:
        raise ShapeError("Input must be >= 2-d.")
    return flip(m, 1)


@implements(np.flipud)
def flipud(m):
    if aval(m).ndim < 1:
        raise ShapeError("Input must be >= 1-d.")
    return flip(m, 0)


@implements(np.roll)
def roll(a, shift, axis=None):
    return fresh(_rolled(a, shift, axis), a)  # (a new array also for whole turns)


def _rolled(a, shift, axis):
    t = aval(a)
    if axis is None:
        return reshape(_rolled(ravel(a), shift, 0), t.shape)
    shifts: dict[int, int] = {}
    for s, ax in np.broadcast(shift, axis):
        ax = normalize_axis(int(ax), t.ndim)
        shifts[ax] = shifts.get(ax, 0) + int(s)
    for ax, s in shifts.items():
        n = t.shape[ax]
        if n == 0 or s % n == 0:
            continue
        k = n - s % n
        a = concatenate([_take_slice(a, ax, k, None), _take_slice(a, ax, 0, k)], ax)
    return a


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    if mode != "constant":
        raise _unsupported("pad", f"(mode={mode!r}); only mode='constant' is supported")
    values = kwargs.pop("constant_values", 0)
    if kwargs:
        raise _unsupported("pad", f"(..., {', '.join(kwargs)}=...)")
    if isinstance(values, Tracer):
        raise _unsupported("pad", " with traced constant_values")
    t = aval(array)
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise DTypeError("`pad_width` must be of integral type.")
    if (widths < 0).any():
        raise ShapeError("index can't contain negative values")
    widths = np.broadcast_to(widths, (t.ndim, 2))
    array = _as_strong_operand(array)
    if np.ndim(values) == 0:
        value = values.item() if isinstance(values, np.generic) else values
        return bind("pad", array, widths=tuple(tuple(int(v) for v in row) for row in widths),
                    value=value)
    # Per-axis (before, after) values: pad one axis side at a time, in axis order, so the
    # corners take the last axis's value as in NumPy.
    values = np.broadcast_to(np.asarray(values), (t.ndim, 2))
    for ax in range(t.ndim):
        for side in (0, 1):
            w = [(0, 0)] * t.ndim
            w[ax] = (int(widths[ax, 0]), 0) if side == 0 else (0, int(widths[ax, 1]))
            if w[ax] != (0, 0):
                array = bind("pad", array, widths=tuple(w), value=values[ax, side].item())
    return array


@implements(np.tile)
def tile(A, reps):
    A = _as_strong_operand(A)
    reps = tuple(int(r) for r in reps) if np.ndim(reps) else (int(reps),)
    t = aval(A)
    shape = (1,) * (len(reps) - t.ndim) + t.shape
    reps = (1,) * (len(shape) - len(reps)) + reps
    A = reshape(A, shape)
    spread = tuple(x for s in shape for x in (1, s))
    wide = tuple(x for r, s in zip(reps, shape, strict=True) for x in (r, s))
    out = reshape(broadcast_to(reshape(A, spread), wide), tuple(r * s for r, s in
                                                                  zip(reps, shape, strict=True)))
    return fresh(out, A)  # (all reps 1: views of A)


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    if isinstance(repeats, Tracer):
        raise ConcretizationError("np.repeat with traced repeats has a data-dependent shape",
                                  hint="pass repeats as a static value")
    original = a = _as_strong_operand(a)
    if axis is None:
        a, axis = ravel(a), 0
    t = aval(a)
    axis = normalize_axis(int(axis), t.ndim)
    n = t.shape[axis]
    if np.ndim(repeats) == 0:
        r = int(repeats)
        if r < 0:
            raise ShapeError("negative dimensions are not allowed")
        expanded = reshape(a, t.shape[:axis + 1] + (1,) + t.shape[axis + 1:])
        wide = broadcast_to(expanded, t.shape[:axis + 1] + (r,) + t.shape[axis + 1:])
        return fresh(reshape(wide, t.shape[:axis] + (n * r,) + t.shape[axis + 1:]),
                     original)  # (one repetition: views of a)
    index = np.repeat(np.arange(n), repeats)  # static: raises NumPy's own errors
    return bind("gather", a, index, axis=axis)


def _tri_mask(shape, k):
    return np.tri(*shape[-2:], k=k, dtype=bool)


@implements(np.tril)
def tril(m, k=0):
    m = _as_strong_operand(m)
    t = aval(m)
    return bind("where", _tri_mask(t.shape, k), m, np.zeros(1, t.dtype))


@implements(np.triu)
def triu(m, k=0):
    m = _as_strong_operand(m)
    t = aval(m)
    return bind("where", _tri_mask(t.shape, k - 1), np.zeros(1, t.dtype), m)


def _like(a, dtype, shape, value, order="K"):
    """A new array like ``a``, laid out in ``order``: ``"K"`` (the default) and ``"A"``
    follow ``a``'s layout where the shape is ``a``'s (``np.empty_like`` of Fortran data is
    Fortran-ordered), as NumPy's do."""
    t = aval(a)
    shape = t.shape if shape is None else ((shape,) if np.ndim(shape) == 0 else tuple(shape))
    dtype = t.dtype if dtype is None else np.dtype(dtype)
    if isinstance(value, Tracer) or np.ndim(value) != 0:  # a new array: writeable
        out = broadcast_to(astype(_as_strong_operand(value), dtype), shape).copy()
    else:
        value = value.item() if isinstance(value, np.generic) else value
        out = bind("full", shape=tuple(int(d) for d in shape), dtype=dtype, value=value)
    if len(shape) == t.ndim:
        like = a._layout() if isinstance(a, Tracer) else \
            (np.shape(a), in_elements(np.asarray(a).strides, max(t.dtype.itemsize, 1)))
        out._strides = ordered(order, out.shape, like)
    elif order in ("F", "f"):
        out._strides = ordered(order, out.shape)
    return out


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, dtype, shape, 0, order)


@implements(np.empty_like)
def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(prototype, dtype, shape, 0, order)


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, dtype, shape, 1, order)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, dtype, shape, fill_value, order)


@implements(np.copy)
def copy(a, order="K", subok=False):
    return a.copy(order) if isinstance(a, Tracer) else a  # a copy of an argument is no argument


@implements(np.shape)
def shape(a):
    return aval(a).shape


@implements(np.ndim)
def ndim(a):
    return aval(a).ndim


@implements(np.size)
def size(a, axis=None):
    t = aval(a)
    return t.size if axis is None else t.shape[normalize_axis(axis, t.ndim)]


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    types = [aval(x) if not isinstance(x, (np.dtype, type, str)) else
             TensorType((), np.dtype(x)) for x in arrays_and_dtypes]
    return promote(*types)


# ---------------------------------------------------------------- elementwise helpers


@implements(np.where)
def where(condition, x=_NO, y=_NO, /):
    if x is _NO and y is _NO:
        raise UnsupportedOperation(
            "np.where(condition) with one argument returns indices whose number depends on "
            "the data, which a traced function cannot have",
            hint="use the three-argument form np.where(condition, x, y)",
        )
    if x is _NO or y is _NO:
        raise ShapeError("either both or neither of x and y should be given")
    if aval(condition).dtype != np.bool_:
        condition = astype(condition, np.bool_)
    return bind("where", condition, x, y)


@implements(np.clip)
@_writes_out("same_kind")
def clip(a, a_min=_NO, a_max=_NO, out=None, *, min=_NO, max=_NO):
    lo = a_min if min is _NO else min
    hi = a_max if max is _NO else max
    lo = None if lo is _NO else lo
    hi = None if hi is _NO else hi
    dtype = aval(a).dtype
    if dtype.kind in "iu":  # as NumPy: Python-int bounds beyond the dtype's range are no bound
        if type(lo) is int and lo <= np.iinfo(dtype).min:
            lo = None
        if type(hi) is int and hi >= np.iinfo(dtype).max:
            hi = None
        lo, hi = _int_bound(lo, dtype), _int_bound(hi, dtype)
    if lo is None and hi is None:
        return _strong(bind("positive", a))  # what NumPy computes (so bool is rejected)
    if lo is None:
        return _strong(bind("minimum", a, hi))
    if hi is None:
        return _strong(bind("maximum", a, lo))
    return _strong(bind("clip", a, lo, hi))


def _int_bound(bound, dtype: np.dtype):
    """A clip bound that is a traced Python int (an argument), for an array of integer
    ``dtype``: NumPy drops such a bound where it lies beyond the dtype's range on its own
    side (``np.clip(int8_x, 5, 300)`` clips below only), which its value, known at run
    time, decides; so it is clamped into the dtype's range, where clipping at the end of
    the range changes nothing, and converted to ``dtype``. (A bound beyond the other end,
    ``hi=-300``, which NumPy refuses with OverflowError, clamps too.)"""
    if not isinstance(bound, Tracer) or not bound.aval.weak or bound.dtype.kind not in "iu":
        return bound
    info, wide = np.iinfo(dtype), np.iinfo(bound.dtype)
    if info.min > wide.min:
        bound = bind("maximum", bound, int(info.min))
    if info.max < wide.max:
        bound = bind("minimum", bound, int(info.max))
    return bind("convert", bound, dtype=dtype)


@implements(np.around, np.round)
@_writes_out("unsafe")
def around(a, decimals=0, out=None):
    t = aval(a)
    decimals = int(decimals)
    if t.dtype.kind == "c":  # NumPy rounds each part
        parts = (around(bind(part, a), decimals) for part in ("real", "imag"))
        return bind("complex", *parts)
    if t.dtype.kind in "iu":
        if decimals >= 0:  # NumPy's np.round(int8(3)) is an int8 scalar, in new memory
            return _scalar_result(fresh(_strong(a), a))
        f = 10 ** -decimals
        r = bind("multiply", bind("rint", bind("true_divide", a, f)), f)
        return astype(r, t.dtype)
    if decimals == 0:
        return _strong(bind("rint", a))
    first, second = ("multiply", "true_divide") if decimals > 0 else ("true_divide", "multiply")
    f = 10.0 ** abs(decimals)
    return _strong(bind(second, bind("rint", bind(first, a, f)), f))


# ---------------------------------------------------------------- indexing
# The slicing and gathering steps of ``x[key]`` live here, below ``indexing.getitem``
# (which parses the key), so that flip, split and take use them without a cycle.


def is_int(k) -> bool:
    """An integer index (a bool is not one: it is a mask)."""
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def slice_attrs(shape, key) -> dict:
    starts, stops, steps = [], [], []
    for d, k in zip(shape, key, strict=True):
        if is_int(k):
            i = int(k)
            if not -d <= i < d:
                raise IndexOutOfBounds(f"index {i} is out of bounds for axis "
                                       f"{len(starts)} with size {d}")
            i %= d
            start, stop, step = i, i + 1, 1
        else:
            if k.step == 0:
                raise ShapeError("slice step cannot be zero")
            start, stop, step = k.indices(d)
            n = slice_length(start, stop, step)
            start, stop = (start, start + step * n) if n else (0, 0)
            step = step if n else 1
        starts.append(start)
        stops.append(stop)
        steps.append(step)
    return {"starts": tuple(starts), "stops": tuple(stops), "steps": tuple(steps)}


def basic_index(x, shape, key):
    """``x[key]`` for a key of one integer or slice per axis of ``shape``."""
    attrs = slice_attrs(shape, key)
    full = builtins.all(a == 0 and b == d and s == 1 for a, b, s, d in
               zip(attrs["starts"], attrs["stops"], attrs["steps"], shape, strict=True))
    if not full:
        x = bind("slice", x, **attrs)
    if builtins.any(is_int(k) for k in key):
        x = reshape(x, tuple(d for d, k in zip(aval(x).shape, key, strict=True) if not is_int(k)))
    return x


def gather(x, indices, axis: int):
    """``x[:, ..., *indices]`` starting at ``axis``; constant indices are bounds-checked now."""
    t = aval(x)
    for j, idx in enumerate(indices):
        if isinstance(idx, Tracer):
            if idx.dtype.kind not in "iu":
                raise DTypeError("arrays used as indices must be of integer (or boolean) type")
            continue
        idx = np.asarray(idx)
        if idx.dtype.kind not in "iu":
            raise IndexOutOfBounds("arrays used as indices must be of integer (or boolean) type")
        n = t.shape[axis + j] if axis + j < t.ndim else 0
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexOutOfBounds(f"index {idx[bad].flat[0]} is out of bounds for axis "
                                   f"{axis + j} with size {n}")
    return bind("gather", x, *indices, axis=axis)


@implements(np.take)
@_writes_out("unsafe")
def take(a, indices, axis=None, out=None, mode="raise"):
    a = _as_strong_operand(a)
    if axis is None or _legacy_0d_axis(aval(a), axis):  # NumPy takes from a 0-d as 1-element
        a, axis = ravel(a), 0
    t = aval(a)
    axis = normalize_axis(int(axis), t.ndim)
    n = t.shape[axis]
    if mode in ("wrap", "clip"):
        if n == 0:
            raise ShapeError("cannot do a non-empty take from an empty axes.")
        indices = bind("remainder", indices, n) if mode == "wrap" else \
            bind("minimum", bind("maximum", indices, 0), n - 1)
    elif mode != "raise":
        raise ShapeError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    out_shape = t.shape[:axis] + aval(indices).shape + t.shape[axis + 1:]
    if math.prod(t.shape[:axis]) == 0 or aval(indices).size == 0:
        # NumPy's take checks indices once per leading position: with none, none is checked
        return bind("full", shape=out_shape, dtype=t.dtype, value=0)
    if aval(indices).ndim == 0:  # as a 1-element index: a gather at a 0-d one is x[..., i],
        one = reshape(indices, (1,)) if isinstance(indices, Tracer) else \
            np.reshape(indices, (1,))  # which the backends may return as a view of x
        return reshape(gather(a, [one], axis), out_shape)
    return gather(a, [indices], axis)


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    ti = aval(indices)
    if ti.dtype.kind not in "iu":
        raise DTypeError("`indices` must be an integer array")
    if axis is None:
        if ti.ndim != 1:
            raise ShapeError("when axis=None, `indices` must have a single dimension.")
        arr, axis = ravel(arr), 0
    t = aval(arr)
    if ti.ndim != t.ndim:
        raise ShapeError("`indices` and `arr` must have the same number of dimensions")
    axis = normalize_axis(int(axis), t.ndim)
    index = []
    for d in range(t.ndim):
        if d == axis:
            index.append(indices)
        else:
            shape = [1] * t.ndim
            shape[d] = t.shape[d]
            index.append(np.arange(t.shape[d]).reshape(shape))
    return gather(arr, index, 0)

