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
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import BackendUnavailable, InvalidArgument


@dataclass(frozen=True)
class Device:
    """A place where jitted code runs and arrays live: the CPU or one CUDA GPU.

    Anything that takes a device also takes its name (``"cpu"``, ``"cuda"``,
    ``"cuda:1"``); ``str`` of a Device is that name. Frozen and hashable: it is part of
    a call's cache key.

    Attributes:
        kind: ``"cpu"`` or ``"cuda"``.
        index: The GPU's number among those CuPy sees (0 for the CPU).

    Example:
        >>> tj.Device("cuda", 1)
        Device('cuda:1')
        >>> str(tj.Device("cuda", 1))
        'cuda:1'
        >>> tj.default_device() == tj.Device("cpu")
        True
    """

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
    """``"cpu"``, ``"cuda"`` (GPU 0), ``"cuda:N"`` or a :class:`Device`; ``"gpu"`` and
    ``"gpu:N"`` are other spellings of ``"cuda"`` and ``"cuda:N"``."""
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
        self.entries: list[tuple[Device, bool]] = []  # (device, strict), innermost last


_stack = _Stack()


def device(spec: str | Device, *, strict: bool = False
           ) -> contextlib.AbstractContextManager[Device]:
    """Run the jitted calls in this ``with`` block (this thread) on a device.

    Blocks nest like any context manager and are per thread; a ``jit(device=...)``
    overrides them for its function. Outputs stay where they were computed (CuPy
    arrays from a GPU): nothing is copied back implicitly.

    Args:
        spec: The device: ``"cpu"``, ``"cuda"`` (GPU 0), ``"cuda:N"`` or a :class:`Device`
            (``"gpu"``/``"gpu:N"`` mean the same as ``"cuda"``/``"cuda:N"``).
        strict: Compiling a function with an op the device cannot run raises
            PlacementError instead of running that op on the CPU with a
            PlacementWarning (Theano's ``assert_no_cpu_op``).

    Returns:
        A context manager whose ``with ... as d`` gives the :class:`Device`.

    Raises:
        InvalidArgument: An unknown device name (raised at the ``with`` line).
        BackendUnavailable: A GPU asked for on a machine without CuPy, without a
            visible GPU, or with fewer GPUs than ``N``; the message says which.

    Example:
        >>> with tj.device("cpu") as d:
        ...     print(repr(d), repr(tj.default_device()))
        Device('cpu') Device('cpu')
        >>> tj.device("cuda:99")
        Traceback (most recent call last):
            ...
        tracejit.errors.BackendUnavailable: ...
    """
    global gpu_requested
    dev = parse(spec)
    check_available(dev)
    gpu_requested = gpu_requested or dev.kind != "cpu"
    return _entered(dev, strict)


@contextlib.contextmanager
def _entered(dev: Device, strict: bool) -> Iterator[Device]:
    _stack.entries.append((dev, strict))
    try:
        yield dev
    finally:
        _stack.entries.pop()


def default_device() -> Device:
    """The device of the innermost ``tj.device`` block of this thread, else the CPU.

    Returns:
        The device a jitted call made here would run on (unless its ``jit`` names
            one), a :class:`Device`.

    Example:
        >>> tj.default_device()
        Device('cpu')
    """
    return _stack.entries[-1][0] if _stack.entries else CPU


def requested() -> tuple[Device, bool]:
    """(device, strict) of the innermost ``tj.device`` block of this thread."""
    return _stack.entries[-1] if _stack.entries else (CPU, False)


def devices() -> list[Device]:
    """The devices of this machine: the CPU, then each GPU CuPy sees.

    Asking does not import CuPy when it is not installed.

    Returns:
        A list of :class:`Device`, the CPU first.

    Example:
        >>> tj.devices()[0]
        Device('cpu')
    """
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


