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
from ...passes.fusion import Kernel, fuse
from . import ops

_IDENTITY = {"sum": 0, "prod": 1, "any": False, "all": True}


def loop_dtypes(node: Node) -> tuple[np.dtype, ...] | None:
    """(input dtypes the op computes in..., output dtype)."""
    types = [v.type for v in node.inputs]
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
        self.lines: list[str] = []
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


def generate(graph: Graph) -> tuple[str, dict]:
    mod = _Module(graph)
    kernels = fuse(graph, fusible)
    body: list[str] = []
    for k, kern in enumerate(kernels):
        where = kern.nodes[0].loc.short if kern.nodes[0].loc else "?"
        if kern.kind == "loop":
            _emit_loop(mod, k, kern, body, where)
        else:
            _emit_library(mod, k, kern.nodes[0], body, where)
    args = ", ".join(mod.names[v] for v in graph.inputs)
    outs = ", ".join(mod.name(v) for v in graph.outputs)
    mod.lines += [f"def run({args}):", "    step = -1", "    try:"]
    mod.lines += [f"        {line}" for line in body]
    mod.lines += [
        "    except (IndexError, ValueError, OverflowError, ZeroDivisionError) as e:",
        "        raise located(e, step) from None",
        f"    return [{outs}]",
    ]
    mod.namespace["locations"] = [k.nodes[0].loc for k in kernels]
    return "\n".join(mod.lines) + "\n", mod.namespace


def _emit_library(mod: _Module, k: int, node: Node, body: list[str], where: str) -> None:
    fn = f"lib{k}"
    impl = REGISTRY[node.op].impl
    mod.namespace[fn] = (lambda impl, attrs: lambda *a: impl(*a, **attrs))(impl, node.attrs)
    args = ", ".join(mod.name(v) for v in node.inputs)
    body.append(f"step = {k}; {mod.name(node.out)} = {fn}({args})  # {node.op}, {where}")


def _emit_loop(mod: _Module, k: int, kern: Kernel, body: list[str], where: str) -> None:
    shape = kern.shape or (1,)  # a 0-d kernel runs as one element
    nd = len(shape)
    idx = ", ".join(f"i{d}" for d in range(nd))
    params, call = [], []
    local: dict[Value, str] = {}
    typed: set[Value] = set()  # locals already of their IR dtype (no cast needed)
    for j, v in enumerate(kern.inputs):
        if v in mod.consts and v.type.ndim == 0:
            local[v] = _literal(mod.consts[v])
        elif v.type.ndim == 0:
            params.append(f"s{j}")
            call.append(f"scalar({mod.name(v)})")
            local[v] = f"s{j}"
        else:
            params.append(f"x{j}")
            arg = mod.name(v)
            call.append(arg if v.type.shape == shape else f"bcast({arg}, {shape})")
            local[v] = f"x{j}[{idx}]"
            typed.add(v)
    loop: list[str] = []
    pre: list[str] = []
    for n, node in enumerate(kern.nodes):
        out = f"v{n}"
        if node.op in _IDENTITY or node.op in ("max", "min"):
            src = node.inputs[0]
            same = src in typed and src.type.dtype == node.out.type.dtype
            loop += _reduction(node, local[src], same, shape, params, call, pre, mod)
            continue
        dts = loop_dtypes(node)
        operands = [local[v] if v in typed and v.type.dtype == dt else
                    f"{_typename(dt)}({local[v]})" for v, dt in zip(node.inputs, dts, strict=False)]
        if node.op == "convert":
            src = local[node.inputs[0]]
            expr = operands[0] if node.out.type.dtype.kind != "b" else f"({src} != 0)"
        else:
            expr = ops.template(node.op, dts[:-1]).format(*operands)
        loop.append(f"{out} = {_typename(node.out.type.dtype)}({expr})  # {node.op}")
        local[node.out] = out
        typed.add(node.out)
        if node.out in kern.outputs:
            params.append(f"o{n}")
            dtype = _typename(node.out.type.dtype)
            pre.append(f"{mod.name(node.out)} = np.empty({shape}, {dtype})")
            call.append(mod.name(node.out))
            loop.append(f"o{n}[{idx}] = {out}")
    fn = f"kernel{k}"
    ops_used = ", ".join(n.op for n in kern.nodes)
    mod.lines.append(f"# kernel {k}: loop over {list(kern.shape)} ({ops_used}), {where}")
    mod.lines.append("@njit(error_model='numpy', cache=False)")
    mod.lines.append(f"def {fn}({', '.join(params)}):")
    indent = "    "
    for d in range(nd):
        mod.lines.append(f"{indent}for i{d} in range({shape[d]}):")
        indent += "    "
    mod.lines += [f"{indent}{line}" for line in loop]
    mod.lines.append("")
    body.extend(f"step = {k}; {p}" for p in pre)
    body.append(f"step = {k}; {fn}({', '.join(call)})")
    for node in kern.nodes:
        if node.out in kern.outputs and node.out.type.shape != _alloc_shape(node, shape):
            name = mod.name(node.out)
            body.append(f"{name} = {name}.reshape({node.out.type.shape})")


def _alloc_shape(node: Node, shape) -> tuple[int, ...]:
    if node.op in _IDENTITY or node.op in ("max", "min"):
        axes = node.attrs["axis"]
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return shape


def _reduction(node: Node, value: str, typed_value: bool, shape, params, call, pre,
               mod) -> list[str]:
    """Accumulate ``value`` into a keepdims-shaped output pre-filled with the identity."""
    dtype = node.out.type.dtype
    T = _typename(dtype)
    axes = node.attrs["axis"] if node.inputs[0].type.ndim else ()
    ridx = ", ".join("0" if d in axes else f"i{d}" for d in range(len(shape)))
    name = mod.name(node.out)
    r = f"r{len(params)}"
    params.append(r)
    call.append(name)
    kshape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    if node.op in ("max", "min"):
        ident = (-np.inf if node.op == "max" else np.inf) if dtype.kind == "f" else (
            (np.iinfo(dtype).min if node.op == "max" else np.iinfo(dtype).max)
            if dtype.kind in "iu" else node.op == "min")
    else:
        ident = _IDENTITY[node.op]
    pre.append(f"{name} = np.full({kshape}, {_literal(ident)}, {T})")
    acc = f"{r}[{ridx}]"
    v = value if typed_value else f"{T}({value})"
    update = {
        "sum": f"{acc} + {v}", "prod": f"{acc} * {v}",
        "max": ops._MAX.format(acc, v), "min": ops._MIN.format(acc, v),
        "any": f"{acc} | ({value} != 0)", "all": f"{acc} & ({value} != 0)",
    }[node.op]
    return [f"{acc} = {T}({update})  # {node.op}"]
