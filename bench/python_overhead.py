#!/usr/bin/env python3
"""Host cost of one MoE layer call from Python (moejit.torch.MoeLayer.run), piece by piece.

  python3 bench/python_overhead.py [--iters N] [--json FILE]          any machine with torch
  python3 bench/python_overhead.py --gpu [--tokens 1,8,64,512] [...]   with a CUDA GPU: the whole call

Without --gpu (CPU tensors; where the layer compares CUDA device indices the CPU's -1 stands in):
  - each tensor read the check makes (x.shape, x.stride(), x.get_device(), ...) and the
    per-element forms (x.shape[0], x.stride(1), x.dim()), as Python reads them,
  - the check on MoeLayer.run's fast path (moejit.torch._fast_args: the same reads made in C++,
    through torch's DLPack exchange API where torch has one, else through the CPython API; the
    four addresses included) against the same checks made in Python
    with one call per element (per_element_check below) plus the four address reads,
  - one nanobind call (moejit.round_up_tokens).
With --gpu: the gpt-oss-120b layer with random MXFP4 weights, prewarmed, for each T, the median
host time of MoeLayer.run(out=...) (Python) and of C++ MoeLayer::run (MoeLayer.core.host_time_us,
the same call made from C++), each measured in the conditions below:
  - idle: every sample starts from an idle GPU, launches one untimed layer call, waits for it
    with WAIT (below), busy-waits SETTLE_US (or not: "immediate"), then times one call, then
    waits for it untimed. WAIT is either the stream synchronize of the moejit driver wrapper
    (moejit.device.synchronize(stream): cuStreamSynchronize) or torch.cuda.synchronize()
    (cudaDeviceSynchronize); both paths are timed after each, since the way a wait was made
    changes the host time of the next launch for any caller. The C++ call is timed twice: after
    the same wait made from Python (cpp_*), and as a C++ program makes it, the wait made in C++
    too (cppown_*: cuStreamSynchronize, or cuCtxSynchronize where Python waits with torch's);
  - back to back: calls 2..8 of a burst of 8 made without synchronizing, as a serving loop
    enqueues layer after layer while the GPU runs the earlier ones: run, forward() and C++;
  - after the stream synchronize, immediate: forward() (it allocates out), torch.ops.moejit.moe_layer
    (the dispatcher) and MoeLayer.core.run_ptr (addresses as integers).
The Python cost is measured two ways:
  - in the same call (paired_*, the target's measure): each timed MoeLayer.run also records the
    host time of the C++ MoeLayer::run inside it (moejit._moejit._stamp_layer_calls: steady_clock,
    the clock of time.perf_counter_ns on Linux), and the sample is the Python call's time minus
    that C++ call's time. The C++ call's own time varies from call to call by more than the Python
    cost (the driver's launches), so differences of separate calls' medians mix that in; the paired
    sample does not. The paired sample leaves out a slowdown of the C++ call itself when Python
    makes it: inner_* are those C++ calls' times, and inner_minus_cppown_* compares them with the
    C++ program's calls. The pieces of each paired sample (enter_*, release_*, reacquire_*,
    return_*) come from the binding's four stamps. Stamps stay on for the whole GPU part, so every
    Python-side figure includes four clock reads (clock_read_ns in the summary: their cost);
  - as separate calls: run - C++, the medians of the Python calls and of the C++ program's calls
    (cppown_* when idle, cpp_b2b back to back).
Target: paired <= 5 us at every T, back to back and idle after either wait, settled and
immediate. args_us is
the check alone in a loop (moejit.torch._fast_args, which also builds its result tuple: an upper
bound of what TorchLayerCall's check costs) and the stream query.
One JSON object per measurement on stdout (and in --json FILE).
"""
from __future__ import annotations

import argparse
import importlib.util
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
    assert mt._fast_args(x, ids, w, out, D, k, 8192, -1)[:3] == (T, D, D)
    assert per_element_check(x, ids, w, out, D, k, 8192, -1) == (T, D, D)
    fast = ns_per_call(lambda: mt._fast_args(x, ids, w, out, D, k, 8192, -1), iters)
    per_elem = ns_per_call(lambda: per_element_check(x, ids, w, out, D, k, 8192, -1), iters)
    ptrs = ns_per_call(lambda: (x.data_ptr(), ids.data_ptr(), w.data_ptr(), out.data_ptr()), iters)
    nb = ns_per_call(lambda: moejit.round_up_tokens(T), iters)
    emit({"what": "check", "name": "fast path with the four addresses (moejit.torch._fast_args, in C++)",
          "ns": round(fast, 1)})
    emit({"what": "check", "name": "the same checks, one call per element", "ns": round(per_elem, 1)})
    emit({"what": "check", "name": "four data_ptr() reads", "ns": round(ptrs, 1)})
    emit({"what": "check", "name": "one nanobind call (moejit.round_up_tokens)", "ns": round(nb, 1)})
    emit({"what": "summary", "name": "checks and addresses of one MoeLayer.run call (no launch, no stream)",
          "fast_path_ns": round(fast, 1), "per_element_ns": round(per_elem + ptrs, 1),
          "dlpack_exchange": mt.dlpack_exchange, "torch": torch.__version__})


