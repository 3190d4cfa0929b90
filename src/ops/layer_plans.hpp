#pragma once
// The plans of one MoeLayer, one per token bucket it has run (ops::BucketPlans
// over ops::make_layer_plan), under 1 KB each.
#include "ops/bucket_plans.hpp"
#include "ops/layer_plan.hpp"

namespace moejit {

class MoeLayerPlans : public ops::BucketPlans<ops::MoeLayerPlan> {
 public:
  MoeLayerPlans(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, const Target& target,
                const GemmTuning& tuning)
      : BucketPlans([=](std::uint32_t bucket) {
          return ops::make_layer_plan(shape, quant, wscale, bucket, target, tuning);
        }) {}
};

}  // namespace moejit
