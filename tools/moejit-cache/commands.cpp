// ls, show, cubin, stats, verify: views of a cache directory over moejit/cache_admin.hpp.
#include "commands.hpp"

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/tool_support.hpp"
#include "moejit/cache_admin.hpp"
#include "moejit/stats.hpp"

namespace moejit::tools {
namespace {

using Json = nlohmann::ordered_json;

std::string spills(const ResourceReport& r) {
  if (r.spill_store_bytes < 0 && r.spill_load_bytes < 0) return "?";
  return std::to_string(std::max(r.spill_store_bytes, 0)) + "/" + std::to_string(std::max(r.spill_load_bytes, 0));
}

Json header_json(const cache_admin::EntryHeader& h) {
  Json j;
  j["key"] = h.key_text;
  j["target"] = h.target;
  j["nvrtc_version"] = h.nvrtc_version;
  j["moejit_version"] = h.moejit_version;
  j["name_expression"] = h.name_expression;
  j["lowered_name"] = h.lowered_name;
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

const cache_admin::EntryInfo* info_of(const std::vector<cache_admin::EntryInfo>& list, const Hash128& address) {
  for (const cache_admin::EntryInfo& e : list)
    if (e.address == address) return &e;
  return nullptr;
}

}  // namespace

std::string format_unix_time(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

int cmd_ls(const std::filesystem::path& dir, bool json) {
  const std::vector<cache_admin::EntryInfo> list = cache_admin::list_entries(dir, cache_admin::ownership_from_env());
  if (json) {
    Json arr = Json::array();
    for (const cache_admin::EntryInfo& e : list) {
      Json j;
      j["id"] = e.address.hex();
      j["path"] = e.path.string();
      j["bytes"] = e.file_bytes;
      j["cubin_bytes"] = e.cubin_bytes;
      j["last_used_unix"] = e.last_used_unix;
      j["ok"] = e.problem.empty();
      if (!e.problem.empty()) j["problem"] = e.problem;
      if (e.header) j.update(header_json(*e.header));
      arr.push_back(std::move(j));
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  if (list.empty()) {
    std::error_code ec;
    std::printf("no entries in %s%s\n", dir.c_str(), std::filesystem::exists(dir, ec) ? "" : " (does not exist)");
    return 0;
  }
  std::uint64_t bytes = 0;
  std::printf("%-32s  %9s  %-7s  %4s  %-9s  %-16s  %s\n", "ID", "SIZE", "TARGET", "REGS", "SPILL", "LAST USED", "KEY");
  for (const cache_admin::EntryInfo& e : list) {
    bytes += e.file_bytes;
    if (!e.problem.empty() || !e.header) {
      std::printf("%-32s  %9s  BAD: %s\n", e.address.hex().c_str(), format_bytes(e.file_bytes).c_str(),
                  e.problem.c_str());
      continue;
    }
    const cache_admin::EntryHeader& h = *e.header;
    std::printf("%-32s  %9s  %-7s  %4d  %-9s  %-16s  %s\n", e.address.hex().c_str(),
                format_bytes(e.file_bytes).c_str(), h.target.c_str(), h.resources.registers,
                spills(h.resources).c_str(), format_unix_time(e.last_used_unix).c_str(), h.key_text.c_str());
  }
  std::printf("%zu entries, %s in %s\n", list.size(), format_bytes(bytes).c_str(), dir.c_str());
  return 0;
}

int cmd_show(const std::filesystem::path& dir, const std::string& id) {
  // read_entry verifies the whole entry; InvalidArgument (no / several matches)
  // and Error (corrupt: exit code 1) reach main's one-line handler.
  const cache_admin::Entry entry = cache_admin::read_entry(dir, id, cache_admin::ownership_from_env());
  const cache_admin::EntryHeader& h = entry.header;
  const Hash128 address = entry.address;
  const std::vector<cache_admin::EntryInfo> list = cache_admin::list_entries(dir, cache_admin::ownership_from_env());
  const cache_admin::EntryInfo* info = info_of(list, address);
  const auto& r = h.resources;
  std::printf("id                 %s\n", address.hex().c_str());
  if (info) {
    std::printf("path               %s\nsize               %s (%llu bytes)\nlast used          %s\n", info->path.c_str(),
                format_bytes(info->file_bytes).c_str(), static_cast<unsigned long long>(info->file_bytes),
                format_unix_time(info->last_used_unix).c_str());
  }
  std::printf("status             ok (checksums, header, content address verified)\n");
  std::printf("key                %s\n", h.key_text.c_str());
  std::printf("target             %s\nnvrtc version      %s\nmoejit version     %s\n", h.target.c_str(),
              h.nvrtc_version.c_str(), h.moejit_version.c_str());
  std::printf("name expression    %s\nlowered name       %s\n", h.name_expression.c_str(),
              h.lowered_name.c_str());
  std::printf("source             %llu bytes, xxh3-128 %s\n", static_cast<unsigned long long>(h.source_bytes),
              h.source_hash.hex().c_str());
  std::string opts;
  for (const std::string& o : h.nvrtc_options) opts += (opts.empty() ? "" : " ") + o;
  std::printf("nvrtc options      %s\n", opts.c_str());
  std::printf("launch             %u threads, %u bytes dynamic shared memory\n", h.launch.block_threads,
              h.launch.dynamic_smem_bytes);
  std::printf("ptxas              %d registers, spill stores %d B, spill loads %d B, stack %d B, static smem %d B\n",
              r.registers, r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes, r.shared_bytes);
  std::printf("cubin              %s\ncompile time       %s\ncreated            %s\n",
              format_bytes(entry.cubin.size()).c_str(), format_ms(h.compile_ms).c_str(),
              format_unix_time(h.created_unix).c_str());
  std::printf("nvrtc log%s\n%s\n", h.nvrtc_log.empty() ? "          (empty)" : ":", h.nvrtc_log.c_str());
  return 0;
}

int cmd_cubin(const std::filesystem::path& dir, const std::string& id, const std::filesystem::path& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (out == "-") throw UsageError("cubin: OUT '-': give a file (a cubin is binary)");
  if (fs::is_directory(out, ec)) throw UsageError("cubin: OUT '" + out.string() + "' is a directory");
  if (!fs::exists(parent, ec))
    throw UsageError("cubin: folder '" + parent.string() + "' of OUT '" + out.string() + "' does not exist");
  if (!fs::is_directory(parent, ec))
    throw UsageError("cubin: '" + parent.string() + "' of OUT '" + out.string() + "' is not a directory");
  const cache_admin::Entry entry = cache_admin::read_entry(dir, id, cache_admin::ownership_from_env());
  // Written beside OUT, then renamed onto it: a failed write leaves OUT as it was.
  const fs::path tmp = out.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(entry.cubin.data(), static_cast<std::streamsize>(entry.cubin.size()));
    f.close();
    if (!f) {
      const int err = errno;
      fs::remove(tmp, ec);
      throw UsageError("cubin: cannot write OUT '" + out.string() + "': " + std::strerror(err));
    }
  }
  fs::rename(tmp, out, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw UsageError("cubin: cannot write OUT '" + out.string() + "': " + ec.message());
  }
  std::printf("%s: %s cubin of %s (%s)\n", out.string().c_str(), format_bytes(entry.cubin.size()).c_str(),
              entry.address.hex().c_str(), entry.header.lowered_name.c_str());
  return 0;
}

int cmd_stats(const std::filesystem::path& dir, bool json) {
  const cache_admin::CacheSummary s = cache_admin::summarize(dir);
  if (json) {
    Json j = Json::parse(s.to_json());
    j["cache_dir"] = dir.string();
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const Stats& p = s.recorded;
  std::error_code ec;
  std::printf("cache dir          %s%s\n", dir.c_str(), std::filesystem::exists(dir, ec) ? "" : " (does not exist)");
  std::printf("entries            %zu (%s)\n", s.entries, format_bytes(s.entry_bytes).c_str());
  std::printf("quarantine now     %zu files (%s)\n", s.quarantined_files, format_bytes(s.quarantine_bytes).c_str());
  std::printf("recorded in stats.json, summed over every process that used the directory:\n");
  for (StatId id : kAllStats) {
    if (!is_persisted(id)) continue;
    std::printf("  %-18s %12llu  %s\n", std::string(to_string(id)).c_str(), static_cast<unsigned long long>(p[id]),
                std::string(describe(id)).c_str());
  }
  std::printf("  %-18s %12s  summed NVRTC wall time\n", std::string(kCompileMsTotalId).c_str(),
              format_ms(p.compile_ms_total).c_str());
  return 0;
}

int print_verify_report(const cache_admin::VerifyReport& r, const char* what_key, const std::filesystem::path& what,
                        bool json, const char* hint, bool repair_mode) {
  using cache_admin::Problem;
  auto count = [&](auto&& pred) {
    return static_cast<std::size_t>(std::count_if(r.problems.begin(), r.problems.end(), pred));
  };
  const std::size_t faults = count([](const Problem& p) { return is_fault(p.kind); });
  const std::size_t faults_repaired = count([](const Problem& p) { return is_fault(p.kind) && p.repaired; });
  const std::size_t outdated = count([](const Problem& p) { return p.kind == cache_admin::ProblemKind::outdated; });
  const std::size_t outdated_moved =
      count([](const Problem& p) { return p.kind == cache_admin::ProblemKind::outdated && p.repaired; });
  const std::size_t newer = count([](const Problem& p) { return p.kind == cache_admin::ProblemKind::newer_format; });
  if (json) {
    Json j;
    j[what_key] = what.string();
    j["entries_ok"] = r.entries_ok;
    j["problems"] = Json::array();
    for (const Problem& p : r.problems)
      j["problems"].push_back({{"path", p.path.string()},
                               {"kind", std::string(to_string(p.kind))},
                               {"fault", is_fault(p.kind)},
                               {"message", p.message},
                               {"repaired", p.repaired}});
    j["ok"] = r.clean();
    j["repaired"] = count([](const Problem& p) { return p.repaired; });
    j["resolved"] = r.resolved();
    j["outdated"] = outdated;
    j["newer_format"] = newer;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const Problem& p : r.problems)
      std::printf("%s: %s: %s\n", std::string(to_string(p.kind)).c_str(), p.path.c_str(), p.message.c_str());
    // Entries of other format versions apart from the problems: they are no faults.
    std::string line = what.string() + ": " + std::to_string(r.entries_ok) + " entries ok";
    if (outdated > 0) {
      line += ", " + std::to_string(outdated) + " outdated";
      if (outdated_moved > 0) line += " (" + std::to_string(outdated_moved) + " moved to quarantine)";
    }
    if (newer > 0) line += ", " + std::to_string(newer) + " of a newer format (kept)";
    line += ", " + std::to_string(faults) + " problems";
    if (faults_repaired > 0 || (repair_mode && faults > 0))
      line += ": " + std::to_string(faults_repaired) + " repaired, " + std::to_string(faults - faults_repaired) + " kept";
    std::printf("%s\n", line.c_str());
    if ((!r.resolved() || outdated > outdated_moved) && hint != nullptr) std::printf("%s\n", hint);
  }
  return r.resolved() ? 0 : static_cast<int>(ExitCode::failed);
}

int cmd_verify(const std::filesystem::path& dir, bool json, bool repair) {
  const cache_admin::VerifyReport r = cache_admin::verify(
      dir, repair ? cache_admin::VerifyAction::repair : cache_admin::VerifyAction::report,
      cache_admin::ownership_from_env());
  return print_verify_report(r, "cache_dir", dir, json,
                             repair ? nullptr
                                    : "a corrupt or outdated entry is quarantined and recompiled on its next use; "
                                      "moejit-cache verify --repair moves them aside now",
                             repair);
}

}  // namespace moejit::tools
