"""In-place writes inside ``jit`` and ``grad`` with NumPy's semantics (issue 14).

Each program runs on NumPy and jitted, each on its own copies of the arguments; the
results (values and dtypes) and the arguments after the call must agree, so writes to
arguments reach the caller as NumPy's do. Views alias as in NumPy (a write through a
slice, ``.T`` or a reshape view changes its base and every other view of it). Errors are
NumPy's builtin classes; gradients through writes agree with finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy_compare import builtin_error

import tracejit as tj
from tracejit.errors import ReadOnlyDestination, TracejitError

rng = np.random.default_rng(7)
A = np.arange(12.0).reshape(3, 4)
SQ = np.arange(9.0).reshape(3, 3)  # equal dims, where axis mix-ups hide
V = np.arange(4.0) + 0.5
I3 = np.arange(3)
F32 = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([True, False, True])
CUBE = np.arange(24.0).reshape(2, 3, 4)


# ---------------------------------------------------------------- programs


def set_int(a):
    a[1] = 5


def set_slices(a):
    a[1:, ::2] = 7.5
    a[::-1, 3] = np.array([1.0, 2.0, 3.0])
    return a.sum()


def set_ellipsis_newaxis(a):
    a[..., 0] = 1
    a[None, 2] = -2
    a[1, None, 1:3] = [[8, 9]]
    return a


def set_broadcast_value(a, v):
    a[:, 1:] = v[1:]
    a[:2] = v  # a row broadcast into two rows
    return a * 2


def set_int_arrays(a):
    a[[0, 2]] = 9.0
    a[[0, 0, 1], [1, 1, 3]] = [1.0, 2.0, 3.0]  # repeated: the last value stays
    a[1:, [0, 2]] = [[-1.0, -2.0]]
    a[np.array([-1]), :2] = 4.0
    return a


def set_nonadjacent_arrays(c):
    c[[0, 1], :, [3, 0]] = np.arange(6.0).reshape(2, 3)  # indexed dims go first
    c[:, [2, 0]] += 100
    return c


def set_constant_mask(a):
    a[np.array([True, False, True])] = 0.5
    a[:, np.array([False, True, True, False])] *= 10


def set_traced_mask(a):
    a[a > 6] = 0
    a[a[:, 0] < 1] = np.array([1.0, 2.0, 3.0, 4.0])  # rows: a value per row element
    a[a == 2] += 0.25
    return a


def augmented_indexed(a, v):
    a[1] += v
    a[1:-1] *= 2
    a[:, -1] -= a[:, 0]
    a[[0, 0, 2]] += 1  # buffered, as in NumPy: row 0 once
    a[..., ::2] /= 4


def augmented_args(x, y, i):
    x += y
    x *= 2
    i <<= 1
    i |= 1


def casts(i, b, f):
    i[0] = 2.7  # int: stores 2
    i[1] = -3.9
    b[0] = 2.5  # bool: True
    b[1] = 0.0
    f[0, 0] = 1 / 3  # float32 rounds
    f[1] = np.float64(2.0) ** 0.5
    return i, b, f


def ufunc_at(a, f):
    np.add.at(a, ([0, 0, 2], [1, 1, 3]), [1.0, 2.0, 3.0])  # repeated: both added
    np.subtract.at(a, [1, 1], 0.5)
    np.multiply.at(a, (0, [0, 0, 2]), 3.0)
    np.minimum.at(a, (2, [0, 0]), [-1.0, -5.0])
    np.maximum.at(f, [0, 0, 1], [[9, 9, 9], [10, 0, 0], [1, 1, 1]])
    np.negative.at(a, (1, [3, 3]))  # twice: back to the start


def ufunc_at_casts(i, b):
    np.add.at(i, [0, 0], 1.5)  # ufunc.at casts each result unsafely
    np.multiply.at(i, [1, 2], np.array([2.5, -0.5]))
    np.logical_or.at(b, [0, 1], True)


def traced_add_at(a, i, v):
    np.add.at(a, i, v)
    np.subtract.at(a, i, v[::-1])


def out_arguments(x, o, s, q, r):
    y = np.add(x, 1, out=o)
    np.multiply(x, 2, out=x)  # out aliases an input
    np.sum(x, axis=0, out=s)
    np.divmod(x, 3.0, out=(q, r))
    np.matmul(x[:, :3], np.eye(3), out=o[:, :3])
    return y is o


def out_methods(x, o, s):
    x.sum(axis=1, out=s)
    x.max(axis=1, out=s[::-1])
    np.clip(x, 1, 5, out=o)
    np.round(x / 3, 1, out=x)
    np.concatenate([x[:1], x[1:]], out=o)


def copyto_fill(x, y):
    np.copyto(x, y)
    np.copyto(x[0], 7.0, where=np.array([True, False, True, False]))
    x[1:].fill(2)
    x.T[3].fill(-1)


def diagonal_put_place(a, t, c):
    np.fill_diagonal(a, 5.0)
    np.fill_diagonal(t, [1.0, 2.0], wrap=True)
    np.fill_diagonal(c, -1)
    np.put(a, [0, 5, -1], [10.0, 20.0])
    np.place(t, np.arange(t.size).reshape(t.shape) % 4 == 1, [7.0, 8.0, 9.0])
    np.putmask(a, a > 6, np.array([-3.0, -4.0]))


def traced_place_putmask(a, b):
    np.place(a, a > 6, 0.0)  # a traced mask with one value: np.where
    np.putmask(b, b < a, a * 10)  # values of the same size, where the traced mask holds
    np.putmask(a, a == 0, [1.0, 2.0])  # cycled over the flat positions


def tall():
    return np.zeros((7, 3))


def only_mutates(x):
    x[:] = x[::-1]
    x[0] = x[-1] + 1  # reads the current version


def overlapping(a):
    a[1:] = a[:-1]  # as if copied first, as NumPy does
    a[:, 1:] += a[:, :-1]


# ---------------------------------------------------------------- views


def view_sees_write(a):
    b = a[1:]
    a[2] = 5
    c = b * 1
    b[0] = 1  # changes a
    return c, b


def view_of_view(a):
    a[1:3][::-1] = [[1], [2]]  # the whole of a reversed view
    a[::-1] += np.arange(3.0)[:, None]
    b = a[:, 1:]
    c = b[1:, ::2]
    c[...] = -7
    d = c.T
    d[0] = 3
    return a, b, c


def transpose_views(s):
    t = s.T
    t[0] = [10, 11, 12]  # column 0 of s
    s[1, 2] = -1
    u = t.T.T
    u[2, 1] = 99
    return t * 1, s


def reshape_views(c):
    r = c.reshape(6, 4)
    r[1] = 0
    f = c[0].ravel()  # contiguous: a view
    f[-1] = 5
    e = np.expand_dims(c, 0)
    e[0, 1, 1, 1] = -8
    q = c.transpose(2, 0, 1).reshape(4, 6)  # not contiguous: a copy, as in NumPy
    q[0] = 1000
    return r, q


def copies_do_not_alias(a):
    s = a[0, 1]  # a NumPy scalar: a copy
    f = a.flatten()
    g = a[[0, 1]]
    k = a.copy()
    a[...] = 0
    f[0] = 1
    g += 1
    return s, f, g, k


def local_buffers(x):
    z = np.zeros_like(x)
    z[1:] = x[:-1] * 2
    w = np.full_like(x, 2.0)
    w[::2] += z[::2]
    e = np.empty_like(x, dtype=np.int32)
    e[...] = 3
    y = np.full_like(x, x)  # a new array, not a (read-only) broadcast view of x
    y[0] = 5
    c = np.astype(x, x.dtype)  # a copy
    c[1] = 7
    return z, w, e, y, c, x


def weak_scalars_rebind(x, n):
    n += 1
    r = x[0, 0]
    r += 10  # a NumPy scalar rebinds
    return x * n, r, x


PROGRAMS = {
    "set-int": (set_int, (A,)),
    "set-slices": (set_slices, (A,)),
    "set-ellipsis-newaxis": (set_ellipsis_newaxis, (A,)),
    "set-broadcast-value": (set_broadcast_value, (A, V)),
    "set-int-arrays": (set_int_arrays, (A,)),
    "set-nonadjacent-arrays": (set_nonadjacent_arrays, (CUBE,)),
    "set-constant-mask": (set_constant_mask, (A,)),
    "set-traced-mask": (set_traced_mask, (A,)),
    "augmented-indexed": (augmented_indexed, (A, V)),
    "augmented-args": (augmented_args, (A, A[::-1].copy(), np.arange(4))),
    "casts": (casts, (np.arange(3), np.zeros(3, bool), F32)),
    "ufunc-at": (ufunc_at, (A, F32)),
    "ufunc-at-casts": (ufunc_at_casts, (np.arange(3) + 3, np.zeros(3, bool))),
    "traced-add-at": (traced_add_at, (A, np.array([2, 0, 2]), A[:3].copy())),
    "out-arguments": (out_arguments, (A, np.zeros((3, 4)), np.zeros(4), np.zeros((3, 4)),
                                      np.zeros((3, 4)))),
    "out-methods": (out_methods, (A, np.zeros((3, 4)), np.zeros(3))),
    "copyto-fill": (copyto_fill, (A, A[::-1].copy())),
    "diagonal-put-place": (diagonal_put_place, (SQ, tall(), CUBE[:, :2, :2].copy())),
    "traced-place-putmask": (traced_place_putmask, (A, A[::-1].copy())),
    "only-mutates": (only_mutates, (V,)),
    "overlapping": (overlapping, (A,)),
    "view-sees-write": (view_sees_write, (A,)),
    "view-of-view": (view_of_view, (A,)),
    "transpose-views": (transpose_views, (SQ,)),
    "reshape-views": (reshape_views, (CUBE,)),
    "copies-do-not-alias": (copies_do_not_alias, (A,)),
    "local-buffers": (local_buffers, (V,)),
    "weak-scalars-rebind": (weak_scalars_rebind, (A, 2)),
}


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _assert_same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_same(g, w)
        return
    if want is None:
        assert got is None
        return
    if isinstance(want, bool):
        assert bool(got) == want
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def _relations(result, args) -> list:
    """Per result leaf: which argument it is (``("is", i)``), shares memory with
    (``("view", i)``), or None: what NumPy's aliasing of results looks like."""
    leaves = list(result) if isinstance(result, (tuple, list)) else [result]
    found = []
    for leaf in leaves:
        rel = None
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray) and isinstance(leaf, np.ndarray):
                if leaf is a:
                    rel = ("is", i)
                elif np.shares_memory(leaf, a):
                    rel = ("view", i)
        found.append(rel)
    return found


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_write_program_matches_numpy(name, backend):
    fn, args = PROGRAMS[name]
    want_args, got_args = _copies(args), _copies(args)
    want = fn(*want_args)
    want_aliases = _relations(want, want_args)
    want = want.copy() if isinstance(want, np.ndarray) else want
    got = tj.jit(fn, backend=backend)(*got_args)
    assert _relations(got, got_args) == want_aliases  # returns the caller's array, as NumPy
    _assert_same(got, want)
    for g, w in zip(got_args, want_args, strict=True):  # the caller's arrays afterwards
        _assert_same(g, w)
    again = _copies(args)  # the cached call writes back too
    _assert_same(tj.jit(fn, backend=backend)(*again), want)
    for g, w in zip(again, want_args, strict=True):
        _assert_same(g, w)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_basic_index_writes_match_numpy(data):
    """``a[key] = v`` then ``a[key] *= 2`` through the view, for drawn basic keys (ints,
    slices with steps, Ellipsis, None) and values broadcast into the region."""
    # any shape, or one with equal sides (where a swapped axis would hide); sides of 0 too
    side = st.integers(0, 4)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)
                      | st.tuples(st.integers(1, 3), side).map(lambda nd: (nd[1],) * nd[0]))
    key = data.draw(hnp.basic_indices(shape, allow_newaxis=True))
    region = np.empty(shape)[key].shape
    tail = region[data.draw(st.integers(0, len(region))):]  # broadcast into the region
    vshape = tuple(1 if data.draw(st.booleans()) else d for d in tail)
    value = np.arange(float(np.prod(vshape))).reshape(vshape) + 100

    def f(a):
        a[key] = value
        v = a[key]
        if np.ndim(v):
            v *= 2
        return a.sum()

    a = np.arange(float(np.prod(shape))).reshape(shape)
    want_a, got_a = a.copy(), a.copy()
    want = f(want_a)
    np.testing.assert_array_equal(tj.jit(f, backend="reference")(got_a), want)
    np.testing.assert_array_equal(got_a, want_a)


