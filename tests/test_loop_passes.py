"""The loop passes: loop-invariant hoisting (passes/hoist.py) and maps rewritten as batched
ops (passes/batch.py). Results are compared with a NumPy loop (float64; tolerances only
where a batched matmul adds in another order than per-step ones); the optimized IR is
checked for the loop that went away or the nodes that moved. Shapes use equal sizes
(square matrices, a batch as long as a const's leading axis) where a mixed-up axis would
give the right shape."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from draws import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj
import tracejit.passes.batch as batch
import tracejit.passes.hoist as hoist
from tracejit import lax
from tracejit.ir import Graph
from tracejit.ir.loop_ops import bodies

RNG = np.random.default_rng(15)


def arr(*shape, dtype=np.float64):
    a = RNG.standard_normal(shape)
    return a.astype(dtype) if np.dtype(dtype).kind == "f" else (a * 3).astype(dtype)


def graph_of(fn, *args) -> Graph:
    return tj.jit(fn).lower(*args).optimized_graph


def all_nodes(graph: Graph):
    """(node, depth) for every node, bodies included (depth 0: the top graph)."""
    def walk(g, depth):
        for n in g.nodes:
            yield n, depth
            for _, body in bodies(n):
                yield from walk(body, depth + 1)
    return list(walk(graph, 0))


def loops_in(graph: Graph) -> list[str]:
    return [n.op for n, _ in all_nodes(graph) if n.op in ("scan", "while_loop")]


def close(got, want, exact=False):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    if exact or want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- maps become batched ops

# name, body(x, *consts), xs shape and dtype, const shapes: lax.map(body, xs) against a loop
MAPS = [
    ("gemv W@x", lambda x, W: W @ x, (4, 4), [(4, 4)]),
    ("np.dot(W, x)", lambda x, W: np.dot(W, x), (5, 3), [(2, 3)]),
    ("x@W", lambda x, W: x @ W, (4, 4), [(4, 4)]),
    ("W@x_t matrices", lambda x, W: W @ x, (3, 3, 3), [(3, 3)]),
    ("x_t@W matrices", lambda x, W: x @ W, (3, 2, 3), [(3, 3)]),
    ("x_t@x_t.T", lambda x: x @ x.T, (4, 4, 4), []),
    ("stack of W @ x_t", lambda x, W: W @ x, (2, 2, 2), [(2, 2, 2)]),
    ("x_t @ stack of W", lambda x, W: x @ W, (2, 2, 2), [(2, 2, 2)]),
    ("tanh(W@x+b).sum()", lambda x, W, b: np.tanh(W @ x + b).sum(), (3, 3), [(3, 3), (3,)]),
    ("const of higher rank", lambda x, C: x + C, (3, 3), [(3, 3)]),
    ("const of higher rank (3-d)", lambda x, C: x * C - x, (2, 2), [(2, 2, 2)]),
    ("0-d slices", lambda x, c: x * c + 1.0, (5,), [(3,)]),
    ("0-d slices, 0-d result", lambda x: np.maximum(x, 0.5) ** 2, (5,), []),
    ("sum over an axis", lambda x: x.sum(axis=0), (3, 3, 3), []),
    ("max keepdims", lambda x: x.max(axis=1, keepdims=True), (3, 3, 3), []),
    ("mean and prod", lambda x: x.mean(axis=-1) * x.prod(axis=0), (2, 2, 2), []),
    ("argmax over all", lambda x: np.argmax(x), (3, 3, 3), []),
    ("argmin axis", lambda x: np.argmin(x, axis=0), (3, 3, 3), []),
    ("reshape and transpose", lambda x: x.reshape(2, 3).T * 2, (3, 6), []),
    ("broadcast_to", lambda x: np.broadcast_to(x, (3, 3)) + 0.0, (3, 3), []),
    ("slices and concatenate", lambda x: np.concatenate([x[1:], x[:1], x[::2]]), (3, 4), []),
    ("pad and cumsum", lambda x: np.cumsum(np.pad(x, 1), axis=0), (2, 2), []),
    ("running maximum and minimum", lambda x: np.maximum.accumulate(x, axis=1)
     - np.minimum.accumulate(x), (3, 3, 3), []),
    ("where", lambda x: np.where(x > 0, x, 0.0), (3, 3), []),
    ("step-independent result", lambda x, W: W.sum() * 2.0, (4, 2), [(2, 2)]),
    ("identity", lambda x: x, (3, 2), []),
    ("several results", lambda x, W: (x.sum(), W @ x, x > 0), (3, 3), [(3, 3)]),
    ("logsumexp", lambda x: np.log(np.exp(x - x.max()).sum()) + x.max(), (4, 4), []),
    ("softmax", lambda x: np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True), (2, 3, 3), []),
    ("inv and det", lambda x: np.linalg.inv(x + 3 * np.eye(3)) * np.linalg.det(x), (3, 3, 3),
     []),
    ("solve", lambda x, A: np.linalg.solve(A + 3 * np.eye(3), x), (3, 3), [(3, 3)]),
    ("gather at fixed indices", lambda x: x[[2, 0, 0]] + x[:, [1]], (3, 3, 3), []),
    ("a write into a local copy", lambda x: _write(x), (3, 3), []),
    ("searchsorted and argsort", lambda x, s: np.searchsorted(np.sort(s), x)
     + np.argsort(x, kind="stable"), (3, 3), [(3,)]),
]


def _write(x):
    y = x * 2.0
    y[1:] = 0.5
    y[0] += x[2]
    return y



def _run_map(backend, body, xs, consts, **kw):
    fn = tj.jit(lambda xs, *cs: lax.map(lambda x: body(x, *cs), xs), backend=backend)
    return fn, fn(xs, *consts)


def _loop(body, xs, consts):
    outs = [body(x, *consts) for x in xs]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[i] for o in outs]) for i in range(len(outs[0])))
    return np.stack(outs)


@pytest.mark.parametrize("name,body,xshape,cshapes", MAPS, ids=[m[0] for m in MAPS])
def test_map_becomes_batched_ops(backend, name, body, xshape, cshapes):
    xs, consts = arr(*xshape), [arr(*s) for s in cshapes]
    fn, got = _run_map(backend, body, xs, consts)
    want = _loop(body, xs, consts)
    for g, w in zip(got if isinstance(want, tuple) else [got],
                    want if isinstance(want, tuple) else [want], strict=True):
        close(g, w)
    assert loops_in(fn.lower(xs, *consts).optimized_graph) == []


def test_the_slides_gemm(backend):
    """The slides' "this should be just a GEMM call": one 2-d matmul, no loop."""
    W, X = arr(5, 5), arr(5, 5)
    fn = tj.jit(lambda W, X: lax.map(lambda x: np.dot(W, x), X), backend=backend)
    close(fn(W, X), np.stack([np.dot(W, x) for x in X]))
    ops = [(n.op, n.out.type.ndim) for n, _ in all_nodes(fn.lower(W, X).optimized_graph)]
    assert [op for op in ops if op[0] in ("matmul", "scan")] == [("matmul", 2)]


