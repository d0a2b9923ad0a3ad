"""Tracing: run a Python function on Tracers and record the NumPy calls as an IR graph."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgument
from ..ir import Graph, TensorType
from . import array_methods, constant_writes, creation, fft, linalg, pytree, random  # noqa: F401
from .core import Trace, tracing
from .tracer import Tracer
from .updates import stores

array_methods.install()  # before any Tracer exists: NumPy's protocols, operators, methods

__all__ = ["Tracer", "trace_function"]
assert creation  # imported for its registrations (np.array, np.zeros, ... while tracing)


def trace_function(fn, build_args, in_types: list[TensorType], in_names: list[str], name: str,
                   writes: list | None = None, aliases: list | None = None):
    """Trace ``fn``. ``build_args(leaves)`` rebuilds the call's ``(args, kwargs)`` from one
    Tracer per dynamic leaf. Returns the graph and the output tree definition. With a
    ``writes`` list, each leaf the function wrote to (in place, as NumPy lets it) is
    appended to it as ``(leaf index, regions)`` and what to store into the caller's array
    to the graph's outputs, after the function's own (see ``updates.stores``): the leaf's
    last version (``regions`` is ``(None,)``), or the updates of the regions it wrote (one
    output per region, each ``slice`` attributes, stored in order). With an ``aliases``
    list, each output that is an argument, or a view of one, as NumPy would return it (the
    same array object, ``out=``'s, ``x[1:]``, ``x.T``) is appended to it as ``(output
    index, leaf index, view path)``: the call returns that view of the caller's array."""
    t = Trace(name)
    with tracing(t):
        leaves = [t.new_input(ty, nm) for ty, nm in zip(in_types, in_names, strict=True)]
        args, kwargs = build_args(leaves)
        with random.unfrozen(fn, args, kwargs):  # no generator drawn from unseen
            try:
                result = fn(*args, **kwargs)
            except (ValueError, TypeError) as e:  # NumPy's, from `buf[0] = traced`?
                typed = constant_writes.explain(e)
                if typed is None:
                    raise
                raise typed from None
        out_leaves, out_tree = pytree.flatten(result)
        for leaf in out_leaves:
            if not isinstance(leaf, Tracer) and not _is_literal(leaf):
                raise InvalidArgument(
                    f"{name} returned a {type(leaf).__name__}; jitted functions must return "
                    "arrays, scalars, or tuples/lists/dicts of them",
                )
        if aliases is not None:
            aliases += _aliases(out_leaves, leaves)
        stored = []
        for i, leaf in enumerate(leaves):
            if writes is not None and leaf._seen:
                parts = stores(t.nodes, t.inputs[i], leaf._value)
                writes.append((i, tuple(attrs for attrs, _ in parts)))
                stored += [value for _, value in parts]
        graph: Graph = t.finish(out_leaves + [Tracer(v, t) for v in stored])
    return graph, out_tree


def _aliases(out_leaves: list, leaves: list[Tracer]) -> list[tuple[int, int, tuple]]:
    """(output index, leaf index, view path) of each output that is an input's array or a
    view of it (a root Tracer and the view ops from it: see ``Tracer._view_of``). A NumPy
    scalar (``x[0]`` of a vector) is a copy in NumPy too, and every 0-d result comes back
    as a NumPy scalar (``api._finish``), also where NumPy returns a 0-d array."""
    index = {id(leaf): i for i, leaf in enumerate(leaves)}
    found = []
    for k, out in enumerate(out_leaves):
        if not isinstance(out, Tracer) or out._scalar or not out.ndim:
            continue
        root = out if out._base is None else out._base
        i = index.get(id(root))
        if i is not None and leaves[i] is root:
            found.append((k, i, out._path))
    return found


def _is_literal(x) -> bool:
    return isinstance(x, (bool, int, float, complex, np.generic, np.ndarray))
