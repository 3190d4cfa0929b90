"""Statistics of one replay (one system on one cell's trace) from its per-step
records, and the Markdown tables of a set of replays. No torch, no GPU.

A step record (dict):
  T          tokens of the step (the trace's count)
  padded_T   rows the system computed (T, or the bucket it padded T to)
  wall_s     wall time of the step: L layers launched and the GPU synchronized
  compiles   kernels compiled during the step (Triton: new cache entries; moejit: Runtime compiles)
  loads      kernels read from disk or an AOT pack and loaded during the step (moejit; 0 for Triton)
  first_call optional: True when the step met a new specialization on any rank of a
             tensor-parallel group (a rank that compiled nothing waits for the one that did);
             default: compiles > 0 or loads > 0
  steady_s   for a first-call step: wall time of the same step run again at once, every
             kernel then resident (its steady-state time); None otherwise

Stall of a step = wall_s - steady_s (>= 0) for a step that compiled or loaded, else 0:
the time inside the first call of each new specialization beyond its steady-state time.
"""
from __future__ import annotations

import math
from typing import Iterable, List, Mapping, Optional, Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    if not 0 <= q <= 100:
        raise ValueError(f"q: must be in [0, 100], got {q}")
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def first_call(rec: Mapping) -> bool:
    f = rec.get("first_call")
    return bool(f) if f is not None else rec.get("compiles", 0) > 0 or rec.get("loads", 0) > 0


def step_stall(rec: Mapping) -> float:
    if not first_call(rec):
        return 0.0
    steady = rec.get("steady_s")
    if steady is None:
        raise ValueError(f"first-call step (compiles={rec.get('compiles')} loads={rec.get('loads')}) has no steady_s")
    return max(0.0, rec["wall_s"] - steady)


STEP_FIELDS = ("T", "padded_T", "wall_s", "compiles", "loads", "steady_s", "first_call")


def to_columns(steps: Sequence[Mapping]) -> dict:
    """Step records as one list per field (STEP_FIELDS; times rounded to 0.1 us): a third of the JSON."""
    cols = {}
    for f in STEP_FIELDS:
        v = [r.get(f) for r in steps]
        if f.endswith("_s"):
            v = [None if x is None else round(x, 7) for x in v]
        cols[f] = v
    extra = [i for i, r in enumerate(steps) if "group_max" in r]
    if extra:
        cols["group_max"] = {str(i): steps[i]["group_max"] for i in extra}
    return cols


def from_columns(cols: Mapping) -> List[dict]:
    """The inverse of to_columns."""
    n = len(cols["T"])
    if any(len(cols[f]) != n for f in STEP_FIELDS if f in cols):
        raise ValueError("steps: columns of different lengths")
    out = [{f: cols[f][i] for f in STEP_FIELDS if f in cols} for i in range(n)]
    for i, g in cols.get("group_max", {}).items():
        out[int(i)]["group_max"] = g
    return out


def summarize(steps: Sequence[Mapping]) -> dict:
    """Totals, stall, rates and percentiles of one replay. Times in seconds."""
    if not steps:
        raise ValueError("steps: empty")
    for i, r in enumerate(steps):
        if r["wall_s"] < 0 or r["T"] < 1 or r.get("padded_T", r["T"]) < r["T"]:
            raise ValueError(f"step {i}: T={r['T']} padded_T={r.get('padded_T')} wall_s={r['wall_s']}")
    walls = [r["wall_s"] for r in steps]
    stalls = [step_stall(r) for r in steps]
    steady = [w - s for w, s in zip(walls, stalls)]
    tokens = sum(r["T"] for r in steps)
    padded = sum(r.get("padded_T", r["T"]) for r in steps)
    total = sum(walls)
    stall = sum(stalls)
    compiles = [r.get("compiles", 0) for r in steps]
    loads = [r.get("loads", 0) for r in steps]
    return {
        "steps": len(steps),
        "tokens": tokens,
        "padded_tokens": padded,
        "distinct_T": len({r["T"] for r in steps}),
        "distinct_padded_T": len({r.get("padded_T", r["T"]) for r in steps}),
        "total_wall_s": total,
        "stall_s": stall,
        "stall_share": stall / total if total > 0 else 0.0,
        "stall_steps": sum(1 for r in steps if first_call(r)),
        "steady_wall_s": total - stall,
        "tokens_per_s": tokens / total if total > 0 else 0.0,
        "steady_tokens_per_s": tokens / (total - stall) if total - stall > 0 else 0.0,
        "step_p50_s": percentile(walls, 50),
        "step_p99_s": percentile(walls, 99),
        "step_max_s": max(walls),
        "steady_step_p50_s": percentile(steady, 50),
        "steady_step_p99_s": percentile(steady, 99),
        "compiles": sum(compiles),
        "compiles_after_first_step": sum(compiles[1:]),
        "loads": sum(loads),
        "padding_share": (padded - tokens) / padded if padded > 0 else 0.0,
    }


