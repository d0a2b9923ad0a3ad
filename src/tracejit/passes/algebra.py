"""Algebraic identities that keep NumPy's results bit for bit.

A rule returns an existing value to use instead of the node, a list of new nodes (the last
defines the node's own output), or None. Each rule only fires where IEEE arithmetic makes the
result identical for every input (signed zeros, infinities, quiet NaNs with their sign and
payload) and the replacement has the node's exact type. Signalling NaNs are not preserved
(``x * 1`` quiets them), as in GCC and LLVM without ``-fsignaling-nans``.

Deliberately absent: ``x + 0.0`` (gives +0.0 for -0.0), ``x - (-0.0)``, complex ``x * 1``
(``inf * 0`` makes NaN in the cross terms), float ``x ** 3`` as multiplies (two roundings
instead of one), ``x ** -1`` and float ``x ** 1`` (NumPy calls libm or SVML ``pow``, whose
rounding and NaN handling vary: float16 drops the NaN sign), ``x ** 0.5`` as ``sqrt``
(``pow`` gives +0.0 for -0.0 and +inf for -inf; NumPy takes ``sqrt`` only in a fast path that
depends on the exponent's memory layout) and integer negative powers (NumPy raises).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..errors import TracejitError
from ..ir import Kind, Node, Value
from ..ir.ops import slice_length
from ..ir.registry import REGISTRY
from .fold import constant_value

Producer = Callable[[Value], Node | None]


def _new(op: str, inputs: tuple[Value, ...], attrs: dict, like: Node, out: Value | None = None):
    """A node for ``op``, or None if its rule rejects it or gives a type other than ``out``'s."""
    try:
        t = REGISTRY[op].rule(*(v.type for v in inputs), **attrs)
    except TracejitError:
        return None
    if out is not None and t != out.type:
        return None
    return Node(op, inputs, attrs, out if out is not None else Value(t), like.loc)


def _as(c, dtype: np.dtype) -> np.ndarray:
    """The constant as the ufunc loop sees it: cast to the loop (= output) dtype."""
    with np.errstate(all="ignore"):
        return np.asarray(c).astype(dtype)


def _ones(c, dtype) -> bool:
    return bool(np.all(_as(c, dtype) == 1))


def _zeros(c, dtype, negative: bool) -> bool:
    """All zero; for floats also all of the given sign (x + -0.0 and x - +0.0 are exact)."""
    a = _as(c, dtype)
    return bool(np.all(a == 0)) and (dtype.kind != "f" or bool(np.all(np.signbit(a) == negative)))


# op -> (positions the neutral constant may take, its test, dtype kinds where x op c == x)
_NEUTRAL = {
    "multiply": ((0, 1), _ones, "biuf"),
    "add": ((0, 1), lambda c, dt: _zeros(c, dt, negative=True), "biuf"),
    "subtract": ((1,), lambda c, dt: _zeros(c, dt, negative=False), "iuf"),
    "true_divide": ((1,), _ones, "f"),
    "power": ((1,), _ones, "iu"),
}


def _neutral(node: Node, producer: Producer):
    sides, test, kinds = _NEUTRAL[node.op]
    t = node.out.type
    if t.dtype.kind not in kinds:
        return None
    for i in sides:
        x, c = node.inputs[1 - i], constant_value(node.inputs[i], producer)
        if c is not None and x.type == t and test(c, t.dtype):
            return x
    return None


def _power(node: Node, producer: Producer):
    """x**2 -> x*x where NumPy computes exactly that: integers (exact modular products), and
    float32/float64 with a 0-d exponent (NumPy's loop has that fast path). Integers also
    x**3, x**4."""
    x, e = node.inputs
    c = constant_value(e, producer)
    kind, dtype = node.out.type.dtype.kind, node.out.type.dtype
    if c is None or np.ndim(c) != 0 or kind not in "iuf":
        return _neutral(node, producer)
    n = _as(c, dtype)[()]
    if n == 2 and (kind in "iu" or dtype in (np.float32, np.float64)):
        new = _new("multiply", (x, x), {}, node, node.out)
        return [new] if new else None
    if n in (3, 4) and kind in "iu":
        sq = _new("multiply", (x, x), {}, node)
        if sq is None:
            return None
        last = _new("multiply", (sq.out, x if n == 3 else sq.out), {}, node, node.out)
        return [sq, last] if last else None
    return _neutral(node, producer)


def _negative(node: Node, producer: Producer):
    inner = producer(node.inputs[0])
    if inner is not None and inner.op == "negative" and inner.inputs[0].type == node.out.type:
        return inner.inputs[0]
    return None


def _transpose(node: Node, producer: Producer):
    x, perm = node.inputs[0], node.attrs["perm"]
    if tuple(perm) == tuple(range(len(perm))):
        return x if x.type == node.out.type else None
    inner = producer(x)
    if inner is None or inner.op != "transpose":
        return None
    composed = tuple(inner.attrs["perm"][p] for p in perm)
    new = _new("transpose", inner.inputs, {"perm": composed}, node, node.out)
    return [new] if new else None


