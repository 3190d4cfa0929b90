"""moejit.torch on the GPU: the layer against the float64 torch reference,
the custom ops' agreement with the direct call, CUDA-graph capture and replay,
torch.compile, the quantizer ops. Skipped without torch or without a GPU."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU: the GPU tests of moejit.torch are skipped", allow_module_level=True)

import moejit  # noqa: E402
import moejit.torch as mt  # noqa: E402
from reference import dequantize_mxfp4, moe_reference, rel_error  # noqa: E402
from tensor_layouts import assert_both_reads_agree  # noqa: E402

DEV = torch.device("cuda", 0)


def random_mxfp4_layer(name: str, max_num_tokens: int, seed: int):
    """An MXFP4 layer of an embedded model with random weights, quantized on the GPU
    (moejit::quantize_mxfp4), plus its dequantized float64 weights for the reference."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    layer = mt.MoeLayer.from_config(name, max_num_tokens=max_num_tokens, device=DEV)
    s = layer.shape
    E, D, I = s.experts, s.hidden, s.intermediate
    w1f = torch.randn((E, 2 * I, D), generator=g, device=DEV) * (1.0 / D ** 0.5)
    w2f = torch.randn((E, D, I), generator=g, device=DEV) * (1.0 / I ** 0.5)
    w1, w1s = torch.ops.moejit.quantize_mxfp4(w1f)
    w2, w2s = torch.ops.moejit.quantize_mxfp4(w2f)
    del w1f, w2f
    b1 = (torch.randn((E, 2 * I), generator=g, device=DEV) * 0.1).to(torch.bfloat16)
    b2 = (torch.randn((E, D), generator=g, device=DEV) * 0.1).to(torch.bfloat16)
    layer.load_weights(w1, w1s, b1, w2, w2s, b2)
    layer.prewarm()
    return layer, (w1, w1s, b1, w2, w2s, b2)


def random_inputs(layer, T: int, seed: int):
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn((T, layer.shape.hidden), generator=g, device=DEV).to(torch.bfloat16)
    logits = torch.randn((T, layer.shape.experts), generator=g, device=DEV)
    weights, ids = mt.fused_topk(logits, layer.shape.top_k)
    return x, ids, weights


@pytest.fixture(scope="module")
def gpt_oss_20b():
    return random_mxfp4_layer("gpt-oss-20b", 4096, seed=1234)


@pytest.mark.parametrize("T", [1, 7, 64, 300, 2049])
def test_layer_matches_the_float64_reference(gpt_oss_20b, T):
    layer, (w1, w1s, b1, w2, w2s, b2) = gpt_oss_20b
    x, ids, gamma = random_inputs(layer, T, seed=T)
    ids[0, -1] = -1  # a dropped route (expert parallelism)
    out = torch.full((T, layer.shape.hidden), float("nan"), dtype=torch.bfloat16, device=DEV)
    layer.run(x, ids, gamma, out=out)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    hit = sorted(e for e in torch.unique(ids).tolist() if e >= 0)
    W1 = torch.zeros((layer.shape.experts, *w1.shape[1:-1], w1.shape[-1] * 2), dtype=torch.float64, device=DEV)
    W2 = torch.zeros((layer.shape.experts, *w2.shape[1:-1], w2.shape[-1] * 2), dtype=torch.float64, device=DEV)
    for e in hit:
        W1[e] = dequantize_mxfp4(w1[e], w1s[e])
        W2[e] = dequantize_mxfp4(w2[e], w2s[e])
    want = moe_reference(layer.shape, x, ids, gamma, W1, b1, W2, b2)
    err = rel_error(out, want)
    assert err < 1e-2, f"T={T}: relative error {err:.3e}"


