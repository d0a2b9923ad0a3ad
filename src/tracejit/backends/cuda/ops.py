"""The CUDA language: each loop-fusible op as a CUDA C expression template, and the
C renderings of literals and casts (``backends/language.py`` holds the shared walk).

``{0}``, ``{1}``, ... are the operands, already cast to the op's loop dtypes (NumPy's
``ufunc.resolve_dtypes``); ``{T}`` is the C type of those loop dtypes and ``{U}`` its
unsigned counterpart (integer arithmetic wraps in unsigned: signed overflow is undefined
in C, NumPy wraps). The emitter converts the result to the IR dtype. An op/dtype
combination absent here (``CUDA.template`` returns None) is not fused, so this table only
claims what it computes as NumPy does. float32 math calls the f-suffixed functions of
CUDA's math library, so nothing silently computes in double. Ops whose NumPy semantics
take more than an expression call the ``tj_*`` helpers of ``PRELUDE``.
"""

from __future__ import annotations

import math

import numpy as np

from ..language import Language

# C types of the dtypes the CUDA backend computes with (bool is one byte, as in NumPy).
CTYPES = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
UNSIGNED = {"int": "unsigned", "long long": "unsigned long long"}

PRELUDE = r"""
#ifndef TRACEJIT_CUDA_PRELUDE
#define TRACEJIT_CUDA_PRELUDE
// tracejit CUDA prelude: NumPy semantics that take more than one expression.
#define TJ_INFINITY_F __int_as_float(0x7f800000)
#define TJ_NAN_F __int_as_float(0x7fc00000)
#define TJ_INFINITY __longlong_as_double(0x7ff0000000000000LL)
#define TJ_NAN __longlong_as_double(0x7ff8000000000000LL)

// np.maximum / np.minimum: a NaN operand propagates; a tie returns the second operand.
template <typename T> __device__ __forceinline__ T tj_maximum(T a, T b) {
  return (a > b || a != a) ? a : b;
}
template <typename T> __device__ __forceinline__ T tj_minimum(T a, T b) {
  return (a < b || a != a) ? a : b;
}
// np.fmax / np.fmin: a NaN operand is ignored; a tie returns the negative zero if any.
template <typename T> __device__ __forceinline__ T tj_fmax(T a, T b) {
  if (a != a) return b;
  if (a > b || b != b) return a;
  if (a < b) return b;
  return signbit(a) ? a : b;
}
template <typename T> __device__ __forceinline__ T tj_fmin(T a, T b) {
  if (a != a) return b;
  if (a < b || b != b) return a;
  if (a > b) return b;
  return signbit(a) ? a : b;
}
// np.sign of a float: NaN stays NaN, zeros give +0.
template <typename T> __device__ __forceinline__ T tj_sign(T x) {
  return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : (x == (T)0 ? (T)0 : x));
}

// float -> int as NumPy on x86 (cvttss2si/cvttsd2si): truncation toward zero; NaN,
// infinities and values out of range give the smallest integer, x86's "integer indefinite"
// (C leaves them undefined; PTX's cvt saturates). -2**(bits-1) and 2**(bits-1) are exact
// in float and double, and only values in range are cast.
template <typename I, typename F> __device__ __forceinline__ I tj_float_to_int(F x) {
  const F limit = (F)(1ull << (8 * sizeof(I) - 1));
  return (x >= -limit && x < limit) ? (I)x : (I)(-limit);
}

// Integer floor division and remainder with Python's signs. Division by zero gives 0
// (NumPy warns); MIN // -1 wraps to MIN and MIN % -1 is 0, as in NumPy.
template <typename T> __device__ __forceinline__ T tj_floor_divide_int(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return (T)(0ull - (unsigned long long)a);  // wraps like NumPy
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T tj_remainder_int(T a, T b) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// np.left_shift / np.right_shift: a shift by the width or more (or by a negative amount)
// gives 0, or -1 for a negative number shifted right.
__device__ __forceinline__ int tj_left_shift(int a, int b) {
  return (unsigned)b < 32u ? (int)((unsigned)a << b) : 0;
}
__device__ __forceinline__ long long tj_left_shift(long long a, long long b) {
  return (unsigned long long)b < 64ull ? (long long)((unsigned long long)a << b) : 0LL;
}
__device__ __forceinline__ int tj_right_shift(int a, int b) {
  return (unsigned)b < 32u ? a >> b : (a < 0 ? -1 : 0);
}
__device__ __forceinline__ long long tj_right_shift(long long a, long long b) {
  return (unsigned long long)b < 64ull ? a >> b : (a < 0 ? -1LL : 0LL);
}

// Float floor division and remainder as NumPy's npy_divmod computes them (CUDA's fmod,
// floor and copysign are overloaded: float arguments stay in float).
template <typename T> __device__ __forceinline__ T tj_floor_divide(T a, T b) {
  if (b == (T)0) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != (T)0 && ((b < (T)0) != (mod < (T)0))) div -= (T)1;
  if (div == (T)0) return copysign((T)0, a / b);
  T fl = floor(div);
  return div - fl > (T)0.5 ? fl + (T)1 : fl;
}
template <typename T> __device__ __forceinline__ T tj_remainder(T a, T b) {
  T mod = fmod(a, b);
  if (b == (T)0) return mod;
  if (mod == (T)0) return copysign((T)0, b);
  return ((b < (T)0) != (mod < (T)0)) ? mod + b : mod;
}
// np.logaddexp as npy_logaddexp: equal arguments (infinities included) give x + log 2.
template <typename T> __device__ __forceinline__ T tj_logaddexp(T x, T y) {
  if (x == y) return x + (T)0.693147180559945309;
  T d = x - y;
  if (d > (T)0) return x + log1p(exp(-d));
  if (d <= (T)0) return y + log1p(exp(d));
  return d;  // NaN
}
// np.logaddexp2 as npy_logaddexp2: the same in base 2 (log2(1 + u) as log1p(u) / ln 2).
template <typename T> __device__ __forceinline__ T tj_logaddexp2(T x, T y) {
  if (x == y) return x + (T)1;
  T d = x - y;
  if (d > (T)0) return x + (T)1.442695040888963407 * log1p(exp2(-d));
  if (d <= (T)0) return y + (T)1.442695040888963407 * log1p(exp2(d));
  return d;  // NaN
}

// np.heaviside: NaN for NaN, h0 at zero (either sign), else 0 or 1.
template <typename T> __device__ __forceinline__ T tj_heaviside(T x, T h0) {
  if (x != x) return (T)TJ_NAN;  // NumPy's own (positive) NaN, not x's
  if (x == (T)0) return h0;
  return x < (T)0 ? (T)0 : (T)1;
}
// np.spacing: the NaN itself for a NaN, a positive NaN for infinities (the GPU's inf - inf),
// else the step away from zero (up from -0.0).
template <typename T> __device__ __forceinline__ T tj_spacing(T x) {
  if (x != x) return x;
  if (isinf(x)) return (T)TJ_NAN;  // (a GPU's inf - inf is 0x7fffffff, an x86's negative)
  const T inf = (T)TJ_INFINITY;
  return nextafter(x, x < (T)0 ? -inf : inf) - x;
}
// np.ldexp with an int64 exponent: any beyond +-100000 over- or underflows alike.
__device__ __forceinline__ float tj_ldexp(float x, long long n) {
  return ldexpf(x, (int)(n > 100000LL ? 100000LL : (n < -100000LL ? -100000LL : n)));
}
__device__ __forceinline__ double tj_ldexp(double x, long long n) {
  return ldexp(x, (int)(n > 100000LL ? 100000LL : (n < -100000LL ? -100000LL : n)));
}
// Integer np.fmod truncates as C's %; by 0 it gives 0 (NumPy warns), MIN by -1 gives 0.
template <typename T> __device__ __forceinline__ T tj_fmod_int(T a, T b) {
  return (b == 0 || b == -1) ? (T)0 : a % b;
}
// np.gcd / np.lcm as npy_gcd / npy_lcm: Euclid on the magnitudes in unsigned arithmetic
// (|MIN| wraps to 2**(bits-1)), the lcm as |a| / gcd * |b| wrapping.
template <typename U, typename T> __device__ __forceinline__ U tj_uabs(T a) {
  return a < 0 ? (U)0 - (U)a : (U)a;
}
template <typename U> __device__ __forceinline__ U tj_gcd_u(U a, U b) {
  while (a != 0) { U c = a; a = b % a; b = c; }
  return b;
}
template <typename U> __device__ __forceinline__ U tj_lcm_u(U a, U b) {
  U g = tj_gcd_u(a, b);
  return g == 0 ? (U)0 : a / g * b;
}

// Warp shuffles (bool travels as int).
template <typename T> __device__ __forceinline__ T tj_shfl_down(T v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ __forceinline__ bool tj_shfl_down(bool v, int offset) {
  return __shfl_down_sync(0xffffffffu, (int)v, offset) != 0;
}
template <typename T> __device__ __forceinline__ T tj_shfl_first(T v) {
  return __shfl_sync(0xffffffffu, v, 0);
}
__device__ __forceinline__ bool tj_shfl_first(bool v) {
  return __shfl_sync(0xffffffffu, (int)v, 0) != 0;
}
#endif  // TRACEJIT_CUDA_PRELUDE
"""

