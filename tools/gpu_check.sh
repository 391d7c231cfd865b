#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (e.g. the device tool's H100 image: python3
# with numba, numba-cuda, cupy-cuda13x, torch and triton; no package registry):
#   bash tools/gpu_check.sh [OUT_DIR]
# installs jitgrad without dependencies, runs the CUDA test suite on the real GPU
# (JITGRAD_TEST_GPU=1: the gpu-marked tests too) and the CUDA benchmark, and writes
# gpu_tests.log, cuda_bench.json and cuda_bench.txt to OUT_DIR (default: $OUT, else
# docs/benchmarks). pytest must be importable: carry its wheel (and pluggy, iniconfig,
# packaging) if the image lacks it, see /work/.library/device/README.md.
set -u
out="${1:-${OUT:-docs/benchmarks}}"
mkdir -p "$out"
py=python3
export PYTHONUNBUFFERED=1 JITGRAD_TEST_GPU=1 JITGRAD_CACHE_DIR="${JITGRAD_CACHE_DIR:-/tmp/jitgrad-gpu-cache}"
unset NUMBA_ENABLE_CUDASIM
if ! $py -c "import jitgrad" 2>/dev/null; then
    $py -m pip install -q --no-deps --no-index --no-build-isolation -e . \
        || { echo "could not install jitgrad (needs setuptools in the image)"; exit 1; }
fi
$py - <<'PY'
import jitgrad, numba, sys
print("python", sys.version.split()[0], "numba", numba.__version__)
print("cuda available:", jitgrad.cuda.is_available(), "simulated:", jitgrad.cuda.is_simulated(),
      jitgrad.cuda.runtime.unavailable_reason())
print("device:", jitgrad.cuda.get_device_name(), jitgrad.cuda.get_device_capability())
PY
status=0
if $py -c "import pytest" 2>/dev/null; then
    $py -m pytest -q -p no:cacheprovider tests/cuda -m "slow or not slow" 2>&1 | tee "$out/gpu_tests.log" | tail -30
    status=${PIPESTATUS[0]}
    # a warm process compiles nothing: the second run loads every kernel from the cache
    $py -m pytest -q -p no:cacheprovider tests/cuda -k "compiled" 2>&1 | tail -3 >> "$out/gpu_tests.log"
else
    echo "pytest is not installed: carry its wheel to run tests/cuda" | tee "$out/gpu_tests.log"
    status=1
fi
$py asv_benchmarks/cuda_bench.py --out "$out" || status=1
exit $status
