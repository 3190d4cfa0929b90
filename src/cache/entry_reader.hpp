#pragma once
// Reading one entry file of a cache directory the way every reader must (the
// runtime's load, verify, ls, show, explain, export): each folder below the
// root opened relative to its parent's descriptor with O_NOFOLLOW and checked
// (trust.hpp), the entry opened with O_NOFOLLOW, its owner checked, and its
// 40-byte prefix checked against the file size and kMaxEntryBytes before any
// body is read, so memory never exceeds what a valid entry can need.
#include <cstdint>
#include <filesystem>
#include <string>

#include "cache/content_address.hpp"
#include "cache/entry_format.hpp"
#include "cache/trust.hpp"

namespace moejit::cache {

enum class EntryReadStatus : unsigned char {
  ok,          // bytes hold the whole file; it still has to be decoded (decode_entry)
  absent,      // no entry (or no shard folder)
  bad_folder,  // entries/ or the shard folder is a link, not a directory, or not trusted: folder_path, error
  bad,         // the entry file itself is bad (link, not regular, other owner, sizes, unreadable): error
};

struct EntryRead {
  EntryReadStatus status = EntryReadStatus::absent;
  std::string bytes;
  std::string error;
  std::filesystem::path folder_path;  // bad_folder: the refused folder
  std::uint64_t dev = 0, ino = 0;     // identity of the opened entry file (when it could be opened)
  std::uint32_t format_version = 0;   // the prefix's, once read with the right magic (else 0)
};

// Reads <dir>/entries/<hex[0:2]>/<hex>.entry. `versions`: the format versions
// whose files are read past the prefix (FormatVersions::any only for verify).
EntryRead read_entry_file(const std::filesystem::path& dir, const Hash128& address, Ownership ownership,
                          FormatVersions versions = FormatVersions::current);

}  // namespace moejit::cache
