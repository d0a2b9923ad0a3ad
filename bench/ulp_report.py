"""Accuracy (ULP against NumPy) and speed of the CPU backend's vectorisable math.

    python bench/ulp_report.py [--n 1000000] [--write]

For every function and dtype in ``tracejit.backends.cpu.math.MATH`` it evaluates a
vectorised Numba loop on sampled inputs plus edge cases and compares with NumPy
(``scipy.special.erf`` for erf; sigmoid against 1/(1+exp(-x)) in long double, since
``scipy.special.expit`` flushes to zero where exp overflows). It then times the loop,
NumPy's ufunc and the naive Numba loop (``np.exp(x[i])``, which calls scalar libm) on
10^6 elements, using process CPU time so that other load on the machine counts less.
``--write`` saves the table to ``bench/results/ulp-<date>.md``. The tests in
``tests/test_cpu_math.py`` use the same sampler and ULP measure.
"""

import argparse
import datetime
import math
import platform
import sys
import time
import timeit
import zlib
from pathlib import Path

import numba
import numpy as np
import scipy.special

from tracejit.backends.cpu.math import MATH, TRIG_MAX

DTYPES = (np.float32, np.float64)
UNARY = [name for name in MATH if name != "power"]


def _sigmoid_ref(x):
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x.astype(np.longdouble)))).astype(x.dtype)


def reference(name, *args):
    """The value tracejit has to match: NumPy's (or SciPy's) result in the same dtype."""
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return _sigmoid_ref(*args)
        if name == "erf":
            return scipy.special.erf(*args)
        return getattr(np, name)(*args)


def ulp_distance(got, ref):
    """Distance in representable values (0 where both are NaN), as float64."""
    it = np.int32 if got.dtype == np.float32 else np.int64

    def ordered(v):
        b = v.view(it).astype(np.int64)
        return np.where(b < 0, np.iinfo(it).min - b, b)

    d = np.abs(ordered(got) - ordered(ref)).astype(np.float64)
    d[np.isnan(got) & np.isnan(ref)] = 0
    d[np.isnan(got) != np.isnan(ref)] = np.inf
    return d


def special_mismatch(got, ref):
    """Where NaN-ness or infinities differ from the reference, or both are zeros of
    different sign (a subnormal where NumPy flushes to zero is left to the ULP count)."""
    nan = np.isnan(got) != np.isnan(ref)
    inf = (np.isinf(got) | np.isinf(ref)) & (got != ref)
    zero = (got == 0) & (ref == 0) & (np.signbit(got) != np.signbit(ref))
    return nan | inf | zero


def _near(points, dtype, rng, n, ulps=8):
    """n values within a few ULP of the given points."""
    p = rng.choice(np.asarray(points, dtype=dtype), n)
    steps = rng.integers(-ulps, ulps + 1, n)
    return p + steps * np.spacing(np.abs(p)).astype(dtype)


def _loguniform(rng, lo, hi, n, signed=True):
    """|x| log-uniform in [10**lo, 10**hi], random signs when signed."""
    x = 10.0 ** rng.uniform(lo, hi, n)
    return x * rng.choice([-1.0, 1.0], n) if signed else x


