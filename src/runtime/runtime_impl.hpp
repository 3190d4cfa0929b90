#pragma once
// Runtime's private state (include/moejit/runtime.hpp declares Runtime::Impl).
#include <array>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

#include "cache/cache_stats.hpp"
#include "cache/disk_cache.hpp"
#include "cache/pack.hpp"
#include "moejit/runtime.hpp"
#include "moejit/stats.hpp"
#include "runtime/slots.hpp"

namespace moejit {

struct Runtime::Impl {
  explicit Impl(RuntimeOptions options);
  ~Impl();

  RuntimeOptions options;
  std::filesystem::path cache_dir;
  GemmTuning tuning;  // options.gemm_tuning, else MOEJIT_GEMM_TUNE
  SealPolicy policy = SealPolicy::warn;
  std::optional<cache::DiskCache> disk;  // unset: in-memory only (option, or unusable directory)
  bool process_global = false;

  std::atomic<bool> sealed{false};
  std::atomic<bool> publish_warned{false};

  // AOT pack mounted in front of the directory (null: none or refused).
  std::shared_ptr<const cache::Pack> pack;
  std::string pack_problem;  // why the configured pack was refused ("" otherwise)
  std::atomic<bool> pack_bad_warned{false};
  std::optional<std::uint64_t> max_bytes;  // size cap of the directory
  std::atomic<bool> nvrtc_version_recorded{false};
  // TEST-ONLY (RuntimeAccess::pretend_nvrtc_missing): behave as on a machine without libnvrtc.
  bool test_no_nvrtc = false;
  bool nvrtc_assumed = false;  // nvrtc_version came from the pack / the directory, not from libnvrtc

  // Maps. Why one shared_mutex for both: lookups take it shared; inserts are rare
  // (once per key / per kernel) and short.
  mutable std::shared_mutex map_mu;
  runtime::KeyMap keys;
  runtime::KernelMap kernels;

  // NVRTC version text, resolved once (needs libnvrtc).
  std::once_flag nvrtc_once;
  std::string nvrtc_version;
  std::exception_ptr nvrtc_error;

  // Counters (Runtime::stats(), indexed by StatId) and the batch of persisted
  // deltas for stats.json.
  std::array<std::atomic<std::uint64_t>, kStatCount> counts{};
  std::mutex pending_mu;
  double compile_ms_total = 0.0;        // under pending_mu
  Stats pending;                        // under pending_mu; flushed to stats.json
  unsigned pending_events = 0;

  // The key's translation unit: options.generator, else the library's
  // families under `tuning`. Throws InvalidArgument for a key it cannot implement.
  KernelSource generate(const SpecKey& key) const;

  // Hot path: the ready KernelSlot for key, or nullptr. No allocation, no
  // formatting; takes map_mu shared.
  runtime::KernelSlot* find_ready(const SpecKey& key, const Hash128& key_hash) const noexcept;

  // Slow path: single-flight resolution of key to a ready KernelSlot.
  // `origin` receives how this call obtained it. Throws as Runtime::compiled().
  runtime::KernelSlot* resolve(const SpecKey& key, const Hash128& key_hash, CompiledKernel::Origin& origin);
  // Runtime::lookup_cached's slow path: nullptr when neither memory, pack nor disk has it.
  std::shared_ptr<const CompiledKernel> find_cached(const SpecKey& key, CompiledKernel::Origin& origin);

  // Per-context CUfunction of a ready slot (loads the module once per context).
  CUfunction function_in_current_context(runtime::KernelSlot& slot);

  void on_miss_after_seal(const SpecKey& key);
  // A counter of this runtime only (memory_hits, module_loads: never persisted). No lock.
  void bump(StatId id, std::uint64_t n = 1) noexcept {
    counts[static_cast<std::size_t>(id)].fetch_add(n, std::memory_order_relaxed);
  }
  // Adds `delta` to this runtime's counters and its persisted counters to the
  // batch for stats.json: written now (Flush::now: compiles and anomalies) or
  // with the 32nd batched event, at seal() and at destruction.
  enum class Flush : bool { batched, now };
  void record(const Stats& delta, Flush flush);
  void flush_stats() noexcept;

 private:
  void open_disk_cache();
  void mount_pack();
  void after_publish(const Hash128& address) noexcept;
  const std::string& nvrtc_version_text();
  std::shared_ptr<const CompiledKernel> load_from_pack(const Hash128& address, const cache::AddressPayload& payload,
                                                       const std::string& key_text);
  std::shared_ptr<const CompiledKernel> load_from_disk(const Hash128& address, const cache::AddressPayload& payload,
                                                       const std::string& key_text);
  std::shared_ptr<const CompiledKernel> obtain(const SpecKey& key, const KernelSource& src,
                                               const cache::AddressPayload& payload, const Hash128& address,
                                               CompiledKernel::Origin& origin);
  std::shared_ptr<const CompiledKernel> compile_and_publish(const SpecKey& key, const std::string& key_text,
                                                            const KernelSource& src,
                                                            const cache::AddressPayload& payload,
                                                            const Hash128& address);
};

}  // namespace moejit
