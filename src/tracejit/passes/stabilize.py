"""Stability rewrites: naive float formulas replaced by ones that do not overflow or lose
their small results, in the spirit of Theano's ``stabilize`` optimisations.

==================================  ================================================
pattern (float, matched on the IR)  replacement
==================================  ================================================
``log(1 + x)``, ``log(x + 1)``      ``log1p(x)``
``log(1 - x)``                      ``log1p(-x)``
``exp(x) - 1``, ``exp(x) + -1``     ``expm1(x)``
``log(1 + exp(x))``, ``log1p(exp(x))``  ``logaddexp(0, x)`` (softplus)
``1 / (1 + exp(-x))``               ``where(x >= 0, 1/(1+z), z/(1+z))``, ``z = exp(-|x|)``
``log(1 / (1 + exp(z)))``           ``-logaddexp(0, z)`` (log of a sigmoid)
``log(e / sum(e))``, ``e = exp(d)``,  ``d - log(sum(e))``
``d = x - max(x)`` (log softmax)
``log(exp(x) / sum(exp(x)))``       ``d - log(sum(exp(d)))``, ``d = x - max(x)``
``log(sum(exp(x)))``                ``log(sum(exp(x - m))) + m``, ``m = max(x)``
==================================  ================================================

Reductions keep their axes, ``keepdims`` and ``dtype``; a softmax's max and sum must reduce
the same axes (the divisor may be a keepdims sum or a reshaped one). ``m`` is the max with
non-finite values taken as 0, as SciPy's ``logsumexp`` does, so a row of -inf still gives
-inf and an inf or NaN still gives inf or NaN, as the naive form does. A stable softmax
(``x - max(x)``, with or without that guard) is recognised, and its sum of exps is not
rewritten again.

Accuracy: every replacement is exact where the naive form overflows, underflows or cancels
(``log(sum(exp(x)))`` for x near 1000 gives 1000 + log(n), not inf; ``log(1 + 1e-10)`` keeps
its digits), and elsewhere agrees with it to a few ULP. So results differ from NumPy's own
evaluation of the naive formula by design: slightly where that one is accurate (a signed zero
may change: ``log1p(-0.0)`` is -0.0), greatly where it is not.

A rewrite never changes a value other nodes read: it adds new nodes that define the matched
node's own output (same type, checked), and the intermediates stay for their other users
(DCE drops them otherwise). Patterns are matched on the nodes as traced, so rewrites of
inner nodes do not hide outer patterns. Only float (not complex) results of this exact type
are rewritten; anything else is left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import TracejitError
from ..ir import Graph, Node, Value
from ..ir.registry import REGISTRY
from ..ir.types import type_of_constant
from .dce import dce

Producer = Callable[[Value], Node | None]


def stabilize(graph: Graph) -> Graph:
    nodes = stabilize_nodes(graph.nodes)
    return graph if nodes is graph.nodes else dce(graph.replace(nodes=nodes))


def stabilize_nodes(nodes: list[Node]) -> list[Node]:
    """The rewrites on a node list in topological order (``nodes`` itself if none fires).
    Every value keeps its definition, so a caller may splice the result into a trace, e.g.
    to differentiate the stable form; unused originals are left for DCE."""
    traced = {n.out: n for n in nodes}  # matching looks at the nodes as traced
    out, changed = [], False
    for node in nodes:
        new = None
        if node.out.type.dtype.kind == "f" and node.op in STABLE_FORMS:
            try:
                new = STABLE_FORMS[node.op](node, traced.get)
            except TracejitError:  # a rule rejected a replacement node: keep the original
                new = None
        out.extend(new or [node])
        changed = changed or bool(new)
    return out if changed else nodes


class _Builder:
    """New nodes at ``like``'s source line; ``finish(v)`` makes ``v``'s node define
    ``like.out`` if the types agree exactly."""

    def __init__(self, like: Node):
        self.like = like
        self.nodes: list[Node] = []

    def __call__(self, op: str, *inputs: Value, **attrs) -> Value:
        t = REGISTRY[op].rule(*(v.type for v in inputs), **attrs)
        self.nodes.append(Node(op, inputs, attrs, Value(t), self.like.loc))
        return self.nodes[-1].out

    def const(self, value: float) -> Value:
        """A weakly typed Python float: takes the other operand's dtype."""
        self.nodes.append(Node("constant", (), {"value": value}, Value(type_of_constant(value)),
                               self.like.loc))
        return self.nodes[-1].out

    def finish(self, v: Value) -> list[Node] | None:
        last = self.nodes[-1]
        if last.out is not v or v.type != self.like.out.type:
            return None
        self.nodes[-1] = Node(last.op, last.inputs, last.attrs, self.like.out, last.loc)
        return self.nodes


