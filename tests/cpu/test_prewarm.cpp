// Prewarm API: key enumeration (no NVRTC needed) and prewarm into a temporary
// cache directory (needs libnvrtc; compiles the real kernels of kernels/).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <set>

#include "cli/run_tool.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/model.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/prewarm.hpp"
#include "moejit/runtime.hpp"

using namespace moejit;

namespace {

PrewarmPlan plan_for(const std::string& model, std::uint64_t max_tokens) {
  PlanOptions o;
  o.max_num_tokens = max_tokens;
  o.target = parse_target("sm_90a");
  return make_plan(embedded_model(model), o);
}

}  // namespace

TEST_CASE("enumerate_keys: gpt-oss-120b at 20000 tokens covers 98 buckets x the layer's keys", "[prewarm]") {
  const PrewarmPlan plan = plan_for("gpt-oss-120b", 20000);
  REQUIRE(plan.layers.size() == 1);
  REQUIRE(plan.quant_modes.size() == 1);
  CHECK(plan.quant_modes[0] == QuantMode::w4a16_mxfp4);
  const auto buckets = prewarm_set(20000);
  REQUIRE(buckets.size() == 98);
  CHECK(buckets.back() == 20480);

  const std::vector<SpecKey> keys = enumerate_keys(plan);
  const std::size_t per_layer = moe_layer_keys(plan.layers[0], plan.quant_modes[0], 1, plan.target).size();
  REQUIRE(per_layer >= 2);  // at least gate_up and down
  // Plus one op=k_order key: the reorder of X for the warp-specialized
  // GEMMs, whose key does not name a bucket (tokens = 1), listed once.
  CHECK(keys.size() == 98 * per_layer + 1);
  CHECK(std::count_if(keys.begin(), keys.end(), [](const SpecKey& k) { return k.op == OpKind::k_order; }) == 1);

  // Distinct, every one valid and round-tripping through its canonical text.
  std::set<std::string> texts;
  for (const SpecKey& k : keys) {
    REQUIRE_NOTHROW(validate(k));
    CHECK(parse_key(k.to_text()) == k);
    texts.insert(k.to_text());
    CHECK(k.target == plan.target);
    if (k.op == OpKind::gate_up || k.op == OpKind::down) CHECK(k.quant == QuantMode::w4a16_mxfp4);
  }
  CHECK(texts.size() == keys.size());

  // Every bucket appears, in ascending order (stable order: bucket-major).
  std::vector<std::uint32_t> seen;
  for (const SpecKey& k : keys)
    if (k.op != OpKind::k_order && (seen.empty() || seen.back() != k.token_bucket)) seen.push_back(k.token_bucket);
  CHECK(seen == buckets);

  // Both grouped GEMMs of the layer are there with the gpt-oss shape (D = I = 2880).
  bool gate_up = false, down = false;
  for (const SpecKey& k : keys) {
    if (k.op == OpKind::gate_up && k.n == 2 * 2880 && k.k == 2880) gate_up = true;
    if (k.op == OpKind::down && k.n == 2880 && k.k == 2880) down = true;
  }
  CHECK(gate_up);
  CHECK(down);
}

TEST_CASE("enumerate_keys is deterministic and de-duplicates repeated shapes and quant modes", "[prewarm]") {
  PrewarmPlan plan = plan_for("qwen3-30b-a3b", 300);
  const std::vector<SpecKey> once = enumerate_keys(plan);
  CHECK(enumerate_keys(plan) == once);
  plan.layers.push_back(plan.layers[0]);
  plan.quant_modes.push_back(plan.quant_modes[0]);
  CHECK(enumerate_keys(plan) == once);

  // A second quant mode appends its new keys after the first mode's, in its own
  // order; keys both modes launch (routing, combine) appear once.
  auto with_modes = [](std::vector<QuantMode> modes) {
    PrewarmPlan p = plan_for("qwen3-30b-a3b", 300);
    p.quant_modes = std::move(modes);
    return enumerate_keys(p);
  };
  const std::vector<SpecKey> a = with_modes({QuantMode::bf16});
  const std::vector<SpecKey> b = with_modes({QuantMode::w4a16_mxfp4});
  std::vector<SpecKey> expected = a;
  for (const SpecKey& k : b)
    if (std::find(a.begin(), a.end(), k) == a.end()) expected.push_back(k);
  CHECK(expected.size() > a.size());
  CHECK(with_modes({QuantMode::bf16, QuantMode::w4a16_mxfp4}) == expected);
}

