"""float64 torch reference of the MoE layer (docs/formats.md, "The float64 MoE
reference"): dequantized weights, gate_up + bias + activation, H rounded to
bf16 as the kernels store it, down + bias times the router weight, combine in
slot order."""
from __future__ import annotations

import torch

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize_mxfp4(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """uint8 [..., K/2] (or [..., K/32, 16]) + uint8 [..., K/32] -> float64 [..., K]."""
    lut = torch.tensor(E2M1, dtype=torch.float64, device=blocks.device)
    b = blocks.reshape(*scales.shape[:-1], -1)
    codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(*b.shape[:-1], -1).long()
    vals = lut[codes]
    s = torch.pow(2.0, scales.double() - 127.0)
    s = torch.where(scales == 0xFF, torch.full_like(s, float("nan")), s)
    return vals * s.repeat_interleave(32, dim=-1)


def activation(h: torch.Tensor, act: str, alpha: float, limit: float) -> torch.Tensor:
    if act == "none":
        return h
    if act == "silu_gated":
        n = h.shape[-1] // 2
        return torch.nn.functional.silu(h[:, :n]) * h[:, n:]
    g = h[:, 0::2].clamp(max=limit)
    lin = h[:, 1::2].clamp(-limit, limit)
    return g * torch.sigmoid(alpha * g) * (lin + 1.0)


def moe_reference(shape, x, topk_ids, topk_weights, w1, b1, w2, b2) -> torch.Tensor:
    """w1 float64 [E, N1, D], w2 float64 [E, D, I] (dequantized), biases or None; -> float64 [T, D]."""
    T, D = x.shape
    out = torch.zeros((T, D), dtype=torch.float64, device=x.device)
    xd = x.double()
    ids = topk_ids.long()
    for e in torch.unique(ids).tolist():
        if e < 0:
            continue
        t, j = torch.nonzero(ids == e, as_tuple=True)
        h = xd[t] @ w1[e].T
        if b1 is not None:
            h = h + b1[e].double()
        h = activation(h, shape.act, shape.alpha, shape.limit).to(torch.bfloat16).double()
        y = h @ w2[e].T
        if b2 is not None:
            y = y + b2[e].double()
        out.index_add_(0, t, y * topk_weights[t, j].double()[:, None])
    return out


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))
