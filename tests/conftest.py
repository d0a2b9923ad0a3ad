"""Shared fixtures: every semantic test runs once per available backend."""

import numpy as np
import pytest

import tracejit

BACKENDS = tracejit.available_backends()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield
