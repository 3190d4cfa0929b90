#pragma once
// Persistent counters of a cache directory, in <dir>/stats.json, updated under
// flock(<dir>/stats.lock) by read-add-write (AtomicFile, no fsync: a counter
// update lost at a crash is acceptable). Processes add deltas in batches.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "moejit/stats.hpp"

namespace moejit::cache {

// The persisted counters of a Stats (moejit/stats.hpp, is_persisted) and
// compile_ms_total as one JSON object keyed by their string ids, plus "format": 1.
std::string persisted_json(const Stats& s);

// Reads <dir>/stats.json; zeros when absent or unreadable (never throws).
// Only the persisted counters are read (the others stay 0).
Stats read_stats(const std::filesystem::path& dir) noexcept;

// Adds the persisted counters of `delta` to <dir>/stats.json under the stats
// lock. Returns false (and changes nothing) when the directory is not writable.
// Never throws.
bool add_stats(const std::filesystem::path& dir, const Stats& delta) noexcept;

// Resets the counters to zero. Never throws; false when not writable.
bool reset_stats(const std::filesystem::path& dir) noexcept;

// <dir>/nvrtc_version: the NVRTC version ("13.0") of the last process that
// published into the directory. Lets a process without libnvrtc compute the
// content addresses of the entries it may load (Runtime, docs/cache-format.md).
// record: never throws, false when not writable; read: nullopt when absent or malformed.
bool record_nvrtc_version(const std::filesystem::path& dir, const std::string& version) noexcept;
std::optional<std::string> read_recorded_nvrtc_version(const std::filesystem::path& dir) noexcept;

}  // namespace moejit::cache
