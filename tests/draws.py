"""How many programs a drawn test draws: all of them under ``HYPOTHESIS_PROFILE=explore``
(the long runs outside CI, recorded in ``bench/results/``), a third in the repeatable runs
CI makes, which draw the same ones on every run (conftest.py)."""

from __future__ import annotations

import os

EXPLORE = os.environ.get("HYPOTHESIS_PROFILE") == "explore"


def examples(explored: int) -> int:
    """``explored`` examples in an explore run, a third of them (at least 10) in CI."""
    return explored if EXPLORE else max(10, explored // 3)
