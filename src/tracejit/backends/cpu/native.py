"""Calling compiled kernels without Numba: C functions in a shared library, run with ctypes.

Importing Numba and building its typing context costs ~0.4 s, four times the budget for a
process whose kernels are already in the disk cache. So a kernel is a C function
``void kernel(int64 args)``, compiled by Numba (``cfunc``) once and linked into a shared
library; any later process only ``dlopen``s it. ``args`` is the address of a Python tuple
of C-contiguous ndarrays (inputs, outputs, scratch) that the caller keeps alive; the
kernel reads an array's data pointer (and the extents it takes at run time) through
CPython's tuple layout and NumPy's array struct, at the offsets below, which
:func:`configure` checks against this interpreter.

Parallel kernels run on libgomp's thread team: ``GOMP_parallel`` calls the kernel on
every thread and each takes its share of the outer loop from ``omp_get_thread_num``.
This module imports neither Numba nor llvmlite.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from time import perf_counter

import numpy as np

from ...errors import BackendUnavailable

# Offset of item 0 in a PyTupleObject: the header before it (refcount, type, size, and
# from Python 3.14 a cached hash), which is what a tuple's basic size measures.
TUPLE_ITEMS = tuple.__basicsize__
ARRAY_DATA = 16  # offset of the data pointer in NumPy's PyArrayObject (refcount, type, data)
ARRAY_DIMENSIONS = 32  # offset of its ``npy_intp *dimensions`` (after data and ``int nd``)
FLOAT_VALUE = float.__basicsize__ - 8  # offset of a Python float's ``double ob_fval`` (last)

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void kernel(args)

# Symbols Numba's cfunc wrapper references on its error path (a kernel raising, which
# generated kernels never do) and the refcount release of Numba-allocated memory (which
# they never allocate). In Numba's process they live in its extension modules; a kernel
# library carries its own definitions so that it loads without Numba.
RUNTIME_C = r"""
#include <stdio.h>
#include <stdlib.h>
typedef int PyGILState_STATE;
extern PyGILState_STATE PyGILState_Ensure(void);
extern void PyGILState_Release(PyGILState_STATE);
void numba_gil_ensure(PyGILState_STATE *s) { *s = PyGILState_Ensure(); }
void numba_gil_release(PyGILState_STATE *s) { PyGILState_Release(*s); }
void NRT_MemInfo_call_dtor(void *mi) {
    fputs("tracejit: a kernel released Numba-allocated memory (a tracejit bug)\n", stderr);
    abort();
}
"""


@functools.cache
def configure() -> ctypes.CDLL:
    """Load libgomp (globally, so kernels resolve ``omp_*`` against it) and check the
    struct offsets kernels rely on. ``GOMP_SPINCOUNT=1000`` first, unless the user set it:
    libgomp reads it once, and its default lets idle threads spin long after a kernel,
    starving OpenBLAS's threads (DESIGN.md); a passive policy makes launches cost ~80 us."""
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
    try:
        gomp = ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        from ctypes.util import find_library

        name = find_library("gomp")
        if name is None:
            raise BackendUnavailable(
                "the CPU backend runs its kernels on libgomp (the GNU OpenMP runtime), which "
                "is not installed", hint="install libgomp (e.g. apt install libgomp1) or use "
                "backend='reference'") from None
        gomp = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    gomp.GOMP_parallel.argtypes = [KERNEL, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    gomp.GOMP_parallel.restype = None
    probe = np.zeros((3, 5))
    box = (probe,)
    number = probe.size + 0.375  # (a float made now, not a constant of this code)
    if (sys.maxsize != 2**63 - 1
            or ctypes.c_void_p.from_address(id(box) + TUPLE_ITEMS).value != id(probe)
            or ctypes.c_void_p.from_address(id(probe) + ARRAY_DATA).value != probe.ctypes.data
            or _dimensions(probe) != [3, 5]
            or ctypes.c_double.from_address(id(number) + FLOAT_VALUE).value != number):
        raise BackendUnavailable(
            "the CPU backend's kernels read tuples, arrays and floats at CPython's and "
            "NumPy's usual struct offsets, which this interpreter does not use",
            hint="use a 64-bit CPython build without free threading, or backend='reference'")
    return gomp


def _dimensions(array: np.ndarray) -> list[int]:
    """The extents ``array``'s struct points to at ``ARRAY_DIMENSIONS`` (where kernels read
    their run-time extents)."""
    pointer = ctypes.c_void_p.from_address(id(array) + ARRAY_DIMENSIONS).value
    return list((ctypes.c_int64 * array.ndim).from_address(pointer))


# After a pause this long the thread team is asleep: libgomp's threads spin only a few
# microseconds (GOMP_SPINCOUNT=1000, set below) and the host may park an idle vCPU.
PAUSE_S = 200e-6
EXPLORE_EVERY = 64  # launches after a pause between two tries of the other way
SAMPLES = 3  # a way's time after a pause: the median of its last few such launches
_last_end = 0.0  # when the last kernel launch returned (any kernel, either way)


class Launches:
    """Where one parallel kernel runs faster when its launch comes after a pause.

    A parallel kernel also runs alone on the calling thread (``omp_get_num_threads()`` is 1
    outside a team, so the one thread takes every share and every block, in the same
    order, and ``GOMP_barrier`` returns at once): bit for bit the same result. Launches in
    quick succession (a loop of jitted calls, the kernels of one call) always run on the
    team, which is awake for them (exp of 230,400 float32: 30 us on a 2-core VM). After a
    pause (NumPy work between calls) waking the team costs tens of microseconds (90 us
    for that exp, where it takes 64 us alone), which a kernel may not win back. So after
    a pause each kernel runs the way its own such launches measured faster: the team
    ``SAMPLES`` times, alone ``SAMPLES`` times, then the lower median, trying the other
    way ``SAMPLES`` times every ``EXPLORE_EVERY`` launches.
    """

    __slots__ = ("alone", "team", "count")

    def __init__(self) -> None:
        self.alone: list[float] = []  # the last launches after a pause, on this thread
        self.team: list[float] = []  # ... and on the team
        self.count = 0

    def choose_alone(self) -> bool:
        """Whether the next launch after a pause runs on the calling thread."""
        self.count += 1
        if len(self.team) < SAMPLES or len(self.alone) < SAMPLES:  # measure: team first
            return len(self.team) >= SAMPLES
        faster_alone = _median(self.alone) < _median(self.team)
        return faster_alone != (self.count % EXPLORE_EVERY < SAMPLES)

    def record(self, alone: bool, seconds: float) -> None:
        times = self.alone if alone else self.team
        times.append(seconds)
        del times[:-SAMPLES]


def _median(times: list[float]) -> float:
    return sorted(times)[len(times) // 2]


def parallel(kernel, args: tuple) -> None:
    """Run ``kernel`` (a ctypes function, or its trampoline-bound builtin, where there is a
    trampoline) on libgomp's team, or after a pause on this thread where that measured
    faster for it (``Launches``); the caller keeps ``args`` alive. (A ctypes function is
    unhashable; the lookup is tried rather than checked: it is on every launch.)"""
    try:
        found = _by_launcher.get(kernel, kernel)
    except TypeError:  # a ctypes function (no trampoline), which is unhashable
        found = kernel
    launch(found, args)


def launch(kernel, args: tuple) -> None:
    """``parallel`` for the ctypes function ``kernel`` (with its ``launches``)."""
    global _last_end
    start = perf_counter()
    if start - _last_end < PAUSE_S:
        configure().GOMP_parallel(kernel, id(args), 0, 0)
    else:
        launches = kernel.launches
        alone = launches.choose_alone()
        if alone:
            kernel(id(args))
        else:
            configure().GOMP_parallel(kernel, id(args), 0, 0)
        launches.record(alone, perf_counter() - start)
    _last_end = perf_counter()


# A kernel called through ctypes costs ~0.65 us (its argument conversion and call
# machinery), more than a NumPy ufunc call on a few hundred elements. So a kernel is
# called through this trampoline instead: a C function of CPython's METH_O convention,
# bound (``PyCFunction_NewEx``) to the kernel's address as its ``self``, that a call
# ``kernel(id(args))`` runs as any builtin function (~0.1 us), releasing the GIL while
# the kernel runs (as ctypes does: the kernel reads the tuple the caller keeps alive and
# touches no Python object's reference count). It names only functions of
# CPython's stable ABI, so it needs no Python headers to compile.
LAUNCH_C = r"""
extern void *PyLong_AsVoidPtr(void *);
extern void *PyErr_Occurred(void);
extern void Py_IncRef(void *);
extern void *PyEval_SaveThread(void);
extern void PyEval_RestoreThread(void *);
extern char _Py_NoneStruct;
typedef void (*kernel_t)(void *);
void *tracejit_launch(void *self, void *arg) {
    void *args = PyLong_AsVoidPtr(arg), *state;
    kernel_t kernel = (kernel_t) PyLong_AsVoidPtr(self);
    if (args == 0 && PyErr_Occurred()) return 0;
    state = PyEval_SaveThread();  /* other threads run meanwhile, as under ctypes */
    kernel(args);
    PyEval_RestoreThread(state);
    Py_IncRef(&_Py_NoneStruct);
    return &_Py_NoneStruct;
}
"""
METH_O = 0x0008


class _MethodDef(ctypes.Structure):
    """CPython's ``PyMethodDef``: what a builtin function object points to."""

    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_by_launcher: dict = {}  # a kernel's trampoline-bound builtin -> its ctypes function

# Where the trampoline's shared library is kept, built there on first use:
# ``built_c(source, kind)`` is ``diskcache.built_c``, set when that module loads (the disk
# cache decides where machine code is kept and trusted); None: kernels are called via ctypes.
built_c: Callable[[str, str], Path] | None = None


_launch_lock = threading.Lock()


def _launch_method() -> _MethodDef | None:
    """The method definition every kernel's builtin shares (kept for the process's
    life), or None where the trampoline cannot be built or loaded (no C compiler): the
    kernels are then called through ctypes. Made once under a lock: a builtin points to
    its definition without holding it, so a second one, made by a thread racing the first
    (a compile worker's driver loading its kernel), would be freed under its builtins."""
    with _launch_lock:
        return _made_launch_method()


@functools.cache
def _made_launch_method() -> _MethodDef | None:
    if built_c is None:
        return None
    try:
        lib = ctypes.CDLL(str(built_c(LAUNCH_C, "launch")))
        address = ctypes.cast(lib.tracejit_launch, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.argtypes, new.restype = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object], \
        ctypes.py_object
    method = _MethodDef(b"kernel", address, METH_O, None)
    method._lib = lib  # (CDLL never unloads; kept with what points into it regardless)
    return method


def build_trampoline() -> None:
    """Build the kernels' trampoline now (where the disk cache has none) rather than when
    the first kernel loads."""
    _launch_method()


def load(path: Path, symbols: list[str]) -> list:
    """The kernels ``symbols`` of the shared library at ``path`` (OSError if it will not
    load, AttributeError if a symbol is missing)."""
    configure()
    lib = ctypes.CDLL(str(path))
    return [_bind(lib, ctypes.cast(getattr(lib, s), ctypes.c_void_p).value) for s in symbols]


def function(address: int, owner=None):
    """A callable kernel for the machine code at ``address``, keeping ``owner`` (what
    holds that code) alive."""
    return _bind(owner, address)


def _bind(owner, address: int):
    """The kernel at ``address`` as a callable ``kernel(id(args))``: a builtin function
    through the trampoline where there is one, else the ctypes function (which
    ``parallel`` hands to libgomp, found from the builtin, and which keeps ``owner``)."""
    fn = KERNEL(address)
    fn._owner = owner  # the library or Numba object the code lives in
    fn.launches = Launches()  # for a parallel kernel: where its launches run faster
    method = _launch_method()
    if method is None:
        return fn
    fast = ctypes.pythonapi.PyCFunction_NewEx(ctypes.addressof(method), address, None)
    _by_launcher[fast] = fn  # (kernels live as long as the process: kernels.py keeps them)
    return fast


@functools.cache
def linker() -> str | None:
    """The C compiler driver that links kernel objects into a shared library."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which(
        "clang")


def link(objects: list[bytes], out: Path, runtime: Path) -> None:
    """Link relocatable objects (position independent) into the shared library ``out``,
    with ``runtime``, ``RUNTIME_C``'s object. Kernels compiled apart may each define the
    same Numba helper under the same mangled name (same function, same types, same code),
    hence ``--allow-multiple-definition``."""
    with tempfile.TemporaryDirectory(prefix="tracejit-link-") as tmp:
        paths = []
        for i, data in enumerate(objects):
            paths.append(os.path.join(tmp, f"kernel{i}.o"))
            Path(paths[-1]).write_bytes(data)
        _run_cc(["-shared", "-o", str(out), *paths, str(runtime),
                 "-Wl,--allow-multiple-definition"])


# How ``build_c`` builds each kind of file ``built_c`` keeps: the flags and the suffix.
C_BUILDS = {"launch": (["-shared", "-fPIC", "-O2"], ".so"),  # the trampoline (LAUNCH_C)
            "runtime": (["-c", "-fPIC", "-O2"], ".o")}  # linked into every kernel library


def build_c(source: str, folder: Path, stem: str, kind: str) -> Path:
    """Compile C ``source`` into ``folder`` as ``C_BUILDS[kind]`` says, named ``stem`` and
    the start of its SHA-256 (so a reader can tell a damaged copy), built beside it and
    moved into place at once (another process may be building it too); its path."""
    with tempfile.TemporaryDirectory(prefix="tracejit-build-", dir=folder) as tmp:
        c_file, built = os.path.join(tmp, "source.c"), os.path.join(tmp, "built")
        Path(c_file).write_text(source)
        _run_cc([*C_BUILDS[kind][0], "-o", built, c_file])
        os.chmod(built, 0o600)  # the compiler made it 0o755 - umask; the cache trusts no more
        path = folder / f"{stem}-{digest(Path(built))[:16]}{C_BUILDS[kind][1]}"
        os.replace(built, path)
        return path


def _run_cc(args: list[str]) -> None:
    cc = linker()
    if cc is None:
        raise OSError("no C compiler driver (cc, gcc or clang) to link kernels with")
    done = subprocess.run([cc, *args], capture_output=True, text=True)
    if done.returncode:
        raise OSError(f"{cc} {' '.join(args)} failed: {done.stderr.strip()}")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
