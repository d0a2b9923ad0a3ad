"""CPU backend: Numba code generation from fused kernels (not implemented yet)."""
