"""The CPU backend's disk cache: a second process loads instead of compiling (without
importing Numba), corrupt entries are discarded with a warning and recompiled, and turning
it off writes nothing.

A fresh ``jit`` of the same function in the same process also goes to disk, so only the
cross-process test pays for subprocesses.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import cpu
from tracejit.backends.cpu import diskcache
from tracejit.errors import DiskCacheWarning

SRC = Path(__file__).resolve().parents[1] / "src"
# What only a C compiler makes: kernel libraries, and the C files linked into them (CI runs
# this file once more with none on PATH, where the rest must pass as they are).
needs_linker = pytest.mark.skipif(cpu.native.linker() is None,
                                  reason="no C compiler: no kernel library to keep or load")
X = np.linspace(-1, 1, 8, dtype=np.float32)


def chain(x, y):
    return np.tanh(x * y + 0.5) * np.exp(-x * x)


@pytest.fixture(autouse=True)
def _no_kernels_in_memory(monkeypatch):
    """Each test starts with no kernel compiled in this process, so it goes to disk; the
    disk cache's counts are this thread's (a later runner of an earlier test, its kernels
    loaded from the suite's cache in a compile worker's driver thread, is not this one's)."""
    monkeypatch.setattr(cpu.kernels, "_compiled", {})
    count = diskcache._count
    monkeypatch.setattr(diskcache, "_count", lambda **deltas: count(**deltas) if
                        threading.current_thread() is threading.main_thread() else None)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRACEJIT_DISK_CACHE", raising=False)
    return tmp_path


def run_fresh(fn=chain):
    """Compile ``fn`` anew (a new jit object, no kernel in memory, as in a new process)
    and call it; the stats it caused."""
    cpu.kernels._compiled.clear()
    before = diskcache.stats()
    out = tj.jit(fn, backend="cpu")(X, X)
    np.testing.assert_allclose(out, fn(X, X), rtol=1e-6)
    after = diskcache.stats()
    return {k: getattr(after, k) - getattr(before, k) for k in ("loaded", "compiled", "discarded")}


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A cache directory holding ``chain``'s entry, compiled once for the module."""
    root = tmp_path_factory.mktemp("populated")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEJIT_CACHE_DIR", str(root))
        mp.delenv("TRACEJIT_DISK_CACHE", raising=False)
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    return root


def kernel_entries(root: Path) -> list:
    """The kernel entries of the cache at ``root``, not the images of the math subroutines
    kernels call, saved there too by the first process (test) to compile them."""
    return [e for e in diskcache.entries(root) if (e.directory / "kernels.py").exists()]


@pytest.fixture
def entry(populated, cache) -> Path:
    """A copy of the populated entry in this test's own cache directory."""
    (src,) = (e.directory for e in kernel_entries(populated))
    return Path(shutil.copytree(src, cache / src.name))


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tracejit as tj
    from tracejit.backends.cpu import diskcache

    @tj.jit(backend="cpu")
    def chain(x, y):
        return np.tanh(x * y + 0.5) * np.exp(-x * x)

    x = np.linspace(-1, 1, 8, dtype=np.float32)
    out = chain(x, x)
    print(json.dumps({"out": out.tolist(), "numba": "numba" in sys.modules,
                      **vars(diskcache.stats())}))
""")


@needs_linker
def test_second_process_loads_instead_of_compiling(fresh_processes):
    (first, log1), (second, log2) = fresh_processes(SCRIPT, TRACEJIT_LOG="1")
    assert first["compiled"] >= 1 and first["loaded"] == 0
    assert "disk cache miss" in log1
    assert second["compiled"] == 0 and second["loaded"] == first["compiled"]
    assert first["numba"] and not second["numba"]  # loading needs no Numba
    assert "tracejit: compiled chain(x: f32[8], y: f32[8]) for cpu" in log2
    assert "disk cache hit" in log2
    assert second["out"] == first["out"]


@needs_linker
def test_fresh_jit_in_process_loads_from_disk(entry):
    assert run_fresh() == {"loaded": 1, "compiled": 0, "discarded": 0}
    source = tj.jit(chain, backend="cpu").lower(X, X).source
    assert (entry / "kernels.py").read_text() in source  # with the runner around it
    names = {p.name for p in entry.iterdir()}
    (library,) = names - {"index.json", "kernels.py"}
    assert len(names) == 3 and library.startswith("kernels-") and library.endswith(".so")



@needs_linker
def test_the_runtime_object_is_built_once_per_cache_and_again_when_removed(cache):
    """Every kernel library links the same small runtime object: the cache keeps one
    (a process compiling kernels does not run the C compiler for it again), and one
    removed meanwhile (a user clearing the folder) is built again, not a failed save."""
    assert run_fresh()["compiled"] == 1
    (runtime,) = cache.glob("runtime-*.o")
    made = runtime.stat()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DiskCacheWarning)
        assert run_fresh(lambda x, y: np.sin(x * y + 1.5))["compiled"] == 1
        assert (runtime.stat().st_ino, runtime.stat().st_mtime_ns) == (made.st_ino,
                                                                       made.st_mtime_ns)
        runtime.unlink()
        assert run_fresh(lambda x, y: np.cos(x * y - 0.5))["compiled"] == 1
    assert len(list(cache.glob("runtime-*.o"))) == 1
    assert run_fresh(lambda x, y: np.cos(x * y - 0.5)) == {"loaded": 1, "compiled": 0,
                                                           "discarded": 0}


@needs_linker
@pytest.mark.parametrize("kind", ["runtime", "launch"])
def test_a_damaged_c_file_is_removed_with_a_warning_and_built_again(cache, kind):
    """The runtime object and the kernels' trampoline are machine code the cache keeps:
    each is named by the hash of its bytes, checked before use, so a damaged copy (its
    first bytes zeroed) is removed and rebuilt rather than loaded or linked."""
    built = diskcache.built_c(cpu.native.RUNTIME_C if kind == "runtime" else
                              cpu.native.LAUNCH_C, kind)
    data = bytearray(built.read_bytes())
    data[:64] = bytes(64)
    built.write_bytes(bytes(data))
    with pytest.warns(DiskCacheWarning, match="do not match the hash"):
        again = diskcache.built_c(cpu.native.RUNTIME_C if kind == "runtime" else
                                  cpu.native.LAUNCH_C, kind)
    assert again.read_bytes()[:64] != bytes(64)
    assert [p.name for p in cache.glob(f"{kind}-*")] == [again.name]
    assert run_fresh()["compiled"] == 1  # (links the rebuilt runtime object)

@needs_linker
def test_the_c_files_build_beside_numbas_compile_once(cache, monkeypatch):
    """A compile into an empty cache builds the runtime object on a thread of its own
    while Numba compiles (``kernels._build_c_meanwhile``), and code needing a C file
    meanwhile waits for that build rather than starting a second one."""
    builds = []
    build_c = cpu.native.build_c

    def slow(source, folder, stem, kind):
        builds.append((kind, threading.current_thread().name))
        time.sleep(0.2)
        return build_c(source, folder, stem, kind)

    monkeypatch.setattr(cpu.native, "build_c", slow)
    assert run_fresh()["compiled"] == 1
    assert builds == [("runtime", "tracejit-build-c")]
    (runtime,) = cache.glob("runtime-*.o")
    runtime.unlink()
    builds.clear()
    got = []
    ask = lambda: got.append(diskcache.built_c(cpu.native.RUNTIME_C, "runtime"))
    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and got == [runtime] * 4 and runtime.exists()


@needs_linker
def test_truncated_source_is_discarded_and_recompiled(entry):
    path = entry / "kernels.py"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.warns(DiskCacheWarning, match="kernels.py does not match"):
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 1}
    assert run_fresh()["loaded"] == 1  # healed


def _damage_symbols(entry: Path) -> None:
    index = json.loads((entry / "index.json").read_text())
    index["symbols"] = ["no_such_kernel"]
    (entry / "index.json").write_text(json.dumps(index))


@pytest.mark.parametrize("name, damage", [
    ("kernels-*.so", lambda p: p.write_bytes(os.urandom(64))),
    ("kernels-*.so", lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])),
    ("index.json", lambda p: p.write_bytes(b"{garbage")),
    ("index.json", lambda p: _damage_symbols(p.parent)),
], ids=["garbage-library", "truncated-library", "garbage-index", "missing-symbol"])
@needs_linker
def test_corrupt_kernel_files_are_discarded_and_recompiled(entry, name, damage):
    (path,) = entry.glob(name)
    damage(path)
    with pytest.warns(DiskCacheWarning, match="discarded unreadable compiled kernels"):
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 1}
    assert run_fresh()["loaded"] == 1  # healed


@needs_linker
def test_library_with_a_forged_hash_still_fails_safely(entry):
    """A library that matches its index but not its kernels' symbols does not load."""
    (lib,) = entry.glob("kernels-*.so")
    lib.write_bytes(b"\x7fELF" + os.urandom(200))
    index = json.loads((entry / "index.json").read_text())
    index["sha256"] = hashlib.sha256(lib.read_bytes()).hexdigest()
    (entry / "index.json").write_text(json.dumps(index))
    with pytest.warns(DiskCacheWarning, match="discarded unreadable compiled kernels"):
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 1}


