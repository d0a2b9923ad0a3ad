"""Tracing: run a Python function on Tracers and record the NumPy calls as an IR graph."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InvalidArgument
from ..ir import Graph, TensorType
from . import array_methods, constant_writes, creation, fft, linalg, pytree, random  # noqa: F401
from .core import Trace, tracing
from .layout import in_elements
from .tracer import Tracer
from .updates import stores

array_methods.install()  # before any Tracer exists: NumPy's protocols, operators, methods

__all__ = ["Tracer", "trace_function"]
assert creation  # imported for its registrations (np.array, np.zeros, ... while tracing)


def trace_function(fn, build_args, in_types: list[TensorType], in_names: list[str], name: str,
                   writes: list | None = None, aliases: list | None = None,
                   strides: list | None = None, memories: list | None = None):
    """Trace ``fn``. ``build_args(leaves)`` rebuilds the call's ``(args, kwargs)`` from one
    Tracer per dynamic leaf. Returns the graph and the output tree definition. With a
    ``writes`` list, each leaf the function wrote to (in place, as NumPy lets it) is
    appended to it as ``(leaf index, regions)`` and what to store into the caller's array
    to the graph's outputs, after the function's own (see ``updates.stores``): the leaf's
    last version (``regions`` is ``(None,)``), or the updates of the regions it wrote (one
    output per region, each ``slice`` attributes, stored in order). With an ``aliases``
    list, each output that is an argument, or a view of one, as NumPy would return it (the
    same array object, ``out=``'s, ``x[1:]``, ``x.T``) is appended to it as ``(output
    index, leaf index, view path)``: the call returns that view of the caller's array; an
    index of the path computed in the function (``x[i + 1]``) is an output of the graph
    after the function's own (and before the written arguments').
    ``strides``: per leaf, its array's strides in bytes where it is not C-contiguous (else
    None), from which reshapes of it are views or copies as NumPy's are. With a
    ``memories`` list, each output's memory is appended to it, the function's outputs'
    and the hidden ones' (see ``_memories``)."""
    t = Trace(name)
    with tracing(t):
        leaves = [t.new_input(ty, nm) for ty, nm in zip(in_types, in_names, strict=True)]
        for leaf, layout in zip(leaves, strides or (), strict=False):
            if layout is not None:
                leaf._strides = in_elements(layout, leaf.dtype.itemsize)
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
        hidden: list = []  # outputs after the function's own: see _caller_path, _memories
        if aliases is not None:
            aliases += _aliases(out_leaves, leaves, t.inputs, hidden)
        if memories is not None:
            memories += _memories(out_leaves, leaves, hidden)
        stored = list(hidden)
        for i, leaf in enumerate(leaves):
            if writes is not None and leaf._seen:
                parts = stores(t.nodes, t.inputs[i], leaf._value)
                writes.append((i, tuple(attrs for attrs, _ in parts)))
                stored += [value for _, value in parts]
        graph: Graph = t.finish(out_leaves + [Tracer(v, t) for v in stored])
    return graph, out_tree


class OutputMemory(NamedTuple):
    """Where NumPy's result for one output would be: outputs of one ``number`` share a
    buffer (an array and views of it), outputs of different numbers do not, even where
    the passes make them one value (``np.sort(x), np.sort(x)[::-1]`` merged, ``a`` and
    ``a.copy()``). ``view``: it is a view of that buffer, laid out as the view is; else the
    buffer itself, whose ``strides`` (in elements) are those of ``np.exp(x.T)``, of
    ``np.zeros(n, order="F")``: None for C order. ``derived``: for a view whose buffer
    other outputs share, (the output holding the buffer, the view path from it), from
    which the call takes the view, so that it shares memory as NumPy's does (the passes
    may have computed it apart: a slice moved before an elementwise op)."""

    number: int
    view: bool
    strides: tuple[int, ...] | None
    derived: tuple[int, tuple] | None = None
    read_only: bool = False  # NumPy's is (a diagonal, a broadcast, imag of a real array)


