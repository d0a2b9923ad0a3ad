"""Every user-causable error: its type, and a message naming the user's line with a hint.

Each traced function marks its offending line with ``# <- error``; the test computes that
line number from the source, so moving code around keeps the tests valid.
"""

import inspect
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj

HERE = os.path.basename(__file__)
MARK = "# <- error"
X = np.arange(3.0)
S = np.array(2.0)
CONCRETE = ("np.where", "static_argnums")


def marked_line(fn):
    """Line number of the one line of ``fn``'s source that ends with MARK."""
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, text in enumerate(lines) if text.rstrip().endswith(MARK)]
    return first + offset


def error_types(spec):
    """Exception classes from names in tracejit.errors or builtin classes (tuple = any of)."""
    specs = spec if isinstance(spec, tuple) else (spec,)
    return tuple(getattr(tj.errors, s) if isinstance(s, str) else s for s in specs)


def assert_points_at(err, site, needles):
    """``err`` is a TracejitError naming this file and the marked line of ``site``, mentioning
    one of ``needles``, and carrying a hint."""
    msg = str(err)
    assert isinstance(err, tj.errors.TracejitError), repr(err)
    assert HERE in msg, msg
    assert re.search(rf"(?<!\d){marked_line(site)}(?!\d)", msg), msg
    assert any(needle in msg for needle in needles), msg
    assert re.search(r"\bhint\b", msg, re.IGNORECASE), f"no hint in:\n{msg}"


# --------------------------------------------------------------------------- hierarchy


@pytest.mark.parametrize(
    "name",
    [
        "ConcretizationError",
        "InvalidArgument",
        "DTypeError",
        "ShapeError",
        "IndexOutOfBounds",
        "UnsupportedOperation",
    ],
)
def test_errors_derive_from_tracejit_error(name):
    assert issubclass(getattr(tj.errors, name), tj.errors.TracejitError)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("ConcretizationError", TypeError),
        ("InvalidArgument", TypeError),
        ("DTypeError", TypeError),
        ("ShapeError", ValueError),
        ("IndexOutOfBounds", IndexError),
    ],
)
def test_errors_derive_from_numpy_builtin(name, builtin):
    assert issubclass(getattr(tj.errors, name), builtin)


# --------------------------------------------------------------------------- traced functions


def _if_on_traced(x):
    if x.sum() > 0:  # <- error
        return x
    return -x


def _bool(s):
    return bool(s)  # <- error


def _float(s):
    return float(s)  # <- error


def _int(s):
    return int(s)  # <- error


def _item(s):
    return s.item()  # <- error


def _len_0d(s):
    return len(s)  # <- error


def _range_of_traced(x, n):
    for _ in range(n):  # <- error
        x = x + 1
    return x


def _traced_slice_bound(x, n):
    return x[:n]  # <- error


def _add_out(x, buf):
    return np.add(x, x, out=buf)  # <- error


BUFFER = np.zeros(3)


def _add_out_concrete(x):
    return np.add(x, x, out=BUFFER)  # <- error


def _sum_out(x, buf):
    return np.sum(x, out=buf)  # <- error


def _packbits(x):
    return np.packbits(x > 0)  # <- error


def _histogramdd(x):
    return np.histogramdd(x, bins=2)  # <- error


def _method_initial(x):
    return x.max(axis=0, initial=0.0)  # <- error


def _eig(m):
    return np.linalg.eig(m)  # <- error


def _real_if_close(x):
    return np.real_if_close(x * 1j)  # <- error


def _mask(x):
    return x[x > 0]  # <- error


def _setitem(x):
    x[x > 1] = np.ones(2)  # <- error
    return x


def _broadcast(x, y):
    return x + y  # <- error


def _reshape(x):
    return x.reshape(4)  # <- error


def _matmul(a, b):
    return a @ b  # <- error


def _concatenate(a, b):
    return np.concatenate([a, b])  # <- error


def _static_index(x):
    return x[10]  # <- error


def _bad_axis(x):
    return x.sum(axis=2)  # <- error


def _max_of_empty(x):
    return np.max(x)  # <- error


def _bitwise_on_floats(x):
    return np.bitwise_and(x, x)  # <- error


def _inplace_int_plus_float(x):
    x += 1.5  # <- error
    return x


def _helper_branches(x):
    if x.max() > 1:  # <- error
        return x
    return x + 1


def _helper_mismatch(x):
    return x.reshape(2, 2)  # <- error


def _via_helper_branch(x):
    return _helper_branches(x) * 2


def _via_helper_packbits(x):
    return _packbits(x) * 2


def _via_helper_shape(x):
    return _helper_mismatch(x) * 2


def case(fn, args, exc, needles, site=None):
    return pytest.param(fn, args, exc, needles, site or fn, id=fn.__name__.strip("_"))


