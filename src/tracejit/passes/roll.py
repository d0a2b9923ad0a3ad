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
:data:`MIN_COPIES` copies stay unrolled: the loop's per-step cost then outweighs what
rolling saves.
"""

from __future__ import annotations

import bisect
import contextvars
import dataclasses
import logging
import weakref

import numpy as np

from ..config import config
from ..ir import Graph, Node, TensorType, Value
from ..ir.loop_ops import Scan, While, results_type
from ..ir.registry import REGISTRY
from ..ir.types import type_of_constant

# A loop of fewer steps stays unrolled: each step of a scan costs a loop iteration and
# keeps the kernels of neighbouring copies apart; from 4 copies on, the compile time
# saved is worth more (measured: ~0.1-0.3 s per copy of a stencil body on the CPU
# backend, bench/bench_unrolled.py).
MIN_COPIES = 4
# A repeating stretch begins at most this many nodes before its loop's first copy (code
# before the loop that ends as the body ends, a helper called from both): alignments
# further in are not tried.
MAX_SHIFT = 32

_log = logging.getLogger("tracejit")
_INT64 = np.dtype(np.int64)
# The step index: a Python int, as `i` is (so `x * i` keeps x's dtype); strong where the
# loop is a view for the gradient, whose residual scan stacks carries (and drops weakness).
_COUNTER = TensorType((), _INT64, weak=True)
_STRONG_COUNTER = TensorType((), _INT64)


# Whether what is traced and compiled now may get loops: not where the backend would
# run a scan on the CPU, with transfers around it (CUDA, today), instead of itself.
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


# ---------------------------------------------------------------- signatures


_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> structural key


def _loop_key(loop) -> object:
    """A hashable description of a loop attribute's bodies (Scan and While compare by
    identity; two copies of a rolled inner loop hold equal but distinct bodies)."""
    key = _KEYS.get(loop)
    if key is None:
        if isinstance(loop, Scan):
            key = ("scan", _graph_key(loop.body), loop.n_consts, loop.n_carry, loop.length,
                   loop.reverse, loop.truncate)
        else:
            key = ("while", _graph_key(loop.cond), _graph_key(loop.body), loop.n_consts)
        _KEYS[loop] = key
    return key


def _graph_key(g: Graph) -> tuple:
    index = {v: i for i, v in enumerate(g.inputs)}
    out = [tuple(v.type for v in g.inputs)]
    for n in g.nodes:
        out.append((n.op, n.out.type, n.loc, _attrs_key(n.attrs, True),
                    tuple(index[v] for v in n.inputs)))
        index[n.out] = len(index)
    out.append(tuple(index[v] for v in g.outputs))
    return tuple(out)


def _value_key(v, exact: bool):
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype, v.shape, v.tobytes() if exact else None)
    if isinstance(v, (Scan, While)):
        return _loop_key(v)
    return (type(v), v) if exact else type(v)


def _attrs_key(attrs: dict, exact: bool) -> tuple:
    return tuple(sorted((k, _value_key(v, exact)) for k, v in attrs.items()))


def _skeleton(n: Node) -> int:
    """The hash of what every copy of a node shares, affine index attributes left out."""
    if n.op == "constant":
        attrs: object = _value_key(n.attrs["value"], False)
    elif n.op in ("slice", "update_slice"):
        attrs = n.attrs["steps"]
    else:
        attrs = _attrs_key(n.attrs, True)
    try:
        return hash((n.op, n.out.type, n.loc, tuple(v.type for v in n.inputs), attrs))
    except TypeError:  # an attribute that cannot be compared: the node matches no other
        return hash(("unique", id(n)))


def _runs(sig: list[int]) -> list[tuple[int, int, int]]:
    """``(period, start, copies)`` of every stretch of ``sig`` repeating with a period, at
    least MIN_COPIES periods long. Candidate periods are the distances to the previous
    equal signature; each is followed forward while it holds, so the cost is linear in the
    trace times the number of periods alive at once (a few)."""
    last: dict[int, int] = {}
    active: dict[int, int] = {}  # period -> first i with sig[i] == sig[i - period]
    seen: dict[int, int] = {}  # period -> where it last failed (no need to look back past)
    found = []

    def close(d: int, begin: int, end: int) -> None:
        copies = (end - begin + d) // d
        if copies >= MIN_COPIES:
            found.append((d, begin - d, copies))

    for i, x in enumerate(sig):
        for d in [d for d in active if sig[i - d] != x]:
            close(d, active.pop(d), i)
            seen[d] = i + 1
        j = last.get(x)
        last[x] = i
        if j is not None and i - j not in active:
            d, b = i - j, i
            lo = max(d, seen.get(d, 0))
            while b > lo and sig[b - 1] == sig[b - 1 - d]:
                b -= 1
            active[d] = b
    for d, b in active.items():
        close(d, b, len(sig))
    return found


# ---------------------------------------------------------------- checking a run


@dataclasses.dataclass
class _Plan:
    start: int
    period: int
    copies: int
    classes: list[list[tuple]]  # per offset, per input: ("in"|"prev", offset) or ("const", v)
    init: dict[int, Value]  # carry offset -> its initial value
    affine: dict[int, dict[str, tuple]]  # offset -> attribute -> (value at copy 0, stride)
    exits: list[int]  # offsets of the last copy read after the run

    @property
    def end(self) -> int:
        return self.start + self.period * self.copies


class _Checker:
    def __init__(self, graph: Graph, affine: bool):
        self.nodes = graph.nodes
        self.affine = affine
        self.pos = {n.out: i for i, n in enumerate(graph.nodes)}
        outs = set(graph.outputs)
        self.last_use = {n.out: (len(graph.nodes) if n.out in outs else -1)
                         for n in graph.nodes}
        for i, n in enumerate(graph.nodes):
            for v in n.inputs:
                if v in self.last_use:
                    self.last_use[v] = max(self.last_use[v], i)

    def plan(self, start: int, period: int, copies: int) -> _Plan | None:
        """The run of ``copies`` periods at ``start`` as a loop (None: it is none). The
        stretch may begin inside the loop's body (a copy then reads two copies back): then
        the next alignments are tried, as long as they fail early."""
        for shift in range(min(period, MAX_SHIFT)):
            s = start + shift
            k = (start + period * copies - s) // period
            if k < MIN_COPIES:
                return None
            plan, early = self._plan(s, period, k)
            if plan is not None or not early:
                return plan
        return None

    def _classes(self, s: int, p: int) -> list[list[tuple]] | None:
        """How copy 1's inputs relate to the copies (None: it has an effect)."""
        out = []
        base = s + p
        for j in range(p):
            n = self.nodes[base + j]
            if REGISTRY[n.op].effect or _has_effect(n):
                return None
            row = []
            for v in n.inputs:
                i = self.pos.get(v, -1)
                row.append(("in", i - base) if i >= base else ("prev", i - s) if i >= s
                           else ("const", v))
            out.append(row)
        return out

    def _plan(self, s: int, p: int, k: int) -> tuple[_Plan | None, bool]:
        classes = self._classes(s, p)
        if classes is None:
            return None, False
        moving: dict[int, dict[str, tuple]] = {}  # offset -> attribute -> (at copy 1, stride)
        for c in range(1, k):  # against copy 1; the first copy that differs ends the run
            if not self._copy_ok(s, p, c, classes, moving):
                if c <= 2:
                    return None, True
                k = c
                break
        init: dict[int, Value] = {}
        dropped = 0 if self._copy_ok(s, p, 0, classes, moving, init) else 1
        if dropped:  # the first copy differs: it stays unrolled
            s, k, init = s + p, k - 1, self._init(s + p, classes)
        while k >= MIN_COPIES:  # a copy whose values are read after the run ends it
            c = next((c for c in range(k - 1) if any(
                self.last_use[self.nodes[i].out] >= s + p * k
                for i in range(s + p * c, s + p * (c + 1)))), None)
            if c is None:
                break
            if c + 1 >= MIN_COPIES:
                k = c + 1
                break
            # too few copies before it: the run starts after it
            s, k, dropped = s + p * (c + 1), k - c - 1, dropped + c + 1
            init = self._init(s, classes)
        if k < MIN_COPIES:
            return None, False
        end = s + p * k
        exits = [j for j in range(p)
                 if self.last_use[self.nodes[end - p + j].out] >= end]
        if not set(exits) <= set(init):
            k -= 1  # the last copy's other values are read later: it stays unrolled
            exits = sorted(init)
        if k < MIN_COPIES or not init:
            return None, False
        affine = {j: {key: _from_first(entry, dropped) for key, entry in att.items()
                      if isinstance(entry, _Scaled) or _nonzero(entry[1])}
                  for j, att in moving.items()}
        affine = {j: att for j, att in affine.items() if att}
        return _Plan(s, p, k, classes, init, affine, exits), False

    def _init(self, s: int, classes) -> dict[int, Value]:
        """The carry's initial values: what the copy at ``s`` reads from the one before."""
        return {x: v for j, row in enumerate(classes)
                for (kind, x), v in zip(row, self.nodes[s + j].inputs, strict=True)
                if kind == "prev"}

    def _copy_ok(self, s, p, c, classes, moving, init=None) -> bool:
        base, ref = s + p * c, s + p
        for j, row in enumerate(classes):
            n, t = self.nodes[base + j], self.nodes[ref + j]
            if (n.op != t.op or n.out.type != t.out.type or n.loc != t.loc
                    or len(n.inputs) != len(t.inputs) or REGISTRY[n.op].effect):
                return False
            for (kind, x), v in zip(row, n.inputs, strict=True):
                if kind == "in":
                    if v is not self.nodes[base + x].out:
                        return False
                elif kind == "const":
                    if v is not x:
                        return False
                elif c > 0:
                    if v is not self.nodes[base - p + x].out:
                        return False
                elif (self.pos.get(v, -1) >= s or init.setdefault(x, v) is not v
                      or v.type != self.nodes[s + x].out.type):
                    return False
            if c != 1 and not self._attrs_ok(n, t, c, moving.setdefault(j, {})):
                return False
        return True

    def _attrs_ok(self, n: Node, t: Node, c: int, att: dict) -> bool:
        """``n``'s attributes (copy ``c``) against copy 1's ``t``: equal, or (affine mode)
        moving by one stride per copy, fixed by copy 2, in an attribute that can take a
        traced index."""
        if n.attrs.keys() != t.attrs.keys():
            return False
        for key, v in n.attrs.items():
            w = t.attrs[key]
            if c == 2 and self.affine and _movable(n.op, key, v):
                if not _is_float(v):
                    att[key] = (w, _minus(v, w))
                elif not _same(v, w):
                    att[key] = _Scaled.fit(w, v)
                    if att[key] is None:
                        return False
            if isinstance(att.get(key), _Scaled):
                if not _same(v, att[key].at(c)):
                    return False
            elif key in att:
                v1, stride = att[key]
                if not _same(v, _plus(v1, _times(stride, c - 1))):
                    return False
            elif not _same(v, w):
                return False
        return True


