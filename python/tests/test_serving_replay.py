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

TOOL = [sys.executable, str(BENCH / "serving_replay.py")]


def run_tool(*args, env=None, timeout=300):
    import os
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(TOOL + list(args), capture_output=True, text=True, timeout=timeout, env=e)


def test_replay_tool_writes_traces_and_reports(tmp_path):
    r = run_tool("traces", "--out", str(tmp_path / "t.json"), "--steps", "40")
    assert r.returncode == 0, r.stderr
    traces = trace.load(tmp_path / "t.json")
    assert [t.cell for t in traces] == list(trace.DEFAULT_CELLS) and all(len(t.tokens) == 40 for t in traces)

    steps = synthetic_steps()
    proc = {"system": "moejit_cold", "tp": 1, "rank": 0, "layers": 12, "cell": "1k/1k C=64",
            "cells": [{"cell": "1k/1k C=64", "steps": stats.to_columns(steps), "summary": stats.summarize(steps)}]}
    failed = {"system": "triton_exact", "tp": 2, "rank": 0, "layers": 12, "cell": "8k/1k C=16",
              "error": "ModuleNotFoundError: triton_kernels"}
    results = {"format": "moejit-serving-results", "command": "bench/serving_replay.py run --quick", "steps": 6,
               "layers": 12, "max_num_tokens": 8192, "seed": 1, "processes": [proc, failed],
               "prewarm_ranks": prewarm_ranks_result_example()}
    (tmp_path / "results.json").write_text(json.dumps(results))
    r = run_tool("report", "--results", str(tmp_path / "results.json"))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "results.md").read_text()
    assert "(c) moejit, cold cache" in md and "failed: ModuleNotFoundError" in md
    assert "each kernel compiled once" in md and "Tensor parallel 2" in md
    r = run_tool("run", "--help")
    assert r.returncode == 0 and "--ranks-on-one-gpu" in r.stdout and "--smoke" in r.stdout


def prewarm_ranks_result_example():
    rank = {"compiled": 3, "disk_hits": 0, "wall_s": 1.0}
    return {"solo": {"wall_s": 2.0, "compiled_sum": 6, "ranks": [dict(rank, compiled=6)]},
            "together": {"wall_s": 1.5, "distinct_kernels": 6, "compiled_sum": 6,
                         "ranks": [rank, dict(rank, disk_hits=3)]},
            "each_kernel_compiled_once": True}


