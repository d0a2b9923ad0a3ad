"""Compile a generated kernel module with Numba, ahead of time: object code to link into
a shared library, which this process loads as any later one does.

Numba's ``cfunc`` compiles for its JIT: LLVM generates machine code in memory, and the
disk cache then needed a second code generation, position independent, for its library.
Here each kernel is compiled by Numba's typing and lowering into a library of an
ahead-of-time code generator for this CPU (its name and features, as the JIT uses), which
emits the position-independent object once. Every kernel then runs from a shared library,
whether this process compiled it, a compile worker did, or an earlier process did: one
path, and the same machine code in all three. Measured on the two-moons step's four
kernels: 1.05 s -> 0.97 s, the JIT's code generation no longer done.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import json
import sys
import threading
import types
from pathlib import Path

from . import diskcache, native

# LLVM's -O2 rather than Numba's default -O3: it vectorises the same loops and measured
# the same kernel speed (the two-moons step, the exp/tanh chains), in half the compile
# time for the larger kernels (a 5000x1000 fused gradient kernel: 1.08 s -> 0.52 s).
OPT_LEVEL = 2
_GC_LOCK = threading.Lock()
_gc_pauses = [0, False]  # compiles under way, whether the collector was on before them

# Functions a kernel may call that the shared library itself defines (native._RUNTIME_C).
_RUNTIME = {"numba_gil_ensure", "numba_gil_release", "NRT_MemInfo_call_dtor"}


def compile_objects(text: str, filename: str, names: list[str]) -> tuple[list[str], list[bytes]]:
    """Compile the kernels ``names`` of the kernel module ``text`` (each an ``abi.cfunc``):
    their symbols and their object code. NotCacheable if a kernel calls one of Numba's
    runtime functions (``np.spacing``'s ``numba_nextafterf``, say), which a library loaded
    without Numba could not resolve: :func:`jit_kernel` compiles those."""
    with collector_paused():
        from numba.core.compiler_lock import global_compiler_lock

        _defer_blas_check()
        module = _module(text, filename)
        with global_compiler_lock:  # (the code generator is shared)
            return _objects(module, names)


def _objects(module: types.ModuleType, names: list[str]) -> tuple[list[str], list[bytes]]:
    symbols, objects = [], []
    for name in names:
        result, library = compile_library(module.__dict__[name])
        missing = [f.name for f in library._final_module.functions
                   if f.is_declaration and not _resolvable(f.name)]
        if missing:
            raise diskcache.NotCacheable(f"kernel {name} calls Numba runtime functions "
                                         f"{missing}")
        symbols.append(result.fndesc.llvm_cfunc_wrapper_name)
        objects.append(library.emit_native_object())
    return symbols, objects


def _module(text: str, filename: str) -> types.ModuleType:
    """The kernel module ``text``, executed (its kernels are ``abi.CFunction`` records)."""
    module = types.ModuleType(f"_tracejit_kernels_{abs(hash(text)):x}")
    module.__file__ = filename
    exec(compile(text, filename, "exec"), module.__dict__)
    return module


def build_into_cache(source: str) -> Path:
    """Compile the one-kernel module ``source`` into its disk-cache entry (a compile
    worker's task, ``workers.py``); the entry's directory. NotCacheable where the cache
    cannot take it (then the caller compiles in its own process)."""
    entry = diskcache.open_entry(source, "cpu")
    if entry is None:
        raise diskcache.NotCacheable("the disk cache cannot be written")
    symbols, objects = compile_objects(source, str(entry.path), ["kernel"])
    if entry.save(symbols, objects) is None:
        raise diskcache.NotCacheable(f"could not save the kernel to {entry.directory}")
    return entry.directory


def warm_up() -> None:
    """Import Numba and load what its first compile would: its typing and lowering
    registries and the kernels' code generator. A compile worker does this before its
    first task, so that what it keeps for its lifetime exists before it freezes its heap."""
    with collector_paused():
        from numba.core import registry

        _defer_blas_check()
        registry.cpu_target.typing_context.refresh()
        registry.cpu_target.target_context.refresh()
        _codegen()


def jit_kernel(text: str, filename: str) -> object:
    """The kernel of module ``text`` compiled by Numba's JIT (``numba.cfunc``), callable in
    this process only: for the few kernels that call Numba's runtime functions."""
    import llvmlite.binding as ll
    import numba

    ll.load_library_permanently(native.configure()._name)  # omp_*, GOMP_* for the JIT
    _defer_blas_check()
    kernel = _module(text, filename).kernel
    with collector_paused(), _llvm_opt_level(OPT_LEVEL):
        compiled = numba.cfunc(kernel.signature, **kernel.options)(kernel.py_func)
    return native.function(compiled.address, compiled)


class _BlasCheck:
    """Numba's "is there a BLAS?" (``numba.np.arraymath._HAVE_BLAS``), answered by Numba's
    own check when first asked rather than when the module is imported."""

    def __init__(self, check):
        self.check, self.answer = check, None

    def __bool__(self) -> bool:
        if self.answer is None:
            self.answer = bool(self.check())
        return self.answer


def _defer_blas_check() -> None:
    """Import Numba's array-math module without its import-time BLAS check, once. The
    check imports SciPy's LAPACK bindings (0.08-0.16 s of a process's first compile here),
    and no kernel calls BLAS; it runs instead when Numba's typing first asks (``np.dot`` or
    ``np.correlate`` in the user's own ``njit`` code), with the same answer. Where Numba
    imported the module already, or lays it out otherwise, nothing changes."""
    if "numba.np.arraymath" in sys.modules:
        return
    from numba.core.compiler_lock import global_compiler_lock
    from numba.np import linalg

    def deferred():
        raise ImportError("the BLAS check is deferred (tracejit.backends.cpu.compiler)")

    with global_compiler_lock:
        if "numba.np.arraymath" in sys.modules:
            return
        ensure_blas, linalg.ensure_blas = linalg.ensure_blas, deferred
        try:
            from numba.np import arraymath
        finally:
            linalg.ensure_blas = ensure_blas
        if getattr(arraymath, "ensure_blas", None) is deferred:
            arraymath.ensure_blas = ensure_blas
        if getattr(arraymath, "_HAVE_BLAS", None) is False and callable(
                getattr(arraymath, "_check_blas", None)):
            arraymath._HAVE_BLAS = _BlasCheck(arraymath._check_blas)


def compile_library(kernel):
    """``kernel`` (an ``abi.CFunction``) compiled as ``numba.cfunc`` would (the C wrapper
    around Numba's function, no Python wrapper) into a library of its own, optimised with
    the functions it calls linked in, not yet emitted: Numba's compile result (its types)
    and the library (its LLVM module)."""
    from numba.core import compiler, registry
    from numba.core.compiler_lock import global_compiler_lock

    target = registry.cpu_target
    flags = compiler.Flags()
    target.options.parse_as_flags(flags, kernel.options)
    flags.no_cpython_wrapper = True
    flags.no_cfunc_wrapper = False
    flags.no_compile = True  # no JIT: the library is finalised here, emitted by the caller
    flags.enable_pyobject = False
    with global_compiler_lock, _llvm_opt_level(OPT_LEVEL):
        library = _codegen().create_library(kernel.py_func.__name__)
        result = compiler.compile_extra(
            target.typing_context, target.target_context, kernel.py_func,
            args=kernel.signature.args, return_type=kernel.signature.return_type,
            flags=flags, locals={}, library=library)
        library.finalize()
    return result, library


_subroutines: dict = {}  # (Python function, argument types) -> (callee, library)


def subroutine(py_func, args: tuple, name: str) -> tuple:
    """``py_func`` (the math function ``name``, ``tanh_f32`` say) compiled for the Numba
    types ``args`` with the kernels' error model into a library of the kernels' code
    generator, once per process (``math._compiled_once``): what a call needs of its
    function descriptor, and the library (what a caller links). It is typed while a
    kernel is, under Numba's compiler lock. Its LLVM bitcode is kept in the disk cache, so
    that a later process compiling a new kernel loads it (~2 ms) instead of compiling it
    again (30-80 ms each)."""
    key = (py_func, args)
    if key not in _subroutines:
        source = _subroutine_source(name, args)
        _subroutines[key] = (source is not None and _saved_subroutine(source, name)
                             or _compiled_subroutine(py_func, args, source))
    return _subroutines[key]


@dataclasses.dataclass(frozen=True)
class _Callee:
    """The fields of Numba's function descriptor a call reads (``declare_function``), for
    a subroutine loaded from the disk cache, which has no descriptor."""

    mangled_name: str
    restype: object
    argtypes: tuple
    args: tuple
    noalias: bool = False
    inline: bool = False


def _compiled_subroutine(py_func, args: tuple, source: str | None) -> tuple:
    from numba.core import compiler, registry

    target = registry.cpu_target
    flags = compiler.Flags()
    target.options.parse_as_flags(flags, {"error_model": "numpy"})
    flags.no_compile = flags.no_cpython_wrapper = flags.no_cfunc_wrapper = True
    library = _codegen().create_library(py_func.__name__)
    result = compiler.compile_internal(target.typing_context, target.target_context,
                                       library, py_func, args, None, flags, {})
    fndesc = result.fndesc
    callee = _Callee(fndesc.mangled_name, fndesc.restype, tuple(fndesc.argtypes),
                     tuple(fndesc.args), bool(fndesc.noalias), bool(fndesc.inline))
    if source is not None and _type_name(callee.restype) is not None:
        library.finalize()  # (as linking it into a kernel would: the same module)
        header = {"mangled_name": callee.mangled_name, "restype": str(callee.restype),
                  "argtypes": [str(t) for t in callee.argtypes], "args": list(callee.args),
                  "noalias": callee.noalias, "inline": callee.inline}
        image = json.dumps(header).encode() + b"\n" + library._final_module.as_bitcode()
        diskcache.save_image(source, _subroutine_tag(), image, [callee.mangled_name])
    return callee, library


def _saved_subroutine(source: str, name: str) -> tuple | None:
    """The subroutine a process saved for ``source`` before, or None (not saved, or not
    loadable: it is compiled again)."""
    import llvmlite.binding as ll

    image = diskcache.load_image(source, _subroutine_tag())
    if image is None:
        return None
    try:
        header, _, bitcode = image.partition(b"\n")
        fields = json.loads(header)
        restype, *argtypes = (_type_named(t) for t in [fields["restype"], *fields["argtypes"]])
        callee = _Callee(fields["mangled_name"], restype, tuple(argtypes),
                         tuple(fields["args"]), fields["noalias"], fields["inline"])
        library = _codegen().create_library(name)
        library.add_llvm_module(ll.parse_bitcode(bitcode))
    except Exception:  # (an image of another format or version: compiled again)
        return None
    return callee, library


def _subroutine_source(name: str, args: tuple) -> str | None:
    """The text naming subroutine ``name`` for ``args`` in the disk cache (whose key
    covers this package's sources, Numba's version and the host), or None where an
    argument type has no plain name to save it under."""
    names = [_type_name(t) for t in args]
    if None in names:
        return None
    return f"# tracejit CPU subroutine: {name}({', '.join(names)})\n"


def _subroutine_tag() -> str:
    import llvmlite

    return f"cpu-subroutine llvmlite {llvmlite.__version__} bitcode"


def _type_name(t) -> str | None:
    """``t``'s name where ``numba.types`` has the type under it (``float32``), else None."""
    from numba.core import types as nb

    return str(t) if getattr(nb, str(t), None) == t else None


def _type_named(name: str):
    from numba.core import types as nb

    t = getattr(nb, name, None)
    if not isinstance(t, nb.Type):
        raise ValueError(f"no Numba type {name!r}")
    return t


def _resolvable(symbol: str) -> bool:
    if symbol.startswith("llvm.") or symbol in _RUNTIME:
        return True
    return hasattr(_process(), symbol)  # libc, libm, the interpreter, libgomp


@functools.cache
def _process() -> ctypes.CDLL:
    native.configure()  # libgomp, loaded globally: kernels call omp_* and GOMP_*
    return ctypes.CDLL(None)


@functools.cache
def _codegen():
    """Numba's ahead-of-time code generator, for this CPU: position-independent code for a
    shared library, with the host's CPU name and features as Numba's JIT has them (the CPU
    name alone would assume features a virtual machine may hide)."""
    from numba.core import codegen, config

    class HostCodegen(codegen.AOTCPUCodegen):
        def _customize_tm_features(self):
            return self._get_host_cpu_features()

    saved = config.OPT
    config.OPT = type(saved)(3)  # the target machine's level, read once, as the JIT's
    try:
        return HostCodegen("tracejit_kernels", cpu_name="host")
    finally:
        config.OPT = saved


@contextlib.contextmanager
def _llvm_opt_level(level: int):
    """Numba's optimisation level for the compiles inside (it reads ``config.OPT`` when
    it builds each pass pipeline), restored afterwards for the user's own Numba code.
    It holds Numba's own compiler lock (reentrant), the one every compile inside takes:
    a lock of its own beside that one was taken in two orders, ``jit_kernel`` (ours,
    then Numba's, in ``numba.cfunc``) against ``compile_library`` (Numba's, then ours),
    and deadlocked a caller's compile against a compile worker's fallback."""
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        saved = config.OPT
        config.OPT = type(saved)(level)  # an int with an is_opt_max flag
        try:
            yield
        finally:
            config.OPT = saved


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off while kernels compile (and Numba is imported
    and set up), back on afterwards if it was on. A compile allocates some 10^5 objects,
    enough to start several full collections, each of which walks the heap that Numba's
    import made large (40-90 ms apiece here). Measured: the two-moons step's four kernels
    compile in 1.01 s instead of 1.15 s, the chain's first call takes 0.52 s instead of
    0.63 s. The compile's garbage is collected later, as usual."""
    with _GC_LOCK:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()
