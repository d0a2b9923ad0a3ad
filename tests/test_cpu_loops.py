"""Loops on the CPU backend (``backends/cpu/loops.py``, ``fused.py``, ``fused_steps.py``):
compiled loops against the reference backend (the body interpreted with NumPy every
step) and NumPy loops, on bodies the fused driver runs whole (loop kernels, BLAS, and
indexing by the counter: gather, scatter in place, slices, concatenate, argmax; indices
wrapped or raising as NumPy's) and bodies the Python driver runs (other library steps,
nested loops, reductions with partial results)."""

import concurrent.futures

import numpy as np
import pytest

import tracejit as tj
from tests.programs import PROGRAMS
from tests.programs.check import check_jit
from tracejit import lax
from tracejit.backends.cpu import kernels, loops
from tracejit.backends.cpu.codegen import LOOP_OPS
from tracejit.errors import IndexOutOfBounds

RNG = np.random.default_rng(7)
FUSED = "tracejit CPU loop driver"  # the fused driver's header in lower().source
PYTHON = "driver: a Python loop over the body's runner"


def leaves(x):
    return [y for item in x for y in leaves(item)] if isinstance(x, (tuple, list)) else [x]


def check(fn, *args, want=None, rtol=1e-12, atol=1e-12):
    """``fn`` on the CPU backend equals the reference backend (and ``want``, a NumPy
    loop's result, where given), dtypes and shapes included; returns the CPU source."""
    got = tj.jit(fn, backend="cpu")(*args)
    ref = tj.jit(fn, backend="reference")(*args)
    for g, r in zip(leaves(got), leaves(ref), strict=True):
        g, r = np.asarray(g), np.asarray(r)
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    if want is not None:
        for g, w in zip(leaves(got), leaves(want), strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=max(rtol, 1e-6), atol=1e-6)
    return tj.jit(fn, backend="cpu").lower(*args).source


def test_scalar_recurrence_runs_fused():
    def f(x0, a, b):
        return lax.scan(lambda x, _: (a * x + b, None), x0, None, length=1000)[0]

    x = 1.0
    for _ in range(1000):
        x = 0.5 * x + 0.25
    src = check(f, np.float64(1.0), np.float64(0.5), np.float64(0.25), want=x)
    assert FUSED in src and PYTHON not in src
    assert "for s in range(1000):" in src  # the time loop is inside the compiled function


def test_the_compiled_loop_is_the_step_that_runs():
    def f(x0, a):
        return lax.scan(lambda x, _: (a * x + 1.0, None), x0, None, length=10)[0]

    jf = tj.jit(f, backend="cpu")
    jf(np.ones(5), np.float64(0.5))
    ran = [c for c in loops._loops.values() if c.driver == "fused"]
    assert ran and all(isinstance(c, loops.CompiledLoop) for c in ran)
    assert "scan, compiled" in jf.lower(np.ones(5), np.float64(0.5)).source


def test_the_fused_driver_is_a_kernel_cached_by_its_source():
    def body(c, x):
        return c * 0.25 + x * x, c

    def f(c0, xs):
        return lax.scan(body, c0, xs)

    def g(c0, xs):  # another function, the same loop: the same driver source
        return lax.scan(lambda c, x: (c * 0.25 + x * x, c), c0, xs)

    args = (np.ones(17), RNG.standard_normal((9, 17)))
    before = kernels.stats()
    tj.jit(f, backend="cpu")(*args)
    middle = kernels.stats()
    tj.jit(g, backend="cpu")(*args)
    after = kernels.stats()
    assert middle.compiled + middle.loaded > before.compiled + before.loaded
    assert (after.compiled, after.loaded) == (middle.compiled, middle.loaded)
    assert after.reused > middle.reused


def test_small_matmuls_in_a_body_run_blas_on_one_thread():
    def f(h0, w, xs):
        return lax.scan(lambda h, x: (np.tanh(h @ w + x), None), h0, xs)[0]

    args = (np.zeros((4, 8)), np.eye(8), np.ones((3, 4, 8)))
    graph = tj.jit(f).lower(*args).optimized_graph
    (node,) = [n for n in graph.nodes if n.op == "scan"]
    assert loops._small_matmuls(node.attrs["loop"])
    check(f, *args)


