#pragma once
// Scalar number formats used by moejit's weights, activations and scales.
//
// Sources:
//   - OCP Microscaling Formats (MX) Specification v1.0 (2023), section 5.3
//     (E8M0 scale: 8 exponent bits, bias 127, no sign, no mantissa; 0xFF = NaN)
//     and section 5.3.3 (FP4 E2M1: bias 1, no Inf, no NaN, max normal 6.0).
//   - OCP 8-bit Floating Point Specification (OFP8) rev 1.0 (2023): E4M3
//     ("e4m3fn": bias 7, no Inf, NaN = S.1111.111 i.e. 0x7F / 0xFF, max 448).
//   - bfloat16: the upper 16 bits of an IEEE-754 binary32.
//
// Conventions (moejit, see docs/formats.md):
//   - Every encoder rounds to nearest, ties to even (RNE), computed exactly
//     (no dependence on the floating-point environment's rounding mode).
//   - Narrow encoders saturate: a finite value beyond the format's largest
//     finite magnitude encodes as that magnitude with the input's sign.
//   - The sign of zero and of values that round to zero is kept (-0.1 -> e2m1 0x8).
//   - e2m1 packing: two codes per byte, the even-indexed element in the LOW nibble.
//
// Decoders are constexpr and branch-light: usable in inner loops of references.
#include <bit>
#include <cstdint>
#include <limits>

namespace moejit {

// ---------------------------------------------------------------- bfloat16 --

// Exact: a bf16 is the high half of an fp32.
constexpr float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// fp32 -> bf16, round to nearest even. Finite values that round past the
// largest bf16 become +-Inf (IEEE overflow behaviour, no saturation); Inf stays
// Inf. NaN stays NaN: sign and the top 7 payload bits are kept and the quiet
// bit (0x0040) is set, so a payload living only in the low 16 bits cannot turn
// the result into Inf.
constexpr std::uint16_t float_to_bf16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

// ------------------------------------------------------------- e2m1 (FP4) --
// Code layout: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa.
// Magnitudes by code 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; codes 8..15 are the negatives
// (8 is -0.0).

inline constexpr float kE2m1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
inline constexpr float kE2m1Max = 6.0f;

// Value of the low 4 bits of `nibble` (higher bits ignored).
constexpr float e2m1_to_float(std::uint8_t nibble) noexcept { return kE2m1Values[nibble & 0xF]; }

// fp32 -> e2m1 code (0..15), RNE on the e2m1 grid, saturating at +-6 (Inf -> +-6).
// NaN has no e2m1 encoding: it returns +6 (0x7). The MXFP4 block quantizer never
// calls this with NaN: a block holding NaN or Inf gets the NaN scale instead
// (see quant.hpp).
std::uint8_t float_to_e2m1(float f) noexcept;

// Two codes in one byte: `even` (element 2i) in bits 3..0, `odd` (element 2i+1)
// in bits 7..4. pack_e2m1(e2m1(1.0), e2m1(-6.0)) == 0xF2.
constexpr std::uint8_t pack_e2m1(std::uint8_t even, std::uint8_t odd) noexcept {
  return static_cast<std::uint8_t>((even & 0xF) | ((odd & 0xF) << 4));
}
// Element i (0 or 1 within the byte) of a packed pair.
constexpr std::uint8_t unpack_e2m1(std::uint8_t byte, unsigned i) noexcept {
  return static_cast<std::uint8_t>(i ? byte >> 4 : byte & 0xF);
}

// --------------------------------------------------------------- E8M0 -------
// One unsigned byte, value 2^(byte - 127); 0xFF is NaN (OCP MX v1.0, 5.3).

inline constexpr std::uint8_t kE8m0Nan = 0xFF;
inline constexpr int kE8m0Bias = 127;
inline constexpr int kE8m0MinExponent = -127;  // byte 0x00
inline constexpr int kE8m0MaxExponent = 127;   // byte 0xFE

// Exact fp32 value. 0x00 -> 2^-127 (fp32 subnormal, bits 0x00400000), 0x01 -> 2^-126,
// 0x7F -> 1.0, 0xFE -> 2^127, 0xFF -> NaN. Why not `bit_cast<float>(byte << 23)`:
// that gives 0.0 for 0x00 and +Inf for 0xFF.
constexpr float e8m0_to_float(std::uint8_t byte) noexcept {
  if (byte == kE8m0Nan) return std::numeric_limits<float>::quiet_NaN();
  if (byte == 0) return std::bit_cast<float>(std::uint32_t{0x00400000u});
  return std::bit_cast<float>(static_cast<std::uint32_t>(byte) << 23);
}

// Exact double value (every E8M0 value is a normal double). 0xFF -> NaN.
constexpr double e8m0_to_double(std::uint8_t byte) noexcept {
  if (byte == kE8m0Nan) return std::numeric_limits<double>::quiet_NaN();
  const std::uint64_t biased = static_cast<std::uint64_t>(int{byte} - kE8m0Bias + 1023);
  return std::bit_cast<double>(biased << 52);
}

// Byte of 2^exponent. Precondition: kE8m0MinExponent <= exponent <= kE8m0MaxExponent
// (callers clamp first; out-of-range values are clamped here too, never NaN).
constexpr std::uint8_t e8m0_from_exponent(int exponent) noexcept {
  if (exponent < kE8m0MinExponent) exponent = kE8m0MinExponent;
  if (exponent > kE8m0MaxExponent) exponent = kE8m0MaxExponent;
  return static_cast<std::uint8_t>(exponent + kE8m0Bias);
}

// ------------------------------------------------------- e4m3fn (OCP FP8) --
// Code layout: bit 7 sign, bits 6..3 exponent (bias 7), bits 2..0 mantissa.
// Exponent field 0: subnormals m * 2^-9. No infinities. S.1111.111 (0x7F, 0xFF)
// is NaN; S.1111.110 = +-448 is the largest finite magnitude.

inline constexpr float kE4m3Max = 448.0f;
inline constexpr std::uint8_t kE4m3Nan = 0x7F;

// Exact value of an e4m3fn code; 0x7F / 0xFF -> NaN, 0x80 -> -0.0.
constexpr float e4m3_to_float(std::uint8_t code) noexcept {
  const bool neg = (code & 0x80) != 0;
  const unsigned e = (code >> 3) & 0xF, m = code & 0x7;
  if (e == 0xF && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
  std::uint32_t bits;
  if (e == 0) {
    // m * 2^-9: build the fp32 directly (m <= 7 is exact as a small integer times 2^-9).
    const float mag = static_cast<float>(m) * 0.001953125f;  // 2^-9
    bits = std::bit_cast<std::uint32_t>(mag);
  } else {
    bits = ((e - 7 + 127) << 23) | (m << 20);
  }
  return std::bit_cast<float>(bits | (neg ? 0x80000000u : 0u));
}

// fp32 -> e4m3fn, RNE, saturating: finite values beyond 448 (after rounding) and
// +-Inf encode as +-448 (0x7E / 0xFE). NaN -> 0x7F with the input's sign bit
// (0x7F or 0xFF).
std::uint8_t float_to_e4m3(float f) noexcept;

// ----------------------------------------------------------- utilities -----

// Round |a| (finite, >= 0) to the nearest value, ties to even, of a binary
// floating-point grid with `mantissa_bits` explicit mantissa bits and minimum
// normal exponent `min_exponent` (subnormals below it), without an upper limit.
// Exact for any double input whose rounded result is representable in double.
// Used by the CPU encoders; exposed for tests.
double round_to_float_grid(double a, int mantissa_bits, int min_exponent) noexcept;

}  // namespace moejit
