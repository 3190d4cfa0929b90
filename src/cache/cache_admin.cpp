#include "cache/cache_admin.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cache/atomic_file.hpp"
#include "cache/disk_cache.hpp"
#include "cache/file_lock.hpp"
#include "moejit/error.hpp"

namespace moejit::cache {
namespace fs = std::filesystem;

namespace {

bool is_hex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::int64_t mtime_of(const fs::path& p) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec);
}

std::uint64_t size_of(const fs::path& p) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

// Parses "<32hex>.<ext>"; the address and the extension.
std::optional<std::pair<Hash128, std::string>> parse_name(const std::string& name) {
  if (name.size() < 34 || name[32] != '.') return std::nullopt;
  auto h = parse_hash_hex(std::string_view(name).substr(0, 32));
  if (!h) return std::nullopt;
  return std::make_pair(*h, name.substr(33));
}

template <class F>
void for_each_child(const fs::path& dir, F&& f) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) f(it->path());
}

EntryInfo info_of(const fs::path& path, const Hash128& address) {
  EntryInfo info;
  info.address = address;
  info.path = path;
  info.file_bytes = size_of(path);
  ReadResult f = read_regular_file(path, kMaxEntryBytes + (1 << 20));
  if (f.status != ReadStatus::ok) {
    info.problem = f.error.empty() ? "unreadable" : f.error;
  } else {
    DecodeResult d = decode_header_only(f.bytes, f.bytes.size());
    if (d.entry) {
      info.header = std::move(d.entry->header);
      std::uint32_t header_len = 0;
      for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(f.bytes[12 + static_cast<std::size_t>(i)]);
      info.cubin_bytes = info.file_bytes - kEntryPrefixBytes - header_len;
    } else {
      info.problem = d.error;
    }
  }
  fs::path stamp = path;
  stamp.replace_extension(".used");
  info.last_used_unix = mtime_of(stamp);
  if (info.last_used_unix == 0) info.last_used_unix = mtime_of(path);
  return info;
}

}  // namespace

std::vector<EntryInfo> list_entries(const fs::path& dir) {
  std::vector<EntryInfo> out;
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(sub, ec))) return;
    for_each_child(sub, [&](const fs::path& p) {
      auto parsed = parse_name(p.filename().string());
      if (parsed && parsed->second == "entry") out.push_back(info_of(p, parsed->first));
    });
  });
  std::sort(out.begin(), out.end(), [](const EntryInfo& a, const EntryInfo& b) { return a.path < b.path; });
  return out;
}

Entry read_entry(const fs::path& dir, std::string_view hex_prefix) {
  if (hex_prefix.empty() || hex_prefix.size() > 32 || !is_hex(hex_prefix))
    throw InvalidArgument("entry id '" + std::string(hex_prefix) + "' is not 1-32 lowercase hex digits");
  std::vector<EntryInfo> matches;
  for (auto& e : list_entries(dir)) {
    char hex[33];
    hash_hex(e.address, hex);
    if (std::string_view(hex).substr(0, hex_prefix.size()) == hex_prefix) matches.push_back(std::move(e));
  }
  if (matches.empty())
    throw InvalidArgument("no cache entry id starts with '" + std::string(hex_prefix) + "' in " + dir.string());
  if (matches.size() > 1) {
    // One line (the tools print one): the first 8 matching ids, then a count.
    std::string list;
    for (std::size_t i = 0; i < matches.size() && i < 8; ++i)
      list += (i ? ", " : " ") + matches[i].path.stem().string();
    if (matches.size() > 8) list += ", and " + std::to_string(matches.size() - 8) + " more";
    throw InvalidArgument("entry id '" + std::string(hex_prefix) + "' is ambiguous; it matches" + list +
                          " (give more digits)");
  }
  ReadResult f = read_regular_file(matches[0].path, kMaxEntryBytes + (1 << 20));
  if (f.status != ReadStatus::ok) throw Error("cannot read " + matches[0].path.string() + ": " + f.error);
  DecodeResult d = decode_entry(f.bytes);
  if (!d.entry) throw Error("cache entry " + matches[0].path.string() + " is corrupt: " + d.error);
  if (std::string why = check_entry(*d.entry, matches[0].address, nullptr); !why.empty())
    throw Error("cache entry " + matches[0].path.string() + " is corrupt: " + why);
  return std::move(*d.entry);
}

