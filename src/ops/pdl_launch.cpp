#include "ops/pdl_launch.hpp"

#include "moejit/error.hpp"

namespace moejit::ops {

void launch_pdl(const KernelRef& k, unsigned gx, unsigned gy, unsigned gz, void** args, CUstream stream) {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = gx, cfg.gridDimY = gy, cfg.gridDimZ = gz;
  cfg.blockDimX = k.launch.block_threads, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = k.launch.dynamic_smem_bytes;
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernelEx(&cfg, k.function, args, nullptr));
}

}  // namespace moejit::ops
