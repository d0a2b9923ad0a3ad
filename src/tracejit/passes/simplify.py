"""Simplification: common subexpressions, constant folding and algebraic identities.

One round walks the nodes in order, rewriting each with inputs already simplified, so chains
collapse in a single round; rounds repeat (bounded) until nothing changes, then DCE drops what
became unused. Every rewrite keeps NumPy's values, dtypes, shapes and weak flags exactly.

Two things a graph's values cannot show are kept too. An array the caller receives must be a
fresh array each call, as NumPy's would be: it is never replaced by an argument, a constant
(the same object every call), another output, or a view. And a node computing with a Python
int (an argument, or derived from one: NumPy computes those as unbounded Python ints in some
ops) keeps its operation, since NumPy raises there if the int does not fit int64.

A node with an effect (a random draw) is never rewritten, folded or merged with an equal
one: two ``np.random.rand(3)`` calls are two different draws.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from ..ir import Graph, Kind, Node, Value
from ..ir.registry import REGISTRY, has_effect
from .algebra import rewrite
from .dce import dce
from .fold import constant_value, fold

MAX_ROUNDS = 8


def simplify(graph: Graph) -> Graph:
    graph = dce(graph)
    for _ in range(MAX_ROUNDS):
        simplified = _Round(graph).run()
        if simplified is None:
            break
        graph = dce(simplified)
    return graph


def _attr_key(v):
    """Hashable, exact identity of an attribute: constants compare by dtype, shape and bits
    (so 0.0 and -0.0 differ and equal NaNs match), Python scalars also by type."""
    if isinstance(v, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(v)
        data = a.tobytes() if a.nbytes <= 64 else hashlib.blake2b(a, digest_size=16).digest()
        return (type(v), a.dtype, a.shape, data)
    if isinstance(v, float):
        return (float, struct.pack("<d", v))
    if isinstance(v, complex):
        return (complex, struct.pack("<dd", v.real, v.imag))
    if isinstance(v, (tuple, list)):
        return (type(v), tuple(_attr_key(x) for x in v))
    return (type(v), v)


def _cse_key(node: Node):
    return node.op, node.inputs, tuple((k, _attr_key(v)) for k, v in sorted(node.attrs.items()))


class _Round:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.outputs = set(graph.outputs)
        self.escaping = {v for v in graph.outputs if v.type.ndim}  # returned as arrays
        self.subst: dict[Value, Value] = {}
        self.defs: dict[Value, Node] = {}
        self.seen: dict[tuple, Value] = {}
        self.nodes: list[Node] = []
        self.changed = False

    def run(self) -> Graph | None:
        for node in self.graph.nodes:
            self._add(node)
        if not self.changed:
            return None
        return self.graph.replace(nodes=self.nodes,
                                  outputs=[self.subst.get(v, v) for v in self.graph.outputs])

    def _add(self, node: Node) -> None:
        """Add ``node``, and in its place, in order, the nodes a rewrite makes of it (kept
        on a stack, not recursed into: a long unrolled trace chains thousands of them)."""
        pending = [node]
        while pending:
            made = self._add_one(pending.pop())
            pending.extend(reversed(made))

    def _add_one(self, node: Node) -> list[Node]:
        """Add ``node`` rewritten, or return the nodes a rewrite makes of it instead."""
        inputs = tuple(self.subst.get(v, v) for v in node.inputs)
        if inputs != node.inputs:
            node = Node(node.op, inputs, node.attrs, node.out, node.loc)
        if has_effect(node):
            self.nodes.append(node)
            self.defs[node.out] = node
            return []
        result = self._rewrite(node)
        if isinstance(result, list):
            self.changed = True
            return result
        if result is not None:
            self._replace(node.out, result)
            return []
        key = _cse_key(node)
        prior = self.seen.get(key)
        if prior is not None and self._may_replace(node.out, prior):
            self._replace(node.out, prior)
            return []
        self.seen.setdefault(key, node.out)
        self.nodes.append(node)
        self.defs[node.out] = node
        return []

    def _rewrite(self, node: Node) -> Value | list[Node] | None:
        if node.out not in self.escaping:
            folded = fold(node, self.defs.get)
            if folded is not None:
                return [folded]
        if any(self._python_int(v) for v in node.inputs):
            return None
        result = rewrite(node, self.defs.get)
        if isinstance(result, Value) and not self._may_replace(node.out, result):
            return None
        if isinstance(result, list) and node.out in self.escaping and \
                REGISTRY[result[-1].op].kind is Kind.STRUCTURAL and \
                result[-1].op != "update_slice":  # (which writes a copy)
            return None  # a returned array stays a fresh array, not a view
        return result

    def _python_int(self, v: Value) -> bool:
        """A run-time Python int (literals were range-checked while tracing)."""
        return v.type.weak and v.type.dtype.kind == "i" and constant_value(v, self.defs.get) is None

    def _may_replace(self, old: Value, new: Value) -> bool:
        if new.type != old.type:
            return False
        if old in self.escaping:
            d = self.defs.get(new)
            return not (d is None or new in self.outputs or d.op == "constant"
                        or REGISTRY[d.op].kind is Kind.STRUCTURAL)
        return True

    def _replace(self, old: Value, new: Value) -> None:
        self.subst[old] = new
        self.changed = True
        if old in self.outputs:
            self.outputs.add(new)
