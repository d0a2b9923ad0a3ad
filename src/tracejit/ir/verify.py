"""The IR verifier: run after tracing and after every pass.

Checks SSA form (each value defined once, used only after its definition), that every op
is registered, and that re-running each op's rule on its input types gives the recorded
output type.
"""

from __future__ import annotations

from ..errors import IRError, TracejitError
from .graph import Graph
from .registry import REGISTRY


def verify(graph: Graph) -> Graph:
    defined = set()
    for v in graph.inputs:
        if v in defined:
            raise IRError(f"graph input {v} appears twice", location=None)
        defined.add(v)
    for i, node in enumerate(graph.nodes):
        where = f"node {i} ({node.op})"
        opdef = REGISTRY.get(node.op)
        if opdef is None:
            raise IRError(f"{where}: unknown op", location=node.loc)
        for v in node.inputs:
            if v not in defined:
                raise IRError(f"{where}: input {v} used before its definition", location=node.loc)
        if node.out in defined:
            raise IRError(f"{where}: output {node.out} defined twice", location=node.loc)
        try:
            expected = opdef.rule(*(v.type for v in node.inputs), **node.attrs)
        except TracejitError as e:
            raise IRError(f"{where}: rule rejects its inputs: {e.message}",
                          location=node.loc) from e
        if expected != node.out.type:
            raise IRError(
                f"{where}: output type {node.out.type} but the rule gives {expected}",
                location=node.loc,
            )
        defined.add(node.out)
    for v in graph.outputs:
        if v not in defined:
            raise IRError(f"graph output {v} is never defined", location=None)
    return graph
