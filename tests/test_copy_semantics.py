"""Views and copies as NumPy makes them (issue 40): which results share memory with which
arguments, and what a write into a result, in the function or by the caller, changes.

Each program runs on NumPy and jitted, each on its own copies of the arguments. Values,
dtypes and ``np.shares_memory`` of every result with every argument must agree; then the
caller writes into every writeable result and the arguments (and the results) must agree
again, so a result that NumPy makes a new array is one under ``jit`` too (``np.roll(x,
0)``, ``np.tile(x, 1)``, ``np.round`` of integers) and one NumPy makes a view is a view
(``x.astype(x.dtype, copy=False)``, ``np.einsum('ij->ji', x)``). Also the crashes the
issue lists (``einsum`` over an empty axis, ``clip`` with a traced out-of-range bound,
``z.real *= 2``, ``x.shape = ...``).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from numpy_compare import builtin_error

import tracejit as tj
from tracejit.errors import ReadOnlyDestination, TracejitError, UnsupportedOperation

A = np.arange(12.0).reshape(3, 4)
SQ = np.arange(9.0).reshape(3, 3)
I8 = np.arange(10, dtype=np.int8)
I64 = np.arange(12).reshape(3, 4)
Z = (np.arange(6) + 1j * np.arange(6)[::-1]).reshape(2, 3)
Z64 = Z.astype(np.complex64)
NANS = np.array([[1.0, np.nan, np.inf], [-np.inf, 2.0, np.nan]])


def _copy(a):
    return a.copy(order="K") if isinstance(a, np.ndarray) else a


def _leaves(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _sentinel(dtype: np.dtype):
    return {"b": True, "c": 7 - 7j}.get(dtype.kind, 7)


def _agree(expected: list, got: list, np_args: list, tj_args: list, when: str) -> None:
    for k, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert np.asarray(g).dtype == np.asarray(e).dtype, f"result {k} dtype {when}"
        np.testing.assert_array_equal(g, e, f"result {k} {when}")
    for i, (a, b) in enumerate(zip(np_args, tj_args, strict=True)):
        np.testing.assert_array_equal(b, a, f"argument {i} {when}")


def check(fn, *args, backend: str):
    """``fn`` on NumPy and jitted on copies of ``args``: values, dtypes, the arguments
    afterwards and which results share memory with which arguments; then the same after
    the caller writes into each writeable result."""
    np_args, tj_args = [_copy(a) for a in args], [_copy(a) for a in args]
    expected = _leaves(fn(*np_args))
    got = _leaves(tj.jit(fn, backend=backend)(*tj_args))
    _agree(expected, got, np_args, tj_args, "after the call")
    for k, (e, g) in enumerate(zip(expected, got, strict=True)):
        for i, (a, b) in enumerate(zip(np_args, tj_args, strict=True)):
            if isinstance(a, np.ndarray):
                assert np.shares_memory(g, b) == np.shares_memory(e, a), \
                    f"result {k} shares memory with argument {i}: NumPy {np.shares_memory(e, a)}"
    for k, (e, g) in enumerate(zip(expected, got, strict=True)):
        if isinstance(e, np.ndarray) and e.flags.writeable and e.size:
            assert g.flags.writeable, f"result {k} is read-only; NumPy's is writeable"
            e[...] = _sentinel(e.dtype)
            g[...] = _sentinel(g.dtype)
    _agree(expected, got, np_args, tj_args, "after the caller wrote into the results")


def check_error(fn, *args, backend: str) -> TracejitError:
    """NumPy raises; jit raises a typed error of the same builtin class."""
    with pytest.raises(Exception) as numpy_error:
        fn(*[_copy(a) for a in args])
    with pytest.raises(builtin_error(numpy_error.value)) as ours:
        tj.jit(fn, backend=backend)(*[_copy(a) for a in args])
    assert isinstance(ours.value, TracejitError), repr(ours.value)
    return ours.value


# ------------------------------------------------ new arrays where a parameter is trivial

NEW_ARRAYS = {
    "roll-0": (lambda x: np.roll(x, 0), A),
    "roll-axis-length": (lambda x: np.roll(x, 4, axis=1), A),
    "roll-flat-size": (lambda x: np.roll(x, 12), A),
    "roll-shifts-cancel": (lambda x: np.roll(x, (1, -1), axis=(0, 0)), A),
    "tile-1": (lambda x: np.tile(x, 1), A),
    "tile-1-1": (lambda x: np.tile(x, (1, 1)), A),
    "repeat-1-axis": (lambda x: np.repeat(x, 1, axis=0), A),
    "repeat-1-flat": (lambda x: np.repeat(x[0], 1), A),
    "take-int-axis": (lambda x: np.take(x, 1, axis=0), A),
    "take-int-wrap": (lambda x: np.take(x, 4, axis=0, mode="wrap"), A),
    "take-method-int": (lambda x: x.take(2, axis=1), A),
    "round-int": (lambda x: np.round(x), I64),
    "around-int": (lambda x: np.around(x, 2), I64),
    "round-method-int8": (lambda x: x.round(), I8),
    "ascontiguousarray-T": (lambda x: np.ascontiguousarray(x.T), A),
    "ascontiguousarray-column": (lambda x: np.ascontiguousarray(x[:, :1]), A),
    "ascontiguousarray-rows": (lambda x: np.ascontiguousarray(x[1:]), A),
    "ascontiguousarray-C": (lambda x: np.ascontiguousarray(x), A),
    "asarray-order-F": (lambda x: np.asarray(x, order="F"), A),
    "asarray-T-order-F": (lambda x: np.asarray(x.T, order="F"), A),
    "asarray": (lambda x: np.asarray(x), A),
    "asarray-other-dtype": (lambda x: np.asarray(x, dtype=np.float32), A),
    "array": (lambda x: np.array(x), A),
    "array-copy-false": (lambda x: np.array(x, copy=False), A),
    "copy": (lambda x: (np.copy(x), x.copy()), A),
    "astype-same": (lambda x: (x.astype(x.dtype), np.astype(x, x.dtype)), A),
    "flatten-ravel": (lambda x: (x.flatten(), x.ravel()), A),
    "reshape-copy": (lambda x: (np.reshape(x, (12,), copy=True), x.reshape(4, 3, copy=True)), A),
    "concatenate-one": (lambda x: (np.concatenate([x]), np.stack([x]), np.hstack([x])), A),
    "sort-size-1": (lambda x: np.sort(x[:, :1], axis=1), A),
    "clip-no-bound": (lambda x: np.clip(x, -(10 ** 10), 10 ** 10), I64),
    "pad-0": (lambda x: np.pad(x, 0), A),
    "resize-same": (lambda x: np.resize(x, (3, 4)), A),
    "block-array": (lambda x: np.block(x), A),
    "meshgrid": (lambda x: np.meshgrid(x[0]), A),
    "meshgrid-sparse": (lambda x: np.meshgrid(x[0], x[1], sparse=True), A),
    "meshgrid-no-copy": (lambda x: np.meshgrid(x[0], x[1], sparse=True, copy=False), A),
    "nan_to_num-int": (lambda x: np.nan_to_num(x), I64),
    "nan_to_num-float": (lambda x: np.nan_to_num(x), NANS),
    "nan_to_num-complex": (lambda z: np.nan_to_num(z * np.nan), Z),
    "nan_to_num-copy-false": (lambda x: np.nan_to_num(x[1], copy=False), NANS),
    "nan_to_num-int-copy-false": (lambda x: np.nan_to_num(x, copy=False), I64),
    "imag-of-real": (lambda x: np.imag(x), A),
}


@pytest.mark.parametrize("name", NEW_ARRAYS)
def test_new_array_or_view_as_numpy(name, backend):
    fn, x = NEW_ARRAYS[name]
    check(fn, x, backend=backend)


# ------------------------------------------------ views (and the input itself) as NumPy's

VIEWS = {
    "astype-no-copy": (lambda x: x.astype(x.dtype, copy=False), A),
    "np-astype-no-copy": (lambda x: np.astype(x, np.float64, copy=False), A),
    "astype-no-copy-other-dtype": (lambda x: x.astype(np.float32, copy=False), A),
    "einsum-transpose": (lambda x: np.einsum("ij->ji", x), A),
    "einsum-same": (lambda x: (np.einsum("ij->ij", x), np.einsum("ij", x)), A),
    "einsum-implicit-transpose": (lambda x: np.einsum("ji", x), A),
    "einsum-ellipsis": (lambda x: np.einsum("i...->...i", x), A),
    "einsum-view-ignores-dtype": (lambda x: np.einsum("ij->ji", x, dtype=np.float32), A),
    "einsum-diagonal": (lambda x: np.einsum("ii->i", x), SQ),
    "einsum-batch-diagonal": (lambda x: np.einsum("iij->ji", x.reshape(2, 2, 3)), A),
    "einsum-sums": (lambda x: (np.einsum("ij->j", x), np.einsum("ii", x)), SQ),
    "real-of-real": (lambda x: np.real(x), A),
    "real-imag-of-complex": (lambda z: (np.real(z), z.imag), Z),
    "squeeze-flip-rot90": (lambda x: (np.squeeze(x), np.flip(x, 0), np.rot90(x, 0)), A),
    "diff-0": (lambda x: np.diff(x, 0), A),
    "reshape-copy-none": (lambda x: np.reshape(x, (12,), copy=None), A),
}


@pytest.mark.parametrize("name", VIEWS)
def test_view_as_numpy(name, backend):
    fn, x = VIEWS[name]
    check(fn, x, backend=backend)


def test_view_writes_through_in_the_function(backend):
    def f(x):
        x.astype(x.dtype, copy=False)[0, 0] = -1.0
        np.einsum("ij->ji", x)[0, 1] = -2.0
        np.einsum("ii->i", x[:, :3].reshape(-1)[:9].reshape(3, 3))[2] = -3.0
        r = np.roll(x, 0)
        r[1] = 5.0  # a new array: x stays
        return x

    check(f, A, backend=backend)


def test_nan_to_num_copy_false_writes_the_argument(backend):
    def f(x):
        y = np.nan_to_num(x[0], copy=False, nan=-1.0)
        return y.sum()

    check(f, NANS, backend=backend)


def test_copy_true_or_false_that_numpy_refuses(backend):
    check_error(lambda x: np.reshape(x.T, (12,), copy=False), A, backend=backend)
    check_error(lambda x: np.array(x.T, copy=False, order="C"), A, backend=backend)
    check_error(lambda x: np.array(x, copy=False, dtype=np.float32), A, backend=backend)


def test_read_only_results_refuse_writes(backend):
    e = check_error(lambda x: np.diagonal(x).__setitem__(0, 1.0), SQ, backend=backend)
    assert isinstance(e, ReadOnlyDestination)
    check_error(lambda x: np.diag(x).__setitem__(0, 1.0), SQ, backend=backend)
    check_error(lambda x: x.diagonal()[1:].fill(2.0), SQ, backend=backend)
    check_error(lambda x: np.imag(x).__setitem__(0, 1.0), A, backend=backend)

    def imag_add(x):
        x.imag += 1

    check_error(imag_add, A, backend=backend)


def test_ascontiguousarray_result_is_c_contiguous(backend):
    f = tj.jit(lambda x: (np.ascontiguousarray(x.T), np.ascontiguousarray(x[:, ::2]),
                          np.asarray(x, order="F")), backend=backend)
    c_t, c_strided, fortran = f(A)
    assert c_t.flags.c_contiguous and c_strided.flags.c_contiguous
    assert fortran.flags.f_contiguous


# ------------------------------------------------ crashes


def test_einsum_over_an_empty_contraction_axis(backend):
    check(lambda a, b: np.einsum("ij,jk->ik", a, b), np.ones((3, 0)), np.ones((0, 4)),
          backend=backend)
    check(lambda a, b: np.einsum("ij,jk->ik", a, b), np.ones((3, 1)), np.ones((0, 4)),
          backend=backend)
    check(lambda a, b: np.einsum("ij,jk", a, b), np.ones((0, 2)), np.ones((2, 3)),
          backend=backend)


def test_einsum_diagonal_of_unequal_axes_is_refused(backend):
    check_error(lambda x: np.einsum("ii->i", x), A, backend=backend)


@pytest.mark.parametrize("x, lo, hi", [
    (I8, 5, 300), (I8, -300, 7), (I8, 3, 6), (I8, -(2 ** 40), 2 ** 40),
    (I8.astype(np.uint8), -5, 7), (I8.astype(np.uint64), -5, 7), (I64, -5, 7),
])
def test_clip_with_traced_python_int_bounds(x, lo, hi, backend):
    check(lambda x, lo, hi: np.clip(x, lo, hi), x, lo, hi, backend=backend)
    check(lambda x, hi: (np.clip(x, 5, hi), np.clip(x, None, hi)), x, hi, backend=backend)
    check(lambda x, lo: (np.clip(x, lo, 7), np.clip(x, lo, None)), x, lo, backend=backend)


# ------------------------------------------------ writes into the parts of complex arrays


def scale_parts(z):
    z.real *= 2
    z.imag += 1
    return z


def set_real(z, v):
    z.real = v
    return z


def set_imag_row(z, v):
    z[1].imag = v  # through a view: the row of z
    return z


def real_of_real(x):
    x.real *= 3
    x.real = x.real + 1
    return x


@pytest.mark.parametrize("fn, args", [
    (scale_parts, (Z,)), (scale_parts, (Z64,)), (set_real, (Z, 7)),
    (set_real, (Z64, np.array([1.5, 2.5, 3.5]))), (set_imag_row, (Z, -1.0)),
    (real_of_real, (A,)),
], ids=["scale", "scale-complex64", "set-real", "set-real-broadcast", "set-imag-view",
        "real-of-real"])
def test_writes_into_complex_parts(fn, args, backend):
    check(fn, *args, backend=backend)


def test_writes_through_a_complex_part_view(backend):
    def f(z):
        r = z.real
        r[0] = -1.0
        z.imag[1, 1:] = 9.0
        return z

    check(f, Z, backend=backend)


def test_set_imag_of_real_array_is_a_type_error(backend):
    def f(x):
        x.imag = 1.0

    check_error(f, A, backend=backend)


# ------------------------------------------------ refusals at the user's line


def test_shape_assignment_is_refused_at_the_users_line(backend):
    def f(x):
        x.shape = (x.size,)
        return x

    line = inspect.getsourcelines(f)[1] + 1
    with pytest.raises(UnsupportedOperation) as e:
        tj.jit(f, backend=backend)(A)
    assert e.value.location.lineno == line and e.value.location.function == "f"
    assert "x.reshape(12)" in e.value.hint
    assert "x.shape = (x.size,)" in str(e.value)


def test_dtype_assignment_is_refused(backend):
    def f(x):
        x.dtype = np.int64
        return x

    with pytest.raises(UnsupportedOperation, match="ndarray.dtype"):
        tj.jit(f, backend=backend)(A)
