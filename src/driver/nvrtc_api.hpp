#pragma once
// NVRTC, opened with dlopen on first use: libnvrtc.so.13, else libnvrtc.so.12,
// else libnvrtc.so. Including this header includes nvrtc.h (types only).
//
//   const auto& rtc = moejit::driver::nvrtc();           // throws DriverError if absent
//   MOEJIT_NVRTC_CHECK(rtc.nvrtcCreateProgram(...));     // throws DriverError on failure
#include <nvrtc.h>

#include <string>

namespace moejit::driver {

#define MOEJIT_NVRTC_SYMBOLS(X)                                                     \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram) \
  X(nvrtcCompileProgram) X(nvrtcAddNameExpression) X(nvrtcGetLoweredName)          \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) \
  X(nvrtcGetPTXSize) X(nvrtcGetPTX)

struct NvrtcApi {
#define MOEJIT_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  MOEJIT_NVRTC_SYMBOLS(MOEJIT_NVRTC_MEMBER)
#undef MOEJIT_NVRTC_MEMBER
  std::string library;  // the file name that was opened
  int major = 0, minor = 0;  // nvrtcVersion
  // "13.0": part of every cache entry's content address.
  std::string version_text() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// The NVRTC table; thread-safe once-init. Throws DriverError
// "libnvrtc not found (tried libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so): ..."
// or naming a missing symbol.
const NvrtcApi& nvrtc();

// True when libnvrtc loads with every symbol. Never throws.
bool nvrtc_available() noexcept;

[[noreturn]] void throw_nvrtc_error(nvrtcResult r, const char* call, const char* file, int line);

inline void check_nvrtc(nvrtcResult r, const char* call, const char* file, int line) {
  if (r != NVRTC_SUCCESS) [[unlikely]]
    throw_nvrtc_error(r, call, file, line);
}

}  // namespace moejit::driver

#define MOEJIT_NVRTC_CHECK(expr) ::moejit::driver::check_nvrtc((expr), #expr, __FILE__, __LINE__)