def test_without_a_linker_it_warns_and_still_computes(cache, monkeypatch):
    from tracejit.backends.cpu import native

    monkeypatch.setattr(native, "linker", lambda: None)
    cpu.kernels._say_unsaved_without_a_compiler.cache_clear()
    with pytest.warns(DiskCacheWarning, match="no C compiler"):
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    (entry,) = kernel_entries(cache)
    assert sorted(p.name for p in entry.directory.iterdir()) == ["kernels.py"]


NO_COMPILER_SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import tracejit as tj

    @tj.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    @tj.jit
    def counts(a, b):
        return ((a > b) & (a % 3 == 0)).sum(axis=0), np.cumsum(a * b, axis=1)

    x = np.random.default_rng(0).standard_normal((300, 200)).astype(np.float32)
    a = np.arange(600, dtype=np.int32).reshape(30, 20)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for _ in range(3):  # the first call and the cached ones
            got, (n, c) = softmax(x), counts(a, a[::-1])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    print(json.dumps({
        "softmax": float(np.abs(got - e / e.sum(axis=1, keepdims=True)).max()),
        "counts": bool(np.array_equal(n, ((a > a[::-1]) & (a % 3 == 0)).sum(axis=0))
                       and np.array_equal(c, np.cumsum(a * a[::-1], axis=1))),
        "warnings": [str(w.message) for w in said]}))
