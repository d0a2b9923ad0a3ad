"""Table-driven check of the NumPy surface tracejit supports.

Every case is a function of traced arguments plus concrete inputs; it runs eagerly with NumPy
and through ``tj.jit`` and the results must agree (values, dtype, shape, 0-d results as NumPy
scalars). Where NumPy raises instead (a dtype sweep reaching bitwise ops on floats, say),
tracejit must raise the same builtin class. ``ERRORS`` lists cases that must raise.

The reference backend must match bit for bit (contractions and moments aside: ``approx``). A
compiled backend may differ by its math routines' ULP bound where a case says
``rounding="math"`` and by summation order where it says ``rounding="order"``.
"""

from __future__ import annotations

import copy
import operator
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy_compare import TRANSCENDENTAL, ULP, assert_same, builtin_error, exact

import tracejit as tj
from tracejit.api import default_backend
from tracejit.ir import REGISTRY

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's empty-slice notes

DTYPES = ["bool", "int32", "int64", "float32", "float64"]
nan, inf = np.nan, np.inf

# --------------------------------------------------------------------------- inputs

_F = [[1.5, -0.0, nan, 3.0], [-inf, 2.25, 0.0, -7.5], [inf, -1.0, 0.5, 4.0]]
X = {  # (3, 4): NaN, +-inf, -0.0 for floats; negatives, zeros and extremes for ints
    "bool": np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 0]], bool),
    "int32": np.array([[3, -7, 0, 5], [-1, 2, 2**31 - 1, -4], [6, 0, -3, 1]], np.int32),
    "int64": np.array([[3, -7, 0, 5], [-1, 2, -(2**63), -4], [6, 0, -3, 1]], np.int64),
    "float32": np.array(_F, np.float32),
    "float64": np.array(_F, np.float64),
}
Y = {  # (4,): broadcasts against X
    "bool": np.array([1, 0, 0, 1], bool),
    "int32": np.array([2, -3, 0, -1], np.int32),
    "int64": np.array([2, -3, 0, -1], np.int64),
    "float32": np.array([0.5, -2.0, -0.0, inf], np.float32),
    "float64": np.array([0.5, -2.0, -0.0, inf], np.float64),
}
# Exponents: integers to negative integer powers raise in NumPy depending on the data.
EXPONENT = {**Y, "int32": np.array([0, 1, 2, 3], np.int32), "int64": np.array([3, 0, 1, 2])}
FINITE = {k: np.nan_to_num(v, nan=0.75, posinf=9.5, neginf=-9.5) for k, v in X.items()}
Z = {k: np.stack([v, v[::-1]]) for k, v in X.items()}  # (2, 3, 4)
X64, X32, I32, B = X["float64"], X["float32"], X["int32"], X["bool"]
EMPTY = np.zeros((0, 4))
ONES_DIMS = np.arange(12.0).reshape(1, 3, 1, 4)
IDX = np.array([2, 0, -1, 2])  # traced integer indices along an axis of size 3
IDX_ALONG = np.array([[0, 3], [-1, 1], [2, 2]])  # for take_along_axis on X, axis=1
MASK = X64 > 0

# Exact in any summation order: small integers and halves.
A = {k: (np.arange(12).reshape(3, 4) % 5 - 2).astype(k) for k in DTYPES}
A["float32"] = A["float32"] / 2
A["float64"] = A["float64"] / 2
BM = {k: v.T[:, :2].copy() for k, v in A.items()}  # (4, 2)
V4 = {k: v[1] for k, v in A.items()}  # (4,)
C = {k: np.stack([v, v[:, ::-1]]) for k, v in A.items()}  # (2, 3, 4)

# --------------------------------------------------------------------------- the tables

CASES: list = []
ERRORS: list = []


def calling(fn: Callable) -> Callable:
    """A Python function for ``fn`` (a ufunc, a NumPy or builtin function)."""
    return lambda *xs: fn(*xs)


def python_function(fn: Callable) -> Callable:
    return fn if isinstance(fn, types.FunctionType) else calling(fn)


def case(
    name: str,
    fn: Callable,
    *args,
    approx: bool = False,
    rounding: str | None = None,
    **jit_kwargs,
) -> None:
    """``fn(*args)`` must match NumPy; ``approx``: rounding may differ on every backend
    (contractions, moments); ``rounding``: on compiled backends only, "math" (float results
    within the math routines' ULP bound) or "order" (sums and products of floats)."""
    tol = 1.0 if approx else None
    CASES.append(
        pytest.param(python_function(fn), args, (tol, rounding), jit_kwargs, id=name)
    )


