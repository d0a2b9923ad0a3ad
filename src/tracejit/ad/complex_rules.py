"""Gradients through complex values: the rules of the ops that make and take them apart
(``real``, ``imag``, ``complex``, ``fft``) and the ops whose real rules hold for them too.

A gradient's inputs and output are real; complex values live in between (a spectrum, a
phase). Their cotangents follow JAX's convention: the cotangent of ``z = x + iy`` is
``dL/dx - i dL/dy``. Under it a holomorphic op keeps its real rule (``g * f'(z)``) and a
linear op its transpose (no conjugate), so those rules need no change; ``absolute``
conjugates its sign, ``conjugate`` conjugates ``g``, ``real`` passes ``g`` on, ``imag``
gives ``-i g``, and a real value's cotangent is the real part of what reaches it (the
walker's ``fit``). Ops outside ``COMPLEX_RULES`` refuse complex values rather than give a
gradient computed as if they were real.
"""

from __future__ import annotations

import numpy as np

from ..ir.fft_ops import SWAPPED
from ..trace.core import bind

# Ops whose rule is right for complex operands (holomorphic or linear, or written for
# them): the walker refuses a complex value at any other op.
COMPLEX_RULES = frozenset(
    "add subtract multiply true_divide negative positive square sqrt reciprocal exp exp2 "
    "expm1 log log2 log10 log1p sin cos tan sinh cosh tanh power float_power absolute "
    "conjugate where convert sum prod cumsum cumprod matmul reshape transpose broadcast_to "
    "slice concatenate pad gather scatter_add update_slice scatter constant full real imag "
    "complex fft".split()
)

def _to_length(g, length: int, axis: int):
    """``g`` cut or zero-padded to ``length`` along ``axis``: the transpose of the cut or
    padding a transform applies to its input."""
    n = g.shape[axis]
    if n > length:
        stops = tuple(length if d == axis else s for d, s in enumerate(g.shape))
        return bind("slice", g, starts=(0,) * g.ndim, stops=stops, steps=(1,) * g.ndim)
    if n < length:
        widths = tuple((0, length - n) if d == axis else (0, 0) for d in range(g.ndim))
        return bind("pad", g, widths=widths, value=0)
    return g


def _fft_rule(g, ans, x, *, transform, n, axis, norm):
    """``fft`` and ``ifft`` are symmetric matrices: each is its own transpose. ``rfft``'s
    transpose is the real part of ``fft`` of the half spectrum padded with zeros, which is
    ``irfft`` at the same scale of its conjugate with the bins that stand for two (all but
    the zero and Nyquist ones) halved; ``irfft``'s is ``rfft`` of ``g`` at the same scale,
    conjugated, with those bins doubled."""
    m = x.shape[axis]
    if transform in ("fft", "ifft"):
        gx = bind("fft", g, transform=transform, n=n, axis=axis, norm=norm)
    elif transform == "rfft":  # irfft adds each bin that stands for two twice: halve them
        half = bind("multiply", bind("conjugate", g), _bins(n, axis, g, 0.5))
        gx = bind("fft", half, transform="irfft", n=n, axis=axis, norm=SWAPPED[norm])
    else:
        half = bind("fft", g, transform="rfft", n=n, axis=axis, norm=SWAPPED[norm])
        gx = bind("multiply", bind("conjugate", half), _bins(n, axis, g, 2.0))
    return (_to_length(gx, m, axis),)


def _bins(n: int, axis: int, like, factor: float) -> np.ndarray:
    """``factor`` at the bins of an n-point half spectrum that stand for two, 1 at the
    others (the zero bin and, for even n, the Nyquist bin), shaped to broadcast along
    ``axis`` of ``like``, in the real dtype of ``like``'s precision."""
    weight = np.full(n // 2 + 1, factor, dtype=np.finfo(like.dtype).dtype)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    return weight.reshape([-1 if d == axis else 1 for d in range(like.ndim)])


COMPLEX_VJP = {
    "real": lambda g, ans, z: (g,),  # the walker makes it complex: g + 0i
    "imag": lambda g, ans, z: (bind("multiply", g, -1j),),
    "fft": _fft_rule,
    # z = re + i im: dL/dre = Re(g), dL/dim = -Im(g)
    "complex": lambda g, ans, re, im: (bind("real", g), bind("negative", bind("imag", g))),
}
