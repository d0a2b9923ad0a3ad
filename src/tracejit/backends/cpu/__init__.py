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
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np

from ...config import config
from ...errors import (
    IndexOutOfBounds,
    InvalidValue,
    IRError,
    LinAlgError,
    ScalarOverflow,
    TracejitError,
)
from ...ir import Graph, Node
from ..base import DiskCacheInfo, PlannedStep, Runner, ignore, planned
from . import blas, native, prebuilt
from . import kernels as store
from .kernels import stats as stats

if TYPE_CHECKING:  # (the functions below import codegen where they use it)
    from .codegen import Generated

name = "cpu"
device_kind = None  # compiles for the host, chosen with jit(backend="cpu") (the default)
exact = True  # Numba is not allowed to contract or reassociate float arithmetic
passes = ()
_TYPED = ((np.linalg.LinAlgError, LinAlgError), (IndexError, IndexOutOfBounds),
          (OverflowError, ScalarOverflow), (ArithmeticError, InvalidValue),
          (ValueError, InvalidValue))


def source(graph: Graph) -> str:
    from .codegen import generate

    return generate(graph, loop_step=_loop_step).source


def supports(node: Node) -> bool:
    """Every op runs on the CPU: in a kernel, or as a NumPy library step."""
    return True


def partition(graph: Graph) -> tuple[Graph, list]:
    """The graph ``compile`` runs and its steps (see ``codegen.partition``)."""
    from .codegen import partition

    return partition(graph)


def planned_steps(graph: Graph) -> tuple[Graph, list[PlannedStep]]:
    """The steps of the first runner of ``graph`` (what ``source`` shows), named as its
    ``Runner.steps`` (see ``codegen.run_steps``)."""
    from .codegen import partition, run_steps

    graph, kernels = partition(graph)
    return graph, planned(run_steps(graph, kernels)[1])


def compile(graph: Graph, profile: bool = False, interim: bool = False) -> Runner:
    """The runner of ``graph``: its kernels compiled by Numba, loaded from the disk cache,
    or compiled before in this process (``runner.disk_cache`` counts which, ``Kernels``);
    ``runner.faster`` compiles the small exact kernels it runs as NumPy calls. With
    ``interim`` (the caller switches to ``runner.faster``), it may run its kernels as
    prebuilt programs while the workers compile them (``_on_programs``)."""
    if profile:
        return _runner(graph, True, None)
    from .codegen import generate

    code = generate(graph, loop_step=_loop_step)
    early = _on_programs(graph, code) if interim else None
    if early is not None:
        return early
    runner = _runner(graph, False, None, code=code)
    runner.faster = _later(graph, True)
    return runner


def _on_programs(graph: Graph, code: Generated) -> Runner | None:
    """The runner of ``graph`` on prebuilt programs (``programs_runner``: the kernels'
    bits), its ``faster`` the runner of its own kernels, which the workers compile
    meanwhile; None where that is off, some kernel cannot be a program, none is missing,
    or no worker can compile them (``compile`` then waits for its kernels, or loads them).
    """
    if not config.prebuilt or not store.workers_available():
        return None
    runner = programs_runner(graph, code)
    if runner is None:
        return None
    runner.faster = _later(graph, False, code)
    return runner if runner.faster is not None else None


def programs_runner(graph: Graph, code: Generated | None = None) -> Runner | None:
    """The runner of ``graph`` (``code``: its code, if generated) with every loop kernel
    run as a prebuilt program (``prebuilt.py``), or None where one cannot be (or there is
    no current prebuilt library)."""
    from .codegen import generate

    if code is None:
        code = generate(graph, loop_step=_loop_step)
    if code.loops or not code.kernels or None in code.programs or prebuilt.machines() is None:
        return None  # (a kernel with a reduction, say, before the library's first load)
    programs = [make() for make in code.programs]
    if None in programs:
        return None
    return _runner(graph, False, (programs, store.Kernels(prebuilt=len(programs))),
                   code=code, parallel=prebuilt.parallel)


def compile_later(graph: Graph) -> Future[Runner] | None:
    """The runner of ``graph`` as a future, its missing kernels compiling in the worker
    processes; None when none are missing (``compile`` then finds them all at once) or the
    workers cannot take them (see ``kernels.get_later``)."""
    return _later(graph, False)


def _straight(graph: Graph) -> Graph:
    """``graph`` as the later runner runs it: each long run of small steps wrapped into
    one compiled call (``loops_straight.py``)."""
    from .loops_straight import wrap_runs

    return wrap_runs(graph)


