"""Running Graphviz's ``dot`` program on DOT text (``printer.to_dot``), for
``Graph.render`` and ``Lowered.render`` and the pictures Jupyter shows.

Graphviz is an OS package, not a Python dependency: ``dot`` is looked up on ``PATH`` at
each call (so installing it needs no restart) and run as a subprocess, the DOT text on its
standard input and the picture on its standard output. Without it, rendering raises
:class:`~tracejit.errors.GraphvizNotFound`; the DOT text never needs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..errors import GraphvizNotFound, InvalidArgument, IRError

FORMATS = ("svg", "png", "pdf")  # what render writes: the file suffixes it understands


def program() -> str:
    """The path of ``dot``; GraphvizNotFound when it is not on ``PATH``."""
    found = shutil.which("dot")
    if found is None:
        raise GraphvizNotFound("Graphviz's dot program is not on PATH: drawing a graph "
                               "to a picture needs it")
    return found


def run(text: str, format: str) -> bytes:
    """The picture of DOT ``text`` in ``format`` (one of :data:`FORMATS`)."""
    done = subprocess.run([program(), f"-T{format}"], input=text.encode(),
                          capture_output=True, check=False)
    if done.returncode != 0:  # the DOT text is ours: unless dot is broken, a bug here
        raise IRError(f"Graphviz's dot failed (exit status {done.returncode}): "
                      f"{done.stderr.decode(errors='replace').strip()}",
                      hint="if `dot -V` works in a shell, please report this with the "
                      "function you drew; to_dot() gives the DOT text")
    return done.stdout


def write(text: str, path: str | os.PathLike, format: str | None = None) -> Path:
    """Render DOT ``text`` to ``path``, in ``format`` or else the one its suffix names."""
    path = Path(path)
    format = (format or path.suffix.lstrip(".")).lower()
    if format not in FORMATS:
        raise InvalidArgument(f"cannot render a graph to {str(path)!r} as {format or '?'!r}",
                              hint=f"name a file ending in one of .{', .'.join(FORMATS)} or "
                              "pass format= one of those; to_dot() gives the DOT text")
    path.write_bytes(run(text, format))
    return path


def svg(text: str) -> str | None:
    """The SVG of DOT ``text``, or None where Graphviz is missing or fails (Jupyter
    then shows the text instead: a picture must never break a notebook's output)."""
    if shutil.which("dot") is None:
        return None
    try:
        return run(text, "svg").decode()
    except (IRError, OSError, UnicodeDecodeError):
        return None
