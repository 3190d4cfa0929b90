#pragma once
// The content address of a compiled kernel: XXH3-128 of a canonical text built
// from everything the cubin depends on (docs/cache-format.md):
//   library version, XXH3-128 and length of the generated source, name
//   expression, the exact NVRTC option list, NVRTC version, target.
// Many specialization keys map to one address (the key is not part of it).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moejit/kernel_source.hpp"
#include "moejit/key.hpp"

namespace moejit::cache {

struct AddressPayload {
  std::string moejit_version;           // MOEJIT_VERSION, e.g. "0.1.0"
  std::string nvrtc_version;            // "13.0"
  std::string target;                   // "sm_90a"
  std::string name_expression;
  std::vector<std::string> options;     // exactly as passed to nvrtcCompileProgram
  Hash128 source_hash;                  // XXH3-128 of the source text
  std::uint64_t source_bytes = 0;

  friend bool operator==(const AddressPayload&, const AddressPayload&) = default;

  // The canonical text that is hashed (one "name=value" line per field, values
  // escaped as in the entry header; first line "moejit-content-address-v1").
  std::string canonical_text() const;
  Hash128 address() const;
  // "field: a -> b" for the first differing field; "" when equal.
  std::string first_difference(const AddressPayload& other) const;
};

// The library version compiled into moejit (MOEJIT_VERSION).
std::string_view library_version() noexcept;

// Payload of `source` compiled for `target` by NVRTC `nvrtc_version`.
AddressPayload make_payload(const KernelSource& source, const Target& target, std::string nvrtc_version);

// XXH3-128 of arbitrary bytes, as a Hash128.
Hash128 xxh3_128(std::string_view bytes) noexcept;

// 32 lowercase hex digits (high word first) -> Hash128; nullopt otherwise.
std::optional<Hash128> parse_hash_hex(std::string_view hex) noexcept;
// Same spelling as Hash128::hex(), usable without allocation into a 33-byte buffer.
void hash_hex(const Hash128& h, char out[33]) noexcept;

// Escaping used by header values: '\\' -> "\\\\", '\n' -> "\\n", '\r' -> "\\r".
std::string escape_value(std::string_view v);
// Inverse of escape_value; nullopt on a dangling or unknown escape.
std::optional<std::string> unescape_value(std::string_view v);

}  // namespace moejit::cache
