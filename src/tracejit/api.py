"""``jit``: trace once per signature, run the compiled graph from a cache afterwards.

The signature (cache key) is the pytree structure of the dynamic arguments, each leaf's
(shape, dtype, weak flag), the static argument values and the backend. Leaves that are
hashable non-arrays (a mode string, an enum) and Python ints the function turned out to
need concretely (``range(n)``) are static values too, without ``static_argnums``
(:mod:`.autostatic`). A cached call does little more than flatten the arguments, build
that key and look it up.

A new signature is traced, optimised, compiled and called once; that first call belongs
to compiling because backends may compile lazily (Numba's kernels do). ``TRACEJIT_LOG=1``
(or ``debug``) logs each compile through the ``tracejit`` logger.

With ``compile="background"`` (``jit``'s argument, else ``tracejit.config.compile``) a
backend that can compile in another process (the CPU's) does so, and the signature runs
on the reference interpreter (NumPy, op by op) until its kernels are ready; then the
entry's ``run`` is swapped for the compiled runner, an atomic attribute store that calls
in flight do not notice.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import pathlib
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from typing import Any, NamedTuple

import numpy as np

from . import profiler, targets
from .autostatic import MANY_VALUES, ConcreteInts, Static, static_leaf
from .backends import Runner, get_backend
from .check import compile_checked, internal_error, resolve_mode
from .config import compile_mode, config
from .dispatch import FLOAT as _FLOAT
from .dispatch import Dispatcher, fast_key
from .dispatch import WriteBack as _WriteBack
from .dispatch import c_ordered as _c_ordered
from .dispatch import first as _first
from .dispatch import first_ordered as _first_ordered
from .dispatch import none as _none
from .dispatch import ordered_tuple as _ordered_tuple
from .errors import (
    ConcretizationError,
    ConfigError,
    InPlaceArgumentError,
    InvalidArgument,
    IRError,
    ReadOnlyDestination,
    RetraceWarning,
    TracejitError,
)
from .ir import Graph, TensorType, verify
from .ir.ops import slice_key
from .ir.random_ops import GENERATOR
from .ir.types import WEAK_DEFAULT
from .passes import roll, run_pipeline
from .passes.placement import place
from .profiler import ACTIVE as _PROFILES
from .trace import Tracer, pytree, trace_function
from .trace.core import array_problem
from .trace.random import GENERATORS, TracedGenerator, traced_generator, traced_static


class CacheInfo(NamedTuple):
    """How a jitted function's cache has served its calls, from :meth:`JitFunction.cache_info`.

    A named tuple (as ``functools.lru_cache``'s ``cache_info()``), so it compares and
    unpacks like one. A miss is a call that traced and compiled a new signature; every
    other call is a hit, including a call answered by the interpreter while its
    signature compiles in the background.

    Attributes:
        hits: Calls that found their signature compiled.
        misses: Calls that traced and compiled a new signature.
        signatures: Signatures in the cache now (one compiled program each).

    Example:
        >>> f = tj.jit(lambda x: x * 2)
        >>> _ = f(np.ones(3)); _ = f(np.ones(3)); _ = f(np.ones(4))
        >>> f.cache_info()
        CacheInfo(hits=1, misses=2, signatures=2)
        >>> hits, misses, signatures = f.cache_info()
    """

    hits: int
    misses: int
    signatures: int


# The backend for what runs on the host when a device backend is asked for by name
# (``jit(backend="cuda")`` is ``jit(device="cuda")``): the CPU backend, whatever the default.
_HOST_BACKEND = "cpu"


def default_backend() -> str:
    return os.environ.get("TRACEJIT_BACKEND", "cpu")


class CallSignature(NamedTuple):
    """What a compiled signature is cached under: everything about a call that decides the
    traced graph and where it runs (the arrays' values are not part of it).

    A NamedTuple, not a frozen dataclass: a cached call builds one, hashes it and compares
    it with the stored one, which a tuple does in C (a frozen dataclass with these fields
    measured 1.3 us more per lookup, a sixth of a cached call)."""

    nargs: int  # positional arguments, static ones included
    bound: bool  # called as a method: ``self`` is the first, static, argument
    tree: Any  # pytree structure of (dynamic positional arguments, dynamic keywords)
    # per leaf: (shape, dtype, weak, device: a GPU array's, else None[, strides: a host
    # array's that is not C-contiguous, see _array_key]), or a Static: a
    # hashable non-array, or a Python int the function needs concretely, keyed by value
    leaves: tuple
    statics: tuple  # the static positional arguments' values, in order
    static_kw: tuple  # sorted (name, value) pairs of the static keyword arguments
    device: targets.Device | None  # the GPU the call runs on; None: the CPU
    strict: bool  # on that GPU, an op it cannot run is an error (not a CPU fallback)


class Lowered:
    """A traced and optimised function for one signature, for inspection (nothing runs).

    What :meth:`JitFunction.lower` returns: the IR graph as traced, the graph the passes
    made of it (fused, simplified, placed on devices) and the backend's source for it,
    the way Theano's ``debugprint`` showed a compiled function. Printing the IR is the
    first step in finding out why a function is slow or gives a surprising result.

    Attributes:
        graph: The traced IR graph (:class:`tracejit.ir.Graph`), before any pass.
        optimized_graph: The graph after the passes, as the backend compiles it.
        backend: The name of the backend that compiles it (``"cpu"``, ``"reference"``,
            ``"cuda"``, or ``"dask"`` for calls on Dask arrays).

    Example:
        >>> @tj.jit
        ... def layer(x, W, b):
        ...     return np.tanh(x @ W + b)
        >>> x, W, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), np.zeros(2)
        >>> low = layer.lower(x, W, b)
        >>> low.signature
        'x: f32[4,3], W: f32[3,2], b: f64[2]'
        >>> print(low.ir)
        def layer(x: f32[4,3], W: f32[3,2], b: f64[2]):
            %0: f32[4,2] = matmul(x, W)  # ...
            %1: f64[4,2] = add(%0, b)  # ...
            %2: f64[4,2] = tanh(%1)  # ...
            return %2
    """

    def __init__(self, graph: Graph, optimized: Graph, backend: str, where: tuple | None = None):
        self.graph = graph
        self.optimized_graph = optimized
        self.backend = backend
        self._where = where  # (Dask calls) where each input lives, and the Dask backend

    @property
    def plan(self) -> str:
        """On Dask arrays: the tasks the function runs as, stage by stage, in words.

        Each stage is one Dask task per chunk; the plan says which ops a stage runs,
        on what chunks, and where whole arrays are gathered (see ``RechunkWarning``).

        Raises:
            InvalidArgument: The function was lowered for NumPy (or CuPy) arrays, which
                run as one program, not as a Dask plan.
        """
        if self._where is None:
            raise InvalidArgument("plan describes calls on Dask arrays",
                                  hint="lower the function with dask.array arguments")
        import dask.array as da

        where, backend = self._where
        leaves = [da.empty(v.type.shape, dtype=v.type.dtype, chunks=w.chunks)
                  if isinstance(w, targets.Chunked) else
                  np.zeros(v.type.shape, v.type.dtype) if v.type.ndim == 0 else
                  da.empty(v.type.shape, dtype=v.type.dtype, chunks=-1)
                  for v, w in zip(self.optimized_graph.inputs, where, strict=True)]
        return backend.plan(self.optimized_graph, leaves)

    @property
    def ir(self) -> str:
        """The traced graph as text: one line per op with its type and the user's line."""
        return str(self.graph)

    @property
    def optimized_ir(self) -> str:
        """The optimised graph as text: fused kernels, devices and transfers shown."""
        return str(self.optimized_graph)

    @property
    def signature(self) -> str:
        """The inputs with their types, e.g. ``x: f32[4,3], W: f32[3,2]``."""
        inputs = self.optimized_graph.inputs
        return ", ".join(f"{v.name or f'in{i}'}: {v.type}" for i, v in enumerate(inputs))

    @property
    def source(self) -> str:
        """The code the backend generates: Numba Python for the CPU, CUDA C for a GPU."""
        return get_backend(self.backend).source(self.optimized_graph)

    def to_dot(self) -> str:
        """The optimised graph as Graphviz DOT text, drawn as the backend runs it.

        Each compiled kernel is a box titled like the profiler's steps (``kernel3: add,
        tanh`` and the user's line); a library step (a BLAS call, a NumPy or CuPy
        function, a loop's driver) has a double border and its step's name. On a device
        call values are filled with their device's colour and each transfer is a bold
        red edge with its bytes; loop bodies are clusters, as in ``Graph.to_dot``. The
        reference backend's steps are its nodes; Dask's stages depend on the chunks, so
        its graph has no kernel boxes (``plan`` lists the stages).

        Returns:
            The DOT text, which needs no Graphviz to produce.

        Example:
            >>> import numpy as np, tracejit as tj
            >>> f = tj.jit(lambda x: np.tanh(x) * 2, backend="cpu")
            >>> lowered = f.lower(np.ones(10_000))
            >>> 'label="kernel0: tanh, multiply' in lowered.to_dot()
            True
        """
        from .ir.printer import DotGroup, to_dot

        backend = self._where[1] if self._where is not None else get_backend(self.backend)
        graph, steps = backend.planned_steps(self.optimized_graph)
        groups = [DotGroup(_step_title(step.name, step.nodes), step.nodes, True)
                  if step.kind == "kernel" else DotGroup(step.name, step.nodes, False)
                  for step in steps]
        return to_dot(graph, groups)

    def render(self, path: str | os.PathLike, format: str | None = None) -> pathlib.Path:
        """Draw :meth:`to_dot`'s picture to a file with Graphviz's ``dot`` program.

        Args:
            path: The file to write; its suffix (``.svg``, ``.png``, ``.pdf``) names the
                format unless ``format`` does.
            format: ``"svg"``, ``"png"`` or ``"pdf"``; None to take it from ``path``.

        Returns:
            ``path`` as a :class:`pathlib.Path`.

        Raises:
            GraphvizNotFound: Graphviz's ``dot`` is not on ``PATH`` (install the
                ``graphviz`` OS package; :meth:`to_dot` works without it).
            InvalidArgument: The format is none of svg, png, pdf.

        Example:
            >>> import numpy as np, pathlib, tempfile, tracejit as tj
            >>> f = tj.jit(lambda x: np.tanh(x) * 2, backend="cpu")
            >>> lowered = f.lower(np.ones(10_000))
            >>> lowered.render(pathlib.Path(tempfile.mkdtemp()) / "step.png").suffix
            '.png'
        """
        from .ir import graphviz

        return graphviz.write(self.to_dot(), path, format)

    def _repr_svg_(self) -> str | None:
        """The picture Jupyter shows: the SVG of :meth:`render`, or None (Jupyter then
        shows the text) where Graphviz is missing or fails."""
        from .ir import graphviz

        return graphviz.svg(self.to_dot())

    def __repr__(self) -> str:
        return f"<Lowered {self.graph.name} for backend {self.backend!r}>"


def _step_title(name: str, nodes) -> str:
    """``kernel3: add, tanh`` and the user's line, as the profiler names the step (a long
    kernel's title names its first eight ops and counts the rest)."""
    ops = [n.op for n in nodes]
    shown = ", ".join(ops[:8]) + (f" and {len(ops) - 8} more" if len(ops) > 8 else "")
    where = nodes[0].loc.short if nodes[0].loc is not None else "?"
    return f"{name}: {shown}\\n{where}"


class _Entry:
    """One compiled signature. ``run`` is its runner's function (called directly on the
    cached path); ``compile_s`` is the time it took to build, first call included;
    ``profiled`` is its profiling runner, built when first needed."""

    __slots__ = ("run", "runner", "out_tree", "lowered", "compile_s", "profiled", "finish",
                 "pending", "interpreting", "writes", "aliases")

    def __init__(self, runner: Runner, out_tree, lowered: Lowered, compile_s: float,
                 writes: tuple = (), aliases: tuple = (), memories: tuple = ()):
        self.writes = writes  # (argument leaf, regions) it writes to: see trace_function
        self.aliases = aliases  # (output, argument leaf, view path) it returns: the same
        self.run = _writing(runner, writes, lowered.optimized_graph, aliases)
        self.runner = runner
        self.out_tree = out_tree
        self.lowered = lowered
        self.compile_s = compile_s
        self.profiled: Runner | None = None
        self.finish = _finisher(out_tree, lowered.optimized_graph,
                                sum(len(regions) for _, regions in writes),
                                frozenset(k for k, _, _ in aliases), memories)
        self.pending: Future | None = None  # the compiled runner (compile="background")
        self.interpreting = False  # runner is the interpreter, until ``pending`` is done

    def switch_later(self, later: Future, interpreting: bool) -> None:
        """Run on ``runner`` (the interpreter, if ``interpreting``) until ``later`` gives
        a better one (the compiled runner; or one with more kernels, the same bits), then
        on that, and on its own ``faster`` runner in turn; ``pending`` is done once the
        last switch is made. A compile that fails leaves the entry where it is (right
        answers, NumPy's speed there) and says so in the log: the failure is ours."""
        self.pending, self.interpreting = Future(), interpreting
        start = time.perf_counter()

        def switch(done: Future) -> None:
            try:
                runner = done.result()
            except Exception as e:
                _logger().warning("tracejit: compiling %s(%s) in the background failed; it "
                                  "keeps running %s (please report this): %s", self.name,
                                  self.signature, "on the interpreter" if self.interpreting
                                  else "with NumPy calls for its small kernels", e)
                if _PROFILES:
                    profiler.background_compile(self, start, not interpreting, str(e))
                self.pending.set_exception(e)
                return
            if runner is None:  # a faster runner was looked for and there is none
                self.pending.set_result(None)
                return
            self.runner, self.profiled = runner, None
            self.run = _writing(runner, self.writes, self.lowered.optimized_graph,
                                self.aliases)  # the switch
            self.interpreting = False
            _log_switch(self, time.perf_counter() - start)
            if _PROFILES:
                profiler.background_compile(self, start, not interpreting)
            done_pending = self.pending
            if runner.faster is not None:
                self.switch_later(runner.faster, False)
            done_pending.set_result(None)

        later.add_done_callback(switch)

    @property
    def name(self) -> str:
        return self.lowered.graph.name

    @property
    def signature(self) -> str:
        return self.lowered.signature


_GENERATOR = GENERATOR.dtype  # a random generator argument (see ir/random_ops.py)


# A Python int argument beyond int64 is passed by value: NumPy makes a float of it beside
# an inexact array and raises beside an integer one, where a traced int64 input could
# hold neither (its kernel argument would overflow).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _array_key(a: np.ndarray) -> tuple:
    """A host array's leaf key: ``(shape, dtype, False, None)``, and for an array that is
    not C-contiguous its strides in bytes after them. NumPy decides from the strides
    whether a reshape or ravel is a view, and so which writes reach the caller's array:
    the trace decides as NumPy does (``trace.layout``), so the layout is part of the key."""
    if a.flags.c_contiguous:
        return (a.shape, a.dtype, False, None)
    return (a.shape, a.dtype, False, None, a.strides)


def _leaf_key(leaf):
    """(shape, dtype, weak, device) of one argument leaf, the device None but for a GPU
    array, the class for a random generator (a graph input its draws read; the cache key
    holds its class, not the object: each call passes its own); a Static for a hashable
    non-array (a str, an enum: passed by value); None for a Tracer or a traced generator
    (a call inside a trace). InvalidArgument for what jit cannot honour (an np.matrix, a
    masked array, an object array: ``trace.core.array_problem``; an unhashable object
    that is no array)."""
    t = type(leaf)
    if t is np.ndarray and leaf.dtype.kind in "biufc":
        return _array_key(leaf)
    if isinstance(leaf, np.ndarray):  # a subclass, or a dtype jit does not compute with
        problem = array_problem(leaf)
        if problem is not None:
            raise InvalidArgument(problem[0], hint=problem[1])
        return _array_key(leaf)
    if t in WEAK_DEFAULT:
        if t is int and not _INT64_MIN <= leaf <= _INT64_MAX:
            return Static(int, leaf)  # (as a literal: NumPy's own rules, see trace.core)
        return ((), WEAK_DEFAULT[t], True, None)
    if t is bool or isinstance(leaf, np.generic):
        return ((), np.dtype(t) if t is bool else leaf.dtype, False, None)
    if t is Tracer or t is TracedGenerator:
        return None
    if isinstance(leaf, GENERATORS):  # its draws call it when the function runs
        return ((), _GENERATOR, False, t)
    where = targets.device_of(leaf)
    if where is not None:  # a CuPy array: where it lives is part of the signature
        return (leaf.shape, leaf.dtype, False, where)
    if targets.dask_array(leaf):  # its chunks too: the Dask backend's plan depends on them
        return (leaf.shape, leaf.dtype, False, targets.chunked(leaf))
    static = static_leaf(leaf)
    if static is None:
        raise InvalidArgument(f"unsupported leaf type {t.__name__}")
    return static


def _bad_leaf(leaf, name: str, problem: InvalidArgument) -> InvalidArgument:
    """The error for argument ``name`` (a path such as ``params['W']``); ``problem`` is
    _leaf_key's, whose message says what the leaf is when it is an array."""
    if isinstance(leaf, np.ndarray) or targets.dask_array(leaf):
        return InvalidArgument(f"argument {name} is {problem.message}; jit cannot honour "
                               "that", hint=problem.hint)
    return InvalidArgument(
        f"argument {name} is a {type(leaf).__name__}, which jit can neither trace (it is "
        "no array) nor pass by value (it is not hashable)",
        hint="pass NumPy arrays or scalars, or tuples/lists/dicts of them; other arguments "
        "must be hashable (a tuple instead of a list, a frozenset instead of a set)",
    )


class JitFunction(Dispatcher):
    """A function compiled per signature. Create with :func:`jit`.

    Calling it looks the call's signature (argument structure, shapes, dtypes, static
    values, device) up in its cache; a new signature is traced, optimised and compiled
    first. It keeps the wrapped function's name and docstring, and works as a method
    (``self`` is then a static argument). Called from inside another trace (a jitted or
    differentiated caller) it is inlined into that trace.

    Example:
        >>> @tj.jit
        ... def f(x, y):
        ...     return x * y + 1
        >>> f
        <tracejit.jit 'f'>
        >>> f(np.arange(3.0), 2.0)
        array([1., 3., 5.])
        >>> f.cache_info()
        CacheInfo(hits=0, misses=1, signatures=1)
    """

    def __init__(self, fn, static_argnums=(), static_argnames=(), backend: str | None = None,
                 device=None, strict: bool = False, check: bool | str | None = None,
                 compile: str | None = None):
        functools.update_wrapper(self, fn)
        self._fn = fn
        # None: tracejit.config.compile when a signature is built
        self._mode = None if compile is None else _compile_mode(compile)
        backend = backend or default_backend()
        kind = get_backend(backend).device_kind  # (and fail early on a misspelt backend)
        if kind is not None:  # the device picks a device backend: this asks for its device 0
            backend, device = _HOST_BACKEND, device or kind
        self._backend = backend
        self._device = None if device is None else targets.parse(device)
        self._strict = strict
        self._check = resolve_mode(check)  # fixed per function: its cache holds one mode
        if self._device is not None and self._device.kind != "cpu":
            targets.check_available(self._device)
            targets.gpu_requested = True
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._param_names = positional
        self._static_nums = frozenset(nums) | {positional.index(n) for n in names
                                               if n in positional}
        self._static_names = frozenset(names) | {positional[i] for i in nums
                                                 if 0 <= i < len(positional)}
        self._fast_path_off = bool(self._static_nums or self._static_names)
        self._static_at: dict[tuple[int, bool], tuple[int, ...]] = {}  # _static_positions'
        self._concrete = ConcreteInts()  # Python int arguments it needs concretely
        self._valued = bytes(len(positional))  # the same, per positional parameter
        self._names: dict[tuple, list[str]] = {}  # _leaf_names'
        self._cache: dict[CallSignature, _Entry] = {}
        # the same entries keyed by ((shape, dtype), ...) for calls with positional arrays
        # only, which __call__ looks up without building the general key
        self._fast: dict[tuple, _Entry] = {}
        self._lock = threading.RLock()
        # Cached calls count hits with itertools.count: next() is one C call (cheaper on
        # the fastest path than ``self._hits += 1``, measured) and atomic under the GIL; its
        # value is read from its repr, "count(N)" (its __reduce__ went in Python 3.14).
        self._hits = itertools.count()
        self._misses = 0

    # ------------------------------------------------------------ calling
    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self._call_bound, obj)

    def _call_bound(self, obj, *args, **kwargs):
        return self._call((obj, *args), kwargs, True)

    def _static_positions(self, nargs: int, bound: bool) -> tuple[int, ...]:
        """The static positions, in order, of a call with ``nargs`` positional arguments
        (``self`` is one when ``bound``). Memoised: every call with statics asks."""
        pos = self._static_at.get((nargs, bound))
        if pos is None:
            found = {i % nargs for i in self._static_nums if -nargs <= i < nargs}
            pos = self._static_at[nargs, bound] = tuple(sorted(found | {0} if bound else found))
        return pos

    def _signature(self, args, kwargs, bound, device, strict) -> tuple[CallSignature | None,
                                                                       list]:
        """The call's signature and its dynamic leaves (an accepted ndarray subclass as a
        plain ndarray); no signature for a call on Tracers (from an enclosing trace)."""
        if self._fast_path_off or bound:
            static_pos = self._static_positions(len(args), bound)
            statics = tuple(args[i] for i in static_pos)
            dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
            static_kw = tuple(sorted((k, v) for k, v in kwargs.items()
                                     if k in self._static_names))
            dyn_kw = {k: v for k, v in kwargs.items() if k not in self._static_names}
        else:  # nothing is static: nothing to split off
            static_pos, statics, static_kw, dyn_args, dyn_kw = (), (), (), args, kwargs
        leaves, tree = pytree.flatten((dyn_args, dyn_kw))
        concrete = self._concrete.paths
        names = self._leaf_names(tree, len(args), bound) if concrete else ()
        keys, dynamic = [], []
        for i, leaf in enumerate(leaves):
            try:
                k = _leaf_key(leaf)
            except InvalidArgument as e:
                names = self._input_names(tree, static_pos, len(args), pytree.leaf_exprs)
                raise _bad_leaf(leaf, names[i], e) from None
            if k is None:
                return None, leaves
            if concrete and type(leaf) in (int, bool) and names[i] in concrete:
                k = Static(type(leaf), leaf)
            if type(k) is not Static:
                if type(leaf) is not np.ndarray and isinstance(leaf, np.ndarray):
                    leaf = leaf.view(np.ndarray)  # an accepted subclass (np.memmap)
                dynamic.append(leaf)
            keys.append(k)
        return CallSignature(len(args), bound, tree, tuple(keys), statics, static_kw, device,
                             strict), dynamic

    def _leaf_names(self, tree, nargs: int, bound: bool) -> list[str]:
        """The paths of all leaves of a call's dynamic arguments (memoised per tree)."""
        names = self._names.get((tree, nargs, bound))
        if names is None:
            names = self._input_names(tree, self._static_positions(nargs, bound), nargs)
            self._names[tree, nargs, bound] = names
        return names

    def _dynamic_names(self, sig: CallSignature) -> list[str]:
        """The names of the traced inputs: the leaves that are not passed by value."""
        return [n for n, k in zip(self._leaf_names(sig.tree, sig.nargs, sig.bound),
                                  sig.leaves, strict=True) if type(k) is not Static]

    def _learn(self, error: ConcretizationError, sig: CallSignature, leaves) -> bool:
        """Whether ``error`` (from tracing ``sig``) needed Python int arguments that are
        now known to be needed concretely, so that tracing again passes them by value."""
        with self._lock:
            new = self._concrete.learn(error, self._dynamic_names(sig), leaves)
            self._valued = bytes(name in self._concrete.paths for name in self._param_names)
        for name in new:
            _logger().info("%s uses its Python int argument %r concretely (a range, shape, "
                           "index or `if`): it is static from now on, one compile per "
                           "value", getattr(self._fn, "__name__", "f"), name)
        return bool(new)

    def _compiled_values(self, sig: CallSignature) -> None:
        """Count the values compiled for automatically static ints; warn once for each
        that has had many."""
        names = self._leaf_names(sig.tree, sig.nargs, sig.bound)
        for name in self._concrete.compiled(names, sig.leaves):
            fn_name = getattr(self._fn, "__name__", "f")
            warnings.warn(RetraceWarning(
                f"{fn_name} has been traced and compiled for more than {MANY_VALUES} "
                f"values of its argument {name!r}, a Python int it uses concretely (a "
                "range, shape, index or `if`): each new value compiles again. A loop over "
                "range(n) can be a loop construct that traces once for every n "
                "(tracejit.lax.fori_loop); if a few values are by design, say so "
                "with static_argnums/static_argnames"), stacklevel=_user_stacklevel())

    def _lookup(self, sig: CallSignature) -> _Entry | None:
        try:
            return self._cache.get(sig)
        except TypeError:
            raise InvalidArgument(
                f"a static argument of {self.__name__} is not hashable",
                hint="static arguments are part of the cache key: pass tuples instead of "
                "lists/arrays, or make the argument dynamic",
            ) from None

    def _target(self) -> tuple[targets.Device | None, bool]:
        """(device, strict) when the call asked for a GPU, else (None, False): the CPU."""
        if not targets.gpu_requested:
            return None, False
        place = (self._device, self._strict) if self._device is not None else targets.requested()
        if place[0].kind == "cpu":
            return None, False
        targets.check_available(place[0])
        return place

    def _call(self, args, kwargs, bound):
        device, strict = self._target()
        simple = key = None
        if device is not None and not (kwargs or bound or self._fast_path_off or _PROFILES):
            key = _device_key(args, device, strict)  # a call on a GPU: its own short path
            entry = self._fast.get(key) if key is not None else None
            if entry is not None:
                next(self._hits)
                return entry.finish(entry.run(*args))
        if not (bound or self._fast_path_off or _PROFILES or device is not None):
            # the keys this call's entry is stored under: the cached call's (made before a
            # compile that may learn of more valued ints), and _simple_key's for keywords
            key = None if kwargs else fast_key(args, self._valued)
            simple = self._simple_key(args, kwargs)  # ints, strs, None, keywords too
            if simple is not None:
                entry = self._fast.get(simple[0])
                if entry is not None:
                    next(self._hits)
                    return entry.finish(entry.run(*simple[1]))
        sig = None
        if not (kwargs or bound or self._fast_path_off):
            sig = _arrays_signature(args, device, strict)  # positional arrays, nothing static
        arrays_only = sig is not None
        if arrays_only:
            leaves = args
        else:
            sig, leaves = self._signature(args, kwargs, bound, device, strict)
            if sig is None:  # called on Tracers from an enclosing trace: inline the function
                return self._fn(*args, **kwargs)  # (its writes reach the caller's tracers)
        entry = self._lookup(sig)
        if entry is None:
            try:
                entry, outs = self._compile(sig, leaves)
            except ConcretizationError as e:
                if not self._learn(e, sig, leaves):
                    raise
                entry = None
            if entry is None:  # a Python int argument is static now: trace again
                return self._call(args, kwargs, bound)
        else:
            next(self._hits)
            outs = entry.run(*leaves) if not _PROFILES else _profiled_call(entry, leaves)
        if key is not None:  # the cached call finds it without building a signature
            self._fast[key] = entry
        if simple is not None:  # (its key was made before this call's compile, if any)
            self._fast[simple[0]] = entry
        return entry.finish(outs)

    def _simple_key(self, args: tuple, kwargs: dict) -> tuple[tuple, list] | None:
        """For a call whose arguments are all ndarrays, Python floats, ints, bools, strs or
        None (positional or keyword; nothing static by ``static_argnums``): a key that
        tells its signature apart as the general one does, and its dynamic leaves in the
        order the entry takes them (positional, then keywords by name, as pytree flattens
        a dict); None for any other call. An int or bool the function needs concretely
        (``ConcreteInts``) and a str are keyed by value, None by itself."""
        key: list = []
        leaves: list = []
        concrete = self._concrete.paths
        names = self._param_names
        for i, a in enumerate(args):
            needed = bool(concrete) and type(a) in (int, bool) and (
                names[i] if i < len(names) else f"arg{i}") in concrete
            if not _simple_part(a, needed, key, leaves):
                return None
        if kwargs:
            key.append(_KWARGS)
            for name in sorted(kwargs):
                key.append(name)
                a = kwargs[name]
                needed = type(a) in (int, bool) and name in concrete
                if not _simple_part(a, needed, key, leaves):
                    return None
        return tuple(key), leaves

    def _compile(self, sig: CallSignature, leaves) -> tuple[_Entry, list]:
        """Build the entry for a new signature and make its first call."""
        with self._lock:
            entry = self._cache.get(sig)
            if entry is None:
                self._misses += 1
                entry, times = self._build(sig, leaves)
                self._cache[sig] = entry
                if self._concrete.paths:
                    self._compiled_values(sig)
            else:
                next(self._hits)
                times = None
        if times is None:
            return entry, entry.run(*leaves) if not _PROFILES else _profiled_call(entry, leaves)
        start = time.perf_counter()
        try:
            outs = entry.run(*leaves)
        except BaseException as e:
            if isinstance(e, _DATA_ERRORS) and not isinstance(e, IRError):
                raise  # an error in the user's data (an index out of range): the code is fine
            with self._lock:  # code that failed to compile must not stay cached
                if self._cache.get(sig) is entry:
                    del self._cache[sig]
            if _ours(e):  # generated code failing (a Numba TypingError, a NameError)
                low = entry.lowered
                raise internal_error(e, function=low.graph.name, signature=low.signature,
                                     stage="generated code (first call)",
                                     arguments=_arguments(low.graph, leaves),
                                     traced=low.graph, optimized=low.optimized_graph,
                                     backend=get_backend(low.backend)) from e
            raise
        first = time.perf_counter() - start
        entry.compile_s += first
        _log_compile(entry, *times, first)
        if _PROFILES:  # run it again profiled: the first call's time was mostly compiling
            profiler.compiled(entry, start - sum(times), zip(
                ("tracing", "passes", "code generation", "first call"), (*times, first),
                strict=True))
            outs = _profiled_call(entry, leaves)
        return entry, outs

    def _build(self, sig: CallSignature, leaves=()) -> tuple[_Entry, tuple[float, float, float]]:
        """The entry for a signature, and the seconds spent tracing, in passes and in the
        backend. A failure of tracejit's own passes or code generation becomes an
        InternalCompilerError (with a reproducer made of ``leaves``, the arguments)."""
        static_pos = self._static_positions(sig.nargs, sig.bound)
        names = self._dynamic_names(sig)
        types, where = _input_types(names, [k for k in sig.leaves if type(k) is not Static])

        def build_args(tracers):
            given = iter(tracers)
            leaves = [k.value if type(k) is Static else
                      traced_generator(next(given), k[3]) if k[1] is _GENERATOR else next(given)
                      for k in sig.leaves]
            dyn_args, dyn_kw = pytree.unflatten(sig.tree, leaves)
            dyn = iter(dyn_args)
            st = iter(traced_static(v) for v in sig.statics)
            full = [next(st) if i in static_pos else next(dyn) for i in range(sig.nargs)]
            return full, {**dyn_kw, **{k: traced_static(v) for k, v in sig.static_kw}}

        fn_name = getattr(self._fn, "__name__", "f")
        t0 = time.perf_counter()
        stage, graph, optimized = "tracing", None, None
        backend = get_backend(self._backend if sig.device is None else sig.device.kind)
        chunked = any(isinstance(d, targets.Chunked) for d in where)
        if chunked:  # Dask arrays in: a Dask computation out, its chunks on ``backend``
            backend = get_backend("dask").on(backend.name)
        writes: list = []
        aliases: list = []
        memories: list = []
        rolls = roll.for_backend(backend)  # Python loops roll where the backend runs scans
        try:
            strides = [k[4] if len(k) > 4 else None for k in sig.leaves if type(k) is not Static]
            graph, out_tree = trace_function(self._fn, build_args, types, names, fn_name,
                                             writes, None if chunked else aliases, strides,
                                             memories)
            t1 = time.perf_counter()
            stage = "passes"
            _logger()  # set up before the passes: roll_loops logs each loop it rolls
            optimized = run_pipeline(graph)
            for extra in backend.passes:
                optimized = verify(extra(optimized))
            if not chunked and (sig.device is not None or
                                any(d not in (None, targets.CPU) for d in where)):
                stage = "placement"
                optimized = verify(place(optimized, sig.device or targets.CPU, where,
                                         backend.supports, targets.CPU, sig.strict))
            t2 = time.perf_counter()
            stage = "code generation"
            later = None
            if self._check and not chunked:
                run = compile_checked(optimized, backend, self._check, function=fn_name,
                                      traced_ir=str(graph))
            elif (self._mode or config.compile) == "background" and sig.device is None \
                    and not chunked:
                later = backend.compile_later(optimized)
            if later is not None:
                run = get_backend("reference").compile(optimized)  # until `later` is done
            elif not self._check or chunked:
                run = backend.compile(optimized, interim=True)
        except Exception as e:
            if stage == "tracing" and not isinstance(e, IRError) or not _ours(e):
                raise  # the user's function failed, or a typed error about its code
            signature = ", ".join(f"{n}: {t}" for n, t in zip(names, types, strict=True))
            raise internal_error(e, function=fn_name, signature=signature, stage=stage,
                                 arguments=dict(zip(names, leaves, strict=False)),
                                 traced=graph, optimized=optimized, backend=backend) from e
        finally:
            roll.restore(rolls)
        t3 = time.perf_counter()
        lowered = Lowered(graph, optimized, backend.name, (where, backend) if chunked else None)
        entry = _Entry(run, out_tree, lowered, t3 - t0, tuple(writes), tuple(aliases),
                       tuple(memories))
        if later is not None:
            entry.switch_later(later, True)
        elif run.faster is not None:
            entry.switch_later(run.faster, False)
        return entry, (t1 - t0, t2 - t1, t3 - t2)

    def _input_names(self, tree, static_pos, nargs, paths=pytree.leaf_paths) -> list[str]:
        dyn_positions = [i for i in range(nargs) if i not in static_pos]
        arg_trees, kw_tree = tree[1]
        names = []
        for pos, sub in zip(dyn_positions, arg_trees[1], strict=True):
            base = self._param_names[pos] if pos < len(self._param_names) else f"arg{pos}"
            names += paths(sub, base)
        for k, sub in zip(kw_tree[1], kw_tree[2], strict=True):
            names += paths(sub, k)
        return names

    # ------------------------------------------------------------ inspection
    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and optimise for these arguments' signature without running anything.

        The device asked for (``jit(device=...)`` or a ``tj.device`` block) counts, as it
        would for a call. A signature already compiled gives its cached result.

        Args:
            *args: Positional arguments as for a call (only their shapes, dtypes and
                static values matter).
            **kwargs: Keyword arguments as for a call.

        Returns:
            The lowered function, a :class:`Lowered`: its IR before and after the
                passes and the backend's source.

        Raises:
            InvalidArgument: Called with traced values (inside another trace), or with an
                argument a call would refuse.
            ConcretizationError: As for a call: tracing meets the same errors.

        Example:
            >>> f = tj.jit(lambda x: np.exp(x) * x)
            >>> print(f.lower(np.ones(3)).ir)
            def <lambda>(x: f64[3]):
                %0: f64[3] = exp(x)  # ...
                %1: f64[3] = multiply(%0, x)  # ...
                return %1
        """
        sig, leaves = self._signature(args, kwargs, False, *self._target())
        if sig is None:
            raise InvalidArgument("lower() needs concrete arrays, not traced values")
        cached = self._lookup(sig)
        if cached:
            return cached.lowered
        try:
            return self._build(sig, leaves)[0].lowered
        except ConcretizationError as e:
            if not self._learn(e, sig, leaves):
                raise
        return self.lower(*args, **kwargs)  # a Python int argument is static now

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait until every signature compiling in the background runs compiled code.

        With ``compile="background"`` a new signature's calls run on the reference
        interpreter until its kernels are ready; this waits for that switch (useful
        before timing, or in tests). With nothing compiling it returns at once.

        Args:
            timeout: The most seconds to wait; None waits as long as it takes.

        Returns:
            Whether every signature runs all its compiled code. False when the timeout
                passed first, or when a compile failed; that signature keeps running
                where it was (the ``tracejit`` log says why).

        Example:
            >>> f = tj.jit(lambda x: x + 1, compile="background")
            >>> f(np.zeros(2))
            array([1., 1.])
            >>> f.wait_compiled(timeout=60)
            True
        """
        deadline = None if timeout is None else time.perf_counter() + timeout
        while True:
            with self._lock:
                pending = [e.pending for e in self._cache.values() if e.pending is not None]
            left = None if deadline is None else max(0.0, deadline - time.perf_counter())
            done, waiting = futures.wait(pending, left)
            if waiting or any(f.exception() is not None for f in done):
                return False
            with self._lock:  # a switch may have started another (its faster runner)
                if all(e.pending in done for e in self._cache.values() if e.pending):
                    return True

    def cache_info(self) -> CacheInfo:
        """How many calls hit the cache, how many compiled, how many signatures it holds.

        Returns:
            The counts, a :class:`CacheInfo` ``(hits, misses, signatures)``.

        Example:
            >>> f = tj.jit(lambda x: -x)
            >>> _ = f(np.ones(2)); _ = f(np.ones(2))
            >>> f.cache_info()
            CacheInfo(hits=1, misses=1, signatures=1)
        """
        return CacheInfo(int(repr(self._hits)[6:-1]), self._misses, len(self._cache))

    def clear_cache(self) -> None:
        """Forget every compiled signature and reset the counters.

        The next call of each signature traces and compiles again (the disk cache, if
        the backend has one, may still hold its kernels). Use it after changing a global
        the function reads: arrays it reads from globals or closures are constants of
        the compiled code.

        Example:
            >>> f = tj.jit(lambda x: x * 2)
            >>> _ = f(np.ones(2))
            >>> f.clear_cache()
            >>> f.cache_info()
            CacheInfo(hits=0, misses=0, signatures=0)
        """
        with self._lock:
            self._cache.clear()
            self._fast.clear()
            self._hits = itertools.count()
            self._misses = 0

    def __repr__(self) -> str:
        return f"<tracejit.jit {getattr(self._fn, '__qualname__', self._fn)!r}>"


