"""Drawn programs of views and writes against NumPy: values, arguments and shared memory
(issue 40, "Tests that can see this class").

A program is data: its arguments (float64 and int64 arrays in C, Fortran, transposed or
strided layouts, and integers passed as Python ints or ``np.int64``) and a list of steps,
each printable as one line of Python: arrays made inside the function (``np.zeros``,
``np.exp(x.T)``, ``np.empty_like`` then filled, ``copy()``), chains of views (basic slices
with steps, integer indices constant or traced, ``.T``, ``transpose``, ``reshape``,
``ravel``, ``[None]``, ``squeeze``) and writes through them (``[...] =``, ``[key] =``,
``+=``, ``out=``, ``np.copyto``, ``fill``). The same step list runs once on NumPy and once
under ``jit``, each on its own copies of the arguments (same layouts), and the two must
agree on:

1. every result's value, dtype and shape;
2. every argument afterwards (and the memory around a strided argument, untouched);
3. which results share memory with which arguments and with each other;
4. all of that again after the caller writes through every writeable result (``+= 7``);
5. all of that on a second call of the same jitted function with the arguments in other
   layouts (the cached call, or a new signature).

A second test draws scatter writes with repeated indices (``y[idx] = v * w``,
``y[idx] += v``) and checks ``grad`` against finite differences of the NumPy function,
with the indices traced and constant.

The program builder takes a *chooser* (hypothesis' draws here, a seeded ``random.Random``
in ``bench/explore_views.py``), so the explore runner draws the same kind of programs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy_compare import numeric_grad

import tracejit as tj

EXAMPLES = {"reference": 100, "cpu": 12, "cuda": 12}  # the CI draw, per backend
GRAD_EXAMPLES = {"reference": 40, "cpu": 4, "cuda": 4}
SETTINGS = settings(deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------- choosers


class HypothesisChooser:
    """Choices drawn by hypothesis, so that it shrinks them (towards the first option)."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, options):
        return self.draw(st.sampled_from(list(options)))

    def chance(self, percent: int) -> bool:
        """True about ``percent`` times in 100 (more often: hypothesis leans to small
        numbers; shrinks to True)."""
        return self.draw(st.integers(0, 99)) < percent


