"""The CPU backend's vectorisable math against NumPy: ULP bounds, special values, SIMD.

Each function is compiled once per dtype into the loop a code generator would emit and
run on ~2e5 sampled inputs plus edge cases (the sampler and the ULP measure are the
ones ``bench/ulp_report.py`` reports with).
"""

import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import ulp_report  # noqa: E402

from tracejit.backends.cpu.math import MATH, TRIG_MAX  # noqa: E402
from tracejit.ir.registry import REGISTRY  # noqa: E402

MAX_ULP = 4
CASES = [(name, dt) for name in MATH for dt in ("float32", "float64")]

_loop = functools.cache(ulp_report.compile_loop)


def _check(name, dtype, args):
    got = ulp_report.run(_loop(name, dtype), args)
    ref = ulp_report.reference(name, *args)
    bad = ulp_report.special_mismatch(got, ref)
    assert not bad.any(), (
        f"special values differ at {[a[bad][:5] for a in args]}: {got[bad][:5]} vs {ref[bad][:5]}")
    err = ulp_report.ulp_distance(got, ref)
    i = int(np.argmax(err))
    assert err[i] <= MAX_ULP, (
        f"{err[i]} ULP at {[a[i] for a in args]}: got {got[i]!r}, NumPy {ref[i]!r}")


@pytest.mark.parametrize("name,dtype", CASES)
def test_sampled_inputs_within_ulp_bound(name, dtype):
    _check(name, dtype, ulp_report.sample(name, np.dtype(dtype).type, 200_000))


@pytest.mark.parametrize("name,dtype", CASES)
def test_edge_cases_match_numpy(name, dtype):
    _check(name, dtype, ulp_report.edge_cases(name, np.dtype(dtype).type))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trig_past_supported_range_is_nan(name, dtype):
    x = np.array([TRIG_MAX, -TRIG_MAX * 4, 1e30, np.finfo(dtype).max], dtype=dtype)
    assert np.isnan(ulp_report.run(_loop(name, dtype), (x,))).all()


@pytest.mark.parametrize("name,dtype", CASES)
def test_loop_vectorises_without_libm_calls(name, dtype):
    loop = _loop(name, dtype)
    args = ulp_report.edge_cases(name, np.dtype(dtype).type)
    ulp_report.run(loop, args)
    ir = loop.inspect_llvm(loop.signatures[0])
    widths = [int(w) for w in re.findall(r"<(\d+) x (?:float|double)>", ir)]
    # lanes of a 256-bit register (AVX2; AVX-512 has twice as many) in the dtype the
    # function computes in: float32's erf, power and trig work in double (math.py)
    lanes = 4 if dtype == "float64" or name in ("sin", "cos", "tan", "erf", "power") else 8
    assert widths and max(widths) >= lanes, "loop not vectorised"
    libm = re.findall(r"call [^@]*@(?!llvm\.|NRT_|Py)(\w*(?:exp|log|sin|cos|tan|pow|erf)\w*)", ir)
    assert not libm, f"scalar library calls left in the loop: {libm}"


def _widths(loop, kind: str) -> set[int]:
    """The vector widths (lanes) of ``kind`` in the LLVM IR of ``loop``'s newest signature."""
    ir = loop.inspect_llvm(loop.signatures[-1])
    return {int(w) for w in re.findall(rf"<(\d+) x {kind}>", ir)}


def test_exp_vectorises_as_wide_as_plain_arithmetic():
    """The fact the CPU backend is built on: exp is as SIMD-friendly as a multiply, so it
    gets the full vector width LLVM picks for this CPU (16 float32 lanes with AVX-512
    where LLVM's tuning uses 512-bit vectors; for Intel server cores such as Sapphire or
    Emerald Rapids LLVM prefers 256-bit vectors, and then both are 8 lanes)."""
    from numba import njit

    for dtype, kind in (("float32", "float"), ("float64", "double")):
        @njit
        def twice(x, out):
            for i in range(x.size):
                out[i] = x[i] * 2

        x = np.ones(64, dtype)
        twice(x, np.empty_like(x))
        plain = max(_widths(twice, kind))
        loop = _loop("exp", dtype)
        ulp_report.run(loop, (x,))
        assert max(_widths(loop, kind)) >= plain >= (8 if dtype == "float32" else 4)


def test_table_covers_both_dtypes_and_names_registry_ops():
    for name, variants in MATH.items():
        assert set(variants) == {"float32", "float64"}
        assert name in REGISTRY or name in ("sigmoid", "erf"), name


def test_no_ldexp_intrinsic_before_llvm_17(monkeypatch):
    """``llvm.ldexp`` exists from LLVM 17: with an older one (Numba 0.60's llvmlite has
    LLVM 14) the kernels must scale by powers of two instead, or they call a function
    nothing defines (the process aborted with "Symbol not found: llvm.ldexp.f32.i32")."""
    from llvmlite import binding

    from tracejit.backends.cpu import math

    monkeypatch.setattr(binding, "llvm_version_info", (14, 0, 6))
    assert not math._hardware_ldexp()