_CLIP = "tj_minimum(tj_maximum({0}, {1}), {2})"

# Every dtype: comparisons, logical ops, where, clip.
_ANY = {
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
    "logical_and": "(({0} != 0) && ({1} != 0))", "logical_or": "(({0} != 0) || ({1} != 0))",
    "logical_xor": "(({0} != 0) != ({1} != 0))", "logical_not": "({0} == 0)",
    "where": "({0} ? {1} : {2})", "clip": _CLIP, "conjugate": "({0})",
    "ldexp": "tj_ldexp({0}, (long long){1})",
}
# bool arithmetic is logic: + is or, * is and.
_BOOL = {
    "add": "({0} || {1})", "multiply": "({0} && {1})", "absolute": "({0})",
    "maximum": "({0} || {1})", "minimum": "({0} && {1})",
    "fmax": "({0} || {1})", "fmin": "({0} && {1})",
    "bitwise_and": "({0} && {1})", "bitwise_or": "({0} || {1})",
    "bitwise_xor": "({0} != {1})", "invert": "(!{0})",
    "floor": "({0})", "ceil": "({0})", "trunc": "({0})",
    "isnan": "false", "isinf": "false", "isfinite": "true",
}
_INT = {
    "add": "(({T})(({U}){0} + ({U}){1}))", "subtract": "(({T})(({U}){0} - ({U}){1}))",
    "multiply": "(({T})(({U}){0} * ({U}){1}))", "negative": "(({T})(({U})0 - ({U}){0}))",
    "positive": "({0})", "absolute": "({0} < 0 ? ({T})(({U})0 - ({U}){0}) : {0})",
    "square": "(({T})(({U}){0} * ({U}){0}))", "sign": "(({T})(({0} > 0) - ({0} < 0)))",
    "floor_divide": "tj_floor_divide_int({0}, {1})", "remainder": "tj_remainder_int({0}, {1})",
    "maximum": "tj_maximum({0}, {1})", "minimum": "tj_minimum({0}, {1})",
    "fmax": "tj_maximum({0}, {1})", "fmin": "tj_minimum({0}, {1})",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "invert": "(~{0})", "left_shift": "tj_left_shift({0}, {1})",
    "right_shift": "tj_right_shift({0}, {1})",
    "floor": "({0})", "ceil": "({0})", "trunc": "({0})",
    "isnan": "false", "isinf": "false", "isfinite": "true",
    "fmod": "tj_fmod_int({0}, {1})",
    "gcd": "(({T})tj_gcd_u(tj_uabs<{U}>({0}), tj_uabs<{U}>({1})))",
    "lcm": "(({T})tj_lcm_u(tj_uabs<{U}>({0}), tj_uabs<{U}>({1})))",
}
# NumPy's angle constants: 180 / pi computed in the loop dtype
_DEGREES = "({0} * (({T})180 / ({T})3.141592653589793))"
_RADIANS = "({0} * (({T})3.141592653589793 / ({T})180))"
_FLOAT = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "true_divide": "({0} / {1})", "negative": "(-{0})", "positive": "(+{0})",
    "square": "({0} * {0})", "reciprocal": "(({T})1 / {0})", "sign": "tj_sign({0})",
    "floor_divide": "tj_floor_divide({0}, {1})", "remainder": "tj_remainder({0}, {1})",
    "maximum": "tj_maximum({0}, {1})", "minimum": "tj_minimum({0}, {1})",
    "fmax": "tj_fmax({0}, {1})", "fmin": "tj_fmin({0}, {1})",
    "logaddexp": "tj_logaddexp({0}, {1})", "logaddexp2": "tj_logaddexp2({0}, {1})",
    "isnan": "isnan({0})", "isinf": "isinf({0})", "isfinite": "isfinite({0})",
    "signbit": "signbit({0})", "heaviside": "tj_heaviside({0}, {1})",
    "spacing": "tj_spacing({0})",
    "degrees": _DEGREES, "rad2deg": _DEGREES, "radians": _RADIANS, "deg2rad": _RADIANS,
}
# NumPy name -> CUDA math library name (the float32 version adds an "f").
MATH = {
    "absolute": "fabs", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "cbrt": "cbrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "floor": "floor", "ceil": "ceil",
    "trunc": "trunc", "rint": "rint", "arctan2": "atan2", "hypot": "hypot", "power": "pow",
    "fabs": "fabs", "copysign": "copysign", "fmod": "fmod", "nextafter": "nextafter",
    "float_power": "pow",
}


