#pragma once
// One generator per kernel family (key -> NVRTC translation unit). generate()
// in generate.cpp dispatches on SpecKey::op.
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_source.hpp"

namespace moejit::ops {
struct GemmConfig;     // src/ops/grouped_gemm_config.hpp
struct Fp8GemmConfig;  // src/ops/fp8_gemm_config.hpp
}  // namespace moejit::ops

namespace moejit::codegen {

// op = gate_up, down with quant = bf16 / w4a16_mxfp4 (src/ops/kernel_codegen.cpp):
// the heuristic's configuration (ops::choose_config under `tuning`), or the
// unit of a given configuration (the kernels' contracts are checked by
// choose_config, not here: pass one it returned, for some tuning).
KernelSource generate_grouped_gemm(const SpecKey& key, const GemmTuning& tuning);
KernelSource generate_grouped_gemm(const SpecKey& key, const ops::GemmConfig& config);
// The translation unit of a kernel that takes a config struct: the device
// prelude (common.cuh, kernel_params.cuh), the config structs
// (kernel_configs.cuh), then `files` in order.
std::string config_unit(std::initializer_list<std::string_view> files);
// The NVRTC options of a unit whose kernel takes a config struct of
// kernel_configs.cuh (the grouped GEMMs, routing, combine, the warp-specialized
// weight gradient): C++20, for the class-type template parameter.
std::vector<std::string> kernel_config_options();
// op = gate_up, down with quant = mxfp8 / fp8_per_token (src/ops/fp8_grouped_gemm.cpp,
// kernels/grouped_gemm_fp8_*.cuh, grouped_gemm_tma_ws_sm90.cuh): the heuristic's
// configuration (ops::choose_fp8_config) or a given one, as above.
KernelSource generate_grouped_gemm_fp8(const SpecKey& key, const GemmTuning& tuning);
KernelSource generate_grouped_gemm_fp8(const SpecKey& key, const ops::Fp8GemmConfig& config);
KernelSource generate_route(const SpecKey& key);         // op = route (src/ops)
KernelSource generate_combine(const SpecKey& key);       // op = combine (src/ops)
KernelSource generate_wgrad(const SpecKey& key);         // op = wgrad (src/ops/wgrad.cpp)
// op = quantize (src/codegen/quantize_family.cpp). Supported: quant=w4a16_mxfp4
// (kernels/quantize_mxfp4.cuh) with weight_scale=e8m0_block32, out_dtype=u8,
// n = cols (a multiple of 32), k = 0, no bias / act / router weight. The input
// dtype (fp32 / bf16) is a run-time kernel argument, not a key field: one
// compiled kernel serves both, and every such key (any n) yields the same
// source, so all share one cache entry. Kernel arguments, in order:
// (const void* in, int in_dtype /*0 fp32, 1 bf16*/, unsigned long long
// num_blocks /*rows*cols/32*/, unsigned char* data, unsigned char* scales);
// grid: any size (grid-stride loop), block: launch.block_threads.
KernelSource generate_quantize(const SpecKey& key);
// op = quantize with quant = mxfp8 / fp8_per_token (src/codegen/quantize_fp8_family.cpp):
// the bf16 -> e4m3 activation quantizers of kernels/quantize_fp8.cuh. Key:
// quantize_fp8_key() in moejit/quant.hpp. Launch: quantize_fp8_gpu().
KernelSource generate_quantize_fp8(const SpecKey& key);
// op = k_order (src/ops/k_order.cpp, kernels/k_order.cuh): bf16 rows into the
// fragment k order of the MXFP4 warp-specialized GEMM. Key: ops::k_order_key.
// Launch: ops::launch_k_order.
KernelSource generate_k_order(const SpecKey& key);

}  // namespace moejit::codegen
