#pragma once
// op=k_order (kernels/k_order.cuh): bf16 rows into the fragment k order of the
// MXFP4 warp-specialized grouped GEMM (moejit::h_column_position, in
// include/moejit/moe_layer.hpp, is the order). The MoE layer runs it on X
// before that gate_up (ops::GemmPlan::k_order_key).
#include <cstdint>

#include "moejit/key.hpp"
#include "moejit/runtime.hpp"
#include "moejit/types.hpp"

namespace moejit::ops {

// The key of the reorder of rows of `cols` bf16 columns: op=k_order,
// quant=w4a16_mxfp4, tokens 1 (rows are a launch argument), n = cols, out bf16.
// Throws InvalidArgument naming cols unless it is a positive multiple of 32.
SpecKey k_order_key(std::uint32_t cols, const Target& target);

// Launches `kernel` (the kernel of k_order_key(cols)) on `stream`: out[r] = in[r]
// with each block of 32 columns reordered, for r < rows. in: bf16 [rows,
// in_row_stride] with 16-byte aligned rows (in % 16 == 0, in_row_stride % 8 ==
// 0, in_row_stride >= cols); out: bf16 [rows, cols], 16-byte aligned. Throws
// InvalidArgument naming the parameter and value, DriverError from the launch.
// rows == 0 launches nothing.
void launch_k_order(const KernelRef& kernel, DevicePtr in, std::int64_t in_row_stride, std::uint64_t rows,
                    std::uint32_t cols, DevicePtr out, CUstream stream);

}  // namespace moejit::ops
