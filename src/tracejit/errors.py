"""Typed exceptions for everything a user can cause.

Each class also subclasses the builtin exception NumPy raises in the same situation, so
code written against NumPy (``except ValueError``) keeps working. Messages name the user's
file and line and say what to do instead.
"""

from __future__ import annotations

import numpy as np

from .locations import SourceLocation, user_location


class TracejitError(Exception):
    """Base class of tracejit's errors: catch it to catch them all.

    Each subclass also subclasses the builtin exception NumPy raises in the same
    situation. The message names the user's file and line (``location``) and ends
    with a hint saying what to do instead.

    Attributes:
        message: What went wrong, without the location and hint.
        hint: The fix, or None.
        location: The user's source line (a ``SourceLocation``), or None.

    Example:
        >>> f = tj.jit(lambda x, y: x + y)
        >>> try:
        ...     f(np.ones(3), np.ones(4))
        ... except tj.errors.TracejitError as e:
        ...     print(e.message)
        ...     print(e.hint)
        operands could not be broadcast together with shapes (3,) (4,)
        check the shapes; insert axes with x[:, None] or np.expand_dims to broadcast
    """

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
    """The function could not be traced: the base of the errors found while tracing.

    Tracing runs the function once on stand-ins for its arrays; these errors come from
    that run, at the user's line, before anything is compiled.

    Example:
        >>> issubclass(tj.errors.ShapeError, tj.errors.TracingError)
        True
    """


class ConcretizationError(TracingError, TypeError):
    """Python needed the concrete value of a traced one.

    An ``if``, ``while``, ``float(x)``, ``np.asarray(x)`` or ``bool`` on an array
    computed from the arguments cannot be decided while tracing: the value is not known
    until the compiled code runs. Compute both branches with ``np.where``, use
    ``tracejit.lax`` loops for data-dependent loops, or make the argument static
    (``static_argnums``). A TypeError, as Python's own refusals are.

    Example:
        >>> f = tj.jit(lambda x: x if x > 0 else -x)
        >>> f(np.float64(2.0))
        Traceback (most recent call last):
            ...
        tracejit.errors.ConcretizationError: bool() (an `if`, `while`, ...
    """


class UnsupportedOperation(TracingError, NotImplementedError):
    """A NumPy function, argument or method that tracejit does not implement.

    The message names the function and the user's line; call it outside the jitted
    function, or write it with the operations the README's tables list. A
    NotImplementedError.

    Example:
        >>> tj.jit(lambda x: np.linalg.eig(x))(np.eye(2))
        Traceback (most recent call last):
            ...
        tracejit.errors.UnsupportedOperation: numpy.linalg.eig is not supported by tracejit...
    """


class ShapeError(TracingError, ValueError):
    """Shapes that NumPy would reject (broadcasting, reshape, core dimensions).

    Shapes are static while tracing, so this is found at the user's line before
    anything runs. A ValueError, as NumPy's.

    Example:
        >>> tj.jit(lambda x, y: x + y)(np.ones(3), np.ones(4))
        Traceback (most recent call last):
            ...
        tracejit.errors.ShapeError: operands could not be broadcast together with shapes ...
    """

    default_hint = (
        "shapes are static while tracing: print(x.shape) inside the function to see them, "
        "and fix the operands with reshape, np.expand_dims or x[:, None]"
    )


class WeightsShapeError(TracingError, RuntimeError):
    """Weights of the wrong shape where NumPy raises RuntimeError.

    ``np.cov``'s ``fweights``/``aweights`` must have one entry per observation. A
    RuntimeError, as NumPy's.

    Example:
        >>> f = tj.jit(lambda x, w: np.cov(x, fweights=w))
        >>> f(np.ones((2, 4)), np.ones(3, int))
        Traceback (most recent call last):
            ...
        tracejit.errors.WeightsShapeError: incompatible numbers of samples and fweights...
    """


class AxisError(ShapeError, IndexError):
    """An axis out of range; like NumPy's AxisError it is a ValueError and an IndexError.

    Example:
        >>> tj.jit(lambda x: np.sum(x, axis=2))(np.ones(3))
        Traceback (most recent call last):
            ...
        tracejit.errors.AxisError: axis 2 is out of bounds for array of dimension 1...
    """

    default_hint = "an array with ndim dimensions has axes 0..ndim-1 (or -ndim..-1)"


class DTypeError(TracingError, TypeError):
    """Dtypes that NumPy would reject (no ufunc loop, unsafe in-place cast).

    Convert the operands explicitly with ``.astype``. A TypeError, as NumPy's.

    Example:
        >>> tj.jit(lambda x: np.bitwise_and(x, 1))(np.ones(3))
        Traceback (most recent call last):
            ...
        tracejit.errors.DTypeError: numpy.bitwise_and has no loop for inputs (f64, i64)...
    """

    default_hint = "convert operands explicitly with .astype(dtype)"


