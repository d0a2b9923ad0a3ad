"""Simplification: every rewrite fires where it keeps NumPy's results bit for bit (signed zeros,
infinities, NaN signs and payloads, dtypes, weak flags) and nowhere else."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from draws import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.backends import reference
from tracejit.errors import TracejitError
from tracejit.ir import Graph, Node, TensorType, Value, verify
from tracejit.ir.registry import REGISTRY
from tracejit.passes import run_pipeline, simplify
from tracejit.passes.dce import dce

NAN_PAYLOAD = {np.dtype(np.float64): np.uint64(0x7FF8_0000_0000_0123).view(np.float64),
               np.dtype(np.float32): np.uint32(0x7FC0_0123).view(np.float32),
               np.dtype(np.float16): np.uint16(0x7E01).view(np.float16)}


def edge_values(dtype) -> np.ndarray:
    """Values where a wrong rewrite shows: signed zeros, infinities, NaNs, extremes, and
    inexact ones whose powers round differently from repeated products."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([False, True, True, False])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([0, 1, 7, info.max, info.min, info.min + 1, info.max // 3], dtype)
    info = np.finfo(dtype)
    nan = NAN_PAYLOAD.get(dtype, np.nan)
    vals = [0.0, -0.0, 1.0, -1.5, 0.1, -1 / 3, 2.3, 1e-3, np.inf, -np.inf, np.nan, -np.nan,
            nan, -nan, info.max, -info.max, info.tiny, info.smallest_subnormal]
    out = np.array(vals, dtype)
    if dtype.kind == "c":
        out = out + np.array(vals[::-1], dtype) * 1j
    return out


def same(a, b) -> bool:
    """Bitwise equal, same dtype and shape, both Python scalars or both not."""
    py = (bool, int, float, complex)
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    return ((type(a) in py) == (type(b) in py) and a_arr.dtype == b_arr.dtype
            and a_arr.shape == b_arr.shape and a_arr.tobytes() == b_arr.tobytes())


# the passes that keep results bit for bit (the stability rewrites change them on purpose)
BIT_EXACT = (simplify, dce)


def optimized_ops(fn, *args) -> list[str]:
    return [n.op for n in tj.jit(fn).lower(*args).optimized_graph.nodes if n.op != "constant"]


def check(fn, *args) -> None:
    """The simplified graph gives the unsimplified graph's results and eager NumPy's, bitwise."""
    graph = tj.jit(fn).lower(*args).graph
    plain = reference.compile(run_pipeline(graph, passes=()))(*args)
    simplified = reference.compile(run_pipeline(graph, passes=BIT_EXACT))(*args)
    assert all(same(a, b) for a, b in zip(plain, simplified, strict=True))
    eager = fn(*args)
    eager = eager if isinstance(eager, tuple) else (eager,)
    jitted = tj.jit(fn, backend="reference")(*args)
    jitted = jitted if isinstance(jitted, tuple) else (jitted,)
    for e, j in zip(eager, jitted, strict=True):
        assert np.asarray(e).dtype == np.asarray(j).dtype
        assert np.asarray(e).tobytes() == np.asarray(j).tobytes()


def fresh(v):
    """Use a value in a fresh result, so a rewrite may reduce it to the argument itself."""
    return np.logical_not(v) if v.dtype == np.bool_ else np.negative(v)


class Builder:
    """Hand-built graphs, for node shapes the tracer does not produce."""

    def __init__(self, *types: TensorType):
        self.inputs = [Value(t, f"x{i}") for i, t in enumerate(types)]
        self.nodes: list[Node] = []

    def __call__(self, op: str, *inputs: Value, **attrs) -> Value:
        out = Value(REGISTRY[op].rule(*(v.type for v in inputs), **attrs))
        self.nodes.append(Node(op, inputs, attrs, out, None))
        return out

    def const(self, value) -> Value:
        return self("constant", value=value)

    def graph(self, *outputs: Value) -> Graph:
        return verify(Graph(self.inputs, self.nodes, list(outputs)))


F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

# ---------------------------------------------------------------- common subexpressions


