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
from ...ir import Graph
from . import diskcache, native

NAME = "cpu"
_TYPED = ((IndexError, IndexOutOfBounds), (OverflowError, ScalarOverflow),
          (ArithmeticError, InvalidValue), (ValueError, InvalidValue))


def source(graph: Graph) -> str:
    from .codegen import generate

    return generate(graph).source


def partition(graph: Graph) -> tuple[Graph, list]:
    """The graph ``compile`` runs and its steps (see ``codegen.partition``)."""
    from .codegen import partition

    return partition(graph)


def compile(graph: Graph, profile: bool = False, *, reuse=None):
    """The runner ``run(*leaves) -> list`` for ``graph``.

    ``run.steps`` describes its steps; with ``profile`` it calls ``record(step, seconds)``
    from ``run.namespace`` after each (replace it there to collect). ``reuse``, a runner
    of the same graph, lends its kernels so that nothing compiles twice. ``run.disk_cache``
    is the :class:`~tracejit.diskcache.Entry` the kernels live in, or None.
    """
    from .codegen import generate

    code = generate(graph, profile)
    locations = code.namespace["locations"]

    def located(e: Exception, step: int):
        typed = next(t for base, t in _TYPED if isinstance(e, base))
        return typed(str(e), location=locations[step] if step >= 0 else None)

    if reuse is not None:
        kernels, disk = reuse.kernels, None
    else:
        kernels, disk = _kernels(graph, code)
    namespace = dict(code.namespace, located=located, operand=_operand, parallel=native.parallel,
                     clock=time.perf_counter, record=_ignore)
    namespace.update(zip(code.kernel_names, kernels, strict=True))
    filename = f"<tracejit cpu runner: {graph.name} {id(code):x}>"
    linecache.cache[filename] = (len(code.runner), None, code.runner.splitlines(True), filename)
    exec(builtins.compile(code.runner, filename, "exec"), namespace)
    run = namespace["run"]
    run.steps = namespace["steps"]
    run.namespace = namespace
    run.kernels = kernels
    run.disk_cache = disk
    return run


def _kernels(graph: Graph, code) -> tuple[list, diskcache.Entry | None]:
    """The compiled kernels: from the disk cache when it has them, else from Numba (and
    then saved there)."""
    native.configure()
    disk = diskcache.open_entry(graph, code.kernels, NAME) if diskcache.enabled() else None
    if disk is not None and code.kernel_names:
        kernels = disk.load(len(code.kernel_names))
        if kernels is not None:
            return kernels, disk
    if not code.kernel_names:
        return [], disk
    from .compiler import compile_kernels

    filename = str(disk.path) if disk is not None else f"<tracejit cpu: {graph.name}>"
    kernels, symbols, objects = compile_kernels(code.kernels, filename, code.kernel_names)
    if disk is not None:
        disk.save(symbols, objects)
    return kernels, disk


def _operand(x, dtype, shape):
    """A library step's result as the kernels after it read it: C-contiguous, of the IR's
    dtype and shape (a kernel trusts both; a mismatch would read out of bounds)."""
    x = np.ascontiguousarray(x, dtype)
    if x.shape != shape:
        raise IRError(f"a library step returned shape {x.shape} where the IR says {shape}")
    return x


def profiled(graph: Graph, run):
    """A profiling runner for ``graph`` sharing ``run``'s compiled kernels."""
    return compile(graph, profile=True, reuse=run)


def _ignore(step: int, seconds: float) -> None:
    pass
