"""The cached call in C (``tracejit._dispatch``) against its definition in Python.

``tracejit.dispatch`` defines the cached call's steps in Python (``PythonDispatcher``,
``python_fast_key``); JitFunction derives from the C type that does the same where it was
built. These tests hold the C one to the Python one: the key never joins two calls the
Python key tells apart (a shared key would run one signature's runner on another's
arrays: a silent wrong answer), calls give the same results, counts and errors through
both, and the C code leaks no references. The suite's other tests run through the C one.
"""

from __future__ import annotations

import gc
import shutil
import sys
import threading
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracejit as tj
from tracejit import api, dispatch
from tracejit.dispatch import PythonDispatcher, python_fast_key


def test_the_c_dispatcher_is_built_where_a_c_compiler_is():
    """The README's install builds it where a C compiler is on PATH; a machine without
    one runs the Python steps, slower (the same answers: the tests below compare them)."""
    if shutil.which("cc") or shutil.which("gcc"):
        assert dispatch.BUILT
        assert issubclass(tj.JitFunction, dispatch.Dispatcher)
        assert tj.JitFunction.__call__ is not PythonDispatcher.__call__
    else:
        assert not dispatch.BUILT
        assert issubclass(tj.JitFunction, PythonDispatcher)


if dispatch.BUILT:
    class PythonJit(PythonDispatcher, tj.JitFunction):
        """A jitted function whose call takes the Python steps (PythonDispatcher's
        __call__ comes first in its method order), for side-by-side runs with the C
        ones."""
else:  # (JitFunction's call is PythonDispatcher's already)
    PythonJit = tj.JitFunction


# dtypes the key must tell apart: every number kind, both byte orders, the equal-sized
# pairs whose bytes alone would not (int64/float64/complex64, int32/float32/uint32), and
# the long/longlong pair that NumPy calls equal
DTYPES = ["?", "i1", "u1", "i2", "<u2", ">u2", "<i4", ">i4", "u4", "<i8", ">i8", "l", "q",
          "u8", "<f2", "<f4", ">f4", "<f8", ">f8", "g", "<c8", ">c8", "c16"]
EXTENTS = st.sampled_from([0, 1, 2, 3])  # equal extents, where axis mix-ups would hide
# ints, bools, None and strs: keyed by type or by value (``valued``); the ints that the
# key's 64-bit words would confuse (2**64 + 1 with 1, -1 with 2**64 - 1) take the general
# path; strs whose bytes pad alike ("a" and "a\0"), empty, long, and past 256 bytes
VALUES = [0, 1, -1, 2, True, False, 2**63 - 1, -2**63, 2**64 + 1, 2**64 - 1, 2**70, None,
          "", "a", "a\0", "b", "ab", "\u00e9", "x" * 8, "x" * 9, "x" * 256, "x" * 257,
          "\ud800"]
with warnings.catch_warnings():  # (np.matrix's PendingDeprecationWarning)
    warnings.simplefilter("ignore")
    OTHERS = [1, True, None, "s", np.float64(0.5), np.float32(1), [1.0], (2.0,),
              np.zeros(2, "M8[s]"), np.zeros(2, "M8[ns]"), np.zeros(2, "m8[D]"),
              np.zeros(3, "U2"), np.zeros(2, [("a", "f8")]), np.zeros(2, object),
              np.zeros(3).view(np.recarray), np.ma.zeros(3), np.matrix(np.zeros((2, 2)))]


@st.composite
def arguments(draw) -> object:
    kind = draw(st.sampled_from(["array", "array", "array", "float", "value", "other"]))
    if kind == "float":
        return draw(st.sampled_from([0.5, -2.0, float("nan")]))
    if kind == "value":
        return draw(st.sampled_from(VALUES))
    if kind == "other":
        return draw(st.sampled_from(OTHERS))
    shape = tuple(draw(st.lists(EXTENTS, max_size=4)))
    a = np.zeros(shape, draw(st.sampled_from(DTYPES)))
    if draw(st.booleans()) and a.ndim:
        a = a[::-1]  # a view: strides are no part of the key
    return a


def _types(args) -> tuple:
    return tuple(a.dtype.num if type(a) is np.ndarray else type(a) for a in args)


