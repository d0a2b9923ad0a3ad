"""The indexing and structural library steps a fused loop driver (``fused.py``) runs
itself, so that a loop body indexing by its counter (``out[t] = a * x[t] + b * out[t - 1]``)
needs no Python per step.

Every value of the driver lies flat, in C order, at a place (an argument array and an
element offset expression), so:

- a ``reshape``, and a ``slice`` whose region is contiguous, is an *alias*: the same
  place (at a static offset further), no copy;
- a ``gather`` whose index arrays hold one element each (or one per element of the
  index batch) copies the indexed blocks out, a ``scatter`` copies its base (unless it
  lies where the result goes: a carry updated in place) and writes the blocks; an index
  is read at run time, wrapped when negative as NumPy does, and one out of bounds stops
  the driver with a status its caller raises as ``IndexOutOfBounds`` (``Failure``);
- ``update_slice``, a strided ``slice`` and ``concatenate`` copy elements at static
  offsets; ``argmax``/``argmin`` scan an axis (NumPy's: the first extremum, the first
  NaN where there is one);
- ``correlate`` (``np.correlate``, ``np.convolve``) is NumPy's direct loop where that
  gives NumPy's bits (``_exact_correlate``: integers; floats in ``valid`` mode with a
  kernel of up to 11 taps, where NumPy sums each output itself, from zero, in ascending
  order), the result reversed where NumPy swaps the operands; the loop over the
  outputs is the inner one, so that it vectorises.

Each step is the body of a Numba function of the driver module; the text names no
graph and holds no constant beyond shapes and offsets, so drivers stay cached by source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...ir import Node
from ...ir.ops import slice_length
from ...ir.signal_ops import padding
from .ops import NUMBA

ALIASES = frozenset({"reshape"})  # always an alias (a slice is when contiguous)
COPIES = frozenset({"gather", "scatter", "update_slice", "slice", "concatenate",
                    "argmax", "argmin", "correlate"})


@dataclass(frozen=True)
class Failure:
    """An index out of bounds found by a fused driver: what its caller raises."""

    node: Node
    axis: int
    size: int


def supported(node: Node) -> bool:
    """Whether the fused driver runs ``node`` (an alias or a copy of this module)."""
    types_ = [v.type for v in (*node.inputs, node.out)]
    if node.op not in ALIASES | COPIES or not all(NUMBA.supports(t.dtype) for t in types_):
        return False
    if node.op == "concatenate":
        return all(t.dtype == node.out.type.dtype for t in types_)
    if node.op in ("argmax", "argmin"):
        return types_[0].dtype.kind in "biuf"
    if node.op == "correlate":
        return _exact_correlate(node)
    if node.op in ("gather", "scatter"):
        idx = node.inputs[1:] if node.op == "gather" else node.inputs[2:]
        batch = _batch(idx)
        return batch is not None and all(t.dtype.kind in "iu" for t in (v.type for v in idx))
    return True


# NumPy's own loop (``small_correlate``) sums the outputs of a float correlation whose
# window lies in the operand for kernels of at most this many taps; it calls the dot
# product (BLAS, FMAs and blocks of its own) for the others and for the outputs in the
# padding.
SMALL_CORRELATE = 11


def _exact_correlate(node: Node) -> bool:
    """Whether this module's loop gives NumPy's bits for correlation ``node``: integers
    (wrapping sums, the same in any order), or floats where NumPy's own loop runs every
    output (``valid`` mode or a single tap, a kernel of ``SMALL_CORRELATE`` taps at
    most). A complex one conjugates and a bool one is a logical or: NumPy's."""
    dtype = node.out.type.dtype
    if dtype.kind in "iu":
        return True
    m = min(v.type.shape[0] for v in node.inputs)
    return (dtype.kind == "f" and padding(node.attrs["mode"], m) == (0, 0)
            and m <= SMALL_CORRELATE)


def _batch(idx) -> int | None:
    """The index batch's size: every index array holds one element or all the same
    number (one per element of the batch); None for other broadcasting."""
    sizes = {v.type.size for v in idx} - {1}
    if len(sizes) > 1:
        return None
    if sizes:  # the arrays that are not single elements must have one shape
        shapes = {v.type.shape for v in idx if v.type.size != 1}
        if len(shapes) > 1:
            return None
    return sizes.pop() if sizes else 1


def _strides(shape) -> list[int]:
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def alias(plan, mod, node: Node) -> tuple[int, str] | None:
    """The place of ``node``'s result when it is a view of its input's place, else None."""
    if node.op == "reshape":
        return plan.locate(node.inputs[0], mod)
    if node.op != "slice":
        return None
    shape = node.inputs[0].type.shape
    starts, stops, steps = (node.attrs[a] for a in ("starts", "stops", "steps"))
    lengths = [slice_length(a, b, s) for a, b, s in zip(starts, stops, steps, strict=True)]
    if 0 in lengths:
        return None  # nothing to read: a scratch place of no elements
    # C-contiguous: single indices, then one run of step 1, then whole dimensions
    p = next((d for d, n in enumerate(lengths) if n != 1), len(shape))
    if p < len(shape) and steps[p] != 1:
        return None
    if any(starts[d] != 0 or lengths[d] != shape[d] or steps[d] != 1
           for d in range(p + 1, len(shape))):
        return None
    j, off = plan.locate(node.inputs[0], mod)
    extra = sum(a * s for a, s in zip(starts, _strides(shape), strict=True))
    return (j, off) if extra == 0 else (j, f"({off}) + {extra}")


