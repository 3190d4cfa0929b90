#pragma once
// The persistent cache directory (layout in docs/cache-format.md):
//   <dir>/entries/<hex[0:2]>/<hex>.entry   one compiled kernel (entry_format.hpp), 0600
//   <dir>/entries/<hex[0:2]>/<hex>.lock    flock target: one compile across processes
//   <dir>/entries/<hex[0:2]>/<hex>.used    last-use stamp (its mtime), for LRU pruning
//   <dir>/quarantine/<hex>.entry.<UTC time>.<pid>.<n>   entries found bad, moved aside
//   <dir>/stats.json, <dir>/stats.lock      persistent counters (cache_stats.hpp)
// Directories are created 0700, files 0600.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "cache/entry_format.hpp"
#include "cache/file_lock.hpp"
#include "cache/trust.hpp"

namespace moejit::cache {

enum class LoadStatus : unsigned char {
  hit,          // entry present and verified
  absent,       // no entry
  quarantined,  // entry present but bad: moved to quarantine/ (or removed), warning logged
};

struct [[nodiscard]] LoadResult {
  LoadStatus status = LoadStatus::absent;
  std::optional<Entry> entry;            // when hit
  std::string reason;                    // when quarantined: what was wrong
  std::filesystem::path quarantined_to;  // when quarantined: where it went (empty if removed)
};

// Problems of a decoded entry relative to its file name's address and (when
// given) the payload the caller expects; "" when none.
std::string check_entry(const Entry& entry, const Hash128& address, const AddressPayload* expected);

// Full verification of one entry without changing anything (what a load
// checks, except the comparison with an expected payload): for verify, ls,
// show, explain and export, so that no tool calls "ok" what a load would refuse.
struct EntryCheck {
  bool found = false;                    // something is at the entry's place
  std::optional<Entry> entry;            // found and valid
  std::string problem;                   // found and bad: why
  std::filesystem::path bad_path;        // found and bad: the entry file, or the refused folder above it
  bool bad_folder = false;               // bad_path is entries/ or the shard folder
  std::uint64_t dev = 0, ino = 0;        // identity of the entry file read (when it could be opened)
  // The entry's format version once its prefix was read with the right magic
  // (0 otherwise). Under FormatVersions::any, `entry` is also set for an entry
  // of another version that passes every other check: only verify asks.
  std::uint32_t format_version = 0;
};

class DiskCache {
 public:
  // Touches nothing on disk.
  explicit DiskCache(std::filesystem::path dir, Ownership ownership = Ownership::private_only);
  Ownership ownership() const noexcept { return ownership_; }

  // A read-only cache (a directory baked into an image, a read-only export):
  // loads serve its valid entries; nothing is ever written (no publish, no
  // quarantine, no last-use stamp). publish() then throws Error at once.
  void set_read_only(bool read_only) noexcept { read_only_ = read_only; }
  bool read_only() const noexcept { return read_only_; }

  const std::filesystem::path& dir() const noexcept { return dir_; }
  std::filesystem::path entries_dir() const { return dir_ / "entries"; }
  std::filesystem::path quarantine_dir() const { return dir_ / "quarantine"; }
  std::filesystem::path entry_path(const Hash128& address) const;
  std::filesystem::path lock_path(const Hash128& address) const;
  std::filesystem::path stamp_path(const Hash128& address) const;

  // Creates <dir>, entries/ and quarantine/ (0700). Throws Error naming the path.
  void ensure_layout() const;

  // Reads and fully verifies the entry at `address` (entry_reader.hpp: no link
  // followed below the root, folders and owner checked, sizes checked before
  // the body is read; then checksums, header grammar, payload address ==
  // address). Changes nothing. Never throws except bad_alloc. `versions`:
  // FormatVersions::any reads an entry of any format version with this
  // version's layout (verify: outdated or newer, or damaged); every reader
  // that uses the entry keeps the default.
  EntryCheck inspect(const Hash128& address, FormatVersions versions = FormatVersions::current) const;

  // Reads and verifies the entry at `address` (owner under Ownership::private_only,
  // magic, version, sizes, checksums, header grammar, payload == expected,
  // address of the payload == address). While reading it holds a shared flock
  // on the entry's lock file when it can get one at once, so that eviction
  // (which takes the lock exclusively, without waiting) skips it.
  // A bad entry is quarantined with one warning naming it (a refused shard
  // folder is moved to quarantine as a whole; in a read-only cache nothing is
  // moved, the warning says so). Never throws (except bad_alloc); an
  // unreadable entry is treated as bad.
  LoadResult load(const Hash128& address, const AddressPayload& expected) const;

  // Publishes atomically (AtomicFile, fsync) and creates the last-use stamp.
  // If an entry already exists it is replaced (both are verified equal in content
  // address; the newer bytes win). Throws Error (disk full, read-only, an
  // entry larger than kMaxEntryBytes, a shard folder that is a link or not trusted).
  void publish(const Hash128& address, const Entry& entry) const;

  // Exclusive per-entry lock, waiting at most `timeout`; unlocked on failure.
  FileLock lock_entry(const Hash128& address, std::chrono::milliseconds timeout) const;

  // Records a use now (mtime of the .used stamp; created if missing). Never throws.
  void touch(const Hash128& address) const noexcept;

  // Moves `path` into quarantine/ with a UTC timestamp suffix; removes it if the
  // move fails. Logs one warning naming the path and `reason` unless `log` is
  // false (verify prints its own line). Returns the new path (empty when
  // removed or already gone). Never throws.
  std::filesystem::path quarantine(const std::filesystem::path& path, std::string_view reason,
                                   bool log = true) const noexcept;

 private:
  LoadResult load_once(const Hash128& address, const AddressPayload& expected, bool may_retry) const;
  std::filesystem::path dir_;
  Ownership ownership_ = Ownership::private_only;
  bool read_only_ = false;
};

}  // namespace moejit::cache
