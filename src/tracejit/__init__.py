"""tracejit: a tracing JIT compiler for plain NumPy code.

The public names are imported on first use (PEP 562): a compile worker process, which
needs only the CPU backend, then starts without the tracer, autodiff and ``jit``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__ as __version__  # re-exported: tracejit.__version__
from .config import config as config  # eager: the Settings object, not its module

# public name -> the submodule defining it (None: the name is the submodule itself)
_HOMES = {
    "errors": None, "lax": None, "nn": None,
    "grad": "ad", "jacobian": "ad", "stop_gradient": "ad", "value_and_grad": "ad", "vjp": "ad",
    "CacheInfo": "api", "JitFunction": "api", "Lowered": "api", "jit": "api",
    "available_backends": "backends", "Profile": "profiler", "profile": "profiler",
    "scan": "theano_scan",
    "Device": "targets", "default_device": "targets", "device": "targets",
    "devices": "targets", "synchronize": "targets", "to_device": "targets",
    "to_host": "targets",
}

__all__ = ["CacheInfo", "Device", "JitFunction", "Lowered", "Profile", "available_backends",
           "config", "default_device", "device", "devices", "errors", "grad", "jacobian",
           "jit", "lax", "nn", "profile", "scan", "stop_gradient", "synchronize", "to_device",
           "to_host", "value_and_grad", "vjp"]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'tracejit' has no attribute {name!r}")
    home = _HOMES[name]
    module = importlib.import_module(f".{home or name}", __name__)
    value = module if home is None else getattr(module, name)
    globals()[name] = value  # later lookups find it directly
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from . import errors, lax, nn
    from .ad import grad, jacobian, stop_gradient, value_and_grad, vjp
    from .api import CacheInfo, JitFunction, Lowered, jit
    from .backends import available_backends
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
    from .theano_scan import scan
