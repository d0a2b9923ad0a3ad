"""CUDA backend: fused loop kernels as CUDA C for CuPy, cuBLAS and CuPy for the rest.

It compiles *placed* graphs (see ``passes/placement.py``): the nodes placed on the GPU
become loop kernels (``codegen.py``) and library steps (``library.py``), run by a plain
Python runner (``runner.py``); nodes placed on the CPU run the op's NumPy implementation,
with the transfers the placement pass inserted around them. Skinny matmuls are split into
products and sums first (``passes/contract.py``, as the CPU backend does), so that a
layer's ``a1 @ W2`` and its weight gradients join the loop kernels over ``a1`` instead of
reading it again through cuBLAS. A graph's kernels form one CUDA module, compiled by
NVRTC once per source and device in this process and kept in tracejit's disk cache
(``nvrtc.py``), so a new process skips NVRTC.

A loop node (``scan``, ``while_loop``) placed on the GPU runs as a Python driver calling
its body's runner per step (``loops.py``): each body is compiled here as a graph of its
own, with its own module and runner, and the carry never leaves the GPU.

``TRACEJIT_CUDA_SYNC=1`` (read when a function compiles) makes the runner synchronise
after every kernel, so an error names the kernel that caused it, as
``CUDA_LAUNCH_BLOCKING=1`` does for CUDA itself.
"""

from __future__ import annotations

import builtins
import linecache
import math
import os
import threading
import time

import numpy as np

from ... import targets
from ...errors import (
    IndexOutOfBounds,
    InvalidValue,
    IRError,
    KernelError,
    LinAlgError,
    ScalarOverflow,
)
from ...ir import Graph, Node
from ...ir.loop_ops import bodies
from ...passes.contract import split_skinny_matmuls
from ...passes.placement import Placement
from ..base import PlannedStep, Runner, ignore, planned
from . import codegen, library, loops, nvrtc, runner
from .codegen import CudaModule, fusible, generate
from .ops import PRELUDE

__all__ = ["CudaModule", "compile", "fusible", "generate", "partition", "source", "supports"]

name = "cuda"
device_kind = "cuda"  # runs graphs placed on a GPU, chosen by the device
exact = True  # compiled without contraction or flushing (nvrtc.OPTIONS): NumPy's rounding
passes = ()
_TYPED = ((np.linalg.LinAlgError, LinAlgError), (IndexError, IndexOutOfBounds),
          (OverflowError, ScalarOverflow), (ArithmeticError, InvalidValue),
          (ValueError, InvalidValue))


def compile_later(graph: Graph) -> None:
    """Compiles only synchronously: CuPy builds the kernels with NVRTC in the caller's
    process, on the caller's CUDA context."""
    return None


def supports(node: Node) -> bool:
    """Whether the GPU computes ``node`` (the placement pass runs the rest on the CPU;
    it asks about each node of a loop's bodies too)."""
    return node.op in loops.LOOPS or fusible(node) or library.supported(node)


def _module(graph: Graph, prefix: str = "") -> CudaModule:
    return generate(graph, prefix, on_device=_on_target(graph))


def _loop_bodies(graph: Graph, module: CudaModule, prefix: str):
    """(step, loop node, {body name: (placed body graph, kernel prefix)}) for each loop
    that ``graph`` runs on the GPU (none before placement); a body's kernels are named
    after its loop's step."""
    place = graph.placement
    if place is None:
        return
    for k, step in enumerate(module.steps):
        node = step.kernel.nodes[0]
        if node.op in loops.LOOPS and place.on_target(node.out):
            yield k, node, {name: (loops.body_graph(body, place.target, supports),
                                   f"{prefix}loop{k}_{name}_") for name, body in bodies(node)}


def prepared(graph: Graph) -> Graph:
    """``graph`` as the backend runs it: its skinny matmuls split into products and sums
    (``split_skinny_matmuls``), each new value placed where its first placed operand is
    (the GPU for a matmul the GPU ran). Idempotent."""
    split = split_skinny_matmuls(graph)
    place = graph.placement
    if split is graph or place is None:
        return split
    devices = dict(place.devices)
    for node in split.nodes:
        if node.out not in devices:
            devices[node.out] = next((devices[v] for v in node.inputs if v in devices),
                                     place.target)
    return Graph(split.inputs, split.nodes, split.outputs, split.name,
                 Placement(place.target, devices))


def source(graph: Graph, prefix: str = "") -> str:
    """The CUDA C of the graph's kernels, then the Python runner that launches them, then
    the same for each body of a loop it runs on the GPU (nested loops nest further)."""
    graph = prepared(graph)
    module = _module(graph, prefix)
    parts = [module.source, runner.generate(graph, module, debug=debug_sync()).source]
    for k, node, placed in _loop_bodies(graph, module, prefix):
        for name, (body, inner) in placed.items():
            parts.append(f"# ---- {name} of the {node.op} of step {k} ({node.attrs['loop']}), "
                         f"run once per step by its driver ----")
            parts.append(source(body, inner).replace(PRELUDE.strip(), "// (the prelude above)"))
    return "\n\n".join(parts)


