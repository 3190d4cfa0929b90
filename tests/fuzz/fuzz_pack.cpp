// libFuzzer target: the AOT pack parser (prefix, manifest, index) and blobs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cache/pack_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  moejit::cache::PackHead head;
  std::string error;
  if (!moejit::cache::parse_pack_head(bytes, size, head, error)) return 0;
  for (const moejit::cache::PackRecord& r : head.index) {
    if (head.blobs_offset + r.offset + r.length > size) __builtin_trap();  // the parser checked bounds
    (void)moejit::cache::decode_pack_blob(head, r, bytes.substr(head.blobs_offset + r.offset, r.length));
  }
  (void)head.manifest.to_json();
  return 0;
}