def test_cse_merges_repeated_work():
    x = np.linspace(-2, 2, 6).reshape(2, 3)
    fn = lambda x: np.exp(x) * 2 + np.exp(x) * 2 + x.sum(axis=0) + x.sum(axis=0)
    assert optimized_ops(fn, x) == ["exp", "multiply", "add", "sum", "add", "add"]
    check(fn, x)


def test_cse_tells_constants_apart_by_bits_dtype_and_weakness():
    x = edge_values(F64)
    assert optimized_ops(lambda x: x * 0.0 + x * -0.0, x).count("multiply") == 2
    assert optimized_ops(lambda x: x * np.nan + x * np.nan, x).count("multiply") == 1
    assert optimized_ops(lambda x: (x + np.float32(1)) * (x + 1.0), x).count("add") == 2
    check(lambda x: x * 0.0 + x * -0.0, x)


def test_cse_compares_large_constants_by_content():
    x = np.ones(1000)
    a = np.arange(1000.0)
    b = a.copy()
    b[-1] = -1.0
    assert optimized_ops(lambda x: (x + a) * (x + a.copy()), x).count("add") == 1
    assert optimized_ops(lambda x: (x + a) * (x + b), x).count("add") == 2


def test_cse_keeps_attrs_apart():
    x = np.arange(9.0).reshape(3, 3)
    fn = lambda x: x.sum(axis=0) * x.sum(axis=1)
    assert optimized_ops(fn, x).count("sum") == 2
    check(fn, x)


def test_cse_never_makes_two_outputs_one_array():
    x = np.arange(3.0)
    fn = tj.jit(lambda x: (x + 1, x + 1))
    a, b = fn(x)
    assert a is not b and len([n for n in fn.lower(x).optimized_graph.nodes if n.op == "add"]) == 2


# ---------------------------------------------------------------- constant folding


def test_folds_small_constant_expressions():
    x = np.arange(4, dtype=np.float32)
    fn = lambda x: x + (np.ones_like(x) * 2 - 0.5)
    assert optimized_ops(fn, x) == ["add"]
    check(fn, x)


def test_fold_keeps_weak_python_scalars():
    b = Builder(TensorType((3,), F32))
    two_and_a_half = b("add", b.const(2), b.const(0.5))
    g = simplify(b.graph(b("multiply", b.inputs[0], two_and_a_half)))
    (const,) = [n for n in g.nodes if n.op == "constant"]
    assert const.attrs["value"] == 2.5 and type(const.attrs["value"]) is float
    assert const.out.type == TensorType((), F64, weak=True)
    x = edge_values(F32)[:3]
    assert same(reference.compile(g)(x)[0], x * 2.5)


def test_fold_leaves_large_results_to_run_time():
    big, small = np.zeros(65, np.float32), np.zeros(64, np.float32)
    assert optimized_ops(lambda x: x * (np.ones_like(x) + 1), big) == ["full", "add", "multiply"]
    assert optimized_ops(lambda x: x * (np.ones_like(x) + 1), small) == ["multiply"]