TRACE_ERRORS = [
    case(_if_on_traced, (X,), "ConcretizationError", CONCRETE),
    case(_bool, (S,), "ConcretizationError", CONCRETE),
    case(_float, (S,), "ConcretizationError", CONCRETE),
    case(_int, (S,), "ConcretizationError", CONCRETE),
    case(_item, (S,), "ConcretizationError", CONCRETE),
    case(_len_0d, (S,), "ConcretizationError", CONCRETE),
    # NumPy ints stay traced (a Python int would be made static: tests/test_auto_static.py)
    case(_range_of_traced, (X, np.int64(3)), "ConcretizationError", CONCRETE),
    case(_traced_slice_bound, (X, np.int64(2)), "ConcretizationError", CONCRETE),
    case(_add_out, (X, np.zeros(2)), "ShapeError", ("non-broadcastable",)),
    case(_add_out_concrete, (X,), "UnsupportedOperation", ("out=",)),
    case(_sum_out, (X, np.zeros(3)), "ShapeError", ("output array",)),
    case(_packbits, (X,), "UnsupportedOperation", ("packbits",)),
    case(_histogramdd, (X,), "UnsupportedOperation", ("histogramdd",)),
    case(_method_initial, (X,), "UnsupportedOperation", ("initial",)),  # (was a bare TypeError)
    case(_eig, (np.eye(3),), "UnsupportedOperation", ("eig",)),
    case(_real_if_close, (X,), "UnsupportedOperation", ("real_if_close",)),
    case(_mask, (X,), ("ShapeError", "UnsupportedOperation"), ("np.where",)),
    case(_setitem, (X,), "ShapeError", ("np.where", "depends on the data")),
    case(_broadcast, (X, np.ones(4)), "ShapeError", ("broadcast",)),
    case(_reshape, (X,), "ShapeError", ("reshape",)),
    case(_matmul, (np.ones((2, 3)), np.ones((2, 3))), "ShapeError", ("matmul",)),
    case(_concatenate, (np.ones((2, 3)), np.ones((2, 4))), "ShapeError", ("concatenate",)),
    case(_static_index, (X,), "IndexOutOfBounds", ("out of bounds",)),
    case(_bad_axis, (X,), (ValueError, IndexError), ("axis",)),
    case(_max_of_empty, (np.zeros(0),), ValueError, ("zero-size", "empty")),
    case(_bitwise_on_floats, (X,), "DTypeError", ("bitwise_and",)),
    case(_inplace_int_plus_float, (np.arange(3),), TypeError, ("same_kind",)),
    case(_via_helper_branch, (X,), "ConcretizationError", CONCRETE, site=_helper_branches),
    case(_via_helper_packbits, (X,), "UnsupportedOperation", ("packbits",), site=_packbits),
    case(_via_helper_shape, (X,), "ShapeError", ("reshape",), site=_helper_mismatch),
]


@pytest.mark.parametrize(("fn", "args", "exc", "needles", "site"), TRACE_ERRORS)
def test_trace_error_names_user_line_and_hint(backend, fn, args, exc, needles, site):
    with pytest.raises(error_types(exc)) as info:
        tj.jit(fn, backend=backend)(*args)
    assert_points_at(info.value, site, needles)


def test_failing_trace_raises_again_and_caches_nothing(backend):
    f = tj.jit(_packbits, backend=backend)
    for _ in range(2):
        with pytest.raises(tj.errors.UnsupportedOperation):
            f(X)
    assert f.cache_info().signatures == 0


# --------------------------------------------------------------------------- runtime errors


def _gather(x, idx):
    return x[idx] * 2  # <- error


def _via_helper_gather(x, idx):
    return _gather(x, idx) + 1


@pytest.mark.parametrize("fn", [_gather, _via_helper_gather], ids=["direct", "helper"])
@pytest.mark.parametrize("bad", [[0, 7], [-6, 0]], ids=["too-high", "too-low"])
def test_out_of_range_gather_raises_at_call(backend, fn, bad):
    f = tj.jit(fn, backend=backend)
    x, good = np.arange(5.0), np.array([4, -5])
    expected = fn(x, good)
    np.testing.assert_array_equal(f(x, good), expected)
    with pytest.raises(tj.errors.IndexOutOfBounds) as info:
        f(x, np.array(bad))
    assert_points_at(info.value, _gather, ("out of bounds",))
    np.testing.assert_array_equal(f(x, good), expected)
    assert f.cache_info().misses == 1


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.integers(-8, 7), min_size=1, max_size=6))
def test_gather_bounds_check_matches_numpy(backend, idx):
    f = tj.jit(_gather, backend=backend)
    x, idx = np.arange(5.0), np.array(idx)
    if np.all((idx >= -5) & (idx < 5)):
        np.testing.assert_array_equal(f(x, idx), x[idx] * 2)
    else:
        with pytest.raises(tj.errors.IndexOutOfBounds):
            f(x, idx)


# --------------------------------------------------------------------------- arguments


def _first(x, label):
    return x


@pytest.mark.parametrize("bad", [{"a"}, bytearray(b"ab"), [np.zeros(2), {"b"}]],
                         ids=["set", "bytearray", "set-in-list"])
def test_unhashable_argument_leaf_names_the_argument(backend, bad):
    """Hashable non-arrays are passed by value (tests/test_auto_static.py); what is
    neither an array nor hashable is refused, naming the argument."""
    f = tj.jit(_first, backend=backend)
    with pytest.raises(tj.errors.InvalidArgument, match="label"):
        f(X, bad)
    with pytest.raises(tj.errors.InvalidArgument, match="label"):
        f(X, label=bad)


def test_unhashable_static_argument(backend):
    by_position = tj.jit(lambda x, shape: x.reshape(shape), static_argnums=1, backend=backend)
    with pytest.raises(tj.errors.InvalidArgument):
        by_position(X, [3])
    by_name = tj.jit(lambda x, shape: x.reshape(shape), static_argnames=("shape",), backend=backend)
    with pytest.raises(tj.errors.InvalidArgument):
        by_name(X, shape=[3])


def test_unknown_backend_is_rejected():
    with pytest.raises(tj.errors.TracejitError, match="no-such-backend"):
        tj.jit(lambda x: x + 1, backend="no-such-backend")(X)
