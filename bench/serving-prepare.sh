#!/usr/bin/env bash
# Builds, on a machine without a GPU, what bench/run-serving.sh needs on the GPU machine:
#   DEST/moejit-*-cpXY-*.whl                      the Python package, one wheel per python version
#   DEST/packs/gpt-oss-120b-tp{1,2}-sm_90a.pack   AOT packs of the gpt-oss-120b plans (max_num_tokens 8192),
#                                                 checked to serve every kernel of the replayed layer
#   bash bench/serving-prepare.sh [DEST]      (default build/serving)
#   PYTHONS="3.12 3.11"   python versions to build wheels for (default 3.12: the GPU machine's python3);
#                         each needs a python of that version here (python3.X, or pyenv's)
# About 5 minutes on 2 cores for the first wheel, 1-2 more per further version, about 25 s for the packs.
# The build environments live in build/serving-venv-*, outside DEST (DEST is what travels).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-build/serving}"
PYTHONS="${PYTHONS:-3.12}"
MAX_NUM_TOKENS="${MAX_NUM_TOKENS:-8192}"
mkdir -p "$DEST/packs" build
DEST="$(cd "$DEST" && pwd)"

find_python() {  # an interpreter of version $1 that runs (a pyenv shim of a version not selected does not)
  local v="$1" c
  for c in "python$v" "$HOME/.pyenv/versions/$v"*/bin/"python$v" "/usr/bin/python$v" "/usr/local/bin/python$v"; do
    if [ -x "$(command -v "$c" 2>/dev/null || echo "$c")" ] && \
       [ "$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$v" ]; then
      command -v "$c" 2>/dev/null || echo "$c"
      return 0
    fi
  done
  return 1
}

CMAKE_ARGS="${CMAKE_ARGS:-}"
if command -v ccache >/dev/null 2>&1; then
  CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
rm -f "$DEST"/moejit-*.whl
FIRST_VENV=""
for v in $PYTHONS; do
  PY="$(find_python "$v")" || { echo "serving-prepare.sh: no working python$v here (PYTHONS=$PYTHONS)" >&2; exit 2; }
  VENV="$PWD/build/serving-venv-$v"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0"
  echo "serving-prepare.sh: wheel for python $v ($PY)"
  CMAKE_ARGS="$CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
    "$VENV/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$DEST" .
  WHEEL="$(ls -t "$DEST"/moejit-*-cp${v/./}-*.whl | head -1)"
  "$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$WHEEL"
  [ -n "$FIRST_VENV" ] || FIRST_VENV="$VENV"
done
VENV="$FIRST_VENV"
for tp in 1 2; do
  pack="$DEST/packs/gpt-oss-120b-tp$tp-sm_90a.pack"
  rm -f "$pack"
  cache="$(mktemp -d)"
  "$VENV/bin/moejit-prewarm" --model gpt-oss-120b --max-num-tokens "$MAX_NUM_TOKENS" --arch sm_90a --tp "$tp" \
    -j "${JOBS:-2}" --cache-dir "$cache" --pack "$pack" --json "$DEST/packs/prewarm-tp$tp.json" >/dev/null
  rm -rf "$cache"
done
# The packs must serve the layer the replay prewarms (a pack that misses would make moejit_pack compile).
"$VENV/bin/python" bench/serving_replay.py check-pack --pack-dir "$DEST/packs" --tp 1,2 --max-num-tokens "$MAX_NUM_TOKENS"
ls -la "$DEST" "$DEST/packs"
du -sh "$DEST"
echo "serving-prepare.sh: copy $DEST (wheels $(cd "$DEST" && ls moejit-*.whl | tr '\n' ' '), packs in $DEST/packs)"