def sample(name, dtype, n, seed=0):
    """n inputs (a tuple of arrays, two for power) that cover the function's interesting
    range: a third log-uniform magnitudes, a third uniform over the core range, a third
    near range-reduction boundaries and thresholds."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), np.dtype(dtype).itemsize])
    k = n // 3
    fi = np.finfo(dtype)
    big = float(np.log(fi.max))
    small = float(np.log(fi.smallest_subnormal))
    if name == "power":
        x = np.concatenate([
            _loguniform(rng, -8, 8, k), rng.uniform(0, 4, k),
            1 + _loguniform(rng, -9, -1, n - 2 * k)])
        y = np.concatenate([
            rng.uniform(-40, 40, k), np.round(rng.uniform(-60, 60, k)),
            _loguniform(rng, 0, 9, n - 2 * k)])
        y[: 2 * k : 2] = np.round(y[: 2 * k : 2])  # integer exponents for negative bases
        return x.astype(dtype), y.astype(dtype)
    ln2 = math.log(2)
    if name in ("exp", "expm1", "sigmoid"):
        lo = -30 if name == "expm1" else small - 2
        core = (lo, big + 1) if name != "sigmoid" else (small - 2, 50)
        bounds = [j * ln2 / 2 for j in range(-60, 61)] + [big, small, 0.0]
        mag = (-10, math.log10(-small))
    elif name == "exp2":
        core = (fi.minexp - fi.nmant - 2, fi.maxexp + 1)
        bounds = [j / 2 for j in range(-60, 61)] + [fi.maxexp, fi.minexp - fi.nmant]
        mag = (-10, math.log10(-core[0]))
    elif name in ("log", "log2", "log10"):
        e = np.concatenate([
            rng.uniform(fi.minexp - fi.nmant, fi.maxexp, k),
            rng.uniform(-1, 1, n - k - k // 2)])
        x = 2.0**e
        near = _near([1.0, math.sqrt(2), math.sqrt(0.5), 2.0, 0.5, 10.0], dtype, rng, k // 2)
        return (np.concatenate([x, near]).astype(dtype),)
    elif name == "log1p":
        core = (-1.0, 1.0)
        bounds = [math.sqrt(2) - 1, math.sqrt(0.5) - 1, 0.0, -1.0 + 1e-6, 1.0]
        pos = _loguniform(rng, -20, 30, k // 2, signed=False)
        neg = -_loguniform(rng, -20, -1e-9, k - k // 2, signed=False)
        x = np.concatenate([pos, neg, rng.uniform(*core, k), _near(bounds, dtype, rng, n - 2 * k)])
        return (x.astype(dtype),)
    elif name == "tanh":
        core, bounds, mag = (-12, 12), [0.625, -0.625, 9.0, 19.0], (-10, 1.5)
    elif name == "erf":
        core, bounds, mag = (-7, 7), [0.84375, -0.84375, 3.9, 5.9, 6.0], (-10, 1)
    elif name in ("sinh", "cosh"):
        core, mag = (-big - 1, big + 1), (-10, math.log10(big + 1))
        bounds = [ln2 / 2, 9.0, 20.0, big, big + ln2] + [j * ln2 / 2 for j in range(-60, 61)]
    elif name == "arctan":
        core, bounds, mag = (-10, 10), [0.66, -0.66, 1.0, 1 + math.sqrt(2)], (-10, 30)
    else:  # sin, cos, tan: near multiples of pi/2 up to 1e4*pi, plus the bound itself
        core, mag = (-10, 10), (-10, math.log10(1e4 * math.pi))
        bounds = np.arange(-20000, 20001) * (math.pi / 2)
        bounds = np.concatenate([bounds.astype(dtype), [TRIG_MAX * 0.999]])
    x = np.concatenate([
        _loguniform(rng, *mag, k), rng.uniform(*core, k), _near(bounds, dtype, rng, n - 2 * k)])
    return (x.astype(dtype),)


def edge_cases(name, dtype):
    """Special and threshold inputs (a tuple of arrays, the pairs for power)."""
    fi = np.finfo(dtype)
    common = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
              fi.smallest_normal, -fi.smallest_normal, fi.smallest_subnormal,
              -fi.smallest_subnormal, fi.eps, -fi.eps, 1e-30, -1e-30]
    if name == "power":
        pts = common + [3.0, -3.0, 2.5, -2.5, 1e30, -1e30, fi.max, 2.0**fi.nmant + 1,
                        2.0 ** (fi.nmant + 1) + 2]
        x, y = np.meshgrid(np.array(pts, dtype=dtype), np.array(pts, dtype=dtype))
        return x.ravel(), y.ravel()
    extra = [float(fi.max), -float(fi.max)]
    big, small = float(np.log(fi.max)), float(np.log(fi.smallest_subnormal))
    extra += {
        "exp": [big, small, math.log(fi.smallest_normal)],
        "expm1": [big, small, -30.0],
        "sigmoid": [-big, -small, 40.0],
        "exp2": [fi.maxexp, fi.maxexp - 1e-3, fi.minexp, fi.minexp - fi.nmant, -2000.0],
        "log1p": [-1 + fi.eps, -1 - fi.eps, -1e-30, 1e30],
        "tanh": [0.625, 9.0, 9.1, 19.0, 19.1, 22.0, 1e10],
        "erf": [0.84375, 3.9, 3.92, 5.9, 5.93, 6.0, 1e10],
        "sinh": [big, big + math.log(2), 9.0, 20.0, 1e10],
        "cosh": [big, big + math.log(2), 0.5 * math.log(2), 9.0, 20.0, 1e10],
        "arctan": [0.66, 1 + math.sqrt(2), 1e10, 1e30],
    }.get(name, [])
    if name in ("sin", "cos", "tan"):
        extra = [j * math.pi / 4 for j in range(-16, 17)] + [1e4 * math.pi, -1e4 * math.pi,
                                                             TRIG_MAX * 0.999]
    x = np.array(common + extra, dtype=dtype)
    with np.errstate(over="ignore"):
        x = np.concatenate([x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)])
    if name in ("sin", "cos", "tan"):  # finite values past the supported range give NaN
        x = x[~(np.abs(x) >= TRIG_MAX) | ~np.isfinite(x)]
    return (x,)


def _loop_over(f, binary: bool):
    """The kernel a code generator would emit: a plain loop calling the scalar function."""
    if binary:
        @numba.njit
        def loop2(x, y, out):
            for i in range(x.size):
                out[i] = f(x[i], y[i])

        return loop2

    @numba.njit
    def loop(x, out):
        for i in range(x.size):
            out[i] = f(x[i])

    return loop


def compile_loop(name, dtype):
    return _loop_over(MATH[name][np.dtype(dtype).name], name == "power")


def run(loop, args):
    out = np.empty_like(args[0])
    loop(*args, out)
    return out


def _naive(name):
    """Numba's own scalar calls (libm) in the same loop, where Numba supports them."""
    f = {"sigmoid": numba.njit(lambda x: 1.0 / (1.0 + np.exp(-x))), "erf": math.erf,
         "power": numba.njit(lambda x, y: x**y)}.get(name) or getattr(np, name)
    return _loop_over(f, name == "power")


