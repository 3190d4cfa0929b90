#include "cache/content_address.hpp"

#include <xxhash.h>

#include "compiler/nvrtc_compiler.hpp"

#ifndef MOEJIT_VERSION
#define MOEJIT_VERSION "unknown"
#endif

namespace moejit::cache {

std::string_view library_version() noexcept { return MOEJIT_VERSION; }

Hash128 xxh3_128(std::string_view bytes) noexcept {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return Hash128{h.low64, h.high64};
}

void hash_hex(const Hash128& h, char out[33]) noexcept {
  static constexpr char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) out[i] = digits[(h.hi >> (60 - 4 * i)) & 0xF];
  for (int i = 0; i < 16; ++i) out[16 + i] = digits[(h.lo >> (60 - 4 * i)) & 0xF];
  out[32] = '\0';
}

std::optional<Hash128> parse_hash_hex(std::string_view hex) noexcept {
  if (hex.size() != 32) return std::nullopt;
  Hash128 h;
  for (std::size_t i = 0; i < 32; ++i) {
    char c = hex[i];
    std::uint64_t d;
    if (c >= '0' && c <= '9') d = static_cast<std::uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<std::uint64_t>(c - 'a' + 10);
    else return std::nullopt;
    std::uint64_t& word = i < 16 ? h.hi : h.lo;
    word = (word << 4) | d;
  }
  return h;
}

std::string escape_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

std::optional<std::string> unescape_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '\\') {
      out += v[i];
      continue;
    }
    if (++i == v.size()) return std::nullopt;
    switch (v[i]) {
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      default: return std::nullopt;
    }
  }
  return out;
}

std::string AddressPayload::canonical_text() const {
  char src[33];
  hash_hex(source_hash, src);
  std::string t = "moejit-content-address-v1\n";
  t += "moejit_version=" + escape_value(moejit_version) + "\n";
  t += "nvrtc_version=" + escape_value(nvrtc_version) + "\n";
  t += "target=" + escape_value(target) + "\n";
  t += "name_expression=" + escape_value(name_expression) + "\n";
  t += "options=" + std::to_string(options.size()) + "\n";
  for (const auto& o : options) t += "option=" + escape_value(o) + "\n";
  t += std::string("source_xxh3_128=") + src + "\n";
  t += "source_bytes=" + std::to_string(source_bytes) + "\n";
  return t;
}

Hash128 AddressPayload::address() const { return xxh3_128(canonical_text()); }

std::string AddressPayload::first_difference(const AddressPayload& o) const {
  auto diff = [](const char* f, const std::string& a, const std::string& b) {
    return std::string(f) + ": " + a + " -> " + b;
  };
  if (moejit_version != o.moejit_version) return diff("moejit_version", moejit_version, o.moejit_version);
  if (nvrtc_version != o.nvrtc_version) return diff("nvrtc_version", nvrtc_version, o.nvrtc_version);
  if (target != o.target) return diff("target", target, o.target);
  if (name_expression != o.name_expression) return diff("name_expression", name_expression, o.name_expression);
  if (options != o.options) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
      return s;
    };
    return diff("options", join(options), join(o.options));
  }
  if (!(source_hash == o.source_hash) || source_bytes != o.source_bytes) {
    char a[33], b[33];
    hash_hex(source_hash, a);
    hash_hex(o.source_hash, b);
    return diff("source", std::string(a) + "/" + std::to_string(source_bytes),
                std::string(b) + "/" + std::to_string(o.source_bytes));
  }
  return {};
}

AddressPayload make_payload(const KernelSource& source, const Target& target, std::string nvrtc_version) {
  AddressPayload p;
  p.moejit_version = std::string(library_version());
  p.nvrtc_version = std::move(nvrtc_version);
  p.target = to_string(target);
  p.name_expression = source.name_expression;
  p.options = compiler::nvrtc_options(source, target);
  p.source_hash = xxh3_128(source.source);
  p.source_bytes = source.source.size();
  return p;
}

}  // namespace moejit::cache
