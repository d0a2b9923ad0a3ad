"""The tools around loops: the residuals pass (a scan's gradient reads what its forward
loop stored instead of recomputing it), the memory a long scan stacks (profiler), the
Graphviz export of loop bodies and ``jit(check=True)`` on loops.

Gradients are compared in float64 with the pass and without it, and with central finite
differences of a NumPy loop (the oracle)."""


import dataclasses
import inspect
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from numpy_compare import numeric_grad

import tracejit as tj
from tracejit import api, lax
from tracejit.backends import cpu as cpu_backend
from tracejit.backends.cpu import ops as cpu_ops
from tracejit.backends.cuda import loops as cuda_loops
from tracejit.errors import KernelMismatch, NonFiniteValue
from tracejit.ir.registry import REGISTRY
from tracejit.passes import pipeline
from tracejit.trace import loops

RNG = np.random.default_rng(15)
W = RNG.standard_normal((4, 4)) * 0.4
H0 = RNG.standard_normal((2, 4))
XS = RNG.standard_normal((6, 2, 4))

WITHOUT = tuple(p for p in pipeline.DEFAULT_PASSES if p.__name__ != "residuals")


@pytest.fixture
def no_residuals(monkeypatch):
    """jit compiles with every default pass except the residuals pass."""
    monkeypatch.setattr(api, "run_pipeline", lambda g: pipeline.run_pipeline(g, WITHOUT))


# ---------------------------------------------------------------- the programs


def rnn(w, h0, xs, reverse=False, truncate=-1):
    """A tanh RNN whose loss reads the final state and every step's output."""

    def step(h, x):
        h = np.tanh(h @ w + x)
        return h, np.exp(h).sum()

    h, ys = loops.scan(step, h0, xs, reverse=reverse, truncate=truncate)
    return (h ** 2).sum() + (ys * np.arange(1, len(xs) + 1)).sum()


def rnn_np(w, h0, xs, reverse=False, first=None):
    """The NumPy loop of ``rnn``; steps before ``first`` (in the loop's order) use
    ``first[0]`` for ``w`` (the truncated gradient's oracle: no gradient flows there)."""
    h, total = h0, 0.0
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for k, t in enumerate(order):
        wt = first[0] if first is not None and k < first[1] else w
        h = np.tanh(h @ wt + xs[t])
        total = total + np.exp(h).sum() * (t + 1)
    return (h ** 2).sum() + total


def nested(w, h0, xs):
    """A scan whose body runs a scan of its own."""

    def outer(h, x):
        def inner(g, _):
            return np.sin(g @ w) + 0.5 * g, (g * g).sum()

        g, ys = lax.scan(inner, h + x, None, length=3)
        return g, ys.sum()

    h, ys = lax.scan(outer, h0, xs)
    return (h ** 2).sum() + ys.sum()


def nested_np(w, h0, xs):
    h, total = h0, 0.0
    for x in xs:
        g = h + x
        for _ in range(3):
            total = total + (g * g).sum()
            g = np.sin(g @ w) + 0.5 * g
        h = g
    return (h ** 2).sum() + total


def _grads(fn, args, backend, **kw):
    return tj.jit(tj.grad(lambda *a: fn(*a, **kw), argnums=(0, 1, 2)), backend=backend)(*args)


# ---------------------------------------------------------------- residuals


@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_gradient_with_residuals_equals_without_and_finite_differences(
        backend, reverse, monkeypatch):
    args = (W, H0, XS)
    got = _grads(rnn, args, backend, reverse=reverse)
    want = numeric_grad(lambda *a: rnn_np(*a, reverse=reverse), list(args))
    for g, n in zip(got, want, strict=True):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-7)
    monkeypatch.setattr(api, "run_pipeline", lambda g: pipeline.run_pipeline(g, WITHOUT))
    plain = _grads(rnn, args, backend, reverse=reverse)
    for g, p in zip(got, plain, strict=True):
        np.testing.assert_allclose(g, p, rtol=1e-13, atol=1e-13)


def _scans(graph):
    """(scan node, depth) for every scan of ``graph``, nested bodies included."""
    found = []

    def walk(g, depth):
        for n in g.nodes:
            if n.op == "scan":
                found.append((n, depth))
                walk(n.attrs["loop"].body, depth + 1)

    walk(graph, 0)
    return found


def _ops(graph):
    return [n.op for n in graph.nodes]


