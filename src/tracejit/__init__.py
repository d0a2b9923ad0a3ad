"""tracejit: a tracing JIT compiler for plain NumPy code."""

from . import errors
from .api import CacheInfo, JitFunction, Lowered, jit
from .backends import available_backends

__version__ = "0.1.0"

__all__ = ["CacheInfo", "JitFunction", "Lowered", "available_backends", "errors", "jit"]
