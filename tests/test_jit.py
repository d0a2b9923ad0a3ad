"""The @jit decorator: wrapping, the signature cache, pytrees, static arguments and lowering."""

import inspect
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.ir import Graph

HERE = os.path.basename(__file__)
PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def marked_line(fn, marker):
    """Line number of the one line of ``fn``'s source that ends with ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, text in enumerate(lines) if text.rstrip().endswith(marker)]
    return first + offset


def info_tuple(f):
    info = f.cache_info()
    return info.hits, info.misses, info.signatures


# --------------------------------------------------------------------------- decorator


def test_available_backends_include_reference():
    backends = tj.available_backends()
    assert "reference" in backends
    assert all(isinstance(name, str) for name in backends)


def test_wraps_keeps_metadata(backend):
    def scaled(x):
        """Double x."""
        return x * 2

    f = tj.jit(scaled, backend=backend)
    assert f.__name__ == "scaled"
    assert f.__doc__ == "Double x."
    assert f.__wrapped__ is scaled


def test_decorator_with_and_without_arguments(backend):
    @tj.jit
    def bare(x):
        return x + 1

    @tj.jit()
    def empty_call(x):
        return x + 2

    @tj.jit(static_argnums=1, backend=backend)
    def with_options(x, n):
        return x + n

    x = np.arange(3.0)
    np.testing.assert_array_equal(bare(x), x + 1)
    np.testing.assert_array_equal(empty_call(x), x + 2)
    np.testing.assert_array_equal(with_options(x, 3), x + 3)


def test_plain_function_matches_numpy(backend):
    def layer(x, w, b):
        h = np.tanh(x @ w + b)
        return np.maximum(h, 0.0).sum(axis=1) * 0.5

    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal(5)
    got = tj.jit(layer, backend=backend)(x, w, b)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.float64 and got.shape == (4,)
    np.testing.assert_allclose(got, layer(x, w, b), rtol=1e-12)


def test_lambda(backend):
    f = tj.jit(lambda x, y: x * y + 1, backend=backend)
    x, y = np.arange(4.0), np.full(4, 3.0)
    np.testing.assert_array_equal(f(x, y), x * y + 1)


def test_closure_over_arrays_and_scalars(backend):
    w = np.arange(6.0).reshape(3, 2)
    bias = 0.5

    def affine(x):
        return x @ w + bias

    f = tj.jit(affine, backend=backend)
    x = np.ones((2, 3))
    np.testing.assert_array_equal(f(x), x @ w + bias)
    assert len(f.lower(x).graph.inputs) == 1, "captured arrays are constants, not inputs"


def test_method_instance_is_static_by_identity(backend):
    traces = []

    class Scaler:
        def __init__(self, factor):
            self.factor = factor

        @tj.jit(backend=backend)
        def scale(self, x):
            traces.append(self.factor)
            return x * self.factor

    two, three = Scaler(2.0), Scaler(3.0)
    x = np.arange(3.0)
    np.testing.assert_array_equal(two.scale(x), x * 2)
    np.testing.assert_array_equal(three.scale(x), x * 3)
    np.testing.assert_array_equal(two.scale(x + 1), (x + 1) * 2)
    assert traces == [2.0, 3.0]
    assert info_tuple(Scaler.scale) == (1, 2, 2)


def test_method_instance_uses_its_own_hash(backend):
    traces = []

    class Shift:
        def __init__(self, by):
            self.by = by

        def __eq__(self, other):
            return isinstance(other, Shift) and other.by == self.by

        def __hash__(self):
            return hash(self.by)

        @tj.jit(backend=backend)
        def apply(self, x):
            traces.append(self.by)
            return x + self.by

    x = np.arange(3.0)
    np.testing.assert_array_equal(Shift(1.0).apply(x), x + 1)
    np.testing.assert_array_equal(Shift(1.0).apply(x), x + 1)
    np.testing.assert_array_equal(Shift(2.0).apply(x), x + 2)
    assert traces == [1.0, 2.0]


def test_keyword_arguments_are_traced(backend):
    f = tj.jit(lambda x, y: x - y, backend=backend)
    x, y = np.arange(3.0), np.ones(3)
    np.testing.assert_array_equal(f(x, y=y), x - y)
    np.testing.assert_array_equal(f(y=y, x=x), x - y)


# --------------------------------------------------------------------------- results & pytrees


def test_result_kinds_follow_numpy(backend):
    f = tj.jit(lambda x: (x * 2, x.sum(), np.sum(x, axis=0)), backend=backend)
    x = np.arange(6.0).reshape(2, 3)
    full, total, columns = f(x)
    assert type(full) is np.ndarray and full.shape == (2, 3)
    assert isinstance(total, np.generic) and total.dtype == np.float64 and total == 15.0
    assert type(columns) is np.ndarray
    np.testing.assert_array_equal(columns, [3.0, 5.0, 7.0])


def test_scalar_only_call_returns_numpy_scalar(backend):
    out = tj.jit(lambda a, b: a * b, backend=backend)(1.5, 2)
    assert isinstance(out, np.generic) and out.dtype == np.float64 and out == 3.0


def test_numpy_scalar_argument(backend):
    x = np.arange(3, dtype=np.float32)
    out = tj.jit(lambda s, x: s * x, backend=backend)(np.float32(2), x)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, 2 * x)


def test_nested_pytrees_in_and_out(backend):
    def f(params, batch):
        w, (b, extra) = params["w"], params["b"]
        assert extra is None
        return {"out": [batch["x"] @ w + b, None], "norm": (np.sum(w * w),)}

    w, b = np.ones((3, 2)), np.array([1.0, -1.0])
    x = np.arange(6.0).reshape(2, 3)
    got = tj.jit(f, backend=backend)({"w": w, "b": (b, None)}, {"x": x})
    assert set(got) == {"out", "norm"}
    assert isinstance(got["out"], list) and got["out"][1] is None
    assert isinstance(got["norm"], tuple) and len(got["norm"]) == 1
    np.testing.assert_array_equal(got["out"][0], x @ w + b)
    assert got["norm"][0] == 6.0


def test_returns_constants_and_inputs_unchanged(backend):
    f = tj.jit(lambda x, y: (x, 3, None, y), backend=backend)
    x, y = np.arange(3.0), np.arange(4, dtype=np.int32)
    same_x, three, nothing, same_y = f(x, y)
    np.testing.assert_array_equal(same_x, x)
    np.testing.assert_array_equal(same_y, y)
    assert same_y.dtype == np.int32
    assert three == 3 and nothing is None


def test_integer_array_gather_with_negative_indices(backend):
    x = np.arange(5.0) * 10
    idx = np.array([-1, 0, 4, -5])
    np.testing.assert_array_equal(tj.jit(lambda a, i: a[i], backend=backend)(x, idx), x[idx])


# --------------------------------------------------------------------------- cache


def test_same_signature_is_a_hit(backend):
    traces = []

    @tj.jit(backend=backend)
    def f(x):
        traces.append(1)
        return x * 2 + 1

    for k in range(3):
        x = np.full((2, 3), float(k))
        np.testing.assert_array_equal(f(x), x * 2 + 1)
    assert len(traces) == 1
    assert info_tuple(f) == (2, 1, 1)
    assert type(f.cache_info()).__name__ == "CacheInfo"
    assert f.cache_info()._fields == ("hits", "misses", "signatures")


X = np.arange(3.0)


@pytest.mark.parametrize(
    ("changed", "same_signature"),
    [
        pytest.param((np.arange(4.0), X), (np.ones(4), X + 1), id="shape"),
        pytest.param((X.astype(np.float32), X), (X.astype(np.float32) + 1, X), id="dtype"),
        pytest.param([X, X], [X + 1, X], id="list-not-tuple"),
        pytest.param((X, X, X), (X, X + 1, X), id="extra-leaf"),
        pytest.param((X, None), (X + 1, None), id="none-leaf"),
        pytest.param((X, 1.0), (X, 2.0), id="weak-scalar-leaf"),
    ],
)
def test_new_signature_is_a_miss(backend, changed, same_signature):
    traces = []

    @tj.jit(backend=backend)
    def first_doubled(pair):
        traces.append(1)
        return pair[0] * 2

    first_doubled((X, X))
    np.testing.assert_array_equal(first_doubled(changed), changed[0] * 2)
    assert len(traces) == 2
    np.testing.assert_array_equal(first_doubled(same_signature), same_signature[0] * 2)
    assert len(traces) == 2
    assert info_tuple(first_doubled) == (1, 2, 2)


SIGNATURES = [((3,), np.float64), ((3,), np.float32), ((2, 3), np.float64), ((3,), np.int64)]


@PROPERTY
@given(st.lists(st.integers(0, len(SIGNATURES) - 1), min_size=1, max_size=10))
def test_cache_counts_follow_distinct_signatures(backend, picks):
    traces = []

    @tj.jit(backend=backend)
    def f(x):
        traces.append(1)
        return x * 2 + 1

    seen = set()
    for call, pick in enumerate(picks):
        shape, dtype = SIGNATURES[pick]
        x = np.full(shape, call, dtype=dtype)
        out = f(x)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, x * 2 + 1)
        seen.add(pick)
        assert info_tuple(f) == (call + 1 - len(seen), len(seen), len(seen))
    assert len(traces) == len(seen)


def test_python_scalars_are_weakly_typed(backend):
    traces = []

    @tj.jit(backend=backend)
    def f(x, s):
        traces.append(1)
        return x * s

    x = np.arange(3, dtype=np.float32)
    f(x, 1.0)
    out = f(x, 2.5)
    assert len(traces) == 1
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x * np.float32(2.5))
    f(x, 2)
    assert len(traces) == 2, "int -> float is a new Python type"
    assert f(x, np.float64(2.5)).dtype == np.float64
    assert len(traces) == 3, "np.float64 is strongly typed"


def test_python_bool_behaves_as_numpy_bool(backend):
    traces = []

    @tj.jit(backend=backend)
    def f(x, flag):
        traces.append(1)
        return np.where(flag, x, -x)

    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x, True), x)
    np.testing.assert_array_equal(f(x, np.bool_(False)), -x)
    np.testing.assert_array_equal(f(x, False), -x)
    assert len(traces) == 1


@pytest.mark.parametrize("scalar", [2, 2.5, True, np.float64(2.5), np.int8(2)], ids=repr)
@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.float64])
def test_scalar_promotion_matches_numpy(backend, dtype, scalar):
    x = np.arange(3, dtype=dtype)
    expected = x + scalar
    got = tj.jit(lambda a, b: a + b, backend=backend)(x, scalar)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_clear_cache_forces_a_retrace(backend):
    traces = []

    @tj.jit(backend=backend)
    def f(x):
        traces.append(1)
        return -x

    x = np.arange(3.0)
    f(x)
    f(x)
    f.clear_cache()
    cleared = f.cache_info()
    assert cleared.signatures == 0
    np.testing.assert_array_equal(f(x), -x)
    assert len(traces) == 2
    assert f.cache_info().misses == cleared.misses + 1
    assert f.cache_info().signatures == 1


def test_concurrent_first_calls_trace_once(backend):
    traces = []
    start = threading.Barrier(8)

    @tj.jit(backend=backend)
    def f(x):
        traces.append(1)
        time.sleep(0.05)  # keep the trace in flight while the other threads arrive
        return x * 3

    def call(k):
        x = np.full(4, float(k))
        start.wait()
        return x, f(x)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(8)))
    for x, out in results:
        np.testing.assert_array_equal(out, x * 3)
    assert len(traces) == 1
    hits, misses, signatures = info_tuple(f)
    assert (misses, signatures) == (1, 1)
    assert hits + misses == 8


OFFSET = np.ones(4)


def _add_global_offset(x):
    return x + OFFSET


def test_failed_trace_caches_nothing(backend, monkeypatch):
    f = tj.jit(_add_global_offset, backend=backend)
    x = np.arange(3.0)
    with pytest.raises(tj.errors.ShapeError):
        f(x)
    assert f.cache_info().signatures == 0
    monkeypatch.setitem(globals(), "OFFSET", np.full(3, 10.0))
    np.testing.assert_array_equal(f(x), x + 10)
    assert f.cache_info().signatures == 1


# --------------------------------------------------------------------------- static arguments


def test_static_argnums_unrolls_python_loops(backend):
    seen = []

    @tj.jit(static_argnums=1, backend=backend)
    def power(x, n):
        seen.append(n)
        out = x
        for _ in range(n - 1):
            out = out * x
        return out

    x = np.arange(4.0)
    np.testing.assert_array_equal(power(x, 3), x**3)
    np.testing.assert_array_equal(power(x + 1, 3), (x + 1) ** 3)
    np.testing.assert_array_equal(power(x, 2), x**2)
    assert seen == [3, 2] and all(type(n) is int for n in seen)
    assert info_tuple(power) == (1, 2, 2)


def test_negative_static_argnums_with_tuple_shape_and_flag(backend):
    @tj.jit(static_argnums=(-2, -1), backend=backend)
    def f(x, shape, flip):
        y = x.reshape(shape)
        if flip:
            y = -y
        return y

    x = np.arange(6.0)
    np.testing.assert_array_equal(f(x, (2, 3), True), -x.reshape(2, 3))
    np.testing.assert_array_equal(f(x, (3, 2), False), x.reshape(3, 2))
    np.testing.assert_array_equal(f(x, (3, 2), True), -x.reshape(3, 2))
    assert f.cache_info().signatures == 3


def test_static_argnames(backend):
    traces = []

    @tj.jit(static_argnames=("mode",), backend=backend)
    def reduce(x, *, mode):
        traces.append(mode)
        return x.sum() if mode == "sum" else x.max()

    x = np.arange(4.0)
    assert reduce(x, mode="sum") == 6.0
    assert reduce(x, mode="max") == 3.0
    assert reduce(x + 1, mode="sum") == 10.0
    assert traces == ["sum", "max"]
    assert info_tuple(reduce) == (1, 2, 2)


def test_shapes_are_static_python_ints(backend):
    @tj.jit(backend=backend)
    def f(x):
        total = x[0]
        for i in range(1, len(x)):
            total = total + x[i]
        return total, x.ndim, x.shape

    x = np.arange(6.0).reshape(3, 2)
    total, ndim, shape = f(x)
    np.testing.assert_array_equal(total, x.sum(axis=0))
    assert ndim == 2 and tuple(shape) == (3, 2)


# --------------------------------------------------------------------------- lowering


def _mlp(x, w):
    h = x @ w  # <- matmul
    return np.tanh(h)  # <- tanh


def _lower_mlp(backend):
    return tj.jit(_mlp, backend=backend).lower(
        np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    )


def test_lower_ir_text_names_ops_shapes_and_dtypes(backend):
    lo = _lower_mlp(backend)
    assert "matmul" in lo.ir and "tanh" in lo.ir
    assert re.search(r"4,\s*3", lo.ir) and re.search(r"f32|float32", lo.ir)
    assert isinstance(lo.optimized_ir, str) and "tanh" in lo.optimized_ir
    assert isinstance(lo.source, str) and lo.source.strip()


def test_lower_graph_nodes_point_at_user_lines(backend):
    graph = _lower_mlp(backend).graph
    assert isinstance(graph, Graph)
    assert len(graph.inputs) == 2 and len(graph.outputs) == 1
    assert all(isinstance(node.op, str) for node in graph.nodes)
    for op in ("matmul", "tanh"):
        nodes = [node for node in graph.nodes if op in node.op]
        assert nodes, f"no {op} node in {[n.op for n in graph.nodes]}"
        for node in nodes:
            assert os.path.basename(node.loc.filename) == HERE
            assert node.loc.lineno == marked_line(_mlp, f"# <- {op}")


def test_graph_to_dot(backend):
    dot = _lower_mlp(backend).graph.to_dot()
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")


def test_lower_neither_runs_nor_counts_as_a_call(backend):
    f = tj.jit(lambda x, idx: x[idx], backend=backend)
    x, out_of_range = np.arange(5.0), np.array([7])
    lo = f.lower(x, out_of_range)
    assert isinstance(lo.ir, str)
    assert f.cache_info()[:2] == (0, 0)
    with pytest.raises(tj.errors.IndexOutOfBounds):
        f(x, out_of_range)


def test_lower_unrolls_static_loops_and_branches(backend):
    @tj.jit(static_argnums=(1,), static_argnames=("with_cos",), backend=backend)
    def f(x, n, with_cos=False):
        for _ in range(n):
            x = np.sin(x)
        if with_cos:
            x = np.cos(x)
        return x

    def count(lo, name):
        return sum(node.op.endswith(name) for node in lo.graph.nodes)

    x = np.arange(3.0)
    three_sines = f.lower(x, 3)
    assert (count(three_sines, "sin"), count(three_sines, "cos")) == (3, 0)
    one_of_each = f.lower(x, 1, with_cos=True)
    assert (count(one_of_each, "sin"), count(one_of_each, "cos")) == (1, 1)
    np.testing.assert_allclose(f(x, 1, with_cos=True), np.cos(np.sin(x)), rtol=1e-15)


def test_jit_called_inside_a_trace_is_inlined(backend):
    inner = tj.jit(lambda x: np.exp(x) + 1, backend=backend)
    outer = tj.jit(lambda x: inner(x) * 2, backend=backend)
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(outer(x), (np.exp(x) + 1) * 2)
    assert inner.cache_info().misses == 0  # traced through, never compiled on its own
    assert [n.op for n in outer.lower(x).graph.nodes].count("exp") == 1


def test_reduction_results_act_as_numpy_scalars(backend):
    def f(x):
        total = x.sum()  # NumPy gives an int64 scalar here, so += 0.5 simply rebinds
        total += 0.5
        return total

    x = np.arange(4, dtype=np.int32)
    got = tj.jit(f, backend=backend)(x)
    assert got == f(x) and got.dtype == f(x).dtype == np.float64


def test_attribute_lookup_on_tracers():
    seen = {}

    def f(x):
        seen["hasattr_foo"] = hasattr(x, "foo")
        seen["hasattr_shape"] = hasattr(x, "shape")
        with pytest.raises(tj.errors.UnsupportedOperation, match="byteswap"):
            x.byteswap()
        return x

    tj.jit(f)(np.ones(2))
    assert seen == {"hasattr_foo": False, "hasattr_shape": True}


def test_results_are_the_callers_to_modify(backend):
    """Outputs never alias a constant kept by the compiled code (modifying a result changes
    no later call); what NumPy returns as an argument or a view of one is that array or
    view of the caller's array, a broadcast view read-only, as NumPy returns them."""
    y = np.arange(3.0)
    const = tj.jit(lambda x: np.ones(3) * 2.0, backend=backend)
    first = const(1.0)
    first[0] = 99
    np.testing.assert_array_equal(const(1.0), [2, 2, 2])
    same = tj.jit(lambda a: (a, a.reshape(3, 1), np.broadcast_to(a, (2, 3))), backend=backend)
    a, col, wide = same(y)
    assert a is y and np.shares_memory(col, y) and not wide.flags.writeable
    col[1, 0] = 7
    np.testing.assert_array_equal(y, [0, 7, 2])
    np.testing.assert_array_equal(wide, [[0, 7, 2]] * 2)


