"""Neural-network helpers in plain NumPy.

They call only NumPy, so they work on ndarrays without ``jit`` and trace like user code
inside it. Each is written in its numerically stable form (max subtraction, ``logaddexp``,
``exp(-|x|)``), so no input overflows or warns where the true result is finite.

Losses follow Theano's ``T.nnet`` conventions: predictions first, targets second, and
per-example (``categorical_crossentropy``) or elementwise (``binary_crossentropy``) values,
which the caller averages. ``mse`` is Keras's: the mean over the last axis.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np

from .ad import stop_gradient

if TYPE_CHECKING:  # annotations only: numpy.typing is not imported at run time
    from numpy.typing import ArrayLike, DTypeLike

__all__ = ["binary_crossentropy", "categorical_crossentropy", "log_softmax", "logsumexp", "mse",
           "one_hot", "relu", "sigmoid", "softmax", "softplus"]


def _array(x):
    """ndarrays and traced arrays as they are; lists and Python scalars as arrays."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)


def _shift(x, axis):
    """``max(x)`` along ``axis`` (keepdims), with non-finite maxima taken as 0 (as SciPy
    does), so rows of -inf give -inf rather than NaN and an inf stays visible."""
    m = np.max(x, axis=axis, keepdims=True)
    # no gradient through the shift: the results do not depend on it (as in JAX)
    return stop_gradient(np.where(np.isfinite(m), m, 0))


def _shifted(x, axis):
    return x - _shift(x, axis)


