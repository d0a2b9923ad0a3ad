"""cudasim, the emulated CuPy (tools/cudasim): it runs the CUDA C that tracejit's code
generator emits, on CPU threads, and gives the answers NumPy gives; its CuPy subset has
CuPy's semantics and is strict where a runner could go wrong silently.

Kernels are launched here by hand, as codegen's Step/Launch/Arg descriptions say (a
runner's job), on fibers (the default scheduler); CUDASIM_SCHEDULERS=threads,fibers runs
the scheduler-dependent tests on OS threads too, the slow race-hunting run. The
programs share one compiled module (module-scoped fixture). The whole test_cuda_codegen
corpus is compiled through the emulator's g++ path (a CUDA intrinsic missing from the shim
fails here) and run on random inputs against the reference backend.
"""

import os
import shutil
import sys
import textwrap

import cudasim
import numpy as np
import pytest
from cudasim import cupy as cp
from cudasim import cupyx
from test_cuda_codegen import bool_chain, chain, graph_of, int_chain, softmax

from tracejit.backends.cuda.codegen import MAX_PARTIALS, generate

pytestmark = pytest.mark.skipif(shutil.which(cudasim._cuda.CXX) is None, reason="no g++")

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


X = f32(7, 33)
I32 = RNG.integers(-50, 50, (7, 33)).astype(np.int32)
B = RNG.random((7, 33)) > 0.5
U300K = RNG.random(300_000).astype(np.float32)  # positive: the sum is far from 0
V = f32(33, 129) * 3  # 4257 elements: a float4 vector path (if codegen has one) and a tail
W, BIAS = f32(33, 16), f32(16)

# name -> (function, arguments): every kernel form, float, int and bool dtypes
PROGRAMS = {
    "map": (lambda x, r, s: x * r + s, X, X[0], 0.5),  # broadcast row, Python scalar
    "map_big": (chain, V, V[::-1].copy()),
    "map_1d": (lambda x: np.exp(x) * 2 - x, f32(4099)),
    "full_300k": (lambda x: (x.sum(), x.max(), x.min()), U300K),
    "full_20k": (lambda x: (x.sum(), (x * x).max()), f32(20_000)),
    "full_one_block": (lambda x: x.prod(), X[:2] * 0.5 + 1),
    "softmax_warp": (softmax, f32(50, 300)),  # rows <= 1024: one warp per row
    "softmax_block": (softmax, f32(3, 2000)),  # longer rows: one block (256) per row
    "softmax_one_row": (softmax, f32(1, 3000)),  # one row: a block of 1024
    "columns": (lambda x: (x.sum(axis=0), x.max(axis=0)), f32(40, 37)),
    "middle_axis": (lambda x: (x.sum(axis=1), x * 2), RNG.standard_normal((4, 6, 5))),
    "int_map": (int_chain, I32, I32[0]),
    "int_reductions": (lambda a: (a.sum(), a.max(axis=1), a.min(axis=0), a.prod()),
                       np.where(I32 > 0, 1, -1).astype(np.int32)),
    "bool_map": (bool_chain, B, B[0]),
    "bool_reductions": (lambda p: (p.sum(), p.any(axis=0), p.max(axis=0)), B),
    # bool max/min/any/all reduced by warp shuffles: see test_bool_shuffle_reductions
    "bool_full": (lambda p: (p.any(), p.all()), RNG.random(3000) > 0.1),
    "bool_rows": (lambda p: (p.all(axis=1), p.max(axis=1)), B),
    "matmul_epilogue": (lambda x, w, b: np.tanh(x @ w + b), X, W, BIAS),
}


class Program:
    def __init__(self, name, fn, *args):
        self.name, self.fn, self.args = name, fn, args
        self.graph = graph_of(fn, *args)
        self.module = generate(self.graph, prefix=f"{name}_")


@pytest.fixture(scope="module")
def programs():
    return {name: Program(name, *spec) for name, spec in PROGRAMS.items()}


@pytest.fixture(scope="module")
def raw(programs):
    """One module holding every program's kernels (compiled once)."""
    return cp.RawModule(code="\n\n".join(p.module.source for p in programs.values()))


@pytest.fixture(autouse=True)
def fresh():
    cudasim.reset()
    yield
    cudasim.reset()


# The schedulers the scheduler-dependent tests run under; OS threads only when asked.
SCHEDULERS = os.environ.get("CUDASIM_SCHEDULERS", "fibers").split(",")


@pytest.fixture(params=SCHEDULERS)
def scheduler(request):
    before = cudasim.scheduler()
    cudasim.set_scheduler(request.param)
    yield request.param
    cudasim.set_scheduler(before)


# library steps, as a runner would call CuPy for them (others are not needed here)
LIBRARY = {
    "matmul": lambda a, b: cp.matmul(a, b),
    "reshape": lambda x, *, shape: x.reshape(shape),
    "transpose": lambda x, *, perm: x.transpose(perm),
    "broadcast_to": lambda x, *, shape: cp.broadcast_to(x, shape),
}