@functools.cache
def _logger():
    """The ``tracejit`` logger; ``TRACEJIT_LOG`` (``1``, ``info`` or ``debug``) gives it a
    stderr handler. Configured on the first compile, so ``import tracejit`` skips logging."""
    import logging
    import sys

    log = logging.getLogger("tracejit")
    level = os.environ.get("TRACEJIT_LOG", "").strip().lower()
    if level not in ("", "0"):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG if level == "debug" else logging.INFO)
    return log


def _user_stacklevel() -> int:
    """The ``stacklevel`` of a warning raised here that points at the user's call."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tracejit."):
        frame, level = frame.f_back, level + 1
    return level


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f} ms"


def _log_compile(entry: _Entry, trace_s: float, passes_s: float, backend_s: float,
                 first_s: float) -> None:
    import logging

    log = _logger()
    if not log.isEnabledFor(logging.INFO):
        return
    low = entry.lowered
    disk = entry.runner.disk_cache  # None: a backend without a disk cache
    note = f"; {disk.describe()}" if disk is not None else ""
    if entry.interpreting:
        note = "; on the interpreter until its kernels, compiling in the background, are ready"
    log.info("compiled %s(%s) for %s in %s: trace %s, passes %s, codegen %s, first call %s%s",
             low.graph.name, low.signature, low.backend, _ms(entry.compile_s), _ms(trace_s),
             _ms(passes_s), _ms(backend_s), _ms(first_s), note)
    if disk is not None and disk.directory is not None:
        log.debug("  cache entry %s", disk.directory)
    for step in entry.runner.steps:
        where = step.location.short if step.location is not None else "?"
        log.debug("  %s: %s (%s, %d bytes)", step.name, step.ops, where, step.nbytes)


def _log_switch(entry: _Entry, waited_s: float) -> None:
    import logging

    log = _logger()
    if log.isEnabledFor(logging.INFO):
        disk = entry.runner.disk_cache
        note = f" ({disk.describe()})" if disk is not None else ""
        log.info("%s(%s) runs compiled kernels now, %s after its first call%s",
                 entry.name, entry.signature, _ms(waited_s), note)


def _compile_mode(mode: str) -> str:
    try:
        return compile_mode(mode)
    except ConfigError as e:
        raise InvalidArgument(e.message, hint="compile='sync' waits for the compiled kernels; "
                              "compile='background' runs NumPy meanwhile") from None


def _profiled_call(entry: _Entry, leaves) -> list:
    """One call of ``entry`` through its profiling runner (built on first use, sharing the
    compiled code; the time that takes counts as compiling), recorded in the open
    profiles. One profiled call at a time: a profiling runner has one recorder."""
    with profiler.lock:
        runner = entry.profiled
        if runner is None:
            start = time.perf_counter()
            runner = entry.profiled = entry.runner.profiled()
            built = time.perf_counter() - start
            entry.compile_s += built
            profiler.compiled(entry, start, [("profiling runner", built)])
        start = time.perf_counter()
        writer = _Writes(entry.writes, entry.lowered.optimized_graph, entry.aliases)
        writer.check(leaves)
        outs, times = runner.timed(*leaves)
        profiler.record(entry, runner.steps, start, time.perf_counter() - start, times)
    return writer.store(leaves, outs)


def _simple_part(a, concrete: bool, key: list, leaves: list) -> bool:
    """Add argument ``a``'s part of a simple call's key (and its leaf, if dynamic) to
    ``key`` and ``leaves``; False for an argument no simple key holds. ``concrete``: the
    function needs it as a value (an int keyed by value, as the general path does)."""
    t = type(a)
    if t is _ndarray:
        if not a.flags.c_contiguous:
            return False  # (its strides are part of its signature: _array_key)
        key.append((a.shape, a.dtype))
        leaves.append(a)
    elif t is float:
        key.append(_FLOAT)
        leaves.append(a)
    elif a is None:
        key.append(None)
    elif t is int or t is bool:
        if t is int and not _INT64_MIN <= a <= _INT64_MAX:
            return False  # (passed by value: _leaf_key)
        if concrete:
            key.append((t, a))
        else:
            key.append(t)
            leaves.append(a)
    elif t is str:
        key.append((t, a))
    else:
        return False
    return True


@functools.lru_cache(maxsize=64)
def _plain_tree(n: int):
    """The tree definition of ``(args, {})`` for n array arguments (what flatten gives)."""
    return pytree.flatten(((0,) * n, {}))[1]


_ndarray = np.ndarray
_KWARGS = object()  # in a _simple_key: the keyword arguments follow
_FLOAT_LEAF = ((), WEAK_DEFAULT[float], True, None)  # and its leaf key (see _leaf_key)


def _device_key(args: tuple, device, strict: bool) -> tuple | None:
    """The cached call's key of a call placed on ``device`` with positional arrays (NumPy's
    or CuPy's, each with its GPU) and Python floats only, None for any other call: what
    ``_arrays_signature`` tells apart, without building a signature (a few microseconds a
    call on a GPU, where the launch itself takes about ten). It starts with the device, so
    it never equals a host call's key."""
    gpu_array = targets.cupy_array_type()
    key: list = [device, strict]
    for a in args:
        t = type(a)
        if t is _ndarray and a.dtype.kind in "biufc" and a.flags.c_contiguous:
            key.append((a.shape, a.dtype))
        elif t is gpu_array:
            key.append((a.shape, a.dtype, a.device.id))
        elif t is float:
            key.append(_FLOAT)
        else:
            return None
    return tuple(key)


