"""Residuals instead of recomputation: the backward scan of a gradient reads what the
forward scan computed, stacked per step, rather than computing it again.

The gradient of a scan (``ad/loop_rules.py``) is a forward scan that also stacks the carry
each step starts from, and a backward scan whose body re-runs the forward body (an inlined
copy of its nodes) before the body's VJP. This pass finds, in a backward scan ``b``, the
nodes that a forward scan ``f`` of the same graph computes already: ``b``'s body reads,
per step, slices of ``f``'s stacked results (or of ``f``'s own ``xs``) and ``f``'s consts,
so a node of ``b``'s body with the same op, attributes and (mapped) inputs as one of
``f``'s body computes the same value at the matching step. Of those shared values, the
ones ``b`` needs and that are expensive to compute again become *residuals*: ``f``'s body
returns them as extra stacked outputs (or ``b`` reads an output ``f`` stacks already), and
``b``'s body reads their per-step slices instead of its copy, which dead code elimination
then drops. This is what JAX's partial evaluation of ``scan`` does.

When it pays (the rule): a stored residual costs ``length x size`` bytes, written once and
read once per step. Recomputing an exact elementwise or structural op (``add``,
``multiply``, ``where``, ``transpose``, ``slice``...) reads its inputs and writes its
output: no more memory traffic than loading a stored copy, and no memory kept, so such
values are recomputed from the nearest stored or scanned values. Matmuls and other
contractions, reductions, linear algebra, cumulative ops, sorts, a nested loop's results
and transcendental elementwise ops (``exp``, ``tanh``, ``power``: tens of flops per
element; the registry's ``Exactness.ULP`` ops) are stored. A value that depends on no
per-step slice (only on consts) is never stored: it is the same at every step.

It runs after ``stabilize``: both bodies are rewritten alike first, so the backward body
reads the forward body's stable form, which it could not rewrite once it reads a stored
value. Stacked results no one reads are then dropped (``prune``), with the scanned inputs
no body reads: a carry the backward loop no longer needs is not stored at all.

Only values ``f`` computes already are stored: moving other work into ``f`` would not
save any. Pairs are found by value identity, so reverse scans, ``truncate`` (``b`` reads
a window ``[a:b]`` of the stacked results: the new residuals are sliced the same way) and
the pairs of a gradient of a gradient (a backward scan of a backward scan) are handled
alike; nested loops are handled from the innermost out (``in_bodies``), and a nested
forward loop whose copy in ``b``'s body stacks other results (the inner residuals, the
inner carries) merges with its original in ``f``'s body into one loop stacking both, so
the outer forward loop stacks the inner residuals too and the backward loop runs no
forward loop again.

Not done: a residual that is the next step's carry (``tanh(h @ W + x)`` in an RNN) is
stored beside the stacked carries, as JAX does; each is ``length x size``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node, TensorType, Value
from ..ir.loop_ops import Scan, is_results
from ..ir.registry import REGISTRY, Exactness, Kind, has_effect

# kinds whose results are stored rather than recomputed (see the module's rule)
_STORED_KINDS = frozenset({Kind.REDUCTION, Kind.CONTRACTION, Kind.LINALG, Kind.SPECTRAL,
                           Kind.SCAN, Kind.SORTING, Kind.LOOP})


def expensive(node: Node) -> bool:
    """Whether ``node``'s value is worth storing per step rather than computing again."""
    d = REGISTRY[node.op]
    return d.kind in _STORED_KINDS or d.exactness is Exactness.ULP


def residuals(graph: Graph) -> Graph:
    """Make each backward scan read the expensive values its forward scan computes as
    stacked residuals, one (forward, backward) pair at a time until none is left; then
    stop stacking what no one reads (``prune``)."""
    while True:
        found = _next_pair(graph)
        if found is None:
            return prune(graph)
        graph = _apply(graph, *found)


