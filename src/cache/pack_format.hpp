#pragma once
// AOT pack: one immutable file holding compiled kernels, their index and a
// manifest (grammar: pack_format.cpp and docs/cache-format.md). Pure functions
// over bytes: no I/O, never throw on bad input (the error says why).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/entry_format.hpp"

namespace moejit::cache {

inline constexpr char kPackMagic[8] = {'M', 'O', 'E', 'J', 'I', 'T', 'P', 'K'};
// Version 2: the manifest's keys are key version 2 text and the blobs are entries
// of entry format 2. A reader refuses any other version at mount (a version-1
// pack is not used; kernels come from the directory or NVRTC).
inline constexpr std::uint32_t kPackFormatVersion = 2;
inline constexpr std::size_t kPackPrefixBytes = 64;
inline constexpr std::size_t kPackRecordBytes = 40;
// Why caps: a hostile prefix must not make a reader allocate gigabytes.
inline constexpr std::uint64_t kMaxPackManifestBytes = 64ull << 20;
inline constexpr std::uint64_t kMaxPackEntries = 1u << 20;

struct PackRecord {
  Hash128 address;
  std::uint64_t offset = 0;  // from the start of the blobs section
  std::uint64_t length = 0;
  std::uint64_t xxh3 = 0;    // XXH3-64 of the blob (an encoded entry)
};

struct PackKey {
  std::string key_text;  // canonical text of a specialization key
  Hash128 address;       // the entry that serves it
};

struct PackManifest {
  std::string moejit_version, nvrtc_version, target;
  std::int64_t created_unix = 0;
  std::string plan_json = "null";  // the prewarm plan as a JSON value, or null (export)
  std::vector<PackKey> keys;       // exact key coverage
  std::string to_json() const;     // the manifest section's text
};

struct PackPrefix {
  std::uint32_t version = 0;
  std::uint64_t manifest_len = 0, entry_count = 0, blobs_len = 0, manifest_xxh = 0, index_xxh = 0;
  std::uint64_t head_bytes() const { return kPackPrefixBytes + manifest_len + entry_count * kPackRecordBytes; }
};

struct PackHead {
  PackPrefix prefix;
  PackManifest manifest;
  std::vector<PackRecord> index;  // sorted by address, unique
  std::uint64_t blobs_offset = 0; // file offset of the blobs section
};

// The 64-byte prefix against the file size. false + error on any problem.
bool parse_pack_prefix(std::string_view bytes, std::uint64_t file_size, PackPrefix& out, std::string& error);

// Prefix, manifest and index: `bytes` holds at least the first head_bytes() of
// the file (more is ignored). Checks checksums, JSON fields, index order and
// bounds. false + error naming the part.
bool parse_pack_head(std::string_view bytes, std::uint64_t file_size, PackHead& out, std::string& error);

// Verifies one blob (checksum, entry decode, payload address, manifest fields).
DecodeResult decode_pack_blob(const PackHead& head, const PackRecord& record, std::string_view blob);

// The whole pack file. Entries must share the manifest's library version,
// NVRTC version and target; duplicates (same address) are written once.
// Throws InvalidArgument naming the first mismatching entry.
std::string encode_pack(const PackManifest& manifest, const std::vector<Entry>& entries);

}  // namespace moejit::cache
