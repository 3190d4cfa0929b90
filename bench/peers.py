#!/usr/bin/env python3
"""Peers of moejit's grouped GEMMs, timed on the same shapes and routings.

For every routing file that moejit_bench --dump-dir wrote
(<model>_<routing>_T<T>.i32: int32 [T, top_k], little-endian) and each GEMM
(gate_up: N = 2I, K = D; down: N = D, K = I):
  * torch._grouped_mm, bf16 weights [E, N, K] (B passed as the [E, K, N] view)
  * torch._scaled_grouped_mm, fp8 e4m3 rowwise (fp32 scale per row of A and per
    output channel of W), bf16 out, fast accumulation
  * MXFP4 "dequantize then torch._grouped_mm": the hit experts' e2m1 weights and
    E8M0 scales [H, N, K/2] / [H, N, K/32] are dequantized to bf16 and fed to
    torch._grouped_mm; the time covers both (dequant_us reported too)
and, with --wgrad, the gate_up weight gradient (dW[e] = grad_e^T X_e over the
expert's routed rows, N = 2I, K = D):
  * torch._grouped_mm in its 2D x 2D form (groups along the reduction
    dimension, offs = the experts' row offsets, each expert padded to a
    multiple of 8 rows as that form requires): grad^T [N, rows] stored
    row-major and the gathered X rows as a column-major [rows, K] view, both
    transposed and gathered before timing; bf16 dW [E, N, K]
The rows of A are the routed rows, already gathered and sorted by expert
(the peers do not gather X by token, moejit's gate_up does). Ceilings in the
same run: a 4 GiB device-to-device copy (bytes read + written per second), an
8192^3 bf16 matmul and an fp8 (torch._scaled_mm) matmul.

Timing: CUDA events, 3 warm-ups, median of 50 runs (10 when a run exceeds 5 ms),
3 activation sets rotated. One JSON line per row on stdout and in --json. A peer
that fails (shape constraint, missing op) is a row with "error".

  python3 bench/peers.py --dump-dir DIR --json peers.jsonl [--models ...] [--tokens ...] [--wgrad]
"""
import argparse
import glob
import json
import math
import os
import re
import sys
import time

import torch

MODELS = {
    # name: (D, I, E, top_k, gate_up columns N1)
    "gpt-oss-120b": (2880, 2880, 128, 4, 5760),
    "qwen3-30b-a3b": (2048, 768, 128, 8, 1536),
    "deepseek-v3": (7168, 2048, 256, 8, 4096),
    "mixtral-8x7b": (4096, 14336, 8, 2, 28672),
}
DEV = "cuda"
OUT = None
ENV = {}


def emit(row):
    line = json.dumps(row)
    print(line, flush=True)
    if OUT is not None:
        OUT.write(line + "\n")
        OUT.flush()


def bench(fn, iters=50, long_iters=10, long_ms=5.0):
    """Median milliseconds of fn over CUDA events; fewer runs for long rows."""
    def once():
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e)
    warm = sorted(once() for _ in range(3))
    n = long_iters if warm[1] > long_ms else iters
    ts = sorted(once() for _ in range(n))
    med = ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])
    return med, ts[0], n


