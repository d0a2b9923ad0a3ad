"""An optimised graph as a Dask computation: fused blockwise stages, Dask's reductions
and structural ops between them.

The builder walks the graph in order, keeping each value either *materialised* (a Dask
array, or a NumPy value) or *pending* in an open stage: a run of elementwise ops, small
matrix products and reductions over one iteration space that every chunk computes on its
own (``blocks.Stage``, one compiled kernel set per block signature). A node joins the
stage its inputs are pending in when its shape fits the stage's space; otherwise the
stages it reads are closed (turned into one ``blockwise`` task per chunk) and it starts
its own or runs as Dask's equivalent op. A reduction over chunked axes stays in the stage
as a per-chunk partial result; closing the stage hands the partials to Dask's own
reduction of the same monoid, a tree over the chunks. What Dask has no blockwise form for
(a sort, a solve, a loop) runs as one task over whole arrays, with a ``RechunkWarning``
naming the op and line when that gathers chunked data.
"""

from __future__ import annotations

import itertools
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from ...errors import RechunkWarning, UnsupportedOperation
from ...ir import Graph, Node, Value
from ...ir.ops import normalize_axes, slice_key
from ...ir.registry import REGISTRY, Kind
from ...ir.types import TensorType
from .blocks import Stage, item

# A reduction's monoid (its combining op) -> Dask's reduction of partial results.
_AGGREGATE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
              "logical_or": "any", "logical_and": "all"}
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MAX_RANK = (len(_LETTERS) - 3) // 2  # a stage's axes, 3 matmul letters, broadcast axes


def _arg_reduction(op: str):
    def run(da, xs, a):
        axes = normalize_axes(a["axis"], xs[0].ndim)
        if len(axes) != 1:
            raise NotImplementedError("over several axes")  # (one task then)
        return getattr(da, op)(xs[0], axis=axes[0],
                                                           keepdims=a["keepdims"])
    return run


def _running(ufunc: np.ufunc, lowest: bool):
    """cummax/cummin as Dask's chunk-by-chunk scan of ``ufunc.accumulate``, carrying the
    running extremum from ``ufunc``'s identity (the dtype's lowest or highest value)."""
    def run(da, xs, a):
        (x,) = xs
        if x.dtype == bool:
            ident = not lowest
        elif x.dtype.kind in "iu":
            ident = (np.iinfo(x.dtype).min if lowest else np.iinfo(x.dtype).max)
        else:
            ident = -np.inf if lowest else np.inf
        return da.reductions.cumreduction(ufunc.accumulate, ufunc, ident, x,
                                          axis=a["axis"], dtype=x.dtype)
    return run


# The ops Dask computes itself, chunks and all: op -> (run(dask.array, arrays, attrs),
# what the plan says). Each may raise NotImplementedError or ValueError where Dask cannot chunk it.
_DASK_OPS = {
    "matmul": (lambda da, xs, a: xs[0] @ xs[1], "dask.array.matmul (a tree sum over chunks)"),
    "transpose": (lambda da, xs, a: xs[0].transpose(a["perm"]), "dask.array.transpose"),
    "reshape": (lambda da, xs, a: xs[0].reshape(a["shape"]), "dask.array.reshape"),
    "broadcast_to": (lambda da, xs, a: da.broadcast_to(
        xs[0], a["shape"]), "dask.array.broadcast_to"),
    "slice": (lambda da, xs, a: xs[0][slice_key(a["starts"], a["stops"], a["steps"])],
              "slicing"),
    "concatenate": (lambda da, xs, a: da.concatenate(
        xs, axis=a["axis"]), "dask.array.concatenate"),
    "cumsum": (lambda da, xs, a: xs[0].cumsum(axis=a["axis"], dtype=a["dtype"]),
               "dask.array.cumsum (chunk by chunk, carrying the running total)"),
    "cumprod": (lambda da, xs, a: xs[0].cumprod(axis=a["axis"], dtype=a["dtype"]),
                "dask.array.cumprod (chunk by chunk, carrying the running product)"),
    "cummax": (_running(np.maximum, True),
               "dask.array's cumreduction (chunk by chunk, carrying the running maximum)"),
    "cummin": (_running(np.minimum, False),
               "dask.array's cumreduction (chunk by chunk, carrying the running minimum)"),
    "full": (lambda da, xs, a: da.full(a["shape"], a["value"],
                                                               dtype=a["dtype"]),
             "dask.array.full"),
    "argmax": (_arg_reduction("argmax"), "dask.array.argmax"),
    "argmin": (_arg_reduction("argmin"), "dask.array.argmin"),
}


