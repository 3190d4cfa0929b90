#include "cache/cache_admin.hpp"

#include <sys/stat.h>
#include <ctime>
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

bool is_shard_dir(const fs::path& p) {
  const std::string name = p.filename().string();
  std::error_code ec;
  return name.size() == 2 && is_hex(name) && fs::is_directory(fs::symlink_status(p, ec));
}

// The "<hex>.entry" files of real shard folders: (address, path).
std::vector<std::pair<Hash128, fs::path>> entry_files(const fs::path& dir) {
  std::vector<std::pair<Hash128, fs::path>> out;
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    if (!is_shard_dir(sub)) return;
    const std::string shard = sub.filename().string();
    for_each_child(sub, [&](const fs::path& p) {
      const std::string name = p.filename().string();
      auto parsed = parse_name(name);
      if (parsed && parsed->second == "entry" && name.compare(0, 2, shard) == 0) out.emplace_back(parsed->first, p);
    });
  });
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return out;
}

EntryInfo info_of(const DiskCache& dc, const fs::path& path, const Hash128& address, const std::string& refused) {
  EntryInfo info;
  info.address = address;
  info.path = path;
  info.file_bytes = size_of(path);
  if (!refused.empty()) {
    info.problem = "cache directory refused: " + refused;
  } else {
    EntryCheck c = dc.inspect(address);
    if (!c.found) info.problem = "vanished while listing";
    else if (!c.entry) info.problem = c.problem;
    else {
      info.cubin_bytes = c.entry->cubin.size();
      info.header = std::move(c.entry->header);
    }
  }
  fs::path stamp = path;
  stamp.replace_extension(".used");
  info.last_used_unix = mtime_of(stamp);
  if (info.last_used_unix == 0) info.last_used_unix = mtime_of(path);
  return info;
}

}  // namespace

std::vector<EntryInfo> list_entries(const fs::path& dir, Ownership ownership) {
  std::vector<EntryInfo> out;
  const DiskCache dc(dir, ownership);
  // Why the whole layout: the runtime refuses the directory on any of it, so no
  // entry of it may be listed as valid.
  const std::string refused = layout_trust_problem(dir, ownership);
  for (const auto& [address, path] : entry_files(dir)) out.push_back(info_of(dc, path, address, refused));
  return out;
}

Entry read_entry(const fs::path& dir, std::string_view hex_prefix, Ownership ownership) {
  if (hex_prefix.empty() || hex_prefix.size() > 32 || !is_hex(hex_prefix))
    throw InvalidArgument("entry id '" + std::string(hex_prefix) + "' is not 1-32 lowercase hex digits");
  std::vector<std::pair<Hash128, fs::path>> matches;
  for (auto& e : entry_files(dir)) {
    char hex[33];
    hash_hex(e.first, hex);
    if (std::string_view(hex).substr(0, hex_prefix.size()) == hex_prefix) matches.push_back(std::move(e));
  }
  if (matches.empty())
    throw InvalidArgument("no cache entry id starts with '" + std::string(hex_prefix) + "' in " + dir.string());
  if (matches.size() > 1) {
    // One line (the tools print one): the first 8 matching ids, then a count.
    std::string list;
    for (std::size_t i = 0; i < matches.size() && i < 8; ++i)
      list += (i ? ", " : " ") + matches[i].second.stem().string();
    if (matches.size() > 8) list += ", and " + std::to_string(matches.size() - 8) + " more";
    throw InvalidArgument("entry id '" + std::string(hex_prefix) + "' is ambiguous; it matches" + list +
                          " (give more digits)");
  }
  const fs::path& path = matches[0].second;
  if (std::string why = layout_trust_problem(dir, ownership); !why.empty())
    throw Error("cache entry " + path.string() + " is not used: cache directory refused: " + why);
  EntryCheck c = DiskCache(dir, ownership).inspect(matches[0].first);
  if (!c.found) throw Error("cache entry " + path.string() + " vanished while reading");
  if (!c.entry) throw Error("cache entry " + path.string() + " is corrupt: " + c.problem);
  return std::move(*c.entry);
}

std::string_view to_string(ProblemKind k) {
  switch (k) {
    case ProblemKind::corrupt: return "corrupt";
    case ProblemKind::foreign: return "foreign";
    case ProblemKind::temp_debris: return "temp_debris";
    case ProblemKind::untrusted: return "untrusted";
    case ProblemKind::outdated: return "outdated";
    case ProblemKind::newer_format: return "newer_format";
  }
  return "unknown";
}

