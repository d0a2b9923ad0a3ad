"""The caller's BLAS threads, held back while kernels compile in the background.

OpenBLAS threads spin-wait between calls: a caller running NumPy's matmuls (the
interpreter's, while a signature waits for its kernels) keeps every core busy at normal
priority, and the compile workers, niced so as not to slow the caller, starve (measured:
the two-moons step's kernels took 15-24 s to arrive instead of 2.4 s). While a background
compile is in flight, OpenBLAS therefore runs on one core fewer than the machine has, and
on all of them again afterwards. Only OpenBLAS is known (NumPy's wheels bundle it); with
another BLAS nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import threading

from ...config import cores

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")

_lock = threading.Lock()
_holders = 0
_saved: int | None = None


@functools.cache
def _openblas() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr] | None:
    """(set, get) of the OpenBLAS loaded in this process, found in its memory map."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for setter in _SETTERS:
            getter = setter.replace("_set_", "_get_")
            if hasattr(lib, setter) and hasattr(lib, getter):
                return getattr(lib, setter), getattr(lib, getter)
    return None


def hold_back() -> None:
    """Leave a core to the compile workers until the matching :func:`release`."""
    global _holders, _saved
    with _lock:
        _holders += 1
        blas = _openblas() if _holders == 1 else None
        if blas is not None:
            set_threads, get_threads = blas
            _saved = get_threads()
            set_threads(max(1, min(_saved, cores() - 1)))


def release() -> None:
    """Undo one :func:`hold_back`; the last gives OpenBLAS its threads back."""
    global _holders, _saved
    with _lock:
        _holders -= 1
        if _holders == 0 and _saved is not None:
            _openblas()[0](_saved)
            _saved = None
