"""np.fft: one ``fft`` op (``ir/fft_ops.py``) per transformed axis, NumPy's values, dtypes,
shapes, errors and warnings; complex values' parts (``real``, ``imag``, ``angle``).

The reference and CPU backends run NumPy's own pocketfft: their results are NumPy's bit for
bit, so hypothesis-drawn programs (a transform, its lengths, axes and normalisation, then
more work on the spectrum) compare exactly. The CUDA backend (cuFFT) compares within
rounding. Gradients are checked against finite differences in ``test_grad_fd.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from draws import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy_compare import assert_same, builtin_error, numeric_grad

import tracejit as tj
from tracejit.errors import TracejitError, UnsupportedOperation

DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex64", "complex128"]
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn", "irfftn"]
SHIFTS = ["fftshift", "ifftshift"]
NORMS = [None, "backward", "ortho", "forward"]
# What the program does with the transform's result: inexact values flow on.
AFTER = {
    "as is": lambda r: r,
    "power": lambda r: np.abs(r) ** 2 + 1.0,
    "parts": lambda r: np.real(r) * 2 - np.imag(r),
    "phase": lambda r: np.angle(r, deg=True),
    "back": lambda r: np.fft.ifft(r * 0.5, axis=0),
    "conjugate": lambda r: np.conj(r) * r.real,
}


def _array(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    x = rng.normal(size=shape) * 3
    if dtype.startswith("complex"):
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype) if dtype != "bool" else x > 0


def _tol(backend: str, want, inexact: bool = False) -> float | None:
    """None (NumPy's bits) on the backends that run pocketfft, unless ``inexact`` (a
    compiled float routine such as arctan2 followed); cuFFT's rounding else."""
    if backend == "reference" or (backend == "cpu" and not inexact):
        return None
    return float(np.max(np.abs(want))) if np.size(want) else 1.0


def _check(fn, x, backend, inexact: bool = False):
    """``fn(x)`` under jit is NumPy's, or raises the class NumPy raises."""
    try:
        want = fn(x)
    except Exception as e:  # NumPy's error: tracejit raises one of its class
        with pytest.raises(builtin_error(e)):
            tj.jit(fn, backend=backend)(x)
        return
    assert_same(tj.jit(fn, backend=backend)(x), want, _tol(backend, want, inexact))


@st.composite
def _programs(draw):
    """A transform of a drawn array (equal sizes likely, where axis mix-ups hide; sizes 1
    and 0 too), with its lengths, axes and normalisation drawn (out of range ones too),
    then a later step."""
    ndim = draw(st.integers(1, 3))
    side = draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    shape = tuple(draw(st.sampled_from([side, side, draw(st.integers(0, 6))]))
                  for _ in range(ndim))
    dtype = draw(st.sampled_from(DTYPES))
    name = draw(st.sampled_from(ONE_D + N_D + SHIFTS))
    norm = draw(st.sampled_from(NORMS))
    kwargs: dict = {}
    if name in ONE_D:
        kwargs = {"n": draw(st.sampled_from([None, None, 1, 2, 3, 4, 7, 8, 0])),
                  "axis": draw(st.integers(-ndim - 1, ndim - 1)), "norm": norm}
    elif name in N_D:
        k = draw(st.integers(1, ndim))
        axes = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=k, max_size=k,
                             unique=True)) if name.endswith("n") or ndim > 2 else None
        if name.endswith("2") and ndim < 2:
            axes = [0]
        if axes is not None and draw(st.booleans()):
            kwargs["axes"] = axes
        if draw(st.booleans()):
            count = len(kwargs.get("axes", (-2, -1) if name.endswith("2") else shape))
            kwargs["s"] = draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, -1]), min_size=count,
                                        max_size=count))
            kwargs.setdefault("axes", list(range(-count, 0)))
        kwargs["norm"] = norm
    else:
        kwargs = {"axes": draw(st.sampled_from([None, 0, -1, (0, -1)]))}
    after = draw(st.sampled_from(sorted(AFTER)))
    seed = draw(st.integers(0, 2**16))
    return shape, dtype, name, kwargs, after, seed


