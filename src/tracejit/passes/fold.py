"""Constant folding: evaluate a node whose inputs are all constants once, at compile time.

Only small results are folded (a constant is kept in the graph and in every printout), and
only when NumPy computes them silently: a node that raises or warns stays, so the error or
warning happens at run time under the user's ``np.errstate``, as it would in NumPy.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from ..ir import Node, Value
from ..ir.registry import REGISTRY, Kind, has_effect
from ..ir.types import type_of_constant

MAX_ELEMENTS = 64


def constant_value(v: Value, producer: Callable[[Value], Node | None]):
    """The literal ``v`` holds if a ``constant`` node defines it, else None."""
    node = producer(v)
    return node.attrs["value"] if node is not None and node.op == "constant" else None


def fold(node: Node, producer: Callable[[Value], Node | None]) -> Node | None:
    """A ``constant`` node defining ``node.out``, or None if ``node`` must stay."""
    if node.op == "constant" or has_effect(node):  # a draw is new on every call
        return None
    if REGISTRY[node.op].kind is Kind.LOOP:  # a whole loop run at compile time; no array
        return None
    args = [constant_value(v, producer) for v in node.inputs]
    if any(a is None for a in args) or node.out.type.size > MAX_ELEMENTS:
        return None
    try:
        with warnings.catch_warnings(), np.errstate(all="raise"):
            warnings.simplefilter("error")
            value = REGISTRY[node.op].impl(*args, **node.attrs)
    except Exception:  # whatever NumPy raises, it must raise at run time instead
        return None
    t = node.out.type
    # As the reference backend does: weak results are Python scalars, others private arrays.
    value = np.asarray(value).item() if t.weak else np.array(value)
    if type_of_constant(value) != t:
        return None
    return Node("constant", (), {"value": value}, node.out, node.loc)
