"""MkDocs hooks: the docs' pictures, drawn from a real run, and the benchmark tables.

A small network's training step (the two-moons tutorial's data, 64 hidden units) is lowered
and drawn with its fused kernels as clusters (``Lowered.render``, needs Graphviz), and ten
profiled steps are exported as a trace-event file and drawn as a timeline
(``Profile.export_trace``, ``Profile.render_timeline``). They go to ``docs/generated/``
(git-ignored), which the pages show as images. What cannot be drawn is logged as a warning,
so ``mkdocs build --strict`` fails rather than publish a page without its picture.

The performance page includes ``bench/RESULTS.md`` as it is at build time: its generated
tables (from its first ``<!-- bench-...:begin -->`` marker on) where the page says
``<!-- results:tables -->``, and the notes before them at ``<!-- results:notes -->``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

OUT = Path(__file__).parent / "generated"
RESULTS = Path(__file__).parents[1] / "bench" / "RESULTS.md"
log = logging.getLogger("mkdocs.hooks.pictures")
_drawn = False  # mkdocs serve rebuilds on every change: draw once per process


def _training_step():
    """The tutorial network's step (5000 points, 2 -> 64 tanh -> 2 softmax), its data and
    parameters."""
    import numpy as np

    import tracejit as tj
    from tracejit import nn
    from tracejit.datasets import make_moons

    def loss(params, X, Y):
        a1 = np.tanh(X @ params["W1"] + params["b1"])
        probs = nn.softmax(a1 @ params["W2"] + params["b2"])
        return nn.categorical_crossentropy(probs, Y).mean()

    @tj.jit
    def train_step(params, X, Y):
        grads = tj.grad(loss)(params, X, Y)
        return {k: params[k] - 0.01 * grads[k] for k in params}

    rng = np.random.default_rng(0)
    X, y = make_moons(5000, 0.2, rng)
    X = X.astype(np.float32)
    Y = np.eye(2, dtype=np.float32)[y]
    params = {"W1": rng.standard_normal((2, 64), dtype=np.float32) / 2,
              "b1": np.zeros(64, np.float32),
              "W2": rng.standard_normal((64, 2), dtype=np.float32) / 8,
              "b2": np.zeros(2, np.float32)}
    return train_step, params, X, Y


def _draw() -> None:
    import tracejit as tj

    OUT.mkdir(exist_ok=True)
    step, params, X, Y = _training_step()
    try:
        step.lower(params, X, Y).render(OUT / "graph.svg")
    except tj.errors.GraphvizNotFound as e:
        log.warning("the graph picture needs Graphviz: %s", e)
    with tj.profile() as p:
        for _ in range(10):
            params = step(params, X, Y)
    p.export_trace(OUT / "trace.json")
    p.render_timeline(OUT / "timeline.svg")


def on_pre_build(config) -> None:
    """Draw the pictures (once per process) before MkDocs collects the docs' files."""
    global _drawn
    if _drawn:
        return
    try:
        _draw()
    except (AttributeError, ImportError) as e:  # the Picture or Profiler API is missing
        log.warning("could not draw the docs' pictures: %r", e)
    _drawn = True


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    """Put bench/RESULTS.md's tables and notes into the page that asks for them."""
    if "<!-- results:tables -->" not in markdown:
        return markdown
    text = RESULTS.read_text()
    first = re.search(r"^<!-- bench-[\w-]+:begin -->$", text, re.M)
    if first is None:
        log.warning("bench/RESULTS.md has no <!-- bench-...:begin --> marker")
        return markdown
    notes = re.sub(r"\A# .*\n", "", text[:first.start()]).strip()
    tables = re.sub(r"^(#+) ", r"#\1 ", text[first.start():], flags=re.M)  # under the page's
    return (markdown.replace("<!-- results:tables -->", tables)
            .replace("<!-- results:notes -->", notes))