def prune(graph: Graph) -> Graph:
    """Scans without the consts and scanned inputs their body does not read, and without
    the stacked results no one reads (a carry the backward loop no longer needs once it
    reads residuals is not stored: ``length x size`` bytes saved); until nothing changes."""
    while True:
        pruned = _stacked_unread(_inputs_unread(graph))
        if pruned is graph:
            return graph
        graph = pruned


def _inputs_unread(graph: Graph) -> Graph:
    changed, nodes = False, []
    for n in graph.nodes:
        loop = n.attrs.get("loop")
        if isinstance(loop, Scan):
            body = loop.body
            read = {v for m in body.nodes for v in m.inputs} | set(body.outputs)
            carry = range(loop.n_consts, loop.n_consts + loop.n_carry)
            keep = [i for i, v in enumerate(body.inputs) if v in read or i in carry]
            if len(keep) < len(body.inputs):
                changed = True
                new = dataclasses.replace(
                    loop, body=Graph([body.inputs[i] for i in keep], body.nodes, body.outputs,
                                     body.name),
                    n_consts=sum(i < loop.n_consts for i in keep))
                n = Node(n.op, tuple(n.inputs[i] for i in keep), {**n.attrs, "loop": new},
                         n.out, n.loc)
        nodes.append(n)
    return graph.replace(nodes=nodes) if changed else graph


def _stacked_unread(graph: Graph) -> Graph:
    live = set(graph.outputs)
    for n in reversed(graph.nodes):
        if n.out in live or has_effect(n):
            live.add(n.out)
            live.update(n.inputs)
    read: dict[Value, set[int]] = {}
    for n in graph.nodes:
        if n.op == "loop_output" and n.out in live:
            read.setdefault(n.inputs[0], set()).add(n.attrs["index"])
    renamed: dict[Value, tuple[Node, dict[int, int]]] = {}
    for n in graph.nodes:
        loop = n.attrs.get("loop")
        if not isinstance(loop, Scan):
            continue
        keep = [i for i in range(len(loop.body.outputs))
                if i < loop.n_carry or i in read.get(n.out, ())]
        if len(keep) < len(loop.body.outputs):
            body = loop.body
            new = dataclasses.replace(loop, body=Graph(
                body.inputs, body.nodes, [body.outputs[i] for i in keep], body.name))
            out = Value(TensorType((len(keep),), np.dtype(object)))
            renamed[n.out] = (Node(n.op, n.inputs, {**n.attrs, "loop": new}, out, n.loc),
                              {old: k for k, old in enumerate(keep)})
    if not renamed:
        return graph
    nodes = []
    for n in graph.nodes:
        if n.out not in live and not has_effect(n):
            continue  # dead (dce's rule): it may read a result that goes
        if n.out in renamed:
            nodes.append(renamed[n.out][0])
        elif n.op == "loop_output" and n.inputs[0] in renamed:
            scan, index = renamed[n.inputs[0]]
            attrs = {**n.attrs, "index": index[n.attrs["index"]]}
            nodes.append(Node(n.op, (scan.out,), attrs, n.out, n.loc))
        else:
            nodes.append(n)
    return graph.replace(nodes=nodes)


@dataclasses.dataclass
class _Out:
    """A result of a scan of ``f``'s body that has no ``loop_output`` node there yet:
    result ``index`` of ``loop``, which takes the place of ``scan``'s loop when it is
    another (one computing both ``scan``'s results and those its backward copy reads)."""

    scan: Node
    index: int
    type: TensorType
    loop: Scan


@dataclasses.dataclass
class _Plan:
    stored: list[Value]  # values of b's body to read as residuals
    found: list[Value | _Out]  # the same values in f's body
    window: tuple[int, int]  # the steps of f that b's steps are, in order


def _next_pair(graph: Graph):
    producers = graph.producers()
    scans = [n for n in graph.nodes if n.op == "scan"]
    for j, b in enumerate(scans):
        for f in scans[:j]:
            plan = _plan(f, b, producers)
            if plan is not None:
                return f, b, plan
    return None