def rounding_of(name: str) -> str | None:
    """How a compiled backend may round the ufunc or operator ``name`` on floats."""
    return "math" if name in TRANSCENDENTAL or name in ("**", "pow") else None


def error(name: str, exc: type, fn: Callable, *args) -> None:
    """NumPy raises ``exc`` for ``fn(*args)``; tracejit must raise its builtin class."""
    ERRORS.append(pytest.param(exc, python_function(fn), args, id=name))


def with_scalar(fn: Callable, scalar: Any, reflected: bool = False) -> Callable:
    return (lambda x: fn(scalar, x)) if reflected else (lambda x: fn(x, scalar))


def inplace(fn: Callable) -> Callable:
    """``x op= y`` (``operator.iadd`` is what ``x += y`` runs), returning the rebound ``x``.
    On a copy, so that the argument stays the same for NumPy (test_inplace checks writes
    to arguments)."""

    def update(x, y):
        x = getattr(x, "copy", lambda: x)()
        x = fn(x, y)
        return x

    return update


def kw(fn: Callable, **kwargs) -> Callable:
    return lambda *xs: fn(*xs, **kwargs)


def meth(name: str, *args, **kwargs) -> Callable:
    return lambda x: getattr(x, name)(*args, **kwargs)


def einsum(subscripts: str) -> Callable:
    return lambda *xs: np.einsum(subscripts, *xs)


def index(key: Any) -> Callable:
    return lambda x: x[key]


# ufuncs: every dtype, broadcasting (3, 4) with (4,), mixed dtypes, Python and NumPy scalars.
# Every registry op that is a NumPy ufunc is here, so a new op is checked without a new row.
_UFUNC_OPS = [d for d in REGISTRY.values() if d.ufunc is not None and d.name != "clip"]
UNARY = sorted(d.name for d in _UFUNC_OPS if d.ufunc.nin == 1)
BINARY = sorted(d.name for d in _UFUNC_OPS if d.ufunc.nin == 2) + ["divide", "mod"]  # aliases
MIXED = [("int32", "float32"), ("int64", "float32"), ("bool", "int32"), ("int32", "int64")]
SCALARS = [
    ("int32", 2),
    ("int32", 2.5),
    ("float32", 2.5),
    ("bool", True),
    ("float32", np.float64(3)),
]

for name in UNARY:
    u, r = getattr(np, name), rounding_of(name)
    for dt in DTYPES:
        case(f"{name}-{dt}", calling(u), X[dt], rounding=r)
    case(f"{name}-0d-scalar", calling(u), np.float32(0.5), rounding=r)
    case(f"{name}-0d-array", calling(u), np.array(-3), rounding=r)
    case(f"{name}-empty", calling(u), EMPTY, rounding=r)
case("abs-alias", calling(np.abs), I32)

for name in BINARY:
    u, r = getattr(np, name), rounding_of(name)
    second = EXPONENT if name == "power" else Y
    for dt in DTYPES:
        case(f"{name}-{dt}", calling(u), X[dt], second[dt], rounding=r)
    for a, b in MIXED:
        case(f"{name}-{a}-{b}", calling(u), X[a], second[b], rounding=r)
    for dt, s in SCALARS:
        case(f"{name}-{dt}-{s!r}", with_scalar(u, s), X[dt], rounding=r)
    case(f"{name}-reflected-pyint", with_scalar(u, 3, reflected=True), X["float32"], rounding=r)
    # (3, 1) with (4,)
    case(f"{name}-column-row", calling(u), X64[:, :1], second["float64"], rounding=r)
    case(f"{name}-0d-0d", calling(u), np.float32(1.5), np.array(2, np.int64), rounding=r)

# Python operators (symbol, ``operator`` function), reflected and in-place forms.
OPERATORS = zip(
    "+ - * / // % ** & | ^ << >> == != < <= > >=".split(),
    "add sub mul truediv floordiv mod pow and_ or_ xor lshift rshift eq ne lt le gt ge".split(),
    strict=True,
)
for sym, name in OPERATORS:
    fn, r = getattr(operator, name), rounding_of(sym)
    case(f"x{sym}y-int64", fn, X["int64"], EXPONENT["int64"], rounding=r)
    case(f"x{sym}y-float32-int32", fn, X32, EXPONENT["int32"], rounding=r)
    case(f"x{sym}2-int32", with_scalar(fn, 2), I32, rounding=r)
    case(f"x{sym}0.5-float32", with_scalar(fn, 0.5), X32, rounding=r)
    case(f"3{sym}x-float64", with_scalar(fn, 3, reflected=True), X64, rounding=r)
    case(f"3{sym}x-int32", with_scalar(fn, 3, reflected=True), EXPONENT["int32"], rounding=r)
    if hasattr(operator, "i" + name.rstrip("_")):  # x op= y
        ifn = inplace(getattr(operator, "i" + name.rstrip("_")))
        case(f"x{sym}=y-int64", ifn, X["int64"], EXPONENT["int64"], rounding=r)
        case(f"x{sym}=y-float32", ifn, X32, Y["float32"], rounding=r)
        case(f"x{sym}=2-int32", ifn, I32, 2, rounding=r)
        case(f"x{sym}=True-bool", ifn, B, True, rounding=r)
