"""``grad``, ``value_and_grad``, ``vjp`` and ``jacobian``: reverse mode, as in JAX.

A gradient function called on arrays is a ``jit`` of its symbolic version (one cache entry
per signature, on the default or the given backend), so forward and backward pass are one
IR graph, simplified, fused and compiled together. Called inside a trace (``jit(grad(f))``,
``grad(grad(f))``, or from a function an outer ``jit`` traces) it records into that trace
instead. The reverse walk is in ``ad/backward.py``, the per-op rules in ``ad/rules.py``.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..api import CacheInfo, Lowered, jit
from ..errors import DTypeError, InvalidArgument, ShapeError, UnsupportedOperation
from ..ir import Value
from ..locations import SourceLocation
from ..passes.stabilize import stabilize_nodes
from ..trace import Tracer, pytree
from ..trace import core as _core
from ..trace.core import Trace, bind
from ..trace.updates import write
from .backward import backward

JACOBIAN_MAX_OUTPUTS = 1024  # jacobian unrolls one reverse walk per output element


def _active_trace() -> Trace | None:
    stack = getattr(_core._state, "stack", None)
    return stack[-1] if stack else None


def _describe(fn) -> str:
    """``loss (defined at model.py:12)``: the differentiated function, for messages."""
    name = getattr(fn, "__name__", type(fn).__name__)
    code = getattr(inspect.unwrap(fn), "__code__", None) if callable(fn) else None
    if code is None:
        return name
    loc = SourceLocation(code.co_filename, code.co_firstlineno, name)
    return f"{name} (defined at {loc.short})"


def _normalize_argnums(argnums, nargs: int, fn) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, (int, np.integer)) else tuple(argnums)
    if not nums:
        raise InvalidArgument("argnums is empty: nothing to differentiate with respect to")
    out = []
    for i in nums:
        if not isinstance(i, (int, np.integer)) or not -nargs <= i < nargs:
            raise InvalidArgument(
                f"argnums {argnums!r} out of range: {_describe(fn)} was called with {nargs} "
                "positional argument(s)",
                hint="argnums counts positional arguments; keyword arguments are not "
                "differentiated")
        out.append(int(i) % nargs)
    if len(set(out)) != len(out):
        raise InvalidArgument(f"argnums {argnums!r} repeats an argument")
    return tuple(out)


def _param_name(fn, i: int) -> str:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[i] if i < len(params) else f"argument {i}"


def _primal(trace: Trace, leaf, what: str, fn) -> Tracer:
    """A fresh value for one leaf to differentiate with respect to. The identity node
    keeps it apart from other uses of the same value (a closure over it, the same array
    passed twice), so nested gradients never confuse their perturbations."""
    value = trace.lift(leaf)
    t = value.type
    if t.dtype.kind != "f":
        raise DTypeError(
            f"cannot differentiate {_describe(fn)} with respect to {what}: it has dtype "
            f"{t.dtype} ({t}); gradients are defined for real floating inputs only",
            hint="convert it with .astype(np.float64), or leave it out of argnums")
    fresh = bind("reshape", Tracer(value, trace), shape=t.shape)
    return Tracer(fresh._value, trace)  # an array of its own, not a view of the leaf


def _flatten_primals(trace, args, argnums, fn) -> tuple[list, list[Tracer], list, list]:
    """The arguments with fresh values in the differentiated positions, those values, one
    tree definition per position, and the leaves they stand for."""
    args = list(args)
    wrt: list[Tracer] = []
    trees, origins = [], []
    for i in argnums:
        leaves, tree = pytree.flatten(args[i])
        paths = pytree.leaf_paths(tree, _param_name(fn, i))
        fresh = [_primal(trace, leaf, repr(p), fn) for leaf, p in zip(leaves, paths,
                                                                       strict=True)]
        args[i] = pytree.unflatten(tree, fresh)
        wrt += fresh
        origins += leaves
        trees.append((tree, len(fresh)))
    return args, wrt, trees, origins


def _carry_writes(origins: list, wrt: list[Tracer]) -> None:
    """The function wrote to arguments it is differentiated by: its caller's arrays (the
    leaves they stand for) change too, as NumPy would have changed them."""
    for leaf, w in zip(origins, wrt, strict=True):
        if w._seen and isinstance(leaf, Tracer):
            write(leaf, w)


def _unflatten_grads(grads: list, trees, single: bool):
    out, k = [], 0
    for tree, n in trees:
        out.append(pytree.unflatten(tree, grads[k:k + n]))
        k += n
    return out[0] if single else tuple(out)


def _split_aux(result, has_aux: bool, fn):
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        got = "an array" if isinstance(result, Tracer) else f"a {type(result).__name__}"
        raise InvalidArgument(f"has_aux=True needs {_describe(fn)} to return a pair "
                              f"(output, aux), got {got}")
    return result[0], result[1]


def _scalar_output(trace: Trace, out, fn) -> Value:
    if isinstance(out, Tracer) or isinstance(out, (bool, int, float, complex, np.generic,
                                                   np.ndarray)):
        value = trace.lift(out)
    else:
        raise InvalidArgument(f"grad of {_describe(fn)}: the output is a "
                              f"{type(out).__name__}, not an array",
                              hint="return a scalar (use has_aux=True to return more)")
    t = value.type
    if t.shape != ():
        raise ShapeError(
            f"grad of {_describe(fn)} needs a scalar output, got shape {t.shape} ({t})",
            hint="reduce the output to a scalar (e.g. .sum() or .mean()), or use "
            "tracejit.vjp / tracejit.jacobian for non-scalar outputs")
    if t.dtype.kind != "f":
        raise DTypeError(
            f"grad of {_describe(fn)} needs a real floating output, got dtype {t.dtype} ({t})",
            hint="compute the output in floating point, e.g. .astype(np.float64)")
    return value


# ---------------------------------------------------------------- grad and value_and_grad


class _Transformed:
    """A transformation of ``fn``: inside a trace it records into that trace; called on
    arrays it runs a ``jit`` of the same recording, cached per signature, which
    ``lower``/``cache_info`` inspect. Subclasses define ``_traced(args, kwargs)``."""

    def __init__(self, fn, argnums, name: str, backend: str | None, check=None):
        functools.update_wrapper(self, fn, updated=())
        self._fn = fn
        self._argnums = argnums

        @functools.wraps(fn, updated=())
        def traced(*args, **kwargs):
            return self._traced(args, kwargs)

        traced.__name__ = traced.__qualname__ = f"{name}_{getattr(fn, '__name__', 'f')}"
        self.__name__ = traced.__name__
        self._jit = jit(traced, backend=backend, check=check)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Compute the transformation at these arguments.

        On arrays it runs the compiled transformation (one cache entry per signature);
        inside a trace it records into that trace.

        Args:
            *args: ``fn``'s positional arguments.
            **kwargs: ``fn``'s keyword arguments (never differentiated).

        Returns:
            The result described by :func:`grad`, :func:`value_and_grad` or
                :func:`jacobian`.

        Raises:
            ShapeError: A gradient of an output that is not a scalar.
            DTypeError: An output or a differentiated argument that is not real floating
                point.
            InvalidArgument: ``argnums`` out of range, empty or repeated.

        Example:
            >>> tj.grad(lambda x, y: np.sum(x * y))(np.ones(2), np.arange(2.0))
            array([0., 1.])
        """
        if _active_trace() is not None:  # its arguments are the caller's arrays
            return self._traced(args, kwargs)
        return self._jit(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and optimise for these arguments (nothing runs).

        The forward and backward passes are one graph: its IR shows both.

        Args:
            *args: Positional arguments as for a call.
            **kwargs: Keyword arguments as for a call.

        Returns:
            The lowered function, a ``tracejit.Lowered``.

        Example:
            >>> g = tj.grad(lambda x: np.sum(x ** 2))
            >>> g.lower(np.ones(3)).signature
            'x: f64[3]'
        """
        return self._jit.lower(*args, **kwargs)

    def cache_info(self) -> CacheInfo:
        """The cache statistics of the compiled transformation, as ``JitFunction``'s.

        Returns:
            The counts, a ``tracejit.CacheInfo`` ``(hits, misses, signatures)``.

        Example:
            >>> g = tj.grad(lambda x: np.sum(x ** 2))
            >>> _ = g(np.ones(3))
            >>> g.cache_info()
            CacheInfo(hits=0, misses=1, signatures=1)
        """
        return self._jit.cache_info()


class GradFunction(_Transformed):
    """The gradient of ``fn`` (see :func:`grad`)."""

    def __init__(self, fn, argnums, has_aux: bool, with_value: bool, backend: str | None,
                 check=None):
        self._has_aux = has_aux
        self._with_value = with_value
        super().__init__(fn, argnums, "value_and_grad" if with_value else "grad", backend,
                         check)

    def _traced(self, args, kwargs):
        trace = _core.current()
        argnums = _normalize_argnums(self._argnums, len(args), self._fn)
        args, wrt, trees, origins = _flatten_primals(trace, args, argnums, self._fn)
        inputs = [w._value for w in wrt]  # (before the function may write to them)
        start = len(trace.nodes)
        out, aux = _split_aux(self._fn(*args, **kwargs), self._has_aux, self._fn)
        _carry_writes(origins, wrt)
        value = _scalar_output(trace, out, self._fn)
        end = _stabilize(trace, start)
        seed = bind("full", shape=(), dtype=value.type.dtype, value=1)
        grads = backward(trace, start, end, [(value, seed)], inputs)
        g = _unflatten_grads(grads, trees, isinstance(self._argnums, (int, np.integer)))
        if self._with_value:
            out = Tracer(value, trace)
            return ((out, aux) if self._has_aux else out), g
        return (g, aux) if self._has_aux else g

    def __repr__(self) -> str:
        kind = "value_and_grad" if self._with_value else "grad"
        return f"<tracejit.{kind} of {self._fn!r}>"


def grad(fn: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
         backend: str | None = None, check: bool | str | None = None) -> GradFunction:
    """The gradient of a scalar function, as a function of the same arguments.

    Reverse mode, as ``jax.grad``: the forward and backward passes are one IR graph,
    simplified, fused and compiled together. Called on arrays the result is jitted
    (cached per signature); called inside a trace (``jit(grad(f))``, ``grad(grad(f))``)
    it records into that trace, so higher derivatives work.

    Args:
        fn: The function to differentiate. Its output must be a real floating scalar.
        argnums: The positional arguments to differentiate by: an int gives that
            argument's gradient, a tuple gives a tuple of them. Arguments may be pytrees
            of float arrays; each gradient has its argument's structure, shapes and dtypes.
        has_aux: ``fn`` returns ``(out, aux)``; the result is then ``(grad, aux)``,
            ``aux`` passed through undifferentiated.
        backend: The backend compiling the gradient, as in :func:`jit`.
        check: :func:`jit`'s checking mode for the compiled gradient.

    Returns:
        The gradient function, taking ``fn``'s arguments; it has ``lower`` and
            ``cache_info`` as a :class:`JitFunction` has.

    Raises:
        ShapeError: At a call: the output is not a scalar (reduce it, or use
            :func:`vjp` or :func:`jacobian`).
        DTypeError: At a call: the output, or an argument in ``argnums``, is not real
            floating point (convert it with ``.astype(np.float64)``).
        InvalidArgument: At a call: ``argnums`` out of range, empty or repeated; with
            ``has_aux``, an output that is no pair.

    Example:
        >>> def loss(w, x):
        ...     return np.sum(np.tanh(x @ w) ** 2)
        >>> w, x = np.array([0.5, -0.25]), np.array([[1.0, 2.0], [3.0, 1.0]])
        >>> tj.grad(loss)(w, x)
        array([1.42722806, 0.47574269])
        >>> dw, dx = tj.grad(loss, argnums=(0, 1))(w, x)
        >>> dx.shape
        (2, 2)
    """
    return GradFunction(fn, argnums, has_aux, False, backend, check)


def value_and_grad(fn: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
                   *, backend: str | None = None,
                   check: bool | str | None = None) -> GradFunction:
    """Like :func:`grad`, returning the function's value with its gradient.

    One forward pass gives both, so a training step need not evaluate the loss twice.

    Args:
        fn: The function to differentiate; its output must be a real floating scalar.
        argnums: The positional arguments to differentiate by (an int or a tuple).
        has_aux: ``fn`` returns ``(out, aux)``; the result is ``((value, aux), grad)``.
        backend: The backend compiling it, as in :func:`jit`.
        check: :func:`jit`'s checking mode for the compiled function.

    Returns:
        A function returning ``(value, grad)`` (``((value, aux), grad)`` with
            ``has_aux``).

    Raises:
        ShapeError: At a call: the output is not a scalar.
        DTypeError: At a call: the output or a differentiated argument is not real
            floating point.
        InvalidArgument: At a call: ``argnums`` out of range, empty or repeated.

    Example:
        >>> f = tj.value_and_grad(lambda x: np.sum(x ** 3))
        >>> value, g = f(np.array([1.0, 2.0]))
        >>> value, g
        (np.float64(9.0), array([ 3., 12.]))
    """
    return GradFunction(fn, argnums, has_aux, True, backend, check)


# ---------------------------------------------------------------- vjp


def _seeds(trace: Trace, out_leaves, out_tree, cotangent, fn) -> list[tuple[Value, Tracer]]:
    ct_leaves, ct_tree = pytree.flatten(cotangent)
    if ct_tree != out_tree:
        raise InvalidArgument(
            f"the cotangent given to the vjp of {_describe(fn)} has a different structure "
            "from the function's output", hint="pass one array per output leaf, in a tree "
            "of the same structure (tuple/list/dict) as the output")
    seeds = []
    for out, ct in zip(out_leaves, ct_leaves, strict=True):
        v = trace.lift(out)
        if v.type.dtype.kind not in "fc":
            continue  # integer and boolean outputs carry no cotangent
        c = Tracer(trace.lift(ct), trace)
        if c.shape != v.type.shape:
            raise ShapeError(f"the cotangent of an output {v.type} of {_describe(fn)} has "
                             f"shape {c.shape}", hint="give each cotangent its output's shape")
        seeds.append((v, c))
    return seeds


def stop_gradient(x: Any) -> Any:
    """``x`` itself, through which no gradient flows (``jax.lax.stop_gradient``).

    The derivative of anything computed from it treats it as a constant: use it for a
    target computed from the parameters, or a shift that only keeps numbers in range
    (``tracejit.nn`` does so for its max subtraction).

    Args:
        x: An array, or a pytree of arrays; on plain arrays (outside a trace) it is
            returned unchanged.

    Returns:
        ``x``, with each traced leaf marked as a constant for differentiation.

    Example:
        >>> f = tj.grad(lambda x: np.sum(x * tj.stop_gradient(x)))
        >>> f(np.array([1.0, 2.0]))  # d/dx of x * c is c, not 2 x
        array([1., 2.])
    """
    leaves, tree = pytree.flatten(x)
    return pytree.unflatten(tree, [leaf._trace.bind("stop_gradient", (leaf,), {})
                                   if isinstance(leaf, Tracer) else leaf for leaf in leaves])


def _stabilize(trace, start: int) -> int:
    """Rewrite the nodes ``fn`` appended into their stable forms (passes/stabilize.py)
    before differentiating them, so that the gradient of ``log(softmax(z))`` is
    ``softmax - onehot`` rather than a division by a probability rounded to 0. Values
    keep their identities. Returns the new end of the span."""
    trace.nodes[start:] = stabilize_nodes(trace.nodes[start:])
    return len(trace.nodes)


def _vjp_traced(fn, primals, has_aux: bool):
    """``(out, vjp_fn[, aux])`` recorded in the active trace."""
    trace = _core.current()
    argnums = tuple(range(len(primals)))
    args, wrt, trees, origins = _flatten_primals(trace, primals, argnums, fn)
    inputs = [w._value for w in wrt]  # (before the function may write to them)
    start = len(trace.nodes)
    out, aux = _split_aux(fn(*args), has_aux, fn)
    _carry_writes(origins, wrt)
    out_leaves, out_tree = pytree.flatten(out)
    end = _stabilize(trace, start)

    def vjp_fn(cotangent):
        if not trace.active:
            raise InvalidArgument("this vjp_fn belongs to a trace that has finished",
                                  hint="call vjp_fn inside the function that called vjp")
        seeds = _seeds(trace, out_leaves, out_tree, cotangent, fn)
        grads = backward(trace, start, end, seeds, inputs)
        return _unflatten_grads(grads, trees, False)

    return out, vjp_fn, aux


_JITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cached_jit(fn, key, make):
    """One jit per (fn, what it computes, backend), so repeated ``vjp(fn, ...)`` calls on
    arrays reuse their compiled code."""
    try:
        per_fn = _JITS.setdefault(fn, {})
    except TypeError:  # not weakly referenceable: no cache
        return make()
    if key not in per_fn:
        per_fn[key] = make()
    return per_fn[key]


def vjp(fn: Callable, *primals: Any, has_aux: bool = False,
        backend: str | None = None) -> tuple:
    """The function's output and a function giving its vector-Jacobian products.

    ``vjp_fn(cotangent)`` pulls a cotangent of the output (an array per output leaf,
    the output's shapes) back to one per primal: the building block of :func:`grad`
    for functions with non-scalar outputs. A complex output's cotangent follows JAX's
    convention (``dL/dRe - i dL/dIm``). On arrays both the forward call and
    ``vjp_fn`` are compiled and cached per signature; the backward call recomputes the
    forward pass inside its own graph.

    Args:
        fn: The function to differentiate.
        *primals: The arguments to call it with (and differentiate by: all of them,
            each a float array or a pytree of them).
        has_aux: ``fn`` returns ``(out, aux)``; the result is then
            ``(out, vjp_fn, aux)``.
        backend: The backend compiling both, as in :func:`jit`.

    Returns:
        ``(out, vjp_fn)``: ``out = fn(*primals)``, and ``vjp_fn`` taking a cotangent
            with ``out``'s structure and shapes and returning a tuple with the
            cotangent of each primal. ``(out, vjp_fn, aux)`` with ``has_aux``.

    Raises:
        DTypeError: A primal that is not real floating point.
        InvalidArgument: At ``vjp_fn``: a cotangent whose structure differs from the
            output's; inside a trace, ``vjp_fn`` called after that trace finished.
        ShapeError: At ``vjp_fn``: a cotangent whose shape differs from its output's.

    Example:
        >>> out, vjp_fn = tj.vjp(lambda x: np.sin(x) * 2, np.array([0.0, 1.0]))
        >>> out
        array([0.        , 1.68294197])
        >>> vjp_fn(np.ones(2))
        (array([2.        , 1.08060461]),)
    """
    if _active_trace() is not None:
        out, vjp_fn, aux = _vjp_traced(fn, primals, has_aux)
        return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)
    forward = _cached_jit(fn, ("forward", backend), lambda: jit(fn, backend=backend))

    def make_backward():
        def backward_fn(primals, cotangent):
            return _vjp_traced(fn, primals, has_aux)[1](cotangent)

        backward_fn.__name__ = f"vjp_{getattr(fn, '__name__', 'f')}"
        return jit(backward_fn, backend=backend)

    backward_jit = _cached_jit(fn, ("vjp", has_aux, backend), make_backward)
    result = forward(*primals)
    out, aux = _split_aux(result, has_aux, fn)

    def vjp_fn(cotangent):
        return backward_jit(tuple(primals), cotangent)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


# ---------------------------------------------------------------- jacobian


class JacobianFunction(_Transformed):
    """The Jacobian of ``fn`` (see :func:`jacobian`)."""

    def __init__(self, fn, argnums, backend: str | None):
        super().__init__(fn, argnums, "jacobian", backend)

    def _traced(self, args, kwargs):
        trace = _core.current()
        argnums = _normalize_argnums(self._argnums, len(args), self._fn)
        args, wrt, trees, origins = _flatten_primals(trace, args, argnums, self._fn)
        inputs = [w._value for w in wrt]  # (before the function may write to them)
        start = len(trace.nodes)
        out_leaves, out_tree = pytree.flatten(self._fn(*args, **kwargs))
        _carry_writes(origins, wrt)
        values = [trace.lift(o) for o in out_leaves]
        end = _stabilize(trace, start)
        total = sum(v.type.size for v in values)
        if total > JACOBIAN_MAX_OUTPUTS:
            raise UnsupportedOperation(
                f"jacobian of {_describe(self._fn)}: {total} output elements (more than "
                f"{JACOBIAN_MAX_OUTPUTS}); it takes one reverse pass per output element",
                hint="use tracejit.vjp with the cotangents you need, or grad of a scalar")
        single = isinstance(self._argnums, (int, np.integer))
        per_output = []
        for v in values:
            if v.type.dtype.kind != "f":
                raise DTypeError(f"jacobian of {_describe(self._fn)}: an output has dtype "
                                 f"{v.type.dtype} ({v.type}); only real floating outputs "
                                 "have a Jacobian")
            rows = []
            for k in range(v.type.size):
                onehot = np.zeros(v.type.size, v.type.dtype)
                onehot[k] = 1
                seed = Tracer(trace.constant(onehot.reshape(v.type.shape)), trace)
                rows.append(backward(trace, start, end, [(v, seed)], inputs))
            jac = [_stack_rows([r[j] for r in rows], v.type.shape, w) for j, w in
                   enumerate(wrt)]
            per_output.append(_unflatten_grads(jac, trees, single))
        return pytree.unflatten(out_tree, per_output)


def _stack_rows(rows: list[Tracer], out_shape: tuple[int, ...], w: Tracer) -> Tracer:
    shape = out_shape + w.shape
    if not rows:
        return bind("full", shape=shape, dtype=w.dtype, value=0)
    flat = [bind("reshape", r, shape=(1,) + w.shape) for r in rows]
    stacked = flat[0] if len(flat) == 1 else bind("concatenate", *flat, axis=0)
    return bind("reshape", stacked, shape=shape)


def jacobian(fn: Callable, argnums: int | tuple[int, ...] = 0, *,
             backend: str | None = None) -> JacobianFunction:
    """The Jacobian of ``fn`` by reverse mode, as a function of the same arguments.

    For an output of shape ``S`` and an input of shape ``T`` the Jacobian has shape
    ``S + T``. The output may be a pytree of float arrays (the result mirrors it). One
    backward pass is unrolled per output element, so this is for small outputs.

    Args:
        fn: The function; its outputs must be real floating point.
        argnums: The positional arguments to differentiate by (an int or a tuple).
        backend: The backend compiling it, as in :func:`jit`.

    Returns:
        The Jacobian function, taking ``fn``'s arguments.

    Raises:
        UnsupportedOperation: At a call: more than ``JACOBIAN_MAX_OUTPUTS`` (1024)
            output elements; use :func:`vjp` with the cotangents you need.
        DTypeError: At a call: an output or a differentiated argument that is not real
            floating point.
        InvalidArgument: At a call: ``argnums`` out of range, empty or repeated.

    Example:
        >>> tj.jacobian(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    return JacobianFunction(fn, argnums, backend)


__all__: list[str] = ["GradFunction", "JacobianFunction", "grad", "jacobian",
                      "stop_gradient", "value_and_grad", "vjp"]
