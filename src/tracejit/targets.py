"""Devices: where jitted code runs and where arrays live.

``with tj.device("cuda"):`` (or ``"cuda:1"``, ``"cpu"``) sets the device for the calls in
the block, per thread, nesting like any context manager; ``tj.default_device()`` is the
innermost one (the CPU outside every block). ``tj.devices()`` lists what this machine has.
``tj.to_device(x, "cuda")`` puts an array on a GPU to stay there between calls (Theano's
``shared``); ``tj.to_host(x)`` brings it back. Nothing is ever copied back implicitly.

Asking for a GPU on a machine without CuPy or without a visible GPU raises
:class:`~tracejit.errors.BackendUnavailable` saying which is missing. CuPy is imported only
when a CUDA device is asked for, never on the CPU path.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .errors import BackendUnavailable, InvalidArgument


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" or "cuda"
    index: int = 0

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"


CPU = Device("cpu")

# Set once anything asks for a GPU (a tj.device block, jit(device=...)): until then a
# jitted call skips looking up the device, which costs its fast path nothing.
gpu_requested = False


def parse(spec: str | Device) -> Device:
    """``"cpu"``, ``"cuda"`` (GPU 0), ``"cuda:N"`` or a :class:`Device`."""
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, str):
        kind, _, index = spec.strip().lower().partition(":")
        if kind == "cpu" and not index:
            return CPU
        if kind in ("cuda", "gpu") and (not index or index.isdigit()):
            return Device("cuda", int(index or 0))
    raise InvalidArgument(f"unknown device {spec!r}",
                          hint='use "cpu", "cuda" or "cuda:N" (see tracejit.devices())')


class _Stack(threading.local):
    def __init__(self):
        self.devices: list[Device] = []


_stack = _Stack()


def device(spec: str | Device) -> contextlib.AbstractContextManager[Device]:
    """Run the jitted calls in this block (this thread) on ``spec``. An unknown or
    missing device raises here, at the ``with`` line."""
    global gpu_requested
    dev = parse(spec)
    check_available(dev)
    gpu_requested = gpu_requested or dev.kind != "cpu"
    return _entered(dev)


@contextlib.contextmanager
def _entered(dev: Device) -> Iterator[Device]:
    _stack.devices.append(dev)
    try:
        yield dev
    finally:
        _stack.devices.pop()


def default_device() -> Device:
    """The innermost ``tj.device`` of this thread, else the CPU."""
    return _stack.devices[-1] if _stack.devices else CPU


def devices() -> list[Device]:
    """The devices of this machine: the CPU, then each GPU CuPy sees."""
    return [CPU, *(Device("cuda", i) for i in range(_gpu_count()))]


def check_available(dev: Device) -> None:
    """Raise :class:`BackendUnavailable` unless ``dev`` exists here."""
    if dev.kind == "cpu":
        return
    if _cupy() is None:
        raise BackendUnavailable(
            f"{dev} needs CuPy, which is not installed",
            hint="pip install 'tracejit[cuda13]' (or [cuda] for CUDA 12), or stay on the CPU")
    count = _gpu_count()
    if count == 0:
        raise BackendUnavailable(f"{dev}: CuPy is installed but sees no CUDA GPU",
                                 hint="check nvidia-smi and CUDA_VISIBLE_DEVICES")
    if dev.index >= count:
        raise BackendUnavailable(f"{dev} does not exist: this machine has {count} GPU(s)",
                                 hint=f"use cuda:0 ... cuda:{count - 1}")


def to_device(x, spec: str | Device):
    """``x`` as an array on ``spec``: a NumPy array for the CPU, a CuPy array for a GPU.
    Returns ``x`` itself when it is already there."""
    dev = parse(spec)
    if dev.kind == "cpu":
        return to_host(x)
    check_available(dev)
    cupy = _cupy()
    with cupy.cuda.Device(dev.index):
        return cupy.asarray(x)


def to_host(x) -> np.ndarray:
    """``x`` as a NumPy array (copied from the GPU if it lives there)."""
    if isinstance(x, np.ndarray):
        return x
    get = getattr(x, "get", None)  # a CuPy array
    if get is not None and type(x).__module__.startswith("cupy"):
        return get()
    return np.asarray(x)


@functools.cache
def _cupy():
    from importlib.util import find_spec

    if find_spec("cupy") is None:
        return None
    import cupy

    return cupy


@functools.cache
def _gpu_count() -> int:
    cupy = _cupy()
    if cupy is None:
        return 0
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # CUDARuntimeError: no driver, no device
        return 0
