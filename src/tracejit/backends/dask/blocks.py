"""The function a blockwise task runs: one fused stage of the graph, on one chunk.

A stage is a template sub-graph typed with the whole arrays' shapes. A chunk has its own
shapes, so the first call with a new combination of chunk shapes (a *block signature*)
types the template again op by op (each op's registry rule) and compiles it with the
chunk's backend: the CPU backend for NumPy chunks, CUDA for CuPy chunks. The compiled
runner is kept per process under the stage's fingerprint (a hash of its text), so a
worker compiles (or loads from the disk cache the client filled) once per stage and block
signature, not once per task, and the function itself pickles small: its template only.
"""

from __future__ import annotations

import hashlib
import sys
import threading

import numpy as np

from ...ir import Graph, Node, Value
from ...ir.registry import REGISTRY
from ...ir.types import TensorType

# (stage fingerprint, block signature) -> the stage's runner for chunks of that signature
_RUNNERS: dict[tuple[str, tuple], object] = {}
_LOCK = threading.Lock()


class Stage:
    """``nodes`` (in order) read ``inputs`` (the chunks passed in) and yield ``outputs``;
    ``keepdims``: reductions computed with ``keepdims=True`` in the chunk whatever the
    template says (a partial result, or one that keeps the stage's rank)."""

    def __init__(self, inputs: list[Value], nodes: list[Node], outputs: list[Value],
                 keepdims: set[Node], name: str, backend: str = "cpu"):
        self.inputs, self.nodes, self.outputs = inputs, nodes, outputs
        self.keepdims = keepdims
        self.name = name
        self.backend = backend  # what compiles it for NumPy chunks (CuPy's: cuda)
        self.fingerprint = hashlib.sha256(str(self.template).encode()).hexdigest()[:20]

    @property
    def template(self) -> Graph:
        """The stage as a graph of whole-array types (what ``plan`` prints)."""
        return Graph(self.inputs, self.nodes, self.outputs, self.name)

    def graph_for(self, types: list[TensorType]) -> Graph:
        """The stage typed for chunks of ``types``."""
        new = {v: Value(t, v.name) for v, t in zip(self.inputs, types, strict=True)}
        nodes = []
        for node in self.nodes:
            attrs = dict(node.attrs)
            if node in self.keepdims:
                attrs["keepdims"] = True
            ins = tuple(new[v] for v in node.inputs)
            if node.op == "constant":
                out = node.out.type
            else:
                out = REGISTRY[node.op].rule(*(v.type for v in ins), **attrs)
            new[node.out] = Value(out, node.out.name)
            nodes.append(Node(node.op, ins, attrs, new[node.out], node.loc))
        return Graph(list(new[v] for v in self.inputs), nodes, [new[v] for v in self.outputs],
                     self.name)

    def runner(self, types: list[TensorType], backend: str, device: int = 0):
        key = (self.fingerprint, backend, device,
               tuple((t.shape, t.dtype.str, t.weak) for t in types))
        found = _RUNNERS.get(key)
        if found is None:
            graph = self.graph_for(types)
            if backend == "cuda":  # placed as jit places a call on CuPy arrays
                from ... import targets
                from ...passes.placement import place
                from .. import cuda as compiler

                gpu = targets.Device("cuda", device)
                graph = place(graph, gpu, [gpu if t.ndim else None for t in types],
                              compiler.supports, targets.CPU)
            elif backend == "reference":
                from .. import reference as compiler
            else:
                from .. import cpu as compiler
            found = compiler.compile(graph)
            with _LOCK:
                found = _RUNNERS.setdefault(key, found)
        return found

    def __call__(self, *chunks) -> tuple:
        gpu = next((c for c in chunks if type(c).__module__.startswith("cupy")), None)
        types = [_type_of(c, v.type) for c, v in zip(chunks, self.inputs, strict=True)]
        if gpu is None:
            return tuple(self.runner(types, self.backend)(*chunks))
        cupy = sys.modules[type(gpu).__module__]
        chunks = [_for_the_gpu(c, cupy) for c in chunks]
        return tuple(self.runner(types, "cuda", gpu.device.id)(*chunks))

    def __reduce__(self):  # the template travels; the compiled runners stay per process
        return (Stage, (self.inputs, self.nodes, self.outputs, self.keepdims, self.name,
                        self.backend))


def _for_the_gpu(chunk, cupy):
    """A chunk as the CUDA runner takes it: a NumPy array (a constant) goes over; a 0-d
    one on the device (a partial reduction's result) comes to the host, as the runner
    passes 0-d inputs to kernels by value."""
    if isinstance(chunk, np.ndarray):
        return cupy.asarray(chunk) if chunk.ndim else chunk
    if type(chunk).__module__.startswith("cupy") and chunk.ndim == 0:
        return chunk.get()
    return chunk


def _type_of(chunk, template: TensorType) -> TensorType:
    """A chunk's type: the template's dtype and weakness, the chunk's shape."""
    shape = tuple(getattr(chunk, "shape", ()))
    return TensorType(shape, template.dtype, template.weak)


def item(i: int):
    """The task function picking output ``i`` of a stage's tuple."""
    return _Item(i)


class _Item:
    def __init__(self, i: int):
        self.i = i

    def __call__(self, outputs: tuple):
        return outputs[self.i]

    def __reduce__(self):
        return (_Item, (self.i,))
