"""Pytrees: nested tuples, lists, dicts (and namedtuples) of leaves.

A tree definition is a nested tuple, so it is hashable and can be part of a cache key.
Dict keys are sorted, as in JAX. ``None`` is an empty subtree, not a leaf.
"""

from __future__ import annotations

from typing import Any

LEAF = "*"


def flatten(tree: Any) -> tuple[list, Any]:
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    t = type(tree)
    if t is tuple or t is list:
        return ("t" if t is tuple else "l", tuple(_flatten(c, leaves) for c in tree))
    if t is dict:
        keys = sorted(tree)
        return ("d", tuple(keys), tuple(_flatten(tree[k], leaves) for k in keys))
    if tree is None:
        return None
    if isinstance(tree, tuple) and hasattr(t, "_fields"):  # namedtuple
        return ("n", t, tuple(_flatten(c, leaves) for c in tree))
    leaves.append(tree)
    return LEAF


def unflatten(treedef: Any, leaves) -> Any:
    return _unflatten(treedef, iter(leaves))


def _unflatten(td, it):
    if td is LEAF:
        return next(it)
    if td is None:
        return None
    kind = td[0]
    if kind == "t":
        return tuple(_unflatten(c, it) for c in td[1])
    if kind == "l":
        return [_unflatten(c, it) for c in td[1]]
    if kind == "d":
        return {k: _unflatten(c, it) for k, c in zip(td[1], td[2], strict=True)}
    return td[1](*(_unflatten(c, it) for c in td[2]))


def leaf_paths(treedef: Any, prefix: str) -> list[str]:
    """Readable names for the leaves, e.g. ``params.W`` or ``xs.1`` (used to name IR inputs)."""
    out: list[str] = []
    _paths(treedef, prefix, out, False)
    return out


def leaf_exprs(treedef: Any, prefix: str) -> list[str]:
    """The leaves as the Python expressions that reach them, e.g. ``params['W']`` or
    ``xs[1]``, for messages that point the user at one argument."""
    out: list[str] = []
    _paths(treedef, prefix, out, True)
    return out


def _paths(td, prefix: str, out: list[str], python: bool) -> None:
    if td is LEAF:
        out.append(prefix)
    elif td is not None:
        if td[0] == "d":
            steps = [f"[{k!r}]" if python else f".{k}" for k in td[1]]
        elif td[0] == "n" and python:
            steps = [f".{f}" for f in td[1]._fields]
        else:
            steps = [f"[{i}]" if python else f".{i}" for i in range(len(td[-1]))]
        for step, c in zip(steps, td[-1], strict=True):
            _paths(c, prefix + step, out, python)
