"""PyTorch integration: torch.library custom ops over moejit's kernels and a
MoE layer module that owns its workspace.

Ops (namespace ``moejit``), each with a fake (meta) implementation so that
torch.compile traces them, and nothing on the launch path that allocates
device memory outside torch's caching allocator, synchronizes or compiles
once the layer is prewarmed, so they can be captured in a CUDA graph:

    moejit::moe_layer(x, topk_ids, topk_weights, layer) -> out
        x bfloat16 [T, D], topk_ids int32 [T, top_k] (-1 drops a route),
        topk_weights float32 [T, top_k] -> out bfloat16 [T, D].
        `layer` is MoeLayer.handle; the layer's weights and workspace are its own.
    moejit::moe_route / grouped_gemm_gate_up / grouped_gemm_down (x, topk_ids,
        topk_weights, workspace!, layer) -> ()    the steps one by one, on an
        explicit workspace (uint8 [>= MoeLayer.workspace_size(T)])
    moejit::moe_combine(x, topk_ids, topk_weights, workspace, layer) -> out
    moejit::quantize_mxfp4(w) -> (data, scales)
        w float32/bfloat16 [..., K] (K % 32 == 0) -> uint8 [..., K/2], uint8 [..., K/32]
        (CUDA: the GPU quantizer; CPU: the bit-identical CPU one)
    moejit::moe_wgrad(grad, x, expert_offsets, sorted_route, top_k, by_token) -> (dw, db)
        the weight gradient of one grouped GEMM: grad bfloat16 [rows, N], x bfloat16
        [T, K] (by_token: rows gather their token) or [rows, K], expert_offsets int32
        [E + 1], sorted_route int32 [rows] (MoeLayer.route()) -> dw float32 [E, N, K],
        db float32 [E, N]
    moejit::quantize_fp8(x, mode) -> (codes, scales)
        x bfloat16 [rows, K] -> float8_e4m3fn [rows, K] and scales
        (mode 'fp8_per_token': float32 [rows]; 'mxfp8': uint8 [rows, K/32])
    moejit::grouped_gemm(a, expert_offsets, w, w_scales, bias, a_scales, quant, weight_scale) -> y
        the grouped GEMM over rows already sorted by expert (torch._grouped_mm(offs=...)'s
        interface with offs = expert_offsets[1:]): y[r] = a[r] @ w[e]^T + bias[e] for the rows
        r of group e, [expert_offsets[e], expert_offsets[e + 1]); y bfloat16 [M, N] (rows in no
        group: unspecified). expert_offsets int32 [E + 1]; per quant:
          'bf16':          a bfloat16 [M, K], w bfloat16 [E, N, K]
          'w4a16_mxfp4':   a bfloat16 [M, K], w uint8 [E, N, K/2] (or [E, N, K/32, 16], the
                           gpt-oss *_blocks), w_scales uint8 [E, N, K/32]
          'mxfp8':         a float8_e4m3fn [M, K], a_scales uint8 [M, K/32] (quantize_fp8),
                           w float8_e4m3fn [E, N, K], w_scales uint8 [E, N, K/32]
          'fp8_per_token': a float8_e4m3fn [M, K], a_scales float32 [M], w float8_e4m3fn
                           [E, N, K], w_scales float32 [E] or [E, N]
        bias None, or bfloat16 / float32 [E, N]

Kernels run on the caller's current CUDA stream. Nothing here needs torch at
build time. On the launch path tensors reach the library as device addresses
after the checks below, never through DLPack: torch's __dlpack__ may order
the default stream after the current one, which a CUDA-graph capture forbids.
"""
from __future__ import annotations

import itertools
import os
import threading
from typing import Mapping, Optional, Tuple, Union

try:
    import torch
except ModuleNotFoundError as e:  # the rest of moejit works without torch
    raise ImportError("moejit.torch needs PyTorch (pip install torch); `import moejit` works without it") from e

from . import _moejit
from ._moejit import Error, InvalidArgument, ModelSpec, MoeLayerShape, Plan, Runtime

__all__ = ["MoeLayer", "fused_topk", "current_stream", "target_of"]

# Layers reachable from the ops by handle (an int in the op schema, so that
# graphs and compiled code carry no Python object).
_LAYERS: dict[int, "MoeLayer"] = {}
_HANDLES = itertools.count(1)
_LOCK = threading.Lock()

try:  # one C call instead of building a torch.cuda.Stream object per call
    _raw_stream = torch._C._cuda_getCurrentRawStream  # type: ignore[attr-defined]
except AttributeError:  # pragma: no cover - older torch
    _raw_stream = None

