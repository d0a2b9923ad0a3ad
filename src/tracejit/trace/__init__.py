"""Tracing: run a Python function on Tracers and record the NumPy calls as an IR graph."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgument
from ..ir import Graph, TensorType
from . import array_methods, pytree
from .core import Trace, tracing
from .tracer import Tracer

array_methods.install()  # before any Tracer exists: NumPy's protocols, operators, methods

__all__ = ["Tracer", "trace_function"]


def trace_function(fn, build_args, in_types: list[TensorType], in_names: list[str], name: str,
                   writes: list[int] | None = None):
    """Trace ``fn``. ``build_args(leaves)`` rebuilds the call's ``(args, kwargs)`` from one
    Tracer per dynamic leaf. Returns the graph and the output tree definition. With a
    ``writes`` list, the leaves the function wrote to (in place, as NumPy lets it) are
    appended to it and their last versions to the graph's outputs, after the function's
    own: the caller copies those into its arrays."""
    t = Trace(name)
    with tracing(t):
        leaves = [t.new_input(ty, nm) for ty, nm in zip(in_types, in_names, strict=True)]
        args, kwargs = build_args(leaves)
        result = fn(*args, **kwargs)
        out_leaves, out_tree = pytree.flatten(result)
        for leaf in out_leaves:
            if not isinstance(leaf, Tracer) and not _is_literal(leaf):
                raise InvalidArgument(
                    f"{name} returned a {type(leaf).__name__}; jitted functions must return "
                    "arrays, scalars, or tuples/lists/dicts of them",
                )
        written = [i for i, leaf in enumerate(leaves) if leaf._seen] if writes is not None \
            else []
        graph: Graph = t.finish(out_leaves + [leaves[i] for i in written])
        if writes is not None:
            writes.extend(written)
    return graph, out_tree


def _is_literal(x) -> bool:
    return isinstance(x, (bool, int, float, complex, np.generic, np.ndarray))