def test_the_public_names_load_on_first_use():
    """``import tracejit`` imports the settings only (a compile worker needs no tracer);
    every public name resolves, and ``tj.config`` is the Settings object, not its module."""
    import subprocess
    import sys

    code = ("import sys, tracejit as tj; lazy = 'tracejit.api' not in sys.modules; "
            "names = [getattr(tj, n) for n in tj.__all__]; "
            "print(lazy, type(tj.config).__name__, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "Settings", "False"]
    assert set(tj.__all__) == set(dir(tj)) & set(tj.__all__)
    with pytest.raises(AttributeError, match="no attribute 'jitt'"):
        tj.jitt  # noqa: B018


def test_python_float_arguments_take_the_fast_path_with_numpys_types(backend):
    """A Python float argument is a weakly typed scalar input: calls with other floats
    reuse the entry (the cached path keys it by type, not value), and the result has
    NumPy's dtype, unlike a np.float64 argument's (strong: another signature)."""
    f = tj.jit(lambda x, lr: x * lr + 1.0, backend=backend)
    x = np.arange(4, dtype=np.float32)
    for lr in (0.5, 2.0, -1.25, 0.5):
        got = f(x, lr)
        want = x * lr + 1.0
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    assert (f.cache_info().misses, f.cache_info().hits) == (1, 3)
    got = f(x, np.float64(0.5))
    assert got.dtype == (x * np.float64(0.5) + 1.0).dtype == np.float64
    assert f.cache_info().misses == 2
    assert f(x, 3).dtype == np.float32  # a Python int: the general path, its own entry
    np.testing.assert_array_equal(f(x, 3), x * 3 + 1.0)