@pytest.mark.parametrize("dtype,scalar", [(np.int32, 2), (np.float32, 0.5),
                                          (np.int8, 3), (np.float16, 1.5)])
def test_weak_scalars_keep_the_slice_dtype(backend, dtype, scalar):
    xs = arr(4, 3, dtype=dtype)

    def body(x):
        return x * scalar + x.sum(axis=0) - scalar

    fn, got = _run_map(backend, body, xs, [])
    want = _loop(body, xs, [])
    if backend == "cuda" and want.dtype.kind == "f":  # the GPU's row sums are tree-ordered
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps)
    else:
        close(got, want, exact=True)
    assert loops_in(fn.lower(xs).optimized_graph) == []


def test_scan_forms_of_a_map(backend):
    """lax.scan with an empty carry, with a carry handed back unchanged (used by the body,
    a Python float), and reversed (ys[t] is step t's either way)."""
    W, X = arr(3, 3), arr(4, 3)
    f1 = tj.jit(lambda W, X: lax.scan(lambda c, x: (c, W @ x), (), X)[1], backend=backend)
    close(f1(W, X), np.stack([W @ x for x in X]))
    f2 = tj.jit(lambda X: lax.scan(lambda c, x: (c, c * x), 2.0, X), backend=backend)
    c, ys = f2(X)
    assert c == 2.0
    close(ys, 2.0 * X)
    f3 = tj.jit(lambda W, X: lax.scan(lambda c, x: (c, np.tanh(W @ x)), np.ones(3), X,
                                      reverse=True), backend=backend)
    c, ys = f3(W, X)
    close(c, np.ones(3))
    close(ys, np.stack([np.tanh(W @ x) for x in X]))
    for f, args in ((f1, (W, X)), (f2, (X,)), (f3, (W, X))):
        assert loops_in(f.lower(*args).optimized_graph) == []


