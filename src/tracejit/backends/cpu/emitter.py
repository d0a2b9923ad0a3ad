"""Emit one loop kernel of the CPU backend as Numba source, plus the runner lines that
allocate its outputs and launch it.

A kernel takes one of four loop shapes, each a method of ``LoopEmitter``:

- *map* (no reductions): every dimension is an outer loop;
- *rows* (all reductions over the same trailing axes): outer loops over the leading
  dimensions, then one inner loop nest per phase (row softmax: max, sum of exp, output),
  accumulators in registers, a row reduction split over lanes of partial accumulators so
  that it vectorises;
- *scatter* (other reductions): one loop nest accumulating into keepdims-shaped arrays
  the runner pre-fills with the identity;
- *scan* (a ``cumsum``, ``cummax``, ... along the last axis): one loop nest, the last
  dimension in order, each scan's running value a local carried from one element to the
  next, as NumPy's accumulate folds; a reduction over trailing axes accumulates in a local
  too, any other into its keepdims array.

A kernel of at least ``PARALLEL_MIN_SIZE`` elements runs its first dimension on libgomp's
threads, each taking a contiguous share (a scan kernel only where its first dimension
is not the scanned one and no reduction reduces it). Two shapes need a work split for
that: a one-phase rows kernel reducing every axis (*full*) and a scatter kernel reducing
its first dimension (*blocked*) run that dimension in ``PARALLEL_BLOCKS`` blocks, each
reducing into its own partial result, which thread 0 combines after a barrier.

Each kernel is a module of its own defining one ``cfunc`` named ``kernel``, and nothing in
it depends on the graph, the step or the user's source lines: two kernels computing the
same thing on the same types have the same source, which is what the process and the disk
cache compile once. Its first dimension's extent is read at run time (``n0 = dim(args, j,
0)`` from an argument spanning it), so the same kernel serves every batch size; the inner
extents stay literals, for constant strides and vector loops.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from ...ir import Graph, Node, Value
from ...ir.registry import REGISTRY, loop_dtypes, monoid_of
from ...passes.fusion import LOOP_REDUCTIONS, LOOP_SCANS, Kernel, needed, phases
from ..language import Const, Operand
from . import prebuilt
from .ops import MATH, NUMBA

PARALLEL_MIN_SIZE = 1 << 17  # below this, a thread launch costs more than it saves
PARALLEL_BLOCKS = 16  # blocks of a reduced first dimension, each with partial results
RUNNER_COMBINE_MIN = 1 << 21  # a blocked kernel whose sums the runner combines (~0.25 ms+)
RUNNER_COMBINE_KEPT = 256  # ... and the elements such a sum keeps
LANE_BYTES = 64  # one AVX-512 register of partial accumulators per reduction
CHUNK = 512  # elements per chunk of a lane pass that also stores outputs (a multiple of lanes)

# Ops whose Numba expression already has the float type its operands share (Python's
# arithmetic, selections, abs, the math module's functions): computed in their output
# dtype, their result is written without a cast, which is Numba front-end work per
# statement (tests/test_kernel_source.py checks Numba's types against the IR's).
_FLOAT_CLOSED = {"add", "subtract", "multiply", "true_divide", "negative", "positive",
                 "square", "absolute", "fabs", "maximum", "minimum", "where", "matmul",
                 *(op for op in MATH if op not in ("power", "float_power"))}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

_IMPORTS = ["import numpy as np", "from numba import carray, types",  # carray: fused.py
            "from tracejit.backends.cpu.abi import U, arg, barrier, cfunc, dim, num_threads, "
            "stack, thread_id, value, view"]


class Module:
    """Accumulates the generated kernels, the runner, and the objects they refer to."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.kernels: list[str] = []  # the loop kernels' module sources, in step order
        self.kernel_names: list[str] = []  # the runner's names for them
        self.notes: list[str] = []  # per kernel, where it comes from (not compiled)
        # per kernel, a call making its prebuilt program (``prebuilt.program``), or None
        self.programs: list[Callable[[], prebuilt.Program | None] | None] = []
        self.namespace: dict = {"np": np}
        self.consts: dict[Value, object] = {
            n.out: n.attrs["value"] for n in graph.nodes if n.op == "constant"}
        self.names: dict[Value, str] = {}
        self.views: dict[Value, Node] = {}  # slices kernels read in their base (codegen)
        # outputs the runner may compute in a caller's array, by its keyword (codegen)
        self.destinations: dict[Value, str] = {}
        for i, v in enumerate(graph.inputs):
            self.names[v] = f"a{i}"
        for i, v in enumerate(self.consts):
            self.names[v] = f"c{i}"
            value = self.consts[v]
            if isinstance(value, np.ndarray) and value.ndim:  # kernels read C order
                value = np.ascontiguousarray(value)
            self.namespace[f"c{i}"] = value

    def name(self, v: Value) -> str:
        if v not in self.names:
            self.names[v] = f"t{len(self.names)}"
        return self.names[v]

    def empty(self, shape: tuple[int, ...] | str, dtype: np.dtype) -> str:
        """The runner's expression for a new array of ``shape`` and ``dtype``: ``np.empty``
        and the dtype bound in its namespace (100 ns; ``np.empty(shape, np.float64)`` looks
        up two attributes and converts a type to a dtype: 140 ns)."""
        dtype = np.dtype(dtype)
        self.namespace["empty"] = np.empty
        self.namespace[f"dtype_{dtype.name}"] = dtype
        return f"empty({shape}, dtype_{dtype.name})"