def _like(a, draw):
    """An argument one small step from ``a``: the kind of neighbour a key must tell apart
    (or may join: an equal copy, a view)."""
    if a is None or type(a) in (int, bool, str):  # its neighbours: the same by value in
        # another type, the next value, the same bytes padded, an int's 64-bit twin
        near = [a, 0.5, None, str(a), int(bool(a)), bool(a)]
        if type(a) is int:
            near += [a + 1, a - 2**64, a + 2**64]
        if type(a) is str:
            near += [a + "\0", a[:-1], a.encode("utf-8", "surrogatepass").decode("latin-1")]
        return draw(st.sampled_from(near))
    if type(a) is not np.ndarray or a.dtype.kind not in "biufc":
        return draw(st.sampled_from([a, 0.5, np.zeros(())]))
    change = draw(st.sampled_from(["copy", "view", "byte order", "same size", "extent",
                                   "axes", "ndim", "scalar"]))
    if change == "copy":
        return a.copy()
    if change == "view":
        return a[::-1] if a.ndim else a[()]
    if change == "byte order":
        return a.astype(a.dtype.newbyteorder())
    if change == "same size":
        same = [d for d in DTYPES if np.dtype(d).itemsize == a.dtype.itemsize]
        return a.astype(draw(st.sampled_from(same)))
    if change == "extent" and a.ndim:
        axis = draw(st.integers(0, a.ndim - 1))
        shape = list(a.shape)
        shape[axis] = draw(st.sampled_from([0, 1, 2, 3]))
        return np.zeros(shape, a.dtype)
    if change == "axes":
        return np.zeros(a.shape[::-1], a.dtype)
    if change == "ndim":
        return np.zeros((*a.shape, 1) if draw(st.booleans()) else (1, *a.shape), a.dtype)
    return draw(st.sampled_from([0.5, np.zeros((), a.dtype)]))


@given(st.data())
def test_the_c_key_joins_only_what_the_python_key_joins(data):
    """Equal C keys mean equal Python keys (the same shapes, equal dtypes, the same types,
    equal values where they are values); a C key exists only where a Python key does;
    equal Python keys of the same type numbers have equal C keys (the C key parts
    ``long`` from ``longlong``, no more). The second call differs from the first in one
    argument, by one step: where a key that joins too much would show it. ``valued``
    (which positions hold ints the function needs as values) is drawn, shorter than the
    call at times (positions without a parameter's name)."""
    first = data.draw(st.lists(arguments(), max_size=4))
    second = list(first)
    if first:
        i = data.draw(st.integers(0, len(first) - 1))
        second[i] = _like(first[i], data.draw)
    else:
        second = data.draw(st.lists(arguments(), max_size=2))
    valued = bytes(data.draw(st.lists(st.sampled_from([0, 1]), max_size=5)))
    keys = []
    for args in (first, second):
        c, p = dispatch.fast_key(tuple(args), valued), python_fast_key(tuple(args), valued)
        if c is not None:
            assert p is not None
        keys.append((c, p))
    (c1, p1), (c2, p2) = keys
    if c1 is not None and c2 is not None:
        assert (c1 == c2) == (p1 == p2 and _types(first) == _types(second)), (first, second)


SHAPES = [(), (0,), (1,), (2,), (3,), (1, 1), (2, 1), (1, 2), (2, 2), (2, 3), (3, 2),
          (1, 1, 1), (2, 2, 2)]
SINGLES = ([np.zeros(shape, d) for d in DTYPES for shape in SHAPES] + VALUES
           + [0.5, float("inf")] + OTHERS)


@pytest.mark.parametrize("valued", [b"\0", b"\1", b""], ids=["by type", "by value", "unnamed"])
def test_every_pair_of_single_arguments_is_keyed_as_the_python_key_keys_it(valued):
    """Every pair of one-argument calls from a fixed list (every dtype and byte order at
    square, size-1 and empty shapes; the ints, bools, strs and None above; floats; what the
    key refuses): equal C keys exactly where the Python keys are equal and the type
    numbers match. The drawn test above covers calls of several arguments."""
    keys = [(dispatch.fast_key((a,), valued), python_fast_key((a,), valued), _types((a,)))
            for a in SINGLES]
    for c, p, _ in keys:
        assert c is None or p is not None
    for i, (c1, p1, t1) in enumerate(keys):
        if c1 is None:
            continue
        for j, (c2, p2, t2) in enumerate(keys):
            if c2 is not None:
                assert (c1 == c2) == (p1 == p2 and t1 == t2), (SINGLES[i], SINGLES[j])


