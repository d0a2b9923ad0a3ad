"""``jit``: trace once per signature, run the compiled graph from a cache afterwards.

The signature (cache key) is the pytree structure of the dynamic arguments, each leaf's
(shape, dtype, weak flag), the static argument values and the backend. A cached call does
little more than flatten the arguments, build that key and look it up.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections import namedtuple
from typing import Any

import numpy as np

from .backends import get_backend
from .errors import InvalidArgument
from .ir import Graph, TensorType
from .ir.types import WEAK_DEFAULT
from .passes import run_pipeline
from .trace import Tracer, pytree, trace_function

CacheInfo = namedtuple("CacheInfo", "hits misses signatures")


def default_backend() -> str:
    return os.environ.get("TRACEJIT_BACKEND", "reference")


class Lowered:
    """A traced and optimised function for one signature, for inspection (nothing runs)."""

    def __init__(self, graph: Graph, optimized: Graph, backend: str):
        self.graph = graph
        self.optimized_graph = optimized
        self.backend = backend

    @property
    def ir(self) -> str:
        return str(self.graph)

    @property
    def optimized_ir(self) -> str:
        return str(self.optimized_graph)

    @property
    def source(self) -> str:
        return get_backend(self.backend).source(self.optimized_graph)

    def __repr__(self) -> str:
        return f"<Lowered {self.graph.name} for backend {self.backend!r}>"


class _Entry:
    __slots__ = ("run", "out_tree", "lowered")

    def __init__(self, run, out_tree, lowered: Lowered):
        self.run = run
        self.out_tree = out_tree
        self.lowered = lowered


def _leaf_key(leaf):
    """(shape, dtype, weak) of one argument leaf; None for a Tracer (call inside a trace)."""
    t = type(leaf)
    if t is np.ndarray:
        return (leaf.shape, leaf.dtype, False)
    if t in WEAK_DEFAULT:
        return ((), WEAK_DEFAULT[t], True)
    if t is bool or isinstance(leaf, np.generic):
        return ((), np.dtype(t) if t is bool else leaf.dtype, False)
    if t is Tracer:
        return None
    raise InvalidArgument(f"unsupported leaf type {t.__name__}")


def _bad_leaf(leaf, name: str) -> InvalidArgument:
    return InvalidArgument(
        f"argument {name!r} is a {type(leaf).__name__}, which jit cannot trace",
        hint="pass NumPy arrays or scalars (or tuples/lists/dicts of them); mark other "
        "arguments static with static_argnums/static_argnames",
    )


class JitFunction:
    """A function compiled per signature. Create with :func:`jit`."""

    def __init__(self, fn, static_argnums=(), static_argnames=(), backend: str | None = None):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._backend = backend or default_backend()
        get_backend(self._backend)  # fail early on a misspelt backend
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
        self._cache: dict[Any, _Entry] = {}
        self._lock = threading.RLock()
        self._hits = 0
        self._misses = 0

    # ------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs, False)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self._call_bound, obj)

    def _call_bound(self, obj, *args, **kwargs):
        return self._call((obj, *args), kwargs, True)

    def _static_positions(self, nargs: int, bound: bool) -> frozenset:
        pos = {i % nargs for i in self._static_nums if -nargs <= i < nargs}
        return frozenset(pos | {0}) if bound else frozenset(pos)

    def _split(self, args, kwargs, bound):
        static_pos = self._static_positions(len(args), bound) if args else frozenset()
        statics = tuple(args[i] for i in sorted(static_pos))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self._static_names))
        dyn_kw = {k: v for k, v in kwargs.items() if k not in self._static_names}
        return static_pos, statics, static_kw, dyn_args, dyn_kw

    def _signature(self, args, kwargs, bound):
        if not (kwargs or bound or self._static_nums) and all(type(a) is np.ndarray for a in args):
            # Fast path for the common call: positional arrays, nothing static.
            keys = tuple([(a.shape, a.dtype, False) for a in args])
            tree = _plain_tree(len(args))
            return (len(args), False, tree, keys, (), ()), _NO_STATICS, list(args), tree
        split = self._split(args, kwargs, bound)
        static_pos, statics, static_kw, dyn_args, dyn_kw = split
        leaves, tree = pytree.flatten((dyn_args, dyn_kw))
        keys = []
        for leaf in leaves:
            try:
                k = _leaf_key(leaf)
            except InvalidArgument:
                names = self._input_names(tree, static_pos, len(args))
                raise _bad_leaf(leaf, names[len(keys)]) from None
            if k is None:
                return None, split, leaves, tree
            keys.append(k)
        return (len(args), bound, tree, tuple(keys), statics, static_kw), split, leaves, tree

    def _lookup(self, key) -> _Entry | None:
        try:
            return self._cache.get(key)
        except TypeError:
            raise InvalidArgument(
                f"a static argument of {self.__name__} is not hashable",
                hint="static arguments are part of the cache key: pass tuples instead of "
                "lists/arrays, or make the argument dynamic",
            ) from None

    def _call(self, args, kwargs, bound):
        key, split, leaves, tree = self._signature(args, kwargs, bound)
        if key is None:  # called on Tracers from an enclosing trace: inline the function
            return self._fn(*args, **kwargs)
        entry = self._lookup(key)
        if entry is None:
            entry = self._compile(key, split, tree, args)
        else:
            with self._lock:
                self._hits += 1
        outs = entry.run(*leaves)
        return pytree.unflatten(entry.out_tree, [_finish(o) for o in outs])

    def _compile(self, key, split, tree, args) -> _Entry:
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                self._hits += 1
                return entry
            self._misses += 1
            entry = self._build(key, split, tree, len(args))
            self._cache[key] = entry
            return entry

    def _build(self, key, split, tree, nargs) -> _Entry:
        static_pos, statics, static_kw, _, _ = split
        names = self._input_names(tree, static_pos, nargs)
        types = []
        for name, (shape, dtype, weak) in zip(names, key[3], strict=True):
            if dtype.kind not in "biufc":
                raise InvalidArgument(f"argument {name!r} has unsupported dtype {dtype}",
                                      hint="use bool, integer, float or complex arrays")
            types.append(TensorType(shape, dtype, weak))

        def build_args(tracers):
            dyn_args, dyn_kw = pytree.unflatten(tree, tracers)
            dyn = iter(dyn_args)
            st = iter(statics)
            full = [next(st) if i in static_pos else next(dyn) for i in range(nargs)]
            return full, {**dyn_kw, **dict(static_kw)}

        graph, out_tree = trace_function(self._fn, build_args, types, names,
                                         getattr(self._fn, "__name__", "f"))
        optimized = run_pipeline(graph)
        run = get_backend(self._backend).compile(optimized)
        return _Entry(run, out_tree, Lowered(graph, optimized, self._backend))

    def _input_names(self, tree, static_pos, nargs) -> list[str]:
        dyn_positions = [i for i in range(nargs) if i not in static_pos]
        arg_trees, kw_tree = tree[1]
        names = []
        for pos, sub in zip(dyn_positions, arg_trees[1], strict=True):
            base = self._param_names[pos] if pos < len(self._param_names) else f"arg{pos}"
            names += pytree.leaf_paths(sub, base)
        for k, sub in zip(kw_tree[1], kw_tree[2], strict=True):
            names += pytree.leaf_paths(sub, k)
        return names

    # ------------------------------------------------------------ inspection
    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and optimise for these arguments' signature without running anything."""
        key, split, _, tree = self._signature(args, kwargs, False)
        if key is None:
            raise InvalidArgument("lower() needs concrete arrays, not traced values")
        cached = self._lookup(key)
        return cached.lowered if cached else self._build(key, split, tree, len(args)).lowered

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = 0

    def __repr__(self) -> str:
        return f"<tracejit.jit {getattr(self._fn, '__qualname__', self._fn)!r}>"


_NO_STATICS = (frozenset(), (), (), None, None)


@functools.lru_cache(maxsize=64)
def _plain_tree(n: int):
    """The tree definition of ``(args, {})`` for n array arguments (what flatten gives)."""
    return pytree.flatten(((0,) * n, {}))[1]


def _finish(out):
    """0-d results come back as NumPy scalars, as NumPy's own reductions return them."""
    if type(out) is np.ndarray:
        return out[()] if out.ndim == 0 else out
    return np.asarray(out)[()]


def jit(
    fn=None,
    *,
    static_argnums: int | tuple[int, ...] = (),
    static_argnames: str | tuple[str, ...] = (),
    backend: str | None = None,
):
    """Compile ``fn`` per signature. Usable as ``@jit`` or ``@jit(static_argnums=...)``."""
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, backend=backend)
    return JitFunction(fn, static_argnums, static_argnames, backend)
