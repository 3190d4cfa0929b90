#pragma once
// One launch of a kernel from the Runtime with programmatic stream
// serialization (driver/programmatic_launch.hpp), its block size and dynamic
// shared memory from the kernel's launch contract. params: the kernel's
// parameter struct (kernel_params.hpp); map: its second parameter, a TMA
// tensor map, or null (one parameter). Why programmatic: it hides the launch
// latency between the layer's kernels (route and combine are mostly that at
// small T). Throws DriverError.
#include "driver/programmatic_launch.hpp"
#include "moejit/runtime.hpp"

namespace moejit::ops {

inline void launch_kernel(const KernelRef& k, unsigned gx, unsigned gy, void* params, CUstream stream, unsigned gz = 1,
                          const CUtensorMap* map = nullptr) {
  void* args[] = {params, const_cast<CUtensorMap*>(map)};
  driver::launch_programmatic(k.function, {gx, gy, gz, k.launch.block_threads, k.launch.dynamic_smem_bytes}, stream,
                              args);
}

}  // namespace moejit::ops
