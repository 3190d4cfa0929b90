#include "cache/cache_stats.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

#include "cache/atomic_file.hpp"
#include "cache/file_lock.hpp"

namespace moejit::cache {
namespace fs = std::filesystem;

namespace {
// The persisted part of a delta: what stats.json sums.
Stats persisted_part(const Stats& d) {
  Stats p;
  for (StatId id : kAllStats)
    if (is_persisted(id)) p[id] = d[id];
  p.compile_ms_total = d.compile_ms_total;
  return p;
}
}  // namespace

std::string persisted_json(const Stats& s) {
  nlohmann::ordered_json j = {{"format", 1}};
  for (StatId id : kAllStats)
    if (is_persisted(id)) j[std::string(to_string(id))] = s[id];
  j[std::string(kCompileMsTotalId)] = s.compile_ms_total;
  return j.dump(2) + "\n";
}

Stats read_stats(const fs::path& dir) noexcept {
  Stats s;
  try {
    ReadResult f = read_regular_file(dir / "stats.json", 1 << 20);
    if (f.status != ReadStatus::ok) return s;
    auto j = nlohmann::json::parse(f.bytes, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return s;
    for (StatId id : kAllStats) {
      if (!is_persisted(id)) continue;
      if (auto it = j.find(std::string(to_string(id))); it != j.end() && it->is_number_unsigned())
        s[id] = it->get<std::uint64_t>();
    }
    if (auto it = j.find(std::string(kCompileMsTotalId)); it != j.end() && it->is_number())
      s.compile_ms_total = it->get<double>();
  } catch (...) {
  }
  return s;
}

namespace {
bool write_stats(const fs::path& dir, const Stats& s) {
  AtomicFile f(dir / "stats.json", Durability::none);
  f.write(persisted_json(s));
  f.commit();
  return true;
}
}  // namespace

bool add_stats(const fs::path& dir, const Stats& delta_all) noexcept {
  const Stats delta = persisted_part(delta_all);
  if (delta.empty()) return true;
  try {
    // Why a timeout: a counter is not worth stalling a server; without the lock
    // an update may be lost, which only skews statistics.
    FileLock lock = FileLock::acquire(dir / "stats.lock", std::chrono::milliseconds(2000));
    Stats s = read_stats(dir);
    s += delta;
    return write_stats(dir, s);
  } catch (...) {
    return false;
  }
}

bool reset_stats(const fs::path& dir) noexcept {
  try {
    FileLock lock = FileLock::acquire(dir / "stats.lock", std::chrono::milliseconds(2000));
    return write_stats(dir, Stats{});
  } catch (...) {
    return false;
  }
}

bool record_nvrtc_version(const fs::path& dir, const std::string& version) noexcept {
  try {
    if (read_recorded_nvrtc_version(dir) == version) return true;
    AtomicFile f(dir / "nvrtc_version", Durability::none);
    f.write(version + "\n");
    f.commit();
    return true;
  } catch (...) {
    return false;
  }
}

std::optional<std::string> read_recorded_nvrtc_version(const fs::path& dir) noexcept {
  try {
    ReadResult f = read_regular_file(dir / "nvrtc_version", 64);
    if (f.status != ReadStatus::ok) return std::nullopt;
    std::string v = f.bytes;
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
    if (v.empty() || v.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace moejit::cache
