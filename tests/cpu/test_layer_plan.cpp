// The layer plan (src/ops/layer_plan.hpp): what MoeLayer::run launches per
// bucket, and the per-layer plan cache. No GPU, no NVRTC.
#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include "moejit/bucketing.hpp"
#include "moejit/model.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/quant.hpp"
#include "ops/layer_plan.hpp"
#include "ops/k_order.hpp"
#include "ops/layer_plans.hpp"
#include "ops/moe_keys.hpp"
#include "util/env.hpp"

using namespace moejit;
using ops::LayerStep;

namespace {
struct Case {
  std::string model;
  QuantMode quant;
  WeightScale wscale;
};
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& m : {"gpt-oss-120b", "qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b"}) {
    out.push_back({m, QuantMode::bf16, WeightScale::none});
    out.push_back({m, QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32});
    out.push_back({m, QuantMode::mxfp8, WeightScale::e8m0_block32});
    out.push_back({m, QuantMode::fp8_per_token, WeightScale::per_expert});
    out.push_back({m, QuantMode::fp8_per_token, WeightScale::per_channel});
  }
  return out;
}
MoeLayerShape shape_of(const Case& c) {
  PlanOptions po;
  po.quant = c.quant;
  po.max_num_tokens = 20000;
  return make_plan(embedded_model(c.model), po).layers.at(0);
}
}  // namespace

TEST_CASE("layer plan: keys, configs and steps agree with the per-op functions for every bucket", "[plan]") {
  const Target t{};
  for (const Case& c : cases()) {
    const MoeLayerShape s = shape_of(c);
    for (std::uint32_t b : prewarm_set(20000)) {
      INFO(c.model << " " << to_string(c.quant) << " " << to_string(c.wscale) << " bucket " << b);
      const ops::MoeLayerPlan p = ops::make_layer_plan(s, c.quant, c.wscale, b, t, util::env::gemm_tuning());
      REQUIRE(p.bucket == b);
      const bool fp8 = ops::is_fp8(c.quant);
      REQUIRE(p.fp8 == fp8);
      const SpecKey gu = fp8 ? ops::gemm_key(OpKind::gate_up, s, c.quant, c.wscale, b, t)
                             : ops::gemm_key(OpKind::gate_up, s, c.quant, b, t);
      const SpecKey dn = fp8 ? ops::gemm_key(OpKind::down, s, c.quant, c.wscale, b, t)
                             : ops::gemm_key(OpKind::down, s, c.quant, b, t);
      CHECK(p.gate_up.key == gu);
      CHECK(p.down.key == dn);
      CHECK(p.route_key == ops::route_key(s, b, t));
      CHECK(p.combine_key == ops::combine_key(s, dn.out_dtype, b, t));
      CHECK(p.y_dtype == dn.out_dtype);
      if (fp8) {
        CHECK(p.gate_up.bm == ops::choose_fp8_config(gu).bm());
        CHECK(p.down.bm == ops::choose_fp8_config(dn).bm());
        CHECK(p.gate_up.quantize_key == quantize_fp8_key(c.quant, s.hidden, t));
        CHECK(p.down.quantize_key == quantize_fp8_key(c.quant, s.intermediate, t));
        // fp8_per_token decode buckets of <= 32 routes route inside the GEMMs.
        const ops::Fp8GemmConfig cg = ops::choose_fp8_config(gu), cd = ops::choose_fp8_config(dn);
        CHECK(p.fused_route == (cg.fr && cd.fr));
        CHECK(cg.fr == (cg.decode && std::uint64_t(b) * s.top_k <= 32));
        if (c.quant == QuantMode::mxfp8) CHECK_FALSE(p.fused_route);
        CHECK(p.tail_bucket == 0);
        CHECK(dn.out_dtype == DType::bf16);  // no split-K in the FP8 kernels: Y is bf16
        CHECK(p.y_splits == 1);
      } else {
        const ops::GemmConfig cg = ops::choose_config(gu), cd = ops::choose_config(dn);
        CHECK(p.gate_up.config.to_string() == cg.to_string());
        CHECK(p.down.config.to_string() == cd.to_string());
        CHECK(p.down.splits == static_cast<unsigned>(cd.splits));
        CHECK(p.y_splits == static_cast<unsigned>(cd.splits));
        CHECK(p.fused_route == (c.quant == QuantMode::w4a16_mxfp4 && cg.fr && cd.fr));
        CHECK(p.tail_bucket == ops::split_tail_bucket(s, c.quant, b, t));
        // X and H in the fragment k order exactly where both GEMMs are the
        // MXFP4 warp-specialized kernel: the k_order kernel reorders X for
        // gate_up, gate_up writes H so, down reads it so.
        const bool ws = cg.kernel == ops::GemmKernel::mxfp4_ws;
        CHECK((cd.kernel == ops::GemmKernel::mxfp4_ws) == ws);
        CHECK(p.h_fragment_order == ws);
        CHECK(cg.k_order_in == ws);
        CHECK(cg.k_order_out == ws);
        CHECK(cd.k_order_in == ws);
        CHECK_FALSE(cd.k_order_out);
        CHECK(p.gate_up.k_order == ws);
        CHECK_FALSE(p.down.k_order);
        if (ws) CHECK(p.gate_up.k_order_key == ops::k_order_key(s.hidden, t));
      }
      if (fp8) CHECK_FALSE((p.h_fragment_order || p.gate_up.k_order || p.down.k_order));
      CHECK(p.shared_tiles == (p.gate_up.bm == p.down.bm));
      if (p.tail_bucket != 0) {
        CHECK(p.tail_bucket < b);
        CHECK(p.gate_up.tail_key == ops::gemm_key(OpKind::gate_up, s, c.quant, p.tail_bucket, t));
        CHECK(p.down.tail_key == ops::gemm_key(OpKind::down, s, c.quant, p.tail_bucket, t));
        CHECK(p.shared_tiles);
      }
      // Launch order: route unless the GEMMs route themselves, then gate_up, down, combine.
      std::vector<LayerStep> want;
      if (!p.fused_route) want.push_back(LayerStep::route);
      want.insert(want.end(), {LayerStep::gate_up, LayerStep::down, LayerStep::combine});
      REQUIRE(p.num_steps == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) CHECK(p.steps[i] == want[i]);
      // moe_layer_keys (prewarm) lists exactly the plan's keys, in launch order.
      const std::vector<SpecKey> keys = moe_layer_keys(s, c.quant, c.wscale, b, t);
      CHECK(keys == p.keys());
      REQUIRE(keys.size() == (fp8 ? 6u : (p.tail_bucket ? 6u : p.gate_up.k_order ? 5u : 4u)));
      if (p.gate_up.k_order) CHECK(keys[1] == p.gate_up.k_order_key);
      CHECK(keys.front() == p.route_key);
    }
  }
}

