#include "driver/nvrtc_api.hpp"

#include "driver/dynlib.hpp"
#include "moejit/error.hpp"
#include "util/env.hpp"

#include <cstdlib>

namespace moejit::driver {
namespace {

struct Loaded {
  NvrtcApi api;
  std::string error;
};

Loaded load() {
  Loaded out;
  const std::optional<std::string> chosen = util::env::nvrtc_library();
  OpenedLibrary lib = chosen ? open_first({chosen->c_str()}) : open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
  if (!lib.handle) {
    // One message that says where the loader looked and how to fix it (the
    // tools print it once, however many kernels needed NVRTC).
    const char* ld_path = std::getenv("LD_LIBRARY_PATH");
    const std::string searched =
        std::string("LD_LIBRARY_PATH (") + (ld_path && *ld_path ? ld_path : "unset") +
        "), the ld.so cache (/etc/ld.so.cache) and /lib, /usr/lib";
    if (chosen)
      out.error = "libnvrtc not found: MOEJIT_NVRTC_LIBRARY=" + *chosen + " cannot be opened (searched " + searched +
                  " for a bare name; dlopen: " + lib.error + "); fix: point MOEJIT_NVRTC_LIBRARY at libnvrtc.so.13 "
                  "of a CUDA toolkit, or unset it";
    else
      out.error = "libnvrtc not found: searched " + searched +
                  " for libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so; fix: install the CUDA NVRTC runtime "
                  "(e.g. /usr/local/cuda/lib64/libnvrtc.so.13), then add its folder to LD_LIBRARY_PATH or set "
                  "MOEJIT_NVRTC_LIBRARY=/path/to/libnvrtc.so.13";
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
