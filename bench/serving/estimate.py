"""How long a serving replay takes on one H200, before running it: per process a low and a
high estimate in seconds, from the trace's steps and the layer times measured on an H200
(docs/results-data/mxfp4-vs-triton: triton_kernels matmul_ogs eager and graph, moejit-run).
No torch, no GPU.

Per process: start (interpreter, torch, CUDA context, weights), setup (Triton's warmup over the
buckets, moejit's prewarm), and per cell: the steps (L layers each, a layer taking the larger of
its GPU time and its host launch time), the compile stalls and the re-run of each stalled step.
A new specialization stalls 0.2-2 s on Triton (COMPILE_S: the published range for a Triton MoE
specialization; triton_exact meets one per distinct T, triton_bucketed's warmup one per bucket)
and 0.05-0.5 s per kernel on moejit's NVRTC (moejit_cold: KERNELS_PER_BUCKET per distinct bucket).
"""
from __future__ import annotations

import bisect
import math
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

from . import trace

# Microseconds per gpt-oss-120b layer call on an H200 (uniform routing), by T.
TRITON_EAGER_US = {1: 1909.6, 8: 1616.5, 64: 2089.4, 128: 1443.6, 256: 1517.6, 512: 1762.8, 1024: 2001.6,
                   2048: 2843.8, 4096: 3404.8, 16384: 7681.2}
TRITON_GRAPH_US = {1: 67.4, 8: 198.6, 64: 614.1, 128: 668.2, 256: 683.0, 512: 954.8, 1024: 1214.4,
                   2048: 1571.8, 4096: 2356.6, 16384: 7018.2}
MOEJIT_US = {1: 36.1, 8: 184.9, 64: 671.8, 128: 775.0, 256: 1129.2, 512: 1324.3, 1024: 1445.2, 2048: 1686.1,
             4096: 2667.7, 16384: 8489.3}
TRITON_HOST_US = 1400.0  # Python launch time of routing + 2 matmul_ogs (eager - graph at T = 128)
MOEJIT_HOST_US = 60.0  # fused_topk (torch ops) + MoeLayer.run
COMPILE_S = (0.2, 2.0)  # one new Triton specialization
NVRTC_S = (0.05, 0.5)  # one moejit kernel
KERNELS_PER_BUCKET = 4  # distinct moejit kernels a new bucket can need (route, gate_up, down, combine)
START_S = {"triton": (12.0, 30.0), "moejit": (8.0, 20.0), "mock": (0.2, 2.0)}
PREWARM_S = {"moejit_sealed": (2.0, 15.0), "moejit_pack": (1.0, 5.0)}
REPORT_RESERVE_S = 15.0  # the orchestrator's own work around the processes


def interp_us(table: Mapping[int, float], T: int) -> float:
    """log-log interpolation (clamped to the table's ends)."""
    xs = sorted(table)
    if T <= xs[0]:
        return table[xs[0]]
    if T >= xs[-1]:
        return table[xs[-1]] * T / xs[-1]
    i = bisect.bisect_left(xs, T)
    if xs[i] == T:
        return table[T]
    x0, x1 = xs[i - 1], xs[i]
    f = (math.log(T) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(table[x0]) + f * (math.log(table[x1]) - math.log(table[x0])))


def layer_s(system: str, T: int) -> Tuple[float, float]:
    """(low, high) seconds of one layer call at T rows, launched back to back."""
    if system.startswith("triton"):
        lo = max(interp_us(TRITON_GRAPH_US, T), TRITON_HOST_US)
        hi = max(interp_us(TRITON_EAGER_US, T), lo) * 1.2
    else:
        lo = max(interp_us(MOEJIT_US, T), MOEJIT_HOST_US)
        hi = (interp_us(MOEJIT_US, T) + MOEJIT_HOST_US) * 1.3
    return lo * 1e-6, hi * 1e-6


