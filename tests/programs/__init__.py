"""A corpus of NumPy programs written as scientists write them, not for tracejit.

Each module holds programs of one field (stencils, dynamic programming, statistics, linear
algebra, neural networks, physics, signal processing) and a ``PROGRAMS`` list of
:class:`Case` records. ``tests/test_programs.py`` runs every program under ``tracejit.jit``
and compares it with plain NumPy; ``expected.py`` lists those that do not run yet.

    PYTHONPATH=src python -m tests.programs            # "N of M run unchanged", by reason
    PYTHONPATH=src python -m tests.programs --update   # regenerate expected.py
"""

from . import dynprog, linalg, nn, physics, signals, stats, stencils
from .case import Case

PROGRAMS: list[Case] = [case for module in (stencils, dynprog, stats, linalg, nn, physics,
                                            signals) for case in module.PROGRAMS]
BY_NAME: dict[str, Case] = {case.name: case for case in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"

__all__ = ["BY_NAME", "PROGRAMS", "Case"]
