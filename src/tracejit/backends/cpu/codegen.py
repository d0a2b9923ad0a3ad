"""Generate source for one graph: Numba loop kernels plus a plain-Python runner.

Each loop kernel is a loop nest over its iteration shape, compiled as a C function
``void kernel(args)`` (see ``native.py``): its inputs, outputs and scratch arrays arrive as
a tuple of C-contiguous arrays, read through pointers with static shapes, so indexing
compiles to constant strides and LLVM vectorises the innermost loop. Inputs keep their
own (unbroadcast) shapes and are indexed at the loop axes the fusion pass gives them
(``Kernel.axes``: NumPy's broadcasting). Reductions
accumulate into keepdims-shaped outputs the runner pre-fills with the identity. A large
kernel runs its outer loop on libgomp's threads, each taking a contiguous share. Library
steps call the op's NumPy implementation (BLAS for matmul). The runner is ordinary
Python so a user can read what runs; ``run`` is the single entry point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ir import Graph, Node, Value
from ...ir.registry import REGISTRY, loop_dtypes
from ...passes.contract import SMALL_K, split_skinny_matmuls
from ...passes.fusion import LOOP_REDUCTIONS, Kernel, fuse, is_reduction, needed, phases
from ...profiler import StepInfo
from . import ops

_IDENTITY = {"sum": 0, "prod": 1, "any": False, "all": True}


def _numba_dtype(dtype: np.dtype) -> bool:
    return dtype.kind in "biu" or dtype in (np.float32, np.float64)  # no float16, no complex



def fusible(node: Node) -> bool:
    if not all(_numba_dtype(v.type.dtype) for v in (*node.inputs, node.out)):
        return False
    if node.out.type.ndim == 0 and node.op not in LOOP_REDUCTIONS:
        return False  # scalar arithmetic: NumPy takes a microsecond, a compile 0.2 s
    if node.op == "matmul":
        a, b = (v.type for v in node.inputs)
        return (a.ndim == b.ndim == 2 and a.shape[1] <= SMALL_K and node.out.type.dtype.kind == "f"
                and a.dtype == b.dtype == node.out.type.dtype)
    if node.op in _IDENTITY or node.op in ("max", "min"):
        return node.out.type.dtype.kind in "biuf"
    if node.op == "convert":
        src, dst = node.inputs[0].type.dtype, node.out.type.dtype
        # float -> int is undefined for NaN/inf in LLVM (NumPy gives INT_MIN): leave to NumPy
        return not (src.kind == "f" and dst.kind in "iu") and "c" not in src.kind + dst.kind
    dts = loop_dtypes(node)
    return (dts is not None and all(_numba_dtype(d) for d in dts)
            and ops.template(node.op, dts[:-1]) is not None)


def _typename(dtype: np.dtype) -> str:
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def _literal(value) -> str:
    v = value.item() if isinstance(value, (np.ndarray, np.generic)) else value
    if isinstance(v, float) and not math.isfinite(v):
        return "np.nan" if math.isnan(v) else ("np.inf" if v > 0 else "-np.inf")
    return repr(v)


class _Module:
    """Accumulates the generated kernels, the runner, and the objects they refer to."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.lines: list[str] = [f"# tracejit CPU backend: {graph.name}", "import numpy as np",
                                 "from numba import carray, cfunc, types",
                                 "from tracejit.backends.cpu.abi import U, arg, barrier, "
                                 "num_threads, stack, thread_id", ""]
        self.math: set[str] = set()  # functions of backends/cpu/math.py the kernels call
        self.kernels: list[str] = []  # names of the loop kernels, in step order
        self.namespace: dict = {"np": np}
        self.consts: dict[Value, object] = {
            n.out: n.attrs["value"] for n in graph.nodes if n.op == "constant"}
        self.names: dict[Value, str] = {}
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


@dataclass
class Generated:
    """``kernels``: the Numba module (compiled once, then loaded from the disk cache);
    ``runner``: the Python module defining ``run``, executed with ``namespace`` plus the
    compiled kernels bound to the names ``kernel_names``."""

    kernels: str
    runner: str
    namespace: dict
    kernel_names: list[str]

    @property
    def source(self) -> str:
        return self.kernels + "\n" + self.runner


