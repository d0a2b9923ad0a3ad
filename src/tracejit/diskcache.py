"""The on-disk compile cache: a new process that runs a jitted function on a signature an
earlier process compiled loads its machine code instead of compiling it again.

An entry is a directory named by a hash of everything that decides the machine code: the
optimised IR (ops, attributes, types and every constant's bytes), the generated source,
the backend's own source files (the generated module imports helpers from them), and the
tracejit and Numba versions. It holds the generated module as ``kernels.py`` and Numba's
index (``.nbi``) and object code (``.nbc``) files beside it: Numba's cache keys on a real
source file, and tracebacks through the runner then show real lines.

``TRACEJIT_CACHE_DIR`` sets the location (default ``$XDG_CACHE_HOME/tracejit`` or
``~/.cache/tracejit``); ``TRACEJIT_DISK_CACHE=0`` turns the cache off.

Files are written under a temporary name and renamed into place, so concurrent processes
see whole files or none. What cannot be read back (a truncated ``kernels.py``, garbage in
Numba's files) is discarded with a :class:`~tracejit.errors.DiskCacheWarning` and compiled
afresh. Numba is imported only when an entry is executed, never by importing this module.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import types
import uuid
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .errors import DiskCacheWarning
from .ir import Graph

_FORMAT = "tracejit-diskcache-1"  # bump when the layout of an entry changes


@dataclass(frozen=True)
class Stats:
    """What the disk cache did in this process, counted per Numba kernel."""

    loaded: int = 0  # kernels whose machine code came from disk
    compiled: int = 0  # kernels Numba compiled (and saved)
    discarded: int = 0  # corrupt entries or kernel files thrown away


_stats = Stats()


def stats() -> Stats:
    return _stats


def _count(**deltas: int) -> None:
    global _stats
    _stats = replace(_stats, **{k: getattr(_stats, k) + v for k, v in deltas.items()})


def enabled() -> bool:
    return os.environ.get("TRACEJIT_DISK_CACHE", "1").strip() != "0"


def cache_dir() -> Path:
    if os.environ.get("TRACEJIT_CACHE_DIR"):
        return Path(os.environ["TRACEJIT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracejit"


def key(graph: Graph, source: str, backend: str) -> str:
    """Hex digest naming the entry. The printed graph elides large constants, so every
    array attribute's dtype, shape and bytes are hashed as well."""
    import numba

    from . import __version__

    h = hashlib.sha256()
    for part in (_FORMAT, backend, _backend_fingerprint(backend), __version__,
                 numba.__version__, str(graph), source):
        h.update(part.encode())
        h.update(b"\0")
    for node in graph.nodes:
        for name, value in node.attrs.items():
            for arr in _arrays(value):
                h.update(f"{node.op}.{name}:{arr.dtype.str}{arr.shape}".encode())
                h.update(np.ascontiguousarray(arr).view(np.uint8).data)
    return h.hexdigest()[:40]


def _arrays(value):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays(v)


