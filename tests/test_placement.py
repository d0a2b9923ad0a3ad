"""The placement pass on its own: which device computes each node, where transfers go,
strict placement and the fallback warning. Graphs come from tracing; the "GPU" here only
needs a name and a rule for what it supports, so no GPU is involved."""

import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import PlacementError, PlacementWarning
from tracejit.passes.placement import place
from tracejit.targets import CPU, Device

GPU = Device("cuda", 0)


def traced(fn, *args):
    return tj.jit(fn, backend="reference").lower(*args).optimized_graph


def no_sorting_of_uint8(node):
    """A pretend GPU backend that cannot compute anything on uint8."""
    return all(v.type.dtype != np.uint8 for v in (*node.inputs, node.out))


def everything(node):
    return True


def ops(graph):
    return [n.op for n in graph.nodes]


def transfers(graph):
    return [(n.attrs["source"], n.attrs["device"]) for n in graph.nodes if n.op == "transfer"]


X = np.ones((4, 3), np.float32)


def test_host_inputs_go_to_the_gpu_once_and_nothing_comes_back():
    g = traced(lambda x, y: np.exp(x) * x + y, X, X)
    placed = place(g, GPU, [CPU, CPU], everything, CPU)
    assert transfers(placed) == [("cpu", "cuda:0")] * 2  # one per input, reused by both uses
    assert all(placed.placement.where(n.out) == "cuda:0" for n in placed.nodes)
    assert placed.placement.where(placed.outputs[0]) == "cuda:0"
    text = str(placed)
    assert "x: f32[4,3]@cpu" in text and "transfer(x, source='cpu', device='cuda:0')" in text
    assert "# cuda:0, test_placement.py:" in text


def test_resident_inputs_and_host_scalars_need_no_transfer():
    g = traced(lambda x, s: x * s + 1.0, X, 2.0)
    placed = place(g, GPU, [GPU, None], everything, CPU)
    assert transfers(placed) == []
    assert placed.placement.where(placed.inputs[1]) is None  # passed to kernels by value
    assert "s: f64[] weak" in str(placed) or "s: f64[]" in str(placed)


def test_an_unsupported_op_falls_back_to_the_cpu_with_one_warning_naming_it():
    def f(x, b):
        y = np.exp(x)                    # GPU
        c = (b + b) * b                  # uint8: CPU
        return y.sum() + c.astype(np.float32).sum()

    b = np.arange(6, dtype=np.uint8)
    g = traced(f, X, b)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        placed = place(g, GPU, [CPU, CPU], no_sorting_of_uint8, CPU)
    assert len(caught) == 1 and caught[0].category is PlacementWarning
    message = str(caught[0].message)
    assert "add (elementwise, uint8) (at test_placement.py:" in message
    assert "multiply (elementwise, uint8)" in message and "cannot run on cuda:0" in message
    assert caught[0].filename == __file__  # attributed to the user's line
    on_cpu = [n.op for n in placed.nodes if placed.placement.where(n.out) == "cpu"]
    assert on_cpu[:2] == ["add", "multiply"]
    # b stays on the host for the CPU ops; their result goes to the GPU once
    moves = transfers(placed)
    assert moves.count(("cpu", "cuda:0")) >= 2 and ("cuda:0", "cpu") not in moves


def test_strict_placement_raises_at_the_users_line():
    def f(b):
        return b * 2

    g = traced(f, np.arange(3, dtype=np.uint8))
    with pytest.raises(PlacementError, match=r"op multiply \(elementwise, uint8\) .*cannot run "
                       r"on cuda:0 \(strict placement\)") as info:
        place(g, GPU, [CPU], no_sorting_of_uint8, CPU, strict=True)
    assert info.value.location.filename == __file__
    assert "drop strict=True" in str(info.value)


def test_gpu_inputs_of_a_cpu_function_come_to_the_host():
    g = traced(lambda x: np.tanh(x), X)
    placed = place(g, CPU, [GPU], everything, CPU)
    assert transfers(placed) == [("cuda:0", "cpu")]
    assert placed.placement.where(placed.outputs[0]) == "cpu"


def test_constants_live_where_their_users_run():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = traced(lambda x: x * table, X)
    placed = place(g, GPU, [GPU], everything, CPU)
    const = next(n for n in placed.nodes if n.op == "constant")
    assert placed.placement.where(const.out) == "cuda:0" and transfers(placed) == []


def test_the_transfer_op_copies_to_its_device():
    from tracejit.ir.registry import REGISTRY

    assert REGISTRY["transfer"].kind.value == "transfer"
    np.testing.assert_array_equal(REGISTRY["transfer"].impl(X, source="cpu", device="cpu"), X)
