// enumerate_keys: plan -> the finite, de-duplicated set of specialization keys.
#include <string>
#include <unordered_set>

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/prewarm.hpp"
#include "prewarm/plan_check.hpp"

namespace moejit {
namespace {

struct KeyHashFn {
  std::size_t operator()(const SpecKey& k) const noexcept {
    const Hash128 h = k.hash();
    return static_cast<std::size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull));
  }
};

}  // namespace

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
  if (plan.bucket_exponent < 0 || plan.bucket_exponent > 16)
    throw InvalidArgument("PrewarmPlan.bucket_exponent must be in [0, 16] (got " +
                          std::to_string(plan.bucket_exponent) + ")");
}

std::vector<SpecKey> enumerate_keys(const PrewarmPlan& plan) {
  prewarm_detail::check_plan(plan);
  const std::vector<std::uint32_t> buckets = prewarm_set(plan.max_num_tokens, plan.bucket_exponent);
  std::vector<SpecKey> keys;
  std::unordered_set<SpecKey, KeyHashFn> seen;
  // Why this loop order (quant, layer, bucket, launch order): the output is a
  // pure function of the plan, so two runs, two hosts and --list-keys agree.
  for (QuantMode quant : plan.quant_modes) {
    for (const MoeLayerShape& shape : plan.layers) {
      for (std::uint32_t bucket : buckets) {
        for (SpecKey& key : moe_layer_keys(shape, quant, bucket, plan.target)) {
          if (seen.insert(key).second) keys.push_back(std::move(key));
        }
      }
    }
  }
  return keys;
}

}  // namespace moejit
