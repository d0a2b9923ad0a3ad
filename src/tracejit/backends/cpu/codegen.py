"""Generate source for one graph: Numba loop kernels plus a plain-Python runner.

Each loop kernel is a loop nest over its iteration shape (``emitter.py`` writes it: map,
rows or scatter), compiled as a C function ``void kernel(args)`` (see ``native.py``): its
inputs, outputs and scratch arrays arrive as a tuple of C-contiguous arrays, read through
pointers with static inner extents, so indexing compiles to constant strides and LLVM
vectorises the innermost loop; the outer extent is read at run time, so one compiled
kernel serves every batch size (each kernel is a module of its own, the same text for the
same computation). Inputs keep their own (unbroadcast) shapes and are indexed at the loop
axes the fusion pass gives them (``Kernel.axes``: NumPy's broadcasting). Reductions
accumulate into keepdims-shaped outputs the runner pre-fills with the identity. A large
kernel runs its outer loop on libgomp's threads, each taking a contiguous share. Library
steps call the op's NumPy implementation (BLAS for matmul). The runner is ordinary
Python so a user can read what runs; ``run`` is the single entry point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...config import config
from ...ir import Graph, Node, Value
from ...ir.ops import slice_key
from ...ir.random_ops import Owned, generator_of
from ...ir.registry import REGISTRY, Exactness, loop_dtypes, monoid_of
from ...passes.contract import SMALL_K, split_skinny_matmuls
from ...passes.fusion import LOOP_SCANS, Kernel, fuse
from ...profiler import StepInfo
from ..release import released
from . import fused_steps
from .emitter import _IMPORTS, PARALLEL_MIN_SIZE, LoopEmitter, Module
from .lib_lines import emit_planned
from .lib_steps import solved_vectors, unpacking
from .ops import FLOAT_TO_INT, NUMBA

LOOP_OPS = frozenset({"scan", "while_loop"})  # ops with a body graph (ir/loop_ops.py)


def fusible(node: Node, scalars: bool = False) -> bool:
    """Whether the CPU backend computes ``node`` in a loop kernel; otherwise it runs as a
    NumPy library step. Reductions and scans fuse when the Numba language computes their
    monoid's combining op (the registry's ``OpDef.monoid``; a scan's is its reduction's,
    ``fusion.LOOP_SCANS``), elementwise ops when it has a template
    for their loop dtypes. ``scalars``: 0-d arithmetic fuses too (in a loop body, where
    it runs once per step and the compiled loop needs every step to be a kernel)."""
    if not all(NUMBA.supports(v.type.dtype) for v in (*node.inputs, node.out)):
        return False
    monoid = REGISTRY[node.op].monoid
    if node.out.type.ndim == 0 and monoid is None and not scalars:
        return False  # scalar arithmetic: NumPy takes a microsecond, a compile 0.2 s
    if node.op == "matmul":
        a, b = (v.type for v in node.inputs)
        return (a.ndim == b.ndim == 2 and a.shape[1] <= SMALL_K and node.out.type.dtype.kind == "f"
                and a.dtype == b.dtype == node.out.type.dtype)
    if node.op in LOOP_SCANS:  # along the last axis only (``fusion._loop_shape``)
        monoid = monoid_of(LOOP_SCANS[node.op])
    if monoid is not None:  # the input is cast to the output dtype per element
        out = node.out.type.dtype
        return NUMBA.template(monoid.combine, (out, out)) is not None
    if node.op == "convert":  # float -> int: only where the language spells out NumPy's
        return node.inputs[0].type.dtype.kind != "f" or node.out.type.dtype.kind not in "iu" \
            or node.out.type.dtype in FLOAT_TO_INT
    dts = loop_dtypes(node)
    return (dts is not None and all(NUMBA.supports(d) for d in dts)
            and NUMBA.template(node.op, dts[:-1]) is not None)


@dataclass
class Generated:
    """``kernels``: one Numba module per loop kernel, each defining the cfunc ``kernel``
    and nothing of the graph (so equal kernels are compiled once, in the process and on
    disk); ``runner``: the Python module defining ``run``, executed with ``namespace`` plus
    the compiled kernels bound to the names ``kernel_names``; ``notes``: per kernel, a
    comment saying where it comes from, for ``source`` (which shows everything)."""

    kernels: list[str]
    runner: str
    namespace: dict
    kernel_names: list[str]
    title: str
    notes: list[str]
    loops: list = field(default_factory=list)  # the CompiledLoop of each loop step
    # per kernel, a call making its prebuilt program or None (``prebuilt.program``)
    programs: list = field(default_factory=list)

    @property
    def source(self) -> str:
        parts = [self.title]
        for note, text in zip(self.notes, self.kernels, strict=True):
            parts += [note, text]
        return "\n".join([*parts, self.runner, *(loop.source for loop in self.loops)])


def partition(graph: Graph, later: bool = False,
              in_loop: bool = False) -> tuple[Graph, list[Kernel]]:
    """The steps ``graph`` runs as, in order: the graph after this generator's own rewrite
    (skinny matmuls split into products) and one fusion ``Kernel`` per loop kernel or
    library call (``check=True`` runs them one at a time). ``later``: the steps of the
    runner compiled after the first (see ``worth_compiling``). ``in_loop``: a loop's
    body graph (``loops.py``), run once per step: every loop kernel is worth compiling there,
    0-d arithmetic included. (The package gives the later runner's generator the graph
    with its long runs of small steps wrapped: ``loops_straight.py``.)"""
    graph = split_skinny_matmuls(graph)
    if in_loop:
        return graph, fuse(graph, lambda n: fusible(n, scalars=True))
    kernels = fuse(graph, fusible)
    numpy_calls: set[Node] = set()
    while True:  # (a few rounds at most: each one takes nodes out of the kernels)
        unworthy = [k for k in kernels if k.kind == "loop" and not worth_compiling(k, later)]
        # Small kernels leave first: ``(x * 2) / v.sum()`` with a small ``v`` is split
        # in two around the sum's kernel, and the halves join once the sum is NumPy's
        small = [k for k in unworthy if math.prod(k.shape) < config.min_kernel_size]
        more = {n for k in small or unworthy for n in _left_to_numpy(k, later)}
        if not more:
            return graph, kernels
        numpy_calls |= more  # fuse again without them: they become library steps
        kernels = fuse(graph, lambda n, left=frozenset(numpy_calls): n not in left and fusible(n))


def _left_to_numpy(kern: Kernel, later: bool) -> list[Node]:
    """The nodes of a loop kernel not worth compiling that run as NumPy calls: all of
    them, except for the ``later`` runner its exactly rounded ones beside others (a
    ``sin`` after three ``multiply, add``): those may still make a kernel of their own,
    which gives NumPy's bits and saves a NumPy call per op."""
    if not later:
        return kern.nodes
    inexact = [n for n in kern.nodes if not exactly_rounded(n)]
    return inexact or kern.nodes


