// Padding invariance: the first T tokens computed alone and inside a batch
// padded to their bucket with other tokens give identical bytes (memcmp).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <utility>

#include "driver/cuda_api.hpp"
#include "gpu/gpu_runtime.hpp"
#include "gpu/layer_fixture.hpp"
#include "moejit/bucketing.hpp"

using namespace moejit;
using namespace moejit::testing;


TEST_CASE("gpu: padding invariance is bit-exact for both weight formats, with and without bias", "[gpu][padding]") {
  for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4}) {
    for (BiasKind bias : {BiasKind::none, BiasKind::f32}) {
      MoeLayerShape s = qwen3_30b_shape();
      s.gate_up_bias = bias;
      s.down_bias = bias;
      const auto w = LayerWeights::make(s, q, ref::process_seed() + 99);
      MoeLayer layer(gpu_runtime(), s, q);
      for (std::uint32_t T : {5u, 17u, 100u, 1000u, 2049u}) {
        const auto [alone, padded] = alone_and_padded(s, T, T + 1000);
        LayerRun ra(layer, alone), rb(layer, padded), rc(layer, alone);
        layer.run(w->device(), ra.args, nullptr);
        layer.run(w->device(), rb.args, nullptr);
        layer.run(w->device(), rc.args, nullptr);
        MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
        const auto oa = ra.download_out(s), ob = rb.download_out(s), oc = rc.download_out(s);
        INFO(to_string(q) << " bias=" << to_string(bias) << " T=" << T << " padded to " << padded.tokens);
        CHECK(ref::count_nonfinite(oa.data(), oa.size()) == 0);
        CHECK(std::memcmp(oa.data(), ob.data(), oa.size() * 2) == 0);
        CHECK(std::memcmp(oa.data(), oc.data(), oa.size() * 2) == 0);  // run to run
        std::printf("  padding %s bias=%s T=%u in batch of %u: %s\n", std::string(to_string(q)).c_str(),
                    std::string(to_string(bias)).c_str(), T, padded.tokens,
                    std::memcmp(oa.data(), ob.data(), oa.size() * 2) == 0 ? "identical" : "DIFFERENT");
      }
    }
  }
}

// Decode token counts, MXFP4 on gpt-oss-120b (top_k = 4) and bf16 on
// qwen3-30b-a3b: up to 8 gpt-oss tokens the MXFP4 GEMMs route themselves
// (fused routing, staged activations); 9 and more take the routing kernel's
// tile lists, so T = 8 padded to 11 tokens compares the two paths' bits. A T
// that is its own bucket is padded with 3 more tokens.
TEST_CASE("gpu: padding invariance is bit-exact at decode token counts (both formats)", "[gpu][padding]") {
  const std::pair<QuantMode, MoeLayerShape> cases[] = {{QuantMode::w4a16_mxfp4, gpt_oss_120b_shape()},
                                                       {QuantMode::bf16, qwen3_30b_shape()}};
  for (const auto& [q, s] : cases) {
    const auto w = LayerWeights::make(s, q, ref::process_seed() + 2000);
    MoeLayer layer(gpu_runtime(), s, q);
    for (std::uint32_t T : {1u, 2u, 3u, 7u, 8u, 9u, 63u, 64u}) {
      const auto [alone, padded] = alone_and_padded(s, T, T + 2000);
      LayerRun ra(layer, alone), rb(layer, padded);
      layer.run(w->device(), ra.args, nullptr);
      layer.run(w->device(), rb.args, nullptr);
      MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
      const auto oa = ra.download_out(s), ob = rb.download_out(s);
      INFO(to_string(q) << " T=" << T << " padded to " << padded.tokens);
      CHECK(ref::count_nonfinite(oa.data(), oa.size()) == 0);
      CHECK(std::memcmp(oa.data(), ob.data(), oa.size() * 2) == 0);
      std::printf("  padding %s T=%u in batch of %u: %s\n", std::string(to_string(q)).c_str(), T, padded.tokens,
                  std::memcmp(oa.data(), ob.data(), oa.size() * 2) == 0 ? "identical" : "DIFFERENT");
    }
  }
}
