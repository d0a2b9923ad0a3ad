"""Shared fixtures: every semantic test runs once per backend under test.

By default every available backend of "reference" and "cpu" (the whole suite takes about
9 minutes on 2 cores, 3 on the reference backend alone); TRACEJIT_TEST_BACKENDS=reference
(comma-separated names) picks backends. TRACEJIT_TEST_BACKENDS=cuda runs them on GPU 0,
where CuPy sees one, or on the emulated GPU of tools/cudasim with TRACEJIT_TEST_CUDASIM=1.
Hypothesis examples are the same on every run unless HYPOTHESIS_PROFILE=explore.
"""

import faulthandler
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

# Tests use small arrays to exercise the kernels: compile every kernel, however small
# (test_first_call.py checks the default policy in processes of its own).
os.environ.setdefault("TRACEJIT_MIN_KERNEL_SIZE", "0")
# A sync first call waits for its kernels, as tests check them, rather than starting on the
# prebuilt programs (with the same bits) while workers compile them in the background:
# test_prebuilt.py turns them on, and checks their bits against the kernels'.
os.environ.setdefault("TRACEJIT_PREBUILT", "0")

import numpy as np  # noqa: E402
import pytest
from hypothesis import settings

import tracejit

# (the environment alone is not enough: `-W ignore::tracejit.errors.PlacementWarning`, as
# the GPU runs pass, makes pytest import tracejit before this file runs)
tracejit.config.min_kernel_size = int(os.environ["TRACEJIT_MIN_KERNEL_SIZE"])
tracejit.config.prebuilt = os.environ["TRACEJIT_PREBUILT"]
SRC = Path(__file__).resolve().parents[1] / "src"

# Hypothesis draws the same examples on every run by default, so that CI's verdict on a
# commit does not depend on luck; HYPOTHESIS_PROFILE=explore draws new ones (do this when
# hunting bugs, and pin what it finds as a regular test).
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

_WANTED = (os.environ.get("TRACEJIT_TEST_BACKENDS") or "reference,cpu").split(",")
if "cuda" in _WANTED and os.environ.get("TRACEJIT_TEST_CUDASIM", "") not in ("", "0"):
    import cudasim  # the emulated GPU, for the whole session

    cudasim.install()
    cudasim.set_device_count(1)
BACKENDS = [b for b in tracejit.available_backends() if b in _WANTED]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch) -> str:
    """A backend name for ``jit(backend=...)``. For ``cuda`` the function runs on GPU 0 and
    this fixture brings its outputs back to the host for the test to compare (tracejit
    itself never does: outputs stay on the GPU)."""
    if request.param == "cuda":
        from tracejit import api, targets

        made = api._finisher

        def finisher(out_tree, graph, *writes):
            finish = made(out_tree, graph, *writes)
            return lambda outs: finish([targets.to_host(o) if targets.device_of(o) not in (
                None, targets.CPU) else o for o in outs])

        monkeypatch.setattr(api, "_finisher", finisher)
    return request.param


@pytest.fixture(scope="session", autouse=True)
def _private_disk_cache(tmp_path_factory):
    """Compiled kernels go to a temporary cache, not the user's ~/.cache/tracejit."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TRACEJIT_CACHE_DIR", str(tmp_path_factory.mktemp("tracejit-cache")))
    yield
    mp.undo()


# A test still running after this long is hung (a deadlock, say: see test_cpu_backend's
# lock-order test): the run ends then, with every thread's traceback on stderr, rather
# than holding CI until its own limit with nothing to show.
HANG_S = float(os.environ.get("TRACEJIT_TEST_HANG_S", "900"))


@pytest.fixture(autouse=True)
def _hang_watchdog(request):
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def hung():
        if capture is not None:  # (else the traceback would go to the test's capture)
            capture.suspend_global_capture(in_=True)
        sys.stderr.write(f"\n{request.node.nodeid} still runs after {HANG_S:g} s: hung\n")
        faulthandler.dump_traceback(all_threads=True)
        os._exit(1)

    timer = threading.Timer(HANG_S, hung)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield


@pytest.fixture
def fresh_processes(tmp_path):
    """``run(script, **env)``: the Python ``script`` run in two new processes, one after the
    other, sharing a disk cache of their own (``tmp_path / "c"``); each one's (JSON printed
    on stdout, stderr)."""

    def run(script: str, **env: str) -> list[tuple[dict, str]]:
        environ = {**os.environ, "PYTHONPATH": str(SRC), "TRACEJIT_CACHE_DIR": str(tmp_path / "c"),
                   **env}
        environ.pop("TRACEJIT_DISK_CACHE", None)
        path = tmp_path / "script.py"
        path.write_text(script)
        runs = []
        for _ in range(2):
            done = subprocess.run([sys.executable, str(path)], env=environ, capture_output=True,
                                  text=True, timeout=120, check=True)
            runs.append((json.loads(done.stdout), done.stderr))
        return runs

    return run
