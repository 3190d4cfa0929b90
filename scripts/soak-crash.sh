#!/usr/bin/env bash
# Crash-safety soak: the random-SIGKILL test with many more rounds than the suite's 50.
#   bash scripts/soak-crash.sh [ROUNDS]     # default 1000; needs a built build/tests/moejit_tests_cpu
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-1000}"
BIN="${BUILD_DIR:-build}/tests/moejit_tests_cpu"
[ -x "$BIN" ] || { echo "soak-crash.sh: $BIN not built (bash scripts/test.sh)" >&2; exit 3; }
export MOEJIT_LOG_LEVEL=error
start=$(date +%s)
MOEJIT_CRASH_ROUNDS="$ROUNDS" "$BIN" "crash safety: SIGKILL at random moments never leaves a loadable partial entry" -s 2>&1 | grep -E "killed|passed|failed|FAILED" | tail -5
echo "soak: $ROUNDS rounds in $(( $(date +%s) - start )) s"
