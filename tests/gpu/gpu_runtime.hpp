#pragma once
// One Runtime for the whole GPU suite, over a fresh cache directory.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "moejit/runtime.hpp"

namespace moejit::testing {

inline Runtime& gpu_runtime() {
  static Runtime rt([] {
    RuntimeOptions o;
    o.cache_dir = std::filesystem::temp_directory_path() / ("moejit-gpu-suite-" + std::to_string(::getpid()));
    return o;
  }());
  return rt;
}

// Options of a memory-only Runtime whose keys run under `tuning` (tests that
// compare kernel choices of one key).
inline RuntimeOptions tuned_runtime_options(const GemmTuning& tuning) {
  RuntimeOptions o;
  o.use_disk_cache = false;
  o.gemm_tuning = tuning;
  return o;
}

}  // namespace moejit::testing
