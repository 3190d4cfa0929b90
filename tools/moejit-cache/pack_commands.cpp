// Subcommands over AOT packs: ls --pack, verify --pack, export.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common/tool_support.hpp"
#include "moejit/aot_pack.hpp"

namespace moejit::tools {
namespace {

using Json = nlohmann::ordered_json;

AotPackInfo read_or_throw(const std::filesystem::path& path) {
  try {
    return read_aot_pack(path);
  } catch (const Error& e) {
    throw EnvironmentError(one_line(e));
  }
}

}  // namespace

int cmd_ls_pack(const std::filesystem::path& pack_path, bool json) {
  const AotPackInfo m = read_or_throw(pack_path);
  if (json) {
    Json j;
    j["pack"] = pack_path.string();
    j["moejit_version"] = m.moejit_version;
    j["nvrtc_version"] = m.nvrtc_version;
    j["target"] = m.target;
    j["created_unix"] = m.created_unix;
    j["plan"] = Json::parse(m.plan_json);
    j["keys"] = m.keys;
    Json arr = Json::array();
    for (const AotPackEntryInfo& r : m.entries) {
      Json e;
      e["id"] = r.id;
      e["bytes"] = r.bytes;
      e["ok"] = r.ok;
      if (r.ok) {
        e["cubin_bytes"] = r.cubin_bytes;
        e["key"] = r.key;
        e["registers"] = r.registers;
      } else {
        e["problem"] = r.problem;
      }
      arr.push_back(std::move(e));
    }
    j["entries"] = std::move(arr);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("pack %s: moejit %s, NVRTC %s, target %s, %zu entries, %zu keys, built %s\n", pack_path.c_str(),
              m.moejit_version.c_str(), m.nvrtc_version.c_str(), m.target.c_str(), m.entries.size(), m.keys,
              format_unix_time(m.created_unix).c_str());
  for (const AotPackEntryInfo& r : m.entries) {
    if (r.ok)
      std::printf("%s  %9s  regs %3d  %s\n", r.id.c_str(), format_bytes(r.bytes).c_str(), r.registers, r.key.c_str());
    else
      std::printf("%s  %9s  BAD: %s\n", r.id.c_str(), format_bytes(r.bytes).c_str(), r.problem.c_str());
  }
  return 0;
}

int cmd_verify_pack(const std::filesystem::path& pack_path, bool json) {
  return print_verify_report(cache_admin::verify_pack(pack_path), "pack", pack_path, json, nullptr);
}

int cmd_export(const std::filesystem::path& dir, const std::filesystem::path& out, const std::string& target) {
  AotPackExport r;
  try {
    r = export_aot_pack(dir, out, target);
  } catch (const InvalidArgument& e) {
    throw UsageError("export " + out.string() + ": " + e.what());
  }
  for (const std::string& s : r.skipped) std::fprintf(stderr, "moejit-cache: warning: skipped %s\n", s.c_str());
  if (r.entries != r.found)
    std::fprintf(stderr, "moejit-cache: note: %zu of %zu entries are of another target / NVRTC / library version and were left out (use --arch)\n",
                 r.found - r.entries, r.found);
  std::printf("wrote %s: %zu entries, target %s, NVRTC %s\n", out.c_str(), r.entries, r.target.c_str(),
              r.nvrtc_version.c_str());
  return 0;
}

}  // namespace moejit::tools