for dt in DTYPES:
    case(f"-x-{dt}", operator.neg, X[dt])
    case(f"+x-{dt}", operator.pos, X[dt])
    case(f"abs(x)-{dt}", abs, X[dt])
    case(f"~x-{dt}", operator.invert, X[dt])


def chained_inplace(x, y):
    x = x.copy()
    x += 1
    x *= y
    x -= 0.5
    return x


case("inplace-chain-float32", chained_inplace, X32, Y["float32"])
case("inplace-float32-keeps-dtype", inplace(operator.imul), X32, 2.5)
case("inplace-broadcast-operand", inplace(operator.isub), Z["int64"], I32)

# NEP 50: Python scalars are weak, NumPy scalars and 0-d arrays are not.
case("nep50-int32+1", with_scalar(operator.add, 1), I32)
case("nep50-int32+2.5", with_scalar(operator.add, 2.5), I32)
case("nep50-float32*2.5", with_scalar(operator.mul, 2.5), X32)
case("nep50-float32+float64-scalar", with_scalar(operator.add, np.float64(1)), X32)
case("nep50-int32+int64-scalar", with_scalar(operator.add, np.int64(1)), I32)
case("nep50-bool+1", with_scalar(operator.add, 1), B)
case("nep50-bool+True", with_scalar(operator.add, True), B)
case("nep50-int32+0d-int64-array", operator.add, I32, np.array(1))
case("nep50-float32*pyfloat-argument", operator.mul, X32, 2.5)
case("nep50-int32-pyint-argument", operator.sub, I32, 3)
case("nep50-int32/pyfloat-argument", operator.truediv, I32, 2.5)
case("nep50-int32+pybool-argument", operator.add, I32, True)
case("nep50-float32*float64-scalar-argument", operator.mul, X32, np.float64(2.5))
case("nep50-float32*float32-scalar-argument", operator.mul, X32, np.float32(2.5))
case("nep50-int32==2**40", with_scalar(operator.eq, 2**40), I32)
case("nep50-0d-array+0d-scalar", operator.add, np.array(2.5, np.float32), np.float32(1.5))

# where, clip, astype.
case("where", np.where, MASK, X64, Y["float64"])
case("where-nonbool-condition", np.where, X32, I32, 7)
case("where-scalars", np.where, B, 1, 2.5)
case("where-int32-pyint", lambda c, x: np.where(c, x, 7), B, I32)
case("where-broadcast-3-1", np.where, B[:, :1], Y["int64"], np.array(0.5, np.float32))
case("where-float32-float64-scalar", lambda c, x: np.where(c, x, np.float64(0)), B, X32)
case("clip-float32", kw(np.clip, a_min=-1, a_max=2), X32)
case("clip-int32", lambda x: np.clip(x, -2, 3), I32)
case("clip-upper-only", lambda x: np.clip(x, None, 0.5), X64)
case("clip-array-bounds", np.clip, X64, Y["float64"], 2.0)
case("clip-int32-float-bound", lambda x: np.clip(x, 0.5, 3), I32)
case("clip-method", meth("clip", 0), X["int64"])
for src in DTYPES:
    for dst in DTYPES:
        case(f"astype-{src}-{dst}", meth("astype", np.dtype(dst).type), FINITE[src])
case("astype-string-dtype", meth("astype", "float32"), I32)
case("astype-dtype-object", meth("astype", np.dtype("int64")), FINITE["float32"])

