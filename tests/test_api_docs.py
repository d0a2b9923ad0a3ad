"""The API reference's source: every public name's docstring, checked and run.

The docs site renders these docstrings with mkdocstrings (Google style), so each public
name (``tracejit.__all__``; the public members of ``lax``, ``nn`` and ``errors``; the
public methods, properties and data attributes of JitFunction (its call is
PythonDispatcher's), Lowered, CacheInfo, Device, Profile, the ``config`` Settings and what
``grad`` & co. return) must carry:

- a one-line summary ending in a full stop, then a blank line (or nothing more);
- ``Args:`` naming exactly the parameters of a function or method that takes any;
- ``Returns:`` when the function's own body returns a value;
- ``Raises:`` when it can raise an error the user causes. The rule, checkable from the
  source: (1) a function whose own body has ``raise X(...)``, X a user-facing exception
  (a ``tracejit.errors`` class other than the internal IRError/InternalCompilerError, or a
  builtin exception), names X or a base class of X; (2) the entry points that run the
  user's function or parse a device name (``RAISES_REQUIRED``), whose errors come from
  the tracer, the passes or the targets rather than their own body, have the section too;
  (3) every exception a ``Raises:`` section names exists (in ``tracejit.errors`` or the
  builtins), so a renamed class cannot leave a stale reference;
- ``Attributes:`` naming every public data attribute (dataclass and named-tuple fields,
  ``self.x = ...`` in ``__init__``) of a class;
- ``Example:`` for functions, classes (exceptions included) and methods, with ``>>>``
  lines (properties show their value in their class's example). The singular is the
  project's convention; griffe knows only the plural as a section of code, so the docs
  build renames it (``docs/griffe_examples.py``), and so does the griffe check below.
  ``Examples:`` is accepted too.

The examples then run as doctests (ELLIPSIS, NORMALIZE_WHITESPACE) with ``np`` and ``tj``
(``import tracejit as tj``) given, on the reference backend so that they compile nothing
and their output is the same on every machine: an example gone stale fails here.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import doctest
import inspect
import logging
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit import errors, lax, nn
from tracejit.dispatch import PythonDispatcher

SRC = Path(tj.__file__).resolve().parents[1]  # the source of the package under test
SECTION = re.compile(r"^(Args|Returns|Yields|Raises|Examples?|Attributes|Note|Warns):\s*$")
EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)  # what the docs build renames
ENTRY = re.compile(r"^ {4}(\*{0,2}[\w.]+)(?: \([^)]*\))?:")
INTERNAL = {errors.IRError, errors.InternalCompilerError}

# Entry points whose errors come from what they call (tracing the user's function, the
# passes, the device checks), not from a ``raise`` in their own body.
RAISES_REQUIRED = {
    "tracejit.jit", "tracejit.PythonDispatcher.__call__", "tracejit.JitFunction.lower",
    "tracejit.grad", "tracejit.value_and_grad", "tracejit.vjp", "tracejit.jacobian",
    "tracejit.scan", "tracejit.lax.scan", "tracejit.lax.fori_loop", "tracejit.lax.while_loop",
    "tracejit.lax.map", "tracejit.device", "tracejit.to_device", "tracejit.synchronize",
}


def _public_members(cls) -> dict[str, object]:
    """A class's own public methods and properties (``__call__`` counts as public)."""
    out = {}
    for name, member in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(member, property) or inspect.isfunction(member):
            out[name] = member
    return out


def _module_members(module) -> dict[str, object]:
    names = getattr(module, "__all__", None) or [
        n for n, v in vars(module).items() if not n.startswith("_")
        and getattr(v, "__module__", None) == module.__name__]
    return {n: getattr(module, n) for n in names}