""")


def test_with_no_c_compiler_on_path_every_kernel_runs(fresh_processes, tmp_path):
    """No ``cc``, ``gcc`` or ``clang`` on PATH and no ``$CC`` (as on many laptops): kernels
    compile with Numba and run, unsaved, in every process, which one warning says (the
    trampoline that calls kernels cannot be built either: ctypes calls them)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    for run, _ in fresh_processes(NO_COMPILER_SCRIPT, PATH=str(empty), CC=""):
        assert run["softmax"] < 1e-6 and run["counts"]
        assert len(run["warnings"]) == 1 and "no C compiler" in run["warnings"][0]


@needs_linker
def test_a_kernel_compiled_here_runs_from_the_library_it_saved(cache):
    """Numba compiles ahead of time: the compiling process runs the very machine code a
    later process loads, from the shared library in the entry (no JIT copy of it)."""
    from tracejit.backends.cpu import native

    assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    (kernel,) = [k for k in cpu.kernels._compiled.values()]
    owner = (kernel if native._launch_method() is None else native._by_launcher[kernel])._owner
    (entry,) = (p for p in cache.iterdir() if p.is_dir())
    (library,) = entry.glob("kernels-*.so")
    assert owner._name == str(library)


def test_disabled_cache_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("TRACEJIT_DISK_CACHE", "0")
    f = tj.jit(chain, backend="cpu")
    np.testing.assert_allclose(f(X, X), chain(X, X), rtol=1e-6)
    assert list(cache.iterdir()) == []
    assert f.lower(X, X).source.startswith("# tracejit CPU backend")


