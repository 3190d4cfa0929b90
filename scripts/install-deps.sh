#!/usr/bin/env bash
# Installs the Debian packages moejit builds and tests with. Idempotent.
# The CUDA toolkit (NVRTC headers, cuda.h) is expected at $CUDA_HOME (default /usr/local/cuda).
set -euo pipefail
pkgs=(cmake g++ make python3 libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev catch2 libxxhash-dev)
# FUZZ=1 (scripts/fuzz.sh only): clang for libFuzzer; not needed by the main build and tests.
if [ "${FUZZ:-0}" = 1 ]; then pkgs+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
fi