def partition(graph: Graph) -> tuple[Graph, list[Kernel]]:
    """The steps ``graph`` runs as, in order: the graph after this generator's own rewrite
    (skinny matmuls split into products) and one fusion ``Kernel`` per loop kernel or
    library call (``check=True`` runs them one at a time)."""
    graph = split_skinny_matmuls(graph)
    return graph, fuse(graph, fusible)


def generate(graph: Graph, profile: bool = False) -> Generated:
    """The generated code. With ``profile`` the runner times every step and calls
    ``record(step, seconds)``; ``namespace["steps"]`` describes the steps."""
    graph, kernels = partition(graph)
    mod = _Module(graph)
    loop_inputs = {v for k in kernels if k.kind == "loop" for v in k.inputs if v.type.ndim}
    body: list[str] = []
    for v in graph.inputs:  # the kernels read C-contiguous arrays of the signature's dtype
        if v in loop_inputs:
            name = mod.names[v]
            body.append(f"{name} = np.ascontiguousarray({name}, {_typename(v.type.dtype)})")
    for k, kern in enumerate(kernels):
        where = kern.nodes[0].loc.short if kern.nodes[0].loc else "?"
        start = len(body)
        if kern.kind == "loop":
            _emit_loop(mod, k, kern, body, where)
        else:
            _emit_library(mod, k, kern.nodes[0], body, where, kern.nodes[0].out in loop_inputs)
        if profile:
            body.insert(start, "t_start = clock()")
            body.append(f"record({k}, clock() - t_start)")
    args = ", ".join(mod.names[v] for v in graph.inputs)
    outs = ", ".join(mod.name(v) for v in graph.outputs)
    runner = ["# runner: plain Python, calling the kernels above through ctypes",
              f"def run({args}):", "    step = -1", "    try:"]
    runner += [f"        {line}" for line in body or ["pass  # nothing to compute"]]
    runner += [
        "    except (IndexError, ValueError, OverflowError, ZeroDivisionError) as e:",
        "        raise located(e, step) from None",
        f"    return [{outs}]",
    ]
    if mod.math:
        mod.lines.insert(4, f"from tracejit.backends.cpu.math import {', '.join(sorted(mod.math))}")
    mod.namespace["locations"] = [k.nodes[0].loc for k in kernels]
    mod.namespace["steps"] = [
        StepInfo(f"{'kernel' if k.kind == 'loop' else 'lib'}{i}", ", ".join(n.op for n in k.nodes),
                 k.nodes[0].loc, sum(_nbytes(v) for v in k.inputs + k.outputs))
        for i, k in enumerate(kernels)
    ]
    return Generated("\n".join(mod.lines) + "\n", "\n".join(runner) + "\n", mod.namespace,
                     mod.kernels)


def _nbytes(v: Value) -> int:
    return v.type.size * v.type.dtype.itemsize


def _emit_library(mod: _Module, k: int, node: Node, body: list[str], where: str,
                  kernel_input: bool) -> None:
    fn = f"lib{k}"
    impl = REGISTRY[node.op].impl
    mod.namespace[fn] = (lambda impl, attrs: lambda *a: impl(*a, **attrs))(impl, node.attrs)
    call = f"{fn}({', '.join(mod.name(v) for v in node.inputs)})"
    out = node.out.type
    if kernel_input:  # kernels read C-contiguous arrays of exactly the IR's type
        call = f"operand({call}, {_typename(out.dtype)}, {out.shape})"
    body.append(f"step = {k}; {mod.name(node.out)} = {call}  # {node.op}, {where}")


PARALLEL_MIN_SIZE = 1 << 17  # below this, a thread launch costs more than it saves
PARALLEL_BLOCKS = 16  # blocks of a reduced first dimension, each with partial results


def _keepdims_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    axes = node.attrs["axis"]
    return tuple(1 if d in axes else s for d, s in enumerate(shape))


