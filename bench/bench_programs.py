"""Whole NumPy programs under ``jit`` against plain NumPy: is tracejit ever slower?

    python bench/bench_programs.py            # print the table
    python bench/bench_programs.py --write    # also replace its section of RESULTS.md

Issue 13 asks that no program run slower under ``jit`` than in NumPy once compiled. These
are the shapes of program where it did: matrix-vector chains on a large argument (BLAS
``gemv`` territory), a long Python loop of scalar steps unrolled while tracing, and a chain
of sorts and cumulative sums (library calls on large arrays: ``np.sort`` was a stable
argsort and a gather, 2.4x NumPy's time), robust statistics (median, MAD and quantiles:
a stable sort where NumPy partitions, 0.1x NumPy's speed), a random walk's drawdowns
(``np.maximum.accumulate``, ``np.histogram``, ``np.isin``), moving averages and running
extremes from cumulative sums (scans, which kernels now fuse), power spectra (``np.fft``
and complex values, NumPy calls between kernels), plus two programs where fusion should
win. Each is the cached call, best of 7 repeats taken in turn with NumPy's,
checked against NumPy's result first. The ratio is NumPy's time over tracejit's: below
1.00x means tracejit is slower.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_cpu import machine_line, timeit, write_section

import tracejit as tj

RNG = np.random.default_rng(0)
A = RNG.random((4000, 5000))
X5000 = RNG.random(5000)
SQUARE = RNG.random((2000, 2000))
CHAIN = RNG.random(1 << 22, dtype=np.float32)


def matvec_chain(A, x):
    return (A @ x) @ A


def normal_matvec(A, x):
    return A.T @ (A @ x)


def scalar_loop(a):
    """Theano's scan example, as users write it in NumPy: 2000 scalar steps."""
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return trace


def gaussian_rows(x):
    x = x.reshape(-1, 1024)
    return np.exp(-(x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)


def sorts_and_sums(x):
    y = np.sort(np.cumsum(x) * 2.0)
    w = np.cumsum(np.sqrt(np.abs(y)))
    return np.cumsum(np.sort(w - 1.0)).sum()


def robust_scale(x):
    """Outliers clipped at the 5% and 95% quantiles, scaled by the median absolute deviation."""
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    lo, hi = np.quantile(x, [0.05, 0.95])
    return (np.clip(x, lo, hi) - med) / (1.4826 * mad)


def drawdowns(x):
    """A random walk's drawdowns from its running peak, binned, plus the share of steps at
    a new peak: a running maximum, a histogram and a membership test."""
    walk = np.cumsum(x)
    drawdown = np.maximum.accumulate(walk) - walk
    counts, _ = np.histogram(drawdown, bins=50)
    return counts / counts.sum() + np.isin(drawdown, [0.0]).mean()


def moving_stats(x):
    """NumPy's moving-average idiom (differences of a cumulative sum), the running extremes
    of the series and how far the average strays from its running maximum."""
    c = np.cumsum(np.concatenate(([0.0], x)))
    avg = (c[50:] - c[:-50]) / 50
    return np.maximum.accumulate(avg) - avg, np.minimum.accumulate(x).min(), avg.max()


def power_spectra(x):
    """Welch's method, as NumPy code writes it: windowed rows, their rfft, the mean power
    in decibels."""
    w = np.hanning(x.shape[1])
    spectrum = np.abs(np.fft.rfft(x * w, axis=1)) ** 2
    return 10 * np.log10(spectrum.mean(axis=0) / np.sum(w**2) + 1e-12)


def residual(A, x):
    r = A @ x - 1.0
    return np.sqrt(np.sum(r * r))


PROGRAMS = [
    ("(A @ x) @ A, A 4000x5000 float64", matvec_chain, (A, X5000)),
    ("A.T @ (A @ x), A 4000x5000 float64", normal_matvec, (A, X5000)),
    ("norm(A @ x - 1), A 4000x5000 float64", residual, (A, X5000)),
    ("2000-step scalar loop, tanh of a 2000x2000 diagonal", scalar_loop, (SQUARE,)),
    ("row-wise Gaussian sum, 4M float32", gaussian_rows, (CHAIN,)),
    ("power spectra of 1024 windowed rows (rfft), 1024x1024 float64", power_spectra,
     (RNG.random((1024, 1024)),)),
    ("sorts and cumulative sums, 4M float64", sorts_and_sums, (CHAIN.astype(np.float64),)),
    ("median, MAD and quantile clipping, 4M float64", robust_scale,
     (CHAIN.astype(np.float64),)),
    ("drawdowns: running maximum, histogram, isin, 4M float64", drawdowns,
     (CHAIN.astype(np.float64) - 0.5,)),
    ("moving average by cumulative sums, running extremes, 4M float64", moving_stats,
     (CHAIN.astype(np.float64) - 0.5,)),
]


def paired(ours, theirs, args, number: int = 3, repeat: int = 7) -> tuple[float, float]:
    """``timeit``'s best of ``repeat`` for both, their runs taken in turn: a minute in which
    the host slows both (the BLAS rows run the same ``gemv`` either way, and measured
    0.93-1.02x one after the other) weighs on both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, fn in enumerate((ours, theirs)):
            best[i] = min(best[i], timeit(fn, *args, number=number, repeat=1))
    return best[0], best[1]


def run() -> str:
    lines = ["| program | tracejit | NumPy | NumPy / tracejit |", "|---|---|---|---|"]
    for name, fn, args in PROGRAMS:
        jitted = tj.jit(fn)
        got, want = jitted(*args), fn(*args)
        for g, w in zip(*((o if isinstance(o, tuple) else (o,)) for o in (got, want)),
                        strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4)
        ours, theirs = paired(jitted, fn, args)
        lines.append(f"| {name} | {ours * 1e3:.2f} ms | {theirs * 1e3:.2f} ms | "
                     f"{theirs / ours:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    text = machine_line() + " Cached calls, best of 7 repeats.\n\n" + run()
    print(text)
    if args.write:
        write_section("bench-programs", "Whole programs against NumPy (CPU)", text)


if __name__ == "__main__":
    main()
