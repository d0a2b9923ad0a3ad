"""Statistics: moments, correlation, order statistics, running means, resampling."""

import numpy as np

from .case import Case


def covariance(data):
    """PolyBench covariance, written with broadcasting: variables in columns."""
    mean = np.mean(data, axis=0)
    centered = data - mean
    return centered.T @ centered / (data.shape[0] - 1)


def cov_and_corrcoef(X):
    return np.cov(X, rowvar=False), np.corrcoef(X, rowvar=False)


def zscore(x, axis=0, ddof=0):
    mean = x.mean(axis=axis, keepdims=True)
    std = x.std(axis=axis, ddof=ddof, keepdims=True)
    return (x - mean) / std


def robust_summary(x):
    med = np.median(x)
    q1, q3 = np.percentile(x, [25, 75])
    mad = np.median(np.abs(x - med))
    return med, q3 - q1, mad


def running_mean(x, window):
    c = np.cumsum(np.insert(x, 0, 0.0))
    return (c[window:] - c[:-window]) / window


def sharpe_ratio(prices, periods_per_year=252):
    returns = np.diff(np.log(prices))
    return np.sqrt(periods_per_year) * returns.mean() / returns.std(ddof=1)


def weighted_moment(x, weights=None, mode="mean"):
    if weights is None:
        weights = np.ones_like(x)
    w = weights / weights.sum()
    mean = np.sum(w * x)
    if mode == "mean":
        return mean
    elif mode == "var":
        return np.sum(w * (x - mean) ** 2)
    raise ValueError(f"unknown mode {mode!r}")


def histogram_counts(x, bins):
    """Counts of values in [0, 1) per bin, with np.add.at (no np.histogram)."""
    idx = np.clip((x * bins).astype(np.int64), 0, bins - 1)
    counts = np.zeros(bins, dtype=np.int64)
    np.add.at(counts, idx, 1)
    return counts


def bootstrap_ci(x, n_boot):
    """Percentile bootstrap of the mean, seeding NumPy's global generator first."""
    np.random.seed(0)
    idx = np.random.randint(0, len(x), size=(n_boot, len(x)))
    means = x[idx].mean(axis=1)
    return np.percentile(means, [2.5, 97.5])


def ewma(x, alpha):
    out = np.empty_like(x)
    out[0] = x[0]
    for t in range(1, x.shape[0]):
        out[t] = alpha * x[t] + (1 - alpha) * out[t - 1]
    return out


def gaussian_kde(samples, grid, bandwidth):
    diffs = (grid[:, np.newaxis] - samples[np.newaxis, :]) / bandwidth
    density = np.exp(-0.5 * diffs**2).sum(axis=1)
    return density / (len(samples) * bandwidth * np.sqrt(2 * np.pi))


def standardized_anomalies(x, window, threshold):
    """Flags points more than ``threshold`` trailing standard deviations off the mean."""
    c1 = np.cumsum(x)
    c2 = np.cumsum(x * x)
    n = window
    mean = (c1[n:] - c1[:-n]) / n
    var = (c2[n:] - c2[:-n]) / n - mean**2
    z = (x[n:] - mean) / np.sqrt(var)
    return np.abs(z) > threshold, z


def _rng(seed):
    return np.random.default_rng(seed)


PROGRAMS = [
    Case("covariance", covariance, lambda: (_rng(20).random((32, 32)),), grad=0),
    Case("cov_and_corrcoef", cov_and_corrcoef, lambda: (_rng(21).random((30, 30)),), grad=0),
    Case("zscore", zscore, lambda: (_rng(22).normal(3, 2, (30, 30)),), grad=0,
         kwargs={"axis": 1, "ddof": 1}),
    Case("robust_summary", robust_summary, lambda: (_rng(23).standard_t(3, 501),), grad=0),
    Case("running_mean", running_mean, lambda: (_rng(24).random(500), 10), grad=0),
    Case("sharpe_ratio", sharpe_ratio, lambda: (100 * np.exp(np.cumsum(
        _rng(25).normal(0, 0.01, 400))),), grad=0),
    Case("weighted_mean_default", weighted_moment, lambda: (_rng(26).random(300),), grad=0),
    Case("weighted_var", weighted_moment, lambda: (_rng(27).random(300), _rng(28).random(300),
                                                   "var"), grad=0),
    Case("histogram_counts", histogram_counts, lambda: (_rng(29).random(1000), 16), exact=True),
    Case("bootstrap_ci", bootstrap_ci, lambda: (_rng(30).normal(size=50), 40)),
    Case("ewma", ewma, lambda: (_rng(31).random(150), 0.1), grad=0),
    Case("gaussian_kde", gaussian_kde, lambda: (_rng(32).normal(size=60),
                                                np.linspace(-3, 3, 50), 0.4), grad=0),
    Case("standardized_anomalies", standardized_anomalies,
         lambda: (_rng(33).normal(size=400), 20, 2.0)),
]
