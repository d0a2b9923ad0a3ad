"""Making arrays inside a jitted function (``trace/creation.py``): ``np.array`` of traced
values, buffers (``np.zeros``, ``np.eye``, ...) that are traceable yet keep their concrete
value, ``np.r_``/``np.c_``; all compared with NumPy running the same function."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import ConcretizationError, ShapeError
from tracejit.trace import Tracer

X = np.array([0.5, -2.0, 3.0])
F32 = np.array([1.5, 2.0, -1.0], np.float32)
I32 = np.array([3, -1, 2], np.int32)


def same(fn, *args, backend="reference"):
    """``fn`` jitted gives NumPy's values, dtype and shape."""
    want = fn(*args)
    got = tj.jit(fn, backend=backend)(*args)
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- np.array

ARRAY_CASES = {
    "rotation": (lambda t: np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]),
                 np.float32(0.3)),
    "vector-of-0d": (lambda x: np.array([x[0], x[2], x[1]]), X),
    "stack-rows": (lambda x: np.array([x, 2 * x]), X),
    "mixed-python-floats": (lambda x: np.array([x[0], 2.0, 3]), F32),  # Python float: f64
    "numpy-scalar-keeps-f32": (lambda x: np.array([x[0], np.float32(2)]), F32),
    "int-with-float": (lambda x: np.array([x[0], 1.5]), I32),
    "int-with-python-int": (lambda x: np.array([x[0], 7]), I32),  # int64 in array coercion
    "bool-with-int": (lambda x: np.array([x[0] > 0, 1]), X),
    "bool-only": (lambda x: np.array([x[0] > 0, x[1] > 0]), X),
    "nested-mixed": (lambda x: np.array([[x[0], 1.0], [np.float64(2), x[1]], [3, 4]]), X),
    "row-and-list": (lambda x: np.array([x, [1.0, 2.0, 3.0]]), F32),
    "dtype-given": (lambda x: np.array([x[0], x[1]], dtype=np.int16), X),
    "dtype-given-float32": (lambda x: np.array([[x[0]], [1]], dtype="float32"), I32),
    "ndmin": (lambda x: np.array([x[0], x[1]], ndmin=3), X),
    "ndmin-of-tracer": (lambda x: np.array(x, ndmin=2), X),
    "of-tracer": (lambda x: np.array(x) + 1, I32),
    "of-tracer-dtype": (lambda x: np.array(x, dtype=np.float32), I32),
    "of-0d-scalar": (lambda x: np.array(x.sum()), X),
    "tuple": (lambda x: np.array((x[1], x[0])), X),
    "asarray-list": (lambda x: np.asarray([x[0], x[1]]), X),
    "asarray-dtype": (lambda x: np.asarray(x, dtype=np.float64), I32),
    "asanyarray": (lambda x: np.asanyarray([x, x]), I32),
    "ascontiguousarray-0d": (lambda x: np.ascontiguousarray(x.sum()), X),
}


@pytest.mark.parametrize("name", ARRAY_CASES)
def test_np_array_of_traced_values_is_numpys(backend, name):
    fn, arg = ARRAY_CASES[name]
    same(fn, arg, backend=backend)


def test_weak_python_scalar_argument_counts_as_a_python_float(backend):
    """A Python float argument is traced weakly typed: in np.array it counts as NumPy
    counts a Python float (float64), not as the float32 it meets."""
    fn = lambda x, s: np.array([x[0], s])  # noqa: E731
    same(fn, F32, 2.5, backend=backend)


def test_asarray_of_a_tracer_is_the_tracer():
    seen = {}

    @tj.jit
    def f(x):
        seen["same"] = np.asarray(x) is x and np.asanyarray(x) is x
        seen["copy"] = np.array(x) is not x
        return x

    f(X)
    assert seen == {"same": True, "copy": True}


def test_ragged_nesting_raises_numpys_value_error(backend):
    with pytest.raises(ValueError, match="inhomogeneous") as numpy_error:
        np.array([[1.0, 2.0], [3.0]])
    f = tj.jit(lambda x: np.array([[x[0], x[1]], [x[2]]]), backend=backend)
    with pytest.raises(ShapeError, match="inhomogeneous") as info:
        f(X)
    assert isinstance(info.value, ValueError)
    assert str(numpy_error.value) in str(info.value)
    with pytest.raises(ValueError, match="inhomogeneous"):
        tj.jit(lambda x: np.array([x, x[:2]]), backend=backend)(X)


