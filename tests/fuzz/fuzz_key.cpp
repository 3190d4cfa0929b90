// libFuzzer target: parse_key (canonical key text). A parsed key round-trips.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "moejit/error.hpp"
#include "moejit/key.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const moejit::SpecKey k = moejit::parse_key(text);
    if (!(moejit::parse_key(k.to_text()) == k)) __builtin_trap();
    (void)k.hash();
  } catch (const moejit::Error&) {
  }
  return 0;
}
