"""The CPU parts of the serving-trace replay (bench/serving): the trace generator, the
stall statistics, the tensor-parallel sharding of the expert weights, the concurrent
prewarm of one cache by two processes, and the replay tool's trace and report commands."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import moejit
from conftest import needs_nvrtc

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from serving import prewarm_ranks, shard, stats, trace  # noqa: E402

# ---------------------------------------------------------------- traces ---


def test_trace_is_deterministic_with_a_seed():
    cell = trace.Cell(1024, 1024, 64)
    a = trace.make_trace(cell, trace.TraceOptions(seed=3))
    b = trace.make_trace(cell, trace.TraceOptions(seed=3))
    c = trace.make_trace(cell, trace.TraceOptions(seed=4))
    assert a.tokens == b.tokens and a.prompts == b.prompts
    assert a.tokens != c.tokens


@pytest.mark.parametrize("cell", trace.DEFAULT_CELLS + (trace.Cell(8192, 1024, 16),), ids=lambda c: c.slug)
def test_trace_cells_are_sane(cell):
    opts = trace.TraceOptions(max_num_tokens=8192, max_steps=300, seed=1)
    t = trace.make_trace(cell, opts)
    assert len(t.tokens) == 300
    assert all(T == d + p for T, d, p in zip(t.tokens, t.decode, t.prefill))
    assert all(1 <= T <= 8192 for T in t.tokens)
    assert all(0 <= d <= cell.concurrency for d in t.decode)
    lo = math.ceil(0.8 * cell.isl)
    assert t.prompts and all(lo <= p <= cell.isl for p in t.prompts)
    # Every prefilled token belongs to a completed prompt or to one still in flight (at most C of them).
    assert sum(t.prompts) <= sum(t.prefill) <= sum(t.prompts) + cell.concurrency * cell.isl
    # Steady state: nearly all requests decode in nearly every step.
    assert np.mean(t.decode) > 0.9 * cell.concurrency
    # New arrivals: one per completed request (closed loop), at most C at once.
    assert sum(t.arrivals) >= len(t.prompts) - cell.concurrency and max(t.arrivals) <= cell.concurrency
    # Decode-only steps have exactly the decode tokens; prefill steps more.
    assert min(t.tokens) <= cell.concurrency < max(t.tokens)


def test_trace_chunks_prefill_to_the_token_budget():
    cell = trace.Cell(8192, 1024, 64)
    t = trace.make_trace(cell, trace.TraceOptions(max_num_tokens=4096, max_steps=200, cold_start=True))
    assert t.decode[0] == 0 and t.tokens[0] == 4096  # everyone arrives at step 0 with a whole prompt
    assert all(T <= 4096 for T in t.tokens)
    # While prompts wait, the budget is full.
    assert t.tokens[:cell.concurrency] == [4096] * cell.concurrency
    assert sum(t.arrivals) >= cell.concurrency


def test_trace_json_round_trip(tmp_path):
    traces = [trace.make_trace(c, trace.TraceOptions(max_steps=50)) for c in trace.DEFAULT_CELLS]
    path = tmp_path / "traces.json"
    trace.save(traces, path)
    back = trace.load(path)
    assert [b.to_json() for b in back] == [t.to_json() for t in traces]
    assert trace.select(back, ["8192/1024/64"])[0].cell == trace.Cell(8192, 1024, 64)
    assert trace.select(back, ["1k/1k C=4"])[0].cell == trace.Cell(1024, 1024, 4)
    with pytest.raises(ValueError, match="not in the trace file"):
        trace.select(back, ["2048/1024/64"])

    d = json.loads(path.read_text())
    d["traces"][0]["tokens"][5] += 1  # no longer decode + prefill
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="step 5"):
        trace.load(path)
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a"):
        trace.load(path)


def test_cell_parse_and_errors():
    assert trace.Cell.parse("8k/1k/64") == trace.Cell(8192, 1024, 64)
    assert trace.Cell.parse("1024/1024/4").name == "1k/1k C=4"
    with pytest.raises(ValueError, match="ISL/OSL/C"):
        trace.Cell.parse("1024/64")
    with pytest.raises(ValueError, match="concurrency"):
        trace.Cell(1024, 1024, 0)
    with pytest.raises(ValueError, match="max_steps"):
        trace.TraceOptions(max_steps=0)


# ----------------------------------------------------------------- stats ---


def synthetic_steps():
    # 6 steps; steps 0 and 3 compiled (first calls), step 4 waited for a peer rank's compile.
    return [
        {"T": 64, "padded_T": 64, "wall_s": 2.010, "compiles": 3, "loads": 3, "steady_s": 0.010},
        {"T": 64, "padded_T": 64, "wall_s": 0.011, "compiles": 0, "loads": 0, "steady_s": None},
        {"T": 1000, "padded_T": 1024, "wall_s": 0.020, "compiles": 0, "loads": 0, "steady_s": None},
        {"T": 900, "padded_T": 912, "wall_s": 1.520, "compiles": 2, "loads": 2, "steady_s": 0.019},
        {"T": 64, "padded_T": 64, "wall_s": 0.510, "compiles": 0, "loads": 0, "steady_s": 0.012,
         "first_call": True},
        {"T": 64, "padded_T": 64, "wall_s": 0.009, "compiles": 0, "loads": 0, "steady_s": None},
    ]


def test_stats_stall_and_rates_on_synthetic_timings():
    steps = synthetic_steps()
    s = stats.summarize(steps)
    walls = [r["wall_s"] for r in steps]
    stall = (2.010 - 0.010) + (1.520 - 0.019) + (0.510 - 0.012)
    assert s["total_wall_s"] == pytest.approx(sum(walls))
    assert s["stall_s"] == pytest.approx(stall)
    assert s["stall_share"] == pytest.approx(stall / sum(walls))
    assert s["steady_wall_s"] == pytest.approx(sum(walls) - stall)
    assert s["stall_steps"] == 3
    assert s["tokens"] == 64 * 4 + 1000 + 900
    assert s["tokens_per_s"] == pytest.approx(s["tokens"] / sum(walls))
    assert s["steady_tokens_per_s"] == pytest.approx(s["tokens"] / (sum(walls) - stall))
    assert s["step_p50_s"] == pytest.approx(np.percentile(walls, 50))
    assert s["step_p99_s"] == pytest.approx(np.percentile(walls, 99))
    steady = [0.010, 0.011, 0.020, 0.019, 0.012, 0.009]
    assert s["steady_step_p99_s"] == pytest.approx(np.percentile(steady, 99))
    assert (s["compiles"], s["compiles_after_first_step"]) == (5, 2)
    assert s["padding_share"] == pytest.approx((24 + 12) / (64 * 4 + 1024 + 912))
    assert s["distinct_T"] == 3 and s["distinct_padded_T"] == 3


def test_stats_without_stalls_and_bad_records():
    steps = [{"T": 8, "padded_T": 8, "wall_s": 0.004, "compiles": 0, "loads": 0, "steady_s": None}] * 10
    s = stats.summarize(steps)
    assert s["stall_s"] == 0 and s["stall_share"] == 0 and s["compiles_after_first_step"] == 0
    assert s["steady_tokens_per_s"] == pytest.approx(s["tokens_per_s"])
    # A stall never goes negative (a noisy re-run slower than the first call).
    s = stats.summarize([{"T": 8, "wall_s": 0.004, "compiles": 1, "loads": 1, "steady_s": 0.005}])
    assert s["stall_s"] == 0
    with pytest.raises(ValueError, match="no steady_s"):
        stats.summarize([{"T": 8, "wall_s": 0.1, "compiles": 1, "loads": 0, "steady_s": None}])
    with pytest.raises(ValueError, match="empty"):
        stats.summarize([])
    with pytest.raises(ValueError, match="padded_T"):
        stats.summarize([{"T": 8, "padded_T": 4, "wall_s": 0.1}])


def test_percentile_matches_numpy():
    rng = np.random.default_rng(0)
    v = list(rng.exponential(size=37))
    for q in (0, 1, 50, 90, 99, 100):
        assert stats.percentile(v, q) == pytest.approx(np.percentile(v, q))
    assert math.isnan(stats.percentile([], 50))


def test_stall_share_scaled_to_more_layers():
    s = {"stall_s": 1.0, "steady_wall_s": 3.0}
    assert stats.stall_share_at_layers(s, 12, 12) == pytest.approx(0.25)
    assert stats.stall_share_at_layers(s, 12, 36) == pytest.approx(1.0 / 10.0)


def test_markdown_table_rows_and_failures():
    s = stats.summarize(synthetic_steps())
    rows = [
        {"system": "moejit_sealed", "cell": "1k/1k C=64", "layers": 36, "tp": 1, "summary": s,
         "setup": {"seconds": 4.2, "what": "prewarm", "compiled": 23, "loaded": 0, "process": 1}},
        {"system": "triton_exact", "cell": "8k/1k C=16", "layers": 36, "tp": 2, "rank": 1, "summary": s},
        {"system": "triton_bucketed", "cell": "1k/1k C=4", "layers": 36, "tp": 1, "error": "boom"},
    ]
    md = stats.markdown(rows, "title")
    lines = md.splitlines()
    assert lines[0] == "### title"
    header = next(ln for ln in lines if ln.startswith("| cell"))
    n = header.count("|")
    table = [ln for ln in lines if ln.startswith("| 1k") or ln.startswith("| 8k")]
    assert len(table) == 3 and all(ln.count("|") == n for ln in table)
    assert "(d) moejit, prewarm + seal" in md and "| 2 r1 |" in md and "failed: boom" in md
    assert f"{100 * s['stall_share']:.1f} %" in md
    assert "| 4.20 | prewarm | 23 |" in md


# ----------------------------------------------------------------- shard ---

def _rand_u8(rng, *shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def toy_weights(rng, E=3, D=64, I=128):
    w1 = rng.standard_normal((E, 2 * I, D)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((E, D, I)).astype(np.float32) * 0.1
    w1q, w1s = moejit.quantize_mxfp4(w1)
    w2q, w2s = moejit.quantize_mxfp4(w2)
    return {"w1": w1q, "w1_scales": w1s, "b1": rng.standard_normal((E, 2 * I)).astype(np.float32),
            "w2": w2q, "w2_scales": w2s, "b2": rng.standard_normal((E, D)).astype(np.float32)}


@pytest.mark.parametrize("act", ["swiglu_oai", "silu_gated"])
def test_shards_have_the_rank_shapes_and_concatenate_back(act):
    rng = np.random.default_rng(1)
    E, D, I, tp = 3, 64, 128, 2
    w = toy_weights(rng, E, D, I)
    shards = [shard.shard_moejit_weights(w, I, r, tp, "w4a16_mxfp4", act) for r in range(tp)]
    for r, s in enumerate(shards):
        assert s["w1"].shape == (E, 2 * I // tp, D // 2) and s["w1_scales"].shape == (E, 2 * I // tp, D // 32)
        assert s["b1"].shape == (E, 2 * I // tp)
        assert s["w2"].shape == (E, D, I // tp // 2) and s["w2_scales"].shape == (E, D, I // tp // 32)
        assert s["b2"].shape == (E, D) and (np.array_equal(s["b2"], w["b2"]) if r == 0 else not s["b2"].any())
    back = shard.unshard_moejit_weights(shards, act)
    for k in w:
        assert np.array_equal(back[k], w[k]), k
    # The packed shards dequantize to the shards of the dequantized weights (bit for bit).
    full_down = moejit.dequantize_mxfp4(np.ascontiguousarray(w["w2"]), np.ascontiguousarray(w["w2_scales"]))
    for r, s in enumerate(shards):
        part = moejit.dequantize_mxfp4(np.ascontiguousarray(s["w2"]), np.ascontiguousarray(s["w2_scales"]))
        assert np.array_equal(part, full_down[:, :, r * I // tp:(r + 1) * I // tp])


def _layer64(shape_act, x, ids, wts, w, alpha=1.702, limit=7.0):
    """float64 MoE layer over dequantized moejit-layout weights (as python/tests/reference.py)."""
    W1 = moejit.dequantize_mxfp4(np.ascontiguousarray(w["w1"]), np.ascontiguousarray(w["w1_scales"])).astype(np.float64)
    W2 = moejit.dequantize_mxfp4(np.ascontiguousarray(w["w2"]), np.ascontiguousarray(w["w2_scales"])).astype(np.float64)
    out = np.zeros((x.shape[0], W2.shape[1]))
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = ids[t, j]
            h = W1[e] @ x[t] + w["b1"][e]
            if shape_act == "swiglu_oai":
                g, lin = np.minimum(h[0::2], limit), np.clip(h[1::2], -limit, limit)
                a = g / (1 + np.exp(-alpha * g)) * (lin + 1)
            else:
                n = h.shape[0] // 2
                a = h[:n] / (1 + np.exp(-h[:n])) * h[n:]
            out[t] += wts[t, j] * (W2[e] @ a + w["b2"][e])
    return out


@pytest.mark.parametrize("act", ["swiglu_oai", "silu_gated"])
def test_the_sum_of_the_ranks_layers_is_the_full_layer(act):
    rng = np.random.default_rng(2)
    E, D, I, k, T = 4, 64, 128, 2, 5
    w = toy_weights(rng, E, D, I)
    x = rng.standard_normal((T, D))
    ids = np.stack([rng.choice(E, size=k, replace=False) for _ in range(T)])
    wts = rng.random((T, k))
    full = _layer64(act, x, ids, wts, w)
    for tp in (2, 4):
        parts = [_layer64(act, x, ids, wts, shard.shard_moejit_weights(w, I, r, tp, "w4a16_mxfp4", act))
                 for r in range(tp)]
        np.testing.assert_allclose(sum(parts), full, rtol=1e-10, atol=1e-10)
    assert shard.gate_up_layout(act) == ("interleaved" if act == "swiglu_oai" else "concatenated")


def test_gpt_oss_tp2_shard_shapes_and_errors():
    rng = np.random.default_rng(3)
    E, D, I = 2, 2880, 2880  # gpt-oss-120b's D and I, two experts
    w = {"w1": _rand_u8(rng, E, 2 * I, D // 2), "w1_scales": _rand_u8(rng, E, 2 * I, D // 32),
         "b1": np.zeros((E, 2 * I), np.float32), "w2": _rand_u8(rng, E, D, I // 2),
         "w2_scales": _rand_u8(rng, E, D, I // 32), "b2": np.ones((E, D), np.float32)}
    s = shard.shard_moejit_weights(w, I, 1, 2)
    assert s["w1"].shape == (E, 2880, 1440) and s["w2"].shape == (E, 2880, 720) and s["w2_scales"].shape == (E, 2880, 45)
    assert moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=1, tp=2).layers[0].intermediate == 1440
    t = shard.shard_triton_weights(np.zeros((E, D, 2 * I), np.float32), np.zeros((E, 2 * I)), np.zeros((E, I, D)),
                                   np.ones((E, D)), I, 1, 2)
    assert t["w1_kn"].shape == (E, D, 2880) and t["w2_kn"].shape == (E, 1440, D) and not t["b2"].any()
    with pytest.raises(ValueError, match="rank"):
        shard.shard_moejit_weights(w, I, 2, 2)
    with pytest.raises(ValueError, match="does not divide"):
        shard.shard_moejit_weights(w, I, 0, 7)
    with pytest.raises(ValueError, match="scale block"):
        shard.shard_moejit_weights(w, I, 0, 4 * 9)  # I/36 = 80, not a multiple of 32
    with pytest.raises(ValueError, match="2I"):
        shard.shard_moejit_weights(w, 1440, 0, 1)


def test_the_pack_plan_is_the_layer_plan():
    """moejit_pack replays with a pack of moejit.plan(model, tp); the layer prewarms
    MoeLayer.plan(): the same keys, so the pack serves every kernel."""
    spec = moejit.embedded_model("gpt-oss-120b")
    for tp in (1, 2):
        p = moejit.plan(spec, max_num_tokens=8192, tp=tp, target="sm_90a")
        layer_plan = moejit.Plan([p.layers[0]], [p.quant_modes[0]], max_num_tokens=8192, model_name=spec.name,
                                 target="sm_90a")
        assert [k.text for k in layer_plan.keys()] == [k.text for k in p.keys()]


# ------------------------------------------------------- concurrent prewarm ---

@needs_nvrtc
def test_two_ranks_prewarm_one_cache_and_compile_each_kernel_once(tmp_path):
    plan_args = {"shape": [256, 128, 8, 2], "quant": "bf16", "max_num_tokens": 64, "target": "sm_90a", "jobs": 1}
    res = prewarm_ranks.compare(plan_args, tmp_path, ranks=2)
    solo, both = res["solo"], res["together"]
    n = solo["distinct_kernels"]
    assert n >= 2
    assert solo["compiled_sum"] == n and solo["failed_sum"] == 0
    assert both["failed_sum"] == 0
    assert both["compiled_sum"] == n, both["ranks"]  # each kernel compiled once across the ranks
    for r in both["ranks"]:  # every rank ends with every kernel: compiled by itself or read from disk
        assert r["compiled"] + r["disk_hits"] == n
        assert r["keys"] == solo["ranks"][0]["keys"]
    assert res["each_kernel_compiled_once"]
    assert solo["wall_s"] > 0 and both["wall_s"] > 0
    print(f"prewarm of {n} kernels: one rank {solo['wall_s']:.2f} s, two ranks on one cache {both['wall_s']:.2f} s")


def test_prewarm_ranks_reports_a_failing_rank(tmp_path):
    with pytest.raises(RuntimeError, match="did not start|exited"):
        prewarm_ranks.run_ranks({"model": "no-such-model"}, tmp_path / "c", ranks=2)


# --------------------------------------------------------------- the tool ---

def test_replay_tool_writes_traces_and_reports(tmp_path):
    tool = [sys.executable, str(BENCH / "serving_replay.py")]
    r = subprocess.run(tool + ["traces", "--out", str(tmp_path / "t.json"), "--steps", "40"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    traces = trace.load(tmp_path / "t.json")
    assert [t.cell for t in traces] == list(trace.DEFAULT_CELLS) and all(len(t.tokens) == 40 for t in traces)

    steps = synthetic_steps()
    proc = {"system": "moejit_cold", "tp": 1, "rank": 0, "layers": 12, "cell": "1k/1k C=64",
            "cells": [{"cell": "1k/1k C=64", "steps": steps, "summary": stats.summarize(steps)}]}
    failed = {"system": "triton_exact", "tp": 2, "rank": 0, "layers": 12, "cell": "8k/1k C=16",
              "error": "ModuleNotFoundError: triton_kernels"}
    results = {"command": "bench/serving_replay.py run --quick", "steps": 6, "layers": 12, "max_num_tokens": 8192,
               "seed": 1, "processes": [proc, failed],
               "prewarm_ranks": prewarm_ranks_result_example()}
    (tmp_path / "results.json").write_text(json.dumps(results))
    r = subprocess.run(tool + ["report", "--results", str(tmp_path / "results.json")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "results.md").read_text()
    assert "(c) moejit, cold cache" in md and "failed: ModuleNotFoundError" in md
    assert "each kernel compiled once" in md and "Tensor parallel 2" in md
    r = subprocess.run(tool + ["run", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--ranks-on-one-gpu" in r.stdout


def prewarm_ranks_result_example():
    rank = {"compiled": 3, "disk_hits": 0, "wall_s": 1.0}
    return {"solo": {"wall_s": 2.0, "compiled_sum": 6, "ranks": [dict(rank, compiled=6)]},
            "together": {"wall_s": 1.5, "distinct_kernels": 6, "compiled_sum": 6,
                         "ranks": [rank, dict(rank, disk_hits=3)]},
            "each_kernel_compiled_once": True}
