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

import numpy as np

from .ad import stop_gradient

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


def softmax(x, axis: int | tuple[int, ...] | None = -1):
    """``exp(x) / sum(exp(x))`` along ``axis``, computed from ``x - max(x)``."""
    e = np.exp(_shifted(_array(x), axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis: int | tuple[int, ...] | None = -1):
    """``log(softmax(x))`` as ``x - max - log(sum(exp(x - max)))``: finite where the
    softmax underflows to 0."""
    d = _shifted(_array(x), axis)
    with np.errstate(divide="ignore", invalid="ignore"):  # rows of -inf: NaN, as SciPy's
        return d - np.log(np.sum(np.exp(d), axis=axis, keepdims=True))


def logsumexp(x, axis: int | tuple[int, ...] | None = None, keepdims: bool = False):
    """``log(sum(exp(x)))`` with max subtraction, as ``scipy.special.logsumexp``: x near 1000
    gives about 1000 + log(n), not inf; an empty reduction gives -inf."""
    x = _array(x)
    if np.size(x) == 0:
        return np.full_like(np.sum(np.exp(x), axis=axis, keepdims=keepdims), -np.inf)
    m = _shift(x, axis)
    s = np.sum(np.exp(x - m), axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore"):  # rows of -inf: -inf, as SciPy's
        return np.log(s) + (m if keepdims else np.reshape(m, np.shape(s)))


def relu(x):
    """``max(x, 0)``; NaN stays NaN."""
    return np.maximum(_array(x), 0)


def sigmoid(x):
    """``1 / (1 + exp(-x))`` from ``exp(-|x|)``, which never overflows (written with
    ``where`` rather than ``abs`` so that its gradient at 0 is 1/4)."""
    x = _array(x)
    nonneg = x >= 0
    z = np.exp(np.where(nonneg, -x, x))
    return np.where(nonneg, 1 / (1 + z), z / (1 + z))


def softplus(x):
    """``log(1 + exp(x))`` as ``logaddexp(0, x)``: exact for large |x|."""
    return np.logaddexp(0, _array(x))


def one_hot(labels, num_classes: int, dtype=np.float64):
    """``labels[..., None] == arange(num_classes)`` as ``dtype``: a comparison, so labels may
    be traced. A label outside ``[0, num_classes)`` gives a row of zeros (as ``jax.nn``)."""
    num_classes = operator.index(num_classes)
    return (_array(labels)[..., None] == np.arange(num_classes)).astype(dtype)


def categorical_crossentropy(predictions, targets, *, from_logits: bool = False):
    """Per-example ``-sum(targets * log(predictions), axis=-1)``, as Theano's
    ``T.nnet.categorical_crossentropy(coding_dist, true_dist)``.

    ``targets`` are distributions (one-hot) over the last axis, or integer class labels with
    one dimension less (out-of-range labels raise IndexError, negative ones wrap, as NumPy
    indexing does). ``0 * log(0)`` counts as 0, as in ``scipy.special.xlogy``. With
    ``from_logits`` the predictions are logits and go through ``log_softmax``. Under ``jit``,
    ``log`` of a softmax is rewritten to the stable log-softmax (``passes/stabilize.py``).
    """
    p, t = _array(predictions), _array(targets)
    with np.errstate(divide="ignore"):  # log(0) = -inf is a loss, not an error
        logp = log_softmax(p) if from_logits else np.log(p)
    if t.dtype.kind in "iu" and t.ndim == p.ndim - 1:
        return -np.take_along_axis(logp, t[..., None], axis=-1)[..., 0]
    return -np.sum(t * np.where(t == 0, 0, logp), axis=-1)


def binary_crossentropy(predictions, targets, *, from_logits: bool = False):
    """Elementwise ``-(t * log(p) + (1 - t) * log(1 - p))``, as Theano's
    ``T.nnet.binary_crossentropy(output, target)``, with ``0 * log(0) = 0``. With
    ``from_logits``: ``max(z, 0) - t * z + log1p(exp(-|z|))`` (TensorFlow's form), accurate
    for finite logits of any size, also where the loss is tiny."""
    p, t = _array(predictions), _array(targets)
    if from_logits:
        return np.maximum(p, 0) - t * p + np.log1p(np.exp(-np.abs(p)))
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(p), np.log(1 - p)
    return -(t * np.where(t == 0, 0, log_p) + (1 - t) * np.where(t == 1, 0, log_q))


def mse(predictions, targets):
    """Mean squared error over the last axis (per example, as Keras's ``mse``)."""
    return np.mean(np.square(_array(predictions) - _array(targets)), axis=-1)