def test_the_c_key_refuses_what_the_type_number_does_not_tell():
    """A datetime's unit and a structured dtype's fields are not in the type number: the
    call takes the general path (whose errors say what jit makes of them)."""
    for a in (np.zeros(2, "M8[s]"), np.zeros(2, [("a", "f8")]), np.zeros(2, "U1"),
              np.zeros(2, object), np.zeros(2).view(np.recarray)):
        assert dispatch.fast_key((a,), b"") is None
    by_type = dispatch.fast_key((np.zeros(2), 1), b"\0\0")
    by_value = dispatch.fast_key((np.zeros(2), 1), b"\0\1")
    assert None is not by_type != by_value is not None
    assert dispatch.fast_key((np.zeros(2), 1), b"\0") is None  # (no parameter's name)
    assert dispatch.fast_key((2**64 + 1,), b"\1") is None  # (no 64-bit word holds it)
    assert dispatch.fast_key((), b"") == b""
    assert dispatch.fast_key(tuple(np.zeros(1) for _ in range(33)), b"") is None
    with pytest.raises(TypeError):
        dispatch.fast_key([np.zeros(2)], b"")


def sgd(x, g, lr, out):
    np.multiply(g, -lr, out=out)
    np.add(out, x, out=out)
    return out


def poly(x, y, n=2, mode="plain", k=None):
    z = x * y + n
    if k is not None:  # (an int it needs as a value: valued from the first such call)
        z = z[:k]
    return (z if mode == "plain" else -z), z.sum()


CALLS = [
    ((np.arange(6.0), np.ones(6)), {}),
    ((np.arange(6.0), np.ones(6)), {}),  # a hit
    ((np.arange(6, dtype=">f8"), np.ones(6)), {}),  # a byte-swapped array: its own key
    ((np.arange(6.0)[::-1], np.ones(6)), {}),  # a view: the same signature
    ((np.arange(6.0), 2.5), {}),
    ((np.arange(6.0), 2.5), {"n": 3}),  # keywords: the general path
    ((np.arange(6.0), np.ones(6), 3), {}),  # an int: _simple_key's path
    ((np.arange(6.0), np.ones(6)), {"mode": "neg"}),
    ((np.arange(6.0), np.ones(6), 3, "neg"), {}),  # a str by position: a value
    ((np.arange(6.0), np.ones(6), 3, "neg"), {}),
    ((np.arange(6.0), np.ones(6), 4, "plain"), {}),
    ((np.arange(6.0), np.ones(6), 4, "plain", None), {}),
    ((np.arange(6.0), np.ones(6), True, "plain", 2), {}),  # k: valued from here on
    ((np.arange(6.0), np.ones(6), True, "plain", 2), {}),
    ((np.arange(6.0), np.ones(6), 1, "plain", 3), {}),
    ((np.arange(6.0), np.ones(6), 1, "plain", 2), {}),
    ((np.arange(6.0), np.ones(6), 1, "plain", True), {}),  # a bool there: its own key
    ((np.arange(6.0), np.ones(6), 2**70, "plain", 2), {}),  # an int beyond int64
    ((np.arange(4, dtype=np.int32), np.int32(2)), {}),  # a NumPy scalar
    ((np.arange(4, dtype=np.float32).reshape(2, 2), np.ones((2, 2), np.float32)), {}),
    ((np.arange(4, dtype=np.float32).reshape(2, 2), np.ones((2, 2), np.float32)), {}),
]


@pytest.mark.parametrize("compile_mode", ["sync", "background"])
def test_a_sequence_of_calls_gives_the_same_through_both(backend, compile_mode):
    c = tj.jit(poly, backend=backend, compile=compile_mode)
    p = PythonJit(poly, backend=backend, compile=compile_mode)
    for args, kwargs in CALLS:
        got, want = c(*args, **kwargs), p(*args, **kwargs)
        for g, w in zip(got, want, strict=True):
            assert type(g) is type(w) and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    assert c.cache_info() == p.cache_info()
    assert c.cache_info().hits >= 3


def test_writes_and_errors_go_the_same_way_through_both(backend):
    c, p = tj.jit(sgd, backend=backend), PythonJit(sgd, backend=backend)
    x, g = np.arange(5.0), np.full(5, 2.0)
    for f in (c, p):
        out = np.zeros(5)
        for _ in range(2):
            assert f(x, g, 0.5, out) is out
            np.testing.assert_array_equal(out, x - 1.0)
        with pytest.raises(tj.errors.ReadOnlyDestination):
            ro = np.zeros(5)
            ro.flags.writeable = False
            f(x, g, 0.5, ro)
        with pytest.raises(tj.errors.InPlaceArgumentError):
            f(x, g, 0.5, x)  # out is x: the trace took them for separate arrays
        with pytest.raises(ValueError):
            f(x, g, 0.5, np.zeros(4))  # NumPy's broadcast error (a new signature)
    assert c.cache_info() == p.cache_info()