def _reshape(node: Node, producer: Producer):
    x, shape = node.inputs[0], tuple(node.attrs["shape"])
    if shape == x.type.shape:
        return x if x.type == node.out.type else None
    inner = producer(x)
    if inner is not None and inner.op in _KEEPDIMS and not inner.attrs["keepdims"]:
        # reshape(sum(x, axis), keepdims shape) is sum(x, axis, keepdims=True)
        new = _new(inner.op, inner.inputs, {**inner.attrs, "keepdims": True}, node, node.out)
        return [new] if new else None
    if inner is not None and inner.op == "broadcast_to" and inner.inputs[0].type.size == 1:
        one = _new("reshape", inner.inputs, {"shape": (1,) * len(shape)}, node)
        wide = one and _new("broadcast_to", (one.out,), {"shape": shape}, node, node.out)
        return [one, wide] if wide else None
    if inner is None or inner.op != "reshape":
        return None
    new = _new("reshape", inner.inputs, {"shape": shape}, node, node.out)
    return [new] if new else None


_KEEPDIMS = {"sum", "prod", "max", "min", "any", "all"}


def _elementwise(node: Node, producer: Producer):
    """An elementwise op reads a ``broadcast_to`` input unbroadcast where its own
    broadcasting gives the same result; with one input it computes on the small operand and
    broadcasts the result. Either way fusion then sees elementwise work, not a view."""
    ins = [producer(v) for v in node.inputs]
    if not any(n is not None and n.op == "broadcast_to" for n in ins):
        return None
    if len(node.inputs) == 1:
        small = _new(node.op, ins[0].inputs, node.attrs, node)
        if small is None:
            return None
        wide = _new("broadcast_to", (small.out,), {"shape": node.out.type.shape}, node, node.out)
        return [small, wide] if wide else None
    inputs = tuple(n.inputs[0] if n is not None and n.op == "broadcast_to" else v
                   for v, n in zip(node.inputs, ins, strict=True))
    new = _new(node.op, inputs, node.attrs, node, node.out)
    return [new] if new else None


def _broadcast_to(node: Node, producer: Producer):
    """Its own shape: the input; of a broadcast: one broadcast."""
    x = node.inputs[0]
    if x.type == node.out.type:
        return x
    inner = producer(x)
    if inner is None or inner.op != "broadcast_to":
        return None
    new = _new("broadcast_to", inner.inputs, node.attrs, node, node.out)
    return [new] if new else None


def _slice(node: Node, producer: Producer):
    """A slice taking every element in order is its input; a slice of a slice is one slice
    (``k[::-1][::-1]`` is ``k``)."""
    x, attrs = node.inputs[0], node.attrs
    inner = producer(x)
    if inner is not None and inner.op == "reshape":
        return _before_reshape(node, inner, producer)
    if inner is not None and inner.op == "update_slice":
        return _read_after_write(node, inner, producer)
    if inner is not None and inner.op == "slice":
        attrs = _composed(inner.attrs, attrs, node.out.type.shape)
        x = inner.inputs[0]
    if _whole(attrs, x.type.shape):
        return x if x.type == node.out.type else None
    if x is node.inputs[0]:
        return None
    new = _new("slice", (x,), attrs, node, node.out)
    return [new] if new else None


def _before_reshape(node: Node, reshape: Node, producer: Producer):
    """A slice of a reshape that only drops or inserts dims of size 1, of a slice, moves
    before the reshape, where it composes with the inner slice: ``w[o, c, ::-1][::-1]``
    (a 3-d slice, a reshape to 1-d, a slice) is ``w[o, c, :]``."""
    y = reshape.inputs[0]
    inner = producer(y)
    src, dst = y.type.shape, reshape.out.type.shape
    if inner is None or inner.op != "slice" or \
            [d for d in src if d != 1] != [d for d in dst if d != 1]:
        return None
    kept = [d for d, n in enumerate(dst) if n != 1]
    if any(node.out.type.shape[d] != 1 for d, n in enumerate(dst) if n == 1):
        return None  # an empty slice of a unit dim
    picks = iter(kept)
    attrs = {"starts": [], "stops": [], "steps": []}
    for n in src:
        d = next(picks) if n != 1 else None
        for key, unit in (("starts", 0), ("stops", 1), ("steps", 1)):
            attrs[key].append(unit if d is None else node.attrs[key][d])
    moved = _new("slice", (y,), {k: tuple(v) for k, v in attrs.items()}, node)
    back = moved and _new("reshape", (moved.out,), {"shape": node.out.type.shape}, node,
                          node.out)
    return [moved, back] if back else None


