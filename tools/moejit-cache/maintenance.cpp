// prune and clear: the subcommands that delete.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "cache/cache_stats.hpp"
#include "catalog.hpp"
#include "commands.hpp"
#include "prewarm/tool_support.hpp"

namespace moejit::tools {
namespace fs = std::filesystem;
namespace {

// Why a grace period: a temp file or a lock without its entry is normal while
// another process is compiling and publishing that entry right now.
constexpr double kLeftoverGraceSeconds = 3600;

struct Removal {
  std::vector<fs::path> paths;
  std::uint64_t bytes = 0;
  bool entry = false;
  std::string what;
};

Removal entry_removal(const CatalogEntry& e, const std::string& why) {
  Removal r;
  r.entry = true;
  r.bytes = e.bytes + e.aux_bytes;
  const fs::path base = e.path.parent_path() / e.id;
  r.paths = {e.path, fs::path(base.string() + ".used"), fs::path(base.string() + ".lock")};
  r.what = "entry " + e.id + " (" + format_bytes(r.bytes) + ", " + why + ")";
  return r;
}

Removal file_removal(const CatalogFile& f, const std::string& kind) {
  return Removal{{f.path}, f.bytes, false, kind + " " + f.path.string() + " (" + format_bytes(f.bytes) + ")"};
}

// Removes the paths; returns false when the main one could not be removed.
bool apply(const Removal& r, std::string& error) {
  std::error_code ec;
  for (std::size_t i = 0; i < r.paths.size(); ++i) {
    fs::remove(r.paths[i], ec);
    if (ec && i == 0) {
      error = "cannot remove " + r.paths[i].string() + ": " + ec.message();
      return false;
    }
  }
  return true;
}

}  // namespace

int cmd_prune(const fs::path& dir, std::optional<std::uint64_t> max_size, std::optional<std::chrono::seconds> older_than,
              bool dry_run) {
  if (!max_size && !older_than) throw UsageError("prune needs --max-size BYTES and/or --older-than DURATION");
  const Catalog c = scan_cache(dir);
  std::vector<Removal> plan;
  std::vector<bool> entry_gone(c.entries.size(), false), quarantine_gone(c.quarantined.size(), false);
  const double max_age = older_than ? static_cast<double>(older_than->count()) : 0;

  for (const CatalogFile& f : c.temp_files)
    if (age_seconds(f.mtime) > kLeftoverGraceSeconds) plan.push_back(file_removal(f, "leftover temp file"));
  for (const CatalogFile& f : c.orphans)
    if (age_seconds(f.mtime) > kLeftoverGraceSeconds) plan.push_back(file_removal(f, "orphan file"));
  if (older_than) {
    for (std::size_t i = 0; i < c.quarantined.size(); ++i)
      if (age_seconds(c.quarantined[i].mtime) > max_age) {
        plan.push_back(file_removal(c.quarantined[i], "quarantined file"));
        quarantine_gone[i] = true;
      }
    for (std::size_t i = 0; i < c.entries.size(); ++i)
      if (age_seconds(c.entries[i].last_used) > max_age) {
        plan.push_back(entry_removal(c.entries[i], "last used " + format_time(c.entries[i].last_used)));
        entry_gone[i] = true;
      }
  }
  if (max_size) {
    std::uint64_t size = c.total_bytes();
    for (const Removal& r : plan) size -= std::min(size, r.bytes);
    // Quarantined files first (oldest first), then entries least recently used first.
    std::vector<std::size_t> q(c.quarantined.size()), e(c.entries.size());
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = i;
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = i;
    std::sort(q.begin(), q.end(), [&](auto a, auto b) { return c.quarantined[a].mtime < c.quarantined[b].mtime; });
    std::sort(e.begin(), e.end(), [&](auto a, auto b) { return c.entries[a].last_used < c.entries[b].last_used; });
    for (std::size_t i : q) {
      if (size <= *max_size) break;
      if (quarantine_gone[i]) continue;
      plan.push_back(file_removal(c.quarantined[i], "quarantined file"));
      size -= std::min(size, c.quarantined[i].bytes);
    }
    for (std::size_t i : e) {
      if (size <= *max_size) break;
      if (entry_gone[i]) continue;
      plan.push_back(entry_removal(c.entries[i], "least recently used"));
      size -= std::min(size, c.entries[i].bytes + c.entries[i].aux_bytes);
    }
  }

  std::size_t entries = 0, others = 0;
  std::uint64_t bytes = 0;
  for (const Removal& r : plan) {
    std::string error;
    if (dry_run) {
      std::printf("would remove %s\n", r.what.c_str());
    } else if (!apply(r, error)) {
      throw EnvironmentError(error);
    }
    (r.entry ? entries : others) += 1;
    bytes += r.bytes;
  }
  std::printf("%s %zu entries and %zu other files (%s); %s now holds %s\n", dry_run ? "would remove" : "removed",
              entries, others, format_bytes(bytes).c_str(), dir.c_str(),
              format_bytes(c.total_bytes() - std::min(c.total_bytes(), bytes)).c_str());
  return 0;
}

int cmd_clear(const fs::path& dir, bool yes) {
  const Catalog c = scan_cache(dir);
  if (!c.exists) {
    std::printf("nothing to clear: %s does not exist\n", dir.c_str());
    return 0;
  }
  const std::string summary = std::to_string(c.entries.size()) + " entries and " +
                              std::to_string(c.quarantined.size()) + " quarantined files (" +
                              format_bytes(c.total_bytes() - [&] {
                                std::uint64_t f = 0;
                                for (const CatalogFile& x : c.foreign) f += x.bytes;
                                return f;
                              }()) +
                              ") in " + dir.string();
  if (!yes) {
    if (!::isatty(STDIN_FILENO))
      throw UsageError("clear would delete " + summary + ": add --yes (stdin is not a terminal)");
    std::fprintf(stderr, "delete %s? [y/N] ", summary.c_str());
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::printf("nothing deleted\n");
      return 0;
    }
  }
  // Why only these names and never the directory itself: --cache-dir may point
  // at a directory that holds other things (a mistyped $HOME); we delete only
  // what moejit creates.
  std::error_code ec;
  for (const char* sub : {"entries", "quarantine"}) {
    fs::remove_all(dir / sub, ec);
    if (ec) throw EnvironmentError("cannot remove " + (dir / sub).string() + ": " + ec.message());
  }
  for (const CatalogFile& f : c.temp_files) fs::remove(f.path, ec);
  cache::reset_stats(dir);
  std::printf("deleted %s\n", summary.c_str());
  if (!c.foreign.empty())
    std::printf("kept %zu files moejit did not create (moejit-cache verify lists them)\n", c.foreign.size());
  return 0;
}

}  // namespace moejit::tools