def test_nested_maps_become_one_batched_op(backend):
    W, X = arr(3, 3), arr(3, 3, 3)
    fn = tj.jit(lambda W, X: lax.map(lambda x: lax.map(lambda y: W @ y + 1.0, x), X),
                backend=backend)
    close(fn(W, X), np.stack([np.stack([W @ y + 1.0 for y in x]) for x in X]))
    assert loops_in(fn.lower(W, X).optimized_graph) == []


def test_a_body_without_a_rule_stays_a_loop(backend, caplog):
    """Indexing with a per-step index has no batching rule: the loop stays (and says so)."""
    table, idx = arr(5, 3), np.array([4, 0, 2, 2])
    fn = tj.jit(lambda t, idx: lax.map(lambda i: t[i] * 2.0, idx), backend=backend)
    with caplog.at_level(logging.DEBUG, logger="tracejit.passes.batch"):
        graph = fn.lower(table, idx).optimized_graph
    assert loops_in(graph) == ["scan"]
    assert "gather" in caplog.text and "no batching rule" in caplog.text
    close(fn(table, idx), table[idx] * 2.0)


def test_a_recurrence_and_an_empty_map_stay_loops(backend):
    X = arr(4, 3)
    rec = tj.jit(lambda X: lax.scan(lambda c, x: (c + x, c * x), np.zeros(3), X),
                 backend=backend)
    assert loops_in(rec.lower(X).optimized_graph) == ["scan"]
    empty = np.zeros((0, 3))
    fn = tj.jit(lambda X: lax.map(lambda x: x.sum() * 2.0, X), backend=backend)
    got = fn(empty)
    assert got.shape == (0,) and got.dtype == np.float64
    assert loops_in(fn.lower(empty).optimized_graph) == ["scan"]


def test_batched_map_gradient_matches_finite_differences(backend):
    """AD runs while tracing: the forward map in the gradient is batched too."""
    W, b, X = arr(3, 3), arr(3), arr(4, 3)

    def f(W, b, X):
        return (lax.map(lambda x: np.tanh(W @ x + b).sum(), X) ** 2).sum()

    g = tj.jit(tj.grad(f, argnums=(0, 1)), backend=backend)
    gw, gb = g(W, b, X)
    eps = 1e-6
    for got, which in ((gw, 0), (gb, 1)):
        args = [W, b, X]
        fd = np.zeros_like(args[which])
        for i in np.ndindex(fd.shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][i] += eps
            minus[which][i] -= eps
            fd[i] = (f(*plus) - f(*minus)) / (2 * eps)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    graph = g.lower(W, b, X).optimized_graph
    maps = [n for n, _ in all_nodes(graph) if n.op == "scan" and batch.is_map(n.attrs["loop"])]
    assert maps == []


def maps_in(graph: Graph) -> list[str]:
    """The scans of ``graph`` (bodies included) that are maps: loops batch_maps left."""
    return [n.op for n, _ in all_nodes(graph) if n.op == "scan" and batch.is_map(n.attrs["loop"])]


def _inner_scans(x, C, W):
    """A map body holding a scan of its own: the slice is a const of the inner body and
    the carry's start; C (unbatched) is scanned; the ys are stacked per step; the second
    scan runs over the slice's rows (batched xs)."""
    h, ys = lax.scan(lambda h, c: (np.tanh(h * c + x), h * 2.0), x, C)
    s, zs = lax.scan(lambda s, row: (s + row @ W, s.sum()), np.zeros(3), x.reshape(3, 3))
    return h, ys, s, zs


