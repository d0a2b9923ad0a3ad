"""Loops on the CPU backend: a vanilla RNN's forward pass and gradient, and per-step overhead.

    python bench/bench_loops.py            # print the tables
    python bench/bench_loops.py --write    # also write bench/results/loops-<date>-cpu.md

RNN: ``h = tanh(h @ W + x_t)`` over 200 steps, batch 32, hidden 128, float32; the loss is
the mean squared hidden state over all steps. tracejit runs ``tracejit.lax.scan`` under
``jit`` (forward) and ``jit(value_and_grad)`` (gradient with respect to ``W``); the peers
are JAX (``jax.lax.scan``, ``jax.jit(jax.value_and_grad)``) and a NumPy loop with
hand-written backpropagation through time, in the same process. The Pascanu slides' RNN
with taps runs through ``tracejit.scan`` against a NumPy loop (forward) and alone
(``value_and_grad``: no peer has Theano's taps). Overhead: a 10,000-step
scalar recurrence ``x = a*x + b`` and the same on 300 elements, where the time per step is
almost all loop overhead; tracejit's fused driver (the whole loop one compiled function)
against its Python driver (the body's compiled runner called once per step), the
reference backend (the body interpreted with NumPy per step), JAX and plain Python.
Times are the best of several rounds after a warm-up call, the peers interleaved in
each round (``interleaved``).
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
from bench_cpu import jax, machine_line, table

import tracejit as tj
from tracejit import lax
from tracejit.backends.cpu import fused

HERE = os.path.dirname(os.path.abspath(__file__))
T, B, H = 200, 32, 128
TAPS_T, TAPS_H = 1000, 64  # the slides' RNN with taps: steps + 4, hidden size


def rnn_inputs():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    h0 = np.zeros((B, H), np.float32)
    xs = rng.standard_normal((T, B, H)).astype(np.float32)
    return w, h0, xs


def rnn_loss(w, h0, xs):
    def step(h, x):
        h = np.tanh(h @ w + x)
        return h, h

    _, hs = lax.scan(step, h0, xs)
    return (hs * hs).mean()


def one_step(u_tm4, u_t, x_tm3, x_tm1, y_tm1, W, W_in_1, W_in_2, W_feedback, W_out):
    """The Pascanu slides' RNN step (Theano's scan with taps), with ``np`` for ``T``."""
    x_t = np.tanh(np.dot(x_tm1, W) + np.dot(u_t, W_in_1) + np.dot(u_tm4, W_in_2)
                  + np.dot(y_tm1, W_feedback))
    return [x_t, np.dot(x_tm3, W_out)]


def taps_inputs():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((TAPS_T, 8)).astype(np.float32)
    x0, y0 = np.zeros((3, TAPS_H), np.float32), np.zeros(4, np.float32)
    # W's spectral radius below 1: a chaotic recurrence would amplify float32 rounding
    ws = [(rng.standard_normal(s) * scale).astype(np.float32) for s, scale in (
        ((TAPS_H, TAPS_H), 0.5 / np.sqrt(TAPS_H)), ((8, TAPS_H), 0.3), ((8, TAPS_H), 0.3),
        ((4, TAPS_H), 0.1), ((TAPS_H, 4), 0.1))]
    return (u, x0, y0, *ws)


def taps_loss(u, x0, y0, *weights):
    (x_vals, y_vals), _ = tj.scan(one_step, sequences=dict(input=u, taps=[-4, 0]),
                                  outputs_info=[dict(initial=x0, taps=[-3, -1]), y0],
                                  non_sequences=list(weights), strict=True)
    return (y_vals * y_vals).mean()


def numpy_taps_loss(u, x0, y0, *weights):
    """The same recurrence as a NumPy loop over a window of the last three x."""
    xs, y, total = list(x0), y0, np.float32(0)
    for t in range(4, len(u)):
        x_t, y = one_step(u[t - 4], u[t], xs[-3], xs[-1], y, *weights)
        xs.append(x_t)
        total += (y * y).sum()
    return total / ((len(u) - 4) * len(y0))


def numpy_forward(w, h0, xs):
    h, total = h0, np.float32(0)
    for t in range(len(xs)):
        h = np.tanh(h @ w + xs[t])
        total += (h * h).sum()
    return total / np.float32(xs.size)


def numpy_value_and_grad(w, h0, xs):
    """Backpropagation through time by hand: store every h, walk back."""
    hs = np.empty((len(xs) + 1, *h0.shape), h0.dtype)
    hs[0] = h0
    for t in range(len(xs)):
        hs[t + 1] = np.tanh(hs[t] @ w + xs[t])
    scale = np.float32(2 / xs.size)
    loss = (hs[1:] * hs[1:]).sum() / np.float32(xs.size)
    dw, dh = np.zeros_like(w), np.zeros_like(h0)
    for t in range(len(xs) - 1, -1, -1):
        dh = dh + scale * hs[t + 1]  # d loss / d h_t, from the loss and from step t + 1
        da = dh * (1 - hs[t + 1] * hs[t + 1])
        dw += hs[t].T @ da
        dh = da @ w.T
    return loss, dw


def jax_rnn():
    jnp = jax.numpy

    def loss(w, h0, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h

        _, hs = jax.lax.scan(step, h0, xs)
        return (hs * hs).mean()

    fwd, vg = jax.jit(loss), jax.jit(jax.value_and_grad(loss))
    return (lambda *a: jax.block_until_ready(fwd(*a)),
            lambda *a: jax.block_until_ready(vg(*a)))


def without_fusing(fn, *args):
    """``fn`` jitted with its loops run by the Python driver (the fused one turned off
    while it compiles): the baseline the fused driver is measured against."""
    jf = tj.jit(fn)
    build = fused.build
    fused.build = lambda loop: None
    try:
        jf(*args)  # compiles, binding the Python driver
    finally:
        fused.build = build
    return jf


def recurrence(x0, a, b):
    return lax.scan(lambda x, _: (a * x + b, None), x0, None, length=10_000)[0]


def jax_recurrence():
    def f(x0, a, b):
        return jax.lax.scan(lambda x, _: (a * x + b, None), x0, None, length=10_000)[0]

    jf = jax.jit(f)
    return lambda *a: jax.block_until_ready(jf(*a))


def python_recurrence(x0, a, b):
    x = x0
    for _ in range(10_000):
        x = a * x + b
    return x


_FIRST = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import numpy as np
    import tracejit as tj
    from tracejit import lax
    {functions}
    w, h0, xs = rnn_inputs()
    tj.jit(tj.value_and_grad(rnn_loss))(w, h0, xs)
    print(time.perf_counter() - t0)
""")


