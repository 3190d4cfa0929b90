#!/usr/bin/env bash
# The GPU suite, one command on a machine with an NVIDIA GPU (sm_90a: H100/H200):
#   bash scripts/gpu-suite.sh [BUILD_DIR]
# Runs the Catch2 GPU tests (every kernel against the float64 CPU reference,
# padding invariance by memcmp) and the gpt-oss-120b layer demo (check + timing).
# Logs go to $MOEJIT_OUT_DIR when set, else to a new folder under ${TMPDIR:-/tmp} (never
# into the source tree); the folder is printed first.
# The binaries need no toolkit on the GPU machine: build elsewhere and copy
#   BUILD_DIR/tests/moejit_tests_gpu and BUILD_DIR/tools/moejit-run.
# Exit codes: 0 all passed, 1 a test or the demo failed, 2 a binary is missing,
# 77 no usable GPU (prints SKIPPED; ctest's skip code).
set -uo pipefail
BUILD=${1:-build}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIPPED: no usable NVIDIA GPU on this machine (nvidia-smi missing or lists no GPU); nothing was run"
  exit 77
fi
run_bin="$BUILD/tools/moejit-run"
[ -f "$run_bin" ] || run_bin="$BUILD/tools/moejit-run/moejit-run"
for bin in "$BUILD/tests/moejit_tests_gpu" "$run_bin"; do
  if [ ! -x "$bin" ]; then
    echo "gpu-suite: error: $bin is not built (cmake --build $BUILD --target moejit_tests_gpu moejit-run)" >&2
    exit 2
  fi
done
OUT_DIR=${MOEJIT_OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/moejit-gpu-suite.XXXXXX")}
mkdir -p "$OUT_DIR"
echo "gpu-suite: logs in $OUT_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$OUT_DIR/gpu.txt"
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-$(mktemp -d)}
start=$(date +%s)
"$BUILD/tests/moejit_tests_gpu" --durations yes 2>&1 | tee "$OUT_DIR/gpu-suite.log"
suite=${PIPESTATUS[0]}
"$run_bin" --model gpt-oss-120b --tokens 1,8,64,512,4096 2>&1 | tee "$OUT_DIR/moejit-run.log"
run=${PIPESTATUS[0]}
# The FP8 layers at two decode T (per-channel weight scales for per token).
for args in "--quant mxfp8" "--quant fp8_per_token --weight-scale per_channel"; do
  # shellcheck disable=SC2086
  "$run_bin" --model qwen3-30b-a3b $args --tokens 1,64 --iters 10 2>&1 | tee -a "$OUT_DIR/moejit-run.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || run=1
done
echo "gpu suite exit $suite, moejit-run exit $run, $(( $(date +%s) - start )) s; logs in $OUT_DIR"
[ "$suite" -eq 0 ] && [ "$run" -eq 0 ]
