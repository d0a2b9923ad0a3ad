"""Finding the copies of a loop body in a trace (``passes/roll.py`` rolls them).

Each node gets a signature hash (op, types, source line, attributes without the values an
index changes); a loop's copies are a stretch of the node list whose signatures repeat at
a fixed distance, found in one pass over the list (:func:`runs`). :class:`Checker` then
checks a stretch exactly, copy by copy, and says how its copies connect (:class:`Plan`).
"""

from __future__ import annotations

import dataclasses
import weakref

import numpy as np

from ..ir import Graph, Node, Value
from ..ir.loop_ops import Scan, While
from ..ir.registry import REGISTRY

# A loop of fewer steps stays unrolled: each step of a scan costs a loop iteration and
# keeps the kernels of neighbouring copies apart; from 4 copies on, the compile time
# saved is worth more (measured: ~0.1-0.3 s per copy of a stencil body on the CPU
# backend, bench/bench_unrolled.py).
MIN_COPIES = 4
# A repeating stretch begins at most this many nodes before its loop's first copy (code
# before the loop that ends as the body ends, a helper called from both): alignments
# further in are not tried.
MAX_SHIFT = 32

_INT64 = np.dtype(np.int64)


# ---------------------------------------------------------------- signatures


_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> structural key


def _loop_key(loop) -> object:
    """A hashable description of a loop attribute's bodies (Scan and While compare by
    identity; two copies of a rolled inner loop hold equal but distinct bodies)."""
    key = _KEYS.get(loop)
    if key is None:
        if isinstance(loop, Scan):
            key = ("scan", graph_key(loop.body), loop.n_consts, loop.n_carry, loop.length,
                   loop.reverse, loop.truncate)
        else:
            key = ("while", graph_key(loop.cond), graph_key(loop.body), loop.n_consts)
        _KEYS[loop] = key
    return key


def graph_key(g: Graph) -> tuple:
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


def skeleton(n: Node) -> int:
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


def runs(sig: list[int]) -> list[tuple[int, int, int]]:
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
class Plan:
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


class Checker:
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

    def plan(self, start: int, period: int, copies: int) -> Plan | None:
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

    def _plan(self, s: int, p: int, k: int) -> tuple[Plan | None, bool]:
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
                      if isinstance(entry, Scaled) or _nonzero(entry[1])}
                  for j, att in moving.items()}
        affine = {j: att for j, att in affine.items() if att}
        return Plan(s, p, k, classes, init, affine, exits), False

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
                    att[key] = Scaled.fit(w, v)
                    if att[key] is None:
                        return False
            if isinstance(att.get(key), Scaled):
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


def float_like(v, x: float):
    """``x`` as a literal of ``v``'s kind (a Python float, NumPy scalar or 0-d array)."""
    return np.asarray(x, np.float64) if type(v) is np.ndarray else type(v)(x)


@dataclasses.dataclass(frozen=True, eq=False)
class Scaled:
    """A float scalar that is ``(c + offset) * scale`` at copy ``c`` as Python computes
    it (``t * dt``, ``dt * (t + 1)``): the index, converted to float, times one float.
    Checked exactly, so the loop computes every copy's value bit for bit."""

    offset: int
    scale: float
    like: object  # a literal of the kind the constant holds

    def at(self, c: int):
        return float_like(self.like, (c + self.offset) * self.scale)

    @staticmethod
    def fit(v1, v2) -> Scaled | None:
        """The scaling giving ``v1`` at copy 1 and ``v2`` at copy 2, if there is one."""
        step = float(v2) - float(v1)
        if not (np.isfinite(step) and step and np.isfinite(float(v1) / step)):
            return None
        t = round(float(v1) / step)  # the index of copy 1 in the user's loop
        if t == 0 or t == -1:
            return None
        guess = float(v1) / t
        for scale in (guess, np.nextafter(guess, np.inf), np.nextafter(guess, -np.inf)):
            scaled = Scaled(t - 1, float(scale), v1)
            if _same(scaled.at(1), v1) and _same(scaled.at(2), v2):
                return scaled
        return None


def _from_first(entry, dropped: int):
    """A moving attribute as the loop's step ``i`` (copy ``i + dropped``) computes it."""
    if isinstance(entry, Scaled):
        return Scaled(entry.offset + dropped, entry.scale, entry.like)
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