def test_tiny_matmuls_of_the_fused_driver_leave_blas_threads_alone():
    """gemm runs them on the calling thread anyway: no switch around the driver's call."""
    def rotate(points, theta):
        c, s = np.cos(theta), np.sin(theta)
        return points @ np.array([[c, -s], [s, c]]).T

    points = RNG.standard_normal((200, 2))
    jf = tj.jit(rotate, backend="cpu")
    jf(points, 0.7)
    jf.wait_compiled()
    np.testing.assert_allclose(jf(points, 0.7), rotate(points, 0.7), rtol=1e-13, atol=1e-15)
    graph = jf.lower(points, 0.7).optimized_graph
    from tracejit.backends.cpu import _straight
    (node,) = [n for n in _straight(graph).nodes if n.op == "scan"]
    compiled = loops._loops[node.attrs["loop"]]
    assert compiled.driver == "fused" and loops._tiny(compiled.loop)
    assert compiled._run.__name__ != "one_thread"


@pytest.mark.parametrize("reverse", [False, True])
def test_elementwise_body_with_xs_and_ys(reverse):
    def f(c0, xs):
        return lax.scan(lambda c, x: (0.5 * c + x, np.sin(c) * x), c0, xs, reverse=reverse)

    c0, xs = RNG.standard_normal(300), RNG.standard_normal((20, 300))
    c, ys = c0.copy(), np.empty_like(xs)
    for t in (range(19, -1, -1) if reverse else range(20)):
        c, ys[t] = 0.5 * c + xs[t], np.sin(c) * xs[t]
    assert FUSED in check(f, c0, xs, want=(c, ys))


def test_mixed_dtype_carries_int_counter_bool_flag_and_0d():
    def f(x0):
        def body(carry, x):
            i, flag, v, s = carry
            v = v * np.float32(0.75) + x
            return (i + 1, flag | (v.sum() > 2), v, s + np.int32(2)), i * 2

        return lax.scan(body, (np.int64(0), np.bool_(False), x0, np.int32(5)),
                        np.ones((30, 4), np.float32))

    (i, flag, v, s), ys = tj.jit(f, backend="cpu")(np.zeros(4, np.float32))
    assert (i, bool(flag), int(s)) == (30, True, 65) and ys.dtype == np.int64
    np.testing.assert_array_equal(ys, 2 * np.arange(30))
    check(f, np.zeros(4, np.float32), rtol=1e-6)


def test_fori_loop_static_and_traced_bounds():
    def static(x):
        return lax.fori_loop(0, 25, lambda i, x: x * 0.9 + i, x)

    def traced(x, n):
        return lax.fori_loop(0, n, lambda i, x: x * 0.9 + i, x)

    want = 1.0
    for i in range(25):
        want = want * 0.9 + i
    assert FUSED in check(static, np.float64(1.0), want=want)
    assert FUSED in check(traced, np.float64(1.0), np.int64(25), want=want)
    check(traced, np.float64(1.0), np.int64(0), want=1.0)  # no step at all


def test_while_loop_newton_sqrt():
    def f(a):
        def cond(c):
            x, i = c
            return (np.abs(x * x - a) > 1e-12) & (i < 100)

        def body(c):
            x, i = c
            return 0.5 * (x + a / x), i + 1

        return lax.while_loop(cond, body, (a, np.int64(0)))

    x, i = tj.jit(f, backend="cpu")(np.float64(2.0))
    assert abs(x - np.sqrt(2.0)) < 1e-12 and 0 < i < 10
    assert FUSED in check(f, np.float64(2.0))


def test_row_reductions_in_the_fused_driver_and_a_map():
    def f(c0, xs):
        return lax.scan(lambda c, x: (c + np.exp(x).sum(axis=1), np.exp(x).max(axis=1) * c),
                        c0, xs)

    c0, xs = RNG.standard_normal(7), RNG.standard_normal((50, 7, 33))
    c, ys = c0.copy(), []
    for t in range(50):
        ys.append(np.exp(xs[t]).max(axis=1) * c)
        c = c + np.exp(xs[t]).sum(axis=1)
    assert FUSED in check(f, c0, xs, want=(c, np.stack(ys)), rtol=1e-12)
    # a map (maybe no loop at all once the passes batch it)
    check(lambda xs: lax.map(lambda x: np.exp(x).sum(axis=1), xs), xs,
          want=np.exp(xs).sum(axis=2), rtol=1e-12)


