// CPU quantizers (include/moejit/quant.hpp) and the GPU quantizer's integer
// arithmetic (kernels/quantize_mxfp4.cuh, compiled here as host C++ and through
// NVRTC for sm_90a).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "codegen/families.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"
#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "reference/rng.hpp"
#include "reference/tensors.hpp"

#include "../../kernels/quantize_mxfp4.cuh"

using namespace moejit;
using moejit::ref::TestRng;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// The GPU kernel's per-block computation, lane by lane, on the host: the warp
// max of |bits|, the scale byte, each lane's code, packing of lane pairs.
std::uint8_t gpu_block_on_host(const std::uint32_t* bits, std::uint8_t* packed) {
  std::uint32_t amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, bits[i] & 0x7FFFFFFFu);
  const std::uint32_t scale = mxq::mx_scale_byte<mxq::E2m1>(amax);
  std::uint32_t code[32];
  for (int i = 0; i < 32; ++i)
    code[i] = scale == 0xFFu ? 0u : mxq::encode_scaled<mxq::E2m1>(bits[i], static_cast<int>(scale) - 127);
  for (int i = 0; i < 16; ++i) packed[i] = static_cast<std::uint8_t>(code[2 * i] | (code[2 * i + 1] << 4));
  return static_cast<std::uint8_t>(scale);
}

// fp32 with the given sign bit, biased exponent (0..255) and mantissa field.
float make_float(std::uint32_t sign, std::uint32_t biased, std::uint32_t mantissa) {
  return from_bits((sign << 31) | (biased << 23) | (mantissa & 0x7FFFFFu));
}

// Why: a generator that is meant to give finite values must give finite values
// for every seed. An ldexp or product that overflows becomes +-Inf, its block
// then (correctly) gets the NaN scale, and a test that expects a finite block
// fails once in a few hundred runs. Clamping keeps the huge-value case.
float finite(float v) {
  return std::isinf(v) ? std::copysign(std::numeric_limits<float>::max(), v) : v;
}

// A random fp32 that exercises every range: normal, subnormal, zero, huge,
// exact e2m1 multiples, ties, and (when allowed) NaN / Inf.
float tricky_float(TestRng& rng, bool allow_nonfinite) {
  switch (rng.integer(0, 9)) {
    case 0: return from_bits(rng.bits32() & 0x807FFFFFu);                      // subnormal or zero
    case 1: return make_float(rng.bits32() & 1, static_cast<std::uint32_t>(rng.integer(1, 254)),  // any normal
                              rng.bits32());
    case 2: return (rng.bits32() & 1 ? -1.0f : 1.0f) *
                   std::ldexp(kE2m1Values[rng.integer(0, 7)], static_cast<int>(rng.integer(-140, 125)));
    case 3: return std::ldexp(static_cast<float>(rng.integer(-12, 12)) * 0.25f, static_cast<int>(rng.integer(-130, 126)));
    case 4:
      if (allow_nonfinite) {
        // Quiet and signalling NaNs of both signs, +-Inf.
        static constexpr std::uint32_t kSpecials[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                                      0x7FFFFFFFu, 0x7F800000u, 0xFF800000u};
        return from_bits(kSpecials[rng.integer(0, 6)]);
      }
      return 0.0f;
    case 5: return -0.0f;
    case 6: return make_float(rng.bits32() & 1, static_cast<std::uint32_t>(rng.integer(240, 254)),  // near FLT_MAX
                              rng.bits32());
    default: return static_cast<float>(rng.normal(0.0, std::ldexp(1.0, static_cast<int>(rng.integer(-20, 20)))));
  }
}

