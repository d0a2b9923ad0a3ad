"""Prebuilt kernels: a first call on the CPU that waits for no compiler.

A loop kernel takes Numba 0.3-1 s to compile (its import and typing, then LLVM), which a
user meets at every new function's first call. Most first calls run map kernels over
float32 or float64 (arithmetic and the math of ``math.py``), and those can instead run at
once on two kernels Numba compiled when tracejit was installed: a small vector machine per
dtype that executes a *program*, one instruction per node of the kernel, over blocks of
``BLOCK`` elements held in per-thread registers on the stack.

Each instruction computes its node's expression as the generated kernel does: the same
``ops.py`` template (rendered by the same ``NUMBA.expr``) on values of the same dtype,
compiled by the same Numba without fast-math, so a program gives the compiled kernel's
bits. Only the order of the work differs: one node over a block, then the next, rather
than every node for one element. That is why ``compile="sync"`` may start a function on
its programs while the compile workers build its own kernels, and switch to those when
they are ready (the backend's ``compile`` with ``interim``, which only ``jit``'s first call
asks for): the answers are the same from the first call on, and only the speed and the
compile log show the switch.

A kernel runs as a program only if it is a map kernel whose every value is float32, or
every value float64 (0-d operands of either, Python floats and ints are cast as the kernel
casts them), reads each array input whole, as a trailing tile (a bias row) or as one
element broadcast to all, uses only ops with an instruction here (``OPS``) and holds at
most ``REGISTERS`` values at once. Any other kernel compiles as before.

The two kernels live in one shared library in ``_prebuilt/`` beside the package, built by
``setup.py`` at install (:func:`build`) or by ``python -m tracejit prebuild``. It is used
only while its key matches: the disk cache's (this backend's sources, tracejit's and
Numba's versions, the host CPU and the interpreter) over the sources the instructions are
rendered from and NumPy's version. An edited backend, another Numba or another CPU leave it
unused, and first calls compile as before.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import itertools
import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import DiskCacheWarning
from ...ir import Node, Value
from ...ir.registry import REGISTRY, loop_dtypes
from ...ir.types import TensorType
from ..language import Const
from . import diskcache, native
from .ops import NUMBA

BLOCK = 256  # elements per block: a block of each register stays in L1 (32 x 1 KiB)
REGISTERS = 32  # values a program holds at once
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# Ops with an instruction: the float-valued elementwise ops first calls meet (arithmetic,
# the vectorised math of math.py, the libm functions, rounding). Each instruction costs
# the install's compile ~0.1-0.5 s, so rarer ops stay compiled kernels.
OPS = ("add", "subtract", "multiply", "true_divide", "negative", "positive", "absolute",
       "square", "reciprocal", "maximum", "minimum", "fmax", "fmin", "power", "sqrt",
       "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sinh", "cosh",
       "arctan", "sin", "cos", "tan", "arcsin", "arccos", "arctan2", "hypot", "floor",
       "ceil", "trunc", "rint", "sign", "copysign", "logaddexp")

# Instruction codes below FIRST_OP move values; FIRST_OP + i computes pattern i.
LOAD, TILE, FILL32, FILL64, FILLVALUE, STORE, FILLINT = range(7)
FIRST_OP = 16
WIDTH = 5  # an instruction: code, destination register, operands a, b, c
HEADER = 3  # a program: instruction count, output operand, its number of dimensions
FORMAT = "tracejit-prebuilt-1"  # bump when the library's layout changes


def _synthetic(op: str, dtype: np.dtype, scalars: tuple[bool, ...]) -> Node:
    """A node computing ``op`` in ``dtype`` on operands that are 0-d where ``scalars``."""
    inputs = tuple(Value(TensorType(() if s else (2,), dtype)) for s in scalars)
    return Node(op, inputs, {}, Value(TensorType((2,), dtype)), None)


def _pattern(node: Node) -> str:
    """The expression the kernel computes for ``node`` on operands ``{0}``, ``{1}``."""
    return NUMBA.expr(node, [f"{{{i}}}" for i in range(len(node.inputs))])


@functools.cache
def patterns(dtype: np.dtype) -> dict[str, int]:
    """Every expression the machine of ``dtype`` computes -> its instruction code: each op
    of ``OPS`` whose loop dtypes are all ``dtype``, for each way its operands may be 0-d
    (``power`` takes sqrt for a 0-d exponent of 0.5), once per distinct expression. (Made
    by the build, ~10 ms; a process running programs reads the library's index instead.)"""
    found: dict[str, int] = {}
    for op in OPS:
        arity = REGISTRY[op].ufunc.nin
        for scalars in itertools.product((False, True), repeat=arity):
            if all(scalars):
                continue  # scalar arithmetic is never in a kernel (codegen.fusible)
            node = _synthetic(op, dtype, scalars)
            if set(loop_dtypes(node)) != {dtype}:
                continue
            found.setdefault(_pattern(node), FIRST_OP + len(found))
    return found


def source(dtype: np.dtype) -> str:
    """The Numba module of the machine for ``dtype``: one cfunc ``kernel(frame)``, where
    ``frame`` is the tuple (program, the kernel's arguments..., its constants...)."""
    T = NUMBA.dtype_name(dtype)
    imports = sorted({f for op in OPS for f in _math_calls(op, dtype)})
    r = lambda x: f"R[{x} + j]"
    lines = [
        f"# tracejit prebuilt kernel: {len(patterns(dtype))} instructions on {dtype.name}",
        "import numpy as np",
        "from numba import types",
        "from tracejit.backends.cpu.abi import U, arg, cfunc, dim, num_threads, stack, "
        "thread_id, value",
        *([f"from tracejit.backends.cpu.math import {', '.join(imports)}"] if imports else []),
        "", "",
        "@cfunc(types.void(types.int64), error_model='numpy')",
        "def kernel(frame):",
        "    P = arg(frame, 0, np.int64)",
        "    count, out, nd = U(P[0]), U(P[1]), U(P[2])",
        "    n = U(1)",
        "    for k in range(nd):",
        "        n *= dim(frame, out, k)",
        f"    R = stack({REGISTERS * BLOCK}, {T})",
        "    t, nt = thread_id(), num_threads()  # each thread takes a share of the blocks",
        f"    blocks = (n + U({BLOCK - 1})) // U({BLOCK})",
        "    for block in range(t * blocks // nt, (t + U(1)) * blocks // nt):",
        f"        start = block * U({BLOCK})",
        f"        m = min(U({BLOCK}), n - start)",
        "        for k in range(count):",
        f"            i = U({HEADER}) + U({WIDTH}) * k",
        f"            code, d = P[i], U(P[i + U(1)]) * U({BLOCK})",
        "            a, b, c = U(P[i + U(2)]), U(P[i + U(3)]), U(P[i + U(4)])",
        f"            ra, rb, rc = a * U({BLOCK}), b * U({BLOCK}), c * U({BLOCK})",
        f"            if code == {LOAD}:  # an input read whole: element start + j",
        f"                x = arg(frame, a, {T})",
        "                for j in range(m):",
        f"                    {r('d')} = x[start + j]",
        f"            elif code == {TILE}:  # a trailing tile of c elements",
        f"                x = arg(frame, a, {T})",
        "                for j in range(m):",
        f"                    {r('d')} = x[(start + j) % c]",
        f"            elif code == {FILL32} or code == {FILL64}:  # a 0-d array, cast",
        f"                s = {T}(arg(frame, a, np.float32)[0]) if code == {FILL32} else "
        f"{T}(arg(frame, a, np.float64)[0])",
        "                for j in range(m):",
        f"                    {r('d')} = s",
        f"            elif code == {FILLINT}:  # a 0-d int64 array (a weak int), cast",
        f"                s = {T}(arg(frame, a, np.int64)[0])",
        "                for j in range(m):",
        f"                    {r('d')} = s",
        f"            elif code == {FILLVALUE}:  # a Python float, cast",
        f"                s = {T}(value(frame, a))",
        "                for j in range(m):",
        f"                    {r('d')} = s",
        f"            elif code == {STORE}:  # register d into output a",
        f"                y = arg(frame, a, {T})",
        "                for j in range(m):",
        f"                    y[start + j] = {r('d')}",
    ]
    for text, code in patterns(dtype).items():
        lines += [f"            elif code == {code}:",
                  "                for j in range(m):",
                  f"                    {r('d')} = {T}({text.format(r('ra'), r('rb'), r('rc'))})"]
    return "\n".join(lines) + "\n"


def _math_calls(op: str, dtype: np.dtype) -> set[str]:
    arity = REGISTRY[op].ufunc.nin
    node = _synthetic(op, dtype, (False,) * arity)
    return NUMBA.math_calls(node) if set(loop_dtypes(node)) == {dtype} else set()


# ---------------------------------------------------------------------- the library

def folder() -> Path:
    """Where the library is kept: ``_prebuilt`` beside the package, or
    ``TRACEJIT_PREBUILT_DIR``."""
    given = os.environ.get("TRACEJIT_PREBUILT_DIR")
    return Path(given) if given else Path(__file__).resolve().parents[2] / "_prebuilt"


@functools.cache
def key() -> str:
    """What the library's machine code depends on: the disk cache's key (this backend's
    sources, the versions, the host, the interpreter) over the sources and NumPy's version
    that its instructions are rendered from (``ir``'s loop dtypes, ``language.py``)."""
    h = hashlib.sha256(f"{FORMAT} {np.__version__}".encode())
    package = Path(__file__).resolve().parents[2]
    for path in [*sorted((package / "ir").glob("*.py")), package / "backends" / "language.py"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return diskcache.key(h.hexdigest(), "cpu-prebuilt")


def build(directory: Path | None = None) -> Path:
    """Compile the two machines with Numba and link them into ``directory`` (default
    :func:`folder`); the library's path. Nothing is rebuilt when it is there and current."""
    from .compiler import compile_objects

    directory = folder() if directory is None else Path(directory)
    current = key()
    if _index(directory, current) is not None:
        return directory / _index(directory, current)["library"]
    symbols, objects = [], []
    for dtype in FLOATS:
        names, code = compile_objects(source(dtype), f"<tracejit prebuilt {dtype.name}>",
                                      ["kernel"])
        symbols += names
        objects += code
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / f"prebuilt-{current[:16]}.so"
    runtime = diskcache.built_c(native.RUNTIME_C, "runtime", directory)
    native.link(objects, library, runtime)
    runtime.unlink()
    index = {"key": current, "library": library.name, "sha256": native.digest(library),
             "symbols": dict(zip((d.name for d in FLOATS), symbols, strict=True)),
             "patterns": {d.name: list(patterns(d)) for d in FLOATS}}
    temporary = directory / f"index.json.{os.getpid()}"
    temporary.write_text(json.dumps(index))
    os.replace(temporary, directory / "index.json")
    for old in directory.glob("prebuilt-*.so"):
        if old != library:
            old.unlink()
    return library


def _index(directory: Path, current: str) -> dict | None:
    try:
        index = json.loads((directory / "index.json").read_text())
    except (OSError, ValueError):
        return None
    if index.get("key") != current or not (directory / index.get("library", "")).is_file():
        return None
    return index


@dataclass(frozen=True)
class Machine:
    """The machine of one dtype in the installed library: its kernel (a ctypes function,
    which libgomp's team can run) and the expressions its instructions compute."""

    kernel: object
    patterns: dict[str, int]


@functools.cache
def machines() -> dict[np.dtype, Machine] | None:
    """The machines of the installed library by dtype, or None where there is no current
    library (none built, or built for other sources, versions or another host)."""
    index = _index(folder(), key())
    if index is None:
        return None
    library = folder() / index["library"]
    if native.digest(library) != index.get("sha256"):
        _discard(library)
        return None
    native.configure()  # libgomp, which the kernels call
    try:
        lib = ctypes.CDLL(str(library))
        found = {}
        for d in FLOATS:
            fn = native.KERNEL(ctypes.cast(getattr(lib, index["symbols"][d.name]),
                                           ctypes.c_void_p).value)
            fn._owner, fn.launches = lib, native.Launches()
            texts = index["patterns"][d.name]
            found[d] = Machine(fn, {t: FIRST_OP + i for i, t in enumerate(texts)})
    except (OSError, AttributeError, KeyError, TypeError):
        return None
    return found


def _discard(library: Path) -> None:
    """Remove a library whose bytes are not those its index recorded (damaged), warning."""
    try:
        library.unlink()
    except OSError:  # (an installed package the user cannot write to)
        pass
    warnings.warn(f"tracejit: not loading {library}: its bytes do not match the hash "
                  "recorded when it was built (damaged); first calls compile their kernels "
                  "meanwhile. 'python -m tracejit prebuild' builds it again",
                  DiskCacheWarning, stacklevel=3)


# ---------------------------------------------------------------------- programs

@dataclass(eq=False)
class Program:
    """A map kernel as a program of the machine for ``dtype``: ``code`` (int64, see the
    module's layout constants) and the constants it reads, appended to the kernel's own
    arguments in the frame it runs on. The runner calls it as it calls the kernel:
    ``program(id(args))`` on its thread, ``parallel(program, args)`` on libgomp's team."""

    dtype: np.dtype
    code: np.ndarray
    constants: tuple

    def __call__(self, address: int) -> None:
        args = ctypes.cast(address, ctypes.py_object).value
        frame = (self.code, *args, *self.constants)
        machines()[self.dtype].kernel(id(frame))

    def launch(self, args: tuple) -> None:
        native.launch(machines()[self.dtype].kernel, (self.code, *args, *self.constants))


def parallel(kernel, args: tuple) -> None:
    """The runner's ``parallel`` while it runs programs."""
    kernel.launch(args)


def program(kern, params: list[str], refs: dict, views: dict, consts: dict) -> Program | None:
    """The program of the map kernel ``kern`` (a ``fusion.Kernel``) whose emitter read its
    arguments as ``params`` (the kernel's names for them, in the order of the argument
    tuple) and its values as ``refs`` (``LoopEmitter.ref``); None if it cannot be one."""
    nodes, shape = kern.nodes, kern.shape
    dtypes = {n.out.type.dtype for n in nodes}
    if len(dtypes) != 1 or next(iter(dtypes)) not in FLOATS:
        return None
    dtype = next(iter(dtypes))
    found = machines()[dtype].patterns
    instructions: list[tuple[int, Value, int, int]] = []  # code, value, operand, tile
    constants: list[np.ndarray] = []
    for v in kern.inputs:
        load = _load(v, kern, params, refs, views, consts, dtype, len(params) + 1 + len(
            constants))
        if load is None:
            return None
        code, operand, tile, constant = load
        if constant is not None:
            constants.append(constant)
        instructions.append((code, v, operand, tile))
    ops: list[tuple[int, Node]] = []
    for node in nodes:
        code = _opcode(node, dtype, found)
        if code is None:
            return None
        ops.append((code, node))
    outputs = [(n, f"o{k}") for k, n in enumerate(nodes) if n.out in kern.outputs]
    return _assemble(dtype, instructions, ops, outputs, params, shape, tuple(constants))


def _load(v: Value, kern, params, refs, views, consts, dtype, next_constant):
    """How a program reads input ``v``: (code, frame operand, tile size, a constant array
    to append or None), or None if it cannot."""
    ref, t = refs.get(v), v.type
    if isinstance(ref, Const):  # a literal in the kernel: a 0-d float64 in the frame
        value = ref.value.item() if isinstance(ref.value, (np.ndarray, np.generic)) else \
            ref.value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, int) and abs(value) > 2 ** 53):
            return None  # (a float64 would round such an int before the cast)
        return FILL64, next_constant, 0, np.asarray(float(value), np.float64)
    if ref is None or v in views:
        return None
    local = ref.split("[")[0]
    operand = params.index(local) + 1
    if t.ndim == 0 and t.dtype == np.int64:
        return FILLINT, operand, 0, None
    if t.dtype not in FLOATS:
        return None
    if t.ndim == 0 and t.weak and t.dtype == np.float64 and v not in consts:
        return FILLVALUE, operand, 0, None
    if math.prod(t.shape) == 1:  # 0-d, or one element broadcast to every one
        return (FILL32 if t.dtype == np.float32 else FILL64), operand, 0, None
    axes = kern.axes.get(v)
    if t.dtype != dtype or axes is None:
        return None
    # The input's element at the loop's flat index: its dimensions at every loop axis of
    # more than one element (whole) or at the last few (a tile repeating along the rest).
    looped = [a for a in range(len(kern.shape)) if kern.shape[a] != 1]
    held = [a for a in axes if a is not None and kern.shape[a] != 1]
    if held == looped:
        return LOAD, operand, 0, None
    if held == looped[len(looped) - len(held):]:
        return TILE, operand, math.prod(t.shape), None
    return None


