"""GPU benchmarks: tracejit's CUDA backend against CuPy, JAX and PyTorch on the same GPU.

Run on the GPU machine from the repository root (nothing can be installed there; CuPy,
JAX and PyTorch already are):

    PYTHONPATH=src python bench/bench_cuda.py            # full tables, short table last
    PYTHONPATH=src python bench/bench_cuda.py --write    # also replace RESULTS.md's "## GPU"
    python bench/bench_cuda.py --write-from FILE         # put a fetched bench_cuda.md there
    PYTHONPATH=src python bench/bench_cuda.py --smoke --sim   # tiny, on tools/cudasim

When OUT is set, the full tables go to $OUT/bench_cuda.md (rewritten after each benchmark,
so a run cut short keeps what it measured) and a log with tracebacks to
$OUT/bench_cuda.log; with --write, the updated RESULTS.md is copied to $OUT too, because
the device machine's working tree does not come back. The whole run took 65-70 s on an
H100 (2026-11-27; torch.compile's first call 4 s of it); contenders past --deadline
seconds (420) are skipped, and --only picks benchmarks. tools/gpu_session.sh runs it with
the CUDA tests in one command.

What it measures (the CUDA backend issue's workloads and targets):

1. exp of 230,400 float32 on the GPU, result kept there: the Theano tutorial's check
   (0.05 s for 1000 calls on a GTX 580). tracejit, CuPy eager, a hand-written CuPy
   RawKernel with one exp per element (the single-kernel launch), PyTorch eager, JAX jit.
   Target: tracejit's per-call time at most 1.1x the RawKernel's.
2. bench_cpu.py's chain tanh(x*y+0.5)*exp(-x*x)+sqrt(abs(y)) on 64M float32: bandwidth
   achieved (two arrays read, one written) as a fraction of a device-to-device copy's.
   Target: tracejit at >= 85% of the copy, faster than CuPy eager, at least as fast as
   cupy.fuse and JAX jit.
3. One gradient step of the Theano tutorial network (examples/two_moons.py's train_step,
   5000 x 2 -> 1000 tanh -> 2) and of a larger one (batch 65536, hidden 4096), float32,
   parameters and data on the GPU: tracejit, JAX jit(grad), PyTorch autograd.
   Target: tracejit at most JAX's time.

Method: each contender first runs on fresh random inputs and is compared with a float64
NumPy reference by relative norm (a WARNING row when it is off; the gradient steps compare
the gradient and the update); then it is timed as a loop of N calls on GPU-resident inputs
after warm-up calls, synchronised once at the end, on the host clock. The table gives the
median of R loops and their range. A peer that is not installed, a JAX without a GPU, or
a contender that fails is a row with the reason, never a crash. --sim installs the
emulated CuPy of tools/cudasim (kernels run on CPU threads, slowly) to smoke-test the
script on a machine without a GPU; the real-GPU peers are skipped there.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import functools
import gc
import os
import platform
import shutil
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import tracejit as tj
from tracejit.datasets import make_moons

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import two_moons as tm  # noqa: E402
from jax_two_moons import jax_step  # noqa: E402

TAG, TITLE = "bench-cuda", "GPU"
HOWTO = ("Produced by `PYTHONPATH=src python bench/bench_cuda.py --write` on the GPU machine "
         "(from the repository root; the script's docstring says what it measures and how). "
         "Times are medians of {repeat} loops of N calls (N given per table) on GPU-resident "
         "data, each loop synchronised once at its end, after {warmup} warm-up calls; every "
         "contender is first checked against a float64 reference on fresh random inputs.")
TOL = 1e-5  # relative-norm tolerance of float32 elementwise results
GRAD_TOL = 1e-3  # of float32 gradients (sums over the batch)
TF32_TOL = 1e-2  # of gradients through matrix products that may run in TF32
STEP_TOL = 0.1  # of a step's update p_new - p: float32 rounding of p is most of it
CONTENDER_S = 30  # timing loops of one contender: at most about this long
DEADLINE_S = 420  # later contenders are skipped (the device machine stops a command at 600 s)
SIM = False  # set by --sim
START = time.perf_counter()


@dataclass(frozen=True)
class Sizes:
    exp_n: int
    exp_calls: int
    chain_n: int
    chain_calls: int
    nets: tuple[tuple[int, int, int], ...]  # (batch, hidden, calls per loop)
    repeat: int
    warmup: int


FULL = Sizes(230_400, 1000, 64 * 2**20, 50, ((5000, 1000, 50), (65536, 4096, 10)), 7, 3)
SMOKE = Sizes(4096, 3, 4096, 3, ((256, 64, 2), (512, 128, 2)), 2, 1)


# ------------------------------------------------------------------ output helpers
def log(msg: str) -> None:
    line = f"[{time.perf_counter() - START:7.1f} s] {msg}"
    print(line, file=sys.stderr, flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "bench_cuda.log"), "a") as f:
            f.write(line + "\n")


def log_exception(name: str) -> None:
    log(f"{name} failed:\n{traceback.format_exc()}")


def fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t * 1e6:.1f} us" if t < 1e-3 else f"{t * 1e3:.3f} ms" if t < 1 else f"{t:.2f} s"


def tree_map(f, x):
    if isinstance(x, dict):
        return {k: tree_map(f, v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(tree_map(f, v) for v in x)
    return f(x)


# ------------------------------------------------------------------ frameworks
class Skip(Exception):
    """A contender that cannot run here; the message goes in its row."""


@dataclass
class Framework:
    mod: object  # the module a contender's ``make`` receives
    put: Callable  # NumPy array -> array on the GPU
    sync: Callable  # (a result) -> None, once the GPU has finished it
    host: Callable  # result array -> NumPy array
    version: str
    context: Callable = contextlib.nullcontext  # entered around every call


def _cupy():
    try:
        import cupy
    except ImportError:
        raise Skip("CuPy is not installed") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver or no device
        raise Skip(f"CuPy sees no GPU ({e})") from None
    if count == 0:
        raise Skip("CuPy sees no GPU")
    return cupy


def build_cupy() -> Framework:
    cp = _cupy()
    dev = cp.cuda.Device(0)
    return Framework(cp, cp.asarray, lambda out: dev.synchronize(), lambda a: a.get(),
                     getattr(cp, "__version__", "cudasim"))


def _tj_host(a) -> np.ndarray:
    if tj.targets.device_of(a) in (None, tj.targets.CPU):
        raise AssertionError(f"tracejit returned {type(a).__name__}, not a GPU array")
    return tj.to_host(a)


def build_tracejit() -> Framework:
    _cupy()
    return Framework(tj, lambda a: tj.to_device(a, "cuda"), lambda out: tj.synchronize(),
                     _tj_host, tj.__version__, lambda: tj.device("cuda"))


def build_jax() -> Framework:
    if SIM:
        raise Skip("--sim: real-GPU peers are not run")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU
    try:
        import jax
    except ImportError:
        raise Skip("JAX is not installed") from None
    try:
        gpu = jax.devices("gpu")[0]
    except Exception:  # RuntimeError: unknown backend
        raise Skip("JAX has no GPU backend here (jax.devices(): "
                   f"{', '.join(sorted({d.platform for d in jax.devices()}))})") from None
    return Framework(jax, lambda a: jax.device_put(a, gpu), jax.block_until_ready,
                     np.asarray, f"{jax.__version__} ({gpu.device_kind})")


def build_torch() -> Framework:
    if SIM:
        raise Skip("--sim: real-GPU peers are not run")
    try:
        import torch
    except ImportError:
        raise Skip("PyTorch is not installed") from None
    if not torch.cuda.is_available():
        raise Skip("PyTorch sees no GPU")
    return Framework(torch, lambda a: torch.from_numpy(np.ascontiguousarray(a)).to("cuda"),
                     lambda out: torch.cuda.synchronize(),
                     lambda t: t.detach().cpu().numpy(), torch.__version__)


BUILDERS = {"tracejit": build_tracejit, "cupy": build_cupy, "jax": build_jax,
            "torch": build_torch}
_frameworks: dict[str, Framework | Skip] = {}


def framework(name: str) -> Framework:
    """The framework ``name``, built once; raises :class:`Skip` (the same each time)."""
    if name not in _frameworks:
        try:
            _frameworks[name] = BUILDERS[name]()
        except Skip as e:
            _frameworks[name] = e
    fw = _frameworks[name]
    if isinstance(fw, Skip):
        raise fw
    return fw


def free_memory() -> None:
    """Give cached GPU memory back between benchmarks (each framework keeps a pool)."""
    gc.collect()
    cupy = sys.modules.get("cupy")
    if hasattr(cupy, "get_default_memory_pool"):
        cupy.get_default_memory_pool().free_all_blocks()
    torch = _frameworks.get("torch")
    if isinstance(torch, Framework):
        torch.mod.cuda.empty_cache()


# ------------------------------------------------------------------ measuring
@dataclass
class Contender:
    name: str
    fw: str  # key of BUILDERS
    make: Callable  # (framework module) -> fn, or (fn, fn the check also runs)
    tol: float = TOL


@dataclass
class Row:
    name: str
    times: list[float] = field(default_factory=list)  # seconds per call, one per loop
    first: float | None = None  # the first call (compilation included), seconds
    check: str = ""  # relative errors against the float64 reference
    ok: bool = True
    note: str = ""

    @property
    def t(self) -> float | None:
        return statistics.median(self.times) if self.times else None


def measure(c: Contender, check: Callable, args, number: int, repeat: int,
            warmup: int) -> Row:
    """Check ``c`` on fresh inputs (``check``), then time it on ``args``."""
    row = Row(c.name)
    try:
        if time.perf_counter() - START > DEADLINE_S:
            raise Skip(f"not run: the script passed {DEADLINE_S} s")
        fw = framework(c.fw)
        made = c.make(fw.mod)
        fn, aux = made if isinstance(made, tuple) else (made, None)
        with fw.context():
            check(row, fw, fn, aux, c.tol)
            time_calls(row, fw, fn, tree_map(fw.put, args), number, repeat, warmup)
    except Skip as e:
        row.note = str(e)
    except Exception as e:
        if not (SIM and isinstance(e, AttributeError)):  # the emulator's missing CuPy parts
            log_exception(c.name)
        what = "skipped (emulator)" if SIM else "FAILED"
        msg = str(e).splitlines()[0][:120] if str(e) else ""
        row.note = f"{what}: {type(e).__name__}: {msg}"
    log(f"{c.name}: {fmt_time(row.t)} {row.check} {row.note}")
    return row


def time_calls(row: Row, fw: Framework, fn, args, number: int, repeat: int,
               warmup: int) -> None:
    """``row.times``: seconds per call of ``repeat`` loops of ``number`` calls, each loop
    synchronised once; fewer calls per loop if one call would overrun ``CONTENDER_S``."""
    for _ in range(warmup):
        out = fn(*args)
    fw.sync(out)
    t0 = time.perf_counter()
    fw.sync(fn(*args))
    fits = int(CONTENDER_S / repeat / max(time.perf_counter() - t0, 1e-9))
    if fits < number:
        number = max(fits, 1)
        row.note = f"{number} call(s) per loop to stay within {CONTENDER_S} s; " + row.note
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            out = fn(*args)
        fw.sync(out)
        row.times.append((time.perf_counter() - t0) / number)


def first_call(row: Row, fw: Framework, fn, args):
    """Run ``fn`` once, timing it (compilation included) and noting any warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        out = fn(*args)
        fw.sync(out)
        row.first = time.perf_counter() - t0
    if caught:
        row.note = f"{len(caught)} warning(s), first: {str(caught[0].message).splitlines()[0]}"
    return out


