#pragma once
// Validation shared by enumerate_keys and prewarm.
#include <vector>

#include "moejit/prewarm.hpp"

namespace moejit::prewarm_detail {

// Throws InvalidArgument naming the field: max_num_tokens outside
// [1, kMaxBucketedTokens], no layers, no quant modes, a weight scale no quant
// mode accepts, bucket_exponent outside [0, 16].
void check_plan(const PrewarmPlan& plan);

// Whether quant mode q runs weights with scale layout w (key validation's rule).
bool accepts(QuantMode q, WeightScale w);

// The weight-scale layouts the plan covers for q: the listed ones q accepts, in
// order, or q's default when none.
std::vector<WeightScale> scales_for(const PrewarmPlan& plan, QuantMode q);

}  // namespace moejit::prewarm_detail
