"""tracejit on Dask arrays against Dask's own graph of NumPy calls, on a LocalCluster.

    python bench/bench_dask.py                 # print the table (2 GiB per input)
    python bench/bench_dask.py --write         # also replace its section of RESULTS.md
    python bench/bench_dask.py --gib 0.25      # a smaller run

Issue 16's workloads on float32 arrays of ``--gib`` GiB each, in ``--chunk-mib`` MiB row
chunks (1024 columns), made on the workers by ``dask.array.random`` and kept there:

- the chain ``tanh(x*y+.5)*exp(-x*x)+sqrt(abs(y))`` (two inputs);
- a row softmax (each row in one chunk: one stage of fused row kernels).

Each is timed as ``client.persist`` of the result until it is in the workers' memory,
best of ``--repeat`` after one warm-up, for the jitted function and for the same NumPy
code called on the Dask arrays (Dask's blockwise graph of NumPy calls), on 2 workers and
on 1 (one thread each). Throughput is input bytes over time. The first computation on a
fresh cluster is also timed for tracejit: with the disk cache the client filled (workers
load the kernels) and with the workers' disk cache off (each compiles them itself).
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import numpy as np
from bench_cpu import machine_line, write_section

import tracejit as tj


def chain(x, y):
    return np.tanh(x * y + .5) * np.exp(-x * x) + np.sqrt(np.abs(y))


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


WORKLOADS = {"chain": (chain, 2), "row softmax": (softmax, 1)}


def cluster(workers: int, env: dict | None = None):
    from distributed import Client, LocalCluster

    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        made = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                            dashboard_address=None, memory_limit="10GiB")
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return made, Client(made)


def inputs(client, gib: float, chunk_mib: int):
    import dask.array as da
    from distributed import wait

    cols = 1024
    rows = int(gib * 2**30 / 4 / cols)
    chunk = max(1, int(chunk_mib * 2**20 / 4 / cols))
    rng = da.random.default_rng(0)
    xs = [rng.random((rows, cols), dtype=np.float32, chunks=(chunk, cols)) for _ in range(2)]
    xs = client.persist(xs)
    wait(xs)
    return xs


def fresh(arrays: list) -> list:
    """``arrays`` under new names (an identity on each chunk, which Dask fuses into the
    tasks reading it): the same computation again gets keys of its own, so it neither finds
    the last run's results nor races with their release."""
    return [x.map_blocks(_same, dtype=x.dtype, name=f"input-{uuid.uuid4().hex}")
            for x in arrays]


def _same(block):
    return block


def persist_time(client, make) -> float:
    from distributed import wait

    array = make()
    start = time.perf_counter()
    out = client.persist(array)
    wait(out)
    elapsed = time.perf_counter() - start
    keys = {str(k) for k in out.__dask_keys__().__iter__() for k in _flat(k)}
    client.cancel(out)
    del out, array
    while keys & {str(k) for w in client.has_what().values() for k in w}:
        time.sleep(0.05)  # the same graph again must compute again, not find these
    return elapsed


def _flat(k):
    return [k] if not isinstance(k, list) else [x for y in k for x in _flat(y)]


def best(client, make, repeat: int) -> float:
    persist_time(client, make)
    return min(persist_time(client, make) for _ in range(repeat))


def measure(workers: int, gib: float, chunk_mib: int, repeat: int) -> dict:
    made, client = cluster(workers)
    try:
        xs = inputs(client, gib, chunk_mib)
        rows = {}
        for name, (fn, n) in WORKLOADS.items():
            jitted = tj.jit(fn)
            args = xs[:n]
            nbytes = sum(x.nbytes for x in args)
            ours = best(client, lambda jitted=jitted, args=args: jitted(*fresh(args)), repeat)
            theirs = best(client, lambda fn=fn, args=args: fn(*fresh(args)), repeat)
            rows[name] = (nbytes, ours, theirs)
        return rows
    finally:
        client.close()
        made.close()


def first_computation(gib: float, chunk_mib: int, disk_cache: bool) -> float:
    """Seconds of the chain's first computation on a fresh 2-worker cluster, plan and
    kernels included (the client compiles them first either way)."""
    env = {} if disk_cache else {"TRACEJIT_DISK_CACHE": "0"}
    made, client = cluster(2, env)
    try:
        x, y = inputs(client, gib, chunk_mib)
        jitted = tj.jit(lambda x, y: np.tanh(x * y + .25) * np.exp(-x * x))  # new kernels
        return persist_time(client, lambda: jitted(x, y))
    finally:
        client.close()
        made.close()


def report(results: dict, firsts: dict, gib: float, chunk_mib: int, repeat: int) -> str:
    lines = [machine_line() + f" Dask {_dask_version()}. Inputs of {gib:g} GiB float32 each "
             f"in {chunk_mib} MiB row chunks, LocalCluster workers of one thread, best of "
             f"{repeat} after a warm-up.", "",
             "| workload | workers | tracejit | Dask (NumPy per chunk) | tracejit GB/s | "
             "Dask GB/s | speed-up |", "|---|---|---|---|---|---|---|"]
    for workers, rows in results.items():
        for name, (nbytes, ours, theirs) in rows.items():
            lines.append(f"| {name} | {workers} | {ours:.2f} s | {theirs:.2f} s | "
                         f"{nbytes / ours / 1e9:.2f} | {nbytes / theirs / 1e9:.2f} | "
                         f"{theirs / ours:.1f}x |")
    if len(results) > 1:
        one, two = results[1], results[2]
        lines.append("")
        lines.append("Scaling, 1 -> 2 workers: " + ", ".join(
            f"{name} {one[name][1] / two[name][1]:.2f}x (Dask {one[name][2] / two[name][2]:.2f}x)"
            for name in two) + ".")
    if firsts:
        lines.append("")
        lines.append("First computation of a new function on a fresh 2-worker cluster (plan, "
                     "client compile, workers' first tasks): " + ", ".join(
                         f"{k} {v:.2f} s" for k, v in firsts.items()) + ".")
    return "\n".join(lines)


def _dask_version() -> str:
    import dask

    return dask.__version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--chunk-mib", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    results = {w: measure(w, args.gib, args.chunk_mib, args.repeat) for w in (2, 1)}
    firsts = {"workers load the client's kernels from the disk cache":
              first_computation(args.gib, args.chunk_mib, True),
              "workers' disk cache off (each compiles)":
              first_computation(args.gib, args.chunk_mib, False)}
    text = report(results, firsts, args.gib, args.chunk_mib, args.repeat)
    print(text)
    if args.write:
        write_section("bench-dask", "tracejit on Dask arrays (LocalCluster)", text)


if __name__ == "__main__":
    main()