def test_stencil_is_one_kernel_storing_the_interior():
    """``A[1:-1, 1:-1] = f(shifted slices)`` on an argument: the graph computes only the
    interior (the call stores it into the caller's array, region by region), and on the
    CPU one loop kernel reads the four shifted slices in the argument itself."""
    def step(a):
        a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])

    a = np.zeros((6, 5))
    graph = tj.jit(step, backend="reference").lower(a).optimized_graph
    ops = [n.op for n in graph.nodes]
    assert "update_slice" not in ops and "scatter" not in ops
    assert [v.type.shape for v in graph.outputs] == [(4, 3)]
    runner = tj.jit(step, backend="cpu").lower(a).source.split("# runner")[1]
    assert runner.count("args = (") == 1 and "lib" not in runner  # one kernel, no copy


def running_maximum(x):
    out = np.zeros_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = np.maximum(out[i - 1], x[i])
    before = out.copy()  # the version before the last write: returned, so kept
    out[-1] = -1.0
    return out, before


def test_a_loop_of_writes_into_a_buffer_updates_it_in_place_on_the_cpu(monkeypatch):
    """Each write of the loop updates the buffer the previous one made, in its memory,
    once every read of the old version is done; a version still needed is copied (the
    loop left unrolled: rolled, it is a scan, tests/test_roll.py)."""
    monkeypatch.setattr(tj.config, "roll_loops", False)
    x = rng.standard_normal(12)
    f = tj.jit(running_maximum, backend="cpu")
    for got, want in zip(f(x), running_maximum(x), strict=True):
        np.testing.assert_array_equal(got, want)
    runner = f.lower(x).source.split("# runner")[1]
    assert runner.count("update_slice in place") == 11  # the loop's
    assert runner.count("update_slice,") == 2  # into the zeros (a constant), and `before`


