"""A fused-MoE module with the interface of a serving engine's MoE layer:

    out = FusedMoE(...)(hidden_states, router_logits)

hidden_states bfloat16 [T, D], router_logits [T, E] -> out bfloat16 [T, D];
top-k softmax routing (softmax over the k largest logits), then moejit's
layer (routing, gate_up grouped GEMM, activation, down grouped GEMM with
the router weights, combine) as the torch custom op moejit::moe_layer:
capturable in CUDA graphs and traceable by torch.compile.

A reference implementation in plain torch (the same math, one expert at a
time) is below, for checks.
"""
from __future__ import annotations

from typing import Optional

import torch

import moejit
import moejit.torch as mt


class FusedMoE(torch.nn.Module):
    """Routed experts of one MoE block. Weights in moejit's layouts (MXFP4 for
    gpt-oss: load_gpt_oss() takes the checkpoint's tensors as stored)."""

    def __init__(self, config: str, max_num_tokens: int = 8192, quant: Optional[str] = None, tp: int = 1,
                 ep: int = 1, device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.experts = mt.MoeLayer.from_config(config, max_num_tokens=max_num_tokens, quant=quant, tp=tp, ep=ep,
                                               device=device)
        self.top_k = self.experts.shape.top_k

    def forward(self, hidden_states: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        topk_weights, topk_ids = mt.fused_topk(router_logits, self.top_k, renormalize=True)
        return self.experts(hidden_states, topk_ids, topk_weights)


def torch_reference_moe(shape: moejit.MoeLayerShape, hidden_states: torch.Tensor, router_logits: torch.Tensor,
                        w1: torch.Tensor, b1: Optional[torch.Tensor], w2: torch.Tensor,
                        b2: Optional[torch.Tensor]) -> torch.Tensor:
    """Plain torch, bf16 weights [E, 2I, D] / [E, D, I] (dequantized), fp32 accumulation:
    what an engine without fused kernels runs."""
    topk_weights, topk_ids = mt.fused_topk(router_logits, shape.top_k)
    out = torch.zeros(hidden_states.shape, dtype=torch.float32, device=hidden_states.device)
    for e in torch.unique(topk_ids).tolist():
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        h = (hidden_states[t] @ w1[e].T).float()
        if b1 is not None:
            h = h + b1[e].float()
        if shape.act == "swiglu_oai":
            g = h[:, 0::2].clamp(max=shape.limit)
            lin = h[:, 1::2].clamp(-shape.limit, shape.limit)
            h = g * torch.sigmoid(shape.alpha * g) * (lin + 1.0)
        else:
            n = h.shape[1] // 2
            h = torch.nn.functional.silu(h[:, :n]) * h[:, n:]
        y = (h.to(torch.bfloat16) @ w2[e].T).float()
        if b2 is not None:
            y = y + b2[e].float()
        out.index_add_(0, t, y * topk_weights[t, j, None])
    return out.to(torch.bfloat16)
