#pragma once
// Versions of the library and of the NVRTC it opens, for reports and `info`
// commands. Neither needs a GPU.
#include <string>
#include <string_view>

namespace moejit {

// The library version, "0.1.0" (part of every cache entry's content address).
std::string_view version() noexcept;

// The NVRTC version libnvrtc reports, "13.0"; "" when libnvrtc cannot be
// opened (nvrtc_error() then says why). Never throws.
std::string nvrtc_version() noexcept;
// Why libnvrtc could not be opened; "" when it can. Never throws.
std::string nvrtc_error() noexcept;

}  // namespace moejit
