"""The Theano GPU tutorial's network, ported to plain NumPy + ``tracejit.grad`` + ``jit``.

Two-moons data (5000 points, 2 inputs), a hidden layer of 1000 tanh units, 2 softmax
outputs, categorical cross-entropy plus L2 regularisation (lambda 0.01, scaled by 1/N as
in the tutorial), batch gradient descent with learning rate 0.01, float32. The tutorial:
http://www.wildml.com/2015/09/speeding-up-your-neural-network-with-theano-and-the-gpu/

    python examples/two_moons.py [--steps 20000] [--dtype float32] [--backend cpu]

``loss`` and ``train_step`` are the whole model; ``numpy_train_step`` is the tutorial's
hand-written backpropagation of the same network, which the tests compare against.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tracejit as tj
from tracejit import nn
from tracejit.datasets import make_moons

N_IN, N_HIDDEN, N_OUT = 2, 1000, 2
EPSILON, REG_LAMBDA = 0.01, 0.01


def init_params(dtype=np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "W1": (rng.standard_normal((N_IN, N_HIDDEN)) / np.sqrt(N_IN)).astype(dtype),
        "b1": np.zeros(N_HIDDEN, dtype),
        "W2": (rng.standard_normal((N_HIDDEN, N_OUT)) / np.sqrt(N_HIDDEN)).astype(dtype),
        "b2": np.zeros(N_OUT, dtype),
    }


def forward(params, X):
    """Class probabilities, as the tutorial's ``forward_prop``."""
    a1 = np.tanh(X @ params["W1"] + params["b1"])
    return nn.softmax(a1 @ params["W2"] + params["b2"])


def loss(params, X, Y):
    """Mean categorical cross-entropy against one-hot ``Y``, plus the L2 term."""
    W1, W2 = params["W1"], params["W2"]
    reg = REG_LAMBDA / 2 / X.shape[0] * (np.sum(W1 * W1) + np.sum(W2 * W2))
    return nn.categorical_crossentropy(forward(params, X), Y).mean() + reg


@tj.jit
def train_step(params, X, Y):
    """One step of batch gradient descent (the tutorial's ``gradient_step``)."""
    grads = tj.grad(loss)(params, X, Y)
    return {k: params[k] - EPSILON * grads[k] for k in params}


predict = tj.jit(lambda params, X: forward(params, X).argmax(axis=1))
calculate_loss = tj.jit(loss)


def numpy_train_step(params, X, Y):
    """The same step by hand-written backpropagation (the tutorial's manual gradients)."""
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    n = X.shape[0]
    a1 = np.tanh(X @ W1 + b1)
    z2 = a1 @ W2 + b2
    e = np.exp(z2 - z2.max(axis=1, keepdims=True))
    y_hat = e / e.sum(axis=1, keepdims=True)
    delta3 = (y_hat - Y) / n
    delta2 = (delta3 @ W2.T) * (1 - a1 * a1)
    grads = {
        "W2": a1.T @ delta3 + REG_LAMBDA / n * W2,
        "b2": delta3.sum(axis=0),
        "W1": X.T @ delta2 + REG_LAMBDA / n * W1,
        "b1": delta2.sum(axis=0),
    }
    return {k: params[k] - EPSILON * grads[k] for k in params}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--backend", default=None, choices=tj.available_backends())
    args = parser.parse_args()

    step = tj.jit(train_step.__wrapped__, backend=args.backend) if args.backend else train_step
    X, y = make_moons(5000, 0.20, np.random.default_rng(0))
    X = X.astype(args.dtype)
    Y = np.eye(N_OUT, dtype=args.dtype)[y]
    params = init_params(args.dtype)
    t0 = time.perf_counter()
    for i in range(args.steps):
        params = step(params, X, Y)
        if i == 0:
            compile_s = time.perf_counter() - t0
            t0 = time.perf_counter()
        if i % 1000 == 0:
            print(f"Loss after iteration {i}: {calculate_loss(params, X, Y):.6f}")
    per_step = (time.perf_counter() - t0) / max(args.steps - 1, 1)
    accuracy = (predict(params, X) == y).mean()
    print(f"final accuracy: {accuracy:.4f}")
    print(f"first step (trace + compile + run): {compile_s:.2f} s; "
          f"then {per_step * 1e3:.2f} ms per step")


if __name__ == "__main__":
    main()