def stall_share_at_layers(summary: Mapping, layers: int, target_layers: int) -> float:
    """The stall share a replay with `layers` layers per step would have with `target_layers`:
    a compile stalls once per step whatever the layer count, the steady time scales with it."""
    if layers < 1 or target_layers < 1:
        raise ValueError(f"layers: must be >= 1, got {layers}, {target_layers}")
    stall = summary["stall_s"]
    steady = summary["steady_wall_s"] * target_layers / layers
    return stall / (stall + steady) if stall + steady > 0 else 0.0


SYSTEM_TITLES = {
    "triton_exact": "(a) Triton matmul_ogs, exact T, empty cache",
    "triton_bucketed": "(b) Triton matmul_ogs, padded to buckets + warmup",
    "moejit_cold": "(c) moejit, cold cache",
    "moejit_sealed": "(d) moejit, prewarm + seal",
    "moejit_pack": "(d') moejit, AOT pack + seal",
}


def _f(v: Optional[float], fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def markdown(results: Iterable[Mapping], title: str = "", target_layers: int = 36) -> str:
    """Tables of replay results: one row per (cell, system[, rank]) plus the setup costs.
    A result: {"system", "cell", "layers", "tp", "rank", "summary": summarize(...), "setup": {...}, "error"}."""
    results = list(results)
    out: List[str] = []
    if title:
        out += [f"### {title}", ""]
    out += ["| cell | system | TP | L | steps | tokens | wall s | stalled s | stall share | "
            f"stall share at L={target_layers} | tokens/s | steady tokens/s | p50 step ms | p99 step ms | "
            "steady p50 ms | compiles | after step 1 | padding |",
            "|" + "---|" * 18]
    for r in results:
        name = SYSTEM_TITLES.get(r["system"], r["system"])
        rank = f" r{r['rank']}" if r.get("tp", 1) > 1 and r.get("rank") is not None else ""
        if r.get("error"):
            out.append(f"| {r['cell']} | {name} | {r.get('tp', 1)}{rank} | {r.get('layers', '-')} | "
                       f"failed: {str(r['error'])[:160]} |" + " |" * 13)
            continue
        s = r["summary"]
        out.append(
            f"| {r['cell']} | {name} | {r.get('tp', 1)}{rank} | {r['layers']} | {s['steps']} | {s['tokens']} | "
            f"{s['total_wall_s']:.2f} | {s['stall_s']:.2f} | {100 * s['stall_share']:.1f} % | "
            f"{100 * stall_share_at_layers(s, r['layers'], target_layers):.1f} % | "
            f"{s['tokens_per_s']:.0f} | {s['steady_tokens_per_s']:.0f} | {1e3 * s['step_p50_s']:.2f} | "
            f"{1e3 * s['step_p99_s']:.2f} | {1e3 * s['steady_step_p50_s']:.2f} | {s['compiles']} | "
            f"{s['compiles_after_first_step']} | {100 * s['padding_share']:.1f} % |")
    setups = [r for r in results if r.get("setup")]
    if setups:
        out += ["", "| system | TP | cells | warmup / prewarm s | what | compiled | from disk or pack |", "|---|---|---|---|---|---|---|"]
        seen = set()
        for r in setups:
            su = r["setup"]
            k = (r["system"], r.get("tp", 1), r.get("rank"), su.get("process"))
            if k in seen:
                continue
            seen.add(k)
            rank = f" r{r['rank']}" if r.get("tp", 1) > 1 and r.get("rank") is not None else ""
            out.append(f"| {SYSTEM_TITLES.get(r['system'], r['system'])} | {r.get('tp', 1)}{rank} | "
                       f"{su.get('cells', r['cell'])} | {_f(su.get('seconds'), '.2f')} | {su.get('what', '')} | "
                       f"{su.get('compiled', '-')} | {su.get('loaded', '-')} |")
    return "\n".join(out) + "\n"
