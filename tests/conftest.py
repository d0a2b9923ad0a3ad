"""Shared fixtures: every semantic test runs once per backend under test.

By default every available backend of "reference" and "cpu" (the whole suite takes about
7 minutes on 2 cores, 3 on the reference backend alone); TRACEJIT_TEST_BACKENDS=reference
(comma-separated names) picks backends.
"""

import os

import numpy as np
import pytest

import tracejit

_WANTED = (os.environ.get("TRACEJIT_TEST_BACKENDS") or "reference,cpu").split(",")
BACKENDS = [b for b in tracejit.available_backends() if b in _WANTED]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture(scope="session", autouse=True)
def _private_disk_cache(tmp_path_factory):
    """Compiled kernels go to a temporary cache, not the user's ~/.cache/tracejit."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TRACEJIT_CACHE_DIR", str(tmp_path_factory.mktemp("tracejit-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield
