"""The op registry: one definition per IR op.

Each entry gives the op's kind, its shape/dtype rule (``rule(*input_types, **attrs) ->
TensorType``, raising the error NumPy would raise) and its NumPy reference implementation
(``impl(*arrays, **attrs)``). Passes, backends, the README's op table
(``tools/optable.py``) and the tests that enumerate the registry all read from here.

The op-level facts that more than one place needs live here too, keyed by the op as JAX
keys a primitive's rules by the primitive, so that no pass, backend or test keeps its own
list of them: a reduction's ``monoid`` (its identity and the elementwise op that
accumulates it: the fusion pass, both code generators and ``np.add.reduce`` read it),
``exactness`` (which results a compiled backend may compute differently from NumPy, and
by how much: the checking mode and the tests read it) and ``grad`` (whether the op has a
VJP rule, a zero gradient or none: the autodiff tests check ``ad/rules.py`` against it).
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
    LINALG = "linalg"  # numpy.linalg factorisations and solvers (ir/linalg_ops.py)
    SPECTRAL = "spectral"  # numpy.fft's transforms along an axis (ir/fft_ops.py)
    STRUCTURAL = "structural"
    INDEXING = "indexing"
    CREATION = "creation"
    TRANSFER = "transfer"
    RANDOM = "random"  # a draw from a random generator (``ir/random_ops.py``)
    SCAN = "scan"  # cumulative along one axis (cumsum, cumprod, cummax, cummin)
    SORTING = "sorting"  # orderings and binary searches (argsort, searchsorted)
    LOOP = "loop"  # a loop with a body graph (scan, while_loop) and its results


class Exactness(enum.Enum):
    """How closely a compiled backend reproduces NumPy's result of an op."""

    EXACT = "exact"  # bit for bit (integer ops, correctly rounded float ops such as sqrt)
    ULP = "ulp"  # float math from the backend's own routines: within ULP_BOUND of NumPy
    ORDER = "order"  # adds many terms in an order the backend chooses (not NumPy's pairwise)


# The accuracy, in units in the last place, of every Exactness.ULP op on a compiled backend
# (backends/cpu/math.py and CUDA's math library; bench/results/ulp-*.md measure it).
ULP_BOUND = 4


class Grad(enum.Enum):
    """What reverse-mode autodiff does at an op (``ad/rules.py`` holds the rules)."""

    RULE = "rule"  # a VJP rule in ad/rules.VJP
    ZERO = "zero"  # a float result that is piecewise constant: the gradient stops, as zero
    NONE = "none"  # no cotangent: bool, integer or index results, or ops placed after AD


@dataclass(frozen=True)
class Monoid:
    """How a reduction accumulates: from ``identity(dtype)`` (the result over no elements,
    a Python scalar a code generator renders as a literal of ``dtype``), each element is
    folded in with the binary elementwise op ``combine`` (a registry op name) in the
    output dtype. A reduction with a monoid is one a loop kernel can compute."""

    combine: str
    identity: Callable[[np.dtype], object]


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: Kind
    rule: Callable[..., TensorType]
    impl: Callable
    doc: str
    ufunc: np.ufunc | None = None
    monoid: Monoid | None = None  # reductions a loop kernel computes (not argmax/argmin)
    exactness: Exactness = Exactness.EXACT
    grad: Grad = Grad.RULE
    # Changes state outside the graph (a random generator's): passes keep every such node,
    # even unused, in program order, and never merge, fold or fuse it.
    effect: bool = False


REGISTRY: dict[str, OpDef] = {}


def register(name: str, kind: Kind, rule: Callable[..., TensorType], impl: Callable, doc: str,
             *, ufunc: np.ufunc | None = None, monoid: Monoid | None = None,
             exactness: Exactness = Exactness.EXACT, grad: Grad = Grad.RULE,
             effect: bool = False) -> None:
    """Define op ``name`` (see ``OpDef``); defining one twice is an error."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} registered twice")
    REGISTRY[name] = OpDef(name, kind, rule, impl, doc, ufunc, monoid, exactness, grad, effect)


def has_effect(node: Node) -> bool:
    """Whether ``node`` changes state outside the graph (see ``OpDef.effect``)."""
    return REGISTRY[node.op].effect


def monoid_of(op: str) -> Monoid:
    """The monoid of reduction ``op``; a KeyError names an op a loop cannot reduce."""
    found = REGISTRY[op].monoid
    if found is None:
        raise KeyError(f"{op!r} has no monoid: no loop kernel computes it")
    return found


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