def _arrays_signature(args: tuple, device, strict: bool) -> CallSignature | None:
    """The signature of a call with positional arrays (NumPy's or CuPy's) and Python floats
    only and nothing static (the common call), built without flattening; None for any
    other call. It has the parts the general path would give, so both share cache
    entries."""
    keys = []
    for a in args:
        t = type(a)
        if t is _ndarray and a.dtype.kind in "biufc":  # (others: _leaf_key's errors)
            keys.append(_array_key(a))
        elif t is float:  # as _leaf_key gives it: a weakly typed float64 scalar
            keys.append(_FLOAT_LEAF)
        else:
            where = targets.device_of(a)  # a CuPy array: where it lives is part of the key
            if where is None or where == targets.CPU:
                return None
            keys.append((a.shape, a.dtype, False, where))
    return CallSignature(len(args), False, _plain_tree(len(args)), tuple(keys), (), (), device,
                         strict)


def _input_types(names: list[str], leaves: tuple) -> tuple[list[TensorType], list]:
    """The graph inputs' types, and where each lives: a GPU array's device, the CPU for
    other arrays, None for a scalar (it goes wherever it is used). A type's dtype is in
    native byte order: it says what the values are (NumPy computes in native order), and
    a byte-swapped argument (its own signature) is read as NumPy reads it: a kernel's
    argument converted, a written argument stored back through NumPy."""
    types, where = [], []
    for name, (shape, dtype, weak, device, *_) in zip(names, leaves, strict=True):
        if dtype is _GENERATOR:
            types.append(GENERATOR)
            where.append(None)
            continue
        if dtype.kind not in "biufc":
            raise InvalidArgument(f"argument {name!r} has unsupported dtype {dtype}",
                                  hint="use bool, integer, float or complex arrays")
        types.append(TensorType(shape, dtype if dtype.isnative else dtype.newbyteorder("="),
                                weak))
        where.append(device if device is not None else targets.CPU if shape else None)
    return types, where