# ---------------------------------------------------------------- matching


def _node(v: Value, producer: Producer, *ops: str) -> Node | None:
    n = producer(v)
    return n if n is not None and n.op in ops else None


def _is_const(v: Value, producer: Producer, target: float, dtype: np.dtype) -> bool:
    """``v`` is a constant equal to ``target`` in the loop dtype (the op's output dtype)."""
    n = _node(v, producer, "constant")
    if n is None:
        return False
    with np.errstate(all="ignore"):
        c = np.asarray(n.attrs["value"]).astype(dtype)
    return c.size > 0 and bool(np.all(c == target))


def _plus_const(v: Value, producer: Producer, target: float) -> Value | None:
    """x for ``v = target + x`` or ``x + target``."""
    n = _node(v, producer, "add")
    if n is None:
        return None
    for i in (0, 1):
        if _is_const(n.inputs[i], producer, target, n.out.type.dtype):
            return n.inputs[1 - i]
    return None


def _exp_arg(v: Value, producer: Producer) -> Value | None:
    n = _node(v, producer, "exp")
    return n.inputs[0] if n else None


def _floats(*values: Value) -> bool:
    return all(v.type.dtype.kind == "f" for v in values)


def _keepdims_shape(x: Value, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if d in axes else s for d, s in enumerate(x.type.shape))


def _reduction(v: Value, producer: Producer, op: str) -> Node | None:
    """The ``op`` reduction behind ``v``: reduced with keepdims, or without and then
    reshaped to the keepdims shape."""
    n = _node(v, producer, op, "reshape")
    if n is not None and n.op == "reshape":
        inner = _node(n.inputs[0], producer, op)
        if inner is None or tuple(n.attrs["shape"]) != _keepdims_shape(inner.inputs[0],
                                                                         inner.attrs["axis"]):
            return None
        return inner
    return n if n is not None and n.attrs["keepdims"] else None


def _row_max(m: Value, x: Value, axes, producer: Producer) -> bool:
    """``m`` is max(x) over ``axes`` in the keepdims shape, maybe as
    ``where(isfinite(max), max, 0)``, maybe under ``stop_gradient``."""
    sg = _node(m, producer, "stop_gradient")
    m = sg.inputs[0] if sg is not None else m
    w = _node(m, producer, "where")
    if w is not None:
        fin = _node(w.inputs[0], producer, "isfinite")
        if fin is None or fin.inputs[0] is not w.inputs[1]:
            return False
        if not _is_const(w.inputs[2], producer, 0, w.out.type.dtype):
            return False
        m = w.inputs[1]
    r = _reduction(m, producer, "max")
    return r is not None and r.inputs[0] is x and tuple(r.attrs["axis"]) == tuple(axes)


def _is_shifted(d: Value, axes, producer: Producer) -> bool:
    """``d = x - max(x)`` over ``axes``: every exp(d) <= 1 and the largest is 1."""
    n = _node(d, producer, "subtract")
    return n is not None and _row_max(n.inputs[1], n.inputs[0], axes, producer)


def _sum_of_exp(s: Value, producer: Producer) -> tuple[Node, Value] | None:
    """(the sum node, d) for ``s = sum(exp(d))``."""
    n = _node(s, producer, "sum")
    d = _exp_arg(n.inputs[0], producer) if n is not None else None
    return (n, d) if d is not None else None


# ---------------------------------------------------------------- rules


def _guarded_max(b: _Builder, x: Value, axes) -> Value:
    """``max(x)`` over ``axes`` with keepdims, non-finite maxima taken as 0."""
    m = b("max", x, axis=tuple(axes), keepdims=True)
    # no gradient through the shift: the result does not depend on it (as in JAX)
    return b("stop_gradient", b("where", b("isfinite", m), m, b.const(0.0)))


def _softplus(node: Node, z: Value) -> list[Node] | None:
    b = _Builder(node)
    return b.finish(b("logaddexp", b.const(0.0), z))


def _log_softmax(node: Node, ratio: Node, producer: Producer) -> list[Node] | None:
    """``log(e / s)``, ``s = sum(e)`` over axes A with keepdims, ``e = exp(d)``."""
    e, s = ratio.inputs
    d = _exp_arg(e, producer)
    r = _reduction(s, producer, "sum")
    if d is None or r is None or _exp_arg(r.inputs[0], producer) is not d:
        return None
    axes = tuple(r.attrs["axis"])
    if s.type.shape != _keepdims_shape(d, axes) or not _floats(d, s):
        return None
    b = _Builder(node)
    if _is_shifted(d, axes, producer):  # a stable softmax: reuse its values
        return b.finish(b("subtract", d, b("log", s)))
    d = b("subtract", d, _guarded_max(b, d, axes))
    total = b("sum", b("exp", d), axis=axes, keepdims=True, dtype=r.attrs["dtype"])
    return b.finish(b("subtract", d, b("log", total)))


