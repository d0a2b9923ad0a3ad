"""Theano's ``scan``, taps included, as one ``scan`` node (``trace/loops.py``).

Theano code ports by changing ``theano.scan`` to ``tracejit.scan`` and ``T``/``theano.dot``
to ``np``. The taps map onto a plain ``(carry, x) -> (carry, y)`` loop:

- a sequence's taps become one scanned input per tap, each a shifted slice of the sequence
  (taps ``[-4, 0]`` over ``u``: the step sees ``u[t]`` and ``u[t + 4]``, for
  ``len(u) - 4`` steps, as Theano computes them, pretending tap 0 is always used);
- an output fed back with tap ``-1`` only carries its last value; one with other taps
  carries a window of its last ``k = -min(taps)`` values (the initial value has shape
  ``(k, ...)``; Theano reads its first ``k`` entries), and each step shifts the new value in;
- an output whose ``outputs_info`` entry is None is only stacked, never fed back;
- non-sequences are values the body closes over (the loop's consts): no copy per step.

``go_backwards`` reverses the (sliced) sequences; outputs stay in iteration order, as in
Theano. ``truncate_gradient=k`` is the loop's ``truncate``: the backward loop runs over the
last ``k`` steps only, the cotangents of earlier outputs are dropped, as Theano's truncated
BPTT does. Where an output's taps reach from those ``k`` steps back into its initial
values, Theano gives those initial values the gradient of the reads; the loop is then
split in two (the first ``n - k`` steps without gradient) so that they get it here too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ad import stop_gradient
from .errors import LoopError
from .locations import SourceLocation
from .trace import core
from .trace import loops as _loops
from .trace.tracer import Tracer


@dataclass(frozen=True)
class _Seq:
    """A sequence and its taps (the step sees ``value[t + tap]`` for each)."""

    value: Any
    taps: tuple[int, ...]

    @property
    def span(self) -> tuple[int, int]:
        """The lowest and highest tap, counting tap 0 as used (Theano's cut)."""
        return min(0, *self.taps), max(0, *self.taps)


@dataclass(frozen=True)
class _Out:
    """An output: ``taps`` () when it is not fed back; ``index`` its place among fn's."""

    index: int
    initial: Any
    taps: tuple[int, ...]

    @property
    def window(self) -> int:
        """How many past values the loop carries (0: none, 1 with tap -1: the value)."""
        return -min(self.taps) if self.taps else 0

    @property
    def single(self) -> bool:
        """Theano's sit-sot: tap -1 alone, the initial value shaped as one output."""
        return self.taps == (-1,)


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _taps(taps, what: str) -> tuple[int, ...]:
    out = tuple(_as_list(taps))
    for k in out:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise LoopError(f"scan: {what} has taps {list(out)}; taps are Python ints")
    return tuple(int(k) for k in out)


def _sequences(sequences) -> list[_Seq]:
    seqs = []
    for i, s in enumerate(_as_list(sequences)):
        if isinstance(s, dict):
            if "input" not in s:
                raise LoopError(f"scan: sequences[{i}] is a dict without 'input'",
                                hint="write dict(input=u, taps=[-1, 0])")
            taps = _taps(s["taps"], f"sequences[{i}]") if s.get("taps") is not None else (0,)
            s = _Seq(s["input"], taps)
        else:
            s = _Seq(s, (0,))
        if s.taps:  # a sequence with no taps is not read (Theano)
            seqs.append(s)
    return seqs


def _outputs(outputs_info) -> list[_Out]:
    outs = []
    for i, o in enumerate(_as_list(outputs_info)):
        if o is None or (isinstance(o, dict) and not o):
            outs.append(_Out(i, None, ()))
            continue
        if not isinstance(o, dict):
            outs.append(_Out(i, o, (-1,)))
            continue
        initial, taps = o.get("initial"), o.get("taps")
        if initial is None:
            if taps is not None:
                raise LoopError(f"scan: outputs_info[{i}] gives taps {taps} but no initial "
                                "value", hint="add initial=... (shaped (k, ...) for taps "
                                "down to -k), or use None for an output not fed back")
            outs.append(_Out(i, None, ()))
            continue
        taps = _taps(taps, f"outputs_info[{i}]") if taps is not None else (-1,)
        if any(k >= 0 for k in taps):
            raise LoopError(f"scan: outputs_info[{i}] has taps {list(taps)}: an output tap "
                            "must be negative (a step can read only values computed before "
                            "it)", hint="use -1 for the previous step's value")
        outs.append(_Out(i, initial if taps else None, taps))
    return outs


def _static_steps(n_steps) -> int | None:
    if n_steps is None:
        return None
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)):
        raise LoopError(f"scan: n_steps must be a Python int, got {type(n_steps).__name__}",
                        hint="the trip count is part of the compiled program: pass it as "
                        "an int (a static argument of the jitted function)")
    if n_steps < 0:
        raise LoopError(f"scan: n_steps={int(n_steps)} is negative",
                        hint="use go_backwards=True to run through the sequences backwards")
    return int(n_steps)


