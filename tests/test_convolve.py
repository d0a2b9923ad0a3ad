"""np.correlate and np.convolve: one ``correlate`` op (``ir/signal_ops.py``), NumPy's values,
dtypes and errors, its gradient against finite differences, and the folds that leave
``np.convolve(x, k[::-1])`` a single op.

The reference and CPU backends both run NumPy's own ``np.correlate``: their results are
NumPy's bit for bit. The CUDA backend sums in cuBLAS's order (within rounding).
"""

import numpy as np
import pytest
from numpy_compare import assert_same, numeric_grad

import tracejit as tj
from tracejit.errors import InvalidArgument, ShapeError

MODES = ("valid", "same", "full")
RNG = np.random.default_rng(7)
# (len(a), len(v)): longer first, shorter first, equal, length 1 on either side, even/odd
LENGTHS = [(9, 4), (4, 9), (5, 5), (1, 1), (1, 6), (6, 1), (8, 3), (3, 8), (2, 7)]


def _floats(n: int) -> np.ndarray:
    return RNG.normal(size=n)


def _check(fn, *args, backend):
    want = fn(*args)
    got = tj.jit(fn, backend=backend)(*args)
    scale = float(np.max(np.abs(want))) if want.size and want.dtype.kind == "f" else 1.0
    assert_same(got, want, None if backend in ("reference", "cpu") else scale)


def _ops(fn, *args) -> list[str]:
    return [n.op for n in tj.jit(fn, backend="cpu").lower(*args).optimized_graph.nodes]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda n: f"{n[0]}x{n[1]}")
def test_values_float64(mode, lengths, backend):
    a, v = _floats(lengths[0]), _floats(lengths[1])
    _check(lambda a, v: np.correlate(a, v, mode), a, v, backend=backend)
    _check(lambda a, v: np.convolve(a, v, mode), a, v, backend=backend)


@pytest.mark.parametrize("dtypes", [("int32", "int32"), ("int64", "int8"), ("int8", "int8"),
                                    ("bool", "bool"), ("float32", "float32"),
                                    ("int32", "float32"), ("float32", "float64")])
@pytest.mark.parametrize("mode", MODES)
def test_dtypes(dtypes, mode, backend):
    """NumPy's result dtype (the operands' common one; int8 wraps around as NumPy's does)."""
    a = (RNG.integers(-60, 60, 7)).astype(dtypes[0])
    v = (RNG.integers(-60, 60, 3)).astype(dtypes[1])
    _check(lambda a, v: np.correlate(a, v, mode), a, v, backend=backend)
    _check(lambda a, v: np.convolve(v, a, mode), a, v, backend=backend)


def test_mode_by_number_and_default(backend):
    a, v = _floats(6), _floats(3)
    for mode in (0, 1, 2):
        _check(lambda a, v, m=mode: np.correlate(a, v, m), a, v, backend=backend)
        _check(lambda a, v, m=mode: np.convolve(a, v, mode=m), a, v, backend=backend)
    _check(np.correlate, a, v, backend=backend)
    _check(np.convolve, a, v, backend=backend)


def test_convolve_of_a_scalar(backend):
    _check(lambda a: np.convolve(a, 2.5), _floats(4), backend=backend)
    _check(lambda a: np.convolve(np.float32(3), a), _floats(4).astype(np.float32),
           backend=backend)


@pytest.mark.parametrize("fn, args, error", [
    (lambda a, v: np.correlate(a, v), (np.zeros(0), np.ones(3)), ShapeError),
    (lambda a, v: np.correlate(a, v), (np.ones(3), np.zeros(0)), ShapeError),
    (lambda a, v: np.convolve(a, v), (np.zeros(0), np.ones(3)), ShapeError),
    (lambda a, v: np.convolve(a, v), (np.ones(3), np.zeros(0)), ShapeError),
    (lambda a, v: np.correlate(a, v), (np.ones((2, 3)), np.ones(3)), ShapeError),
    (lambda a, v: np.convolve(a, v), (np.ones(3), np.ones((2, 2))), ShapeError),
    (lambda a, v: np.correlate(a, v), (np.float64(2.0), np.ones(3)), ShapeError),
    (lambda a, v: np.correlate(a, v, "middle"), (np.ones(3), np.ones(2)), ShapeError),
    (lambda a, v: np.convolve(a, v, 3), (np.ones(3), np.ones(2)), ShapeError),
    (lambda a, v: np.convolve(a, v, None), (np.ones(3), np.ones(2)), InvalidArgument),
], ids=["corr-a-empty", "corr-v-empty", "conv-a-empty", "conv-v-empty", "corr-2d", "conv-2d",
        "corr-0d", "bad-mode", "bad-int-mode", "mode-none"])
def test_errors_as_numpy(fn, args, error, backend):
    """NumPy's ValueError (TypeError for a mode of another type) as the typed error that
    subclasses it."""
    with pytest.raises(Exception) as numpy_error:
        fn(*args)
    with pytest.raises(error) as ours:
        tj.jit(fn, backend=backend)(*args)
    assert isinstance(ours.value, type(numpy_error.value))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lengths", [(9, 4), (4, 9), (5, 5), (1, 4), (4, 1), (6, 2)],
                         ids=lambda n: f"{n[0]}x{n[1]}")
