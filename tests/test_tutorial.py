"""The Theano tutorial's network (examples/two_moons.py) trains like hand-written backprop."""

import sys
from pathlib import Path

import numpy as np

import tracejit as tj
from tracejit.datasets import make_moons

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import pytest  # noqa: E402
import two_moons as tm  # noqa: E402

STEPS = 200
POINTS = 1000  # the tutorial's 5000 would only make the test slower: the network is the same


@pytest.fixture(scope="module")
def moons64():
    """The data and the hand-written backprop's parameters after STEPS steps (computed once
    for all backends)."""
    X, y = make_moons(POINTS, 0.20, np.random.default_rng(0))
    X = X.astype(np.float64)
    Y = np.eye(2)[y]
    params = tm.init_params(np.float64)
    for _ in range(STEPS):
        params = tm.numpy_train_step(params, X, Y)
    return X, Y, params


def test_training_matches_hand_written_backprop_in_float64(backend, moons64):
    X, Y, theirs = moons64
    step = tj.jit(tm.train_step.__wrapped__, backend=backend)
    ours = tm.init_params(np.float64)
    for _ in range(STEPS):
        ours = step(ours, X, Y)
    for k in ours:
        assert ours[k].dtype == np.float64
        np.testing.assert_allclose(ours[k], theirs[k], rtol=0, atol=1e-5, err_msg=k)
    assert tm.calculate_loss(ours, X, Y) < tm.calculate_loss(tm.init_params(np.float64), X, Y)


def test_float32_step_keeps_float32_and_learns():
    X, y = make_moons(5000, 0.20, np.random.default_rng(0))
    Y = np.eye(2, dtype=np.float32)[y]
    params = tm.init_params()
    for _ in range(20):
        params = tm.train_step(params, X, Y)
    assert all(p.dtype == np.float32 for p in params.values())
    assert (tm.predict(params, X) == y).mean() > 0.8
