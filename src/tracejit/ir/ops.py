"""Definitions of every IR op: rules and NumPy reference implementations.

Elementwise ops are NumPy ufuncs and share one rule (broadcasting + NEP 50 dtype
resolution through ``ufunc.resolve_dtypes``). The other ops carry their own rule. NumPy
functions that are compositions (``mean``, ``tensordot``, ``roll``, ...) are not ops: the
tracer builds them from these (see ``trace/numpy_api.py``).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import AxisError, DTypeError, IndexOutOfBounds, ShapeError
from ..targets import to_device
from .registry import Exactness, Grad, Kind, Monoid, register
from .types import TensorType, short_dtype, type_of_constant

# ---------------------------------------------------------------- shared rule pieces


def _shapes(types) -> str:
    return " ".join(str(t.shape).replace(" ", "") for t in types)


def broadcast_shapes(*types: TensorType) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(t.shape for t in types)))
    except ValueError:
        raise ShapeError(
            f"operands could not be broadcast together with shapes {_shapes(types)}",
            hint="check the shapes; insert axes with x[:, None] or np.expand_dims to broadcast",
        ) from None


def promote(*types: TensorType) -> np.dtype:
    """``np.result_type`` with NEP 50 weak Python scalars (as ``np.where`` promotes)."""
    probes = [{"i": 0, "f": 0.0, "c": 0j}[t.dtype.kind] if t.weak else t.dtype for t in types]
    return np.result_type(*probes)


def _weak_result(types, dtype: np.dtype) -> bool:
    return all(t.weak for t in types) and dtype.kind in "ifc"


def ufunc_rule(ufunc: np.ufunc):
    def rule(*types: TensorType) -> TensorType:
        all_weak = all(t.weak for t in types)
        operands = tuple(t.dtype if all_weak else t.promotion_operand() for t in types)
        try:
            dtype = ufunc.resolve_dtypes(operands + (None,))[-1]
        except TypeError as e:
            names = ", ".join(short_dtype(t.dtype) for t in types)
            raise DTypeError(
                f"numpy.{ufunc.__name__} has no loop for inputs ({names}): {e}",
                hint="convert the operands with .astype(...) to a dtype this function accepts",
            ) from None
        # NumPy resolves the loop before broadcasting: a dtype error wins over a shape error
        return TensorType(broadcast_shapes(*types), dtype, _weak_result(types, dtype))

    return rule


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """``None`` -> all axes; int or sequence -> sorted non-negative tuple (duplicates rejected)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(normalize_axis(int(a), ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError("repeated axis")
    return tuple(sorted(out))


# ---------------------------------------------------------------- elementwise

UNARY = (
    "negative positive absolute sign exp exp2 expm1 log log2 log10 log1p sqrt cbrt square "
    "reciprocal sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh "
    "floor ceil trunc rint logical_not invert isnan isinf isfinite"
).split()
BINARY = (
    "add subtract multiply true_divide floor_divide remainder power arctan2 maximum minimum "
    "fmax fmin hypot logaddexp logaddexp2 equal not_equal less less_equal greater greater_equal "
    "logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift "
    "right_shift"
).split()

# Float math a compiled backend computes with its own routines, within ULP_BOUND of NumPy
# (sqrt is correctly rounded everywhere: exact).
TRANSCENDENTAL = frozenset(
    "exp exp2 expm1 log log2 log10 log1p cbrt sin cos tan arcsin arccos arctan sinh cosh tanh "
    "arcsinh arccosh arctanh power arctan2 hypot logaddexp logaddexp2".split()
)
# Bool or integer results: no cotangent.
_NO_GRAD = frozenset(
    "equal not_equal less less_equal greater greater_equal logical_and logical_or "
    "logical_xor logical_not bitwise_and bitwise_or bitwise_xor invert left_shift right_shift "
    "isnan isinf isfinite".split()
)
# Piecewise-constant float results: the gradient is zero.
_ZERO_GRAD = frozenset("floor ceil trunc rint sign floor_divide".split())


def _grad(name: str) -> Grad:
    return Grad.NONE if name in _NO_GRAD else Grad.ZERO if name in _ZERO_GRAD else Grad.RULE


for _name in UNARY + BINARY:
    _uf = getattr(np, _name)
    register(_name, Kind.ELEMENTWISE, ufunc_rule(_uf), _uf, f"numpy.{_name}", ufunc=_uf,
             exactness=Exactness.ULP if _name in TRANSCENDENTAL else Exactness.EXACT,
             grad=_grad(_name))


# More NumPy ufuncs: float ones (fabs, angle conversions, sign bit and spacing, heaviside,
# copysign, float_power, nextafter, ldexp), fmod, the integer gcd/lcm/bitwise_count and
# conjugate (the identity on real values). Only the first output of none: frexp and modf
# have two (modf is composed at trace level).
MORE_UNARY = "fabs degrees radians deg2rad rad2deg signbit spacing conjugate bitwise_count".split()
MORE_BINARY = "heaviside copysign float_power fmod gcd lcm ldexp nextafter".split()
_MORE_NO_GRAD = frozenset("signbit gcd lcm bitwise_count".split())
_MORE_ZERO_GRAD = frozenset({"spacing"})

for _name in MORE_UNARY + MORE_BINARY:
    _uf = getattr(np, _name)
    register(_name, Kind.ELEMENTWISE, ufunc_rule(_uf), _uf, f"numpy.{_name}", ufunc=_uf,
             exactness=Exactness.ULP if _name == "float_power" else Exactness.EXACT,
             grad=Grad.NONE if _name in _MORE_NO_GRAD else
             Grad.ZERO if _name in _MORE_ZERO_GRAD else Grad.RULE)


# np.clip(a, lo, hi) with both bounds is this 3-input ufunc: one dtype resolution for all three
# operands (so it is not maximum-then-minimum), and NumPy's own signed-zero behaviour.
_CLIP = np._core.umath.clip
register("clip", Kind.ELEMENTWISE, ufunc_rule(_CLIP), _CLIP, "numpy.clip(a, lo, hi)", ufunc=_CLIP)


def clip_bounds_constant(out: TensorType, a: TensorType, lo: TensorType,
                         hi: TensorType) -> bool:
    """Whether NumPy computes this clip in its loop for constant bounds.

    NumPy's float loop has two paths. Bounds read with stride 0 (one value for the whole
    inner loop) return a NaN bound itself (``lo``'s first) and keep ``a`` on a tie with a
    bound (``clip(-0.0, 0.0, 1.0)`` is -0.0). Other bounds give ``minimum(maximum(a, lo),
    hi)``: the first NaN of ``a``, ``lo``, ``hi``, and the bound on a tie (0.0). Bounds of
    one element against a larger result always take the first path (measured: every shape,
    order, dtype and cast). A one-element result takes whichever its iterator's strides
    give, so this asks NumPy, on one-element values of these types. Bounds broadcast along
    only some axes take the first path only in large loops (NumPy's buffering decides),
    which a kernel compiled for every batch size cannot know: those take the second."""
    if lo.size != 1 or hi.size != 1 or "f" not in a.dtype.kind + lo.dtype.kind + hi.dtype.kind:
        return False  # (both paths compute the same integers)
    if out.size != 1:
        return True
    # zeros where the paths differ in sign: the first keeps ``a``'s, the second the bound's
    if a.dtype.kind == "f":
        a0, lo0, hi0, flip = -0.0, 0.0, 1.0, True
    elif lo.dtype.kind == "f":
        a0, lo0, hi0, flip = 0.0, -0.0, 1.0, False
    else:
        a0, lo0, hi0, flip = 0.0, 0.0, -0.0, False
    probe = _CLIP(_probe(a, a0), _probe(lo, lo0), _probe(hi, hi0))
    return bool(np.signbit(probe).all()) == flip


def _probe(t: TensorType, value: float) -> object:
    """A value of type ``t`` holding ``value`` as the interpreter passes it: a weak scalar as
    a Python scalar, anything else as an array (NumPy's path depends on both)."""
    if t.weak and t.ndim == 0:
        return float(value) if t.dtype.kind == "f" else int(value)
    return np.full(t.shape, value, t.dtype)


def _where_rule(cond: TensorType, a: TensorType, b: TensorType) -> TensorType:
    if cond.dtype != np.bool_:
        raise DTypeError(f"where: condition must be bool, got {cond.dtype}")
    return TensorType(broadcast_shapes(cond, a, b), promote(a, b))


register("where", Kind.ELEMENTWISE, _where_rule, np.where, "numpy.where(cond, a, b)")


def _convert_rule(x: TensorType, *, dtype: np.dtype) -> TensorType:
    return TensorType(x.shape, np.dtype(dtype))


def _convert(x, *, dtype):
    return np.asarray(x).astype(dtype)


register("convert", Kind.ELEMENTWISE, _convert_rule, _convert, "ndarray.astype (unsafe cast)")


def _part_rule(x: TensorType) -> TensorType:
    if x.dtype.kind != "c":
        raise DTypeError(f"real/imag ops take complex values, got {x.dtype} (the tracer "
                         "returns a real value or zeros itself)")
    return TensorType(x.shape, np.dtype(f"f{x.dtype.itemsize // 2}"), x.weak)


# The parts of a complex value: NumPy returns views of its memory, and so do these.
register("real", Kind.ELEMENTWISE, _part_rule, np.real, "numpy.real of a complex array")
register("imag", Kind.ELEMENTWISE, _part_rule, np.imag, "numpy.imag of a complex array")


def _complex_rule(re: TensorType, im: TensorType) -> TensorType:
    if re.dtype != im.dtype or re.dtype not in (np.float32, np.float64):
        raise DTypeError(f"complex: parts of dtypes {re.dtype} and {im.dtype} (the tracer "
                         "gives both parts one float dtype)")
    return TensorType(broadcast_shapes(re, im), np.result_type(re.dtype, np.complex64))


def _complex(re, im):
    """The parts stored as they are: ``re + 1j * im`` would turn a -0.0 real part into 0.0
    and an infinite imaginary part into a NaN real one."""
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im
    return out


# A complex value from its parts (NumPy rounds a complex array part by part, for one).
register("complex", Kind.ELEMENTWISE, _complex_rule, _complex,
         "a complex array from its real and imaginary parts, each stored as it is")

# ---------------------------------------------------------------- reductions


def _reduced_shape(x: TensorType, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _check_axes(x: TensorType, axis) -> tuple[int, ...]:
    axes = tuple(axis)
    if any(not 0 <= a < x.ndim for a in axes) or list(axes) != sorted(set(axes)):
        raise AxisError(f"invalid reduction axes {axes} for {x.ndim}-d array")
    return axes


def _sum_dtype(d: np.dtype) -> np.dtype:
    if d.kind == "b" or (d.kind == "i" and d.itemsize < 8):
        return np.dtype(np.int64)
    if d.kind == "u" and d.itemsize < 8:
        return np.dtype(np.uint64)
    return d


def _accumulating_rule(x: TensorType, *, axis, keepdims, dtype) -> TensorType:
    axes = _check_axes(x, axis)
    out = _sum_dtype(x.dtype) if dtype is None else np.dtype(dtype)
    return TensorType(_reduced_shape(x, axes, keepdims), out)


def _extremum_rule(name):
    def rule(x: TensorType, *, axis, keepdims) -> TensorType:
        axes = _check_axes(x, axis)
        if any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"zero-size array to reduction operation {name} which has no identity")
        return TensorType(_reduced_shape(x, axes, keepdims), x.dtype)

    return rule


def _logical_rule(x: TensorType, *, axis, keepdims) -> TensorType:
    return TensorType(_reduced_shape(x, _check_axes(x, axis), keepdims), np.dtype(np.bool_))


def _arg_rule(x: TensorType, *, axis, keepdims) -> TensorType:
    axes = tuple(range(x.ndim)) if axis is None else _check_axes(x, (axis,))
    if any(x.shape[a] == 0 for a in axes):
        raise ShapeError("attempt to get argmax/argmin of an empty sequence")
    if axis is None:
        shape = (1,) * x.ndim if keepdims else ()
    else:
        shape = _reduced_shape(x, axes, keepdims)
    return TensorType(shape, np.dtype(np.int64))


def _np_reduction(fn, with_dtype):
    if with_dtype:
        return lambda x, *, axis, keepdims, dtype: fn(x, axis=axis, keepdims=keepdims, dtype=dtype)
    return lambda x, *, axis, keepdims: fn(x, axis=axis, keepdims=keepdims)


def _lowest(dtype: np.dtype):
    """The identity of ``max``: below every value of ``dtype``."""
    if dtype.kind == "f":
        return -np.inf
    return np.iinfo(dtype).min if dtype.kind in "iu" else False


def _highest(dtype: np.dtype):
    """The identity of ``min``: above every value of ``dtype``."""
    if dtype.kind == "f":
        return np.inf
    return np.iinfo(dtype).max if dtype.kind in "iu" else True


register("sum", Kind.REDUCTION, _accumulating_rule, _np_reduction(np.sum, True), "numpy.sum",
         monoid=Monoid("add", lambda dtype: 0), exactness=Exactness.ORDER)
register("prod", Kind.REDUCTION, _accumulating_rule, _np_reduction(np.prod, True), "numpy.prod",
         monoid=Monoid("multiply", lambda dtype: 1), exactness=Exactness.ORDER)
register("max", Kind.REDUCTION, _extremum_rule("maximum"), _np_reduction(np.max, False),
         "numpy.max (NaN propagates)", monoid=Monoid("maximum", _lowest))
register("min", Kind.REDUCTION, _extremum_rule("minimum"), _np_reduction(np.min, False),
         "numpy.min (NaN propagates)", monoid=Monoid("minimum", _highest))
register("any", Kind.REDUCTION, _logical_rule, _np_reduction(np.any, False), "numpy.any",
         monoid=Monoid("logical_or", lambda dtype: False), grad=Grad.NONE)
register("all", Kind.REDUCTION, _logical_rule, _np_reduction(np.all, False), "numpy.all",
         monoid=Monoid("logical_and", lambda dtype: True), grad=Grad.NONE)
register("argmax", Kind.REDUCTION, _arg_rule, _np_reduction(np.argmax, False),
         "numpy.argmax (first occurrence; axis is None or one int)", grad=Grad.NONE)
register("argmin", Kind.REDUCTION, _arg_rule, _np_reduction(np.argmin, False),
         "numpy.argmin (first occurrence; axis is None or one int)", grad=Grad.NONE)

# ---------------------------------------------------------------- contraction


def _matmul_rule(a: TensorType, b: TensorType) -> TensorType:
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError("matmul op takes operands of at least 2 dimensions")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            "matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n?,k),(k,m?)->(n?,m?) (size {b.shape[-2]} is different from "
            f"{a.shape[-1]})",
            hint=f"the contracted dimensions differ: {a.shape} @ {b.shape}",
        )
    batch = broadcast_shapes(TensorType(a.shape[:-2], a.dtype), TensorType(b.shape[:-2], b.dtype))
    try:
        dtype = np.matmul.resolve_dtypes((a.dtype, b.dtype, None))[-1]
    except TypeError as e:
        raise DTypeError(f"matmul: {e}") from None
    return TensorType(batch + (a.shape[-2], b.shape[-1]), dtype)


register("matmul", Kind.CONTRACTION, _matmul_rule, np.matmul,
         "numpy.matmul on operands of >= 2 dims (batched, broadcasting batch dims)",
         exactness=Exactness.ORDER)

# ---------------------------------------------------------------- structural


def _reshape_rule(x: TensorType, *, shape: tuple[int, ...]) -> TensorType:
    if math.prod(shape) != x.size or any(d < 0 for d in shape):
        raise ShapeError(f"cannot reshape array of size {x.size} into shape {tuple(shape)}")
    return TensorType(tuple(shape), x.dtype, x.weak and not shape)


def _transpose_rule(x: TensorType, *, perm: tuple[int, ...]) -> TensorType:
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError("axes don't match array")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


def _broadcast_to_rule(x: TensorType, *, shape: tuple[int, ...]) -> TensorType:
    shape = tuple(shape)
    ok = len(shape) >= x.ndim and all(
        d in (1, s) for d, s in zip(x.shape[::-1], shape[::-1], strict=False)
    )
    if not ok or any(d < 0 for d in shape):
        raise ShapeError(f"cannot broadcast an array of shape {x.shape} to shape {shape}")
    return TensorType(shape, x.dtype)


def slice_length(start: int, stop: int, step: int) -> int:
    return max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))


def _slice_rule(x: TensorType, *, starts, stops, steps) -> TensorType:
    if not len(starts) == len(stops) == len(steps) == x.ndim:
        raise ShapeError("slice: one (start, stop, step) per dimension expected")
    shape = []
    for d, (a, b, s) in enumerate(zip(starts, stops, steps, strict=True)):
        n = slice_length(a, b, s)
        if s == 0 or (n and not (0 <= a < x.shape[d] and 0 <= a + s * (n - 1) < x.shape[d])):
            raise ShapeError(f"slice ({a}, {b}, {s}) out of range for a dimension of size "
                             f"{x.shape[d]}")
        shape.append(n)
    return TensorType(tuple(shape), x.dtype)


def slice_key(starts, stops, steps) -> tuple[slice, ...]:
    """The Python slices a ``slice`` node's normalised attributes stand for."""
    return tuple(
        slice(a, b if b >= 0 else None, s) if slice_length(a, b, s) else slice(0, 0)
        for a, b, s in zip(starts, stops, steps, strict=True)
    )


def _slice(x, *, starts, stops, steps):
    return np.asarray(x)[slice_key(starts, stops, steps)]


def _concatenate_rule(*xs: TensorType, axis: int) -> TensorType:
    first = xs[0]
    if first.ndim == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    for i, x in enumerate(xs[1:], start=1):
        if x.ndim != first.ndim:
            raise ShapeError(
                "all the input array dimensions except for the concatenation axis must match "
                f"exactly: the array at index 0 has {first.ndim} dimension(s) and the array at "
                f"index {i} has {x.ndim} dimension(s)"
            )
        for d in range(first.ndim):
            if d != axis and x.shape[d] != first.shape[d]:
                raise ShapeError(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {d}, the array at index 0 has size "
                    f"{first.shape[d]} and the array at index {i} has size {x.shape[d]}"
                )
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return TensorType(tuple(shape), promote(*xs))


