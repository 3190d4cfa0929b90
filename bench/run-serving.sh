#!/usr/bin/env bash
# The serving-trace replay on the GPU machine, one command (bench/serving_replay.py); docs/serving-replay.md.
#   bash bench/run-serving.sh --wheel 'WHEELS' --triton-path DIR --pack-dir DIR
#                             [--smoke] [--part single|single-1|single-2|tp|all] [--quick]
#                             [--deadline-s S] [--ranks-on-one-gpu] [-- more serving_replay.py run options]
#   WHEELS       moejit wheel file(s) or a pattern (bench/serving-prepare.sh builds them); the one for
#                this machine's python3 is taken, and without one the script says which it needs
#                (and builds one here where the build dependencies are installed)
#   DIR          the folder holding triton_kernels/ (get-triton-kernels.sh of the bench peers)
#   --pack-dir   the AOT packs built without a GPU (serving-prepare.sh); without it they are
#                built here first with no GPU visible (CUDA_VISIBLE_DEVICES=)
#   --smoke      first every system on 10 steps x 2 layers of one cell (about a minute), PASS / FAIL
#                per stage; alone: only that; with --part: the part after it, if the smoke passed
#   --part       single: 3 cells x 5 systems (default); single-1: (a) triton_exact + (d) moejit_sealed;
#                single-2: (b) triton_bucketed + (c) moejit_cold + (d') moejit_pack; tp: the TP2 replay
#                (2 GPUs, or --ranks-on-one-gpu); all: single + tp
#   --quick      100 steps x 12 layers (default: 300 steps x 36 layers)
#   --deadline-s the whole command ends within this many seconds (default 500): no replay process
#                starts after it, a running one is stopped (its finished cells are kept)
#   --no-install use the moejit that python3 imports already (no wheel)
# Writes to $MOEJIT_OUT_DIR (default ./serving-out): log.txt, smoke.json + smoke.md, results.json + results.md.
# Exit: 0 all passed; 1 a system failed; 2 usage; 3 no wheel for this python / install failed.
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
export MOEJIT_SERVING_COMMAND="bash bench/run-serving.sh $*"
WHEEL="" TRITON="" PACKS="" PART="" SMOKE="" MODE="" ONE_GPU="" DEADLINE=500 INSTALL=1 MOCK="" EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) WHEEL="$2"; shift 2 ;;
    --triton-path) TRITON="$2"; shift 2 ;;
    --pack-dir) PACKS="$2"; shift 2 ;;
    --part) PART="$2"; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --quick) MODE=--quick; shift ;;
    --full) MODE=""; shift ;;
    --deadline-s) DEADLINE="$2"; shift 2 ;;
    --ranks-on-one-gpu) ONE_GPU=--ranks-on-one-gpu; shift ;;
    --no-install) INSTALL=""; shift ;;
    --mock) MOCK=--mock; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "run-serving.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -z "$SMOKE" ] && [ -z "$PART" ] && PART=single
case "$PART" in ""|single|single-1|single-2|tp|all) ;; *) echo "run-serving.sh: --part $PART: unknown" >&2; exit 2 ;; esac
PY="${PYTHON:-python3}"
OUT_DIR="${MOEJIT_OUT_DIR:-$PWD/serving-out}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/moejit-serving.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
LOG="$OUT_DIR/log.txt"
say() { echo "run-serving: $*" | tee -a "$LOG"; }
left() { echo $((DEADLINE - (SECONDS - T0))); }
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

say "start $(date -u +%FT%TZ); smoke ${SMOKE:-no}, part ${PART:-none}, ${MODE:-full: 300 steps x 36 layers}, deadline ${DEADLINE} s"
say "python: $(command -v "$PY") $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1)"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 || true; } >>"$LOG"

