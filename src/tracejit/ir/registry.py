"""The op registry: one definition per IR op.

Each entry gives the op's kind, its shape/dtype rule (``rule(*input_types, **attrs) ->
TensorType``, raising the error NumPy would raise) and its NumPy reference implementation
(``impl(*arrays, **attrs)``). Passes, backends, the README's op table and the tests that
enumerate the registry all read from here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .types import TensorType


class Kind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    CONTRACTION = "contraction"
    STRUCTURAL = "structural"
    INDEXING = "indexing"
    CREATION = "creation"


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


def op_table_markdown() -> str:
    """The README's table of IR ops, generated so it can never drift from the registry."""
    from . import ops  # noqa: F401  (populates REGISTRY)

    lines = ["| kind | ops |", "|---|---|"]
    for kind in Kind:
        names = sorted(n for n, d in REGISTRY.items() if d.kind is kind)
        lines.append(f"| {kind.value} | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines)