def _opcode(node: Node, dtype: np.dtype, found: dict[str, int]) -> int | None:
    """The instruction computing ``node`` in a program of ``dtype``, or None."""
    if node.op not in OPS or loop_dtypes(node) is None or set(loop_dtypes(node)) != {dtype}:
        return None
    if any(v.type.ndim and v.type.dtype != dtype for v in node.inputs):
        return None
    scalars = tuple(v.type.ndim == 0 for v in node.inputs)
    return found.get(_pattern(_synthetic(node.op, dtype, scalars)))


def _assemble(dtype, loads, ops, outputs, params, shape, constants) -> Program | None:
    """The instructions in order, each value in a register freed after its last use."""
    stored = {n.out: params.index(name) + 1 for n, name in outputs}
    last: dict[Value, int] = {}
    for k, (_, node) in enumerate(ops):
        for v in node.inputs:
            last[v] = k
    free, register = list(range(REGISTERS - 1, -1, -1)), {}
    rows: list[list[int]] = []

    def take(v: Value) -> int | None:
        if not free:
            return None
        register[v] = free.pop()
        return register[v]

    for code, v, operand, tile in loads:
        r = take(v)
        if r is None:
            return None
        rows.append([code, r, operand, 0, tile])
    for k, (code, node) in enumerate(ops):
        a, b, c = ([register[v] for v in node.inputs] + [0, 0])[:3]
        r = take(node.out)  # (before its operands' registers are freed: a register written
        if r is None:  # while read would keep LLVM's alias check from its vector loop)
            return None
        for v in dict.fromkeys(node.inputs):  # (in order: the same kernel, the same code)
            if last.get(v) == k:
                free.append(register[v])
        rows.append([code, r, a, b, c])
        if node.out in stored:
            rows.append([STORE, r, stored[node.out], 0, 0])
        if last.get(node.out, -1) <= k:
            free.append(r)
    first_output = min(stored.values())
    header = [len(rows), first_output, len(shape) or 1]
    code = np.array(header + [x for row in rows for x in row], np.int64)
    return Program(dtype, code, constants)
