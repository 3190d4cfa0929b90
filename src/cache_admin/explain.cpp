// Why a key hits or misses a cache directory or an AOT pack (moejit/cache_admin.hpp,
// explain / explain_in_pack): what `moejit-cache explain` prints.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "cache/cache_admin.hpp"
#include "cache/content_address.hpp"
#include "cache/pack.hpp"
#include "cache_admin/convert.hpp"
#include "codegen/kernel_source.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "moejit/error.hpp"
#include "moejit/key.hpp"

namespace moejit::cache_admin {
namespace {

// Distance between two keys: the number of differing fields, where a different
// op, target or quant mode outweighs any number of other differences (an entry
// of another kernel family explains nothing). Ties: the closer token bucket.
double key_distance(const SpecKey& a, const SpecKey& b) {
  const auto fa = key_fields(a), fb = key_fields(b);
  double d = 0;
  for (std::size_t i = 0; i < fa.size() && i < fb.size(); ++i) {
    if (fa[i].second == fb[i].second) continue;
    const std::string& name = fa[i].first;
    d += name == "op" ? 1000 : name == "target" ? 300 : name == "quant" ? 100 : 1;
  }
  const double ra = a.token_bucket, rb = b.token_bucket;
  return d + 0.001 * std::abs(std::log2(ra / rb));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// Every differing "name=value" line of the two payloads' canonical texts, as
// "name: a -> b" lines; first_difference() when the line structure differs.
std::string payload_diff(const cache::AddressPayload& a, const cache::AddressPayload& b) {
  const auto la = lines_of(a.canonical_text()), lb = lines_of(b.canonical_text());
  if (la.size() != lb.size()) return a.first_difference(b);
  std::string out;
  for (std::size_t i = 0; i < la.size(); ++i) {
    if (la[i] == lb[i]) continue;
    const std::size_t eq = la[i].find('=');
    const std::string name = eq == std::string::npos ? la[i] : la[i].substr(0, eq);
    const std::string va = eq == std::string::npos ? "" : la[i].substr(eq + 1);
    const std::size_t eqb = lb[i].find('=');
    const std::string vb = eqb == std::string::npos ? lb[i] : lb[i].substr(eqb + 1);
    out += (out.empty() ? "" : "\n") + name + ": " + va + " -> " + vb;
  }
  return out;
}

// `text` as report lines, each indented by four spaces.
void add_indented(std::vector<std::string>& lines, const std::string& text) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    lines.push_back("    " + text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

}  // namespace

ExplainReport explain(const std::filesystem::path& dir, const SpecKey& key, Ownership ownership) {
  validate(key);
  const KernelSource src = codegen::generate(key);  // InvalidArgument: the kernels cannot implement it
  const std::vector<cache::EntryInfo> entries = cache::list_entries(dir, internal(ownership));
  ExplainReport r;
  auto line = [&r](std::string s) { r.lines.push_back(std::move(s)); };

  std::optional<cache::AddressPayload> payload;
  std::string no_nvrtc;
  try {
    payload = cache::make_payload(src, key.target, compiler::nvrtc_version_text());
  } catch (const DriverError& e) {
    // Why not fatal: the content address includes NVRTC's version, but the
    // nearest-key comparison below is still useful without it.
    no_nvrtc = one_line(e);
  }

  if (payload) {
    const Hash128 address = payload->address();
    const std::string id = address.hex();
    r.address = id;
    const bool present = std::any_of(entries.begin(), entries.end(),
                                     [&](const cache::EntryInfo& e) { return e.address == address; });
    if (present) {
      try {
        const cache::Entry entry = cache::read_entry(dir, id, internal(ownership));  // verifies what a load checks
        r.hit = true;
        line("hit: entry " + id);
        if (entry.header.key_text != key.to_text())
          line("  shared with the key that compiled it: " + entry.header.key_text);
        return r;
      } catch (const Error& e) {
        line("miss: entry " + id + " for this key is bad: " + one_line(e));
        line("  (the runtime moves it to quarantine and recompiles)");
        return r;
      }
    }
    line("miss: no entry " + id + " in " + dir.string());
  } else {
    line("cannot compute the content address (" + no_nvrtc + "); comparing keys only");
  }

  // Best explanation first: the same kernel (generated source and name
  // expression) compiled under another NVRTC / moejit version / target / option
  // list (e.g. the toolkit was upgraded).
  if (payload) {
    for (const cache::EntryInfo& e : entries) {
      if (!e.header) continue;
      const cache::AddressPayload& p = e.header->payload;
      if (!(p.source_hash == payload->source_hash) || p.name_expression != payload->name_expression) continue;
      line("  entry " + e.address.hex() + " holds the same kernel, compiled with different settings (this key -> entry):");
      add_indented(r.lines, payload_diff(*payload, p));
      return r;
    }
  }
  const cache::EntryInfo* nearest = nullptr;
  std::optional<SpecKey> nearest_key;
  double best = 1e300;
  for (const cache::EntryInfo& e : entries) {
    if (!e.header) continue;
    try {
      const SpecKey k = parse_key(e.header->key_text);
      const double d = key_distance(key, k);
      if (d < best) {
        best = d;
        nearest = &e;
        nearest_key = k;
      }
    } catch (const std::exception&) {
      // an entry written by another key format: not comparable
    }
  }
  if (!nearest) {
    line("  the cache has no entry to compare with");
    return r;
  }
  line("  nearest entry " + nearest->address.hex() + " was compiled for");
  line("    " + nearest->header->key_text);
  if (key_diff(key, *nearest_key).empty()) {
    // Same key, different address: the generated source or the compiler changed.
    line("  same key; its content address differs in (this key -> entry):");
    if (payload) add_indented(r.lines, payload_diff(*payload, nearest->header->payload));
  } else {
    line("  fields that differ (this key -> entry's key):");
    add_indented(r.lines, key_diff(key, *nearest_key));
  }
  return r;
}

ExplainReport explain_in_pack(const std::filesystem::path& pack_path, const SpecKey& key) {
  validate(key);
  const std::shared_ptr<const cache::Pack> pack = cache::Pack::open(pack_path);  // Error naming the path
  const cache::PackManifest& m = pack->manifest();
  const std::string text = key.to_text();
  ExplainReport r;
  auto line = [&r](std::string s) { r.lines.push_back(std::move(s)); };
  // Why the manifest's NVRTC version: a pack is looked up as that version (a
  // node without libnvrtc does the same), so no NVRTC is needed here.
  const KernelSource src = codegen::generate(key);
  const cache::AddressPayload payload = cache::make_payload(src, key.target, m.nvrtc_version);
  const Hash128 address = payload.address();
  r.address = address.hex();
  const bool covered =
      std::any_of(m.keys.begin(), m.keys.end(), [&](const cache::PackKey& k) { return k.key_text == text; });
  const cache::Pack::Lookup l = pack->load(address, &payload);
  if (l.status == cache::Pack::Status::hit) {
    r.hit = true;
    line("hit: pack entry " + r.address +
         (covered ? " (the key is in the pack's coverage)" : " (a kernel shared with a covered key)"));
    return r;
  }
  if (l.status == cache::Pack::Status::bad) {
    line("miss: pack entry " + r.address + " is bad: " + l.reason);
    return r;
  }
  line("miss: the pack " + pack_path.string() + " has no entry " + r.address + " (pack: moejit " + m.moejit_version +
       ", NVRTC " + m.nvrtc_version + ", target " + m.target + ")");
  if (std::string why = pack->mismatch(cache::library_version(), std::nullopt, std::string(to_string(key.target)));
      !why.empty())
    line("  the pack does not fit: " + why);
  std::optional<SpecKey> nearest;
  double best = 1e300;
  for (const cache::PackKey& k : m.keys) {
    try {
      const SpecKey c = parse_key(k.key_text);
      const double d = key_distance(key, c);
      if (d < best) best = d, nearest = c;
    } catch (const std::exception&) {
    }
  }
  if (!nearest) {
    line("  the pack covers no key to compare with");
  } else {
    line("  nearest covered key");
    line("    " + nearest->to_text());
    line("  fields that differ (this key -> covered key):");
    add_indented(r.lines, key_diff(key, *nearest));
  }
  return r;
}

}  // namespace moejit::cache_admin
