#!/usr/bin/env bash
# The CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# concurrency tests under ThreadSanitizer, each in its own build dir.
#   bash scripts/sanitize.sh          # both
#   bash scripts/sanitize.sh asan     # ASan+UBSan only
#   bash scripts/sanitize.sh tsan     # TSan only
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT="${1:-all}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
# Why warn: tests count warnings (one per quarantined entry, refused directory, ...).
export MOEJIT_LOG_LEVEL=warn
tmp="$(mktemp -d -t moejit-sanitize.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
export MOEJIT_CACHE_DIR="$tmp/cache"

build() {  # dir flags targets...
  local dir="$1" flags="$2"; shift 2
  cmake -S . -B "$dir" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DMOEJIT_BUILD_BENCH=OFF >/dev/null
  cmake --build "$dir" -j "$JOBS" --target "$@"
}

if [ "$WHAT" = all ] || [ "$WHAT" = asan ]; then
  start=$(date +%s)
  build build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined" moejit_tests_cpu moejit-prewarm moejit-cache
  # Why detect_leaks=0 under fork tests: a SIGKILLed child cannot run LSan; the parent still checks.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    build-asan/tests/moejit_tests_cpu --order rand
  echo "asan+ubsan: $(( $(date +%s) - start )) s (build + run)"
fi
if [ "$WHAT" = all ] || [ "$WHAT" = tsan ]; then
  start=$(date +%s)
  build build-tsan "-fsanitize=thread" moejit_tests_cpu moejit-prewarm moejit-cache
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    build-tsan/tests/moejit_tests_cpu "[concurrency],[runtime],[crash],[cap]"
  echo "tsan: $(( $(date +%s) - start )) s (build + run)"
fi