# Ops whose result along their ``axis`` depends on that axis alone: chunk by chunk where
# every chunk holds the whole axis, else over whole arrays. (An ``fft``'s length there may
# change: an ``rfft`` of 64 points gives 33.)
_ALONG_AN_AXIS = {"sort", "argsort", "partition", "argpartition", "fft"}


@dataclass(eq=False)
class _Open:
    """An open stage: its iteration ``shape``, which of its axes are split in chunks,
    the nodes and the materialised values they read, and the reductions it computes
    with ``keepdims`` (``partial``: over chunked axes, aggregated by Dask on closing)."""

    shape: tuple[int, ...]
    chunked: list[bool]
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    keepdims: set[Node] = field(default_factory=set)
    partial: dict[Value, Node] = field(default_factory=dict)
    local: set[tuple[Node, int]] = field(default_factory=set)  # (reduction, axis) in-chunk
    roles: dict[Value, str] = field(default_factory=dict)  # each input's blockwise index


class Builder:
    """``Builder(graph).run(leaves)``: the graph's outputs as Dask arrays; ``plan`` lists
    the stages in words, as they were built."""

    def __init__(self, graph: Graph, chunks: str = "cpu"):
        self.graph = graph
        self.chunks = chunks  # the backend the stages compile with
        self.env: dict[Value, object] = {}
        self.pending: dict[Value, _Open] = {}
        self.producer = graph.producers()
        self.users: dict[Value, set[Node]] = {}
        for node in graph.nodes:
            for v in node.inputs:
                self.users.setdefault(v, set()).add(node)
        self.plan: list[str] = []
        self.n_stages = 0
        self.open: list[_Open] = []

    def run(self, leaves) -> list:
        import dask.array as da

        for v, x in zip(self.graph.inputs, leaves, strict=True):
            self.env[v] = _whole_chunks(x) if _is_dask(x) else x
        for node in self.graph.nodes:
            self.node(node)
        for stage in list(self.open):
            self.close(stage)
        outs = [self.get(v) for v in self.graph.outputs]
        return [x if _is_dask(x) else da.from_array(np.asarray(x), chunks=-1) for x in outs]

    # ---------------------------------------------------------------- values

    def get(self, v: Value):
        """``v`` materialised (closing the stage it is pending in)."""
        if v in self.pending:
            self.close(self.pending[v])
        return self.env[v]

    def chunked(self, v: Value) -> list[bool]:
        """Per axis of ``v``: whether it is split into more than one chunk."""
        if v in self.pending:
            stage = self.pending[v]
            return [c and n == s for c, n, s in zip(stage.chunked, v.type.shape, stage.shape,
                                                     strict=True)]
        x = self.env[v]
        return [len(c) > 1 for c in x.chunks] if _is_dask(x) else [False] * v.type.ndim

    # ---------------------------------------------------------------- nodes

    def node(self, node: Node) -> None:
        opdef = REGISTRY[node.op]
        if opdef.effect:
            raise UnsupportedOperation(
                f"{node.op} draws from a random generator, which a Dask computation cannot "
                "share with its caller", location=node.loc,
                hint="draw the random numbers with dask.array.random and pass them in")
        if node.op == "constant":  # (a weak scalar as a Python one: NumPy's promotion)
            value = np.asarray(node.attrs["value"], node.out.type.dtype)
            self.env[node.out] = value.item() if node.out.type.weak else value
            return
        if node.op == "loop_output":
            self.env[node.out] = self.loop_output(node)
            return
        if opdef.kind is Kind.LOOP:
            self.loop(node)
            return
        empty = node.out.type.size == 0 or any(v.type.size == 0 for v in node.inputs)
        space = None if empty else self.space(node)  # (Dask trips over empty chunks)
        if space is not None and len(space) <= _MAX_RANK and self.join(node, space):
            return
        self.dask_op(node)

    def space(self, node: Node) -> tuple[int, ...] | None:
        """The iteration space ``node`` has in a stage, None where it has none."""
        kind = REGISTRY[node.op].kind
        if kind == Kind.ELEMENTWISE:
            return node.out.type.shape
        if kind == Kind.REDUCTION and REGISTRY[node.op].monoid is not None:
            return node.inputs[0].type.shape
        if node.op == "matmul":
            a, b = node.inputs
            if a.type.ndim >= 2 and b.type.ndim == 2 and not any(self.chunked(b)) \
                    and not self.chunked(a)[-1]:
                return node.out.type.shape
        return None

    def join(self, node: Node, space: tuple[int, ...]) -> bool:
        """Put ``node`` in a stage (the one its inputs are pending in where it fits, else a
        new one); False where it cannot be in any (Dask runs it)."""
        for v in node.inputs:  # a value of another rank or chunking than its stage's
            if v in self.pending and v in self.pending[v].partial:
                self.close(self.pending[v])
        stages = list(dict.fromkeys(self.pending[v] for v in node.inputs if v in self.pending))
        if not stages:  # inputs all materialised: any open stage of its space may take it
            stages = [s for s in self.open if _fits(space, s.shape)][-1:]
        stage = self.merge(stages)
        if stage is None or not _fits(space, stage.shape) or not self.compatible(node, stage):
            for s in stages:
                if s in self.open:
                    self.close(s)
            stage = _Open(space, [False] * len(space))
            self.open.append(stage)
        indices = self.indices(node, stage)
        if indices is None:
            if not stage.nodes:  # (made for it above)
                self.open.remove(stage)
            return False
        stage.roles.update(indices)
        for v in node.inputs:
            if v not in self.pending and v not in stage.inputs:
                stage.inputs.append(v)
        for i, c in enumerate(self.aligned(node, stage)):
            stage.chunked[i] = stage.chunked[i] or c
        stage.nodes.append(node)
        self.pending[node.out] = stage
        if REGISTRY[node.op].kind == Kind.REDUCTION:
            self.reduce_in(node, stage)
        elif node.op == "matmul":  # its result's columns (and a pending right operand,
            nd = len(stage.shape)  # a pending left one's contracted axis) stay whole
            stage.local.add((node, nd - 1))
            if node.inputs[1] in self.pending:
                stage.local.add((node, nd - 2))
        return True

    def merge(self, stages: list[_Open]) -> _Open | None:
        """One stage doing the work of ``stages`` (open stages a node reads from), where
        they share their space and their in-chunk reductions stay in one chunk; None where
        they cannot be one. Neither reads the other's pending values (a node that did
        would have joined it), so their nodes can run in graph order in one task."""
        if not stages:
            return None
        first, *rest = stages
        for other in rest:
            if other.shape != first.shape:
                return None
            chunked = [a or b for a, b in zip(first.chunked, other.chunked, strict=True)]
            if any(chunked[a] for _, a in first.local | other.local) \
                    or any(first.roles.get(v, r) != r for v, r in other.roles.items()):
                return None
        for other in rest:
            order = {n: i for i, n in enumerate(self.graph.nodes)}
            first.nodes = sorted(first.nodes + other.nodes, key=order.__getitem__)
            first.inputs += [v for v in other.inputs if v not in first.inputs]
            first.chunked = [a or b for a, b in zip(first.chunked, other.chunked, strict=True)]
            for name in ("keepdims", "local"):
                getattr(first, name).update(getattr(other, name))
            first.partial.update(other.partial)
            first.roles.update(other.roles)
            for n in other.nodes:
                self.pending[n.out] = first
            self.open.remove(other)
        return first

    def indices(self, node: Node, stage: _Open) -> dict[Value, str] | None:
        """The blockwise index of each materialised input of ``node``: its axes' letters
        in the stage's space (NumPy's broadcasting aligns them at the right), a matrix
        product's contracted axis and whole right operand letters of their own (not in
        the output: a chunk sees them whole); None where an input would need two."""
        nd = len(stage.shape)
        found = {}
        for k, v in enumerate(node.inputs):
            if v in self.pending or v.type.ndim == 0:
                continue
            if node.op == "matmul" and k == 1:
                index = _LETTERS[nd + 1:nd + 3]
            elif node.op == "matmul":
                index = _LETTERS[nd - v.type.ndim:nd - 1] + _LETTERS[nd]
            else:  # an axis of size 1 against a longer one: broadcast, whole in each chunk
                first = nd - v.type.ndim
                index = "".join(_LETTERS[j] if n == stage.shape[j] else _LETTERS[nd + 3 + j]
                                for j, n in enumerate(v.type.shape, first))
            if stage.roles.get(v, index) != index or found.get(v, index) != index:
                return None
            found[v] = index
        return found

    def aligned(self, node: Node, stage: _Open) -> list[bool]:
        """Per axis of the stage's space: whether an input of ``node`` is chunked there."""
        nd = len(stage.shape)
        out = [False] * nd
        indices = self.indices(node, stage) or {}
        for v, index in indices.items():
            for letter, c in zip(index, self.chunked(v), strict=True):
                j = _LETTERS.index(letter)
                if j < nd:
                    out[j] |= c and stage.shape[j] > 1
        return out

    def compatible(self, node: Node, stage: _Open) -> bool:
        """Whether ``node``'s materialised inputs leave the stage's in-chunk reductions in
        one chunk (a newly chunked axis would split them)."""
        if node.op == "matmul" and stage.chunked[-1]:
            return False  # a chunk computes every column of a product (``space``)
        newly = [c and not s for c, s in zip(self.aligned(node, stage), stage.chunked,
                                             strict=True)]
        return not any(newly[axis] for _, axis in stage.local)

    def reduce_in(self, node: Node, stage: _Open) -> None:
        """A reduction in a stage, computed with ``keepdims``: over axes in one chunk it is
        done there; over chunked axes each chunk's partial result is, and Dask combines
        them. A partial result, or one dropping its axes, is read from the stage's output
        only (``partial``), never by another node of the stage."""
        axes = normalize_axes(node.attrs["axis"], node.inputs[0].type.ndim)
        stage.keepdims.add(node)
        # Split in the stage's chunks, not only in its input's own: blockwise gives every
        # input the stage's chunks (a single-chunk input is split where another is).
        split = any(stage.chunked[a] and node.inputs[0].type.shape[a] == stage.shape[a]
                    for a in axes)
        if split or not node.attrs["keepdims"]:
            stage.partial[node.out] = node
        if not split:
            stage.local |= {(node, a) for a in axes}

    # ---------------------------------------------------------------- stages

    def close(self, stage: _Open) -> None:
        """Turn ``stage`` into one blockwise task per chunk and its outputs into arrays."""
        import dask.array as da

        members = {n.out for n in stage.nodes}
        outputs = [n.out for n in stage.nodes if n.out in stage.partial or
                   any(u not in stage.nodes for u in self.users.get(n.out, ()))
                   or n.out in self.graph.outputs]
        outputs = list(dict.fromkeys(outputs))
        self.n_stages += 1
        s = Stage(stage.inputs, stage.nodes, outputs, stage.keepdims, f"stage{self.n_stages}",
                  self.chunks)
        nd = len(stage.shape)
        ind = _LETTERS[:nd]
        pairs = []
        for v in stage.inputs:
            x = self.env[v]
            if v.type.ndim == 0:  # a Dask scalar is a dependency; others go in as they are
                pairs += [x, ""] if _is_dask(x) else [x, None]
            else:
                x = x if _is_dask(x) else da.from_array(np.asarray(x), chunks=-1)
                pairs += [x, stage.roles[v]]
        given = set("".join(i for i in pairs[1::2] if i))
        new_axes = {c: n for c, n in zip(ind, stage.shape, strict=True) if c not in given}
        outs = da.blockwise(s, ind, *pairs, dtype=object, meta=np.empty((0,) * nd, object),
                            concatenate=True, new_axes=new_axes, token=f"tracejit-{s.name}")
        self.precompile(s, stage, pairs, outs.chunks)
        for i, v in enumerate(outputs):
            shape = _stage_shape(v, stage, self.producer)
            adjust = {ind[j]: 1 for j in range(nd) if shape[j] == 1 and stage.shape[j] != 1}
            arr = da.blockwise(item(i), ind, outs, ind, dtype=v.type.dtype,
                               meta=_meta(pairs[::2], nd, v.type.dtype), adjust_chunks=adjust,
                               token=f"tracejit-{s.name}-{i}")
            self.env[v] = self.finish(v, arr, stage, shape)
        for v in members:
            self.pending.pop(v, None)
        self.open.remove(stage)
        self.plan.append(_describe(s, stage, outs.chunks))

    def finish(self, v: Value, arr, stage: _Open, shape: tuple[int, ...]):
        """A stage output as the graph's value: partial results combined over the chunks,
        per-chunk copies of a chunk-independent value taken once, the rank made the IR's."""
        node = stage.partial.get(v)
        axes = normalize_axes(node.attrs["axis"], node.inputs[0].type.ndim) if node else ()
        if any(stage.chunked[a] for a in axes):
            combine = getattr(arr, _AGGREGATE[REGISTRY[node.op].monoid.combine])
            kwargs = {"dtype": v.type.dtype} if node.op in ("sum", "prod") else {}
            arr = combine(axis=axes, keepdims=True, **kwargs)
        else:
            extra = tuple(slice(0, 1) if n == 1 and c else slice(None)
                          for n, c in zip(shape, stage.chunked, strict=True))
            if any(s != slice(None) for s in extra):
                arr = arr[extra]
        if arr.shape != v.type.shape:
            arr = arr.reshape(v.type.shape)
        return arr.astype(v.type.dtype, copy=False)

    def precompile(self, s: Stage, stage: _Open, pairs: list, chunks) -> None:
        """Compile the stage here for each block signature its chunks have (a few: the
        full chunks and the last ones), so that the tasks find its kernels compiled (this
        process) or in the disk cache (workers on this machine) rather than each compiling."""
        sizes = [sorted(set(c)) for c in chunks]
        for block in itertools.product(*sizes):
            types = []
            for k, v in enumerate(stage.inputs):
                x, index = pairs[2 * k], pairs[2 * k + 1]
                shape = () if index is None else tuple(
                    n if n == 1 or _LETTERS.index(c) >= len(block) else block[_LETTERS.index(c)]
                    for c, n in zip(index, x.shape, strict=True))
                types.append(TensorType(shape, v.type.dtype, v.type.weak))
            s.runner(types, self.chunks)

    # ---------------------------------------------------------------- Dask's own ops

    def dask_op(self, node: Node) -> None:
        """``node`` as Dask's own op (``_DASK_OPS``) where it has one that takes these
        inputs, else as one task over whole arrays (empty ones always: Dask's ops trip
        over zero-size chunks)."""
        import dask.array as da

        args = [self.get(v) for v in node.inputs]
        arrays = [x if _is_dask(x) else da.from_array(np.asarray(x, v.type.dtype), chunks=-1)
                  for x, v in zip(args, node.inputs, strict=True)]
        where = node.loc.short if node.loc else "?"
        out, how = None, "one task over whole arrays"
        empty = node.out.type.size == 0 or any(v.type.size == 0 for v in node.inputs)
        if node.op in _DASK_OPS and not empty:
            how = _DASK_OPS[node.op][1]
            try:
                out = _DASK_OPS[node.op][0](da, arrays, node.attrs)
            except (NotImplementedError, ValueError):  # (a reshape Dask cannot chunk)
                out, how = None, "one task over whole arrays"
            if out is not None and out.shape != node.out.type.shape:
                out, how = None, "one task over whole arrays"
        if node.op in _ALONG_AN_AXIS and not empty and len(arrays[0].chunks[
                node.attrs["axis"]]) == 1:
            out = _along_the_axis(node, arrays[0])
            how = f"chunk by chunk (axis {node.attrs['axis']} whole in every chunk)"
        elif node.op == "gather" and not empty:
            out = _gather_by_chunks(node, arrays)
            how = "chunk by chunk (the indexed axes whole in every chunk)"
            if out is None:
                how = "one task over whole arrays"
        if out is None:  # (a weak scalar goes in as the Python scalar it stands for)
            whole = [x if v.type.weak else a for x, a, v in
                     zip(args, arrays, node.inputs, strict=True)]
            if not empty:  # (an empty input gathers nothing)
                _warn_gathering(node, whole)
            out = self.whole(node, whole)
        self.env[node.out] = _whole_chunks(out.astype(node.out.type.dtype, copy=False))
        self.plan.append(f"{node.op} at {where}: {how}")

    def loop(self, node: Node) -> None:
        """A loop node as one task over whole arrays. Its value is the task itself (a
        ``Delayed`` of the tuple of its results), not an array: a loop's results differ in
        shape and dtype, so each ``loop_output`` becomes a Dask array of its own."""
        args = [self.get(v) for v in node.inputs]
        _warn_gathering(node, args)
        self.env[node.out] = _task(node, args)
        where = node.loc.short if node.loc else "?"
        self.plan.append(f"{node.op} at {where}: one task over whole arrays")

    def loop_output(self, node: Node):
        """Result ``index`` of a loop's task, as a Dask array of one chunk."""
        import dask.array as da

        loop = self.producer[node.inputs[0]]
        task = self.env[node.inputs[0]][node.attrs["index"]]
        t = node.out.type
        meta = _meta([self.env[v] for v in loop.inputs], t.ndim, t.dtype)
        out = da.from_delayed(task, shape=t.shape, dtype=t.dtype, meta=meta)
        return _whole_chunks(out)

    def whole(self, node: Node, arrays: list):
        """``node`` as one task over whole arrays."""
        import dask.array as da

        t = node.out.type
        return da.from_delayed(_task(node, arrays), shape=t.shape, dtype=t.dtype,
                               meta=_meta(arrays, t.ndim, t.dtype))