def _movable(op: str, key: str, v) -> bool:
    if op == "constant" and key == "value":
        return (type(v) is int or _is_float(v)
                or (isinstance(v, (np.ndarray, np.integer)) and np.asarray(v).dtype == _INT64))
    return op in ("slice", "update_slice") and key in ("starts", "stops")


def _is_float(v) -> bool:
    """A float64 scalar literal: a Python float, NumPy scalar or 0-d array."""
    return type(v) is float or type(v) is np.float64 or (
        type(v) is np.ndarray and v.shape == () and v.dtype == np.float64)


def _float_like(v, x: float):
    """``x`` as a literal of ``v``'s kind (a Python float, NumPy scalar or 0-d array)."""
    return np.asarray(x, np.float64) if type(v) is np.ndarray else type(v)(x)


@dataclasses.dataclass(frozen=True, eq=False)
class _Scaled:
    """A float scalar that is ``(c + offset) * scale`` at copy ``c`` as Python computes
    it (``t * dt``, ``dt * (t + 1)``): the index, converted to float, times one float.
    Checked exactly, so the loop computes every copy's value bit for bit."""

    offset: int
    scale: float
    like: object  # a literal of the kind the constant holds

    def at(self, c: int):
        return _float_like(self.like, (c + self.offset) * self.scale)

    @staticmethod
    def fit(v1, v2) -> _Scaled | None:
        """The scaling giving ``v1`` at copy 1 and ``v2`` at copy 2, if there is one."""
        step = float(v2) - float(v1)
        if not (np.isfinite(step) and step and np.isfinite(float(v1) / step)):
            return None
        t = round(float(v1) / step)  # the index of copy 1 in the user's loop
        if t == 0 or t == -1:
            return None
        guess = float(v1) / t
        for scale in (guess, np.nextafter(guess, np.inf), np.nextafter(guess, -np.inf)):
            scaled = _Scaled(t - 1, float(scale), v1)
            if _same(scaled.at(1), v1) and _same(scaled.at(2), v2):
                return scaled
        return None


