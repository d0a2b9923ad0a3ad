"""Every registry op has a reference implementation and a differential test against NumPy.

Elementwise (ufunc) ops are enumerated from the registry and run over every dtype pair,
with special values; the other ops have one hand-written case each in OP_CASES. A test
fails if an op is registered without a case, or if a case does not exercise its op.

The registry is every backend's contract: the cases run on each backend of the shared
``backend`` fixture (``TRACEJIT_TEST_BACKENDS``, the emulated GPU included), compared
with ``numpy_compare``'s tolerance for the op's exactness as its definition states it.
"""

import itertools

import numpy as np
import pytest
from numpy_compare import (
    ULP,
    ZEROS,
    assert_factorisation,
    assert_same,
    builtin_error,
    exact,
    hardware_nans,
    lapack_differs,
    lax_of,
)

import tracejit as tj
from tracejit.ad.backward import LOOPS, WALK_RULES
from tracejit.ad.rules import NON_DIFFERENTIABLE, VJP, ZERO_GRADIENT
from tracejit.backends.cuda.library import LINALG
from tracejit.ir import REGISTRY, Kind
from tracejit.ir.registry import Exactness, Grad

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
FLOATS = np.array([0.0, -0.0, 0.5, -1.5, 2.0, 3.7, np.nan, np.inf, -np.inf, 1e30, -7.25, 0.99])
INTS = np.array([0, -1, 1, 2, 3, -7, 5, 31, -31, 12, 9, 4])


def sample(dtype, shape=(12,)):
    dtype = np.dtype(dtype)
    base = FLOATS if dtype.kind == "f" else INTS
    vals = base[: int(np.prod(shape))].reshape(shape)
    return (vals != 0) if dtype.kind == "b" else vals.astype(dtype)


def tolerance(name: str, backend: str):
    """What ``assert_same`` allows op ``name``'s results on ``backend``: the op's
    exactness (its definition's), or exact on the reference backend; a GPU's sort and
    partition are a stable sort's, which may put the other zero where -0.0 and 0.0 tie."""
    if name in ("sort", "partition") and backend == "cuda":
        return ZEROS
    exactness = REGISTRY[name].exactness
    if exact(backend) or exactness is Exactness.EXACT:
        return None
    return ULP if exactness is Exactness.ULP else 1.0  # ORDER: within rounding of the sums


def check(fn, *args, backend, name):
    """``fn`` jitted on ``backend`` gives NumPy's result (or raises NumPy's error) within
    op ``name``'s tolerance."""
    try:
        want = fn(*args)
    except Exception as e:
        with pytest.raises(builtin_error(e)):
            tj.jit(fn, backend=backend)(*args)
        return
    got = tj.jit(fn, backend=backend)(*args)
    if name in LINALG and lapack_differs(backend):  # cuSOLVER on a real GPU
        if any(np.isnan(a).any() for a in args if a.dtype.kind == "f"):
            _nan_wherever_numpys(got, want)
        else:
            assert_factorisation(got, want)
        return
    assert_same(got, want, tolerance(name, backend))


def _nan_wherever_numpys(got, want) -> None:
    """cuSOLVER spreads a NaN input over the whole factorisation, where LAPACK may leave
    parts finite (docs/differences.md): NumPy's types and shapes, NaN where NumPy's is."""
    assert type(got) is type(want)
    for g, w in zip(got, want, strict=True) if isinstance(want, tuple) else [(got, want)]:
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        assert np.isnan(g)[np.isnan(w)].all()


UFUNC_OPS = sorted(n for n, d in REGISTRY.items() if d.ufunc is not None and n != "clip")


