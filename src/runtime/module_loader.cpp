// Runtime: per-context module loading of a compiled kernel.
#include "moejit/error.hpp"
#include "runtime/runtime_impl.hpp"

namespace moejit {

CUfunction Runtime::Impl::function_in_current_context(runtime::KernelSlot& slot) {
  const driver::CudaApi& cu = driver::cuda();
  CUcontext ctx = nullptr;
  MOEJIT_CU_CHECK(cu.cuCtxGetCurrent(&ctx));
  if (!ctx) ctx = driver::ensure_context(0);

  std::uint32_t n = slot.loaded_count.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i)
    if (slot.loaded[i].context.load(std::memory_order_relaxed) == ctx) return slot.loaded[i].function;

  std::lock_guard lock(slot.load_mu);
  n = slot.loaded_count.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i)
    if (slot.loaded[i].context.load(std::memory_order_relaxed) == ctx) return slot.loaded[i].function;
  const CompiledKernel& k = *slot.kernel;
  if (n == runtime::kMaxContexts)
    throw DriverError("kernel " + k.lowered_name + " is already loaded in " + std::to_string(runtime::kMaxContexts) +
                      " CUDA contexts, the most one Runtime supports");

  CUmodule module = nullptr;
  CUfunction function = nullptr;
  MOEJIT_CU_CHECK(cu.cuModuleLoadData(&module, k.cubin.data()));
  try {
    MOEJIT_CU_CHECK(cu.cuModuleGetFunction(&function, module, k.lowered_name.c_str()));
    // Why: above 48 KB of static plus dynamic shared memory a kernel must opt
    // in, or the launch fails; opting in for any dynamic size is harmless.
    if (k.launch.dynamic_smem_bytes > 0)
      MOEJIT_CU_CHECK(cu.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(k.launch.dynamic_smem_bytes)));
  } catch (const DriverError& e) {
    (void)cu.cuModuleUnload(module);
    throw DriverError(std::string(e.what()) + " (kernel " + k.lowered_name + ")");
  }
  runtime::LoadedModule& m = slot.loaded[n];
  m.module = module;
  m.function = function;
  m.context.store(ctx, std::memory_order_relaxed);
  slot.loaded_count.store(n + 1, std::memory_order_release);
  bump(StatId::module_loads);
  return function;
}

}  // namespace moejit
