"""The replayed systems: one gpt-oss-120b MoE layer (routing + gate_up + activation +
down + combine, W4A16 MXFP4, random weights) run L times per step on a CUDA GPU.

  triton_exact     triton_kernels matmul_ogs (routing, 2 matmuls) on exactly T tokens;
                   Triton compiles each new specialization when it first meets it
  triton_bucketed  the same with the rows padded to moejit's bucket of T (round_up_tokens),
                   after a warmup that runs the layer once at every bucket <= max_num_tokens
  moejit_cold      moejit.torch.MoeLayer on T tokens, a fresh Runtime on an empty cache directory
  moejit_sealed    the same after MoeLayer.prewarm() (compile + load every kernel) and seal()
  moejit_pack      the same with the Runtime reading an AOT pack (built without a GPU), then seal()

Tensor parallelism (tp > 1): the experts are sharded along I (bench/serving/shard.py),
each rank runs its shard and the layer output is all-reduced (sum) over the group;
the routing is the same on every rank (same inputs).
Needs torch with CUDA; triton_kernels importable (PYTHONPATH) for the Triton systems.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from . import shard
from .names import COLD_SYSTEMS, SYSTEMS  # noqa: F401

MODEL = "gpt-oss-120b"


def model_shape(tp: int = 1):
    import moejit
    spec = moejit.embedded_model(MODEL)
    return spec, moejit.plan(spec, max_num_tokens=1, tp=tp).layers[0]


def buckets(max_num_tokens: int) -> List[int]:
    import moejit
    return sorted(moejit.prewarm_set(max_num_tokens))


def count_entries(d: Optional[str]) -> int:
    """Entries of a Triton cache directory (one per compiled kernel or launcher)."""
    if not d or not os.path.isdir(d):
        return 0
    with os.scandir(d) as it:
        return sum(1 for e in it if e.is_dir())


class Inputs:
    """Activations and router logits for up to max_rows rows, the same on every rank (seeded)."""

    def __init__(self, max_rows: int, hidden: int, experts: int, device: torch.device, seed: int = 7) -> None:
        g = torch.Generator(device=device).manual_seed(seed)
        self.x = torch.randn((max_rows, hidden), generator=g, device=device).to(torch.bfloat16)
        self.logits = torch.randn((max_rows, experts), generator=g, device=device)
        self.max_rows = max_rows


def all_reduce(y: torch.Tensor, group) -> None:
    """Sum over the group in place. NCCL: on the GPU, in y's dtype. Other backends (gloo, for
    ranks sharing one GPU, which NCCL refuses): through a float32 host copy."""
    import torch.distributed as dist
    if dist.get_backend(group) == "nccl":
        dist.all_reduce(y, group=group)
        return
    t = y.float().cpu()
    dist.all_reduce(t, group=group)
    y.copy_(t)


class System:
    name = ""
    pads = False

    def __init__(self, layers: int, tp: int, rank: int, device: torch.device, group=None) -> None:
        self.layers, self.tp, self.rank, self.device, self.group = layers, tp, rank, device, group
        self.spec, self.full_shape = model_shape(1)
        _, self.shape = model_shape(tp)

    def rows(self, T: int) -> int:
        import moejit
        return moejit.round_up_tokens(T) if self.pads else T

    def counters(self) -> Tuple[int, int]:
        """(kernels compiled, kernels loaded) so far in this process."""
        raise NotImplementedError

    def layer(self, x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def step(self, inputs: Inputs, T: int) -> int:
        """Launches the L layers of one step on the rows of T (padded for a padding system);
        returns the rows computed. The caller synchronizes."""
        n = self.rows(T)
        x, logits = inputs.x[:n], inputs.logits[:n]
        for _ in range(self.layers):
            y = self.layer(x, logits)
            if self.tp > 1:
                all_reduce(y, self.group)
        return n

    def setup(self, max_num_tokens: int, inputs: Inputs, buckets_to_warm: Optional[List[int]] = None) -> dict:
        """Warmup / prewarm before the trace (timed by the caller): what it did."""
        return {}

    def check_output(self, inputs: Inputs, T: int) -> bool:
        """One layer on the rows of T (outside the timed steps): every output element finite."""
        n = self.rows(T)
        y = self.layer(inputs.x[:n], inputs.logits[:n])
        return bool(torch.isfinite(y).all().item())

    def new_cell(self, work_dir: Path) -> None:
        """Before each cell: a cold system starts from a clean state."""

    def info(self) -> dict:
        return {}


# ------------------------------------------------------------------ Triton ---

class TritonOgs(System):
    """triton_kernels matmul_ogs as vLLM and TensorRT-LLM run gpt-oss on Hopper
    (the setup of bench-peers' peer_ogs.py): hopper-swizzled MXFP4 weights, fused swiglu."""
    name = "triton_exact"
    PAD_I = 64  # per-rank intermediate size padded to a multiple of 64 with zero weights, as vLLM does

    def __init__(self, layers, tp, rank, device, group=None, seed: int = 3) -> None:
        super().__init__(layers, tp, rank, device, group)
        import triton
        import triton_kernels.swiglu
        from triton_kernels.matmul_ogs import FlexCtx, FnSpecs, FusedActivation, PrecisionConfig, matmul_ogs
        from triton_kernels.matmul_ogs_details import opt_flags
        from triton_kernels.numerics import InFlexData
        from triton_kernels.numerics_details.mxfp import downcast_to_mxfp
        from triton_kernels.routing import routing
        from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
        from triton_kernels.tensor_details import layout

        self.triton_version = triton.__version__
        self.cache_dir = os.environ.get("TRITON_CACHE_DIR")
        self._matmul_ogs, self._routing = matmul_ogs, routing
        opt_flags.update_opt_flags_constraints({"split_k": 1})  # as vLLM does on Hopper
        E, D, I, k = self.full_shape.experts, self.full_shape.hidden, self.full_shape.intermediate, self.full_shape.top_k
        self.top_k = k
        g = torch.Generator(device=device).manual_seed(seed)
        w1 = torch.randn((E, D, 2 * I), generator=g, device=device, dtype=torch.bfloat16) * 0.05
        w2 = torch.randn((E, I, D), generator=g, device=device, dtype=torch.bfloat16) * 0.05
        b1 = torch.randn((E, 2 * I), generator=g, device=device) * 0.1
        b2 = torch.randn((E, D), generator=g, device=device) * 0.1
        s = shard.shard_triton_weights(w1, b1, w2, b2, I, rank, tp)
        del w1, w2
        ir = I // tp
        ip = -(-ir // self.PAD_I) * self.PAD_I
        self.padded_intermediate = ip
        w1s, b1s, w2s = s["w1_kn"], s["b1"], s["w2_kn"]
        if ip != ir:  # zero gate/up pairs and zero down rows contribute nothing
            w1s = torch.nn.functional.pad(w1s, (0, 2 * (ip - ir)))
            b1s = torch.nn.functional.pad(b1s, (0, 2 * (ip - ir)))
            w2s = torch.nn.functional.pad(w2s, (0, 0, 0, ip - ir))

        def quant(w_kn):  # [E, K, N] bf16 -> hopper-swizzled MXFP4 value + scale (mx axis = K)
            q, sc = downcast_to_mxfp(w_kn.contiguous(), torch.uint8, axis=1)
            vl, vo = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
            sl, so = layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=8)
            return convert_layout(wrap_torch_tensor(q, dtype=FP4), vl, **vo), convert_layout(wrap_torch_tensor(sc), sl, **so)

        self.w1q, w1sc = quant(w1s)
        self.w2q, w2sc = quant(w2s)
        self.b1, self.b2 = b1s.contiguous(), s["b2"].contiguous()
        del w1s, w2s, s
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()  # the bf16 staging (6.4 GB at tp 1) back to the device
        self.pc1 = PrecisionConfig(weight_scale=w1sc, flex_ctx=FlexCtx(rhs_data=InFlexData()))
        self.pc2 = PrecisionConfig(weight_scale=w2sc, flex_ctx=FlexCtx(rhs_data=InFlexData()))
        self.act = FusedActivation(FnSpecs("swiglu", triton_kernels.swiglu.swiglu_fn, ("alpha", "limit")),
                                   (self.spec_alpha(), self.spec_limit()), 2)

    def spec_alpha(self) -> float:
        return float(self.full_shape.alpha)

    def spec_limit(self) -> float:
        return float(self.full_shape.limit)

    def counters(self) -> Tuple[int, int]:
        return count_entries(self.cache_dir), 0

    def layer(self, x, logits):
        rd, gi, si = self._routing(logits, self.top_k, sm_first=False)
        h = self._matmul_ogs(x, self.w1q, self.b1, rd, gather_indx=gi, precision_config=self.pc1,
                             fused_activation=self.act)
        y = self._matmul_ogs(h, self.w2q, self.b2, rd, scatter_indx=si, precision_config=self.pc2,
                             gammas=rd.gate_scal)
        return y.view(x.shape[0], -1)

    def info(self) -> dict:
        return {"triton": self.triton_version, "triton_cache_dir": self.cache_dir,
                "intermediate_per_rank": self.full_shape.intermediate // self.tp,
                "intermediate_per_rank_padded": self.padded_intermediate}


class TritonBucketed(TritonOgs):
    name = "triton_bucketed"
    pads = True

    def setup(self, max_num_tokens, inputs, buckets_to_warm=None):
        """One layer call at every bucket <= max_num_tokens (or at the given buckets)."""
        c0 = self.counters()[0]
        bs = buckets(max_num_tokens) if buckets_to_warm is None else list(buckets_to_warm)
        for b in bs:
            y = self.layer(inputs.x[:b], inputs.logits[:b])
            if self.tp > 1:
                all_reduce(y, self.group)
        torch.cuda.synchronize(self.device)
        what = (f"one layer call at each of the {len(bs)} buckets <= {max_num_tokens}" if buckets_to_warm is None
                else f"one layer call at each of the {len(bs)} buckets the replayed steps use")
        return {"what": what, "compiled": self.counters()[0] - c0, "loaded": 0, "buckets": len(bs)}


# ------------------------------------------------------------------ moejit ---

def random_mxfp4_weights(shape, device: torch.device, seed: int) -> Dict[str, torch.Tensor]:
    """Random e2m1 codes and E8M0 scales (2^-6 .. 2^-4) in moejit's layouts, bf16 biases."""
    g = torch.Generator(device=device).manual_seed(seed)
    E, D, I = shape.experts, shape.hidden, shape.intermediate

    def u8(*s, lo=0, hi=256):
        return torch.randint(lo, hi, s, generator=g, device=device, dtype=torch.int32).to(torch.uint8)
    return {
        "w1": u8(E, 2 * I, D // 2), "w1_scales": u8(E, 2 * I, D // 32, lo=121, hi=124),
        "b1": (torch.randn((E, 2 * I), generator=g, device=device) * 0.1).to(torch.bfloat16),
        "w2": u8(E, D, I // 2), "w2_scales": u8(E, D, I // 32, lo=121, hi=124),
        "b2": (torch.randn((E, D), generator=g, device=device) * 0.1).to(torch.bfloat16),
    }


class Moejit(System):
    name = "moejit_cold"

    def __init__(self, layers, tp, rank, device, group=None, cache_dir: Optional[Path] = None,
                 pack: Optional[str] = None, max_num_tokens: int = 8192, seed: int = 5) -> None:
        super().__init__(layers, tp, rank, device, group)
        import moejit
        import moejit.torch as mt
        self._mt = mt
        self.moejit_version = moejit.__version__
        self.max_num_tokens = max_num_tokens
        self.pack = pack
        full = random_mxfp4_weights(self.full_shape, device, seed)  # the same on every rank (seeded)
        w = shard.shard_moejit_weights(full, self.full_shape.intermediate, rank, tp, "w4a16_mxfp4",
                                       self.full_shape.act)
        self.weights = {k: v.contiguous() for k, v in w.items()}
        self.full_weights = full if tp > 1 and rank == 0 else None
        del full
        self.top_k = self.shape.top_k
        self._new_runtime(cache_dir)

    def _new_runtime(self, cache_dir: Optional[Path]) -> None:
        import moejit
        self.cache_dir = cache_dir
        kwargs = {"pack": self.pack} if self.pack else {}
        if getattr(self, "moe", None) is not None:
            self.moe.release()
        self.rt = moejit.Runtime(cache_dir=os.fspath(cache_dir) if cache_dir else None, **kwargs)
        self.moe = self._mt.MoeLayer(self.shape, "w4a16_mxfp4", max_num_tokens=self.max_num_tokens,
                                     device=self.device, runtime=self.rt, model_name=MODEL)
        w = self.weights
        self.moe.load_weights(w["w1"], w["w1_scales"], w["b1"], w["w2"], w["w2_scales"], w["b2"])

    def new_cell(self, work_dir: Path) -> None:
        if self.name == "moejit_cold":  # a fresh Runtime on an empty cache directory
            self._new_runtime(work_dir)

    def counters(self) -> Tuple[int, int]:
        st = self.rt.stats()
        return int(st["compiles"]), int(st["module_loads"])

    def layer(self, x, logits):
        topk_weights, topk_ids = self._mt.fused_topk(logits, self.top_k)
        return self.moe.run(x, topk_ids, topk_weights)

    def prewarm_and_seal(self, group_barrier=None) -> dict:
        if group_barrier:
            group_barrier()  # every rank starts its prewarm at the same moment
        t0 = time.perf_counter()
        rep = self.moe.prewarm()
        secs = time.perf_counter() - t0
        st = self.rt.stats()
        return {"seconds": secs, "compiled": rep.compiled, "loaded": rep.disk_hits, "distinct_kernels":
                rep.distinct_kernels, "keys": rep.keys, "pack_hits": st["pack_hits"], "disk_hits": st["disk_hits"],
                "what": ("prewarm from the AOT pack " + os.path.basename(self.pack)) if self.pack else
                f"prewarm of {rep.keys} keys ({rep.distinct_kernels} kernels) into an empty cache"}

    def seal(self) -> None:
        self.rt.seal()

    def info(self) -> dict:
        st = self.rt.stats()
        return {"moejit": self.moejit_version, "cache_dir": os.fspath(self.rt.cache_dir), "pack": self.pack,
                "sealed": bool(self.rt.sealed), "misses_after_seal": st["misses_after_seal"], "stats": st}


def check_tp(system: Moejit, inputs: Inputs, tokens=(1, 7, 64, 1000, 4096)) -> dict:
    """The TP layer (shards + all-reduce) against the single-GPU layer on the full weights
    (rank 0 holds those): relative error over each T, NaN-poisoned outputs."""
    mt = system._mt
    ref_layer = None
    if system.rank == 0:
        ref_layer = mt.MoeLayer(system.full_shape, "w4a16_mxfp4", max_num_tokens=max(tokens), device=system.device,
                                runtime=system.rt, model_name=MODEL)
        f = system.full_weights
        ref_layer.load_weights(f["w1"], f["w1_scales"], f["b1"], f["w2"], f["w2_scales"], f["b2"])
        ref_layer.prewarm()
    rows = []
    ok = True
    for T in tokens:
        x, logits = inputs.x[:T], inputs.logits[:T]
        tw, ti = mt.fused_topk(logits, system.top_k)
        part = torch.full((T, system.shape.hidden), float("nan"), dtype=torch.bfloat16, device=system.device)
        system.moe.run(x, ti, tw, out=part)
        summed = part.float()
        all_reduce(summed, system.group)
        if system.rank == 0:
            ref = torch.full((T, system.shape.hidden), float("nan"), dtype=torch.bfloat16, device=system.device)
            ref_layer.run(x, ti, tw, out=ref)
            ref = ref.float()
            finite = bool(torch.isfinite(summed).all()) and bool(torch.isfinite(ref).all())
            err = float(torch.linalg.norm(summed - ref) / torch.linalg.norm(ref)) if finite else float("nan")
            good = finite and err < 1e-2
            ok &= good
            rows.append({"T": T, "rel_err": err, "finite": finite, "ok": good})
    torch.cuda.synchronize(system.device)
    if ref_layer is not None:
        ref_layer.release()
    system.full_weights = None
    return {"rows": rows, "ok": ok} if system.rank == 0 else {}


def make_system(name: str, layers: int, tp: int, rank: int, device: torch.device, group=None,
                cache_dir: Optional[Path] = None, pack: Optional[str] = None, max_num_tokens: int = 8192) -> System:
    if name == "triton_exact":
        return TritonOgs(layers, tp, rank, device, group)
    if name == "triton_bucketed":
        return TritonBucketed(layers, tp, rank, device, group)
    if name in ("moejit_cold", "moejit_sealed", "moejit_pack"):
        if name == "moejit_pack" and not pack:
            raise ValueError("moejit_pack: no AOT pack given (--pack)")
        s = Moejit(layers, tp, rank, device, group, cache_dir=cache_dir, pack=pack if name == "moejit_pack" else None,
                   max_num_tokens=max_num_tokens)
        s.name = name
        return s
    raise ValueError(f"system: expected one of {', '.join(SYSTEMS)}, got {name!r}")