def _window(v: Value, producers: dict[Value, Node], length: int):
    """``(base, (start, stop))`` when ``v`` is ``base[start:stop]`` along the first axis
    (the whole of ``base`` when no slice), else None."""
    node = producers.get(v)
    if node is None or node.op != "slice":
        return v, (0, length)
    base = node.inputs[0]
    starts, stops, steps = node.attrs["starts"], node.attrs["stops"], node.attrs["steps"]
    if any(s != 1 for s in steps) or any(starts[1:]) or tuple(stops[1:]) != base.type.shape[1:]:
        return None
    return base, (starts[0], stops[0])


def _inputs_map(f: Node, b: Node, producers: dict[Value, Node]):
    """The values of ``b``'s body input that are values of ``f``'s body at the matching
    step, and the window of ``f``'s steps that ``b``'s steps are."""
    fl, bl = f.attrs["loop"], b.attrs["loop"]
    fc, fk = fl.n_consts, fl.n_consts + fl.n_carry
    found: dict[Value, Value] = {}
    for i in range(bl.n_consts):
        for j in range(fc):
            if b.inputs[i] is f.inputs[j]:
                found[bl.body.inputs[i]] = fl.body.inputs[j]
                break
    window, per_step = None, []
    first_x = bl.n_consts + bl.n_carry
    for i in range(first_x, len(b.inputs)):
        cut = _window(b.inputs[i], producers, fl.length)
        if cut is None:
            continue
        base, span = cut
        target = None
        if base in f.inputs[fk:]:
            target = fl.body.inputs[fk + list(f.inputs[fk:]).index(base)]
        else:
            node = producers.get(base)
            if (node is not None and node.op == "loop_output" and node.inputs[0] is f.out
                    and node.attrs["index"] >= fl.n_carry):
                target = fl.body.outputs[node.attrs["index"]]
        if target is None or span[1] - span[0] != bl.length or window not in (None, span):
            continue
        window = span
        found[bl.body.inputs[i]] = target
        per_step.append(bl.body.inputs[i])
    return found, per_step, window


def _same_attrs(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if x is y:
            continue
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.dtype == y.dtype and x.shape == y.shape
                    and x.tobytes() == y.tobytes()):
                return False
        elif isinstance(x, Scan | Graph) or type(x) is not type(y) or x != y:
            return False
    return True


def _merged(theirs: Scan, mine: Scan) -> Scan | None:
    """A loop computing the results of both (the same body nodes on the same inputs and
    the same carry; ``theirs``'s outputs first, then those only ``mine`` stacks), else
    None. ``theirs`` itself when it stacks all of ``mine``'s."""
    tb, mb = theirs.body, mine.body
    nk = theirs.n_carry
    static = ("n_consts", "n_carry", "length", "reverse", "truncate")
    if not (all(getattr(theirs, k) == getattr(mine, k) for k in static)
            and len(tb.inputs) == len(mb.inputs) and all(map(_is, tb.inputs, mb.inputs))
            and len(tb.nodes) == len(mb.nodes) and all(map(_is, tb.nodes, mb.nodes))
            and all(map(_is, tb.outputs[:nk], mb.outputs[:nk]))):
        return None
    extra = []
    for v in mb.outputs[nk:]:
        if not any(v is u for u in tb.outputs[nk:] + extra):
            extra.append(v)
    if not extra:
        return theirs
    return dataclasses.replace(theirs, body=Graph(tb.inputs, tb.nodes, tb.outputs + extra,
                                                  tb.name))


def _is(a, b) -> bool:
    return a is b


