#pragma once
// The AOT pack of a prewarm plan: one immutable file holding every kernel the
// plan can launch (format: docs/cache-format.md), what `moejit-prewarm --pack`
// writes. A node mounts it with RuntimeOptions::pack or $MOEJIT_CACHE_PACK and
// compiles nothing.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "moejit/prewarm.hpp"
#include "moejit/runtime.hpp"

namespace moejit {

// What a pack written by write_aot_pack holds.
struct AotPackSummary {
  std::size_t keys = 0;       // enumerate_keys(plan, runtime.gemm_tuning()).size()
  std::string target;         // "sm_90a"
  std::string nvrtc_version;  // of the kernels in it ("13.0")
};

// Writes the kernels of enumerate_keys(plan, runtime.gemm_tuning()) to `out` (crash-safe publish,
// then mode 0444), compiling or loading each through `runtime` first (run
// prewarm() before to compile on a thread pool). Returns the number of keys.
// `out` is checked before any kernel is produced: it must not be a directory,
// and its folder must exist (none is created) and be writable.
// Throws InvalidArgument (invalid plan; `out` empty, a directory, or in a
// folder that does not exist or cannot be written, naming the path),
// CompileError / DriverError (a kernel cannot be produced: nothing is
// written), Error (I/O, naming the path).
std::size_t write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out);
// The same with the manifest's plan description given as one JSON object
// (`moejit-cache ls --pack` prints it; empty = the plan's own fields), and
// what was written.
AotPackSummary write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out,
                              std::string_view plan_json);

// One kernel entry of a pack, as read_aot_pack verified it.
struct AotPackEntryInfo {
  std::string id;              // content address, 32 lowercase hex digits
  std::uint64_t bytes = 0;     // stored size of the entry in the pack
  bool ok = false;             // checksum and entry format verified
  std::string problem;         // why not, when !ok
  std::uint64_t cubin_bytes = 0;  // when ok
  std::string key;                // the key it was compiled for (SpecKey::to_text), when ok
  int registers = 0;              // per thread (ptxas), when ok
};

// A pack's manifest and its entries, for listing (`moejit-cache ls --pack`).
struct AotPackInfo {
  std::string moejit_version;  // of the library that wrote it ("0.1.0")
  std::string nvrtc_version;   // of its kernels ("13.0")
  std::string target;          // "sm_90a"
  std::int64_t created_unix = 0;  // seconds since 1970-01-01 UTC
  std::string plan_json;          // the plan description, one JSON object
  std::size_t keys = 0;           // keys the pack covers
  std::vector<AotPackEntryInfo> entries;  // in the pack's index order
};

// Opens and reads the pack at `pack`, verifying every entry (a corrupt entry
// is listed with ok = false and its problem, not thrown). Throws Error
// "AOT pack <path>: <reason>" when the file cannot be opened or its prefix,
// manifest or index is invalid.
AotPackInfo read_aot_pack(const std::filesystem::path& pack);

// What export_aot_pack wrote.
struct AotPackExport {
  std::size_t entries = 0;  // kernels in the pack
  std::size_t found = 0;    // verified entries in the directory (others: another target, NVRTC or library version)
  std::string target;        // of the pack
  std::string nvrtc_version;
  std::vector<std::string> skipped;  // corrupt entries of the directory, one line each
};

// Writes every verified kernel of the cache directory `cache_dir` that this
// library version built for `target` (empty: the first entry's target) with
// one NVRTC version (the first entry's) to a pack at `out` (crash-safe
// publish, then mode 0444); the pack's keys are the keys each entry was first
// compiled for (`moejit-cache export`). `out` is checked before the directory
// is read. Throws InvalidArgument (`out` empty, a directory, in a folder that
// does not exist or cannot be written, naming the path; no usable entry in
// `cache_dir`, naming it and the target), Error (I/O, naming the path).
AotPackExport export_aot_pack(const std::filesystem::path& cache_dir, const std::filesystem::path& out,
                              std::string_view target);

}  // namespace moejit