def _pad_rule(x: TensorType, *, widths, value) -> TensorType:
    if len(widths) != x.ndim or any(a < 0 or b < 0 for a, b in widths):
        raise ShapeError(f"pad: widths {widths} invalid for a {x.ndim}-d array")
    return TensorType(tuple(d + a + b for d, (a, b) in zip(x.shape, widths, strict=True)), x.dtype)


register("reshape", Kind.STRUCTURAL, _reshape_rule, lambda x, *, shape: np.reshape(x, shape),
         "numpy.reshape (C order)")
register("transpose", Kind.STRUCTURAL, _transpose_rule,
         lambda x, *, perm: np.transpose(x, perm), "numpy.transpose with an explicit permutation")
register("broadcast_to", Kind.STRUCTURAL, _broadcast_to_rule,
         lambda x, *, shape: np.broadcast_to(x, shape), "numpy.broadcast_to")
register("slice", Kind.STRUCTURAL, _slice_rule, _slice,
         "basic slicing x[a:b:s, ...], one (start, stop, step) per dim, normalised")
register("concatenate", Kind.STRUCTURAL, _concatenate_rule,
         lambda *xs, axis: np.concatenate(xs, axis=axis), "numpy.concatenate")
register("pad", Kind.STRUCTURAL, _pad_rule,
         lambda x, *, widths, value: np.pad(x, widths, constant_values=value),
         "numpy.pad(mode='constant')")