def test_an_error_in_the_runner_propagates_through_the_c_call(backend):
    f = tj.jit(lambda a, i: a[i], backend=backend)
    a = np.arange(4.0)
    assert f(a, 1) == 1.0
    with pytest.raises(IndexError):
        f(a, 9)
    g = tj.jit(lambda x: np.linalg.inv(x), backend=backend)
    with pytest.raises(np.linalg.LinAlgError):
        for _ in range(2):  # the second a cached call
            g(np.zeros((2, 2)))


def test_a_profile_sees_calls_the_fast_path_would_have_made():
    f = tj.jit(lambda x: x + 1)
    x = np.ones(3)
    f(x)
    f(x)
    with tj.profile() as prof:
        f(x)
        f(x)
    assert sum(r.calls for r in prof.functions) == 2
    assert f.cache_info().hits == 3


def test_the_c_call_holds_no_reference_it_should_not():
    """Arguments, results, the entry and the keys are released: the reference counts
    are where they were after many calls, and memory does not grow."""
    f = tj.jit(lambda x, y: x * y + 1.0)
    x, y = np.ones(8, np.float32), np.ones(8, np.float32)
    f(x, y)
    f(x, 2.0)
    f.wait_compiled()  # (a later runner switching in mid-count would allocate its code)
    entry = next(iter(f._fast.values()))
    before = [sys.getrefcount(o) for o in (x, y, entry, f._fast, f._hits)]
    for _ in range(1000):
        f(x, y)
        f(x, 2.0)
    assert [sys.getrefcount(o) for o in (x, y, entry, f._fast, f._hits)] == before
    gc.collect()
    assert _grown(lambda: f(x, y)) < 4096


def _grown(call) -> int:
    """Bytes that 20,000 calls of ``call`` left allocated under this file's lines (what
    the calls allocate has them in its traceback; threads still compiling for earlier
    tests allocate too, without)."""
    here = [tracemalloc.Filter(True, __file__, all_frames=True),  # (not the first
            tracemalloc.Filter(False, tracemalloc.__file__, all_frames=True)]  # snapshot)
    tracemalloc.start(64)
    try:
        for _ in range(2000):
            call()
        start = tracemalloc.take_snapshot().filter_traces(here)
        for _ in range(20000):
            call()
        end = tracemalloc.take_snapshot().filter_traces(here)
    finally:
        tracemalloc.stop()
    return sum(d.size_diff for d in end.compare_to(start, "filename"))


def test_a_jitted_function_is_collected_with_its_cycles():
    """The C base's references (the entries, the counter) are visible to the collector: a
    jitted function its own entries refer to is freed."""
    import weakref

    def f(x):
        return x + 1

    jf = tj.jit(f)
    jf(np.ones(2))
    jf._fast["cycle"] = jf  # (a reference from the C slot back to the function)
    ref = weakref.ref(jf)
    del jf
    gc.collect()
    assert ref() is None


def test_calls_from_many_threads_through_the_c_call(backend):
    f = tj.jit(lambda x, s: x * s, backend=backend)
    xs = [np.full(16, float(i)) for i in range(8)]
    f(xs[0], 2.0)
    errors = []

    def work(x):
        try:
            for _ in range(300):
                np.testing.assert_array_equal(f(x, 2.0), x * 2.0)
        except Exception as e:  # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert f.cache_info().hits == 8 * 300


# ------------------------------------------------------------------ the write-back in C

def increment(a, b):
    a += b
    return a


def shift_rows(a, b):
    a[1:] = b[:-1] * 2
    return a[1:], a.sum()


def two_products(x1, x2, y, A):
    x1 += A @ y
    x2 += y @ A


def clip_negative(a):
    a[a < 0] = 0


def view_of_written(a, b):
    a *= 2
    return a[::2] + b, a.T


def _wide(n):
    return np.arange(2.0 * n)[::2] - 3.0  # a view: strided, no memory of its own


def _with_view(a):
    return a, a[::-1]


