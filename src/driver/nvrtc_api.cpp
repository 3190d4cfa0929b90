#include "driver/nvrtc_api.hpp"

#include "driver/dynlib.hpp"
#include "moejit/error.hpp"

namespace moejit::driver {
namespace {

struct Loaded {
  NvrtcApi api;
  std::string error;
};

Loaded load() {
  Loaded out;
  OpenedLibrary lib = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
  if (!lib.handle) {
    out.error = "libnvrtc not found (tried libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so): "
                "install the CUDA NVRTC runtime to compile kernels (dlopen: " + lib.error + ")";
    return out;
  }
  out.api.library = lib.name;
#define MOEJIT_NVRTC_LOAD(sym)                                                             \
  out.api.sym = reinterpret_cast<decltype(out.api.sym)>(find_symbol(lib.handle, #sym)); \
  if (!out.api.sym) {                                                                      \
    out.error = lib.name + " lacks symbol " #sym " (NVRTC older than 11.2?)";               \
    return out;                                                                             \
  }
  MOEJIT_NVRTC_SYMBOLS(MOEJIT_NVRTC_LOAD)
#undef MOEJIT_NVRTC_LOAD
  if (nvrtcResult r = out.api.nvrtcVersion(&out.api.major, &out.api.minor); r != NVRTC_SUCCESS) {
    out.error = lib.name + ": nvrtcVersion failed: " + out.api.nvrtcGetErrorString(r);
  }
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const NvrtcApi& nvrtc() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw DriverError(l.error);
  return l.api;
}

bool nvrtc_available() noexcept { return loaded().error.empty(); }

void throw_nvrtc_error(nvrtcResult r, const char* call, const char* file, int line) {
  const Loaded& l = loaded();
  std::string text = l.api.nvrtcGetErrorString ? l.api.nvrtcGetErrorString(r)
                                               : "nvrtcResult " + std::to_string(static_cast<int>(r));
  throw DriverError(std::string(call) + " failed: " + text + " [" + file + ":" + std::to_string(line) + "]");
}

}  // namespace moejit::driver
