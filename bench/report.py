#!/usr/bin/env python3
"""Writes the results page (docs/results.md) and its chart (docs/results.png)
from the JSON lines of one benchmark run (bench/run.sh): moejit_bench rows,
bench/peers.py rows and bench_launch rows, plus the sections of the runs kept in
docs/results-data/mxfp4-vs-triton/ and docs/results-data/serving/ (the serving replay's
results files, bench/run-serving.sh). This script is the only way the page is made;
rerun it after copying a new run's files into docs/results-data/:

  python3 bench/report.py                       # docs/results-data/ -> docs/results.md + .png
  python3 bench/report.py --data DIR --out X.md --chart X.png

Columns: T, routing, GEMM/layer, mode, moejit us, peer, peer us, ratio
(peer us / moejit us: > 1 means moejit is faster), achieved TB/s over the bytes
that must move (weights of the experts hit at the mode's bytes per weight incl.
scales and biases, plus activations), TFLOP/s, % of the measured copy bandwidth,
% of the measured dense matmul rate (bf16 for bf16 / w4a16_mxfp4, fp8 for the
FP8 modes). The peer of a layer row is the sum of the peer's gate_up and down
(routing, gather and combine not included): a lower bound of a peer layer.
Without matplotlib the chart is skipped (the report says so).
"""
import argparse
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PEER_OF_MODE = {
    "bf16": "torch._grouped_mm bf16",
    "w4a16_mxfp4": "mxfp4 dequant + torch._grouped_mm",
    "mxfp8": "torch._scaled_grouped_mm fp8 rowwise",
    "fp8_per_token": "torch._scaled_grouped_mm fp8 rowwise",
}
WGRAD_PEER = "torch._grouped_mm wgrad bf16"
MODE_ORDER = ["w4a16_mxfp4", "bf16", "mxfp8", "fp8_per_token"]
KIND_ORDER = ["layer", "gate_up", "down", "wgrad_gate_up"]
MODEL_ORDER = ["gpt-oss-120b", "qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b"]
# H200 ceilings measured with the same method, used only when a run measured none.
def model_top_k():
    """Routes per token of each model in models/<name>/config.json (num_experts_per_tok)."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")
    out = {}
    for path in glob.glob(os.path.join(root, "*", "config.json")):
        with open(path) as f:
            k = json.load(f).get("num_experts_per_tok")
        if k:
            out[os.path.basename(os.path.dirname(path))] = int(k)
    return out


TOP_K = model_top_k()
FALLBACK = {"copy_TBps": 4.23, "bf16_mm_TFLOPs": 782.0, "fp8_mm_TFLOPs": 1446.0}


def read_jsonl(path):
    rows = []
    if not path or not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


def fmt(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "-"
        if abs(v) >= 100:
            return f"{v:.0f}"
        return f"{v:.{nd}f}"
    return str(v)


def run_span(v):
    """The range of a row's runs, "lo-hi" (one value where both print alike), "-" without runs."""
    if not v:
        return "-"
    lo, hi = fmt(min(v)), fmt(max(v))
    return lo if lo == hi else f"{lo}-{hi}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--data", default=os.path.join(root, "docs", "results-data"),
                    help="folder with moejit.jsonl, peers.jsonl, launch.jsonl (default docs/results-data)")
    ap.add_argument("--moejit", default="", help="moejit_bench rows (default DATA/moejit.jsonl)")
    ap.add_argument("--peers", default="", help="bench/peers.py rows (default DATA/peers.jsonl)")
    ap.add_argument("--launch", default="", help="bench_launch rows (default DATA/launch.jsonl)")
    ap.add_argument("--out", default=os.path.join(root, "docs", "results.md"))
    ap.add_argument("--chart", default=os.path.join(root, "docs", "results.png"),
                    help="PNG chart (needs matplotlib; without it the page keeps the chart file there is)")
    ap.add_argument("--command", default="bash bench/run.sh")
    args = ap.parse_args()
    args.moejit = args.moejit or os.path.join(args.data, "moejit.jsonl")
    args.peers = args.peers or os.path.join(args.data, "peers.jsonl")
    args.launch = args.launch or os.path.join(args.data, "launch.jsonl")
    if not os.path.exists(args.moejit):
        print(f"report.py: {args.moejit} not found (run bench/run.sh, or pass --data)", file=sys.stderr)
        return 2

    mrows = read_jsonl(args.moejit)
    prows = read_jsonl(args.peers)
    lrows = read_jsonl(args.launch)
    env = next((r for r in mrows if r.get("kind") == "env"), {})
    ceil = next((r for r in prows if r.get("kind") == "ceiling"), {})
    gpu = env.get("gpu") or ceil.get("gpu") or "unknown GPU"
    ceil_note = []
    ceilings = {}
    for k, v in FALLBACK.items():
        if isinstance(ceil.get(k), (int, float)):
            ceilings[k] = float(ceil[k])
        else:
            ceilings[k] = v
            ceil_note.append(k)
    out_path = args.out

    # peers[(model, gemm, routing, T, peer)] = row
    peers = {}
    for r in prows:
        if "gemm" in r and "peer" in r:
            peers[(r["model"], r["gemm"], r.get("routing", "uniform"), r["T"], r["peer"])] = r

    def peer_time(model, kind, routing, T, name):
        if kind in ("gate_up", "down"):
            r = peers.get((model, kind, routing, T, name))
            if r is None:
                return None, None
            return r.get("us"), r.get("error")
        if kind == "layer":
            a = peers.get((model, "gate_up", routing, T, name))
            b = peers.get((model, "down", routing, T, name))
            if a is None or b is None:
                return None, None
            if "us" in a and "us" in b:
                return a["us"] + b["us"], None
            return None, a.get("error") or b.get("error")
        return None, None

    L = []
    L.append(f"# Results: moejit against its peers on one {gpu}")
    L.append("")
    L.append("<!-- Generated by bench/report.py from docs/results-data/*.jsonl; do not edit by hand. -->")
    L.append("")
    L.append(f"Hardware: one {gpu}; CUDA driver API {env.get('driver', '?')}; peers on torch {ceil.get('torch', '?')}.")
    L.append("")
    L.append("Reproduce (binaries built on any Debian 12 machine, copied to the GPU machine):")
    L.append("")
    L.append("```sh")
    L.append("cmake --build build -j2 --target moejit_bench bench_launch")
    L.append(f"{args.command}                          # on the GPU machine; writes $MOEJIT_OUT_DIR (default ./bench-out)")
    L.append("cp bench-out/{moejit,peers,launch}.jsonl docs/results-data/")
    L.append("python3 bench/report.py                    # rewrites this page and docs/results.png")
    L.append("```")
    L.append("")
    L.append("Ceilings measured in the same run: device-to-device copy "
             f"{ceilings['copy_TBps']:.2f} TB/s (read + write), bf16 8192^3 matmul "
             f"{ceilings['bf16_mm_TFLOPs']:.0f} TFLOP/s, fp8 matmul {ceilings['fp8_mm_TFLOPs']:.0f} TFLOP/s"
             + (f" (not measured in this run, H200 values used: {', '.join(ceil_note)})" if ceil_note else "") + ".")
    L.append("")
    L.append("Timing: CUDA events, 3 warm-ups, median of 50 runs (10 when a run exceeds 5 ms), 3 input sets rotated; "
             "uniform random routing (distinct experts per token) and, for gpt-oss-120b, a skewed routing "
             "(half of the routes to 4 hot experts). The peers run on the same routing (moejit_bench --dump-dir).")
    L.append("")
    L.append("- ratio = peer us / moejit us (> 1: moejit faster). Peer of w4a16_mxfp4: dequantize the hit experts "
             "to bf16, then torch._grouped_mm; of bf16: torch._grouped_mm; of mxfp8 and fp8_per_token: "
             "torch._scaled_grouped_mm (fp8 rowwise scales).")
    L.append("- Peer of a layer row: peer gate_up + peer down (no routing, gather, activation or combine): a lower "
             "bound for a peer layer. The peers read pre-gathered rows; moejit's gate_up gathers X by token; FP8 "
             "moejit GEMMs include their activation quantizer.")
    L.append("- Peer of wgrad_gate_up (the gate_up weight gradient, grad^T X per expert): torch._grouped_mm's "
             "2D x 2D form (groups along the routed rows) over grad^T and the gathered X rows, both transposed and "
             "gathered before timing, writing bf16 dW; moejit gathers X by token and writes fp32 dW (twice the "
             "bytes).")
    L.append("- TB/s: over the bytes that must move: weights (+ scales + biases) of the experts hit at the mode's "
             "bytes per weight, plus activations (layer: X and out; gate_up: X and H; down: H and Y as bf16). "
             "% BW: of the measured copy bandwidth. % peak: TFLOP/s of the measured dense bf16 matmul rate "
             "(bf16, w4a16_mxfp4) or fp8 rate (mxfp8, fp8_per_token).")
    L.append("")

    errors = [r for r in mrows if r.get("error")] + [r for r in prows if r.get("error")]
    # The weight-gradient rows have their own section when its run is kept (docs/results-data/wgrad/).
    wgrad_apart = os.path.exists(os.path.join(args.data, "wgrad", "moejit.jsonl"))
    timed = [r for r in mrows if "us" in r and r.get("kind") in KIND_ORDER
             and not (wgrad_apart and r["kind"] == "wgrad_gate_up")]

    # Headline: the gpt-oss-120b layer in its native W4A16 MXFP4 format, uniform routing.
    head = sorted((r for r in timed if r["model"] == "gpt-oss-120b" and r["kind"] == "layer"
                   and r["mode"] == "w4a16_mxfp4" and r.get("routing", "uniform") == "uniform"),
                  key=lambda r: r["T"])
    if head:
        L.append("## Headline: gpt-oss-120b MoE layer, W4A16 MXFP4, uniform routing")
        L.append("")
        if env.get("moejit_version") or env.get("date"):
            L.append(f"From the bench/run.sh run in docs/results-data/ ({env.get('date', '')}).")
        L.append("This and the per-model sections come from the full bench/run.sh run kept in docs/results-data/; "
                 "the [prefill section](#prefill-layers-at-t--4096-and-16384) is a separate run at T = 4096 and 16384 "
                 "that measured the TMA warp-specialized kernel's present tile scheduler and FP8 promotion "
                 "(docs/kernels.md), "
                 "and the [triton_kernels section](#gpt-oss-120b-w4a16-mxfp4-against-triton_kernels) at the end is a "
                 "separate call (moejit-run beside OpenAI's triton_kernels)" +
                 (", as are the [weight gradient](#weight-gradient), whose rows the per-model tables leave out, and [decode in every format](#decode-in-every-format-eager-and-from-a-cuda-graph) (moejit-run, eager and CUDA-graph times)."
                  if wgrad_apart else "."))
        L.append("")
        L.append("| T | moejit us | floor us | TB/s | TFLOP/s | peer: MXFP4 dequant + _grouped_mm (gu+down) us |")
        L.append("|---|---|---|---|---|---|")
        for r in head:
            floor = max(r.get("bytes", 0) / (ceilings["copy_TBps"] * 1e12),
                        r.get("flops", 0) / (ceilings["bf16_mm_TFLOPs"] * 1e12)) * 1e6
            pus, _ = peer_time("gpt-oss-120b", "layer", "uniform", r["T"], PEER_OF_MODE["w4a16_mxfp4"])
            L.append(f"| {r['T']} | {fmt(r['us'])} | {fmt(floor)} | {fmt(r['tbps'], 2)} | {fmt(r['tflops'])} | {fmt(pus)} |")
        L.append("")
        L.append("floor = max(bytes that must move / measured copy bandwidth, FLOPs / measured bf16 matmul rate).")
        L.append("")
    chart_note = ""
    if args.chart:
        try:
            chart_note = make_chart(args.chart, timed, peers, ceilings)
        except ImportError as ex:
            print(f"report.py: no chart ({ex}); install matplotlib to draw it", file=sys.stderr)
        except Exception as ex:  # noqa: BLE001
            print(f"report.py: no chart: {type(ex).__name__}: {ex}", file=sys.stderr)
    if chart_note:
        L.append(chart_note)
        L.append("")
    models = [m for m in MODEL_ORDER if any(r["model"] == m for r in timed)]
    models += sorted({r["model"] for r in timed} - set(models))
    gaps = []
    for model in models:
        rows = [r for r in timed if r["model"] == model]
        shape = next((r.get("shape") for r in mrows if r.get("kind") == "weights" and r.get("model") == model), "")
        L.append(f"## {model}")
        L.append("")
        if shape:
            L.append(f"`{shape}`")
            L.append("")
        L.append("| T | routing | GEMM | mode | experts hit | moejit us | peer | peer us | ratio | TB/s | TFLOP/s | % BW | % peak |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        rows.sort(key=lambda r: (r.get("routing") != "uniform", r["T"], KIND_ORDER.index(r["kind"]),
                                 MODE_ORDER.index(r["mode"]) if r["mode"] in MODE_ORDER else 9))
        for r in rows:
            mode, kind = r["mode"], r["kind"]
            peer_name = PEER_OF_MODE.get(mode, "") if kind != "wgrad_gate_up" else WGRAD_PEER
            pus, perr = peer_time(model, kind, r.get("routing", "uniform"), r["T"], peer_name) if peer_name else (None, None)
            ratio = pus / r["us"] if pus and r["us"] > 0 else None
            fp8 = mode in ("mxfp8", "fp8_per_token")
            peak = ceilings["fp8_mm_TFLOPs"] if fp8 else ceilings["bf16_mm_TFLOPs"]
            pbw = 100.0 * r["tbps"] / ceilings["copy_TBps"]
            ppk = 100.0 * r["tflops"] / peak
            pshort = peer_name.replace("torch.", "").replace(" + ", "+") if peer_name else "-"
            if kind == "layer" and peer_name:
                pshort += " (gu+down)"
            pcell = fmt(pus) if pus is not None else ("error" if perr else "-")
            L.append(f"| {r['T']} | {r.get('routing', 'uniform')} | {kind} | {mode} | {r.get('experts_hit', '-')} | "
                     f"{fmt(r['us'])} | {pshort} | {pcell} | {fmt(ratio, 2)} | {fmt(r['tbps'], 2)} | "
                     f"{fmt(r['tflops'])} | {fmt(pbw, 0)} | {fmt(ppk, 0)} |")
            if ratio is not None:
                gaps.append((ratio, model, r, peer_name, pus))
        L.append("")

    if gaps:
        L.append("## Largest gaps to the peers (moejit slower: ratio < 1)")
        L.append("")
        worst = sorted(gaps, key=lambda g: g[0])[:8]
        L.append("| model | T | routing | GEMM | mode | moejit us | peer us | ratio | % BW | % peak |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for ratio, model, r, pn, pus in worst:
            fp8 = r["mode"] in ("mxfp8", "fp8_per_token")
            peak = ceilings["fp8_mm_TFLOPs"] if fp8 else ceilings["bf16_mm_TFLOPs"]
            L.append(f"| {model} | {r['T']} | {r.get('routing', 'uniform')} | {r['kind']} | {r['mode']} | "
                     f"{fmt(r['us'])} | {fmt(pus)} | {fmt(ratio, 2)} | "
                     f"{fmt(100 * r['tbps'] / ceilings['copy_TBps'], 0)} | {fmt(100 * r['tflops'] / peak, 0)} |")
        L.append("")

    if lrows:
        L.append("## Host cost of a launch on a cache hit (bench_launch)")
        L.append("")
        base = next((r["ns"] for r in lrows if r.get("step", "").startswith("cuLaunchKernel alone")), None)
        L.append("| step | ns per call | vs cuLaunchKernel alone |")
        L.append("|---|---|---|")
        for r in lrows:
            if "ns" in r:
                L.append(f"| {r['step']} | {r['ns']:.0f} | {fmt(r['ns'] / base, 2) if base else '-'} |")
        L.append("")

    comp = [r for r in mrows if r.get("kind") == "compile"]
    if comp:
        tot = sum(r.get("wall_s", 0) for r in comp)
        n = sum(r.get("compiles", 0) for r in comp)
        L.append(f"Kernel compiles before timing: {n} NVRTC compiles, {tot:.1f} s wall on the GPU host "
                 "(parallel, all cores).")
        L.append("")

    L.extend(prefill_section(os.path.join(args.data, "prefill")))
    L.extend(wgrad_section(os.path.join(args.data, "wgrad")))
    L.extend(grouped_gemm_section(os.path.join(args.data, "grouped-gemm", "grouped.jsonl")))
    L.extend(mxfp4_vs_triton_section(os.path.join(args.data, "mxfp4-vs-triton")))
    L.extend(mxfp4_decode_tiles_section(os.path.join(args.data, "mxfp4-decode-tiles")))
    L.extend(decode_formats_section(os.path.join(args.data, "decode-formats", "moejit-run.jsonl")))
    L.extend(fp8_decode_k_split_section(os.path.join(args.data, "fp8-decode-k-split")))
    L.extend(serving_section(os.path.join(args.data, "serving")))
    L.extend(python_host_cost_section(os.path.join(args.data, "python-host-cost", "overhead.jsonl")))

    if errors:
        L.append("## Rows that failed")
        L.append("")
        for r in errors[:40]:
            what = " ".join(str(r.get(k)) for k in ("bench", "model", "mode", "peer", "gemm", "kind", "routing", "T") if r.get(k) is not None)
            L.append(f"- {what}: `{str(r['error'])[:300]}`")
        L.append("")

    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"report.py: wrote {out_path}" + (f" and {args.chart}" if chart_note else ""))
    return 0


