"""Arrays of 0-d values, made as NumPy code makes them: ``np.array([[c, -s], [s, c]])``.

The trace spells such an array as steps: each element reshaped to ``(1,)``, the pieces
concatenated, reshaped to rows and concatenated again (seven steps for a 2x2 matrix, a few
tenths of a microsecond each, a concatenation over one). Where a tree of such library
steps is read only by itself but for its root (its value is the elements in C order:
reshapes keep that order, concatenations along axis 0 append), the runner makes the root
in one call, ``np.array`` of the nested list of its elements in the root's dtype, which
every element has: the same values, copied into a new C-contiguous array of the root's
shape, as the steps made it. A root of one element (no concatenation) stays as it was.
"""

from __future__ import annotations

from ...ir import Node, Value


def scalar_arrays(library: list[Node], readers: dict[Value, list[Node]],
                  outputs: set[Value]) -> tuple[dict[Node, list[Value]], set[Node]]:
    """Per root step among ``library`` (the runner's library steps, in order), the
    elements it is made of, in C order; and the steps no longer run."""
    forms: dict[Value, list[Value]] = {}
    made: dict[Value, Node] = {}
    for node in library:
        form = _form(node, forms)
        if form is not None:
            forms[node.out], made[node.out] = form, node
    roots = {v for v in made if v in outputs or any(r.out not in forms
                                                    for r in readers.get(v, []))}
    kept: set[Value] = set()  # the trees of one-element roots, which stay steps
    todo = [v for v in roots if len(forms[v]) == 1]
    while todo:
        v = todo.pop()
        if v not in kept:
            kept.add(v)
            todo += [x for x in made[v].inputs if x in made]
    built = {made[v]: forms[v] for v in roots if v not in kept}
    return built, {made[v] for v in made if v not in roots and v not in kept}


def _form(node: Node, forms: dict[Value, list[Value]]) -> list[Value] | None:
    """The elements of ``node``'s result if it is a reshape or an axis-0 concatenation
    of 0-d values (or of such results) of its own dtype, else None."""
    out = node.out.type
    if out.ndim == 0 or any(v.type.dtype != out.dtype for v in node.inputs):
        return None
    if node.op == "reshape":
        x = node.inputs[0]
        return [x] if x.type.ndim == 0 else forms.get(x)
    if node.op == "concatenate" and node.attrs.get("axis") == 0 and all(
            v in forms for v in node.inputs):
        return [e for v in node.inputs for e in forms[v]]
    return None


def nested(names: list[str], shape: tuple[int, ...]) -> str:
    """The nested list literal of ``names`` (C order) in ``shape``."""
    if len(shape) == 1:
        return f"[{', '.join(names)}]"
    step = len(names) // shape[0]
    rows = (nested(names[i:i + step], shape[1:]) for i in range(0, len(names), step))
    return f"[{', '.join(rows)}]"
