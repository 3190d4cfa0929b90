#pragma once
// The subcommands of moejit-cache. Each returns the process exit code
// (docs/exit-codes.md) and throws UsageError / EnvironmentError for the
// one-line errors main() prints.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "moejit/cache_admin.hpp"

namespace moejit::tools {

// "2026-11-29 14:03" (local time).
std::string format_unix_time(std::int64_t unix_seconds);

int cmd_ls(const std::filesystem::path& dir, bool json);
int cmd_show(const std::filesystem::path& dir, const std::string& id);
// Writes the verified entry's cubin (the ELF that cuobjdump -sass and nvdisasm
// read) to `out`, replacing it (through a temporary file beside it: a failed
// write leaves `out` as it was). UsageError (exit 2) naming `out` when it is
// "-", a directory, in a folder that does not exist, or cannot be written; as
// `show`: InvalidArgument (exit 2) when `id` matches no entry or several,
// Error (exit 1) when the entry is corrupt or its directory is not trusted.
int cmd_cubin(const std::filesystem::path& dir, const std::string& id, const std::filesystem::path& out);
int cmd_stats(const std::filesystem::path& dir, bool json);
// Exit 1 when any entry is corrupt or any foreign / leftover file or refused
// folder is found; lists each once, and each outdated or newer_format entry
// (no fault: exit 0 over them alone). `repair`: also quarantine them (temp
// debris: remove; an outdated entry: quarantine; a newer_format one: keep) and
// exit 0 when every fault was repaired (a kept one says why).
int cmd_verify(const std::filesystem::path& dir, bool json, bool repair);
// Prints a verify report (JSON with `what_key`: `what`, or one line per problem
// plus a summary and, when a fault or outdated entry is left, `hint`); returns
// the tool's exit code: 0 when every fault was repaired (`repair_mode`) or
// there was none (cache_admin::is_fault).
int print_verify_report(const cache_admin::VerifyReport& r, const char* what_key, const std::filesystem::path& what,
                        bool json, const char* hint, bool repair_mode = false);
// Removes entries unused for longer than `older_than` and least-recently-used
// entries beyond `max_size` bytes; without either limit, MOEJIT_CACHE_MAX_BYTES;
// with none of the three, UsageError.
// Quarantined files count toward the size and go first; `dry_run`: only say what would go.
int cmd_prune(const std::filesystem::path& dir, std::optional<std::uint64_t> max_size,
              std::optional<std::chrono::seconds> older_than, bool dry_run);
// Removes every entry, stamp, lock and quarantined file and resets the
// statistics; never the directory itself nor files moejit did not create at its
// top level. Without `yes`: asks on a terminal, else UsageError.
int cmd_clear(const std::filesystem::path& dir, bool yes);
// Would `key_text` hit? Exit 0 on a hit, 1 on a miss (with the nearest entry and
// the fields that differ), 2 when the text does not parse.
int cmd_explain(const std::filesystem::path& dir, const std::string& key_text);

// The same over an AOT pack file (ls, verify, explain --pack FILE).
int cmd_ls_pack(const std::filesystem::path& pack, bool json);
int cmd_verify_pack(const std::filesystem::path& pack, bool json);
int cmd_explain_pack(const std::filesystem::path& pack, const std::string& key_text);
// Writes every verified entry of `dir` (of one target: `target`, or the first
// entry's) into a pack at `out`. UsageError when there is none.
int cmd_export(const std::filesystem::path& dir, const std::filesystem::path& out, const std::string& target);

}  // namespace moejit::tools
