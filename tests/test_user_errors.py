"""Mistakes a user can make that used to surface as NumPy's or Python's untyped errors:
writing traced values into a NumPy array that is not an argument, and a bad setting."""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.config import Settings
from tracejit.errors import ConfigError, InPlaceArgumentError, UnknownSetting

GLOBAL = np.zeros(3)


class Holder:
    def __init__(self):
        self.buf = np.zeros(3)


HOLDER = Holder()


def scalar_into_global(x):
    GLOBAL[0] = x[0]
    return x


def array_into_global(x):
    GLOBAL[:] = x
    return x


def add_into_global(x):
    GLOBAL[1:] += x[1:]
    return x


def into_attribute(x):
    HOLDER.buf[0] = x.sum()
    return x


def from_a_pytree(p):
    GLOBAL[:] = p["w"]
    return p["w"]


@pytest.mark.parametrize("fn, line", [
    (scalar_into_global, "GLOBAL[0] = x[0]"),
    (array_into_global, "GLOBAL[:] = x"),
    (add_into_global, "GLOBAL[1:] += x[1:]"),
    (into_attribute, "HOLDER.buf[0] = x.sum()"),
])
def test_a_write_into_a_global_array_is_an_in_place_error_at_its_line(fn, line):
    before = GLOBAL.copy()
    with pytest.raises(InPlaceArgumentError, match="not an argument") as caught:
        tj.jit(fn, backend="reference")(np.ones(3))
    assert caught.value.location.text() == line
    assert caught.value.location.filename == __file__
    np.testing.assert_array_equal(GLOBAL, before)


def test_a_traced_value_in_a_pytree_is_seen_too():
    with pytest.raises(InPlaceArgumentError, match="GLOBAL"):
        tj.jit(from_a_pytree, backend="reference")({"w": np.ones(3)})


def test_numpys_own_errors_about_numpy_values_stay_as_they_are():
    """A shape mismatch between NumPy constants on such a line is NumPy's ValueError, as
    without jit (nothing traced is involved)."""
    def f(x):
        GLOBAL[:2] = np.ones(3)
        return x

    with pytest.raises(ValueError, match="could not broadcast") as caught:
        f(np.ones(3))
    with pytest.raises(ValueError, match="could not broadcast") as traced:
        tj.jit(f, backend="reference")(np.ones(3))
    assert type(traced.value) is type(caught.value)


def test_writes_to_arguments_and_local_copies_still_work():
    def f(x, out):
        y = x.copy()
        y[0] = 5.0
        out[:] = y
        return y

    out = np.zeros(3)
    np.testing.assert_array_equal(tj.jit(f, backend="reference")(np.ones(3), out), [5, 1, 1])
    np.testing.assert_array_equal(out, [5, 1, 1])


def test_a_bad_setting_is_a_typed_error_that_names_the_users_line():
    s = Settings()
    with pytest.raises(ConfigError, match="compile must be one of") as caught:
        s.compile = "eager"
    assert isinstance(caught.value, ValueError)
    assert caught.value.location.filename == __file__
    with pytest.raises(ConfigError, match="min_kernel_size cannot be None"):
        s.min_kernel_size = None
    with pytest.raises(ConfigError, match="count >= 0"):
        s.compile_workers = -1
    with pytest.raises(UnknownSetting, match="no setting 'complie'") as unknown:
        s.complie = "sync"
    assert isinstance(unknown.value, AttributeError)
    assert s.compile == "sync"


def test_a_malformed_environment_value_warns_with_the_reason(monkeypatch):
    monkeypatch.setenv("TRACEJIT_ROLL_LOOPS", "maybe")
    with pytest.warns(RuntimeWarning, match=r"TRACEJIT_ROLL_LOOPS='maybe' \(expected a boolean"):
        assert Settings().roll_loops is True
