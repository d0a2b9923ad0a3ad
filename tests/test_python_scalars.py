"""Arithmetic among Python scalar arguments inside a jitted function.

A Python ``int``/``float`` argument is traced as a weakly typed 0-d value (a new value
never retraces), so arithmetic among such arguments follows NumPy's rules for 0-d int64
and float64 values, not Python's: the known differences, listed in docs/differences.md,
are pinned here as strict expected failures (each turns into a failure the day it is
fixed, to be moved to the passing tests), and the documented way round them, making the
argument static, is checked to give Python's answers.
"""

import warnings

import numpy as np
import pytest

import tracejit as tj

X = np.ones(3)

# (name, function, Python scalar argument)
DIFFERENT = [
    ("float / 0.0 raises ZeroDivisionError", lambda x, s: x * (s / 0.0), 2.0),
    ("int // 0 raises ZeroDivisionError", lambda x, n: x * (n // 0), 2),
    ("int products beyond int64 stay exact", lambda x, n: x * (n * 2**40 * 2**40), 3),
    ("int ** -1 is a float", lambda x, n: x * (n**-1), 2),
]


def _python(fn, s):
    """NumPy's (and Python's) outcome: the result, or the exception's type."""
    try:
        return fn(X, s)
    except ArithmeticError as e:
        return type(e)


def _jitted(fn, s, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's divide-by-zero warning
        try:
            return tj.jit(fn, **options)(X, s)
        except ArithmeticError as e:
            return next(t for t in (ZeroDivisionError, OverflowError, ValueError)
                        if isinstance(e, t))


def _same(got, want) -> bool:
    if isinstance(want, type) or isinstance(got, type):
        return got is want
    return got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("name, fn, s", DIFFERENT, ids=[c[0] for c in DIFFERENT])
@pytest.mark.xfail(strict=True, reason="Python scalar arguments follow NumPy's 0-d rules "
                   "under jit (docs/differences.md): not fixed yet")
def test_python_scalar_arithmetic_follows_python(name, fn, s, backend):
    assert _same(_jitted(fn, s, backend=backend), _python(fn, s))


@pytest.mark.parametrize("name, fn, s", DIFFERENT, ids=[c[0] for c in DIFFERENT])
def test_a_static_python_scalar_computes_with_python_rules(name, fn, s):
    """The documented way round: a static argument is the Python value itself."""
    assert _same(_jitted(fn, s, static_argnums=1), _python(fn, s))


# Python int literals (or static arguments) beyond int64, as NumPy 2 takes them: converted
# to an inexact loop's dtype, exact in comparisons with integer arrays, OverflowError in an
# integer loop (and in comparisons with bool arrays).
_I64 = np.iinfo(np.int64)
HUGE = [
    ("f32 * 2**81", lambda x: x * 2**81, np.linspace(-1, 1, 5, dtype=np.float32)),
    ("f64 + -2**90", lambda x: x + -2**90, np.linspace(-1, 1, 5)),
    ("f64 ** 2**70", lambda x: x ** 2**70, np.array([0.5, 1.0, -1.0, 2.0])),
    ("maximum(f64, 2**80)", lambda x: np.maximum(x, 2**80), np.array([1e30, -1.0])),
    ("f16 / 2**70", lambda x: x / 2**70, np.ones(3, np.float16)),
    ("i64 < 2**70", lambda x: x < 2**70, np.array([_I64.max, _I64.min, 0])),
    ("2**63 > i64", lambda x: 2**63 > x, np.array([_I64.max, _I64.min, 0])),
    ("i64 >= -2**70", lambda x: x >= -2**70, np.array([_I64.max, _I64.min, 0])),
    ("u64 == 2**64", lambda x: x == 2**64, np.array([0, 2**63, 2**64 - 1], np.uint64)),
    ("u64 != -1", lambda x: x != -(2**65), np.array([0, 2**64 - 1], np.uint64)),
    ("i8 <= 2**70", lambda x: np.less_equal(x, 2**70), np.arange(-3, 3, dtype=np.int8)),
    ("f64 < 2**70", lambda x: x < 2**70, np.array([1e300, 1.0])),
    ("i32 * 2**81", lambda x: x * 2**81, np.arange(3, dtype=np.int32)),
    ("bool < 2**70", lambda x: x < 2**70, np.array([True, False])),
    ("f64 * 2**1100", lambda x: x * 2**1100, np.ones(3)),
    ("where(f32, 2**80)", lambda x: np.where(x > 0, x, 2**80),
     np.linspace(-1, 1, 4, dtype=np.float32)),
    ("where(-2**80, f64)", lambda x: np.where(x > 0, -(2**80), x), np.linspace(-1, 1, 4)),
    ("where(i64, 2**80)", lambda x: np.where(x > 0, x, 2**80), np.arange(-2, 2)),
]


@pytest.mark.parametrize("min_kernel_size", [0, 4096], ids=["kernels", "numpy calls"])
@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("name, fn, x", HUGE, ids=[c[0] for c in HUGE])
def test_python_ints_beyond_int64_as_numpy(name, fn, x, backend, min_kernel_size, monkeypatch):
    from tracejit.config import config

    monkeypatch.setattr(config, "min_kernel_size", min_kernel_size)
    try:
        want = fn(x)
    except OverflowError:
        with pytest.raises(OverflowError):
            tj.jit(fn, backend=backend)(x)
        return
    got = tj.jit(fn, backend=backend)(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


ARGUMENT = [  # (a function of an array and a Python int argument, the array)
    ("f64 + n", lambda x, n: x + n, np.linspace(-1, 1, 5)),
    ("f32 * n", lambda x, n: x * n, np.linspace(-1, 1, 5, dtype=np.float32)),
    ("i64 < n", lambda x, n: x < n, np.array([_I64.max, _I64.min, 0])),
    ("i64 + n", lambda x, n: x + n, np.arange(3)),
    ("where(f64, n)", lambda x, n: np.where(x > 0, x, n), np.linspace(-1, 1, 4)),
]


@pytest.mark.parametrize("min_kernel_size", [0, 4096], ids=["kernels", "numpy calls"])
@pytest.mark.parametrize("name, fn, x", ARGUMENT, ids=[c[0] for c in ARGUMENT])
def test_an_int_argument_beyond_int64_as_numpy(name, fn, x, backend, min_kernel_size,
                                               monkeypatch):
    """An int argument beyond int64 is passed by value, so NumPy's rules for such ints
    apply (a float beside an inexact array, an OverflowError beside an integer one), where
    a traced int64 input overflowed; calls with ints in range before and after still run
    on their own entry (the cached call's key never holds a huge int)."""
    from tracejit.config import config

    monkeypatch.setattr(config, "min_kernel_size", min_kernel_size)
    f = tj.jit(fn, backend=backend)
    for n in (3, 2**70, -(2**80), 2**63, -(2**63), 5, 2**70):
        try:
            want = fn(x, n)
        except OverflowError:
            with pytest.raises(OverflowError):
                f(x, n)
            continue
        got = f(x, n)
        assert got.dtype == want.dtype, n
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_an_int_beyond_int64_cannot_be_a_result(backend):
    """Python arithmetic on an int argument beyond int64 (passed by value) is Python's,
    but a result that is still such an int raises as NumPy's int64 conversion does, where
    the graph held it as an int64 constant it cannot be (and returned it silently)."""
    for fn in (lambda s: s * 1, lambda s: -s, lambda s: (s, 2.0)):
        with pytest.raises(tj.errors.ScalarOverflow, match="out of bounds for int64"):
            tj.jit(fn, backend=backend)(2**70)
    got = tj.jit(lambda s: s - 2**70 + 5, backend=backend)(2**70)
    assert got == 5 and got.dtype == np.int64