@functools.cache
def _backend_fingerprint(backend: str) -> str:
    """Hash of the backend package's sources: the generated code calls into them, so an edit
    there changes machine code that the generated source alone does not show."""
    from .backends import get_backend

    folder = Path(get_backend(backend).__file__).parent
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class Entry:
    """One cache entry: the directory, its ``kernels.py``, and how many of its kernels were
    loaded from disk or compiled in this process."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.path = directory / "kernels.py"
        self.loaded = 0
        self.compiled = 0

    def exec_module(self, text: str, namespace: dict) -> dict:
        """Execute the generated module from ``kernels.py`` and make its Numba kernels cache
        their machine code here. Returns the module's namespace."""
        from numba.core.dispatcher import Dispatcher

        name = f"_tracejit_kernels_{self.directory.name}"
        module = types.ModuleType(name)
        module.__file__ = str(self.path)
        module.__dict__.update(namespace)
        # Numba rebuilds a cached kernel's environment by importing its module by name.
        sys.modules[name] = module
        exec(compile(text, str(self.path), "exec"), module.__dict__)
        cache_class = _kernel_cache_class()
        for value in list(module.__dict__.values()):
            if isinstance(value, Dispatcher) and value.py_func.__code__.co_filename == str(
                    self.path):
                value._cache = cache_class(value.py_func, self)  # what cache=True installs
        return module.__dict__

    def describe(self) -> str:
        n = lambda count: f"{count} kernel{'s' if count != 1 else ''}"
        if self.compiled:
            return f"disk cache miss ({n(self.compiled)} compiled, {self.loaded} loaded)"
        if self.loaded:
            return f"disk cache hit ({n(self.loaded)} loaded)"
        return "disk cache: no kernels"

    def discard_kernel(self, filename_base: str, error: Exception) -> None:
        """Remove one kernel's Numba files (unreadable: ``error``) so Numba recompiles it."""
        for path in self.directory.glob(f"{filename_base}.*"):
            path.unlink(missing_ok=True)
        _count(discarded=1)
        warnings.warn(f"tracejit: discarded unreadable Numba cache files {filename_base}.* in "
                      f"{self.directory} ({type(error).__name__}: {error}); compiling again",
                      DiskCacheWarning, stacklevel=2)


def open_entry(graph: Graph, source: str, backend: str) -> Entry | None:
    """The entry for this generated module, with ``kernels.py`` written if it is new; None
    when the cache directory cannot be written (a warning says so)."""
    root = cache_dir()
    directory = root / key(graph, source, backend)
    path = directory / "kernels.py"
    data = source.encode()
    try:
        try:
            existing = path.read_bytes()
        except FileNotFoundError:
            existing = None
        if existing is not None and existing != data:
            _discard(directory, "kernels.py does not match the generated source")
            existing = None
        if existing is None:
            directory.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, data)
    except OSError as e:
        warnings.warn(f"tracejit: cannot use the cache directory {root} ({e}); compiling "
                      "without the disk cache (set TRACEJIT_CACHE_DIR or TRACEJIT_DISK_CACHE=0)",
                      DiskCacheWarning, stacklevel=2)
        return None
    return Entry(directory)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _discard(directory: Path, reason: str) -> None:
    """Move the entry out of the way first, so no other process reads it half-deleted."""
    trash = directory.with_name(f"{directory.name}.discarded-{uuid.uuid4().hex[:12]}")
    try:
        os.replace(directory, trash)
    except FileNotFoundError:  # another process discarded it first
        pass
    shutil.rmtree(trash, ignore_errors=True)
    _count(discarded=1)
    warnings.warn(f"tracejit: discarded corrupt cache entry {directory} ({reason}); "
                  "compiling again", DiskCacheWarning, stacklevel=3)


@functools.cache
def _kernel_cache_class():
    """Numba's per-function cache, with its files beside ``kernels.py`` and with unreadable
    files discarded and recompiled instead of raised (Numba's own cache would raise)."""
    from numba.core.caching import CompileResultCacheImpl, FunctionCache, InTreeCacheLocator

    class EntryLocator(InTreeCacheLocator):
        def __init__(self, py_func, py_file):
            super().__init__(py_func, py_file)
            self._cache_path = os.path.dirname(py_file)

    class EntryImpl(CompileResultCacheImpl):
        _locator_classes = [EntryLocator]

    class KernelCache(FunctionCache):
        _impl_class = EntryImpl

        def __init__(self, py_func, entry: Entry):
            self._entry = entry
            super().__init__(py_func)

        def load_overload(self, sig, target_context):
            try:
                cres = super().load_overload(sig, target_context)
            except Exception as e:  # any unreadable file: garbage pickles, bad object code
                self._entry.discard_kernel(self._impl.filename_base, e)
                cres = None
            if cres is None:
                self._entry.compiled += 1
                _count(compiled=1)
            else:
                self._entry.loaded += 1
                _count(loaded=1)
            return cres

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception as e:  # the compiled kernel works; only later processes lose
                warnings.warn(f"tracejit: could not save a compiled kernel to "
                              f"{self._entry.directory} ({e})", DiskCacheWarning, stacklevel=2)

    return KernelCache
