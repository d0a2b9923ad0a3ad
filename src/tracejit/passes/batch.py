"""Maps to batched ops: a scan without a recurrence is a map, and a map of ops that have a
batched form is those ops on the stacked arrays, with no loop left.

``lax.map(lambda x: W @ x, X)`` (or Theano's ``scan(lambda x, W: np.dot(W, x),
sequences=X, non_sequences=W)``) runs ``W @ X[t]`` once per step; the same values come
out of one matmul ``W @ X[:, :, None]``, which BLAS runs at full speed. The rewrite is
JAX's ``vmap``: each op of the body has a batching rule, keyed by the op, that takes its
inputs as values of the enclosing graph, each with its batch axis (``0``: the value
stacks one slice per step along a new first axis; ``None``: the same value at every step,
a const), and emits the op on the stacked arrays. Every rule here returns its result
batched along axis 0 (the axis the scan stacks its ``ys`` along), so rules read inputs
batched at 0 or not at all. Ops whose inputs are all unbatched are copied out as they are
(the work runs once, as hoisting would do).

A scan inside the body (a ``lax.scan`` of its own, or repeated steps the roll pass rolled
into one) is batched as JAX's vmap of a scan: one scan over the stacked values, whose
body is batched in turn, each carry batched where its start or a step makes it so.

A scan is a map when its body hands every carry back unchanged (``n_carry == 0`` in
``lax.map``): its final carry is the initial one, and its ``ys`` are the body's outputs
stacked. ``reverse`` changes nothing (a step's slice is stored at its own index either
way). A scan of length 0 stays (its body never runs; the batched ops could raise). A body
with an op that has no batching rule, or whose batched form would not give exactly the
stacked type (shape, dtype, weak flag), stays a loop; the ``tracejit.passes.batch``
logger says which op at debug level (``TRACEJIT_LOG=debug``).

NumPy's broadcasting is kept by giving each batched operand of a broadcasting op the
rank of the op's result (axes of size 1 inserted after the batch axis): a const of
higher rank than the slice then broadcasts against the slice's own axes, not the batch
axis. A body's ``np.dot`` of 1-d operands is already a reshape, a 2-d ``matmul`` and a
reshape when traced, and each of those is batched.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from ..errors import TracejitError
from ..ir import Graph, Kind, Node, TensorType, Value
from ..ir.loop_ops import Scan
from ..ir.registry import REGISTRY, has_effect

_log = logging.getLogger("tracejit.passes.batch")


class _Batcher:
    """Emits the batched ops of one map into the enclosing graph."""

    def __init__(self, length: int, loc):
        self.length = length
        self.loc = loc
        self.nodes: list[Node] = []
        self.reshaped: dict[Value, Value] = {}  # a reshape's value -> what it reshapes

    def emit(self, op: str, inputs: list[Value], **attrs) -> Value:
        if op == "reshape":  # a reshape of a reshape is one (the GEMM's leave pairs)
            x = self.reshaped.get(inputs[0], inputs[0])
            if not x.type.weak:  # (a weak scalar's reshape to () would stay weak)
                if x.type.shape == tuple(attrs["shape"]):
                    return x
                inputs = [x]
        out = Value(REGISTRY[op].rule(*(v.type for v in inputs), **attrs))
        self.nodes.append(Node(op, tuple(inputs), attrs, out, self.loc))
        if op == "reshape":
            self.reshaped[out] = inputs[0]
        return out

    def expand(self, x: Value, rank: int) -> Value:
        """Batched ``x`` with axes of size 1 after the batch axis, so that its slice has
        ``rank`` dimensions (broadcasting then lines the slice up with the others)."""
        shape = x.type.shape
        missing = rank - (len(shape) - 1)
        if missing <= 0:
            return x
        return self.emit("reshape", [x], shape=(shape[0], *(1,) * missing, *shape[1:]))

    def stack(self, x: Value) -> Value:
        """Unbatched ``x`` repeated along a new batch axis (a broadcast view)."""
        return self.emit("broadcast_to", [x], shape=(self.length, *x.type.shape))


Dims = list[int | None]
Rule = Callable[[_Batcher, Node, list[Value], Dims], Value | None]


def _elementwise(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    rank = node.out.type.ndim
    return b.emit(node.op, [x if d is None else b.expand(x, rank)
                            for x, d in zip(args, dims, strict=True)], **node.attrs)


def _broadcasting(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    """solve (and matmul of stacks): the stack dimensions broadcast as an elementwise
    op's do."""
    return _elementwise(b, node, args, dims)