// 32 elements drawn in one of several styles, so that whole blocks (and so
// their scales) cover the range: mixed tricky values, N(0,1), all zero, one
// random binade (up to FLT_MAX), exact e2m1 multiples, blocks at the top of
// fp32 (the largest scale bytes: up to 0xFD for e2m1, 0xF7 for e4m3), blocks
// of subnormals and the smallest normals (scale byte at the 0x00 clamp or just
// above).
std::vector<float> tricky_block(TestRng& rng, bool allow_nonfinite) {
  std::vector<float> x(32);
  const int mode = static_cast<int>(rng.integer(0, 6));
  const int binade = static_cast<int>(rng.integer(-149, 127));
  for (auto& v : x) {
    if (mode == 0) v = tricky_float(rng, allow_nonfinite && rng.integer(0, 40) == 0);
    else if (mode == 1) v = static_cast<float>(rng.normal());
    else if (mode == 2) v = 0.0f;
    else if (mode == 3) v = finite(std::ldexp(static_cast<float>(rng.normal()), binade));
    else if (mode == 4) v = (rng.bits32() & 1 ? -1.0f : 1.0f) * kE2m1Values[rng.integer(0, 7)] * 1024.0f;
    else if (mode == 5) v = make_float(rng.bits32() & 1, static_cast<std::uint32_t>(rng.integer(248, 254)), rng.bits32());
    else v = make_float(rng.bits32() & 1, static_cast<std::uint32_t>(rng.integer(0, 3)), rng.bits32());
  }
  return x;
}

}  // namespace

TEST_CASE("MX scale byte: exact rule for e2m1", "[quant][mxfp4]") {
  CHECK(mx_scale_byte(6.0f, MxElement::e2m1) == 127);
  CHECK(mx_scale_byte(std::nextafter(6.0f, 7.0f), MxElement::e2m1) == 128);
  CHECK(mx_scale_byte(12.0f, MxElement::e2m1) == 128);
  CHECK(mx_scale_byte(4.0f, MxElement::e2m1) == 127);
  CHECK(mx_scale_byte(3.0f, MxElement::e2m1) == 126);
  CHECK(mx_scale_byte(1.0f, MxElement::e2m1) == 125);  // 1 <= 6 * 2^-2, 1 > 6 * 2^-3
  CHECK(mx_scale_byte(0.0f, MxElement::e2m1) == 0x00);
  CHECK(mx_scale_byte(std::numeric_limits<float>::denorm_min(), MxElement::e2m1) == 0x00);
  CHECK(mx_scale_byte(std::numeric_limits<float>::min(), MxElement::e2m1) == 0x00);  // s = -128 clamped
  CHECK(mx_scale_byte(std::numeric_limits<float>::max(), MxElement::e2m1) == 127 + 126);
  CHECK(mx_scale_byte(kNaN, MxElement::e2m1) == 0xFF);
  CHECK(mx_scale_byte(kInf, MxElement::e2m1) == 0xFF);
  // The defining property on random amax values, every biased exponent 0..254.
  // (Not `bits & 0x7F7FFFFF`: that mask also clears bit 23 and so draws only
  // even exponents.)
  TestRng rng(21);
  for (int i = 0; i < 100000; ++i) {
    const float amax = make_float(0, static_cast<std::uint32_t>(rng.integer(0, 254)), rng.bits32());
    const int s = mx_scale_byte(amax, MxElement::e2m1) - 127;
    INFO("amax " << amax << " s " << s);
    REQUIRE(static_cast<double>(amax) <= 6.0 * std::ldexp(1.0, s));
    if (s > -127) REQUIRE(static_cast<double>(amax) > 6.0 * std::ldexp(1.0, s - 1));
    // The GPU's bit formula agrees.
    REQUIRE(mxq::mx_scale_byte<mxq::E2m1>(std::bit_cast<std::uint32_t>(amax)) == static_cast<std::uint32_t>(s + 127));
  }
}

TEST_CASE("MX scale byte: exact rule for e4m3", "[quant][mxfp8]") {
  CHECK(mx_scale_byte(448.0f, MxElement::e4m3) == 127);
  CHECK(mx_scale_byte(449.0f, MxElement::e4m3) == 128);
  CHECK(mx_scale_byte(1.0f, MxElement::e4m3) == 127 - 8);
  TestRng rng(22);
  for (int i = 0; i < 100000; ++i) {
    const float amax = make_float(0, static_cast<std::uint32_t>(rng.integer(0, 254)), rng.bits32());
    const int s = mx_scale_byte(amax, MxElement::e4m3) - 127;
    REQUIRE(static_cast<double>(amax) <= 448.0 * std::ldexp(1.0, s));
    if (s > -127) REQUIRE(static_cast<double>(amax) > 448.0 * std::ldexp(1.0, s - 1));
    REQUIRE(mxq::mx_scale_byte<mxq::E4m3>(std::bit_cast<std::uint32_t>(amax)) == static_cast<std::uint32_t>(s + 127));
  }
}