class IndexOutOfBounds(TracejitError, IndexError):
    """An index outside an axis, found while tracing or while running.

    A constant index is checked while tracing; a traced one (an array argument) when
    the compiled code runs, where NumPy would check it. An IndexError, as NumPy's.

    Example:
        >>> f = tj.jit(lambda x, i: x[i])
        >>> f(np.ones(3), np.int64(7))
        Traceback (most recent call last):
            ...
        tracejit.errors.IndexOutOfBounds: index 7 is out of bounds for axis 0 with size 3...
    """

    default_hint = (
        "valid indices for an axis of size n are -n..n-1; bound them with np.clip(i, 0, n - 1) "
        "or use np.take(x, i, mode='wrap'/'clip')"
    )


class InvalidValue(TracejitError, ValueError):
    """A value NumPy rejects while computing, e.g. an integer to a negative integer power.

    A ValueError, as NumPy's.

    Example:
        >>> tj.jit(lambda x: x ** -1)(np.arange(1, 4))
        Traceback (most recent call last):
            ...
        tracejit.errors.InvalidValue: Integers to negative integer powers are not allowed...
    """


class ConfigError(TracejitError, ValueError):
    """A value that a ``tracejit.config`` setting cannot take (a ValueError).

    Example:
        >>> tj.config.compile = "later"
        Traceback (most recent call last):
            ...
        tracejit.errors.ConfigError: compile must be one of ('sync', 'background'), not 'later'
        ...
    """

    default_hint = "see help(tracejit.config) for each setting and the values it takes"


class UnknownSetting(TracejitError, AttributeError):
    """A ``tracejit.config`` setting that does not exist, e.g. a misspelt name.

    An AttributeError, as Python's for a missing attribute.

    Example:
        >>> tj.config.complie = "sync"
        Traceback (most recent call last):
            ...
        tracejit.errors.UnknownSetting: tracejit.config has no setting 'complie'
        ...
    """

    default_hint = ("the settings are compile, min_kernel_size, compile_workers and "
                    "roll_loops")


class LinAlgError(TracejitError, np.linalg.LinAlgError):
    """What ``numpy.linalg`` raises, as its own ``LinAlgError`` subclass.

    A stack that is not of square matrices is found while tracing; a singular or not
    positive definite matrix while running. ``except np.linalg.LinAlgError`` catches it.

    Example:
        >>> tj.jit(np.linalg.inv)(np.zeros((2, 2)))
        Traceback (most recent call last):
            ...
        tracejit.errors.LinAlgError: Singular matrix...
    """


class ScalarOverflow(TracejitError, OverflowError):
    """A Python integer that does not fit the dtype it combines with (NumPy 2 raises).

    An OverflowError, as NumPy's.

    Example:
        >>> tj.jit(lambda x: x + 300)(np.ones(3, np.int8))
        Traceback (most recent call last):
            ...
        tracejit.errors.ScalarOverflow: Python integer 300 out of bounds for int8...
    """

    default_hint = "convert the array to a wider dtype with .astype(...) first"


class InvalidArgument(TracejitError, TypeError):
    """An argument tracejit cannot take.

    A jitted call's argument that is neither an array nor hashable, an unhashable
    static value, an unknown backend, device or compile mode, a bad ``argnums``. The
    message names the argument (``x[2]`` for a leaf of a pytree). A TypeError.

    Example:
        >>> tj.jit(lambda x: x)([1.0, {2}])
        Traceback (most recent call last):
            ...
        tracejit.errors.InvalidArgument: argument x[1] is a set, which jit can neither ...
        >>> tj.jit(np.sin, backend="tpu")
        Traceback (most recent call last):
            ...
        tracejit.errors.InvalidArgument: unknown backend 'tpu'...
    """


class IRError(TracejitError):
    """An ill-formed IR graph: a bug in tracejit or in a pass, never the user's.

    The verifier raises it after a pass breaks the graph's rules; ``jit`` reports it as
    an :class:`InternalCompilerError` with a reproducer. Please report it.

    Example:
        >>> issubclass(tj.errors.IRError, tj.errors.TracejitError)
        True
    """


class BackendUnavailable(TracejitError, RuntimeError):
    """A backend or device cannot run on this machine (a missing library or GPU).

    The message says which is missing: CuPy not installed, no GPU visible, a GPU
    number beyond those present. Install the ``cuda`` extra, or stay on the CPU. A
    RuntimeError.

    Example:
        >>> tj.device("cuda:99")
        Traceback (most recent call last):
            ...
        tracejit.errors.BackendUnavailable: cuda:99 ...
    """


