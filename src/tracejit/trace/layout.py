"""Which reshapes NumPy makes views: the strides of a view, relative to its root.

NumPy returns a view from ``reshape`` (and ``ravel``) when the new shape can be laid over
the old one's strides without copying (``_attempt_nocopy_reshape``), and a copy otherwise
(``a.T.reshape(-1)``): a write then reaches the original or not. The tracer follows the
same rule, with strides counted in elements from the root's C order.
"""

from __future__ import annotations

import math


def c_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


def strides_of(root_shape: tuple[int, ...], path) -> tuple[tuple[int, ...], list[int]]:
    """(shape, strides) of the view ``path`` derives from a root of ``root_shape``."""
    shape, strides = tuple(root_shape), c_strides(root_shape)
    for op, attrs in path:
        if op == "slice":
            strides = [s * k for s, k in zip(strides, attrs["steps"], strict=True)]
            shape = tuple(_length(a, b, k) for a, b, k in
                          zip(attrs["starts"], attrs["stops"], attrs["steps"], strict=True))
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
