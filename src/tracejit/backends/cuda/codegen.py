"""Generate CUDA C for one graph's loop kernels, for CuPy ``RawKernel``.

Every loop kernel of the fusion pass becomes one ``extern "C" __global__`` function
``kernel<k>`` (``k`` is the step's index; a full reduction adds ``kernel<k>_combine``).
Arguments are device pointers to C-contiguous arrays (inputs in the kernel's input order,
then outputs, then scratch arrays), except Python scalars, which are passed by value.
Shapes are static, so index arithmetic uses constants; inputs keep their own unbroadcast
shapes and are indexed at the loop axes the fusion pass gives them (``Kernel.axes``).
Each kernel takes one of four forms:

- *map* (no reductions): a grid-stride loop over the flat iteration space. A map kernel
  of at least ``VECTOR_MIN`` elements with float32 pointers read or written at the flat
  index (inputs of the kernel's own shape, which are not broadcast, and outputs) also has a
  *vector path*: if every such pointer is 16-byte aligned (checked at run time, the same
  for every thread: the runner may pass views such as ``x[1:]``), a grid-stride loop over
  groups of 4 elements loads each of them as one ``float4``, computes the 4 elements one
  after the other (other operands are read per element as usual) and stores each float32
  output as one ``float4``; a scalar loop then finishes the last ``n % 4`` elements.
  Otherwise the scalar loop runs alone. The launch has ``grid_for(n // 4)`` blocks (up to
  ``MAP_GRID``, more than the other forms' ``MAX_GRID``: streaming loops gain from them) and
  the step's ``vector`` is 4.
- *full* (one pass reducing every axis): a grid-stride loop accumulating per thread, a
  block reduction (warp shuffles, then shared memory), one partial result per block; a
  second one-block kernel combines the partials in a fixed order (deterministic) and
  computes the per-row values that follow. A single block writes the result directly.
- *rows* (all reductions over the same trailing axes): one warp per row (rows of at most
  ``ROW_WARP_MAX`` elements) or one block per row, running the kernel's phases in turn
  (row softmax: max, sum of exp, output); per-row values live in registers between phases.
- *columns* (other reductions): tiles of up to 32 results by a share of the reduced
  elements; each block's row lanes are combined in shared memory, and the shares' partial
  results by a second kernel, both in a fixed order (``ColumnPlan``).

Index arithmetic is 32-bit (``unsigned``) when the iteration space has at most 2**31 - 1
elements, 64-bit otherwise. Library steps (matmul, structural ops, gathers) are only
recorded; the runner executes them with CuPy/cuBLAS. Nothing here imports CuPy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...ir import Graph, Kind, Node, Value
from ...ir.registry import REGISTRY, loop_dtypes, monoid_of
from ...passes.contract import SMALL_K
from ...passes.fusion import LOOP_REDUCTIONS, Kernel, fuse, needed, phases
from ..language import Const, Operand
from .ops import CUDA, PRELUDE

BLOCK = 256  # threads per block of map, full, column and warp-per-row kernels
SINGLE_ROW_BLOCK = 1024  # a kernel with one row gives it the largest block
MAX_GRID = 4096  # grid-stride loops: more blocks than a few waves of a GPU only add overhead
# ... except for map kernels, which stream: the chain on 64M float32 took 281 us with 4096
# blocks, 270 with 65536 and with no cap (an H100, 2026-11-27, profile_cuda_step.py)
MAP_GRID = 65536
MAX_PARTIALS = 1024  # blocks of a full reduction's first stage, each writing one partial
ROW_WARP_MAX = 1024  # rows up to this length get one warp each, longer ones a block
COLUMN_BLOCKS = 1024  # a columns kernel cuts its reduced axes into shares up to this many blocks
COLUMN_MIN_ROWS = 16  # ... while each thread still reduces at least this many elements
VECTOR = 4  # float32 elements per float4 in a map kernel's vector path
VECTOR_MIN = VECTOR * BLOCK  # map kernels with fewer elements have no vector path
F32 = np.dtype(np.float32)
INT32_MAX = 2**31 - 1
WARP = 32


def index_ctype(n: int) -> str:
    """The C type of a kernel's index arithmetic over ``n`` elements: 32-bit when every
    index fits in a signed int (so ``i + stride`` cannot wrap an unsigned), else 64-bit."""
    return "unsigned" if n <= INT32_MAX else "unsigned long long"


def fusible(node: Node) -> bool:
    """Whether the CUDA backend computes ``node`` inside a loop kernel."""
    dtypes = [v.type.dtype for v in (*node.inputs, node.out)]
    if not all(CUDA.supports(d) for d in dtypes):
        return False
    if node.op in LOOP_REDUCTIONS:  # the input is cast to the output dtype per element
        out = dtypes[-1]
        return CUDA.template(monoid_of(node.op).combine, (out, out)) is not None
    if node.op == "matmul":  # a contraction over a few terms: unrolled in the loop (expr)
        a, b = (v.type for v in node.inputs)
        return (a.ndim == b.ndim == 2 and a.shape[1] <= SMALL_K and dtypes[-1].kind == "f"
                and a.dtype == b.dtype == dtypes[-1])
    if REGISTRY[node.op].kind is not Kind.ELEMENTWISE:
        return False  # contractions (cuBLAS), structural ops, gathers: library steps
    if node.op == "convert":
        return True  # float -> int through tj_float_to_int, as NumPy on x86
    dts = loop_dtypes(node)
    return dts is not None and CUDA.template(node.op, dts[:-1]) is not None


def grid_for(n: int, block: int = BLOCK, cap: int | None = None) -> int:
    """Blocks for a grid-stride loop over ``n`` items: enough for one item per thread, at
    most ``cap`` (``MAX_GRID``), at least one (an empty loop still launches, to write
    identities)."""
    return max(1, min(-(-n // block), MAX_GRID if cap is None else cap))


def row_plan(rows: int, length: int) -> tuple[str, int, int]:
    """(``"warp"`` or ``"block"``, block size, grid size) for ``rows`` rows of ``length``."""
    if rows == 1:
        return "block", SINGLE_ROW_BLOCK, 1
    if length <= ROW_WARP_MAX:
        return "warp", BLOCK, grid_for(rows, BLOCK // WARP)
    return "block", BLOCK, grid_for(rows, 1)


@dataclass
class Arg:
    """One kernel parameter. ``value`` is the IR value passed (None for scratch arrays);
    pointers point to C-contiguous arrays of ``dtype`` and ``shape``."""

    name: str
    ctype: str  # "const float*", "float*", or a scalar type passed by value
    role: str  # "input", "scalar" (a Python scalar, by value), "output", "scratch"
    dtype: np.dtype
    shape: tuple[int, ...]
    value: Value | None = None


@dataclass
class Launch:
    function: str
    grid: int
    block: int
    args: list[Arg]


@dataclass
class Step:
    """A step of the graph: a loop kernel (one or two launches) or a library call."""

    kind: str  # "loop" or "library"
    form: str  # "map", "full", "rows", "columns" or "library"
    ops: list[str]
    kernel: Kernel
    launches: list[Launch] = field(default_factory=list)
    index: str = ""  # the C type of the kernel's index arithmetic
    vector: int = 1  # elements per float4 of a map kernel's vector path (VECTOR), else 1


@dataclass
class CudaModule:
    """``source``: CUDA C for every loop kernel, compiled as one module; ``steps``: what
    to run, in order."""

    source: str
    steps: list[Step]

    @property
    def kernel_names(self) -> list[str]:
        return [launch.function for s in self.steps for launch in s.launches]


def partition(graph: Graph, on_device: Callable[[Node], bool]) -> list[Kernel]:
    """The steps of ``graph``, in order: one fusion ``Kernel`` per loop kernel or library
    step; only nodes ``on_device`` join loop kernels."""
    return fuse(graph, lambda n: on_device(n) and fusible(n))


def generate(graph: Graph, prefix: str = "",
             on_device: Callable[[Node], bool] = lambda n: True) -> CudaModule:
    """The CUDA module of ``graph``; ``prefix`` goes before every function name. Only
    nodes ``on_device`` join loop kernels (placement runs the others on the CPU)."""
    consts = {n.out: n.attrs["value"] for n in graph.nodes if n.op == "constant"}
    place = graph.placement
    # host scalars are passed by value: Python numbers, and NumPy 0-d values once placed
    scalars = {v for v in graph.inputs if v.type.ndim == 0 and
               (v.type.weak if place is None else place.where(v) is None)}
    lines = [f"// tracejit CUDA backend: {graph.name}", PRELUDE.strip(), ""]
    steps: list[Step] = []
    for k, kern in enumerate(partition(graph, on_device)):
        names = [n.op for n in kern.nodes]
        if kern.kind == "library":
            steps.append(Step("library", "library", names, kern))
            continue
        emitter = _Emitter(kern, f"{prefix}kernel{k}", consts, scalars)
        src, step = emitter.emit()
        lines += src + [""]
        steps.append(step)
    return CudaModule("\n".join(lines), steps)


def _where(node: Node) -> str:
    return node.loc.short.replace("\\", "/") if node.loc else "?"


class _Emitter:
    """Emits one loop kernel: its parameters, its loop structure and its launches."""

    def __init__(self, kern: Kernel, name: str, consts: dict, scalars: set[Value]):
        self.kern, self.name, self.consts = kern, name, consts
        self.shape = kern.shape or (1,)  # a 0-d kernel runs as one element
        self.nd = len(self.shape)
        self.n = math.prod(self.shape)
        self.I = index_ctype(self.n)
        self.args: list[Arg] = []
        self.ptr: dict[Value, str] = {}  # inputs read through pointers
        self.byval: dict[Value, str] = {}  # Python scalars passed by value
        self.out: dict[Value, str] = {}  # output pointers
        for j, v in enumerate(kern.inputs):
            T = CUDA.dtype_name(v.type.dtype)
            if v in consts and v.type.ndim == 0:
                continue  # inlined as a literal
            if v in scalars:
                self.byval[v] = f"s{j}"
                self.args.append(Arg(f"s{j}", T, "scalar", v.type.dtype, (), v))
            else:
                self.ptr[v] = f"x{j}"
                self.args.append(Arg(f"x{j}", f"const {T}* __restrict__", "input",
                                     v.type.dtype, v.type.shape, v))
        for v in kern.outputs:
            j = next(i for i, n in enumerate(kern.nodes) if n.out is v)
            self.out[v] = f"o{j}"
            self.args.append(Arg(f"o{j}", f"{CUDA.dtype_name(v.type.dtype)}* __restrict__",
                                 "output", v.type.dtype, v.type.shape, v))
        self.phase = phases(kern)
        self.row_level = [n for n in kern.nodes if kern.is_row_level(n)]
        self.local: dict[Value, str] = {}  # values held in variables in the current scope
        self.lane: dict[Value, str] = {}  # pointers standing for a float4 lane (vector path)
        self.vector = 1

    # ------------------------------------------------------------------ values

    def lit(self, n: int) -> str:
        return f"{n}u" if self.I == "unsigned" else f"{n}ull"

    def ref(self, v: Value, idx: list[str], flat: str | None) -> Operand:
        """``v`` at the multi-index ``idx`` (or flat index ``flat``), in its own dtype."""
        if v in self.local:
            return self.local[v]
        if v in self.consts and v.type.ndim == 0:
            return Const(self.consts[v])  # inlined as a literal of the dtype it is used in
        if v in self.lane:
            return self.lane[v]
        if v in self.byval:
            return self.byval[v]
        return f"{self.ptr[v]}[{self.offset(v, idx, flat)}]"

    def read(self, v: Value, dtype: np.dtype, idx: list[str], flat: str | None) -> str:
        """``v`` as ``dtype`` at the multi-index ``idx`` (or flat index ``flat``)."""
        return CUDA.operand(self.ref(v, idx, flat), v.type.dtype, dtype)

    def offset(self, v: Value, idx: list[str], flat: str | None) -> str:
        """The element of input ``v`` at loop index ``idx``: each dimension at the loop axis
        the fusion pass holds it at (``Kernel.axes``), a size-1 dimension at 0."""
        shape, axes = v.type.shape, self.kern.axes[v]
        if flat is not None and shape == self.shape:
            return flat  # held at every loop axis in order (the verifier checks axes)
        terms = []
        for j, a in enumerate(axes):
            stride = math.prod(shape[j + 1:])
            if a is None or idx[a] == "0":
                continue
            terms.append(idx[a] + ("" if stride == 1 else f" * {self.lit(stride)}"))
        return " + ".join(terms) or "0"

    def expr(self, node: Node, idx: list[str], flat: str | None) -> str:
        if node.op == "matmul":  # small K: the dot product of a row and a column, unrolled
            (m, k), n = node.inputs[0].type.shape, node.out.type.shape[1]
            a, b = (self.ptr[v] for v in node.inputs)
            row = f"{idx[-2]} * {self.lit(k)} + " if m > 1 else ""
            col = [f"{j * n} + {idx[-1]}" if j and n > 1 else idx[-1] if n > 1 else f"{j * n}"
                   for j in range(k)]
            zero = CUDA.literal(0, node.out.type.dtype)  # from +0, as BLAS's dot
            return "(" + " + ".join([zero] + [f"{a}[{row}{j}] * {b}[{col[j]}]"
                                             for j in range(k)]) + ")"
        return CUDA.expr(node, [self.ref(v, idx, flat) for v in node.inputs])

    def combine(self, node: Node, acc: str, v: str) -> str:
        return CUDA.combine(node.op, acc, v, node.out.type.dtype)

    def identity(self, node: Node) -> str:
        return CUDA.identity(node.op, node.out.type.dtype)

    # ------------------------------------------------------------------ bodies

    def compute(self, sinks: list[Node], idx: list[str], flat: str | None,
                write: bool) -> list[str]:
        """Statements computing ``sinks`` at one element (and the elementwise nodes they
        need, recomputed per phase); reductions update their accumulators ``acc<n>``;
        with ``write``, elementwise outputs are stored at ``flat``."""
        lines: list[str] = []
        saved = dict(self.local)
        for n, node in enumerate(self.kern.nodes):
            if node.out in self.local or node in self.row_level or \
                    not needed(node, sinks, self.kern):
                continue
            where = f"  // {node.op}, {_where(node)}"
            if node.op in LOOP_REDUCTIONS:
                dt = node.out.type.dtype
                v = self.read(node.inputs[0], dt, idx, flat)
                lines.append(f"acc{n} = {self.combine(node, f'acc{n}', v)};{where}")
                continue
            T = CUDA.dtype_name(node.out.type.dtype)
            lines.append(f"const {T} v{n} = {self.expr(node, idx, flat)};{where}")
            self.local[node.out] = f"v{n}"
            if write and node.out in self.out:
                target = self.lane.get(node.out, f"{self.out[node.out]}[{flat}]")
                lines.append(f"{target} = v{n};")
        self.local = saved
        return lines

    def unravel(self, body: list[str], flat: str, dims: list[int]) -> list[str]:
        """``i<d> = ...`` for the dimensions ``dims`` of ``flat`` that ``body`` uses."""
        text = "\n".join(body)
        lines = []
        sizes = [self.shape[d] for d in dims]
        for k, d in enumerate(dims):
            if not re.search(rf"\bi{d}\b", text):
                continue
            stride = math.prod(sizes[k + 1:])
            e = flat if stride == 1 else f"{flat} / {self.lit(stride)}"
            if k > 0:
                e = f"{e if stride == 1 else f'({e})'} % {self.lit(sizes[k])}"
            lines.append(f"const {self.I} i{d} = {e};")
        return lines

    def shuffle_down(self, n: int, node: Node) -> str:
        """A warp's tree reduction of ``acc<n>``. The shuffle is a statement of its own:
        inside a short-circuit ``||`` (bool any/max) a lane could skip it, and every lane
        of the mask must execute a shuffle."""
        T = CUDA.dtype_name(node.out.type.dtype)
        return (f"for (int o = 16; o > 0; o >>= 1) {{ const {T} t = tj_shfl_down(acc{n}, o); "
                f"acc{n} = {self.combine(node, f'acc{n}', 't')}; }}")

    def group_reduce(self, reds: list[Node], group: str) -> list[str]:
        """Combine every thread's ``acc<n>`` over a warp (``group == "warp"``) or the
        block; afterwards every thread of the group holds the result."""
        lines = [self.shuffle_down(n, node) for n, node in reds]
        if group == "warp":
            return lines + [f"acc{n} = tj_shfl_first(acc{n});  // every lane gets the result"
                            for n, _ in reds]
        nw = "NWARPS"
        lines.append("if (lane == 0) {  // one value per warp into shared memory")
        lines += [f"  sh{n}[warp] = acc{n};" for n, _ in reds]
        lines += ["}", "__syncthreads();", "if (warp == 0) {  // the first warp combines them"]
        for n, node in reds:
            lines += [f"  acc{n} = lane < {nw} ? sh{n}[lane] : {self.identity(node)};",
                      "  " + self.shuffle_down(n, node),
                      f"  if (lane == 0) sh{n}[{nw}] = acc{n};"]
        lines += ["}", "__syncthreads();"]
        lines += [f"acc{n} = sh{n}[{nw}];" for n, _ in reds]
        return lines

    def row_values(self, p: int, idx: list[str], guard: str | None) -> list[str]:
        """Per-row nodes of phase ``p``, from the phases before, and their outputs."""
        lines = []
        for n, node in enumerate(self.kern.nodes):
            if node in self.row_level and self.phase[node.out] == p:
                T = CUDA.dtype_name(node.out.type.dtype)
                lines.append(f"const {T} v{n} = {self.expr(node, idx, None)};"
                             f"  // {node.op} (per row), {_where(node)}")
                self.local[node.out] = f"v{n}"
                if node.out in self.out:
                    lines.append(_guarded(guard, f"{self.out[node.out]}[row] = v{n};"))
        return lines

    def finish_reductions(self, reds: list[tuple[int, Node]], guard: str | None) -> list[str]:
        lines = []
        for n, node in reds:
            self.local[node.out] = f"acc{n}"
            if node.out in self.out:
                lines.append(_guarded(guard, f"{self.out[node.out]}[row] = acc{n};"))
        return lines

    def sinks(self, p: int) -> list[Node]:
        return [n for n in self.kern.nodes if self.phase[n.out] == p and
                n not in self.row_level and (n.op in LOOP_REDUCTIONS or n.out in self.out)]

    def accumulators(self, reds: list[tuple[int, Node]]) -> list[str]:
        return [f"{CUDA.dtype_name(node.out.type.dtype)} acc{n} = {self.identity(node)};"
                f"  // {node.op}" for n, node in reds]

    def numbered(self, nodes: list[Node]) -> list[tuple[int, Node]]:
        return [(self.kern.nodes.index(n), n) for n in nodes if n.op in LOOP_REDUCTIONS]

    # ------------------------------------------------------------------ forms

    def emit(self) -> tuple[list[str], Step]:
        kern = self.kern
        reds = kern.reductions
        rows = kern.rows
        late = any(self.phase[n.out] > 0 for n in kern.nodes if n not in self.row_level)
        if not reds:
            form, body, launches = "map", *self.emit_map()
        elif rows == tuple(range(self.nd)) and kern.shape and not late:
            form, body, launches = "full", *self.emit_full()
        elif rows:
            form, body, launches = "rows", *self.emit_rows(rows)
        else:
            form, body, launches = "columns", *self.emit_columns()
        where = _where(kern.nodes[0])
        head = [f"// {self.name}: {form} kernel over {list(kern.shape)} "
                f"({', '.join(n.op for n in kern.nodes)}), {where}",
                f"// {self.n} elements: {'32' if self.I == 'unsigned' else '64'}-bit indices"]
        return head + body, Step("loop", form, [n.op for n in kern.nodes], kern, launches,
                                 self.I, self.vector)

    def signature(self, name: str, block: int, args: list[Arg]) -> str:
        params = ", ".join(f"{a.ctype} {a.name}" for a in args)
        return f'extern "C" __global__ void __launch_bounds__({block}) {name}({params}) {{'

    def grid_stride(self, var: str, n: int, start: int = 0) -> str:
        t = self.I
        first = f"({t})blockIdx.x * blockDim.x + threadIdx.x"
        if start:
            first = f"{self.lit(start)} + {first}"
        return (f"for ({t} {var} = {first}; "
                f"{var} < {self.lit(n)}; {var} += ({t})blockDim.x * gridDim.x) {{")

    def loop(self, header: str, count: int, body: list[str], indent: int) -> list[str]:
        """``header`` (a for statement opening a brace) around ``body``; nothing for an
        empty range (nvcc rejects ``i < 0u`` as a pointless comparison)."""
        if count == 0:
            return [" " * indent + "// empty: no iterations"]
        return [" " * indent + header.lstrip()] + _indent(body, indent + 2) + [" " * indent + "}"]

    def element_idx(self) -> list[str]:
        return [f"i{d}" for d in range(self.nd)]

    def emit_map(self) -> tuple[list[str], list[Launch]]:
        src = [self.signature(self.name, BLOCK, self.args)]
        vec = self.vector_pointers()
        if not vec:
            src += self.map_loop(0, 2) + ["}"]
            return src, [Launch(self.name, grid_for(self.n, cap=MAP_GRID), BLOCK, self.args)]
        self.vector = VECTOR
        tail = self.n - self.n % VECTOR  # where the scalar tail starts
        aligned = " | ".join(f"(unsigned long long){name}" for name in vec.values())
        src += [f"  if ((({aligned}) & 15ull) == 0ull) {{  // float4 pointers 16-byte aligned"]
        src += self.vector_loop(vec, 4) + (self.map_loop(tail, 4) if tail < self.n else [])
        src += ["  } else {"] + self.map_loop(0, 4) + ["  }", "}"]
        return src, [Launch(self.name, grid_for(self.n // VECTOR, cap=MAP_GRID), BLOCK,
                            self.args)]

    def map_loop(self, start: int, indent: int) -> list[str]:
        """The scalar grid-stride loop over the flat elements from ``start`` on."""
        body = self.compute(self.sinks(0), self.element_idx(), "i", True)
        return self.loop(" " * indent + self.grid_stride("i", self.n, start), self.n - start,
                         self.unravel(body, "i", list(range(self.nd))) + body, indent)

    def vector_pointers(self) -> dict[Value, str]:
        """The pointers the vector path accesses as float4: float32 inputs of the kernel's
        own shape and float32 outputs, if the kernel is large enough to have one."""
        if self.n < VECTOR_MIN:
            return {}
        flat = {**self.ptr, **self.out}
        return {v: name for v, name in flat.items()
                if v.type.dtype == F32 and v.type.shape == self.shape}

    def vector_loop(self, vec: dict[Value, str], indent: int) -> list[str]:
        """A grid-stride loop over groups of ``VECTOR`` elements: float4 loads of the
        inputs of ``vec``, each element computed in a scope of its own (reading one lane,
        writing one lane of the outputs of ``vec``), float4 stores."""
        groups = self.n // VECTOR
        body = [f"const float4 {name}v = reinterpret_cast<const float4*>({name})[g];"
                for v, name in vec.items() if v in self.ptr]
        body += [f"float4 {name}v;" for v, name in vec.items() if v in self.out]
        for k, lane in enumerate("xyzw"):
            self.lane = {v: f"{name}v.{lane}" for v, name in vec.items()}
            lines = self.compute(self.sinks(0), self.element_idx(), "i", True)
            pre = self.unravel(lines, "i", list(range(self.nd)))
            if re.search(r"\bi\b", "\n".join(pre + lines)):
                first = f"{self.lit(VECTOR)} * g" + (f" + {self.lit(k)}" if k else "")
                pre.insert(0, f"const {self.I} i = {first};")
            body += [f"{{  // element {VECTOR} * g + {k}"] + _indent(pre + lines, 2) + ["}"]
        self.lane = {}
        body += [f"reinterpret_cast<float4*>({name})[g] = {name}v;"
                 for v, name in vec.items() if v in self.out]
        return self.loop(" " * indent + self.grid_stride("g", groups), groups, body, indent)

    def emit_full(self) -> tuple[list[str], list[Launch]]:
        """Stage 1 reduces a share of the elements per block; stage 2 (one block) combines
        the blocks' partials in block order, then computes the per-row values."""
        reds = self.numbered(self.kern.reductions)
        nblocks = grid_for(self.n, BLOCK, MAX_PARTIALS)
        args = list(self.args)
        if nblocks > 1:
            args += [Arg(f"p{n}", f"{CUDA.dtype_name(node.out.type.dtype)}* __restrict__",
                         "scratch", node.out.type.dtype, (nblocks,)) for n, node in reds]
        shared = [f"  __shared__ {CUDA.dtype_name(node.out.type.dtype)} sh{n}[NWARPS + 1];"
                  for n, node in reds]
        ids = ["  const unsigned lane = threadIdx.x % 32u, warp = threadIdx.x / 32u;"]
        zero = ["0"] * self.nd

        def with_row(lines: list[str]) -> list[str]:
            return ["const unsigned row = 0;"] + lines if "row" in "".join(lines) else lines

        def finish(first: int) -> list[str]:
            lines = self.finish_reductions(reds, None)
            for p in range(first, max(self.phase.values()) + 1):
                lines += self.row_values(p, zero, None)
            return with_row(lines)

        # per-row values that need no reduction, which the elements may read (x > v0 of
        # a [1, 1] v0), before the loop; their outputs stored by one thread of the grid
        before = with_row(self.row_values(0, zero, "blockIdx.x == 0 && threadIdx.x == 0"))
        body = self.compute(self.sinks(0), self.element_idx(), "i", True)
        src = [self.signature(self.name, BLOCK, args), f"#define NWARPS {BLOCK // WARP}"]
        src += shared + ids + _indent(before + self.accumulators(reds), 2)
        src += self.loop("  " + self.grid_stride("i", self.n), self.n,
                         self.unravel(body, "i", list(range(self.nd))) + body, 2)
        src += _indent(self.group_reduce(reds, "block"), 2)
        if nblocks == 1:
            src += ["  if (threadIdx.x == 0) {  // one block: the result is final"]
            src += _indent(finish(1), 4)
        else:
            src += ["  if (threadIdx.x == 0) {  // this block's partial results"]
            src += [f"    p{n}[blockIdx.x] = acc{n};" for n, _ in reds]
        src += ["  }", "#undef NWARPS", "}"]
        launches = [Launch(self.name, nblocks, BLOCK, args)]
        if nblocks == 1:
            return src, launches
        combine = f"{self.name}_combine"
        self.local = {}
        src += ["", f"// {combine}: combines the {nblocks} partial results of {self.name}",
                self.signature(combine, BLOCK, args), f"#define NWARPS {BLOCK // WARP}"]
        src += shared + ids + _indent(self.accumulators(reds), 2)
        src += [f"  for (unsigned b = threadIdx.x; b < {nblocks}u; b += blockDim.x) {{"]
        src += [f"    acc{n} = {self.combine(node, f'acc{n}', f'p{n}[b]')};" for n, node in reds]
        src += ["  }"] + _indent(self.group_reduce(reds, "block"), 2)
        src += ["  if (threadIdx.x == 0) {"] + _indent(finish(0), 4)  # (a kernel of its own)
        src += ["  }", "#undef NWARPS", "}"]
        return src, launches + [Launch(combine, 1, BLOCK, args)]

    def emit_rows(self, rows: tuple[int, ...]) -> tuple[list[str], list[Launch]]:
        lead = [d for d in range(self.nd) if d not in rows]
        nrows = math.prod(self.shape[d] for d in lead)
        length = math.prod(self.shape[d] for d in rows)
        group, block, grid = row_plan(nrows, length)
        per_block = block // WARP if group == "warp" else 1
        src = [self.signature(self.name, block, self.args)]
        if group == "warp":
            src += [f"  // one warp per row: {nrows} rows of {length}, {per_block} per block",
                    f"  for ({self.I} row = ({self.I})blockIdx.x * {per_block}u + "
                    f"threadIdx.x / 32u; row < {self.lit(nrows)}; "
                    f"row += ({self.I})gridDim.x * {per_block}u) {{"]
            t, g = "lane", "32u"
        else:
            src += [f"  // one block per row: {nrows} rows of {length}",
                    f"#define NWARPS {block // WARP}",
                    "  const unsigned lane = threadIdx.x % 32u, warp = threadIdx.x / 32u;"]
            src += [f"  __shared__ {CUDA.dtype_name(n.out.type.dtype)} sh{i}[NWARPS + 1];"
                    for i, n in self.numbered(self.kern.reductions)]
            src += [f"  for ({self.I} row = blockIdx.x; row < {self.lit(nrows)}; "
                    f"row += gridDim.x) {{"]
            t, g = "threadIdx.x", "blockDim.x"
        lane_at = len(src) - 1
        row_idx = ["0" if d in rows else f"r{d}" for d in range(self.nd)]
        inner: list[str] = []
        for p in range(max(self.phase.values()) + 1):
            inner += self.row_values(p, row_idx, f"{t} == 0")
            sinks = self.sinks(p)
            if not sinks:
                continue
            reds = self.numbered(sinks)
            inner.append(f"// phase {p}: " + ", ".join(n.op for n in sinks))
            body = self.compute(sinks, self.element_idx(), "i", True)
            pre = self.unravel(body, "i", list(range(self.nd)))
            inner += self.accumulators(reds)
            if re.search(r"\bi\b", "\n".join(pre + body)):
                pre.insert(0, f"const {self.I} i = row * {self.lit(length)} + j;")
            inner += self.loop(f"for ({self.I} j = {t}; j < {self.lit(length)}; j += {g}) {{",
                               length, pre + body, 0)
            inner += self.group_reduce(reds, group) + self.finish_reductions(reds, f"{t} == 0")
        text = "\n".join(inner)
        if group == "warp" and re.search(r"\blane\b", text):
            src.insert(lane_at, "  const unsigned lane = threadIdx.x % 32u;")
        sizes = [self.shape[d] for d in lead]
        for k, d in enumerate(lead):  # the row's own multi-index, where per-row nodes use it
            if re.search(rf"\br{d}\b", text):
                stride = math.prod(sizes[k + 1:])
                e = "row" if stride == 1 else f"row / {self.lit(stride)}"
                e = e if k == 0 else f"({e}) % {self.lit(sizes[k])}"
                src.append(f"    const {self.I} r{d} = {e};")
        src += _indent(inner, 4) + ["  }"]
        src += ["#undef NWARPS", "}"] if group == "block" else ["}"]
        return src, [Launch(self.name, grid, block, self.args)]

    def emit_columns(self) -> tuple[list[str], list[Launch]]:
        """Reductions over leading or middle axes, per set of reduced axes: tiles of up to
        32 results (``ColumnPlan``) by one share of the reduced elements, each block's row
        lanes combined in shared memory in lane order; with several shares a second kernel
        combines the shares' partial results in share order (deterministic). Elementwise
        outputs are stored in the first set's loop, which visits every element once."""
        groups: dict[tuple[int, ...], list[Node]] = {}
        for node in self.kern.reductions:
            groups.setdefault(node.attrs["axis"] if node.inputs[0].type.ndim else (), []).append(
                node)
        maps = [n for n in self.kern.nodes if n.op not in LOOP_REDUCTIONS and n.out in self.out]
        plans = [ColumnPlan.of(self.shape, axes) for axes in groups]
        args = list(self.args)
        for plan, nodes in zip(plans, groups.values(), strict=True):
            if plan.shares > 1:
                args += [Arg(f"p{n}", f"{CUDA.dtype_name(node.out.type.dtype)}* __restrict__",
                             "scratch", node.out.type.dtype, (plan.shares * plan.results,))
                         for n, node in self.numbered(nodes)]
        src = [self.signature(self.name, BLOCK, args)]
        for g, (plan, nodes) in enumerate(zip(plans, groups.values(), strict=True)):
            src += _indent(self.column_tiles(plan, self.numbered(nodes), [] if g else maps), 2)
        src.append("}")
        launches = [Launch(self.name, max(p.grid for p in plans), BLOCK, args)]
        split = [(p, self.numbered(nodes)) for p, nodes in zip(plans, groups.values(),
                                                               strict=True) if p.shares > 1]
        if not split:
            return src, launches
        combine = f"{self.name}_combine"
        src += ["", f"// {combine}: each result from its shares' partial results, in order",
                self.signature(combine, BLOCK, args)]
        for plan, reds in split:
            section = self.accumulators(reds)
            at = f"s * {self.lit(plan.results)} + q"
            section += [f"for (unsigned s = 0; s < {plan.shares}u; ++s) {{"]
            section += [f"  acc{n} = {self.combine(node, f'acc{n}', f'p{n}[{at}]')};"
                        for n, node in reds] + ["}"]
            section += [f"{self.out[node.out]}[q] = acc{n};" for n, node in reds
                        if node.out in self.out]
            src += self.loop("  " + self.grid_stride("q", plan.results), plan.results, section, 2)
        src.append("}")
        most = max(p.results for p, _ in split)
        return src, launches + [Launch(combine, grid_for(most), BLOCK, args)]

    def column_tiles(self, plan: ColumnPlan, reds: list[tuple[int, Node]],
                     maps: list[Node]) -> list[str]:
        """One set of reduced axes: a block-stride loop over its tiles (results ``q`` by
        share ``s``); thread ``(tr, tq)`` accumulates result ``tq`` of the tile over rows
        ``tr, tr + rows, ...`` of the share; ``maps``' outputs are stored on the way."""
        kept = [d for d in range(self.nd) if d not in plan.axes]
        body = self.compute([n for _, n in reds] + maps, self.element_idx(), "i", bool(maps))
        if re.search(r"\bi\b", "\n".join(body)):  # the flat index, from the multi-index
            strides = [math.prod(self.shape[d + 1:]) for d in range(self.nd)]
            flat = " + ".join(f"i{d}" if st == 1 else f"i{d} * {self.lit(st)}"
                              for d, st in enumerate(strides))
            body.insert(0, f"const {self.I} i = {flat};")
        pre = self.unravel(body, "q", kept) + self.unravel(body, "r", list(plan.axes))
        T, R, tq, rows = self.I, plan.inner, plan.tile, BLOCK // plan.tile
        share = self.lit(plan.share)
        tile = [f"const {T} q = (t % {self.lit(plan.tiles)}) * {self.lit(tq)} + tq;"]
        if plan.shares > 1:
            tile += [f"const {T} s = t / {self.lit(plan.tiles)};",
                     f"const {T} end = (s + 1) * {share} < {self.lit(R)} ? (s + 1) * {share} "
                     f": {self.lit(R)};"]
            first, end = f"s * {share} + tr", "end"
        else:
            first, end = "tr", self.lit(R)
        tile += self.accumulators(reds)
        rloop = self.loop(f"for ({T} r = {first}; r < {end}; r += {rows}u) {{", R, pre + body, 2)
        tile += [f"if (q < {self.lit(plan.results)}) {{"] + rloop + ["}"]
        tile += [f"sh{n}[threadIdx.x] = acc{n};" for n, _ in reds] + ["__syncthreads();"]
        done = [f"for (unsigned k = 1; k < {rows}u; ++k) {{"]
        done += [f"  acc{n} = {self.combine(node, f'acc{n}', f'sh{n}[k * {tq}u + tq]')};"
                 for n, node in reds] + ["}"]
        if plan.shares > 1:
            done += [f"p{n}[s * {self.lit(plan.results)} + q] = acc{n};" for n, _ in reds]
        else:
            done += [f"{self.out[node.out]}[q] = acc{n};" for n, node in reds
                     if node.out in self.out]
        tile += [f"if (tr == 0 && q < {self.lit(plan.results)}) {{"] + _indent(done, 2) + ["}"]
        tile += ["__syncthreads();  // the shared values are read before the next tile's"]
        head = [f"{{  // reduce axes {list(plan.axes)}: {plan.results} results of {R} elements"
                f" in tiles of {tq} results x {plan.share} elements ({plan.shares} shares)",
                f"  const unsigned tq = threadIdx.x % {tq}u, tr = threadIdx.x / {tq}u;"]
        head += [f"  __shared__ {CUDA.dtype_name(node.out.type.dtype)} sh{n}[{BLOCK}];"
                 for n, node in reds]
        ntiles = plan.tiles * plan.shares
        return head + self.loop(f"  for ({T} t = blockIdx.x; t < {self.lit(ntiles)}; "
                                "t += gridDim.x) {", ntiles, tile, 2) + ["}"]


@dataclass(frozen=True)
class ColumnPlan:
    """How a columns kernel reduces ``axes``: ``results`` results of ``inner`` elements
    each, in tiles of ``tile`` results (at most a warp's 32, so that neighbouring threads
    read neighbouring elements) by ``BLOCK // tile`` row lanes, the reduced elements cut
    into ``shares`` shares of ``share`` so that ``tiles * shares`` blocks fill the GPU."""

    axes: tuple[int, ...]
    results: int
    inner: int
    tile: int
    tiles: int
    shares: int
    share: int

    @classmethod
    def of(cls, shape: tuple[int, ...], axes: tuple[int, ...]) -> ColumnPlan:
        results = math.prod(s for d, s in enumerate(shape) if d not in axes)
        inner = math.prod(shape[d] for d in axes)
        tile = min(WARP, 1 << max(results - 1, 0).bit_length())
        tiles = -(-results // tile)
        rows = BLOCK // tile
        shares = max(1, min(-(-COLUMN_BLOCKS // max(tiles, 1)),
                            -(-inner // (rows * COLUMN_MIN_ROWS))))
        share = max(1, -(-inner // shares))
        return cls(tuple(axes), results, inner, tile, tiles, -(-inner // share) if inner else 1,
                   share)

    @property
    def grid(self) -> int:
        return max(1, min(self.tiles * self.shares, MAX_GRID))


def _guarded(guard: str | None, statement: str) -> str:
    """``statement`` for one thread of the group (``guard``), or as is."""
    return statement if guard is None else f"if ({guard}) {statement}"


def _indent(lines: list[str], n: int) -> list[str]:
    return [line if line.startswith("#") else " " * n + line for line in lines]
