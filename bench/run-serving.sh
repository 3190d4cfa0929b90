#!/usr/bin/env bash
# The serving-trace replay on the GPU machine, one command (bench/serving_replay.py):
#   bash bench/run-serving.sh --wheel WHEEL --triton-path DIR [--pack-dir DIR] [--part single|tp|all]
#                             [--ranks-on-one-gpu] [--full] [-- more serving_replay.py run options]
#   WHEEL        the moejit wheel for the machine's python3 (bench/serving-prepare.sh builds it)
#   DIR          the folder holding triton_kernels/ (../shared/bench-peers/get-triton-kernels.sh)
#   --pack-dir   the AOT packs built without a GPU (serving-prepare.sh); without it they are
#                built here first with no GPU visible (CUDA_VISIBLE_DEVICES=)
#   --part       single: the 3 cells x 5 systems on one GPU (default); tp: the TP2 replay and the
#                2-rank concurrent prewarm (2 GPUs, or --ranks-on-one-gpu); all: both
#   --full       300 steps x 36 layers (default: --quick, 100 steps x 12 layers)
# Writes to $OUT (default ./serving-out): results.md, results.json, log.txt, traces.json, packs.log.
# Budgets (no new process past them): quick single 240 s, tp 150 s, all 390 s; full 560 s.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEEL="" TRITON="" PACKS="" PART=single ONE_GPU="" MODE=--quick EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) WHEEL="$2"; shift 2 ;;
    --triton-path) TRITON="$2"; shift 2 ;;
    --pack-dir) PACKS="$2"; shift 2 ;;
    --part) PART="$2"; shift 2 ;;
    --ranks-on-one-gpu) ONE_GPU=--ranks-on-one-gpu; shift ;;
    --full) MODE=""; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "run-serving.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# Globs in the arguments (dist/moejit-*.whl) are expanded here.
WHEEL="$(ls $WHEEL 2>/dev/null | head -1)"
if [ -z "$WHEEL" ] || [ ! -f "$WHEEL" ]; then echo "run-serving.sh: --wheel: no wheel file" >&2; exit 2; fi
if [ -z "$TRITON" ] || [ ! -d "$TRITON/triton_kernels" ]; then
  echo "run-serving.sh: --triton-path: '$TRITON' holds no triton_kernels/ (the Triton systems will fail)" >&2
fi
OUT="${OUT:-$PWD/serving-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d /tmp/moejit-serving.XXXXXX)"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-deps --no-compile --target "$WORK/site" "$WHEEL" || exit 3
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}" PATH="$WORK/site/bin:$PATH"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -m moejit --version; } 2>&1 | tee "$OUT/packs.log"

if [ -z "$PACKS" ]; then
  PACKS="$WORK/packs"
  mkdir -p "$PACKS"
  for tp in 1 2; do
    t0=$SECONDS
    CUDA_VISIBLE_DEVICES= moejit-prewarm --model gpt-oss-120b --max-num-tokens 8192 --arch sm_90a --tp $tp \
      --cache-dir "$WORK/pack-cache-tp$tp" --pack "$PACKS/gpt-oss-120b-tp$tp-sm_90a.pack" >>"$OUT/packs.log" 2>&1
    echo "pack tp$tp built with no GPU visible: rc $? in $((SECONDS - t0)) s" | tee -a "$OUT/packs.log"
  done
fi
PACKS="$(cd "$PACKS" && pwd)"
ls -la "$PACKS" >>"$OUT/packs.log" 2>&1

if [ -n "$MODE" ]; then
  case "$PART" in single) BUDGET=240 ;; tp) BUDGET=150 ;; *) BUDGET=390 ;; esac
  PROC_LIMIT=150
else
  BUDGET=560 PROC_LIMIT=300
fi
python3 bench/serving_replay.py run --out "$OUT" $MODE --part "$PART" $ONE_GPU --triton-path "${TRITON:-}" \
  --pack-dir "$PACKS" --budget-s "$BUDGET" --process-timeout-s "$PROC_LIMIT" --work-dir "$WORK" "${EXTRA[@]}"
rc=$?
rm -rf "$WORK"
echo "run-serving.sh: exit $rc; $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
