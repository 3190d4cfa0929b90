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

inline std::string i(const char* name, int v) { return std::string(".") + name + " = " + std::to_string(v); }
inline std::string b(const char* name, bool v) { return std::string(".") + name + " = " + (v ? "true" : "false"); }

// Each printer binds every field of its struct in declaration order
// (structured bindings): a field added to a struct stops the host build here
// until its printer names it.
inline std::string text(const GemmEpilogue& e) {
  const auto& [act, bias, gather, router_weight, out_f32] = e;
  return "{" + i("act", act) + ", " + i("bias", bias) + ", " + b("gather", gather) + ", " +
         b("router_weight", router_weight) + ", " + b("out_f32", out_f32) + "}";
}
inline std::string text(const Mxfp4DecodeKernel& c) {
  const auto& [wn, kw, mw, nt, depth, ctas, xs, fr, epilogue] = c;
  return "moejit::Mxfp4DecodeKernel{" + i("wn", wn) + ", " + i("kw", kw) + ", " + i("mw", mw) + ", " + i("nt", nt) +
         ", " + i("depth", depth) + ", " + i("ctas", ctas) + ", " + i("xs", xs) + ", " + b("fr", fr) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Mxfp4WsKernel& c) {
  const auto& [bm, cwg, stages, k_tail, k_order_in, k_order_out, epilogue] = c;
  return "moejit::Mxfp4WsKernel{" + i("bm", bm) + ", " + i("cwg", cwg) + ", " + i("stages", stages) + ", " +
         b("k_tail", k_tail) + ", " + b("k_order_in", k_order_in) + ", " + b("k_order_out", k_order_out) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Mxfp4WgmmaKernel& c) {
  const auto& [wg, stages, overlap, k_tail, epilogue] = c;
  return "moejit::Mxfp4WgmmaKernel{" + i("wg", wg) + ", " + i("stages", stages) + ", " + b("overlap", overlap) + ", " +
         b("k_tail", k_tail) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Mxfp4WgmmaWaKernel& c) {
  const auto& [th, stages, k_tail, epilogue] = c;
  return "moejit::Mxfp4WgmmaWaKernel{" + i("th", th) + ", " + i("stages", stages) + ", " + b("k_tail", k_tail) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const MmaGemmKernel& c) {
  const auto& [warps_m, warps_n, mi, ni, stages, quant, k_tail, epilogue] = c;
  return "moejit::MmaGemmKernel{" + i("warps_m", warps_m) + ", " + i("warps_n", warps_n) + ", " + i("mi", mi) + ", " +
         i("ni", ni) + ", " + i("stages", stages) + ", " + i("quant", quant) + ", " + b("k_tail", k_tail) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const TmaWsKernel& c) {
  const auto& [elem, scale, bn, stages, promote_slices, k_tail, epilogue] = c;
  return "moejit::TmaWsKernel{" + i("elem", elem) + ", " + i("scale", scale) + ", " + i("bn", bn) + ", " +
         i("stages", stages) + ", " + i("promote_slices", promote_slices) + ", " + b("k_tail", k_tail) +
         ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Fp8DecodeKernel& c) {
  const auto& [wn, kw, depth, ctas, wscale, epilogue] = c;
  return "moejit::Fp8DecodeKernel{" + i("wn", wn) + ", " + i("kw", kw) + ", " + i("depth", depth) + ", " +
         i("ctas", ctas) + ", " + i("wscale", wscale) + ", .epilogue = " + text(epilogue) + "}";
}
inline std::string text(const Fp8MmaKernel& c) {
  const auto& [warps_m, warps_n, mi, ni, stages, quant, wscale, k_tail, epilogue] = c;
  return "moejit::Fp8MmaKernel{" + i("warps_m", warps_m) + ", " + i("warps_n", warps_n) + ", " + i("mi", mi) + ", " +
         i("ni", ni) + ", " + i("stages", stages) + ", " + i("quant", quant) + ", " + i("wscale", wscale) + ", " +
         b("k_tail", k_tail) + ", .epilogue = " + text(epilogue) + "}";
}

inline std::string text(const WgradKernel& c) {
  const auto& [bn, stages, cluster, out_bf16] = c;
  return "moejit::WgradKernel{" + i("bn", bn) + ", " + i("stages", stages) + ", " + i("cluster", cluster) + ", " +
         b("out_bf16", out_bf16) + "}";
}
inline std::string text(const CombineKernel& c) {
  const auto& [threads, cols, in_flight, y_bf16] = c;
  return "moejit::CombineKernel{" + i("threads", threads) + ", " + i("cols", cols) + ", " + i("in_flight", in_flight) +
         ", " + b("y_bf16", y_bf16) + "}";
}
inline std::string text(const RouteKernel& c) {
  const auto& [threads, staged] = c;
  return "moejit::RouteKernel{" + i("threads", threads) + ", " + b("staged", staged) + "}";
}

}  // namespace moejit::kernel_config_text

namespace moejit::ops {

// The epilogue fields of a grouped GEMM key: activation and bias codes,
// gather (gate_up), router weight, f32 output.
inline GemmEpilogue gemm_epilogue(const SpecKey& key) {
  GemmEpilogue e{};
  e.act = key.act == Activation::silu_gated ? 1 : key.act == Activation::swiglu_oai ? 2 : 0;
  e.bias = key.bias == BiasKind::f32 ? 1 : key.bias == BiasKind::bf16 ? 2 : 0;
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
