"""Explore run: many drawn programs of views and writes (tests/test_views_drawn.py) against NumPy.

    python bench/explore_views.py --programs 10000 --backend cpu [--reference 10000]
        [--seed 0] [--jobs 2] [--shrink 60] [--out bench/results/FILE.md]

Program ``i`` of seed ``S`` is ``test_views_drawn.build`` on ``random.Random(f"{S}:{i}")``, so
any one can be drawn again alone (``--show I``; ``--check`` runs it too). Each program
runs on NumPy and jitted, twice (the arguments in two drawn layouts), and is compared as
the test compares: results' values and dtypes, every argument afterwards,
``np.shares_memory`` between every pair of results and of a result and an argument, and
all of it again after the caller writes through each result. ``--reference N`` also runs
programs 0..N-1 on the reference backend (fast: no compiling), reported apart;
``--ignore REGEX`` leaves out the differences it matches, to look past a known cause.

A mismatch is shrunk (up to ``--shrink`` of them per backend; steps, returns and arguments
dropped, layouts made plain, traced integers and written values made constants, while the
first difference stays of the same kind) and the record groups the shrunk programs by
that kind. The record (markdown) gives the date, the host, the commit, the counts, the
wall time and, per kind, the distinct shrunk programs with what differed.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import multiprocessing
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))
# As the tests do: compile every kernel however small, and check the kernels themselves.
os.environ.setdefault("TRACEJIT_MIN_KERNEL_SIZE", "0")
os.environ.setdefault("TRACEJIT_PREBUILT", "0")
# No disk cache: no program is seen twice.
os.environ.setdefault("TRACEJIT_DISK_CACHE", "0")
if os.environ["TRACEJIT_DISK_CACHE"] != "0" and "TRACEJIT_CACHE_DIR" not in os.environ:
    os.environ["TRACEJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracejit-explore-views-")

import numpy as np  # noqa: E402
import test_views_drawn as tv  # noqa: E402


def draw(seed: int, i: int) -> tv.Program:
    return tv.build(tv.RandomChooser(random.Random(f"{seed}:{i}")))


IGNORE: re.Pattern | None = None  # --ignore: differences not counted
kind = tv.kind


def check(prog: tv.Program, backend: str) -> list[str]:
    ignore = IGNORE.search if IGNORE is not None else None
    try:
        return tv.check(prog, backend, ignore)
    except Exception as e:  # noqa: BLE001 - a failure of the harness on NumPy's side
        return [f"harness raised {type(e).__name__}: {str(e)[:300]}"]


def shrink_for(prog: tv.Program, backend: str, diffs: list[str]):
    """``shrink`` on ``backend``; for a compiled backend, on the reference backend where
    the program fails there alike (no compiling: fast), if the result still fails on
    ``backend``."""
    if backend != "reference":
        ref = check(prog, "reference")
        if ref and kind(ref[0]) == kind(diffs[0]):
            small, _ = tv.shrink(prog, lambda p: check(p, "reference"), ref)
            found = check(small, backend)
            if found and kind(found[0]) == kind(diffs[0]):
                return small, found
        return tv.shrink(prog, lambda p: check(p, backend), diffs, budget=40)
    return tv.shrink(prog, lambda p: check(p, backend), diffs)


# --------------------------------------------------------------------------- running


def run_one(job: tuple) -> tuple:
    backend, seed, i = job
    prog = draw(seed, i)
    return i, check(prog, backend)


def explore(backend: str, programs: int, seed: int, jobs: int, shrink_max: int) -> dict:
    start = time.perf_counter()
    work = [(backend, seed, i) for i in range(programs)]
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    results = pool.imap(run_one, work, chunksize=4) if pool else map(run_one, work)
    failing = []
    for n, (i, diffs) in enumerate(results, 1):
        if diffs:
            failing.append((i, diffs))
        if n % 500 == 0 or n == programs:
            print(f"{backend}: {n}/{programs} programs, {len(failing)} mismatches, "
                  f"{n / (time.perf_counter() - start):.1f} programs/s", flush=True)
    if pool:
        pool.close()
    wall = time.perf_counter() - start
    crashes = sum(1 for _, d in failing if "raised" in d[0])
    by_kind = collections.Counter(kind(d[0]) for _, d in failing)
    shrunk = {}  # kind -> {source: (program index, diffs)}
    shrink_start = time.perf_counter()
    picked = collections.Counter()
    for i, diffs in failing:
        k = kind(diffs[0])
        if sum(picked.values()) >= shrink_max or picked[k] >= max(3, shrink_max // 8):
            continue
        picked[k] += 1
        small, small_diffs = shrink_for(draw(seed, i), backend, diffs)
        shrunk.setdefault(kind(small_diffs[0]), {}).setdefault(
            small.source(), (i, small_diffs))
    return {"backend": backend, "programs": programs, "failing": failing, "wall": wall,
            "crashes": crashes, "by_kind": by_kind, "shrunk": shrunk,
            "shrink_wall": time.perf_counter() - shrink_start}


def host() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.machine()}, {cpu}, {os.cpu_count()} CPUs"


def record(path: Path, args, results: list[dict]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    lines = [
        "# Explore run: drawn views and writes against NumPy (issue 40)",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- commit: {commit}" + (" (with uncommitted changes under src/)" if dirty else ""),
        f"- host: {host()}",
        f"- command: `python bench/explore_views.py {' '.join(sys.argv[1:])}` "
        f"(TRACEJIT_DISK_CACHE={os.environ['TRACEJIT_DISK_CACHE']}, "
        f"TRACEJIT_MIN_KERNEL_SIZE={os.environ['TRACEJIT_MIN_KERNEL_SIZE']}, "
        f"TRACEJIT_PREBUILT={os.environ['TRACEJIT_PREBUILT']})",
        f"- seed: {args.seed} (program i is `test_views_drawn.build(RandomChooser("
        f"random.Random(f\"{args.seed}:{{i}}\")))`; `--show i` prints it)",
        "",
        "| backend | programs | mismatches | of which tracejit raised | wall time |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['backend']} | {r['programs']} | {len(r['failing'])} | "
                     f"{r['crashes']} | {r['wall']:.0f} s ({r['programs'] / r['wall']:.1f}/s) |")
    for r in results:
        lines += ["", f"## {r['backend']}: {len(r['failing'])} mismatches", ""]
        if not r["failing"]:
            continue
        lines += ["First difference, by kind (programs):", ""]
        lines += [f"- {n} × {k}" for k, n in r["by_kind"].most_common()]
        lines += ["", "Failing programs: " + ", ".join(str(i) for i, _ in r["failing"][:300])
                  + (" ..." if len(r["failing"]) > 300 else ""), ""]
        lines += [f"Shrunk ({r['shrink_wall']:.0f} s), distinct programs by kind of their "
                  "first difference:", ""]
        for k, progs in sorted(r["shrunk"].items()):
            lines += [f"### {k}", ""]
            for source, (i, diffs) in progs.items():
                lines += [f"From program {i}:", "", "```python", source, "```", ""]
                lines += [f"- {d[:400]}" for d in diffs[:4]] + [""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=["reference", "cpu", "cuda"])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--reference", type=int, default=0,
                        help="also run this many programs on the reference backend")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--shrink", type=int, default=60, help="mismatches shrunk per backend")
    parser.add_argument("--show", type=int, help="print program SHOW of the seed and exit")
    parser.add_argument("--check", action="store_true",
                        help="with --show: also run it on --backend and print what differs")
    parser.add_argument("--ignore", help="a regular expression: differences whose text it "
                        "matches are not counted (to look past a known cause)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    global IGNORE
    IGNORE = re.compile(args.ignore) if args.ignore else None
    if args.show is not None:
        prog = draw(args.seed, args.show)
        print(prog.source())
        if args.check:
            print("\n".join(check(prog, args.backend)) or "no difference")
        return
    if args.backend == "cuda":
        import cudasim

        cudasim.install()
        cudasim.set_device_count(1)
    warnings.simplefilter("ignore", RuntimeWarning)
    np.seterr(all="ignore")
    runs = [(args.backend, args.programs)]
    if args.reference and args.backend != "reference":
        runs.insert(0, ("reference", args.reference))
    results = [explore(b, n, args.seed, args.jobs, args.shrink) for b, n in runs]
    out = args.out or ROOT / "bench" / "results" / (
        f"explore-views-{datetime.date.today().isoformat()}-{args.backend}.md")
    record(out, args, results)
    for r in results:
        print(f"{r['backend']}: {len(r['failing'])} mismatches in {r['programs']} programs "
              f"({r['wall']:.0f} s)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
