#pragma once
#include "moejit/types.hpp"

namespace moejit::tools {

// The compute capability of GPU 0 as a target (9.0 -> sm_90a, 8.9 -> sm_89:
// the arch-specific 'a' variant from 9.0 on), or sm_90a when no GPU is usable
// (no driver, no device). Never throws.
Target default_target() noexcept;

// True when a GPU is usable (driver loads, at least one device). Never throws.
bool have_gpu() noexcept;

}  // namespace moejit::tools