def worth_compiling(kern: Kernel, later: bool = False) -> bool:
    """Whether loop kernel ``kern`` saves more than its compile (~0.1-0.3 s) costs. Not a
    lone exactly rounded elementwise op (an ``add``: NumPy's loop is as fast), nor a kernel
    over fewer than ``config.min_kernel_size`` elements (NumPy takes about a microsecond
    per op there), unless ``later``: once the function runs, such a kernel is compiled
    after all where it computes NumPy's bits exactly (several exactly rounded ops, or
    one exact reduction over axes that are not one run: a ``max`` over axes (1, 3), a
    2x2 pooling, is NumPy's iterator over pairs, ten times the loop's time; no float
    sum), saving a microsecond per op on
    every later call without making anyone wait. Nor, for the first runner, a lone exact
    reduction (a ``max``, an integer ``sum``) too small to run on threads: one NumPy call
    either way (at most ~0.5 ms here, NumPy's strided loop over a narrow first axis), it
    is not worth delaying the first compiled calls by its compile (50-80 ms), and the later
    runner's kernel gives the same bits. So is a float sum over a matrix's rows
    (``column_reduction``: a gradient's bias term), which both add in one order; any
    other lone float ``sum`` is compiled at once: a later kernel adding in another order
    than NumPy's would change the answers between calls. ``min_kernel_size = 0`` compiles
    every kernel."""
    if config.min_kernel_size == 0:
        return True
    (first, *rest) = kern.nodes
    if (not rest and exactly_rounded(first) and REGISTRY[first.op].monoid is None
            and first.op not in LOOP_SCANS):
        return False
    if (not (rest or later) and REGISTRY[first.op].monoid is not None
            and (exactly_rounded(first) or column_reduction(first))
            and math.prod(kern.shape) < PARALLEL_MIN_SIZE):
        return False  # a lone exact reduction run by one thread
    if math.prod(kern.shape) >= config.min_kernel_size:
        return True
    return later and (bool(rest) or _pooling(first)) and all(map(exactly_rounded, kern.nodes))


def _pooling(node: Node) -> bool:
    """Whether ``node`` is a reduction over axes that are not one run (``axis=(1, 3)``:
    a pooling), which NumPy's iterator does a pair of elements at a time."""
    axes = node.attrs.get("axis") if REGISTRY[node.op].monoid is not None else None
    if not isinstance(axes, tuple | list):
        return False
    ndim = node.inputs[0].type.ndim
    axes = sorted(a % ndim for a in axes)
    return bool(axes) and axes != list(range(axes[0], axes[-1] + 1))


def improves_later(graph: Graph) -> bool:
    """Whether ``partition(graph, later=True)`` compiles kernels the first runner of
    ``graph`` runs as NumPy calls."""
    if config.min_kernel_size == 0:
        return False
    compiled = [{n for k in partition(graph, later)[1] if k.kind == "loop" for n in k.nodes}
                for later in (False, True)]
    return bool(compiled[1] - compiled[0]) or any(_correlate_kernel(n, True) for n in graph.nodes)


_NAN_CHOICE = frozenset({"fmax", "fmin", "remainder"})
_IN_ORDER = {"sum": "add", "prod": "multiply"}  # (their ufuncs)


