"""Readable text (in the spirit of Theano's debugprint and JAX's jaxpr) and Graphviz DOT."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .types import TensorType

if TYPE_CHECKING:  # only annotations: graph.py imports this module for Graph.__str__
    from .graph import Graph, Node, Value

_INLINE_CONSTANT = 8  # constants with at most this many elements are printed in full


def _attr(value) -> str:
    if isinstance(value, TensorType):
        return str(value)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, np.ndarray):
        if value.size <= _INLINE_CONSTANT:
            return np.array2string(value, separator=",").replace("\n", "")
        return f"<{value.dtype.name} array {value.shape}>"
    return repr(value)


def _names(graph: Graph, prefix: str = "") -> dict[Value, str]:
    names = {v: v.name or f"in{i}" for i, v in enumerate(graph.inputs)}
    for i, node in enumerate(graph.nodes):
        names[node.out] = f"%{prefix}{i}"
    return names


def _bodies(node: Node) -> list[tuple[str, Graph]]:
    """A loop node's body graphs, named (``ir/loop_ops.py``; read through the attribute
    so this module imports no op definitions)."""
    loop = node.attrs.get("loop")
    return [(k, getattr(loop, k)) for k in ("cond", "body") if hasattr(loop, k)]


def _call(node: Node, names: dict[Value, str]) -> str:
    args = [names[v] for v in node.inputs]
    args += [f"{k}={_attr(v)}" for k, v in node.attrs.items()
             if v is not None and not (node.op == "loop_output" and k == "type")]
    return f"{node.op}({', '.join(args)})"


def format_graph(graph: Graph, prefix: str = "") -> str:
    """The graph as Python-like text; a placed graph shows each value's device after
    ``@`` (inputs) and first in each line's comment (nodes). A loop's body graphs follow
    its line, nested, their values numbered apart (``%1.0`` is value 0 of the body of
    the loop at ``%1``)."""
    names = _names(graph, prefix)
    place = graph.placement

    def at(v: Value) -> str:
        where = place.where(v) if place is not None else None
        return f"@{where}" if where else ""

    params = ", ".join(f"{names[v]}: {v.type}{at(v)}" for v in graph.inputs)
    rows = []
    for n in graph.nodes:
        comment = [place.where(n.out)] if place is not None else []
        comment += [n.loc.short] if n.loc else []
        rows.append((f"{names[n.out]}: {n.out.type} = {_call(n, names)}", ", ".join(comment),
                     [format_graph(body, f"{names[n.out][1:]}.")
                      for _, body in _bodies(n)]))
    width = min(max((len(r) for r, _, _ in rows), default=0), 72)
    lines = [f"def {graph.name}({params}):"]
    for text, comment, nested in rows:
        lines.append(f"    {text:<{width}}  # {comment}" if comment else f"    {text}")
        for body in nested:
            lines += [f"        {line}" for line in body.splitlines()]
    outs = ", ".join(names[v] for v in graph.outputs)
    lines.append(f"    return {outs}" if graph.outputs else "    return")
    return "\n".join(lines)


@dataclass(frozen=True)
class DotGroup:
    """Nodes a backend runs as one step, for :func:`to_dot`: ``boxed`` draws them in a
    box titled ``label`` (a fused kernel); otherwise each node's own label starts with
    ``label`` and it has a double border (a library call, an interpreted node)."""

    label: str
    nodes: tuple[Node, ...]
    boxed: bool


def to_dot(graph: Graph, groups: Sequence[DotGroup] = ()) -> str:
    """Graphviz DOT text; render with any Graphviz tool (``dot -Tsvg``), none is needed here.

    A loop's body graphs are drawn inside the graph as clusters ("scan body", "while cond",
    "while body"), nested as the loops are, each joined to its loop's node by a dashed
    edge; a body's inputs are its consts, carry and per-step slices, its outputs what one
    step returns. On a placed graph each value is filled with its device's colour (a
    loop's body with its loop's) and a legend names them; a ``transfer`` node is drawn as
    the edge it stands for, bold and red, labelled with the devices and the bytes it
    copies. ``groups`` are a backend's steps (``Lowered.to_dot``). In a graph of more
    than ``_LARGE`` nodes a value read far below where it is computed is drawn again,
    dashed, beside each such reader, which keeps dot's layout to seconds (see ``_Scope``)."""
    dot = _Dot()
    lines = [f'digraph "{_dot_text(graph.name)}" {{', "  rankdir=TB;", "  compound=true;",
             '  graph [fontname="monospace"];',
             '  node [fontname="monospace"];', '  edge [fontname="monospace"];']
    dot.body(graph, "", lines, "  ", groups, None)
    lines += dot.legend()
    lines.append("}")
    return "\n".join(lines)


