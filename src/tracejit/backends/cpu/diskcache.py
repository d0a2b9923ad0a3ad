"""The CPU backend's on-disk compile cache: a new process that runs a jitted function on a
signature an earlier process compiled loads its machine code instead of compiling it
again, and without importing Numba (see ``native.py``).

An entry is a directory named by a hash of everything that decides the machine code: the
optimised IR (ops, attributes, types and every constant's bytes), the generated kernel
source, the backend's own source files (the generated module imports helpers from them),
the host CPU (the code uses its vector instructions), the interpreter (the kernels read
its tuples' layout), and the tracejit and Numba versions. It holds the kernel module as
``kernels.py`` (what ``lower().source`` shows), the kernels linked into a shared library
``kernels-<hash>.so``, and ``index.json``: the library's name and SHA-256 and the
kernels' symbol names.

``TRACEJIT_CACHE_DIR`` sets the location (default ``$XDG_CACHE_HOME/tracejit`` or
``~/.cache/tracejit``); ``TRACEJIT_DISK_CACHE=0`` turns the cache off.

Files are written under a temporary name and renamed into place, ``index.json`` last, so
concurrent processes see whole entries or none. What cannot be read back (a truncated
``kernels.py``, a library whose hash does not match, one that will not load) is discarded
with a :class:`~tracejit.errors.DiskCacheWarning` and compiled afresh.

The libraries are machine code this process runs, so the cache is trusted only when it is
the user's own, as ssh treats its keys: the cache directory, an entry's directory,
``index.json`` or the library owned by another user, or writable by group or others, is not
used (one warning per path says why) and the kernels compile instead. Directories are made
``0o700`` and files ``0o600`` whatever the umask. A kernel that cannot be saved because it
calls Numba's runtime (:class:`NotCacheable`) simply stays out of the cache: nothing for the
user to do, so no warning.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import stat
import sys
import uuid
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..._version import __version__
from ...errors import DiskCacheWarning
from ...ir import Graph
from . import native

_FORMAT = "tracejit-diskcache-2"  # bump when the layout of an entry changes


class NotCacheable(OSError):
    """A kernel calls functions a library loaded without Numba could not resolve."""


@dataclass(frozen=True)
class Stats:
    """What the disk cache did in this process, counted per kernel."""

    loaded: int = 0  # kernels whose machine code came from disk
    compiled: int = 0  # kernels Numba compiled (and saved)
    discarded: int = 0  # corrupt entries or kernel libraries thrown away


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
    h = hashlib.sha256()
    for part in (_FORMAT, backend, _backend_fingerprint(), __version__,
                 _numba_version(), _abi(), _host(), str(graph), source):
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
def _numba_version() -> str:
    """Numba's version file (not ``numba.__version__``: importing Numba takes 0.2 s, and
    ``importlib.metadata`` 16 ms)."""
    from importlib.util import find_spec

    spec = find_spec("numba")
    try:
        return Path(spec.origin).with_name("_version.py").read_text()
    except (AttributeError, TypeError, OSError):
        from importlib.metadata import version

        return version("numba")


def _abi() -> str:
    """The interpreter the kernels are built for: they read its tuples and NumPy's arrays
    at fixed offsets (``native.py``), and Python 3.14 moved a tuple's items."""
    return (f"{sys.implementation.cache_tag}: tuple items at {native.TUPLE_ITEMS}, "
            f"array data at {native.ARRAY_DATA}")