# Reductions: dtypes, axis None/int/negative/tuple, keepdims, 0-d, size-0, methods, ddof.
REDUCTIONS = "sum prod mean var std max amax min amin argmax argmin any all".split()
for name in REDUCTIONS:
    r = getattr(np, name)
    # moments round differently everywhere; sums and products of floats on compiled backends
    tol = {
        "approx": name in ("mean", "var", "std"),
        "rounding": "order" if name in ("sum", "prod") else None,
    }
    for dt in DTYPES:
        case(f"{name}-{dt}", r, X[dt], **tol)
        case(f"{name}-{dt}-axis0", kw(r, axis=0), X[dt], **tol)
    case(f"{name}-axis-1-keepdims", kw(r, axis=-1, keepdims=True), FINITE["float32"], **tol)
    case(f"{name}-0d", r, np.float64(2.5), **tol)
    case(f"{name}-empty-rows", kw(r, axis=1), EMPTY, **tol)
    case(f"{name}-keepdims-all", kw(r, keepdims=True), Z["int64"], **tol)
    if name.startswith("arg"):
        case(f"{name}-3d-axis1", kw(r, axis=1), Z["float64"])
    else:
        case(f"{name}-axis-tuple", kw(r, axis=(0, -1)), Z["float32"], **tol)
        case(f"{name}-axis-tuple-keepdims", kw(r, axis=(2, 0), keepdims=True), Z["int32"], **tol)
        case(f"{name}-axis-empty-tuple", kw(r, axis=()), FINITE["float64"], **tol)
    if name not in ("amax", "amin"):
        case(f"{name}-method", meth(name, axis=1), FINITE["int64"], **tol)
        case(f"{name}-method-all", meth(name), B, **tol)
for name in ("sum", "prod", "mean", "any", "all"):
    tol = {"approx": name == "mean", "rounding": "order" if name in ("sum", "prod") else None}
    case(f"{name}-empty-all", getattr(np, name), EMPTY, **tol)
    case(f"{name}-empty-axis0", kw(getattr(np, name), axis=0), EMPTY, **tol)
case("var-ddof1", kw(np.var, ddof=1, axis=0), FINITE["float64"], approx=True)
case("std-ddof1-keepdims", kw(np.std, ddof=1, axis=1, keepdims=True), I32, approx=True)
case("var-ddof-too-big", kw(np.var, ddof=4), FINITE["float32"][0], approx=True)
case("std-method-ddof", meth("std", ddof=1), FINITE["float32"], approx=True)
case("add.reduce-default-axis0", np.add.reduce, I32)
case("multiply.reduce-axis1", kw(np.multiply.reduce, axis=1), FINITE["float32"], rounding="order")
case("maximum.reduce-axis-none", kw(np.maximum.reduce, axis=None), X64)
case("minimum.reduce-keepdims", kw(np.minimum.reduce, axis=-1, keepdims=True), X["int64"])
case("logical_or.reduce", kw(np.logical_or.reduce, axis=0), B)
case("logical_and.reduce", kw(np.logical_and.reduce, axis=1), B)
case("add.reduce-axis-tuple", kw(np.add.reduce, axis=(0, 2)), Z["int32"])

# Contractions.
for dt in DTYPES:
    f = dt.startswith("float")
    case(f"matmul-{dt}", np.matmul, A[dt], BM[dt], approx=f)
    case(f"matmul-batched-{dt}", np.matmul, C[dt], np.swapaxes(C[dt], 1, 2), approx=f)
    case(f"dot-{dt}", np.dot, A[dt], BM[dt], approx=f)
    case(f"einsum-ij,jk->ik-{dt}", einsum("ij,jk->ik"), A[dt], BM[dt], approx=f)
    case(f"outer-{dt}", np.outer, V4[dt], A[dt][:, 0], approx=f)
    case(f"inner-{dt}", np.inner, V4[dt], V4[dt], approx=f)
A64, B64, V64, C32 = A["float64"], BM["float64"], V4["float64"], C["float32"]
case("matmul-3d-2d-broadcast", np.matmul, C32, BM["float32"], approx=True)
case("matmul-batch-broadcast", np.matmul, C32[:1], np.stack([BM["float32"]] * 3), approx=True)
case("matmul-1d-2d", np.matmul, A64[:, 0], A64, approx=True)
case("matmul-2d-1d", np.matmul, A64, V64, approx=True)
case("matmul-1d-1d", np.matmul, V64, V64, approx=True)
case("matmul-operator", operator.matmul, A["int32"], BM["int64"])
case("matmul-operator-float32-int32", operator.matmul, A["float32"], BM["int32"], approx=True)
case("matmul-empty-contraction", np.matmul, np.ones((2, 0)), np.ones((0, 3)))
case("dot-1d-1d", np.dot, V64, V64, approx=True)
case("dot-2d-1d", np.dot, A64, V64, approx=True)
case("dot-scalar", np.dot, 2.0, A["float32"], approx=True)
case("dot-3d-1d", np.dot, C32, V4["float32"], approx=True)
case("tensordot-axes1", kw(np.tensordot, axes=1), A64, B64, approx=True)
case("tensordot-axes2", kw(np.tensordot, axes=2), C32, A["float32"], approx=True)
case("tensordot-pairs", kw(np.tensordot, axes=([1], [0])), A64, B64, approx=True)
case("tensordot-pairs2", kw(np.tensordot, axes=([1, 2], [1, 0])), C32, A["float32"].T, approx=True)
case("einsum-bij,bjk->bik", einsum("bij,bjk->bik"), C32, np.swapaxes(C32, 1, 2), approx=True)
case("einsum-ij->ji", einsum("ij->ji"), A64, approx=True)
case("einsum-ij->", einsum("ij->"), A["int32"])
case("einsum-i,i->", einsum("i,i->"), V64, V64, approx=True)
case("einsum-ij,j->i", einsum("ij,j->i"), A64, V64, approx=True)
case("einsum-i,j->ij", einsum("i,j->ij"), V64, A64[:, 0], approx=True)
case("outer-2d-flattens", np.outer, A["int64"], V4["int64"])
case("inner-2d-2d", np.inner, A64, A64[:2], approx=True)

