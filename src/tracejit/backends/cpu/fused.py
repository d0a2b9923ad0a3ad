"""A whole loop as one compiled C function: the time loop around the body's kernels.

Used when every step of the body (and a while loop's condition) is a loop kernel of this
backend or a library step the driver runs itself: a 2-d float matmul (BLAS), a 2-d
transpose, or an indexing or structural step of ``fused_steps`` (a reshape, a gather or
scatter at a run-time index, a slice, an update of a slice, a concatenation, an argmax).
Each body kernel is emitted as for any graph (``LoopEmitter``), then its loop
nest becomes a Numba function of the driver module, called once per step by the driver's
``cfunc``: where the kernel read its arguments from the argument tuple (``arg(args, j,
T)``), it reads the driver's arrays at a run-time offset (``loop_abi.at``), so that each
step finds its slice and its carry without any Python:

- consts, constants and scratch values (a kernel's output another kernel reads) at 0;
  a view (a reshape, a contiguous slice) at its input's place, no copy;
- each ``x`` at its step's slice ``t * size``, each ``y`` written directly into its slice
  of the stacked output;
- each carry in a buffer of two halves, read from half ``rd = s & 1`` at step ``s`` and
  written to the other (``wr``): a kernel may read the old carry whole (``h @ W``) while
  it writes the new one, and no step copies the carry. A body output that no kernel of
  the step wrote into its place (a carry passed through, a swap, an input stacked as a
  ``y``) is copied there at the end of the step. A carry the body updates in place
  (``out[t] = ...``: a scatter of the old value, which nothing reads after it) has one
  buffer instead, so that a loop writing one element a step copies nothing. An update
  of a value the step made itself, which nothing reads after it, is done in that
  value's place too (``codegen._updates_in_place``: a row filled element by element).

An index out of bounds stops the driver with a status (its failure and the index) in
an array of the call; the caller raises ``IndexOutOfBounds`` as the Python driver does.
The steps' functions are then written into the ``cfunc`` (``loops_flat.py``: Numba's own
inlining of hundreds of them compiles several times slower). The driver module names no
graph and holds no constant, so it is cached like a kernel:
by its source, in the process and on disk (``kernels.py``).
"""

from __future__ import annotations

import ast
import ctypes
import functools
import itertools
import math
import re
import weakref

import numpy as np

from ...errors import IndexOutOfBounds
from ...ir import Graph, Value
from ...ir.loop_ops import Scan, While
from ...ir.types import TensorType
from . import blas
from . import fused_steps as steps
from . import kernels as store
from .codegen import VIEW_OPS, _kernel_views, _updates_in_place, partition
from .emitter import _IMPORTS, LoopEmitter, Module
from .loops_flat import flatten
from .ops import NUMBA

_ARG = re.compile(r"arg\(args, (\d+), ([\w.]+)\)")
_VALUE = re.compile(r"value\(args, (\d+)\)")
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
        self.calls: list[tuple[int, str, bool]] = []  # (graph, function, may fail), in order
        self.imports: list[str] = []
        self.fixed: list[np.ndarray] = []  # constants the kernels read as arrays
        self.gemms: dict[np.dtype, int] = {}
        self.failures: list[steps.Failure] = []  # what a status of i + 1 reports
        self.status_at: int | None = None
        self.single: set[int] = set()  # the carries updated in place (one buffer, not two)

    def add(self, kind: str, detail) -> int:
        self.arrays.append((kind, detail))
        return len(self.arrays) - 1

    def blas(self, dtype: np.dtype) -> int:
        """The entry holding the address of BLAS's gemm for ``dtype`` (one per dtype)."""
        if dtype not in self.gemms:
            self.gemms[dtype] = self.add("blas", dtype)
        return self.gemms[dtype]

    def status(self) -> int:
        """The entry of the driver's status (``[failure + 1, index]``, zero when fine)."""
        if self.status_at is None:
            self.status_at = self.add("status", None)
        return self.status_at

    def failure(self, failure: steps.Failure) -> int:
        self.failures.append(failure)
        return len(self.failures) - 1

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
    parts = [partition(graph, in_loop=True) for graph in graphs]
    plan.single = _in_place(*parts[-1], loop.n_consts, n_carry)
    half = ["0" if i in plan.single else f"{{}} * {_size(t)}"
            for i, t in enumerate(carry_types)]
    for g, (graph, part) in enumerate(zip(graphs, parts, strict=True)):
        inputs = [(j, "0") for j in consts]
        inputs += [(j, h.format("rd")) for j, h in zip(carries, half, strict=True)]
        inputs += [(j, f"t * {_size(v.type)}")
                   for j, v in zip(xs, graph.inputs[len(inputs):], strict=True)]
        dests = [(j, h.format("wr")) for j, h in zip(carries, half, strict=True)]
        if scan:
            dests += [(j, f"t * {_size(t)}") for j, t in zip(ys, loop.y_types, strict=True)]
        _graph(plan, g, part, inputs, dests if graph is loop.body else [])
    return plan