def test_unwritable_directory_warns_and_still_computes(cache, monkeypatch):
    blocker = cache / "file"
    blocker.write_text("")
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(blocker / "sub"))
    with pytest.warns(DiskCacheWarning, match="cannot use the cache directory"):
        np.testing.assert_allclose(tj.jit(chain, backend="cpu")(X, X), chain(X, X), rtol=1e-6)


def test_array_constants_are_arguments_so_their_kernels_share_an_entry(cache):
    """The key is the kernel's source alone: it must not bake in array constants (they
    are runner arguments), so two tables give one entry and each its own results."""
    x = np.linspace(0, 1, 32, dtype=np.float32)
    for scale in (1, 2):
        table = np.arange(32, dtype=np.float32) * scale

        def f(x, table=table):
            return np.exp(x) * table

        np.testing.assert_allclose(tj.jit(f, backend="cpu")(x), f(x), rtol=1e-6)
    assert len(diskcache.entries(cache)) == 1


def test_key_sees_the_interpreters_layout(cache, monkeypatch):
    """Kernels read argument tuples at the interpreter's item offset, which Python 3.14
    moved (a cached hash before the items): a cache shared by two Pythons must not hand
    one the other's kernels."""
    from tracejit.backends.cpu import native

    before = diskcache.key("source", "cpu")
    assert native.TUPLE_ITEMS == tuple.__basicsize__
    monkeypatch.setattr(native, "TUPLE_ITEMS", native.TUPLE_ITEMS + 8)
    assert diskcache.key("source", "cpu") != before


def test_default_location(monkeypatch):
    monkeypatch.delenv("TRACEJIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/some/where")
    assert diskcache.cache_dir() == Path("/some/where/tracejit")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert diskcache.cache_dir() == Path.home() / ".cache" / "tracejit"


def test_reference_backend_uses_no_disk_cache(cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tj.jit(chain, backend="reference")(X, X)
    assert list(cache.iterdir()) == []


# ---------------------------------------------------------------- kernels with error paths


def _int_forms():
    """Every integer division, remainder, power and cast form a kernel may hold."""
    return {
        "floor_divide": lambda a, b: a // b, "remainder": lambda a, b: a % b,
        "divmod": lambda a, b: divmod(a, b), "by_zero": lambda a, b: a // (b - b) + a % (b - b),
        "by_constant": lambda a, b: a // 3 - a % 5, "power": lambda a, b: a ** 2 + b ** 3,
        "int_power": lambda a, b: a ** (b % 3), "float_floor": lambda a, b: (a / 3) // 0.7,
        "float_mod": lambda a, b: (a / 3) % 0.7, "to_int": lambda a, b: (a / 3).astype(np.int32),
        "to_uint8": lambda a, b: (a * 7).astype(np.uint8) // np.uint8(3),
        "to_float": lambda a, b: a.astype(np.float32) / b, "row": lambda a, b: a // (
            a.sum(axis=1, keepdims=True) % 5 + 1),
        "reduced": lambda a, b: (a // b).sum(axis=0) + (a % b).max(axis=1).sum(),
    }


@needs_linker
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_integer_error_paths_compile_silently_and_are_saved(cache, dtype):
    """A warning means the user must act: kernels with integer division, remainder, power
    or casts (error paths in Numba's default error model) save without one."""
    a = (np.arange(-60, 60) % 97).astype(dtype).reshape(8, 15)
    b = (np.arange(120) % 7 + 1).astype(dtype).reshape(8, 15)
    for name, fn in _int_forms().items():
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error")
            got = tj.jit(fn, backend="cpu")(a, b)
            want = fn(a, b)
        for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want)),
                        strict=True):
            np.testing.assert_array_equal(g, w, err_msg=name)
    entries = [e.directory for e in diskcache.entries(cache)
               if "cfunc(" in (e.directory / "kernels.py").read_text()]
    assert entries and all((p / "index.json").exists() for p in entries)


