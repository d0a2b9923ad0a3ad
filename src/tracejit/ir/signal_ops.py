"""``correlate``: NumPy's 1-D cross-correlation as one IR op (kind ``CONTRACTION``).

``np.correlate`` and ``np.convolve`` trace to it (``np.convolve(a, v)`` is the correlation
of the longer operand with the shorter one reversed, as NumPy computes it). Its NumPy
implementation is ``np.correlate`` itself: the reference and CPU backends run NumPy's own
direct loop (one dot product per output), which is NumPy's bits and, measured against a
gather of the (n, k) windows and one matrix-vector product through BLAS (im2col), faster at
every size tried, from 300 x 7 (2.6 us against 14 to 24 us) to 10^6 x 16 (6.8 ms against
11 to 150 ms) and 20000 x 20000 full (equal): no size switch. Before this op a correlation
was that im2col gather, O(n k) memory.

The op takes both operands in one dtype (the tracer promotes them first) and keeps NumPy's
swap: where ``len(a) < len(v)`` NumPy correlates ``v`` with ``a`` and reverses the result,
with the padding of ``mode`` counted in the shorter length.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from .registry import Exactness, Kind, register
from .types import TensorType

MODES = ("valid", "same", "full")


def padding(mode: str, n: int) -> tuple[int, int]:
    """The zeros NumPy puts before and after the longer operand for ``mode``, where ``n``
    is the shorter operand's length."""
    return {"valid": (0, 0), "same": (n // 2, n - n // 2 - 1), "full": (n - 1, n - 1)}[mode]


def _rule(a: TensorType, v: TensorType, *, mode: str) -> TensorType:
    if a.ndim != 1 or v.ndim != 1:
        raise ShapeError("object too deep for desired array" if max(a.ndim, v.ndim) > 1
                         else "object of too small depth for desired array")
    if a.dtype != v.dtype:
        raise DTypeError(f"correlate: operands of dtypes {a.dtype} and {v.dtype} (the tracer "
                         "converts them to one)")
    n1, n2 = a.shape[0], v.shape[0]
    if n1 == 0 or n2 == 0:
        raise ShapeError(f"{'a' if n1 == 0 else 'v'} cannot be empty")
    if mode not in MODES:
        raise ShapeError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    long, short = max(n1, n2), min(n1, n2)
    left, right = padding(mode, short)
    return TensorType((long + left + right - short + 1,), a.dtype)


register("correlate", Kind.CONTRACTION, _rule,
         lambda a, v, *, mode: np.correlate(a, v, mode=mode),
         "numpy.correlate(a, v, mode) of 1-d operands of one dtype (NumPy's direct loop; "
         "np.convolve traces to it with the shorter operand reversed)",
         exactness=Exactness.ORDER)