def _matmul(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    """A matrix times a stack of matrices is one GEMM (the slides' "this should be just
    a GEMM call"), not a loop of small products: the stack is laid side by side."""
    (x, y), (dx, dy) = args, dims
    if node.out.type.ndim != 2 or (dx is not None and dy is not None):
        return _broadcasting(b, node, args, dims)
    if dy is None:  # x[t] @ y = rows of (x stacked as rows) @ y
        n, m, k = x.type.shape
        out = b.emit("matmul", [b.emit("reshape", [x], shape=(n * m, k)), y])
        return b.emit("reshape", [out], shape=(n, m, y.type.shape[1]))
    n, k, m = y.type.shape  # x @ y[t] = columns of x @ (y stacked as columns)
    if m == 1:
        cols = b.emit("transpose", [b.emit("reshape", [y], shape=(n, k))], perm=(1, 0))
        out = b.emit("transpose", [b.emit("matmul", [x, cols])], perm=(1, 0))
        return b.emit("reshape", [out], shape=(n, x.type.shape[0], 1))
    cols = b.emit("reshape", [b.emit("transpose", [y], perm=(1, 0, 2))], shape=(k, n * m))
    out = b.emit("reshape", [b.emit("matmul", [x, cols])], shape=(x.type.shape[0], n, m))
    return b.emit("transpose", [out], perm=(1, 0, 2))


def _per_slice(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    """Ops on the last axes of a stack of matrices (numpy.linalg): a stack more."""
    return b.emit(node.op, args, **node.attrs)


def _reduce(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    axis = tuple(a + 1 for a in node.attrs["axis"])
    return b.emit(node.op, args, **{**node.attrs, "axis": axis})


def _arg_reduce(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    (x,), axis, keepdims = args, node.attrs["axis"], node.attrs["keepdims"]
    if axis is not None:
        return b.emit(node.op, [x], axis=axis + 1, keepdims=keepdims)
    flat = b.emit("reshape", [x], shape=(b.length, math.prod(x.type.shape[1:])))
    out = b.emit(node.op, [flat], axis=1, keepdims=False)
    return b.emit("reshape", [out], shape=(b.length, *node.out.type.shape)) if keepdims else out


def _along_axis(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    """cumsum, cumprod, cummax, cummin, sort, argsort, partition, argpartition, gather
    (its indices unbatched): one axis more in front."""
    if any(d is not None for d in dims[1:]):
        return None  # gather with indices that change per step: no rule (yet)
    return b.emit(node.op, args, **{**node.attrs, "axis": node.attrs["axis"] + 1})


def _scatter(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value | None:
    if any(d is not None for d in dims[2:]):
        return None  # indices that change per step
    x, u = (v if d is not None else b.stack(v) for v, d in zip(args[:2], dims[:2], strict=True))
    return b.emit(node.op, [x, u, *args[2:]], axis=node.attrs["axis"] + 1)


def _reshape(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    return b.emit("reshape", args, shape=(b.length, *node.attrs["shape"]))


def _transpose(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    return b.emit("transpose", args, perm=(0, *(p + 1 for p in node.attrs["perm"])))


def _broadcast_to(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    shape = tuple(node.attrs["shape"])
    return b.emit("broadcast_to", [b.expand(args[0], len(shape))], shape=(b.length, *shape))


def _slice_attrs(b: _Batcher, attrs: dict) -> dict:
    return {"starts": (0, *attrs["starts"]), "stops": (b.length, *attrs["stops"]),
            "steps": (1, *attrs["steps"])}


def _slice(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    return b.emit("slice", args, **_slice_attrs(b, node.attrs))


def _update_slice(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    stacked = [v if d is not None else b.stack(v) for v, d in zip(args, dims, strict=True)]
    return b.emit("update_slice", stacked, **_slice_attrs(b, node.attrs))


def _concatenate(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    stacked = [v if d is not None else b.stack(v) for v, d in zip(args, dims, strict=True)]
    return b.emit("concatenate", stacked, axis=node.attrs["axis"] + 1)


def _pad(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value:
    widths = ((0, 0), *node.attrs["widths"])
    return b.emit("pad", args, widths=widths, value=node.attrs["value"])


def _searchsorted(b: _Batcher, node: Node, args: list[Value], dims: Dims) -> Value | None:
    if dims[0] is not None:
        return None  # a sorted array per step: numpy's searchsorted takes one
    return b.emit("searchsorted", args, **node.attrs)


RULES: dict[str, Rule] = {
    **dict.fromkeys(("sum", "prod", "max", "min", "any", "all"), _reduce),
    "argmax": _arg_reduce, "argmin": _arg_reduce,
    **dict.fromkeys(("cumsum", "cumprod", "cummax", "cummin", "sort", "argsort", "partition",
                      "argpartition", "gather"), _along_axis),
    "scatter": _scatter, "scatter_add": _scatter,
    "matmul": _matmul, "solve": _broadcasting,
    **dict.fromkeys(("det", "slogdet", "inv", "cholesky", "qr", "eigh", "svd"), _per_slice),
    "reshape": _reshape, "transpose": _transpose, "broadcast_to": _broadcast_to,
    "slice": _slice, "update_slice": _update_slice, "concatenate": _concatenate, "pad": _pad,
    "searchsorted": _searchsorted,
}


def _rule(op: str) -> Rule | None:
    if op in RULES:
        return RULES[op]
    return _elementwise if REGISTRY[op].kind is Kind.ELEMENTWISE else None


def is_map(loop: Scan) -> bool:
    """Whether ``loop`` has no recurrence: each carry comes back from the body unchanged."""
    body, nc = loop.body, loop.n_consts
    return all(body.outputs[j] is body.inputs[nc + j] for j in range(loop.n_carry))


def batch_maps(graph: Graph) -> Graph:
    """Replace each scan that is a map of ops with batching rules by those ops."""
    nodes: list[Node] = []
    subst: dict[Value, Value] = {}
    results: dict[Value, list[Value]] = {}  # a batched scan's value -> its results
    for node in graph.nodes:
        if any(v in subst for v in node.inputs):
            node = Node(node.op, tuple(subst.get(v, v) for v in node.inputs), node.attrs,
                        node.out, node.loc)
        if node.op == "loop_output" and node.inputs[0] in results:
            subst[node.out] = results[node.inputs[0]][node.attrs["index"]]
            continue
        found = _batched(node) if node.op == "scan" else None
        if found is None:
            nodes.append(node)
            continue
        emitted, results[node.out] = found
        nodes.extend(emitted)
    if not results:
        return graph
    return graph.replace(nodes=nodes, outputs=[subst.get(v, v) for v in graph.outputs])


def _batched(node: Node) -> tuple[list[Node], list[Value]] | None:
    """The batched ops standing for scan ``node`` and its results, or None if it stays."""
    loop: Scan = node.attrs["loop"]
    if loop.length == 0 or not is_map(loop):
        return None
    body, fixed = loop.body, loop.n_consts + loop.n_carry
    b = _Batcher(loop.length, node.loc)
    env: Env = {v: (x, None if i < fixed else 0)
                for i, (v, x) in enumerate(zip(body.inputs, node.inputs, strict=True))}
    failed = _batch_nodes(b, body.nodes, env)
    if failed is not None:
        return _stays(node, *failed)
    b.loc = node.loc
    outs = list(node.inputs[loop.n_consts:fixed])  # the carries, unchanged
    for v, t in zip(body.outputs[loop.n_carry:], loop.result_types()[loop.n_carry:],
                    strict=True):
        x, d = env[v]
        outs.append(x if d is not None else b.stack(x))
        if outs[-1].type != t:
            return _stays(node, None, f"a result would be {outs[-1].type}, not {t}")
    return b.nodes, outs


Env = dict[Value, tuple[Value, "int | None"]]  # a body's value -> (its batched form, axis)


def _batch_nodes(b: _Batcher, nodes: list[Node], env: Env) -> tuple[Node, str] | None:
    """Emit the batched form of ``nodes`` (a body's) with ``b``, filling ``env``; the node
    that has none, and why, if one has none."""
    loops: dict[Value, list[tuple[Value, int | None]]] = {}  # an inner scan's results
    for n in nodes:
        if n.op == "loop_output" and n.inputs[0] in loops:
            env[n.out] = loops[n.inputs[0]][n.attrs["index"]]
            continue
        args = [env[v][0] for v in n.inputs]
        dims = [env[v][1] for v in n.inputs]
        b.loc = n.loc
        if has_effect(n):
            return n, "it has an effect"
        if all(d is None for d in dims):  # the same at every step: once, outside
            env[n.out] = (b.emit(n.op, args, **n.attrs), None)
            continue
        if n.op == "scan":
            results = _inner_scan(b, n, args, dims)
            if isinstance(results, str):
                return n, results
            loops[n.out] = results
            continue
        rule = _rule(n.op)
        if rule is None:
            return n, "no batching rule"
        try:
            out = rule(b, n, args, dims)
        except TracejitError as e:  # a rule's mistake: the loop stays, as it was
            return n, f"its batched form is rejected: {e.message}"
        want = TensorType((b.length, *n.out.type.shape), n.out.type.dtype)
        if out is None or out.type != want:
            return n, ("no batching rule for these operands" if out is None
                       else f"the batched form gives {out.type}, not {want}")
        env[n.out] = (out, 0)
    return None


def _batched_inputs(body: Graph, batched: list[bool]) -> list[bool]:
    """Which of ``body``'s outputs depend on its ``batched`` inputs."""
    seen = {v for v, bt in zip(body.inputs, batched, strict=True) if bt}
    for n in body.nodes:
        if any(v in seen for v in n.inputs):
            seen.add(n.out)
    return [v in seen for v in body.outputs]


def _swap01(b: _Batcher, x: Value) -> Value:
    """``x`` with its first two axes swapped (a stack of scanned arrays <-> a scanned
    array of stacks)."""
    return b.emit("transpose", [x], perm=(1, 0, *range(2, x.type.ndim)))


def _inner_scan(b: _Batcher, node: Node, args: list[Value],
                dims: list[int | None]) -> list[tuple[Value, int | None]] | str:
    """A scan inside a map body (a loop the roll pass made of repeated steps, say) as one
    scan over batched values, JAX's vmap of a scan: its body batched in turn, each carry
    batched where its start or the body makes it so, scanned inputs and stacked outputs
    with the batch axis second while the scan runs. The results with their batch axes,
    or why it has no batched form."""
    loop: Scan = node.attrs["loop"]
    nc, nk = loop.n_consts, loop.n_carry
    flags = [d is not None for d in dims]
    while True:  # a carry is batched if its start is, or a step makes it so
        out = _batched_inputs(loop.body, flags)
        more = [flags[nc + j] or out[j] for j in range(nk)]
        if more == flags[nc:nc + nk]:
            break
        flags[nc:nc + nk] = more
    inputs = []
    for i, (x, d, bt) in enumerate(zip(args, dims, flags, strict=True)):
        if bt and d is None:
            x = b.stack(x)
        inputs.append(_swap01(b, x) if bt and i >= nc + nk else x)
    inner = _Batcher(b.length, node.loc)
    params = [Value(TensorType(x.type.shape[1:], x.type.dtype, x.type.weak)
                    if i >= nc + nk else x.type) for i, x in enumerate(inputs)]
    env: Env = {v: (p, 0 if bt else None)
                for v, p, bt in zip(loop.body.inputs, params, flags, strict=True)}
    failed = _batch_nodes(inner, loop.body.nodes, env)
    if failed is not None:
        return f"its inner loop cannot be batched: {failed[1]} ({failed[0].op})"
    outs = []
    for j, v in enumerate(loop.body.outputs):
        x, d = env[v]
        outs.append(inner.stack(x) if d is None and (j >= nk or flags[nc + j]) else x)
    body = Graph(params, inner.nodes, outs, loop.body.name)
    scan = Scan(body, nc, nk, loop.length, loop.reverse, loop.truncate)
    res = b.emit("scan", inputs, loop=scan)
    results = []
    for i, t in enumerate(scan.result_types()):
        x = b.emit("loop_output", [res], index=i, type=t)
        results.append((_swap01(b, x), 0) if i >= nk else (x, 0 if flags[nc + i] else None))
    return results


def _stays(node: Node, at: Node | None, why: str) -> None:
    _log.debug("batch: the map at %s stays a loop: %s%s", node.loc, why,
               f" ({at.op} at {at.loc})" if at is not None else "")
    return None