TEST_CASE("enumerate_keys and prewarm reject an invalid plan naming the field", "[prewarm]") {
  const PrewarmPlan good = plan_for("mixtral-8x7b", 64);
  auto message_of = [](const PrewarmPlan& p) -> std::string {
    try {
      enumerate_keys(p);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  PrewarmPlan p = good;
  p.max_num_tokens = 0;
  CHECK_THAT(message_of(p), Catch::Contains("max_num_tokens"));
  p = good;
  p.layers.clear();
  CHECK_THAT(message_of(p), Catch::Contains("layers"));
  p = good;
  p.quant_modes.clear();
  CHECK_THAT(message_of(p), Catch::Contains("quant_modes"));
  p = good;
  p.bucket_exponent = 17;
  CHECK_THAT(message_of(p), Catch::Contains("bucket_exponent"));
  p = good;
  p.weight_scales = {WeightScale::per_channel};  // no mode of this plan uses it
  CHECK_THAT(message_of(p), Catch::Contains("weight_scales has per_channel"));

  test::TempDir dir("prewarm-invalid");
  RuntimeOptions ro;
  ro.cache_dir = dir.path();
  Runtime rt(ro);
  p = good;
  p.max_num_tokens = 0;
  CHECK_THROWS_AS(prewarm(rt, p), InvalidArgument);
  PrewarmOptions opts;
  opts.jobs = -1;
  CHECK_THROWS_AS(prewarm(rt, good, opts), InvalidArgument);
}

TEST_CASE("prewarm twice into one cache directory: the second run compiles nothing", "[prewarm][nvrtc]") {
  test::TempDir dir("prewarm-twice");
  const PrewarmPlan plan = plan_for("gpt-oss-20b", 8);  // buckets 1..8
  const std::size_t nkeys = enumerate_keys(plan).size();
  PrewarmOptions opts;
  opts.jobs = 2;
  std::vector<std::pair<std::size_t, std::size_t>> progress;
  opts.on_progress = [&](std::size_t done, std::size_t total) { progress.emplace_back(done, total); };

  RuntimeOptions ro;
  ro.cache_dir = dir.path();
  PrewarmReport cold;
  {
    Runtime rt(ro);
    cold = prewarm(rt, plan, opts);
    INFO(cold.to_json());
    REQUIRE(cold.failed == 0);
    REQUIRE(cold.failures.empty());
    CHECK(cold.buckets == 8);
    CHECK(cold.keys == nkeys);
    CHECK(cold.distinct_kernels >= 2);
    CHECK(cold.distinct_kernels <= cold.keys);
    CHECK(cold.compiled == cold.distinct_kernels);  // a fresh directory: everything compiles
    CHECK(cold.disk_hits == 0);
    CHECK(cold.compile_ms_total > 0);
    CHECK(rt.stats().compiles == cold.compiled);
    // One progress call per distinct kernel, ending at (total, total).
    REQUIRE(progress.size() == cold.distinct_kernels);
    CHECK(progress.back() == std::make_pair(cold.distinct_kernels, cold.distinct_kernels));

    // Same runtime again: everything is in memory already.
    const PrewarmReport again = prewarm(rt, plan, opts);
    CHECK(again.compiled == 0);
    CHECK(again.memory_hits == cold.distinct_kernels);

    // Sealed: every key is served from memory, no miss after seal.
    rt.seal();
    for (const SpecKey& k : enumerate_keys(plan)) CHECK(rt.lookup_compiled(k).origin == CompiledKernel::Origin::memory);
    CHECK(rt.stats().misses_after_seal == 0);
  }
  {
    Runtime rt(ro);  // a new process would see the same: the disk cache only
    const PrewarmReport warm = prewarm(rt, plan, opts);
    INFO(warm.to_json());
    CHECK(warm.failed == 0);
    CHECK(warm.keys == cold.keys);
    CHECK(warm.distinct_kernels == cold.distinct_kernels);
    CHECK(warm.compiled == 0);
    CHECK(warm.disk_hits == cold.distinct_kernels);
    CHECK(rt.stats().compiles == 0);
  }

  const auto j = nlohmann::json::parse(cold.to_json());
  for (const char* field : {"keys", "distinct_kernels", "compiled", "disk_hits", "failed", "wall_ms", "failures"})
    CHECK(j.contains(field));
  CHECK(j["keys"] == cold.keys);
  CHECK(j["compiled"] == cold.compiled);
}

TEST_CASE("enumerate_keys covers each listed weight-scale layout of fp8_per_token once", "[prewarm]") {
  PrewarmPlan p = plan_for("mixtral-8x7b", 64);
  p.quant_modes = {QuantMode::fp8_per_token, QuantMode::bf16};
  const std::vector<SpecKey> base = enumerate_keys(p);
  p.weight_scales = {WeightScale::per_channel, WeightScale::per_expert, WeightScale::per_channel};
  const std::vector<SpecKey> both = enumerate_keys(p);
  auto count = [](const std::vector<SpecKey>& ks, WeightScale w) {
    return std::count_if(ks.begin(), ks.end(), [w](const SpecKey& k) { return k.weight_scale == w; });
  };
  CHECK(count(base, WeightScale::per_channel) == 0);
  CHECK(count(both, WeightScale::per_channel) > 0);
  CHECK(count(both, WeightScale::per_expert) == count(base, WeightScale::per_expert));
  CHECK(count(both, WeightScale::none) == count(base, WeightScale::none));  // bf16 keeps its default
  for (const SpecKey& k : both) CHECK_NOTHROW(validate(k));
  CHECK(enumerate_keys(p) == both);  // deterministic
}
