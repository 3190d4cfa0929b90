"""Plans, keys and buckets from Python agree with the C++ library and tools."""
from __future__ import annotations

import pytest

import moejit
from conftest import run_tool


def test_gpt_oss_120b_plan_matches_the_prewarm_tool():
    plan = moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=20000)
    assert len(plan.buckets) == 98  # 8 buckets per octave up to 20000 tokens
    assert plan.quant_modes == ["w4a16_mxfp4"]
    keys = plan.keys()
    assert plan.num_keys == len(keys) > 0
    r = run_tool("moejit-prewarm", "--model", "gpt-oss-120b", "--max-num-tokens", "20000", "--list-keys")
    assert r.returncode == 0, r.stderr
    listed = [line for line in r.stdout.splitlines() if line.startswith("op=")]
    assert listed == [k.text for k in keys]


def test_plan_options_and_splits():
    spec = moejit.embedded_model("gpt-oss-120b")
    assert (spec.hidden, spec.intermediate, spec.experts, spec.top_k) == (2880, 2880, 128, 4)
    assert spec.checkpoint_quant == "w4a16_mxfp4" and spec.act == "swiglu_oai"
    p = moejit.plan(spec, max_num_tokens=512, tp=2, ep=4, quant="bf16")
    (layer,) = p.layers
    assert (layer.intermediate, layer.experts) == (1440, 32)
    assert p.quant_modes == ["bf16"] and p.target == "sm_90a" and p.max_num_tokens == 512


def test_keys_round_trip_through_text_and_hash():
    plan = moejit.plan(moejit.embedded_model("qwen3-30b-a3b"), max_num_tokens=300)
    for key in plan.keys():
        back = moejit.parse_key(key.text)
        assert back == key and back.hash == key.hash and len(key.hash) == 32
        assert " ".join(f"{n}={v}" for n, v in key.fields()) == key.text
    a, b = plan.keys()[0], plan.keys()[-1]
    assert moejit.key_diff(a, a) == ""
    assert "tokens: " in moejit.key_diff(a, b) or "op: " in moejit.key_diff(a, b)


def test_key_fields_have_one_meaning_per_op():
    s = moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=64).layers[0]
    route, gate_up, down, combine = moejit.layer_keys(s, "bf16", 64)
    assert [k.op for k in (route, gate_up, down, combine)] == ["route", "gate_up", "down", "combine"]
    assert (route.n, route.k, route.experts, route.top_k, route.in_dtype, route.out_dtype) == (0, 0, 128, 4, "none", "i32")
    assert (gate_up.n, gate_up.k, gate_up.experts, gate_up.top_k, gate_up.in_dtype) == (5760, 2880, 128, 4, "none")
    assert (combine.n, combine.k, combine.experts, combine.top_k) == (2880, 0, 0, 4)
    assert combine.in_dtype == down.out_dtype and combine.out_dtype == "bf16"
    names = [n for n, _ in combine.fields()]
    assert names[2] == "tokens" and names.index("in") == names.index("out") - 1
    assert f"tokens={combine.token_bucket} " in combine.text and f" in={combine.in_dtype} " in combine.text
    with pytest.raises(moejit.InvalidArgument, match="'k'"):
        moejit.parse_key(combine.text.replace(" k=0 ", " k=256 "))
    with pytest.raises(moejit.InvalidArgument, match="'m'"):
        moejit.parse_key(combine.text.replace("tokens=", "m="))


def test_layer_keys_follow_the_bucket_of_the_token_count():
    shape = moejit.embedded_model("gpt-oss-120b")
    plan = moejit.plan(shape, max_num_tokens=4096)
    s = plan.layers[0]
    assert moejit.round_up_tokens(1000) == 1024 and moejit.round_up_tokens(9) == 9
    keys = moejit.layer_keys(s, "w4a16_mxfp4", moejit.round_up_tokens(1000))
    assert {k.token_bucket for k in keys} >= {1024}
    assert all(k in set(plan.keys()) for k in keys)
    layer = moejit.MoeLayer(moejit.Runtime(use_disk_cache=False), s, "w4a16_mxfp4")
    assert layer.keys(1000) == keys
    sizes = [layer.workspace_size(t) for t in (1, 8, 64, 512, 4096)]
    assert sizes == sorted(sizes) and sizes[0] > 0