namespace {

// What verify reports for one entry file that is there: nothing (ok), or a
// problem of kind corrupt, outdated or newer_format with its message.
struct EntryVerdict {
  bool ok = false;
  ProblemKind kind = ProblemKind::corrupt;
  std::string message;
};

EntryVerdict verdict_of(const EntryCheck& c) {
  const std::uint32_t v = c.format_version;
  if (c.entry && v == kEntryFormatVersion) return {true, {}, {}};
  if (v >= kOldestEntryFormatVersion && v < kEntryFormatVersion) {
    // Same layout as this version: a failed check is damage, not the version.
    if (!c.entry) return {false, ProblemKind::corrupt, "format version " + std::to_string(v) + " entry: " + c.problem};
    return {false, ProblemKind::outdated,
            format_version_problem(v) + "; intact but superseded: a load treats it as a miss, moves it to "
                                        "quarantine and compiles its kernel again"};
  }
  if (v > kEntryFormatVersion && v <= kLargestPlausibleEntryFormatVersion) {
    // Why the layout check: a newer moejit writes its own library version into
    // the header; this library's version there means a damaged version field.
    if (c.entry && c.entry->header.payload.moejit_version == library_version())
      return {false, ProblemKind::corrupt,
              format_version_problem(v) + ", but the rest reads as an entry of this library (moejit " +
                  std::string(library_version()) + "): a damaged version field"};
    return {false, ProblemKind::newer_format,
            format_version_problem(v) + ": written by a newer moejit that shares this directory (this library "
                                        "never looks it up)"};
  }
  if (v == 0 && !c.entry) return {false, ProblemKind::corrupt, c.problem};  // bad magic, or damage
  // Version 0 or a version field above any plausible version: no moejit writes it.
  return {false, ProblemKind::corrupt,
          "format version " + std::to_string(v) + " is no version a moejit writes" + (c.entry ? "" : "; " + c.problem)};
}

}  // namespace

VerifyReport verify_all(const fs::path& dir, VerifyAction action, Ownership ownership) {
  VerifyReport report;
  DiskCache dc(dir, ownership);
  const auto now = std::time(nullptr);
  const bool repair = action == VerifyAction::repair;
  auto problem = [&](const fs::path& p, ProblemKind kind, std::string msg) {
    bool repaired = false;
    if (repair) {
      if (kind == ProblemKind::newer_format) {
        msg += " (kept: the newer moejit that wrote it uses it)";
      } else if (kind == ProblemKind::temp_debris) {
        const auto age = now - mtime_of(p);
        if (age > kDefaultTempMaxAge.count()) {
          std::error_code ec;
          repaired = fs::remove(p, ec);
          msg += repaired ? " (removed)" : " (kept: cannot remove it: " + ec.message() + ")";
        } else {
          msg += " (kept: " + std::to_string(std::max<std::int64_t>(age, 0)) + " s old, younger than the " +
                 std::to_string(kDefaultTempMaxAge.count()) + " s sweep age: it may be a publish in progress)";
        }
      } else {
        // Why no log line from quarantine(): this report prints each problem once.
        fs::path q = dc.quarantine(p, msg, /*log=*/false);
        std::error_code ec;
        if (!q.empty()) {
          repaired = true;
          ++report.quarantined;
          msg += " (moved to " + q.string() + ")";
        } else if (!fs::exists(fs::symlink_status(p, ec))) {
          repaired = true;
          msg += " (removed)";
        } else {
          msg += " (kept: cannot move it to quarantine)";
        }
      }
    }
    report.problems.push_back({p, kind, std::move(msg), repaired});
  };
  auto is_temp = [](const std::string& name) { return name.find(kTempMarker) != std::string::npos; };
  auto finish = [&] {
    std::sort(report.problems.begin(), report.problems.end(),
              [](const Problem& a, const Problem& b) { return a.path < b.path; });
    // Why: `stats` must agree with what was moved aside (its "quarantined" counter).
    if (report.quarantined > 0) {
      Stats d;
      d.quarantined = report.quarantined;
      add_stats(dir, d);
    }
    return report;
  };

  // The folders the runtime checks before it uses the directory. A refused
  // root, entries/ or quarantine/ is the owner's to fix (chmod / chown): kept.
  {
    std::string refused;
    fs::path where = dir;
    if (ownership == Ownership::private_only) refused = directory_trust_problem(dir);
    for (const char* sub : {"entries", "quarantine"}) {
      struct stat st{};
      if (!refused.empty() || ::lstat((dir / sub).c_str(), &st) != 0) continue;
      refused = folder_trust_problem(st, ownership);
      where = dir / sub;
    }
    if (!refused.empty()) {
      report.problems.push_back({where, ProblemKind::untrusted,
                                 refused + "; the runtime does not use this cache directory (its entries were not "
                                           "checked; set MOEJIT_CACHE_ALLOW_SHARED=1 to share it on purpose)",
                                 false});
      return finish();
    }
  }

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
    struct stat sst{};
    const bool named = sub_name.size() == 2 && is_hex(sub_name);
    if (::lstat(sub.c_str(), &sst) != 0) return;
    if (named && (S_ISLNK(sst.st_mode) || S_ISDIR(sst.st_mode))) {
      if (std::string why = folder_trust_problem(sst, ownership); !why.empty())
        return problem(sub, ProblemKind::untrusted, "shard folder refused: " + why);
    }
    if (!named || !S_ISDIR(sst.st_mode)) {
      problem(sub, ProblemKind::foreign, "not a moejit shard folder (entries/<2 hex>/)");
      return;
    }
    for_each_child(sub, [&](const fs::path& p) {
      const std::string name = p.filename().string();
      std::error_code ec;
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
      const EntryCheck c = dc.inspect(parsed->first, FormatVersions::any);
      if (!c.found) return;  // removed meanwhile
      EntryVerdict verdict = verdict_of(c);
      if (!verdict.ok) return problem(p, verdict.kind, std::move(verdict.message));
      ++report.entries_ok;
    });
  });
  return finish();
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
    if (!is_shard_dir(sub)) return;
    const std::string shard = sub.filename().string();
    for_each_child(sub, [&](const fs::path& p) {
      const std::string name = p.filename().string();
      auto parsed = parse_name(name);
      if (!parsed || parsed->second != "entry" || name.compare(0, 2, shard) != 0) return;
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
    if (is_shard_dir(sub)) for_each_child(sub, sweep);
  });
  return removed;
}

