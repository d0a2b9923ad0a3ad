"""Loop-invariant code motion: work in a loop body that gives the same value at every step
moves out of the loop, to run once before it.

A body value is invariant when it depends only on the loop's consts (body inputs
``[:n_consts]``), on a carry the body hands back unchanged, and on constants. Each
invariant node (other than a lone constant, which costs nothing) moves to the enclosing
graph, just before the loop node, reading the loop's inputs in place of the body's; the
moved values the body still reads become new consts of the loop (appended after the old
ones, so carries and scanned inputs keep their places). Autodiff's reverse loop, which
reads ``transpose(W)`` at every step, then transposes ``W`` once.

What stays: nodes with an effect (``registry.has_effect``: every step must make its own
draw); everything in a scan of length 0 (its body never runs, and a moved node could
raise, or warn under the caller's ``np.errstate``, where the loop would not); and, in a
``while_loop``'s body (which may run no time at all), every node that could raise or warn
at run time: only data movement (structural ops, constants) and comparisons, logical ops
and ``where`` move out of it. A ``while_loop``'s condition runs at least once: anything
invariant in it moves. Types are kept exactly (each moved node is the same op on values
of the same types), weak ones included.
"""

from __future__ import annotations

import dataclasses

from ..ir import Graph, Kind, Node, Value
from ..ir.loop_ops import Scan, While
from ..ir.registry import COMPARISONS, REGISTRY, has_effect

# ops that neither raise nor warn (NumPy's floating-point errors) whatever their inputs
_QUIET_KINDS = (Kind.STRUCTURAL, Kind.CREATION)
_QUIET_OPS = COMPARISONS | {"logical_and", "logical_or", "logical_xor", "logical_not", "where"}


def hoist(graph: Graph) -> Graph:
    """Move the loop-invariant nodes of each loop's bodies out, before the loop node."""
    nodes: list[Node] = []
    for node in graph.nodes:
        if node.op in ("scan", "while_loop"):
            nodes.extend(_hoist_loop(node))
        else:
            nodes.append(node)
    if len(nodes) == len(graph.nodes):
        return graph
    return graph.replace(nodes=nodes)


def _invariant_inputs(loop: Scan | While, body: Graph) -> list[int]:
    """Positions of ``body``'s inputs that hold the same value at every step: the consts,
    and each carry the loop's body hands back unchanged."""
    nc = loop.n_consts
    nk = loop.n_carry if isinstance(loop, Scan) else len(loop.body.outputs)
    kept = [j for j in range(nk) if loop.body.outputs[j] is loop.body.inputs[nc + j]]
    return list(range(nc)) + [nc + j for j in kept]


def _quiet(node: Node) -> bool:
    """Whether running ``node`` can neither raise (an index out of range, a singular
    matrix) nor warn (an overflow, a division by zero) for any input values."""
    return REGISTRY[node.op].kind in _QUIET_KINDS or node.op in _QUIET_OPS


def _hoist_loop(node: Node) -> list[Node]:
    """The nodes moved out of ``node``'s bodies, then ``node`` with them as new consts."""
    loop = node.attrs["loop"]
    if isinstance(loop, Scan):
        if loop.length == 0:
            return [node]
        graphs = [(loop.body, False)]
    else:
        graphs = [(loop.cond, False), (loop.body, True)]
    outside: list[Node] = []
    new_consts: list[Value] = []  # outer values the loop gets as new consts
    splits = []
    for body, careful in graphs:
        moved, moving, reads = _split(body, node, _invariant_inputs(loop, body), careful)
        outside.extend(moved)
        splits.append((moving, reads))
        new_consts.extend(v for v in reads.values() if v not in new_consts)
    if not new_consts:
        return [node]
    nc = loop.n_consts
    bodies = [_with_consts(body, moving, reads, new_consts, nc)
              for (body, _), (moving, reads) in zip(graphs, splits, strict=True)]
    if isinstance(loop, Scan):
        new = dataclasses.replace(loop, body=bodies[0], n_consts=nc + len(new_consts))
    else:
        new = dataclasses.replace(loop, cond=bodies[0], body=bodies[1],
                                  n_consts=nc + len(new_consts))
    inputs = (*node.inputs[:nc], *new_consts, *node.inputs[nc:])
    return [*outside, Node(node.op, inputs, {**node.attrs, "loop": new}, node.out, node.loc)]


def _split(body: Graph, node: Node, invariant: list[int], careful: bool
           ) -> tuple[list[Node], set[Value], dict[Value, Value]]:
    """The invariant nodes of ``body`` as nodes of the enclosing graph, the body values
    they define, and for each of those the rest of the body still reads, the outer value
    standing for it (in the body's order)."""
    outer = {body.inputs[i]: node.inputs[i] for i in invariant}  # body value -> outer
    constants: dict[Value, Node] = {}  # copied out where a moved node reads one
    moving: set[Value] = set()
    moved: list[Node] = []
    for n in body.nodes:
        if has_effect(n) or (careful and not _quiet(n)):
            continue
        if not n.inputs:
            constants[n.out] = n
            continue
        if not all(v in outer or v in constants for v in n.inputs):
            continue
        for v in n.inputs:
            if v not in outer:
                c = constants[v]
                outer[v] = Value(v.type)
                moved.append(Node(c.op, (), c.attrs, outer[v], c.loc))
        outer[n.out] = Value(n.out.type)
        moved.append(Node(n.op, tuple(outer[v] for v in n.inputs), n.attrs, outer[n.out],
                          n.loc))
        moving.add(n.out)
    read = {v for n in body.nodes if n.out not in moving for v in n.inputs}
    read.update(body.outputs)
    reads = {n.out: outer[n.out] for n in body.nodes if n.out in moving and n.out in read}
    return moved, moving, reads


def _with_consts(body: Graph, moving: set[Value], reads: dict[Value, Value],
                 new_consts: list[Value], nc: int) -> Graph:
    """``body`` without the moved nodes, taking one more input per new const (after its
    consts; an input it does not read where the const came from another body graph),
    the moved values it reads replaced by those inputs."""
    fresh = {o: Value(o.type, f"hoisted{i}") for i, o in enumerate(new_consts)}
    subst = {v: fresh[o] for v, o in reads.items()}
    nodes = [Node(n.op, tuple(subst.get(v, v) for v in n.inputs), n.attrs, n.out, n.loc)
             for n in body.nodes if n.out not in moving]
    return Graph([*body.inputs[:nc], *fresh.values(), *body.inputs[nc:]], nodes,
                 [subst.get(v, v) for v in body.outputs], body.name)
