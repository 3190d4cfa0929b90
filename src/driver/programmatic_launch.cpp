#include "driver/programmatic_launch.hpp"

namespace moejit::driver {

void launch_programmatic(CUfunction function, const ProgrammaticLaunch& l, CUstream stream, void** args) {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = l.grid_x, cfg.gridDimY = l.grid_y, cfg.gridDimZ = l.grid_z;
  cfg.blockDimX = l.block_threads, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = l.dynamic_smem_bytes;
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  MOEJIT_CU_CHECK(cuda().cuLaunchKernelEx(&cfg, function, args, nullptr));
}

}  // namespace moejit::driver
