"""tracejit.scan against NumPy loops written from Theano's documented semantics: the scan
tutorial's examples, the Pascanu slides' RNN with taps (values, gradients against central
differences, truncated BPTT against a hand-written NumPy backward), go_backwards, None
outputs, non-sequences, n_steps, strict, and the errors a user can cause."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.errors import LoopError

RNG = np.random.default_rng(15)


def np_scan(fn, seqs=(), outs=(), nonseqs=(), n_steps=None, go_backwards=False):
    """Theano's scan as a NumPy loop, by index arithmetic. ``seqs``: (array, taps) pairs;
    ``outs``: (initial, taps) pairs or None. Returns the list of stacked outputs."""
    spans = [(min(0, *taps), max(0, *taps)) for _, taps in seqs]
    lengths = [len(a) - (hi - lo) for (a, _), (lo, hi) in zip(seqs, spans, strict=True)]
    n = n_steps if n_steps is not None else min(lengths)
    hist = [None if o is None else ([o[0]] if list(o[1]) == [-1] else list(o[0][:-min(o[1])]))
            for o in outs]
    results = None
    for t in range(n):
        args = []
        for (a, taps), (lo, _), length in zip(seqs, spans, lengths, strict=True):
            args += [a[k - lo + length - 1 - t] if go_backwards else a[k - lo + t] for k in taps]
        for o, h in zip(outs, hist, strict=True):
            if o is not None:
                args += [h[len(h) + k] for k in o[1]]
        res = fn(*args, *nonseqs)
        res = list(res) if isinstance(res, (list, tuple)) else [res]
        results = results or [[] for _ in res]
        for j, r in enumerate(res):
            results[j].append(r)
            if outs and hist[j] is not None:
                hist[j].append(r)
    return [np.array(r) for r in results]


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- Theano's tutorial


@pytest.mark.parametrize("n_coef", [1, 4, 7])
def test_polynomial(backend, n_coef):
    """The tutorial's polynomial: coefficients and arange(10000) as sequences (the shorter
    sets the steps), x a non-sequence, no output fed back, the components summed."""
    def poly(coefficients, x):
        full_range = np.arange(10000)
        components, updates = tj.scan(
            fn=lambda coeff, power, free_variable: coeff * (free_variable ** power),
            outputs_info=None, sequences=[coefficients, full_range], non_sequences=x)
        assert updates == {}
        return components.sum(), components

    c = RNG.standard_normal(n_coef)
    x = np.float64(1.3)
    total, comps = tj.jit(poly, backend=backend)(c, x)
    close(comps, [c[i] * x**i for i in range(n_coef)])
    close(total, np.polyval(c[::-1], x))


@pytest.mark.parametrize("k", [0, 1, 2, 5])
@pytest.mark.parametrize("size", [1, 3])
def test_a_to_the_k(backend, k, size):
    """A**k elementwise by repeated multiplication: n_steps without sequences, the full
    sequence of powers and the last one."""
    def power(A):
        result, _ = tj.scan(fn=lambda prior_result, A: prior_result * A,
                            outputs_info=np.ones_like(A), non_sequences=A, n_steps=k)
        return result

    A = RNG.uniform(0.5, 1.5, (size, size))
    result = tj.jit(power, backend=backend)(A)
    assert result.shape == (k, size, size)
    close(result, np.array([A ** (i + 1) for i in range(k)]).reshape(k, size, size))
    if k:
        last = tj.jit(lambda A: power(A)[-1], backend=backend)(A)
        close(last, A ** k)


@pytest.mark.parametrize("length", [2, 3, 9])
def test_taps_fibonacci_like(backend, length):
    """A sequence with taps [-2, 0] and an output with taps [-2, -1]: the step sees
    u[t], u[t + 2] and the two previous outputs, for len(u) - 2 steps."""
    def step(u_tm2, u_t, x_tm2, x_tm1):
        return x_tm1 + x_tm2 + u_t - 0.5 * u_tm2

    def f(u, x0):
        out, _ = tj.scan(step, sequences=dict(input=u, taps=[-2, 0]),
                         outputs_info=dict(initial=x0, taps=[-2, -1]))
        return out

    u = RNG.standard_normal((length, 2))
    x0 = RNG.standard_normal((2, 2))
    got = tj.jit(f, backend=backend)(u, x0)
    assert got.shape == (length - 2, 2)
    if length > 2:
        close(got, np_scan(step, [(u, [-2, 0])], [(x0, [-2, -1])])[0])


def test_fibonacci_integers(backend):
    def f(x0):
        fib, _ = tj.scan(lambda a, b: a + b, outputs_info=dict(initial=x0, taps=[-2, -1]),
                         n_steps=10)
        return fib

    got = tj.jit(f, backend=backend)(np.array([0, 1]))
    assert got.dtype == np.int64
    assert got.tolist() == [1, 2, 3, 5, 8, 13, 21, 34, 55, 89]


def test_taps_order_is_as_given(backend):
    """fn gets the taps in the order they are listed, not sorted."""
    def step(u_tp1, u_tm1, x_tm1, x_tm3):
        return 2 * x_tm1 - x_tm3 + u_tp1 * u_tm1

    def f(u, x0):
        return tj.scan(step, sequences=dict(input=u, taps=[1, -1]),
                       outputs_info=dict(initial=x0, taps=[-1, -3]))[0]

    u, x0 = RNG.standard_normal(8), RNG.standard_normal(4)
    (want,) = np_scan(step, [(u, [1, -1])], [(x0, [-1, -3])])
    close(tj.jit(f, backend=backend)(u, x0), want)


# ---------------------------------------------------------------- the slides' RNN


def one_step(u_tm4, u_t, x_tm3, x_tm1, y_tm1, W, W_in_1, W_in_2, W_feedback, W_out):
    """The slides' step, with np for T and theano.dot."""
    x_t = np.tanh(np.dot(x_tm1, W) +
                  np.dot(u_t, W_in_1) +
                  np.dot(u_tm4, W_in_2) +
                  np.dot(y_tm1, W_feedback))
    y_t = np.dot(x_tm3, W_out)

    return [x_t, y_t]


