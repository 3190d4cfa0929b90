"""The grouped GEMM over expert-sorted rows without a GPU: properties, keys per
row bucket (the layer's down kernels without router weights), workspace, errors
that name the field, prewarm into the private cache; and, with torch, the op's
fake implementation (shapes for torch.compile) and its CPU-side checks."""
from __future__ import annotations

import pytest

import moejit
from conftest import nvrtc_present


def op(quant: str = "bf16", bias: str = "bf16", **kw) -> moejit.GroupedGemm:
    return moejit.GroupedGemm(moejit.Runtime(use_disk_cache=False), n=2880, k=2880, experts=128, quant=quant,
                              bias=bias, **kw)


def test_properties():
    g = op("w4a16_mxfp4")
    assert (g.n, g.k, g.experts, g.quant, g.bias, g.weight_scale) == (2880, 2880, 128, "w4a16_mxfp4", "bf16",
                                                                       "e8m0_block32")
    assert op("fp8_per_token", weight_scale="per_channel").weight_scale == "per_channel"


@pytest.mark.parametrize("quant", ["bf16", "w4a16_mxfp4", "mxfp8", "fp8_per_token"])
def test_keys_are_the_down_kernels_without_router_weights(quant):
    g = op(quant)
    for m in (1, 7, 300, 4096):
        keys = g.keys(m)
        assert keys[0].op == "route" and keys[0].top_k == 1
        k = keys[1]
        assert (k.op, k.quant, k.n, k.k, k.top_k, k.router_weight) == ("down", quant, 2880, 2880, 1, False)
        assert k.token_bucket == moejit.round_up_tokens(m)
        # bf16 Y straight into the output, or fp32 split-K partials and the combine that sums them
        assert (len(keys), k.out_dtype) in ((2, "bf16"), (3, "f32"))
        if len(keys) == 3:
            assert keys[2].op == "combine"


def test_workspace_is_monotonic_and_bounds_the_exact_size():
    g = op("w4a16_mxfp4")
    rows = (1, 8, 64, 512, 4096, 20000)
    sizes = [g.workspace_size(m) for m in rows]
    assert sizes == sorted(sizes) and all(s % 256 == 0 for s in sizes)
    assert all(g.workspace_size_for(m) <= g.workspace_size(m) for m in rows)


def test_errors_name_the_field():
    rt = moejit.Runtime(use_disk_cache=False)
    with pytest.raises(moejit.InvalidArgument, match="n=100"):
        moejit.GroupedGemm(rt, n=100, k=256, experts=4)
    with pytest.raises(moejit.InvalidArgument, match="experts=0"):
        moejit.GroupedGemm(rt, n=256, k=256, experts=0)
    with pytest.raises(moejit.InvalidArgument):
        moejit.GroupedGemm(rt, n=256, k=256, experts=4, quant="int3")
    g = moejit.GroupedGemm(rt, n=256, k=256, experts=4)
    g.run_ptr(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)  # M = 0: nothing to launch
    with pytest.raises(moejit.InvalidArgument, match=r"GroupedGemmArgs\.a=0"):
        g.run_ptr(4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


@pytest.mark.skipif(not nvrtc_present(), reason="no libnvrtc: prewarm cannot compile")
def test_prewarm_compiles_every_bucket_into_the_cache(private_cache):
    g = moejit.GroupedGemm(moejit.Runtime(cache_dir=str(private_cache)), n=256, k=256, experts=4, quant="w4a16_mxfp4")
    assert g.prewarm(16) >= 2
    assert any(private_cache.rglob("*")), "prewarm wrote no cache entry"


def test_torch_op_fake_and_checks():
    torch = pytest.importorskip("torch")
    import moejit.torch  # noqa: F401  registers the ops

    a = torch.empty((5, 256), dtype=torch.bfloat16, device="meta")
    offs = torch.empty((5,), dtype=torch.int32, device="meta")
    w = torch.empty((4, 512, 256), dtype=torch.bfloat16, device="meta")
    y = torch.ops.moejit.grouped_gemm(a, offs, w)
    assert y.shape == (5, 512) and y.dtype == torch.bfloat16
    with pytest.raises(Exception, match="a: expected a CUDA tensor"):
        moejit.torch._grouped_gemm_cuda(torch.zeros((5, 256), dtype=torch.bfloat16), torch.zeros(5, dtype=torch.int32),
                                        torch.zeros((4, 512, 256), dtype=torch.bfloat16), None, None, None, "bf16",
                                        None)