class PlacementError(TracejitError, RuntimeError):
    """An op cannot run on the device asked for with ``strict=True``.

    Theano's ``assert_no_cpu_op``: without ``strict`` the op would run on the CPU, with
    transfers around it, and a :class:`PlacementWarning`. Rewrite the op, or drop
    ``strict``. A RuntimeError; raised when the function compiles.

    Example:
        >>> issubclass(tj.errors.PlacementError, RuntimeError)
        True
    """


class GraphvizNotFound(TracejitError, RuntimeError):
    """Drawing a graph needs Graphviz's ``dot`` program, which is not on ``PATH``.

    Raised by ``graph.render`` and ``lower(...).render``; in Jupyter a graph without
    Graphviz shows as its IR text instead. Install the ``graphviz`` OS package, or use
    ``to_dot()``, which needs no Graphviz.

    Example:
        >>> import os, numpy as np, tracejit as tj
        >>> lowered = tj.jit(lambda x: x + 1).lower(np.ones(3))
        >>> path, os.environ["PATH"] = os.environ["PATH"], ""
        >>> try:
        ...     lowered.render("graph.svg")
        ... except tj.errors.GraphvizNotFound as e:
        ...     print(type(e).__name__, "is a RuntimeError:", isinstance(e, RuntimeError))
        ... finally:
        ...     os.environ["PATH"] = path
        GraphvizNotFound is a RuntimeError: True
    """

    default_hint = (
        "install the graphviz OS package (apt install graphviz, dnf install graphviz, "
        "brew install graphviz, or conda install -c conda-forge graphviz); to_dot() gives "
        "the DOT text without it"
    )


class KernelError(TracejitError, RuntimeError):
    """A GPU kernel failed.

    Found by the debug switch ``TRACEJIT_CUDA_SYNC=1``, which synchronises after every
    launch so that the error names the kernel that caused it (without it, CUDA reports
    a failure at some later call). A RuntimeError.

    Example:
        >>> issubclass(tj.errors.KernelError, RuntimeError)
        True
    """


class PlacementWarning(UserWarning):
    """Ops of a function asked to run on a GPU that run on the CPU instead.

    They run with transfers around them, which usually costs more than the op;
    ``strict=True`` (on ``jit`` or ``tj.device``) makes this a :class:`PlacementError`.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():  # a CPU fallback fails this block's calls
        ...     warnings.simplefilter("error", tj.errors.PlacementWarning)
        ...     tj.jit(np.sin)(np.zeros(2))  # (on the CPU: nothing to fall back from)
        array([0., 0.])
    """


class DiskCacheWarning(UserWarning):
    """The on-disk compile cache was unusable (a corrupt entry, an unwritable directory).

    tracejit discards what it cannot trust and compiles afresh, so results stay correct;
    the warning only says that a later process may pay for compiling again.

    Example:
        >>> issubclass(tj.errors.DiskCacheWarning, UserWarning)
        True
    """


class RechunkWarning(UserWarning):
    """On Dask arrays, an op that needs whole arrays gathers its chunks into one task.

    A sort, a solve or a loop over the chunked axis runs on one worker, which then
    holds all of its input: correct, but no longer parallel or out of core.

    Example:
        >>> issubclass(tj.errors.RechunkWarning, UserWarning)
        True
    """


class RetraceWarning(UserWarning):
    """A jitted function was compiled for many values of a Python int argument.

    An int the function uses concretely (a ``range``, shape, index or ``if``) is made
    static automatically, one compile per value; after many values this warns. A loop
    over ``range(n)`` can be a ``tracejit.lax.fori_loop``, traced once for every n; if
    a few values are by design, say so with ``static_argnums``.

    Example:
        >>> import warnings
        >>> f = tj.jit(lambda x, n: x[:n])
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     for n in range(10):
        ...         _ = f(np.ones(10), n)
        >>> [type(w.message).__name__ for w in caught]
        ['RetraceWarning']
    """


class LoopError(TracingError, TypeError):
    """A loop whose body does not fit it.

    Raised for ``scan``, ``lax.scan``, ``fori_loop`` and ``while_loop``: a carry whose
    shape or dtype changes from one step to the next, taps asking for more initial
    values than given, scanned inputs of different lengths, or a body closing over a
    traced value of another trace. Raised while tracing, at the line calling the loop.

    Example:
        >>> tj.lax.scan(lambda c, x: (np.append(c, x), x), np.zeros(1), np.arange(3.0))
        Traceback (most recent call last):
            ...
        tracejit.errors.LoopError: lax.scan: the carry changes type between iterations...
    """