def to_device(x: Any, spec: str | Device) -> Any:
    """``x`` as an array on a device: a NumPy array for the CPU, a CuPy array for a GPU.

    An array put on a GPU stays there between calls (Theano's ``shared``): jitted
    functions given it run there and give GPU arrays back.

    Args:
        x: An array (NumPy, CuPy, or anything ``np.asarray`` takes).
        spec: The device: ``"cpu"``, ``"cuda"`` (GPU 0), ``"cuda:N"`` or a :class:`Device`
            (``"gpu"``/``"gpu:N"`` mean the same as ``"cuda"``/``"cuda:N"``).

    Returns:
        The array on that device; ``x`` itself when it is already there.

    Raises:
        InvalidArgument: An unknown device name.
        BackendUnavailable: A GPU asked for on a machine without CuPy, without a
            visible GPU, or with fewer GPUs than ``N``; the message says which.

    Example:
        >>> x = np.ones(3)
        >>> tj.to_device(x, "cpu") is x
        True
    """
    dev = parse(spec)
    if dev.kind == "cpu":
        return to_host(x)
    check_available(dev)
    cupy = _cupy()
    with cupy.cuda.Device(dev.index):
        return cupy.asarray(x)


def to_host(x: Any) -> np.ndarray:
    """``x`` as a NumPy array, copied from the GPU if it lives there.

    Args:
        x: An array (NumPy, CuPy, or anything ``np.asarray`` takes).

    Returns:
        A NumPy array; ``x`` itself when it is one.

    Example:
        >>> tj.to_host([1, 2])
        array([1, 2])
    """
    if isinstance(x, np.ndarray):
        return x
    if _is_cupy(x):
        return x.get()
    return np.asarray(x)


def device_of(x) -> Device | None:
    """The device holding array ``x``: the CPU for a NumPy array, ``cuda:N`` for a CuPy
    array; None for anything else (scalars included)."""
    if isinstance(x, np.ndarray):
        return CPU
    if _is_cupy(x):
        index = x.device.id
        gpu = _GPUS.get(index)
        if gpu is None:
            gpu = _GPUS[index] = Device("cuda", index)
        return gpu
    return None


_GPUS: dict[int, Device] = {}  # cuda:N, made once: device_of runs on every GPU call


def cupy_array_type() -> type | None:
    """``cupy.ndarray`` once CuPy is imported (no CuPy array exists before), else None."""
    cupy = sys.modules.get("cupy")
    return None if cupy is None else cupy.ndarray


@dataclass(frozen=True)
class Chunked:
    """Where a Dask array argument lives: in ``chunks`` (Dask's tuple of chunk sizes per
    axis), on the GPU where its chunks are CuPy arrays. Part of a call's signature: the
    plan depends on it (``backends/dask``)."""

    chunks: tuple[tuple[int, ...], ...]
    gpu: bool = False


def dask_array(x) -> bool:
    """Whether ``x`` is a ``dask.array.Array``, without importing Dask (no Dask array can
    exist before Dask is imported)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


def chunked(x) -> Chunked:
    """The ``Chunked`` of Dask array ``x``; InvalidArgument where its chunk sizes are
    unknown (after a boolean mask, say), which no plan can be made for."""
    if any(np.isnan(n) for c in x.chunks for n in c):
        raise InvalidArgument(
            "a Dask array with unknown chunk sizes",
            hint="call x.compute_chunk_sizes() (or give the sizes to from_delayed) first")
    return Chunked(tuple(tuple(int(n) for n in c) for c in x.chunks),
                   type(x._meta).__module__.startswith("cupy"))


def _is_cupy(x) -> bool:
    """Whether ``x`` is a CuPy array, without importing CuPy (no CuPy array can exist
    before CuPy is imported)."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def synchronize(spec: str | Device | None = None) -> None:
    """Wait for the kernels launched on a GPU (``spec``, else every GPU) to finish.

    Jitted calls on a GPU return as soon as their kernels are queued, as CuPy's do:
    time them with a synchronize at the end. On the CPU nothing is queued, and without
    CuPy imported there is nothing to wait for.

    Args:
        spec: The device: ``"cpu"``, ``"cuda"`` (GPU 0), ``"cuda:N"`` or a
            :class:`Device`; None waits for every GPU.

    Raises:
        InvalidArgument: An unknown device name.
        BackendUnavailable: A GPU asked for on a machine without CuPy, without a
            visible GPU, or with fewer GPUs than ``N``; the message says which.

    Example:
        >>> tj.synchronize()
        >>> tj.synchronize("cpu")
    """
    if spec is None:
        if sys.modules.get("cupy") is None:
            return
        devs = devices()[1:]
    else:
        devs = [parse(spec)]
    for dev in devs:
        if dev.kind != "cpu":
            check_available(dev)
            _cupy().cuda.Device(dev.index).synchronize()


@functools.cache
def _cupy():
    if "cupy" in sys.modules:
        return sys.modules["cupy"]
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
