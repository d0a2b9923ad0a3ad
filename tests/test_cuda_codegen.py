"""The CUDA backend's code generator: what it fuses, how it launches, and that every
kernel it generates for a corpus of programs compiles with nvcc (sm_80 and sm_90).

No GPU is needed: the kernels are compiled, not run. The corpus enumerates the CUDA op
table (every op, every dtype it claims) so a new table line is compiled automatically.
"""

import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends.cuda.codegen import (
    INT32_MAX,
    MAP_GRID,
    MAX_GRID,
    MAX_PARTIALS,
    VECTOR,
    VECTOR_MIN,
    fusible,
    generate,
    grid_for,
    index_ctype,
    row_plan,
)
from tracejit.backends.cuda.ops import CUDA
from tracejit.ir import Graph, Node, Value
from tracejit.ir.registry import REGISTRY
from tracejit.ir.types import TensorType

DTYPES = [np.dtype(d) for d in (np.bool_, np.int32, np.int64, np.float32, np.float64)]
RNG = np.random.default_rng(0)
F32 = RNG.standard_normal((7, 33)).astype(np.float32)


def graph_of(fn, *args):
    return tj.jit(fn, backend="reference").lower(*args).optimized_graph


def node_graph(op, in_types, **attrs):
    """A one-node graph built directly (no tracing, no simplification)."""
    inputs = [Value(t, f"a{i}") for i, t in enumerate(in_types)]
    out = Value(REGISTRY[op].rule(*in_types, **attrs))
    return Graph(inputs, [Node(op, tuple(inputs), attrs, out, None)], [out], op)


def nin(op):
    return 3 if op == "where" else REGISTRY[op].ufunc.nin


def table_graphs():
    """(name, graph) for every op of the CUDA table and every dtype it computes in, with
    broadcasting operands, plus every cast."""
    out = []
    for op in sorted(CUDA.ops()):
        for dt in DTYPES:
            shapes = [(4, 8), (8,), (4, 1)][:nin(op)]
            types = [TensorType(s, dt) for s in shapes]
            if op == "where":
                types[0] = TensorType((4, 8), np.dtype(bool))
            try:
                g = node_graph(op, types)
            except Exception:
                continue  # NumPy has no loop for this dtype
            if fusible(g.nodes[0]):
                out.append((f"{op}_{dt.name}", g))
    for src in DTYPES:
        for dst in DTYPES:
            g = node_graph("convert", [TensorType((5, 3), src)], dtype=dst)
            if fusible(g.nodes[0]):
                out.append((f"convert_{src.name}_{dst.name}", g))
    return out


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


def chain(x, y):
    return np.tanh(x * y + 0.5) * np.exp(-x * x) + np.sqrt(np.abs(y))


def int_chain(a, b):
    return (a * b + 3) // (b - 1) % 7 - np.abs(a) + np.maximum(a, b) + (a << 2) + (b >> 1)


def bool_chain(p, q):
    return ((p & q) | ~p) ^ (p == q), p + q, p * q, np.where(p, q, ~q)


def huge_graph(reduce=True):
    """exp (and sum) over 2**31 + 5 float32: built directly, it cannot be allocated here."""
    x = Value(TensorType((2**31 + 5,), np.dtype(np.float32)), "x")
    e = Value(TensorType(x.type.shape, x.type.dtype))
    s = Value(TensorType((), x.type.dtype))
    nodes = [Node("exp", (x,), {}, e, None),
             Node("sum", (e,), {"axis": (0,), "keepdims": False, "dtype": None}, s, None)]
    if not reduce:
        return Graph([x], nodes[:1], [e], "huge_map")
    return Graph([x], nodes, [e, s], "huge")


I32 = RNG.integers(-50, 50, (7, 33)).astype(np.int32)
I64 = I32.astype(np.int64)
B = RNG.random((7, 33)) > 0.5
BIG = RNG.standard_normal(1 << 20).astype(np.float32)
V = RNG.standard_normal((33, 129)).astype(np.float32) * 3  # 4257 elements: 1 after the float4s
VA = RNG.integers(-100, 100, V.shape).astype(np.int32)


