"""The CPU backend: fusion decisions, each loop-nest shape, library fallbacks, errors.

Semantics are covered by running the registry and surface tests on this backend; here
the point is what gets fused and that every kind of generated kernel computes right.
"""

import itertools
import os

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends.cpu import native
from tracejit.backends.cpu.codegen import fusible
from tracejit.backends.cpu.emitter import PARALLEL_MIN_SIZE
from tracejit.backends.cpu.ops import NUMBA
from tracejit.ir.registry import REGISTRY, monoid_of
from tracejit.passes.contract import split_skinny_matmuls
from tracejit.passes.fusion import LOOP_REDUCTIONS, fuse

RNG = np.random.default_rng(0)


def kernels(fn, *args):
    """The kernels the CPU backend makes of ``fn``'s graph (codegen splits skinny matmuls)."""
    return fuse(split_skinny_matmuls(tj.jit(fn).lower(*args).optimized_graph), fusible)


def check(fn, *args, rtol=1e-6, atol=1e-6):
    got = tj.jit(fn, backend="cpu")(*args)
    want = fn(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


def chain(x, y):
    return np.tanh(x * y + 0.5) * np.exp(-x * x) + np.sqrt(np.abs(y))


X = RNG.standard_normal((7, 33)).astype(np.float32)


def test_elementwise_chain_is_one_kernel():
    ks = kernels(chain, X, X)
    assert [k.kind for k in ks] == ["loop"] and len(ks[0].outputs) == 1


def test_softmax_is_one_row_kernel():
    (k,) = kernels(softmax, X)
    assert k.kind == "loop" and k.rows == (1,)
    assert [n.op for n in k.reductions] == ["max", "sum"]


def test_siblings_share_one_kernel_with_several_outputs():
    def f(x):
        return np.exp(x), np.sin(x), (x * x).sum(axis=0)

    (k,) = kernels(f, X)
    assert len(k.outputs) == 3


def test_bias_and_activation_fuse_after_matmul():
    W, b = RNG.standard_normal((33, 5)).astype(np.float32), np.ones(5, np.float32)
    ks = kernels(lambda x, w, b: np.tanh(x @ w + b), X, W, b)
    assert [k.kind for k in ks] == ["library", "loop"]
    assert [n.op for n in ks[1].nodes] == ["add", "tanh"]


def test_smaller_shapes_are_not_recomputed_per_element():
    b = RNG.standard_normal(33).astype(np.float32)
    ks = kernels(lambda x, b: x + np.exp(b), X, b)
    assert [k.shape for k in ks] == [(33,), (7, 33)]


@pytest.mark.parametrize("fn", [softmax, logsumexp, chain], ids=lambda f: f.__name__)
def test_row_and_map_kernels(fn):
    args = (X,) if fn is not chain else (X, X[::-1].copy())
    check(fn, *args)


def test_scatter_reductions_over_leading_and_mixed_axes():
    def f(x):
        return x.sum(axis=0), x.max(axis=0), (x > 0).any(axis=0), (x * x).sum(), x.min()

    check(f, X)
    i = RNG.integers(-9, 9, (4, 5, 6)).astype(np.int32)
    check(lambda a: (a.sum(axis=(0, 2)), a.prod(axis=1), (a != 0).all(axis=2)), i)


def test_zero_d_and_broadcasting_and_weak_scalars():
    check(lambda x, s: (x * s + np.float32(1)).sum() * s, np.float32(2.5), 3.0)
    check(lambda x, b: (x + b[:, None]) * 2, X, X[:, 0].copy())
    # broadcast inputs are read unbroadcast: zero-stride views would stop vectorisation
    src = tj.jit(lambda x, b: x + b, backend="cpu").lower(X, X[0].copy()).source
    assert "x1[i1]" in src and "bcast" not in src
    check(lambda x: x[::2, 1::3] * x[::2, 1::3], X)  # strided views as kernel inputs


def test_integer_and_bool_semantics():
    a = RNG.integers(-50, 50, 64).astype(np.int32)
    b = RNG.integers(-5, 5, 64).astype(np.int32)
    check(lambda a, b: (a // b, a % b, a * b, a + b, a & b, ~a, a > b), a, b)
    check(lambda a: (a + 2**20) * 2**12, a)  # int32 wraps like NumPy


def test_parallel_kernels_above_the_threshold():
    n = PARALLEL_MIN_SIZE * 2
    x = RNG.standard_normal((n // 64, 64)).astype(np.float32)
    src = tj.jit(chain, backend="cpu").lower(x, x).source
    assert "for i0 in range(t * U(" in src and "parallel(kernel0, args)" in src
    check(chain, x, x)
    check(softmax, x)


def test_large_reductions_run_in_parallel_blocks():
    n = PARALLEL_MIN_SIZE * 2
    x = RNG.standard_normal((n // 64 + 3, 64)).astype(np.float32)  # blocks of uneven size
    x[5, 7] = np.nan  # NaN propagates through the partial maxima (and sums)

    def cols(x):
        return x.sum(axis=0), x.max(axis=0), (x * x).min(axis=0), (x > 1).any(axis=0)

    def total(x):
        return np.abs(x).max(), x.sum(), (x > 0).all()

    for fn in (cols, total):
        src = tj.jit(fn, backend="cpu").lower(x).source
        assert "for b in range(t * U(" in src and "barrier()" in src
        # (float32 sums of ~4000 terms of order 1 that cancel: absolute error ~1e-4, which
        # a column summing near 0.4 exceeds relatively, depending on the data drawn)
        check(fn, x, rtol=1e-4, atol=1e-3)
        check(fn, np.nan_to_num(x), rtol=1e-4, atol=1e-3)
    flat = RNG.standard_normal(n + 5).astype(np.float32)  # 1-D: lanes within each block
    check(lambda v: ((v * v).sum(), v.max(), v.min()), flat, rtol=1e-4)
    ints = RNG.integers(-1000, 1000, (n // 32 + 1, 32)).astype(np.int64)  # exact
    got = tj.jit(lambda a: (a.sum(axis=0), a.sum(), a.max(axis=0)), backend="cpu")(ints)
    for g, w in zip(got, (ints.sum(axis=0), ints.sum(), ints.max(axis=0)), strict=True):
        np.testing.assert_array_equal(g, w)


def test_sums_combined_by_the_runner_give_the_kernels_bits(monkeypatch):
    """A large kernel's partial sums over its first axis are folded by NumPy in the runner
    (``emitter.runner_combines``) rather than by thread 0 in the kernel: the same bits,
    block after block from the identity, for sums and products of floats and integers."""
    from tracejit.backends.cpu import emitter

    cols = emitter.RUNNER_COMBINE_KEPT
    rows = emitter.RUNNER_COMBINE_MIN // cols + 5  # blocks of uneven size
    x = RNG.standard_normal((rows, cols)).astype(np.float32) * np.float32(1e3)
    ints = RNG.integers(-1000, 1000, (rows, cols))

    def sums(x, i):
        return ((x * x).sum(axis=0), x.sum(axis=0), np.prod(x * 0 + np.float32(1.0001), axis=0),
                i.sum(axis=0), (x * 3).max(axis=0))

    combined = tj.jit(sums, backend="cpu")
    assert combined.lower(x, ints).source.count("_blocks, axis=0") == 4
    got = combined(x, ints)
    monkeypatch.setattr(emitter, "RUNNER_COMBINE_MIN", 1 << 62)  # thread 0 combines
    in_kernel = tj.jit(sums, backend="cpu")
    assert "_blocks, axis=0" not in in_kernel.lower(x, ints).source
    for a, b in zip(got, in_kernel(x, ints), strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_parallel_kernels_give_the_same_bits_on_one_thread(monkeypatch):
    """A parallel kernel run alone (``native.Launches`` picks that after a pause, when
    waking the thread team costs more than it saves) takes every share and block itself,
    in the same order: the same bits as on the team, reductions included."""
    n = PARALLEL_MIN_SIZE * 2
    x = RNG.standard_normal((n // 64 + 3, 64)).astype(np.float32)
    flat = RNG.standard_normal(n + 5).astype(np.float32)
    programs = [(chain, (x, x)), (softmax, (x,)),
                (lambda x: (x.sum(axis=0), x.max(axis=0), (x > 1).any(axis=0)), (x,)),
                (lambda x: (np.abs(x).max(), x.sum()), (x,)),
                (lambda v: ((v * v).sum(), v.min()), (flat,))]
    results = {}
    for alone in (False, True):
        monkeypatch.setattr(native.Launches, "choose_alone", lambda self, a=alone: a)
        results[alone] = [tj.jit(fn, backend="cpu")(*args) for fn, args in programs]
    for team, one in zip(results[False], results[True], strict=True):
        for a, b in zip(team if isinstance(team, tuple) else (team,),
                        one if isinstance(one, tuple) else (one,), strict=True):
            assert np.array_equal(a, b, equal_nan=True)


def test_launches_after_a_pause_run_the_way_they_measure_faster():
    """The team SAMPLES times, alone SAMPLES times, then the faster way, trying the other
    again every EXPLORE_EVERY launches."""
    def drive(launches, team_s, alone_s, count):
        ways = []
        for _ in range(count):
            alone = launches.choose_alone()
            launches.record(alone, alone_s if alone else team_s)
            ways.append(alone)
        return ways

    n, every, count = native.SAMPLES, native.EXPLORE_EVERY, 4 * native.EXPLORE_EVERY
    tries = sum(c % every < n for c in range(2 * n + 1, count + 1))
    cheap_wake = native.Launches()  # a kernel big enough to win back the wake-up
    ways = drive(cheap_wake, 60e-6, 120e-6, count)
    assert ways[:2 * n] == [False] * n + [True] * n
    assert sum(ways[2 * n:]) == tries  # on the team but for the tries
    costly_wake = native.Launches()  # exp of 230,400 float32 on a 2-core VM
    ways = drive(costly_wake, 90e-6, 64e-6, count)
    assert ways[2 * n:].count(False) == tries  # alone but for the tries


@pytest.mark.parametrize("op", sorted(LOOP_REDUCTIONS))
def test_numba_language_starts_and_folds_every_loop_reduction_as_its_monoid(op):
    """The kernels' identity literal and fold, evaluated as Python (the semantics Numba
    compiles), give the registry monoid's identity and its combining ufunc's result."""
    monoid = monoid_of(op)
    ufunc = REGISTRY[monoid.combine].ufunc
    for dt in map(np.dtype, (np.bool_, np.int32, np.int64, np.float32, np.float64)):
        if op in ("any", "all") and dt.kind != "b":
            continue  # their output is bool
        scope = {"np": np}
        assert eval(NUMBA.identity(op, dt), scope) == monoid.identity(dt)
        values = [dt.type(v) for v in (0, 1, 3, -2)] if dt.kind != "b" else [dt.type(0), dt.type(1)]
        if dt.kind == "f":
            values.append(dt.type(np.nan))
        fold = f"{NUMBA.dtype_name(dt)}({NUMBA.combine(op, 'a', 'b', dt)})"
        for a in values:
            for b in values:
                got = eval(fold, {**scope, "a": a, "b": b})
                want = ufunc(a, b).astype(dt)
                assert type(got) is dt.type and np.array_equal(got, want, equal_nan=True), \
                    (op, dt, a, b, got, want)


def test_skinny_matmuls_become_sums_inside_loop_kernels():
    a = RNG.standard_normal((300, 40)).astype(np.float32)
    w = RNG.standard_normal((40, 2)).astype(np.float32)
    d = RNG.standard_normal((300, 3)).astype(np.float32)

    def layer(a, w):  # the product's columns are row sums in the loop that computes tanh
        return np.tanh(a) @ w

    ks = kernels(layer, a, w)
    assert [k.kind for k in ks if k.kind == "loop"] == ["loop"]
    assert not any(n.op == "matmul" for k in ks for n in k.nodes)
    check(layer, a, w, rtol=1e-5)
    check(lambda a, d: np.tanh(a).T @ d, a, d, rtol=1e-5)  # column sums over a's own layout
    check(lambda a, d: d.T @ np.tanh(a), a, d, rtol=1e-5)  # a few rows of the result
    check(lambda a, w: (w.T @ a.T, a @ w[:, :1]), a, w, rtol=1e-5)  # no transpose; N == 1
    x64 = a.astype(np.float64)
    check(lambda a, b: a @ b, x64, RNG.standard_normal((40, 60)))  # wide: stays BLAS
    assert any(n.op == "matmul" for k in kernels(lambda a, b: a @ b, a, a.T.copy())
               for n in k.nodes)


def test_matrix_vector_products_of_arguments_stay_blas():
    """A skinny product whose wide operand is an argument is not split: a loop kernel would
    read the matrix as BLAS does, only slower (issue 13: (A @ x) @ A ran at 0.4x NumPy)."""
    A = RNG.standard_normal((300, 40))
    x = RNG.standard_normal(40)
    for fn in (lambda A, x: (A @ x) @ A, lambda A, x: A.T @ (A @ x),
               lambda A, x: np.tanh(A @ x), lambda A, x: A @ x[:, None] + 1):
        ks = kernels(fn, A, x)
        assert sum(n.op == "matmul" for k in ks for n in k.nodes) >= 1
        assert not any(n.op == "sum" for k in ks for n in k.nodes)
        check(fn, A, x, rtol=1e-12)
    # computed by elementwise work: the products still join the kernel that computes it
    ks = kernels(lambda A, x: np.tanh(A) @ x, A, x)
    assert not any(n.op == "matmul" for k in ks for n in k.nodes)


def test_cross_entropy_of_softmax_and_its_gradient_are_one_kernel():
    z = RNG.standard_normal((300, 4)).astype(np.float32)
    onehot = np.eye(4, dtype=np.float32)[RNG.integers(0, 4, 300)]

    def loss(z, y):
        return tj.nn.categorical_crossentropy(tj.nn.softmax(z), y).mean()

    value_and_grad = tj.value_and_grad(loss)
    ks = kernels(value_and_grad, z, onehot)
    assert [k.kind for k in ks].count("loop") == 2  # the rows, then the batch mean
    assert not [n for k in ks for n in k.nodes if n.op in ("broadcast_to", "reshape")]
    value, grad = tj.value_and_grad(loss, backend="cpu")(z, onehot)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(grad, (p - onehot) / 300, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(value, -np.log((p * onehot).sum(axis=1)).mean(), rtol=1e-5)


def test_library_fallbacks():
    idx = np.array([3, 0, -1])
    check(lambda x, i: x[i] * 2, X, idx)  # gather is a library step, the multiply a kernel
    check(lambda x: (x * 10).astype(np.int32), X)  # float->int stays with NumPy


def test_runtime_index_error_names_the_line():
    f = tj.jit(lambda x, i: x[i], backend="cpu")
    with pytest.raises(tj.errors.IndexOutOfBounds, match="test_cpu_backend.py"):
        f(X, np.array([99]))


def test_source_is_readable_python():
    src = tj.jit(softmax, backend="cpu").lower(X).source
    assert "def kernel(args)" in src and "kernel0(id(args))" in src and "def run(" in src
    assert "# max" in src
    compile(src, "<generated>", "exec")


def test_small_k_matmul_fuses_with_its_epilogue():
    def layer(x, w1, b1, w2):
        h = np.tanh(x @ w1 + b1)
        return h @ w2

    x = RNG.standard_normal((50, 2)).astype(np.float32)
    w1, w2 = RNG.standard_normal((2, 30)).astype(np.float32), X[:, :8].repeat(5, 0)[:30]
    b1 = RNG.standard_normal(30).astype(np.float32)
    ks = kernels(layer, x, w1, b1, w2)
    assert [k.kind for k in ks] == ["loop", "library"]  # K=2 unrolled; K=30, N=8: BLAS
    assert [n.op for n in ks[0].nodes] == ["matmul", "add", "tanh"]
    check(layer, x, w1, b1, w2, rtol=1e-5)


def log_softmax(x):
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("fn", [log_softmax, logsumexp], ids=lambda f: f.__name__)
def test_per_row_values_stay_in_the_row_kernel(fn):
    (k,) = [k for k in kernels(fn, X) if k.kind == "loop"]
    assert "log" in [n.op for n in k.nodes]  # log of the row sum, computed once per row
    check(fn, X)


def test_kernel_operands_of_any_layout_are_read_in_c_order():
    """Kernels read C-contiguous arrays; the runner converts what is not (a transposed
    argument, a big transposed intermediate, a non-native byte order)."""
    x = RNG.standard_normal((300, 400)).astype(np.float32)
    check(lambda a: np.tanh(a) * 2, x.T)  # a strided argument
    check(lambda a: np.exp(a.T) + 1, x)  # a library transpose (120,000 elements) feeding a kernel
    check(lambda a: a * a, x[:, ::3].astype(">f4"))  # big-endian, strided


def test_kernels_never_call_numbas_runtime():
    """A kernel that allocated through Numba's runtime could not run from its shared
    library without Numba: compiling its object code must fail loudly, not produce a
    library that crashes later (Numba's JIT runs it instead, in its process only)."""
    from tracejit.backends.cpu import compiler, diskcache

    source = """import numpy as np
from numba import types
from tracejit.backends.cpu.abi import cfunc


@cfunc(types.void(types.int64))
def kernel(n):
    np.empty(n).sum()
"""
    with pytest.raises(diskcache.NotCacheable, match="Numba runtime functions"):
        compiler.compile_objects(source, "<kernel>", ["kernel"])
    compiler.jit_kernel(source, "<kernel>")(3)


_LOCK_ORDER = """
import contextlib, threading, time
from tracejit.backends.cpu import compiler

head = ("from numba import types\\nfrom tracejit.backends.cpu.abi import cfunc\\n"
        "import numpy as np\\n")
runtime = head + "@cfunc(types.void(types.int64))\\ndef kernel(n):\\n    np.empty(n).sum()\\n"
plain = head + "@cfunc(types.void(types.int64))\\ndef kernel(n):\\n    pass\\n"
real, inside = compiler._llvm_opt_level, threading.Event()

@contextlib.contextmanager
def held(level):  # the JIT's compile pauses at its optimisation level
    with real(level):
        if threading.current_thread().name == "fallback":
            inside.set()
            time.sleep(0.5)  # while the caller's library compile begins
        yield

compiler._llvm_opt_level = held
fallback = threading.Thread(target=compiler.jit_kernel, args=(runtime, "<a>"), name="fallback")
fallback.start()
inside.wait()
compiler.compile_objects(plain, "<b>", ["kernel"])
fallback.join()
print("both compiled")
"""


def test_a_jit_fallback_and_a_library_compile_in_two_threads_both_finish(tmp_path):
    """A compile worker's failed kernel is compiled by Numba's JIT (``jit_kernel``) in the
    worker's driver thread while the caller may be compiling a library
    (``compile_objects``): the two took Numba's compiler lock and the optimisation-level
    lock in opposite orders and deadlocked (CI hung in ``test_numpy_more``). Forced here:
    the JIT compile pauses inside its optimisation level while the library compile
    starts. In a process of its own, so that a deadlock fails this test (its timeout),
    not the rest of the suite."""
    import subprocess
    import sys

    env = {**os.environ, "TRACEJIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _LOCK_ORDER], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "both compiled" in done.stdout, done.stderr


def test_the_collector_is_off_while_kernels_compile_and_restored_after(monkeypatch):
    """A compile pauses Python's cyclic collector (its full collections walk Numba's large
    heap); the collector comes back as it was: on if it was on, off if the user had it
    off, and on only once the last of two overlapping compiles ends."""
    import gc
    import threading

    from tracejit.backends.cpu import compiler

    seen = []

    def library(kernel):
        seen.append(gc.isenabled())
        raise RuntimeError("stop before Numba")

    monkeypatch.setattr(compiler, "compile_library", library)
    source = "from numba import types\nfrom tracejit.backends.cpu.abi import cfunc\n" \
             "kernel = cfunc(types.void(types.int64))(lambda n: None)\n"
    enabled = gc.isenabled()
    try:
        for user_setting in (gc.enable, gc.disable):
            user_setting()
            with pytest.raises(RuntimeError, match="stop before Numba"):
                compiler.compile_objects(source, "<kernel>", ["kernel"])
            assert gc.isenabled() == (user_setting is gc.enable)
        assert seen == [False, False]
        gc.enable()
        first_in, second_done = threading.Event(), threading.Event()

        def first():
            with compiler.collector_paused():
                first_in.set()
                second_done.wait()
                seen.append(gc.isenabled())  # the second compile ended: still off

        thread = threading.Thread(target=first)
        thread.start()
        first_in.wait()
        with compiler.collector_paused():
            assert not gc.isenabled()
        second_done.set()
        thread.join()
        assert seen[-1] is False and gc.isenabled()
    finally:
        (gc.enable if enabled else gc.disable)()


_KEPT: list = []  # method definitions made before a test cleared the cache: kept, as used


def test_threads_making_the_first_kernel_share_one_method_definition(monkeypatch):
    """A kernel's builtin points to the trampoline's method definition without holding it:
    two threads binding their first kernels at once (the caller and a compile worker's
    driver) must get the one kept for the process, not one freed under its builtin (a
    segfault some calls later)."""
    import threading
    import time

    from tracejit.backends.cpu import native

    build = native.built_c

    def slow_build(*args):  # the trampoline's build takes a while: both threads miss
        time.sleep(0.05)
        return build(*args)

    monkeypatch.setattr(native, "built_c", slow_build)
    _KEPT.append(native._launch_method())  # the earlier kernels' builtins point to it
    native._made_launch_method.cache_clear()
    start, made = threading.Barrier(4), []

    def first_kernel():
        start.wait()
        made.append(native._launch_method())

    threads = [threading.Thread(target=first_kernel) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 4 and all(m is made[0] for m in made)
    assert made[0] is native._launch_method()


@pytest.mark.parametrize("offset", ["ARRAY_DATA", "ARRAY_DIMENSIONS"])
def test_unexpected_struct_layout_is_refused(monkeypatch, offset):
    from tracejit.backends.cpu import native
    from tracejit.errors import BackendUnavailable

    monkeypatch.setattr(native, offset, getattr(native, offset) + 8)
    with pytest.raises(BackendUnavailable, match="struct offsets"):
        native.configure.__wrapped__()


def test_small_matmul_of_a_value_the_same_kernel_computes():
    """A small-K matmul reads its operands whole, so it cannot join the kernel that computes
    one of them (found by hypothesis: ``ravel(x // x) @ ravel(x // x)`` on a [1, 1] input)."""
    check(lambda x: np.ravel(x // x) @ np.ravel(x // x), np.array([[3.0]], np.float32))
    check(lambda x: (x * 2) @ (x.T * 3), RNG.standard_normal((5, 3)).astype(np.float32))


@pytest.mark.parametrize("fn", [
    lambda a, b: np.where(a + a, a, b), lambda a, b: (a + b) < a, lambda a, b: (a - b) > a,
    lambda a, b: (a * b) != 0, lambda a, b: -a < 0, lambda a, b: np.square(a) != 0,
    lambda a, b: np.abs(a) < 0, lambda a, b: (a + a).sum() == 0, lambda a, b: (a * b).prod(),
    lambda a, b: a // (b // b * -1),
], ids=["where-add", "add", "subtract", "multiply", "negative", "square", "absolute",
        "sum", "prod", "floor_divide"])
def test_int64_arithmetic_wraps_as_numpys_in_kernels(fn, monkeypatch):
    """int64 overflow wraps in NumPy; Numba's no-signed-wrap arithmetic let LLVM assume
    it never happens and fold ``(a + a) != 0`` into ``a != 0`` (found by an explore run of
    the differential tests: a silent wrong answer), so the CPU language computes int64
    arithmetic in uint64 (``ops._WRAP64``). ``INT64_MIN // -1`` wraps to INT64_MIN in
    NumPy; Numba's ``//`` gave 0 (found by a sweep of every op over edge values)."""
    monkeypatch.setattr(tj.config, "min_kernel_size", 0)  # a kernel even for 4 elements
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a = np.array([lo, hi, lo + 1, 3], np.int64)
    b = np.array([lo, 2, -1, 2 ** 62], np.int64)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(tj.jit(fn, backend="cpu")(a, b), fn(a, b))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("op", [np.floor_divide, np.remainder, np.fmod])
def test_integer_division_at_the_edges_is_numpys(op, dtype, backend):
    """Every pair of edge values: by zero (0), the minimum by -1 (NumPy wraps), by the
    maximum of an unsigned type (whose bits read as -1 in a signed comparison)."""
    info = np.iinfo(dtype)
    values = {0, 1, 2, 7, info.max, info.max - 1, info.min, info.min + 1}
    values |= {-1, -2, -7} if info.min < 0 else set()
    a, b = np.array(list(itertools.product(sorted(values), repeat=2)), dtype).T
    with np.errstate(all="ignore"):
        want = op(a, b)
        got = tj.jit(lambda a, b: op(a, b), backend=backend)(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_spacing_of_infinities_and_nans_keeps_numpys_nan_signs(dtype):
    """A compiled np.spacing gives NumPy's NaNs bit for bit in sign: positive for the
    infinities (x86's inf - inf, which the kernel once returned, is a negative NaN), the
    input NaN itself for a NaN of either sign."""
    x = np.array([-np.inf, np.inf, np.nan, -np.nan, 1.0, -0.0, 0.0, -3.0], dtype)
    got = tj.jit(np.spacing, backend="cpu")(x)
    want = np.spacing(x)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


_NAN = np.float64(np.nan)
_X = np.array([[-_NAN, _NAN, 1.5, -3.0], [5.0, -_NAN, 0.0, -0.0], [_NAN, 2.0, -_NAN, 9.0]])
_CLIP_CASES = {  # name: (function of x, or of x, lo, hi; the bounds' shapes)
    "python-nan-lo": (lambda x: np.clip(x, np.nan, 2.0), ()),
    "python-nan-hi": (lambda x: np.clip(x, -1.0, np.nan), ()),
    "numpy-negative-nan-lo": (lambda x: np.clip(x, -np.float32(np.nan), 2.0), ()),
    "both-nan": (lambda x: np.clip(x, -np.float64(np.nan), np.float64(np.nan)), ()),
    "zero-lo": (lambda x: np.clip(x, 0.0, 1.0), ()),
    "negative-zero-hi": (lambda x: np.clip(x, -1.0, -0.0), ()),
    "crossed-zeros": (lambda x: np.clip(x, 0.0, -0.0), ()),
    "0-d-arrays": (np.clip, ((), ())),
    "1x1-arrays": (np.clip, ((1, 1), (1,))),
    "1x1-and-0-d": (np.clip, ((1, 1), ())),
    "full-arrays": (np.clip, ((3, 4), (3, 4))),
    "column-arrays": (np.clip, ((3, 1), (3, 1))),
    "row-and-0-d": (np.clip, ((4,), ())),
}


@pytest.mark.parametrize("bounds", [(_NAN, 2.0), (-_NAN, _NAN), (0.0, 1.0), (-1.0, -0.0)],
                         ids=["nan-lo", "nans", "zero-lo", "zero-hi"])
@pytest.mark.parametrize("dtype,bound_dtype", [
    (np.float32, np.float32), (np.float64, np.float64), (np.float32, np.float64)])
@pytest.mark.parametrize("case", _CLIP_CASES)
def test_clip_is_numpys_bit_for_bit(case, dtype, bound_dtype, bounds, backend):
    """NumPy's clip loop for constant bounds (both of one element) returns a NaN bound
    itself and keeps x on a tie with a bound (-0.0 against 0.0); for other bounds it is
    ``minimum(maximum(x, lo), hi)``: the first NaN of x, lo, hi, and the bound on a tie.
    Kernels once always computed the second (found by an explore run of the later runner's
    same-bits test: ``np.clip(v, np.float32(nan), 2.0)`` of a NaN, -nan against +nan)."""
    fn, shapes = _CLIP_CASES[case]
    x = _X.astype(dtype)
    args = [x]
    for shape, value in zip(shapes, bounds, strict=False):
        values = [value, -value, 1.0] if value == value else [value, -value, 0.0]
        args.append(np.resize(np.array(values, bound_dtype), shape))
    want = fn(*args)
    got = tj.jit(fn, backend=backend)(*args)
    assert got.dtype == want.dtype
    uint = f"u{want.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(uint), want.view(uint))


@pytest.mark.parametrize("x_shape,lo_shape,hi_shape", [
    ((), (), ()), ((), (1,), (1, 1)), ((1,), (), ()), ((1,), (1,), (1,)),
    ((1,), (1, 1), ()), ((1, 1), (1, 1), ()), ((1, 1), (1,), (1,)), ((2,), (1,), (1, 1))])
@pytest.mark.parametrize("values", [
    (-_NAN, _NAN, 2.0, np.float32), (-0.0, 0.0, 1.0, np.float32),
    (0, -0.0, 1.0, np.int32), (-0.0, 0.0, 1.0, np.float64)],
    ids=["nan", "zero", "int-zero", "zero-f64"])
@pytest.mark.parametrize("bound_dtype", [np.float32, np.float64])
def test_clip_of_one_element_is_numpys(x_shape, lo_shape, hi_shape, values, bound_dtype,
                                       backend):
    """With a one-element result NumPy's choice of loop follows its iterator's strides for
    these shapes and casts (``ir.ops.clip_bounds_constant`` asks NumPy); kernels follow."""
    x0, lo0, hi0, x_dtype = values
    x = np.full(x_shape, x0, x_dtype)
    lo, hi = np.full(lo_shape, lo0, bound_dtype), np.full(hi_shape, hi0, bound_dtype)
    want = np.clip(x, lo, hi)
    got = np.asarray(tj.jit(np.clip, backend=backend)(x, lo, hi))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


_FIRST_COMPILE = """
import sys
import os

import numpy as np
import tracejit as tj
{before}
x = np.linspace(0, 1, 5000)
np.testing.assert_allclose(tj.jit(lambda x: np.exp(-x) * x)(x), np.exp(-x) * x, rtol=1e-15)
import numba
from numba.np import arraymath
print("linalg imported:", "scipy.linalg" in sys.modules)
a, b = np.random.default_rng(0).standard_normal((2, 50))
np.testing.assert_allclose(numba.njit(lambda a, b: np.correlate(a, b))(a, b[:7]),
                           np.correlate(a, b[:7]), rtol=1e-12)
np.testing.assert_allclose(numba.njit(lambda a, b: np.dot(a, b))(a, b), a @ b, rtol=1e-12)
print("blas:", bool(arraymath._HAVE_BLAS), "scipy.linalg" in sys.modules)
"""


@pytest.mark.parametrize("before", ["", "import numba.np.arraymath"])
def test_a_first_compile_leaves_numbas_blas_check_until_it_is_asked(before, tmp_path):
    """A process's first compile does not import SciPy's LAPACK bindings for Numba's
    import-time BLAS check (~0.1 s); the check runs when the user's own Numba code first
    needs it, with Numba's answer. Where Numba's module was imported first, it stands."""
    import subprocess
    import sys

    env = {**os.environ, "TRACEJIT_CACHE_DIR": str(tmp_path), "TRACEJIT_MIN_KERNEL_SIZE": "0"}
    done = subprocess.run([sys.executable, "-c", _FIRST_COMPILE.format(before=before)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"linalg imported: {bool(before)}" in done.stdout
    assert "blas: True True" in done.stdout


CAST_EDGES = [np.nan, np.inf, -np.inf, 2.0**31, -2.0**31, 2.0**31 - 1, -2.0**31 - 1, 2.0**63,
              -2.0**63, 2.0**62 * 1.5, 1e10, -3e9, -0.0, 0.0, 2.5, -2.5, 0.9999, -0.9999]


@pytest.mark.parametrize("src", [np.float64, np.float32])
@pytest.mark.parametrize("dst", [np.int32, np.int64, np.int16, np.uint32, np.uint64])
def test_a_float_to_int_cast_is_numpys_on_x86(src, dst):
    """NaN, infinities and values out of range become the type's minimum, as NumPy's
    ``cvttsd2si`` gives them; casts to int32 and int64 compute in the kernel, casts to
    other ints (NumPy truncates a wider conversion's bits) stay NumPy's."""
    x = np.array(CAST_EDGES, src)
    x = np.concatenate([x, RNG.standard_normal(200).astype(src) * 1e6])

    def f(x):
        return (x * 2).astype(dst), np.floor(x * 0.5).astype(dst)

    with np.errstate(invalid="ignore"):
        check(f, x, rtol=0, atol=0)
        in_kernel = any(n.op == "convert" for k in kernels(f, x) if k.kind == "loop"
                        for n in k.nodes)
    assert in_kernel == (np.dtype(dst) in (np.int32, np.int64))
