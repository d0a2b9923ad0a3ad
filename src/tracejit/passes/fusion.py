"""Fusion: partition a graph's nodes into kernels, the units a backend compiles.

A *loop* kernel iterates over one shape. It holds elementwise nodes whose output has that
shape (so nothing is recomputed per element), reductions whose *input* has that shape
(``sum(x * x)`` is one pass), and scans (``cumsum``, ``cummax``, ...) along its last axis,
which a backend computes in order along each row, carrying the running value from one
element to the next (``cummax(cumsum(x)) - cumsum(x)`` is one pass, not three); beside
scans, only reductions whose result does not depend on the order (``max``, an integer
``sum``), and no transcendental function (which would lose its vector loop). It may have
several outputs: siblings that read the same inputs share one loop (Theano could only fuse
single-output graphs). When all reductions of a kernel reduce the same trailing axes
(``rows``), later nodes may use their results: the kernel then runs in phases per row (row
softmax: max, then sum of exp, then the output), reading each row from cache instead of
memory. Every other node is a *library* step of its own (contractions, structural ops,
gathers), which a backend runs with a library call. Steps are listed in an order that
respects every dependency.

Which element of a value a kernel reads is explicit: ``Kernel.axes`` maps each value the
kernel reads or computes to the iteration axis of each of its dimensions (None: a size-1
dimension, read at index 0). It follows NumPy's broadcasting for inputs (dimensions aligned
on the right) and the reduced axes for reduction results; a node may read a value computed
in the same kernel only where the two agree. A ``(3,)`` row sum of a 3x3 loop lives on
axis 0, but ``x - x.sum(axis=-1)`` reads it along axis 1: that subtraction needs every row's
sum first, so it starts a new kernel. Code generators index through ``axes``, and
``verify_kernels`` checks every kernel against these rules after fusion.

The pass is backend-neutral; ``fusible(node)`` lets a backend keep ops it has no code for
out of loop kernels.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import IRError
from ..ir import Graph, Kind, Node, Value
from ..ir.registry import REGISTRY, Exactness, has_effect

# The reductions a loop kernel computes: those with a monoid (argmax/argmin have none).
LOOP_REDUCTIONS = frozenset(name for name, op in REGISTRY.items() if op.monoid is not None)

# The scans a loop kernel computes, each with the reduction whose monoid folds its elements
# in: np.add.accumulate is a running sum, np.maximum.accumulate a running max.
LOOP_SCANS = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min"}

Axes = tuple["int | None", ...]  # per dimension of a value: its iteration axis, or None


def broadcast_axes(shape: tuple[int, ...], over: tuple[int, ...]) -> Axes:
    """The axes of a ``shape`` operand read by a node computing ``over`` (NumPy
    broadcasting: dimensions aligned on the right; a size-1 dimension is read at 0)."""
    off = len(over) - len(shape)
    return tuple(None if n == 1 else off + j for j, n in enumerate(shape))


def produced_axes(node: Node, shape: tuple[int, ...]) -> Axes:
    """The axes of ``node``'s result in a loop over ``shape``: a reduction keeps the axes
    it does not reduce (its reduced ones, with keepdims, are size 1); any other node
    computes its output shape, aligned with the loop's."""
    if node.op in LOOP_REDUCTIONS:
        src = node.inputs[0].type.shape
        reduced = node.attrs["axis"] if src else ()
        return tuple(None if d in reduced or n == 1 else d for d, n in enumerate(src)
                     if node.attrs["keepdims"] or d not in reduced)
    return broadcast_axes(node.out.type.shape, shape)


def read_axes(node: Node, v: Value) -> Axes:
    """The axes at which ``node`` reads its operand ``v`` (a reduction iterates over its
    input's shape, anything else over its output's)."""
    over = node.inputs[0].type.shape if node.op in LOOP_REDUCTIONS else node.out.type.shape
    return broadcast_axes(v.type.shape, over)


def _elementwise_operands(node: Node) -> tuple[Value, ...]:
    """Operands read one element per iteration (a matmul reads its operands whole)."""
    return () if node.op == "matmul" else node.inputs


