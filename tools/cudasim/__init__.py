"""cudasim: an emulated CuPy, so that code launching CUDA kernels through CuPy runs (and is
tested) on a machine without a GPU.

``cudasim.cupy`` and ``cudasim.cupyx`` are modules implementing a small subset of CuPy with
CuPy's semantics; everything else is absent (AttributeError), so code under test cannot
depend on more by accident. Device arrays are host NumPy arrays labelled with a device;
``cupy.RawModule`` compiles CUDA C with g++ after a shim header (``cuda_shim.h``) and runs
each kernel's blocks one after another, each block's threads as fibers on the launching
thread (scheduler "fibers", the default: deterministic) or as OS threads ("threads": truly
concurrent, for hunting races, about 100 times slower; ``set_scheduler`` or
``CUDASIM_SCHEDULER``).

Activate it in a test::

    import cudasim

    with cudasim.installed() as cupy:   # sys.modules["cupy"], ["cupyx"], ... are the emulator
        ...                             # code doing `import cupy` gets it
    cudasim.stats.h2d                   # transfers and launches, counted

or use ``cudasim.cupy`` directly. Stricter than CuPy on purpose: implicit conversion to
NumPy raises (``np.exp(x)``, ``np.asarray(x)``, ``bool(x)``, ``x == y``); NumPy arrays and
lists are refused where CuPy would copy them to the device implicitly; a kernel's pointer
arguments must be C-contiguous device arrays of the declared element type on the current
device, and its scalars NumPy scalars of exactly the declared type; the block must equal
the kernel's ``__launch_bounds__``. See README.md beside this file.
"""

from __future__ import annotations

import contextlib
import sys
import types

from . import _array, _cuda, _fft, _linalg
from ._array import ndarray
from ._errors import CompileError, CUDADriverError, CUDARuntimeError, IllegalAddressError
from ._state import (
    reset,
    scheduler,
    set_deadlock_seconds,
    set_device_count,
    set_scheduler,
    stats,
)

__all__ = ["CUDADriverError", "CUDARuntimeError", "CompileError", "IllegalAddressError",
           "compile_module", "cupy", "cupyx", "install", "installed", "kernels_of", "reset",
           "scheduler", "set_deadlock_seconds", "set_device_count", "set_scheduler", "stats",
           "uninstall"]

compile_module = _cuda.compile_module
kernels_of = _cuda.kernels_of

def _module(name: str, doc: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name, doc)
    for k, v in attrs.items():
        setattr(m, k, v)
    return m

_runtime = _module("cupy.cuda.runtime", "Emulated cupy.cuda.runtime.",
                   getDeviceCount=_cuda.getDeviceCount,
                   deviceSynchronize=_cuda.deviceSynchronize,
                   CUDARuntimeError=CUDARuntimeError)
_compiler = _module("cupy.cuda.compiler", "Emulated cupy.cuda.compiler.",
                    compile_using_nvrtc=_cuda.compile_using_nvrtc,
                    CompileException=CompileError)
_function = _module("cupy.cuda.function", "Emulated cupy.cuda.function.", Module=_cuda.Module)
_cuda_module = _module("cupy.cuda", "Emulated cupy.cuda.", Device=_cuda.Device,
                       runtime=_runtime, get_current_stream=_cuda.get_current_stream,
                       compiler=_compiler, function=_function)
_linalg_module = _module("cupy.linalg", "Emulated cupy.linalg (NumPy's LAPACK on the host).",
                         **_linalg.FUNCTIONS)
_fft_module = _module("cupy.fft", "Emulated cupy.fft (NumPy's pocketfft, CuPy's dtypes).",
                      **_fft.FUNCTIONS)
cupy = _module("cupy", "Emulated CuPy (cudasim): the subset tracejit's runner may use.",
               __version__="0+cudasim", ndarray=ndarray, newaxis=None, cuda=_cuda_module,
               RawModule=_cuda.RawModule, linalg=_linalg_module, fft=_fft_module,
               **_array.FUNCTIONS)
cupyx = _module("cupyx", "Emulated cupyx (cudasim).", scatter_add=_array.scatter_add,
                errstate=_linalg.errstate)

_MODULES = {"cupy": cupy, "cupy.cuda": _cuda_module, "cupy.cuda.runtime": _runtime,
            "cupy.cuda.compiler": _compiler, "cupy.cuda.function": _function,
            "cupy.linalg": _linalg_module, "cupy.fft": _fft_module, "cupyx": cupyx}
_saved: list[dict] = []

def install(scheduler: str | None = None, dask: bool = False) -> types.ModuleType:
    """Put the emulator in ``sys.modules`` (``import cupy`` gets it) and ``reset()`` its
    state; ``scheduler`` overrides the environment's. ``dask``: also what Dask's CuPy
    support needs (``take``, ``tensordot``, ``transpose``, ``full_like``, ``asnumpy``, NumPy's
    functions dispatching to the emulator's, ufuncs, ``+``, ``*``, array methods and host
    index arrays), which
    tracejit's runners must not rely on. Returns ``cupy``."""
    _saved.append({k: sys.modules.get(k) for k in _MODULES})
    sys.modules.update(_MODULES)
    reset()
    if scheduler is not None:
        set_scheduler(scheduler)
    if dask:
        _array.DASK_EXTRAS.update(_array.DASK)
        for name, fn in _array.DASK.items():
            setattr(cupy, name, fn)
    return cupy

def uninstall() -> None:
    """Restore ``sys.modules`` as it was before the matching ``install()``."""
    for name in _array.DASK_EXTRAS:
        delattr(cupy, name)
    _array.DASK_EXTRAS.clear()
    for k, v in _saved.pop().items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v

@contextlib.contextmanager
def installed(scheduler: str | None = None, dask: bool = False):
    """``with installed() as cupy:``: ``install(scheduler, dask)``, then ``uninstall()``."""
    install(scheduler, dask)
    try:
        yield cupy
    finally:
        uninstall()