std::string_view to_string(ProblemKind k) {
  switch (k) {
    case ProblemKind::corrupt: return "corrupt";
    case ProblemKind::foreign: return "foreign";
    case ProblemKind::temp_debris: return "temp_debris";
  }
  return "unknown";
}

VerifyReport verify_all(const fs::path& dir, VerifyAction action, Ownership ownership) {
  VerifyReport report;
  DiskCache dc(dir, ownership);
  const auto now = std::time(nullptr);
  auto problem = [&](const fs::path& p, ProblemKind kind, std::string msg) {
    if (action == VerifyAction::repair) {
      if (kind == ProblemKind::temp_debris) {
        if (now - mtime_of(p) > kDefaultTempMaxAge.count()) {
          std::error_code ec;
          fs::remove(p, ec);
          msg += " (removed)";
        }
      } else {
        fs::path q = dc.quarantine(p, msg);
        if (!q.empty()) msg += " (moved to " + q.string() + ")";
      }
    }
    report.problems.push_back({p, kind, std::move(msg)});
  };
  auto is_temp = [](const std::string& name) { return name.find(kTempMarker) != std::string::npos; };

  for_each_child(dir, [&](const fs::path& p) {
    const std::string name = p.filename().string();
    if (name == "entries" || name == "quarantine" || name == "stats.json" || name == "stats.lock" ||
        name == "nvrtc_version")
      return;
    if (is_temp(name)) problem(p, ProblemKind::temp_debris, "leftover temp file of an interrupted write");
    else problem(p, ProblemKind::foreign, "not written by moejit");
  });
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    const std::string sub_name = sub.filename().string();
    std::error_code ec;
    if (sub_name.size() != 2 || !is_hex(sub_name) || !fs::is_directory(fs::symlink_status(sub, ec))) {
      problem(sub, ProblemKind::foreign, "not a moejit shard folder (entries/<2 hex>/)");
      return;
    }
    for_each_child(sub, [&](const fs::path& p) {
      const std::string name = p.filename().string();
      if (is_temp(name)) return problem(p, ProblemKind::temp_debris, "leftover temp file of an interrupted publish");
      auto parsed = parse_name(name);
      if (!parsed || name.compare(0, 2, sub_name) != 0 ||
          (parsed->second != "entry" && parsed->second != "lock" && parsed->second != "used"))
        return problem(p, ProblemKind::foreign, "not written by moejit");
      if (parsed->second != "entry") {
        if (!fs::is_regular_file(fs::symlink_status(p, ec)))
          problem(p, ProblemKind::foreign, "a stamp or lock that is not a regular file");
        return;
      }
      ReadResult f = read_regular_file(p, kMaxEntryBytes + (1 << 20));
      if (f.status != ReadStatus::ok) return problem(p, ProblemKind::corrupt, "unreadable: " + f.error);
      if (std::string why = owner_problem(f.uid, ownership); !why.empty())
        return problem(p, ProblemKind::corrupt, why);
      DecodeResult d = decode_entry(f.bytes);
      if (!d.entry) return problem(p, ProblemKind::corrupt, d.error);
      if (std::string why = check_entry(*d.entry, parsed->first, nullptr); !why.empty())
        return problem(p, ProblemKind::corrupt, why);
      ++report.entries_ok;
    });
  });
  std::sort(report.problems.begin(), report.problems.end(),
            [](const Problem& a, const Problem& b) { return a.path < b.path; });
  return report;
}

namespace {

std::int64_t mtime_ns_of(const fs::path& p) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

bool is_temp_name(const std::string& name) { return name.find(kTempMarker) != std::string::npos; }

struct Candidate {
  Hash128 address;
  fs::path path;
  std::uint64_t bytes = 0;
  std::int64_t last_used_ns = 0;
};

// stat()-only scan of the entries (no reads): size and last use.
std::vector<Candidate> scan_entries(const fs::path& dir) {
  std::vector<Candidate> out;
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(sub, ec))) return;
    for_each_child(sub, [&](const fs::path& p) {
      auto parsed = parse_name(p.filename().string());
      if (!parsed || parsed->second != "entry") return;
      Candidate c;
      c.address = parsed->first;
      c.path = p;
      c.bytes = size_of(p);
      fs::path stamp = p;
      stamp.replace_extension(".used");
      c.last_used_ns = mtime_ns_of(stamp);
      if (c.last_used_ns == 0) c.last_used_ns = mtime_ns_of(p);
      out.push_back(std::move(c));
    });
  });
  return out;
}

}  // namespace

