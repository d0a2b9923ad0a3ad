"""What a new user waits for: first calls in fresh processes with an empty disk cache.

    python bench/bench_first_call.py            # print the table
    python bench/bench_first_call.py --write    # also replace its section of RESULTS.md

Issue 13's workloads, each timed in a process of its own (imports excluded, an empty
``TRACEJIT_CACHE_DIR``), tracejit against JAX measured in the same run:

- the two-moons gradient step (``examples/two_moons.py``: 5000 x 2 -> 1000 tanh -> 2,
  float32): its first call, then in the same process a first call with 4000 rows; with
  ``compile="sync"`` and with ``compile="background"``, where it also records when the
  compiled kernels take over and how much slower the interpreter's calls run while the
  workers compile than with nothing compiling;
- ``tanh(x*y+.5)*exp(-x*x)+sqrt(abs(y))`` on 1M float32: its first call, which runs on the
  prebuilt kernels while its own compiles (``compile="sync"``'s default), and when the
  compiled kernel takes over; (no target, what a user of a fresh ``python`` waits for) the
  same with ``import numpy`` and the library's import added (``import tracejit``;
  ``import jax, jax.numpy``); and, in a process of its own, the first call with the
  prebuilt kernels off (``tj.config.prebuilt = False``), which waits for Numba.

tracejit's rows also show where the first call went (the compile log's trace, passes,
codegen and first-run phases, and the kernels compiled). Each figure is the median of
``--repeat`` fresh processes, run with Python's bytecode cache on, as a user's installation
has it: where the environment sets ``PYTHONDONTWRITEBYTECODE`` (this project's machines
do), every process would compile tracejit's sources again (about 50 ms of the chain's
first call here), while JAX's installed package reads its bytecode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from bench_cpu import machine_line, write_section

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")

# Issue 13's targets: seconds, "jax" (at most JAX's time) or a ratio (the last row)
TARGETS = {"step": 1.5, "step, 4000 rows": 0.2, "chain": 0.1, "step (background)": "jax",
           "until compiled code runs (background)": 1.5, "step, 4000 rows (background)": 0.2,
           "interpreter call while compiling / alone": 1.2}

_TRACEJIT = textwrap.dedent("""
    import time
    start = time.perf_counter()
    import numpy as np
    import tracejit as tj
    imports = time.perf_counter() - start
    import json, logging, statistics, sys
    sys.path.insert(0, {examples!r})
    import two_moons as tm
    from tracejit.datasets import make_moons

    phases = []
    class Log(logging.Handler):
        def emit(self, record):
            phases.append(record.getMessage())
    logging.getLogger("tracejit").addHandler(Log())
    logging.getLogger("tracejit").setLevel(logging.INFO)

    def timed(fn, *args):
        t0 = time.perf_counter(); fn(*args); return time.perf_counter() - t0

    out = {{}}
    if {workload!r} in ("step", "step-background"):
        X, y = make_moons(5000, 0.2, np.random.default_rng(0))
        Y = np.eye(2, dtype=np.float32)[y]
        p = tm.init_params()
        mode = "sync" if {workload!r} == "step" else "background"
        tj.config.compile = mode
        tag = "" if mode == "sync" else " (background)"
        start = time.perf_counter()
        out["step" + tag] = timed(tm.train_step, p, X, Y)
        if mode == "background":  # the caller keeps stepping while the kernels compile
            during = []
            while not any("runs compiled kernels now" in m for m in phases):
                during.append(timed(tm.train_step, p, X, Y))
            out["until compiled code runs (background)"] = time.perf_counter() - start
            alone = tj.jit(tm.train_step.__wrapped__, backend="reference")
            alone(p, X, Y)
            quiet = [timed(alone, p, X, Y) for _ in range(max(len(during), 5))]
            out["interpreter call while compiling / alone"] = (
                statistics.median(during) / statistics.median(quiet) if during else 1.0)
        out["step, 4000 rows" + tag] = timed(tm.train_step, p, X[:4000], Y[:4000])
    else:
        rng = np.random.default_rng(0)
        x, y = (rng.random(1 << 20, dtype=np.float32) for _ in range(2))
        chain = tj.jit(lambda x, y: np.tanh(x * y + .5) * np.exp(-x * x) + np.sqrt(np.abs(y)))
        if {workload!r} == "chain":  # on the prebuilt kernels, its own compiling meanwhile
            start = time.perf_counter()
            out["chain"] = timed(chain, x, y)
            out["chain, imports included"] = imports + out["chain"]
            chain.wait_compiled()
            out["chain: until compiled code runs"] = time.perf_counter() - start
        else:
            tj.config.prebuilt = False
            out["chain, waiting for its kernel"] = timed(chain, x, y)
    out["log"] = phases
    print(json.dumps(out))
