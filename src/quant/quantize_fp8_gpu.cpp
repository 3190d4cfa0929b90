// Host side of the GPU activation quantizers (device side: kernels/quantize_fp8.cuh,
// source generator: src/codegen/quantize_fp8_family.cpp).
#include <algorithm>
#include <string>

#include "../../kernels/quantize_fp8_geometry.cuh"
#include "driver/cuda_api.hpp"
#include "driver/programmatic_launch.hpp"
#include "moejit/error.hpp"
#include "moejit/quant.hpp"

namespace moejit {
namespace {

constexpr std::uint64_t kMaxGrid = 1u << 20;  // grid-stride kernels: any grid is correct

void check(QuantMode mode, DevicePtr in, std::int64_t in_row_stride, std::uint64_t rows, std::uint32_t cols,
           DevicePtr codes, DevicePtr scales) {
  const char* fn = "quantize_fp8_gpu";
  auto bad = [&](const std::string& what) { throw InvalidArgument(std::string(fn) + ": " + what); };
  if (mode != QuantMode::mxfp8 && mode != QuantMode::fp8_per_token)
    bad("mode = " + std::string(to_string(mode)) + " (accepted: mxfp8, fp8_per_token)");
  const std::uint32_t unit = mode == QuantMode::mxfp8 ? 32 : 8;
  if (cols == 0 || cols % unit != 0)
    bad("cols = " + std::to_string(cols) + " is not a positive multiple of " + std::to_string(unit));
  if (rows == 0) return;
  if (in_row_stride < std::int64_t(cols) || in_row_stride % 8 != 0)
    bad("in_row_stride = " + std::to_string(in_row_stride) + " must be >= cols and a multiple of 8");
  if (!in || in % 16) bad("in must be non-null and 16-byte aligned");
  if (!codes || codes % 8) bad("codes must be non-null and 8-byte aligned");
  if (!scales || (mode == QuantMode::fp8_per_token && scales % 4)) bad("scales must be non-null (and 4-byte aligned)");
}

}  // namespace

SpecKey quantize_fp8_key(QuantMode mode, std::uint32_t cols, const Target& target) {
  if (mode != QuantMode::mxfp8 && mode != QuantMode::fp8_per_token)
    throw InvalidArgument("quantize_fp8_key: mode = " + std::string(to_string(mode)) +
                          " (accepted: mxfp8, fp8_per_token)");
  const std::uint32_t unit = mode == QuantMode::mxfp8 ? 32 : 8;
  if (cols == 0 || cols % unit != 0)
    throw InvalidArgument("quantize_fp8_key: cols = " + std::to_string(cols) + " is not a positive multiple of " +
                          std::to_string(unit));
  SpecKey key;
  key.op = OpKind::quantize;
  key.quant = mode;
  key.token_bucket = 1;
  key.n = cols;
  key.k = 0;
  key.n_align = alignment_of(cols);
  key.k_align = alignment_of(0);
  key.weight_scale = default_weight_scale(mode);
  key.out_dtype = DType::e4m3;
  key.target = target;
  return key;
}

void quantize_fp8_gpu(const KernelRef& kernel, QuantMode mode, DevicePtr in, std::int64_t in_row_stride,
                      std::uint64_t rows, std::uint32_t cols, DevicePtr codes, DevicePtr scales, CUstream stream) {
  check(mode, in, in_row_stride, rows, cols, codes, scales);
  if (rows == 0) return;
  const unsigned threads = kernel.launch.block_threads;
  if (!kernel.function)
    throw InvalidArgument("quantize_fp8_gpu: kernel is not a loaded quantize_fp8 kernel");
  std::int64_t out_stride = cols;
  std::int64_t scale_stride = cols / 32;
  if (threads != static_cast<unsigned>(f8q::kQuantFp8Threads))
    throw InvalidArgument("quantize_fp8_gpu: kernel block_threads = " + std::to_string(threads) + ", expected " +
                          std::to_string(f8q::kQuantFp8Threads));
  // Both kernels: a CTA takes quant_fp8_rows_per_cta(cols) rows at a time.
  const std::uint64_t per_cta = static_cast<std::uint64_t>(f8q::quant_fp8_rows_per_cta(static_cast<int>(cols)));
  const std::uint64_t units = (rows + per_cta - 1) / per_cta;
  // Programmatic stream serialization: the kernel waits for the launch before
  // it (griddepcontrol.wait) before touching memory, and lets the FP8 GEMM
  // after it launch early (kernels/quantize_fp8.cuh, quant_pdl_enter).
  void* per_token_args[] = {&in, &in_row_stride, &rows, &codes, &out_stride, &scales};
  void* mxfp8_args[] = {&in, &in_row_stride, &rows, &codes, &out_stride, &scales, &scale_stride};
  driver::launch_programmatic(kernel.function,
                              {static_cast<unsigned>(std::min<std::uint64_t>(units, kMaxGrid)), 1, 1, threads, 0},
                              stream, mode == QuantMode::fp8_per_token ? per_token_args : mxfp8_args);
}

void quantize_fp8_gpu(Runtime& runtime, QuantMode mode, DevicePtr in, std::int64_t in_row_stride, std::uint64_t rows,
                      std::uint32_t cols, DevicePtr codes, DevicePtr scales, CUstream stream, const Target& target) {
  check(mode, in, in_row_stride, rows, cols, codes, scales);  // a bad argument must not cost a compile
  if (rows == 0) return;
  quantize_fp8_gpu(runtime.get(quantize_fp8_key(mode, cols, target)), mode, in, in_row_stride, rows, cols, codes,
                   scales, stream);
}

}  // namespace moejit
