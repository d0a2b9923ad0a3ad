"""NumPy names that must see traced values but never dispatch to them.

``np.array([a, b])``, ``np.zeros(n)`` and ``np.random.rand(3)`` never call a Tracer's
protocols: NumPy builds the array itself (asking each element for a concrete value) or
computes without any array argument. So while a trace is active, the module attributes
registered here (``numpy.array``, ``numpy.random.rand``, ...) are replaced by wrappers
that hand calls made from the user's code in the tracing thread to tracejit's
implementation, and everything else (other threads, NumPy's and tracejit's own code) to
the original.

The replacements are installed when the first trace in the process starts and removed
when the last one ends, so outside a trace NumPy's functions are NumPy's own objects and
cost nothing extra. Code that bound a name before the trace (``from numpy import zeros``)
keeps the original; its calls are not intercepted.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

_lock = threading.Lock()
_local = threading.local()
_active = 0  # traces running in all threads


@dataclass
class _Replacement:
    module: ModuleType
    name: str
    impl: Callable  # impl(original, *args, **kwargs)
    original: Callable | None = None


_REPLACEMENTS: list[_Replacement] = []
# Callers whose calls always go to the original: NumPy's own Python code (np.pad calling
# np.zeros on concrete arrays) and tracejit's (the tracer builds constants with np.array).
_LIBRARIES = ("numpy.", "tracejit.")


def replaces(module: ModuleType, name: str):
    """Register ``impl(original, *args, **kwargs)`` as what ``module.name(...)`` does when
    called from user code while this thread traces. ``impl`` may call ``original``."""
    def register(impl: Callable) -> Callable:
        if any(r.module is module and r.name == name for r in _REPLACEMENTS):
            raise ValueError(f"{module.__name__}.{name} is replaced twice")
        _REPLACEMENTS.append(_Replacement(module, name, impl))
        return impl

    return register


def tracing_here() -> bool:
    """Whether the calling thread is inside a trace."""
    return getattr(_local, "depth", 0) > 0


def _from_user(frame) -> bool:
    module = frame.f_globals.get("__name__", "")
    return not (module + ".").startswith(_LIBRARIES)


def _wrapper(r: _Replacement, original: Callable) -> Callable:
    if not callable(original):  # an indexing object: np.r_[...], np.c_[...]
        return _Indexer(r.impl, original)
    impl = r.impl

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if getattr(_local, "depth", 0) and _from_user(sys._getframe(1)):
            return impl(original, *args, **kwargs)
        return original(*args, **kwargs)

    wrapper.__tracejit_original__ = original
    return wrapper


class _Indexer:
    """The stand-in for a module attribute used by indexing (``np.r_[a, b]``): ``impl(
    original, key)`` for the tracing thread's user code, ``original[key]`` otherwise."""

    def __init__(self, impl: Callable, original):
        self._impl = impl
        self.__tracejit_original__ = original

    def __getitem__(self, key):
        original = self.__tracejit_original__
        if getattr(_local, "depth", 0) and _from_user(sys._getframe(1)):
            return self._impl(original, key)
        return original[key]

    def __getattr__(self, name):
        return getattr(self.__tracejit_original__, name)


def begin() -> None:
    """A trace starts in this thread: install the replacements if it is the first."""
    global _active
    _local.depth = getattr(_local, "depth", 0) + 1
    with _lock:
        _active += 1
        if _active == 1:
            for r in _REPLACEMENTS:
                r.original = getattr(r.module, r.name)
                setattr(r.module, r.name, _wrapper(r, r.original))


def end() -> None:
    """A trace ends in this thread: restore NumPy's own names after the last one."""
    global _active
    _local.depth -= 1
    with _lock:
        _active -= 1
        if _active == 0:
            for r in _REPLACEMENTS:
                setattr(r.module, r.name, r.original)
                r.original = None
