"""Devices: parsing, the per-thread ``tj.device`` stack, and what is missing when a GPU
is asked for. Where a test needs a GPU to exist, it stands CuPy's device count in; running
on a GPU (real or emulated) is tested in test_cuda.py.
"""

import threading

import numpy as np
import pytest

import tracejit as tj
from tracejit import targets
from tracejit.errors import BackendUnavailable, InvalidArgument


@pytest.fixture
def two_gpus(monkeypatch):
    """Pretend CuPy is installed and sees two GPUs; forget afterwards that any was asked for."""
    monkeypatch.setattr(targets, "_cupy", lambda: object())
    monkeypatch.setattr(targets, "_gpu_count", lambda: 2)
    monkeypatch.setattr(targets, "gpu_requested", False)


@pytest.mark.parametrize("spec, want", [("cpu", "cpu"), ("CUDA", "cuda:0"), ("cuda:1", "cuda:1"),
                                        (" gpu:2 ", "cuda:2"), (tj.Device("cuda", 3), "cuda:3")])
def test_parse(spec, want):
    assert str(targets.parse(spec)) == want


@pytest.mark.parametrize("spec", ["tpu", "cuda:x", "cpu:1", "", 3])
def test_unknown_devices_raise_at_the_users_line(spec):
    with pytest.raises(InvalidArgument, match="unknown device") as info:
        tj.device(spec)
    assert info.value.location.filename == __file__


def test_without_cupy_asking_for_a_gpu_says_cupy_is_missing(monkeypatch):
    monkeypatch.setattr(targets, "_cupy", lambda: None)
    monkeypatch.setattr(targets, "_gpu_count", lambda: 0)
    assert tj.devices() == [targets.CPU]
    for ask in (lambda: tj.device("cuda"), lambda: tj.to_device(np.ones(2), "cuda")):
        with pytest.raises(BackendUnavailable, match="needs CuPy, which is not installed"):
            ask()


def test_cupy_without_a_gpu_and_a_missing_index(monkeypatch):
    monkeypatch.setattr(targets, "_cupy", lambda: object())
    monkeypatch.setattr(targets, "_gpu_count", lambda: 0)
    with pytest.raises(BackendUnavailable, match="sees no CUDA GPU"):
        tj.device("cuda")
    monkeypatch.setattr(targets, "_gpu_count", lambda: 2)
    with pytest.raises(BackendUnavailable, match=r"cuda:2 does not exist: this machine has 2"):
        tj.device("cuda:2")


def test_blocks_nest_per_thread(two_gpus):
    assert tj.default_device() == targets.CPU
    seen = []
    with tj.device("cuda:1") as outer:
        assert outer == tj.default_device() == tj.Device("cuda", 1)
        with tj.device("cpu"):
            assert tj.default_device() == targets.CPU
            other = threading.Thread(target=lambda: seen.append(tj.default_device()))
            other.start()
            other.join()
        assert tj.default_device() == outer
    assert tj.default_device() == targets.CPU and seen == [targets.CPU]
    assert tj.devices() == [targets.CPU, tj.Device("cuda", 0), tj.Device("cuda", 1)]


def test_the_cpu_path_never_looks_for_cupy(monkeypatch):
    def no(*_):
        raise AssertionError("CuPy was looked up on the CPU path")

    monkeypatch.setattr(targets, "_cupy", no)
    x = np.arange(3.0)
    with tj.device("cpu"):
        np.testing.assert_array_equal(tj.jit(lambda x: x + 1, backend="reference")(x), x + 1)
    assert tj.to_device(x, "cpu") is x and tj.to_host(x) is x
    np.testing.assert_array_equal(tj.to_host([1.0, 2.0]), [1.0, 2.0])