def slides_rnn(u, x0, y0, W, W_in_1, W_in_2, W_feedback, W_out, truncate_gradient=-1):
    ([x_vals, y_vals], updates) = tj.scan(fn=one_step,
                                          sequences=dict(input=u, taps=[-4, -0]),
                                          outputs_info=[dict(initial=x0, taps=[-3, -1]), y0],
                                          non_sequences=[W, W_in_1, W_in_2, W_feedback, W_out],
                                          truncate_gradient=truncate_gradient,
                                          strict=True)
    return x_vals, y_vals


def rnn_params(n_in, n_hid, n_out, steps, x0_rows=3):
    u = RNG.standard_normal((steps + 4, n_in))
    x0 = RNG.standard_normal((x0_rows, n_hid))
    y0 = RNG.standard_normal(n_out)
    weights = [RNG.standard_normal(s) * 0.5 for s in
               [(n_hid, n_hid), (n_in, n_hid), (n_in, n_hid), (n_out, n_hid), (n_hid, n_out)]]
    return [u, x0, y0, *weights]


SIZES = [(1, 1, 1, 1), (3, 3, 3, 3), (3, 3, 3, 6), (2, 4, 3, 7), (4, 2, 1, 5)]


def test_slides_example_as_written():
    """The slides' call, outside jit (compiled on first use), with the NumPy loop."""
    u, x0, y0, W, W_in_1, W_in_2, W_feedback, W_out = rnn_params(2, 5, 3, 8)
    ([x_vals, y_vals], updates) = tj.scan(fn=one_step,
        sequences=dict(input=u, taps=[-4, -0]),
        outputs_info=[dict(initial=x0, taps=[-3, -1]), y0],
        non_sequences=[W, W_in_1, W_in_2, W_feedback, W_out],
        strict=True)
    assert updates == {}
    want = np_scan(one_step, [(u, [-4, 0])], [(x0, [-3, -1]), (y0, [-1])],
                   [W, W_in_1, W_in_2, W_feedback, W_out])
    close(x_vals, want[0])
    close(y_vals, want[1])


@pytest.mark.parametrize("sizes", SIZES)
def test_slides_rnn_forward(backend, sizes):
    args = rnn_params(*sizes)
    x_vals, y_vals = tj.jit(slides_rnn, backend=backend)(*args)
    u, x0, y0, *ws = args
    want = np_scan(one_step, [(u, [-4, 0])], [(x0, [-3, -1]), (y0, [-1])], ws)
    close(x_vals, want[0])
    close(y_vals, want[1])


