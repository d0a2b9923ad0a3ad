"""Checking mode (Theano's DebugMode and NanGuardMode, JAX's ``debug_nans``), and the
reproducer directories that it and internal compiler errors write.

``jit(f, check=True)`` compiles each *step* of the optimised graph (a fused kernel or a
library call, as the backend partitions it) on its own and runs the steps one after
another, each on the outputs the compiled steps before it produced. Every step's outputs
are compared with the reference interpreter's on the same inputs, with the tolerances of
the test suite: exact where the step's ops are exact, 4 ULP for one transcendental op,
and a rounding-error scale (``RTOL`` x terms summed x their magnitude) once sums,
products, matmuls or chains of inexact ops are involved. Comparing per step, on the
compiled inputs, keeps the tolerance local: a disagreement names the step at fault
rather than one far downstream that merely amplified an earlier rounding difference.

``check="nan"`` runs the same steps and stops at the first one that turns finite inputs
into a NaN or an infinity, naming the op (found by re-running that step node by node on
the reference interpreter) and the user's line.

A loop (``scan``, ``while_loop``) is checked as one step: the reference runs it here,
step by step, on the body's ops interpreted one by one, and each of its results (a loop's
value is the tuple of them) is compared, with a rounding scale grown by the number of
trips; ``check="nan"`` names the body op that first made a NaN, at the trip it did.

Both are debugging modes: every step compiles separately and values cross to the host
for comparison, so calls are much slower than plain ``jit``.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from . import targets
from .backends import Backend, Runner
from .errors import InternalCompilerError, InvalidArgument, KernelMismatch, NonFiniteValue
from .ir import Graph, Node, Value, verify
from .ir.loop_ops import Scan, is_results
from .ir.registry import REGISTRY, ULP_BOUND, Exactness, has_effect

Mode = bool | str  # False, True or "nan"

# Float ops a compiled backend computes with its own, not correctly rounded, routines,
# accurate to ULP_BOUND units in the last place, and ops that add many terms in an order a
# backend chooses (not NumPy's pairwise order): the op definitions' exactness.
TRANSCENDENTAL = frozenset(n for n, d in REGISTRY.items() if d.exactness is Exactness.ULP)
ACCUMULATING = frozenset(n for n, d in REGISTRY.items() if d.exactness is Exactness.ORDER)
RTOL = {2: 1e-2, 4: 1e-5, 8: 1e-12}  # by the itemsize of the real dtype


def resolve_mode(check: Mode | None) -> Mode:
    """The mode ``check`` asks for; None takes ``TRACEJIT_CHECK`` (``1``, ``nan``, unset)."""
    if check is None:
        text = os.environ.get("TRACEJIT_CHECK", "").strip().lower()
        check = {"": False, "0": False, "false": False, "1": True, "true": True}.get(text, text)
    if check is True or check is False or check == "nan":
        return check
    raise InvalidArgument(f"check={check!r} is not a checking mode",
                          hint="use check=True (compare with the reference interpreter), "
                          "check='nan' (stop at the first NaN or infinity) or check=False")


# ---------------------------------------------------------------- reproducers


def reproducer_root() -> Path:
    """Where reproducer directories go: ``reproducers/`` in the disk-cache directory."""
    from .backends.cpu.diskcache import cache_dir

    return cache_dir() / "reproducers"


def write_reproducer(name: str, arrays: Mapping[str, Mapping[str, object]],
                     texts: Mapping[str, str]) -> str:
    """Write a directory a bug report can carry: each ``arrays`` entry as ``<key>.npz``
    (its mapping of names to arrays), each ``texts`` entry as a text file. It goes under
    :func:`reproducer_root` as ``<name>-<timestamp>-<hash>``, or into a temporary directory
    when that is not writable. Returns its path. Never raises: it runs while reporting
    another error, which must not be masked."""
    host = {k: {_npz_key(n): _recorded(v) for n, v in d.items()} for k, d in arrays.items()}
    digest = hashlib.sha256()
    for key in sorted(texts):
        digest.update(texts[key].encode())
    for key in sorted(host):
        for n, a in host[key].items():
            digest.update(n.encode() + a.tobytes())
    label = f"{_safe(name)}-{time.strftime('%Y%m%d-%H%M%S')}-{digest.hexdigest()[:8]}"
    try:
        directory = reproducer_root() / label
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        _fill(directory, host, texts)
    except OSError:
        directory = Path(tempfile.mkdtemp(prefix=f"tracejit-{label}-"))
        try:
            _fill(directory, host, texts)
        except OSError:
            pass
    return str(directory)


def _fill(directory: Path, arrays: dict, texts: Mapping[str, str]) -> None:
    for key, named in arrays.items():
        np.savez(directory / f"{key}.npz", **named)
    for key, text in texts.items():
        (directory / key).write_text(text)


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name) or "f"


def _npz_key(name: str) -> str:
    return re.sub(r"[^\w.]+", "_", name).strip("_") or "value"


def _recorded(x) -> np.ndarray:
    """``x`` as the reproducer keeps it: on the host; a Dask array not computed (its graph
    may be large, its chunks on other machines or GPUs: the IR beside it has its shape and
    dtype) but empty; anything that cannot come to the host, empty too."""
    try:
        if targets.dask_array(x):
            return np.empty((0,), x.dtype)
        return _host_array(x)
    except Exception:  # noqa: BLE001 (reporting another error, which must not be masked)
        return np.empty((0,))


def _host_array(x) -> np.ndarray:
    return np.asarray(targets.to_host(x) if targets.device_of(x) is not None else x)


def _host(x):
    """``x`` on the host: an array, or a loop's tuple of results with each on the host."""
    return tuple(_host_array(r) for r in x) if isinstance(x, tuple) else _host_array(x)