TEST_CASE("MXFP4 block: packing and hand-checked codes", "[quant][mxfp4]") {
  float x[32] = {1.0f, -6.0f, 0.5f, 3.0f};  // rest 0; amax 6 -> s = 0
  std::uint8_t data[16], scales[1];
  quantize_mxfp4_cpu(x, 1, 32, data, scales);
  CHECK(scales[0] == 127);
  CHECK(data[0] == 0xF2);
  CHECK(data[1] == 0x51);
  for (int i = 2; i < 16; ++i) CHECK(data[i] == 0x00);

  // Same block times 2^10: scale byte 137, same codes.
  for (auto& v : x) v *= 1024.0f;
  quantize_mxfp4_cpu(x, 1, 32, data, scales);
  CHECK(scales[0] == 137);
  CHECK(data[0] == 0xF2);

  // amax 7 -> s = 1; x / 2 = {3.5, 0.5, -1.45, 0.2}: 3.5 is a tie 3 / 4 -> even code 6 (4.0),
  // 0.5 -> code 1, -1.45 -> -1.5 (code 0xB), 0.2 -> +0.
  float y[32] = {7.0f, 1.0f, -2.9f, 0.4f};
  quantize_mxfp4_cpu(y, 1, 32, data, scales);
  CHECK(scales[0] == 128);
  CHECK(data[0] == 0x16);
  CHECK(data[1] == 0x0B);
}

TEST_CASE("MXFP4: exactly representable blocks survive the round trip", "[quant][mxfp4]") {
  TestRng rng(23);
  const std::uint32_t rows = 64, cols = 256;
  std::vector<float> w(rows * cols);
  // Every scale a finite block can have: s from -127 (byte 0x00; 0.5 * 2^-127
  // is an fp32 subnormal, still exact) to 125 (6 * 2^125 < FLT_MAX; 6 * 2^126
  // is not finite). The first blocks pin the ends, the rest are random.
  const int pinned[] = {-127, -126, -125, 124, 125};
  for (std::uint32_t b = 0; b < rows * cols / 32; ++b) {
    const int s = b < std::size(pinned) ? pinned[b] : static_cast<int>(rng.integer(-127, 125));
    for (int i = 0; i < 32; ++i) {
      const float mag = kE2m1Values[rng.integer(0, 7)];
      w[b * 32 + i] = std::ldexp(rng.bits32() & 1 ? -mag : mag, s);
    }
    w[b * 32 + rng.integer(0, 31)] = std::ldexp(rng.bits32() & 1 ? 4.0f : -6.0f, s);  // pins the scale to s
  }
  std::vector<std::uint8_t> data(rows * cols / 2), scales(rows * cols / 32);
  quantize_mxfp4_cpu(w.data(), rows, cols, data.data(), scales.data());
  std::vector<float> back(rows * cols);
  dequantize_mxfp4_cpu(data.data(), scales.data(), rows, cols, back.data());
  for (std::size_t i = 0; i < w.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::bit_cast<std::uint32_t>(back[i]) == std::bit_cast<std::uint32_t>(w[i]));  // -0.0 too
  }
}

TEST_CASE("MXFP4: every element is the nearest e2m1 step of its block (error bound)", "[quant][mxfp4]") {
  TestRng rng(24);
  const std::uint32_t rows = 200, cols = 64;
  std::vector<float> w(rows * cols);
  for (std::uint32_t b = 0; b < rows * cols / 32; ++b) {
    auto blk = tricky_block(rng, false);
    std::copy(blk.begin(), blk.end(), w.begin() + b * 32);
  }
  std::vector<std::uint8_t> data(rows * cols / 2), scales(rows * cols / 32);
  quantize_mxfp4_cpu(w.data(), rows, cols, data.data(), scales.data());
  std::vector<double> back(rows * cols);
  dequantize_mxfp4_cpu(data.data(), scales.data(), rows, cols, back.data());
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double x = w[i];
    const double scale = e8m0_to_double(scales[i / 32]);
    const double y = std::fabs(x) / scale;
    // Half the e2m1 step of y's binade, in units of the scale: 0.25 below 2, 0.5 below 4, 1 above.
    const double half_step = y < 2.0 ? 0.25 : y < 4.0 ? 0.5 : 1.0;
    INFO("element " << i << " x " << x << " scale " << scale << " deq " << back[i]);
    REQUIRE(std::isfinite(x));          // the generator's promise (a failure here is a test bug)
    REQUIRE(scales[i / 32] != 0xFF);    // finite block: never the NaN scale
    REQUIRE(y <= 6.0);  // the scale rule: no element saturates
    REQUIRE(std::fabs(back[i] - x) <= half_step * scale);
    REQUIRE((back[i] == 0.0 || std::signbit(back[i]) == std::signbit(x)));
  }
}

