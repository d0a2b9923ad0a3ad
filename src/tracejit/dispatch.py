"""A jitted function's cached call: the steps every call of a compiled signature takes.

``PythonDispatcher`` defines them; ``Dispatcher`` is what :class:`~tracejit.api.
JitFunction` derives from: the same steps in C (``_dispatch.c``, built when tracejit is
installed) where that module was built, else the Python class. The C one exists because
these steps are most of a small program's call: the key alone (each array's ``shape`` and
``dtype``) costs 0.2 us an argument in Python, 0.01 us in C, and a NumPy program of two
ufunc calls takes about 1 us in all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import targets
from .profiler import ACTIVE as _PROFILES

_ndarray = np.ndarray
# The fast key of a Python float argument: the type itself, unlike any array's (shape,
# dtype), a 0-d float64 array's included (which is not weakly typed: x * f32 array
# differs); JitFunction's _simple_key tags its other arguments alike.
FLOAT = float


def python_fast_key(args: tuple, valued: bytes, inputs: list | None = None) -> tuple | None:
    """The cached call's key of positional arguments (None for a call it holds no key of):
    each C-contiguous array's (shape, dtype), a float's ``FLOAT``, None itself, an int's or
    bool's type (with its value where ``valued[i]``: the function needs it as a value), a
    str's type and value. ``_dispatch.fast_key`` gives a key with the same equalities, read off the
    arrays' structs. Positions past ``valued``'s end have no parameter's name: an int
    there, an int beyond int64, and any other argument take the general path.
    ``inputs``, if given, gets the runner's inputs: the arguments that are not values
    (None, strs, valued ints)."""
    key: list = []
    for i, a in enumerate(args):
        t = type(a)
        if t is _ndarray and not a.flags.c_contiguous:
            return None  # (its layout is part of its signature: api._leaf_key)
        if t is _ndarray or t is float:  # (a float: a weakly typed float64 scalar input)
            key.append((a.shape, a.dtype) if t is _ndarray else FLOAT)
        elif a is None or t is str:
            key.append(None if a is None else (t, a))
            continue
        elif t is int or t is bool:
            if i >= len(valued) or t is int and not -(2**63) <= a < 2**63:
                return None  # (an int beyond int64 is passed by value: api._leaf_key)
            if valued[i]:
                key.append((t, a))
                continue
            key.append(t)
        else:
            return None
        if inputs is not None:
            inputs.append(a)
    return tuple(key)


class PythonDispatcher:
    """The cached call, in Python: JitFunction's base where ``_dispatch`` was not built.

    A subclass sets ``_fast`` (a dict: fast key -> entry, whose ``run`` and ``finish``
    make the call), ``_hits`` (an ``itertools.count``), ``_valued`` (per positional
    parameter, whether the function needs an int there as a value: bytes) and defines
    ``_call(args, kwargs, bound)``, the general path.
    """

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function on these arguments, compiling their signature on first use.

        Arrays are traced by shape and dtype, so a call with new shapes compiles again;
        Python scalars are weakly typed 0-d inputs (NumPy 2 promotion), and hashable
        non-arrays (a mode string) are static values, part of the cache key.

        Args:
            *args: The function's positional arguments: arrays, scalars, and pytrees
                (tuples, lists, dicts) of them.
            **kwargs: Its keyword arguments, the same kinds.

        Returns:
            What the function returns, with arrays as NumPy would give them (ndarrays
                from the CPU, 0-d results as NumPy scalars, CuPy arrays from a GPU).

        Raises:
            InvalidArgument: An argument jit cannot take: an object array, an
                ``np.matrix``, an unhashable non-array, an unhashable static value.
            ConcretizationError: The function needs a traced value as a Python value
                (``if x > 0``, ``float(x)``).
            UnsupportedOperation: It calls a NumPy function or argument tracejit does
                not implement.
            ShapeError: Shapes NumPy would reject (``DTypeError``, ``AxisError`` and
                the other ``tracejit.errors`` classes likewise, each a subclass of the
                builtin exception NumPy raises).
            BackendUnavailable: The call runs in a ``tj.device("cuda")`` block on a
                machine without CuPy or a GPU.

        Example:
            >>> f = tj.jit(lambda x, scale: x * scale)
            >>> f(np.ones(2, np.float32), 3.0)
            array([3., 3.], dtype=float32)
            >>> f(np.ones(2, np.float32), scale=3.0)
            array([3., 3.], dtype=float32)
        """
        if not kwargs and not _PROFILES and not targets.gpu_requested:
            inputs: list = []
            entry = self._fast.get(python_fast_key(args, self._valued, inputs))
            if entry is not None:  # (no entry is under None)
                next(self._hits)
                return entry.finish(entry.run(*inputs))
        return self._call(args, kwargs, False)


def first(outs: list) -> Any:
    """The finisher of a function returning one array the runner made: ``outs[0]``."""
    return outs[0]


def none(outs: list) -> None:
    """The finisher of a function returning nothing (it writes to its arguments)."""
    return None


def c_ordered(out):
    """``out`` where it is C-contiguous (as a kernel's output is), else a C-ordered copy:
    a NumPy call of the runner's follows its operands' layout (``x + 1`` of a Fortran
    ``x``) where NumPy's result, a copy or a C-ordered array made in the function, is C."""
    if type(out) is not np.ndarray or out.flags.c_contiguous:
        return out
    return np.array(out, order="C")


def first_ordered(outs: list) -> Any:
    """The finisher of a function returning one array the runner made, C-ordered."""
    return c_ordered(outs[0])


def ordered_tuple(outs: list) -> tuple:
    """The finisher of a flat tuple of arrays the runner made, each C-ordered."""
    return tuple(c_ordered(out) for out in outs)


try:
    from ._dispatch import Dispatcher, WriteBack, configure, fast_key
except ImportError:  # (installed without a C compiler)
    Dispatcher, fast_key = PythonDispatcher, python_fast_key  # type: ignore[misc]
    WriteBack = None  # (api._Writes writes its steps out in Python)
else:
    configure(_PROFILES, vars(targets), first, none, first_ordered,
              ordered_tuple)  # (finished in C: no Python frame)

BUILT = Dispatcher is not PythonDispatcher  # whether the C module serves the calls
