"""Typed exceptions for everything a user can cause.

Each class also subclasses the builtin exception NumPy raises in the same situation, so
code written against NumPy (``except ValueError``) keeps working. Messages name the user's
file and line and say what to do instead.
"""

from __future__ import annotations

import numpy as np

from .locations import SourceLocation, user_location


class TracejitError(Exception):
    """Base class. ``location`` is the user's source line (or None), ``hint`` the fix."""

    default_hint: str | None = None

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: SourceLocation | None = None,
    ):
        self.message = message
        self.hint = hint or self.default_hint
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
    """Python needed the concrete value of a traced one (``if``, ``float``, ``np.asarray``)."""


class UnsupportedOperation(TracingError, NotImplementedError):
    """A NumPy function, argument or method that tracejit does not implement."""


class ShapeError(TracingError, ValueError):
    """Shapes that NumPy would reject (broadcasting, reshape, core dimensions)."""

    default_hint = (
        "shapes are static while tracing: print(x.shape) inside the function to see them, "
        "and fix the operands with reshape, np.expand_dims or x[:, None]"
    )


class WeightsShapeError(TracingError, RuntimeError):
    """Weights of the wrong shape where NumPy raises RuntimeError (``np.cov``'s
    ``fweights``/``aweights``)."""


class AxisError(ShapeError, IndexError):
    """An axis out of range; like NumPy's AxisError it is a ValueError and an IndexError."""

    default_hint = "an array with ndim dimensions has axes 0..ndim-1 (or -ndim..-1)"


class DTypeError(TracingError, TypeError):
    """Dtypes that NumPy would reject (no ufunc loop, unsafe in-place cast)."""

    default_hint = "convert operands explicitly with .astype(dtype)"


class IndexOutOfBounds(TracejitError, IndexError):
    """An index outside an axis, found while tracing (static) or while running (traced indices)."""

    default_hint = (
        "valid indices for an axis of size n are -n..n-1; bound them with np.clip(i, 0, n - 1) "
        "or use np.take(x, i, mode='wrap'/'clip')"
    )


class InvalidValue(TracejitError, ValueError):
    """A value NumPy rejects while computing, e.g. an integer to a negative integer power."""


class LinAlgError(TracejitError, np.linalg.LinAlgError):
    """What ``numpy.linalg`` raises: a stack that is not of square matrices (found while
    tracing), or a singular or not positive definite matrix (found while running)."""


class ScalarOverflow(TracejitError, OverflowError):
    """A Python integer that does not fit the dtype it combines with (NumPy 2 raises)."""

    default_hint = "convert the array to a wider dtype with .astype(...) first"


class InvalidArgument(TracejitError, TypeError):
    """An argument ``jit`` cannot take: unsupported leaf type, unhashable static value."""


class IRError(TracejitError):
    """An ill-formed IR graph: a bug in tracejit or in a pass, never the user's."""


class BackendUnavailable(TracejitError, RuntimeError):
    """A backend cannot run on this machine (a missing runtime library or device)."""


class PlacementError(TracejitError, RuntimeError):
    """An op cannot run on the device asked for with ``strict=True`` (Theano's
    ``assert_no_cpu_op``)."""


class GraphvizNotFound(TracejitError, RuntimeError):
    """Drawing a graph to a picture (``graph.render``, ``lower(...).render``) needs
    Graphviz's ``dot`` program, which is not on ``PATH``."""

    default_hint = (
        "install the graphviz OS package (apt install graphviz, dnf install graphviz, "
        "brew install graphviz, or conda install -c conda-forge graphviz); to_dot() gives "
        "the DOT text without it"
    )


class KernelError(TracejitError, RuntimeError):
    """A GPU kernel failed (found by the debug switch ``TRACEJIT_CUDA_SYNC=1``, which
    synchronises after every launch so that the error names the kernel that caused it)."""


class PlacementWarning(UserWarning):
    """Ops of a function asked to run on a GPU that run on the CPU instead (with transfers
    around them); ``strict=True`` makes this an error."""


class DiskCacheWarning(UserWarning):
    """The on-disk compile cache was unusable (a corrupt entry, an unwritable directory).

    tracejit discards what it cannot trust and compiles afresh, so results stay correct;
    the warning only says that a later process may pay for compiling again.
    """


class RechunkWarning(UserWarning):
    """On Dask arrays, an op that needs whole arrays (a sort, a solve, a loop) gathers
    its chunked inputs into one task: correct, but one worker holds all of it."""


class RetraceWarning(UserWarning):
    """A jitted function was traced and compiled for many values of a Python int argument
    it needs concretely (made static automatically): each new value costs a compile."""


class LoopError(TracingError, TypeError):
    """A loop (``scan``, ``lax.scan``, ``fori_loop``, ``while_loop``) whose body does not
    fit it: a carry whose shape or dtype changes from one step to the next, taps asking
    for more initial values than given, scanned inputs of different lengths, or a body
    closing over a traced value of another trace. Raised while tracing, at the line
    calling the loop."""


class InPlaceArgumentError(UnsupportedOperation):
    """An in-place write (``x[i] = v``, ``x += y``, ``out=``) that a jitted function cannot
    honour as NumPy would: into a NumPy array that is no argument of the traced function
    (a global or closure buffer: the write would happen once, while tracing), or one whose
    effect depends on the data in a way tracing cannot decide."""

    default_hint = (
        "pass the array to write as an argument of the jitted function (writes to arguments "
        "reach the caller, as in NumPy), or use the returned value"
    )


class FrozenRandomState(UnsupportedOperation):
    """A random generator the traced function drew from without tracejit seeing it (one
    reached through a global or a closure, or a name bound before the trace such as
    ``from numpy.random import rand``): its numbers would be frozen into the compiled
    code, the same on every call, so tracing stops instead (the generator's state is put
    back as it was)."""

    default_hint = (
        "pass the generator to the jitted function as an argument (f(x, rng)), or call "
        "np.random.<function> through the np.random module inside the function"
    )


class ReadOnlyDestination(TracejitError, ValueError):
    """A write into an array NumPy makes read-only: a broadcast view (``np.broadcast_to``)
    or an argument whose ``flags.writeable`` is False."""

    default_hint = "write into a copy (x = x.copy()), or make the array writeable"


class KernelMismatch(TracejitError, RuntimeError):
    """``check=True``: a compiled step disagreed with the reference interpreter.
    ``reproducer`` is the directory holding the inputs, the IR and the generated source."""

    def __init__(self, message: str, *, reproducer: str | None = None, **kw):
        self.reproducer = reproducer
        super().__init__(message, **kw)


class NonFiniteValue(TracejitError, FloatingPointError):
    """``check="nan"``: a step produced a NaN or an infinity from finite inputs (JAX's
    ``debug_nans``)."""

    default_hint = (
        "guard the operation's domain (np.where before log/sqrt/divide, np.clip before exp) "
        "or use the stable forms in tracejit.nn"
    )


class InternalCompilerError(TracejitError, RuntimeError):
    """A failure inside tracejit's own passes, code generation or generated code: a bug in
    tracejit, never the user's. ``reproducer`` is the directory to attach to a report."""

    default_hint = "please report this bug with the reproducer directory attached"

    def __init__(self, message: str, *, reproducer: str | None = None, **kw):
        self.reproducer = reproducer
        super().__init__(message, **kw)
