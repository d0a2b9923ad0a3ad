"""Roll Python loops back up: a trace holding the same body k times in a row becomes one
``scan`` (``ir/loop_ops.py``) whose carry is what each copy hands the next.

A static ``for t in range(T):`` is traced into T copies of its body, and every later stage
(passes, fusion, code generation) pays for each copy. Copies are found without comparing
graphs pairwise: each node gets a signature hash (op, types, source line, attributes
without the values an index changes), a copy of a body is a stretch of the node list whose
signatures repeat at a fixed distance (the period), and each candidate stretch is then
checked exactly, copy by copy:

* every input of a copy is a value of the same copy, of the copy before (the carry; the
  first copy reads the carry's initial value from before the run instead), or one value
  defined before the run, the same for every copy (a const);
* attributes are equal, or differ as an affine function of the copy's index where an op
  can take that index as a traced value: an int64 ``constant`` (``x * i``), a float64
  scalar ``constant`` equal to the index times a float (``t * dt``, bit for bit), a
  ``slice`` whose start moves (``a[i]``; it becomes a ``gather``) and an ``update_slice``
  whose start moves (``a[i] = ...``; a ``scatter``). The index is then a carried counter;
* no node has an effect (random draws are never rolled: each draw is a call of its own);
* values of the run read after it are the last copy's carry (a copy whose values are read
  later ends the run; a last copy with such values stays unrolled).

Runs are rolled innermost (shortest period) first, exact ones before affine ones, and
again until nothing changes, so nested loops become nested scans. Fewer than
``roll_find.MIN_COPIES`` copies stay unrolled: the loop's per-step cost then outweighs what
rolling saves.
"""

from __future__ import annotations

import bisect
import contextvars
import logging
import weakref

import numpy as np

from ..config import config
from ..ir import Graph, Node, TensorType, Value
from ..ir.loop_ops import Scan, results_type
from ..ir.registry import REGISTRY
from ..ir.types import type_of_constant
from .roll_find import Checker, Plan, Scaled, float_like, graph_key, runs, skeleton

_log = logging.getLogger("tracejit")
_INT64 = np.dtype(np.int64)
# The step index: a Python int, as `i` is (so `x * i` keeps x's dtype); strong where the
# loop is a view for the gradient, whose residual scan stacks carries (and drops weakness).
_COUNTER = TensorType((), _INT64, weak=True)
_STRONG_COUNTER = TensorType((), _INT64)


# Whether what is traced and compiled now may get loops: not where the backend would
# run a scan on the CPU, with transfers around it, instead of itself.
_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar("roll_loops", default=True)
_PROBE = Node("scan", (), {"loop": Scan(Graph([], [], []), 0, 0, 1)}, Value(results_type(0)),
              None)


def for_backend(backend) -> contextvars.Token:
    """Roll loops in what this thread traces and compiles next only if ``backend`` runs
    a ``scan`` itself (``api.py`` sets this around each compile, then :func:`restore`)."""
    return _ALLOWED.set(backend.supports(_PROBE))


def restore(token: contextvars.Token) -> None:
    _ALLOWED.reset(token)


def _enabled() -> bool:
    return config.roll_loops and _ALLOWED.get()


def roll_loops(graph: Graph) -> Graph:
    """Roll repeated copies of a loop body into ``scan`` nodes (off when
    ``tracejit.config.roll_loops`` is false, or the backend runs no scan itself)."""
    if not _enabled():
        return graph
    return _roll(graph)


def for_gradient(trace, nodes: list[Node], seeds: list[Value]) -> list[Node]:
    """The nodes a reverse walk differentiates (``ad/backward.py``): ``nodes`` with each
    loop they hold as one ``scan``, so that the gradient of a Python loop is a reverse
    scan, not one backward copy per step. The trace itself keeps its nodes (the forward
    values come from them; the pipeline rolls them later): the scan and its
    ``loop_output`` nodes are a view, each ``loop_output`` standing for the last copy's
    value it replaces, and only a loop's step counter is added to ``trace``."""
    if not _enabled():
        return nodes
    views = _VIEWS.setdefault(trace, {})  # a Jacobian walks the same nodes once per row
    key = (id(nodes[0]) if nodes else None, len(nodes), tuple(seeds))
    if key not in views:
        views[key] = _view(trace, nodes, seeds)
    return views[key]


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> views made


def _view(trace, nodes: list[Node], seeds: list[Value]) -> list[Node]:
    made: list[Value] = []

    def counter() -> Value:  # one for every loop: copies of an outer loop share it
        if not made:
            made.append(trace._emit("constant", (), {"value": np.int64(0)}, _STRONG_COUNTER))
        return made[0]

    graph = Graph([], list(nodes), list(seeds))
    while True:
        rolled = (_roll_once(graph, False, [], True, counter)
                  or _roll_once(graph, True, [], True, counter))
        if rolled is None:
            return graph.nodes
        graph = rolled


