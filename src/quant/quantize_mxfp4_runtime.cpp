// quantize_mxfp4_gpu through the Runtime (kernel lookup by key). Kept apart
// from quantize_mxfp4_gpu.cpp so that code using only the key or the
// KernelRef launch does not pull in the Runtime.
#include "moejit/quant.hpp"
#include "quant/checks.hpp"

namespace moejit {

void quantize_mxfp4_gpu(Runtime& runtime, DevicePtr in, DType in_dtype, std::uint64_t rows, std::uint32_t cols,
                        DevicePtr data, DevicePtr scales, CUstream stream, const Target& target) {
  // Why check before get(): a bad argument must not cost a compile.
  quant_detail::check_gpu_args(in, in_dtype, rows, cols, data, scales);
  if (rows == 0 || cols == 0) return;
  const KernelRef kernel = runtime.get(quantize_mxfp4_key(cols, target));
  quantize_mxfp4_gpu(kernel, in, in_dtype, rows, cols, data, scales, stream);
}

}  // namespace moejit