def column_reduction(node: Node) -> bool:
    """A float ``sum`` or ``prod`` over the first axis of a C-contiguous matrix of two
    columns or more, too small for threads, which a kernel and NumPy fold in one order:
    the kernel row after row into each column's accumulator (a serial scatter loop), and
    NumPy's reduction, whose inner loop then runs along the columns, likewise (its
    pairwise summation applies only along a contiguous reduced axis: one column, or a
    Fortran-ordered matrix; measured bit for bit over 1-65536 rows, 2-4096 columns). The
    runner's NumPy call reads the matrix C-contiguous (``_inline_call``), as the kernel
    does, so the two agree whatever the argument's layout."""
    x = node.inputs[0].type if node.inputs else None
    return (node.op in _IN_ORDER and x is not None and x.ndim == 2 and x.shape[1] >= 2
            and x.dtype in (np.float32, np.float64) and node.out.type.dtype == x.dtype
            and tuple(node.attrs["axis"] or ()) == (0,) and math.prod(x.shape) < PARALLEL_MIN_SIZE)


def exactly_rounded(node: Node) -> bool:
    """Computed bit for bit as NumPy does: an exactly rounded op that is no reduction
    whose order a kernel chooses (``max`` is exact, a float ``sum`` is not; an integer or
    bool sum or product is: wrapping integer arithmetic gives one result in any order).
    Nor a float ``fmax``/``fmin``: NumPy's own answer to a tie of 0.0 and -0.0, or of two
    NaNs, depends on its loop (SIMD body, scalar tail, array length: measured); nor a
    float ``remainder``, whose NaN of two NaNs is the x87 ``fprem``'s choice (the larger
    payload, else the positive one), not the kernel's. A scan is: NumPy's accumulate and
    the kernel both fold element after element, from the first."""
    if node.op in _NAN_CHOICE and node.out.type.dtype.kind == "f":
        return False
    if node.op in LOOP_SCANS:
        return True  # the kernel folds in NumPy's order, element after element
    exactness = REGISTRY[node.op].exactness
    return exactness == Exactness.EXACT or (
        exactness == Exactness.ORDER and REGISTRY[node.op].monoid is not None
        and node.out.type.dtype.kind in "biu")


def generate(graph: Graph, profile: bool = False, later: bool = False,
             in_loop: bool = False, loop_step: Callable | None = None) -> Generated:
    """The generated code (of the ``later`` runner, or of a loop body, ``in_loop``: see
    ``partition``). With ``profile`` the runner times every step and calls
    ``record(step, start, seconds)``; ``namespace["steps"]`` describes the steps. A loop node's
    step calls ``loop_step(loop)`` (its body compiled by this backend: ``loops.py``,
    given by the package so that this module does not import it), or without one the
    registry's implementation (the body interpreted with NumPy)."""
    graph, kernels = partition(graph, later, in_loop)
    mod = Module(graph)
    in_place = _updates_in_place(graph, kernels)
    mod.views, kernels = run_steps(graph, kernels)
    columns = solved_vectors(graph, kernels)
    products, kernels = _vector_products(graph, kernels, columns)
    into = {} if in_loop else _destinations(graph, kernels)
    mod.destinations = {graph.outputs[j]: f"o{j}" for j in into}
    loop_inputs = {mod.views[v].inputs[0] if v in mod.views else v
                   for k in kernels if k.kind == "loop" for v in k.inputs if v.type.ndim}
    plan = unpacking(graph, kernels, mod.consts, columns, set(products))
    for v, x in plan.aliases.items():
        mod.names[v] = mod.name(x)
    kernels = [k for k in kernels if k.kind != "library" or k.nodes[0] not in plan.dropped]
    body: list[str] = []
    for v in graph.inputs:  # the kernels read C-contiguous arrays of the signature's dtype
        if v in loop_inputs:  # (the dtype too: a byte-swapped '>i4' argument is int32)
            name = mod.names[v]
            body.append(f"{name} = np.ascontiguousarray({name}, {NUMBA.dtype_name(v.type.dtype)})")
    for k, kern in enumerate(kernels):
        where = kern.nodes[0].loc.short if kern.nodes[0].loc else "?"
        start = len(body)
        if kern.kind == "loop":
            LoopEmitter(mod, k, kern, where).emit(body)
        elif _correlate_kernel(kern.nodes[0], later or in_loop):
            _emit_correlate(mod, k, kern.nodes[0], body, where)
        elif kern.nodes[0] in products:
            _emit_vector_product(mod, k, kern.nodes[0], products[kern.nodes[0]], body, where,
                                 loop_inputs)
        else:
            node = kern.nodes[0]
            if not emit_planned(mod, k, node, plan, body, where, loop_inputs):
                _emit_library(mod, k, node, body, where, node.out in loop_inputs,
                              node in in_place, loop_step)
        if profile:
            body.insert(start, "t_start = clock()")
            body.append(f"record({k}, t_start, clock() - t_start)")
    args = ", ".join([*(mod.names[v] for v in graph.inputs), *(["*"] if into else []),
                      *(f"o{j}=None" for j in into)])
    mod.namespace["destinations"] = into
    outs = ", ".join(mod.name(v) for v in graph.outputs)
    sizes = {name: _nbytes(v) for v, name in mod.names.items()}
    body = released(body, sizes, {mod.name(v) for v in graph.outputs})
    runner = ["# runner: plain Python, calling the kernels above (as kernel<step>), C functions",
              f"def run({args}):", "    step = -1", "    try:"]
    runner += [f"        {line}" for line in body or ["pass  # nothing to compute"]]
    runner += [
        "    except (IndexError, ValueError, OverflowError, ZeroDivisionError) as e:",
        "        raise located(e, step) from None",
        f"    return [{outs}]",
    ]
    mod.namespace["locations"] = [k.nodes[0].loc for k in kernels]
    mod.namespace["steps"] = [
        StepInfo(f"{'kernel' if k.kind == 'loop' else 'lib'}{i}", ", ".join(n.op for n in k.nodes),
                 k.nodes[0].loc, sum(_nbytes(v) for v in k.inputs + k.outputs))
        for i, k in enumerate(kernels)
    ]
    loops = [mod.namespace[f"lib{i}"] for i, k in enumerate(kernels)
             if k.kind == "library" and k.nodes[0].op in LOOP_OPS] if loop_step else []
    return Generated(mod.kernels, "\n".join(runner) + "\n", mod.namespace, mod.kernel_names,
                     f"# tracejit CPU backend: {graph.name}\n", mod.notes, loops,
                     mod.programs)