def grouped_gemm_section(path):
    """moejit::grouped_gemm (rows already sorted by expert) beside torch._grouped_mm and
    torch._scaled_grouped_mm in one bench/grouped_gemm_vs_torch.py run."""
    rows = read_jsonl(path)
    ceil = next((r for r in rows if r.get("kind") == "ceiling"), {})
    cell = {(r["model"], r["gemm"], r["T"], r["mode"], r["impl"] == "moejit"): r for r in rows if "us" in r}
    agree = {(r["model"], r["gemm"], r["T"], r["mode"]): r["rel_diff"] for r in rows if r.get("kind") == "agreement"}
    if not cell:
        return []
    L = ["## Grouped GEMM over expert-sorted rows", ""]
    L.append("`moejit::grouped_gemm` (`moejit/grouped_gemm.hpp`: rows already sorted by expert, per-expert row "
             "offsets) beside torch's grouped GEMMs on the same operands, one process: "
             "`python3 bench/grouped_gemm_vs_torch.py --json grouped.jsonl` (JSON in "
             "docs/results-data/grouped-gemm/). The gate_up (N = 2I, K = D, no activation) and down (N = D, K = I) "
             "GEMMs at T tokens, uniform routing, M = T * top_k rows; fp8_per_token: per-row activation scales and "
             "per-channel weight scales on both sides, torch with fast accumulation. "
             f"Ceilings of this run: bf16 matmul {fmt(ceil.get('bf16_mm_TFLOPs'), 0)} TFLOP/s, fp8 matmul "
             f"{fmt(ceil.get('fp8_mm_TFLOPs'), 0)} TFLOP/s. ratio = torch us / moejit us (> 1: moejit faster); "
             "rel. diff: relative Frobenius difference of the two Y.")
    L.append("")
    L.append("| model | GEMM | T | mode | moejit us | torch us | ratio | moejit TFLOP/s | % peak | rel. diff |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for (model, gemm, T, mode, mine), r in cell.items():
        if not mine:
            continue
        p = cell.get((model, gemm, T, mode, False))
        d = agree.get((model, gemm, T, mode))
        L.append(f"| {model} | {gemm} | {T} | {mode} | {fmt(r['us'])} | {fmt(p['us']) if p else '-'} | "
                 f"{fmt(p['us'] / r['us'], 2) if p else '-'} | {fmt(r['tflops'])} | {fmt(r.get('pct_peak'), 0)} | "
                 f"{'%.1e' % d if d is not None else '-'} |")
    L.append("")
    return L


def read_run(folder):
    """A kept GPU call's moejit.jsonl and peers.jsonl in `folder`: (moejit rows, peer rows,
    the env row, the ceilings measured in that call), or None when either file is missing."""
    m_path, p_path = os.path.join(folder, "moejit.jsonl"), os.path.join(folder, "peers.jsonl")
    if not (os.path.exists(m_path) and os.path.exists(p_path)):
        return None
    mrows, prows = read_jsonl(m_path), read_jsonl(p_path)
    env = next((r for r in mrows if r.get("kind") == "env"), {})
    ceil = next((r for r in prows if r.get("kind") == "ceiling"), {})
    ceilings = {k: float(ceil[k]) if isinstance(ceil.get(k), (int, float)) else v for k, v in FALLBACK.items()}
    return mrows, prows, env, ceilings


def prefill_section(folder):
    """The prefill layers (T = 4096 and 16384, every model and mode, uniform routing) from
    a bench/run.sh run restricted to those T (MOEJIT_BENCH_ARGS="--tokens 4096,16384"):
    its moejit.jsonl and peers.jsonl, with the ceilings measured in that run."""
    run = read_run(folder)
    if run is None:
        return []
    mrows, prows, env, ceilings = run
    peer = {(r["model"], r["gemm"], r["T"], r["peer"]): r.get("us") for r in prows
            if "gemm" in r and "peer" in r and r.get("routing", "uniform") == "uniform"}
    cell = {(r["model"], r["mode"], r["T"], r["kind"]): r for r in mrows
            if "us" in r and r.get("kind") in ("layer", "gate_up", "down") and r.get("routing", "uniform") == "uniform"}
    keys = sorted({(k[0], k[1], k[2]) for k in cell},
                  key=lambda k: (MODE_ORDER.index(k[1]) if k[1] in MODE_ORDER else 9,
                                 MODEL_ORDER.index(k[0]) if k[0] in MODEL_ORDER else 9, k[2]))
    if not keys:
        return []
    L = ["## Prefill layers at T = 4096 and 16384", ""]
    L.append("A bench/run.sh run restricted to these T (`MOEJIT_BENCH_ARGS=\"--tokens 4096,16384\" bash bench/run.sh`, "
             "then its moejit.jsonl and peers.jsonl copied to docs/results-data/prefill/)" +
             (f", {env['date']}" if env.get("date") else "") + ". It measured the TMA warp-specialized kernel with "
             "its present tile scheduler (docs/kernels.md, \"Work items\"), epilogue and FP8 per-token promotion "
             "(\"Epilogue and promotion\"), the "
             "FP8 layers' bf16 Y, the FP8 activation quantizers specialized on the row length (\"Quantizers\") and "
             "the routing in chunked launches past its shared memory (\"Routing\"), which the full run behind the per-model sections above did not have: at these T its "
             "figures are the ones that describe the kernels. "
             f"Ceilings of this run: copy {ceilings['copy_TBps']:.2f} TB/s, bf16 matmul "
             f"{ceilings['bf16_mm_TFLOPs']:.0f} TFLOP/s, fp8 matmul {ceilings['fp8_mm_TFLOPs']:.0f} TFLOP/s. "
             "Uniform routing; ratio = peer us / moejit us (> 1: moejit faster); peers and timing as above.")
    L.append("")
    L.append("| mode | model | T | layer us | peer gu+down us | ratio | gate_up us (ratio) | down us (ratio) | "
             "layer TFLOP/s | % peak |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for model, mode, T in keys:
        name = PEER_OF_MODE.get(mode, "")
        lay, gu, dn = (cell.get((model, mode, T, k)) for k in ("layer", "gate_up", "down"))
        pg, pd = peer.get((model, "gate_up", T, name)), peer.get((model, "down", T, name))
        ratio = lambda pus, r: fmt(pus / r["us"], 2) if pus and r else "-"
        peak = ceilings["fp8_mm_TFLOPs"] if mode in ("mxfp8", "fp8_per_token") else ceilings["bf16_mm_TFLOPs"]
        pl = pg + pd if pg and pd else None
        L.append(f"| {mode} | {model} | {T} | {fmt(lay['us']) if lay else '-'} | {fmt(pl)} | {ratio(pl, lay)} | "
                 f"{fmt(gu['us']) if gu else '-'} ({ratio(pg, gu)}) | {fmt(dn['us']) if dn else '-'} ({ratio(pd, dn)}) | "
                 f"{fmt(lay['tflops']) if lay else '-'} | {fmt(100 * lay['tflops'] / peak, 0) if lay else '-'} |")
    L.append("")
    return L


def wgrad_section(folder):
    """The gate_up weight gradient (moejit_bench --wgrad-only) beside torch._grouped_mm's
    2D x 2D form (bench/peers.py --wgrad-only) in one GPU call: its moejit.jsonl and peers.jsonl."""
    run = read_run(folder)
    if run is None:
        return []
    mrows, prows, env, ceilings = run
    peer = {(r["model"], r["T"]): r for r in prows if r.get("gemm") == "wgrad_gate_up" and "us" in r}
    timed = [r for r in mrows if r.get("kind") == "wgrad_gate_up" and "us" in r]
    rows = sorted((r for r in timed if r.get("dw_dtype", "f32") == "f32"),
                  key=lambda r: (MODEL_ORDER.index(r["model"]) if r["model"] in MODEL_ORDER else 9, r["T"]))
    bf16 = {(r["model"], r["T"]): r for r in timed if r.get("dw_dtype") == "bf16"}
    if not rows:
        return []
    L = ["## Weight gradient", ""]
    L.append("The gate_up weight gradient `dW[e] = grad_e^T X_e` (`moejit/moe_wgrad.hpp`; grad bf16 [T * top_k, 2I], "
             "X bf16 [T, D] gathered by token, fp32 dW [E, 2I, D]), in one GPU call"
             + (f" ({env['date']})" if env.get("date") else "") + ": `moejit_bench --wgrad-only --tokens "
             "256,1024,4096,16384` (fp32 dW, then `--wgrad-dw bf16`) and `python3 bench/peers.py --wgrad-only --tokens "
             "1024,4096,16384` (JSON lines in "
             "docs/results-data/wgrad/). The time includes no routing. Peer: torch._grouped_mm's 2D x 2D form "
             "(groups along the routed rows, each expert padded to a multiple of 8 rows as that form requires) over "
             "grad^T and the gathered X rows, transposed and gathered before "
             "timing, writing bf16 dW (half of moejit's fp32 bytes). The kernel: the warp-specialized wgmma kernel "
             "from 64 routed rows per expert on average, the mma.sync kernel below (docs/kernels.md, \"Weight "
             f"gradient\"). bf16 matmul ceiling of this run: {ceilings['bf16_mm_TFLOPs']:.0f} TFLOP/s; "
             "ratio = peer us / moejit us (> 1: moejit faster).")
    if bf16:
        L.append("")
        L.append("bf16 dW: the same kernels writing bf16 dW (`--wgrad-dw bf16`, same call), the peer's output "
                 "dtype; ratio bf16 = peer us / moejit bf16-dW us.")
    L.append("")
    head = "| model | T | rows per expert | moejit us | TFLOP/s | % peak | peer us | peer TFLOP/s | ratio |"
    L.append(head + (" bf16 dW us | TFLOP/s | ratio bf16 |" if bf16 else ""))
    L.append("|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if bf16 else ""))
    experts = {"gpt-oss-120b": 128, "qwen3-30b-a3b": 128, "deepseek-v3": 256, "mixtral-8x7b": 8}
    topk = {"gpt-oss-120b": 4, "qwen3-30b-a3b": 8, "deepseek-v3": 8, "mixtral-8x7b": 2}
    for r in rows:
        p = peer.get((r["model"], r["T"]))
        per = r["T"] * topk.get(r["model"], 1) / experts.get(r["model"], 1)
        L.append(f"| {r['model']} | {r['T']} | {fmt(per, 0)} | {fmt(r['us'])} | {fmt(r['tflops'])} | "
                 f"{fmt(100 * r['tflops'] / ceilings['bf16_mm_TFLOPs'], 0)} | {fmt(p['us']) if p else '-'} | "
                 f"{fmt(p['tflops']) if p else '-'} | {fmt(p['us'] / r['us'], 2) if p else '-'} |" +
                 (lambda b: (f" {fmt(b['us'])} | {fmt(b['tflops'])} | {fmt(p['us'] / b['us'], 2) if p else '-'} |"
                             if b else " - | - | - |") if bf16 else "")(bf16.get((r["model"], r["T"]))))
    L.append("")
    return L


def mxfp4_vs_triton_section(folder):
    """The gpt-oss-120b W4A16 MXFP4 layer, moejit-run with the default kernels
    against OpenAI's triton_kernels matmul_ogs, from one GPU call:
    moejit-run.jsonl (moejit-run --json) and triton-kernels.jsonl (the peer's
    JSON lines)."""
    mr_path = os.path.join(folder, "moejit-run.jsonl")
    tk_path = os.path.join(folder, "triton-kernels.jsonl")
    if not (os.path.exists(mr_path) and os.path.exists(tk_path)):
        return []
    mr = [r for r in read_jsonl(mr_path) if r.get("tool") == "moejit-run"]
    tk = {r["T"]: r for r in read_jsonl(tk_path) if "T" in r}
    peer = next((r for r in read_jsonl(tk_path) if "peer" in r), {})
    default = {r["T"]: r for r in mr if not r.get("tune")}
    when = next((r.get("date") for r in mr if r.get("date")), None)
    Ts = ",".join(str(T) for T in sorted(default))
    L = ["## gpt-oss-120b W4A16 MXFP4 against triton_kernels", ""]
    L.append("One GPU call, same H200" + (f", {when}" if when else "") + ": `moejit-run --model gpt-oss-120b --tokens "
             f"{Ts.replace(',', ' ')} --iters 20 --check-tokens 0 --json moejit-run.jsonl` with the default kernels (the "
             "MXFP4 warp-specialized kernel reading X and H in its fragment k order: docs/kernels.md), then OpenAI's "
             f"triton_kernels matmul_ogs ({peer.get('peer', 'triton_kernels')}, triton {peer.get('triton', '?')}, torch "
             f"{peer.get('torch', '?')}; `peer_ogs.py OUT.jsonl {Ts}`) on the same shapes: routing + two matmul_ogs, "
             "eager and replayed from a CUDA graph. moejit's time is `time_us` (the layer between CUDA events on an idle "
             "GPU, host submission inside); its layer is route + gate_up + down + combine (three launches at T <= 8; plus "
             "the reorder of X where the warp-specialized kernel runs, inside the gate_up figure). The JSON lines are in "
             "docs/results-data/mxfp4-vs-triton/ (moejit-run.jsonl, triton-kernels.jsonl).")
    L.append("")
    L.append("| T | moejit us | moejit graph us | gate_up / down us | triton_kernels graph us | "
             "triton_kernels eager us | triton graph / moejit | floor us | of floor |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for T in sorted(default):
        d = default[T]
        t = tk.get(T, {})
        g = t.get("graph_us")
        L.append(f"| {T} | {fmt(d['time_us'])} | {fmt(d.get('graph_us'))} | {fmt(d['gate_up_us'])} / {fmt(d['down_us'])} | "
                 f"{fmt(g)} | {fmt(t.get('eager_us'))} | {fmt(g / d['time_us'], 2) if g else '-'} | "
                 f"{fmt(d['floor_us'])} | {100.0 * d['floor_us'] / d['time_us']:.0f} % |")
    L.append("")
    L.append("floor = max(weight bytes of the experts hit / 4.23 TB/s, FLOPs / 782 TFLOP/s). The default runs the "
             "warp-specialized prefill kernel from 9 to 24 routed rows per expert hit (here T = 512) and where 192-row "
             "tiles fit the experts (here T >= 4096), the single-role wgmma kernels between them, the decode kernel up "
             "to 8 rows (T <= 256) (docs/kernels.md)." + ratio_summary(default, tk))
    L.append("")
    L.extend(mxfp4_middle_range_section(os.path.join(folder, "middle-range.jsonl")))
    return L


def ratio_summary(default, tk):
    """One sentence: where moejit's layer beats triton_kernels' CUDA graph and
    its eager launches (ratio = peer us / moejit us)."""
    r = [(T, tk[T]["graph_us"] / default[T]["time_us"]) for T in sorted(default) if tk.get(T, {}).get("graph_us")]
    e = [tk[T]["eager_us"] / default[T]["time_us"] for T in sorted(default) if tk.get(T, {}).get("eager_us")]
    if not r:
        return ""
    faster = [T for T, x in r if x >= 1]
    behind = [x for _, x in r if x < 1]
    out = " moejit is faster than triton_kernels' CUDA graph at T = " + ", ".join(str(T) for T in faster) if faster else \
        " moejit is slower than triton_kernels' CUDA graph at every T"
    if faster and behind:
        out += f" and slower at the other T ({min(behind):.2f}-{max(behind):.2f}x)"
    out += "; against its eager launches (what an engine without graphs pays) it is faster at " + \
        ("every T." if e and min(e) >= 1 else f"{sum(1 for x in e if x >= 1)} of {len(e)} T.")
    return out


def mxfp4_middle_range_section(path):
    """The MXFP4 middle range (9 to 24 routed rows per expert hit) per model, from one GPU
    call: moejit-run --json rows with the default kernels, MOEJIT_GEMM_TUNE=prefill.ws=0
    (the activations-as-A kernel there) and prefill.ws=1 (the warp-specialized kernel)."""
    if not os.path.exists(path):
        return []
    rows = [r for r in read_jsonl(path) if r.get("tool") == "moejit-run"]
    cell = {(r["model"], r["T"], r.get("tune", "")): r["time_us"] for r in rows}
    keys = sorted({(r["model"], r["T"]) for r in rows}, key=lambda k: (k[0], k[1]))
    L = ["### The MXFP4 middle range, per model", ""]
    L.append("Measured with the activations in column order (the six-instruction conversion). With the fragment k "
             "order that the MoE layer runs, docs/kernels.md (\"Where it runs, and why\") has the same comparison: "
             "there the warp-specialized kernel is 1.08-1.09x faster than the activations-as-A kernel on DeepSeek-V3 "
             "too, and runs the layer's middle range for every model.")
    L.append("")
    L.append("A GPU call of its own: `moejit-run --model M --quant w4a16_mxfp4 --tokens ... --iters 20 --check-tokens 0 --json "
             "middle-range.jsonl` per model, with the default kernels, `MOEJIT_GEMM_TUNE=prefill.ws=0` (the "
             "activations-as-A kernel) and `prefill.ws=1` (the warp-specialized kernel on 32-row tiles). Layer us "
             "(`time_us`); ratio = activations-as-A / warp-specialized (> 1: the warp-specialized kernel is faster).")
    L.append("")
    L.append("| model | T | default us | activations-as-A us | warp-specialized us | ratio |")
    L.append("|---|---|---|---|---|---|")
    for model, T in keys:
        d, a, w = (cell.get((model, T, t)) for t in ("", "prefill.ws=0", "prefill.ws=1"))
        L.append(f"| {model} | {T} | {fmt(d)} | {fmt(a)} | {fmt(w)} | {fmt(a / w, 2) if a and w else '-'} |")
    L.append("")
    L.append("The default column is the warp-specialized kernel for layers of at most 128 experts, the "
             "activations-as-A kernel for DeepSeek-V3.")
    L.append("")
    return L


def mxfp4_decode_tiles_section(folder):
    """MXFP4 decode buckets at 5 to 8 routed rows per expert hit: one n8 token tile per warp
    task (nt1.jsonl, the default) against two (nt2.jsonl), moejit-run --json rows of one GPU
    call, the two runs of each interleaved."""
    paths = {nt: os.path.join(folder, f"nt{nt}.jsonl") for nt in (1, 2)}
    if not all(os.path.exists(p) for p in paths.values()):
        return []
    times = {}
    for nt, path in paths.items():
        for r in read_jsonl(path):
            if r.get("tool") == "moejit-run":
                times.setdefault((r["model"], r["T"], nt), []).append(r["time_us"])
    keys = sorted({(m, T) for m, T, _ in times}, key=lambda k: (k[0], k[1]))
    L = ["## MXFP4 decode at 5 to 8 routed rows per expert", ""]
    L.append("The decode kernel (docs/kernels.md, \"Decode\") with one n8 token tile per warp task, the default "
             "(an expert with more than 8 rows takes a second task), against two tiles per task "
             "(the configuration `MOEJIT_GEMM_TUNE=decode.nt=2` selects; timed with a build that differs only in choosing it "
             "there by default), in one GPU call: `moejit-run --model M --quant w4a16_mxfp4 "
             "--tokens ... --iters 20 --check-tokens 0 --json F`, two runs of each interleaved. Layer us "
             "(`time_us`, the range of the two runs); ratio = two tiles / one tile (> 1: one tile is faster). "
             "The JSON lines are in docs/results-data/mxfp4-decode-tiles/.")
    L.append("")
    L.append("| model | T | rows per expert hit | one tile us | two tiles us | ratio |")
    L.append("|---|---|---|---|---|---|")
    hits = {(r["model"], r["T"]): r.get("experts_hit") for r in read_jsonl(paths[1]) if r.get("tool") == "moejit-run"}
    for model, T in keys:
        one, two = times.get((model, T, 1), []), times.get((model, T, 2), [])
        hit = hits.get((model, T))
        topk = TOP_K.get(model)
        avg = fmt(T * topk / hit, 2) if hit and topk else "-"
        ratio = fmt(statistics.median(two) / statistics.median(one), 2) if one and two else "-"
        L.append(f"| {model} | {T} | {avg} | {run_span(one)} | {run_span(two)} | {ratio} |")
    L.append("")
    return L


def fp8_decode_k_split_section(folder):
    """FP8 per-token decode layers under two K-split rules of the decode kernel: the finest split
    that fits one wave, none past one (layer-one-wave-rule.jsonl) and the wave model
    (layer-wave-model.jsonl, the default), moejit_bench --json rows of one GPU call, two runs of
    each binary interleaved."""
    paths = {"one_wave": os.path.join(folder, "layer-one-wave-rule.jsonl"),
             "model": os.path.join(folder, "layer-wave-model.jsonl")}
    if not all(os.path.exists(p) for p in paths.values()):
        return []
    times, date = {}, ""
    for rule, path in paths.items():
        for r in read_jsonl(path):
            if r.get("kind") == "env":
                date = r.get("date", date)
            if r.get("kind") == "layer" and r.get("routing") == "uniform":
                times.setdefault((r["model"], r["T"], rule), []).append(r["us"])
    keys = sorted({(m, T) for m, T, _ in times})
    L = ["## FP8 per-token decode: the K split", ""]
    L.append("The FP8 per-token decode kernel's K split (docs/kernels.md, \"FP8 per-token decode\"), in one GPU call"
             + (f" ({date})" if date else "") + ": `moejit_bench --modes fp8_per_token --models M --tokens ... "
             "--iters 30 --json F`, a binary with the split of least waves x (units / kw + 10) (the default) and one "
             "with the finest split that fits one wave and none past one, two runs of each interleaved. Layer us "
             "(median of 30, the range of the two runs), uniform routing; ratio = the wave model / one-wave rule "
             "(< 1: the wave model is faster). The rules differ in gpt-oss-120b's gate_up at T = 3 and 5 and down at "
             "5 and 6, Qwen3-30B-A3B's gate_up at T = 5 and 6, Mixtral-8x7B's gate_up at T = 1-3 and down at 4; "
             "elsewhere both binaries run the same kernels, and their differences (up to 11 % on Qwen3-30B-A3B, "
             "whose one-wave-rule runs differ by as much between the two rounds) are the call's spread. "
             "The JSON lines are in docs/results-data/fp8-decode-k-split/.")
    L.append("")
    L.append("| model | T | one-wave rule us | wave model us | ratio |")
    L.append("|---|---|---|---|---|")
    for model, T in keys:
        a, b = times.get((model, T, "one_wave"), []), times.get((model, T, "model"), [])
        ratio = fmt(statistics.median(b) / statistics.median(a), 2) if a and b else "-"
        L.append(f"| {model} | {T} | {run_span(a)} | {run_span(b)} | {ratio} |")
    L.append("")
    return L


def decode_formats_section(path):
    """Decode in every format from one GPU call of moejit-run (eager, queued and CUDA-graph
    times, the steps timed alone), with the share of the copy bandwidth the graph replay reaches
    over the bytes of the weights and scales of the experts hit."""
    if not os.path.exists(path):
        return []
    rows = [r for r in read_jsonl(path) if r.get("tool") == "moejit-run"]
    if not rows:
        return []
    # Rows without copy_tbps / tolerance take moejit-run's defaults for them (4.23 TB/s; 1e-2, FP8 5e-2).
    copy = {r.get("copy_tbps", 4.23) for r in rows}
    tol = lambda r: r.get("tolerance", 5e-2 if r["quant"] in ("mxfp8", "fp8_per_token") else 1e-2)
    failed = [r for r in rows if not (r.get("rel_err", 0) < tol(r))]
    dates = sorted({r["date"] for r in rows if r.get("date")})
    models = sorted({r["model"] for r in rows})
    L = ["## Decode in every format, eager and from a CUDA graph", ""]
    when = f" ({dates[0]})" if len(dates) == 1 else ""
    L.append(f"One GPU call{when}, random weights (tools/common/layer_data.hpp) and uniform routing: "
             "`moejit-run --model M --quant Q --tokens ... --iters 30 --check-tokens 4 --json F`, models "
             f"{', '.join(models)}, the formats and T in the table. eager: the layer between CUDA events on an "
             "idle GPU, host submission inside (`time_us`); queued: behind a 100 us kernel, so its launches "
             "are queued first; graph: one replay of the layer captured in a CUDA graph. MB: the weights "
             "and scales of the experts hit (the weight_scale column: the FP8 per-token scale layout); "
             f"% copy: those bytes over the graph time, against the copy rate of moejit-run's floor "
             f"({', '.join(fmt(c, 2) for c in sorted(copy))} TB/s, a device-to-device copy: read and write, so a "
             "read-only stream can pass 100 %). The steps (gate_up, down, combine) are each timed alone; in the "
             "FP8 modes gate_up and down include their activation quantizer. Sampled tokens run alone against "
             "their rows of the batch: "
             + ("all within the check's tolerance. " if not failed else f"{len(failed)} rows over the tolerance. ")
             + "The JSON lines are in docs/results-data/decode-formats/.")
    L.append("")
    L.append("| model | format | weight_scale | T | experts hit | MB | eager us | queued us | graph us | % copy (graph) | gate_up / down / combine us |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mb = r["weight_tbps"] * r["time_us"]  # TB/s x us = MB
        pct = 100.0 * mb / r["graph_us"] / r.get("copy_tbps", 4.23)
        steps = f"{fmt(r['gate_up_us'])} / {fmt(r['down_us'])} / {fmt(r['combine_us'])}"
        L.append(f"| {r['model']} | {r['quant']} | {r.get('weight_scale', '-')} | {r['T']} | {r['experts_hit']} | "
                 f"{fmt(mb, 0)} | {fmt(r['time_us'])} | {fmt(r['queued_us'])} | {fmt(r['graph_us'])} | {fmt(pct, 0)} | "
                 f"{steps} |")
    L.append("")
    return L


def cond_values(rows, conds, key):
    """The values of f"{key}_{c}_us" over the rows and conditions c where they are present."""
    return [r[f"{key}_{c}_us"] for r in rows for c, _ in conds if f"{key}_{c}_us" in r]


def python_host_cost_section(path):
    """Host time of one layer call from Python (moejit.torch.MoeLayer.run) against the same call
    from C++, from bench/python_overhead.py --gpu (scripts/python-gpu-tests.sh runs it)."""
    if not os.path.exists(path):
        return []
    rows = [r for r in read_jsonl(path) if r.get("what") == "gpu"]
    if not rows:
        return []
    summary = next((r for r in read_jsonl(path) if r.get("what") == "gpu_summary"), {})
    settle = rows[0].get("settle_us")
    L = ["## Host time of a layer call from Python", ""]
    reads = ("each tensor read in one C call through torch's DLPack exchange API" if summary.get("dlpack_exchange")
             else "each tensor read through its Python attributes (this torch has no DLPack exchange API)")
    L.append("`bash scripts/python-gpu-tests.sh dist/moejit-*.whl` (it runs `bench/python_overhead.py --gpu --json "
             "overhead.jsonl`): the gpt-oss-120b W4A16 MXFP4 layer, prewarmed, median host microseconds of "
             "`MoeLayer.run(x, topk_ids, topk_weights, out=out)` (Python; " + reads +
             f", torch {summary.get('torch', '?')}) and of the same `MoeLayer::run` made from C++ "
             "(`MoeLayer.core.host_time_us`). Back to back: calls 2..8 of bursts "
             "of eight made without synchronizing, as a serving loop enqueues layer after layer while the GPU runs "
             "the earlier ones. Idle: each sample launches one untimed layer call on an idle GPU, waits for it, "
             + (f"busy-waits {fmt(settle)} us (settled) or not (immediate), " if settle is not None else "")
             + "then times one call; the wait is the stream synchronize (`moejit.device.synchronize(stream)`, "
             "cuStreamSynchronize) or `torch.cuda.synchronize()` (cudaDeviceSynchronize). The C++ call is timed "
             "twice there: as a C++ program makes it, the wait made in C++ too (cuStreamSynchronize, or "
             "cuCtxSynchronize for torch's wait), and after the same wait made from Python "
             "(in parentheses). `run_ptr` is the bare binding (addresses as integers) and `forward()` and "
             "`torch.ops.moejit.moe_layer` allocate `out`, each immediate after the stream synchronize; check is the "
             "Python path's own work in a loop (the tensor checks in C++ and the stream query). The JSON lines are in "
             "docs/results-data/python-host-cost/.")
    L.append("")
    conds = [("b2b", "back to back")]
    conds += [(f"{w}_{c}", f"{wn}, {c}") for w, wn in (("stream", "stream sync"), ("torch", "torch sync"))
              for c in ("settled", "immediate")]
    L.append("What the Python path adds, measured inside each call (the target's measure): every timed "
             "`MoeLayer.run` also records the host time of the C++ `MoeLayer::run` inside it "
             "(`moejit._moejit._stamp_layer_calls`, steady_clock: the clock of `time.perf_counter_ns`), and a "
             "sample is the Python call's time minus that C++ call's time; median microseconds, the C++ "
             "call's median in parentheses.")
    L.append("")
    L.append("| T | " + " | ".join(f"{name}: Python - C++ us" for _, name in conds) + " |")
    L.append("|---|" + "---|" * len(conds))
    for r in rows:
        cells = " | ".join(f"{fmt(r.get(f'paired_{c}_us'), 2)} ({fmt(r.get(f'inner_{c}_us'))})" for c, _ in conds)
        L.append(f"| {r['T']} | {cells} |")
    L.append("")
    pieces = [("enter", "Python to the binding's C++ (the method call, the stream query, argument conversion)"),
              ("release", "the tensor checks and the GIL release"), ("reacquire", "the GIL taken back"),
              ("return", "the return to Python")]
    spans = []
    for key, what in pieces:
        v = cond_values(rows, conds, key)
        if v:
            spans.append(f"{what} {fmt(min(v), 2)}-{fmt(max(v), 2)} us")
    if spans:
        L.append("The idle samples' pieces (medians, every T and condition): " + "; ".join(spans) + ".")
        L.append("")
    L.append("The same conditions as separate calls: medians of the Python calls and of the C++ calls, "
             "each call's time varying by more than the Python cost (the driver's launches):")
    L.append("")
    head = " | ".join(f"{name}: Python / C++ us | Python - C++" for _, name in conds)
    L.append(f"| T | {head} | `run_ptr` - C++ | check us | `forward()` back to back / immediate us | "
             "`torch.ops.moejit.moe_layer` us |")
    L.append("|---|" + "---|---|" * len(conds) + "---|---|---|---|")

    def cell(r, c):
        if c == "b2b" or f"cppown_{c}_us" not in r:
            return (f"{fmt(r.get(f'run_{c}_us'))} / {fmt(r.get(f'cpp_{c}_us'))} | "
                    f"{fmt(r.get(f'run_minus_cpp_{c}_us'), 2)}")
        return (f"{fmt(r.get(f'run_{c}_us'))} / {fmt(r.get(f'cppown_{c}_us'))} ({fmt(r.get(f'cpp_{c}_us'))}) | "
                f"{fmt(r.get(f'run_minus_cppown_{c}_us'), 2)} ({fmt(r.get(f'run_minus_cpp_{c}_us'), 2)})")
    for r in rows:
        cells = " | ".join(cell(r, c) for c, _ in conds)
        L.append(f"| {r['T']} | {cells} | {fmt(r.get('ptr_minus_cpp_us'), 2)} | {fmt(r.get('args_us'), 2)} | "
                 f"{fmt(r.get('forward_b2b_us'))} / {fmt(r.get('forward_us'))} | {fmt(r.get('op_us'))} |")
    L.append("")
    diffs = cond_values(rows, conds, "paired")
    separate = (cond_values(rows, conds[:1], "run_minus_cpp") +  # back to back
                cond_values(rows, conds[1:], "run_minus_cppown"))  # idle: the C++ program's call
    inflation = cond_values(rows, conds, "inner_minus_cppown")
    checks = [r["args_us"] for r in rows if "args_us" in r]
    ptrs = [r["ptr_minus_cpp_us"] for r in rows if "ptr_minus_cpp_us" in r]
    span = lambda v: (f"{fmt(min(v), 2)}{'-' if min(v) >= 0 else ' to '}{fmt(max(v), 2)} us") if v else "-"
    verdict = "met" if summary.get("ok") else "not met: " + ", ".join(summary.get("misses", []))
    L.append("Target (Python - C++ <= 5 us at every T in every condition, inside one call): "
             f"{verdict} (the differences span "
             f"{span(diffs)})." + (
                 f" Every Python-side figure includes the stamps' four clock reads ({fmt(summary['clock_read_ns'])} ns "
                 "each, read from Python)." if summary.get("clock_read_ns") is not None else "") +
             f" As separate calls the medians differ by {span(separate)}; the C++ call made from Python "
             f"against the same call made by the C++ program (medians): {span(inflation)}."
             + f" The check column (the Python path's own work, in a loop) spans {span(checks)}; the "
             f"bare binding (`run_ptr`: the Python call, its integer arguments, the GIL released around the launch) "
             f"adds {span(ptrs)} over C++. `forward()` adds the allocation of `out` (torch.empty); the dispatcher "
             "path (`torch.ops`) is what `torch.compile` emits, where CUDA graphs take the host out of the step.")
    L.append("")
    L.extend(python_host_cost_other_machines(path, conds, cond_values(rows, conds, "inner")))
    return L


def python_host_cost_other_machines(path, conds, here):
    """One paragraph per further run of bench/python_overhead.py --gpu kept beside `path`
    (overhead-*.jsonl: the same benchmark on another machine), with its paired verdict."""
    L = []
    for other in sorted(glob.glob(os.path.join(os.path.dirname(path), "overhead-*.jsonl"))):
        rows = [r for r in read_jsonl(other) if r.get("what") == "gpu"]
        summary = next((r for r in read_jsonl(other) if r.get("what") == "gpu_summary"), {})
        inner = cond_values(rows, conds, "inner")
        if not cond_values(rows, conds, "paired"):
            continue
        verdict = "met" if summary.get("ok") else "not met: " + ", ".join(summary.get("misses", []))
        by_t = "; ".join(f"T = {r['T']}: {fmt(min(v), 2)}-{fmt(max(v), 2)} us"
                         for r in rows for v in [cond_values([r], conds, "paired")])
        here_span = f" (above: {fmt(min(here))}-{fmt(max(here))} us)" if here else ""
        L.append(f"The same benchmark on another H200 machine (`{os.path.basename(other)}` beside it): Python - C++ "
                 f"inside one call {by_t}; target {verdict}. There the C++ call itself took "
                 f"{fmt(min(inner))}-{fmt(max(inner))} us (medians){here_span}.")
        L.append("")
    return L


def serving_section(folder):
    """The serving-trace replay on the GPU (bench/run-serving.sh): the results files of one
    measurement (its parts: results-single-1.json, results-single-2.json, ...), merged."""
    paths = sorted(glob.glob(os.path.join(folder, "*.json")))
    if not paths:
        return []
    from serving import report as serving_report
    rel = os.path.relpath(folder, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return serving_report.page_section(paths, rel) + [""]


def make_chart(path, timed, peers, ceilings):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = "gpt-oss-120b"
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, kind in zip(axes, ("layer", "gate_up")):
        for mode in MODE_ORDER:
            pts = sorted((r["T"], r["us"]) for r in timed if r["model"] == model and r["kind"] == kind
                         and r["mode"] == mode and r.get("routing", "uniform") == "uniform")
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"moejit {mode}")
        for pname in sorted(set(PEER_OF_MODE.values())):
            pts = []
            for T in sorted({k[3] for k in peers if k[0] == model}):
                if kind == "layer":
                    a = peers.get((model, "gate_up", "uniform", T, pname), {})
                    b = peers.get((model, "down", "uniform", T, pname), {})
                    if "us" in a and "us" in b:
                        pts.append((T, a["us"] + b["us"]))
                else:
                    a = peers.get((model, kind, "uniform", T, pname), {})
                    if "us" in a:
                        pts.append((T, a["us"]))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="--", marker="x",
                        label=pname + (" (gate_up+down)" if kind == "layer" else ""))
        # Floor of the MXFP4 mode: max(bytes that must move / copy BW, flops / bf16 rate).
        fl = sorted((r["T"], max(r.get("bytes", 0) / (ceilings["copy_TBps"] * 1e12),
                                 r.get("flops", 0) / (ceilings["bf16_mm_TFLOPs"] * 1e12)) * 1e6)
                    for r in timed if r["model"] == model and r["kind"] == kind and r["mode"] == "w4a16_mxfp4"
                    and r.get("routing", "uniform") == "uniform" and "bytes" in r)
        if fl:
            ax.plot([p[0] for p in fl], [p[1] for p in fl], color="black", linestyle=":", label="w4a16_mxfp4 floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens T")
        ax.set_ylabel("time (us)")
        ax.set_title(f"{model} {kind}, uniform routing")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"copy {ceilings['copy_TBps']:.2f} TB/s, bf16 {ceilings['bf16_mm_TFLOPs']:.0f} TFLOP/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"![gpt-oss-120b time vs T]({os.path.basename(path)})"


if __name__ == "__main__":
    sys.exit(main())