def execute(module, graph, raw, args):
    """Runs a CudaModule's steps as codegen describes them: inputs uploaded, outputs (and
    scratch arrays) allocated with cupy.empty, every launch as described (arguments in
    order, Python scalars by value as NumPy scalars of the Arg's dtype), library steps as
    CuPy calls. Returns the graph's outputs, still on the device."""
    vals = {v: (a if isinstance(a, (bool, int, float)) else cp.asarray(a))
            for v, a in zip(graph.inputs, args, strict=True)}
    vals.update({n.out: cp.asarray(np.asarray(n.attrs["value"])) for n in graph.nodes
                 if n.op == "constant" and n.out.type.ndim > 0})
    for step in module.steps:
        if step.kind == "library":
            (node,) = step.kernel.nodes
            if node.op not in LIBRARY:
                pytest.skip(f"library step {node.op}")
            vals[node.out] = LIBRARY[node.op](*(vals[v] for v in node.inputs), **node.attrs)
            continue
        scratch = {}
        for launch in step.launches:
            args = []
            for a in launch.args:
                if a.role == "scalar":
                    args.append(a.dtype.type(vals[a.value]))
                    continue
                if a.role == "input":
                    x = cp.ascontiguousarray(vals[a.value], a.dtype)  # 0-d: shape (1,)
                elif a.role == "output":
                    x = vals.setdefault(a.value, cp.empty(a.shape, a.dtype))
                else:
                    x = scratch.setdefault(a.name, cp.empty(a.shape, a.dtype))
                assert x.shape == a.shape or a.shape == () and x.shape == (1,)
                args.append(x)
            raw.get_function(launch.function)((launch.grid,), (launch.block,), tuple(args))
    return [vals[v] for v in graph.outputs]


def run(prog: Program, raw, args=None):
    """``execute``, checking that nothing crossed the bus after the inputs went up."""
    inputs = [a if isinstance(a, (float, int)) else cp.asarray(a) for a in args or prog.args]
    cudasim.stats.reset()
    out = execute(prog.module, prog.graph, raw, inputs)
    launches = sum(len(s.launches) for s in prog.module.steps)
    assert cudasim.stats.transfers == 0 and cudasim.stats.launches == launches
    return out


def check(prog: Program, raw, args=None, rtol=1e-5):
    args = args or prog.args
    got = [x.get() for x in run(prog, raw, args)]
    assert cudasim.stats.d2h == len(got)
    want = prog.fn(*args)
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g_, w in zip(got, want, strict=True):
        w = np.asarray(w)
        assert g_.dtype == w.dtype and g_.shape == w.shape, (g_.dtype, w.dtype, g_.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g_, w, rtol=rtol, atol=1e-6 * np.abs(w).max())
        else:
            np.testing.assert_array_equal(g_, w)


# ---------------------------------------------------------------- generated kernels


@pytest.mark.parametrize("name", [n for n in PROGRAMS if n != "full_300k"])
def test_generated_kernels_match_numpy(programs, raw, scheduler, name):
    check(programs[name], raw)


def test_bool_reductions_shuffle_in_every_lane(programs, raw, scheduler):
    """A bool any/all combined with || must still run each shuffle in all 32 lanes (the
    emulator fails a launch whose lanes reach different shuffles)."""
    cudasim.set_deadlock_seconds(0.2)
    for name in ("bool_full", "bool_rows"):
        check(programs[name], raw)


def test_python_scalar_is_a_double_by_value(programs, raw):
    (launch,) = programs["map"].module.steps[0].launches
    assert [a.ctype for a in launch.args if a.role == "scalar"] == ["double"]
    check(programs["map"], raw, (X, X[0], -3.25))


def test_full_reduction_two_stages(programs, raw):
    """300_000 elements: 1024 blocks write partials, a one-block kernel combines them."""
    prog = programs["full_300k"]
    (step,) = prog.module.steps
    first, second = step.launches
    assert first.grid == MAX_PARTIALS and second.grid == 1
    assert any(a.role == "scratch" for a in first.args)
    cudasim.set_scheduler("fibers")  # as OS threads: about 10 s on 2 cores
    total, hi, lo = (x.get() for x in run(prog, raw))
    np.testing.assert_allclose(total, U300K.sum(dtype=np.float64), rtol=1e-5)
    assert hi == U300K.max() and lo == U300K.min()
    assert cudasim.stats.kernels == [first.function, second.function]


def test_vector_path_with_a_misaligned_view(programs, raw, scheduler):
    """A 1-D map kernel reads its input through float4 only if the pointer is 16-byte
    aligned: a view starting one element in takes the scalar path; same answers."""
    prog = programs["map_1d"]
    assert prog.module.steps[0].vector == 4 and "float4" in prog.module.source
    base = cp.asarray(np.concatenate([[0], prog.args[0]]).astype(np.float32))
    assert base.data.ptr % 256 == 0 and base[1:].data.ptr % 16 == 4
    for x in (cp.asarray(prog.args[0]), base[1:]):
        (out,) = run(prog, raw, [x])
        np.testing.assert_allclose(out.get(), prog.fn(prog.args[0]), rtol=1e-6)


