"""The record each corpus program is registered with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One program of the corpus and how to check it.

    ``args()`` makes fresh, deterministic positional arguments (it is called once per run,
    so a program writing into its arguments never sees another run's writes); ``kwargs``
    are passed as they are. ``grad`` is the position of the float argument the program is
    differentiated with respect to (its outputs' float leaves are reduced to a scalar by a
    fixed random weighting), or None where the program has no gradient worth checking
    (integer results, in-place updates of its arguments, random draws). ``exact`` says the
    program's float results do not depend on rounding order (min/max/copies, small-integer
    arithmetic), so they must equal NumPy's bit for bit; integer and boolean results are
    always compared exactly. ``rtol`` widens the relative error allowed float results (by
    default, one for the inputs' precision) for programs that amplify rounding
    (factorisations, iterated maps); ``atol`` allows an absolute error for results that
    are rounding noise by nature (the residual of a solved system, about 1e-16)."""

    name: str
    fn: Callable
    args: Callable[[], tuple]
    grad: int | None = None
    exact: bool = False
    rtol: float | None = None
    atol: float = 0.0
    kwargs: dict[str, Any] = field(default_factory=dict)
