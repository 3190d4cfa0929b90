#pragma once
// The CUDA Driver API, opened with dlopen("libcuda.so.1") on first use.
//
//   const auto& cu = moejit::driver::cuda();        // throws DriverError if absent
//   MOEJIT_CU_CHECK(cu.cuMemAlloc_v2(&ptr, bytes));  // throws DriverError on failure
//
// Members carry the exact exported symbol names: where cuda.h maps a name to a
// versioned one (#define cuMemAlloc cuMemAlloc_v2), the member is the versioned
// name, because dlsym("cuMemAlloc") would find the legacy 32-bit ABI entry.
// Including this header includes cuda.h (types only; nothing is linked).
#include <cuda.h>

#include <string>

namespace moejit::driver {

// X(member/symbol name). Every symbol is required.
#define MOEJIT_CUDA_SYMBOLS(X)                                                        \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)               \
  X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute)       \
  X(cuDeviceTotalMem_v2) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)  \
  X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize)         \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)                        \
  X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx)   \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuOccupancyMaxActiveClusters)     \
  X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemGetInfo_v2)                                 \
  X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2)                            \
  X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2)             \
  X(cuMemsetD8_v2) X(cuMemsetD32_v2) X(cuMemsetD8Async) X(cuMemsetD32Async)           \
  X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize)                      \
  X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord) X(cuEventSynchronize)        \
  X(cuEventElapsedTime_v2)                                                             \
  X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags)    \
  X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuTensorMapEncodeTiled)

// Function pointers of libcuda, filled once by dlsym.
struct CudaApi {
#define MOEJIT_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
  MOEJIT_CUDA_SYMBOLS(MOEJIT_CUDA_MEMBER)
#undef MOEJIT_CUDA_MEMBER
  std::string library;  // the file name that was opened ("libcuda.so.1")
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The driver table. First call: dlopen + dlsym + cuInit(0), thread-safe, once per
// process (the outcome, success or error, is remembered). Throws DriverError:
// "libcuda.so.1 not found: no NVIDIA driver on this machine (dlopen: ...)", a
// missing symbol (names it), or cuInit's failure (names the CUresult).
const CudaApi& cuda();

// True when libcuda loads, cuInit succeeds and at least one device exists.
// Never throws; for tests and tools that skip visibly without a GPU.
bool gpu_available() noexcept;

// "CUDA_ERROR_INVALID_VALUE (invalid argument)"; works before/without the table.
std::string cu_result_text(CUresult r);

// Throws DriverError "<call> failed: CUDA_ERROR_... (text) [file:line]".
[[noreturn]] void throw_cu_error(CUresult r, const char* call, const char* file, int line);

inline void check_cu(CUresult r, const char* call, const char* file, int line) {
  if (r != CUDA_SUCCESS) [[unlikely]]
    throw_cu_error(r, call, file, line);
}

// Makes a context current on the calling thread if none is: retains device
// `device`'s primary context (once per process and device) and sets it current.
// Returns the current context. Throws DriverError.
CUcontext ensure_context(int device = 0);

}  // namespace moejit::driver

// Checks a CUresult-returning expression; throws moejit::DriverError naming the
// expression text and the CUresult name.
#define MOEJIT_CU_CHECK(expr) ::moejit::driver::check_cu((expr), #expr, __FILE__, __LINE__)
