"""Tracing loop bodies: a body function becomes a graph of its own, traced once.

A body is traced in a :class:`BodyTrace` nested in the trace that calls the loop. Values
of enclosing traces that the body uses (closures, as ``lambda h, x: np.tanh(h @ W + x)``
uses ``W``) become the loop's *consts*: the body gets an input for each, and the loop node
reads the enclosing value, so nothing a body reads escapes its trace. ``scan`` and
``while_loop`` bind the loop nodes; ``lax.py`` and ``scan.py`` build the public forms on
them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import LoopError, TracingError, UnsupportedOperation
from ..ir import Graph, Node, TensorType, Value
from ..ir.loop_ops import Scan, While
from ..ir.registry import REGISTRY
from . import pytree
from .core import Trace, current, tracing
from .tracer import Tracer


class BodyTrace(Trace):
    """The trace of a loop body: a value of an enclosing trace it reads is captured as
    one more input (``captures`` lists, in order, the enclosing trace's value for each)."""

    def __init__(self, name: str, parent: Trace):
        super().__init__(name)
        self.parent = parent
        self.captures: list[Value] = []
        self._captured: dict[Value, Value] = {}
        self._capture_inputs: list[Value] = []

    def lift(self, x) -> Value:
        if isinstance(x, Tracer) and x._trace is not self and self._encloses(x._trace):
            outer = self.parent.lift(x)  # the parent captures it in turn if it is older
            if outer not in self._captured:
                inner = Value(outer.type, f"c{len(self.captures)}")
                self._captured[outer] = inner
                self.captures.append(outer)
                self._capture_inputs.append(inner)
            return self._captured[outer]
        if isinstance(x, Tracer) and x._trace is not self:
            raise LoopError(
                "a loop body uses a traced value of another trace (one that escaped from a "
                "function traced before, or from another thread's trace)",
                hint="pass the value into the loop (as part of the carry, a scanned input or "
                "a non-sequence) from the function that computes it")
        return super().lift(x)

    def _encloses(self, other) -> bool:
        t = self.parent
        while t is not None:
            if t is other:
                return other.active
            t = getattr(t, "parent", None)
        return False

    def bind(self, op: str, operands, attrs: dict):
        if op == "random":
            raise UnsupportedOperation(
                "a random draw inside a loop body", hint="draw all the numbers the loop "
                "needs before it (one call with the full shape) and scan over them")
        return super().bind(op, operands, attrs)


def refuse_outer_write(x: Tracer) -> None:
    """A write into ``x`` from a loop body, where ``x`` (or the array it views) belongs to
    an enclosing trace, is refused: the body runs once per step but is traced once, so the
    write cannot become the outer array's next version (the outer Tracer would be rebound
    to a value of the body, which exists only inside it)."""
    trace = current()
    root = x if x._base is None else x._base
    if isinstance(trace, BodyTrace) and (x._trace is not trace or root._trace is not trace):
        raise LoopError(
            "a loop body writes in place into an array from outside the loop",
            hint="carry the array instead (in the carry, return the written copy: "
            "w = w.copy(); w[0] = v; return w, ...), or write into it after the loop")


def trace_body(fn: Callable, in_types: Sequence[TensorType], name: str,
               in_names: Sequence[str] | None = None) -> tuple[Graph, list[Value], list, Any]:
    """Trace ``fn(*leaves)`` with one fresh value per type in ``in_types``. Returns the
    body graph (inputs: the captured values first, then the given ones), the enclosing
    trace's values for the captures, the output leaves' Tracers and the output tree."""
    body = BodyTrace(name, current())
    with tracing(body):
        leaves = [body.new_input(t, in_names[i] if in_names else f"{name}{i}")
                  for i, t in enumerate(in_types)]
        result = fn(*leaves)
        out_leaves, out_tree = pytree.flatten(result)
        outs = []
        for leaf in out_leaves:
            if not isinstance(leaf, (Tracer, bool, int, float, complex, np.generic, np.ndarray)):
                raise LoopError(f"a loop body returned a {type(leaf).__name__}; bodies return "
                                "arrays, scalars, or tuples/lists/dicts of them")
            outs.append(body.lift(leaf))
        graph = Graph(body._capture_inputs + body.inputs, body.nodes, outs, name)
    return graph, body.captures, outs, out_tree


def _lift_leaves(tree) -> tuple[list[Value], Any]:
    trace = current()
    leaves, treedef = pytree.flatten(tree)
    return [trace.lift(x) for x in leaves], treedef


def _fit_carry(leaves: list, types: list[TensorType]) -> list:
    """A body's carry leaves, a weakly typed one (a Python scalar) made the strong type
    the loop carries there where NumPy's promotion keeps that type (``c = 0`` for a
    float32 carry; not ``c = 0.5`` for an int32 one, which the type check then reports)."""
    out = []
    for leaf, t in zip(leaves, types, strict=True):
        if isinstance(leaf, Tracer):
            weak, kind = leaf.aval.weak, leaf.aval.dtype.kind
        else:
            weak, kind = type(leaf) in (int, float, complex), np.asarray(leaf).dtype.kind
        if weak and not t.weak and np.shape(leaf) == t.shape and \
                np.result_type({"i": 0, "f": 0.0, "c": 0j}[kind], t.dtype) == t.dtype:
            leaf = current().bind("convert", (leaf,), {"dtype": t.dtype})
        out.append(leaf)
    return out


def _trace_carried(fn: Callable, carry_types: list[TensorType], more: list[TensorType],
                   paths: list[str], what: str) -> tuple[Graph, list[Value], list[TensorType]]:
    """Trace a body whose first outputs are the next carry; a Python scalar in the
    initial carry takes the type the body gives it (the body is traced again, until the
    types settle), as in JAX and as a NumPy loop's values do after its first steps.
    Returns the graph, its captures and the carry's types."""
    # A weak leaf only becomes strong or of a higher kind (int, float, complex), so the
    # retracing ends; each round settles at least one leaf, as a NumPy loop's steps do.
    for _ in range(3 * len(carry_types) + 1):
        graph, captures, _, _ = trace_body(lambda *xs, ts=carry_types: fn(ts, *xs),
                                           carry_types + more, "body")
        after = [v.type for v in graph.outputs[:len(carry_types)]]
        if after == carry_types:
            return graph, captures, carry_types
        wrong = [(p, b, a) for p, b, a in zip(paths, carry_types, after, strict=True)
                 if b != a and not (b.weak and b.shape == a.shape)]
        if wrong:
            path, b, a = wrong[0]
            raise LoopError(f"{what}: the carry changes type between iterations: {path} is "
                            f"{b} before a step and {a} after it",
                            hint="make the body return each carry leaf with the shape and "
                            "dtype it received (convert with .astype, or start from an "
                            "initial value of the right dtype)")
        carry_types = after
    raise AssertionError("a weakly typed carry did not settle")


def scan(f: Callable, init, xs, length: int | None = None, reverse: bool = False,
         truncate: int = -1, what: str = "lax.scan") -> tuple[Any, Any]:
    """``(carry, ys)`` of ``f(carry, x) -> (carry, y)`` over the first axis of ``xs``, as
    ``jax.lax.scan``, recorded as one ``scan`` node in the current trace."""
    trace = current()
    init_vals, init_tree = _lift_leaves(init)
    xs_vals, xs_tree = _lift_leaves(xs)
    lengths = {v.type.shape[0] for v in xs_vals if v.type.ndim}
    if any(v.type.ndim == 0 for v in xs_vals):
        raise LoopError(f"{what}: a scanned input is a scalar; xs needs a leading axis to "
                        "scan over")
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
            raise LoopError(f"{what}: length={length!r}; it must be a Python int >= 0")
        lengths.add(int(length))
    if len(lengths) != 1:
        raise LoopError(f"{what}: " + ("the scanned inputs have different lengths "
                        f"{sorted(lengths)}" if lengths else "nothing to scan over"),
                        hint="give xs of one length along the first axis, or length=n")
    (n,) = lengths
    nk = len(init_vals)
    carry_types = [v.type for v in init_vals]
    x_types = [TensorType(v.type.shape[1:], v.type.dtype) for v in xs_vals]
    paths = pytree.leaf_exprs(init_tree, "carry")

    y_trees: list = []

    def body(types, *leaves):
        out = f(pytree.unflatten(init_tree, leaves[:nk]), pytree.unflatten(xs_tree, leaves[nk:]))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise LoopError(f"{what}: the body must return a pair (carry, y), got "
                            f"{type(out).__name__}")
        carry_leaves, carry_tree = pytree.flatten(out[0])
        if carry_tree != init_tree:
            raise LoopError(f"{what}: the body returns a carry of another structure than "
                            f"the initial one ({len(carry_leaves)} leaves, {nk} given)",
                            hint="return the carry in the same tuple/list/dict structure")
        y_leaves, y_tree = pytree.flatten(out[1])
        y_trees.append(y_tree)
        return _fit_carry(carry_leaves, types) + y_leaves

    graph, captures, carry_types = _trace_carried(body, carry_types, x_types, paths, what)
    init_vals = [v if v.type == t else _convert(trace, v, t)
                 for v, t in zip(init_vals, carry_types, strict=True)]
    loop = Scan(graph, len(captures), nk, n, bool(reverse), int(truncate))
    results = _bind_loop(trace, "scan", [*captures, *init_vals, *xs_vals], loop,
                         loop.result_types())
    return (pytree.unflatten(init_tree, results[:nk]),
            pytree.unflatten(y_trees[-1], results[nk:]))


def while_loop(cond: Callable, body: Callable, init, what: str = "lax.while_loop"):
    """The final carry of ``while cond(carry): carry = body(carry)``, as
    ``jax.lax.while_loop``, recorded as one ``while_loop`` node."""
    trace = current()
    init_vals, tree = _lift_leaves(init)
    types = [v.type for v in init_vals]
    paths = pytree.leaf_exprs(tree, "carry")

    def cond_fn(*leaves):
        return cond(pytree.unflatten(tree, leaves))

    def body_fn(carry_types, *leaves):
        out, out_tree = pytree.flatten(body(pytree.unflatten(tree, leaves)))
        if out_tree != tree:
            raise LoopError(f"{what}: the body returns a carry of another structure than "
                            "the initial one", hint="return the carry in the same "
                            "tuple/list/dict structure")
        return _fit_carry(out, carry_types)

    bgraph, bcaps, types = _trace_carried(body_fn, types, [], paths, what)
    cgraph, ccaps, couts, _ = trace_body(cond_fn, types, "cond")
    if len(couts) != 1 or cgraph.outputs[0].type.shape != ():
        raise LoopError(f"{what}: the condition must return one boolean scalar, got "
                        f"{[str(v.type) for v in cgraph.outputs]}")
    if cgraph.outputs[0].type.dtype != np.dtype(bool):
        raise LoopError(f"{what}: the condition returns {cgraph.outputs[0].type}, not a "
                        "boolean scalar", hint="compare, e.g. return i < n")
    consts = ccaps + [v for v in bcaps if v not in ccaps]
    cgraph = _with_consts(cgraph, ccaps, consts)
    bgraph = _with_consts(bgraph, bcaps, consts)
    init_vals = [v if v.type == t else _convert(trace, v, t)
                 for v, t in zip(init_vals, types, strict=True)]
    loop = While(cgraph, bgraph, len(consts))
    results = _bind_loop(trace, "while_loop", [*consts, *init_vals], loop,
                         loop.result_types())
    return pytree.unflatten(tree, results)


def _with_consts(graph: Graph, own: list[Value], consts: list[Value]) -> Graph:
    """``graph`` (its first inputs standing for ``own``) taking all of ``consts`` first."""
    mine = dict(zip(own, graph.inputs[:len(own)], strict=True))
    inputs = [mine.get(v) or Value(v.type, "unused") for v in consts]
    return Graph(inputs + graph.inputs[len(own):], graph.nodes, graph.outputs, graph.name)


def _convert(trace: Trace, v: Value, t: TensorType) -> Value:
    x = trace.bind("convert", (Tracer(v, trace),), {"dtype": t.dtype})
    return x._value


def _bind_loop(trace: Trace, op: str, inputs: list[Value], loop, types: list[TensorType]):
    results = trace.bind(op, tuple(Tracer(v, trace) for v in inputs), {"loop": loop})
    # No known value: running the loop while tracing (for a Python ``if`` on its result)
    # would cost its whole trip count at every trace, and the tuple is no array.
    results._const = None
    outs = []
    for i, t in enumerate(types):
        out = trace.bind("loop_output", (results,), {"index": i, "type": t})
        out._scalar = t.ndim == 0 and not t.weak
        outs.append(out)
    return outs


def check_no_trace(what: str) -> None:
    """Loops record into a trace; called outside one they run through ``jit``."""
    try:
        current()
    except TracingError:
        raise TracingError(f"{what} called outside a trace") from None


def inline(graph: Graph, args: list[Value]) -> list[Value]:
    """Copy ``graph``'s nodes into the current trace, its inputs bound to ``args``; returns
    the values of its outputs (autodiff re-runs a loop body this way)."""
    return _replay(graph, args, current().nodes.append)


def _replay(graph: Graph, args: list[Value], emit: Callable[[Node], None]) -> list[Value]:
    """Emit a copy of each of ``graph``'s nodes, its inputs bound to ``args``. An arg may be
    strong where the graph's input was weak (a Python scalar carry, stored per step as an
    array): what depends on it is retyped by the ops' rules, nested loop bodies too."""
    env = dict(zip(graph.inputs, args, strict=True))
    retyped: dict[Value, Any] = {}  # a nested loop's value: its loop, retyped
    for n in graph.nodes:
        inputs = tuple(env[v] for v in n.inputs)
        attrs, t = n.attrs, n.out.type
        if n.op == "loop_output" and inputs[0] in retyped:
            attrs = {**attrs, "type": retyped[inputs[0]].result_types()[attrs["index"]]}
            t = attrs["type"]
        elif any(a.type != v.type for a, v in zip(inputs, n.inputs, strict=True)):
            if isinstance(attrs.get("loop"), (Scan, While)):
                loop, inputs = _retyped_loop(attrs["loop"], inputs, emit, n.loc)
                attrs = {**attrs, "loop": loop}
            t = REGISTRY[n.op].rule(*(a.type for a in inputs), **attrs)
        out = Value(t)
        if attrs is not n.attrs and "loop" in attrs:
            retyped[out] = attrs["loop"]
        emit(type(n)(n.op, inputs, attrs, out, n.loc))
        env[n.out] = out
    return [env[v] for v in graph.outputs]


def _retyped(graph: Graph, types: list[TensorType]) -> Graph:
    inputs = [Value(t, v.name) for v, t in zip(graph.inputs, types, strict=True)]
    nodes: list[Node] = []
    outputs = _replay(graph, inputs, nodes.append)
    return Graph(inputs, nodes, outputs, graph.name)


def _retyped_loop(loop, inputs: tuple[Value, ...], emit: Callable[[Node], None], loc):
    """``loop`` for a node reading ``inputs``, its bodies retyped, and those inputs. A
    carry a retyped body makes strong is made strong from the start (a ``convert`` of
    its initial value), until the carry's types settle, as ``_trace_carried`` does."""
    types = [a.type for a in inputs]
    first = loop.n_consts
    while True:
        if isinstance(loop, While):
            new = dataclasses.replace(loop, cond=_retyped(loop.cond, types),
                                      body=_retyped(loop.body, types))
            n_carry = len(types) - first
        else:
            c = loop.n_consts + loop.n_carry
            sliced = [TensorType(t.shape[1:], t.dtype, t.weak) for t in types[c:]]
            new = dataclasses.replace(loop, body=_retyped(loop.body, types[:c] + sliced))
            n_carry = loop.n_carry
        after = [v.type for v in new.body.outputs[:n_carry]]
        if after == types[first:first + n_carry]:
            break
        types = types[:first] + after + types[first + n_carry:]
    fitted = []
    for a, t in zip(inputs, types, strict=True):
        if a.type != t:
            node = Node("convert", (a,), {"dtype": t.dtype}, Value(t), loc)
            emit(node)
            a = node.out
        fitted.append(a)
    return new, tuple(fitted)