def _roll(graph: Graph, notes: list | None = None, strong: bool = False) -> Graph:
    top = notes is None
    notes = [] if top else notes
    while True:
        rolled = (_roll_once(graph, False, notes, strong)
                  or _roll_once(graph, True, notes, strong))
        if rolled is None:
            break
        graph = rolled
    if top and notes:
        _report(notes)
    return graph


def _report(notes: list) -> None:
    """One log line per loop rolled (loops rolled alike, as inner loops, counted once)."""
    counts: dict[tuple, int] = {}
    for note in notes:
        counts[note] = counts.get(note, 0) + 1
    for (copies, size, loc, indexed), times in counts.items():
        _log.info("rolled %d copies of a %d-node loop body at %s into a scan%s%s", copies,
                  size, loc.short if loc is not None else "?",
                  " with the index as a loop variable" if indexed else "",
                  f" ({times} loops)" if times > 1 else "")


# ---------------------------------------------------------------- rolling


def _roll_once(graph: Graph, affine: bool, notes: list, strong: bool,
               counter=None) -> Graph | None:
    """One sweep: roll every run found that overlaps no shorter-period run rolled here.
    ``strong``: step counters are int64 values, not Python ints. ``counter`` (a view for
    the gradient): makes the step counters' initial value, and the loops' results keep
    the values they stand for."""
    checker = Checker(graph, affine)
    known: dict[tuple, list[Graph]] = {}  # scans there already, by inputs and shape
    for n in graph.nodes if counter is None else ():
        if n.op == "scan":
            lp = n.attrs["loop"]
            known.setdefault((n.inputs, lp.n_consts, lp.n_carry, lp.length, lp.reverse),
                             []).append(lp.body)
    starts: list[int] = []  # the rolled runs, sorted, as (start, end, pieces)
    chosen: list[tuple[int, int, tuple]] = []
    for period, start, copies in sorted(runs([skeleton(n) for n in graph.nodes])):
        if _overlaps(starts, chosen, start, start + period * copies):
            continue
        plan = checker.plan(start, period, copies)
        if plan is None or _overlaps(starts, chosen, plan.start, plan.end):
            continue
        pieces = _loop(graph.nodes, plan, notes, strong, known, counter)
        if pieces is None:
            continue
        at = bisect.bisect(starts, plan.start)
        starts.insert(at, plan.start)
        chosen.insert(at, (plan.start, plan.end, pieces))
    if not chosen:
        return None
    subst: dict[Value, Value] = {}
    nodes: list[Node] = []
    i = 0
    for start, end, (made, exits) in chosen:
        nodes += (_substituted(n, subst) for n in graph.nodes[i:start])
        nodes += (_substituted(n, subst) for n in made)
        subst.update(exits)
        i = end
    nodes += (_substituted(n, subst) for n in graph.nodes[i:])
    return graph.replace(nodes=nodes, outputs=[subst.get(v, v) for v in graph.outputs])


def _overlaps(starts: list[int], chosen: list, start: int, end: int) -> bool:
    at = bisect.bisect(starts, start)
    return (at > 0 and chosen[at - 1][1] > start) or (at < len(starts) and starts[at] < end)


def _substituted(n: Node, subst: dict[Value, Value]) -> Node:
    if not any(v in subst for v in n.inputs):
        return n
    return Node(n.op, tuple(subst.get(v, v) for v in n.inputs), n.attrs, n.out, n.loc)


