#pragma once
#include <cstdint>

#include "moejit/key.hpp"
#include "moejit/moe_shape.hpp"
#include "moejit/tuning.hpp"

namespace moejit::ops {

// gate_up: n = 2I, k = D, the shape's activation and gate_up bias, bf16 out.
// down: n = D, k = I, down bias, router weight applied; out = the dtype of Y:
// bf16 / w4a16_mxfp4: down_out_dtype() (bf16 unless the config splits K, then
// f32, which depends on the tuning); FP8 modes: bf16 (no split-K). wscale: the weight-scale
// granularity (fp8_per_token: per_expert or per_channel).
SpecKey gemm_key(OpKind op, const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                 const Target& target, const GemmTuning& tuning);
// The same under the process's MOEJIT_GEMM_TUNE (util::env::gemm_tuning()),
// with default_weight_scale(quant) or an explicit one.
SpecKey gemm_key(OpKind op, const MoeLayerShape& shape, QuantMode quant, std::uint32_t bucket, const Target& target);
SpecKey gemm_key(OpKind op, const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                 const Target& target);
// route: n = k = 0, experts = E, top_k, out i32 (index lists).
SpecKey route_key(const MoeLayerShape& shape, std::uint32_t bucket, const Target& target);
// combine: n = hidden D, k = 0, top_k, experts 0, in = y_dtype (the down key's
// out_dtype: f32 or bf16), out bf16 (what the combine writes).
SpecKey combine_key(const MoeLayerShape& shape, DType y_dtype, std::uint32_t bucket, const Target& target);

// Split tail (kernels/moe_routing.cuh, RouteParams::tail_rows): when both
// GEMMs of `bucket` run two-warpgroup MXFP4 wgmma tiles (128 rows) with
// split_tail, the largest smaller bucket whose gate_up and down run
// one-warpgroup wgmma tiles (64 rows) with the same epilogue and Y dtype: the
// layer runs each expert's last 1..64 rows with that bucket's kernels. Same
// wgmma instruction and k order per row, so a row's bits do not depend on the
// tile it lands in (padding invariance). 0 when it does not apply. The bucket
// is in prewarm_set of any budget that holds `bucket`.
std::uint32_t split_tail_bucket(const MoeLayerShape& shape, QuantMode quant, std::uint32_t bucket,
                                const Target& target, const GemmTuning& tuning);
// The same under the process's MOEJIT_GEMM_TUNE.
std::uint32_t split_tail_bucket(const MoeLayerShape& shape, QuantMode quant, std::uint32_t bucket,
                                const Target& target);

// Throws InvalidArgument naming the field when the kernels cannot run the shape.
void check_shape(const MoeLayerShape& shape, QuantMode quant);

}  // namespace moejit::ops
