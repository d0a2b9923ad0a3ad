"""A whole loop as one compiled C function: the time loop around the body's kernels.

Used when every step of the body (and a while loop's condition) is a loop kernel of this
backend. Each body kernel is emitted as for any graph (``LoopEmitter``), then its loop
nest becomes a Numba function of the driver module, called once per step by the driver's
``cfunc``: where the kernel read its arguments from the argument tuple (``arg(args, j,
T)``), it reads the driver's arrays at a run-time offset (``loop_abi.at``), so that each
step finds its slice and its carry without any Python:

- consts, constants and scratch values (a kernel's output another kernel reads) at 0;
- each ``x`` at its step's slice ``t * size``, each ``y`` written directly into its slice
  of the stacked output;
- each carry in a buffer of two halves, read from half ``rd = s & 1`` at step ``s`` and
  written to the other (``wr``): a kernel may read the old carry whole (``h @ W``) while
  it writes the new one, and no step copies the carry. A body output that no kernel of
  the step wrote into its place (a carry passed through, a swap, an input stacked as a
  ``y``) is copied there at the end of the step.

The driver module names no graph and holds no constant, so it is cached like a kernel:
by its source, in the process and on disk (``kernels.py``).
"""

from __future__ import annotations

import ctypes
import functools
import math
import re

import numpy as np

from ...ir import Graph, Value
from ...ir.loop_ops import Scan, While
from ...ir.types import TensorType
from . import kernels as store
from .codegen import _kernel_views, partition
from .emitter import _IMPORTS, LoopEmitter, Module
from .ops import NUMBA

_ARG = re.compile(r"arg\(args, (\d+), ([\w.]+)\)")
_DIM = re.compile(r"dim\(args, (\d+), 0\)")
_STEP = "(args, rd, wr, t)"  # each generated function's parameters


class Unfusable(Exception):
    """The loop has a step the fused driver cannot run (the Python driver runs it)."""


class _Plan:
    """The driver's arrays (``slots``: a value's array and offset expression) and code."""

    def __init__(self, loop: Scan | While):
        self.loop = loop
        self.arrays: list[tuple[str, object]] = []  # (kind, detail) of each tuple entry
        self.where: dict[Value, tuple[int, str]] = {}
        self.functions: list[str] = []
        self.calls: list[tuple[int, str]] = []  # (graph, function) run each step, in order
        self.imports: list[str] = []
        self.fixed: list[np.ndarray] = []  # constants the kernels read as arrays
        self.gemms: dict[np.dtype, int] = {}

    def add(self, kind: str, detail) -> int:
        self.arrays.append((kind, detail))
        return len(self.arrays) - 1

    def blas(self, dtype: np.dtype) -> int:
        """The entry holding the address of BLAS's gemm for ``dtype`` (one per dtype)."""
        if dtype not in self.gemms:
            self.gemms[dtype] = self.add("blas", dtype)
        return self.gemms[dtype]

    def fix(self, array: np.ndarray) -> tuple[int, str]:
        self.fixed.append(array)
        return self.add("fixed", len(self.fixed) - 1), "0"

    def locate(self, v: Value, mod) -> tuple[int, str]:
        if v not in self.where:
            if v in mod.consts:
                self.where[v] = self.fix(np.asarray(mod.consts[v], v.type.dtype, order="C"))
            else:
                raise Unfusable(f"{v} has no place")
        return self.where[v]


def _size(t: TensorType) -> int:
    return math.prod(t.shape)


def _plan(loop: Scan | While) -> _Plan:
    plan = _Plan(loop)
    scan = isinstance(loop, Scan)
    n_carry = loop.n_carry if scan else len(loop.body.outputs)
    carry_types = [v.type for v in loop.body.outputs[:n_carry]]
    consts = [plan.add("const", i) for i in range(loop.n_consts)]
    carries = [plan.add("carry", i) for i in range(n_carry)]
    xs = [plan.add("xs", i) for i in range(loop.n_xs)] if scan else []
    ys = [plan.add("ys", i) for i in range(len(loop.y_types))] if scan else []
    graphs = [loop.body] if scan else [loop.cond, loop.body]
    if not all(NUMBA.supports(v.type.dtype) for g in graphs for v in (*g.inputs, *g.outputs)):
        raise Unfusable("a dtype the kernels cannot hold")  # (copies are kernel code too)
    for g, graph in enumerate(graphs):
        inputs = [(j, "0") for j in consts]
        inputs += [(j, f"rd * {_size(t)}") for j, t in zip(carries, carry_types, strict=True)]
        inputs += [(j, f"t * {_size(v.type)}")
                   for j, v in zip(xs, graph.inputs[len(inputs):], strict=True)]
        dests = [(j, f"wr * {_size(t)}") for j, t in zip(carries, carry_types, strict=True)]
        if scan:
            dests += [(j, f"t * {_size(t)}") for j, t in zip(ys, loop.y_types, strict=True)]
        _graph(plan, g, graph, inputs, dests if graph is loop.body else [])
    return plan


