"""tracejit: a tracing JIT compiler for plain NumPy code."""

from . import errors, nn
from ._version import __version__ as __version__  # re-exported: tracejit.__version__
from .ad import grad, jacobian, stop_gradient, value_and_grad, vjp
from .api import CacheInfo, JitFunction, Lowered, jit
from .backends import available_backends
from .config import config
from .profiler import Profile, profile
from .targets import (
    Device,
    default_device,
    device,
    devices,
    synchronize,
    to_device,
    to_host,
)

__all__ = ["CacheInfo", "Device", "JitFunction", "Lowered", "Profile", "available_backends",
           "config", "default_device", "device", "devices", "errors", "grad", "jacobian",
           "jit", "nn", "profile", "stop_gradient", "synchronize", "to_device", "to_host",
           "value_and_grad", "vjp"]
