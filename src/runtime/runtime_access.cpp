#include "runtime/runtime_access.hpp"

#include <ctime>

#include "codegen/kernel_source.hpp"
#include "moejit/error.hpp"
#include "runtime/runtime_impl.hpp"

namespace moejit {

const CompiledKernel* RuntimeAccess::lookup(const Runtime& rt, const SpecKey& key) noexcept {
  runtime::KernelSlot* slot = rt.impl_->find_ready(key, key.hash());
  return slot ? slot->kernel.get() : nullptr;
}

std::size_t RuntimeAccess::kernel_count(const Runtime& rt) {
  std::shared_lock lock(rt.impl_->map_mu);
  return rt.impl_->kernels.size();
}

void RuntimeAccess::flush_stats(Runtime& rt) noexcept { rt.impl_->flush_stats(); }

void RuntimeAccess::pretend_nvrtc_missing(Runtime& rt) noexcept { rt.impl_->test_no_nvrtc = true; }

std::string RuntimeAccess::pack_problem(const Runtime& rt) { return rt.impl_->pack_problem; }

bool RuntimeAccess::pack_mounted(const Runtime& rt) noexcept { return rt.impl_->pack != nullptr; }

cache::Entry RuntimeAccess::entry_for(Runtime& rt, const SpecKey& key) {
  std::shared_ptr<const CompiledKernel> k = rt.compiled(key);
  Runtime::Impl& impl = *rt.impl_;
  const KernelSource src = impl.generate(key);
  cache::Entry e;
  // nvrtc_version is resolved: compiled() above went through nvrtc_version_text().
  e.header.payload = cache::make_payload(src, key.target, impl.nvrtc_version);
  e.header.key_text = key.to_text();
  e.header.lowered_name = k->lowered_name;
  e.header.launch = k->launch;
  e.header.resources = k->resources;
  e.header.compile_ms = k->compile_ms;
  e.header.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  e.header.nvrtc_log = k->nvrtc_log;
  e.cubin = k->cubin;
  if (!(e.header.payload.address() == k->content_hash))
    throw Error("internal: the kernel of key " + e.header.key_text + " does not match its content address");
  return e;
}

}  // namespace moejit