def program_graphs():
    W = RNG.standard_normal((33, 16)).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    p = [
        ("chain_f32", chain, F32, F32[0]),
        ("chain_f64", chain, F32.astype(np.float64), F32.astype(np.float64)),
        ("int_chain_i32", int_chain, I32, I32[0]),
        ("int_chain_i64", int_chain, I64, I64[:, :1]),
        ("bool_chain", bool_chain, B, B[0]),
        ("row_vector", lambda x, r: x * r + r, F32, F32[0]),
        ("column_vector", lambda x, c: x - c, F32, F32[:, :1]),
        ("zero_d", lambda x, s: x * s + 1.0, F32, np.float32(2.5)),
        ("python_scalars", lambda x, s, n: (x * s) ** s + n, F32, 0.5, 3),
        ("int_true_divide", lambda a, b: a / b, I32, I64),
        ("weak_int_compare", lambda a: (a == 2**40) | (a < 3), I32),
        ("casts", lambda x, a: (x.astype(np.float64) + a.astype(np.float32), a.astype(bool)),
         F32, I32),
        ("full_big", lambda x: (x.sum(), x.prod(), x.max(), x.min(), (x > 0).any(),
                                (x > -10).all()), BIG),
        ("full_int", lambda a: (a.sum(), a.max(), a.min(), a.prod()), I32),
        ("full_bool", lambda p: (p.sum(), p.any(), p.all(), p.max()), B),
        ("full_2d_f64", lambda x: (x * x).sum(), F32.astype(np.float64)),
        ("full_norm_keepdims", lambda x: np.sqrt((x * x).sum(keepdims=True)) + 1, BIG),
        ("softmax", softmax, F32),
        ("softmax_long_rows", softmax, RNG.standard_normal((4, 5000))),
        ("softmax_one_row", softmax, BIG[:3000]),
        ("softmax_3d", softmax, RNG.standard_normal((3, 4, 50)).astype(np.float32)),
        ("log_softmax", log_softmax, F32),
        ("logsumexp", logsumexp, F32),
        ("row_sum_2_axes", lambda x: x.sum(axis=(1, 2)), RNG.standard_normal((3, 4, 50))),
        ("column_sum", lambda x: x.sum(axis=0), F32),
        ("column_max_int", lambda a: a.max(axis=0), I64),
        ("middle_axis", lambda x: (x.sum(axis=1), x * 2), RNG.standard_normal((4, 6, 5))),
        ("outer_axes", lambda x: x.min(axis=(0, 2)), RNG.standard_normal((4, 6, 5))),
        ("siblings", lambda x: (x.sum(axis=0), x.sum(axis=1), np.exp(x)), F32),
        ("matmul_epilogue", lambda x, W, b: np.tanh(x @ W + b), F32, W, b),
        ("empty", lambda x: (x + 1, x.sum(), x.sum(axis=0)), np.zeros((0, 5), np.float32)),
        ("float_to_int", lambda x: (x.astype(np.int32), x.astype(np.int64) + 1,
                                    x.astype(np.float64).astype(np.int32)), F32),
        ("float_to_int_reductions", lambda x: (x.sum(dtype=np.int32), x.sum(axis=1, dtype=np.int64),
                                               x.sum(axis=0, dtype=np.int32)), F32),
        # map kernels with a float4 vector path (at least VECTOR_MIN elements)
        ("vec_full_shape", chain, V, V[::-1].copy()),
        ("vec_n_multiple_of_4", lambda x, y: x * y + 1, BIG[:1 << 14].reshape(64, 256), BIG[:256]),
        ("vec_python_scalar", lambda x, s: x * s + 1.0, BIG[:1027], 0.5),
        ("vec_power_half", lambda x, s: x ** s, V, 0.5),
        ("vec_zero_d", lambda x, s: x / s, V, np.float32(3.0)),
        ("vec_broadcast", lambda x, r, c: (x * r + c, x - r), V, V[0], V[:, :1]),
        ("vec_outer", lambda c, r: c + r, V[:, :1], V[0]),
        ("vec_mixed_dtypes", lambda x, a: (x > 0, x + a.astype(np.float32), a * 2,
                                           x.astype(np.int32)), V, VA),
        ("vec_int_to_float", lambda a: a.astype(np.float32) * 0.5, VA),
        ("vec_none_float64", lambda x: x * 2, V.astype(np.float64)),
    ]
    return [(name, graph_of(fn, *args)) for name, fn, *args in p]


def corpus():
    return program_graphs() + table_graphs() + [("huge", huge_graph()),
                                                ("huge_map", huge_graph(reduce=False))]


# ---------------------------------------------------------------- compile everything