def test_the_backward_body_reads_residuals_instead_of_recomputing():
    graph = tj.jit(tj.grad(rnn)).lower(W, H0, XS).optimized_graph
    (fwd, _), (bwd, _) = _scans(graph)
    fbody, bbody = fwd.attrs["loop"].body, bwd.attrs["loop"].body
    # the backward body: the two matmuls of the VJP, no tanh or exp computed again
    assert _ops(bbody).count("matmul") == 2
    assert "tanh" not in _ops(bbody) and "exp" not in _ops(bbody)
    assert any((v.name or "").startswith("res") for v in bbody.inputs)
    # the forward loop computes its step once and stacks what the backward one reads
    assert _ops(fbody).count("matmul") == 1 and _ops(fbody).count("tanh") == 1
    assert len([n for n in graph.nodes if n.op == "scan"]) == 2


def test_without_the_pass_the_backward_body_recomputes(no_residuals):
    graph = tj.jit(tj.grad(rnn)).lower(W, H0, XS).optimized_graph
    _, (bwd, _) = _scans(graph)
    assert _ops(bwd.attrs["loop"].body).count("matmul") == 3


def test_cheap_elementwise_work_is_recomputed_not_stored():
    def loss(w, h0, xs):
        def step(h, x):
            h = h * w + x  # only exact elementwise ops: nothing is worth storing
            return h, (h * h).sum()

        h, ys = lax.scan(step, h0, xs)
        return ys.sum() + h.sum()

    w = RNG.standard_normal(4)
    graph = tj.jit(tj.grad(loss)).lower(w, H0, XS).optimized_graph
    (fwd, _), (bwd, _) = _scans(graph)
    assert not any((v.name or "").startswith("res") for v in bwd.attrs["loop"].body.inputs)


@pytest.mark.parametrize("reverse", [False, True])
def test_truncated_gradient_with_residuals(backend, reverse, monkeypatch):
    k = 2
    got = _grads(rnn, (W, H0, XS), backend, reverse=reverse, truncate=k)
    assert "slice" in tj.jit(tj.grad(lambda *a: rnn(*a, reverse=reverse, truncate=k))).lower(
        W, H0, XS).optimized_ir
    # the oracle: the first len - k steps (in the loop's order) use a frozen w and xs
    first = len(XS) - k
    want_w = numeric_grad(lambda w: rnn_np(w, H0, XS, reverse, (W, first)), [W])[0]
    np.testing.assert_allclose(got[0], want_w, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got[1], 0)  # the initial carry is before the window
    steps = slice(len(XS) - k, None) if not reverse else slice(0, k)
    assert not got[2][slice(0, first) if not reverse else slice(k, None)].any()
    want_x = numeric_grad(lambda xs: rnn_np(W, H0, xs, reverse, (W, first)), [XS])[0]
    np.testing.assert_allclose(got[2][steps], want_x[steps], rtol=1e-6, atol=1e-7)
    monkeypatch.setattr(api, "run_pipeline", lambda g: pipeline.run_pipeline(g, WITHOUT))
    plain = _grads(rnn, (W, H0, XS), backend, reverse=reverse, truncate=k)
    for g, p in zip(got, plain, strict=True):
        np.testing.assert_allclose(g, p, rtol=1e-13, atol=1e-13)


def test_nested_scans_with_residuals(backend, monkeypatch):
    args = (W, H0, XS[:4])
    got = _grads(nested, args, backend)
    want = numeric_grad(nested_np, list(args))
    for g, n in zip(got, want, strict=True):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-7)
    graph = tj.jit(tj.grad(nested)).lower(*args).optimized_graph
    # the inner backward loop (a reverse scan inside the outer reverse scan) reads the
    # inner matmul's result, stacked by the outer forward loop, and recomputes no matmul
    inner = [n for n, depth in _scans(graph) if depth == 1 and n.attrs["loop"].reverse]
    assert inner and all(_ops(n.attrs["loop"].body).count("matmul") == 2 for n in inner)
    assert all("sin" not in _ops(n.attrs["loop"].body) for n in inner)
    # one forward loop (the inner one in its body), one backward loop: nothing runs twice
    depths = [depth for _, depth in _scans(graph)]
    assert depths.count(0) == 2 and depths.count(1) == 2
    monkeypatch.setattr(api, "run_pipeline", lambda g: pipeline.run_pipeline(g, WITHOUT))
    plain = _grads(nested, args, backend)
    for g, p in zip(got, plain, strict=True):
        np.testing.assert_allclose(g, p, rtol=1e-12, atol=1e-13)