def run_steps(graph: Graph, kernels: list[Kernel]) -> tuple[dict[Value, Node], list[Kernel]]:
    """The slices that loop kernels read in their base (``_kernel_views``) and the
    kernels the runner runs, in order: ``kernels`` less those slices' library steps."""
    views = _kernel_views(graph, kernels)
    return views, [k for k in kernels if not (k.kind == "library" and k.nodes[0].out in views)]


def _kernel_views(graph: Graph, kernels: list[Kernel]) -> dict[Value, Node]:
    """The slices only loop kernels read, elementwise: those kernels index the slice's
    base instead (``a[1:-1, 2:]`` is ``a[1 + i0, 2 + i1]``), so no step copies the region
    out first (a stencil reads four shifted slices of one array)."""
    readers: dict[Value, list] = {}
    for kern in kernels:
        for node in kern.nodes:
            for v in node.inputs:
                readers.setdefault(v, []).append((kern, node))
    outputs = set(graph.outputs)
    return {k.nodes[0].out: k.nodes[0] for k in kernels
            if k.kind == "library" and k.nodes[0].op == "slice"
            and k.nodes[0].out not in outputs and k.nodes[0].out in readers
            and all(r.kind == "loop" and n.op != "matmul" for r, n in readers[k.nodes[0].out])}


def _vector_products(graph: Graph, kernels: list[Kernel], columns: dict[Value, Value]
                     ) -> tuple[dict[Node, tuple[Value, Value, Value]], list[Kernel]]:
    """The matrix-vector products the trace spells in 2-D (``A @ y`` on a 1-D ``y`` is
    ``reshape(y, (n, 1))``, a matmul and a reshape of its ``(m, 1)`` result back to
    ``(m,)``; ``y @ A`` likewise with ``(1, n)``), each run as one ``np.matmul`` on the 1-D
    operand: NumPy's own call for what the user wrote, less two reshape steps (a fifth of a
    microsecond each). Per such matmul step, its operands and the value it then computes
    (the final reshape's); and the steps left to run (those reshapes dropped). Only where
    the 2-D values are read by nothing else (a reshape of the operand read elsewhere stays).
    ``columns``: solves' results that are a vector's column (``lib_steps``), by the vector."""
    producers = graph.producers()
    readers: dict[Value, list[Node]] = {}
    for node in graph.nodes:
        for v in node.inputs:
            readers.setdefault(v, []).append(node)
    library = {k.nodes[0] for k in kernels if k.kind == "library"}
    outputs = set(graph.outputs)

    def only_reader(v: Value) -> Node | None:
        r = readers.get(v, [])
        return r[0] if len(r) == 1 and v not in outputs and r[0] in library else None

    def vector(v: Value) -> tuple[Value, Node | None] | None:  # the 1-D value v reshapes
        node = producers.get(v)  # (and the step doing it; None for a solve's column)
        if v in columns:
            return columns[v], None
        return (node.inputs[0], node) if (node is not None and node in library and node.op ==
                                          "reshape" and node.inputs[0].type.ndim == 1) else None

    products: dict[Node, tuple[Value, Value, Value]] = {}
    dropped: set[Node] = set()
    for node in library:
        if node.op != "matmul" or node.out.type.ndim != 2:
            continue
        (a, b), (m, p) = node.inputs, node.out.type.shape
        back = only_reader(node.out)
        if back is None or back.op != "reshape" or back.out.type.ndim != 1:
            continue
        va, vb = vector(a), vector(b)
        if vb is not None and va is None and p == 1 and a.type.ndim == 2:  # A @ y
            vec, operands = vb[1], (a, vb[0])
        elif va is not None and vb is None and m == 1 and b.type.ndim == 2:  # y @ A
            vec, operands = va[1], (va[0], b)
        else:
            continue
        products[node] = (*operands, back.out)
        dropped.add(back)
        if vec is not None and only_reader(vec.out) is node:
            dropped.add(vec)
    return products, [k for k in kernels if not (k.kind == "library" and k.nodes[0] in dropped)]


