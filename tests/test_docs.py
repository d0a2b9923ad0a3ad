"""The docs' examples run, and print what the pages show.

The convention (docs/contributing.md says it for writers):
- every ```python block of a page runs, in order, in one namespace per page, compiled as a
  file named ``example.py`` whose line numbers are the block's own (so ``example.py:6`` in
  an output is line 6 of the block above it);
- a ```text block right after a ```python block is what that block prints (stdout and
  stderr together, warnings as a user sees them, under NumPy's default errstate and
  tracejit's default settings); ``...`` in it matches anything, as doctest's ELLIPSIS
  (timings, addresses, paths); trailing spaces are ignored;
- ``<!-- skip: reason -->`` on the line before a block keeps it from running (a block that
  needs a GPU or a cluster, or a transcript of a shell session), ``<!-- skip-on-gpu:
  reason -->`` where a GPU is present; every other block of shown output (```text,
  ```console) must follow a ```python block or carry a marker, so no output goes
  unchecked by accident. A ```py block is an excerpt of code, shown and not run.
``python tests/test_docs.py docs/guide/gradients.md`` runs a page and pastes what its
blocks print into their empty ```text blocks (``--every``: into all of them).
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import linecache
import logging
import re
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
PAGES.append("README.md")
FENCE = re.compile(r"(?:<!-- (?P<marker>skip|skip-on-gpu): (?P<skip>[^>]*?) -->\n)?"
                   r"^```(?P<lang>\w*)\n(?P<body>.*?)^```\n", re.M | re.S)
SHOWN = ("text", "console", "")  # languages of shown output


@dataclass
class Block:
    lang: str
    body: str
    line: int  # where the block starts in the page
    skip: str | None
    span: tuple[int, int]  # the body's offsets in the page
    output: Block | None = None  # the ```text block that follows a python block


def _gpu() -> bool:
    """Whether this process sees a GPU (``skip-on-gpu`` blocks show a machine without)."""
    import tracejit as tj

    return any(d.kind != "cpu" for d in tj.devices())


def blocks(text: str) -> list[Block]:
    """The page's fenced blocks, each python block paired with the output block after it."""
    found: list[Block] = []
    end = -1
    for m in FENCE.finditer(text):
        skip = m["skip"] if m["marker"] == "skip" or _gpu() else None
        block = Block(m["lang"], m["body"], text.count("\n", 0, m.start("lang")) + 1, skip,
                      m.span("body"))
        prev = found[-1] if found else None
        if (prev is not None and prev.lang == "python" and block.lang == "text"
                and text[end:m.start()].strip() == "" and block.skip is None):
            prev.output = block
        else:
            found.append(block)
        end = m.end()
    return found


def _show(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


class _ThisThread(io.StringIO):
    """What this thread prints; another thread's output (a background compile of an
    earlier test's function logging its switch) goes to the real stderr, not the page's."""

    def __init__(self):
        super().__init__()
        self.thread = threading.get_ident()

    def write(self, text: str) -> int:
        if threading.get_ident() != self.thread:
            return sys.__stderr__.write(text)
        return super().write(text)


def run_page(page: str, show: bool = False, text: str | None = None) -> list[tuple[Block, str]]:
    """Run a page's python blocks and check what they print (or, with ``show``, print it);
    returns each output block with what its code printed."""
    text = (ROOT / page).read_text() if text is None else text
    compared = []
    namespace: dict = {"__name__": "__main__"}
    log = logging.getLogger("tracejit")
    handlers, level = list(log.handlers), log.level
    capture = _ThisThread()
    checker = doctest.OutputChecker()
    try:
        with (contextlib.redirect_stdout(capture), contextlib.redirect_stderr(capture),
              warnings.catch_warnings()):
            warnings.simplefilter("default")  # shown as a user sees them, not kept by pytest
            warnings.showwarning = _show
            for block in blocks(text):
                if block.lang in SHOWN:
                    assert block.skip, (
                        f"{page}:{block.line}: shown output that no python block prints: "
                        "put it right after its ```python block or mark it <!-- skip: why -->")
                if block.lang != "python" or block.skip:
                    continue
                lines = block.body.splitlines(keepends=True)
                linecache.cache["example.py"] = (len(block.body), None, lines, "example.py")
                capture.seek(0)
                capture.truncate()
                try:
                    exec(compile(block.body, "example.py", "exec"), namespace)
                except Exception as e:
                    raise AssertionError(f"{page}:{block.line}: the block raised {e!r}") from e
                got = "\n".join(line.rstrip() for line in capture.getvalue().splitlines())
                if show:
                    sys.__stdout__.write(f"--- {page}:{block.line}\n{got}\n")
                if block.output is None:
                    continue
                want = "\n".join(line.rstrip() for line in block.output.body.splitlines())
                if not show:
                    assert checker.check_output(want + "\n", got + "\n", doctest.ELLIPSIS), (
                        f"{page}:{block.output.line}: the page shows\n{want}\n"
                        f"but the block above it printed\n{got}")
                compared.append((block.output, got))
    finally:
        for handler in set(log.handlers) - set(handlers):
            log.removeHandler(handler)
        log.setLevel(level)
    return compared


@pytest.fixture
def as_a_user(monkeypatch):
    """The settings a user has (the suite compiles every kernel, however small)."""
    import tracejit as tj

    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)
    with np.errstate(divide="warn", over="warn", under="ignore", invalid="warn"):  # NumPy's
        yield


def test_pages_are_found():
    assert "README.md" in PAGES and "docs/index.md" in PAGES


def test_performance_page_gets_the_benchmark_tables():
    """docs/hooks.py puts bench/RESULTS.md's tables (one heading level down) and notes in."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.on_page_markdown("<!-- results:tables -->\n<!-- results:notes -->", page=None)
    results = (ROOT / "bench" / "RESULTS.md").read_text()
    assert "<!-- results:" not in page and "\n### CPU\n" in page and "\n## CPU\n" in results
    assert "# Benchmark results" not in page
    assert len(page) > 0.95 * len(results)


def _page(*parts: str) -> str:
    return "\n".join(parts) + "\n"


def test_outputs_are_compared_with_ellipsis_and_skips_are_kept():
    page = _page("```python", "x = 3", "print(f'took {x}.25 ms')", "```", "",
                 "```text", "took ... ms", "```",
                 "<!-- skip: needs a GPU -->", "```python", "raise RuntimeError", "```",
                 "```python", "print(x + 1)", "```", "```text", "4", "```")
    compared = run_page("t.md", text=page)
    assert [got for _, got in compared] == ["took 3.25 ms", "4"]


def test_a_stale_output_fails():
    page = _page("```python", "print(1 + 1)", "```", "```text", "3", "```")
    with pytest.raises(AssertionError, match="t.md:4: the page shows"):
        run_page("t.md", text=page)


def test_output_no_block_prints_fails():
    page = _page("Some output:", "", "```text", "3", "```")
    with pytest.raises(AssertionError, match="shown output that no python block prints"):
        run_page("t.md", text=page)


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run_and_print_what_is_shown(page, as_a_user):
    run_page(page)


def fill(page: str, every: bool = False) -> None:
    """Paste into the page's empty output blocks (``every``: all of them) what their code
    prints."""
    text = (ROOT / page).read_text()
    for block, got in reversed(run_page(page, show=True)):
        if every or not block.body.strip():
            text = text[:block.span[0]] + got + "\n" + text[block.span[1]:]
    (ROOT / page).write_text(text)


if __name__ == "__main__":
    every = "--every" in sys.argv
    for name in sys.argv[1:]:
        if name != "--every":
            fill(name, every)