def _graph(plan: _Plan, g: int, graph: Graph, inputs: list, dests: list) -> None:
    """Emit ``graph``'s kernels as functions ``g<g>_<k>``, reading ``inputs`` (a place per
    graph input) and leaving its outputs at ``dests`` (none for a condition)."""

    part, kernels = partition(graph, in_loop=True)
    mod = Module(part)
    mod.views = _kernel_views(part, kernels)
    kernels = [k for k in kernels if not (k.kind == "library" and k.nodes[0].out in mod.views)]
    transposed = _blas_steps(part, kernels)
    plan.where.update(zip(part.inputs, inputs, strict=True))
    outputs = list(zip(part.outputs, dests, strict=True)) if dests else []
    first_dest = {}
    for v, dest in outputs:
        first_dest.setdefault(v, dest)
    by_name = {}
    for k, kern in enumerate(kernels):
        if kern.kind == "library" and kern.nodes[0].out in transposed:
            continue  # a flag of the matmuls reading it
        for v in kern.outputs:
            if v not in plan.where:
                plan.where[v] = first_dest.get(v) or (plan.add("scratch", v.type), "0")
        if kern.kind == "library":
            node = kern.nodes[0]
            (_gemm if node.op == "matmul" else _transpose)(plan, mod, g, k, node, transposed)
            continue
        em = LoopEmitter(mod, k, kern, "")
        em.emit([])
        by_name.update({name: v for v, name in mod.names.items()})
        if em.parallel or any("np.full" in line or "_blocks" in line for line in em.pre):
            raise Unfusable("a kernel with partial results")
        places = [_place(plan, mod, by_name, call) for call in em.call]
        head, body = mod.kernels[-1].split("def kernel(args):\n")
        plan.imports += [line for line in head.splitlines() if line.startswith(("import", "from"))]
        body = _ARG.sub(lambda m, places=places: "at(args, {0}, {2}, {1})".format(
            *places[int(m[1])], m[2]), body)
        body = _DIM.sub(f"U({em.shape[0]})", body)
        plan.functions.append(f"@njit(inline='always')\ndef g{g}_{k}{_STEP}:\n{body}")
        plan.calls.append((g, f"g{g}_{k}"))
    copies = [f"    # step {g}: the outputs no kernel wrote in place"]
    for v, dest in outputs:
        src = plan.locate(v, mod)
        if src == dest or _size(v.type) == 0:
            continue
        T = NUMBA.dtype_name(v.type.dtype)
        copies += [f"    d = carray(at(args, {dest[0]}, {T}, {dest[1]}), ({_size(v.type)},))",
                   f"    s = carray(at(args, {src[0]}, {T}, {src[1]}), ({_size(v.type)},))",
                   f"    for i in range({_size(v.type)}):", "        d[i] = s[i]"]
    if len(copies) > 1:
        plan.functions.append(f"@njit(inline='always')\ndef g{g}_copies{_STEP}:\n"
                              + "\n".join(copies) + "\n")
        plan.calls.append((g, f"g{g}_copies"))
    if not dests:  # a condition: its value, read where it lies
        j, off = plan.locate(part.outputs[0], mod)
        plan.functions.append(f"@njit(inline='always')\ndef g{g}_value{_STEP}:\n"
                              f"    return at(args, {j}, np.uint8, {off})[0] != 0\n")


_TRANS = {False: 111, True: 112}  # CblasNoTrans, CblasTrans