def test_np_array_in_threads():
    """Two threads trace np.array of traced values at once while a third calls np.array on
    plain data: each trace gets its values, the third thread plain ndarrays."""
    barrier = threading.Barrier(3, timeout=30)
    results, errors = {}, []

    def tracing(k):
        @tj.jit(backend="reference")
        def f(x):
            barrier.wait()  # all three are in np.array territory together
            return np.array([x[0] * k, x[1], 1.0])

        try:
            results[k] = f(X)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def plain():
        try:
            barrier.wait()
            results["plain"] = [np.array([1.0, 2.0, 3.0]) for _ in range(200)]
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=tracing, args=(k,)) for k in (2.0, 3.0)]
    threads.append(threading.Thread(target=plain))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    np.testing.assert_array_equal(results[2.0], [1.0, -2.0, 1.0])
    np.testing.assert_array_equal(results[3.0], [1.5, -2.0, 1.0])
    assert all(type(a) is np.ndarray for a in results["plain"])
    assert not hasattr(np.array, "__tracejit_original__")  # NumPy's own after the traces


# ---------------------------------------------------------------- buffers

CREATION_CASES = {
    "zeros": lambda x: np.zeros(3) + x,
    "zeros-int-shape-tuple": lambda x: np.zeros((2, 3), dtype=np.int32) + x,
    "ones-default-f64": lambda x: np.ones(3) * x,
    "ones-dtype": lambda x: np.ones((1, 3), np.float32) + x,
    "empty-shape": lambda x: np.empty((2, 3)).shape,
    "full-scalar": lambda x: np.full(3, 7) + x,
    "full-traced-fill": lambda x: np.full((2, 3), x[0]),
    "full-traced-fill-dtype": lambda x: np.full(3, x[1], dtype=np.float32),
    "full-row": lambda x: np.full((2, 3), [1, 2, 3]) * x,
    "eye": lambda x: np.eye(3) @ x,
    "eye-k": lambda x: np.eye(3, 4, k=1, dtype=np.int32).sum(0) + x[0],
    "identity": lambda x: np.identity(3) * x,
    "arange": lambda x: np.arange(3) + x,
    "arange-float-step": lambda x: np.arange(0.0, 1.5, 0.5) * x,
    "zeros_like": lambda x: np.zeros_like(x) + x,
    # made from constants, they index as constants do (a mask is no traced mask)
    "arange-mask": lambda x: x[np.arange(len(x)) % 2 == 0],
    "arange-index": lambda x: x[np.arange(2)] + x[np.ones(1, int)[0]],
    "eye-mask": lambda x: np.outer(x, x)[np.eye(3, dtype=bool)],
}


@pytest.mark.parametrize("name", CREATION_CASES)
def test_buffers_made_inside_trace(backend, name):
    fn = CREATION_CASES[name]
    for arg in (X, I32):
        want, got = fn(arg), tj.jit(fn, backend=backend)(arg)
        if isinstance(want, tuple):
            assert tuple(got) == want
            continue
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_buffers_are_tracers_that_know_their_value():
    seen = {}

    @tj.jit
    def f(x):
        z, o, e = np.zeros(3), np.ones(1, np.int64), np.empty(2)
        seen["types"] = {type(z), type(o), type(np.eye(2)), type(np.arange(3))}
        seen["tolist"] = z.tolist()
        seen["int"] = int(o[0])
        seen["if"] = "yes" if np.zeros(2).any() else "no"
        seen["range"] = list(range(o.sum() + 2))
        seen["float"] = float(np.full((), 2.5))
        seen["empty"] = e.tolist()  # zero-filled (NumPy: undefined)
        seen["numpy"] = np.asarray(np.eye(2)).tolist()  # a library calling np.asarray
        seen["derived"] = (np.arange(4) * 2)[1:3].tolist()
        seen["item"] = np.identity(2).item(1)
        seen["copy"] = np.ones(2).copy().tolist()
        return x + z

    np.testing.assert_array_equal(f(X), X)
    assert seen == {"types": {Tracer}, "tolist": [0.0, 0.0, 0.0], "int": 1, "if": "no",
                    "range": [0, 1, 2], "float": 2.5, "empty": [0.0, 0.0],
                    "numpy": [[1.0, 0.0], [0.0, 1.0]], "derived": [2, 4], "item": 0.0,
                    "copy": [1.0, 1.0]}


