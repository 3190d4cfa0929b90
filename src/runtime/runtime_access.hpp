#pragma once
// Internal access to a Runtime's in-memory cache, for the microbenchmark and
// tests (not part of the public API).
#include "moejit/runtime.hpp"

namespace moejit {

struct RuntimeAccess {
  // The memory-lookup part of Runtime::get() on a hit: hash the key, shared
  // lock, find by hash, compare the key. Returns the compiled kernel or nullptr
  // (not in memory). No allocation, no formatting, no GPU needed.
  static const CompiledKernel* lookup(const Runtime& rt, const SpecKey& key) noexcept;
  // Number of distinct compiled kernels (content addresses) in memory.
  static std::size_t kernel_count(const Runtime& rt);
  // Writes pending persistent statistics to <cache_dir>/stats.json now.
  static void flush_stats(Runtime& rt) noexcept;
};

}  // namespace moejit