TEST_CASE("MX scale byte: every finite exponent, boundary mantissas, CPU == GPU, never NaN", "[quant][mxfp4][mxfp8]") {
  const std::uint32_t mantissas[] = {0x000000u, 0x000001u, 0x3FFFFFu, 0x400000u, 0x400001u,
                                     0x5FFFFFu, 0x600000u, 0x600001u, 0x7FFFFFu};
  for (std::uint32_t biased = 0; biased <= 254; ++biased) {
    for (std::uint32_t m : mantissas) {
      const float amax = make_float(0, biased, m);
      INFO("amax bits " << std::bit_cast<std::uint32_t>(amax));
      const std::uint8_t b4 = mx_scale_byte(amax, MxElement::e2m1);
      const std::uint8_t b8 = mx_scale_byte(amax, MxElement::e4m3);
      REQUIRE(b4 != 0xFF);
      REQUIRE(b8 != 0xFF);
      REQUIRE(mxq::mx_scale_byte<mxq::E2m1>(std::bit_cast<std::uint32_t>(amax)) == b4);
      REQUIRE(mxq::mx_scale_byte<mxq::E4m3>(std::bit_cast<std::uint32_t>(amax)) == b8);
      // The rule, in exact double arithmetic.
      REQUIRE(static_cast<double>(amax) <= 6.0 * e8m0_to_double(b4));
      REQUIRE(static_cast<double>(amax) <= 448.0 * e8m0_to_double(b8));
      if (b4 > 0) REQUIRE(static_cast<double>(amax) > 3.0 * e8m0_to_double(b4));
      if (b8 > 0) REQUIRE(static_cast<double>(amax) > 224.0 * e8m0_to_double(b8));
    }
  }
  // The top: FLT_MAX needs s = 126 (e2m1) / 120 (e4m3); the clamp at 127
  // (byte 0xFE) is never reached by finite fp32, so 0xFF only ever means NaN/Inf.
  const float fmax = std::numeric_limits<float>::max();
  CHECK(mx_scale_byte(fmax, MxElement::e2m1) == 0xFD);
  CHECK(mx_scale_byte(fmax, MxElement::e4m3) == 0xF7);
  CHECK(mx_scale_byte(std::ldexp(6.0f, 125), MxElement::e2m1) == 0xFC);  // 1.5 * 2^127: exactly 6 * 2^125
  CHECK(mx_scale_byte(std::nextafter(std::ldexp(6.0f, 125), kInf), MxElement::e2m1) == 0xFD);
  CHECK(mxq::mx_scale_byte<mxq::E2m1>(0x7F800000u) == 0xFFu);  // Inf
  CHECK(mxq::mx_scale_byte<mxq::E2m1>(0x7F800001u) == 0xFFu);  // NaN
  CHECK(mxq::mx_scale_byte<mxq::E4m3>(0x7FC00000u) == 0xFFu);
}