def _members(name: str, x) -> dict[str, object]:
    """``{name: x}``, or one entry per result of a loop's tuple (``name.0``, ...)."""
    if isinstance(x, tuple):
        return {f"{name}.{i}": r for i, r in enumerate(x)}
    return {name: x}


def texts_of(stages: Mapping[str, Callable[[], str | None] | str | None]) -> dict[str, str]:
    """``{file name: text}`` for the stages that exist; a callable that fails (the source
    of a graph the code generator chokes on) is left out."""
    out = {}
    for name, make in stages.items():
        try:
            text = make() if callable(make) else make
        except Exception:  # noqa: BLE001  (the error being reported is the one that matters)
            continue
        if text:
            out[name] = text
    return out


def traceback_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


# ---------------------------------------------------------------- steps


def subgraph(graph: Graph, kernel, name: str) -> Graph:
    """The step ``kernel`` as a graph of its own: its inputs, its nodes (and the constants
    it reads, as nodes), its outputs; a placed graph keeps its values' devices."""
    producers = graph.producers()
    constants = [producers[v] for v in kernel.inputs
                 if v in producers and producers[v].op == "constant"]
    inputs = [v for v in kernel.inputs if not (v in producers and producers[v].op == "constant")]
    nodes = constants + list(kernel.nodes)
    placement = graph.placement
    if placement is not None:
        values = set(inputs) | {n.out for n in nodes}
        placement = type(placement)(placement.target, {v: d for v, d in
                                                        placement.devices.items() if v in values})
    return Graph(inputs, nodes, list(kernel.outputs), f"{graph.name}_{name}", placement)


class _Step:
    def __init__(self, name: str, graph: Graph, run):
        self.name = name
        self.graph = graph
        self.run = run
        self.ops = ", ".join(n.op for n in graph.nodes if n.op != "constant")
        self.draws = any(has_effect(n) for n in graph.nodes)

    def lines(self) -> str:
        seen = dict.fromkeys(n.loc.short for n in self.graph.nodes if n.loc is not None)
        return ", ".join(seen) or "?"

    def first_loc(self):
        return next((n.loc for n in self.graph.nodes if n.loc is not None), None)


