"""A plain Python loop in a jitted function, rolled into a scan or left unrolled.

    python bench/bench_unrolled.py                  # 1, 5, 20, 500 steps; unrolled up to 20
    python bench/bench_unrolled.py --unrolled-max 500 --backend reference

Issue 15's example: a 150x150 Jacobi-style update (``np.pad`` and five shifted slices)
inside ``for t in range(steps)``. For each step count and each setting of
``tracejit.config.roll_loops`` (``TRACEJIT_ROLL_LOOPS``), a fresh process with an empty
disk cache times the first call (trace, passes, code generation, first run: what a user
waits for) and then the median of later calls, and checks the result against NumPy.
Unrolled 500 steps takes minutes to compile on the CPU backend, so by default the
unrolled form stops at 20 steps (``--unrolled-max``). Target: rolled, 500 steps compile in
at most twice the time of 1 step, and run at least as fast as the unrolled form.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

_CHILD = textwrap.dedent("""
    import json, statistics, sys, time
    import numpy as np
    import tracejit as tj

    steps, backend, n = {steps}, {backend!r}, {n}

    def jacobi(a):
        for t in range(steps):
            p = np.pad(a, 1)
            a = 0.2 * (p[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2]
                       + p[1:-1, 2:])
        return a

    a = np.random.default_rng(0).random((n, n))
    f = tj.jit(jacobi, backend=backend)
    t0 = time.perf_counter()
    out = f(a)
    first = time.perf_counter() - t0
    assert np.allclose(out, jacobi(a), rtol=1e-12, atol=1e-12)
    runs = []
    for _ in range({repeat}):
        t0 = time.perf_counter()
        f(a)
        runs.append(time.perf_counter() - t0)
    ir = f.lower(a).optimized_ir
    print(json.dumps({{"first": first, "run": statistics.median(runs),
                      "scans": ir.count("scan("), "nodes": ir.count("\\n")}}))
""")


def measure(steps: int, roll: bool, backend: str, n: int, repeat: int) -> dict:
    env = dict(os.environ, TRACEJIT_ROLL_LOOPS="1" if roll else "0",
               TRACEJIT_CACHE_DIR=tempfile.mkdtemp(prefix="tj-unrolled-"))
    code = _CHILD.format(steps=steps, backend=backend, n=n, repeat=repeat)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 5, 20, 500])
    ap.add_argument("--unrolled-max", type=int, default=20)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"Jacobi {args.n}x{args.n} on {args.backend}: first call (compile + run) and "
          "median later call, fresh process, empty disk cache")
    print(f"{'steps':>6} {'mode':>9} {'first call':>11} {'later call':>11} {'per step':>10} "
          f"{'scans':>6} {'IR lines':>9}")
    for steps in args.steps:
        for roll in (True, False):
            if not roll and steps > args.unrolled_max:
                continue
            r = measure(steps, roll, args.backend, args.n, args.repeat)
            print(f"{steps:>6} {'rolled' if roll else 'unrolled':>9} {r['first']:>10.3f}s "
                  f"{1e3 * r['run']:>9.2f}ms {1e6 * r['run'] / steps:>8.1f}us "
                  f"{r['scans']:>6} {r['nodes']:>9}", flush=True)


if __name__ == "__main__":
    main()
