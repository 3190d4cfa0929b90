// libFuzzer target: the disk-cache entry decoder (prefix, header grammar, body).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  moejit::cache::DecodeResult h = moejit::cache::decode_header_only(bytes, size);
  moejit::cache::DecodeResult d = moejit::cache::decode_entry(bytes);
  if (d.entry) {
    // A decoded entry re-encodes to the same bytes (the format has one spelling).
    const std::string again = moejit::cache::encode_entry(*d.entry);
    if (again != bytes) __builtin_trap();
    (void)moejit::cache::check_entry(*d.entry, d.entry->header.payload.address(), &d.entry->header.payload);
  }
  if (d.entry && !h.entry) __builtin_trap();
  return 0;
}
