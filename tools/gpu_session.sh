#!/usr/bin/env bash
# One lease of a real GPU: the CUDA tests, the Dask tests of CuPy chunks, an explore run of
# random programs, bench/bench_cuda.py and a profile of the GPU gradient step in one
# command, each part under its own time limit, everything it learns written to $OUT (8
# files; the device tool brings back at most 8). Run from the repository root on the GPU
# machine:
#   OUT=/some/dir bash tools/gpu_session.sh [suite s] [bench s] [profile s] [profile args]
# Its logs are the record behind bench/results/cuda-h*.md. Packages the GPU image lacks
# travel as wheels in .whl/ (ignored by git), fetched here for its Python 3.12:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl jsonschema jsonschema-specifications \
#     referencing rpds-py dask distributed partd locket tblib zict tornado
# (the versions of dask and distributed this project's venv has), and the run carries .whl.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=src:tools TRACEJIT_TEST_REAL_GPU=1
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
BROAD_S=${1:-150}; BENCH_S=${2:-170}; PROFILE_S=${3:-90}; PROFILE_ARGS=${4:-}
# test-only packages the GPU image lacks (jsonschema), carried as wheels in .whl/
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
PY=python3
N=$(( $(nproc) > 12 ? 11 : $(nproc) ))
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }

stamp env
{ nvidia-smi; nvcc --version | tail -2; uname -a
  $PY -c 'import sys, numpy, numba, cupy, scipy; print(sys.version); print("numpy", numpy.__version__, "numba", numba.__version__, "cupy", cupy.__version__, "scipy", scipy.__version__); print(cupy.cuda.runtime.getDeviceProperties(0)["name"])'
  $PY -c 'import jax; print("jax", jax.__version__, jax.devices())'
  $PY -c 'import torch; print("torch", torch.__version__)'
  $PY -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3
  $PY -c 'import tracejit, tracejit.dispatch as d; print("tracejit", tracejit.__version__, tracejit.available_backends(), d.__dict__.get("Dispatcher"))'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

stamp "CUDA test files on the real GPU (4 workers, in the background)"
timeout -s INT -k 15 "$BROAD_S" $PY -m pytest tests/test_cuda.py tests/test_cuda_loops.py \
    tests/test_cuda_codegen.py -n 4 -p no:cacheprovider -o addopts="" -q -rfEs --tb=short \
    > "$OUT/tests-cuda-files.log" 2>&1 &
FILES_PID=$!

stamp "the backend-parametrised suite over cuda, $N workers, beside the CUDA test files, $BROAD_S s at most"
# the files whose tests take the conftest's `backend` fixture (so they run on cuda here)
FILES=$(grep -l -E 'def test_[a-z_0-9]*\([^)]*\bbackend\b' tests/test_*.py)
TRACEJIT_TEST_BACKENDS=cuda timeout -s INT -k 20 "$BROAD_S" $PY -m pytest $FILES -n "$N" \
    -p no:cacheprovider -o addopts="" -q -rfE --tb=short --timeout=120 \
    -W ignore::tracejit.errors.PlacementWarning > "$OUT/tests-broad.log" 2>&1
grep -E "^(FAILED|ERROR)" "$OUT/tests-broad.log" | cut -c1-200 | head -40
tail -3 "$OUT/tests-broad.log"
wait $FILES_PID
stamp "CUDA test files"
grep -E "^(FAILED|ERROR)" "$OUT/tests-cuda-files.log" | cut -c1-200 | head -20
tail -3 "$OUT/tests-cuda-files.log"

stamp "Dask arrays of CuPy chunks (a LocalCluster included), and 10,000 random programs"
if $PY -c "import dask, distributed" 2>/dev/null; then
    timeout -s INT -k 10 120 $PY -m pytest tests/test_dask.py -k cupy -p no:cacheprovider \
        -o addopts="" -q -rfEs --tb=short -W ignore::tracejit.errors.PlacementWarning 2>&1 | tail -3
else
    echo "no dask here: carry its wheels in .whl (see the top of this script)"
fi
timeout -s INT -k 10 120 $PY bench/explore.py --backend cuda --real-gpu --programs 10000 \
    --seed "$(date +%s)" --batch 32 --jobs "$((N + 3))" --out "$OUT/explore-real-gpu.md" | tail -1

stamp "bench_cuda.py"
timeout -s INT -k 15 "$BENCH_S" $PY bench/bench_cuda.py --deadline $((BENCH_S - 10)) \
    > "$OUT/bench-stdout.txt" 2>&1
tail -45 "$OUT/bench-stdout.txt"

stamp "where the gradient step's time goes (bench/profile_cuda_step.py)"
timeout -s INT -k 10 "$PROFILE_S" $PY bench/profile_cuda_step.py $PROFILE_ARGS 2>&1 | grep -v "^  *$" | cut -c1-150 | head -70

stamp done