def compile_checked(graph: Graph, backend: Backend, mode: Mode, *, function: str,
                    traced_ir: str = "") -> Runner:
    """The runner of ``graph`` in checking ``mode``: each step compiled by ``backend`` on
    its own and checked after it runs. A profile times it as one step-less call."""
    parted, kernels = backend.partition(graph)
    steps = []
    for k, kern in enumerate(kernels):
        name = f"{'kernel' if kern.kind == 'loop' else 'lib'}{k}"
        sub = verify(subgraph(parted, kern, name))
        steps.append(_Step(name, sub, backend.compile(sub)))
    constants = {n.out: n.attrs["value"] for n in parted.nodes if n.op == "constant"}
    context = _Context(function, graph, traced_ir, backend)

    def run(*leaves):
        env: dict[Value, object] = dict(constants)
        env.update(zip(parted.inputs, leaves, strict=True))
        for step in steps:
            inputs = [env[v] for v in step.graph.inputs]
            outputs = step.run(*inputs)
            # a draw is NumPy's own generator call: the reference would draw again
            if mode == "nan" and not step.draws:
                _check_finite(step, inputs, outputs, context)
            elif not step.draws:
                _compare_step(step, inputs, outputs, leaves, backend.exact, context)
            env.update(zip(step.graph.outputs, outputs, strict=True))
        return [env[v] for v in parted.outputs]

    return Runner(run, [])


class _Context:
    """What a report about one function needs besides the step."""

    def __init__(self, function: str, graph: Graph, traced_ir: str, backend: Backend):
        self.function = function
        self.graph = graph
        self.traced_ir = traced_ir
        self.backend = backend


def _evaluate(graph: Graph, inputs: list, trips: dict | None = None,
              watch=None) -> dict[Value, object]:
    """Every value of ``graph`` as the reference interpreter (NumPy) computes it. Loops
    run here (``_run_loop``), not through their registry implementation, so that a
    backend's loop is compared with an independent one; ``trips`` gets the most trips
    each loop node made, ``watch(graph, env, node, trip)`` sees each trip's body values
    (a loop's ``node``) and stops the evaluation by returning something other than None."""
    env: dict[Value, object] = dict(zip(graph.inputs, (_host(x) for x in inputs),
                                        strict=True))
    trips = {} if trips is None else trips
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            args = [env[v] for v in node.inputs]
            if node.op == "transfer":  # everything is compared on the host
                value = np.asarray(args[0])
            elif node.op in ("scan", "while_loop"):
                value = _run_loop(node, args, trips, watch)
                if value is None:
                    return env
            elif node.op == "loop_output":
                value = np.asarray(args[0][node.attrs["index"]])
            else:
                value = np.asarray(REGISTRY[node.op].impl(*args, **node.attrs))
            env[node.out] = (value if isinstance(value, tuple) else
                             value.item() if node.out.type.weak else value)
    return env


def _run_loop(node: Node, args: list, trips: dict, watch) -> tuple | None:
    """A loop node's results, its body evaluated by ``_evaluate`` once per trip (None
    when ``watch`` stopped it)."""
    loop = node.attrs["loop"]
    consts, carry = list(args[:loop.n_consts]), args[loop.n_consts:]
    count = 0

    def body(graph: Graph, values: list) -> list | None:
        env = _evaluate(graph, values, trips, watch)
        if any(v not in env for v in graph.outputs) or (
                watch is not None and watch(graph, env, node, count) is not None):
            return None
        return [env[v] for v in graph.outputs]

    if isinstance(loop, Scan):
        nk = loop.n_carry
        carry, xs = list(carry[:nk]), carry[nk:]
        ys = [np.empty((loop.length, *t.shape), t.dtype) for t in loop.y_types]
        for t in (range(loop.length - 1, -1, -1) if loop.reverse else range(loop.length)):
            outs = body(loop.body, consts + carry + [x[t] for x in xs])
            if outs is None:
                return None
            carry, count = outs[:nk], count + 1
            for y, out in zip(ys, outs[nk:], strict=True):
                y[t] = out
        results = tuple(carry) + tuple(ys)
    else:
        carry = list(carry)
        while True:
            go = body(loop.cond, consts + carry)
            if go is None:
                return None
            if not go[0]:
                break
            carry = body(loop.body, consts + carry)
            if carry is None:
                return None
            count += 1
        results = tuple(carry)
    trips[node.out] = max(trips.get(node.out, 0), count)
    return tuple(np.asarray(r) for r in results)


# ---------------------------------------------------------------- check=True