def test_function_returning_none_that_only_writes(backend):
    def step(a, b):
        a[1:-1] = 0.5 * (b[:-2] + b[2:])

    a, b = np.zeros(6), np.arange(6.0)
    f = tj.jit(step, backend=backend)
    assert f(a, b) is None
    np.testing.assert_array_equal(a, [0, 1, 2, 3, 4, 0])
    f(b, a)  # the same signature: writes b
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 1.5, 5])


def test_inner_functions_write_to_their_callers_arrays(backend):
    @tj.jit
    def inner(v):
        v[0] = 100.0
        v *= 2

    def outer(x):
        y = x + 1
        inner(y[1:])  # a view: the write reaches y
        inner(x)
        return y

    x = np.arange(3.0)
    want_x = x.copy()
    want = outer(want_x)
    np.testing.assert_array_equal(tj.jit(outer, backend=backend)(x), want)
    np.testing.assert_array_equal(x, want_x)


# ---------------------------------------------------------------- errors


def _broadcast_view_write(x):
    b = np.broadcast_to(x, (2, 3))
    b[0, 0] = 1


def _broadcast_same_shape(x):
    np.broadcast_to(x, x.shape)[0] = 1  # still a read-only view


def _traced_mask_array_value(x):
    x[x > 1] = np.array([1.0, 2.0])


