// prune and clear: the subcommands that delete (over moejit/cache_admin.hpp).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "commands.hpp"
#include "common/tool_support.hpp"
#include "moejit/cache_admin.hpp"

namespace moejit::tools {

int cmd_prune(const std::filesystem::path& dir, std::optional<std::uint64_t> max_size,
              std::optional<std::chrono::seconds> older_than, bool dry_run) {
  // Why the environment as a fallback: MOEJIT_CACHE_MAX_BYTES is the cache's
  // configured cap (docs/environment.md); a cron job can run a bare `prune`.
  if (!max_size && !older_than) max_size = cache_admin::max_bytes_from_env();
  if (!max_size && !older_than)
    throw UsageError("prune needs --max-size BYTES and/or --older-than DURATION (or MOEJIT_CACHE_MAX_BYTES)");
  cache_admin::PruneOptions o;
  o.max_bytes = max_size;
  o.older_than = older_than;
  o.dry_run = dry_run;
  const cache_admin::PruneReport r = cache_admin::prune(dir, o);
  const char* verb = dry_run ? "would remove" : "removed";
  std::printf("%s %zu entries (%s) and %zu quarantined files (%s), kept %zu entries (%s) and %zu quarantined files (%s)",
              verb, r.removed_entries, format_bytes(r.removed_bytes).c_str(), r.removed_quarantined,
              format_bytes(r.removed_quarantine_bytes).c_str(), r.kept_entries, format_bytes(r.kept_bytes).c_str(),
              r.kept_quarantined, format_bytes(r.kept_quarantine_bytes).c_str());
  if (r.skipped_locked) std::printf(", skipped %zu in use", r.skipped_locked);
  if (r.removed_temp) std::printf(", removed %zu leftover temp files", r.removed_temp);
  if (r.removed_folders) std::printf(", removed %zu empty shard folders", r.removed_folders);
  std::printf(" in %s%s\n", dir.c_str(), dry_run ? " (dry run: nothing removed)" : "");
  return 0;
}

int cmd_clear(const std::filesystem::path& dir, bool yes) {
  const cache_admin::CacheSummary s = cache_admin::summarize(dir);
  const std::string what = std::to_string(s.entries) + " entries (" + format_bytes(s.entry_bytes) + ") and " +
                           std::to_string(s.quarantined_files) + " quarantined files in " + dir.string();
  if (!yes) {
    if (!::isatty(STDIN_FILENO))
      throw UsageError("clear would delete " + what + ": add --yes (stdin is not a terminal)");
    std::fprintf(stderr, "delete %s? [y/N] ", what.c_str());
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::printf("nothing deleted\n");
      return 0;
    }
  }
  const cache_admin::ClearReport r = cache_admin::clear(dir);
  std::printf("deleted %zu files (%s) in %s: %zu entries (%s), %zu last-use stamps, %zu lock files, %zu temp files, "
              "%zu quarantined files (%s), %zu foreign files (%s); statistics reset\n",
              r.files(), format_bytes(r.bytes()).c_str(), dir.c_str(), r.entries, format_bytes(r.entry_bytes).c_str(),
              r.stamps, r.locks, r.temp_files, r.quarantined, format_bytes(r.quarantine_bytes).c_str(), r.foreign,
              format_bytes(r.foreign_bytes).c_str());
  if (r.failed) {
    std::fprintf(stderr, "moejit-cache: error: %zu files could not be removed\n", r.failed);
    return static_cast<int>(ExitCode::failed);
  }
  return 0;
}

}  // namespace moejit::tools
