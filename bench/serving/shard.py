"""Tensor-parallel sharding of MoE expert weights along the intermediate
dimension I (each of tp ranks holds I/tp of every expert's gate_up rows and
down columns). Works on numpy arrays and torch tensors alike (slicing only),
returns views where slicing allows.

Rank r of tp, Ir = I / tp:
  gate_up  [E, 2I, ...] rows: interleaved gate/up (swiglu_oai, gpt-oss: row 2j gate j, row 2j+1 up j)
           -> rows [2 Ir r, 2 Ir (r+1)), which keep every (gate j, up j) pair on one rank;
           concatenated (silu_gated: gate rows [0, I), up rows [I, 2I)) -> gate [Ir r, Ir (r+1)) and
           up [I + Ir r, I + Ir (r+1)), concatenated.
  down     [E, D, I] columns (packed: I/2 bytes of e2m1, I/32 E8M0 scales) -> columns [Ir r, Ir (r+1)).
  b1       like the gate_up rows; b2 on rank 0 only (other ranks: zeros), so that the
           all-reduce (sum) of the ranks' outputs adds it once.
The layer output is the sum over ranks: the activation is elementwise per (gate j, up j)
pair and the down GEMM's reduction over I splits into the ranks' partial sums.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

MXFP4_BLOCK = 32


def _cat(parts: Sequence[Any], axis: int) -> Any:
    first = parts[0]
    if type(first).__module__.startswith("torch"):
        import torch
        return torch.cat(list(parts), dim=axis)
    import numpy as np
    return np.concatenate(parts, axis=axis)


def _check(tp: int, rank: int, intermediate: int, quant: str) -> int:
    if tp < 1:
        raise ValueError(f"tp: must be >= 1, got {tp}")
    if not 0 <= rank < tp:
        raise ValueError(f"rank: must be in [0, {tp}), got {rank}")
    if intermediate % tp:
        raise ValueError(f"tp: {tp} does not divide the intermediate size {intermediate}")
    ir = intermediate // tp
    if quant in ("w4a16_mxfp4", "mxfp8") and ir % MXFP4_BLOCK:
        raise ValueError(f"tp: I/tp = {ir} is not a multiple of the {MXFP4_BLOCK}-element scale block ({quant})")
    if quant == "w4a16_mxfp4" and ir % 2:
        raise ValueError(f"tp: I/tp = {ir} is odd: e2m1 packs two columns per byte")
    return ir


def _rows(a: Any, intermediate: int, rank: int, tp: int, layout: str) -> Any:
    """Rows of gate_up (axis 1) of rank `rank`."""
    n = a.shape[1]
    if n != 2 * intermediate:
        raise ValueError(f"gate_up: expected {2 * intermediate} rows (2I), got {n}")
    ir = intermediate // tp
    if layout == "interleaved":
        return a[:, 2 * ir * rank:2 * ir * (rank + 1)]
    if layout == "concatenated":
        return _cat([a[:, ir * rank:ir * (rank + 1)], a[:, intermediate + ir * rank:intermediate + ir * (rank + 1)]], 1)
    raise ValueError(f"layout: expected 'interleaved' or 'concatenated', got {layout!r}")


def _cols(a: Any, intermediate: int, rank: int, tp: int, per_byte: int) -> Any:
    """Columns of down (axis 2; per_byte: columns per stored element) of rank `rank`."""
    if a.shape[2] * per_byte != intermediate:
        raise ValueError(f"down: expected {intermediate // per_byte} stored columns, got {a.shape[2]}")
    w = intermediate // tp // per_byte
    return a[:, :, w * rank:w * (rank + 1)]


def gate_up_layout(act: str) -> str:
    """How gate and up rows are arranged for an activation: 'interleaved' (swiglu_oai) or 'concatenated'."""
    return "interleaved" if act == "swiglu_oai" else "concatenated"


def shard_moejit_weights(w: Dict[str, Any], intermediate: int, rank: int, tp: int, quant: str = "w4a16_mxfp4",
                         act: str = "swiglu_oai") -> Dict[str, Any]:
    """moejit's layouts (MoeLayer.set_weights): w1 [E, 2I, D/2] (or D for 8-bit and bf16), w1_scales
    [E, 2I, D/32], b1 [E, 2I], w2 [E, D, I/2] (or I), w2_scales [E, D, I/32], b2 [E, D]; None entries stay None.
    -> the same keys for rank `rank` of `tp` (I/tp intermediate)."""
    _check(tp, rank, intermediate, quant)
    layout = gate_up_layout(act)
    per_byte = 2 if quant == "w4a16_mxfp4" else 1
    out: Dict[str, Any] = {}
    for k in ("w1", "w1_scales", "b1"):
        out[k] = None if w.get(k) is None else _rows(w[k], intermediate, rank, tp, layout)
    out["w2"] = _cols(w["w2"], intermediate, rank, tp, per_byte)
    s = w.get("w2_scales")
    if s is not None and quant in ("w4a16_mxfp4", "mxfp8"):
        s = _cols(s, intermediate, rank, tp, MXFP4_BLOCK)
    out["w2_scales"] = s
    b2 = w.get("b2")
    out["b2"] = None if b2 is None else (b2 if rank == 0 else b2 * 0)
    return out


def unshard_moejit_weights(shards: List[Dict[str, Any]], act: str = "swiglu_oai") -> Dict[str, Any]:
    """The inverse of shard_moejit_weights over all ranks (for checks)."""
    tp = len(shards)
    out: Dict[str, Any] = {}
    for k in ("w1", "w1_scales", "b1"):
        if shards[0].get(k) is None:
            out[k] = None
        elif gate_up_layout(act) == "interleaved":
            out[k] = _cat([s[k] for s in shards], 1)
        else:
            h = shards[0][k].shape[1] // 2
            out[k] = _cat([s[k][:, :h] for s in shards] + [s[k][:, h:] for s in shards], 1)
    for k in ("w2", "w2_scales"):
        out[k] = None if shards[0].get(k) is None else _cat([s[k] for s in shards], 2)
    out["b2"] = shards[0].get("b2")
    del tp
    return out


def shard_triton_weights(w1_kn: Any, b1: Optional[Any], w2_kn: Any, b2: Optional[Any], intermediate: int,
                         rank: int, tp: int) -> Dict[str, Any]:
    """Unquantized weights as triton_kernels matmul_ogs takes them before MXFP4 (K-major, interleaved
    gate/up): w1_kn [E, D, 2I], b1 [E, 2I], w2_kn [E, I, D], b2 [E, D] -> rank `rank`'s shard."""
    ir = _check(tp, rank, intermediate, "w4a16_mxfp4")
    if w1_kn.shape[2] != 2 * intermediate or w2_kn.shape[1] != intermediate:
        raise ValueError(f"w1_kn [E, D, 2I] / w2_kn [E, I, D] with I={intermediate}: got "
                         f"{list(w1_kn.shape)}, {list(w2_kn.shape)}")
    return {
        "w1_kn": w1_kn[:, :, 2 * ir * rank:2 * ir * (rank + 1)],
        "b1": None if b1 is None else b1[:, 2 * ir * rank:2 * ir * (rank + 1)],
        "w2_kn": w2_kn[:, ir * rank:ir * (rank + 1), :],
        "b2": None if b2 is None else (b2 if rank == 0 else b2 * 0),
    }
