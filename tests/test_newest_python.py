"""tracejit on the newest CPython found here, when it is newer than the one running the suite.

``requires-python`` has no upper bound, so tracejit must work on every released CPython
its dependencies support, while CI runs the suite on one. Two checks, cheapest first:

- Every module under ``src/`` compiles under the newest interpreter, with warnings as
  errors (a ``SyntaxWarning`` today is a ``SyntaxError`` in a later release). It needs no
  dependencies, so it runs wherever such an interpreter is installed (about 1 s).
- The README demo's entry point (``python -m tracejit --help``) and a small real
  workload (each backend, a cached call, a gradient, deprecation warnings of tracejit's
  own code as errors) run under that interpreter when it imports NumPy, Numba and
  SciPy. Installing them takes a network and a quarter of a minute at best, too much
  for the suite, and the demo itself takes 20 s a backend, so this runs only with a
  prepared interpreter: ``python3.13 -m venv /tmp/py313 && /tmp/py313/bin/pip install
  numpy numba scipy``, then ``TRACEJIT_NEWEST_PYTHON=/tmp/py313/bin/python`` (about 2 s).

The interpreter is ``TRACEJIT_NEWEST_PYTHON`` if set, else the newest ``python3.N`` on
``PATH`` or under pyenv that runs (a pyenv shim of a version not selected does not).
"""

import functools
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _version(python: str) -> tuple[int, int] | None:
    try:
        done = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    if done.returncode:
        return None
    major, minor = done.stdout.split()
    return int(major), int(minor)


@functools.cache
def newest_python() -> tuple[str, tuple[int, int]] | None:
    """(path, version) of the interpreter to check, or None."""
    chosen = os.environ.get("TRACEJIT_NEWEST_PYTHON")
    if chosen:
        version = _version(chosen)
        return (chosen, version) if version else None
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = [shutil.which(f"python3.{minor}") for minor in range(30, 9, -1)]
    candidates += glob.glob(os.path.join(pyenv, "versions", "3.*", "bin", "python3"))
    found = [(v, c) for c in dict.fromkeys(filter(None, candidates)) if (v := _version(c))]
    if not found:
        return None
    version, path = max(found)
    return path, version


@pytest.fixture(scope="module")
def python() -> str:
    found = newest_python()
    if found is None or found[1] <= sys.version_info[:2]:
        pytest.skip("no CPython newer than the one running the suite is installed")
    return found[0]


def _run(python: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(SRC), **env})


COMPILE_ALL = """
import sys, warnings
warnings.simplefilter("error")
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        compile(f.read(), path, "exec")
"""


def test_sources_compile_under_the_newest_python(python):
    files = sorted(str(p) for p in (SRC / "tracejit").rglob("*.py"))
    done = _run(python, "-c", COMPILE_ALL, *files)
    assert done.returncode == 0, done.stderr


WORKLOAD = """
import warnings
warnings.filterwarnings("error", category=DeprecationWarning, module=r"tracejit(\\.|$)")
import numpy as np
import tracejit as tj

def layer(x, W, b):
    return np.tanh(x @ W + b)

x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
W = np.full((3, 2), 0.1, np.float32)
b = np.zeros(2, np.float32)
for backend in tj.available_backends():
    f = tj.jit(layer, backend=backend)
    np.testing.assert_allclose(f(x, W, b), layer(x, W, b), rtol=1e-6)
    f(2 * x, W, b)
    assert f.cache_info() == (1, 1, 1), f.cache_info()
    g = tj.jit(tj.grad(lambda W: layer(x, W, b).sum()), backend=backend)
    np.testing.assert_allclose(g(W), x.T @ (1 - layer(x, W, b) ** 2), rtol=1e-5, atol=1e-6)
print("ran on", *tj.available_backends())
"""


def test_demo_and_a_workload_under_the_newest_python(python, tmp_path):
    if _run(python, "-c", "import numpy, numba, scipy").returncode:
        pytest.skip(f"{python} lacks NumPy, Numba or SciPy: see this module's docstring")
    demo = _run(python, "-m", "tracejit", "--help")
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.startswith("usage: python -m tracejit")
    done = _run(python, "-c", WORKLOAD, TRACEJIT_CACHE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "ran on reference cpu" in done.stdout
