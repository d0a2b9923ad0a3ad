"""The CPU backend's op table: each loop-fusible op as a scalar Numba expression template.

``{0}``, ``{1}``, ... are the operands, already cast to the op's loop dtypes (NumPy's
``ufunc.resolve_dtypes``); the emitter casts the result to the IR dtype. An op/dtype
combination absent here (returns None) is not fused: it runs as a NumPy library step, so
this table only claims what it computes as NumPy does.
"""

from __future__ import annotations

import numpy as np

FLOAT = "fc"

# NaN-propagating maximum/minimum as NumPy computes them (measured, signed zeros included):
# a tie returns the second operand. fmax/fmin ignore a NaN operand, and on a tie return the
# negative zero if there is one.
_MAX = "({0} if ({0} > {1} or {0} != {0}) else {1})"
_MIN = "({0} if ({0} < {1} or {0} != {0}) else {1})"
_TIE = "({0} if np.signbit({0}) else {1})"
_FMAX = f"({{1}} if {{0}} != {{0}} else ({{0}} if ({{0}} > {{1}} or {{1}} != {{1}}) else " \
    f"({{1}} if {{0}} < {{1}} else {_TIE})))"
_FMIN = f"({{1}} if {{0}} != {{0}} else ({{0}} if ({{0}} < {{1}} or {{1}} != {{1}}) else " \
    f"({{1}} if {{0}} > {{1}} else {_TIE})))"

_ANY = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "negative": "(-{0})", "positive": "(+{0})", "absolute": "abs({0})",
    "square": "({0} * {0})", "maximum": _MAX, "minimum": _MIN, "fmax": _FMAX, "fmin": _FMIN,
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) ^ ({1} != 0))", "logical_not": "({0} == 0)",
    "where": "({1} if {0} else {2})",
}
_INT = {
    "floor_divide": "({0} // {1})", "remainder": "({0} % {1})",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "invert": "(~{0})", "isnan": "False", "isinf": "False", "isfinite": "True",
}
_BOOL = {"bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})",
         "bitwise_xor": "({0} ^ {1})", "invert": "(not {0})"}
_FLOAT = {
    "true_divide": "({0} / {1})", "floor_divide": "({0} // {1})", "remainder": "({0} % {1})",
    "power": "({0} ** {1})", "reciprocal": "(1 / {0})",
    "sign": "(1 if {0} > 0 else (-1 if {0} < 0 else (0 if {0} == 0 else {0})))",
    "isnan": "({0} != {0})", "isinf": "(abs({0}) == np.inf)",
    "isfinite": "(abs({0}) < np.inf)", "clip": f"{_MIN.format(_MAX, '{2}')}",
    "arctan2": "np.arctan2({0}, {1})", "hypot": "np.hypot({0}, {1})",
    "logaddexp": "np.logaddexp({0}, {1})",
}
for _name in ("sqrt cbrt sin cos tan arcsin arccos arcsinh arccosh arctanh "
              "floor ceil trunc rint").split():
    _FLOAT[_name] = f"np.{_name}({{0}})"

# Ops computed by the vectorisable functions of backends/cpu/math.py (``exp_f32`` ...):
# Numba's own np.exp & co. call scalar libm and stop the loop from vectorising. Trig stays
# on libm: the fast versions are exact only for |x| < ~1.6e6.
VECTOR_MATH = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "power",
               "sinh", "cosh", "arctan"}


def math_function(op: str, dtype: np.dtype) -> str:
    return f"{'pow' if op == 'power' else op}_{'f32' if dtype == np.float32 else 'f64'}"


def template(op: str, loop_dtypes: tuple[np.dtype, ...]) -> str | None:
    """The expression for ``op`` computed in ``loop_dtypes``, or None when not supported."""
    kinds = {d.kind for d in loop_dtypes}
    if "c" in kinds:
        return None  # complex arithmetic stays with NumPy
    if op in _ANY:
        return _ANY[op]
    if op == "clip" and kinds <= set("iu"):
        return _MIN.format(_MAX, "{2}")
    if kinds == {"b"}:
        return _BOOL.get(op)
    if kinds <= set("iu"):
        return _INT.get(op)
    if kinds <= set("f"):
        if op in VECTOR_MATH:
            args = ", ".join(f"{{{i}}}" for i in range(len(loop_dtypes)))
            return f"{math_function(op, loop_dtypes[0])}({args})"
        return _FLOAT.get(op)
    return None
