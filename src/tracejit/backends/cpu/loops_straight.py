"""Long straight-line runs of small steps compiled as one function: a scan of one step.

A Python loop whose shapes change every step (trisolv's ``x[i] = (b[i] - L[i, :i] @ x[:i])
/ L[i, i]``, a Cholesky factorisation element by element) cannot roll into a scan, so it
traces into hundreds of small steps. In the runner each is a NumPy call or a kernel
called through ctypes, a fraction of a microsecond to a few, while its work is a few
nanoseconds: the runner's time is the steps' count. The later runner
(``codegen.partition`` with ``later``) wraps each run of nodes that the fused loop driver
(``fused.py``) runs itself (loop kernels, 0-d arithmetic included, small matmuls,
slices, updates of slices, gathers and scatters, concatenations) and that the runner
would run as at least ``MIN_STEPS`` steps besides views into a ``scan`` of length 1: the
run is then one compiled call, its steps written into one Numba function, its values
in scratch arrays reused from call to call, its updates of a slice done in place where
nothing reads the old value after them. The values the rest of the graph reads leave the scan
as its stacked ``ys`` (one step: a leading axis of 1, which a reshape drops). The steps
the driver does not run (a library call such as ``np.correlate``) are first moved as
early as what they read allows, keeping their own order, so that the steps between
them join into longer runs.

The first runner keeps the unrolled steps (no compile of the whole run before the first
call), so a run holding an op that is not exactly rounded may change its bits at the
switch (``rounds_differently``), within the kernels' bounds. An index out of bounds in
the run raises ``IndexOutOfBounds`` at the user's line as the runner's step does (the
driver's status, ``fused._failed``).
"""

from __future__ import annotations

import weakref

from ...ir import Graph, Node, Value
from ...ir.loop_ops import Scan, results_type
from ...passes.contract import split_skinny_matmuls
from ...passes.fusion import fuse
from . import fused
from . import fused_steps as steps
from .codegen import LOOP_OPS, VIEW_OPS, exactly_rounded, fusible
from .emitter import PARALLEL_MIN_SIZE

# Runner steps other than views (a reshape, slice or transpose: a NumPy view, a tenth of
# a microsecond): fewer save less than the driver's call costs (a few microseconds).
MIN_STEPS = 5

_wrapped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def wrap_runs(graph: Graph) -> Graph:
    """``graph`` with each long run of small steps the fused driver runs as a scan of one
    step (the same graph where there is none); kept per graph, since the later runner's
    partition and ``codegen.improves_later`` both ask."""
    found = _wrapped.get(graph)
    if found is None:
        found = _wrapped[graph] = _wrap(graph)
    return found


def rounds_differently(graph: Graph) -> bool:
    """Whether the later runner's straight-line calls may return other bits than the first
    runner: a wrapped run computes an op that is not exactly rounded (a ``tanh``, a float
    ``sum`` or matmul), which the first runner leaves to NumPy (its ``tanh``, its pairwise
    sum, BLAS) and the driver computes as kernels do (within their ULP bounds, in its own
    order). This is the one place where switching runners may change a result."""
    return any(not exactly_rounded(n) for s in wrap_runs(graph).nodes
               if s.op == "scan" and s.attrs["loop"].body.name == "straight"
               for n in s.attrs["loop"].body.nodes)


def _runnable(node: Node) -> bool:
    """Whether the fused driver runs ``node`` on one thread: a loop kernel (0-d arithmetic
    included), an indexing or structural step of ``fused_steps``, a 2-d float matmul or
    transpose; every value under the size where kernels share the work among threads."""
    if node.op in LOOP_OPS or node.op in ("loop_output", "constant"):
        return node.op == "constant"
    if any(v.type.size >= PARALLEL_MIN_SIZE for v in (*node.inputs, node.out)):
        return False
    if fusible(node, scalars=True) or steps.supported(node):
        return True
    types_ = [v.type for v in (*node.inputs, node.out)]
    if node.op == "transpose":
        return types_[0].ndim == 2
    return node.op == "matmul" and all(
        t.ndim == 2 and t.dtype == types_[0].dtype and t.dtype.kind == "f" and 0 not in t.shape
        for t in types_)


# Runnable steps that may raise (an index out of bounds): a library call, which may raise
# too (a singular matrix), is not moved above one, so the first error is NumPy's first.
_RAISING = frozenset({"gather", "scatter"})


