"""Backends compile an optimised graph into an executable.

Each backend module has ``compile(graph, profile=False) -> run``, where ``run(*leaves)``
takes the flattened input leaves and returns the list of outputs; with ``profile`` the
runner describes its steps in ``run.steps`` and reports each step's time to
``record(step, seconds)`` (see ``profiler.py``); ``profiled(graph, run)`` builds that
variant for an already compiled runner. ``source(graph)`` is what ``lower().source`` shows.
"""

from __future__ import annotations

from types import ModuleType

from ..errors import InvalidArgument


def get_backend(name: str) -> ModuleType:
    if name == "reference":
        from . import reference

        return reference
    if name == "cpu":
        from . import cpu

        return cpu
    if name == "cuda":
        from . import cuda

        return cuda
    raise InvalidArgument(
        f"unknown backend {name!r}", hint=f"choose one of {available_backends()}", location=None
    )


def available_backends() -> list[str]:
    """The backends that can run here: ``cuda`` where CuPy sees a GPU."""
    from ..targets import devices

    return ["reference", "cpu"] + (["cuda"] if len(devices()) > 1 else [])