@dataclass
class Kernel:
    kind: str  # "loop" or "library"
    nodes: list[Node]
    shape: tuple[int, ...] = ()  # iteration shape of a loop kernel
    inputs: list[Value] = field(default_factory=list)  # values read from outside
    outputs: list[Value] = field(default_factory=list)  # values needed outside
    rows: tuple[int, ...] | None = None  # reduced trailing axes, once a node uses a result
    axes: dict[Value, Axes] = field(default_factory=dict)  # see the module docstring

    @property
    def reductions(self) -> list[Node]:
        return [n for n in self.nodes if n.op in LOOP_REDUCTIONS]

    @property
    def scans(self) -> list[Node]:
        return [n for n in self.nodes if n.op in LOOP_SCANS]

    def row_shape(self) -> tuple[int, ...] | None:
        """Shape of per-row values (the reductions' keepdims shape) in a row kernel."""
        if self.rows is None:
            return None
        return tuple(1 if d in self.rows else s for d, s in enumerate(self.shape))

    def is_row_level(self, node: Node) -> bool:
        """An elementwise node computed once per row, between phases (log of a row sum)."""
        return node.op not in LOOP_REDUCTIONS and node.out.type.shape != self.shape

    def row_axes(self, joining: Node | None = None) -> tuple[int, ...] | None:
        """The trailing axes all reductions (and ``joining``, if one) share, if they share
        one non-empty suffix."""
        reds = self.reductions + ([joining] if joining and joining.op in LOOP_REDUCTIONS else [])
        axes = {n.attrs["axis"] for n in reds}
        if len(axes) != 1:
            return None
        (a,) = axes
        n = len(self.shape)
        return a if a and a == tuple(range(n - len(a), n)) else None

    def add(self, node: Node) -> None:
        """Append ``node``, recording the axes it reads its operands at and computes."""
        self.nodes.append(node)
        for v in _elementwise_operands(node):
            self.axes.setdefault(v, read_axes(node, v))
        self.axes[node.out] = produced_axes(node, self.shape)


def _loop_shape(node: Node) -> tuple[int, ...] | None:
    """The iteration shape a node needs in a loop kernel, or None if it cannot join one.
    A contraction joins as an elementwise node over its output (when the backend accepts
    it, i.e. its contracted dimension is small). A scan joins one along its last axis."""
    kind = REGISTRY[node.op].kind
    if kind in (Kind.ELEMENTWISE, Kind.CONTRACTION):
        return node.out.type.shape
    if node.op in LOOP_SCANS:
        return node.out.type.shape if node.attrs["axis"] == node.out.type.ndim - 1 else None
    if node.op in LOOP_REDUCTIONS:
        return node.inputs[0].type.shape
    return None


def library_early(nodes: list[Node], fusible: Callable[[Node], bool]) -> list[Node]:
    """``nodes`` in a topological order that takes each library node as soon as the nodes
    it reads are taken (the rest keep their order): a slice read by the third add of
    ``a[:-2] + a[2:] + a[1:-1]`` no longer comes between the adds and splits their loop
    kernel in two, nor does the 0-d ``1.5 * d`` read by ``(x - m) / (1.5 * d)``. Nodes
    with an effect (random draws) keep their order among themselves: each waits for the
    one before it, so the generator is drawn from as NumPy would."""
    made = {n.out: i for i, n in enumerate(nodes)}
    users: list[list[int]] = [[] for _ in nodes]
    waiting = [0] * len(nodes)
    last_effect = None
    for i, n in enumerate(nodes):
        before = {made[v] for v in n.inputs if v in made}
        if has_effect(n):
            before |= {last_effect} - {None}
            last_effect = i
        for j in before:
            users[j].append(i)
            waiting[i] += 1

    def rank(i: int) -> tuple[int, int]:
        n = nodes[i]  # a constant is no work: taken at once, so its readers are ready
        early = n.op == "constant" or not fusible(n) or _loop_shape(n) is None
        return (0 if early else 1, i)

    ready = [rank(i) for i in range(len(nodes)) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(nodes[i])
        for u in users[i]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, rank(u))
    return order


