#pragma once
// TMA tensor maps of the warp-specialized kernels' operands,
// encoded on the host with the driver's cuTensorMapEncodeTiled and passed to
// the kernel by value (kernels/wgmma_sm90.cuh, TensorMap).
#include <cstdint>

#include "moejit/types.hpp"
#include "driver/cuda_api.hpp"

namespace moejit::ops {

// Weights [experts, n, k] of `elem_bytes`-byte elements (2: bf16, 1: e4m3),
// contiguous, as the 4D map the TMA warp-specialized kernel reads
// (kernels/grouped_gemm_tma_ws_sm90.cuh, "w_map"): box 128 bytes of k x the
// rows of one copy (block_n for no activation, block_n / 2 per gate or up copy
// otherwise), 128-byte swizzle, out-of-range elements read as zero.
// Preconditions (checked by the callers' weight checks and the key): w
// 16-byte aligned, k * elem_bytes % 16 == 0, n % 16 == 0, block_n 128 or 256.
// Throws DriverError when the driver rejects the map (it names the CUresult).
CUtensorMap weight_map(std::uint64_t w, std::uint32_t experts, std::uint32_t n, std::uint32_t k, std::uint32_t elem_bytes,
                       Activation act, std::uint32_t block_n);

// Packed e2m1 weights [experts, n, k / 2] bytes, contiguous, as the 5D map
// the MXFP4 warp-specialized kernel reads (kernels/grouped_gemm_mxfp4_ws_sm90.cuh,
// "w_map"): box 32 bytes (64 k) x block_n rows (128 or 256) of one weight
// block, ring row rr = 16 q + 8 h + u at rr * 32 bytes, no swizzle; for gated
// activations h picks gate (0) or up (1) of output column 8 q + u (q the map's
// row-group coordinate: block_n / 16 * nb + the box's q), so both meet in one
// wgmma thread (fragment rows g, g + 8; group_row in
// kernels/mxfp4_fragments.cuh). Coordinates (k / 2, 0, 0, block_n / 16 * nb, expert).
// Out-of-range bytes (k past K, rows past n) read as zero. Preconditions:
// w 16-byte aligned, k % 32 == 0, n % 16 == 0. Throws DriverError when the
// driver rejects the map.
CUtensorMap packed_weight_map(std::uint64_t w, std::uint32_t experts, std::uint32_t n, std::uint32_t k, Activation act,
                              std::uint32_t block_n);

// A row-major bf16 matrix [rows, cols] with `row_stride` elements between rows,
// as the 2D map the weight-gradient kernel reads its grad tiles through
// (kernels/moe_wgrad_sm90.cuh, "grad_map"): box 64 columns (128 bytes) x 64
// rows, 128-byte swizzle, out-of-range elements read as zero. Preconditions
// (checked by MoeWgrad::run): base 16-byte aligned, row_stride % 8 == 0,
// cols <= row_stride. Throws DriverError when the driver rejects the map.
CUtensorMap rows_map(std::uint64_t base, std::uint64_t rows, std::uint32_t cols, std::int64_t row_stride);

// Per-expert output matrices [experts, n, k] of `elem_bytes`-byte elements (4:
// fp32, 2: bf16), contiguous, as the 3D map the weight-gradient kernel stores dW
// through (kernels/moe_wgrad_sm90.cuh, "dw_map"): box 128 bytes of k (32 fp32 or
// 64 bf16) x 32 rows of n, 128-byte swizzle; elements outside the tensor are not
// written. Preconditions (checked by MoeWgrad::run and the key): base 16-byte
// aligned, k * elem_bytes % 16 == 0. Throws DriverError when the driver rejects the map.
CUtensorMap expert_output_map(std::uint64_t base, std::uint32_t experts, std::uint32_t n, std::uint32_t k,
                              std::uint32_t elem_bytes);

}  // namespace moejit::ops
