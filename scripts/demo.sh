#!/usr/bin/env bash
# Fresh machine to warm cache in one command: installs dependencies, builds,
# prewarms gpt-oss-120b (every bucket up to 20000 tokens) into a local cache and
# prints the report; then, if a GPU is present, runs the kernel demo.
#   bash scripts/demo.sh
#   MOEJIT_CACHE_DIR=/tmp/c MAX_NUM_TOKENS=8192 bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
MAX_NUM_TOKENS="${MAX_NUM_TOKENS:-20000}"
export MOEJIT_CACHE_DIR="${MOEJIT_CACHE_DIR:-$PWD/.moejit-cache}"

if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
  bash scripts/install-deps.sh
else
  echo "scripts/demo.sh: not root and no sudo: skipping the dependency install" >&2
fi

cmake -S . -B "$BUILD_DIR" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j "$JOBS" --target moejit-prewarm moejit-cache

tool() {  # the tools live in build/tools/<name>/<name> or build/tools/<name>
  if [ -x "$BUILD_DIR/tools/$1/$1" ]; then echo "$BUILD_DIR/tools/$1/$1"; else echo "$BUILD_DIR/tools/$1"; fi
}

echo "== prewarm gpt-oss-120b, max $MAX_NUM_TOKENS tokens, cache $MOEJIT_CACHE_DIR"
"$(tool moejit-prewarm)" --model gpt-oss-120b --max-num-tokens "$MAX_NUM_TOKENS" -j "$JOBS" \
  --json "$BUILD_DIR/prewarm-report.json"
echo "== the same again (every kernel from the disk cache)"
"$(tool moejit-prewarm)" --model gpt-oss-120b --max-num-tokens "$MAX_NUM_TOKENS" -j "$JOBS" --seal-check
echo "== cache"
"$(tool moejit-cache)" stats

have_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L >/dev/null 2>&1; return; fi
  [ -e /dev/nvidia0 ]
}
if have_gpu; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target moejit-run 2>/dev/null || true
  RUN="$(tool moejit-run)"
  if [ -x "$RUN" ]; then
    echo "== kernel demo on the GPU"
    "$RUN" --model gpt-oss-120b --cache-dir "$MOEJIT_CACHE_DIR"
  else
    echo "== no kernel demo binary ($RUN) in this build"
  fi
else
  echo "== no GPU on this machine: skipping the kernel demo"
fi
