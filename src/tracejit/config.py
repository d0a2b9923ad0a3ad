"""Process-wide settings, read from the environment once, changeable from Python.

    import tracejit as tj
    tj.config.compile = "background"        # or TRACEJIT_COMPILE=background
    tj.config.min_kernel_size = 0           # or TRACEJIT_MIN_KERNEL_SIZE=0
    tj.config.roll_loops = False            # or TRACEJIT_ROLL_LOOPS=0

A setting changed in Python applies to signatures compiled afterwards; each ``jit`` can
override ``compile`` for itself. A malformed environment value warns and keeps the
default rather than failing an import.
"""

from __future__ import annotations

import os
import warnings

from .errors import ConfigError, UnknownSetting

COMPILE_MODES = ("sync", "background")


class Settings:
    """Process-wide settings (``tracejit.config``), read from the environment once.

    Each setting starts from its environment variable (a malformed value warns and keeps
    the default, rather than failing an import) and can be changed from Python; a
    change applies to signatures compiled afterwards. A misspelt setting name or a
    value of the wrong kind raises at the assignment, so a typo cannot pass silently.

    Attributes:
        compile: ``"sync"``: a new signature's first call waits for its kernels.
            ``"background"``: it runs on the reference interpreter while they compile
            in other processes. Each ``jit(compile=...)`` can override it for itself.
            From ``TRACEJIT_COMPILE``; default ``"sync"``.
        min_kernel_size: Loop kernels iterating over fewer elements run as NumPy calls
            instead (a compile costs ~0.1-0.3 s; NumPy takes about a microsecond per op
            on them); 0 compiles every kernel. From ``TRACEJIT_MIN_KERNEL_SIZE``;
            default 4096.
        compile_workers: Processes that compile kernels; 0 compiles in the calling
            process, one kernel after another. From ``TRACEJIT_COMPILE_WORKERS``;
            default one per core, at most 4, and 0 on a single core.
        prebuilt: A new signature's first calls may run its elementwise kernels on
            the prebuilt kernels (``backends/cpu/prebuilt.py``), with the same bits, while
            the compile workers build its own; off, they wait for them. From
            ``TRACEJIT_PREBUILT`` (``1``/``0``); default on.
        roll_loops: A Python loop traced into repeated copies of its body is rolled
            back into one loop op (``passes/roll.py``); off, the copies stay as they
            were traced. From ``TRACEJIT_ROLL_LOOPS`` (``1``/``0``); default on.

    Example:
        >>> tj.config.compile
        'sync'
        >>> tj.config.min_kernel_size = 0  # compile every kernel, however small
        >>> tj.config.roll_loops = "off"  # the environment's spellings are taken too
        >>> tj.config.roll_loops
        False
        >>> tj.config.compile = "later"
        Traceback (most recent call last):
            ...
        tracejit.errors.ConfigError: compile must be one of ('sync', 'background'), not 'later'
        ...
        >>> tj.config.complie = "sync"
        Traceback (most recent call last):
            ...
        tracejit.errors.UnknownSetting: tracejit.config has no setting 'complie'
        ...
    """

    def __init__(self) -> None:
        self.compile = _read("TRACEJIT_COMPILE", "sync", compile_mode)
        self.min_kernel_size = _read("TRACEJIT_MIN_KERNEL_SIZE", 4096, _count)
        self.compile_workers = _read("TRACEJIT_COMPILE_WORKERS", _default_workers(), _count)
        self.roll_loops = _read("TRACEJIT_ROLL_LOOPS", True, _flag)
        self.prebuilt = _read("TRACEJIT_PREBUILT", True, _flag)

    def __setattr__(self, name: str, value) -> None:
        check = _CHECKS.get(name)
        if check is None:
            raise UnknownSetting(f"tracejit.config has no setting {name!r}")
        try:
            checked = check(value)
        except (TypeError, ValueError) as e:  # int(None), int("x"), ours
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"{name} cannot be {value!r} ({e})") from None
        object.__setattr__(self, name, checked)

    def __repr__(self) -> str:
        return (f"tracejit.config(compile={self.compile!r}, min_kernel_size="
                f"{self.min_kernel_size}, compile_workers={self.compile_workers}, "
                f"roll_loops={self.roll_loops}, prebuilt={self.prebuilt})")


def compile_mode(value) -> str:
    """``value`` as a compile mode (ConfigError, a ValueError, if it is none)."""
    mode = str(value).strip().lower()
    if mode not in COMPILE_MODES:
        raise ConfigError(f"compile must be one of {COMPILE_MODES}, not {value!r}")
    return mode


def _count(value) -> int:
    n = int(value)
    if n < 0:
        raise ConfigError(f"expected a count >= 0, not {value!r}")
    return n


def _flag(value) -> bool:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"expected a boolean (1/0, true/false), not {value!r}")
    return bool(value)


_CHECKS = {"compile": compile_mode, "min_kernel_size": _count, "compile_workers": _count,
           "roll_loops": _flag, "prebuilt": _flag}


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _default_workers() -> int:
    """Compile in parallel where there are cores for it: one worker per core, at most 4
    (a worker holds Numba and LLVM, ~250 MB)."""
    n = cores()
    return min(n, 4) if n > 1 else 0


def _read(variable: str, default, parse):
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        return parse(text)
    except ValueError as e:  # int("x"), or ours (a ConfigError, whose first line says why)
        why = e.message if isinstance(e, ConfigError) else e
        warnings.warn(f"tracejit: ignoring {variable}={text!r} ({why}); using {default!r}",
                      RuntimeWarning, stacklevel=3)
        return default


config = Settings()
