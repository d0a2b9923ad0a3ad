"""Run passes in order, verifying the graph after each and optionally dumping it.

``TRACEJIT_DUMP=1`` (or ``dump=True``) prints the graph after every pass to stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from ..ir import Graph, verify
from .dce import dce
from .loops import in_bodies, merge_scans
from .roll import roll_loops
from .simplify import simplify
from .stabilize import stabilize

Pass = Callable[[Graph], Graph]
# each runs inside loop bodies too (ir/loop_ops.py)
DEFAULT_PASSES: tuple[Pass, ...] = tuple(in_bodies(p) for p in (
    roll_loops, merge_scans, stabilize, simplify, dce))


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