def _memories(out_leaves: list, leaves: list[Tracer],
              hidden: list) -> list[OutputMemory | None]:
    """Per output, its :class:`OutputMemory`, None for what is no array (a scalar, a
    literal, a 0-d result: NumPy returns a scalar); then one for each of ``hidden``,
    where the buffers of views that share one are appended (after the function's outputs:
    the buffer is not one of them) and the run-time indices of their paths."""
    arguments = {id(leaf) for leaf in leaves}
    roots = [None if not isinstance(out, Tracer) or out._scalar or not out.ndim else
             out if out._base is None else out._base for out in out_leaves]
    numbers: dict[int, int] = {}
    shared: dict[int, int] = {}  # per root that several outputs share: how many
    for root in roots:
        if root is not None and id(root) not in arguments:
            shared[id(root)] = shared.get(id(root), 0) + 1
    holders: dict[int, int] = {}  # the first output that is each array
    for k, out in enumerate(out_leaves):
        holders.setdefault(id(out), k)
    extra: dict[int, OutputMemory] = {}
    found = []
    for out, root in zip(out_leaves, roots, strict=True):
        if root is None:
            found.append(None)
            continue
        number = numbers.setdefault(id(root), len(numbers))
        derived = None
        if out._base is None and holders.get(id(out), len(found)) < len(found):
            derived = (holders[id(out)], ())  # returned again: the same array, as NumPy's
        elif out._base is not None and shared.get(id(root), 0) > 1:
            holder = holders.get(id(root))
            if holder is None:  # the buffer is no output: a hidden one
                holder = holders[id(root)] = len(out_leaves) + len(hidden)
                hidden.append(root._value)
                extra[holder] = OutputMemory(number, False, root._strides)
            derived = (holder, _caller_path(out, {}, len(out_leaves), hidden))
        found.append(OutputMemory(number, out._base is not None, root._strides, derived,
                                  out._readonly))
    return found + [extra.get(len(out_leaves) + j) for j in range(len(hidden))]


def _aliases(out_leaves: list, leaves: list[Tracer], inputs: list,
             indices: list) -> list[tuple[int, int, tuple]]:
    """(output index, leaf index, view path) of each output that is an input's array or a
    view of it (a root Tracer and the view ops from it: see ``Tracer._view_of``). A NumPy
    scalar (``x[0]`` of a vector) is a copy in NumPy too, and every 0-d result comes back
    as a NumPy scalar (``api._finish``), also where NumPy returns a 0-d array."""
    index = {id(leaf): i for i, leaf in enumerate(leaves)}
    positions = {id(v): i for i, v in enumerate(inputs)}
    found = []
    for k, out in enumerate(out_leaves):
        if not isinstance(out, Tracer) or out._scalar or not out.ndim:
            continue
        root = out if out._base is None else out._base
        i = index.get(id(root))
        if i is not None and leaves[i] is root:
            found.append((k, i, _caller_path(out, positions, len(out_leaves), indices)))
    return found


def _caller_path(view: Tracer, inputs: dict[int, int], outputs: int,
                 indices: list) -> tuple:
    """``view``'s path as the caller's arrays can take it: a traced integer index
    (``x[i]``) as the position of the argument it is (``{"axis", "leaf"}``), or of the
    graph output that gives it (``{"axis", "output"}``, appended to ``indices`` after
    ``outputs`` outputs) where the function computed it (``x[i + 1]``); and a last
    ``read_only`` step where NumPy's view is read-only (a diagonal)."""
    steps = []
    for op, attrs in view._path:
        if op == "gather":
            index, axis = attrs["index"], attrs["axis"]
            leaf = inputs.get(id(index))
            if leaf is not None:
                attrs = {"axis": axis, "leaf": leaf}
            else:
                attrs = {"axis": axis, "output": outputs + len(indices)}
                indices.append(index)
        steps.append((op, attrs))
    if view._readonly and steps and steps[-1][0] != "broadcast_to":
        steps.append(("read_only", {}))
    return tuple(steps)


def _is_literal(x) -> bool:
    return isinstance(x, (bool, int, float, complex, np.generic, np.ndarray))
