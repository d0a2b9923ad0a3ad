"""Stencils and explicit PDE steps: sweeps over a grid, mostly writing into their arguments."""

import numpy as np

from .case import Case


def jacobi_1d(A, B, tsteps):
    """PolyBench jacobi-1d: two buffers updated in turn, in place, nothing returned."""
    for _ in range(tsteps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_2d(A, B, tsteps):
    for _ in range(1, tsteps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] +
                               A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] +
                               B[2:, 1:-1] + B[:-2, 1:-1])


def heat_3d(A, B, tsteps):
    for _ in range(1, tsteps):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1]) +
            0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1]) +
            0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2]) +
            A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1]) +
            0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1]) +
            0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, :-2]) +
            B[1:-1, 1:-1, 1:-1])


def heat_1d(u0, alpha, dx, dt, nsteps):
    """Explicit (FTCS) heat equation with fixed ends, on a copy of the initial profile."""
    u = u0.copy()
    r = alpha * dt / dx**2
    for _ in range(nsteps):
        u[1:-1] = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def fdtd_2d(ex, ey, hz, fict):
    """PolyBench fdtd-2d: three fields updated in place, one source value per time step."""
    for t in range(fict.shape[0]):
        ey[0, :] = fict[t]
        ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] +
                                             ey[1:, :-1] - ey[:-1, :-1])


def wave_1d(u, u_prev, c, steps):
    """Leapfrog for the 1-D wave equation with clamped ends; returns the last profile."""
    for _ in range(steps):
        u_next = np.empty_like(u)
        u_next[1:-1] = 2 * u[1:-1] - u_prev[1:-1] + c**2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u_next[0] = 0.0
        u_next[-1] = 0.0
        u_prev, u = u, u_next
    return u


def laplacian_periodic(f, h):
    return (np.roll(f, 1, axis=0) + np.roll(f, -1, axis=0) + np.roll(f, 1, axis=1) +
            np.roll(f, -1, axis=1) - 4 * f) / h**2


def game_of_life(board, generations):
    for _ in range(generations):
        neighbours = sum(np.roll(np.roll(board, i, 0), j, 1)
                         for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
        board = ((neighbours == 3) | ((board == 1) & (neighbours == 2))).astype(board.dtype)
    return board


def red_black_poisson(u, f, h, sweeps):
    """Red-black Gauss-Seidel for -laplace(u) = f, updating u's interior in place."""
    n = u.shape[0]
    parity = np.add.outer(np.arange(n - 2), np.arange(n - 2)) % 2
    for _ in range(sweeps):
        for color in (0, 1):
            new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] +
                          h * h * f[1:-1, 1:-1])
            u[1:-1, 1:-1] = np.where(parity == color, new, u[1:-1, 1:-1])
    return np.linalg.norm(u)


def upwind_advection(q, velocity, dx, dt, steps):
    """First-order upwind advection on a periodic domain, in place."""
    nu = velocity * dt / dx
    for _ in range(steps):
        q -= nu * (q - np.roll(q, 1))


def _rng(seed):
    return np.random.default_rng(seed)


def _grid_pair(shape, seed):
    a = _rng(seed).random(shape)
    return a, a.copy()


def _fdtd_args():
    rng, n = _rng(4), 24
    return rng.random((n, n)), rng.random((n, n)), rng.random((n, n)), rng.random(6)


def _life_args():
    return (_rng(7).integers(0, 2, (24, 24)), 4)


PROGRAMS = [
    Case("jacobi_1d", jacobi_1d, lambda: (*_grid_pair(400, 1), 8)),
    Case("jacobi_2d", jacobi_2d, lambda: (*_grid_pair((32, 32), 2), 6)),
    Case("heat_3d", heat_3d, lambda: (*_grid_pair((10, 10, 10), 3), 5)),
    Case("heat_1d", heat_1d, lambda: (np.sin(np.linspace(0, np.pi, 200)), 0.5, 0.01, 4e-5,
                                      20), grad=0),
    Case("fdtd_2d", fdtd_2d, _fdtd_args),
    Case("wave_1d", wave_1d, lambda: (np.exp(-np.linspace(-4, 4, 300) ** 2),
                                      np.exp(-np.linspace(-4, 4, 300) ** 2), 0.5, 15), grad=0),
    Case("laplacian_periodic", laplacian_periodic, lambda: (_rng(5).random((32, 32)), 0.1),
         grad=0),
    Case("game_of_life", game_of_life, _life_args, exact=True),
    Case("red_black_poisson", red_black_poisson,
         lambda: (np.zeros((20, 20)), _rng(6).random((20, 20)), 0.05, 4), grad=1),
    Case("upwind_advection", upwind_advection,
         lambda: (np.exp(-np.linspace(-3, 3, 256) ** 2), 1.0, 0.05, 0.02, 10)),
]
