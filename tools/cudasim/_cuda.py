"""``cupy.cuda`` (devices, runtime, streams), ``cupy.RawModule`` and NVRTC's images
(``compiler.compile_using_nvrtc``, ``function.Module``): CUDA C compiled with g++ after
``cuda_shim.h`` and launched on CPU threads.

Launches are synchronous here (a real launch only queues the kernel and returns) and
serialised by one lock. The launch check is stricter than CUDA and CuPy: see
``Function.__call__``.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _state
from ._array import ndarray
from ._errors import CompileError, CUDADriverError, CUDARuntimeError, IllegalAddressError
from ._state import stats

SHIM = Path(__file__).with_name("cuda_shim.h")
CXX = os.environ.get("CUDASIM_CXX", "g++")
CXXFLAGS = ("-std=c++20", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
            "-Wl,--no-undefined")
MAX_BLOCK = 1024
MAX_GRID = 2**31 - 1

# ---------------------------------------------------------------- devices


def _check_device(index: int) -> None:
    n = _state.device_count()
    if n == 0:
        raise CUDARuntimeError(100)
    if not 0 <= index < n:
        raise CUDARuntimeError(101)


class Device:
    """``cupy.cuda.Device``: ``with Device(i):`` makes GPU ``i`` current in this thread
    (arrays created inside live there); ``Device()`` is the current device."""

    __slots__ = ("id",)

    def __init__(self, device=None):
        self.id = _state.current() if device is None else int(device)

    def __enter__(self) -> Device:
        _check_device(self.id)
        _state.push(self.id)
        return self

    def __exit__(self, *exc) -> None:
        _state.pop()

    def synchronize(self) -> None:
        """Kernels run synchronously here: only checks that the device exists."""
        _check_device(self.id)

    @property
    def compute_capability(self) -> str:
        """An H100's, as CuPy spells it."""
        return "90"

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("cudasim.Device", self.id))

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


def getDeviceCount() -> int:
    """The emulated GPUs (``cudasim.set_device_count``); none raises, as in CuPy."""
    n = _state.device_count()
    if n == 0:
        raise CUDARuntimeError(100)
    return n


def deviceSynchronize() -> None:
    _check_device(_state.current())


class Stream:
    """The current stream: every launch has finished when it returns, so synchronize
    only checks the device."""

    __slots__ = ("device",)

    def __init__(self, device: int):
        self.device = device

    def synchronize(self) -> None:
        _check_device(self.device)


def get_current_stream() -> Stream:
    return Stream(_state.current())


# ---------------------------------------------------------------- kernel signatures

CTYPES = {
    "bool": np.bool_, "char": np.int8, "signed char": np.int8, "unsigned char": np.uint8,
    "short": np.int16, "unsigned short": np.uint16, "int": np.int32, "signed": np.int32,
    "unsigned": np.uint32, "unsigned int": np.uint32, "long": np.int64,
    "unsigned long": np.uint64, "long long": np.int64, "long long int": np.int64,
    "unsigned long long": np.uint64, "unsigned long long int": np.uint64,
    "float": np.float32, "double": np.float64, "size_t": np.uint64, "ptrdiff_t": np.int64,
    "int8_t": np.int8, "int16_t": np.int16, "int32_t": np.int32, "int64_t": np.int64,
    "uint8_t": np.uint8, "uint16_t": np.uint16, "uint32_t": np.uint32, "uint64_t": np.uint64,
}

# CUDA's vector types, as pointer parameters: (element type, lanes, alignment)
VECTORS = {
    "float2": (np.float32, 2, 8), "float4": (np.float32, 4, 16), "double2": (np.float64, 2, 16),
    "int2": (np.int32, 2, 8), "int4": (np.int32, 4, 16), "uint2": (np.uint32, 2, 8),
    "uint4": (np.uint32, 4, 16), "longlong2": (np.int64, 2, 16),
}

_KERNEL = re.compile(
    r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*)?void\s+'
    r'(?:__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*)?([A-Za-z_]\w*)\s*\(([^)]*)\)')


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str  # as declared, without __restrict__
    dtype: np.dtype  # the element type (pointers) or the value's type
    pointer: bool
    const: bool
    restrict: bool
    align: int = 1  # the alignment a pointer needs (vector types: 8 or 16)


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    launch_bounds: int | None

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f'{p.ctype} {p.name}' for p in self.params)})"


