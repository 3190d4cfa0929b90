// Runtime slow path: single-flight resolution of a key to a compiled kernel,
// via disk cache or NVRTC.
#include <chrono>

#include "codegen/kernel_source.hpp"
#include "cache/cache_admin.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "moejit/error.hpp"
#include "runtime/runtime_impl.hpp"
#include "util/logging.hpp"

namespace moejit {

using runtime::KernelSlot;
using runtime::KeySlot;
using runtime::SlotState;

KernelSource Runtime::Impl::generate(const SpecKey& key) const {
  return options.generator ? options.generator(key) : codegen::generate(key, tuning);
}

namespace {

// Why 120 s: an NVRTC compile of a large GEMM takes seconds; a peer holding the
// lock longer than this is stuck, and compiling a duplicate is harmless.
constexpr std::chrono::milliseconds kEntryLockTimeout{120000};

std::shared_ptr<const CompiledKernel> from_entry(const Hash128& address, cache::Entry&& e) {
  auto k = std::make_shared<CompiledKernel>();
  k->content_hash = address;
  k->lowered_name = std::move(e.header.lowered_name);
  k->cubin = std::move(e.cubin);
  k->nvrtc_log = std::move(e.header.nvrtc_log);
  k->resources = e.header.resources;
  k->launch = e.header.launch;
  k->compile_ms = 0.0;
  k->origin = CompiledKernel::Origin::disk;
  k->persisted = true;
  return k;
}

}  // namespace

KernelSlot* Runtime::Impl::find_ready(const SpecKey& key, const Hash128& key_hash) const noexcept {
  std::shared_lock lock(map_mu);
  auto it = keys.find(key_hash);
  if (it == keys.end()) return nullptr;
  for (const auto& slot : it->second) {
    if (slot->key == key)
      return slot->flight.state.load(std::memory_order_acquire) == SlotState::ready ? slot->kernel : nullptr;
  }
  return nullptr;
}

const std::string& Runtime::Impl::nvrtc_version_text() {
  std::call_once(nvrtc_once, [&] {
    try {
      if (test_no_nvrtc) throw DriverError("libnvrtc not found (RuntimeAccess::pretend_nvrtc_missing)");
      nvrtc_version = compiler::nvrtc_version_text();
      if (pack && pack->manifest().nvrtc_version != nvrtc_version) {
        pack_problem = "AOT pack " + pack->path().string() + " refused: " +
                       pack->mismatch(cache::library_version(), nvrtc_version, std::nullopt);
        util::logger()->warn("{}; it is not used (kernels come from the cache directory or NVRTC)", pack_problem);
        pack.reset();
      }
    } catch (const DriverError&) {
      // Why: a node that only loads prebuilt cubins needs no NVRTC. The content
      // address contains the NVRTC version; without libnvrtc we take the one the
      // pack was built with, else the one last recorded in the cache directory
      // (<dir>/nvrtc_version). Entries are still fully verified; a miss then
      // needs NVRTC and fails with the DriverError naming libnvrtc.
      std::optional<std::string> assumed;
      if (pack) assumed = pack->manifest().nvrtc_version;
      else if (disk) assumed = cache::read_recorded_nvrtc_version(disk->dir());
      if (assumed) {
        nvrtc_version = *assumed;
        nvrtc_assumed = true;
        util::logger()->info("libnvrtc not available: looking kernels up as NVRTC {} (from {})", nvrtc_version,
                             pack ? "the AOT pack" : "the cache directory");
      } else {
        nvrtc_error = std::current_exception();
      }
    } catch (...) {
      nvrtc_error = std::current_exception();
    }
  });
  if (nvrtc_error) std::rethrow_exception(nvrtc_error);
  return nvrtc_version;
}

KernelSlot* Runtime::Impl::resolve(const SpecKey& key, const Hash128& key_hash, CompiledKernel::Origin& origin) {
  origin = CompiledKernel::Origin::memory;
  std::shared_ptr<KeySlot> ks;
  bool owner = false;
  {
    std::unique_lock lock(map_mu);
    auto& vec = keys[key_hash];
    for (const auto& s : vec)
      if (s->key == key) ks = s;
    if (!ks) {
      ks = std::make_shared<KeySlot>();
      ks->key = key;
      vec.push_back(ks);
      owner = true;
    }
  }
  if (!owner) {
    ks->flight.wait();  // rethrows the owner's error
    return ks->kernel;
  }

  try {
    if (sealed.load(std::memory_order_acquire)) on_miss_after_seal(key);
    KernelSource src = generate(key);
    cache::AddressPayload payload = cache::make_payload(src, key.target, nvrtc_version_text());
    const Hash128 address = payload.address();

    std::shared_ptr<KernelSlot> kslot;
    bool kowner = false;
    {
      std::unique_lock lock(map_mu);
      auto& entry = kernels[address];
      if (!entry) {
        entry = std::make_shared<KernelSlot>();
        entry->address = address;
        kowner = true;
      }
      kslot = entry;
    }
    if (!kowner) {
      kslot->flight.wait();
    } else {
      try {
        kslot->kernel = obtain(key, src, payload, address, origin);
        kslot->flight.finish(SlotState::ready);
      } catch (...) {
        {
          std::unique_lock lock(map_mu);
          if (auto it = kernels.find(address); it != kernels.end() && it->second == kslot) kernels.erase(it);
        }
        kslot->flight.finish(SlotState::failed, std::current_exception());
        throw;
      }
    }
    ks->kernel = kslot.get();
    ks->flight.finish(SlotState::ready);
    return ks->kernel;
  } catch (...) {
    {
      std::unique_lock lock(map_mu);
      if (auto it = keys.find(key_hash); it != keys.end()) {
        auto& vec = it->second;
        std::erase(vec, ks);
        if (vec.empty()) keys.erase(it);
      }
    }
    ks->flight.finish(SlotState::failed, std::current_exception());
    throw;
  }
}

std::shared_ptr<const CompiledKernel> Runtime::Impl::load_from_pack(const Hash128& address,
                                                                    const cache::AddressPayload& payload,
                                                                    const std::string& key_text) {
  if (!pack) return nullptr;
  cache::Pack::Lookup l = pack->load(address, &payload);
  if (l.status == cache::Pack::Status::hit) {
    Stats d;
    d.disk_hits = 1;
    d.pack_hits = 1;
    record(d, Flush::batched);
    util::logger()->debug("pack hit {} for key {}", address.hex(), key_text);
    return from_entry(address, std::move(*l.entry));
  }
  if (l.status == cache::Pack::Status::bad) {
    // Why no quarantine: the pack is read-only and shared; the directory
    // overlay takes over for this kernel.
    if (!pack_bad_warned.exchange(true))
      util::logger()->warn("AOT pack {}: entry {} is bad ({}); using the cache directory / NVRTC for it",
                           pack->path().string(), address.hex(), l.reason);
  }
  return nullptr;
}

std::shared_ptr<const CompiledKernel> Runtime::Impl::load_from_disk(const Hash128& address,
                                                                    const cache::AddressPayload& payload,
                                                                    const std::string& key_text) {
  if (!disk) return nullptr;
  cache::LoadResult r = disk->load(address, payload);
  Stats d;
  if (r.status == cache::LoadStatus::hit) {
    disk->touch(address);
    d.disk_hits = 1;
    record(d, Flush::batched);
    util::logger()->debug("disk hit {} for key {}", address.hex(), key_text);
    return from_entry(address, std::move(*r.entry));
  }
  if (r.status == cache::LoadStatus::quarantined) {
    d.quarantined = 1;
    record(d, Flush::now);
  }
  return nullptr;
}

std::shared_ptr<const CompiledKernel> Runtime::Impl::find_cached(const SpecKey& key, CompiledKernel::Origin& origin) {
  KernelSource src = generate(key);
  cache::AddressPayload payload = cache::make_payload(src, key.target, nvrtc_version_text());
  const Hash128 address = payload.address();
  {
    std::shared_lock lock(map_mu);
    if (auto it = kernels.find(address);
        it != kernels.end() && it->second->flight.state.load(std::memory_order_acquire) == SlotState::ready) {
      origin = CompiledKernel::Origin::memory;
      return it->second->kernel;
    }
  }
  const std::string key_text = key.to_text();
  origin = CompiledKernel::Origin::disk;
  if (auto k = load_from_pack(address, payload, key_text)) return k;
  return load_from_disk(address, payload, key_text);
}

CompiledLookup Runtime::lookup_cached(const SpecKey& key) {
  CompiledLookup out;
  if (runtime::KernelSlot* slot = impl_->find_ready(key, key.hash())) {
    out.kernel = slot->kernel;
    out.origin = CompiledKernel::Origin::memory;
    return out;
  }
  out.kernel = impl_->find_cached(key, out.origin);
  return out;
}

std::shared_ptr<const CompiledKernel> Runtime::Impl::obtain(const SpecKey& key, const KernelSource& src,
                                                            const cache::AddressPayload& payload,
                                                            const Hash128& address, CompiledKernel::Origin& origin) {
  const std::string key_text = key.to_text();

  if (auto k = load_from_pack(address, payload, key_text)) {
    origin = CompiledKernel::Origin::disk;
    return k;
  }
  if (!disk) {
    origin = CompiledKernel::Origin::compiled;
    return compile_and_publish(key, key_text, src, payload, address);
  }
  auto try_disk = [&] { return load_from_disk(address, payload, key_text); };
  if (auto k = try_disk()) {
    origin = CompiledKernel::Origin::disk;
    return k;
  }
  // Why lock then look again: another process may be compiling this very entry;
  // waiting for its publish is cheaper than compiling a duplicate. The lock is an
  // optimization only: without it both compile and the last rename wins.
  cache::FileLock lock = disk->lock_entry(address, kEntryLockTimeout);
  if (lock.locked()) {
    if (auto k = try_disk()) {
      origin = CompiledKernel::Origin::disk;
      return k;
    }
  }
  Stats d;
  d.disk_misses = 1;
  record(d, Flush::batched);
  origin = CompiledKernel::Origin::compiled;
  return compile_and_publish(key, key_text, src, payload, address);
}

std::shared_ptr<const CompiledKernel> Runtime::Impl::compile_and_publish(const SpecKey& key,
                                                                         const std::string& key_text,
                                                                         const KernelSource& src,
                                                                         const cache::AddressPayload& payload,
                                                                         const Hash128& address) {
  compiler::CompileOutput out;
  try {
    if (test_no_nvrtc || nvrtc_assumed)
      throw DriverError("libnvrtc not found: kernel for key " + key_text +
                        " is neither in the AOT pack nor in the cache directory, and compiling it needs NVRTC");
    out = compiler::compile(src, key.target, key_text);
  } catch (const CompileError&) {
    Stats d;
    d.compile_failures = 1;
    record(d, Flush::now);
    throw;
  }
  util::logger()->debug("compiled key {} in {:.1f} ms: {} cubin bytes, {} registers, spills {}/{} bytes (store/load), {}",
                        key_text, out.compile_ms, out.cubin.size(), out.resources.registers,
                        out.resources.spill_store_bytes, out.resources.spill_load_bytes, src.config_text);

  auto k = std::make_shared<CompiledKernel>();
  k->content_hash = address;
  k->lowered_name = out.lowered_name;
  k->nvrtc_log = out.log;
  k->resources = out.resources;
  k->launch = src.launch;
  k->compile_ms = out.compile_ms;
  k->origin = CompiledKernel::Origin::compiled;

  Stats d;
  d.compiles = 1;
  d.compile_ms_total = out.compile_ms;
  if (disk) {
    cache::Entry e;
    e.header.payload = payload;
    e.header.key_text = key_text;
    e.header.lowered_name = out.lowered_name;
    e.header.launch = src.launch;
    e.header.resources = out.resources;
    e.header.compile_ms = out.compile_ms;
    e.header.created_unix = static_cast<std::int64_t>(std::time(nullptr));
    e.header.nvrtc_log = out.log;
    e.cubin = out.cubin;
    try {
      disk->publish(address, e);
      k->persisted = true;
      after_publish(address);
    } catch (const std::exception& ex) {
      // Why not fail: the kernel is compiled and correct; only persistence failed
      // (disk full, read-only directory). Serve from memory.
      d.publish_failures = 1;
      if (!publish_warned.exchange(true))
        util::logger()->warn("cannot write cache entry ({}); kernels stay in memory only", ex.what());
      else
        util::logger()->debug("cannot write cache entry ({})", ex.what());
    }
  }
  k->cubin = std::move(out.cubin);
  record(d, Flush::now);
  return k;
}

void Runtime::Impl::after_publish(const Hash128& address) noexcept {
  try {
    if (!nvrtc_version_recorded.exchange(true) && !nvrtc_assumed)
      cache::record_nvrtc_version(disk->dir(), nvrtc_version);
    if (!max_bytes) return;
    cache::PruneOptions o;
    o.max_bytes = max_bytes;
    o.keep = address;
    o.temp_max_age = options.temp_max_age;
    const cache::PruneReport r = cache::prune(disk->dir(), o);
    if (r.removed_entries) {
      Stats d;
      d.evicted = r.removed_entries;
      record(d, Flush::batched);
      util::logger()->debug("size cap {} bytes: evicted {} least recently used entries ({} bytes){}", *max_bytes,
                            r.removed_entries, r.removed_bytes,
                            r.skipped_locked ? fmt::format(", skipped {} in use", r.skipped_locked) : std::string());
    }
  } catch (...) {
  }
}

}  // namespace moejit
