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

A profile keeps a timeline too. Each profiled call is a span on its caller's thread, its
steps (kernels, library calls, transfers, the interpreter's ops; a loop is one step, its
body's steps are not timed apart) nested in it; a signature compiled inside the block is a
span on the thread that compiled it, split into tracing, passes, code generation and the
first call; with ``compile="background"`` each compile in the worker processes is a span
on a track of its own, ending in an instant where the signature switches to the compiled
kernels. :meth:`Profile.trace_events` gives it in the Trace Event Format (the JSON that
https://ui.perfetto.dev and ``chrome://tracing`` open), :meth:`Profile.export_trace` writes
that, :meth:`Profile.render_timeline` draws it as SVG. The timeline holds at most
``max_events`` events (the first ones; a call and its steps are kept or dropped together),
so a long profiled loop keeps bounded memory; the table counts every call regardless.
"""

from __future__ import annotations

import html
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from .errors import InvalidArgument
from .locations import user_location

ACTIVE: list[Profile] = []  # the open profiles; jit checks it on every call
# Held while a profiled call runs and is recorded: a profiling runner reports its steps'
# times to one recorder at a time, and the profiles' counters are updated by one thread.
lock = threading.RLock()


@dataclass(frozen=True)
class StepInfo:
    """One step of a runner, as a backend describes it in ``Runner.steps``.

    Attributes:
        name: What the runner calls it: ``kernel3`` (a fused kernel), ``lib4`` (a library
            call or a transfer), ``node7`` (a node on the reference interpreter).
        ops: The ops it computes, as ``add, tanh``.
        location: The :class:`~tracejit.locations.SourceLocation` of its first node (the
            user's line), or None.
        nbytes: Bytes it reads from its inputs plus bytes it writes to its outputs.
    """

    name: str
    ops: str
    location: object
    nbytes: int


@dataclass(frozen=True)
class LoopMemory:
    """What one ``scan`` keeps in memory: its stacked results (``ys``), one slice per step.

    Attributes:
        function: The function's name.
        loop: Its value's name in the printed IR: ``%3``, or ``%3.1`` in the body of ``%3``.
        where: The user's line, as ``model.py:12``.
        steps: Its length.
        per_step: Bytes stacked per step, all stacked results.
        residuals_per_step: Of those, the bytes a backward loop of the same graph reads
            back.
    """

    function: str
    loop: str
    where: str
    steps: int
    per_step: int
    residuals_per_step: int

    @property
    def total(self) -> int:
        """Bytes of the stacked results over all steps (one run of the loop)."""
        return self.steps * self.per_step

    @property
    def residuals(self) -> int:
        """Bytes of the residuals over all steps (one run of the loop)."""
        return self.steps * self.residuals_per_step


def loop_memory(lowered: Any) -> list[LoopMemory]:
    """The memory each ``scan`` of a lowered function stacks, without running it.

    Loops in loop bodies are included (a nested loop's figures are for one run of it).

    Args:
        lowered: ``f.lower(*args)``, or an IR graph.

    Returns:
        One :class:`LoopMemory` per scan, in the graph's order.

    Example:
        >>> import numpy as np
        >>> import tracejit as tj
        >>> def cumulative(xs):
        ...     return tj.lax.scan(lambda c, x: (c + x, c), np.float64(0), xs)
        >>> (m,) = tj.profiler.loop_memory(tj.jit(cumulative).lower(np.ones(10)))
        >>> m.steps, m.per_step, m.total
        (10, 8, 80)
    """
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
    """One jitted function at one signature, as profiled.

    Attributes:
        name: The function's name.
        signature: Its inputs and their types, as ``x: f32[8], y: f32[8]``.
        calls: Profiled calls made.
        seconds: Time those calls took in all.
        compile_seconds: Time building the signature took (tracing, passes, code
            generation, first call, and building its profiling runner).
    """

    name: str
    signature: str
    calls: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0


@dataclass(frozen=True)
class TransferStats:
    """The copies between devices made by the profiled calls (see :attr:`Profile.transfers`).

    Attributes:
        count: Transfer steps run.
        nbytes: Bytes they copied.
        seconds: Time they took.
    """

    count: int
    nbytes: int
    seconds: float


@dataclass
class StepStats:
    """One step of a profiled function (a fused kernel, a library call, a transfer, or a
    node on the reference interpreter), summed over the calls.

    Attributes:
        function: The function's name.
        name: The step's name in the runner: ``kernel1``, ``lib0``, ``node3``.
        ops: The ops it computes, as ``add, tanh, multiply``.
        where: The user's line of its first op, as ``model.py:12``.
        nbytes: Bytes one run of it reads from its inputs and writes to its outputs.
        calls: Times it ran.
        seconds: Time it took in all.
    """

    function: str
    name: str
    ops: str
    where: str
    nbytes: int
    calls: int = 0
    seconds: float = 0.0

    @property
    def gbps(self) -> float:
        """Achieved bandwidth: bytes the step moved per second, in GB/s (0.0 if untimed)."""
        return self.nbytes * self.calls / self.seconds / 1e9 if self.seconds else 0.0


class Compiled(Protocol):
    """What a profile reads of a compiled signature: ``jit``'s cache entry, which also
    keys the signature's statistics.

    Attributes:
        compile_s: Seconds spent building it.
        interpreting: It runs on the interpreter until its kernels, compiling in the
            background, are ready.
        name: The function's name.
        signature: Its inputs and their types: ``x: f32[8], y: f32[8]``.
        lowered: Its ``Lowered`` (the loops' memory is read from its
            ``optimized_graph``), or None.
    """

    compile_s: float  # tracing, passes, code generation, first call
    interpreting: bool  # it runs on the interpreter until its kernels are compiled

    @property
    def name(self) -> str: ...  # the function's

    @property
    def signature(self) -> str: ...  # its inputs and their types: ``x: f32[8], y: f32[8]``

    # its Lowered (``optimized_graph``: the loops' memory is read from it), if it has one
    lowered: Any


MAX_EVENTS = 100_000  # the timeline events a profile keeps by default (about 15 MB)

# The tracks of background compiles have thread ids no OS gives a thread: odd (Windows'
# are multiples of 4) and above 2**22 (Linux's are below). Lane k's is this minus 4k.
_BACKGROUND_TID = 2 ** 31 - 1

# The categories of the timeline's events, and their colours in render_timeline.
_COLOURS = {"call": "#4e79a7", "compile": "#e15759", "kernel": "#f28e2b",
            "library": "#76b7b2", "transfer": "#59a14f", "loop": "#edc948",
            "op": "#b07aa1", "switch": "#222222"}


class _Event(NamedTuple):
    """One event of a profile's timeline as kept (its JSON is made on export): a span
    ("X") or an instant ("i") from ``start`` (``time.perf_counter``) on thread ``tid``."""

    ph: str
    cat: str
    name: str
    tid: int
    start: float
    seconds: float
    args: Any  # a dict, or a _Call (kept) or _Step (on export), whose args are made on export


class _Call(NamedTuple):
    """A profiled call as kept: what its args are made of, and its steps, as little as
    a long loop can keep (the runner's own lists, no copies)."""

    function: FunctionStats
    where: str  # the user's line that made the call
    interpreting: bool
    steps: list[StepInfo]
    times: list[tuple[int, float, float]]  # (step index, start, seconds)

    def json(self) -> dict[str, Any]:
        return {"function": self.function.name, "signature": self.function.signature,
                "where": self.where,
                "runs": "interpreter" if self.interpreting else "compiled code"}


class _Step(NamedTuple):
    step: StepInfo
    function: FunctionStats

    def json(self) -> dict[str, Any]:
        loc = self.step.location
        args = {"function": self.function.name, "signature": self.function.signature,
                "step": self.step.name, "ops": self.step.ops,
                "where": loc.short if loc is not None else "?",
                "source": str(loc) if loc is not None else "?", "bytes": self.step.nbytes}
        if self.step.ops == "transfer":
            args["bytes copied"] = self.step.nbytes // 2  # it reads and writes that size
        return args


def _expanded(events: list[_Event]) -> Iterator[_Event]:
    """The events with each call's steps as events of their own."""
    for e in events:
        yield e
        if isinstance(e.args, _Call):
            f, steps = e.args.function, e.args.steps
            for k, start, seconds in e.args.times:
                yield _Event("X", _category(steps[k]), f"{f.name}/{steps[k].name}", e.tid,
                             start, seconds, _Step(steps[k], f))


class Profile:
    """Statistics and a timeline of the jitted calls made inside a :func:`profile` block.

    ``print(p)`` shows the table (:meth:`table`); in Jupyter it shows as HTML tables.
    The records behind it are :attr:`functions`, :attr:`steps`, :attr:`loops` and
    :attr:`transfers`. The timeline (calls, their steps, compiles, background compiles
    and switches, each on its thread) exports to Perfetto or ``chrome://tracing`` with
    :meth:`export_trace` and draws as SVG with :meth:`render_timeline`. It keeps the first
    ``max_events`` events; later ones are counted in :attr:`dropped_events` only.

    Args:
        max_events: The most timeline events to keep (a call counts one plus one per
            step). The statistics count every call whatever it is.

    Attributes:
        max_events: As given.

    Raises:
        InvalidArgument: ``max_events`` is not an int of at least 0.

    Example:
        >>> import numpy as np
        >>> import tracejit as tj
        >>> def square(x):
        ...     return x * x
        >>> f = tj.jit(square, backend="reference")
        >>> with tj.profile() as p:
        ...     for _ in range(3):
        ...         _ = f(np.ones(4))
        >>> [(s.name, s.signature, s.calls) for s in p.functions]
        [('square', 'x: f64[4]', 3)]
        >>> [(s.name, s.ops, s.calls) for s in p.steps]
        [('node0', 'multiply', 3)]
    """

    def __init__(self, max_events: int = MAX_EVENTS):
        if not isinstance(max_events, int) or isinstance(max_events, bool) or max_events < 0:
            raise InvalidArgument(f"max_events must be an int of at least 0, not {max_events!r}",
                                  hint="profile(max_events=100_000) keeps that many events")
        self.max_events = max_events
        self._functions: dict[object, FunctionStats] = {}
        self._steps: dict[tuple[object, int, str, str], StepStats] = {}
        self._loops: dict[object, list[LoopMemory]] = {}
        self._origin = time.perf_counter()  # the timeline's zero
        self._events: list[_Event] = []  # a call holds its steps (made into events on export)
        self._count = 0  # timeline events kept: a call and each of its steps count one
        self._dropped = 0
        self._threads: dict[int, str] = {}  # track (thread id) -> its name
        self._lanes: list[float] = []  # background compile tracks: when each is free again
        self._lock = threading.Lock()  # the timeline's (switches are recorded off the lock)

    @property
    def functions(self) -> list[FunctionStats]:
        """The profiled functions, one per signature, most time first."""
        return sorted(self._functions.values(), key=lambda f: -f.seconds)

    @property
    def steps(self) -> list[StepStats]:
        """The steps of the profiled functions, most time first."""
        return sorted(self._steps.values(), key=lambda s: -s.seconds)

    @property
    def loops(self) -> list[LoopMemory]:
        """The scans of the profiled functions and the memory they stack, largest first."""
        return sorted((m for ms in self._loops.values() for m in ms), key=lambda m: -m.total)

    @property
    def seconds(self) -> float:
        """Time spent in profiled calls, in seconds."""
        return sum(f.seconds for f in self._functions.values())

    @property
    def transfers(self) -> TransferStats:
        """The copies between devices (the placement pass's transfer steps)."""
        moved = [s for s in self._steps.values() if s.ops == "transfer"]
        # a step's nbytes counts what it reads and what it writes: a copy's size twice
        return TransferStats(sum(s.calls for s in moved),
                             sum(s.nbytes // 2 * s.calls for s in moved),
                             sum(s.seconds for s in moved))

    @property
    def dropped_events(self) -> int:
        """Timeline events not kept because ``max_events`` were kept already."""
        return self._dropped

    def _add(self, entry: Compiled, steps: list[StepInfo], start: float, seconds: float,
             times: list[tuple[int, float, float]], thread: tuple[int, str],
             called_from: str) -> None:
        f = self._functions.get(entry)
        if f is None:
            f = self._functions[entry] = FunctionStats(entry.name, entry.signature)
            lowered = getattr(entry, "lowered", None)
            self._loops[entry] = loop_memory(lowered) if lowered is not None else []
        f.calls += 1
        f.seconds += seconds
        f.compile_seconds = entry.compile_s
        for k, _, dt in times:
            info = steps[k]
            # keyed by what the step is too: after a switch (compile="background") step k
            # of the compiled runner is another step than the interpreter's node k
            key = (entry, k, info.name, info.ops)
            s = self._steps.get(key)
            if s is None:
                where = info.location.short if info.location is not None else "?"
                s = self._steps[key] = StepStats(f.name, info.name, info.ops, where,
                                                 info.nbytes)
            s.calls += 1
            s.seconds += dt
        call = _Call(f, called_from, entry.interpreting, steps, times)
        self._keep([_Event("X", "call", f.name, thread[0], start, seconds, call)], thread,
                   1 + len(times))

    def _keep(self, events: list[_Event], thread: tuple[int, str], count: int = 0) -> None:
        """Add ``events`` (all on ``thread``; ``count`` timeline events, if not one each)
        to the timeline, or none of them if they would overflow it."""
        count = count or len(events)
        with self._lock:
            if self._count + count > self.max_events:
                self._dropped += count
                return
            self._count += count
            self._events += events
            self._threads.setdefault(*thread)

    def _background(self, entry: Compiled, start: float, end: float, faster: bool,
                    error: str | None) -> None:
        """A background compile of ``entry`` from ``start`` to ``end``, on the first track
        free then, and (unless it failed) the switch to its runner at ``end``."""
        with self._lock:
            begin = max(start, self._origin)
            lane = next((i for i, free in enumerate(self._lanes) if free <= begin),
                        len(self._lanes))
            self._lanes[lane:lane + 1] = [end]
        tid = _BACKGROUND_TID - 4 * lane
        what = "faster kernels" if faster else "compiled kernels"
        args = {"function": entry.name, "signature": entry.signature, "compiles": what}
        events = [_Event("X", "compile", f"compile {entry.name} in the background", tid,
                         start, end - start, dict(args, error=error) if error else args)]
        if error is None:
            events.append(_Event("i", "switch", f"{entry.name} runs {what}", tid, end, 0.0,
                                 args))
        self._keep(events, (tid, "background compiles" + (f" ({lane + 1})" if lane else "")))

    def table(self) -> str:
        """The report as text; ``print(p)`` prints it.

        Totals, then the functions, the loops' memory (if any scan ran) and the steps,
        each sorted by time.

        Returns:
            The table, lines of aligned columns.

        Example:
            >>> import numpy as np
            >>> import tracejit as tj
            >>> with tj.profile() as p:
            ...     pass
            >>> print(p.table())
            tracejit profile: 0 calls, 0.000 ms in jitted functions, 0.0 ms compiling them
            <BLANKLINE>
            function  calls  total ms  % time  compile ms
            <BLANKLINE>
            step  ops  where  calls  total ms  % time  GB/s
        """
        head, tables = self._report()
        return "\n\n".join([head, *((f"{title}\n" if title else "") + _columns(names, rows)
                                    for title, names, rows in tables)])

    __str__ = table

    def _report(self) -> tuple[str, list[tuple[str, tuple, list]]]:
        """The table's heading and its tables: (title, column names, rows) each."""
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
        tables = [("", ("function", "calls", "total ms", "% time", "compile ms"),
                   [(f"{f.name}({f.signature})", f.calls, f"{1e3 * f.seconds:.3f}",
                     pct(f.seconds), f"{1e3 * f.compile_seconds:.1f}") for f in self.functions])]
        if self.loops:
            tables.append(("loops: bytes stacked per step and in all (residuals: read back "
                           "by a backward loop)",
                           ("loop", "where", "steps", "per step", "total", "residuals/step",
                            "residuals"),
                           [(f"{m.function}/{m.loop}", m.where, m.steps, _size(m.per_step),
                             _size(m.total), _size(m.residuals_per_step), _size(m.residuals))
                            for m in self.loops]))
        tables.append(("", ("step", "ops", "where", "calls", "total ms", "% time", "GB/s"),
                       [(f"{s.function}/{s.name}", _clip(s.ops, 48), s.where, s.calls,
                         f"{1e3 * s.seconds:.3f}", pct(s.seconds), f"{s.gbps:.2f}")
                        for s in self.steps]))
        return head, tables

    def _repr_html_(self) -> str:
        """The table as HTML, which Jupyter shows for a profile: the same heading and rows
        as :meth:`table`, one HTML table per section, every cell escaped.

        Returns:
            An HTML fragment (``<div>`` holding ``<p>`` and ``<table>`` elements).

        Example:
            >>> import tracejit as tj
            >>> with tj.profile() as p:
            ...     pass
            >>> print(p._repr_html_().splitlines()[1])
            <p>tracejit profile: 0 calls, 0.000 ms in jitted functions, 0.0 ms compiling them</p>
        """
        head, tables = self._report()
        out = ['<div class="tracejit-profile">']
        out += [f"<p>{html.escape(line)}</p>" for line in head.splitlines()]
        for title, names, rows in tables:
            if title:
                out.append(f"<p>{html.escape(title)}</p>")
            right = [bool(rows) and all(not isinstance(r[i], str) or _is_number(r[i])
                                        for r in rows) for i in range(len(names))]
            align = [f' style="text-align:{"right" if r else "left"}"' for r in right]
            out.append("<table>")
            out.append("<thead><tr>" + "".join(f"<th{a}>{html.escape(n)}</th>"
                                               for n, a in zip(names, align, strict=True))
                       + "</tr></thead>")
            out.append("<tbody>")
            out += ["<tr>" + "".join(f"<td{a}>{html.escape(str(c))}</td>"
                                     for c, a in zip(row, align, strict=True)) + "</tr>"
                    for row in rows]
            out.append("</tbody></table>")
        out.append("</div>")
        return "\n".join(out)

    def trace_events(self) -> dict[str, Any]:
        """The timeline in the Trace Event Format (JSON Object Format), as a dict.

        Spans are complete events (``"ph": "X"``) with ``ts`` and ``dur`` in microseconds
        from the start of the block, ``pid`` this process's id and ``tid`` the thread's
        (the background compiles' tracks have ids no thread has), ``cat`` one of ``call``,
        ``compile``, ``kernel``, ``library``, ``transfer``, ``loop`` or ``op`` (a node on
        the reference interpreter), and ``args``: the function and its signature, and for
        a step its ops, the user's line (``where``, as ``file.py:12``; ``source`` in full)
        and the bytes it reads and writes; for a call the line that made it. A switch to
        compiled kernels is an instant (``"ph": "i"``, ``cat`` ``switch``). Metadata
        events (``"ph": "M"``) name the process and each track. ``otherData`` says how
        many events ``max_events`` left out.

        Returns:
            ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``, ready
            for ``json.dump``.

        Example:
            >>> import numpy as np
            >>> import tracejit as tj
            >>> def square(x):
            ...     return x * x
            >>> f = tj.jit(square, backend="reference")
            >>> _ = f(np.ones(4))  # compiled before the block
            >>> with tj.profile() as p:
            ...     _ = f(np.ones(4))
            >>> spans = [e for e in p.trace_events()["traceEvents"] if e["ph"] == "X"]
            >>> for e in spans:  # its profiling runner is built on its first profiled call
            ...     print(e["cat"], e["name"])
            compile compile square
            compile profiling runner
            call square
            op square/node0
            >>> spans[-1]["args"]["ops"], spans[-1]["args"]["bytes"]
            ('multiply', 96)
        """
        with self._lock:
            events, threads, dropped = list(self._events), dict(self._threads), self._dropped
        pid = os.getpid()
        out: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
             "args": {"name": "tracejit profile"}}]
        for order, tid in enumerate(sorted(threads, key=_track_order(events))):
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": threads[tid]}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                        "args": {"sort_index": order}})
        for e in sorted(_expanded(events), key=lambda e: (e.start, -e.seconds)):
            end = _us(e.start + e.seconds - self._origin)
            ts = max(_us(e.start - self._origin), 0.0)  # a compile begun before the block
            if end < ts:
                continue
            args = e.args.json() if isinstance(e.args, (_Call, _Step)) else e.args
            event = {"ph": e.ph, "name": e.name, "cat": e.cat, "ts": ts, "pid": pid,
                     "tid": e.tid, "args": args}
            if e.ph == "X":
                event["dur"] = round(end - ts, 3)
            else:
                event["s"] = "t"
            out.append(event)
        return {"traceEvents": out, "displayTimeUnit": "ms",
                "otherData": {"producer": "tracejit profile", "max_events": self.max_events,
                              "dropped_events": dropped}}

    def export_trace(self, path: str | os.PathLike) -> Path:
        """Write the timeline (:meth:`trace_events`) as JSON, for Perfetto or Chrome.

        Open the file at https://ui.perfetto.dev ("Open trace file") or in Chrome at
        ``chrome://tracing`` ("Load").

        Args:
            path: The file to write (``.json``); its folder must exist.

        Returns:
            The path written, as a :class:`pathlib.Path`.

        Raises:
            OSError: The file cannot be written.

        Example:
            >>> import json, tempfile, pathlib
            >>> import tracejit as tj
            >>> with tj.profile() as p:
            ...     pass
            >>> out = p.export_trace(pathlib.Path(tempfile.mkdtemp()) / "trace.json")
            >>> sorted(json.loads(out.read_text()))
            ['displayTimeUnit', 'otherData', 'traceEvents']
        """
        path = Path(path)
        path.write_text(json.dumps(self.trace_events()), encoding="utf-8")
        return path

    def render_timeline(self, path: str | os.PathLike) -> Path:
        """Draw the timeline as an SVG picture.

        One row per thread or background track, spans coloured by category (nested spans
        below their parent), a time axis in ms, the names where they fit, each span's
        details in its tooltip, a legend.

        Args:
            path: The file to write (``.svg``); its folder must exist.

        Returns:
            The path written, as a :class:`pathlib.Path`.

        Raises:
            OSError: The file cannot be written.

        Example:
            >>> import tempfile, pathlib
            >>> import xml.etree.ElementTree as ET
            >>> import tracejit as tj
            >>> with tj.profile() as p:
            ...     pass
            >>> out = p.render_timeline(pathlib.Path(tempfile.mkdtemp()) / "timeline.svg")
            >>> ET.parse(out).getroot().tag
            '{http://www.w3.org/2000/svg}svg'
        """
        from ._timeline import svg

        path = Path(path)
        path.write_text(svg(self.trace_events(), _COLOURS), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        return f"<tracejit.Profile: {len(self._functions)} functions, {len(self._steps)} steps>"


@contextmanager
def profile(max_events: int = MAX_EVENTS) -> Iterator[Profile]:
    """Profile the jitted calls made inside the block, from any thread.

    Each call runs its profiling runner (the same compiled code, each step timed); a
    signature compiled inside the block is timed as compiling and then called again,
    profiled. Profiles nest: an inner block's calls count in the outer one too.

    Args:
        max_events: The most timeline events the profile keeps (see :class:`Profile`).

    Returns:
        A context manager giving the :class:`Profile`; ``print`` it for the table,
        ``export_trace`` it for Perfetto.

    Raises:
        InvalidArgument: ``max_events`` is not an int of at least 0.

    Example:
        >>> import numpy as np
        >>> import tracejit as tj
        >>> def square(x):
        ...     return x * x
        >>> f = tj.jit(square, backend="reference")
        >>> with tj.profile() as p:
        ...     _ = f(np.ones(4))
        >>> p.functions[0].calls, p.steps[0].ops, p.steps[0].nbytes
        (1, 'multiply', 96)
    """
    p = Profile(max_events)
    with lock:
        ACTIVE.append(p)
    try:
        yield p
    finally:
        with lock:
            ACTIVE.remove(p)


def record(entry: Compiled, steps: list[StepInfo], start: float, seconds: float,
           times: list[tuple[int, float, float]]) -> None:
    """Add one call of ``entry``, made on this thread, to every open profile (``jit``
    calls it after each profiled call, holding :data:`lock`).

    Args:
        entry: The compiled signature called.
        steps: Its profiling runner's steps.
        start: When the call began (``time.perf_counter``).
        seconds: How long it took.
        times: (step index, start, seconds) of each step the runner reported.
    """
    located = user_location()
    where = sys.intern(located.short) if located is not None else "?"  # one str a line
    thread = _thread()
    with lock:
        for p in ACTIVE:
            p._add(entry, steps, start, seconds, times, thread, where)


def compiled(entry: Compiled, start: float, phases: Iterable[tuple[str, float]]) -> None:
    """Add a compile of ``entry``, made on this thread, to every open profile's timeline
    (``jit`` calls it for a signature compiled inside a block).

    Args:
        entry: The compiled signature.
        start: When the compile began (``time.perf_counter``).
        phases: (name, seconds) of its phases, one after the other from ``start``:
            tracing, passes, code generation, first call; or building the profiling
            runner.
    """
    profiles = tuple(ACTIVE)
    if not profiles:
        return
    thread = _thread()
    args = {"function": entry.name, "signature": entry.signature}
    events, t = [], start
    for name, dt in phases:
        events.append(_Event("X", "compile", name, thread[0], t, dt, args))
        t += dt
    events.insert(0, _Event("X", "compile", f"compile {entry.name}", thread[0], start,
                            t - start, args))
    for p in profiles:
        p._keep(events, thread)


def background_compile(entry: Compiled, start: float, faster: bool,
                       error: str | None = None) -> None:
    """Add a compile of ``entry`` in worker processes, from ``start`` until now, to every
    open profile's timeline, and unless it failed the switch to what it made (``jit``
    calls it when a background compile ends, on whichever thread ends it).

    Args:
        entry: The compiled signature.
        start: When the compile began (``time.perf_counter``).
        faster: It made faster kernels for a signature already compiled (replacing
            NumPy calls for its small kernels), not the kernels of one on the interpreter.
        error: Why it failed, or None if it succeeded.
    """
    end = time.perf_counter()
    for p in tuple(ACTIVE):  # off the lock: a switch may run on any thread, holding any lock
        p._background(entry, start, end, faster, error)


def _thread() -> tuple[int, str]:
    """This thread's track: its OS id and its name."""
    return threading.get_native_id(), threading.current_thread().name


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _track_order(events: list[_Event]):
    """Tracks in the order of their first event, the background compiles' last."""
    first: dict[int, float] = {}
    for e in events:
        first[e.tid] = min(first.get(e.tid, e.start), e.start)
    return lambda tid: (_is_background(tid), first.get(tid, 0.0), -tid)


def _is_background(tid: int) -> bool:
    return tid > _BACKGROUND_TID - 2 ** 20 and tid % 4 == _BACKGROUND_TID % 4


def _category(step: StepInfo) -> str:
    if step.ops == "transfer":
        return "transfer"
    if step.ops in ("scan", "while_loop"):
        return "loop"
    if step.name.startswith("kernel"):
        return "kernel"
    return "library" if step.name.startswith("lib") else "op"


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
