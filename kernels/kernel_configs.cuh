// The template argument of the grouped GEMM, warp-specialized weight-gradient,
// routing and combine kernels: one struct per kernel,
// passed as a C++20 class-type template parameter and named field by field in
// the instantiation the host generates (designated initializers), e.g.
//   moejit::grouped_gemm_mxfp4_ws_kernel<moejit::Mxfp4WsKernel{.bm = 192, .cwg = 2, ...}>
// One definition, compiled by NVRTC into those kernels' translation units
// (after kernel_params.cuh) and by the host (src/ops/kernel_configs.hpp,
// which prints them). What is checked: adding or removing a field breaks the
// host build (the printers bind every field); a field the printer names
// wrongly or out of order is rejected by NVRTC when the kernel compiles (the
// CPU kernel-source tests compile every variant); the printed names and
// values are pinned by tests/cpu/test_kernel_configs.cpp.
// The tunable fields are documented where the kernels read them (the
// "Tunable parameters" block of each kernel file); the codes, in the comments
// below, are the kernels' enums (grouped_gemm_params.cuh: kAct*, kBias*,
// kQuant*; grouped_gemm_tma_ws_sm90.cuh: kTmaWs*; grouped_gemm_fp8_sm90.cuh:
// f8::kWs*, its own kAct* and kBias* of the same values).
// Plain C++ only: built-in types, no includes, nothing device-specific.

namespace moejit {

// The rows a grouped GEMM reads and what its epilogue does with its outputs.
struct GemmEpilogue {
  int act;             // kActNone 0, kActSiluGated 1, kActSwigluOai 2 (gated activations: gate_up)
  int bias;            // kBiasNone 0, kBiasF32 1, kBiasBf16 2
  bool gather;         // A rows gathered by token (gate_up: sorted_route / top_k), else routed rows
  bool router_weight;  // outputs times their route's router weight (down)
  bool out_f32;        // f32 output (split-K partials, or a caller's f32 Y), else bf16
};

// grouped_gemm_mxfp4_decode_sm90.cuh
struct Mxfp4DecodeKernel {
  int wn, kw, mw, nt, depth, ctas, xs;
  bool fr;
  GemmEpilogue epilogue;
};

// grouped_gemm_mxfp4_ws_sm90.cuh
struct Mxfp4WsKernel {
  int bm, cwg, stages;
  bool k_tail, k_order_in, k_order_out;
  GemmEpilogue epilogue;
};

// grouped_gemm_mxfp4_wgmma_sm90.cuh (the dequantized shared-memory tile)
struct Mxfp4WgmmaKernel {
  int wg, stages;
  bool overlap, k_tail;
  GemmEpilogue epilogue;
};

// grouped_gemm_mxfp4_wgmma_wa_sm90.cuh (weights as A); th: 64-row halves of the
// routed-row tile, 1 or 2 (GemmConfig::wg with wa)
struct Mxfp4WgmmaWaKernel {
  int th, stages;
  bool k_tail;
  GemmEpilogue epilogue;
};

// grouped_gemm_sm90.cuh (mma.sync, activations as A); quant: 0 bf16 weights, 1 MXFP4
struct MmaGemmKernel {
  int warps_m, warps_n, mi, ni, stages, quant;
  bool k_tail;
  GemmEpilogue epilogue;
};

// grouped_gemm_tma_ws_sm90.cuh; elem: kTmaWsBf16 / kTmaWsE4m3, scale: kTmaWsScale*
struct TmaWsKernel {
  int elem, scale, bn, stages, promote_slices;
  bool k_tail;
  GemmEpilogue epilogue;
};

// grouped_gemm_fp8_decode_sm90.cuh; wscale: 0 per expert, 1 per channel
struct Fp8DecodeKernel {
  int wn, kw, depth, ctas, wscale;
  GemmEpilogue epilogue;
};

// grouped_gemm_fp8_sm90.cuh (mma.sync); quant: 0 FP8 per token, 1 MXFP8; wscale: f8::kWs*
struct Fp8MmaKernel {
  int warps_m, warps_n, mi, ni, stages, quant, wscale;
  bool k_tail;
  GemmEpilogue epilogue;
};

// moe_wgrad_sm90.cuh (warp-specialized weight gradient): bn output channels,
// stages, cluster CTAs sharing the grad tiles, bf16 dW (else f32)
struct WgradKernel {
  int bn, stages, cluster;
  bool out_bf16;
};

// moe_combine.cuh: threads per CTA, Y columns per thread, Y rows loaded
// before summing (window), bf16 Y (else f32 partials)
struct CombineKernel {
  int threads, cols, in_flight;
  bool y_bf16;
};

// moe_routing.cuh: threads per CTA, routes staged in shared memory
struct RouteKernel {
  int threads;
  bool staged;
};

}  // namespace moejit
