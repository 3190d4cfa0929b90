#include <string>

#include "codegen/families.hpp"
#include "moejit/error.hpp"
#include "util/embedded_file.hpp"
#include "util/env.hpp"

namespace moejit::codegen {

std::string_view kernel_file(std::string_view file_name) {
  for (const auto& f : embedded_kernel_sources())
    if (f.name == file_name) return f.text;
  throw Error("kernel source '" + std::string(file_name) + "' is not embedded in this build");
}

KernelSource generate(const SpecKey& key) { return generate(key, util::env::gemm_tuning()); }

KernelSource generate(const SpecKey& key, const GemmTuning& tuning) {
  switch (key.op) {
    case OpKind::gate_up:
    case OpKind::down:
      if (key.quant == QuantMode::mxfp8 || key.quant == QuantMode::fp8_per_token) return generate_grouped_gemm_fp8(key, tuning);
      return generate_grouped_gemm(key, tuning);
    case OpKind::route: return generate_route(key);
    case OpKind::combine: return generate_combine(key);
    case OpKind::quantize:
      if (key.quant == QuantMode::mxfp8 || key.quant == QuantMode::fp8_per_token) return generate_quantize_fp8(key);
      return generate_quantize(key);
    case OpKind::wgrad: return generate_wgrad(key);
    case OpKind::k_order: return generate_k_order(key);
  }
  throw InvalidArgument("key field op=" + std::string(to_string(key.op)) +
                        ": no kernel family implements it in this build");
}

}  // namespace moejit::codegen