def _strip_comments(src: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", src, flags=re.S)


def _param(text: str, kernel: str) -> Param:
    restrict = bool(re.search(r"\b__restrict(__)?\b", text))
    text = re.sub(r"\b__restrict(__)?\b", " ", text)
    m = re.fullmatch(r"\s*(.*?)\s*\b([A-Za-z_]\w*)\s*", text)
    if not m or not m.group(1):
        raise NotImplementedError(f"cudasim: cannot parse parameter {text!r} of {kernel}")
    ctype = " ".join(m.group(1).replace("*", " * ").split()).replace(" *", "*")
    pointer = ctype.count("*")
    base = " ".join(w for w in ctype.replace("*", " ").split() if w != "const")
    if base in VECTORS and pointer == 1:
        dtype, _, align = VECTORS[base]
    elif base in CTYPES and pointer <= 1:
        dtype = CTYPES[base]
        align = np.dtype(dtype).itemsize
    else:
        raise NotImplementedError(f"cudasim: kernel {kernel} has a parameter of type "
                                  f"{ctype!r}, which the launcher does not handle")
    const = pointer == 1 and "const" in ctype.split("*")[0].split()
    return Param(m.group(2), ctype, np.dtype(dtype), pointer == 1, const, restrict, align)


def kernels_of(source: str) -> dict[str, Signature | NotImplementedError]:
    """Every ``extern "C" __global__`` kernel of ``source``: its signature, or the error
    saying why the emulator cannot launch it."""
    found: dict = {}
    for m in _KERNEL.finditer(_strip_comments(source)):
        bounds = m.group(1) or m.group(2)
        name, params = m.group(3), m.group(4).strip()
        try:
            ps = () if params in ("", "void") else tuple(
                _param(p, name) for p in params.split(","))
            found[name] = Signature(name, ps, int(bounds) if bounds else None)
        except NotImplementedError as e:
            found[name] = e
    return found


def _launcher(sig: Signature) -> str:
    args = ", ".join(f"*({p.ctype}*)a[{i}]" for i, p in enumerate(sig.params))
    return (f"static void cudasim_body_{sig.name}(void* const* a) {{ {sig.name}({args}); }}\n"
            f"CUDASIM_EXPORT int cudasim_launch_{sig.name}(unsigned grid, unsigned block, "
            f"void* const* args, int fibers) {{\n"
            f"  return cudasim::run(grid, block, cudasim_body_{sig.name}, args, fibers != 0);\n}}")


# ---------------------------------------------------------------- compiling

_cache: dict[str, _Library] = {}
_compile_lock = threading.Lock()
_launch_lock = threading.Lock()
_tmpdir: str | None = None


def _workdir() -> str:
    global _tmpdir
    if _tmpdir is None:
        _tmpdir = tempfile.mkdtemp(prefix="cudasim-")
        atexit.register(shutil.rmtree, _tmpdir, True)
    return _tmpdir


@dataclass
class _Library:
    lib: ctypes.CDLL
    kernels: dict  # name -> Signature | NotImplementedError
    path: str
    seconds: float


def translation_unit(source: str) -> tuple[str, dict]:
    """The C++ that g++ compiles for a module: the shim, the CUDA C (with its own line
    numbers), a launcher per kernel."""
    kernels = kernels_of(source)
    launchers = [_launcher(s) for s in kernels.values() if isinstance(s, Signature)]
    text = (f'#include "{SHIM}"\n#line 1 "cudasim_module.cu"\n{source}\n'
            f'#line 1 "cudasim_launchers.cpp"\n' + "\n".join(launchers) + "\n")
    return text, kernels


def compile_module(source: str, options=(), opt: str = "-O2") -> _Library:
    """The loaded shared library of ``source`` (compiled once per process per source,
    options and optimisation level); raises CompileError with g++'s output. Of the
    options, ``-D``/``-U`` go to g++ and ``-O<level>`` replaces ``opt``; others are
    ignored (they are NVRTC's)."""
    import time

    options = tuple(o for o in options if isinstance(o, str))
    defines = tuple(o for o in options if o.startswith(("-D", "-U")))
    opt = next((o for o in reversed(options) if re.fullmatch(r"-O[0-3sg]?", o)), opt)
    text, kernels = translation_unit(source)
    key = hashlib.sha256("\0".join([SHIM.read_text(), text, opt, *defines]).encode()).hexdigest()
    with _compile_lock:
        if key in _cache:
            return _cache[key]
        base = os.path.join(_workdir(), key[:24])
        with open(base + ".cpp", "w") as f:
            f.write(text)
        cmd = [CXX, *CXXFLAGS, opt, *defines, "-o", base + ".so", base + ".cpp"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"g++ failed on the CUDA module ({base}.cpp):\n"
                               f"{proc.stderr[:8000]}")
        lib = ctypes.CDLL(base + ".so")
        lib.cudasim_error.restype = ctypes.c_char_p
        lib.cudasim_set_deadlock_ms.argtypes = (ctypes.c_int,)
        _cache[key] = _Library(lib, kernels, base + ".so", time.perf_counter() - t0)
        return _cache[key]


# ---------------------------------------------------------------- RawModule, launches


class RawModule:
    """``cupy.RawModule(code=source, options=())``: compiled by g++ at the first
    ``get_function`` (``-D``/``-U``/``-O<level>`` options go to g++, the others are
    ignored)."""

    def __init__(self, code: str, options=()):
        if not isinstance(code, str):
            raise TypeError("cudasim: RawModule takes CUDA C source as code=")
        self.code = code
        self.options = tuple(options)
        self._lib: _Library | None = None

    def get_function(self, name: str) -> Function:
        """The kernel ``name`` (an ``extern "C" __global__`` function), loaded on the
        current device: launching it on another one fails, as a CUfunction would."""
        dev = _state.current()
        _check_device(dev)
        if self._lib is None:
            self._lib = compile_module(self.code, self.options)
        sig = self._lib.kernels.get(name)
        if sig is None:
            raise CUDADriverError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name!r}; "
                                  "only extern \"C\" __global__ functions are found)")
        if isinstance(sig, NotImplementedError):
            raise sig
        fn = getattr(self._lib.lib, f"cudasim_launch_{name}")
        fn.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p),
                       ctypes.c_int)
        fn.restype = ctypes.c_int
        return Function(sig, fn, dev, self._lib.lib)


