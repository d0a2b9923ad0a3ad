"""CPU benchmarks: tracejit against NumPy, numexpr, hand-written Numba and JAX, same process.

    python bench/bench_cpu.py            # print the tables
    python bench/bench_cpu.py --write    # also replace the CPU section of bench/RESULTS.md

Each timing is the best of several repeats after a warm-up call; peers that are not
installed are reported as such. The ratio column is the peer's time over tracejit's: 2.00x
means tracejit is twice as fast.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import textwrap
import time

import numpy as np

import tracejit as tj

RESULTS = os.path.join(os.path.dirname(__file__), "RESULTS.md")


def timeit(fn, *args, number: int = 10, repeat: int = 7) -> float:
    """Seconds per call: the best of ``repeat`` runs of ``number`` calls. The best, as
    Python's timeit advises, because on this shared VM other tenants only ever add time
    (medians moved 10-30% between runs); every implementation is measured the same way."""
    fn(*args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


ne = optional("numexpr")
jax = optional("jax")
if jax is not None:
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy


def block(x):
    return x.block_until_ready() if hasattr(x, "block_until_ready") else x


def jax_fn(f):
    jf = jax.jit(f)
    return lambda *a: block(jf(*a))


def numba_loop(expr_fn):
    import numba

    return numba.njit(fastmath=False)(expr_fn)


def row(name, t, base):
    return f"| {name} | {t * 1e3:.3f} ms | {t / base:.2f}x |"


def table(title, results, unit_note=""):
    base = results["tracejit"]
    lines = [f"### {title}", "", unit_note, "",
             "| implementation | time per call | its time / tracejit's |", "|---|---|---|"]
    for name, t in results.items():
        lines.append(row(name, t, base) if t is not None else f"| {name} | not installed | |")
    return "\n".join(lines)


def bench_exp():
    x = np.random.default_rng(0).random(230_400, dtype=np.float32)
    res = {"tracejit": timeit(tj.jit(np.exp, backend="cpu"), x, number=200),
           "NumPy": timeit(np.exp, x, number=200)}
    res["numexpr"] = timeit(lambda a: ne.evaluate("exp(a)"), x, number=200) if ne else None

    def loop(a):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = np.exp(a[i])
        return out

    res["Numba loop (np.exp, serial)"] = timeit(numba_loop(loop), x, number=200)
    res["JAX jit"] = timeit(jax_fn(jnp.exp), x, number=200) if jax else None
    return table("1. exp of 230,400 float32 (Theano GPU tutorial check), per call", res)


def bench_exp_patterns():
    """exp of 230,400 float32 called three ways: back to back, after a 1 ms pause, and
    between NumPy reductions of 16 MB; the median call, tracejit and NumPy alike. A paused
    call finds libgomp's team asleep (``native.Launches`` decides whether to wake it)."""
    x = np.random.default_rng(0).random(230_400, dtype=np.float32)
    other = np.random.default_rng(1).random(2_000_000)
    f = tj.jit(np.exp, backend="cpu")
    f(x)

    def median_call(fn, between, n=400):
        times = []
        for _ in range(n):
            between()
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
        return sorted(times)[n // 2]

    lines = ["### 1b. exp of 230,400 float32 between other work, median call", "",
             "| calls | tracejit | NumPy | NumPy / tracejit |", "|---|---|---|---|"]
    for name, between in [("back to back", lambda: None),
                          ("after a 1 ms pause", lambda: time.sleep(1e-3)),
                          ("between sums of 2M float64", other.sum)]:
        ours, theirs = median_call(f, between), median_call(np.exp, between)
        lines.append(f"| {name} | {ours * 1e3:.3f} ms | {theirs * 1e3:.3f} ms | "
                     f"{theirs / ours:.2f}x |")
    return "\n".join(lines)


def chain(x, y):
    return np.tanh(x * y + 0.5) * np.exp(-x * x) + np.sqrt(np.abs(y))


def bench_chain(dtype):
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(4_000_000).astype(dtype) for _ in range(2))
    res = {"tracejit": timeit(tj.jit(chain, backend="cpu"), x, y),
           "NumPy": timeit(chain, x, y)}
    expr = "tanh(x * y + 0.5) * exp(-x * x) + sqrt(abs(y))"
    res["numexpr"] = timeit(lambda a, b: ne.evaluate(expr, local_dict={"x": a, "y": b}), x,
                            y) if ne else None

    def loop(a, b):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = np.tanh(a[i] * b[i] + 0.5) * np.exp(-a[i] * a[i]) + np.sqrt(abs(b[i]))
        return out

    res["Numba loop (np.* calls, serial)"] = timeit(numba_loop(loop), x, y)
    res["JAX jit"] = timeit(jax_fn(chain_jax), x, y) if jax else None
    copy = timeit(np.copyto, np.empty_like(x), x)
    moved = 3 * x.nbytes  # read x and y, write the result
    note = (f"tracejit moves {moved / res['tracejit'] / 1e9:.1f} GB/s; a single-threaded "
            f"np.copyto of one array moves {2 * x.nbytes / copy / 1e9:.1f} GB/s here.")
    return table(f"2. tanh(x*y+.5)*exp(-x*x)+sqrt(abs(y)), 4M {np.dtype(dtype).name}", res,
                 note)


def clip_chain(x, lo):
    return np.clip(x * 2 + 1, lo, 1.0) * 3


