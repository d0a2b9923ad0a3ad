"""Run passes in order, verifying the graph after each and optionally dumping it.

``TRACEJIT_DUMP=1`` (or ``dump=True``) prints the graph after every pass to stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from ..ir import Graph, verify
from .batch import batch_maps
from .dce import dce
from .hoist import hoist
from .loops import in_bodies, merge_scans
from .residuals import residuals
from .roll import roll_loops
from .simplify import simplify
from .stabilize import stabilize

Pass = Callable[[Graph], Graph]
# Each runs inside loop bodies too (ir/loop_ops.py), innermost first. roll_loops turns
# unrolled Python loops into scans before anything else sees them. merge_scans finds
# autodiff's copy of a loop by its unchanged body, and residuals pairs a backward loop with
# its forward one by their bodies, so both run before hoist and batch_maps change bodies;
# simplify tidies the reshapes those leave.
DEFAULT_PASSES: tuple[Pass, ...] = tuple(in_bodies(p) for p in (
    roll_loops, merge_scans, stabilize, residuals, hoist, batch_maps, simplify, dce))


def run_pipeline(
    graph: Graph, passes: Sequence[Pass] = DEFAULT_PASSES, *, dump: bool | None = None
) -> Graph:
    if dump is None:
        dump = os.environ.get("TRACEJIT_DUMP", "") not in ("", "0")
    verify(graph)
    if dump:
        print(f"--- {graph.name}: traced\n{graph}", file=sys.stderr)
    for p in passes:
        graph = verify(p(graph))
        if dump:
            print(f"--- {graph.name}: after {p.__name__}\n{graph}", file=sys.stderr)
    return graph