def _emit_vector_product(mod: Module, k: int, node: Node, product: tuple[Value, Value, Value],
                         body: list[str], where: str, loop_inputs: set[Value]) -> None:
    a, b, out = product
    mod.namespace[f"lib{k}"] = np.matmul
    call = _blas_product(mod, a, b, out) or f"lib{k}({mod.name(a)}, {mod.name(b)})"
    if out in loop_inputs and not a.type.dtype == b.type.dtype == out.type.dtype:
        # (NumPy's product of two arrays of one dtype is a new C-contiguous array of it)
        call = f"operand({call}, {NUMBA.dtype_name(out.type.dtype)}, {out.type.shape})"
    body.append(f"step = {k}; {mod.name(out)} = {call}  # matmul of a vector, {where}")


def _destinations(graph: Graph, kernels: list[Kernel]) -> dict[int, frozenset[int]]:
    """Per graph output position, the arguments whose memory the runner may compute that
    output in (its keyword ``o<position>``, None by default: a new array), so that a
    function writing a whole argument (``x += A @ y``, ``np.add(a, b, out=out)``) stores
    no temporary back: ``jit`` passes the caller's array there when the write-back path
    finds it a C-contiguous, aligned, native array sharing no memory with the other
    arguments (``api._Writes``). Offered for the last position of an output that a
    loop kernel computes (no reduction, over the output's own shape) or a ufunc library
    step does (``out=``), where the argument, and every view of it, is read by no later
    step, by no step whose result might be its memory, and by that step only element for
    element, before the output is stored (a kernel reads ``x[i]`` in the nodes up to the
    output's, which it stores as ``o[i]`` at once; NumPy's ufuncs allow an input that is
    exactly the output), and is no graph output."""
    step = {n: i for i, k in enumerate(kernels) for n in k.nodes}  # (a view is no step)
    readers: dict[Value, list[Node]] = {}
    for node in graph.nodes:
        for v in node.inputs:
            readers.setdefault(v, []).append(node)
    outputs = set(graph.outputs)

    def computes(k: int, v: Value) -> bool:
        kern, node = kernels[k], kernels[k].nodes[0]
        if kern.kind == "loop":
            return not kern.reductions and kern.shape == v.type.shape and kern.rows is None
        return (isinstance(REGISTRY[node.op].impl, np.ufunc) and REGISTRY[node.op].impl.nout == 1
                and not node.attrs and node.op not in _IN_PLACE)

    def fresh(k: int) -> bool:  # a step whose results are new arrays, never its inputs
        kern, node = kernels[k], kernels[k].nodes[0]
        return kern.kind == "loop" or node.op in _FRESH or node.op in _REDUCE or (
            isinstance(REGISTRY[node.op].impl, np.ufunc))

    def writable(x: Value, k: int, v: Value) -> bool:
        kern, seen, todo = kernels[k], set(), [x]
        # (a kernel stores each output's element as soon as it is computed: the nodes
        # reading x come no later than v's)
        last = next((j for j, n in enumerate(kern.nodes) if n.out is v), 0)
        while todo:
            val = todo.pop()
            if val in outputs or val in seen:
                return False
            seen.add(val)
            for r in readers.get(val, ()):
                if r.op in VIEW_OPS:
                    todo.append(r.out)
                    continue
                at = step.get(r)
                if at is None or at > k or (at < k and not fresh(at)):
                    return False
                if at == k and (val is not x or (
                        kern.axes.get(x) != tuple(range(x.type.ndim)) or kern.nodes.index(r) > last
                        if kern.kind == "loop" else x.type.shape != v.type.shape)):
                    return False
        return True

    # (a step after the argument's new value is stored must not raise: NumPy would leave
    # the argument as it was where the write comes after the raising statement)
    quiet = len(kernels)
    while quiet and (kernels[quiet - 1].kind == "loop" or kernels[quiet - 1].nodes[0].op
                     in VIEW_OPS):
        quiet -= 1
    producing = {v: i for i, k in enumerate(kernels) for v in (k.outputs if k.kind == "loop"
                                                                else [k.nodes[0].out])}
    last = {v: j for j, v in enumerate(graph.outputs)}
    into: dict[int, frozenset[int]] = {}
    for v, j in last.items():
        k = producing.get(v)
        if k is None or k + 1 < quiet or not v.type.ndim or not computes(k, v):
            continue
        args = frozenset(i for i, x in enumerate(graph.inputs)
                         if x.type == v.type and writable(x, k, v))
        if args:
            into[j] = args
    return into


def _update_slice_in_place(x, updates, *, starts, stops, steps):
    x[slice_key(starts, stops, steps)] = updates
    return x


def _scatter_in_place(x, updates, *idx, axis):
    x[(slice(None),) * axis + idx] = updates
    return x


# Functional updates done in their base's memory (see _updates_in_place).
_IN_PLACE = {"update_slice": _update_slice_in_place, "scatter": _scatter_in_place}
VIEW_OPS = frozenset({"slice", "reshape", "transpose", "broadcast_to"})  # NumPy views
# Steps whose result is a new array of the runner's own (never a view of another value).
_FRESH = frozenset({"update_slice", "scatter", "scatter_add", "full", "concatenate", "pad",
                    "gather", "matmul", "cumsum", "cumprod"})


