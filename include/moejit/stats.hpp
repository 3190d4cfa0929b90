#pragma once
// moejit's statistics: one set of counters, each with a stable numeric id (its
// StatId value) and a stable string id (to_string(StatId): the field's name,
// the key in every JSON object and Python dict that holds it: Runtime::stats()
// in C++ and Python, <cache_dir>/stats.json, `moejit-cache stats --json`).
// Ids are added, never renumbered or renamed.
//
// A Runtime counts for its own lifetime (Runtime::stats()). A cache directory
// keeps the sums over every process that used it in stats.json for the
// persisted counters (is_persisted()); `moejit-cache stats` prints them.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moejit {

enum class StatId : std::uint8_t {
  memory_hits = 0,        // kernels found in the Runtime's memory (not persisted: the hot path)
  disk_hits = 1,          // kernels loaded from a verified entry: the cache directory or the AOT pack
  pack_hits = 2,          // of disk_hits, those served by the AOT pack
  disk_misses = 3,        // lookups that found no valid entry in the pack or the directory (then compiled)
  compiles = 4,           // successful NVRTC compiles
  compile_failures = 5,   // NVRTC rejections of a generated kernel
  quarantined = 6,        // bad entries moved into quarantine/ (by a load or `moejit-cache verify --repair`)
  misses_after_seal = 7,  // kernels requested after seal() that were not in memory
  module_loads = 8,       // cubins loaded into a CUDA context (not persisted)
  evicted = 9,            // entries removed by the size cap after a publish
  publish_failures = 10,  // kernels compiled but not written to the cache directory (kept in memory)
};
inline constexpr std::size_t kStatCount = 11;

// Every StatId in numeric order.
inline constexpr std::array<StatId, kStatCount> kAllStats = {
    StatId::memory_hits,      StatId::disk_hits,         StatId::pack_hits,    StatId::disk_misses,
    StatId::compiles,         StatId::compile_failures,  StatId::quarantined,  StatId::misses_after_seal,
    StatId::module_loads,     StatId::evicted,           StatId::publish_failures};

std::string_view to_string(StatId id) noexcept;                  // the string id: "disk_hits"
std::optional<StatId> parse_stat_id(std::string_view id) noexcept;  // nullopt for an unknown id
std::string_view describe(StatId id) noexcept;                   // one line, as in the comments above
bool is_persisted(StatId id) noexcept;                           // summed in <cache_dir>/stats.json

struct Stats {
  std::uint64_t memory_hits = 0, disk_hits = 0, pack_hits = 0, disk_misses = 0, compiles = 0;
  std::uint64_t compile_failures = 0, quarantined = 0, misses_after_seal = 0, module_loads = 0;
  std::uint64_t evicted = 0, publish_failures = 0;
  // Summed wall time of the compiles in milliseconds, each measured around its
  // own NVRTC call (parallel compiles: more than the elapsed time; not CPU
  // time). String id "compile_ms_total"; persisted.
  double compile_ms_total = 0.0;

  std::uint64_t& operator[](StatId id) noexcept;
  std::uint64_t operator[](StatId id) const noexcept;
  bool empty() const noexcept;  // every counter 0 and no compile time
  Stats& operator+=(const Stats& d) noexcept;
  friend bool operator==(const Stats&, const Stats&) = default;
};

// The string id of Stats::compile_ms_total.
inline constexpr std::string_view kCompileMsTotalId = "compile_ms_total";

}  // namespace moejit