def _from_first(entry, dropped: int):
    """A moving attribute as the loop's step ``i`` (copy ``i + dropped``) computes it."""
    if isinstance(entry, _Scaled):
        return _Scaled(entry.offset + dropped, entry.scale, entry.like)
    v1, stride = entry
    return _plus(v1, _times(stride, dropped - 1)), stride


def _nonzero(stride) -> bool:
    return bool(np.any(np.asarray(stride) != 0))


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
                and bool(np.array_equal(a, b)))
    if isinstance(a, (Scan, While)) or isinstance(b, (Scan, While)):
        return (type(a) is type(b)) and _loop_key(a) == _loop_key(b)
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):  # an array inside: compared as unequal, never rolled
        return False


def _minus(a, b):
    if isinstance(a, tuple):
        return tuple(x - y for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a - b
    return a - b


def _plus(a, b):
    if isinstance(a, tuple):
        return tuple(x + y for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return (a + b).astype(a.dtype)
    return type(a)(a + b)


def _times(a, c: int):
    if isinstance(a, tuple):
        return tuple(x * c for x in a)
    return a * c if not isinstance(a, np.ndarray) else (a * c).astype(a.dtype)


def _has_effect(n: Node) -> bool:
    loop = n.attrs.get("loop")
    if loop is None:
        return False
    graphs = [loop.body] if isinstance(loop, Scan) else [loop.cond, loop.body]
    return any(REGISTRY[m.op].effect or _has_effect(m) for g in graphs for m in g.nodes)


# ---------------------------------------------------------------- rolling


def _roll_once(graph: Graph, affine: bool, notes: list, strong: bool,
               counter=None) -> Graph | None:
    """One sweep: roll every run found that overlaps no shorter-period run rolled here.
    ``strong``: step counters are int64 values, not Python ints. ``counter`` (a view for
    the gradient): makes the step counters' initial value, and the loops' results keep
    the values they stand for."""
    checker = _Checker(graph, affine)
    known: dict[tuple, list[Graph]] = {}  # scans there already, by inputs and shape
    for n in graph.nodes if counter is None else ():
        if n.op == "scan":
            lp = n.attrs["loop"]
            known.setdefault((n.inputs, lp.n_consts, lp.n_carry, lp.length, lp.reverse),
                             []).append(lp.body)
    starts: list[int] = []  # the rolled runs, sorted, as (start, end, pieces)
    chosen: list[tuple[int, int, tuple]] = []
    for period, start, copies in sorted(_runs([_skeleton(n) for n in graph.nodes])):
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


def _loop(nodes: list[Node], plan: _Plan, notes: list, strong: bool, known: dict,
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
        if _graph_key(shared) == _graph_key(g):
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
        if t.op == "constant" and isinstance(att["value"], _Scaled):
            scaled = att["value"]
            if t.out.type.weak and not counter.type.weak:
                return False
            index = counter
            if scaled.offset:
                offset = scaled.offset if counter.type.weak else np.int64(scaled.offset)
                index = _bind(body, "add", (counter, _const(body, offset, loc)), {}, loc)
            scale = _const(body, _float_like(scaled.like, scaled.scale), loc)
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
