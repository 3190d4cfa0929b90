#pragma once
// Validation shared by enumerate_keys and prewarm.
#include "moejit/prewarm.hpp"

namespace moejit::prewarm_detail {

// Throws InvalidArgument naming the field: max_num_tokens outside
// [1, kMaxBucketedTokens], no layers, no quant modes, bucket_exponent outside [0, 16].
void check_plan(const PrewarmPlan& plan);

}  // namespace moejit::prewarm_detail