std::size_t sweep_temp_files(const fs::path& dir, std::chrono::seconds max_age) {
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  std::size_t removed = 0;
  auto sweep = [&](const fs::path& p) {
    if (!is_temp_name(p.filename().string())) return;
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (now - static_cast<std::int64_t>(st.st_mtim.tv_sec) < max_age.count()) return;
    if (::unlink(p.c_str()) == 0) ++removed;
  };
  for_each_child(dir, sweep);
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    std::error_code ec;
    if (fs::is_directory(fs::symlink_status(sub, ec))) for_each_child(sub, sweep);
  });
  return removed;
}

PruneReport prune(const fs::path& dir, const PruneOptions& options) {
  PruneReport r;
  DiskCache dc(dir);
  const std::int64_t now_ns = static_cast<std::int64_t>(std::time(nullptr)) * 1000000000;
  std::vector<Candidate> entries = scan_entries(dir);
  // Most recently used first: the prefix within max_bytes is kept.
  std::sort(entries.begin(), entries.end(),
            [](const Candidate& a, const Candidate& b) { return a.last_used_ns > b.last_used_ns; });
  if (options.keep) {
    auto it = std::find_if(entries.begin(), entries.end(), [&](const Candidate& c) { return c.address == *options.keep; });
    if (it != entries.end()) std::rotate(entries.begin(), it, it + 1);
  }
  std::uint64_t total = 0;
  auto remove_entry = [&](const Candidate& e) {
    // Why skip when we cannot lock at once: a reader holds it shared (loading
    // this entry now) or a publisher exclusively (writing it); evicting now
    // would only make it compile again.
    FileLock lock = FileLock::try_acquire(dc.lock_path(e.address));
    if (!lock.locked()) {
      ++r.skipped_locked;
      return false;
    }
    if (::unlink(e.path.c_str()) != 0) return false;
    std::error_code ec;
    fs::remove(dc.stamp_path(e.address), ec);
    ++r.removed_entries;
    r.removed_bytes += e.bytes;
    return true;
  };
  for (const auto& e : entries) {
    const bool protected_entry = options.keep && e.address == *options.keep;
    const bool too_old =
        options.older_than && now_ns - e.last_used_ns > std::int64_t{options.older_than->count()} * 1000000000;
    const bool over = options.max_bytes && total + e.bytes > *options.max_bytes;
    if (!protected_entry && (too_old || over) && remove_entry(e)) continue;
    total += e.bytes;
    ++r.kept_entries;
    r.kept_bytes += e.bytes;
  }
  // Temp debris and orphan stamps/locks (no entry) older than temp_max_age.
  r.removed_temp = sweep_temp_files(dir, options.temp_max_age);
  const std::int64_t now = now_ns / 1000000000;
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    for_each_child(sub, [&](const fs::path& p) {
      auto parsed = parse_name(p.filename().string());
      bool orphan = parsed && parsed->second != "entry" && !fs::exists(dc.entry_path(parsed->first));
      if (orphan && now - mtime_of(p) > options.temp_max_age.count()) {
        std::error_code ec;
        fs::remove(p, ec);
      }
    });
  });
  return r;
}

ClearReport clear(const fs::path& dir) {
  ClearReport r;
  for (const char* sub : {"entries", "quarantine"}) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir / sub, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_directory(ec)) {
        ++r.removed_files;
        r.removed_bytes += size_of(it->path());
      }
    }
    for_each_child(dir / sub, [&](const fs::path& p) {
      std::error_code ec2;
      fs::remove_all(p, ec2);
    });
  }
  reset_stats(dir);
  return r;
}

CacheSummary summarize(const fs::path& dir) {
  CacheSummary s;
  for (const auto& e : list_entries(dir)) {
    ++s.entries;
    s.entry_bytes += e.file_bytes;
  }
  for_each_child(dir / "quarantine", [&](const fs::path& p) {
    ++s.quarantined_files;
    s.quarantine_bytes += size_of(p);
  });
  s.recorded = read_stats(dir);
  return s;
}

std::string CacheSummary::to_json() const {
  nlohmann::json j = nlohmann::json::parse(recorded.to_json());
  j["entries"] = entries;
  j["entry_bytes"] = entry_bytes;
  j["quarantined_files"] = quarantined_files;
  j["quarantine_bytes"] = quarantine_bytes;
  return j.dump(2) + "\n";
}

}  // namespace moejit::cache
