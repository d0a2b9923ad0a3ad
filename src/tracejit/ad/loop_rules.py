"""The gradient of a loop is a loop (``scan`` nodes; ``ir/loop_ops.py``).

The forward loop is run once more with each step's carry as an extra stacked result (the
residuals; the ``merge_scans`` pass makes it the same loop as the original, so the
forward work is done once), and a backward scan walks the steps in the opposite order:
each step re-runs the body from its stored carry and applies the body's VJP to the
cotangents of its results, handing the carry's cotangent to the step before and adding up
the cotangents of the consts. The backward loop is an ordinary ``scan`` of ordinary ops,
so it is fused, compiled and differentiated again (``grad(grad(...))``) like any other.

``truncate`` (Theano's ``truncate_gradient``) runs the backward loop over the last
``truncate`` steps only: earlier steps and the initial carry get no gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import UnsupportedOperation
from ..ir import Graph, Node, TensorType
from ..ir.loop_ops import Scan
from ..trace import loops
from ..trace.core import Trace, bind
from ..trace.tracer import Tracer


def _float(t: TensorType) -> bool:
    """Whether a cotangent flows through values of type ``t``: complex ones too, so that the
    body's reverse walk refuses them as everywhere else, rather than the loop dropping
    their gradient silently."""
    return t.dtype.kind in "fc"


def _zeros(t: TensorType) -> Tracer:
    return bind("full", shape=t.shape, dtype=t.dtype, value=0)


def loop_vjp(trace: Trace, node: Node, cts: dict[int, Tracer], backward: Callable,
             active: Callable, live: list[bool]) -> list[Tracer | None]:
    """Cotangents of ``node``'s inputs given those of its results (``cts[index]``);
    ``backward`` is the reverse walk (``ad/backward.py``), run over each step's body,
    ``active(nodes, wrt)`` its set of values depending on ``wrt``, and ``live[i]`` whether
    input ``i`` depends on what is differentiated (only those get cotangents)."""
    if node.op == "while_loop":
        raise UnsupportedOperation(
            "reverse-mode gradient of a while_loop (or a fori_loop with traced bounds): its "
            "trip count is known only when it runs", location=node.loc,
            hint="give fori_loop Python int bounds (it is then a differentiable scan), or "
            "use lax.scan with a fixed length")
    return _scan_vjp(trace, node, node.attrs["loop"], cts, backward,
                     _live_carries(node.attrs["loop"], live, active), live)


def _live_carries(loop: Scan, live: list[bool], active: Callable) -> list[bool]:
    """Which carries depend on what is differentiated: those whose initial value does, and
    those the body computes from live consts, slices or carries (to a fixed point)."""
    nc, nk, body = loop.n_consts, loop.n_carry, loop.body
    ins = [v for v, ok in zip(body.inputs, live, strict=True) if ok and _float(v.type)]
    carry = [live[nc + j] for j in range(nk)]
    while True:
        reached = active(body.nodes, ins + [body.inputs[nc + j] for j in range(nk) if carry[j]])
        more = [c or body.outputs[j] in reached for j, c in enumerate(carry)]
        if more == carry:
            return carry
        carry = more


def _scan_vjp(trace: Trace, node: Node, loop: Scan, cts: dict[int, Tracer],
              backward: Callable, live_carry: list[bool],
              live: list[bool]) -> list[Tracer | None]:
    nc, nk, length = loop.n_consts, loop.n_carry, loop.length
    body = loop.body
    ny = len(loop.y_types)
    consts, xs = node.inputs[:nc], node.inputs[nc + nk:]
    carry_types = [v.type for v in body.outputs[:nk]]
    kf = [j for j in range(nk) if _float(carry_types[j]) and live_carry[j]]
    cf = [i for i in range(nc) if _float(consts[i].type) and live[i]]
    xf = [i for i in range(len(xs)) if _float(xs[i].type) and live[nc + nk + i]]
    yf = [j for j in range(ny) if nk + j in cts]

    # the forward loop once more, also stacking the carry each step starts from
    res_body = Graph(body.inputs, body.nodes, body.outputs + body.inputs[nc:nc + nk],
                     body.name)
    res_loop = Scan(res_body, nc, nk, length, loop.reverse, loop.truncate)
    results = loops._bind_loop(trace, "scan", list(node.inputs), res_loop,
                               res_loop.result_types())
    carries = results[nk + ny:]

    steps = length if loop.truncate < 0 else min(loop.truncate, length)
    window = slice(0, steps) if loop.reverse else slice(length - steps, length)

    def cut(x: Tracer) -> Tracer:
        return x if steps == length else x[window]

    xs_t = [Tracer(v, trace) for v in xs]
    ct_final = [cts.get(j) if cts.get(j) is not None else _zeros(carry_types[j]) for j in kf]
    ct_acc = [_zeros(consts[i].type) for i in cf]
    scanned = ([cut(c) for c in carries], [cut(x) for x in xs_t],
               [cut(cts[nk + j]) for j in yf])
    outer_consts = [Tracer(v, trace) for v in consts]

    def step(carry, per_step):
        ct_carry, acc = carry
        carry_t, x_t, ct_y = per_step
        inner = loops.current()
        args = [inner.lift(c) for c in outer_consts]
        mark = len(inner.nodes)
        outs = loops.inline(body, args + [c._value for c in carry_t] + [x._value for x in x_t])
        seeds = [(outs[j], g) for j, g in zip(kf, ct_carry, strict=True)]
        seeds += [(outs[nk + j], g) for j, g in zip(yf, ct_y, strict=True)]
        wrt = ([args[i] for i in cf] + [carry_t[j]._value for j in kf]
               + [x_t[i]._value for i in xf])
        grads = backward(inner, mark, len(inner.nodes), seeds, wrt)
        g_consts, g_carry = grads[:len(cf)], grads[len(cf):len(cf) + len(kf)]
        g_xs = grads[len(cf) + len(kf):]
        return (g_carry, [bind("add", a, g) for a, g in zip(acc, g_consts, strict=True)]), g_xs

    (ct_init, ct_consts), ct_xs = loops.scan(step, (ct_final, ct_acc), scanned, length=steps,
                                             reverse=not loop.reverse, what="gradient of a scan")
    grads: list[Tracer | None] = [None] * len(node.inputs)
    for i, g in zip(cf, ct_consts, strict=True):
        grads[i] = g
    if steps == length:
        for j, g in zip(kf, ct_init, strict=True):
            grads[nc + j] = g
    for i, g in zip(xf, ct_xs, strict=True):
        if steps < length:
            pad = _zeros(TensorType((length - steps, *g.shape[1:]), g.dtype))
            g = np.concatenate([g, pad] if loop.reverse else [pad, g])
        grads[nc + nk + i] = g
    return grads