def _task(node: Node, arrays: list):
    """The ``Delayed`` computing ``node`` with its NumPy implementation over whole arrays
    (Dask's chunks of an argument concatenated)."""
    import dask

    return dask.delayed(_Whole(REGISTRY[node.op].impl, node.attrs), pure=True)(*arrays)


def _warn_gathering(node: Node, arrays: list) -> None:
    """A ``RechunkWarning`` at the user's line where ``node`` gathers chunked inputs into
    one task (one worker's memory)."""
    if any(_is_dask(x) and x.npartitions > 1 for x in arrays):
        message = (f"{node.op} at {node.loc.short if node.loc else '?'} needs whole "
                   "arrays: its chunked inputs are gathered into one task (one worker's "
                   "memory)")
        if node.loc is None:
            warnings.warn(RechunkWarning(message), stacklevel=2)
        else:  # at the user's line
            warnings.warn_explicit(RechunkWarning(message), RechunkWarning,
                                   node.loc.filename, node.loc.lineno)


def _along_the_axis(node: Node, x):
    """``node`` (an op of ``_ALONG_AN_AXIS``) as one task per chunk of ``x``, whose chunks
    each hold its axis whole; each result chunk is as long there as the node's result."""
    axis, t = node.attrs["axis"], node.out.type
    chunks = x.chunks[:axis] + ((t.shape[axis],),) + x.chunks[axis + 1:]
    return x.map_blocks(_Whole(REGISTRY[node.op].impl, node.attrs), chunks=chunks,
                        dtype=t.dtype, meta=_meta([x], t.ndim, t.dtype))


