#pragma once
// Administration of a cache directory, the library side of `moejit-cache`:
// list, read one entry, verify, prune (LRU by the last-use stamp), clear, stats.
// None of these needs NVRTC or a GPU. Safe to run while processes use the cache:
// entries are replaced by rename and deleted by unlink, and a process that has
// read an entry holds its bytes in memory.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_stats.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"

namespace moejit::cache {

// Why 7 days: long enough to look at a bad entry after the warning that named
// it; quarantined files are never read again.
inline constexpr std::chrono::seconds kDefaultQuarantineMaxAge{7 * 86400};

struct EntryInfo {
  Hash128 address;
  std::filesystem::path path;
  std::uint64_t file_bytes = 0;
  std::optional<EntryHeader> header;  // set when the entry is valid (nullopt otherwise)
  std::uint64_t cubin_bytes = 0;
  // Why the entry is not valid ("" when it is): every rule a load applies
  // (DiskCache::inspect: folders, owner, sizes, checksums of header and body,
  // grammar, address), and the directory's trust (layout_trust_problem).
  std::string problem;
  std::int64_t last_used_unix = 0;    // mtime of the .used stamp, else of the entry
};

// Every "<hex>.entry" in a shard folder <dir>/entries/<hex[0:2]>/, sorted by
// address, each fully verified (one entry in memory at a time). A missing
// directory gives an empty list. Never throws except bad_alloc.
std::vector<EntryInfo> list_entries(const std::filesystem::path& dir, Ownership ownership = Ownership::private_only);

// The entry whose address starts with `hex_prefix` (1-32 lowercase hex digits),
// fully verified. Throws InvalidArgument when the prefix is not hex, matches no
// entry, or matches several (the message lists them); Error when the entry is
// corrupt or its directory is not trusted (the message names the file and the reason).
Entry read_entry(const std::filesystem::path& dir, std::string_view hex_prefix,
                 Ownership ownership = Ownership::private_only);

enum class ProblemKind : std::uint8_t {
  corrupt,      // an entry that fails verification (reason in message)
  foreign,      // a file or folder the cache did not write
  temp_debris,  // a leftover temp file of an interrupted publish
  untrusted,    // a folder the cache refuses: a link below the root, another owner, writable by others
  // An entry of an older format version (kOldestEntryFormatVersion up to
  // kEntryFormatVersion) that passes every other check: superseded, not
  // damaged. A load treats it as a miss (quarantine, recompile at the same address).
  outdated,
  // An entry of a newer format version, up to kLargestPlausibleEntryFormatVersion
  // (magic right, written by a newer moejit that shares the directory; its
  // address has that library's version in it, so this library never looks it
  // up). Only the magic can be checked.
  newer_format,
};
std::string_view to_string(ProblemKind);
// Whether a kind is something wrong (corrupt, foreign, temp_debris,
// untrusted). outdated and newer_format are listed but are no faults:
// VerifyReport::clean() and resolved() ignore them.
constexpr bool is_fault(ProblemKind k) noexcept {
  return k != ProblemKind::outdated && k != ProblemKind::newer_format;
}

struct Problem {
  std::filesystem::path path;
  ProblemKind kind = ProblemKind::corrupt;
  std::string message;
  bool repaired = false;  // VerifyAction::repair: moved to quarantine or removed (message says where / why kept)
};

enum class VerifyAction : std::uint8_t {
  report,  // change nothing
  // quarantine corrupt and outdated entries (an outdated one as a load would
  // move it), foreign files and refused shard folders, remove temp debris
  // older than kDefaultTempMaxAge (younger: kept, the message says why); a
  // refused root, entries/ or quarantine/ is kept (permissions are the
  // owner's to fix), and so is an entry of a newer format (the newer moejit
  // that wrote it uses it). Every move is added to stats.json's "quarantined".
  repair,
};

struct VerifyReport {
  std::size_t entries_ok = 0;
  std::vector<Problem> problems;  // faults and entries of other format versions (is_fault)
  std::size_t quarantined = 0;    // repair: problems moved into quarantine/
  // No fault (outdated / newer_format entries may be listed).
  bool clean() const noexcept {
    for (const Problem& p : problems)
      if (is_fault(p.kind)) return false;
    return true;
  }
  // Nothing left to fix: no fault, or every fault repaired.
  bool resolved() const noexcept {
    for (const Problem& p : problems)
      if (is_fault(p.kind) && !p.repaired) return false;
    return true;
  }
};

// Checks every entry fully (as a load would, plus file name == content address)
// and reports anything else found under the directory. Never throws except bad_alloc.
// An entry a load refuses only for its format version is outdated (older,
// every other check passed) or newer_format (newer; a "newer" version field
// on an entry that reads as this library's own, same layout and version, is
// corrupt: a damaged field); every other refusal is corrupt.
// Applies the runtime's trust rules: under Ownership::private_only a refused
// root, entries/ or quarantine/ is one untrusted problem (the entries are not
// read: the runtime would not use them), a refused or linked shard folder is
// untrusted, an entry owned by another user is corrupt.
VerifyReport verify_all(const std::filesystem::path& dir, VerifyAction action = VerifyAction::report,
                        Ownership ownership = Ownership::private_only);

struct PruneOptions {
  std::optional<std::uint64_t> max_bytes;         // keep the most recently used entries within this total
  std::optional<std::chrono::seconds> older_than;  // remove entries not used for this long
  std::chrono::seconds temp_max_age{600};          // temp debris (and orphan stamps/locks) older than this is removed
  // Quarantined files older than this are removed (they are never read again;
  // kept a while so that a bad entry can be looked at).
  std::chrono::seconds quarantine_max_age{kDefaultQuarantineMaxAge};
  std::optional<Hash128> keep;                     // never evicted (the entry just published by the caller)
  bool dry_run = false;                            // report what would be removed, remove nothing
};

struct PruneReport {
  std::size_t removed_entries = 0, kept_entries = 0, skipped_locked = 0, removed_temp = 0;
  std::uint64_t removed_bytes = 0, kept_bytes = 0;  // entries
  std::size_t removed_quarantined = 0, kept_quarantined = 0;
  std::uint64_t removed_quarantine_bytes = 0, kept_quarantine_bytes = 0;
  std::size_t removed_folders = 0;  // empty shard folders
};

// Accounts for everything the cache stores: entries and quarantined files.
// Removes quarantined files older than quarantine_max_age, then, while the
// total exceeds max_bytes, quarantined files (oldest first) before entries;
// evicts least-recently-used entries (by the .used stamp the cache records on
// every load, nanosecond mtime; not atime) until the rest fits in max_bytes,
// and entries unused for longer than older_than; removes empty shard folders. Takes each victim's lock
// exclusively without waiting and skips it when busy (a process reading it
// holds the lock shared, a publisher exclusively). Scans with stat() only (no
// entry is read), so the Runtime runs it after every publish when a cap is set
// (RuntimeOptions::max_cache_bytes, MOEJIT_CACHE_MAX_BYTES); `moejit-cache
// prune` calls the same function. Lock files of evicted entries are kept (a
// waiter may hold the inode); orphan stamps and locks go with temp debris by
// age. Never throws except bad_alloc.
PruneReport prune(const std::filesystem::path& dir, const PruneOptions& options);

// Removes temp files of interrupted publishes ("*.tmp.*" directly under <dir>
// and under <dir>/entries/<shard>/) whose mtime is older than max_age. Returns
// how many were removed. Called by the Runtime when it opens a directory, by
// prune and by verify --repair. Never throws except bad_alloc.
std::size_t sweep_temp_files(const std::filesystem::path& dir, std::chrono::seconds max_age);

struct ClearReport {
  std::size_t entries = 0, stamps = 0, locks = 0, temp_files = 0, quarantined = 0, foreign = 0, folders = 0;
  std::uint64_t entry_bytes = 0, quarantine_bytes = 0, foreign_bytes = 0, other_bytes = 0;
  std::size_t failed = 0;  // files that could not be removed
  std::size_t files() const noexcept { return entries + stamps + locks + temp_files + quarantined + foreign; }
  std::uint64_t bytes() const noexcept { return entry_bytes + quarantine_bytes + foreign_bytes + other_bytes; }
};
// Removes everything under entries/ and quarantine/ (entries, stamps, locks,
// temp files, quarantined files, and files the cache did not write, counted
// apart as foreign), the shard folders, and resets the statistics. Only what
// was actually removed is counted. Never throws except bad_alloc.
ClearReport clear(const std::filesystem::path& dir);

// Stat-only (no entry is read): entries are "<hex>.entry" files in their shard folder.
struct CacheSummary {
  std::size_t entries = 0;
  std::uint64_t entry_bytes = 0;
  std::size_t quarantined_files = 0;
  std::uint64_t quarantine_bytes = 0;
  Stats recorded;  // the persisted counters from stats.json (moejit/stats.hpp)
  std::string to_json() const;
};
CacheSummary summarize(const std::filesystem::path& dir);

}  // namespace moejit::cache
