"""Arguments that are static without ``static_argnums``.

* A hashable argument that is not an array (a mode string, ``None``, ``...``, a slice, an
  enum, a dtype, a function) cannot be traced, so it is part of the cache key by value
  and reaches the function as itself: :func:`static_leaf`.
* A Python ``int`` (or ``bool``) is traced like a scalar array until the function needs
  its value (``range(n)``, a shape, an index, ``if flag:``): the ConcretizationError of
  that trace names the value it needed (``error.tracer``), :func:`concrete_inputs` finds
  the arguments it came from, and if they are all Python ints :class:`ConcreteInts`
  remembers them, so that the function is traced again, and keyed from then on, with
  their values (one compile per value, as ``static_argnums`` would give).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .errors import ConcretizationError

# How many values of one automatically static int are compiled before a RetraceWarning.
MANY_VALUES = 8


class Static(NamedTuple):
    """The cache-key entry of a leaf passed by value: its type (``1`` and ``True`` are
    different keys) and a hashable form of it (a slice as its three fields)."""

    kind: type
    key: Any

    @property
    def value(self):
        return slice(*self.key) if self.kind is slice else self.key


def static_leaf(leaf) -> Static | None:
    """The key of a leaf that is static by value, or None if it is not hashable."""
    kind = type(leaf)
    key = (leaf.start, leaf.stop, leaf.step) if kind is slice else leaf
    try:
        hash(key)
    except TypeError:
        return None
    return Static(kind, key)


def concrete_inputs(error: ConcretizationError, names: list[str]) -> list[int] | None:
    """The positions of the trace inputs that the value ``error`` needed was computed from
    (none: a constant), or None if the error is not about a value of the trace whose
    inputs are named ``names`` (no value attached, or one of an inner trace)."""
    tracer = getattr(error, "tracer", None)
    if tracer is None or [v.name for v in tracer._trace.inputs] != names:
        return None
    trace = tracer._trace
    producers = {node.out: node for node in trace.nodes}
    position = {v: i for i, v in enumerate(trace.inputs)}
    found, seen, stack = set(), set(), [tracer._value]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in position:
            found.add(position[v])
        elif v in producers:
            stack.extend(producers[v].inputs)
    return sorted(found)


class ConcreteInts:
    """Of one jitted function: the argument paths (``n``, ``shape.0``) whose Python ints
    it needs concretely, and the values compiled for each."""

    def __init__(self):
        self.paths: frozenset[str] = frozenset()
        self._values: dict[str, set] = {}

    def learn(self, error: ConcretizationError, names: list[str], leaves) -> list[str]:
        """The paths ``error`` shows to be needed as concrete ints, newly remembered (none
        if it needed anything else: an array, a float, a constant)."""
        found = concrete_inputs(error, names)
        if not found or any(type(leaves[i]) not in (int, bool) for i in found):
            return []
        new = sorted({names[i] for i in found} - self.paths)
        self.paths = self.paths | set(new)
        return new

    def compiled(self, names: list[str], keys) -> list[str]:
        """Record a compile with these leaf keys; the paths that just passed MANY_VALUES
        values (each is reported once)."""
        crossed = []
        for name, key in zip(names, keys, strict=True):
            if name in self.paths and type(key) is Static:
                values = self._values.setdefault(name, set())
                values.add(key)
                if len(values) == MANY_VALUES + 1:
                    crossed.append(name)
        return crossed