def scan(fn: Callable, sequences: Any = None, outputs_info: Any = None,
         non_sequences: Any = None, n_steps: int | None = None, *, go_backwards: bool = False,
         truncate_gradient: int = -1, strict: bool = False) -> tuple[Any, dict]:
    """Theano's ``scan``: a loop over sequences with fed-back outputs, traced once.

    Theano code ports by changing ``theano.scan`` to ``tracejit.scan`` and
    ``T``/``theano.dot`` to ``np``. The loop is one ``scan`` node (differentiable, taps
    included); called on arrays it is compiled on first use and cached.

    Args:
        fn: The step. It receives, in order, every tap of every sequence, every tap of
            every output fed back, then the non-sequences (each list in the order
            given), and returns one array or a list of them.
        sequences: Arrays iterated over their leading axis, each an array or
            ``dict(input=u, taps=[-1, 0])``; taps ``[-4, 0]`` over ``u`` show the step
            ``u[t]`` and ``u[t + 4]``, for ``len(u) - 4`` steps, as Theano computes them.
        outputs_info: Per output of ``fn``: its initial value (fed back with tap -1),
            ``dict(initial=v, taps=[-2, -1])`` (``v`` holds the ``k = -min(taps)``
            values before step 0), or None for an output only stacked, not fed back.
        non_sequences: Values the step reads unchanged (no copy per step).
        n_steps: The trip count; by default the shortest sequence after its taps.
        go_backwards: Iterate the (sliced) sequences from the end; outputs stay in
            iteration order, as in Theano.
        truncate_gradient: ``k > 0``: the gradient flows through the last ``k`` steps
            only (Theano's truncated BPTT); -1, through all.
        strict: ``fn`` may use no traced value it is not given as an argument.

    Returns:
        ``(outputs, updates)``: each output of ``fn`` stacked over the steps (the
            array itself when there is one output, else a list), and an empty dict
            (there are no shared variables to update).

    Raises:
        LoopError: Taps that are not ints, an output with taps but no initial value,
            taps asking for more initial values than given, sequences too short for
            ``n_steps``, a step output changing shape or dtype, or with ``strict`` a
            traced value ``fn`` was not given.
        ConcretizationError: Python needs a value the loop computes.

    Note:
        The options after ``n_steps`` are keyword-only: Theano's positional order
        (``truncate_gradient`` before ``go_backwards``) differs from this signature's.

    Example:
        >>> out, updates = tj.scan(lambda x, acc: acc + x, sequences=np.arange(4.0),
        ...                        outputs_info=0.0)
        >>> out, updates
        (array([0., 1., 3., 6.]), {})
        >>> fib, _ = tj.scan(lambda a, b: a + b, n_steps=6,
        ...                  outputs_info=dict(initial=np.array([0.0, 1.0]), taps=[-2, -1]))
        >>> fib
        array([ 1.,  2.,  3.,  5.,  8., 13.])
    """
    seqs, outs = _sequences(sequences), _outputs(outputs_info)
    nonseqs = _as_list(non_sequences)
    steps = _static_steps(n_steps)
    truncate = int(truncate_gradient)
    if getattr(core._state, "stack", None):  # inside a trace: record into it
        return _scan(fn, seqs, outs, nonseqs, steps, bool(go_backwards), truncate,
                     bool(strict)), {}
    arrays: list = []
    spec = (tuple((_hole(s.value, arrays), s.taps) for s in seqs),
            tuple((o.index, _hole(o.initial, arrays), o.taps) for o in outs),
            tuple(_hole(x, arrays) for x in nonseqs))
    run = _compiled(fn, spec, steps, bool(go_backwards), truncate, bool(strict))
    return run(*arrays), {}


def _hole(x, arrays: list):
    """``x``'s place in a compiled scan's arguments: a Python scalar stays a (weakly
    typed) constant of the program, anything else becomes an argument."""
    if x is None or type(x) in (bool, int, float, complex):
        return ("const", type(x).__name__, x)  # the type name: 0, 0.0 and False differ
    arrays.append(x if hasattr(x, "shape") else np.asarray(x))
    return ("arg", len(arrays) - 1)


