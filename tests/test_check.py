"""Checking mode (``jit(f, check=True)`` / ``check="nan"``) and internal compiler errors.

Faults are injected here, by the tests: a CPU op template that computes the wrong thing,
a pass or code generator that raises. Nothing in tracejit itself is broken on purpose.
"""

import inspect
import os
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit import api, check
from tracejit.backends import get_backend
from tracejit.backends.cpu import ops as cpu_ops
from tracejit.errors import (
    IndexOutOfBounds,
    InternalCompilerError,
    InvalidArgument,
    KernelMismatch,
    NonFiniteValue,
)

RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 24)).astype(np.float32)
W = RNG.standard_normal((24, 16)).astype(np.float32)
B = RNG.standard_normal(16).astype(np.float32)


def layer(x, w, b):
    h = np.tanh(x @ w + b)  # a matmul library step, then a loop kernel
    centred = h - h.mean(axis=1, keepdims=True)
    return centred / np.sqrt((centred * centred).sum(axis=1, keepdims=True) + 1), h.max()


def line_of(fn, text: str) -> int:
    """The line of ``fn``'s source (in this file) that contains ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_check_passes_on_a_correct_program_on_the_cpu():
    checked = tj.jit(layer, backend="cpu", check=True)
    got = checked(X, W, B)
    want = tj.jit(layer, backend="reference")(X, W, B)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    _, steps = get_backend("cpu").partition(checked.lower(X, W, B).optimized_graph)
    kinds = [k.kind for k in steps]
    assert "library" in kinds and "loop" in kinds and len(steps) >= 3


def test_check_finds_a_broken_kernel_and_writes_a_reproducer(monkeypatch):
    def f(x, y):
        z = np.exp(x) * 2
        return (z - y).sum(axis=0)  # the faulty op

    monkeypatch.setitem(cpu_ops._ANY, "subtract", "({0} + {1})")  # the injected fault
    x, y = X[:4, :5], X[4:8, :5]
    with pytest.raises(KernelMismatch) as info:
        tj.jit(f, backend="cpu", check=True)(x, y)
    e = info.value
    message = str(e)
    assert "subtract" in message and "kernel" in message and "largest error" in message
    assert f"test_check.py:{line_of(f, 'the faulty op')}" in message
    assert "at index" in message
    repro = Path(e.reproducer)
    assert repro.is_dir() and str(repro) in message
    assert repro.parent == Path(os.environ["TRACEJIT_CACHE_DIR"]) / "reproducers"
    with np.load(repro / "inputs.npz") as inputs:
        assert any(np.array_equal(inputs[k], y) for k in inputs.files)
    with np.load(repro / "arguments.npz") as arguments:
        np.testing.assert_array_equal(arguments["x"], x)
    assert "subtract" in (repro / "ir.txt").read_text()
    assert "+" in (repro / "source.txt").read_text()


def test_a_plain_function_does_not_share_entries_with_a_checked_one(monkeypatch):
    def f(x, y):
        return x - y

    monkeypatch.setitem(cpu_ops._ANY, "subtract", "({0} + {1})")
    x = np.arange(3.0)
    plain = tj.jit(f, backend="cpu")
    np.testing.assert_array_equal(plain(x, x), 2 * x)  # the fault, silently
    with pytest.raises(KernelMismatch):
        tj.jit(f, backend="cpu", check=True)(x, x)
    np.testing.assert_array_equal(plain(x, x), 2 * x)  # its own entry, unchecked


def nan_maker(x):
    y = x * 3
    return np.log(x - 1) + y  # log of a negative number


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_check_nan_names_the_op_and_the_line(backend):
    f = tj.jit(nan_maker, backend=backend, check="nan")
    with pytest.raises(NonFiniteValue) as info:
        f(np.array([0.5, 2.0]))
    message = str(info.value)
    assert "log" in message and "nan" in message
    assert f"test_check.py:{line_of(nan_maker, 'np.log')}" in message
    assert isinstance(info.value, FloatingPointError)


def test_check_nan_lets_a_nan_input_flow_through():
    f = tj.jit(nan_maker, backend="cpu", check="nan")
    got = f(np.array([np.nan, 2.0]))
    assert np.isnan(got[0]) and got[1] == 6.0
    assert f(np.array([3.0]))[0] == np.log(2.0) + 9.0


def test_the_environment_sets_the_default_mode(monkeypatch):
    monkeypatch.setenv("TRACEJIT_CHECK", "nan")
    with pytest.raises(NonFiniteValue):
        tj.jit(nan_maker)(np.array([0.5, 2.0]))
    monkeypatch.setenv("TRACEJIT_CHECK", "1")
    monkeypatch.setitem(cpu_ops._ANY, "subtract", "({0} + {1})")
    with pytest.raises(KernelMismatch):
        tj.jit(lambda a: a - 1.5, backend="cpu")(np.arange(4.0))
    assert tj.jit(lambda a: a - 1.5, backend="cpu", check=False)(np.arange(4.0))[0] == 1.5
    monkeypatch.setenv("TRACEJIT_CHECK", "sometimes")
    with pytest.raises(InvalidArgument, match="checking mode"):
        tj.jit(nan_maker)


def test_grad_with_check():
    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    x64, w64 = X.astype(np.float64), W.astype(np.float64)
    got = tj.grad(loss, check=True, backend="cpu")(w64, x64)
    want = tj.grad(loss, backend="reference")(w64, x64)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    got = tj.jit(tj.grad(loss), check=True, backend="cpu")(w64, x64)  # jit of grad
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_check_on_the_emulated_gpu(monkeypatch):
    cudasim = pytest.importorskip("cudasim")
    from tracejit import targets

    monkeypatch.setattr(targets, "gpu_requested", False)
    with cudasim.installed(scheduler="fibers"):
        cudasim.set_device_count(1)
        targets._cupy.cache_clear()
        targets._gpu_count.cache_clear()
        try:
            x = X[:8, :8]
            got = tj.jit(lambda a: np.exp(a) - a.sum(axis=-1), device="cuda", check=True)(x)
            want = np.exp(x) - x.sum(axis=-1)
            np.testing.assert_allclose(tj.to_host(got), want, rtol=1e-5, atol=1e-5)
            with pytest.raises(NonFiniteValue, match="log"):
                tj.jit(nan_maker, device="cuda", check="nan")(np.array([0.5, 2.0]))
        finally:
            targets._cupy.cache_clear()
            targets._gpu_count.cache_clear()


# ---------------------------------------------------------------- internal errors


def _assert_internal(info, name: str, signature: str, *files: str) -> Path:
    message = str(info.value)
    assert f"{name}({signature})" in message and "bug in tracejit" in message
    assert "report" in message
    repro = Path(info.value.reproducer)
    assert str(repro) in message
    for f in ("arguments.npz", "traceback.txt", *files):
        assert (repro / f).is_file(), f
    return repro


def test_a_failing_pass_is_an_internal_compiler_error(monkeypatch):
    def scaled(x, k):
        return x * k + 1

    def broken(graph):
        raise KeyError("a pass bug")

    f = tj.jit(scaled, backend="cpu")
    x = np.arange(6.0).reshape(2, 3)
    monkeypatch.setattr(api, "run_pipeline", broken)
    with pytest.raises(InternalCompilerError) as info:
        f(x, 2.0)
    repro = _assert_internal(info, "scaled", "x: f64[2,3], k: f64[]~", "traced.ir.txt")
    assert isinstance(info.value.__cause__, KeyError)
    assert "KeyError" in (repro / "traceback.txt").read_text()
    with np.load(repro / "arguments.npz") as arguments:
        np.testing.assert_array_equal(arguments["x"], x)
    assert f.cache_info().signatures == 0
    monkeypatch.undo()
    np.testing.assert_array_equal(f(x, 2.0), x * 2 + 1)


def test_generated_code_that_does_not_compile_is_an_internal_compiler_error(monkeypatch):
    def g(x):
        return x * x - 1

    monkeypatch.setitem(cpu_ops._ANY, "multiply", "({0} * undefined_name_q)")
    f = tj.jit(g, backend="cpu")
    x = np.arange(5.0, dtype=np.float32)
    with pytest.raises(InternalCompilerError) as info:
        f(x)
    repro = _assert_internal(info, "g", "x: f32[5]", "ir.txt", "source.txt")
    assert "undefined_name_q" in (repro / "source.txt").read_text()
    assert info.value.__cause__ is not None
    assert f.cache_info().signatures == 0
    monkeypatch.undo()
    np.testing.assert_array_equal(f(x), x * x - 1)


def test_errors_of_the_users_program_pass_through():
    def bad(x):
        raise ValueError("the user's own bug")

    with pytest.raises(ValueError, match="the user's own bug") as info:
        tj.jit(bad)(np.ones(2))
    assert not isinstance(info.value, InternalCompilerError)

    def gather(x, i):
        return x[i]

    with pytest.raises(IndexOutOfBounds):
        tj.jit(gather, backend="cpu")(np.ones(3), np.array([5]))


def test_a_reproducer_goes_to_a_temporary_directory_when_the_cache_is_unwritable(
        monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(blocker))
    path = Path(check.write_reproducer("f", {"arguments": {"x": np.arange(3)}},
                                       {"ir.txt": "def f(): ..."}))
    assert path.is_dir() and not str(path).startswith(str(blocker))
    assert (path / "ir.txt").read_text() == "def f(): ..."
    with np.load(path / "arguments.npz") as a:
        np.testing.assert_array_equal(a["x"], np.arange(3))
