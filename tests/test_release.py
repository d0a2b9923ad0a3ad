"""Generated runners let go of large intermediates after their last use (``release.py``):
peak memory near NumPy's own, never a ``del`` of a name that is read again, returned, or
perhaps never assigned."""

import tracemalloc

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends.release import RELEASE_MIN_BYTES, released

BIG, SMALL = RELEASE_MIN_BYTES, RELEASE_MIN_BYTES - 1


def test_a_del_follows_the_line_of_each_large_names_last_read():
    body = ["step = 0; t1 = lib0(a0)  # a comment naming t2",
            "step = 1; t2 = lib1(t1); t3 = lib2(t2)",
            "step = 2; t4 = lib3(t1, t3)",
            "t4 = t4.reshape((2, 2))"]
    got = released(body, {"t1": BIG, "t2": BIG, "t3": BIG, "t4": BIG, "a0": BIG}, {"t4"})
    assert got == [body[0], body[1], "del t2", body[2], "del t1, t3", body[3]]


def test_small_returned_read_first_or_conditionally_assigned_names_stay():
    body = ["t1 = lib0(a0)",  # small
            "t2 = t2 + 1",  # read before it is assigned: not the runner's to drop
            "if a0 is None:", "    t3 = lib1(a0)",  # assigned only on one path
            "t5 = lib2(t1)",  # returned
            "t6 = lib3(t5)"]  # never read again: dropped at once
    sizes = {"t1": SMALL, "t2": BIG, "t3": BIG, "t5": BIG, "t6": BIG}
    assert released(body, sizes, {"t5"}) == [*body, "del t6"]


def test_a_launchs_argument_tuple_goes_with_the_arrays_it_holds():
    launch = "step = 1; args = (t1, t2); parallel(kernel1, args)"
    body = ["t1 = lib0(a0)", "t2 = empty((9,), f8)", launch, "t3 = lib2(t2)",
            "step = 3; args = (t3,); kernel3(id(args))"]
    got = released(body, {"t1": BIG, "t2": BIG, "t3": BIG}, set())
    assert got == [*body[:3], "del args, t1", body[3], "del t2", body[4], "del args, t3"]
    reread = [*body[:3], "kernel9(id(args))"]  # (args read again: it stays)
    assert released(reread, {"t1": BIG, "t2": BIG}, set())[3] == "del t1, t2"


def _chain(x):
    y = np.cumsum(x)
    z = np.sort(y * 2.0)
    w = np.cumsum(np.sqrt(np.abs(z)))
    v = np.sort(w - 1.0)
    return np.cumsum(v).sum(), v[:3]


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_runner_holds_only_what_is_live(backend):
    """Library calls (cumulative sums, sorts) on a 4 MB array: the NumPy function peaks
    at five such arrays (its locals); the compiled runner held ten before it let go of
    them, the interpreter (every first call in background mode, ``reference._released``)
    eleven."""
    x = np.random.default_rng(0).standard_normal(1 << 19)
    f = tj.jit(_chain, backend=backend)
    assert backend == "reference" or "del " in f.lower(x).source
    f(x)  # (compiled)
    tracemalloc.start()
    try:
        got = f(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * x.nbytes
    total, head = _chain(x)
    np.testing.assert_allclose(got[0], total, rtol=0 if backend == "reference" else 1e-12)
    np.testing.assert_array_equal(got[1], head)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_released_intermediates_of_loops_and_profiles_give_numpys_answers(backend):
    """A scan whose body holds large arrays, and the profiling runner (its timing lines
    around each step): the releases change no value."""
    x = np.random.default_rng(1).standard_normal((4, 1 << 17))

    def body(x):
        acc = np.zeros_like(x[0])
        for row in x:
            acc = np.sort(acc + np.cumsum(row) * 0.5)
        return acc

    f = tj.jit(body, backend=backend)
    np.testing.assert_allclose(f(x), body(x), rtol=1e-12)
    with tj.profile() as report:
        np.testing.assert_allclose(f(x), body(x), rtol=1e-12)
    assert report.steps and all(s.calls == 1 for s in report.steps)


def test_only_the_graphs_values_are_released(monkeypatch):
    """Whatever the threshold, a runner's own names (``step``, ``args`` alone) stay."""
    from tracejit.backends import release

    monkeypatch.setattr(release, "RELEASE_MIN_BYTES", 0)
    body = ["step = 0; t1 = lib0(a0)", "step = 1; t2 = lib1(t1)"]
    assert release.released(body, {"t1": 8, "t2": 8}, {"t2"}) == [*body, "del t1"]
