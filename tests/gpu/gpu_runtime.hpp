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

}  // namespace moejit::testing