@functools.lru_cache(maxsize=128)
def _compiled(fn: Callable, spec, steps, go_backwards, truncate, strict) -> Callable:
    """The jitted form of one scan, for calls outside a trace."""
    from .api import jit

    seq_spec, out_spec, nonseq_spec = spec

    def run(*arrays):
        def fill(hole):
            return hole[2] if hole[0] == "const" else arrays[hole[1]]

        seqs = [_Seq(fill(h), taps) for h, taps in seq_spec]
        outs = [_Out(i, fill(h), taps) for i, h, taps in out_spec]
        return _scan(fn, seqs, outs, [fill(h) for h in nonseq_spec], steps, go_backwards,
                     truncate, strict)

    return jit(run)


def _scan(fn: Callable, seqs: list[_Seq], outs: list[_Out], nonseqs: list,
          steps: int | None, go_backwards: bool, truncate: int, strict: bool):
    """``scan`` recorded into the current trace: its outputs (one, or a list)."""
    trace = core.current()

    def tracer(x) -> Tracer:  # an operand as a plain Tracer of this trace (no view)
        return Tracer(trace.lift(x), trace)

    seq_values = [tracer(s.value) for s in seqs]
    n = _trip_count(seqs, seq_values, steps)
    xs = []
    for s, v in zip(seqs, seq_values, strict=True):
        lo, hi = s.span
        for k in s.taps:
            stop = v.shape[0] - (hi - k)
            xs.append(v[stop - n:stop][::-1] if go_backwards else v[k - lo:k - lo + n])
    fed = [o for o in outs if o.taps]
    init = [_initial(o, tracer(o.initial)) for o in fed]
    consts = [tracer(x) for x in nonseqs]
    loop = _Body(fn, fed, len(outs), consts)
    mark = len(trace.nodes)

    split = 0 < truncate < n and any(o.window > n - truncate for o in fed)
    if not split:
        ys = _loops.scan(loop, init, xs, length=n, truncate=truncate, what="scan")[1]
    else:
        ys = _split_scan(loop, init, xs, n, n - truncate)
    if strict:
        _check_strict(trace.nodes[mark:], {c._value for c in consts})
    return ys[0] if len(ys) == 1 else ys


def _trip_count(seqs: list[_Seq], values: list[Tracer], steps: int | None) -> int:
    """Theano's: ``n_steps`` if given (every sequence must be long enough), else the
    shortest sequence after cutting its taps."""
    lengths = []
    for i, (s, v) in enumerate(zip(seqs, values, strict=True)):
        if v.ndim == 0:
            raise LoopError(f"scan: sequences[{i}] is a scalar; a sequence needs a first "
                            "axis to iterate over")
        lo, hi = s.span
        length = v.shape[0] - (hi - lo)
        if length < 0:
            raise LoopError(f"scan: sequences[{i}] has {v.shape[0]} entries along its first "
                            f"axis, but its taps {list(s.taps)} read {hi - lo + 1} entries "
                            "apart", hint="give a longer sequence (each step reads entries "
                            f"t{lo:+d} to t{hi:+d} of it, counting tap 0)")
        if steps is not None and length < steps:
            raise LoopError(f"scan: sequences[{i}] has {v.shape[0]} entries along its first "
                            f"axis; with taps {list(s.taps)} that is {length} steps, fewer "
                            f"than n_steps={steps}", hint="give a longer sequence or a "
                            "smaller n_steps")
        lengths.append(length)
    if steps is not None:
        return steps
    if not lengths:
        raise LoopError("scan: no sequences and no n_steps: the number of steps is unknown",
                        hint="pass n_steps=... or a sequence to iterate over")
    return min(lengths)


def _initial(o: _Out, v: Tracer) -> Tracer:
    """The loop's carry for output ``o`` from its initial value: the value for tap -1
    alone, else the first ``k`` entries, the window of the ``k`` values before step 0."""
    if o.single:
        return v
    k = o.window
    if v.ndim == 0 or v.shape[0] < k:
        raise LoopError(f"scan: outputs_info[{o.index}] has taps {list(o.taps)}, which read "
                        f"the {k} values before the first step, but its initial value has "
                        f"shape {v.shape}: it needs a first axis of at least {k}",
                        hint=f"give initial=x0 with x0.shape[0] == {k}, x0[{k - 1}] being the "
                        "value at tap -1")
    return v if v.shape[0] == k else v[:k]


