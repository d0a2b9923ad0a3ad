"""Backends compile an optimised graph into an executable: ``compile(graph) -> callable``
taking the flattened input leaves and returning the list of output arrays."""

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
    raise InvalidArgument(
        f"unknown backend {name!r}", hint=f"choose one of {available_backends()}", location=None
    )


def available_backends() -> list[str]:
    return ["reference", "cpu"]
