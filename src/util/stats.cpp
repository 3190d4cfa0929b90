// moejit/stats.hpp: the statistics' ids and their arithmetic.
#include "moejit/stats.hpp"

namespace moejit {
namespace {

struct StatInfo {
  std::string_view id;
  std::string_view meaning;
  bool persisted;
  std::uint64_t Stats::*field;
};

// Indexed by the numeric id.
constexpr std::array<StatInfo, kStatCount> kInfo = {{
    {"memory_hits", "kernels found in the Runtime's memory", false, &Stats::memory_hits},
    {"disk_hits", "kernels loaded from a verified entry: the cache directory or the AOT pack", true,
     &Stats::disk_hits},
    {"pack_hits", "of disk_hits, those served by the AOT pack", true, &Stats::pack_hits},
    {"disk_misses", "lookups that found no valid entry in the pack or the directory (then compiled)", true,
     &Stats::disk_misses},
    {"compiles", "successful NVRTC compiles", true, &Stats::compiles},
    {"compile_failures", "NVRTC rejections of a generated kernel", true, &Stats::compile_failures},
    {"quarantined", "bad entries moved into quarantine/ (by a load or verify --repair)", true, &Stats::quarantined},
    {"misses_after_seal", "kernels requested after seal() that were not in memory", true, &Stats::misses_after_seal},
    {"module_loads", "cubins loaded into a CUDA context", false, &Stats::module_loads},
    {"evicted", "entries removed by the size cap after a publish", true, &Stats::evicted},
    {"publish_failures", "kernels compiled but not written to the cache directory (kept in memory)", true,
     &Stats::publish_failures},
}};

const StatInfo& info(StatId id) noexcept { return kInfo[static_cast<std::size_t>(id)]; }

}  // namespace

std::string_view to_string(StatId id) noexcept { return info(id).id; }
std::string_view describe(StatId id) noexcept { return info(id).meaning; }
bool is_persisted(StatId id) noexcept { return info(id).persisted; }

std::optional<StatId> parse_stat_id(std::string_view id) noexcept {
  for (StatId s : kAllStats)
    if (info(s).id == id) return s;
  return std::nullopt;
}

std::uint64_t& Stats::operator[](StatId id) noexcept { return this->*info(id).field; }
std::uint64_t Stats::operator[](StatId id) const noexcept { return this->*info(id).field; }

bool Stats::empty() const noexcept {
  for (StatId s : kAllStats)
    if ((*this)[s] != 0) return false;
  return compile_ms_total == 0.0;
}

Stats& Stats::operator+=(const Stats& d) noexcept {
  for (StatId s : kAllStats) (*this)[s] += d[s];
  compile_ms_total += d.compile_ms_total;
  return *this;
}

}  // namespace moejit