PruneReport prune(const fs::path& dir, const PruneOptions& options) {
  PruneReport r;
  DiskCache dc(dir);
  const std::int64_t now_ns = static_cast<std::int64_t>(std::time(nullptr)) * 1000000000;
  const std::int64_t now = now_ns / 1000000000;
  const bool dry = options.dry_run;

  // Quarantined files: never read again; removed by age, then first when over the cap.
  struct Quarantined {
    fs::path path;
    std::uint64_t bytes = 0;
    std::int64_t mtime_ns = 0;
  };
  std::vector<Quarantined> quarantined;
  for_each_child(dir / "quarantine", [&](const fs::path& p) {
    std::error_code ec;
    std::uint64_t bytes = 0;
    if (fs::is_directory(fs::symlink_status(p, ec))) {  // a shard folder moved aside
      for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
        if (!it->is_directory(ec)) bytes += size_of(it->path());
    } else {
      bytes = size_of(p);
    }
    quarantined.push_back({p, bytes, mtime_ns_of(p)});
  });
  std::sort(quarantined.begin(), quarantined.end(),
            [](const Quarantined& a, const Quarantined& b) { return a.mtime_ns < b.mtime_ns; });  // oldest first
  auto remove_quarantined = [&](const Quarantined& q) {
    std::error_code ec;
    if (!dry && fs::remove_all(q.path, ec) == 0) return false;
    ++r.removed_quarantined;
    r.removed_quarantine_bytes += q.bytes;
    return true;
  };
  std::vector<Quarantined> kept_q;
  for (const Quarantined& q : quarantined) {
    const bool too_old = now_ns - q.mtime_ns > std::int64_t{options.quarantine_max_age.count()} * 1000000000;
    if (too_old && remove_quarantined(q)) continue;
    kept_q.push_back(q);
  }
  std::uint64_t quarantine_total = 0;
  for (const Quarantined& q : kept_q) quarantine_total += q.bytes;

  std::vector<Candidate> entries = scan_entries(dir);
  std::uint64_t entry_total = 0;
  for (const Candidate& e : entries) entry_total += e.bytes;
  // Over the cap: quarantined files go before any entry.
  for (const Quarantined& q : kept_q) {
    if (options.max_bytes && quarantine_total + entry_total > *options.max_bytes && remove_quarantined(q)) {
      quarantine_total -= q.bytes;
      continue;
    }
    ++r.kept_quarantined;
    r.kept_quarantine_bytes += q.bytes;
  }

  // Most recently used first: the prefix within max_bytes is kept.
  std::sort(entries.begin(), entries.end(),
            [](const Candidate& a, const Candidate& b) { return a.last_used_ns > b.last_used_ns; });
  if (options.keep) {
    auto it = std::find_if(entries.begin(), entries.end(), [&](const Candidate& c) { return c.address == *options.keep; });
    if (it != entries.end()) std::rotate(entries.begin(), it, it + 1);
  }
  std::uint64_t total = quarantine_total;
  auto remove_entry = [&](const Candidate& e) {
    // Why skip when we cannot lock at once: a reader holds it shared (loading
    // this entry now) or a publisher exclusively (writing it); evicting now
    // would only make it compile again.
    FileLock lock = FileLock::try_acquire(dc.lock_path(e.address));
    if (!lock.locked()) {
      ++r.skipped_locked;
      return false;
    }
    if (!dry) {
      if (::unlink(e.path.c_str()) != 0) return false;
      std::error_code ec;
      fs::remove(dc.stamp_path(e.address), ec);
    }
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
  if (dry) return r;
  // Temp debris and orphan stamps/locks (no entry) older than temp_max_age.
  r.removed_temp = sweep_temp_files(dir, options.temp_max_age);
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    if (!is_shard_dir(sub)) return;
    for_each_child(sub, [&](const fs::path& p) {
      auto parsed = parse_name(p.filename().string());
      bool orphan = parsed && parsed->second != "entry" && !fs::exists(dc.entry_path(parsed->first));
      if (orphan && now - mtime_of(p) > options.temp_max_age.count()) {
        std::error_code ec;
        fs::remove(p, ec);
      }
    });
    // Empty shard folders: rmdir() fails on a non-empty one, so a concurrent
    // publish either finds its folder or recreates it (DiskCache::publish retries).
    if (options.keep && sub.filename().string() == options.keep->hex().substr(0, 2)) return;
    if (::rmdir(sub.c_str()) == 0) ++r.removed_folders;
  });
  return r;
}

