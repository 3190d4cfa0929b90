// The float64 MoE reference (tests/reference/moe_reference.hpp) checked on tiny
// hand-computed cases and against a second, naive token-major loop.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "moejit/error.hpp"
#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "reference/moe_reference.hpp"

using namespace moejit;
using namespace moejit::ref;

TEST_CASE("reference: activations, hand-checked values", "[reference]") {
  // sigmoid(1.702) = 1 / (1 + e^-1.702) = 1 / 1.182319 = 0.845796; times (2 + 1) = 2.537387.
  CHECK(swiglu_oai(1.0, 2.0, 1.702, 7.0) == Approx(2.537387297798464).epsilon(1e-14));
  // Clamping: g = min(10, 7) = 7, l = clamp(-9) = -7: 7 * sigmoid(11.914) * (-6).
  CHECK(swiglu_oai(10.0, -9.0, 1.702, 7.0) == Approx(-41.99971876981991).epsilon(1e-14));
  // Negative gate is not clamped from below; l + 1 with l = 0.5.
  CHECK(swiglu_oai(-3.0, 0.5, 1.702, 7.0) == Approx(-0.027106964561678954).epsilon(1e-13));
  CHECK(silu(1.0) == Approx(0.7310585786300049).epsilon(1e-15));
  CHECK(silu(0.0) == 0.0);
  CHECK(round_bf16(1.0 + 1.0 / 512) == 1.0);          // tie -> even
  CHECK(round_bf16(1.0 + 3.0 / 512) == 1.0 + 4.0 / 512);
}

TEST_CASE("reference: routing sorts rows by expert, drops -1, keeps slot order", "[reference]") {
  // T = 3, top_k = 2, E = 3.
  const std::int32_t ids[] = {2, 0,   // token 0
                              0, -1,  // token 1 (slot 1 dropped)
                              2, 1};  // token 2
  const Routing r = route(ids, 3, 2, 3);
  REQUIRE(r.rows() == 5);
  CHECK(r.expert_offsets == std::vector<std::uint64_t>{0, 2, 3, 5});
  CHECK(r.row_token == std::vector<std::uint32_t>{0, 1, 2, 0, 2});
  CHECK(r.row_slot == std::vector<std::uint32_t>{1, 0, 1, 0, 0});
  CHECK(r.row_expert == std::vector<std::uint32_t>{0, 0, 1, 2, 2});
  CHECK(r.row_of_slot == std::vector<std::int64_t>{3, 0, 1, -1, 4, 2});
  const std::int32_t bad[] = {0, 3};
  CHECK_THROWS_AS(route(bad, 1, 2, 3), std::invalid_argument);
  const std::int32_t bad2[] = {-2, 0};
  CHECK_THROWS_AS(route(bad2, 1, 2, 3), std::invalid_argument);
  const Routing empty = route(nullptr, 0, 4, 8);
  CHECK(empty.rows() == 0);
  CHECK(empty.expert_offsets.size() == 9);
}

TEST_CASE("reference: identity weights give a hand-computable layer", "[reference]") {
  // T = 1, E = 1, top_k = 1, D = I = 32, act none:
  // H = bf16(X I + 1), Y = 0.5 * (H (2 I) + 0) = H, out = H.
  const std::uint32_t D = 32;
  std::vector<std::uint16_t> x(D), w1(D * D, 0), w2(D * D, 0);
  std::vector<float> b1(D, 1.0f);
  for (std::uint32_t i = 0; i < D; ++i) {
    x[i] = float_to_bf16(0.25f * static_cast<float>(i) - 3.0f);
    w1[i * D + i] = float_to_bf16(1.0f);
    w2[i * D + i] = float_to_bf16(2.0f);
  }
  const std::int32_t ids[] = {0};
  const float gamma[] = {0.5f};
  MoeReferenceArgs a;
  a.tokens = 1, a.hidden = D, a.intermediate = D, a.experts = 1, a.top_k = 1;
  a.x = x.data(), a.topk_ids = ids, a.topk_weights = gamma;
  a.w1 = WeightsView::of_bf16(w1.data(), 1, D, D);
  a.b1 = BiasView::of_f32(b1.data());
  a.w2 = WeightsView::of_bf16(w2.data(), 1, D, D);
  a.act = Activation::none;
  const auto res = moe_reference(a);
  REQUIRE(res.out.size() == D);
  for (std::uint32_t i = 0; i < D; ++i) {
    INFO("column " << i);
    CHECK(res.out[i] == 0.25 * i - 3.0 + 1.0);
    CHECK(res.h[i] == 0.25 * i - 2.0);
    CHECK(res.y[i] == 0.25 * i - 2.0);
  }
}

