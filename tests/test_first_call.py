"""What the first call of a new signature costs: which kernels are worth compiling.

The suite compiles every kernel (conftest sets ``TRACEJIT_MIN_KERNEL_SIZE=0`` so that small
test arrays exercise the kernels); these tests put the default policy back.
"""

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends.cpu.codegen import partition
from tracejit.config import Settings, config


@pytest.fixture
def default_policy(monkeypatch):
    monkeypatch.setattr(config, "min_kernel_size", 4096)


def steps(fn, *args) -> list[tuple[str, str]]:
    """(kind, ops) of each step the CPU backend runs ``fn`` as."""
    graph = tj.jit(fn).lower(*args).optimized_graph
    return [(k.kind, ",".join(n.op for n in k.nodes)) for k in partition(graph)[1]]


def update(w, g, v):
    v2 = 0.9 * v + g
    return w - 0.01 * v2, v2


def test_a_tiny_kernel_runs_as_numpy_calls(default_policy):
    small = [np.ones((40, 50), np.float32)] * 3  # 2000 elements
    assert all(kind == "library" for kind, _ in steps(update, *small))
    big = [np.ones((100, 50), np.float32)] * 3  # 5000 elements
    assert [kind for kind, _ in steps(update, *big)] == ["loop"]


def test_one_exactly_rounded_op_is_not_worth_a_kernel(default_policy):
    x = np.ones(10_000, np.float32)
    assert steps(lambda x: x + 1, x) == [("library", "add")]
    assert steps(lambda x: np.exp(x), x) == [("loop", "exp")]  # vectorised: 4x NumPy
    assert steps(lambda x: x.sum(), x) == [("loop", "sum")]
    assert [k for k, _ in steps(lambda x: x * 2 + 1, x)] == ["loop"]


def later_steps(fn, *args) -> list[tuple[str, str]]:
    graph = tj.jit(fn).lower(*args).optimized_graph
    return [(k.kind, ",".join(n.op for n in k.nodes)) for k in partition(graph, True)[1]]


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_a_lone_exact_reduction_is_compiled_for_the_later_runner(default_policy, dtype):
    """One NumPy call either way on one thread: the first calls do not wait for its
    compile, and its kernel (the same bits) replaces the call later. Large enough for the
    thread team, it is compiled at once; a float sum too (another order: other bits)."""
    narrow = np.ones((5000, 2), dtype)  # NumPy's slowest case: a strided 2-wide loop
    assert steps(lambda x: x.max(axis=0), narrow) == [("library", "max")]
    assert steps(lambda x: np.min(x), narrow) == [("library", "min")]
    assert later_steps(lambda x: x.max(axis=0), narrow) == [("loop", "max")]
    big = np.ones((1 << 16, 2), dtype)  # 2^17 elements: the team's
    assert steps(lambda x: x.max(axis=0), big) == [("loop", "max")]
    assert steps(lambda x: x.sum(axis=0), narrow) == [("library", "sum")]  # NumPy's order
    assert later_steps(lambda x: x.sum(axis=0), narrow) == [("loop", "sum")]
    rows = steps(lambda x: x.sum(axis=1), narrow)  # lanes of partial sums: another order
    assert rows == [("library" if dtype == np.int64 else "loop", "sum")]
    column = np.ones((5000, 1), dtype)  # NumPy adds one column pairwise
    sums = steps(lambda x: x.sum(axis=0), column)
    assert sums == [("library" if dtype == np.int64 else "loop", "sum")]


def test_a_kernel_inside_a_big_one_stays_fused(default_policy):
    """Row-level values (a row's max) have few elements but live in the row kernel."""
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    assert [k for k, _ in steps(softmax, np.ones((1000, 10), np.float32))] == ["loop"]


@pytest.mark.parametrize("shape", [(1,), (7, 3), (40, 50), (70, 70)])
def test_numpy_steps_and_kernels_agree(default_policy, shape):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    with np.errstate(all="ignore"):
        expected = update(*args)
    for got, want in zip(tj.jit(update)(*args), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_settings_come_from_the_environment_and_python(monkeypatch):
    monkeypatch.setenv("TRACEJIT_MIN_KERNEL_SIZE", "100")
    monkeypatch.setenv("TRACEJIT_COMPILE", "Background")
    s = Settings()
    assert (s.min_kernel_size, s.compile) == (100, "background")
    monkeypatch.setenv("TRACEJIT_COMPILE", "later")
    with pytest.warns(RuntimeWarning, match="TRACEJIT_COMPILE='later'"):
        assert Settings().compile == "sync"
    with pytest.raises(ValueError, match="compile must be one of"):
        s.compile = "eager"
    with pytest.raises(AttributeError, match="no setting 'compiler'"):
        s.compiler = "sync"


def step_names(f) -> list[str]:
    (entry,) = f._cache.values()
    return [s.name for s in entry.runner.steps]


def test_small_exact_kernels_are_compiled_after_the_first_call(default_policy, tmp_path,
                                                              monkeypatch):
    """The first call runs them as NumPy calls; the kernels that replace them later give
    the same bits (exactly rounded ops only) in one launch instead of a call per op."""
    from tracejit.backends.cpu import kernels

    monkeypatch.setattr(kernels, "_compiled", {})  # nothing compiled yet, here or on disk
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((40, 50)).astype(np.float32) for _ in range(3)]
    f = tj.jit(update)
    first = f(*args)
    assert step_names(f)[0].startswith("lib")
    assert f.wait_compiled(120)
    assert [n[:-1] for n in step_names(f)] == ["kernel"]
    for got, want in zip(f(*args), first, strict=True):
        np.testing.assert_array_equal(got, want)


