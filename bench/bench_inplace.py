"""In-place writes under ``jit`` against NumPy: a 2-D Jacobi step on 500x500 float64.

    python bench/bench_inplace.py

The step ``A[1:-1, 1:-1] = 0.25 * (four shifted slices of A)`` as NumPy code writes it:
in place on the argument (the call stores the interior into the caller's array), and on
a copy it returns. On the CPU backend the in-place step is one loop kernel over the
interior reading the four slices inside ``A`` itself. Each number is the cached call, the
best of 7 repeats of 20 calls, checked against NumPy's result first.
"""

from __future__ import annotations

import numpy as np
from bench_cpu import machine_line, timeit

import tracejit as tj


def jacobi(a):
    a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])


def jacobi_copy(a):
    b = a.copy()
    b[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    return b


def main() -> None:
    a = np.random.default_rng(0).random((500, 500))
    print(machine_line())
    print("| program | NumPy | tracejit (cpu) | ratio |\n|---|---|---|---|")
    for name, fn in (("Jacobi step in place, 500x500 float64", jacobi),
                     ("Jacobi step on a copy, 500x500 float64", jacobi_copy)):
        jitted = tj.jit(fn, compile="sync")
        want, got = a.copy(), a.copy()
        w, g = fn(want), jitted(got)
        jitted.wait_compiled()
        np.testing.assert_allclose(got if g is None else g, want if w is None else w)
        x, y = a.copy(), a.copy()
        t_np, t_tj = timeit(fn, x, number=20), timeit(jitted, y, number=20)
        print(f"| {name} | {t_np * 1e6:.0f} us | {t_tj * 1e6:.0f} us | {t_np / t_tj:.2f}x |")


if __name__ == "__main__":
    main()
