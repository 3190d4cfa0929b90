// Generators of the MoE kernel families: key -> NVRTC translation unit.
// The unit is the embedded device prelude plus the family's files; the template
// arguments travel in the name expression (one config struct, every field by
// name: kernels/kernel_configs.cuh), so one source text serves every
// configuration and the content address differs only where the kernel does.
#include <initializer_list>
#include <string>
#include <vector>

#include "codegen/families.hpp"
#include "moejit/error.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/kernel_configs.hpp"
#include "ops/launch_contracts.hpp"

namespace moejit::codegen {

std::string config_unit(std::initializer_list<std::string_view> files) {
  std::string s = "// moejit generated translation unit\n";
  for (std::string_view f : {"common.cuh", "kernel_params.cuh", "kernel_configs.cuh"}) {
    s += kernel_file(f);
    s += "\n";
  }
  for (std::string_view f : files) {
    s += kernel_file(f);
    s += "\n";
  }
  return s;
}

std::vector<std::string> kernel_config_options() { return {"-std=c++20"}; }

KernelSource generate_grouped_gemm(const SpecKey& key, const GemmTuning& tuning) {
  return generate_grouped_gemm(key, ops::choose_config(key, tuning));
}

KernelSource generate_grouped_gemm(const SpecKey& key, const ops::GemmConfig& c) {
  const GemmEpilogue e = ops::gemm_epilogue(key);
  KernelSource ks;
  switch (c.kernel) {
    case ops::GemmKernel::mxfp4_decode:
      ks.source = config_unit({"grouped_gemm_params.cuh", "mxfp4_fragments.cuh", "decode_routing.cuh",
                               "grouped_gemm_mxfp4_decode_sm90.cuh"});
      ks.name_expression = ops::instantiation("moejit::grouped_gemm_mxfp4_decode_kernel",
                                              Mxfp4DecodeKernel{.wn = c.wn, .kw = c.kw, .mw = c.mw, .nt = c.nt,
                                                                .depth = c.depth, .ctas = c.ctas, .xs = c.xs,
                                                                .fr = c.fr, .epilogue = e});
      break;
    case ops::GemmKernel::mxfp4_ws:
      ks.source = config_unit({"grouped_gemm_params.cuh", "mxfp4_fragments.cuh", "wgmma_sm90.cuh",
                               "grouped_gemm_mxfp4_ws_sm90.cuh"});
      ks.name_expression = ops::instantiation(
          "moejit::grouped_gemm_mxfp4_ws_kernel",
          Mxfp4WsKernel{.bm = c.tm, .cwg = c.cwg, .stages = c.stages, .k_tail = c.k_tail,
                        .k_order_in = c.k_order_in, .k_order_out = c.k_order_out, .epilogue = e});
      break;
    case ops::GemmKernel::bf16_ws:
      ks.source = config_unit({"grouped_gemm_params.cuh", "wgmma_sm90.cuh", "grouped_gemm_tma_ws_sm90.cuh"});
      ks.name_expression = ops::instantiation(
          "moejit::grouped_gemm_tma_ws_kernel",
          TmaWsKernel{.elem = 0, .scale = 0, .bn = c.bn(), .stages = c.stages, .promote_slices = 1,
                      .k_tail = c.k_tail, .epilogue = e});
      break;
    case ops::GemmKernel::mxfp4_wgmma:
      if (c.wa) {
        ks.source = config_unit({"grouped_gemm_params.cuh", "mxfp4_fragments.cuh", "grouped_gemm_mxfp4_wgmma_sm90.cuh",
                               "grouped_gemm_mxfp4_wgmma_wa_sm90.cuh"});
        ks.name_expression = ops::instantiation(
            "moejit::grouped_gemm_mxfp4_wgmma_wa_kernel",
            Mxfp4WgmmaWaKernel{.th = c.wg, .stages = c.stages, .k_tail = c.k_tail, .epilogue = e});
        break;
      }
      ks.source = config_unit({"grouped_gemm_params.cuh", "grouped_gemm_mxfp4_wgmma_sm90.cuh"});
      ks.name_expression = ops::instantiation(
          "moejit::grouped_gemm_mxfp4_wgmma_kernel",
          Mxfp4WgmmaKernel{.wg = c.wg, .stages = c.stages, .overlap = c.depth == 2, .k_tail = c.k_tail, .epilogue = e});
      break;
    case ops::GemmKernel::x_operand_a:
      ks.source = config_unit({"grouped_gemm_params.cuh", "grouped_gemm_sm90.cuh"});
      ks.name_expression = ops::instantiation(
          "moejit::grouped_gemm_kernel",
          MmaGemmKernel{.warps_m = c.warps_m, .warps_n = c.warps_n, .mi = c.mi, .ni = c.ni, .stages = c.stages,
                        .quant = key.quant == QuantMode::w4a16_mxfp4 ? 1 : 0, .k_tail = c.k_tail, .epilogue = e});
      break;
  }
  ks.options = kernel_config_options();
  ks.launch.block_threads = static_cast<std::uint32_t>(c.threads());
  ks.launch.dynamic_smem_bytes = c.smem_bytes(key.quant, key.k);
  ks.config_text = c.to_string();
  return ks;
}

KernelSource generate_route(const SpecKey& key) {
  if (key.experts == 0 || key.experts > ops::kRouteMaxExperts)
    throw InvalidArgument("key field experts=" + std::to_string(key.experts) + ": must be in [1, " +
                          std::to_string(ops::kRouteMaxExperts) + "]");
  const std::uint64_t routes = std::uint64_t(key.token_bucket) * key.top_k;
  const std::uint32_t threads = ops::route_threads(routes);
  const bool staged = ops::route_staged(key.experts, routes);
  KernelSource ks;
  ks.source = config_unit({"moe_routing.cuh"});
  ks.name_expression = ops::instantiation("moejit::moe_route_kernel",
                                          RouteKernel{.threads = static_cast<int>(threads), .staged = staged});
  ks.options = kernel_config_options();
  ks.launch.block_threads = threads;
  ks.launch.dynamic_smem_bytes = ops::route_smem_bytes(key.experts, routes);
  ks.config_text = "threads=" + std::to_string(threads) + " staged=" + (staged ? "1" : "0");
  return ks;
}

KernelSource generate_combine(const SpecKey& key) {
  if (key.n == 0 || key.n % 4 != 0)
    throw InvalidArgument("key field n (hidden)=" + std::to_string(key.n) + ": must be a positive multiple of 4");
  // The key's in field is the dtype of the Y the combine reads (ops::combine_key).
  if (key.in_dtype != DType::f32 && key.in_dtype != DType::bf16)
    throw InvalidArgument("key field in=" + std::string(to_string(key.in_dtype)) +
                          ": the combine reads f32 or bf16 Y (the down key's out dtype)");
  const bool y_bf16 = key.in_dtype == DType::bf16;
  const std::uint32_t cols = ops::combine_cols(key.n, y_bf16);  // MoeLayer::combine sizes the grid with the same
  const std::uint32_t in_flight = ops::combine_in_flight(key.top_k);
  KernelSource ks;
  ks.source = config_unit({"moe_combine.cuh"});
  ks.name_expression = ops::instantiation(
      "moejit::moe_combine_kernel", CombineKernel{.threads = static_cast<int>(ops::kCombineThreads),
                                                  .cols = static_cast<int>(cols),
                                                  .in_flight = static_cast<int>(in_flight), .y_bf16 = y_bf16});
  ks.options = kernel_config_options();
  ks.launch.block_threads = ops::kCombineThreads;
  ks.launch.dynamic_smem_bytes = 0;
  ks.config_text = "threads=" + std::to_string(ops::kCombineThreads) + " cols=" + std::to_string(cols) +
                   " in_flight=" + std::to_string(in_flight) + " y=" + (y_bf16 ? "bf16" : "f32");
  return ks;
}

}  // namespace moejit::codegen