def relerr(out, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64; infinite for NaN or a wrong shape."""
    out = np.asarray(out, np.float64)
    if out.shape != ref.shape:
        raise AssertionError(f"result shape {out.shape}, expected {ref.shape}")
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    return err if np.isfinite(err) else float("inf")


def elementwise_check(ref_fn: Callable, inputs: list[np.ndarray]) -> Callable:
    """The check of an elementwise contender: its result on ``inputs`` against
    ``ref_fn`` of them in float64."""
    ref = ref_fn(*(a.astype(np.float64) for a in inputs))

    def check(row: Row, fw: Framework, fn, aux, tol: float) -> None:
        out = first_call(row, fw, fn, [fw.put(a) for a in inputs])
        err = relerr(fw.host(out), ref)
        row.check, row.ok = f"{err:.1e}", err <= tol

    return check


# ------------------------------------------------------------------ tables
def table(title: str, rows: list[Row], columns: list[tuple[str, Callable]],
          notes: list[str]) -> str:
    """A markdown table: name, median, range, ``columns``, first call, check or note."""
    head = ["implementation", "per call", "range", *(h for h, _ in columns), "first call",
            "check (rel. err.) / note"]
    lines = [f"### {title}", "", *notes, "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        rng = f"{fmt_time(min(r.times))} - {fmt_time(max(r.times))}" if r.times else "-"
        cells = [r.name, fmt_time(r.t), rng, *(f(r) if r.t else "-" for _, f in columns),
                 fmt_time(r.first), "; ".join(s for s in (r.check, r.note) if s)]
        lines.append("| " + " | ".join(cells) + " |")
    for r in rows:
        if r.times and not r.ok:
            cells = ["**WARNING**", f"{r.name} differs from the float64 reference: {r.check}"]
            lines.append("| " + " | ".join(cells + [""] * (len(head) - 2)) + " |")
    return "\n".join(lines)


def short(title: str, rows: list[Row], column: tuple[str, Callable] | None,
          verdicts: list[str]) -> str:
    """The table in brief, for the end of the output: median, one column, the verdicts."""
    label = column[0] if column else ""
    lines = [title, f"  {'implementation':44} {'per call':>11}  {label}"]
    for r in rows:
        if r.t is None:
            lines.append(f"  {r.name[:44]:44} {'-':>11}  {r.note[:80]}")
            continue
        extra = column[1](r) if column else ""
        flag = "" if r.ok else f"  WARNING: off the reference, {r.check}"
        lines.append(f"  {r.name[:44]:44} {fmt_time(r.t):>11}  {extra}{flag}")
    return "\n".join(lines + [f"  {v}" for v in verdicts])


def ratio(a: Row | None, b: Row | None) -> float | None:
    return a.t / b.t if a is not None and b is not None and a.t and b.t else None


def times_x(base: Row | None) -> Callable[[Row], str]:
    """A column: the row's time over ``base``'s."""
    return lambda r: f"{ratio(r, base):.2f}x" if ratio(r, base) is not None else "-"


def verdict(what: str, value: float | None, ok: Callable[[float], bool],
            fmt: str = "{:.2f}x") -> str:
    if value is None:
        return f"- {what}: cannot tell (a contender did not run)"
    return f"- {what}: {'met' if ok(value) else 'NOT met'} ({fmt.format(value)})"


@dataclass
class Section:
    full: str
    brief: str


def section(title: str, rows: list[Row], columns: list[tuple[str, Callable]],
            notes: list[str], verdicts: list[str]) -> Section:
    return Section(table(title, rows, columns, notes + verdicts),
                   short(title, rows, columns[0] if columns else None, verdicts))


def again(c: Contender) -> Contender:
    """``c`` timed a second time, last: the difference between the two is noise."""
    return dataclasses.replace(c, name=c.name.split(" (")[0] + ", timed again last")


def find(rows: list[Row], prefix: str) -> Row | None:
    return next((r for r in rows if r.name.startswith(prefix)), None)


# ------------------------------------------------------------------ 1. exp
KERNELS = r"""
extern "C" __global__ void __launch_bounds__(256)
exp_f32(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = expf(x[i]);
}

extern "C" __global__ void __launch_bounds__(256)
chain_f32(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
          long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float a = x[i], b = y[i];
    out[i] = tanhf(a * b + 0.5f) * expf(-a * a) + sqrtf(fabsf(b));
  }
}
"""


def raw_kernel(cp, name: str, preallocated: bool = False):
    """A call of the hand-written kernel ``name`` (one thread per element) returning a new
    array, or (``preallocated``) writing one array allocated, NaN-filled, on first use."""
    kernel = cp.RawModule(code=KERNELS).get_function(name)
    outs = {}

    def call(*xs):
        n = xs[0].size
        if not preallocated:
            y = cp.empty(xs[0].shape, np.float32)
        elif (y := outs.get(xs[0].shape)) is None:
            y = outs[xs[0].shape] = cp.full(xs[0].shape, np.nan, np.float32)
        size = np.int32(n) if name == "exp_f32" else np.int64(n)
        kernel(((n + 255) // 256,), (256,), (*xs, y, size))
        return y

    return call


def exp_contenders() -> list[Contender]:
    return [
        Contender("tracejit", "tracejit", lambda tj_: tj_.jit(np.exp)),
        Contender("CuPy RawKernel (single-kernel launch)", "cupy",
                  lambda cp: raw_kernel(cp, "exp_f32")),
        Contender("CuPy RawKernel, preallocated output", "cupy",
                  lambda cp: raw_kernel(cp, "exp_f32", preallocated=True)),
        Contender("CuPy eager (cupy.exp)", "cupy", lambda cp: cp.exp),
        Contender("PyTorch eager (torch.exp)", "torch", lambda torch: torch.exp),
        Contender("JAX jit", "jax", lambda jax: jax.jit(jax.numpy.exp)),
    ]


def bench_exp(sz: Sizes) -> Section:
    rng = np.random.default_rng(10)
    x = rng.random(sz.exp_n, dtype=np.float32)  # the tutorial's data: uniform in [0, 1)
    check = elementwise_check(np.exp, [rng.standard_normal(sz.exp_n, dtype=np.float32)])
    contenders = exp_contenders()
    rows = [measure(c, check, [x], sz.exp_calls, sz.repeat, sz.warmup)
            for c in [*contenders, again(contenders[0])]]
    base = find(rows, "CuPy RawKernel (single")
    title = f"1. exp of {sz.exp_n:,} float32, result kept on the GPU, per call"
    notes = [f"Loops of {sz.exp_calls} calls on one input, as in the tutorial (it fits in L2: "
             "this measures the cost of a call). Theano's published figure: 0.05 s for 1000 "
             "calls (50 us per call) on a GTX 580."]
    verdicts = [verdict("tracejit at most 1.1x the RawKernel's time",
                        ratio(find(rows, "tracejit"), base), lambda v: v <= 1.1)]
    return section(title, rows, [("/ RawKernel's", times_x(base))], notes, verdicts)


# ------------------------------------------------------------------ 2. chain
def chain(xp, x, y):
    """bench_cpu.py's ``chain``, with the array module as an argument."""
    return xp.tanh(x * y + 0.5) * xp.exp(-x * x) + xp.sqrt(xp.abs(y))


