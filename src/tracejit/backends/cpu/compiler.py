"""Compile a generated kernel module with Numba: callable kernels for this process, and
position-independent object code for the disk cache's shared library."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
import types
from pathlib import Path

from . import diskcache, native

# LLVM's -O2 rather than Numba's default -O3: it vectorises the same loops and measured
# the same kernel speed (the two-moons step, the exp/tanh chains), in half the compile
# time for the larger kernels (a 5000x1000 fused gradient kernel: 1.08 s -> 0.52 s).
OPT_LEVEL = 2
_OPT_LOCK = threading.Lock()

# Functions a kernel may call that the shared library itself defines (native._RUNTIME_C).
_RUNTIME = {"numba_gil_ensure", "numba_gil_release", "NRT_MemInfo_call_dtor"}


def compile_kernels(text: str, filename: str, names: list[str]):
    """Execute the kernel module ``text`` (Numba compiles each ``cfunc`` as it is defined).
    Returns the kernels as ctypes functions, their symbol names, and a function that
    builds their object code (only the disk cache needs it)."""
    gomp = native.configure()
    import llvmlite.binding as ll

    ll.load_library_permanently(gomp._name)  # resolves omp_* and GOMP_* in JIT-ed code
    module = types.ModuleType(f"_tracejit_kernels_{abs(hash(text)):x}")
    module.__file__ = filename
    with _llvm_opt_level(OPT_LEVEL):
        exec(compile(text, filename, "exec"), module.__dict__)
    cfuncs = [module.__dict__[n] for n in names]
    kernels = [native.function(c.address, c) for c in cfuncs]
    return kernels, [c.native_name for c in cfuncs], functools.partial(_objects, cfuncs)


def build_into_cache(source: str) -> Path:
    """Compile the one-kernel module ``source`` into its disk-cache entry (a compile
    worker's task, ``workers.py``); the entry's directory. NotCacheable where the cache
    cannot take it (then the caller compiles in its own process)."""
    entry = diskcache.open_entry(source, "cpu")
    if entry is None:
        raise diskcache.NotCacheable("the disk cache cannot be written")
    _, symbols, objects = compile_kernels(source, str(entry.path), ["kernel"])
    entry.save(symbols, objects)
    return entry.directory


def _objects(cfuncs) -> list[bytes]:
    """Object code of each kernel. NotCacheable (an OSError) if a kernel calls a function
    that a library loaded without Numba could not resolve (one of Numba's runtime helpers):
    the disk cache then keeps the module out, without troubling the user."""
    objects = []
    for c in cfuncs:
        module = c._library._final_module  # the optimised LLVM module Numba JIT-compiled
        missing = [f.name for f in module.functions
                   if f.is_declaration and not _resolvable(f.name)]
        if missing:
            raise diskcache.NotCacheable(f"{c.__name__} calls Numba runtime functions {missing}")
        objects.append(_target_machine().emit_object(module))
    return objects


def _resolvable(symbol: str) -> bool:
    if symbol.startswith("llvm.") or symbol in _RUNTIME:
        return True
    return hasattr(_process(), symbol)  # libc, libm, the interpreter, libgomp


@functools.cache
def _process() -> ctypes.CDLL:
    return ctypes.CDLL(None)


@functools.cache
def _target_machine():
    import llvmlite.binding as ll

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    return ll.Target.from_default_triple().create_target_machine(
        cpu=ll.get_host_cpu_name(), features=ll.get_host_cpu_features().flatten(), opt=3,
        reloc="pic", codemodel="default")


@contextlib.contextmanager
def _llvm_opt_level(level: int):
    """Numba's optimisation level for the compiles inside (it reads ``config.OPT`` when
    it builds each pass pipeline), restored afterwards for the user's own Numba code."""
    from numba.core import config

    with _OPT_LOCK:
        saved = config.OPT
        config.OPT = type(saved)(level)  # an int with an is_opt_max flag
        try:
            yield
        finally:
            config.OPT = saved