class LoopEmitter:
    """Emits one loop kernel ``kernel<k>`` into a ``Module``: its parameters, its loop
    nest, and the runner statements that allocate its outputs and launch it.

    The kernel's names for its arguments (``params``), the runner's expressions for them
    (``call``) and the statements reading them (``unpack``) grow together, in the order of
    the argument tuple: inputs, outputs, partial results. ``ref`` says how the kernel reads
    each value in its own IR dtype (an array element at the loop indices, a scalar
    parameter, a local variable ``v<n>``, or a ``Const`` the language writes as a literal);
    ``whole`` names the matmul operands, which the kernel reads whole. Every expression,
    literal, cast, identity and reduction fold is rendered by the Numba language."""

    def __init__(self, mod: Module, k: int, kern: Kernel, where: str):
        self.mod, self.k, self.kern, self.where = mod, k, kern, where
        self.shape = kern.shape or (1,)  # a 0-d kernel runs as one element
        self.nd = len(self.shape)
        self.math: set[str] = set()  # functions of backends/cpu/math.py the kernel calls
        self.outer: str = str(self.shape[0])  # the first extent: "n0" once read at run time
        self.big = math.prod(self.shape) >= PARALLEL_MIN_SIZE
        self.idx = ", ".join(f"i{d}" for d in range(self.nd))
        self.scatter = bool(kern.reductions) and not kern.rows
        self.params: list[str] = []
        self.call: list[str] = []
        self.unpack: list[str] = []
        self.pre: list[str] = []  # runner statements before the launch (allocations)
        self.post: list[str] = []  # runner statements after it (reshapes)
        self.ref: dict[Value, Operand] = {}
        self.whole: dict[Value, str] = {}
        self.phase = phases(kern)
        self.row_level = [n for n in kern.nodes if kern.is_row_level(n)]
        self.parallel = False  # set by the loop shape: whether threads share the work
        # a large scatter kernel's reductions over its first axis, and those of them whose
        # blocks the runner combines (``runner_combines``)
        self.blocked: list[Node] = [n for n in kern.reductions if 0 in n.attrs["axis"]] \
            if self.scatter and self.big and self.shape[0] > 1 and not kern.scans else []
        self.in_locals: set[Node] = set()  # a scan kernel's reductions held in locals
        self.combined = [n for n in self.blocked if runner_combines(n, self.shape)]

    # ------------------------------------------------------------------ arguments

    def param(self, local: str, runner: str, dtype: np.dtype,
              shape: tuple[int, ...] | None, outer: bool = False, boxed: bool = False) -> None:
        """Append an argument: an array of ``shape``, or a scalar for ``shape=None`` (a
        ``boxed`` one: a Python float, read in its object). An ``outer`` array spans the
        loop's first dimension with its own first: that extent is the run-time ``n0``, read
        from the first such argument."""
        n = len(self.params)
        if boxed:
            self.unpack.append(f"{local} = value(args, {n})")
        elif shape is None and dtype.kind == "b":  # a bool pointer loads a byte, not an i1
            self.unpack.append(f"{local} = arg(args, {n}, np.uint8)[0] != 0")
        else:
            pointer = f"arg(args, {n}, {NUMBA.dtype_name(dtype)})"
            if outer and self.kern.shape:
                if self.outer != "n0":
                    self.outer = "n0"
                    self.unpack.insert(0, f"n0 = dim(args, {n}, 0)  # the outer extent")
                shape = f"(n0, {', '.join(map(str, shape[1:]))})".replace(", )", ",)")
            self.unpack.append(f"{local} = {pointer}[0]" if shape is None else
                               f"{local} = view({pointer}, {shape})")
        self.params.append(local)
        self.call.append(runner)

    def bind_inputs(self) -> None:
        """Parameters for the inputs: matmul operands whole, scalars by value, arrays read
        unbroadcast at the loop axes they are held at (a zero-stride view would stop
        vectorisation). Constant scalars are literals where integer code or an exponent
        gains from one (division by a constant, ``x ** 2``); those only float arithmetic
        uses (often shape-derived: ``/ x.shape[0]``, a mean) are passed by the runner as
        0-d arrays it makes once, so that a new batch size gives the same kernel."""
        kern, mod = self.kern, self.mod
        contracted = {v for n in kern.nodes if n.op == "matmul" for v in n.inputs}
        columns = {n.inputs[1] for n in kern.nodes if n.op == "matmul"}
        literal = {v for n in kern.nodes if n.out.type.dtype.kind != "f" for v in n.inputs}
        literal |= {n.inputs[1] for n in kern.nodes if n.op == "power"}
        elementwise_use = {v for n in kern.nodes if n.op != "matmul" for v in n.inputs}
        for j, v in enumerate(kern.inputs):
            if v in contracted:  # matmul operands are read whole, with their own indices
                rows = self.nd == 2 and v not in columns and v.type.shape[0] == self.shape[0] > 1
                self.param(f"m{j}", mod.name(v), v.type.dtype, v.type.shape, rows)
                self.whole[v] = f"m{j}"
            if v in contracted and v not in elementwise_use:
                continue
            if v in mod.consts and v.type.ndim == 0 and v in literal:
                self.ref[v] = Const(mod.consts[v])
            elif v.type.ndim == 0:
                T = NUMBA.dtype_name(v.type.dtype)
                runner = f"np.asarray({mod.name(v)}, {T})"
                # a weakly typed float (a Python float, a float64 or a 0-d array in the
                # runner) passed as a Python float: 10 ns, a 0-d array 100 ns
                boxed = v.type.weak and v.type.dtype == np.float64 and v not in mod.consts
                if boxed:
                    runner = f"float({mod.name(v)})"
                if v in mod.consts:
                    runner = f"{mod.name(v)}_0d"
                    mod.namespace[runner] = np.asarray(mod.consts[v], v.type.dtype)
                self.param(f"s{j}", runner, v.type.dtype, None, boxed=boxed)
                self.ref[v] = f"s{j}"
            elif v in mod.views:  # a slice, read in its base: no copy of the region
                view = mod.views[v]
                base = view.inputs[0]
                whole = (view.attrs["starts"][0], view.attrs["steps"][0]) == (0, 1) and \
                    v.type.shape[0] == base.type.shape[0]  # the outer extent is the base's
                self.param(f"x{j}", mod.name(base), v.type.dtype, base.type.shape,
                           whole and kern.axes[v][:1] == (0,))
                self.ref[v] = f"x{j}[{_strided_index(kern.axes[v], view.attrs)}]"
            else:
                self.param(f"x{j}", mod.name(v), v.type.dtype, v.type.shape,
                           kern.axes[v][:1] == (0,))
                self.ref[v] = f"x{j}[{_index(kern.axes[v])}]"

    def allocate_outputs(self) -> None:
        """Every node's value is the local ``v<n>``; outputs also get an array ``o<n>``:
        reductions keepdims-shaped (pre-filled with the identity where a scatter kernel
        accumulates into it), per-row values row-shaped, others the loop's shape."""
        kern = self.kern
        for n, node in enumerate(kern.nodes):
            self.ref[node.out] = f"v{n}"
            if node.out not in kern.outputs:
                continue
            name, T = self.mod.name(node.out), NUMBA.dtype_name(node.out.type.dtype)
            if node in self.combined:  # the blocks' partial results, folded by NumPy
                ufunc = REGISTRY[monoid_of(node.op).combine].ufunc.__name__
                self.post.append(f"{name} = np.{ufunc}.reduce({name}_blocks, axis=0, dtype={T})")
                alloc = _keepdims_shape(node, self.shape)
            elif node.op in LOOP_REDUCTIONS:
                alloc = _keepdims_shape(node, self.shape)
                fill = f"np.full({alloc}, {self.identity(node)}, {T})"
                self.pre.append(f"{name} = {fill}" if self.scatter else
                                f"{name} = {self.mod.empty(alloc, node.out.type.dtype)}")
            else:
                alloc = (node.out.type.shape if kern.is_row_level(node) else self.shape) or (1,)
                into = self.mod.destinations.get(node.out)
                empty = self.mod.empty(alloc, node.out.type.dtype)
                self.pre.append(f"{name} = {empty}" if into is None else
                                f"{name} = {empty} if {into} is None else {into}")
            if node not in self.combined:
                self.param(f"o{n}", name, node.out.type.dtype, alloc,
                           kern.axes[node.out][:1] == (0,))
            if alloc != node.out.type.shape:
                self.post.append(f"{name} = {name}.reshape({node.out.type.shape})")

    def partials(self, nodes: list[Node], shape_of: Callable[[Node], tuple[int, ...]],
                 fill: bool) -> None:
        """Per-block partial results ``p<n>`` of ``nodes``, each of ``shape_of(node)``,
        pre-filled with the identity where blocks accumulate into them."""
        for n in nodes:
            j, name = self.kern.nodes.index(n), self.mod.name(n.out)
            T, pshape = NUMBA.dtype_name(n.out.type.dtype), shape_of(n)
            if fill:
                self.pre.append(f"{name}_blocks = np.full({pshape}, {self.identity(n)}, {T})")
            else:
                self.pre.append(f"{name}_blocks = {self.mod.empty(pshape, n.out.type.dtype)}")
            self.param(f"p{j}", f"{name}_blocks", n.out.type.dtype, pshape)

    # ------------------------------------------------------------------ values

    def read(self, v: Value, dtype: np.dtype) -> str:
        """``v`` as ``dtype``."""
        return NUMBA.operand(self.ref[v], v.type.dtype, dtype)

    def expr(self, node: Node) -> str:
        """The expression of elementwise ``node`` at the current element, in its loop
        dtypes (noting the ``cpu/math.py`` functions it calls, for the module to import)."""
        if node.op == "matmul":  # small K: unrolled dot product of a row and a column
            a, b = (self.whole[v] for v in node.inputs)
            i, j = f"i{self.nd - 2}", f"i{self.nd - 1}"
            # from +0, as NumPy's (and BLAS's) dot does: -0.0 products sum to +0.0
            zero = NUMBA.constant(0, node.out.type.dtype)
            return " + ".join([zero] + [f"{a}[{i}, {k}] * {b}[{k}, {j}]"
                                        for k in range(node.inputs[0].type.shape[1])])
        self.math |= NUMBA.math_calls(node)
        return NUMBA.expr(node, [self.ref[v] for v in node.inputs])

    def typed(self, node: Node) -> str:
        """The expression of elementwise ``node`` in its output dtype: cast where Numba
        would type it otherwise (or might: every op not known ``_FLOAT_CLOSED``)."""
        text, dtype = self.expr(node), node.out.type.dtype
        if dtype in _FLOATS and node.op in _FLOAT_CLOSED:
            dts = [v.type.dtype for v in node.inputs] if node.op == "matmul" else \
                list(loop_dtypes(node)[1 if node.op == "where" else 0:])
            if all(d == dtype for d in dts):
                return text
        return f"{NUMBA.dtype_name(dtype)}({text})"

    def identity(self, node: Node) -> str:
        """The literal reduction or scan ``node`` starts from. A float running sum starts
        from -0.0, which gives every first element back unchanged (NumPy's accumulate
        copies it: ``cumsum([-0.0])`` is ``[-0.0]``); a sum over no elements is 0.0."""
        dtype = node.out.type.dtype
        if node.op == "cumsum" and dtype.kind == "f":
            return NUMBA.literal(-0.0, dtype)
        return NUMBA.identity(LOOP_SCANS.get(node.op, node.op), dtype)

    def fold(self, node: Node, acc: str, x: str) -> str:
        """``x`` folded into ``acc`` by reduction or scan ``node``, in its output dtype."""
        dtype, op = node.out.type.dtype, LOOP_SCANS.get(node.op, node.op)
        text = NUMBA.combine(op, acc, x, dtype)
        if dtype in _FLOATS and monoid_of(op).combine in _FLOAT_CLOSED:
            return text  # both sides are already in ``dtype``
        return f"{NUMBA.dtype_name(dtype)}({text})"

    def accumulator(self, node: Node, lane: str | None) -> str:
        """Where reduction ``node`` accumulates: lane ``lane`` of its lane array, its
        (block's) keepdims array in a scatter kernel, else its local."""
        j = self.kern.nodes.index(node)
        if lane is not None:
            return f"{self.ref[node.out]}_lanes[{lane}]"
        if not self.scatter or node in self.in_locals:
            return self.ref[node.out]
        out = f"p{j}[b, " if node in self.blocked else f"o{j}["
        return f"{out}{_red_index(node, self.nd)}]"

    def compute(self, sinks: list[Node], done: set[Value], lane: str | None = None,
                buffered: str | None = None) -> list[str]:
        """Statements computing ``sinks`` at one element from the kernel's values
        (recomputing cheap elementwise nodes a later phase needs again, skipping ``done``);
        reductions update their ``accumulator``, or with ``buffered`` (an element's
        position in the chunk) store what they would add into their chunk buffer; a scan
        folds the element into its running value."""
        lines: list[str] = []
        kern = self.kern
        for node in kern.nodes:
            if node.out in done or node in self.row_level or not needed(node, sinks, kern):
                continue
            done.add(node.out)
            if node.op in LOOP_REDUCTIONS:
                v = self.read(node.inputs[0], node.out.type.dtype)
                if buffered is not None:
                    lines.append(f"{self.ref[node.out]}_buf[{buffered}] = {v}  # {node.op}")
                    continue
                acc = self.accumulator(node, lane)
                lines.append(f"{acc} = {self.fold(node, acc, v)}  # {node.op}")
                continue
            if node.op in LOOP_SCANS:
                acc, v = self.ref[node.out], self.read(node.inputs[0], node.out.type.dtype)
                lines.append(f"{acc} = {self.fold(node, acc, v)}  # {node.op}")
            else:
                lines.append(f"{self.ref[node.out]} = {self.typed(node)}  # {node.op}")
            if node.out in kern.outputs:
                lines.append(f"o{kern.nodes.index(node)}[{self.idx}] = {self.ref[node.out]}")
        return lines

    def sinks(self, p: int) -> list[Node]:
        """What phase ``p`` computes per element: its reductions and elementwise outputs."""
        return [n for n in self.kern.nodes if self.phase[n.out] == p and
                n not in self.row_level and (n.op in LOOP_REDUCTIONS or n.out in self.kern.outputs)]

    # ------------------------------------------------------------------ loop shapes

    def emit(self, body: list[str]) -> None:
        """Emit the kernel into the module and its runner statements onto ``body``."""
        self.bind_inputs()
        self.allocate_outputs()
        if self.kern.scans:
            loops = self.emit_scan()
        elif not self.kern.reductions:
            loops = self.emit_map()
        elif self.scatter:
            loops = self.emit_scatter()
        else:
            loops = self.emit_rows()
        kern, k = self.kern, self.k
        extents = ", ".join([self.outer, *map(str, self.shape[1:])]) if kern.shape else ""
        imports, math = list(_IMPORTS), ", ".join(sorted(self.math))
        if math:
            imports.append(f"from tracejit.backends.cpu.math import {math}")
        src = [f"# tracejit CPU kernel: {', '.join(n.op for n in kern.nodes)} over [{extents}]",
               *imports, "", "", "@cfunc(types.void(types.int64), error_model='numpy')",
               "def kernel(args):"]
        src += [f"    {line}" for line in self.unpack]
        if self.parallel:
            src.append("    t, nt = thread_id(), num_threads()  # each thread takes a share")
        self.mod.kernels.append("\n".join(src + loops) + "\n")
        self.mod.kernel_names.append(f"kernel{k}")
        self.mod.programs.append(None if kern.reductions or kern.scans else functools.partial(
            prebuilt.program, kern, list(self.params), dict(self.ref), self.mod.views,
            self.mod.consts))
        self.mod.notes.append(f"# kernel{k} ({self.where}), compiled as `kernel` from:")
        body.extend(f"step = {k}; {line}" for line in self.pre)
        launch = f"parallel(kernel{k}, args)" if self.parallel else f"kernel{k}(id(args))"
        args = ", ".join(self.call) + "," * (len(self.call) == 1)
        body.append(f"step = {k}; args = ({args}); {launch}")
        body.extend(self.post)

    def emit_map(self) -> list[str]:
        """Every dimension an outer loop, the first shared among threads if large."""
        self.parallel = self.big
        return self.nest(0, "    ")

    def emit_scatter(self) -> list[str]:
        """One loop nest accumulating into keepdims-shaped arrays. A large kernel shares
        its first dimension among threads: reductions over it accumulate per block of it
        into partial arrays, combined at the end; the others write disjoint elements."""
        self.parallel = self.big and self.shape[0] > 1
        if not self.blocked:
            return self.nest(0, "    ")
        nblocks, n0 = PARALLEL_BLOCKS, self.outer
        self.partials(self.blocked, lambda n: (nblocks, *_keepdims_shape(n, self.shape)), True)
        src = [f"    for b in {_share(str(nblocks))}:",
               f"        for i0 in range(b * U({n0}) // U({nblocks}), "
               f"(b + U(1)) * U({n0}) // U({nblocks})):"]
        src += self.nest(1, "            ")
        if len(self.combined) < len(self.blocked):
            src += _COMBINE_HEAD + self.combine_blocks()
        return src

    def emit_scan(self) -> list[str]:
        """One loop nest, the last dimension run in order. Each scan's running value
        starts from its identity before that loop, once per row; a reduction over a run
        of trailing axes accumulates in a local from before its first axis's loop, and is
        stored after it; any other reduction into its keepdims array (pre-filled). The
        first dimension is shared among threads if the scans run along another one and no
        reduction reduces it."""
        reds, nd = self.kern.reductions, self.nd
        self.parallel = self.big and nd > 1 and self.shape[0] > 1 and not any(
            0 in n.attrs["axis"] for n in reds)
        starts = {}
        for n in reds:
            axes = sorted(n.attrs["axis"])
            if axes and axes == list(range(axes[0], nd)):
                starts[n] = axes[0]
        self.in_locals = set(starts)
        src, indent, ends = [], "    ", []
        for d in range(nd):
            begun = [n for n, a in starts.items() if a == d]
            for n in begun + (self.kern.scans if d == nd - 1 else []):
                T = NUMBA.dtype_name(n.out.type.dtype)
                src.append(f"{indent}{self.ref[n.out]} = {T}({self.identity(n)})")
            ends.append((indent, begun))
            loop, indent = self.loops(d, d + 1, indent)
            src += loop
        src += [f"{indent}{line}" for line in self.compute(self.sinks(0), set())]
        for indent, stored in reversed(ends):
            for n in stored:
                if n.out in self.kern.outputs:
                    j = self.kern.nodes.index(n)
                    src.append(f"{indent}o{j}[{_red_index(n, nd)}] = {self.ref[n.out]}")
        return src

    def combine_blocks(self) -> list[str]:
        """Thread 0 folds the blocks' partial results of a blocked scatter kernel into its
        outputs, each element in block order: per block, one loop nest per output (two
        arrays a loop: LLVM vectorises it after one alias check), of plain ranges and
        literal indices (``np.ndindex`` costs Numba's front end far more to compile)."""
        src = [f"        for b in range({PARALLEL_BLOCKS}):"]
        for n in self.blocked:
            if n in self.combined:
                continue
            j, indent = self.kern.nodes.index(n), "            "
            shape = _keepdims_shape(n, self.shape)
            for d, size in enumerate(shape):
                if size > 1:
                    src.append(f"{indent}for j{d} in range({size}):")
                    indent += "    "
            at = ", ".join(f"j{d}" if size > 1 else "0" for d, size in enumerate(shape))
            src.append(f"{indent}o{j}[{at}] = {self.fold(n, f'o{j}[{at}]', f'p{j}[b, {at}]')}")
        return src

    def nest(self, first: int, indent: str) -> list[str]:
        """The one-phase loop nest of a map or scatter kernel from dimension ``first`` on."""
        src, indent = self.loops(first, self.nd, indent)
        return src + [f"{indent}{line}" for line in self.compute(self.sinks(0), set())]

    def loops(self, first: int, last: int, indent: str) -> tuple[list[str], str]:
        """Loops over dimensions ``first`` to ``last`` (exclusive), dimension 0 shared among
        threads in a parallel kernel; returns them and the indent of their body."""
        src = []
        for d in range(first, last):
            rng = _share(self.extent(d)) if d == 0 and self.parallel else f"range({self.extent(d)})"
            src.append(f"{indent}for i{d} in {rng}:")
            indent += "    "
        return src, indent

    def extent(self, d: int) -> str:
        """The extent of loop dimension ``d``: the first one read at run time (``n0``) where
        an argument spans it, the others literals."""
        return self.outer if d == 0 else str(self.shape[d])

    def emit_rows(self) -> list[str]:
        """Outer loops over the leading dimensions, then each phase in turn per row. A large
        one-phase reduction over every axis (*full*) runs in blocks of the first dimension
        instead, each reducing into its own partial result, combined at the end."""
        split = self.nd - len(self.kern.rows)
        n_phases = max(self.phase.values(), default=0) + 1
        full = split == 0 and self.big and self.shape[0] > 1 and n_phases == 1
        self.parallel = (split > 0 or full) and self.big
        src, indent = self.loops(0, split, "    ")
        if full:
            src += self.full_blocks(indent)
            indent += "    "
        done: set[Value] = set()
        for p in range(n_phases):
            src += self.row_phase(p, split, indent, done, full)
        if full:
            src += self.combine_full()
        return src

    def full_blocks(self, indent: str) -> list[str]:
        """The loop over the blocks of a *full* kernel, each adding its rows ``lo`` to ``hi``
        into its partial result: ``PARALLEL_BLOCKS`` blocks (trailing ones empty where the
        run-time extent is short), of a whole number of lanes in 1-d (the lane loops need
        aligned starts)."""
        reds = self.kern.reductions
        lanes = LANE_BYTES // max(n.out.type.dtype.itemsize for n in reds)
        self.partials(reds, lambda n: (PARALLEL_BLOCKS,), False)
        n0, blocks = f"U({self.outer})", f"U({PARALLEL_BLOCKS})"
        src = [f"{indent}chunk = ({n0} + {blocks} - U(1)) // {blocks}  # rows per block"]
        if self.nd == 1:
            src.append(f"{indent}chunk = (chunk + U({lanes - 1})) // U({lanes}) * U({lanes})")
        return src + [f"{indent}for b in {_share(str(PARALLEL_BLOCKS))}:",
                      f"{indent}    lo = min({n0}, b * chunk)",
                      f"{indent}    hi = min({n0}, lo + chunk)"]

    def row_phase(self, p: int, split: int, indent: str, done: set[Value],
                  full: bool) -> list[str]:
        """Phase ``p`` of a row: its per-row values (from the phases before), then one
        pass over the row's elements for its reductions and elementwise outputs."""
        kern = self.kern
        src = []
        row_index = ", ".join("0" if d >= split else f"i{d}" for d in range(self.nd))
        for n in self.row_level:
            if self.phase[n.out] == p:
                src.append(f"{indent}{self.ref[n.out]} = {self.typed(n)}  # {n.op}")
                if n.out in kern.outputs:
                    src.append(f"{indent}o{kern.nodes.index(n)}[{row_index}] = {self.ref[n.out]}")
        sinks = self.sinks(p)
        reds = [n for n in sinks if n.op in LOOP_REDUCTIONS]
        for n in reds:
            T = NUMBA.dtype_name(n.out.type.dtype)
            src.append(f"{indent}{self.ref[n.out]} = {T}({self.identity(n)})")
        if not sinks:
            return src
        done_inner = done | {n.out for n in self.row_level}
        lanes = LANE_BYTES // max((n.out.type.dtype.itemsize for n in reds), default=1)
        last = self.extent(self.nd - 1)
        if reds and split == self.nd - 1 and (not last.isdigit() or int(last) >= 2 * lanes):
            src += self.lane_pass(sinks, reds, lanes, indent, done_inner, full)
        else:
            inner = indent
            for d in range(split, self.nd):
                bounds = "lo, hi" if full and d == 0 else self.extent(d)
                src.append(f"{inner}for i{d} in range({bounds}):")
                inner += "    "
            src += [f"{inner}{line}" for line in self.compute(sinks, done_inner)]
        done |= {n.out for n in reds}
        for n in reds:
            if n.out in kern.outputs:
                j = kern.nodes.index(n)
                dest = f"p{j}[b]" if full else f"o{j}[{_red_index(n, self.nd)}]"
                src.append(f"{indent}{dest} = {self.ref[n.out]}")
        return src

    def lane_pass(self, sinks: list[Node], reds: list[Node], lanes: int, indent: str,
                  done: set[Value], full: bool) -> list[str]:
        """The pass over a row of a phase with reductions ``reds``, in lanes: the lane
        loops over whole groups of ``lanes`` elements, a scalar loop over the remainder,
        then the lanes combined into each reduction's local."""
        last = self.extent(self.nd - 1)
        if full:
            lo, hi, end = "lo", "hi", f"hi - (hi - lo) % U({lanes})"
        elif last.isdigit():
            lo, hi, end = "0", last, str(int(last) - int(last) % lanes)
        else:  # a 1-d row of run-time length
            lo, hi, end = "0", last, f"{last} - {last} % U({lanes})"
        if all(n.op in LOOP_REDUCTIONS for n in sinks):
            src = self.lane_loops(reds, lo, end, lanes, indent,
                                  self.compute(sinks, set(done), "lane"))
        else:
            src = self.buffered_lane_loops(sinks, reds, lo, end, lanes, indent, set(done))
        if full or not last.isdigit() or int(last) % lanes:
            src.append(f"{indent}for i{self.nd - 1} in range({end}, {hi}):  # the remainder")
            src += [f"{indent}    {line}" for line in self.compute(sinks, done)]
        src.append(f"{indent}for lane in range({lanes}):  # combine the lanes")
        for n in reds:
            acc = self.ref[n.out]
            src.append(f"{indent}    {acc} = {self.fold(n, acc, f'{acc}_lanes[lane]')}")
        return src

    def lane_loops(self, reds: list[Node], lo: str, end: str, lanes: int, indent: str,
                   body: list[str]) -> list[str]:
        """A pass over a row's elements ``lo`` to ``end`` in groups of ``lanes``, each
        reduction of ``reds`` into ``lanes`` independent partial accumulators: a float sum
        cannot vectorise otherwise (reassociating it needs fastmath, which the math
        module's error-free transformations forbid)."""
        lines = []
        for r in reds:
            acc, T = f"{self.ref[r.out]}_lanes", NUMBA.dtype_name(r.out.type.dtype)
            lines += [f"{indent}{acc} = view(stack({lanes}, {T}), ({lanes},))",
                      f"{indent}for lane in range({lanes}):",
                      f"{indent}    {acc}[lane] = {self.identity(r)}"]
        lines.append(f"{indent}for c in range(U({lo}), U({end}), U({lanes})):")  # unsigned: abi
        lines.append(f"{indent}    for lane in range(U({lanes})):")
        lines.append(f"{indent}        i{self.nd - 1} = c + lane")
        lines += [f"{indent}        {line}" for line in body]
        return lines

    def buffered_lane_loops(self, sinks: list[Node], reds: list[Node], lo: str, end: str,
                            lanes: int, indent: str, done: set[Value]) -> list[str]:
        """``lane_loops`` for a pass that also stores elementwise outputs, chunk by chunk:
        a plain loop computes the chunk's outputs and what each reduction adds (into a
        buffer on the stack), then the lane loops fold the buffers. Together in one loop
        the outputs and the lanes vectorised neither (a map with a sum ran 6x slower than
        the map alone); the lanes add the same elements in the same order."""
        d = f"i{self.nd - 1}"
        lines = []
        for r in reds:
            acc, T = self.ref[r.out], NUMBA.dtype_name(r.out.type.dtype)
            lines += [f"{indent}{acc}_lanes = view(stack({lanes}, {T}), ({lanes},))",
                      f"{indent}{acc}_buf = view(stack({CHUNK}, {T}), ({CHUNK},))",
                      f"{indent}for lane in range({lanes}):",
                      f"{indent}    {acc}_lanes[lane] = {self.identity(r)}"]
        lines += [f"{indent}for c in range(U({lo}), U({end}), U({CHUNK})):",
                  f"{indent}    m = min(U({end}), c + U({CHUNK}))",
                  f"{indent}    for {d} in range(c, m):"]
        lines += [f"{indent}        {line}" for line in self.compute(sinks, done, None, f"{d} - c")]
        lines += [f"{indent}    for g in range(U(0), m - c, U({lanes})):",
                  f"{indent}        for lane in range(U({lanes})):"]
        for r in reds:
            acc = f"{self.ref[r.out]}_lanes[lane]"
            lines.append(f"{indent}            {acc} = "
                         f"{self.fold(r, acc, f'{self.ref[r.out]}_buf[g + lane]')}")
        return lines

    def combine_full(self) -> list[str]:
        """Thread 0 reduces the blocks' partial results of a *full* kernel, in order."""
        src = list(_COMBINE_HEAD)
        for n in self.kern.reductions:
            j, T = self.kern.nodes.index(n), NUMBA.dtype_name(n.out.type.dtype)
            src += [f"        r{j} = {T}({self.identity(n)})",
                    f"        for b in range({PARALLEL_BLOCKS}):",
                    f"            r{j} = {self.fold(n, f'r{j}', f'p{j}[b]')}",
                    f"        o{j}[{_red_index(n, self.nd)}] = r{j}"]
        return src