def _logsumexp(node: Node, r: Node, x: Value, producer: Producer) -> list[Node] | None:
    axes = tuple(r.attrs["axis"])
    if not _floats(x, r.out) or _is_shifted(x, axes, producer):
        return None  # already stable: the sum is at least 1
    b = _Builder(node)
    m = _guarded_max(b, x, axes)
    s = b("sum", b("exp", b("subtract", x, m)), axis=axes, keepdims=r.attrs["keepdims"],
          dtype=r.attrs["dtype"])
    if m.type.shape != s.type.shape:
        m = b("reshape", m, shape=s.type.shape)
    return b.finish(b("add", b("log", s), m))


def _log(node: Node, producer: Producer) -> list[Node] | None:
    (v,) = node.inputs
    inner = producer(v)
    if inner is None:
        return None
    if inner.op == "add":
        x = _plus_const(v, producer, 1)
        z = _exp_arg(x, producer) if x is not None else None
        if z is not None:
            return _softplus(node, z)
        if x is None or not _floats(x):  # 1 + an integer may wrap around
            return None
        b = _Builder(node)
        return b.finish(b("log1p", x))
    if (inner.op == "subtract" and _floats(inner.inputs[1])
            and _is_const(inner.inputs[0], producer, 1, inner.out.type.dtype)):
        b = _Builder(node)
        return b.finish(b("log1p", b("negative", inner.inputs[1])))
    if inner.op == "true_divide" and _is_const(inner.inputs[0], producer, 1,
                                               inner.out.type.dtype):
        x = _plus_const(inner.inputs[1], producer, 1)
        z = _exp_arg(x, producer) if x is not None else None
        if z is not None:  # log of a sigmoid: log(1 / (1 + exp(z))) = -softplus(z)
            b = _Builder(node)
            return b.finish(b("negative", b("logaddexp", b.const(0.0), z)))
    if inner.op == "true_divide":
        return _log_softmax(node, inner, producer)
    found = _sum_of_exp(v, producer)
    if found is not None:
        return _logsumexp(node, found[0], found[1], producer)
    return None


def _log1p(node: Node, producer: Producer) -> list[Node] | None:
    z = _exp_arg(node.inputs[0], producer)
    neg = _node(z, producer, "negative") if z is not None else None
    if neg is not None and _node(neg.inputs[0], producer, "absolute"):
        return None  # log1p(exp(-|x|)) cannot overflow: already the stable form
    return _softplus(node, z) if z is not None else None


def _expm1(node: Node, producer: Producer) -> list[Node] | None:
    """``exp(x) - 1``, ``exp(x) + -1``, ``-1 + exp(x)``."""
    a, c = node.inputs
    dtype = node.out.type.dtype
    if node.op == "add" and _exp_arg(a, producer) is None:
        a, c = c, a
    target = 1 if node.op == "subtract" else -1
    x = _exp_arg(a, producer)
    if x is None or not _is_const(c, producer, target, dtype):
        return None
    b = _Builder(node)
    return b.finish(b("expm1", x))


def _sigmoid(node: Node, producer: Producer) -> list[Node] | None:
    """``1 / (1 + exp(-x))``."""
    one, den = node.inputs
    if not _is_const(one, producer, 1, node.out.type.dtype):
        return None
    neg = _plus_const(den, producer, 1)
    neg = _exp_arg(neg, producer) if neg is not None else None
    n = _node(neg, producer, "negative") if neg is not None else None
    if n is None or not _floats(n.inputs[0]) or _node(n.inputs[0], producer, "absolute"):
        return None  # exp(-|x|) cannot overflow: already the stable form
    x = n.inputs[0]
    b = _Builder(node)
    # exp(-|x|) as exp(where(x >= 0, -x, x)): the same value, and differentiable at 0
    # (abs has derivative 0 there, which would make the sigmoid's gradient 0, not 1/4)
    nonneg = b("greater_equal", x, b.const(0.0))
    z = b("exp", b("where", nonneg, b("negative", x), x))
    one = b.const(1.0)
    d = b("add", one, z)
    return b.finish(b("where", nonneg, b("true_divide", one, d), b("true_divide", z, d)))


STABLE_FORMS: dict[str, Callable[[Node, Producer], list[Node] | None]] = {
    "log": _log,
    "log1p": _log1p,
    "subtract": _expm1,
    "add": _expm1,
    "true_divide": _sigmoid,
}
