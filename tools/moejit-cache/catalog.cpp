#include "catalog.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>
#include <system_error>

#include "cache/content_address.hpp"
#include "cache/disk_cache.hpp"
#include "prewarm/tool_support.hpp"

namespace moejit::tools {
namespace fs = std::filesystem;
namespace {

bool is_hex32(std::string_view s) {
  if (s.size() != 32) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

CatalogFile file_info(const fs::directory_entry& de, std::string note = {}) {
  std::error_code ec;
  CatalogFile f;
  f.path = de.path();
  f.bytes = de.is_regular_file(ec) ? de.file_size(ec) : 0;
  f.mtime = de.last_write_time(ec);
  f.note = std::move(note);
  return f;
}

void check_entry_file(CatalogEntry& e) {
  std::ifstream in(e.path, std::ios::binary);
  if (!in) {
    e.problem = "unreadable";
    return;
  }
  if (e.bytes > cache::kMaxEntryBytes) {
    e.problem = "larger than the " + format_bytes(cache::kMaxEntryBytes) + " entry limit";
    return;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  cache::DecodeResult d = cache::decode_entry(bytes);
  if (!d.entry) {
    e.problem = d.error.empty() ? "does not decode" : d.error;
    if (bytes.size() < cache::kEntryPrefixBytes) e.problem = "truncated (" + std::to_string(bytes.size()) + " bytes): " + e.problem;
    return;
  }
  const std::optional<Hash128> address = cache::parse_hash_hex(e.id);
  if (std::string why = cache::check_entry(*d.entry, *address, nullptr); !why.empty()) {
    e.problem = why;
    return;
  }
  e.entry = std::move(d.entry);
}

// entries/<xx>/: entries, their .lock/.used, temp files, foreign files.
void scan_bucket(const fs::path& bucket, Catalog& c) {
  std::error_code ec;
  const std::string prefix = bucket.filename().string();
  std::vector<fs::directory_entry> files;
  for (const fs::directory_entry& de : fs::directory_iterator(bucket, ec)) files.push_back(de);
  auto has_entry = [&](const std::string& id) {
    return fs::exists(bucket / (id + ".entry"), ec) && !fs::is_symlink(bucket / (id + ".entry"), ec);
  };
  for (const fs::directory_entry& de : files) {
    const std::string name = de.path().filename().string();
    const bool regular = de.is_regular_file(ec) && !de.is_symlink(ec);
    const std::string id = name.substr(0, std::min<std::size_t>(32, name.size()));
    const std::string rest = name.size() > 32 ? name.substr(32) : "";
    const bool ours = is_hex32(id) && id.compare(0, 2, prefix) == 0;
    if (!regular) {
      c.foreign.push_back(file_info(de, de.is_symlink(ec) ? "symbolic link" : "not a regular file"));
    } else if (ours && rest == ".entry") {
      CatalogEntry e;
      e.id = id;
      e.path = de.path();
      e.bytes = de.file_size(ec);
      e.last_used = de.last_write_time(ec);
      for (const char* aux : {".lock", ".used"}) {
        const fs::path p = bucket / (id + aux);
        if (fs::is_regular_file(p, ec)) {
          e.aux_bytes += fs::file_size(p, ec);
          if (std::string_view(aux) == ".used") e.last_used = fs::last_write_time(p, ec);
        }
      }
      check_entry_file(e);
      c.entries.push_back(std::move(e));
    } else if (ours && (rest == ".lock" || rest == ".used")) {
      if (!has_entry(id)) c.orphans.push_back(file_info(de, "no entry for this " + rest.substr(1) + " file"));
    } else if (ours && rest.rfind(".entry.tmp.", 0) == 0) {
      c.temp_files.push_back(file_info(de, "temp file of an unfinished publish"));
    } else {
      c.foreign.push_back(file_info(de, ours ? "unknown suffix '" + rest + "'" : "not a cache entry name"));
    }
  }
}

}  // namespace

std::uint64_t Catalog::entry_bytes() const {
  std::uint64_t n = 0;
  for (const CatalogEntry& e : entries) n += e.bytes + e.aux_bytes;
  return n;
}

std::uint64_t Catalog::total_bytes() const {
  std::uint64_t n = entry_bytes();
  for (const auto* list : {&quarantined, &temp_files, &orphans, &foreign})
    for (const CatalogFile& f : *list) n += f.bytes;
  return n;
}

Catalog scan_cache(const fs::path& dir) {
  Catalog c;
  c.dir = dir;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return c;
  if (!fs::is_directory(dir, ec)) throw EnvironmentError("cache directory '" + dir.string() + "' is not a directory");
  c.exists = true;
  fs::directory_iterator top(dir, ec);
  if (ec) throw EnvironmentError("cannot read cache directory '" + dir.string() + "': " + ec.message());
  for (const fs::directory_entry& de : top) {
    const std::string name = de.path().filename().string();
    const bool is_dir = de.is_directory(ec) && !de.is_symlink(ec);
    if (name == "entries" && is_dir) {
      for (const fs::directory_entry& b : fs::directory_iterator(de.path(), ec)) {
        const std::string bname = b.path().filename().string();
        const bool hex2 = bname.size() == 2 && is_hex32(bname + std::string(30, '0'));
        if (hex2 && b.is_directory(ec) && !b.is_symlink(ec)) scan_bucket(b.path(), c);
        else c.foreign.push_back(file_info(b, "not an entry bucket (entries/<2 hex digits>/)"));
      }
    } else if (name == "quarantine" && is_dir) {
      for (const fs::directory_entry& q : fs::directory_iterator(de.path(), ec)) c.quarantined.push_back(file_info(q));
    } else if ((name == "stats.json" || name == "stats.lock") && de.is_regular_file(ec)) {
      // moejit's persistent counters
    } else if (name.rfind("stats.json.tmp.", 0) == 0) {
      c.temp_files.push_back(file_info(de, "temp file of an unfinished stats update"));
    } else {
      c.foreign.push_back(file_info(de, "not part of the cache layout"));
    }
  }
  std::sort(c.entries.begin(), c.entries.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  auto by_path = [](const CatalogFile& a, const CatalogFile& b) { return a.path < b.path; };
  for (auto* list : {&c.quarantined, &c.temp_files, &c.orphans, &c.foreign}) std::sort(list->begin(), list->end(), by_path);
  return c;
}

const CatalogEntry& find_entry(const Catalog& catalog, const std::string& id_or_prefix) {
  std::string want = id_or_prefix;
  for (char& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (want.size() < 4 || want.size() > 32 || !is_hex32(want + std::string(32 - want.size(), '0')))
    throw UsageError("entry id '" + id_or_prefix + "': expected 4 to 32 hex digits (see moejit-cache ls)");
  const CatalogEntry* found = nullptr;
  for (const CatalogEntry& e : catalog.entries) {
    if (e.id.compare(0, want.size(), want) != 0) continue;
    if (found) throw UsageError("entry id '" + id_or_prefix + "' is ambiguous: " + found->id + ", " + e.id + ", ...");
    found = &e;
  }
  if (!found) throw UsageError("no entry '" + id_or_prefix + "' in " + catalog.dir.string());
  return *found;
}

double age_seconds(FileTime t) {
  const auto d = FileTime::clock::now() - t;
  return std::max(0.0, std::chrono::duration<double>(d).count());
}

std::string format_time(FileTime t) {
  const auto sys = std::chrono::time_point_cast<std::chrono::seconds>(
      t - FileTime::clock::now() + std::chrono::system_clock::now());
  const std::time_t tt = std::chrono::system_clock::to_time_t(sys);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

}  // namespace moejit::tools