def _inner_scans_loop(X, C, W):
    outs = []
    for x in X:
        h, ys = x, []
        for c in C:
            ys.append(h * 2.0)
            h = np.tanh(h * c + x)
        s, zs = np.zeros(3), []
        for row in x.reshape(3, 3):
            zs.append(s.sum())
            s = s + row @ W
        outs.append((h, np.stack(ys), s, np.stack(zs)))
    return tuple(np.stack(o) for o in zip(*outs, strict=True))


def test_a_scan_inside_a_map_body_is_batched_with_it(backend):
    """JAX's vmap of a scan: the map goes, its inner scans stay, over batched carries
    (an explore run found the roll pass turning a body's four repeated steps into such an
    inner scan, after which the map could not be batched and ran as a loop)."""
    X, C, W = arr(9, 9), arr(4, 9), arr(3, 3)
    fn = tj.jit(lambda X, C, W: lax.map(lambda x: _inner_scans(x, C, W), X), backend=backend)
    for got, want in zip(fn(X, C, W), _inner_scans_loop(X, C, W), strict=True):
        close(got, want)
    graph = fn.lower(X, C, W).optimized_graph
    assert maps_in(graph) == [] and loops_in(graph) == ["scan", "scan"]

    def repeated(x):
        for _ in range(5):
            x = np.abs(x) - 0.5
        return x

    rolled = tj.jit(lambda X: lax.map(repeated, X), backend=backend)
    close(rolled(X), np.stack([repeated(x) for x in X]))
    graph = rolled.lower(X).optimized_graph
    assert maps_in(graph) == [] and loops_in(graph) == ["scan"]


def test_batching_skips_a_body_with_an_effect(monkeypatch):
    monkeypatch.setattr(batch, "has_effect", lambda node: node.op == "tanh")
    X = arr(3, 3)
    assert loops_in(graph_of(lambda X: lax.map(np.tanh, X), X)) == ["scan"]


# ---------------------------------------------------------------- hypothesis-drawn bodies

_UNARY = {"tanh": np.tanh, "exp": lambda a: np.exp(-np.abs(a)), "neg": np.negative,
          "square": np.square, "abs": np.abs}
_BINARY = {"add": np.add, "mul": np.multiply, "max": np.maximum, "sub": np.subtract}


@st.composite
def map_programs(draw):
    """A body over a slice x (0-d, a vector or a matrix, sizes equal or 1) and a const W
    (n, n): a chain of elementwise ops (with W, a weak scalar or the slice), reductions
    over an axis (kept or not) and matmuls with W on either side, returning the last
    value."""
    n = draw(st.sampled_from([1, 2, 3]))
    shape = draw(st.sampled_from([(), (n,), (n, n), (1, n), (n, 1)]))
    length = draw(st.sampled_from([1, 2, n]))
    steps = draw(st.lists(st.tuples(
        st.sampled_from(["unary", "binary-W", "binary-x", "scalar", "reduce", "W@", "@W"]),
        st.sampled_from(sorted(_UNARY)), st.sampled_from(sorted(_BINARY)),
        st.sampled_from(["sum", "max", "min", "prod"]), st.integers(0, 1), st.booleans()),
        min_size=1, max_size=6))
    return n, shape, length, steps


def _program(steps):
    def body(x, W):
        v = x
        for kind, un, bi, red, axis, keep in steps:
            if kind == "unary":
                v = _UNARY[un](v)
            elif kind == "binary-W":
                v = _BINARY[bi](v, W)
            elif kind == "binary-x":
                v = _BINARY[bi](x, v)
            elif kind == "scalar":
                v = _BINARY[bi](v, 0.5)
            elif kind == "reduce" and np.ndim(v) > axis:
                v = getattr(v, red)(axis=axis, keepdims=keep)
            elif kind == "W@" and np.ndim(v) >= 1 and np.shape(v)[0] == W.shape[1]:
                v = W @ v
            elif kind == "@W" and np.ndim(v) >= 1 and np.shape(v)[-1] == W.shape[0]:
                v = v @ W
        return v
    return body