def test_kernels_that_need_numbas_runtime_stay_out_silently(cache, monkeypatch):
    """Were a kernel to call Numba's runtime, it is not saved, with no warning (a debug
    log line), and still runs."""
    from tracejit.backends.cpu import compiler

    monkeypatch.setattr(compiler, "_resolvable", lambda symbol: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    (entry,) = (p for p in cache.iterdir() if p.is_dir())  # (beside built C)
    assert sorted(p.name for p in entry.iterdir()) == ["kernels.py"]


# ---------------------------------------------------------------- trusting the cache


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mode & 0o777 for p in [root, *root.rglob("*")]}


@needs_linker
def test_a_fresh_cache_is_private_whatever_the_umask(tmp_path, monkeypatch):
    root = tmp_path / "made" / "cache"
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(root))
    monkeypatch.delenv("TRACEJIT_DISK_CACHE", raising=False)
    old = os.umask(0o002)  # a umask that would make group-writable files
    try:
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    finally:
        os.umask(old)
    modes = _modes(root)
    assert modes.pop(diskcache._TALLY) == 0o600
    (runtime,) = [p for p in modes if p.startswith("runtime-")]
    assert modes.pop(runtime) == 0o600  # linked into every library: kept once, as private
    (entry,) = [p for p in modes if p != "." and "/" not in p]
    assert modes["."] == 0o700 and modes[entry] == 0o700
    files = {name: mode for name, mode in modes.items() if "/" in name}
    assert len(files) == 3 and set(files.values()) == {0o600}  # kernels.py, index, library
    assert run_fresh()["loaded"] == 1  # and it loads


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o720], ids=["group", "world", "group-w"])
def test_a_writable_cache_directory_is_refused(entry, mode):
    """The cache directory itself writable by others: nothing in it is loaded; one warning
    says which path and why, and the function still computes."""
    root = entry.parent
    root.chmod(mode)
    with pytest.warns(DiskCacheWarning, match=f"{root}: it is writable by") as record:
        assert run_fresh()["loaded"] == 0  # compiled, and not saved there either
        run_fresh()
    assert len([w for w in record if issubclass(w.category, DiskCacheWarning)]) == 1
    assert "group" in str(record[0].message) or mode & 0o002 == 0


def test_a_writable_entry_directory_is_refused(entry):
    entry.chmod(0o777)
    with pytest.warns(DiskCacheWarning, match=f"{entry}: it is writable by group and others"):
        assert run_fresh()["loaded"] == 0


@needs_linker
@pytest.mark.parametrize("name", ["index.json", "kernels-*.so"])
def test_a_writable_file_in_a_good_directory_is_refused_and_replaced(entry, name):
    (path,) = entry.glob(name)
    path.chmod(0o646)
    with pytest.warns(DiskCacheWarning, match=f"{path.name}: it is writable by others"):
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    library = entry / json.loads((entry / "index.json").read_text())["library"]
    for saved in (entry / "index.json", library):  # saved anew, privately
        assert saved.stat().st_mode & 0o777 == 0o600
    assert run_fresh()["loaded"] == 1


def test_a_cache_owned_by_someone_else_is_refused(entry, monkeypatch):
    """Ownership cannot be given away without root privileges (and tests run as root), so
    the current user is what changes."""
    monkeypatch.setattr(diskcache, "_uid", lambda: entry.stat().st_uid + 4242)
    with pytest.warns(DiskCacheWarning, match="it is owned by uid .* not by you"):
        assert run_fresh()["loaded"] == 0


