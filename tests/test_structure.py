"""The package's shape, read from its source with ``ast`` (nothing is imported).

- No import cycle between modules of ``src/tracejit``: a cycle means two modules share a
  responsibility, and it makes import order matter (a bottom-of-file import, a name
  missing while a module half-initialises).
- No function longer than 80 lines, except the written allow-list below.
- The data path is layered: ``trace -> ir <- passes <- backends``; ``ir/`` knows none of
  the others, ``passes/`` no backend, backends no tracer.

The import graph counts every import statement, including those inside functions (a
function-level import is still a dependency, only a hidden one), and leaves out
``if TYPE_CHECKING:`` blocks (annotations only: nothing runs). Rules that keep a package
``__init__`` from making false cycles:

- ``from pkg import name``, where ``pkg.name`` is a module, imports that submodule.
- ``from pkg import Name``, where ``pkg/__init__.py`` only re-exports ``Name`` from one of
  its submodules, imports the submodule that defines it (followed through re-exports):
  ``from ..ir import Graph`` depends on ``ir/graph.py``, not on everything ``ir/__init__``
  imports. A name the ``__init__`` defines itself depends on the ``__init__``.
- Importing ``pkg.mod`` runs ``pkg/__init__.py`` first, but that implicit step is not an
  edge: it would make every package whose ``__init__`` imports its submodules a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "tracejit"
MAX_LINES = 80

# Functions allowed over MAX_LINES, "module:qualname" -> why it is long.
LONG_FUNCTIONS_ALLOWED: dict[str, str] = {
    "tracejit.backends.cpu.math:_make":
        "generated-math factory: the vectorisable exp/log/... kernels for one float type are "
        "closures over the dozen bit-level constants computed at its top, so float32 and "
        "float64 share one body; splitting it would pass those constants around",
}

# (importer package, imported package): the data path's forbidden directions.
FORBIDDEN_LAYERS = [
    ("tracejit.passes", "tracejit.backends"),
    ("tracejit.backends", "tracejit.trace"),
    ("tracejit.ir", "tracejit.passes"),
    ("tracejit.ir", "tracejit.backends"),
    ("tracejit.ir", "tracejit.trace"),
]


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, at any depth, outside ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif _is_type_checking(node):
            yield from (n for s in node.orelse for n in _imports_in(s))
        else:
            yield from _imports(node)


def _imports_in(stmt: ast.AST):
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        yield stmt
    else:
        yield from _imports(stmt)


def _base(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _defining_module(module: str, name: str, seen: frozenset = frozenset()) -> str:
    """The module that defines ``name`` as seen from ``module``: followed through a
    package ``__init__``'s top-level re-exports, else ``module`` itself."""
    if f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    if module not in MODULES or module in seen or MODULES[module].name != "__init__.py":
        return module
    for node in TREES[module].body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _defining_module(_base(module, node), alias.name, seen | {module})
    return module


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    base = _base(module, node)
    return {_defining_module(base, a.name) for a in node.names}


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (per the rules in the docstring)."""
    graph = {}
    for module, tree in TREES.items():
        deps = set()
        for node in _imports(tree):
            deps |= {t for t in _targets(module, node) if t in MODULES and t != module}
        graph[module] = deps
    return graph


def components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds at
    least one cycle, and every cycle lies inside one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per strongly connected component."""
    return [_cycle_in(graph, c) for c in components(graph)]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def test_no_import_cycles():
    graph = import_graph()
    tangles = components(graph)
    assert not tangles, "import cycles:\n" + "\n".join(
        f"{' -> '.join(_cycle_in(graph, c))}  (modules in cycles with it: "
        f"{', '.join(sorted(c))})" for c in tangles)


def test_cycle_finder_sees_a_cycle():
    """The check itself: a two-module cycle and a longer one are reported, a DAG is not."""
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    assert find_cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c", "a"]]


def test_reexports_resolve_to_the_defining_module():
    graph = import_graph()
    assert "tracejit.ir.graph" in graph["tracejit.ir.verify"]  # from .graph import Graph
    assert "tracejit.trace.tracer" in graph["tracejit.ad.backward"]
    assert "tracejit.ir" not in graph["tracejit.trace.core"]  # from ..ir import Graph, ...
    assert "tracejit.ir.graph" in graph["tracejit.trace.core"]


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualname, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def test_no_long_functions():
    long = {}
    for module, tree in TREES.items():
        for qualname, node in _functions(tree):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                long[f"{module}:{qualname}"] = lines
    unexplained = {k: v for k, v in long.items() if k not in LONG_FUNCTIONS_ALLOWED}
    assert not unexplained, f"functions over {MAX_LINES} lines: " + ", ".join(
        f"{k} ({v} lines)" for k, v in sorted(unexplained.items()))
    stale = sorted(set(LONG_FUNCTIONS_ALLOWED) - set(long))
    assert not stale, f"allowed as long but no longer are (drop them): {stale}"


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_data_path_layers():
    bad = sorted(f"{m} imports {d}" for m, deps in import_graph().items() for d in deps
                 for importer, imported in FORBIDDEN_LAYERS
                 if _inside(m, importer) and _inside(d, imported))
    assert not bad, "layering broken:\n" + "\n".join(bad)
