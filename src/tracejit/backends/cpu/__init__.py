"""CPU backend: fused loop kernels compiled with Numba, library calls for the rest.

Kernels are C functions that Numba compiles once; the disk cache keeps them as a shared
library, so a process that finds them there runs without importing Numba at all
(``native.py``). ``import tracejit`` imports neither.
"""

from __future__ import annotations

import builtins
import linecache
import time

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
    """The runner of ``graph``: its kernels compiled by Numba, or loaded from the disk
    cache (``runner.disk_cache`` is that cache's entry, or ``diskcache.OFF``)."""
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

    kernels, disk = compiled if compiled is not None else _kernels(graph, code)
    namespace = dict(code.namespace, located=located, operand=_operand, parallel=native.parallel,
                     clock=time.perf_counter, record=ignore)
    namespace.update(zip(code.kernel_names, kernels, strict=True))
    filename = f"<tracejit cpu runner: {graph.name} {id(code):x}>"
    linecache.cache[filename] = (len(code.runner), None, code.runner.splitlines(True), filename)
    exec(builtins.compile(code.runner, filename, "exec"), namespace)
    remake = None if profile else lambda: _runner(graph, True, (kernels, disk))
    return Runner(namespace["run"], namespace["steps"], disk, namespace, remake)


def _kernels(graph: Graph, code) -> tuple[list, DiskCacheInfo]:
    """The compiled kernels, from the disk cache when it has them, else from Numba (and
    then saved there), and the cache entry (``diskcache.OFF`` when the cache is off or
    cannot be used)."""
    native.configure()
    disk = diskcache.open_entry(graph, code.kernels, name) if diskcache.enabled() else None
    if disk is not None and code.kernel_names:
        kernels = disk.load(len(code.kernel_names))
        if kernels is not None:
            return kernels, disk
    kernels = _compile_kernels(graph, code, disk) if code.kernel_names else []
    return kernels, disk if disk is not None else diskcache.OFF


def _compile_kernels(graph: Graph, code, disk: diskcache.Entry | None) -> list:
    """The kernels compiled by Numba, saved to ``disk`` when there is one."""
    from .compiler import compile_kernels

    filename = str(disk.path) if disk is not None else f"<tracejit cpu: {graph.name}>"
    kernels, symbols, objects = compile_kernels(code.kernels, filename, code.kernel_names)
    if disk is not None:
        disk.save(symbols, objects)
    return kernels


def _operand(x, dtype, shape):
    """A library step's result as the kernels after it read it: C-contiguous, of the IR's
    dtype and shape (a kernel trusts both; a mismatch would read out of bounds)."""
    x = np.ascontiguousarray(x, dtype)
    if x.shape != shape:
        raise IRError(f"a library step returned shape {x.shape} where the IR says {shape}")
    return x
