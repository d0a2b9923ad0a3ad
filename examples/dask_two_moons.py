"""The tutorial network trained data-parallel on Dask: the same ``train_step`` as
``two_moons.py``, called on a data set split into row chunks on a LocalCluster.

    pip install 'tracejit[dask]'
    python examples/dask_two_moons.py [--rows 200000] [--chunk 50000] [--steps 30]

Each step is one Dask computation: every chunk's forward and backward pass runs as
compiled kernels on a worker (one task per chunk and stage), the per-chunk gradient
sums are combined by Dask's tree reduction, and the updated parameters (a few KiB) come
back to this process for the next step. ``train_step.lower(...).plan`` prints the stages.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from two_moons import calculate_loss, init_params, predict, train_step

from tracejit.datasets import make_moons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--plan", action="store_true", help="print the step's stages")
    args = parser.parse_args()

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        X, y = make_moons(args.rows, 0.2, np.random.default_rng(0))
        Y = np.eye(2, dtype=np.float32)[y]
        dX = client.persist(da.from_array(X, chunks=(args.chunk, 2)))  # on the workers
        dY = client.persist(da.from_array(Y, chunks=(args.chunk, 2)))
        params = init_params()
        print(f"{args.rows} rows in {dX.numblocks[0]} chunks on {args.workers} workers")
        if args.plan:
            print(train_step.lower(params, dX, dY).plan)
        start = time.perf_counter()
        for step in range(1, args.steps + 1):
            (params,) = dask.compute(train_step(params, dX, dY))  # NumPy arrays again
            if step == 1 or step % 10 == 0:
                (loss,) = dask.compute(calculate_loss(params, dX, dY))
                print(f"step {step:3d}  loss {float(loss):.4f}  "
                      f"({time.perf_counter() - start:.1f} s)")
        (labels,) = dask.compute(predict(params, dX))
        print(f"training accuracy {np.mean(labels == y):.3f}")
        reference = train_step(init_params(), X, Y)  # the same step on NumPy arrays
        first = dask.compute(train_step(init_params(), dX, dY))[0]
        gap = max(float(np.max(np.abs(first[k] - reference[k]))) for k in reference)
        print(f"one step on Dask vs on NumPy arrays: largest difference {gap:.1e}")


if __name__ == "__main__":
    main()
