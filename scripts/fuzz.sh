#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in their own build dir and runs each
# for a bounded time from its committed seed corpus (tests/fuzz/corpus/<target>).
#   bash scripts/fuzz.sh                 # 20 s per target
#   FUZZ_SECONDS=60 bash scripts/fuzz.sh # at most 60 s per target
#   FUZZ_TARGETS="entry pack" bash scripts/fuzz.sh
# A crash leaves crash-* / leak-* files in $FUZZ_OUT (default build-fuzz/findings)
# and makes the script exit non-zero; add the input as a regression test in tests/cpu.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${FUZZ_BUILD_DIR:-build-fuzz}"
SECONDS_PER="${FUZZ_SECONDS:-20}"
if [ "$SECONDS_PER" -gt 60 ]; then SECONDS_PER=60; fi
TARGETS="${FUZZ_TARGETS:-entry pack key hf_config}"
OUT="${FUZZ_OUT:-$BUILD_DIR/findings}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

# clang and its libFuzzer runtime (compiler-rt); idempotent.
if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
  FUZZ=1 bash scripts/install-deps.sh
elif ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz.sh: clang++ missing (apt-get install clang libclang-rt-14-dev)" >&2
  exit 3
fi
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$BUILD_DIR" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DMOEJIT_BUILD_FUZZ=ON -DMOEJIT_BUILD_TESTS=OFF -DMOEJIT_BUILD_TOOLS=OFF -DMOEJIT_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target $(for t in $TARGETS; do printf 'fuzz_%s ' "$t"; done)
mkdir -p "$OUT"
status=0
for t in $TARGETS; do
  work="$OUT/corpus-$t"
  mkdir -p "$work"
  echo "== fuzz_$t: ${SECONDS_PER}s from tests/fuzz/corpus/$t"
  # Why a scratch corpus dir first: new inputs go there, the committed seeds stay as they are.
  if ! "$BUILD_DIR/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_PER" -max_len=65536 -rss_limit_mb=2048 \
       -artifact_prefix="$OUT/$t-" -print_final_stats=1 "$work" "tests/fuzz/corpus/$t" 2>"$OUT/$t.log"; then
    echo "fuzz_$t: FAILED (see $OUT/$t.log and $OUT/$t-*)" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$OUT/$t.log" | sed "s/^/  fuzz_$t /" || true
done
exit $status
