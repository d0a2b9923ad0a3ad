"""CUDA backend: CuPy RawKernel code generation from fused kernels (not implemented yet)."""