@pytest.mark.parametrize("op, fn", [
    ("floor_divide", lambda x: x + np.zeros_like(x, dtype=np.int64) // 0),  # divide by zero
    ("log", lambda x: x + np.log(np.zeros_like(x))),                         # divide by zero
    ("true_divide", lambda x: x + np.zeros_like(x) / 0),                     # invalid
    ("multiply", lambda x: x + np.full_like(x, 1e300) * 1e300),              # overflow
])
def test_fold_leaves_warnings_and_errors_to_run_time(op, fn):
    x = np.ones(3)
    assert op in optimized_ops(fn, x)
    check(fn, x)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        fn(x)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        tj.jit(fn, backend="reference")(x)


def test_fold_leaves_casts_that_warn_to_run_time():
    b = Builder(TensorType((2,), F64))
    real = b("convert", b.const(np.array([1 + 2j, 3j])), dtype=F64)
    g = simplify(b.graph(b("add", b.inputs[0], real)))
    assert "convert" in [n.op for n in g.nodes]


def test_fold_keeps_errors_of_indexing():
    b = Builder(TensorType((2,), F64))
    picked = b("gather", b.const(np.arange(3.0)), b.const(np.array([5])), axis=0)
    g = simplify(b.graph(b("add", b.inputs[0], picked)))
    assert "gather" in [n.op for n in g.nodes]
    with pytest.raises(IndexError):
        reference.compile(g)(np.ones(2))


def test_folded_array_outputs_stay_fresh_each_call():
    fn = tj.jit(lambda x: (x, np.ones_like(x) + 1))
    x = np.zeros(3)
    first = fn(x)[1]
    first[0] = 99.0
    assert fn(x)[1].tolist() == [2.0, 2.0, 2.0]


# ---------------------------------------------------------------- identities


NUMERIC = ["float16", "float32", "float64", "int8", "int64", "uint8", "uint64"]


@pytest.mark.parametrize("dtype", NUMERIC + ["bool"])
def test_multiply_by_one(dtype):
    x = edge_values(dtype)
    one = np.ones((), dtype)[()]
    fns = [lambda x: fresh(x * one), lambda x: fresh(one * x)]
    if dtype != "bool":  # bool * 1 is int64
        fns += [lambda x: fresh(x * 1), lambda x: fresh(1 * x)]
    for fn in fns:
        assert len(optimized_ops(fn, x)) == 1
        check(fn, x)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_additive_identities(dtype):
    x = edge_values(dtype)
    for fn in (lambda x: fresh(x + -0.0), lambda x: fresh(-0.0 + x), lambda x: fresh(x - 0.0),
               lambda x: fresh(x - 0), lambda x: fresh(x / 1), lambda x: fresh(x / 1.0)):
        assert optimized_ops(fn, x) == ["negative"]
        check(fn, x)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "uint64", "bool"])
def test_integer_additive_identities(dtype):
    x = edge_values(dtype)
    zero = np.zeros((), dtype)[()]
    fns = [lambda x: fresh(x + zero), lambda x: fresh(zero + x)]
    if dtype != "bool":
        fns += [lambda x: fresh(x + 0), lambda x: fresh(x - 0), lambda x: fresh(x ** 1)]
    for fn in fns:
        assert len(optimized_ops(fn, x)) == 1
        check(fn, x)


@pytest.mark.parametrize("dtype", NUMERIC + ["complex128"])
def test_double_negation(dtype):
    x = edge_values(dtype)
    neg = np.negative
    fn = lambda x: np.exp(neg(neg(x))) if x.dtype.kind in "fc" else neg(neg(neg(x)))
    assert len(optimized_ops(fn, x)) == 1
    check(fn, x)


def test_transposes_compose():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert optimized_ops(lambda x: fresh(x.transpose(1, 2, 0).transpose(2, 0, 1)), x) == [
        "negative"]
    fn = lambda x: fresh(x.transpose(1, 2, 0).transpose(1, 0, 2))
    g = tj.jit(fn).lower(x).optimized_graph
    assert [(n.op, n.attrs.get("perm")) for n in g.nodes] == [
        ("transpose", (2, 1, 0)), ("negative", None)]
    check(fn, x)
    check(lambda x: fresh(x.T.T), x)


def test_reshapes_compose():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert optimized_ops(lambda x: fresh(x.reshape(6, 4).reshape(24).reshape(2, 3, 4)), x) == [
        "negative"]
    fn = lambda x: fresh(x.reshape(6, 4).reshape(4, 6))
    g = tj.jit(fn).lower(x).optimized_graph
    assert [(n.op, n.attrs.get("shape")) for n in g.nodes] == [
        ("reshape", (4, 6)), ("negative", None)]
    check(fn, x)


def test_no_op_casts_and_broadcasts():
    x = edge_values(F32)
    fn = lambda x: fresh(np.broadcast_to(x.astype(np.float32), x.shape))
    assert optimized_ops(fn, x) == ["negative"]
    check(fn, x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64", "uint8", "uint64"])
def test_square_becomes_a_multiply(dtype):
    x = edge_values(dtype)
    assert optimized_ops(lambda x: np.power(x, 2), x) == ["multiply"]
    check(lambda x: np.power(x, 2), x)
    check(lambda x: x ** 2, x)  # the operator is np.square, as in NumPy
    check(lambda x: np.power(x, np.array(2, dtype)), x)


@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "uint64"])
def test_integer_cube_and_fourth_power_become_multiplies(dtype, n):
    x = edge_values(dtype)
    assert optimized_ops(lambda x: x ** n, x) == ["multiply", "multiply"]
    check(lambda x: x ** n, x)