# Structural.
Z64, ZI = Z["float64"], Z["int32"]
case("reshape-varargs", meth("reshape", 4, 3), X64)
case("reshape-minus1", meth("reshape", (2, -1)), X64)
case("np.reshape-flat", lambda x: np.reshape(x, (-1,)), I32)
case("np.reshape-order-C", lambda x: np.reshape(x, (2, 2, 3), order="C"), ZI[0])
case("reshape-0d", meth("reshape", 1, 1), np.float64(2.5))
case("reshape-to-0d", meth("reshape", ()), np.ones((1, 1)))
case("reshape-empty", meth("reshape", 4, -1), EMPTY)
case("transpose-default", np.transpose, Z64)
case("transpose-perm", lambda x: np.transpose(x, (1, 0, 2)), Z64)
case("transpose-method-varargs", meth("transpose", 2, 0, 1), ZI)
case(".T-2d", lambda x: x.T, X64)
case(".T-3d", lambda x: x.T, ZI)
case("swapaxes", lambda x: np.swapaxes(x, 0, -1), Z64)
case("swapaxes-method", meth("swapaxes", 1, 2), ZI)
case("moveaxis", lambda x: np.moveaxis(x, 0, -1), Z64)
case("moveaxis-lists", lambda x: np.moveaxis(x, [0, 1], [-1, 0]), ZI)
case("expand_dims-0", lambda x: np.expand_dims(x, 0), X64)
case("expand_dims-negative", lambda x: np.expand_dims(x, -1), I32)
case("expand_dims-tuple", lambda x: np.expand_dims(x, (0, 2)), X64)
case("expand_dims-0d", lambda x: np.expand_dims(x, 0), np.float32(1.0))
case("squeeze-all", np.squeeze, ONES_DIMS)
case("squeeze-axis", lambda x: np.squeeze(x, axis=2), ONES_DIMS)
case("squeeze-negative-axis", lambda x: np.squeeze(x, axis=-4), ONES_DIMS)
case("squeeze-method", meth("squeeze"), ONES_DIMS)
case("broadcast_to-row", lambda y: np.broadcast_to(y, (3, 4)), Y["float64"])
case("broadcast_to-column-3d", lambda x: np.broadcast_to(x, (2, 3, 4)), X64[:, :1])
case("broadcast_to-0d", lambda x: np.broadcast_to(x, (2, 2)), np.int32(7))
case("broadcast_to-plus", lambda x, y: np.broadcast_to(y, x.shape) + x, X64, Y["float64"])
case("concatenate-axis0", lambda a, b: np.concatenate([a, b]), X64, I32)
case("concatenate-axis1", lambda a, b: np.concatenate((a, b), axis=1), X64, X32)
case("concatenate-axis-1-three", lambda a: np.concatenate([a, a, a], axis=-1), ZI)
case("concatenate-axis-none", lambda a, b: np.concatenate([a, b], axis=None), X64, Y["int64"])
case("stack-axis0", lambda a, b: np.stack([a, b]), X64, I32)
case("stack-axis-1", lambda a, b: np.stack((a, b), axis=-1), X32, X32)
case("stack-0d", lambda a, b: np.stack([a, b]), np.float64(1), np.array(2.0))
case("split-sections", lambda x: np.split(x, 2, axis=1), X64)
case("split-indices", lambda x: np.split(x, [1, 3], axis=1), I32)
case("split-axis0", lambda x: np.split(x, 2), ZI)
case("split-index-past-end", lambda x: np.split(x, [2, 5]), X64)
case("flip-all", np.flip, X64)
case("flip-axis0", lambda x: np.flip(x, axis=0), I32)
case("flip-axis-1", lambda x: np.flip(x, axis=-1), Z64)
case("flip-tuple", lambda x: np.flip(x, axis=(0, 2)), ZI)
case("roll-flat", lambda x: np.roll(x, 1), X64)
case("roll-axis", lambda x: np.roll(x, -2, axis=1), I32)
case("roll-tuple", lambda x: np.roll(x, (1, 2), axis=(0, 1)), X64)
case("roll-big-shift", lambda x: np.roll(x, 5, axis=0), Z64)
case("pad-int", lambda x: np.pad(x, 1), X64)
case("pad-widths", lambda x: np.pad(x, ((1, 0), (2, 3))), I32)
case("pad-constant-values", lambda x: np.pad(x, 1, mode="constant", constant_values=0.5), X32)
case(
    "pad-constant-pairs",
    lambda x: np.pad(x, ((0, 1), (1, 1)), constant_values=((0, 0), (7, 9))),
    I32,
)
case("tile-int", lambda x: np.tile(x, 2), X64)
case("tile-tuple", lambda x: np.tile(x, (2, 1)), I32)
case("tile-more-dims", lambda y: np.tile(y, (2, 1, 2)), Y["float32"])
case("repeat-flat", lambda x: np.repeat(x, 2), X64)
case("repeat-axis", lambda x: np.repeat(x, 2, axis=1), I32)
case("repeat-counts", lambda x: np.repeat(x, [1, 0, 2], axis=0), X64)
case("repeat-method", meth("repeat", 3, axis=-1), B)
case("triu", np.triu, X64)
case("triu-k", lambda x: np.triu(x, 1), I32)
case("tril-negative-k", lambda x: np.tril(x, -1), X64)
case("tril-3d", np.tril, ZI)
case("triu-bool", np.triu, B)
case("zeros_like", np.zeros_like, X64)
case("ones_like-dtype", lambda x: np.ones_like(x, dtype=np.int32), X64)
case("full_like-int-truncates", lambda x: np.full_like(x, 2.5), I32)
case("full_like-float32", lambda x: np.full_like(x, 2.5), X32)
case("zeros_like-plus", lambda x: x + np.zeros_like(x), X32)
case("ravel", np.ravel, X64)
case("ravel-method", meth("ravel"), ZI)
case("zeros-plus", lambda x: np.zeros((3, 4), np.float32) + x, I32)
case("ones-and", lambda b: np.ones(4, bool) & b, B)
case("full-times", lambda x: np.full((3, 1), 2.5) * x, X32)
case("full-int-minus", lambda x: np.full(4, 7, np.int32) - x, I32)
case("eye-times", lambda x: x * np.eye(3, 4), X64)
case("eye-plus-fancy", lambda x, i: (x + np.eye(3, 4, dtype=np.int32))[i], I32, IDX)
case("arange-plus", lambda x: x + np.arange(4), I32)
case("arange-float32", lambda x: x * np.arange(1, 5, dtype=np.float32), X32)
case("arange-column", lambda x: np.arange(3.0)[:, None] * x, I32)