def _hoisted(nodes: list[Node]) -> list[Node]:
    """``nodes`` with those the driver does not run each moved up to just after what it
    reads (with the runnable nodes that leads to, in their order), the runnable nodes
    nothing of that kind reads after them all: the runs between library calls grow.
    The library calls keep their order (a random draw, a callback), and none moves above
    a step that may raise (``_RAISING``)."""
    producer = {n.out: n for n in nodes}
    position = {n: i for i, n in enumerate(nodes)}
    done: set[Node] = set()
    order: list[Node] = []
    raising: list[Node] = []
    for node in nodes:
        if _runnable(node):
            if node.op in _RAISING:
                raising.append(node)
            continue
        before = [r for r in raising if r not in done]
        needed, todo = set(before), [node, *before]
        while todo:
            m = todo.pop()
            for v in m.inputs:
                p = producer.get(v)
                if p is not None and p not in done and p not in needed:
                    needed.add(p)
                    todo.append(p)
        order += sorted(needed, key=position.__getitem__)
        order.append(node)
        done |= needed | {node}
    return order + [n for n in nodes if n not in done]


def _wrap(graph: Graph) -> Graph:
    hoisted = _hoisted(graph.nodes)
    runs, run = [], []
    for node in hoisted:
        if _runnable(node):
            run.append(node)
            continue
        runs.append(run)
        run = []
    runs.append(run)
    runs = [r for r in runs if sum(n.op != "constant" for n in r) >= MIN_STEPS]
    if not runs:
        return graph
    made_by = {}  # value -> the runner's step making it (a kernel or a library call)
    for k, kern in enumerate(fuse(split_skinny_matmuls(graph), fusible)):
        made_by.update((v, k) for v in kern.outputs)
    runs = [r for r in runs if len({made_by.get(n.out) for n in r
                                    if n.op not in VIEW_OPS | {"constant"}}) >= MIN_STEPS]
    readers: dict[Value, int] = {}  # value -> the position of its last reader
    for i, node in enumerate(hoisted):
        for v in node.inputs:
            readers[v] = i
    position = {n: i for i, n in enumerate(hoisted)}
    constants = {n.out: n for n in graph.nodes if n.op == "constant"}
    replaced: dict[Node, list[Node] | None] = {}
    outputs = set(graph.outputs)
    for run in runs:
        made = _scan_of(run, position, readers, outputs, constants)
        if made is None:
            continue
        for n in run:  # (constants stay: the body has its own copies)
            if n.op != "constant":
                replaced[n] = None
        replaced[next(n for n in run if n.op != "constant")] = made
    if not replaced:
        return graph
    nodes = []
    for n in hoisted:
        if n not in replaced:
            nodes.append(n)
        elif replaced[n] is not None:
            nodes += replaced[n]
    return graph.replace(nodes=nodes)


def _scan_of(run: list[Node], position: dict, readers: dict, outputs: set,
             constants: dict) -> list[Node] | None:
    """The nodes replacing ``run``: a scan of one step whose body is the run (its values
    read from outside as consts, constants copied in, those read after it as ys), each
    y picked out and reshaped to the run's value; None where the fused driver cannot run
    the body."""
    last = position[run[-1]]
    inside = {n.out for n in run}
    fresh: dict[Value, Value] = {}
    ext: list[Value] = []
    body_nodes = []

    def inner(v: Value) -> Value:
        if v not in fresh:
            fresh[v] = Value(v.type)
            if v in constants and v not in inside:
                n = constants[v]
                body_nodes.append(Node(n.op, (), n.attrs, fresh[v], n.loc))
            elif v not in inside:
                ext.append(v)
        return fresh[v]

    for n in run:
        ins = tuple(inner(v) for v in n.inputs)
        out = fresh[n.out] = Value(n.out.type)
        body_nodes.append(Node(n.op, ins, n.attrs, out, n.loc))
    exported = [n.out for n in run if n.op != "constant"
                and (n.out in outputs or readers.get(n.out, -1) > last)]
    consts = [fresh[v] for v in ext]
    body = Graph(consts, body_nodes, [fresh[v] for v in exported], "straight")
    loop = Scan(body, len(consts), 0, 1)
    if not exported or fused.source(loop) is None:
        return None
    loc = run[0].loc
    res = Value(results_type(len(exported)))
    made = [Node("scan", tuple(ext), {"loop": loop}, res, loc)]
    for i, v in enumerate(exported):
        stacked = Value(loop.result_types()[i])
        made.append(Node("loop_output", (res,), {"index": i, "type": stacked.type}, stacked, loc))
        made.append(Node("reshape", (stacked,), {"shape": v.type.shape}, v, loc))
    return made
