// Subcommands over AOT packs: ls --pack, verify --pack, export.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cache/pack.hpp"
#include "commands.hpp"
#include "common/tool_support.hpp"

namespace moejit::tools {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const cache::Pack> open_or_throw(const std::filesystem::path& path) {
  try {
    return cache::Pack::open(path);
  } catch (const Error& e) {
    throw EnvironmentError(one_line(e));
  }
}

}  // namespace

int cmd_ls_pack(const std::filesystem::path& pack_path, bool json) {
  const auto pack = open_or_throw(pack_path);
  const cache::PackManifest& m = pack->manifest();
  // Entries' headers, for key and resources.
  std::vector<std::pair<cache::PackRecord, cache::Pack::Lookup>> rows;
  for (const cache::PackRecord& r : pack->head().index) rows.emplace_back(r, pack->load(r.address, nullptr));
  if (json) {
    Json j;
    j["pack"] = pack_path.string();
    j["moejit_version"] = m.moejit_version;
    j["nvrtc_version"] = m.nvrtc_version;
    j["target"] = m.target;
    j["created_unix"] = m.created_unix;
    j["plan"] = Json::parse(m.plan_json);
    j["keys"] = m.keys.size();
    Json arr = Json::array();
    for (const auto& [r, l] : rows) {
      Json e;
      e["id"] = r.address.hex();
      e["bytes"] = r.length;
      e["ok"] = l.status == cache::Pack::Status::hit;
      if (l.entry) {
        e["cubin_bytes"] = l.entry->cubin.size();
        e["key"] = l.entry->header.key_text;
        e["registers"] = l.entry->header.resources.registers;
      } else {
        e["problem"] = l.reason;
      }
      arr.push_back(std::move(e));
    }
    j["entries"] = std::move(arr);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("pack %s: moejit %s, NVRTC %s, target %s, %zu entries, %zu keys, built %s\n", pack_path.c_str(),
              m.moejit_version.c_str(), m.nvrtc_version.c_str(), m.target.c_str(), rows.size(), m.keys.size(),
              format_unix_time(m.created_unix).c_str());
  for (const auto& [r, l] : rows) {
    if (l.entry)
      std::printf("%s  %9s  regs %3d  %s\n", r.address.hex().c_str(), format_bytes(r.length).c_str(),
                  l.entry->header.resources.registers, l.entry->header.key_text.c_str());
    else
      std::printf("%s  %9s  BAD: %s\n", r.address.hex().c_str(), format_bytes(r.length).c_str(), l.reason.c_str());
  }
  return 0;
}

int cmd_verify_pack(const std::filesystem::path& pack_path, bool json) {
  return print_verify_report(cache_admin::verify_pack(pack_path), "pack", pack_path, json, nullptr);
}

int cmd_export(const std::filesystem::path& dir, const std::filesystem::path& out, const std::string& target) {
  // Why first: reading every entry of a large cache takes a while.
  try {
    cache::check_pack_destination(out);
  } catch (const InvalidArgument& e) {
    throw UsageError("export " + out.string() + ": " + e.what());
  }
  std::vector<std::string> skipped;
  std::vector<cache::Entry> all = cache::collect_entries(dir, &skipped);
  for (const std::string& s : skipped) std::fprintf(stderr, "moejit-cache: warning: skipped %s\n", s.c_str());
  std::vector<cache::Entry> entries;
  cache::PackManifest m;
  m.moejit_version = std::string(cache::library_version());
  m.target = target;
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
    throw UsageError("export: no usable entries of moejit " + m.moejit_version +
                     (target.empty() ? "" : " for target " + target) + " in " + dir.string());
  if (entries.size() != all.size())
    std::fprintf(stderr, "moejit-cache: note: %zu of %zu entries are of another target / NVRTC / library version and were left out (use --arch)\n",
                 all.size() - entries.size(), all.size());
  m.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  // Coverage of an export: the key each entry was first compiled for (the
  // directory does not know every key that shares a kernel).
  for (const cache::Entry& e : entries) m.keys.push_back({e.header.key_text, e.header.payload.address()});
  cache::write_pack(out, m, entries);
  std::printf("wrote %s: %zu entries, target %s, NVRTC %s\n", out.c_str(), entries.size(), m.target.c_str(),
              m.nvrtc_version.c_str());
  return 0;
}

}  // namespace moejit::tools
