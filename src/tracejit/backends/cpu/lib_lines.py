"""The runner's lines for the library steps ``lib_steps.py`` plans: a packed call
unpacked, scalar arithmetic, a weak scalar, an array of 0-d values, a solve of a vector,
an element, an inner product, a det from a slogdet (``codegen.py`` writes the others)."""

from __future__ import annotations

import numpy as np

from ...ir import Node, Value
from ...ir.registry import REGISTRY
from .emitter import Module
from .lib_steps import Unpacking, det_from_slogdet
from .lib_steps import call as unpacked_call
from .ops import NUMBA
from .scalar_arrays import nested


def _part_names(mod: Module, packed: Node, plan: Unpacking) -> list[str]:
    """The runner's names for the parts of unpacked ``packed`` (a part nothing reads is
    named after the packed value, which the runner never makes)."""
    return [mod.name(v) if v is not None else f"{mod.name(packed.out)}_{i}"
            for i, v in enumerate(plan.parts[packed])]


def emit_planned(mod: Module, k: int, node: Node, plan: Unpacking, body: list[str],
                 where: str, loop_inputs: set[Value]) -> bool:
    """Emit library step ``node`` as ``lib_steps.py`` plans it, if it does: a packed
    call unpacked into its parts' names (those loop kernels read made C-contiguous), an
    element, an inner product, scalar arithmetic, a weak scalar, an array of 0-d values
    (new, C-contiguous: no ``operand``), a solve of a vector, or a det from an unpacked
    slogdet."""
    if node in plan.parts:
        names = ", ".join(_part_names(mod, node, plan))
        body.append(f"step = {k}; {names} = {unpacked_call(node, mod.name(node.inputs[0]))}"
                    f"  # {node.op}, unpacked, {where}")
        for v in plan.parts[node]:
            if v in loop_inputs:
                t = v.type
                body.append(f"step = {k}; {mod.name(v)} = operand({mod.name(v)}, "
                            f"{NUMBA.dtype_name(t.dtype)}, {t.shape})")
        return True
    if node in plan.operators:
        expr = plan.operators[node].format(*(mod.name(v) for v in node.inputs))
        kind = "a weak scalar" if node.out.type.weak else "NumPy scalars"
        body.append(f"step = {k}; {mod.name(node.out)} = {expr}  # {node.op}, {kind}, {where}")
        return True
    if node in plan.solves:
        mod.namespace[f"lib{k}"] = np.linalg.solve
        (b, x, column), a = plan.solves[node], node.inputs[0]
        body.append(f"step = {k}; {mod.name(x)} = lib{k}({mod.name(a)}, {mod.name(b)})"
                    f"  # solve, of a vector, {where}")
        if column:
            col = f"{mod.name(x)}.reshape({node.out.type.shape!r})"
            if node.out in loop_inputs:
                col = f"operand({col}, {NUMBA.dtype_name(node.out.type.dtype)}, " \
                      f"{node.out.type.shape})"
            body.append(f"step = {k}; {mod.name(node.out)} = {col}")
        return True
    if node in plan.arrays:
        names = [mod.name(v) for v in plan.arrays[node]]
        array = f"{nested(names, node.out.type.shape)}, {NUMBA.dtype_name(node.out.type.dtype)}"
        body.append(f"step = {k}; {mod.name(node.out)} = np.array({array})"
                    f"  # an array of 0-d values, {where}")
        return True
    if node in plan.items:  # (a ufunc of 0-d values returns a NumPy scalar)
        mod.namespace[f"lib{k}"] = REGISTRY[node.op].impl
        args = [mod.name(v) for v in node.inputs] + ([f"**attrs{k}"] if node.attrs else [])
        mod.namespace.update({f"attrs{k}": node.attrs} if node.attrs else {})
        item = ".item()" if isinstance(REGISTRY[node.op].impl, np.ufunc) else ""
        call = f"lib{k}({', '.join(args)}){item}" if item else \
            f"np.asarray(lib{k}({', '.join(args)})).item()"
        body.append(f"step = {k}; {mod.name(node.out)} = {call}  # {node.op}, a weak scalar, "
                    f"{where}")
        return True
    if node in plan.elements:  # (a slice's starts are in range: slice_rule normalises)
        index = ", ".join(str(int(i)) for i in node.attrs["starts"])
        body.append(f"step = {k}; {mod.name(plan.elements[node])} = "
                    f"{mod.name(node.inputs[0])}[{index}]  # slice, one element, {where}")
        return True
    if node in plan.dots:
        u, v, out = plan.dots[node]
        body.append(f"step = {k}; {mod.name(out)} = np.dot({mod.name(u)}, {mod.name(v)})"
                    f"  # matmul, a row by a column, {where}")
        return True
    if node in plan.dets:
        mod.namespace["det_from_slogdet"] = det_from_slogdet
        sign, logdet = _part_names(mod, plan.dets[node], plan)
        body.append(f"step = {k}; {mod.name(node.out)} = det_from_slogdet({sign}, {logdet}, "
                    f"{mod.name(node.inputs[0])})  # det, from the slogdet, {where}")
        return True
    return False
