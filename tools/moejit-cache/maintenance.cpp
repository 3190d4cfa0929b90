// prune and clear: the subcommands that delete (over src/cache/cache_admin.hpp).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cache/cache_admin.hpp"
#include "commands.hpp"
#include "prewarm/tool_support.hpp"
#include "util/env.hpp"

namespace moejit::tools {

int cmd_prune(const std::filesystem::path& dir, std::optional<std::uint64_t> max_size,
              std::optional<std::chrono::seconds> older_than) {
  // Why the environment as a fallback: MOEJIT_CACHE_MAX_BYTES is the cache's
  // configured cap (docs/environment.md); a cron job can run a bare `prune`.
  if (!max_size && !older_than) max_size = util::env::cache_max_bytes();
  if (!max_size && !older_than)
    throw UsageError("prune needs --max-size BYTES and/or --older-than DURATION (or MOEJIT_CACHE_MAX_BYTES)");
  cache::PruneOptions o;
  o.max_bytes = max_size;
  o.older_than = older_than;
  const cache::PruneReport r = cache::prune(dir, o);
  std::printf("removed %zu entries (%s), kept %zu (%s)", r.removed_entries, format_bytes(r.removed_bytes).c_str(),
              r.kept_entries, format_bytes(r.kept_bytes).c_str());
  if (r.skipped_locked) std::printf(", skipped %zu being published", r.skipped_locked);
  if (r.removed_temp) std::printf(", removed %zu leftover temp files", r.removed_temp);
  std::printf(" in %s\n", dir.c_str());
  return 0;
}

int cmd_clear(const std::filesystem::path& dir, bool yes) {
  const cache::CacheSummary s = cache::summarize(dir);
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
  const cache::ClearReport r = cache::clear(dir);
  std::printf("deleted %zu files (%s) in %s; statistics reset\n", r.removed_files,
              format_bytes(r.removed_bytes).c_str(), dir.c_str());
  return 0;
}

}  // namespace moejit::tools