def first_calls() -> tuple[float, float]:
    """The gradient's first call in a fresh process, imports included: cold (empty disk
    cache), then warm (its kernels and loop drivers on disk)."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRACEJIT_CACHE_DIR": cache}
        functions = "\n".join([f"T, B, H = {T}, {B}, {H}"] +
                              [inspect.getsource(f) for f in (rnn_inputs, rnn_loss)])
        code = _FIRST.format(functions=functions)
        return tuple(float(subprocess.run([sys.executable, "-c", code], env=env, text=True,
                                          capture_output=True, check=True).stdout)
                     for _ in range(2))


def check_rnn(w, h0, xs, vg) -> str:
    loss, dw = vg(w, h0, xs)
    want_loss, want_dw = numpy_value_and_grad(w.astype(np.float64), h0.astype(np.float64),
                                              xs.astype(np.float64))
    err = np.abs(dw - want_dw).max() / np.abs(want_dw).max()
    return f"loss {float(loss):.6f} (float64 NumPy: {want_loss:.6f}), max |dW| error {err:.1e}"


def per_step_table(title: str, results: dict) -> str:
    """Like ``bench_cpu.table``, per step: a call's time divided by its 10,000 steps."""
    base = results["tracejit"]
    lines = [f"### {title}", "", "| implementation | per step | its time / tracejit's |",
             "|---|---|---|"]
    for name, t in results.items():
        lines.append(f"| {name} | not installed | |" if t is None else
                     f"| {name} | {t / 10_000 * 1e9:,.1f} ns | {t / base:.1f}x |")
    return "\n".join(lines)


