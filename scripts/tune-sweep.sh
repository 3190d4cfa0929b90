#!/usr/bin/env bash
# Tile-parameter sweep of the MXFP4 grouped GEMMs on the accelerator machine:
#   bash scripts/tune-sweep.sh MOEJIT_RUN TOKENS "TUNE1" "TUNE2" ...
# Runs moejit-run (gpt-oss-120b, w4a16_mxfp4) once per MOEJIT_GEMM_TUNE value
# ("" = the heuristic) and prints the layer and per-step medians of each.
set -uo pipefail
RUN=$1 TOKENS=$2
shift 2
for tune in "$@"; do
  echo "=== MOEJIT_GEMM_TUNE='$tune'"
  MOEJIT_GEMM_TUNE="$tune" "$RUN" --model gpt-oss-120b --tokens "$TOKENS" --iters 30 --check-tokens 8 2>&1 |
    sed -n '/time_us/,/^$/p;/each step timed alone/,/^$/p'
done
