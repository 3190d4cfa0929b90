// moejit-cache: inspect and maintain a moejit kernel cache directory.
//
//   moejit-cache ls [--json]            moejit-cache verify
//   moejit-cache show ID                moejit-cache prune --max-size 2G --older-than 7d
//   moejit-cache cubin ID OUT
//   moejit-cache stats [--json]         moejit-cache clear --yes
//   moejit-cache explain KEY            moejit-cache export OUT [--arch ARCH]
//   ls / verify / explain --pack FILE   (every subcommand: --cache-dir DIR)
//
// Exit codes (docs/exit-codes.md): 0 ok, 1 bad entries found / key would miss,
// 2 bad arguments, 3 environment (cache directory unusable).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "../cli_usage.hpp"
#include "commands.hpp"
#include "common/tool_support.hpp"
#include "moejit/runtime.hpp"

namespace moejit::tools {
namespace {

constexpr const char* kTool = "moejit-cache";

int run(int argc, char** argv) {
  CLI::App app{"Inspect and maintain a moejit kernel cache directory (moejit " MOEJIT_VERSION ")", kTool};
  app.set_version_flag("--version", MOEJIT_VERSION);
  app.require_subcommand(1);
  std::string cache_dir;
  const std::string dir_help = "cache directory (default: $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else ~/.cache/moejit)";
  app.add_option("--cache-dir", cache_dir, dir_help)->option_text("DIR");
  auto sub = [&](const char* name, const char* help) {
    CLI::App* s = app.add_subcommand(name, help);
    s->add_option("--cache-dir", cache_dir, dir_help)->option_text("DIR");
    return s;
  };
  bool json = false, yes = false, repair = false, dry_run = false;
  std::string id, key, max_size, older_than, pack, export_out, export_arch, cubin_out;
  CLI::App* ls = sub("ls", "list entries: id, size, target, registers, spills, last use, key");
  ls->add_flag("--json", json, "one JSON array instead of the table");
  ls->add_option("--pack", pack, "list an AOT pack file instead of the directory")->option_text("FILE");
  CLI::App* show = sub("show", "everything about one entry (its id or a unique prefix of it)");
  show->add_option("ID", id, "entry id")->required();
  CLI::App* cubin = sub("cubin", "write one entry's cubin to a file (for cuobjdump -sass or nvdisasm)");
  cubin->add_option("ID", id, "entry id (or a unique prefix of it)")->required();
  cubin->add_option("OUT", cubin_out, "file to write (replaced if it exists)")->required();
  CLI::App* stats = sub("stats", "entries, bytes, recorded hits / misses / compiles, quarantined");
  stats->add_flag("--json", json, "one JSON object instead of the table");
  CLI::App* verify = sub("verify", "check every entry; exit 1 if any is bad (each problem listed; outdated entries "
                                   "are listed but are not bad)");
  verify->add_flag("--json", json, "one JSON object instead of the listing");
  verify->add_flag("--repair", repair, "move corrupt and outdated entries and foreign files to quarantine/, remove temp debris");
  verify->add_option("--pack", pack, "verify an AOT pack file instead of the directory")->option_text("FILE");
  CLI::App* prune = sub("prune", "remove entries by age and/or total size, least recently used first (default limit: $MOEJIT_CACHE_MAX_BYTES)");
  prune->add_option("--max-size", max_size, "keep at most this many bytes (K/M/G/T suffixes)")->option_text("BYTES");
  prune->add_option("--older-than", older_than, "remove entries unused for longer (90s, 30m, 12h, 7d, 2w; a unit is required)")
      ->option_text("DURATION");
  prune->add_flag("--dry-run", dry_run, "say what would be removed, remove nothing");
  CLI::App* clear = sub("clear", "remove every entry, the quarantine and the statistics");
  clear->add_flag("-y,--yes", yes, "do not ask");
  CLI::App* explain = sub("explain", "would this key (canonical text, see moejit-prewarm --list-keys) hit the cache?");
  explain->add_option("KEY", key, "the key's canonical text (quote it)")->required();
  explain->add_option("--pack", pack, "explain against an AOT pack file instead of the directory")->option_text("FILE");
  CLI::App* exp = sub("export", "write every verified entry into one immutable AOT pack file (MOEJIT_CACHE_PACK)");
  exp->add_option("OUT", export_out, "pack file to write")->required();
  exp->add_option("--arch", export_arch, "only entries of this target (default: the first entry's)")->option_text("ARCH");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(usage_error_text(app, e));
  }

  const std::filesystem::path dir = cache_dir.empty() ? default_cache_dir() : std::filesystem::path(cache_dir);
  // The subcommands that read or change the directory: a typo in --cache-dir
  // must not report an empty, healthy cache (exit 3, as moejit-prewarm).
  auto existing = [&]() -> const std::filesystem::path& {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec))
      throw EnvironmentError("cache directory '" + dir.string() + "' does not exist (--cache-dir or MOEJIT_CACHE_DIR)");
    if (!std::filesystem::is_directory(dir, ec))
      throw EnvironmentError("cache directory '" + dir.string() + "' exists and is not a directory");
    return dir;
  };
  if (ls->parsed()) return pack.empty() ? cmd_ls(existing(), json) : cmd_ls_pack(pack, json);
  if (show->parsed()) return cmd_show(existing(), id);
  if (cubin->parsed()) return cmd_cubin(existing(), id, cubin_out);
  if (stats->parsed()) return cmd_stats(existing(), json);
  if (verify->parsed()) {
    if (!pack.empty() && repair) throw UsageError("verify --repair cannot change a pack (packs are immutable)");
    return pack.empty() ? cmd_verify(existing(), json, repair) : cmd_verify_pack(pack, json);
  }
  if (exp->parsed()) return cmd_export(existing(), export_out, export_arch);
  if (prune->parsed()) {
    std::optional<std::uint64_t> size;
    std::optional<std::chrono::seconds> age;
    if (!max_size.empty()) size = parse_byte_size(max_size, "--max-size");
    // Why refuse 0: MOEJIT_CACHE_MAX_BYTES=0 means "no cap"; here it would mean
    // "delete everything", the opposite. Emptying the cache is `clear`.
    if (size && *size == 0)
      throw UsageError("--max-size 0 would remove every entry (0 means no cap in MOEJIT_CACHE_MAX_BYTES); use "
                       "'moejit-cache clear --yes' to empty the cache");
    if (!older_than.empty()) age = parse_duration(older_than, "--older-than");
    return cmd_prune(existing(), size, age, dry_run);
  }
  if (clear->parsed()) return cmd_clear(existing(), yes);
  if (explain->parsed()) return pack.empty() ? cmd_explain(dir, key) : cmd_explain_pack(pack, key);
  throw UsageError("no subcommand given (ls, show, cubin, stats, verify, prune, clear, explain, export)");
}

}  // namespace
}  // namespace moejit::tools

int main(int argc, char** argv) {
  using namespace moejit::tools;
  return run_tool_main(kTool, run, argc, argv);
}
