"""A fused driver's step functions written into its ``cfunc``, for a faster compile.

``fused.py`` emits each step of a loop body as a Numba function marked
``inline='always'`` and calls them from the driver's ``cfunc``. Numba inlines such a
function in its own IR, typing the callee again for each call, and its analyses grow
with every block a step's loops add: a straight-line driver of 300 steps
(``loops_straight.py``) took 10-80 s to compile. Here each call is replaced by the
function's body in the source (its locals renamed per call, ``return True``, a failure
whose status is written, returning from the driver), and the loops of one trip or none
that the emitters write for size-1 and empty axes are unrolled or dropped: the same code
for LLVM, a third to a quarter of the compile.
"""

from __future__ import annotations

import ast
import copy

_PARAMS = {"args", "rd", "wr", "t"}


def flatten(text: str) -> str:
    """The driver module ``text`` with the step functions its ``cfunc`` (``kernel``) calls
    as statements written in; the functions it calls otherwise (a while loop's condition
    value) stay, and so do the comments heading the module (the others go)."""
    module = ast.parse(text)
    steps = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)
             and f.name != "kernel" and _returns_flags(f)}
    kernel = next(f for f in module.body if isinstance(f, ast.FunctionDef) and f.name == "kernel")
    made = [0]
    jumps = "break" in text or "continue" in text  # (else no loop body holds one)
    kernel.body = _statements(kernel.body, steps, made, jumps) or [ast.Pass()]
    module.body = [s for s in module.body
                   if not (isinstance(s, ast.FunctionDef) and s.name in steps)]
    lines = text.splitlines()
    header = lines[:next(i for i, line in enumerate(lines) if not line.startswith("#"))]
    return "\n".join([*header, ast.unparse(ast.fix_missing_locations(module))]) + "\n"


def _returns_flags(f: ast.FunctionDef) -> bool:
    """Whether every ``return`` of ``f`` is ``return True`` (a failure) or ``return False``
    (the last statement), so that its body can stand in the driver."""
    returns = [n for n in ast.walk(f) if isinstance(n, ast.Return)]
    return all(isinstance(r.value, ast.Constant) and r.value.value in (True, False)
               for r in returns) and all(
        r.value.value is True or (r is f.body[-1]) for r in returns)


def _call(stmt: ast.stmt, steps: dict) -> str | None:
    """The step ``stmt`` calls: ``g(args, rd, wr, t)`` or ``if g(...): return``."""
    call = stmt.value if isinstance(stmt, ast.Expr) else \
        stmt.test if isinstance(stmt, ast.If) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in steps:
        return call.func.id
    return None


def _statements(body: list, steps: dict, made: list, jumps: bool) -> list:
    out = []
    for stmt in body:
        name = _call(stmt, steps)
        if name is not None:
            out.append(ast.Expr(ast.Constant(f"step {name}")))  # (a marker for the reader)
            out += _statements(_inlined(steps[name], made), steps, made, jumps)
        elif isinstance(stmt, ast.For):
            stmt.body = _statements(stmt.body, steps, made, jumps)
            out += _unrolled(stmt, jumps)
        elif isinstance(stmt, (ast.If, ast.While)):
            stmt.body = _statements(stmt.body, steps, made, jumps) or [ast.Pass()]
            stmt.orelse = _statements(stmt.orelse, steps, made, jumps)
            out.append(stmt)
        else:
            out.append(stmt)
    return out


def _inlined(f: ast.FunctionDef, made: list) -> list:
    """A copy of ``f``'s body, its locals renamed apart from every other copy's, its
    ``return True`` a return from the driver and its final ``return False`` gone."""
    made[0] += 1
    if getattr(f, "inlined", False):  # (each step is called once: copied only if not)
        f = copy.deepcopy(f)
    f.inlined = True
    last = f.body[-1]
    ends_false = isinstance(last, ast.Return) and last.value.value is False
    names = [n for n in ast.walk(f) if isinstance(n, (ast.Name, ast.Return))]
    local = {n.id for n in names if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)} - _PARAMS
    for n in names:
        if isinstance(n, ast.Return):
            n.value = None
        elif n.id in local:
            n.id = f"{n.id}_{made[0]}"
    return f.body[:-1] if ends_false else f.body


def _unrolled(loop: ast.For, jumps: bool) -> list:
    """``for i in range(1)`` as ``i = 0`` and its body (where no ``break`` or ``continue``
    would then leave an outer loop); ``range(0)`` or an empty body as nothing; other
    loops as they are."""
    it = loop.iter
    trips = (it.args[0].value if isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
             and it.func.id == "range" and len(it.args) == 1
             and isinstance(it.args[0], ast.Constant) else None)
    if trips == 0 or not loop.body or all(isinstance(s, ast.Pass) for s in loop.body):
        return []
    if trips == 1 and not loop.orelse and isinstance(loop.target, ast.Name) and (
            not jumps or not any(isinstance(n, (ast.Break, ast.Continue))
                                 for s in loop.body for n in ast.walk(s))):
        return [ast.Assign([loop.target], ast.Constant(0)), *loop.body]
    return [loop]