def _round_up(T: int) -> int:
    # bucketing.hpp's round_up (8 buckets per octave), without importing moejit here.
    if T <= 8:
        return T
    g = 1 << (T.bit_length() - 1 - 3)
    return -(-T // g) * g


def bucket_set(max_num_tokens: int) -> List[int]:
    out, b = [], 1
    while b <= max_num_tokens:
        out.append(b)
        b = _round_up(b + 1)
    if out[-1] != _round_up(max_num_tokens):
        out.append(_round_up(max_num_tokens))
    return out


def process_s(system: str, cells: Sequence[Sequence[int]], layers: int, max_num_tokens: int,
              warmup: str = "all", mock: bool = False) -> Dict[str, Tuple[float, float]]:
    """{'start', 'setup', 'steps', 'stalls', 'total'}: (low, high) seconds of one process replaying
    `cells` (each a list of step token counts)."""
    kind = "mock" if mock else ("triton" if system.startswith("triton") else "moejit")
    pads = system == "triton_bucketed"
    start = START_S[kind]
    setup = (0.0, 0.0)
    if system == "triton_bucketed":
        bs = bucket_set(max_num_tokens) if warmup == "all" else sorted({_round_up(T) for c in cells for T in c})
        w = [layer_s(system, b) for b in bs]
        setup = (len(bs) * COMPILE_S[0] + sum(x[0] for x in w), len(bs) * COMPILE_S[1] + sum(x[1] for x in w))
    elif system in PREWARM_S:
        setup = PREWARM_S[system]
    steps_lo = steps_hi = stall_lo = stall_hi = 0.0
    for steps in cells:
        seen = set()
        for T in steps:
            rows = _round_up(T) if pads else T
            lo, hi = layer_s(system, rows)
            steps_lo += layers * lo
            steps_hi += layers * hi
            key = T if system == "triton_exact" else _round_up(T)
            if key in seen or system in ("triton_bucketed", "moejit_sealed", "moejit_pack"):
                continue
            seen.add(key)
            n, each = (1, COMPILE_S) if system == "triton_exact" else (KERNELS_PER_BUCKET, NVRTC_S)
            stall_lo += n * each[0] + layers * lo  # the compile, and the step run again
            stall_hi += n * each[1] + layers * hi
    if mock:  # the mock systems sleep a thousandth of the modelled time
        steps_lo, steps_hi, stall_lo, stall_hi = (v / 1000 for v in (steps_lo, steps_hi, stall_lo, stall_hi))
        setup = (setup[0] / 1000, setup[1] / 1000)
    out = {"start": start, "setup": setup, "steps": (steps_lo, steps_hi), "stalls": (stall_lo, stall_hi)}
    out["total"] = (sum(v[0] for v in out.values()), sum(v[1] for v in out.values()))
    return out


def plan_processes(part_systems: Iterable[str], cells: Sequence[trace.Cell]) -> List[Tuple[str, str, List[str]]]:
    """(process name, system, cell names) in launch order: triton_exact gets one process per cell
    (a clean Triton cache per cell), every other system one process for all cells."""
    procs = []
    for s in part_systems:
        if s == "triton_exact":
            procs += [(f"{s}-{c.slug}", s, [c.name]) for c in cells]
        else:
            procs.append((s, s, [c.name for c in cells]))
    return procs


def estimate(procs: Sequence[Tuple[str, str, List[str]]], steps_of: Mapping[str, Sequence[int]], layers: int,
             max_num_tokens: int, warmup: str = "all", parallel: bool = False, mock: bool = False) -> dict:
    """Estimate of a run of `procs` (plan_processes); steps_of[cell name] = the step token counts replayed."""
    rows = []
    for name, system, cells in procs:
        e = process_s(system, [steps_of[c] for c in cells], layers, max_num_tokens, warmup, mock)
        rows.append({"process": name, "system": system, "cells": cells, **{k: list(v) for k, v in e.items()}})
    def agg(v: List[float]) -> float:
        return (max(v) if v else 0.0) if parallel else sum(v)
    reserve = REPORT_RESERVE_S * (0.2 if mock else 1)
    lo = agg([r["total"][0] for r in rows]) + reserve
    hi = agg([r["total"][1] for r in rows]) + reserve
    return {"processes": rows, "low_s": lo, "high_s": hi, "parallel": parallel, "layers": layers,
            "assumptions": {"triton_compile_s": list(COMPILE_S), "nvrtc_kernel_s": list(NVRTC_S),
                            "start_s": {k: list(v) for k, v in START_S.items()}}}


def text(est: dict, title: str) -> str:
    lines = [f"{title}: {est['low_s']:.0f}-{est['high_s']:.0f} s expected"
             f"{' (processes in parallel)' if est['parallel'] else ''}; per process (low-high s):"]
    for r in est["processes"]:
        lines.append(f"  {r['process']:<28} {r['total'][0]:6.0f} - {r['total'][1]:5.0f}   start {r['start'][0]:.0f}-"
                     f"{r['start'][1]:.0f}, setup {r['setup'][0]:.0f}-{r['setup'][1]:.0f}, steps "
                     f"{r['steps'][0]:.0f}-{r['steps'][1]:.0f}, stalls {r['stalls'][0]:.0f}-{r['stalls'][1]:.0f}")
    a = est["assumptions"]
    lines.append(f"  (a new Triton specialization {a['triton_compile_s'][0]}-{a['triton_compile_s'][1]} s, "
                 f"a moejit kernel {a['nvrtc_kernel_s'][0]}-{a['nvrtc_kernel_s'][1]} s; layer times of the H200 "
                 "measurements in docs/results-data/mxfp4-vs-triton)")
    return "\n".join(lines)