# What a correct runner raises about the data it is given, as NumPy would: tracejit's typed
# errors, and NumPy's own floating-point errors under np.errstate(...='raise') (the
# reference backend runs NumPy itself).
_DATA_ERRORS = (TracejitError, FloatingPointError)


def _ours(error: BaseException) -> bool:
    """Whether ``error``, raised by tracejit's passes, code generation or generated code,
    is a bug in tracejit: not a typed error about the user's program or data (those are
    TracejitErrors, IRError excepted: it is always ours), nor an interrupt or exhaustion."""
    if isinstance(error, IRError):
        return True
    return isinstance(error, Exception) and not isinstance(error, (TracejitError, MemoryError))


def _arguments(graph: Graph, leaves) -> dict:
    return {v.name or f"in{i}": x for i, (v, x) in enumerate(zip(graph.inputs, leaves,
                                                                  strict=False))}


def _finish(out):
    """0-d results come back as NumPy scalars, as NumPy's own reductions return them; a
    GPU array (0-d too, as CuPy's reductions return them) stays on its device. (The
    common kinds are told first, by type: the device and Dask checks cost 0.4 us.)"""
    if type(out) is np.ndarray:
        return out[()] if out.ndim == 0 else out
    if isinstance(out, np.generic):  # a NumPy scalar already (a reduction's, an element)
        return out
    if type(out) is float:  # a weakly typed 0-d result, a Python float in the runner
        return np.float64(out)
    if targets.device_of(out) is not None or targets.dask_array(out):
        return out  # (a Dask array, 0-d too, stays lazy)
    return np.asarray(out)[()]


