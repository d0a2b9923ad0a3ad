"""The two-moons network's training step in JAX, the peer of ``examples/two_moons.py``
in bench_grad.py (CPU) and bench_cuda.py (GPU). Importing it configures nothing in JAX."""

from __future__ import annotations

import functools

import two_moons as tm


def jax_step(jax, precision=None):
    """``(step, grad)``, both jitted: one gradient-descent step of the tutorial's loss and
    its gradient, with the matmuls at ``precision`` (JAX's default when None)."""
    jnp = jax.numpy
    dot = functools.partial(jnp.matmul, precision=precision)

    def loss(p, X, Y):
        a1 = jnp.tanh(dot(X, p["W1"]) + p["b1"])
        y_hat = jax.nn.softmax(dot(a1, p["W2"]) + p["b2"], axis=1)
        reg = tm.REG_LAMBDA / 2 / X.shape[0] * (jnp.sum(p["W1"] ** 2) + jnp.sum(p["W2"] ** 2))
        return -jnp.mean(jnp.sum(Y * jnp.log(y_hat), axis=1)) + reg

    @jax.jit
    def step(p, X, Y):
        g = jax.grad(loss)(p, X, Y)
        return {k: p[k] - tm.EPSILON * g[k] for k in p}

    return step, jax.jit(jax.grad(loss))
