// Per-token FP8 on the CPU: one fp32 scale per row, e4m3 codes (rule: quant.hpp).
#include <cmath>
#include <limits>

#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "quant/checks.hpp"

namespace moejit {
namespace {

inline float widen(float v) { return v; }
inline float widen(std::uint16_t v) { return bf16_to_float(v); }

template <class In>
void quantize_rows(const char* fn, const In* x, std::uint64_t rows, std::uint32_t cols,
                   std::uint8_t* data, float* scales) {
  quant_detail::check_ptr(fn, "x", x, rows, cols);
  quant_detail::check_ptr(fn, "data", data, rows, cols);
  quant_detail::check_ptr(fn, "scales", scales, rows, cols);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const In* row = x + r * cols;
    std::uint8_t* out = data + r * cols;
    float amax = 0.0f;
    bool finite = true;
    for (std::uint32_t i = 0; i < cols; ++i) {
      const float v = widen(row[i]);
      finite = finite && std::isfinite(v);
      amax = std::fmax(amax, std::fabs(v));
    }
    if (!finite) {
      scales[r] = std::numeric_limits<float>::quiet_NaN();
      for (std::uint32_t i = 0; i < cols; ++i) out[i] = 0;
      continue;
    }
    // Why plain float division: without -ffast-math g++ evaluates it in IEEE
    // single precision (x86-64 SSE), rounded to nearest, as the rule states.
    // A subnormal amax can make amax / 448 underflow to 0: the scale is kept at
    // least 2^-149 so that x / scale stays finite.
    float scale = amax == 0.0f ? 1.0f : amax / kE4m3Max;
    if (scale == 0.0f) scale = std::numeric_limits<float>::denorm_min();
    scales[r] = scale;
    for (std::uint32_t i = 0; i < cols; ++i) out[i] = float_to_e4m3(widen(row[i]) / scale);
  }
}

}  // namespace

void quantize_fp8_per_token_cpu(const float* x, std::uint64_t rows, std::uint32_t cols,
                                std::uint8_t* data, float* scales) {
  quantize_rows("quantize_fp8_per_token_cpu", x, rows, cols, data, scales);
}

void quantize_fp8_per_token_cpu(const std::uint16_t* x_bf16, std::uint64_t rows,
                                std::uint32_t cols, std::uint8_t* data, float* scales) {
  quantize_rows("quantize_fp8_per_token_cpu(bf16)", x_bf16, rows, cols, data, scales);
}

void dequantize_fp8_per_token_cpu(const std::uint8_t* data, const float* scales,
                                  std::uint64_t rows, std::uint32_t cols, double* out) {
  const char* fn = "dequantize_fp8_per_token_cpu";
  quant_detail::check_ptr(fn, "data", data, rows, cols);
  quant_detail::check_ptr(fn, "scales", scales, rows, cols);
  quant_detail::check_ptr(fn, "out", out, rows, cols);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint32_t i = 0; i < cols; ++i)
      out[r * cols + i] =
          static_cast<double>(e4m3_to_float(data[r * cols + i])) * static_cast<double>(scales[r]);
}

}  // namespace moejit