def test_grad_of_grad_through_a_scan_with_residuals(backend, monkeypatch):
    def loss(w, h0, xs):
        def step(h, x):
            h = np.tanh(h * w + x)
            return h, np.exp(h).sum()

        h, ys = lax.scan(step, h0, xs)
        return (h ** 2).sum() + ys.sum()

    h0, xs, w = H0[0], XS[:, 0], np.array(0.7)
    first = tj.jit(tj.grad(loss), backend=backend)
    second = tj.jit(tj.grad(lambda w, h0, xs: tj.grad(loss)(w, h0, xs)), backend=backend)
    got = second(w, h0, xs)
    want = numeric_grad(lambda w: first(w, h0, xs), [w])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    ir = second.lower(w, h0, xs).optimized_graph
    assert sum("tanh" in _ops(n.attrs["loop"].body) for n, _ in _scans(ir)) == 1
    monkeypatch.setattr(api, "run_pipeline", lambda g: pipeline.run_pipeline(g, WITHOUT))
    plain = tj.jit(tj.grad(lambda w, h0, xs: tj.grad(loss)(w, h0, xs)), backend=backend)
    np.testing.assert_allclose(got, plain(w, h0, xs), rtol=1e-13, atol=1e-13)


def _lstm(c, x, w):
    h, cell = c
    z = h @ w + x
    gate = 1 / (1 + np.exp(-z))
    cell = gate * cell + (1 - gate) * np.tanh(z)
    h = gate * np.tanh(cell)
    return (h, cell), (h.sum(), (cell * cell).sum())


def _counter(c, x, w):
    i, h = c
    h = h * np.cos(w[0]) + np.sin(x * i)
    return (i + 1, h), h.max()


def _invariant(c, x, w):
    return c * np.exp(w).sum(axis=0) + x, None  # exp(w) is the same at every step


def _relu(c, x, w):
    c = np.maximum(c @ w + x, 0.1 * c)
    return c, c


def _normalise(c, x, w):
    c = c @ w + x
    c = (c - c.mean(axis=-1, keepdims=True)) / np.sqrt((c * c).sum(axis=-1, keepdims=True) + 1)
    return c, np.abs(c) ** 3


BODIES = {"lstm": (_lstm, lambda: (H0, H0 * 0.5)), "counter": (_counter, lambda: (np.int64(0), H0)),
          "invariant": (_invariant, lambda: H0), "relu": (_relu, lambda: H0),
          "normalise": (_normalise, lambda: H0)}


def _np_scan(step, init, xs, w, reverse):
    carry, ys = init, []
    for t in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        carry, y = step(carry, xs[t], w)
        ys.append((t, y))
    return carry, [y for _, y in sorted(ys, key=lambda p: p[0])]


def _objective(leaves):
    """A loss that weighs every float leaf differently."""
    total = 0.0
    for k, leaf in enumerate(leaves):
        leaf = np.asarray(leaf) if not hasattr(leaf, "dtype") else leaf
        if leaf.dtype.kind == "f":
            total = total + (leaf * np.linspace(0.5, 1.5, leaf.size).reshape(leaf.shape)).sum() * (
                k + 1)
    return total


def _flat(tree):
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in _flat(item)]
    return [] if tree is None else [tree]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_bodies_gradients_with_residuals(name, reverse, monkeypatch):
    step, init = BODIES[name]
    xs, w = XS[:5], W

    def traced(w, xs):
        carry, ys = lax.scan(lambda c, x: step(c, x, w), init(), xs, reverse=reverse)
        return _objective(_flat(carry) + _flat(ys))

    def oracle(w, xs):
        carry, ys = _np_scan(step, init(), xs, w, reverse)
        return _objective(_flat(carry) + [np.stack(leaves) for leaves in zip(
            *[_flat(y) for y in ys], strict=True)])

    got = tj.jit(tj.grad(traced, argnums=(0, 1)))(w, xs)
    want = numeric_grad(oracle, [w, xs])
    for g, n in zip(got, want, strict=True):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-6)
    graph = tj.jit(tj.grad(traced, argnums=(0, 1))).lower(w, xs).optimized_graph
    stored = [v for n, _ in _scans(graph) if n.attrs["loop"].reverse != reverse
              for v in n.attrs["loop"].body.inputs if (v.name or "").startswith("res")]
    assert bool(stored) == (name != "invariant")
    monkeypatch.setattr(api, "run_pipeline", lambda g: pipeline.run_pipeline(g, WITHOUT))
    plain = tj.jit(tj.grad(traced, argnums=(0, 1)))(w, xs)
    for g, p in zip(got, plain, strict=True):
        np.testing.assert_allclose(g, p, rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- check=True with loops


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def newton(a):
    """Square roots by Newton's iteration until it settles: a while_loop."""
    def cond(c):
        x, i = c
        return (np.abs(x * x - a).max() > 1e-12) & (i < 50)

    x, _ = lax.while_loop(cond, lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1), (a, 0))
    return x


