// MXFP4 on the CPU: rows of fp32 / bf16 -> e2m1 pairs + E8M0 per 32 (rule: quant.hpp).
#include <array>

#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "quant/checks.hpp"

namespace moejit {
namespace {

// Loads one block of 32 elements as fp32 (bf16 widens exactly).
inline void load_block(const float* src, float* dst) {
  for (std::uint32_t i = 0; i < kMxBlockSize; ++i) dst[i] = src[i];
}
inline void load_block(const std::uint16_t* src, float* dst) {
  for (std::uint32_t i = 0; i < kMxBlockSize; ++i) dst[i] = bf16_to_float(src[i]);
}

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
    load_block(w + b * kMxBlockSize, x.data());
    scales[b] = quantize_mxfp4_block(x.data(), data + b * (kMxBlockSize / 2));
  }
}

template <class Out>
void dequantize_rows(const std::uint8_t* data, const std::uint8_t* scales, std::uint64_t rows,
                     std::uint32_t cols, Out* out) {
  const char* fn = "dequantize_mxfp4_cpu";
  quant_detail::check_block_cols(fn, cols);
  quant_detail::check_ptr(fn, "data", data, rows, cols);
  quant_detail::check_ptr(fn, "scales", scales, rows, cols);
  quant_detail::check_ptr(fn, "out", out, rows, cols);
  const std::uint64_t blocks = rows * (cols / kMxBlockSize);
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const double scale = e8m0_to_double(scales[b]);
    for (std::uint32_t i = 0; i < kMxBlockSize; ++i) {
      const std::uint8_t byte = data[b * (kMxBlockSize / 2) + i / 2];
      const double v = static_cast<double>(e2m1_to_float(unpack_e2m1(byte, i & 1))) * scale;
      out[b * kMxBlockSize + i] = static_cast<Out>(v);
    }
  }
}

}  // namespace

void quantize_mxfp4_cpu(const float* w, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales) {
  quantize_rows("quantize_mxfp4_cpu", w, rows, cols, data, scales);
}

void quantize_mxfp4_cpu(const std::uint16_t* w_bf16, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales) {
  quantize_rows("quantize_mxfp4_cpu(bf16)", w_bf16, rows, cols, data, scales);
}

void dequantize_mxfp4_cpu(const std::uint8_t* data, const std::uint8_t* scales,
                          std::uint64_t rows, std::uint32_t cols, float* out) {
  dequantize_rows(data, scales, rows, cols, out);
}

void dequantize_mxfp4_cpu(const std::uint8_t* data, const std::uint8_t* scales,
                          std::uint64_t rows, std::uint32_t cols, double* out) {
  dequantize_rows(data, scales, rows, cols, out);
}

}  // namespace moejit
