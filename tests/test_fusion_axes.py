"""Which element of a value a fused kernel reads: ``Kernel.axes`` (issue 11).

A reduction's result consumed by a later node of the same loop must be read at the loop
axes it was computed at. ``x - x.sum(axis=-1)`` on a 3x3 array broadcasts the three row
sums along the *last* axis; a kernel that treated them as per-row values gave each row
minus its own sum. Square, cubic and size-1 shapes hide such mix-ups, so every program
here runs on them, with each reduction's result (with and without keepdims) consumed
along each axis, in row kernels, column and scatter reductions and small-K matmul
epilogues, on every backend under test. Data are small integers stored as floats, so
every backend must give NumPy's answer exactly.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy_compare import ULP, assert_same
from test_cuda import cp  # noqa: F401  (CuPy, or the emulated GPU where there is none)

import tracejit as tj
from tracejit.errors import IRError
from tracejit.ir import TensorType
from tracejit.passes import run_pipeline
from tracejit.passes.fusion import fuse, verify_kernels
from tracejit.trace import trace_function

SHAPES = [(3, 3), (1, 1), (1, 3), (3, 1), (2, 2, 2), (2, 1, 2)]


def _axes(ndim: int):
    """None, every single axis, every pair and (for 3-d) a negative form."""
    yield None
    for r in range(1, ndim + 1):
        yield from (a if r > 1 else a[0] for a in itertools.combinations(range(ndim), r))
    yield -1


def _broadcasts(*shapes) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _program(shape, axis, keepdims):
    """A function returning every consumer of ``sum``/``max`` results NumPy accepts: the
    result itself broadcast against x, put back along each axis, reduced again over the
    same axes, and combined with another reduction's result."""

    def consumers(x):
        s = x.sum(axis=axis, keepdims=keepdims)
        m = np.max(x, axis=axis, keepdims=keepdims)
        outs = [s, m]
        for r in (s, m):
            if _broadcasts(x.shape, r.shape):
                outs += [x - r, x * r + 1]
            for d in range(r.ndim + 1):  # r put back along each axis of x
                e = np.expand_dims(r, d)
                if e.ndim <= x.ndim and _broadcasts(x.shape, e.shape):
                    outs.append(x - e)
        if keepdims:  # softmax's shape of work: a second reduction over the shifted rows
            shifted = x - m
            outs += [(shifted * shifted).sum(axis=axis, keepdims=True) / (s * s + 1),
                     shifted.max(axis=axis, keepdims=True)]
        return tuple(outs)

    return consumers


CASES = [(shape, axis, keepdims) for shape in SHAPES for axis in _axes(len(shape))
         for keepdims in (False, True)]


def _data(shape, seed=0):
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float64)


@pytest.mark.parametrize("shape,axis,keepdims", CASES, ids=[str(c) for c in CASES])
def test_reduction_results_are_read_along_numpys_axes(backend, shape, axis, keepdims):
    prog = _program(shape, axis, keepdims)
    x = _data(shape)
    assert_same(tj.jit(prog, backend=backend)(x), prog(x))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_issue_snippets(backend, n):
    x = np.arange(float(n * n)).reshape(n, n)
    for f in (lambda x: x - x.sum(axis=-1), lambda x: x / x.max(axis=1),
              lambda x: x - x.sum(axis=0), lambda x: x.T - x.sum(axis=1)):
        assert_same(tj.jit(f, backend=backend)(x + 1), f(x + 1))
    cube = np.arange(float(n ** 3)).reshape(n, n, n)
    for f in (lambda x: x - x.sum(axis=-1), lambda x: x - x.sum(axis=(1, 2)),
              lambda x: x - x.max(axis=1), lambda x: x / x.max(axis=(0, 1))):
        assert_same(tj.jit(f, backend=backend)(cube + 1), f(cube + 1))


def test_reduction_of_a_reduction_over_size_one_axes(backend):
    """Once crashed the CPU backend's code generator (a second reduction, over other axes,
    joined the kernel computing its operand)."""

    def prog(x0):
        t2 = np.sum(np.exp2(np.clip(x0, -10, 10)), axis=None, keepdims=True)
        t3 = t2 / (np.abs(t2) + 1)
        t4 = t3.T
        return np.sum(t2, axis=-2, keepdims=True), t4

    x = np.full((1, 1), 0.5, np.float32)
    got, want = tj.jit(prog, backend=backend)(x), prog(x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)