def _blas_steps(graph: Graph, kernels: list) -> dict[Value, Value]:
    """Check that the library steps of ``graph`` are what the driver runs itself: 2-d
    float matmuls (BLAS) and 2-d transposes. The transposes that only such matmuls read
    become BLAS's transpose flag (returned: result -> operand); the others are copied."""
    transposed = {}
    readers: dict[Value, list] = {}
    for node in graph.nodes:
        for v in node.inputs:
            readers.setdefault(v, []).append(node)
    library = {k.nodes[0] for k in kernels if k.kind == "library"}
    for node in library:
        if node.op == "transpose" and tuple(node.attrs["perm"]) == (1, 0):
            if node.out not in graph.outputs and all(
                    r.op == "matmul" and r in library for r in readers.get(node.out, ())):
                transposed[node.out] = node.inputs[0]
            continue  # else copied, transposed, into a scratch array (``_transpose``)
        types_ = [v.type for v in (*node.inputs, node.out)]
        if node.op != "matmul" or _gemm_address() is None or any(
                t.ndim != 2 or t.dtype != types_[0].dtype or t.dtype.kind != "f"
                or t.dtype.itemsize not in (4, 8) or 0 in t.shape for t in types_):
            raise Unfusable(f"a library step ({node.op})")
    return transposed


def _gemm(plan: _Plan, mod, g: int, k: int, node, transposed: dict) -> None:
    """The function ``g<g>_<k>`` calling BLAS for matmul ``node`` (row-major, each operand
    where it lies, a transposed one by its flag)."""
    (m, kk), (_, n) = (v.type.shape for v in node.inputs)
    T = NUMBA.dtype_name(node.out.type.dtype)
    args = []
    flags = []
    for v, cols in zip(node.inputs, (kk, n), strict=True):
        base = transposed.get(v, v)
        j, off = plan.locate(base, mod)
        flags.append(str(_TRANS[v in transposed]))
        args += [f"at(args, {j}, {T}, {off})", str(base.type.shape[1] if v in transposed else cols)]
    j, off = plan.locate(node.out, mod)
    blas = plan.blas(node.out.type.dtype)
    plan.functions.append(
        f"@njit(inline='always')\ndef g{g}_{k}{_STEP}:  # matmul\n"
        f"    gemm(at(args, {blas}, np.int64, 0)[0], {', '.join(flags)}, {m}, {n}, {kk}, "
        f"{', '.join(args)}, at(args, {j}, {T}, {off}), {n})\n")
    plan.calls.append((g, f"g{g}_{k}"))


def _transpose(plan: _Plan, mod, g: int, k: int, node, transposed: dict) -> None:
    """The function ``g<g>_<k>`` writing the 2-d transpose ``node`` where it lies."""
    (rows, cols), T = node.inputs[0].type.shape, NUMBA.dtype_name(node.out.type.dtype)
    (j, off), (jd, offd) = plan.locate(node.inputs[0], mod), plan.locate(node.out, mod)
    plan.functions.append(
        f"@njit(inline='always')\ndef g{g}_{k}{_STEP}:  # transpose\n"
        f"    s = carray(at(args, {j}, {T}, {off}), ({rows}, {cols}))\n"
        f"    d = carray(at(args, {jd}, {T}, {offd}), ({cols}, {rows}))\n"
        f"    for i in range({cols}):\n"
        f"        for j in range({rows}):\n"
        f"            d[i, j] = s[j, i]\n")
    plan.calls.append((g, f"g{g}_{k}"))


_GEMM = {np.dtype(np.float32): "sgemm", np.dtype(np.float64): "dgemm"}