def test_a_column_reduction_and_a_blas_matmul_run_in_the_fused_driver():
    def f(h0, w, xs):  # h.sum(axis=0): the output pre-filled with 0, then accumulated
        return lax.scan(lambda h, x: (np.tanh(h @ w + x), h.sum(axis=0)), h0, xs)

    h0, w = RNG.standard_normal((32, 128)) * 0.1, RNG.standard_normal((128, 128)) * 0.1
    xs = RNG.standard_normal((12, 32, 128))
    h, ys = h0, []
    for t in range(12):
        ys.append(h.sum(axis=0))
        h = np.tanh(h @ w + xs[t])
    src = check(f, h0, w, xs, want=(h, np.stack(ys)), rtol=1e-12)
    assert FUSED in src and PYTHON not in src and "gemm(" in src


def test_a_library_step_the_fused_driver_lacks_runs_in_the_python_driver():
    def f(c0, xs, idx):  # a sort: a NumPy call per step
        return lax.scan(lambda c, x: (c + np.sort(x)[idx[0]], c), c0, xs)

    c0, xs = np.float64(0.5), RNG.standard_normal((9, 6))
    c, ys = 0.5, []
    for t in range(9):
        ys.append(c)
        c = c + np.sort(xs[t])[-2]
    src = check(f, c0, xs, np.array([-2]), want=(c, np.array(ys)))
    assert PYTHON in src and FUSED not in src
    with pytest.raises(IndexOutOfBounds, match="index 6 is out of bounds for axis 0"):
        tj.jit(f, backend="cpu")(c0, xs, np.array([6]))


def test_a_scan_kernel_runs_in_the_fused_driver():
    def f(c0, xs, idx):  # each step's cumulative sum and running max: one kernel
        return lax.scan(lambda c, x: (c + np.cumsum(x)[idx[0]],
                                      np.maximum.accumulate(x * c)), c0, xs)

    c0, xs = np.float64(0.5), RNG.standard_normal((9, 6))
    c, ys = 0.5, []
    for t in range(9):
        ys.append(np.maximum.accumulate(xs[t] * c))
        c = c + np.cumsum(xs[t])[-2]
    src = check(f, c0, xs, np.array([-2]), want=(c, np.array(ys)), rtol=0, atol=0)
    assert FUSED in src and PYTHON not in src and "# cumsum" in src and "# cummax" in src
    with pytest.raises(IndexOutOfBounds, match="index 6 is out of bounds for axis 0"):
        tj.jit(f, backend="cpu")(c0, xs, np.array([6]))


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_blas_matmuls_in_the_fused_driver_with_transposed_operands(dtype, rtol):
    def f(h0, w, xs):  # K = 24 > SMALL_K: BLAS, not an unrolled kernel
        flag = lax.scan(lambda h, x: (np.tanh(h @ w + x), x @ h.T), h0, xs)  # h.T a flag
        copy = lax.scan(lambda h, x: (np.tanh(h @ w + x), h.T @ x), h0, xs)  # K = 5: copied
        return flag[0], flag[1], copy[1]

    h0, w = RNG.standard_normal((5, 24)) * 0.3, RNG.standard_normal((24, 24)) * 0.3
    xs = RNG.standard_normal((7, 5, 24))
    h0, w, xs = h0.astype(dtype), w.astype(dtype), xs.astype(dtype)
    h, a, b = h0, [], []
    for t in range(7):
        a.append(h.T @ xs[t])
        b.append(xs[t] @ h.T)
        h = np.tanh(h @ w + xs[t])
    src = check(f, h0, w, xs, want=(h, np.stack(b), np.stack(a)), rtol=rtol, atol=rtol)
    assert src.count(FUSED) == 2 and "gemm(" in src
    assert ", 111, 112, " in src  # h.T as BLAS's flag (x @ h.T, K = 24)
    assert "# transpose" in src  # h.T copied for the unrolled product h.T @ x (K = 5)


def test_gradient_of_an_rnn_with_blas_in_the_fused_driver():
    h0, w = RNG.standard_normal((4, 20)) * 0.3, RNG.standard_normal((20, 20)) * 0.3
    xs = RNG.standard_normal((6, 4, 20))
    vg = tj.value_and_grad(rnn_loss, argnums=(0, 1, 2))
    got, ref = tj.jit(vg, backend="cpu")(h0, w, xs), tj.jit(vg, backend="reference")(h0, w, xs)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    for g, r in zip(got[1], ref[1], strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)
    src = tj.jit(vg, backend="cpu").lower(h0, w, xs).source
    assert src.count(FUSED) == 2 and PYTHON not in src  # forward and backward scans
    f, eps = tj.jit(rnn_loss, backend="reference"), 1e-6
    for idx in [(0, 0), (3, 17), (19, 5)]:  # a few entries of dW by finite differences
        up, down = w.copy(), w.copy()
        up[idx] += eps
        down[idx] -= eps
        fd = (f(h0, up, xs) - f(h0, down, xs)) / (2 * eps)
        np.testing.assert_allclose(got[1][1][idx], fd, rtol=1e-5, atol=1e-8)


