"""Scans (cumsum, cumprod, cummax, cummin) inside CPU loop kernels, against NumPy bit for bit.

A scan along a kernel's last axis joins the elementwise work around it and the reductions
of its results (``fusion.LOOP_SCANS``); the kernel runs that axis in order, carrying each
scan's running value, as NumPy's accumulate does, so every result is NumPy's bits: signed
zeros, NaN and inf included. These cases pick the loop forms the emitter chooses between:
one thread along a 1-d scan, rows shared among threads, reductions held in locals over
trailing axes or accumulated in keepdims arrays over others, and the nodes that must not
join a scan kernel.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from draws import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tracejit as tj

RNG = np.random.default_rng(7)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


def check(fn, *args, inexact: tuple[int, ...] = (), nan_sign: tuple[int, ...] = ()) -> str:
    """``fn`` compiled for the CPU gives NumPy's dtypes, shapes and bits (the results
    numbered ``inexact``, float sums, within rounding; those numbered ``nan_sign``, float
    max/min reductions, with any NaN's sign: docs/differences.md); returns the source."""
    jitted = tj.jit(fn, backend="cpu")
    got, want = jitted(*args), fn(*args)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        if i in inexact:
            np.testing.assert_allclose(g, w, rtol=1e-5 if g.dtype == np.float32 else 1e-12)
        elif i in nan_sign and g.dtype.kind == "f":
            nan = np.isnan(w)
            np.testing.assert_array_equal(np.isnan(g), nan)
            np.testing.assert_array_equal(_bits(g[~nan]), _bits(w[~nan]))
        else:
            np.testing.assert_array_equal(_bits(g), _bits(w))
    return jitted.lower(*args).source


def kernels(src: str) -> list[set[str]]:
    """The ops of each of the source's loop kernels, in order."""
    return [set(ops.split(", ")) for ops in re.findall(r"# tracejit CPU kernel: (.*) over \[", src)]


def drawdowns(x):
    walk = np.cumsum(x)
    drawdown = np.maximum.accumulate(walk) - walk
    return drawdown, drawdown.min(), drawdown.max()


def test_a_walk_its_peak_and_its_drawdowns_are_one_serial_pass():
    x = RNG.standard_normal(200_000)  # above PARALLEL_MIN_SIZE: still one thread in order
    src = check(drawdowns, x)
    assert kernels(src) == [{"cumsum", "cummax", "subtract", "min", "max"}]
    assert "parallel(kernel" not in src


def test_rows_scanned_on_threads_with_row_reductions_in_locals():
    def f(x):
        c = np.cumsum(x, axis=1)
        p = np.cumprod(1 + x * 0.01, axis=-1)
        return c - x, p, np.minimum.accumulate(x, axis=1).max(axis=1), (x < c).any(axis=1)

    x = RNG.standard_normal((400, 384)).astype(np.float32)
    src = check(f, x)
    assert kernels(src) == [{"multiply", "add", "cumprod", "cumsum", "subtract", "cummin", "max",
                             "less", "any"}]
    assert "parallel(kernel" in src  # no reduction over the rows' axis: rows on threads


def test_a_float_sum_of_a_scan_adds_in_its_own_kernel():
    def f(x):  # a scan kernel adds in order: the sums keep the lanes of their own kernels
        c = np.cumsum(x, axis=-1)
        return c * 2, c.sum(axis=-1), c.sum()

    src = check(f, RNG.random((300, 500)).astype(np.float32), inexact=(1, 2))
    assert kernels(src)[0] == {"cumsum", "multiply"}


def test_reductions_across_rows_keep_the_scan_on_one_thread():
    def f(x):
        c = np.cumsum(x, axis=1)
        return c.max(axis=0), c.min(), np.maximum.accumulate(c, axis=1)

    x = RNG.standard_normal((400, 384))
    src = check(f, x)
    assert kernels(src) == [{"cumsum", "max", "min", "cummax"}]
    assert "parallel(kernel" not in src