def test_step_columns_round_trip():
    steps = synthetic_steps()
    steps[4]["group_max"] = [1, 1]
    back = stats.from_columns(json.loads(json.dumps(stats.to_columns(steps))))
    for a, b in zip(steps, back):
        for k, v in a.items():
            assert b[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    assert stats.summarize(back)["stall_s"] == pytest.approx(stats.summarize(steps)["stall_s"])


def test_replay_loop_times_a_stalled_step_again():
    from serving import worker

    class Fake:
        """Compiles on the first T of each kind; a compile takes 50 ms, a step 1 ms."""
        def __init__(self):
            self.n, self.seen = 0, set()

        def counters(self):
            return self.n, 0

        def step(self, inputs, T):
            import time
            if T not in self.seen:
                self.seen.add(T)
                self.n += 2
                time.sleep(0.05)
            time.sleep(0.001)
            return T
    recs = worker.replay(Fake(), None, [8, 8, 64, 8, 64, 128], lambda: None, lambda: None, lambda f: f)
    assert [r["compiles"] for r in recs] == [2, 0, 2, 0, 0, 2]
    assert [r["first_call"] for r in recs] == [True, False, True, False, False, True]
    for r in recs:
        if r["first_call"]:
            assert r["steady_s"] < 0.03 < r["wall_s"]  # the re-run meets no compile
        else:
            assert r["steady_s"] is None
    s = stats.summarize(recs)
    assert s["stall_steps"] == 3 and 0.12 < s["stall_s"] < 0.5
    # A peer rank's compile makes the step a first call here too (group_max), with no compile of its own.
    recs = worker.replay(Fake(), None, [8], lambda: None, lambda: None, lambda f: [f[0], 5], tp=2)
    assert recs[0]["group_max"] == [2, 5]


def test_estimate_buckets_are_moejits():
    from serving import estimate
    for n in (1, 17, 1000, 8192, 20000):
        assert estimate.bucket_set(n) == sorted(moejit.prewarm_set(n)), n
    assert all(estimate._round_up(t) == moejit.round_up_tokens(t) for t in range(1, 20001))


def test_every_part_of_the_full_run_fits_one_call():
    """The high estimate of each part of the full run (300 steps x 36 layers) stays inside the
    deadline run-serving.sh gives a command (500 s) less the wheel install and the preflight; the
    smoke inside two minutes; the full single part does not (so it is split)."""
    import serving_replay
    from serving import estimate, names
    steps = {c.name: trace.make_trace(c, trace.TraceOptions(max_steps=300)).tokens for c in trace.DEFAULT_CELLS}

    class A:
        systems, max_num_tokens, mock = ",".join(names.SINGLE_ORDER), 8192, False
    parts = {p: serving_replay.part_estimate(p, serving_replay.FULL, A, steps) for p in ("single-1", "single-2",
                                                                                         "single")}
    assert parts["single-1"]["high_s"] < 460 and parts["single-2"]["high_s"] < 460, \
        {p: e["high_s"] for p, e in parts.items()}
    assert parts["single"]["high_s"] > 510
    assert {r["system"] for p in ("single-1", "single-2") for r in parts[p]["processes"]} == set(names.SYSTEMS)
    smoke_cells = [trace.Cell.parse(serving_replay.SMOKE["cells"])]
    smoke_steps = {c.name: trace.make_trace(c, trace.TraceOptions(max_steps=10)).tokens for c in smoke_cells}
    smoke = serving_replay.part_estimate("single", serving_replay.SMOKE, A, smoke_steps, "trace", True, smoke_cells)
    assert smoke["high_s"] < 90, estimate.text(smoke, "smoke")
    # triton_exact's stalls: one new specialization per distinct T of its cell, each re-run once.
    ex = next(r for r in parts["single-1"]["processes"] if r["process"] == "triton_exact-1024-1024-c4")
    distinct = len(set(steps["1k/1k C=4"]))
    assert ex["stalls"][1] >= distinct * estimate.COMPILE_S[1]


@pytest.mark.parametrize("name,ok", [
    ("moejit-0.1.0-cp312-cp312-linux_x86_64.whl", (3, 12)),
    ("moejit-0.1.0-cp311-cp311-linux_x86_64.whl", (3, 11)),
    ("moejit-0.1.0-cp312-abi3-linux_x86_64.whl", (3, 13)),
])
def test_wheel_tags(name, ok):
    import serving_replay
    assert serving_replay.wheel_ok(name, ok, "x86_64") is None
    assert "this python is 3.10" in serving_replay.wheel_ok(name, (3, 10), "x86_64")
    assert "aarch64" in serving_replay.wheel_ok(name, ok, "aarch64")


def test_pick_wheel_takes_this_pythons_and_says_what_is_missing(tmp_path):
    v = sys.version_info
    mine = tmp_path / f"moejit-0.1.0-cp{v.major}{v.minor}-cp{v.major}{v.minor}-linux_x86_64.whl"
    other = tmp_path / "moejit-0.1.0-cp27-cp27mu-linux_x86_64.whl"
    other.write_text("")
    r = run_tool("pick-wheel", str(tmp_path / "moejit-*.whl"))
    assert r.returncode == 3 and f"this python is {v.major}.{v.minor}" in r.stderr and "PYTHONS=" in r.stderr
    mine.write_text("")
    r = run_tool("pick-wheel", str(tmp_path / "moejit-*.whl"))
    assert r.returncode == 0 and r.stdout.strip() == str(mine)
    r = run_tool("pick-wheel", str(tmp_path / "nothing-*.whl"))
    assert r.returncode == 3 and "no file matches" in r.stderr


def test_check_pack_names_a_missing_pack(tmp_path):
    r = run_tool("check-pack", "--pack-dir", str(tmp_path), "--tp", "1")
    assert r.returncode == 1 and "FAIL tp1" in r.stdout and "no such file" in r.stdout


def test_every_bench_python_file_compiles():
    files = sorted(BENCH.glob("*.py")) + sorted((BENCH / "serving").glob("*.py"))
    assert len(files) >= 12
    for f in files:
        compile(f.read_text(), str(f), "exec")  # a syntax error fails here, without running the module


# ------------------------------------------------ the whole path, mocked ---

def mock_run(tmp_path, *args, env=None, timeout=300):
    out = tmp_path / "out"
    r = run_tool("run", "--mock", "--out", str(out), "--pack-dir", str(tmp_path / "packs"), *args, env=env,
                 timeout=timeout)
    return r, out


def test_mock_smoke_runs_every_system_and_passes(tmp_path):
    from serving import mock
    r, out = mock_run(tmp_path, "--smoke")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "smoke.json", "smoke.md"]
    res = json.loads((out / "smoke.json").read_text())
    assert res["format"] == "moejit-serving-results" and res["mock"] and res["name"] == "smoke"
    by = {p["system"]: p for p in res["processes"]}
    assert set(by) == {"triton_exact", "triton_bucketed", "moejit_cold", "moejit_sealed", "moejit_pack"}
    steps = res["traces"]["8k/1k C=64"]
    assert len(steps) == 10
    for p in by.values():
        assert not p.get("error"), p
        c = p["cells"][0]
        assert c["cell"] == "8k/1k C=64" and c["finite"] and c["summary"]["steps"] == 10
        assert stats.from_columns(c["steps"])[0]["T"] == steps[0]
    ex = by["triton_exact"]["cells"][0]["summary"]
    assert ex["compiles"] == len(set(steps)) and ex["stall_s"] >= 0.5 * mock.STALL_S * len(set(steps))
    bu = by["triton_bucketed"]
    assert bu["setup"]["compiled"] == len({moejit.round_up_tokens(t) for t in steps})
    assert bu["cells"][0]["summary"]["compiles"] == 0 and bu["cells"][0]["summary"]["padding_share"] > 0
    for s in ("moejit_sealed", "moejit_pack"):
        assert by[s]["cells"][0]["summary"]["compiles"] == 0 and by[s]["info"]["misses_after_seal"] == 0
    assert by["moejit_cold"]["cells"][0]["summary"]["compiles"] > 0
    log = (out / "log.txt").read_text()
    assert log.count("smoke PASS") == 5 and "SMOKE PASSED" in log
    assert "--part single-1: expected" in log and "--part single-2: expected" in log
    assert "preflight PASS moejit" in log
    md = (out / "smoke.md").read_text()
    assert "MOCK RUN" in md and sum(ln.startswith("| 8k/1k C=64 |") for ln in md.splitlines()) == 5