_COMBINE_HEAD = ["    barrier()  # wait for every block",
                 "    if t == 0:  # thread 0 combines the blocks' partial results"]


def runner_combines(node: Node, shape: tuple[int, ...]) -> bool:
    """Whether the runner folds the blocks' partial results of ``node``, a reduction over
    the first axis of a blocked scatter kernel over ``shape``, with NumPy (one
    ``np.add.reduce(blocks, axis=0)``, ``np.multiply`` for a product) rather than thread 0
    in the kernel: a ``sum`` or ``prod`` (limits below). NumPy then folds the blocks in
    order from the identity (its inner loop runs along the kept elements, two or more;
    only a reduction along a contiguous axis is pairwise), the same bits as the kernel's
    combining loop, which
    costs Numba's front end more than the rest of the kernel: 0.36 -> 0.22 s for the
    two-moons step's weight-gradient kernel, five such sums. A ``max`` stays in the
    kernel (``np.maximum`` picks between equal zeros and NaNs otherwise), and so does the
    combine of a kernel under ``RUNNER_COMBINE_MIN`` elements or of a sum keeping fewer
    than ``RUNNER_COMBINE_KEPT``: the NumPy calls lengthen the gap between its launches
    past the thread team's spin, and a wake-up then costs tens of microseconds, which
    only a long kernel, with real work in the calls, hides (three sums of float32 columns
    in a loop of calls: 2048 x 64, 19 -> 60 us a call; 32768 x 64, 225-254 -> 289-351
    us; 2048 x 1024 and 4096 x 1024 within the noise, 280-420 us and 500-700 us)."""
    return (node.op in ("sum", "prod") and math.prod(shape) >= RUNNER_COMBINE_MIN
            and math.prod(_keepdims_shape(node, shape)) >= RUNNER_COMBINE_KEPT)