@pytest.mark.parametrize("shape", [(512, 512), (64, 64, 64)])
def test_large_square_kernels(backend, shape):
    """Above 2^17 elements the CPU kernels run on threads, with per-block partial results
    for reductions over the first axis and lane accumulators for rows: the same reads."""
    x = _data(shape, 3)

    def f(x):
        m = x.max(axis=-1, keepdims=True)
        return (x - x.sum(axis=-1), x - x.sum(axis=0), x - m, (x - m).sum(axis=-1),
                x * x.sum(axis=0, keepdims=True), x.sum() - x)

    assert_same(tj.jit(f, backend=backend)(x), f(x))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_small_k_matmul_epilogues(backend, n):
    """A small-K matmul fused with the elementwise work around it, next to reductions
    whose results are consumed along either axis."""
    a, b = _data((n, 2), 1), _data((2, n), 2)

    def f(a, b):
        p = a @ b
        return (p - p.sum(axis=0), p - p.sum(axis=1), p - p.sum(axis=1, keepdims=True),
                (a @ b) * a.sum(axis=1, keepdims=True), a @ b + b.sum(axis=0))

    assert_same(tj.jit(f, backend=backend)(a, b), f(a, b))


def test_issue_snippets_on_the_gpu(cp):  # noqa: F811
    """The same on the CUDA backend in every CI run (on the emulated GPU where there is no
    real one); TRACEJIT_TEST_BACKENDS=cuda runs the whole file there."""
    x = np.arange(27.0).reshape(3, 3, 3) + 1
    f = tj.jit(lambda x: (x - x.sum(axis=-1), x / x.max(axis=1), x - x.max(axis=-1, keepdims=True),
                          x.sum(axis=(1, 2)) - x.sum(axis=0)[0]), device="cuda")
    got = [tj.to_host(o) for o in f(x)]
    want = f.__wrapped__(x)
    assert_same(tuple(got), want)

    def prog(x0):
        t2 = np.sum(np.exp2(np.clip(x0, -10, 10)), axis=None, keepdims=True)
        return np.sum(t2, axis=-2, keepdims=True)

    one = np.full((1, 1), 0.5)
    assert_same(tj.to_host(tj.jit(prog, device="cuda")(one)), prog(one), ULP)  # exp2


# ----------------------------------------------------------------- the representation


def _kernels(f, *shapes):
    types = [TensorType(s, np.dtype(np.float64)) for s in shapes]
    graph, _ = trace_function(lambda *xs: f(*xs), lambda t: (t, {}), types,
                              [f"x{i}" for i in range(len(types))], "f")
    return fuse(run_pipeline(graph))


def test_a_row_sum_read_along_the_rows_starts_a_new_kernel():
    (loop,) = _kernels(lambda x: x - x.sum(axis=-1, keepdims=True), (3, 3))
    assert loop.rows == (1,)
    red = loop.nodes[0]
    assert loop.axes[red.out] == (0, None)
    first, second = _kernels(lambda x: x - x.sum(axis=-1), (3, 3))
    assert first.axes[first.nodes[0].out] == (0,)  # row i's sum lives on axis 0 ...
    assert second.axes[second.inputs[1]] == (1,)  # ... but x - s reads it along axis 1


def test_softmax_stays_one_row_kernel():
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    (loop,) = [k for k in _kernels(softmax, (4, 4)) if k.kind == "loop"]
    assert loop.rows == (1,)
    assert [n.op for n in loop.nodes].count("max") == 1


def test_the_verifier_rejects_a_value_read_at_the_wrong_axes():
    (loop,) = _kernels(lambda x: x - x.sum(axis=-1, keepdims=True), (3, 3))
    verify_kernels([loop])
    loop.axes[loop.nodes[0].out] = (1, None)  # the row sums, claimed to lie along axis 1
    with pytest.raises(IRError, match="sum's result is held at"):
        verify_kernels([loop])


def test_the_verifier_rejects_a_reduction_result_outside_a_row_kernel():
    (loop,) = _kernels(lambda x: x - x.sum(axis=-1, keepdims=True), (3, 3))
    loop.rows = None
    with pytest.raises(IRError, match="reduction result outside a row kernel"):
        verify_kernels([loop])
