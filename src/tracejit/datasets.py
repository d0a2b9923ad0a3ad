"""Toy data for the examples and the demo, made with NumPy alone (no scikit-learn)."""

from __future__ import annotations

import numpy as np


def make_moons(n: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, like scikit-learn's ``make_moons``: points
    ``float32[n, 2]`` and labels ``int64[n]`` (1 for the upper moon)."""
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    X = np.stack([x, y], axis=1) + noise * rng.standard_normal((n, 2))
    return X.astype(np.float32), upper.astype(np.int64)