def test_mock_failure_and_timeout_are_reported_and_the_rest_runs(tmp_path):
    r, out = mock_run(tmp_path, "--quick", "--part", "single-2", "--steps", "5", "--process-timeout-s", "3",
                      env={"MOEJIT_SERVING_MOCK_FAIL": "moejit_cold", "MOEJIT_SERVING_MOCK_HANG": "moejit_pack"})
    assert r.returncode == 1
    res = json.loads((out / "results.json").read_text())
    by = {p["system"]: p for p in res["processes"]}
    assert "failure injected" in by["moejit_cold"]["error"] and "(at stage weights)" in by["moejit_cold"]["error"]
    assert "timeout" in by["moejit_pack"]["error"]
    assert not by["triton_bucketed"].get("error") and len(by["triton_bucketed"]["cells"]) == 3
    md = (out / "results.md").read_text()
    assert md.count("| failed:") == 2 and "Processes that failed" in md


def test_mock_deadline_skips_what_does_not_fit(tmp_path):
    r, out = mock_run(tmp_path, "--quick", "--part", "single-1", "--deadline-s", "2")
    assert r.returncode == 1
    res = json.loads((out / "results.json").read_text())
    assert res["processes"] and all("skipped" in p["error"] for p in res["processes"])
    assert "WARNING: even the low estimate" in (out / "log.txt").read_text() or res["estimate"]["low_s"] <= 2


def run_serving(tmp_path, *args, env=None):
    import os
    e = dict(os.environ, MOEJIT_OUT_DIR=str(tmp_path / "out"), PYTHON=sys.executable, TMPDIR=str(tmp_path))
    e.update(env or {})
    return subprocess.run(["bash", str(BENCH / "run-serving.sh"), "--no-install", "--mock", *args],
                          capture_output=True, text=True, timeout=300, env=e), tmp_path / "out"


def test_run_serving_smoke_then_a_part_in_one_call(tmp_path):
    r, out = run_serving(tmp_path, "--smoke", "--part", "single-2", "--quick")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["log.txt", "results.json", "results.md", "smoke.json", "smoke.md"]
    assert len(files) <= 8 and not any("=" in f for f in files)
    res = json.loads((out / "results.json").read_text())
    assert res["part"] == "single-2" and res["command"].startswith("bash bench/run-serving.sh")
    assert {p["system"] for p in res["processes"]} == {"triton_bucketed", "moejit_cold", "moejit_pack"}
    log = (out / "log.txt").read_text()
    assert "SMOKE PASSED" in log and "run-serving: exit 0" in log
    assert not list(tmp_path.glob("moejit-serving.*")), "the work folder is removed"


