// moejit/version.hpp: library and NVRTC versions.
#include "moejit/version.hpp"

#include "cache/content_address.hpp"
#include "driver/nvrtc_api.hpp"

namespace moejit {

std::string_view version() noexcept { return cache::library_version(); }

std::string nvrtc_version() noexcept {
  try {
    return driver::nvrtc_available() ? driver::nvrtc().version_text() : std::string();
  } catch (...) {
    return {};
  }
}

std::string nvrtc_error() noexcept {
  try {
    (void)driver::nvrtc();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace moejit
