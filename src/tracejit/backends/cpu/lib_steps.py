"""Library steps the runner calls as NumPy would, without the IR's packing around them.

The IR packs a linear-algebra call with several results into one array (``slogdet`` is
``[sign, logabsdet]``, ``eigh`` is ``[w..., v...]``: ``ir/linalg_ops.py``) that slices and
reshapes take apart again. Each of those steps costs the runner a few tenths of a
microsecond, and the packing itself (``np.concatenate``) a microsecond or more, around a
call of a few microseconds. Where every reader of a packed result takes one part out whole
(a slice of exactly that part, then a reshape to its shape), the runner unpacks the
call's own tuple into those readers' names instead (``t3, t5 = np.linalg.slogdet(a0)``)
and runs none of the slices and reshapes. ``det`` of a matrix whose ``slogdet`` the
runner unpacked before is NumPy's own formula on those parts (NumPy computes ``det`` as
``sign * exp(logabsdet)`` after the same LU factorisation, ``exp`` from the C library, as
``math.exp`` is), so no second factorisation runs; where the result is not finite it
calls ``np.linalg.det`` after all, which gives NumPy's value and its warnings. A
``broadcast_to`` that only a ``scatter_add`` reads as its updates is not made either:
``np.add.at`` broadcasts the updates to the indexed region itself (``np.add.at(counts, idx,
1)`` is how NumPy code writes it; ``np.broadcast_to`` costs over a microsecond). The
inner product of two float vectors, which the IR writes as a matmul of a row by a column
reshaped to a 0-d value, is ``np.dot`` of the vectors (what ``u @ v`` and
``np.linalg.norm`` call; NumPy's matmul of a row by a column runs the same dot loop, so
the bits are the same). An element taken out as a 0-d value (a slice of one element,
reshaped to 0-d: ``r[0]``) is one integer index, a NumPy scalar, as in NumPy. Float
arithmetic on 0-d values one of which is such a NumPy scalar (a reduction's, an element,
an inner product, a det or slogdet part, or another such result) is Python's operator:
NumPy's scalar arithmetic, the same IEEE operation and result dtype as the ufunc, without
its call (``sign * logdet`` is written so in NumPy code too).

A weakly typed 0-d value (``-lr``, ``2.0 * lr`` of a Python float ``lr``: the IR's ``~``)
is a Python scalar in NumPy code, which NumPy 2 promotes weakly (``x32 * -lr`` stays
float32); a ufunc's NumPy scalar would promote strongly (float64). The runner keeps such a
step's result a Python scalar, as the reference backend does: negation, ``abs`` and
addition, subtraction and multiplication of Python floats are Python's operators (the same
IEEE operation the float64 ufunc does, without its call, and what the user's code ran);
other such steps are the ufunc, its result taken out with ``.item()``. A weak result read
only by conversions to its own dtype (``np.cos(theta)``: NumPy returns a float64 scalar,
which the IR writes as a weak ``cos`` and a ``convert``) stays the ufunc's NumPy scalar and
the conversions are not run; negating such a scalar is Python's operator on it. A solve
for a vector (``np.linalg.solve(A, b)`` of a 1-d ``b``, which the trace spells with ``b``
as a column) is NumPy's call on the vector (``solved_vectors``), and an array of 0-d
values one ``np.array`` call (``scalar_arrays.py``). ``lib_lines.py`` writes the lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...ir import Graph, Node, Value
from ...ir.linalg_ops import parts
from ...ir.registry import REGISTRY
from ...passes.fusion import Kernel
from .scalar_arrays import scalar_arrays

# The packed linalg ops the runner unpacks, as the NumPy calls returning their parts.
_CALLS = {
    "slogdet": lambda a: "np.linalg.slogdet({x})",
    "eigh": lambda a: "np.linalg.eigh({x}, UPLO=" + repr(a["UPLO"]) + ")" if a["vectors"]
    else None,
    "qr": lambda a: "np.linalg.qr({x}, mode=" + repr(a["mode"]) + ")" if a["mode"] != "r"
    else None,
    "svd": lambda a: "np.linalg.svd({x}, full_matrices=" + repr(a["full_matrices"]) + ")"
    if a["compute_uv"] else None,
}
_DOUBLE = np.dtype(np.float64)
_OPERATORS = {"add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
              "true_divide": "{0} / {1}"}
# Weak float arithmetic that is Python's own operator on Python floats (exactly IEEE, and
# never raising, unlike ``/`` by zero or ``**``).
_PYTHON = {"add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
           "negative": "-{0}", "absolute": "abs({0})"}
_SCALAR_MAKERS = frozenset({"sum", "prod", "max", "min", "argmax", "argmin"})  # ufunc.reduce


@dataclass
class Unpacking:
    """``parts``: per packed node unpacked, the value each part binds to (the reshape or
    slice that takes it out; None for a part nothing reads); ``dropped``: the slice and
    reshape steps that no longer run; ``dets``: det nodes computed from an earlier
    unpacked slogdet of the same matrix; the others as the module says."""

    parts: dict[Node, list[Value | None]] = field(default_factory=dict)
    dropped: set[Node] = field(default_factory=set)
    dets: dict[Node, Node] = field(default_factory=dict)
    aliases: dict[Value, Value] = field(default_factory=dict)  # a dropped step's result: its input
    dots: dict[Node, tuple[Value, Value, Value]] = field(default_factory=dict)  # (u, v, u @ v)
    elements: dict[Node, Value] = field(default_factory=dict)  # slice -> its 0-d reshape
    operators: dict[Node, str] = field(default_factory=dict)  # 0-d float arithmetic: "{0} * {1}"
    scalars: set[Value] = field(default_factory=set)  # values surely NumPy scalars
    items: set[Node] = field(default_factory=set)  # weak results taken out as Python scalars
    arrays: dict[Node, list[Value]] = field(default_factory=dict)  # see scalar_arrays.py
    solves: dict[Node, tuple[Value, Value, bool]] = field(  # (b, x, whether the column is read)
        default_factory=dict)


def unpacking(graph: Graph, kernels: list[Kernel], consts: dict[Value, object],
              columns: dict[Value, Value], products: set[Node]) -> Unpacking:
    """The packed library steps among ``kernels`` (the runner's steps, in order) whose
    results the runner unpacks, the det steps that reuse an unpacked slogdet, and the
    other rewrites above (``consts``: the graph's constants' values; ``columns``: the
    solves of a vector, ``solved_vectors``; ``products``: the matmul steps the runner
    computes on vectors, some of them the solved vectors). (A part
    is a NumPy result of its own layout, eigh's vectors Fortran-ordered: the runner makes
    one that a loop kernel reads C-contiguous, as it does any library result.)"""
    library = {k.nodes[0] for k in kernels if k.kind == "library"}
    readers: dict[Value, list[Node]] = {}
    for node in graph.nodes:
        for v in node.inputs:
            readers.setdefault(v, []).append(node)
    outputs = set(graph.outputs)
    plan = Unpacking()
    python = {v for v in graph.inputs if v.type.weak}  # Python scalars at run time
    python |= {v for v, x in consts.items() if v.type.weak and type(x) in (int, float, complex)}
    for kern in kernels:
        node = kern.nodes[0]
        if kern.kind != "library":
            continue
        if node.out.type.weak and node.out.type.ndim == 0:
            _weak_scalar(node, plan, python, library, readers, outputs)
            continue
        if node.op == "negative" and node.inputs[0] in plan.scalars and \
                node.inputs[0].type.dtype.kind == "f":
            plan.operators[node] = "-{0}"  # (a NumPy scalar's own negation)
            plan.scalars.add(node.out)
            continue
        if node.op == "det" and _det_from_slogdet(node, plan):
            continue
        if node.op == "solve" and node.out in columns:
            _solve_vector(node, columns[node.out], library, readers, outputs, products, plan)
            continue
        if node.op == "broadcast_to" and _updates_only(node, library, readers, outputs, consts):
            plan.aliases[node.out] = node.inputs[0]
            plan.dropped.add(node)
            continue
        if node.op == "matmul" and _inner_product(node, library, readers, outputs, plan):
            continue
        if node.op in _SCALAR_MAKERS and node.out.type.ndim == 0:
            plan.scalars.add(node.out)
        if (node.op in _OPERATORS and node.out.type.shape == () and node.out.type.dtype.kind == "f"
                and all(v.type.shape == () for v in node.inputs)
                and any(v in plan.scalars for v in node.inputs)):
            plan.operators[node] = _OPERATORS[node.op]
            plan.scalars.add(node.out)
            continue
        if node.op == "slice" and node not in plan.dropped:
            takers = readers.get(node.out, [])
            if (node.out.type.size == 1 and node.out not in outputs and len(takers) == 1
                    and takers[0] in library and takers[0].op == "reshape"
                    and takers[0].out.type.shape == ()):
                plan.elements[node] = takers[0].out
                plan.scalars.add(takers[0].out)
                plan.dropped.add(takers[0])
                continue
        bound = _bound_parts(node, library, readers, outputs)
        if bound is not None:
            plan.parts[node], dropped = bound
            plan.scalars |= {v for v in plan.parts[node] if v is not None and v.type.ndim == 0}
            plan.dropped |= dropped
    rest = [k.nodes[0] for k in kernels if k.kind == "library" and k.nodes[0] not in plan.dropped]
    plan.arrays, dropped = scalar_arrays(rest, readers, outputs)
    plan.dropped |= dropped
    return plan


def _weak_scalar(node: Node, plan: Unpacking, python: set[Value], library: set[Node],
                 readers: dict, outputs: set) -> None:
    """Plan weak 0-d step ``node`` as the module says (``python``: the values that are
    Python scalars at run time, which grows)."""
    takers = readers.get(node.out, [])
    same = node.out.type.dtype
    if (isinstance(REGISTRY[node.op].impl, np.ufunc) and takers and node.out not in outputs
            and all(t in library and t.op == "convert" and t.out.type.dtype == same
                    and not t.out.type.weak for t in takers)):
        for t in takers:  # (the ufunc's NumPy scalar is the converted value)
            plan.aliases[t.out] = node.out
            plan.dropped.add(t)
            plan.scalars.add(t.out)
        return
    python.add(node.out)
    if (node.op in _PYTHON and same.kind == "f"
            and all(v in python and v.type.dtype.kind == "f" for v in node.inputs)):
        plan.operators[node] = _PYTHON[node.op]
    else:
        plan.items.add(node)


def solved_vectors(graph: Graph, kernels: list[Kernel]) -> dict[Value, Value]:
    """The solve steps among ``kernels`` that solve for a vector as the trace spells it
    (the 1-d ``b`` reshaped to a column, the ``(m, 1)`` result reshaped back to ``(m,)``):
    per such result, the vector it is the column of. The runner calls
    ``np.linalg.solve(A, b)`` on the vector, as NumPy code does (NumPy 2 solves a 1-d ``b``
    as one column: the same LAPACK call, the same bits)."""
    library = {k.nodes[0] for k in kernels if k.kind == "library"}
    producers = graph.producers()
    found: dict[Value, Value] = {}
    for node in graph.nodes:
        column = producers.get(node.inputs[0]) if node.op == "reshape" and node.inputs else None
        if (node in library and column in library and column.op == "solve"
                and column.inputs[0].type.ndim == 2 and node.out.type.ndim == 1):
            b = producers.get(column.inputs[1])
            if (b in library and b.op == "reshape" and b.inputs[0].type.shape == node.out.type.shape
                    and column.out not in found):
                found[column.out] = node.out
    return found


def _solve_vector(node: Node, x: Value, library: set[Node], readers: dict, outputs: set,
                  products: set[Node], plan: Unpacking) -> None:
    """Plan solve ``node`` as ``x = np.linalg.solve(A, b)`` of the vector ``b``: the
    reshape back to ``x`` and that of ``b`` to a column (if only the solve reads it) are
    not run; the column result is ``x`` reshaped where anything but those and the vector
    products reads it."""
    b = next(n for n in library if n.out is node.inputs[1])
    col = node.out
    back = [r for r in readers[col] if r.out is x]
    plan.dropped |= set(back)
    if readers[b.out] == [node] and b.out not in outputs:
        plan.dropped.add(b)
    plan.solves[node] = (b.inputs[0], x, col in outputs or any(
        r not in products and r.out is not x for r in readers[col]))


def _updates_only(node: Node, library: set[Node], readers: dict, outputs: set,
                  consts: dict) -> bool:
    """Whether broadcast ``node`` is read only as scatter_add steps' updates, of an
    operand that is a NumPy array or scalar of its dtype at run time (a Python scalar
    would add in another precision)."""
    x = node.inputs[0]
    if x in consts:
        value = consts[x]
        if not isinstance(value, (np.ndarray, np.generic)) or value.dtype != x.type.dtype:
            return False
    elif x.type.ndim == 0:
        return False
    takers = readers.get(node.out, [])
    return bool(takers) and node.out not in outputs and all(
        t in library and t.op == "scatter_add" and t.inputs[1] is node.out
        and node.out not in t.inputs[2:] for t in takers)


def _inner_product(node: Node, library: set[Node], readers: dict, outputs: set,
                   plan: Unpacking) -> bool:
    """Record matmul ``node`` as ``np.dot`` of two float vectors if it is one: a row
    ``(1, n)`` and a column ``(n, 1)`` reshaped from 1-d values, its product read only by
    one reshape to 0-d (the steps no longer needed are dropped)."""
    row, col = (_reshaped(v, library) for v in node.inputs)
    takers = readers.get(node.out, [])
    if (row is None or col is None or node.out.type.dtype.kind != "f" or node.out in outputs
            or len(takers) != 1 or takers[0] not in library or takers[0].op != "reshape"
            or takers[0].out.type.shape != ()):
        return False
    u, v = row.inputs[0], col.inputs[0]
    n = u.type.shape[0] if u.type.ndim == 1 else -1
    if (row.out.type.shape != (1, n) or col.out.type.shape != (n, 1) or v.type.ndim != 1
            or u.type.dtype != v.type.dtype):
        return False
    plan.dots[node] = (u, v, takers[0].out)
    plan.scalars.add(takers[0].out)
    plan.dropped.add(takers[0])
    for r in (row, col):  # (a row read by several inner products goes with the last)
        if r.out not in outputs and all(t is node or t in plan.dots for t in readers[r.out]):
            plan.dropped.add(r)
    return True


def _reshaped(v: Value, library: set[Node]) -> Node | None:
    """The reshape library step making ``v``, if one does."""
    node = next((n for n in library if n.out is v), None)
    return node if node is not None and node.op == "reshape" else None


def _det_from_slogdet(node: Node, plan: Unpacking) -> bool:
    """Record ``node`` (a det) as computed from an unpacked slogdet of its float64 matrix."""
    x = node.inputs[0]
    if x.type.ndim != 2 or x.type.dtype != _DOUBLE:
        return False
    for packed in plan.parts:
        if packed.op == "slogdet" and packed.inputs[0] is x:
            plan.dets[node] = packed
            plan.scalars.add(node.out)
            return True
    return False


def _bound_parts(node: Node, library: set[Node], readers: dict,
                 outputs: set) -> tuple[list[Value | None], set[Node]] | None:
    """The values ``node``'s parts bind to and the steps dropped, or None where some reader
    of the packed result takes anything but a whole part out."""
    if node.op not in _CALLS or _CALLS[node.op](node.attrs) is None:
        return None
    x = node.inputs[0]
    if x.type.ndim != 2 or node.out in outputs or not readers.get(node.out):
        return None
    shapes = parts(node.op, x.type.shape, **node.attrs)
    starts = np.cumsum([0] + [math.prod(s) for s in shapes]).tolist()
    bound: list[Value | None] = [None] * len(shapes)
    dropped: set[Node] = set()
    for s in readers[node.out]:
        if s not in library or s.op != "slice" or s.attrs["steps"] != (1,):
            return None
        try:
            i = starts.index(s.attrs["starts"][0])
        except ValueError:
            return None
        if i >= len(shapes) or s.attrs["stops"] != (starts[i + 1],):
            return None
        whole = shapes[i] == s.out.type.shape
        takers = [s] if whole else readers.get(s.out, [])
        if not whole and (s.out in outputs or not takers):
            return None
        for t in takers:
            if t is not s and (t not in library or t.op != "reshape"
                               or tuple(t.attrs["shape"]) != shapes[i]):
                return None
            if bound[i] is not None:
                return None  # (a part taken out twice stays a step of its own)
            bound[i] = t.out
            dropped.add(t)
        dropped.add(s)
    return bound, dropped


def call(node: Node, x: str) -> str:
    """The NumPy call returning packed ``node``'s parts as a tuple, on operand ``x``."""
    return _CALLS[node.op](node.attrs).format(x=x)


def det_from_slogdet(sign, logabsdet, x):
    """NumPy's det from its slogdet's parts (the same value, bit for bit), or NumPy's det
    of ``x`` itself where that is not finite (overflow, a singular or NaN matrix: NumPy's
    value and warnings)."""
    if -708.0 < logabsdet < 708.0:
        return sign * math.exp(logabsdet)
    return np.linalg.det(x)
