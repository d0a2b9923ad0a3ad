"""The CPU backend's on-disk compile cache: a new process that runs a jitted function on a
signature an earlier process compiled loads its machine code instead of compiling it
again, and without importing Numba (see ``native.py``).

An entry holds one loop kernel, and is a directory named by a hash of everything that
decides its machine code: the kernel's generated module (which names no graph: kernels
equal up to their names in the graph share an entry, across functions and signatures; it
inlines scalar constants and reads array constants as arguments, and its outer extent at
run time), the backend's own source files (the generated module imports helpers from
them), the host CPU (the code uses its vector instructions), the interpreter (the kernels
read its tuples' layout), and the tracejit and Numba versions. It holds the kernel module
as ``kernels.py`` (its first line says what the kernel computes), the kernel linked into
a shared library ``kernels-<hash>.so``, and ``index.json``: the library's name and
SHA-256 and the kernel's symbol name.

``TRACEJIT_CACHE_DIR`` sets the location (default: the platform's user cache folder, as
platformdirs gives it: ``$XDG_CACHE_HOME/tracejit`` or ``~/.cache/tracejit`` on Linux);
``TRACEJIT_DISK_CACHE=0`` turns the cache off.

The cache keeps itself under a size cap, ``TRACEJIT_CACHE_MAX`` (default 1 GiB; ``0`` or
``off`` for none): after saving a library, least recently used entries are evicted until
the total fits (``usage`` in the cache directory tallies its size, so that a save counts
every entry only when the cap may be passed, or hourly). An entry's last use is its
directory's mtime: loading it touches it (once per compile, never per call), and writing
into it changes it anyway. Entries this process opened are never evicted by it; another
process may evict them, which is safe: eviction renames the directory away before
deleting it, so a loader sees the whole entry or none (and a miss compiles and saves the
entry afresh), and on Linux a library already dlopen'ed stays mapped after its file is
unlinked.

Files are written under a temporary name and renamed into place, ``index.json`` last, so
concurrent processes see whole entries or none. What cannot be read back (a truncated
``kernels.py``, a library whose hash does not match, one that will not load) is discarded
with a :class:`~tracejit.errors.DiskCacheWarning` and compiled afresh.

The libraries are machine code this process runs, so the cache is trusted only when it is
the user's own, as ssh treats its keys: the cache directory, an entry's directory,
``index.json`` or the library owned by another user, or writable by group or others, is not
used (one warning per path says why) and the kernels compile instead. Directories are made
``0o700`` and files ``0o600`` whatever the umask. A kernel this process compiled runs from
the library it saved here, loaded as a later process loads it; with the cache off, or when
saving failed, from a library of the process's own (:func:`private_library`).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from ..._version import __version__
from ...errors import DiskCacheWarning
from . import native

_FORMAT = "tracejit-diskcache-3"  # bump when the layout of an entry changes


class NotCacheable(OSError):
    """A kernel that cannot run from a shared library: it calls Numba's runtime (Numba's
    JIT runs it instead), or a compile worker could not save it (the caller compiles it)."""


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
    """``TRACEJIT_CACHE_DIR``, or the platform's user cache folder for tracejit."""
    if os.environ.get("TRACEJIT_CACHE_DIR"):
        return Path(os.environ["TRACEJIT_CACHE_DIR"]).expanduser()
    return _platform_cache_dir(os.environ.get("XDG_CACHE_HOME"), os.path.expanduser("~"))


