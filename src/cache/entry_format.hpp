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
// The oldest format version a moejit wrote. Versions from it up to
// kEntryFormatVersion share this layout (prefix, header lines, body; version 1
// differs only in the key line's text), so an entry of one can be checked in
// full apart from its version: verify reports an intact one as outdated.
inline constexpr std::uint32_t kOldestEntryFormatVersion = 1;
// The largest version field verify takes for a newer moejit's entry. Why a
// bound: versions grow by one per format change, while the bytes after the
// magic of a damaged or hostile file have a non-zero high byte with near
// certainty; those stay corrupt (repair moves them) instead of passing for a
// newer library's entry (repair keeps it).
inline constexpr std::uint32_t kLargestPlausibleEntryFormatVersion = 255;
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

// Which format versions a decode accepts.
enum class FormatVersions : unsigned char {
  current,  // kEntryFormatVersion only: every load and every tool that uses an entry
  // Any version number, the rest read with this version's layout: for verify,
  // to tell an intact entry of another version from a damaged one (the
  // caller looks at DecodeResult::format_version). Never for serving.
  any,
};

struct [[nodiscard]] DecodeResult {
  std::optional<Entry> entry;  // set on success
  std::string error;           // why not, naming the part ("bad magic", "body checksum mismatch", ...)
  // The prefix's format version when the magic is right (0 otherwise). With
  // FormatVersions::any, `entry` may be set for a version other than
  // kEntryFormatVersion: the caller decides what that entry is.
  std::uint32_t format_version = 0;
};

// Decodes and verifies sizes, magic, format version, both checksums and the
// header grammar. Does not compare the payload with an expected one (the caller
// does: DiskCache checks payload equality and the address).
DecodeResult decode_entry(std::string_view bytes, FormatVersions versions = FormatVersions::current);

// Checks the 40-byte prefix (magic, version, declared sizes) against the file
// size and kMaxEntryBytes, before a reader allocates for the rest. "" when it
// fits; `prefix` may be shorter than 40 bytes (then it is the reason).
std::string entry_prefix_problem(std::string_view prefix, std::uint64_t file_size,
                                 FormatVersions versions = FormatVersions::current);

// Only the 40-byte prefix and the header (no body checksum): for listings.
// `bytes` may hold just the first kEntryPrefixBytes + header_len bytes.
DecodeResult decode_header_only(std::string_view bytes, std::uint64_t file_size,
                                FormatVersions versions = FormatVersions::current);

// The format version of an entry prefix whose magic is right; 0 when `prefix`
// is shorter than 12 bytes or its magic differs.
std::uint32_t entry_format_version(std::string_view prefix) noexcept;

// Why a reader refuses format version `version` (!= kEntryFormatVersion):
// "format version 1 is older than this library's 2", "... is newer than ...".
std::string format_version_problem(std::uint32_t version);

}  // namespace moejit::cache
