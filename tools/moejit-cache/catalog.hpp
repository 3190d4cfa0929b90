#pragma once
// A read-only inventory of one cache directory (layout: src/cache/disk_cache.hpp,
// docs/cache-format.md): every entry with its decoded header or the reason it
// is bad, quarantined files, leftover temp files and foreign files.
// Why here and not in src/cache: only the administration tool needs a full
// scan; the runtime only ever looks up one address.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache/entry_format.hpp"

namespace moejit::tools {

using FileTime = std::filesystem::file_time_type;

struct CatalogEntry {
  std::string id;                 // 32 hex digits (the content address)
  std::filesystem::path path;     // <dir>/entries/<id[0:2]>/<id>.entry
  std::uint64_t bytes = 0;        // entry file size
  std::uint64_t aux_bytes = 0;    // its .lock and .used files
  FileTime last_used{};           // mtime of <id>.used, else of the entry
  std::optional<cache::Entry> entry;  // decoded and checked; unset when bad
  std::string problem;            // why the entry is bad ("" when good)
  bool ok() const { return problem.empty(); }
};

struct CatalogFile {
  std::filesystem::path path;
  std::uint64_t bytes = 0;
  FileTime mtime{};
  std::string note;  // for foreign files: why it does not belong
};

struct Catalog {
  std::filesystem::path dir;
  bool exists = false;
  std::vector<CatalogEntry> entries;      // sorted by id
  std::vector<CatalogFile> quarantined;   // files in quarantine/
  std::vector<CatalogFile> temp_files;    // "<id>.entry.tmp.*" left by an interrupted publish
  std::vector<CatalogFile> orphans;       // .lock / .used without an entry
  std::vector<CatalogFile> foreign;       // anything else
  std::uint64_t total_bytes() const;      // every file listed above
  std::uint64_t entry_bytes() const;      // entries plus their aux files
};

// Scans `dir`: reads and verifies every entry completely (sizes, magic, format
// version, header and body checksums, header grammar, content address of the
// payload == file name). Never follows symbolic links (a link is foreign).
// Throws EnvironmentError when `dir` exists but cannot be read.
Catalog scan_cache(const std::filesystem::path& dir);

// The entry whose id equals `id_or_prefix` or starts with it (>= 4 hex digits).
// Throws UsageError when none or several match.
const CatalogEntry& find_entry(const Catalog& catalog, const std::string& id_or_prefix);

// Seconds between a file time and now (>= 0).
double age_seconds(FileTime t);
// "2026-11-29 14:03" (local time) for a file time.
std::string format_time(FileTime t);

}  // namespace moejit::tools
