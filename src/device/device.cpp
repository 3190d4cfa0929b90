// Public device utilities (moejit/device.hpp) over the lazily opened driver table.
#include "moejit/device.hpp"

#include <string>
#include <utility>

#include "driver/cuda_api.hpp"
#include "moejit/error.hpp"

namespace moejit::device {

bool available() noexcept { return driver::gpu_available(); }

DriverStatus driver_status() noexcept {
  DriverStatus s;
  try {
    const driver::CudaApi& cu = driver::cuda();
    s.loaded = true;
    s.library = cu.library;
    s.driver_version = cu.driver_version;
    if (cu.cuDeviceGetCount(&s.device_count) != CUDA_SUCCESS) s.device_count = 0;
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  return s;
}

DeviceInfo device_info(int index) {
  const driver::CudaApi& cu = driver::cuda();
  int count = 0;
  MOEJIT_CU_CHECK(cu.cuDeviceGetCount(&count));
  if (index < 0 || index >= count)
    throw DriverError("device_info: device index " + std::to_string(index) + " out of range (" +
                      std::to_string(count) + " devices)");
  CUdevice dev = 0;
  MOEJIT_CU_CHECK(cu.cuDeviceGet(&dev, index));
  DeviceInfo info;
  info.index = index;
  char name[256] = {};
  MOEJIT_CU_CHECK(cu.cuDeviceGetName(name, sizeof name - 1, dev));
  info.name = name;
  int major = 0, minor = 0;
  MOEJIT_CU_CHECK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  MOEJIT_CU_CHECK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  info.compute_capability = 10 * major + minor;
  MOEJIT_CU_CHECK(cu.cuDeviceGetAttribute(&info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  size_t bytes = 0;
  MOEJIT_CU_CHECK(cu.cuDeviceTotalMem_v2(&bytes, dev));
  info.total_bytes = bytes;
  return info;
}

CUcontext make_current(int index) { return driver::ensure_context(index); }

void synchronize(CUstream stream) { MOEJIT_CU_CHECK(driver::cuda().cuStreamSynchronize(stream)); }
void synchronize() { MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize()); }

void copy_to_device(DevicePtr dst, const void* src, std::size_t bytes) {
  if (bytes) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyHtoD_v2(dst, src, bytes));
}
void copy_to_host(void* dst, DevicePtr src, std::size_t bytes) {
  if (bytes) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(dst, src, bytes));
}
void copy_device_to_device(DevicePtr dst, DevicePtr src, std::size_t bytes) {
  if (bytes) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoD_v2(dst, src, bytes));
}
void copy_to_device_async(DevicePtr dst, const void* src, std::size_t bytes, CUstream stream) {
  if (bytes) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyHtoDAsync_v2(dst, src, bytes, stream));
}
void copy_to_host_async(void* dst, DevicePtr src, std::size_t bytes, CUstream stream) {
  if (bytes) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoHAsync_v2(dst, src, bytes, stream));
}
void copy_device_to_device_async(DevicePtr dst, DevicePtr src, std::size_t bytes, CUstream stream) {
  if (bytes) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoDAsync_v2(dst, src, bytes, stream));
}

Buffer::Buffer(std::size_t bytes) {
  if (bytes) {
    MOEJIT_CU_CHECK(driver::cuda().cuMemAlloc_v2(&ptr_, bytes));
    bytes_ = bytes;
  }
}
Buffer::~Buffer() { reset(); }
Buffer::Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Buffer::check_range(std::size_t n, std::size_t offset, const char* what) const {
  if (offset > bytes_ || n > bytes_ - offset)
    throw InvalidArgument(std::string("device::Buffer::") + what + ": range [" + std::to_string(offset) + ", " +
                          std::to_string(offset) + "+" + std::to_string(n) + ") exceeds the buffer size " +
                          std::to_string(bytes_));
}
void Buffer::upload(const void* src, std::size_t n, std::size_t offset) {
  check_range(n, offset, "upload");
  copy_to_device(ptr_ + offset, src, n);
}
void Buffer::download(void* dst, std::size_t n, std::size_t offset) const {
  check_range(n, offset, "download");
  copy_to_host(dst, ptr_ + offset, n);
}
void Buffer::fill_bytes(unsigned char value) {
  if (bytes_) MOEJIT_CU_CHECK(driver::cuda().cuMemsetD8_v2(ptr_, value, bytes_));
}
void Buffer::reset() noexcept {
  // Why ignore the result: a destructor must not throw, and a failed free at
  // teardown (context already destroyed) leaves nothing to recover.
  if (ptr_) (void)driver::cuda().cuMemFree_v2(ptr_);
  ptr_ = 0;
  bytes_ = 0;
}

}  // namespace moejit::device