def _gather_by_chunks(node: Node, arrays: list):
    """``x[:, ..., i0, i1, ...]`` as one task per chunk of ``x`` where every chunk holds
    the indexed axes whole (columns picked from row chunks), the index arrays going whole
    to each task; None where a chunk splits an indexed axis."""
    import dask.array as da

    x, idx, axis = arrays[0], arrays[1:], node.attrs["axis"]
    indexed = range(axis, axis + len(idx))
    if any(len(x.chunks[d]) > 1 for d in indexed) or x.ndim + node.out.type.ndim > len(
            _LETTERS):
        return None
    batch = node.out.type.shape[axis:axis + node.out.type.ndim - x.ndim + len(idx)]
    x_ind = _LETTERS[:x.ndim]
    b_ind = _LETTERS[x.ndim:x.ndim + len(batch)]
    out_ind = x_ind[:axis] + b_ind + x_ind[axis + len(idx):]
    pairs = []
    for i in idx:  # each index broadcast to the batch shape, one chunk
        pairs += [da.broadcast_to(i, batch).rechunk(-1), b_ind]
    t = node.out.type
    return da.blockwise(_Whole(REGISTRY["gather"].impl, node.attrs), out_ind, x, x_ind,
                        *pairs, dtype=t.dtype, meta=_meta(arrays, t.ndim, t.dtype),
                        new_axes=dict(zip(b_ind, batch, strict=True)), concatenate=True)