def bench_clip():
    """``clip`` in a chain, with scalar bounds and with an array bound (NumPy's two loops,
    whose NaNs and zero ties tracejit's kernels follow). numexpr has no clip."""
    rng = np.random.default_rng(3)
    x, lo = (rng.standard_normal(4_000_000).astype(np.float32) for _ in range(2))
    lo = np.minimum(lo, 0.5)

    def loop_scalar(a, b):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = min(max(a[i] * 2 + 1, b), 1.0) * 3
        return out

    def loop_array(a, b):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = min(max(a[i] * 2 + 1, b[i]), 1.0) * 3
        return out

    out = []
    for label, bound, loop in (("scalar bounds", np.float32(-1.0), loop_scalar),
                               ("array lower bound", lo, loop_array)):
        res = {"tracejit": timeit(tj.jit(clip_chain, backend="cpu"), x, bound),
               "NumPy": timeit(clip_chain, x, bound),
               "Numba loop (serial)": timeit(numba_loop(loop), x, bound),
               "JAX jit": timeit(jax_fn(lambda a, b: jnp.clip(a * 2 + 1, b, 1.0) * 3), x,
                                 bound) if jax else None}
        out.append(table(f"2b. clip(x*2+1, lo, 1)*3, 4M float32, {label}", res))
    return "\n\n".join(out)


def chain_jax(x, y):
    return jnp.tanh(x * y + 0.5) * jnp.exp(-x * x) + jnp.sqrt(jnp.abs(y))


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def logsumexp(x):
    m = x.max(axis=1, keepdims=True)
    return m[:, 0] + np.log(np.exp(x - m).sum(axis=1))


def bench_rows():
    x = np.random.default_rng(2).standard_normal((10_000, 1000)).astype(np.float32)
    out = []
    for fn, jfn in ((softmax, lambda x: jax.nn.softmax(x, axis=1)),
                    (logsumexp, lambda x: jax.nn.logsumexp(x, axis=1))):
        res = {"tracejit": timeit(tj.jit(fn, backend="cpu"), x),
               "NumPy": timeit(fn, x),
               "JAX jit": timeit(jax_fn(jfn), x) if jax else None}
        out.append(table(f"3. row {fn.__name__} of (10000, 1000) float32", res))
    return "\n\n".join(out)


def bench_overhead():
    x = np.ones(8, np.float32)
    f = tj.jit(lambda x: x * 2 + 1, backend="cpu")
    f(x)  # runs as two NumPy calls while its kernel compiles (too small to wait for)
    f.wait_compiled()
    res = {"tracejit": timeit(f, x, number=20000),
           "NumPy eager": timeit(lambda x: x * 2 + 1, x, number=20000),
           "JAX jit": timeit(jax_fn(lambda x: x * 2 + 1), x, number=20000) if jax else None}
    lines = ["### 4. per-call overhead, cached call of x*2+1 on 8 float32", "",
             "| implementation | time per call |", "|---|---|"]
    lines += [f"| {k} | {v * 1e6:.2f} us |" if v else f"| {k} | not installed |"
              for k, v in res.items()]
    return "\n".join(lines)


_COMPILE = textwrap.dedent("""
    import time, numpy as np
    t0 = time.perf_counter(); import tracejit as tj; t_import = time.perf_counter() - t0
    def chain(x, y):
        return np.tanh(x * y + 0.5) * np.exp(-x * x) + np.sqrt(np.abs(y))
    x = np.ones(4_000_000, np.float32)
    t0 = time.perf_counter(); tj.jit(chain, backend="cpu")(x, x); t = time.perf_counter() - t0
    print(t_import, t)
""")


def bench_compile():
    import tempfile

    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["TRACEJIT_CACHE_DIR"] = cache
        runs = [subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True,
                               text=True, check=True).stdout.split() for _ in range(2)]
    (imp, cold), (_, warm) = ([float(v) for v in r] for r in runs)
    return "\n".join([
        "### 5. compile latency of workload 2 (float32) in a fresh process", "",
        "| | seconds |", "|---|---|",
        f"| `import tracejit` | {imp:.3f} |",
        f"| first call, cold (trace + compile + run) | {cold:.3f} |",
        f"| first call, warm disk cache (new process) | {warm:.3f} |",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    parts = [machine_line(), bench_exp(), bench_exp_patterns(), bench_chain(np.float32),
             bench_chain(np.float64), bench_clip(), bench_rows(), bench_overhead(), bench_compile()]
    text = "\n\n".join(parts)
    print(text)
    if args.write:
        write_section("bench-cpu", "CPU", text)


def cpu_model() -> str:
    """The CPU's model name and its widest vector extension (timings differ by host: the
    project's machines have been AVX-512 and AVX2 ones)."""
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n")[0]
    except OSError:
        return platform.processor() or "unknown CPU"
    fields = {k.strip(): v for k, v in (line.split(":", 1) for line in first.splitlines()
                                        if ":" in line)}
    flags = fields.get("flags", "").split()
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return f"{fields.get('model name', '?').strip()} ({vector})"


def machine_line() -> str:
    return (f"Measured {datetime.date.today()} on {platform.machine()} {cpu_model()}, "
            f"{os.cpu_count()} cores, "
            f"Python {platform.python_version()}, NumPy {np.__version__}, tracejit "
            f"{tj.__version__}" + (f", JAX {jax.__version__}" if jax else "")
            + (f", numexpr {ne.__version__}" if ne else "") + ".")


def write_section(tag: str, title: str, text: str) -> None:
    """Replace (or append) the part of RESULTS.md between ``<!-- tag:begin/end -->``."""
    begin, end = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
    old = open(RESULTS).read() if os.path.exists(RESULTS) else "# Benchmark results\n"
    section = f"{begin}\n## {title}\n\n{text}\n{end}"
    if begin in old:
        old = old[: old.index(begin)] + section + old[old.index(end) + len(end):]
    else:
        old = old.rstrip() + "\n\n" + section + "\n"
    with open(RESULTS, "w") as f:
        f.write(old)


if __name__ == "__main__":
    main()