@functools.cache
def _host() -> str:
    """The CPU model and its feature flags (machine code uses the host's instructions)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().split("\n\n")[0].splitlines()
        return "\n".join(line for line in lines
                         if line.split(":")[0].strip() in ("vendor_id", "model name", "flags"))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


@functools.cache
def _backend_fingerprint() -> str:
    """Hash of the CPU backend package's sources (this one's folder): the generated code
    calls into them, so an edit there changes machine code that the generated source alone
    does not show."""
    folder = Path(__file__).parent
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
        self.index = directory / "index.json"
        self.loaded = 0
        self.compiled = 0

    def load(self, n: int) -> list | None:
        """The entry's ``n`` kernels as callables, or None when they have not been saved
        (or could not be read back: then the files are discarded, with a warning; or are
        not the user's own: then they are left alone, with a warning, and saving replaces
        them)."""
        try:
            distrust = _distrust(self.index)
            index = json.loads(self.index.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            return self._discard_library(e)
        if distrust:
            return _refuse(self.index, distrust)
        try:
            symbols, library = index["symbols"], self.directory / index["library"]
            distrust = _distrust(library)
            if distrust:
                return _refuse(library, distrust)
            if len(symbols) != n or native.digest(library) != index["sha256"]:
                raise ValueError(f"{library.name} does not match index.json")
            kernels = native.load(library, symbols)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            return self._discard_library(e)
        self.loaded += n
        _count(loaded=n)
        return kernels

    def save(self, symbols: list[str], objects) -> None:
        """Link the kernels (``objects()`` gives their object code) into a library named by
        its hash (a process never reloads a stale library of the same name). Failing only
        costs later processes a compile, so it warns rather than raises."""
        self.compiled += len(symbols)
        _count(compiled=len(symbols))
        tmp = self.directory / f".kernels.{uuid.uuid4().hex[:12]}.so"
        try:
            native.link(objects(), tmp)
            os.chmod(tmp, 0o600)  # dlopen needs no more; the linker made it 0o755 - umask
            digest = native.digest(tmp)
            library = f"kernels-{digest[:16]}.so"
            os.replace(tmp, self.directory / library)
            _write_atomic(self.index, json.dumps(
                {"library": library, "symbols": symbols, "sha256": digest}).encode())
        except NotCacheable as e:  # ours, not the user's: compiled each process, silently
            _log().debug("tracejit: not saving kernels to the disk cache: %s", e)
        except OSError as e:
            warnings.warn(f"tracejit: could not save compiled kernels to {self.directory} "
                          f"({e})", DiskCacheWarning, stacklevel=2)
        finally:
            tmp.unlink(missing_ok=True)

    def describe(self) -> str:
        n = lambda count: f"{count} kernel{'s' if count != 1 else ''}"
        if self.compiled:
            return f"disk cache miss ({n(self.compiled)} compiled, {self.loaded} loaded)"
        if self.loaded:
            return f"disk cache hit ({n(self.loaded)} loaded)"
        return "disk cache: no kernels"

    def _discard_library(self, error: Exception) -> None:
        for path in (self.index, *self.directory.glob("kernels-*.so")):
            path.unlink(missing_ok=True)
        _count(discarded=1)
        warnings.warn(f"tracejit: discarded unreadable compiled kernels in {self.directory} "
                      f"({type(error).__name__}: {error}); compiling again",
                      DiskCacheWarning, stacklevel=3)


class _Off:
    """Where kernels compiled with the disk cache off (or unusable) live: nowhere."""

    directory = None

    def describe(self) -> str:
        return "disk cache off"


OFF = _Off()


def open_entry(graph: Graph, source: str, backend: str) -> Entry | None:
    """The entry for this generated module, with ``kernels.py`` written if it is new; None
    when the cache directory cannot be written (a warning says so)."""
    root = cache_dir()
    directory = root / key(graph, source, backend)
    path = directory / "kernels.py"
    data = source.encode()
    try:
        _make_private_dir(root)
        distrust = _distrust(root)
        if distrust:
            return _refuse(root, distrust)
        try:
            existing = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            existing = None
        if existing is not None and existing != data:
            _discard(directory, "kernels.py does not match the generated source")
            existing = None
        if existing is None:
            _make_private_dir(directory)
            _write_atomic(path, data)
        distrust = _distrust(directory)
        if distrust:
            return _refuse(directory, distrust)
    except OSError as e:
        warnings.warn(f"tracejit: cannot use the cache directory {root} ({e}); compiling "
                      "without the disk cache (set TRACEJIT_CACHE_DIR or TRACEJIT_DISK_CACHE=0)",
                      DiskCacheWarning, stacklevel=2)
        return None
    return Entry(directory)


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, readable and writable by its owner only."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)  # the umask may have taken the owner's bits too
            f.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents, which keep the system's usual modes) as
    ``0o700`` whatever the umask; an existing directory is left as it is (and judged by
    :func:`_distrust`)."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:  # another process made it first, or it is not a directory
        if not path.is_dir():
            raise
        return
    os.chmod(path, 0o700)


def _uid() -> int | None:
    """The current user (None where there are no POSIX owners). Tests replace it."""
    return os.getuid() if hasattr(os, "getuid") else None


def _distrust(path: Path) -> str | None:
    """Why ``path`` must not be trusted with machine code, or None: owned by another user,
    or writable by its group or by others (either could swap in a library)."""
    uid = _uid()
    if uid is None:
        return None
    st = path.stat()
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not by you (uid {uid})"
    mode = stat.S_IMODE(st.st_mode)
    who = [w for w, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if mode & bit]
    if who:
        return f"writable by {' and '.join(who)} (mode {mode:04o})"
    return None


_refused: set[Path] = set()


def _refuse(path: Path, reason: str) -> None:
    """Warn, once per path and process, that ``path`` is not used; returns None."""
    if path not in _refused:
        _refused.add(path)
        warnings.warn(f"tracejit: not loading compiled kernels from {path}: it is {reason}; "
                      "compiling instead. Make it yours and private (chown, chmod go-w), or "
                      "remove it, or set TRACEJIT_CACHE_DIR", DiskCacheWarning, stacklevel=4)


@functools.cache
def _log() -> logging.Logger:
    return logging.getLogger("tracejit")


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
