// Canonical text of a specialization key and its strict parser.
//
// Grammar (docs/key.md):
//   key    := field (' '+ field)*        ; surrounding spaces/tabs are ignored
//   field  := name '=' value             ; each of the 18 names exactly once
//   names  := op quant tokens n k n_align k_align experts top_k wscale bias act alpha
//             limit router_weight in out target   ; to_text() writes this order
//   uint   := '0' | [1-9][0-9]*          ; no sign, no leading zeros
//   float  := std::from_chars general format, finite; to_text writes the
//             shortest round-trip form (std::to_chars)
//   bool   := '0' | '1'
#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include "key/float_text.hpp"
#include "moejit/error.hpp"
#include "moejit/key.hpp"

namespace moejit {
namespace {

enum Field : int {
  f_op, f_quant, f_tokens, f_n, f_k, f_n_align, f_k_align, f_experts, f_top_k, f_wscale, f_bias, f_act,
  f_alpha, f_limit, f_router_weight, f_in, f_out, f_target, f_count
};
constexpr std::array<std::string_view, f_count> kFieldNames{
    "op", "quant", "tokens", "n", "k", "n_align", "k_align", "experts", "top_k", "wscale", "bias", "act",
    "alpha", "limit", "router_weight", "in", "out", "target"};

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

[[noreturn]] void fail(std::string_view field, std::string_view value, std::string_view why) {
  throw InvalidArgument("specialization key field '" + std::string(field) + "' = " +
                        quoted(value) + ": " + std::string(why));
}

std::uint64_t parse_uint(std::string_view field, std::string_view v, std::uint64_t max) {
  std::uint64_t out = 0;
  const bool leading_zero = v.size() > 1 && v.front() == '0';
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || leading_zero || ec != std::errc() || p != v.data() + v.size() || out > max)
    fail(field, v,
         "expected a decimal integer in [0, " + std::to_string(max) + "] without sign or leading zeros");
  return out;
}

float parse_float(std::string_view field, std::string_view v) {
  float out = 0.f;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, std::chars_format::general);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || !std::isfinite(out))
    fail(field, v, "expected a finite decimal number");
  return out;
}

template <class F>
auto parse_enum(std::string_view field, std::string_view v, F&& parse) {
  try {
    return parse(v);
  } catch (const InvalidArgument& e) {
    fail(field, v, e.what());
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> key_fields(const SpecKey& key) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(f_count);
  auto add = [&](Field f, std::string v) { out.emplace_back(kFieldNames[f], std::move(v)); };
  add(f_op, std::string(to_string(key.op)));
  add(f_quant, std::string(to_string(key.quant)));
  add(f_tokens, std::to_string(key.token_bucket));
  add(f_n, std::to_string(key.n));
  add(f_k, std::to_string(key.k));
  add(f_n_align, std::to_string(key.n_align));
  add(f_k_align, std::to_string(key.k_align));
  add(f_experts, std::to_string(key.experts));
  add(f_top_k, std::to_string(key.top_k));
  add(f_wscale, std::string(to_string(key.weight_scale)));
  add(f_bias, std::string(to_string(key.bias)));
  add(f_act, std::string(to_string(key.act)));
  add(f_alpha, detail::float_text(key.act_alpha));
  add(f_limit, detail::float_text(key.act_limit));
  add(f_router_weight, key.router_weight ? "1" : "0");
  add(f_in, std::string(to_string(key.in_dtype)));
  add(f_out, std::string(to_string(key.out_dtype)));
  add(f_target, to_string(key.target));
  return out;
}

std::string SpecKey::to_text() const {
  std::string out;
  out.reserve(200);
  for (const auto& [name, value] : key_fields(*this)) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::string key_diff(const SpecKey& a, const SpecKey& b) {
  const auto fa = key_fields(a), fb = key_fields(b);
  std::string out;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].second == fb[i].second) continue;
    if (!out.empty()) out += '\n';
    out += fa[i].first + ": " + fa[i].second + " -> " + fb[i].second;
  }
  return out;
}

SpecKey parse_key(std::string_view text) {
  std::array<std::optional<std::string_view>, f_count> values;
  std::size_t pos = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (pos < text.size()) {
    if (is_space(text[pos])) {
      ++pos;
      continue;
    }
    std::size_t end = pos;
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::string_view token = text.substr(pos, end - pos);
    pos = end;
    const std::size_t eq = token.find('=');
    if (eq == std::string_view::npos)
      throw InvalidArgument("specialization key field " + quoted(token) +
                            ": expected name=value");
    const std::string_view name = token.substr(0, eq), value = token.substr(eq + 1);
    int f = 0;
    while (f < f_count && kFieldNames[f] != name) ++f;
    if (f == f_count) {
      std::string names;
      for (auto n : kFieldNames) names += (names.empty() ? "" : ", ") + std::string(n);
      // Why the hint: text written before key version 2 spells the token bucket "m".
      const std::string hint = name == "m" ? "; key version 1 text: key version 2 names the token bucket 'tokens'" : "";
      throw InvalidArgument("specialization key: unknown field " + quoted(name) + " (value " +
                            quoted(value) + "; fields: " + names + hint + ")");
    }
    if (values[f])
      fail(name, value, "duplicate field (first value " + quoted(*values[f]) + ")");
    values[f] = value;
  }
  for (int f = 0; f < f_count; ++f)
    if (!values[f])
      throw InvalidArgument("specialization key: missing field '" + std::string(kFieldNames[f]) +
                            "' in " + quoted(text));

  auto v = [&](Field f) { return *values[f]; };
  auto n = [&](Field f) { return kFieldNames[f]; };
  SpecKey key;
  key.op = parse_enum(n(f_op), v(f_op), parse_op_kind);
  key.quant = parse_enum(n(f_quant), v(f_quant), parse_quant_mode);
  key.token_bucket = static_cast<std::uint32_t>(parse_uint(n(f_tokens), v(f_tokens), UINT32_MAX));
  key.n = static_cast<std::uint32_t>(parse_uint(n(f_n), v(f_n), UINT32_MAX));
  key.k = static_cast<std::uint32_t>(parse_uint(n(f_k), v(f_k), UINT32_MAX));
  key.n_align = static_cast<std::uint16_t>(parse_uint(n(f_n_align), v(f_n_align), UINT16_MAX));
  key.k_align = static_cast<std::uint16_t>(parse_uint(n(f_k_align), v(f_k_align), UINT16_MAX));
  key.experts = static_cast<std::uint16_t>(parse_uint(n(f_experts), v(f_experts), UINT16_MAX));
  key.top_k = static_cast<std::uint16_t>(parse_uint(n(f_top_k), v(f_top_k), UINT16_MAX));
  key.weight_scale = parse_enum(n(f_wscale), v(f_wscale), parse_weight_scale);
  key.bias = parse_enum(n(f_bias), v(f_bias), parse_bias_kind);
  key.act = parse_enum(n(f_act), v(f_act), parse_activation);
  key.act_alpha = parse_float(n(f_alpha), v(f_alpha));
  key.act_limit = parse_float(n(f_limit), v(f_limit));
  key.router_weight = parse_uint(n(f_router_weight), v(f_router_weight), 1) == 1;
  key.in_dtype = parse_enum(n(f_in), v(f_in), parse_dtype);
  key.out_dtype = parse_enum(n(f_out), v(f_out), parse_dtype);
  key.target = parse_enum(n(f_target), v(f_target), parse_target);
  validate(key);
  return key;
}

}  // namespace moejit