def test_nested_loops():
    def f(x0, xs):
        def outer(c, x):
            inner = lax.scan(lambda d, _: (d * 0.5 + x, d), c, None, length=4)
            return inner[0], inner[1].sum(axis=0)

        return lax.scan(outer, x0, xs)

    x0, xs = RNG.standard_normal(6), RNG.standard_normal((5, 6))
    c, ys = x0.copy(), []
    for t in range(5):
        acc = np.zeros(6)
        for _ in range(4):
            acc += c
            c = c * 0.5 + xs[t]
        ys.append(acc)
    check(f, x0, xs, want=(c, np.stack(ys)))


def test_zero_length_scan():
    def f(c0, xs):
        return lax.scan(lambda c, x: (c + x, c * x), c0, xs)

    c, ys = tj.jit(f, backend="cpu")(np.ones(3), np.zeros((0, 3)))
    np.testing.assert_array_equal(c, np.ones(3))
    assert ys.shape == (0, 3) and ys.dtype == np.float64
    check(f, np.ones(3), np.zeros((0, 3)))


def test_swapped_and_passed_through_carries_and_stacked_inputs():
    def f(a, b, k, xs):
        return lax.scan(lambda c, x: ((c[1], c[0] + x, c[2]), (c[0], x)), (a, b, k), xs)

    a, b, k, xs = np.arange(3.0), np.ones(3), np.float64(4.0), RNG.standard_normal((7, 3))
    p, q, ys = a, b, []
    for t in range(7):
        ys.append(p)
        p, q = q, p + xs[t]
    assert FUSED in check(f, a, b, k, xs, want=((p, q, k), (np.stack(ys), xs)))


def test_a_body_without_kernels():
    def f(a, b, xs):
        return lax.scan(lambda c, x: ((c[1], c[0]), c[0]), (a, b), xs)

    a, b = np.arange(4, dtype=np.int32), np.ones(4, np.int32)
    src = check(f, a, b, np.zeros((5, 0)), want=((b, a), np.stack([a, b, a, b, a])))
    assert FUSED in src


def test_constants_in_the_body():
    def f(x0):
        return lax.scan(lambda c, _: (c * 2.5 - np.array([1.0, 2.0, 3.0]), c), x0, None,
                        length=6)

    c, ys = np.ones(3), []
    for _ in range(6):
        ys.append(c)
        c = c * 2.5 - np.array([1.0, 2.0, 3.0])
    check(f, np.ones(3), want=(c, np.stack(ys)))


def rnn_loss(h0, w, xs):
    def step(h, x):
        h = np.tanh(h @ w + x)
        return h, h

    _, hs = lax.scan(step, h0, xs)
    return (hs * hs).mean()


def elementwise_loss(c0, a, xs):
    def step(c, x):
        c = np.tanh(a * c + x)
        return c, c * c

    c, ys = lax.scan(step, c0, xs)
    return ys.sum() + (c * c).sum()


@pytest.mark.parametrize("loss, shapes", [
    (elementwise_loss, [(5,), (5,), (9, 5)]),
    (rnn_loss, [(3, 4), (4, 4), (6, 3, 4)]),
])
def test_gradients_against_the_reference_and_finite_differences(loss, shapes):
    args = [RNG.standard_normal(s) * 0.5 for s in shapes]
    g = tj.jit(tj.value_and_grad(loss, argnums=(0, 1, 2)), backend="cpu")(*args)
    r = tj.jit(tj.value_and_grad(loss, argnums=(0, 1, 2)), backend="reference")(*args)
    np.testing.assert_allclose(g[0], r[0], rtol=1e-12)
    for gi, ri in zip(g[1], r[1], strict=True):
        np.testing.assert_allclose(gi, ri, rtol=1e-10, atol=1e-12)
    eps, f = 1e-6, tj.jit(loss, backend="reference")
    for k, a in enumerate(args):
        fd = np.empty_like(a)
        for idx in np.ndindex(a.shape):
            up, down = [x.copy() for x in args], [x.copy() for x in args]
            up[k][idx] += eps
            down[k][idx] -= eps
            fd[idx] = (f(*up) - f(*down)) / (2 * eps)
        np.testing.assert_allclose(g[1][k], fd, rtol=1e-5, atol=1e-7)