def _shared(f_body: Graph, b_body: Graph, env: dict) -> dict:
    """``env`` (values of ``b_body``'s inputs -> ``f_body``'s) extended to each node of
    ``b_body`` that ``f_body`` computes the same way: same op, attributes, type and
    inputs. A scan maps to ``(f's scan, a loop computing both, b's loop)``."""
    index: dict[tuple, list[Node]] = {}
    for n in f_body.nodes:
        index.setdefault((n.op, *map(id, n.inputs)), []).append(n)
    outputs: dict[tuple[int, int], Value] = {
        (id(n.inputs[0]), n.attrs["index"]): n.out for n in f_body.nodes
        if n.op == "loop_output"}
    for n in b_body.nodes:
        if has_effect(n) or any(not isinstance(env.get(v), Value) for v in n.inputs
                                if not (n.op == "loop_output" and v is n.inputs[0])):
            continue
        if n.op == "loop_output":
            scan = env.get(n.inputs[0])
            if isinstance(scan, tuple):
                fs, loop, mine = scan
                i, nk = n.attrs["index"], loop.n_carry
                if i >= nk:  # a stacked result: where the loop computing both stacks it
                    v = mine.body.outputs[i]
                    i = nk + next(k for k, u in enumerate(loop.body.outputs[nk:]) if u is v)
                env[n.out] = outputs.get((id(fs.out), i)) or _Out(fs, i, n.out.type, loop)
            continue
        same = index.get((n.op, *(id(env[v]) for v in n.inputs)), [])
        if n.op == "scan":
            mine = n.attrs["loop"]
            for m in same:
                loop = _merged(m.attrs["loop"], mine)
                if loop is not None:
                    env[n.out] = (m, loop, mine)
                    break
            continue
        match = next((m for m in same if m.out.type == n.out.type
                      and _same_attrs(m.attrs, n.attrs)), None)
        if match is not None:
            env[n.out] = match.out
    return env


def _plan(f: Node, b: Node, producers: dict[Value, Node]) -> _Plan | None:
    fl, bl = f.attrs["loop"], b.attrs["loop"]
    env, per_step, window = _inputs_map(f, b, producers)
    if not per_step:
        return None
    body = bl.body
    env = _shared(fl.body, body, env)
    varying = set(per_step)
    for n in body.nodes:
        if any(v in varying for v in n.inputs):
            varying.add(n.out)
    made = {n.out: n for n in body.nodes}
    # the shared values that b's own work (or its outputs) reads
    needed = [v for n in body.nodes if n.out not in env for v in n.inputs if v in env]
    needed += [v for v in body.outputs if v in env]
    stored, seen = [], set()
    grown: dict[Node, Scan] = {}  # a nested scan of f's body that grows: into which loop
    while needed:
        v = needed.pop()
        if v in seen or v not in made:
            continue
        seen.add(v)
        node = made[v]
        if (v in varying and expensive(node) and not is_results(v.type) and not v.type.weak
                and not isinstance(env[v], tuple) and _one_growth(env[v], grown)):
            stored.append(v)
        else:
            needed.extend(node.inputs)
    if not stored:
        return None
    return _Plan(stored, [env[v] for v in stored], window)


def _one_growth(found, grown: dict) -> bool:
    """Whether storing ``found`` keeps each nested scan of f's body growing into one loop
    at most (two backward copies may each want results of their own from it)."""
    if not isinstance(found, _Out) or found.loop is found.scan.attrs["loop"]:
        return True
    return grown.setdefault(found.scan, found.loop) is found.loop


