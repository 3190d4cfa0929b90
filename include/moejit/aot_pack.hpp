#pragma once
// The AOT pack of a prewarm plan: one immutable file holding every kernel the
// plan can launch (format: docs/cache-format.md), what `moejit-prewarm --pack`
// writes. A node mounts it with RuntimeOptions::pack or $MOEJIT_CACHE_PACK and
// compiles nothing.
#include <cstddef>
#include <filesystem>

#include "moejit/prewarm.hpp"
#include "moejit/runtime.hpp"

namespace moejit {

// Writes the kernels of enumerate_keys(plan, runtime.gemm_tuning()) to `out` (crash-safe publish,
// then mode 0444), compiling or loading each through `runtime` first (run
// prewarm() before to compile on a thread pool). Returns the number of keys.
// Throws InvalidArgument (invalid plan), CompileError / DriverError (a kernel
// cannot be produced: nothing is written), Error (I/O, naming the path).
std::size_t write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out);

}  // namespace moejit
