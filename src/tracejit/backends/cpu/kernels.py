"""Compiled kernels, by source: once per process, once on disk, in parallel when several.

A kernel's module source names no graph and no batch size (``emitter.py``), so kernels
equal up to their names, in one function or across functions and signatures, share one
compiled kernel: ``_compiled`` maps each source to its callable, and each source has its
own disk-cache entry. What neither has is compiled by Numba: in this process, one after
another, or in the compile workers (``workers.py``) when there are several kernels and
cores for them, or when the caller must not wait (``compile="background"``).
"""

from __future__ import annotations

import functools
import threading
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from ...config import config
from . import diskcache, native, workers


@dataclass
class Kernels:
    """Where a runner's kernels came from (its ``disk_cache``, for the compile log): how
    many Numba compiled, the disk cache loaded, or an earlier compile in this process had
    made; ``directory`` is the first kernel's disk-cache entry (None: no entry opened)."""

    compiled: int = 0
    loaded: int = 0
    reused: int = 0
    directory: Path | None = None
    in_workers: int = 0  # of ``compiled``, how many the compile workers did
    prebuilt: int = 0  # kernels run as prebuilt programs until they are compiled

    def describe(self) -> str:
        n = lambda count: f"{count} kernel{'s' if count != 1 else ''}"
        reused = f", {self.reused} reused" if self.reused else ""
        if self.in_workers:
            reused += f"; {self.in_workers} compiled by the workers"
        if self.prebuilt:
            return (f"{n(self.prebuilt)} on prebuilt programs until the workers compile "
                    f"{'them' if self.prebuilt != 1 else 'it'}")
        if self.directory is not None and self.compiled:
            return f"disk cache miss ({n(self.compiled)} compiled, {self.loaded} loaded{reused})"
        if self.directory is not None and self.loaded:
            return f"disk cache hit ({n(self.loaded)} loaded{reused})"
        if self.compiled:
            return f"disk cache off ({n(self.compiled)} compiled{reused})"
        if self.reused:
            return f"{n(self.reused)} compiled before in this process"
        return "no kernels"

    def add(self, other: Kernels) -> None:
        for field in ("compiled", "loaded", "reused", "in_workers", "prebuilt"):
            setattr(self, field, getattr(self, field) + getattr(other, field))


_compiled: dict[str, object] = {}  # kernel module source -> its callable kernel
_lock = threading.Lock()  # guards _compiled and _totals (never held while compiling)
_totals = Kernels()

Misses = dict[str, "diskcache.Entry | None"]  # sources to compile -> their disk entries


def stats() -> Kernels:
    """How many kernels this process compiled, loaded from disk and reused, in all."""
    return replace(_totals)


def get(sources: list[str]) -> tuple[list, Kernels]:
    """The compiled kernels of the modules ``sources``, compiling what this process and
    the disk cache do not have (waiting for it). Two threads missing the same kernel at
    once may both compile it: the same code, kept once."""
    with _lock:
        misses, info = _lookup(sources)
    if misses:
        _build_c_meanwhile()
    made = _compile(misses, info)
    return _store(sources, misses, made, info)


def _build_c_meanwhile() -> None:
    """Build, on a thread, the C files a kernel library needs where the disk cache has
    none yet: the runtime object it links and the trampoline that calls its kernels. Each
    is a ``cc`` run of ~25 ms that would otherwise wait for Numba to finish a process's
    first kernel; the thread waits on ``cc`` without the GIL, so they cost an empty
    cache's first call nothing (0.05 s of it before). A failure here is left to the code
    that needs the file, which builds it again and says why."""
    root = diskcache.cache_dir() if diskcache.enabled() else None  # (read here: the
    # thread must not build into a cache directory the caller has since moved from)

    def build() -> None:
        try:
            if root is not None:
                diskcache.built_c(native.RUNTIME_C, "runtime", root)
            native.build_trampoline()
        except Exception:  # (left to the code that needs the file: see above)
            pass

    threading.Thread(target=build, name="tracejit-build-c", daemon=True).start()


def workers_available() -> bool:
    """Whether compile workers can take kernels: some are configured, and the disk cache
    that brings their work back is on."""
    return bool(config.compile_workers) and diskcache.enabled()


def get_later(sources: list[str]) -> Future[tuple[list, Kernels]] | None:
    """``get(sources)`` as a future whose misses compile in the workers; None when there
    is nothing to wait for (all compiled or on disk) or no worker can take them (no
    workers configured, or the disk cache, which brings their work back, is off)."""
    with _lock:
        misses, info = _lookup(sources)
    if not misses:
        return None
    if not config.compile_workers or None in misses.values():
        return None
    result: Future = Future()
    pending = _submit(list(misses), True)
    remaining = [len(pending)]
    count = threading.Lock()
    arrived: dict[str, object] = {}  # kernels loaded as their workers finished them

    def one_done(source: str, done: Future) -> None:  # in a worker's driver thread
        # Loaded now, while the workers compile the rest: a process's first load also
        # builds the kernels' trampoline where the cache has none (a C compile, ~30 ms),
        # which would otherwise delay the switch after the last kernel.
        try:
            kernel = _loaded(misses[source], done)
        except Exception:  # (compiled here below, where its error surfaces)
            kernel = None
        with count:
            if kernel is not None:
                arrived[source] = kernel
                info.in_workers += 1
            remaining[0] -= 1
            if remaining[0]:
                return
        try:  # (a kernel a worker failed on is compiled here now)
            made = [arrived[s] if s in arrived else _compile_here(s, misses[s]) for s in misses]
            result.set_result(_store(sources, misses, made, info))
        except Exception as e:  # ours: the signature stays on the interpreter, logged
            result.set_exception(e)

    for source, future in pending.items():
        future.add_done_callback(functools.partial(one_done, source))
    return result