@functools.cache
def _gemm_address() -> dict[np.dtype, int] | None:
    """The addresses of the CBLAS ``sgemm``/``dgemm`` with 64-bit integers of the OpenBLAS
    NumPy loaded (its wheels' build), None where this process has no such BLAS."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found = {}
        for dtype, name in _GEMM.items():
            symbol = next((s for s in (f"scipy_cblas_{name}64_", f"cblas_{name}64_")
                           if hasattr(lib, s)), None)
            if symbol is not None:
                found[dtype] = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        if len(found) == len(_GEMM):
            return found
    return None


def _place(plan: _Plan, mod, by_name: dict, call: str) -> tuple[int, str]:
    """Where the kernel argument the runner would pass as ``call`` lies in the driver."""
    m = re.fullmatch(r"np\.asarray\((\w+), [\w.]+\)", call)
    name = m[1] if m else call
    if name in by_name:
        return plan.locate(by_name[name], mod)
    if name.endswith("_0d") and name in mod.namespace:
        return plan.fix(np.asarray(mod.namespace[name], order="C"))
    raise Unfusable(f"an argument {call}")


def _driver(plan: _Plan) -> str:
    """The driver module: the kernels' functions and the ``cfunc`` running the steps."""
    loop = plan.loop
    calls = [(g, f"{name}(args, rd, wr, t)") for g, name in plan.calls]

    imports = list(dict.fromkeys(_IMPORTS + plan.imports + [
        "from numba import njit", "from tracejit.backends.cpu.loop_abi import at, gemm"]))
    head = [f"# tracejit CPU loop driver: {loop!r}", *imports, "", ""]
    src = ["@cfunc(types.void(types.int64), error_model='numpy')", "def kernel(args):"]
    if isinstance(loop, Scan):
        src += [f"    for s in range({loop.length}):",
                f"        t = {loop.length - 1} - s" if loop.reverse else "        t = s",
                "        rd = s & 1  # the carry's half read this step; the other is written",
                "        wr = 1 - rd"]
        src += [f"        {c}" for _, c in calls]
    else:
        steps_at = len(plan.arrays) - 1
        cond = [c for g, c in calls if g == 0]
        body = [c for g, c in calls if g == 1]
        src += ["    s = 0", "    t = 0", "    while True:",
                "        rd = s & 1  # the carry's half read this step; the other is written",
                "        wr = 1 - rd"]
        src += [f"        {c}" for c in cond]
        src += ["        if not g0_value(args, rd, wr, t):", "            break"]
        src += [f"        {c}" for c in body]
        src += ["        s += 1", f"    at(args, {steps_at}, np.int64, 0)[0] = s"]
    return "\n".join(head + plan.functions + [""] + src) + "\n"


def _planned(loop: Scan | While) -> _Plan | None:
    """The loop's plan (a while loop's counting its steps too), None where the loop has
    a step the fused driver cannot run."""
    try:
        plan = _plan(loop)
    except Unfusable:
        return None
    if isinstance(loop, While):
        plan.add("steps", None)
    return plan


def source(loop: Scan | While) -> str | None:
    """The fused driver's source, None where the loop has a step it cannot run."""
    plan = _planned(loop)
    return None if plan is None else _driver(plan)


def build(loop: Scan | While):
    """The loop's function ``run(*consts, *init, *xs) -> results``, running the fused
    driver; None where the loop has a step it cannot run."""
    plan = _planned(loop)
    if plan is None:
        return None
    (kernel,), _ = store.get([_driver(plan)])
    return _runner(plan, kernel)


def _runner(plan: _Plan, kernel):
    loop = plan.loop
    scan = isinstance(loop, Scan)
    n_carry = loop.n_carry if scan else len(loop.body.outputs)
    nc = loop.n_consts
    inputs = [v.type for v in loop.body.inputs]
    carry_types = [v.type for v in loop.body.outputs[:n_carry]]
    x_types = [TensorType((loop.length, *t.shape), t.dtype) for t in inputs[nc + n_carry:]] \
        if scan else []
    y_types = [TensorType((loop.length, *t.shape), t.dtype) for t in loop.y_types] \
        if scan else []
    fixed = plan.fixed
    gemms = {dtype: np.array([address], np.int64)
             for dtype, address in (_gemm_address() or {}).items()}

    def run(*args):
        carry = [np.empty((2, *t.shape), t.dtype) for t in carry_types]
        for buf, init in zip(carry, args[nc:nc + n_carry], strict=True):
            buf[0] = init
        made = {"carry": carry,
                "const": [np.asarray(a, t.dtype, order="C")
                          for a, t in zip(args[:nc], inputs[:nc], strict=True)],
                "xs": [np.asarray(a, t.dtype, order="C")
                       for a, t in zip(args[nc + n_carry:], x_types, strict=True)],
                "ys": [np.empty(t.shape, t.dtype) for t in y_types]}
        steps = np.zeros(1, np.int64)
        arrays = tuple(made[kind][i] if kind in made else fixed[i] if kind == "fixed" else
                       steps if kind == "steps" else gemms[i] if kind == "blas" else
                       np.empty(i.shape, i.dtype) for kind, i in plan.arrays)
        kernel(id(arrays))
        half = (loop.length if scan else int(steps[0])) & 1
        return tuple(buf[half, ...] for buf in carry) + tuple(made["ys"])

    return run