def _in_place(graph: Graph, kernels: list, n_consts: int, n_carry: int) -> set[int]:
    """The carries the body updates in place: the carry's new value is a ``scatter`` or
    ``update_slice`` of its old value, which no step after that update reads (nor a view
    of it; nor the update, as its updates or indices) and the body does not return. Such
    a carry has one buffer, not two halves, and a loop writing one row a step into a
    large array copies nothing."""
    step = {n: i for i, k in enumerate(kernels) for n in k.nodes}
    readers: dict[Value, list] = {}
    for node in graph.nodes:
        for v in node.inputs:
            readers.setdefault(v, []).append(node)
    producer = {n.out: n for n in graph.nodes}
    outputs = set(graph.outputs)
    single = set()
    for i in range(n_carry):
        old, new = graph.inputs[n_consts + i], producer.get(graph.outputs[i])
        if new is None or new.op not in ("scatter", "update_slice") or new.inputs[0] is not old:
            continue
        views, todo = set(), [old]  # the old value and its views (aliases or copies)
        while todo:
            v = todo.pop()
            views.add(v)
            todo += [r.out for r in readers.get(v, ()) if r.op in VIEW_OPS and r.out not in views]
        if views & outputs or any(u in views for u in new.inputs[1:]):
            continue
        if all(r is new or (r in step and step[r] < step[new])
               for v in views for r in readers.get(v, ())):
            single.add(i)
    return single


def _graph(plan: _Plan, g: int, part_kernels: tuple, inputs: list, dests: list) -> None:
    """Emit a graph's steps (its ``partition``) as functions ``g<g>_<k>``, reading
    ``inputs`` (a place per graph input) and leaving its outputs at ``dests`` (none for a
    condition)."""

    part, kernels = part_kernels
    mod = Module(part)
    mod.views = _kernel_views(part, kernels)
    in_place = _updates_in_place(part, kernels)
    kernels = [k for k in kernels if not (k.kind == "library" and k.nodes[0].out in mod.views)]
    transposed = _library_steps(part, kernels)
    plan.where.update(zip(part.inputs, inputs, strict=True))
    outputs = list(zip(part.outputs, dests, strict=True)) if dests else []
    first_dest = {}
    for v, dest in outputs:
        first_dest.setdefault(v, dest)
    by_name = {}
    for k, kern in enumerate(kernels):
        node = kern.nodes[0]
        if kern.kind == "library":
            if node.out in transposed:
                continue  # a flag of the matmuls reading it
            place = steps.alias(plan, mod, node)
            if place is not None:
                plan.where[node.out] = place
                continue
            if node in in_place and node.out not in first_dest:  # no copy of the base
                plan.where[node.out] = plan.locate(node.inputs[0], mod)
        for v in kern.outputs:
            if v not in plan.where:
                plan.where[v] = first_dest.get(v) or (plan.add("scratch", v.type), "0")
        name = f"g{g}_{k}"
        if kern.kind == "library":
            lines, fails = (_gemm(plan, mod, node, transposed) if node.op == "matmul" else
                            _transpose(plan, mod, node) if node.op == "transpose" else
                            steps.emit(plan, mod, node))
            plan.functions.append(f"@njit(inline='always')\ndef {name}{_STEP}:  # {node.op}\n"
                                  + "\n".join(lines) + "\n")
            plan.calls.append((g, name, fails))
            continue
        em = LoopEmitter(mod, k, kern, "")
        em.emit([])
        by_name.update({name: v for v, name in mod.names.items()})
        if em.parallel or any("_blocks" in line for line in em.pre):
            raise Unfusable("a kernel with partial results")
        places = [_place(plan, mod, by_name, call) for call in em.call]
        head, body = mod.kernels[-1].split("def kernel(args):\n")
        body = "".join(_fill(plan, mod, by_name, line) for line in em.pre) + body
        plan.imports += [line for line in head.splitlines() if line.startswith(("import", "from"))]
        body = _ARG.sub(lambda m, places=places: "at(args, {0}, {2}, {1})".format(
            *places[int(m[1])], m[2]), body)
        body = _VALUE.sub(lambda m, places=places: "at(args, {}, np.float64, {})[0]".format(
            *places[int(m[1])]), body)
        body = _DIM.sub(f"U({em.shape[0]})", body)
        plan.functions.append(f"@njit(inline='always')\ndef {name}{_STEP}:\n{body}")
        plan.calls.append((g, name, False))
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
        plan.calls.append((g, f"g{g}_copies", False))
    if not dests:  # a condition: its value, read where it lies
        j, off = plan.locate(part.outputs[0], mod)
        plan.functions.append(f"@njit(inline='always')\ndef g{g}_value{_STEP}:\n"
                              f"    return at(args, {j}, np.uint8, {off})[0] != 0\n")