_CLUSTER_LABELS = {("scan", "body"): "scan body", ("while_loop", "cond"): "while cond",
                   ("while_loop", "body"): "while body"}
# Fill colours of the devices on a placed graph; "host" is a host scalar's (no device).
_FILLS = {"cpu": "#cfe2f3", "host": "#eeeeee"}
_GPU_FILLS = ("#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3")
_TRANSFER = 'color="#cc0000", fontcolor="#cc0000", penwidth=2.5'


def _dot_text(text: str) -> str:
    return text.replace('"', "'")


def _fill(device: str) -> str:
    if device in _FILLS:
        return _FILLS[device]
    index = device.rpartition(":")[2]
    return _GPU_FILLS[int(index) % len(_GPU_FILLS) if index.isdigit() else 0]


def _size(nbytes: int) -> str:
    """``512 B``, ``4.0 KiB``, ``1.5 MiB``."""
    size, unit = float(nbytes), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{nbytes} B" if unit == "B" else f"{size:.1f} {unit}"


class _Dot:
    """Writes one graph's DOT statements, remembering the devices it coloured and
    whether it drew transfers, library steps and references, for the legend."""

    def __init__(self):
        self.devices: dict[str, None] = {}  # in order of first use
        self.transfers = self.library = self.references = False

    def fill(self, device: str | None) -> str | None:
        """The fill colour of a value on ``device`` ("host": a host scalar), if any."""
        if device is None:
            return None
        self.devices.setdefault(device)
        return _fill(device)

    def body(self, graph: Graph, prefix: str, lines: list[str], pad: str,
             groups: Sequence[DotGroup], device: str | None) -> None:
        """Append ``graph``'s DOT statements, its DOT ids starting with ``prefix``; a graph
        without a placement of its own is filled as ``device`` (a loop's body)."""
        scope = _Scope(self, graph, prefix, groups, device)
        declared: dict[DotGroup | None, list[str]] = {None: []}
        for v in graph.inputs:
            declared[None].append(scope.declare(v, "ellipse", scope.names[v]))
        edges: list[str] = []
        for node in graph.nodes:
            if node.op == "transfer":
                continue  # drawn as the edges reading it
            edges += [scope.edge(v, scope.ids[node.out], node, declared[None])
                      for v in node.inputs]
            label = node.op if node.op != "constant" else f"constant {_attr(node.attrs['value'])}"
            if "loop" in node.attrs:
                label += f" {node.attrs['loop']!r}"
            if node.op == "loop_output":
                label += f" {node.attrs['index']}"
            if node in scope.marks:
                label = f"{scope.marks[node]}: {label}"
                self.library = True
            where = f"\\n{node.loc.short}" if node.loc else ""
            declared.setdefault(scope.boxes.get(node), []).append(
                scope.declare(node.out, "box", label, where, double=node in scope.marks))
            for k, (kind, body) in enumerate(_bodies(node)):
                cluster = f"cluster_{scope.ids[node.out]}_{kind}"
                inner = f"{scope.ids[node.out]}_{k}_"
                block = [f"subgraph {cluster} {{",
                         f'  label="{_CLUSTER_LABELS.get((node.op, kind), kind)}";',
                         "  style=rounded;"]
                self.body(body, inner, block, "  ", (), scope.where(node.out))
                declared[None] += [*block, "}"]
                anchor = f"{inner}out0" if body.outputs else f"{inner}v0"
                edges.append(f"{scope.ids[node.out]} -> {anchor} [lhead={cluster}, "
                             "style=dashed, arrowhead=odot];")
        for i, v in enumerate(graph.outputs):
            declared[None].append(f'{prefix}out{i} [shape=plaintext, label="out{i}"];')
            edges.append(scope.edge(v, f"{prefix}out{i}", None, declared[None]))
        lines += [pad + line for line in declared.pop(None)]
        for k, (group, block) in enumerate(declared.items()):
            lines += [f"{pad}subgraph cluster_{prefix}step{k} {{",
                      f'{pad}  label="{_dot_text(group.label)}";',
                      f'{pad}  style="rounded,bold"; color="#3d85c6";',
                      *(f"{pad}  {line}" for line in block), f"{pad}}}"]
        lines += [pad + edge for edge in edges]

    def legend(self) -> list[str]:
        """A box naming the colours and marks used (nothing on a graph without them)."""
        if not (self.devices or self.transfers or self.library or self.references):
            return []
        lines = ["  subgraph cluster_legend {", '    label="legend"; style=dashed;']
        for k, device in enumerate(self.devices):
            name = "host scalar" if device == "host" else device
            lines.append(f'    legend{k} [shape=box, label="{name}", style=filled, '
                         f'fillcolor="{_fill(device)}"];')
        if self.library:
            lines.append('    legend_library [shape=box, peripheries=2, label="library step"];')
        if self.references:
            lines.append('    legend_reference [shape=box, style=dashed, '
                         'label="value drawn again\\nwhere it is used"];')
        if self.transfers:
            lines += ['    legend_from [shape=point]; legend_to [shape=point];',
                      "    {rank=same; legend_from; legend_to}",
                      f'    legend_from -> legend_to [{_TRANSFER}, label="transfer"];']
        return [*lines, "  }"]


