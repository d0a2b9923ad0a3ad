"""The expression language shared by the code generators: one walk, per-target tables.

A code generator has two halves. The *loop structure* (OpenMP threads with lanes on the
CPU; grid-stride loops, warps and blocks on CUDA) really differs per target and stays in
each backend's emitter. The *expressions* inside the loops do not: every target turns an
elementwise node into a template applied to its operands cast to NumPy's loop dtypes,
renders literals, starts a reduction from its identity and folds elements in with its
combining op. That half is this module, split as tinygrad splits ``CStyleLanguage`` and
``CUDALanguage``: ``Language`` holds the walk (``expr``) and the lookups, a target's
subclass holds its op -> template tables and overrides the few renderings that differ.

Templates are ``str.format`` patterns over the operands ``{0}``, ``{1}``, ``{2}``, already
cast to the op's loop dtypes (``ir.registry.loop_dtypes``: NumPy's ``resolve_dtypes``).
An op/dtype combination no table has is not computed in a loop kernel (``template``
returns None and the backend's ``fusible`` says no), so a table only claims what it
computes as NumPy does. Reduction facts (identity, combining op) come from the op's
``Monoid`` in the registry, never from a table here.

A new language sets ``ANY``, ``BOOL``, ``INT``, ``FLOAT`` and ``MATH`` and overrides
``supports``, ``dtype_name``, ``literal`` and ``cast``; where its syntax needs it, also
``specialize`` (placeholders beyond the operands), ``math_function`` (library naming),
``constant`` (scalar constants as operands), ``convert`` and ``combine``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Node
from ..ir.ops import clip_bounds_constant
from ..ir.registry import loop_dtypes, monoid_of

BOOL_DTYPE = np.dtype(np.bool_)


@dataclass(frozen=True)
class Const:
    """An operand that is a scalar constant of the graph (``value``), which a language
    writes as a literal of the dtype it is used in rather than reading it."""

    value: object


Operand = str | Const  # an expression of the input's own IR dtype, or a constant


class Language:
    """Op -> template tables plus the one expression walk. Subclasses set the tables."""

    # templates for every dtype the language computes in (comparisons, logic, where)
    ANY: ClassVar[Mapping[str, str]] = {}
    BOOL: ClassVar[Mapping[str, str]] = {}  # when every loop dtype is bool
    INT: ClassVar[Mapping[str, str]] = {}  # when every loop dtype is a signed/unsigned int
    FLOAT: ClassVar[Mapping[str, str]] = {}  # when every loop dtype is a real float
    # float ops computed by a math-library function: op -> the library's name for it
    MATH: ClassVar[Mapping[str, str]] = {}

    # ------------------------------------------------------------------ per target

    def supports(self, dtype: np.dtype) -> bool:
        """Whether the language computes with values of ``dtype``."""
        raise NotImplementedError

    def dtype_name(self, dtype: np.dtype) -> str:
        """The target's name of ``dtype`` (a C type, a NumPy scalar type)."""
        raise NotImplementedError

    def literal(self, value: object, dtype: np.dtype) -> str:
        """``value`` (a Python or NumPy scalar) written as a literal of ``dtype``."""
        raise NotImplementedError

    def cast(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        """``expr`` of dtype ``src`` as ``dst``, converted as NumPy's ``astype`` does."""
        raise NotImplementedError

    def specialize(self, text: str, dtype: np.dtype) -> str:
        """A table template made concrete for the dtype it computes in (a target whose
        templates name types fills them in here)."""
        return text

    def math_function(self, op: str, dtype: np.dtype) -> str:
        """The math-library function computing float ``op`` in ``dtype``."""
        return self.MATH[op]

    def constant(self, value: object, dtype: np.dtype) -> str:
        """A scalar constant used as an operand of loop dtype ``dtype``."""
        return self.literal(value, dtype)

    # ------------------------------------------------------------------ lookups

    def template(self, op: str, dtypes: Sequence[np.dtype]) -> str | None:
        """The expression for ``op`` computed in the loop dtypes ``dtypes`` (its inputs'),
        or None when the language does not compute it. ``where`` computes in (bool, T, T);
        every other op in its first operand's dtype."""
        if not dtypes or not all(self.supports(d) for d in dtypes):
            return None
        main = dtypes[-1] if op == "where" else dtypes[0]
        kinds = {d.kind for d in dtypes}
        text = self.ANY.get(op)
        if text is None and kinds == {"b"}:
            text = self.BOOL.get(op)
        elif text is None and kinds <= set("iu"):
            text = self.INT.get(op)
        elif text is None and kinds <= set("f"):
            if op in self.MATH:
                args = ", ".join(f"{{{i}}}" for i in range(len(dtypes)))
                text = f"{self.math_function(op, main)}({args})"
            else:
                text = self.FLOAT.get(op)
        return None if text is None else self.specialize(text, main)

    def ops(self) -> set[str]:
        """Every op the language has a template for, for at least one dtype."""
        return set(self.ANY) | set(self.BOOL) | set(self.INT) | set(self.FLOAT) | set(self.MATH)

    def math_calls(self, node: Node) -> set[str]:
        """The math-library functions ``expr(node, ...)`` calls (a target that imports
        them, as the Numba language does, collects these)."""
        dts = loop_dtypes(node)
        if node.op not in self.MATH or dts is None or dts[0].kind != "f":
            return set()
        return {self.math_function(node.op, dts[0])}

    # ------------------------------------------------------------------ reductions

    def identity(self, op: str, dtype: np.dtype) -> str:
        """The literal a reduction ``op`` into ``dtype`` starts from (its monoid's)."""
        return self.literal(monoid_of(op).identity(dtype), dtype)

    def combine(self, op: str, acc: str, x: str, dtype: np.dtype) -> str:
        """``x`` folded into the accumulator ``acc`` of reduction ``op``: its monoid's
        combining op computed in ``dtype`` (the output dtype)."""
        return self.template(monoid_of(op).combine, (dtype, dtype)).format(acc, x)

    # ------------------------------------------------------------------ the walk

    def operand(self, ref: Operand, src: np.dtype, dst: np.dtype) -> str:
        """An input of IR dtype ``src`` read as loop dtype ``dst``."""
        return self.constant(ref.value, dst) if isinstance(ref, Const) else \
            self.cast(ref, src, dst)

    def convert(self, ref: Operand, src: np.dtype, dst: np.dtype) -> str:
        """The ``convert`` op (``astype``)."""
        return self.operand(ref, src, dst)

    def expr(self, node: Node, operands: Sequence[Operand]) -> str:
        """The expression computing elementwise ``node`` from its inputs ``operands`` (one
        per input, each of its own IR dtype), in the node's loop dtypes; the caller turns
        it into the output dtype where that differs."""
        dst = node.out.type.dtype
        if node.op == "convert":
            return self.convert(operands[0], node.inputs[0].type.dtype, dst)
        dts = loop_dtypes(node)
        args = [self.operand(ref, v.type.dtype, dt)
                for ref, v, dt in zip(operands, node.inputs, dts, strict=False)]
        text = self.template(node.op, dts[:-1]).format(*args)
        if node.op == "power" and dts[0].kind == "f" and node.inputs[1].type.ndim == 0:
            # NumPy's power loop takes sqrt for a broadcast exponent of 0.5 (-0.0 -> -0.0,
            # -inf -> nan, where pow gives +0.0 and +inf)
            sqrt = self.template("sqrt", dts[:1]).format(args[0])
            test = f"{args[1]} == {self.literal(0.5, dts[0])}"
            text = self.template("where", (BOOL_DTYPE, dts[0], dts[0])).format(test, sqrt, text)
        if node.op == "clip" and dts[0].kind == "f" and clip_bounds_constant(
                node.out.type, *(v.type for v in node.inputs)):
            text = self.clip_constant(*args, dts[0])
        return text

    def clip_constant(self, x: str, lo: str, hi: str, dtype: np.dtype) -> str:
        """NumPy's clip loop for constant bounds (``ir.ops.clip_bounds_constant``): a NaN
        bound itself, ``lo``'s first, else ``x`` kept on a tie with a bound."""
        where = self.template("where", (BOOL_DTYPE, dtype, dtype))
        less = self.template("less", (dtype, dtype))
        m = where.format(less.format(x, lo), lo, x)
        text = where.format(less.format(hi, m), hi, m)
        for bound in (hi, lo):
            text = where.format(self.template("isnan", (dtype,)).format(bound), bound, text)
        return text