class RandomChooser:
    """Choices from a seeded ``random.Random``: fast, and reproducible from the seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options):
        return self.rng.choice(list(options))

    def chance(self, percent: int) -> bool:
        return self.rng.randrange(100) < percent


# --------------------------------------------------------------------------- arguments


def strided(x: np.ndarray, axis: int) -> np.ndarray:
    """``x``'s values as every other element along ``axis`` of a larger buffer, whose
    other elements are 99 (a read or write of the wrong elements shows)."""
    shape = list(x.shape)
    shape[axis] *= 2
    buf = np.full(shape, 99, x.dtype)
    key = (slice(None),) * axis + (slice(None, None, 2),)
    buf[key] = x
    return buf[key]


LAYOUTS = ("C", "F", "T", "rows", "cols")


@dataclass(frozen=True)
class Arg:
    """An array argument: its values are ``np.arange`` of its shape, shifted by ``k``."""

    name: str
    dtype: str  # "f8" or "i8"
    shape: tuple[int, ...]
    k: int

    def values(self) -> np.ndarray:
        n = math.prod(self.shape)
        if self.dtype == "f8":
            return np.arange(n, dtype=np.float64).reshape(self.shape) * 0.5 - (self.k + 1)
        return np.arange(n, dtype=np.int64).reshape(self.shape) - 2 * (self.k + 1)

    def values_code(self) -> str:
        n = math.prod(self.shape)
        if self.dtype == "f8":
            return f"(np.arange({n}.0).reshape({self.shape}) * 0.5 - {self.k + 1})"
        return f"(np.arange({n}).reshape({self.shape}) - {2 * (self.k + 1)})"

    @staticmethod
    def usable(layout: str, ndim: int) -> str:
        """The layout itself, or "C" where it means nothing for this many dimensions."""
        if layout in ("T", "cols") and ndim < 2:
            return "C"
        return layout

    def make(self, layout: str) -> tuple[np.ndarray, np.ndarray]:
        """The argument in ``layout``, and the buffer holding it (compared afterwards)."""
        x = self.values()
        layout = self.usable(layout, x.ndim)
        if layout == "C":
            return x, x
        if layout == "F":
            a = np.asfortranarray(x)
            return a, a
        if layout == "T":
            a = np.ascontiguousarray(x.T).T
            return a, a
        a = strided(x, 0 if layout == "rows" else 1)
        return a, a.base

    def code(self, layout: str) -> str:
        v = self.values_code()
        layout = self.usable(layout, len(self.shape))
        text = {"C": v, "F": f"np.asfortranarray({v})", "T": f"np.ascontiguousarray({v}.T).T",
                "rows": f"strided({v}, axis=0)", "cols": f"strided({v}, axis=1)"}[layout]
        return f"{self.name} = {text}"


@dataclass(frozen=True)
class IntArg:
    """An integer argument, traced under ``jit``: a Python int or an ``np.int64``."""

    name: str
    value: int
    kind: str  # "int" or "np.int64"

    def make(self):
        return int(self.value) if self.kind == "int" else np.int64(self.value)

    def code(self) -> str:
        return f"{self.name} = {self.value if self.kind == 'int' else f'np.int64({self.value})'}"


# --------------------------------------------------------------------------- steps


def _slice_text(s: slice) -> str:
    text = ("" if s.start is None else str(s.start)) + ":" + ("" if s.stop is None else str(s.stop))
    return text + ("" if s.step is None else f":{s.step}")


@dataclass(frozen=True)
class Key:
    """A basic index: slices, ints, ``None``, ``...`` and names of integer arguments."""

    parts: tuple

    def names(self) -> set[str]:
        return {p for p in self.parts if isinstance(p, str)}

    def get(self, env: dict):
        key = tuple(env[p] if isinstance(p, str) else p for p in self.parts)
        return key[0] if len(key) == 1 else key

    def text(self) -> str:
        texts = []
        for p in self.parts:
            if isinstance(p, slice):
                texts.append(_slice_text(p))
            elif p is None:
                texts.append("None")
            elif p is Ellipsis:
                texts.append("...")
            else:
                texts.append(str(p))
        return ", ".join(texts) if texts else "()"


@dataclass(frozen=True)
class Value:
    """A value written: a constant, an array as it is (``src``), ``src * mul + add`` or
    ``src.sum() * mul``."""

    how: str  # "const", "ref", "expr", "sum"
    const: float | int = 0
    src: str = ""
    mul: float | int = 1
    add: float | int = 0

    def names(self) -> set[str]:
        return {self.src} if self.src else set()

    def get(self, env: dict):
        if self.how == "const":
            return self.const
        x = env[self.src]
        if self.how == "ref":
            return x
        if self.how == "expr":
            return x * self.mul + self.add
        return x.sum() * self.mul

    def text(self) -> str:
        if self.how == "const":
            return repr(self.const)
        if self.how == "ref":
            return self.src
        if self.how == "expr":
            return f"{self.src} * {self.mul!r} + {self.add!r}"
        return f"{self.src}.sum() * {self.mul!r}"


@dataclass(frozen=True)
class Make:
    """``name = ...``: a new array (``how``: zeros, zeros_f, exp_t, empty_like, copy)."""

    name: str
    how: str
    src: str = ""
    shape: tuple = ()

    kind = "make"

    def names(self) -> set[str]:
        return {self.src} if self.src else set()

    def run(self, env: dict) -> None:
        if self.how == "zeros":
            env[self.name] = np.zeros(self.shape)
        elif self.how == "zeros_f":
            env[self.name] = np.zeros(self.shape, order="F")
        elif self.how == "exp_t":
            env[self.name] = np.exp(env[self.src].T)
        elif self.how == "empty_like":
            x = env[self.src]
            e = np.empty_like(x)
            e[...] = x * 3 + 1 if e.dtype.kind == "i" else x * 1.5 + 0.25
            env[self.name] = e
        else:
            env[self.name] = env[self.src].copy()

    def lines(self, env: dict | None = None) -> list[str]:
        n, s = self.name, self.src
        if self.how == "zeros":
            return [f"{n} = np.zeros({self.shape})"]
        if self.how == "zeros_f":
            return [f"{n} = np.zeros({self.shape}, order='F')"]
        if self.how == "exp_t":
            return [f"{n} = np.exp({s}.T)"]
        if self.how == "empty_like":
            fill = "3 + 1" if env is not None and env[s].dtype.kind == "i" else "1.5 + 0.25"
            return [f"{n} = np.empty_like({s})", f"{n}[...] = {s} * {fill}"]
        return [f"{n} = {s}.copy()"]


@dataclass(frozen=True)
class View:
    """``name = src<op>``: op is key, T, transpose, reshape, ravel, newaxis or squeeze."""

    name: str
    src: str
    op: str
    key: Key | None = None
    shape: tuple = ()  # reshape's argument, or transpose's axes

    kind = "view"

    def names(self) -> set[str]:
        return {self.src} | (self.key.names() if self.key else set())

    def run(self, env: dict) -> None:
        x = env[self.src]
        if self.op == "key":
            y = x[self.key.get(env)]
        elif self.op == "T":
            y = x.T
        elif self.op == "transpose":
            y = x.transpose(self.shape)
        elif self.op == "reshape":
            y = x.reshape(self.shape)
        elif self.op == "ravel":
            y = x.ravel()
        elif self.op == "newaxis":
            y = x[None]
        else:
            y = x.squeeze()
        env[self.name] = y

    def lines(self, env: dict | None = None) -> list[str]:
        n, s = self.name, self.src
        text = {"key": lambda: f"{s}[{self.key.text() if self.key else ''}]",
                "T": lambda: f"{s}.T", "transpose": lambda: f"{s}.transpose({self.shape})",
                "reshape": lambda: f"{s}.reshape({self.shape})", "ravel": lambda: f"{s}.ravel()",
                "newaxis": lambda: f"{s}[None]", "squeeze": lambda: f"{s}.squeeze()"}[self.op]()
        return [f"{n} = {text}"]


@dataclass(frozen=True)
class Write:
    """A write through ``target``: how is set_all, set_key, iadd, out_add, copyto or fill."""

    target: str
    how: str
    value: Value
    key: Key | None = None

    kind = "write"
    name = None

    def names(self) -> set[str]:
        return {self.target} | self.value.names() | (self.key.names() if self.key else set())

    def run(self, env: dict) -> None:
        x, value = env[self.target], self.value.get(env)
        if self.how == "set_all":
            x[...] = value
        elif self.how == "set_key":
            x[self.key.get(env)] = value
        elif self.how == "iadd":
            x += value  # a NumPy scalar is rebound, as Python does
            env[self.target] = x
        elif self.how == "out_add":
            np.add(x, value, out=x)
        elif self.how == "copyto":
            np.copyto(x, value)
        else:
            x.fill(value)

    def lines(self, env: dict | None = None) -> list[str]:
        t, v = self.target, self.value.text()
        key = self.key.text() if self.key else ""
        return [{"set_all": f"{t}[...] = {v}", "set_key": f"{t}[{key}] = {v}",
                 "iadd": f"{t} += {v}", "out_add": f"np.add({t}, {v}, out={t})",
                 "copyto": f"np.copyto({t}, {v})", "fill": f"{t}.fill({v})"}[self.how]]


# --------------------------------------------------------------------------- programs


@dataclass
class Program:
    """Arguments, integer arguments, steps and the names returned; ``layouts`` (one per
    argument) for the first call and ``layouts2`` for the second. Its ``repr`` is the
    program as Python."""

    args: list[Arg]
    ints: list[IntArg] = field(default_factory=list)
    steps: list = field(default_factory=list)
    returns: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ()
    layouts2: tuple[str, ...] = ()

    def make_args(self, layouts) -> tuple[list, list, list]:
        """Fresh arrays in ``layouts``, their buffers, and the integer arguments."""
        made = [a.make(lay) for a, lay in zip(self.args, layouts, strict=True)]
        return [m[0] for m in made], [m[1] for m in made], [i.make() for i in self.ints]

    def function(self):
        names = [a.name for a in self.args] + [i.name for i in self.ints]
        steps, returns = list(self.steps), tuple(self.returns)

        def program(*values):
            env = dict(zip(names, values, strict=True))
            for step in steps:
                step.run(env)
            return tuple(env[r] for r in returns)

        return program

    def run_numpy(self, layouts) -> dict:
        """The environment after the steps on NumPy (raises what NumPy raises, and
        TypeError for a write into a NumPy scalar, which programs never draw)."""
        arrays, _, ints = self.make_args(layouts)
        env = dict(zip([a.name for a in self.args] + [i.name for i in self.ints],
                       arrays + ints, strict=True))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error")
            for step in self.steps:
                if isinstance(step, Write) and not isinstance(env[step.target], np.ndarray):
                    raise TypeError(f"a write into {step.target}, not an array")
                step.run(env)
        return env

    def source(self) -> str:
        env = self.run_numpy(self.layouts)
        names = [a.name for a in self.args] + [i.name for i in self.ints]
        lines = [f"def program({', '.join(names)}):"]
        for step in self.steps:
            lines += ["    " + line for line in step.lines(env)]
        lines.append(f"    return ({', '.join(self.returns)},)")
        calls = [("s 1 and 2", self.layouts)] if self.layouts == self.layouts2 else [
            (" 1", self.layouts), (" 2", self.layouts2)]
        for call, lays in calls:
            lines.append(f"# call{call}:")
            lines += ["#   " + a.code(lay) for a, lay in zip(self.args, lays, strict=True)]
        lines += ["#   " + i.code() for i in self.ints]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "\n" + self.source()

    def _repr_pretty_(self, printer, cycle) -> None:  # how hypothesis prints a draw
        printer.text(repr(self))

    def without(self, index: int) -> Program | None:
        """The program without step ``index`` (None if a later step needs its name)."""
        step = self.steps[index]
        rest = self.steps[:index] + self.steps[index + 1:]
        if step.name is not None and (any(step.name in s.names() for s in rest)
                                      or step.name in self.returns):
            return None
        return self.pruned(rest, self.returns)

    def pruned(self, steps: list, returns: tuple) -> Program:
        """The program with these steps and returns, and only the arguments they name."""
        used = set(returns).union(*(s.names() for s in steps))
        keep = [k for k, a in enumerate(self.args) if a.name in used]
        if not keep:  # a program needs no argument, but keep one to call it with
            keep = [0]
        return Program([self.args[k] for k in keep], [i for i in self.ints if i.name in used],
                       steps, returns, tuple(self.layouts[k] for k in keep),
                       tuple(self.layouts2[k] for k in keep))


# --------------------------------------------------------------------------- drawing


def draw_shape(c, ndim: int | None = None, size0: bool = True) -> tuple[int, ...]:
    ndim = c.integer(1, 3) if ndim is None else ndim
    if c.chance(25):  # square: where a swapped axis hides
        shape = [c.integer(1, 4)] * ndim
    else:
        shape = [c.integer(1, 4) for _ in range(ndim)]
    if size0 and not c.chance(90):  # (hypothesis leans to True: size 0 stays rare)
        shape[c.integer(0, ndim - 1)] = 0
    return tuple(shape)


def draw_slice(c, n: int) -> slice:
    form = c.choice(["all", "step", "range", "reverse"])
    if form == "all":
        return slice(None)
    if form == "reverse":
        return slice(None, None, c.choice([-1, -2]))
    step = c.choice([None, 2, 3, -1, -2]) if form == "step" else None
    ends = [None] + list(range(-n - 1, n + 2))
    return slice(c.choice(ends), c.choice(ends), step)


def draw_int(c, prog: Program, n: int):
    """An index into an axis of length ``n`` > 0: a constant, or a new integer argument."""
    i = c.integer(-n, n - 1)
    if not c.chance(50):
        return i
    name = f"i{len(prog.ints)}"
    prog.ints.append(IntArg(name, i, c.choice(["int", "np.int64"])))
    return name


def draw_key(c, prog: Program, shape: tuple) -> Key:
    if not shape:
        return Key((c.choice([Ellipsis, None]),))
    parts = []
    leading = c.chance(20)  # x[..., k] rather than x[k]
    axes = list(reversed(shape)) if leading else list(shape)
    for n in axes[:c.integer(1, len(shape))]:
        if not c.chance(90):
            parts.append(None)
        if n > 0 and c.chance(40):
            parts.append(draw_int(c, prog, n))
        else:
            parts.append(draw_slice(c, n))
    if leading:
        parts = [Ellipsis] + parts[::-1]
    return Key(tuple(parts))


def draw_reshape(c, shape: tuple) -> tuple:
    size = math.prod(shape)
    if c.chance(30):
        return (-1,)
    ndim = c.integer(1, 3)
    if size == 0:
        new = [c.integer(0, 3) for _ in range(ndim)]
        new[c.integer(0, ndim - 1)] = 0
        return tuple(new)
    new, left = [], size
    for _ in range(ndim - 1):
        divisors = [d for d in range(1, left + 1) if left % d == 0]
        d = c.choice(divisors)
        new.append(d)
        left //= d
    new.append(left)
    order = list(range(ndim))
    if ndim > 1 and c.chance(50):
        order = order[::-1]
    new = [new[k] for k in order]
    if c.chance(30):
        new[c.integer(0, ndim - 1)] = -1
    return tuple(new)


def _values(env: dict, prog: Program) -> dict:
    """The arrays and NumPy scalars of ``env``, less the integer arguments."""
    ints = {i.name for i in prog.ints}
    return {n: x for n, x in env.items()
            if n not in ints and isinstance(x, (np.ndarray, np.generic))}


def draw_value(c, env: dict, target_shape: tuple, int_target: bool) -> Value:
    """A value for a write into ``target_shape``: constant, or computed from a value in
    ``env`` that broadcasts (an int target gets int values only)."""
    def fits(x) -> bool:
        if int_target and np.result_type(x).kind != "i":
            return False
        try:
            return np.broadcast_shapes(np.shape(x), target_shape) == target_shape
        except ValueError:
            return False

    how = c.choice(["const", "expr", "ref", "sum"])
    if how == "const":
        return Value("const", c.choice([2, -3, 5]) if int_target else c.choice([2.5, -0.75, 4.0]))
    if how == "sum":
        pool = [n for n, x in env.items() if not int_target or np.result_type(x).kind == "i"]
        if not pool:
            return Value("const", 1 if int_target else 1.5)
        return Value("sum", src=c.choice(sorted(pool)), mul=3 if int_target else 1.5)
    pool = sorted(n for n, x in env.items() if fits(x))
    if not pool:
        return Value("const", 1 if int_target else 1.5)
    src = c.choice(pool)
    if how == "ref":
        return Value("ref", src=src)
    return Value("expr", src=src, mul=3 if int_target else 1.5, add=-1 if int_target else 0.25)


def draw_step(c, prog: Program, env: dict, k: int):
    env = _values(env, prog)
    arrays = sorted(n for n, x in env.items() if isinstance(x, np.ndarray))
    values = sorted(env)
    newest = next((s.name for s in reversed(prog.steps) if s.name), "")
    kind = c.choice(["view", "write", "view", "write", "view", "write", "make"])
    name = f"v{k}"
    if kind == "make":
        how = c.choice(["copy", "zeros", "zeros_f", "exp_t", "empty_like"])
        if how in ("zeros", "zeros_f"):
            return Make(name, how, shape=draw_shape(c))
        return Make(name, how, src=c.choice(arrays))
    if kind == "view":
        # views of views: mostly of the newest value
        src = newest if newest in values and c.chance(50) else c.choice(values)
        x = env[src]
        op = c.choice(["key", "reshape", "ravel", "T", "key", "reshape", "ravel", "key",
                       "newaxis", "squeeze", "transpose"])
        if op == "key":
            return View(name, src, op, key=draw_key(c, prog, np.shape(x)))
        if op == "reshape":
            return View(name, src, op, shape=draw_reshape(c, np.shape(x)))
        if op == "transpose" and isinstance(x, np.ndarray):
            return View(name, src, op, shape=c.choice(itertools.permutations(range(x.ndim))))
        return View(name, src, "T" if op == "transpose" else op)
    target = newest if newest in arrays and c.chance(50) else c.choice(arrays)
    x = env[target]
    int_target = x.dtype.kind == "i"
    how = c.choice(["set_key", "set_all", "iadd", "out_add", "copyto", "fill"])
    if how == "fill":
        return Write(target, how, Value("const", c.choice([7, -1]) if int_target
                                        else c.choice([7.5, -1.25])))
    if how == "set_key":
        key = draw_key(c, prog, x.shape)
        region = x[key.get({**env, **{i.name: i.value for i in prog.ints}})]
        return Write(target, how, draw_value(c, env, np.shape(region), int_target), key)
    return Write(target, how, draw_value(c, env, x.shape, int_target))


def build(c) -> Program:
    """A program drawn by chooser ``c``; NumPy runs it without an error or a warning."""
    prog = Program([])
    for k in range(c.integer(1, 3)):
        shape = draw_shape(c)
        prog.args.append(Arg(f"a{k}", c.choice(["f8", "f8", "i8"]), shape, k))
    prog.layouts = tuple(c.choice(LAYOUTS) for _ in prog.args)
    prog.layouts2 = tuple(c.choice(LAYOUTS) for _ in prog.args)
    env = prog.run_numpy(prog.layouts)
    for k in range(c.integer(1, 8)):
        ints = list(prog.ints)
        step = draw_step(c, prog, env, k)
        prog.steps.append(step)
        try:
            env = prog.run_numpy(prog.layouts)
        except Exception:  # NumPy refuses it (a cast, say): left out
            prog.steps.pop()
            prog.ints = ints
            env = prog.run_numpy(prog.layouts)
    names = sorted(_values(env, prog))
    returns = [c.choice(names) for _ in range(c.integer(1, 4))]
    newest = next((s.name for s in reversed(prog.steps) if s.name), "")
    if newest in names and c.chance(50):
        returns[0] = newest
    prog.returns = tuple(dict.fromkeys(returns)) if c.chance(80) else tuple(returns)
    return prog


@st.composite
def programs(draw) -> Program:
    return build(HypothesisChooser(draw))


# --------------------------------------------------------------------------- comparing


def _same(got, want) -> str | None:
    """Why ``got`` is not ``want`` (value, dtype, shape), or None."""
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype != w.dtype:
        return f"dtype {g.dtype} != NumPy's {w.dtype}"
    if g.shape != w.shape:
        return f"shape {g.shape} != NumPy's {w.shape}"
    if w.dtype.kind == "f":
        finite = np.abs(w[np.isfinite(w)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        ok = np.allclose(g, w, rtol=1e-9, atol=1e-9 * scale, equal_nan=True)
    else:
        ok = np.array_equal(g, w)
    if not ok:
        return f"tracejit {g.tolist()} != NumPy's {w.tolist()}"
    return None


def _array(x) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0


def _compare_state(names, got, want, got_args, want_args, got_bufs, want_bufs, when,
                   scalars: bool = True) -> list:
    """The differences between the results and arguments (``scalars``: 0-d results too; a
    0-d result is a NumPy scalar under jit, so a later write to its base cannot reach it)."""
    diffs = []
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if not scalars and np.ndim(w) == 0:
            continue
        why = _same(g, w)
        if why:
            diffs.append(f"{when}: result {k} ({names[k]}): {why}")
    for k, (g, w) in enumerate(zip(got_bufs, want_bufs, strict=True)):
        why = _same(g, w)
        if why:
            diffs.append(f"{when}: argument {k} (its buffer): {why}")
    for k, w in enumerate(want):
        if not _array(w) or not _array(got[k]):
            continue
        for j, (ga, wa) in enumerate(zip(got_args, want_args, strict=True)):
            s_got, s_want = np.shares_memory(got[k], ga), np.shares_memory(w, wa)
            if s_got != s_want:
                diffs.append(f"{when}: shares_memory(result {k} ({names[k]}), argument {j}) is "
                             f"{s_got}, NumPy's {s_want}")
        for j in range(k + 1, len(want)):
            if _array(want[j]) and _array(got[j]):
                s_got, s_want = np.shares_memory(got[k], got[j]), np.shares_memory(w, want[j])
                if s_got != s_want:
                    diffs.append(f"{when}: shares_memory(result {k} ({names[k]}), result {j} "
                                 f"({names[j]})) is {s_got}, NumPy's {s_want}")
    return diffs


def check_call(prog: Program, f, layouts, ignore=None) -> list[str]:
    """What differs between NumPy and the jitted ``f`` on the arguments in ``layouts``
    (less the differences ``ignore(text)`` is true of: for the explore runner, to look
    past a known cause)."""
    def kept(diffs):
        return [d for d in diffs if ignore is None or not ignore(d)]

    want_args, want_bufs, ints = prog.make_args(layouts)
    got_args, got_bufs, got_ints = prog.make_args(layouts)
    with np.errstate(all="ignore"):
        want = prog.function()(*want_args, *ints)
    try:
        with np.errstate(all="ignore"):
            got = f(*got_args, *got_ints)
    except Exception as e:  # noqa: BLE001 - NumPy ran it: any error is a difference
        return [f"tracejit raised {type(e).__name__}: {str(e)[:300]}"]
    if not isinstance(got, tuple) or len(got) != len(want):
        return [f"tracejit returned {got!r}, not a tuple of {len(want)}"]
    names = prog.returns
    diffs = kept(_compare_state(names, got, want, got_args, want_args, got_bufs, want_bufs,
                                "after"))
    if diffs:
        return diffs
    for k, (g, w) in enumerate(zip(got, want, strict=True)):  # the caller writes through them
        if not _array(w) or not w.flags.writeable:
            continue
        if not isinstance(g, np.ndarray) or not g.flags.writeable:
            return [f"result {k} ({names[k]}) is not writeable, NumPy's is"]
        w += 7
        g += 7
    return kept(_compare_state(names, got, want, got_args, want_args, got_bufs, want_bufs,
                               "after the caller writes += 7 through each result",
                               scalars=False))


def check(prog: Program, backend: str, ignore=None) -> list[str]:
    """The differences on two calls of one jitted function: ``prog.layouts``, then
    ``prog.layouts2``."""
    f = tj.jit(prog.function(), backend=backend)
    diffs = check_call(prog, f, prog.layouts, ignore)
    if diffs:
        return ["call 1: " + d for d in diffs]
    return ["call 2: " + d for d in check_call(prog, f, prog.layouts2, ignore)]


# --------------------------------------------------------------------------- shrinking
# Hypothesis shrinks the choices it drew; this shrinks the program itself (a step or a view
# left out, plain layouts, constants for traced integers and written values), for the
# message of a failing test and for bench/explore_views.py's records.


def kind(diff: str) -> str:
    """What sort of difference: the text without its numbers, values and names."""
    text = re.sub(r"^call \d: ", "", diff)
    text = re.sub(r"tracejit raised (\w+):.*", r"tracejit raised \1", text, flags=re.S)
    text = re.sub(r"tracejit \S.* != NumPy's .*", "values differ", text, flags=re.S)
    text = re.sub(r"\(v\d+\)|\(a\d+\)", "", text)
    text = re.sub(r"(result|argument) \d+", r"\1", text)
    text = re.sub(r"dtype \S+ != NumPy's \S+", "dtype differs", text)
    text = re.sub(r"shape \S.* != NumPy's .*", "shape differs", text)
    return re.sub(r"\s+", " ", text).strip()


def _valid(prog: Program) -> bool:
    """Whether NumPy runs ``prog`` (in both calls' layouts) without an error or warning."""
    try:
        prog.run_numpy(prog.layouts)
        prog.run_numpy(prog.layouts2)
    except Exception:  # noqa: BLE001
        return False
    return True


def _constant_key(key: Key | None, ints: dict) -> Key | None:
    """``key`` with its integer arguments as constants (None if it has none)."""
    if key is None or not key.names():
        return None
    return dataclasses.replace(key, parts=tuple(ints[p] if isinstance(p, str) else p
                                                for p in key.parts))


def _renamed(obj, old: str, new: str):
    """``obj`` (a step or a Value) with the value ``old`` read as ``new``."""
    changes = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if f.name in ("src", "target") and v == old:
            changes[f.name] = new
        elif isinstance(v, Value):
            changes[f.name] = _renamed(v, old, new)
    return dataclasses.replace(obj, **changes)


def candidates(prog: Program):
    """Simpler programs than ``prog``, simplest first."""
    for k in range(len(prog.steps) - 1, -1, -1):
        smaller = prog.without(k)
        if smaller is not None:
            yield smaller
    for k in range(len(prog.steps) - 1, -1, -1):  # a view left out: its source read instead
        step = prog.steps[k]
        if isinstance(step, View):
            rest = [_renamed(s, step.name, step.src) for s in prog.steps[k + 1:]]
            returns = tuple(step.src if r == step.name else r for r in prog.returns)
            yield prog.pruned(prog.steps[:k] + rest, returns)
    if len(prog.returns) > 1:
        for k in range(len(prog.returns)):
            yield prog.pruned(prog.steps, prog.returns[:k] + prog.returns[k + 1:])
    if prog.layouts2 != prog.layouts:
        yield dataclasses.replace(prog, layouts2=prog.layouts)
    for k, lay in enumerate(prog.layouts):
        if lay != "C":
            for simpler in ("C", "F", "T", "rows"):
                if simpler == lay:
                    break
                lays = prog.layouts[:k] + (simpler,) + prog.layouts[k + 1:]
                yield dataclasses.replace(prog, layouts=lays, layouts2=lays)
    ints = {i.name: i.value for i in prog.ints}
    for k, step in enumerate(prog.steps):  # traced integers made constants
        key = _constant_key(getattr(step, "key", None), ints)
        if key is not None:
            steps = prog.steps[:k] + [dataclasses.replace(step, key=key)] + prog.steps[k + 1:]
            yield prog.pruned(steps, prog.returns)
    for k, step in enumerate(prog.steps):  # written values made constants
        if isinstance(step, Write) and step.value.how != "const":
            steps = prog.steps[:k] + [dataclasses.replace(step, value=Value("const", 2))]
            yield prog.pruned(steps + prog.steps[k + 1:], prog.returns)
    for k, arg in enumerate(prog.args):  # smaller arguments
        for d, n in enumerate(arg.shape):
            if n > 1:
                shape = arg.shape[:d] + (n - 1,) + arg.shape[d + 1:]
                args = prog.args[:k] + [dataclasses.replace(arg, shape=shape)] + prog.args[k + 1:]
                yield dataclasses.replace(prog, args=args)


def shrink(prog: Program, check, diffs: list[str], budget: int = 150):
    """A smaller program whose first difference (``check(program)``: a list of them) is of
    the same kind as ``diffs[0]``, and its differences; at most ``budget`` tries."""
    want, tries = kind(diffs[0]), 0
    improved = True
    while improved and tries < budget:
        improved = False
        for smaller in candidates(prog):
            if not _valid(smaller):
                continue
            tries += 1
            found = check(smaller)
            if found and kind(found[0]) == want:
                prog, diffs, improved = smaller, found, True
                break
            if tries >= budget:
                break
    return prog, diffs


def test_drawn_views_and_writes_match_numpy(backend):
    """Drawn chains of views and writes give NumPy's results, arguments and sharing."""
    @settings(SETTINGS, max_examples=EXAMPLES.get(backend, 12))
    @given(prog=programs())
    def test(prog):
        diffs = check(prog, backend)
        if diffs and _final_example():
            small, small_diffs = shrink(prog, lambda p: check(p, backend), diffs, budget=60)
            diffs += ["", "shrunk to:", small.source(), *small_diffs]
        assert not diffs, "\n".join(diffs)

    test()


def _final_example() -> bool:
    """Whether hypothesis runs the example it reports (shrunk as far as it goes)."""
    try:
        from hypothesis.control import current_build_context

        return current_build_context().is_final
    except Exception:  # noqa: BLE001 - another hypothesis: shrink every failing example
        return True


# --------------------------------------------------------------------------- gradients


@dataclass(frozen=True)
class Scatter:
    """``y[idx] <op> value``: op is "=", "+=", "-=" or "*="; value an expression in v, w."""

    op: str
    idx: tuple[int, ...]
    value: str


EXPRESSIONS = {"v": lambda v, w: v, "v * w": lambda v, w: v * w,
               "w * 2.0": lambda v, w: w * 2.0, "v * v": lambda v, w: v * v}


@dataclass
class GradProgram:
    """``y = <init>``; scatter writes with (repeated) indices; ``loss = sum(y * c)``, a
    function of ``v``, ``w`` (the values written) and ``x`` (``y``'s start, for "x")."""

    n: int
    m: int
    init: str  # "zeros", "half" (np.full(n, 0.5)) or "x" (x.copy())
    writes: list[Scatter]
    seed: int

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """v, w, x and c."""
        rng = np.random.default_rng(self.seed)
        return (rng.uniform(-1, 1, self.m), rng.uniform(-1, 1, self.m),
                rng.uniform(-1, 1, self.n), rng.uniform(-1, 1, self.n))

    def loss(self, traced_idx: bool):
        n, init, writes = self.n, self.init, list(self.writes)
        c = self.inputs()[3]
        consts = [np.array(s.idx, dtype=np.int64) for s in writes]

        def loss(v, w, x, *idxs):
            y = np.zeros(n) if init == "zeros" else np.full(n, 0.5) if init == "half" else x.copy()
            for s, idx in zip(writes, idxs if traced_idx else consts, strict=True):
                value = EXPRESSIONS[s.value](v, w)
                if s.op == "=":
                    y[idx] = value
                elif s.op == "+=":
                    y[idx] += value
                elif s.op == "-=":
                    y[idx] -= value
                else:
                    y[idx] *= value
            return np.sum(y * c)

        return loss

    def __repr__(self) -> str:
        start = {"zeros": f"np.zeros({self.n})", "half": f"np.full({self.n}, 0.5)",
                 "x": "x.copy()"}[self.init]
        lines = [f"\nv, w, x, c = {self.inputs()}  # rng seed {self.seed}",
                 "def loss(v, w, x):", f"    y = {start}"]
        lines += [f"    y[{list(s.idx)}] {s.op} {s.value}" for s in self.writes]
        lines.append("    return np.sum(y * c)")
        return "\n".join(lines)


@st.composite
def grad_programs(draw) -> GradProgram:
    n, m = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    writes = []
    for _ in range(draw(st.integers(1, 3))):
        idx = draw(st.lists(st.integers(-n, n - 1), min_size=m, max_size=m))
        if m > 1 and draw(st.booleans()):  # a duplicate for sure, maybe written negative
            j = draw(st.integers(1, m - 1))
            same = idx[draw(st.integers(0, j - 1))] % n
            idx[j] = same - n if draw(st.booleans()) else same
        writes.append(Scatter(draw(st.sampled_from(["=", "+=", "-=", "*="])), tuple(idx),
                              draw(st.sampled_from(sorted(EXPRESSIONS)))))
    return GradProgram(n, m, draw(st.sampled_from(["zeros", "half", "x"])), writes,
                       draw(st.integers(0, 2**16)))


def check_grad(prog: GradProgram, backend: str) -> list[str]:
    """What differs between ``grad`` (indices traced, then constant) and finite differences
    of the NumPy function."""
    v, w, x, _ = prog.inputs()
    want = numeric_grad(prog.loss(traced_idx=False), [v, w, x])
    diffs = []
    idxs = [np.array(s.idx, dtype=np.int64) for s in prog.writes]
    for traced in (True, False):
        args = (v.copy(), w.copy(), x.copy(), *(idxs if traced else ()))
        try:
            got = tj.grad(prog.loss(traced), argnums=(0, 1, 2), backend=backend)(*args)
        except Exception as e:  # noqa: BLE001
            diffs.append(f"indices {'traced' if traced else 'constant'}: tracejit raised "
                         f"{type(e).__name__}: {str(e)[:300]}")
            continue
        for name, g, fd in zip("vwx", got, want, strict=True):
            if not np.allclose(g, fd, rtol=1e-6, atol=1e-7):
                diffs.append(f"indices {'traced' if traced else 'constant'}: d loss / d {name}"
                             f" = {np.round(g, 6).tolist()}, finite differences "
                             f"{np.round(fd, 6).tolist()}")
    return diffs


def test_drawn_scatter_gradients_match_finite_differences(backend):
    """Gradients of scatter writes with repeated indices, traced and constant, are those
    of NumPy's semantics: the last assignment wins, ``+=`` updates each index once."""
    @settings(SETTINGS, max_examples=GRAD_EXAMPLES.get(backend, 8))
    @given(prog=grad_programs())
    def test(prog):
        diffs = check_grad(prog, backend)
        assert not diffs, "\n".join(diffs)

    test()
