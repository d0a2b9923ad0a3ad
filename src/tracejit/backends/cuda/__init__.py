"""CUDA backend (in progress): CUDA C for CuPy ``RawKernel`` generated from fused kernels.

``codegen.generate(graph)`` returns a ``CudaModule``: the source of every loop kernel and
a description of each step's launches (function, grid, block, arguments) or library call.
There is no runner yet, so this backend is not registered in ``backends.get_backend``.
"""

from .codegen import CudaModule, fusible, generate

__all__ = ["CudaModule", "fusible", "generate"]
