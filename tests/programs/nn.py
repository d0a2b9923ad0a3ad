"""Small neural networks and learning steps, as written before there were frameworks."""

import numpy as np

from .case import Case


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def logsumexp(x):
    m = np.max(x, axis=1)
    return m + np.log(np.sum(np.exp(x - m[:, np.newaxis]), axis=1))


def mlp_loss(W1, b1, W2, b2, x, labels):
    """Mean cross-entropy of a one-hidden-layer tanh network."""
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(x.shape[0]), labels])


def relu_network(x, W1, W2):
    h = x @ W1
    h[h < 0] = 0
    return h @ W2


def conv1d(signal, kernel):
    """A 'valid' cross-correlation, as deep-learning layers define convolution."""
    return np.convolve(signal, kernel[::-1], mode="valid")


def conv1d_channels(x, w):
    """x: (channels, length), w: (out_channels, channels, width)."""
    out_ch, in_ch, width = w.shape
    out = np.zeros((out_ch, x.shape[1] - width + 1))
    for o in range(out_ch):
        for c in range(in_ch):
            out[o] += np.convolve(x[c], w[o, c, ::-1], mode="valid")
    return out


def conv2d_single(image, kernel):
    kh, kw = kernel.shape
    H, W = image.shape
    out = np.zeros((H - kh + 1, W - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += kernel[i, j] * image[i:i + H - kh + 1, j:j + W - kw + 1]
    return out


def rnn_forward(xs, h0, Wx, Wh, b):
    h = h0
    hs = []
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        hs.append(h)
    return np.stack(hs)


def attention(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ V


def layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def kmeans_step(X, centroids):
    """One Lloyd iteration: assign each point to its nearest centroid, then average."""
    k = centroids.shape[0]
    d2 = ((X[:, np.newaxis, :] - centroids[np.newaxis, :, :]) ** 2).sum(axis=2)
    labels = np.argmin(d2, axis=1)
    sums = np.zeros_like(centroids)
    np.add.at(sums, labels, X)
    counts = np.bincount(labels, minlength=k)
    return sums / counts[:, np.newaxis], labels


def logistic_step(w, X, y, lr):
    p = 1.0 / (1.0 + np.exp(-X @ w))
    grad = X.T @ (p - y) / y.shape[0]
    return w - lr * grad


def batchnorm_train(x, gamma, beta, running_mean, running_var, momentum=0.9):
    """Normalises a batch and updates the caller's running statistics in place."""
    mu = x.mean(axis=0)
    var = x.var(axis=0)
    running_mean *= momentum
    running_mean += (1 - momentum) * mu
    running_var *= momentum
    running_var += (1 - momentum) * var
    return gamma * (x - mu) / np.sqrt(var + 1e-5) + beta


def dropout(x, p, seed):
    rng = np.random.default_rng(seed)
    mask = rng.random(x.shape) >= p
    return x * mask / (1 - p)


def max_pool_2x2(x):
    h, w = x.shape
    return x.reshape(h // 2, 2, w // 2, 2).max(axis=(1, 3))


def _rng(seed):
    return np.random.default_rng(seed)


def _mlp_args():
    rng = _rng(60)
    return (rng.normal(0, 0.5, (8, 16)), np.zeros(16), rng.normal(0, 0.5, (16, 4)), np.zeros(4),
            rng.normal(size=(32, 8)), rng.integers(0, 4, 32))


def _rnn_args():
    rng = _rng(61)
    return (rng.normal(size=(10, 8)), np.zeros(16), rng.normal(0, 0.3, (8, 16)),
            rng.normal(0, 0.3, (16, 16)), np.zeros(16))


def _attention_args():
    rng = _rng(62)
    return tuple(rng.normal(size=(16, 16)).astype(np.float32) for _ in range(3))


def _kmeans_args():
    rng = _rng(63)
    X = np.concatenate([rng.normal(c, 0.5, (40, 2)) for c in (-2.0, 0.0, 2.0)])
    return X, X[[0, 45, 90]] + 0.1


def _batchnorm_args():
    rng = _rng(64)
    return rng.normal(2, 3, (32, 16)), np.ones(16), np.zeros(16), np.zeros(16), np.ones(16)


PROGRAMS = [
    Case("softmax", softmax, lambda: (_rng(65).normal(size=(24, 24)),), grad=0),
    Case("logsumexp", logsumexp, lambda: (_rng(66).normal(size=(24, 24)),), grad=0),
    Case("mlp_loss", mlp_loss, _mlp_args, grad=0),
    Case("relu_network", relu_network, lambda: (_rng(67).normal(size=(16, 16)),
                                                _rng(68).normal(size=(16, 16)),
                                                _rng(69).normal(size=(16, 4))), grad=1),
    Case("conv1d", conv1d, lambda: (_rng(70).random(300), _rng(71).random(7)), grad=1),
    Case("conv1d_channels", conv1d_channels, lambda: (_rng(72).random((3, 64)),
                                                      _rng(73).random((4, 3, 5))), grad=1),
    Case("conv2d_single", conv2d_single, lambda: (_rng(74).random((24, 24)),
                                                  _rng(75).random((3, 3))), grad=1),
    Case("rnn_forward", rnn_forward, _rnn_args, grad=3),
    Case("attention_float32", attention, _attention_args),
    Case("layer_norm", layer_norm, lambda: (_rng(76).normal(size=(24, 24)), np.ones(24),
                                            np.zeros(24)), grad=0),
    Case("kmeans_step", kmeans_step, _kmeans_args),
    Case("logistic_step", logistic_step, lambda: (np.zeros(5), _rng(77).normal(size=(80, 5)),
                                                  (_rng(78).random(80) > 0.5) * 1.0, 0.5),
         grad=0),
    Case("batchnorm_train", batchnorm_train, _batchnorm_args),
    Case("dropout", dropout, lambda: (_rng(79).random((20, 20)), 0.25, 3)),
    Case("max_pool_2x2", max_pool_2x2, lambda: (_rng(80).random((24, 24)),), grad=0),
]
