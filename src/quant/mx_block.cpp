// The MX block rule shared by MXFP4 and MXFP8 (see quant.hpp for the contract).
#include <cmath>

#include "moejit/formats.hpp"
#include "moejit/quant.hpp"

namespace moejit {
namespace {

struct ElementFormat {
  double max;         // largest finite magnitude M
  int max_binade;     // floor(log2 M)
};

constexpr ElementFormat format_of(MxElement e) {
  return e == MxElement::e2m1 ? ElementFormat{6.0, 2} : ElementFormat{448.0, 8};
}

// Block amax, or NaN when any element is NaN or Inf.
float block_amax(const float* x) noexcept {
  float amax = 0.0f;
  for (std::uint32_t i = 0; i < kMxBlockSize; ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<float>::quiet_NaN();
    amax = std::fmax(amax, std::fabs(x[i]));
  }
  return amax;
}

// x / 2^s, exact in double for s in [-127, 127] and any finite fp32 x.
double scaled(float x, std::uint8_t scale_byte) noexcept {
  return std::ldexp(static_cast<double>(x), -(int{scale_byte} - kE8m0Bias));
}

}  // namespace

std::uint8_t mx_scale_byte(float amax, MxElement element) noexcept {
  if (!std::isfinite(amax)) return kE8m0Nan;
  if (amax == 0.0f) return e8m0_from_exponent(kE8m0MinExponent);
  const ElementFormat fmt = format_of(element);
  int e = 0;
  const double f = std::frexp(static_cast<double>(std::fabs(amax)), &e);  // f in [0.5, 1)
  int s = e - 1 - fmt.max_binade;  // amax / 2^s = f * 2^(max_binade + 1) in [2^mb, 2^(mb+1))
  if (std::ldexp(f, fmt.max_binade + 1) > fmt.max) ++s;
  return e8m0_from_exponent(s);  // clamps to [-127, 127]
}

std::uint8_t quantize_mxfp4_block(const float* x, std::uint8_t* packed) noexcept {
  const std::uint8_t scale = mx_scale_byte(block_amax(x), MxElement::e2m1);
  for (std::uint32_t i = 0; i < kMxBlockSize / 2; ++i) {
    if (scale == kE8m0Nan) {
      packed[i] = 0;
      continue;
    }
    // float() of the scaled value is exact unless it lies far below e2m1's
    // smallest step (then it rounds to zero either way) or above fp32's range
    // (impossible: |x / 2^s| <= 6 by the scale rule).
    const std::uint8_t lo = float_to_e2m1(static_cast<float>(scaled(x[2 * i], scale)));
    const std::uint8_t hi = float_to_e2m1(static_cast<float>(scaled(x[2 * i + 1], scale)));
    packed[i] = pack_e2m1(lo, hi);
  }
  return scale;
}

std::uint8_t quantize_mxfp8_block(const float* x, std::uint8_t* codes) noexcept {
  const std::uint8_t scale = mx_scale_byte(block_amax(x), MxElement::e4m3);
  for (std::uint32_t i = 0; i < kMxBlockSize; ++i)
    codes[i] = scale == kE8m0Nan ? 0 : float_to_e4m3(static_cast<float>(scaled(x[i], scale)));
  return scale;
}

}  // namespace moejit