ClearReport clear(const fs::path& dir) {
  ClearReport r;
  auto remove_file = [&](const fs::path& p) {
    if (::unlink(p.c_str()) == 0) return true;
    ++r.failed;
    return false;
  };
  auto remove_tree = [&](const fs::path& p, std::size_t& count, std::uint64_t& bytes) {
    std::error_code ec;
    std::size_t n = 0;
    std::uint64_t b = 0;
    if (fs::is_directory(fs::symlink_status(p, ec))) {
      for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
        if (!it->is_directory(ec)) ++n, b += size_of(it->path());
    } else {
      n = 1;
      b = size_of(p);
    }
    if (fs::remove_all(p, ec) == 0 || ec) {
      ++r.failed;
      return;
    }
    count += n;
    bytes += b;
  };
  for_each_child(dir / "entries", [&](const fs::path& sub) {
    if (!is_shard_dir(sub)) return remove_tree(sub, r.foreign, r.foreign_bytes);
    const std::string shard = sub.filename().string();
    for_each_child(sub, [&](const fs::path& p) {
      const std::string name = p.filename().string();
      const std::uint64_t bytes = size_of(p);
      std::error_code ec;
      const bool regular = fs::is_regular_file(fs::symlink_status(p, ec));
      auto parsed = parse_name(name);
      const bool ours = regular && name.compare(0, 2, shard) == 0;
      if (ours && is_temp_name(name)) {
        if (remove_file(p)) ++r.temp_files, r.other_bytes += bytes;
      } else if (ours && parsed && parsed->second == "entry") {
        if (remove_file(p)) ++r.entries, r.entry_bytes += bytes;
      } else if (ours && parsed && parsed->second == "used") {
        if (remove_file(p)) ++r.stamps, r.other_bytes += bytes;
      } else if (ours && parsed && parsed->second == "lock") {
        if (remove_file(p)) ++r.locks, r.other_bytes += bytes;
      } else {
        remove_tree(p, r.foreign, r.foreign_bytes);
      }
    });
    if (::rmdir(sub.c_str()) == 0) ++r.folders;
  });
  for_each_child(dir / "quarantine", [&](const fs::path& p) { remove_tree(p, r.quarantined, r.quarantine_bytes); });
  reset_stats(dir);
  return r;
}

CacheSummary summarize(const fs::path& dir) {
  CacheSummary s;
  for (const Candidate& e : scan_entries(dir)) {
    ++s.entries;
    s.entry_bytes += e.bytes;
  }
  for_each_child(dir / "quarantine", [&](const fs::path& p) {
    ++s.quarantined_files;
    s.quarantine_bytes += size_of(p);
  });
  s.recorded = read_stats(dir);
  return s;
}

std::string CacheSummary::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(persisted_json(recorded));
  j["entries"] = entries;
  j["entry_bytes"] = entry_bytes;
  j["quarantined_files"] = quarantined_files;
  j["quarantine_bytes"] = quarantine_bytes;
  return j.dump(2) + "\n";
}

}  // namespace moejit::cache
