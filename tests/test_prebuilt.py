"""Prebuilt programs: a first call that compiles nothing, with the compiled kernels' bits.

A map kernel over float32 or float64 can run as a program of the prebuilt kernels
(``backends/cpu/prebuilt.py``) while the compile workers build it. The claim that makes this
a ``compile="sync"`` tier is that a program gives the compiled kernel's bits, so every test
here compares the two bit for bit (NaN payloads, signed zeros, subnormals), on values that
reach the ops' special cases; the kernels themselves are checked against NumPy elsewhere.
"""

import functools
import json
import logging
import operator
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.backends import cpu
from tracejit.backends.cpu import codegen, prebuilt
from tracejit.errors import DiskCacheWarning
from tracejit.ir import REGISTRY, Kind, Node, Value
from tracejit.ir.types import TensorType

WAIT = 120  # seconds for a background compile (a cold worker imports Numba first)
FLOATS = [np.float32, np.float64]


@pytest.fixture(scope="module", autouse=True)
def machines(tmp_path_factory):
    """The prebuilt library: the installed one, or where that is not current (the backend
    was edited after the install) one built for this module's tests."""
    if prebuilt.machines() is not None:
        yield prebuilt.machines()
        return
    directory = tmp_path_factory.mktemp("prebuilt")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRACEJIT_PREBUILT_DIR", str(directory))
    prebuilt.machines.cache_clear()
    prebuilt.build(directory)
    yield prebuilt.machines()
    mp.undo()
    prebuilt.machines.cache_clear()


def same_bits(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    as_int = {4: np.int32, 8: np.int64}[want.dtype.itemsize]
    np.testing.assert_array_equal(got.view(as_int), want.view(as_int))


def values(dtype, shape, seed: int) -> np.ndarray:
    """Values of every magnitude, with the special ones the math's branches handle."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, info.tiny,
               info.tiny / 8, -info.tiny / 8, info.max, -info.max, info.eps, 88.72, -103.98,
               709.8, -745.2, 20.0, -20.0, 1e-30, 3.0, -2.5, 1.5e6, 0.999, -1.001]
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)).astype(dtype)
        x[rng.permutation(n)[:min(n, len(special))]] = np.array(special[:n]).astype(dtype)
    return x.reshape(shape)


def on_both(fn, *args) -> list[tuple[np.ndarray, np.ndarray]]:
    """``fn``'s outputs on its prebuilt programs and on its compiled kernels, in pairs."""
    f = tj.jit(fn)
    compiled = f(*args)
    compiled = list(compiled) if isinstance(compiled, (tuple, list)) else [compiled]
    runner = cpu.programs_runner(f.lower(*args).optimized_graph)
    assert runner is not None, "every kernel should be a program"
    with np.errstate(all="ignore"):
        programs = runner(*args)
    return list(zip(programs, compiled, strict=True))


def opcodes(runner) -> set[int]:
    """The instruction codes the programs of ``runner`` execute."""
    found = set()
    for name, kernel in runner.namespace.items():
        if name.startswith("kernel") and isinstance(kernel, prebuilt.Program):
            rows = kernel.code[prebuilt.HEADER:].reshape(-1, prebuilt.WIDTH)
            found |= {int(c) for c in rows[:, 0]}
    return found


def every_op(x, y, s):
    """Each op of the programs once (its instruction does not depend on where its operands
    come from: the loads are checked below), and ``power`` with a 0-d exponent too (its
    expression takes sqrt for an exponent of 0.5)."""
    out = []
    for op in prebuilt.OPS:
        f = getattr(np, op)
        out.append(f(x) if REGISTRY[op].ufunc.nin == 1 else f(x, y))
    return [*out, np.power(x, s), x ** 0.5]


@pytest.mark.parametrize("dtype", FLOATS, ids=["float32", "float64"])
def test_every_instruction_gives_the_kernels_bits(dtype):
    x, y = values(dtype, (700,), 1), values(dtype, (700,), 2)
    args = (x, y, np.asarray(0.5, dtype))
    for got, want in on_both(every_op, *args):
        same_bits(got, want)
    runner = cpu.programs_runner(tj.jit(every_op).lower(*args).optimized_graph)
    assert set(prebuilt.machines()[np.dtype(dtype)].patterns.values()) <= opcodes(runner)


def test_large_kernels_run_on_the_team_with_the_same_bits():
    x, y = values(np.float32, (1 << 18,), 4), values(np.float32, (1 << 18,), 5)
    chain = lambda x, y: np.tanh(x * y + .5) * np.exp(-x * x) + np.sqrt(np.abs(y))
    for got, want in on_both(chain, x, y):
        same_bits(got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=["float32", "float64"])
def test_every_way_of_reading_an_operand(dtype):
    """Arrays whole, a trailing tile (a bias row), a 0-d float32 array (cast up in a
    float64 kernel), a Python float, a weak int, a float constant and a literal exponent."""
    x = values(dtype, (64, 33), 6)
    b = values(dtype, (33,), 7)
    s = np.asarray(1.25, np.float32)

    def layer(x, b, s, w):
        return (np.tanh(x * s + b) * w, np.maximum(x, b) - 1, np.exp(b * 0.5 + x),
                (x / w) ** 3, 2.0 - s * x)

    for got, want in on_both(layer, x, b, s, 2.0):
        same_bits(got, want)


OPS = list(prebuilt.OPS)


@st.composite
def chains(draw):
    """A chain of up to 8 steps over arrays, a trailing tile, a 0-d array, a Python float
    and constants, on shapes with equal, size-1 and size-0 dimensions, every step's result
    flowing on."""
    dtype = draw(st.sampled_from(FLOATS))
    rows, cols = draw(st.sampled_from([(1, 1), (3, 3), (5, 1), (1, 7), (4, 300), (17, 17),
                                       (0, 4), (3, 0)]))
    steps = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99),
                                    st.integers(0, 99), st.sampled_from(
                                        ["array", "tile", "0-d", "python", "constant"])),
                          min_size=1, max_size=8))
    seed = draw(st.integers(0, 2 ** 16))
    return dtype, (rows, cols), steps, seed


