"""The ``random`` op: one draw from a random generator, made each time the graph runs.

A draw reads and advances a generator's state, which lives outside the graph, so it is an
op with an effect (``OpDef.effect``): passes keep every draw, used or not (NumPy would
still advance the state), in program order (NumPy's order of draws decides which numbers
each gets), and never merge two equal-looking draws, fold one into a constant or fuse one
into a loop kernel. Every backend runs it as a call of the real generator's method, in the
calling thread, so a seeded program gets NumPy's bits exactly (the CUDA backend runs it
on the host: CuPy's generators give other numbers).

Attributes: ``source`` says which generator: ``"global"`` is NumPy's global RandomState
(``np.random.mtrand._rand``, the one ``np.random.seed`` seeds; looked up when the draw
runs), ``"input"`` a generator the jitted function received as an argument (the node's
first input, of type ``GENERATOR``: it comes from each call), and an :class:`Owned` one
the compiled function holds (``default_rng()`` called unseeded inside it). ``method`` is
the generator's method, called with ``args`` and ``kwargs`` (``(name, value)`` pairs) in
which a :class:`Slot` stands for an array input. ``shape``, ``dtype`` and ``weak`` are the
result's type, as NumPy gives it (``trace/random.py`` works it out); a method that returns
nothing (``seed``) gives the token ``True``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .registry import Grad, Kind, register
from .types import TensorType

# The type of a generator passed to a jitted function: an opaque host object that only
# draws read (the printer shows it as ``rng[]``).
GENERATOR = TensorType((), np.dtype(object))


@dataclass(frozen=True)
class Slot:
    """An argument of the draw's method that is the node's array input ``index``
    (counted after the generator input, if any)."""

    index: int

    def __repr__(self) -> str:
        return f"${self.index}"


class Owned:
    """A generator the compiled function owns (compared by identity)."""

    __slots__ = ("generator",)

    def __init__(self, generator):
        self.generator = generator

    def __repr__(self) -> str:
        return f"<owned {type(self.generator).__name__}>"


class Restart:
    """The first draw from ``np.random.default_rng(seed)`` made in the function: it puts
    the owned generator back to the seed's state first, so every call draws what a new
    generator with that seed would (as NumPy's function does on every call), and the
    later draws of the call continue its stream."""

    __slots__ = ("owned", "state")

    def __init__(self, owned: Owned):
        self.owned = owned
        self.state = owned.generator.bit_generator.state

    def __repr__(self) -> str:
        return f"<restarted {type(self.owned.generator).__name__}>"


def generator_of(source, inputs: tuple) -> tuple[object, tuple]:
    """The generator a draw calls and its remaining (array) inputs."""
    if source == "global":
        return np.random.mtrand._rand, inputs
    if source == "input":
        return inputs[0], inputs[1:]
    if isinstance(source, Restart):
        source.owned.generator.bit_generator.state = source.state
        return source.owned.generator, inputs
    return source.generator, inputs


def _draw(*inputs, source, method, args, kwargs, shape, dtype, weak):
    gen, arrays = generator_of(source, inputs)

    def value(x):
        return arrays[x.index] if isinstance(x, Slot) else x

    out = getattr(gen, method)(*[value(a) for a in args], **{k: value(v) for k, v in kwargs})
    return np.True_ if out is None else out


def _rule(*inputs: TensorType, source, method, args, kwargs, shape, dtype,
          weak) -> TensorType:
    return TensorType(tuple(shape), np.dtype(dtype), weak)


register("random", Kind.RANDOM, _rule, _draw,
         "generator.method(*args, **kwargs): a draw from NumPy's global RandomState, a "
         "generator argument or one the function owns, made on every call (an effect)",
         grad=Grad.ZERO, effect=True)
