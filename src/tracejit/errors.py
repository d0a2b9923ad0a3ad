"""Typed exceptions for everything a user can cause.

Each class also subclasses the builtin exception NumPy raises in the same situation, so
code written against NumPy (``except ValueError``) keeps working. Messages name the user's
file and line and say what to do instead.
"""

from __future__ import annotations

from .source import SourceLocation, user_location


class TracejitError(Exception):
    """Base class. ``location`` is the user's source line (or None), ``hint`` the fix."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: SourceLocation | None = None,
    ):
        self.message = message
        self.hint = hint
        self.location = location if location is not None else user_location()
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.location is not None:
            parts.append(f"  at {self.location}")
            text = self.location.text()
            if text:
                parts.append(f"    {text}")
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        return "\n".join(parts)


class TracingError(TracejitError):
    """The function could not be traced."""


class ConcretizationError(TracingError, TypeError):
    """Python needed a concrete value (``if``, ``bool``, ``float``, ``np.asarray``) of a traced one."""


class UnsupportedOperation(TracingError, NotImplementedError):
    """A NumPy function, argument or method that tracejit does not implement."""


class ShapeError(TracingError, ValueError):
    """Shapes that NumPy would reject (broadcasting, reshape, core dimensions)."""


class AxisError(ShapeError, IndexError):
    """An axis out of range; like ``numpy.exceptions.AxisError`` it is a ValueError and an IndexError."""


class DTypeError(TracingError, TypeError):
    """Dtypes that NumPy would reject (no ufunc loop, unsafe in-place cast)."""


class IndexOutOfBounds(TracejitError, IndexError):
    """An index outside an axis, found while tracing (static) or while running (traced indices)."""


class InvalidArgument(TracejitError, TypeError):
    """An argument ``jit`` cannot take: unsupported leaf type, unhashable static value."""


class IRError(TracejitError):
    """An ill-formed IR graph: a bug in tracejit or in a pass, never the user's."""
