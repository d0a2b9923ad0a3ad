"""Long unrolled traces and deep graphs: the passes walk them without recursing, so no
valid program raises RecursionError (NPBench's ``cholesky`` at 100x100 did, in simplify)."""

from __future__ import annotations

import sys

import numpy as np

from tracejit.backends import reference
from tracejit.ir import Graph, Node, TensorType, Value
from tracejit.passes import simplify


def _row(k: int) -> dict:
    return {"starts": (k, 0), "stops": (k + 1, 4), "steps": (1, 1)}


def test_a_read_past_thousands_of_writes_is_one_rewrite() -> None:
    """Row 0 read after a write to every other row of a tall array is a read of the input:
    the simplifier skips the writes in one walk, however many there are (one rewrite per
    write, each recursing into the next, overflowed Python's stack)."""
    n = 3 * sys.getrecursionlimit()
    f64 = np.dtype(np.float64)
    x = Value(TensorType((n, 4), f64))
    row = TensorType((1, 4), f64)
    nodes, current = [], x
    for k in range(1, n):
        value = Value(row)
        nodes.append(Node("constant", (), {"value": np.full((1, 4), float(k))}, value, None))
        written = Value(TensorType((n, 4), f64))
        nodes.append(Node("update_slice", (current, value), _row(k), written, None))
        current = written
    first, doubled = Value(row), Value(row)
    nodes.append(Node("slice", (current,), _row(0), first, None))
    nodes.append(Node("add", (first, first), {}, doubled, None))
    graph = Graph([x], nodes, [doubled, current])
    simplified = simplify(graph)
    reads = [node for node in simplified.nodes if node.op == "slice"]
    assert [r.inputs for r in reads] == [(x,)]
    data = np.arange(n * 4.0).reshape(n, 4)
    got, wrote = reference.compile(simplified)(data)
    want, whole = reference.compile(graph)(data)
    np.testing.assert_array_equal(got, 2 * data[:1])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(wrote, whole)
