// op=quantize with quant = mxfp8 / fp8_per_token: the GPU activation quantizers
// (kernels/quantize_fp8.cuh, which reuses mx_scale_byte of quantize_mxfp4.cuh).
#include <string>

#include "../../kernels/quantize_fp8_geometry.cuh"
#include "codegen/families.hpp"
#include "moejit/error.hpp"

namespace moejit::codegen {
namespace {

constexpr unsigned kThreads = f8q::kQuantFp8Threads;

[[noreturn]] void reject(const char* field, const std::string& value, const char* why) {
  throw InvalidArgument(std::string("generate_quantize_fp8: key field ") + field + " = " + value + ": " + why);
}

}  // namespace

KernelSource generate_quantize_fp8(const SpecKey& key) {
  validate(key);
  auto str = [](auto v) { return std::string(to_string(v)); };
  if (key.op != OpKind::quantize) reject("op", str(key.op), "expected quantize");
  const bool mx = key.quant == QuantMode::mxfp8;
  if (!mx && key.quant != QuantMode::fp8_per_token) reject("quant", str(key.quant), "expected mxfp8 or fp8_per_token");
  if (key.n == 0 || key.n % (mx ? 32 : 8) != 0)
    reject("n", std::to_string(key.n), mx ? "MXFP8 rows need cols % 32 == 0" : "per-token FP8 rows need cols % 8 == 0");
  if (key.k != 0) reject("k", std::to_string(key.k), "quantize uses k = 0");
  if (key.weight_scale != default_weight_scale(key.quant))
    reject("weight_scale", str(key.weight_scale), "use default_weight_scale(quant) (quantize_fp8_key)");
  if (key.out_dtype != DType::e4m3) reject("out_dtype", str(key.out_dtype), "FP8 activation codes are e4m3");
  if (key.bias != BiasKind::none) reject("bias", str(key.bias), "quantize has no bias");
  if (key.act != Activation::none) reject("act", str(key.act), "quantize has no activation");
  if (key.router_weight) reject("router_weight", "true", "quantize has no router weight");
  if (key.experts != 0 || key.top_k != 0)
    reject("experts/top_k", std::to_string(key.experts) + "/" + std::to_string(key.top_k), "quantize uses 0/0");
  KernelSource ks;
  ks.source = std::string(kernel_file("quantize_mxfp4.cuh"));
  ks.source += "\n";
  ks.source += kernel_file("quantize_fp8_geometry.cuh");
  ks.source += "\n";
  ks.source += kernel_file("quantize_fp8.cuh");
  ks.name_expression = std::string("moejit::f8q::") + (mx ? "quantize_mxfp8_kernel<" : "quantize_fp8_per_token_kernel<") +
                       std::to_string(kThreads) + ", " + std::to_string(key.n) + ">";
  ks.launch.block_threads = kThreads;
  ks.launch.dynamic_smem_bytes = 0;
  ks.config_text = std::string("family=quantize_fp8 mode=") + str(key.quant) + " threads=" + std::to_string(kThreads) +
                   " cols=" + std::to_string(key.n) +
                   " row_threads=" + std::to_string(f8q::quant_fp8_row_threads(static_cast<int>(key.n)));
  return ks;
}

}  // namespace moejit::codegen
