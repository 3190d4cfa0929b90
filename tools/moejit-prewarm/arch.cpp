#include "arch.hpp"

#include "driver/cuda_api.hpp"

namespace moejit::tools {

bool have_gpu() noexcept { return driver::gpu_available(); }

Target default_target() noexcept {
  const Target fallback{90, true};
  if (!driver::gpu_available()) return fallback;
  try {
    const driver::CudaApi& cu = driver::cuda();
    CUdevice dev = 0;
    int major = 0, minor = 0;
    if (cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return fallback;
    if (cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
      return fallback;
    // Why 'a' from 9.0 on: wgmma and setmaxnreg exist only in the arch-specific
    // variants, and a cubin for sm_90a runs only on 9.0 anyway.
    return Target{static_cast<std::uint16_t>(10 * major + minor), major >= 9};
  } catch (...) {
    return fallback;
  }
}

}  // namespace moejit::tools
