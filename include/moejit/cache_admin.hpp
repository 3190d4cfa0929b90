#pragma once
// Administration of a cache directory (the layout: docs/cache-format.md), what
// `moejit-cache` is built on: list, read one entry, verify, prune (LRU by the
// last-use stamp), clear, statistics. None of these needs NVRTC or a GPU. Safe
// to run while processes use the cache: entries are replaced by rename and
// deleted by unlink, and a process that has read an entry holds its bytes in
// memory. Sizes are in bytes, times in seconds since the Unix epoch.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/runtime.hpp"
#include "moejit/stats.hpp"

namespace moejit::cache_admin {

// Whose folders and entries a cache directory may hold (docs/cache-format.md,
// "Trust"): the cache loads cubins that run with the process's privileges.
enum class Ownership : std::uint8_t {
  // Every folder owned by the effective user and not writable by group or
  // others, no link below the root, entries owned by the user (the default).
  private_only,
  // Any owner and mode (MOEJIT_CACHE_ALLOW_SHARED=1, RuntimeOptions::allow_shared_cache).
  shared,
};
std::string_view to_string(Ownership);

// The rule a Runtime built without RuntimeOptions::allow_shared_cache applies:
// shared when MOEJIT_CACHE_ALLOW_SHARED is 1 / true / yes / on, else
// private_only. Read on each call. Never throws.
Ownership ownership_from_env() noexcept;

// Why the Runtime would refuse the cache directory `dir`: "" when every folder
// of its layout that exists (the root, entries/, quarantine/, each shard
// folder) is trusted under `ownership`, else "<folder>: <reason>" for the first
// refused one, e.g. "/c/entries: it is a symbolic link". A missing directory
// is "". Follows a link at the root itself. Never throws except bad_alloc.
std::string layout_trust_problem(const std::filesystem::path& dir, Ownership ownership);

// MOEJIT_CACHE_MAX_BYTES, the size cap a Runtime applies (docs/environment.md):
// nullopt when unset, 0 (no cap) or not a size (then with one warning). Never throws.
std::optional<std::uint64_t> max_bytes_from_env() noexcept;

// ---------------------------------------------------------------- entries ----

// The text header of an entry: what its content address was computed from,
// the key that first compiled it, and the compile's results.
struct EntryHeader {
  std::string key_text;              // canonical text of the key that first compiled it
  std::string target;                // "sm_90a"
  std::string nvrtc_version;         // "13.0"
  std::string moejit_version;        // "0.1.0"
  std::string name_expression;       // "moejit::gemm_kernel<...>"
  std::vector<std::string> nvrtc_options;  // exactly as passed to nvrtcCompileProgram
  Hash128 source_hash;               // XXH3-128 of the generated source
  std::uint64_t source_bytes = 0;    // length of the generated source
  std::string lowered_name;          // mangled kernel name in the cubin
  LaunchContract launch;
  ResourceReport resources;          // ptxas -v
  double compile_ms = 0.0;           // NVRTC wall time
  std::int64_t created_unix = 0;     // at publish
  std::string nvrtc_log;
};

// One "<id>.entry" file of entries/<id[0:2]>/.
struct EntryInfo {
  Hash128 address;                    // its content address (the file name)
  std::filesystem::path path;
  std::uint64_t file_bytes = 0;
  std::optional<EntryHeader> header;  // set when the entry is valid
  std::uint64_t cubin_bytes = 0;      // 0 when not valid
  // Why the entry is not valid ("" when it is): every rule a load applies
  // (folders, owner, sizes, checksums of header and body, grammar, address)
  // and the directory's trust (layout_trust_problem).
  std::string problem;
  std::int64_t last_used_unix = 0;    // mtime of the .used stamp, else of the entry
};

// Every entry of `dir`, sorted by address, each fully verified (one entry in
// memory at a time). A missing directory gives an empty list. Never throws
// except bad_alloc.
std::vector<EntryInfo> list_entries(const std::filesystem::path& dir, Ownership ownership = Ownership::private_only);

// A verified entry: its header and its cubin.
struct Entry {
  Hash128 address;    // its content address, recomputed from the header and checked
  EntryHeader header;
  std::string cubin;  // ELF bytes
};
// The entry whose address starts with `id_prefix` (1-32 lowercase hex digits),
// fully verified. Throws InvalidArgument when the prefix is not hex, matches
// no entry, or matches several (the message lists them); Error when the entry
// is corrupt or its directory is not trusted (naming the file and the reason).
Entry read_entry(const std::filesystem::path& dir, std::string_view id_prefix,
                 Ownership ownership = Ownership::private_only);

// ----------------------------------------------------------------- verify ----

enum class ProblemKind : std::uint8_t {
  corrupt,      // an entry that fails verification: bad magic, checksum, size, header, address (reason in message)
  foreign,      // a file or folder the cache did not write
  temp_debris,  // a leftover temp file of an interrupted publish
  untrusted,    // a folder the cache refuses: a link below the root, another owner, writable by others
  // An entry in an older entry format version (docs/cache-format.md,
  // "Versions") that passes every other check (sizes, both checksums, header,
  // address): intact but superseded. A load treats it as a miss: it moves the
  // entry to quarantine and compiles the kernel again at the same address.
  outdated,
  // An entry in a newer entry format version (3 to 255): written by a newer
  // moejit that shares the directory, whose version is part of the entry's
  // address, so this library never looks it up. Only its magic can be
  // checked. A version field above 255, or one on a file that otherwise
  // reads as this library's own entry, is corrupt (a damaged field).
  newer_format,
};
// "corrupt", "foreign", "temp_debris", "untrusted", "outdated", "newer_format".
std::string_view to_string(ProblemKind);
// Whether `kind` is something wrong with the directory: true for corrupt,
// foreign, temp_debris and untrusted; false for outdated and newer_format,
// which verify lists but which make no report unclean (VerifyReport::clean,
// resolved) and no `moejit-cache verify` exit 1.
constexpr bool is_fault(ProblemKind kind) noexcept {
  return kind != ProblemKind::outdated && kind != ProblemKind::newer_format;
}

// One finding of verify: a fault (is_fault) or an entry of another format version.
struct Problem {
  std::filesystem::path path;
  ProblemKind kind = ProblemKind::corrupt;
  std::string message;
  bool repaired = false;  // VerifyAction::repair: moved to quarantine or removed (message says where / why kept)
};

enum class VerifyAction : std::uint8_t {
  report,  // change nothing
  // Quarantine corrupt entries, outdated entries (what a load does with
  // them; they are compiled again on use), foreign files and refused shard
  // folders; remove temp debris older than 10 minutes (younger: kept, the
  // message says why); a refused root, entries/ or quarantine/ is kept
  // (permissions are the owner's to fix); a newer_format entry is kept (the
  // newer moejit that wrote it uses it). Every move is added to stats.json's
  // "quarantined".
  repair,
};

struct VerifyReport {
  std::size_t entries_ok = 0;
  std::vector<Problem> problems;  // faults and entries of other format versions, sorted by path
  std::size_t quarantined = 0;    // repair: problems moved into quarantine/ (outdated entries included)
  // No fault: outdated / newer_format entries may be listed.
  bool clean() const noexcept {
    for (const Problem& p : problems)
      if (is_fault(p.kind)) return false;
    return true;
  }
  // Nothing left to fix: no fault, or every fault repaired.
  bool resolved() const noexcept {
    for (const Problem& p : problems)
      if (is_fault(p.kind) && !p.repaired) return false;
    return true;
  }
};

// Checks every entry fully (as a load would, plus file name == content
// address) and reports anything else found under the directory, applying the
// runtime's trust rules: under Ownership::private_only a refused root,
// entries/ or quarantine/ is one untrusted problem (the entries are not read),
// a refused or linked shard folder is untrusted, an entry owned by another
// user is corrupt. An entry a load refuses for its format version alone is
// outdated (an older version; every other check passes) or newer_format (a
// newer one; but a version field above this library's on an entry that
// otherwise reads as this library's own, its moejit version included, is a
// damaged field: corrupt). Never throws except bad_alloc.
VerifyReport verify(const std::filesystem::path& dir, VerifyAction action = VerifyAction::report,
                    Ownership ownership = Ownership::private_only);

// Every blob and the key coverage of the AOT pack at `pack`. An unopenable
// pack is one problem. Never throws except bad_alloc.
VerifyReport verify_pack(const std::filesystem::path& pack);

// ------------------------------------------------------------------ prune ----

struct PruneOptions {
  std::optional<std::uint64_t> max_bytes;          // keep the most recently used entries within this total
  std::optional<std::chrono::seconds> older_than;  // remove entries not used for this long
  std::chrono::seconds temp_max_age{600};          // temp debris (and orphan stamps / locks) older than this is removed
  // Quarantined files older than this are removed (never read again; kept a
  // while so that a bad entry can be looked at after the warning that named it).
  std::chrono::seconds quarantine_max_age{7 * 86400};
  bool dry_run = false;                            // report what would be removed, remove nothing
};

struct PruneReport {
  std::size_t removed_entries = 0, kept_entries = 0, skipped_locked = 0, removed_temp = 0;
  std::uint64_t removed_bytes = 0, kept_bytes = 0;  // entries
  std::size_t removed_quarantined = 0, kept_quarantined = 0;
  std::uint64_t removed_quarantine_bytes = 0, kept_quarantine_bytes = 0;
  std::size_t removed_folders = 0;  // empty shard folders
};

// Removes quarantined files older than quarantine_max_age; then, while the
// total exceeds max_bytes, quarantined files (oldest first) before entries;
// evicts least-recently-used entries (by the last-use stamp) until the rest
// fits in max_bytes, and entries unused for longer than older_than; removes
// empty shard folders. An entry in use (its lock held) is skipped. What the
// Runtime runs after a publish under a size cap. Never throws except bad_alloc.
PruneReport prune(const std::filesystem::path& dir, const PruneOptions& options);

// ------------------------------------------------------------ clear, stats ----

struct ClearReport {
  std::size_t entries = 0, stamps = 0, locks = 0, temp_files = 0, quarantined = 0, foreign = 0, folders = 0;
  std::uint64_t entry_bytes = 0, quarantine_bytes = 0, foreign_bytes = 0, other_bytes = 0;
  std::size_t failed = 0;  // files that could not be removed
  std::size_t files() const noexcept { return entries + stamps + locks + temp_files + quarantined + foreign; }
  std::uint64_t bytes() const noexcept { return entry_bytes + quarantine_bytes + foreign_bytes + other_bytes; }
};
// Removes everything under entries/ and quarantine/ (entries, stamps, locks,
// temp files, quarantined files, and files the cache did not write, counted
// apart as foreign), the shard folders, and resets the statistics; never the
// directory itself. Only what was removed is counted. Never throws except bad_alloc.
ClearReport clear(const std::filesystem::path& dir);

// Stat-only (no entry is read).
struct CacheSummary {
  std::size_t entries = 0;
  std::uint64_t entry_bytes = 0;
  std::size_t quarantined_files = 0;
  std::uint64_t quarantine_bytes = 0;
  Stats recorded;  // the persisted counters of stats.json (moejit/stats.hpp)
  // One JSON object: the persisted counters by their string ids, then entries,
  // entry_bytes, quarantined_files, quarantine_bytes.
  std::string to_json() const;
};
// A missing directory gives zeros. Never throws except bad_alloc.
CacheSummary summarize(const std::filesystem::path& dir);

// Whether a key's kernel would be served, and if not, why not (what
// `moejit-cache explain` prints): a miss names the nearest entry or covered
// key and the fields that differ, or, for the same kernel compiled under
// other settings (NVRTC, library version, target, options), what differs in
// the content address.
struct ExplainReport {
  bool hit = false;                // the key's kernel is there and verifies
  std::string address;             // its content address (32 hex digits); empty when it cannot be computed
  std::vector<std::string> lines;  // the explanation, one line each, indented as moejit-cache prints it
};
// Against the cache directory `dir` (entries of the owners `ownership`
// trusts). Needs NVRTC for the content address (its version is part of it);
// without it (a DriverError opening libnvrtc) the report compares keys only.
// Throws InvalidArgument when the key is invalid or no kernel implements it
// (naming the field), Error when a kernel source file is missing from the
// build.
ExplainReport explain(const std::filesystem::path& dir, const SpecKey& key,
                      Ownership ownership = ownership_from_env());
// Against the AOT pack `pack`, as that pack's NVRTC version (no NVRTC
// needed). Throws InvalidArgument as explain, Error "AOT pack <path>:
// <reason>" when the pack cannot be opened (and Error as explain).
ExplainReport explain_in_pack(const std::filesystem::path& pack, const SpecKey& key);

}  // namespace moejit::cache_admin