TEST_CASE("layer plan: bad input throws naming the field", "[plan]") {
  const MoeLayerShape s = shape_of({"gpt-oss-120b", QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32});
  CHECK_THROWS_WITH(ops::make_layer_plan(s, QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, 0, Target{}, GemmTuning{}),
                    Catch::Contains("token_bucket"));
  MoeLayerShape bad = s;
  bad.hidden = 100;
  CHECK_THROWS_WITH(ops::make_layer_plan(bad, QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, 1, Target{}, GemmTuning{}),
                    Catch::Contains("hidden"));
}

TEST_CASE("layer plan cache: one slot per bucket, built once, shared across threads", "[plan]") {
  // Every bucket of 32-bit token counts has its own slot.
  std::set<int> seen;
  for (std::uint32_t b : bucket_set(kMaxBucketedTokens)) {
    const int i = MoeLayerPlans::slot(b);
    REQUIRE(i >= 0);
    REQUIRE(i < MoeLayerPlans::kSlots);
    REQUIRE(seen.insert(i).second);
  }
  CHECK(MoeLayerPlans::slot(17) == -1);  // not a bucket (16, 18, ...): kept in the map
  CHECK(MoeLayerPlans::slot(0) == -1);

  const MoeLayerShape s = shape_of({"gpt-oss-120b", QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32});
  MoeLayerPlans plans(s, QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, Target{}, util::env::gemm_tuning());
  const std::vector<std::uint32_t> buckets = prewarm_set(20000);
  std::vector<std::vector<const ops::MoeLayerPlan*>> got(8);
  std::vector<std::thread> pool;
  for (int th = 0; th < 8; ++th)
    pool.emplace_back([&, th] {
      for (int rep = 0; rep < 3; ++rep)
        for (std::uint32_t b : buckets) got[th].push_back(&plans.get(b));
    });
  for (auto& t : pool) t.join();
  for (int th = 1; th < 8; ++th) CHECK(got[th] == got[0]);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    CHECK(got[0][i]->bucket == buckets[i]);
    CHECK(got[0][i] == got[0][i + buckets.size()]);  // the second lookup finds the first plan
  }
  const ops::MoeLayerPlan& odd = plans.get(17);  // not a bucket: still one plan, kept
  CHECK(&plans.get(17) == &odd);
  CHECK(odd.bucket == 17);
}

