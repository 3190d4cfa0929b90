// Encoders of include/moejit/formats.hpp.
//
// Why value-domain arithmetic in double here while kernels/quantize_mxfp4.cuh
// works on fp32 bit patterns: the two implementations are independent, so the
// tests that compare them bit for bit check the rounding rule, not one piece
// of code against itself.
#include "moejit/formats.hpp"

#include <cmath>

namespace moejit {
namespace {

// Nearest integer to y >= 0, ties to even, independent of the FP environment.
double round_half_even(double y) noexcept {
  const double f = std::floor(y);
  const double diff = y - f;  // exact: y and f share the binade or f == 0
  if (diff > 0.5) return f + 1.0;
  if (diff < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

}  // namespace

double round_to_float_grid(double a, int mantissa_bits, int min_exponent) noexcept {
  if (a == 0.0) return 0.0;
  int e = 0;
  (void)std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): floor(log2 a) = e - 1
  int binade = e - 1;
  if (binade < min_exponent) binade = min_exponent;  // subnormal range: fixed quantum
  const int quantum_exp = binade - mantissa_bits;
  const double y = std::ldexp(a, -quantum_exp);  // exact (power-of-two scaling)
  return std::ldexp(round_half_even(y), quantum_exp);
}

std::uint8_t float_to_e2m1(float f) noexcept {
  if (std::isnan(f)) return 0x7;
  const std::uint8_t sign = std::signbit(f) ? 0x8 : 0x0;
  double a = std::fabs(static_cast<double>(f));
  // e2m1: 1 mantissa bit, minimum normal exponent 0 (1.0), subnormal quantum 0.5.
  double r = std::isinf(a) ? 6.0 : round_to_float_grid(a, 1, 0);
  if (r > 6.0) r = 6.0;
  // r is one of the 8 magnitudes; find its code.
  std::uint8_t code = 0;
  for (std::uint8_t c = 0; c < 8; ++c)
    if (static_cast<double>(kE2m1Values[c]) == r) code = c;
  return static_cast<std::uint8_t>(sign | code);
}

std::uint8_t float_to_e4m3(float f) noexcept {
  const std::uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return static_cast<std::uint8_t>(sign | kE4m3Nan);
  double a = std::fabs(static_cast<double>(f));
  // e4m3: 3 mantissa bits, minimum normal exponent -6, subnormal quantum 2^-9.
  double r = std::isinf(a) ? 448.0 : round_to_float_grid(a, 3, -6);
  if (r > 448.0) r = 448.0;
  std::uint8_t code;
  if (r < 0x1p-6) {
    code = static_cast<std::uint8_t>(r * 512.0);  // r = m * 2^-9, m in 0..7
  } else {
    int e = 0;
    const double frac = std::frexp(r, &e);  // r = frac * 2^e, frac in [0.5, 1)
    const int exp_field = (e - 1) + 7;
    const int mant = static_cast<int>(frac * 16.0) - 8;  // frac*16 in [8, 16), exact
    code = static_cast<std::uint8_t>((exp_field << 3) | mant);
  }
  return static_cast<std::uint8_t>(sign | code);
}

}  // namespace moejit