@pytest.mark.parametrize("program", ["rnn", "reverse", "nested", "grad", "grad_nested",
                                     "newton", "fori"])
def test_check_passes_on_loop_programs(backend, program):
    a = np.abs(RNG.standard_normal(5)) + 0.5
    fn, args = {
        "rnn": (rnn, (W, H0, XS)),
        "reverse": (lambda *a: rnn(*a, reverse=True), (W, H0, XS)),
        "nested": (nested, (W, H0, XS[:3])),
        "grad": (tj.grad(rnn, argnums=(0, 2)), (W, H0, XS)),
        "grad_nested": (tj.grad(nested), (W, H0, XS[:3])),
        "newton": (newton, (a,)),
        "fori": (lambda x: lax.fori_loop(0, 7, lambda i, c: c * 0.5 + np.cos(c) * i, x),
                 (H0,)),
    }[program]
    got = tj.jit(fn, backend=backend, check=True)(*args)
    want = tj.jit(fn, backend=backend)(*args)
    for g, w in zip(np.atleast_1d(got) if not isinstance(got, tuple) else got,
                    np.atleast_1d(want) if not isinstance(want, tuple) else want, strict=True):
        np.testing.assert_array_equal(g, w)


def _wrong_scan(monkeypatch):
    """The compiled programs' scan (the library step, the CPU backend's compiled loop and
    the CUDA backend's driver) forgets the last step: a loop that computes the wrong
    thing."""
    right = REGISTRY["scan"]

    def wrong(*args, loop):
        short = dataclasses.replace(loop, length=loop.length - 1)
        nc, nk = loop.n_consts, loop.n_carry
        out = right.impl(*args[:nc + nk], *(x[:-1] for x in args[nc + nk:]), loop=short)
        return out[:nk] + tuple(np.concatenate([y, y[-1:]]) for y in out[nk:])

    monkeypatch.setitem(REGISTRY, "scan", dataclasses.replace(right, impl=wrong))

    class WrongCpuLoop:  # the CPU backend compiles its loops (backends/cpu/loops.py)
        def __init__(self, loop):
            self.loop, self.source = loop, "# a scan that forgets its last step"

        def __call__(self, *args):
            return wrong(*args, loop=self.loop)

    monkeypatch.setattr(cpu_backend, "_loop_step", WrongCpuLoop)
    right_gpu = cuda_loops._scan

    def wrong_gpu(cupy, body, loop):  # the CUDA backend drives its loops (cuda/loops.py)
        nc, nk = loop.n_consts, loop.n_carry
        short = right_gpu(cupy, body, dataclasses.replace(loop, length=loop.length - 1))

        def run(*args):
            out = short(*args[:nc + nk], *(x[:-1] for x in args[nc + nk:]))
            return out[:nk] + tuple(cupy.concatenate([y, y[-1:]]) for y in out[nk:])
        return run

    monkeypatch.setattr(cuda_loops, "_scan", wrong_gpu)


def test_check_finds_a_wrong_loop_and_names_its_line(backend, monkeypatch):
    def f(w, h0, xs):
        def step(h, x):
            return np.tanh(h @ w + x), h.sum()

        h, ys = lax.scan(step, h0, xs)  # the faulty loop
        return h, ys

    _wrong_scan(monkeypatch)
    with pytest.raises(KernelMismatch) as info:
        tj.jit(f, backend=backend, check=True)(W, H0, XS)
    message = str(info.value)
    assert "scan" in message and "result 0" in message and "largest error" in message
    assert f"test_loop_tools.py:{_line(f, 'the faulty loop')}" in message
    with np.load(Path(info.value.reproducer) / "inputs.npz") as inputs:
        assert any(np.array_equal(inputs[k], XS) for k in inputs.files)


