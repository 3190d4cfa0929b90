#!/usr/bin/env bash
# Installs dependencies, builds, runs the test suites (ctest).
# The CPU suite needs no GPU; the GPU suite reports "Skipped" without one.
#   bash scripts/test.sh            # build/ in the repository root
#   BUILD_DIR=out bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
  bash scripts/install-deps.sh
else
  echo "scripts/test.sh: not root and no sudo: skipping the dependency install" >&2
fi

cmake -S . -B "$BUILD_DIR" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j "$JOBS"
# Why a private cache directory: the tests must neither read nor pollute the
# user's ~/.cache/moejit.
if [ -z "${MOEJIT_CACHE_DIR:-}" ]; then
  MOEJIT_CACHE_DIR="$(mktemp -d -t moejit-test-cache.XXXXXX)"
  trap 'rm -rf "$MOEJIT_CACHE_DIR"' EXIT
fi
export MOEJIT_CACHE_DIR
ctest --test-dir "$BUILD_DIR" --output-on-failure