def chain_np(x, y):
    return chain(np, x, y)


def cupy_fused(cp):
    fuse = cp.fuse

    def chain_cupy(x, y):
        return chain(cp, x, y)

    return fuse(chain_cupy)


def torch_compiled(torch):
    if not hasattr(torch, "compile"):
        raise Skip("this PyTorch has no torch.compile")

    def chain_torch(x, y):
        return chain(torch, x, y)

    return torch.compile(chain_torch)


def chain_contenders() -> list[Contender]:
    return [
        Contender("tracejit", "tracejit", lambda tj_: tj_.jit(chain_np)),
        Contender("CuPy eager", "cupy", lambda cp: functools.partial(chain, cp)),
        Contender("cupy.fuse", "cupy", cupy_fused),
        Contender("CuPy RawKernel (hand-written, scalar)", "cupy",
                  lambda cp: raw_kernel(cp, "chain_f32")),
        Contender("JAX jit", "jax", lambda jax: jax.jit(functools.partial(chain, jax.numpy))),
        Contender("PyTorch eager", "torch", lambda torch: functools.partial(chain, torch)),
        Contender("torch.compile", "torch", torch_compiled),
    ]


def copy_contenders() -> list[Contender]:
    def copyto(cp):
        if not hasattr(cp, "copyto"):
            raise Skip("no cupy.copyto (emulator)")
        outs = {}

        def call(x):
            if (y := outs.get(x.shape)) is None:
                y = outs[x.shape] = cp.empty(x.shape, x.dtype)
            cp.copyto(y, x)
            return y

        return call

    return [Contender("device copy: x.copy()", "cupy", lambda cp: lambda x: x.copy(), tol=0.0),
            Contender("device copy: cupy.copyto", "cupy", copyto, tol=0.0)]


