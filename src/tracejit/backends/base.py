"""What passes between ``jit`` and a backend: the :class:`Backend` protocol and the
:class:`Runner` a backend compiles a graph into.

``jit`` only talks to backends through these, so a new way of running a graph (a Dask
path, loops with a body graph) is a new ``Backend``, not a new branch in ``api.py``.
They live apart from ``backends/__init__`` (which re-exports them) because every backend
imports them and ``get_backend`` imports every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..ir import Graph, Node
from ..profiler import StepInfo


@dataclass(frozen=True)
class PlannedStep:
    """One step a runner would run, named as ``Runner.steps`` names it, with the nodes it
    computes: what ``Lowered.to_dot`` draws (a compiled kernel as a cluster).

    ``kind`` is ``"kernel"`` (a compiled loop kernel: several nodes, one pass),
    ``"library"`` (one library call: BLAS, a NumPy or CuPy function, a transfer, a loop's
    driver) or ``"node"`` (one node the reference backend interprets)."""

    name: str  # kernel3, lib4, node7
    kind: str
    nodes: tuple[Node, ...]


def planned(kernels: list) -> list[PlannedStep]:
    """The steps of fusion ``Kernel``s run in this order, named as the CPU and CUDA
    runners name them (``kernel<k>`` for a loop kernel, ``lib<k>`` for a library call)."""
    return [PlannedStep(f"kernel{k}", "kernel", tuple(kern.nodes)) if kern.kind == "loop"
            else PlannedStep(f"lib{k}", "library", tuple(kern.nodes))
            for k, kern in enumerate(kernels)]


# A profiling runner's report of one step: (its index in ``Runner.steps``, when it started
# by ``time.perf_counter``, seconds).
StepTime = tuple[int, float, float]


class DiskCacheInfo(Protocol):
    """Where a runner's machine code came from, for the compile log."""

    @property
    def directory(self) -> Path | None: ...  # the entry's directory (None: no entry)

    def describe(self) -> str: ...  # "disk cache hit (2 kernels loaded)", "disk cache off"


@dataclass(eq=False)
class Runner:
    """A compiled graph: ``runner(*leaves)`` takes the flattened input leaves and returns
    the list of outputs.

    ``fn`` is that function itself; ``jit``'s cached path calls it directly, one Python
    call fewer than going through ``__call__``. ``steps`` describes the steps for
    profiles and logs. ``disk_cache`` is None for a backend that keeps no disk cache.
    ``namespace`` is the generated code's globals: a profiling runner looks up
    ``record(step, start, seconds)`` there after each step (see :meth:`timed`).
    ``make_profiled`` builds the profiling variant sharing this runner's compiled code;
    None when this runner already is one, or times as a whole (``check=True``'s).
    ``faster``: a runner giving the same bits faster, still compiling (kernels not worth
    waiting for), which ``jit`` switches to when it is ready; None if there is none (or
    the future's result is None: it looked for one after the switch to this runner, and
    there was none)."""

    fn: Callable[..., list]
    steps: list[StepInfo]
    disk_cache: DiskCacheInfo | None = None
    namespace: dict = field(default_factory=dict)
    make_profiled: Callable[[], Runner] | None = None
    faster: Future[Runner | None] | None = None

    def __call__(self, *leaves) -> list:
        return self.fn(*leaves)

    def profiled(self) -> Runner:
        """The runner that times each step, sharing this one's compiled code."""
        return self if self.make_profiled is None else self.make_profiled()

    def timed(self, *leaves) -> tuple[list, list[StepTime]]:
        """Run once, collecting the steps' times. The recorder is the runner's global
        state: the caller runs one timed call of a runner at a time (``api`` holds the
        profiler's lock)."""
        times: list[StepTime] = []
        self.namespace["record"] = lambda step, start, seconds: times.append((step, start, seconds))
        try:
            return self.fn(*leaves), times
        finally:
            self.namespace["record"] = ignore


def ignore(step: int, start: float, seconds: float) -> None:
    """The ``record`` of a runner nobody is timing."""


class Backend(Protocol):
    """A way of running optimised graphs. The backends are modules implementing this
    (``reference``, ``cpu``, ``cuda``); :func:`~tracejit.backends.get_backend` finds them.

    ``device_kind`` is None for a compiler of host code, chosen with ``jit(backend=)``;
    for a device backend it is the kind of device (``"cuda"``) whose placed graphs it
    runs, chosen by the device (``backend="cuda"`` means ``device="cuda"``). ``exact``:
    its float arithmetic rounds op by op as NumPy's does (``check=True`` then compares
    exact steps exactly; NVRTC contracts ``a*b+c`` into fused multiply-adds, so CUDA's
    does not). ``passes`` run on the optimised graph before placement and compilation."""

    name: str
    device_kind: str | None
    exact: bool
    passes: tuple[Callable[[Graph], Graph], ...]

    def compile(self, graph: Graph, profile: bool = False, interim: bool = False) -> Runner:
        """The runner of ``graph``; with ``profile`` it reports each step's time. With
        ``interim`` (``jit``'s first call, which switches to ``runner.faster`` when that is
        done) it may be a runner giving the same bits sooner, its own still compiling."""

    def compile_later(self, graph: Graph) -> Future[Runner] | None:
        """The runner of ``graph`` as a future, compiled without holding up the caller (in
        other processes); None from a backend that compiles only in the caller's thread
        (``jit`` then compiles synchronously, whatever its ``compile`` mode)."""

    def supports(self, node: Node) -> bool:
        """Whether the backend computes ``node`` (placement runs the rest on the CPU)."""

    def source(self, graph: Graph) -> str:
        """What ``lower().source`` shows: the code the backend runs for ``graph``."""

    def partition(self, graph: Graph) -> tuple[Graph, list]:
        """The graph ``compile`` runs and its steps (fusion ``Kernel``s) in run order,
        which ``check=True`` compiles and checks one at a time."""

    def planned_steps(self, graph: Graph) -> tuple[Graph, list[PlannedStep]]:
        """The graph ``compile`` runs and the steps its runner runs, in order and named as
        in ``Runner.steps``, without compiling anything (for pictures: ``Lowered.to_dot``).
        A node in no step is computed inside the steps reading it (a slice a kernel reads
        in its base); an empty list means the steps are not known before the call."""
