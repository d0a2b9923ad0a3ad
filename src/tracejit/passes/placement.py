"""Placement: the device that computes each node, and explicit transfers between devices.

The target is the device the call asked for (a ``tj.device`` block, ``jit(device=...)``).
Every node runs there when the target's backend can compute it (``supported(node)``, which
the caller takes from the backend: a pass never imports one). Any other node falls back to
the CPU: with ``strict`` that raises :class:`~tracejit.errors.PlacementError` (Theano's
``assert_no_cpu_op``), else one :class:`~tracejit.errors.PlacementWarning` per compiled
signature names the ops and their lines.

A value used on another device than the one holding it goes through a ``transfer`` node,
one per (value, device), so every copy shows in the optimised IR and in the profiler.
A node with an effect (a random draw) runs on the CPU by design, not as a fallback: it
calls the host's generator (NumPy's numbers; CuPy's generators give others), with no
warning and also under ``strict``. Outputs are moved to the target. Host scalars (Python
numbers, NumPy 0-d values) live nowhere in particular: kernels take them by value, so
they never need a transfer.

A loop (``scan``, ``while_loop``) runs on the target when the backend supports the loop
and every node of its bodies, recursively (the backend compiles the bodies itself, as
graphs whose inputs all live on the target); otherwise the whole loop runs on the CPU,
and the warning names the op inside the body that kept it there (tracing refuses effects
inside bodies). ``loop_output`` nodes live where their loop runs: a loop's tuple value
never moves between devices.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import PlacementError, PlacementWarning
from ..ir import Graph, Node, Value
from ..ir.loop_ops import bodies
from ..ir.registry import REGISTRY, Kind, has_effect
from ..locations import user_location
from .fusion import LOOP_REDUCTIONS


@dataclass(frozen=True)
class Placement:
    """Where a graph's values live: ``devices`` maps each value to a device (a
    ``targets.Device``); a value it lacks is a host scalar."""

    target: object
    devices: dict[Value, object]

    def where(self, v: Value) -> str | None:
        dev = self.devices.get(v)
        return None if dev is None else str(dev)

    def on_target(self, v: Value) -> bool:
        return self.devices.get(v, self.target) == self.target


def place(graph: Graph, target, input_devices: list, supported: Callable[[Node], bool],
          cpu, strict: bool = False) -> Graph:
    """``graph`` with a :class:`Placement` and the transfer nodes it needs.

    ``input_devices[i]`` is where graph input ``i`` lives (None for a host scalar);
    ``cpu`` is the device that computes what the target cannot."""
    devices: dict[Value, object] = {v: d for v, d in zip(graph.inputs, input_devices,
                                                         strict=True) if d is not None}
    effects = {n for n in graph.nodes if has_effect(n)}
    blocked = {n: _blockers(n, supported) for n in graph.nodes if n not in effects}
    fallbacks = [b for bs in blocked.values() for b in bs]  # named in errors and warnings
    if fallbacks and target != cpu and strict:
        raise PlacementError(
            f"{_describe(fallbacks)} cannot run on {target} (strict placement)",
            hint="rewrite the op with ones the GPU backend supports, or drop strict=True to "
            "let it run on the CPU with transfers around it",
            location=fallbacks[0].loc)
    on_cpu = {n for n, bs in blocked.items() if bs} | effects
    node_device = {n: (cpu if n in on_cpu else target) for n in graph.nodes}
    loop_device = {n.out: node_device[n] for n in graph.nodes if bodies(n)}
    for n in graph.nodes:  # a constant lives where its users run (the target if mixed)
        if n.op == "loop_output":
            node_device[n] = loop_device[n.inputs[0]]
        elif n.op == "constant":
            users = {node_device[u] for u in graph.nodes if n.out in u.inputs}
            node_device[n] = users.pop() if len(users) == 1 else target

    nodes: list[Node] = []
    moved: dict[tuple[Value, object], Value] = {}

    def on(v: Value, dev, user: Node | None) -> Value:
        """``v`` as ``user`` (on ``dev``) reads it: itself, or a transfer node's result. A
        host scalar needs a transfer only for a GPU op that is not a loop (a gather index)."""
        have = devices.get(v)
        if have is None and dev != cpu and user is not None and not _loop_op(user):
            have = cpu
        if have is None or have == dev:
            return v
        if (v, dev) not in moved:
            out = Value(v.type, None)
            nodes.append(Node("transfer", (v,), {"source": str(have), "device": str(dev)},
                              out, user.loc if user is not None else None))
            devices[out] = dev
            moved[v, dev] = out
        return moved[v, dev]

    for n in graph.nodes:
        dev = node_device[n]
        inputs = tuple(on(v, dev, n) for v in n.inputs)
        nodes.append(n if inputs == n.inputs else Node(n.op, inputs, n.attrs, n.out, n.loc))
        devices[n.out] = dev
    outputs = [on(v, target, None) for v in graph.outputs]
    placed = Graph(graph.inputs, nodes, outputs, graph.name,
                   Placement(target, devices))
    if fallbacks and target != cpu:  # attributed to the user's line, as errors are
        loc = fallbacks[0].loc or user_location()
        warnings.warn_explicit(
            f"{graph.name}: {_describe(fallbacks)} cannot run on {target} and will run on "
            "the CPU, with transfers around it (strict=True makes this an error)",
            PlacementWarning, loc.filename if loc else "<tracejit>", loc.lineno if loc else 0)
    return placed


def _blockers(n: Node, supported: Callable[[Node], bool]) -> list[Node]:
    """The nodes keeping ``n`` off the target: none, ``n`` itself, or for a loop the
    nodes of its bodies (recursively) that the target lacks."""
    if n.op in ("constant", "loop_output"):
        return []
    if not supported(n):
        return [n]
    return [b for _, body in bodies(n) for m in body.nodes for b in _blockers(m, supported)]


def _loop_op(node: Node) -> bool:
    """Whether a backend computes ``node`` in a loop kernel, which takes scalars by value."""
    return REGISTRY[node.op].kind is Kind.ELEMENTWISE or node.op in LOOP_REDUCTIONS


def _describe(nodes: list[Node]) -> str:
    """``ops sort (at f.py:3), uint8 add (at f.py:4)``: each op once, with its first line."""
    seen: dict[str, Node] = {}
    for n in nodes:
        seen.setdefault(_label(n), n)
    parts = [f"{label} (at {n.loc.short})" if n.loc else label for label, n in seen.items()]
    return ("op " if len(parts) == 1 else "ops ") + ", ".join(parts)


def _label(n: Node) -> str:
    """The op, with the dtypes that make it unsupported where the op itself is."""
    dtypes = sorted({v.type.dtype.name for v in (*n.inputs, n.out) if not v.type.weak})
    kind = REGISTRY[n.op].kind.value
    return f"{n.op} ({kind}, {'/'.join(dtypes)})"
