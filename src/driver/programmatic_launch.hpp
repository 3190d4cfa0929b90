#pragma once
// One kernel launch with programmatic stream serialization
// (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): the kernel may start
// before the previous launch on the stream finishes, and must wait in-kernel
// (griddepcontrol.wait, pdl_wait in kernels/common.cuh) before it touches
// memory that launch writes. The layer's kernels, the FP8 decode GEMM and the
// FP8 quantizers launch this way, so each kernel's prologue overlaps the
// previous one's tail. Throws DriverError.
#include "driver/cuda_api.hpp"

namespace moejit::driver {

struct ProgrammaticLaunch {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_threads = 0;
  unsigned dynamic_smem_bytes = 0;
};

void launch_programmatic(CUfunction function, const ProgrammaticLaunch& l, CUstream stream, void** args);

}  // namespace moejit::driver
