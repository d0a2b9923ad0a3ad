"""Where the GPU gradient step's time goes: the two-moons ``train_step`` of
``bench_cuda.py`` (both sizes) under ``tj.profile``, its tables printed and written with
the optimised IR and the generated source to ``profile_cuda_step.md`` (in $OUT, or /tmp),
so that the kernels can be read and tuned without a GPU.

    PYTHONPATH=src python bench/profile_cuda_step.py [--sim] [--quick]

``--quick`` profiles the tutorial-sized step only; ``--sim`` runs on tools/cudasim.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import tracejit as tj

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))


def main() -> None:
    sim, quick = "--sim" in sys.argv, "--quick" in sys.argv
    if sim:
        import bench_cuda
        bench_cuda.install_sim()
    import two_moons as tm
    from bench_cuda import network

    out = os.environ.get("OUT", "/tmp")
    sizes = [(256, 64, 3)] if sim else [(5000, 1000, 200)] + ([] if quick else [(65536, 4096, 20)])
    report = []
    for batch, hidden, calls in sizes:
        params, X, Y = network(batch, hidden, seed=0)
        with tj.device("cuda"):
            dev = [{k: tj.to_device(v, "cuda") for k, v in params.items()},
                   tj.to_device(X, "cuda"), tj.to_device(Y, "cuda")]
            tm.train_step(*dev)  # compiles
            tj.synchronize()
            with tj.profile() as prof:
                for _ in range(calls):
                    tm.train_step(dev[0], dev[1], dev[2])
                tj.synchronize()
            lowered = tm.train_step.lower(*dev)
        report += [f"# {batch} x 2 -> {hidden} tanh -> 2, {calls} calls", str(prof), "",
                   lowered.optimized_ir, "", lowered.source, ""]
        print(f"# {batch} x 2 -> {hidden} tanh -> 2, {calls} calls\n{prof}\n", flush=True)
    report.append(_host_overhead(10 if sim else 3000))
    print(report[-1])
    report.append(_grid_caps(4096 if sim else 64 * 2**20, 3 if sim else 50))
    print(report[-1])
    with open(os.path.join(out, "profile_cuda_step.md"), "w") as f:
        f.write("\n".join(report))


def _grid_caps(n: int, calls: int) -> str:
    """bench_cuda.py's chain with other caps on a map kernel's grid (codegen.MAX_GRID:
    more blocks, fewer grid-stride steps per thread), each compiled afresh."""
    import time

    from tracejit.backends.cuda import codegen

    rng = np.random.default_rng(0)
    x, y = (tj.to_device(rng.standard_normal(n, dtype=np.float32), "cuda") for _ in "xy")
    lines = [f"# the chain on {n:,} float32 by map-kernel grid cap (median of 5 loops of "
             f"{calls} calls)", "| MAX_GRID | per call |", "|---|---|"]
    saved = codegen.MAX_GRID
    try:
        for cap in (1024, 4096, 16384, 65536, 2**31 - 1):
            codegen.MAX_GRID = cap
            f = tj.jit(lambda x, y: np.tanh(x * y + 0.5) * np.exp(-x * x) + np.sqrt(np.abs(y)),
                       device="cuda")
            f(x, y)
            tj.synchronize()
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(calls):
                    f(x, y)
                tj.synchronize()
                times.append((time.perf_counter() - t0) / calls)
            lines.append(f"| {cap} | {sorted(times)[2] * 1e6:.1f} us |")
    finally:
        codegen.MAX_GRID = saved
    return "\n".join(lines)


def _host_overhead(calls: int) -> str:
    """The Python a cached call of bench_cuda.py's first case (exp of 230,400 float32 on
    the GPU) runs, by cProfile: what tracejit adds to the launch."""
    import cProfile
    import io
    import pstats

    f = tj.jit(lambda x: np.exp(x), device="cuda")
    x = tj.to_device(np.linspace(-3, 3, 230_400, dtype=np.float32), "cuda")
    f(x)
    tj.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        f(x)
    prof.disable()
    tj.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    return f"# cProfile of {calls} cached calls of jit(np.exp) on the GPU\n{text.getvalue()}"


if __name__ == "__main__":
    main()
