// ModelSpec + PlanOptions -> PrewarmPlan for one GPU (TP splits I, EP splits E).
#include <string>

#include "key/float_text.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/model.hpp"

namespace moejit {
namespace {

// MX formats share one E8M0 scale per 32 consecutive K elements.
constexpr std::uint32_t kMxBlock = 32;

QuantMode choose_quant(const ModelSpec& m, const PlanOptions& o) {
  if (o.quant) return *o.quant;
  if (m.checkpoint_quant) return *m.checkpoint_quant;
  if (m.checkpoint_quant_method.empty()) return QuantMode::bf16;
  throw InvalidArgument(
      "model " + m.name + ": checkpoint quantization '" + m.checkpoint_quant_method +
      "' is not supported (supported quant_method values: mxfp4 -> w4a16_mxfp4, fp8 without "
      "weight_block_size -> fp8_per_token); choose a quant mode explicitly (bf16, w4a16_mxfp4, "
      "mxfp8, fp8_per_token)");
}

}  // namespace

std::string ModelSpec::to_string() const {
  std::string s = name + " (" + model_type + "): D=" + std::to_string(hidden) +
                  " I=" + std::to_string(intermediate) + " E=" + std::to_string(experts) +
                  " top_k=" + std::to_string(top_k) + " moe_layers=" + std::to_string(layers_moe) +
                  " act=" + std::string(moejit::to_string(act));
  if (act == Activation::swiglu_oai)
    s += " alpha=" + detail::float_text(alpha) + " limit=" + detail::float_text(limit);
  s += " gate_up_bias=" + std::string(moejit::to_string(gate_up_bias)) +
       " down_bias=" + std::string(moejit::to_string(down_bias)) + " checkpoint_quant=" +
       (checkpoint_quant ? std::string(moejit::to_string(*checkpoint_quant))
                         : checkpoint_quant_method.empty() ? std::string("none (bf16)")
                                                           : "unsupported (" + checkpoint_quant_method + ")");
  if (shared_experts) s += " shared_experts=" + std::to_string(shared_experts);
  return s;
}

PrewarmPlan make_plan(const ModelSpec& m, const PlanOptions& o) {
  if (o.max_num_tokens < 1) throw InvalidArgument("max_num_tokens must be >= 1, got 0");
  if (o.max_num_tokens > kMaxBucketedTokens)
    throw InvalidArgument("max_num_tokens must be <= " + std::to_string(kMaxBucketedTokens) +
                          ", got " + std::to_string(o.max_num_tokens));
  if (o.bucket_exponent < 0 || o.bucket_exponent > 16)
    throw InvalidArgument("bucket_exponent must be in [0, 16], got " +
                          std::to_string(o.bucket_exponent));
  if (o.tp < 1) throw InvalidArgument("tp must be >= 1, got " + std::to_string(o.tp));
  if (o.ep < 1) throw InvalidArgument("ep must be >= 1, got " + std::to_string(o.ep));
  if (m.hidden == 0 || m.intermediate == 0 || m.experts == 0 || m.top_k == 0)
    throw InvalidArgument("model " + m.name + ": incomplete ModelSpec (" + m.to_string() + ")");
  const auto tp = static_cast<std::uint32_t>(o.tp), ep = static_cast<std::uint32_t>(o.ep);
  if (m.intermediate % tp != 0)
    throw InvalidArgument("tp=" + std::to_string(o.tp) +
                          " does not divide the expert intermediate size " +
                          std::to_string(m.intermediate) + " of model " + m.name);
  if (m.experts % ep != 0)
    throw InvalidArgument("ep=" + std::to_string(o.ep) + " does not divide the expert count " +
                          std::to_string(m.experts) + " of model " + m.name);

  const QuantMode quant = choose_quant(m, o);
  MoeLayerShape shape;
  shape.hidden = m.hidden;
  shape.intermediate = m.intermediate / tp;
  shape.experts = m.experts / ep;
  shape.top_k = m.top_k;
  shape.act = m.act;
  shape.act_alpha = m.alpha;
  shape.act_limit = m.limit;
  shape.gate_up_bias = m.gate_up_bias;
  shape.down_bias = m.down_bias;

  if (quant == QuantMode::w4a16_mxfp4 || quant == QuantMode::mxfp8) {
    // Why: a 32-element scale block must not straddle a TP partition, and both
    // GEMMs reduce over whole blocks (gate_up K = D, down K = I / tp).
    if (shape.hidden % kMxBlock != 0)
      throw InvalidArgument("quant " + std::string(to_string(quant)) + " needs the hidden size " +
                            std::to_string(shape.hidden) + " of model " + m.name +
                            " to be a multiple of 32 (MX block)");
    if (shape.intermediate % kMxBlock != 0)
      throw InvalidArgument("quant " + std::string(to_string(quant)) +
                            " needs the per-GPU intermediate size (" +
                            std::to_string(m.intermediate) + " / tp=" + std::to_string(o.tp) +
                            " = " + std::to_string(shape.intermediate) +
                            ") to be a multiple of 32 (MX block); choose another tp");
  }

  PrewarmPlan plan;
  plan.model_name = m.name;
  plan.layers = {shape};
  plan.quant_modes = {quant};
  plan.max_num_tokens = o.max_num_tokens;
  plan.bucket_exponent = o.bucket_exponent;
  plan.target = o.target;
  return plan;
}

}  // namespace moejit
