"""The SSA IR: values, nodes, graphs, the op registry, verifier and printers."""

from . import (  # noqa: F401  (register every op)
    fft_ops,
    linalg_ops,
    loop_ops,
    ops,
    ordering_ops,
    random_ops,
    signal_ops,
)
from .graph import Graph, Node, Value
from .registry import REGISTRY, Kind, OpDef
from .types import TensorType
from .verify import verify

__all__ = ["Graph", "Kind", "Node", "OpDef", "REGISTRY", "TensorType", "Value", "verify"]
