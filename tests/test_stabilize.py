"""Stability rewrites: each fires on its pattern, keeps dtypes, agrees with NumPy where the
naive formula is accurate, stays finite and exact where it overflows, and leaves alone what
it must not change (other users of an intermediate, integers, other constants)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import tracejit as tj
from tracejit import nn
from tracejit.ir import verify
from tracejit.passes import run_pipeline
from tracejit.passes.stabilize import stabilize, stabilize_nodes

LOUD = {"over": "raise", "invalid": "raise", "divide": "raise"}  # underflow is fine
RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14}


def ops(fn, *args) -> list[str]:
    graph = tj.jit(fn, backend="reference").lower(*args).optimized_graph
    return [n.op for n in graph.nodes if n.op != "constant"]


def run(fn, *args, backend="reference"):
    return tj.jit(fn, backend=backend)(*args)


def assert_close(actual, expected, dtype):
    assert np.asarray(actual).dtype == dtype
    np.testing.assert_allclose(actual, expected, rtol=RTOL[np.dtype(dtype)], atol=0)


def moderate(dtype, shape=(4, 5), seed=0):
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(dtype)


# ---------------------------------------------------------------- each rewrite fires

FIRES = [
    # (name, naive form, op that must appear, op that must disappear)
    ("log1p", lambda x: np.log(1 + x), "log1p", "log"),
    ("log1p, x + 1.0", lambda x: np.log(x + 1.0), "log1p", "log"),
    ("log1p of -x", lambda x: np.log(1 - x), "log1p", "log"),
    ("expm1", lambda x: np.exp(x) - 1, "expm1", "exp"),
    ("expm1, -1 + exp", lambda x: -1.0 + np.exp(x), "expm1", "exp"),
    ("softplus", lambda x: np.log(1 + np.exp(x)), "logaddexp", "log"),
    ("softplus of log1p", lambda x: np.log1p(np.exp(x)), "logaddexp", "log1p"),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), "where", "negative"),
    ("log of sigmoid", lambda x: np.log(1 / (1 + np.exp(-x))), "logaddexp", "log"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, fn, new, old", FIRES, ids=[f[0] for f in FIRES])
def test_elementwise_rewrite_fires_and_agrees_with_numpy(name, fn, new, old, dtype):
    x = moderate(dtype)
    found = ops(fn, x)
    assert new in found and (old not in found or name == "sigmoid")
    if name == "sigmoid":  # exp(-x) became exp(-|x|), as exp(where(x >= 0, -x, x))
        assert found[:4] == ["greater_equal", "negative", "where", "exp"]
    assert_close(run(fn, x), fn(x), dtype)


def test_rewrites_are_accurate_where_the_naive_form_is_not():
    tiny = np.array([1e-10, -1e-12, 3e-20])
    np.testing.assert_allclose(run(lambda x: np.log(1 + x), tiny), np.log1p(tiny), rtol=1e-15)
    np.testing.assert_allclose(run(lambda x: np.exp(x) - 1, tiny), np.expm1(tiny), rtol=1e-15)
    big = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0, np.inf, -np.inf])
    with np.errstate(**LOUD):  # and no overflow on the way
        soft = run(lambda x: np.log(1 + np.exp(x)), big)
        sig = run(lambda x: 1 / (1 + np.exp(-x)), big)
    np.testing.assert_allclose(soft, -special.log_expit(-big), rtol=1e-15)
    np.testing.assert_allclose(sig, special.expit(big), rtol=1e-15)


# ---------------------------------------------------------------- log-softmax and logsumexp


def stable_softmax_log(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return np.log(e / e.sum(axis=-1, keepdims=True))


def naive_softmax_log(x):
    return np.log(np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True))


def reshaped_sum_softmax_log(x):
    e = np.exp(x)
    return np.log(e / e.sum(axis=1)[:, None])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [stable_softmax_log, naive_softmax_log, reshaped_sum_softmax_log,
                                lambda x: np.log(nn.softmax(x))])
def test_log_of_softmax_becomes_log_softmax(fn, dtype):
    x = moderate(dtype)
    found = ops(fn, x)
    assert "true_divide" not in found and found.count("log") == 1
    assert_close(run(fn, x), fn(x), dtype)
    extreme = np.array([[1000, -1000, 0], [-1000, -999, -998], [1, 2, 3]], dtype)
    with np.errstate(**LOUD):
        out = run(fn, extreme)
    assert_close(out, special.log_softmax(extreme, axis=1), dtype)


def test_stable_softmax_is_reused_not_recomputed():
    """``log(e / s)`` of a user's stable softmax is ``d - log(s)``: one max, one exp."""
    assert ops(stable_softmax_log, moderate(np.float32)) == [
        "max", "subtract", "exp", "sum", "log", "subtract"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis, keepdims", [(1, False), (0, True), ((0, 1), False), (None, True)])
def test_log_sum_exp_becomes_logsumexp(axis, keepdims, dtype):
    fn = lambda x: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))  # noqa: E731
    x = moderate(dtype)
    assert "max" in ops(fn, x)
    assert_close(run(fn, x), fn(x), dtype)
    big = x + dtype(1000)  # naive: exp overflows, the result is inf
    with np.errstate(**LOUD):
        out = run(fn, big)
    assert_close(out, special.logsumexp(big, axis=axis, keepdims=keepdims), dtype)