_FULL = re.compile(r"(\w+) = np\.full\((\(.*\)), (.*), ([\w.]+)\)")


def _fill(plan: _Plan, mod, by_name: dict, line: str) -> str:
    """The lines pre-filling a kernel's output as the runner's ``line`` does (with a
    reduction's identity, where a kernel accumulates into it), at the output's place."""
    m = _FULL.fullmatch(line)
    if m is None:
        if "np.full" in line:
            raise Unfusable(f"a kernel's output filled as {line}")
        return ""  # an allocation: the place is the driver's
    j, off = plan.locate(by_name[m[1]], mod)
    T, value = m[4], m[3]
    if T == "np.bool_":  # (Numba stores a bool through a pointer as an i1, not its byte)
        T, value = "np.uint8", str(int(ast.literal_eval(value)))
    return (f"    f_ = at(args, {j}, {T}, {off})\n"
            f"    for q in range({math.prod(ast.literal_eval(m[2]))}):\n"
            f"        f_[q] = {value}\n")


_TRANS = {False: 111, True: 112}  # CblasNoTrans, CblasTrans


def _library_steps(graph: Graph, kernels: list) -> dict[Value, Value]:
    """Check that the library steps of ``graph`` are what the driver runs itself: 2-d
    float matmuls (BLAS), 2-d transposes and the steps of ``fused_steps``. The
    transposes that only such matmuls read become BLAS's transpose flag (returned:
    result -> operand); the others are copied."""
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
        if steps.supported(node):
            continue
        types_ = [v.type for v in (*node.inputs, node.out)]
        if node.op != "matmul" or _gemm_address() is None or any(
                t.ndim != 2 or t.dtype != types_[0].dtype or t.dtype.kind != "f"
                or t.dtype.itemsize not in (4, 8) or 0 in t.shape for t in types_):
            raise Unfusable(f"a library step ({node.op})")
    return transposed


def _gemm(plan: _Plan, mod, node, transposed: dict) -> tuple[list[str], bool]:
    """The function calling BLAS for matmul ``node`` (row-major, each operand where it
    lies, a transposed one by its flag)."""
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
    return [f"    gemm(at(args, {blas}, np.int64, 0)[0], {', '.join(flags)}, {m}, {n}, {kk}, "
            f"{', '.join(args)}, at(args, {j}, {T}, {off}), {n})"], False


def _transpose(plan: _Plan, mod, node) -> tuple[list[str], bool]:
    """The function writing the 2-d transpose ``node`` where it lies."""
    (rows, cols), T = node.inputs[0].type.shape, NUMBA.dtype_name(node.out.type.dtype)
    (j, off), (jd, offd) = plan.locate(node.inputs[0], mod), plan.locate(node.out, mod)
    return [f"    s = carray(at(args, {j}, {T}, {off}), ({rows}, {cols}))",
            f"    d = carray(at(args, {jd}, {T}, {offd}), ({cols}, {rows}))",
            f"    for i in range({cols}):",
            f"        for j in range({rows}):",
            "            d[i, j] = s[j, i]"], False


_GEMM = {np.dtype(np.float32): "sgemm", np.dtype(np.float64): "dgemm"}


@functools.cache
def _gemm_address() -> dict[np.dtype, int] | None:
    """The addresses of the CBLAS ``sgemm``/``dgemm`` with 64-bit integers of the OpenBLAS
    NumPy loaded (its wheels' build), None where this process has no such BLAS."""
    for path in blas.openblas_paths():
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
    m = re.fullmatch(r"np\.asarray\((\w+), [\w.]+\)|float\((\w+)\)", call)  # (a 0-d value)
    name = (m[1] or m[2]) if m else call
    if name in by_name:
        return plan.locate(by_name[name], mod)
    if name.endswith("_0d") and name in mod.namespace:
        return plan.fix(np.asarray(mod.namespace[name], order="C"))
    raise Unfusable(f"an argument {call}")


def _driver(plan: _Plan) -> str:
    """The driver module: the kernels' functions and the ``cfunc`` running the steps."""
    loop = plan.loop
    calls = [(g, f"if {name}(args, rd, wr, t):\n            return  # status: a failure"
              if fails else f"{name}(args, rd, wr, t)") for g, name, fails in plan.calls]

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
    return flatten("\n".join(head + plan.functions + [""] + src) + "\n")