def test_check_finds_a_broken_kernel_after_a_loop(monkeypatch):
    def f(x, y):
        c, _ = lax.scan(lambda c, r: (c + np.exp(r), None), x[0], x)
        return (c - y).sum()  # the faulty op

    monkeypatch.setitem(cpu_ops._ANY, "subtract", "({0} + {1})")
    x, y = XS[:, 0], XS[0, 1]
    with pytest.raises(KernelMismatch) as info:
        tj.jit(f, backend="cpu", check=True)(x, y)
    message = str(info.value)
    assert "subtract" in message and f"test_loop_tools.py:{_line(f, 'the faulty op')}" in message


def test_check_nan_names_the_body_op_and_the_trip(backend):
    def f(x):
        def step(c, _):
            c = c - 1.0
            return c, np.log(c)  # the first NaN

        return lax.scan(step, x, None, length=5)[1]

    with pytest.raises(NonFiniteValue) as info:
        tj.jit(f, backend=backend, check="nan")(np.array([3.5, 9.0]))
    message = str(info.value)
    assert "log" in message and "trip 3" in message
    assert f"test_loop_tools.py:{_line(f, 'the first NaN')}" in message


# ---------------------------------------------------------------- Graphviz


def _dot_statements(text: str):
    """(declared node ids, edges as (tail, head))."""
    declared = re.findall(r"^\s*(\w+) \[shape=", text, re.M)
    edges = re.findall(r"^\s*(\w+) -> (\w+)", text, re.M)
    return declared, edges


def test_dot_draws_loop_bodies_as_nested_clusters(tmp_path):
    graph = tj.jit(tj.grad(nested)).lower(W, H0, XS[:3]).optimized_graph
    text = graph.to_dot()
    assert text.count("{") == text.count("}")
    depth, deepest = 0, 0
    for ch in text:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
        deepest = max(deepest, depth)
    assert deepest == 3  # the graph, an outer body, an inner body
    clusters = re.findall(r"subgraph (cluster_\w+) \{", text)
    n_bodies = sum(1 for _ in _scans(graph))
    assert len(clusters) == len(set(clusters)) == n_bodies
    assert text.count('label="scan body"') == n_bodies
    declared, edges = _dot_statements(text)
    assert len(declared) == len(set(declared))
    assert all(a in declared and b in declared for a, b in edges)
    # each loop node points into its cluster
    for cluster in clusters:
        assert re.search(rf"-> \w+ \[lhead={cluster}, style=dashed", text)
    if shutil.which("dot"):
        done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                              timeout=60, check=True)
        assert done.stdout.count('class="cluster"') == n_bodies


def test_dot_labels_a_while_loops_cond_and_body():
    text = tj.jit(newton).lower(np.ones(3)).optimized_graph.to_dot()
    assert 'label="while cond"' in text and 'label="while body"' in text
    assert text.count("{") == text.count("}")
    if shutil.which("dot"):
        subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                       timeout=60, check=True)


# ---------------------------------------------------------------- memory of a scan


def test_loop_memory_counts_the_stacked_results_and_residuals():
    lowered = tj.jit(tj.value_and_grad(rnn, argnums=(0, 2))).lower(W, H0, XS)
    (fwd, _), (bwd, _) = _scans(lowered.optimized_graph)
    fwd_mem, bwd_mem = tj.profiler.loop_memory(lowered)
    item = XS.itemsize
    carry, y = H0.size * item, item  # the stacked carry, each step's scalar y
    stored = sum(v.type.size * item for v in bwd.attrs["loop"].body.inputs
                 if (v.name or "").startswith("res"))
    assert stored == 2 * H0.size * item  # tanh(...) and exp(tanh(...)), one step's worth
    assert fwd_mem.loop == "%0" and fwd_mem.steps == len(XS)
    assert fwd_mem.per_step == y + carry + stored
    assert fwd_mem.residuals_per_step == carry + stored
    assert fwd_mem.total == len(XS) * fwd_mem.per_step
    assert fwd_mem.where == f"test_loop_tools.py:{_line(rnn, 'loops.scan(step')}"
    # the backward loop stacks the cotangent of xs, which nothing reads back
    assert bwd_mem.per_step == XS[0].nbytes and bwd_mem.residuals_per_step == 0


