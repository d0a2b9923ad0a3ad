"""Physics: particle steps with broadcasting, ODE integrators looping over a step count."""

import numpy as np

from .case import Case


def nbody_step(pos, vel, mass, dt, softening):
    """One kick-drift step of a softened gravitational N-body system, in place."""
    dx = pos[np.newaxis, :, :] - pos[:, np.newaxis, :]
    r2 = (dx**2).sum(axis=-1) + softening**2
    inv_r3 = r2**-1.5
    acc = (dx * (inv_r3 * mass[np.newaxis, :])[:, :, np.newaxis]).sum(axis=1)
    vel += acc * dt
    pos += vel * dt


def lennard_jones_energy(pos, box):
    """Total LJ energy with the minimum-image convention in a periodic cube."""
    d = pos[:, np.newaxis, :] - pos[np.newaxis, :, :]
    d -= box * np.round(d / box)
    r2 = (d**2).sum(axis=-1)
    np.fill_diagonal(r2, np.inf)
    inv6 = (1.0 / r2) ** 3
    return 2.0 * np.sum(inv6**2 - inv6)


def lorenz_euler(state, sigma, rho, beta, dt, steps):
    x, y, z = state
    traj = np.empty((steps, 3))
    for i in range(steps):
        dx = sigma * (y - x)
        dy = x * (rho - z) - y
        dz = x * y - beta * z
        x, y, z = x + dx * dt, y + dy * dt, z + dz * dt
        traj[i] = x, y, z
    return traj


def rk4_oscillator(y0, omega, dt, steps):
    def f(y):
        return np.array([y[1], -omega**2 * y[0]])

    y = y0
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def projectile_with_drag(speed, angle, k, dt, steps):
    vel = speed * np.array([np.cos(angle), np.sin(angle)])
    pos = np.zeros(2)
    g = np.array([0.0, -9.81])
    for _ in range(steps):
        acc = g - k * np.linalg.norm(vel) * vel
        vel = vel + acc * dt
        pos = pos + vel * dt
    return pos


def spring_chain_verlet(x, v, k, m, dt, steps):
    """Velocity Verlet for a periodic chain of masses and springs."""
    def force(x):
        return k * (np.roll(x, 1) + np.roll(x, -1) - 2 * x)

    a = force(x) / m
    for _ in range(steps):
        x = x + v * dt + 0.5 * a * dt**2
        a_new = force(x) / m
        v = v + 0.5 * (a + a_new) * dt
        a = a_new
    return x, v


def brownian_paths(n_paths, n_steps, dt, seed):
    np.random.seed(seed)
    dW = np.random.normal(0.0, np.sqrt(dt), size=(n_paths, n_steps))
    W = np.cumsum(dW, axis=1)
    return W[:, -1].mean(), W.var(axis=0)


def noisy_measurement(signal, sigma):
    """Noise from NumPy's global generator, which the calling script seeded once."""
    return signal + sigma * np.random.randn(*signal.shape)


def ising_energy(spins, J):
    neighbours = np.roll(spins, 1, axis=0) + np.roll(spins, 1, axis=1)
    return -J * np.sum(spins * neighbours)


def metropolis_sweep_energy(spins, beta, seed):
    """A checkerboard Metropolis sweep of a 2-D Ising model, from a seeded generator."""
    rng = np.random.default_rng(seed)
    n = spins.shape[0]
    parity = np.add.outer(np.arange(n), np.arange(n)) % 2
    for color in (0, 1):
        nb = (np.roll(spins, 1, 0) + np.roll(spins, -1, 0) +
              np.roll(spins, 1, 1) + np.roll(spins, -1, 1))
        dE = 2 * spins * nb
        accept = (rng.random(spins.shape) < np.exp(-beta * dE)) & (parity == color)
        spins = np.where(accept, -spins, spins)
    return spins


def _rng(seed):
    return np.random.default_rng(seed)


def _nbody_args():
    rng = _rng(90)
    return rng.normal(size=(32, 3)), rng.normal(0, 0.1, (32, 3)), rng.random(32) + 0.5, 0.01, 0.1


def _lj_args():
    rng = _rng(91)
    grid = np.stack(np.meshgrid(*[np.arange(3.0)] * 3, indexing="ij"), -1).reshape(-1, 3)
    return grid * 1.2 + rng.normal(0, 0.05, grid.shape), 3.6


def _chain_args():
    rng = _rng(93)
    return rng.normal(0, 0.1, 64), np.zeros(64), 4.0, 1.0, 0.05, 30


PROGRAMS = [
    Case("nbody_step", nbody_step, _nbody_args),
    Case("lennard_jones_energy", lennard_jones_energy, _lj_args, grad=0),
    Case("lorenz_euler", lorenz_euler, lambda: (np.array([1.0, 1.0, 1.0]), 10.0, 28.0,
                                                8.0 / 3.0, 0.005, 60), rtol=1e-7),
    Case("rk4_oscillator", rk4_oscillator, lambda: (np.array([1.0, 0.0]), 2.0, 0.05, 40),
         grad=0),
    Case("projectile_with_drag", projectile_with_drag, lambda: (20.0, 0.8, 0.01, 0.02, 40),
         grad=0),
    Case("spring_chain_verlet", spring_chain_verlet, _chain_args, grad=0),
    Case("brownian_paths", brownian_paths, lambda: (20, 30, 0.01, 5)),
    Case("noisy_measurement", noisy_measurement, lambda: (np.sin(np.linspace(0, 6, 200)), 0.1)),
    Case("ising_energy", ising_energy, lambda: (_rng(92).choice([-1, 1], (24, 24)), 1),
         exact=True),
    Case("metropolis_sweep", metropolis_sweep_energy,
         lambda: (_rng(94).choice([-1, 1], (16, 16)), 0.4, 7), exact=True),
]