_IMAGE = b"cudasim-image\0"
_NVRTC_OPTION = re.compile(r"--?[a-z][\w-]*(=\S+)?|-[DU]\S+")


def compile_using_nvrtc(source: str, options=(), arch=None, filename="kern.cu",
                        name_expressions=None, log_stream=None, cache_in_memory=False,
                        jitify=None, method=None) -> tuple[bytes, None]:
    """``cupy.cuda.compiler.compile_using_nvrtc``: the image of ``source`` compiled with
    exactly ``options`` (CuPy adds none here, unlike ``RawModule``'s ``-ftz=true``) and
    no name mapping. Compiles now, as NVRTC does, so errors raise here; the image holds
    the options and the source (what ``function.Module.load`` needs, in any process).
    Each call's options are recorded in ``stats.nvrtc_options``."""
    options = tuple(options)
    bad = [o for o in options if not isinstance(o, str) or not _NVRTC_OPTION.fullmatch(o)]
    if bad:
        raise CompileError(f"nvrtc: error: invalid option(s) {bad!r}")
    compile_module(source, options)
    with stats._lock:
        stats.nvrtc_options.append(options)
    return _IMAGE + json.dumps(options).encode() + b"\0" + source.encode(), None


class Module:
    """``cupy.cuda.function.Module``: ``load(image)`` of an image ``compile_using_nvrtc``
    made (anything else fails as ``cuModuleLoadData`` does); ``get_function`` as
    ``RawModule``'s."""

    def __init__(self):
        self._raw: RawModule | None = None

    def load(self, image: bytes) -> None:
        if not isinstance(image, bytes):
            raise TypeError("cudasim: Module.load takes bytes")
        if not image.startswith(_IMAGE):
            raise CUDADriverError("CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid")
        options, _, source = image[len(_IMAGE):].partition(b"\0")
        self._raw = RawModule(code=source.decode(), options=tuple(json.loads(options)))

    def get_function(self, name: str) -> Function:
        if self._raw is None:
            raise CUDADriverError("CUDA_ERROR_INVALID_HANDLE: no image loaded")
        return self._raw.get_function(name)


def _dim(v, what: str) -> int:
    if isinstance(v, tuple):
        if not 1 <= len(v) <= 3:
            raise TypeError(f"cudasim: {what} must be an int or a tuple of 1 to 3 ints")
        if any(int(d) != 1 for d in v[1:]):
            raise NotImplementedError(f"cudasim: only the x dimension of {what} is emulated")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"cudasim: {what} must be an int or a tuple, got {type(v).__name__}")
    return int(v)


