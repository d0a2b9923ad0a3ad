"""Passes for loops (``ir/loop_ops.py``): running the other passes inside loop bodies,
and joining the forward loop with the copy autodiff makes of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..ir import Graph, Node
from ..ir.loop_ops import Scan, While, outputs_of


def in_bodies(p: Callable[[Graph], Graph]) -> Callable[[Graph], Graph]:
    """The pass ``p`` applied to every loop body (innermost first), then to the graph.
    A body keeps its inputs and the number of its outputs, so its loop stays valid."""

    def run(graph: Graph) -> Graph:
        nodes = [_with_bodies(n, run) for n in graph.nodes]
        if any(a is not b for a, b in zip(nodes, graph.nodes, strict=True)):
            graph = graph.replace(nodes=nodes)
        return p(graph)

    run.__name__ = p.__name__
    run.__doc__ = p.__doc__
    return run


def _with_bodies(node: Node, p: Callable[[Graph], Graph]) -> Node:
    loop = node.attrs.get("loop")
    if isinstance(loop, Scan):
        new = dataclasses.replace(loop, body=p(loop.body))
    elif isinstance(loop, While):
        new = dataclasses.replace(loop, cond=p(loop.cond), body=p(loop.body))
    else:
        return node
    return Node(node.op, node.inputs, {**node.attrs, "loop": new}, node.out, node.loc)


def merge_scans(graph: Graph) -> Graph:
    """A scan whose body is another's with more outputs appended, over the same inputs
    (autodiff's copy of a forward loop that also stacks the carries), takes the place of
    the shorter one: the loop runs once, and the shorter one's readers read the longer
    one's results (the same index: appended outputs come last). Pairs are merged one at a
    time, so chains (a gradient's gradient) fold into the longest loop."""
    while True:
        scans = [n for n in graph.nodes if n.op == "scan"]
        pair = next(((a, b) for a in scans for b in scans if b.inputs == a.inputs
                     and _extends(b.attrs["loop"], a.attrs["loop"])), None)
        if pair is None:
            return graph
        short, long = pair
        nodes, placed = [], False
        for n in graph.nodes:
            if n is short or n is long:  # at the first of the two (same inputs), before
                if not placed:           # the readers of either
                    nodes.append(long)
                placed = True
            elif n.op == "loop_output" and n.inputs[0] is short.out:
                nodes.append(Node(n.op, (long.out,), n.attrs, n.out, n.loc))
            else:
                nodes.append(n)
        graph = graph.replace(nodes=nodes)


def _extends(long: Scan, short: Scan) -> bool:
    return (long is not short and long.body.nodes is short.body.nodes
            and long.body.inputs == short.body.inputs
            and long.body.outputs[:len(short.body.outputs)] == short.body.outputs
            and (long.n_consts, long.n_carry, long.length, long.reverse)
            == (short.n_consts, short.n_carry, short.length, short.reverse))
