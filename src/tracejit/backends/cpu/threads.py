"""Thread-pool set-up, done before Numba starts its OpenMP pool.

Measured on these machines (DESIGN.md): with OpenMP's default spin policy Numba's idle
threads keep spinning after a parallel loop and starve OpenBLAS's threads, so a mix of
kernels and BLAS calls runs at half speed; a passive wait policy instead makes every
parallel launch cost 60-100 us. ``GOMP_SPINCOUNT=1000`` keeps launches at ~18 us and
stops the fight. libgomp reads it once, when Numba first loads it, so this runs when the
CPU backend is first used; a value the user set is kept.
"""

import os


def configure() -> None:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
