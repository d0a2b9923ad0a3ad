"""CPU backend: fused loop kernels compiled with Numba, library calls for the rest.

Numba is imported only when this backend compiles something, so ``import tracejit``
stays light.
"""

from __future__ import annotations

import numpy as np

from ...errors import IndexOutOfBounds, InvalidValue, ScalarOverflow
from ...ir import Graph

NAME = "cpu"
_TYPED = ((IndexError, IndexOutOfBounds), (OverflowError, ScalarOverflow),
          (ArithmeticError, InvalidValue), (ValueError, InvalidValue))


def source(graph: Graph) -> str:
    from .codegen import generate

    return generate(graph)[0]


def compile(graph: Graph):
    import numba

    from .codegen import generate

    text, namespace = generate(graph)
    locations = namespace["locations"]

    def located(e: Exception, step: int):
        typed = next(t for base, t in _TYPED if isinstance(e, base))
        return typed(str(e), location=locations[step] if step >= 0 else None)

    namespace.update(njit=numba.njit, bcast=np.broadcast_to, scalar=_scalar, located=located)
    code = compile_source(text, graph.name)
    exec(code, namespace)
    return namespace["run"]


def _scalar(x):
    return x[()] if type(x) is np.ndarray else x


def compile_source(text: str, name: str):
    import builtins

    return builtins.compile(text, f"<tracejit cpu: {name}>", "exec")