def fuse(graph: Graph, fusible: Callable[[Node], bool] = lambda n: True) -> list[Kernel]:
    kernels: list[Kernel] = []
    home: dict[Value, int] = {}  # value -> index of the kernel that computes it
    reduced: set[Value] = set()  # reduction results: complete only after their loop ends
    for node in library_early(graph.nodes, fusible):
        if node.op == "constant":
            continue  # constants are values the backend holds, not work
        shape = _loop_shape(node) if fusible(node) else None
        target = None
        if shape is not None:
            for k in range(len(kernels) - 1, -1, -1):
                kern = kernels[k]
                if kern.kind == "loop" and (
                    (kern.shape == shape and _can_join(node, kern, k, home, reduced))
                    or _joins_as_row_level(node, kern, k, home, reduced)
                ):
                    target = k
                    break
                if any(home.get(v) == k for v in node.inputs):
                    break  # an input comes from here: no earlier kernel can take the node
        if target is None:
            kernels.append(Kernel("loop" if shape is not None else "library", [], shape or ()))
            target = len(kernels) - 1
        kern = kernels[target]
        if kern.kind == "loop":
            kern.add(node)
        else:
            kern.nodes.append(node)
        if any(home.get(v) == target and v in reduced for v in node.inputs) or (
                kern.kind == "loop" and kern.is_row_level(node)):
            kern.rows = kern.row_axes()
        home[node.out] = target
        if node.op in LOOP_REDUCTIONS:
            reduced.add(node.out)
    for kern in kernels:  # the loop form is fixed now: rows, if all reductions share them
        if kern.kind == "loop" and kern.rows is None and kern.reductions and not kern.scans:
            kern.rows = kern.row_axes()
    _wire(graph, kernels, home)
    verify_kernels(kernels)
    return kernels


def _joins_as_row_level(node: Node, kern: Kernel, k: int, home: dict[Value, int],
                        reduced: set[Value]) -> bool:
    """A per-row elementwise node of a row kernel: its inputs are this kernel's reductions
    or per-row values, or come from earlier kernels."""
    rows = kern.rows if kern.rows is not None else kern.row_axes()
    if rows is None or node.op in LOOP_REDUCTIONS or kern.scans:
        return False
    row_shape = tuple(1 if d in rows else s for d, s in enumerate(kern.shape))
    if node.out.type.shape != row_shape:
        return False
    if REGISTRY[node.op].kind is not Kind.ELEMENTWISE or not row_shape or 1 not in row_shape:
        return False
    for v in node.inputs:
        src = home.get(v)
        if src is None or src < k:
            continue
        if not (v in reduced or v.type.shape == row_shape) or not _reads_as_made(node, v, kern):
            return False
    return True


def _reads_as_made(node: Node, v: Value, kern: Kernel) -> bool:
    """Whether ``node`` would read ``v`` at the axes the kernel holds it at (computed
    there, or already read there as an input)."""
    return v not in _elementwise_operands(node) or kern.axes.get(v, read_axes(node, v)) == \
        read_axes(node, v)


def _can_join(node: Node, kern: Kernel, k: int, home: dict[Value, int],
              reduced: set[Value]) -> bool:
    """Inputs must be ready before kernel k runs, or computed inside it (not for a
    contraction) and read at the axes they were computed at; a reduced value only in a row
    kernel (all its reductions, this node's included, over the same trailing axes). A
    kernel with a scan runs in one pass, never in a row kernel's phases: no node there
    reads a reduction's result, and a scan joins no row kernel. It runs in order, so a
    reduction whose result depends on the order (a float sum) does not join it, nor does
    a transcendental function (``_in_order``)."""
    if node.op in LOOP_REDUCTIONS and kern.rows is not None and node.attrs["axis"] != kern.rows:
        return False
    if node.op in LOOP_SCANS and kern.rows is not None:
        return False
    scanning = bool(kern.scans) or node.op in LOOP_SCANS
    if scanning and not all(map(_in_order, kern.nodes + [node])):
        return False
    contraction = REGISTRY[node.op].kind is Kind.CONTRACTION
    for v in node.inputs:
        if not _reads_as_made(node, v, kern):
            return False
        src = home.get(v)
        if src is None or src < k:
            continue
        if contraction:
            return False  # a contraction reads its operands whole: they must exist already
        if v in reduced and (scanning or kern.row_axes(node) is None):
            return False
    return True


def _in_order(node: Node) -> bool:
    """Whether ``node`` may join a scan kernel, which computes one element after another:
    not a reduction whose result depends on the order (a float sum: an integer one wraps
    to one result in any order, and ``max`` is exact), nor a transcendental function
    (``Exactness.ULP``: the backends' own routines, several times faster in a vector loop
    of their own than one element at a time)."""
    exactness = REGISTRY[node.op].exactness
    if node.op in LOOP_REDUCTIONS:
        return exactness is Exactness.EXACT or node.out.type.dtype.kind in "biu"
    return exactness is not Exactness.ULP