class CudaLanguage(Language):
    """CUDA C: C types, ``tj_*`` helpers for NumPy's semantics, exact float literals."""

    ANY = _ANY
    BOOL = _BOOL
    INT = _INT
    FLOAT = _FLOAT
    MATH = MATH

    def supports(self, dtype: np.dtype) -> bool:
        return np.dtype(dtype) in CTYPES

    def dtype_name(self, dtype: np.dtype) -> str:
        return CTYPES[np.dtype(dtype)]

    def specialize(self, text: str, dtype: np.dtype) -> str:
        T = self.dtype_name(dtype)
        return text.format("{0}", "{1}", "{2}", T=T, U=UNSIGNED.get(T, T))

    def math_function(self, op: str, dtype: np.dtype) -> str:
        """``expf`` for float32, ``exp`` for float64."""
        return MATH[op] + ("f" if dtype == np.float32 else "")

    def literal(self, value: object, dtype: np.dtype) -> str:
        """A C literal of ``dtype`` (exact: float32 values are printed from the float32)."""
        x = np.asarray(value).astype(dtype).item()
        if dtype.kind == "b":
            return "true" if x else "false"
        if dtype.kind == "i":
            if x == np.iinfo(dtype).min:  # -2147483648 is unary minus applied to an overflow
                return f"({x + 1}{'LL' if dtype.itemsize == 8 else ''} - 1)"
            text = f"{x}{'LL' if dtype.itemsize == 8 else ''}"
        else:
            f32 = dtype == np.float32
            if math.isnan(x):  # NumPy keeps a NaN's sign through clip, where, maximum...
                nan = "TJ_NAN_F" if f32 else "TJ_NAN"
                return f"(-{nan})" if math.copysign(1.0, x) < 0 else nan
            if math.isinf(x):
                return ("" if x > 0 else "-") + ("TJ_INFINITY_F" if f32 else "TJ_INFINITY")
            text = repr(float(np.float32(x))) + "f" if f32 else repr(x)
        return f"({text})" if text.startswith("-") else text

    def cast(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        if src == dst:
            return expr
        if src.kind == "f" and dst.kind == "i":  # C leaves NaN, inf, out of range undefined
            return f"tj_float_to_int<{self.dtype_name(dst)}>({expr})"
        return f"(({self.dtype_name(dst)}){expr})"


CUDA = CudaLanguage()