def _run_chain(steps, x, y, b, s, w):
    live = [x, y]
    for op, i, j, kind in steps:
        f, a = getattr(np, op), live[i % len(live)]
        if REGISTRY[op].ufunc.nin == 1:
            live.append(f(a))
            continue
        other = {"array": live[j % len(live)], "tile": b, "0-d": s, "python": w,
                 "constant": 0.75}[kind]
        live.append(f(a, other) if j % 2 else f(other, a))
    return live[2:]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(chains())
def test_drawn_chains_give_the_kernels_bits(chain):
    dtype, shape, steps, seed = chain
    x, y = values(dtype, shape, seed), values(dtype, shape, seed + 1)
    b, s = values(dtype, shape[1:], seed + 2), np.asarray(values(dtype, (2,), seed + 3)[1])
    fn = functools.partial(_run_chain, steps)
    fn.__name__ = "chain"
    for got, want in on_both(fn, x, y, b, s, -1.75):
        same_bits(got, want)


# ---------------------------------------------------------------------- what stays compiled

def _cannot(fn, *args) -> None:
    assert cpu.programs_runner(tj.jit(fn).lower(*args).optimized_graph) is None


def test_kernels_that_cannot_be_programs():
    x = np.ones((8, 8), np.float32)
    _cannot(lambda x: (x * 2).sum(axis=1), x)  # a reduction
    _cannot(lambda x: np.cumsum(x * 2, axis=1), x)  # a scan
    _cannot(lambda x: x * 3 + 1, np.ones(8, np.int64))  # ints
    _cannot(lambda x: np.where(x > 0, x, 0.1 * x), x)  # a bool value
    _cannot(lambda x, y: x * y + 1, x, np.ones((8, 8)))  # float32 and float64 arrays
    _cannot(lambda x: x[:, 1:] * 2 + x[:, :-1], x)  # slices read in their base
    _cannot(lambda x, c: x * c + c, x, np.ones((8, 1), np.float32))  # a column broadcast
    many = [np.full(8, i, np.float32) for i in range(prebuilt.REGISTERS + 1)]
    _cannot(lambda *xs: functools.reduce(operator.add, xs) * 2, *many)  # too many values