class _Whole:
    """A task computing an op over whole arrays with its NumPy implementation (the
    reference's: NumPy's bits). Arrays of CuPy chunks come to the host for it and the result
    goes back to their GPU, where the stages after it run. A loop's result is a tuple of
    arrays of different shapes, kept a tuple (``np.asarray`` of it would try to stack them)."""

    def __init__(self, impl, attrs: dict):
        self.impl, self.attrs = impl, attrs

    def __call__(self, *xs):
        gpu = next((x for x in xs if type(x).__module__.startswith("cupy")), None)
        if gpu is None:
            return _each(np.asarray, self.impl(*xs, **self.attrs))
        cupy = sys.modules[type(gpu).__module__]
        host = [x.get() if type(x).__module__.startswith("cupy") else x for x in xs]
        with gpu.device:
            return _each(lambda r: cupy.asarray(np.asarray(r)), self.impl(*host, **self.attrs))


def _each(convert, result):
    """``convert`` applied to ``result``, or to each of a tuple of results (a loop's)."""
    if isinstance(result, tuple):
        return tuple(convert(r) for r in result)
    return convert(result)


def _fits(space: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    return len(space) == len(shape) and all(n in (s, 1) for n, s in zip(space, shape,
                                                                        strict=True))


def _stage_shape(v: Value, stage: _Open, producer: dict) -> tuple[int, ...]:
    """``v``'s shape as the stage computes it (a reduction keeps its dimensions)."""
    node = producer[v]
    if node in stage.keepdims:
        axes = normalize_axes(node.attrs["axis"], node.inputs[0].type.ndim)
        return tuple(1 if i in axes else n for i, n in enumerate(node.inputs[0].type.shape))
    return v.type.shape


def _describe(s: Stage, stage: _Open, chunks) -> str:
    ops = ", ".join(n.op for n in s.nodes if n.op != "constant")
    lines = sorted({n.loc.short for n in s.nodes if n.loc})
    space = " x ".join(f"{n} in {len(c)} chunks" if len(c) > 1 else str(n)
                       for n, c in zip(stage.shape, chunks, strict=True)) or "a scalar"
    parts = [f"{s.name}: blockwise over [{space}], one task per chunk: {ops}"
             f" ({', '.join(lines)})"]
    for node in stage.partial.values():
        axes = normalize_axes(node.attrs["axis"], node.inputs[0].type.ndim)
        if any(stage.chunked[a] for a in axes):
            parts.append(f"  {node.op} over axes {axes}: a partial result per chunk, "
                         f"combined by dask's {_AGGREGATE[REGISTRY[node.op].monoid.combine]}"
                         " tree reduction")
    return "\n".join(parts)


def _whole_chunks(x):
    """``x`` without empty chunks on a non-empty axis (Dask's slicing leaves them, and a
    stage's blockwise alignment would pair them with whole chunks of other inputs)."""
    if not any(0 in c and sum(c) for c in x.chunks):
        return x
    return x.rechunk(tuple(tuple(n for n in c if n) or c for c in x.chunks))


def _meta(inputs, ndim: int, dtype):
    """The meta (an empty array of the chunks' type) of an array computed from ``inputs``:
    CuPy's where an input's chunks are CuPy arrays (the stage and whole-array tasks then
    return CuPy arrays, and Dask's own ops after them, such as ``concatenate``, combine
    metas of one kind), else NumPy's."""
    for x in inputs:
        meta = getattr(x, "_meta", None) if _is_dask(x) else None
        if type(meta).__module__.startswith("cupy"):
            return sys.modules[type(meta).__module__].empty((0,) * ndim, dtype)
    return np.empty((0,) * ndim, dtype)


def _is_dask(x) -> bool:
    return type(x).__module__.startswith("dask.")