def _updates_in_place(graph: Graph, kernels: list[Kernel]) -> set[Node]:
    """The update steps that may write into their base instead of a copy of it: a base
    the runner made itself (a kernel's output or a fresh library result: not an
    argument, a constant or a view of one) that the graph does not return and that every
    other step reading it, or a view of it, has read by then. A loop of writes into a
    buffer (``dp[i] = dp[i - 1] + x[i]``) then copies nothing."""
    step = {n: i for i, k in enumerate(kernels) for n in k.nodes}
    readers: dict[Value, list[Node]] = {}
    for node in graph.nodes:
        for v in node.inputs:
            readers.setdefault(v, []).append(node)
    made = {v for k in kernels if k.kind == "loop" for v in k.outputs}
    made |= {k.nodes[0].out for k in kernels
             if k.kind == "library" and k.nodes[0].op in _FRESH}
    outputs = set(graph.outputs)

    def read_before(v: Value, update: Node) -> bool:
        if v in outputs:
            return False
        for r in readers.get(v, ()):
            if r is update:  # (NumPy's item assignment copes with overlap)
                continue
            if r in step and step[r] >= step[update]:
                return False
            if r.op in VIEW_OPS and not read_before(r.out, update):
                return False
        return True

    return {k.nodes[0] for k in kernels if k.kind == "library" and k.nodes[0].op in _IN_PLACE
            and k.nodes[0].inputs[0] in made and read_before(k.nodes[0].inputs[0], k.nodes[0])}


# Reductions a library step runs as their ufunc's ``reduce`` (what numpy.sum and the others
# call, less their Python wrapper's microsecond), keyed by op: whether it takes a dtype.
_REDUCE = {"sum": (np.add, True), "prod": (np.multiply, True), "max": (np.maximum, False),
           "min": (np.minimum, False)}


def _inline_call(mod: Module, k: int, node: Node, in_place: bool, body: list[str]) -> str | None:
    """The expression computing library step ``node`` where NumPy's own method or ufunc
    does it without the registry implementation's wrappers (a structural step on a few
    hundred elements is a tenth of a microsecond, its wrappers a microsecond or two), or
    None. Only where the operand is an ndarray for sure (of one dimension or more: a 0-d
    value may be a Python scalar); an update stores on a line of its own in ``body`` (in a
    copy unless ``in_place``) and the expression is its result."""
    if node.op == "random":
        return _draw_call(mod, k, node)
    if node.op == "loop_output":  # (the registry's implementation, less its keywords)
        return f"{mod.name(node.inputs[0])}[{node.attrs['index']!r}]"
    if node.op == "full" and set(node.attrs) == {"shape", "dtype", "value"}:
        mod.namespace[f"attrs{k}"] = tuple(node.attrs[a] for a in ("shape", "value", "dtype"))
        return f"np.full(*attrs{k})"  # (the registry's lambda, less its frame)
    x = node.inputs[0] if node.inputs else None
    if x is None:
        return None
    name, attrs = mod.name(x), node.attrs
    names = ", ".join(mod.name(v) for v in node.inputs)  # (the registry's lambdas, less
    if node.op == "correlate" and set(attrs) == {"mode"}:  # their frames and keywords)
        return f"np.correlate({names}, {attrs['mode']!r})"
    if node.op == "concatenate":
        return f"np.concatenate(({names},), axis={attrs['axis']!r})"
    if node.op == "convert":  # (the registry's implementation, spelt out)
        mod.namespace[f"dtype{k}"] = attrs["dtype"]
        return f"{name}.astype(dtype{k})" if x.type.ndim else \
            f"np.asarray({name}).astype(dtype{k})"
    if node.op == "slogdet" and x.type.ndim == 2:  # the registry packs with two reshapes
        return f"np.array(np.linalg.slogdet({name}))"  # (4 us): [sign, logabsdet] as one
    if node.op == "matmul":
        return _blas_product(mod, *node.inputs, node.out, mod.destinations.get(node.out))
    if x.type.ndim == 0:
        if node.op == "reshape":  # a 0-d value may be a Python scalar: no method
            return f"np.asarray({name}).reshape({tuple(attrs['shape'])!r})"
        return None
    if column_reduction(node):  # (the order of the later runner's kernel)
        return (f"np.{_IN_ORDER[node.op]}.reduce(np.ascontiguousarray({name}), axis=0, "
                f"keepdims={attrs['keepdims']!r})")
    if node.op in ("eigh", "svd") and x.type.ndim == 2:
        single = _single_part(node)  # (its one part is the packed result: no packing)
        if single is not None:
            return single.format(x=name)
    if node.op == "pad" and _pad_fill(node) is not None:
        return _pad_call(mod, k, node, body)
    if node.op == "slice":
        mod.namespace[f"key{k}"] = slice_key(**attrs)
        return f"{name}[key{k}]"
    if node.op == "reshape":
        return f"{name}.reshape({tuple(attrs['shape'])!r})"
    if node.op in ("cumsum", "cumprod") and set(attrs) == {"axis", "dtype"}:
        mod.namespace[f"dtype{k}"] = attrs["dtype"]  # (the ndarray method numpy.cumsum
        axis = None if attrs["axis"] is None else int(attrs["axis"])  # calls, positional)
        return f"{name}.{node.op}({axis!r}, dtype{k})"
    if node.op == "transpose":  # (``.T`` reverses the axes without parsing a tuple)
        perm = tuple(attrs["perm"])
        return f"{name}.T" if perm == tuple(reversed(range(len(perm)))) else \
            f"{name}.transpose({perm!r})"
    if node.op in _REDUCE and set(attrs) <= {"axis", "keepdims", "dtype"}:
        ufunc, with_dtype = _REDUCE[node.op]
        mod.namespace[f"reduce{k}"] = ufunc.reduce  # (positional: keywords cost 0.5 us)
        args = [name, _axis_literal(attrs.get("axis"))]
        if with_dtype and attrs.get("dtype") is not None:
            mod.namespace[f"dtype{k}"] = attrs["dtype"]
            args.append(f"dtype{k}")
        if attrs.get("keepdims"):
            args.append("keepdims=True")
        return f"reduce{k}({', '.join(args)})"
    if node.op in ("argmax", "argmin") and set(attrs) == {"axis", "keepdims"}:
        keep = ", keepdims=True" if attrs["keepdims"] else ""  # (numpy.argmax's method)
        return f"{name}.{node.op}({_axis_literal(attrs['axis'])}{keep})"
    if node.op == "update_slice":
        mod.namespace[f"key{k}"] = slice_key(**attrs)
        out = name if in_place else mod.name(node.out)
        if not in_place:
            body.append(f"step = {k}; {out} = np.array({name}, copy=True)  # a copy to update")
        body.append(f"step = {k}; {out}[key{k}] = {mod.name(node.inputs[1])}")
        return out
    return None


