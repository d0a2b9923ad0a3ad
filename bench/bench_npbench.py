"""NPBench's NumPy kernels under ``tracejit.jit``, unchanged: first call, cached call and
NumPy's time, each kernel in a fresh process with an empty disk cache, as a new user meets
it.

    python bench/bench_npbench.py PATH [--preset S] [--only NAME ...] [--timeout 120]
                                  [--markdown OUT.md]

``PATH`` is a checkout of NPBench (https://github.com/spcl/npbench): the folder holding
``bench_info/`` and ``npbench/benchmarks/``. A bare mirror works through
``git --git-dir MIRROR worktree add /tmp/npbench HEAD`` (or ``git archive``).

Each kernel runs twice on copies of the same inputs, once in NumPy and once jitted; the
jitted call's results (what it returns and the arrays NPBench names as outputs) must
match NumPy's to ``rtol=1e-5`` (relative to the largest magnitude). A kernel whose first
call passes ``--timeout`` seconds is reported as such, not waited for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def benchmarks(root: Path) -> list[dict]:
    """NPBench's benchmark descriptions (``bench_info/*.json``), by short name."""
    found = []
    for path in sorted((root / "bench_info").glob("*.json")):
        found.append(json.loads(path.read_text())["benchmark"])
    return found


def _modules(root: Path, info: dict):
    """The benchmark's NumPy module (the kernel) and its initialisation module."""
    import importlib.util

    folder = root / "npbench" / "benchmarks" / info["relative_path"]
    loaded = []
    for name in (f"{info['module_name']}_numpy", info["module_name"]):
        if not (folder / f"{name}.py").exists():  # (no initialisation module)
            loaded.append(None)
            continue
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
    return loaded


def _inputs(info: dict, init, preset: str) -> dict:
    """The kernel's arguments by name: the preset's parameters and what ``initialize``
    makes of them."""
    import numpy as np

    values = dict(info["parameters"][preset])
    spec = info.get("init")
    if spec is None:  # (the parameters are the arguments)
        return values
    made = getattr(init, spec["func_name"])(*[values[a] for a in spec["input_args"]])
    outs = spec["output_args"]
    made = made if len(outs) > 1 else (made,)
    values.update(zip(outs, made, strict=True))
    return {k: (np.copy(v) if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def _fresh(values: dict) -> dict:
    import numpy as np

    return {k: (np.copy(v) if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def _results(returned, args: dict, info: dict) -> list:
    """What the call computed: its return value(s) and the output arrays it wrote."""
    out = list(returned) if isinstance(returned, tuple) else [returned]
    return [o for o in out if o is not None] + [args[a] for a in info["output_args"]]


def _max_error(got: list, want: list) -> float:
    """The largest error relative to the largest magnitude of NumPy's result, over all
    results (inf where shapes differ, NaNs sit elsewhere, or results are missing)."""
    import numpy as np

    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or not np.array_equal(np.isnan(g), np.isnan(w)):
            return float("inf")
        if w.size == 0:
            continue
        finite = ~np.isnan(w)
        scale = max(float(np.max(np.abs(w[finite]), initial=0.0)), 1e-300)
        worst = max(worst, float(np.max(np.abs(g[finite] - w[finite]), initial=0.0)) / scale)
    return worst


def run_one(root: Path, name: str, preset: str) -> dict:
    """One kernel in this (fresh) process: NumPy's best of three, the jitted first call,
    its cached call's median of three, and the error."""

    import tracejit as tj

    info = next(b for b in benchmarks(root) if b["short_name"] == name)
    kernel_module, init = _modules(root, info)
    kernel = getattr(kernel_module, info["func_name"])
    values = _inputs(info, init, preset)
    names = info["input_args"]

    numpy_times, want = [], None
    for _ in range(3):
        args = _fresh(values)
        start = time.perf_counter()
        returned = kernel(*[args[a] for a in names])
        numpy_times.append(time.perf_counter() - start)
        want = _results(returned, args, info)

    jitted = tj.jit(kernel)
    args = _fresh(values)
    start = time.perf_counter()
    returned = jitted(*[args[a] for a in names])
    first = time.perf_counter() - start
    error = _max_error(_results(returned, args, info), want)
    cached = []
    for _ in range(3):
        args = _fresh(values)
        start = time.perf_counter()
        returned = jitted(*[args[a] for a in names])
        cached.append(time.perf_counter() - start)
    error = max(error, _max_error(_results(returned, args, info), want))
    return {"name": name, "status": "ok" if error <= 1e-5 else "mismatch", "error": error,
            "numpy_s": min(numpy_times), "first_s": first, "cached_s": statistics.median(cached)}


def run_fresh(root: Path, name: str, preset: str, timeout: float) -> dict:
    """``run_one`` in a new process with a disk cache of its own (empty)."""
    with tempfile.TemporaryDirectory(prefix="npbench-cache-") as cache:
        env = {**os.environ, "TRACEJIT_CACHE_DIR": cache}
        try:
            done = subprocess.run([sys.executable, __file__, str(root), "--preset", preset,
                                   "--one", name], env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"name": name, "status": f"first call over {timeout:g} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"name": name, "status": f"error: {last[:120]}"}
    return json.loads(lines[-1])


def markdown(rows: list[dict], preset: str) -> str:
    ran = [r for r in rows if r["status"] == "ok"]
    firsts = sorted(r["first_s"] for r in ran)
    lines = [f"NPBench preset {preset}: {len(ran)} of {len(rows)} kernels give NumPy's results;"
             f" first call median {statistics.median(firsts):.2f} s, "
             f"{sum(f > 5 for f in firsts)} over 5 s" if firsts else "no kernel ran", "",
             "| kernel | status | NumPy | first call | cached | cached / NumPy |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "first_s" in r:
            lines.append(f"| {r['name']} | {r['status']} | {r['numpy_s'] * 1e3:.2f} ms | "
                         f"{r['first_s']:.2f} s | {r['cached_s'] * 1e3:.2f} ms | "
                         f"{r['cached_s'] / r['numpy_s']:.2f} |")
        else:
            lines.append(f"| {r['name']} | {r['status']} | | | | |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="an NPBench checkout")
    parser.add_argument("--preset", default="S")
    parser.add_argument("--only", nargs="*", help="short names (default: all)")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # (run_fresh's child)
    a = parser.parse_args()
    if a.one:
        print(json.dumps(run_one(a.root, a.one, a.preset)))
        return
    names = a.only or [b["short_name"] for b in benchmarks(a.root)]
    rows = []
    for name in names:
        rows.append(run_fresh(a.root, name, a.preset, a.timeout))
        print(json.dumps(rows[-1]), flush=True)
    table = markdown(rows, a.preset)
    print(table)
    if a.markdown:
        a.markdown.write_text(table)


if __name__ == "__main__":
    main()
