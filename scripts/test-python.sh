#!/usr/bin/env bash
# Builds and installs the Python package (pip install . into a virtual
# environment) and runs its tests (python/tests; the GPU ones skip without a
# GPU or without torch).
#   bash scripts/test-python.sh           # venv in build/python-venv
#   VENV=/path/to/venv bash scripts/test-python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-build/python-venv}"
mkdir -p "$(dirname "$VENV")"
VENV="$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")"
PY="${PYTHON:-python3}"

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
if [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; then
  bash scripts/install-deps.sh
  # Why a venv: Debian's system pip refuses to install into the system Python (PEP 668).
  if ! "$PY" -c "import venv, ensurepip" >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv python3-dev
  fi
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" pytest numpy
# The build tree lives in build/python-<tag> (pyproject.toml), so a second run
# rebuilds only what changed.
CMAKE_ARGS="${CMAKE_ARGS:-}"
if command -v ccache >/dev/null 2>&1; then
  CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
CMAKE_ARGS="$CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc 2>/dev/null || echo 2)}" \
  "$VENV/bin/python" -m pip install --no-build-isolation .

if [ -z "${MOEJIT_CACHE_DIR:-}" ]; then
  MOEJIT_CACHE_DIR="$(mktemp -d -t moejit-test-cache.XXXXXX)"
  trap 'rm -rf "$MOEJIT_CACHE_DIR"' EXIT
fi
export MOEJIT_CACHE_DIR MOEJIT_LOG_LEVEL="${MOEJIT_LOG_LEVEL:-warn}"
# From python/tests, so that `import moejit` is the installed package.
cd python/tests
"$VENV/bin/python" -c "import moejit; print(moejit.plan(moejit.embedded_model('gpt-oss-120b'), max_num_tokens=20000).num_keys)"
PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pytest -q -rs .
