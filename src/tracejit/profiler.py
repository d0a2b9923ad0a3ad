"""Where the time of jitted calls goes, step by step, in the spirit of Theano's profiler.

    with tracejit.profile() as p:
        for _ in range(100):
            step(params, X, Y)
    print(p)

Inside the block every jitted call (from any thread) runs a profiling runner: the same
compiled steps, each timed. ``jit`` builds it the first time a signature is profiled,
sharing the plain runner's compiled kernels, so profiling compiles nothing twice. A call
that compiles its signature inside the block runs once more, profiled, so that the
timings exclude compilation, which is reported per function instead. Profiled calls run
one at a time (under :data:`lock`). Outside a block the only cost is one check per call.

This module is plain data: the statistics, the ``profile()`` block and the report. It
knows no backend; backends import :class:`StepInfo` from it to describe their steps.

The memory a loop keeps is listed too: for every ``scan`` of a profiled function, the bytes
it stacks per step (each step's ``ys``, kept for all steps) and in all, and how many of
them are residuals (values a gradient's backward loop reads back: the carries and the
expensive intermediate results, see ``passes/residuals.py``). :func:`loop_memory` gives
the same for any lowered function without running it.

On a GPU each step is timed to its end (the profiling runner synchronises after it), and
the copies between devices that the placement pass inserted are summed on a line of their
own, as in Theano's profile: bytes moved and the time it took.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

ACTIVE: list[Profile] = []  # the open profiles; jit checks it on every call
# Held while a profiled call runs and is recorded: a profiling runner reports its steps'
# times to one recorder at a time, and the profiles' counters are updated by one thread.
lock = threading.RLock()


@dataclass(frozen=True)
class StepInfo:
    """One step of a runner, as a backend describes it in ``Runner.steps``."""

    name: str  # what the runner calls: kernel3, lib4, node7
    ops: str  # the ops it computes
    location: object  # SourceLocation of its first node (or None)
    nbytes: int  # bytes read from its inputs plus bytes written to its outputs


@dataclass(frozen=True)
class LoopMemory:
    """What one ``scan`` keeps in memory: its stacked results (``ys``), one slice per step."""

    function: str
    loop: str  # its value's name in the printed IR: "%3", "%3.1" in the body of %3
    where: str  # the user's line
    steps: int
    per_step: int  # bytes stacked per step, all stacked results
    residuals_per_step: int  # of which a backward loop of the same graph reads back

    @property
    def total(self) -> int:
        """Bytes of the stacked results over all steps (one run of the loop)."""
        return self.steps * self.per_step

    @property
    def residuals(self) -> int:
        return self.steps * self.residuals_per_step


def loop_memory(lowered: Any) -> list[LoopMemory]:
    """The memory each ``scan`` of a lowered function (``f.lower(*args)``, or an IR graph)
    stacks, loops in bodies included (a nested loop's figures are for one run of it)."""
    graph = getattr(lowered, "optimized_graph", lowered)
    found: list[LoopMemory] = []
    _loops(graph, graph.name, "", found)
    return found


def _loops(graph, function: str, prefix: str, found: list[LoopMemory]) -> None:
    read_by_loops = _read_by_loops(graph)
    for i, node in enumerate(graph.nodes):
        loop = node.attrs.get("loop")
        if loop is None:
            continue
        name = f"{prefix}{i}"
        for body in (getattr(loop, k) for k in ("cond", "body") if hasattr(loop, k)):
            _loops(body, function, f"{name}.", found)
        if node.op != "scan":
            continue
        per_step = residuals = 0
        for k, v in enumerate(loop.body.outputs[loop.n_carry:], loop.n_carry):
            size = v.type.size * v.type.dtype.itemsize
            per_step += size
            residuals += size if (node.out, k) in read_by_loops else 0
        if per_step:
            where = node.loc.short if node.loc is not None else "?"
            found.append(LoopMemory(function, f"%{name}", where, loop.length, per_step,
                                    residuals))


def _read_by_loops(graph) -> set:
    """(loop value, result index) of the stacked results that a loop of ``graph`` reads
    (directly or a slice of them): what a backward loop reads back is a residual."""
    made = {n.out: n for n in graph.nodes}
    found = set()
    for n in graph.nodes:
        if "loop" not in n.attrs:
            continue
        for v in n.inputs:
            src = made.get(v)
            if src is not None and src.op == "slice":
                src = made.get(src.inputs[0])
            if src is not None and src.op == "loop_output":
                found.add((src.inputs[0], src.attrs["index"]))
    return found


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


@dataclass
class FunctionStats:
    """One jitted function at one signature."""

    name: str
    signature: str
    calls: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0  # tracing, passes, code generation, first call


@dataclass(frozen=True)
class TransferStats:
    count: int  # transfer steps run
    nbytes: int  # bytes they copied
    seconds: float


@dataclass
class StepStats:
    function: str
    name: str
    ops: str
    where: str
    nbytes: int
    calls: int = 0
    seconds: float = 0.0

    @property
    def gbps(self) -> float:
        """Achieved bandwidth: bytes the step moved per second, in GB/s."""
        return self.nbytes * self.calls / self.seconds / 1e9 if self.seconds else 0.0


class Compiled(Protocol):
    """What a profile reads of a compiled signature (jit's cache entry, which also keys
    the signature's statistics)."""

    compile_s: float  # tracing, passes, code generation, first call

    @property
    def name(self) -> str: ...  # the function's

    @property
    def signature(self) -> str: ...  # its inputs and their types: ``x: f32[8], y: f32[8]``

    # its Lowered (``optimized_graph``: the loops' memory is read from it), if it has one
    lowered: Any


class Profile:
    """Statistics of the jitted calls made inside a :func:`profile` block."""

    def __init__(self):
        self._functions: dict[object, FunctionStats] = {}
        self._steps: dict[tuple[object, int], StepStats] = {}
        self._loops: dict[object, list[LoopMemory]] = {}

    @property
    def functions(self) -> list[FunctionStats]:
        return sorted(self._functions.values(), key=lambda f: -f.seconds)

    @property
    def steps(self) -> list[StepStats]:
        return sorted(self._steps.values(), key=lambda s: -s.seconds)

    @property
    def loops(self) -> list[LoopMemory]:
        """The scans of the profiled functions and the memory they stack, largest first."""
        return sorted((m for ms in self._loops.values() for m in ms), key=lambda m: -m.total)

    @property
    def seconds(self) -> float:
        """Time spent in profiled calls."""
        return sum(f.seconds for f in self._functions.values())

    @property
    def transfers(self) -> TransferStats:
        """The copies between devices (the placement pass's transfer steps)."""
        moved = [s for s in self._steps.values() if s.ops == "transfer"]
        # a step's nbytes counts what it reads and what it writes: a copy's size twice
        return TransferStats(sum(s.calls for s in moved),
                             sum(s.nbytes // 2 * s.calls for s in moved),
                             sum(s.seconds for s in moved))

    def _add(self, entry: Compiled, steps: list[StepInfo], seconds: float,
             times: list[tuple[int, float]]) -> None:
        f = self._functions.get(entry)
        if f is None:
            f = self._functions[entry] = FunctionStats(entry.name, entry.signature)
            lowered = getattr(entry, "lowered", None)
            self._loops[entry] = loop_memory(lowered) if lowered is not None else []
        f.calls += 1
        f.seconds += seconds
        f.compile_seconds = entry.compile_s
        for k, dt in times:
            s = self._steps.get((entry, k))
            if s is None:
                info = steps[k]
                where = info.location.short if info.location is not None else "?"
                s = self._steps[entry, k] = StepStats(f.name, info.name, info.ops, where,
                                                      info.nbytes)
            s.calls += 1
            s.seconds += dt

    def table(self) -> str:
        """The functions, then their steps, each sorted by time."""
        total = self.seconds
        compiling = sum(f.compile_seconds for f in self._functions.values())
        calls = sum(f.calls for f in self._functions.values())
        pct = (lambda s: f"{100 * s / total:.1f}") if total else (lambda s: "-")
        head = (f"tracejit profile: {calls} calls, {1e3 * total:.3f} ms in jitted functions, "
                f"{1e3 * compiling:.1f} ms compiling them")
        moved = self.transfers
        if moved.count:
            head += (f"\ntransfers between devices: {moved.count}, {moved.nbytes / 1e6:.3f} MB, "
                     f"{1e3 * moved.seconds:.3f} ms ({pct(moved.seconds)}% of the time)")
        functions = _columns(
            ("function", "calls", "total ms", "% time", "compile ms"),
            [(f"{f.name}({f.signature})", f.calls, f"{1e3 * f.seconds:.3f}", pct(f.seconds),
              f"{1e3 * f.compile_seconds:.1f}") for f in self.functions])
        steps = _columns(
            ("step", "ops", "where", "calls", "total ms", "% time", "GB/s"),
            [(f"{s.function}/{s.name}", _clip(s.ops, 48), s.where, s.calls,
              f"{1e3 * s.seconds:.3f}", pct(s.seconds), f"{s.gbps:.2f}") for s in self.steps])
        sections = [head, functions]
        if self.loops:
            sections.append("loops: bytes stacked per step and in all (residuals: read back "
                            "by a backward loop)\n" + _columns(
                                ("loop", "where", "steps", "per step", "total",
                                 "residuals/step", "residuals"),
                                [(f"{m.function}/{m.loop}", m.where, m.steps, _size(m.per_step),
                                  _size(m.total), _size(m.residuals_per_step),
                                  _size(m.residuals)) for m in self.loops]))
        return "\n\n".join([*sections, steps])

    __str__ = table

    def __repr__(self) -> str:
        return f"<tracejit.Profile: {len(self._functions)} functions, {len(self._steps)} steps>"


@contextmanager
def profile() -> Iterator[Profile]:
    """Profile the jitted calls made inside the block; ``print`` the result for a table."""
    p = Profile()
    with lock:
        ACTIVE.append(p)
    try:
        yield p
    finally:
        with lock:
            ACTIVE.remove(p)


def record(entry: Compiled, steps: list[StepInfo], seconds: float,
           times: list[tuple[int, float]]) -> None:
    """Add one call of ``entry`` to every open profile: ``seconds`` in all, ``times`` the
    (step index, seconds) its profiling runner reported for ``steps``."""
    with lock:
        for p in ACTIVE:
            p._add(entry, steps, seconds, times)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _columns(headers, rows) -> str:
    """Text columns, left-aligned where the header's column holds text, else right."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [bool(rows) and all(not isinstance(r[i], str) or _is_number(r[i]) for r in rows)
               for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if num else c.ljust(w)
                       for c, w, num in zip(r, widths, numeric, strict=True)).rstrip()
             for r in cells]
    return "\n".join(lines)


def _is_number(text: str) -> bool:
    return text.replace(".", "", 1).isdigit() or text == "-"
