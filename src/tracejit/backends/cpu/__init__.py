"""CPU backend: fused loop kernels compiled with Numba, library calls for the rest.

Kernels are C functions that Numba compiles once; the disk cache keeps them as a shared
library, so a process that finds them there runs without importing Numba at all
(``native.py``). ``import tracejit`` imports neither. A kernel is compiled once per process
and once on disk for its source text, which names no graph and no batch size
(``emitter.py``): kernels equal up to their names, in one function or across functions and
signatures, share one compiled kernel.
"""

from __future__ import annotations

import builtins
import linecache
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ...errors import IndexOutOfBounds, InvalidValue, IRError, ScalarOverflow
from ...ir import Graph, Node
from ..base import DiskCacheInfo, Runner, ignore
from . import diskcache, native

name = "cpu"
device_kind = None  # compiles for the host, chosen with jit(backend="cpu") (the default)
exact = True  # Numba is not allowed to contract or reassociate float arithmetic
passes = ()
_TYPED = ((IndexError, IndexOutOfBounds), (OverflowError, ScalarOverflow),
          (ArithmeticError, InvalidValue), (ValueError, InvalidValue))


def source(graph: Graph) -> str:
    from .codegen import generate

    return generate(graph).source


def supports(node: Node) -> bool:
    """Every op runs on the CPU: in a kernel, or as a NumPy library step."""
    return True


def partition(graph: Graph) -> tuple[Graph, list]:
    """The graph ``compile`` runs and its steps (see ``codegen.partition``)."""
    from .codegen import partition

    return partition(graph)


def compile(graph: Graph, profile: bool = False) -> Runner:
    """The runner of ``graph``: its kernels compiled by Numba, loaded from the disk cache,
    or compiled before in this process (``runner.disk_cache`` counts which, ``Kernels``)."""
    return _runner(graph, profile, None)


def _runner(graph: Graph, profile: bool, compiled: tuple[list, DiskCacheInfo] | None) -> Runner:
    """The runner of ``graph``, binding ``compiled`` (the kernels and their disk-cache
    entry) when a runner of the same graph made them already, else compiling or loading
    them. With ``profile`` it calls ``record(step, seconds)`` from its namespace after
    each step."""
    from .codegen import generate

    code = generate(graph, profile)
    locations = code.namespace["locations"]

    def located(e: Exception, step: int):
        typed = next(t for base, t in _TYPED if isinstance(e, base))
        return typed(str(e), location=locations[step] if step >= 0 else None)

    kernels, disk = compiled if compiled is not None else _kernels(code.kernels)
    namespace = dict(code.namespace, located=located, operand=_operand, parallel=native.parallel,
                     clock=time.perf_counter, record=ignore)
    namespace.update(zip(code.kernel_names, kernels, strict=True))
    filename = f"<tracejit cpu runner: {graph.name} {id(code):x}>"
    linecache.cache[filename] = (len(code.runner), None, code.runner.splitlines(True), filename)
    exec(builtins.compile(code.runner, filename, "exec"), namespace)
    remake = None if profile else lambda: _runner(graph, True, (kernels, disk))
    return Runner(namespace["run"], namespace["steps"], disk, namespace, remake)


@dataclass
class Kernels:
    """Where a runner's kernels came from (its ``disk_cache``, for the compile log): how
    many Numba compiled, the disk cache loaded, or an earlier compile in this process had
    made; ``directory`` is the first kernel's disk-cache entry (None: no entry opened)."""

    compiled: int = 0
    loaded: int = 0
    reused: int = 0
    directory: Path | None = None

    def describe(self) -> str:
        n = lambda count: f"{count} kernel{'s' if count != 1 else ''}"
        reused = f", {self.reused} reused" if self.reused else ""
        if self.directory is not None and self.compiled:
            return f"disk cache miss ({n(self.compiled)} compiled, {self.loaded} loaded{reused})"
        if self.directory is not None and self.loaded:
            return f"disk cache hit ({n(self.loaded)} loaded{reused})"
        if self.compiled:
            return f"disk cache off ({n(self.compiled)} compiled{reused})"
        if self.reused:
            return f"{n(self.reused)} compiled before in this process"
        return "no kernels"


_compiled: dict[str, object] = {}  # kernel module source -> its callable kernel
_lock = threading.Lock()  # guards _compiled and _totals; held while compiling
_totals = Kernels()


def stats() -> Kernels:
    """How many kernels this process compiled, loaded from disk and reused, in all."""
    return replace(_totals)


def _kernels(sources: list[str]) -> tuple[list, Kernels]:
    """The compiled kernels of the modules ``sources``: each distinct source compiled once
    per process (kept in ``_compiled``) and once on disk (its own cache entry)."""
    native.configure()
    info = Kernels()
    with _lock:
        misses: dict[str, diskcache.Entry | None] = {}
        for source in sources:
            if source in _compiled or source in misses:
                info.reused += 1
                continue
            entry = diskcache.open_entry(source, name) if diskcache.enabled() else None
            if entry is not None and info.directory is None:
                info.directory = entry.directory
            loaded = entry.load(1) if entry is not None else None
            if loaded is None:
                misses[source] = entry
            else:
                _compiled[source] = loaded[0]
                info.loaded += 1
        _compiled.update(zip(misses, _compile_sources(list(misses), list(misses.values())),
                             strict=True))
        info.compiled = len(misses)
        for field in ("compiled", "loaded", "reused"):
            setattr(_totals, field, getattr(_totals, field) + getattr(info, field))
        return [_compiled[s] for s in sources], info


def _compile_sources(sources: list[str], entries: list[diskcache.Entry | None]) -> list:
    """The kernels of the modules ``sources`` compiled by Numba, each saved to its disk
    cache entry in ``entries`` where there is one. The one place kernels are compiled."""
    from .compiler import compile_kernels

    kernels = []
    for source, entry in zip(sources, entries, strict=True):
        filename = str(entry.path) if entry is not None else "<tracejit cpu kernel>"
        (kernel,), symbols, objects = compile_kernels(source, filename, ["kernel"])
        if entry is not None:
            entry.save(symbols, objects)
        kernels.append(kernel)
    return kernels


def _operand(x, dtype, shape):
    """A library step's result as the kernels after it read it: C-contiguous, of the IR's
    dtype and shape (a kernel trusts both; a mismatch would read out of bounds)."""
    x = np.ascontiguousarray(x, dtype)
    if x.shape != shape:
        raise IRError(f"a library step returned shape {x.shape} where the IR says {shape}")
    return x