# Indexing.
for text, key in [
    ("1", np.s_[1]),
    ("-1", np.s_[-1]),
    ("1:3", np.s_[1:3]),
    ("::-1", np.s_[::-1]),
    ("::2, ::-1", np.s_[::2, ::-1]),
    ("1:, -3:-1", np.s_[1:, -3:-1]),
    ("None, :, None", np.s_[None, :, None]),
    ("..., 1", np.s_[..., 1]),
    ("1, -2", np.s_[1, -2]),
    (":, 2:2", np.s_[:, 2:2]),
    ("5:", np.s_[5:]),
    ("-1::-2, 0", np.s_[-1::-2, 0]),
]:
    case(f"x[{text}]", index(key), X64)
for text, key in [
    ("..., ::-2", np.s_[..., ::-2]),
    ("0, None, 1:", np.s_[0, None, 1:]),
    ("1, ..., -1", np.s_[1, ..., -1]),
    ("()", ()),
]:
    case(f"z[{text}]", index(key), ZI)
case("0d[()]", lambda x: x[()], np.array(3.5))
case("0d[None]", lambda x: x[None], np.float32(3.5))
case("fancy-traced", lambda x, i: x[i], X64, IDX)
case("fancy-traced-int32", lambda x, i: x[i], I32, IDX.astype(np.int32))
case("fancy-traced-axis1", lambda x, i: x[:, i], X64, np.array([3, -4, 0]))
case("fancy-traced-2d", lambda x, i: x[i], I32, np.array([[0, 1], [2, -3]]))
case("fancy-traced-3d-middle", lambda z, i: z[:, i], Z64, IDX)
case("fancy-list-constant", lambda x: x[[2, 0]], X64)
case("fancy-array-constant", lambda x: x[np.array([1, 1])], I32)
case("fancy-constant-axis1", lambda x: x[:, np.array([-1, 0])], X64)
case("rows-cols-traced", lambda x, r, c: x[r, c], X64, np.array([0, 2, -1]), np.array([3, 0, 1]))
case("rows-cols-broadcast", lambda x, r, c: x[r, c], I32, np.array([[0], [2]]), np.array([1, 3, 0]))
case("take-flat", lambda x, i: np.take(x, i), X64, np.array([11, 0, -12, 5]))
case("take-axis1", lambda x, i: np.take(x, i, axis=1), I32, np.array([3, 0]))
case("take-constant", lambda x: np.take(x, [0, -1], axis=0), X64)
case("take_along_axis", lambda x, i: np.take_along_axis(x, i, axis=1), X64, IDX_ALONG)
case(
    "take_along_axis-axis0",
    lambda x, i: np.take_along_axis(x, i, axis=0),
    I32,
    np.array([[2, 0, 1, -1]]),
)
case("mask-constant", lambda x: x[MASK], X64)
case("mask-constant-rows", lambda x: x[np.array([True, False, True])], I32)
case("mask-constant-cols", lambda x: x[:, np.array([False, True, True, False])], X32)