def _copy(out, order: str = "K"):
    """A copy the caller owns, on the device ``out`` is on (a host one in ``order``)."""
    where = targets.device_of(out)
    if where is None and targets.dask_array(out):
        return out  # (immutable: Dask's own ops return new arrays)
    return np.array(out, order=order) if where in (None, targets.CPU) else out.copy()


def _writing(runner: Runner, writes: tuple, graph: Graph, aliases: tuple = ()):
    """``runner``'s function, then what the function wrote to its arguments (its last
    outputs: see ``trace_function``) stored into the caller's arrays, as NumPy would have
    changed them; returns the function's own outputs, those that NumPy returns as an
    argument or a view of one (``aliases``) as that view of the caller's array. A runner
    whose namespace names ``destinations`` (per output position, the arguments it may
    compute it in: the CPU backend's) computes a whole-argument write in the caller's
    array where the common path finds that safe."""
    fn = runner.fn
    if not writes and not aliases:
        return fn
    writer = _Writes(writes, graph, aliases)
    check, store = writer.check, writer.store

    def run(*leaves):
        check(leaves)
        return store(leaves, fn(*leaves))

    return writer.fast(fn, run, getattr(runner, "namespace", {}).get("destinations", {}))


_HOST = (np.ndarray, np.generic)


class _Writes:
    """What a function writes to its arguments (``trace_function``'s ``writes``: per
    written argument leaf, its regions), prepared once per signature so that a cached
    call does only the checks and stores it needs: the positions, names and index keys
    are computed here, not per call."""

    __slots__ = ("graph", "n", "keys", "others", "aliases", "unaliased")

    def __init__(self, writes: tuple, graph: Graph, aliases: tuple = ()):
        self.graph = graph
        self.aliases = aliases
        self.n = len(graph.outputs) - sum(len(regions) for _, regions in writes)
        # per written leaf: its position and the index key of each region it writes
        self.keys = tuple((i, tuple(Ellipsis if attrs is None else slice_key(**attrs)
                                    for attrs in regions)) for i, regions in writes)
        # per written leaf: the positions of the other leaves it must not overlap (a
        # weakly typed leaf is a Python scalar, never an array)
        self.others = tuple((i, tuple(j for j, v in enumerate(graph.inputs)
                                      if j != i and not v.type.weak)) for i, _ in writes)
        # the outputs store may have to copy (an aliased one is the caller's array anyway;
        # a written argument's new version may be another argument, passed through)
        aliased = {k for k, _, _ in aliases}
        self.unaliased = tuple(k for k in range(len(graph.outputs)) if k not in aliased)

    def _name(self, i: int) -> str:
        return self.graph.inputs[i].name or f"in{i}"

    def fast(self, fn, slow, destinations: dict | None = None):
        """``slow`` (``fn`` between ``check`` and ``store``) specialised to this signature
        for the common call: every written argument an ndarray owning its memory, every
        other one owning its own or no ndarray, results the runner's own arrays. Python
        code written out line by line (each loop and attribute look-up ``check`` and
        ``store`` make costs tens of nanoseconds, a microsecond in all); any other call
        goes through ``slow``, which raises as those do. ``destinations``: per output
        position, the arguments ``fn`` may compute it in (keyword ``o<position>``): a
        whole argument written there is passed when C-contiguous, aligned and of the
        output's (native) dtype, the checks here having made it disjoint from the others;
        ``fn`` then returns it and nothing is stored back."""
        destinations = destinations or {}
        leaves = [f"l{j}" for j in range(len(self.graph.inputs))]
        sig = ", ".join(leaves)
        written = [i for i, _ in self.keys]
        into, j = {}, self.n  # output position: the leaf passed as its destination
        for i, keys in self.keys:
            for key in keys:
                if key is Ellipsis and i in destinations.get(j, ()):
                    into[j] = i
                j += 1
        if _WriteBack is not None:
            return self._in_c(fn, slow, into)
        lines = [f"def run({sig}):"]
        for i in written:
            lines += [f"    if type(l{i}) is not ndarray: return slow({sig})",
                      f"    f = l{i}.flags",
                      f"    if not f.writeable or l{i}.base is not None or not f.owndata: "
                      f"return slow({sig})"]
            for j in (j for j, leaf in into.items() if leaf == i):
                lines.append(f"    d{j} = l{i} if f.c_contiguous and f.aligned and "
                             f"l{i}.dtype is dtype{j} else None")
        for j in sorted({j for _, others in self.others for j in others} - set(written)):
            lines.append(f"    if isinstance(l{j}, ndarray) and (l{j}.base is not None or "
                         f"not l{j}.flags.owndata): return slow({sig})")
        for i, others in self.others:  # (the same array passed twice: slow raises)
            same = " or ".join(f"l{j} is l{i}" for j in others)
            if same:
                lines.append(f"    if {same}: return slow({sig})")
        lines.append(f"    outs = fn({', '.join([sig, *(f'o{j}=d{j}' for j in into)])})")
        for k in self.unaliased:  # a result that is or may view a written argument
            unsafe = " or ".join(["o.base is not None", *(f"o is l{i}" for i in written
                                                          if into.get(k) != i)])
            host = "" if k < self.n else " or not isinstance(o, HOST)"
            lines += [f"    o = outs[{k}]",
                      f"    if isinstance(o, ndarray) and ({unsafe}){host}: "
                      f"return store(({sig},), outs)"]
        namespace = {"ndarray": _ndarray, "HOST": _HOST, "slow": slow, "fn": fn,
                     "store": self.store, "returned": _returned,
                     **{f"dtype{j}": self.graph.outputs[j].type.dtype for j in into}}
        j = self.n
        for i, keys in self.keys:
            for key in keys:
                namespace[f"key{j}"] = key
                lines += [f"    o = outs[{j}]",
                          f"    if o is not l{i}:",
                          f"        l{i}[key{j}] = o"]
                j += 1
        results = [f"outs[{k}]" for k in range(self.n)]
        for k, i, path in self.aliases:
            namespace[f"path{k}"] = path
            results[k] = f"l{i}" if i in written and not path else \
                f"returned(l{i}, path{k}, outs[{k}], ({sig},), outs)"
        lines.append(f"    return [{', '.join(results)}]")
        exec(compile("\n".join(lines) + "\n", "<tracejit write-back>", "exec"), namespace)
        return namespace["run"]

    def _in_c(self, fn, slow, into: dict[int, int]):
        """What ``fast`` writes out in Python, as ``_dispatch.WriteBack``: the same steps
        in C, read from tuples (its comment in ``_dispatch.c`` says which)."""
        written = [i for i, _ in self.keys]
        dtypes = {j: self.graph.outputs[j].type.dtype for j in into}
        back, j = [], self.n
        for i, keys in self.keys:
            for key in keys:
                back.append((j, i, key))
                j += 1
        aliased = {k: (i, path, i in written and not path) for k, i, path in self.aliases}
        return _WriteBack(
            fn, slow, self.store, _returned,
            tuple((i, tuple((j, dtypes[j]) for j, leaf in into.items() if leaf == i))
                  for i in written),
            tuple(sorted({j for _, others in self.others for j in others} - set(written))),
            self.others,
            tuple(f"o{j}" for j in into), tuple(into),
            tuple((k, tuple(i for i in written if into.get(k) != i)) for k in self.unaliased),
            tuple(back), tuple(aliased.get(k) for k in range(self.n)))

    def check(self, leaves) -> None:
        """Before running: every array written to is writeable, and shares no memory with
        another argument (the trace took them for separate arrays, which NumPy would not)."""
        for i, others in self.others:
            leaf = leaves[i]
            if not isinstance(leaf, _ndarray):  # (CuPy's arrays are always writeable)
                continue
            flags = leaf.flags  # (a new object per access: read once)
            if not flags.writeable:
                raise ReadOnlyDestination(f"assignment destination is read-only: the function "
                                          f"writes to argument {self._name(i)!r}, whose array "
                                          "is not writeable")
            # Two different arrays that own memory allocated for them alone (no base,
            # ``owndata``) share none: told without asking NumPy (a third of a
            # microsecond a pair). Views, and the rare array wrapping memory it does not
            # own, are asked about: first whether their bounds overlap (cheap), then,
            # where they do, whether an element is in both (``x[::2]`` and ``x[1::2]``
            # are disjoint within one span). (Plain loops here and below, no
            # generators: one costs half a microsecond, more than the checks on a small
            # call.)
            owned = leaf.base is None and flags.owndata
            for j in others:
                x = leaves[j]
                if not isinstance(x, _ndarray) or (owned and x is not leaf and x.base is None
                                                   and x.flags.owndata):
                    continue
                if np.may_share_memory(leaf, x) and self._shares_memory(leaf, x, i, j):
                    raise InPlaceArgumentError(
                        f"the function writes to argument {self._name(i)!r}, which shares "
                        f"memory with argument {self._name(j)!r}: the trace took them for "
                        "separate arrays", hint="pass a copy of one of them")

    # The most work np.shares_memory may spend on a pair whose bounds overlap: about
    # 45 ns a unit, so ~50 ms at most. Slices of one array take a few units; the
    # hardest of 20,000 random 1-3-d strided views of one buffer took ~1.5*10^5.
    MAX_WORK = 10**6

    def _shares_memory(self, leaf, x, i: int, j: int) -> bool:
        """NumPy's exact answer to whether ``leaf`` and ``x`` share an element. Where
        its search gives up (``TooHardError``) the call is refused: running would be a
        wrong answer if they did share, refusing a right one is only a copy away."""
        try:
            return np.shares_memory(leaf, x, max_work=self.MAX_WORK)
        except np.exceptions.TooHardError:
            raise InPlaceArgumentError(
                f"the function writes to argument {self._name(i)!r}, and NumPy could not "
                f"tell within {self.MAX_WORK} steps whether it shares memory with argument "
                f"{self._name(j)!r} (views of one buffer with interleaved strides): the "
                "trace takes them for separate arrays", hint="pass a copy of one of them"
            ) from None

    def store(self, leaves, outs) -> list:
        """The runner's outputs ``outs`` stored into the written arguments; the function's
        own outputs returned (an output that is the runner's view of a written argument
        copied first: it keeps what it held, and a later store reads it intact)."""
        written = [leaves[i] for i, _ in self.keys]
        copied = None
        for k in self.unaliased:
            o = outs[k]
            if not isinstance(o, _ndarray):
                continue
            # An output without a base is an array the runner allocated (NumPy's results
            # and the kernels' outputs own their memory), or an argument passed through:
            # that one is copied if written; the checks made the arguments disjoint.
            fresh = o.base is None
            for w in written:
                if o is w or not fresh and isinstance(w, _ndarray) and np.may_share_memory(o, w):
                    if copied is None:
                        copied = list(outs)
                    copied[k] = o.copy()
                    break
        if copied is not None:
            outs = copied
        j = self.n
        for i, keys in self.keys:
            leaf = leaves[i]
            if isinstance(leaf, _ndarray):
                for key in keys:
                    new = outs[j]
                    if new is leaf:  # the runner wrote into the caller's array itself
                        j += 1
                        continue
                    if not isinstance(new, _HOST):  # a GPU's result, for a host argument
                        new = targets.to_host(new)
                    leaf[key] = new
                    j += 1
                continue
            where = targets.device_of(leaf)
            for key in keys:
                if where is not None:  # a CuPy array: updated on its device
                    leaf[key] = targets.to_device(outs[j], where)
                elif targets.dask_array(leaf):  # Dask's item assignment: a new graph, lazily
                    leaf[key] = outs[j]
                # (a Python or NumPy scalar cannot change: the caller keeps its value, as NumPy)
                j += 1
        if not self.aliases:
            return outs[:self.n]
        computed, outs = outs, list(outs[:self.n])
        for k, i, path in self.aliases:
            outs[k] = _returned(leaves[i], path, outs[k], leaves, computed)
        return outs


