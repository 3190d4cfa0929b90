"""gpt-oss-120b-shaped MoE layer with random MXFP4 weights through the
PyTorch fused-MoE module (examples/fused_moe.py):

  1. checks it against plain torch (bf16 dequantized weights) for each T,
  2. prints per-T GPU times, eager and CUDA-graph replay (CUDA events, median),
  3. prints the host time of one call from Python (the custom op, and the
     direct call) and from C++ (MoeLayer::run), and the difference,
  4. runs the C++ moejit-run on the same shape for its times beside them.

    python examples/gpt_oss_120b_random.py [--tokens 1,8,64,512,4096] [--iters 50]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import moejit  # noqa: E402
import moejit.torch as mt  # noqa: E402
from fused_moe import FusedMoE, torch_reference_moe  # noqa: E402

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize_bf16(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    lut = torch.tensor(E2M1, dtype=torch.float32, device=blocks.device)
    codes = torch.stack([blocks & 0xF, blocks >> 4], dim=-1).reshape(*blocks.shape[:-1], -1).long()
    s = torch.pow(2.0, scales.float() - 127.0).repeat_interleave(32, dim=-1)
    return (lut[codes] * s).to(torch.bfloat16)


def random_weights(shape, dev, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    E, D, I = shape.experts, shape.hidden, shape.intermediate
    w1 = torch.empty((E, 2 * I, D // 2), dtype=torch.uint8, device=dev)
    w1s = torch.empty((E, 2 * I, D // 32), dtype=torch.uint8, device=dev)
    w2 = torch.empty((E, D, I // 2), dtype=torch.uint8, device=dev)
    w2s = torch.empty((E, D, I // 32), dtype=torch.uint8, device=dev)
    for e in range(E):  # one expert at a time: fp32 staging stays small
        w1[e], w1s[e] = torch.ops.moejit.quantize_mxfp4(torch.randn((2 * I, D), generator=g, device=dev) / D ** 0.5)
        w2[e], w2s[e] = torch.ops.moejit.quantize_mxfp4(torch.randn((D, I), generator=g, device=dev) / I ** 0.5)
    b1 = (torch.randn((E, 2 * I), generator=g, device=dev) * 0.05).to(torch.bfloat16)
    b2 = (torch.randn((E, D), generator=g, device=dev) * 0.05).to(torch.bfloat16)
    return w1, w1s, b1, w2, w2s, b2


def event_times_ms(fn, iters):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(iters):
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def host_times_us(calls, cpp_call, iters):
    """Median host time of each Python call in `calls` (name -> fn) and of cpp_call (the C++
    MoeLayer::run, timed in C++), interleaved so that a drift of the machine touches all alike.
    Each Python sample waits for the current stream (cuStreamSynchronize, as
    moejit.device.synchronize makes it), then times one call; the C++ sample makes the same
    wait in C++, then times its call, as a C++ program would."""
    stream = mt.current_stream(torch.device("cuda", torch.cuda.current_device()))
    samples = {name: [] for name in list(calls) + ["cpp"]}
    for _ in range(iters):
        for name, fn in calls.items():
            moejit.device.synchronize(stream)
            t0 = time.perf_counter_ns()
            fn()
            t1 = time.perf_counter_ns()
            samples[name].append((t1 - t0) / 1e3)
        samples["cpp"].append(cpp_call())
    torch.cuda.synchronize()
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1,8,64,512,4096")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--no-moejit-run", action="store_true", help="skip the C++ moejit-run comparison")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)

    moe = FusedMoE("gpt-oss-120b", max_num_tokens=max(tokens), device=dev)
    layer = moe.experts
    shape = layer.shape
    print(f"moejit {moejit.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(dev)}")
    print(f"gpt-oss-120b MoE layer: {shape}, quant {layer.quant}, cache {layer.runtime.cache_dir}")
    w1, w1s, b1, w2, w2s, b2 = random_weights(shape, dev)
    layer.load_weights(w1, w1s, b1, w2, w2s, b2)
    t0 = time.perf_counter()
    report = layer.prewarm()
    print(f"prewarm: {report} in {time.perf_counter() - t0:.1f} s")
    layer.runtime.seal()

    # 1. check against plain torch.
    W1 = torch.stack([dequantize_bf16(w1[e], w1s[e]) for e in range(shape.experts)])
    W2 = torch.stack([dequantize_bf16(w2[e], w2s[e]) for e in range(shape.experts)])
    g = torch.Generator(device=dev).manual_seed(42)
    inputs = {}
    ok = True
    print(f"\n{'T':>6} {'rel_err_vs_torch':>17}")
    for T in tokens:
        x = torch.randn((T, shape.hidden), generator=g, device=dev).to(torch.bfloat16)
        logits = torch.randn((T, shape.experts), generator=g, device=dev)
        inputs[T] = (x, logits)
        got = moe(x, logits)
        want = torch_reference_moe(shape, x, logits, W1, b1, W2, b2)
        err = float(torch.linalg.norm(got.float() - want.float()) / torch.linalg.norm(want.float()))
        finite = bool(torch.isfinite(got).all())
        ok &= finite and err < 1e-2
        print(f"{T:>6} {err:>17.3e}{'' if finite and err < 1e-2 else '  CHECK FAILED'}")
    del W1, W2
    torch.cuda.empty_cache()

    # 2. GPU time per T: eager (the layer op on routed inputs) and CUDA graph.
    rows = []
    for T in tokens:
        x, logits = inputs[T]
        topk_weights, topk_ids = mt.fused_topk(logits, shape.top_k)
        for _ in range(3):
            layer(x, topk_ids, topk_weights)
        eager_ms = event_times_ms(lambda: layer(x, topk_ids, topk_weights), a.iters)
        module_ms = event_times_ms(lambda: moe(x, logits), a.iters)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            layer(x, topk_ids, topk_weights)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = layer(x, topk_ids, topk_weights)
        graph.replay()
        torch.cuda.synchronize()
        same = torch.equal(static_out.view(torch.int16), layer(x, topk_ids, topk_weights).view(torch.int16))
        ok &= same
        graph_ms = event_times_ms(graph.replay, a.iters)
        # 3. host time of one call: Python op, forward, direct; C++ MoeLayer::run.
        out = torch.empty_like(x)
        cpp_args = (T, x.data_ptr(), x.stride(0), topk_ids.data_ptr(), topk_weights.data_ptr(), out.data_ptr(),
                    out.stride(0), layer.workspace.data_ptr(), layer.workspace.numel(), mt.current_stream(dev))
        h = host_times_us({
            "op": lambda: torch.ops.moejit.moe_layer(x, topk_ids, topk_weights, layer.handle),
            "forward": lambda: layer(x, topk_ids, topk_weights),
            "direct": lambda: layer.run(x, topk_ids, topk_weights, out=out),
        }, lambda: layer.core.host_time_us(*cpp_args, 1, True, 0.0, False)[0], a.iters)
        rows.append((T, eager_ms * 1e3, graph_ms * 1e3, module_ms * 1e3, same, h["op"], h["forward"], h["direct"],
                     h["cpp"]))

    print(f"\n{'T':>6} {'eager_us':>10} {'graph_us':>10} {'module_us':>10} {'graph=eager':>11}   "
          f"{'host: op_us':>11} {'forward_us':>10} {'direct_us':>10} {'cpp_us':>8} {'op-cpp':>8} {'fwd-cpp':>8} "
          f"{'direct-cpp':>10}")
    for T, e, gr, mo, same, op, fw, di, cpp in rows:
        print(f"{T:>6} {e:>10.1f} {gr:>10.1f} {mo:>10.1f} {str(same):>11}   {op:>11.1f} {fw:>10.1f} {di:>10.1f} "
              f"{cpp:>8.1f} {op - cpp:>8.1f} {fw - cpp:>8.1f} {di - cpp:>10.1f}")
    print("eager_us: the op between CUDA events on an idle GPU (as moejit-run's time_us); graph_us: one replay of a "
          "captured call;\nmodule_us: FusedMoE (routing + layer); host: median host time of one call on an idle GPU: op_us through\n"
          "torch.ops.moejit.moe_layer (allocates out), forward_us MoeLayer.__call__ (eager: run(), allocates out),\n"
          "direct_us MoeLayer.run(out=...) into a preallocated out, cpp_us MoeLayer::run from C++ (its wait made in C++);\n"
          "the four interleaved, each after a stream synchronize.")
    st = layer.runtime.stats()
    print(f"\nruntime: {st['compiles']} compiled, {st['disk_hits']} disk hits, "
          f"{st['misses_after_seal']} misses after seal")
    ok &= st["misses_after_seal"] == 0

    # 4. the C++ tool on the same shape.
    if not a.no_moejit_run:
        from moejit._cli import tool_path

        cmd = [str(tool_path("moejit-run")), "--model", "gpt-oss-120b", "--tokens", a.tokens,
               "--iters", str(a.iters), "--cache-dir", str(layer.runtime.cache_dir)]
        print("\n$ moejit-run " + " ".join(cmd[1:]), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        table = r.stdout.split("kernels (ptxas report):")[0]
        print(table.rstrip())
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            ok = False
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