# jit arguments: pytrees in and out, NumPy scalars, static arguments.
case(
    "pytree-dict-list-in-dict-tuple-out",
    lambda d: {"sum": d["a"] + d["b"][0], "pair": (d["b"][1].T, d["a"] * 2)},
    {"a": X64, "b": [Y["float64"], ZI]},
)
case("pytree-list-out", lambda x: [x, x + 1, (x.sum(),)], I32)
case("pytree-tuple-in", lambda t: t[0] * t[1], (X32, np.float32(2)))
case(
    "static-argnums-axis",
    lambda x, axis: x.sum(axis=axis),
    X64,
    1,
    rounding="order",
    static_argnums=1,
)
case("static-argnums-shape", lambda x, s: x.reshape(s), I32, (4, 3), static_argnums=(1,))
case(
    "static-argnames-dtype",
    lambda x, dtype: x.astype(dtype),
    I32,
    np.float32,
    static_argnames=("dtype",),
)

# Error cases: what NumPy raises, tracejit must raise (as its builtin class).
AxisError = np.exceptions.AxisError
error("add-no-broadcast", ValueError, operator.add, X64, np.ones(3))
error("where-no-broadcast", ValueError, np.where, B, X64, np.ones((2, 4)))
error("bitwise_and-float", TypeError, np.bitwise_and, X64, X64)
error("or-float-pyfloat", TypeError, lambda x: x | 1.5, I32)
error("left_shift-float", TypeError, operator.lshift, X32, 1)
error("invert-float", TypeError, operator.invert, X64)
error("negative-bool", TypeError, operator.neg, B)
error("subtract-bool", TypeError, operator.sub, B, B)
error("int-power-negative-literal", ValueError, lambda x: x**-1, I32)
error("int32+2**31", OverflowError, with_scalar(operator.add, 2**31), I32)
error("reshape-wrong-size", ValueError, meth("reshape", 5, 3), X64)
error("reshape-two-minus-ones", ValueError, meth("reshape", -1, -1), X64)
error("reshape-minus1-with-zero", ValueError, meth("reshape", 0, -1), EMPTY)
error("sum-axis-out-of-range", AxisError, meth("sum", axis=2), X64)
error("sum-negative-axis-out-of-range", AxisError, kw(np.sum, axis=-3), X64)
error("argmax-axis-out-of-range", AxisError, kw(np.argmax, axis=2), X64)
error("sum-0d-axis1", AxisError, kw(np.sum, axis=1), np.float64(1))
error("sum-duplicate-axis", ValueError, meth("sum", axis=(0, -2)), X64)
error("max-empty", ValueError, kw(np.max, axis=0), EMPTY)
error("argmin-empty", ValueError, np.argmin, EMPTY)
error("matmul-mismatch", ValueError, operator.matmul, X64, X64)
error("matmul-0d", ValueError, np.matmul, X64, 2.0)
error("dot-mismatch", ValueError, np.dot, X64, X64)
error("einsum-mismatch", ValueError, einsum("ij,jk->ik"), X64, X64)
error("tensordot-mismatch", ValueError, kw(np.tensordot, axes=1), X64, X64)
error("concatenate-ndim-mismatch", ValueError, lambda a, b: np.concatenate([a, b]), X64, V64)
error("concatenate-shape-mismatch", ValueError, lambda a: np.concatenate([a, a.T]), X64)
error("stack-shape-mismatch", ValueError, lambda a: np.stack([a, a.T]), X64)
error("split-unequal", ValueError, lambda x: np.split(x, 3, axis=1), X64)
error("squeeze-non-unit-axis", ValueError, lambda x: np.squeeze(x, axis=0), X64)
error("broadcast_to-incompatible", ValueError, lambda x: np.broadcast_to(x, (4, 3)), X64)
error("transpose-bad-perm", ValueError, lambda x: np.transpose(x, (0, 0, 1)), Z64)
error("expand_dims-out-of-range", AxisError, lambda x: np.expand_dims(x, 3), X64)
error("swapaxes-out-of-range", AxisError, lambda x: np.swapaxes(x, 0, 2), X64)
error("inplace-same-kind", TypeError, inplace(operator.iadd), I32, 1.5)
error("inplace-true-divide-int", TypeError, inplace(operator.itruediv), I32, 2)
error("inplace-float-into-bool", TypeError, inplace(operator.imul), B, Y["float32"])
error("inplace-broadcast-grows", ValueError, inplace(operator.iadd), X64, Z64)
# NumPy checks the output cast before the shapes (found by the differential tests)
error("inplace-cast-before-shape", TypeError, inplace(operator.ipow), B[:2],
      np.zeros(0, np.float32))
