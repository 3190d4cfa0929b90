#include "ops/layer_plan.hpp"

#include <string>

#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/quant.hpp"
#include "ops/k_order.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"
#include "util/env.hpp"

namespace moejit::ops {
namespace {

std::uint32_t ceil_div32(std::uint64_t a, std::uint64_t b) { return static_cast<std::uint32_t>((a + b - 1) / b); }

GemmPlan gemm_plan(OpKind op, const MoeLayerShape& s, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                   const Target& target, const GemmTuning& tuning) {
  GemmPlan g;
  if (is_fp8(quant)) {
    g.key = gemm_key(op, s, quant, wscale, bucket, target, tuning);
    g.fp8 = choose_fp8_config(g.key, tuning);
    g.bm = g.fp8.bm();
    g.quantize_key = quantize_fp8_key(quant, g.key.k, target);
  } else {
    // bf16 / w4a16_mxfp4 keys carry the mode's own weight scale (moe_layer_keys).
    g.key = gemm_key(op, s, quant, default_weight_scale(quant), bucket, target, tuning);
    g.config = choose_config(g.key, tuning);
    g.bm = g.config.bm();
    g.splits = static_cast<unsigned>(g.config.splits);
    // gate_up reads X (the caller's, in column order) in the fragment k order:
    // the k_order kernel reorders it first. down's H comes so from gate_up.
    if (op == OpKind::gate_up && g.config.k_order_in) {
      g.k_order = true;
      g.k_order_key = k_order_key(g.key.k, target);
    }
  }
  return g;
}

}  // namespace

std::vector<SpecKey> MoeLayerPlan::keys() const {
  std::vector<SpecKey> k;
  k.reserve(8);
  k.push_back(route_key);
  if (fp8) k.push_back(gate_up.quantize_key);
  if (gate_up.k_order) k.push_back(gate_up.k_order_key);
  k.push_back(gate_up.key);
  if (fp8) k.push_back(down.quantize_key);
  k.push_back(down.key);
  k.push_back(combine_key);
  if (tail_bucket != 0) {
    k.push_back(gate_up.tail_key);
    k.push_back(down.tail_key);
  }
  return k;
}

MoeLayerPlan make_layer_plan(const MoeLayerShape& s, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                             const Target& target, const GemmTuning& tuning) {
  check_shape(s, quant);
  if (bucket == 0) throw InvalidArgument("token_bucket must be >= 1, got 0");
  MoeLayerPlan p;
  p.bucket = bucket;
  p.quant = quant;
  p.fp8 = is_fp8(quant);
  p.route_key = route_key(s, bucket, target);
  p.route_staged = route_staged(s.experts, std::uint64_t(bucket) * s.top_k);
  p.gate_up = gemm_plan(OpKind::gate_up, s, quant, wscale, bucket, target, tuning);
  p.down = gemm_plan(OpKind::down, s, quant, wscale, bucket, target, tuning);
  p.shared_tiles = p.gate_up.bm == p.down.bm;
  p.h_fragment_order = !p.fp8 && p.gate_up.config.k_order_out;
  if (!p.fp8 && (p.gate_up.config.k_order_out != p.down.config.k_order_in ||
                 p.gate_up.config.k_order_out != p.gate_up.k_order))
    throw Error("token_bucket=" + std::to_string(bucket) + ": gate_up " + p.gate_up.config.to_string() + " and down " +
                p.down.config.to_string() + " disagree on H's column order (internal heuristic error)");
  p.y_dtype = p.down.key.out_dtype;
  p.y_splits = p.down.splits;
  if (p.fp8) p.fused_route = p.gate_up.fp8.fr && p.down.fp8.fr;
  if (!p.fp8) {
    p.fused_route = quant == QuantMode::w4a16_mxfp4 && p.gate_up.config.fr && p.down.config.fr;
    p.tail_bucket = split_tail_bucket(s, quant, bucket, target, tuning);
    if (p.tail_bucket != 0) {
      for (GemmPlan* g : {&p.gate_up, &p.down}) {
        g->has_tail = true;
        g->tail_key = gemm_key(g->key.op, s, quant, default_weight_scale(quant), p.tail_bucket, target, tuning);
        g->tail_grid_n = ceil_div32(g->key.n, choose_config(g->tail_key, tuning).bn());
      }
    }
  }
  p.combine_key = combine_key(s, p.y_dtype, bucket, target);
  p.combine_cols = combine_cols(p.combine_key.n, p.combine_key.in_dtype == DType::bf16);
  if (!p.fused_route) p.steps[p.num_steps++] = LayerStep::route;
  p.steps[p.num_steps++] = LayerStep::gate_up;
  p.steps[p.num_steps++] = LayerStep::down;
  p.steps[p.num_steps++] = LayerStep::combine;
  return p;
}

}  // namespace moejit::ops

namespace moejit {
std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale,
                                    std::uint32_t token_bucket, const Target& target, const GemmTuning& tuning) {
  return ops::make_layer_plan(shape, quant, wscale, token_bucket, target, tuning).keys();
}

std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale,
                                    std::uint32_t token_bucket, const Target& target) {
  return moe_layer_keys(shape, quant, wscale, token_bucket, target, util::env::gemm_tuning());
}

std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant, std::uint32_t token_bucket,
                                    const Target& target) {
  return moe_layer_keys(shape, quant, default_weight_scale(quant), token_bucket, target);
}
}  // namespace moejit