def _share(n: str) -> str:
    """This thread's contiguous share of ``range(n)``."""
    return f"range(t * U({n}) // nt, (t + U(1)) * U({n}) // nt)"


def _keepdims_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    axes = node.attrs["axis"]
    return tuple(1 if d in axes else s for d, s in enumerate(shape))


def _index(axes: tuple[int | None, ...]) -> str:
    """Index an input held at ``axes`` of the loop (the fusion pass's ``Kernel.axes``):
    each dimension by its loop variable, a size-1 dimension at 0."""
    return ", ".join("0" if a is None else f"i{a}" for a in axes)


def _strided_index(axes: tuple[int | None, ...], attrs: dict) -> str:
    """Index the base of a slice (``starts``, ``steps`` per dimension) where the kernel
    would read the slice at ``axes``."""
    return ", ".join(
        str(a) if ax is None else f"i{ax}" if (a, s) == (0, 1) else
        f"{a} + i{ax}" if s == 1 else f"{a} + {s} * i{ax}"
        for ax, a, s in zip(axes, attrs["starts"], attrs["steps"], strict=True))


def _red_index(node: Node, nd: int) -> str:
    axes = node.attrs["axis"] if node.inputs[0].type.ndim else ()
    return ", ".join("0" if d in axes else f"i{d}" for d in range(nd))
