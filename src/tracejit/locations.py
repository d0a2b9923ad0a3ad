"""Source locations: which line of the user's code a node or an error belongs to."""

from __future__ import annotations

import linecache
import os
import sys
import types
from dataclasses import dataclass

import numpy as np

_SKIP_DIRS = (os.path.dirname(__file__) + os.sep, os.path.dirname(np.__file__) + os.sep)
_DEMO = os.path.join(os.path.dirname(__file__), "__main__.py")  # the demo is user code


@dataclass(frozen=True, slots=True)
class SourceLocation:
    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"

    @property
    def short(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"

    def text(self) -> str:
        """The source line itself, stripped ('' when unavailable)."""
        return linecache.getline(self.filename, self.lineno).strip()


def user_location() -> SourceLocation | None:
    """The innermost frame that is neither tracejit's nor NumPy's own code."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        internal = name.startswith(_SKIP_DIRS) and name != _DEMO
        if not internal and not name.startswith(("<__array_function__", "<frozen")):
            return SourceLocation(name, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def user_location_in(tb: types.TracebackType | None) -> tuple[types.FrameType | None,
                                                              SourceLocation | None]:
    """The innermost frame of the traceback ``tb`` that is the user's code (as
    :func:`user_location` decides), with its location; (None, None) if there is none."""
    found: tuple[types.FrameType | None, SourceLocation | None] = (None, None)
    while tb is not None:
        frame, name = tb.tb_frame, tb.tb_frame.f_code.co_filename
        internal = name.startswith(_SKIP_DIRS) and name != _DEMO
        if not internal and not name.startswith(("<__array_function__", "<frozen")):
            found = frame, SourceLocation(name, tb.tb_lineno, frame.f_code.co_name)
        tb = tb.tb_next
    return found
