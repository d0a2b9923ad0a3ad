"""Long unrolled traces and deep graphs: the passes walk them without recursing, so no
valid program raises RecursionError (NPBench's ``cholesky`` at 100x100 did, in simplify)."""

from __future__ import annotations

import sys

import numpy as np
from draws import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from tracejit.backends import reference
from tracejit.ir import Graph, Node, TensorType, Value
from tracejit.ir.ops import slice_key, slice_length
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


def _region(draw, shape: tuple[int, ...]) -> dict:
    """A basic slice of ``shape`` in the IR's normal form: any start, stop and step,
    negative steps, one element and none included."""
    bounds = [draw(st.slices(n)).indices(n) for n in shape]
    return {"starts": tuple(b[0] for b in bounds), "stops": tuple(b[1] for b in bounds),
            "steps": tuple(b[2] for b in bounds)}


@st.composite
def _writes_then_read(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=2)))
    regions = [_region(draw, shape) for _ in range(draw(st.integers(1, 6)))]
    read = regions[draw(st.integers(0, len(regions) - 1))] if draw(st.booleans()) \
        else _region(draw, shape)
    return shape, regions, read


@settings(max_examples=examples(300), deadline=None)
@given(_writes_then_read())
def test_a_read_after_writes_is_what_numpy_reads(case) -> None:
    """Writes to regions of any layout (overlapping, apart, equal, strided, reversed, of
    one element or none), then a read of a written or any region: the simplified graph
    (which reads past the writes it cannot see, or takes the one write it reads exactly)
    computes NumPy's bits."""
    shape, regions, read = case
    f64 = np.dtype(np.float64)
    x = Value(TensorType(shape, f64))
    nodes, current = [], x
    for k, region in enumerate(regions):
        size = tuple(slice_length(*r) for r in zip(*region.values(), strict=True))
        value = Value(TensorType(size, f64))
        nodes.append(Node("constant", (), {"value": np.full(size, k + 0.5)}, value, None))
        written = Value(TensorType(shape, f64))
        nodes.append(Node("update_slice", (current, value), region, written, None))
        current = written
    size = tuple(slice_length(*r) for r in zip(*read.values(), strict=True))
    got, doubled = Value(TensorType(size, f64)), Value(TensorType(size, f64))
    nodes.append(Node("slice", (current,), read, got, None))
    nodes.append(Node("add", (got, got), {}, doubled, None))
    graph = Graph([x], nodes, [doubled])
    data = -np.arange(float(np.prod(shape))).reshape(shape)
    want = data.copy()
    for k, region in enumerate(regions):
        want[slice_key(*region.values())] = k + 0.5
    (expected,) = reference.compile(graph)(data)
    (simplified,) = reference.compile(simplify(graph))(data)
    np.testing.assert_array_equal(expected, 2 * want[slice_key(*read.values())])
    assert simplified.tobytes() == expected.tobytes() and simplified.shape == expected.shape
