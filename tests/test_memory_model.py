"""NumPy's model of memory under ``jit``: which results are views of which arrays, what a
write through a view reaches, and how new arrays are laid out (issue 40's snippets).

Each program runs twice on copies of the same arguments (in the same layout): once as
plain NumPy, once jitted. Compared: every result's value, dtype and C/Fortran flags; every
argument afterwards; ``np.shares_memory`` between every pair of results and arguments;
and all of it again after the caller writes through every writeable result.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import lax


def _copies(args):
    return [a.copy(order="K") if isinstance(a, np.ndarray) and a.flags.owndata else
            _same_layout(a) if isinstance(a, np.ndarray) else a for a in args]


def _same_layout(view: np.ndarray) -> np.ndarray:
    """A copy of ``view`` laid out as it is: its strides, its base's extent (a strided
    view keeps the gaps between its elements)."""
    base = view.base if view.base is not None else view
    while base.base is not None:
        base = base.base
    fresh = base.copy(order="K")
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return np.lib.stride_tricks.as_strided(fresh.reshape(-1)[offset // view.itemsize:],
                                           view.shape, view.strides)


def _arrays(values) -> list[np.ndarray]:
    return [v for v in values if isinstance(v, np.ndarray) and v.ndim]


def _sharing(results, args) -> list[list[bool]]:
    return [[np.shares_memory(r, x) for x in _arrays(args) + _arrays(results)]
            for r in _arrays(results)]


def same_as_numpy(fn, *args, backend: str) -> None:
    want_args, got_args = _copies(args), _copies(args)
    want = fn(*want_args)
    got = tj.jit(fn, backend=backend)(*got_args)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)

    def compare(stage: str) -> None:
        for k, (w, g) in enumerate(zip(want, got, strict=True)):
            assert np.asarray(g).dtype == np.asarray(w).dtype, (stage, k)
            np.testing.assert_array_equal(g, w, err_msg=f"{stage}: result {k}")
        for k, (w, g) in enumerate(zip(want_args, got_args, strict=True)):
            np.testing.assert_array_equal(g, w, err_msg=f"{stage}: argument {k}")
        assert _sharing(got, got_args) == _sharing(want, want_args), stage

    compare("returned")
    # (on a GPU the backend fixture brings each result to the host: a copy, C-ordered)
    for w, g in zip(_arrays(want), _arrays(got) if backend != "cuda" else (), strict=False):
        assert (g.flags.c_contiguous, g.flags.f_contiguous) == \
            (w.flags.c_contiguous, w.flags.f_contiguous)
        assert g.flags.writeable == w.flags.writeable
    for k, (w, g) in enumerate(zip(_arrays(want), _arrays(got), strict=True)):
        if w.flags.writeable:
            w[...] += 7 + k
            g[...] += 7 + k
    compare("after the caller wrote through the results")


def fortran(shape=(2, 3)):
    return np.asfortranarray(np.arange(float(np.prod(shape))).reshape(shape))


# ---------------------------------------------------------------- traced integer indices


def write_row_element(x, i):
    x[i][0] = 5.0
    return x


def row_written_and_filled(x, i):
    row = x[i]
    row[0] = 5
    x[i].fill(1)
    return x, row


def copyto_row(x, i, v):
    np.copyto(x[i], v)
    return x


def view_sees_later_write(x, i):
    r = x[i]
    x[i, 1] = 3.0
    return r


def column_of_view(x, i, j):
    v = x[1:][i]
    v[j] += 2.5
    return v, x


def computed_index(x, i):
    v = x[i - 1]
    v *= 1.5
    return v, x


@pytest.mark.parametrize("fn, args", [
    (write_row_element, (np.zeros((3, 4)), 1)),
    (write_row_element, (np.zeros((3, 4)), np.int64(2))),
    (write_row_element, (np.zeros((3, 4)), -1)),
    (row_written_and_filled, (np.zeros((3, 4)), 2)),
    (copyto_row, (np.zeros((3, 4)), 1, np.arange(4.0))),
    (view_sees_later_write, (np.zeros((3, 4)), -1)),
    (column_of_view, (np.arange(12.0).reshape(4, 3), 2, np.int32(1))),
    (column_of_view, (fortran((4, 3)), 0, 2)),
    (computed_index, (np.arange(12.0).reshape(3, 4), 2)),
], ids=lambda v: getattr(v, "__name__", None))
def test_an_integer_index_known_at_run_time_gives_a_view(fn, args, backend):
    same_as_numpy(fn, *args, backend=backend)


def test_a_view_at_the_loop_index_writes_the_carry(backend):
    def body(i, c):
        c[i][0] = 1 + i
        return c

    def f(c):
        return lax.fori_loop(0, 3, body, c)

    got = tj.jit(f, backend=backend)(np.zeros((3, 2)))
    np.testing.assert_array_equal(got, [[1, 0], [2, 0], [3, 0]])


def test_an_index_out_of_range_at_run_time_raises(backend):
    f = tj.jit(write_row_element, backend=backend)
    with pytest.raises(IndexError):
        f(np.zeros((3, 4)), 3)


# ---------------------------------------------------------------- layouts


def reshape_written(a):
    r = a.reshape(-1)
    r[:3] = -9
    return a, r


def transposed_ravel_written(a):
    r = a.T.ravel()
    r[0] = -1
    return a, r


def exp_of_transpose(x):
    y = np.exp(x.T) if x.dtype.kind == "i" else x.T * 1.5 + 1
    r = y.reshape(-1)
    r[0] = 0
    return y, r


def sum_of_transposes(x):
    return x.T + 2 * x.T, x + x


def fortran_copy(x):
    y = x.copy(order="F")
    y.reshape(-1)[0] = -3
    return y


def c_copy_of_transpose(x):
    return x.T.copy()


@pytest.mark.parametrize("fn", [reshape_written, transposed_ravel_written])
@pytest.mark.parametrize("layout", ["C", "F", "T", "rows", "columns"])
def test_reshapes_follow_the_arguments_layout(fn, layout, backend):
    a = np.arange(24.0).reshape(4, 6)
    a = {"C": a[:2, :3].copy(), "F": fortran(), "T": a[:3, :2].copy().T,
         "rows": a[::2, :3], "columns": a[:2, ::2]}[layout]
    same_as_numpy(fn, a, backend=backend)


def test_one_signature_per_layout(backend):
    f = tj.jit(reshape_written, backend=backend)
    for a in (np.zeros((2, 3)), fortran(), np.zeros((2, 3)), fortran()):
        want = a.copy(order="K")
        reshape_written(want)
        f(a)
        np.testing.assert_array_equal(a, want)
    assert f.cache_info().misses == 2


@pytest.mark.parametrize("fn", [exp_of_transpose, sum_of_transposes, fortran_copy,
                                c_copy_of_transpose])
def test_arrays_made_in_the_function_are_laid_out_as_numpys(fn, backend):
    same_as_numpy(fn, np.arange(6.0).reshape(2, 3), backend=backend)


# ---------------------------------------------------------------- separate results


def sorted_twice(x):
    return np.sort(x), np.sort(x)[::-1]


def result_and_its_copy(x):
    a = x * 1.5
    return a, a.copy(), a[1:]


def views_of_one_buffer(x, i):
    a = x * 2.0
    return a[1:], a[::-1], a[i]


@pytest.mark.parametrize("fn", [sorted_twice, result_and_its_copy])
def test_results_numpy_keeps_apart_are_apart(fn, backend):
    same_as_numpy(fn, np.array([3.0, 1.0, 2.0]), backend=backend)


def test_views_of_one_buffer_share_it(backend):
    same_as_numpy(views_of_one_buffer, np.arange(12.0).reshape(4, 3), 1, backend=backend)


# ---------------------------------------------------------------- read-only views, parts


def diagonal_of_argument(x):
    return np.diagonal(x), x.T


def diagonal_of_result(x):
    y = x * 2.0
    return y, np.diagonal(y)


def imag_of_real(x):
    return np.imag(x)


def real_part_written(z):
    r = z.real
    r[0] += 1.5
    z.imag[-1] = -2.0
    return r, z.imag, z


@pytest.mark.parametrize("fn", [diagonal_of_argument, diagonal_of_result, imag_of_real])
def test_read_only_results_are_read_only(fn, backend):
    same_as_numpy(fn, np.arange(9.0).reshape(3, 3), backend=backend)


def test_complex_parts_are_views(backend):
    same_as_numpy(real_part_written, np.arange(6.0).reshape(3, 2) * (1 + 0.5j),
                  backend=backend)


# ---------------------------------------------------------------- found by explore runs


def scalar_made_an_array_and_written(a):
    t = a[1][...]
    t[...] = 2
    t += 1.5
    return t * 1.0, a


def copy_of_fortran_written(a):
    c = a.copy()
    c += 1
    return c, c.ravel()


def copy_of_fortran_assigned(a):
    c = a.copy()
    c[...] = a * 1.5
    return c, c.ravel(), np.sqrt(a)


def test_a_scalars_ellipsis_is_a_new_array(backend):
    same_as_numpy(scalar_made_an_array_and_written, np.arange(3.0), backend=backend)


@pytest.mark.parametrize("fn", [copy_of_fortran_written, copy_of_fortran_assigned])
def test_a_copy_is_c_ordered_whatever_computed_it(fn, backend):
    same_as_numpy(fn, fortran((2, 2)), backend=backend)
