#pragma once
// Persistent counters of a cache directory, in <dir>/stats.json, updated under
// flock(<dir>/stats.lock) by read-add-write (AtomicFile, no fsync: a counter
// update lost at a crash is acceptable). Processes add deltas in batches.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace moejit::cache {

// Stable numeric ids (the JSON keys are the names below); add, never renumber.
struct PersistentStats {
  std::uint64_t disk_hits = 0;         // lookups served by a verified disk entry
  std::uint64_t disk_misses = 0;       // lookups that found no valid entry on disk
  std::uint64_t compiles = 0;          // successful NVRTC compiles
  std::uint64_t compile_failures = 0;  // NVRTC rejections
  std::uint64_t quarantined = 0;       // bad entries moved aside
  std::uint64_t misses_after_seal = 0;
  std::uint64_t publish_failures = 0;  // compiled but could not be written to disk
  double compile_ms_total = 0.0;

  bool empty() const noexcept;
  PersistentStats& operator+=(const PersistentStats& d) noexcept;
  std::string to_json() const;  // one JSON object, the fields above plus "format": 1
};

// Reads <dir>/stats.json; zeros when absent or unreadable (never throws).
PersistentStats read_stats(const std::filesystem::path& dir) noexcept;

// Adds `delta` to <dir>/stats.json under the stats lock. Returns false (and
// changes nothing) when the directory is not writable. Never throws.
bool add_stats(const std::filesystem::path& dir, const PersistentStats& delta) noexcept;

// Resets the counters to zero. Never throws; false when not writable.
bool reset_stats(const std::filesystem::path& dir) noexcept;

// <dir>/nvrtc_version: the NVRTC version ("13.0") of the last process that
// published into the directory. Lets a process without libnvrtc compute the
// content addresses of the entries it may load (Runtime, docs/cache-format.md).
// record: never throws, false when not writable; read: nullopt when absent or malformed.
bool record_nvrtc_version(const std::filesystem::path& dir, const std::string& version) noexcept;
std::optional<std::string> read_recorded_nvrtc_version(const std::filesystem::path& dir) noexcept;

}  // namespace moejit::cache
