"""``tracejit.profile``: per-step call counts, times and bytes, per-function compile time,
and the table, on the reference and the CPU backend."""

import threading

import numpy as np
import pytest

import tracejit as tj

X = np.linspace(-1, 1, 8, dtype=np.float32)
NBYTES = X.nbytes


def chain(x, y):
    return np.tanh(x * y + 0.5) * np.exp(-x * x)


def double(x):
    return x * 2


LINE = chain.__code__.co_firstlineno + 1


@pytest.fixture(params=["reference", "cpu"])
def backend(request, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    return request.param


def test_counts_times_and_bytes(backend):
    f = tj.jit(chain, backend=backend)
    g = tj.jit(double, backend=backend)
    want = f(X, X)  # compiled before the block
    with tj.profile() as p:
        for _ in range(3):
            np.testing.assert_array_equal(f(X, X), want)
        for _ in range(2):
            g(X)  # compiled inside the block: still counted once per call
    by_name = {s.name: s for s in p.functions}
    assert by_name["chain"].calls == 3 and by_name["double"].calls == 2
    assert by_name["chain"].signature == "x: f32[8], y: f32[8]"
    assert all(s.compile_seconds > 0 for s in p.functions)
    assert p.seconds == pytest.approx(sum(s.seconds for s in p.functions))
    for s in p.steps:
        assert s.calls == by_name[s.function].calls
        assert s.nbytes > 0 and s.seconds > 0
        assert s.gbps == pytest.approx(s.nbytes * s.calls / s.seconds / 1e9)
    for name in by_name:
        spent = sum(s.seconds for s in p.steps if s.function == name)
        assert spent <= by_name[name].seconds
    (double_step,) = [s for s in p.steps if s.function == "double" and "multiply" in s.ops]
    assert double_step.nbytes >= 2 * NBYTES  # read x, write the result
    f(X, X)  # outside the block: not counted
    assert {s.name: s.calls for s in p.functions} == {"chain": 3, "double": 2}


def test_reference_profiles_every_node():
    with tj.profile() as p:
        tj.jit(chain, backend="reference")(X, X)
    steps = {s.name: s for s in p.steps}
    graph = tj.jit(chain, backend="reference").lower(X, X).optimized_graph
    assert sorted(steps) == sorted(f"node{k}" for k in range(len(graph.nodes)))
    for k, node in enumerate(graph.nodes):
        assert steps[f"node{k}"].ops == node.op
    muls = [s for s in p.steps if s.ops == "multiply"]
    assert muls and all(s.nbytes == 3 * NBYTES for s in muls)  # two f32[8] in, one out
    assert all(s.where == f"test_profile.py:{LINE}" for s in muls)


def test_cpu_profile_shares_compiled_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    f = tj.jit(chain, backend="cpu")
    f(X, X)
    with tj.profile() as p:
        f(X, X)
    (entry,) = f._cache.values()
    assert entry.profiled.namespace["kernel0"] is entry.runner.namespace["kernel0"]
    (kernel,) = [s for s in p.steps if s.name == "kernel0"]
    assert "tanh" in kernel.ops and "exp" in kernel.ops
    assert kernel.nbytes >= 3 * NBYTES  # x and y read, the result written


def test_table(backend):
    f = tj.jit(chain, backend=backend)
    with tj.profile() as p:
        f(X, X)
        f(X, X)
    text = str(p)
    assert text == p.table()
    lines = text.splitlines()
    assert lines[0].startswith("tracejit profile: 2 calls, ")
    assert "compiling them" in lines[0]
    header = next(line for line in lines if line.startswith("step"))
    for column in ("ops", "where", "calls", "total ms", "% time", "GB/s"):
        assert column in header
    rows = lines[lines.index(header) + 1:]
    assert rows and all(row.startswith("chain/") for row in rows)
    assert any(f"test_profile.py:{LINE}" in row and "tanh" in row for row in rows)
    times = [float(row.split()[-3]) for row in rows]
    assert times == sorted(times, reverse=True)
    assert "chain(x: f32[8], y: f32[8])" in text


def test_nested_profiles_and_threads():
    f = tj.jit(double)
    with tj.profile() as outer:
        f(X)
        with tj.profile() as inner:
            threads = [threading.Thread(target=f, args=(X,)) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert [s.calls for s in outer.functions] == [5]
    assert [s.calls for s in inner.functions] == [4]


def test_empty_profile_prints():
    with tj.profile() as p:
        pass
    assert str(p).startswith("tracejit profile: 0 calls")
    assert p.steps == [] and p.functions == []