build_wheel_here() {  # the fallback: this machine builds the wheel itself, where it can
  local missing="" h
  "$PY" -c "import scikit_build_core, nanobind" 2>/dev/null || missing="$missing python modules scikit_build_core+nanobind;"
  command -v cmake >/dev/null 2>&1 || missing="$missing cmake;"
  for h in spdlog/spdlog.h fmt/format.h nlohmann/json.hpp CLI/CLI.hpp; do
    [ -e "/usr/include/$h" ] || [ -e "/usr/local/include/$h" ] || missing="$missing $h;"
  done
  if [ -n "$missing" ]; then
    say "stage wheel FAIL: cannot build a wheel on this machine either (missing:$missing)"
    return 1
  fi
  say "building a wheel for this python here (at most 400 s)"
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" timeout 400 "$PY" -m pip wheel -q --no-build-isolation --no-deps \
    -w "$WORK/wheel" . >>"$LOG" 2>&1 || { say "stage wheel FAIL: the build failed (log.txt)"; return 1; }
  WHEEL="$(ls "$WORK"/wheel/moejit-*.whl | head -1)"
}

if [ -n "$INSTALL" ]; then
  [ -n "$WHEEL" ] || { say "stage wheel FAIL: no --wheel (or --no-install)"; exit 2; }
  t=$SECONDS
  # Globs in the argument (build/serving/moejit-*.whl) are expanded by pick-wheel.
  if ! WHEEL_PICKED="$("$PY" bench/serving_replay.py pick-wheel $WHEEL 2>>"$LOG")"; then
    tail -1 "$LOG" >&2
    build_wheel_here || exit 3
  else
    WHEEL="$WHEEL_PICKED"
  fi
  "$PY" -m pip install -q --no-deps --no-compile --target "$WORK/site" "$WHEEL" >>"$LOG" 2>&1 \
    || { say "stage wheel FAIL: pip install $WHEEL (log.txt)"; exit 3; }
  export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}" PATH="$WORK/site/bin:$PATH"
  V="$("$PY" -m moejit --version 2>&1)" || { say "stage wheel FAIL: the installed package does not import: $V"; exit 3; }
  say "stage wheel PASS: $(basename "$WHEEL") installed, $V ($((SECONDS - t)) s)"
fi
if [ -z "$TRITON" ] || [ ! -d "$TRITON/triton_kernels" ]; then
  say "--triton-path '$TRITON' holds no triton_kernels/: the Triton systems will fail their preflight"
fi

if [ -z "$PACKS" ] && [ -z "$MOCK" ]; then
  PACKS="$WORK/packs"
  mkdir -p "$PACKS"
  tps="1"; case "$PART" in tp|all) tps="1 2" ;; esac
  for tp in $tps; do
    t=$SECONDS
    CUDA_VISIBLE_DEVICES= moejit-prewarm --model gpt-oss-120b --max-num-tokens 8192 --arch sm_90a --tp $tp \
      --cache-dir "$WORK/pack-cache-tp$tp" --pack "$PACKS/gpt-oss-120b-tp$tp-sm_90a.pack" >>"$LOG" 2>&1
    say "pack tp$tp built with no GPU visible: rc $? in $((SECONDS - t)) s"
  done
fi
[ -n "$PACKS" ] && [ -d "$PACKS" ] && PACKS="$(cd "$PACKS" && pwd)" && ls -la "$PACKS" >>"$LOG" 2>&1

ARGS=(--out "$OUT_DIR" --triton-path "${TRITON:-}" --pack-dir "${PACKS:-}" --work-dir "$WORK" $ONE_GPU $MOCK)
rc=0
if [ -n "$SMOKE" ]; then
  d=$(left); [ "$d" -gt 170 ] && d=170
  say "smoke: deadline $d s"
  "$PY" bench/serving_replay.py run --smoke "${ARGS[@]}" --deadline-s "$d" --process-timeout-s 150 "${EXTRA[@]}"
  rc=$?
  say "smoke: exit $rc after $((SECONDS - T0)) s"
  if [ $rc -ne 0 ]; then
    [ -n "$PART" ] && say "part $PART not started: the smoke failed"
    PART=""
  fi
fi
if [ -n "$PART" ]; then
  d=$(left)
  say "part $PART: deadline $d s"
  "$PY" bench/serving_replay.py run --part "$PART" $MODE "${ARGS[@]}" --deadline-s "$d" "${EXTRA[@]}"
  rc=$?
fi
say "exit $rc after $((SECONDS - T0)) s; $OUT_DIR: $(ls "$OUT_DIR" | tr '\n' ' ')"
exit $rc