def _apply(graph: Graph, f: Node, b: Node, plan: _Plan) -> Graph:
    fl, bl = f.attrs["loop"], b.attrs["loop"]
    fbody, values = _forward_body(fl.body, plan, fl.n_carry)
    new_f = Node("scan", f.inputs, {**f.attrs, "loop": dataclasses.replace(fl, body=fbody)},
                 Value(TensorType((len(fbody.outputs),), np.dtype(object))), f.loc)
    # the stacked result index of each residual in the new forward loop
    indices = [fl.n_carry + list(fbody.outputs[fl.n_carry:]).index(v)
               for v in values]
    before_b = graph.nodes[:graph.nodes.index(b)]  # (a reader after b cannot serve b)
    existing = {n.attrs["index"]: n.out for n in before_b
                if n.op == "loop_output" and n.inputs[0] is f.out}
    added: list[Node] = []
    stacked = []
    start, stop = plan.window
    for i in indices:
        t = fbody.outputs[i].type
        full = TensorType((fl.length, *t.shape), t.dtype)
        out = existing.get(i)
        if out is None:
            out = Value(full)
            added.append(Node("loop_output", (new_f.out,), {"index": i, "type": full}, out,
                              b.loc))
        if (start, stop) != (0, fl.length):
            cut = Value(TensorType((stop - start, *t.shape), t.dtype))
            added.append(Node("slice", (out,), {"starts": (start,) + (0,) * t.ndim,
                                                "stops": (stop, *t.shape),
                                                "steps": (1,) * (t.ndim + 1)}, cut, b.loc))
            out = cut
        stacked.append(out)
    bbody = _backward_body(bl.body, plan)
    new_b = Node("scan", (*b.inputs, *stacked),
                 {**b.attrs, "loop": dataclasses.replace(bl, body=bbody)}, b.out, b.loc)
    nodes = []
    for n in graph.nodes:
        if n is f:
            nodes.append(new_f)
        elif n is b:
            nodes += added + [new_b]
        elif n.op == "loop_output" and n.inputs[0] is f.out:
            nodes.append(Node(n.op, (new_f.out,), n.attrs, n.out, n.loc))
        else:
            nodes.append(n)
    return graph.replace(nodes=nodes)


def _forward_body(body: Graph, plan: _Plan, n_carry: int) -> tuple[Graph, list[Value]]:
    """``body`` stacking each residual too (unless it stacks it already), and the
    residuals' values in it: a nested scan that the backward body's copy
    extends is replaced by that copy's loop, and a result of one that no ``loop_output``
    reads yet gets one."""
    swap: dict[Node, Node] = {}
    for x in plan.found:
        if isinstance(x, _Out) and x.loop is not x.scan.attrs["loop"] and x.scan not in swap:
            loop = x.loop
            swap[x.scan] = Node("scan", x.scan.inputs, {**x.scan.attrs, "loop": loop},
                                Value(TensorType((len(loop.body.outputs),), np.dtype(object))),
                                x.scan.loc)
    renamed = {old.out: new.out for old, new in swap.items()}
    nodes = []
    for n in body.nodes:
        if n in swap:
            nodes.append(swap[n])
        elif n.op == "loop_output" and n.inputs[0] in renamed:
            nodes.append(Node(n.op, (renamed[n.inputs[0]],), n.attrs, n.out, n.loc))
        else:
            nodes.append(n)
    values = []
    for x in plan.found:
        if isinstance(x, _Out):
            out = Value(x.type)
            source = swap[x.scan].out if x.scan in swap else x.scan.out
            nodes.append(Node("loop_output", (source,), {"index": x.index, "type": x.type},
                              out, x.scan.loc))
            x = out
        values.append(x)
    stacked = body.outputs[n_carry:]
    more = [v for i, v in enumerate(values) if v not in stacked and v not in values[:i]]
    same = len(nodes) == len(body.nodes) and all(map(_is, nodes, body.nodes))
    return Graph(body.inputs, body.nodes if same else nodes, body.outputs + more,
                 body.name), values


def _backward_body(body: Graph, plan: _Plan) -> Graph:
    """``body`` reading each stored value from a new per-step input, without the nodes
    that only computed them."""
    inputs = [Value(v.type, f"res{k}") for k, v in enumerate(plan.stored)]
    env = dict(zip(plan.stored, inputs, strict=True))
    kept = []
    for n in body.nodes:
        if n.out in env:
            continue
        if any(v in env for v in n.inputs):
            n = Node(n.op, tuple(env.get(v, v) for v in n.inputs), n.attrs, n.out, n.loc)
        kept.append(n)
    outputs = [env.get(v, v) for v in body.outputs]
    live = set(outputs)
    nodes = []
    for n in reversed(kept):
        if n.out in live or has_effect(n):
            nodes.append(n)
            live.update(n.inputs)
    return Graph(body.inputs + inputs, nodes[::-1], outputs, body.name)
