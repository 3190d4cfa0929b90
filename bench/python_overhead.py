#!/usr/bin/env python3
"""Host cost of one MoE layer call from Python (moejit.torch.MoeLayer.run), piece by piece.

  python3 bench/python_overhead.py [--iters N] [--json FILE]          any machine with torch
  python3 bench/python_overhead.py --gpu [--tokens 1,8,64,512] [...]   with a CUDA GPU: the whole call

Without --gpu (CPU tensors; where the layer compares CUDA device indices the CPU's -1 stands in):
  - each tensor read the fast path makes (x.shape, x.stride(), x.get_device(), ...) and the
    per-element forms it avoids (x.shape[0], x.stride(1), x.dim()),
  - the check on MoeLayer.run's fast path (moejit.torch._fast_args: each property read once) and
    the same checks made with one call per element (per_element_check below), and the four
    address reads run() makes after them,
  - one nanobind call (moejit.round_up_tokens), the floor of MoeLayer.run_ptr's argument conversion.
With --gpu: the gpt-oss-120b layer with random MXFP4 weights, prewarmed, for each T: the median
host time (the call alone, the GPU idle before it) of MoeLayer.run(out=...), of forward() (it
allocates out), of torch.ops.moejit.moe_layer (the dispatcher), and of C++ MoeLayer::run
(MoeLayer.host_time_us, the same call from C++); the Python cost is run - C++ (target <= 5 us).
One JSON object per measurement on stdout (and in --json FILE).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit


def per_element_check(x, topk_ids, topk_weights, out, D, k, max_tokens, dev):
    """The fast path's checks made with one call per element (x.dim(), x.shape[i], x.stride(i)):
    the form _fast_args replaces, kept here as the comparison."""
    import torch
    try:
        T = x.shape[0]
        ok = (x.dtype is torch.bfloat16 and topk_ids.dtype is torch.int32 and topk_weights.dtype is torch.float32
              and x.dim() == 2 and x.shape[1] == D and x.stride(1) == 1 and T <= max_tokens
              and topk_ids.shape == (T, k) and topk_weights.shape == (T, k)
              and topk_ids.is_contiguous() and topk_weights.is_contiguous()
              and x.get_device() == dev and topk_ids.get_device() == dev and topk_weights.get_device() == dev)
        if ok and out is not None:
            ok = (out.dtype is torch.bfloat16 and out.shape == (T, D) and out.stride(1) == 1
                  and out.get_device() == dev)
        return (T, x.stride(0), out.stride(0)) if ok else None
    except (AttributeError, TypeError, IndexError):
        return None


def ns_per_call(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9


def cpu_part(iters: int, emit) -> None:
    import torch

    import moejit
    import moejit.torch as mt
    T, D, k = 64, 2880, 4
    x = torch.empty((T, D), dtype=torch.bfloat16)
    ids = torch.zeros((T, k), dtype=torch.int32)
    w = torch.zeros((T, k), dtype=torch.float32)
    out = torch.empty((T, D), dtype=torch.bfloat16)
    reads = {
        "x.shape": lambda: x.shape, "T, D = x.shape": lambda: tuple(x.shape), "x.shape[0]": lambda: x.shape[0],
        "x.dim()": lambda: x.dim(), "x.dtype": lambda: x.dtype, "x.stride()": lambda: x.stride(),
        "x.stride(1)": lambda: x.stride(1), "x.get_device()": lambda: x.get_device(),
        "ids.is_contiguous()": lambda: ids.is_contiguous(), "ids.shape == (T, k)": lambda: ids.shape == (T, k),
        "x.data_ptr()": lambda: x.data_ptr(), "lambda (the timing's floor)": lambda: None,
    }
    for name, fn in reads.items():
        emit({"what": "read", "name": name, "ns": round(ns_per_call(fn, iters), 1)})
    assert mt._fast_args(x, ids, w, out, D, k, 8192, -1) == (T, D, D)
    assert per_element_check(x, ids, w, out, D, k, 8192, -1) == (T, D, D)
    fast = ns_per_call(lambda: mt._fast_args(x, ids, w, out, D, k, 8192, -1), iters)
    per_elem = ns_per_call(lambda: per_element_check(x, ids, w, out, D, k, 8192, -1), iters)
    ptrs = ns_per_call(lambda: (x.data_ptr(), ids.data_ptr(), w.data_ptr(), out.data_ptr()), iters)
    nb = ns_per_call(lambda: moejit.round_up_tokens(T), iters)
    emit({"what": "check", "name": "fast path (moejit.torch._fast_args)", "ns": round(fast, 1)})
    emit({"what": "check", "name": "the same checks, one call per element", "ns": round(per_elem, 1)})
    emit({"what": "check", "name": "four data_ptr() reads", "ns": round(ptrs, 1)})
    emit({"what": "check", "name": "one nanobind call (moejit.round_up_tokens)", "ns": round(nb, 1)})
    emit({"what": "summary", "name": "checks and addresses of one MoeLayer.run call (no launch, no stream)",
          "fast_path_ns": round(fast + ptrs, 1), "per_element_ns": round(per_elem + ptrs, 1)})


def one_call_us(fn, sync) -> float:
    """Host time of one call, the GPU idle before it."""
    sync()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    return (t1 - t0) / 1e3


def gpu_part(tokens, iters: int, emit) -> bool:
    import torch

    import moejit.torch as mt
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    layer = mt.MoeLayer.from_config("gpt-oss-120b", max_num_tokens=max(tokens), device=dev)
    s = layer.shape
    E, D, I = s.experts, s.hidden, s.intermediate
    g = torch.Generator(device=dev).manual_seed(0)

    def u8(*shape, lo=0, hi=256):
        return torch.randint(lo, hi, shape, generator=g, device=dev, dtype=torch.int32).to(torch.uint8)
    layer.load_weights(u8(E, 2 * I, D // 2), u8(E, 2 * I, D // 32, lo=121, hi=124),
                       (torch.randn((E, 2 * I), generator=g, device=dev) * 0.1).to(torch.bfloat16),
                       u8(E, D, I // 2), u8(E, D, I // 32, lo=121, hi=124),
                       (torch.randn((E, D), generator=g, device=dev) * 0.1).to(torch.bfloat16))
    layer.prewarm()
    sync = torch.cuda.synchronize
    ok = True
    for T in tokens:
        x = torch.randn((T, D), generator=g, device=dev).to(torch.bfloat16)
        tw, ti = mt.fused_topk(torch.randn((T, E), generator=g, device=dev), s.top_k)
        out = torch.empty((T, D), dtype=torch.bfloat16, device=dev)
        for _ in range(3):
            layer.run(x, ti, tw, out=out)
        args = (T, x.data_ptr(), x.stride(0), ti.data_ptr(), tw.data_ptr(), out.data_ptr(), out.stride(0),
                layer.workspace.data_ptr(), layer.workspace.numel(), mt.current_stream(dev), 1)
        samples = {"run": [], "forward": [], "op": [], "cpp": []}
        for _ in range(iters):  # interleaved, so that a drift of the machine touches all four alike
            samples["run"].append(one_call_us(lambda: layer.run(x, ti, tw, out=out), sync))
            samples["cpp"].append(layer.core.host_time_us(*args)[0])
            samples["forward"].append(one_call_us(lambda: layer(x, ti, tw), sync))
            samples["op"].append(one_call_us(lambda: torch.ops.moejit.moe_layer(x, ti, tw, layer.handle), sync))
        sync()
        run_us, fwd_us, op_us, cpp_us = (statistics.median(samples[k]) for k in ("run", "forward", "op", "cpp"))
        ok &= run_us - cpp_us <= 5.0
        emit({"what": "gpu", "T": T, "run_us": round(run_us, 2), "forward_us": round(fwd_us, 2),
              "op_us": round(op_us, 2), "cpp_us": round(cpp_us, 2), "run_minus_cpp_us": round(run_us - cpp_us, 2),
              "forward_minus_cpp_us": round(fwd_us - cpp_us, 2), "op_minus_cpp_us": round(op_us - cpp_us, 2)})
    emit({"what": "gpu_summary", "target": "run - cpp <= 5 us at every T", "ok": ok,
          "misses_after_seal": layer.runtime.stats()["misses_after_seal"]})
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="also time the whole call on CUDA device 0")
    ap.add_argument("--tokens", default="1,8,64,512")
    ap.add_argument("--iters", type=int, default=0, help="calls per measurement (default 200000 CPU, 200 GPU)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []

    def emit(d):
        rows.append(d)
        print(json.dumps(d), flush=True)
    cpu_part(a.iters or 200000, emit)
    ok = True
    if a.gpu:
        ok = gpu_part([int(t) for t in a.tokens.split(",")], a.iters or 200, emit)
    if a.json:
        with open(a.json, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
