"""JAX's structured loops on NumPy bodies: ``scan``, ``fori_loop``, ``while_loop``, ``map``.

Same signatures and pytree carries as ``jax.lax``, so JAX code ports by changing the
import. Inside ``jit`` (or ``grad``) each records one loop node whose body is traced once,
whatever the trip count; called on arrays it is compiled on first use, like any jitted
function (one cache entry per body function, loop parameters and signature), so arrays a
body reads from a closure or a global are constants of that compilation, as in ``jit``:
pass arrays that change between calls in the carry or ``xs``.

Types follow NumPy's loop, which JAX's match: a Python scalar initial value is weakly
typed, and the carry takes the dtype its first steps give it (``0.0`` summing float32
data is a float32 carry); ``fori_loop``'s ``i`` is a Python int as ``range``'s.

Differences from JAX: ``unroll`` (and ``map``'s ``batch_size``) is accepted and ignored
(the loop is one node however it is written; each backend decides how to run it);
``while_loop`` and a ``fori_loop`` with traced bounds have no reverse-mode gradient
(JAX's have none either); a loop's result is not known while tracing, so a Python ``if``
on it raises ``ConcretizationError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import LoopError
from .trace import core
from .trace import loops as _loops


def _tracing() -> bool:
    return bool(getattr(core._state, "stack", None))


@functools.lru_cache(maxsize=128)
def _compiled(kind: str, fn: Callable, *params) -> Callable:
    """The jitted form of one loop, for calls outside a trace."""
    from .api import jit

    if kind == "scan":
        length, reverse = params
        return jit(lambda init, xs: _loops.scan(fn, init, xs, length, reverse))
    if kind == "while_loop":
        (cond,) = params
        return jit(lambda init: _loops.while_loop(cond, fn, init))
    if kind == "fori_loop":
        lower, upper = params
        return jit(lambda init: fori_loop(lower, upper, fn, init))
    if kind == "fori_dynamic":  # array bounds are arguments: new bounds compile nothing
        (lo,) = params  # a Python int lower bound stays one: ``i`` keeps range's type
        return jit(lambda lower, upper, init: fori_loop(lower if lo is None else lo, upper,
                                                        fn, init))
    return jit(lambda xs: map(fn, xs))


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs`` (``jax.lax.scan``).

    The body is traced once, whatever the trip count, into one loop node; its gradient
    is a loop too, walking stored residuals in reverse. Called on arrays it is
    compiled on first use (one cache entry per body function, loop parameters and
    signature).

    Args:
        f: The body, ``(carry, x) -> (carry, y)``; carry and ``y`` may be pytrees, and
            the carry keeps its structure, shapes and dtypes from step to step.
        init: The initial carry; a Python scalar is weakly typed and the carry takes
            the dtype its first steps give it.
        xs: The arrays (a pytree) scanned over their leading axis, or None.
        length: The trip count when ``xs`` is None (it must match ``xs`` otherwise).
        reverse: Run from the last slice to the first (``ys`` stay in ``xs``' order).
        unroll: Accepted for JAX compatibility and ignored: the loop is one node and
            each backend decides how to run it.

    Returns:
        ``(carry, ys)``: the final carry, and each step's ``y`` stacked along a new
            leading axis.

    Raises:
        LoopError: The body does not fit the loop: a carry whose shape or dtype
            changes from one step to the next, scanned inputs of different lengths.
        ConcretizationError: Python needs a value the loop computes (an ``if`` on
            it): the loop's result is not known while tracing.

    Example:
        >>> carry, ys = tj.lax.scan(lambda c, x: (c + x, c * x), 0.0, np.arange(4.0))
        >>> carry, ys
        (np.float64(6.0), array([0., 0., 2., 9.]))
        >>> tj.lax.scan(lambda c, _: (c * 2, c), 1.0, None, length=4)
        (np.float64(16.0), array([1., 2., 4., 8.]))
    """
    if _tracing():
        return _loops.scan(f, init, xs, length, reverse)
    return _compiled("scan", f, length, bool(reverse))(init, xs)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """``while cond_fun(val): val = body_fun(val)``, traced once (``jax.lax.while_loop``).

    The trip count may depend on the data. It has no reverse-mode gradient (JAX's has
    none either): use :func:`scan` or :func:`fori_loop` with Python int bounds there.

    Args:
        cond_fun: ``val -> bool`` scalar: whether to run another step.
        body_fun: ``val -> val``, keeping its structure, shapes and dtypes.
        init_val: The initial value (a pytree of arrays and scalars).

    Returns:
        The final ``val``.

    Raises:
        LoopError: A body that changes ``val``'s shape or dtype, or a condition that
            is not one boolean scalar.
        ConcretizationError: Python needs a value the loop computes (an ``if`` on
            it): the loop's result is not known while tracing.

    Example:
        >>> tj.lax.while_loop(lambda v: v < 100, lambda v: v * 2, 1)
        np.int64(128)
    """
    if _tracing():
        return _loops.while_loop(cond_fun, body_fun, init_val)
    return _compiled("while_loop", body_fun, cond_fun)(init_val)


