"""The CPU kernels' source is lean, for Numba's front end (whose typing and lowering per
statement are most of a kernel's compile time), without computing anything else:

- a blocked scatter kernel combines its partial results in one loop over the blocks, of
  plain ranges (no ``np.ndindex``);
- a pass that stores outputs and reduces goes chunk by chunk through a buffer;
- arguments are wrapped by ``abi.view``, not Numba's generic ``carray``;
- a float result computed in its own dtype is written without a cast, and Numba still
  types every local ``v<n>`` as its IR dtype (so the arithmetic is the same, bit for bit);
- the math functions are compiled once, not inlined by Numba, and LLVM inlines them into
  the kernel all the same (no call left in the loop, which vectorises).
"""

import re
import types

import numpy as np
import pytest
from numba import from_dtype

import tracejit as tj
from tracejit.backends.cpu import emitter
from tracejit.backends.cpu.codegen import generate
from tracejit.backends.cpu.compiler import compile_library
from tracejit.backends.cpu.emitter import PARALLEL_BLOCKS, PARALLEL_MIN_SIZE, RUNNER_COMBINE_MIN
from tracejit.backends.cpu.math import MATH

F32, F64 = np.float32, np.float64
ROWS = PARALLEL_MIN_SIZE // 64 + 1  # (ROWS, 64) is a parallel kernel
RNG = np.random.default_rng(0)


def graph_of(fn, *args):
    return tj.jit(fn).lower(*args).optimized_graph


def emitted(fn, *args) -> list[tuple[str, dict[str, np.dtype]]]:
    """Each loop kernel of ``fn`` at ``args`` (once): its source, and its locals' IR
    dtypes."""
    found = {}
    emit = emitter.LoopEmitter.emit

    def recording(self, body):
        emit(self, body)
        found[self.mod.kernels[-1]] = {f"v{n}": node.out.type.dtype
                                       for n, node in enumerate(self.kern.nodes)}

    emitter.LoopEmitter.emit = recording
    try:
        generate(graph_of(fn, *args))
    finally:
        emitter.LoopEmitter.emit = emit
    return list(found.items())


def numba_types(source: str) -> dict[str, object]:
    """Numba's types of the kernel's variables (SSA versions ``v3.1`` under ``v3``)."""
    module = types.ModuleType("kernel_source_test")
    exec(compile(source, "<kernel>", "exec"), module.__dict__)
    result, _ = compile_library(module.kernel)
    typed: dict[str, set] = {}
    for var, ty in result.fndesc.typemap.items():
        typed.setdefault(var.split(".")[0], set()).add(ty)
    return typed


def gradient(w, x, y):
    """The two-moons step's shape: a layer, and its gradients reduced over the batch."""
    h = x @ w
    g = h * (F32(1) - h * h) * y[:, :1]
    return (g * x[:, :1]).sum(axis=0), (g * y[:, 1:]).sum(axis=0), g.sum(axis=0)