def test_op_equals_the_direct_call_and_dlpack_path(gpt_oss_20b):
    layer, _ = gpt_oss_20b
    x, ids, gamma = random_inputs(layer, 100, seed=5)
    direct = layer.run(x, ids, gamma)
    via_op = torch.ops.moejit.moe_layer(x, ids, gamma, layer.handle)
    via_dlpack = torch.empty_like(direct)
    layer.core.run(x, ids, gamma, via_dlpack, layer.workspace, mt.current_stream(DEV))
    torch.cuda.synchronize()
    assert torch.equal(direct.view(torch.int16), via_op.view(torch.int16))
    assert torch.equal(direct.view(torch.int16), via_dlpack.view(torch.int16))


def test_call_stamps_bracket_the_cpp_call_inside_a_python_call(gpt_oss_20b):
    import time
    layer, _ = gpt_oss_20b
    x, ids, gamma = random_inputs(layer, 64, seed=11)
    out = torch.empty((64, layer.shape.hidden), dtype=torch.bfloat16, device=DEV)
    core = moejit._moejit
    layer.run(x, ids, gamma, out=out)
    core._stamp_layer_calls(True)
    try:
        for call in (lambda: layer.run(x, ids, gamma, out=out),
                     lambda: layer.core.run(x, ids, gamma, out, layer.workspace, mt.current_stream(DEV))):
            t0 = time.perf_counter_ns()
            call()
            t1 = time.perf_counter_ns()
            entry, c0, c1, exit_ = core._last_layer_call_ns()
            assert t0 < entry <= c0 < c1 <= exit_ < t1
    finally:
        core._stamp_layer_calls(False)
    before = core._last_layer_call_ns()
    layer.run(x, ids, gamma, out=out)  # stamps off: nothing recorded
    assert core._last_layer_call_ns() == before
    torch.cuda.synchronize()


def test_steps_as_ops_equal_the_whole_layer(gpt_oss_20b):
    layer, _ = gpt_oss_20b
    x, ids, gamma = random_inputs(layer, 512, seed=9)
    ws = torch.empty(layer.workspace_size(512), dtype=torch.uint8, device=DEV)
    torch.ops.moejit.moe_route(x, ids, gamma, ws, layer.handle)
    torch.ops.moejit.grouped_gemm_gate_up(x, ids, gamma, ws, layer.handle)
    torch.ops.moejit.grouped_gemm_down(x, ids, gamma, ws, layer.handle)
    out = torch.ops.moejit.moe_combine(x, ids, gamma, ws, layer.handle)
    assert torch.equal(out.view(torch.int16), layer(x, ids, gamma).view(torch.int16))


@pytest.mark.parametrize("T", [1, 64, 4096])
def test_cuda_graph_capture_and_replay(gpt_oss_20b, T):
    layer, _ = gpt_oss_20b
    sx, sids, sgamma = random_inputs(layer, T, seed=100 + T)
    before = layer.runtime.stats()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    op = torch.ops.moejit.moe_layer
    with torch.cuda.stream(s):
        for _ in range(2):
            op(sx, sids, sgamma, layer.handle)  # warm up on the capture stream
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        sout = op(sx, sids, sgamma, layer.handle)
        sout_direct = layer(sx, sids, sgamma)  # eager forward (run()) is capturable too
    for seed in (1, 2):
        x, ids, gamma = random_inputs(layer, T, seed=seed * 1000 + T)
        sx.copy_(x), sids.copy_(ids), sgamma.copy_(gamma)
        graph.replay()
        eager = layer(x, ids, gamma)
        torch.cuda.synchronize()
        assert torch.equal(sout.view(torch.int16), eager.view(torch.int16)), f"T={T} replay {seed}"
        assert torch.equal(sout_direct.view(torch.int16), eager.view(torch.int16)), f"T={T} replay {seed}"
    after = layer.runtime.stats()
    assert after["compiles"] == before["compiles"] and after["module_loads"] == before["module_loads"]


def test_torch_compile_traces_the_op(gpt_oss_20b):
    layer, _ = gpt_oss_20b
    torch._dynamo.reset()

    def block(x, ids, gamma):
        return x + layer(x, ids, gamma) * 0.5

    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    for T in (8, 33, 256):
        x, ids, gamma = random_inputs(layer, T, seed=T + 7)
        got = compiled(x, ids, gamma)
        want = block(x, ids, gamma)
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
        assert got.shape == (T, layer.shape.hidden) and got.dtype == torch.bfloat16