def test_a_value_computed_from_traced_data_is_not_known():
    f = tj.jit(lambda x: np.zeros(3) + x if (np.zeros(3) + x).any() else x)
    with pytest.raises(ConcretizationError):
        f(X)


def test_a_write_forgets_the_known_value_of_the_array_and_its_views():
    """The contract with in-place writes (Tracer.__setitem__, augmented assignment):
    ``_forget_const`` before writing; views share the memory, earlier results keep theirs."""
    seen = {}

    @tj.jit
    def f(x):
        buf = np.zeros(3)
        view, before = buf[1:], buf + 1
        buf._forget_const()  # what a write to buf does
        seen["buf"] = buf._const is None and view._known() is None
        seen["before"] = before.tolist()
        with pytest.raises(ConcretizationError):
            float(view[0])
        return x

    f(X)
    assert seen == {"buf": True, "before": [1.0, 1.0, 1.0]}


def test_traced_shapes_and_arange_bounds_need_concrete_values(backend):
    n = np.int64(3)  # a NumPy int stays traced (a Python int would become static)
    with pytest.raises(ConcretizationError):
        tj.jit(lambda x, n: np.zeros(n) + x.sum(), backend=backend)(X, n)
    with pytest.raises(ConcretizationError):
        tj.jit(lambda x, n: np.ones((n, 2)) + x.sum(), backend=backend)(X, n)
    with pytest.raises(ConcretizationError, match="np.arange of a traced value"):
        tj.jit(lambda x, n: np.arange(n) + x.sum(), backend=backend)(X, n)


def test_numpy_errors_of_creation_arguments():
    with pytest.raises(ValueError, match="negative"):
        tj.jit(lambda x: np.zeros(-1) + x)(X)
    with pytest.raises(TypeError):
        tj.jit(lambda x: np.zeros(1.5) + x)(X)


def test_plain_np_array_inside_a_trace_is_an_ndarray():
    seen = {}

    @tj.jit
    def f(x):
        seen["type"] = type(np.array([1.0, 2.0]))
        seen["asarray"] = type(np.asarray([[1, 2]]))
        return x

    f(X)
    assert seen == {"type": np.ndarray, "asarray": np.ndarray}


# ---------------------------------------------------------------- np.r_ and np.c_

CONCAT_CASES = {
    "r-arrays": lambda x: np.r_[x, 2 * x],
    "r-slice-scalar-list": lambda x: np.r_[x, 0:3, 7, [1.5, 2.5]],
    "r-0d": lambda x: np.r_[x.sum(), x[0]],
    "r-int-with-python-float": lambda x: np.r_[x, 0.5],
    "r-directive-2d": lambda x: np.r_["0,2", x, x],
    "r-directive-axis": lambda x: np.r_["1,2,0", x, x],
    "c-columns": lambda x: np.c_[x, 2 * x],
    "c-with-constant": lambda x: np.c_[x, np.arange(3)],
    "c-2d": lambda x: np.c_[np.outer(x, x), x],
}


@pytest.mark.parametrize("name", CONCAT_CASES)
def test_r_and_c(backend, name):
    fn = CONCAT_CASES[name]
    for arg in (X, I32):
        same(fn, arg, backend=backend)


def test_r_and_c_are_numpys_own_outside_traces():
    r, c = np.r_, np.c_
    tj.jit(lambda x: np.r_[x, x])(X)
    assert np.r_ is r and np.c_ is c
    assert type(r).__name__ == "RClass"


def test_gradient_flows_through_np_array_and_filled_buffers(backend):
    def loss(t):
        rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        out = rot @ np.array([1.0, 2.0]) + np.full(2, t)
        return (out**2).sum()

    t, h = 0.3, 1e-6
    want = (loss(t + h) - loss(t - h)) / (2 * h)
    np.testing.assert_allclose(tj.grad(loss, backend=backend)(t), want, rtol=1e-6)