def test_slides_rnn_float32(backend):
    args = [a.astype(np.float32) for a in rnn_params(3, 4, 2, 9)]
    x_vals, y_vals = tj.jit(slides_rnn, backend=backend)(*args)
    assert x_vals.dtype == y_vals.dtype == np.float32
    u, x0, y0, *ws = [a.astype(np.float64) for a in args]
    want = np_scan(one_step, [(u, [-4, 0])], [(x0, [-3, -1]), (y0, [-1])], ws)
    close(x_vals, want[0], rtol=1e-5, atol=1e-5)
    close(y_vals, want[1], rtol=1e-5, atol=1e-5)


def test_slides_rnn_longer_initial(backend):
    """An initial value with more entries than the taps need: Theano reads the first k."""
    args = rnn_params(2, 3, 2, 6, x0_rows=5)
    x_vals, _ = tj.jit(slides_rnn, backend=backend)(*args)
    u, x0, y0, *ws = args
    close(x_vals, np_scan(one_step, [(u, [-4, 0])], [(x0[:3], [-3, -1]), (y0, [-1])], ws)[0])


def rnn_loss(cx, cy, truncate_gradient=-1):
    def loss(*args):
        x_vals, y_vals = slides_rnn(*args, truncate_gradient=truncate_gradient)
        return np.sum(cx * x_vals) + np.sum(cy * y_vals)
    return loss


def rnn_grads_numpy(args, cx, cy, truncate=-1):
    """The slides' RNN with Theano's truncated BPTT by hand: the backward walk covers the
    last ``truncate`` steps (all with -1); cotangents of earlier outputs are dropped, and
    an initial value gets the gradient of the reads the walked steps make of it."""
    u, x0, y0, W, Wi1, Wi2, Wfb, Wo = args
    n = len(u) - 4
    X = np.concatenate([x0[:3], np.zeros((n, W.shape[0]))])
    Y = np.concatenate([y0[None], np.zeros((n, len(y0)))])
    for t in range(n):
        X[t + 3] = np.tanh(X[t + 2] @ W + u[t + 4] @ Wi1 + u[t] @ Wi2 + Y[t] @ Wfb)
        Y[t + 1] = X[t] @ Wo
    gX, gY = np.zeros_like(X), np.zeros_like(Y)
    gX[3:], gY[1:] = cx, cy
    gu = np.zeros_like(u)
    gW, gWi1, gWi2, gWfb, gWo = (np.zeros_like(a) for a in (W, Wi1, Wi2, Wfb, Wo))
    first = 0 if truncate < 0 else max(n - truncate, 0)
    for t in reversed(range(first, n)):
        gWo += np.outer(X[t], gY[t + 1])
        gX[t] += Wo @ gY[t + 1]
        d = gX[t + 3] * (1 - X[t + 3] ** 2)
        gW += np.outer(X[t + 2], d)
        gX[t + 2] += W @ d
        gWi1 += np.outer(u[t + 4], d)
        gu[t + 4] += Wi1 @ d
        gWi2 += np.outer(u[t], d)
        gu[t] += Wi2 @ d
        gWfb += np.outer(Y[t], d)
        gY[t] += Wfb @ d
    gx0 = np.zeros_like(x0)
    gx0[:3] = gX[:3]
    return [gu, gx0, gY[0], gW, gWi1, gWi2, gWfb, gWo]


def central_differences(f, args, i, eps=1e-6):
    g = np.zeros_like(args[i])
    for idx in np.ndindex(args[i].shape):
        hi, lo = [a.copy() for a in args], [a.copy() for a in args]
        hi[i][idx] += eps
        lo[i][idx] -= eps
        g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
    return g


