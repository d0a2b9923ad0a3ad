"""The IR: verifier, text printer, DOT exporter, dead-code elimination and the pipeline."""

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import IRError
from tracejit.ir import Graph, Node, TensorType, Value, verify
from tracejit.passes import dce, run_pipeline

F32 = np.dtype(np.float32)


def _graph():
    x = Value(TensorType((3,), F32), "x")
    y = Value(TensorType((3,), F32))
    z = Value(TensorType((3,), F32))
    n1 = Node("exp", (x,), {}, y, None)
    n2 = Node("add", (y, x), {}, z, None)
    return x, y, z, n1, n2


def test_verifier_accepts_a_good_graph():
    x, _, z, n1, n2 = _graph()
    verify(Graph([x], [n1, n2], [z]))


@pytest.mark.parametrize(
    "defect", ["order", "unknown_op", "wrong_type", "twice", "undefined_out", "bad_rule"]
)
def test_verifier_rejects(defect):
    x, y, z, n1, n2 = _graph()
    nodes, outs = [n1, n2], [z]
    if defect == "order":
        nodes = [n2, n1]
    elif defect == "unknown_op":
        nodes = [Node("frobnicate", (x,), {}, y, None), n2]
    elif defect == "wrong_type":
        nodes = [Node("exp", (x,), {}, Value(TensorType((3,), np.dtype(np.int32))), None)]
        outs = [nodes[0].out]
    elif defect == "twice":
        nodes = [n1, Node("exp", (x,), {}, y, None)]
        outs = [y]
    elif defect == "undefined_out":
        outs = [Value(TensorType((3,), F32))]
    elif defect == "bad_rule":
        w = Value(TensorType((4,), F32))
        nodes = [Node("add", (x, Value(TensorType((4,), F32))), {}, w, None)]
        outs = [w]
    with pytest.raises(IRError):
        verify(Graph([x], nodes, outs))


def layer(x, W, b):
    unused = np.exp(x)  # noqa: F841  (dead code: DCE removes it)
    return np.tanh(x @ W + b)


ARGS = (np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), np.zeros(2, np.float32))


def test_printer_shows_types_ops_and_source_lines():
    lowered = tj.jit(layer).lower(*ARGS)
    text = lowered.ir
    line = layer.__code__.co_firstlineno + 2
    assert text.splitlines()[0] == "def layer(x: f32[4,3], W: f32[3,2], b: f32[2]):"
    assert "f32[4,2] = matmul(x, W)" in text
    assert f"test_ir.py:{line}" in text
    assert text.splitlines()[-1].strip() == "return %3"


def test_dce_removes_unused_work():
    lowered = tj.jit(layer).lower(*ARGS)
    assert "exp" in [n.op for n in lowered.graph.nodes]
    assert "exp" not in [n.op for n in lowered.optimized_graph.nodes]
    assert dce(lowered.graph).nodes == lowered.optimized_graph.nodes


def test_dot_export():
    dot = tj.jit(layer).lower(*ARGS).graph.to_dot()
    assert dot.startswith('digraph "layer" {') and dot.rstrip().endswith("}")
    assert "matmul" in dot and "->" in dot and "f32[4,2]" in dot


def test_pipeline_dump(capsys):
    graph = tj.jit(layer).lower(*ARGS).graph
    run_pipeline(graph, dump=True)
    err = capsys.readouterr().err
    assert "--- layer: traced" in err and "--- layer: after dce" in err


def test_weak_scalar_inputs_are_marked():
    text = tj.jit(lambda x, s: x * s).lower(np.ones(2, np.float32), 2.0).ir
    assert "s: f64[]~" in text and "f32[2] = multiply(x, s)" in text


def test_constants_print_inline_when_small():
    text = tj.jit(lambda x: x + np.array([1.0, 2.0], np.float32)).lower(np.ones(2, np.float32)).ir
    assert "constant(value=[1.,2.])" in text