def test_blocked_scatter_sums_are_combined_by_the_runner():
    """The blocks' partial sums over the batch are folded by one NumPy call each in the
    runner (in block order, as the kernel's loop did): the kernel has no combining loop,
    no barrier and no output array for them, a third of its compile time. Only in a
    kernel of ``RUNNER_COMBINE_MIN`` elements or more (below, the calls would let the
    thread team fall asleep between launches): a smaller one combines them itself."""
    small = RNG.standard_normal((ROWS, 2)).astype(F32)
    w = RNG.standard_normal((2, 64)).astype(F32)
    (source, _), = [k for k in emitted(gradient, w, small, small) if "barrier()" in k[0]]
    assert source.split("barrier()")[1].count("+ p") == 3
    x = RNG.standard_normal((RUNNER_COMBINE_MIN // 256, 2)).astype(F32)
    w = RNG.standard_normal((2, 256)).astype(F32)  # (sums keeping 256 elements each)
    fn = tj.jit(gradient)
    (source, _), = [k for k in emitted(gradient, w, x, x) if "for b in range(t * U(" in k[0]]
    assert "barrier()" not in source
    assert not re.findall(r"^    o\d+ = view", source, re.M)  # (the partial sums: p<n>)
    runner = fn.lower(w, x, x).source.split("# runner")[1]
    assert runner.count("np.add.reduce(") == 3 and runner.count("_blocks, axis=0") == 3
    w64, x64 = w.astype(np.float64), x.astype(np.float64)  # (F32(1) in it: float32 math)
    for got, want in zip(fn(w, x, x), gradient(w64, x64, x64), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_blocked_scatter_combines_in_one_plain_loop():
    """A maximum's blocks (whose pick among equal zeros and NaNs NumPy's ``maximum``
    would change) are combined by thread 0 in the kernel: one plain loop per output."""
    x = RNG.standard_normal((ROWS, 2)).astype(F32)

    def extremes(w, x, y):
        h = x @ w
        g = h * (F32(1) - h * h) * y[:, :1]
        return (g * x[:, :1]).max(axis=0), (g * y[:, 1:]).min(axis=0), g.max(axis=0)

    (source, _), = [k for k in emitted(extremes, RNG.standard_normal((2, 64)).astype(F32),
                                       x, x) if "barrier()" in k[0]]
    combine = source.split("barrier()")[1]
    assert "ndindex" not in source and "carray(" not in source.split("def kernel")[1]
    assert combine.count(f"for b in range({PARALLEL_BLOCKS}):") == 1
    assert combine.count("for j1 in range(64):") == 3  # a loop per output: it vectorises
    assert combine.count("p") >= 3
    assert "np.float32(" not in combine  # float32 maxima need no cast


@pytest.mark.parametrize("n", [emitter.CHUNK * 40 + 3, 8 * 5, 7])
def test_outputs_and_a_sum_in_one_pass_go_chunk_by_chunk(n):
    """A pass storing elementwise outputs and reducing fills a chunk buffer in a plain
    loop, which vectorises, and folds it in lanes; the sum is the lanes' one, so it gives
    what a pass without outputs gives, bit for bit, at every length (a chunk's remainder,
    a row's remainder, none at all)."""
    x = RNG.standard_normal(n)
    both = lambda x: (np.exp(x) * 2.0, (np.exp(x) * 2.0).sum(), (x > 0).mean())
    sources = [src for src, _ in emitted(both, x)]
    assert any("_buf = view(stack(" in src and "for g in range(" in src for src in sources)
    y, total, share = tj.jit(both)(x)
    alone = tj.jit(lambda x: ((np.exp(x) * 2.0).sum(), (x > 0).mean()))(x)
    assert (total, share) == alone  # (the same lanes in the same order)
    np.testing.assert_allclose(y, np.exp(x) * 2.0, rtol=1e-15)
    np.testing.assert_allclose(total, (np.exp(x) * 2.0).sum(), rtol=1e-12)
    assert share == (x > 0).mean()


def test_float_results_in_their_own_dtype_are_not_cast():
    x = RNG.standard_normal((8, 16)).astype(F32)
    (source, _), = emitted(lambda a, b: np.exp(a * b - a) / (abs(b) + F32(1)), x, x)
    assert "np.float32(" not in source.split("def kernel")[1].replace("np.float32(1", "")


def mixed(a, b, i, s):
    """Casts that stay: float64 scalars into float32, ints, bools, comparisons."""
    c = a * s + b.astype(F64)
    m = np.maximum(a, F32(0.5)) / b
    k = (i * 3 + i // 2) % 7
    return c, np.where(a > b, m, -m), k.astype(F32) * a, (a > 0) & (b < 1), np.tanh(m)


@pytest.mark.parametrize("fn, args", [
    (mixed, (RNG.standard_normal((4, 32)).astype(F32), RNG.standard_normal((4, 32)).astype(F32),
             RNG.integers(-9, 9, (4, 32)).astype(np.int32), 0.25)),
    (mixed, (RNG.standard_normal((3, 3)), RNG.standard_normal((3, 3)).astype(F32),
             RNG.integers(-9, 9, (3, 3)), 2.0)),
    (gradient, (RNG.standard_normal((2, 64)).astype(F32),
                *[RNG.standard_normal((ROWS, 2)).astype(F32)] * 2)),
    (lambda x: (np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1), np.abs(x).mean()),
     (RNG.standard_normal((8, 40)).astype(F32),)),
], ids=["f32-mixed", "f64-mixed", "gradient", "rows"])
def test_numba_types_every_local_as_its_ir_dtype(fn, args):
    kernels = emitted(fn, *args)
    assert kernels
    for source, dtypes in kernels:
        typed = numba_types(source)
        for name, dtype in dtypes.items():
            assert typed.get(name, {from_dtype(dtype)}) == {from_dtype(dtype)}, (name, source)


def test_elementwise_float32_results_are_numpys_bits():
    """Without the casts, float32 arithmetic is still float32's, as NumPy's loops do it."""
    a, b = (RNG.standard_normal((64, 64)).astype(F32) for _ in range(2))

    def f(a, b):
        return (a * b - a) / (b + F32(3)), np.maximum(a, b) * -a, np.where(a > b, a, b * b)

    for got, want in zip(tj.jit(f)(a, b), f(a, b), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(f"{op}/{dt}" for op in MATH for dt in MATH[op]))
def test_math_functions_are_inlined_by_llvm(name):
    op, dt = name.split("/")
    fn = f"{'pow' if op == 'power' else op}_{'f32' if dt == 'float32' else 'f64'}"
    args = "x[i], x[i]" if op == "power" else "x[i]"
    source = f"""import numpy as np
from numba import carray, types
from tracejit.backends.cpu.abi import arg, cfunc
from tracejit.backends.cpu.math import {fn}


@cfunc(types.void(types.int64), error_model='numpy')
def kernel(args):
    x = carray(arg(args, 0, np.{dt}), (1024,))
    o = carray(arg(args, 1, np.{dt}), (1024,))
    for i in range(1024):
        o[i] = {fn}({args})
"""
    module = types.ModuleType("kernel_source_test")
    exec(compile(source, "<kernel>", "exec"), module.__dict__)
    _, library = compile_library(module.kernel)
    llvm = str(library._final_module)
    calls = {line.split("@")[1].split("(")[0] for line in llvm.splitlines()
             if " call " in line and "@" in line}
    assert not [c for c in calls if "math" in c], calls
    assert f"x {'float' if dt == 'float32' else 'double'}>" in llvm  # vector types: vectorised
