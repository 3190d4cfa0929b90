#!/usr/bin/env bash
# Runs the Python package's tests (GPU ones included), the gpt-oss-120b
# example and the host-cost benchmark (bench/python_overhead.py --gpu) on a
# machine with an NVIDIA GPU, from a prebuilt wheel:
#   bash scripts/python-gpu-tests.sh [WHEEL [EXAMPLE ARGS...]]   # default: the newest dist/moejit-*.whl
# Needs python3 with torch (CUDA), numpy and pytest; installs the wheel with
# pip --no-deps --target into a private folder (nothing else is touched).
# Logs go to $MOEJIT_OUT_DIR (default ./python-gpu-out): info.txt, pytest.log, example.log,
# overhead.log and overhead.jsonl (the benchmark's verdict on the 5 us target is
# reported there, not in the exit status).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEEL="${1:-$(ls -t dist/moejit-*.whl 2>/dev/null | head -1)}"
[ $# -gt 0 ] && shift
WHEEL="$(realpath "$WHEEL" 2>/dev/null || echo "$WHEEL")"
OUT_DIR="${MOEJIT_OUT_DIR:-$PWD/python-gpu-out}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
if [ -z "$WHEEL" ] || [ ! -f "$WHEEL" ]; then
  echo "python-gpu-tests.sh: no wheel (build one with: pip wheel --no-deps -w dist .)" >&2
  exit 2
fi
TARGET="$(mktemp -d -t moejit-py.XXXXXX)"
"$PY" -m pip install --no-deps --no-compile --quiet --target "$TARGET" "$WHEEL" || exit 3
export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$TARGET/bin:$PATH"
# One kernel cache for the tests and the example, private to this run (outside
# the log folder: its entries are no logs).
CACHE_TMP=""
if [ -z "${MOEJIT_CACHE_DIR:-}" ]; then
  CACHE_TMP="$(mktemp -d -t moejit-py-cache.XXXXXX)"
  export MOEJIT_CACHE_DIR="$CACHE_TMP"
fi
cd python/tests  # import moejit from the wheel, never from the source tree

rc=0
{ "$PY" -m moejit --version; "$PY" -m moejit info; nvidia-smi -L 2>/dev/null; } 2>&1 | tee "$OUT_DIR/info.txt"
"$PY" -m pytest -v -rs . 2>&1 | tee "$OUT_DIR/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
"$PY" ../../examples/gpt_oss_120b_random.py "$@" 2>&1 | tee "$OUT_DIR/example.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
"$PY" ../../bench/python_overhead.py --gpu --json "$OUT_DIR/overhead.jsonl" 2>&1 | tee "$OUT_DIR/overhead.log"
rm -rf "$TARGET" ${CACHE_TMP:+"$CACHE_TMP"}
echo "python-gpu-tests.sh: exit $rc (logs in $OUT_DIR)"
exit $rc
