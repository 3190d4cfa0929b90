#pragma once
// The AOT pack of a prewarm plan: one immutable file holding every kernel the
// plan can launch (format: docs/cache-format.md), what `moejit-prewarm --pack`
// writes. A node mounts it with RuntimeOptions::pack or $MOEJIT_CACHE_PACK and
// compiles nothing.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

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

}  // namespace moejit