TEST_CASE("MXFP4 / MXFP8: blocks at the top of the fp32 range stay finite", "[quant][mxfp4][mxfp8]") {
  const float fmax = std::numeric_limits<float>::max();
  float x[32] = {};
  x[0] = fmax;                      // / 2^126 = 4 - 2^-22 -> 4 (code 6)
  x[1] = -fmax;                     // -> code 0xE
  x[2] = std::ldexp(1.0f, 127);     // / 2^126 = 2 (code 4)
  x[3] = -4.95176e+28f;             // tiny next to the scale: -0 (code 8)
  x[4] = std::ldexp(-3.0f, 125);    // / 2^126 = -1.5 (code 0xB)
  x[5] = std::ldexp(2.5f, 126);     // / 2^126 = 2.5: a tie 2 / 3 -> even code 4 (2.0)
  std::uint8_t data[16], scales[1], gpu[16];
  quantize_mxfp4_cpu(x, 1, 32, data, scales);
  CHECK(scales[0] == 0xFD);
  CHECK(data[0] == 0xE6);
  CHECK(data[1] == 0x84);
  CHECK(data[2] == 0x4B);
  std::uint32_t bits[32];
  for (int i = 0; i < 32; ++i) bits[i] = std::bit_cast<std::uint32_t>(x[i]);
  CHECK(gpu_block_on_host(bits, gpu) == scales[0]);
  CHECK(std::memcmp(gpu, data, 16) == 0);
  std::vector<double> back(32);
  dequantize_mxfp4_cpu(data, scales, 1, 32, back.data());
  CHECK(back[0] == std::ldexp(4.0, 126));
  CHECK(back[1] == -std::ldexp(4.0, 126));
  for (double v : back) CHECK(std::isfinite(v));

  // MXFP8: s = 120; FLT_MAX / 2^120 = 256 - 2^-16 -> 256 (0x78).
  std::uint8_t codes[32], scale8[1];
  quantize_mxfp8_cpu(x, 1, 32, codes, scale8);
  CHECK(scale8[0] == 0xF7);
  CHECK(codes[0] == 0x78);
  CHECK(codes[1] == 0xF8);
  for (int i = 0; i < 32; ++i) {
    INFO("element " << i);
    CHECK(mxq::encode_scaled<mxq::E4m3>(bits[i], 120) == codes[i]);
    CHECK((codes[i] & 0x7F) != 0x7F);  // never the NaN code
  }
}

TEST_CASE("MXFP4: NaN / Inf blocks get the NaN scale, other blocks unaffected", "[quant][mxfp4]") {
  std::vector<float> w(3 * 32, 1.0f);
  w[32 + 5] = kNaN;
  w[64 + 31] = -kInf;
  std::vector<std::uint8_t> data(3 * 16, 0xAA), scales(3, 0xAA);
  quantize_mxfp4_cpu(w.data(), 1, 96, data.data(), scales.data());
  CHECK(scales[0] == 125);
  CHECK(scales[1] == 0xFF);
  CHECK(scales[2] == 0xFF);
  for (int i = 16; i < 48; ++i) CHECK(data[i] == 0x00);
  std::vector<double> back(96);
  dequantize_mxfp4_cpu(data.data(), scales.data(), 1, 96, back.data());
  for (int i = 0; i < 32; ++i) CHECK(back[i] == 1.0);
  for (int i = 32; i < 96; ++i) CHECK(std::isnan(back[i]));
}

TEST_CASE("MXFP4: all-zero block -> scale byte 0x00, zero codes (sign kept)", "[quant][mxfp4]") {
  float x[32] = {};
  x[3] = -0.0f;
  std::uint8_t data[16], scales[1];
  quantize_mxfp4_cpu(x, 1, 32, data, scales);
  CHECK(scales[0] == 0x00);
  CHECK(data[1] == 0x80);  // element 3 = odd element of byte 1: -0 is code 0x8
  for (int i = 0; i < 16; ++i)
    if (i != 1) CHECK(data[i] == 0x00);
}

TEST_CASE("MXFP4: bf16 input equals fp32 input of the widened values", "[quant][mxfp4]") {
  TestRng rng(25);
  const std::uint32_t rows = 33, cols = 96;
  auto w16 = moejit::ref::random_bf16(rows * cols, rng, 3.0);
  w16[7] = 0x7FC0;  // NaN in block 0
  w16[100] = 0x0001;  // subnormal
  std::vector<float> w32(w16.size());
  for (std::size_t i = 0; i < w16.size(); ++i) w32[i] = bf16_to_float(w16[i]);
  std::vector<std::uint8_t> d1(rows * cols / 2), s1(rows * cols / 32), d2(d1.size()), s2(s1.size());
  quantize_mxfp4_cpu(w16.data(), rows, cols, d1.data(), s1.data());
  quantize_mxfp4_cpu(w32.data(), rows, cols, d2.data(), s2.data());
  CHECK(d1 == d2);
  CHECK(s1 == s2);
  CHECK(s1[0] == 0xFF);
}

