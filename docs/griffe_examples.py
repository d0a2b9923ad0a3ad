"""A griffe extension for the API reference: read ``Example:`` sections as ``Examples:``.

tracejit's docstrings are Google style with a singular ``Example:`` section of ``>>>``
lines (as Napoleon reads it). Griffe's Google parser knows only the plural as a section of
examples and renders the singular as a note of Markdown, where doctest lines lose their
code formatting and ``x["args"]`` reads as a link. mkdocs.yml loads this extension.
"""

from __future__ import annotations

import re

import griffe

_HEADER = re.compile(r"^(\s*)Example:[ \t]*$", re.M)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADER.sub(r"\1Examples:", obj.docstring.value)