""")

_JAX = textwrap.dedent("""
    import time
    start = time.perf_counter()
    import numpy as np
    import jax
    import jax.numpy
    imports = time.perf_counter() - start
    import json, sys
    sys.path[:0] = [{examples!r}, {bench!r}]
    import jax_two_moons
    import two_moons as tm
    from tracejit.datasets import make_moons

    def timed(fn, *args):
        t0 = time.perf_counter(); jax.block_until_ready(fn(*args))
        return time.perf_counter() - t0

    out = {{}}
    if {workload!r} == "step":
        step, _ = jax_two_moons.jax_step(jax)
        X, y = make_moons(5000, 0.2, np.random.default_rng(0))
        Y = np.eye(2, dtype=np.float32)[y]
        p = tm.init_params()
        out["step"] = timed(step, p, X, Y)
        out["step, 4000 rows"] = timed(step, p, X[:4000], Y[:4000])
    else:
        jnp = jax.numpy
        rng = np.random.default_rng(0)
        x, y = (rng.random(1 << 20, dtype=np.float32) for _ in range(2))
        chain = jax.jit(lambda x, y: jnp.tanh(x * y + .5) * jnp.exp(-x * x)
                        + jnp.sqrt(jnp.abs(y)))
        out["chain"] = timed(chain, x, y)
        out["chain, imports included"] = imports + out["chain"]
    print(json.dumps(out))
""")


def fresh(template: str, workload: str) -> dict:
    """One fresh process with an empty disk cache; its JSON report."""
    code = template.format(examples=EXAMPLES, bench=HERE, workload=workload)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRACEJIT_CACHE_DIR": cache, "PYTHONPATH": os.pathsep.join(
            [EXAMPLES, os.environ.get("PYTHONPATH", "")])}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        done = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                              capture_output=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def jax_installed() -> bool:
    return subprocess.run([sys.executable, "-c", "import jax"], capture_output=True).returncode == 0


def measure(repeat: int) -> tuple[dict, dict, dict]:
    """Medians over ``repeat`` processes: tracejit's times, JAX's, tracejit's compile logs
    (of the last process)."""
    ours: dict[str, list[float]] = {}
    theirs: dict[str, list[float]] = {}
    logs: dict[str, list[str]] = {}
    with_jax = jax_installed()
    for _ in range(repeat):
        for workload in ("step", "step-background", "chain", "chain-wait"):
            report = fresh(_TRACEJIT, workload)
            logs[workload] = report.pop("log")
            for k, v in report.items():
                ours.setdefault(k, []).append(v)
            if with_jax and workload not in ("step-background", "chain-wait"):
                for k, v in fresh(_JAX, workload).items():
                    theirs.setdefault(k, []).append(v)
    med = {k: statistics.median(v) for k, v in ours.items()}
    return med, {k: statistics.median(v) for k, v in theirs.items()}, logs


def report(ours: dict, theirs: dict, logs: dict, repeat: int) -> str:
    lines = [f"Median of {repeat} fresh processes each, empty disk cache, imports excluded "
             "but in the last row.", "",
             "| first call | tracejit | JAX | tracejit / JAX | target | met |",
             "|---|---|---|---|---|---|"]
    for k, t in ours.items():
        j = theirs.get(k.removesuffix(" (background)"))
        target = TARGETS.get(k)
        if k.endswith("/ alone"):  # a ratio of call times, not seconds
            met = "yes" if t <= target else "no"
            lines.append(f"| {k} | {t:.2f}x | | | <= {target}x | {met} |")
            continue
        bound = j if target == "jax" else target
        met = "" if bound is None else ("yes" if t <= bound else "no")
        goal = {"jax": "<= JAX", None: ""}.get(target, f"<= {target} s")
        lines.append(f"| {k} | {t:.3f} s | {f'{j:.3f} s' if j else ''} | "
                     f"{f'{t / j:.1f}x' if j else ''} | {goal} | {met} |")
    lines += ["", "tracejit's compile log in the last run (what the first calls spent):", "",
              "```"]
    for workload in ("step", "step-background", "chain", "chain-wait"):
        lines += logs.get(workload, [])
    lines.append("```")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per figure")
    args = parser.parse_args()
    ours, theirs, logs = measure(args.repeat)
    text = machine_line() + "\n\n" + report(ours, theirs, logs, args.repeat)
    print(text)
    if args.write:
        write_section("bench-first-call", "First calls in fresh processes (CPU)", text)


if __name__ == "__main__":
    main()
