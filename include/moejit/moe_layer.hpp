#pragma once
// (Filled by the kernel work.) The keys one MoE layer launches for a token bucket.
#include <vector>

#include "moejit/key.hpp"
#include "moejit/moe_shape.hpp"

namespace moejit {

// Every key the MoE layer op requests for T tokens with round_up_tokens(T) == token_bucket,
// in launch order (route, gate_up, down, combine, ...). Prewarm enumerates the
// same function, so a sealed runtime never misses. Throws InvalidArgument for a
// shape the kernels cannot run (message names the field).
std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant,
                                    std::uint32_t token_bucket, const Target& target);

}  // namespace moejit