_planned_loops: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _planned(loop: Scan | While) -> tuple[_Plan, str] | None:
    """The loop's plan (a while loop's counting its steps too) and its driver's source,
    None where the loop has a step the fused driver cannot run; kept per loop (its
    source is asked for with the graph's kernels, and again when it first runs)."""
    if loop in _planned_loops:
        return _planned_loops[loop]
    try:
        plan = _plan(loop)
    except Unfusable:
        plan = None
    if plan is not None and isinstance(loop, While):
        plan.add("steps", None)
    found = _planned_loops[loop] = None if plan is None else (plan, _driver(plan))
    return found


def source(loop: Scan | While) -> str | None:
    """The fused driver's source, None where the loop has a step it cannot run."""
    planned = _planned(loop)
    return None if planned is None else planned[1]


def build(loop: Scan | While):
    """The loop's function ``run(*consts, *init, *xs) -> results``, running the fused
    driver; None where the loop has a step it cannot run."""
    planned = _planned(loop)
    if planned is None:
        return None
    plan, text = planned
    (kernel,), _ = store.get([text])
    return _runner(plan, kernel)


def _runner(plan: _Plan, kernel):
    """The loop's function: the driver's arrays (the call's own: consts, carries, xs and
    ys, which come first; then the plan's own, reused from call to call) and the call."""
    loop = plan.loop
    scan = isinstance(loop, Scan)
    n_carry = loop.n_carry if scan else len(loop.body.outputs)
    nc = loop.n_consts
    inputs = [v.type for v in loop.body.inputs]
    consts = [t.dtype for t in inputs[:nc]]
    carries = [((1 if i in plan.single else 2, *v.type.shape), v.type.dtype, i in plan.single)
               for i, v in enumerate(loop.body.outputs[:n_carry])]
    xs = [t.dtype for t in inputs[nc + n_carry:]] if scan else []
    ys = [((loop.length, *t.shape), t.dtype) for t in loop.y_types] if scan else []
    calls = len(consts) + len(carries) + len(xs) + len(ys)
    assert [kind for kind, _ in plan.arrays[:calls]] == \
        ["const"] * nc + ["carry"] * n_carry + ["xs"] * len(xs) + ["ys"] * len(ys)
    own = [kind for kind, _ in plan.arrays[calls:]]
    status = own.index("status") if "status" in own else None
    steps = own.index("steps") if "steps" in own else None
    gemms = {dtype: np.array([address], np.int64)
             for dtype, address in (_gemm_address() or {}).items()}
    pool = []  # sets of the plan's own arrays no call is using (one per concurrent call)
    # (mapped, not zipped in comprehensions: a straight run's driver is called once per
    # call of the function, where a comprehension's frame is a tenth of a microsecond)
    y_shapes, y_dtypes = [shape for shape, _ in ys], [dtype for _, dtype in ys]
    c_order = itertools.repeat("C")

    def fresh() -> tuple:
        return tuple(plan.fixed[i] if kind == "fixed" else gemms[i] if kind == "blas" else
                     np.zeros(2 if kind == "status" else 1, np.int64)
                     if kind in ("status", "steps") else np.empty(i.shape, i.dtype)
                     for kind, i in plan.arrays[calls:])

    def run(*args):
        try:
            mine = pool.pop()
        except IndexError:
            mine = fresh()
        bufs = []
        for (shape, dtype, _), init in zip(carries, args[nc:nc + n_carry], strict=True) \
                if carries else ():
            buf = np.empty(shape, dtype)
            buf[0] = init
            bufs.append(buf)
        made = list(map(np.empty, y_shapes, y_dtypes))
        arrays = (*map(np.asarray, args[:nc], consts, c_order), *bufs,
                  *map(np.asarray, args[nc + n_carry:], xs, c_order), *made, *mine)
        kernel(id(arrays))  # (the tuple held while the driver reads it)
        if status is not None and mine[status][0]:
            which, index = int(mine[status][0]), int(mine[status][1])
            mine[status][:] = 0
            pool.append(mine)
            raise _failed(plan.failures[which - 1], index)
        half = (loop.length if scan else int(mine[steps][0])) & 1
        pool.append(mine)
        if not bufs:
            return tuple(made)
        return (*[buf[0 if single else half, ...] for buf, (_, _, single)
                  in zip(bufs, carries, strict=True)], *made)

    return run


def _failed(failure: steps.Failure, index: int) -> IndexOutOfBounds:
    """The error the Python driver raises for the same index (NumPy's message, at the
    user's line of the indexing step)."""
    return IndexOutOfBounds(f"index {index} is out of bounds for axis {failure.axis} with "
                            f"size {failure.size}", location=failure.node.loc)
