#include "arch.hpp"

#include "moejit/device.hpp"

namespace moejit::tools {

bool have_gpu() noexcept { return device::available(); }

Target default_target() noexcept {
  const Target fallback{90, true};
  if (!device::available()) return fallback;
  try {
    const int cc = device::device_info(0).compute_capability;
    // Why 'a' from 9.0 on: wgmma and setmaxnreg exist only in the arch-specific
    // variants, and a cubin for sm_90a runs only on 9.0 anyway.
    return Target{static_cast<std::uint16_t>(cc), cc >= 90};
  } catch (...) {
    return fallback;
  }
}

}  // namespace moejit::tools
