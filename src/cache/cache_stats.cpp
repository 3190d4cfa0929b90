#include "cache/cache_stats.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

#include "cache/atomic_file.hpp"
#include "cache/file_lock.hpp"

namespace moejit::cache {
namespace fs = std::filesystem;

bool PersistentStats::empty() const noexcept {
  return disk_hits == 0 && disk_misses == 0 && compiles == 0 && compile_failures == 0 && quarantined == 0 &&
         misses_after_seal == 0 && publish_failures == 0 && compile_ms_total == 0.0;
}

PersistentStats& PersistentStats::operator+=(const PersistentStats& d) noexcept {
  disk_hits += d.disk_hits;
  disk_misses += d.disk_misses;
  compiles += d.compiles;
  compile_failures += d.compile_failures;
  quarantined += d.quarantined;
  misses_after_seal += d.misses_after_seal;
  publish_failures += d.publish_failures;
  compile_ms_total += d.compile_ms_total;
  return *this;
}

std::string PersistentStats::to_json() const {
  nlohmann::json j = {{"format", 1},
                      {"disk_hits", disk_hits},
                      {"disk_misses", disk_misses},
                      {"compiles", compiles},
                      {"compile_failures", compile_failures},
                      {"quarantined", quarantined},
                      {"misses_after_seal", misses_after_seal},
                      {"publish_failures", publish_failures},
                      {"compile_ms_total", compile_ms_total}};
  return j.dump(2) + "\n";
}

PersistentStats read_stats(const fs::path& dir) noexcept {
  PersistentStats s;
  try {
    ReadResult f = read_regular_file(dir / "stats.json", 1 << 20);
    if (f.status != ReadStatus::ok) return s;
    auto j = nlohmann::json::parse(f.bytes, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return s;
    auto u = [&](const char* k, std::uint64_t& v) {
      if (auto it = j.find(k); it != j.end() && it->is_number_unsigned()) v = it->get<std::uint64_t>();
    };
    u("disk_hits", s.disk_hits);
    u("disk_misses", s.disk_misses);
    u("compiles", s.compiles);
    u("compile_failures", s.compile_failures);
    u("quarantined", s.quarantined);
    u("misses_after_seal", s.misses_after_seal);
    u("publish_failures", s.publish_failures);
    if (auto it = j.find("compile_ms_total"); it != j.end() && it->is_number()) s.compile_ms_total = it->get<double>();
  } catch (...) {
  }
  return s;
}

namespace {
bool write_stats(const fs::path& dir, const PersistentStats& s) {
  AtomicFile f(dir / "stats.json", Durability::none);
  f.write(s.to_json());
  f.commit();
  return true;
}
}  // namespace

bool add_stats(const fs::path& dir, const PersistentStats& delta) noexcept {
  if (delta.empty()) return true;
  try {
    // Why a timeout: a counter is not worth stalling a server; without the lock
    // an update may be lost, which only skews statistics.
    FileLock lock = FileLock::acquire(dir / "stats.lock", std::chrono::milliseconds(2000));
    PersistentStats s = read_stats(dir);
    s += delta;
    return write_stats(dir, s);
  } catch (...) {
    return false;
  }
}

bool reset_stats(const fs::path& dir) noexcept {
  try {
    FileLock lock = FileLock::acquire(dir / "stats.lock", std::chrono::milliseconds(2000));
    return write_stats(dir, PersistentStats{});
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