def test_square_of_a_python_scalar_stays_weak():
    g = tj.jit(lambda x, s: x * (-s) ** 2).lower(np.float32(1), 1.5).optimized_graph
    assert [n.op for n in g.nodes] == ["negative", "multiply", "multiply"]
    check(lambda x, s: x * (-s) ** 2, np.float32(3), 1.5)


# ---------------------------------------------------------------- unsafe rewrites stay out


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_adding_positive_zero_is_kept(dtype):
    x = edge_values(dtype)
    for fn in (lambda x: fresh(x + 0.0), lambda x: fresh(0 + x), lambda x: fresh(x - -0.0)):
        assert optimized_ops(fn, x)[0] in ("add", "subtract")
        check(fn, x)


def test_complex_multiply_by_one_is_kept():
    x = np.array([complex(np.inf, 1.0), complex(0.0, -0.0)])
    fn = lambda x: fresh(x * 1)
    assert optimized_ops(fn, x) == ["multiply", "negative"]
    check(fn, x)


@pytest.mark.parametrize("dtype, exponent", [
    ("float16", 2), ("float32", 3), ("float64", 4), ("float64", 1), ("float32", -1),
    ("float64", 0.5), ("float64", -1.0)])
def test_float_powers_without_an_exact_rewrite_are_kept(dtype, exponent):
    x = edge_values(dtype)
    fn = lambda x: np.power(x, exponent)
    assert optimized_ops(fn, x) == ["power"]
    check(fn, x)


def test_power_with_an_array_exponent_is_kept():
    """NumPy's float loop squares exactly only for a 0-d exponent; otherwise it calls pow."""
    x = edge_values(F64)
    fn = lambda x: x ** np.full(x.shape, 2.0)
    assert optimized_ops(fn, x) == ["power"]
    check(fn, x)


def test_integer_negative_power_is_kept_and_raises():
    x = np.arange(3)
    assert optimized_ops(lambda x: x ** -1, x) == ["power"]
    with pytest.raises(ValueError):
        tj.jit(lambda x: x ** -1, backend="reference")(x)


def test_identity_that_changes_the_dtype_is_kept():
    x = edge_values("int8")
    assert optimized_ops(lambda x: fresh(x * np.float32(1)), x) == ["multiply", "negative"]
    check(lambda x: fresh(x * np.float32(1)), x)


def test_weakness_is_not_dropped():
    b = Builder(TensorType((), F64, weak=True))
    s = b.inputs[0]
    strong = b("convert", s, dtype=F64)
    back = b("reshape", b("reshape", s, shape=(1,)), shape=())
    g = simplify(b.graph(b("add", strong, back)))
    assert [n.op for n in g.nodes] == ["convert", "reshape", "reshape", "add"]


def test_array_result_is_never_an_argument():
    fn = tj.jit(lambda x: x * 1)
    x = np.arange(3.0)
    y = fn(x)
    assert y is not x and not np.shares_memory(x, y)
    assert [n.op for n in fn.lower(x).optimized_graph.nodes] == ["constant", "multiply"]


def test_python_int_argument_is_still_range_checked():
    with pytest.raises(OverflowError):
        np.multiply(2**70, 1)
    for fn in (lambda s: s * 1, lambda s: -s * 1, lambda s: (-s) ** 1):
        with pytest.raises(OverflowError):
            tj.jit(fn, backend="reference")(2**70)


# ---------------------------------------------------------------- random programs

DTYPES = ["bool", "int8", "int64", "uint8", "float16", "float32", "float64", "complex128"]
CONSTANTS = [0, 1, 2, 3, 4, -1, 0.0, -0.0, 1.0, 2.0, 0.5, -1.5, math.nan, math.inf, True,
             np.float32(1), np.float32(-0.0), np.int8(0), np.int8(1), np.float64(2), np.uint8(2)]
EXPONENTS = [1, 2, 3, 4, -1, 0.5, 2.0, np.float32(2), np.int8(3), np.uint8(2), True]
BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide"]
UNARY = ["negative", "exp", "square", "absolute", "isnan"]