def test_integer_scans_with_reductions_over_every_run_of_axes():
    def f(i):
        c = np.cumsum(i, axis=-1)  # int32 accumulates in int64, wrapping as NumPy's
        return (c, c.sum(axis=(1, 2)), c.sum(axis=2, keepdims=True), c.max(axis=(0, 2)),
                c.sum(), np.cumprod(i, axis=2), np.cumsum(i, axis=2, dtype=np.int8))

    i = RNG.integers(-(2**31), 2**31 - 1, size=(4, 5, 6), dtype=np.int32)
    src = check(f, i)
    assert len(kernels(src)) == 1 and "cumsum" in kernels(src)[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_signed_zeros_nan_and_inf_carry_as_in_numpy(dtype):
    special = np.array([-0.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -0.0, 0.0, -1.0], dtype)
    x = np.stack([special, special[::-1], -special, RNG.permutation(special)])

    def f(x):
        return (np.cumsum(x, 1), np.cumprod(x, -1), np.maximum.accumulate(x, 1),
                np.minimum.accumulate(x, 1), np.maximum.accumulate(x * -1.0, 1),
                np.cumsum(x[0]), np.minimum.accumulate(x[1]))

    src = check(f, x)
    assert any("cummax" in k and "cumprod" in k for k in kernels(src))


def test_bool_scans():
    def f(b):
        return (np.cumsum(b, 1), np.maximum.accumulate(b, 1), np.minimum.accumulate(b, 1),
                np.cumprod(b, 1))

    check(f, RNG.random((7, 33)) < 0.6)


def test_a_scan_along_another_axis_stays_numpy_s_accumulate():
    def f(x):
        return np.cumsum(x * 2, axis=0) + 1

    src = check(f, RNG.standard_normal((300, 7)))
    assert all("cumsum" not in k for k in kernels(src))


def test_a_scan_of_a_row_reduction_s_result_starts_a_new_kernel():
    def f(x):  # the max of each row is needed before its scan: two passes
        return (np.cumsum(np.exp(x - x.max(axis=-1, keepdims=True)), axis=-1),
                np.cumsum(x, axis=-1) / x.sum(axis=-1, keepdims=True))

    x = RNG.standard_normal((50, 64))
    src = check(f, x, inexact=(0, 1))  # (exp is within 4 ULP; a float sum within rounding)
    scans = [k for k in kernels(src) if "cumsum" in k]
    assert scans and all(not k & {"max", "sum"} for k in scans)



def test_transcendental_functions_keep_their_vector_loops_outside_a_scan():
    def f(x):
        c = np.cumsum(np.exp(x) * 2, axis=-1)
        return c, np.tanh(c * 1e-3) + 1

    x = RNG.standard_normal((64, 300))
    src = check(f, x, inexact=(0, 1))
    assert {"cumsum"} <= kernels(src)[1] and not {"exp", "tanh"} & kernels(src)[1]
    assert {"exp"} <= kernels(src)[0] and {"tanh"} <= kernels(src)[2]


# ------------------------------------------------------------------ drawn programs

SCANS = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate,
         "cummin": np.minimum.accumulate}
BEFORE = {"x * 2": lambda x: x * 2, "abs": np.abs, "x - 1": lambda x: x - 1,
          "where": lambda x: np.where(x > 0, x, x * 3)}
AFTER = {"s - y": lambda s, y: s - y, "s * y": lambda s, y: s * y,
         "max(s, 1)": lambda s, y: np.maximum(s, 1)}
# equal extents (square, cubic, one) where a scan along the wrong axis would go unseen,
# shapes above PARALLEL_MIN_SIZE (rows on threads; a 1-d scan must stay on one), and empty
# ones
SHAPES = [(1,), (7,), (3, 3), (4, 4, 4), (2, 3, 3), (3, 1, 5), (5, 1), (1, 6), (300, 512),
          (140_000,), (0,), (3, 0), (0, 4)]


@st.composite
def scan_programs(draw):
    shape = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int32, np.int64]))
    scan, before, after = (draw(st.sampled_from(sorted(t))) for t in (SCANS, BEFORE, AFTER))
    axes = draw(st.sampled_from([None, (len(shape) - 1,), tuple(range(len(shape))),
                                 (0,), tuple(range(1, len(shape))) or None]))
    # (max and min of no elements raise in NumPy: those of empty shapes are any or none)
    reduction = draw(st.sampled_from(["max", "min", "any", None] if 0 not in shape else
                                     ["any", None]))
    values = draw(hnp.arrays(dtype, shape, elements=(
        st.sampled_from([0.0, -0.0, 1.0, -1.5, 2.0, 0.5, np.inf, -np.inf, np.nan])
        if np.dtype(dtype).kind == "f" else st.integers(-3, 3))))
    return scan, before, after, axes, reduction, values


@given(scan_programs())
@settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
def test_drawn_scan_kernels_are_numpys_bits(program):
    """A scan between elementwise work and an exact reduction (or none, so that a large
    1-d scan could go to threads), along the last axis of a drawn shape: one kernel,
    NumPy's bits (signed zeros, NaN, inf and wrapping ints)."""
    scan, before, after, axes, reduction, x = program

    def f(x):
        y = BEFORE[before](x)
        s = SCANS[scan](y, axis=-1)
        z = AFTER[after](s, y)
        if reduction is None:
            return s, z
        r = z != 0 if reduction == "any" else z
        return s, z, getattr(np, reduction)(r, axis=axes)

    with np.errstate(all="ignore"):
        src = check(f, x, nan_sign=(2,))
    assert any(scan in k for k in kernels(src)), src
