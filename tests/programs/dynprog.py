"""Dynamic programming: tables filled cell by cell or row by row."""

import numpy as np

from .case import Case


def floyd_warshall(dist):
    """All-pairs shortest paths, relaxing the caller's distance matrix in place."""
    n = dist.shape[0]
    for k in range(n):
        dist[:] = np.minimum(dist, dist[:, k, np.newaxis] + dist[np.newaxis, k, :])


def needleman_wunsch(a, b, subst, gap):
    """Global alignment score of two residue sequences under a substitution matrix."""
    n, m = len(a), len(b)
    F = np.zeros((n + 1, m + 1))
    F[:, 0] = gap * np.arange(n + 1)
    F[0, :] = gap * np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            match = F[i - 1, j - 1] + subst[a[i - 1], b[j - 1]]
            F[i, j] = np.maximum(match, np.maximum(F[i - 1, j] + gap, F[i, j - 1] + gap))
    return F[n, m], F


def lcs_length(x, y):
    """Textbook longest common subsequence: a branch on the data in every cell."""
    n, m = len(x), len(y)
    L = np.zeros((n + 1, m + 1), dtype=int)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if x[i - 1] == y[j - 1]:
                L[i, j] = L[i - 1, j - 1] + 1
            else:
                L[i, j] = max(L[i - 1, j], L[i, j - 1])
    return L[n, m]


def edit_distance(s, t):
    n, m = s.shape[0], t.shape[0]
    D = np.zeros((n + 1, m + 1), dtype=np.int64)
    D[:, 0] = np.arange(n + 1)
    D[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = s[i - 1] != t[j - 1]
            D[i, j] = np.minimum(np.minimum(D[i - 1, j] + 1, D[i, j - 1] + 1),
                                 D[i - 1, j - 1] + cost)
    return D[n, m]


def dtw_distance(x, y):
    """Dynamic time warping with the builtin min, as most tutorials write it."""
    n, m = len(x), len(y)
    D = np.full((n + 1, m + 1), np.inf)
    D[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = abs(x[i - 1] - y[j - 1])
            D[i, j] = cost + min(D[i - 1, j], D[i, j - 1], D[i - 1, j - 1])
    return D[n, m]


def viterbi(log_pi, log_A, log_B, obs):
    """Most likely hidden-state path of an HMM, with the back-pointer walk."""
    T, N = obs.shape[0], log_pi.shape[0]
    delta = np.zeros((T, N))
    psi = np.zeros((T, N), dtype=np.int64)
    delta[0] = log_pi + log_B[:, obs[0]]
    for t in range(1, T):
        scores = delta[t - 1][:, np.newaxis] + log_A
        psi[t] = np.argmax(scores, axis=0)
        delta[t] = np.max(scores, axis=0) + log_B[:, obs[t]]
    path = np.zeros(T, dtype=np.int64)
    path[-1] = np.argmax(delta[-1])
    for t in range(T - 2, -1, -1):
        path[t] = psi[t + 1, path[t + 1]]
    return path, np.max(delta[-1])


def bellman_ford(W, source):
    n = W.shape[0]
    dist = np.full(n, np.inf)
    dist[source] = 0.0
    for _ in range(n - 1):
        dist = np.minimum(dist, np.min(dist[:, np.newaxis] + W, axis=0))
    return dist


def pascal_triangle(n):
    C = np.zeros((n, n), dtype=np.int64)
    C[:, 0] = 1
    for i in range(1, n):
        C[i, 1:i + 1] = C[i - 1, :i] + C[i - 1, 1:i + 1]
    return C


def max_drawdown(prices):
    peak = np.maximum.accumulate(prices)
    return np.max((peak - prices) / peak)


def _rng(seed):
    return np.random.default_rng(seed)


def _weights(n, seed):
    W = _rng(seed).integers(1, 20, (n, n)).astype(float)
    np.fill_diagonal(W, 0.0)
    return W


def _nw_args():
    rng = _rng(11)
    subst = rng.integers(-3, 6, (4, 4)).astype(float)
    return rng.integers(0, 4, 12), rng.integers(0, 4, 12), (subst + subst.T) / 2, -2.0


def _hmm_args():
    rng = _rng(12)

    def normalized(shape):
        p = rng.random(shape) + 0.1
        return np.log(p / p.sum(axis=-1, keepdims=True))

    return normalized(8), normalized((8, 8)), normalized((8, 8)), rng.integers(0, 8, 20)


PROGRAMS = [
    Case("floyd_warshall", floyd_warshall, lambda: (_weights(24, 10),), exact=True),
    Case("needleman_wunsch", needleman_wunsch, _nw_args, exact=True),
    Case("lcs_length", lcs_length, lambda: (_rng(13).integers(0, 4, 10),
                                            _rng(14).integers(0, 4, 10)), exact=True),
    Case("edit_distance", edit_distance, lambda: (_rng(15).integers(0, 5, 10),
                                                  _rng(16).integers(0, 5, 10)), exact=True),
    Case("dtw_distance", dtw_distance, lambda: (np.sin(np.linspace(0, 6, 12)),
                                                np.cos(np.linspace(0, 5, 12)))),
    Case("viterbi", viterbi, _hmm_args),
    Case("bellman_ford", bellman_ford, lambda: (_weights(20, 17), 3), exact=True),
    Case("pascal_triangle", pascal_triangle, lambda: (30,), exact=True),
    Case("max_drawdown", max_drawdown, lambda: (100 * np.exp(np.cumsum(
        _rng(18).normal(0, 0.02, 500))),), grad=0),
]