def interleaved(candidates: dict, args: tuple, rounds: int = 15) -> dict:
    """Seconds per call of each ``name: (fn, number)`` (None: not installed), the best of
    ``rounds`` rounds in which every candidate runs ``number`` calls in turn: on a shared
    machine the load comes in bursts of seconds, which then hit every peer alike rather
    than whichever happened to be measured during one (``bench_cpu.timeit`` runs one
    peer's repeats back to back). Each starts after a pause and each comes first in some
    round: OpenBLAS's and XLA's threads spin for a while after their work, and measured
    here the peer right after them ran up to twice as slow."""
    best = {}
    for name, entry in candidates.items():
        if entry is not None:
            entry[0](*args)  # warm-up (compiles)
            best[name] = float("inf")
    names = [name for name in candidates if candidates[name] is not None]
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:  # each first in turn
            fn, number = candidates[name]
            time.sleep(0.05)  # the previous peer's idle threads (BLAS, XLA) stop spinning
            start = time.perf_counter()
            for _ in range(number):
                fn(*args)
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return {name: best.get(name) for name in candidates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write bench/results/loops-*.md")
    args = parser.parse_args()
    rnn = rnn_inputs()
    vg = tj.jit(tj.value_and_grad(rnn_loss))
    jfwd, jvg = jax_rnn() if jax else (None, None)
    forward = interleaved({
        "tracejit": (tj.jit(rnn_loss), 10),
        "tracejit, Python driver": (without_fusing(rnn_loss, *rnn), 10),
        "reference backend (NumPy body per step)": (tj.jit(rnn_loss, backend="reference"), 2),
        "JAX lax.scan": (jfwd, 10) if jax else None,
        "NumPy loop": (numpy_forward, 10)}, rnn)
    grad = interleaved({
        "tracejit": (vg, 5),
        "tracejit, Python driver": (without_fusing(tj.value_and_grad(rnn_loss), *rnn), 5),
        "JAX value_and_grad(lax.scan)": (jvg, 5) if jax else None,
        "NumPy loop, hand-written backprop": (numpy_value_and_grad, 5)}, rnn)
    taps = taps_inputs()
    taps_forward = interleaved({
        "tracejit": (tj.jit(taps_loss), 5),
        "reference backend (NumPy body per step)": (tj.jit(taps_loss, backend="reference"), 1),
        "NumPy loop": (numpy_taps_loss, 5)}, taps)
    taps_grad = interleaved({
        "tracejit": (tj.jit(tj.value_and_grad(taps_loss, argnums=(3, 4, 5, 6, 7))), 3)},
        taps)
    cold, warm = first_calls()
    overhead = {}
    for label, a in (("scalar", (np.float64(1.0), np.float64(0.5), np.float64(0.25))),
                     ("300 elements", (np.ones(300), np.full(300, 0.5), np.full(300, 0.25)))):
        overhead[label] = interleaved({
            "tracejit": (tj.jit(recurrence), 20),
            "tracejit, Python driver": (without_fusing(recurrence, *a), 2),
            "reference backend": (tj.jit(recurrence, backend="reference"), 1),
            "JAX lax.scan": (jax_recurrence(), 20) if jax else None,
            "plain Python loop": (python_recurrence, 2)}, a, rounds=5)
    text = [f"# Loops on the CPU backend ({datetime.date.today()})", "", machine_line(), "",
            table(f"RNN forward, h = tanh(h @ W + x_t), {T} steps, batch {B}, hidden {H}, "
                  "float32", forward),
            "", table("RNN value_and_grad (d loss / d W) of the mean squared hidden state",
                      grad, check_rnn(*rnn, vg)),
            "", table(f"The slides' RNN with taps (tracejit.scan: sequence taps [-4, 0], "
                      f"output taps [-3, -1]), {TAPS_T - 4} steps, hidden {TAPS_H}, float32; "
                      "JAX has no taps (they would be a hand-written carry window)",
                      taps_forward, f"loss {float(tj.jit(taps_loss)(*taps)):.7f} (float64 "
                      f"NumPy loop: {numpy_taps_loss(*[x.astype(np.float64) for x in taps]):.7f})"),
            "", table("The slides' RNN: value_and_grad with respect to its five weights",
                      taps_grad),
            "", f"First call of the gradient in a fresh process (imports, trace, passes, "
            f"compile or load, run): {cold:.2f} s cold, {warm:.2f} s with the disk cache warm."]
    for label, res in overhead.items():
        text += ["", per_step_table(f"10,000-step recurrence x = a*x + b, {label}", res)]
    out = "\n".join(text) + "\n"
    print(out)
    if args.write:
        path = os.path.join(HERE, "results", f"loops-{datetime.date.today()}-cpu.md")
        with open(path, "w") as f:
            f.write(out)


if __name__ == "__main__":
    main()