def test_run_serving_stops_after_a_failed_smoke(tmp_path):
    r, out = run_serving(tmp_path, "--smoke", "--part", "single-1", env={"MOEJIT_SERVING_MOCK_FAIL": "triton_exact"})
    assert r.returncode == 1
    assert not (out / "results.json").exists()
    log = (out / "log.txt").read_text()
    assert "SMOKE FAILED" in log and "smoke FAIL triton_exact" in log and "part single-1 not started" in log


def test_run_serving_usage_errors(tmp_path):
    r, _ = run_serving(tmp_path, "--part", "nope")
    assert r.returncode == 2 and "--part nope" in r.stderr
    import os
    e = dict(os.environ, MOEJIT_OUT_DIR=str(tmp_path / "o"), PYTHON=sys.executable)
    r = subprocess.run(["bash", str(BENCH / "run-serving.sh"), "--smoke"], capture_output=True, text=True, env=e,
                       timeout=60)
    assert r.returncode == 2 and "no --wheel" in r.stdout


def test_results_page_section_from_the_replays_json(tmp_path):
    """bench/report.py makes the results page's serving section from the results files of the
    parts kept in docs/results-data/serving/ (here from a mock run of both parts)."""
    import shutil
    runs = []
    for part in ("single-1", "single-2"):
        r, out = mock_run(tmp_path / part, "--quick", "--part", part, "--steps", "8")
        assert r.returncode == 0, r.stdout[-2000:]
        runs.append(out / "results.json")
    data = tmp_path / "data"
    (data / "serving").mkdir(parents=True)
    for f in ("moejit.jsonl", "peers.jsonl", "launch.jsonl"):
        shutil.copy(BENCH.parent / "docs" / "results-data" / f, data / f)
    for part, p in zip(("single-1", "single-2"), runs):
        shutil.copy(p, data / "serving" / f"results-{part}.json")
    page = tmp_path / "results.md"
    r = subprocess.run([sys.executable, str(BENCH / "report.py"), "--data", str(data), "--out", str(page),
                        "--chart", ""], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    md = page.read_text()
    sec = md[md.index("## Serving-trace replay on the GPU"):]
    assert "Mock run" in sec and "results-single-1.json, results-single-2.json" in sec
    for cell in ("1k/1k C=64", "1k/1k C=4", "8k/1k C=64"):
        for title in stats.SYSTEM_TITLES.values():
            assert f"| {cell} | {title} |" in sec, (cell, title)
    assert "## gpt-oss-120b" in md  # the rest of the page is still made


def test_moejit_system_weights_have_the_layers_layouts():
    """systems.random_mxfp4_weights makes what MoeLayer.set_weights takes for the replayed layer
    (on the CPU here: the same code as on the GPU)."""
    torch = pytest.importorskip("torch")
    from serving import systems
    spec, shape = systems.model_shape(1)
    assert spec.name == systems.MODEL and (shape.gate_up_bias, shape.down_bias) == ("bf16", "bf16")
    small = moejit.MoeLayerShape(hidden=64, intermediate=64, experts=3, top_k=2, act="swiglu_oai", alpha=1.702,
                                 limit=7.0, gate_up_bias="bf16", down_bias="bf16")
    w = systems.random_mxfp4_weights(small, torch.device("cpu"), seed=1)
    E, D, I = 3, 64, 64
    want = {"w1": ((E, 2 * I, D // 2), torch.uint8), "w1_scales": ((E, 2 * I, D // 32), torch.uint8),
            "b1": ((E, 2 * I), torch.bfloat16), "w2": ((E, D, I // 2), torch.uint8),
            "w2_scales": ((E, D, I // 32), torch.uint8), "b2": ((E, D), torch.bfloat16)}
    assert {k: (tuple(v.shape), v.dtype) for k, v in w.items()} == want
    assert int(w["w1_scales"].min()) >= 121 and int(w["w1_scales"].max()) <= 123  # 2^-6 .. 2^-4
    x = systems.Inputs(16, D, E, torch.device("cpu"))
    assert x.x.dtype == torch.bfloat16 and tuple(x.logits.shape) == (16, E)
    assert systems.buckets(8192) == sorted(moejit.prewarm_set(8192))
