"""moejit::grouped_gemm on the GPU: bf16, w4a16_mxfp4 and fp8_per_token against a
float64 torch reference over the dequantized operands (empty groups, M = 0 and 1,
rows past the last offset), CUDA-graph capture and replay, torch.compile, and the
same groups through torch._grouped_mm. Skipped without torch or without a GPU."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU: the GPU tests of moejit.torch are skipped", allow_module_level=True)

import moejit.torch  # noqa: E402,F401  registers the ops
from reference import dequantize_mxfp4, rel_error  # noqa: E402

DEV = torch.device("cuda", 0)
E, N, K = 8, 768, 512


def offsets_of(sizes):
    return torch.tensor([0] + torch.tensor(sizes).cumsum(0).tolist(), dtype=torch.int32, device=DEV)


def reference(a, offs, W, bias):
    """float64 Y of the rows inside the groups ([offs[0], offs[E]))."""
    y = torch.zeros((a.shape[0], W.shape[1]), dtype=torch.float64, device=DEV)
    for e in range(W.shape[0]):
        lo, hi = int(offs[e]), int(offs[e + 1])
        if hi > lo:
            y[lo:hi] = a[lo:hi] @ W[e].T + (bias[e].double() if bias is not None else 0)
    return y


def weights(quant, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    wf = torch.randn((E, N, K), generator=g, device=DEV) * K ** -0.5
    bias = (torch.randn((E, N), generator=g, device=DEV) * 0.1).to(torch.bfloat16)
    if quant == "bf16":
        w = wf.to(torch.bfloat16)
        return dict(w=w), w.double(), bias
    if quant == "w4a16_mxfp4":
        w, ws = torch.ops.moejit.quantize_mxfp4(wf)
        W = torch.stack([dequantize_mxfp4(w[e], ws[e]) for e in range(E)])
        return dict(w=w, w_scales=ws), W, bias
    # fp8_per_token, per-channel scales
    s = wf.abs().amax(dim=2) / 448.0
    w = (wf / s[:, :, None]).to(torch.float8_e4m3fn)
    return dict(w=w, w_scales=s.float()), w.double() * s.double()[:, :, None], bias


@pytest.mark.parametrize("quant", ["bf16", "w4a16_mxfp4", "fp8_per_token"])
@pytest.mark.parametrize("sizes", [[1, 0, 0, 0, 0, 0, 0, 0], [3, 0, 5, 1, 0, 2, 0, 9], [40, 0, 300, 7, 0, 128, 1, 33],
                                   [0, 0, 0, 0, 0, 0, 0, 2049]])
def test_matches_the_float64_reference(quant, sizes):
    wargs, W, bias = weights(quant, seed=7)
    M = sum(sizes) + 5  # five rows past the last offset: in no group
    a16 = torch.randn((M, K), device=DEV).to(torch.bfloat16)
    offs = offsets_of(sizes)
    if quant == "fp8_per_token":
        a, a_scales = torch.ops.moejit.quantize_fp8(a16, "fp8_per_token")
        A = a.double() * a_scales.double()[:, None]
    else:
        a, a_scales, A = a16, None, a16.double()
    y = torch.ops.moejit.grouped_gemm(a, offs, wargs["w"], wargs.get("w_scales"), bias, a_scales, quant)
    torch.cuda.synchronize()
    rows = int(offs[-1])
    assert y.shape == (M, N) and y.dtype == torch.bfloat16
    assert torch.isfinite(y[:rows]).all()
    err = rel_error(y[:rows], reference(A, offs, W, bias)[:rows])
    assert err < 1e-2, f"{quant} {sizes}: relative error {err:.3e}"


def test_zero_rows():
    wargs, _, _ = weights("bf16", seed=1)
    y = torch.ops.moejit.grouped_gemm(torch.empty((0, K), dtype=torch.bfloat16, device=DEV),
                                      torch.zeros(E + 1, dtype=torch.int32, device=DEV), wargs["w"])
    assert y.shape == (0, N)


def test_agrees_with_torch_grouped_mm():
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch._grouped_mm missing in this torch")
    wargs, W, _ = weights("bf16", seed=3)
    sizes = [64, 0, 128, 16, 256, 0, 32, 8]
    offs = offsets_of(sizes)
    a = torch.randn((sum(sizes), K), device=DEV).to(torch.bfloat16)
    y = torch.ops.moejit.grouped_gemm(a, offs, wargs["w"])
    peer = torch._grouped_mm(a, wargs["w"].transpose(1, 2), offs=offs[1:])
    assert rel_error(y, peer.double()) < 1e-2


def test_cuda_graph_capture_and_compile():
    wargs, _, bias = weights("w4a16_mxfp4", seed=5)
    sizes = [5, 0, 17, 3, 0, 40, 1, 2]
    offs = offsets_of(sizes)
    a = torch.randn((sum(sizes), K), device=DEV).to(torch.bfloat16)

    def f(a):
        return torch.ops.moejit.grouped_gemm(a, offs, wargs["w"], wargs["w_scales"], bias, None, "w4a16_mxfp4")

    eager = f(a)  # also compiles the bucket's kernels before the capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f(a)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = f(a)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)
    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(a), eager)