def test_loop_memory_without_the_pass_stores_the_carries_only(no_residuals):
    fwd_mem = tj.profiler.loop_memory(tj.jit(tj.grad(rnn)).lower(W, H0, XS))[0]
    assert fwd_mem.residuals_per_step == H0.nbytes


def test_stacked_results_no_one_reads_are_not_stored():
    # the gradient in w alone: the backward loop's cotangents of xs, the forward loop's
    # ys (only their cotangents matter) and the unread xs slices all go
    graph = tj.jit(tj.grad(rnn)).lower(W, H0, XS).optimized_graph
    (fwd, _), (bwd, _) = _scans(graph)
    floop, bloop = fwd.attrs["loop"], bwd.attrs["loop"]
    assert len(bloop.body.outputs) == bloop.n_carry
    assert "sum" not in _ops(floop.body)
    assert graph.inputs[2] not in bwd.inputs
    (mem,) = tj.profiler.loop_memory(graph)
    assert mem.per_step == mem.residuals_per_step == 3 * H0.nbytes


def test_loop_memory_of_nested_scans():
    found = {m.loop: m for m in tj.profiler.loop_memory(tj.jit(nested).lower(W, H0, XS))}
    assert set(found) == {"%0", "%0.1"}  # the outer scan; the inner one, in its body
    assert found["%0.1"].steps == 3 and found["%0.1"].per_step == XS.itemsize
    assert found["%0"].per_step == XS.itemsize and found["%0"].residuals == 0


def test_the_profile_lists_the_memory_of_its_loops():
    f = tj.jit(tj.grad(rnn))
    with tj.profile() as p:
        f(W, H0, XS)
    text = str(p)
    section = text.split("loops: ")[1].split("\n\n")[0].splitlines()
    assert "per step" in section[1] and "residuals" in section[1]
    (row,) = [r for r in section if r.startswith("grad_rnn/%0 ")]
    mem = p.loops[0]
    assert mem.loop == "%0" and f"{mem.steps}" in row and f"{mem.per_step} B" in row
    with tj.profile() as plain:
        tj.jit(lambda x: x * 2)(XS)
    assert "loops:" not in str(plain) and plain.loops == []


def test_two_user_scans_over_the_same_inputs(backend):
    # the second loop computes exp(x) as the first one does: it reads the first one's
    # (stacked) value; the results are NumPy's
    def f(xs, c):
        a, ys = lax.scan(lambda a, x: (a + np.exp(x).sum(), np.exp(x) * 2), c, xs)
        b, zs = lax.scan(lambda b, x: (b * 0.5 + np.exp(x).max(), np.exp(x) - b), a, xs,
                         reverse=True)
        return ys, b, zs

    xs, c = XS[:, 0], 0.5
    a, ys = c, []
    for x in xs:
        a, ys = a + np.exp(x).sum(), ys + [np.exp(x) * 2]
    b, zs = a, [None] * len(xs)
    for t in range(len(xs) - 1, -1, -1):
        zs[t] = np.exp(xs[t]) - b
        b = b * 0.5 + np.exp(xs[t]).max()
    got = tj.jit(f, backend=backend)(xs, c)
    for g, w in zip(got, (np.stack(ys), b, np.stack(zs)), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)
    second = _scans(tj.jit(f).lower(xs, c).optimized_graph)[1][0]
    assert "exp" not in _ops(second.attrs["loop"].body)


def test_second_order_through_stacked_outputs_read_after_the_backward_loop():
    """Regression: in a gradient's gradient, a reader of the forward loop's stacked
    results placed after a backward loop cannot serve that loop as its residual."""
    xs, h0, w = RNG.random((4, 2)), RNG.random(2), RNG.random((2, 2)) * 0.5

    def loss(w):
        _, hs = lax.scan(lambda h, x: (np.tanh(h @ w + x),) * 2, h0, xs)
        return (hs ** 2).sum()

    second = tj.jit(tj.grad(lambda w: tj.grad(loss)(w).sum()))(w)
    first = tj.grad(loss)
    (expected,) = numeric_grad(lambda w: first(w).sum(), [w], eps=1e-5)
    np.testing.assert_allclose(second, expected, rtol=1e-6, atol=1e-7)