def _static_int(x) -> int | None:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    return None


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any, *,
              unroll: int | bool | None = None) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``, traced once.

    With Python int bounds it is a :func:`scan` (differentiable); with traced bounds a
    :func:`while_loop`. ``i`` is weakly typed, a Python int as ``range`` gives (so
    ``v + i`` keeps a float32 ``v`` float32, as in NumPy), unless ``lower`` is traced.

    Args:
        lower: The first ``i``: a Python int or an integer array.
        upper: The bound ``i`` stops before.
        body_fun: ``(i, val) -> val``, keeping ``val``'s structure, shapes and dtypes.
        init_val: The initial value (a pytree).
        unroll: Accepted for JAX compatibility and ignored.

    Returns:
        The final ``val``.

    Raises:
        LoopError: Bounds that are not integers, or a body that changes ``val``'s
            shape or dtype.
        ConcretizationError: Python needs a value the loop computes.

    Example:
        >>> tj.lax.fori_loop(0, 5, lambda i, v: v + i, 0.0)
        np.float64(10.0)
    """
    lo, hi = _static_int(lower), _static_int(upper)
    if not _tracing():
        if lo is None or hi is None:
            return _compiled("fori_dynamic", body_fun, lo)(lower, upper, init_val)
        return _compiled("fori_loop", body_fun, lo, hi)(init_val)
    if lo is not None and hi is not None:
        def step(carry, _):
            i, val = carry
            return (i + 1, body_fun(i, val)), None

        (_, val), _ = _loops.scan(step, (lo, init_val), None,
                                  length=max(hi - lo, 0), what="lax.fori_loop")
        return val

    def cond(carry):
        i, n, _ = carry
        return i < n

    def body(carry):
        i, n, val = carry
        return i + 1, n, body_fun(i, val)

    index = np.result_type(_dtype_of(lower), _dtype_of(upper))
    if index.kind not in "iu":
        raise LoopError(f"lax.fori_loop: the bounds must be integers, got {index}")
    # ``i`` is a Python int as range's is (NEP 50: ``v + i`` keeps v's float32), unless
    # ``lower`` is traced: then it has the bounds' dtype.
    lower_v = lo if lo is not None else lower.astype(index)
    upper_v = np.asarray(upper, index) if not hasattr(upper, "_trace") else upper.astype(index)
    _, _, val = _loops.while_loop(cond, body, (lower_v, upper_v, init_val),
                                  what="lax.fori_loop")
    return val


def _dtype_of(x) -> np.dtype:
    return x.dtype if hasattr(x, "dtype") else np.dtype(np.int64)


def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001
    """``f`` applied to each slice of ``xs`` along its leading axis, results stacked.

    ``jax.lax.map``'s name and signature: a :func:`scan` without a carry, traced once.

    Args:
        f: The function of one slice (a pytree of arrays).
        xs: The arrays mapped over their leading axis.
        batch_size: Accepted for JAX compatibility and ignored.

    Returns:
        ``f``'s results stacked along a new leading axis.

    Raises:
        LoopError: Scanned inputs of different lengths.
        ConcretizationError: ``f`` needs a traced value as a Python value.

    Example:
        >>> tj.lax.map(np.sum, np.arange(6.0).reshape(3, 2))
        array([1., 5., 9.])
    """
    if not _tracing():
        return _compiled("map", f)(xs)

    def step(carry, x):
        return carry, f(x)

    return _loops.scan(step, (), xs, what="lax.map")[1]
