// to_string / parse for the vocabulary enums of moejit/types.hpp.
#include "moejit/types.hpp"

#include <charconv>

#include "key/enum_names.hpp"
#include "moejit/error.hpp"

namespace moejit {
namespace {

constexpr detail::EnumNames<OpKind, 7> kOpNames{{
    {OpKind::gate_up, "gate_up"},
    {OpKind::down, "down"},
    {OpKind::wgrad, "wgrad"},
    {OpKind::route, "route"},
    {OpKind::combine, "combine"},
    {OpKind::quantize, "quantize"},
    {OpKind::k_order, "k_order"},
}};
constexpr detail::EnumNames<QuantMode, 4> kQuantNames{{
    {QuantMode::bf16, "bf16"},
    {QuantMode::w4a16_mxfp4, "w4a16_mxfp4"},
    {QuantMode::mxfp8, "mxfp8"},
    {QuantMode::fp8_per_token, "fp8_per_token"},
}};
constexpr detail::EnumNames<DType, 7> kDTypeNames{{
    {DType::none, "none"},
    {DType::f32, "f32"},
    {DType::bf16, "bf16"},
    {DType::f16, "f16"},
    {DType::e4m3, "e4m3"},
    {DType::u8, "u8"},
    {DType::i32, "i32"},
}};
constexpr detail::EnumNames<Activation, 3> kActNames{{
    {Activation::none, "none"},
    {Activation::silu_gated, "silu_gated"},
    {Activation::swiglu_oai, "swiglu_oai"},
}};

}  // namespace

std::string_view to_string(OpKind v) { return detail::enum_name(kOpNames, v); }
std::string_view to_string(QuantMode v) { return detail::enum_name(kQuantNames, v); }
std::string_view to_string(DType v) { return detail::enum_name(kDTypeNames, v); }
std::string_view to_string(Activation v) { return detail::enum_name(kActNames, v); }

std::string to_string(const Target& t) {
  std::string s = "sm_" + std::to_string(t.sm);
  if (t.arch_specific) s += 'a';
  return s;
}

OpKind parse_op_kind(std::string_view s) { return detail::enum_parse(kOpNames, s, "op kind"); }
QuantMode parse_quant_mode(std::string_view s) {
  return detail::enum_parse(kQuantNames, s, "quant mode");
}
DType parse_dtype(std::string_view s) { return detail::enum_parse(kDTypeNames, s, "dtype"); }
Activation parse_activation(std::string_view s) {
  return detail::enum_parse(kActNames, s, "activation");
}

Target parse_target(std::string_view s) {
  // Grammar: "sm_" digits ["a"], digits = 2 or 3 decimal digits without a leading
  // zero (sm_75 .. sm_999); the number is 10 * major + minor as NVRTC spells it.
  auto bad = [&]() {
    return InvalidArgument("invalid target '" + std::string(s) +
                           "' (expected sm_<major><minor>[a], e.g. sm_90a, sm_90, sm_100a)");
  };
  if (s.size() < 5 || s.substr(0, 3) != "sm_") throw bad();
  std::string_view rest = s.substr(3);
  Target t;
  t.arch_specific = false;
  if (rest.back() == 'a') {
    t.arch_specific = true;
    rest.remove_suffix(1);
  }
  if (rest.size() < 2 || rest.size() > 3 || rest.front() == '0') throw bad();
  unsigned v = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || p != rest.data() + rest.size()) throw bad();
  t.sm = static_cast<std::uint16_t>(v);
  return t;
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::none: return 0;
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::e4m3: return 1;
    case DType::u8: return 1;
    case DType::i32: return 4;
  }
  return 0;
}

}  // namespace moejit
