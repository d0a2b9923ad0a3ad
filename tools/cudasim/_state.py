"""Process state of the emulated CUDA: devices, the current device per thread, counters."""

from __future__ import annotations

import os
import threading


class Stats:
    """What the emulated GPU did since the last ``reset()``: copies between host and device
    (``h2d``: ``cupy.asarray`` of host data; ``d2h``: ``ndarray.get()``), between devices
    (``d2d``), each with its bytes, kernel launches (``kernels``: their names, in order) and
    the options of each ``compile_using_nvrtc`` (``nvrtc_options``).
    Copies that stay on one device (``astype``, ``copy``, results of library calls) are not
    transfers and are not counted."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.h2d = self.h2d_bytes = 0
            self.d2h = self.d2h_bytes = 0
            self.d2d = self.d2d_bytes = 0
            self.launches = 0
            self.kernels: list[str] = []
            self.nvrtc_options: list[tuple[str, ...]] = []

    @property
    def transfers(self) -> int:
        """Copies that crossed the bus (host to device, device to host, device to device)."""
        return self.h2d + self.d2h + self.d2d

    def _count(self, kind: str, nbytes: int) -> None:
        with self._lock:
            setattr(self, kind, getattr(self, kind) + 1)
            setattr(self, f"{kind}_bytes", getattr(self, f"{kind}_bytes") + int(nbytes))

    def _launch(self, name: str) -> None:
        with self._lock:
            self.launches += 1
            self.kernels.append(name)

    def __repr__(self) -> str:
        return (f"Stats(h2d={self.h2d} ({self.h2d_bytes} B), d2h={self.d2h} ({self.d2h_bytes} B), "
                f"d2d={self.d2d} ({self.d2d_bytes} B), launches={self.launches})")


stats = Stats()

_device_count = 1
_local = threading.local()


def set_device_count(n: int) -> None:
    """How many GPUs ``cupy.cuda.runtime.getDeviceCount()`` reports (0: it raises
    ``CUDARuntimeError``, as CuPy does on a machine without a GPU)."""
    global _device_count
    if int(n) < 0:
        raise ValueError("device count must be >= 0")
    _device_count = int(n)


def device_count() -> int:
    return _device_count


def current() -> int:
    """The calling thread's current device (0 until a ``cupy.cuda.Device`` block)."""
    return getattr(_local, "device", 0)


def set_current(index: int) -> None:
    _local.device = index


def push(index: int) -> None:
    """Enter a ``Device`` block (blocks nest per thread; one Device object may be entered
    by several threads at once)."""
    _local.__dict__.setdefault("saved", []).append(current())
    _local.device = index


def pop() -> None:
    _local.device = _local.saved.pop()


SCHEDULERS = ("threads", "fibers")


def env_scheduler() -> str:
    """The scheduler the environment asks for: ``CUDASIM_SCHEDULER``, else ``"fibers"``
    (deterministic and about 100 times faster; ``threads`` is for hunting races)."""
    return os.environ.get("CUDASIM_SCHEDULER") or "fibers"


_scheduler = env_scheduler()


def set_scheduler(name: str) -> None:
    """How kernels run a block's threads: ``"fibers"`` (user-level contexts on the
    launching thread; the default) or ``"threads"`` (one OS thread each: truly concurrent,
    so it can show a data race, but about 100 times slower). ``reset()`` goes back to
    :func:`env_scheduler`."""
    global _scheduler
    if name not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, not {name!r}")
    _scheduler = name


def scheduler() -> str:
    return _scheduler


_deadlock_seconds = float(os.environ.get("CUDASIM_DEADLOCK_SECONDS", "2"))


def set_deadlock_seconds(seconds: float) -> None:
    """Scheduler "threads": a launch whose live threads all sleep at barriers this long,
    with no progress, fails as a deadlock (fibers detect one at once)."""
    global _deadlock_seconds
    _deadlock_seconds = float(seconds)


def deadlock_seconds() -> float:
    return _deadlock_seconds


def reset() -> None:
    """Counters to zero, one device, device 0 current in the calling thread, the scheduler
    and the deadlock timeout as the environment sets them."""
    stats.reset()
    set_device_count(1)
    set_current(0)
    set_scheduler(env_scheduler())
    set_deadlock_seconds(float(os.environ.get("CUDASIM_DEADLOCK_SECONDS", "2")))
