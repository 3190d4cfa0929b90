#pragma once
// Kernel launch with programmatic stream serialization (programmatic dependent
// launch): the kernel may start while the previous launch on the stream
// drains, and waits in-kernel (pdl_wait, kernels/common.cuh) before it reads
// memory an earlier launch writes. The MoE layer's routing, GEMMs and combine
// launch this way.
#include "driver/cuda_api.hpp"
#include "moejit/runtime.hpp"

namespace moejit::ops {

// Enqueues kernel k on grid (gx, gy, gz) with its launch contract's block and
// dynamic shared memory, passing args (cuLaunchKernelEx kernelParams). Throws
// DriverError.
void launch_pdl(const KernelRef& k, unsigned gx, unsigned gy, unsigned gz, void** args, CUstream stream);

}  // namespace moejit::ops
