"""Readable text (in the spirit of Theano's debugprint and JAX's jaxpr) and Graphviz DOT."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only annotations: graph.py imports this module for Graph.__str__
    from .graph import Graph, Node, Value

_INLINE_CONSTANT = 8  # constants with at most this many elements are printed in full


def _attr(value) -> str:
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, np.ndarray):
        if value.size <= _INLINE_CONSTANT:
            return np.array2string(value, separator=",").replace("\n", "")
        return f"<{value.dtype.name} array {value.shape}>"
    return repr(value)


def _names(graph: Graph) -> dict[Value, str]:
    names = {v: v.name or f"in{i}" for i, v in enumerate(graph.inputs)}
    for i, node in enumerate(graph.nodes):
        names[node.out] = f"%{i}"
    return names


def _call(node: Node, names: dict[Value, str]) -> str:
    args = [names[v] for v in node.inputs]
    args += [f"{k}={_attr(v)}" for k, v in node.attrs.items() if v is not None]
    return f"{node.op}({', '.join(args)})"


def format_graph(graph: Graph) -> str:
    """The graph as Python-like text; a placed graph shows each value's device after
    ``@`` (inputs) and first in each line's comment (nodes)."""
    names = _names(graph)
    place = graph.placement

    def at(v: Value) -> str:
        where = place.where(v) if place is not None else None
        return f"@{where}" if where else ""

    params = ", ".join(f"{names[v]}: {v.type}{at(v)}" for v in graph.inputs)
    rows = []
    for n in graph.nodes:
        comment = [place.where(n.out)] if place is not None else []
        comment += [n.loc.short] if n.loc else []
        rows.append((f"{names[n.out]}: {n.out.type} = {_call(n, names)}", ", ".join(comment)))
    width = min(max((len(r) for r, _ in rows), default=0), 72)
    lines = [f"def {graph.name}({params}):"]
    for text, comment in rows:
        lines.append(f"    {text:<{width}}  # {comment}" if comment else f"    {text}")
    outs = ", ".join(names[v] for v in graph.outputs)
    lines.append(f"    return {outs}" if graph.outputs else "    return")
    return "\n".join(lines)


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text; render with any Graphviz tool (``dot -Tsvg``), none is needed here."""
    names = _names(graph)
    ids = {v: f"v{i}" for i, v in enumerate(names)}
    lines = [f'digraph "{graph.name}" {{', "  rankdir=TB;", '  node [fontname="monospace"];']
    for v in graph.inputs:
        lines.append(f'  {ids[v]} [shape=ellipse, label="{names[v]}\\n{v.type}"];')
    for node in graph.nodes:
        label = node.op if node.op != "constant" else f"constant {_attr(node.attrs['value'])}"
        label = label.replace('"', "'")
        where = f"\\n{node.loc.short}" if node.loc else ""
        lines.append(f'  {ids[node.out]} [shape=box, label="{label}\\n{node.out.type}{where}"];')
        for v in node.inputs:
            lines.append(f"  {ids[v]} -> {ids[node.out]};")
    for i, v in enumerate(graph.outputs):
        lines.append(f'  out{i} [shape=plaintext, label="out{i}"];')
        lines.append(f"  {ids[v]} -> out{i};")
    lines.append("}")
    return "\n".join(lines)