def partition(graph: Graph) -> tuple[Graph, list]:
    """The steps ``compile`` runs a placed ``graph`` as, in order, as ``generate``
    partitions it (transfers and the nodes placed on the CPU are library steps);
    ``check=True`` runs them one at a time."""
    graph = prepared(graph)
    return graph, codegen.partition(graph, _on_target(graph))


def planned_steps(graph: Graph) -> tuple[Graph, list[PlannedStep]]:
    """The steps of ``partition``, named as the runner's (``kernel<k>``, ``lib<k>``)."""
    graph, kernels = partition(graph)
    return graph, planned(kernels)


def _on_target(graph: Graph):
    place = graph.placement
    return lambda n: place is None or place.on_target(n.out)


def debug_sync() -> bool:
    return os.environ.get("TRACEJIT_CUDA_SYNC", "") not in ("", "0")


_modules: dict[tuple[str, int], object] = {}  # (source, device) -> compiled module
_lock = threading.Lock()


def _raw_module(cupy, src: str, index: int, kernels: list[str]):
    """The compiled module of ``src`` (defining ``kernels``) on GPU ``index``: NVRTC once
    per process (and the disk cache across processes), with NumPy's rounding
    (``nvrtc.py``)."""
    with _lock:
        mod = _modules.get((src, index))
        if mod is None:
            with cupy.cuda.Device(index):
                mod = nvrtc.load(cupy, src, kernels)
            _modules[src, index] = mod
        return mod


def compile(graph: Graph, profile: bool = False, interim: bool = False) -> Runner:
    """The runner of a placed graph (see ``backends/base.py``; no interim runner: NVRTC
    compiles a kernel in milliseconds)."""
    return _runner(graph, profile, None)


def _runner(graph: Graph, profile: bool, kernels: dict | None, prefix: str = "") -> Runner:
    """The runner of a placed graph, binding ``kernels`` when a runner of the same graph
    compiled them already. With ``profile`` it synchronises after each step and calls
    ``record(step, start, seconds)`` from its namespace. Loop bodies get runners of their own
    (``prefix`` names their kernels), compiled here, before the first call."""
    graph = prepared(graph)
    place = graph.placement
    if place is None or place.target.kind != "cuda":
        raise IRError("the CUDA backend compiles graphs placed on a GPU")
    cupy = targets._cupy()
    index = place.target.index
    module = _module(graph, prefix)
    drivers = {k: loops.driver(cupy, node, {name: _runner(body, False, None, inner).fn
                                            for name, (body, inner) in placed.items()})
               for k, node, placed in _loop_bodies(graph, module, prefix)}
    code = runner.generate(graph, module, cupy, profile, debug_sync(),
                           lambda k, node: drivers[k])
    locations = code.namespace["locations"]
    steps = code.namespace["steps"]
    dev = cupy.cuda.Device(index)

    def located(e: Exception, step: int):
        typed = next(t for base, t in _TYPED if isinstance(e, base))
        return typed(str(e), location=locations[step] if step >= 0 else None)

    def operand(x, dtype, shape):
        """A kernel's array operand: C-contiguous, of the dtype and shape it was built for."""
        x = cupy.ascontiguousarray(x, dtype)
        if x.shape != shape:  # ascontiguousarray makes a 0-d array 1-d
            if x.size != math.prod(shape):
                raise IRError(f"a step returned shape {x.shape} where the IR says {shape}")
            x = x.reshape(shape)
        return x

    def check(step: int) -> None:
        try:
            dev.synchronize()
        except Exception as e:  # CuPy's CUDARuntimeError / CUDADriverError
            raise KernelError(f"{steps[step].name} ({steps[step].ops}) failed on "
                              f"{place.target}: {e}", location=locations[step]) from None

    if kernels is None:
        raw = _raw_module(cupy, module.source, index, code.kernel_names) \
            if code.kernel_names else None
        with dev:
            kernels = {k: raw.get_function(k) for k in code.kernel_names}

    def to_device(x):
        """A transfer to this GPU (a host scalar becomes a 0-d array there)."""
        return cupy.asarray(x if targets.device_of(x) is not None else np.asarray(x))

    namespace = dict(code.namespace, located=located, operand=operand, check=check,
                     device=dev, empty=cupy.empty, to_host=targets.to_host,
                     to_device=to_device, sync=dev.synchronize, clock=time.perf_counter,
                     record=ignore, **kernels)
    with dev:  # constants used on the GPU are copied there once, here, in the C order
        for const in code.device_constants:  # the kernels read (a folded one may not be)
            namespace[const] = cupy.asarray(np.asarray(namespace[const], order="C"))
    filename = f"<tracejit cuda runner: {graph.name} {id(code):x}>"
    linecache.cache[filename] = (len(code.source), None, code.source.splitlines(True), filename)
    exec(builtins.compile(code.source, filename, "exec"), namespace)
    remake = None if profile else lambda: _runner(graph, True, kernels, prefix)
    return Runner(namespace["run"], steps, namespace=namespace, make_profiled=remake)