def test_trust_judges_owner_and_mode(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_text("")
    path.chmod(0o600)
    assert diskcache._distrust(path) is None
    path.chmod(0o620)
    assert diskcache._distrust(path) == "writable by group (mode 0620)"
    path.chmod(0o644)
    monkeypatch.setattr(diskcache, "_uid", lambda: path.stat().st_uid + 1)
    assert "owned by uid" in diskcache._distrust(path)


# ---------------------------------------------------------------- size cap and eviction


def _fake_entry(root: Path, n: int, size: int, used: float, name: str = "fake") -> Path:
    """An entry in the cache's layout, ``size`` bytes in all, last used at ``used``."""
    directory = root / f"{n:040x}"
    directory.mkdir(mode=0o700)
    source = f"# tracejit CPU backend: {name}\n".encode()
    (directory / "kernels.py").write_bytes(source)
    (directory / "kernels-0.so").write_bytes(b"\0" * (size - len(source)))
    for f in directory.iterdir():
        f.chmod(0o600)
    os.utime(directory, (used, used))
    return directory


def _names(root: Path) -> set[str]:
    """What the cache directory holds besides the tally of its size and the C code built
    once for all its entries (``diskcache.built_c``)."""
    return {p.name for p in root.iterdir() if not p.name.startswith(("launch-", "runtime-"))
            } - {diskcache._TALLY}


@pytest.mark.parametrize("text, size", [
    ("1000", 1000), ("500M", 500 << 20), ("2G", 2 << 30), ("2g", 2 << 30),
    ("1.5GiB", 3 << 29), ("64KB", 64 << 10), (" 3 T ", 3 << 40),
    ("0", None), ("off", None), ("None", None), ("unlimited", None),
])
def test_cache_max_forms(text, size):
    assert diskcache.parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-1", "5X", "1e9", "G", "2 GB extra", "10ib"])
def test_invalid_cache_max_warns_and_keeps_the_default(monkeypatch, text):
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", text)
    monkeypatch.setattr(diskcache, "_bad_max", set())
    with pytest.warns(DiskCacheWarning, match=r"TRACEJIT_CACHE_MAX=.*\(500M, 2G"):
        assert diskcache.max_bytes() == diskcache.DEFAULT_MAX
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert diskcache.max_bytes() == diskcache.DEFAULT_MAX  # warned once


def test_default_cap_is_one_gib(monkeypatch):
    monkeypatch.delenv("TRACEJIT_CACHE_MAX", raising=False)
    assert diskcache.max_bytes() == 1 << 30


def test_prune_evicts_least_recently_used_first(cache, monkeypatch):
    now = time.time()
    made = [_fake_entry(cache, n, 1000, now - 1000 + n * 100) for n in (3, 1, 4, 2)]
    (cache / "reproducers").mkdir()  # not an entry: never weighed nor removed
    trash = cache / f"{0:040x}.evicted-{0:012x}"  # left by a process killed while evicting
    trash.mkdir(mode=0o700)
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", "2500")
    assert [e.directory.name[-1] for e in diskcache.entries()] == ["1", "2", "3", "4"]
    done = diskcache.prune()
    assert (done.count, done.freed, done.left) == (2, 2000, 2000)
    assert _names(cache) == {made[0].name, made[2].name, "reproducers"}  # 3 and 4: newest


@needs_linker
def test_a_loaded_entry_is_used_and_outlives_an_older_unused_one(entry, monkeypatch):
    now = time.time()
    os.utime(entry, (now - 3600, now - 3600))
    other = _fake_entry(entry.parent, 1, 1000, now - 600)
    assert run_fresh()["loaded"] == 1
    assert entry.stat().st_mtime >= now - 1  # the load recorded a use
    monkeypatch.setattr(diskcache, "_in_use", set())  # weigh it only by its use
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", str(diskcache.entries()[-1].size))
    assert diskcache.prune().count == 1
    assert _names(entry.parent) == {entry.name}
    assert not other.exists()


@needs_linker
def test_the_cap_holds_after_a_write_and_spares_the_new_entry(populated, cache, monkeypatch):
    (chain,) = kernel_entries(populated)
    src, chain_size = chain.directory, chain.size
    now = time.time()
    fakes = [_fake_entry(cache, n, 100_000, now - 100 * (4 - n)) for n in (1, 2, 3)]
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", str(chain_size + 150_000))
    assert run_fresh()["compiled"] == 1  # saved, then pruned
    assert _names(cache) == {src.name, fakes[2].name}
    assert sum(e.size for e in diskcache.entries()) <= chain_size + 150_000
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", "1")
    assert diskcache.prune().kept == 1  # the entry this process uses stays, over the cap
    assert _names(cache) == {src.name}


def test_a_save_counts_the_cache_when_its_tally_may_pass_the_cap_or_is_old(cache,
                                                                         monkeypatch):
    now = time.time()
    tally = cache / diskcache._TALLY
    old = _fake_entry(cache, 1, 1000, now - 60)
    saved = _fake_entry(cache, 2, 1000, now)
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", "1500")
    tally.write_text(f"0 {now}")  # counted just now, empty: adding 1000 stays under
    diskcache._after_save(saved)
    assert old.exists() and tally.read_text().split() == ["1000", str(now)]
    diskcache._after_save(saved)  # 2000 may pass the cap: counted, and old evicted
    assert not old.exists() and tally.read_text().split()[0] == "1000"
    older = _fake_entry(cache, 3, 1000, now - 60)
    tally.write_text(f"0 {now - 7200}")  # under the cap, but counted two hours ago
    diskcache._after_save(saved)
    assert not older.exists()


def _evict_between_lookup_and_load(monkeypatch):
    opened = diskcache.open_entry

    def open_then_evict(*args):
        disk = opened(*args)
        diskcache._evict(disk.directory)
        return disk

    monkeypatch.setattr(diskcache, "open_entry", open_then_evict)


def _evict_while_loading(monkeypatch):
    from tracejit.backends.cpu import native

    load = native.load

    def evict_then_load(library, symbols):  # once: the compile's own load then succeeds
        monkeypatch.setattr(native, "load", load)
        diskcache._evict(library.parent)
        return load(library, symbols)

    monkeypatch.setattr(native, "load", evict_then_load)


@needs_linker
@pytest.mark.parametrize("evict", [_evict_between_lookup_and_load, _evict_while_loading])
def test_an_entry_evicted_by_another_process_is_a_miss(entry, evict):
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        evict(mp)
        warnings.simplefilter("error")
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    assert (entry / "index.json").exists()  # saved again
    assert run_fresh()["loaded"] == 1


@needs_linker
def test_an_entry_evicted_right_after_saving_runs_from_a_private_library(cache, monkeypatch):
    """The process loads the kernel it compiled from the library it saved; were the entry
    evicted in between, it links one of its own instead."""
    save = diskcache.Entry.save

    def save_then_evict(self, symbols, objects):
        library = save(self, symbols, objects)
        diskcache._evict(self.directory)
        return library

    monkeypatch.setattr(diskcache.Entry, "save", save_then_evict)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_fresh() == {"loaded": 0, "compiled": 1, "discarded": 0}
    assert not [p for p in cache.iterdir() if p.is_dir()]


def test_nothing_is_deleted_where_the_cache_is_not_trusted(cache, monkeypatch):
    kept = _fake_entry(cache, 1, 1000, time.time() - 60)
    monkeypatch.setenv("TRACEJIT_CACHE_MAX", "1")
    kept.chmod(0o777)
    assert diskcache.prune().kept == 1 and kept.exists()
    kept.chmod(0o700)
    cache.chmod(0o777)
    assert diskcache.clear().count == 0 and kept.exists()


# ---------------------------------------------------------------- python -m tracejit cache


def _cli(root: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TRACEJIT_CACHE_DIR": str(root),
           "TRACEJIT_CACHE_MAX": "2M"}
    return subprocess.run([sys.executable, "-m", "tracejit", "cache", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=True).stdout


def test_cli_lists_and_clears(tmp_path):
    now = time.time()
    _fake_entry(tmp_path, 1, 2048, now - 7200, "loss_and_grad")
    _fake_entry(tmp_path, 2, 1024, now - 120, "chain")
    for listing in (_cli(tmp_path), _cli(tmp_path, "list")):
        lines = listing.splitlines()
        assert lines[0] == f"tracejit disk cache: {tmp_path}"
        assert lines[1].split() == ["key", "kernel", "kernels", "size", "written", "last",
                                    "used"]
        assert lines[2].split()[:4] == ["000000000000", "loss_and_grad", "0", "2.0"]
        assert lines[2].endswith("2 h ago") and lines[3].endswith("2 min ago")
        assert lines[3].split()[1] == "chain"  # least recently used first
        assert lines[4] == "2 entries, 3.0 KiB (cap 2.0 MiB, TRACEJIT_CACHE_MAX)"
    (tmp_path / "reproducers").mkdir()
    assert _cli(tmp_path, "clear") == (f"clear: removed 2 entries (3.0 KiB) from {tmp_path}; "
                                       "0 B left (cap 2.0 MiB)\n")
    assert _names(tmp_path) == {"reproducers"}
    assert _cli(tmp_path).splitlines()[1:] == ["0 entries, 0 B (cap 2.0 MiB, TRACEJIT_CACHE_MAX)"]


def test_cli_prune_applies_the_cap(tmp_path):
    now = time.time()
    _fake_entry(tmp_path, 1, 1536 << 10, now - 60)
    newer = _fake_entry(tmp_path, 2, 1 << 20, now)
    assert _cli(tmp_path, "prune").startswith("prune: removed 1 entry (1.5 MiB)")
    assert _names(tmp_path) == {newer.name}


_SUBROUTINE_USER = """
import sys
import numpy as np
import tracejit as tj
from tracejit.backends.cpu import compiler, diskcache
compiled = []
compile_subroutine = compiler._compiled_subroutine
compiler._compiled_subroutine = lambda *a: compiled.append(a[0].__name__) or compile_subroutine(*a)
if sys.argv[1] == "spoil":  # an image that does not load
    from numba.core import types
    source = compiler._subroutine_source("tanh_f32", (types.float32,))
    header = b'{"mangled_name": "f", "restype": "float32", "argtypes": ["float32"], '
    header += b'"args": ["x"], "noalias": false, "inline": false}'
    diskcache.save_image(source, compiler._subroutine_tag(), header + b"\\nnot bitcode", ["f"])
x = np.linspace(-3, 3, 1001, dtype=np.float32)
f = (lambda x: np.tanh(x) * 3) if sys.argv[1] == "first" else (lambda x: np.tanh(x) - x)
np.save(sys.argv[2], tj.jit(f)(x))
print("compiled:", compiled)
"""


def test_math_subroutines_are_kept_on_disk_for_later_processes(tmp_path):
    """``tanh_f32`` and the like compile once per process (30-80 ms each); their bitcode
    is kept in the disk cache, so a later process compiling a new kernel that calls them
    loads them instead, and the kernel comes out bit for bit as with a fresh compile. An
    image that does not load is compiled again."""

    def process(cache: str, what: str) -> np.ndarray:
        env = {**os.environ, "TRACEJIT_CACHE_DIR": str(tmp_path / cache),
               "TRACEJIT_MIN_KERNEL_SIZE": "0"}
        out = tmp_path / f"{cache}-{what}.npy"
        done = subprocess.run([sys.executable, "-c", _SUBROUTINE_USER, what, str(out)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1], np.load(out)

    assert process("a", "first")[0] == "compiled: ['tanh']"
    assert "tanh_f32(float32)" in [e.function for e in diskcache.entries(tmp_path / "a")]
    said, loaded = process("a", "second")  # a new kernel, the same subroutine
    assert said == "compiled: []"
    said, fresh = process("b", "second")  # nothing saved: compiled afresh
    assert said == "compiled: ['tanh']" and loaded.tobytes() == fresh.tobytes()
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    np.testing.assert_allclose(fresh, np.tanh(x) - x, rtol=1e-6, atol=1e-6)
    said, again = process("c", "spoil")
    assert said == "compiled: ['tanh']" and again.tobytes() == fresh.tobytes()
