"""One gradient step of the Theano tutorial's two-moons network, CPU, same process.

    python bench/bench_grad.py            # print the table
    python bench/bench_grad.py --write    # also replace the gradient section of RESULTS.md

tracejit runs ``examples/two_moons.py``'s ``train_step`` (``jit`` of a step that calls
``tracejit.grad``); the peers are the tutorial's hand-written NumPy backpropagation and
JAX ``jit`` of the same step with ``jax.grad``. float32, 5000 x 2 -> 1000 tanh -> 2. A second
table times the gradient of a spectral loss (``np.fft.rfft``) against JAX's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap

import numpy as np
from bench_cpu import jax, machine_line, table, timeit, write_section

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import jax_two_moons  # noqa: E402
import two_moons as tm  # noqa: E402


def jax_step():
    step, _ = jax_two_moons.jax_step(jax)
    return lambda p, X, Y: jax.block_until_ready(step(p, X, Y))


_COMPILE = textwrap.dedent("""
    import sys, time, numpy as np
    sys.path.insert(0, {examples!r})
    import two_moons as tm
    from tracejit.datasets import make_moons
    X, y = make_moons(5000, 0.2, np.random.default_rng(0))
    Y = np.eye(2, dtype=np.float32)[y]
    p = tm.init_params()
    t0 = time.perf_counter(); tm.train_step(p, X, Y); print(time.perf_counter() - t0)
""")


def spectral_loss(xp):
    """A spectral loss, as signal-processing code writes it: the log power spectrum of
    windowed rows (``xp``: NumPy, or ``jax.numpy`` for the peer)."""
    def loss(x):
        w = xp.hanning(x.shape[1]).astype(x.dtype)
        spectrum = xp.abs(xp.fft.rfft(x * w, axis=1)) ** 2
        return xp.log1p(spectrum).mean()

    return loss


def spectral_results() -> dict:
    """Its gradient, 256 rows of 1024 float32: tracejit's jit(grad) and JAX's, checked
    against each other first."""
    import tracejit as tj

    x = np.random.default_rng(1).normal(size=(256, 1024)).astype(np.float32)
    ours = tj.jit(tj.grad(spectral_loss(np)))
    res = {"tracejit": timeit(ours, x, number=20)}
    if jax:
        theirs = jax.jit(jax.grad(spectral_loss(jax.numpy)))
        np.testing.assert_allclose(ours(x), np.asarray(theirs(x)), rtol=2e-3, atol=1e-7)
        res["JAX jit(grad)"] = timeit(lambda v: theirs(v).block_until_ready(), x, number=20)
    return res


def compile_times() -> tuple[float, float]:
    """First-step time in a fresh process: cold (empty disk cache), then warm."""
    import tempfile

    code = _COMPILE.format(examples=os.path.join(HERE, "..", "examples"))
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRACEJIT_CACHE_DIR": cache}
        cold, warm = (float(subprocess.run([sys.executable, "-c", code], env=env, text=True,
                                           capture_output=True, check=True).stdout)
                      for _ in range(2))
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    from tracejit.datasets import make_moons

    X, y = make_moons(5000, 0.20, np.random.default_rng(0))
    Y = np.eye(2, dtype=np.float32)[y]
    p = tm.init_params()
    res = {"tracejit": timeit(tm.train_step, p, X, Y, number=20),
           "NumPy (hand-written backprop)": timeit(tm.numpy_train_step, p, X, Y, number=20),
           "JAX jit(grad)": timeit(jax_step(), p, X, Y, number=20) if jax else None}
    cold, warm = compile_times()
    note = (f"First step in a fresh process (trace + passes + compile + run): {cold:.2f} s "
            f"cold, {warm:.2f} s with the kernels in the disk cache.")
    text = "\n\n".join([machine_line(), table(
        "Gradient step, two-moons network (5000 x 2 -> 1000 tanh -> 2), float32", res, note),
        table("Gradient of a log power spectrum (np.fft.rfft of 256 windowed rows of 1024), "
              "float32", spectral_results(), "Complex values between real input and output "
              "(ad/complex_rules.py); both FFTs are pocketfft's.")])
    print(text)
    if args.write:
        write_section("bench-grad", "Gradient step (CPU)", text)


if __name__ == "__main__":
    main()
