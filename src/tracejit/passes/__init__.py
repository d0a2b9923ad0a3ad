"""Graph -> Graph passes and the pipeline that runs them (verifying after each)."""

from .dce import dce
from .pipeline import DEFAULT_PASSES, run_pipeline
from .simplify import simplify

__all__ = ["DEFAULT_PASSES", "dce", "run_pipeline", "simplify"]