def _wire(graph: Graph, kernels: list[Kernel], home: dict[Value, int]) -> None:
    needed_outside = set(graph.outputs)
    for i, kern in enumerate(kernels):
        for node in kern.nodes:
            for v in node.inputs:
                if home.get(v) != i:
                    needed_outside.add(v)
                    if v not in kern.inputs:
                        kern.inputs.append(v)
    for kern in kernels:
        kern.outputs = [n.out for n in kern.nodes if n.out in needed_outside]


def is_reduction(v: Value, kern: Kernel) -> bool:
    """Whether ``v`` is the result of one of ``kern``'s reductions."""
    return any(n.out is v and n.op in LOOP_REDUCTIONS for n in kern.nodes)


def phases(kern: Kernel) -> dict[Value, int]:
    """Phase of each node of a row kernel: one more than any reduction of the kernel it
    depends on (a backend runs the phases one after another per row)."""
    phase: dict[Value, int] = {}
    for node in kern.nodes:
        p = 0
        for v in node.inputs:
            if v in phase:
                p = max(p, phase[v] + (1 if is_reduction(v, kern) else 0))
        phase[node.out] = p
    return phase


def needed(node: Node, sinks: list[Node], kern: Kernel) -> bool:
    """Whether ``node`` is one of ``sinks`` or an elementwise node they depend on (what a
    phase computing ``sinks`` must recompute)."""
    want = {n.out for n in sinks}
    for n in reversed(kern.nodes):
        if n.out in want and not (n not in sinks and n.op in LOOP_REDUCTIONS):
            want.update(n.inputs)
    return node.out in want and (node in sinks or node.op not in LOOP_REDUCTIONS)


def verify_kernels(kernels: list[Kernel]) -> None:
    """Check every loop kernel's ``axes`` against the rules the code generators rely on;
    an IRError here is a fusion bug, caught before any code is generated."""
    for k, kern in enumerate(kernels):
        if kern.kind == "loop":
            for problem in _kernel_problems(kern):
                raise IRError(f"kernel {k} ({', '.join(n.op for n in kern.nodes)}): {problem}",
                              location=kern.nodes[0].loc)


def _kernel_problems(kern: Kernel):
    """Yield what is wrong with one loop kernel (nothing, for a well-formed one)."""
    shape, made = kern.shape, {n.out: n for n in kern.nodes}
    if kern.rows is not None and (kern.rows != kern.row_axes() or kern.rows != tuple(
            range(len(shape) - len(kern.rows), len(shape)))):
        yield f"rows {kern.rows} are not the trailing axes all its reductions reduce"
    for v, axes in kern.axes.items():
        dims = v.type.shape
        if len(axes) != len(dims) or any(
                (n != 1) if a is None else not (0 <= a < len(shape) and n == shape[a])
                for a, n in zip(axes, dims, strict=False)):
            yield f"a {list(dims)} value held at axes {axes} of a {list(shape)} loop"
        held = [a for a in axes if a is not None]
        if held != sorted(set(held)):
            yield f"axes {axes} are out of order"
    for node in kern.nodes:
        if node.op in LOOP_SCANS and (node.attrs["axis"] != len(shape) - 1 or kern.rows):
            yield f"{node.op} along axis {node.attrs['axis']} of a {list(shape)} loop"
        if kern.axes.get(node.out) != produced_axes(node, shape):
            yield f"{node.op}'s result is held at {kern.axes.get(node.out)}"
        for v in _elementwise_operands(node):
            if kern.axes.get(v) != read_axes(node, v):
                yield (f"{node.op} reads a {list(v.type.shape)} operand at "
                       f"{read_axes(node, v)}, but it is held at {kern.axes.get(v)}")
            src = made.get(v)
            if src is not None and src.op in LOOP_REDUCTIONS and kern.scans:
                yield f"{node.op} reads a reduction result in a kernel with a scan"
            if src is not None and src.op in LOOP_REDUCTIONS and (
                    kern.rows is None or set(src.attrs["axis"]) != set(kern.rows)):
                yield f"{node.op} reads a reduction result outside a row kernel"
