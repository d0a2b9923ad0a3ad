"""Which reshapes NumPy makes views: the strides of a view, relative to its root.

NumPy returns a view from ``reshape`` (and ``ravel``) when the new shape can be laid over
the old one's strides without copying (``_attempt_nocopy_reshape``), and a copy otherwise
(``a.T.reshape(-1)``): a write then reaches the original or not. The tracer follows the
same rule, with strides counted in elements from the root's C order.
"""

from __future__ import annotations

import math
from fractions import Fraction


def c_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


def f_strides(shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Fortran order's strides, in elements; None where they are C order's (0-d, 1-d)."""
    if len(shape) < 2:
        return None
    return tuple(c_strides(tuple(shape)[::-1])[::-1])


def ordered(order: str, shape: tuple[int, ...], like=None) -> tuple[int, ...] | None:
    """The strides NumPy gives a new array of ``shape`` made in ``order`` (``"C"``,
    ``"F"``; ``"A"`` and ``"K"`` follow ``like``, the (shape, strides) of the array it
    copies: ``"A"`` is Fortran order for a Fortran-contiguous one, ``"K"`` its own
    order), in elements; None for C order."""
    if order in ("F", "f"):
        return f_strides(shape)
    if order in ("C", "c", None) or like is None:
        return None
    if order in ("A", "a"):
        return f_strides(shape) if fortran_contiguous(*like) and not c_contiguous(*like) \
            else None
    return kept_order([like], shape)


def c_contiguous(shape: tuple[int, ...], strides) -> bool:
    """Whether ``strides`` (in elements) lay ``shape`` out in C order, as NumPy's flag
    says: axes of length 1 have any stride, and an empty array is contiguous."""
    if 0 in shape:
        return True
    return all(d == 1 or s == w for d, s, w in zip(shape, strides, c_strides(shape),
                                                     strict=True))


def fortran_contiguous(shape: tuple[int, ...], strides) -> bool:
    return c_contiguous(tuple(shape)[::-1], list(strides)[::-1])


def in_elements(strides: tuple[int, ...], itemsize: int) -> tuple:
    """An argument's strides (bytes) in elements: a Fraction where a stride is not a
    whole number of them (a view into a record), so that every rule here holds as is."""
    return tuple(s // itemsize if s % itemsize == 0 else Fraction(s, itemsize)
                 for s in strides)


def strides_of(root_shape: tuple[int, ...], root_strides: tuple[int, ...] | None,
               path) -> tuple[tuple[int, ...], list[int]]:
    """(shape, strides) of the view ``path`` derives from a root of ``root_shape`` and
    ``root_strides`` (in elements; None: C order)."""
    shape = tuple(root_shape)
    strides = c_strides(root_shape) if root_strides is None else list(root_strides)
    for op, attrs in path:
        if op == "slice":
            strides = [s * k for s, k in zip(strides, attrs["steps"], strict=True)]
            shape = tuple(_length(a, b, k) for a, b, k in
                          zip(attrs["starts"], attrs["stops"], attrs["steps"], strict=True))
        elif op in ("real", "imag"):  # a part of a complex value: half an element's size
            strides = [2 * s for s in strides]
        elif op == "gather":  # x[i] at a traced i: the axis goes, the others keep strides
            axis = attrs["axis"]
            shape, strides = shape[:axis] + shape[axis + 1:], strides[:axis] + strides[axis + 1:]
        elif op == "transpose":
            shape = tuple(shape[p] for p in attrs["perm"])
            strides = [strides[p] for p in attrs["perm"]]
        elif op == "broadcast_to":
            new = tuple(attrs["shape"])
            lead = len(new) - len(shape)
            strides = [0] * lead + [0 if d == 1 and n != 1 else s for d, n, s in
                                    zip(shape, new[lead:], strides, strict=True)]
            shape = new
        else:  # reshape: a view only where reshape_strides succeeded
            shape, strides = tuple(attrs["shape"]), reshape_strides(shape, strides,
                                                                    attrs["shape"])
    return shape, strides


def _length(start: int, stop: int, step: int) -> int:
    return max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))


def reshape_strides(shape, strides, new_shape) -> list[int] | None:
    """The strides of ``new_shape`` over an array of ``shape`` and ``strides`` without a
    copy, or None where NumPy would copy (its ``_attempt_nocopy_reshape``, C order)."""
    new_shape = tuple(new_shape)
    if math.prod(shape) == 0:
        return c_strides(new_shape)
    old = [(d, s) for d, s in zip(shape, strides, strict=True) if d != 1]
    dims, olds = [d for d, _ in old], [s for _, s in old]
    out = [0] * len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new_shape) and oi < len(dims):
        n, o = new_shape[ni], dims[oi]
        while n != o:
            if n < o:
                n *= new_shape[nj]
                nj += 1
            else:
                o *= dims[oj]
                oj += 1
        if any(olds[k] != dims[k + 1] * olds[k + 1] for k in range(oi, oj - 1)):
            return None
        out[nj - 1] = olds[oj - 1]
        for k in range(nj - 1, ni, -1):
            out[k - 1] = out[k] * new_shape[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = out[ni - 1] if ni else 1
    for k in range(ni, len(new_shape)):
        out[k] = last
    return out


def kept_order(operands: list[tuple[tuple[int, ...], list[int]]],
               shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides, in elements, of the array NumPy allocates for a result of ``shape``
    computed from ``operands`` (each its shape and strides) in ``order="K"``, as a ufunc
    does: contiguous in the order of the operands' strides, where they agree (NumPy's
    ``npyiter_find_best_axis_ordering``: an insertion sort of the axes, innermost first, in
    which an operand with a broadcast or size-1 axis has no say, and C order wins a
    conflict). None where that is C order, as it is for every C-ordered operand."""
    n = len(shape)
    if n < 2:
        return None
    aligned = [[0] * (n - len(s)) + [0 if d == 1 else x for d, x in zip(s, st, strict=True)]
               for s, st in operands]
    order = list(range(n))[::-1]  # the iterator's order: the innermost axis first
    for i0 in range(1, n):
        pos, a0 = i0, order[i0]
        for i1 in range(i0 - 1, -1, -1):
            a1, ambiguous, swap = order[i1], True, False
            for st in aligned:
                if st[a0] and st[a1]:
                    swap = abs(st[a1]) > abs(st[a0]) and (swap or ambiguous)
                    ambiguous = False
            if not ambiguous:
                if not swap:
                    break
                pos = i1
        order.insert(pos, order.pop(i0))
    if order == list(range(n))[::-1]:
        return None
    strides, step = [0] * n, 1
    for a in order:
        strides[a] = step
        step *= max(shape[a], 1)
    return tuple(strides)
