#pragma once
// The kernels' template arguments (kernels/kernel_configs.cuh,
// one definition for NVRTC and the host): their text in a name expression,
// every field by name (designated initializers, in declaration order), and
// what the generators fill them from.
#include <initializer_list>
#include <string>

#include "../../kernels/kernel_configs.cuh"
#include "moejit/key.hpp"

// The text of each config struct: "moejit::<Struct>{.field = value, ...}".
namespace moejit::kernel_config_text {

inline std::string int_field(const char* name, int v) { return std::string(".") + name + " = " + std::to_string(v); }
inline std::string bool_field(const char* name, bool v) {
  return std::string(".") + name + " = " + (v ? "true" : "false");
}
// "<prefix>{f0, f1, ...}"
inline std::string fields(const char* prefix, std::initializer_list<std::string> f) {
  std::string s = std::string(prefix) + "{";
  for (const std::string& x : f) s += (s.back() == '{' ? "" : ", ") + x;
  return s + "}";
}

// Each printer binds every field of its struct in declaration order
// (structured bindings): a field added to a struct stops the host build here
// until its printer names it.
inline std::string text(const GemmEpilogue& e) {
  const auto& [act, bias, gather, router_weight, out_f32] = e;
  return fields("", {int_field("act", act), int_field("bias", bias), bool_field("gather", gather),
                     bool_field("router_weight", router_weight), bool_field("out_f32", out_f32)});
}
inline std::string text(const Mxfp4DecodeKernel& c) {
  const auto& [wn, kw, mw, nt, depth, ctas, xs, fr, epilogue] = c;
  return fields(
      "moejit::Mxfp4DecodeKernel",
      {int_field("wn", wn), int_field("kw", kw), int_field("mw", mw), int_field("nt", nt), int_field("depth", depth),
       int_field("ctas", ctas), int_field("xs", xs), bool_field("fr", fr), ".epilogue = " + text(epilogue)});
}
inline std::string text(const Mxfp4WsKernel& c) {
  const auto& [bm, cwg, stages, k_tail, k_order_in, k_order_out, epilogue] = c;
  return fields("moejit::Mxfp4WsKernel", {int_field("bm", bm), int_field("cwg", cwg), int_field("stages", stages),
                                          bool_field("k_tail", k_tail), bool_field("k_order_in", k_order_in),
                                          bool_field("k_order_out", k_order_out), ".epilogue = " + text(epilogue)});
}
inline std::string text(const Mxfp4WgmmaKernel& c) {
  const auto& [wg, stages, overlap, k_tail, epilogue] = c;
  return fields("moejit::Mxfp4WgmmaKernel",
                {int_field("wg", wg), int_field("stages", stages), bool_field("overlap", overlap),
                 bool_field("k_tail", k_tail), ".epilogue = " + text(epilogue)});
}
inline std::string text(const Mxfp4WgmmaWaKernel& c) {
  const auto& [th, stages, k_tail, epilogue] = c;
  return fields("moejit::Mxfp4WgmmaWaKernel", {int_field("th", th), int_field("stages", stages),
                                               bool_field("k_tail", k_tail), ".epilogue = " + text(epilogue)});
}
inline std::string text(const MmaGemmKernel& c) {
  const auto& [warps_m, warps_n, mi, ni, stages, quant, k_tail, epilogue] = c;
  return fields("moejit::MmaGemmKernel",
                {int_field("warps_m", warps_m), int_field("warps_n", warps_n), int_field("mi", mi), int_field("ni", ni),
                 int_field("stages", stages), int_field("quant", quant), bool_field("k_tail", k_tail),
                 ".epilogue = " + text(epilogue)});
}
inline std::string text(const TmaWsKernel& c) {
  const auto& [elem, scale, bn, stages, promote_slices, k_tail, epilogue] = c;
  return fields("moejit::TmaWsKernel", {int_field("elem", elem), int_field("scale", scale), int_field("bn", bn),
                                        int_field("stages", stages), int_field("promote_slices", promote_slices),
                                        bool_field("k_tail", k_tail), ".epilogue = " + text(epilogue)});
}
inline std::string text(const Fp8DecodeKernel& c) {
  const auto& [wn, kw, depth, ctas, wscale, epilogue] = c;
  return fields("moejit::Fp8DecodeKernel",
                {int_field("wn", wn), int_field("kw", kw), int_field("depth", depth), int_field("ctas", ctas),
                 int_field("wscale", wscale), ".epilogue = " + text(epilogue)});
}
inline std::string text(const Fp8MmaKernel& c) {
  const auto& [warps_m, warps_n, mi, ni, stages, quant, wscale, k_tail, epilogue] = c;
  return fields("moejit::Fp8MmaKernel",
                {int_field("warps_m", warps_m), int_field("warps_n", warps_n), int_field("mi", mi), int_field("ni", ni),
                 int_field("stages", stages), int_field("quant", quant), int_field("wscale", wscale),
                 bool_field("k_tail", k_tail), ".epilogue = " + text(epilogue)});
}
inline std::string text(const WgradKernel& c) {
  const auto& [bn, stages, cluster, out_bf16] = c;
  return fields("moejit::WgradKernel", {int_field("bn", bn), int_field("stages", stages), int_field("cluster", cluster),
                                        bool_field("out_bf16", out_bf16)});
}
inline std::string text(const CombineKernel& c) {
  const auto& [threads, cols, in_flight, y_bf16] = c;
  return fields("moejit::CombineKernel", {int_field("threads", threads), int_field("cols", cols),
                                          int_field("in_flight", in_flight), bool_field("y_bf16", y_bf16)});
}
inline std::string text(const RouteKernel& c) {
  const auto& [threads, staged] = c;
  return fields("moejit::RouteKernel", {int_field("threads", threads), bool_field("staged", staged)});
}

}  // namespace moejit::kernel_config_text

namespace moejit::ops {

// The kernels' activation and bias codes (kAct*, kBias*: grouped_gemm_params.cuh).
inline int act_code(Activation a) {
  switch (a) {
    case Activation::none: return 0;
    case Activation::silu_gated: return 1;
    case Activation::swiglu_oai: return 2;
  }
  return 0;
}
inline int bias_code(BiasKind b) {
  switch (b) {
    case BiasKind::none: return 0;
    case BiasKind::f32: return 1;
    case BiasKind::bf16: return 2;
  }
  return 0;
}
// The epilogue fields of a grouped GEMM key: activation and bias codes,
// gather (gate_up), router weight, f32 output.
inline GemmEpilogue gemm_epilogue(const SpecKey& key) {
  return GemmEpilogue{.act = act_code(key.act),
                      .bias = bias_code(key.bias),
                      .gather = key.op == OpKind::gate_up,
                      .router_weight = key.router_weight,
                      .out_f32 = key.out_dtype == DType::f32};
}

// "moejit::<kernel><Config{...}>": the name expression of one instantiation.
template <class Config>
std::string instantiation(const char* kernel, const Config& c) {
  return std::string(kernel) + "<" + kernel_config_text::text(c) + ">";
}

}  // namespace moejit::ops