@settings(max_examples=examples(120), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(program=_programs())
def test_drawn_programs(program, backend):
    shape, dtype, name, kwargs, after, seed = program
    x = _array(np.random.default_rng(seed), shape, dtype)
    transform = getattr(np.fft, name)

    def fn(x):
        return AFTER[after](transform(x, **kwargs))

    if name in ("irfft", "hfft") and x.shape[kwargs["axis"] % x.ndim] == 0:
        return  # NumPy reads uninitialised memory there (test_irfft_of_nothing_is_zeros)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        _check(fn, x, backend, inexact=after == "phase")


def test_irfft_of_nothing_is_zeros(backend):
    """An irfft (hfft) of a length-0 axis transforms n // 2 + 1 zeros of padding: zeros.
    NumPy's pocketfft returns whatever the memory held (6.9e-310 and the like) there."""
    x = np.zeros((3, 0), np.complex64)
    got = tj.jit(lambda x: (np.fft.irfft(x, n=4), np.fft.hfft(x, n=3, axis=1)),
                 backend=backend)(x)
    assert_same(got, (np.zeros((3, 4), np.float32), np.zeros((3, 3), np.float32)))


@pytest.mark.parametrize("dtype", DTYPES + ["float16", "longdouble", "clongdouble"])
@pytest.mark.parametrize("name", ONE_D)
def test_result_dtypes(name, dtype):
    """NumPy's dtype rule (single precision stays single; rfft refuses complex), read off
    the trace: every dtype, every one-axis transform."""
    x = _array(np.random.default_rng(0), (2, 6), dtype)
    fn = getattr(np.fft, name)
    try:
        want = fn(x)
    except TypeError:
        with pytest.raises(TypeError):
            tj.jit(fn, backend="reference")(x)
        return
    assert_same(tj.jit(fn, backend="reference")(x), want)


@pytest.mark.parametrize("call, error", [
    (lambda x: np.fft.fft(x, n=0), ValueError),
    (lambda x: np.fft.rfft(x, n=-2), ValueError),
    (lambda x: np.fft.fft(x, norm="unitary"), ValueError),
    (lambda x: np.fft.ifft(x, axis=2), IndexError),
    (lambda x: np.fft.irfft(x[:, :1]), ValueError),  # 2 * (1 - 1) points
    (lambda x: np.fft.rfft(x * 1j), TypeError),
    (lambda x: np.fft.fft(x[0, 0]), IndexError),  # a 0-d input
    (lambda x: np.fft.fftn(x, s=(2, 3), axes=(0,)), ValueError),
    (lambda x: np.fft.irfft2(x, s=(2,), axes=(0, 1)), ValueError),
])
def test_errors(call, error):
    """NumPy's exception classes (checked against NumPy itself first)."""
    x = np.ones((3, 4))
    with pytest.raises(error):
        call(x)
    with pytest.raises(error) as raised:
        tj.jit(call, backend="reference")(x)
    assert isinstance(raised.value, TracejitError), raised.value  # typed, with the line


def test_deprecated_lengths_warn_as_numpy():
    """``s`` without ``axes`` (NumPy 2.0 deprecated it): the same DeprecationWarning, and
    NumPy's result."""
    x = np.arange(12.0).reshape(3, 4)
    fn = lambda x: np.fft.fftn(x, s=(2, 2))  # noqa: E731
    with pytest.warns(DeprecationWarning):
        want = fn(x)
    with pytest.warns(DeprecationWarning):
        got = tj.jit(fn, backend="reference")(x)
    assert_same(got, want)


def test_out_argument(backend):
    """``out=`` is written and returned, as NumPy does; a wrong shape is NumPy's error."""
    x = np.random.default_rng(3).normal(size=(4, 6))

    def fn(x, buf):
        r = np.fft.rfft(x, out=buf)
        return r, buf

    want = fn(x, np.zeros((4, 4), complex))
    got = tj.jit(fn, backend=backend)(x, np.zeros((4, 4), complex))
    assert_same(got, want, _tol(backend, want[0]))
    with pytest.raises(ValueError):
        tj.jit(fn, backend=backend)(x, np.zeros((4, 3), complex))


def test_one_op_per_transformed_axis():
    """fft2 is two ``fft`` ops, rfftn's real axis first; the shifts are rolls, no fft."""
    x = np.ones((4, 6, 8))

    def ops(fn):
        graph = tj.jit(fn, backend="cpu").lower(x).optimized_graph
        return [(n.attrs["transform"], n.attrs["axis"]) for n in graph.nodes if n.op == "fft"]

    assert ops(np.fft.fft2) == [("fft", 2), ("fft", 1)]
    assert ops(np.fft.rfftn) == [("rfft", 2), ("fft", 1), ("fft", 0)]
    assert ops(lambda x: np.fft.irfftn(np.fft.rfftn(x))) == [
        ("rfft", 2), ("fft", 1), ("fft", 0), ("ifft", 0), ("ifft", 1), ("irfft", 2)]
    assert ops(np.fft.fftshift) == []


def test_frequencies_and_shifts(backend):
    """fftfreq/rfftfreq need no tracing (a traced spacing flows through their arithmetic);
    fftshift/ifftshift roll each axis by half its length."""
    x = np.random.default_rng(4).normal(size=(5, 6))

    def fn(x, d):
        f = np.fft.fftfreq(6, d) + np.fft.rfftfreq(10, d)[:6]
        return np.fft.fftshift(x * f, axes=1), np.fft.ifftshift(np.fft.fftshift(x)), f

    want = fn(x, 0.25)
    assert_same(tj.jit(fn, backend=backend)(x, 0.25), want, None if backend != "cuda" else 1.0)


def test_complex_parts(backend):
    """np.real/np.imag/np.angle/np.iscomplex/np.isreal of complex values, and .real/.imag."""
    rng = np.random.default_rng(5)
    z = (rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))).astype(np.complex64)
    z[0, :2] = [1.5, -2.0]  # real values among them

    def fn(z):
        return (np.real(z), np.imag(z), z.real * z.imag, np.angle(z), np.angle(z, deg=True),
                np.iscomplex(z), np.isreal(z), np.abs(z))

    want = fn(z)
    assert_same(tj.jit(fn, backend=backend)(z), want, _tol(backend, want[3], inexact=True))


