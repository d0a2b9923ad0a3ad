"""Dead-code elimination: drop nodes no output depends on (traced but unused work)."""

from __future__ import annotations

from ..ir import Graph


def dce(graph: Graph) -> Graph:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if node.out in live:
            kept.append(node)
            live.update(node.inputs)
    return graph.replace(nodes=kept[::-1])
