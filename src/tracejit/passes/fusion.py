"""Fusion: partition a graph's nodes into kernels, the units a backend compiles.

A *loop* kernel iterates over one shape. It holds elementwise nodes whose output has that
shape (so nothing is recomputed per element), and reductions whose *input* has that shape
(``sum(x * x)`` is one pass). It may have several outputs: siblings that read the same
inputs share one loop (Theano could only fuse single-output graphs). When all reductions
of a kernel reduce the same trailing axes (``rows``), later nodes may use their results:
the kernel then runs in phases per row (row softmax: max, then sum of exp, then the
output), reading each row from cache instead of memory. Every other node is a *library*
step of its own (contractions, structural ops, gathers), which a backend runs with a
library call. Steps are listed in an order that respects every dependency.

The pass is backend-neutral; ``fusible(node)`` lets a backend keep ops it has no code for
out of loop kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import Graph, Kind, Node, Value
from ..ir.registry import REGISTRY

LOOP_REDUCTIONS = {"sum", "prod", "max", "min", "any", "all"}


@dataclass
class Kernel:
    kind: str  # "loop" or "library"
    nodes: list[Node]
    shape: tuple[int, ...] = ()  # iteration shape of a loop kernel
    inputs: list[Value] = field(default_factory=list)  # values read from outside
    outputs: list[Value] = field(default_factory=list)  # values needed outside
    rows: tuple[int, ...] | None = None  # reduced trailing axes, once a node uses a result

    @property
    def reductions(self) -> list[Node]:
        return [n for n in self.nodes if n.op in LOOP_REDUCTIONS]

    def row_shape(self) -> tuple[int, ...] | None:
        """Shape of per-row values (the reductions' keepdims shape) in a row kernel."""
        if self.rows is None:
            return None
        return tuple(1 if d in self.rows else s for d, s in enumerate(self.shape))

    def is_row_level(self, node: Node) -> bool:
        """An elementwise node computed once per row, between phases (log of a row sum)."""
        return node.op not in LOOP_REDUCTIONS and node.out.type.shape != self.shape

    def row_axes(self) -> tuple[int, ...] | None:
        """The trailing axes all reductions share, if they share one non-empty suffix."""
        axes = {n.attrs["axis"] for n in self.reductions}
        if len(axes) != 1:
            return None
        (a,) = axes
        n = len(self.shape)
        return a if a and a == tuple(range(n - len(a), n)) else None


def _loop_shape(node: Node) -> tuple[int, ...] | None:
    """The iteration shape a node needs in a loop kernel, or None if it cannot join one.
    A contraction joins as an elementwise node over its output (when the backend accepts
    it, i.e. its contracted dimension is small)."""
    kind = REGISTRY[node.op].kind
    if kind in (Kind.ELEMENTWISE, Kind.CONTRACTION):
        return node.out.type.shape
    if node.op in LOOP_REDUCTIONS:
        return node.inputs[0].type.shape
    return None


def fuse(graph: Graph, fusible: Callable[[Node], bool] = lambda n: True) -> list[Kernel]:
    kernels: list[Kernel] = []
    home: dict[Value, int] = {}  # value -> index of the kernel that computes it
    reduced: set[Value] = set()  # reduction results: complete only after their loop ends
    for node in graph.nodes:
        if node.op == "constant":
            continue  # constants are values the backend holds, not work
        shape = _loop_shape(node) if fusible(node) else None
        target = None
        if shape is not None:
            for k in range(len(kernels) - 1, -1, -1):
                kern = kernels[k]
                if kern.kind == "loop" and (
                    (kern.shape == shape and _can_join(node, kern, k, home, reduced))
                    or _joins_as_row_level(node, kern, k, home, reduced)
                ):
                    target = k
                    break
                if any(home.get(v) == k for v in node.inputs):
                    break  # an input comes from here: no earlier kernel can take the node
        if target is None:
            kernels.append(Kernel("loop" if shape is not None else "library", [], shape or ()))
            target = len(kernels) - 1
        kern = kernels[target]
        kern.nodes.append(node)
        if any(home.get(v) == target and v in reduced for v in node.inputs) or (
                kern.kind == "loop" and kern.is_row_level(node)):
            kern.rows = kern.row_axes()
        home[node.out] = target
        if node.op in LOOP_REDUCTIONS:
            reduced.add(node.out)
    _wire(graph, kernels, home)
    return kernels


def _joins_as_row_level(node: Node, kern: Kernel, k: int, home: dict[Value, int],
                        reduced: set[Value]) -> bool:
    """A per-row elementwise node of a row kernel: its inputs are this kernel's reductions
    or per-row values, or come from earlier kernels."""
    rows = kern.rows if kern.rows is not None else kern.row_axes()
    if rows is None or node.op in LOOP_REDUCTIONS:
        return False
    row_shape = tuple(1 if d in rows else s for d, s in enumerate(kern.shape))
    if node.out.type.shape != row_shape:
        return False
    if REGISTRY[node.op].kind is not Kind.ELEMENTWISE or not row_shape or 1 not in row_shape:
        return False
    for v in node.inputs:
        src = home.get(v)
        if src is None or src < k:
            continue
        if src == k and (v in reduced or v.type.shape == row_shape):
            continue
        return False
    return True


def _can_join(node: Node, kern: Kernel, k: int, home: dict[Value, int],
              reduced: set[Value]) -> bool:
    """Inputs must be ready before kernel k runs, or computed inside it (not for a
    contraction); a reduced value only in a row kernel (all its reductions over the same
    trailing axes)."""
    if node.op in LOOP_REDUCTIONS and kern.rows is not None:
        return node.attrs["axis"] == kern.rows
    contraction = REGISTRY[node.op].kind is Kind.CONTRACTION
    for v in node.inputs:
        src = home.get(v)
        if src is not None and src == k and contraction:
            return False  # a contraction reads its operands whole: they must exist already
        if src is None or src < k or (src == k and v not in reduced):
            continue
        if src == k and kern.row_axes() is not None:
            continue
        return False
    return True


def _wire(graph: Graph, kernels: list[Kernel], home: dict[Value, int]) -> None:
    needed_outside = set(graph.outputs)
    for i, kern in enumerate(kernels):
        for node in kern.nodes:
            for v in node.inputs:
                if home.get(v) != i:
                    needed_outside.add(v)
                    if v not in kern.inputs:
                        kern.inputs.append(v)
    for kern in kernels:
        kern.outputs = [n.out for n in kern.nodes if n.out in needed_outside]


def is_reduction(v: Value, kern: Kernel) -> bool:
    """Whether ``v`` is the result of one of ``kern``'s reductions."""
    return any(n.out is v and n.op in LOOP_REDUCTIONS for n in kern.nodes)


def phases(kern: Kernel) -> dict[Value, int]:
    """Phase of each node of a row kernel: one more than any reduction of the kernel it
    depends on (a backend runs the phases one after another per row)."""
    phase: dict[Value, int] = {}
    for node in kern.nodes:
        p = 0
        for v in node.inputs:
            if v in phase:
                p = max(p, phase[v] + (1 if is_reduction(v, kern) else 0))
        phase[node.out] = p
    return phase


def needed(node: Node, sinks: list[Node], kern: Kernel) -> bool:
    """Whether ``node`` is one of ``sinks`` or an elementwise node they depend on (what a
    phase computing ``sinks`` must recompute)."""
    want = {n.out for n in sinks}
    for n in reversed(kern.nodes):
        if n.out in want and not (n not in sinks and n.op in LOOP_REDUCTIONS):
            want.update(n.inputs)
    return node.out in want and (node in sinks or node.op not in LOOP_REDUCTIONS)
