"""Dask backend: a graph called on ``dask.array`` arrays becomes a Dask computation whose
tasks run this project's compiled kernels, one chunk at a time.

``jit`` picks it when an argument is a Dask array (``import tracejit`` never imports
Dask). Its runner returns Dask arrays, lazy as Dask's own are; ``build.py`` splits the
graph into blockwise stages, Dask reductions and Dask's structural ops, and
``blocks.py`` is the function each blockwise task calls. The plan depends on the
arguments' chunks, so the runner builds it at each call (a few milliseconds) and the
compiled chunk kernels are what is kept (per process, and in the disk cache for workers).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Graph, Node
from ..base import PlannedStep, Runner


@dataclass(frozen=True)
class DaskBackend:
    """The Dask backend, its chunks' stages compiled with backend ``chunks`` (the one the
    function was jitted for: ``cpu``, or ``reference`` to run them on NumPy; CuPy chunks
    always run on ``cuda``)."""

    chunks: str = "cpu"
    name = "dask"
    device_kind = None
    exact = False  # partial results are combined in Dask's order, not NumPy's pairwise one
    passes = ()

    def compile(self, graph: Graph, profile: bool = False, interim: bool = False) -> Runner:
        from .build import Builder

        def run(*leaves) -> list:
            return Builder(graph, self.chunks).run(leaves)

        return Runner(run, [])

    def compile_later(self, graph: Graph):
        return None  # the chunk kernels compile when the plan is built (build.precompile)

    def supports(self, node: Node) -> bool:
        """Every op runs; a loop as one task over whole arrays, so Python loops are not
        rolled into one (``passes/roll.py`` asks with a scan)."""
        return node.op not in ("scan", "while_loop")

    def source(self, graph: Graph) -> str:
        return ("# Dask backend: the plan depends on the arguments' chunks; "
                "lower(*dask_arrays).plan shows it\n" + str(graph))

    def partition(self, graph: Graph) -> tuple[Graph, list]:
        return graph, []

    def planned_steps(self, graph: Graph) -> tuple[Graph, list[PlannedStep]]:
        """None known: the stages depend on the arguments' chunks (``lower().plan`` says
        them for the chunks lowered with), so pictures draw the graph without kernels."""
        return graph, []

    def plan(self, graph: Graph, leaves: list) -> str:
        """The stages ``graph`` runs as on arguments like ``leaves`` (Dask arrays give
        their chunks; nothing is computed), in words."""
        from .build import Builder

        builder = Builder(graph, self.chunks)
        builder.run(leaves)
        return "\n".join(builder.plan)


def on(chunks: str) -> DaskBackend:
    """The Dask backend running its chunks on backend ``chunks``."""
    return DaskBackend(chunks)