def emit(plan, mod, node: Node) -> tuple[list[str], bool]:
    """The body of the function running ``node`` (lines, indented) and whether it can fail
    (it returns True then, having written the status)."""
    return _EMIT[node.op](plan, mod, node)


def _ptr(plan, mod, v, name: str) -> str:
    j, off = plan.locate(v, mod)
    return f"    {name} = at(args, {j}, {NUMBA.dtype_name(v.type.dtype)}, {off})"


def _copy_base(plan, mod, node: Node) -> list[str]:
    """Copy an update's base to where its result lies, unless it lies there already
    (a carry updated in place)."""
    base, out = node.inputs[0], node.out
    if plan.locate(base, mod) == plan.locate(out, mod) or base.type.size == 0:
        return []
    return [_ptr(plan, mod, base, "s"), f"    for q in range({base.type.size}):",
            "        d[q] = s[q]"]


def _indexed(plan, mod, node: Node, idx, axis: int, shape, nb: int, move: str) -> list[str]:
    """The loop over the index batch: read and check each index (``i<k>``), then
    ``move`` each indexed block (given ``f``, the flat offset of the block in ``x``,
    ``o`` the outer index, ``r`` the element in the block)."""
    m = len(idx)
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + m:])
    span = math.prod(shape[axis:])
    step = [math.prod(shape[axis + k + 1:axis + m]) * inner for k in range(m)]
    lines = [f"    for b in range({nb}):"]
    for k, v in enumerate(idx):
        j, off = plan.locate(v, mod)
        n = shape[axis + k]
        which = plan.failure(Failure(node, axis + k, n))
        lines += [f"        r{k} = np.int64(at(args, {j}, {NUMBA.dtype_name(v.type.dtype)}, "
                  f"{off})[{'b' if v.type.size > 1 else '0'}])",
                  f"        i{k} = r{k} + {n} if r{k} < 0 else r{k}",
                  f"        if i{k} < 0 or i{k} >= {n}:",
                  f"            st = at(args, {plan.status()}, np.int64, 0)",
                  f"            st[0] = {which + 1}",
                  f"            st[1] = r{k}",
                  "            return True"]
    flat = " + ".join(f"i{k} * {s}" for k, s in enumerate(step)) or "0"
    move = move.format(xi=f"o * {span} + f + r", bi=f"(o * {nb} + b) * {inner} + r")
    lines += [f"        f = {flat}", f"        for o in range({outer}):",
              f"            for r in range({inner}):", f"                {move}"]
    return lines + ["    return False"]


def _gather(plan, mod, node: Node):
    x, *idx = node.inputs
    nb = _batch(idx)
    lines = [_ptr(plan, mod, x, "s"), _ptr(plan, mod, node.out, "d")]
    return lines + _indexed(plan, mod, node, idx, node.attrs["axis"], x.type.shape, nb,
                            "d[{bi}] = s[{xi}]"), True


def _scatter(plan, mod, node: Node):
    x, updates, *idx = node.inputs
    nb = _batch(idx)
    lines = [_ptr(plan, mod, node.out, "d"), *_copy_base(plan, mod, node),
             _ptr(plan, mod, updates, "u")]
    return lines + _indexed(plan, mod, node, idx, node.attrs["axis"], x.type.shape, nb,
                            "d[{xi}] = u[{bi}]"), True


def _nest(starts, steps, lengths, strides, indent: int = 4) -> tuple[list[str], str, str]:
    """Loops over a static region (``lengths`` from ``starts`` by ``steps`` in an array of
    ``strides``): the lines, the flat index in that array and in the region's own."""
    lines = []
    for d, n in enumerate(lengths):
        lines.append(" " * (indent + 4 * d) + f"for i{d} in range({n}):")
    big = " + ".join(f"({a} + {s} * i{d}) * {st}" for d, (a, s, st)
                     in enumerate(zip(starts, steps, strides, strict=True))) or "0"
    small = " + ".join(f"i{d} * {st}" for d, st in enumerate(_strides(lengths))) or "0"
    return lines, big, small


def _region(node: Node, x) -> tuple:
    starts, stops, steps = (node.attrs[a] for a in ("starts", "stops", "steps"))
    lengths = [slice_length(a, b, s) for a, b, s in zip(starts, stops, steps, strict=True)]
    return starts, steps, lengths, _strides(x.type.shape)


def _update_slice(plan, mod, node: Node):
    x, updates = node.inputs
    starts, steps, lengths, strides = _region(node, x)
    loops, big, small = _nest(starts, steps, lengths, strides)
    pad = " " * (4 + 4 * len(lengths))
    return [_ptr(plan, mod, node.out, "d"), *_copy_base(plan, mod, node),
            _ptr(plan, mod, updates, "u"), *loops, f"{pad}d[{big}] = u[{small}]"], False


