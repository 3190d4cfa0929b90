// AOT pack format, version 2. All integers little-endian.
//
//   pack        := prefix manifest index blobs
//   prefix      := magic format_version reserved manifest_len entry_count blobs_len
//                  manifest_xxh3 index_xxh3                                  (64 bytes)
//   magic       := "MOEJITPK"                                               8 bytes
//   format_version := u32                                                   = 2 (1: refused)
//   reserved    := u32                                                      = 0
//   manifest_len := u64                                                     <= 64 MiB
//   entry_count := u64                                                      <= 2^20
//   blobs_len   := u64
//   manifest_xxh3 := u64                   XXH3-64 (seed 0) of `manifest`
//   index_xxh3  := u64                     XXH3-64 (seed 0) of `index`
//   reserved2   := 8 zero bytes            (pads the prefix to 64 bytes)
//   manifest    := JSON object, UTF-8:
//                  {"format": 2, "moejit_version": str, "nvrtc_version": str,
//                   "target": str, "created_unix": int, "plan": object|null,
//                   "entries": int (== entry_count),
//                   "keys": [{"key": canonical key text (key version 2), "id": 32 hex}, ...]}
//                  every "id" of "keys" is the address of a record of `index`
//   index       := record{entry_count}, addresses strictly ascending
//   record      := address_hi u64, address_lo u64, offset u64, length u64, blob_xxh3 u64   (40 bytes)
//   blobs       := blobs_len bytes; record r's blob is blobs[r.offset, r.offset + r.length),
//                  inside the section, non-empty; blobs do not overlap
//   blob        := one disk-cache entry (entry format v2, entry_format.cpp) whose
//                  payload hashes to the record's address and whose moejit_version,
//                  nvrtc_version and target equal the manifest's
//
// The file size must equal 64 + manifest_len + 40 * entry_count + blobs_len.
// A reader checks the prefix, manifest and index at open and each blob when it
// is loaded (no mmap: a file truncated under a reader is an error, not SIGBUS).
#include "cache/pack_format.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/little_endian.hpp"
#include "moejit/error.hpp"

