// Scalar formats: bf16, e2m1, E8M0, e4m3fn (include/moejit/formats.hpp).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "moejit/formats.hpp"
#include "reference/rng.hpp"

using namespace moejit;

namespace {

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// Brute force: nearest of `values` (all finite, ascending magnitudes of one
// sign) to |x|, ties to the even code. Independent of the encoders under test.
template <class Decode>
unsigned nearest_code_brute(double a, unsigned ncodes, Decode decode) {
  unsigned best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (unsigned c = 0; c < ncodes; ++c) {
    const double d = std::fabs(static_cast<double>(decode(c)) - a);
    if (d < best_d || (d == best_d && (c % 2 == 0))) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

// Reference fp32 -> bf16 for a finite input, from the definition: the two
// bf16 neighbours of f (truncation and one step up in magnitude), their exact
// distances to f in double, nearest wins, a tie goes to the even code.
// Unbounded exponent (IEEE 754 overflow rule): past the largest finite bf16
// (0x7F7F, (2 - 2^-7) * 2^127) the next step is 2^128, and a value that
// rounds there overflows to Inf (whose encoding is exactly that next step,
// 0x7F80 / 0xFF80). Example: 0xFF7FFF74 lies 140 fp32 ulps from -2^128 and
// 65396 from -max, so it rounds to -Inf (0xFF80), as cvt.rn.bf16.f32 does on
// the GPU. (A reference that measured the distance to Inf itself found it
// infinite and expected -max, 0xFF7F: wrong.)
std::uint16_t bf16_rne_reference(std::uint32_t u) {
  const float f = from_bits(u);
  const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  const double dlo = std::fabs(static_cast<double>(bf16_to_float(lo)) - f);
  const double vhi = (hi & 0x7FFF) == 0x7F80 ? std::copysign(std::ldexp(1.0, 128), f)
                                             : static_cast<double>(bf16_to_float(hi));
  const double dhi = std::fabs(vhi - f);
  return dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
}

// Inputs around every decision point of a scalar encoder: each finite value
// of the format and each midpoint between neighbours, plus the fp32
// neighbours of both, for both signs. Random draws almost never land on a tie
// exactly; this list always does.
std::vector<float> decision_points(const std::vector<double>& ascending_values) {
  std::vector<double> points(ascending_values);
  for (std::size_t i = 0; i + 1 < ascending_values.size(); ++i)
    points.push_back((ascending_values[i] + ascending_values[i + 1]) / 2.0);
  std::vector<float> out;
  for (double p : points) {
    const float f = static_cast<float>(p);
    REQUIRE(static_cast<double>(f) == p);  // every point is an fp32 (exact midpoint)
    for (float v : {std::nextafter(f, -1.0f), f, std::nextafter(f, 1e30f)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("e2m1 table: all 16 codes", "[formats][e2m1]") {
  const float expected[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (unsigned c = 0; c < 16; ++c) {
    INFO("code " << c);
    CHECK(bits_of(e2m1_to_float(static_cast<std::uint8_t>(c))) == bits_of(expected[c]));
    // Every code survives encode(decode(code)), -0.0 included (sign of zero kept).
    CHECK(float_to_e2m1(expected[c]) == c);
  }
  CHECK(e2m1_to_float(0xF7) == 6.0f);  // high bits ignored
}

TEST_CASE("e2m1 packing: even element in the low nibble", "[formats][e2m1]") {
  CHECK(pack_e2m1(float_to_e2m1(1.0f), float_to_e2m1(-6.0f)) == 0xF2);
  CHECK(pack_e2m1(float_to_e2m1(0.5f), float_to_e2m1(3.0f)) == 0x51);
  CHECK(unpack_e2m1(0xF2, 0) == 0x2);
  CHECK(unpack_e2m1(0xF2, 1) == 0xF);
  CHECK(e2m1_to_float(unpack_e2m1(0x51, 0)) == 0.5f);
  CHECK(e2m1_to_float(unpack_e2m1(0x51, 1)) == 3.0f);
}

TEST_CASE("e2m1 encoding: RNE, ties to even, saturation, specials", "[formats][e2m1]") {
  struct Case { float in; std::uint8_t code; };
  const Case cases[] = {
      {0.25f, 0x0},  {0.2500001f, 0x1}, {0.75f, 0x2},  {1.25f, 0x2}, {1.75f, 0x4},
      {2.5f, 0x4},   {3.5f, 0x6},       {5.0f, 0x6},   {5.0000005f, 0x7}, {6.9f, 0x7},
      {7.0f, 0x7},   {1e30f, 0x7},      {-0.75f, 0xA}, {-5.0f, 0xE}, {-100.0f, 0xF},
      {-0.1f, 0x8},  {-0.0f, 0x8},      {1e-40f, 0x0}, {0.2499999f, 0x0},
      {std::numeric_limits<float>::infinity(), 0x7}, {-std::numeric_limits<float>::infinity(), 0xF},
  };
  for (const Case& c : cases) {
    INFO("input " << c.in);
    CHECK(float_to_e2m1(c.in) == c.code);
  }
  CHECK(float_to_e2m1(std::numeric_limits<float>::quiet_NaN()) == 0x7);
}

TEST_CASE("e2m1 encoding matches a brute-force nearest search", "[formats][e2m1]") {
  const auto expect_of = [](float x) {
    const double a = std::fabs(static_cast<double>(x));
    unsigned expect = nearest_code_brute(std::min(a, 6.0), 8, [](unsigned c) { return kE2m1Values[c]; });
    if (std::signbit(x)) expect |= 0x8;
    return expect;
  };
  // Every tie and code boundary, exactly and one fp32 ulp either side.
  for (float x : decision_points({0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0})) {
    INFO("x = " << x);
    REQUIRE(float_to_e2m1(x) == expect_of(x));
  }
  moejit::ref::TestRng rng(11);
  for (int i = 0; i < 200000; ++i) {
    // Mostly values in [-8, 8), some far outside, some on the 1/8 grid (ties
    // and exact codes, which uniform draws essentially never hit).
    const float x = i % 10 == 0   ? static_cast<float>(rng.uniform(-1e6, 1e6))
                    : i % 10 == 1 ? static_cast<float>(rng.integer(-64, 64)) * 0.125f
                                  : static_cast<float>(rng.uniform(-8, 8));
    INFO("x = " << x);
    REQUIRE(float_to_e2m1(x) == expect_of(x));
  }
}

TEST_CASE("E8M0 edge codes", "[formats][e8m0]") {
  CHECK(bits_of(e8m0_to_float(0x00)) == 0x00400000u);  // 2^-127, subnormal
  CHECK(e8m0_to_float(0x00) == std::ldexp(1.0f, -127));
  CHECK(bits_of(e8m0_to_float(0x01)) == 0x00800000u);  // 2^-126
  CHECK(e8m0_to_float(0x7F) == 1.0f);
  CHECK(e8m0_to_float(0x7E) == 0.5f);
  CHECK(e8m0_to_float(0x80) == 2.0f);
  CHECK(bits_of(e8m0_to_float(0xFE)) == 0x7F000000u);  // 2^127
  CHECK(std::isnan(e8m0_to_float(0xFF)));
  CHECK(e8m0_to_double(0x00) == std::ldexp(1.0, -127));
  CHECK(e8m0_to_double(0x01) == std::ldexp(1.0, -126));
  CHECK(e8m0_to_double(0x7F) == 1.0);
  CHECK(e8m0_to_double(0xFE) == std::ldexp(1.0, 127));
  CHECK(std::isnan(e8m0_to_double(0xFF)));
  for (int b = 0; b < 255; ++b) {
    INFO("byte " << b);
    CHECK(e8m0_to_double(static_cast<std::uint8_t>(b)) == std::ldexp(1.0, b - 127));
    CHECK(static_cast<double>(e8m0_to_float(static_cast<std::uint8_t>(b))) == std::ldexp(1.0, b - 127));
  }
  CHECK(e8m0_from_exponent(0) == 0x7F);
  CHECK(e8m0_from_exponent(-127) == 0x00);
  CHECK(e8m0_from_exponent(127) == 0xFE);
  CHECK(e8m0_from_exponent(-500) == 0x00);  // clamped, never NaN
  CHECK(e8m0_from_exponent(500) == 0xFE);
  static_assert(e8m0_to_float(0x7F) == 1.0f, "decoders are constexpr");
  static_assert(e8m0_to_double(0x80) == 2.0, "decoders are constexpr");
}

TEST_CASE("bf16: RNE, ties to even, overflow, NaN preserved", "[formats][bf16]") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(from_bits(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(float_to_bf16(from_bits(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(float_to_bf16(from_bits(0x3F808001u)) == 0x3F81);  // above the tie
  CHECK(float_to_bf16(from_bits(0x3F807FFFu)) == 0x3F80);  // below the tie
  CHECK(float_to_bf16(from_bits(0xBF818000u)) == 0xBF82);  // negative tie
  CHECK(float_to_bf16(from_bits(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds to +Inf
  CHECK(float_to_bf16(from_bits(0x7F7F7FFFu)) == 0x7F7F);  // stays finite
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  CHECK(float_to_bf16(from_bits(0x00000001u)) == 0x0000);  // smallest subnormal rounds to 0
  CHECK(float_to_bf16(from_bits(0x00008000u)) == 0x0000);  // tie to even 0
  CHECK(float_to_bf16(from_bits(0x00018000u)) == 0x0002);
  // NaN: stays NaN, quiet bit set, sign and top payload kept.
  CHECK(float_to_bf16(from_bits(0x7FC00000u)) == 0x7FC0);
  CHECK(float_to_bf16(from_bits(0x7F800001u)) == 0x7FC0);  // signalling NaN with low payload only
  CHECK(float_to_bf16(from_bits(0xFF800001u)) == 0xFFC0);
  CHECK(float_to_bf16(from_bits(0x7FA00000u)) == 0x7FE0);
  CHECK(bf16_to_float(0x3F80) == 1.0f);
  CHECK(bf16_to_float(0xC040) == -3.0f);
  // Every bf16 survives widening and narrowing.
  for (unsigned b = 0; b < 65536; ++b) {
    const std::uint16_t code = static_cast<std::uint16_t>(b);
    const float f = bf16_to_float(code);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(bf16_to_float(float_to_bf16(f))));
    } else {
      REQUIRE(float_to_bf16(f) == code);
    }
  }
  static_assert(float_to_bf16(1.0f) == 0x3F80, "constexpr");
}

TEST_CASE("bf16 rounding: the overflow boundary, both signs", "[formats][bf16]") {
  // The largest finite bf16 is 0x7F7F; the midpoint to the next step (2^128)
  // is 0x7F7F8000, which ties to the even neighbour: 0x7F80 = Inf.
  CHECK(float_to_bf16(from_bits(0x7F7F7FFFu)) == 0x7F7F);
  CHECK(float_to_bf16(from_bits(0x7F7F8000u)) == 0x7F80);
  CHECK(float_to_bf16(from_bits(0xFF7F7FFFu)) == 0xFF7F);
  CHECK(float_to_bf16(from_bits(0xFF7F8000u)) == 0xFF80);
  CHECK(float_to_bf16(from_bits(0xFF7FFF74u)) == 0xFF80);  // seen failing against a wrong reference
  CHECK(bf16_rne_reference(0xFF7FFF74u) == 0xFF80);
  CHECK(bf16_rne_reference(0xFF7F7FFFu) == 0xFF7F);
  // Every fp32 of the top bf16 step, exhaustively, both signs.
  for (std::uint32_t low = 0; low < 0x10000u; ++low) {
    for (std::uint32_t u : {0x7F7F0000u | low, 0xFF7F0000u | low}) {
      INFO("bits " << u);
      REQUIRE(float_to_bf16(from_bits(u)) == bf16_rne_reference(u));
      REQUIRE(float_to_bf16(from_bits(u)) == ((low < 0x8000u ? u : u + 0x10000u) >> 16));
    }
  }
}

TEST_CASE("bf16 rounding matches a double-precision nearest-even reference", "[formats][bf16]") {
  // Every bf16 step of the whole fp32 range (all exponents, both signs,
  // subnormals), at its decision points: exact, ulp above, below and at the
  // tie, and the ends of the step.
  const std::uint32_t lows[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    if ((high & 0x7F80u) == 0x7F80u) continue;  // Inf / NaN: tested above and below
    for (std::uint32_t low : lows) {
      const std::uint32_t u = (high << 16) | low;
      INFO("bits " << u);
      REQUIRE(float_to_bf16(from_bits(u)) == bf16_rne_reference(u));
    }
  }
  // Random fp32 bit patterns (any exponent: no mask), non-finite skipped.
  moejit::ref::TestRng rng(12);
  int tested = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t u = rng.bits32();
    if (!std::isfinite(from_bits(u))) continue;
    ++tested;
    INFO("bits " << u);
    REQUIRE(float_to_bf16(from_bits(u)) == bf16_rne_reference(u));
  }
  CHECK(tested > 190000);
}

TEST_CASE("bf16: every NaN stays a quiet NaN with its sign and top payload", "[formats][bf16]") {
  for (std::uint32_t high : {0x7F80u, 0x7F81u, 0x7FBFu, 0x7FC0u, 0x7FFFu, 0xFF80u, 0xFFC1u, 0xFFFFu}) {
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x8000u, 0xFFFFu}) {
      const std::uint32_t u = (high << 16) | low;
      if (!std::isnan(from_bits(u))) continue;  // 0x7F800000 / 0xFF800000 are Inf
      INFO("bits " << u);
      const std::uint16_t b = float_to_bf16(from_bits(u));
      REQUIRE(std::isnan(bf16_to_float(b)));
      REQUIRE(b == (high | 0x0040u));
    }
  }
}

TEST_CASE("e4m3fn: all 256 codes decode and round-trip", "[formats][e4m3]") {
  CHECK(e4m3_to_float(0x00) == 0.0f);
  CHECK(std::signbit(e4m3_to_float(0x80)));
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));   // smallest subnormal
  CHECK(e4m3_to_float(0x07) == 7.0f * std::ldexp(1.0f, -9));
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));   // smallest normal
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(e4m3_to_float(0x3C) == 1.5f);
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0xFE) == -448.0f);
  CHECK(e4m3_to_float(0x77) == 240.0f);  // 1.875 * 2^7
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(std::isnan(e4m3_to_float(0xFF)));
  float prev = -1.0f;
  for (unsigned c = 0; c < 256; ++c) {
    const std::uint8_t code = static_cast<std::uint8_t>(c);
    const float v = e4m3_to_float(code);
    INFO("code " << c);
    if ((c & 0x7F) == 0x7F) {
      CHECK(std::isnan(v));
      continue;
    }
    CHECK(float_to_e4m3(v) == code);
    // Value from the definition: subnormal m * 2^-9, normal (1 + m/8) 2^(e-7).
    const unsigned e = (c >> 3) & 0xF, m = c & 7;
    const double mag = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, static_cast<int>(e) - 7);
    CHECK(static_cast<double>(v) == ((c & 0x80) ? -mag : mag));
    if (c < 0x80) {
      CHECK(v > prev);  // positive codes are strictly increasing
      prev = v;
    }
  }
}

TEST_CASE("e4m3fn encoding: RNE, saturation, NaN", "[formats][e4m3]") {
  CHECK(float_to_e4m3(448.0f) == 0x7E);
  CHECK(float_to_e4m3(464.0f) == 0x7E);   // tie between 448 and 480 (not a value): even mantissa 448
  CHECK(float_to_e4m3(470.0f) == 0x7E);   // saturates
  CHECK(float_to_e4m3(1e9f) == 0x7E);
  CHECK(float_to_e4m3(-1e9f) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()) == 0xFF);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);         // tie 0 / 2^-9: even 0
  CHECK(float_to_e4m3(3.0f * std::ldexp(1.0f, -10)) == 0x02);  // tie 1 / 2 (x 2^-9): even 2
  CHECK(float_to_e4m3(15.0f * std::ldexp(1.0f, -10)) == 0x08); // tie 7 / 8 subnormal steps: 8 = 2^-6
  CHECK(float_to_e4m3(1.0625f) == 0x38);   // tie 1.0 / 1.125: even 1.0
  CHECK(float_to_e4m3(1.1875f) == 0x3A);   // tie 1.125 / 1.25: even 1.25
  CHECK(float_to_e4m3(-0.0f) == 0x80);
  CHECK(float_to_e4m3(-1e-30f) == 0x80);
}

TEST_CASE("e4m3fn encoding matches a brute-force nearest search", "[formats][e4m3]") {
  const auto expect_of = [](float x) {
    const double a = std::min(std::fabs(static_cast<double>(x)), 448.0);
    unsigned expect = nearest_code_brute(a, 0x7F, [](unsigned c) { return e4m3_to_float(static_cast<std::uint8_t>(c)); });
    if (std::signbit(x)) expect |= 0x80;
    return expect;
  };
  // Every tie and code boundary (subnormal steps, binade edges, and 464, the
  // midpoint of 448 and the would-be 480), exactly and one fp32 ulp either side.
  std::vector<double> values;
  for (unsigned c = 0; c <= 0x7E; ++c) values.push_back(e4m3_to_float(static_cast<std::uint8_t>(c)));
  values.push_back(480.0);
  for (float x : decision_points(values)) {
    INFO("x = " << x);
    REQUIRE(float_to_e4m3(x) == expect_of(x));
  }
  moejit::ref::TestRng rng(13);
  for (int i = 0; i < 100000; ++i) {
    // Uniform mantissas over the whole range, and (every 4th draw) values on a
    // grid 4x finer than e4m3's, where half the points are ties or exact codes.
    const double mag = i % 4 == 0 ? std::ldexp(static_cast<double>(rng.integer(0, 64)), static_cast<int>(rng.integer(-14, 4)))
                                  : std::ldexp(rng.uniform(1.0, 2.0), static_cast<int>(rng.integer(-12, 9)));
    const float x = static_cast<float>(rng.bits32() & 1 ? -mag : mag);
    INFO("x = " << x);
    REQUIRE(float_to_e4m3(x) == expect_of(x));
  }
}

TEST_CASE("round_to_float_grid", "[formats]") {
  CHECK(round_to_float_grid(0.0, 1, 0) == 0.0);
  CHECK(round_to_float_grid(2.5, 1, 0) == 2.0);
  CHECK(round_to_float_grid(3.5, 1, 0) == 4.0);
  CHECK(round_to_float_grid(7.0, 1, 0) == 8.0);  // no upper limit: callers saturate
  CHECK(round_to_float_grid(0.3, 1, 0) == 0.5);
  CHECK(round_to_float_grid(1.0 + std::ldexp(1.0, -8), 7, -126) == 1.0);  // bf16-like tie
}