def _slice(plan, mod, node: Node):
    x = node.inputs[0]
    starts, steps, lengths, strides = _region(node, x)
    loops, big, small = _nest(starts, steps, lengths, strides)
    pad = " " * (4 + 4 * len(lengths))
    return [_ptr(plan, mod, x, "s"), _ptr(plan, mod, node.out, "d"), *loops,
            f"{pad}d[{small}] = s[{big}]"], False


def _concatenate(plan, mod, node: Node):
    axis, shape = node.attrs["axis"], node.out.type.shape
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    lines = [_ptr(plan, mod, node.out, "d")]
    at_ = 0
    for x in node.inputs:
        block = x.type.shape[axis] * inner
        if block:
            lines += [_ptr(plan, mod, x, "s"), f"    for o in range({outer}):",
                      f"        for r in range({block}):",
                      f"            d[o * {shape[axis] * inner} + {at_} + r] = s[o * {block} + r]"]
        at_ += block
    return lines, False


def _arg_extremum(plan, mod, node: Node):
    x = node.inputs[0]
    shape, axis = x.type.shape, node.attrs["axis"]
    if axis is None:
        outer, n, inner = 1, x.type.size, 1
    else:
        outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    better = ">" if node.op == "argmax" else "<"
    return [_ptr(plan, mod, x, "s"), _ptr(plan, mod, node.out, "d"),
            f"    for o in range({outer}):",
            f"        for r in range({inner}):",
            f"            best = s[o * {n * inner} + r]",
            "            at_ = 0",
            f"            for k in range(1, {n}):",
            "                if best != best:",
            "                    break  # a NaN: the first one is the answer",
            f"                v = s[o * {n * inner} + k * {inner} + r]",
            f"                if v {better} best or v != v:",
            "                    best = v",
            "                    at_ = k",
            f"            d[o * {inner} + r] = at_"], False


# A correlation with at most this many taps writes each output's sum out in full (the
# taps' loop unrolled: the loop over the outputs vectorises, each output stored once);
# a longer one sums a block of outputs (8 KiB of float64, which stays in the L1 cache)
# tap by tap, the inner loop again over the outputs.
CORRELATE_UNROLL = 16
CORRELATE_BLOCK = 1024


def correlate_loops(node: Node) -> list[str]:
    """The loops of correlation ``node`` (lines of a function body) reading the longer
    operand at pointer ``s``, the shorter at ``k`` and writing the result at ``d``. Each
    output adds its terms as NumPy's dot does (from zero, in ascending order, the
    padding's zeros skipped); the outputs whose window reaches into the padding are
    summed one by one, those between by the vectorising loops above."""
    n1, n2 = (v.type.shape[0] for v in node.inputs)
    n, m = max(n1, n2), min(n1, n2)
    left, _ = padding(node.attrs["mode"], m)
    size = node.out.type.size
    zero = f"{NUMBA.dtype_name(node.out.type.dtype)}(0)"
    put = "i" if n1 >= n2 else f"{size - 1} - i"  # NumPy's swap reverses the result
    lo, hi = left, n + left - m + 1  # the outputs whose window lies in the operand
    lines = []
    for a, b in ((0, lo), (hi, size)):
        if a == b:
            continue
        lines += [f"    for i in range({a}, {b}):",
                  f"        acc = {zero}",
                  f"        for j in range(max(0, {left} - i), min({m}, {n + left} - i)):",
                  f"            acc += s[i + j - {left}] * k[j]",
                  f"        d[{put}] = acc"]
    if m <= CORRELATE_UNROLL:
        terms = "".join(f" + s[i + {j - left}] * w{j}" for j in range(m))
        return lines + [f"    w{j} = k[{j}]" for j in range(m)] + [
            f"    for i in range({lo}, {hi}):", f"        d[{put}] = {zero}{terms}"]
    return lines + [
        f"    for i in range({lo}, {hi}):",
        f"        d[{put}] = 0",
        f"    for b in range({lo}, {hi}, {CORRELATE_BLOCK}):",
        f"        e = min(b + {CORRELATE_BLOCK}, {hi})",
        f"        for j in range({m}):",
        "            w = k[j]",
        "            for i in range(b, e):",
        f"                d[{put}] += s[i + j - {left}] * w"]


def correlate_operands(node: Node) -> tuple:
    """The longer operand of correlation ``node`` and the shorter (NumPy's order)."""
    a, v = node.inputs
    return (a, v) if a.type.shape[0] >= v.type.shape[0] else (v, a)


def _correlate(plan, mod, node: Node):
    long, short = correlate_operands(node)
    return [_ptr(plan, mod, long, "s"), _ptr(plan, mod, short, "k"),
            _ptr(plan, mod, node.out, "d"), *correlate_loops(node)], False


_EMIT = {"gather": _gather, "scatter": _scatter, "update_slice": _update_slice,
         "slice": _slice, "concatenate": _concatenate, "argmax": _arg_extremum,
         "argmin": _arg_extremum, "correlate": _correlate}
