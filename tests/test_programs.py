"""The corpus of tests/programs: realistic NumPy programs under ``jit`` and ``grad``.

Every program runs in NumPy and under ``tracejit.jit`` on each backend (outputs and the
arguments after the call must match; see programs/check.py), and where it is
differentiable its ``tracejit.grad`` must match finite differences. The programs that do
not run yet are listed, with the exception they raise, in programs/expected.py; that table
is strict both ways: a listed program must still fail with its exception class, and every
other one must pass. After a change that makes programs run, regenerate it:

    PYTHONPATH=src python -m tests.programs --update
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from programs import BY_NAME, PROGRAMS
from programs.check import CHECKS, check_grad, check_jit, copy_tree, leaves, seeded_call
from programs.expected import EXPECTED_FAILURES
from programs.report import BACKENDS, expected_for, failure_class

MIN_PROGRAMS = 45
# Compiling is what takes time on the cpu backend (every kernel compiles in the tests,
# ~0.3 s each, a few seconds a program), so by default it runs this subset: each field,
# in-place updates of arguments, loops over a step count, tables filled cell by cell,
# float32, random draws. TRACEJIT_CORPUS=all runs every program there too (as
# `python -m tests.programs` always does).
CPU_SUBSET = frozenset({
    "jacobi_1d", "fdtd_2d", "game_of_life", "floyd_warshall", "needleman_wunsch", "viterbi",
    "cov_and_corrcoef", "running_mean", "histogram_counts", "bootstrap_ci", "gram_schmidt",
    "lu_inplace", "solve_with_residual", "rotate_points", "mlp_loss", "conv1d",
    "attention_float32", "kmeans_step", "batchnorm_train", "nbody_step", "lorenz_euler",
    "noisy_measurement", "metropolis_sweep", "sinc_lowpass", "half_wave_rectify",
})
CPU_GRAD_SUBSET = frozenset({"mlp_loss", "conv1d", "rotate_points"})
REGENERATE = "regenerate programs/expected.py: PYTHONPATH=src python -m tests.programs --update"


def _verify(case, check: str, backend: str) -> None:
    if backend not in BACKENDS:
        pytest.skip(f"expected.py records the corpus on {', '.join(BACKENDS)} only")
    subset = CPU_SUBSET if check == "jit" else CPU_GRAD_SUBSET
    if backend == "cpu" and case.name not in subset and os.environ.get("TRACEJIT_CORPUS") != "all":
        pytest.skip("the cpu backend compiles a representative subset (TRACEJIT_CORPUS=all: "
                    "every program)")
    run = check_jit if check == "jit" else check_grad
    expected = expected_for(case.name, check, backend)
    if expected is None:
        run(case, backend)  # an unexpected failure raises here, with its traceback
        return
    try:
        run(case, backend)
    except Exception as e:  # the expected failure, if its class is the one recorded
        assert type(e).__name__ == failure_class(expected), (
            f"{case.name} ({check}, {backend}) was expected to fail with {expected!r}, "
            f"but raised {type(e).__name__}: {e}\n{REGENERATE}")
        return
    pytest.fail(f"{case.name} ({check}, {backend}) now passes, but expected.py lists it as "
                f"failing with {expected!r}: {REGENERATE}")


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.name)
def test_jit(case, backend):
    _verify(case, "jit", backend)


@pytest.mark.parametrize("case", [c for c in PROGRAMS if c.grad is not None],
                         ids=lambda c: c.name)
def test_grad(case, backend):
    _verify(case, "grad", backend)


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.name)
def test_numpy_is_deterministic(case):
    """The corpus itself: each program runs in NumPy, and two runs on fresh arguments give
    the same results and leave the same arguments, so a difference under jit is jit's."""
    runs = []
    for _run in range(2):
        args = case.args()
        out, _state = seeded_call(case.fn, args, case.kwargs)
        runs.append([np.asarray(x) for x in leaves(out) + leaves(copy_tree(args))])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_expected_failures_name_real_checks():
    for key in EXPECTED_FAILURES:
        name_check, _, backend = key.partition("@")
        name, _, check = name_check.partition(":")
        assert name in BY_NAME, f"{key}: no program {name!r}"
        assert check in ("", *CHECKS[1:]), f"{key}: no check {check!r}"
        assert check == "" or BY_NAME[name].grad is not None, f"{key}: no gradient check"
        assert backend in ("", *BACKENDS), f"{key}: no backend {backend!r}"


def test_corpus_count():
    """At least MIN_PROGRAMS programs; prints how many run unchanged by expected.py."""
    assert len(PROGRAMS) >= MIN_PROGRAMS
    assert CPU_SUBSET <= set(BY_NAME) and CPU_GRAD_SUBSET <= CPU_SUBSET
    failing = {c.name for c in PROGRAMS
               if any(expected_for(c.name, "jit", b) for b in BACKENDS)}
    grads = [c for c in PROGRAMS if c.grad is not None]
    grad_failing = {c.name for c in grads if any(expected_for(c.name, "grad", b)
                                                 for b in BACKENDS)}
    print(f"{len(PROGRAMS) - len(failing)} of {len(PROGRAMS)} programs run unchanged under "
          f"jit; {len(grads) - len(grad_failing)} of {len(grads)} gradients agree with "
          "finite differences")