def _store(sources: list[str], misses: Misses, made: list, info: Kernels) -> tuple[list,
                                                                                    Kernels]:
    with _lock:
        for source, kernel in zip(misses, made, strict=True):
            _compiled.setdefault(source, kernel)
        info.compiled = len(misses)
        _totals.add(info)
        return [_compiled[s] for s in sources], info


def _lookup(sources: list[str]) -> tuple[Misses, Kernels]:
    """What ``sources`` this process (``_compiled``) or the disk cache (loading them now)
    lacks, with their disk entries, and the tally of the rest. The caller holds ``_lock``."""
    native.configure()
    info = Kernels()
    misses: Misses = {}
    for source in sources:
        if source in _compiled or source in misses:
            info.reused += 1
            continue
        entry = diskcache.open_entry(source, "cpu") if diskcache.enabled() else None
        if entry is not None and info.directory is None:
            info.directory = entry.directory
        loaded = entry.load(1) if entry is not None else None
        if loaded is None:
            misses[source] = entry
        else:
            _compiled[source] = loaded[0]
            info.loaded += 1
    return misses, info


def _compile(misses: Misses, info: Kernels) -> list:
    """The kernels of ``misses``: in the workers when there are several and the disk
    cache can bring them back, else here one after another."""
    entries = list(misses.values())
    if len(misses) < 2 or config.compile_workers < 2 or None in entries or \
            native.linker() is None:  # (a worker's kernel could not come back: compiled twice)
        return [_compile_here(s, e) for s, e in misses.items()]
    pending = _submit(list(misses), False)
    return [_collect(s, e, pending[s], info) for s, e in misses.items()]


def _submit(sources: list[str], background: bool) -> dict[str, Future]:
    """Hand ``sources`` to the workers, longest first: the largest kernels take longest to
    compile, and starting them first keeps one from finishing alone at the end."""
    pool, cache = workers.pool(config.compile_workers), diskcache.cache_dir()
    return {s: pool.submit(s, cache, background) for s in sorted(sources, key=len, reverse=True)}


def _collect(source: str, entry: diskcache.Entry, compiled: Future, info: Kernels) -> object:
    """A worker's kernel, loaded from the entry it saved (counted in ``info``); compiled
    here instead when the worker failed or could not save it (Numba's own errors then
    surface here)."""
    kernel = _loaded(entry, compiled)
    if kernel is None:
        return _compile_here(source, entry)
    info.in_workers += 1
    return kernel


def _loaded(entry: diskcache.Entry, compiled: Future) -> object | None:
    """The kernel a worker saved in ``entry`` (``compiled`` settled), loaded; None when
    the worker failed, or its entry is gone (evicted meanwhile)."""
    if compiled.exception() is not None:
        return None
    loaded = entry.load(1)
    return None if loaded is None else loaded[0]


@functools.cache
def _say_unsaved_without_a_compiler() -> None:
    """Warn, once per process, that kernels are not kept on disk without a C compiler."""
    warnings.warn("tracejit: no C compiler (cc, gcc or clang on PATH, or $CC) to link "
                  "compiled kernels into a library the disk cache keeps: each process "
                  "compiles its own. Install one to keep them", diskcache.DiskCacheWarning,
                  stacklevel=5)


def _compile_here(source: str, entry: diskcache.Entry | None) -> object:
    """``source``'s kernel compiled by Numba in this process and loaded from the shared
    library it is linked into: ``entry``'s, or one of this process's own when the disk
    cache is off or could not take it (or run by Numba's JIT if it calls Numba's runtime)."""
    from .compiler import compile_objects, jit_kernel

    filename = str(entry.path) if entry is not None else "<tracejit cpu kernel>"
    if native.linker() is None:  # no C compiler to link a library with: Numba's JIT runs it
        if entry is not None:
            entry.unsaved(1, None)
            _say_unsaved_without_a_compiler()
        return jit_kernel(source, filename)
    try:
        symbols, objects = compile_objects(source, filename, ["kernel"])
    except diskcache.NotCacheable:  # it calls Numba's runtime: Numba's JIT runs it
        if entry is not None:
            entry.unsaved(1, None)
        return jit_kernel(source, filename)
    library = entry.save(symbols, objects) if entry is not None else None
    if library is not None:
        try:
            return native.load(library, symbols)[0]
        except OSError:  # another process evicted the entry meanwhile
            pass
    return native.load(diskcache.private_library(objects), symbols)[0]