def _compare_step(step: _Step, inputs: list, outputs: list, leaves, exactly: bool,
                  context: _Context) -> None:
    trips: dict[Value, int] = {}
    want = _evaluate(step.graph, inputs, trips)
    producers = step.graph.producers()
    for i, v in enumerate(step.graph.outputs):
        node = producers.get(v)
        what = f"output {i} ({node.op})" if node is not None else f"output {i}"
        if is_results(v.type):  # a loop's tuple: each of its results is compared
            pairs = [(f"{what} result {j}", _host_array(g), np.asarray(e))
                     for j, (g, e) in enumerate(zip(outputs[i], want[v], strict=True))]
        else:
            pairs = [(what, _host_array(outputs[i]), np.asarray(want[v]))]
        tol = _tolerance(v, producers, want, exactly, trips)
        for label, got, expected in pairs:
            if got.shape != expected.shape or got.dtype != expected.dtype:
                problem = (f"is {got.dtype}{list(got.shape)} where the reference interpreter "
                           f"gives {expected.dtype}{list(expected.shape)}")
            else:
                problem = _disagreement(got, expected, tol)
            if problem is not None:
                loc = node.loc if node is not None and node.loc is not None else step.first_loc()
                raise _mismatch(step, f"{label}: {problem}", inputs, leaves, context, loc)


def _inexact(node: Node) -> bool:
    """Whether ``node`` (a loop: an op of its bodies) computes inexactly."""
    if node.op in TRANSCENDENTAL or node.op in ACCUMULATING:
        return True
    loop = node.attrs.get("loop")
    graphs = [getattr(loop, k) for k in ("cond", "body") if hasattr(loop, k)]
    return any(_inexact(n) for g in graphs for n in g.nodes)


