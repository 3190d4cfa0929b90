// Host side of the GPU MXFP4 quantizer (device side: kernels/quantize_mxfp4.cuh,
// source generator: src/codegen/quantize_family.cpp).
#include <algorithm>
#include <cstdio>
#include <string>

#include "driver/cuda_api.hpp"
#include "moejit/error.hpp"
#include "moejit/quant.hpp"
#include "quant/checks.hpp"

namespace moejit {
namespace {

// Grid cap: the kernel loops over blocks (grid-stride), so any grid is correct;
// 2^20 CTAs of 8 warps is far more than an H200 keeps resident.
constexpr std::uint64_t kMaxGrid = 1u << 20;

}  // namespace

namespace quant_detail {
void check_gpu_args(DevicePtr in, DType in_dtype, std::uint64_t rows, std::uint32_t cols, DevicePtr data,
                    DevicePtr scales) {
  const char* fn = "quantize_mxfp4_gpu";
  if (in_dtype != DType::f32 && in_dtype != DType::bf16)
    throw InvalidArgument(std::string(fn) + ": in_dtype = " + std::string(to_string(in_dtype)) +
                          " (accepted: f32, bf16)");
  quant_detail::check_block_cols(fn, cols);
  if (rows == 0 || cols == 0) return;
  if (in == 0 || data == 0 || scales == 0)
    throw InvalidArgument(std::string(fn) + ": a device pointer (in, data or scales) is null while rows = " +
                          std::to_string(rows) + ", cols = " + std::to_string(cols));
  const std::uint64_t elem = in_dtype == DType::f32 ? 4 : 2;
  if (in % elem != 0)
    throw InvalidArgument(std::string(fn) + ": in = 0x" + [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(in));
      return std::string(buf);
    }() + " is not aligned to its element size " + std::to_string(elem));
}
}  // namespace quant_detail

SpecKey quantize_mxfp4_key(std::uint32_t cols, const Target& target) {
  quant_detail::check_block_cols("quantize_mxfp4_key", cols);
  SpecKey key;
  key.op = OpKind::quantize;
  key.quant = QuantMode::w4a16_mxfp4;
  key.token_bucket = 1;
  key.n = cols;
  key.k = 0;
  key.n_align = alignment_of(cols);
  key.k_align = alignment_of(0);
  key.weight_scale = WeightScale::e8m0_block32;
  key.out_dtype = DType::u8;
  key.target = target;
  return key;
}

void quantize_mxfp4_gpu(const KernelRef& kernel, DevicePtr in, DType in_dtype, std::uint64_t rows,
                        std::uint32_t cols, DevicePtr data, DevicePtr scales, CUstream stream) {
  quant_detail::check_gpu_args(in, in_dtype, rows, cols, data, scales);
  if (rows == 0 || cols == 0) return;
  if (kernel.function == nullptr || kernel.launch.block_threads == 0 || kernel.launch.block_threads % 32 != 0)
    throw InvalidArgument("quantize_mxfp4_gpu: kernel is not a loaded quantize_mxfp4 kernel (function null or "
                          "block_threads = " + std::to_string(kernel.launch.block_threads) + ")");
  std::uint64_t num_blocks = rows * (cols / kMxBlockSize);
  const std::uint64_t warps = kernel.launch.block_threads / 32;
  const unsigned grid = static_cast<unsigned>(std::min<std::uint64_t>((num_blocks + warps - 1) / warps, kMaxGrid));
  int dtype_arg = in_dtype == DType::bf16 ? 1 : 0;  // mxq::kInputBf16 / kInputF32
  void* args[] = {&in, &dtype_arg, &num_blocks, &data, &scales};
  MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(kernel.function, grid, 1, 1, kernel.launch.block_threads, 1, 1,
                                                kernel.launch.dynamic_smem_bytes, stream, args, nullptr));
}

}  // namespace moejit