@functools.cache
def _platform_cache_dir(xdg: str | None, home: str) -> Path:
    """The platform's convention, by platformdirs: ``$XDG_CACHE_HOME/tracejit`` or
    ``~/.cache/tracejit`` on Linux, ``~/Library/Caches/tracejit`` on macOS,
    ``%LOCALAPPDATA%\\tracejit\\Cache`` on Windows (cached per environment it reads)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tracejit", appauthor=False))


def key(source: str, backend: str) -> str:
    """Hex digest naming the entry of the kernel module ``source``. Not the graph: the
    source alone decides the kernel's machine code (array constants are arguments)."""
    h = hashlib.sha256()
    for part in (_FORMAT, backend, _backend_fingerprint(), __version__,
                 _numba_version(), _abi(), _host(), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


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
            f"array data at {native.ARRAY_DATA}, dimensions at {native.ARRAY_DIMENSIONS}")


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
    """One cache entry: the directory and its ``kernels.py``."""

    def __init__(self, directory: Path, source: bytes):
        self.directory = directory
        self.source = source  # to write the entry again if another process evicts it
        self.path = directory / "kernels.py"
        self.index = directory / "index.json"

    def load(self, n: int) -> list | None:
        """The entry's ``n`` kernels as callables, or None when they have not been saved
        (or could not be read back: then the files are discarded, with a warning; or are
        not the user's own: then they are left alone, with a warning, and saving replaces
        them)."""
        try:
            distrust = _distrust(self.index)
            index = json.loads(self.index.read_text())
        except (FileNotFoundError, NotADirectoryError):  # not saved, or evicted meanwhile
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
            if not self.index.exists():  # another process evicted the entry: a plain miss
                return None
            return self._discard_library(e)
        _count(loaded=n)
        _touch(self.directory)
        return kernels

    def save(self, symbols: list[str], objects: list[bytes]) -> Path | None:
        """Link the kernels' object code into a library named by its hash (a process never
        reloads a stale library of the same name); its path, or None if it could not be
        saved. Failing only costs later processes a compile, so it warns rather than
        raises."""
        tmp = self.directory / f".kernels.{uuid.uuid4().hex[:12]}.so"
        try:
            _materialise(self.directory, self.source)  # evicted while Numba compiled?
            runtime = built_c(native.RUNTIME_C, "runtime", self.directory.parent)
            native.link(objects, tmp, runtime)
            os.chmod(tmp, 0o600)  # dlopen needs no more; the linker made it 0o755 - umask
            digest = native.digest(tmp)
            library = self.directory / f"kernels-{digest[:16]}.so"
            os.replace(tmp, library)
            _write_atomic(self.index, json.dumps(
                {"library": library.name, "symbols": symbols, "sha256": digest}).encode())
        except OSError as e:
            self.unsaved(len(symbols), e)
            return None
        finally:
            tmp.unlink(missing_ok=True)
        _count(compiled=len(symbols))
        try:  # the cache grew: back under its cap (never this entry, which is in use)
            _after_save(self.directory)
        except OSError as e:
            _log().debug("tracejit: could not prune the disk cache: %s", e)
        return library

    def unsaved(self, count: int, error: Exception | None) -> None:
        """Count ``count`` kernels compiled but not saved, and warn why (no ``error``: they
        call Numba's runtime and run from its JIT, nothing for the user to do)."""
        _count(compiled=count)
        if error is not None:
            warnings.warn(f"tracejit: could not save compiled kernels to {self.directory} "
                          f"({error})", DiskCacheWarning, stacklevel=3)

    def _discard_library(self, error: Exception) -> None:
        for path in (self.index, *self.directory.glob("kernels-*.so")):
            path.unlink(missing_ok=True)
        _count(discarded=1)
        warnings.warn(f"tracejit: discarded unreadable compiled kernels in {self.directory} "
                      f"({type(error).__name__}: {error}); compiling again",
                      DiskCacheWarning, stacklevel=3)


def open_entry(source: str, backend: str) -> Entry | None:
    """The entry for this kernel module, with ``kernels.py`` written if it is new; None
    when the cache directory cannot be written (a warning says so)."""
    root = cache_dir()
    directory = root / key(source, backend)
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
        if existing != data:
            _materialise(directory, data)
        distrust = _distrust(directory)
        if distrust:
            return _refuse(directory, distrust)
    except OSError as e:
        warnings.warn(f"tracejit: cannot use the cache directory {root} ({e}); compiling "
                      "without the disk cache (set TRACEJIT_CACHE_DIR or TRACEJIT_DISK_CACHE=0)",
                      DiskCacheWarning, stacklevel=2)
        return None
    _in_use.add(directory)
    return Entry(directory, data)


def load_image(source: str, tag: str) -> bytes | None:
    """The compiled image :func:`save_image` saved for ``source`` (the CUDA backend's
    modules: ``tag`` names the compiler, its options and the GPU), or None: not saved, not
    the user's own (a warning), or unreadable (discarded, with a warning). An image entry
    holds ``kernels.cu`` (the source), the image named by its hash and ``index.json``, and
    is weighed, listed and evicted as any other entry."""
    if not enabled():
        return None
    directory = cache_dir() / key(source, tag)
    try:
        index = json.loads((directory / "index.json").read_text())
        image_path = directory / index["library"]
        distrust = _distrust(directory) or _distrust(image_path)
        if distrust:
            return _refuse(image_path, distrust)
        image = image_path.read_bytes()
        if (hashlib.sha256(image).hexdigest() != index["sha256"]
                or (directory / "kernels.cu").read_bytes() != source.encode()):
            raise ValueError(f"{image_path.name} does not match index.json")
    except (FileNotFoundError, NotADirectoryError):  # not saved, or evicted meanwhile
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        _discard(directory, f"{type(e).__name__}: {e}")
        return None
    _in_use.add(directory)
    _touch(directory)
    return image


