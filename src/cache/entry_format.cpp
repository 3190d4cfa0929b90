// Disk-cache entry format, version 2. All integers little-endian.
//
//   entry        := prefix header body
//   prefix       := magic format_version header_len body_len header_xxh3 body_xxh3   (40 bytes)
//   magic        := "MOEJITCE"                         8 bytes
//   format_version := u32                               = 2 (1: keys of key version 1; refused by a load,
//                                                        reported as outdated by verify)
//   header_len   := u32                                 bytes of `header`
//   body_len     := u64                                 bytes of `body`
//   header_xxh3  := u64                                 XXH3-64 (seed 0) of `header`
//   body_xxh3    := u64                                 XXH3-64 (seed 0) of `body`
//   header       := line*                               UTF-8 text, exactly these lines in this order:
//     "moejit_version=" v "\n"  "nvrtc_version=" v "\n"  "target=" v "\n"
//     "name_expression=" v "\n" "options=" count "\n"  ("option=" v "\n"){count}
//     "source_xxh3_128=" hex32 "\n"  "source_bytes=" u64 "\n"
//     "key=" v "\n"  "lowered_name=" v "\n"          key: canonical text, key version 2
//     "block_threads=" u32 "\n"  "dynamic_smem_bytes=" u32 "\n"
//     "registers=" i32 "\n"  "spill_store_bytes=" i32 "\n"  "spill_load_bytes=" i32 "\n"
//     "stack_frame_bytes=" i32 "\n"  "shared_bytes=" i32 "\n"
//     "compile_ms=" decimal "\n"  "created_unix=" i64 "\n"  "nvrtc_log=" v "\n"
//   v            := value with '\' -> "\\", LF -> "\n", CR -> "\r" escaped
//   body         := cubin bytes (ELF)
//
// The file size must equal 40 + header_len + body_len exactly. The first eight
// header lines plus block_threads and dynamic_smem_bytes are the content-address payload; the entry's file name is the
// XXH3-128 of AddressPayload::canonical_text() (checked by DiskCache).
#include "cache/entry_format.hpp"
#include "cache/little_endian.hpp"

#include <xxhash.h>

#include <charconv>
#include <cstring>
#include <vector>

namespace moejit::cache {
namespace {

void line(std::string& h, const char* name, std::string_view value) {
  h += name;
  h += '=';
  h += escape_value(value);
  h += '\n';
}

// Reads the header lines in order; every accessor fails (returns false) on a
// wrong name, a bad escape or a bad number.
class HeaderReader {
 public:
  explicit HeaderReader(std::string_view text) : text_(text) {}

