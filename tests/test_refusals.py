"""What jit cannot honour is refused with a typed error at the user's line, never computed
silently with another meaning: ndarray subclasses whose operators or results differ from
ndarray's (issue 11, item 3). Subclasses that are plain memory are accepted. In-place
writes to arguments (issue 11's ``x1 += A @ y``), once refused here, now reach the caller
as with NumPy: the tests that checked the refusals check that.
The backend does not matter here: the refusals happen while classifying or tracing."""

import os
import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import InvalidArgument

HERE = os.path.basename(__file__)
X = np.arange(4.0).reshape(2, 2)


def jit(fn, **kw):
    return tj.jit(fn, backend="reference", **kw)


def mul(a, b):
    return a * b


class Plain(np.ndarray):
    """A subclass that adds nothing: plain memory."""


class Tagged(np.ndarray):
    """A subclass that carries metadata through views, which jit would drop."""

    def __array_finalize__(self, obj):
        self.unit = getattr(obj, "unit", "m")


pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", PendingDeprecationWarning)
    MATRIX = np.matrix(X)

REFUSED = {
    "matrix": (MATRIX, "np.matrix"),
    "masked": (np.ma.array(X, mask=[[0, 1], [0, 0]]), "masked array"),
    "recarray": (np.rec.array([(1, 2.0)], dtype=[("a", "i8"), ("b", "f8")]), "record array"),
    "structured": (np.zeros(2, dtype=[("a", "f8"), ("b", "i4")]), "structured dtype"),
    "object": (np.array([1.0, None], dtype=object), "object array"),
    "finalize": (X.view(Tagged), "__array_finalize__"),
}


# ---------------------------------------------------------------- subclasses and dtypes


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_kinds_name_the_argument_and_the_line(name):
    x, what = REFUSED[name]
    with pytest.raises(InvalidArgument, match="argument a ") as e:
        jit(lambda a, b: mul(a, b))(b=x, a=x)  # keywords: the general classification path
    assert what in str(e.value) and "jit cannot honour" in str(e.value)
    assert e.value.location.filename == __file__ and HERE in str(e.value)
    assert "np.asarray" in e.value.hint or "astype" in e.value.hint


@pytest.mark.parametrize("name", ["matrix", "masked", "recarray", "finalize"])
def test_positional_subclasses_are_refused(name):
    x, what = REFUSED[name]
    with pytest.raises(InvalidArgument, match=what) as e:
        jit(mul)(x, x)
    assert "np.asarray(x)" in e.value.hint and e.value.location.filename == __file__


@pytest.mark.parametrize("x", [REFUSED["object"][0], np.array(["a", "b"])], ids=["object", "str"])
def test_positional_object_and_str_arrays_are_refused_naming_the_argument(x):
    """Passed positionally (the fast signature path) as by keyword; an object array was
    once taken for a random generator, whose marker dtype is object."""
    with pytest.raises(InvalidArgument, match="argument a is") as e:
        jit(lambda a: a * 2)(x)
    assert e.value.location.filename == __file__


def test_matrix_product_is_not_silently_elementwise():
    """The issue's snippet: NumPy's m * m is the matrix product."""
    m = np.matrix(X)
    with pytest.raises(InvalidArgument, match="matrix products"):
        jit(lambda a, b: a * b)(m, m)
    np.testing.assert_array_equal(jit(mul)(np.asarray(m), np.asarray(m)), X * X)  # the hint


def test_pytree_leaf_path_is_in_the_message():
    params = {"W": np.matrix(X), "b": np.zeros(2)}
    with pytest.raises(InvalidArgument, match=r"argument params\['W'\] is an np.matrix"):
        jit(lambda params, x: x @ params["W"] + params["b"])(params, X)
    with pytest.raises(InvalidArgument, match=r"argument xs\[1\] is a masked array"):
        jit(lambda xs: xs[0] + xs[1])([X, np.ma.array(X)])


