"""Writes of traced values into NumPy arrays that are not arguments (``buf[0] = x[0]``).

NumPy's own ``ndarray.__setitem__`` receives the Tracer there: it asks it for a sequence
length or an array and fails with a ``ValueError`` ("setting an array element with a
sequence") or our ``ConcretizationError`` about ``np.asarray``, neither of which says what
went wrong. Tracing cannot honour such a write (it would happen once, while tracing), so
when tracing fails on a line that assigns into a subscript of a NumPy array, the error
becomes the ``InPlaceArgumentError`` that ``out=`` into the same array already raises.
"""

from __future__ import annotations

import ast
import types

import numpy as np

from ..errors import ConcretizationError, InPlaceArgumentError, TracejitError
from ..locations import SourceLocation, user_location_in
from .tracer import Tracer

__all__ = ["explain"]


def explain(error: Exception) -> InPlaceArgumentError | None:
    """The typed error for ``error`` (raised while tracing) if the user's line that raised
    it assigns into a NumPy array that is no traced value, else None."""
    if isinstance(error, TracejitError) and not isinstance(error, TypeError):
        return None  # ours already, and not about a conversion to an array
    frame, location = user_location_in(error.__traceback__)
    if frame is None:
        return None
    statement = _subscript_assignment(location)
    if statement is None:
        return None
    target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
    if not isinstance(_look_up(target.value, frame), np.ndarray):
        return None
    if not isinstance(error, ConcretizationError) and not _mentions_tracer(statement, frame):
        return None  # NumPy's own error about NumPy values (a shape mismatch): as it is
    return InPlaceArgumentError(
        f"`{location.text()}` writes traced values into the NumPy array "
        f"`{ast.unparse(target)}`, which is not an argument of the jitted function: the "
        "write would happen once, while tracing, not on every call",
        hint="pass the array as an argument (writes to arguments reach the caller, as in "
        "NumPy), or build the value and return it", location=location)


def _subscript_assignment(location: SourceLocation) -> ast.stmt | None:
    """The line's statement if it is ``a[...] = v`` or ``a[...] += v`` with ``a`` a name
    or an attribute chain (``self.buf``)."""
    try:
        statement = ast.parse(location.text())
    except SyntaxError:  # a statement over several lines: no verdict
        return None
    if len(statement.body) != 1:
        return None
    node = statement.body[0]
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
    if len(targets) == 1 and isinstance(targets[0], ast.Subscript) and _plain(
            targets[0].value):
        return node
    return None


def _mentions_tracer(statement: ast.stmt, frame: types.FrameType) -> bool:
    """Whether a name the statement reads is a Tracer, or a tuple, list or dict holding
    one (a pytree argument)."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            value = _look_up(node, frame)
            items = value.values() if isinstance(value, dict) else (
                value if isinstance(value, (list, tuple)) else (value,))
            if any(isinstance(v, Tracer) for v in items):
                return True
    return False


def _plain(expr: ast.expr) -> bool:
    """A name or a chain of attributes on one: safe to look up without running code
    beyond attribute access."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _look_up(expr: ast.expr, frame: types.FrameType):
    """The value of the name or attribute chain ``expr`` in ``frame`` (None if missing)."""
    if isinstance(expr, ast.Attribute):
        return getattr(_look_up(expr.value, frame), expr.attr, None)
    for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
        if expr.id in scope:
            return scope[expr.id]
    return None
