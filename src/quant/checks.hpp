#pragma once
// Argument checks shared by the quantizers (messages name the function, the
// parameter and its value).
#include <cstdint>
#include <string>

#include "moejit/error.hpp"
#include "moejit/quant.hpp"

namespace moejit::quant_detail {

inline void check_block_cols(const char* fn, std::uint32_t cols) {
  if (cols % kMxBlockSize != 0)
    throw InvalidArgument(std::string(fn) + ": cols = " + std::to_string(cols) +
                          " is not a multiple of 32 (one E8M0 scale per 32 elements of a row; "
                          "pad the row or pick a K that is a multiple of 32)");
}

inline void check_ptr(const char* fn, const char* name, const void* p, std::uint64_t rows,
                      std::uint32_t cols) {
  if (p == nullptr && rows != 0 && cols != 0)
    throw InvalidArgument(std::string(fn) + ": " + name + " is null while rows = " +
                          std::to_string(rows) + ", cols = " + std::to_string(cols));
}

// Checks of the GPU quantizer's arguments (dtype, cols, null, alignment);
// throws InvalidArgument. Defined in quantize_mxfp4_gpu.cpp.
void check_gpu_args(DevicePtr in, DType in_dtype, std::uint64_t rows, std::uint32_t cols, DevicePtr data,
                    DevicePtr scales);

}  // namespace moejit::quant_detail
