"""NumPy names that must see traced values but never dispatch to them.

``np.array([a, b])``, ``np.zeros(n)`` and ``np.random.rand(3)`` never call a Tracer's
protocols: NumPy builds the array itself (asking each element for a concrete value) or
computes without any array argument. So while a trace is active, the module attributes
registered here (``numpy.array``, ``numpy.random.rand``, ...) are replaced by wrappers
that hand calls made from the user's code in the tracing thread to tracejit's
implementation, and everything else (other threads, NumPy's and tracejit's own code, C
extensions such as NumPy's random generators that look ``np.empty`` up while the user's
line calls something else) to the original. A call counts as the user's when the call
expression on the user's line names the function (``np.zeros(n)``, ``np.random.rand()``);
``z = np.zeros; z(n)`` calls NumPy's own.

The replacements are installed when the first trace in the process starts and removed
when the last one ends, so outside a trace NumPy's functions are NumPy's own objects and
cost nothing extra. Code that bound a name before the trace (``from numpy import zeros``)
keeps the original; its calls are not intercepted.
"""

from __future__ import annotations

import dis
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


def _calls(frame, name: str) -> bool:
    """Whether ``frame`` is calling ``name`` itself (``np.zeros(n)``), rather than calling
    something else that reached the wrapper from C: ``rng.standard_normal(3)`` runs Cython
    code that calls ``np.empty`` through the numpy module, which no Python frame shows,
    and it must get a real ndarray. Decided from the call's source position once per
    call site."""
    site = (frame.f_code, frame.f_lasti)
    callee = _CALLEES.get(site)
    if callee is None:
        callee = _CALLEES[site] = _callee(*site)
    return callee == name


_CALLEES: dict = {}


def _callee(code, offset: int) -> str:
    """The name the call at ``offset`` loads its callable by: the last name or attribute
    loaded, before the call, whose source span starts where the call's does and ends
    before it (``zeros`` in ``np.zeros(x.shape)``); "" when none is (a call of a call)."""
    instructions = list(dis.get_instructions(code))
    # f_lasti may point into the call's inline cache entries: the call is the last
    # instruction starting at or before it.
    call = next((i for i in reversed(instructions) if i.offset <= offset), None)
    offset = call.offset if call is not None else offset
    if getattr(call, "positions", None) is None or call.positions.lineno is None:
        return ""  # no source positions (Python 3.10): NumPy's own function
    start = (call.positions.lineno, call.positions.col_offset)
    end = (call.positions.end_lineno, call.positions.end_col_offset)
    best, best_end = "", None
    for i in instructions:
        p = i.positions
        if i.offset >= offset or not i.opname.startswith("LOAD_") or p is None \
                or (p.lineno, p.col_offset) != start:
            continue
        span_end = (p.end_lineno, p.end_col_offset)
        if span_end < end and (best_end is None or span_end > best_end):
            best, best_end = str(i.argval), span_end
    return best


def _wrapper(r: _Replacement, original: Callable) -> Callable:
    if not callable(original):  # an indexing object: np.r_[...], np.c_[...]
        return _Indexer(r.impl, original)
    impl, name = r.impl, r.name

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if getattr(_local, "depth", 0):
            frame = sys._getframe(1)
            if _from_user(frame) and _calls(frame, name):
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