def _loop(nodes: list[Node], plan: Plan, notes: list, strong: bool, known: dict,
          make_counter=None) -> tuple[list[Node], dict] | None:
    """The nodes replacing a run (its loop and the results read after it), and which value
    of the last copy each result stands for; None if an index cannot be made traced."""
    p, s = plan.period, plan.start
    consts: dict[Value, Value] = {}
    for row in plan.classes:
        for kind, x in row:
            if kind == "const" and x not in consts:
                consts[x] = Value(x.type)
    slots = sorted(plan.init)
    carry = {j: Value(nodes[s + j].out.type) for j in slots}
    kind = _STRONG_COUNTER if strong else _COUNTER
    counter = Value(kind) if plan.affine else None
    body: list[Node] = []
    made: dict[int, Value] = {}
    for j, row in enumerate(plan.classes):
        t = nodes[s + j]
        ins = tuple(made[x] if kind == "in" else carry[x] if kind == "prev" else consts[x]
                    for kind, x in row)
        out = Value(t.out.type)
        if j in plan.affine:
            if not _indexed(body, t, ins, out, plan.affine[j], counter):
                return None
        else:
            body.append(Node(t.op, ins, t.attrs, out, t.loc))
        made[j] = out
    loc = next((n.loc for n in nodes[s:s + p] if n.loc is not None), None)
    outs = [made[j] for j in slots]
    inputs = list(consts.values()) + [carry[j] for j in slots]
    init = [plan.init[j] for j in slots]
    pre: list[Node] = []
    if counter is not None:
        one, zero, step = Value(kind), Value(kind), Value(kind)
        body += [Node("constant", (), {"value": 1 if kind.weak else np.int64(1)}, one, loc),
                 Node("add", (counter, one), {}, step, loc)]
        outs.append(step)
        inputs.append(counter)
        if make_counter is None:
            pre.append(Node("constant", (), {"value": np.int64(0) if strong else 0}, zero,
                            loc))
        else:
            zero = make_counter()
        init.append(zero)
    g = _roll(Graph(inputs, body, outs, name="body"), notes, strong)
    for other in known.get(((*consts, *init), len(consts), len(outs), plan.copies, False), ()):
        # autodiff's copy of this loop (it also stacks the carries: ad/loop_rules.py):
        # sharing its body lets merge_scans run the two as one
        shared = Graph(other.inputs, other.nodes, other.outputs[:len(outs)], g.name)
        if graph_key(shared) == graph_key(g):
            g = shared
            break
    loop = Scan(g, len(consts), len(outs), plan.copies)
    res = Value(results_type(len(outs)))
    made_nodes = pre + [Node("scan", (*consts, *init), {"loop": loop}, res, loc)]
    exits = {}
    for j in plan.exits:
        last = nodes[s + p * (plan.copies - 1) + j].out
        v = Value(last.type) if make_counter is None else last
        made_nodes.append(Node("loop_output", (res,), {"index": slots.index(j),
                                                       "type": v.type}, v, loc))
        if v is not last:
            exits[last] = v
    notes.append((plan.copies, p, loc, counter is not None))
    return made_nodes, exits


def _const(body: list[Node], value, loc) -> Value:
    v = Value(type_of_constant(value))
    body.append(Node("constant", (), {"value": value}, v, loc))
    return v


def _bind(body: list[Node], op: str, ins: tuple, attrs: dict, loc, out: Value | None = None):
    t = REGISTRY[op].rule(*(v.type for v in ins), **attrs)
    if out is None:
        out = Value(t)
    elif out.type != t:
        raise _NotTraceable
    body.append(Node(op, ins, attrs, out, loc))
    return out


class _NotTraceable(Exception):
    """An index that moves with the step cannot be computed with this op's types."""


def _indexed(body: list[Node], t: Node, ins: tuple, out: Value, att: dict,
             counter: Value) -> bool:
    """Append to ``body`` the nodes computing ``t`` (a copy of a node whose attributes
    ``att`` move by a stride per step) from the step ``counter``."""
    loc = t.loc
    try:
        if t.op == "constant" and isinstance(att["value"], Scaled):
            scaled = att["value"]
            if t.out.type.weak and not counter.type.weak:
                return False
            index = counter
            if scaled.offset:
                offset = scaled.offset if counter.type.weak else np.int64(scaled.offset)
                index = _bind(body, "add", (counter, _const(body, offset, loc)), {}, loc)
            scale = _const(body, float_like(scaled.like, scaled.scale), loc)
            _bind(body, "multiply", (index, scale), {}, loc, out)
            return True
        if t.op == "constant":
            base, stride = att["value"]
            if t.out.type.weak and not counter.type.weak:
                return False
            scaled = _bind(body, "multiply", (counter, _const(body, stride, loc)), {}, loc)
            _bind(body, "add", (scaled, _const(body, base, loc)), {}, loc, out)
            return True
        if "starts" not in att:
            return False
        base, stride = att["starts"]
        x = ins[0]
        steps = t.attrs["steps"]
        region = t.out.type.shape if t.op == "slice" else ins[1].type.shape
        dims = [e for e in range(x.type.ndim) if stride[e] or not (
            base[e] == 0 and steps[e] == 1 and region[e] == x.type.shape[e])]
        lo, hi = dims[0], dims[-1]
        idx = []
        for e in range(lo, hi + 1):
            shape = [1] * (hi - lo + 1)
            shape[e - lo] = region[e]
            arr = (base[e] + np.arange(region[e], dtype=_INT64) * steps[e]).reshape(shape)
            index = _const(body, arr, loc)
            if stride[e]:
                moved = _bind(body, "multiply", (counter, _const(body, np.int64(stride[e]),
                                                                 loc)), {}, loc)
                index = _bind(body, "add", (moved, index), {}, loc)
            idx.append(index)
        op = "gather" if t.op == "slice" else "scatter"
        _bind(body, op, (*ins, *idx), {"axis": lo}, loc, out)
        return True
    except _NotTraceable:
        return False
