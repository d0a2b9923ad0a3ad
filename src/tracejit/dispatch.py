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


def python_fast_key(args: tuple) -> tuple | None:
    """The cached call's key of positional ndarrays and Python floats: each array's
    (shape, dtype), a float's ``FLOAT``; None for any other call. ``_dispatch.fast_key``
    gives a key with the same equalities (bytes read off the arrays' structs)."""
    key = []
    for a in args:
        t = type(a)
        if t is _ndarray:
            key.append((a.shape, a.dtype))
        elif t is float:  # a Python float: a weakly typed float64 scalar input
            key.append(FLOAT)
        else:
            return None
    return tuple(key)


class PythonDispatcher:
    """The cached call, in Python: JitFunction's base where ``_dispatch`` was not built.

    A subclass sets ``_fast`` (a dict: fast key -> entry, whose ``run`` and ``finish``
    make the call), ``_hits`` (an ``itertools.count``) and defines ``_call(args, kwargs,
    bound)``, the general path.
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
            entry = self._fast.get(fast_key(args))  # (a None key is never in it)
            if entry is not None:
                next(self._hits)
                return entry.finish(entry.run(*args))
        return self._call(args, kwargs, False)


try:
    from ._dispatch import Dispatcher, configure, fast_key
except ImportError:  # (installed without a C compiler)
    Dispatcher, fast_key = PythonDispatcher, python_fast_key  # type: ignore[misc]
else:
    configure(_PROFILES, vars(targets))

BUILT = Dispatcher is not PythonDispatcher  # whether the C module serves the calls
