#!/usr/bin/env bash
# The benchmark run on the GPU machine, one command:
#   bash bench/run.sh
# Needs the binaries built on the dev machine and copied (static, no rebuild):
#   build/bench/moejit_bench, build/bench/bench_launch
# and python3 with torch (+ matplotlib for the chart) on the GPU machine.
# To publish a run: cp $MOEJIT_OUT_DIR/{moejit,peers,launch}.jsonl docs/results-data/ && python3 bench/report.py
# Writes at most 7 files to $MOEJIT_OUT_DIR (default ./bench-out):
#   moejit.jsonl   moejit_bench rows (one JSON object per line)
#   peers.jsonl    bench/peers.py rows (torch peers + measured ceilings)
#   launch.jsonl   bench_launch rows;  launch.txt its Markdown table
#   results.md     the results page made from them (bench/report.py), results.png its chart
#   log.txt        everything printed, with timings of each stage
# Every stage has a time limit (a stage that runs out leaves its partial JSON
# lines, and the later stages still run), so the whole run stays below 10 min:
#   MOEJIT_BENCH_TIMEOUT (s, default 290), PEERS_TIMEOUT (200), LAUNCH_TIMEOUT (30); report 40: at most 560 s + kills.
# Extra moejit_bench flags: MOEJIT_BENCH_ARGS (default "--wgrad").
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${MOEJIT_OUT_DIR:-$PWD/bench-out}
BIN=${BIN:-build/bench}
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d /tmp/moejit-bench.XXXXXX)
CACHE=${MOEJIT_BENCH_CACHE:-$WORK/cache}
LOG="$OUT_DIR/log.txt"
: > "$LOG"
rm -f "$OUT_DIR/moejit.jsonl" "$OUT_DIR/peers.jsonl" "$OUT_DIR/launch.jsonl"

log() { echo "[run.sh $(date -u +%T)] $*" | tee -a "$LOG"; }
stage() {  # stage NAME LIMIT_S CMD...
  local name=$1 limit=$2
  shift 2
  log "start $name (limit ${limit}s): $*"
  local t0=$SECONDS
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  log "end $name: rc=$rc after $((SECONDS - t0))s"
  return 0
}

log "GPU machine: $(hostname); out $OUT_DIR; work $WORK"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv >>"$LOG" 2>&1 || true
python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" >>"$LOG" 2>&1 || true
for b in moejit_bench bench_launch; do
  [ -x "$BIN/$b" ] || log "MISSING $BIN/$b (copy build/bench/$b)"
done

# 1. moejit: every model x mode x T (+ skewed gpt-oss, + wgrad), routings dumped for the peers.
stage moejit_bench "${MOEJIT_BENCH_TIMEOUT:-290}" "$BIN/moejit_bench" --json "$OUT_DIR/moejit.jsonl" \
  --dump-dir "$WORK/routing" --cache-dir "$CACHE" ${MOEJIT_BENCH_ARGS:---wgrad}
# 2. Host cost of a launch on a cache hit (same cache: no compiles).
stage bench_launch "${LAUNCH_TIMEOUT:-30}" "$BIN/bench_launch" --json "$OUT_DIR/launch.jsonl" --cache-dir "$CACHE"
grep '^|' "$LOG" > "$OUT_DIR/launch.txt" || true
# 3. Peers on the same routings + ceilings.
PEER_ARGS=""
case " ${MOEJIT_BENCH_ARGS:---wgrad} " in *" --wgrad"*) PEER_ARGS="--wgrad" ;; esac
stage peers "${PEERS_TIMEOUT:-200}" python3 bench/peers.py --dump-dir "$WORK/routing" --json "$OUT_DIR/peers.jsonl" $PEER_ARGS
# 4. Report + chart.
stage report 40 python3 bench/report.py --data "$OUT_DIR" --out "$OUT_DIR/results.md" --chart "$OUT_DIR/results.png"
log "done; files: $(ls "$OUT_DIR" | tr '\n' ' ')"
rm -rf "$WORK"