def bench_chain(sz: Sizes) -> Section:
    rng = np.random.default_rng(20)
    x, y = (rng.standard_normal(sz.chain_n, dtype=np.float32) for _ in range(2))
    fresh = [rng.standard_normal(sz.chain_n, dtype=np.float32) for _ in range(2)]
    run = functools.partial(measure, number=sz.chain_calls, repeat=sz.repeat,
                            warmup=sz.warmup)
    copies = [run(c, elementwise_check(lambda a: a, fresh[:1]), [x])
              for c in copy_contenders()]
    free_memory()
    check = elementwise_check(chain_np, fresh)
    contenders = chain_contenders()
    rows = [run(c, check, [x, y]) for c in [*contenders, again(contenders[0])]]
    moved = {id(r): (2 if r in copies else 3) * x.nbytes for r in copies + rows}
    ceiling = max((moved[id(r)] / r.t for r in copies if r.t), default=None)

    def share(r: Row) -> float | None:
        return moved[id(r)] / r.t / ceiling if ceiling and r.t else None

    columns = [("of copy's GB/s", lambda r: f"{share(r):.0%}" if share(r) else "-"),
               ("GB/s", lambda r: f"{moved[id(r)] / r.t / 1e9:.0f}")]
    tjr = find(rows, "tracejit")
    notes = [f"Loops of {sz.chain_calls} calls. Bandwidth: bytes read plus written (two "
             "inputs and the result; a copy reads and writes one array) over the time; "
             "the ceiling is the faster device copy (cupy.copyto writes into one array, "
             "x.copy() allocates its result as the contenders do)."]
    verdicts = [
        verdict("tracejit at >= 85% of the copy's bandwidth", share(tjr) if tjr else None,
                lambda v: v >= 0.85, "{:.0%}"),
        verdict("tracejit faster than CuPy eager (time ratio < 1)",
                ratio(tjr, find(rows, "CuPy eager")), lambda v: v < 1),
        verdict("tracejit at least as fast as cupy.fuse (time ratio <= 1)",
                ratio(tjr, find(rows, "cupy.fuse")), lambda v: v <= 1),
        verdict("tracejit at least as fast as JAX jit (time ratio <= 1)",
                ratio(tjr, find(rows, "JAX jit")), lambda v: v <= 1)]
    title = (f"2. tanh(x*y+0.5)*exp(-x*x)+sqrt(abs(y)), {sz.chain_n:,} float32 "
             f"({x.nbytes / 2**20:.4g} MiB per array)")
    return section(title, copies + rows, columns, notes, verdicts)


