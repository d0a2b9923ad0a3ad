"""Backends compile an optimised graph into a :class:`Runner`.

Each backend is a module implementing the :class:`Backend` protocol (``base.py``):
``compile(graph, profile=False) -> Runner``, ``supports(node)`` for placement,
``source(graph)`` for ``lower().source``, ``partition(graph)`` for ``check=True``,
``planned_steps(graph)`` for ``lower().render()``'s pictures, and the facts ``jit``
needs to pick and drive it (``device_kind``, ``exact``, ``passes``).
"""

from __future__ import annotations

from ..errors import InvalidArgument
from .base import Backend, DiskCacheInfo, PlannedStep, Runner, StepTime

__all__ = ["Backend", "DiskCacheInfo", "PlannedStep", "Runner", "StepTime",
           "available_backends", "get_backend"]


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (imported on first use: ``import tracejit`` imports
    no code generator)."""
    if name == "reference":
        from . import reference

        return reference
    if name == "cpu":
        from . import cpu

        return cpu
    if name == "cuda":
        from . import cuda

        return cuda
    if name == "dask":  # chosen by Dask array arguments, not by name
        from . import dask

        return dask
    raise InvalidArgument(
        f"unknown backend {name!r}", hint=f"choose one of {available_backends()}", location=None
    )


def available_backends() -> list[str]:
    """The backends that can run here: ``cuda`` where CuPy sees a GPU.

    ``reference`` (NumPy interprets the graph) and ``cpu`` (Numba) are always there;
    ``jit(backend=...)`` takes any of them.

    Returns:
        The backend names, ``["reference", "cpu"]`` plus ``"cuda"`` on a GPU machine.

    Example:
        >>> tj.available_backends()[:2]
        ['reference', 'cpu']
    """
    from ..targets import devices

    return ["reference", "cpu"] + (["cuda"] if len(devices()) > 1 else [])
