"""Evaluate a graph with NumPy, node by node: what a loop op does with its body graph
when no backend has compiled it (the reference backend's loops, and constant folding)."""

from __future__ import annotations

import numpy as np

from .graph import Graph
from .registry import REGISTRY


def evaluate(graph: Graph, args: list) -> list:
    """``graph``'s outputs for the input values ``args`` (weak values as Python scalars)."""
    env = dict(zip(graph.inputs, args, strict=True))
    for node in graph.nodes:
        value = REGISTRY[node.op].impl(*[env[v] for v in node.inputs], **node.attrs)
        if node.out.type.weak:
            value = np.asarray(value).item()
        env[node.out] = value
    return [env[v] for v in graph.outputs]
