"""``fft``: NumPy's one-dimensional discrete Fourier transforms as one IR op.

``np.fft.fft``, ``ifft``, ``rfft`` and ``irfft`` along one axis are this op, told apart by
its ``transform`` attribute; every other ``np.fft`` function is a composition of them at
trace level (``trace/fft.py``), as NumPy composes its own: ``fftn`` transforms one axis
after another, ``hfft`` is ``irfft`` of the conjugate. The op's NumPy implementation is
``np.fft``'s function itself (pocketfft), so the reference and CPU backends give NumPy's
bits; CUDA calls ``cupy.fft`` (cuFFT, which sums in its own order).

The result's length along ``axis`` is ``n`` for ``fft``, ``ifft`` and ``irfft`` and
``n // 2 + 1`` for ``rfft``; the input is cut or zero-padded to ``n`` (``irfft``: to
``n // 2 + 1``) first, as NumPy does. Dtypes are NumPy's: single precision (float16,
float32, complex64) stays single, long double stays long, everything else computes in
double; ``rfft`` refuses complex input as NumPy's ufunc does.
"""

from __future__ import annotations

import numpy as np

from ..errors import AxisError, DTypeError, ShapeError
from .registry import Exactness, Kind, register
from .types import TensorType

TRANSFORMS = ("fft", "ifft", "rfft", "irfft")
NORMS = ("backward", "ortho", "forward")
# The normalisation that scales the opposite direction as ``norm`` scales this one
# (NumPy's ``_swap_direction``: hfft/ihfft, and the transforms' transposes).
SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_SINGLE = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.complex64)})
_EXTENDED = frozenset({np.dtype(np.longdouble), np.dtype(np.clongdouble)})


def check_norm(norm) -> str:
    """NumPy's ``norm`` (None is "backward"), or NumPy's ValueError."""
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise ShapeError(f'Invalid norm value {norm}; should be "backward","ortho" or '
                         '"forward".')
    return norm


def check_points(n: int) -> None:
    if n < 1:
        raise ShapeError(f"Invalid number of FFT data points ({n}) specified.")


def result_dtype(transform: str, dtype: np.dtype) -> np.dtype:
    """The dtype ``np.fft.<transform>`` returns for input of ``dtype``."""
    if transform == "rfft" and dtype.kind == "c":
        raise DTypeError("ufunc 'rfft_n_even' not supported for the input types, and the "
                         "inputs could not be safely coerced to any supported types "
                         "according to the casting rule ''safe''", hint="take np.fft.fft "
                         "of complex input, or rfft of its real part")
    if dtype.kind not in "biufc":
        raise DTypeError(f"np.fft.{transform} of {dtype} is not supported")
    if dtype in _SINGLE:
        real = np.dtype(np.float32)
    elif dtype in _EXTENDED:
        real = np.dtype(np.longdouble)
    else:
        real = np.dtype(np.float64)
    if transform == "irfft":  # NumPy keeps a real float16 input's precision here
        return dtype if dtype == np.float16 else real
    return np.result_type(real, 1j)


def _rule(x: TensorType, *, transform: str, n: int, axis: int, norm: str) -> TensorType:
    if transform not in TRANSFORMS:
        raise ShapeError(f"fft transform must be one of {TRANSFORMS} (got {transform!r})")
    if not 0 <= axis < x.ndim:
        raise AxisError(f"axis {axis} is out of bounds for array of dimension {x.ndim}")
    check_points(n)
    check_norm(norm)
    shape = list(x.shape)
    shape[axis] = n // 2 + 1 if transform == "rfft" else n
    return TensorType(tuple(shape), result_dtype(transform, x.dtype))


def _impl(x, *, transform: str, n: int, axis: int, norm: str):
    return getattr(np.fft, transform)(x, n=n, axis=axis, norm=norm)


register("fft", Kind.SPECTRAL, _rule, _impl,
         "numpy.fft.fft / ifft / rfft / irfft(x, n, axis, norm) along one axis (pocketfft; "
         "the other np.fft functions compose it)", exactness=Exactness.ORDER)
