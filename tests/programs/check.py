"""Running a corpus program under ``jit`` (or ``grad``) and in plain NumPy, and comparing.

``check_jit`` calls the program in NumPy on copies of its arguments, then twice under
``tracejit.jit`` (a first, compiling call and a cached one), each on fresh copies, and
compares the outputs and the arguments after the call (NumPy programs write into their
arguments, and the caller must see those writes). Float results are compared with a float64
oracle: the same program in NumPy on arguments widened to float64 (for float64 programs
that is NumPy's own result), within a rounding tolerance scaled by the largest magnitude of
the result; integer, boolean and ``Case.exact`` results must be equal. Every call starts
from one seed of NumPy's global generator, and must leave the generator where NumPy does:
a program drawing from it draws new numbers on every call, under jit too.

``check_grad`` compares ``tracejit.grad`` with central finite differences of the NumPy
program in float64, along random directions (a directional derivative per direction, so
the cost does not grow with the argument's size).

``outcome`` turns either check into ``None`` (it passed) or ``"ExceptionClass: first line"``.
"""

from __future__ import annotations

import numpy as np

import tracejit as tj

from .case import Case

CHECKS = ("jit", "grad")
# Allowed relative error of a float result, by the size of its real type; a Case may widen it.
RTOL = {2: 1e-2, 4: 1e-4, 8: 1e-9}
FD_STEP = 1e-6  # relative finite-difference step
FD_RTOL = 1e-5
FD_DIRECTIONS = 2
GLOBAL_SEED = 2024  # np.random.seed before every call


class WrongResult(AssertionError):
    """tracejit ran the program but its result differs from NumPy's."""


def copy_tree(x):
    """Fresh copies of every array in a tree of tuples, lists and dicts."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, (tuple, list)):
        return type(x)(copy_tree(i) for i in x)
    if isinstance(x, dict):
        return {k: copy_tree(v) for k, v in x.items()}
    return x


def widen(x):
    """``x`` with float32/float16 (complex64) arrays as float64 (complex128)."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc" and x.dtype.itemsize < 8 * (
            1 + (x.dtype.kind == "c")):
        return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if isinstance(x, (tuple, list)):
        return type(x)(widen(i) for i in x)
    if isinstance(x, dict):
        return {k: widen(v) for k, v in x.items()}
    return x


def leaves(x) -> list:
    """The leaves of a tree of tuples, lists and dicts, in order."""
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in leaves(item)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in leaves(x[k])]
    return [x]


