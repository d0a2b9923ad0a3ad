"""``np.random`` inside ``jit``: fresh draws on every call, NumPy's numbers bit for bit.

Every case runs the same seeded program twice in plain NumPy and twice jitted: the two
calls give different numbers (nothing is frozen) and the same as NumPy's, in the same
order (the draws advance the same generator state). Draws are effects: passes never merge,
drop, fold or reorder them.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.errors import FrozenRandomState, InPlaceArgumentError, UnsupportedOperation

X = np.array([0.5, 1.0, 2.0])
X2 = np.arange(6.0).reshape(3, 2)
EYE = np.eye(2)
P = [0.2, 0.3, 0.5]
R = np.random

# ---------------------------------------------------------------- the cases

# np.random's module functions (NumPy's global RandomState); x is a traced argument.
LEGACY = {
    "rand": lambda x: R.rand(), "rand_2d": lambda x: R.rand(2, 3), "randn": lambda x: R.randn(3),
    "random": lambda x: R.random(), "random_size": lambda x: R.random((2, 2)),
    "random_sample": lambda x: R.random_sample(3), "ranf": lambda x: R.ranf(2),
    "sample": lambda x: R.sample(2), "uniform": lambda x: R.uniform(-1, 2, size=4),
    "uniform_traced": lambda x: R.uniform(x, x + 1), "normal_traced": lambda x: R.normal(x, 2.0),
    "normal_size": lambda x: R.normal(size=(2, 3)), "normal_scalar": lambda x: R.normal(),
    "normal_broadcast": lambda x: R.normal(x, size=(2, 3)),
    "standard_normal": lambda x: R.standard_normal(4), "randint": lambda x: R.randint(10),
    "randint_size": lambda x: R.randint(0, 10, size=5),
    "randint_int32": lambda x: R.randint(3, dtype=np.int32),
    "randint_bool": lambda x: R.randint(2, dtype=bool),
    "randint_traced": lambda x: R.randint((x * 4).astype(np.int64) + 1),
    "random_integers": lambda x: R.random_integers(1, 6, size=3),
    "choice_int": lambda x: R.choice(5), "choice_size": lambda x: R.choice(5, 3),
    "choice_no_replace": lambda x: R.choice(5, 3, replace=False),
    "choice_p": lambda x: R.choice(x, 2, p=P), "choice_traced": lambda x: R.choice(x),
    "choice_list": lambda x: R.choice([1, 2, 3], size=(2, 2)),
    "permutation_int": lambda x: R.permutation(5), "permutation": lambda x: R.permutation(x),
    "binomial": lambda x: R.binomial(10, 0.3, size=4), "poisson": lambda x: R.poisson(x + 1),
    "poisson_scalar": lambda x: R.poisson(3.0), "exponential": lambda x: R.exponential(2.0, 3),
    "beta": lambda x: R.beta(2, 3, 2), "gamma": lambda x: R.gamma(x + 1),
    "chisquare": lambda x: R.chisquare(3, 2), "f": lambda x: R.f(3, 4, 2),
    "geometric": lambda x: R.geometric(0.3, 2), "gumbel": lambda x: R.gumbel(size=2),
    "hypergeometric": lambda x: R.hypergeometric(5, 4, 3, size=2),
    "laplace": lambda x: R.laplace(size=2), "logistic": lambda x: R.logistic(size=2),
    "lognormal": lambda x: R.lognormal(size=2), "logseries": lambda x: R.logseries(0.5, 2),
    "multinomial": lambda x: R.multinomial(10, [0.2, 0.8], size=2),
    "multinomial_1": lambda x: R.multinomial(10, P),
    "multivariate_normal": lambda x: R.multivariate_normal([0, 0], EYE, 2),
    "dirichlet": lambda x: R.dirichlet(x),
    "negative_binomial": lambda x: R.negative_binomial(3, 0.5, 2),
    "noncentral_chisquare": lambda x: R.noncentral_chisquare(3, 1, 2),
    "noncentral_f": lambda x: R.noncentral_f(3, 4, 1, 2), "pareto": lambda x: R.pareto(3, 2),
    "power": lambda x: R.power(3, 2), "rayleigh": lambda x: R.rayleigh(size=2),
    "standard_cauchy": lambda x: R.standard_cauchy(2),
    "standard_exponential": lambda x: R.standard_exponential(2),
    "standard_gamma": lambda x: R.standard_gamma(x), "standard_t": lambda x: R.standard_t(3, 2),
    "triangular": lambda x: R.triangular(0, 1, 2, 2), "vonmises": lambda x: R.vonmises(0, 1, 2),
    "wald": lambda x: R.wald(1, 1, 2), "weibull": lambda x: R.weibull(2, 2),
    "zipf": lambda x: R.zipf(2, 2),
    "interleaved": lambda x: np.exp(R.normal(np.sin(x))) + R.rand(3) * x.sum() + R.randn(),
}

# Methods of a Generator argument ``g``.
GENERATOR = {
    "random": lambda x, g: g.random(), "random_size": lambda x, g: g.random(3),
    "random_f32": lambda x, g: g.random(3, dtype=np.float32),
    "random_f32_scalar": lambda x, g: g.random(dtype=np.float32),
    "standard_normal": lambda x, g: g.standard_normal((2, 2)),
    "standard_normal_f32": lambda x, g: g.standard_normal(dtype=np.float32, size=3),
    "normal_traced": lambda x, g: g.normal(x, 2.0), "normal": lambda x, g: g.normal(),
    "uniform": lambda x, g: g.uniform(size=3), "integers": lambda x, g: g.integers(10),
    "integers_size": lambda x, g: g.integers(0, 10, size=3),
    "integers_int32": lambda x, g: g.integers(5, dtype=np.int32),
    "integers_int": lambda x, g: g.integers(5, dtype=int),
    "integers_endpoint": lambda x, g: g.integers(5, endpoint=True, size=3),
    "integers_traced": lambda x, g: g.integers((x * 4).astype(np.int64) + 1),
    "choice_int": lambda x, g: g.choice(5), "choice_no_replace": lambda x, g: g.choice(5, 3, False),
    "choice_p": lambda x, g: g.choice(x, p=P), "choice_axis": lambda x, g: g.choice(X2, 4, axis=1),
    "choice_2d": lambda x, g: g.choice(X2), "permutation_int": lambda x, g: g.permutation(5),
    "permutation": lambda x, g: g.permutation(x), "permuted": lambda x, g: g.permuted(X2, axis=1),
    "exponential": lambda x, g: g.exponential(size=3), "binomial": lambda x, g: g.binomial(4, .5),
    "poisson": lambda x, g: g.poisson(x + 1),
    "multinomial": lambda x, g: g.multinomial(10, [0.2, 0.8]),
    "multinomial_batch": lambda x, g: g.multinomial([5, 6, 7], [0.2, 0.8]),
    "multivariate_normal": lambda x, g: g.multivariate_normal([0, 0], EYE, size=(2, 3)),
    "dirichlet": lambda x, g: g.dirichlet([1, 2], 4),
    "multivariate_hypergeometric": lambda x, g: g.multivariate_hypergeometric([3, 4], 2),
    "standard_gamma": lambda x, g: g.standard_gamma(x + 1),
    "standard_exponential_f32": lambda x, g: g.standard_exponential(3, dtype=np.float32),
    "gamma": lambda x, g: g.gamma(2.0, x), "zipf": lambda x, g: g.zipf(2, 3),
    "interleaved": lambda x, g: x * g.random(3) + g.normal(x.sum()) - g.integers(3, size=3),
}


def same(got, want, backend: str = "reference") -> None:
    """The values, dtype and shape NumPy gives (a jitted 0-d result is a NumPy scalar).
    The draws are NumPy's own on every backend; the float math around them
    (``np.exp(draw)``) is a compiled backend's own, within its ULP bound of NumPy's: pass
    ``backend`` for such a program."""
    got_t = [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]
    want_t = [np.asarray(w) for w in (want if isinstance(want, tuple) else (want,))]
    for g, w in zip(got_t, want_t, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        if backend in ("cuda", "cpu") and w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=16 * np.finfo(w.dtype).eps)
        else:
            np.testing.assert_array_equal(g, w)


def twice(f, *args):
    return [f(*args), f(*args)]


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_module_functions_draw_numpys_numbers_on_every_call(name, backend):
    f = LEGACY[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # random_integers
        np.random.seed(7)
        want = twice(f, X)
        np.random.seed(7)
        got = twice(tj.jit(f, backend=backend), X)
        after = np.random.random()
        np.random.seed(7)
        twice(f, X)
        assert np.random.random() == after  # the same state advance as NumPy's
    for g, w in zip(got, want, strict=True):  # (only "interleaved" computes exp and sin:
        # on the CPU its kernels' exp, within 4 ULP, matched NumPy's AVX-512 loop for these
        # values and not NumPy's AVX2 one)
        same(g, w, backend if name == "interleaved" else "reference")


@pytest.mark.parametrize("name", sorted(GENERATOR))
def test_generator_argument_draws_numpys_numbers_on_every_call(name, backend):
    f = GENERATOR[name]
    want = twice(f, X, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    got = twice(tj.jit(f, backend=backend), X, rng)
    for g, w in zip(got, want, strict=True):
        same(g, w)
    ref = np.random.default_rng(3)
    twice(f, X, ref)
    assert rng.random() == ref.random()


_SIZES = st.one_of(st.none(), st.integers(0, 4), st.lists(st.integers(0, 3), max_size=3))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=_SIZES, which=st.sampled_from(
    ["normal", "uniform", "randint", "choice", "poisson", "generator"]))
def test_seeds_and_sizes(seed, size, which):
    """Any seed, any size (None, an int, a tuple, empty ones included)."""
    size = tuple(size) if isinstance(size, list) else size
    fns = {
        "normal": lambda x: R.normal(x.sum(), 2.0, size=size),
        "uniform": lambda x: R.uniform(-1.0, x.max(), size=size),
        "randint": lambda x: R.randint(-3, 7, size=size),
        "choice": lambda x: R.choice(x, size=size, p=P),
        "poisson": lambda x: R.poisson(x.sum(), size=size),
        "generator": lambda x: np.random.default_rng(seed).standard_normal(size),
    }
    f = fns[which]
    np.random.seed(seed)
    want = twice(f, X)
    np.random.seed(seed)
    got = twice(tj.jit(f, backend="reference"), X)
    for g, w in zip(got, want, strict=True):
        same(g, w)


def test_calls_in_a_row_differ(backend):
    f = tj.jit(lambda x: x + np.random.rand(3), backend=backend)
    assert not np.array_equal(f(X), f(X))


def test_randomstate_argument(backend):
    def f(x, rs):
        return x * rs.normal(size=3) + rs.randint(5), rs.choice(4, 2, replace=False)

    want = twice(f, X, np.random.RandomState(5))
    got = twice(tj.jit(f, backend=backend), X, np.random.RandomState(5))
    for g, w in zip(got, want, strict=True):
        same(g, w)


def test_each_call_brings_its_own_generator(backend):
    """The cache key holds the generator's class, not the object: one compiled signature
    serves every generator, each call drawing from the one it passed."""
    f = tj.jit(lambda x, rng: x + rng.normal(size=3), backend=backend)
    for seed in (1, 2, 3):
        same(f(X, np.random.default_rng(seed)), X + np.random.default_rng(seed).normal(size=3))
    assert f.cache_info().signatures == 1
    params = {"w": X, "rng": np.random.default_rng(4)}  # inside a pytree too
    got = tj.jit(lambda p: p["w"] * p["rng"].random(3), backend=backend)(params)
    same(got, X * np.random.default_rng(4).random(3))
    np.random.default_rng(0).random()


def test_generator_argument_of_an_inner_jit(backend):
    inner = tj.jit(lambda x, rng: x * rng.random(3))
    f = tj.jit(lambda x, rng: inner(x, rng) + rng.random(), backend=backend)
    g = np.random.default_rng(1)
    want = X * g.random(3) + g.random()
    same(f(X, np.random.default_rng(1)), want)


def test_weak_scalar_draws_keep_the_array_dtype(backend):
    """np.random.rand() is a Python float: it does not promote float32 (NEP 50)."""
    x32 = X.astype(np.float32)

    def f(x):
        return x + np.random.rand(), x * np.random.randint(3), x + np.random.normal(size=())

    np.random.seed(2)
    want = f(x32)
    np.random.seed(2)
    got = tj.jit(f, backend=backend)(x32)
    same(got, want)
    assert got[0].dtype == np.float32 and got[2].dtype == np.float64


def test_equal_draws_are_not_merged_and_unused_draws_still_advance(backend):
    def f(x):
        a, b = np.random.rand(3), np.random.rand(3)
        np.random.rand(5)  # unused: NumPy still draws it
        c = np.random.rand(3) * 0  # the product folds away, the draw stays
        return x + a, x + b, c + np.random.rand(3)

    jf = tj.jit(f, backend=backend)
    draws = [n for n in jf.lower(X).optimized_graph.nodes if n.op == "random"]
    assert len(draws) == 5
    np.random.seed(0)
    want = twice(f, X)
    np.random.seed(0)
    got = twice(jf, X)
    for g, w in zip(got, want, strict=True):
        same(g, w)
    assert not np.array_equal(got[0][0], got[0][1])


def test_seed_inside_the_function_runs_on_every_call(backend):
    def f(x):
        np.random.seed(11)
        return x + np.random.rand(3)

    jf = tj.jit(f, backend=backend)
    same(jf(X), f(X))
    np.random.rand(2)
    same(jf(X), f(X))


def test_shape_errors_are_numpys(backend):
    with pytest.raises(ValueError):
        np.random.normal(np.zeros(3), size=(3, 1))
    with pytest.raises(ValueError):
        tj.jit(lambda x: np.random.normal(x, size=(3, 1)), backend=backend)(X)
    with pytest.raises(ValueError):  # an invalid parameter raises when the draw runs
        tj.jit(lambda x: np.random.normal(0.0, x - 10), backend=backend)(X)
    with pytest.raises(ValueError):
        tj.jit(lambda x: np.random.choice(x, 5, replace=False), backend=backend)(X)


def test_unsupported_methods_raise_typed_errors():
    with pytest.raises(UnsupportedOperation, match="in place"):
        tj.jit(lambda x: np.random.shuffle(x))(X.copy())
    with pytest.raises(UnsupportedOperation, match="in place"):
        tj.jit(lambda x, g: g.shuffle(x))(X.copy(), np.random.default_rng())
    with pytest.raises(UnsupportedOperation, match="bytes"):
        tj.jit(lambda x: x + len(np.random.bytes(3)))(X)
    with pytest.raises(UnsupportedOperation, match="tracing time"):
        tj.jit(lambda x: (np.random.get_state(), x)[1])(X)
    with pytest.raises(InPlaceArgumentError):
        tj.jit(lambda x, g: g.random(3, out=x))(X.copy(), np.random.default_rng())


# ---------------------------------------------------------------- generators tracing cannot see

_GLOBAL_RNG = np.random.default_rng(0)


class _Model:
    def __init__(self):
        self.rng = np.random.default_rng(0)

    @tj.jit
    def noisy(self, x):
        return x + self.rng.normal(size=3)


def test_a_generator_reached_otherwise_raises_instead_of_freezing():
    closure_rng = np.random.default_rng(0)
    start = closure_rng.bit_generator.state
    with pytest.raises(FrozenRandomState, match="closure variable 'closure_rng'"):
        tj.jit(lambda x: x + closure_rng.normal(size=3))(X)
    assert closure_rng.bit_generator.state == start  # put back as it was
    with pytest.raises(FrozenRandomState, match="global '_GLOBAL_RNG'"):
        tj.jit(lambda x: x + _GLOBAL_RNG.random(3))(X)
    with pytest.raises(FrozenRandomState, match=r"an argument \(its \.rng\)"):
        _Model().noisy(X)
    rngs = {"noise": np.random.default_rng(1)}
    with pytest.raises(FrozenRandomState, match=r"closure variable 'rngs' \(its \['noise'\]\)"):
        tj.jit(lambda x: x + rngs["noise"].random(3))(X)
    from numpy.random import rand  # bound before the trace: not intercepted

    state = np.random.get_state()[1].copy()
    with pytest.raises(FrozenRandomState, match="global RandomState"):
        tj.jit(lambda x: x + rand(3))(X)
    assert np.array_equal(np.random.get_state()[1], state)


def test_default_rng_inside_the_function(backend):
    """Seeded: a new generator with that seed on every call, the same numbers each call.
    Unseeded: fresh numbers on every call (from a generator the function owns)."""
    seeded = tj.jit(lambda x: x + np.random.default_rng(5).normal(size=3), backend=backend)
    want = X + np.random.default_rng(5).normal(size=3)
    same(seeded(X), want)
    same(seeded(X), want)
    fresh = tj.jit(lambda x: x + np.random.default_rng().normal(size=3), backend=backend)
    assert not np.array_equal(fresh(X), fresh(X))
    passthrough = tj.jit(lambda x, g: x + np.random.default_rng(g).random(3), backend=backend)
    same(passthrough(X, np.random.default_rng(8)), X + np.random.default_rng(8).random(3))


# ---------------------------------------------------------------- gradients, check mode


def test_a_draw_is_a_constant_to_grad(backend):
    """The gradient of a function with noise, the draw held fixed (the same seed), against
    central differences; a draw's own parameters get no gradient through it."""

    def loss(w):
        noise = 0.1 * np.random.randn(3)
        return np.sum((w + noise) ** 2 * np.random.uniform(1, 2, size=3))

    w = np.array([0.3, -1.2, 2.0])
    np.random.seed(4)
    g = tj.grad(loss, backend=backend)(w)
    eps, fd = 1e-6, np.zeros(3)
    for i in range(3):
        d = np.eye(3)[i] * eps
        np.random.seed(4)
        up = loss(w + d)
        np.random.seed(4)
        fd[i] = (up - loss(w - d)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    # rng.normal(mu) is a constant: only mu + sigma * z written out has a path to mu
    through = tj.grad(lambda mu, rng: np.sum(rng.normal(mu) + mu * rng.standard_normal(3)),
                      backend=backend)
    rng = np.random.default_rng(2)
    got = through(w, rng)
    rng = np.random.default_rng(2)
    rng.normal(w)
    np.testing.assert_array_equal(got, rng.standard_normal(3))


def test_check_mode_runs_each_draw_once():
    f = tj.jit(lambda x: x * np.random.rand(3) + np.random.normal(x), check=True)
    np.random.seed(9)
    got = twice(f, X)
    np.random.seed(9)
    want = [X * np.random.rand(3) + np.random.normal(X) for _ in range(2)]
    for g, w in zip(got, want, strict=True):
        same(g, w)


def test_threads_share_the_global_state_as_in_numpy():
    """NumPy's global RandomState is one object for every thread; so it is under jit: two
    threads drawing together take numbers from one stream (which thread gets which
    depends on timing, as in NumPy)."""
    f = tj.jit(lambda x: (x, np.random.rand(3)))
    f(X)
    np.random.seed(1)
    out = []
    workers = [threading.Thread(target=lambda: out.append(f(X)[1])) for _ in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    np.random.seed(1)
    first, second = np.random.rand(3), np.random.rand(3)
    assert sorted(map(tuple, out)) == sorted([tuple(first), tuple(second)])


def test_draws_run_on_the_host_under_cuda(monkeypatch):
    """On a GPU the draws still call NumPy's generator, on the host (CuPy's generators
    give other numbers), by design: no fallback warning, and strict placement allows it."""
    import cudasim

    from tracejit import targets

    monkeypatch.setattr(targets, "gpu_requested", False)

    def f(x, rng):
        return np.exp(x) * rng.normal(x) + np.random.rand(3)

    with cudasim.installed(scheduler="fibers"):
        cudasim.set_device_count(1)
        targets._cupy.cache_clear()
        targets._gpu_count.cache_clear()
        try:
            jf = tj.jit(f, device="cuda", strict=True)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                np.random.seed(3)
                got = [tj.to_host(jf(X, g)) for g in (np.random.default_rng(1),) * 2]
        finally:
            targets._cupy.cache_clear()
            targets._gpu_count.cache_clear()
    np.random.seed(3)
    g = np.random.default_rng(1)
    want = [f(X, g) for _ in range(2)]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_static_generator_argument_draws_on_every_call(backend):
    """A generator marked static (static_argnums) is keyed by identity; it still draws
    on every call (a dynamic one, the default, reuses one signature for every generator)."""
    f = tj.jit(lambda x, rng: x + rng.normal(size=3), static_argnums=1, backend=backend)
    rng, ref = np.random.default_rng(6), np.random.default_rng(6)
    for _ in range(2):
        same(f(X, rng), X + ref.normal(size=3))


def test_draws_are_library_steps_in_program_order():
    """No draw is fused into a loop kernel (so none reaches the disk cache, which holds
    loop kernels only), and the steps keep the program's order of draws even where
    fusion moves other work."""
    from tracejit.backends.cpu.codegen import partition

    def f(x, rng):
        a = np.random.normal(np.exp(x).sum())  # depends on a kernel
        b = rng.random(3)  # independent of it, drawn after it
        c = np.random.rand(3) + x
        return a + b * c, rng.integers(3)

    graph = tj.jit(f).lower(X, np.random.default_rng()).optimized_graph
    _, steps = partition(graph)
    order = [n.attrs["method"] for k in steps for n in k.nodes if n.op == "random"]
    assert order == ["normal", "random", "rand", "integers"]
    assert all(k.kind == "library" for k in steps if any(n.op == "random" for n in k.nodes))
    assert "rng[]" in str(graph)


# Every distribution of a Generator with scalar parameters: (name, parameters).
_DISTRIBUTIONS = [
    ("beta", (2, 3)), ("binomial", (5, 0.4)), ("chisquare", (3,)), ("exponential", (2.0,)),
    ("f", (3, 4)), ("gamma", (2.0, 1.5)), ("geometric", (0.3,)), ("gumbel", (0.0, 2.0)),
    ("hypergeometric", (5, 4, 3)), ("laplace", (0.0, 1.0)), ("logistic", (1.0, 2.0)),
    ("lognormal", (0.0, 0.5)), ("logseries", (0.5,)), ("negative_binomial", (3, 0.5)),
    ("noncentral_chisquare", (3, 1)), ("noncentral_f", (3, 4, 1)), ("normal", (1.0, 2.0)),
    ("pareto", (3.0,)), ("poisson", (4.0,)), ("power", (3.0,)), ("rayleigh", (2.0,)),
    ("standard_cauchy", ()), ("standard_exponential", ()), ("standard_gamma", (2.0,)),
    ("standard_normal", ()), ("standard_t", (3,)), ("triangular", (0, 1, 2)),
    ("uniform", (-1.0, 1.0)), ("vonmises", (0.0, 1.0)), ("wald", (1.0, 1.0)),
    ("weibull", (2.0,)), ("zipf", (2.0,)), ("random", ()),
]


@pytest.mark.parametrize("name, params", _DISTRIBUTIONS, ids=[n for n, _ in _DISTRIBUTIONS])
@pytest.mark.parametrize("cls", [np.random.default_rng, np.random.RandomState])
def test_every_distribution_scalar_and_sized(name, params, cls):
    if cls is np.random.RandomState and name == "random":
        name = "random_sample"

    def f(x, g):
        method = getattr(g, name)
        return method(*params), method(*params, size=(2, 3)), x

    want = twice(f, X, cls(12))
    got = twice(tj.jit(f, backend="reference"), X, cls(12))
    for g, w in zip(got, want, strict=True):
        same(g, w)


def test_a_draw_used_as_an_index_is_not_computed_while_tracing():
    """Regression (corpus bootstrap_ci): indexing with a draw asked for its known value,
    which drew from the global RandomState while tracing (FrozenRandomState)."""
    def f(x):
        np.random.seed(0)
        return x[np.random.randint(0, 10, size=(5, 10))].mean(axis=1)

    x = np.arange(10.0)
    want = f(x)
    got = tj.jit(f, backend="reference")(x)
    assert np.array_equal(got, want)


def test_default_rng_of_an_int_argument_makes_it_static():
    """Regression (corpus dropout): default_rng(seed) of a traced Python int raised
    SeedSequence's TypeError instead of making the argument static."""
    def dropout(x, p, seed):
        return x * (np.random.default_rng(seed).random(x.shape) >= p) / (1 - p)

    x = np.ones(6)
    f = tj.jit(dropout, backend="reference")
    for seed in (3, 4):
        assert np.array_equal(f(x, 0.5, seed), dropout(x, 0.5, seed))


def test_a_seeded_generator_made_in_the_function_takes_traced_parameters():
    """Regression (corpus add_noise_at_snr): default_rng(seed) gave NumPy's generator,
    whose C methods asked a traced scale for its value. Every call draws what a new
    generator with that seed draws, the later draws continuing its stream."""
    def noisy(x, seed):
        rng = np.random.default_rng(seed)
        return x + rng.normal(0.0, np.sqrt(np.mean(x**2)), x.shape) + rng.random()

    x = np.linspace(1.0, 2.0, 5)
    for backend in ("reference", "cpu"):
        f = tj.jit(noisy, backend=backend)
        for seed in (1, 1, 2):
            np.testing.assert_array_equal(f(x, seed), noisy(x, seed))