def ceilings():
    res = {"bench": "peer", "kind": "ceiling", "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        n = 4 << 30
        a = torch.empty(n, dtype=torch.uint8, device=DEV)
        b = torch.empty_like(a)
        a.fill_(1)
        t, _, _ = bench(lambda: b.copy_(a), iters=20)
        res["copy_TBps"] = 2 * n / (t * 1e-3) / 1e12
        del a, b
    except Exception as ex:  # noqa: BLE001
        res["copy_err"] = str(ex)[:300]
    torch.cuda.empty_cache()
    try:
        x = torch.randn(8192, 8192, dtype=torch.bfloat16, device=DEV)
        y = torch.randn(8192, 8192, dtype=torch.bfloat16, device=DEV)
        t, _, _ = bench(lambda: x @ y, iters=20)
        res["bf16_mm_TFLOPs"] = 2 * 8192 ** 3 / (t * 1e-3) / 1e12
        try:
            xf = x.to(torch.float8_e4m3fn)
            yf = y.to(torch.float8_e4m3fn).t().contiguous().t()
            one = torch.ones((), device=DEV)
            t, _, _ = bench(lambda: torch._scaled_mm(xf, yf, one, one, out_dtype=torch.bfloat16, use_fast_accum=True),
                            iters=20)
            res["fp8_mm_TFLOPs"] = 2 * 8192 ** 3 / (t * 1e-3) / 1e12
        except Exception as ex:  # noqa: BLE001
            res["fp8_mm_err"] = str(ex)[:300]
    except Exception as ex:  # noqa: BLE001
        res["bf16_mm_err"] = str(ex)[:300]
    torch.cuda.empty_cache()
    emit(res)
    return res


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def pair_lut():
    """[256, 2] bf16: byte b -> (e2m1(b & 15), e2m1(b >> 4)) (even k in the low nibble)."""
    lut = torch.tensor(E2M1, dtype=torch.bfloat16, device=DEV)
    idx = torch.arange(256, device=DEV)
    return torch.stack([lut[idx & 15], lut[idx >> 4]], dim=-1).contiguous()


def dequant_mxfp4(packed, scales, lut):
    """packed uint8 [H, N, K/2], scales E8M0 uint8 [H, N, K/32] -> bf16 [H, N, K]."""
    H, N, K2 = packed.shape
    K = 2 * K2
    vals = torch.nn.functional.embedding(packed.to(torch.int32), lut)  # [H, N, K/2, 2]
    s = torch.exp2(scales.to(torch.float32) - 127.0).to(torch.bfloat16)  # [H, N, K/32]
    return (vals.view(H, N, K // 32, 32) * s.unsqueeze(-1)).view(H, N, K)


def load_routings(dump_dir, models, tokens):
    """{(model, routing, T): int32 tensor [T, top_k]} from the dump dir; uniform
    routings are generated for (model, T) pairs without a file."""
    out = {}
    pat = re.compile(r"(.+)_(uniform|skewed)_T(\d+)\.i32$")
    for path in sorted(glob.glob(os.path.join(dump_dir or "", "*.i32"))):
        m = pat.match(os.path.basename(path))
        if not m or m.group(1) not in models:
            continue
        model, routing, T = m.group(1), m.group(2), int(m.group(3))
        if tokens and T not in tokens:
            continue
        k = MODELS[model][3]
        data = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.int32)
        if data.numel() != T * k:
            continue
        out[(model, routing, T)] = (data.view(T, k), "moejit_bench")
    for model in models:
        for T in tokens:
            if (model, "uniform", T) not in out:
                D, I, E, k, N1 = MODELS[model]
                g = torch.Generator().manual_seed(T)
                ids = torch.rand(T, E, generator=g).argsort(dim=1)[:, :k].to(torch.int32)
                out[(model, "uniform", T)] = (ids, "generated")
    return out


def run_model(model, routings, iters, sets):
    D, I, E, k, N1 = MODELS[model]
    lut = pair_lut()
    for gemm, (N, K) in (("gate_up", (N1, D)), ("down", (D, I))):
        torch.cuda.empty_cache()
        try:
            W = torch.randn(E, N, K, dtype=torch.bfloat16, device=DEV) * (2.0 / math.sqrt(K))
            Wt = W.transpose(-2, -1)  # [E, K, N], column-major view
            W8 = W.to(torch.float8_e4m3fn).transpose(-2, -1)
            sb = torch.ones(E, N, device=DEV, dtype=torch.float32)
            packed = torch.randint(0, 256, (E, N, K // 2), dtype=torch.uint8, device=DEV)
            pscales = torch.randint(120, 123, (E, N, K // 32), dtype=torch.uint8, device=DEV)
        except Exception as ex:  # noqa: BLE001
            emit({"bench": "peer", "model": model, "gemm": gemm, "error": "weights: " + str(ex)[:300]})
            continue
        for (m, routing, T), (ids, source) in sorted(routings.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            if m != model:
                continue
            M = T * k
            flat = ids.flatten().to(torch.int64)
            counts = torch.bincount(flat[flat >= 0], minlength=E).to(DEV)
            M = int(counts.sum())
            offs = torch.cumsum(counts, 0).to(torch.int32)
            hit_idx = torch.nonzero(counts > 0).flatten()
            hit = int(hit_idx.numel())
            offs_hit = torch.cumsum(counts[hit_idx], 0).to(torch.int32)
            # bytes that must move (as moejit_bench): weights of the experts hit +
            # gate_up: X [T, D] and H [R, I]; down: H [R, I] and Y [R, D] (bf16).
            act = (T * D * 2 + M * I * 2) if gemm == "gate_up" else (M * I * 2 + M * D * 2)
            flops = 2.0 * M * N * K
            base = {"bench": "peer", "gpu": ENV.get("gpu"), "torch": torch.__version__, "model": model,
                    "gemm": gemm, "routing": routing, "T": T, "rows": M, "experts_hit": hit,
                    "routing_source": source, "flops": flops}
            try:
                A = [torch.randn(M, K, dtype=torch.bfloat16, device=DEV) for _ in range(sets)]
                A8 = [a.to(torch.float8_e4m3fn) for a in A]
                sa = torch.ones(M, device=DEV, dtype=torch.float32)
            except Exception as ex:  # noqa: BLE001
                emit(dict(base, peer="inputs", error=str(ex)[:300]))
                continue
            i = [0]

            def nxt():
                i[0] = (i[0] + 1) % sets
                return i[0]

            peers = [
                ("torch._grouped_mm bf16", 2.0, lambda: torch._grouped_mm(A[nxt()], Wt, offs=offs)),
                ("torch._scaled_grouped_mm fp8 rowwise", 1.0 + 4.0 / K,
                 lambda: (lambda j: torch._scaled_grouped_mm(A8[j], W8, sa, sb, offs=offs, out_dtype=torch.bfloat16,
                                                             use_fast_accum=True))(nxt())),
            ]

            def mxfp4_peer():
                j = nxt()
                w = dequant_mxfp4(packed.index_select(0, hit_idx), pscales.index_select(0, hit_idx), lut)
                return torch._grouped_mm(A[j], w.transpose(-2, -1), offs=offs_hit)

            peers.append(("mxfp4 dequant + torch._grouped_mm", 0.5 + 1.0 / 32, mxfp4_peer))
            for name, bpw, fn in peers:
                row = dict(base, peer=name)
                try:
                    t, tmin, n = bench(fn, iters)
                    wbytes = hit * N * K * bpw
                    row.update(us=t * 1e3, min_us=tmin * 1e3, iters=n, bytes=wbytes + act,
                               tbps=(wbytes + act) / (t * 1e-3) / 1e12, tflops=flops / (t * 1e-3) / 1e12)
                    if name.startswith("mxfp4"):
                        td, _, _ = bench(lambda: dequant_mxfp4(packed.index_select(0, hit_idx),
                                                               pscales.index_select(0, hit_idx), lut), iters)
                        row["dequant_us"] = td * 1e3
                except Exception as ex:  # noqa: BLE001
                    row["error"] = (type(ex).__name__ + ": " + str(ex))[:400]
                emit(row)
                torch.cuda.empty_cache()
            del A, A8
        del W, Wt, W8, packed, pscales


def run_wgrad(model, routings, iters, sets):
    """The gate_up weight gradient: torch._grouped_mm's 2D x 2D form, groups along the rows."""
    D, I, E, k, N1 = MODELS[model]
    for (m, routing, T), (ids, source) in sorted(routings.items(), key=lambda kv: kv[0][2]):
        if m != model or routing != "uniform":
            continue
        flat = ids.flatten().to(torch.int64)
        counts = torch.bincount(flat[flat >= 0], minlength=E).to(DEV)
        M = int(counts.sum())
        flops = 2.0 * M * N1 * D
        # Why padded: the 2D x 2D form needs each group's extent along the reduction
        # to be a multiple of 16 bytes, so a torch user pads each expert to 8 rows.
        padded = (counts + 7) // 8 * 8
        Mp = int(padded.sum())
        offs = torch.cumsum(padded, 0).to(torch.int32)
        row = {"bench": "peer", "gpu": ENV.get("gpu"), "torch": torch.__version__, "model": model,
               "gemm": "wgrad_gate_up", "routing": routing, "T": T, "rows": M, "padded_rows": Mp,
               "experts_hit": int((counts > 0).sum()), "routing_source": source, "flops": flops,
               "peer": "torch._grouped_mm wgrad bf16"}
        try:
            # grad^T [N1, M] row-major; X rows gathered, stored [D, M] so that .t() is [M, D] column-major.
            ga = [torch.randn(N1, Mp, dtype=torch.bfloat16, device=DEV) for _ in range(sets)]
            xb = [torch.randn(D, Mp, dtype=torch.bfloat16, device=DEV) for _ in range(sets)]
            i = [0]

            def fn():
                i[0] = (i[0] + 1) % sets
                return torch._grouped_mm(ga[i[0]], xb[i[0]].t(), offs=offs)

            t, tmin, n = bench(fn, iters)
            nbytes = E * N1 * D * 2 + M * N1 * 2 + M * D * 2  # bf16 dW written, grad and X read once
            row.update(us=t * 1e3, min_us=tmin * 1e3, iters=n, bytes=nbytes,
                       tbps=nbytes / (t * 1e-3) / 1e12, tflops=flops / (t * 1e-3) / 1e12)
        except Exception as ex:  # noqa: BLE001
            row["error"] = (type(ex).__name__ + ": " + str(ex))[:400]
        emit(row)
        ga = xb = None
        torch.cuda.empty_cache()


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump-dir", default="", help="routing files from moejit_bench --dump-dir")
    ap.add_argument("--json", default="", help="also write the JSON lines here")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    ap.add_argument("--tokens", default="1,8,64,512,4096,16384", help="comma-separated T")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--sets", type=int, default=3, help="activation sets rotated")
    ap.add_argument("--wgrad", action="store_true", help="also time the gate_up weight gradient peer")
    ap.add_argument("--wgrad-only", action="store_true", help="time only the weight gradient peer")
    args = ap.parse_args()
    if args.json:
        OUT = open(args.json, "a")
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            print(f"peers.py: unknown model {m} (known: {', '.join(MODELS)})", file=sys.stderr)
            return 2
    tokens = [int(t) for t in args.tokens.split(",") if t]
    if not torch.cuda.is_available():
        print("SKIPPED: peers.py: no CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    t0 = time.time()
    ENV["gpu"] = torch.cuda.get_device_name()
    ceilings()
    routings = load_routings(args.dump_dir, models, tokens)
    for model in models:
        try:
            if not args.wgrad_only:
                run_model(model, routings, args.iters, args.sets)
            if args.wgrad or args.wgrad_only:
                run_wgrad(model, routings, args.iters, args.sets)
        except Exception as ex:  # noqa: BLE001
            emit({"bench": "peer", "model": model, "error": (type(ex).__name__ + ": " + str(ex))[:400]})
        torch.cuda.empty_cache()
    emit({"bench": "peer", "kind": "done", "wall_s": time.time() - t0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
