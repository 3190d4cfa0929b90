#!/usr/bin/env bash
# The GPU suite, one command on the accelerator machine (H200):
#   bash scripts/gpu-suite.sh [BUILD_DIR]
# Runs the Catch2 GPU tests (every kernel against the float64 CPU reference,
# padding invariance by memcmp) and the gpt-oss-120b layer demo (check + timing).
# Logs go to $OUT (the device tool's output folder) or ./gpu-suite-out.
# Build here with scripts/build.sh (or cmake) and carry the two binaries:
#   build/tests/moejit_tests_gpu and build/tools/moejit-run.
set -uo pipefail
BUILD=${1:-build}
OUT=${OUT:-$PWD/gpu-suite-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$OUT/gpu.txt"
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-$(mktemp -d)}
start=$(date +%s)
"$BUILD/tests/moejit_tests_gpu" --durations yes 2>&1 | tee "$OUT/gpu-suite.log"
suite=${PIPESTATUS[0]}
"$BUILD/tools/moejit-run" --model gpt-oss-120b --tokens 1,8,64,512,4096 2>&1 | tee "$OUT/moejit-run.log"
run=${PIPESTATUS[0]}
echo "gpu suite exit $suite, moejit-run exit $run, $(( $(date +%s) - start )) s"
[ "$suite" -eq 0 ] && [ "$run" -eq 0 ]
