#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (e.g. the device tool's H100/H200 image:
# python3 with numba, numba-cuda, cupy-cuda13x, torch, triton, pytest, pytest-xdist and
# pytest-timeout; no package registry):
#   bash tools/gpu_check.sh [OUT_DIR] [TEST_SECONDS] [BENCH_SECONDS] [BENCH_SECTIONS]
# installs jitgrad without dependencies, runs the CUDA benchmark (asv_benchmarks/cuda_bench.py;
# BENCH_SECTIONS as its --only, default all) and then the CUDA test suite on the real GPU
# (JITGRAD_TEST_GPU=1: the gpu-marked tests too; parallel workers, each test at most 120 s),
# each under its own time limit (default 240 s and 300 s; 0 skips the part).
# Writes env.txt, gpu_tests.log, cuda_bench.json and cuda_bench.txt to OUT_DIR (default:
# $OUT, else docs/benchmarks); the benchmark writes its files after every section, so a
# run cut short keeps what it measured. Exit status: non-zero if any part failed.
set -u
out="${1:-${OUT:-docs/benchmarks}}"
test_s="${2:-240}"
bench_s="${3:-300}"
sections="${4:-copy_GBps,launch,per_op,w2,tuning,mlp,cnn}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 JITGRAD_TEST_GPU=1 JITGRAD_CACHE_DIR="${JITGRAD_CACHE_DIR:-/tmp/jitgrad-gpu-cache}"
# the packed launch path (jitgrad/cuda/fast_launch.py) is off by default until it has run on
# a GPU: the suite and the benchmark run with it (set JITGRAD_CUDA_FAST_LAUNCH=0 to compare)
export JITGRAD_CUDA_FAST_LAUNCH="${JITGRAD_CUDA_FAST_LAUNCH:-1}"
unset NUMBA_ENABLE_CUDASIM
t0=$(date +%s)
{
    nvidia-smi -L 2>&1 | head -4
    $py -m pip list 2>/dev/null | grep -i -E "^(numba|numba-cuda|cupy|torch|numpy|llvmlite|cuda-) "
    command -v gcc >/dev/null && gcc --version | head -1 || echo "no gcc: jitgrad's optional C extensions are not built"
} > "$out/env.txt" 2>&1
if ! $py -c "import jitgrad" 2>/dev/null; then
    if ! $py -m pip install -q --no-deps --no-index --no-build-isolation -e . >> "$out/env.txt" 2>&1; then
        # no setuptools/wheel to build with: run from the tree (jitgrad.kernels is kernels/;
        # the optional C extensions are then not built and jitgrad uses its Python paths)
        echo "pip could not install jitgrad: running it from the source tree" >> "$out/env.txt"
        [ -e jitgrad/kernels ] || ln -s ../kernels jitgrad/kernels
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    fi
fi
$py - >> "$out/env.txt" 2>&1 <<'PY'
import jitgrad, numba, sys
print("python", sys.version.split()[0], "numba", numba.__version__)
print("cuda available:", jitgrad.cuda.is_available(), "simulated:", jitgrad.cuda.is_simulated(),
      jitgrad.cuda.runtime.unavailable_reason())
print("device:", jitgrad.cuda.get_device_name(), jitgrad.cuda.get_device_capability())
PY
cat "$out/env.txt"
echo "setup: $(( $(date +%s) - t0 )) s"
status=0
if [ "$bench_s" != 0 ]; then
    t1=$(date +%s)
    timeout "$bench_s" $py asv_benchmarks/cuda_bench.py --out "$out" --only "$sections" \
        2> "$out/cuda_bench.err" || { echo "benchmark: exit $?"; status=1; }
    tail -30 "$out/cuda_bench.err"
    echo "benchmark: $(( $(date +%s) - t1 )) s"
fi
if [ "$test_s" != 0 ]; then
    opts=""  # the image has pytest-xdist and pytest-timeout; both are optional here
    $py -c "import xdist" 2>/dev/null && opts="-n 12"
    $py -c "import pytest_timeout" 2>/dev/null && opts="$opts --timeout 120"
    t1=$(date +%s)
    timeout "$test_s" $py -m pytest -q -p no:cacheprovider $opts -rfE --tb=short \
        tests/cuda -m "slow or not slow" > "$out/gpu_tests.log" 2>&1 || status=1
    tail -40 "$out/gpu_tests.log"
    echo "failures by error (first line of each):"
    grep -E "^E   +[A-Za-z_.]+(Error|Exception|Warning)" "$out/gpu_tests.log" | cut -c1-160 \
        | sort | uniq -c | sort -rn | head -15
    echo "$(grep -c '^FAILED' "$out/gpu_tests.log") tests failed"
    echo "tests: $(( $(date +%s) - t1 )) s"
fi
exit $status