# ------------------------------------------------------------------ 3. gradient step
def network(batch: int, hidden: int, seed: int):
    """Two-moons data and tutorial-style parameters (two_moons.init_params' scaling; equal
    to it for hidden 1000, seed 0)."""
    rng = np.random.default_rng(seed)
    params = {
        "W1": (rng.standard_normal((2, hidden)) / np.sqrt(2)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "W2": (rng.standard_normal((hidden, 2)) / np.sqrt(hidden)).astype(np.float32),
        "b2": np.zeros(2, np.float32),
    }
    X, labels = make_moons(batch, 0.20, np.random.default_rng(seed + 100))
    return params, X.astype(np.float32), np.eye(2, dtype=np.float32)[labels]


def torch_step(torch):
    """The same network and loss with PyTorch autograd (log_softmax for log(softmax))."""

    def loss(p, X, Y):
        a1 = torch.tanh(X @ p["W1"] + p["b1"])
        log_p = torch.log_softmax(a1 @ p["W2"] + p["b2"], dim=1)
        reg = tm.REG_LAMBDA / 2 / X.shape[0] * ((p["W1"] ** 2).sum() + (p["W2"] ** 2).sum())
        return -(Y * log_p).sum(dim=1).mean() + reg

    def grad(p, X, Y):
        leaves = {k: v.detach().requires_grad_() for k, v in p.items()}
        grads = torch.autograd.grad(loss(leaves, X, Y), list(leaves.values()))
        return dict(zip(leaves, grads, strict=True))

    def step(p, X, Y):
        g = grad(p, X, Y)
        with torch.no_grad():
            return {k: p[k] - tm.EPSILON * g[k] for k in p}

    return step, grad


def tf32_note() -> str:
    """Which float32 matrix products may use TF32 (tracejit's go through CuPy's cuBLAS)."""
    torch = _frameworks.get("torch")
    torch_tf32 = torch.mod.backends.cuda.matmul.allow_tf32 if isinstance(torch, Framework) \
        else "-"
    return (f"TF32: CuPy (tracejit's matmul) CUPY_TF32={os.environ.get('CUPY_TF32', 'unset')}, "
            f"PyTorch allow_tf32={torch_tf32}, JAX per row.")


def step_contenders() -> list[Contender]:
    return [
        Contender("tracejit (two_moons.train_step)", "tracejit",
                  lambda tj_: (tm.train_step, tj_.jit(tj_.grad(tm.loss))), GRAD_TOL),
        Contender("JAX jit(grad), default precision", "jax", jax_step, TF32_TOL),
        Contender("JAX jit(grad), precision highest", "jax",
                  lambda jax: jax_step(jax, "highest"), GRAD_TOL),
        Contender("PyTorch autograd (eager)", "torch", torch_step, GRAD_TOL),
    ]


def step_check(params, X, Y) -> Callable:
    """The check of a gradient step: its gradient function against the float64 hand-written
    backpropagation (two_moons.numpy_train_step), and the step's update against the float64
    update (loosely: rounding the float32 parameters is most of the difference)."""
    p64 = tree_map(lambda a: a.astype(np.float64), params)
    new64 = tm.numpy_train_step(p64, X.astype(np.float64), Y.astype(np.float64))
    g64 = {k: (p64[k] - new64[k]) / tm.EPSILON for k in p64}

    def check(row: Row, fw: Framework, step, grad, tol: float) -> None:
        args = tree_map(fw.put, (params, X, Y))
        new = tree_map(fw.host, first_call(row, fw, step, args))
        g = tree_map(fw.host, grad(*args))
        g_err = max(relerr(g[k], g64[k]) for k in g64)
        s_err = max(relerr(new[k].astype(np.float64) - p64[k], new64[k] - p64[k]) for k in p64)
        row.check = f"grad {g_err:.1e}, update {s_err:.1e}"
        row.ok = g_err <= tol and s_err <= STEP_TOL

    return check


def bench_step(batch: int, hidden: int, calls: int, sz: Sizes) -> Section:
    args = network(batch, hidden, seed=0)
    check = step_check(*network(batch, hidden, seed=1))
    contenders = step_contenders()
    rows = [measure(c, check, args, calls, sz.repeat, sz.warmup)
            for c in [*contenders, again(contenders[0])]]
    tjr, jax_row = find(rows, "tracejit"), find(rows, "JAX jit(grad), default")
    title = f"3. gradient step, {batch:,} x 2 -> {hidden:,} tanh -> 2, float32"
    notes = [f"Loops of {calls} steps on the same parameters and data (each step returns new "
             "parameters). Check: the largest relative error over the four gradients "
             f"(tolerance {GRAD_TOL:g}; {TF32_TOL:g} for JAX's default precision, which may "
             "use TF32) and over the four updates p_new - p (tolerance "
             f"{STEP_TOL:g}: float32 rounding of p). " + tf32_note()]
    verdicts = [
        verdict(f"{hidden:,} hidden: tracejit at most JAX jit(grad)'s time (default precision)",
                ratio(tjr, jax_row), lambda v: v <= 1),
        verdict(f"{hidden:,} hidden: tracejit at most JAX jit(grad)'s time (precision highest)",
                ratio(tjr, find(rows, "JAX jit(grad), precision")), lambda v: v <= 1)]
    return section(title, rows, [("/ JAX's (default)", times_x(jax_row))], notes, verdicts)


# ------------------------------------------------------------------ environment, main
def environment() -> str:
    try:
        cp = _cupy()
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        rt = cp.cuda.runtime.runtimeGetVersion()
        gpu = f"{name}, CUDA runtime {rt // 1000}.{rt % 1000 // 10}"
    except Skip as e:
        gpu = f"no GPU ({e})"
    except AttributeError:
        gpu = "the emulated GPU of tools/cudasim (--sim: times mean nothing)"

    def version(name: str, label: str) -> str:
        fw = _frameworks.get(name)
        if fw is None:
            return f"{label} not used"
        return f"{label} {fw.version}" if isinstance(fw, Framework) else f"{label}: {fw}"

    host = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return (f"Measured {datetime.date.today()} on {gpu}; host {host}, NumPy {np.__version__}, "
            + ", ".join(version(n, label) for n, label in (
                ("tracejit", "tracejit"), ("cupy", "CuPy"), ("jax", "JAX"),
                ("torch", "PyTorch"))) + ".")


def write_results(text: str) -> None:
    from bench_cpu import RESULTS, write_section

    write_section(TAG, TITLE, text)
    print(f"wrote the {TITLE} section of {RESULTS}", file=sys.stderr)
    if os.environ.get("OUT"):
        shutil.copy(RESULTS, os.path.join(os.environ["OUT"], "RESULTS.md"))


def install_sim() -> None:
    """Put tools/cudasim's emulated CuPy in sys.modules (smoke tests only)."""
    global SIM
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import cudasim

    cudasim.install()
    tj.targets._cupy.cache_clear()  # it may have looked for CuPy already
    tj.targets._gpu_count.cache_clear()
    SIM = True


def benchmarks(sz: Sizes, only: set[str]) -> list[Callable[[], Section]]:
    todo = []
    if "exp" in only:
        todo.append(lambda: bench_exp(sz))
    if "chain" in only:
        todo.append(lambda: bench_chain(sz))
    if "grad" in only:
        todo += [functools.partial(bench_step, b, h, n, sz) for b, h, n in sz.nets]
    return todo


def main() -> None:
    global DEADLINE_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace RESULTS.md's GPU section")
    parser.add_argument("--write-from", metavar="FILE",
                        help="replace RESULTS.md's GPU section with FILE (a bench_cuda.md)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, few repetitions")
    parser.add_argument("--sim", action="store_true", help="use tools/cudasim's emulated CuPy")
    parser.add_argument("--only", default="exp,chain,grad", help="comma-separated subset")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S,
                        help="seconds after which later contenders are skipped")
    args = parser.parse_args()
    DEADLINE_S = args.deadline
    if args.write and (args.smoke or args.sim):
        parser.error("--write records real measurements: not with --smoke or --sim")
    if args.write_from:
        write_results(open(args.write_from).read().strip())
        return
    if args.sim:
        install_sim()
    sz = SMOKE if args.smoke else FULL
    sections: list[Section] = []
    howto = HOWTO.format(repeat=sz.repeat, warmup=sz.warmup)
    text = "\n\n".join([howto, environment()])
    for bench in benchmarks(sz, set(args.only.split(","))):
        sections.append(bench())
        free_memory()
        text = "\n\n".join([howto, environment(), *(s.full for s in sections)])
        if os.environ.get("OUT"):
            with open(os.path.join(os.environ["OUT"], "bench_cuda.md"), "w") as f:
                f.write(text + "\n")
    print(text)
    if args.write:
        write_results(text)
    print("\n" + "=" * 30 + " short table " + "=" * 30)
    print(environment())
    print("\n\n".join(s.brief for s in sections))


if __name__ == "__main__":
    main()
