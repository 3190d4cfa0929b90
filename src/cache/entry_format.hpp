#pragma once
// Encoding and decoding of one disk-cache entry (grammar: entry_format.cpp and
// docs/cache-format.md). Pure functions over bytes: no I/O, never throw on bad
// input (decode returns the reason instead).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cache/content_address.hpp"
#include "moejit/runtime.hpp"

namespace moejit::cache {

inline constexpr char kEntryMagic[8] = {'M', 'O', 'E', 'J', 'I', 'T', 'C', 'E'};
// Version 2: the header's key line is key version 2 text (kKeyHashVersion;
// "tokens=", "in="). A reader refuses any other version: a version-1 entry is a
// miss (moved to quarantine and recompiled), never served.
inline constexpr std::uint32_t kEntryFormatVersion = 2;
inline constexpr std::size_t kEntryPrefixBytes = 40;
// Largest entry file (prefix + header + body) the cache writes or reads.
// Why 16 MiB: real entries are a few hundred KB (the largest MoE GEMM cubin is
// well under 2 MB); a reader holds at most one entry per thread, so a -j16
// prewarm over a cache of hostile files needs at most 16 x 16 MiB.
inline constexpr std::uint64_t kMaxEntryBytes = 16ull << 20;

struct EntryHeader {
  AddressPayload payload;        // what the content address is computed from
  std::string key_text;          // canonical text (key version 2) of the key that first compiled it
  std::string lowered_name;
  LaunchContract launch;
  ResourceReport resources;
  double compile_ms = 0.0;
  std::int64_t created_unix = 0; // seconds since the epoch, at publish
  std::string nvrtc_log;
};

struct Entry {
  EntryHeader header;
  std::string cubin;
};

std::string encode_entry(const Entry& entry);

struct [[nodiscard]] DecodeResult {
  std::optional<Entry> entry;  // set on success
  std::string error;           // why not, naming the part ("bad magic", "body checksum mismatch", ...)
};

// Decodes and verifies sizes, magic, format version, both checksums and the
// header grammar. Does not compare the payload with an expected one (the caller
// does: DiskCache checks payload equality and the address).
DecodeResult decode_entry(std::string_view bytes);

// Checks the 40-byte prefix (magic, version, declared sizes) against the file
// size and kMaxEntryBytes, before a reader allocates for the rest. "" when it
// fits; `prefix` may be shorter than 40 bytes (then it is the reason).
std::string entry_prefix_problem(std::string_view prefix, std::uint64_t file_size);

// Only the 40-byte prefix and the header (no body checksum): for listings.
// `bytes` may hold just the first kEntryPrefixBytes + header_len bytes.
DecodeResult decode_header_only(std::string_view bytes, std::uint64_t file_size);

}  // namespace moejit::cache