def _identity(node: Node):
    dtype = node.out.type.dtype
    if node.op in _IDENTITY:
        return _IDENTITY[node.op]
    big = node.op == "min"
    if dtype.kind == "f":
        return np.inf if big else -np.inf
    if dtype.kind in "iu":
        return np.iinfo(dtype).max if big else np.iinfo(dtype).min
    return big


def _update(node: Node, acc: str, v: str) -> str:
    return {"sum": f"{acc} + {v}", "prod": f"{acc} * {v}", "max": ops._MAX.format(acc, v),
            "min": ops._MIN.format(acc, v), "any": f"{acc} | ({v} != 0)",
            "all": f"{acc} & ({v} != 0)"}[node.op]


def _emit_loop(mod: _Module, k: int, kern: Kernel, body: list[str], where: str) -> None:
    """Emit one loop kernel.

    Three shapes of loop nest: *map* (no reductions: every dimension is an outer loop);
    *rows* (all reductions over the same trailing axes: outer loops over the leading
    dimensions, then one inner loop nest per phase, accumulators in registers); *scatter*
    (other reductions: one loop nest accumulating into keepdims-shaped arrays)."""
    shape = kern.shape or (1,)  # a 0-d kernel runs as one element
    nd = len(shape)
    reds = kern.reductions
    row_axes = kern.rows or ()
    scatter = bool(reds) and not row_axes
    split = nd if not reds else (0 if scatter else nd - len(row_axes))
    big = math.prod(shape) >= PARALLEL_MIN_SIZE
    # A large scatter kernel runs its first dimension in parallel. Reductions over that
    # dimension then accumulate per block of it into partial arrays combined at the end;
    # the others write disjoint elements per i0.
    blocked: list[Node] = []
    if scatter and big and shape[0] > 1:
        split = 1
        blocked = [n for n in reds if 0 in n.attrs["axis"]]
    idx = ", ".join(f"i{d}" for d in range(nd))
    params: list[str] = []  # the kernel's names for its arguments, in tuple order
    call: list[str] = []  # the runner's expressions for them
    unpack: list[str] = []  # the kernel's statements reading them

    def param(local: str, runner: str, dtype: np.dtype, shape: tuple[int, ...] | None) -> None:
        if shape is None and dtype.kind == "b":  # a bool pointer loads a byte, not an i1
            unpack.append(f"{local} = arg(args, {len(params)}, np.uint8)[0] != 0")
        else:
            pointer = f"arg(args, {len(params)}, {_typename(dtype)})"
            unpack.append(f"{local} = {pointer}[0]" if shape is None else
                          f"{local} = carray({pointer}, {shape})")
        params.append(local)
        call.append(runner)

    pre: list[str] = []
    post: list[str] = []
    ref: dict[Value, str] = {}  # how the kernel reads a value
    typed: set[Value] = set()  # values already of their IR dtype (no cast needed)
    contracted = {v for n in kern.nodes if n.op == "matmul" for v in n.inputs}
    elementwise_use = {v for n in kern.nodes if n.op != "matmul" for v in n.inputs}
    for j, v in enumerate(kern.inputs):
        if v in contracted:  # matmul operands are read whole, with their own indices
            param(f"m{j}", mod.name(v), v.type.dtype, v.type.shape)
            ref[("matmul", v)] = f"m{j}"
        if v in contracted and v not in elementwise_use:
            continue
        if v in mod.consts and v.type.ndim == 0:
            ref[v] = _literal(mod.consts[v])
        elif v.type.ndim == 0:
            T = _typename(v.type.dtype)
            param(f"s{j}", f"np.asarray({mod.name(v)}, {T})", v.type.dtype, None)
            ref[v] = f"s{j}"
            typed.add(v)
        else:  # read unbroadcast: a zero-stride view would stop vectorisation
            param(f"x{j}", mod.name(v), v.type.dtype, v.type.shape)
            ref[v] = f"x{j}[{_index(kern.axes[v])}]"
            typed.add(v)
    phase = phases(kern)
    for n, node in enumerate(kern.nodes):
        ref[node.out] = f"v{n}"
        typed.add(node.out)
        if node.out in kern.outputs:
            name, T = mod.name(node.out), _typename(node.out.type.dtype)
            if node.op in LOOP_REDUCTIONS:
                alloc = _keepdims_shape(node, shape)
                fill = f"np.full({alloc}, {_literal(_identity(node))}, {T})"
                pre.append(f"{name} = {fill}" if scatter else f"{name} = np.empty({alloc}, {T})")
            else:
                alloc = (node.out.type.shape if kern.is_row_level(node) else shape) or (1,)
                pre.append(f"{name} = np.empty({alloc}, {T})")
            param(f"o{n}", name, node.out.type.dtype, alloc)
            if alloc != node.out.type.shape:
                post.append(f"{name} = {name}.reshape({node.out.type.shape})")

    def expr(node: Node) -> str:
        if node.op == "matmul":  # small K: unrolled dot product of a row and a column
            a, b = (ref[("matmul", v)] for v in node.inputs)
            i, j = f"i{nd - 2}", f"i{nd - 1}"
            # from +0, as NumPy's (and BLAS's) dot does: -0.0 products sum to +0.0
            return " + ".join([f"{_typename(node.out.type.dtype)}(0)"] + [
                f"{a}[{i}, {k}] * {b}[{k}, {j}]" for k in range(node.inputs[0].type.shape[1])])
        dts = loop_dtypes(node)
        args = [ref[v] if v in typed and v.type.dtype == dt else f"{_typename(dt)}({ref[v]})"
                for v, dt in zip(node.inputs, dts, strict=False)]
        if node.op == "convert" and node.out.type.dtype.kind == "b":
            return f"({ref[node.inputs[0]]} != 0)"
        if node.op == "convert":
            return args[0]
        if node.op in ops.VECTOR_MATH and dts[0].kind == "f":
            mod.math.add(ops.math_function(node.op, dts[0]))
        text = ops.template(node.op, dts[:-1]).format(*args)
        if node.op == "power" and dts[0].kind == "f" and node.inputs[1].type.ndim == 0:
            # NumPy's power loop takes sqrt for a broadcast exponent of 0.5 (-0.0 -> -0.0,
            # -inf -> nan, where pow gives +0.0 and +inf)
            text = f"(np.sqrt({args[0]}) if {args[1]} == 0.5 else {text})"
        return text

    row_level = [n for n in kern.nodes if kern.is_row_level(n)]

    def compute(sinks: list[Node], done: set[Value], lane: str | None = None) -> list[str]:
        """Statements computing ``sinks`` from the kernel's values (recomputing cheap
        elementwise nodes a later phase needs again). With ``lane``, reductions accumulate
        into lane ``lane`` of their partial-accumulator array."""
        lines: list[str] = []
        for node in kern.nodes:
            if node.out in done or node in row_level or not needed(node, sinks, kern):
                continue
            done.add(node.out)
            T = _typename(node.out.type.dtype)
            if node.op in LOOP_REDUCTIONS:
                src = node.inputs[0]
                v = ref[src] if src in typed and src.type.dtype == node.out.type.dtype else \
                    f"{T}({ref[src]})"
                out = f"p{kern.nodes.index(node)}[b, " if node in blocked else \
                    f"o{kern.nodes.index(node)}["
                acc = f"{out}{_red_index(node, nd)}]" if scatter else ref[node.out]
                if lane is not None:
                    acc = f"{ref[node.out]}_lanes[{lane}]"
                lines.append(f"{acc} = {T}({_update(node, acc, v)})  # {node.op}")
                continue
            lines.append(f"{ref[node.out]} = {T}({expr(node)})  # {node.op}")
            if node.out in kern.outputs:
                lines.append(f"o{kern.nodes.index(node)}[{idx}] = {ref[node.out]}")
        return lines

    n_phases = max(phase.values(), default=0) + 1
    # A large one-phase reduction over every axis runs in blocks of the first dimension,
    # in parallel, each block reducing into its own partial result, combined at the end.
    full = bool(reds) and not scatter and split == 0 and big and shape[0] > 1 and n_phases == 1
    parallel = (split > 0 or full) and big
    nblocks = min(shape[0], PARALLEL_BLOCKS)
    if full:
        lanes = LANE_BYTES // max(n.out.type.dtype.itemsize for n in reds)
        chunk = -(-shape[0] // PARALLEL_BLOCKS)
        chunk = -(-chunk // lanes) * lanes if nd == 1 else chunk
        nblocks = -(-shape[0] // chunk)
    for n in blocked if scatter else (reds if full else ()):  # per-block partial results
        j, T, name = kern.nodes.index(n), _typename(n.out.type.dtype), mod.name(n.out)
        if full:
            pshape = (nblocks,)
            pre.append(f"{name}_blocks = np.empty({pshape}, {T})")
        else:
            pshape = (nblocks, *_keepdims_shape(n, shape))
            pre.append(f"{name}_blocks = np.full({pshape}, {_literal(_identity(n))}, {T})")
        param(f"p{j}", f"{name}_blocks", n.out.type.dtype, pshape)
    src = [f"# kernel {k}: loop over {list(kern.shape)} ({', '.join(n.op for n in kern.nodes)})"
           f", {where}",
           "@cfunc(types.void(types.int64), error_model='numpy')",
           f"def kernel{k}(args):"]
    src += [f"    {line}" for line in unpack]
    indent = "    "
    if parallel:
        src.append(f"{indent}t, nt = thread_id(), num_threads()  # each thread takes a share")

    def share(n: int) -> str:
        return f"range(t * U({n}) // nt, (t + U(1)) * U({n}) // nt)"

    if blocked:
        src.append(f"{indent}for b in {share(nblocks)}:")
        indent += "    "
        src.append(f"{indent}for i0 in range(b * U({shape[0]}) // U({nblocks}), "
                   f"(b + U(1)) * U({shape[0]}) // U({nblocks})):")
        indent += "    "
    for d in range(1 if blocked else 0, split):
        rng = share(shape[d]) if d == 0 and parallel else f"range({shape[d]})"
        src.append(f"{indent}for i{d} in {rng}:")
        indent += "    "
    if full:
        src += [f"{indent}for b in {share(nblocks)}:", f"{indent}    lo = b * U({chunk})",
                f"{indent}    hi = min(U({shape[0]}), lo + U({chunk}))"]
        indent += "    "
    done: set[Value] = set()
    row_index = ", ".join("0" if d >= split else f"i{d}" for d in range(nd))
    for p in range(n_phases):
        for n in row_level:  # per-row values this phase uses, from earlier phases' results
            if phase[n.out] == p:
                T = _typename(n.out.type.dtype)
                src.append(f"{indent}{ref[n.out]} = {T}({expr(n)})  # {n.op}")
                if n.out in kern.outputs:
                    src.append(f"{indent}o{kern.nodes.index(n)}[{row_index}] = {ref[n.out]}")
        sinks = [n for n in kern.nodes if phase[n.out] == p and n not in row_level and
                 (n.op in LOOP_REDUCTIONS or n.out in kern.outputs)]
        if not scatter:
            for n in sinks:
                if n.op in LOOP_REDUCTIONS:
                    T = _typename(n.out.type.dtype)
                    src.append(f"{indent}{ref[n.out]} = {T}({_literal(_identity(n))})")
        if not sinks:
            continue
        done_inner = {v for v in done if v in ref and is_reduction(v, kern)}
        done_inner |= {n.out for n in row_level}
        phase_reds = [n for n in sinks if n.op in LOOP_REDUCTIONS]
        lanes = LANE_BYTES // max((n.out.type.dtype.itemsize for n in phase_reds), default=1)
        use_lanes = phase_reds and not scatter and split == nd - 1 and shape[-1] >= 2 * lanes
        if use_lanes:
            lo, hi = ("lo", "hi") if full else ("0", str(shape[-1]))
            end = f"hi - (hi - lo) % U({lanes})" if full else str(shape[-1] - shape[-1] % lanes)
            src += _lane_loops(phase_reds, lo, end, lanes, nd - 1, indent, ref,
                               compute(sinks, set(done_inner), "lane"))
            if full or shape[-1] % lanes:
                src.append(f"{indent}for i{nd - 1} in range({end}, {hi}):  # the remainder")
                src += [f"{indent}    {line}" for line in compute(sinks, done_inner)]
        else:
            inner = indent
            for d in range(split, nd):
                bounds = "lo, hi" if full and d == 0 else shape[d]
                src.append(f"{inner}for i{d} in range({bounds}):")
                inner += "    "
            src += [f"{inner}{line}" for line in compute(sinks, done_inner)]
        if use_lanes:
            src.append(f"{indent}for lane in range({lanes}):  # combine the lanes")
            for n in phase_reds:
                T = _typename(n.out.type.dtype)
                src.append(f"{indent}    {ref[n.out]} = "
                           f"{T}({_update(n, ref[n.out], f'{ref[n.out]}_lanes[lane]')})")
        done |= {n.out for n in sinks if n.op in LOOP_REDUCTIONS}
        if not scatter:
            for n in sinks:
                if n.op in LOOP_REDUCTIONS and n.out in kern.outputs:
                    j = kern.nodes.index(n)
                    dest = f"p{j}[b]" if full else f"o{j}[{_red_index(n, nd)}]"
                    src.append(f"{indent}{dest} = {ref[n.out]}")
    if full or blocked:
        src += ["    barrier()  # wait for every block",
                "    if t == 0:  # thread 0 combines the blocks' partial results"]
    for n in reds if full else ():
        j, T = kern.nodes.index(n), _typename(n.out.type.dtype)
        src += [f"        r{j} = {T}({_literal(_identity(n))})",
                f"        for b in range({nblocks}):",
                f"            r{j} = {T}({_update(n, f'r{j}', f'p{j}[b]')})",
                f"        o{j}[{_red_index(n, nd)}] = r{j}"]
    for n in blocked:
        j, T = kern.nodes.index(n), _typename(n.out.type.dtype)
        src += [f"        for b in range({nblocks}):",
                f"            for jj in np.ndindex({_keepdims_shape(n, shape)}):",
                f"                o{j}[jj] = {T}({_update(n, f'o{j}[jj]', f'p{j}[b][jj]')})"]
    mod.lines += src + [""]
    mod.kernels.append(f"kernel{k}")
    body.extend(f"step = {k}; {line}" for line in pre)
    launch = f"parallel(kernel{k}, args)" if parallel else f"kernel{k}(id(args))"
    body.append(f"step = {k}; args = ({', '.join(call)}{',' * (len(call) == 1)}); {launch}")
    body.extend(post)


def _index(axes) -> str:
    """Index an input held at ``axes`` of the loop (the fusion pass's ``Kernel.axes``):
    each dimension by its loop variable, a size-1 dimension at 0."""
    return ", ".join("0" if a is None else f"i{a}" for a in axes)


LANE_BYTES = 64  # one AVX-512 register of partial accumulators per reduction


def _lane_loops(reds, lo, end, lanes, d, indent, ref, body) -> list[str]:
    """A reduction over a row as ``lanes`` independent partial accumulators: a float sum
    cannot vectorise otherwise (reassociating it needs fastmath, which the math module's
    error-free transformations forbid)."""
    lines = []
    for r in reds:
        acc, T = f"{ref[r.out]}_lanes", _typename(r.out.type.dtype)
        lines += [f"{indent}{acc} = carray(stack({lanes}, {T}), ({lanes},))",
                  f"{indent}for lane in range({lanes}):",
                  f"{indent}    {acc}[lane] = {_literal(_identity(r))}"]
    lines.append(f"{indent}for c in range(U({lo}), U({end}), U({lanes})):")  # unsigned: see abi
    lines.append(f"{indent}    for lane in range(U({lanes})):")
    lines.append(f"{indent}        i{d} = c + lane")
    lines += [f"{indent}        {line}" for line in body]
    return lines



def _red_index(node: Node, nd: int) -> str:
    axes = node.attrs["axis"] if node.inputs[0].type.ndim else ()
    return ", ".join("0" if d in axes else f"i{d}" for d in range(nd))
