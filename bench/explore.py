"""Explore run: many random programs from tests/test_oracle.py's generator against its oracle.

    python bench/explore.py --backend cpu --programs 10000 --seed 1 [--batch 8] [--out FILE]

Program ``i`` of seed ``S`` is drawn from ``random.Random(f"{S}:{i}")``, so any failure can be
drawn again alone. A mismatch is an output outside the oracle's error bound; a crash is any
exception under ``jit`` (the generator keeps only steps NumPy accepts). Writes a markdown
record (default bench/results/explore-<date>-<backend>.md) with the counts, the wall time
and each failing program's source.

``--batch B`` traces B independent programs as one function: one trace and one compile per
batch, which is where a compiled backend spends its time (the kernels still compile one by
one, but the per-function work is shared). The programs share no values, so each output
still depends on its own program only; a batch that fails is run again program by program
to name the culprit (and recorded whole if none fails alone). ``--backend cuda`` runs on the
emulated GPU of tools/cudasim (g++ compiles the kernels), or with ``--real-gpu`` on GPU 0
through CuPy (NVRTC's code, the GPU's math library and its sums' order: what the emulator
cannot show). The worker processes are forked before any of them touches CUDA.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))
# The programs' arrays are small: compile every kernel, however small, so that the run
# checks the kernels and not NumPy calls (read when tracejit is imported).
os.environ.setdefault("TRACEJIT_MIN_KERNEL_SIZE", "0")

import numpy as np  # noqa: E402
import test_oracle  # noqa: E402

import tracejit as tj  # noqa: E402
from tracejit import targets  # noqa: E402


def draw(seed: int, i: int) -> test_oracle.Program:
    return test_oracle.build(test_oracle.RandomChooser(random.Random(f"{seed}:{i}")))


def batched(progs: list) -> tuple:
    """One function running every program of ``progs``, and its arguments."""
    args = [x for p in progs for x in p.inputs]

    def run_all(*flat):
        outs, k = [], 0
        for p in progs:
            outs += p.function()(*flat[k:k + len(p.inputs)])
            k += len(p.inputs)
        return tuple(outs)

    return run_all, args


def host(x):
    return targets.to_host(x) if targets.device_of(x) not in (None, targets.CPU) else x


def run(progs: list, backend: str) -> list[str]:
    """Problems of the batch ``progs`` run as one jitted function: one list per program."""
    fn, args = batched(progs)
    try:
        if backend == "cuda":
            with tj.device("cuda"):
                got = tuple(host(o) for o in tj.jit(fn, backend="cuda")(*args))
        else:
            got = tj.jit(fn, backend=backend)(*args)
    except Exception as exc:  # noqa: BLE001 (every exception is a finding)
        return [[f"crash: {type(exc).__name__}: {str(exc)[:500]}"] for _ in progs]
    problems, k = [], 0
    for p in progs:
        problems.append(test_oracle.mismatches(p, tuple(got[k:k + len(p.outputs)])))
        k += len(p.outputs)
    return problems


def crashed(failure: tuple) -> bool:
    return any(line.startswith("crash") for line in failure[2])


def check_batch(job: tuple) -> tuple[list, int]:
    """Draw and check the programs ``ids`` of ``seed`` as one batch: the failures (title,
    source, problems) and how many programs NumPy itself ran outside the bound."""
    backend, seed, ids = job
    progs = [draw(seed, i) for i in ids]
    numpy_off = sum(  # NumPy outside the bound: the bound is wrong, not tracejit
        bool(test_oracle.mismatches(p, tuple(p.values[j] for j in p.outputs), "NumPy"))
        for p in progs
    )
    problems = run(progs, backend)
    if any(problems) and len(progs) > 1:
        alone = [run([p], backend)[0] for p in progs]
        if not any(alone):
            title = f"batch {ids[0]}-{ids[-1]} (no program fails alone)"
            return [(title, "\n\n".join(map(repr, progs)), sum(problems, []))], numpy_off
        problems = alone
    failures = [(f"program {i}", repr(p), found)
                for i, p, found in zip(ids, progs, problems, strict=True) if found]
    return failures, numpy_off


def explore(backend: str, programs: int, seed: int, batch: int, jobs: int) -> dict:
    """Check ``programs`` programs, ``batch`` per jitted function, in ``jobs`` processes."""
    work = [(backend, seed, list(range(first, min(first + batch, programs))))
            for first in range(0, programs, batch)]
    failures, numpy_off, start = [], 0, time.perf_counter()
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    results = pool.imap(check_batch, work) if pool else map(check_batch, work)
    for (_, _, ids), (found, off) in zip(work, results, strict=True):
        failures += found
        numpy_off += off
        done = ids[-1] + 1
        if done % max(batch, 100) < batch or done == programs:
            rate = done / (time.perf_counter() - start)
            crashes = sum(map(crashed, failures))
            print(f"{done}/{programs} programs, {len(failures) - crashes} mismatches, "
                  f"{crashes} crashes, {rate:.1f} programs/s", flush=True)
    if pool:
        pool.close()
    wall = time.perf_counter() - start
    crashes = sum(map(crashed, failures))
    return {"failures": failures, "crashes": crashes, "mismatches": len(failures) - crashes,
            "numpy_off": numpy_off, "wall": wall}


def record(path: Path, args, result: dict) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    lines = [
        f"# Explore run: {args.backend}",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- commit: {commit}",
        f"- command: `python bench/explore.py --backend {args.backend} --programs "
        f"{args.programs} --seed {args.seed} --batch {args.batch} --jobs {args.jobs}"
        f"{' --real-gpu' if args.real_gpu else ''}` "
        f"(TRACEJIT_DISK_CACHE={os.environ['TRACEJIT_DISK_CACHE']}, "
        f"TRACEJIT_MIN_KERNEL_SIZE={os.environ['TRACEJIT_MIN_KERNEL_SIZE']})",
        f"- backend: {args.backend}" + (f" ({gpu_name(args)})" if args.backend == "cuda" else ""),
        f"- seed: {args.seed} (program i is drawn from `random.Random(f\"{args.seed}:{{i}}\")`)",
        f"- programs: {args.programs}",
        f"- mismatches: {result['mismatches']}",
        f"- crashes: {result['crashes']}",
        f"- NumPy outside the error bound (a wrong bound, not a tracejit bug): "
        f"{result['numpy_off']}",
        f"- wall time: {result['wall']:.0f} s ({args.programs / result['wall']:.1f} programs/s)",
        "",
    ]
    for title, source, problems in result["failures"]:
        lines += [f"## {title}", "", "```python", source.strip(), "```", ""]
        lines += [f"- {line}" for line in problems] + [""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def gpu_name(args) -> str:
    if not args.real_gpu:
        return "emulated GPU"
    import cupy

    return f"real GPU: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=["reference", "cpu", "cuda"])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1, help="programs per jitted function")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--real-gpu", action="store_true",
                        help="with --backend cuda: GPU 0 through CuPy, not the emulator")
    args = parser.parse_args()
    # No disk cache: no program is seen twice, and saving the kernels' object code costs
    # about a third of the time (TRACEJIT_DISK_CACHE=1 tests that path too, in a tmp dir).
    os.environ.setdefault("TRACEJIT_DISK_CACHE", "0")
    if os.environ["TRACEJIT_DISK_CACHE"] != "0" and "TRACEJIT_CACHE_DIR" not in os.environ:
        os.environ["TRACEJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracejit-explore-")
    if args.backend == "cuda" and not args.real_gpu:
        import cudasim

        cudasim.install()
        cudasim.set_device_count(1)
    warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's notes on empty slices
    np.seterr(all="ignore")
    result = explore(args.backend, args.programs, args.seed, args.batch, args.jobs)
    out = args.out or ROOT / "bench" / "results" / (
        f"explore-{datetime.date.today().isoformat()}-{args.backend}.md")
    record(out, args, result)
    print(f"{result['mismatches']} mismatches, {result['crashes']} crashes in "
          f"{args.programs} programs ({result['wall']:.0f} s); wrote {out}")


if __name__ == "__main__":
    main()