def _shape_mismatch(x):
    x[0:2] = np.ones(3)


def _int_plus_float(i):
    i += 1.5


def _int8_overflow(i):
    i[0] = 1000


def _copyto_same_kind(i, x):
    np.copyto(i, x)


def _scalar_item(x):
    s = x[0]
    s[...] = 1


def _advanced_value_shape(x):
    x[[0, 1]] = np.ones(3)


def _index_out_of_range(x):
    x[[0, 5]] = 1


ERRORS = {
    "broadcast-view": (_broadcast_view_write, (np.arange(3.0),)),
    "broadcast-same-shape": (_broadcast_same_shape, (np.arange(3.0),)),
    "traced-mask-array-value": (_traced_mask_array_value, (np.arange(3.0),)),
    "shape-mismatch": (_shape_mismatch, (np.arange(3.0),)),
    "int-plus-float": (_int_plus_float, (np.arange(3),)),
    "int8-overflow": (_int8_overflow, (np.arange(3, dtype=np.int8),)),
    "copyto-same-kind": (_copyto_same_kind, (np.arange(3), np.ones(3))),
    "scalar-item": (_scalar_item, (np.arange(3.0),)),
    "advanced-value-shape": (_advanced_value_shape, (np.arange(3.0),)),
    "index-out-of-range": (_index_out_of_range, (np.arange(3.0),)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_write_errors_are_numpys(name):
    fn, args = ERRORS[name]
    if name == "traced-mask-array-value":  # NumPy takes it when the count happens to fit;
        want = ValueError  # tracing cannot know the count
    else:
        with pytest.raises(Exception) as numpy_error:
            fn(*_copies(args))
        want = builtin_error(numpy_error.value)
    got_args = _copies(args)
    with pytest.raises(want) as e:
        tj.jit(fn, backend="reference")(*got_args)
    assert isinstance(e.value, TracejitError)
    assert e.value.location is not None and e.value.location.filename == __file__
    for g, a in zip(got_args, args, strict=True):
        np.testing.assert_array_equal(g, a)  # nothing half-done to the caller's


def test_read_only_argument(backend):
    def f(x):
        x[0] = 1.0
        return x * 2

    x = np.arange(3.0)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only") as e:
        tj.jit(f, backend=backend)(x)
    assert isinstance(e.value, ReadOnlyDestination)
    np.testing.assert_array_equal(x, np.arange(3.0))
    np.testing.assert_array_equal(tj.jit(f, backend=backend)(np.arange(3.0)), [2, 2, 4])


def test_a_written_argument_sharing_memory_with_another_is_refused():
    def f(x, y):
        x[0] = 5.0
        return y * 2

    a = np.arange(4.0)
    with pytest.raises(NotImplementedError, match="shares memory with argument 'y'"):
        tj.jit(f, backend="reference")(a, a[::2])
    np.testing.assert_array_equal(a, np.arange(4.0))
    np.testing.assert_array_equal(tj.jit(f, backend="reference")(a, a[::2].copy()), [0, 4])


def test_out_into_a_numpy_array_that_is_no_argument():
    buffer = np.zeros(3)

    def f(x):
        return np.add(x, 1, out=buffer)

    with pytest.raises(NotImplementedError, match="not an argument"):
        tj.jit(f, backend="reference")(np.ones(3))


# ---------------------------------------------------------------- gradients


def fill_buffer(x):
    out = np.zeros_like(x)
    out[1:] = x[:-1] * 2
    return (out * out).sum()


def stencil(a):
    a = a.copy()
    a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    a[1:-1, 1:-1] = np.sin(a[1:-1, 1:-1]) * a[:-2, 1:-1]
    return (a ** 2).sum()


def indexed_updates(x):
    y = np.cos(x)
    y[[0, 2]] += x[1:3] ** 2
    y[[1, 1]] = x[:2] * 3  # the last value stays: its gradient only
    y[y > 0.5] *= 2.0
    v = y[::-1]  # a view: the write changes y
    v[0] = x[0] * x[-1]
    np.add.at(y, [0, 0, 3], x[:3])
    np.multiply.at(y, [1, 1], x[2])
    return (y * np.arange(1.0, 5.0)).sum()


def writes_argument(x):
    x[1:] *= x[:-1]
    return (x ** 2).sum()


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("fn", [fill_buffer, stencil, indexed_updates, writes_argument],
                         ids=lambda f: f.__name__)
def test_gradient_through_writes_matches_finite_differences(fn, backend):
    x = rng.uniform(-1, 1, (4, 4) if fn is stencil else (4,))
    want = _fd(fn, x)
    got = tj.grad(fn, backend=backend)(x.copy())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def _returns_self(a):
    return a


def _returns_written(a):
    a *= 2
    return a


def _returns_out(a, out):
    np.multiply(a, -0.5, out=out)
    np.add(out, a, out=out)
    return out


def _returns_views(a):
    a[0, 0] = -1.0
    return a[1:], a.T, a.reshape(-1), a[:, 1], a[0, 0]


def _returns_unwritten_views(a):
    return a[::2], np.broadcast_to(a[0], (2, 3)), a + 0


def _returns_twice(a):
    a += 1
    return a, a


ALIASING = {
    "self": (_returns_self, (SQ,)),
    "written": (_returns_written, (SQ,)),
    "out": (_returns_out, (V, np.zeros(4))),
    "views": (_returns_views, (SQ,)),
    "unwritten-views": (_returns_unwritten_views, (SQ,)),
    "twice": (_returns_twice, (V,)),
}


@pytest.mark.parametrize("name", sorted(ALIASING))
def test_results_alias_the_arguments_as_numpys(name, backend):
    """What NumPy returns as an argument (``out=``'s array, ``return x``) or a view of one
    (``x[1:]``, ``x.T``) comes back as that array or view of the caller's array, so that a
    later write to the result reaches the argument, and the other way round; a NumPy
    scalar (``x[0, 0]``) and a new array (``x + 0``) stay copies. Cached calls too."""
    fn, args = ALIASING[name]
    f = tj.jit(fn, backend=backend)
    for _ in range(2):  # the compiling call, then the cached path
        want_args, got_args = _copies(args), _copies(args)
        want, got = fn(*want_args), f(*got_args)
        assert _relations(got, got_args) == _relations(want, want_args)
        _assert_same(got, want)
        for g, w in zip(got_args, want_args, strict=True):
            _assert_same(g, w)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            if isinstance(w, np.ndarray):
                assert g.flags.writeable == w.flags.writeable
                if w.flags.writeable and w.size:
                    w.flat[-1], g.flat[-1] = 99.0, 99.0  # a write through the result
        for g, w in zip(got_args, want_args, strict=True):
            _assert_same(g, w)


def test_scalars_returned_as_is_come_back_as_numpy_scalars(backend):
    """A Python float and a 0-d array returned as they are come back as NumPy scalars, as
    every 0-d result does (documented: NumPy returns a 0-d array as it is); a write to the
    0-d argument still reaches the caller's array."""
    got = tj.jit(_returns_self, backend=backend)(2.5)
    assert got == 2.5 and isinstance(got, float)
    x = np.array(2.5)
    got = tj.jit(_returns_written, backend=backend)(x)
    assert isinstance(got, np.float64) and got == 5.0 and x == 5.0


def test_results_alias_the_arguments_in_a_profile_and_before_the_switch(monkeypatch):
    """The profiling runner and the interpreter that answers while kernels compile in the
    background return the caller's array as well."""
    f = tj.jit(_returns_out, backend="cpu", compile="background")
    out = np.zeros(4)
    assert f(V, out) is out
    with tj.profile():
        out2 = np.zeros(4)
        assert f(V, out2) is out2
    f.wait_compiled()
    out3 = np.zeros(4)
    assert f(V, out3) is out3
    np.testing.assert_array_equal(out3, _returns_out(V, np.zeros(4)))


def test_writes_to_a_cupy_argument_stay_on_its_device(monkeypatch):
    """On the (emulated) GPU a CuPy argument is updated where it lives."""
    cudasim = pytest.importorskip("cudasim")
    from tracejit import targets

    def step(a):
        a[1:-1] = 0.5 * (a[:-2] + a[2:])
        a[0] += 1

    monkeypatch.setattr(targets, "gpu_requested", False)
    with cudasim.installed(scheduler="fibers") as cupy:
        cudasim.set_device_count(1)
        targets._cupy.cache_clear()
        targets._gpu_count.cache_clear()
        try:
            x = tj.to_device(np.arange(6.0), "cuda")
            with tj.device("cuda"):
                assert tj.jit(step)(x) is None
            assert isinstance(x, cupy.ndarray)
            want = np.arange(6.0)
            step(want)
            np.testing.assert_array_equal(tj.to_host(x), want)
            with tj.device("cuda"):  # the argument returned is the caller's CuPy array
                assert tj.jit(_returns_written)(x) is x
                y = tj.to_device(np.arange(6.0).reshape(2, 3), "cuda")
                rows = tj.jit(_returns_views)(y)[0]
                rows[0, 1] = 42.0  # a write through the returned view reaches y
            np.testing.assert_array_equal(tj.to_host(x), _returns_written(want))
            assert tj.to_host(y)[1, 1] == 42.0
        finally:
            targets._cupy.cache_clear()
            targets._gpu_count.cache_clear()


def test_corpus_regressions_add_at_and_tuple_rows():
    """From the program corpus: np.add.at with traced indices and values of another
    shape than the target (kmeans_step: the dtype check broadcast them), and a row
    written from a tuple of traced scalars (lorenz_euler: traj[i] = x, y, z)."""
    def f(X, labels, state):
        sums = np.zeros((3, 2))
        np.add.at(sums, labels, X)
        x, y, z = state
        traj = np.empty((2, 3))
        traj[0] = x, y, z
        traj[1] = [x * 2, 1.0, z]
        return sums, traj

    args = (np.arange(12.0).reshape(6, 2), np.array([0, 2, 1, 0, 0, 2]),
            np.array([1.0, 2.0, 3.0]))
    want = f(*args)
    for backend in ("reference", "cpu"):
        for g, w in zip(tj.jit(f, backend=backend)(*args), want, strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_bincount_with_minlength(backend):
    """np.bincount of traced values counts into minlength bins (kmeans_step in the
    corpus); a value outside them raises when the call runs, never a short result."""
    f = tj.jit(lambda x, w: (np.bincount(x, minlength=5), np.bincount(x, w, minlength=6),
                             np.bincount(np.array([3, 1]), minlength=2)), backend=backend)
    x, w = np.array([0, 2, 2, 1, 4]), np.linspace(0, 1, 5)
    for got, want in zip(f(x, w), (np.bincount(x, minlength=5), np.bincount(x, w, minlength=6),
                                   np.bincount(np.array([3, 1]), minlength=2)), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    for bad in (np.array([0, 7, 1, 1, 1]), np.array([0, -1, 1, 1, 1])):
        with pytest.raises(IndexError):
            f(bad, w)
    with pytest.raises(tj.errors.UnsupportedOperation, match="minlength"):
        tj.jit(lambda x: np.bincount(x), backend=backend)(x)


def add_one(a):
    a += 1
    return a


def scale_tail(a):
    a[1:] *= 2
    return a.sum()


LAYOUTS = {  # the same values, laid out otherwise in memory
    "swapped-i4": lambda x: x.astype(">i4"),
    "swapped-f8": lambda x: x.astype(">f8"),
    "strided": lambda x: np.repeat(x, 2, axis=-1)[..., ::2],
    "fortran": np.asfortranarray,
    "unaligned": lambda x: np.frombuffer(bytearray(1) + x.tobytes(), x.dtype, x.size, 1)
    .reshape(x.shape),
}


@pytest.mark.parametrize("fn", [add_one, scale_tail])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_written_arguments_of_any_layout_match_numpy(layout, fn, backend):
    """A written argument byte-swapped, strided, in Fortran order or unaligned is written
    as NumPy writes it, on the first runner and the compiled one (the runner computes a
    whole written argument in place only where it is C-contiguous, aligned and native: a
    '>i4' argument once got native int32 bytes, ``a += 1`` made 1 into 33554432)."""
    f = tj.jit(fn, backend=backend)
    for _ in range(2):
        base = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
        want_a, got_a = LAYOUTS[layout](base), LAYOUTS[layout](base)
        want = fn(want_a)
        _assert_same(f(got_a), want)
        _assert_same(got_a, want_a)
        f.wait_compiled()
