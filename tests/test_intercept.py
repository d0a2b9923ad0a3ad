"""The interception of NumPy names while tracing (``trace/intercept.py``): installed only
while a trace runs, only for calls from user code in the tracing thread."""

from __future__ import annotations

import threading
import types

import numpy as np

import tracejit as tj
from tracejit.trace import intercept

# A stand-in module, so the test does not depend on which NumPy names are replaced.
fake = types.ModuleType("fake_numpy")
fake.make = lambda n: ("original", n)
intercept.replaces(fake, "make")(lambda original, n: ("traced", original(n)))


def test_numpy_names_are_numpys_own_outside_a_trace():
    original = fake.make
    assert fake.make(1) == ("original", 1)

    @tj.jit
    def f(x):
        assert fake.make is not original  # replaced while tracing
        return x + fake.make(2)[1][1]

    assert f(np.float64(1.0)) == 3.0
    assert fake.make is original  # restored after the last trace
    for r in intercept._REPLACEMENTS:
        assert getattr(r.module, r.name) is not None
        assert not hasattr(getattr(r.module, r.name), "__tracejit_original__")


def test_calls_from_user_code_in_the_tracing_thread_only():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def other_thread():
        started.wait()
        seen["other"] = fake.make(3)  # while the trace below is running
        release.set()

    @tj.jit
    def f(x):
        started.set()
        release.wait(10)
        seen["user"] = fake.make(4)
        return x

    worker = threading.Thread(target=other_thread)
    worker.start()
    f(np.ones(2))
    worker.join()
    assert seen == {"other": ("original", 3), "user": ("traced", ("original", 4))}


def test_c_code_that_looks_numpy_up_gets_numpys_own():
    """Generator.standard_normal is Cython that calls np.empty through the numpy module
    while the user's line calls standard_normal: it must get a real ndarray (a Tracer
    there crashed the process). The generator is built here directly from a seeded bit
    generator, so it is NumPy's own object (default_rng is replaced while tracing)."""

    @tj.jit
    def f(x):
        buffer = np.zeros(3)  # the user's own call: a traceable buffer
        assert not isinstance(buffer, np.ndarray)
        noise = np.random.Generator(np.random.PCG64(5)).standard_normal(3)
        assert type(noise) is np.ndarray
        return x + noise + buffer

    assert np.array_equal(f(np.zeros(3)), np.random.default_rng(5).standard_normal(3))
