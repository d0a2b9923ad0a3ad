"""The SSA graph: typed inputs, nodes in topological order, outputs.

Every value is defined exactly once (as a graph input or as one node's output), every node
has a single output and remembers the user's source line.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from ..locations import SourceLocation
from . import graphviz, printer
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
        """The graph as Graphviz DOT text, which needs no Graphviz to produce.

        Loop bodies are clusters; on a placed graph (``lower(...).optimized_graph`` of a
        GPU call) values are filled with their device's colour, named in a legend, and
        each transfer is a bold red edge labelled with the devices and bytes it copies.

        Returns:
            The DOT text (``digraph "name" { ... }``), for any Graphviz tool.

        Example:
            >>> import numpy as np, tracejit as tj
            >>> graph = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3)).graph
            >>> graph.to_dot().splitlines()[0]
            'digraph "<lambda>" {'
        """
        return printer.to_dot(self)

    def render(self, path: str | os.PathLike, format: str | None = None) -> pathlib.Path:
        """Draw the graph to a picture file with Graphviz's ``dot`` program (as
        :meth:`to_dot` describes it).

        Args:
            path: The file to write; its suffix (``.svg``, ``.png``, ``.pdf``) names the
                format unless ``format`` does.
            format: ``"svg"``, ``"png"`` or ``"pdf"``; None to take it from ``path``.

        Returns:
            ``path`` as a :class:`pathlib.Path`.

        Raises:
            GraphvizNotFound: Graphviz's ``dot`` is not on ``PATH`` (install the
                ``graphviz`` OS package; :meth:`to_dot` works without it).
            InvalidArgument: The format is none of svg, png, pdf.

        Example:
            >>> import numpy as np, tracejit as tj
            >>> graph = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3)).graph
            >>> import pathlib, tempfile
            >>> graph.render(pathlib.Path(tempfile.mkdtemp()) / "f.svg").name
            'f.svg'
        """
        return graphviz.write(printer.to_dot(self), path, format)

    def _repr_pretty_(self, printer_, cycle: bool) -> None:
        """IPython's text for the graph: the IR as ``str`` prints it (what Jupyter shows
        where :meth:`_repr_svg_` gives no picture)."""
        printer_.text(str(self))

    def _repr_svg_(self) -> str | None:
        """The picture Jupyter shows: the SVG of :meth:`render`, or None (Jupyter then
        shows the text) where Graphviz is missing or fails."""
        return graphviz.svg(printer.to_dot(self))