def _step(kind: str, name, c, swap: bool) -> Callable:
    """One step of a program ``v = step(v, s)`` (``s`` is a Python scalar argument)."""
    op = getattr(np, name) if isinstance(name, str) else None
    steps = {
        "const": lambda v, s: op(c, v) if swap else op(v, c),
        "scalar": lambda v, s: op(s, v) if swap else op(v, s),
        "unary": lambda v, s: op(v),
        "twice": lambda v, s: op(v, c) + op(v, c),  # CSE
        "fold": lambda v, s: v + op(np.ones_like(v), c),  # a constant subexpression
        "transpose": lambda v, s: np.transpose(np.transpose(v, name), name),
        "reshape": lambda v, s: np.reshape(np.reshape(v, -1), v.shape),
        "astype": lambda v, s: v.astype(name),
        "broadcast": lambda v, s: np.broadcast_to(v, v.shape),
    }
    return steps[kind]


def _steps(kind, names, constants=None):
    return st.tuples(st.just(kind), names, st.none() if constants is None else constants,
                     st.booleans())


STEPS = st.one_of(
    _steps("const", st.sampled_from(BINARY), st.sampled_from(CONSTANTS)),
    _steps("const", st.just("power"), st.sampled_from(EXPONENTS)),
    _steps("scalar", st.sampled_from(BINARY + ["power"])),
    _steps("unary", st.sampled_from(UNARY)),
    _steps("twice", st.sampled_from(BINARY), st.sampled_from(CONSTANTS)),
    _steps("fold", st.sampled_from(BINARY + ["power"]), st.sampled_from(CONSTANTS)),
    _steps("transpose", st.sampled_from([(1, 0), (0, 1)])),
    _steps("reshape", st.none()),
    _steps("astype", st.sampled_from(DTYPES)),
    _steps("broadcast", st.none()),
)


def _run(graph: Graph, args, errors: str):
    with np.errstate(all=errors):
        try:
            return reference.compile(graph)(*args)
        except Exception as e:  # the graphs must raise alike
            return type(e)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(DTYPES), scalar=st.sampled_from([2, -0.0, 1.0, 0, 3]),
       steps=st.lists(STEPS, min_size=1, max_size=6), errors=st.sampled_from(["ignore", "raise"]),
       flatten=st.booleans(), data=st.data())
def test_simplify_keeps_random_programs_bit_for_bit(dtype, scalar, steps, errors, flatten, data):
    """Programs return their last two values, as they are (so rewrites must keep outputs
    fresh arrays) or flattened (so the rewrites inside may reduce to the argument)."""
    values = edge_values(dtype)
    x = values[data.draw(st.lists(st.integers(0, len(values) - 1), min_size=4, max_size=4))]
    args = (x.reshape(2, 2), scalar)
    fns = [_step(*s) for s in steps]

    def program(v, s):
        outs = []
        for f in fns:
            v = f(v, s)
            outs.append(v)
        return tuple(np.reshape(v, -1) if flatten else v for v in outs[-2:])

    try:
        graph = tj.jit(program).lower(*args).graph
    except TracejitError:  # a step NumPy rejects for these dtypes (traced before running)
        return
    optimized = verify(run_pipeline(graph, passes=BIT_EXACT))
    plain, simplified = (_run(g, args, errors) for g in (run_pipeline(graph, passes=()), optimized))
    if isinstance(plain, type):
        assert plain is simplified
    else:
        assert all(same(a, b) for a, b in zip(plain, simplified, strict=True))


def test_broadcasts_sink_into_elementwise_ops():
    """Elementwise ops read broadcast inputs unbroadcast, unary ones compute on the small
    operand, keepdims reshapes of reductions become keepdims reductions: bit for bit."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    c = np.float32(0.25)

    def fn(x):
        col = np.sum(x, axis=1).reshape(2, 1)  # -> sum(keepdims=True)
        wide = np.broadcast_to(col, (2, 3))
        small = -np.broadcast_to(np.reshape(c, (1,)), (3,))  # negate the one element
        return np.exp(wide) * x + np.broadcast_to(small, (2, 3)).reshape(2, 3)

    ops = optimized_ops(fn, x)
    assert "broadcast_to" not in ops and "reshape" not in ops
    check(fn, x)
