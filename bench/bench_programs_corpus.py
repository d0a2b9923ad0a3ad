"""The corpus of tests/programs timed: NumPy against tracejit's cached call, per program.

    PYTHONPATH=src python bench/bench_programs_corpus.py            # print the table
    PYTHONPATH=src python bench/bench_programs_corpus.py --write    # and update RESULTS.md
    PYTHONPATH=src python bench/bench_programs_corpus.py -k jacobi  # names containing jacobi

Each program that runs under ``jit`` on the CPU backend (checked against NumPy first, as
tests/test_programs.py does) is timed on its test-sized arguments: NumPy's call and the
jitted function's cached call, best of 5 repeats. The ratio is tracejit's time over NumPy's
(below 1.00x: tracejit is faster) and the summary is its geometric mean. Programs writing
into their arguments are called on the same arguments again and again (both sides alike).
The sizes are the tests' (hundreds to thousands of elements), so this measures per-call
overhead and unrolled loops more than bandwidth. tracejit runs with its default settings,
under which kernels this small run as NumPy calls on the first calls and the small kernels
that compute NumPy's bits exactly are compiled meanwhile (each program is timed once
that is done: ``wait_compiled``); ``--compile-all`` compiles every kernel at once
(``tracejit.config.min_kernel_size = 0``, as the tests do).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

import numpy as np
from bench_cpu import machine_line, timeit, write_section

import tracejit as tj

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests.programs
from tests.programs import PROGRAMS  # noqa: E402
from tests.programs.check import copy_tree, outcome  # noqa: E402


def run(cases) -> str:
    lines = ["| program | NumPy | tracejit | tracejit / NumPy |", "|---|---|---|---|"]
    ratios, skipped = [], []
    for case in cases:
        failure = outcome(case, "jit", "cpu")
        if failure:
            skipped.append(case.name)
            continue
        jitted = tj.jit(case.fn, backend="cpu")
        args = copy_tree(case.args())
        with np.errstate(all="ignore"):
            jitted(*args, **case.kwargs)
        jitted.wait_compiled()  # the runner users get once the small kernels compile
        with np.errstate(all="ignore"):
            ours = timeit(functools.partial(jitted, *args, **case.kwargs), number=20, repeat=5)
            theirs = timeit(functools.partial(case.fn, *args, **case.kwargs), number=20,
                            repeat=5)
        ratios.append(ours / theirs)
        lines.append(f"| {case.name} | {theirs * 1e6:.1f} us | {ours * 1e6:.1f} us | "
                     f"{ours / theirs:.2f}x |")
    if ratios:
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        lines.append(f"\nGeometric mean of tracejit / NumPy over {len(ratios)} programs: "
                     f"{mean:.2f}x.")
    if skipped:
        lines.append(f"\nNot timed (not running under jit yet): {len(skipped)} programs.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("-k", default="", help="only programs whose name contains this")
    parser.add_argument("--compile-all", action="store_true",
                        help="compile every kernel, however small")
    args = parser.parse_args()
    if args.compile_all:
        tj.config.min_kernel_size = 0
    cases = [c for c in PROGRAMS if args.k in c.name]
    text = (machine_line() + " Cached calls, best of 5 repeats of 20 calls, the corpus's "
            "test-sized arguments, " + ("every kernel compiled" if args.compile_all else
                                        "default kernel-size threshold") + ".\n\n" + run(cases))
    print(text)
    if args.write:
        write_section("bench-programs-corpus", "The tests/programs corpus against NumPy (CPU)",
                      text)


if __name__ == "__main__":
    main()