namespace moejit::cache {
namespace {

bool fail(std::string& error, std::string why) {
  error = std::move(why);
  return false;
}

}  // namespace

std::string PackManifest::to_json() const {
  nlohmann::ordered_json j;
  j["format"] = kPackFormatVersion;
  j["moejit_version"] = moejit_version;
  j["nvrtc_version"] = nvrtc_version;
  j["target"] = target;
  j["created_unix"] = created_unix;
  j["plan"] = nlohmann::ordered_json::parse(plan_json.empty() ? "null" : plan_json);
  nlohmann::ordered_json keys_j = nlohmann::ordered_json::array();
  for (const PackKey& k : keys) keys_j.push_back({{"key", k.key_text}, {"id", k.address.hex()}});
  j["keys"] = std::move(keys_j);
  return j.dump(1) + "\n";
}

bool parse_pack_prefix(std::string_view bytes, std::uint64_t file_size, PackPrefix& p, std::string& error) {
  if (file_size == 0) return fail(error, "empty file");
  if (bytes.size() < kPackPrefixBytes || file_size < kPackPrefixBytes)
    return fail(error, "truncated: " + std::to_string(file_size) + " bytes, shorter than the 64-byte prefix");
  if (std::memcmp(bytes.data(), kPackMagic, 8) != 0) return fail(error, "bad magic (not a moejit pack)");
  p.version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  if (p.version != kPackFormatVersion)
    return fail(error, "pack format version " + std::to_string(p.version) +
                           (p.version > kPackFormatVersion ? " is newer than" : " is older than") +
                           " this library's " + std::to_string(kPackFormatVersion));
  if (get_le(bytes, 12, 4) != 0 || get_le(bytes, 56, 8) != 0) return fail(error, "reserved prefix bytes are not zero");
  p.manifest_len = get_le(bytes, 16, 8);
  p.entry_count = get_le(bytes, 24, 8);
  p.blobs_len = get_le(bytes, 32, 8);
  p.manifest_xxh = get_le(bytes, 40, 8);
  p.index_xxh = get_le(bytes, 48, 8);
  if (p.manifest_len > kMaxPackManifestBytes || p.entry_count > kMaxPackEntries ||
      p.blobs_len > kMaxPackEntries * (kMaxEntryBytes + 1))
    return fail(error, "implausible sizes (manifest " + std::to_string(p.manifest_len) + ", entries " +
                           std::to_string(p.entry_count) + ", blobs " + std::to_string(p.blobs_len) + ")");
  const std::uint64_t expect = p.head_bytes() + p.blobs_len;
  if (file_size != expect)
    return fail(error, (file_size < expect ? "truncated: " : "size mismatch: ") + std::to_string(file_size) +
                           " bytes, prefix says " + std::to_string(expect));
  return true;
}

bool parse_pack_head(std::string_view bytes, std::uint64_t file_size, PackHead& out, std::string& error) {
  PackPrefix& p = out.prefix;
  if (!parse_pack_prefix(bytes, file_size, p, error)) return false;
  if (bytes.size() < p.head_bytes()) return fail(error, "truncated manifest or index");
  const std::string_view manifest = bytes.substr(kPackPrefixBytes, p.manifest_len);
  const std::string_view index = bytes.substr(kPackPrefixBytes + p.manifest_len, p.entry_count * kPackRecordBytes);
  if (XXH3_64bits(manifest.data(), manifest.size()) != p.manifest_xxh) return fail(error, "manifest checksum mismatch");
  if (XXH3_64bits(index.data(), index.size()) != p.index_xxh) return fail(error, "index checksum mismatch");
  out.blobs_offset = p.head_bytes();

  out.index.clear();
  out.index.reserve(static_cast<std::size_t>(p.entry_count));
  std::uint64_t covered = 0;
  for (std::uint64_t i = 0; i < p.entry_count; ++i) {
    const std::size_t o = static_cast<std::size_t>(i * kPackRecordBytes);
    PackRecord r;
    r.address.hi = get_le(index, o, 8);
    r.address.lo = get_le(index, o + 8, 8);
    r.offset = get_le(index, o + 16, 8);
    r.length = get_le(index, o + 24, 8);
    r.xxh3 = get_le(index, o + 32, 8);
    const std::string where = "index record " + std::to_string(i);
    if (!out.index.empty()) {
      const Hash128& prev = out.index.back().address;
      if (!(prev.hi < r.address.hi || (prev.hi == r.address.hi && prev.lo < r.address.lo)))
        return fail(error, where + ": addresses not strictly ascending");
    }
    if (r.length == 0 || r.length > kMaxEntryBytes + (1 << 20)) return fail(error, where + ": bad blob length");
    if (r.offset > p.blobs_len || r.length > p.blobs_len - r.offset) return fail(error, where + ": blob outside the pack");
    covered += r.length;
    out.index.push_back(r);
  }
  // Non-overlap: sorted by offset, each ends before the next begins.
  {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    spans.reserve(out.index.size());
    for (const PackRecord& r : out.index) spans.emplace_back(r.offset, r.length);
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      if (spans[i - 1].first + spans[i - 1].second > spans[i].first) return fail(error, "blobs overlap");
  }
  (void)covered;

  auto j = nlohmann::json::parse(manifest, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return fail(error, "manifest is not a JSON object");
  auto str = [&](const char* k, std::string& v) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return fail(error, std::string("manifest field ") + k + " missing or not a string");
    v = it->get<std::string>();
    return true;
  };
  PackManifest& m = out.manifest;
  if (auto it = j.find("format"); it == j.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() != kPackFormatVersion)
    return fail(error, "manifest format is not " + std::to_string(kPackFormatVersion));
  if (!str("moejit_version", m.moejit_version) || !str("nvrtc_version", m.nvrtc_version) || !str("target", m.target))
    return false;
  if (auto it = j.find("created_unix"); it != j.end() && it->is_number_integer()) m.created_unix = it->get<std::int64_t>();
  if (auto it = j.find("plan"); it != j.end() && (it->is_object() || it->is_null())) m.plan_json = it->dump();
  else return fail(error, "manifest field plan missing or not an object/null");
  if (auto it = j.find("entries"); it == j.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() != p.entry_count)
    return fail(error, "manifest field entries does not match the index (" + std::to_string(p.entry_count) + ")");
  auto keys = j.find("keys");
  if (keys == j.end() || !keys->is_array()) return fail(error, "manifest field keys missing or not an array");
  m.keys.clear();
  for (const auto& k : *keys) {
    if (!k.is_object() || !k.contains("key") || !k.contains("id") || !k["key"].is_string() || !k["id"].is_string())
      return fail(error, "manifest keys: each item must be {\"key\": text, \"id\": hex}");
    auto h = parse_hash_hex(k["id"].get<std::string>());
    if (!h) return fail(error, "manifest keys: bad id '" + k["id"].get<std::string>() + "'");
    const bool known = std::binary_search(out.index.begin(), out.index.end(), PackRecord{*h, 0, 0, 0},
                                          [](const PackRecord& a, const PackRecord& b) {
                                            return a.address.hi < b.address.hi ||
                                                   (a.address.hi == b.address.hi && a.address.lo < b.address.lo);
                                          });
    if (!known) return fail(error, "manifest keys: id " + h->hex() + " is not in the index");
    m.keys.push_back({k["key"].get<std::string>(), *h});
  }
  return true;
}

DecodeResult decode_pack_blob(const PackHead& head, const PackRecord& record, std::string_view blob) {
  DecodeResult r;
  if (blob.size() != record.length) {
    r.error = "blob of " + std::to_string(blob.size()) + " bytes, index says " + std::to_string(record.length);
    return r;
  }
  if (XXH3_64bits(blob.data(), blob.size()) != record.xxh3) {
    r.error = "blob checksum mismatch";
    return r;
  }
  r = decode_entry(blob);
  if (!r.entry) return r;
  const AddressPayload& p = r.entry->header.payload;
  std::string why;
  if (!(p.address() == record.address)) why = "payload does not hash to the index address";
  else if (p.moejit_version != head.manifest.moejit_version) why = "moejit_version differs from the manifest";
  else if (p.nvrtc_version != head.manifest.nvrtc_version) why = "nvrtc_version differs from the manifest";
  else if (p.target != head.manifest.target) why = "target differs from the manifest";
  else if (r.entry->cubin.empty()) why = "empty cubin";
  if (!why.empty()) {
    r.entry.reset();
    r.error = why;
  }
  return r;
}

std::string encode_pack(const PackManifest& manifest, const std::vector<Entry>& entries) {
  std::vector<std::pair<Hash128, std::string>> blobs;
  for (const Entry& e : entries) {
    const AddressPayload& p = e.header.payload;
    auto mismatch = [&](const char* f, const std::string& a, const std::string& b) {
      throw InvalidArgument(std::string("pack: entry for key '") + e.header.key_text + "' has " + f + " " + a +
                            ", the pack's is " + b);
    };
    if (p.moejit_version != manifest.moejit_version) mismatch("moejit_version", p.moejit_version, manifest.moejit_version);
    if (p.nvrtc_version != manifest.nvrtc_version) mismatch("nvrtc_version", p.nvrtc_version, manifest.nvrtc_version);
    if (p.target != manifest.target) mismatch("target", p.target, manifest.target);
    blobs.emplace_back(p.address(), encode_entry(e));
  }
  std::sort(blobs.begin(), blobs.end(), [](const auto& a, const auto& b) {
    return a.first.hi < b.first.hi || (a.first.hi == b.first.hi && a.first.lo < b.first.lo);
  });
  blobs.erase(std::unique(blobs.begin(), blobs.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
              blobs.end());
  nlohmann::ordered_json mj = nlohmann::ordered_json::parse(manifest.to_json());
  mj["entries"] = blobs.size();
  const std::string mtext = mj.dump(1) + "\n";
  std::string index, body;
  for (const auto& [address, blob] : blobs) {
    put_u64(index, address.hi);
    put_u64(index, address.lo);
    put_u64(index, body.size());
    put_u64(index, blob.size());
    put_u64(index, XXH3_64bits(blob.data(), blob.size()));
    body += blob;
  }
  std::string out;
  out.reserve(kPackPrefixBytes + mtext.size() + index.size() + body.size());
  out.append(kPackMagic, 8);
  put_u32(out, kPackFormatVersion);
  put_u32(out, 0);
  put_u64(out, mtext.size());
  put_u64(out, blobs.size());
  put_u64(out, body.size());
  put_u64(out, XXH3_64bits(mtext.data(), mtext.size()));
  put_u64(out, XXH3_64bits(index.data(), index.size()));
  put_u64(out, 0);
  out += mtext;
  out += index;
  out += body;
  return out;
}

}  // namespace moejit::cache