# ---------------------------------------------------------------- indexing


def _gather_rule(x: TensorType, *idx: TensorType, axis: int) -> TensorType:
    if not idx or axis < 0 or axis + len(idx) > x.ndim:
        raise IndexOutOfBounds(
            f"too many indices for array: array is {x.ndim}-dimensional, "
            f"but {axis + len(idx)} were indexed"
        )
    for i in idx:
        if i.dtype.kind not in "iu":
            raise IndexOutOfBounds("arrays used as indices must be of integer (or boolean) type")
    batch = broadcast_shapes(*idx)
    for d in range(axis, axis + len(idx)):
        if x.shape[d] == 0 and math.prod(batch) > 0:
            raise IndexOutOfBounds(f"index is out of bounds for axis {d} with size 0")
    return TensorType(x.shape[:axis] + batch + x.shape[axis + len(idx):], x.dtype)


def _gather(x, *idx, axis):
    # (a 0-d index array is an advanced index: a copy, never a view of x)
    return np.asarray(x)[(slice(None),) * axis + tuple(np.asarray(i) for i in idx)]


register("gather", Kind.INDEXING, _gather_rule, _gather,
         "x[:, ..., i0, i1, ...] with integer arrays starting at `axis` (NumPy fancy indexing; "
         "negative indices wrap, out-of-range raises IndexError)")