namespace {

// The second implementation: token-major, whole tensors dequantized up front,
// direct indexing, no routing structure.
std::vector<double> naive_layer(const MoeReferenceArgs& a, const std::vector<double>& w1, const std::vector<double>& w2) {
  const std::uint32_t D = a.hidden, I = a.intermediate, N1 = a.n1();
  std::vector<double> out(std::uint64_t{a.tokens} * D, 0.0);
  for (std::uint32_t t = 0; t < a.tokens; ++t) {
    for (std::uint32_t j = 0; j < a.top_k; ++j) {
      const std::int32_t e = a.topk_ids[t * a.top_k + j];
      if (e < 0) continue;
      std::vector<double> z(N1), h(I);
      for (std::uint32_t n = 0; n < N1; ++n) {
        double acc = 0.0;
        for (std::uint32_t d = 0; d < D; ++d)
          acc += w1[(std::uint64_t{static_cast<std::uint32_t>(e)} * N1 + n) * D + d] * bf16_to_float(a.x[t * D + d]);
        z[n] = acc + a.b1.at(static_cast<std::uint32_t>(e), n, N1);
      }
      for (std::uint32_t i = 0; i < I; ++i) {
        double v = z[i];
        if (a.act == Activation::silu_gated) v = z[i] / (1.0 + std::exp(-z[i])) * z[I + i];
        if (a.act == Activation::swiglu_oai) {
          const double g = std::min(z[2 * i], a.act_limit);
          const double l = std::max(std::min(z[2 * i + 1], a.act_limit), -a.act_limit);
          v = g / (1.0 + std::exp(-a.act_alpha * g)) * (l + 1.0);
        }
        h[i] = a.h_rounding == HRounding::bf16 ? static_cast<double>(bf16_to_float(float_to_bf16(static_cast<float>(v)))) : v;
      }
      const double gamma = a.topk_weights[t * a.top_k + j];
      for (std::uint32_t d = 0; d < D; ++d) {
        double acc = 0.0;
        for (std::uint32_t i = 0; i < I; ++i) acc += w2[(std::uint64_t{static_cast<std::uint32_t>(e)} * D + d) * I + i] * h[i];
        out[t * D + d] += gamma * (acc + a.b2.at(static_cast<std::uint32_t>(e), d, D));
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("reference: whole layer equals a naive token-major loop (T=2, E=2, D=I=32)", "[reference]") {
  const Activation act = GENERATE(Activation::none, Activation::silu_gated, Activation::swiglu_oai);
  const HRounding hr = GENERATE(HRounding::none, HRounding::bf16);
  TestRng rng(41);
  const std::uint32_t T = 3, E = 2, D = 32, I = 32, K = 2;
  const std::uint32_t N1 = act == Activation::none ? I : 2 * I;
  auto x = random_bf16(T * D, rng);
  auto w1q = random_mxfp4(E, N1, D, rng, 0.5);  // MXFP4 gate_up
  auto w2 = random_bf16(E * D * I, rng, 0.2);    // bf16 down
  auto b1 = random_f32(E * N1, rng, 0.5);
  auto b2 = random_bf16(E * D, rng, 0.5);
  const std::int32_t ids[T * K] = {1, 0, 0, 0, -1, 1};  // token 1: expert 0 twice; token 2 slot 0 dropped
  const float gamma[T * K] = {0.7f, 0.3f, 0.25f, 0.75f, 0.5f, 1.5f};
  MoeReferenceArgs a;
  a.tokens = T, a.hidden = D, a.intermediate = I, a.experts = E, a.top_k = K;
  a.x = x.data(), a.topk_ids = ids, a.topk_weights = gamma;
  a.w1 = WeightsView::of_mxfp4(w1q);
  a.b1 = BiasView::of_f32(b1.data());
  a.w2 = WeightsView::of_bf16(w2.data(), E, D, I);
  a.b2 = BiasView::of_bf16(b2.data());
  a.act = act;
  a.h_rounding = hr;

  std::vector<double> w1d(std::uint64_t{E} * N1 * D), w2d(std::uint64_t{E} * D * I);
  dequantize_mxfp4_cpu(w1q.data.data(), w1q.scales.data(), std::uint64_t{E} * N1, D, w1d.data());
  for (std::size_t i = 0; i < w2d.size(); ++i) w2d[i] = bf16_to_float(w2[i]);
  const auto expect = naive_layer(a, w1d, w2d);
  const auto res = moe_reference(a);
  REQUIRE(res.out.size() == expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    INFO("act " << to_string(act) << " element " << i);
    CHECK(res.out[i] == Approx(expect[i]).epsilon(1e-12).margin(1e-12));
  }
  CHECK(relative_frobenius_error(expect, res.out) < 1e-12);
  // The computation is not trivially zero.
  double norm = 0.0;
  for (double v : expect) norm += v * v;
  CHECK(norm > 1.0);

  if (hr == HRounding::bf16)
    for (double v : res.h) REQUIRE(round_bf16(v) == v);

  // A subset of tokens gives the same rows.
  const auto sub = moe_reference(a, {2});
  REQUIRE(sub.tokens == std::vector<std::uint32_t>{2});
  for (std::uint32_t d = 0; d < D; ++d) CHECK(sub.out[d] == res.out[2 * D + d]);
  // Router weight applied in combine instead of down: same output.
  MoeReferenceArgs c = a;
  c.gamma_at = GammaAt::combine;
  const auto rc = moe_reference(c);
  for (std::size_t i = 0; i < expect.size(); ++i) CHECK(rc.out[i] == Approx(res.out[i]).epsilon(1e-13).margin(1e-13));
}

TEST_CASE("reference: a token whose slots are all dropped gets zeros; shape errors throw", "[reference]") {
  TestRng rng(42);
  const std::uint32_t D = 32, I = 32, E = 1;
  auto x = random_bf16(2 * D, rng);
  auto w1 = random_bf16(E * 2 * I * D, rng);
  auto w2 = random_bf16(E * D * I, rng);
  const std::int32_t ids[] = {-1, 0};  // top_k 1, T = 2
  MoeReferenceArgs a;
  a.tokens = 2, a.hidden = D, a.intermediate = I, a.experts = E, a.top_k = 1;
  a.x = x.data(), a.topk_ids = ids;
  a.w1 = WeightsView::of_bf16(w1.data(), E, 2 * I, D);
  a.w2 = WeightsView::of_bf16(w2.data(), E, D, I);
  const auto res = moe_reference(a);
  for (std::uint32_t d = 0; d < D; ++d) CHECK(res.out[d] == 0.0);
  double n1 = 0.0;
  for (std::uint32_t d = 0; d < D; ++d) n1 += std::fabs(res.out[D + d]);
  CHECK(n1 > 0.0);
  MoeReferenceArgs bad = a;
  bad.w1.n = I;  // silu_gated needs 2I
  CHECK_THROWS_AS(moe_reference(bad), std::invalid_argument);
  CHECK_THROWS_AS(moe_reference(a, {5}), std::invalid_argument);
}

TEST_CASE("reference utilities: Frobenius error, poison, random MXFP4", "[reference]") {
  const std::vector<double> ref = {3.0, 4.0};
  CHECK(relative_frobenius_error(ref, std::vector<double>{3.0, 4.0}) == 0.0);
  CHECK(relative_frobenius_error(ref, std::vector<double>{3.0, 4.5}) == Approx(0.1));
  CHECK(relative_frobenius_error(ref, std::vector<float>{3.0f, std::numeric_limits<float>::quiet_NaN()}) ==
        std::numeric_limits<double>::infinity());
  std::vector<std::uint16_t> hb = {float_to_bf16(3.0f), float_to_bf16(4.0f)};
  CHECK(relative_frobenius_error(ref, hb) == 0.0);
  poison_nan(hb);
  CHECK(count_nonfinite(hb.data(), hb.size()) == 2);
  CHECK(relative_frobenius_error(ref, hb) == std::numeric_limits<double>::infinity());
  std::vector<float> hf(3, 1.0f);
  poison_nan(hf);
  CHECK(count_nonfinite(hf.data(), hf.size()) == 3);
  TestRng rng(43);
  const auto w = random_mxfp4(3, 8, 64, rng);
  CHECK(w.data.size() == 3 * 8 * 32);
  CHECK(w.scales.size() == 3 * 8 * 2);
  // Normal(0, 1) blocks of 32: amax between about 1 and 5, so scale bytes near 127.
  for (auto s : w.scales) CHECK((s >= 124 && s <= 128));
  CHECK_THROWS_AS(random_mxfp4(1, 1, 48, rng), InvalidArgument);
  // Seeds replay.
  auto r1 = TestRng::with_seed(7), r2 = TestRng::with_seed(7);
  CHECK(r1.bits64() == r2.bits64());
}
