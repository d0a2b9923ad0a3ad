"""The CUDA backend's runner: plain Python that launches one graph's kernels through CuPy.

``generate`` turns a placed graph and its :class:`~.codegen.CudaModule` into the source of
``run(*leaves)`` plus the names it refers to; ``compile`` in ``__init__.py`` binds the
compiled kernels. Per call the runner only allocates outputs and launches: kernels go to
CuPy's current stream and the call returns without waiting for them (``tj.synchronize``
waits). Library steps are CuPy calls (``library.py``); steps placed on the CPU run the op's
NumPy implementation; transfers copy with ``cupy.asarray`` (to the GPU) or ``.get()``
(to the host); a loop node placed on the GPU calls its driver (``loops.py``), which runs
the body's own runner per step. With ``debug`` the runner synchronises after every kernel
and names the one that failed; with ``profile`` it synchronises after every step to time it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from ...errors import TracejitError
from ...ir import Graph, Value
from ...ir.registry import REGISTRY
from ...profiler import StepInfo
from ..release import released
from . import library
from .codegen import CudaModule
from .loops import LOOPS


@dataclass
class RunnerSource:
    """The generated runner before ``compile`` binds the compiled kernels to it."""

    source: str
    namespace: dict  # what the source refers to, except the kernels and the CuPy helpers
    kernel_names: list[str]
    device_constants: list[str]  # names of the constants (NumPy arrays) used on the GPU


def _typename(dtype: np.dtype) -> str:
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def _nbytes(v: Value) -> int:
    return v.type.size * v.type.dtype.itemsize


def generate(graph: Graph, module: CudaModule, cupy=None, profile: bool = False,
             debug: bool = False, loop_driver=None) -> RunnerSource:
    """The runner of ``graph``; ``cupy`` (None to only show the source) is bound into the
    library steps, ``loop_driver(k, node)`` (None to only show the source) gives the
    function running loop node ``node`` of step ``k`` on the GPU."""
    place = graph.placement
    names: dict[Value, str] = {v: f"a{i}" for i, v in enumerate(graph.inputs)}
    namespace: dict = {"np": np, "TracejitError": TracejitError}
    consts = {n.out: n.attrs["value"] for n in graph.nodes if n.op == "constant"}
    for i, v in enumerate(consts):
        names[v] = f"c{i}"
        namespace[f"c{i}"] = consts[v]

    def name(v: Value) -> str:
        return names.setdefault(v, f"t{len(names)}")

    args_of = [a for s in module.steps for launch in s.launches for a in launch.args]
    kernel_inputs = {a.value for a in args_of if a.role == "input"}
    by_value = {a.value: a.dtype for a in args_of if a.role == "scalar"}
    body: list[str] = []
    allocated: set[str] = set()
    for v in graph.inputs:  # kernels read C-contiguous device arrays, scalars by value
        if v in by_value:
            body.append(f"s_{names[v]} = {_typename(by_value[v])}({names[v]})")
        elif v in kernel_inputs:
            T = _typename(v.type.dtype)
            body.append(f"{names[v]} = operand({names[v]}, {T}, {v.type.shape})")
    for k, step in enumerate(module.steps):
        start = len(body)
        where = step.kernel.nodes[0].loc.short if step.kernel.nodes[0].loc else "?"
        if step.kind == "library":
            call = _library(k, step.kernel.nodes[0], name, namespace, place, cupy,
                            kernel_inputs, loop_driver)
            body.append(f"step = {k}; {call}, {where}")
        for launch in step.launches:
            call = []
            for a in launch.args:
                if a.role == "scalar":
                    call.append(f"s_{names[a.value]}")
                    continue
                ref = name(a.value) if a.value is not None else f"k{k}_{a.name}"
                call.append(ref)
                if a.role in ("output", "scratch") and ref not in allocated:
                    allocated.add(ref)  # a full reduction's two launches share them
                    body.append(f"step = {k}; {ref} = empty({a.shape}, {_typename(a.dtype)})")
            tup = ", ".join(call) + ("," if len(call) == 1 else "")
            body.append(f"step = {k}; {launch.function}(({launch.grid},), ({launch.block},), "
                        f"({tup}))  # {step.form}, {where}")
            if debug:
                body.append(f"check({k})")
        if profile:
            body.insert(start, "t_start = clock()")
            body += ["sync()", f"record({k}, t_start, clock() - t_start)"]
    args = ", ".join(names[v] for v in graph.inputs)
    outs = ", ".join(name(v) for v in graph.outputs)
    body = released(body, {n: _nbytes(v) for v, n in names.items()},
                    {name(v) for v in graph.outputs})
    src = ["# runner: plain Python, launching the kernels above through CuPy",
           f"def run({args}):", "    step = -1", "    with device:", "        try:"]
    src += [f"            {line}" for line in body or ["pass  # nothing to compute"]]
    src += ["        except TracejitError:",
            "            raise  # from a loop body's step, located there",
            "        except (IndexError, ValueError, OverflowError, ZeroDivisionError) as e:",
            "            raise located(e, step) from None",
            f"    return [{outs}]"]
    namespace["locations"] = [s.kernel.nodes[0].loc for s in module.steps]
    namespace["steps"] = [
        StepInfo(f"{'kernel' if s.kind == 'loop' else 'lib'}{k}",
                 ", ".join(n.op for n in s.kernel.nodes), s.kernel.nodes[0].loc,
                 sum(_nbytes(v) for v in s.kernel.inputs + s.kernel.outputs))
        for k, s in enumerate(module.steps)]
    # kernels inline 0-d constants: only the others go to the GPU, and the outputs
    text = "\n".join(body) + "\n" + outs
    on_gpu = [names[v] for v in consts if place.on_target(v)
              and re.search(rf"\b{names[v]}\b", text)]
    return RunnerSource("\n".join(src) + "\n", namespace, module.kernel_names, on_gpu)


def _library(k: int, node, name, namespace: dict, place, cupy, kernel_inputs,
             loop_driver) -> str:
    """The statement of library step ``k``: a transfer, a CuPy call on the GPU, a loop's
    driver, or the op's NumPy implementation where placement put it on the CPU."""
    args = ", ".join(name(v) for v in node.inputs)
    if node.op == "transfer":
        call = f"{'to_host' if node.attrs['device'] == 'cpu' else 'to_device'}({args})"
    else:
        if node.op in LOOPS and place.on_target(node.out):
            impl = loop_driver(k, node) if loop_driver is not None else None
        elif place.on_target(node.out):
            impl = functools.partial(library.TABLE[node.op], cupy, **node.attrs)
        else:
            impl = functools.partial(REGISTRY[node.op].impl, **node.attrs)
        namespace[f"lib{k}"] = impl
        call = f"lib{k}({args})"
    out = node.out.type
    if node.out in kernel_inputs:
        call = f"operand({call}, {_typename(out.dtype)}, {out.shape})"
    return f"{name(node.out)} = {call}  # {node.op}"