def compare(got, want, oracle, case: Case, what: str, precision: int = 8) -> None:
    """Raise WrongResult unless ``got`` has ``want``'s structure, shapes and dtypes, and
    values within the case's tolerance of ``oracle`` (``want`` where exact). ``precision``
    is the itemsize of the narrowest float input: a float32 program's result may be float64
    (a float32 array times an np.float64 scalar is float64 in NumPy 2) and still carry
    float32 rounding errors."""
    if want is None or isinstance(want, (tuple, list, dict)):
        if type(got) is not type(want) or (want is not None and len(got) != len(want)):
            raise WrongResult(f"{what} is {_describe(got)}, NumPy's is {_describe(want)}")
        items = sorted(want) if isinstance(want, dict) else range(len(want or ()))
        for i in items:
            compare(got[i], want[i], oracle[i], case, f"{what}[{i!r}]", precision)
        return
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        raise WrongResult(f"{what} is {g.dtype}{list(g.shape)}, NumPy's is "
                          f"{w.dtype}{list(w.shape)}")
    if w.dtype.kind in "fc" and not case.exact:
        rtol = RTOL[min(precision, np.finfo(w.dtype).bits // 8)]
        _close(g, np.asarray(oracle), max(rtol, case.rtol or 0.0), what, case.atol)
    elif not np.array_equal(g, w, equal_nan=w.dtype.kind in "fc"):
        wrong = np.count_nonzero(g != w) if g.shape else 1
        raise WrongResult(f"{what}: {wrong} of {max(w.size, 1)} elements differ from NumPy's")


def _close(got: np.ndarray, oracle: np.ndarray, rtol: float, what: str,
           atol: float = 0.0) -> None:
    finite = np.abs(oracle[np.isfinite(oracle)])
    scale = max(float(finite.max()), 1e-300) if finite.size else 1.0
    if not np.array_equal(np.isfinite(got), np.isfinite(oracle)):
        raise WrongResult(f"{what}: its NaNs or infinities are not NumPy's")
    err = np.abs(got.astype(oracle.dtype) - oracle)[np.isfinite(oracle)]
    bound = rtol * scale + atol
    if err.size and err.max() > bound:
        raise WrongResult(f"{what}: error {err.max():.3g} against the float64 oracle "
                          f"exceeds {rtol:g} x {scale:.3g} + {atol:g} "
                          f"({np.count_nonzero(err > bound)}"
                          f" of {err.size} elements)")


def _describe(x) -> str:
    if x is None or not isinstance(x, (tuple, list, dict)):
        return repr(x) if x is None else type(x).__name__
    return f"a {type(x).__name__} of {len(x)}"


def seeded_call(fn, args, kwargs):
    """``fn(*args, **kwargs)`` after seeding NumPy's global generator with GLOBAL_SEED, as a
    script does at its top; returns the result and the generator's state afterwards."""
    np.random.seed(GLOBAL_SEED)
    out = fn(*args, **kwargs)
    return out, np.random.get_state()


def check_jit(case: Case, backend: str) -> None:
    """Raise unless ``jit(case.fn)`` on ``backend`` does what NumPy does (see module doc)."""
    args = case.args()
    want_args = copy_tree(args)
    want, want_state = seeded_call(case.fn, want_args, case.kwargs)
    oracle, oracle_args = want, want_args
    precision = min((np.finfo(a.dtype).bits // 8 for a in leaves(args)
                     if isinstance(a, np.ndarray) and a.dtype.kind in "fc"), default=8)
    if precision < 8:
        oracle_args = widen(copy_tree(args))
        oracle, _ = seeded_call(case.fn, oracle_args, case.kwargs)
    jitted = tj.jit(case.fn, backend=backend)
    for call in ("first call", "cached call"):
        got_args = copy_tree(args)
        got, state = seeded_call(jitted, got_args, case.kwargs)
        compare(got, want, oracle, case, f"output ({call})", precision)
        compare(got_args, want_args, oracle_args, case, f"arguments after the {call}", precision)
        if not all(np.array_equal(a, b) for a, b in zip(state, want_state, strict=True)):
            raise WrongResult(f"NumPy's global random generator after the {call} is not where "
                              "the NumPy program leaves it")


def _weights(out) -> list:
    """Fixed random weights per float leaf of ``out`` (None for the others), so that the
    weighted sum of the leaves is a scalar whose gradient sees every output element."""
    rng = np.random.default_rng(1234)
    weights = []
    for leaf in leaves(out):
        a = np.asarray(leaf)
        if a.dtype.kind != "f":
            weights.append(None)
        else:
            weights.append(1.0 if a.ndim == 0 else rng.standard_normal(a.shape))
    return weights


def scalar_loss(case: Case, weights: list):
    """The program's float outputs reduced to one scalar with ``weights``."""
    def loss(*args):
        out = case.fn(*args, **case.kwargs)
        return sum(np.sum(w * o) for w, o in zip(weights, leaves(out), strict=True)
                   if w is not None)

    return loss


def check_grad(case: Case, backend: str) -> None:
    """Raise unless ``grad`` of the program (its float outputs weighted to a scalar) agrees
    with central finite differences of the NumPy program, in float64."""
    args = case.args()
    loss = scalar_loss(case, _weights(case.fn(*copy_tree(args), **case.kwargs)))
    k = case.grad
    g = tj.grad(loss, argnums=k, backend=backend)(*copy_tree(args))
    x = args[k]
    if np.shape(g) != np.shape(x) or np.asarray(g).dtype != np.asarray(x).dtype:
        raise WrongResult(f"gradient is {np.asarray(g).dtype}{list(np.shape(g))}, argument "
                          f"{k} is {np.asarray(x).dtype}{list(np.shape(x))}")
    rng = np.random.default_rng(99)
    h = FD_STEP * max(1.0, float(np.max(np.abs(x))))
    f0 = float(loss(*copy_tree(args)))

    def at(step):
        moved = list(copy_tree(args))
        moved[k] = x + step
        return float(loss(*moved))

    for _ in range(FD_DIRECTIONS):
        v = rng.standard_normal(np.shape(x))
        v = float(v) if np.ndim(x) == 0 else v
        fd = (at(h * v) - at(-h * v)) / (2 * h)
        analytic = float(np.sum(np.asarray(g) * v))
        tol = FD_RTOL * (abs(fd) + np.linalg.norm(g) * np.linalg.norm(v)) + 1e-8 * abs(f0)
        if not abs(analytic - fd) <= tol:
            raise WrongResult(f"gradient along a random direction is {analytic:.8g}, "
                              f"finite differences give {fd:.8g}")


def outcome(case: Case, check: str, backend: str) -> str | None:
    """None if ``check`` ("jit" or "grad") passes on ``backend``, else "Class: reason"."""
    run = check_jit if check == "jit" else check_grad
    try:
        with np.errstate(all="ignore"):
            run(case, backend)
    except Exception as e:  # every failure is an outcome to record
        return f"{type(e).__name__}: {reason(e)}"
    return None


def reason(e: BaseException) -> str:
    """The first line of an exception's message, short enough for a table."""
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= 110 else text[:107] + "..."


def checks(case: Case) -> tuple[str, ...]:
    """The checks that apply to ``case``: always jit, grad where it is differentiable."""
    return CHECKS if case.grad is not None else CHECKS[:1]