def test_logsumexp_special_rows_match_the_naive_form():
    """Rows of -inf give -inf, +inf gives inf and NaN gives NaN, as NumPy's naive form."""
    fn = lambda x: np.log(np.sum(np.exp(x), axis=1))  # noqa: E731
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.inf, -np.inf], [np.nan, 1.0],
                  [-1000.0, -1000.0]])
    out = run(fn, x)
    np.testing.assert_array_equal(out[:4], fn(x)[:4])
    np.testing.assert_allclose(out[4], -1000 + np.log(2), rtol=1e-15)  # naive: -inf


def test_logsumexp_keeps_the_sums_dtype():
    """A float64 sum of float32 exps: float64 result, as accurate as the naive form (both
    carry the float32 exp's rounding)."""
    x = moderate(np.float32)
    fn = lambda x: np.log(np.sum(np.exp(x), axis=1, dtype=np.float64))  # noqa: E731
    assert "max" in ops(fn, x)
    exact = special.logsumexp(x.astype(np.float64), axis=1)
    got = run(fn, x)
    assert got.dtype == np.float64
    err, naive_err = (np.max(np.abs(v / exact - 1)) for v in (got, fn(x)))
    assert err < 2.4e-7 and naive_err < 2.4e-7  # 2 float32 ULP


def test_already_stable_logsumexp_is_left_alone():
    def fn(x):
        m = x.max(axis=1, keepdims=True)
        return np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m

    x = moderate(np.float64)
    assert ops(fn, x) == ["max", "subtract", "exp", "sum", "log", "add"]
    graph = tj.jit(fn).lower(x).graph
    assert stabilize(graph) is graph


def test_stabilize_is_idempotent():
    x = moderate(np.float32)
    once = stabilize(tj.jit(naive_softmax_log).lower(x).graph)
    assert str(verify(stabilize(once))) == str(once)
    once = stabilize(tj.jit(lambda x: np.log(np.exp(x).sum())).lower(x).graph)
    assert str(stabilize(once)) == str(once)


# ---------------------------------------------------------------- what must not change


def test_other_users_of_intermediates_keep_their_values():
    """The rewritten log reads new values; the returned sum and ratio are still NumPy's."""
    def fn(x):
        s = np.sum(np.exp(x), axis=1)
        p = np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True)
        return s, np.log(s), p, np.log(p), 1 + x, np.log(1 + x)

    x = np.array([[1000.0, 0.0], [1.0, 2.0]])
    got, want = run(fn, x), fn(x)
    for i in (0, 2, 4):  # the intermediates, bit for bit (inf and NaN included)
        assert np.asarray(got[i]).tobytes() == np.asarray(want[i]).tobytes()
    np.testing.assert_allclose(got[1], special.logsumexp(x, axis=1), rtol=1e-15)
    np.testing.assert_allclose(got[3], special.log_softmax(x, axis=1), rtol=1e-15)
    np.testing.assert_allclose(got[5], np.log1p(x), rtol=1e-15)


@pytest.mark.parametrize("fn, x", [
    (lambda x: np.log(2 + x), np.float32([0.5])),                     # not 1
    (lambda x: np.exp(x) - 2, np.float32([0.5])),
    (lambda x: np.log(1 + x), np.array([1, 2], np.int64)),             # 1 + int may wrap
    (lambda x: np.log(1 - x), np.array([1, 2], np.int32)),
    (lambda x: np.log(1 + x), np.complex128([0.5j])),                  # complex: not rewritten
    (lambda x: np.log(np.float64(1) + x), np.float32([0.5])),          # f64 result; log1p(x) f32
    (lambda x: 2 / (1 + np.exp(-x)), np.float64([0.5])),
    (lambda x: 1 / (1 + np.exp(x)), np.float64([0.5])),                 # not exp(-x)
    (lambda x: np.log(np.sum(np.exp(x), axis=1)), np.zeros((2, 0))),  # empty: no max
], ids=["log-2", "exp-2", "int-log1p", "int-log1m", "complex", "strong-f64", "two-over",
        "exp-plus", "empty"])
