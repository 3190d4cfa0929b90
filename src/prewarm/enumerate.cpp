// enumerate_keys: plan -> the finite, de-duplicated set of specialization keys.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/prewarm.hpp"
#include "prewarm/plan_check.hpp"
#include "util/env.hpp"

namespace moejit {
namespace {

struct KeyHashFn {
  std::size_t operator()(const SpecKey& k) const noexcept {
    const Hash128 h = k.hash();
    return static_cast<std::size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull));
  }
};

}  // namespace

bool prewarm_detail::accepts(QuantMode q, WeightScale w) {
  if (w == default_weight_scale(q)) return true;
  return q == QuantMode::fp8_per_token && (w == WeightScale::per_expert || w == WeightScale::per_channel);
}

std::vector<WeightScale> prewarm_detail::scales_for(const PrewarmPlan& plan, QuantMode q) {
  std::vector<WeightScale> out;
  for (WeightScale w : plan.weight_scales)
    if (accepts(q, w) && std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  if (out.empty()) out.push_back(default_weight_scale(q));
  return out;
}

void prewarm_detail::check_plan(const PrewarmPlan& plan) {
  if (plan.max_num_tokens == 0)
    throw InvalidArgument("PrewarmPlan.max_num_tokens must be >= 1 (got 0)");
  if (plan.max_num_tokens > kMaxBucketedTokens)
    throw InvalidArgument("PrewarmPlan.max_num_tokens must be <= " + std::to_string(kMaxBucketedTokens) +
                          " (got " + std::to_string(plan.max_num_tokens) + ")");
  if (plan.layers.empty())
    throw InvalidArgument("PrewarmPlan.layers is empty: a plan needs at least one MoE layer shape (model '" +
                          plan.model_name + "')");
  if (plan.quant_modes.empty())
    throw InvalidArgument("PrewarmPlan.quant_modes is empty: a plan needs at least one quant mode (model '" +
                          plan.model_name + "')");
  for (WeightScale w : plan.weight_scales) {
    bool accepted = false;
    for (QuantMode q : plan.quant_modes) accepted = accepted || prewarm_detail::accepts(q, w);
    if (!accepted)
      throw InvalidArgument("PrewarmPlan.weight_scales has " + std::string(to_string(w)) +
                            ", which none of the plan's quant modes uses (model '" + plan.model_name + "')");
  }
  if (plan.bucket_exponent < 0 || plan.bucket_exponent > 16)
    throw InvalidArgument("PrewarmPlan.bucket_exponent must be in [0, 16] (got " +
                          std::to_string(plan.bucket_exponent) + ")");
}

std::vector<SpecKey> enumerate_keys(const PrewarmPlan& plan) { return enumerate_keys(plan, util::env::gemm_tuning()); }

std::vector<SpecKey> enumerate_keys(const PrewarmPlan& plan, const GemmTuning& tuning) {
  prewarm_detail::check_plan(plan);
  const std::vector<std::uint32_t> buckets = prewarm_set(plan.max_num_tokens, plan.bucket_exponent);
  std::vector<SpecKey> keys;
  std::unordered_set<SpecKey, KeyHashFn> seen;
  // Why this loop order (quant, weight scale, layer, bucket, launch order): the
  // output is a pure function of the plan, so two runs, two hosts and
  // --list-keys agree.
  for (QuantMode quant : plan.quant_modes) {
    for (WeightScale wscale : prewarm_detail::scales_for(plan, quant)) {
      for (const MoeLayerShape& shape : plan.layers) {
        for (std::uint32_t bucket : buckets) {
          for (SpecKey& key : moe_layer_keys(shape, quant, wscale, bucket, plan.target, tuning)) {
            if (seen.insert(key).second) keys.push_back(std::move(key));
          }
        }
      }
    }
  }
  return keys;
}

}  // namespace moejit