  bool str(const char* name, std::string& out) {
    std::string_view raw;
    if (!next(name, raw)) return false;
    auto v = unescape_value(raw);
    if (!v) return fail(std::string("bad escape in field ") + name);
    out = std::move(*v);
    return true;
  }
  template <class Int>
  bool integer(const char* name, Int& out) {
    std::string_view raw;
    if (!next(name, raw)) return false;
    auto [p, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), out);
    if (ec != std::errc() || p != raw.data() + raw.size()) return fail(std::string("bad number in field ") + name);
    return true;
  }
  bool decimal(const char* name, double& out) {
    std::string_view raw;
    if (!next(name, raw)) return false;
    auto [p, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), out);
    if (ec != std::errc() || p != raw.data() + raw.size()) return fail(std::string("bad number in field ") + name);
    return true;
  }
  bool at_end() {
    if (pos_ != text_.size()) return fail("trailing data after the last header field");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool next(const char* name, std::string_view& value) {
    if (!error_.empty()) return false;
    std::size_t nl = text_.find('\n', pos_);
    if (nl == std::string_view::npos) return fail(std::string("header ends before field ") + name);
    std::string_view l = text_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    std::size_t n = std::strlen(name);
    if (l.size() < n + 1 || l.compare(0, n, name) != 0 || l[n] != '=')
      return fail(std::string("expected field ") + name + ", found '" + std::string(l.substr(0, 40)) + "'");
    value = l.substr(n + 1);
    return true;
  }
  bool fail(std::string e) {
    if (error_.empty()) error_ = std::move(e);
    return false;
  }
  std::string_view text_;
  std::size_t pos_ = 0;
  std::string error_;
};

std::string encode_header(const EntryHeader& e) {
  const AddressPayload& p = e.payload;
  char src[33];
  hash_hex(p.source_hash, src);
  std::string h;
  h.reserve(512 + e.nvrtc_log.size());
  line(h, "moejit_version", p.moejit_version);
  line(h, "nvrtc_version", p.nvrtc_version);
  line(h, "target", p.target);
  line(h, "name_expression", p.name_expression);
  line(h, "options", std::to_string(p.options.size()));
  for (const auto& o : p.options) line(h, "option", o);
  line(h, "source_xxh3_128", src);
  line(h, "source_bytes", std::to_string(p.source_bytes));
  line(h, "key", e.key_text);
  line(h, "lowered_name", e.lowered_name);
  line(h, "block_threads", std::to_string(e.launch.block_threads));
  line(h, "dynamic_smem_bytes", std::to_string(e.launch.dynamic_smem_bytes));
  line(h, "registers", std::to_string(e.resources.registers));
  line(h, "spill_store_bytes", std::to_string(e.resources.spill_store_bytes));
  line(h, "spill_load_bytes", std::to_string(e.resources.spill_load_bytes));
  line(h, "stack_frame_bytes", std::to_string(e.resources.stack_frame_bytes));
  line(h, "shared_bytes", std::to_string(e.resources.shared_bytes));
  char ms[64];
  auto [end, ec] = std::to_chars(ms, ms + sizeof ms, e.compile_ms);
  line(h, "compile_ms", ec == std::errc() ? std::string_view(ms, static_cast<std::size_t>(end - ms)) : "0");
  line(h, "created_unix", std::to_string(e.created_unix));
  line(h, "nvrtc_log", e.nvrtc_log);
  return h;
}

bool parse_header(std::string_view text, EntryHeader& e, std::string& error) {
  HeaderReader r(text);
  AddressPayload& p = e.payload;
  std::size_t n_options = 0;
  std::string src_hex;
  bool ok = r.str("moejit_version", p.moejit_version) && r.str("nvrtc_version", p.nvrtc_version) &&
            r.str("target", p.target) && r.str("name_expression", p.name_expression) &&
            r.integer("options", n_options);
  if (ok && n_options > 4096) {
    error = "implausible option count " + std::to_string(n_options);
    return false;
  }
  for (std::size_t i = 0; ok && i < n_options; ++i) {
    std::string o;
    ok = r.str("option", o);
    p.options.push_back(std::move(o));
  }
  ok = ok && r.str("source_xxh3_128", src_hex);
  if (ok) {
    auto h = parse_hash_hex(src_hex);
    if (!h) {
      error = "bad source_xxh3_128 '" + src_hex + "'";
      return false;
    }
    p.source_hash = *h;
  }
  ok = ok && r.integer("source_bytes", p.source_bytes) && r.str("key", e.key_text) &&
       r.str("lowered_name", e.lowered_name) && r.integer("block_threads", e.launch.block_threads) &&
       r.integer("dynamic_smem_bytes", e.launch.dynamic_smem_bytes) &&
       r.integer("registers", e.resources.registers) &&
       r.integer("spill_store_bytes", e.resources.spill_store_bytes) &&
       r.integer("spill_load_bytes", e.resources.spill_load_bytes) &&
       r.integer("stack_frame_bytes", e.resources.stack_frame_bytes) &&
       r.integer("shared_bytes", e.resources.shared_bytes) && r.decimal("compile_ms", e.compile_ms) &&
       r.integer("created_unix", e.created_unix) && r.str("nvrtc_log", e.nvrtc_log) && r.at_end();
  if (!ok) error = "bad header: " + r.error();
  p.launch = e.launch;
  return ok;
}

struct Prefix {
  std::uint32_t version = 0, header_len = 0;
  std::uint64_t body_len = 0, header_xxh = 0, body_xxh = 0;
};

// `version` receives the format version once the magic is known to be right.
bool parse_prefix(std::string_view bytes, std::uint64_t file_size, FormatVersions versions, Prefix& p,
                  std::uint32_t& version, std::string& error) {
  if (file_size == 0) return error = "empty file", false;
  if (bytes.size() < kEntryPrefixBytes)
    return error = "truncated: " + std::to_string(file_size) + " bytes, shorter than the 40-byte prefix", false;
  if (std::memcmp(bytes.data(), kEntryMagic, 8) != 0) return error = "bad magic (not a moejit cache entry)", false;
  p.version = version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  if (p.version != kEntryFormatVersion && versions == FormatVersions::current)
    return error = format_version_problem(p.version), false;
  p.header_len = static_cast<std::uint32_t>(get_le(bytes, 12, 4));
  p.body_len = get_le(bytes, 16, 8);
  p.header_xxh = get_le(bytes, 24, 8);
  p.body_xxh = get_le(bytes, 32, 8);
  if (p.body_len > kMaxEntryBytes || p.header_len > kMaxEntryBytes ||
      kEntryPrefixBytes + p.header_len + p.body_len > kMaxEntryBytes)
    return error = "declared sizes (header " + std::to_string(p.header_len) + ", body " + std::to_string(p.body_len) +
                   " bytes) exceed the entry limit of " + std::to_string(kMaxEntryBytes) + " bytes",
           false;
  std::uint64_t expect = kEntryPrefixBytes + p.header_len + p.body_len;
  if (file_size != expect)
    return error = (file_size < expect ? "truncated: " : "size mismatch: ") + std::to_string(file_size) +
                   " bytes, header says " + std::to_string(expect),
           false;
  return true;
}

}  // namespace