def test_grad_refuses_too():
    f = tj.grad(lambda w, x: ((x @ w) ** 2).sum(), backend="reference")
    with pytest.raises(InvalidArgument, match="argument w is an np.matrix") as e:
        f(np.matrix(X), X)
    assert e.value.location.filename == __file__
    with pytest.raises(InvalidArgument, match="masked array"):
        tj.value_and_grad(lambda w: (w * w).sum(), backend="reference")(np.ma.array(X))
    with pytest.raises(InvalidArgument, match="np.matrix"):
        tj.vjp(lambda w: w * 2, np.matrix(X), backend="reference")


def test_subclass_constants_are_refused():
    m = np.matrix(X)
    with pytest.raises(InvalidArgument, match="cannot use an np.matrix .* as a constant"):
        jit(lambda a: a * m)(X)


def test_memmap_is_read_as_a_plain_array(tmp_path):
    mm = np.memmap(tmp_path / "data.bin", dtype=np.float64, mode="w+", shape=(2, 2))
    mm[:] = X
    mm.flush()
    ro = np.memmap(tmp_path / "data.bin", dtype=np.float64, mode="r", shape=(2, 2))
    out = jit(mul)(ro, ro)
    assert type(out) is np.ndarray  # results are plain ndarrays, as documented
    np.testing.assert_array_equal(out, X * X)
    out = tj.grad(lambda w: (w * w).sum(), backend="reference")(ro)
    np.testing.assert_array_equal(out, 2 * X)


def test_trivial_subclass_is_a_plain_array():
    p = X.view(Plain)
    f = jit(mul)
    out = f(p, p)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, X * X)
    f(X, X)  # the same signature: one compiled entry serves both
    assert f.cache_info().signatures == 1
    out = jit(lambda d: d["a"] + 1)({"a": p})
    np.testing.assert_array_equal(out, X + 1)


# ---------------------------------------------------------------- in-place writes
# (once refused; now honoured as NumPy does: tests/test_inplace.py has the full table)


def kernel(x1, A, y):
    x1 += A @ y
    return x1


def test_the_issues_kernel_writes_to_the_callers_array():
    x1, A, y = np.ones(2), np.array([[1.0, 2.0], [3.0, 4.0]]), np.arange(2.0)
    want = kernel(np.ones(2), A, y)
    got = jit(kernel)(x1, A, y)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x1, want)  # the caller's array changed, as with NumPy
    jit(kernel)(x1, A, y)  # and again on the next (cached) call
    np.testing.assert_array_equal(x1, kernel(want.copy(), A, y))


AUGMENTED = ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="]


def augmented(op: str):
    """``def f(x, y): x <op> y; return x``, written as the statement itself."""
    namespace = {}
    exec(f"def f(x, y):\n    x {op} y\n    return x\n", namespace)
    return namespace["f"]


@pytest.mark.parametrize("op", AUGMENTED)
def test_each_augmented_operator_on_an_argument_writes_to_it(op):
    x = np.arange(4).reshape(2, 2) + 1
    y = np.eye(2, dtype=x.dtype) if op == "@=" else np.ones_like(x)
    if op in ("/=", "**=", "@="):
        x, y = x.astype(np.float64), y.astype(np.float64)
    f = augmented(op)
    want_x = x.copy()
    want = f(want_x, y)
    got_x = x.copy()
    np.testing.assert_allclose(jit(f)(got_x, y), want)
    np.testing.assert_allclose(got_x, want_x)


def test_the_same_kind_cast_of_an_augmented_statement_raises_at_the_users_line():
    def f(x):
        x += 1.5
        return x

    x = np.arange(3)
    with pytest.raises(TypeError, match="same_kind") as e:
        jit(f)(x)
    assert e.value.location.lineno == f.__code__.co_firstlineno + 1
    assert e.value.location.filename == __file__
    np.testing.assert_array_equal(x, np.arange(3))  # nothing half-done to the caller's


