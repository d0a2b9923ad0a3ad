"""The runner lets go of each large intermediate after its last use, as NumPy code does.

A generated runner (the CPU backend's, the CUDA backend's) names every intermediate
(``t<n>``) as a Python local, and a local lives until the function returns: a chain of
library calls on large arrays held all of them at once, twice the peak memory of the
NumPy code it replaced (cumulative sums and sorts of 32 MB arrays: NumPy peaked at 5
arrays, the runner at 10; now 3). ``released`` adds a ``del`` after the statement that
last reads each large intermediate, so the runner holds what is live, like the
interpreter (``reference._released``) and like NumPy code whose temporaries die with
their expression; NumPy's next large array may then reuse the memory just freed instead
of faulting in fresh pages (on a GPU, CuPy's pool hands the block to the next allocation
on the same stream, after the launches that read it).

Only arrays of ``RELEASE_MIN_BYTES`` or more: a ``del`` costs the cached call a few
nanoseconds, worth it where it frees real memory, not for small arrays NumPy's own
allocator caches.
"""

from __future__ import annotations

import ast
import bisect

RELEASE_MIN_BYTES = 1 << 20


def released(body: list[str], sizes: dict[str, int], kept: set[str]) -> list[str]:
    """``body`` (the runner's lines, each one or more statements) with a ``del`` line
    after the line of the last statement reading each name of ``sizes`` (its bytes) of
    ``RELEASE_MIN_BYTES`` or more that ``body`` assigns before any use and that is not
    ``kept`` (the outputs). A launch's argument tuple (``args``) holding a released array
    goes with it where the next statement using ``args`` assigns it afresh."""
    if all(size < RELEASE_MIN_BYTES for size in sizes.values()):
        return body  # (nothing to release: no parse of a long unrolled runner)
    entry = [i for i, text in enumerate(body) for _ in text.split("\n")]  # line -> entry
    statements = ast.parse("\n".join(body)).body
    named = [_names(s) for s in statements]
    loads, stores = [n[0] for n in named], [n[1] for n in named]
    assigned_first: dict[str, bool] = {}  # (by a plain assignment, which always runs)
    last: dict[str, int] = {}  # name -> index of the last statement using it
    for k, stmt in enumerate(statements):
        for name in loads[k] | stores[k]:
            assigned_first.setdefault(name, isinstance(stmt, ast.Assign)
                                      and name in stores[k] and name not in loads[k])
            last[name] = k
    after: dict[int, list[str]] = {}  # body entry -> names released after it
    for name, k in last.items():
        if sizes.get(name, -1) >= RELEASE_MIN_BYTES and assigned_first[name] and name not in kept:
            after.setdefault(entry[statements[k].end_lineno - 1], []).append(name)
    on_entry: dict[int, list[int]] = {}  # body entry -> its statements
    for k, stmt in enumerate(statements):
        on_entry.setdefault(entry[stmt.end_lineno - 1], []).append(k)
    with_args = [k for k in range(len(statements)) if "args" in loads[k] | stores[k]]
    for i, names in after.items():
        here = on_entry[i]
        packs = any("args" in stores[k] and loads[k] & set(names) for k in here)
        later = with_args[bisect.bisect_right(with_args, here[-1]):]
        if packs and (not later or "args" not in loads[later[0]]):
            names.append("args")
    out: list[str] = []
    for i, text in enumerate(body):
        out.append(text)
        if i in after:
            out.append(f"del {', '.join(sorted(after[i]))}")
    return out


def _names(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    """The names ``stmt`` reads, and those it assigns."""
    loads, stores = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (stores if isinstance(node.ctx, ast.Store) else loads).add(node.id)
    return loads, stores