class Function:
    """A kernel: ``kernel(grid, block, args)``. Runs synchronously (CUDA launches are
    asynchronous: the runner must not rely on the kernel having finished)."""

    def __init__(self, sig: Signature, fn, device: int, lib: ctypes.CDLL):
        self.signature = sig
        self._fn = fn
        self._device = device
        self._lib = lib

    @property
    def name(self) -> str:
        return self.signature.name

    def __call__(self, grid, block, args, *, shared_mem: int = 0) -> None:
        sig = self.signature
        g, b = _dim(grid, "grid"), _dim(block, "block")
        if shared_mem:
            raise NotImplementedError("cudasim: dynamic shared memory is not emulated")
        if not isinstance(args, tuple):
            raise TypeError(f"cudasim: kernel args must be a tuple, got {type(args).__name__}")
        if not 1 <= g <= MAX_GRID or not 1 <= b <= MAX_BLOCK:
            raise CUDADriverError(f"CUDA_ERROR_INVALID_VALUE: invalid argument (launch of "
                                  f"{sig.name} with grid {g}, block {b})")
        if sig.launch_bounds is not None and b != sig.launch_bounds:
            code = ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for "
                    "launch" if b > sig.launch_bounds else
                    "cudasim (stricter than CUDA): the kernel is written for its block size")
            raise CUDADriverError(f"{code} ({sig.name} has __launch_bounds__"
                                  f"({sig.launch_bounds}), launched with block {b})")
        cur = _state.current()
        _check_device(cur)
        if cur != self._device:
            raise CUDADriverError(f"CUDA_ERROR_INVALID_HANDLE: invalid resource handle "
                                  f"({sig.name} was loaded on device {self._device}, "
                                  f"launched with device {cur} current)")
        if len(args) != len(sig.params):
            raise TypeError(f"cudasim: {sig} takes {len(sig.params)} arguments, "
                            f"got {len(args)}")
        pairs = list(enumerate(zip(args, sig.params, strict=True)))
        keep = [_argument(a, p, i, sig, cur) for i, (a, p) in pairs]
        _check_restrict(args, sig)
        argv = (ctypes.c_void_p * max(len(keep), 1))(*[k.ctypes.data for k in keep])
        with _launch_lock:
            self._lib.cudasim_set_deadlock_ms(int(_state.deadlock_seconds() * 1000))
            rc = self._fn(g, b, argv, int(_state.scheduler() == "fibers"))
            message = self._lib.cudasim_error().decode() if rc < 0 else ""
        stats._launch(sig.name)
        if rc < 0:
            raise CUDADriverError(f"cudasim: {sig.name} failed: {message}")
        if rc > 0:
            raise CUDADriverError(f"cudasim: cannot run {sig.name}: {os.strerror(rc)}")
        for i, (a, p) in pairs:
            if p.pointer and not a._mem.intact():
                raise IllegalAddressError(f"an illegal memory access was encountered: "
                                          f"{sig.name} wrote outside the allocation of "
                                          f"argument {i} ({p.ctype} {p.name})")

    def __repr__(self) -> str:
        return f"<cudasim kernel {self.signature}>"


def _argument(a, p: Param, i: int, sig: Signature, cur: int) -> np.ndarray:
    """A 0-d array holding the argument's bytes (a pointer or the scalar), after checking
    it against the parameter."""
    what = f"argument {i} ({p.ctype} {p.name}) of {sig.name}"
    if p.pointer:
        if not isinstance(a, ndarray):
            raise TypeError(f"cudasim: {what} must be a device array, got {type(a).__name__}")
        if a.dtype != p.dtype:
            raise TypeError(f"cudasim: {what} must be a {p.dtype} array, got {a.dtype}")
        if not a.flags.c_contiguous:
            raise TypeError(f"cudasim: {what} must be C-contiguous (shape {a.shape}, "
                            f"strides {a.strides})")
        if a._dev != cur:
            raise ValueError(f"Array device must be same as the current device: array device "
                             f"= {a._dev} while current = {cur} ({what})")
        if a.data.ptr % p.align:
            raise IllegalAddressError(f"misaligned address: {what} needs {p.align}-byte "
                                      f"alignment, got {a.data.ptr % 256} mod 256")
        return np.array(a.data.ptr, dtype=np.uintp)
    if type(a) is not p.dtype.type:
        raise TypeError(f"cudasim: {what} must be a NumPy scalar of type {p.dtype.type.__name__}"
                        f", got {type(a).__module__}.{type(a).__name__}")
    return np.array(a)


def _check_restrict(args: tuple, sig: Signature) -> None:
    """A written ``__restrict__`` pointer must not overlap any other array argument."""
    spans = [(i, a._a) for i, (a, p) in enumerate(zip(args, sig.params, strict=True)) if p.pointer]
    for i, x in spans:
        p = sig.params[i]
        if not p.restrict or p.const:
            continue
        for j, y in spans:
            if j != i and x.size and y.size and np.may_share_memory(x, y):
                raise ValueError(f"cudasim: __restrict__ argument {i} ({p.name}) of "
                                 f"{sig.name} overlaps argument {j} ({sig.params[j].name})")