def test_every_float_kernel_op_is_an_instruction_or_a_decision():
    """Each elementwise op the CPU backend computes in float32 and float64 kernels either
    has an instruction or is written down here with the reason it has none."""
    not_instructions = {
        "clip": "three operands, and its bounds' constancy changes its expression",
        "where": "a bool operand: the machines hold one float dtype",
        "convert": "a cast between dtypes",
    }
    bool_valued = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                   "logical_and", "logical_or", "logical_xor", "logical_not", "isnan",
                   "isinf", "isfinite", "signbit"}
    rarer = {"floor_divide", "remainder", "fmod", "arcsinh", "arccosh", "arctanh", "cbrt",
             "degrees", "radians", "rad2deg", "deg2rad", "heaviside", "nextafter",
             "spacing", "logaddexp2", "fabs", "conjugate", "float_power", "ldexp",
             "sigmoid", "erf", "matmul"}
    for op, opdef in REGISTRY.items():
        if opdef.kind is not Kind.ELEMENTWISE or opdef.ufunc is None:
            continue
        for dtype in map(np.dtype, FLOATS):
            node = prebuilt._synthetic(op, dtype, (False,) * opdef.ufunc.nin)
            try:
                if not codegen.fusible(node):
                    continue
            except TypeError:  # NumPy has no float loop for it (invert, gcd, ...)
                continue
            assert (op in prebuilt.OPS or op in not_instructions or op in bool_valued
                    or op in rarer), f"{op} ({dtype}): no instruction and no decision"
            if op in prebuilt.OPS:
                assert prebuilt._opcode(node, dtype, prebuilt.machines()[dtype].patterns) \
                    is not None, op


def test_a_library_of_other_sources_is_not_used(monkeypatch):
    monkeypatch.setattr(prebuilt, "key", lambda: "another build")
    prebuilt.machines.cache_clear()
    try:
        assert prebuilt.machines() is None
        _cannot(lambda x: x * 2 + 1, np.ones(8))
    finally:
        monkeypatch.undo()
        prebuilt.machines.cache_clear()
    assert prebuilt.machines() is not None


def test_a_damaged_library_is_not_loaded(monkeypatch, tmp_path):
    """The library is machine code: its bytes are checked against the hash its index
    recorded when it was built, and a damaged copy (first bytes zeroed) is removed with a
    warning rather than loaded; first calls then compile."""
    import shutil

    copy = Path(shutil.copytree(prebuilt.folder(), tmp_path / "prebuilt"))
    (library,) = copy.glob("prebuilt-*.so")
    data = bytearray(library.read_bytes())  # (damaged before anything loads it: a loaded
    data[:64] = bytes(64)  # library written over in place crashes the process at exit)
    library.write_bytes(bytes(data))
    monkeypatch.setenv("TRACEJIT_PREBUILT_DIR", str(copy))
    prebuilt.machines.cache_clear()
    try:
        with pytest.warns(DiskCacheWarning, match="do not match the hash"):
            assert prebuilt.machines() is None
        assert not library.exists()
        _cannot(lambda x: x * 2 + 1, np.ones(8))
    finally:
        monkeypatch.undo()
        prebuilt.machines.cache_clear()
    assert prebuilt.machines() is not None


