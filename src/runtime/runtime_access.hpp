#pragma once
// Internal access to a Runtime's in-memory cache, for the microbenchmark and
// tests (not part of the public API).
#include "cache/entry_format.hpp"
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
  // TEST-ONLY: behave as on a machine without libnvrtc (lookups use the NVRTC
  // version of the pack or the directory; compiles throw DriverError). Call
  // before the first lookup.
  static void pretend_nvrtc_missing(Runtime& rt) noexcept;
  // Why the configured AOT pack is not used ("" when mounted or none configured).
  static std::string pack_problem(const Runtime& rt);
  static bool pack_mounted(const Runtime& rt) noexcept;
  // The cache entry (header + cubin) of key's kernel, as it would be published:
  // compiles or loads it first (errors as Runtime::compiled()). For packs.
  static cache::Entry entry_for(Runtime& rt, const SpecKey& key);
};

}  // namespace moejit