def _scatter_add_rule(x: TensorType, updates: TensorType, *idx: TensorType,
                      axis: int) -> TensorType:
    target = _gather_rule(x, *idx, axis=axis)
    if updates.shape != target.shape:
        raise ShapeError(f"scatter_add: updates of shape {updates.shape} for an indexed "
                         f"region of shape {target.shape}")
    if updates.dtype != x.dtype:
        raise DTypeError(f"scatter_add: updates of dtype {updates.dtype} into {x.dtype}")
    return TensorType(x.shape, x.dtype)


def _scatter_add(x, updates, *idx, axis):
    out = np.array(x, copy=True)
    np.add.at(out, (slice(None),) * axis + idx, updates)
    return out


# The transpose of gather (its gradient): repeated indices accumulate, as np.add.at does.
register("scatter_add", Kind.INDEXING, _scatter_add_rule, _scatter_add,
         "a copy of x with np.add.at(out, (:, ..., i0, i1, ...), updates) starting at `axis`",
         exactness=Exactness.ORDER)


# ---------------------------------------------------------------- functional updates
# In-place writes (x[key] = v, x += y, out=) are traced as these: a new version of the
# array, so the graph stays SSA (trace/updates.py; JAX's .at[].set).


def _check_update(name: str, x: TensorType, updates: TensorType,
                  region: tuple[int, ...]) -> TensorType:
    if updates.shape != region:
        raise ShapeError(f"{name}: updates of shape {updates.shape} for a region of shape "
                         f"{region}")
    if updates.dtype != x.dtype:
        raise DTypeError(f"{name}: updates of dtype {updates.dtype} into {x.dtype}")
    return TensorType(x.shape, x.dtype)