def test_a_program_reads_what_the_kernel_reads():
    """The program of ``tanh(x * 0.5 + b)``: loads of x, of the tile b and of the constant,
    then the three instructions, the result stored, in registers no op both reads and
    writes (LLVM's alias check would keep such a loop from vectorising)."""
    x, b = np.ones((4, 6)), np.ones(6)
    graph = tj.jit(lambda x, b: np.tanh(x * 0.5 + b)).lower(x, b).optimized_graph
    runner = cpu.programs_runner(graph)
    (program,) = [k for n, k in runner.namespace.items() if n.startswith("kernel")]
    rows = program.code[prebuilt.HEADER:].reshape(-1, prebuilt.WIDTH)
    codes = [int(c) for c in rows[:, 0]]
    assert sorted(codes[:3]) == sorted([prebuilt.LOAD, prebuilt.TILE, prebuilt.FILL64])
    assert codes[-1] == prebuilt.STORE and len(codes) == 7
    for _, d, a, b_, _ in rows[3:6]:
        assert d not in (a, b_)
    assert rows[list(codes).index(prebuilt.TILE)][4] == 6  # the tile's size


# ---------------------------------------------------------------------- the tier

@pytest.fixture
def programs_on(tmp_path, monkeypatch, caplog):
    """Programs on, nothing compiled yet (in memory or on disk), the compile log kept."""
    from tracejit.backends.cpu import kernels

    monkeypatch.setattr(tj.config, "prebuilt", True)
    monkeypatch.setattr(kernels, "_compiled", {})
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))
    caplog.set_level(logging.INFO, logger="tracejit")
    return caplog


def chain(x, y):
    return np.tanh(x * y + .5) * np.exp(-x * x) + np.sqrt(np.abs(y))


def test_a_sync_first_call_runs_programs_then_the_kernels(programs_on):
    x, y = values(np.float32, (3000,), 8), values(np.float32, (3000,), 9)
    workers_before = cpu.stats().in_workers
    f = tj.jit(chain)
    with np.errstate(all="ignore"):
        first = f(x, y)
    messages = [r.getMessage() for r in programs_on.records]
    assert any("1 kernel on prebuilt programs" in m for m in messages), messages
    assert f.wait_compiled(WAIT)
    with np.errstate(all="ignore"):
        same_bits(f(x, y), first)
    messages = [r.getMessage() for r in programs_on.records]
    assert any("runs compiled kernels now" in m for m in messages), messages
    assert cpu.stats().in_workers > workers_before  # compiled by a worker, not here
    assert f.cache_info().misses == 1


def test_calls_from_many_threads_across_the_switch(programs_on):
    x, y = values(np.float64, (5000,), 10), values(np.float64, (5000,), 11)
    f = tj.jit(chain)
    with np.errstate(all="ignore"):
        want = f(x, y)
    results, errors = [], []

    def calls():
        try:
            for _ in range(50):
                with np.errstate(all="ignore"):
                    results.append(f(x, y))
        except Exception as e:  # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for t in threads:
        t.start()
    assert f.wait_compiled(WAIT)
    for t in threads:
        t.join()
    assert not errors, errors
    for got in results:
        same_bits(got, want)


def test_what_cannot_be_a_program_waits_for_its_kernels(programs_on):
    f = tj.jit(lambda x: (np.exp(x) * 2).sum())
    f(np.ones(100))
    messages = [r.getMessage() for r in programs_on.records]
    assert not any("prebuilt" in m for m in messages), messages
    assert any("1 kernel compiled" in m for m in messages), messages


def test_only_a_first_call_of_jit_runs_programs(programs_on):
    """``jit`` switches from an interim runner to its ``faster`` one; other callers of the
    backend (a Dask stage, ``check=True``'s steps) keep the runner they get, so they get
    compiled kernels."""
    x = np.ones(64)
    graph = tj.jit(chain).lower(x, x).optimized_graph
    assert cpu.compile(graph).disk_cache.prebuilt == 0
    assert cpu.compile(graph, interim=True).disk_cache.prebuilt == 0  # compiled just now
    other = tj.jit(lambda x: np.exp(x) * 3.0).lower(x).optimized_graph
    assert cpu.compile(other, interim=True).disk_cache.prebuilt == 1