@pytest.mark.parametrize("sizes", SIZES[:4])
def test_slides_rnn_gradient(backend, sizes):
    """tracejit.grad of the slides' RNN w.r.t. every input (sequence, initial states,
    weights) against central differences of the NumPy loop and the NumPy backward walk."""
    args = rnn_params(*sizes)
    n = sizes[3]
    cx, cy = RNG.standard_normal((n, sizes[1])), RNG.standard_normal((n, sizes[2]))
    grads = tj.grad(rnn_loss(cx, cy), argnums=tuple(range(8)), backend=backend)(*args)
    by_hand = rnn_grads_numpy(args, cx, cy)

    def np_loss(u, x0, y0, *ws):
        xv, yv = np_scan(one_step, [(u, [-4, 0])], [(x0, [-3, -1]), (y0, [-1])], ws)
        return np.sum(cx * xv) + np.sum(cy * yv)

    for i in range(8):
        close(grads[i], by_hand[i], rtol=1e-9, atol=1e-11)
        close(grads[i], central_differences(np_loss, args, i), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("steps,truncate", [(6, 0), (6, 1), (6, 2), (6, 3), (6, 4), (6, 5),
                                            (6, 6), (6, 9), (1, 0), (2, 1), (3, 3)])
def test_truncate_gradient(backend, steps, truncate):
    """truncate_gradient=k against the NumPy truncated BPTT, including k where the walked
    steps read the initial window (steps - k < 3) and k >= steps (full BPTT)."""
    args = rnn_params(2, 3, 3, steps, x0_rows=4)
    cx, cy = RNG.standard_normal((steps, 3)), RNG.standard_normal((steps, 3))
    grads = tj.grad(rnn_loss(cx, cy, truncate), argnums=tuple(range(8)),
                    backend=backend)(*args)
    for g, want in zip(grads, rnn_grads_numpy(args, cx, cy, truncate), strict=True):
        close(g, want, rtol=1e-9, atol=1e-11)
    value = tj.jit(rnn_loss(cx, cy, truncate), backend=backend)(*args)
    close(value, rnn_loss(cx, cy)(*args))


def test_truncate_gradient_sit_sot(backend):
    """h = tanh(h W + x): with truncation k the initial state gets no gradient unless
    k covers every step, and W only the last k steps' terms."""
    xs, h0, W = RNG.standard_normal((5, 2)), RNG.standard_normal(2), RNG.standard_normal((2, 2))
    c = RNG.standard_normal((5, 2))

    def loss(h0, W, k):
        hs, _ = tj.scan(lambda x, h, W: np.tanh(h @ W + x), sequences=xs, outputs_info=h0,
                        non_sequences=W, truncate_gradient=k)
        return np.sum(c * hs)

    def by_hand(k):
        hs = [h0]
        for x in xs:
            hs.append(np.tanh(hs[-1] @ W + x))
        gh, gW = np.zeros(2), np.zeros((2, 2))
        first = 0 if k < 0 else max(5 - k, 0)
        for t in reversed(range(first, 5)):
            d = (gh + c[t]) * (1 - hs[t + 1] ** 2)
            gW += np.outer(hs[t], d)
            gh = W @ d
        return (gh if first == 0 else np.zeros(2)), gW

    for k in (-1, 0, 2, 5, 7):
        g_h0, g_W = tj.grad(lambda h0, W, k=k: loss(h0, W, k), argnums=(0, 1),
                            backend=backend)(h0, W)
        want_h0, want_W = by_hand(k)
        close(g_h0, want_h0)
        close(g_W, want_W)


def test_truncate_gradient_go_backwards(backend):
    """go_backwards truncates the last k steps of the iteration (the first entries of the
    sequence): the same as the forward scan of the reversed sequence, window included."""
    xs, W = RNG.standard_normal((7, 2)), RNG.standard_normal((2, 2)) * 0.5
    x0, c = RNG.standard_normal((2, 2)), RNG.standard_normal((7, 2))

    def loss(xs, x0, W, backwards):
        out, _ = tj.scan(lambda x, a, b, W: np.tanh(a @ W + b + x), sequences=xs,
                         outputs_info=dict(initial=x0, taps=[-2, -1]), non_sequences=W,
                         go_backwards=backwards, truncate_gradient=6)
        return np.sum(c * out)

    back = tj.grad(lambda xs, x0, W: loss(xs, x0, W, True), argnums=(0, 1, 2),
                   backend=backend)(xs, x0, W)
    fwd = tj.grad(lambda xs, x0, W: loss(xs, x0, W, False), argnums=(0, 1, 2),
                  backend=backend)(xs[::-1].copy(), x0, W)
    close(back[0], fwd[0][::-1])
    close(back[1], fwd[1])
    close(back[2], fwd[2])
    assert np.abs(back[1]).max() > 0  # step 1 (of 6 walked) reads x0[1]


# ---------------------------------------------------------------- the other options


@pytest.mark.parametrize("n_steps", [None, 3])
def test_go_backwards(backend, n_steps):
    """go_backwards: each tap's slice of the sequence reversed, the outputs in iteration
    order; with n_steps shorter than the sequence, the last entries are used."""
    def step(u_tm1, u_t, v_t, acc):
        return acc * 0.5 + u_t * v_t - u_tm1

    def f(u, v, a0):
        return tj.scan(step, sequences=[dict(input=u, taps=[-1, 0]), v], outputs_info=a0,
                       n_steps=n_steps, go_backwards=True)[0]

    u, v, a0 = RNG.standard_normal((6, 3)), RNG.standard_normal((5, 3)), RNG.standard_normal(3)
    (want,) = np_scan(step, [(u, [-1, 0]), (v, [0])], [(a0, [-1])], n_steps=n_steps,
                      go_backwards=True)
    close(tj.jit(f, backend=backend)(u, v, a0), want)
    g = tj.grad(lambda u, v, a0: np.sum(f(u, v, a0) ** 2), argnums=(0, 1, 2),
                backend=backend)(u, v, a0)

    def np_loss(u, v, a0):
        return np.sum(np_scan(step, [(u, [-1, 0]), (v, [0])], [(a0, [-1])], n_steps=n_steps,
                              go_backwards=True)[0] ** 2)

    for i, arg in enumerate((u, v, a0)):
        close(g[i], central_differences(np_loss, [u, v, a0], i), rtol=1e-6, atol=1e-7)
        assert g[i].shape == arg.shape


def test_none_outputs_are_not_fed_back(backend):
    """None in outputs_info: that output is stacked, fn gets no previous value of it."""
    def step(x_t, s_tm1, W):
        s_t = s_tm1 + x_t
        return [np.dot(W, x_t), s_t, s_t * x_t]

    def f(xs, s0, W):
        return tj.scan(step, sequences=xs, outputs_info=[None, s0, None], non_sequences=W)[0]

    xs, s0, W = RNG.standard_normal((4, 3)), RNG.standard_normal(3), RNG.standard_normal((3, 3))
    got = tj.jit(f, backend=backend)(xs, s0, W)
    want = np_scan(step, [(xs, [0])], [None, (s0, [-1]), None], [W])
    assert len(got) == 3
    for a, b in zip(got, want, strict=True):
        close(a, b)


def test_map_gemm_example(backend):
    """The slides' 'this should be just a GEMM call': a map with W a non-sequence."""
    X, W = RNG.standard_normal((5, 4)), RNG.standard_normal((3, 4))
    out = tj.jit(lambda X, W: tj.scan(lambda x, W: np.dot(W, x), sequences=X,
                                      non_sequences=W)[0], backend=backend)(X, W)
    close(out, X @ W.T)


def test_n_steps_without_sequences_and_shorter_n_steps(backend):
    def count(x0):
        return tj.scan(lambda x: x + 1.0, outputs_info=x0, n_steps=4)[0]

    close(tj.jit(count, backend=backend)(np.float64(2.0)), [3.0, 4.0, 5.0, 6.0])

    def first(u):  # n_steps below the sequence's length: the first n_steps entries
        return tj.scan(lambda u_t: u_t * 2, sequences=u, n_steps=2)[0]

    close(tj.jit(first, backend=backend)(np.arange(5.0)), [0.0, 2.0])


def test_python_scalar_initial_value(backend):
    """A Python scalar initial value takes the dtype fn gives the output."""
    def f(xs):
        return tj.scan(lambda x, acc: acc + x, sequences=xs, outputs_info=0.0)[0]

    xs = RNG.standard_normal(5).astype(np.float32)
    got = tj.jit(f, backend=backend)(xs)
    assert got.dtype == np.float32
    close(got, np.cumsum(xs), rtol=1e-6, atol=1e-6)


def test_called_directly_is_compiled_once():
    xs = RNG.standard_normal((4, 2))
    step = lambda x, acc: acc + x  # noqa: E731
    a, _ = tj.scan(step, sequences=xs, outputs_info=np.zeros(2))
    b, _ = tj.scan(step, sequences=xs * 2, outputs_info=np.zeros(2))
    close(a, np.cumsum(xs, 0))
    close(b, np.cumsum(xs * 2, 0))
    from tracejit import theano_scan
    assert theano_scan._compiled.cache_info().currsize >= 1
    hits = theano_scan._compiled.cache_info().hits
    tj.scan(step, sequences=xs, outputs_info=np.zeros(2))
    assert theano_scan._compiled.cache_info().hits == hits + 1


def test_scan_inside_scan(backend):
    """A nested scan: the inner fn closes over the outer step's value."""
    def f(A):
        def row(a):
            return tj.scan(lambda x, acc: acc + x * a[0], sequences=a, outputs_info=0.0)[0][-1]
        return tj.scan(row, sequences=A)[0]

    A = RNG.standard_normal((3, 4))
    close(tj.jit(f, backend=backend)(A), A.sum(1) * A[:, 0])


# ---------------------------------------------------------------- drawn taps


@st.composite
def scans(draw):
    """A scan with drawn sequences (taps in -3..3, listed in any order), outputs (None,
    tap -1 alone, or taps in -3..-1), sizes 1..3 (every axis the same size d, where a
    swapped axis hides), step count, n_steps and direction."""
    d = draw(st.integers(1, 3))
    n = draw(st.integers(1, 4))
    taps = st.lists(st.integers(-3, 3), min_size=1, max_size=3, unique=True)
    seq_taps = draw(st.lists(taps, max_size=2))
    extra = draw(st.lists(st.integers(0, 2), min_size=len(seq_taps), max_size=len(seq_taps)))
    kinds = st.one_of(st.none(), st.just([-1]),
                      st.lists(st.integers(-3, -1), min_size=1, max_size=3, unique=True))
    out_taps = draw(st.lists(kinds, min_size=1, max_size=2))
    seqs = [(RNG.standard_normal((n + e + max(0, *t) - min(0, *t), d)), t)
            for t, e in zip(seq_taps, extra, strict=True)]
    outs = [None if t is None else (RNG.standard_normal(d if t == [-1] else (-min(t), d)), t)
            for t in out_taps]
    given_steps = not seqs or draw(st.booleans())
    return seqs, outs, RNG.standard_normal((d, d)) * 0.5, n if given_steps else None, \
        draw(st.booleans())


def drawn_step(n_out):
    def step(*args):
        *xs, W = args
        s = sum((0.3 + 0.2 * i) * x for i, x in enumerate(xs)) if xs else 0.0
        return [np.tanh(np.dot(s + j, W)) for j in range(n_out)]
    return step


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=scans())
def test_drawn_taps_against_numpy(backend, case):
    """Values and gradients (w.r.t. sequences, initial values and the non-sequence) of
    drawn scans against the NumPy loop and its central differences."""
    seqs, outs, W, n_steps, backwards = case
    step = drawn_step(len(outs))
    args = [a for a, _ in seqs] + [o[0] for o in outs if o is not None] + [W]

    def unpack(args):
        it = iter(args)
        s = [(next(it), t) for _, t in seqs]
        o = [None if o is None else (next(it), o[1]) for o in outs]
        return s, o, next(it)

    def f(*args):
        s, o, W = unpack(args)
        res, _ = tj.scan(step, sequences=[dict(input=a, taps=t) for a, t in s],
                         outputs_info=[None if x is None else dict(initial=x[0], taps=x[1])
                                       for x in o],
                         non_sequences=W, n_steps=n_steps, go_backwards=backwards)
        return res if isinstance(res, list) else [res]

    def np_f(*args):
        s, o, W = unpack(args)
        return np_scan(step, s, o, [W], n_steps=n_steps, go_backwards=backwards)

    got, want = tj.jit(f, backend=backend)(*args), np_f(*args)
    for a, b in zip(got, want, strict=True):
        close(a, b)
    cs = [RNG.standard_normal(w.shape) for w in want]
    grads = tj.grad(lambda *a: sum(np.sum(c * r) for c, r in zip(cs, f(*a), strict=True)),
                    argnums=tuple(range(len(args))), backend=backend)(*args)

    def np_loss(*a):
        return sum(np.sum(c * r) for c, r in zip(cs, np_f(*a), strict=True))

    for i, g in enumerate(grads):
        close(g, central_differences(np_loss, args, i), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- strict


def test_strict_rejects_closures_naming_the_line(backend):
    def f(xs, W):
        def step(x, h):
            return np.tanh(h @ W + x)  # closes over W
        return tj.scan(step, sequences=xs, outputs_info=np.zeros(2), strict=True)[0]

    xs, W = RNG.standard_normal((3, 2)), RNG.standard_normal((2, 2))
    with pytest.raises(LoopError, match="strict") as err:
        tj.jit(f, backend=backend)(xs, W)
    assert "# closes over W" in str(err.value)
    assert err.value.location.filename == __file__
    # the same without strict, or with W passed, runs
    loose = tj.jit(lambda xs, W: tj.scan(lambda x, h: np.tanh(h @ W + x), sequences=xs,
                                         outputs_info=np.zeros(2))[0], backend=backend)
    passed = tj.jit(lambda xs, W: tj.scan(lambda x, h, W: np.tanh(h @ W + x), sequences=xs,
                                          outputs_info=np.zeros(2), non_sequences=W,
                                          strict=True)[0], backend=backend)
    want = np_scan(lambda x, h: np.tanh(h @ W + x), [(xs, [0])], [(np.zeros(2), [-1])])[0]
    close(loose(xs, W), want)
    close(passed(xs, W), want)


# ---------------------------------------------------------------- errors


def raises(match, fn, *args):
    with pytest.raises(LoopError, match=match) as err:
        tj.jit(fn, backend="reference")(*args)
    assert err.value.location is not None and err.value.location.filename == __file__
    return str(err.value)


def test_error_too_few_initial_values():
    msg = raises(r"outputs_info\[1\] has taps \[-3, -1\].*shape \(2, 4\)",
                 lambda x0: tj.scan(lambda a, b, c: [a, b + c], n_steps=3,
                                    outputs_info=[None, dict(initial=x0, taps=[-3, -1])]),
                 np.zeros((2, 4)))
    assert "at least 3" in msg
    raises(r"taps \[-2\].*shape \(\)",
           lambda x0: tj.scan(lambda a: a, n_steps=3, outputs_info=dict(initial=x0, taps=[-2])),
           np.float64(1.0))


@pytest.mark.parametrize("taps", [[1], [-1, 0], [-2, 2]])
def test_error_non_negative_output_tap(taps):
    raises(r"outputs_info\[0\] has taps .*must be negative",
           lambda x0: tj.scan(lambda *a: a[0], n_steps=3, outputs_info=dict(initial=x0,
                                                                            taps=taps)),
           np.zeros((3, 2)))


def test_error_sequence_shorter_than_n_steps():
    msg = raises(r"sequences\[1\] has 5 entries.*taps \[-4, 0\] that is 1 steps.*n_steps=3",
                 lambda u, v: tj.scan(lambda a, b, c: a + b + c, n_steps=3,
                                      sequences=[u, dict(input=v, taps=[-4, 0])]),
                 np.zeros(6), np.zeros(5))
    assert "n_steps" in msg
    raises(r"sequences\[0\] has 3 entries.*taps \[-4, 0\] read 5 entries apart",
           lambda u: tj.scan(lambda a, b: a + b, sequences=dict(input=u, taps=[-4, 0])),
           np.zeros(3))


def test_error_wrong_number_of_outputs():
    raises(r"fn returned 1 output, but outputs_info describes 2",
           lambda x0: tj.scan(lambda a: a + 1, outputs_info=[x0, None], n_steps=2),
           np.zeros(2))
    raises(r"fn returned 3 outputs, but outputs_info describes 1",
           lambda x0: tj.scan(lambda a: (a, a, a), outputs_info=x0, n_steps=2), np.zeros(2))


def test_error_output_changes_type_or_shape():
    raises(r"output 0 is float64 but its initial value \(outputs_info\[0\]\) is float32",
           lambda x0, w: tj.scan(lambda a, w: a * w, outputs_info=x0, non_sequences=w,
                                 n_steps=2),
           np.zeros(2, np.float32), np.ones(2))
    raises(r"output 0 has shape \(2, 2\).*gives \(2,\)",
           lambda x0: tj.scan(lambda a: a[:, None] + a, outputs_info=x0, n_steps=2),
           np.zeros(2))


def test_error_updates_dictionary():
    raises(r"updates dictionary",
           lambda x0: tj.scan(lambda a: ([a + 1], {}), outputs_info=x0, n_steps=2),
           np.zeros(2))


def test_error_taps_without_initial_and_no_steps():
    raises(r"outputs_info\[0\] gives taps \[-1\] but no initial value",
           lambda u: tj.scan(lambda a: a, sequences=u, outputs_info=dict(taps=[-1])),
           np.zeros(2))
    raises(r"no sequences and no n_steps",
           lambda x0: tj.scan(lambda a: a, outputs_info=x0), np.zeros(2))
    raises(r"n_steps must be a Python int",
           lambda x0, n: tj.scan(lambda a: a, outputs_info=x0, n_steps=n),
           np.zeros(2), np.array([3]))