_BF16, _I32, _F32 = torch.bfloat16, torch.int32, torch.float32


try:
    _is_compiling = torch.compiler.is_compiling
except AttributeError:  # pragma: no cover - older torch
    _is_compiling = torch._dynamo.is_compiling  # type: ignore[attr-defined]


def current_stream(device: torch.device) -> int:
    """The caller's current CUDA stream on `device`, as the integer CUstream."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _stream_of(index)


def _current_stream_object(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# The current CUDA stream of a device index as an integer: the call made per launch.
_stream_of = _raw_stream if _raw_stream is not None else _current_stream_object


_moejit._set_torch_dtypes(_BF16, _I32, _F32)
# Whether the launch path reads each tensor in one C call through torch's DLPack
# exchange API (torch >= 2.10: torch.Tensor.__dlpack_c_exchange_api__), rather
# than through about five Python attribute reads per tensor.
dlpack_exchange: bool = _moejit._set_torch_tensor_type(torch.Tensor)

# MoeLayer.run's check on its fast path, made in C++ (python/src/torch_args.cpp):
# (T, x row stride, out row stride, and the four addresses, out's 0 when None)
# when every property is what the layer takes
# (x bfloat16 [T, D] with rows contiguous, 1 <= T <= max_tokens, topk_ids int32 and
# topk_weights float32 [T, k] contiguous, out None or bfloat16 [T, D] with rows
# contiguous, all on CUDA device `dev`), else None: then _check names the mismatch.
# Each tensor is read in one C call through the DLPack exchange API (dlpack_exchange
# below), or else each property once through the tensor's Python attributes, with
# no interpreter work between the reads. Arguments: (x, topk_ids, topk_weights,
# out, D, k, max_tokens, dev).
_fast_args = _moejit._torch_layer_args


def target_of(device: Union[torch.device, int, None] = None) -> str:
    """The compile target of a CUDA device: 'sm_90a' for compute capability 9.0
    (arch-specific features, what the kernels are written for), 'sm_XY' otherwise."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def _layer(handle: int) -> "MoeLayer":
    layer = _LAYERS.get(handle)
    if layer is None:
        raise InvalidArgument(f"layer: no moejit MoeLayer with handle {handle} (released or never created)")
    return layer


