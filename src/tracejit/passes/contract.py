"""Skinny matmuls as multiplies and sums, so that fusion can put them into loop kernels.

``a1 @ W2`` with ``W2: f32[1000, 2]`` reads the 20 MB hidden layer once more, through BLAS,
only to produce two numbers per row; written as two row sums of ``a1 * W2[:, j]`` it joins
the loop kernel that computes ``a1`` and costs nothing extra in memory. Likewise the weight
gradients ``a1.T @ d`` and ``X.T @ d`` become column sums in the backward pass's loop over
``a1``. Done for 2-D float matmuls with a contracted dimension above ``SMALL_K`` (smaller
ones are unrolled by the backend) and at most ``max_width`` rows or columns in the result.
Reading ``transpose(x)`` through ``x``'s own layout keeps the loops over ``x``'s shape.

Only when that saves the read: the split pays where the wide operand is computed by
elementwise work, whose loop kernel the products join. Where it is an argument or a library
result, a kernel would read it just as BLAS does, and BLAS (``gemv``, threaded) reads it
faster: ``A @ x`` on a 4000 x 5000 float64 argument ran at 0.4x NumPy's speed split. So that
matmul stays a library call.

The sums accumulate in another order than BLAS: float results differ by rounding only.
"""

from __future__ import annotations

from ..ir import Graph, Kind, Node, Value
from ..ir.registry import REGISTRY
from .dce import dce

SMALL_K = 16


def split_skinny_matmuls(graph: Graph, max_width: int = 4) -> Graph:
    producers = graph.producers()
    prep: dict[Value, list[Node]] = {}  # slices of an operand, placed right after it
    main: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        if node.op == "matmul":
            split = _split(node, producers, max_width)
            if split is not None:
                for v, nodes in split[0].items():
                    prep.setdefault(v, []).extend(nodes)
                main[node] = split[1]
    if not main:
        return graph
    # Slices of an operand go right after its definition, not before the matmul: fusion
    # can then add the products to a loop kernel that runs before the matmul's position.
    nodes = [n for v in graph.inputs for n in prep.get(v, [])]
    for node in graph.nodes:
        nodes += main.get(node, [node])
        nodes += prep.get(node.out, [])
    return dce(graph.replace(nodes=nodes))  # the transposes the products no longer read


def _split(node: Node, producers: dict[Value, Node], width: int):
    """(slices of the operands, keyed by operand; the nodes computing the product)."""
    a, b = node.inputs
    if (a.type.ndim, b.type.ndim) != (2, 2) or a.type.dtype.kind != "f" \
            or not a.type.dtype == b.type.dtype == node.out.type.dtype:
        return None
    (m, k), n = a.type.shape, b.type.shape[1]
    if k <= SMALL_K or min(m, n) > width:
        return None
    if not _computed_elementwise(a if n <= width else b, producers):
        return None  # BLAS reads an argument faster than a loop kernel would
    prep: dict[Value, list[Node]] = {}
    out: list[Node] = []

    def emit(op: str, inputs: tuple[Value, ...], into: list[Node], **attrs) -> Value:
        t = REGISTRY[op].rule(*(v.type for v in inputs), **attrs)
        into.append(Node(op, inputs, attrs, Value(t), node.loc))
        return into[-1].out

    def part(x: Value, starts, stops, shape) -> Value:
        """x[starts:stops] reshaped to ``shape``, computed where x is defined."""
        into = prep.setdefault(x, [])
        s = emit("slice", (x,), into, starts=starts, stops=stops, steps=(1, 1))
        return s if x.type.shape[0] == 0 or s.type.shape == shape else \
            emit("reshape", (s,), into, shape=shape)

    def total(x: Value, y: Value, axis: int) -> Value:
        prod = emit("multiply", (x, y), out)
        return emit("sum", (prod,), out, axis=(axis,), keepdims=True, dtype=None)

    src = producers.get(a)
    at = src.inputs[0] if src is not None and src.op == "transpose" and \
        src.attrs["perm"] == (1, 0) else None  # a == at.T, read in at's own layout
    parts = []
    if n <= width:  # out[:, j] = sum over k of a[:, k] * b[k, j]
        for j in range(n):
            if at is not None:
                s = total(at, part(b, (0, j), (k, j + 1), (k, 1)), 0)
                parts.append(emit("reshape", (s,), out, shape=(m, 1)))
            else:
                parts.append(total(a, part(b, (0, j), (k, j + 1), (1, k)), 1))
        axis = 1
    else:  # out[i, :] = sum over k of a[i, k] * b[k, :]
        for i in range(m):
            ai = part(at, (0, i), (k, i + 1), (k, 1)) if at is not None else \
                part(a, (i, 0), (i + 1, k), (k, 1))
            parts.append(total(ai, b, 0))
        axis = 0
    if len(parts) == 1:
        out[-1].out = node.out
    else:
        out.append(Node("concatenate", tuple(parts), {"axis": axis}, node.out, node.loc))
    return prep, out


def _computed_elementwise(x: Value, producers: dict[Value, Node]) -> bool:
    """Whether ``x`` (or the matrix it transposes) comes out of an elementwise node, so a
    loop kernel computing it can take the products in without another read of it."""
    src = producers.get(x)
    if src is not None and src.op == "transpose" and src.attrs["perm"] == (1, 0):
        src = producers.get(src.inputs[0])
    return src is not None and REGISTRY[src.op].kind is Kind.ELEMENTWISE