TEST_CASE("quantizers reject cols % 32 != 0 and null pointers", "[quant]") {
  std::vector<float> w(48 * 2);
  std::vector<std::uint8_t> data(48), scales(4);
  std::string message;
  try {
    quantize_mxfp4_cpu(w.data(), 2, 48, data.data(), scales.data());
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("cols = 48") != std::string::npos);
  CHECK_THROWS_AS(quantize_mxfp8_cpu(w.data(), 2, 48, data.data(), scales.data()), InvalidArgument);
  CHECK_THROWS_AS(dequantize_mxfp4_cpu(data.data(), scales.data(), 2, 48, w.data()), InvalidArgument);
  CHECK_THROWS_AS(quantize_mxfp4_cpu(static_cast<const float*>(nullptr), 2, 32, data.data(), scales.data()),
                  InvalidArgument);
  CHECK_THROWS_AS(quantize_mxfp4_cpu(w.data(), 2, 32, nullptr, scales.data()), InvalidArgument);
  // Nothing to do: no throw, nothing written.
  CHECK_NOTHROW(quantize_mxfp4_cpu(static_cast<const float*>(nullptr), 0, 32, nullptr, nullptr));
}

TEST_CASE("GPU quantizer arithmetic (host build of the .cuh) matches the CPU quantizer bit for bit",
          "[quant][mxfp4][gpu-math]") {
  TestRng rng(26);
  std::uint64_t nan_blocks = 0, zero_blocks = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    const auto x = tricky_block(rng, true);
    std::uint32_t bits[32];
    for (int i = 0; i < 32; ++i) bits[i] = std::bit_cast<std::uint32_t>(x[i]);
    std::uint8_t cpu[16], gpu[16];
    const std::uint8_t s_cpu = quantize_mxfp4_block(x.data(), cpu);
    const std::uint8_t s_gpu = gpu_block_on_host(bits, gpu);
    nan_blocks += s_cpu == 0xFF;
    zero_blocks += s_cpu == 0x00;
    INFO("iteration " << iter << " x[0] " << x[0]);
    REQUIRE(s_cpu == s_gpu);
    REQUIRE(std::memcmp(cpu, gpu, 16) == 0);
  }
  CHECK(nan_blocks > 0);
  CHECK(zero_blocks > 0);
}

TEST_CASE("GPU e4m3 arithmetic (host build of the .cuh) matches the CPU MXFP8 quantizer", "[quant][mxfp8][gpu-math]") {
  TestRng rng(27);
  for (int iter = 0; iter < 20000; ++iter) {
    const auto x = tricky_block(rng, true);
    std::uint8_t cpu[32];
    const std::uint8_t s_cpu = quantize_mxfp8_block(x.data(), cpu);
    std::uint32_t amax = 0;
    for (float v : x) amax = std::max(amax, std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu);
    const std::uint32_t s_gpu = mxq::mx_scale_byte<mxq::E4m3>(amax);
    REQUIRE(s_gpu == s_cpu);
    for (int i = 0; i < 32; ++i) {
      const std::uint32_t code =
          s_gpu == 0xFF ? 0u : mxq::encode_scaled<mxq::E4m3>(std::bit_cast<std::uint32_t>(x[i]), static_cast<int>(s_gpu) - 127);
      INFO("iteration " << iter << " element " << i << " x " << x[i]);
      REQUIRE(code == cpu[i]);
    }
  }
}