def _check(t: torch.Tensor, name: str, dtype: torch.dtype, shape: Tuple[int, ...], contiguous_rows: bool = True,
           device: Optional[torch.device] = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise InvalidArgument(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        raise InvalidArgument(f"{name}: expected a CUDA tensor, got one on {t.device}")
    if device is not None and t.device != device:
        raise InvalidArgument(f"{name}: on {t.device}, the layer's tensors on {device}")
    if t.dtype != dtype:
        raise InvalidArgument(f"{name}: expected dtype {dtype}, got {t.dtype}")
    if tuple(t.shape) != shape:
        want = "[" + ", ".join("T" if s < 0 else str(s) for s in shape) + "]"
        got = list(t.shape)
        if len(got) != len(shape) or any(s >= 0 and g != s for g, s in zip(got, shape)):
            raise InvalidArgument(f"{name}: expected shape {want}, got {got}")
    if contiguous_rows:
        if t.dim() == 2 and t.shape[1] > 1 and t.stride(1) != 1:
            raise InvalidArgument(f"{name}: rows must be contiguous (stride 1 along dim 1), got strides {t.stride()}")
        if t.dim() == 2 and t.shape[0] > 1 and t.stride(0) < t.shape[1]:
            raise InvalidArgument(f"{name}: rows must not overlap (row stride >= {t.shape[1]}), got strides {t.stride()}")
    elif not t.is_contiguous():
        raise InvalidArgument(f"{name}: expected a contiguous tensor, got strides {t.stride()}")


def fused_topk(router_logits: torch.Tensor, top_k: int, renormalize: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Top-k softmax routing: router_logits [T, E] -> (topk_weights float32 [T, top_k],
    topk_ids int32 [T, top_k]). renormalize=True: softmax over the selected k logits
    (equal to renormalizing the full softmax; gpt-oss, Mixtral, Qwen3); False: the full
    softmax's probabilities of the selected experts."""
    logits = router_logits.float()
    if renormalize:
        vals, ids = torch.topk(logits, top_k, dim=-1)
        weights = torch.softmax(vals, dim=-1)
    else:
        probs = torch.softmax(logits, dim=-1)
        weights, ids = torch.topk(probs, top_k, dim=-1)
    return weights.contiguous(), ids.to(torch.int32).contiguous()


class MoeLayer(torch.nn.Module):
    """One MoE layer on a CUDA device: routed experts only (routing, gate_up
    grouped GEMM, activation, down grouped GEMM with router weights, combine).

    Built from a layer shape, or from a model config with from_config(). Owns
    its workspace (for up to max_num_tokens tokens per call) and the C++ layer.
    Weights: load_weights() (moejit layouts) or load_gpt_oss() (the gpt-oss
    checkpoint's *_blocks / *_scales / *_bias tensors as stored).

        layer = MoeLayer.from_config("gpt-oss-120b", max_num_tokens=4096)
        layer.load_gpt_oss(checkpoint_tensors, prefix="model.layers.0.mlp.experts.")
        layer.prewarm()                          # compile + load every kernel
        out = layer(x, topk_ids, topk_weights)   # torch.ops.moejit.moe_layer
    """

    def __init__(self, shape: MoeLayerShape, quant: str, max_num_tokens: int = 8192,
                 device: Union[torch.device, str, int, None] = None, runtime: Optional[Runtime] = None,
                 weight_scale: Optional[str] = None, target: Optional[str] = None, model_name: str = "") -> None:
        super().__init__()
        dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        if dev.type != "cuda":
            raise InvalidArgument(f"device: expected a CUDA device, got {dev}")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if max_num_tokens < 1:
            raise InvalidArgument(f"max_num_tokens: must be >= 1, got {max_num_tokens}")
        self.device = dev
        self.runtime = runtime if runtime is not None else Runtime.global_runtime()
        self.target = target if target is not None else target_of(dev)
        self.max_num_tokens = int(max_num_tokens)
        self.model_name = model_name
        self.core = _moejit.MoeLayer(self.runtime, shape, quant, weight_scale=weight_scale, target=self.target)
        self.shape = self.core.shape
        self.quant = self.core.quant
        self._hidden, self._top_k, self._device_index = self.shape.hidden, self.shape.top_k, dev.index
        ws_bytes = self.core.workspace_size(self.max_num_tokens)
        # Why allocate with torch: the workspace then lives in the caching
        # allocator's accounting and is a plain buffer under CUDA graphs. Why a
        # plain attribute, not a registered buffer: Module.to() must not move it
        # (its address is recorded below and in captured graphs).
        self.workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=dev)
        self._ws_ptr = self.workspace.data_ptr()
        self._ws_bytes = ws_bytes
        self._call = _moejit.TorchLayerCall(self.core, dev.index, self.max_num_tokens, self._ws_ptr, ws_bytes)
        self._weights: Tuple[Optional[torch.Tensor], ...] = ()
        with _LOCK:
            self.handle = next(_HANDLES)
            _LAYERS[self.handle] = self

    @classmethod
    def from_config(cls, config: Union[str, "os.PathLike[str]", ModelSpec], max_num_tokens: int = 8192,
                    quant: Optional[str] = None, tp: int = 1, ep: int = 1, **kwargs) -> "MoeLayer":
        """From an embedded model name ('gpt-oss-120b'), a Hugging Face config.json
        path (or its directory) or a ModelSpec: the shape on one GPU after tp/ep
        splits, the checkpoint's quant mode unless `quant` is given."""
        if isinstance(config, ModelSpec):
            spec = config
        elif isinstance(config, str) and config in _moejit.embedded_model_names():
            spec = _moejit.embedded_model(config)
        else:
            spec = _moejit.load_hf_config(os.fspath(config))
        plan = _moejit.plan(spec, max_num_tokens=max_num_tokens, quant=quant, tp=tp, ep=ep)
        return cls(plan.layers[0], plan.quant_modes[0], max_num_tokens=max_num_tokens, model_name=spec.name,
                   **kwargs)

    def plan(self) -> Plan:
        """The prewarm plan of this layer: its shape and quant mode, buckets up to max_num_tokens."""
        scales = [self.core.weight_scale] if self.quant == "fp8_per_token" else []
        return Plan([self.shape], [self.quant], max_num_tokens=self.max_num_tokens, model_name=self.model_name,
                    target=self.target, weight_scales=scales)

    def prewarm(self, jobs: int = 0, load_on_gpu: bool = True) -> _moejit.PrewarmReport:
        """Compiles (or loads from the disk cache) every kernel this layer can launch
        for 1..max_num_tokens tokens and, with load_on_gpu, loads them on this device:
        after it, calls neither compile nor load (CUDA-graph capture safe). Raises
        moejit.Error naming the first failure when a kernel cannot be compiled or loaded."""
        with torch.cuda.device(self.device):
            if load_on_gpu:
                torch.cuda.init()
                torch.zeros(1, device=self.device)  # the device's primary context, current
            report = self.runtime.prewarm(self.plan(), jobs=jobs, load_on_gpu=load_on_gpu)
        if report.failed or report.load_failed:
            first = report.failures[0] if report.failures else None
            detail = f": {first.kind} {first.key_text}: {first.message}" if first else ""
            raise Error(f"MoeLayer.prewarm: {report.failed} kernels failed, {report.load_failed} loads failed{detail}")
        return report

    def load_weights(self, w1: torch.Tensor, w1_scales: Optional[torch.Tensor], b1: Optional[torch.Tensor],
                     w2: torch.Tensor, w2_scales: Optional[torch.Tensor], b2: Optional[torch.Tensor]) -> None:
        """Expert weights in moejit's layouts (see moejit.MoeLayer.set_weights), on this
        layer's device, contiguous. The layer keeps references to them."""
        for name, t in (("w1", w1), ("w1_scales", w1_scales), ("b1", b1), ("w2", w2), ("w2_scales", w2_scales),
                        ("b2", b2)):
            if t is not None and t.device != self.device:
                raise InvalidArgument(f"{name}: on {t.device}, the layer on {self.device}")
        self.core.set_weights(w1, w1_scales, b1, w2, w2_scales, b2)
        self._weights = (w1, w1_scales, b1, w2, w2_scales, b2)

    def load_gpt_oss(self, tensors: Mapping[str, torch.Tensor], prefix: str = "") -> None:
        """The gpt-oss checkpoint's expert tensors as stored (safetensors names after `prefix`):
        gate_up_proj_blocks uint8 [E, 2I, D/32, 16], gate_up_proj_scales uint8 [E, 2I, D/32],
        gate_up_proj_bias bfloat16 [E, 2I], down_proj_blocks uint8 [E, D, I/32, 16],
        down_proj_scales uint8 [E, D, I/32], down_proj_bias bfloat16 [E, D].
        Copied to this layer's device when elsewhere."""
        if self.quant != "w4a16_mxfp4":
            raise InvalidArgument(f"load_gpt_oss: the layer's quant is {self.quant}, the checkpoint is w4a16_mxfp4")

        def get(name: str) -> torch.Tensor:
            key = prefix + name
            if key not in tensors:
                raise InvalidArgument(f"load_gpt_oss: tensor {key!r} missing")
            return tensors[key].to(self.device).contiguous()

        self.load_weights(get("gate_up_proj_blocks"), get("gate_up_proj_scales"), get("gate_up_proj_bias"),
                          get("down_proj_blocks"), get("down_proj_scales"), get("down_proj_bias"))

    def workspace_size(self, num_tokens: int) -> int:
        return self.core.workspace_size(num_tokens)

    def _check_inputs(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> int:
        D, k = self.shape.hidden, self.shape.top_k
        if x.dim() != 2:
            raise InvalidArgument(f"x: expected shape [T, {D}], got {list(x.shape)}")
        T = x.shape[0]
        _check(x, "x", torch.bfloat16, (T, D), device=self.device)
        _check(topk_ids, "topk_ids", torch.int32, (T, k), contiguous_rows=False, device=self.device)
        _check(topk_weights, "topk_weights", torch.float32, (T, k), contiguous_rows=False, device=self.device)
        if T > self.max_num_tokens:
            raise InvalidArgument(f"x: {T} tokens exceed the layer's max_num_tokens={self.max_num_tokens}")
        return T

    def run(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
            out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The layer without the torch dispatcher (least host time; not traceable by
        torch.compile: use forward() there). out bfloat16 [T, D] is written when given."""
        if out is None:
            try:
                n = x.shape[0]
            except (AttributeError, TypeError, IndexError):  # not a tensor: the checks below name it
                n = 0
            if 0 < n <= self.max_num_tokens:  # anything else is refused below, before any allocation
                out = torch.empty((n, self._hidden), dtype=_BF16, device=self.device)
        if out is not None and self._call(x, topk_ids, topk_weights, out, _stream_of(self._device_index)):
            return out
        # The checks that name the argument and the value; they raise on a mismatch.
        T = self._check_inputs(x, topk_ids, topk_weights)
        if out is None:
            out = torch.empty((T, self._hidden), dtype=_BF16, device=self.device)
        _check(out, "out", torch.bfloat16, (T, self._hidden), device=self.device)
        D = self._hidden  # a one-token batch's row stride means nothing: pass D
        self.core.run_ptr(T, x.data_ptr(), x.stride(0) if T > 1 else D, topk_ids.data_ptr(), topk_weights.data_ptr(),
                          out.data_ptr(), out.stride(0) if T > 1 else D, self._ws_ptr, self._ws_bytes,
                          _stream_of(self._device_index))
        return out

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        """out bfloat16 [T, D] = the layer over x bfloat16 [T, D], topk_ids int32 [T, top_k],
        topk_weights float32 [T, top_k]. Under torch.compile the custom op moejit::moe_layer
        (traced through its fake implementation); in eager mode the same call without the
        dispatcher's host time (run()). Both can be captured in a CUDA graph."""
        if _is_compiling():
            return torch.ops.moejit.moe_layer(x, topk_ids, topk_weights, self.handle)
        return self.run(x, topk_ids, topk_weights)

    def route(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor
              ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The layer's routing alone: (expert_offsets int32 [E + 1], sorted_route int32
        [T * top_k]): rows of expert e are [expert_offsets[e], expert_offsets[e + 1]),
        sorted_route[r] = t * top_k + j (within an expert the order is unspecified).
        What moe_wgrad takes. Copies out of the layer's workspace."""
        T = self._check_inputs(x, topk_ids, topk_weights)
        stream = current_stream(self.device)
        self.core.run_step("route", T, x.data_ptr(), x.stride(0), topk_ids.data_ptr(), topk_weights.data_ptr(),
                           x.data_ptr(), x.stride(0), self._ws_ptr, self._ws_bytes, stream)
        v = self.core.workspace_view(T, self._ws_ptr, self._ws_bytes)
        E, rows = self.shape.experts, T * self.shape.top_k

        def int32_view(addr: int, n: int) -> torch.Tensor:
            off = addr - self._ws_ptr
            return self.workspace[off:off + 4 * n].view(torch.int32).clone()

        return int32_view(v["expert_offsets"], E + 1), int32_view(v["sorted_route"], rows)

    def release(self) -> None:
        """Forgets the handle (ops naming it then raise) and drops the weights' references."""
        with _LOCK:
            _LAYERS.pop(self.handle, None)
        self._weights = ()

    def extra_repr(self) -> str:
        return f"{self.shape}, quant={self.quant}, max_num_tokens={self.max_num_tokens}, device={self.device}"


# ---- custom ops --------------------------------------------------------------

_lib = torch.library.Library("moejit", "DEF")
_lib.define("moe_layer(Tensor x, Tensor topk_ids, Tensor topk_weights, int layer) -> Tensor")
for _step in ("moe_route", "grouped_gemm_gate_up", "grouped_gemm_down"):
    _lib.define(f"{_step}(Tensor x, Tensor topk_ids, Tensor topk_weights, Tensor(a!) workspace, int layer) -> ()")
_lib.define("moe_combine(Tensor x, Tensor topk_ids, Tensor topk_weights, Tensor workspace, int layer) -> Tensor")
_lib.define("quantize_mxfp4(Tensor w) -> (Tensor, Tensor)")
_lib.define("moe_wgrad(Tensor grad, Tensor x, Tensor expert_offsets, Tensor sorted_route, int top_k, bool by_token)"
            " -> (Tensor, Tensor)")
_lib.define("quantize_fp8(Tensor x, str mode) -> (Tensor, Tensor)")
_lib.define("grouped_gemm(Tensor a, Tensor expert_offsets, Tensor w, Tensor? w_scales=None, Tensor? bias=None, "
            "Tensor? a_scales=None, str quant='bf16', str? weight_scale=None) -> Tensor")


def _moe_layer_cuda(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, layer: int) -> torch.Tensor:
    return _layer(layer).run(x, topk_ids, topk_weights)


def _moe_layer_fake(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, layer: int) -> torch.Tensor:
    return x.new_empty((x.shape[0], x.shape[1]), dtype=torch.bfloat16)


def _step_cuda(step: str):
    def impl(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, workspace: torch.Tensor,
             layer: int) -> None:
        m = _layer(layer)
        T = m._check_inputs(x, topk_ids, topk_weights)
        _check(workspace, "workspace", torch.uint8, (workspace.numel(),), contiguous_rows=False, device=m.device)
        # The steps before the combine write no output: out points at x (checked, never written).
        m.core.run_step(step, T, x.data_ptr(), x.stride(0), topk_ids.data_ptr(), topk_weights.data_ptr(),
                        x.data_ptr(), x.stride(0), workspace.data_ptr(), workspace.numel(), current_stream(m.device))

    return impl


def _combine_cuda(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, workspace: torch.Tensor,
                  layer: int) -> torch.Tensor:
    m = _layer(layer)
    T = m._check_inputs(x, topk_ids, topk_weights)
    _check(workspace, "workspace", torch.uint8, (workspace.numel(),), contiguous_rows=False, device=m.device)
    out = torch.empty((T, m.shape.hidden), dtype=torch.bfloat16, device=m.device)
    m.core.run_step("combine", T, x.data_ptr(), x.stride(0), topk_ids.data_ptr(), topk_weights.data_ptr(),
                    out.data_ptr(), out.stride(0), workspace.data_ptr(), workspace.numel(), current_stream(m.device))
    return out


def _quantize_mxfp4_cuda(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    if w.shape[-1] % 32 != 0:
        raise InvalidArgument(f"w: the last dimension must be a multiple of 32, got {list(w.shape)}")
    w = w.contiguous()
    data = torch.empty((*w.shape[:-1], w.shape[-1] // 2), dtype=torch.uint8, device=w.device)
    scales = torch.empty((*w.shape[:-1], w.shape[-1] // 32), dtype=torch.uint8, device=w.device)
    if w.dtype not in (torch.float32, torch.bfloat16):
        raise InvalidArgument(f"w: expected dtype torch.float32 or torch.bfloat16, got {w.dtype}")
    if w.numel():
        _moejit.quantize_mxfp4_gpu_ptr(Runtime.global_runtime(), w.data_ptr(),
                                       "f32" if w.dtype == torch.float32 else "bf16", w.numel() // w.shape[-1],
                                       w.shape[-1], data.data_ptr(), scales.data_ptr(), current_stream(w.device),
                                       target=target_of(w.device))
    return data, scales


def _quantize_mxfp4_cpu(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    data, scales = _moejit.quantize_mxfp4(w.contiguous())
    return torch.from_numpy(data), torch.from_numpy(scales)


def _quantize_mxfp4_fake(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return (w.new_empty((*w.shape[:-1], w.shape[-1] // 2), dtype=torch.uint8),
            w.new_empty((*w.shape[:-1], w.shape[-1] // 32), dtype=torch.uint8))


def _fp8_scales_shape(x: torch.Tensor, mode: str) -> Tuple[Tuple[int, ...], torch.dtype]:
    if mode == "mxfp8":
        return (x.shape[0], x.shape[1] // 32), torch.uint8
    if mode == "fp8_per_token":
        return (x.shape[0],), torch.float32
    raise InvalidArgument(f"mode: expected 'mxfp8' or 'fp8_per_token', got {mode!r}")


def _quantize_fp8_cuda(x: torch.Tensor, mode: str) -> Tuple[torch.Tensor, torch.Tensor]:
    shape, dtype = _fp8_scales_shape(x, mode)
    # Why uint8 across DLPack: not every torch exports float8 dtypes through DLPack.
    codes = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    scales = torch.empty(shape, dtype=dtype, device=x.device)
    if x.dim() != 2 or x.dtype != torch.bfloat16:
        raise InvalidArgument(f"x: expected a bfloat16 [rows, K] tensor, got {x.dtype} {list(x.shape)}")
    if x.shape[1] > 1 and x.stride(1) != 1:
        raise InvalidArgument(f"x: rows must be contiguous, got strides {x.stride()}")
    if x.numel():
        _moejit.quantize_fp8_gpu_ptr(Runtime.global_runtime(), mode, x.data_ptr(), x.stride(0), x.shape[0],
                                     x.shape[1], codes.data_ptr(), scales.data_ptr(), current_stream(x.device),
                                     target=target_of(x.device))
    return codes.view(torch.float8_e4m3fn), scales


def _quantize_fp8_fake(x: torch.Tensor, mode: str) -> Tuple[torch.Tensor, torch.Tensor]:
    shape, dtype = _fp8_scales_shape(x, mode)
    return x.new_empty(x.shape, dtype=torch.float8_e4m3fn), x.new_empty(shape, dtype=dtype)


_WGRAD: dict[tuple, _moejit.MoeWgrad] = {}


def _wgrad_shapes(grad: torch.Tensor, x: torch.Tensor, expert_offsets: torch.Tensor) -> Tuple[int, int, int]:
    if grad.dim() != 2 or x.dim() != 2 or expert_offsets.dim() != 1:
        raise InvalidArgument(f"moe_wgrad: expected grad [rows, N], x [T or rows, K], expert_offsets [E + 1], got "
                              f"{list(grad.shape)}, {list(x.shape)}, {list(expert_offsets.shape)}")
    return expert_offsets.shape[0] - 1, grad.shape[1], x.shape[1]


def _moe_wgrad_cuda(grad: torch.Tensor, x: torch.Tensor, expert_offsets: torch.Tensor, sorted_route: torch.Tensor,
                    top_k: int, by_token: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    E, N, K = _wgrad_shapes(grad, x, expert_offsets)
    rows = grad.shape[0]
    _check(grad, "grad", torch.bfloat16, (rows, N))
    _check(x, "x", torch.bfloat16, (x.shape[0], K), device=grad.device)
    _check(expert_offsets, "expert_offsets", torch.int32, (E + 1,), contiguous_rows=False, device=grad.device)
    if by_token:
        _check(sorted_route, "sorted_route", torch.int32, (rows,), contiguous_rows=False, device=grad.device)
    T = x.shape[0] if by_token else -(-rows // max(top_k, 1))
    key = (E, top_k, N, K, grad.device.index)
    w = _WGRAD.get(key)
    if w is None:
        w = _WGRAD.setdefault(key, _moejit.MoeWgrad(Runtime.global_runtime(), E, top_k, N, K,
                                                     target=target_of(grad.device)))
    dw = torch.empty((E, N, K), dtype=torch.float32, device=grad.device)
    db = torch.empty((E, N), dtype=torch.float32, device=grad.device)
    w.run_ptr(T, grad.data_ptr(), grad.stride(0), x.data_ptr(), x.stride(0), "by_token" if by_token else "by_row",
              expert_offsets.data_ptr(), sorted_route.data_ptr() if by_token else 0, dw.data_ptr(), db.data_ptr(),
              current_stream(grad.device))
    return dw, db


def _moe_wgrad_fake(grad, x, expert_offsets, sorted_route, top_k, by_token):
    E, N, K = _wgrad_shapes(grad, x, expert_offsets)
    return grad.new_empty((E, N, K), dtype=torch.float32), grad.new_empty((E, N), dtype=torch.float32)


_GROUPED: dict[tuple, _moejit.GroupedGemm] = {}
_FP8_MODES = ("mxfp8", "fp8_per_token")


def _grouped_dims(a: torch.Tensor, expert_offsets: torch.Tensor, w: torch.Tensor) -> Tuple[int, int, int, int]:
    if a.dim() != 2 or expert_offsets.dim() != 1 or w.dim() not in (3, 4) or expert_offsets.shape[0] < 2:
        raise InvalidArgument(f"grouped_gemm: expected a [M, K], expert_offsets [E + 1] (E >= 1), w [E, N, ...], got "
                              f"{list(a.shape)}, {list(expert_offsets.shape)}, {list(w.shape)}")
    return a.shape[0], a.shape[1], w.shape[1], expert_offsets.shape[0] - 1


def _grouped_gemm_cuda(a: torch.Tensor, expert_offsets: torch.Tensor, w: torch.Tensor,
                       w_scales: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                       a_scales: Optional[torch.Tensor] = None, quant: str = "bf16",
                       weight_scale: Optional[str] = None) -> torch.Tensor:
    # The defaults are the schema's: the dispatcher leaves out trailing arguments equal to them.
    M, K, N, E = _grouped_dims(a, expert_offsets, w)
    dev = a.device
    fp8 = quant in _FP8_MODES
    if quant not in ("bf16", "w4a16_mxfp4") + _FP8_MODES:
        raise InvalidArgument(f"quant: expected 'bf16', 'w4a16_mxfp4', 'mxfp8' or 'fp8_per_token', got {quant!r}")
    _check(a, "a", torch.float8_e4m3fn if fp8 else _BF16, (M, K))
    _check(expert_offsets, "expert_offsets", _I32, (E + 1,), contiguous_rows=False, device=dev)
    if quant == "w4a16_mxfp4" and w.dim() == 4:  # gpt-oss *_blocks [E, N, K/32, 16]
        _check(w, "w", torch.uint8, (E, N, K // 32, 16), contiguous_rows=False, device=dev)
        w = w.view(E, N, K // 2)
    wdtype = {"bf16": _BF16, "w4a16_mxfp4": torch.uint8}.get(quant, torch.float8_e4m3fn)
    _check(w, "w", wdtype, (E, N, K // 2 if quant == "w4a16_mxfp4" else K), contiguous_rows=False, device=dev)
    if quant in ("w4a16_mxfp4", "mxfp8"):
        if w_scales is None:
            raise InvalidArgument(f"w_scales: {quant} needs the E8M0 weight scales uint8 [E, N, K/32], got None")
        _check(w_scales, "w_scales", torch.uint8, (E, N, K // 32), contiguous_rows=False, device=dev)
    elif quant == "fp8_per_token":
        if w_scales is None:
            raise InvalidArgument("w_scales: fp8_per_token needs float32 [E] or [E, N] weight scales, got None")
        if weight_scale is None:
            weight_scale = "per_channel" if w_scales.dim() == 2 else "per_expert"
        if weight_scale not in ("per_expert", "per_channel"):
            raise InvalidArgument(f"weight_scale: fp8_per_token takes 'per_expert' or 'per_channel', got {weight_scale!r}")
        _check(w_scales, "w_scales", _F32, (E, N) if weight_scale == "per_channel" else (E,), contiguous_rows=False,
               device=dev)
    if fp8:
        if a_scales is None:
            raise InvalidArgument(f"a_scales: {quant} needs the activation scales (moejit::quantize_fp8), got None")
        if quant == "mxfp8":
            _check(a_scales, "a_scales", torch.uint8, (M, K // 32), contiguous_rows=False, device=dev)
        else:
            _check(a_scales, "a_scales", _F32, (M,), contiguous_rows=False, device=dev)
    bias_kind = "none"
    if bias is not None:
        bias_kind = {_BF16: "bf16", _F32: "f32"}.get(bias.dtype, "")
        if not bias_kind:
            raise InvalidArgument(f"bias: expected dtype bfloat16 or float32, got {bias.dtype}")
        _check(bias, "bias", bias.dtype, (E, N), contiguous_rows=False, device=dev)
    key = (N, K, E, quant, bias_kind, weight_scale, dev.index)
    op = _GROUPED.get(key)
    if op is None:
        op = _GROUPED.setdefault(key, _moejit.GroupedGemm(Runtime.global_runtime(), N, K, E, quant, bias_kind,
                                                          weight_scale, target=target_of(dev)))
    out = torch.empty((M, N), dtype=_BF16, device=dev)
    if M == 0:
        return out
    ws = torch.empty((op.workspace_size_for(M),), dtype=torch.uint8, device=dev)
    a_stride = a.stride(0) if M > 1 else K  # one row: its stride is not a row pitch
    op.run_ptr(M, a.data_ptr(), a_stride, a_scales.data_ptr() if fp8 else 0, expert_offsets.data_ptr(),
               w.data_ptr(), w_scales.data_ptr() if w_scales is not None else 0,
               bias.data_ptr() if bias is not None else 0, out.data_ptr(), out.stride(0), ws.data_ptr(), ws.numel(),
               current_stream(dev))
    return out


def _grouped_gemm_fake(a, expert_offsets, w, w_scales=None, bias=None, a_scales=None, quant="bf16",
                       weight_scale=None):
    M, K, N, E = _grouped_dims(a, expert_offsets, w)
    return a.new_empty((M, N), dtype=torch.bfloat16)


_lib.impl("moe_layer", _moe_layer_cuda, "CUDA")
_lib.impl("grouped_gemm", _grouped_gemm_cuda, "CUDA")
_lib.impl("moe_wgrad", _moe_wgrad_cuda, "CUDA")
for _step in ("moe_route", "grouped_gemm_gate_up", "grouped_gemm_down"):
    _lib.impl(_step, _step_cuda({"moe_route": "route", "grouped_gemm_gate_up": "gate_up",
                                 "grouped_gemm_down": "down"}[_step]), "CUDA")
_lib.impl("moe_combine", _combine_cuda, "CUDA")
_lib.impl("quantize_mxfp4", _quantize_mxfp4_cuda, "CUDA")
_lib.impl("quantize_mxfp4", _quantize_mxfp4_cpu, "CPU")
_lib.impl("quantize_fp8", _quantize_fp8_cuda, "CUDA")

torch.library.register_fake("moejit::moe_layer")(_moe_layer_fake)
for _step in ("moe_route", "grouped_gemm_gate_up", "grouped_gemm_down"):
    torch.library.register_fake(f"moejit::{_step}")(lambda x, topk_ids, topk_weights, workspace, layer: None)
torch.library.register_fake("moejit::moe_combine")(
    lambda x, topk_ids, topk_weights, workspace, layer: x.new_empty(x.shape, dtype=torch.bfloat16))
torch.library.register_fake("moejit::quantize_mxfp4")(_quantize_mxfp4_fake)
torch.library.register_fake("moejit::quantize_fp8")(_quantize_fp8_fake)
torch.library.register_fake("moejit::moe_wgrad")(_moe_wgrad_fake)
torch.library.register_fake("moejit::grouped_gemm")(_grouped_gemm_fake)