def test_without_workers_a_first_call_waits_for_its_kernels(programs_on, monkeypatch):
    monkeypatch.setattr(tj.config, "compile_workers", 0)
    tj.jit(chain)(np.ones(64), np.ones(64))
    messages = [r.getMessage() for r in programs_on.records]
    assert not any("prebuilt" in m for m in messages), messages


def test_the_setting_reads_the_environment():
    out = subprocess.run([sys.executable, "-c", "import tracejit; print(tracejit.config)"],
                         env={**os.environ, "TRACEJIT_PREBUILT": "off"}, capture_output=True,
                         text=True, check=True).stdout
    assert "prebuilt=False" in out


def test_a_fresh_process_runs_its_first_call_without_numba(tmp_path):
    """What a new user's first call does, with an empty disk cache: no Numba in the
    process (its import alone takes 0.2 s), the programs' answer, then the kernels'."""
    script = textwrap.dedent("""
        import json, logging, sys
        import numpy as np
        import tracejit as tj
        log = []
        class Keep(logging.Handler):
            def emit(self, record):
                log.append(record.getMessage())
        logging.getLogger("tracejit").addHandler(Keep())
        logging.getLogger("tracejit").setLevel(logging.INFO)
        x = np.linspace(-3, 3, 1 << 20, dtype=np.float32)
        f = tj.jit(lambda x, y: np.tanh(x * y + .5) * np.exp(-x * x) + np.sqrt(np.abs(y)))
        first = f(x, x)
        numba = "numba" in sys.modules
        compiled = f.wait_compiled(WAIT)
        print(json.dumps({"numba": numba, "compiled": compiled, "log": log,
                          "same": bool(np.array_equal(f(x, x), first))}))
    """).replace("WAIT", str(WAIT))
    env = {**os.environ, "TRACEJIT_CACHE_DIR": str(tmp_path), "TRACEJIT_PREBUILT": "1",
           "TRACEJIT_PREBUILT_DIR": str(prebuilt.folder())}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=WAIT + 60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not report["numba"]
    assert report["compiled"] and report["same"]
    assert any("on prebuilt programs" in m for m in report["log"]), report["log"]


def test_programs_share_nothing_with_the_graph():
    """A program is made from the kernel alone: two functions with the same kernel make
    the same program (the instructions name no graph, no step and no batch size but the
    kernel's own extents)."""
    a = tj.jit(lambda x: np.exp(x) * 2.0 + 1.0).lower(np.ones(10)).optimized_graph
    b = tj.jit(lambda y: np.exp(y) * 2.0 + 1.0).lower(np.ones(20)).optimized_graph
    code_a, code_b = (next(k.code for n, k in cpu.programs_runner(g).namespace.items()
                           if n.startswith("kernel")) for g in (a, b))
    np.testing.assert_array_equal(code_a, code_b)


def test_the_synthetic_nodes_are_what_the_kernels_compute():
    """An instruction's expression is ``NUMBA.expr`` of a node of its op and dtype, the
    text a kernel renders; a node whose operands need a cast first is not one of them."""
    f32 = np.dtype(np.float32)
    node = Node("add", (Value(TensorType((4,), f32)), Value(TensorType((), np.dtype(
        np.float64), weak=True))), {}, Value(TensorType((4,), f32)), None)
    patterns = prebuilt.machines()[f32].patterns
    assert prebuilt._opcode(node, f32, patterns) == patterns["({0} + {1})"]
    mixed = Node("add", (Value(TensorType((4,), f32)), Value(TensorType((4,), np.dtype(
        np.float64)))), {}, Value(TensorType((4,), np.dtype(np.float64))), None)
    assert prebuilt._opcode(mixed, f32, patterns) is None