# Microseconds of busy waiting between a synchronize and an idle-GPU call, in both
# paths (Python before the Python call, C++ before the C++ call). Why: a serving
# loop runs its own host work (sampling, scheduling) between a synchronize and
# the next layer, so a call made the instant a synchronize returns is the rarer
# case; both figures are reported.
SETTLE_US = 50.0


def settle(us: float) -> None:
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


BURST = 8  # calls per back-to-back burst
CPP_WAIT = {"stream": "stream", "torch": "context"}  # the C++ program's wait for each Python wait


def burst_us(fn, sync, n: int):
    """Host time of each of n calls made back to back (no synchronization between them:
    as a serving loop enqueues layer after layer), the GPU idle before the first."""
    sync()
    t = [time.perf_counter_ns()]
    for _ in range(n):
        fn()
        t.append(time.perf_counter_ns())
    return [(b - a) / 1e3 for a, b in zip(t, t[1:])]


def stamped(t0: int, t1: int, last_call_ns):
    """The binding's stamps of the call timed from t0 to t1, checked to lie inside it."""
    entry, c0, c1, exit_ = last_call_ns()
    if not t0 <= entry <= c0 <= c1 <= exit_ <= t1:
        raise SystemExit(f"python_overhead: the call stamps {(entry, c0, c1, exit_)} do not lie inside the "
                         f"timed call [{t0}, {t1}] ns")
    return entry, c0, c1, exit_


def paired_burst_us(fn, sync, n: int, last_call_ns):
    """n calls made back to back, the GPU idle before the first, each timed alone with its C++
    MoeLayer::run time beside it: (outer us, inner us) per call. Unlike burst_us, the stamps are
    read between calls, outside the timed spans."""
    sync()
    r = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        _, c0, c1, _ = stamped(t0, t1, last_call_ns)
        r.append(((t1 - t0) / 1e3, (c1 - c0) / 1e3))
    return r


def check_clocks(steady_ns) -> float:
    """The call stamps (C++ steady_clock) and time.perf_counter_ns must read one clock: the paired
    samples subtract across them. Returns the ns of one steady_clock read from Python (the binding
    call included: an upper bound of a stamp's cost)."""
    for _ in range(100):
        a = time.perf_counter_ns()
        b = steady_ns()
        c = time.perf_counter_ns()
        if not a <= b <= c:
            raise SystemExit(f"python_overhead: steady_clock ({b} ns) is not the clock of time.perf_counter_ns "
                             f"({a}..{c} ns); the paired samples need one clock")
    return ns_per_call(steady_ns, 20000)


def gpu_part(tokens, iters: int, emit) -> bool:
    import torch

    import moejit
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
    core_mod = moejit._moejit
    clock_read_ns = check_clocks(core_mod._steady_clock_ns)
    core_mod._stamp_layer_calls(True)
    try:
        return gpu_rows(tokens, iters, emit, layer, g, core_mod._last_layer_call_ns, clock_read_ns)
    finally:
        core_mod._stamp_layer_calls(False)


