"""Generate Python source for one graph: Numba loop kernels plus a plain-Python runner.

Each loop kernel is a loop nest over its iteration shape. Inputs arrive as (possibly
zero-stride broadcast) views of that shape and are read with the full multi-index, so
broadcasting costs nothing and LLVM still vectorises the innermost loop. Reductions
accumulate into keepdims-shaped outputs the runner pre-fills with the identity. Library
steps call the op's NumPy implementation (BLAS for matmul). The runner is ordinary Python
so a user can read what runs; ``run`` is the single entry point.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Graph, Node, Value
from ...ir.registry import REGISTRY
from ...passes.contract import SMALL_K, split_skinny_matmuls
from ...passes.fusion import LOOP_REDUCTIONS, Kernel, fuse
from ...profiler import StepInfo
from . import ops, threads

threads.configure()  # before any generated kernel makes Numba start its thread pool

_IDENTITY = {"sum": 0, "prod": 1, "any": False, "all": True}


_COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def loop_dtypes(node: Node) -> tuple[np.dtype, ...] | None:
    """(input dtypes the op computes in..., output dtype)."""
    types = [v.type for v in node.inputs]
    if node.op in _COMPARISONS and any(t.weak and t.dtype.kind == "i" for t in types):
        # NumPy compares with a Python int exactly, even one outside the array's dtype
        # (int32_array == 2**40 is False): compare in int64, which holds both sides.
        if all(t.dtype.kind in "bi" or (t.dtype.kind == "u" and t.dtype.itemsize < 8)
               for t in types):
            i64 = np.dtype(np.int64)
            return (i64, i64, np.dtype(bool))
    if node.op == "where":
        out = node.out.type.dtype
        return (np.dtype(bool), out, out, out)
    if node.op == "convert":
        return (types[0].dtype, node.out.type.dtype)
    uf = REGISTRY[node.op].ufunc
    if uf is None:
        return None
    all_weak = all(t.weak for t in types)
    operands = tuple(t.dtype if all_weak else t.promotion_operand() for t in types)
    return tuple(uf.resolve_dtypes(operands + (None,)))


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
    """Accumulates the generated source and the objects it refers to by name."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.lines: list[str] = [f"# tracejit CPU backend: {graph.name}",
                                 "import numpy as np", "from numba import njit, prange", ""]
        self.math: set[str] = set()  # functions of backends/cpu/math.py the kernels call
        self.namespace: dict = {"np": np}
        self.consts: dict[Value, object] = {
            n.out: n.attrs["value"] for n in graph.nodes if n.op == "constant"}
        self.names: dict[Value, str] = {}
        for i, v in enumerate(graph.inputs):
            self.names[v] = f"a{i}"
        for i, v in enumerate(self.consts):
            self.names[v] = f"c{i}"
            self.namespace[f"c{i}"] = self.consts[v]

    def name(self, v: Value) -> str:
        if v not in self.names:
            self.names[v] = f"t{len(self.names)}"
        return self.names[v]


def generate(graph: Graph, profile: bool = False) -> tuple[str, dict]:
    """Module source and its namespace. With ``profile`` the runner times every step and
    calls ``record(step, seconds)``; ``namespace["steps"]`` describes the steps."""
    graph = split_skinny_matmuls(graph)
    mod = _Module(graph)
    kernels = fuse(graph, fusible)
    body: list[str] = []
    for k, kern in enumerate(kernels):
        where = kern.nodes[0].loc.short if kern.nodes[0].loc else "?"
        start = len(body)
        if kern.kind == "loop":
            _emit_loop(mod, k, kern, body, where)
        else:
            _emit_library(mod, k, kern.nodes[0], body, where)
        if profile:
            body.insert(start, "t_start = clock()")
            body.append(f"record({k}, clock() - t_start)")
    args = ", ".join(mod.names[v] for v in graph.inputs)
    outs = ", ".join(mod.name(v) for v in graph.outputs)
    mod.lines += [f"def run({args}):", "    step = -1", "    try:"]
    mod.lines += [f"        {line}" for line in body or ["pass  # nothing to compute"]]
    mod.lines += [
        "    except (IndexError, ValueError, OverflowError, ZeroDivisionError) as e:",
        "        raise located(e, step) from None",
        f"    return [{outs}]",
    ]
    if mod.math:
        mod.lines.insert(3, f"from tracejit.backends.cpu.math import {', '.join(sorted(mod.math))}")
    mod.namespace["locations"] = [k.nodes[0].loc for k in kernels]
    mod.namespace["steps"] = [
        StepInfo(f"{'kernel' if k.kind == 'loop' else 'lib'}{i}", ", ".join(n.op for n in k.nodes),
                 k.nodes[0].loc, sum(_nbytes(v) for v in k.inputs + k.outputs))
        for i, k in enumerate(kernels)
    ]
    return "\n".join(mod.lines) + "\n", mod.namespace