def _pad_call(mod: Module, k: int, node: Node, body: list[str]) -> str:
    """Pad ``node`` as a fill and a store of the operand (np.pad's Python takes 10 us)."""
    x, out = node.inputs[0], mod.name(node.out)
    mod.namespace[f"fill{k}"] = _pad_fill(node)
    mod.namespace[f"key{k}"] = tuple(slice(a, a + d) for (a, _), d in
                                     zip(node.attrs["widths"], x.type.shape, strict=True))
    body.append(f"step = {k}; {out} = np.full({node.out.type.shape!r}, fill{k})"
                "  # pad: the fill, then the operand")
    body.append(f"step = {k}; {out}[key{k}] = {mod.name(x)}")
    return out


def _blas_product(mod: Module, a: Value, b: Value, out: Value,
                  into: str | None = None) -> str | None:
    """The expression for ``a @ b`` of float32 or float64 matrices and vectors of one
    dtype, not two vectors: ``np.dot`` where both operands are contiguous (C or Fortran
    order) and aligned, else ``np.matmul``. For such operands both calls are the same BLAS
    call (gemm, gemv, or syrk for ``A @ A.T``), bit for bit, and ``np.dot`` reaches it
    without the ufunc machinery: 0.25-0.3 us less on small products (a 24x24 matrix and a
    vector: 0.49 us against 0.74 us). A strided operand is matmul's own loop, where
    ``np.dot`` would copy and call BLAS: other bits, so matmul's. ``into``: the caller's
    array the result may be computed in (matmul's ``out=``). None where it does not
    apply."""
    if (not {a.type.ndim, b.type.ndim} <= {1, 2} or a.type.ndim == b.type.ndim == 1
            or not a.type.dtype == b.type.dtype == out.type.dtype
            or out.type.dtype not in (np.float32, np.float64)):
        return None
    x, y = mod.name(a), mod.name(b)
    # (``flags.carray``: C-contiguous, aligned and writeable; ``flags.farray`` is no
    # Fortran-order test: it holds for any such array that is not C-contiguous)
    blas = " and ".join(f"{n}.flags.carray" if v.type.ndim == 1 else
                        f"({n}.flags.carray or {n}.flags.f_contiguous and {n}.flags.aligned)"
                        for v, n in ((a, x), (b, y)))
    product = f"np.dot({x}, {y}) if {blas} else np.matmul({x}, {y})"
    return product if into is None else \
        f"({product}) if {into} is None else np.matmul({x}, {y}, out={into})"


def _correlate_kernel(node: Node, later: bool) -> bool:
    """Whether correlation ``node`` runs as a compiled kernel of its own (the fused
    driver's loop, ``fused_steps.correlate_loops``) rather than ``np.correlate``: in the
    later runner (or where every kernel compiles), one the loop computes bit for bit as
    NumPy does (``fused_steps._exact_correlate``) whose result is under the size where
    kernels share the work among threads. There NumPy's call (a microsecond) costs more
    than the whole loop, which vectorises over the outputs; a larger one is NumPy's,
    single-threaded either way."""
    return (node.op == "correlate" and (later or config.min_kernel_size == 0)
            and fused_steps.supported(node) and node.out.type.size < PARALLEL_MIN_SIZE)


def _emit_correlate(mod: Module, k: int, node: Node, body: list[str], where: str) -> None:
    """Correlation ``node`` as kernel ``k``: its operands (C-contiguous, the longer
    first) and its fresh result in the argument tuple."""
    T = NUMBA.dtype_name(node.out.type.dtype)
    src = [*_IMPORTS, "from tracejit.backends.cpu.loop_abi import at", "", "",
           "@cfunc(types.void(types.int64), error_model='numpy')", "def kernel(args):",
           f"    s = at(args, 0, {T}, 0)", f"    k = at(args, 1, {T}, 0)",
           f"    d = at(args, 2, {T}, 0)", *fused_steps.correlate_loops(node)]
    mod.kernels.append("\n".join(src) + "\n")
    mod.kernel_names.append(f"kernel{k}")
    mod.notes.append(f"# kernel{k} ({where}), compiled as `kernel` from:")
    out = mod.name(node.out)
    ops = ", ".join(f"np.ascontiguousarray({mod.name(v)}, {T})"
                    for v in fused_steps.correlate_operands(node))
    body.append(f"step = {k}; {out} = {mod.empty(node.out.type.shape, node.out.type.dtype)}")
    body.append(f"step = {k}; args = ({ops}, {out}); kernel{k}(id(args))  # correlate, {where}")


