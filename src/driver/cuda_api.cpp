#include "driver/cuda_api.hpp"

#include <mutex>
#include <string>

#include "driver/dynlib.hpp"
#include "moejit/error.hpp"

namespace moejit::driver {
namespace {

struct Loaded {
  CudaApi api;
  std::string error;  // non-empty: cuda() throws this
};

Loaded load() {
  Loaded out;
  OpenedLibrary lib = open_first({"libcuda.so.1"});
  if (!lib.handle) {
    out.error = "libcuda.so.1 not found: no NVIDIA driver on this machine (dlopen: " + lib.error + ")";
    return out;
  }
  out.api.library = lib.name;
#define MOEJIT_CUDA_LOAD(sym)                                                              \
  out.api.sym = reinterpret_cast<decltype(out.api.sym)>(find_symbol(lib.handle, #sym)); \
  if (!out.api.sym) {                                                                      \
    out.error = lib.name + " lacks symbol " #sym " (driver too old for this build?)";       \
    return out;                                                                             \
  }
  MOEJIT_CUDA_SYMBOLS(MOEJIT_CUDA_LOAD)
#undef MOEJIT_CUDA_LOAD
  if (CUresult r = out.api.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    out.api.cuGetErrorName(r, &name);
    out.error = std::string("cuInit(0) failed: ") + (name ? name : "unknown CUresult") + " (" +
                std::to_string(static_cast<int>(r)) + ")";
    return out;
  }
  out.api.cuDriverGetVersion(&out.api.driver_version);
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();  // Why a magic static: thread-safe once-init, no lock after.
  return l;
}

}  // namespace

const CudaApi& cuda() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw DriverError(l.error);
  return l.api;
}

bool gpu_available() noexcept {
  const Loaded& l = loaded();
  if (!l.error.empty()) return false;
  int count = 0;
  return l.api.cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
}

std::string cu_result_text(CUresult r) {
  const Loaded& l = loaded();
  const char* name = nullptr;
  const char* text = nullptr;
  if (l.api.cuGetErrorName) l.api.cuGetErrorName(r, &name);
  if (l.api.cuGetErrorString) l.api.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void throw_cu_error(CUresult r, const char* call, const char* file, int line) {
  throw DriverError(std::string(call) + " failed: " + cu_result_text(r) + " [" + file + ":" +
                    std::to_string(line) + "]");
}

CUcontext ensure_context(int device) {
  const CudaApi& cu = cuda();
  CUcontext ctx = nullptr;
  MOEJIT_CU_CHECK(cu.cuCtxGetCurrent(&ctx));
  if (ctx) return ctx;
  // Why keep the primary context retained for the process lifetime: releasing it
  // would destroy every module loaded into it while kernels may still be cached.
  static std::mutex m;
  static CUcontext primary[64] = {};
  if (device < 0 || device >= 64) throw DriverError("ensure_context: device " + std::to_string(device) + " out of range");
  {
    std::lock_guard lock(m);
    if (!primary[device]) {
      CUdevice dev = 0;
      MOEJIT_CU_CHECK(cu.cuDeviceGet(&dev, device));
      MOEJIT_CU_CHECK(cu.cuDevicePrimaryCtxRetain(&primary[device], dev));
    }
    ctx = primary[device];
  }
  MOEJIT_CU_CHECK(cu.cuCtxSetCurrent(ctx));
  return ctx;
}

}  // namespace moejit::driver
