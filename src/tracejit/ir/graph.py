"""The SSA graph: typed inputs, nodes in topological order, outputs.

Every value is defined exactly once (as a graph input or as one node's output), every node
has a single output and remembers the user's source line.
"""

from __future__ import annotations

from typing import Any

from ..locations import SourceLocation
from . import printer
from .types import TensorType


class Value:
    """An SSA value. Identity is the object itself; names are given by the printer."""

    __slots__ = ("type", "name")

    def __init__(self, type: TensorType, name: str | None = None):
        self.type = type
        self.name = name

    def __repr__(self) -> str:
        return f"Value({self.name or hex(id(self))}: {self.type})"


class Node:
    """``out = op(*inputs, **attrs)`` at ``loc``. Attributes are static (hashable, except the
    ndarray of a ``constant``)."""

    __slots__ = ("op", "inputs", "attrs", "out", "loc")

    def __init__(
        self,
        op: str,
        inputs: tuple[Value, ...],
        attrs: dict[str, Any],
        out: Value,
        loc: SourceLocation | None,
    ):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.out = out
        self.loc = loc

    def __repr__(self) -> str:
        return f"Node({self.op}, {len(self.inputs)} inputs -> {self.out.type})"


class Graph:
    """A traced function. ``inputs`` are the flattened argument leaves, in order.
    ``placement`` (set by the placement pass, else None) says which device holds each
    value: ``placement.where(v)`` is ``"cuda:0"``, ``"cpu"`` or None (a host scalar)."""

    def __init__(
        self,
        inputs: list[Value],
        nodes: list[Node],
        outputs: list[Value],
        name: str = "f",
        placement: Any = None,
    ):
        self.inputs = inputs
        self.nodes = nodes
        self.outputs = outputs
        self.name = name
        self.placement = placement

    def replace(self, *, nodes: list[Node] | None = None, outputs: list[Value] | None = None):
        return Graph(
            self.inputs,
            self.nodes if nodes is None else nodes,
            self.outputs if outputs is None else outputs,
            self.name,
            self.placement,
        )

    def producers(self) -> dict[Value, Node]:
        return {n.out: n for n in self.nodes}

    def __str__(self) -> str:
        return printer.format_graph(self)

    def to_dot(self) -> str:
        return printer.to_dot(self)