def _terms(graph: Graph, trips: dict) -> int:
    """How many rounding errors one run of ``graph`` can add up along one result: the
    longest sum a matmul or reduction of it makes, times a nested loop's trips."""
    most = 1
    for n in graph.nodes:
        if n.op == "matmul":
            a = n.inputs[0].type
            most = max(most, a.shape[-1] if a.ndim else 1)
        elif n.op in ACCUMULATING:
            x = n.inputs[-1] if n.op == "scatter_add" else n.inputs[0]
            most = max(most, x.type.size // max(1, n.out.type.size))
        elif n.op in ("scan", "while_loop"):
            loop = n.attrs["loop"]
            graphs = [getattr(loop, k) for k in ("cond", "body") if hasattr(loop, k)]
            most = max(most, max(1, trips.get(n.out, 0))
                       * max(_terms(g, trips) for g in graphs))
    return most


def _tolerance(v: Value, producers: dict[Value, Node], env: dict, exactly: bool,
               trips: dict | None = None):
    """None (exact), "ulp", or the absolute rounding scale ``v`` is allowed: the error of
    the inexact ops ``v`` depends on, each scaled by the terms it adds and their size. A
    loop's errors compound over its trips: its scale is the trips times the terms of one
    trip times the size of its inputs and results."""
    if v.type.dtype.kind not in "fc" and not is_results(v.type):
        return None
    cone, todo = [], [v]
    seen: set[Value] = set()
    while todo:
        u = todo.pop()
        node = producers.get(u)
        if node is None or u in seen:
            continue
        seen.add(u)
        cone.append(node)
        todo.extend(node.inputs)
    inexact = [n for n in cone if _inexact(n)]
    if not inexact and exactly:
        return None
    if cone and inexact == cone[:1] and cone[0].op in TRANSCENDENTAL:
        return "ulp"  # one transcendental op on exact inputs
    scale = 0.0
    for n in cone:
        out = _magnitude(env[n.out])
        if n.op in ("scan", "while_loop"):
            loop = n.attrs["loop"]
            graphs = [getattr(loop, k) for k in ("cond", "body") if hasattr(loop, k)]
            size = max([out] + [_magnitude(env[x]) for x in n.inputs if x in env])
            scale = max(scale, max(1, (trips or {}).get(n.out, 1))
                        * max(_terms(g, trips or {}) for g in graphs) * size)
        elif n.op == "matmul":
            a, b = n.inputs
            terms = a.type.shape[-1] if a.type.ndim else 1
            scale = max(scale, terms * _magnitude(env[a]) * _magnitude(env[b]), out)
        elif n.op in ACCUMULATING:
            x = n.inputs[-1] if n.op == "scatter_add" else n.inputs[0]
            terms = max(1, x.type.size // max(1, n.out.type.size))
            scale = max(scale, terms * max(_magnitude(env[x]), out))
        else:
            scale = max(scale, out)
    return scale


def _magnitude(x) -> float:
    if isinstance(x, tuple):  # a loop's results
        return max([_magnitude(r) for r in x if np.asarray(r).dtype.kind in "fcbiu"],
                   default=0.0)
    a = np.abs(np.asarray(x, dtype=np.result_type(np.asarray(x).dtype, np.float64)))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def _rtol(dtype: np.dtype) -> float:
    return RTOL[np.finfo(dtype).dtype.itemsize]


def _disagreement(got: np.ndarray, want: np.ndarray, tol) -> str | None:
    """None when ``got`` is ``want`` within ``tol``, else the largest error and where."""
    if got.size == 0:
        return None
    if want.dtype.kind not in "fc":
        bad = got != want
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        unit, bound = "", "exact"
    else:
        both_nan = np.isnan(got) & np.isnan(want)
        special = ~np.isfinite(got) | ~np.isfinite(want)
        with np.errstate(all="ignore"):
            err = np.abs(got.astype(want.dtype) - want)
            if tol == "ulp":
                spacing = np.spacing(np.abs(want.real).astype(want.real.dtype))
                err = err / spacing
                bad = err > ULP_BOUND
                unit, bound = " ULP", f"{ULP_BOUND} ULP"
            elif tol is None:
                bad = got != want
                unit, bound = "", "exact"
            else:
                rtol = _rtol(want.dtype)
                bad = err > rtol * (np.abs(want) + tol)
                unit, bound = "", f"{rtol:g} x ({_fmt(tol)} + |expected|)"
        err = np.where(special, np.where(got == want, 0.0, np.inf), err)
        bad = np.where(special, ~((got == want) | both_nan), bad)
        err = np.where(both_nan, 0.0, err)
    if not bad.any():
        return None
    flat = int(np.argmax(np.where(bad, np.nan_to_num(err, nan=np.inf), -1.0)))
    index = np.unravel_index(flat, got.shape)
    where = f"index {tuple(int(i) for i in index)}" if got.ndim else "the scalar"
    return (f"largest error {_fmt(err.flat[flat])}{unit} at {where}: compiled "
            f"{got.flat[flat]!s}, reference {want.flat[flat]!s} (allowed: {bound}; "
            f"{int(bad.sum())} of {got.size} values differ)")


def _fmt(x: float) -> str:
    return f"{float(x):.4g}"


def _mismatch(step: _Step, problem: str, inputs: list, leaves, context: _Context, loc):
    names = _input_names(step.graph)
    directory = write_reproducer(
        f"{context.function}-{step.name}",
        {"inputs": {k: a for n, x in zip(names, inputs, strict=True)
                    for k, a in _members(n, x).items()},
         "arguments": _argument_arrays(context.graph, leaves)},
        texts_of({"ir.txt": str(context.graph), "step.ir.txt": str(step.graph),
                  "traced.ir.txt": context.traced_ir,
                  "source.txt": lambda: context.backend.source(step.graph),
                  "README.txt": _REPRO_README.format(function=context.function,
                                                     step=step.name)}))
    return KernelMismatch(
        f"check=True: {step.name} of {context.function} ({step.ops}; lines {step.lines()}) "
        f"disagrees with the reference interpreter on {context.backend.name}: {problem}\n"
        f"reproducer: {directory}", reproducer=directory, location=loc)


_REPRO_README = """\
tracejit reproducer: step {step} of {function}.
inputs.npz: the step's inputs (named as in step.ir.txt); arguments.npz: the function's.
ir.txt: the optimised IR; step.ir.txt: the step alone; source.txt: its generated source.
"""


def _input_names(graph: Graph) -> list[str]:
    return [v.name or f"in{i}" for i, v in enumerate(graph.inputs)]


def _argument_arrays(graph: Graph, leaves) -> dict[str, object]:
    return dict(zip(_input_names(graph), leaves, strict=False))


# ---------------------------------------------------------------- check="nan"


def _non_finite(x) -> bool:
    if isinstance(x, tuple):  # a loop's results
        return any(_non_finite(r) for r in x)
    a = _host_array(x)
    return a.dtype.kind in "fc" and not bool(np.isfinite(a).all())


def _first_non_finite(graph: Graph, env: dict) -> Node | None:
    """The first node of ``graph`` that made a NaN or infinity from finite inputs."""
    return next((n for n in graph.nodes if n.out in env
                 and not any(_non_finite(env[v]) for v in n.inputs)
                 and _non_finite(env[n.out])), None)


def _loop_culprit(node: Node, env: dict):
    """(body node, trip) of the body op inside loop ``node`` that first made a NaN or
    infinity from finite values, found by running the loop again trip by trip."""
    found: list = []

    def watch(graph, values, loop, trip):
        culprit = _first_non_finite(graph, values)
        if culprit is not None and not found:
            found.append((culprit, values[culprit.out], loop, trip))
            return culprit
        return None

    _run_loop(node, [env[v] for v in node.inputs], {}, watch)
    return found[0] if found else None


def _check_finite(step: _Step, inputs: list, outputs: list, context: _Context) -> None:
    """Raise NonFiniteValue if the step made a NaN or infinity out of finite inputs."""
    if any(_non_finite(x) for x in inputs) or not any(_non_finite(y) for y in outputs):
        return
    env = _evaluate(step.graph, inputs)
    culprit = _first_non_finite(step.graph, env)
    if culprit is None:  # the reference interpreter stays finite: the compiled step did it
        bad = next(y for y in outputs if _non_finite(y))
        op, note = step.ops, " (the reference interpreter stays finite: check=True compares)"
        loc = step.first_loc()
    else:
        bad, op, note, loc = env[culprit.out], culprit.op, "", culprit.loc
        inner = _loop_culprit(culprit, env) if culprit.op in ("scan", "while_loop") else None
        if inner is not None:
            body_node, bad, loop, trip = inner
            op, loc = body_node.op, body_node.loc or loc
            note = f" (inside the {loop.op} at trip {trip})"
    if isinstance(bad, tuple):
        bad = next(r for r in bad if _non_finite(r))
    a = _host_array(bad)
    finite = np.isfinite(a)
    flat = int(np.argmin(finite.ravel()))
    value = a.flat[flat]
    index = tuple(int(i) for i in np.unravel_index(flat, a.shape)) if a.ndim else "the scalar"
    raise NonFiniteValue(
        f"check='nan': {op} in {context.function} produced {value.item()!r} from finite inputs "
        f"(at index {index}; {int((~finite).sum())} of {a.size} values are not finite; "
        f"{step.name}: {step.ops}){note}", location=loc)


# ---------------------------------------------------------------- internal errors


def internal_error(error: BaseException, *, function: str, signature: str, stage: str,
                   arguments: Mapping[str, object], traced: Graph | None = None,
                   optimized: Graph | None = None,
                   backend: Backend | None = None) -> InternalCompilerError:
    """The :class:`~tracejit.errors.InternalCompilerError` for ``error``, raised by
    tracejit's own ``stage`` (passes, code generation, the first call of generated code)
    while compiling ``function(signature)`` for ``backend``, with a reproducer directory
    written."""

    def source() -> str | None:
        return backend.source(optimized) if optimized and backend else None

    directory = write_reproducer(function, {"arguments": arguments}, texts_of({
        "traced.ir.txt": str(traced) if traced is not None else None,
        "ir.txt": str(optimized) if optimized is not None else None,
        "source.txt": source,
        "traceback.txt": traceback_text(error),
        "README.txt": f"tracejit internal compiler error in {stage}, compiling "
                      f"{function}({signature}).\narguments.npz: the arguments; "
                      "traced.ir.txt, ir.txt: the IR before and after the passes; "
                      "source.txt: the generated source; traceback.txt: the error.\n",
    }))
    kind = type(error)
    if kind.__module__ == "builtins":  # a plain Python error: its text is short and ours
        first = (str(error).strip().splitlines() or [""])[0][:160]
        what = f"{kind.__name__}: {first}" if first else kind.__name__
    else:  # a compiler's (Numba's, CuPy's) report: too long and about generated code
        what = f"{kind.__module__}.{kind.__name__} (its text is in traceback.txt)"
    return InternalCompilerError(
        f"internal compiler error in tracejit's {stage} while compiling "
        f"{function}({signature}): {what}\n"
        f"This is a bug in tracejit, not in your code. The reproducer directory {directory} "
        "holds the arguments, the IR, the generated source and the traceback.",
        reproducer=directory)
