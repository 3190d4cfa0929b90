#pragma once
// The kernels' template arguments (kernels/kernel_configs.cuh,
// one definition for NVRTC and the host): their text in a name expression,
// every field by name (designated initializers, in declaration order), and
// what the generators fill them from.
#include <string>

#include "../../kernels/kernel_configs.cuh"
#include "moejit/key.hpp"

// The text of each config struct: "moejit::<Struct>{.field = value, ...}".
namespace moejit::kernel_config_text {

inline std::string int_field(const char* name, int v) { return std::string(".") + name + " = " + std::to_string(v); }
inline std::string bool_field(const char* name, bool v) {
  return std::string(".") + name + " = " + (v ? "true" : "false");
}

// Each printer binds every field of its struct in declaration order
// (structured bindings): a field added to a struct stops the host build here
// until its printer names it.
inline std::string text(const GemmEpilogue& e) {
  const auto& [act, bias, gather, router_weight, out_f32] = e;
  return "{" + int_field("act", act) + ", " + int_field("bias", bias) + ", " + bool_field("gather", gather) + ", " +
         bool_field("router_weight", router_weight) + ", " + bool_field("out_f32", out_f32) + "}";
}
inline std::string text(const Mxfp4DecodeKernel& c) {
  const auto& [wn, kw, mw, nt, depth, ctas, xs, fr, epilogue] = c;
  return "moejit::Mxfp4DecodeKernel{" + int_field("wn", wn) + ", " + int_field("kw", kw) + ", " + int_field("mw", mw) +
         ", " + int_field("nt", nt) + ", " + int_field("depth", depth) + ", " + int_field("ctas", ctas) + ", " +
         int_field("xs", xs) + ", " + bool_field("fr", fr) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Mxfp4WsKernel& c) {
  const auto& [bm, cwg, stages, k_tail, k_order_in, k_order_out, epilogue] = c;
  return "moejit::Mxfp4WsKernel{" + int_field("bm", bm) + ", " + int_field("cwg", cwg) + ", " +
         int_field("stages", stages) + ", " + bool_field("k_tail", k_tail) + ", " +
         bool_field("k_order_in", k_order_in) + ", " + bool_field("k_order_out", k_order_out) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Mxfp4WgmmaKernel& c) {
  const auto& [wg, stages, overlap, k_tail, epilogue] = c;
  return "moejit::Mxfp4WgmmaKernel{" + int_field("wg", wg) + ", " + int_field("stages", stages) + ", " +
         bool_field("overlap", overlap) + ", " + bool_field("k_tail", k_tail) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Mxfp4WgmmaWaKernel& c) {
  const auto& [th, stages, k_tail, epilogue] = c;
  return "moejit::Mxfp4WgmmaWaKernel{" + int_field("th", th) + ", " + int_field("stages", stages) + ", " +
         bool_field("k_tail", k_tail) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const MmaGemmKernel& c) {
  const auto& [warps_m, warps_n, mi, ni, stages, quant, k_tail, epilogue] = c;
  return "moejit::MmaGemmKernel{" + int_field("warps_m", warps_m) + ", " + int_field("warps_n", warps_n) + ", " +
         int_field("mi", mi) + ", " + int_field("ni", ni) + ", " + int_field("stages", stages) + ", " +
         int_field("quant", quant) + ", " + bool_field("k_tail", k_tail) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const TmaWsKernel& c) {
  const auto& [elem, scale, bn, stages, promote_slices, k_tail, epilogue] = c;
  return "moejit::TmaWsKernel{" + int_field("elem", elem) + ", " + int_field("scale", scale) + ", " +
         int_field("bn", bn) + ", " + int_field("stages", stages) + ", " + int_field("promote_slices", promote_slices) +
         ", " + bool_field("k_tail", k_tail) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Fp8DecodeKernel& c) {
  const auto& [wn, kw, depth, ctas, wscale, epilogue] = c;
  return "moejit::Fp8DecodeKernel{" + int_field("wn", wn) + ", " + int_field("kw", kw) + ", " +
         int_field("depth", depth) + ", " + int_field("ctas", ctas) + ", " + int_field("wscale", wscale) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Fp8MmaKernel& c) {
  const auto& [warps_m, warps_n, mi, ni, stages, quant, wscale, k_tail, epilogue] = c;
  return "moejit::Fp8MmaKernel{" + int_field("warps_m", warps_m) + ", " + int_field("warps_n", warps_n) + ", " +
         int_field("mi", mi) + ", " + int_field("ni", ni) + ", " + int_field("stages", stages) + ", " +
         int_field("quant", quant) + ", " + int_field("wscale", wscale) + ", " + bool_field("k_tail", k_tail) +
         ", .epilogue = " + text(epilogue) + "}";
}

inline std::string text(const WgradKernel& c) {
  const auto& [bn, stages, cluster, out_bf16] = c;
  return "moejit::WgradKernel{" + int_field("bn", bn) + ", " + int_field("stages", stages) + ", " +
         int_field("cluster", cluster) + ", " + bool_field("out_bf16", out_bf16) + "}";
}
inline std::string text(const CombineKernel& c) {
  const auto& [threads, cols, in_flight, y_bf16] = c;
  return "moejit::CombineKernel{" + int_field("threads", threads) + ", " + int_field("cols", cols) + ", " +
         int_field("in_flight", in_flight) + ", " + bool_field("y_bf16", y_bf16) + "}";
}
inline std::string text(const RouteKernel& c) {
  const auto& [threads, staged] = c;
  return "moejit::RouteKernel{" + int_field("threads", threads) + ", " + bool_field("staged", staged) + "}";
}

}  // namespace moejit::kernel_config_text

namespace moejit::ops {

// The epilogue fields of a grouped GEMM key: activation and bias codes,
// gather (gate_up), router weight, f32 output.
inline GemmEpilogue gemm_epilogue(const SpecKey& key) {
  GemmEpilogue e{};
  switch (key.act) {  // kAct* (grouped_gemm_params.cuh)
    case Activation::none:
      e.act = 0;
      break;
    case Activation::silu_gated:
      e.act = 1;
      break;
    case Activation::swiglu_oai:
      e.act = 2;
      break;
  }
  switch (key.bias) {  // kBias*
    case BiasKind::none:
      e.bias = 0;
      break;
    case BiasKind::f32:
      e.bias = 1;
      break;
    case BiasKind::bf16:
      e.bias = 2;
      break;
  }
  e.gather = key.op == OpKind::gate_up;
  e.router_weight = key.router_weight;
  e.out_f32 = key.out_dtype == DType::f32;
  return e;
}

// "moejit::<kernel><Config{...}>": the name expression of one instantiation.
template <class Config>
std::string instantiation(const char* kernel, const Config& c) {
  return std::string(kernel) + "<" + kernel_config_text::text(c) + ">";
}

}  // namespace moejit::ops
