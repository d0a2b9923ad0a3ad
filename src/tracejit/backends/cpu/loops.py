"""Loops on the CPU backend: each body graph compiled like any graph, the steps run by a
driver instead of the registry's NumPy interpreter.

A ``scan`` or ``while_loop`` node is a library step of its graph's runner whose function
is a :class:`CompiledLoop`. On its first call it compiles its body (and condition)
graphs with this backend's own partition, fusion and kernels (``codegen.generate`` with
``in_loop``: every loop kernel compiled, 0-d arithmetic included, since each runs once per
step) and then runs one of two drivers:

- *fused* (``fused.py``): when every step of the body is a loop kernel, a 2-d float
  matmul (BLAS's gemm, called from compiled code) or an indexing step by the loop
  counter (``fused_steps.py``: ``out[t] = a * x[t] + b * out[t - 1]``), the whole loop
  is one compiled C function, its time loop around the body's kernels, the carry in
  two preallocated buffers it alternates between (one, updated in place, for a carry
  written an element at a time), each ``y`` slice written into the stacked output in
  place (no Python per step);
- *python*: otherwise (other library steps, a nested loop, a kernel large enough to run
  on threads), a generated Python loop calling the body's runner once per step, writing
  each ``y`` into the stacked output (a few microseconds per step beyond the body's own
  steps).

Body kernels are kernels like any other: compiled once per process and kept in the disk
cache by their source; the fused driver is one more kernel, cached the same way.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable

import numpy as np

from ...ir import Graph
from ...ir.loop_ops import Scan, While, bodies
from . import blas, fused
from .codegen import generate

# Scan/While -> its CompiledLoop, while a runner holds that (the runners of one graph,
# first, later and profiled, share it and its compiled driver).
_loops: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_lock = threading.Lock()


def compiled_loop(loop: Scan | While, runner: Callable[[Graph], Callable]) -> CompiledLoop:
    """The ``CompiledLoop`` of ``loop`` (a loop node's attribute) in this process;
    ``runner(graph)`` compiles a body graph (the package's, passed in so that this
    module does not import it)."""
    with _lock:
        found = _loops.get(loop)
        if found is None:
            found = _loops[loop] = CompiledLoop(loop, runner)
        return found


class CompiledLoop:
    """A loop node's step: ``self(*consts, *init, *xs)`` returns the loop's results (the
    final carry, then the stacked ys), compiling its body on the first call."""

    def __init__(self, loop: Scan | While, runner: Callable[[Graph], Callable]):
        self.loop = loop
        self.runner = runner
        self._run = None
        self._lock = threading.Lock()
        self.driver = ""  # which driver runs it, once compiled: "fused" or "python"

    def __call__(self, *args):
        run = self._run
        if run is None:
            run = self._compile()
        return run(*args)

    def _compile(self):
        with self._lock:
            if self._run is None:
                self._run, self.driver = self._build()
            return self._run

    def _build(self):
        run, driver = fused.build(self.loop), "fused"
        if run is None:
            run, driver = _python_driver(self.loop, self.runner), "python"
        one_thread = _small_matmuls(self.loop) and not (driver == "fused" and _tiny(self.loop))
        return (_one_blas_thread(run) if one_thread else run), driver

    @property
    def source(self) -> str:
        """The driver and the body's generated code, as ``lower().source`` shows them."""
        loop = self.loop
        graphs = bodies_of(loop)
        parts = [f"# ---- loop {loop!r}: its driver"]
        text = fused.source(loop)
        parts.append(text if text is not None else _python_source(loop))
        for name, graph in graphs:
            parts += [f"# ---- its {name} graph, compiled as a graph of its own",
                      generate(graph, in_loop=True).source]
        return "\n".join(parts)


def bodies_of(loop: Scan | While) -> list[tuple[str, object]]:
    """The loop's graphs with their names, as ``loop_ops.bodies`` gives a node's."""
    return [("body", loop.body)] if isinstance(loop, Scan) else \
        [("cond", loop.cond), ("body", loop.body)]


def _python_source(loop: Scan | While) -> str:
    """A Python loop calling the body's runner once per step (``body``, ``cond``)."""
    if isinstance(loop, While):
        consts = [f"k{i}" for i in range(loop.n_consts)]
        carry = [f"c{i}" for i in range(len(loop.body.outputs))]
        args = ", ".join(consts + carry)
        new = f"{', '.join(carry)}, = " if carry else ""
        return "\n".join([
            "# driver: a Python loop over the body's runner",
            f"def loop({args}):",
            f"    while cond({args})[0]:",
            f"        {new}body({args})",
            f"    return ({''.join(c + ', ' for c in carry)})", ""])
    consts = [f"k{i}" for i in range(loop.n_consts)]
    carry = [f"c{i}" for i in range(loop.n_carry)]
    xs = [f"x{i}" for i in range(loop.n_xs)]
    ys = [f"y{i}" for i in range(len(loop.y_types))]
    steps = f"range({loop.length} - 1, -1, -1)" if loop.reverse else f"range({loop.length})"
    lines = ["# driver: a Python loop over the body's runner",
             f"def loop({', '.join(consts + carry + xs)}):"]
    lines += [f"    {y} = np.empty({(loop.length, *t.shape)}, np.dtype({t.dtype.str!r}))"
              for y, t in zip(ys, loop.y_types, strict=True)]
    outs = carry + [f"o{i}" for i in range(len(ys))]
    lines.append(f"    for t in {steps}:")
    if outs:
        call = f"body({', '.join(consts + carry + [f'{x}[t]' for x in xs])})"
        lines.append(f"        {', '.join(outs)}, = {call}")
    else:
        lines.append("        pass  # nothing carried, nothing stacked")
    for i, y in enumerate(ys):
        lines.append(f"        {y}[t] = o{i}")
    lines.append(f"    return ({', '.join(carry + ys)}{',' if carry + ys else ''})")
    return "\n".join(lines) + "\n"


def _python_driver(loop: Scan | While, runner: Callable[[Graph], Callable]):
    namespace = {"np": np, "body": runner(loop.body)}
    if isinstance(loop, While):
        namespace["cond"] = runner(loop.cond)
    exec(compile(_python_source(loop), f"<tracejit cpu loop {id(loop):x}>", "exec"), namespace)
    return namespace["loop"]


# A matmul of at most this many multiply-adds takes tens of microseconds on one core;
# OpenBLAS still splits one of more than 2**18 among its threads, whose hand-off costs
# as much as the work, and on a busy machine (threads waiting for a core) far more:
# measured on 2 shared cores, the RNN gradient's 32x128 @ 128x128 products took 3-30 ms
# each instead of 20 us, the whole gradient 218 ms instead of 62 ms.
SMALL_MATMUL = 1 << 21
# The fused driver calls OpenBLAS's gemm, which runs one of at most 2**18 multiply-adds
# on the calling thread anyway (65536 * GEMM_MULTITHREAD_THRESHOLD, 4); a loop whose
# products are all far below that (below even gemv's 2304 * 4) keeps OpenBLAS's thread
# setting as it is: getting and setting it twice costs 0.7 us a call, on a straight-line
# run of a few microseconds (a 2x2 rotation of 200 points). (The Python driver's NumPy
# calls may use syrk, which some OpenBLAS builds share among threads at any size.)
TINY_MATMUL = 2304 * 4


def _small_matmuls(loop: Scan | While) -> bool:
    """Whether the loop's bodies (nested ones included) multiply matrices, all small."""
    found = _matmul_sizes(loop)
    return bool(found) and max(found) <= SMALL_MATMUL


def _tiny(loop: Scan | While) -> bool:
    """Whether every product in the loop's bodies is under ``TINY_MATMUL``."""
    return max(_matmul_sizes(loop), default=0) < TINY_MATMUL


def _matmul_sizes(loop: Scan | While) -> list[int]:
    """The multiply-adds of each matmul of the loop's bodies (nested ones included)."""
    found = []

    def walk(graph) -> None:
        for node in graph.nodes:
            if node.op == "matmul":
                a, b = (v.type.shape for v in node.inputs)
                found.append(math.prod(a[:-1]) * a[-1] * (b[-1] if len(b) > 1 else 1))
            for _, body in bodies(node):
                walk(body)

    for _, graph in bodies_of(loop):
        walk(graph)
    return found


def _one_blas_thread(run):
    """``run`` with OpenBLAS on one thread while it runs (see ``SMALL_MATMUL``)."""
    threads = blas.openblas_threads()
    if threads is None:
        return run
    set_threads, get_threads = threads

    def one_thread(*args):
        saved = get_threads()
        set_threads(1)
        try:
            return run(*args)
        finally:
            set_threads(saved)

    return one_thread