def _returned(leaf, path: tuple, computed, leaves: tuple, outs):
    """What NumPy returns for an output that is argument ``leaf`` (its final version, now
    in the caller's array) taken through the view ops of ``path``: that view of the
    caller's array, wherever it lives (a host array passed to a call placed on a GPU has
    its writes copied back already, so returning it costs nothing; results the GPU
    computed stay there); or the runner's value, as any output, for an argument no view
    can be taken of (a Python scalar)."""
    if type(leaf) is not _ndarray and targets.device_of(leaf) is None:
        return _finish(_copy(computed))
    return _take_view(leaf, path, leaves, outs)


def _take_view(leaf, path: tuple, leaves: tuple, outs):
    """``leaf`` taken through the view ops of ``path`` (``trace._caller_path``'s: an
    index known at run time is one of ``leaves`` or of ``outs``)."""
    for op, attrs in path:
        if op == "slice":
            leaf = leaf[slice_key(**attrs)]
        elif op == "gather":  # x[i]: i an argument, or an output (trace._caller_path)
            index = leaves[attrs["leaf"]] if "leaf" in attrs else outs[attrs["output"]]
            if targets.device_of(index) not in (None, targets.CPU):  # a GPU's 0-d result
                index = targets.to_host(index)
            leaf = leaf[(slice(None),) * attrs["axis"] + (int(index), Ellipsis)]  # (0-d: a view)
        elif op == "transpose":
            leaf = leaf.transpose(attrs["perm"])
        elif op == "reshape":
            leaf = leaf.reshape(attrs["shape"])
        elif op in ("real", "imag"):
            leaf = leaf.real if op == "real" else leaf.imag
        elif op == "read_only":  # a view NumPy makes read-only (a diagonal)
            leaf = _read_only(leaf)
        else:  # broadcast_to: read-only, as NumPy's
            leaf = np.broadcast_to(leaf, attrs["shape"])
    return leaf