@pytest.mark.parametrize("view", [
    lambda x: x[0], lambda x: x[:, 1:], lambda x: x.T, lambda x: x.reshape(4),
    lambda x: x.transpose()[::-1], lambda x: np.expand_dims(x, 0), lambda x: x.ravel(),
    lambda x: x[None][0], lambda x: x[...],
], ids=["row", "slice", "T", "reshape", "transpose-slice", "expand_dims", "ravel",
        "nested", "ellipsis"])
def test_a_write_through_a_view_of_an_argument_reaches_it(view):
    def f(x):
        v = view(x)
        v += 1
        return v

    want_x = X.copy()
    want = f(want_x)
    got_x = X.copy()
    np.testing.assert_array_equal(jit(f)(got_x), want)
    np.testing.assert_array_equal(got_x, want_x)


def test_item_assignment_to_an_argument():
    def f(x):
        x[0] = 1.0
        return x

    x = X.copy()
    np.testing.assert_array_equal(jit(f)(x), [[1.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(x, [[1.0, 1.0], [2.0, 3.0]])


def test_arguments_inside_pytrees_and_keywords_are_written():
    def f(params, *, scale):
        params["W"] -= 0.1 * scale
        return params

    params, scale = {"W": X.copy()}, X.copy()
    out = jit(f)(params, scale=scale)
    np.testing.assert_allclose(params["W"], X - 0.1 * X)
    np.testing.assert_allclose(out["W"], X - 0.1 * X)

    def g(x, *, s):
        s += 1
        return x * s

    s = X.copy()
    np.testing.assert_array_equal(jit(g)(X, s=s), X * (X + 1))
    np.testing.assert_array_equal(s, X + 1)


def computed(x, y):
    t = x * 2
    t += y  # t is the function's own: rebinding is invisible, as in NumPy
    u = x.copy()
    u *= 3
    r = t[0, 1]  # a NumPy scalar: += rebinds
    r += 1
    w = x.astype(x.dtype)  # astype copies
    w -= 1
    return t, u, r, w, x


def test_computed_values_still_rebind_and_give_numpys_answer():
    x, y = np.arange(4.0).reshape(2, 2), np.ones((2, 2))
    got = jit(computed)(x, y)
    want = computed(x.copy(), y)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w)


def test_python_scalar_arguments_rebind():
    def f(x, n):
        n += 1
        return x * n

    np.testing.assert_array_equal(jit(f)(X, 2.0), X * 3.0)


def test_an_inner_jit_writes_to_its_callers_arrays():
    """A value the outer function computed is the inner function's argument: NumPy lets
    the inner function change it for the outer one."""
    inner = jit(kernel)
    A = np.array([[1.0, 2.0], [3.0, 4.0]])

    def outer(x, A):
        t = x * 2
        inner(t, A, x)
        return t

    x = np.ones(2)
    np.testing.assert_array_equal(jit(outer)(x, A), outer(np.ones(2), A))

    def fine(x, A):
        t = jit(lambda a: a * 2)(x)  # the inner function's result is the caller's own
        t += 1
        return t

    np.testing.assert_array_equal(jit(fine)(np.ones(2), np.eye(2)), np.full(2, 3.0))


def test_grad_of_a_function_writing_to_its_argument():
    def loss(w):
        w *= 2
        return (w * w).sum()

    w = X.copy()
    np.testing.assert_allclose(tj.grad(loss, backend="reference")(w), 8 * X)
    np.testing.assert_array_equal(w, 2 * X)  # the caller's array changed, as with NumPy

    def outer(x):
        y = x + 1
        g = tj.grad(loss)(y)  # grad inside jit: y is loss's argument, and changes
        return g, y

    g, y = jit(outer)(X)
    np.testing.assert_allclose(g, 8 * (X + 1))
    np.testing.assert_allclose(y, 2 * (X + 1))

    def loss_copy(w):
        w = w.copy()
        w *= 2
        return (w * w).sum()

    np.testing.assert_allclose(tj.grad(loss_copy, backend="reference")(X), 8 * X)
