#include "runtime/runtime_access.hpp"

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

}  // namespace moejit
