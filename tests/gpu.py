"""The GPU the CUDA tests run on: CuPy's (TRACEJIT_TEST_REAL_GPU=1) or cudasim's emulated
one (tools/cudasim, which compiles the generated CUDA C with g++), shared by the test
files that need one."""

from __future__ import annotations

import contextlib
import os

from tracejit import targets

REAL = os.environ.get("TRACEJIT_TEST_REAL_GPU", "") not in ("", "0")


def forget_cupy() -> None:
    """Drop what tracejit cached about CuPy and the device count (the emulator's state
    changes between tests)."""
    targets._cupy.cache_clear()
    targets._gpu_count.cache_clear()


@contextlib.contextmanager
def cupy(monkeypatch, devices: int = 1, dask: bool = False):
    """CuPy (or its emulation with ``devices`` GPUs, and with ``dask`` what Dask's CuPy
    support needs), and a fresh device state afterwards."""
    monkeypatch.setattr(targets, "gpu_requested", False)
    if REAL:
        import cupy as real

        yield real
        return
    import cudasim

    with cudasim.installed(scheduler="fibers", dask=dask) as emulated:
        if devices != 1:
            cudasim.set_device_count(devices)
        forget_cupy()
        yield emulated
    forget_cupy()


def on_host(tree):
    """Results computed on the GPU, on the host (a tuple's items each; 0-d as scalars)."""
    import numpy as np

    import tracejit as tj

    if isinstance(tree, tuple):
        return tuple(on_host(t) for t in tree)
    out = tj.to_host(tree)
    return out[()] if isinstance(out, np.ndarray) and out.ndim == 0 else out