def test_outputs_stay_on_the_device_between_steps(programs, raw):
    prog = programs["matmul_epilogue"]
    assert [s.kind for s in prog.module.steps] == ["library", "loop"]
    (out,) = run(prog, raw)  # run asserts no transfer happened
    assert isinstance(out, cp.ndarray) and out.device.id == 0
    np.testing.assert_allclose(out.get(), prog.fn(*prog.args), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- hand-written kernels

INTRINSICS = r"""
extern "C" __global__ void __launch_bounds__(64) warp_ops(
    const int* __restrict__ x, int* __restrict__ out, unsigned* __restrict__ ballot,
    float* __restrict__ block_sum, int* __restrict__ count) {
  const unsigned t = threadIdx.x, lane = t % 32u, i = blockIdx.x * blockDim.x + t;
  const int v = x[i];
  out[6 * i + 0] = __shfl_down_sync(0xffffffffu, v, 3);
  out[6 * i + 1] = __shfl_up_sync(0xffffffffu, v, 5);
  out[6 * i + 2] = __shfl_xor_sync(0xffffffffu, v, 7);
  out[6 * i + 3] = __shfl_sync(0xffffffffu, v, 9);
  out[6 * i + 4] = __shfl_down_sync(0xffffffffu, v, 2, 8);  // segments of 8 lanes
  out[6 * i + 5] = __any_sync(0xffffffffu, v > 90) * 2 + __all_sync(0xffffffffu, v >= 0);
  const unsigned b = __ballot_sync(0xffffffffu, v & 1);
  if (lane == 0) ballot[i / 32u] = b;
  __shared__ float sh[64];
  sh[t] = (float)v;
  __syncthreads();
  if (t == 0) {
    float s = 0.0f;
    for (int k = 0; k < 64; ++k) s += sh[k];
    block_sum[blockIdx.x] = s;
  }
  atomicAdd(count, v);
}

extern "C" __global__ void write_past_end(float* o, int n) {
  if (threadIdx.x == 0) o[n] = 1.0f;
}

extern "C" __global__ void deadlock(int* o) {
  if (threadIdx.x == 0) __syncwarp(); else __syncthreads();
  o[threadIdx.x] = 1;
}

extern "C" __global__ void divergent(int* o, int skip) {
  // in block 1 (if skip), lane 3 skips the first shuffle: it meets the others' first
  // shuffle with its second one
  int v = 1;
  if (!(skip && blockIdx.x == 1 && threadIdx.x == 3)) v += __shfl_down_sync(0xffffffffu, v, 1);
  v = __shfl_sync(0xffffffffu, v, threadIdx.x % 32);
  o[threadIdx.x] = v;
}

extern "C" __global__ void early_exit(const int* x, int* o) {
  // half the block returns at once; the rest still meet at __syncthreads and shuffle
  if (threadIdx.x % 2 == 1) return;
  __shared__ int sh[128];
  sh[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  o[threadIdx.x] = sh[(threadIdx.x + 2) % blockDim.x] + __shfl_down_sync(0x55555555u, 1, 2);
}

extern "C" __global__ void vector_types(const float4* __restrict__ x, double* o) {
  const float4 v = __ldg(&x[threadIdx.x]);
  const double2 d = make_double2(v.x + v.y, v.z * v.w);
  o[threadIdx.x] = d.x + d.y + __int_as_float(__float_as_int(1.5f)) +
                   __longlong_as_double(__double_as_longlong(0.25)) + rsqrtf(4.0f);
}
"""


@pytest.fixture(scope="module")
def intrinsics():
    return cp.RawModule(code=INTRINSICS)


def test_warp_intrinsics_and_shared_memory(intrinsics, scheduler):
    x = RNG.integers(0, 100, 128).astype(np.int32)
    out, ballot = cp.empty(6 * 128, np.int32), cp.empty(4, np.uint32)
    sums, count = cp.empty(2, np.float32), cp.zeros(1, np.int32)
    intrinsics.get_function("warp_ops")(2, 64, (cp.asarray(x), out, ballot, sums, count))
    got = out.get().reshape(128, 6)
    lane = np.arange(128) % 32
    w = np.arange(128) - lane  # first thread of the warp
    assert (got[:, 0] == np.where(lane + 3 < 32, x[np.minimum(np.arange(128) + 3, 127)], x)).all()
    assert (got[:, 1] == np.where(lane >= 5, x[np.arange(128) - 5], x)).all()
    assert (got[:, 2] == x[w + (lane ^ 7)]).all()
    assert (got[:, 3] == x[w + 9]).all()
    assert (got[:, 4] == np.where(lane % 8 + 2 < 8, x[np.minimum(np.arange(128) + 2, 127)],
                                  x)).all()
    warp_any = (x > 90).reshape(4, 32).any(axis=1).repeat(32)
    assert (got[:, 5] == warp_any * 2 + 1).all()
    bits = (x & 1).reshape(4, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    assert (ballot.get() == bits.sum(axis=1)).all()
    assert (sums.get() == x.reshape(2, 64).sum(axis=1)).all()
    assert count.get()[0] == x.sum()


def test_threads_that_return_early_stop_counting_for_barriers(intrinsics, scheduler):
    x = np.arange(128, dtype=np.int32)
    o = cp.full(128, -1, np.int32)
    intrinsics.get_function("early_exit")(1, 128, (cp.asarray(x), o))
    even = np.arange(0, 128, 2)
    assert (o.get()[even] == (even + 2) % 128 + 1).all() and (o.get()[1::2] == -1).all()


def test_vector_types_and_bit_casts(intrinsics, scheduler):
    x = f32(32, 4)
    o = cp.empty(32, np.float64)
    intrinsics.get_function("vector_types")(1, 32, (cp.asarray(x), o))
    want = (x[:, 0] + x[:, 1]).astype(np.float64) + x[:, 2] * x[:, 3] + 1.5 + 0.25 + 0.5
    np.testing.assert_allclose(o.get(), want, rtol=1e-6)
    shifted = cp.asarray(np.zeros(32 * 4 + 1, np.float32))[1:]  # 4 bytes past 256-aligned
    with pytest.raises(cudasim.IllegalAddressError, match="misaligned"):
        intrinsics.get_function("vector_types")(1, 32, (shifted, o))


def test_a_write_past_the_end_is_reported(intrinsics):
    o = cp.zeros(10, np.float32)
    with pytest.raises(cudasim.IllegalAddressError, match="write_past_end"):
        intrinsics.get_function("write_past_end")(1, 32, (o, np.int32(10)))
    intrinsics.get_function("write_past_end")(1, 32, (cp.zeros(11, np.float32)[:10], np.int32(10)))


def test_a_deadlock_is_reported(intrinsics, scheduler):
    cudasim.set_deadlock_seconds(0.2)  # threads: no progress for 0.2 s while all sleep
    with pytest.raises(cudasim.CUDADriverError, match=r"deadlock.*\(block 0\)"):
        intrinsics.get_function("deadlock")(1, 64, (cp.zeros(64, np.int32),))
    test_vector_types_and_bit_casts(intrinsics, scheduler)  # launches work again afterwards


def test_a_divergent_shuffle_is_reported(intrinsics, scheduler):
    o = cp.zeros(64, np.int32)
    with pytest.raises(cudasim.CUDADriverError, match=r"divergent warp operation.*\(block 1\)"):
        intrinsics.get_function("divergent")(2, 64, (o, np.int32(1)))
    intrinsics.get_function("divergent")(2, 64, (o, np.int32(0)))
    assert (o.get() == 2).all()


# ---------------------------------------------------------------- the launch check


def test_launch_arguments_are_checked_strictly(programs, raw):
    (launch,) = programs["map"].module.steps[0].launches
    k = raw.get_function(launch.function)
    x, r, o = cp.asarray(X), cp.asarray(X[0]), cp.empty(X.shape, np.float32)
    ok = (x, r, np.float64(0.5), o)
    k(launch.grid, launch.block, ok)  # ints or 1-tuples
    bad = {
        "takes 4 arguments": (x, r, np.float64(0.5)),
        "must be a device array": (X, r, np.float64(0.5), o),
        "must be a float32 array": (x.astype(np.float64), r, np.float64(0.5), o),
        "C-contiguous": (x, r, np.float64(0.5), cp.empty(X.shape[::-1], np.float32).T),
        "NumPy scalar of type float64": (x, r, 0.5, o),
        "got numpy.float32": (x, r, np.float32(0.5), o),
    }
    for message, args in bad.items():
        with pytest.raises(TypeError, match=message):
            k((launch.grid,), (launch.block,), args)
    with pytest.raises(TypeError, match="tuple"):
        k((launch.grid,), (launch.block,), list(ok))
    with pytest.raises(ValueError, match="overlaps"):
        k(1, launch.block, (x, r, np.float64(0.5), x))
    with pytest.raises(cudasim.CUDADriverError, match="__launch_bounds__"):
        k(1, 128, ok)
    with pytest.raises(cudasim.CUDADriverError, match="INVALID_VALUE"):
        k(0, launch.block, ok)
    with pytest.raises(NotImplementedError):
        k((1, 2), launch.block, ok)
    with pytest.raises(cudasim.CUDADriverError, match="NOT_FOUND"):
        raw.get_function("no_such_kernel")
    assert cudasim.stats.launches == 1


def test_arrays_and_kernels_belong_to_a_device(programs, raw):
    cudasim.set_device_count(2)
    (launch,) = programs["map"].module.steps[0].launches
    k0 = raw.get_function(launch.function)
    x, r = cp.asarray(X), cp.asarray(X[0])
    with cp.cuda.Device(1):
        o1 = cp.empty(X.shape, np.float32)
        with pytest.raises(cudasim.CUDADriverError, match="INVALID_HANDLE"):
            k0(1, 256, (x, r, np.float64(0.5), o1))
        k1 = raw.get_function(launch.function)
        with pytest.raises(ValueError, match="array device = 0 while current = 1"):
            k1(1, 256, (x, r, np.float64(0.5), o1))
        cudasim.stats.reset()
        x1, r1 = cp.asarray(x), cp.asarray(r)
        assert cudasim.stats.d2d == 2 and cudasim.stats.h2d == 0
        k1(1, 256, (x1, r1, np.float64(0.5), o1))
    np.testing.assert_allclose(o1.get(), X * X[0] + 0.5, rtol=1e-6)


def test_compile_errors_and_the_compile_cache():
    with pytest.raises(cudasim.CompileError, match="no_such_function"):
        cp.RawModule(code='extern "C" __global__ void k(float* o) { no_such_function(); }'
                     ).get_function("k")
    a = cudasim.compile_module(INTRINSICS)
    assert cudasim.compile_module(INTRINSICS) is a  # once per process


def test_kernel_signatures_are_parsed():
    sigs = cudasim.kernels_of(INTRINSICS)
    assert set(sigs) == {"warp_ops", "write_past_end", "deadlock", "divergent", "early_exit",
                         "vector_types"}
    w = sigs["warp_ops"]
    assert w.launch_bounds == 64 and sigs["deadlock"].launch_bounds is None
    assert [(p.ctype, p.dtype.name, p.const, p.restrict) for p in w.params[:2]] == [
        ("const int*", "int32", True, True), ("int*", "int32", False, True)]
    (x, o) = sigs["vector_types"].params
    assert (x.ctype, x.dtype.name, x.align, o.ctype, o.align) == (
        "const float4*", "float32", 16, "double*", 8)
    odd = cudasim.kernels_of('extern "C" __global__ void k(struct S s, float** p) {}')
    assert isinstance(odd["k"], NotImplementedError)  # compiled, but no launcher


# ---------------------------------------------------------------- the CuPy subset


def test_integer_array_indexing_wraps_around_like_cupy():
    x = cp.asarray(np.arange(10, 15))
    i = cp.asarray(np.array([0, 5, -6, 7, -1]))
    assert x[i].get().tolist() == [10, 10, 14, 12, 14]  # NumPy would raise IndexError
    m = cp.asarray(np.arange(12).reshape(3, 4))
    assert m[:, i].get()[:, 1].tolist() == [1, 5, 9]  # 5 -> 5 % 4 = 1
    assert m[i[:2], 1].get().tolist() == [1, 9]  # 5 -> 5 % 3 = 2
    with pytest.raises(IndexError):
        x[5]  # an integer (not an array) is checked, as in CuPy
    with pytest.raises(TypeError, match="device arrays"):
        x[[0, 1]]  # a host index would be copied to the device implicitly
    with pytest.raises(TypeError, match="device arrays"):
        x[np.array([0, 1])]


def test_views_share_memory_and_copies_do_not():
    x = cp.asarray(np.arange(24, dtype=np.float32).reshape(4, 6))
    v = x[1:3, ::2]
    assert v.shape == (2, 3) and not v.flags.c_contiguous
    assert v.data.ptr == x.data.ptr + 6 * 4 and v.strides == (24, 8)
    assert x.T.shape == (6, 4) and x.transpose(1, 0).strides == (4, 24)
    assert x.reshape(2, 12).data.ptr == x.data.ptr  # a view
    r = x.T.reshape(24)  # needs a copy
    assert r.data.ptr != x.data.ptr and r.get().tolist() == np.arange(24).reshape(4, 6).T.ravel(
        ).tolist()
    s = x[2, 3]
    assert isinstance(s, cp.ndarray) and s.shape == () and s.data.ptr == x.data.ptr + 15 * 4
    c = x.copy()
    cupyx.scatter_add(x, (cp.asarray(np.array([0, 0, 4])), 0), 1.0)  # 4 wraps to 0: +3
    assert x.get()[0, 0] == 3 and c.get()[0, 0] == 0 and v.get()[0, 0] == 6
    assert x.get()[1, 0] == 6  # only [0, 0] changed


def test_implicit_conversion_to_numpy_raises():
    x = cp.asarray(np.ones(3, np.float32))
    for attempt in (np.asarray, np.exp, np.sum, lambda x: np.array([x]), float, bool,
                    lambda x: x + 1, lambda x: x == x, lambda x: x * 2.0, lambda x: -x):
        with pytest.raises(TypeError):
            attempt(x)
    with pytest.raises(TypeError):
        cp.sum(np.ones(3))  # CuPy functions take device arrays, not NumPy ones
    with pytest.raises(TypeError):
        cp.matmul(np.ones((2, 2)), x)
    with pytest.raises(TypeError):
        hash(x)


def test_only_the_subset_exists():
    for name in ("array", "float32", "exp", "add", "arange", "take", "ElementwiseKernel",
                 "RawKernel", "get_array_module", "fuse"):
        assert not hasattr(cp, name), name
    for name in ("sum", "fill", "set", "ravel", "view", "__cuda_array_interface__", "item",
                 "__float__", "__iadd__"):
        assert not hasattr(cp.ndarray, name), name
    assert not hasattr(cp.cuda, "Stream") and not hasattr(cp.cuda.runtime, "malloc")
    assert not hasattr(cupyx, "scatter_max")


def test_item_assignment():
    """``x[key] = v`` (tracejit's update_slice and scatter steps and its write-back into
    CuPy arguments use it): device arrays or scalars; index arrays wrap, as in reading."""
    x = cp.zeros((2, 3))
    x[0, 1:] = cp.asarray(np.array([1.0, 2.0]))
    x[1] = 5
    x[cp.asarray(np.array([0])), cp.asarray(np.array([-3]))] = 7.0
    np.testing.assert_array_equal(x.get(), [[7, 1, 2], [5, 5, 5]])
    with pytest.raises(TypeError, match="device arrays"):
        x[0] = np.ones(3)


def test_devices_and_transfer_counters():
    assert cp.cuda.runtime.getDeviceCount() == 1
    h = np.arange(6, dtype=np.float64).reshape(2, 3)
    x = cp.asarray(h)
    assert cudasim.stats.h2d == 1 and cudasim.stats.h2d_bytes == 48
    assert cp.asarray(x) is x and cp.asarray(x, np.float64) is x
    y = cp.asarray(x, np.float32)  # a cast on the device, not a transfer
    assert y.dtype == np.float32 and cudasim.stats.transfers == 1
    assert (y.get() == h).all() and cudasim.stats.d2h == 1 and cudasim.stats.d2h_bytes == 24
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        with cp.cuda.Device(1):
            pass
    cudasim.set_device_count(3)
    dev = cp.cuda.Device(2)
    with dev:
        assert cp.cuda.Device().id == 2
        with cp.cuda.Device(1):
            z = cp.zeros((2, 3))
        with dev:  # re-entered
            assert cp.cuda.Device().id == 2
        assert cp.cuda.Device().id == 2 and z.device == cp.cuda.Device(1)
        with pytest.raises(ValueError, match="array device = 1 while current = 2"):
            cp.sum(z)
        assert z[0].device.id == 1  # a view needs no kernel
        z2 = cp.asarray(z)
        assert z2.device.id == 2 and cudasim.stats.d2d == 1 and cudasim.stats.d2d_bytes == 48
        dev.synchronize()
        cp.cuda.get_current_stream().synchronize()
        cp.cuda.runtime.deviceSynchronize()
    assert cp.cuda.Device().id == 0 and z.get().sum() == 0
    cudasim.set_device_count(0)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="no CUDA-capable device"):
        cp.cuda.runtime.getDeviceCount()
    e = cp.cuda.runtime.CUDARuntimeError(700)  # as CuPy: a cudaError_t status
    assert e.status == 700 and str(e) == ("cudaErrorIllegalAddress: an illegal memory access "
                                          "was encountered")
    with pytest.raises(TypeError):
        cp.cuda.runtime.CUDARuntimeError("an illegal memory access was encountered")


def test_current_device_is_per_thread():
    import threading

    cudasim.set_device_count(2)
    seen = []
    with cp.cuda.Device(1):
        t = threading.Thread(target=lambda: seen.append(cp.cuda.Device().id))
        t.start()
        t.join()
        assert cp.cuda.Device().id == 1
    assert seen == [0]


def test_array_functions():
    h = RNG.standard_normal((3, 4)).astype(np.float32)
    x = cp.asarray(h)
    e = cp.empty((2, 2), np.float32)
    assert np.isnan(e.get()).all() and (cp.empty(3, np.int32).get() == -1).all()  # poison
    assert e.data.ptr % 256 == 0
    assert cp.zeros(3, np.int64).get().tolist() == [0, 0, 0]
    f = cp.full((2,), 7, np.int32)
    assert f.get().tolist() == [7, 7] and cp.full((1,), 2.5).dtype == np.float64
    np.testing.assert_allclose(cp.matmul(x, x.T).get(), h @ h.T, rtol=1e-6)
    assert cp.broadcast_to(x[0], (5, 4)).strides == (0, 4)
    assert cp.concatenate([x, x], axis=1).shape == (3, 8)
    p = cp.pad(x, ((1, 0), (0, 2)), mode="constant", constant_values=-1.0)
    assert (p.get() == np.pad(h, ((1, 0), (0, 2)), constant_values=-1.0)).all()
    for name in ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all"):
        fn = getattr(cp, name)
        for axis in (None, 0, 1):
            r = fn(x, axis=axis)
            want = np.asarray(getattr(np, name)(h, axis=axis))
            assert isinstance(r, cp.ndarray) and r.dtype == want.dtype
            if want.dtype.kind == "f":
                np.testing.assert_allclose(r.get(), want, rtol=1e-6)
            else:
                np.testing.assert_array_equal(r.get(), want)
        assert fn(x, axis=1, keepdims=True).shape == (3, 1)
    assert cp.sum(x, 0, np.float64).dtype == np.float64
    assert cp.sum(cp.asarray(np.ones(3, np.int32))).dtype == np.int64  # as NumPy on Linux
    c = cp.ascontiguousarray(x.T)
    assert c.flags.c_contiguous and (c.get() == h.T).all()
    assert cp.ascontiguousarray(x) is x and cp.ascontiguousarray(x, np.float64).dtype == np.float64
    assert cp.ascontiguousarray(cp.asarray(np.float32(3))).shape == (1,)  # 0-d: 1-d, as CuPy
    assert x.astype(np.float32, copy=False) is x and x.astype(np.float32) is not x
    assert len(x) == 3 and x.nbytes == 48 and x.size == 12 and x.ndim == 2
    assert repr(cp.asarray(np.array([1, 2]))) == "array([1, 2])"
    with pytest.raises(TypeError, match="atomicAdd|int32"):
        cupyx.scatter_add(cp.zeros(3, np.int64), cp.asarray(np.array([0])), 1)
    with pytest.raises(ValueError, match="Unsupported dtype"):
        cp.asarray(np.array(["a"]))


def test_fft_gives_numpys_values_in_cupys_dtypes():
    """``cupy.fft``'s four 1-d transforms: NumPy's values for every ``n``, ``axis`` and
    ``norm``; CuPy's casts (irfft of float16 is float32 there, float16 in NumPy); a
    transform along another axis than the last comes back as a view with the axis swapped
    back, not C-contiguous, as CuPy returns it; device arrays only."""
    h = RNG.standard_normal((6, 8))
    x = cp.asarray(h)
    for name in ("fft", "ifft", "rfft", "irfft"):
        for n, axis in ((5, 0), (11, -1)):
            for norm in (None, "backward", "ortho", "forward"):
                got = getattr(cp.fft, name)(x, n=n, axis=axis, norm=norm)
                want = getattr(np.fft, name)(h, n=n, axis=axis, norm=norm)
                assert isinstance(got, cp.ndarray) and got.dtype == want.dtype
                np.testing.assert_allclose(got.get(), want, rtol=1e-12, atol=1e-12)
    assert not cp.fft.fft(x, axis=0).flags.c_contiguous and cp.fft.fft(x).flags.c_contiguous
    casts = {("e", "irfft"): "f", ("e", "rfft"): "F", ("e", "fft"): "F", ("i", "rfft"): "D",
             ("?", "irfft"): "d", ("f", "ifft"): "F", ("F", "irfft"): "f", ("l", "fft"): "D"}
    for (code, name), want in casts.items():
        got = getattr(cp.fft, name)(cp.asarray(np.ones(4, code))).dtype
        assert got == np.dtype(want), (code, name, got)
    with pytest.raises(TypeError, match="device arrays"):
        cp.fft.fft(h)
    with pytest.raises(ValueError, match="Invalid norm value"):
        cp.fft.fft(x, norm="none")
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        cp.fft.fft(x, n=0)
    assert not hasattr(cp.fft, "fftn") and not hasattr(cp.fft, "fftshift")


def test_real_and_imag_are_views_of_complex_arrays():
    """``cupy.real`` / ``cupy.imag``: views sharing a complex array's memory (every other
    float, not C-contiguous); a real array's real part is itself, its imaginary part new
    zeros; device arrays only."""
    h = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
    z = cp.asarray(h)
    re, im = cp.real(z), cp.imag(z)
    assert re.dtype == im.dtype == np.float32 and not re.flags.c_contiguous
    assert re.data.ptr == z.data.ptr and im.data.ptr == z.data.ptr + 4
    np.testing.assert_array_equal(re.get(), h.real)
    np.testing.assert_array_equal(im.get(), h.imag)
    z[0, 0] = 5 + 6j
    assert (re.get()[0, 0], im.get()[0, 0]) == (5, 6)
    r = cp.asarray(h.real.copy())
    assert cp.real(r) is r
    zeros = cp.imag(r)
    assert zeros.dtype == np.float32 and not zeros.get().any() and zeros.data.ptr != r.data.ptr
    for part in (cp.real, cp.imag):
        with pytest.raises(TypeError, match="device array"):
            part(h)


def test_installed_puts_the_emulator_in_sys_modules():
    before = sys.modules.get("cupy")
    with cudasim.installed() as mod:
        import cupy
        import cupyx as cx
        from cupy.cuda import runtime

        assert cupy is mod is cp and cx is cupyx and runtime.getDeviceCount() == 1
    assert sys.modules.get("cupy") is before


def test_fibers_are_the_default_and_threads_an_opt_in(monkeypatch):
    """Fast and deterministic unless a race-hunting run asks for OS threads."""
    monkeypatch.delenv("CUDASIM_SCHEDULER", raising=False)
    cudasim.reset()
    assert cudasim.scheduler() == "fibers"
    monkeypatch.setenv("CUDASIM_SCHEDULER", "threads")
    cudasim.reset()
    assert cudasim.scheduler() == "threads"
    with pytest.raises(ValueError, match="scheduler must be one of"):
        cudasim.set_scheduler("warps")


# ---------------------------------------------------------------- the codegen corpus

@pytest.fixture(scope="module")
def corpus():
    """test_cuda_codegen's corpus (every op of the CUDA table, every dtype, every kernel
    form) in one module, compiled once without optimisation."""
    import test_cuda_codegen

    programs = [(name, g, generate(g, prefix=f"{name}_"))
                for name, g in test_cuda_codegen.corpus()]
    raw = cp.RawModule(code="\n\n".join(m.source for _, _, m in programs), options=("-O0",))
    return programs, raw


def test_the_codegen_corpus_compiles_through_the_emulator(corpus):
    """Every kernel test_cuda_codegen compiles with nvcc compiles with g++ and the shim,
    and gets a launcher (its parameter types are ones the launch check knows)."""
    programs, raw = corpus
    names = [k for _, _, m in programs for k in m.kernel_names]
    raw.get_function(names[0])  # compiles
    kernels = raw._lib.kernels
    assert len(names) > 300 and sorted(kernels) == sorted(names)
    for name, sig in kernels.items():
        assert isinstance(sig, cudasim._cuda.Signature), sig
        assert getattr(raw._lib.lib, f"cudasim_launch_{name}")


def _value(v, rng):
    t = v.type
    if t.ndim == 0 and t.weak:  # a Python scalar
        return {"f": 0.5, "i": 3, "b": True}[t.dtype.kind]
    if t.dtype.kind == "f":
        return np.asarray(rng.standard_normal(t.shape) * 2, t.dtype)
    if t.dtype.kind == "i":
        return np.asarray(rng.integers(-50, 50, t.shape), t.dtype)
    return np.asarray(rng.random(t.shape) > 0.5)


def _differs(got: np.ndarray, want: np.ndarray) -> str | None:
    if got.shape != want.shape and not (want.shape == () and got.shape == (1,)):
        return f"shape {got.shape}, want {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, want {want.dtype}"
    got, want = got.ravel(), want.ravel()
    if want.dtype.kind == "f":
        rtol = 1e-5 if want.dtype == np.float32 else 1e-12
        bad = ~np.isclose(got, want, rtol=rtol, atol=0, equal_nan=True)
        bad |= (np.signbit(got) != np.signbit(want)) & ~np.isnan(want)  # signed zeros
    else:
        bad = got != want
    if bad.any():
        i = np.flatnonzero(bad)[0]
        return f"{bad.sum()} of {bad.size} differ, e.g. [{i}]: {got[i]!r}, want {want[i]!r}"
    return None


def test_the_codegen_corpus_runs_as_numpy_computes(corpus):
    """Every corpus program (but the 2**31-element ones) run through the emulator (fibers)
    on random inputs gives what the reference backend (NumPy) gives: NaN where NaN,
    signed zeros, float32 within 1e-5, float64 within 1e-12, integers and bools exactly."""
    from tracejit.backends import reference

    programs, raw = corpus
    cudasim.set_scheduler("fibers")
    rng = np.random.default_rng(1)
    failed = {}
    with np.errstate(all="ignore"):
        for name, g, module in programs:
            if name.startswith("huge"):
                continue
            args = [_value(v, rng) for v in g.inputs]
            want = reference.compile(g)(*args)
            try:
                got = [x.get() for x in execute(module, g, raw, args)]
            except cudasim.CUDADriverError as e:
                failed[name] = str(e)
                continue
            for k, (x, w) in enumerate(zip(got, want, strict=True)):
                if (why := _differs(x, np.asarray(w))) is not None:
                    failed[name] = f"output {k}: {why}"
    assert not failed, "\n".join(f"{k}: {v}" for k, v in failed.items())


def test_readme_names_the_differences_from_cuda():
    text = (cudasim._cuda.SHIM.parent / "README.md").read_text()
    for topic in ("libdevice", "synchronous", "FMA", "wrap"):
        assert topic in text, topic
    assert textwrap.dedent(cudasim.__doc__).strip()