TEST_CASE("GPU element encoder (host build) equals float_to_e2m1 / float_to_e4m3 with s = 0", "[quant][gpu-math]") {
  // NaN and Inf, by hand. e4m3fn: NaN -> S.1111.111 with the input's sign
  // (0x7F / 0xFF, OCP OFP8); e2m1 has no NaN: +6 (0x7) whatever the sign.
  // Inf saturates to +-max in both.
  struct Special { std::uint32_t bits; std::uint32_t e2m1, e4m3; };
  const Special specials[] = {
      {0x7FC00000u, 0x7, 0x7F}, {0xFFC00000u, 0x7, 0xFF}, {0x7F800001u, 0x7, 0x7F},
      {0xFF800001u, 0x7, 0xFF}, {0x7FFFFFFFu, 0x7, 0x7F}, {0xFFFFFFFFu, 0x7, 0xFF},
      {0x7F800000u, 0x7, 0x7E}, {0xFF800000u, 0xF, 0xFE},
  };
  for (const Special& c : specials) {
    INFO("bits " << c.bits);
    const float x = from_bits(c.bits);
    CHECK(mxq::encode_scaled<mxq::E2m1>(c.bits, 0) == c.e2m1);
    CHECK(mxq::encode_scaled<mxq::E4m3>(c.bits, 0) == c.e4m3);
    CHECK(float_to_e2m1(x) == c.e2m1);
    CHECK(float_to_e4m3(x) == c.e4m3);
    // Any scale: NaN and Inf do not depend on it.
    CHECK(mxq::encode_scaled<mxq::E4m3>(c.bits, -127) == c.e4m3);
    CHECK(mxq::encode_scaled<mxq::E4m3>(c.bits, 127) == c.e4m3);
    CHECK(mxq::encode_scaled<mxq::E2m1>(c.bits, -127) == c.e2m1);
  }
  TestRng rng(28);
  for (int i = 0; i < 300000; ++i) {
    const float x = tricky_float(rng, i % 8 == 0);  // NaN / Inf now and then
    const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
    INFO("x " << x << " bits " << b);
    REQUIRE(mxq::encode_scaled<mxq::E2m1>(b, 0) == float_to_e2m1(x));
    REQUIRE(mxq::encode_scaled<mxq::E4m3>(b, 0) == float_to_e4m3(x));
  }
}

TEST_CASE("MXFP8: round trip and error bound", "[quant][mxfp8]") {
  TestRng rng(29);
  const std::uint32_t rows = 50, cols = 128;
  auto w = moejit::ref::random_f32(rows * cols, rng, 10.0);
  std::vector<std::uint8_t> data(rows * cols), scales(rows * cols / 32);
  quantize_mxfp8_cpu(w.data(), rows, cols, data.data(), scales.data());
  std::vector<double> back(rows * cols);
  dequantize_mxfp8_cpu(data.data(), scales.data(), rows, cols, back.data());
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double scale = e8m0_to_double(scales[i / 32]);
    const double y = std::fabs(static_cast<double>(w[i])) / scale;
    REQUIRE(y <= 448.0);
    // Half a step of e4m3 at y: 2^(floor(log2 y) - 4), at least 2^-10 (subnormals).
    const double half = y < std::ldexp(1.0, -6) ? std::ldexp(1.0, -10) : std::ldexp(1.0, static_cast<int>(std::floor(std::log2(y))) - 4);
    REQUIRE(std::fabs(back[i] - w[i]) <= half * scale * (1 + 1e-12));
  }
  // Exactly representable values survive: every e4m3 code times 2^s with the max pinned at 448.
  std::vector<float> ex(32);
  for (int i = 0; i < 32; ++i) ex[i] = std::ldexp(e4m3_to_float(static_cast<std::uint8_t>(rng.integer(0, 0x7E) | (i % 2 ? 0x80 : 0))), 5);
  ex[9] = std::ldexp(448.0f, 5);
  std::uint8_t d8[32], scale8[1];
  quantize_mxfp8_cpu(ex.data(), 1, 32, d8, scale8);
  CHECK(scale8[0] == 127 + 5);
  std::vector<double> b8(32);
  dequantize_mxfp8_cpu(d8, scale8, 1, 32, b8.data());
  for (int i = 0; i < 32; ++i) CHECK(b8[i] == static_cast<double>(ex[i]));
}