def _update_slice_rule(x: TensorType, updates: TensorType, *, starts, stops,
                       steps) -> TensorType:
    region = _slice_rule(x, starts=starts, stops=stops, steps=steps).shape
    return _check_update("update_slice", x, updates, region)


def _update_slice(x, updates, *, starts, stops, steps):
    out = np.array(x, copy=True)
    out[slice_key(starts, stops, steps)] = updates
    return out


register("update_slice", Kind.STRUCTURAL, _update_slice_rule, _update_slice,
         "a copy of x with x[a:b:s, ...] = updates (the slice op's attributes; updates has "
         "the region's shape and x's dtype)")


def _scatter_rule(x: TensorType, updates: TensorType, *idx: TensorType,
                  axis: int) -> TensorType:
    return _check_update("scatter", x, updates, _gather_rule(x, *idx, axis=axis).shape)


def _scatter(x, updates, *idx, axis):
    out = np.array(x, copy=True)
    out[(slice(None),) * axis + idx] = updates
    return out


# Repeated indices: the last update wins, as NumPy's item assignment (the tracer drops the
# others when the indices are constants, so the gradient goes to the update that stays).
register("scatter", Kind.INDEXING, _scatter_rule, _scatter,
         "a copy of x with x[:, ..., i0, i1, ...] = updates starting at `axis` (integer "
         "arrays; negative indices wrap, out-of-range raises IndexError)")

# ---------------------------------------------------------------- creation


def _constant_rule(*, value) -> TensorType:
    return type_of_constant(value)


def _full_rule(*, shape, dtype, value) -> TensorType:
    return TensorType(tuple(shape), np.dtype(dtype))


register("constant", Kind.CREATION, _constant_rule, lambda *, value: value,
         "a literal: captured array, NumPy scalar or (weakly typed) Python scalar")
register("full", Kind.CREATION, _full_rule,
         lambda *, shape, dtype, value: np.full(shape, value, dtype=dtype),
         "numpy.full with static shape, dtype and fill value")


# ---------------------------------------------------------------- devices


def _transfer(x, *, source, device):
    return to_device(x, device)


# Inserted by the placement pass where a value is used on another device than it lives on.
register("transfer", Kind.TRANSFER, lambda x, *, source, device: x, _transfer,
         "a copy of x from device `source` to device `device` (placement inserts these)",
         grad=Grad.NONE)

# ---------------------------------------------------------------- autodiff marker

register("stop_gradient", Kind.ELEMENTWISE, lambda x: x, lambda x: x,
         "identity whose gradient is zero (tracejit.stop_gradient; simplify removes it)",
         grad=Grad.ZERO)
