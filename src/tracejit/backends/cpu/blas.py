"""The caller's BLAS threads, held back while kernels compile in the background.

OpenBLAS threads spin-wait between calls: a caller running NumPy's matmuls (the
interpreter's, while a signature waits for its kernels) keeps every core busy at normal
priority, and the compile workers, niced so as not to slow the caller, starve (measured:
the two-moons step's kernels took 15-24 s to arrive instead of 2.4 s). While a background
compile is in flight, OpenBLAS therefore runs on one core fewer than the machine has, and
on all of them again afterwards, through threadpoolctl (OpenBLAS, MKL and BLIS alike;
it leaves other libraries' thread settings alone).
"""

from __future__ import annotations

import ctypes
import functools
import threading

from ...config import cores

_lock = threading.Lock()
_holders = 0
_limits = None  # threadpoolctl's limiter while a compile holds a core back


@functools.cache
def _controller():
    """threadpoolctl's view of the BLAS and OpenMP libraries this process has loaded (it
    finds them portably: dl_iterate_phdr, the macOS and Windows equivalents)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def openblas_paths() -> list[str]:
    """The files of the OpenBLAS libraries this process has loaded (NumPy's, SciPy's)."""
    return sorted(c.filepath for c in _controller().lib_controllers
                  if c.internal_api == "openblas")


_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")


@functools.cache
def openblas_threads() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr] | None:
    """(set, get) of the loaded OpenBLAS's thread count, called directly: a driver running
    tiny matmuls switches it around every call (``loops._one_blas_thread``), where
    threadpoolctl's API costs tens of microseconds."""
    for path in openblas_paths():
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
    global _holders, _limits
    with _lock:
        _holders += 1
        if _holders == 1:
            now = max((c.num_threads for c in _controller().lib_controllers
                       if c.user_api == "blas"), default=1)
            if now > 1 and cores() > 1:
                _limits = _controller().limit(limits=min(now, cores() - 1), user_api="blas")
                _let_any_thread_set()


def release() -> None:
    """Undo one :func:`hold_back`; the last gives the BLAS its threads back."""
    global _holders, _limits
    with _lock:
        _holders -= 1
        if _holders == 0 and _limits is not None:
            _limits.restore_original_limits()
            _let_any_thread_set()
            _limits = None


def _let_any_thread_set() -> None:
    """threadpoolctl lets only the thread that last set OpenBLAS's (process-wide) thread
    count set it again, and ignores the others: the caller holds a core back, and a
    compile worker's thread gives it back."""
    from threadpoolctl import OpenBLASController

    OpenBLASController.clear_controlling_thread(force=True)