def _read_only(out):
    """``out`` as a read-only view (a host array's; a GPU's cannot be one)."""
    if type(out) is not np.ndarray:
        return out
    out = out.view()
    out.flags.writeable = False
    return out


def _finisher(out_tree, graph: Graph, writes: int = 0, aliased: frozenset = frozenset(),
              memories: tuple = ()):
    """The function from a runner's output list (without the ``writes`` last outputs of
    the graph, the arguments' new versions) to what the user gets back. The ``aliased``
    outputs are what the user gets already (views of the caller's arrays: ``_returned``);
    ``memories`` says which outputs NumPy's would put in separate buffers
    (``trace._memories``)."""
    copy = _copiers(graph, memories)[:len(graph.outputs) - writes]
    n = len(pytree.leaf_paths(out_tree, "")) if out_tree is not None else 0
    derived = [(k, m.derived) for k, m in enumerate(memories[:n])
               if m is not None and m.derived is not None and k not in aliased]
    if derived or len(copy) > n:  # hidden outputs: buffers and indices of views
        return _deriving(out_tree, copy, aliased, derived, n)
    if out_tree is None:  # the function returns None (it writes to its arguments)
        return _none
    if out_tree is pytree.LEAF and aliased:  # the caller's array, returned
        return _first
    if aliased:
        return lambda outs: pytree.unflatten(
            out_tree, [o if k in aliased else _finish(c(o) if c else o)
                       for k, (o, c) in enumerate(zip(outs, copy, strict=True))])
    if out_tree is pytree.LEAF:
        if copy[0] is _c_ordered:  # an array the runner allocated: C-ordered as NumPy's
            return _first_ordered
        if copy[0]:
            return lambda outs, c=copy[0]: _finish(c(outs[0]))
        if graph.outputs[0].type.shape:
            return _first
        return lambda outs: _finish(outs[0])
    if out_tree == ("t", (pytree.LEAF,) * len(copy)) and all(
            c in (None, _c_ordered) for c in copy):  # a flat tuple
        return _tuple_finisher(["finish" if not v.type.shape else
                                "ordered" if c else None
                                for v, c in zip(graph.outputs, copy, strict=False)])
    if any(copy):
        return lambda outs: pytree.unflatten(
            out_tree, [_finish(c(o) if c else o) for o, c in zip(outs, copy, strict=True)])
    return lambda outs: pytree.unflatten(out_tree, [_finish(o) for o in outs])


def _deriving(out_tree, copy: list, aliased: frozenset, derived: list, n: int):
    """The finisher of a function whose results include views of one buffer
    (``OutputMemory.derived``): each such view is taken from the output holding the
    buffer, as NumPy's share it; the outputs after the ``n`` the function returns are
    hidden (the buffers, the views' indices)."""
    views = {k: spec for k, spec in derived}

    def finish(outs):
        done = [o if k in aliased or k in views or not c else c(o)
                for k, (o, c) in enumerate(zip(outs, copy, strict=True))]
        for k, (holder, path) in views.items():
            if type(done[holder]) is _ndarray or targets.device_of(done[holder]) is not None:
                done[k] = _take_view(done[holder], path, (), done)
        return pytree.unflatten(out_tree, [o if k in aliased else _finish(o)
                                           for k, o in enumerate(done[:n])])

    return finish