def save_image(source: str, tag: str, image: bytes, symbols: list[str]) -> None:
    """Keep ``image``, compiled from ``source``, for :func:`load_image` in later processes.
    Failing only costs them a compile, so it warns rather than raises."""
    if not enabled():
        return
    root = cache_dir()
    directory = root / key(source, tag)
    try:
        _make_private_dir(root)
        distrust = _distrust(root)
        if distrust:
            return _refuse(root, distrust)
        _make_private_dir(directory)
        distrust = _distrust(directory)
        if distrust:
            return _refuse(directory, distrust)
        digest = hashlib.sha256(image).hexdigest()
        library = f"kernels-{digest[:16]}.bin"
        _write_atomic(directory / "kernels.cu", source.encode())
        _write_atomic(directory / library, image)
        _write_atomic(directory / "index.json", json.dumps(
            {"library": library, "symbols": symbols, "sha256": digest}).encode())
    except OSError as e:
        warnings.warn(f"tracejit: could not save a compiled module to {directory} ({e})",
                      DiskCacheWarning, stacklevel=2)
        return
    _in_use.add(directory)
    try:
        _after_save(directory)
    except OSError as e:
        _log().debug("tracejit: could not prune the disk cache: %s", e)


def _materialise(directory: Path, source: bytes) -> None:
    """Make the entry's directory and ``kernels.py`` where they are missing (a new entry,
    or one another process evicted since this one opened it)."""
    if not (directory / "kernels.py").exists():
        _make_private_dir(directory)
        _write_atomic(directory / "kernels.py", source)


def _touch(directory: Path) -> None:
    """Record a use of the entry (its directory's mtime) for LRU eviction; a directory
    that is gone or not ours to touch only loses its place in the order."""
    try:
        os.utime(directory)
    except OSError:
        pass


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


# ---------------------------------------------------------------- size cap and eviction

DEFAULT_MAX = 1 << 30  # 1 GiB
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt])i?)?b?")
_ENTRY_NAME = re.compile(r"[0-9a-f]{40}")  # what key() names; reproducers/ and trash are not
_TRASH_NAME = re.compile(r"[0-9a-f]{40}\.(?:evicted|discarded)-[0-9a-f]{12}")
_in_use: set[Path] = set()  # entries this process opened: it never evicts them
_TALLY = "usage"  # "<bytes> <when counted>": the cache's size, so a save need not count it
_RECOUNT_S = 3600.0
_bad_max: set[str] = set()


def parse_size(text: str) -> int | None:
    """Bytes from ``text``: a number of bytes or one with a binary unit (``500M``,
    ``2G``, ``1.5GiB``, ``64KB``); None for no cap (``0``, ``off``, ``none``,
    ``unlimited``, as ccache reads ``0``). ValueError for anything else."""
    text = text.strip().lower()
    if text in ("off", "none", "unlimited"):
        return None
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(text)
    size = int(float(match[1]) * _UNITS[match[2] or ""])
    return size or None


def max_bytes() -> int | None:
    """The cap from ``TRACEJIT_CACHE_MAX`` (None: no cap). A value it cannot read warns
    once (a :class:`DiskCacheWarning`, like the cache's other troubles: a typo must not
    stop a computation) and the default cap applies."""
    text = os.environ.get("TRACEJIT_CACHE_MAX", "").strip()
    if not text:
        return DEFAULT_MAX
    try:
        return parse_size(text)
    except ValueError:
        if text not in _bad_max:
            _bad_max.add(text)
            warnings.warn(f"tracejit: TRACEJIT_CACHE_MAX={text!r} is not a size; using the "
                          "default of 1G. Give bytes (1000000000) or a number with a unit "
                          "K, M, G or T (500M, 2G, 1.5GiB), or 0 or off for no cap",
                          DiskCacheWarning, stacklevel=2)
        return DEFAULT_MAX