def _nbytes(v: Value) -> int:
    return v.type.size * v.type.dtype.itemsize


def _emit_library(mod: _Module, k: int, node: Node, body: list[str], where: str) -> None:
    fn = f"lib{k}"
    impl = REGISTRY[node.op].impl
    mod.namespace[fn] = (lambda impl, attrs: lambda *a: impl(*a, **attrs))(impl, node.attrs)
    call = f"{fn}({', '.join(mod.name(v) for v in node.inputs)})"
    if node.op in ("slice", "transpose") and node.out.type.size <= COPY_VIEWS_UP_TO:
        # a kernel reading a strided view compiles for any layout and does not vectorise
        call = f"np.ascontiguousarray({call})"
    body.append(f"step = {k}; {mod.name(node.out)} = {call}  # {node.op}, {where}")


COPY_VIEWS_UP_TO = 1 << 16  # elements: small sliced or transposed views are made contiguous


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
    row_axes = kern.rows or (kern.row_axes() if reds else ())
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
    params: list[str] = []
    call: list[str] = []
    pre: list[str] = []
    post: list[str] = []
    ref: dict[Value, str] = {}  # how the kernel reads a value
    typed: set[Value] = set()  # values already of their IR dtype (no cast needed)
    contracted = {v for n in kern.nodes if n.op == "matmul" for v in n.inputs}
    elementwise_use = {v for n in kern.nodes if n.op != "matmul" for v in n.inputs}
    for j, v in enumerate(kern.inputs):
        if v in contracted:  # matmul operands are read whole, with their own indices
            params.append(f"m{j}")
            call.append(mod.name(v))
            ref[("matmul", v)] = f"m{j}"
        if v in contracted and v not in elementwise_use:
            continue
        if v in mod.consts and v.type.ndim == 0:
            ref[v] = _literal(mod.consts[v])
        elif v.type.ndim == 0:
            params.append(f"s{j}")
            call.append(f"scalar({mod.name(v)})")
            ref[v] = f"s{j}"
        else:  # read unbroadcast: a zero-stride view would stop vectorisation under prange
            params.append(f"x{j}")
            call.append(mod.name(v))
            ref[v] = f"x{j}[{_broadcast_index(v.type.shape, shape)}]"
            typed.add(v)
    phase = _phases(kern)
    for n, node in enumerate(kern.nodes):
        ref[node.out] = f"v{n}"
        typed.add(node.out)
        if node.out in kern.outputs:
            name, T = mod.name(node.out), _typename(node.out.type.dtype)
            params.append(f"o{n}")
            call.append(name)
            if node.op in LOOP_REDUCTIONS:
                kshape = _keepdims_shape(node, shape)
                fill = f"np.full({kshape}, {_literal(_identity(node))}, {T})"
                pre.append(f"{name} = {fill}" if scatter else f"{name} = np.empty({kshape}, {T})")
                if kshape != node.out.type.shape:
                    post.append(f"{name} = {name}.reshape({node.out.type.shape})")
            else:
                alloc = node.out.type.shape if kern.is_row_level(node) else shape
                pre.append(f"{name} = np.empty({alloc or (1,)}, {T})")
                if alloc != node.out.type.shape or not alloc:
                    post.append(f"{name} = {name}.reshape({node.out.type.shape})")

    def expr(node: Node) -> str:
        if node.op == "matmul":  # small K: unrolled dot product of a row and a column
            a, b = (ref[("matmul", v)] for v in node.inputs)
            i, j = f"i{nd - 2}", f"i{nd - 1}"
            return " + ".join(f"{a}[{i}, {k}] * {b}[{k}, {j}]"
                              for k in range(node.inputs[0].type.shape[1])) or "0"
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
            if node.out in done or node in row_level or not _needed(node, sinks, kern):
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
    src = [f"# kernel {k}: loop over {list(kern.shape)} ({', '.join(n.op for n in kern.nodes)})"
           f", {where}",
           f"@njit(error_model='numpy', parallel={parallel}, cache=False)",
           f"def kernel{k}({', '.join(params)}):"]
    indent = "    "
    nblocks = min(shape[0], PARALLEL_BLOCKS)
    for n in blocked:
        T, kshape = _typename(n.out.type.dtype), _keepdims_shape(n, shape)
        src.append(f"{indent}p{kern.nodes.index(n)} = np.full({(nblocks, *kshape)}, "
                   f"{_literal(_identity(n))}, {T})")
    if blocked:
        src.append(f"{indent}for b in prange({nblocks}):")
        indent += "    "
        src.append(f"{indent}for i0 in range(b * {shape[0]} // {nblocks}, "
                   f"(b + 1) * {shape[0]} // {nblocks}):")
        indent += "    "
    for d in range(1 if blocked else 0, split):
        rng = "prange" if d == 0 and parallel else "range"
        src.append(f"{indent}for i{d} in {rng}({shape[d]}):")
        indent += "    "
    if full:
        lanes = LANE_BYTES // max(n.out.type.dtype.itemsize for n in reds)
        chunk = -(-shape[0] // PARALLEL_BLOCKS)
        chunk = -(-chunk // lanes) * lanes if nd == 1 else chunk
        nblocks = -(-shape[0] // chunk)
        for n in reds:
            src.append(f"{indent}p{kern.nodes.index(n)} = "
                       f"np.empty({nblocks}, {_typename(n.out.type.dtype)})")
        src += [f"{indent}for b in prange({nblocks}):", f"{indent}    lo = b * {chunk}",
                f"{indent}    hi = min({shape[0]}, lo + {chunk})"]
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
        done_inner = {v for v in done if v in ref and _is_reduction(v, kern)}
        done_inner |= {n.out for n in row_level}
        phase_reds = [n for n in sinks if n.op in LOOP_REDUCTIONS]
        lanes = LANE_BYTES // max((n.out.type.dtype.itemsize for n in phase_reds), default=1)
        use_lanes = phase_reds and not scatter and split == nd - 1 and shape[-1] >= 2 * lanes
        if use_lanes:
            lo, hi = ("lo", "hi") if full else ("0", str(shape[-1]))
            end = f"hi - (hi - lo) % {lanes}" if full else str(shape[-1] - shape[-1] % lanes)
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
    for n in reds if full else ():  # combine the blocks' partial results
        j, T = kern.nodes.index(n), _typename(n.out.type.dtype)
        src += [f"    r{j} = {T}({_literal(_identity(n))})",
                f"    for b in range({nblocks}):",
                f"        r{j} = {T}({_update(n, f'r{j}', f'p{j}[b]')})",
                f"    o{j}[{_red_index(n, nd)}] = r{j}"]
    for n in blocked:  # combine the blocks' partial results
        j, T = kern.nodes.index(n), _typename(n.out.type.dtype)
        src += [f"    for b in range({nblocks}):",
                f"        for jj in np.ndindex({_keepdims_shape(n, shape)}):",
                f"            o{j}[jj] = {T}({_update(n, f'o{j}[jj]', f'p{j}[b][jj]')})"]
    mod.lines += src + [""]
    body.extend(f"step = {k}; {line}" for line in pre)
    body.append(f"step = {k}; kernel{k}({', '.join(call)})")
    body.extend(post)


def _broadcast_index(arg_shape, shape) -> str:
    """Index an input of ``arg_shape`` inside a loop over ``shape`` as NumPy broadcasting
    would: dimensions aligned on the right, a size-1 dimension always at 0."""
    off = len(shape) - len(arg_shape)
    return ", ".join("0" if d == 1 and shape[off + j] != 1 else f"i{off + j}"
                     for j, d in enumerate(arg_shape))


LANE_BYTES = 64  # one AVX-512 register of partial accumulators per reduction


def _lane_loops(reds, lo, end, lanes, d, indent, ref, body) -> list[str]:
    """A reduction over a row as ``lanes`` independent partial accumulators: a float sum
    cannot vectorise otherwise (reassociating it needs fastmath, which the math module's
    error-free transformations forbid)."""
    lines = [f"{indent}{ref[r.out]}_lanes = np.full({lanes}, {_literal(_identity(r))}, "
             f"{_typename(r.out.type.dtype)})" for r in reds]
    lines.append(f"{indent}for c in range({lo}, {end}, {lanes}):")
    lines.append(f"{indent}    for lane in range({lanes}):")
    lines.append(f"{indent}        i{d} = c + lane")
    lines += [f"{indent}        {line}" for line in body]
    return lines


def _is_reduction(v: Value, kern: Kernel) -> bool:
    return any(n.out is v and n.op in LOOP_REDUCTIONS for n in kern.nodes)


def _red_index(node: Node, nd: int) -> str:
    axes = node.attrs["axis"] if node.inputs[0].type.ndim else ()
    return ", ".join("0" if d in axes else f"i{d}" for d in range(nd))


def _phases(kern: Kernel) -> dict[Value, int]:
    """Phase of each node: one more than any reduction of this kernel it depends on."""
    phase: dict[Value, int] = {}
    for node in kern.nodes:
        p = 0
        for v in node.inputs:
            if v in phase:
                p = max(p, phase[v] + (1 if _is_reduction(v, kern) else 0))
        phase[node.out] = p
    return phase


def _needed(node: Node, sinks: list[Node], kern: Kernel) -> bool:
    """Whether ``node`` is one of ``sinks`` or an elementwise node they depend on."""
    want = {n.out for n in sinks}
    for n in reversed(kern.nodes):
        if n.out in want and not (n not in sinks and n.op in LOOP_REDUCTIONS):
            want.update(n.inputs)
    return node.out in want and (node in sinks or node.op not in LOOP_REDUCTIONS)