def softmax(x: ArrayLike, axis: int | tuple[int, ...] | None = -1) -> np.ndarray:
    """``exp(x) / sum(exp(x))`` along ``axis``, computed from ``x - max(x)``.

    The shift keeps ``exp`` from overflowing (rows of -inf give NaN, as SciPy's); no
    gradient flows through it, since the result does not depend on it.

    Args:
        x: An array (or a list or scalar, taken as one); traced inside ``jit``.
        axis: The axis (or axes, or None for all) the distribution is over.

    Returns:
        The softmax, of ``x``'s shape; each slice along ``axis`` sums to 1.

    Example:
        >>> tj.nn.softmax(np.array([1.0, 2.0, 3.0]))
        array([0.09003057, 0.24472847, 0.66524096])
        >>> tj.nn.softmax(np.array([1000.0, 1000.0]))  # no overflow
        array([0.5, 0.5])
    """
    e = np.exp(_shifted(_array(x), axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x: ArrayLike, axis: int | tuple[int, ...] | None = -1) -> np.ndarray:
    """``log(softmax(x))`` as ``x - max - log(sum(exp(x - max)))``.

    Finite where the softmax underflows to 0, so a loss taking its log stays finite.

    Args:
        x: An array (or a list or scalar, taken as one); traced inside ``jit``.
        axis: The axis (or axes, or None for all) the distribution is over.

    Returns:
        The log-probabilities, of ``x``'s shape.

    Example:
        >>> tj.nn.log_softmax(np.array([1.0, 2.0, 3.0]))
        array([-2.40760596, -1.40760596, -0.40760596])
        >>> tj.nn.log_softmax(np.array([0.0, -1000.0]))  # log(softmax) would give -inf
        array([    0., -1000.])
    """
    d = _shifted(_array(x), axis)
    with np.errstate(divide="ignore", invalid="ignore"):  # rows of -inf: NaN, as SciPy's
        return d - np.log(np.sum(np.exp(d), axis=axis, keepdims=True))


def logsumexp(x: ArrayLike, axis: int | tuple[int, ...] | None = None,
              keepdims: bool = False) -> np.ndarray | np.floating:
    """``log(sum(exp(x)))`` with max subtraction, as ``scipy.special.logsumexp``.

    ``x`` near 1000 gives about 1000 + log(n), not inf; an empty reduction gives -inf.

    Args:
        x: An array (or a list or scalar, taken as one); traced inside ``jit``.
        axis: The axis (or axes) to reduce; None reduces all.
        keepdims: Keep the reduced axes with size 1, as NumPy's reductions do.

    Returns:
        The reduction: a NumPy scalar when all axes are reduced, else an array.

    Example:
        >>> tj.nn.logsumexp(np.array([1000.0, 1000.0]))
        np.float64(1000.6931471805599)
    """
    x = _array(x)
    if np.size(x) == 0:
        return np.full_like(np.sum(np.exp(x), axis=axis, keepdims=keepdims), -np.inf)
    m = _shift(x, axis)
    s = np.sum(np.exp(x - m), axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore"):  # rows of -inf: -inf, as SciPy's
        return np.log(s) + (m if keepdims else np.reshape(m, np.shape(s)))


def relu(x: ArrayLike) -> np.ndarray:
    """``max(x, 0)``, elementwise; NaN stays NaN.

    Args:
        x: An array (or a list or scalar, taken as one); traced inside ``jit``.

    Returns:
        The rectified array, of ``x``'s shape and dtype.

    Example:
        >>> tj.nn.relu(np.array([-1.0, 0.5, np.nan]))
        array([0. , 0.5, nan])
    """
    return np.maximum(_array(x), 0)


def sigmoid(x: ArrayLike) -> np.ndarray:
    """``1 / (1 + exp(-x))``, elementwise, from ``exp(-|x|)``, which never overflows.

    Written with ``where`` rather than ``abs`` so that its gradient at 0 is 1/4.

    Args:
        x: An array (or a list or scalar, taken as one); traced inside ``jit``.

    Returns:
        The logistic function of ``x``, in [0, 1].

    Example:
        >>> tj.nn.sigmoid(np.array([-800.0, 0.0, 800.0]))
        array([0. , 0.5, 1. ])
    """
    x = _array(x)
    nonneg = x >= 0
    z = np.exp(np.where(nonneg, -x, x))
    return np.where(nonneg, 1 / (1 + z), z / (1 + z))


def softplus(x: ArrayLike) -> np.ndarray:
    """``log(1 + exp(x))``, elementwise, as ``logaddexp(0, x)``: exact for large |x|.

    Args:
        x: An array (or a list or scalar, taken as one); traced inside ``jit``.

    Returns:
        The softplus of ``x``, of its shape.

    Example:
        >>> tj.nn.softplus(np.array([-1000.0, 0.0, 1000.0]))
        array([0.00000000e+00, 6.93147181e-01, 1.00000000e+03])
    """
    return np.logaddexp(0, _array(x))


def one_hot(labels: ArrayLike, num_classes: int, dtype: DTypeLike = np.float64) -> np.ndarray:
    """``labels[..., None] == arange(num_classes)`` as ``dtype``.

    A comparison, so labels may be traced. A label outside ``[0, num_classes)`` gives a
    row of zeros (as ``jax.nn.one_hot``).

    Args:
        labels: Integer class labels, any shape.
        num_classes: The number of classes: the length of the new last axis.
        dtype: The result's dtype.

    Returns:
        An array of shape ``labels.shape + (num_classes,)``.

    Raises:
        TypeError: ``num_classes`` is not an integer.

    Example:
        >>> tj.nn.one_hot(np.array([0, 2, 5]), 3)
        array([[1., 0., 0.],
               [0., 0., 1.],
               [0., 0., 0.]])
    """
    num_classes = operator.index(num_classes)
    return (_array(labels)[..., None] == np.arange(num_classes)).astype(dtype)


def categorical_crossentropy(predictions: ArrayLike, targets: ArrayLike, *,
                             from_logits: bool = False) -> np.ndarray:
    """Per-example ``-sum(targets * log(predictions), axis=-1)``.

    As Theano's ``T.nnet.categorical_crossentropy(coding_dist, true_dist)``: predictions
    first, targets second, one loss per example, which the caller averages.
    ``0 * log(0)`` counts as 0, as in ``scipy.special.xlogy``. Under ``jit``, ``log`` of
    a softmax is rewritten to the stable log-softmax (``passes/stabilize.py``).

    Args:
        predictions: Probabilities over the last axis (or logits, with
            ``from_logits``).
        targets: Distributions (one-hot) over the last axis, or integer class labels
            with one dimension less (negative labels wrap, as NumPy indexing does).
        from_logits: The predictions are logits and go through :func:`log_softmax`.

    Returns:
        The loss per example: ``predictions``' shape without its last axis.

    Raises:
        IndexError: A class label out of range (``IndexOutOfBounds`` under ``jit``).

    Example:
        >>> p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
        >>> tj.nn.categorical_crossentropy(p, np.array([0, 1]))
        array([0.35667494, 0.22314355])
        >>> tj.nn.categorical_crossentropy(p, tj.nn.one_hot(np.array([0, 1]), 3))
        array([0.35667494, 0.22314355])
    """
    p, t = _array(predictions), _array(targets)
    with np.errstate(divide="ignore"):  # log(0) = -inf is a loss, not an error
        logp = log_softmax(p) if from_logits else np.log(p)
    if t.dtype.kind in "iu" and t.ndim == p.ndim - 1:
        return -np.take_along_axis(logp, t[..., None], axis=-1)[..., 0]
    return -np.sum(t * np.where(t == 0, 0, logp), axis=-1)


def binary_crossentropy(predictions: ArrayLike, targets: ArrayLike, *,
                        from_logits: bool = False) -> np.ndarray:
    """Elementwise ``-(t * log(p) + (1 - t) * log(1 - p))``, with ``0 * log(0) = 0``.

    As Theano's ``T.nnet.binary_crossentropy(output, target)``: one loss per element,
    which the caller averages. With ``from_logits`` it is computed as
    ``max(z, 0) - t * z + log1p(exp(-|z|))`` (TensorFlow's form), accurate for finite
    logits of any size, also where the loss is tiny.

    Args:
        predictions: Probabilities in [0, 1] (or logits, with ``from_logits``).
        targets: Targets in [0, 1], broadcastable with ``predictions``.
        from_logits: The predictions are logits, not probabilities.

    Returns:
        The elementwise loss.

    Example:
        >>> tj.nn.binary_crossentropy(np.array([0.9, 0.2]), np.array([1.0, 0.0]))
        array([0.10536052, 0.22314355])
        >>> z = np.array([50.0, -50.0])
        >>> tj.nn.binary_crossentropy(z, np.array([1.0, 0.0]), from_logits=True)
        array([1.92874985e-22, 1.92874985e-22])
    """
    p, t = _array(predictions), _array(targets)
    if from_logits:
        return np.maximum(p, 0) - t * p + np.log1p(np.exp(-np.abs(p)))
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(p), np.log(1 - p)
    return -(t * np.where(t == 0, 0, log_p) + (1 - t) * np.where(t == 1, 0, log_q))


def mse(predictions: ArrayLike, targets: ArrayLike) -> np.ndarray:
    """Mean squared error over the last axis, per example (as Keras's ``mse``).

    Args:
        predictions: The predicted values.
        targets: The targets, broadcastable with ``predictions``.

    Returns:
        ``mean((predictions - targets) ** 2, axis=-1)``.

    Example:
        >>> tj.nn.mse(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 0.0], [3.0, 5.0]]))
        array([2. , 0.5])
    """
    return np.mean(np.square(_array(predictions) - _array(targets)), axis=-1)
