"""The op registry: one definition per IR op.

Each entry gives the op's kind, its shape/dtype rule (``rule(*input_types, **attrs) ->
TensorType``, raising the error NumPy would raise) and its NumPy reference implementation
(``impl(*arrays, **attrs)``). Passes, backends, the README's op table
(``tools/optable.py``) and the tests that enumerate the registry all read from here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .types import TensorType

if TYPE_CHECKING:
    from .graph import Node


class Kind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    CONTRACTION = "contraction"
    STRUCTURAL = "structural"
    INDEXING = "indexing"
    CREATION = "creation"
    TRANSFER = "transfer"


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: Kind
    rule: Callable[..., TensorType]
    impl: Callable
    doc: str
    ufunc: np.ufunc | None = None


REGISTRY: dict[str, OpDef] = {}


def register(name: str, kind: Kind, rule, impl, doc: str, ufunc: np.ufunc | None = None) -> None:
    if name in REGISTRY:
        raise ValueError(f"op {name!r} registered twice")
    REGISTRY[name] = OpDef(name, kind, rule, impl, doc, ufunc)


COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def loop_dtypes(node: Node) -> tuple[np.dtype, ...] | None:
    """(input dtypes the op computes in..., output dtype) for an elementwise node, as
    NumPy's ufunc loop would choose them; None for an op without a ufunc. The backends
    generate their loops in these dtypes."""
    types = [v.type for v in node.inputs]
    if node.op in COMPARISONS and any(t.weak and t.dtype.kind == "i" for t in types):
        # NumPy compares with a Python int exactly, even one outside the array's dtype
        # (int32_array == 2**40 is False): compare in int64, which holds both sides.
        if all(t.dtype.kind in "bi" or (t.dtype.kind == "u" and t.dtype.itemsize < 8)
               for t in types):
            i64 = np.dtype(np.int64)
            return (i64, i64, np.dtype(bool))
    if node.op == "where":
        out = node.out.type.dtype
        return (np.dtype(bool), out, out, out)
    if node.op == "convert":
        return (types[0].dtype, node.out.type.dtype)
    uf = REGISTRY[node.op].ufunc
    if uf is None:
        return None
    all_weak = all(t.weak for t in types)
    operands = tuple(t.dtype if all_weak else t.promotion_operand() for t in types)
    return tuple(uf.resolve_dtypes(operands + (None,)))
