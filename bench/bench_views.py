"""Views and layouts under ``jit`` against NumPy: what NumPy's memory model costs a call.

    python bench/bench_views.py

Cached calls (best of 7 repeats of 200 calls), NumPy's own code timed in the same run:
- a row updated through a run-time index, ``row = x[i]; row += v`` (a view of ``x``);
- the cached call of a small elementwise function with a C-ordered, a Fortran-ordered
  and a strided argument (another layout is keyed by its strides, on the general path);
- ``np.exp(x.T)`` returned (NumPy's result is Fortran-ordered: the call lays it out so).
Each result is checked against NumPy's first.
"""

from __future__ import annotations

import numpy as np
from bench_cpu import machine_line, timeit

import tracejit as tj


def bump_row(x, i, v):
    row = x[i]
    row += v
    return x


def scale(a):
    return a * 2.0 + 1.0


def exp_transposed(x):
    return np.exp(x.T)


def _case(name: str, fn, *args) -> str:
    jitted = tj.jit(fn)
    want, got = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args]), \
        jitted(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.flags.f_contiguous == want.flags.f_contiguous
    t_np = timeit(lambda: fn(*args), number=200)
    t_tj = timeit(lambda: jitted(*args), number=200)
    return f"| {name} | {t_np * 1e6:.2f} | {t_tj * 1e6:.2f} | {t_np / t_tj:.2f}x |"


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64))
    small = rng.standard_normal((8, 8))
    rows = [
        _case("row through a run-time index, 64x64", bump_row, x.copy(), 5, np.ones(64)),
        _case("a*2+1, 8x8 C-ordered", scale, small.copy()),
        _case("a*2+1, 8x8 Fortran-ordered", scale, np.asfortranarray(small)),
        _case("a*2+1, 8x8 strided (a[:, ::2] of 8x16)", scale,
              rng.standard_normal((8, 16))[:, ::2]),
        _case("np.exp(x.T) returned, 64x64", exp_transposed, x),
    ]
    print(machine_line())
    print()
    print("| call | NumPy (us) | tracejit (us) | speed vs NumPy |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