def _check_drawn(program, backend):
    n, shape, length, steps = program
    body = _program(steps)
    xs, W = arr(length, *shape), arr(n, n)
    fn = tj.jit(lambda xs, W: lax.map(lambda x: body(x, W), xs), backend=backend)
    close(fn(xs, W), _loop(body, xs, [W]))
    assert maps_in(fn.lower(xs, W).optimized_graph) == []  # (repeated steps roll: a scan)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(map_programs())
def test_drawn_map_bodies_against_a_numpy_loop(program):
    _check_drawn(program, "reference")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(map_programs())
def test_drawn_map_bodies_compiled(program):
    _check_drawn(program, "cpu")


# ---------------------------------------------------------------- hoisting


def _rnn_loss(W, X):
    h, _ = lax.scan(lambda h, x: (np.tanh(h @ W + x), None), np.zeros(3), X)
    return (h ** 2).sum()


def test_the_gradient_of_a_scan_transposes_W_once(backend):
    W, X = arr(3, 3), arr(4, 3)
    g = tj.jit(tj.grad(_rnn_loss), backend=backend)
    graph = g.lower(W, X).optimized_graph
    assert [n.op for n in graph.nodes if n.op in ("transpose", "scan")] == [
        "scan", "transpose", "scan"]  # transpose(W), before the reverse loop
    for node, _ in all_nodes(graph):
        if node.op == "scan":
            loop = node.attrs["loop"]
            consts = set(loop.body.inputs[:loop.n_consts])
            assert not [n for n in loop.body.nodes if n.op == "transpose"
                        and n.inputs[0] in consts]
    eps, fd = 1e-6, np.zeros((3, 3))
    for i in np.ndindex(3, 3):
        d = np.zeros((3, 3))
        d[i] = eps
        fd[i] = (_rnn_loss_np(W + d, X) - _rnn_loss_np(W - d, X)) / (2 * eps)
    np.testing.assert_allclose(g(W, X), fd, rtol=1e-6, atol=1e-8)


def _rnn_loss_np(W, X):
    h = np.zeros(3)
    for x in X:
        h = np.tanh(h @ W + x)
    return (h ** 2).sum()


def test_invariant_work_in_a_recurrence_moves_out(backend):
    W, X = arr(3, 3), arr(5, 3)

    def f(W, X):
        return lax.scan(lambda h, x: (np.tanh(h @ np.exp(W) + x), h.sum() + W.max()),
                        np.zeros(3), X)

    fn = tj.jit(f, backend=backend)
    h, ys = fn(W, X)
    hn, yn = np.zeros(3), []
    for x in X:
        yn.append(hn.sum() + W.max())
        hn = np.tanh(hn @ np.exp(W) + x)
    close(h, hn)
    close(ys, np.array(yn))
    depth = {n.op: d for n, d in all_nodes(fn.lower(W, X).optimized_graph)}
    assert depth["exp"] == 0 and depth["max"] == 0 and depth["tanh"] == 1


def test_while_loop_invariants_move_out_of_cond_and_body(backend):
    """The condition runs at least once: its invariants move. The body may run no time
    at all: only work that can neither raise nor warn moves out of it (a transpose, not a
    square root)."""
    A, n = np.abs(arr(3, 3)), np.int64(4)

    def f(A, n):
        return lax.while_loop(lambda c: c[0] < n * 2,
                              lambda c: (c[0] + 1, c[1] @ A.T + np.sqrt(A).sum()),
                              (np.int64(0), np.eye(3)))

    fn = tj.jit(f, backend=backend)
    i, acc = fn(A, n)
    want = np.eye(3)
    for _ in range(8):
        want = want @ A.T + np.sqrt(A).sum()
    assert i == 8
    close(acc, want)
    depth = {n.op: d for n, d in all_nodes(fn.lower(A, n).optimized_graph)}
    assert depth["multiply"] == 0 and depth["transpose"] == 0
    assert depth["less"] == 1 and depth["sqrt"] == 1


