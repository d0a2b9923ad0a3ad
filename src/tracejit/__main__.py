"""``python -m tracejit``: a real workload end to end, with what ran where and how long.
``python -m tracejit cache [list|prune|clear]`` shows or empties the CPU backend's disk
cache instead; ``python -m tracejit prebuild [DIR]`` builds the prebuilt kernels (which the
install builds), where the library is missing or no longer current.

The workload is the two-moons network from the Theano GPU tutorial (5000 points, 2 -> 1000
tanh -> 2 softmax, float32), written in plain NumPy: its loss and accuracy, then a
gradient-descent step through ``tracejit.grad`` (the full training is
``examples/two_moons.py``), on each backend: the reference interpreter, the CPU and, where
CuPy sees a GPU, the GPU with the data resident there.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import tracejit
from tracejit.backends.cpu import diskcache
from tracejit.datasets import make_moons


def loss_and_accuracy(params, X, y, reg):
    """Cross-entropy + L2 loss and accuracy of the 3-layer net (plain NumPy)."""
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    hidden = np.tanh(X @ W1 + b1)
    logits = hidden @ W2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    nll = -np.take_along_axis(log_probs, y[:, None], axis=1).mean()
    l2 = reg / 2 * (np.sum(W1 * W1) + np.sum(W2 * W2))
    accuracy = (logits.argmax(axis=1) == y).mean()
    return nll + l2, accuracy


def train_step(params, X, y, reg):
    """One step of gradient descent on the loss (learning rate 0.01)."""
    grads = tracejit.grad(lambda p: loss_and_accuracy(p, X, y, reg)[0])(params)
    return {k: params[k] - 0.01 * grads[k] for k in params}


def _time(fn, *args, repeat: int) -> float:
    """Seconds per call, best of 3 loops; GPU calls are waited for at the end of a loop."""
    fn(*args)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn(*args)
        tracejit.synchronize()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best


def run_backend(backend: str, params, X, y, show_ir: bool) -> None:
    host = params, X, y
    if backend == "cuda":  # resident on the GPU, like Theano's shared variables
        params = {k: tracejit.to_device(v, "cuda") for k, v in params.items()}
        X, y = tracejit.to_device(X, "cuda"), tracejit.to_device(y, "cuda")
    step = tracejit.jit(loss_and_accuracy, backend=backend)
    t0 = time.perf_counter()
    loss, acc = (float(tracejit.to_host(v)) for v in step(params, X, y, 0.01))
    first = time.perf_counter() - t0
    ref_loss, _ = loss_and_accuracy(*host, 0.01)
    lowered = step.lower(params, X, y, 0.01)
    where = "cuda:0" if backend == "cuda" else "cpu"
    tag = f"[{where}/{backend}]"
    kernels = lowered.source.count("def kernel") + lowered.source.count("__global__ void")
    what = (f"{kernels} fused {'CUDA' if backend == 'cuda' else 'Numba'} kernels" if kernels
            else "NumPy interprets the IR")
    print(f"\n{tag} first call (trace + passes + compile + run): {first:.3f} s; "
          f"{len(lowered.graph.nodes)} IR nodes traced, {what}")
    print(f"{tag} loss={loss:.6f} accuracy={acc:.3f}   "
          f"|loss - NumPy's| = {abs(float(loss) - float(ref_loss)):.1e}")
    t_jit = _time(step, params, X, y, 0.01, repeat=20)
    t_np = _time(loss_and_accuracy, *host, 0.01, repeat=20)
    print(f"{tag} cached call: {t_jit * 1e3:.2f} ms   NumPy eager: {t_np * 1e3:.2f} ms   "
          f"(tracejit takes {t_jit / t_np:.2f}x NumPy's time)")
    step = tracejit.jit(train_step, backend=backend)
    t0 = time.perf_counter()
    new = step(params, X, y, 0.01)
    first = time.perf_counter() - t0
    new_loss = float(loss_and_accuracy({k: tracejit.to_host(v) for k, v in new.items()},
                                       *host[1:], 0.01)[0])
    t_step = _time(step, params, X, y, 0.01, repeat=20)
    print(f"{tag} gradient step: first call {first:.3f} s, then {t_step * 1e3:.2f} ms; "
          f"loss after it {new_loss:.6f} (down {float(loss) - new_loss:.2e})")
    if show_ir:
        print(f"\n{lowered.optimized_ir}" if not kernels else f"\n{lowered.source}")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit} ago"
    return f"{max(seconds, 0):.0f} s ago"


def cache_command(action: str) -> None:
    """``python -m tracejit cache``: list the disk cache's entries (least recently used
    first, as eviction takes them), ``prune`` it to its cap now, or ``clear`` it."""
    root, cap = diskcache.cache_dir(), diskcache.max_bytes()
    cap_text = "no cap" if cap is None else f"cap {_size(cap)}"
    distrust = diskcache._distrust(root) if root.is_dir() else None
    if distrust:
        print(f"{root} is {distrust}: tracejit neither uses nor deletes anything in it")
    if action in ("prune", "clear"):
        done = diskcache.prune(root) if action == "prune" else diskcache.clear(root)
        kept = f"; {done.kept} left alone (not private to you)" if done.kept else ""
        print(f"{action}: removed {done.count} entr{'y' if done.count == 1 else 'ies'} "
              f"({_size(done.freed)}) from {root}; {_size(done.left)} left ({cap_text}){kept}")
        return
    found = diskcache.entries(root)
    print(f"tracejit disk cache: {root}")
    if found:
        now = time.time()
        print(f"{'key':<12}  {'kernel':<40}  {'kernels':>7}  {'size':>10}  "
              f"{'written':>11}  {'last used':>11}")
        for e in found:
            note = f"  (left alone: {e.distrust})" if e.distrust else ""
            kernel = e.function if len(e.function) <= 40 else e.function[:37] + "..."
            print(f"{e.directory.name[:12]}  {kernel:<40}  {e.kernels:>7}  "
                  f"{_size(e.size):>10}  {_age(now - e.written):>11}  "
                  f"{_age(now - e.used):>11}{note}")
    total = sum(e.size for e in found)
    print(f"{len(found)} entr{'y' if len(found) == 1 else 'ies'}, {_size(total)} "
          f"({cap_text}, TRACEJIT_CACHE_MAX)")


def prebuild_command(directory: str | None) -> None:
    """``python -m tracejit prebuild``: compile the prebuilt kernels unless they are current."""
    from tracejit.backends.cpu import prebuilt

    start = time.perf_counter()
    library = prebuilt.build(directory)
    print(f"tracejit prebuilt kernels: {library} ({time.perf_counter() - start:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tracejit", description=__doc__)
    parser.add_argument("--backend", action="append", choices=tracejit.available_backends(),
                        help="backend(s) to run (default: all)")
    parser.add_argument("--show", action="store_true",
                        help="print the optimised IR / generated source")
    commands = parser.add_subparsers(dest="command", metavar="cache | prebuild",
                                     help="without one, run the demo workload")
    cache = commands.add_parser("cache", help="show, prune or clear the CPU disk cache")
    cache.add_argument("action", nargs="?", choices=("list", "prune", "clear"),
                       default="list", help="list entries (default), evict least recently "
                       "used ones down to TRACEJIT_CACHE_MAX, or remove them all")
    prebuild = commands.add_parser("prebuild", help="build the prebuilt kernels first calls "
                                   "run on (the install builds them)")
    prebuild.add_argument("directory", nargs="?", default=None,
                          help="where (default: _prebuilt beside the package)")
    args = parser.parse_args()
    if args.command == "cache":
        cache_command(args.action)
        return
    if args.command == "prebuild":
        prebuild_command(args.directory)
        return

    rng = np.random.default_rng(0)
    X, y = make_moons(5000, 0.2, rng)
    params = {
        "W1": (rng.standard_normal((2, 1000)) / np.sqrt(2)).astype(np.float32),
        "b1": np.zeros(1000, np.float32),
        "W2": (rng.standard_normal((1000, 2)) / np.sqrt(1000)).astype(np.float32),
        "b2": np.zeros(2, np.float32),
    }
    print(f"tracejit {tracejit.__version__} | numpy {np.__version__} | "
          f"Python {platform.python_version()} | {platform.machine()}, {os.cpu_count()} cores")
    found = ", ".join(str(d) for d in tracejit.devices())
    print(f"devices: {found}")
    print("workload: two-moons net loss and gradient step, X f32[5000,2] -> 1000 tanh -> 2")
    for backend in args.backend or tracejit.available_backends():
        run_backend(backend, params, X, y, args.show)


if __name__ == "__main__":
    main()