def test_real_if_close_of_complex_is_refused():
    """Its result's dtype would depend on the data."""
    z = np.ones(3, complex)
    with pytest.raises(UnsupportedOperation):
        tj.jit(lambda z: np.real_if_close(z), backend="reference")(z)


def test_power_spectrum_gradient_compiled():
    """A gradient through a spectrum, compiled on the CPU: finite differences' values (the
    reference-backend cases of every rule are in test_grad_fd.py)."""
    x = np.random.default_rng(6).normal(size=(4, 16))
    w = np.hanning(16)

    def loss(x):
        spectrum = np.abs(np.fft.rfft(x * w, axis=1)) ** 2
        return np.log(spectrum + 1.0).sum()

    got = tj.jit(tj.grad(loss), backend="cpu")(x)
    np.testing.assert_allclose(got, numeric_grad(loss, [x])[0], rtol=1e-6, atol=1e-8)


def test_vjp_of_a_complex_output_is_jax_convention():
    """A complex output's cotangent is dL/dRe - i dL/dIm, as in JAX: the rfft's vjp of a
    cotangent c is Re(F^T c)."""
    x = np.linspace(0.1, 1.0, 4)
    c = np.array([1 + 2j, -1j, 0.5])
    _, pull = tj.vjp(lambda x: np.fft.rfft(x), x)
    dft = np.exp(-2j * np.pi * np.outer(np.arange(3), np.arange(4)) / 4)
    np.testing.assert_allclose(pull(c)[0], np.real(dft.T @ c), rtol=1e-12)


def test_repeated_axes_transform_twice(backend):
    """NumPy's fftn transforms an axis listed twice twice; so does the trace."""
    x = np.random.default_rng(7).normal(size=(3, 5))
    fn = lambda x: np.fft.fftn(x, axes=(1, 1))  # noqa: E731
    assert_same(tj.jit(fn, backend=backend)(x), fn(x), _tol(backend, fn(x)))


def test_transforms_in_loops(backend):
    """An rfft in a Python loop (rolled into one scan) and an fft/ifft pair in a lax.scan
    body: NumPy's values, and gradients through both against finite differences."""
    from tracejit import lax

    x = np.random.default_rng(8).normal(size=(6, 16))

    def rolled(x):
        acc = np.zeros(9)
        for i in range(x.shape[0]):
            acc = acc + np.abs(np.fft.rfft(x[i] * 0.5)) ** 2
        return acc

    def body(c, row):
        s = np.fft.fft(row + c)
        return c * 0.25 + np.fft.ifft(s).real.mean(), np.abs(s)

    def scanned(x):
        c, ys = lax.scan(body, np.zeros(16), x)
        return ys.sum() + c.sum()

    def scanned_numpy(x):
        c, total = np.zeros(16), 0.0
        for row in x:
            c, y = body(c, row)
            total += y.sum()
        return total + c.sum()

    assert tj.jit(rolled, backend=backend).lower(x).optimized_ir.count("= scan(") == 1
    assert_same(tj.jit(rolled, backend=backend)(x), rolled(x), _tol(backend, rolled(x)))
    for fn, plain in ((lambda x: rolled(x).sum(), lambda x: rolled(x).sum()),
                      (scanned, scanned_numpy)):
        got = tj.grad(fn, backend=backend)(x)
        np.testing.assert_allclose(got, numeric_grad(plain, [x])[0], rtol=1e-6, atol=1e-7)