WRITERS = [  # (function, a list of argument-making lambdas, one per call)
    (sgd, [lambda: (np.arange(5.0), np.full(5, 2.0), 0.5, np.zeros(5)),
           lambda: (np.arange(5.0), np.full(5, 2.0), 0.5, np.zeros(10)[::2]),
           lambda: (np.arange(5.0), np.full(5, 2.0), 0.5, np.zeros(5, ">f8")),
           lambda: (_wide(5), np.full(5, 2.0), 0.5, np.zeros(5)),
           lambda: (np.arange(5.0), np.full(5, 2.0), -1.5, np.zeros(5, np.float32))]),
    (increment, [lambda: (np.arange(4.0), np.ones(4)), lambda: (_wide(4), np.ones(4)),
                 lambda: (np.arange(4.0), 2.5), lambda: (np.arange(4.0), _wide(4)),
                 lambda: _with_view(np.arange(4.0))]),  # (overlapping: refused)
    (shift_rows, [lambda: (np.arange(6.0), np.ones(6)), lambda: (_wide(6), np.ones(6))]),
    (two_products, [lambda: (np.ones(3), np.zeros(3), np.arange(3.0), np.eye(3) * 2),
                    lambda: (np.ones(3), np.zeros(3), np.arange(3.0), np.eye(6)[::2, ::2])]),
    (clip_negative, [lambda: (np.arange(-3.0, 3.0),), lambda: (_wide(6),)]),
    (view_of_written, [lambda: (np.arange(6.0).reshape(2, 3), np.ones(3)),
                       lambda: (np.arange(6.0).reshape(2, 3), np.ones((1, 3)))]),
]


def _outcome(f, args):
    """What a call did: its result (values, dtypes, which results are arguments), the
    arguments after it, or the error it raised."""
    try:
        got = f(*args)
    except Exception as e:
        return type(e).__name__
    flat = got if isinstance(got, tuple) else (got,)
    return ([(np.asarray(g).tolist(), np.asarray(g).dtype.str,
              [a is g for a in args]) for g in flat],
            [np.asarray(a).tolist() for a in args])


@pytest.mark.parametrize("fn, makes", WRITERS, ids=[w[0].__name__ for w in WRITERS])
def test_the_write_back_in_c_does_what_the_python_one_does(fn, makes, monkeypatch):
    """A function writing its arguments runs ``_dispatch.WriteBack`` on its cached calls
    (``api._Writes.fast`` writes the same steps out in Python without the C module): the
    same results, arguments afterwards, results that are the caller's arrays, and errors
    (a read-only argument, one passed twice), whether the caller's array is computed in
    (a destination), stored into (strided, byte-swapped, another dtype) or checked the
    slow way (a view)."""
    c = tj.jit(fn, backend="cpu")
    with monkeypatch.context() as m:
        m.setattr(api, "_WriteBack", None)
        p = tj.jit(fn, backend="cpu")
        [_outcome(p, make()) for make in makes]  # (compiled with the Python write-back)
    assert any(isinstance(e.run, dispatch.WriteBack) for e in c._cache.values()) or not c._fast
    for make in makes:
        for _ in range(2):  # the first call compiles; the second is the cached one
            assert _outcome(c, make()) == _outcome(p, make())
        frozen = make(), make()  # the first array read-only: an error where it is written
        for args in frozen:
            next(a for a in args if isinstance(a, np.ndarray)).flags.writeable = False
        assert _outcome(c, frozen[0]) == _outcome(p, frozen[1])
    twice = makes[0](), makes[0]()  # the first array passed again last, where it fits
    if len(twice[0]) > 1 and np.shape(twice[0][0]) == np.shape(twice[0][-1]):
        assert _outcome(c, (*twice[0][:-1], twice[0][0])) == \
            _outcome(p, (*twice[1][:-1], twice[1][0]))
    assert any(isinstance(e.run, dispatch.WriteBack) for e in c._cache.values())


def test_the_write_back_in_c_holds_no_reference_it_should_not():
    f = tj.jit(sgd, backend="cpu")
    x, g, out = np.arange(5.0), np.full(5, 2.0), np.zeros(5)
    strided = np.zeros(10)[::2]
    f(x, g, 0.5, out)
    f(x, g, 0.5, strided)
    f.wait_compiled()
    before = [sys.getrefcount(o) for o in (x, g, out, strided)]
    for _ in range(1000):
        assert f(x, g, 0.5, out) is out
        assert f(x, g, 0.5, strided) is strided
    assert [sys.getrefcount(o) for o in (x, g, out, strided)] == before
    assert _grown(lambda: f(x, g, 0.5, out)) < 4096
