"""Dead-code elimination: drop nodes no output depends on (traced but unused work).

A node with an effect (a random draw) stays even if unused: NumPy would still have made
it, advancing the generator's state for the draws after it."""

from __future__ import annotations

from ..ir import Graph
from ..ir.registry import has_effect


def dce(graph: Graph) -> Graph:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if node.out in live or has_effect(node):
            kept.append(node)
            live.update(node.inputs)
    return graph.replace(nodes=kept[::-1])