error("index-out-of-range", IndexError, lambda x: x[3], X64)
error("index-negative-out-of-range", IndexError, lambda x: x[:, -5], X64)
error("index-too-many", IndexError, lambda x: x[0, 0, 0], X64)
error("fancy-traced-out-of-range", IndexError, lambda x, i: x[i], X64, np.array([0, 3]))
error("fancy-traced-negative-out-of-range", IndexError, lambda x, i: x[:, i], X64, np.array([-5]))
error("fancy-constant-out-of-range", IndexError, lambda x: x[[0, 7]], X64)
error("take-traced-out-of-range", IndexError, lambda x, i: np.take(x, i), X64, np.array([12]))
error(
    "take-axis1-traced-out-of-range",
    IndexError,
    lambda x, i: np.take(x, i, axis=1),
    I32,
    np.array([4]),
)
error(
    "take_along_axis-out-of-range",
    IndexError,
    lambda x, i: np.take_along_axis(x, i, axis=1),
    X64,
    IDX_ALONG + 2,
)
error(
    "rows-cols-out-of-range",
    IndexError,
    lambda x, r, c: x[r, c],
    X64,
    np.array([0, 1]),
    np.array([4, 0]),
)
error("mask-wrong-length", IndexError, lambda x: x[np.array([True, False])], X64)
error("pad-negative", ValueError, lambda x: np.pad(x, -1), X64)


# --------------------------------------------------------------------------- checks


def tolerance(backend: str, tol: float | None, rounding: str | None):
    """What ``assert_same`` allows a case on ``backend``."""
    if exact(backend) or rounding is None:
        return tol
    return ULP if rounding == "math" else 1.0


@pytest.mark.parametrize(("fn", "args", "tols", "jit_kwargs"), CASES)
def test_matches_numpy(backend, fn, args, tols, jit_kwargs):
    f = tj.jit(fn, backend=backend, **jit_kwargs)
    try:
        want = fn(*copy.deepcopy(args))
    except Exception as exc:  # e.g. a dtype sweep reaching an op NumPy rejects
        with pytest.raises(builtin_error(exc)) as info:
            f(*args)
        assert isinstance(info.value, tj.errors.TracejitError)
        return
    assert_same(f(*copy.deepcopy(args)), want, tolerance(backend, *tols))


@pytest.mark.parametrize(("exc", "fn", "args"), ERRORS)
def test_raises_like_numpy(backend, exc, fn, args):
    with pytest.raises(exc) as numpy_error:
        fn(*copy.deepcopy(args))
    with pytest.raises(builtin_error(numpy_error.value)) as info:
        tj.jit(fn, backend=backend)(*copy.deepcopy(args))
    assert isinstance(info.value, tj.errors.TracejitError)


def test_jit_forms(backend):
    def fn(x, y):
        return np.exp(x) * y - x.sum(axis=0)

    want = fn(X32, Y["float32"])
    # exp's rounding, scaled by y: within rounding of the values' scale on a compiled backend
    for f, name in [(tj.jit(fn), default_backend()), (tj.jit(backend=backend)(fn), backend)]:
        assert_same(f(X32, Y["float32"]), want, None if exact(name) else 1.0)


def test_static_argnames_by_keyword(backend):
    f = tj.jit(
        lambda x, shape, axis: x.reshape(shape).sum(axis=axis),
        backend=backend,
        static_argnums=(1,),
        static_argnames=("axis",),
    )
    for shape, axis in [((4, 3), 0), ((2, 6), -1), ((12,), None), ((4, 3), 0)]:
        assert_same(f(I32, shape, axis=axis), I32.reshape(shape).sum(axis=axis))