def test_while_body_keeps_what_could_raise_or_warn(backend):
    """A while body may run no time at all: an out-of-range index or a division by zero
    it would compute stays inside (moved out, it would raise before a loop that never
    runs)."""
    table, idx = arr(3), np.int64(7)

    def f(table, idx, n):
        return lax.while_loop(lambda c: c[0] < n,
                              lambda c: (c[0] + 1, c[1] + table[idx] + 1.0 / (table * 0)),
                              (np.int64(0), np.zeros(3)))

    fn = tj.jit(f, backend=backend)
    with np.errstate(divide="raise"):
        i, acc = fn(table, idx, np.int64(0))
    assert i == 0
    close(acc, np.zeros(3))
    ops = {n.op: d for n, d in all_nodes(fn.lower(table, idx, np.int64(0)).optimized_graph)}
    assert ops["gather"] == 1 and ops["true_divide"] == 1
    with pytest.raises(IndexError):
        fn(table, idx, np.int64(2))


def test_nested_invariants_move_all_the_way_out(backend):
    W, X = arr(3, 3), arr(2, 4, 3)

    def f(W, X):
        def outer(h, xs):
            inner, _ = lax.scan(lambda g, x: (np.tanh(g @ W.T + x) * h, None), h, xs)
            return inner, inner.sum()
        return lax.scan(outer, np.ones(3), X)

    fn = tj.jit(f, backend=backend)
    h, ys = fn(W, X)
    hn, yn = np.ones(3), []
    for xs in X:
        g = hn
        for x in xs:
            g = np.tanh(g @ W.T + x) * hn
        hn = g
        yn.append(g.sum())
    close(h, hn)
    close(ys, np.array(yn))
    depth = [d for n, d in all_nodes(fn.lower(W, X).optimized_graph) if n.op == "transpose"]
    assert depth == [0]


def test_hoisting_skips_nodes_with_an_effect(monkeypatch):
    monkeypatch.setattr(hoist, "has_effect", lambda node: node.op == "exp")
    W, X = arr(3, 3), arr(4, 3)
    graph = graph_of(lambda W, X: lax.scan(lambda h, x: (h @ np.exp(W) + x, None),
                                           np.zeros(3), X)[0], W, X)
    assert {n.op: d for n, d in all_nodes(graph)}["exp"] == 1


def test_no_hoisting_from_an_empty_scan(backend):
    idx, table = np.int64(9), arr(3)
    fn = tj.jit(lambda t, i, X: lax.scan(lambda h, x: (h + t[i] + x, None), 0.0, X)[0],
                backend=backend)
    assert fn(table, idx, np.zeros(0)) == 0.0


def _invariant_left(graph: Graph) -> list[str]:
    """Ops in scan bodies (of length > 0) that depend only on consts and constants."""
    left = []
    for node, _ in all_nodes(graph):
        loop = node.attrs.get("loop")
        if node.op != "scan" or loop.length == 0:
            continue
        fixed = set(loop.body.inputs[:loop.n_consts])
        for n in loop.body.nodes:
            if n.op != "constant" and all(v in fixed for v in n.inputs):
                left.append(n.op)
            if all(v in fixed for v in n.inputs):
                fixed.add(n.out)
    return left


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(map_programs(), map_programs())
def test_drawn_recurrences_keep_no_invariant_work(step, invariant):
    """h' = tanh(step(x, W) + h @ inv(W)) where inv(W) is a drawn chain of W alone: it
    leaves the body, the results stay the loop's."""
    n, shape, length, steps = step
    f, g = _program(steps), _program(invariant[3])
    xs, W = arr(length, *shape), arr(n, n)
    h0 = np.zeros(np.broadcast_shapes(np.shape(f(xs[0], W)), (n,)))

    def body(h, x, W):
        h = np.tanh(f(x, W) + h @ g(W, W) * 0.5)
        return h, h.sum()

    def loop(xs, W):
        h, ys = h0, []
        for x in xs:
            h, y = body(h, x, W)
            ys.append(y)
        return h, np.stack(ys)

    try:
        want = loop(xs, W)
    except ValueError:  # the drawn shapes do not fit together: nothing to compare
        return
    if want[0].shape != h0.shape or np.shape(g(W, W)) != (n, n):
        return
    fn = tj.jit(lambda xs, W: lax.scan(lambda h, x: body(h, x, W), h0, xs),
                backend="reference")
    for got, w in zip(fn(xs, W), want, strict=True):
        close(got, w)
    assert _invariant_left(fn.lower(xs, W).optimized_graph) == []
