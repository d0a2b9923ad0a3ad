"""The Numba language: each loop-fusible op as a scalar Numba (Python syntax) expression
template, and the Python renderings of literals and casts (``backends/language.py`` holds
the shared walk; the CPU emitter renders every expression, literal, cast, identity and
reduction fold through ``NUMBA``).

``{0}``, ``{1}``, ... are the operands, already cast to the op's loop dtypes (NumPy's
``ufunc.resolve_dtypes``); the emitter casts the result to the IR dtype by wrapping it in
the dtype's constructor (``np.float32(...)``). An op/dtype combination absent here
(``NUMBA.template`` returns None) is not fused: it runs as a NumPy library step, so these
tables only claim what they compute as NumPy does.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.registry import monoid_of
from ..language import Const, Language, Operand

# NaN-propagating maximum/minimum as NumPy computes them (measured, signed zeros included):
# a tie returns the second operand. fmax/fmin ignore a NaN operand, and on a tie return the
# negative zero if there is one. ``|`` rather than ``or``: no branch, so clip's nested
# maximum and minimum vectorise (clip with array bounds: 110 -> 70 us on 1M float32).
_MAX = "({0} if (({0} > {1}) | ({0} != {0})) else {1})"
_MIN = "({0} if (({0} < {1}) | ({0} != {0})) else {1})"
_TIE = "({0} if np.signbit({0}) else {1})"
_FMAX = f"({{1}} if {{0}} != {{0}} else ({{0}} if ({{0}} > {{1}} or {{1}} != {{1}}) else " \
    f"({{1}} if {{0}} < {{1}} else {_TIE})))"
_FMIN = f"({{1}} if {{0}} != {{0}} else ({{0}} if ({{0}} < {{1}} or {{1}} != {{1}}) else " \
    f"({{1}} if {{0}} > {{1}} else {_TIE})))"
_CLIP = _MIN.format(_MAX, "{2}")
_DEGREES = "({0} * ({T}(180.0) / {T}(np.pi)))"
_RADIANS = "({0} * ({T}(np.pi) / {T}(180.0)))"

# Python's operators compute the same for every Numba dtype (bool arithmetic included: the
# emitter's cast turns True + True back into True, as NumPy's bool add does).
_ANY = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "negative": "(-{0})", "positive": "(+{0})", "absolute": "abs({0})",
    "square": "({0} * {0})", "maximum": _MAX, "minimum": _MIN, "fmax": _FMAX, "fmin": _FMIN,
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) ^ ({1} != 0))", "logical_not": "({0} == 0)",
    "where": "({1} if {0} else {2})", "conjugate": "({0})",
    # the exponent is clamped (any beyond +-4000 over- or underflows alike): Numba passes
    # it to C's ldexp as an int, truncating int64s
    "ldexp": "np.ldexp({0}, max(-4000, min(4000, {1})))",
}
_INT = {
    "floor_divide": "({0} // {1})", "remainder": "({0} % {1})",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "invert": "(~{0})", "isnan": "False", "isinf": "False", "isfinite": "True",
    "clip": _CLIP,
    "sign": "(1 if {0} > 0 else (-1 if {0} < 0 else 0))",
    "floor": "({0})", "ceil": "({0})", "trunc": "({0})",
    # Python's % floors; C's fmod truncates: move a remainder of the wrong sign back.
    # x - x is a zero of the operands' own type (a literal 0 would make uint64 float64).
    "fmod": "(({0} % {1}) - {1} if (({0} % {1}) != 0 and (({0} % {1}) < 0) != ({0} < 0)) "
            "else ({0} % {1}))",
    # NumPy's shifts by the width or more (or by a negative amount) give 0 (left) or the
    # sign (right); LLVM's would be undefined. Numba computes small ints in int64.
    "left_shift": "(({0} << {1}) if (0 <= {1} and {1} < {B}) else ({0} ^ {0}))",
    "right_shift": "(({0} >> {1}) if (0 <= {1} and {1} < {B}) else "
                   "(({0} >> {T}({B} - 1)) >> {T}(1)))",
    "gcd": "np.gcd({0}, {1})",
    # as NumPy: |a| // gcd * |b|, wrapping (Numba's own np.lcm differs on overflow)
    "lcm": "(({0} - {0}) if ({0} == 0 or {1} == 0) else (abs({0}) // np.gcd({0}, {1})) "
           "* abs({1}))",
}
_BOOL = {"bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})",
         "bitwise_xor": "({0} ^ {1})", "invert": "(not {0})", "clip": _CLIP,
         "floor": "({0})", "ceil": "({0})", "trunc": "({0})",
         "isnan": "False", "isinf": "False", "isfinite": "True"}
_FLOAT = {
    "true_divide": "({0} / {1})", "floor_divide": "({0} // {1})", "remainder": "({0} % {1})",
    "power": "({0} ** {1})", "reciprocal": "(1 / {0})",
    "sign": "(1 if {0} > 0 else (-1 if {0} < 0 else (0 if {0} == 0 else {0})))",
    "isnan": "({0} != {0})", "isinf": "(abs({0}) == np.inf)",
    "isfinite": "(abs({0}) < np.inf)", "clip": _CLIP,
    "arctan2": "np.arctan2({0}, {1})", "hypot": "np.hypot({0}, {1})",
    "logaddexp": "np.logaddexp({0}, {1})", "logaddexp2": "np.logaddexp2({0}, {1})",
    "fabs": "abs({0})", "signbit": "np.signbit({0})", "copysign": "np.copysign({0}, {1})",
    "fmod": "np.fmod({0}, {1})", "nextafter": "np.nextafter({0}, {1})",
    # NumPy's constants: 180 / pi computed in the loop dtype (float32's differs from the
    # float64 quotient rounded to float32)
    "degrees": _DEGREES, "rad2deg": _DEGREES, "radians": _RADIANS, "deg2rad": _RADIANS,
    "heaviside": "(np.nan if {0} != {0} else ({1} if {0} == 0 else (0.0 if {0} < 0 else 1.0)))",
    # NumPy: the NaN itself for a NaN, a positive NaN for infinities (x86's inf - inf is
    # negative), else the step away from zero (up from -0.0, where Numba's steps down)
    "spacing": "({0} if {0} != {0} else {T}(np.nan) if abs({0}) == np.inf else "
               "(np.nextafter({0}, {T}(-np.inf) if {0} < 0 else {T}(np.inf)) - {0}))",
}
for _name in ("sqrt cbrt sin cos tan arcsin arccos arcsinh arccosh arctanh "
              "floor ceil trunc rint").split():
    _FLOAT[_name] = f"np.{_name}({{0}})"

# Float ops computed by the vectorisable functions of backends/cpu/math.py (``exp_f32``
# ...), op -> the function's name without its dtype suffix: Numba's own np.exp & co. call
# scalar libm and stop the loop from vectorising. Trig stays on libm: the fast versions
# are exact only for |x| < ~1.6e6.
MATH = {op: op for op in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh",
                          "sinh", "cosh", "arctan")}
MATH["power"] = "pow"
MATH["float_power"] = "pow"

# A reduction's fold (keyed by its monoid's combining op) where it is simpler than the
# combining op's template: the emitter wraps the fold in the output dtype's constructor,
# so + and * need no parentheses, and the accumulator of any/all is already a bool.
_FOLD = {"add": "{0} + {1}", "multiply": "{0} * {1}",
         "logical_or": "{0} | ({1} != 0)", "logical_and": "{0} & ({1} != 0)"}


# int64 arithmetic through uint64: Numba marks signed adds, subtracts and multiplies
# no-signed-wrap, which lets LLVM assume they never overflow and fold ``(a + a) != 0``
# into ``a != 0``; NumPy wraps (INT64_MIN + INT64_MIN is 0). Unsigned arithmetic wraps
# by definition. Smaller ints compute in int64 (no overflow) and the cast wraps them.
_WRAP64 = {
    "add": "np.int64(np.uint64({0}) + np.uint64({1}))",
    "subtract": "np.int64(np.uint64({0}) - np.uint64({1}))",
    "multiply": "np.int64(np.uint64({0}) * np.uint64({1}))",
    "negative": "np.int64(np.uint64(0) - np.uint64({0}))",
    "square": "np.int64(np.uint64({0}) * np.uint64({0}))",
    "absolute": "({0} if {0} >= 0 else np.int64(np.uint64(0) - np.uint64({0})))",
    # INT64_MIN // -1 overflows: NumPy wraps to INT64_MIN, Numba's // gave 0
    "floor_divide": "(np.int64(np.uint64(0) - np.uint64({0})) if {1} == -1 else ({0} // {1}))",
}
_INT64 = np.dtype(np.int64)


class NumbaLanguage(Language):
    """Numba's Python: NumPy scalar constructors as casts, ``np.inf``/``np.nan``, the
    vectorisable math of ``cpu/math.py``."""

    ANY = _ANY
    BOOL = _BOOL
    INT = _INT
    FLOAT = _FLOAT
    MATH = MATH

    def template(self, op: str, dtypes) -> str | None:
        """The shared tables' template, but int64 arithmetic that wraps (``_WRAP64``)."""
        if op in _WRAP64 and dtypes and all(np.dtype(d) == _INT64 for d in dtypes):
            return _WRAP64[op]
        return super().template(op, dtypes)

    def supports(self, dtype: np.dtype) -> bool:
        """bool, integers, float32 and float64: no float16, no complex."""
        dtype = np.dtype(dtype)
        return dtype.kind in "biu" or dtype in (np.float32, np.float64)

    def dtype_name(self, dtype: np.dtype) -> str:
        return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"

    def specialize(self, text: str, dtype: np.dtype) -> str:
        """``{T}``: the loop dtype's constructor; ``{B}``: its width in bits."""
        return text.format("{0}", "{1}", "{2}", T=self.dtype_name(dtype), B=8 * dtype.itemsize)

    def math_function(self, op: str, dtype: np.dtype) -> str:
        """``exp_f32`` for float32, ``exp_f64`` for float64 (see ``cpu/math.py``)."""
        return f"{MATH[op]}_{'f32' if dtype == np.float32 else 'f64'}"

    def literal(self, value: object, dtype: np.dtype) -> str:
        """``value`` as Python source. Its dtype comes from where it is used (a scalar
        constructor, an array element, ``np.full``), so ``dtype`` does not change it."""
        v = value.item() if isinstance(value, (np.ndarray, np.generic)) else value
        if isinstance(v, float) and not math.isfinite(v):
            return "np.nan" if math.isnan(v) else ("np.inf" if v > 0 else "-np.inf")
        return repr(v)

    def cast(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        """The dtype's constructor around ``expr``. Float to int would be LLVM's undefined
        ``fptosi`` for NaN, infinities and values out of range: only ``convert`` casts
        floats to ints, through ``float_to_int``."""
        return expr if src == dst else f"{self.dtype_name(dst)}({expr})"

    def constant(self, value: object, dtype: np.dtype) -> str:
        """A scalar constant, always through the constructor: a Python literal alone
        would compute in Python's int or float."""
        return f"{self.dtype_name(dtype)}({self.literal(value, dtype)})"

    def convert(self, ref: Operand, src: np.dtype, dst: np.dtype) -> str:
        """``astype``: the emitter's cast to the output dtype converts, except to bool,
        where nonzero (NaN included) is True."""
        if dst.kind == "b":
            return f"({self.literal(ref.value, src) if isinstance(ref, Const) else ref} != 0)"
        if src.kind == "f" and dst.kind in "iu":
            return self.float_to_int(self.operand(ref, src, src), dst)
        return self.operand(ref, src, src)

    def float_to_int(self, x: str, dst: np.dtype) -> str:
        """Float ``x`` truncated to int32 or int64 as NumPy does on x86 (``cvttsd2si``):
        NaN, infinities and values out of range become the type's minimum, spelled out so
        that LLVM's ``fptosi`` never sees them (``FLOAT_TO_INT`` lists the dtypes)."""
        T, bits = self.dtype_name(dst), 8 * dst.itemsize - 1
        inside = f"({x} >= {-2.0 ** bits!r}) & ({x} < {2.0 ** bits!r})"
        return f"({T}({x}) if {inside} else {T}({-2 ** bits}))"

    def combine(self, op: str, acc: str, x: str, dtype: np.dtype) -> str:
        if np.dtype(dtype) == _INT64 and monoid_of(op).combine in _WRAP64:
            return super().combine(op, acc, x, dtype)  # (a sum of int64s wraps too)
        fold = _FOLD.get(monoid_of(op).combine)
        return super().combine(op, acc, x, dtype) if fold is None else fold.format(acc, x)


NUMBA = NumbaLanguage()
# The ints a kernel casts floats to: NumPy's cast to a narrower int (or an unsigned one)
# truncates a wider conversion's bits, which depends on how NumPy's C was compiled.
FLOAT_TO_INT = (np.dtype(np.int32), np.dtype(np.int64))