def test_gpt_oss_checkpoint_layout(gpt_oss_20b):
    layer, (w1, w1s, b1, w2, w2s, b2) = gpt_oss_20b
    s = layer.shape
    ckpt = {
        "experts.gate_up_proj_blocks": w1.view(s.experts, 2 * s.intermediate, s.hidden // 32, 16),
        "experts.gate_up_proj_scales": w1s, "experts.gate_up_proj_bias": b1,
        "experts.down_proj_blocks": w2.view(s.experts, s.hidden, s.intermediate // 32, 16),
        "experts.down_proj_scales": w2s, "experts.down_proj_bias": b2,
    }
    other = mt.MoeLayer.from_config("gpt-oss-20b", max_num_tokens=64, device=DEV)
    other.load_gpt_oss(ckpt, prefix="experts.")
    x, ids, gamma = random_inputs(layer, 64, seed=3)
    assert torch.equal(other(x, ids, gamma).view(torch.int16), layer(x, ids, gamma).view(torch.int16))
    with pytest.raises(moejit.InvalidArgument, match="gate_up_proj_blocks"):
        other.load_gpt_oss({}, prefix="experts.")


def test_dlpack_exchange_and_attribute_reads_accept_the_same_cuda_tensors():
    """The exchange path's device mapping (kDLCUDA and its index) against get_device()."""
    if not mt.dlpack_exchange:
        pytest.skip(f"torch {torch.__version__} publishes no DLPack exchange API")
    assert_both_reads_agree(DEV, 0, 64, 2, 16)
    if torch.cuda.device_count() > 1:
        assert_both_reads_agree(torch.device("cuda", 1), 1, 64, 2, 16)


def test_quantize_mxfp4_op_gpu_equals_cpu():
    w = torch.randn((64, 512), device=DEV) * 3
    w[3, 7] = float("nan")
    d_gpu, s_gpu = torch.ops.moejit.quantize_mxfp4(w)
    d_cpu, s_cpu = torch.ops.moejit.quantize_mxfp4(w.cpu())
    assert torch.equal(d_gpu.cpu(), d_cpu) and torch.equal(s_gpu.cpu(), s_cpu)
    wb = w.to(torch.bfloat16)
    d2, s2 = torch.ops.moejit.quantize_mxfp4(wb)
    d2c, s2c = torch.ops.moejit.quantize_mxfp4(wb.cpu())
    assert torch.equal(d2.cpu(), d2c) and torch.equal(s2.cpu(), s2c)


def test_quantize_fp8_op_matches_the_cpu_quantizer():
    x = (torch.randn((32, 256), device=DEV) * 2).to(torch.bfloat16)
    codes, scales = torch.ops.moejit.quantize_fp8(x, "fp8_per_token")
    ref_codes, ref_scales = moejit.quantize_fp8_per_token(x.cpu())
    assert torch.equal(codes.view(torch.uint8).cpu(), torch.from_numpy(ref_codes))
    assert torch.equal(scales.cpu(), torch.from_numpy(ref_scales))


def test_bad_tensors_name_the_argument(gpt_oss_20b):
    layer, _ = gpt_oss_20b
    x, ids, gamma = random_inputs(layer, 4, seed=1)
    with pytest.raises(moejit.InvalidArgument, match=r"^x: expected dtype torch.bfloat16"):
        layer(x.float(), ids, gamma)
    with pytest.raises(moejit.InvalidArgument, match=r"^topk_ids: expected dtype torch.int32"):
        layer(x, ids.long(), gamma)
    with pytest.raises(moejit.InvalidArgument, match=r"^topk_weights: expected a CUDA tensor"):
        layer(x, ids, gamma.cpu())
    with pytest.raises(moejit.InvalidArgument, match=r"^topk_ids: expected shape"):
        layer(x, ids[:, :2].contiguous(), gamma)
    T, D = x.shape
    with pytest.raises(moejit.InvalidArgument, match=r"^out: expected dtype torch.bfloat16"):
        layer.run(x, ids, gamma, out=torch.empty((T, D), dtype=torch.float32, device=DEV))
    with pytest.raises(moejit.InvalidArgument, match=r"^out: expected shape"):
        layer.run(x, ids, gamma, out=torch.empty((T + 1, D), dtype=torch.bfloat16, device=DEV))
    with pytest.raises(moejit.InvalidArgument, match=r"^out: rows must be contiguous"):
        layer.run(x, ids, gamma, out=torch.empty((T, 2 * D), dtype=torch.bfloat16, device=DEV)[:, ::2])
    with pytest.raises(moejit.InvalidArgument, match=r"^topk_ids: expected a contiguous tensor"):
        layer.run(x, ids.t().contiguous().t(), gamma)
    with pytest.raises(moejit.InvalidArgument, match=r"^x: rows must be contiguous"):
        layer.run(torch.zeros((T, 2 * D), dtype=torch.bfloat16, device=DEV)[:, ::2], ids, gamma)
    # Rows apart (a row stride above D) are taken as they are, into an out with its own row stride.
    wide = torch.zeros((T, 3 * D), dtype=torch.bfloat16, device=DEV)
    wide[:, D:2 * D] = x
    out_wide = torch.full((T, 2 * D), float("nan"), dtype=torch.bfloat16, device=DEV)
    layer.run(wide[:, D:2 * D], ids, gamma, out=out_wide[:, :D])
    assert torch.equal(out_wide[:, :D].view(torch.int16), layer.run(x, ids, gamma).view(torch.int16))
    assert torch.isnan(out_wide[:, D:].float()).all()
    with pytest.raises(moejit.InvalidArgument, match="max_num_tokens"):
        big = torch.zeros((4097, layer.shape.hidden), dtype=torch.bfloat16, device=DEV)
        layer(big, torch.zeros((4097, 4), dtype=torch.int32, device=DEV),
              torch.zeros((4097, 4), dtype=torch.float32, device=DEV))


def test_route_and_weight_gradient_match_the_float64_reference(gpt_oss_20b):
    layer, _ = gpt_oss_20b
    T, k, E, D = 300, layer.shape.top_k, layer.shape.experts, layer.shape.hidden
    x, ids, gamma = random_inputs(layer, T, seed=77)
    offsets, sorted_route = layer.route(x, ids, gamma)
    counts = torch.bincount(ids.flatten().long(), minlength=E)
    assert torch.equal(offsets.long().cpu(), torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0).cpu()]))
    for e in range(E):
        rows = sorted_route[offsets[e]:offsets[e + 1]].long()
        assert torch.equal(torch.sort(rows).values, torch.nonzero(ids.flatten() == e).flatten())
    N = 512
    grad = torch.randn((T * k, N), device=DEV).to(torch.bfloat16)
    dw, db = torch.ops.moejit.moe_wgrad(grad, x, offsets, sorted_route, k, True)
    torch.cuda.synchronize()
    want_dw = torch.zeros((E, N, D), dtype=torch.float64, device=DEV)
    want_db = torch.zeros((E, N), dtype=torch.float64, device=DEV)
    for e in range(E):
        r = torch.arange(int(offsets[e]), int(offsets[e + 1]), device=DEV)
        tok = sorted_route[r].long() // k
        want_dw[e] = grad[r].double().T @ x[tok].double()
        want_db[e] = grad[r].double().sum(0)
    assert rel_error(dw, want_dw) < 1e-4 and rel_error(db, want_db) < 1e-4
    # by_row: X is one row per routed row (the down projection's H).
    h = torch.randn((T * k, 256), device=DEV).to(torch.bfloat16)
    dw2, _ = torch.ops.moejit.moe_wgrad(grad, h, offsets, sorted_route, k, False)
    for e in (0, E - 1):
        r = torch.arange(int(offsets[e]), int(offsets[e + 1]), device=DEV)
        assert rel_error(dw2[e], grad[r].double().T @ h[r].double()) < 1e-4