def _per_element_ns(fn, n):
    t = min(timeit.repeat(fn, number=5, repeat=5, timer=time.process_time)) / 5
    return t / n * 1e9


def measure(name, dtype, n):
    with np.errstate(all="ignore"):
        return _measure(name, dtype, n)


def _measure(name, dtype, n):
    loop = compile_loop(name, dtype)
    args = sample(name, dtype, n)
    edges = edge_cases(name, dtype)
    errs = ulp_distance(run(loop, args), reference(name, *args))
    edge_got, edge_ref = run(loop, edges), reference(name, *edges)
    edge_errs = ulp_distance(edge_got, edge_ref)
    specials_ok = not special_mismatch(edge_got, edge_ref).any()
    all_errs = np.concatenate([errs, edge_errs])
    if dtype == np.float32:  # float64 result rounded once: (nearly) correctly rounded
        truth = reference(name, *(a.astype(np.float64) for a in args)).astype(np.float32)
        ours_err = ulp_distance(run(loop, args), truth).max()
        ref_err = ulp_distance(reference(name, *args), truth).max()
    else:
        ours_err = ref_err = np.nan
    m = 10**6
    targs = tuple(a[:m] if a.size >= m else np.resize(a, m) for a in args)
    out = np.empty_like(targs[0])
    t_ours = _per_element_ns(lambda: loop(*targs, out), m)
    ufunc = {"sigmoid": scipy.special.expit, "erf": scipy.special.erf}.get(name)
    ufunc = ufunc or getattr(np, name)
    t_numpy = _per_element_ns(lambda: ufunc(*targs, out=out), m)
    naive = _naive(name)
    naive(*targs, out)
    t_naive = _per_element_ns(lambda: naive(*targs, out), m)
    return {
        "name": name, "dtype": np.dtype(dtype).name, "n": errs.size + edge_errs.size,
        "max_ulp": all_errs.max(), "mean_ulp": all_errs.mean(), "specials_ok": specials_ok,
        "ours_err": ours_err, "ref_err": ref_err,
        "ours_ns": t_ours, "numpy_ns": t_numpy, "naive_ns": t_naive,
    }


def _opt(v):
    return "-" if np.isnan(v) else f"{v:.0f}"


def table(rows):
    head = ("| function | dtype | max ULP | mean ULP | specials ok | ours / NumPy vs rounded "
            "| tracejit ns/elem | NumPy ns/elem | naive Numba ns/elem | vs NumPy |\n"
            "|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
    return head + "".join(
        f"| {r['name']} | {r['dtype']} | {r['max_ulp']:.0f} | {r['mean_ulp']:.3f} "
        f"| {'yes' if r['specials_ok'] else 'NO'} | {_opt(r['ours_err'])} / {_opt(r['ref_err'])} "
        f"| {r['ours_ns']:.2f} | {r['numpy_ns']:.2f} | {r['naive_ns']:.2f} "
        f"| {r['numpy_ns'] / r['ours_ns']:.2f}x |\n"
        for r in rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**6, help="sampled inputs per function/dtype")
    ap.add_argument("--write", action="store_true", help="save to bench/results/ulp-<date>.md")
    opts = ap.parse_args(argv)
    rows = []
    for name in MATH:
        for dtype in DTYPES:
            rows.append(measure(name, dtype, opts.n))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor()) if Path(
        "/proc/cpuinfo").exists() else platform.processor()
    text = (
        f"# CPU math: accuracy against NumPy and speed\n\n"
        f"{datetime.date.today()}, {cpu}, Python {platform.python_version()}, "
        f"NumPy {np.__version__}, SciPy {scipy.__version__}, Numba {numba.__version__}. "
        f"{opts.n} sampled inputs per row plus edge cases. Max/mean ULP: distance to "
        f"NumPy's result (SciPy's erf; sigmoid in long double). 'vs rounded' (float32 only): "
        f"max ULP of ours and of NumPy's against the float64 function rounded to float32, "
        f"to show where a distance comes from the reference. Timings: single-threaded "
        f"process CPU time per element on 10^6 sampled elements.\n\n"
        + table(rows))
    print(text)
    if opts.write:
        path = Path(__file__).parent / "results" / f"ulp-{datetime.date.today()}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