# ---- indexing by the loop counter: gather, scatter, reshape, slices in the fused driver


def drivers(jf, *args) -> list[str]:
    """The drivers the loops of ``jf``'s cached function for ``args`` ran with."""
    jf(*args)
    graph = jf.lower(*args).optimized_graph
    return [loops._loops[n.attrs["loop"]].driver for n in graph.nodes if n.op in LOOP_OPS]


def scalar_loop(a):  # bench/bench_programs.py: Theano's scan example
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return trace


@pytest.mark.parametrize("name", ["ewma", "one_pole_lowpass", "lorenz_euler", "edit_distance",
                                  "floyd_warshall", "needleman_wunsch", "viterbi"])
def test_corpus_recurrences_indexing_by_the_counter_run_fused(name):
    case = next(c for c in PROGRAMS if c.name == name)
    jf = tj.jit(case.fn, backend="cpu")
    args = case.args()
    ran = drivers(jf, *args)
    assert ran and set(ran) == {"fused"}
    check_jit(case, "cpu")  # NumPy's results, arguments written in place included


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_the_trace_of_tanh_on_the_diagonal_runs_fused(dtype, rtol):
    a = RNG.standard_normal((60, 60)).astype(dtype)
    jf = tj.jit(scalar_loop, backend="cpu")
    assert drivers(jf, a) == ["fused"]
    np.testing.assert_allclose(jf(a), scalar_loop(a), rtol=rtol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_a_recurrence_writing_its_output_in_place(dtype):
    def f(x):
        out = np.zeros_like(x)
        out[0] = x[0]
        for t in range(1, x.shape[0]):
            out[t] = x[t] * 3 + out[t - 1]
        return out

    x = (RNG.standard_normal(10_000) * 10).astype(dtype)
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, x) == ["fused"]
    got, want = jf(x), f(x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    src = jf.lower(x).source
    assert "# scatter" in src and "for q in range(" not in src  # the carry updated in place


def test_negative_counter_indices_wrap():
    def f(x):  # out[-1] at i = 0: the last element, as NumPy
        def body(i, out):
            out[i] = x[i] * 2.0 + out[i - 1]
            return out
        return lax.fori_loop(0, x.shape[0], body, np.full_like(x, 0.5))

    x = RNG.standard_normal(6)
    out = np.full_like(x, 0.5)
    for i in range(6):
        out[i] = x[i] * 2.0 + out[i - 1]
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, x) == ["fused"]
    np.testing.assert_allclose(jf(x), out, rtol=1e-12)


def gather_by_data(x, idx):
    out = np.zeros(idx.shape[0])
    for i in range(idx.shape[0]):
        out[i] = x[idx[i]] * 2.0
    return out


def scatter_by_data(x, idx):
    out = np.zeros(8)
    for i in range(idx.shape[0]):
        out[idx[i]] = x[i] + 1.0
    return out


@pytest.mark.parametrize("fn", [gather_by_data, scatter_by_data])
def test_indices_read_from_data_wrap_and_raise_out_of_bounds(fn):
    x = np.arange(8.0)
    jf = tj.jit(fn, backend="cpu")
    fine = np.array([1, -2, 3, 0, -8, 7])
    assert drivers(jf, x, fine) == ["fused"]
    np.testing.assert_array_equal(jf(x, fine), fn(x, fine))
    for bad in (8, -9):
        idx = np.array([1, 2, bad, 0, 5, 6])
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0 "
                           "with size 8"):
            fn(x, idx)
        with pytest.raises(IndexOutOfBounds, match=f"index {bad} is out of bounds for axis 0 "
                           "with size 8") as e:
            jf(x, idx)
        assert e.value.location is not None and e.value.location.lineno == \
            fn.__code__.co_firstlineno + 3  # the body's line, as the Python driver says
    assert drivers(jf, x, fine) == ["fused"]


@pytest.mark.parametrize("n", [0, 1, 2])
def test_short_loops_gathering_at_their_inputs(n):
    def f(x, i0):
        return lax.scan(lambda c, i: (c * 0.5 + x[i], x[-1 - i]), np.float64(1.0), i0)

    x, i0 = RNG.standard_normal(5), np.arange(n)
    c, ys = 1.0, []
    for i in range(n):
        ys.append(x[-1 - i])
        c = c * 0.5 + x[i]
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, x, i0) == ["fused"]
    got_c, got_ys = jf(x, i0)
    np.testing.assert_allclose(got_c, c, rtol=1e-12)
    assert got_ys.shape == (n,)
    np.testing.assert_allclose(got_ys, np.array(ys).reshape(n), rtol=1e-12)


