"""tracejit: a tracing JIT compiler for plain NumPy code."""

from . import errors, nn
from .api import CacheInfo, JitFunction, Lowered, jit
from .autodiff import grad, jacobian, stop_gradient, value_and_grad, vjp
from .backends import available_backends
from .profiler import Profile, profile

__version__ = "0.1.0"

__all__ = ["CacheInfo", "JitFunction", "Lowered", "Profile", "available_backends", "errors",
           "grad", "jacobian", "jit", "nn", "profile", "stop_gradient", "value_and_grad",
           "vjp"]
