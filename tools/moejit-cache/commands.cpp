// ls, show, stats, verify: read-only views of a cache directory.
#include "commands.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cache/cache_stats.hpp"
#include "catalog.hpp"
#include "prewarm/tool_support.hpp"

namespace moejit::tools {
namespace {

using Json = nlohmann::ordered_json;

std::string spills(const ResourceReport& r) {
  if (r.spill_store_bytes < 0 && r.spill_load_bytes < 0) return "?";
  return std::to_string(std::max(r.spill_store_bytes, 0)) + "/" + std::to_string(std::max(r.spill_load_bytes, 0));
}

Json entry_json(const CatalogEntry& e) {
  Json j;
  j["id"] = e.id;
  j["path"] = e.path.string();
  j["bytes"] = e.bytes;
  j["last_used"] = format_time(e.last_used);
  j["ok"] = e.ok();
  if (!e.ok()) {
    j["problem"] = e.problem;
    return j;
  }
  const cache::EntryHeader& h = e.entry->header;
  j["key"] = h.key_text;
  j["target"] = h.payload.target;
  j["nvrtc_version"] = h.payload.nvrtc_version;
  j["moejit_version"] = h.payload.moejit_version;
  j["name_expression"] = h.payload.name_expression;
  j["lowered_name"] = h.lowered_name;
  j["cubin_bytes"] = e.entry->cubin.size();
  j["registers"] = h.resources.registers;
  j["spill_store_bytes"] = h.resources.spill_store_bytes;
  j["spill_load_bytes"] = h.resources.spill_load_bytes;
  j["stack_frame_bytes"] = h.resources.stack_frame_bytes;
  j["shared_bytes"] = h.resources.shared_bytes;
  j["block_threads"] = h.launch.block_threads;
  j["dynamic_smem_bytes"] = h.launch.dynamic_smem_bytes;
  j["compile_ms"] = h.compile_ms;
  j["created_unix"] = h.created_unix;
  return j;
}

void print_files(const char* title, const std::vector<CatalogFile>& files) {
  for (const CatalogFile& f : files)
    std::printf("%s: %s (%s)%s%s\n", title, f.path.c_str(), format_bytes(f.bytes).c_str(), f.note.empty() ? "" : ": ",
                f.note.c_str());
}

}  // namespace

int cmd_ls(const std::filesystem::path& dir, bool json) {
  const Catalog c = scan_cache(dir);
  if (json) {
    Json arr = Json::array();
    for (const CatalogEntry& e : c.entries) arr.push_back(entry_json(e));
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  if (c.entries.empty()) {
    std::printf("no entries in %s%s\n", dir.c_str(), c.exists ? "" : " (the directory does not exist)");
    return 0;
  }
  std::printf("%-32s  %9s  %-7s  %4s  %-9s  %-16s  %s\n", "ID", "SIZE", "TARGET", "REGS", "SPILL", "LAST USED", "KEY");
  for (const CatalogEntry& e : c.entries) {
    if (!e.ok()) {
      std::printf("%-32s  %9s  BAD: %s\n", e.id.c_str(), format_bytes(e.bytes).c_str(), e.problem.c_str());
      continue;
    }
    const cache::EntryHeader& h = e.entry->header;
    std::printf("%-32s  %9s  %-7s  %4d  %-9s  %-16s  %s\n", e.id.c_str(), format_bytes(e.bytes).c_str(),
                h.payload.target.c_str(), h.resources.registers, spills(h.resources).c_str(),
                format_time(e.last_used).c_str(), h.key_text.c_str());
  }
  std::printf("%zu entries, %s in %s\n", c.entries.size(), format_bytes(c.entry_bytes()).c_str(), dir.c_str());
  return 0;
}

int cmd_show(const std::filesystem::path& dir, const std::string& id) {
  const Catalog c = scan_cache(dir);
  const CatalogEntry& e = find_entry(c, id);
  std::printf("id                 %s\npath               %s\nsize               %s (%llu bytes)\nlast used          %s\n",
              e.id.c_str(), e.path.c_str(), format_bytes(e.bytes).c_str(), static_cast<unsigned long long>(e.bytes),
              format_time(e.last_used).c_str());
  if (!e.ok()) {
    std::printf("status             BAD: %s\n", e.problem.c_str());
    return static_cast<int>(ExitCode::failed);
  }
  const cache::EntryHeader& h = e.entry->header;
  const auto& r = h.resources;
  std::printf("status             ok (checksums, header, content address verified)\n");
  std::printf("key                %s\n", h.key_text.c_str());
  std::printf("target             %s\nnvrtc version      %s\nmoejit version     %s\n", h.payload.target.c_str(),
              h.payload.nvrtc_version.c_str(), h.payload.moejit_version.c_str());
  std::printf("name expression    %s\nlowered name       %s\n", h.payload.name_expression.c_str(),
              h.lowered_name.c_str());
  std::printf("source             %llu bytes, xxh3-128 %s\n", static_cast<unsigned long long>(h.payload.source_bytes),
              h.payload.source_hash.hex().c_str());
  std::string opts;
  for (const std::string& o : h.payload.options) opts += (opts.empty() ? "" : " ") + o;
  std::printf("nvrtc options      %s\n", opts.c_str());
  std::printf("launch             %u threads, %u bytes dynamic shared memory\n", h.launch.block_threads,
              h.launch.dynamic_smem_bytes);
  std::printf("ptxas              %d registers, spill stores %d B, spill loads %d B, stack %d B, static smem %d B\n",
              r.registers, r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes, r.shared_bytes);
  std::printf("cubin              %s\ncompile time       %s\ncreated            %lld (unix time)\n",
              format_bytes(e.entry->cubin.size()).c_str(), format_ms(h.compile_ms).c_str(),
              static_cast<long long>(h.created_unix));
  std::printf("nvrtc log%s\n%s\n", h.nvrtc_log.empty() ? "          (empty)" : ":", h.nvrtc_log.c_str());
  return 0;
}

int cmd_stats(const std::filesystem::path& dir, bool json) {
  const Catalog c = scan_cache(dir);
  const cache::PersistentStats s = cache::read_stats(dir);
  std::size_t bad = 0;
  for (const CatalogEntry& e : c.entries) bad += e.ok() ? 0 : 1;
  std::uint64_t qbytes = 0;
  for (const CatalogFile& f : c.quarantined) qbytes += f.bytes;
  if (json) {
    Json j;
    j["cache_dir"] = dir.string();
    j["entries"] = c.entries.size();
    j["bad_entries"] = bad;
    j["entry_bytes"] = c.entry_bytes();
    j["total_bytes"] = c.total_bytes();
    j["quarantined_files"] = c.quarantined.size();
    j["quarantined_bytes"] = qbytes;
    j["recorded"] = Json::parse(s.to_json());
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("cache dir          %s%s\n", dir.c_str(), c.exists ? "" : " (does not exist)");
  std::printf("entries            %zu (%s)%s\n", c.entries.size(), format_bytes(c.entry_bytes()).c_str(),
              bad ? (", " + std::to_string(bad) + " bad: run moejit-cache verify").c_str() : "");
  std::printf("quarantined        %zu files (%s) now, %llu moved aside in total\n", c.quarantined.size(),
              format_bytes(qbytes).c_str(), static_cast<unsigned long long>(s.quarantined));
  std::printf("total on disk      %s\n", format_bytes(c.total_bytes()).c_str());
  std::printf("recorded           %llu disk hits, %llu disk misses, %llu compiles (%s), %llu compile failures\n",
              static_cast<unsigned long long>(s.disk_hits), static_cast<unsigned long long>(s.disk_misses),
              static_cast<unsigned long long>(s.compiles), format_ms(s.compile_ms_total).c_str(),
              static_cast<unsigned long long>(s.compile_failures));
  std::printf("                   %llu misses after seal, %llu publish failures\n",
              static_cast<unsigned long long>(s.misses_after_seal), static_cast<unsigned long long>(s.publish_failures));
  return 0;
}

int cmd_verify(const std::filesystem::path& dir, bool json) {
  const Catalog c = scan_cache(dir);
  std::size_t bad = 0;
  for (const CatalogEntry& e : c.entries) bad += e.ok() ? 0 : 1;
  const std::size_t problems = bad + c.foreign.size() + c.temp_files.size() + c.orphans.size();
  if (json) {
    Json j;
    j["cache_dir"] = dir.string();
    j["entries"] = c.entries.size();
    j["bad"] = Json::array();
    for (const CatalogEntry& e : c.entries)
      if (!e.ok()) j["bad"].push_back({{"path", e.path.string()}, {"problem", e.problem}});
    auto files = [](const std::vector<CatalogFile>& v) {
      Json a = Json::array();
      for (const CatalogFile& f : v) a.push_back({{"path", f.path.string()}, {"note", f.note}});
      return a;
    };
    j["foreign"] = files(c.foreign);
    j["temp_files"] = files(c.temp_files);
    j["orphans"] = files(c.orphans);
    j["ok"] = problems == 0;
    std::printf("%s\n", j.dump(2).c_str());
    return problems ? static_cast<int>(ExitCode::failed) : 0;
  }
  for (const CatalogEntry& e : c.entries)
    if (!e.ok()) std::printf("bad entry: %s: %s\n", e.path.c_str(), e.problem.c_str());
  print_files("foreign file", c.foreign);
  print_files("leftover temp file", c.temp_files);
  print_files("orphan file", c.orphans);
  std::printf("%zu entries checked in %s: %zu good, %zu bad; %zu other problems\n", c.entries.size(), dir.c_str(),
              c.entries.size() - bad, bad, problems - bad);
  if (bad) std::printf("bad entries are moved to quarantine and recompiled on their next use\n");
  return problems ? static_cast<int>(ExitCode::failed) : 0;
}

}  // namespace moejit::tools