def _read_after_write(node: Node, write: Node, producer: Producer):
    """A slice of ``update_slice(x, u, region)`` reading exactly the region is ``u``; one
    reading none of it is the same slice of ``x`` (``out[o] += f(o)`` in a loop reads back
    what the step before wrote, or what no step wrote yet). The writes it reads past are
    skipped in one walk, not one rewrite each: an unrolled loop stacks thousands."""
    read = _bounds(node.attrs)
    x = node.inputs[0]
    while write is not None and write.op == "update_slice":
        written = _bounds(write.attrs)
        if read == written and write.inputs[1].type == node.out.type and \
                _ranges(node.attrs) == _ranges(write.attrs):
            return write.inputs[1]
        if not _apart(read, written):
            break
        x = write.inputs[0]
        write = producer(x)
    if x is node.inputs[0]:
        return None
    new = _new("slice", (x,), node.attrs, node, node.out)
    return [new] if new else None


def _bounds(attrs: dict) -> tuple[tuple[int, int] | None, ...]:
    """The first and last index a slice's attributes take per dimension, in increasing
    order (None where it takes none)."""
    return _bounds_of(tuple(attrs["starts"]), tuple(attrs["stops"]), tuple(attrs["steps"]))


@functools.lru_cache(maxsize=4096)
def _bounds_of(starts: tuple, stops: tuple, steps: tuple) -> tuple:
    out = []
    for a, b, t in zip(starts, stops, steps, strict=True):
        n = slice_length(a, b, t)
        out.append(None if n == 0 else tuple(sorted((a, a + t * (n - 1)))))
    return tuple(out)


def _apart(read: tuple, written: tuple) -> bool:
    """Whether two regions (``_bounds``) share no element: apart along some dimension."""
    return any(r is not None and w is not None and (r[1] < w[0] or w[1] < r[0])
               for r, w in zip(read, written, strict=True))


def _rewritten(node: Node, producer: Producer):
    """A write over all of an earlier write's region replaces it: ``update_slice`` of
    ``update_slice(x, u, region)`` at the same region is the write to ``x``."""
    inner = producer(node.inputs[0])
    if inner is None or inner.op != "update_slice" or _ranges(inner.attrs) != _ranges(
            node.attrs):
        return None
    new = _new("update_slice", (inner.inputs[0], node.inputs[1]), node.attrs, node, node.out)
    return [new] if new else None


def _ranges(attrs: dict) -> list[range]:
    """The indices a slice's attributes take, per dimension."""
    return [range(a, a + t * slice_length(a, b, t), t) for a, b, t in
            zip(attrs["starts"], attrs["stops"], attrs["steps"], strict=True)]


def _whole(attrs: dict, shape: tuple[int, ...]) -> bool:
    return all(a == 0 and s == 1 and b >= n for a, b, s, n in
               zip(attrs["starts"], attrs["stops"], attrs["steps"], shape, strict=True))


def _composed(inner: dict, outer: dict, shape: tuple[int, ...]) -> dict:
    """The one slice that takes ``outer`` of ``inner``'s result (``shape``, the outer
    result's), in the IR's normal form: a stop below 0 means "through index 0"."""
    starts, stops, steps = [], [], []
    for d, n in enumerate(shape):
        a1, t1 = inner["starts"][d], inner["steps"][d]
        a2, t2 = outer["starts"][d], outer["steps"][d]
        if n == 0:
            a, b, t = 0, 0, 1
        else:
            a, t = a1 + t1 * a2, t1 * t2
            b = a + t * n  # one step past the last index taken
        starts.append(a)
        stops.append(b if b >= 0 else -1)
        steps.append(t)
    return {"starts": tuple(starts), "stops": tuple(stops), "steps": tuple(steps)}


def _pad(node: Node, producer: Producer):
    """A pad of no width is its input."""
    x = node.inputs[0]
    if all(a == b == 0 for a, b in node.attrs["widths"]) and x.type == node.out.type:
        return x
    return None


def _same_type(node: Node, producer: Producer):
    """``broadcast_to`` its own shape, ``convert`` to its own dtype (strong values only)."""
    x = node.inputs[0]
    return x if x.type == node.out.type else None


REWRITES: dict[str, Callable[[Node, Producer], Value | list[Node] | None]] = {
    **dict.fromkeys(_NEUTRAL, _neutral),
    "power": _power,
    "negative": _negative,
    "transpose": _transpose,
    "reshape": _reshape,
    "broadcast_to": _broadcast_to,
    "slice": _slice,
    "update_slice": _rewritten,
    "pad": _pad,
    "convert": _same_type,
    "stop_gradient": _same_type,  # only autodiff, which runs while tracing, looks at it
}


def rewrite(node: Node, producer: Producer) -> Value | list[Node] | None:
    rule = REWRITES.get(node.op)
    result = rule(node, producer) if rule else None
    if result is None and REGISTRY[node.op].kind is Kind.ELEMENTWISE:
        result = _elementwise(node, producer)
    return result