TEST_CASE("per-token FP8: scale = amax / 448, codes RNE, specials", "[quant][fp8]") {
  const std::uint32_t cols = 5;
  const float x[4 * cols] = {
      1.0f, -2.0f, 448.0f, 0.0f, 3.0f,    // amax 448 -> scale 1
      0.5f, 0.25f, -1.0f, 0.0f, 0.125f,   // amax 1 -> scale 1/448
      0.0f, -0.0f, 0.0f, 0.0f, 0.0f,      // zero row
      1.0f, kNaN, 1.0f, 1.0f, 1.0f,       // NaN row
  };
  std::uint8_t data[4 * cols];
  float scales[4];
  quantize_fp8_per_token_cpu(x, 4, cols, data, scales);
  CHECK(scales[0] == 1.0f);
  CHECK(data[0] == float_to_e4m3(1.0f));
  CHECK(data[1] == float_to_e4m3(-2.0f));
  CHECK(data[2] == 0x7E);
  CHECK(scales[1] == 1.0f / 448.0f);
  CHECK(data[7] == 0xFE);  // -1 / (1/448) = -448
  CHECK(scales[2] == 1.0f);
  CHECK(data[10] == 0x00);
  CHECK(data[11] == 0x80);
  CHECK(std::isnan(scales[3]));
  for (int i = 15; i < 20; ++i) CHECK(data[i] == 0x00);
  // Random rows: relative error of each element below 2^-4 of the row amax scale.
  TestRng rng(30);
  const std::uint32_t rows = 40, n = 300;
  auto v = moejit::ref::random_f32(rows * n, rng, 5.0);
  std::vector<std::uint8_t> d(rows * n);
  std::vector<float> s(rows);
  quantize_fp8_per_token_cpu(v.data(), rows, n, d.data(), s.data());
  std::vector<double> back(rows * n);
  dequantize_fp8_per_token_cpu(d.data(), s.data(), rows, n, back.data());
  for (std::uint32_t r = 0; r < rows; ++r) {
    bool has_max = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      const double err = std::fabs(back[r * n + i] - v[r * n + i]);
      REQUIRE(err <= std::max(std::fabs(static_cast<double>(v[r * n + i])) / 16.0, s[r] * std::ldexp(1.0, -10)) * (1 + 1e-6));
      has_max = has_max || (d[r * n + i] & 0x7F) == 0x7E;
    }
    CHECK(has_max);  // the row's amax lands on +-448
  }
  // bf16 overload equals fp32 of widened values.
  auto in_bf16 = moejit::ref::random_bf16(rows * n, rng);
  std::vector<float> in_f32(in_bf16.size());
  for (std::size_t i = 0; i < in_bf16.size(); ++i) in_f32[i] = bf16_to_float(in_bf16[i]);
  std::vector<std::uint8_t> da(rows * n), db(rows * n);
  std::vector<float> sa(rows), sb(rows);
  quantize_fp8_per_token_cpu(in_bf16.data(), rows, n, da.data(), sa.data());
  quantize_fp8_per_token_cpu(in_f32.data(), rows, n, db.data(), sb.data());
  CHECK(da == db);
  CHECK(sa == sb);
}

TEST_CASE("quantize key and generated source", "[quant][codegen]") {
  const SpecKey key = quantize_mxfp4_key(2880);
  CHECK(key.op == OpKind::quantize);
  CHECK(key.quant == QuantMode::w4a16_mxfp4);
  CHECK(key.n == 2880);
  CHECK(key.k == 0);
  CHECK(key.weight_scale == WeightScale::e8m0_block32);
  CHECK(key.out_dtype == DType::u8);
  CHECK_NOTHROW(validate(key));
  CHECK_THROWS_AS(quantize_mxfp4_key(100), InvalidArgument);
  const auto ks = codegen::generate(key);
  CHECK(ks.name_expression == "moejit::mxq::quantize_mxfp4_kernel<256>");
  CHECK(ks.launch.block_threads == mxq::QuantizeTraits::kBlockThreads);
  CHECK(ks.source.find("#include") == std::string::npos);  // NVRTC-clean: no includes at all
  // One source for every column count: all quantize keys share a cache entry.
  CHECK(codegen::generate(quantize_mxfp4_key(64)).source == ks.source);
  SpecKey bad = key;
  bad.quant = QuantMode::mxfp8;
  bad.weight_scale = WeightScale::e8m0_block32;
  CHECK_THROWS_AS(codegen::generate(bad), InvalidArgument);
  bad = key;
  bad.out_dtype = DType::bf16;
  CHECK_THROWS_AS(codegen::generate(bad), InvalidArgument);
}

TEST_CASE("GPU quantizer source compiles with NVRTC for sm_90a", "[quant][codegen][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  const SpecKey key = quantize_mxfp4_key(2880);
  const auto ks = codegen::generate(key);
  const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
  CHECK(!out.cubin.empty());
  CHECK(out.lowered_name.find("quantize_mxfp4_kernel") != std::string::npos);
  INFO(out.log);
  CHECK(out.resources.registers > 0);
  CHECK(out.resources.registers <= 64);  // __launch_bounds__(256): plenty of headroom
  CHECK(out.resources.spill_store_bytes == 0);
  CHECK(out.resources.spill_load_bytes == 0);
}