def _collect() -> dict[str, object]:
    found: dict[str, object] = {}
    for name in tj.__all__:
        found[f"tracejit.{name}"] = getattr(tj, name)
    for module in (lax, nn):
        for name, obj in _module_members(module).items():
            found[f"{module.__name__}.{name}"] = obj
    for name, obj in vars(errors).items():
        if isinstance(obj, type) and issubclass(obj, BaseException) \
                and obj.__module__ == errors.__name__:
            found[f"tracejit.errors.{name}"] = obj
    found["tracejit.config"] = type(tj.config)  # the Settings class documents each setting
    # (a jitted function's call is its base's: dispatch.PythonDispatcher documents it)
    for cls in (tj.JitFunction, PythonDispatcher, tj.Lowered, tj.CacheInfo, tj.Device,
                tj.Profile):
        for name, member in _public_members(cls).items():
            found[f"tracejit.{cls.__name__}.{name}"] = member
    # what grad, value_and_grad and jacobian return: their methods live on the base class
    for name, member in _public_members(type(tj.grad(np.sin)).__mro__[1]).items():
        found[f"tracejit.ad.GradFunction.{name}"] = member
    return found


PUBLIC = _collect()


def _sections(doc: str) -> dict[str, list[str]]:
    """Section name -> the names its entries start with (``x:``, ``*args:``)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in inspect.cleandoc(doc).splitlines():
        m = SECTION.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
        elif current is not None and (e := ENTRY.match(line)):
            current.append(e.group(1))
        elif line and not line.startswith(" "):
            current = None
    return out


def _function(obj):
    return obj.fget if isinstance(obj, property) else obj


def _source_tree(fn) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError):
        return None


def _own_body(tree: ast.AST):
    """The nodes of a function's own body, not those of functions defined inside it."""
    top = tree.body[0]
    stack = list(top.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _raised(tree: ast.AST) -> set[type]:
    """The user-facing exception classes a function's own body raises by name."""
    out = set()
    for node in _own_body(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            name = getattr(node.exc.func, "id", getattr(node.exc.func, "attr", None))
            cls = getattr(errors, name, None) or getattr(builtins, name, None)
            if isinstance(cls, type) and issubclass(cls, Exception) and cls not in INTERNAL:
                out.add(cls)
    return out


def _returns_value(tree: ast.AST, fn) -> bool:
    if inspect.signature(fn).return_annotation in (None, "None"):
        return False
    if isinstance(tree.body[0], ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "contextmanager" for d in
            tree.body[0].decorator_list):
        return True
    return any(isinstance(n, ast.Return) and n.value is not None and not (
        isinstance(n.value, ast.Constant) and n.value.value is None) for n in _own_body(tree))


def _parameters(fn) -> list[str]:
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("self", "cls"):
            continue
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        out.append(prefix + p.name)
    return out


def _exception(name: str) -> type | None:
    short = name.rpartition(".")[2]
    cls = getattr(errors, short, None) or getattr(builtins, short, None)
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def _data_attributes(cls) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    if hasattr(cls, "_fields"):
        return set(cls._fields)
    init = vars(cls).get("__init__")
    tree = _source_tree(init) if inspect.isfunction(init) else None
    if tree is None:
        return set()
    return {t.attr for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "self"
            and not t.attr.startswith("_")}


def _problems(name: str, obj) -> list[str]:
    if inspect.ismodule(obj):
        doc = obj.__doc__ or ""
        return [] if doc.strip() else ["no module docstring"]
    fn = _function(obj)
    doc = inspect.getdoc(fn) if not isinstance(obj, type) else obj.__doc__
    if not doc or not doc.strip():
        return ["no docstring"]
    lines = inspect.cleandoc(doc).splitlines()
    problems = []
    if not lines[0].strip().endswith(".") or (len(lines) > 1 and lines[1].strip()):
        problems.append("the first line is not a one-line summary ending in '.' "
                        "followed by a blank line")
    sections = _sections(doc)
    if isinstance(obj, type):
        missing = _data_attributes(obj) - set(sections.get("Attributes", []))
        if missing:
            problems.append(f"Attributes: misses {sorted(missing)}")
        if not {"Example", "Examples"} & set(sections):
            problems.append("no Example: section")
        return problems
    tree = _source_tree(fn)
    params = _parameters(fn)
    if params and sections.get("Args") != params:
        problems.append(f"Args: lists {sections.get('Args')}, the parameters are {params}")
    if isinstance(obj, property):
        documented: set[type] = set()
    else:
        if tree is not None and _returns_value(tree, fn) and "Returns" not in sections \
                and "Yields" not in sections:
            problems.append("no Returns: section")
        if not {"Example", "Examples"} & set(sections):
            problems.append("no Example: section")
    named = sections.get("Raises", [])
    documented = set()
    for exc in named:
        cls = _exception(exc)
        if cls is None:
            problems.append(f"Raises: names {exc}, which is no exception class")
        else:
            documented.add(cls)
    raised = _raised(tree) if tree is not None else set()
    undocumented = {c for c in raised if not any(issubclass(c, d) for d in documented)}
    if undocumented:
        problems.append(f"Raises: misses {sorted(c.__name__ for c in undocumented)}")
    if name in RAISES_REQUIRED and not named:
        problems.append("no Raises: section (an entry point: see RAISES_REQUIRED)")
    return problems


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_docstring_sections(name):
    problems = _problems(name, PUBLIC[name])
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_walk_finds_the_public_api():
    """The walk sees what the reference must show (a guard against a walk finding none)."""
    expected = {"tracejit.jit", "tracejit.JitFunction.lower", "tracejit.Lowered.optimized_ir",
                "tracejit.lax.fori_loop", "tracejit.nn.softmax", "tracejit.errors.ShapeError",
                "tracejit.config", "tracejit.Device", "tracejit.profile"}
    assert expected <= set(PUBLIC)


def _doc(obj) -> str:
    if inspect.ismodule(obj) or isinstance(obj, type):
        return obj.__doc__ or ""
    return inspect.getdoc(_function(obj)) or ""


EXAMPLES = {name: doctest.DocTestParser().get_doctest(_doc(obj), {}, name, None, 0)
            for name, obj in PUBLIC.items()}
RUNNABLE = sorted(name for name, test in EXAMPLES.items() if test.examples)


def test_examples_are_many():
    """Every function, class and method has one (test_docstring_sections); this counts
    the ``>>>`` lines run below, so that a parser change that finds none is noticed."""
    assert len(RUNNABLE) >= 60
    assert sum(len(EXAMPLES[n].examples) for n in RUNNABLE) > len(RUNNABLE)


@pytest.fixture
def reference_backend(monkeypatch):
    """Examples run on the reference backend (nothing to compile, the same output on
    every machine) and leave the process-wide settings as they found them."""
    monkeypatch.setenv("TRACEJIT_BACKEND", "reference")
    saved = {k: getattr(tj.config, k) for k in ("compile", "min_kernel_size",
                                                 "compile_workers", "roll_loops")}
    tj.config.compile = "sync"  # the examples show the defaults, whatever the environment
    tj.config.roll_loops = True
    yield
    for k, v in saved.items():
        setattr(tj.config, k, v)


@pytest.mark.parametrize("name", RUNNABLE)
def test_docstring_examples_run(name, reference_backend):
    test = EXAMPLES[name]
    test.globs = {"np": np, "tj": tj}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(out)


def test_docstrings_parse_with_griffe(caplog):
    """What mkdocstrings will do: griffe's Google parser reads every docstring (with its
    function's signature, for the parameter types) and warns about nothing."""
    griffe = pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    package = griffe.load("tracejit", search_paths=[str(SRC)], allow_inspection=False)
    caplog.set_level(logging.WARNING, logger="griffe")
    parsed = 0
    for name in PUBLIC:
        path = name
        try:
            obj = package[path.removeprefix("tracejit.")]
        except KeyError:  # a lazy re-export: the name lives in its home module
            home = tj._HOMES.get(path.split(".")[1])
            obj = package[f"{home}.{path.partition('.')[2]}"] if home else None
        while obj is not None and obj.is_alias:
            obj = obj.final_target
        if obj is None or obj.docstring is None:
            continue
        text = EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
        sections = griffe.Docstring(text, parent=obj).parse("google")
        parsed += 1
        kinds = {s.kind.value for s in sections}
        if "Args:" in text:
            assert "parameters" in kinds, name
        if "Raises:" in text:
            assert "raises" in kinds, name
        if "Examples:" in text:
            assert "examples" in kinds, name
        for section in sections:  # "A :class:`X` ..." would be read as a value named "A"
            if section.kind.value == "returns":
                assert all(not r.name for r in section.value), (name, section.value[0].name)
    assert parsed > len(PUBLIC) // 2
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("griffe")]
    assert not warned, "\n".join(warned)
