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

struct EntryInfo {
  Hash128 address;
  std::filesystem::path path;
  std::uint64_t file_bytes = 0;
  std::optional<EntryHeader> header;  // nullopt when the prefix/header does not decode
  std::uint64_t cubin_bytes = 0;
  std::string problem;                // why header is nullopt ("" otherwise); the body is not verified
  std::int64_t last_used_unix = 0;    // mtime of the .used stamp, else of the entry
};

// Every "<hex>.entry" under <dir>/entries, sorted by address. Reads headers only.
// A missing directory gives an empty list. Never throws except bad_alloc.
std::vector<EntryInfo> list_entries(const std::filesystem::path& dir);

// The entry whose address starts with `hex_prefix` (1-32 lowercase hex digits),
// fully verified. Throws InvalidArgument when the prefix is not hex, matches no
// entry, or matches several (the message lists them); Error when the entry is
// corrupt (the message names the file and the reason).
Entry read_entry(const std::filesystem::path& dir, std::string_view hex_prefix);

enum class ProblemKind : std::uint8_t {
  corrupt,      // an entry that fails verification (reason in message)
  foreign,      // a file or folder the cache did not write
  temp_debris,  // a leftover temp file of an interrupted publish
};
std::string_view to_string(ProblemKind);

struct Problem {
  std::filesystem::path path;
  ProblemKind kind = ProblemKind::corrupt;
  std::string message;
};

enum class VerifyAction : std::uint8_t {
  report,  // change nothing
  repair,  // quarantine corrupt entries and foreign files under entries/, remove temp debris older than kDefaultTempMaxAge
};

struct VerifyReport {
  std::size_t entries_ok = 0;
  std::vector<Problem> problems;
  bool clean() const noexcept { return problems.empty(); }
};

// Checks every entry fully (as a load would, plus file name == content address)
// and reports anything else found under the directory. Never throws except bad_alloc.
// Entries owned by another user are corrupt under Ownership::private_only.
VerifyReport verify_all(const std::filesystem::path& dir, VerifyAction action = VerifyAction::report,
                        Ownership ownership = Ownership::private_only);

struct PruneOptions {
  std::optional<std::uint64_t> max_bytes;         // keep the most recently used entries within this total
  std::optional<std::chrono::seconds> older_than;  // remove entries not used for this long
  std::chrono::seconds temp_max_age{600};          // temp debris (and orphan stamps/locks) older than this is removed
  std::optional<Hash128> keep;                     // never evicted (the entry just published by the caller)
};

struct PruneReport {
  std::size_t removed_entries = 0, kept_entries = 0, skipped_locked = 0, removed_temp = 0;
  std::uint64_t removed_bytes = 0, kept_bytes = 0;
};

// Evicts least-recently-used entries (by the .used stamp the cache records on
// every load, nanosecond mtime; not atime) until the rest fits in max_bytes,
// and entries unused for longer than older_than. Takes each victim's lock
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
  std::size_t removed_files = 0;
  std::uint64_t removed_bytes = 0;
};
// Removes every entry, stamp, lock, temp file and quarantined file, and resets
// the statistics. Never throws except bad_alloc.
ClearReport clear(const std::filesystem::path& dir);

struct CacheSummary {
  std::size_t entries = 0;
  std::uint64_t entry_bytes = 0;
  std::size_t quarantined_files = 0;
  std::uint64_t quarantine_bytes = 0;
  PersistentStats recorded;  // counters from stats.json
  std::string to_json() const;
};
CacheSummary summarize(const std::filesystem::path& dir);

}  // namespace moejit::cache
