#pragma once
// Internal: one table of spellings per enum, shared by to_string() and parse_*().
// Why a table: to_string and the parser can never disagree on a spelling, and an
// error can list every accepted spelling.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "moejit/error.hpp"

namespace moejit::detail {

template <class E, std::size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

template <class E, std::size_t N>
constexpr std::string_view enum_name(const EnumNames<E, N>& names, E value) noexcept {
  for (const auto& [e, s] : names)
    if (e == value) return s;
  return "<invalid>";
}

template <class E, std::size_t N>
std::string enum_spellings(const EnumNames<E, N>& names) {
  std::string out;
  for (const auto& [e, s] : names) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

// Exact spelling match; otherwise InvalidArgument "unknown <what> '<text>' (accepted: ...)".
template <class E, std::size_t N>
E enum_parse(const EnumNames<E, N>& names, std::string_view text, std::string_view what) {
  for (const auto& [e, s] : names)
    if (s == text) return e;
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(text) +
                        "' (accepted: " + enum_spellings(names) + ")");
}

}  // namespace moejit::detail