def _copiers(graph: Graph, memories: tuple) -> list:
    """Per output, what makes the runner's array the one NumPy returns, or None where it
    is that already: a copy of memory the caller must not share (``_shared_outputs``); a
    C-ordered copy for a buffer of its own that the runner hands back as a view (``x.T.copy()``,
    whose copy the passes drop); the layout NumPy gives a new buffer (``np.exp(x.T)``
    is Fortran-ordered) where that is not C order."""
    producers = graph.producers()
    copiers: list = []
    for k, shared in enumerate(_shared_outputs(graph, memories)):
        memory = memories[k] if k < len(memories) else None
        node = producers.get(graph.outputs[k])
        if memory is not None and memory.read_only and not memory.derived:
            copy = _view_copy if memory.view else _copy  # (the caller's, NumPy's read-only)
            copiers.append(lambda out, copy=copy: _read_only(copy(out)))
        elif memory is None:
            copiers.append(_copy if shared else None)
        elif memory.view:
            copiers.append(_view_copy if shared else None)
        elif memory.strides is not None:
            copiers.append(_layout(memory.strides))
        elif shared or (node is not None and node.op in _VIEWS | {"broadcast_to"}):
            copiers.append(_c_copy)
        else:  # (a NumPy call of the runner's lays out as the operands: x + 1 of Fortran x)
            copiers.append(_c_ordered)
    return copiers





def _view_copy(out):
    """A copy of a view the caller owns, with the view's strides (NumPy's ``[::-1]`` of a
    result of its own is no contiguous copy): the view of a copy of its base, where that
    is a C-ordered host array; else a copy as ``_copy`` makes it."""
    base = out.base if type(out) is np.ndarray else None
    if type(base) is not np.ndarray or not base.flags.c_contiguous or base.size < out.size \
            or 0 in out.strides:  # (a broadcast: a copy of its own, as NumPy's view has)
        return _copy(out)
    offset = out.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return np.ndarray(out.shape, out.dtype, buffer=base.copy(), offset=offset,
                      strides=out.strides)


def _c_copy(out):
    """A C-ordered copy the caller owns (``ndarray.copy()``'s order), where ``out`` is."""
    return _copy(out, "C")


def _layout(strides: tuple[int, ...]):
    """The copier that lays a result out as ``strides`` (in elements, contiguous in some
    order of the axes) lay it: NumPy's layout for an array it allocated in ``order="K"``.
    The order of the axes is found here, once a signature, not per call."""
    perm = tuple(sorted(range(len(strides)), key=lambda a: -strides[a]))  # outermost first
    inverse = tuple(int(a) for a in np.argsort(perm))
    return functools.partial(_laid_out, perm=perm, inverse=inverse)


def _laid_out(out, perm: tuple[int, ...], inverse: tuple[int, ...]):
    """A copy of ``out`` whose memory holds it in the axis order ``perm`` (a GPU's or
    Dask's array is copied in C order: only the host's layouts are NumPy's)."""
    if type(out) is not np.ndarray:
        return _c_copy(out)
    return out.transpose(perm).copy().transpose(inverse)


def _tuple_finisher(steps: list[str | None]):
    """A flat tuple's finisher: per output, ``"finish"`` (``_finish`` of a 0-d one),
    ``"ordered"`` (``_c_ordered``: an array the runner allocated) or None (as it is),
    written out for the tuple's length (a loop over the outputs costs 0.1 us an output,
    most of a small call's finish)."""
    if not any(steps):
        return tuple
    if all(s == "ordered" for s in steps):
        return _ordered_tuple  # (finished in C, as tuple)
    parts = ", ".join(f"{s}(outs[{k}])" if s else f"outs[{k}]" for k, s in enumerate(steps))
    namespace = {"finish": _finish, "ordered": _c_ordered}
    exec(compile(f"def finish_tuple(outs):\n    return ({parts},)\n", "<tracejit finish>",
                 "exec"), namespace)
    return namespace["finish_tuple"]


_VIEWS = {"reshape", "transpose", "slice"}


def _shared_outputs(graph: Graph, memories: tuple = ()) -> list[bool]:
    """Which outputs a runner may hand back as memory it does not own afresh: an argument,
    a constant (the same array on every call) or a view of one, a read-only broadcast
    view, or the memory of an earlier output that NumPy's would not share (``memories``:
    the passes merged equal values, as ``np.sort(x)`` computed twice). Those are copied,
    so that what a call returns is the caller's to modify, as with NumPy."""
    producers, inputs = graph.producers(), set(graph.inputs)
    shared, owner = [], {}  # owner: per base value, the memory of the first output on it
    for k, v in enumerate(graph.outputs):
        node = producers.get(v)
        while node is not None and node.op in _VIEWS:
            v = node.inputs[0]
            node = producers.get(v)
        memory = memories[k] if k < len(memories) else None
        first = owner.setdefault(v, memory)
        shared.append(v in inputs or (node is not None and node.op in ("constant",
                                                                         "broadcast_to"))
                      or (node is not None and _loop_carry(node, producers))
                      or (memory is not None and first != memory))
    return shared


def _loop_carry(node, producers) -> bool:
    """Whether ``node`` reads a loop's final carry: after no step, or from a body that
    passes it through, that is the array the loop started from (an argument, a constant)."""
    if node.op != "loop_output":
        return False
    loop = producers[node.inputs[0]].attrs["loop"]
    return node.attrs["index"] < getattr(loop, "n_carry", len(loop.body.outputs))


def jit(
    fn: Callable | None = None,
    *,
    static_argnums: int | tuple[int, ...] = (),
    static_argnames: str | tuple[str, ...] = (),
    backend: str | None = None,
    device: str | targets.Device | None = None,
    strict: bool = False,
    check: bool | str | None = None,
    compile: str | None = None,
) -> JitFunction | Callable[[Callable], JitFunction]:
    """Compile ``fn`` per signature: trace it once, run the compiled code afterwards.

    ``fn`` is plain NumPy code. Its first call with a new signature (the arguments' pytree
    structure, shapes and dtypes, the static values, the device) traces it into IR,
    optimises and compiles that; later calls with the same signature run the compiled
    code from the cache. Usable as ``@jit`` or ``@jit(static_argnums=...)``.

    Args:
        fn: The function to compile; None returns a decorator taking it.
        static_argnums: Positions of arguments passed by value, not traced: part of the
            cache key (one compile per value), so they may steer Python control flow.
        static_argnames: The same for arguments given by name.
        backend: The CPU compiler: ``"cpu"`` (Numba, the default, or
            ``TRACEJIT_BACKEND``) or ``"reference"`` (NumPy interprets the graph op by
            op). ``backend="cuda"`` means ``device="cuda"``.
        device: Where to run (``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`Device`),
            overriding the ``tj.device`` block around the call.
        strict: With ``device``: an op the GPU cannot run is an error
            (:class:`~tracejit.errors.PlacementError`) instead of a
            :class:`~tracejit.errors.PlacementWarning` and a CPU fallback.
        check: ``True`` compares every compiled step with the reference interpreter
            (raising KernelMismatch); ``"nan"`` stops at the first NaN or infinity made
            from finite inputs (raising NonFiniteValue). The default comes from
            ``TRACEJIT_CHECK`` (``1`` or ``nan``). Checking always compiles synchronously.
        compile: ``"sync"``: a new signature's first call waits for its kernels;
            ``"background"``: that call (and later ones) run on the reference interpreter
            until the kernels, compiled in other processes, are ready. The default is
            ``tracejit.config.compile`` (``TRACEJIT_COMPILE``).

    Returns:
        The compiled function, a :class:`JitFunction` wrapping ``fn`` (or, when ``fn``
            is None, a decorator that makes one).

    Raises:
        InvalidArgument: An unknown backend or compile mode; a malformed device name.
        BackendUnavailable: ``device`` names a GPU this machine does not have.
        KernelMismatch: With ``check=True``, at a call: a compiled step disagreed with
            the reference interpreter.
        NonFiniteValue: With ``check="nan"``, at a call: a step made a NaN or an
            infinity from finite inputs.

    Example:
        >>> @tj.jit
        ... def layer(x, W, b):
        ...     return np.tanh(x @ W + b)
        >>> layer(np.ones((2, 3)), np.full((3, 2), 0.1), np.zeros(2)).round(4)
        array([[0.2913, 0.2913],
               [0.2913, 0.2913]])

        A static argument steers Python code; each value compiles once:

        >>> @tj.jit(static_argnames="mode")
        ... def act(x, mode):
        ...     return np.maximum(x, 0) if mode == "relu" else np.tanh(x)
        >>> act(np.array([-1.0, 2.0]), mode="relu")
        array([0., 2.])
    """
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, backend=backend,
                                 device=device, strict=strict, check=check, compile=compile)
    return JitFunction(fn, static_argnums, static_argnames, backend, device, strict, check,
                       compile)