TEST_CASE("layer plan: a layer's public steps and run() see the plan's facts", "[plan]") {
  // workspace_view() reads the plan: Y's dtype and splits and the shared tile list.
  RuntimeOptions ro;
  ro.use_disk_cache = false;
  Runtime rt(ro);
  const MoeLayerShape s = shape_of({"gpt-oss-120b", QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32});
  const MoeLayer layer(rt, s, QuantMode::w4a16_mxfp4);
  for (std::uint32_t T : {1u, 7u, 64u, 1000u, 4096u}) {
    const ops::MoeLayerPlan p =
        ops::make_layer_plan(s, QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, round_up_tokens(T), Target{}, util::env::gemm_tuning());
    MoeLayerArgs a;
    a.num_tokens = T;
    a.workspace = 1 << 20;
    a.workspace_bytes = layer.workspace_size(T);
    const MoeWorkspaceView v = layer.workspace_view(a);
    CHECK(v.y_dtype == p.y_dtype);
    CHECK(v.y_splits == p.y_splits);
    CHECK((v.tiles[1][0] == v.tiles[0][0]) == p.shared_tiles);
  }
}

TEST_CASE("layer plan: h_column_position permutes each block of 32 columns", "[plan]") {
  std::set<std::uint32_t> seen;
  for (std::uint32_t c = 0; c < 96; ++c) {
    const std::uint32_t at = h_column_position(c);
    CHECK(at / 32 == c / 32);
    seen.insert(at);
  }
  CHECK(seen.size() == 96);
  // The pairs of one packed e2m1 word (nibbles i and i + 4 of word q) land on
  // fragment k 2q + e of a k16 step: column 8q + m + 4e at 16 (m / 2) + 8 (m % 2) + 2q + e.
  for (std::uint32_t q = 0; q < 4; ++q)
    for (std::uint32_t m = 0; m < 4; ++m)
      for (std::uint32_t e = 0; e < 2; ++e) CHECK(h_column_position(8 * q + m + 4 * e) == 16 * (m / 2) + 8 * (m % 2) + 2 * q + e);
  // The grouped GEMM over expert-sorted rows reads its A in column order.
  const SpecKey sorted = ops::gemm_key(OpKind::down, shape_of({"gpt-oss-120b", QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32}),
                                       QuantMode::w4a16_mxfp4, 512, Target{});
  SpecKey k = sorted;
  k.router_weight = false;
  const ops::GemmConfig c = ops::choose_config(k);
  REQUIRE(c.kernel == ops::GemmKernel::mxfp4_ws);
  CHECK_FALSE(c.k_order_in);
  CHECK_FALSE(c.k_order_out);
  // In column order the middle range keeps the activations-as-A kernel past
  // 128 experts (DeepSeek-V3 T = 512: 16 rows per expert hit); the layer's
  // GEMMs of that bucket, in the fragment k order, take the warp-specialized one.
  const MoeLayerShape dsv3 = shape_of({"deepseek-v3", QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32});
  SpecKey ds = ops::gemm_key(OpKind::down, dsv3, QuantMode::w4a16_mxfp4, 512, Target{});
  CHECK(ops::choose_config(ds).kernel == ops::GemmKernel::mxfp4_ws);
  ds.router_weight = false;
  CHECK(ops::choose_config(ds).kernel == ops::GemmKernel::x_operand_a);
}
