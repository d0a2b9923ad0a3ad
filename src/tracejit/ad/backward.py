"""Reverse-mode autodiff inside the trace being recorded.

Why in the trace and not as a ``Graph -> Graph`` pass: the function is traced once, then
the nodes it appended are walked in reverse from its output and each node's VJP rule
(``ad/rules.py``) emits the backward nodes into the same trace with ``bind``. So the
gradient is one graph with the forward pass (fused and compiled like any other); a
function closing over values of an enclosing trace differentiates with them as
constants; and a gradient of a gradient simply walks the nodes the first walk emitted,
with no nested-graph machinery.
"""

from __future__ import annotations

from ..errors import IRError, UnsupportedOperation
from ..ir import TensorType, Value
from ..passes.roll import for_gradient
from ..trace.core import Trace, bind
from ..trace.tracer import Tracer
from .complex_rules import COMPLEX_RULES
from .loop_rules import loop_vjp
from .rules import NON_DIFFERENTIABLE, VJP, ZERO_GRADIENT

_DIFFERENTIABLE_KINDS = "fc"
LOOPS = frozenset({"scan", "while_loop"})  # ops with a body graph (ir/loop_ops.py)
# Ops differentiated by the reverse walk itself rather than by a VJP rule: a loop's
# results are one value, their cotangents gathered per ``loop_output`` index first. A
# while_loop's gradient raises UnsupportedOperation (loop_rules.py).
WALK_RULES = frozenset({"scan", "loop_output"})


def sum_to(g: Tracer, shape: tuple[int, ...]) -> Tracer:
    """Sum a cotangent over the axes broadcasting added, back to ``shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead < 0:
        raise IRError(f"cotangent of shape {g.shape} for a value of shape {shape}")
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    if axes:
        g = bind("sum", g, axis=axes, keepdims=False, dtype=None)
    return g if g.shape == shape else bind("reshape", g, shape=shape)


def fit(g: Tracer, t: TensorType) -> Tracer:
    """The cotangent of a value of type ``t``: its shape, and its dtype (a cast's gradient
    is cast back)."""
    g = sum_to(g, t.shape)
    if g.dtype.kind == "c" and t.dtype.kind != "c":  # a real value's: the real part
        g = bind("real", g)
    return g if g.dtype == t.dtype else bind("convert", g, dtype=t.dtype)


def zeros(t: TensorType) -> Tracer:
    return bind("full", shape=t.shape, dtype=t.dtype, value=0)


def _active(nodes, wrt: list[Value]) -> set[Value]:
    """The values that depend on ``wrt`` through differentiable ops (float or complex)."""
    active = set(wrt)
    for n in nodes:
        if n.op in LOOPS:  # its results are one value: active if any input is
            if any(v in active for v in n.inputs):
                active.add(n.out)
            continue
        if n.op == "sign" and any(v in active and v.type.dtype.kind == "c" for v in n.inputs):
            raise UnsupportedOperation("gradients through np.sign of a complex value "
                                       "(z / |z|, not piecewise constant) are not supported",
                                       hint="write z / np.abs(z)", location=n.loc)
        if (n.op in NON_DIFFERENTIABLE or n.op in ZERO_GRADIENT
                or n.out.type.dtype.kind not in _DIFFERENTIABLE_KINDS):
            continue
        if any(v in active for v in n.inputs):
            active.add(n.out)
    return active


def backward(trace: Trace, start: int, end: int, seeds: list[tuple[Value, Tracer]],
             wrt: list[Value]) -> list[Tracer]:
    """Cotangents of ``wrt`` given ``seeds`` (output value, its cotangent), through the
    nodes ``trace.nodes[start:end]``. Values in ``wrt`` must not be defined by those nodes
    (the caller gives each its own identity node first). Emits the backward nodes into
    ``trace``, each located at the line of the forward node it differentiates."""
    nodes = for_gradient(trace, trace.nodes[start:end], [v for v, _ in seeds])
    active = _active(nodes, wrt)
    cts: dict[Value, Tracer] = {}
    loop_cts: dict[Value, dict[int, Tracer]] = {}  # a loop's results: per result index

    def accumulate(v: Value, g: Tracer) -> None:
        g = fit(g, v.type)
        old = cts.get(v)
        cts[v] = g if old is None else bind("add", old, g)

    for v, g in seeds:
        if v in active:
            accumulate(v, g)
    for n in reversed(nodes):
        if n.op in LOOPS:
            per_result = loop_cts.pop(n.out, None)
            if per_result is not None:
                mark = len(trace.nodes)
                grads = loop_vjp(trace, n, per_result, backward, _active,
                                 [v in active for v in n.inputs])
                for v, gi in zip(n.inputs, grads, strict=True):
                    if gi is not None and v in active:
                        accumulate(v, gi)
                for emitted in trace.nodes[mark:]:
                    emitted.loc = emitted.loc or n.loc
            continue
        g = cts.pop(n.out, None)
        if g is None:
            continue
        if n.op == "loop_output":
            found = loop_cts.setdefault(n.inputs[0], {})
            i = n.attrs["index"]
            found[i] = g if i not in found else bind("add", found[i], g)
            continue
        if n.op not in COMPLEX_RULES and any(v.type.dtype.kind == "c"
                                             for v in (n.out, *n.inputs)):
            raise UnsupportedOperation(
                f"gradients through {n.op} of complex values ({n.out.type}) are not "
                "supported", hint="differentiate through the real and imaginary parts "
                "(np.real, np.imag) or np.abs", location=n.loc)
        rule = VJP.get(n.op)
        if rule is None:
            raise UnsupportedOperation(f"no gradient rule for the op {n.op!r}", location=n.loc)
        mark = len(trace.nodes)
        ins = [Tracer(v, trace) for v in n.inputs]
        grads = rule(g, Tracer(n.out, trace), *ins, **n.attrs)
        for v, gi in zip(n.inputs, grads, strict=True):
            if gi is not None and v in active:
                accumulate(v, gi)
        for emitted in trace.nodes[mark:]:
            emitted.loc = n.loc
    return [cts[v] if v in cts else zeros(v.type) for v in wrt]
