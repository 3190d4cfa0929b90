#!/usr/bin/env bash
# Builds, on a machine without a GPU, what bench/run-serving.sh carries to the GPU machine:
#   DEST/moejit-*-cp312-*.whl             the Python package for the GPU machine's python3 (3.12)
#   DEST/packs/gpt-oss-120b-tp{1,2}-sm_90a.pack   AOT packs of the gpt-oss-120b plans (max_num_tokens 8192)
#   bash bench/serving-prepare.sh [DEST]      (default build/serving; PYTHON=python3.12 picks the interpreter)
# About 5 minutes on 2 cores (the wheel) plus about 25 s (the two packs, -j2).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-build/serving}"
PY="${PYTHON:-$(command -v python3.12 || echo python3)}"
MAX_NUM_TOKENS="${MAX_NUM_TOKENS:-8192}"
mkdir -p "$DEST/packs"
DEST="$(cd "$DEST" && pwd)"
VENV="$DEST/venv"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0"
CMAKE_ARGS="${CMAKE_ARGS:-}"
if command -v ccache >/dev/null 2>&1; then
  CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
rm -f "$DEST"/moejit-*.whl
CMAKE_ARGS="$CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
  "$VENV/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$DEST" .
WHEEL="$(ls "$DEST"/moejit-*.whl)"
"$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$WHEEL"
for tp in 1 2; do
  pack="$DEST/packs/gpt-oss-120b-tp$tp-sm_90a.pack"
  rm -f "$pack"
  cache="$(mktemp -d)"
  "$VENV/bin/moejit-prewarm" --model gpt-oss-120b --max-num-tokens "$MAX_NUM_TOKENS" --arch sm_90a --tp "$tp" \
    -j "${JOBS:-2}" --cache-dir "$cache" --pack "$pack" --json "$DEST/packs/prewarm-tp$tp.json" >/dev/null
  rm -rf "$cache"
done
rm -rf "$VENV"
ls -la "$DEST" "$DEST/packs"
echo "serving-prepare.sh: carry $DEST (wheel $(basename "$WHEEL"), packs in $DEST/packs)"
