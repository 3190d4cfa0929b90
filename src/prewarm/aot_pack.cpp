// moejit/aot_pack.hpp: the plan's kernels as one AOT pack file.
#include "moejit/aot_pack.hpp"

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/content_address.hpp"
#include "cache/pack.hpp"
#include "moejit/error.hpp"
#include "runtime/runtime_access.hpp"

namespace moejit {
namespace {

std::string plan_json(const PrewarmPlan& plan) {
  std::vector<std::string> layers, quants, scales;
  for (const MoeLayerShape& s : plan.layers) layers.push_back(s.to_string());
  for (QuantMode q : plan.quant_modes) quants.emplace_back(to_string(q));
  for (WeightScale w : plan.weight_scales) scales.emplace_back(to_string(w));
  nlohmann::ordered_json j = {{"model", plan.model_name},       {"quant_modes", quants},
                              {"weight_scales", scales},        {"layers", layers},
                              {"target", to_string(plan.target)}, {"max_num_tokens", plan.max_num_tokens},
                              {"bucket_exponent", plan.bucket_exponent}};
  return j.dump();
}

}  // namespace

AotPackSummary write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out,
                              std::string_view description) {
  if (out.empty()) throw InvalidArgument("write_aot_pack: out must be a file path, got an empty path");
  // Why first: producing the kernels can take minutes; a destination that
  // cannot take the pack must fail before that.
  cache::check_pack_destination(out);
  const std::vector<SpecKey> keys = enumerate_keys(plan, runtime.gemm_tuning());
  cache::PackManifest m;
  std::vector<cache::Entry> entries;
  entries.reserve(keys.size());
  for (const SpecKey& k : keys) {
    cache::Entry e = RuntimeAccess::entry_for(runtime, k);
    m.keys.push_back({k.to_text(), e.header.payload.address()});
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw InvalidArgument("write_aot_pack: the plan has no keys");
  m.moejit_version = entries.front().header.payload.moejit_version;
  m.nvrtc_version = entries.front().header.payload.nvrtc_version;
  m.target = to_string(plan.target);
  m.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  m.plan_json = description.empty() ? plan_json(plan) : std::string(description);
  cache::write_pack(out, m, entries);
  return AotPackSummary{keys.size(), m.target, m.nvrtc_version};
}

std::size_t write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out) {
  return write_aot_pack(runtime, plan, out, {}).keys;
}

}  // namespace moejit

namespace moejit {

AotPackInfo read_aot_pack(const std::filesystem::path& path) {
  const std::shared_ptr<const cache::Pack> pack = cache::Pack::open(path);
  const cache::PackManifest& m = pack->manifest();
  AotPackInfo info;
  info.moejit_version = m.moejit_version;
  info.nvrtc_version = m.nvrtc_version;
  info.target = m.target;
  info.created_unix = m.created_unix;
  info.plan_json = m.plan_json;
  info.keys = m.keys.size();
  for (const cache::PackRecord& r : pack->head().index) {
    const cache::Pack::Lookup l = pack->load(r.address, nullptr);
    AotPackEntryInfo e;
    e.id = r.address.hex();
    e.bytes = r.length;
    e.ok = l.status == cache::Pack::Status::hit && l.entry.has_value();
    if (e.ok) {
      e.cubin_bytes = l.entry->cubin.size();
      e.key = l.entry->header.key_text;
      e.registers = l.entry->header.resources.registers;
    } else {
      e.problem = l.reason.empty() ? std::string("not found in the pack") : l.reason;
    }
    info.entries.push_back(std::move(e));
  }
  return info;
}

AotPackExport export_aot_pack(const std::filesystem::path& dir, const std::filesystem::path& out,
                              std::string_view target) {
  if (out.empty()) throw InvalidArgument("export_aot_pack: out must be a file path, got an empty path");
  // Why first: reading every entry of a large cache takes a while.
  cache::check_pack_destination(out);
  AotPackExport r;
  std::vector<cache::Entry> all = cache::collect_entries(dir, &r.skipped);
  r.found = all.size();
  std::vector<cache::Entry> entries;
  cache::PackManifest m;
  m.moejit_version = std::string(cache::library_version());
  m.target = std::string(target);
  for (cache::Entry& e : all) {
    const cache::AddressPayload& p = e.header.payload;
    if (p.moejit_version != m.moejit_version) continue;  // another library's entries cannot go into this pack
    if (m.target.empty()) m.target = p.target;
    if (p.target != m.target) continue;
    if (m.nvrtc_version.empty()) m.nvrtc_version = p.nvrtc_version;
    if (p.nvrtc_version != m.nvrtc_version) continue;
    entries.push_back(std::move(e));
  }
  if (entries.empty())
    throw InvalidArgument("export_aot_pack: no usable entries of moejit " + m.moejit_version +
                          (target.empty() ? "" : " for target " + std::string(target)) + " in " + dir.string() +
                          (r.skipped.empty() ? "" : " (" + std::to_string(r.skipped.size()) + " corrupt entries skipped)"));
  m.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  // Coverage of an export: the key each entry was first compiled for (the
  // directory does not know every key that shares a kernel).
  for (const cache::Entry& e : entries) m.keys.push_back({e.header.key_text, e.header.payload.address()});
  cache::write_pack(out, m, entries);
  r.entries = entries.size();
  r.target = m.target;
  r.nvrtc_version = m.nvrtc_version;
  return r;
}

}  // namespace moejit
