"""The reference backend: interprets the IR with NumPy, node by node.

It is the oracle of the test suite and a debugging mode for users. Every node's result is
checked against the shape and dtype the IR promised, so a wrong rule cannot go unnoticed.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

from ..errors import IndexOutOfBounds, InvalidValue, IRError, LinAlgError, ScalarOverflow
from ..ir import Graph, Node
from ..ir.registry import REGISTRY
from ..passes.fusion import fuse
from ..profiler import StepInfo
from .base import PlannedStep, Runner, ignore

name = "reference"
device_kind = None  # runs on the host, chosen with jit(backend="reference")
exact = True  # it is NumPy
passes = ()

# NumPy's run-time errors and the typed error each becomes (located at the node's line).
_TYPED = ((np.linalg.LinAlgError, LinAlgError), (IndexError, IndexOutOfBounds),
          (OverflowError, ScalarOverflow), (ValueError, InvalidValue))


def source(graph: Graph) -> str:
    return f"# reference backend: NumPy interprets this graph node by node\n{graph}"


def compile_later(graph: Graph) -> None:
    """Compiles only synchronously: it is the interpreter the other tiers start on."""
    return None


def supports(node: Node) -> bool:
    """NumPy computes every op."""
    return True


def partition(graph: Graph) -> tuple[Graph, list]:
    """The interpreter's steps are the graph's nodes, one per step."""
    return graph, fuse(graph, lambda n: False)


def planned_steps(graph: Graph) -> tuple[Graph, list[PlannedStep]]:
    """Every node is a step of its own, named ``node<k>`` as ``compile``'s steps are."""
    return graph, [PlannedStep(f"node{k}", "node", (n,)) for k, n in enumerate(graph.nodes)]


def compile(graph: Graph, profile: bool = False, interim: bool = False) -> Runner:
    """The runner of ``graph``; its steps are the nodes. With ``profile`` each node is
    timed and reported to ``record(step, start, seconds)`` looked up in ``runner.namespace``.
    (Nothing compiles: ``interim`` changes nothing.)"""
    namespace = {"record": ignore}
    slots = {v: i for i, v in enumerate(graph.inputs)}
    program = []
    for k, node in enumerate(graph.nodes):
        slots[node.out] = len(slots)
        impl = REGISTRY[node.op].impl
        if profile:
            impl = _timed(impl, k, namespace)
        program.append((impl, [slots[v] for v in node.inputs], node))
    outputs = [slots[v] for v in graph.outputs]
    released = _released(program, len(graph.inputs), outputs)

    def run(*leaves):
        env = list(leaves) + [None] * len(program)
        base = len(leaves)
        for k, (impl, args, node) in enumerate(program):
            try:
                value = impl(*[env[i] for i in args], **node.attrs)
            except (IndexError, OverflowError, ValueError) as e:
                typed = next(t for base, t in _TYPED if isinstance(e, base))
                raise typed(str(e), location=node.loc) from None
            env[base + k] = _check(value, node)
            for i in released[k]:
                env[i] = None
        return [env[i] for i in outputs]

    steps = [StepInfo(f"node{k}", node.op, node.loc,
                      sum(_nbytes(v) for v in (*node.inputs, node.out)))
             for k, node in enumerate(graph.nodes)]
    # nothing is compiled, so the profiling variant has nothing to share
    remake = None if profile else lambda: compile(graph, profile=True)
    return Runner(run, steps, namespace=namespace, make_profiled=remake)


def _released(program: list, inputs: int, outputs: list[int]) -> list[list[int]]:
    """Per step, the values no later step reads (nor the graph returns), let go of once it
    has run: the interpreter holds what is live, not every intermediate of the call, so
    NumPy's next large array reuses the memory of one just freed instead of faulting in
    fresh pages (each a huge-page compaction, at times, on a first call)."""
    last = {inputs + k: k for k in range(len(program))}  # (a value no step reads: at once)
    for k, (_, args, _) in enumerate(program):
        for i in args:
            last[i] = k
    released: list[list[int]] = [[] for _ in program]
    kept = set(outputs)
    for i, k in last.items():
        if i not in kept:
            released[k].append(i)
    return released


def _timed(impl, step: int, namespace: dict):
    def timed(*args, **attrs):
        start = perf_counter()
        value = impl(*args, **attrs)
        namespace["record"](step, start, perf_counter() - start)
        return value

    return timed


def _nbytes(v) -> int:
    return v.type.size * v.type.dtype.itemsize


def _swapped(dtype: np.dtype, native: np.dtype) -> bool:
    """Whether ``dtype`` is ``native`` byte-swapped: the IR's types are native, where NumPy
    keeps a byte-swapped argument's order in its views and some results (``x.T``,
    ``np.sort(x)``, ``x @ x``)."""
    return not dtype.isnative and dtype.newbyteorder("=") == native


def _check(value, node):
    t = node.out.type
    if t.dtype.kind == "O":  # a loop's results (checked one by one by loop_output)
        return value
    if t.weak:
        return np.asarray(value).item()  # keep Python-scalar semantics for later ops
    arr = np.asarray(value)
    if arr.shape != t.shape or arr.dtype != t.dtype and not _swapped(arr.dtype, t.dtype):
        raise IRError(
            f"{node.op} produced {arr.dtype}{list(arr.shape)} where the IR says {t}",
            location=node.loc,
        )
    return value
