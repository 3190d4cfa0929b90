// The specialization keys of one MoE layer's kernels. The layer plan
// (layer_plan.cpp) builds them once per bucket for both the launcher and
// prewarm (moe_layer_keys), so a sealed runtime never misses a key the layer
// asks for.
#include "ops/moe_keys.hpp"

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/quant.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "util/env.hpp"

namespace moejit::ops {
namespace {
// gated activations read gate and up/linear columns: W1 has 2I rows; none: I.
std::uint32_t gate_up_columns(const MoeLayerShape& s) {
  return s.act == Activation::none ? s.intermediate : 2 * s.intermediate;
}

// The fields every key of the layer shares; make_gemm_key fills the alignment
// facts and the quant mode's default weight scale (none for bf16).
SpecKey base_key(OpKind op, QuantMode quant, std::uint32_t bucket, std::uint32_t n, std::uint32_t k,
                 const Target& target) {
  return make_gemm_key(op, quant, bucket, n, k, target);
}
}  // namespace

SpecKey gemm_key(OpKind op, const MoeLayerShape& s, QuantMode quant, std::uint32_t bucket, const Target& target) {
  return gemm_key(op, s, quant, default_weight_scale(quant), bucket, target, util::env::gemm_tuning());
}

SpecKey gemm_key(OpKind op, const MoeLayerShape& s, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                 const Target& target) {
  return gemm_key(op, s, quant, wscale, bucket, target, util::env::gemm_tuning());
}

SpecKey gemm_key(OpKind op, const MoeLayerShape& s, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                 const Target& target, const GemmTuning& tuning) {
  const bool gate_up = op == OpKind::gate_up;
  SpecKey key = gate_up ? base_key(op, quant, bucket, gate_up_columns(s), s.hidden, target)
                        : base_key(op, quant, bucket, s.hidden, s.intermediate, target);
  key.weight_scale = wscale;
  key.experts = static_cast<std::uint16_t>(s.experts);
  key.top_k = static_cast<std::uint16_t>(s.top_k);
  if (gate_up) {
    key.bias = s.gate_up_bias;
    key.act = s.act;
    if (s.act == Activation::swiglu_oai) {
      key.act_alpha = s.act_alpha;
      key.act_limit = s.act_limit;
    }
    key.out_dtype = DType::bf16;
  } else {
    key.bias = s.down_bias;
    key.router_weight = true;
    // Y in bf16 unless the heuristic splits K (its partials stay f32). The FP8
    // grouped GEMMs never split K: their Y is bf16, which halves the bytes the
    // down epilogue writes and the combine reads.
    key.out_dtype = DType::bf16;
    if (!is_fp8(quant)) key.out_dtype = down_out_dtype(key, tuning);
  }
  return key;
}

namespace {
// The largest bucket below b (b >= 2, moejit/bucketing.hpp with the default
// exponent e): buckets of the octave [2^j, 2^(j+1)) of b - 1 are the multiples
// of 2^(j - e), every m <= 2^e is one. No allocation (the launch path calls it).
std::uint32_t previous_bucket(std::uint32_t b) {
  const std::uint32_t v = b - 1;
  if (v <= (1u << kDefaultBucketExponent)) return v;
  const int j = 31 - __builtin_clz(v);
  const std::uint32_t g = 1u << (j - kDefaultBucketExponent);
  return v / g * g;
}
}  // namespace

std::uint32_t split_tail_bucket(const MoeLayerShape& s, QuantMode quant, std::uint32_t bucket, const Target& target) {
  return split_tail_bucket(s, quant, bucket, target, util::env::gemm_tuning());
}

std::uint32_t split_tail_bucket(const MoeLayerShape& s, QuantMode quant, std::uint32_t bucket, const Target& target,
                                const GemmTuning& tuning) {
  if (quant != QuantMode::w4a16_mxfp4) return 0;
  const WeightScale w = default_weight_scale(quant);
  const SpecKey gu = gemm_key(OpKind::gate_up, s, quant, w, bucket, target, tuning),
                dn = gemm_key(OpKind::down, s, quant, w, bucket, target, tuning);
  const GemmConfig cg = choose_config(gu, tuning), cd = choose_config(dn, tuning);
  auto two_wg = [](const GemmConfig& c) { return c.kernel == GemmKernel::mxfp4_wgmma && c.wg == 2 && c.split_tail; };
  if (!two_wg(cg) || !two_wg(cd)) return 0;
  for (std::uint32_t b = bucket; b > 1;) {
    b = previous_bucket(b);
    const SpecKey tg = gemm_key(OpKind::gate_up, s, quant, w, b, target, tuning),
                  td = gemm_key(OpKind::down, s, quant, w, b, target, tuning);
    const GemmConfig ctg = choose_config(tg, tuning), ctd = choose_config(td, tuning);
    if (ctg.kernel != GemmKernel::mxfp4_wgmma || ctd.kernel != GemmKernel::mxfp4_wgmma) return 0;  // past the wgmma range
    if (ctg.wg == 1 && ctd.wg == 1 && ctg.wa == cg.wa && ctd.wa == cd.wa && ctg.k_tail == cg.k_tail && ctd.k_tail == cd.k_tail && td.out_dtype == dn.out_dtype)
      return b;
  }
  return 0;
}

SpecKey route_key(const MoeLayerShape& s, std::uint32_t bucket, const Target& target) {
  SpecKey key = base_key(OpKind::route, QuantMode::bf16, bucket, 0, 0, target);
  key.experts = static_cast<std::uint16_t>(s.experts);
  key.top_k = static_cast<std::uint16_t>(s.top_k);
  key.out_dtype = DType::i32;
  return key;
}

SpecKey combine_key(const MoeLayerShape& s, DType y_dtype, std::uint32_t bucket, const Target& target) {
  SpecKey key = base_key(OpKind::combine, QuantMode::bf16, bucket, s.hidden, 0, target);
  key.top_k = static_cast<std::uint16_t>(s.top_k);
  // The f32-Y and bf16-Y kernels never share a key: in carries the Y dtype.
  key.in_dtype = y_dtype;
  key.out_dtype = DType::bf16;
  return key;
}

}  // namespace moejit::ops