@pytest.fixture(scope="module")
def compiled():
    """Generate every corpus program into one .cu file, compile it for sm_80 and sm_90 in
    parallel; returns {arch: (returncode, stderr)} and the modules."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    modules = [(name, generate(g, prefix=f"{name}_")) for name, g in corpus()]
    tmp = tempfile.mkdtemp(prefix="tracejit_cuda_")
    path = os.path.join(tmp, "corpus.cu")
    with open(path, "w") as f:
        f.write("\n\n".join(m.source for _, m in modules))
    procs = {arch: subprocess.Popen(
        ["nvcc", "-cubin", f"-arch={arch}", "-Werror", "all-warnings",
         "-o", os.path.join(tmp, f"corpus_{arch}.cubin"), path],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for arch in ("sm_80", "sm_90")}
    results = {arch: (p.wait(timeout=300), p.stdout.read()) for arch, p in procs.items()}
    yield results, modules, path
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_corpus_compiles(compiled, arch):
    results, modules, path = compiled
    rc, out = results[arch]
    assert rc == 0, f"nvcc -arch={arch} failed on {path}:\n{out[-6000:]}"
    assert sum(len(m.kernel_names) for _, m in modules) > 100


# ---------------------------------------------------------------- the op table


def test_every_table_op_is_fusible_for_some_dtype():
    covered = {name.rsplit("_", 1)[0] for name, _ in table_graphs()}
    missing = {op for op in CUDA.ops() if op not in covered}
    assert not missing


def test_float32_math_calls_float_functions():
    f32 = np.dtype(np.float32)
    for op, name in CUDA.MATH.items():
        text = CUDA.template(op, (f32,) * nin(op))
        assert f"{name}f(" in text, (op, text)
        assert CUDA.template(op, (np.dtype(np.float64),) * nin(op)).startswith(f"{name}(")


def test_fusible_decisions():
    f32, f64, i32, i64 = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))
    conv = lambda s, d: node_graph("convert", [TensorType((3,), s)], dtype=d).nodes[0]
    assert fusible(conv(f32, i32)) and fusible(conv(f64, i64))  # through tj_float_to_int
    assert fusible(conv(i32, f32)) and fusible(conv(f64, np.dtype(bool)))
    mm = node_graph("matmul", [TensorType((4, 3), f32), TensorType((3, 5), f32)]).nodes[0]
    assert fusible(mm)  # K = 3: unrolled in a loop kernel
    mm = node_graph("matmul", [TensorType((4, 17), f32), TensorType((17, 5), f32)]).nodes[0]
    assert not fusible(mm)  # cuBLAS, through CuPy
    assert fusible(node_graph("exp", [TensorType((3,), f32)]).nodes[0])
    assert not fusible(node_graph("exp", [TensorType((3,), np.dtype(np.float16))]).nodes[0])
    assert not fusible(node_graph("power", [TensorType((3,), i32)] * 2).nodes[0])
    assert not fusible(node_graph("add", [TensorType((3,), np.dtype(np.uint8))] * 2).nodes[0])
    red = dict(axis=(0,), keepdims=False)
    assert fusible(node_graph("sum", [TensorType((3,), i32)], dtype=None, **red).nodes[0])
    assert fusible(node_graph("sum", [TensorType((3,), f32)], dtype=i64, **red).nodes[0])
    assert not fusible(node_graph("argmax", [TensorType((3,), f32)], axis=0,
                                  keepdims=False).nodes[0])


def test_literals_are_exact():
    lit, f32, f64 = CUDA.literal, np.dtype(np.float32), np.dtype(np.float64)
    assert lit(0.1, f32) == "0.10000000149011612f"
    assert lit(-np.inf, f64) == "-TJ_INFINITY" and lit(np.nan, f32) == "TJ_NAN_F"
    assert lit(-2**31, np.dtype(np.int32)) == "(-2147483647 - 1)"
    assert lit(2**40, np.dtype(np.int64)) == "1099511627776LL"
    assert lit(-0.0, f64) == "(-0.0)" and lit(True, np.dtype(bool)) == "true"


# ---------------------------------------------------------------- launch decisions


def test_index_width():
    assert index_ctype(INT32_MAX) == "unsigned"
    assert index_ctype(INT32_MAX + 1) == "unsigned long long"
    m = generate(huge_graph())
    assert [s.index for s in m.steps] == ["unsigned long long"]
    assert "2147483653ull" in m.source and "unsigned long long i =" in m.source
    small = generate(graph_of(chain, F32, F32))
    assert all(s.index == "unsigned" for s in small.steps if s.kind == "loop")
    assert "unsigned long long" not in small.source.split("#endif")[-1]


def test_grid_and_block_choice():
    assert grid_for(0) == 1 and grid_for(1) == 1 and grid_for(257) == 2
    assert grid_for(10**9) == MAX_GRID
    assert row_plan(1, 10**6) == ("block", 1024, 1)
    assert row_plan(1000, 33) == ("warp", 256, 125)
    assert row_plan(10, 5000) == ("block", 256, 10)


def test_map_kernel_launch():
    (step,) = generate(graph_of(lambda x, y: x * y + 1, F32, F32[0])).steps
    (launch,) = step.launches
    assert step.form == "map" and launch.function == "kernel0"
    assert (launch.grid, launch.block) == (1, 256)
    assert [(a.name, a.role, a.shape) for a in launch.args] == [
        ("x0", "input", (7, 33)), ("x1", "input", (33,)), ("o1", "output", (7, 33))]


def test_python_scalar_is_passed_by_value():
    m = generate(graph_of(lambda x, s: x * s, F32, 0.5))
    args = m.steps[0].launches[0].args
    assert [(a.role, a.ctype) for a in args] == [
        ("input", "const float* __restrict__"), ("scalar", "double"),
        ("output", "float* __restrict__")]


def test_full_reduction_is_two_stage():
    m = generate(graph_of(lambda x: (x.sum(), x.max()), BIG))
    (step,) = m.steps
    first, second = step.launches
    assert step.form == "full"
    assert (first.grid, first.block) == (MAX_PARTIALS, 256)
    assert (second.function, second.grid) == ("kernel0_combine", 1)
    scratch = [a for a in first.args if a.role == "scratch"]
    assert [a.shape for a in scratch] == [(MAX_PARTIALS,)] * 2
    assert "__shfl_down_sync" in m.source and "__syncthreads();" in m.source
    (one,) = generate(graph_of(lambda x: x.sum(), F32)).steps[0].launches
    assert one.grid == 1 and all(a.role != "scratch" for a in one.args)


def test_softmax_is_one_row_kernel_with_three_phases():
    m = generate(graph_of(softmax, F32))
    (step,) = m.steps
    (launch,) = step.launches
    assert step.form == "rows" and (launch.grid, launch.block) == (1, 256)
    assert [a.role for a in launch.args] == ["input", "output"]
    for p in range(3):
        assert f"// phase {p}" in m.source
    kernels = m.source.split("#endif  // TRACEJIT_CUDA_PRELUDE")[1]
    assert "expf(" in kernels and "exp(" not in kernels.replace("expf(", "")
    long_rows = generate(graph_of(softmax, RNG.standard_normal((4, 5000)))).steps[0]
    assert long_rows.launches[0].grid == 4 and "sh0[NWARPS + 1]" in generate(
        graph_of(softmax, RNG.standard_normal((4, 5000)))).source


def test_column_reduction_and_matmul_epilogue():
    (step,) = generate(graph_of(lambda x: x.sum(axis=0), F32)).steps  # 7 x 33
    assert step.form == "columns" and [(c.function, c.grid) for c in step.launches] == [
        ("kernel0", 2)]  # two tiles of up to 32 results; 7 rows need no shares
    tall = generate(graph_of(lambda x: x.sum(axis=0), np.ones((65536, 2), np.float32)))
    (launch, combine) = tall.steps[0].launches  # 2 results: 128 row lanes, 32 shares
    assert (launch.grid, combine.function, combine.grid) == (32, "kernel0_combine", 1)
    assert "__shared__ float sh0[256]" in tall.source and "p0[s * 2u + q]" in tall.source
    m = generate(graph_of(lambda x, W, b: np.tanh(x @ W + b), F32,
                          np.ones((33, 16), np.float32), np.ones(16, np.float32)))
    assert [(s.kind, s.ops) for s in m.steps] == [
        ("library", ["matmul"]), ("loop", ["add", "tanh"])]
    assert m.kernel_names == ["kernel1"] and "tanhf(" in m.source


def test_source_names_ops_and_lines():
    src = generate(graph_of(chain, F32, F32)).source
    assert "// tanh, test_cuda_codegen.py:" in src
    assert 'extern "C" __global__' in src and "cupy" not in src.lower()


def test_float_to_int_casts_use_the_helper():
    src = generate(graph_of(lambda x, y: (x.astype(np.int32), y.astype(np.int64)), F32,
                            F32.astype(np.float64))).source
    assert "tj_float_to_int<int>(x0[i])" in src and "tj_float_to_int<long long>(x1[i])" in src
    red = generate(graph_of(lambda x: x.sum(dtype=np.int64), F32)).source
    assert "tj_float_to_int<long long>(x0[" in red
    other = generate(graph_of(lambda x, a: (x.astype(bool), a.astype(np.float32),
                                            a.astype(np.int64)), F32, I32)).source
    assert "tj_float_to_int<" not in other.split("#endif")[-1]


# ---------------------------------------------------------------- the vector path


def map_step(fn, *args):
    m = generate(graph_of(fn, *args))
    (step,) = m.steps
    assert step.form == "map"
    return step, m.source.split("#endif  // TRACEJIT_CUDA_PRELUDE")[1]


def test_vector_path_for_full_shape_float32():
    step, src = map_step(lambda x, y: x * y + 1, V, V)
    (launch,) = step.launches
    assert step.vector == VECTOR and launch.grid == grid_for(V.size // 4, cap=MAP_GRID)
    assert [a.name for a in launch.args] == ["x0", "x1", "o1"]  # unchanged
    assert ("if ((((unsigned long long)x0 | (unsigned long long)x1 | (unsigned long long)o1) "
            "& 15ull) == 0ull) {") in src
    assert "const float4 x0v = reinterpret_cast<const float4*>(x0)[g];" in src
    assert "reinterpret_cast<float4*>(o1)[g] = o1v;" in src
    for lane in "xyzw":
        assert f"(x0v.{lane} * x1v.{lane})" in src and f"o1v.{lane} = " in src
    assert "g < 1064u;" in src  # 4257 // 4 groups of 4, then one element in the tail
    assert "for (unsigned i = 4256u + (unsigned)blockIdx.x" in src
    assert src.count("i < 4257u;") == 2  # the tail and the misaligned fallback
    assert "\n  } else {\n" in src  # the scalar loop for misaligned pointers
    _, src = map_step(lambda x, y: x * y, V[:32], V[:32])  # 32 * 129: no tail
    assert src.count("i < 4128u;") == 1 and "4128u +" not in src


def test_vector_path_reads_other_operands_per_element():
    step, src = map_step(lambda x, r, s: (x * r + s, x > 0), V, V[0], 0.5)
    assert step.vector == VECTOR
    assert "reinterpret_cast<const float4*>(x0)" in src
    assert "reinterpret_cast<const float4*>(x1)" not in src  # broadcast: read at i1
    assert "((unsigned long long)x0 | (unsigned long long)o1) & 15ull" in src  # not o2: bool
    assert "const unsigned i = 4u * g + 3u;" in src and "x1[i1]" in src and "o2[i] = " in src
    assert "(x0v.w * x1[i1])" in src and "((float)s2)" in src
    step, src = map_step(lambda a: a.astype(np.float32), VA)  # only the output is float32
    assert step.vector == VECTOR and "const float4" not in src
    assert "(unsigned long long)o0) & 15ull" in src


def test_no_vector_path():
    small = np.ones(VECTOR_MIN - 1, np.float32)
    cases = [(lambda x: x + 1, small), (lambda x: x + 1, V.astype(np.float64)),
             (lambda a, b: a * b, VA, VA), (lambda p: ~p, V > 0), (lambda x: x * 2, F32)]
    for fn, *args in cases:
        step, src = map_step(fn, *args)
        assert step.vector == 1 and "float4" not in src and "15ull" not in src
        assert step.launches[0].grid == grid_for(args[0].size, cap=MAP_GRID)
    step, _ = map_step(lambda x: x + 1, np.ones(VECTOR_MIN, np.float32))
    assert step.vector == VECTOR
    for fn in (softmax, lambda x: x.sum(), lambda x: x.sum(axis=0)):
        m = generate(graph_of(fn, V))
        assert all(s.vector == 1 for s in m.steps) and "float4" not in m.source


def test_vector_path_with_64_bit_indices():
    m = generate(huge_graph(reduce=False))
    (step,) = m.steps
    assert step.vector == VECTOR and step.index == "unsigned long long"
    assert "g < 536870913ull;" in m.source and "2147483652ull +" in m.source
    assert step.launches[0].grid == MAP_GRID


def test_corpus_has_vector_paths():
    for name, g in program_graphs():
        if name.startswith("vec_"):
            want = 1 if name == "vec_none_float64" else VECTOR
            assert [s.vector for s in generate(g).steps] == [want], name