def _draw_call(mod: Module, k: int, node: Node) -> str | None:
    """A draw of constant arguments from NumPy's global RandomState or a generator the
    function owns (not one it restarts from its seed on every call) as the generator's
    bound method called directly: the registry's ``_draw`` finds the generator and the
    arguments anew on every call (a microsecond or two beside a draw of a few hundred
    numbers). Only an array result (a method called without a size returns a scalar)."""
    attrs = node.attrs
    source = attrs["source"]
    if node.inputs or node.out.type.ndim == 0 or not (source == "global"
                                                      or isinstance(source, Owned)):
        return None
    gen, _ = generator_of(source, ())
    mod.namespace[f"draw{k}"] = getattr(gen, attrs["method"])
    mod.namespace[f"params{k}"] = tuple(attrs["args"])
    if not attrs["kwargs"]:  # (an empty ``**`` still costs a dict)
        return f"draw{k}(*params{k})"
    mod.namespace[f"attrs{k}"] = dict(attrs["kwargs"])
    return f"draw{k}(*params{k}, **attrs{k})"


def _axis_literal(axis) -> str:
    """A reduction's axes as its call's literal: one axis as an int (NumPy parses a tuple
    more slowly, and reduces over it alike)."""
    if isinstance(axis, (tuple, list)):
        return repr(int(axis[0])) if len(axis) == 1 else repr(tuple(int(a) for a in axis))
    return repr(None if axis is None else int(axis))


def _single_part(node: Node) -> str | None:
    """The NumPy call computing a 2-d eigh or svd whose only part is its values."""
    if node.op == "eigh" and not node.attrs["vectors"]:
        return "np.linalg.eigvalsh({x}, UPLO=" + repr(node.attrs["UPLO"]) + ")"
    if node.op == "svd" and not node.attrs["compute_uv"]:
        return "np.linalg.svd({x}, compute_uv=False)"
    return None


def _pad_fill(node: Node) -> np.generic | None:
    """The value ``np.pad`` fills pad step ``node``'s border with, as a scalar of its
    dtype, or None where taking it from a padded element could differ (it raises)."""
    dtype = node.out.type.dtype
    try:
        return np.pad(np.zeros(1, dtype), 1, constant_values=node.attrs["value"])[0]
    except (TypeError, ValueError, OverflowError):
        return None


def _fresh_result(node: Node) -> bool:
    """Whether library step ``node`` returns a new C-contiguous array of its IR type for
    sure: a matmul of two 1-d or 2-d arrays of its result's dtype, or an array drawn by a
    float64 method that takes no dtype (``randn``, ``normal``)."""
    if node.op == "random":
        return (node.attrs["method"] in _FLOAT_DRAWS and node.out.type.ndim > 0
                and node.out.type.dtype == np.float64)
    return node.op == "matmul" and all(
        v.type.ndim in (1, 2) and v.type.dtype == node.out.type.dtype for v in node.inputs)


_FLOAT_DRAWS = frozenset({"randn", "rand", "random_sample", "normal", "uniform", "exponential",
                          "lognormal", "laplace"})


def _nbytes(v: Value) -> int:
    return v.type.size * v.type.dtype.itemsize


def _emit_library(mod: Module, k: int, node: Node, body: list[str], where: str,
                  kernel_input: bool, in_place: bool = False,
                  loop_step: Callable | None = None) -> None:
    fn = f"lib{k}"
    impl = _IN_PLACE[node.op] if in_place else REGISTRY[node.op].impl
    compiled = loop_step is not None and node.op in LOOP_OPS
    args = [mod.name(v) for v in node.inputs]
    call = None if compiled else _inline_call(mod, k, node, in_place, body)
    if compiled:  # its body compiled by this backend, run by a driver
        mod.namespace[fn] = loop_step(node.attrs["loop"])
    elif call is None:  # called directly, its attributes as keywords: no wrapper's frame
        mod.namespace[fn] = impl
        if node.attrs:
            mod.namespace[f"attrs{k}"] = node.attrs
            args.append(f"**attrs{k}")
    if call is None:
        call = f"{fn}({', '.join(args)})"
        into = mod.destinations.get(node.out)
        if into is not None:  # (a ufunc; a keyword costs it a tenth of a microsecond)
            call = f"{call} if {into} is None else {fn}({', '.join(args)}, out={into})"
    out = node.out.type
    # kernels read C-contiguous arrays of exactly the IR's type (np.full makes one)
    if kernel_input and node.op != "full" and not _fresh_result(node):
        call = f"operand({call}, {NUMBA.dtype_name(out.dtype)}, {out.shape})"
    what = f"{node.op} in place" if in_place else \
        f"{node.op}, compiled (see below)" if compiled else node.op
    body.append(f"step = {k}; {mod.name(node.out)} = {call}  # {what}, {where}")