def test_a_layer_follows_its_runtime_gemm_tuning():
    s = moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=4096).layers[0]
    rt = moejit.Runtime(use_disk_cache=False, gemm_tuning="prefill.ws=1,prefill.stages=6")
    assert rt.gemm_tuning == "prefill.stages=6,prefill.ws=1"
    plain = moejit.Runtime(use_disk_cache=False, gemm_tuning="")
    assert plain.gemm_tuning == ""
    # At T = 2048 the heuristic runs two-warpgroup wgmma tiles with a split tail
    # (two more keys); the warp-specialized kernel has none, but reorders X
    # into its fragment k order first (one op=k_order key).
    assert len(moejit.MoeLayer(plain, s, "w4a16_mxfp4").keys(2048)) == 6
    ws_keys = moejit.MoeLayer(rt, s, "w4a16_mxfp4").keys(2048)
    assert len(ws_keys) == 5
    assert ws_keys[1].op == "k_order"


def test_plan_from_a_shape_and_from_a_config_file(tmp_path):
    shape = moejit.MoeLayerShape(hidden=1024, intermediate=512, experts=16, top_k=2)
    p = moejit.Plan([shape], ["bf16"], max_num_tokens=64, model_name="toy")
    assert p.layers == [shape] and p.buckets[-1] == 64 and p.num_keys > 0
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, '
                   '"num_local_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 32, "hidden_act": "silu"}')
    spec = moejit.load_hf_config(cfg)
    assert (spec.model_type, spec.experts, spec.top_k) == ("mixtral", 8, 2)
    assert spec.name == tmp_path.name
    assert moejit.plan(spec, max_num_tokens=8).quant_modes == ["bf16"]


@pytest.mark.parametrize("call, words", [
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=0), ["max_num_tokens", "0"]),
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), tp=7), ["tp", "7"]),
    (lambda: moejit.embedded_model("no-such-model"), ["no-such-model", "gpt-oss-120b"]),
    (lambda: moejit.parse_key("op=gate_up bogus=1"), ["bogus"]),
    (lambda: moejit.MoeLayerShape(hidden=64, intermediate=64, experts=4, top_k=2, act="relu"), ["relu"]),
    (lambda: moejit.parse_hf_config('{"model_type": "llama"}', "my.json"), ["my.json", "llama"]),
    (lambda: moejit.round_up_tokens(0), ["0"]),
    (lambda: moejit.round_up_tokens(-3), ["num_tokens", "-3"]),
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=-1), ["max_num_tokens", "-1"]),
    (lambda: moejit.Plan([moejit.MoeLayerShape(hidden=64, intermediate=64, experts=4, top_k=2)], ["bf16"],
                         max_num_tokens=-8), ["max_num_tokens", "-8"]),
    (lambda: moejit.prewarm_set(-2), ["max_tokens", "-2"]),
    (lambda: moejit.bucket_set(0), ["max_tokens", "0"]),
    (lambda: moejit.Runtime(use_disk_cache=False, max_cache_bytes=-5), ["max_cache_bytes", "-5"]),
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), target="sm_80"), ["target", "sm_80", "sm_90a"]),
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), target="sm_100a"), ["target", "sm_100a"]),
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), target="sm_90"), ["target", "sm_90", "sm_90a"]),
    (lambda: moejit.plan(moejit.embedded_model("gpt-oss-120b"), target="hopper"), ["target", "hopper"]),
    (lambda: moejit.Plan([moejit.MoeLayerShape(hidden=64, intermediate=64, experts=4, top_k=2)], ["bf16"],
                         target="sm_80"), ["target", "sm_80"]),
    (lambda: moejit.Runtime(seal_policy="sometimes"), ["seal_policy", "sometimes"]),
    (lambda: moejit.Runtime(use_disk_cache=False, gemm_tuning="decode.kw=0"), ["decode.kw=0"]),
    (lambda: moejit.MoeLayer(moejit.Runtime(use_disk_cache=False),
                             moejit.MoeLayerShape(hidden=100, intermediate=64, experts=4, top_k=2), "bf16"),
     ["hidden", "100"]),
])
def test_bad_input_names_the_argument_and_value(call, words):
    with pytest.raises(moejit.InvalidArgument) as e:
        call()
    for w in words:
        assert w in str(e.value), str(e.value)


def test_runtime_stats_use_the_stable_stat_ids():
    ids = moejit.stat_ids()
    assert [i for i, _, _ in ids][:4] == ["memory_hits", "disk_hits", "pack_hits", "disk_misses"]
    st = moejit.Runtime(use_disk_cache=False).stats()
    assert list(st) == [i for i, _, _ in ids] + ["compile_ms_total"]
    assert all(v == 0 for v in st.values())
    assert {i for i, _, persisted in ids if not persisted} == {"memory_hits", "module_loads"}
