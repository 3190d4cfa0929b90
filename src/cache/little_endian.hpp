#pragma once
// Little-endian integers of the cache's binary formats (entry files and AOT packs).
#include <cstdint>
#include <string>
#include <string_view>

namespace moejit::cache {

inline void put_u32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline void put_u64(std::string& s, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}
// `bytes` (1..8) bytes at s[off]; the caller has checked the bounds.
inline std::uint64_t get_le(std::string_view s, std::size_t off, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[off + static_cast<std::size_t>(i)]);
  return v;
}

}  // namespace moejit::cache
