// explain KEY: would this key hit the cache, and if not, why not.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cache/content_address.hpp"
#include "cache/cache_admin.hpp"
#include "cache/pack.hpp"
#include "codegen/kernel_source.hpp"
#include "commands.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "moejit/error.hpp"
#include "moejit/key.hpp"
#include "common/tool_support.hpp"

namespace moejit::tools {
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

// The runtime's trust rule for this process, as the cache's own type.
cache::Ownership ownership() {
  return cache_admin::ownership_from_env() == cache_admin::Ownership::shared ? cache::Ownership::shared
                                                                             : cache::Ownership::private_only;
}

void print_indented(const std::string& text) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    std::printf("    %s\n", text.substr(start, nl - start).c_str());
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

}  // namespace

int cmd_explain(const std::filesystem::path& dir, const std::string& key_text) {
  const SpecKey key = parse_key(key_text);  // InvalidArgument: exit code 2
  validate(key);
  const KernelSource src = codegen::generate(key);  // InvalidArgument: the kernels cannot implement it
  const std::vector<cache::EntryInfo> entries = cache::list_entries(dir, ownership());

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
    const bool present = std::any_of(entries.begin(), entries.end(),
                                     [&](const cache::EntryInfo& e) { return e.address == address; });
    if (present) {
      try {
        const cache::Entry entry = cache::read_entry(dir, id, ownership());  // verifies everything a load checks
        std::printf("hit: entry %s\n", id.c_str());
        if (entry.header.key_text != key.to_text())
          std::printf("  shared with the key that compiled it: %s\n", entry.header.key_text.c_str());
        return 0;
      } catch (const Error& e) {
        std::printf("miss: entry %s for this key is bad: %s\n  (the runtime moves it to quarantine and recompiles)\n",
                    id.c_str(), one_line(e).c_str());
        return static_cast<int>(ExitCode::failed);
      }
    }
    std::printf("miss: no entry %s in %s\n", id.c_str(), dir.c_str());
  } else {
    std::printf("cannot compute the content address (%s); comparing keys only\n", no_nvrtc.c_str());
  }

  // Best explanation first: the same kernel (generated source and name
  // expression) compiled under another NVRTC / moejit version / target / option
  // list (e.g. the toolkit was upgraded).
  if (payload) {
    for (const cache::EntryInfo& e : entries) {
      if (!e.header) continue;
      const cache::AddressPayload& p = e.header->payload;
      if (!(p.source_hash == payload->source_hash) || p.name_expression != payload->name_expression) continue;
      std::printf("  entry %s holds the same kernel, compiled with different settings (this key -> entry):\n",
                  e.address.hex().c_str());
      print_indented(payload_diff(*payload, p));
      return static_cast<int>(ExitCode::failed);
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
    std::printf("  the cache has no entry to compare with\n");
    return static_cast<int>(ExitCode::failed);
  }
  std::printf("  nearest entry %s was compiled for\n    %s\n", nearest->address.hex().c_str(),
              nearest->header->key_text.c_str());
  if (key_diff(key, *nearest_key).empty()) {
    // Same key, different address: the generated source or the compiler changed.
    std::printf("  same key; its content address differs in (this key -> entry):\n");
    if (payload) print_indented(payload_diff(*payload, nearest->header->payload));
  } else {
    std::printf("  fields that differ (this key -> entry's key):\n");
    print_indented(key_diff(key, *nearest_key));
  }
  return static_cast<int>(ExitCode::failed);
}

int cmd_explain_pack(const std::filesystem::path& pack_path, const std::string& key_text) {
  const SpecKey key = parse_key(key_text);  // InvalidArgument: exit code 2
  validate(key);
  std::shared_ptr<const cache::Pack> pack;
  try {
    pack = cache::Pack::open(pack_path);
  } catch (const Error& e) {
    throw EnvironmentError(one_line(e));
  }
  const cache::PackManifest& m = pack->manifest();
  const std::string text = key.to_text();
  // Why the manifest's NVRTC version: a pack is looked up as that version (a
  // node without libnvrtc does the same), so no NVRTC is needed here.
  const KernelSource src = codegen::generate(key);
  const cache::AddressPayload payload = cache::make_payload(src, key.target, m.nvrtc_version);
  const Hash128 address = payload.address();
  const bool covered = std::any_of(m.keys.begin(), m.keys.end(), [&](const cache::PackKey& k) { return k.key_text == text; });
  cache::Pack::Lookup l = pack->load(address, &payload);
  if (l.status == cache::Pack::Status::hit) {
    std::printf("hit: pack entry %s%s\n", address.hex().c_str(),
                covered ? " (the key is in the pack's coverage)" : " (a kernel shared with a covered key)");
    return 0;
  }
  if (l.status == cache::Pack::Status::bad) {
    std::printf("miss: pack entry %s is bad: %s\n", address.hex().c_str(), l.reason.c_str());
    return static_cast<int>(ExitCode::failed);
  }
  std::printf("miss: the pack %s has no entry %s (pack: moejit %s, NVRTC %s, target %s)\n", pack_path.c_str(),
              address.hex().c_str(), m.moejit_version.c_str(), m.nvrtc_version.c_str(), m.target.c_str());
  if (std::string why = pack->mismatch(cache::library_version(), std::nullopt, to_string(key.target)); !why.empty())
    std::printf("  the pack does not fit: %s\n", why.c_str());
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
    std::printf("  the pack covers no key to compare with\n");
  } else {
    std::printf("  nearest covered key\n    %s\n  fields that differ (this key -> covered key):\n",
                nearest->to_text().c_str());
    print_indented(key_diff(key, *nearest));
  }
  return static_cast<int>(ExitCode::failed);
}

}  // namespace moejit::tools
