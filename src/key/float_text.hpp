#pragma once
// Internal: shortest round-trip text of a float (std::to_chars), e.g. 1.702f -> "1.702",
// 7.0f -> "7", 0.0f -> "0". Used by the key's canonical text and error messages.
#include <charconv>
#include <string>

namespace moejit::detail {

inline std::string float_text(float v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 32 bytes always suffice for a float
  return std::string(buf, p);
}

}  // namespace moejit::detail