def test_small_inexact_kernels_stay_numpy_calls(default_policy):
    """exp within 4 ULP, a sum in another order: compiling them later would change the
    answers between calls, so they stay NumPy's; the exactly rounded ``* 2 + 1`` beside
    them is compiled later (the same bits)."""
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    for fn, inexact in ((lambda x: np.exp(x) * 2 + 1, "exp"),
                        (lambda x: (x * 2 + 1).sum(), "sum")):
        f = tj.jit(fn)
        first = f(x)
        f.wait_compiled()
        (entry,) = f._cache.values()
        assert [s.ops for s in entry.runner.steps if s.name.startswith("kernel")] \
            == ["multiply, add"]
        assert [s.ops for s in entry.runner.steps if s.name.startswith("lib")] == [inexact]
        np.testing.assert_array_equal(f(x), first)
        np.testing.assert_array_equal(first, fn(x))


@pytest.mark.parametrize("op", [np.fmax, np.fmin, np.remainder])
def test_ops_whose_nans_and_zero_ties_numpy_picks_by_its_loop_stay_numpy_calls(
        default_policy, op):
    """NumPy's fmax/fmin of 0.0 and -0.0 or of two NaNs depends on its loop (SIMD body or
    scalar tail), its remainder of two NaNs is x87's pick: beside exactly rounded ops they
    stay NumPy calls for the later runner, so the switch keeps the first call's bits."""
    nan = np.float32(np.nan)
    x = np.array([0.0, -0.0, nan, -nan, 1.5, -nan, nan, 2.0] * 2, np.float32)
    y = np.array([-0.0, 0.0, -nan, -nan, nan, 1.0, nan, -3.0] * 2, np.float32)

    def fn(x, y):
        return op(x * 2, y + 1) - 1

    f = tj.jit(fn)
    first = f(x, y)
    assert f.wait_compiled(120)
    (entry,) = f._cache.values()
    assert op.__name__ in [s.ops for s in entry.runner.steps if s.name.startswith("lib")]
    assert [s.ops for s in entry.runner.steps if s.name.startswith("kernel")] \
        == ["multiply, add"]  # (the later runner's kernel of the ops beside it)
    again = f(x, y)
    assert again.tobytes() == first.tobytes()
    assert first.tobytes() == fn(x, y).tobytes()


@pytest.mark.parametrize("fn", [lambda x: x.max(axis=0), lambda x: x.min(axis=1),
                                lambda x: np.max(x)])
def test_a_lone_exact_reduction_gives_the_same_bits_before_and_after(default_policy, fn,
                                                                     tmp_path, monkeypatch):
    """NumPy's call on the first calls, the later runner's kernel afterwards: the same
    bits, NaNs and signed zeros included."""
    from tracejit.backends.cpu import kernels

    monkeypatch.setattr(kernels, "_compiled", {})
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3000, 3)).astype(np.float32)
    x[5, 1] = x[2000, 2] = np.nan
    f = tj.jit(fn)
    first = f(x)
    np.testing.assert_array_equal(first, fn(x))
    assert step_names(f)[0].startswith("lib")
    assert f.wait_compiled(120)
    assert [n[:-1] for n in step_names(f)] == ["kernel"]
    again = f(x)
    assert again.tobytes() == first.tobytes()
    zeros = np.zeros_like(x)
    zeros[1::2, 1] = zeros[::3, 0] = -0.0  # rows and columns mixing 0.0 and -0.0
    np.testing.assert_array_equal(np.signbit(f(zeros)), np.signbit(fn(zeros)))


def _softmax_columns(x):
    """A row kernel (softmax) and a sum over its rows: two kernels, the second a lone sum."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return np.sum(e / e.sum(axis=1, keepdims=True), axis=0)


@pytest.mark.parametrize("fn", [lambda x: x.sum(axis=0), lambda x: np.prod(x, axis=0),
                                _softmax_columns])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_a_float_sum_over_rows_gives_the_same_bits_before_and_after(
        default_policy, fn, dtype, order, tmp_path, monkeypatch):
    """A float sum (or product) over a matrix's rows runs as NumPy's call on the first
    calls and as the later runner's kernel afterwards, bit for bit: both fold each column
    row after row (NumPy's pairwise summation would differ; it runs along a contiguous
    reduced axis, which a Fortran-ordered argument has, so the call reads it
    C-contiguous, as the kernel does). Values spanning magnitudes make any other order
    show; NaNs of two payloads and signed zeros keep theirs."""
    from tracejit.backends.cpu import kernels

    monkeypatch.setattr(kernels, "_compiled", {})
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3000, 3)) * 10.0 ** rng.integers(-6, 7, (3000, 3))
    if fn is not _softmax_columns:
        x[::7] = rng.uniform(0.5, 1.5, (len(x[::7]), 3))  # products that stay finite
    x = np.asarray(x, dtype=dtype, order=order)
    f = tj.jit(fn)
    first = f(x)
    assert [n[:-1] for n in step_names(f)][-1] == "lib"
    assert f.wait_compiled(120)
    assert [n[:-1] for n in step_names(f)][-1] == "kernel"
    assert f(x).tobytes() == first.tobytes()
    c = np.ascontiguousarray(x)
    if fn is not _softmax_columns:  # (NumPy's exp is not the kernels')
        assert first.tobytes() == fn(c).tobytes()
        odd = c.copy()
        odd[5, 0], odd[9, 0] = np.nan, -np.nan
        odd[:, 2] = -0.0
        assert f(odd).tobytes() == fn(odd).tobytes()
