#pragma once
// The kernel runtime: specialization key -> compiled, loaded kernel.
// Lookup order: in-memory cache -> disk cache (or AOT pack) -> NVRTC compile.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "moejit/key.hpp"
#include "moejit/kernel_source.hpp"
#include "moejit/stats.hpp"
#include "moejit/tuning.hpp"
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

  // Robustness and deployment (docs/cache-format.md, docs/environment.md):
  // AOT pack (one immutable file written by `moejit-prewarm --pack` or
  // `moejit-cache export`) mounted read-only in front of the cache directory,
  // which stays the writable overlay for misses. Empty = $MOEJIT_CACHE_PACK;
  // neither = no pack. A pack of another library version, NVRTC version or
  // target is refused (one warning naming the mismatch; the runtime goes on
  // without it).
  std::filesystem::path pack;
  // Target the pack must hold (e.g. the GPU's "sm_90a"); empty = not checked at
  // mount (a key of another target simply never hits the pack).
  std::string pack_target;
  // Use a cache directory that other users can write to (mode & 022) or that
  // another user owns, and accept entries owned by other users. unset =
  // MOEJIT_CACHE_ALLOW_SHARED=1; otherwise such a directory is refused (one
  // warning saying why; kernels stay in memory) and such entries are quarantined.
  std::optional<bool> allow_shared_cache;
  // Size cap of the cache directory in bytes: after each publish, least recently
  // used entries (by the cache's own last-use stamp) are evicted until the total
  // fits; an entry being read or published elsewhere is skipped. unset =
  // $MOEJIT_CACHE_MAX_BYTES; 0 = no cap.
  std::optional<std::uint64_t> max_cache_bytes;
  // Temp files of interrupted publishes older than this are removed when the
  // runtime opens the cache directory (10 minutes by default).
  std::chrono::seconds temp_max_age{600};
  // Never write to the cache directory (no publish, quarantine, last-use stamp,
  // statistics, temp sweep): a cache baked into a container image or on a
  // read-only export. Its valid entries are served; misses compile into memory
  // (Stats::publish_failures counts them). An existing cache directory
  // whose layout cannot be completed (read-only file system, no permission) is
  // opened this way by itself, with one warning.
  bool read_only_cache = false;

  // Tile overrides of the MXFP4 grouped GEMMs (moejit/tuning.hpp). Every
  // kernel this runtime generates, every MoeLayer on it and prewarm through it
  // use it. unset = MOEJIT_GEMM_TUNE (parsed once per process; empty when
  // unset). The constructor throws InvalidArgument for a number outside 1..16
  // (naming the field and value) or a bad MOEJIT_GEMM_TUNE item (naming it).
  // Ignored by a custom `generator` (it sees only keys).
  std::optional<GemmTuning> gemm_tuning;
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
  // On disk or in the AOT pack, so that a restarted process finds it; false:
  // compiled and kept in memory only (the publish failed: disk full, read-only
  // directory, ...; or no disk cache).
  bool persisted = false;
};

// compiled() plus how this particular call obtained the kernel.
struct [[nodiscard]] CompiledLookup {
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

// This runtime's counters since its construction (moejit/stats.hpp: every
// counter with its stable id; pack_hits are also counted in disk_hits).
using RuntimeStats = Stats;

// The cache directory an empty RuntimeOptions::cache_dir means:
// $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else ~/.cache/moejit (else
// /tmp/moejit-<uid> without HOME). Creates nothing.
std::filesystem::path default_cache_dir();

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
  // The kernel when it is in memory, in the AOT pack or in the cache directory
  // (verified as a load does), else a null `kernel`: never compiles, and writes
  // nothing but what a load writes (a bad entry's quarantine, the last-use
  // stamp; nothing with read_only_cache). For checking that a cache is complete
  // (moejit-prewarm --check). Throws InvalidArgument (key cannot be implemented),
  // DriverError (no libnvrtc and no NVRTC version recorded by the pack or the
  // directory, so no content address can be computed).
  CompiledLookup lookup_cached(const SpecKey& key);

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
  // The translation unit this runtime compiles for key (RuntimeOptions::generator,
  // else the library's kernel families under gemm_tuning()): source, name
  // expression, options, launch contract and the heuristic's config as text
  // (KernelSource::config_text). Needs no NVRTC and no GPU; compiles nothing.
  // Throws InvalidArgument when the key cannot be implemented (naming the field).
  KernelSource source(const SpecKey& key) const;
  // The GEMM tuning this runtime's kernels follow (RuntimeOptions::gemm_tuning
  // or MOEJIT_GEMM_TUNE); empty for the heuristic's own choices.
  const GemmTuning& gemm_tuning() const noexcept;

 private:
  friend struct RuntimeAccess;  // internal: src/runtime/runtime_access.hpp (bench, tests)
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moejit