def test_rewrites_do_not_fire(fn, x):
    graph = tj.jit(fn).lower(x).graph
    assert stabilize(graph) is graph
    got, want = run(fn, x), fn(x)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_dtypes_and_weak_scalars_are_kept():
    x16 = np.float16([0.25, -0.5])
    assert run(lambda x: np.log(1 + x), x16).dtype == np.float16
    assert run(lambda x: 1 / (1 + np.exp(-x)), x16).dtype == np.float16
    got = run(lambda x: np.log(1 + x), 1e-10)  # a weak Python float argument
    assert type(got) is type(np.log(1 + 1e-10)) and got == np.log1p(1e-10)


# ---------------------------------------------------------------- on every backend


def test_categorical_crossentropy_of_softmax_is_stable(backend):
    """The tutorial network's loss: ``log`` of the softmax becomes a log-softmax, so a
    confident wrong prediction costs its logit gap instead of inf."""
    def loss(z, onehot):
        return nn.categorical_crossentropy(nn.softmax(z), onehot).mean()

    z = np.array([[1000.0, -1000.0], [0.5, -0.5], [-2.0, 3.0]], np.float32)
    onehot = nn.one_hot(np.array([1, 0, 1]), 2, np.float32)
    found = ops(loss, z, onehot)
    assert "true_divide" not in found[:found.index("log") + 1]  # log of a sum, not of p
    with np.errstate(divide="ignore", invalid="ignore"):
        eager = loss(z, onehot)
    assert np.isinf(eager)
    expected = -np.mean(np.sum(onehot * special.log_softmax(z.astype(np.float64), axis=1), 1))
    got = run(loss, z, onehot, backend=backend)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_rewrites_on_backend(backend):
    def fn(x):
        return (np.log(1 + x * x), np.exp(x) - 1, 1 / (1 + np.exp(-x)),
                np.log(1 + np.exp(x)), np.log(np.sum(np.exp(x), axis=1)),
                np.log(np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True)))

    x = np.array([[-1000.0, -30.0, 1e-9, 0.5], [2.0, 30.0, 800.0, 1000.0]])
    refs = (np.log1p(x * x), np.expm1(x), special.expit(x), -special.log_expit(-x),
            special.logsumexp(x, axis=1), special.log_softmax(x, axis=1))
    outs = run(fn, x, backend=backend)
    rtol = 1e-15 if backend == "reference" else 4e-15  # compiled math: within 4 ULP
    for got, want in zip(outs, refs, strict=True):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=rtol)
    assert np.isinf(np.expm1(x)).any()  # the naive forms overflow on these inputs
    run_pipeline(tj.jit(fn).lower(x).graph)  # verified after every pass


def test_stabilize_nodes_keeps_every_definition():
    """For splicing into a trace (to differentiate the stable form): every traced value is
    still defined, in order; nothing rewritten gives the same list."""
    x = moderate(np.float32)
    nodes = tj.jit(naive_softmax_log).lower(x).graph.nodes
    new = stabilize_nodes(nodes)
    defined = [n.out for n in new]
    assert {n.out for n in nodes} <= set(defined) and len(set(defined)) == len(defined)
    assert [n.op for n in new if n.out is nodes[-1].out] == ["subtract"]
    plain = tj.jit(lambda x: np.log(2 + x)).lower(x).graph.nodes
    assert stabilize_nodes(plain) is plain


def test_nn_helpers_are_already_stable():
    """tracejit.nn writes the stable forms: the pass leaves them as they are."""
    x = moderate(np.float32)
    for fn in (nn.softmax, nn.log_softmax, nn.logsumexp, nn.sigmoid, nn.softplus,
               lambda z: nn.binary_crossentropy(z, x, from_logits=True)):
        graph = tj.jit(fn).lower(x).graph
        assert stabilize(graph) is graph


def test_log_of_sigmoid_is_finite_where_the_sigmoid_underflows():
    x = np.array([-1000.0, -50.0, 0.0, 30.0], np.float32)
    got = run(lambda x: np.log(1 / (1 + np.exp(-x))), x)
    want = -np.logaddexp(np.float32(0), -x)
    assert_close(got, want, np.float32)
    assert got[0] == np.float32(-1000.0)