class _Body:
    """The loop body ``(carry, xs) -> (carry, ys)`` around ``fn``: it hands ``fn`` its
    arguments in Theano's order and shifts each output's window."""

    def __init__(self, fn: Callable, fed: list[_Out], n_out: int, consts: list[Tracer]):
        self.fn, self.fed, self.n_out, self.consts = fn, fed, n_out, consts

    def __call__(self, carry: list, xs: list) -> tuple[list, list]:
        args = list(xs)
        for o, c in zip(self.fed, carry, strict=True):
            args += [c] if o.single else [c[o.window + k] for k in o.taps]
        result = self.fn(*args, *self.consts)
        ys = self._results(result)
        new = []
        for o, c in zip(self.fed, carry, strict=True):
            y = _fit(o, ys[o.index], c if o.single else c[0])
            new.append(y if o.single else np.concatenate([c[1:], np.expand_dims(y, 0)]))
        return new, ys

    def _results(self, result) -> list:
        if isinstance(result, dict) or (isinstance(result, (list, tuple))
                                        and any(isinstance(r, dict) for r in result)):
            raise LoopError("scan: fn returned an updates dictionary; tracejit has no shared "
                            "variables to update", hint="return the new values as outputs "
                            "(fed back through outputs_info) instead")
        ys = list(result) if isinstance(result, (list, tuple)) else [result]
        if self.n_out and len(ys) != self.n_out:
            raise LoopError(f"scan: fn returned {len(ys)} output{'s' * (len(ys) != 1)}, but "
                            f"outputs_info describes {self.n_out}", hint="return one value per "
                            "entry of outputs_info (None there for an output not fed back)")
        return ys


def _fit(o: _Out, y, before):
    """Output ``o``'s new value ``y``, checked against the value it follows (``before``);
    a Python scalar takes its dtype."""
    shape = y.shape if isinstance(y, Tracer) else np.shape(y)
    if shape != before.shape:
        raise LoopError(f"scan: output {o.index} has shape {shape} but its initial "
                        f"value (outputs_info[{o.index}]) gives {before.shape} per step",
                        hint="return each fed-back output with the shape of one step of its "
                        "initial value")
    weak_y = not isinstance(y, Tracer) or y.aval.weak
    if isinstance(before, Tracer) and before.aval.weak:
        return y  # a Python scalar initial value: the loop gives it y's type
    if weak_y:
        return y.astype(before.dtype) if isinstance(y, Tracer) else np.asarray(y, before.dtype)
    if y.dtype != before.dtype:
        raise LoopError(f"scan: output {o.index} is {y.dtype} but its initial value "
                        f"(outputs_info[{o.index}]) is {before.dtype}",
                        hint="give the initial value the output's dtype (Theano refuses the "
                        "implicit cast too), or convert the output with .astype")
    return y


def _split_scan(loop: _Body, init: list, xs: list, n: int, s: int) -> list:
    """Truncated BPTT where a window reaches back into its initial values: the first ``s``
    steps run without gradient, the last ``n - s`` with all of it, so that the initial
    values the last steps read get their gradient (Theano's), and nothing earlier does."""
    carry1, ys1 = _loops.scan(loop, init, [x[:s] for x in xs], length=s, what="scan")
    carry1, ys1 = stop_gradient(carry1), stop_gradient(ys1)
    init2 = []
    for o, c0, c1 in zip(loop.fed, init, carry1, strict=True):
        if o.window > s:  # the window at step s: initial values, then the first s outputs
            c1 = np.concatenate([c0[s:], ys1[o.index][:s]])
        init2.append(c1)
    ys2 = _loops.scan(loop, init2, [x[s:] for x in xs], length=n - s, what="scan")[1]
    return [np.concatenate([a, b]) for a, b in zip(ys1, ys2, strict=True)]


def _check_strict(nodes: list, allowed: set) -> None:
    """``strict=True``: a scan ``fn`` may read no traced value but its arguments; the
    error names the line of ``fn`` that reads another."""
    for node in nodes:
        if node.op != "scan":
            continue
        loop = node.attrs["loop"]
        for outer, inner in zip(node.inputs[:loop.n_consts], loop.body.inputs, strict=False):
            if outer not in allowed:
                raise LoopError(f"scan(strict=True): fn uses a traced value ({outer.type}) "
                                "it is not given as an argument",
                                location=_first_use(loop.body, inner),
                                hint="pass it in non_sequences (fn then receives it as its "
                                "last arguments)")


def _first_use(body, value) -> SourceLocation | None:
    return next((n.loc for n in body.nodes if value in n.inputs), None)
