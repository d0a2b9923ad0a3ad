"""CPU backend: fused loop kernels compiled with Numba, library calls for the rest.

Numba is imported only when this backend compiles something, so ``import tracejit``
stays light. Kernels compile lazily, on a runner's first call; with the disk cache on
(:mod:`tracejit.diskcache`) that first call loads them from disk when it can.
"""

from __future__ import annotations

import builtins
import time

import numpy as np

from ... import diskcache
from ...errors import IndexOutOfBounds, InvalidValue, ScalarOverflow
from ...ir import Graph

NAME = "cpu"
_TYPED = ((IndexError, IndexOutOfBounds), (OverflowError, ScalarOverflow),
          (ArithmeticError, InvalidValue), (ValueError, InvalidValue))


def source(graph: Graph) -> str:
    from .codegen import generate

    return generate(graph)[0]


def compile(graph: Graph, profile: bool = False, *, reuse=None):
    """The runner ``run(*leaves) -> list`` for ``graph``.

    ``run.steps`` describes its steps; with ``profile`` it calls ``record(step, seconds)``
    from ``run.namespace`` after each (replace it there to collect). ``reuse``, a runner
    of the same graph, lends its kernels so that nothing compiles twice. ``run.disk_cache``
    is the :class:`~tracejit.diskcache.Entry` the kernels live in, or None.
    """
    from .codegen import generate

    text, namespace = generate(graph, profile)
    locations = namespace["locations"]

    def located(e: Exception, step: int):
        typed = next(t for base, t in _TYPED if isinstance(e, base))
        return typed(str(e), location=locations[step] if step >= 0 else None)

    namespace.update(scalar=_scalar, located=located,
                     clock=time.perf_counter, record=_ignore)
    disk = None
    if reuse is None and diskcache.enabled():
        disk = diskcache.open_entry(graph, text, NAME)
    if disk is not None:
        namespace = disk.exec_module(text, namespace)
    else:
        exec(builtins.compile(text, f"<tracejit cpu: {graph.name}>", "exec"), namespace)
    if reuse is not None:  # a step's name is the name of the function it calls
        namespace.update({s.name: reuse.namespace[s.name] for s in namespace["steps"]})
    run = namespace["run"]
    run.steps = namespace["steps"]
    run.namespace = namespace
    run.disk_cache = disk
    return run


def profiled(graph: Graph, run):
    """A profiling runner for ``graph`` sharing ``run``'s compiled kernels."""
    return compile(graph, profile=True, reuse=run)


def _ignore(step: int, seconds: float) -> None:
    pass


def _scalar(x):
    return x[()] if type(x) is np.ndarray else x
