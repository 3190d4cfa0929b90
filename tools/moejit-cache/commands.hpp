#pragma once
// The subcommands of moejit-cache. Each returns the process exit code
// (docs/exit-codes.md) and throws UsageError / EnvironmentError for the
// one-line errors main() prints.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace moejit::tools {

int cmd_ls(const std::filesystem::path& dir, bool json);
int cmd_show(const std::filesystem::path& dir, const std::string& id);
int cmd_stats(const std::filesystem::path& dir, bool json);
// Exit 1 when any entry is bad or any foreign / leftover file is found; lists each.
int cmd_verify(const std::filesystem::path& dir, bool json);
// Removes entries unused for longer than `older_than`, then least-recently-used
// entries until the cache is at most `max_size` bytes; quarantined files and
// leftover temp files go first. At least one limit must be given (UsageError).
int cmd_prune(const std::filesystem::path& dir, std::optional<std::uint64_t> max_size,
              std::optional<std::chrono::seconds> older_than, bool dry_run);
// Removes entries/, quarantine/ and the statistics; never the directory itself
// nor files moejit did not create. Without `yes`: asks on a terminal, else UsageError.
int cmd_clear(const std::filesystem::path& dir, bool yes);
// Would `key_text` hit? Exit 0 on a hit, 1 on a miss (with the nearest entry and
// the fields that differ), 2 when the text does not parse.
int cmd_explain(const std::filesystem::path& dir, const std::string& key_text);

}  // namespace moejit::tools
