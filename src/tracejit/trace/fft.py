"""``numpy.fft`` while tracing: every transform is the ``fft`` op (``ir/fft_ops.py``) along
one axis at a time, composed as NumPy's ``_pocketfft`` composes it, so each function gives
NumPy's bits on the reference and CPU backends.

``fftn``/``ifftn``/``fft2``/``ifft2`` transform the last listed axis first, ``rfftn`` and
``irfftn`` take the real axis (the last listed) first and last respectively, ``hfft`` is
``irfft`` of the conjugate and ``ihfft`` the conjugate of ``rfft``, both with the opposite
normalisation. ``fftshift``/``ifftshift`` are ``np.roll``; ``fftfreq`` and ``rfftfreq``
need no tracing (NumPy builds them from ``n`` and ``d``, and a traced ``d`` flows through
their arithmetic).
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from ..errors import AxisError, ShapeError
from ..ir.fft_ops import SWAPPED, TRANSFORMS, check_norm
from ..ir.ops import normalize_axis
from ..ir.registry import REGISTRY
from .core import bind
from .numpy_api import _writes_out, aval, implements, roll
from .ordering import as_array


def _transform(transform: str, a, n, axis, norm):
    """One ``fft`` op; ``n`` None is the input's length (``irfft``: ``2 * (m - 1)``)."""
    a = as_array(a)
    t = aval(a)
    if t.ndim == 0:  # (NumPy's IndexError)
        raise AxisError(f"axis {axis} is out of bounds for array of dimension 0",
                        hint="transform an array of at least one dimension")
    axis = normalize_axis(operator.index(axis), t.ndim)
    if n is None:
        n = 2 * (t.shape[axis] - 1) if transform == "irfft" else t.shape[axis]
    attrs = {"transform": transform, "n": operator.index(n), "axis": axis,
             "norm": check_norm(norm)}
    if transform == "irfft" and t.shape[axis] == 0:  # all zero padding: zeros (NumPy's
        out = REGISTRY["fft"].rule(t, **attrs)  # pocketfft reads uninitialised memory)
        return bind("full", shape=out.shape, dtype=out.dtype, value=0)
    return bind("fft", a, **attrs)


def _one_axis(transform: str):
    """``np.fft.<transform>(a, n, axis, norm, out)``: one ``fft`` op."""
    def one(a, n=None, axis=-1, norm=None, out=None):
        return _transform(transform, a, n, axis, norm)

    one.__name__ = one.__qualname__ = transform
    one.__doc__ = f"NumPy's ``np.fft.{transform}``: one ``fft`` op."
    return implements(getattr(np.fft, transform))(_writes_out("same_kind")(one))


for _name in TRANSFORMS:
    _one_axis(_name)


def _swapped(norm) -> str:
    return SWAPPED[check_norm(norm)] if norm is not None else "forward"


@implements(np.fft.hfft)
@_writes_out("same_kind")
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's: ``irfft`` of the conjugate with the opposite normalisation."""
    return _transform("irfft", np.conjugate(as_array(a)), n, axis, _swapped(norm))


@implements(np.fft.ihfft)
@_writes_out("same_kind")
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's: the conjugate of ``rfft`` with the opposite normalisation."""
    return np.conjugate(_transform("rfft", a, n, axis, _swapped(norm)))


def _cook(a, s, axes, invreal: bool = False) -> tuple[list[int], list[int]]:
    """NumPy's ``_cook_nd_args``: the lengths and axes of an n-d transform, with its errors
    and deprecation warnings."""
    shape = aval(a).shape
    shapeless = s is None
    if shapeless:
        s = list(shape) if axes is None else [shape[operator.index(ax)] for ax in axes]
    s = list(s)
    if axes is None:
        if not shapeless:
            warnings.warn("`axes` should not be `None` if `s` is not `None` (Deprecated in "
                          "NumPy 2.0).", DeprecationWarning, stacklevel=4)
        axes = list(range(-len(s), 0))
    axes = [operator.index(ax) for ax in axes]
    if len(s) != len(axes):
        raise ShapeError("Shape and axes have different lengths.")
    if invreal and shapeless:
        s[-1] = (shape[axes[-1]] - 1) * 2
    if None in s:
        warnings.warn("Passing an array containing `None` values to `s` is deprecated in "
                      "NumPy 2.0.", DeprecationWarning, stacklevel=4)
    s = [shape[ax] if n == -1 else n for n, ax in zip(s, axes, strict=True)]
    return s, axes


def _nd(transform: str, a, s, axes, norm):
    """``fftn``/``ifftn``: the 1-d transform along each axis, the last listed first."""
    a = as_array(a)
    s, axes = _cook(a, s, axes)
    for n, ax in reversed(list(zip(s, axes, strict=True))):
        a = _transform(transform, a, n, ax, norm)
    return a


@implements(np.fft.fftn)
@_writes_out("same_kind")
def fftn(a, s=None, axes=None, norm=None, out=None):
    return _nd("fft", a, s, axes, norm)


@implements(np.fft.ifftn)
@_writes_out("same_kind")
def ifftn(a, s=None, axes=None, norm=None, out=None):
    return _nd("ifft", a, s, axes, norm)


@implements(np.fft.fft2)
@_writes_out("same_kind")
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd("fft", a, s, axes, norm)


@implements(np.fft.ifft2)
@_writes_out("same_kind")
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd("ifft", a, s, axes, norm)


@implements(np.fft.rfftn)
@_writes_out("same_kind")
def rfftn(a, s=None, axes=None, norm=None, out=None):
    """NumPy's: ``rfft`` along the last listed axis, then ``fft`` along the others."""
    a = as_array(a)
    s, axes = _cook(a, s, axes)
    a = _transform("rfft", a, s[-1], axes[-1], norm)
    for n, ax in reversed(list(zip(s[:-1], axes[:-1], strict=True))):
        a = _transform("fft", a, n, ax, norm)
    return a


@implements(np.fft.irfftn)
@_writes_out("same_kind")
def irfftn(a, s=None, axes=None, norm=None, out=None):
    """NumPy's: ``ifft`` along every listed axis but the last, in order, then ``irfft``."""
    a = as_array(a)
    s, axes = _cook(a, s, axes, invreal=True)
    for n, ax in zip(s[:-1], axes[:-1], strict=True):
        a = _transform("ifft", a, n, ax, norm)
    return _transform("irfft", a, s[-1], axes[-1], norm)


@implements(np.fft.rfft2)
@_writes_out("same_kind")
def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return rfftn(a, s, axes, norm)


@implements(np.fft.irfft2)
@_writes_out("same_kind")
def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return irfftn(a, s, axes, norm)


def _shift(x, axes, sign: int):
    x = as_array(x)
    shape = aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    shift = [sign * (shape[normalize_axis(operator.index(ax), len(shape))] // 2)
             for ax in axes]
    return roll(x, shift, tuple(axes))


@implements(np.fft.fftshift)
def fftshift(x, axes=None):
    """NumPy's: each axis rolled by half its length."""
    return _shift(x, axes, 1)


@implements(np.fft.ifftshift)
def ifftshift(x, axes=None):
    """NumPy's: each axis rolled back by half its length."""
    return _shift(x, axes, -1)