def gpu_rows(tokens, iters: int, emit, layer, g, last_call_ns, clock_read_ns: float) -> bool:
    """gpu_part's measurements (g: the inputs' generator), the call stamps on."""
    import torch

    import moejit
    import moejit.torch as mt
    dev = layer.device
    s = layer.shape
    E, D = s.experts, s.hidden
    waits = {"stream": None, "torch": torch.cuda.synchronize}
    ok = True
    misses = []
    for T in tokens:
        x = torch.randn((T, D), generator=g, device=dev).to(torch.bfloat16)
        tw, ti = mt.fused_topk(torch.randn((T, E), generator=g, device=dev), s.top_k)
        out = torch.empty((T, D), dtype=torch.bfloat16, device=dev)
        for _ in range(3):
            layer.run(x, ti, tw, out=out)
        stream = mt.current_stream(dev)
        waits["stream"] = lambda: moejit.device.synchronize(stream)
        sync = waits["stream"]
        args = (T, x.data_ptr(), x.stride(0), ti.data_ptr(), tw.data_ptr(), out.data_ptr(), out.stride(0),
                layer.workspace.data_ptr(), layer.workspace.numel(), stream)
        run = lambda: layer.run(x, ti, tw, out=out)
        samples = {}

        def add(key, v):
            samples.setdefault(key, []).append(v)

        def python_us(fn, wait, settle_us, paired_key=None):
            """One untimed layer call, wait, settle, then the timed call (then waited for, untimed).
            paired_key: also record the C++ call inside it (inner_KEY) and the difference (paired_KEY)."""
            run()
            wait()
            if settle_us:
                settle(settle_us)
            t0 = time.perf_counter_ns()
            fn()
            t1 = time.perf_counter_ns()
            if paired_key:
                entry, c0, c1, exit_ = stamped(t0, t1, last_call_ns)
                add(f"inner_{paired_key}", (c1 - c0) / 1e3)
                add(f"paired_{paired_key}", ((t1 - t0) - (c1 - c0)) / 1e3)
                # The pieces: Python -> the binding's C++ (call, argument conversion), the checks and
                # the GIL release, the GIL taken back, the return to Python.
                add(f"enter_{paired_key}", (entry - t0) / 1e3)
                add(f"release_{paired_key}", (c0 - entry) / 1e3)
                add(f"reacquire_{paired_key}", (exit_ - c1) / 1e3)
                add(f"return_{paired_key}", (t1 - exit_) / 1e3)
            sync()
            return (t1 - t0) / 1e3

        def cpp_us(wait, settle_us):
            """The same conditions, the timed call made from C++ (it settles, times, then synchronizes)."""
            run()
            wait()
            return layer.core.host_time_us(*args, 1, False, settle_us, False)[0]

        def cpp_own_us(wname, settle_us):
            """As a C++ program: the wait made in C++ too (cuStreamSynchronize, or cuCtxSynchronize for
            torch's wait), then settle, time one call, synchronize."""
            run()
            return layer.core.host_time_us(*args, 1, False, settle_us, True, CPP_WAIT[wname])[0]
        for i in range(iters):  # interleaved, so that a drift of the machine touches all alike
            for wname, wait in waits.items():
                for cond, settle_us in (("settled", SETTLE_US), ("immediate", 0.0)):
                    add(f"run_{wname}_{cond}", python_us(run, wait, settle_us, f"{wname}_{cond}"))
                    add(f"cpp_{wname}_{cond}", cpp_us(wait, settle_us))
                    add(f"cppown_{wname}_{cond}", cpp_own_us(wname, settle_us))
            add("ptr", python_us(lambda: layer.core.run_ptr(*args), sync, 0.0))
            add("forward", python_us(lambda: layer(x, ti, tw), sync, 0.0))
            add("op", python_us(lambda: torch.ops.moejit.moe_layer(x, ti, tw, layer.handle), sync, 0.0))
            if i % 8 == 0:  # back to back: calls 2..B of a burst, the GPU busy with the earlier ones
                add_all = lambda key, vs: [add(key, v) for v in vs]
                add_all("run_b2b", burst_us(run, sync, BURST)[1:])
                pairs = paired_burst_us(run, sync, BURST, last_call_ns)[1:]
                add_all("inner_b2b", [inner for _, inner in pairs])
                add_all("paired_b2b", [outer - inner for outer, inner in pairs])
                add_all("cpp_b2b", layer.core.host_time_us(*args, BURST, False)[1:])
                add_all("forward_b2b", burst_us(lambda: layer(x, ti, tw), sync, BURST)[1:])
                sync()
        sync()
        med = {k: statistics.median(v) for k, v in samples.items()}
        args_ns = ns_per_call(lambda: (mt._fast_args(x, ti, tw, out, D, s.top_k, layer.max_num_tokens, 0),
                                       mt._stream_of(0)), 20000)
        row = {"what": "gpu", "T": T, "settle_us": SETTLE_US, "args_us": round(args_ns / 1e3, 2)}
        for k, v in med.items():
            row[f"{k}_us"] = round(v, 2)
        for cond in ["b2b"] + [f"{w}_{c}" for w in waits for c in ("settled", "immediate")]:
            row[f"run_minus_cpp_{cond}_us"] = round(med[f"run_{cond}"] - med[f"cpp_{cond}"], 2)
            # Separate calls: against the C++ call as a C++ program makes it (its own wait when idle).
            if cond != "b2b":
                row[f"run_minus_cppown_{cond}_us"] = round(med[f"run_{cond}"] - med[f"cppown_{cond}"], 2)
                row[f"inner_minus_cppown_{cond}_us"] = round(med[f"inner_{cond}"] - med[f"cppown_{cond}"], 2)
            # The target: what the Python path adds inside one call.
            d = med[f"paired_{cond}"]
            if d > 5.0:
                ok = False
                misses.append(f"T={T} {cond}: {d:.2f} us")
        row["ptr_minus_cpp_us"] = round(med["ptr"] - med["cpp_stream_immediate"], 2)
        emit(row)
    emit({"what": "gpu_summary",
          "target": "paired (the Python call's host time minus the C++ MoeLayer::run's inside it) <= 5 us at "
                    "every T: back to back, and idle after either wait, settled and immediate",
          "ok": ok, "misses": misses, "misses_after_seal": layer.runtime.stats()["misses_after_seal"],
          "dlpack_exchange": mt.dlpack_exchange, "torch": torch.__version__,
          "clock_read_ns": round(clock_read_ns, 1)})
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="also time the whole call on CUDA device 0")
    ap.add_argument("--tokens", default="1,8,64,512")
    ap.add_argument("--iters", type=int, default=0, help="calls per measurement (default 200000 CPU, 200 GPU)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if importlib.util.find_spec("torch") is None:
        print("python_overhead: needs torch (a CPU build is enough without --gpu); moejit itself does not",
              file=sys.stderr)
        return 2
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
