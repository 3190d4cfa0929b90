// Runtime: construction, public entry points, seal, statistics.
#include "moejit/runtime.hpp"

#include "moejit/error.hpp"
#include "runtime/runtime_impl.hpp"
#include "util/env.hpp"
#include "util/logging.hpp"

namespace moejit {

Runtime::Impl::Impl(RuntimeOptions opts) : options(std::move(opts)) {
  util::logger();  // Why first: the logger must outlive this object at static destruction.
  cache_dir = options.cache_dir.empty() ? util::env::cache_dir() : options.cache_dir;
  policy = options.seal_policy.value_or(util::env::strict() ? SealPolicy::strict : SealPolicy::warn);
  if (options.gemm_tuning) check_gemm_tuning(*options.gemm_tuning);
  tuning = options.gemm_tuning ? *options.gemm_tuning : util::env::gemm_tuning();
  if (options.use_disk_cache) open_disk_cache();
  mount_pack();
}

void Runtime::Impl::open_disk_cache() {
  const bool shared = options.allow_shared_cache.value_or(util::env::cache_allow_shared());
  const cache::Ownership ownership = shared ? cache::Ownership::shared : cache::Ownership::private_only;
  max_bytes = options.max_cache_bytes ? (*options.max_cache_bytes ? options.max_cache_bytes : std::nullopt)
                                      : util::env::cache_max_bytes();
  auto refuse = [&](const std::string& why) {
    util::logger()->warn(
        "cache directory {} refused: {}; kernels stay in memory only (to share a cache directory between "
        "users on purpose, set MOEJIT_CACHE_ALLOW_SHARED=1 or RuntimeOptions::allow_shared_cache)",
        cache_dir.string(), why);
  };
  bool read_only = options.read_only_cache;
  try {
    cache::DiskCache d(cache_dir, ownership);
    // Why before creating anything in it: a directory others can write to may
    // already hold a planted entry; refuse it outright.
    if (std::string why = cache::layout_trust_problem(cache_dir, ownership); !why.empty()) return refuse(why);
    if (!read_only) {
      try {
        d.ensure_layout();
      } catch (const std::exception& e) {
        // A cache that exists but cannot be completed (read-only file system,
        // an image layer, no permission) still serves its entries.
        std::error_code ec;
        if (!std::filesystem::is_directory(d.entries_dir(), ec)) throw;
        read_only = true;
        util::logger()->warn("cache directory {} is not writable ({}); serving its entries read-only, new kernels "
                             "stay in memory only",
                             cache_dir.string(), e.what());
      }
      // Checked again: ensure_layout may have found (not created) a folder.
      if (std::string why = cache::layout_trust_problem(cache_dir, ownership); !why.empty()) return refuse(why);
    }
    d.set_read_only(read_only);
    disk.emplace(std::move(d));
  } catch (const std::exception& e) {
    util::logger()->warn("cache directory unusable ({}); kernels stay in memory only", e.what());
    return;
  }
  if (read_only) return;
  try {
    const std::size_t swept = cache::sweep_temp_files(cache_dir, options.temp_max_age);
    if (swept) util::logger()->info("removed {} leftover temp file(s) of interrupted publishes in {}", swept, cache_dir.string());
  } catch (...) {
  }
}

void Runtime::Impl::mount_pack() {
  std::filesystem::path path = options.pack;
  if (path.empty()) {
    auto env = util::env::cache_pack();
    if (!env) return;
    path = *env;
  }
  try {
    auto p = cache::Pack::open(path);
    // The NVRTC version is checked on first use (nvrtc_version_text): opening
    // libnvrtc here would cost every process that never looks a kernel up.
    std::optional<std::string> target;
    if (!options.pack_target.empty()) target = options.pack_target;
    pack_problem = p->mismatch(cache::library_version(), std::nullopt, target);
    if (pack_problem.empty()) {
      pack = std::move(p);
      util::logger()->info("AOT pack {} mounted: {} kernels, {} keys, target {}, NVRTC {}", path.string(),
                           pack->head().index.size(), pack->manifest().keys.size(), pack->manifest().target,
                           pack->manifest().nvrtc_version);
      return;
    }
    pack_problem = "AOT pack " + path.string() + " refused: " + pack_problem;
  } catch (const std::exception& e) {
    pack_problem = e.what();
  }
  util::logger()->warn("{}; it is not used (kernels come from the cache directory or NVRTC)", pack_problem);
}

Runtime::Impl::~Impl() {
  flush_stats();
  if (process_global || counts[static_cast<std::size_t>(StatId::module_loads)].load() == 0) return;
  // Why skip for the global runtime: at process exit the driver may already be
  // torn down; the OS reclaims modules anyway.
  try {
    const driver::CudaApi& cu = driver::cuda();
    for (auto& [addr, slot] : kernels) {
      std::uint32_t n = slot->loaded_count.load(std::memory_order_acquire);
      for (std::uint32_t i = 0; i < n; ++i) (void)cu.cuModuleUnload(slot->loaded[i].module);
    }
  } catch (...) {
  }
}

void Runtime::Impl::on_miss_after_seal(const SpecKey& key) {
  Stats d;
  d.misses_after_seal = 1;
  record(d, Flush::now);
  if (policy == SealPolicy::strict)
    throw SealedMiss("kernel requested after seal() was not prewarmed (strict seal policy): key " + key.to_text());
  util::logger()->warn("miss after seal: kernel for key {} was not prewarmed; compiling it now", key.to_text());
}

void Runtime::Impl::record(const Stats& delta, Flush flush) {
  for (StatId id : kAllStats)
    if (delta[id] != 0) bump(id, delta[id]);
  Stats take;
  {
    std::lock_guard lock(pending_mu);
    compile_ms_total += delta.compile_ms_total;
    pending += delta;
    // Why batch: a disk hit costs microseconds; a stats update costs a lock, a
    // read and a rename. Compiles and anomalies flush at once.
    if (flush == Flush::batched && ++pending_events < 32) return;
    take = pending;
    pending = {};
    pending_events = 0;
  }
  if (disk && !disk->read_only()) cache::add_stats(disk->dir(), take);
}

void Runtime::Impl::flush_stats() noexcept {
  Stats take;
  {
    std::lock_guard lock(pending_mu);
    take = pending;
    pending = {};
    pending_events = 0;
  }
  if (disk && !disk->read_only()) cache::add_stats(disk->dir(), take);
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Runtime::~Runtime() = default;

Runtime& Runtime::global() {
  // Why a function-local static object (not a leaked pointer): its destructor
  // flushes the batched statistics at exit; modules are left to the OS.
  static Runtime rt{RuntimeOptions{}};
  static const bool marked = (rt.impl_->process_global = true);
  (void)marked;
  return rt;
}

std::shared_ptr<const CompiledKernel> Runtime::compiled(const SpecKey& key) { return lookup_compiled(key).kernel; }

CompiledLookup Runtime::lookup_compiled(const SpecKey& key) {
  const Hash128 h = key.hash();
  CompiledLookup out;
  if (runtime::KernelSlot* slot = impl_->find_ready(key, h)) {
    impl_->bump(StatId::memory_hits);
    out.kernel = slot->kernel;
    out.origin = CompiledKernel::Origin::memory;
    return out;
  }
  runtime::KernelSlot* slot = impl_->resolve(key, h, out.origin);
  if (out.origin == CompiledKernel::Origin::memory) impl_->bump(StatId::memory_hits);
  out.kernel = slot->kernel;
  return out;
}

KernelRef Runtime::get(const SpecKey& key) {
  const Hash128 h = key.hash();
  runtime::KernelSlot* slot = impl_->find_ready(key, h);
  if (slot) [[likely]] {
    impl_->bump(StatId::memory_hits);
  } else {
    CompiledKernel::Origin origin;
    slot = impl_->resolve(key, h, origin);
    if (origin == CompiledKernel::Origin::memory) impl_->bump(StatId::memory_hits);
  }
  return KernelRef{impl_->function_in_current_context(*slot), slot->kernel->launch};
}

void Runtime::seal() {
  impl_->sealed.store(true, std::memory_order_release);
  impl_->flush_stats();
}
bool Runtime::sealed() const noexcept { return impl_->sealed.load(std::memory_order_acquire); }
SealPolicy Runtime::seal_policy() const noexcept { return impl_->policy; }
const std::filesystem::path& Runtime::cache_dir() const noexcept { return impl_->cache_dir; }

const GemmTuning& Runtime::gemm_tuning() const noexcept { return impl_->tuning; }

KernelSource Runtime::source(const SpecKey& key) const { return impl_->generate(key); }

std::filesystem::path default_cache_dir() { return util::env::cache_dir(); }

RuntimeStats Runtime::stats() const {
  RuntimeStats s;
  for (StatId id : kAllStats) s[id] = impl_->counts[static_cast<std::size_t>(id)].load(std::memory_order_relaxed);
  std::lock_guard lock(impl_->pending_mu);
  s.compile_ms_total = impl_->compile_ms_total;
  return s;
}

}  // namespace moejit