@pytest.mark.parametrize("name", ["correlate", "convolve"])
def test_gradient_matches_finite_differences(name, mode, lengths):
    f = getattr(np, name)
    a, v = _floats(lengths[0]), _floats(lengths[1])
    w = _floats(len(f(a, v, mode)))

    def loss(a, v):
        return np.sum(np.sin(f(a, v, mode)) * w)

    got = tj.grad(loss, argnums=(0, 1))(a, v)
    for g, want in zip(got, numeric_grad(loss, [a, v]), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)


def test_second_order_gradient():
    a, v = _floats(6), _floats(3)

    def loss(a):
        return np.sum(np.correlate(a, v, "same") ** 2)

    hess_vec = tj.grad(lambda a: np.sum(tj.grad(loss)(a) * v.sum()))(a)
    want = numeric_grad(lambda a: np.sum(tj.grad(loss)(a) * v.sum()), [a])[0]
    np.testing.assert_allclose(hess_vec, want, rtol=1e-5, atol=1e-6)


def test_gradient_under_jit(backend):
    a, v = _floats(8), _floats(3)

    def loss(a, v):
        return np.sum(np.convolve(a, v, "same") ** 2)

    got = tj.jit(tj.grad(loss, argnums=(0, 1)), backend=backend)(a, v)
    for g, want in zip(got, numeric_grad(loss, [a, v]), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)


def test_int_operand_has_no_gradient_but_the_float_one_does():
    a, v = np.arange(5), _floats(3)

    def loss(v):
        return np.sum(np.correlate(a, v, "full") ** 2)

    np.testing.assert_allclose(tj.grad(loss)(v), numeric_grad(loss, [v])[0], rtol=1e-6)


def test_one_op_and_no_im2col():
    """The corpus's conv1d: ``k[::-1][::-1]`` folds away, nothing but the correlation."""
    s, k = _floats(300), _floats(7)
    assert _ops(lambda s, k: np.convolve(s, k[::-1], mode="valid"), s, k) == ["correlate"]
    assert _ops(lambda s: np.correlate(s, s, mode="full"), s) == ["correlate"]


def test_reversed_twice_and_zero_width_pad_fold(backend):
    x = _floats(12).reshape(3, 4)
    for fn in (lambda x: x[::-1][::-1] * 2, lambda x: x[::-1, 1:][::-2, ::2] * 2,
               lambda x: np.pad(x, 0) * 2, lambda x: x[2:0:-1][::-1] * 2):
        _check(fn, x, backend=backend)
        assert len(_ops(fn, x)) <= 3, _ops(fn, x)
    assert _ops(lambda x: x[::-1][::-1] * 2, x) == ["constant", "multiply"]
    assert _ops(lambda x: np.pad(x, 0) * 2, x) == ["constant", "multiply"]


def test_reversal_through_a_squeezing_reshape_folds(backend):
    """The corpus's conv1d_channels: ``w[o, c, ::-1]`` is a 3-d slice and a reshape to 1-d;
    np.convolve reverses it again, and the two reversals fold through the reshape."""
    w = _floats(60).reshape(4, 3, 5)
    for fn in (lambda w: w[1, 2, ::-1][::-1] * 2, lambda w: w[1:2, 2, ::-1][:, 1:4] * 2,
               lambda w: w[1, :, ::-1][::-1, 1:] * 2, lambda w: w[1][None][:, ::-1] * 2,
               lambda w: w.reshape(12, 5)[::-1][::2] * 2):
        _check(fn, w, backend=backend)
    ops = _ops(lambda w: w[1, 2, ::-1][::-1] * 2, w)
    assert ops.count("slice") == 1, ops
    x = _floats(64)
    assert _ops(lambda x, w: np.convolve(x, w[0, 1, ::-1], "valid") * 2, x, w).count(
        "slice") == 1


def _written(x, key, value):
    out = x.copy()
    out[key] = value
    return out


@pytest.mark.parametrize("fn", [
    lambda x: _written(x, 1, x[0] * 2)[1] * 3,  # reads the region written
    lambda x: _written(x, 1, x[0] * 2)[2] * 3,  # reads none of it
    lambda x: _written(x, (slice(None), slice(1, 3)), 5.0)[:, 3:] * 3,
    lambda x: _written(x, (slice(None), slice(1, 3)), 5.0)[:, 2:] * 3,  # overlaps: stays
    lambda x: _written(x, slice(None, None, 2), 1.0)[1::2] + 1,  # interleaved: stays
    lambda x: _written(x, slice(0, None, 2), 1.0)[::2] + 1,
    lambda x: _written(x, 1, x[0] * 2)[1],
    lambda x: _written(_written(x, 1, x[0] * 2), 1, x[2] + 1),  # the first write is lost
    lambda x: _written(_written(x, 1, x[0] * 2), slice(1, 3), 0.5),
], ids=lambda f: "")
def test_read_after_write_folds(fn, backend):
    _check(fn, _floats(24).reshape(4, 6), backend=backend)


def test_accumulated_rows_fold_to_one_write_each():
    """conv1d_channels' ``out[o] += ...``: each step adds to the row's previous sum as a
    value, not read back from the array written the step before; one write per row stays."""
    x, w = _floats(3 * 64).reshape(3, 64), _floats(60).reshape(4, 3, 5)

    def conv(x, w):
        out = np.zeros((4, 60))
        for o in range(4):
            for c in range(3):
                out[o] += np.convolve(x[c], w[o, c, ::-1], mode="valid")
        return out

    ops = _ops(conv, x, w)
    assert ops.count("update_slice") == 4 and ops.count("correlate") == 12, ops
    assert_same(tj.jit(conv, backend="cpu")(x, w), conv(x, w))
