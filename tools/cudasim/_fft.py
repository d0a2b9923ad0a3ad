"""Emulated ``cupy.fft`` (cuFFT): ``fft``, ``ifft``, ``rfft`` and ``irfft`` as NumPy's
pocketfft on the host data, results as device arrays on the current device.

CuPy's semantics kept: the input must be a device array (CuPy raises TypeError for a NumPy
one); it is cast first by CuPy's rule, not NumPy's: float16 and float32 to complex64,
other real types to complex128 (``rfft``: float16 to float32, integers and bool to
float64; a complex input loses its imaginary part), so ``irfft`` of float16 returns
float32 where NumPy keeps float16. ``norm`` is None, "backward", "ortho" or "forward".
A transform along another axis than the last returns a view with that axis swapped back
(CuPy transforms the last axis of a swapped copy), so the result is not C-contiguous.
"""

from __future__ import annotations

import numpy as np

from ._array import _new, _operand

_SINGLE = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.complex64)}
_NORMS = (None, "backward", "ortho", "forward")


def _cast(x: np.ndarray, real: bool) -> np.ndarray:
    """``x`` as CuPy's ``_convert_dtype`` casts it (``real``: for an R2C transform)."""
    single = x.dtype in _SINGLE
    if real:
        return x.astype(np.float32 if single else np.float64, copy=False)
    return x.astype(np.complex64 if single else np.complex128, copy=False)


def _transform(name: str):
    def transform(a, n=None, axis=-1, norm=None):
        x = _operand(a, f"fft.{name}")
        if norm not in _NORMS:
            raise ValueError(f'Invalid norm value {norm}, should be "backward", "ortho", or '
                             '"forward".')
        moved = np.swapaxes(_cast(x, name == "rfft"), axis, -1)
        out = _new(getattr(np.fft, name)(moved, n=n, axis=-1, norm=norm))
        return out._view(np.swapaxes(out._a, axis, -1))
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"``cupy.fft.{name}(a, n, axis, norm)`` (NumPy's values, CuPy's dtypes)."
    return transform


FUNCTIONS = {name: _transform(name) for name in ("fft", "ifft", "rfft", "irfft")}
