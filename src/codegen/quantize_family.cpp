// op=quantize: the GPU MXFP4 quantizer (kernels/quantize_mxfp4.cuh).
#include <string>

#include "codegen/families.hpp"
#include "moejit/error.hpp"

namespace moejit::codegen {
namespace {

// Must equal moejit::mxq::QuantizeTraits::kBlockThreads in the kernel file
// (the name expression below instantiates the kernel with this value, and
// __launch_bounds__ makes a mismatching launch fail loudly).
constexpr unsigned kQuantizeBlockThreads = 256;

[[noreturn]] void reject(const char* field, const std::string& value, const char* why) {
  throw InvalidArgument(std::string("generate_quantize: key field ") + field + " = " + value +
                        ": " + why);
}

}  // namespace

KernelSource generate_quantize(const SpecKey& key) {
  validate(key);
  auto str = [](auto v) { return std::string(to_string(v)); };
  if (key.op != OpKind::quantize) reject("op", str(key.op), "expected quantize");
  if (key.quant != QuantMode::w4a16_mxfp4)
    reject("quant", str(key.quant),
           "only w4a16_mxfp4 has a GPU quantizer so far (MXFP8 and per-token FP8 are CPU-only)");
  if (key.n % 32 != 0)
    reject("n", std::to_string(key.n), "quantize needs n (columns) to be a multiple of 32 (MX block)");
  if (key.k != 0) reject("k", std::to_string(key.k), "quantize uses k = 0");
  if (key.weight_scale != WeightScale::e8m0_block32)
    reject("weight_scale", str(key.weight_scale), "MXFP4 needs e8m0_block32");
  if (key.out_dtype != DType::u8) reject("out_dtype", str(key.out_dtype), "MXFP4 output is u8");
  if (key.bias != BiasKind::none) reject("bias", str(key.bias), "quantize has no bias");
  if (key.act != Activation::none) reject("act", str(key.act), "quantize has no activation");
  if (key.router_weight) reject("router_weight", "true", "quantize has no router weight");
  if (key.experts != 0 || key.top_k != 0)
    reject("experts/top_k", std::to_string(key.experts) + "/" + std::to_string(key.top_k), "quantize uses 0/0");

  KernelSource ks;
  ks.source = std::string(kernel_file("quantize_mxfp4.cuh"));
  const std::string instance =
      "moejit::mxq::quantize_mxfp4_kernel<" + std::to_string(kQuantizeBlockThreads) + ">";
  ks.source += "\n// moejit instantiation (op=quantize quant=w4a16_mxfp4)\n"
               "template __global__ void " + instance +
               "(const void*, int, moejit::mxq::uint64_t, moejit::mxq::uint8_t*, moejit::mxq::uint8_t*);\n";
  ks.name_expression = instance;
  ks.launch.block_threads = kQuantizeBlockThreads;
  ks.launch.dynamic_smem_bytes = 0;
  ks.config_text = "family=quantize_mxfp4 threads=" + std::to_string(kQuantizeBlockThreads) +
                   " warp_per_block32=1";
  return ks;
}

}  // namespace moejit::codegen