@dataclass(frozen=True)
class EntryInfo:
    """An entry as ``python -m tracejit cache`` lists it and eviction weighs it."""

    directory: Path
    size: int  # bytes of its files
    written: float  # when its kernels were saved (index.json's mtime, else kernels.py's)
    used: float  # when it was last loaded or written (the directory's mtime)
    distrust: str | None  # why it is left alone, as _distrust says

    @property
    def function(self) -> str:
        """What the kernel computes (its ops and loop extents), from ``kernels.py``'s first
        line (an entry of an older tracejit names the traced function there), or for a
        CUDA module, the function ``kernels.cu``'s first line names."""
        for name in ("kernels.py", "kernels.cu"):
            try:
                with open(self.directory / name) as f:
                    first = f.readline()
                break
            except OSError:
                continue
        else:
            return "?"
        return first.partition(":")[2].strip() or "?"

    @property
    def kernels(self) -> int:
        """How many kernels its library holds (0: none saved)."""
        try:
            return len(json.loads((self.directory / "index.json").read_text())["symbols"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0


def entries(root: Path | None = None) -> list[EntryInfo]:
    """The cache's entries, least recently used first. An entry that vanishes while it is
    read (another process evicted it) is left out."""
    root = cache_dir() if root is None else root
    found = []
    try:
        children = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for child in children:
        if not _ENTRY_NAME.fullmatch(child.name) or not child.is_dir(follow_symlinks=False):
            continue
        try:
            found.append(_info(Path(child.path)))
        except OSError:  # evicted meanwhile, or unreadable: not ours to weigh
            continue
    return sorted(found, key=lambda e: e.used)


def _info(directory: Path) -> EntryInfo:
    used = directory.stat().st_mtime
    distrust = _distrust(directory)
    size, stamps = 0, {}
    for f in os.scandir(directory):
        st = f.stat(follow_symlinks=False)
        size += st.st_size
        stamps[f.name] = st.st_mtime
    written = stamps.get("index.json", stamps.get("kernels.py", used))
    return EntryInfo(directory, size, written, used, distrust)


@dataclass(frozen=True)
class Evicted:
    """What :func:`prune` or :func:`clear` removed, and what is left."""

    count: int
    freed: int  # bytes
    left: int  # bytes still in the cache
    kept: int  # entries left alone although asked for: in use here, or not trusted


def prune(root: Path | None = None) -> Evicted:
    """Evict least recently used entries until the cache holds at most
    :func:`max_bytes`. Only in a cache directory this module trusts, only trusted
    entries, never one this process opened."""
    cap = max_bytes()
    root = cache_dir() if root is None else root
    found = entries(root)
    total = sum(e.size for e in found)
    if cap is None or total <= cap:
        _write_tally(root, total)
        return Evicted(0, 0, total, 0)
    return _evict_all(root, found, total, cap)


def _after_save(directory: Path) -> None:
    """Back under the cap after ``directory``'s entry was saved. Counting the cache reads
    every entry (about 20 us each, and a full 1 GiB cache holds tens of thousands), so the
    last count plus what was saved since, kept in the ``usage`` file, says when a count is
    due: when the cap may be passed, or an hour after the last one (processes saving at
    the same time may lose each other's additions; that only delays eviction)."""
    root, cap = directory.parent, max_bytes()
    if cap is None:
        return
    try:
        total, counted_at = (float(x) for x in (root / _TALLY).read_text().split())
    except (OSError, ValueError):
        total, counted_at = float("inf"), 0.0
    total += _info(directory).size
    if total <= cap and time.time() - counted_at < _RECOUNT_S:
        _write_atomic(root / _TALLY, f"{total:.0f} {counted_at}".encode())
    else:
        prune(root)


def _write_tally(root: Path, total: int) -> None:
    """Record a fresh count of the cache's bytes (only in a cache directory we trust)."""
    try:
        if _distrust(root) is None:
            _write_atomic(root / _TALLY, f"{total} {time.time()}".encode())
    except OSError as e:
        _log().debug("tracejit: could not record the disk cache's size: %s", e)


def clear(root: Path | None = None) -> Evicted:
    """Remove every trusted entry (not one this process opened)."""
    root = cache_dir() if root is None else root
    found = entries(root)
    return _evict_all(root, found, sum(e.size for e in found), 0)


def _evict_all(root: Path, found: list[EntryInfo], total: int, cap: int) -> Evicted:
    count = freed = kept = 0
    if not root.is_dir() or _distrust(root):  # never delete in a directory we distrust
        return Evicted(0, 0, total, len(found))
    _sweep_trash(root)
    for e in found:
        if total <= cap:
            break
        if e.distrust or e.directory in _in_use:
            kept += 1
            continue
        if _evict(e.directory):
            count, freed, total = count + 1, freed + e.size, total - e.size
    _write_tally(root, total)
    return Evicted(count, freed, total, kept)


def _sweep_trash(root: Path) -> None:
    """Delete what a process that was killed while evicting or discarding an entry left
    under a trash name (no process loads from those names, so two deleting at once is
    harmless); only our own private directories."""
    for child in os.scandir(root):
        if _TRASH_NAME.fullmatch(child.name) and child.is_dir(follow_symlinks=False):
            try:
                if _distrust(Path(child.path)) is None:
                    shutil.rmtree(child.path, ignore_errors=True)
            except FileNotFoundError:  # its own process finished deleting it
                continue


def _evict(directory: Path) -> bool:
    """Rename the entry away, then delete it: a process loading it sees the whole entry
    (a library it has dlopen'ed stays mapped: on Linux and macOS unlinking a loaded
    shared library is safe) or none, which is a miss it compiles and saves again. False
    when another process removed it first."""
    trash = directory.with_name(f"{directory.name}.evicted-{uuid.uuid4().hex[:12]}")
    try:
        os.replace(directory, trash)
    except FileNotFoundError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    _log().debug("tracejit: evicted %s from the disk cache", directory.name)
    return True


def built_c(source: str, kind: str, root: Path | None = None) -> Path:
    """C ``source`` built as ``native.C_BUILDS[kind]`` says (the kernels' trampoline, the
    runtime object every kernel library links with), once per machine into the cache's
    folder (``root``, the one an entry being saved is in; by default the current one), or
    once per process into a temporary one when the cache is off or its copy is not to be
    trusted with machine code (``_distrust``). Looked for on every use: a copy removed
    meanwhile is built again. A copy's name ends in the SHA-256 of its bytes, checked
    before it is used: a damaged one is removed with a warning and built again."""
    suffix = native.C_BUILDS[kind][1]
    tag = hashlib.sha256(f"{source}{sys.implementation.cache_tag}{sys.platform}"
                         .encode()).hexdigest()[:16]
    folder = cache_dir() if root is None else root
    with _c_lock:  # (a thread building it already, ``kernels.py``'s: waited for, not repeated)
        if enabled():
            found = _checked_c(folder, f"{kind}-{tag}-*{suffix}")
            if found is not None:
                return found
            if any(folder.glob(f"{kind}-{tag}-*{suffix}")):  # there, but not to be trusted
                folder = _process_folder()
        else:
            folder = _process_folder()
        found = _checked_c(folder, f"{kind}-{tag}-*{suffix}")
        if found is not None:
            return found
        folder.mkdir(parents=True, exist_ok=True)
        return native.build_c(source, folder, f"{kind}-{tag}", kind)


def _checked_c(folder: Path, pattern: str) -> Path | None:
    """The built C file in ``folder`` matching ``pattern`` whose bytes hash to the digest
    its name ends in and that may be trusted; a damaged one is removed, with a warning."""
    for path in folder.glob(pattern):
        try:
            digest = native.digest(path)
        except OSError:
            continue
        if path.stem.rsplit("-", 1)[1] != digest[:DIGEST_CHARS]:
            path.unlink(missing_ok=True)
            _count(discarded=1)
            warnings.warn(f"tracejit: removed {path}: its bytes do not match the hash in its "
                          "name (damaged); building it again", DiskCacheWarning, stacklevel=4)
            continue
        if _distrust(path) is None:
            return path
    return None


DIGEST_CHARS = 16  # of a built C file's SHA-256, in its name


_c_lock = threading.Lock()


def private_library(objects: list[bytes]) -> Path:
    """The kernels' object code linked into a shared library of this process's own (the
    disk cache is off, or could not take it), removed when the process exits."""
    runtime = built_c(native.RUNTIME_C, "runtime", _process_folder())
    library = _process_folder() / f"kernels-{uuid.uuid4().hex[:12]}.so"
    native.link(objects, library, runtime)
    return library


@functools.cache
def _process_folder() -> Path:
    """A temporary folder of this process's own, removed when it exits."""
    folder = Path(tempfile.mkdtemp(prefix="tracejit-c-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


native.built_c = built_c  # (native.py imports no disk cache)
