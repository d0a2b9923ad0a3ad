"""Readable text (in the spirit of Theano's debugprint and JAX's jaxpr) and Graphviz DOT."""

from __future__ import annotations

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


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text; render with any Graphviz tool (``dot -Tsvg``), none is needed here.
    A loop's body graphs are drawn inside the graph as clusters ("scan body", "while cond",
    "while body"), nested as the loops are, each joined to its loop's node by a dashed
    edge; a body's inputs are its consts, carry and per-step slices, its outputs what one
    step returns."""
    lines = [f'digraph "{_dot_text(graph.name)}" {{', "  rankdir=TB;", "  compound=true;",
             '  node [fontname="monospace"];']
    _dot_body(graph, "", lines, "  ")
    lines.append("}")
    return "\n".join(lines)


_CLUSTER_LABELS = {("scan", "body"): "scan body", ("while_loop", "cond"): "while cond",
                   ("while_loop", "body"): "while body"}


def _dot_text(text: str) -> str:
    return text.replace('"', "'")


def _dot_body(graph: Graph, prefix: str, lines: list[str], pad: str) -> None:
    """Append ``graph``'s DOT statements, its DOT ids starting with ``prefix``."""
    names = _names(graph)
    ids = {v: f"{prefix}v{i}" for i, v in enumerate(names)}
    for v in graph.inputs:
        lines.append(f'{pad}{ids[v]} [shape=ellipse, label="{_dot_text(names[v])}\\n{v.type}"];')
    for node in graph.nodes:
        label = node.op if node.op != "constant" else f"constant {_attr(node.attrs['value'])}"
        if "loop" in node.attrs:
            label += f" {node.attrs['loop']!r}"
        if node.op == "loop_output":
            label += f" {node.attrs['index']}"
        where = f"\\n{_dot_text(node.loc.short)}" if node.loc else ""
        lines.append(f'{pad}{ids[node.out]} [shape=box, '
                     f'label="{_dot_text(label)}\\n{node.out.type}{where}"];')
        for v in node.inputs:
            lines.append(f"{pad}{ids[v]} -> {ids[node.out]};")
        for k, (kind, body) in enumerate(_bodies(node)):
            cluster = f"cluster_{ids[node.out]}_{kind}"
            inner = f"{ids[node.out]}_{k}_"
            lines.append(f"{pad}subgraph {cluster} {{")
            lines.append(f'{pad}  label="{_CLUSTER_LABELS.get((node.op, kind), kind)}";')
            lines.append(f"{pad}  style=rounded;")
            _dot_body(body, inner, lines, pad + "  ")
            lines.append(f"{pad}}}")
            anchor = f"{inner}out0" if body.outputs else f"{inner}v0"
            lines.append(f"{pad}{ids[node.out]} -> {anchor} [lhead={cluster}, style=dashed, "
                         "arrowhead=odot];")
    for i, v in enumerate(graph.outputs):
        lines.append(f'{pad}{prefix}out{i} [shape=plaintext, label="out{i}"];')
        lines.append(f"{pad}{ids[v]} -> {prefix}out{i};")
