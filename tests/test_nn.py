"""tracejit.nn: plain-NumPy helpers checked against SciPy on ndarrays (dtypes kept, extreme
inputs finite and quiet where SciPy's results are finite) and under jit on every backend."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import tracejit as tj
from tracejit import nn

LOUD = {"over": "raise", "invalid": "raise", "divide": "raise"}  # underflow is fine
DTYPES = [np.float32, np.float64]
RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14}


def extreme(dtype) -> np.ndarray:
    """Rows with huge logits, a -inf entry, and ordinary values."""
    return np.array([[1000, -1000, 0, 3], [-np.inf, 2, -1000, 1000], [0.5, -1.5, 2, 0.25]],
                    dtype)


def check(actual, expected, dtype, rtol=None):
    assert np.asarray(actual).dtype == dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol or RTOL[np.dtype(dtype)], atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [-1, 0, (0, 1)])
def test_softmax_family_matches_scipy(dtype, axis):
    x = extreme(dtype)
    with np.errstate(**LOUD):
        sm, lsm = nn.softmax(x, axis), nn.log_softmax(x, axis)
        lse = nn.logsumexp(x, axis)
        lse_keep = nn.logsumexp(x, axis, keepdims=True)
    check(sm, special.softmax(x, axis=axis), dtype)
    check(lsm, special.log_softmax(x, axis=axis), dtype)
    check(lse, special.logsumexp(x, axis=axis), dtype)
    check(lse_keep, special.logsumexp(x, axis=axis, keepdims=True), dtype)
    np.testing.assert_allclose(np.sum(sm, axis=axis), 1, rtol=RTOL[np.dtype(dtype)] * 4)


def test_softmax_family_special_rows():
    x = np.array([[-np.inf, -np.inf], [np.nan, 1.0], [np.inf, 1.0]])
    np.testing.assert_array_equal(nn.logsumexp(x, axis=1), special.logsumexp(x, axis=1))
    with np.errstate(invalid="ignore"):
        want = special.log_softmax(x, axis=1)
    np.testing.assert_array_equal(nn.log_softmax(x), want)
    assert nn.logsumexp(np.zeros((2, 0)), axis=1).tolist() == [-np.inf, -np.inf]
    assert nn.logsumexp(np.float32([1, 2])).dtype == np.float32
    np.testing.assert_allclose(nn.logsumexp([1000.0, 1000.0]), 1000 + np.log(2), rtol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_helpers_match_scipy(dtype):
    x = np.array([-np.inf, -1000, -40, -1, -0.0, 0, 1e-8, 1, 40, 1000, np.inf, np.nan], dtype)
    with np.errstate(**LOUD):
        sig, rel = nn.sigmoid(x), nn.relu(x)
        soft = nn.softplus(x[:-1])
    with np.errstate(invalid="ignore"):  # NumPy's logaddexp flags a NaN operand
        soft = np.append(soft, nn.softplus(x[-1:]))
    check(sig, special.expit(x), dtype)
    check(soft, -special.log_expit(-x), dtype)
    assert rel.dtype == dtype
    np.testing.assert_array_equal(rel, np.maximum(x, 0))
    assert np.isnan(rel[-1]) and np.isnan(sig[-1]) and np.isnan(soft[-1])


def test_one_hot():
    labels = np.array([[0, 2], [1, 3]])  # 3 is out of range: a row of zeros
    got = nn.one_hot(labels, 3, dtype=np.float32)
    assert got.shape == (2, 2, 3) and got.dtype == np.float32
    np.testing.assert_array_equal(got.reshape(4, 3), [[1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0]])
    assert nn.one_hot([1], 2).dtype == np.float64
    with pytest.raises(TypeError):
        nn.one_hot(labels, 2.5)


def crossentropy_reference(p, t):
    return -np.sum(special.xlogy(t, p), axis=-1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_categorical_crossentropy(dtype):
    logits = extreme(dtype)[:, 1:]  # the -inf is a logit, finite rows otherwise
    p = nn.softmax(logits)
    assert (p == 0).any()  # underflowed probabilities: 0 * log(0) must count as 0
    labels = np.array([2, 0, 1])
    onehot = nn.one_hot(labels, 3, dtype)
    with np.errstate(**LOUD):
        by_onehot = nn.categorical_crossentropy(p, onehot)
        by_label = nn.categorical_crossentropy(p, labels)
        by_logits = nn.categorical_crossentropy(logits, labels, from_logits=True)
    want = crossentropy_reference(p, onehot)
    check(by_onehot, want, dtype)
    check(by_label, want, dtype)
    check(by_logits, -special.log_softmax(logits, axis=1)[np.arange(3), labels], dtype)
    assert np.isinf(by_label[1]) and np.isfinite(by_logits).all()  # p = 0 for the target
    soft = np.array([[0.2, 0.5, 0.3]] * 3, dtype)  # targets that are not one-hot
    check(nn.categorical_crossentropy(p, soft), crossentropy_reference(p, soft), dtype)
    with pytest.raises(IndexError):
        nn.categorical_crossentropy(p, np.array([0, 3, 1]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_crossentropy_and_mse(dtype):
    z = np.array([[-1000, -20, -1, 0], [0.5, 3, 30, 1000]], dtype)
    t = np.array([[0, 1, 0.25, 1], [1, 0, 1, 0]], dtype)
    p = nn.sigmoid(z)
    with np.errstate(**LOUD):
        by_p = nn.binary_crossentropy(p, t)
        by_z = nn.binary_crossentropy(z, t, from_logits=True)
    check(by_p, -(special.xlogy(t, p) + special.xlogy(1 - t, 1 - p)), dtype)
    z64, t64 = z.astype(np.float64), t.astype(np.float64)
    exact = -(t64 * special.log_expit(z64) + (1 - t64) * special.log_expit(-z64))
    check(by_z, exact, dtype, rtol=RTOL[np.dtype(dtype)] * 4)
    check(nn.mse(p, t), np.mean((p - t) ** 2, axis=-1), dtype)


def everything(x, labels):
    onehot = nn.one_hot(labels, x.shape[-1], x.dtype)
    p = nn.softmax(x)
    return (p, nn.log_softmax(x), nn.logsumexp(x, axis=1), nn.logsumexp(x),
            nn.sigmoid(x), nn.softplus(x), nn.relu(x), onehot,
            nn.categorical_crossentropy(p, onehot), nn.categorical_crossentropy(p, labels),
            nn.categorical_crossentropy(x, labels, from_logits=True),
            nn.binary_crossentropy(x[:, 1:], onehot[:, 1:], from_logits=True),  # finite z
            nn.mse(p, onehot))


def test_helpers_under_jit(backend):
    """One compiled program (few compiles) with every helper, on extreme float32 inputs:
    same dtypes as eager NumPy, values as SciPy's (computed in float64)."""
    x = extreme(np.float32)
    labels = np.array([2, 1, 0])
    with np.errstate(**LOUD):
        got = tj.jit(everything, backend=backend)(x, labels)
    with np.errstate(divide="ignore", invalid="ignore"):
        eager = everything(x, labels)
    x64 = x.astype(np.float64)
    onehot = np.eye(4)[labels]
    lsm = special.log_softmax(x64, axis=1)
    exact = (special.softmax(x64, axis=1), lsm, special.logsumexp(x64, axis=1),
             special.logsumexp(x64), special.expit(x64), -special.log_expit(-x64),
             np.maximum(x64, 0), onehot, -lsm[np.arange(3), labels], -lsm[np.arange(3), labels],
             -lsm[np.arange(3), labels],
             -(onehot * special.log_expit(x64) + (1 - onehot) * special.log_expit(-x64))[:, 1:],
             np.mean((special.softmax(x64, axis=1) - onehot) ** 2, axis=-1))
    assert len(got) == len(eager) == len(exact)
    for i, (g, e, want) in enumerate(zip(got, eager, exact, strict=True)):
        assert np.asarray(g).dtype == np.asarray(e).dtype == np.float32, i
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-30, err_msg=str(i))
    # eagerly, the loss of a probability that underflowed is inf; under jit log(softmax) is
    # rewritten to a log-softmax and stays finite
    assert np.isinf(eager[9]).any() and np.isfinite(got[9]).all()
