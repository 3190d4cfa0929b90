#pragma once
// The kernel runtime: specialization key -> compiled, loaded kernel.
// Lookup order: in-memory cache -> disk cache (or AOT pack) -> NVRTC compile.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "moejit/key.hpp"
#include "moejit/kernel_source.hpp"
#include "moejit/types.hpp"

namespace moejit {

enum class SealPolicy : std::uint8_t {
  warn,    // a miss after seal() compiles, is counted and logged as a warning
  strict,  // a miss after seal() throws SealedMiss naming the key
};

struct RuntimeOptions {
  // Cache directory; empty = $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit,
  // else ~/.cache/moejit.
  std::filesystem::path cache_dir;
  // false: in-memory only (nothing read from or written to disk).
  bool use_disk_cache = true;
  // unset = strict if MOEJIT_STRICT=1, else warn.
  std::optional<SealPolicy> seal_policy;
  // Maps a key to the NVRTC translation unit to compile. Empty = the library's
  // kernel families (codegen::generate). Tests and embedders may inject their own;
  // it must be deterministic (equal keys -> equal KernelSource) and thread-safe.
  // Throwing InvalidArgument means "this key cannot be implemented".
  std::function<KernelSource(const SpecKey&)> generator;
};

// Resource report of one compiled kernel, parsed from ptxas's -v output.
struct ResourceReport {
  int registers = -1;
  int spill_store_bytes = -1, spill_load_bytes = -1;
  int stack_frame_bytes = -1;
  int shared_bytes = -1;  // static shared memory
};

// A compiled kernel, independent of any GPU (what prewarm produces).
struct CompiledKernel {
  Hash128 content_hash;        // address of the disk entry
  std::string lowered_name;    // mangled kernel name in the cubin
  std::string cubin;           // bytes
  std::string nvrtc_log;       // may be empty
  ResourceReport resources;
  LaunchContract launch;
  double compile_ms = 0.0;     // 0 when loaded from disk
  enum class Origin : std::uint8_t { memory, disk, compiled } origin = Origin::compiled;
};

// compiled() plus how this particular call obtained the kernel.
struct CompiledLookup {
  std::shared_ptr<const CompiledKernel> kernel;
  // memory: already in this Runtime (including: another thread or another key
  // with the same content address produced it); disk: verified disk entry;
  // compiled: NVRTC ran for this call.
  CompiledKernel::Origin origin = CompiledKernel::Origin::memory;
};

// A kernel loaded in the current CUDA context, ready for cuLaunchKernel.
struct KernelRef {
  CUfunction function = nullptr;
  LaunchContract launch;
};

struct RuntimeStats {
  std::uint64_t memory_hits = 0, disk_hits = 0, compiles = 0, compile_failures = 0;
  std::uint64_t quarantined = 0, misses_after_seal = 0, module_loads = 0;
  double compile_ms_total = 0.0;
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Process-wide runtime built from the environment on first use (thread-safe).
  static Runtime& global();

  // Compiled kernel for key: memory -> disk -> compile. Needs NVRTC only on a
  // compile; needs no GPU. Thread-safe and single-flight: N threads asking for
  // one missing kernel cause one compile. Throws InvalidArgument (key cannot be
  // implemented; message names the field), CompileError, DriverError (NVRTC missing).
  std::shared_ptr<const CompiledKernel> compiled(const SpecKey& key);
  // compiled() that also says where the kernel came from (for prewarm reports).
  // Same errors as compiled().
  CompiledLookup lookup_compiled(const SpecKey& key);

  // The kernel loaded in the calling thread's current CUDA context (loaded once
  // per context; when no context is current, device 0's primary context is
  // retained and made current). At most 8 contexts per kernel. On a hit: no allocation, no string formatting, no lock
  // contention beyond a shared lock. Throws as compiled(), plus DriverError,
  // plus SealedMiss after seal() under the strict policy.
  KernelRef get(const SpecKey& key);

  // After seal(), every kernel not yet in memory is a "miss after seal":
  // counted, logged as a warning naming the key, or thrown (strict policy).
  void seal();
  bool sealed() const noexcept;
  SealPolicy seal_policy() const noexcept;

  RuntimeStats stats() const;
  const std::filesystem::path& cache_dir() const noexcept;

 private:
  friend struct RuntimeAccess;  // internal: src/runtime/runtime_access.hpp (bench, tests)
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moejit
