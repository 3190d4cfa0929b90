// Specialization key: enum spellings, alignment facts, validation, constructors.
#include "moejit/key.hpp"

#include <cmath>
#include <string>

#include "key/enum_names.hpp"
#include "key/float_text.hpp"
#include "moejit/error.hpp"

namespace moejit {
namespace {

constexpr detail::EnumNames<BiasKind, 3> kBiasNames{{
    {BiasKind::none, "none"},
    {BiasKind::f32, "f32"},
    {BiasKind::bf16, "bf16"},
}};
constexpr detail::EnumNames<WeightScale, 4> kScaleNames{{
    {WeightScale::none, "none"},
    {WeightScale::e8m0_block32, "e8m0_block32"},
    {WeightScale::per_expert, "per_expert"},
    {WeightScale::per_channel, "per_channel"},
}};

[[noreturn]] void fail(std::string_view field, const std::string& value, std::string_view why) {
  throw InvalidArgument("specialization key field '" + std::string(field) + "' = " + value +
                        ": " + std::string(why));
}

// The per-op meaning of n, k, experts, top_k, in and out (docs/key.md).
void validate_op_fields(const SpecKey& key) {
  const bool gemm = key.op == OpKind::gate_up || key.op == OpKind::down || key.op == OpKind::wgrad;
  const std::string op = "op=" + std::string(to_string(key.op));
  if (gemm) {
    if (key.in_dtype != DType::none)
      fail("in", std::string(to_string(key.in_dtype)), "must be none for " + op + " (only the combine reads it)");
    return;
  }
  if (key.k != 0) fail("k", std::to_string(key.k), "must be 0 for " + op + " (k is the GEMM reduction length)");
  if (key.bias != BiasKind::none)
    fail("bias", std::string(to_string(key.bias)), "must be none for " + op + " (GEMM epilogue only)");
  if (key.act != Activation::none)
    fail("act", std::string(to_string(key.act)), "must be none for " + op + " (GEMM epilogue only)");
  if (key.router_weight) fail("router_weight", "1", "must be 0 for " + op + " (GEMM epilogue only)");
  auto positive = [&](std::string_view field, std::uint16_t v) {
    if (v == 0) fail(field, "0", "must be >= 1 for " + op);
  };
  auto zero = [&](std::string_view field, std::uint32_t v, std::string_view why) {
    if (v != 0) fail(field, std::to_string(v), "must be 0 for " + op + " (" + std::string(why) + ")");
  };
  auto dtype_is = [&](std::string_view field, DType v, DType want) {
    if (v != want)
      fail(field, std::string(to_string(v)), "must be " + std::string(to_string(want)) + " for " + op);
  };
  switch (key.op) {
    case OpKind::route:
      zero("n", key.n, "the route writes index lists, no columns");
      positive("experts", key.experts);
      positive("top_k", key.top_k);
      dtype_is("in", key.in_dtype, DType::none);
      dtype_is("out", key.out_dtype, DType::i32);
      break;
    case OpKind::combine:
      zero("experts", key.experts, "the combine's code does not depend on E");
      positive("top_k", key.top_k);
      if (key.in_dtype == DType::none)
        fail("in", "none", "must name the dtype of the Y rows the combine reads for " + op);
      dtype_is("out", key.out_dtype, DType::bf16);
      break;
    case OpKind::quantize:
      zero("experts", key.experts, "the quantizer does not depend on E");
      zero("top_k", key.top_k, "the quantizer does not depend on top_k");
      dtype_is("in", key.in_dtype, DType::none);
      break;
    case OpKind::k_order:
      zero("experts", key.experts, "the reorder does not depend on E");
      zero("top_k", key.top_k, "the reorder does not depend on top_k");
      if (key.token_bucket != 1) fail("tokens", std::to_string(key.token_bucket), "must be 1 for " + op + " (rows are a launch argument)");
      if (key.quant != QuantMode::w4a16_mxfp4)
        fail("quant", std::string(to_string(key.quant)), "must be w4a16_mxfp4 for " + op + " (the order of its warp-specialized GEMM)");
      if (key.n == 0 || key.n % 32 != 0)
        fail("n", std::to_string(key.n), "must be a positive multiple of 32 for " + op + " (blocks of 32 columns)");
      dtype_is("in", key.in_dtype, DType::none);
      dtype_is("out", key.out_dtype, DType::bf16);
      break;
    default: break;
  }
}

}  // namespace

std::string_view to_string(BiasKind v) { return detail::enum_name(kBiasNames, v); }
std::string_view to_string(WeightScale v) { return detail::enum_name(kScaleNames, v); }
BiasKind parse_bias_kind(std::string_view s) {
  return detail::enum_parse(kBiasNames, s, "bias kind");
}
WeightScale parse_weight_scale(std::string_view s) {
  return detail::enum_parse(kScaleNames, s, "weight scale");
}

std::uint16_t alignment_of(std::uint32_t v) noexcept {
  if (v == 0) return 256;
  const std::uint32_t low = v & (~v + 1u);  // lowest set bit
  return static_cast<std::uint16_t>(low < 256u ? low : 256u);
}

WeightScale default_weight_scale(QuantMode q) noexcept {
  switch (q) {
    case QuantMode::bf16: return WeightScale::none;
    case QuantMode::w4a16_mxfp4:
    case QuantMode::mxfp8: return WeightScale::e8m0_block32;
    case QuantMode::fp8_per_token: return WeightScale::per_expert;
  }
  return WeightScale::none;
}

SpecKey make_gemm_key(OpKind op, QuantMode quant, std::uint32_t token_bucket, std::uint32_t n,
                      std::uint32_t k, const Target& target) noexcept {
  SpecKey key;
  key.op = op;
  key.quant = quant;
  key.token_bucket = token_bucket;
  key.n = n;
  key.k = k;
  key.n_align = alignment_of(n);
  key.k_align = alignment_of(k);
  key.weight_scale = default_weight_scale(quant);
  key.target = target;
  return key;
}

void validate(const SpecKey& key) {
  if (key.token_bucket < 1) fail("tokens", "0", "the token bucket must be >= 1");
  if (key.n_align != alignment_of(key.n))
    fail("n_align", std::to_string(key.n_align),
         "does not match n=" + std::to_string(key.n) + " (alignment_of(n) = " +
             std::to_string(alignment_of(key.n)) + ")");
  if (key.k_align != alignment_of(key.k))
    fail("k_align", std::to_string(key.k_align),
         "does not match k=" + std::to_string(key.k) + " (alignment_of(k) = " +
             std::to_string(alignment_of(key.k)) + ")");
  const std::pair<std::string_view, float> params[] = {{"alpha", key.act_alpha},
                                                       {"limit", key.act_limit}};
  for (const auto& [name, v] : params) {
    if (!std::isfinite(v)) fail(name, detail::float_text(v), "must be finite");
    if (key.act == Activation::swiglu_oai) {
      if (!(v > 0.f)) fail(name, detail::float_text(v), "must be > 0 for act=swiglu_oai");
    } else if (v != 0.f) {
      fail(name, detail::float_text(v),
           "must be 0 unless act=swiglu_oai (act=" + std::string(to_string(key.act)) + ")");
    }
  }
  bool scale_ok = false;
  const char* expected = "";
  switch (key.quant) {
    case QuantMode::bf16:
      scale_ok = key.weight_scale == WeightScale::none;
      expected = "none";
      break;
    case QuantMode::w4a16_mxfp4:
    case QuantMode::mxfp8:
      scale_ok = key.weight_scale == WeightScale::e8m0_block32;
      expected = "e8m0_block32";
      break;
    case QuantMode::fp8_per_token:
      scale_ok = key.weight_scale == WeightScale::per_expert ||
                 key.weight_scale == WeightScale::per_channel;
      expected = "per_expert or per_channel";
      break;
  }
  if (!scale_ok)
    fail("wscale", std::string(to_string(key.weight_scale)),
         "does not fit quant=" + std::string(to_string(key.quant)) + " (expected " + expected +
             ")");
  validate_op_fields(key);
}

}  // namespace moejit