def test_rows_and_columns_of_a_square_matrix():
    def f(a):
        out = np.zeros_like(a)
        for i in range(a.shape[0]):
            out[:, i] = a[i] * 2.0 + a[:, i]  # a row, a column; a column written
        return out

    a = RNG.standard_normal((7, 7))
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, a) == ["fused"]
    np.testing.assert_allclose(jf(a), f(a), rtol=1e-12)


def test_slices_update_slices_and_concatenate_in_the_body():
    def f(w0, xs):  # a window of the last three rows, a strided read, an overlapping write
        def body(w, x):
            new = np.tanh(w[2] * 0.5 + x + w[0, ::2].sum())
            nxt = np.concatenate([w[1:], new[None]])
            nxt[0, 1:3] = nxt[0, 0:2] + 1.0
            return nxt, w[:, 1]
        return lax.scan(body, w0, xs)

    w0, xs = RNG.standard_normal((3, 4)), RNG.standard_normal((9, 4))
    w, ys = w0.copy(), []
    for t in range(9):
        ys.append(w[:, 1])
        new = np.tanh(w[2] * 0.5 + xs[t] + w[0, ::2].sum())
        w = np.concatenate([w[1:], new[None]])
        w[0, 1:3] = w[0, 0:2] + 1.0
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, w0, xs) == ["fused"]
    check(f, w0, xs, want=(w, np.stack(ys)))


def test_a_while_loop_indexing_by_its_counter():
    def f(x, limit):
        def body(c):
            i, total, out = c
            out[i] = total
            return i + 1, total + x[i], out
        return lax.while_loop(lambda c: c[1] < limit, body,
                              (np.int64(0), np.float64(0.0), np.zeros_like(x)))

    x = np.abs(RNG.standard_normal(50)) + 0.1
    i, total, out = 0, 0.0, np.zeros_like(x)
    while total < 5.0:
        out[i] = total
        total, i = total + x[i], i + 1
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, x, np.float64(5.0)) == ["fused"]
    got = jf(x, np.float64(5.0))
    assert int(got[0]) == i
    np.testing.assert_allclose(got[1], total, rtol=1e-12)
    np.testing.assert_allclose(got[2], out, rtol=1e-12)
    with pytest.raises(IndexOutOfBounds, match="index 50 is out of bounds for axis 0"):
        jf(x, np.float64(1e9))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_argmax_argmin_and_column_reductions_in_the_fused_driver(dtype):
    def f(c0, xs):
        def body(c, x):
            z = x + c
            return c + z.max(axis=0), (z.argmax(axis=0), x.argmin(axis=1), z.argmax())
        return lax.scan(body, c0, xs)

    xs = (RNG.integers(-3, 4, (6, 5, 5))).astype(dtype)  # ties: the first one wins
    if dtype != np.int32:
        xs[2, 3, 1] = xs[4, 0, 0] = xs[4, 2, 0] = np.nan  # the first NaN wins
    c0 = np.zeros(5, dtype)
    c, ys = c0, []
    for t in range(6):
        z = xs[t] + c
        ys.append((z.argmax(axis=0), xs[t].argmin(axis=1), z.argmax()))
        c = c + z.max(axis=0)
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, c0, xs) == ["fused"]
    got_c, got_ys = jf(c0, xs)
    np.testing.assert_array_equal(got_c, c)
    for g, w in zip(got_ys, zip(*ys, strict=True), strict=True):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(g, np.stack(w))


def test_concurrent_calls_of_a_fused_loop_use_their_own_scratch():
    def f(x):
        out = np.zeros_like(x)
        for t in range(1, x.shape[0]):
            out[t] = x[t] * 0.5 + out[t - 1] * 0.75
        return out

    xs = [RNG.standard_normal(3000) for _ in range(4)]
    jf = tj.jit(f, backend="cpu")
    assert drivers(jf, xs[0]) == ["fused"]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: [jf(x) for _ in range(20)], xs))
    for x, got in zip(xs, results, strict=True):
        for g in got:
            np.testing.assert_allclose(g, f(x), rtol=1e-12)
