"""The IR verifier: run after tracing and after every pass.

Checks SSA form (each value defined once, used only after its definition), that every op
is registered, and that re-running each op's rule on its input types gives the recorded
output type.
"""

from __future__ import annotations

import numpy as np

from ..errors import IRError, TracejitError
from .graph import Graph
from .loop_ops import Scan, While, body_inputs
from .registry import REGISTRY, Kind
from .types import TensorType


def verify(graph: Graph) -> Graph:
    defined = set()
    loops = {}  # a loop node's value: the node (loop_output's types are checked against it)
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
        if node.op == "loop_output":
            _verify_output(node, loops.get(node.inputs[0]), where)
        elif opdef.kind is Kind.LOOP:
            for body, types in body_inputs(node):
                _verify_body(node, body, types, where)
            loops[node.out] = node
        defined.add(node.out)
    for v in graph.outputs:
        if v not in defined:
            raise IRError(f"graph output {v} is never defined", location=None)
    return graph


def _verify_output(node, loop_node, where: str) -> None:
    """A ``loop_output`` has the type of the loop's result it picks (where the loop node
    is in this graph, not one of its inputs)."""
    if loop_node is None:
        return
    want = loop_node.attrs["loop"].result_types()[node.attrs["index"]]
    if node.attrs["type"] != want:
        raise IRError(f"{where}: says result {node.attrs['index']} is {node.attrs['type']}, "
                      f"the loop gives {want}", location=node.loc)


def _verify_body(node, body: Graph, types: list, where: str) -> None:
    """A loop's body graph: valid itself, taking the types its node gives it, and (the
    body of a loop) giving back its carry's types."""
    try:
        verify(body)
    except IRError as e:
        raise IRError(f"{where}: in its {body.name}: {e.message}", location=e.location) from e
    if [v.type for v in body.inputs] != types:
        raise IRError(f"{where}: its {body.name} takes {[str(v.type) for v in body.inputs]}, "
                      f"the node gives {[str(t) for t in types]}", location=node.loc)
    loop = node.attrs["loop"]
    if isinstance(loop, While) and body is loop.cond and [
            v.type for v in body.outputs] != [TensorType((), np.dtype(bool))]:
        raise IRError(f"{where}: its cond gives {[str(v.type) for v in body.outputs]}, not "
                      "one bool scalar", location=node.loc)
    if body is loop.body:
        carry = types[loop.n_consts:loop.n_consts + (loop.n_carry if isinstance(loop, Scan)
                                                     else len(body.outputs))]
        outs = [v.type for v in body.outputs[:len(carry)]]
        if outs != carry:
            raise IRError(f"{where}: its body turns the carry {[str(t) for t in carry]} into "
                          f"{[str(t) for t in outs]}", location=node.loc)
