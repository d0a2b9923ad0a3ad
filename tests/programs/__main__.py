"""``python -m tests.programs [--update] [--backends reference,cpu]``: run the corpus and
print how many programs run unchanged under jit; ``--update`` rewrites expected.py."""

from __future__ import annotations

import argparse
import os

# As in the test suite (tests/conftest.py): every kernel compiles, however small, so the
# table written here is the one the tests see.
os.environ.setdefault("TRACEJIT_MIN_KERNEL_SIZE", "0")

from .report import BACKENDS, collect, expected_table, summary, write_expected  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.programs", description=__doc__)
    parser.add_argument("--update", action="store_true",
                        help="rewrite tests/programs/expected.py from this run")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated backends (--update needs the default)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each outcome")
    args = parser.parse_args()
    backends = args.backends.split(",")
    if args.update and tuple(backends) != BACKENDS:
        parser.error("--update runs on every backend the tests use: leave out --backends")
    outcomes = collect(backends, verbose=args.verbose)
    print(summary(outcomes))
    if args.update:
        write_expected(expected_table(outcomes))
        print("wrote tests/programs/expected.py")


if __name__ == "__main__":
    main()
