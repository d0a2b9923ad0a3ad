"""Loops: ops whose attribute is a body graph (``scan`` and ``while_loop``).

A loop is one node, as in JAX: its body is a :class:`~tracejit.ir.Graph` of its own, traced
once, whatever the trip count. The IR gives a node one output, so a loop's node returns
all of its results as one value of type ``tuple[n]`` (a 1-d object type no kernel reads)
and each result is picked out by a ``loop_output`` node (``index`` and the result's
``type`` are its attributes). Passes see ordinary nodes; backends run a loop as a step of
its own, with the body compiled by themselves (``backends/*``).

``scan(*consts, *init, *xs, loop=Scan(...))``: the body takes ``(*consts, *carry,
*x_slices)`` (``xs[k][t]`` at step ``t``) and returns ``(*new_carry, *y_slices)``; the
node's results are the final carry, then each ``y`` stacked along a new first axis of
``length`` (step ``t``'s slice at index ``t``, also when ``reverse`` runs ``t`` from the
last step down, as ``jax.lax.scan`` stores them).

``while_loop(*consts, *init, loop=While(...))``: ``cond(*consts, *carry)`` returns a bool
scalar, ``body(*consts, *carry)`` the next carry; the results are the final carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import IRError
from .graph import Graph, Value
from .interpret import evaluate
from .registry import Grad, Kind, register
from .types import TensorType


def results_type(n: int) -> TensorType:
    """The type of a loop node's value: its ``n`` results, as one opaque tuple."""
    return TensorType((n,), np.dtype(object))


def is_results(t: TensorType) -> bool:
    return t.dtype.kind == "O" and t.ndim == 1


@dataclass(frozen=True, eq=False)
class Scan:
    """A scan's static description (compared by identity, as its body graph is).
    ``truncate``: the gradient flows back through at most this many steps (Theano's
    ``truncate_gradient``; -1: all of them)."""

    body: Graph
    n_consts: int
    n_carry: int
    length: int
    reverse: bool = False
    truncate: int = -1

    @property
    def n_xs(self) -> int:
        return len(self.body.inputs) - self.n_consts - self.n_carry

    @property
    def y_types(self) -> list[TensorType]:
        return [v.type for v in self.body.outputs[self.n_carry:]]

    def result_types(self) -> list[TensorType]:
        carry = [v.type for v in self.body.outputs[:self.n_carry]]
        return carry + [TensorType((self.length, *t.shape), t.dtype) for t in self.y_types]

    def __repr__(self) -> str:
        flags = ", reverse" if self.reverse else ""
        flags += f", truncate={self.truncate}" if self.truncate >= 0 else ""
        return (f"Scan(length={self.length}, consts={self.n_consts}, carry={self.n_carry}, "
                f"xs={self.n_xs}{flags})")


@dataclass(frozen=True, eq=False)
class While:
    """A while loop's static description: the condition and body graphs."""

    cond: Graph
    body: Graph
    n_consts: int

    def result_types(self) -> list[TensorType]:
        return [v.type for v in self.body.outputs]

    def __repr__(self) -> str:
        return f"While(consts={self.n_consts}, carry={len(self.body.outputs)})"


def bodies(node) -> list[tuple[str, Graph]]:
    """The graphs a loop node holds, with their names (none for other nodes)."""
    loop = node.attrs.get("loop")
    if isinstance(loop, Scan):
        return [("body", loop.body)]
    if isinstance(loop, While):
        return [("cond", loop.cond), ("body", loop.body)]
    return []


def body_inputs(node) -> list[tuple[Graph, list[TensorType]]]:
    """Each body graph of a loop node with the input types its node gives it."""
    loop = node.attrs["loop"]
    ts = [v.type for v in node.inputs]
    if isinstance(loop, Scan):
        c = loop.n_consts + loop.n_carry
        return [(loop.body, ts[:c] + [TensorType(t.shape[1:], t.dtype, t.weak)
                                      for t in ts[c:]])]
    return [(loop.cond, ts), (loop.body, ts)]


# ---------------------------------------------------------------- rules


def _scan_rule(*inputs: TensorType, loop: Scan) -> TensorType:
    c = loop.n_consts + loop.n_carry
    if len(inputs) != len(loop.body.inputs):
        raise IRError(f"scan takes {len(loop.body.inputs)} inputs, got {len(inputs)}")
    if any(t.ndim == 0 or t.shape[0] != loop.length for t in inputs[c:]):
        raise IRError(f"every scanned input needs a first axis of length {loop.length}")
    return results_type(loop.n_carry + len(loop.y_types))


def _scan(*args, loop: Scan):
    nc, nk, length = loop.n_consts, loop.n_carry, loop.length
    consts, carry, xs = list(args[:nc]), list(args[nc:nc + nk]), args[nc + nk:]
    ys = [np.empty((length, *t.shape), t.dtype) for t in loop.y_types]
    for t in (range(length - 1, -1, -1) if loop.reverse else range(length)):
        outs = evaluate(loop.body, consts + carry + [x[t] for x in xs])
        carry = outs[:nk]
        for y, out in zip(ys, outs[nk:], strict=True):
            y[t] = out
    return tuple(carry) + tuple(ys)


def _while_rule(*inputs: TensorType, loop: While) -> TensorType:
    if len(inputs) != len(loop.body.inputs):
        raise IRError(f"while_loop takes {len(loop.body.inputs)} inputs, got {len(inputs)}")
    return results_type(len(loop.body.outputs))


def _while(*args, loop: While):
    consts, carry = list(args[:loop.n_consts]), list(args[loop.n_consts:])
    while evaluate(loop.cond, consts + carry)[0]:
        carry = evaluate(loop.body, consts + carry)
    return tuple(carry)


def _output_rule(results: TensorType, *, index: int, type: TensorType) -> TensorType:
    if not is_results(results) or not 0 <= index < results.shape[0]:
        raise IRError(f"loop_output {index} of a {results}")
    return type


def _output(results, *, index: int, type: TensorType):
    return results[index]


register("scan", Kind.LOOP, _scan_rule, _scan,
         "a loop over the first axis of xs with a carry: its body graph runs once per step "
         "(lax.scan, Theano's scan, fori_loop with static bounds)")
register("while_loop", Kind.LOOP, _while_rule, _while,
         "a loop that runs its body graph while its condition graph holds (lax.while_loop)",
         grad=Grad.NONE)
register("loop_output", Kind.LOOP, _output_rule, _output,
         "one result of a loop node (a loop returns its results as one tuple value)")


def outputs_of(graph: Graph) -> dict[Value, list]:
    """For each loop node's value in ``graph``, the ``loop_output`` nodes reading it."""
    found: dict[Value, list] = {}
    for n in graph.nodes:
        if n.op == "loop_output":
            found.setdefault(n.inputs[0], []).append(n)
    return found
