// MXFP8 on the CPU: rows of fp32 / bf16 -> e4m3 codes + E8M0 per 32 (rule: quant.hpp).
#include <array>

#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "quant/checks.hpp"

namespace moejit {
namespace {

inline float widen(float v) { return v; }
inline float widen(std::uint16_t v) { return bf16_to_float(v); }

template <class In>
void quantize_rows(const char* fn, const In* w, std::uint64_t rows, std::uint32_t cols,
                   std::uint8_t* data, std::uint8_t* scales) {
  quant_detail::check_block_cols(fn, cols);
  quant_detail::check_ptr(fn, "w", w, rows, cols);
  quant_detail::check_ptr(fn, "data", data, rows, cols);
  quant_detail::check_ptr(fn, "scales", scales, rows, cols);
  const std::uint64_t blocks = rows * (cols / kMxBlockSize);
  std::array<float, kMxBlockSize> x{};
  for (std::uint64_t b = 0; b < blocks; ++b) {
    for (std::uint32_t i = 0; i < kMxBlockSize; ++i) x[i] = widen(w[b * kMxBlockSize + i]);
    scales[b] = quantize_mxfp8_block(x.data(), data + b * kMxBlockSize);
  }
}

}  // namespace

void quantize_mxfp8_cpu(const float* w, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales) {
  quantize_rows("quantize_mxfp8_cpu", w, rows, cols, data, scales);
}

void quantize_mxfp8_cpu(const std::uint16_t* w_bf16, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales) {
  quantize_rows("quantize_mxfp8_cpu(bf16)", w_bf16, rows, cols, data, scales);
}

void dequantize_mxfp8_cpu(const std::uint8_t* data, const std::uint8_t* scales,
                          std::uint64_t rows, std::uint32_t cols, double* out) {
  const char* fn = "dequantize_mxfp8_cpu";
  quant_detail::check_block_cols(fn, cols);
  quant_detail::check_ptr(fn, "data", data, rows, cols);
  quant_detail::check_ptr(fn, "scales", scales, rows, cols);
  quant_detail::check_ptr(fn, "out", out, rows, cols);
  const std::uint64_t n = rows * cols;
  for (std::uint64_t i = 0; i < n; ++i)
    out[i] = static_cast<double>(e4m3_to_float(data[i])) * e8m0_to_double(scales[i / kMxBlockSize]);
}

}  // namespace moejit
