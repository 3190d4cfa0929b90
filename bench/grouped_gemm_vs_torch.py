#!/usr/bin/env python3
"""moejit::grouped_gemm (rows already sorted by expert) beside torch's grouped
GEMMs on the same operands, in one process:

  bf16:          moejit::grouped_gemm(quant='bf16')  vs  torch._grouped_mm
  fp8_per_token: moejit::grouped_gemm(quant='fp8_per_token', per-channel weight
                 scales)  vs  torch._scaled_grouped_mm (rowwise scales, bf16 out,
                 fast accumulation); both read the same e4m3 A and its per-row
                 scales (moejit::quantize_fp8, not timed)

Shapes: the gate_up (N = 2I, K = D, no activation) and down (N = D, K = I)
GEMMs of four models at T tokens with uniform routing (top_k distinct experts
per token), so M = T * top_k rows. Timing: CUDA events, 3 warm-ups, median of
--iters runs (10 when a run exceeds 5 ms), --sets activation sets rotated to
defeat L2; the bf16 and fp8 matmul ceilings of bench/peers.py measured in the
same run. One JSON line per row (stdout and --json), then a Markdown table.
Each row also gives the relative difference between moejit's and torch's Y.

  python3 bench/grouped_gemm_vs_torch.py --json grouped.jsonl [--tokens 4096,16384]
Needs torch with CUDA and the moejit package (pip install .).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402  (the ceilings and the timing loop)
import moejit.torch  # noqa: E402,F401  registers moejit::grouped_gemm

DEV = "cuda"


def uniform_offsets(T, E, k, gen):
    ids = torch.rand((T, E), generator=gen, device=DEV).topk(k, dim=1).indices
    counts = torch.bincount(ids.flatten(), minlength=E)
    return torch.cat([torch.zeros(1, dtype=torch.int32, device=DEV), counts.cumsum(0).to(torch.int32)])


def rel_diff(a, b):
    return float(torch.linalg.norm(a.double() - b.double()) / torch.linalg.norm(b.double()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="", help="also write the JSON lines here")
    ap.add_argument("--models", default=",".join(peers.MODELS), help="comma-separated")
    ap.add_argument("--tokens", default="4096,16384", help="comma-separated T")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--sets", type=int, default=3)
    args = ap.parse_args()
    out = open(args.json, "w") if args.json else None

    def emit(row):
        line = json.dumps(row)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    ceil = peers.ceilings()
    ceil["bench"] = "grouped_gemm"
    if out:
        out.write(json.dumps(ceil) + "\n")
    gen = torch.Generator(device=DEV).manual_seed(1)
    rows = []
    for model in args.models.split(","):
        D, I, E, k, N1 = peers.MODELS[model]
        for gemm, N, K in (("gate_up", N1, D), ("down", D, I)):
            W = (torch.randn((E, N, K), generator=gen, device=DEV) * K ** -0.5).to(torch.bfloat16)
            sw = W.float().abs().amax(dim=2) / 448.0
            W8 = (W.float() / sw[:, :, None]).to(torch.float8_e4m3fn)
            for T in (int(t) for t in args.tokens.split(",")):
                offs = uniform_offsets(T, E, k, gen)
                M = T * k
                A = [torch.randn((M, K), generator=gen, device=DEV).to(torch.bfloat16) for _ in range(args.sets)]
                Q = [torch.ops.moejit.quantize_fp8(a, "fp8_per_token") for a in A]
                i = [0]

                def nxt():
                    i[0] = (i[0] + 1) % args.sets
                    return i[0]

                impls = {
                    ("bf16", "moejit"): lambda: torch.ops.moejit.grouped_gemm(A[nxt()], offs, W),
                    ("bf16", "torch._grouped_mm"): lambda: torch._grouped_mm(A[nxt()], W.transpose(1, 2),
                                                                             offs=offs[1:]),
                    ("fp8_per_token", "moejit"): lambda: (lambda j: torch.ops.moejit.grouped_gemm(
                        Q[j][0], offs, W8, sw, None, Q[j][1], "fp8_per_token"))(nxt()),
                    ("fp8_per_token", "torch._scaled_grouped_mm"): lambda: (lambda j: torch._scaled_grouped_mm(
                        Q[j][0], W8.transpose(1, 2), Q[j][1], sw, offs=offs[1:], out_dtype=torch.bfloat16,
                        use_fast_accum=True))(nxt()),
                }
                flops = 2.0 * M * N * K
                ys = {}
                for (mode, impl), fn in impls.items():
                    row = {"bench": "grouped_gemm", "model": model, "gemm": gemm, "T": T, "rows": M, "n": N, "k": K,
                           "experts": E, "mode": mode, "impl": impl}
                    try:
                        i[0] = -1  # the first call reads set 0 (the Y compared below)
                        ys[(mode, impl)] = fn()
                        t, tmin, n = peers.bench(fn, args.iters)
                        peak = ceil.get("fp8_mm_TFLOPs" if mode == "fp8_per_token" else "bf16_mm_TFLOPs")
                        tf = flops / (t * 1e-3) / 1e12
                        row.update(us=t * 1e3, min_us=tmin * 1e3, iters=n, tflops=tf,
                                   pct_peak=100 * tf / peak if peak else None)
                    except Exception as ex:  # noqa: BLE001
                        row["error"] = (type(ex).__name__ + ": " + str(ex))[:400]
                    rows.append(row)
                    emit(row)
                for mode in ("bf16", "fp8_per_token"):
                    mine = ys.get((mode, "moejit"))
                    theirs = [v for (m, impl), v in ys.items() if m == mode and impl != "moejit"]
                    if mine is not None and theirs:
                        emit({"bench": "grouped_gemm", "kind": "agreement", "model": model, "gemm": gemm, "T": T,
                              "mode": mode, "rel_diff": rel_diff(mine, theirs[0])})
                del A, Q
                torch.cuda.empty_cache()
            del W, W8, sw
            torch.cuda.empty_cache()

    print("\n| model | GEMM | T | mode | moejit us | torch us | torch / moejit | moejit TFLOP/s | % peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    cell = {(r["model"], r["gemm"], r["T"], r["mode"], r["impl"] == "moejit"): r for r in rows if "us" in r}
    for (model, gemm, T, mode, mine), r in cell.items():
        if not mine:
            continue
        p = cell.get((model, gemm, T, mode, False))
        ratio = f"{p['us'] / r['us']:.2f}" if p else "-"
        pus = f"{p['us']:.0f}" if p else "-"
        pct = f"{r['pct_peak']:.0f}" if r.get("pct_peak") else "-"
        print(f"| {model} | {gemm} | {T} | {mode} | {r['us']:.0f} | {pus} | {ratio} | {r['tflops']:.0f} | {pct} |")
    print(f"\nceilings: bf16 {ceil.get('bf16_mm_TFLOPs', 0):.0f} TFLOP/s, fp8 {ceil.get('fp8_mm_TFLOPs', 0):.0f} TFLOP/s")


if __name__ == "__main__":
    main()
