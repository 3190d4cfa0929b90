#pragma once
#include <cstdint>

#include "moejit/key.hpp"
#include "moejit/moe_shape.hpp"

namespace moejit::ops {

// gate_up: n = 2I, k = D, the shape's activation and gate_up bias, bf16 out.
// down: n = D, k = I, down bias, router weight applied, f32 out.
SpecKey gemm_key(OpKind op, const MoeLayerShape& shape, QuantMode quant, std::uint32_t bucket, const Target& target);
SpecKey route_key(const MoeLayerShape& shape, std::uint32_t bucket, const Target& target);
SpecKey combine_key(const MoeLayerShape& shape, std::uint32_t bucket, const Target& target);

// Throws InvalidArgument naming the field when the kernels cannot run the shape.
void check_shape(const MoeLayerShape& shape, QuantMode quant);

}  // namespace moejit::ops