class InPlaceArgumentError(UnsupportedOperation):
    """An in-place write that a jitted function cannot honour as NumPy would.

    ``x[i] = v``, ``x += y`` or ``out=`` into a NumPy array that is no argument of the
    traced function (a global or closure buffer: the write would happen once, while
    tracing), into arguments that share memory, or one whose effect depends on the data
    in a way tracing cannot decide. Pass the array as an argument (writes to arguments
    reach the caller, as in NumPy), or use the returned value.

    Example:
        >>> buf = np.zeros(3)
        >>> tj.jit(lambda x: np.add(x, 1, out=buf))(np.ones(3))
        Traceback (most recent call last):
            ...
        tracejit.errors.InPlaceArgumentError: numpy.add(..., out=...) into a NumPy array ...
    """

    default_hint = (
        "pass the array to write as an argument of the jitted function (writes to arguments "
        "reach the caller, as in NumPy), or use the returned value"
    )


class FrozenRandomState(UnsupportedOperation):
    """A random generator the traced function drew from without tracejit seeing it.

    One reached through a global or a closure, or a name bound before the trace such
    as ``from numpy.random import rand``: its numbers would be frozen into the compiled
    code, the same on every call, so tracing stops instead (the generator's state is
    put back as it was). Pass the generator as an argument (``f(x, rng)``), or call
    ``np.random.<function>`` through the module inside the function.

    Example:
        >>> from numpy.random import rand
        >>> tj.jit(lambda x: x + rand(3))(np.ones(3))
        Traceback (most recent call last):
            ...
        tracejit.errors.FrozenRandomState: the traced function drew random numbers ...
    """

    default_hint = (
        "pass the generator to the jitted function as an argument (f(x, rng)), or call "
        "np.random.<function> through the np.random module inside the function"
    )


class ReadOnlyDestination(TracejitError, ValueError):
    """A write into an array NumPy makes read-only.

    A broadcast view (``np.broadcast_to``) or an argument whose ``flags.writeable`` is
    False. Write into a copy, or make the array writeable. A ValueError, as NumPy's.

    Example:
        >>> def fill(x):
        ...     x[0] = 1.0
        >>> tj.jit(fill)(np.broadcast_to(np.zeros(1), (3,)))
        Traceback (most recent call last):
            ...
        tracejit.errors.ReadOnlyDestination: assignment destination is read-only...
    """

    default_hint = "write into a copy (x = x.copy()), or make the array writeable"


class KernelMismatch(TracejitError, RuntimeError):
    """With ``check=True``, a compiled step disagreed with the reference interpreter.

    ``check=True`` runs every compiled step and the interpreter side by side; a
    mismatch is a tracejit bug, and the reproducer holds what a report needs. A
    RuntimeError.

    Attributes:
        reproducer: The directory holding the inputs, the IR and the generated source.

    Example:
        >>> issubclass(tj.errors.KernelMismatch, RuntimeError)
        True
    """

    def __init__(self, message: str, *, reproducer: str | None = None, **kw):
        self.reproducer = reproducer
        super().__init__(message, **kw)


class NonFiniteValue(TracejitError, FloatingPointError):
    """With ``check="nan"``, a step made a NaN or an infinity from finite inputs.

    JAX's ``debug_nans``: the message names the op, the user's line and the first bad
    index. Guard the operation's domain (``np.where`` before log/sqrt/divide,
    ``np.clip`` before exp) or use the stable forms in ``tracejit.nn``. A
    FloatingPointError.

    Example:
        >>> import warnings
        >>> f = tj.jit(np.log, check="nan")
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", RuntimeWarning)
        ...     f(np.array([-1.0]))
        Traceback (most recent call last):
            ...
        tracejit.errors.NonFiniteValue: check='nan': log in log produced nan from finite inputs...
    """

    default_hint = (
        "guard the operation's domain (np.where before log/sqrt/divide, np.clip before exp) "
        "or use the stable forms in tracejit.nn"
    )


class InternalCompilerError(TracejitError, RuntimeError):
    """A failure inside tracejit's passes, code generation or generated code.

    A bug in tracejit, never the user's: please report it with the reproducer
    directory attached. Nothing half-compiled stays in the cache. A RuntimeError.

    Attributes:
        reproducer: The directory to attach to a report (inputs, IR, source).

    Example:
        >>> issubclass(tj.errors.InternalCompilerError, RuntimeError)
        True
    """

    default_hint = "please report this bug with the reproducer directory attached"

    def __init__(self, message: str, *, reproducer: str | None = None, **kw):
        self.reproducer = reproducer
        super().__init__(message, **kw)