std::string format_version_problem(std::uint32_t version) {
  return "format version " + std::to_string(version) +
         (version > kEntryFormatVersion ? " is newer than" : " is older than") + " this library's " +
         std::to_string(kEntryFormatVersion);
}

std::uint32_t entry_format_version(std::string_view prefix) noexcept {
  if (prefix.size() < 12 || std::memcmp(prefix.data(), kEntryMagic, 8) != 0) return 0;
  return static_cast<std::uint32_t>(get_le(prefix, 8, 4));
}

std::string entry_prefix_problem(std::string_view prefix, std::uint64_t file_size, FormatVersions versions) {
  Prefix p;
  std::uint32_t version = 0;
  std::string error;
  if (!parse_prefix(prefix, file_size, versions, p, version, error)) return error;
  return {};
}

std::string encode_entry(const Entry& entry) {
  std::string header = encode_header(entry.header);
  std::string out;
  out.reserve(kEntryPrefixBytes + header.size() + entry.cubin.size());
  out.append(kEntryMagic, 8);
  put_u32(out, kEntryFormatVersion);
  put_u32(out, static_cast<std::uint32_t>(header.size()));
  put_u64(out, entry.cubin.size());
  put_u64(out, XXH3_64bits(header.data(), header.size()));
  put_u64(out, XXH3_64bits(entry.cubin.data(), entry.cubin.size()));
  out += header;
  out += entry.cubin;
  return out;
}

DecodeResult decode_header_only(std::string_view bytes, std::uint64_t file_size, FormatVersions versions) {
  DecodeResult r;
  Prefix p;
  if (!parse_prefix(bytes, file_size, versions, p, r.format_version, r.error)) return r;
  if (bytes.size() < kEntryPrefixBytes + p.header_len) {
    r.error = "truncated header";
    return r;
  }
  std::string_view header = bytes.substr(kEntryPrefixBytes, p.header_len);
  if (XXH3_64bits(header.data(), header.size()) != p.header_xxh) {
    r.error = "header checksum mismatch";
    return r;
  }
  Entry e;
  if (!parse_header(header, e.header, r.error)) return r;
  r.entry = std::move(e);
  return r;
}

DecodeResult decode_entry(std::string_view bytes, FormatVersions versions) {
  DecodeResult r = decode_header_only(bytes, bytes.size(), versions);
  if (!r.entry) return r;
  std::uint64_t body_xxh = get_le(bytes, 32, 8);
  std::uint32_t header_len = static_cast<std::uint32_t>(get_le(bytes, 12, 4));
  std::string_view body = bytes.substr(kEntryPrefixBytes + header_len);
  if (XXH3_64bits(body.data(), body.size()) != body_xxh) {
    r.entry.reset();
    r.error = "body checksum mismatch";
    return r;
  }
  r.entry->cubin.assign(body.data(), body.size());
  return r;
}

}  // namespace moejit::cache