def _later(graph: Graph, faster: bool, code: Generated | None = None) -> Future[Runner] | None:
    """A future of the runner of ``graph`` (``faster``: of its later runner, with the
    small exact kernels compiled; see ``codegen.partition``) whose missing kernels the
    workers compile; None where there is nothing to wait for or no worker to do it, and
    for ``faster`` where the later runner is the first. ``code``: the first runner's code,
    where the caller generated it already."""
    from .codegen import generate, improves_later

    if faster and not improves_later(graph) and _straight(graph) is graph:
        return None
    if code is None:
        code = generate(_straight(graph) if faster else graph, later=faster,
                        loop_step=_loop_step)
    sources = _with_loops(code)
    later = store.get_later(sources)
    if later is None and faster and store.workers_available():  # all compiled: bind now
        later = Future()
        later.set_result(store.get(sources))
    if later is None:
        return None
    runner: Future = Future()
    blas.hold_back()  # the caller's BLAS threads would starve the workers (blas.py)

    def bind(done: Future) -> None:
        blas.release()
        try:
            made = _runner(graph, False, done.result(), later=faster, code=code)
        except Exception as e:
            runner.set_exception(e)
            return
        if faster:
            runner.set_result(made)
            return
        # The caller switches to ``made`` first (set_result runs the switch); the faster
        # runner's code generation and disk lookups (~20 ms) come after, not before it.
        made.faster = upgrade = Future()
        runner.set_result(made)
        try:
            _forward(_later(graph, True), upgrade)
        except Exception as e:
            upgrade.set_exception(e)

    later.add_done_callback(bind)
    return runner


def _forward(source: Future[Runner] | None, target: Future[Runner | None]) -> None:
    """Settle ``target`` as ``source`` settles (None at once: there is no faster runner)."""
    if source is None:
        target.set_result(None)
        return

    def settle(done: Future) -> None:
        if done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())

    source.add_done_callback(settle)


def _runner(graph: Graph, profile: bool, compiled: tuple[list, DiskCacheInfo] | None,
            later: bool = False, in_loop: bool = False,
            code: Generated | None = None, parallel=native.parallel) -> Runner:
    """The runner of ``graph`` (its ``later`` runner: see ``codegen.partition``), binding
    ``compiled`` (the kernels and their disk-cache entry) when a runner of the same graph
    made them already, else compiling or loading them; ``in_loop``: of a loop's body graph
    (``loops.py``). With ``profile`` it calls
    ``record(step, start, seconds)`` from its namespace after each step. ``code``: the
    code ``compiled`` was compiled from, where the caller generated it (a background
    compile: generated again when the kernels are ready, a setting changed meanwhile,
    ``min_kernel_size``, would make other kernels than those compiled). ``parallel``: what
    launches a kernel on libgomp's team (``prebuilt.parallel`` for programs)."""
    from .codegen import generate

    if code is None:
        code = generate(_straight(graph) if later else graph, profile, later, in_loop,
                        _loop_step)
    locations = code.namespace["locations"]

    def located(e: Exception, step: int):
        if isinstance(e, TracejitError):  # a loop driver's, at the failing step's line
            return e
        typed = next(t for base, t in _TYPED if isinstance(e, base))
        return typed(str(e), location=locations[step] if step >= 0 else None)

    # (its loops' kernels come too, and are left to the loops: see _with_loops)
    kernels, disk = compiled if compiled is not None else store.get(_with_loops(code))
    kernels = kernels[:len(code.kernels)]
    namespace = dict(code.namespace, located=located, operand=_operand, parallel=parallel,
                     clock=time.perf_counter, record=ignore)
    namespace.update(zip(code.kernel_names, kernels, strict=True))
    filename = f"<tracejit cpu runner: {graph.name} {id(code):x}>"
    linecache.cache[filename] = (len(code.runner), None, code.runner.splitlines(True), filename)
    exec(builtins.compile(code.runner, filename, "exec"), namespace)
    remake = None if profile else lambda: _runner(graph, True, (kernels, disk), later,
                                                  parallel=parallel)
    return Runner(namespace["run"], namespace["steps"], disk, namespace, remake)


def _with_loops(code) -> list[str]:
    """The kernel sources of ``code``, then those of its loops (a fused driver, or the
    kernels of the bodies a Python driver runs, nested loops' included): a loop compiles
    its body on its first run, and these being compiled by then (with the graph's own, in
    the workers where there are several) keeps that first run, after a background
    compile too, from waiting for Numba."""
    from .codegen import generate
    from .fused import source as fused_source
    from .loops import bodies_of

    sources = list(code.kernels)
    for compiled in code.loops:
        driver = fused_source(compiled.loop)
        if driver is not None:
            sources.append(driver)
            continue
        for _, body in bodies_of(compiled.loop):
            sources += _with_loops(generate(body, in_loop=True, loop_step=_loop_step))
    return sources


def _loop_step(loop):
    """The step running a loop node: its bodies compiled as graphs of their own."""
    from .loops import compiled_loop

    return compiled_loop(loop, _body_runner)


def _body_runner(graph: Graph):
    return _runner(graph, False, None, in_loop=True).fn


def _operand(x, dtype, shape):
    """A library step's result as the kernels after it read it: C-contiguous, of the IR's
    dtype and shape (a kernel trusts both; a mismatch would read out of bounds)."""
    x = np.ascontiguousarray(x, dtype)
    if x.shape != shape:
        raise IRError(f"a library step returned shape {x.shape} where the IR says {shape}")
    return x