@pytest.mark.parametrize("name", [n for n in UFUNC_OPS if REGISTRY[n].ufunc.nin == 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_unary_ufunc(name, dtype, backend):
    uf = REGISTRY[name].ufunc
    check(lambda x: uf(x), sample(dtype), backend=backend, name=name)


@pytest.mark.parametrize("name", [n for n in UFUNC_OPS if REGISTRY[n].ufunc.nin == 2])
def test_binary_ufunc_all_dtype_pairs(name, backend):
    uf = REGISTRY[name].ufunc
    for da, db in itertools.product(DTYPES, repeat=2):
        a = sample(da)
        b = sample(db)[::-1].copy()
        if np.dtype(db).kind in "iu" and name in ("left_shift", "right_shift", "power"):
            b = np.abs(b) % 5
        check(lambda x, y: uf(x, y), a, b, backend=backend, name=name)
    # NEP 50: Python scalars are weak, NumPy scalars strong; broadcasting against 2-d.
    a2 = sample(np.float32, (3, 4))
    for other in (2, 2.5, np.float64(2.5), np.int8(3)):
        check(lambda x, c=other: uf(x, c), a2, backend=backend, name=name)
        check(lambda x, c=other: uf(c, x), a2, backend=backend, name=name)
    check(lambda x, y: uf(x, y), a2, sample(np.float64, (4,)), backend=backend, name=name)


EDGE_DTYPES = [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float32,
               np.float64]
# NumPy's own answer here depends on its loop (docs/differences.md): compared as values
NUMPYS_LOOP_PICKS = {"fmax", "fmin", "remainder"}


def edge_values(dtype) -> np.ndarray:
    """Each dtype's extremes and their neighbours, -1, 0, 1, 2, the shift widths; for
    floats signed zeros and NaNs, infinities, the largest and smallest numbers."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.5, np.nan, -np.nan, np.inf,
                         -np.inf, info.max, -info.max, info.tiny, info.smallest_subnormal],
                        dtype)
    info = np.iinfo(dtype)
    values = {0, 1, 2, 7, info.bits - 1, info.bits, info.max, info.max - 1, info.min,
              info.min + 1} | ({-1, -2, -7} if info.min < 0 else set())
    return np.array(sorted(values), dtype)


@pytest.mark.parametrize("name", [n for n in UFUNC_OPS if REGISTRY[n].exactness is
                                  Exactness.EXACT and REGISTRY[n].ufunc.nin <= 2])
def test_exact_ufuncs_at_edge_values_give_numpys_bits(name, backend):
    """Every pair of edge values of each dtype, bit for bit (signed zeros and NaN signs
    included): the samples above miss the extremes (a sweep like this one found
    ``INT64_MIN // -1`` giving 0 instead of NumPy's wrapped INT64_MIN)."""
    uf = REGISTRY[name].ufunc
    for dtype in EDGE_DTYPES:
        values = edge_values(dtype)
        args = [values] if uf.nin == 1 else \
            list(np.array(list(itertools.product(values, repeat=2)), dtype).T)
        with np.errstate(all="ignore"):
            try:
                want = uf(*args)
            except TypeError:
                continue  # no loop for this dtype (NumPy's bitwise ops on floats, ...)
            got = tj.jit(lambda *a: uf(*a), backend=backend)(*args)
        got = np.asarray(got)
        assert got.dtype == want.dtype, (name, dtype)
        if want.dtype.kind == "f" and name not in NUMPYS_LOOP_PICKS:
            if hardware_nans(backend):
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
                got, want = np.where(np.isnan(want), 0, got), np.where(np.isnan(want), 0, want)
            got, want = got.view(f"u{want.itemsize}"), want.view(f"u{want.itemsize}")
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {np.dtype(dtype).name}")


# One case per non-ufunc op: (function, args). Each must produce its op when traced.
F32 = sample(np.float32, (3, 4))


def _written(x, key, value):
    """``x[key] = value`` on a copy (the copy keeps NumPy from changing the argument)."""
    out = x.copy()
    out[key] = value
    return out


I64 = np.array([2, 0, -1], dtype=np.int64)
SQUARE = np.array([[2.0, 1.0, 0.5], [-1.0, 3.0, 0.25], [0.0, 1.5, 4.0]], dtype=np.float32)
C64 = F32.astype(np.complex64)  # (F32's specials in both parts, with no arithmetic)
C64.imag = F32[::-1]
OP_CASES = {
    "where": (lambda x: np.where(x > 0, x, -1), (F32,)),
    "clip": (lambda x, lo: np.clip(x, lo, np.int32(2)), (F32, np.float64(-0.5))),
    "convert": (lambda x: x.astype(np.int32), (F32,)),
    "sum": (lambda x: x.sum(axis=1, keepdims=True), (F32,)),
    "prod": (lambda x: np.prod(x, axis=0), (sample(np.int32, (3, 4)),)),
    "max": (lambda x: x.max(axis=-1), (F32,)),
    "min": (lambda x: np.min(x), (F32,)),
    "any": (lambda x: np.any(x, axis=0), (sample(np.int64, (3, 4)),)),
    "all": (lambda x: x.all(), (F32,)),
    "argmax": (lambda x: x.argmax(axis=1), (sample(np.int32, (3, 4)),)),
    "argmin": (lambda x: np.argmin(x, keepdims=True), (sample(np.int32, (3, 4)),)),
    "cumsum": (lambda x: np.cumsum(x, axis=1), (F32,)),
    "cumprod": (lambda x: x.cumprod(), (sample(np.int32, (3, 4)),)),
    "cummax": (lambda x: np.maximum.accumulate(x, axis=1), (F32,)),
    "cummin": (lambda x: np.minimum.accumulate(x), (sample(np.int32, (3, 4)),)),
    "sort": (lambda x: np.sort(x, axis=0), (F32,)),
    "argsort": (lambda x: np.argsort(x, axis=0, kind="stable"), (F32,)),
    "partition": (lambda x: np.partition(x, [0, 2], axis=1), (F32,)),
    "argpartition": (lambda x: np.argpartition(x, -1, axis=0), (sample(np.int32, (3, 4)),)),
    "searchsorted": (lambda a, v: np.searchsorted(a, v, side="right"),
                     (np.array([-1.5, 0.0, 0.5, 2.0, np.nan]), F32)),
    "matmul": (lambda a, b: a @ b, (sample(np.int64, (3, 4)), sample(np.int64, (4, 3)))),
    "correlate": (lambda a, v: np.convolve(a, v, "same"), (sample(np.int32), F32[0])),
    "fft": (lambda x: np.fft.rfft(x, axis=0, norm="ortho"), (F32,)),
    "real": (lambda z: np.real(z) * 2, (C64,)),
    "imag": (lambda z: np.imag(z.astype(np.complex128)), (C64,)),
    "complex": (lambda z: np.round(z, 1), (C64,)),
    "reshape": (lambda x: x.reshape(2, 6), (F32,)),
    "transpose": (lambda x: x.T, (F32,)),
    "broadcast_to": (lambda x: np.broadcast_to(x, (2, 3, 4)), (F32,)),
    "slice": (lambda x: x[::-2, 1:3], (F32,)),
    "concatenate": (lambda x, y: np.concatenate([x, y], axis=0), (F32, sample(np.int32, (1, 4)))),
    "pad": (lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=7), (F32,)),
    "gather": (lambda x, i: x[:, i], (F32, I64)),
    "stop_gradient": (lambda x: tj.stop_gradient(x) * 2, (F32,)),
    "scatter_add": (lambda x, i: tj.grad(lambda y: np.sum(y[:, i] * 2.0))(x), (F32, I64)),
    "det": (lambda a: np.linalg.det(a), (SQUARE,)),
    "slogdet": (lambda a: np.linalg.slogdet(a), (SQUARE,)),
    "inv": (lambda a: np.linalg.inv(a), (SQUARE,)),
    "solve": (lambda a, b: np.linalg.solve(a, b), (SQUARE, F32[:, :2])),
    "cholesky": (lambda a: np.linalg.cholesky(a @ a.T + 3 * np.eye(3)), (SQUARE,)),
    "qr": (lambda a: np.linalg.qr(a, mode="complete"), (F32.T,)),
    "eigh": (lambda a: np.linalg.eigh(a + a.T), (SQUARE,)),
    "svd": (lambda a: np.linalg.svd(a, full_matrices=False), (F32,)),
    "update_slice": (lambda x: _written(x, (slice(None, None, -2), slice(1, 3)), 7), (F32,)),
    "scatter": (lambda x, i: _written(x, (slice(None), i), x[:, :3] * 2), (F32, I64)),
    "constant": (lambda x: x + np.arange(4), (F32,)),
    "full": (lambda x: np.full_like(x, 3), (F32,)),
    # loops, run by NumPy as Python loops (numpy_compare.lax_of; test_loops.py has more)
    "scan": (lambda x: lax_of(x).scan(lambda c, r: (c * r + 1, c.sum()), x[0], x),
             (sample(np.int32, (3, 4)),)),
    "while_loop": (lambda x: lax_of(x).while_loop(lambda c: c.max() < 40,
                                                  lambda c: c * 2 + 1, x), (SQUARE,)),
    "loop_output": (lambda x: lax_of(x).map(lambda r: np.where(r > 0, r, 0.0), x), (F32,)),
    # seeded inside: NumPy and the jitted function draw the same numbers (test_random.py)
    "random": (lambda x: (np.random.seed(0), x * np.random.normal(x, size=(3, 4)))[1], (F32,)),
}


# Ops no traced function contains: the placement pass inserts them (test_placement.py and
# test_cuda.py run them).
PLACED_OPS = {"transfer"}


def test_every_op_has_a_differential_case():
    covered = set(UFUNC_OPS) | set(OP_CASES) | PLACED_OPS
    assert set(REGISTRY) == covered, f"ops without a differential case: {set(REGISTRY) - covered}"


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_op_case(name, backend):
    fn, args = OP_CASES[name]
    check(fn, *args, backend=backend, name=name)
    ops = {n.op for n in tj.jit(fn, backend=backend).lower(*args).graph.nodes}
    assert name in ops


def test_every_op_has_rule_impl_and_doc():
    for name, d in REGISTRY.items():
        assert callable(d.rule) and callable(d.impl) and d.doc, name
        assert isinstance(d.kind, Kind)


def test_grad_facts_agree_with_the_vjp_rules():
    """``OpDef.grad`` states what ``ad/rules.py`` implements: a VJP rule, a zero gradient,
    or no cotangent (and ops the placement pass inserts after differentiation)."""
    def having(grad: Grad) -> set[str]:
        return {n for n, d in REGISTRY.items() if d.grad is grad}

    assert having(Grad.RULE) == set(VJP) | WALK_RULES
    assert having(Grad.ZERO) == ZERO_GRADIENT
    assert having(Grad.NONE) == NON_DIFFERENTIABLE | PLACED_OPS | (LOOPS - WALK_RULES)


@pytest.mark.parametrize("name", sorted(n for n, d in REGISTRY.items() if d.monoid))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_monoid_is_the_reduction(name, dtype):
    """Folding the elements, cast to the output dtype, into the monoid's identity with its
    combining op is NumPy's reduction: what a loop kernel computes is the op."""
    op = REGISTRY[name]
    x = sample(dtype, (3, 4))
    attrs = {"axis": (1,), "keepdims": False} | ({"dtype": None} if name in ("sum", "prod")
                                                  else {})
    want = op.impl(x, **attrs)
    out = np.dtype(want.dtype)
    combine = REGISTRY[op.monoid.combine].ufunc
    got = combine.reduce(x.astype(out), axis=1, initial=op.monoid.identity(out)).astype(out)
    assert_same(got, want)
