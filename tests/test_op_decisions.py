"""Where each backend computes each registry op: every gap is a written decision.

The reference backend runs every op as its NumPy implementation (``OpDef.impl``). The
compiled backends decide per node: the CPU backend computes it in a loop kernel (Numba) or
leaves it to a library call (NumPy, BLAS); the CUDA backend computes it in a loop kernel,
calls a library (CuPy, cuBLAS), or leaves it to the host, where the placement pass runs it
on the CPU. A missing template silently becomes a library call or a host step, so this
file writes each backend's decision down, one row per op, per sample dtype, with the
reason, and checks the rows against the backends' own ``fusible`` and ``supports``
(fusible or a library step). A new op fails ``test_every_op_has_a_decision`` until it has
a row.

Sample dtypes are NumPy's character codes: ``?`` bool, ``i`` int32, ``l`` int64, ``f``
float32, ``d`` float64. Elementwise samples take every operand in the sample dtype (the
loop then computes in NumPy's loop dtypes for them, e.g. float64 for ``exp`` of int32 and
float16 for ``exp`` of bool); ``-`` marks dtypes for which NumPy has no loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from tracejit.backends.cpu.codegen import fusible as cpu_fusible
from tracejit.backends.cuda import supports as cuda_supports
from tracejit.backends.cuda.codegen import fusible as cuda_fusible
from tracejit.ir import REGISTRY, Graph, Kind, Node, Value
from tracejit.ir.loop_ops import Scan, While
from tracejit.ir.random_ops import Slot
from tracejit.ir.types import TensorType
from tracejit.passes.contract import SMALL_K

K, L, H, NO = "kernel", "library", "host", "-"
CODES = "?ilfd"
Decision = str | dict[str, str]  # one decision for every sample dtype, or per dtype codes


@dataclass(frozen=True)
class Row:
    cpu: Decision
    cuda: Decision
    why: str = ""  # the reason for every decision other than a kernel for every dtype

    def at(self, backend: str, code: str) -> str:
        decision = getattr(self, backend)
        if isinstance(decision, str):
            return decision
        return next(d for codes, d in decision.items() if code in codes)


ALL = Row(K, K)  # a loop kernel on both backends for every sample dtype
F16 = "bool operands compute in float16 (NumPy's loop), which neither kernel language has"
CUDA_INT8 = "bool operands compute in int8 (NumPy's loop), which the CUDA language lacks"

DECISIONS: dict[str, Row] = {
    # ------------------------------------------------------------ elementwise
    "negative": Row({"?": NO, "ilfd": K}, {"?": NO, "ilfd": K}),
    "positive": Row({"?": NO, "ilfd": K}, {"?": NO, "ilfd": K}),
    "absolute": ALL,
    "sign": Row({"?": NO, "ilfd": K}, {"?": NO, "ilfd": K}),
    **{op: Row({"?": L, "ilfd": K}, {"?": H, "ilfd": K}, why=F16) for op in (
        "exp exp2 expm1 log log2 log10 log1p sqrt cbrt sin cos tan arcsin arccos arctan "
        "sinh cosh tanh arcsinh arccosh arctanh rint arctan2 hypot logaddexp logaddexp2 "
        # float-only ufuncs, exact or not
        "fabs degrees radians deg2rad rad2deg signbit spacing heaviside copysign nextafter"
        ).split()},
    "square": Row(K, {"?": H, "ilfd": K}, why=CUDA_INT8),
    "reciprocal": Row({"?il": L, "fd": K}, {"?il": H, "fd": K},
                      why="integer reciprocal (1 // x with NumPy's division by zero) has no "
                          "template; bool computes in int8"),
    **{op: ALL for op in ("floor", "ceil", "trunc")},
    "logical_not": ALL,
    "invert": Row({"?il": K, "fd": NO}, {"?il": K, "fd": NO}),
    **{op: ALL for op in ("isnan", "isinf", "isfinite")},
    "add": ALL,
    "subtract": Row({"?": NO, "ilfd": K}, {"?": NO, "ilfd": K}),
    "multiply": ALL,
    "true_divide": ALL,
    **{op: Row(K, {"?": H, "ilfd": K}, why=CUDA_INT8) for op in ("floor_divide", "remainder")},
    "power": Row({"?il": L, "fd": K}, {"?il": H, "fd": K},
                 why="integer power (NumPy raises for negative exponents) has no template; "
                     "bool computes in int8"),
    **{op: ALL for op in (
        "maximum minimum fmax fmin equal not_equal less less_equal greater greater_equal "
        "logical_and logical_or logical_xor").split()},
    **{op: Row({"?il": K, "fd": NO}, {"?il": K, "fd": NO})
       for op in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    **{op: Row({"?il": K, "fd": NO}, {"?": H, "il": K, "fd": NO}, why=CUDA_INT8)
       for op in ("left_shift", "right_shift")},
    "clip": ALL,
    "conjugate": Row(K, {"?": H, "ilfd": K}, why=CUDA_INT8),
    "bitwise_count": Row({"?il": L, "fd": NO}, {"?il": H, "fd": NO},
                         why="its uint8 result: no template in either language (a popcount "
                             "of the magnitude); CUDA has no uint8"),
    "float_power": ALL,
    "fmod": Row(K, {"?": H, "ilfd": K}, why=CUDA_INT8),
    **{op: Row({"?": NO, "il": K, "fd": NO}, {"?": NO, "il": K, "fd": NO})
       for op in ("gcd", "lcm")},
    "ldexp": Row({"?": L, "il": K, "fd": NO}, {"?": H, "il": K, "fd": NO}, why=F16),
    "where": ALL,
    "convert": ALL,
    "stop_gradient": Row(L, H, why="an autodiff marker: simplify removes it before code "
                                   "generation, so no template exists"),
    # ------------------------------------------------------------ reductions
    **{op: ALL for op in ("sum", "prod", "max", "min", "any", "all")},
    **{op: Row(L, L, why="no monoid (the index travels with the value): NumPy on the CPU, "
                         "CuPy with NumPy's first-NaN rule on the GPU")
       for op in ("argmax", "argmin")},
    # ------------------------------------------------------------ scans, sorting
    **{op: Row(K, L, why="a CPU kernel folds along its last axis in NumPy's order (a scan "
                         "along another axis is NumPy's accumulate); CuPy's scan on the GPU")
       for op in ("cumsum", "cumprod")},
    **{op: Row(K, L, why="a CPU kernel folds along its last axis, as NumPy's accumulate; on "
                         "the GPU a log-step scan of CuPy's maximum/minimum (exact, so "
                         "NumPy's values)")
       for op in ("cummax", "cummin")},
    "sort": Row(L, L, why="np.sort / cupy.sort (CuPy's is stable for every kind: NumPy's "
                          "values, only -0.0 and 0.0 may come in another order than an "
                          "unstable kind's)"),
    "argsort": Row(L, H, why="NumPy's sort on the CPU; CuPy sorts stably, so an argsort of "
                             "NumPy's default (unstable) kind, sampled here, runs on the host "
                             "to keep NumPy's tie order; kind='stable' (and partition's "
                             "gradient) is a CuPy call"),
    **{op: Row(L, L, why="NumPy's introselect on the CPU (its bits: median and quantile "
                         "call it with NumPy's kth lists); on the GPU CuPy's stable sort, a "
                         "partition at every kth") for op in ("partition", "argpartition")},
    "searchsorted": Row(L, L, why="a binary search per value: np.searchsorted / "
                                  "cupy.searchsorted"),
    # ------------------------------------------------------------ contraction
    "matmul": Row(L, {"?il": H, "fd": L},
                  why=f"BLAS / cuBLAS (the samples have K > SMALL_K; float matmuls with "
                      f"K <= {SMALL_K} are loop kernels on both, see test_small_k_matmul); "
                      "cuBLAS has no integer or bool matmul, so those run on the host"),
    "correlate": Row(L, {"?il": H, "fd": L},
                     why="np.correlate's direct loop on the CPU (faster than im2col + BLAS at "
                         "every size measured); on the GPU its windows gathered for one cuBLAS "
                         "product (CuPy's correlate may take an FFT), which has no integer or "
                         "bool product, so those run on the host"),
    # ------------------------------------------------------------ linalg
    **{op: Row({"?il": NO, "fd": L}, {"?il": NO, "fd": L},
               why="LAPACK through NumPy / cuSOLVER through CuPy; the tracer converts integer "
                   "and bool operands to float64 first, so the ops take floats only")
       for op in ("det", "slogdet", "inv", "solve", "cholesky", "qr", "eigh", "svd")},
    # ------------------------------------------------------------ spectral, complex parts
    "fft": Row(L, L, why="pocketfft through np.fft on the CPU (NumPy's bits); cuFFT through "
                         "cupy.fft on the GPU; its result is complex, which neither kernel "
                         "language has"),
    **{op: Row(NO, NO, why="complex operands only (sampled in test_complex_parts_are_library_"
                           "calls): NumPy's view of the part on the CPU, CuPy's on the GPU")
       for op in ("real", "imag")},
    "complex": Row({"?il": NO, "fd": L}, {"?il": NO, "fd": H},
                   why="float parts in, a complex value out, which neither kernel language has: "
                       "NumPy stores the parts on the CPU; a host step under CUDA"),
    # ------------------------------------------------------------ structural, indexing
    **{op: Row(L, L, why="a view or a copy: NumPy on the CPU, CuPy on the GPU")
       for op in ("reshape", "transpose", "broadcast_to", "slice", "concatenate", "pad")},
    "gather": Row(L, L, why="NumPy / CuPy fancy indexing (CuPy's after a bounds check)"),
    "scatter_add": Row(L, {"?l": H, "ifd": L},
                       why="np.add.at on the CPU; cupyx.scatter_add uses atomicAdd, which CUDA "
                           "has for int32, float32 and float64 only"),
    "update_slice": Row(L, L, why="a copy with a region written (x[region] = updates): NumPy "
                                  "on the CPU, CuPy on the GPU"),
    "scatter": Row(L, L, why="a copy with x[idx] = updates: NumPy / CuPy item assignment (CuPy's "
                             "after a bounds check)"),
    # ------------------------------------------------------------ creation, devices
    "constant": Row(L, H, why="a value of the runner's namespace (0-d ones are inlined into "
                              "kernels as literals); on CUDA placement puts it where its users "
                              "run, not by supports()"),
    "full": Row(L, L, why="np.full / cupy.full"),
    "transfer": Row(L, H, why="a copy between devices that the runner makes; placement "
                              "inserts it after deciding where every other node runs"),
    # ------------------------------------------------------------ loops
    **{op: Row(L, L, why="a loop is a step of the runner, never inside a kernel: the step "
                         "runs its body graph, compiled by the same backend, once per "
                         "iteration; on CUDA its body's kernels run on the device (placement "
                         "keeps it on the host only when a body op is unsupported there)")
       for op in ("scan", "while_loop")},
    "loop_output": Row(L, L, why="picks one result of a loop's tuple (no computation): the "
                                 "runner's, where the loop ran"),
    # ------------------------------------------------------------ effects
    "random": Row(L, H, why="a call of NumPy's generator when the graph runs (an effect, "
                            "never in a kernel); on the host under CUDA too, since CuPy's "
                            "generators give other numbers than NumPy's"),
}


def _node(op: str, inputs: list[TensorType], **attrs) -> Node:
    values = tuple(Value(t) for t in inputs)
    return Node(op, values, attrs, Value(REGISTRY[op].rule(*inputs, **attrs)), None)


def sample(op: str, code: str) -> Node | None:
    """A representative node of ``op`` in sample dtype ``code``; None where NumPy has no
    loop for it."""
    dt = np.dtype(code)
    x, i64 = TensorType((4, 32), dt), TensorType((3,), np.dtype(np.int64))
    d = REGISTRY[op]
    builders = {
        "where": lambda: _node(op, [TensorType((4, 32), np.dtype(bool)), x, x]),
        "convert": lambda: _node(op, [x], dtype=np.dtype(np.float32)),
        "stop_gradient": lambda: _node(op, [x]),
        "clip": lambda: _node(op, [x, x, x]),
        "argmax": lambda: _node(op, [x], axis=1, keepdims=False),
        "argmin": lambda: _node(op, [x], axis=1, keepdims=False),
        "matmul": lambda: _node(op, [x, TensorType((32, 3), dt)]),
        "correlate": lambda: _node(op, [TensorType((32,), dt), TensorType((5,), dt)],
                                   mode="same"),
        "cumsum": lambda: _node(op, [x], axis=1, dtype=None),
        "fft": lambda: _node(op, [x], transform="rfft", n=32, axis=1, norm="backward"),
        "complex": lambda: _node(op, [x, x]) if dt.kind == "f" else None,
        "cumprod": lambda: _node(op, [x], axis=1, dtype=None),
        "cummax": lambda: _node(op, [x], axis=1),
        "cummin": lambda: _node(op, [x], axis=0),
        "sort": lambda: _node(op, [x], axis=1, kind="quicksort"),
        "argsort": lambda: _node(op, [x], axis=1, kind="quicksort"),
        "partition": lambda: _node(op, [x], axis=1, kth=(3, -1), kind="introselect"),
        "argpartition": lambda: _node(op, [x], axis=0, kth=(1,), kind="introselect"),
        "searchsorted": lambda: _node(op, [TensorType((32,), dt), x], side="left"),
        "reshape": lambda: _node(op, [x], shape=(32, 4)),
        "transpose": lambda: _node(op, [x], perm=(1, 0)),
        "broadcast_to": lambda: _node(op, [x], shape=(2, 4, 32)),
        "slice": lambda: _node(op, [x], starts=(0, 0), stops=(4, 32), steps=(1, 2)),
        "concatenate": lambda: _node(op, [x, x], axis=0),
        "pad": lambda: _node(op, [x], widths=((1, 0), (0, 1)), value=0),
        "gather": lambda: _node(op, [x, i64], axis=0),
        "scatter_add": lambda: _node(op, [x, TensorType((3, 32), dt), i64], axis=0),
        "update_slice": lambda: _node(op, [x, TensorType((4, 16), dt)], starts=(0, 0),
                                      stops=(4, 32), steps=(1, 2)),
        "scatter": lambda: _node(op, [x, TensorType((3, 32), dt), i64], axis=0),
        "constant": lambda: _node(op, [], value=np.zeros((4, 32), dt)),
        "full": lambda: _node(op, [], shape=(4, 32), dtype=dt, value=0),
        "transfer": lambda: _node(op, [x], source="cpu", device="cuda:0"),
        "random": lambda: _node(op, [x], source="global", method="normal",
                                args=(), kwargs=(("loc", Slot(0)),), shape=x.shape,
                                dtype=np.dtype(np.float64), weak=False),
    }
    if d.kind is Kind.LINALG:
        return _linalg_sample(op, dt)
    if d.kind is Kind.LOOP:
        return _loop_sample(op, x)
    if op in builders:
        return builders[op]()
    if d.kind is Kind.REDUCTION:
        extra = {"dtype": None} if op in ("sum", "prod") else {}
        return _node(op, [x], axis=(1,), keepdims=False, **extra)
    try:
        return _node(op, [x] * d.ufunc.nin)
    except Exception:  # the IR rule raises NumPy's error: no loop for these dtypes
        return None


LINALG_ATTRS = {"cholesky": {"upper": False}, "qr": {"mode": "reduced"},
                "eigh": {"UPLO": "L", "vectors": True},
                "svd": {"full_matrices": False, "compute_uv": True}}


def _linalg_sample(op: str, dt: np.dtype) -> Node | None:
    """A stack of 4x4 matrices (and right-hand sides for solve); None for the dtypes the
    op does not take (the tracer converts those to float64)."""
    if dt.kind != "f":
        return None
    x = TensorType((2, 4, 4), dt)
    inputs = [x, TensorType((2, 4, 3), dt)] if op == "solve" else [x]
    return _node(op, inputs, **LINALG_ATTRS.get(op, {}))


def _loop_sample(op: str, x: TensorType) -> Node:
    """A scan adding each slice of xs to its carry; a while loop adding a const to its
    carry while any element is nonzero; the carry the scan gives back."""
    k, c = Value(x), Value(x)
    step = Node("add", (k, c), {}, Value(REGISTRY["add"].rule(x, x)), None)
    if step.out.type != x:  # bool + bool: the loop would change its carry's type
        step = Node("bitwise_or", (k, c), {}, Value(x), None)
    if op == "while_loop":
        test = Node("any", (c,), {"axis": (0, 1), "keepdims": False},
                    Value(TensorType((), np.dtype(bool))), None)
        loop = While(Graph([k, c], [test], [test.out], "cond"),
                     Graph([k, c], [step], [step.out], "body"), 1)
        return _node(op, [x, x], loop=loop)
    loop = Scan(Graph([c, k], [step], [step.out], "body"), 0, 1, 5)
    scan = _node("scan", [x, TensorType((5, *x.shape), x.dtype)], loop=loop)
    if op == "scan":
        return scan
    return Node(op, (scan.out,), {"index": 0, "type": x}, Value(x), None)


def decided(backend: str, node: Node | None) -> str:
    """What ``backend`` does with ``node`` according to its own functions."""
    if node is None:
        return NO
    if backend == "cpu":
        return K if cpu_fusible(node) else L
    return K if cuda_fusible(node) else L if cuda_supports(node) else H


def test_every_op_has_a_decision():
    missing = set(REGISTRY) - set(DECISIONS)
    assert not missing, f"ops without a written per-backend decision: {sorted(missing)}"
    assert not set(DECISIONS) - set(REGISTRY), "decisions for ops no longer registered"


@pytest.mark.parametrize("op", sorted(DECISIONS))
def test_decision_is_what_the_backends_do(op):
    row = DECISIONS[op]
    for code in CODES:
        node = sample(op, code)
        for backend in ("cpu", "cuda"):
            want, got = row.at(backend, code), decided(backend, node)
            assert got == want, f"{op} ({np.dtype(code)}) on {backend}: the table says " \
                                f"{want}, the backend does {got}"
    gaps = {row.at(b, c) for b in ("cpu", "cuda") for c in CODES} - {K, NO}
    assert row.why or not gaps, f"{op}: a library or host step without its reason"


def test_stable_argsort_is_a_cupy_call():
    """The stable kinds (np.median, np.quantile's gradients use them) run on the GPU."""
    for kind, want in (("stable", L), ("mergesort", L), ("quicksort", H), ("heapsort", H)):
        node = _node("argsort", [TensorType((4, 32), np.dtype("d"))], axis=1, kind=kind)
        assert decided("cuda", node) == want, kind


def test_small_k_matmul():
    """A float matmul contracting at most SMALL_K is an unrolled loop kernel on the CPU and
    on the GPU; a larger one, or an integer one, calls BLAS / cuBLAS (or the host)."""
    for dt, k, want in (("f", SMALL_K, True), ("d", 2, True), ("f", SMALL_K + 1, False),
                        ("l", 2, False)):
        a, b = TensorType((4, k), np.dtype(dt)), TensorType((k, 3), np.dtype(dt))
        assert cpu_fusible(_node("matmul", [a, b])) is want, (dt, k)
        assert cuda_fusible(_node("matmul", [a, b])) is want, (dt, k)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_parts_are_library_calls(dtype):
    """real/imag take complex values, which no kernel language has: NumPy's / CuPy's."""
    z = TensorType((4, 32), np.dtype(dtype))
    for op in ("real", "imag"):
        node = _node(op, [z])
        assert decided("cpu", node) == L, op
        assert decided("cuda", node) == L, op