class _Scope:
    """One graph being drawn: its values' DOT ids, names and looks, its steps, and the
    references it drew. In a large graph a value read far below where it is computed
    (more than ``_SPAN`` nodes later) is drawn again, dashed, beside each such reader:
    Graphviz's dot would otherwise route every long edge through all ranks between its
    ends, and its layout time grows with their total length (an unrolled 300-step loop
    reading its weights at every step took dot more than ten minutes, seconds so)."""

    def __init__(self, dot: _Dot, graph: Graph, prefix: str, groups: Sequence[DotGroup],
                 device: str | None):
        self.dot, self.graph, self.prefix, self.device = dot, graph, prefix, device
        self.names = _names(graph)
        self.ids = {v: f"{prefix}v{i}" for i, v in enumerate(self.names)}
        self.position = {n.out: i for i, n in enumerate(graph.nodes)}
        self.far = len(graph.nodes) > _LARGE
        self.boxes = {n: g for g in groups if g.boxed for n in g.nodes}
        self.marks = {n: g.label for g in groups if not g.boxed for n in g.nodes}
        self.moved = {n.out: n for n in graph.nodes if n.op == "transfer"}
        self.looks: dict[Value, tuple[str, str]] = {}  # shape and label, for references
        self.copies = 0

    def where(self, v: Value) -> str | None:
        place = self.graph.placement
        if place is None:
            return self.device
        return place.where(v) or "host"

    def declare(self, v: Value, shape: str, label: str, where: str = "",
                double: bool = False) -> str:
        """The DOT statement of value ``v``'s node."""
        text = f"{_dot_text(label)}\\n{v.type}{_dot_text(where)}"
        self.looks[v] = (shape, text)
        return _node(self.ids[v], shape, text, self.dot.fill(self.where(v)), double=double)

    def edge(self, v: Value, to: str, user: Node | None, declared: list[str]) -> str:
        """The edge from ``v`` to DOT node ``to`` (``user``'s; None: an output); from a
        transfer's source, marked, where ``v`` is a transfer's result; from a reference
        where ``v`` is far above."""
        transfer = self.moved.get(v)
        while v in self.moved:  # a copy (of a copy): drawn from the first value
            v = self.moved[v].inputs[0]
        start = self.ids[v]
        at = len(self.graph.nodes) if user is None else self.position[user.out]
        if self.far and at - self.position.get(v, -1) > _SPAN:
            self.dot.references = True
            self.copies += 1
            start = f"{self.ids[v]}_ref{self.copies}"
            shape, text = self.looks[v]
            declared.append(_node(start, shape, text, self.dot.fill(self.where(v)),
                                  dashed=True))
        if transfer is None:
            return f"{start} -> {to};"
        self.dot.transfers = True
        step = f"{self.marks[transfer]}: " if transfer in self.marks else ""
        nbytes = transfer.out.type.size * transfer.out.type.dtype.itemsize
        label = (f"{step}{transfer.attrs['source']} to {transfer.attrs['device']}"
                 f"\\n{_size(nbytes)}")
        return f'{start} -> {to} [{_TRANSFER}, label="{_dot_text(label)}"];'


_LARGE = 300  # nodes in a graph from which long edges are drawn as references
_SPAN = 40  # how many nodes below its value an edge's reader may be in a large graph


def _node(name: str, shape: str, text: str, fill: str | None, *, double: bool = False,
          dashed: bool = False) -> str:
    styles = ["filled"] * (fill is not None) + ["dashed"] * dashed
    attrs = [f"shape={shape}", f'label="{text}"']
    if styles:
        attrs.append(f'style="{",".join(styles)}"')
    if fill is not None:
        attrs.append(f'fillcolor="{fill}"')
    if double:
        attrs.append("peripheries=2")
    return f"{name} [{', '.join(attrs)}];"
